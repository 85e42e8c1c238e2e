//! The timeline summary: wall vs GPU-busy time, idle gaps, host launch
//! cost against kernel duration, and whether launch overhead sets the pace.

use kopt_model::{
    ActivityKind, ApiKind, GpuActivity, GraphPrediction, IdleGap, StepSource, Timeline,
    TimelineSummary,
};

use super::launches::trace_start_ns;
use super::replay::graph_prediction;
use super::stats::median;
use super::window::Window;

/// The GPU busy less than this share of the wall time, with kernels no longer
/// than their launches, is launch bound.
pub const LAUNCH_BOUND_BUSY_PCT: f64 = 50.0;
/// Gaps listed in the report.
pub(super) const GAPS_SHOWN: usize = 5;

/// Busy share of the steady-state window above which the GPU, not the
/// launches, sets the pace: no graph capture is recommended.
pub const COMPUTE_BOUND_BUSY_PCT: f64 = 90.0;

/// The timeline's summary, graph replay costed from the device the trace names.
pub fn summarize(t: &Timeline) -> Option<TimelineSummary> {
    let replay = kopt_model::graph_replay_ns_per_kernel(t.device_name.as_deref().unwrap_or(""));
    summarize_with_replay(t, replay)
}

/// The summary with the device model's graph-replay cost per kernel (ns, and
/// whether it came from the per-card table).
pub fn summarize_for_device(t: &Timeline, device: &kopt_model::Device) -> Option<TimelineSummary> {
    summarize_with_replay(t, device_replay(device))
}

fn device_replay(device: &kopt_model::Device) -> (f64, bool) {
    match device.graph_replay_ns_per_kernel {
        Some(ns) => (ns, true),
        None => kopt_model::graph_replay_ns_per_kernel(&device.name),
    }
}

/// Kernels by their short name; copies and sets by what the trace calls them.
pub(super) fn label(a: &kopt_model::GpuActivity) -> String {
    match a.kind {
        kopt_model::ActivityKind::Kernel => kopt_model::kernel_short_name(&a.name),
        _ => a.name.clone(),
    }
}

pub fn summarize_with_replay(t: &Timeline, replay: (f64, bool)) -> Option<TimelineSummary> {
    if t.activities.is_empty() {
        return None;
    }
    // Time between sampled windows was never traced: it is cut, not idle.
    let spliced = t.spliced();
    let w = Window::new(&spliced)?;
    summarize_window(t, &w, replay)
}

/// `summarize_for_device` over a window already built from `t.spliced()`.
pub fn summarize_window_for_device(
    t: &Timeline,
    w: &Window,
    device: &kopt_model::Device,
) -> Option<TimelineSummary> {
    summarize_window(t, w, device_replay(device))
}

/// The summary of window `w`, built from `t.spliced()`.
fn summarize_window(
    unspliced: &Timeline,
    w: &Window,
    replay: (f64, bool),
) -> Option<TimelineSummary> {
    let sampling = sampled_coverage(unspliced);
    let t = w.t;
    let trace_start = trace_start_ns(t)?;
    let (busy, gaps) = busy_and_gaps(&w.acts, w.start);
    let launches = LaunchStats::of(w);
    let busy_pct = 100.0 * busy as f64 / w.wall as f64;
    let iterations = w.iterations();
    let step_detection = w.steps.as_ref().map(|s| kopt_model::StepDetection {
        source: s.source,
        found: s.starts.len() as u64,
        family: s.family.clone(),
        detail: s.detail.clone(),
        other_threads: s.other_threads.clone(),
    });
    let steady_state = steady_state(w, trace_start);
    let graph_prediction = graph_prediction(w, busy, launches.kernels, replay);
    let (launch_bound, verdict) = verdict(
        w,
        &launches,
        busy_pct,
        steady_state.as_ref(),
        step_detection.as_ref(),
        graph_prediction.as_ref(),
    );
    let kernels = launches.kernels;
    // Host syncs and host copies inside the steady steps (#35).
    let windows = w.step_windows();
    let step_ns = w.wall as f64 / windows.len().max(1) as f64;
    let busy_per_step = busy as f64 / windows.len().max(1) as f64;
    let overhead = graph_prediction
        .as_ref()
        .map_or(0.0, |p| p.recorder_overhead_per_step_ns);
    let host_syncs = crate::host_syncs::summarize(
        t,
        &windows,
        &crate::optimizer::step_ranges(t),
        step_ns,
        busy_per_step,
        overhead,
    );
    let host_copies = crate::copies::summarize(t, &windows);
    let optimizer = crate::optimizer::summarize(t, &windows);
    let phases = crate::step_phases::summarize(t, &windows);
    Some(TimelineSummary {
        wall_ns: w.wall,
        gpu_busy_ns: busy,
        busy_pct,
        kernels: kernels as u64,
        memory_ops: (w.acts.len() - kernels) as u64,
        kernel_launch_calls: w.count(ApiKind::KernelLaunch),
        graph_launches: w.count(ApiKind::GraphLaunch),
        sync_calls: w.count(ApiKind::Synchronize),
        median_launch_ns: launches.median_launch,
        median_kernel_ns: launches.median_kernel,
        kernels_shorter_than_launch: launches.shorter,
        median_launch_to_start_ns: launches.median_to_start,
        largest_gaps: gaps,
        iterations,
        kernels_per_iteration: iterations.map(|n| kernels as f64 / n as f64),
        busy_per_iteration_ns: iterations.map(|n| busy as f64 / n as f64),
        launch_bound,
        verdict,
        sampling,
        steps: step_detection,
        steady_state,
        graph_prediction,
        host_syncs,
        host_copies,
        optimizer,
        phases,
    })
}

