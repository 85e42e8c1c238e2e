//! The graph-capture prediction: the eager step (as traced less the
//! recorder's cost, or measured bare) against the GPU-busy time plus the
//! replay cost of its kernels.

use kopt_model::{ApiKind, GraphPrediction, PredictedSpeedup, Recorder, Timeline};

use super::bare::{bare_launch_periods, bare_step_periods, bare_sync_periods};
use super::launches::CallSpans;
use super::stats::{median, percentile, union_ns};
use super::steady::Steady;
use super::steps::Steps;
use super::window::Window;

/// What a steady step costs as traced, and the recorder's modelled share.
struct StepCosts {
    /// Eager (traced) time per step and GPU-busy time per step, per steady step.
    eager_steps: Vec<f64>,
    busy_steps: Vec<f64>,
    /// Mean traced step period, at least the busy time per step.
    eager: f64,
    busy_step: f64,
    kernels_step: f64,
    launches_per_step: f64,
    op_ranges_per_step: f64,
    /// The recorder's modelled cost per launch, and per step for launches and op ranges.
    per_launch: f64,
    launch_overhead: f64,
    op_overhead: f64,
}

/// The eager step with the recorder's cost taken out, and its range.
struct Corrected {
    eager: f64,
    overhead: f64,
    per_launch: f64,
    low: f64,
    high: f64,
}

/// The graph-capture prediction for the window, whose GPU was busy `busy`
/// ns over `kernels` kernels; `replay` is the replay cost per kernel (ns,
/// and whether it came from the per-card table). None for a window without
/// kernels, or one already replayed from a graph.
pub(super) fn graph_prediction(
    w: &Window,
    busy: i64,
    kernels: usize,
    replay: (f64, bool),
) -> Option<GraphPrediction> {
    // The window's kernels all come from graph replays: no kernel launch
    // call, at least one graph launch.
    let already_graphed = w.count(ApiKind::KernelLaunch) == 0 && w.count(ApiKind::GraphLaunch) > 0;
    if kernels == 0 || already_graphed {
        return None;
    }
    let recorder = w.t.recorder;
    let costs = step_costs(w, busy, kernels);
    let host_traced = host_issue_per_step(w.t, w.steps.as_ref(), w.steady.as_ref(), &w.calls);
    let bare = bare_periods(w).filter(|p| no_faster_than_the_gpu(p, costs.busy_step));
    let fixed = corrected_eager(&costs, bare.as_deref(), recorder);
    let (c, from_table) = replay;
    let graph = costs.busy_step + costs.kernels_step * c;
    let estimate = fixed.eager / graph.max(1.0);
    let g_lo = percentile(&costs.busy_steps, 0.25) + costs.kernels_step * c * 0.5;
    let g_hi = percentile(&costs.busy_steps, 0.75) + costs.kernels_step * c * 2.0;
    // Replay never costs more than launching the same kernels eagerly.
    let low = (fixed.low / g_hi.max(1.0)).max(1.0).min(estimate);
    let high = (fixed.high / g_lo.max(1.0)).max(estimate);
    let model = model_words(w.t, &costs, &fixed, bare.as_deref(), graph, replay);
    Some(GraphPrediction {
        eager_per_step_ns: costs.eager,
        recorder_overhead_per_step_ns: fixed.overhead,
        recorder_ns_per_launch: fixed.per_launch,
        launches_per_step: costs.launches_per_step,
        op_ranges_per_step: costs.op_ranges_per_step,
        eager_corrected_per_step_ns: fixed.eager,
        eager_measured_bare: bare.is_some(),
        busy_per_step_ns: costs.busy_step,
        kernels_per_step: costs.kernels_step,
        replay_ns_per_kernel: c,
        replay_cost_from_table: from_table,
        graph_per_step_ns: graph,
        speedup: PredictedSpeedup {
            estimate,
            low,
            high,
            model,
        },
        // The recorder's modelled cost (not the bare run's measure,
        // which a GPU-bound step hides) comes off the traced host time.
        host_per_step_ns: host_traced
            .map(|h| (h - costs.launch_overhead - costs.op_overhead).clamp(0.0, fixed.eager)),
    })
}

