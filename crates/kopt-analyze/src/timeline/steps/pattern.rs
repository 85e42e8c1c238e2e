//! Steps as the period of the activity sequence alone: no markers, syncs
//! or host gaps.

use kopt_model::{GpuActivity, StepSource};

use super::{signature_ids, tiled, Steps};
use crate::timeline::period::{match_share, repeated_period_of_ids};

pub(super) fn pattern_steps(order: &[(&GpuActivity, (i64, i64))]) -> Option<Steps> {
    let ids = signature_ids(order.iter().map(|(a, _)| *a));
    let inner = repeated_period_of_ids(&ids)?;
    let n = ids.len();
    // An outer period is justified where it repeats clearly better than the
    // inner one (a layer repeats inside a step, the step's ends differ).
    let base = match_share(&ids, inner);
    let mut period = inner;
    if base < 0.99 {
        for m in 2..=64usize {
            let p = inner * m;
            if p * 3 > n {
                break;
            }
            let share = match_share(&ids, p);
            if share >= 0.97 && share >= base + 0.5 * (1.0 - base) {
                period = p;
                break;
            }
        }
    }
    if n / period < 2 {
        return None;
    }
    // The phase: where the host pauses longest between repeats, else so the
    // last repeat is whole (the lead is set-up).
    let gap_before = |i: usize| -> i64 {
        if i == 0 {
            return 0;
        }
        (order[i].1 .0 - order[i - 1].1 .1).max(0)
    };
    let mean_gap = (1..n).map(gap_before).sum::<i64>() as f64 / (n - 1).max(1) as f64;
    let phase = (0..period.min(n))
        .map(|ph| {
            let idx: Vec<usize> = (ph..n).step_by(period).filter(|&i| i > 0).collect();
            let mean =
                idx.iter().map(|&i| gap_before(i)).sum::<i64>() as f64 / idx.len().max(1) as f64;
            (ph, mean)
        })
        .filter(|(_, mean)| *mean > 1.2 * mean_gap + 1_000.0)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map_or(n % period, |(ph, _)| ph);
    let first: Vec<usize> = (phase..n)
        .step_by(period)
        .filter(|i| i + period <= n)
        .collect();
    // Two repeats could be anything (a warm-up and one run): three make a step.
    if first.len() < 3 {
        return None;
    }
    let (starts, mut ends) = tiled(order, &first);
    if let (Some(last), Some(&i)) = (ends.last_mut(), first.last()) {
        *last = order[i..i + period]
            .iter()
            .map(|(_, (s, _))| *s)
            .max()
            .unwrap_or(*last);
    }
    let nested = if period != inner {
        format!(
            "; a shorter pattern of {inner} repeats {} times inside it (layers of a step): the outer period is the step",
            period / inner
        )
    } else {
        String::new()
    };
    Some(Steps {
        source: StepSource::KernelPattern,
        family: None,
        detail: format!(
            "the repeating sequence of {period} GPU activities ({} whole repeats{nested}); no step markers, syncs or host gaps mark steps",
            first.len()
        ),
        starts,
        ends,
        contiguous: true,
        other_threads: None,
    })
}
