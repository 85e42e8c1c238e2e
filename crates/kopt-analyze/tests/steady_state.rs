//! Issue #14: steps counted once, the outermost step found, start-up and
//! warm-up cut, the graph-capture prediction carried in JSON and text. On
//! synthetic traces (fixtures/synthetic-timelines, see its README) and on
//! recorded ones.

use std::path::PathBuf;

use kopt_analyze::{analyze, AnalyzeOptions};
use kopt_ingest::{profile_from_timeline, profile_from_trace, read_kineto, read_kopt_trace};
use kopt_model::{Diagnosis, StepSource};

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

#[test]
fn profiler_steps_in_cpu_and_gpu_form_count_once() {
    let trace = read_kineto(&fixture("synthetic-timelines/kineto_profiler_steps.json")).unwrap();
    assert_eq!(
        trace.timeline.ranges.len(),
        10,
        "the GPU copies are not steps of their own"
    );
    assert_eq!(trace.timeline.recorder, kopt_model::Recorder::Kineto);
    assert_eq!(trace.timeline.compute_capability.as_deref(), Some("9.0"));
    let d = analyze(
        &profile_from_trace(trace, "steps.json"),
        &AnalyzeOptions::default(),
    );
    let t = d.timeline.as_ref().unwrap();
    let steps = t.steps.as_ref().unwrap();
    assert_eq!(steps.source, StepSource::ProfilerStep);
    assert_eq!(steps.found, 10);
    assert_eq!(t.iterations, Some(10), "{}", t.verdict);
    assert_eq!(t.kernels_per_iteration, Some(3.0));
    assert!(
        t.verdict.contains("ProfilerStep#N markers"),
        "{}",
        t.verdict
    );
    // torch.profiler's cost: the step over its slowdown, at most the
    // highest per-launch cost measured.
    let p = t.graph_prediction.as_ref().unwrap();
    let e = p.eager_per_step_ns;
    let expected = (e * (1.0 - 1.0 / kopt_model::KINETO_SLOWDOWN))
        .min(p.launches_per_step * kopt_model::KINETO_MAX_NS_PER_LAUNCH)
        .min(e - p.busy_per_step_ns);
    assert!(
        (p.recorder_overhead_per_step_ns - expected).abs() < 1e-6 * e,
        "{} vs {expected}",
        p.recorder_overhead_per_step_ns
    );
}

/// A GPU-only copy of the steps (a trace without the CPU annotations) still gives the steps.
#[test]
fn gpu_annotations_alone_mark_the_steps() {
    let text =
        std::fs::read_to_string(fixture("synthetic-timelines/kineto_profiler_steps.json")).unwrap();
    let gpu_only = text.replace("\"user_annotation\"", "\"python_function\"");
    let trace = kopt_ingest::parse_kineto(gpu_only.as_bytes(), "gpu_only.json").unwrap();
    assert_eq!(trace.timeline.ranges.len(), 10);
}

fn mlp() -> Diagnosis {
    let trace = read_kopt_trace(&fixture("synthetic-timelines/kopt_mlp_layers.jsonl")).unwrap();
    analyze(
        &profile_from_timeline(trace.timeline, "mlp.jsonl", "kopt trace"),
        &AnalyzeOptions::default(),
    )
}

#[test]
fn nested_layers_give_the_step_not_the_layer() {
    let d = mlp();
    let t = d.timeline.as_ref().unwrap();
    let steps = t.steps.as_ref().unwrap();
    assert_eq!(steps.source, StepSource::HostGap, "{}", steps.detail);
    assert_eq!(steps.found, 12);
    assert_eq!(t.kernels_per_iteration, Some(24.0), "{}", t.verdict);
}

#[test]
fn start_up_idle_and_the_first_call_are_cut() {
    let d = mlp();
    let t = d.timeline.as_ref().unwrap();
    let ss = t.steady_state.as_ref().unwrap();
    // 80 ms before the first step, then the first step (4 ms first call) as warm-up.
    assert!(ss.startup_ns >= 80_000_000, "{ss:?}");
    assert_eq!(ss.warmup_steps, 1);
    assert_eq!(ss.steps, 11);
    assert_eq!(t.iterations, Some(11));
    assert!(
        t.verdict.contains("start-up before the first step"),
        "{}",
        t.verdict
    );
    // Per step: 25 launches 3 us apart plus the 150 us gap (225 us), 24 kernels of 1.5 us and a 1 us copy.
    let p = t.graph_prediction.as_ref().unwrap();
    assert!((p.eager_per_step_ns - 225_000.0).abs() < 1_000.0, "{p:?}");
    assert!((p.busy_per_step_ns - 37_000.0).abs() < 1_000.0, "{p:?}");
    // The window is the steady state only: 11 steps, not 96 ms.
    assert!(t.wall_ns < 3_000_000, "{}", t.wall_ns);
    // The tracer's own cost (24 kernel launches x 0.8 us) comes off the eager time.
    assert!((p.launches_per_step - 24.0).abs() < 1e-9, "{p:?}");
    assert!(
        (p.recorder_overhead_per_step_ns - 24.0 * kopt_model::KOPT_TRACER_NS_PER_LAUNCH).abs()
            < 1e-6
    );
    let expected = (p.eager_per_step_ns - p.recorder_overhead_per_step_ns)
        / (p.busy_per_step_ns + 24.0 * p.replay_ns_per_kernel);
    assert!((p.speedup.estimate - expected).abs() < 1e-9);
}

