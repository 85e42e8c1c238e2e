//! `kopt bench`'s report in every format, from the typed [`BenchReport`].

use std::fmt::Write as _;

use kopt_model::{format_duration_ns, BenchReport, VariantResult};

use crate::bench_html::{page, VariantView};
use crate::Format;

fn median(v: &VariantResult) -> String {
    format_duration_ns(v.median_s * 1e9)
}

fn noise(v: &VariantResult) -> String {
    v.relative_noise
        .map_or("-".into(), |n| format!("{:.2}%", 100.0 * n))
}

fn verdict(v: &VariantResult) -> &str {
    v.verdict.as_ref().map_or("baseline", |d| d.kind.as_str())
}

/// The report as text in `format`.
pub fn render_bench(r: &BenchReport, format: Format) -> String {
    match format {
        Format::Json => {
            let mut s = serde_json::to_string_pretty(r).unwrap_or_default();
            s.push('\n');
            s
        }
        Format::Html => {
            let views: Vec<VariantView> = r
                .variants
                .iter()
                .map(|v| VariantView {
                    name: v.name.clone(),
                    command: v.command.clone(),
                    source: v.source.clone(),
                    samples: v.values_s.clone(),
                    median: median(v),
                    speedup: format!("{:.3}x", v.speedup_vs_first),
                    noise: noise(v),
                    interval: v
                        .ratio_interval
                        .map_or("-".into(), |i| format!("[{:.3}, {:.3}]", i.low, i.high)),
                    verdict: verdict(v).into(),
                    reason: v
                        .verdict
                        .as_ref()
                        .map_or(String::new(), |d| d.reason.clone()),
                })
                .collect();
            page(&views, r.threshold)
        }
        Format::Markdown => markdown(r),
        Format::Terminal => terminal(r),
    }
}

/// Seed 003's ablation table.
fn markdown(r: &BenchReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "| Version | Median | Speedup vs first | Samples | Noise | Verdict vs first |"
    );
    let _ = writeln!(o, "|---|--:|--:|--:|--:|---|");
    for v in &r.variants {
        let _ = writeln!(
            o,
            "| {} | {} | {:.3}x | {} | {} | {} |",
            v.name,
            median(v),
            v.speedup_vs_first,
            v.samples,
            noise(v),
            verdict(v)
        );
    }
    o
}

fn terminal(r: &BenchReport) -> String {
    let mut o = String::new();
    for v in &r.variants {
        let _ = writeln!(
            o,
            "{:<14} {:>12} {:>8.3}x {:>5} samples  noise {:>7}  {}",
            v.name,
            median(v),
            v.speedup_vs_first,
            v.samples,
            noise(v),
            verdict(v)
        );
        if let Some(d) = &v.verdict {
            let _ = writeln!(o, "  {}; {}", d.reason, d.next);
        }
        let _ = writeln!(o, "  timed by: {}", v.source);
        for p in &v.check_problems {
            let _ = writeln!(o, "  correctness: {p}");
        }
    }
    o
}
