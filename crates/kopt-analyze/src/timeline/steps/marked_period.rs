//! Steps as the period of the kernel sequence that the host marks.

use kopt_model::{ActivityKind, GpuActivity, StepSource, Timeline};

use super::{signature_ids, tiled, Steps};
use crate::timeline::period::{match_share, repeated_period_of_ids};
use crate::timeline::stats::{median, mode};
use crate::timeline::syncs::host_sync_ends;

/// Fewest repeats of a candidate step in the steady tail.
pub(super) const MIN_REPEATS: usize = 3;

/// Most multiples of the sequence's own period tried as the step.
pub(super) const MAX_MULTIPLE: usize = 64;

/// How a candidate period's boundaries are marked: its phase, the share of
/// boundaries marked, the share synced, their mean pause, the mean pause
/// elsewhere.
pub(super) type Marks = (usize, f64, f64, f64, f64);

/// Steps of a program without ranges, as the period of its kernel sequence
/// that the host marks. The period is looked for in the second half of the
/// kernels (warm-up and set-up come first): the shortest period p0 the
/// sequence repeats with, then its multiples. A multiple is the step when
/// its boundaries are marked by the host (nearly every boundary follows a
/// synchronising call, or a host pause several times the pauses inside);
/// of the marked multiples the shortest is taken, unless a longer one's
/// boundaries stand out again (a step's end pauses longer than the layer
/// syncs inside it). Not a layer (its repeats inside a step are not
/// marked), not a sync call (the model's own syncs recur inside a step at
/// the same places, so they mark nothing the step's period does not), and
/// the warm-up before is left to the steady-state cut. None where no
/// multiple is marked: the other detectors follow.
pub(super) fn marked_period_steps(
    t: &Timeline,
    order: &[(&GpuActivity, (i64, i64))],
) -> Option<Steps> {
    let kernels: Vec<usize> = order
        .iter()
        .enumerate()
        .filter(|(_, (a, _))| a.kind == ActivityKind::Kernel)
        .map(|(i, _)| i)
        .collect();
    let n = kernels.len();
    if n < 2 * MIN_REPEATS {
        return None;
    }
    let ids = kernel_ids(order, &kernels);
    let (synced, pause) = host_marks(t, order, &kernels);
    // The steady tail: the second half of the kernels, else a shorter end
    // where a long warm-up (cuDNN's algorithm search launches thousands of
    // trial kernels) fills the first half.
    let mut tail_len = n / 2;
    let found = loop {
        if tail_len < 2 * MIN_REPEATS {
            break None;
        }
        if let Some(f) = marked_period_in(&ids, &synced, &pause, n - tail_len) {
            break Some((n - tail_len, f));
        }
        tail_len /= 2;
    };
    let (tail_from, (period, p0, marks)) = found?;
    let bounds = step_bounds(&ids, &synced, &pause, tail_from, marks.0, period)?;
    let first = step_first_launches(order, &kernels, &bounds);
    let (starts, mut ends) = tiled(order, &first);
    // The last step ends with the last launch before the next period's
    // first kernel (its copies after its kernels too).
    if let (Some(last), Some(&k)) = (ends.last_mut(), bounds.last()) {
        let until = kernels.get(k + period).copied().unwrap_or(order.len());
        *last = order[kernels[k]..until]
            .iter()
            .map(|(_, (s, _))| *s)
            .max()
            .unwrap_or(*last);
    }
    let (source, detail) = describe(period, p0, marks, starts.len());
    Some(Steps {
        source,
        family: None,
        detail,
        starts,
        ends,
        contiguous: true,
        other_threads: None,
    })
}

/// Each kernel's signature as a small integer id, in first-seen order.
fn kernel_ids(order: &[(&GpuActivity, (i64, i64))], kernels: &[usize]) -> Vec<usize> {
    signature_ids(kernels.iter().map(|&i| order[i].0))
}

/// Host marks before each kernel: whether a synchronising call ended since
/// the previous launch, and the host pause since it.
fn host_marks(
    t: &Timeline,
    order: &[(&GpuActivity, (i64, i64))],
    kernels: &[usize],
) -> (Vec<bool>, Vec<f64>) {
    let n = kernels.len();
    let syncs = host_sync_ends(t);
    let launch = |k: usize| order[kernels[k]].1;
    let synced: Vec<bool> = (0..n)
        .map(|k| {
            k > 0 && {
                let (from, to) = (launch(k - 1).0, launch(k).0);
                let i = syncs.partition_point(|s| *s <= from);
                syncs.get(i).is_some_and(|s| *s <= to)
            }
        })
        .collect();
    let pause: Vec<f64> = (0..n)
        .map(|k| {
            if k == 0 {
                0.0
            } else {
                (launch(k).0 - launch(k - 1).1).max(0) as f64
            }
        })
        .collect();
    (synced, pause)
}

