//! Step detection: the repeating unit of work (a training or inference
//! step) from the most trusted evidence a trace holds.

mod host;
mod marked_period;
mod markers;
mod pattern;

use kopt_model::{ActivityKind, GpuActivity, StepSource, Timeline};

use crate::timeline::launches::{launch_spans, launched_at, CallSpans};
use crate::timeline::stats::mode;
use host::{host_gap_steps, sync_steps};
use marked_period::marked_period_steps;
use markers::{nvtx_steps, profiler_steps};
use pattern::pattern_steps;

/// Steps found in a trace, in launch (host) time.
#[derive(Debug, Clone)]
pub struct Steps {
    pub source: StepSource,
    pub family: Option<String>,
    pub detail: String,
    /// Start of each step, sorted.
    pub starts: Vec<i64>,
    /// End of each step: a marker's end, else the next step's start (the
    /// last one's: the launch of its last activity).
    pub ends: Vec<i64>,
    /// True when steps tile the time between them (sync, gaps, pattern):
    /// an activity launched between a step's end and the next start is not lost.
    pub contiguous: bool,
    /// Where step markers of other host threads were left out: a note
    /// saying so.
    pub other_threads: Option<String>,
}

impl Steps {
    /// Where step `i`'s time runs to: the next step's start, at least its
    /// own end (a marker may end after the next begins).
    pub fn until(&self, i: usize) -> i64 {
        self.starts
            .get(i + 1)
            .copied()
            .unwrap_or(self.ends[i])
            .max(self.ends[i])
    }
}

/// The signature of an activity for the period search: kernels by name and
/// launch shape (a first layer with other shapes differs from the next),
/// copies by name. Borrowed: a million launches make no strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Signature<'a> {
    kernel: bool,
    name: &'a str,
    grid: Option<(u32, u32, u32)>,
    block: Option<(u32, u32, u32)>,
}

pub(super) fn signature(a: &GpuActivity) -> Signature<'_> {
    let kernel = a.kind == ActivityKind::Kernel;
    let dims = |d: Option<kopt_model::Dim3>| d.filter(|_| kernel).map(|d| (d.x, d.y, d.z));
    Signature {
        kernel,
        name: &a.name,
        grid: dims(a.grid),
        block: dims(a.block),
    }
}

/// Each activity's signature as a small integer id, in first-seen order.
pub(super) fn signature_ids<'a>(acts: impl Iterator<Item = &'a GpuActivity>) -> Vec<usize> {
    crate::timeline::period::intern(acts.map(signature))
}

/// Segments of launches (activities in launch order) between boundaries
/// must look alike to be steps: at least 3, most with the same kernel count.
pub(super) fn consistent(kernel_counts: &[usize]) -> Option<usize> {
    let nonempty: Vec<usize> = kernel_counts.iter().copied().filter(|c| *c > 0).collect();
    if nonempty.len() < 3 {
        return None;
    }
    let (m, share) = mode(&nonempty)?;
    (share >= 0.6).then_some(m)
}

/// The steps of a timeline, from the most trusted evidence there is:
/// `ProfilerStep#N`, a repeated NVTX range, synchronisation calls, host
/// gaps between bursts of launches, the period of the activity sequence.
pub fn find_steps(t: &Timeline) -> Option<Steps> {
    find_steps_with(t, &launch_spans(t))
}

/// `find_steps` with the launch spans already built.
pub(crate) fn find_steps_with(t: &Timeline, calls: &CallSpans) -> Option<Steps> {
    let mut order: Vec<(&GpuActivity, (i64, i64))> = t
        .activities
        .iter()
        .map(|a| (a, launched_at(a, calls)))
        .collect();
    order.sort_by_key(|(a, (s, _))| (*s, a.start_ns));
    profiler_steps(t)
        .or_else(|| nvtx_steps(t, &order))
        .or_else(|| marked_period_steps(t, &order))
        .or_else(|| sync_steps(t, &order))
        .or_else(|| host_gap_steps(&order))
        .or_else(|| pattern_steps(&order))
}

/// Steps that tile the launches: segment `k` holds the activities from
/// `bounds[k]` up to the next boundary.
pub(super) fn tiled(order: &[(&GpuActivity, (i64, i64))], first: &[usize]) -> (Vec<i64>, Vec<i64>) {
    let starts: Vec<i64> = first.iter().map(|&i| order[i].1 .0).collect();
    let mut ends: Vec<i64> = starts.iter().skip(1).map(|s| s - 1).collect();
    if let Some(&last) = first.last() {
        ends.push(
            order[last..]
                .iter()
                .map(|(_, (s, _))| *s)
                .max()
                .unwrap_or(0),
        );
    }
    (starts, ends)
}

