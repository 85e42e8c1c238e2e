//! The graph-capture prediction: eager step time against graph replay.

use std::collections::HashMap;

use kopt_model::Timeline;

use super::stats::median;
use super::steady::Steady;
use super::steps::Steps;

/// The host's time to issue a step, as traced: from the step's start to
/// the end of its last launch call, less what launch calls spent beyond the
/// median call (blocked on a full launch queue or the allocator, not host
/// work); the median over the steady steps. None without steps or launches.
pub(super) fn host_issue_per_step(
    t: &Timeline,
    steps: Option<&Steps>,
    steady: Option<&Steady>,
    calls: &HashMap<u64, (i64, i64)>,
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

#[cfg(test)]
mod tests {
    use crate::timeline::summarize;
    use crate::timeline::synthetic::{kernel, launch};
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
}
