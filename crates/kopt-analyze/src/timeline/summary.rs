//! The timeline summary: wall vs GPU-busy time, idle gaps, host launch
//! cost against kernel duration, and whether launch overhead sets the pace.

use std::collections::HashMap;

use kopt_model::{
    ActivityKind, ApiKind, GpuActivity, IdleGap, StepSource, Timeline, TimelineSummary,
};

use super::bare::{bare_launch_periods, bare_step_periods, bare_sync_periods};
use super::launches::{launch_spans, launched_at, trace_start_ns};
use super::replay::host_issue_per_step;
use super::stats::{median, percentile, union_ns};
use super::steady::{steady_activities, steady_steps};
use super::steps::find_steps;

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
    let replay = match device.graph_replay_ns_per_kernel {
        Some(ns) => (ns, true),
        None => kopt_model::graph_replay_ns_per_kernel(&device.name),
    };
    summarize_with_replay(t, replay)
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
    let sampling = sampled_coverage(t);
    // Time between sampled windows was never traced: it is cut, not idle.
    let spliced = t.spliced();
    let t: &Timeline = &spliced;
    let calls = launch_spans(t);
    let trace_start = trace_start_ns(t)?;
    let steps = find_steps(t);
    let steady = steps.as_ref().map(|s| steady_steps(t, s, &calls));

    let mut acts = steady_activities(t, steps.as_ref(), steady.as_ref(), &calls);
    acts.sort_by_key(|a| a.start_ns);
    let (start, window_end) = match (&steps, &steady) {
        (Some(s), Some(st)) => {
            let end = s.until(st.last);
            // Where the host runs ahead of a busy GPU, the first steady
            // step is launched while earlier work still runs: the window
            // opens when that work is done (at the latest at the step's first activity).
            let launched = s.starts[st.first];
            let earlier_end = t
                .activities
                .iter()
                .zip(&st.step_of)
                .filter(|(a, k)| {
                    k.is_none_or(|i| i < st.first) && launched_at(a, &calls).0 < launched
                })
                .map(|(a, _)| a.end_ns)
                .max()
                .unwrap_or(launched);
            let opens = launched.max(earlier_end.min(acts[0].start_ns));
            (opens.min(acts[0].start_ns), end)
        }
        _ => {
            let first_api = t
                .api_calls
                .iter()
                .filter(|c| c.kind != ApiKind::Other)
                .map(|c| c.start_ns)
                .min();
            (
                first_api.map_or(acts[0].start_ns, |s| s.min(acts[0].start_ns)),
                i64::MIN,
            )
        }
    };
    let end = acts
        .iter()
        .map(|a| a.end_ns)
        .max()
        .unwrap_or(start)
        .max(window_end);
    let wall = (end - start).max(1);

    // Union of busy intervals, and the gaps between them (labelled once the
    // largest are known: naming every gap of a long trace costs more than the rest).
    let mut busy = 0i64;
    let mut gaps: Vec<(i64, i64, &GpuActivity, &GpuActivity)> = Vec::new();
    let (mut cur_start, mut cur_end) = (acts[0].start_ns, acts[0].end_ns);
    let mut cur_last = acts[0];
    for a in &acts[1..] {
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
    let gaps: Vec<IdleGap> = gaps
        .into_iter()
        .map(|(at_ns, duration_ns, after, before)| IdleGap {
            at_ns,
            duration_ns,
            after: label(after),
            before: label(before),
        })
        .collect();

    let in_window = |c: &&kopt_model::ApiCall| c.start_ns >= start && c.start_ns <= end;
    let launches: HashMap<u64, &kopt_model::ApiCall> = t
        .api_calls
        .iter()
        .filter(|c| matches!(c.kind, ApiKind::KernelLaunch | ApiKind::GraphLaunch))
        .map(|c| (c.correlation, c))
        .collect();
    let kernels: Vec<&&GpuActivity> = acts
        .iter()
        .filter(|a| a.kind == ActivityKind::Kernel)
        .collect();
    let mut shorter = 0u64;
    let mut to_start = Vec::new();
    for k in &kernels {
        if let Some(call) = launches.get(&k.correlation) {
            if call.kind == ApiKind::KernelLaunch && k.duration_ns() < call.end_ns - call.start_ns {
                shorter += 1;
            }
            to_start.push((k.start_ns - call.start_ns) as f64);
        }
    }
    let count = |kind: ApiKind| {
        t.api_calls
            .iter()
            .filter(|c| c.kind == kind)
            .filter(in_window)
            .count() as u64
    };
    let median_launch = median(
        t.api_calls
            .iter()
            .filter(|c| c.kind == ApiKind::KernelLaunch)
            .filter(in_window)
            .map(|c| (c.end_ns - c.start_ns) as f64)
            .collect(),
    );
    let median_kernel = median(kernels.iter().map(|k| k.duration_ns() as f64).collect());
    let busy_pct = 100.0 * busy as f64 / wall as f64;
    let iterations = steady.as_ref().map(|st| (st.last + 1 - st.first) as u64);
    let fmt = kopt_model::format_duration_ns;

    let step_detection = steps.as_ref().map(|s| kopt_model::StepDetection {
        source: s.source,
        found: s.starts.len() as u64,
        family: s.family.clone(),
        detail: s.detail.clone(),
    });
    let steady_state = match (&steps, &steady) {
        (Some(s), Some(st)) => {
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
        _ => None,
    };

    // The window's kernels all come from graph replays: no kernel launch
    // call, at least one graph launch.
    let already_graphed = count(ApiKind::KernelLaunch) == 0 && count(ApiKind::GraphLaunch) > 0;
    // Per-step figures and the graph-capture prediction.
    let graph_prediction = {
        let n = iterations.unwrap_or(1).max(1) as f64;
        let (eager_steps, busy_steps): (Vec<f64>, Vec<f64>) = match (&steps, &steady) {
            (Some(s), Some(st)) => (st.first..=st.last)
                .filter(|&i| i < st.last || st.last == st.first || s.starts.get(i + 1).is_some())
                .map(|i| {
                    let next = s.starts.get(i + 1).copied().unwrap_or(end).max(s.ends[i]);
                    let spans: Vec<(i64, i64)> = t
                        .activities
                        .iter()
                        .zip(&st.step_of)
                        .filter(|(_, k)| **k == Some(i))
                        .map(|(a, _)| (a.start_ns, a.end_ns))
                        .collect();
                    ((next - s.starts[i]) as f64, union_ns(spans) as f64)
                })
                .unzip(),
            _ => (vec![wall as f64], vec![busy as f64]),
        };
        let recorder = t.recorder;
        let per_launch = recorder.overhead_per_launch_ns();
        // A graph replay is one launch call for all its kernels.
        let launch_calls = (count(ApiKind::KernelLaunch) + count(ApiKind::GraphLaunch)) as f64;
        let launches_per_step = if launch_calls > 0.0 {
            launch_calls / n
        } else {
            kernels.len() as f64 / n
        };
        // Framework op ranges (emit_nvtx) in the steps: each costs host
        // time the bare step does not pay.
        let op_ranges_per_step = match (&steps, &steady) {
            (Some(s), Some(st)) => {
                let from = s.starts[st.first];
                let to = s
                    .starts
                    .get(st.last + 1)
                    .copied()
                    .unwrap_or(end)
                    .max(s.ends[st.last]);
                let k = t
                    .ranges
                    .iter()
                    .filter(|r| r.start_ns >= from && r.start_ns < to)
                    .filter(|r| crate::ops::parse_op(&r.name).is_some())
                    .count();
                k as f64 / (st.last + 1 - st.first) as f64
            }
            _ => {
                t.ranges
                    .iter()
                    .filter(|r| crate::ops::parse_op(&r.name).is_some())
                    .count() as f64
                    / n
            }
        };
        let launch_overhead = per_launch * launches_per_step;
        let op_overhead = op_ranges_per_step * kopt_model::NVTX_OP_RANGE_NS;
        let host_traced = host_issue_per_step(t, steps.as_ref(), steady.as_ref(), &calls);
        let overhead = launch_overhead + op_overhead;
        // The mean step period from one step's start to the next: the last
        // step has no next start, and its end (the GPU's last activity)
        // misses the host time that follows it.
        let eager = match (&steps, &steady) {
            (Some(s), Some(st)) if st.last > st.first => {
                let next = s.starts.get(st.last + 1).copied();
                match next {
                    Some(next) => (next - s.starts[st.first]) as f64 / n,
                    None => (s.starts[st.last] - s.starts[st.first]) as f64 / (n - 1.0),
                }
            }
            _ => wall as f64 / n,
        };
        let eager = eager.max(busy as f64 / n);
        let busy_step = busy as f64 / n;
        let kernels_step = kernels.len() as f64 / n;
        let (c, from_table) = replay;
        let warmup_steps = steady.as_ref().map_or(0, |st| st.first);
        let band = recorder.overhead_band();
        let bare = bare_step_periods(
            t,
            steps.as_ref().and_then(|s| s.family.as_deref()),
            warmup_steps,
        )
        .or_else(|| match (&steps, &steady) {
            (Some(s), Some(st)) => {
                bare_sync_periods(t, s, st).or_else(|| bare_launch_periods(t, s, st))
            }
            _ => None,
        });
        let bare_range = t.bare_steps.as_ref().map(|b| b.range.as_str());
        let bare_words = if bare_range == Some(kopt_model::BARE_SYNC_RANGE) {
            "steps of a second run without CUPTI's records, matched to the traced steps by the synchronising calls that end them"
        } else if bare_range.and_then(kopt_model::bare_launch_every).is_some() {
            "steps of a second run without CUPTI's records, timed by the program's clock every step's worth of kernel launch calls (the calls counted, one timed a step), matched to the traced steps by the launch count"
        } else {
            "steps of a second run without CUPTI, only the step ranges timed"
        };
        let (corrected, overhead, per_launch, e_lo, e_hi) = match &bare {
            // Measured without any recorder: nothing to take out.
            Some(p) => {
                // The mean period, as the traced eager time is.
                let bare_eager = (p.iter().sum::<f64>() / p.len() as f64).max(busy_step);
                let measured = (eager - bare_eager).max(0.0);
                (
                    bare_eager,
                    measured,
                    measured / launches_per_step.max(1.0),
                    percentile(p, 0.25).max(percentile(&busy_steps, 0.25)),
                    percentile(p, 0.75).max(percentile(&busy_steps, 0.75)),
                )
            }
            None => match recorder.slowdown() {
                // torch.profiler: its cost grows with the step's host work.
                Some((factor, (f_lo, f_hi))) => {
                    let cap = launches_per_step * kopt_model::KINETO_MAX_NS_PER_LAUNCH;
                    let take = |e: f64, f: f64| e - (e * (1.0 - 1.0 / f)).min(cap);
                    let corrected = take(eager, factor).max(busy_step);
                    let overhead = eager - corrected;
                    (
                        corrected,
                        overhead,
                        overhead / launches_per_step.max(1.0),
                        take(percentile(&eager_steps, 0.25), f_hi)
                            .max(percentile(&busy_steps, 0.25)),
                        take(percentile(&eager_steps, 0.75), f_lo)
                            .max(percentile(&busy_steps, 0.75)),
                    )
                }
                None => (
                    (eager - overhead).max(busy_step),
                    overhead,
                    per_launch,
                    // The recorder's cost strays widely between machines; the
                    // op-range cost is one workload's figure.
                    (percentile(&eager_steps, 0.25) - band.1 * launch_overhead - 1.5 * op_overhead)
                        .max(percentile(&busy_steps, 0.25)),
                    (percentile(&eager_steps, 0.75) - band.0 * launch_overhead - 0.5 * op_overhead)
                        .max(percentile(&busy_steps, 0.75)),
                ),
            },
        };
        let graph = busy_step + kernels_step * c;
        let estimate = corrected / graph.max(1.0);
        let g_lo = percentile(&busy_steps, 0.25) + kernels_step * c * 0.5;
        let g_hi = percentile(&busy_steps, 0.75) + kernels_step * c * 2.0;
        // Replay never costs more than launching the same kernels eagerly.
        let low = (e_lo / g_hi.max(1.0)).max(1.0).min(estimate);
        let high = (e_hi / g_lo.max(1.0)).max(estimate);
        let card = if from_table {
            "this card's figure"
        } else {
            "the Hopper figure, used for cards kopt has no figure for"
        };
        // The recorder's cost taken out can leave less than the GPU's own
        // time: the eager step never runs below it, and the text says so.
        let result = if eager - overhead < corrected {
            format!(
                " = {}, under the GPU-busy time per step, which the eager step never runs below: {}",
                fmt((eager - overhead).max(0.0)),
                fmt(corrected)
            )
        } else {
            format!(" = {}", fmt(corrected))
        };
        let ops_term = if op_ranges_per_step > 0.0 {
            format!(
                " - {:.0} op ranges x {} (PyTorch's op recording, x0.5-1.5 in the range)",
                op_ranges_per_step,
                fmt(kopt_model::NVTX_OP_RANGE_NS)
            )
        } else {
            String::new()
        };
        let model = match &bare {
            Some(p) => format!(
                "speed-up = eager time per step measured bare / (GPU-busy time per step + kernels per step x graph replay cost per kernel): {} eager (mean of {} {bare_words}; {} as traced, so {} cost {} a launch here); {} busy + {:.0} kernels x {} = {} after capture. Range: bare steps' 25th-75th percentiles, replay cost x0.5-2 ({} us per kernel is {card}).",
                fmt(corrected),
                p.len(),
                fmt(eager),
                recorder.as_str(),
                fmt(per_launch),
                fmt(busy_step),
                kernels_step,
                fmt(c),
                fmt(graph),
                c / 1e3,
            ),
            None => match recorder.slowdown() {
                Some((factor, (f_lo, f_hi))) => format!(
                    "speed-up = eager time per step without {rec}'s cost / (GPU-busy time per step + kernels per step x graph replay cost per kernel): {} as traced less {rec}'s cost, {} (a traced step taken as x{factor} the bare one, {rec}'s typical slowdown of a launch-bound PyTorch step, x{f_lo}-{f_hi} across the machines measured; at most {} a launch; the eager time never below the GPU-busy time) = {} eager; {} busy + {:.0} kernels x {} = {} after capture. Range: steps' 25th-75th percentiles, slowdown x{f_lo}-{f_hi}, replay cost x0.5-2 ({} us per kernel is {card}). For a figure to plan with, time the steps bare: `kopt analyze TRACE -- PROGRAM` runs the program again with its profiler stood in for (or `kopt trace -- PROGRAM`).",
                    fmt(eager),
                    fmt(overhead),
                    fmt(kopt_model::KINETO_MAX_NS_PER_LAUNCH),
                    fmt(corrected),
                    fmt(busy_step),
                    kernels_step,
                    fmt(c),
                    fmt(graph),
                    c / 1e3,
                    rec = recorder.as_str(),
                ),
                None => format!(
                    "speed-up = eager time per step without the recorder's cost / (GPU-busy time per step + kernels per step x graph replay cost per kernel): {} - {:.0} launches x {} ({}){ops_term}{result} eager; {} busy + {:.0} kernels x {} = {} after capture. Range: steps' 25th-75th percentiles, recorder cost x{}-{} (what it was across the machines measured), replay cost x0.5-2 ({} us per kernel is {card}).",
                    fmt(eager),
                    launches_per_step,
                    fmt(per_launch),
                    recorder.as_str(),
                    fmt(busy_step),
                    kernels_step,
                    fmt(c),
                    fmt(graph),
                    band.0,
                    band.1,
                    c / 1e3,
                ),
            },
        };
        Some(kopt_model::GraphPrediction {
            eager_per_step_ns: eager,
            recorder_overhead_per_step_ns: overhead,
            recorder_ns_per_launch: per_launch,
            launches_per_step,
            op_ranges_per_step,
            eager_corrected_per_step_ns: corrected,
            eager_measured_bare: bare.is_some(),
            busy_per_step_ns: busy_step,
            kernels_per_step: kernels_step,
            replay_ns_per_kernel: c,
            replay_cost_from_table: from_table,
            graph_per_step_ns: graph,
            speedup: kopt_model::PredictedSpeedup {
                estimate,
                low,
                high,
                model,
            },
            // The recorder's modelled cost (not the bare run's measure,
            // which a GPU-bound step hides) comes off the traced host time.
            host_per_step_ns: host_traced
                .map(|h| (h - launch_overhead - op_overhead).clamp(0.0, corrected)),
        })
        // A step already replayed from a graph has nothing left to capture.
        .filter(|_| !kernels.is_empty() && !already_graphed)
    };

    let window_note = match (&steady_state, &step_detection) {
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
        .as_ref()
        .filter(|p| p.eager_measured_bare && p.eager_corrected_per_step_ns > 0.0)
        .map(|p| (100.0 * p.busy_per_step_ns / p.eager_corrected_per_step_ns).min(100.0_f64));
    let pace_pct = bare_busy_pct.unwrap_or(busy_pct);
    let launch_bound = pace_pct < LAUNCH_BOUND_BUSY_PCT
        && match (median_kernel, median_launch) {
            (Some(k), Some(l)) => k <= 2.0 * l,
            (Some(k), None) => k < crate::rules::TINY_KERNEL_NS,
            _ => false,
        };
    let bare_note = match (bare_busy_pct, graph_prediction.as_ref()) {
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
            kernels.len()
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
    let verdict = verdict + &bare_note;
    Some(TimelineSummary {
        wall_ns: wall,
        gpu_busy_ns: busy,
        busy_pct,
        kernels: kernels.len() as u64,
        memory_ops: (acts.len() - kernels.len()) as u64,
        kernel_launch_calls: count(ApiKind::KernelLaunch),
        graph_launches: count(ApiKind::GraphLaunch),
        sync_calls: count(ApiKind::Synchronize),
        median_launch_ns: median_launch,
        median_kernel_ns: median_kernel,
        kernels_shorter_than_launch: shorter,
        median_launch_to_start_ns: median(to_start),
        largest_gaps: gaps,
        iterations,
        kernels_per_iteration: iterations.map(|n| kernels.len() as f64 / n as f64),
        busy_per_iteration_ns: iterations.map(|n| busy as f64 / n as f64),
        launch_bound,
        verdict,
        sampling,
        steps: step_detection,
        steady_state,
        graph_prediction,
    })
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