/// The steady window's step costs as traced.
fn step_costs(w: &Window, busy: i64, kernels: usize) -> StepCosts {
    let n = w.iterations().unwrap_or(1).max(1) as f64;
    let (eager_steps, busy_steps) = per_step_times(w, busy);
    let per_launch = w.t.recorder.overhead_per_launch_ns();
    // A graph replay is one launch call for all its kernels.
    let launch_calls = (w.count(ApiKind::KernelLaunch) + w.count(ApiKind::GraphLaunch)) as f64;
    let launches_per_step = if launch_calls > 0.0 {
        launch_calls / n
    } else {
        kernels as f64 / n
    };
    let op_ranges_per_step = op_ranges_per_step(w, n);
    StepCosts {
        eager_steps,
        busy_steps,
        eager: mean_step_period(w, n).max(busy as f64 / n),
        busy_step: busy as f64 / n,
        kernels_step: kernels as f64 / n,
        launches_per_step,
        op_ranges_per_step,
        per_launch,
        launch_overhead: per_launch * launches_per_step,
        op_overhead: op_ranges_per_step * kopt_model::NVTX_OP_RANGE_NS,
    }
}

/// Each steady step's traced period and GPU-busy time; the whole window's
/// where no steps were found.
fn per_step_times(w: &Window, busy: i64) -> (Vec<f64>, Vec<f64>) {
    let Some((s, st)) = w.steady_steps() else {
        return (vec![w.wall as f64], vec![busy as f64]);
    };
    // Each steady step's activity spans, gathered in one pass (a scan of
    // every activity per step was quadratic in one-kernel steps).
    let mut spans: Vec<Vec<(i64, i64)>> = vec![Vec::new(); st.last + 1 - st.first];
    for (a, k) in w.t.activities.iter().zip(&st.step_of) {
        if let Some(i) = k.filter(|i| (st.first..=st.last).contains(i)) {
            spans[i - st.first].push((a.start_ns, a.end_ns));
        }
    }
    (st.first..=st.last)
        .zip(spans)
        .filter(|(i, _)| *i < st.last || st.last == st.first || s.starts.get(i + 1).is_some())
        .map(|(i, spans)| {
            let next = s.starts.get(i + 1).copied().unwrap_or(w.end).max(s.ends[i]);
            ((next - s.starts[i]) as f64, union_ns(spans) as f64)
        })
        .unzip()
}

/// Framework op ranges (emit_nvtx) per step: each costs host time the
/// bare step does not pay.
fn op_ranges_per_step(w: &Window, n: f64) -> f64 {
    let t = w.t;
    match w.steady_steps() {
        Some((s, st)) => {
            let from = s.starts[st.first];
            let to = s
                .starts
                .get(st.last + 1)
                .copied()
                .unwrap_or(w.end)
                .max(s.ends[st.last]);
            let k = t
                .ranges
                .iter()
                .filter(|r| r.start_ns >= from && r.start_ns < to)
                .filter(|r| crate::ops::parse_op(&r.name).is_some())
                .count();
            k as f64 / (st.last + 1 - st.first) as f64
        }
        None => {
            t.ranges
                .iter()
                .filter(|r| crate::ops::parse_op(&r.name).is_some())
                .count() as f64
                / n
        }
    }
}

/// The mean step period from one step's start to the next: the last
/// step has no next start, and its end (the GPU's last activity) misses
/// the host time that follows it.
fn mean_step_period(w: &Window, n: f64) -> f64 {
    match w.steady_steps() {
        Some((s, st)) if st.last > st.first => {
            let next = s.starts.get(st.last + 1).copied();
            match next {
                Some(next) => (next - s.starts[st.first]) as f64 / n,
                None => (s.starts[st.last] - s.starts[st.first]) as f64 / (n - 1.0),
            }
        }
        _ => w.wall as f64 / n,
    }
}

