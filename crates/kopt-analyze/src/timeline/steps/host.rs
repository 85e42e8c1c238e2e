//! Steps the host marks: synchronising calls, and idle stretches between
//! bursts of launches.

use kopt_model::{GpuActivity, StepSource, Timeline};

use super::{consistent, kernel_counts, tiled, Steps};
use crate::timeline::syncs::host_sync_ends;

pub(super) fn sync_steps(t: &Timeline, order: &[(&GpuActivity, (i64, i64))]) -> Option<Steps> {
    let bounds = host_sync_ends(t);
    if bounds.len() < 3 || order.is_empty() {
        return None;
    }
    // The first activity launched after each boundary starts a segment.
    let mut first: Vec<usize> = vec![0];
    for b in &bounds {
        let i = order.partition_point(|(_, (s, _))| s < b);
        if i < order.len() && first.last() != Some(&i) {
            first.push(i);
        }
    }
    let counts = kernel_counts(order, &first);
    let per = consistent(&counts)?;
    let (starts, ends) = tiled(order, &first);
    Some(Steps {
        source: StepSource::Sync,
        family: None,
        detail: format!(
            "host synchronisation calls ({} segments between synchronising calls, most of {per} kernel(s))",
            starts.len()
        ),
        starts,
        ends,
        contiguous: true,
        other_threads: None,
    })
}

pub(super) fn host_gap_steps(order: &[(&GpuActivity, (i64, i64))]) -> Option<Steps> {
    if order.len() < 6 {
        return None;
    }
    // Host time between the end of one launch and the start of the next.
    let mut gaps: Vec<(i64, usize)> = Vec::with_capacity(order.len());
    let mut reach = order[0].1 .1;
    for (i, (_, (s, e))) in order.iter().enumerate().skip(1) {
        gaps.push(((s - reach).max(0), i));
        reach = reach.max(*e);
    }
    let mut sorted: Vec<i64> = gaps.iter().map(|g| g.0).collect();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    // Natural breaks in the sorted gaps, largest jump first: the first that
    // cuts the launches into alike bursts marks the steps.
    let mut breaks: Vec<(f64, i64)> = (0..(sorted.len() / 2).min(sorted.len().saturating_sub(1)))
        .filter(|&i| sorted[i] >= 10_000)
        .map(|i| (sorted[i] as f64 / sorted[i + 1].max(100) as f64, sorted[i]))
        .filter(|(ratio, _)| *ratio >= 3.0)
        .collect();
    breaks.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (_, threshold) in breaks.into_iter().take(8) {
        let mut first: Vec<usize> = vec![0];
        first.extend(gaps.iter().filter(|g| g.0 >= threshold).map(|g| g.1));
        let counts = kernel_counts(order, &first);
        let Some(per) = consistent(&counts).filter(|p| *p >= 2) else {
            continue;
        };
        let (starts, ends) = tiled(order, &first);
        return Some(Steps {
            source: StepSource::HostGap,
            family: None,
            detail: format!(
                "host idle stretches of {} or more between bursts of launches ({} bursts, most of {per} kernels)",
                kopt_model::format_duration_ns(threshold as f64),
                starts.len()
            ),
            starts,
            ends,
            contiguous: true,
            other_threads: None,
        });
    }
    None
}
