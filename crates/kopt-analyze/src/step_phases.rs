//! A training step's phases (#35): data, forward, backward and optimizer,
//! from the `kopt:*` ranges kopt's module driver, `kopt.profile_steps` and
//! the callbacks put inside each step (docs/training.md), else from what
//! torch.profiler records of a plain loop: the DataLoader's `__next__`,
//! the autograd engine's ops (backward) and torch.optim's step and
//! zero_grad, forward then being the time from the batch to the first
//! backward op. Each phase gets its host time and the GPU time of the
//! kernels launched inside it, per steady step; the time in no phase is
//! `other`.

use kopt_model::{ActivityKind, StepPhase, StepPhases, Timeline};

/// The phases in step order, by the name after `kopt:` (`optimizer#Adam`
/// is the optimizer).
const PHASES: [&str; 4] = ["data", "forward", "backward", "optimizer"];

/// Phases a training step must mark to be split whole (data is optional:
/// a step that reuses one batch has none).
const EXPECTED: [&str; 3] = ["forward", "backward", "optimizer"];

/// Spans looked back over for the one holding a launch (phases nest a few
/// deep at most; the bound keeps a pathological trace linear).
const MAX_NESTING: usize = 64;

/// Index into `PHASES` of a kopt marker's name, None for any other range.
fn phase_of(name: &str) -> Option<usize> {
    let rest = name.strip_prefix("kopt:")?;
    let head = rest.split('#').next().unwrap_or(rest);
    PHASES.iter().position(|p| *p == head)
}

/// Index into `PHASES` of torch's own annotation of a phase.
fn torch_phase_of(name: &str) -> Option<usize> {
    if name.starts_with("enumerate(DataLoader)#") {
        Some(0)
    } else if name == kopt_model::BACKWARD_PHASE {
        Some(2)
    } else if name.starts_with("Optimizer.step#") || name.starts_with("Optimizer.zero_grad#") {
        Some(3)
    } else {
        None
    }
}

/// Where the phases came from.
const FROM_MARKERS: &str = "kopt's markers";
const FROM_TORCH: &str =
    "torch.profiler's annotations; forward is the time from the batch to the first backward op";