/// A bare run's steps cannot be much faster than the GPU's own work per
/// step (what runs untraced is the same kernels): a mean under
/// `MIN_BARE_OVER_BUSY` of it means the steps do not belong to this trace
/// (another program's, or a forged file), and they are not used.
fn no_faster_than_the_gpu(periods: &[f64], busy_step: f64) -> bool {
    let mean = periods.iter().sum::<f64>() / periods.len().max(1) as f64;
    mean >= MIN_BARE_OVER_BUSY * busy_step
}

/// The GPU's busy time per step is taken from the traced run, where the
/// recorder may serialize kernels a little: a bare step down to 80% of it
/// is still believed.
const MIN_BARE_OVER_BUSY: f64 = 0.8;

/// Step periods of a bare run matched to the traced steps: by the step
/// range family, else by sync calls, else by launch counts.
fn bare_periods(w: &Window) -> Option<Vec<f64>> {
    let warmup_steps = w.steady.as_ref().map_or(0, |st| st.first);
    bare_step_periods(
        w.t,
        w.steps.as_ref().and_then(|s| s.family.as_deref()),
        warmup_steps,
    )
    .or_else(|| match w.steady_steps() {
        Some((s, st)) => bare_sync_periods(w.t, s, st).or_else(|| bare_launch_periods(w.t, s, st)),
        None => None,
    })
}

/// The eager step without the recorder's cost: measured bare, else the
/// traced step less torch.profiler's slowdown, else less the recorder's
/// modelled cost per launch and op range; never below the GPU-busy time.
fn corrected_eager(c: &StepCosts, bare: Option<&[f64]>, recorder: Recorder) -> Corrected {
    let (eager, busy_step, launches_per_step) = (c.eager, c.busy_step, c.launches_per_step);
    let (eager_steps, busy_steps) = (&c.eager_steps, &c.busy_steps);
    let band = recorder.overhead_band();
    let overhead = c.launch_overhead + c.op_overhead;
    let (corrected, overhead, per_launch, e_lo, e_hi) = match bare {
        // Measured without any recorder: nothing to take out.
        Some(p) => {
            // The mean period, as the traced eager time is.
            let bare_eager = (p.iter().sum::<f64>() / p.len() as f64).max(busy_step);
            let measured = (eager - bare_eager).max(0.0);
            (
                bare_eager,
                measured,
                measured / launches_per_step.max(1.0),
                percentile(p, 0.25).max(percentile(busy_steps, 0.25)),
                percentile(p, 0.75).max(percentile(busy_steps, 0.75)),
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
                    take(percentile(eager_steps, 0.25), f_hi).max(percentile(busy_steps, 0.25)),
                    take(percentile(eager_steps, 0.75), f_lo).max(percentile(busy_steps, 0.75)),
                )
            }
            None => (
                (eager - overhead).max(busy_step),
                overhead,
                c.per_launch,
                // The recorder's cost strays widely between machines; the
                // op-range cost is one workload's figure.
                (percentile(eager_steps, 0.25) - band.1 * c.launch_overhead - 1.5 * c.op_overhead)
                    .max(percentile(busy_steps, 0.25)),
                (percentile(eager_steps, 0.75) - band.0 * c.launch_overhead - 0.5 * c.op_overhead)
                    .max(percentile(busy_steps, 0.75)),
            ),
        },
    };
    Corrected {
        eager: corrected,
        overhead,
        per_launch,
        low: e_lo,
        high: e_hi,
    }
}