pub(super) fn kernel_counts(order: &[(&GpuActivity, (i64, i64))], first: &[usize]) -> Vec<usize> {
    first
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            let j = first.get(k + 1).copied().unwrap_or(order.len());
            order[i..j]
                .iter()
                .filter(|(a, _)| a.kind == ActivityKind::Kernel)
                .count()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::summarize;
    use crate::timeline::synthetic::{forward_passes, kernel, launch};

    #[test]
    fn a_program_without_ranges_steps_by_its_forward_pass() {
        // Nested layers, the model's own syncs inside the step, warm-up
        // before: the step is the forward pass (6 x 4 + 1 kernels).
        for (sync_every, loop_ns) in [(0, 50_000), (2, 50_000), (1, 200_000), (0, 0)] {
            let t = forward_passes(2, 12, 6, sync_every, loop_ns);
            let s = find_steps(&t).unwrap();
            let kernels_per_step = 25;
            let n = s.starts.len();
            assert!(
                (12..=14).contains(&n),
                "sync every {sync_every}, loop {loop_ns}: {n} steps: {}",
                s.detail
            );
            let sum = summarize(&t).unwrap();
            assert_eq!(
                sum.kernels_per_iteration,
                Some(kernels_per_step as f64),
                "sync every {sync_every}, loop {loop_ns}: {}",
                s.detail
            );
        }
    }

    #[test]
    fn a_long_warm_up_does_not_hide_the_step() {
        // cuDNN's algorithm search: thousands of trial launches before the
        // loop fill more than half of the kernels; the step is still found.
        let mut t = forward_passes(0, 12, 6, 0, 50_000);
        for (c, i) in (1_000_000u64..).zip(0..2_000i64) {
            let at = -50_000_000 + i * 20_000;
            t.api_calls.push(launch(at, 4_000, c));
            let mut k = kernel(at + 5_000, 2_000, c);
            k.name = format!("trial_{}", i % 37);
            t.activities.push(k);
        }
        let sum = summarize(&t).unwrap();
        assert_eq!(sum.kernels_per_iteration, Some(25.0), "{}", sum.verdict);
    }

    #[test]
    fn a_sync_after_every_layer_is_not_a_step() {
        // The model syncs after every layer and the loop pauses no longer
        // than a layer sync: the step is still the period of the sequence
        // (the head kernel makes the layer period repeat imperfectly).
        let t = forward_passes(0, 10, 6, 1, 0);
        let sum = summarize(&t).unwrap();
        assert_eq!(sum.kernels_per_iteration, Some(25.0), "{}", sum.verdict);
    }

    #[test]
    fn a_pattern_of_layers_reports_the_step_it_nests_in() {
        // 10 steps of 6 layers x 4 kernels, evenly spaced (no gaps, syncs or
        // markers); the first layer's GEMM has another grid (input width):
        // the step (24 kernels) is justified, the layer (4) repeats inside it.
        let mut t = Timeline::default();
        let mut c = 1u64;
        for step in 0..10 {
            for layer in 0..6 {
                for k in 0..4 {
                    let at = c as i64 * 10_000;
                    t.api_calls.push(launch(at, 5_000, c));
                    let mut a = kernel(at + 6_000, 3_000, c);
                    a.name = format!("layer_op_{k}");
                    let x = if layer == 0 && k == 0 { 7 } else { 64 };
                    a.grid = Some(kopt_model::Dim3 { x, y: 1, z: 1 });
                    t.activities.push(a);
                    c += 1;
                }
            }
            let _ = step;
        }
        let steps = find_steps(&t).unwrap();
        assert_eq!(steps.source, StepSource::KernelPattern);
        assert_eq!(steps.starts.len(), 10, "{}", steps.detail);
        assert!(
            steps.detail.contains("shorter pattern of 4"),
            "{}",
            steps.detail
        );
        let s = summarize(&t).unwrap();
        assert_eq!(s.kernels_per_iteration, Some(24.0));
    }

    /// #39: a second host thread's step markers (a data loader's, a
    /// logger's) were merged into the step list. Steps come from the thread
    /// with the most markers, and the detail counts the others left out.
    #[test]
    fn steps_come_from_one_host_thread_and_the_others_are_counted() {
        for family in ["kopt_step", "ProfilerStep"] {
            let mut t = Timeline::default();
            let mut c = 1u64;
            let range = |name: String, s: i64, e: i64, thread: u64| kopt_model::Range {
                name,
                start_ns: s,
                end_ns: e,
                thread: Some(thread),
            };
            for step in 0..8i64 {
                let at = step * 100_000;
                for k in 0..3 {
                    let l = at + 1_000 + k * 20_000;
                    t.api_calls.push(launch(l, 5_000, c));
                    t.activities.push(kernel(l + 6_000, 10_000, c));
                    c += 1;
                }
                t.ranges
                    .push(range(format!("{family}#{step}"), at, at + 80_000, 1));
            }
            // A second thread marks 5 ranges of the same family, offset.
            for i in 0..5i64 {
                let at = i * 150_000 + 40_000;
                t.ranges
                    .push(range(format!("{family}#{}", 100 + i), at, at + 30_000, 2));
            }
            let s = find_steps(&t).unwrap();
            assert_eq!(s.starts.len(), 8, "{family}: {}", s.detail);
            assert!(
                s.detail
                    .contains("5 range(s) of 1 other host thread(s) left out"),
                "{family}: {}",
                s.detail
            );
            // The report's note says it in words.
            let note = s.other_threads.as_deref().unwrap_or_default();
            assert!(
                note.contains(&format!("5 \"{family}\" range(s) of 1 other thread(s)")),
                "{note}"
            );
            // One thread only: nothing said.
            t.ranges.retain(|r| r.thread == Some(1));
            let s = find_steps(&t).unwrap();
            assert!(!s.detail.contains("left out"), "{}", s.detail);
            assert_eq!(s.other_threads, None);
        }
    }
}
