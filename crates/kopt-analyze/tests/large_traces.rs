//! Traces far longer than the fixtures: a step-period search that was
//! quadratic made 80,000 kernels whose order never repeats take 26 s. No
//! timing is asserted here (see `examples/timeline_80k.rs` for the figure):
//! these check that such traces are analysed and the summary is sane.

#[path = "support/trace_gen.rs"]
mod trace_gen;

use kopt_analyze::{analyze, timeline::repeated_period, AnalyzeOptions};
use kopt_ingest::{parse_kopt_trace, profile_from_timeline};

fn summary(text: &str) -> kopt_model::TimelineSummary {
    let trace = parse_kopt_trace(text, "large.jsonl").unwrap();
    let d = analyze(
        &profile_from_timeline(trace.timeline, "large.jsonl", "kopt trace"),
        &AnalyzeOptions::default(),
    );
    d.timeline
        .expect("a trace with kernels has a timeline summary")
}

#[test]
fn eighty_thousand_kernels_that_never_repeat_are_analysed() {
    let s = summary(&trace_gen::kopt_trace(80_000, trace_gen::distinct));
    assert_eq!(s.kernels, 80_000, "no period: no warm-up step is cut");
    assert_eq!(s.iterations, None, "nothing repeats");
    assert_eq!(s.kernel_launch_calls, 80_000);
    assert_eq!(s.gpu_busy_ns, 80_000 * 3_000);
    // 3 us of GPU work every 10 us, launches of 5 us: launch bound.
    assert!((s.busy_pct - 30.0).abs() < 0.1, "{}", s.busy_pct);
    assert!(s.launch_bound, "{}", s.verdict);
    assert_eq!(s.median_kernel_ns, Some(3_000.0));
}

#[test]
fn few_names_in_an_order_that_never_repeats_have_no_period() {
    let names: Vec<String> = (0..20_000).map(trace_gen::shuffled(30)).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    assert_eq!(repeated_period(&names), None);
    let s = summary(&trace_gen::kopt_trace(20_000, trace_gen::shuffled(30)));
    assert_eq!((s.kernels, s.iterations), (20_000, None));
}

#[test]
fn a_long_repeating_step_is_still_found() {
    // 40 steps of 2,000 kernels: the first step is cut as warm-up.
    let s = summary(&trace_gen::kopt_trace(80_000, |i| {
        trace_gen::distinct(i % 2_000)
    }));
    assert_eq!(s.iterations, Some(39), "{}", s.verdict);
    assert_eq!(s.kernels, 78_000);
    assert_eq!(s.kernels_per_iteration, Some(2_000.0));
    assert_eq!(s.steady_state.as_ref().map(|w| w.warmup_steps), Some(1));
    assert_eq!(
        s.steps.as_ref().map(|w| w.source),
        Some(kopt_model::StepSource::KernelPattern)
    );
    assert!(s.verdict.contains("1 warm-up step"), "{}", s.verdict);
}