/// The host's time to issue a step, as traced: from the step's start to
/// the end of its last launch call, less what launch calls spent beyond the
/// median call (blocked on a full launch queue or the allocator, not host
/// work); the median over the steady steps. None without steps or launches.
pub(super) fn host_issue_per_step(
    t: &Timeline,
    steps: Option<&Steps>,
    steady: Option<&Steady>,
    calls: &CallSpans,
) -> Option<f64> {
    let (s, st) = (steps?, steady?);
    let n = st.last.checked_sub(st.first)? + 1;
    let mut last_end = vec![i64::MIN; n];
    let mut blocked = vec![0.0f64; n];
    let mut spans: Vec<(usize, f64)> = Vec::new();
    for (a, k) in t.activities.iter().zip(&st.step_of) {
        let Some(i) = k.filter(|i| (st.first..=st.last).contains(i)) else {
            continue;
        };
        if let Some(&(cs, ce)) = calls.get(&a.correlation).filter(|_| a.correlation != 0) {
            spans.push((i - st.first, (ce - cs) as f64));
            last_end[i - st.first] = last_end[i - st.first].max(ce);
        }
    }
    let med = median(spans.iter().map(|x| x.1).collect())?;
    for (j, d) in spans {
        blocked[j] += (d - med).max(0.0);
    }
    median(
        (0..n)
            .filter(|&j| last_end[j] > i64::MIN)
            .map(|j| ((last_end[j] - s.starts[st.first + j]) as f64 - blocked[j]).max(0.0))
            .collect(),
    )
}

