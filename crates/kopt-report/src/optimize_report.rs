//! `kopt optimize`'s report: the baseline in brief, every candidate with its
//! reason, prediction, correctness and verdict, then the ablation table.

use kopt_model::figure::ratio;
use std::fmt::Write as _;

use kopt_model::optimize::{CandidateResult, KeptProfile, OptimizeReport, StepProfile};

use crate::{Format, Layout, Render};

fn speedup(v: Option<f64>) -> String {
    v.map_or("-".into(), |s| format!("{}x", ratio(s, 2)))
}

fn correctness(c: &CandidateResult) -> &'static str {
    match &c.correctness {
        Some(r) if r.passed => "PASS",
        Some(_) => "FAIL",
        None => "-",
    }
}

fn verdict(c: &CandidateResult) -> &str {
    match (&c.verdict, c.tried) {
        (Some(v), _) => v.kind.as_str(),
        (None, false) => "skipped",
        (None, true) => "-",
    }
}

fn why(c: &CandidateResult) -> String {
    let failing: Vec<String> = c
        .correctness
        .iter()
        .filter(|r| !r.passed)
        .flat_map(|r| {
            r.problems
                .iter()
                .cloned()
                .chain(
                    r.tensors
                        .iter()
                        .filter(|t| !t.passed)
                        .map(|t| match t.rel_l2 {
                            Some(e) => format!("{} (rel L2 {e:.1e} > {:.0e})", t.name, t.tolerance),
                            None => t.name.clone(),
                        }),
                )
        })
        .collect();
    match (&c.failure, &c.verdict) {
        (Some(f), _) => format!("could not {}: {}", f.phase, f.error),
        (None, Some(v)) if c.tried && !failing.is_empty() => {
            format!("{}: {}", v.reason, failing.join(", "))
        }
        (None, Some(v)) if c.tried => v.reason.clone(),
        _ => c.reason.clone(),
    }
}

/// The report as text in `format` (HTML gets the Markdown).
impl Render for OptimizeReport {
    fn render(&self, format: Format, _layout: Layout) -> String {
        let r = self;
        if format == Format::Json {
            let mut s = serde_json::to_string_pretty(r).unwrap_or_default();
            s.push('\n');
            return s;
        }
        let md = format != Format::Terminal;
        let mut o = String::new();
        let b = &r.baseline;
        let _ = writeln!(
            o,
            "{}kopt optimize: {} on {}",
            if md { "## " } else { "" },
            r.module,
            r.device.as_deref().unwrap_or("unknown GPU")
        );
        let _ = writeln!(
            o,
            "{}Baseline: primary {} / {}; {}{}",
            if md { "\n" } else { "" },
            b.primary_component.as_deref().unwrap_or("-"),
            b.primary_type.map_or("-".into(), |t| t.to_string()),
            b.busy_pct
                .map_or("no timeline".into(), |p| format!("GPU busy {p:.1}%")),
            if b.launch_bound { ", launch bound" } else { "" }
        );
        for n in &b.notes {
            let _ = writeln!(o, "{}note: {n}", if md { "- " } else { "  " });
        }
        let _ = writeln!(o);
        if md {
            let _ = writeln!(
                o,
                "| Candidate | Tried | Predicted | Measured | Correctness | Verdict | Why |"
            );
            let _ = writeln!(o, "|---|---|--:|--:|---|---|---|");
            for c in &r.candidates {
                let _ = writeln!(
                    o,
                    "| {} | {} | {} | {} | {} | {} | {} |",
                    c.name,
                    if c.tried { "yes" } else { "no" },
                    speedup(c.predicted_speedup),
                    speedup(c.measured_speedup),
                    correctness(c),
                    verdict(c),
                    crate::escape::markdown_cell(&why(c))
                );
            }
        } else {
            for c in &r.candidates {
                let _ = writeln!(
                    o,
                    "{:<28} {:<8} predicted {:>7}  measured {:>7}  correctness {:<4}",
                    c.name,
                    verdict(c),
                    speedup(c.predicted_speedup),
                    speedup(c.measured_speedup),
                    correctness(c)
                );
                let _ = writeln!(o, "  {}", why(c));
                if let Some(t) = c.tolerance.as_deref().filter(|_| c.tried) {
                    let _ = writeln!(o, "  checked with: {t}");
                }
                for p in c.correctness.iter().flat_map(|r| {
                    r.problems
                        .iter()
                        .chain(r.tensors.iter().flat_map(|t| &t.problems))
                }) {
                    let _ = writeln!(o, "  correctness: {p}");
                }
            }
        }
        let _ = writeln!(o);
        match r
            .best
            .as_ref()
            .and_then(|b| r.candidates.iter().find(|c| &c.name == b))
        {
            Some(c) => {
                let _ = writeln!(
                    o,
                    "Best: {} ({}), {} measured vs eager{}",
                    c.name,
                    c.description,
                    speedup(c.measured_speedup),
                    c.predicted_speedup.map_or(String::new(), |p| format!(
                        "; the diagnosis predicted {}x",
                        ratio(p, 2)
                    ))
                );
                if !c.by_hand.is_empty() {
                    let _ = writeln!(o, "\n{}By hand:\n", if md { "### " } else { "" });
                    for l in &c.by_hand {
                        let _ = writeln!(o, "{}{l}", if md { "    " } else { "  " });
                    }
                }
            }
            None => {
                let _ = writeln!(o, "Best: none kept: eager stays.");
            }
        }
        if let Some(a) = &r.ablation {
            let _ = writeln!(
                o,
                "\n{}Ablation (GPU time per step):\n",
                if md { "### " } else { "" }
            );
            o.push_str(&a.render(Format::Markdown, Layout::default()));
        }
        if let Some(k) = &r.kept_profile {
            kept_profile(&mut o, k, md);
        }
        let _ = writeln!(o, "\nRun folder: {}", r.run_dir);
        crate::escape::terminal_lines(&o).into_owned()
    }
}

