//! The steady state: which steps are warm-up, the window of the rest, and
//! each activity's phase against it.

use std::collections::HashSet;

use kopt_model::{ActivityKind, GpuActivity, StepSource, Timeline};

use super::launches::{launch_spans, launched_at, CallSpans};
use super::stats::{mode, percentile};
use super::steps::{find_steps_with, Steps};

/// A step longer than this many times the median is warm-up (first call,
/// compilation, autotuning, allocator growth).
pub(super) const WARMUP_FACTOR: f64 = 1.5;

/// The steady state: which steps are warm-up, and the window of the rest.
pub(super) struct Steady {
    /// Indices of the steady steps (consecutive).
    pub(super) first: usize,
    pub(super) last: usize,
    /// Step of each activity (index into `Steps`), if any.
    pub(super) step_of: Vec<Option<usize>>,
}

pub(super) fn steady_steps(t: &Timeline, steps: &Steps, calls: &CallSpans) -> Steady {
    let n = steps.starts.len();
    let step_of: Vec<Option<usize>> = t
        .activities
        .iter()
        .map(|a| {
            let at = launched_at(a, calls).0;
            let i = steps.starts.partition_point(|s| *s <= at).checked_sub(1)?;
            let inside = at <= steps.ends[i]
                || (steps.contiguous && steps.starts.get(i + 1).is_some_and(|next| at < *next));
            inside.then_some(i)
        })
        .collect();
    let mut kernels = vec![0usize; n];
    for (a, s) in t.activities.iter().zip(&step_of) {
        if let (Some(i), ActivityKind::Kernel) = (s, a.kind) {
            kernels[*i] += 1;
        }
    }
    let duration = |i: usize| -> f64 {
        let next = steps.starts.get(i + 1).copied().unwrap_or(steps.ends[i]);
        (next.max(steps.ends[i]) - steps.starts[i]) as f64
    };
    // A whole-program trace holds the first call (lazy module loads, cuBLAS
    // handles, autotuning): its first step is warm-up whatever it costs.
    let mut first = usize::from(t.whole_program && n >= 3);
    let rest: Vec<usize> = (first..n).collect();
    let counts: Vec<usize> = rest.iter().map(|&i| kernels[i]).collect();
    let typical = mode(&counts).map_or(0, |m| m.0);
    let durations: Vec<f64> = rest.iter().map(|&i| duration(i)).collect();
    let median_d = percentile(&durations, 0.5);
    while first + 1 < n
        && first < n / 2
        && (duration(first) > WARMUP_FACTOR * median_d || kernels[first] != typical)
    {
        first += 1;
    }
    Steady {
        first,
        last: n - 1,
        step_of,
    }
}

/// The activities of the steady state: those of its steps, and those
/// launched between two of its steps (outside a marker, still in the loop);
/// every activity where no steady state was found.
pub(super) fn steady_activities<'a>(
    t: &'a Timeline,
    steps: Option<&Steps>,
    steady: Option<&Steady>,
    calls: &CallSpans,
) -> Vec<&'a GpuActivity> {
    let mut acts: Vec<&'a GpuActivity> = match (steps, steady) {
        (Some(s), Some(st)) => {
            let from = s.starts[st.first];
            let until = s.ends[st.last];
            t.activities
                .iter()
                .zip(&st.step_of)
                .filter(|(a, k)| {
                    k.is_some_and(|i| i >= st.first && i <= st.last) || {
                        let at = launched_at(a, calls).0;
                        k.is_none() && at >= from && at <= until
                    }
                })
                .map(|(a, _)| a)
                .collect()
        }
        _ => t.activities.iter().collect(),
    };
    if acts.is_empty() {
        acts = t.activities.iter().collect();
    }
    acts
}

/// Where an activity falls against the steady-state window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Start-up: before the loop's first step (the program's set-up, its
    /// input), cut "steps" that run none of the steady state's kernels
    /// included.
    StartUp,
    /// In a warm-up step that was cut (or between two of them).
    Warmup,
    /// A steady step, or between two of them.
    Steady,
    /// After the last steady step.
    After,
}

/// Each activity's phase (in `t.activities` order), with the steps behind it.
pub struct Phases {
    pub phase: Vec<Phase>,
    pub source: StepSource,
    pub steady_steps: usize,
    pub warmup_steps: usize,
}

/// The kernel's identity for matching warm-up to steady steps.
fn kernel_key(a: &GpuActivity) -> (&str, Option<kopt_model::Dim3>, Option<kopt_model::Dim3>) {
    (a.name.as_str(), a.grid, a.block)
}

/// The step the loop starts at: the first that runs any of the steady
/// state's kernels. A cut "step" of none of them (a burst of set-up
/// launches, e.g. the input generated once) is start-up, not warm-up.
fn loop_step(t: &Timeline, st: &Steady) -> usize {
    let in_steady: HashSet<_> = t
        .activities
        .iter()
        .zip(&st.step_of)
        .filter(|(a, k)| {
            a.kind == ActivityKind::Kernel && k.is_some_and(|i| (st.first..=st.last).contains(&i))
        })
        .map(|(a, _)| kernel_key(a))
        .collect();
    // The earliest cut step that runs one, in one pass (a scan of every
    // activity per cut step was quadratic in one-kernel steps).
    t.activities
        .iter()
        .zip(&st.step_of)
        .filter_map(|(a, k)| {
            k.filter(|j| {
                *j < st.first
                    && a.kind == ActivityKind::Kernel
                    && in_steady.contains(&kernel_key(a))
            })
        })
        .min()
        .unwrap_or(st.first)
}

