//! Graph-capture predictions against what was measured on an H200, two
//! sessions, two machines (both made by scripts/checks/predictions/run.sh):
//! four PyTorch steps, each traced with kopt's tracer and with
//! torch.profiler, and timed bare (eager vs CUDA-graph replay, same call).
//! fixtures/predictions-h200 has no bare run (kopt's tracer cost comes from
//! its per-launch constant); fixtures/predictions-h200-bare has the bare
//! run `kopt trace` now makes (the steps timed untraced).

mod support;

use kopt_analyze::{analyze, AnalyzeOptions};
use kopt_ingest::{
    profile_from_timeline, profile_from_trace, read_bare_steps, read_kineto, read_kopt_trace,
};
use kopt_model::Diagnosis;
use support::{fixture, measured, off};

/// The session without a bare run, and the ones with it (an H200, then an
/// H100 whose host was noisy: its bare eager steps varied by a third).
const OLD: &str = "predictions-h200";
const BARE: &str = "predictions-h200-bare";
const BARE_H100: &str = "predictions-h100-bare";

fn diagnoses(set: &str, workload: &str) -> [(&'static str, Diagnosis); 2] {
    let plain = fixture(set, &format!("{workload}.trace.jsonl"));
    let trace = if plain.is_file() {
        plain
    } else {
        fixture(set, &format!("{workload}.trace.jsonl.gz"))
    };
    let mut kopt = read_kopt_trace(&trace).unwrap();
    let bare = fixture(set, &format!("{workload}.bare_steps.jsonl"));
    if bare.is_file() {
        kopt.timeline.bare_steps = read_bare_steps(&bare).unwrap();
    }
    let torch = read_kineto(&fixture(set, &format!("{workload}.pt.trace.json.gz"))).unwrap();
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
    // The timeline's prediction: the recommendation drops its figure where
    // the range spans more than 3x (the ranking's rule), the model keeps it.
    d.recommendations
        .iter()
        .find(|r| r.id == "capture_cuda_graph")?;
    Some((p.speedup.estimate, p.graph_per_step_ns / 1e3))
}

fn graph_prediction(d: &Diagnosis) -> &kopt_model::GraphPrediction {
    d.timeline
        .as_ref()
        .and_then(|t| t.graph_prediction.as_ref())
        .expect("a graph-capture prediction")
}

fn assert_within_1_5x(set: &str, w: &str, d: &Diagnosis, measured: f64) {
    let (predicted, _) = prediction(d).unwrap();
    assert!(
        off(predicted, measured) <= 1.5,
        "{set} {w}: predicted {predicted:.2}x, measured {measured:.2}x"
    );
}

#[test]
fn the_time_after_capture_is_predicted_within_a_quarter() {
    for set in [OLD, BARE, BARE_H100] {
        for w in ["moe", "mlp", "decode"] {
            let (_, graph_us) = measured(set, w);
            for (recorder, d) in diagnoses(set, w) {
                let (_, predicted_graph_us) =
                    prediction(&d).unwrap_or_else(|| panic!("{set} {w} {recorder}: no prediction"));
                let ratio = predicted_graph_us / graph_us;
                assert!(
                    (0.8..1.25).contains(&ratio),
                    "{set} {w} {recorder}: {predicted_graph_us:.1} us predicted vs {graph_us:.1} us measured"
                );
            }
        }
    }
}

/// With the bare run, every launch-bound step is within 1.5x of what was
/// measured, the decode step (308 framework ops for 56 kernels) included.
#[test]
fn with_a_bare_run_every_step_is_within_1_5x() {
    for (set, w) in [BARE, BARE_H100]
        .into_iter()
        .flat_map(|s| ["moe", "mlp", "decode"].map(|w| (s, w)))
    {
        let (eager, graph) = measured(set, w);
        let [(_, d), _] = diagnoses(set, w);
        let g = graph_prediction(&d);
        assert!(
            g.eager_measured_bare,
            "{set} {w}: the bare steps were not used"
        );
        assert_within_1_5x(set, w, &d, eager / graph);
    }
}

/// torch.profiler traces alone: the profiler's cost taken as its slowdown
/// of the step (x2.1, `kopt_model::KINETO_SLOWDOWN`). Within 1.5x on every
/// launch-bound step of the three sets but the morning's decode step, which
/// both recorders slowed twice as much as in the afternoon (x3.75); the
/// prediction's range holds every measured speed-up.
#[test]
fn torch_profiler_traces_are_within_1_5x_or_within_their_range() {
    for set in [OLD, BARE, BARE_H100] {
        for w in ["moe", "mlp", "decode"] {
            let (eager, graph) = measured(set, w);
            let [_, (_, d)] = diagnoses(set, w);
            assert!(d
                .recommendations
                .iter()
                .any(|r| r.id == "capture_cuda_graph"));
            let sp = graph_prediction(&d).speedup.clone();
            let got = eager / graph;
            assert!(
                sp.low <= got && got <= sp.high,
                "{set} {w}: {got:.2}x outside {sp:?}"
            );
            if (set, w) == (OLD, "decode") {
                assert!(sp.estimate > 1.5 * got, "{set} {w}: {sp:?}");
            } else {
                assert_within_1_5x(set, w, &d, got);
            }
        }
    }
}

#[test]
fn without_a_bare_run_the_tracer_constant_holds_where_the_step_is_mostly_launches() {
    for w in ["moe", "mlp"] {
        let (eager, graph) = measured(OLD, w);
        let [(_, d), _] = diagnoses(OLD, w);
        assert_within_1_5x(OLD, w, &d, eager / graph);
    }
}

/// The decode step without a bare run is the known miss: on that machine
/// kopt's tracer slowed each framework op, not each launch (19.8 us a
/// launch), and the per-launch correction leaves its eager time too high.
/// The prediction still recommends capture and errs high, never low.
#[test]
fn without_a_bare_run_the_decode_step_is_over_predicted_not_under() {
    let (eager, graph) = measured(OLD, "decode");
    let [(_, d), _] = diagnoses(OLD, "decode");
    let (predicted, _) = prediction(&d).unwrap();
    assert!(predicted > eager / graph, "{predicted:.2}x");
}

#[test]
fn the_compute_bound_step_gets_no_graph_recommendation() {
    for set in [OLD, BARE, BARE_H100] {
        for (recorder, d) in diagnoses(set, "matmuls") {
            assert!(
                d.recommendations
                    .iter()
                    .all(|r| r.id != "capture_cuda_graph"),
                "{set} {recorder}: {:?}",
                d.recommendations.iter().map(|r| &r.id).collect::<Vec<_>>()
            );
        }
    }
}

/// Bare steps of another range family than the traced steps' are not the
/// eager step: the prediction falls back to the per-launch constant.
#[test]
fn bare_steps_of_another_range_are_not_used() {
    let mut kopt = read_kopt_trace(&fixture(BARE, "decode.trace.jsonl.gz")).unwrap();
    let mut bare = read_bare_steps(&fixture(BARE, "decode.bare_steps.jsonl"))
        .unwrap()
        .unwrap();
    bare.range = "not_the_step".into();
    kopt.timeline.bare_steps = Some(bare);
    let d = analyze(
        &profile_from_timeline(kopt.timeline, "decode", "kopt trace"),
        &AnalyzeOptions::default(),
    );
    let g = graph_prediction(&d);
    assert!(!g.eager_measured_bare);
    assert!(
        g.speedup.model.contains("launches x"),
        "{}",
        g.speedup.model
    );
}
