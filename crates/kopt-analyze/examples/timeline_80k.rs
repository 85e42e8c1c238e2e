//! How long the timeline analysis takes on 80,000 kernels (the step-period
//! search used to be quadratic: 26 s when the kernel order never repeats).
//!
//! cargo run --release -p kopt-analyze --example timeline_80k [N]

#[path = "../tests/support/trace_gen.rs"]
mod trace_gen;

use std::time::Instant;

use kopt_analyze::{analyze, timeline::repeated_period, AnalyzeOptions};
use kopt_ingest::{parse_kopt_trace, profile_from_timeline};

/// Kernel `i`'s name.
type Names = Box<dyn Fn(usize) -> String>;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(80_000);
    let cases: [(&str, Names); 3] = [
        (
            "distinct names, never repeating",
            Box::new(trace_gen::distinct),
        ),
        (
            "30 names in an order that never repeats",
            Box::new(trace_gen::shuffled(30)),
        ),
        (
            "a step of 2,000 kernels repeated",
            Box::new(|i| trace_gen::distinct(i % 2_000)),
        ),
    ];
    for (label, name) in cases {
        let names: Vec<String> = (0..n).map(&name).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let t = Instant::now();
        let period = repeated_period(&refs);
        let search = t.elapsed();

        let text = trace_gen::kopt_trace(n, &name);
        let t = Instant::now();
        let trace = parse_kopt_trace(&text, "bench.jsonl").expect("a valid trace");
        let parsed = t.elapsed();
        let t = Instant::now();
        let d = analyze(
            &profile_from_timeline(trace.timeline, "bench.jsonl", "kopt trace"),
            &AnalyzeOptions::default(),
        );
        let analysed = t.elapsed();
        let iterations = d.timeline.as_ref().and_then(|s| s.iterations);
        println!(
            "{n} kernels, {label}: period search {:.3} s (period {period:?}); parse {:.3} s; analyze {:.3} s (iterations {iterations:?})",
            search.as_secs_f64(),
            parsed.as_secs_f64(),
            analysed.as_secs_f64()
        );
    }
}