/// The phases of the steady steps (`windows`: each step's host span);
/// None when no phase is marked inside them.
pub fn summarize(t: &Timeline, windows: &[(i64, i64)]) -> Option<StepPhases> {
    let window_of = |at: i64| {
        let w = windows.partition_point(|w| w.0 <= at);
        w.checked_sub(1).filter(|&i| at < windows[i].1)
    };
    // Phase spans inside the steady steps, sorted by start: (start, end,
    // phase); kopt's markers where the steps have them, else torch's.
    let spans_by = |of: fn(&str) -> Option<usize>| -> Vec<(i64, i64, usize)> {
        let mut v: Vec<(i64, i64, usize)> = t
            .ranges
            .iter()
            .chain(&t.phase_ranges)
            .filter_map(|r| Some((r.start_ns, r.end_ns, of(&r.name)?)))
            .filter(|(s, _, _)| window_of(*s).is_some())
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let (mut spans, source) = match spans_by(phase_of) {
        v if !v.is_empty() => (v, FROM_MARKERS),
        _ => (spans_by(torch_phase_of), FROM_TORCH),
    };
    if spans.is_empty() {
        return None;
    }
    if source == FROM_TORCH {
        infer_forward(&mut spans, windows);
    }
    // Each span clipped to its step: a range that ends past the step (or
    // after the trace) counts only inside it.
    for span in spans.iter_mut() {
        if let Some(w) = window_of(span.0) {
            span.1 = span.1.min(windows[w].1).max(span.0);
        }
    }
    let steps = windows.len().max(1) as f64;
    let mut host = [0.0f64; PHASES.len() + 1];
    let mut gpu = [0.0f64; PHASES.len() + 1];
    let mut kernels = [0usize; PHASES.len() + 1];
    for (p, ns) in innermost_time(&spans) {
        host[p] += ns;
    }
    let step_total: f64 = windows.iter().map(|w| (w.1 - w.0).max(0) as f64).sum();
    let other = PHASES.len();
    host[other] = (step_total - host[..other].iter().sum::<f64>()).max(0.0);
    // Kernels by where their launch call ran: the innermost phase span
    // holding it (phases do not overlap; the latest started wins if they do).
    let launched: rustc_hash::FxHashMap<u64, i64> = t
        .api_calls
        .iter()
        .filter(|c| c.correlation != 0)
        .map(|c| (c.correlation, c.start_ns))
        .collect();
    for a in t
        .activities
        .iter()
        .filter(|a| a.kind == ActivityKind::Kernel)
    {
        let Some(&at) = launched.get(&a.correlation) else {
            continue;
        };
        if window_of(at).is_none() {
            continue;
        }
        // The innermost span still open at the launch: the latest started
        // that has not ended (a nested one may have ended before it).
        let i = spans.partition_point(|s| s.0 <= at);
        let p = spans[..i]
            .iter()
            .rev()
            .take(MAX_NESTING)
            .find(|s| at <= s.1)
            .map_or(other, |s| s.2);
        kernels[p] += 1;
        gpu[p] += (a.end_ns - a.start_ns).max(0) as f64;
    }
    let step_ns = step_total / steps;
    let marked: Vec<bool> = (0..PHASES.len())
        .map(|p| spans.iter().any(|s| s.2 == p))
        .collect();
    let phases = (0..=PHASES.len())
        .filter(|&p| p == other || marked[p])
        .map(|p| StepPhase {
            name: PHASES.get(p).copied().unwrap_or("other").to_string(),
            host_ns_per_step: host[p] / steps,
            share_pct: if step_ns > 0.0 {
                100.0 * host[p] / step_total
            } else {
                0.0
            },
            kernels_per_step: kernels[p] as f64 / steps,
            gpu_ns_per_step: gpu[p] / steps,
        })
        .collect();
    let missing = EXPECTED
        .iter()
        .filter(|e| !marked[PHASES.iter().position(|p| p == *e).unwrap_or(0)])
        .map(|e| e.to_string())
        .collect();
    Some(StepPhases {
        steps: windows.len() as u64,
        step_ns,
        phases,
        missing,
        source: source.into(),
    })
}

/// Each phase's time with nested or overlapping spans counted once: a
/// moment belongs to the innermost span open then (the latest started).
/// `spans` sorted by start.
fn innermost_time(spans: &[(i64, i64, usize)]) -> Vec<(usize, f64)> {
    let mut out = Vec::new();
    let mut open: Vec<(i64, usize)> = Vec::new(); // (end, phase), latest on top
    let mut at = i64::MIN;
    // Time from `at` to `to` goes to the spans open, innermost first,
    // closing the ones that end on the way.
    let advance =
        |open: &mut Vec<(i64, usize)>, at: &mut i64, to: i64, out: &mut Vec<(usize, f64)>| {
            while let Some(&(end, p)) = open.last() {
                let until = end.min(to);
                if until > *at {
                    out.push((p, (until - *at) as f64));
                    *at = until;
                }
                if end <= to {
                    open.pop();
                } else {
                    break;
                }
            }
            *at = (*at).max(to);
        };
    for &(s, e, p) in spans {
        if at == i64::MIN {
            at = s;
        }
        advance(&mut open, &mut at, s, &mut out);
        open.push((e, p));
    }
    advance(&mut open, &mut at, i64::MAX, &mut out);
    out
}

/// Forward, where torch.profiler marks no forward: in each step that runs
/// backward, from the end of its data phase (else the step's start) to its
/// first backward op. `spans` stays sorted.
fn infer_forward(spans: &mut Vec<(i64, i64, usize)>, windows: &[(i64, i64)]) {
    let mut forward = Vec::new();
    for &(ws, we) in windows {
        let inside = spans.iter().filter(|s| s.0 >= ws && s.0 < we);
        let Some(b0) = inside.clone().filter(|s| s.2 == 2).map(|s| s.0).min() else {
            continue;
        };
        let from = inside
            .filter(|s| s.2 == 0 && s.1 <= b0)
            .map(|s| s.1)
            .max()
            .unwrap_or(ws);
        if b0 > from {
            forward.push((from, b0, 1));
        }
    }
    spans.extend(forward);
    spans.sort_unstable();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::synthetic;
    use kopt_model::Range;

    fn range(name: &str, s: i64, e: i64) -> Range {
        Range {
            name: name.into(),
            start_ns: s,
            end_ns: e,
            thread: None,
        }
    }

    /// A kernel launched at `at` running `dur` ns.
    fn launch(t: &mut Timeline, at: i64, dur: i64) {
        let c = t.activities.len() as u64 + 1;
        t.api_calls.push(synthetic::launch(at, 5, c));
        t.activities.push(synthetic::kernel(at + 10, dur, c));
    }

    #[test]
    fn each_phase_gets_its_host_time_and_the_kernels_it_launched() {
        // Two steps of 1000 ns: forward 0-400 (2 kernels of 50 ns), backward
        // 400-800 (1 kernel of 200 ns), optimizer 800-900, 100 ns in no phase.
        let mut t = Timeline::default();
        for step in 0..2 {
            let o = step * 1000;
            t.ranges.push(range("kopt:forward", o, o + 400));
            t.ranges.push(range("kopt:backward", o + 400, o + 800));
            t.ranges
                .push(range("kopt:optimizer#AdamW", o + 800, o + 900));
            launch(&mut t, o + 10, 50);
            launch(&mut t, o + 20, 50);
            launch(&mut t, o + 500, 200);
            launch(&mut t, o + 950, 30); // after the optimizer: other
        }
        let p = summarize(&t, &[(0, 1000), (1000, 2000)]).unwrap();
        let names: Vec<&str> = p.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["forward", "backward", "optimizer", "other"]);
        let f = &p.phases[0];
        assert_eq!(
            (f.host_ns_per_step, f.kernels_per_step, f.gpu_ns_per_step),
            (400.0, 2.0, 100.0)
        );
        assert!((f.share_pct - 40.0).abs() < 1e-9);
        assert_eq!(p.phases[1].gpu_ns_per_step, 200.0);
        assert_eq!(p.phases[2].kernels_per_step, 0.0);
        let other = &p.phases[3];
        assert_eq!(
            (other.host_ns_per_step, other.kernels_per_step),
            (100.0, 1.0)
        );
        assert_eq!(p.step_ns, 1000.0);
        assert!(p.missing.is_empty());
        assert_eq!(p.source, FROM_MARKERS);
    }

    #[test]
    fn a_plain_torch_profiler_loop_is_split_by_torch_annotations() {
        // One step 0-1000: DataLoader 0-100, backward ops 500-800 (the
        // autograd thread), the optimizer 850-950; forward is 100-500.
        let mut t = Timeline::default();
        t.phase_ranges.push(range(
            "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
            0,
            100,
        ));
        t.phase_ranges
            .push(range(kopt_model::BACKWARD_PHASE, 500, 800));
        t.phase_ranges
            .push(range("Optimizer.step#AdamW.step", 850, 950));
        launch(&mut t, 200, 40); // forward
        launch(&mut t, 600, 70); // backward
        let p = summarize(&t, &[(0, 1000)]).unwrap();
        let got: Vec<(&str, f64, f64)> = p
            .phases
            .iter()
            .map(|ph| (ph.name.as_str(), ph.host_ns_per_step, ph.gpu_ns_per_step))
            .collect();
        assert_eq!(
            got,
            [
                ("data", 100.0, 0.0),
                ("forward", 400.0, 40.0),
                ("backward", 300.0, 70.0),
                ("optimizer", 100.0, 0.0),
                ("other", 100.0, 0.0)
            ]
        );
        assert_eq!(p.source, FROM_TORCH);
    }

    #[test]
    fn nested_spans_count_once_and_a_span_past_its_step_is_clipped() {
        // A step of 1000 ns: forward 0-600 holding a nested forward 100-200
        // and a backward 300-500 inside it; data from 600 to far past the
        // step's end.
        let mut t = Timeline::default();
        t.ranges.push(range("kopt:forward", 0, 600));
        t.ranges.push(range("kopt:forward", 100, 200));
        t.ranges.push(range("kopt:backward", 300, 500));
        t.ranges
            .push(range("kopt:data", 600, 1_000_000_000_000_000));
        let p = summarize(&t, &[(0, 1000)]).unwrap();
        let host: Vec<(&str, f64)> = p
            .phases
            .iter()
            .map(|ph| (ph.name.as_str(), ph.host_ns_per_step))
            .collect();
        assert_eq!(
            host,
            [
                ("data", 400.0),
                ("forward", 400.0),
                ("backward", 200.0),
                ("other", 0.0)
            ]
        );
        let total: f64 = p.phases.iter().map(|ph| ph.share_pct).sum();
        assert!((total - 100.0).abs() < 1e-9, "{total}");
    }

    #[test]
    fn unmarked_phases_are_named_and_steps_without_markers_give_none() {
        let mut t = Timeline::default();
        t.ranges.push(range("kopt:optimizer#SGD", 700, 900));
        t.ranges.push(range("kopt_step", 0, 1000));
        let p = summarize(&t, &[(0, 1000)]).unwrap();
        assert_eq!(p.missing, ["forward", "backward"]);
        // Outside the steady steps, or no kopt:* phase at all: none.
        assert!(summarize(&t, &[(2000, 3000)]).is_none());
        let bare = Timeline {
            ranges: vec![range("kopt_step", 0, 1000)],
            ..Timeline::default()
        };
        assert!(summarize(&bare, &[(0, 1000)]).is_none());
    }
}
