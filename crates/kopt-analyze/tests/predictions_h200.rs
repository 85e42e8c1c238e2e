//! Graph-capture predictions against what was measured on an H200
//! (fixtures/predictions-h200, made by scripts/checks/predictions/run.sh):
//! four PyTorch steps, each traced with kopt's tracer and with
//! torch.profiler, and timed bare (eager vs CUDA-graph replay, same call).

use std::path::PathBuf;

use kopt_analyze::{analyze, AnalyzeOptions};
use kopt_ingest::{profile_from_timeline, profile_from_trace, read_kineto, read_kopt_trace};
use kopt_model::Diagnosis;

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/predictions-h200")
        .join(rel)
}

/// (eager us, graph us) per step, measured bare in the same call.
fn measured(workload: &str) -> (f64, f64) {
    let text = std::fs::read_to_string(fixture("measured.jsonl")).unwrap();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["workload"] == workload)
        .map(|v| {
            (
                v["eager_us"].as_f64().unwrap(),
                v["graph_us"].as_f64().unwrap(),
            )
        })
        .unwrap()
}

fn diagnoses(workload: &str) -> [(&'static str, Diagnosis); 2] {
    let kopt = read_kopt_trace(&fixture(&format!("{workload}.trace.jsonl"))).unwrap();
    let torch = read_kineto(&fixture(&format!("{workload}.pt.trace.json.gz"))).unwrap();
    let opts = AnalyzeOptions::default();
    [
        (
            "kopt trace",
            analyze(
                &profile_from_timeline(kopt.timeline, workload, "kopt trace"),
                &opts,
            ),
        ),
        (
            "torch.profiler",
            analyze(&profile_from_trace(torch, workload), &opts),
        ),
    ]
}

fn prediction(d: &Diagnosis) -> Option<(f64, f64)> {
    let t = d.timeline.as_ref()?;
    let p = t.graph_prediction.as_ref()?;
    let rec = d
        .recommendations
        .iter()
        .find(|r| r.id == "capture_cuda_graph")?;
    Some((
        rec.predicted_speedup.as_ref()?.estimate,
        p.graph_per_step_ns / 1e3,
    ))
}

#[test]
fn the_time_after_capture_is_predicted_within_a_quarter() {
    for w in ["moe", "mlp", "decode"] {
        let (_, graph_us) = measured(w);
        for (recorder, d) in diagnoses(w) {
            let (_, predicted_graph_us) =
                prediction(&d).unwrap_or_else(|| panic!("{w} {recorder}: no prediction"));
            let ratio = predicted_graph_us / graph_us;
            assert!(
                (0.8..1.25).contains(&ratio),
                "{w} {recorder}: {predicted_graph_us:.1} us predicted vs {graph_us:.1} us measured"
            );
        }
    }
}

#[test]
fn the_speed_up_is_within_1_5x_where_the_step_is_mostly_launches() {
    for w in ["moe", "mlp"] {
        let (eager, graph) = measured(w);
        let speedup = eager / graph;
        for (recorder, d) in diagnoses(w) {
            let (predicted, _) = prediction(&d).unwrap();
            let off = (predicted / speedup).max(speedup / predicted);
            assert!(
                off <= 1.5,
                "{w} {recorder}: predicted {predicted:.2}x, measured {speedup:.2}x"
            );
        }
    }
}

/// The decode step (308 framework ops for 56 kernels) is the known miss:
/// the recorders slow each op, not each launch, and the per-launch
/// correction leaves its traced eager time too high. The prediction still
/// recommends capture and errs high, never below what was measured.
#[test]
fn the_decode_step_is_over_predicted_not_under() {
    let (eager, graph) = measured("decode");
    for (recorder, d) in diagnoses("decode") {
        let (predicted, _) = prediction(&d).unwrap();
        assert!(predicted > eager / graph, "{recorder}: {predicted:.2}x");
    }
}

#[test]
fn the_compute_bound_step_gets_no_graph_recommendation() {
    for (recorder, d) in diagnoses("matmuls") {
        assert!(
            d.recommendations
                .iter()
                .all(|r| r.id != "capture_cuda_graph"),
            "{recorder}: {:?}",
            d.recommendations.iter().map(|r| &r.id).collect::<Vec<_>>()
        );
    }
}