/// The union of busy intervals of `acts` (sorted by start), and the
/// largest gaps between them, at offsets from `start`. Gaps are labelled
/// once the largest are known: naming every gap of a long trace costs
/// more than the rest.
fn busy_and_gaps(acts: &[&GpuActivity], start: i64) -> (i64, Vec<IdleGap>) {
    let Some((&first, rest)) = acts.split_first() else {
        return (0, Vec::new());
    };
    let mut busy = 0i64;
    let mut gaps: Vec<(i64, i64, &GpuActivity, &GpuActivity)> = Vec::new();
    let (mut cur_start, mut cur_end) = (first.start_ns, first.end_ns);
    let mut cur_last = first;
    for &a in rest {
        if a.start_ns > cur_end {
            busy += cur_end - cur_start;
            gaps.push((cur_end - start, a.start_ns - cur_end, cur_last, a));
            cur_start = a.start_ns;
            cur_end = a.end_ns;
        } else {
            cur_end = cur_end.max(a.end_ns);
        }
        if a.end_ns >= cur_end {
            cur_last = a;
        }
    }
    busy += cur_end - cur_start;
    gaps.sort_by_key(|g| std::cmp::Reverse(g.1));
    gaps.truncate(GAPS_SHOWN);
    let gaps = gaps
        .into_iter()
        .map(|(at_ns, duration_ns, after, before)| IdleGap {
            at_ns,
            duration_ns,
            after: label(after),
            before: label(before),
        })
        .collect();
    (busy, gaps)
}

/// The window's kernels against their launch calls.
struct LaunchStats {
    kernels: usize,
    /// Kernels that ran shorter than their launch call.
    shorter: u64,
    median_launch: Option<f64>,
    median_kernel: Option<f64>,
    /// Median time from a launch call's start to its kernel's.
    median_to_start: Option<f64>,
}

impl LaunchStats {
    fn of(w: &Window) -> Self {
        let t = w.t;
        let (start, end) = (w.start, w.end);
        let in_window = |c: &&kopt_model::ApiCall| c.start_ns >= start && c.start_ns <= end;
        let launches: rustc_hash::FxHashMap<u64, &kopt_model::ApiCall> = t
            .api_calls
            .iter()
            .filter(|c| matches!(c.kind, ApiKind::KernelLaunch | ApiKind::GraphLaunch))
            .map(|c| (c.correlation, c))
            .collect();
        let kernels: Vec<&&GpuActivity> = w
            .acts
            .iter()
            .filter(|a| a.kind == ActivityKind::Kernel)
            .collect();
        let mut shorter = 0u64;
        let mut to_start = Vec::new();
        for k in &kernels {
            if let Some(call) = launches.get(&k.correlation) {
                if call.kind == ApiKind::KernelLaunch
                    && k.duration_ns() < call.end_ns - call.start_ns
                {
                    shorter += 1;
                }
                to_start.push((k.start_ns - call.start_ns) as f64);
            }
        }
        let median_launch = median(
            t.api_calls
                .iter()
                .filter(|c| c.kind == ApiKind::KernelLaunch)
                .filter(in_window)
                .map(|c| (c.end_ns - c.start_ns) as f64)
                .collect(),
        );
        LaunchStats {
            kernels: kernels.len(),
            shorter,
            median_launch,
            median_kernel: median(kernels.iter().map(|k| k.duration_ns() as f64).collect()),
            median_to_start: median(to_start),
        }
    }
}