/// The kernel index each step starts at: boundaries over the tail at
/// `phase`, every `period` kernels, then back over the lead while a
/// period's kernels still repeat the next period's, and the host mark
/// before them; a partial period at the end dropped. None under
/// `MIN_REPEATS` steps.
fn step_bounds(
    ids: &[usize],
    synced: &[bool],
    pause: &[f64],
    tail_from: usize,
    phase: usize,
    period: usize,
) -> Option<Vec<usize>> {
    let n = ids.len();
    let tail: Vec<usize> = (tail_from + phase..n).step_by(period).collect();
    // The lead's boundaries, collected backwards and put in front once
    // (inserting each at the front was quadratic in one-kernel periods).
    let mut lead: Vec<usize> = Vec::new();
    let mut b = *tail.first()?;
    while b >= period {
        let a = b - period;
        let same = (0..period)
            .filter(|&i| b + i < n && ids[a + i] == ids[b + i])
            .count();
        if (same as f64) < 0.9 * period as f64 {
            break;
        }
        lead.push(a);
        b = a;
    }
    lead.reverse();
    let mut bounds = lead;
    bounds.extend(tail);
    // The first call before them (cuDNN's algorithm search adds its trial
    // kernels there) repeats nothing but starts at a mark too: one more
    // step, which the steady-state cut then takes as warm-up.
    let typical = median(pause[tail_from + 1..].to_vec()).unwrap_or(0.0);
    let pause_mark = (3.0 * typical).max(10_000.0);
    if let Some(&b) = bounds.first() {
        if let Some(m) = (1..b).rev().find(|&k| synced[k] || pause[k] >= pause_mark) {
            if b - m >= period / 2 {
                bounds.insert(0, m);
            }
        }
    }
    // A partial period at the end is not a step.
    if let Some(&last) = bounds.last() {
        if last + period > n {
            bounds.pop();
        }
    }
    (bounds.len() >= MIN_REPEATS).then_some(bounds)
}

/// The launch (index into `order`) each step starts at. A step starts
/// after the longest host pause between the previous period's last kernel
/// and its first: a copy launched after the pause belongs to the step it
/// precedes, one before it (a result copied back) to the step it ends.
fn step_first_launches(
    order: &[(&GpuActivity, (i64, i64))],
    kernels: &[usize],
    bounds: &[usize],
) -> Vec<usize> {
    bounds
        .iter()
        .map(|&k| {
            let to = kernels[k];
            let Some(&from) = k.checked_sub(1).and_then(|j| kernels.get(j)) else {
                return to;
            };
            (from + 1..=to)
                .max_by_key(|&j| (order[j].1 .0 - order[j - 1].1 .1, std::cmp::Reverse(j)))
                .unwrap_or(to)
        })
        .collect()
}

/// How the steps were marked, and the detection's words.
fn describe(period: usize, p0: usize, marks: Marks, repeats: usize) -> (StepSource, String) {
    let (_, _, synced_share, mean, inside) = marks;
    let fmt = kopt_model::format_duration_ns;
    let (source, mark) = if synced_share >= 0.9 {
        (
            StepSource::Sync,
            format!(
                "a synchronising call before {:.0}% of its starts",
                100.0 * synced_share
            ),
        )
    } else {
        (
            StepSource::HostGap,
            format!(
                "a host pause of {} on average before each start, {} elsewhere",
                fmt(mean),
                fmt(inside)
            ),
        )
    };
    let nested = if period != p0 && period.is_multiple_of(p0) {
        format!(
            "; a shorter pattern of {p0} kernels repeats {} times inside it (layers of a step)",
            period / p0
        )
    } else {
        String::new()
    };
    (
        source,
        format!(
            "the repeating sequence of {period} kernels that the host marks ({mark}; {repeats} whole repeats{nested})"
        ),
    )
}

