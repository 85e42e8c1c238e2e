//! The run history's documents (`kopt history`, `show`, `diff`,
//! `calibration`). Everything in them was read back from a database, which
//! anyone who could write the file could have filled: every stored string
//! goes through [`escape::terminal`], so a run's name or command can neither
//! drive the terminal nor forge a line of kopt's own.

use std::fmt::Write as _;

use kopt_model::figure::ratio;
use kopt_model::format_duration_ns;
use kopt_model::history::{
    Calibration, DiffRow, DiffUnit, RunDiff, RunListing, RunShow, StoredReport,
    CALIBRATION_MIN_POINTS,
};

use crate::escape::{self, terminal as t};
use crate::{Format, Layout, Render};

/// A history document as the terminal shows it; the other formats wrap it
/// (Markdown a code block, HTML a `<pre>`) or give the data as JSON.
fn render_text<T: serde::Serialize>(doc: &T, text: String, format: Format) -> String {
    // The last guard: nothing but a line break of control characters.
    let text = escape::terminal_lines(&text).into_owned();
    match format {
        Format::Terminal => text,
        Format::Markdown => format!("```text\n{text}```\n"),
        Format::Html => format!("<pre>{}</pre>\n", escape::html(&text)),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(doc).unwrap_or_default();
            s.push('\n');
            s
        }
    }
}

impl Render for RunListing {
    fn render(&self, format: Format, _layout: Layout) -> String {
        let mut o = String::new();
        if self.rows.is_empty() && self.unreadable.is_empty() {
            let _ = writeln!(o, "no runs recorded in {}", t(&self.db));
        }
        for r in &self.rows {
            let _ = writeln!(
                o,
                "{:>5}  {}  {:<8} {}  | {}{}",
                r.id,
                t(&r.started_utc),
                t(&r.kind),
                t(&r.summary),
                t(&r.command),
                r.git_rev
                    .as_deref()
                    .map_or(String::new(), |g| format!("  @{}", t(g)))
            );
        }
        if let Some(first) = self.unreadable.first() {
            let _ = writeln!(
                o,
                "note: {} run(s) in {} cannot be read and are not listed ({}{})",
                self.unreadable.len(),
                t(&self.db),
                t(first),
                if self.unreadable.len() > 1 {
                    "; ..."
                } else {
                    ""
                }
            );
        }
        render_text(self, o, format)
    }
}

impl Render for RunShow {
    fn render(&self, format: Format, layout: Layout) -> String {
        let r = &self.row;
        let mut o = String::new();
        let _ = writeln!(o, "run {} ({}) at {}", r.id, t(&r.kind), t(&r.started_utc));
        let _ = writeln!(o, "command: {}", t(&r.command));
        for (k, v) in [
            ("device", &r.device),
            ("git", &r.git_rev),
            ("verdict", &r.verdict),
            ("run folder", &r.run_dir),
        ] {
            if let Some(v) = v {
                let _ = writeln!(o, "{k}: {}", t(v));
            }
        }
        let _ = writeln!(o, "summary: {}\n", t(&r.summary));
        // The stored report in the terminal's layout (each escapes its own text).
        let report = match &self.report {
            StoredReport::Diagnosis(d) => d.render(Format::Terminal, layout),
            StoredReport::Bench(b) => b.render(Format::Terminal, layout),
            StoredReport::Compare(c) => c.render(Format::Terminal, layout),
            StoredReport::Optimize(r) => r.render(Format::Terminal, layout),
            StoredReport::Tune(r) => r.render(Format::Terminal, layout),
            StoredReport::None => r.report_json.as_ref().map_or(String::new(), |j| {
                format!(
                    "(a report this kopt cannot read back: {} bytes of JSON)\n",
                    j.len()
                )
            }),
        };
        o.push_str(&report);
        render_text(self, o, format)
    }
}

impl Render for RunDiff {
    fn render(&self, format: Format, _layout: Layout) -> String {
        let d = self;
        let mut o = String::new();
        let _ = writeln!(
            o,
            "run {} ({}) vs run {} ({})",
            d.a.id,
            t(&d.a.summary),
            d.b.id,
            t(&d.b.summary)
        );
        let fmt = |v: Option<f64>| match (v, d.unit) {
            (None, _) => "-".to_string(),
            (Some(t), DiffUnit::KernelNs) => format_duration_ns(t),
            (Some(t), DiffUnit::MedianS) => format_duration_ns(t * 1e9),
            (Some(e), DiffUnit::RelL2) => format!("{e:.3e}"),
        };
        let change = |r: &DiffRow| match (r.a, r.b, r.change_pct()) {
            (_, _, Some(p)) => format!("{p:+.1}%"),
            (None, Some(_), _) => "new".into(),
            (Some(_), None, _) => "gone".into(),
            _ => "-".into(),
        };
        if let Some(total) = &d.total {
            let _ = writeln!(
                o,
                "{}: {} -> {} ({})",
                t(&total.name),
                fmt(total.a),
                fmt(total.b),
                change(total)
            );
        }
        let what = match d.unit {
            DiffUnit::KernelNs => "kernel",
            DiffUnit::MedianS => "variant or config (median)",
            DiffUnit::RelL2 => "tensor (rel L2)",
        };
        let _ = writeln!(
            o,
            "  {what:<40} {:>12} {:>12}  change",
            format!("run {}", d.a.id),
            format!("run {}", d.b.id)
        );
        for r in &d.rows {
            let _ = writeln!(
                o,
                "  {:<40} {:>12} {:>12}  {}",
                t(&r.name),
                fmt(r.a),
                fmt(r.b),
                change(r)
            );
        }
        render_text(self, o, format)
    }
}