fn per_step(p: Option<&StepProfile>, f: impl Fn(&StepProfile) -> String) -> String {
    p.map_or("-".into(), f)
}

fn count(v: f64) -> String {
    if (v - v.round()).abs() < 0.05 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// A row of the step comparison: its label and how a profile shows it.
type Row = (&'static str, fn(&StepProfile) -> String);

/// The kept result's traced steps beside eager's, then each one's kernels.
fn kept_profile(o: &mut String, k: &KeptProfile, md: bool) {
    let dur = kopt_model::format_duration_ns;
    let (e, kept) = (k.eager.as_ref(), k.kept.as_ref());
    let _ = writeln!(
        o,
        "\n{}Where the time went after the change ({} traced; steady state, CUPTI's cost per launch included):\n",
        if md { "### " } else { "" },
        k.variant
    );
    if let Some(err) = &k.error {
        let _ = writeln!(o, "{}not profiled: {err}", if md { "- " } else { "  " });
        if kept.is_none() && e.is_none() {
            return;
        }
        let _ = writeln!(o);
    }
    let rows: [Row; 5] = [
        ("step", |p| kopt_model::format_duration_ns(p.step_ns)),
        ("GPU busy per step", |p| {
            kopt_model::format_duration_ns(p.busy_per_step_ns)
        }),
        ("launch calls per step", |p| {
            if p.graph_launches_per_step > 0.0 {
                format!(
                    "{} ({} graph)",
                    count(p.launches_per_step),
                    count(p.graph_launches_per_step)
                )
            } else {
                count(p.launches_per_step)
            }
        }),
        ("kernels per step", |p| count(p.kernels_per_step)),
        ("steps traced", |p| p.steps.to_string()),
    ];
    let kept_col = format!("kept ({})", k.variant);
    if md {
        let _ = writeln!(
            o,
            "| | eager | {} |",
            crate::escape::markdown_cell(&kept_col)
        );
        let _ = writeln!(o, "|---|--:|--:|");
        for (label, f) in &rows {
            let _ = writeln!(
                o,
                "| {label} | {} | {} |",
                per_step(e, f),
                per_step(kept, f)
            );
        }
    } else {
        let _ = writeln!(o, "  {:<24} {:>16} {:>24}", "", "eager", kept_col);
        for (label, f) in &rows {
            let _ = writeln!(
                o,
                "  {label:<24} {:>16} {:>24}",
                per_step(e, f),
                per_step(kept, f)
            );
        }
    }
    for (who, p) in [(kept_col.as_str(), kept), ("eager", e)] {
        let Some(p) = p else { continue };
        let _ = writeln!(
            o,
            "\n{}{who}: kernels per step, most time first{}\n",
            if md { "#### " } else { "" },
            if md { "" } else { ":" }
        );
        if md {
            let _ = writeln!(
                o,
                "| Kernel | Time/step | Share | Launches/step | Of them in a graph |"
            );
            let _ = writeln!(o, "|---|--:|--:|--:|--:|");
        } else {
            let _ = writeln!(
                o,
                "  {:>10} {:>6} {:>9} {:>9}  kernel",
                "time/step", "share", "launches", "in graph"
            );
        }
        for kr in &p.kernels {
            let graph = if kr.in_graph > 0 {
                count(kr.in_graph as f64 / p.steps.max(1) as f64)
            } else {
                "-".into()
            };
            if md {
                let _ = writeln!(
                    o,
                    "| {} | {} | {:.1}% | {} | {graph} |",
                    crate::escape::markdown_cell(&kr.short_name),
                    dur(kr.ns_per_step),
                    kr.pct,
                    count(kr.launches_per_step)
                );
            } else {
                let _ = writeln!(
                    o,
                    "  {:>10} {:>5.1}% {:>9} {graph:>9}  {}",
                    dur(kr.ns_per_step),
                    kr.pct,
                    count(kr.launches_per_step),
                    kr.short_name
                );
            }
        }
        if p.other_kernels > 0 {
            let _ = writeln!(
                o,
                "{}{} other kernel(s): {:.1}% of kernel time",
                if md { "\n" } else { "  " },
                p.other_kernels,
                p.other_pct
            );
        }
        let _ = writeln!(
            o,
            "{}run folder: {}",
            if md { "\n" } else { "  " },
            p.run_dir
        );
    }
}
