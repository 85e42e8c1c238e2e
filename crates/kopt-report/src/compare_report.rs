//! `kopt compare`'s report in every format, from the typed [`CompareReport`].

use std::fmt::Write as _;

use kopt_model::compare::{CompareReport, TensorComparison};

use crate::{Format, Layout, Render};

fn opt(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.3e}"))
}

fn verdict_line(r: &CompareReport) -> &'static str {
    if r.passed {
        "correctness: PASS"
    } else {
        "correctness: FAIL (verdict REVERT)"
    }
}

fn status(c: &TensorComparison) -> &'static str {
    if c.passed {
        "PASS"
    } else {
        "FAIL"
    }
}

/// One tensor's figures as the table and the terminal show them.
struct Cells([String; 9]);

impl Cells {
    fn of(c: &TensorComparison) -> Cells {
        Cells([
            c.name.clone(),
            status(c).into(),
            opt(c.rel_l2),
            format!("{:.1e}", c.tolerance),
            opt(c.max_abs),
            format!("{}/{}", c.nan.0, c.nan.1),
            format!("{}/{}", c.inf.0, c.inf.1),
            format!("{} {:?}", c.reference_dtype, c.reference_shape),
            format!("{} {:?}", c.candidate_dtype, c.candidate_shape),
        ])
    }
}

/// The report as text in `format` (HTML gets the Markdown table: a gate's
/// result is a table, not a page).
impl Render for CompareReport {
    fn render(&self, format: Format, _layout: Layout) -> String {
        let r = self;
        let mut o = String::new();
        match format {
            Format::Json => {
                o = serde_json::to_string_pretty(r).unwrap_or_default();
                o.push('\n');
            }
            Format::Markdown | Format::Html => {
                let _ = writeln!(
                o,
                "| Tensor | Result | Rel L2 | Tolerance | Max abs | NaN ref/cand | Inf ref/cand | Reference | Candidate |"
            );
                let _ = writeln!(o, "|---|---|--:|--:|--:|--:|--:|---|---|");
                for c in &r.tensors {
                    let cells = Cells::of(c)
                        .0
                        .map(|cell| crate::escape::markdown_cell(&cell));
                    let _ = writeln!(o, "| {} |", cells.join(" | "));
                }
                let _ = writeln!(o);
                for p in r
                    .problems
                    .iter()
                    .chain(r.tensors.iter().flat_map(|c| &c.problems))
                {
                    let _ = writeln!(o, "- problem: {p}");
                }
                let _ = writeln!(o, "**{}**", verdict_line(r));
            }
            Format::Terminal => {
                for c in &r.tensors {
                    let [name, result, rel_l2, tol, max_abs, nan, inf, reference, candidate] =
                        Cells::of(c).0;
                    let _ = writeln!(
                    o,
                    "{name}: {result}  rel L2 {rel_l2}  (tolerance {tol}), max abs {max_abs}, NaN {nan}, Inf {inf}  [{reference} vs {candidate}]"
                );
                    for p in &c.problems {
                        let _ = writeln!(o, "  problem: {p}");
                    }
                    for w in &c.warnings {
                        let _ = writeln!(o, "  warning: {w}");
                    }
                }
                for p in &r.problems {
                    let _ = writeln!(o, "problem: {p}");
                }
                let _ = writeln!(o, "{}", verdict_line(r));
            }
        }
        if format == Format::Json {
            o
        } else {
            // Tensor names and problems come from the user's files.
            crate::escape::terminal_lines(&o).into_owned()
        }
    }
}