impl Render for Calibration {
    fn render(&self, format: Format, _layout: Layout) -> String {
        let mut o = String::new();
        if self.points.is_empty() {
            let _ = writeln!(o, "no checked predictions in {} yet: kopt optimize records them (predicted and measured speed-up per candidate)", t(&self.db));
        }
        for c in &self.rules {
            let quoted = if c.points >= CALIBRATION_MIN_POINTS {
                "quoted in reports"
            } else {
                "not quoted yet"
            };
            let _ = writeln!(
                o,
                "{:<22} {:>3} point(s)  measured/predicted median {} ({} to {})  {quoted}",
                t(&c.rule),
                c.points,
                ratio(c.median_ratio, 2),
                ratio(c.min_ratio, 2),
                ratio(c.max_ratio, 2)
            );
        }
        for p in &self.points {
            let _ = writeln!(
                o,
                "  run {:>5}  {:<22} predicted {}x, measured {}x",
                p.run,
                t(&p.rule),
                ratio(p.predicted, 2),
                ratio(p.measured, 2)
            );
        }
        if !self.left_out.is_empty() {
            let _ = writeln!(
                o,
                "{} stored prediction(s) left out as implausible:",
                self.left_out.len()
            );
            for l in &self.left_out {
                let _ = writeln!(o, "  {}", t(l));
            }
        }
        render_text(self, o, format)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kopt_model::history::RunRow;

    fn row(id: i64, name: &str) -> RunRow {
        RunRow {
            id,
            kind: "bench".into(),
            started_utc: "2026-01-01T00:00:00Z".into(),
            command: format!("kopt bench -n {name}=./a"),
            device: Some(format!("GPU {name}")),
            git_rev: Some("abc".into()),
            summary: format!("{name} KEEP"),
            verdict: None,
            run_dir: None,
            report_json: None,
        }
    }

    /// A database anyone could write holds names that clear the screen,
    /// retitle the window, or start a line that reads like kopt's own error:
    /// none of it reaches the terminal as is.
    #[test]
    fn stored_text_cannot_drive_the_terminal_or_forge_a_line() {
        let evil = "x\u{1b}[2J\u{1b}]0;pwned\u{7}\nkopt: error: forged\r\u{202e}";
        let docs: Vec<Box<dyn Render>> = vec![
            Box::new(RunListing {
                db: format!("h{evil}.db"),
                rows: vec![row(1, evil)],
                unreadable: vec![evil.into()],
            }),
            Box::new(RunListing {
                db: format!("h{evil}.db"),
                rows: Vec::new(),
                unreadable: Vec::new(),
            }),
            Box::new(RunShow {
                row: row(1, evil),
                report: StoredReport::None,
            }),
            Box::new(RunDiff {
                a: row(1, evil),
                b: row(2, evil),
                unit: DiffUnit::MedianS,
                total: None,
                rows: vec![DiffRow {
                    name: evil.into(),
                    a: Some(1.0),
                    b: None,
                }],
            }),
            Box::new(Calibration {
                db: evil.into(),
                rules: Vec::new(),
                points: Vec::new(),
                left_out: vec![evil.into()],
            }),
        ];
        for doc in &docs {
            for format in [Format::Terminal, Format::Markdown, Format::Html] {
                let text = doc.render(format, Layout::default());
                assert!(
                    !text.chars().any(|c| c != '\n' && escape::terminal(&c.to_string()).len() > c.len_utf8()),
                    "{format:?}:\n{text}"
                );
                assert!(
                    !text.lines().any(|l| l.starts_with("kopt: error")),
                    "{format:?}:\n{text}"
                );
                assert!(text.contains("\\u{1b}[2J"), "{format:?}:\n{text}");
            }
        }
    }

    #[test]
    fn listing_and_diff_keep_their_columns() {
        let listing = RunListing {
            db: "h.db".into(),
            rows: vec![row(7, "tiled")],
            unreadable: Vec::new(),
        };
        assert_eq!(
            listing.render(Format::Terminal, Layout::default()),
            "    7  2026-01-01T00:00:00Z  bench    tiled KEEP  | kopt bench -n tiled=./a  @abc\n"
        );
        let diff = RunDiff {
            a: row(1, "a"),
            b: row(2, "b"),
            unit: DiffUnit::KernelNs,
            total: Some(DiffRow {
                name: "kernel time".into(),
                a: Some(2000.0),
                b: Some(1000.0),
            }),
            rows: vec![DiffRow {
                name: "gemm".into(),
                a: None,
                b: Some(1000.0),
            }],
        };
        let text = diff.render(Format::Terminal, Layout::default());
        assert!(
            text.starts_with("run 1 (a KEEP) vs run 2 (b KEEP)\nkernel time: "),
            "{text}"
        );
        assert!(
            text.contains("(-50.0%)") && text.contains("  gemm "),
            "{text}"
        );
        assert!(text.trim_end().ends_with("new"), "{text}");
        let json: serde_json::Value =
            serde_json::from_str(&diff.render(Format::Json, Layout::default())).unwrap();
        assert_eq!(json["unit"], "kernel_ns");
    }
}
