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
    assert!(t.verdict.contains("first is warm-up"), "{}", t.verdict);
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
    assert!(
        summary.verdict.contains("from the second step on"),
        "{}",
        summary.verdict
    );
}
