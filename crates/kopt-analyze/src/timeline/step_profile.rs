//! The steady state's kernels per step, for the optimizer.

use std::collections::HashMap;

use kopt_model::{ActivityKind, ApiKind, Timeline};

use super::launches::launch_spans;
use super::steady::{steady_activities, steady_steps};
use super::steps::find_steps;
use super::summary::summarize;

/// The steady state of a traced run with steps, per step: its time, its
/// launch calls, and its kernels by time (the top `KERNELS_SHOWN`, the rest
/// summed). A kernel node of a replayed CUDA graph is its own activity (the
/// graph launch's correlation id), so graph-replayed kernels are listed by
/// name with their own time and counted as in-graph. None without steps.
/// `run_dir` is left empty for the caller.
pub fn step_profile(t: &Timeline) -> Option<kopt_model::optimize::StepProfile> {
    use kopt_model::optimize::{StepKernel, StepProfile, KERNELS_SHOWN};
    let summary = summarize(t)?;
    let steps = summary.iterations.filter(|&n| n > 0)?;
    let spliced = t.spliced();
    let t: &Timeline = &spliced;
    let calls = launch_spans(t);
    let found = find_steps(t)?;
    let steady = steady_steps(t, &found, &calls);
    let graph_calls: std::collections::HashSet<u64> = t
        .api_calls
        .iter()
        .filter(|c| c.kind == ApiKind::GraphLaunch)
        .map(|c| c.correlation)
        .collect();
    // name -> (launches, total ns, in-graph launches), in first-seen order.
    let mut rows: Vec<(String, u64, i64, u64)> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for a in steady_activities(t, Some(&found), Some(&steady), &calls) {
        if a.kind != ActivityKind::Kernel {
            continue;
        }
        let i = *index.entry(a.name.as_str()).or_insert_with(|| {
            rows.push((a.name.clone(), 0, 0, 0));
            rows.len() - 1
        });
        rows[i].1 += 1;
        rows[i].2 += a.duration_ns();
        rows[i].3 += u64::from(graph_calls.contains(&a.correlation));
    }
    let total: i64 = rows.iter().map(|r| r.2).sum();
    rows.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
    let n = steps as f64;
    let pct = |ns: i64| {
        if total > 0 {
            100.0 * ns as f64 / total as f64
        } else {
            0.0
        }
    };
    let rest = rows.split_off(rows.len().min(KERNELS_SHOWN));
    Some(StepProfile {
        run_dir: String::new(),
        steps,
        step_ns: summary.wall_ns as f64 / n,
        busy_per_step_ns: summary.gpu_busy_ns as f64 / n,
        launches_per_step: (summary.kernel_launch_calls + summary.graph_launches) as f64 / n,
        graph_launches_per_step: summary.graph_launches as f64 / n,
        kernels_per_step: summary.kernels as f64 / n,
        kernels: rows
            .into_iter()
            .map(|(name, launches, ns, in_graph)| StepKernel {
                short_name: kopt_model::kernel_short_name(&name),
                name,
                launches_per_step: launches as f64 / n,
                ns_per_step: ns as f64 / n,
                pct: pct(ns),
                in_graph,
            })
            .collect(),
        other_kernels: rest.len() as u64,
        other_pct: pct(rest.iter().map(|r| r.2).sum()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::synthetic::{kernel, launch};
    use kopt_model::{ApiCall, GpuActivity};

    /// `steps` NVTX `step` ranges of 100 us; in each, one graph launch
    /// replaying three kernels (30, 20, 10 us), all sharing its correlation.
    fn graph_steps(steps: i64) -> Timeline {
        let mut t = Timeline::default();
        for i in 0..steps {
            let at = 1_000_000 + i * 100_000;
            let c = i as u64 + 1;
            t.ranges.push(kopt_model::Range {
                name: "step".into(),
                start_ns: at,
                end_ns: at + 5_000,
                thread: None,
            });
            t.api_calls.push(ApiCall {
                kind: ApiKind::GraphLaunch,
                name: "cudaGraphLaunch".into(),
                ..launch(at + 1_000, 3_000, c)
            });
            let mut gpu = at + 10_000;
            for (name, ns) in [("gemm", 30_000), ("gelu", 20_000), ("norm", 10_000)] {
                t.activities.push(GpuActivity {
                    name: name.into(),
                    ..kernel(gpu, ns, c)
                });
                gpu += ns + 1_000;
            }
        }
        t
    }

    #[test]
    fn a_step_profile_lists_graph_replayed_kernels_by_name_per_step() {
        let p = step_profile(&graph_steps(12)).unwrap();
        assert!(p.steps >= 8, "{p:?}");
        assert_eq!(p.kernels_per_step, 3.0);
        assert_eq!(p.graph_launches_per_step, p.launches_per_step);
        let names: Vec<&str> = p.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["gemm", "gelu", "norm"]);
        for (k, ns) in p.kernels.iter().zip([30_000.0, 20_000.0, 10_000.0]) {
            assert_eq!(k.ns_per_step, ns, "{}", k.name);
            assert_eq!(k.launches_per_step, 1.0, "{}", k.name);
            assert_eq!(k.in_graph, p.steps, "{}", k.name);
        }
        assert_eq!(p.kernels[0].pct, 50.0);
        assert_eq!((p.other_kernels, p.other_pct), (0, 0.0));
        assert_eq!(p.busy_per_step_ns, 60_000.0);
        // Kernels launched one by one are not graph nodes.
        let mut t = graph_steps(12);
        for c in &mut t.api_calls {
            c.kind = ApiKind::KernelLaunch;
        }
        let p = step_profile(&t).unwrap();
        assert!(p.kernels.iter().all(|k| k.in_graph == 0));
        assert_eq!(p.graph_launches_per_step, 0.0);
        // No steps, no steady state to take figures from.
        assert!(step_profile(&Timeline::default()).is_none());
    }
}