/// The steady state's bounds (offsets from `trace_start`) and what was cut
/// before and after it; None without steps.
fn steady_state(w: &Window, trace_start: i64) -> Option<kopt_model::SteadyState> {
    let fmt = kopt_model::format_duration_ns;
    let (t, start, end) = (w.t, w.start, w.end);
    let (s, st) = w.steady_steps()?;
    let startup = (s.starts[0] - trace_start).max(0);
    let warmup = s.starts[st.first] - s.starts[0];
    let trailing_end = t.activities.iter().map(|a| a.end_ns).max().unwrap_or(end);
    let trailing = (trailing_end - end).max(0);
    let mut cut = Vec::new();
    if startup > 0 {
        cut.push(format!(
            "{} of start-up before the first step",
            fmt(startup as f64)
        ));
    }
    if st.first > 0 {
        cut.push(format!(
            "{} warm-up step{} ({}: first call, compilation, allocator growth)",
            st.first,
            if st.first == 1 { "" } else { "s" },
            fmt(warmup as f64)
        ));
    }
    if trailing > 0 {
        cut.push(format!(
            "{} after the last whole step",
            fmt(trailing as f64)
        ));
    }
    let description = if cut.is_empty() {
        format!("steady state: all {} steps", st.last + 1 - st.first)
    } else {
        format!(
            "steady state: {} steps; cut {}",
            st.last + 1 - st.first,
            cut.join(", ")
        )
    };
    Some(kopt_model::SteadyState {
        start_ns: start - trace_start,
        end_ns: end - trace_start,
        steps: (st.last + 1 - st.first) as u64,
        startup_ns: startup,
        warmup_steps: st.first as u64,
        warmup_ns: warmup,
        trailing_ns: trailing,
        description,
    })
}

/// Whether launches set the pace, and the verdict in words.
fn verdict(
    w: &Window,
    launches: &LaunchStats,
    busy_pct: f64,
    steady_state: Option<&kopt_model::SteadyState>,
    step_detection: Option<&kopt_model::StepDetection>,
    graph_prediction: Option<&GraphPrediction>,
) -> (bool, String) {
    let fmt = kopt_model::format_duration_ns;
    let wall = w.wall;
    let (median_kernel, median_launch) = (launches.median_kernel, launches.median_launch);
    let (shorter, kernels) = (launches.shorter, launches.kernels);
    let window_note = match (steady_state, step_detection) {
        (Some(ss), Some(sd)) => format!(
            " (steady state: {} of {} steps, found from {}; {})",
            ss.steps,
            sd.found,
            step_source_words(sd.source),
            ss.description.trim_start_matches("steady state: ")
        ),
        _ => " (no repeating step found: the whole trace)".to_string(),
    };
    // What sets the pace, from the untraced step where a bare run timed it:
    // the recorder's host cost per launch and op makes a GPU-bound step
    // look idle.
    let bare_busy_pct = graph_prediction
        .filter(|p| p.eager_measured_bare && p.eager_corrected_per_step_ns > 0.0)
        .map(|p| (100.0 * p.busy_per_step_ns / p.eager_corrected_per_step_ns).min(100.0_f64));
    let pace_pct = bare_busy_pct.unwrap_or(busy_pct);
    let launch_bound = pace_pct < LAUNCH_BOUND_BUSY_PCT
        && match (median_kernel, median_launch) {
            (Some(k), Some(l)) => k <= 2.0 * l,
            (Some(k), None) => k < crate::rules::TINY_KERNEL_NS,
            _ => false,
        };
    let bare_note = match (bare_busy_pct, graph_prediction) {
        (Some(b), Some(p)) => format!(
            " Untraced (bare run): {} a step against {} traced; the GPU is busy {b:.1}% of the untraced step.",
            fmt(p.eager_corrected_per_step_ns),
            fmt(p.eager_per_step_ns)
        ),
        _ => String::new(),
    };
    let verdict = if launch_bound {
        format!(
            "Launch bound: the GPU is busy {busy_pct:.1}% of the {} window{window_note}; kernels run {} (median) while each launch call costs {} of host time; {} of {} kernels ran shorter than their launch.",
            fmt(wall as f64),
            median_kernel.map_or("-".into(), fmt),
            median_launch.map_or("-".into(), fmt),
            shorter,
            kernels
        )
    } else if pace_pct >= COMPUTE_BOUND_BUSY_PCT {
        format!(
            "GPU bound: the GPU is busy {pace_pct:.1}% of the {}{window_note}; launch overhead is hidden behind GPU work, so graph capture would not help.",
            if bare_busy_pct.is_some() {
                "untraced step".to_string()
            } else {
                format!("{} window", fmt(wall as f64))
            }
        )
    } else {
        format!(
            "Partly idle: the GPU is busy {busy_pct:.1}% of the {} window{window_note}; see the largest gaps for what the host does in between.",
            fmt(wall as f64)
        )
    };
    (launch_bound, verdict + &bare_note)
}

/// How steps were found, in a few words.
pub fn step_source_words(s: StepSource) -> &'static str {
    match s {
        StepSource::ProfilerStep => "ProfilerStep#N markers",
        StepSource::Nvtx => "NVTX ranges",
        StepSource::Sync => "synchronisation calls",
        StepSource::HostGap => "host gaps between bursts of launches",
        StepSource::KernelPattern => "the repeating kernel pattern",
    }
}