/// The prediction's model in words: the formula with this trace's figures.
fn model_words(
    t: &Timeline,
    costs: &StepCosts,
    fixed: &Corrected,
    bare: Option<&[f64]>,
    graph: f64,
    replay: (f64, bool),
) -> String {
    let fmt = kopt_model::format_duration_ns;
    let recorder = t.recorder;
    let band = recorder.overhead_band();
    let (c, from_table) = replay;
    let (eager, busy_step, kernels_step) = (costs.eager, costs.busy_step, costs.kernels_step);
    let (launches_per_step, op_ranges_per_step) =
        (costs.launches_per_step, costs.op_ranges_per_step);
    let (corrected, overhead, per_launch) = (fixed.eager, fixed.overhead, fixed.per_launch);
    let bare_range = t.bare_steps.as_ref().map(|b| b.range.as_str());
    let bare_words = if t.bare_steps.as_ref().is_some_and(|b| b.in_process) {
        "steps the traced process ran after the tracer detached from it (CUPTI finalized, no op ranges), timed by the host clock"
    } else if bare_range == Some(kopt_model::BARE_SYNC_RANGE) {
        "steps of a second run without CUPTI's records, matched to the traced steps by the synchronising calls that end them"
    } else if bare_range.and_then(kopt_model::bare_launch_every).is_some() {
        "steps of a second run without CUPTI's records, timed by the program's clock every step's worth of kernel launch calls (the calls counted, one timed a step), matched to the traced steps by the launch count"
    } else {
        "steps of a second run without CUPTI, only the step ranges timed"
    };
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
    match bare {
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
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::summarize;
    use crate::timeline::synthetic::{forward_passes, kernel, launch};
    use kopt_model::{ApiKind, Timeline};

    /// Ten steps of three kernels, each step marked by an NVTX range;
    /// `graphed`: each step one cudaGraphLaunch replaying the three.
    fn three_kernel_steps(graphed: bool) -> Timeline {
        let mut t = Timeline::default();
        let mut corr = 0u64;
        for i in 0..10i64 {
            let at = i * 100_000;
            t.ranges.push(kopt_model::Range {
                name: "step".into(),
                start_ns: at,
                end_ns: at + 60_000,
                thread: None,
            });
            if graphed {
                corr += 1;
                let mut g = launch(at + 1_000, 5_000, corr);
                g.kind = ApiKind::GraphLaunch;
                t.api_calls.push(g);
            }
            for k in 0..3i64 {
                if !graphed {
                    corr += 1;
                    t.api_calls
                        .push(launch(at + 1_000 + k * 8_000, 6_000, corr));
                }
                let mut a = kernel(at + 10_000 + k * 15_000, 12_000, corr);
                a.name = format!("k{k}");
                t.activities.push(a);
            }
        }
        t
    }

    #[test]
    fn a_step_replayed_from_a_graph_gets_no_capture_prediction() {
        let s = summarize(&three_kernel_steps(true)).unwrap();
        assert_eq!(s.kernel_launch_calls, 0);
        assert!(s.graph_launches >= 9);
        assert!(s.graph_prediction.is_none(), "{:?}", s.graph_prediction);
        // The same steps launched one kernel at a time: a prediction.
        let s = summarize(&three_kernel_steps(false)).unwrap();
        assert!(s.graph_prediction.is_some());
    }

    #[test]
    fn a_recorder_cost_over_the_idle_time_is_floored_in_words_and_figure() {
        // 100 us steps, 36 us of kernels: three launches of the tracer's
        // cost leave the eager step above the busy time.
        let mut t = three_kernel_steps(false);
        t.recorder = kopt_model::Recorder::KoptTracer;
        let s = summarize(&t).unwrap();
        let p = s.graph_prediction.unwrap();
        assert!(p.eager_corrected_per_step_ns > p.busy_per_step_ns);
        assert!(!p.speedup.model.contains("never runs below"));
        // Steps 40 us apart: the recorder's cost takes the eager step under
        // the GPU's 36 us of kernels; the words give both figures.
        for (i, r) in t.ranges.iter_mut().enumerate() {
            r.start_ns = i as i64 * 40_000;
            r.end_ns = r.start_ns + 39_000;
        }
        for (i, a) in t.activities.iter_mut().enumerate() {
            let (step, k) = ((i / 3) as i64, (i % 3) as i64);
            a.start_ns = step * 40_000 + 2_000 + k * 12_000;
            a.end_ns = a.start_ns + 12_000;
        }
        for (i, c) in t.api_calls.iter_mut().enumerate() {
            let (step, k) = ((i / 3) as i64, (i % 3) as i64);
            c.start_ns = step * 40_000 + k * 12_000;
            c.end_ns = c.start_ns + 1_500;
        }
        let s = summarize(&t).unwrap();
        let p = s.graph_prediction.unwrap();
        assert_eq!(p.eager_corrected_per_step_ns, p.busy_per_step_ns);
        let m = &p.speedup.model;
        assert!(m.contains("never runs below"), "{m}");
        assert!(
            m.contains(&format!(
                "never runs below: {} eager",
                kopt_model::format_duration_ns(p.eager_corrected_per_step_ns)
            )),
            "{m}"
        );
    }

    /// `per_step_times` as it was: each step's spans by a scan of every activity.
    fn per_step_times_by_scan(w: &Window, busy: i64) -> (Vec<f64>, Vec<f64>) {
        let Some((s, st)) = w.steady_steps() else {
            return (vec![w.wall as f64], vec![busy as f64]);
        };
        (st.first..=st.last)
            .filter(|&i| i < st.last || st.last == st.first || s.starts.get(i + 1).is_some())
            .map(|i| {
                let next = s.starts.get(i + 1).copied().unwrap_or(w.end).max(s.ends[i]);
                let spans: Vec<(i64, i64)> =
                    w.t.activities
                        .iter()
                        .zip(&st.step_of)
                        .filter(|(_, k)| **k == Some(i))
                        .map(|(a, _)| (a.start_ns, a.end_ns))
                        .collect();
                ((next - s.starts[i]) as f64, union_ns(spans) as f64)
            })
            .unzip()
    }

    #[test]
    fn per_step_times_are_what_a_scan_per_step_gave() {
        let mut warm = forward_passes(2, 12, 6, 2, 50_000);
        warm.whole_program = true;
        let cases = [
            three_kernel_steps(false),
            three_kernel_steps(true),
            forward_passes(0, 10, 6, 1, 0),
            warm,
        ];
        for t in &cases {
            let w = Window::new(t).unwrap();
            let (st_first, st_last) = w.steady.as_ref().map(|st| (st.first, st.last)).unwrap();
            assert!(st_last > st_first);
            let (eager, busy) = per_step_times(&w, 0);
            assert!(!eager.is_empty() && busy.iter().all(|b| *b > 0.0));
            assert_eq!((eager, busy), per_step_times_by_scan(&w, 0));
        }
    }
}
