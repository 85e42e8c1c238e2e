//! `kopt bench`'s report in every format, from the typed [`BenchReport`].

use kopt_model::figure::{figure, ratio};
use std::fmt::Write as _;

use kopt_model::{format_duration_ns, BenchReport, VariantResult};

use crate::bench_html::{page, VariantView};
use crate::{Format, Layout, Render};

fn median(v: &VariantResult) -> String {
    format_duration_ns(v.median_s * 1e9)
}

fn noise(v: &VariantResult) -> String {
    v.relative_noise
        .map_or("-".into(), |n| format!("{}%", figure(100.0 * n, 2)))
}

fn verdict(v: &VariantResult) -> &str {
    v.verdict.as_ref().map_or("baseline", |d| d.kind.as_str())
}

/// The report as text in `format`.
impl Render for BenchReport {
    fn render(&self, format: Format, _layout: Layout) -> String {
        let r = self;
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
                        speedup: format!("{}x", ratio(v.speedup_vs_first, 3)),
                        noise: noise(v),
                        interval: v.ratio_interval.map_or("-".into(), |i| {
                            format!("[{}, {}]", ratio(i.low, 3), ratio(i.high, 3))
                        }),
                        verdict: verdict(v).into(),
                        reason: v
                            .verdict
                            .as_ref()
                            .map_or(String::new(), |d| d.reason.clone()),
                    })
                    .collect();
                crate::escape::html_document(&page(&views, r.threshold, &r.notes)).into_owned()
            }
            // Names, commands and problems come from the user's programs: no
            // control character of theirs reaches the terminal.
            Format::Markdown => crate::escape::terminal_lines(&markdown(r)).into_owned(),
            Format::Terminal => crate::escape::terminal_lines(&terminal(r)).into_owned(),
        }
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
            "| {} | {} | {}x | {} | {} | {} |",
            crate::escape::markdown_cell(&v.name),
            median(v),
            ratio(v.speedup_vs_first, 3),
            v.samples,
            noise(v),
            verdict(v)
        );
    }
    for n in &r.notes {
        let _ = writeln!(o, "\nNote: {n}");
    }
    o
}

fn terminal(r: &BenchReport) -> String {
    let mut o = String::new();
    for v in &r.variants {
        let _ = writeln!(
            o,
            "{:<14} {:>12} {:>8}x {:>5} samples  noise {:>7}  {}",
            v.name,
            median(v),
            ratio(v.speedup_vs_first, 3),
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
    for n in &r.notes {
        let _ = writeln!(o, "note: {n}");
    }
    o
}

/// The in-process gate's report (`kopt.bench(baseline=fn, candidate=fn)`):
/// per shape its warm A/B and, when asked, the L2-flushed one beside it, in
/// the bench report's own formats; the overall verdict last.
impl Render for kopt_model::GateReport {
    fn render(&self, format: Format, layout: Layout) -> String {
        render_gate(self, format, layout)
    }
}

fn render_gate(r: &kopt_model::GateReport, format: Format, layout: Layout) -> String {
    if format == Format::Json {
        let mut s = serde_json::to_string_pretty(r).unwrap_or_default();
        s.push('\n');
        return s;
    }
    let md = format == Format::Markdown;
    let mut out = String::new();
    for s in &r.shapes {
        let title = format!("shape {} ({} checked calls)", s.shape, s.checked_calls);
        out.push_str(&if md {
            format!("### {title}\n\n")
        } else {
            format!("{title}\n")
        });
        out.push_str(&s.warm.render(format, layout));
        if let Some(f) = &s.flushed {
            out.push_str(if md {
                "\nL2 flushed before each call:\n\n"
            } else {
                "L2 flushed before each call:\n"
            });
            out.push_str(&f.render(format, layout));
        }
        for x in &s.suspect {
            out.push_str(&format!("SUSPECT: {}: {}\n", x.reason, x.detail));
        }
        out.push('\n');
    }
    for n in &r.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out.push_str(&format!(
        "verdict: {} ({} shape(s), {:.2} s)\n",
        r.verdict,
        r.shapes.len(),
        r.seconds
    ));
    crate::escape::terminal_lines(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kopt_model::{BenchReport, Interval, Verdict, VerdictKind};

    fn report(name: &str) -> BenchReport {
        let v = |name: &str, verdict: Option<Verdict>| VariantResult {
            name: name.into(),
            command: format!("./{name}"),
            source: "wall time of the whole process".into(),
            samples: 3,
            values_s: vec![1e-3, 1.1e-3, 0.9e-3],
            outliers: 0,
            median_s: 1e-3,
            relative_noise: Some(0.01),
            speedup_vs_first: 1.25,
            ratio_interval: verdict.as_ref().map(|_| Interval {
                estimate: 0.8,
                low: 0.78,
                high: 0.82,
                confidence: 0.95,
            }),
            verdict,
            correct: None,
            check_problems: Vec::new(),
        };
        BenchReport {
            schema: kopt_model::SCHEMA.into(),
            threshold: 0.05,
            noise: 0.01,
            seed: 42,
            device: None,
            notes: Vec::new(),
            variants: vec![
                v("base", None),
                v(
                    name,
                    Some(Verdict {
                        kind: VerdictKind::Keep,
                        reason: "faster".into(),
                        next: "keep".into(),
                    }),
                ),
            ],
            verdict: VerdictKind::Keep,
        }
    }

    #[test]
    fn every_format_shows_the_verdicts_and_no_control_character() {
        let r = report("tiled\u{1b}[31m\u{7}");
        for f in [Format::Terminal, Format::Markdown] {
            let text = r.render(f, Layout::default());
            assert!(text.contains("KEEP") && text.contains("baseline"), "{text}");
            assert!(
                !text.contains('\u{1b}') && !text.contains('\u{7}'),
                "{text}"
            );
        }
        let json: BenchReport =
            serde_json::from_str(&r.render(Format::Json, Layout::default())).unwrap();
        assert_eq!(json, r);
        let page = r.render(Format::Html, Layout::default());
        assert!(page.contains("KEEP") && page.contains("[0.780, 0.820]"));
    }

    /// L4: a stored bench may hold figures up to 1e21 (the read-back
    /// check's ceiling); they print in words or scientific notation, not
    /// as 22-digit numbers, in every format.
    #[test]
    fn extreme_stored_figures_print_sanely() {
        let mut r = report("huge");
        r.variants[1].speedup_vs_first = 1e21;
        r.variants[1].relative_noise = Some(1e19);
        if let Some(i) = r.variants[1].ratio_interval.as_mut() {
            i.low = 5e-324;
        }
        for f in [Format::Terminal, Format::Markdown, Format::Html] {
            let text = r.render(f, Layout::default());
            assert!(text.contains("over 1000x"), "{f:?}: {text}");
            assert!(!text.contains("e-324"), "{f:?}: {text}");
            let longest = text
                .split(|c: char| !c.is_ascii_digit())
                .map(str::len)
                .max()
                .unwrap_or(0);
            assert!(longest < 16, "{f:?}: a {longest}-digit figure: {text}");
        }
    }
}