pub(super) fn sampled_coverage(t: &Timeline) -> Option<kopt_model::SampledCoverage> {
    let w = &t.sampled_windows;
    let (first, last) = (w.first()?, w.last()?);
    Some(kopt_model::SampledCoverage {
        windows: w.len() as u64,
        traced_ns: w.iter().map(|(s, e)| e - s).sum(),
        span_ns: last.1 - first.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::strip;
    use crate::timeline::synthetic::{kernel, launch};
    use kopt_model::GpuActivity;

    #[test]
    fn many_short_kernels_behind_slow_launches_are_launch_bound() {
        let mut t = Timeline::default();
        for i in 0..10 {
            let at = i * 10_000;
            t.api_calls.push(launch(at, 8_000, i as u64));
            t.activities.push(kernel(at + 9_000, 2_000, i as u64));
        }
        let s = summarize(&t).unwrap();
        assert!(s.launch_bound, "{}", s.verdict);
        assert_eq!(s.kernels_shorter_than_launch, 10);
        assert_eq!(s.gpu_busy_ns, 20_000);
        assert_eq!(s.wall_ns, 9 * 10_000 + 11_000);
        assert_eq!(s.largest_gaps[0].duration_ns, 8_000);
        assert_eq!(s.median_launch_ns, Some(8_000.0));
    }

    #[test]
    fn time_between_sampled_windows_is_not_idle() {
        // Two 4 ms windows of back-to-back 1 ms kernels, 100 ms apart: busy
        // throughout what was traced, not 8% of a 104 ms span.
        let mut t = Timeline::default();
        for (w, base) in [0i64, 100_000_000].into_iter().enumerate() {
            for i in 0..4 {
                let c = (w * 4 + i) as u64 + 1;
                t.api_calls.push(launch(base + i as i64 * 1_000, 500, c));
                t.activities
                    .push(kernel(base + 10_000 + i as i64 * 1_000_000, 1_000_000, c));
            }
            t.sampled_windows.push((base, base + 4_000_000));
        }
        let s = summarize(&t).unwrap();
        assert!(s.busy_pct > 95.0, "{}", s.verdict);
        assert!(!s.launch_bound);
        assert!(
            s.wall_ns < 9_000_000,
            "wall {} counts traced time only",
            s.wall_ns
        );
        let c = s.sampling.clone().expect("coverage of a sampled trace");
        assert_eq!(
            (c.windows, c.traced_ns, c.span_ns),
            (2, 8_000_000, 104_000_000)
        );
        let lines = strip(&t, &s).unwrap();
        assert!(
            lines.window_ns < 9_000_000,
            "the strip is drawn spliced too"
        );
    }

    #[test]
    fn long_kernels_are_not_launch_bound() {
        let mut t = Timeline::default();
        for i in 0..4 {
            t.api_calls.push(launch(i * 1_000_000, 8_000, i as u64));
            t.activities
                .push(kernel(i * 1_000_000 + 10_000, 990_000, i as u64));
        }
        let s = summarize(&t).unwrap();
        assert!(!s.launch_bound);
        assert!(s.busy_pct > 95.0);
        assert!(s.verdict.contains("would not help"));
    }

    #[test]
    fn busy_time_is_the_union_and_gaps_the_largest_first() {
        // Seven kernels, gaps of 10, 60, 20, 50, 40 and 30 ns after them.
        let mut at = 100;
        let mut ks = Vec::new();
        for (i, gap) in [10, 60, 20, 50, 40, 30, 0].into_iter().enumerate() {
            ks.push(kernel(at, 100, i as u64 + 1));
            at += 100 + gap;
        }
        let refs: Vec<&GpuActivity> = ks.iter().collect();
        let (busy, gaps) = busy_and_gaps(&refs, 100);
        assert_eq!(busy, 700);
        let shown: Vec<(i64, i64)> = gaps.iter().map(|g| (g.at_ns, g.duration_ns)).collect();
        assert_eq!(
            shown,
            [(210, 60), (490, 50), (640, 40), (780, 30), (370, 20)]
        );
        assert_eq!(
            (gaps[0].after.as_str(), gaps[0].before.as_str()),
            ("k2", "k3")
        );
        assert_eq!(busy_and_gaps(&[], 0), (0, Vec::new()));
    }

    #[test]
    fn overlapping_streams_count_once() {
        let mut t = Timeline::default();
        t.activities.push(kernel(0, 100, 1));
        t.activities.push(kernel(50, 100, 2));
        t.activities.push(kernel(300, 100, 3));
        let s = summarize(&t).unwrap();
        assert_eq!(s.gpu_busy_ns, 250);
        assert_eq!(s.largest_gaps.len(), 1);
        assert_eq!(s.largest_gaps[0].duration_ns, 150);
    }
}