/// The marked period of `ids[tail_from..]` (see `marked_period_steps`):
/// the period, the sequence's own shortest period, and the marks.
pub(super) fn marked_period_in(
    ids: &[usize],
    synced: &[bool],
    pause: &[f64],
    tail_from: usize,
) -> Option<(usize, usize, Marks)> {
    let n = ids.len();
    let p0 = repeated_period_of_ids(&ids[tail_from..]);
    let tail_len = n - tail_from;
    // A pause marks a boundary when it is several times the typical pause.
    let typical = median(pause[tail_from + 1..].to_vec()).unwrap_or(0.0);
    let pause_mark = (3.0 * typical).max(10_000.0);
    // For a period p: the phase whose boundaries are marked best, the share
    // of its boundaries marked (a sync, or a long pause), of them synced,
    // their mean pause, and the mean pause elsewhere.
    let score = |p: usize| -> Marks {
        let mut best = (0usize, -1.0f64, 0.0f64, 0.0f64);
        for ph in 0..p {
            let at: Vec<usize> = (tail_from + ph..n).step_by(p).filter(|&k| k > 0).collect();
            if at.is_empty() {
                continue;
            }
            let share = |f: &dyn Fn(usize) -> bool| {
                at.iter().filter(|&&k| f(k)).count() as f64 / at.len() as f64
            };
            let marked = share(&|k| synced[k] || pause[k] >= pause_mark);
            let synced_share = share(&|k| synced[k]);
            let mean = at.iter().map(|&k| pause[k]).sum::<f64>() / at.len() as f64;
            if (marked, mean) > (best.1, best.3) {
                best = (ph, marked, synced_share, mean);
            }
        }
        let ph = best.0;
        let inside: Vec<f64> = (tail_from + 1..n)
            .filter(|k| (k - tail_from) % p != ph)
            .map(|k| pause[k])
            .collect();
        let inside_mean = inside.iter().sum::<f64>() / inside.len().max(1) as f64;
        (ph, best.1, best.2, best.3, inside_mean)
    };
    // Candidates: the multiples of the sequence's own period, and the
    // spacings of the host's marks (a step of 64 cell steps and a few
    // kernels more is no multiple of the cell's period).
    let mut candidates: Vec<usize> = Vec::new();
    if let Some(p0) = p0 {
        candidates.extend(
            (1..=MAX_MULTIPLE)
                .map(|k| p0 * k)
                .take_while(|p| p * MIN_REPEATS <= tail_len),
        );
    }
    // Syncs alone, long pauses alone, and both: a stray pause (the
    // interpreter's garbage collection) must not hide the syncs' spacing.
    let kinds: [&dyn Fn(usize) -> bool; 3] = [&|k| synced[k], &|k| pause[k] >= pause_mark, &|k| {
        synced[k] || pause[k] >= pause_mark
    }];
    for is_mark in kinds {
        let marks: Vec<usize> = (tail_from + 1..n).filter(|&k| is_mark(k)).collect();
        for lag in 1..=8usize {
            let mut spacing: Vec<usize> = marks.windows(lag + 1).map(|w| w[lag] - w[0]).collect();
            spacing.sort_unstable();
            if let Some((p, share)) = mode(&spacing) {
                if share >= 0.5 && p >= 2 && p * MIN_REPEATS <= tail_len {
                    candidates.push(p);
                }
            }
        }
    }
    candidates.sort_unstable();
    candidates.dedup();
    let mut step: Option<(usize, Marks)> = None;
    for p in candidates {
        // The candidate must repeat as a whole.
        if match_share(&ids[tail_from..], p) >= 0.9 {
            let sc = score(p);
            if sc.1 >= 0.9 {
                match step {
                    None => step = Some((p, sc)),
                    // A longer marked period replaces a shorter one only
                    // where its boundaries pause clearly longer than the
                    // shorter one's: the step's end, not one more layer.
                    Some((q, s0)) if p % q == 0 && sc.3 >= 2.0 * s0.3.max(1.0) => {
                        step = Some((p, sc))
                    }
                    _ => {}
                }
            }
        }
    }
    step.map(|(p, sc)| (p, p0.unwrap_or(p), sc))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `step_bounds`' back extension as it was: each lead boundary
    /// inserted at the front.
    fn lead_by_insertion(
        ids: &[usize],
        tail_from: usize,
        phase: usize,
        period: usize,
    ) -> Vec<usize> {
        let n = ids.len();
        let mut bounds: Vec<usize> = (tail_from + phase..n).step_by(period).collect();
        let Some(&first) = bounds.first() else {
            return bounds;
        };
        let mut b = first;
        while b >= period {
            let a = b - period;
            let same = (0..period)
                .filter(|&i| b + i < n && ids[a + i] == ids[b + i])
                .count();
            if (same as f64) < 0.9 * period as f64 {
                break;
            }
            bounds.insert(0, a);
            b = a;
        }
        bounds
    }

    #[test]
    fn step_bounds_are_what_inserting_at_the_front_gave() {
        // Noisy lead, then a repeating step; no host marks, so the bounds
        // are the back extension with a partial last period dropped.
        let mut seed = 7u64;
        let mut next = |m: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % m
        };
        let mut extended = 0;
        for case in 0..200 {
            let period = 1 + next(6);
            let lead = next(40);
            let n = lead + period * (4 + next(30)) + next(period);
            let ids: Vec<usize> = (0..n)
                .map(|i| {
                    if i < lead {
                        100 + next(5)
                    } else {
                        (i - lead) % period
                    }
                })
                .collect();
            let tail_from = n / 2;
            let phase = (lead + period - tail_from % period) % period;
            let synced = vec![false; n];
            let pause = vec![1_000.0; n];
            let mut want = lead_by_insertion(&ids, tail_from, phase, period);
            if want.last().is_some_and(|&l| l + period > n) {
                want.pop();
            }
            let got = step_bounds(&ids, &synced, &pause, tail_from, phase, period);
            if want.len() >= MIN_REPEATS {
                assert_eq!(got.as_ref(), Some(&want), "case {case}");
                extended += usize::from(want[0] < tail_from);
            } else {
                assert_eq!(got, None, "case {case}");
            }
        }
        assert!(extended > 100, "{extended} cases reach back into the lead");
    }
}