#[test]
fn the_graph_recommendation_carries_its_prediction() {
    let d = mlp();
    let r = d
        .recommendations
        .iter()
        .find(|r| r.id == "capture_cuda_graph")
        .unwrap();
    // The timeline's prediction, in the action and the estimate.
    let p = d
        .timeline
        .as_ref()
        .unwrap()
        .graph_prediction
        .as_ref()
        .unwrap();
    let sp = &p.speedup;
    assert!(sp.low <= sp.estimate && sp.estimate <= sp.high);
    assert!(sp.model.contains("this card's figure"), "{}", sp.model);
    let shown = format!("{:.1}x", sp.estimate);
    // No bare run: the recorder's cost per launch spans x0.375-1.22, so the
    // range is wider than 3x and the recommendation drops the figure: it
    // says so once, with why, and claims the figure nowhere (#41).
    assert!(sp.high / sp.low > 3.0, "{sp:?}");
    assert!(r.predicted_speedup.is_none() && r.gain.is_none());
    let why = r.withheld().expect("the withheld figure is said");
    assert!(why.contains("does not know"), "{why}");
    assert!(!r.action.contains(&shown), "{}", r.action);
    assert!(!r.evidence_shown().contains("Predicted"), "{}", r.evidence);
    assert_eq!(r.evidence.matches("No figure is given").count(), 1);
    // Every finding with a figure ranks above it; the primary bottleneck is #1.
    let at = d.recommendations.iter().position(|x| x.id == r.id).unwrap();
    assert!(d.recommendations[..at]
        .iter()
        .all(|x| x.predicted_speedup.is_some()));
    assert_eq!(d.recommendations[0].rank, 1);
    // JSON: the timeline's prediction keeps its four parts.
    let v = serde_json::to_value(p).unwrap();
    for k in ["estimate", "low", "high", "model"] {
        assert!(!v["speedup"][k].is_null(), "{k}");
    }
}

#[test]
fn the_trace_names_its_gpu_and_its_copies() {
    let d = mlp();
    assert_eq!(d.device.name, "NVIDIA H200");
    assert_eq!(d.device.compute_capability.as_deref(), Some("9.0"));
    assert_eq!(
        d.device.peak_source,
        kopt_model::PeakSource::DeviceAttributes
    );
    assert_eq!(d.device.peaks.dram_bytes_per_s, Some(4_814_304_000.0 * 1e3));
    assert!(
        d.notes.iter().all(|n| !n.contains("peaks unknown")),
        "{:?}",
        d.notes
    );
    let trace = read_kopt_trace(&fixture("synthetic-timelines/kopt_mlp_layers.jsonl")).unwrap();
    assert!(trace
        .timeline
        .activities
        .iter()
        .filter(|a| a.kind == kopt_model::ActivityKind::Memcpy)
        .all(|a| a.name == "Memcpy DtoD"));
}

#[test]
fn timeline_inputs_never_ask_for_a_timeline() {
    let traces = [
        mlp(),
        {
            let trace = read_kineto(&fixture("seed000-h200/moe_trace.json")).unwrap();
            analyze(
                &profile_from_trace(trace, "moe"),
                &AnalyzeOptions::default(),
            )
        },
        analyze(
            &kopt_ingest::read_run_folder(&fixture("profile-module-h200/run")).unwrap(),
            &AnalyzeOptions::default(),
        ),
    ];
    for d in &traces {
        assert!(d.timeline.is_some());
        for r in &d.recommendations {
            let text = format!(
                "{} {} {:?}",
                r.evidence,
                r.action,
                r.gain.as_ref().map(|g| &g.method)
            );
            assert!(
                !text.contains("with a timeline") && !text.contains("needs a timeline"),
                "{text}"
            );
        }
        for k in &d.kernels {
            for f in &k.findings {
                assert!(!f.evidence.contains("timeline is needed"), "{}", f.evidence);
            }
        }
    }
}

#[test]
fn a_compute_bound_step_gets_no_graph_capture() {
    // vk.cu: one 382 us kernel per step, GPU busy ~96% of the steady state.
    let trace = read_kopt_trace(&fixture("kopt-trace-h200/nvtx_vk_trace.jsonl")).unwrap();
    let d = analyze(
        &profile_from_timeline(trace.timeline, "vk", "kopt trace"),
        &AnalyzeOptions::default(),
    );
    let t = d.timeline.as_ref().unwrap();
    assert!(t.busy_pct > kopt_analyze::timeline::COMPUTE_BOUND_BUSY_PCT);
    assert!(d
        .recommendations
        .iter()
        .all(|r| r.id != "capture_cuda_graph"));
}

#[test]
fn the_profile_run_names_its_gpu_from_the_trace() {
    let p = kopt_ingest::read_run_folder(&fixture("profile-module-h200/run")).unwrap();
    assert_eq!(p.device.name, "NVIDIA H200");
    let d = analyze(&p, &AnalyzeOptions::default());
    let t = d.timeline.as_ref().unwrap();
    assert_eq!(t.steps.as_ref().unwrap().source, StepSource::Nvtx);
    assert!(t.steady_state.as_ref().unwrap().startup_ns > 0);
    // The copies are named, not "Memcpy kind 8".
    let tl = p.timeline.as_ref().unwrap();
    assert!(tl
        .activities
        .iter()
        .all(|a| !a.name.starts_with("Memcpy kind")));
}