/// The phase of every activity against the steady state the summary uses;
/// None without steps. `Window::phases` gives the same from a window
/// already built.
pub fn phases(t: &Timeline) -> Option<Phases> {
    let spliced = t.spliced();
    let t: &Timeline = &spliced;
    let calls = launch_spans(t);
    let steps = find_steps_with(t, &calls)?;
    let st = steady_steps(t, &steps, &calls);
    Some(phases_of(t, &steps, &st, &calls))
}

/// The phases of `t`'s activities (spliced) from its steps and steady state.
pub(super) fn phases_of(t: &Timeline, steps: &Steps, st: &Steady, calls: &CallSpans) -> Phases {
    let from = steps.starts[st.first];
    let loop_step = loop_step(t, st);
    let first_step = steps.starts[loop_step];
    let until = steps.until(st.last);
    let phase = t
        .activities
        .iter()
        .zip(&st.step_of)
        .map(|(a, k)| match k {
            Some(i) if *i < loop_step => Phase::StartUp,
            Some(i) if *i < st.first => Phase::Warmup,
            Some(_) => Phase::Steady,
            None => {
                let at = launched_at(a, calls).0;
                if at < first_step {
                    Phase::StartUp
                } else if at < from {
                    Phase::Warmup
                } else if at <= until {
                    Phase::Steady
                } else {
                    Phase::After
                }
            }
        })
        .collect();
    Phases {
        phase,
        source: steps.source,
        steady_steps: st.last + 1 - st.first,
        warmup_steps: st.first - loop_step,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::steps::find_steps;
    use crate::timeline::summarize;
    use crate::timeline::synthetic::{forward_passes, kernel, launch};
    use kopt_model::StepSource;

    #[test]
    fn warm_up_steps_are_cut_from_the_window() {
        // 8 steps of 3 kernels with host gaps; the first step is 5x slower (compilation).
        let mut t = Timeline::default();
        let mut c = 1u64;
        let mut at = 1_000_000i64;
        for step in 0..8 {
            for _ in 0..3 {
                t.api_calls.push(launch(at, 2_000, c));
                t.activities.push(kernel(at + 3_000, 2_000, c));
                c += 1;
                at += if step == 0 { 200_000 } else { 3_000 };
            }
            at += 100_000;
        }
        let s = summarize(&t).unwrap();
        let ss = s.steady_state.unwrap();
        // The slow first step's own pauses split it into three bursts of one
        // kernel: all three are warm-up, the 7 alike steps remain.
        assert_eq!(ss.steps, 7, "{}", s.verdict);
        assert!(ss.warmup_steps >= 1 && ss.warmup_ns >= 600_000, "{ss:?}");
        assert_eq!(s.steps.unwrap().source, StepSource::HostGap);
        assert_eq!(s.kernels, 21);
    }

    /// `loop_step` as it was: a scan of every activity per cut step.
    fn loop_step_by_scan(t: &Timeline, st: &Steady) -> usize {
        let in_steady: HashSet<_> = t
            .activities
            .iter()
            .zip(&st.step_of)
            .filter(|(a, k)| {
                a.kind == ActivityKind::Kernel
                    && k.is_some_and(|i| (st.first..=st.last).contains(&i))
            })
            .map(|(a, _)| kernel_key(a))
            .collect();
        (0..st.first)
            .find(|&j| {
                t.activities.iter().zip(&st.step_of).any(|(a, k)| {
                    *k == Some(j)
                        && a.kind == ActivityKind::Kernel
                        && in_steady.contains(&kernel_key(a))
                })
            })
            .unwrap_or(st.first)
    }

    #[test]
    fn the_loop_step_is_found_as_a_scan_per_step_found_it() {
        // Two set-up bursts of kernels of their own, then a slow first
        // step and 7 alike steps of three kernels, host gaps between.
        let mut t = Timeline::default();
        let mut c = 1u64;
        let mut at = 1_000_000i64;
        let bursts = (0..2).map(|b| vec![format!("setup_{b}"); 2]);
        let steps = (0..8).map(|_| (0..3).map(|k| format!("op{k}")).collect::<Vec<_>>());
        for (step, names) in bursts.chain(steps).enumerate() {
            for name in names {
                t.api_calls.push(launch(at, 2_000, c));
                let mut k = kernel(at + 3_000, 2_000, c);
                k.name = name;
                t.activities.push(k);
                c += 1;
                at += if step == 2 { 200_000 } else { 3_000 };
            }
            at += 100_000;
        }
        let cases = [
            t,
            forward_passes(2, 12, 6, 2, 50_000),
            forward_passes(0, 10, 6, 1, 0),
        ];
        let mut seen = (0, 0);
        for t in &cases {
            let calls = launch_spans(t);
            let steps = find_steps(t).unwrap();
            let st = steady_steps(t, &steps, &calls);
            let found = loop_step(t, &st);
            assert_eq!(found, loop_step_by_scan(t, &st), "{}", steps.detail);
            seen = (seen.0.max(found), seen.1.max(st.first - found));
        }
        assert!(
            seen.0 > 0 && seen.1 > 0,
            "start-up and warm-up steps: {seen:?}"
        );
    }
}
