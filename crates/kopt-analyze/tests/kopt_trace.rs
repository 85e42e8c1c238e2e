//! kopt's own CUPTI trace of seed 000's MoE step, recorded on an H200.

use std::path::PathBuf;

use kopt_analyze::{analyze, AnalyzeOptions};
use kopt_ingest::{profile_from_timeline, read_kopt_trace};
use kopt_model::BottleneckClass;

#[test]
fn moe_step_from_kopts_tracer_is_launch_bound_after_warm_up() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/kopt-trace-h200/moe_trace.jsonl");
    let trace = read_kopt_trace(&path).unwrap();
    assert!(
        trace.ended,
        "the tracer's exit handler wrote the end record"
    );
    assert_eq!(trace.dropped_records, 0);
    let kernels = trace
        .timeline
        .activities
        .iter()
        .filter(|a| a.kind == kopt_model::ActivityKind::Kernel)
        .count();
    assert_eq!(kernels, 121);
    // Names were mangled by CUPTI and demangled by kopt.
    assert!(trace
        .timeline
        .activities
        .iter()
        .any(|a| a.name.contains("gatherTopK<")));
    let d = analyze(
        &profile_from_timeline(trace.timeline, "moe_trace.jsonl", "kopt trace"),
        &AnalyzeOptions::default(),
    );
    let t = d.timeline.as_ref().unwrap();
    assert!(t.launch_bound);
    // Steady state: the start-up before the first step and the warm-up
    // steps (the first call's lazy loading, 128 ms) are cut, and said so.
    let ss = t.steady_state.as_ref().expect("a steady-state window");
    assert!(ss.startup_ns > 100_000_000, "{ss:?}");
    assert!(ss.warmup_steps >= 1, "{ss:?}");
    assert!(t.verdict.contains("warm-up step"), "{}", t.verdict);
    assert!(
        t.verdict.contains("start-up before the first step"),
        "{}",
        t.verdict
    );
    assert_eq!(t.iterations, Some(ss.steps));
    assert_eq!(t.kernels_per_iteration, Some(6.0));
    // The graph-capture recommendation carries its prediction, in JSON and text.
    let r = &d.recommendations[0];
    assert_eq!(r.id, "capture_cuda_graph");
    let sp = r.predicted_speedup.as_ref().expect("predicted_speedup");
    assert!(sp.low <= sp.estimate && sp.estimate <= sp.high, "{sp:?}");
    assert!(sp.estimate > 1.0);
    assert!(
        r.action.contains(&format!("{:.1}x", sp.estimate)),
        "{}",
        r.action
    );
    let p = t.graph_prediction.as_ref().unwrap();
    assert_eq!(
        p.recorder_ns_per_launch,
        kopt_model::KOPT_TRACER_NS_PER_LAUNCH
    );
    assert!(p.recorder_overhead_per_step_ns > 0.0);
    assert!(p.eager_corrected_per_step_ns < p.eager_per_step_ns);
    assert_eq!(
        d.primary.as_ref().unwrap().class,
        BottleneckClass::LaunchOverhead
    );
    // GPU-busy time per step: about 18 us (graph replay measured 22.3 us on an H200).
    let per_step = t.busy_per_iteration_ns.unwrap();
    assert!(per_step > 15_000.0 && per_step < 22_300.0, "{per_step}");
}

#[test]
fn nvtx_ranges_from_the_tracer_mark_iterations_and_time_them() {
    // vk.cu (scripts/bench/verdict_trials) under `kopt trace` on an H200:
    // 3 warm-up launches, then 20 repetitions each inside nvtxRangePush("step").
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/kopt-trace-h200/nvtx_vk_trace.jsonl");
    let trace = read_kopt_trace(&path).unwrap();
    assert_eq!(trace.lost_buffers, 0);
    let t = &trace.timeline;
    assert_eq!(t.ranges.len(), 20);
    assert!(t
        .ranges
        .iter()
        .all(|r| r.name == "step" && r.end_ns > r.start_ns));
    let (family, per) = kopt_analyze::timeline::gpu_time_per_range(t, None).unwrap();
    assert_eq!(family, "step");
    assert_eq!(
        per.len(),
        20,
        "one kernel per step, launched inside the range"
    );
    // The kernel takes ~382 us on the H200 (vk's own CUDA events said ~388 us).
    assert!(
        per.iter().all(|ns| (370_000..400_000).contains(ns)),
        "{per:?}"
    );
    let summary = kopt_analyze::timeline::summarize(t).unwrap();
    // The first step is the warm-up: the window starts at the second.
    assert_eq!(summary.iterations, Some(19));
    assert!(!summary.launch_bound, "{}", summary.verdict);
    let steps = summary.steps.as_ref().unwrap();
    assert_eq!(steps.source, kopt_model::StepSource::Nvtx);
    assert_eq!((steps.found, steps.family.as_deref()), (20, Some("step")));
    let ss = summary.steady_state.as_ref().unwrap();
    assert_eq!((ss.steps, ss.warmup_steps), (19, 1));
    assert!(
        summary.verdict.contains("found from NVTX ranges"),
        "{}",
        summary.verdict
    );
    // GPU bound (96%): no graph capture is recommended.
    assert!(summary.busy_pct > 90.0);
    let d = analyze(
        &profile_from_timeline(trace.timeline.clone(), "nvtx_vk_trace.jsonl", "kopt trace"),
        &AnalyzeOptions::default(),
    );
    assert!(d
        .recommendations
        .iter()
        .all(|r| r.id != "capture_cuda_graph"));
}
