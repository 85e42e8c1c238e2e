//! The default terminal report: one screen for the common case. The verdict
//! and the findings with their gains first, then one line per kernel; each
//! fact once. The evidence, the actions and the notes under each kernel are
//! `--verbose`'s.

use std::io::{self, Write};

use kopt_model::Diagnosis;

use super::{chars, para, TerminalExporter};
use crate::escape;
use crate::format;

/// Findings listed by default (the rest are counted in one line).
const FINDINGS_SHOWN: usize = 5;
/// Kernel rows shown by default (the rest are counted in one line).
const KERNELS_SHOWN: usize = 15;
/// Framework ops shown by default.
const OPS_SHOWN: usize = 5;

impl TerminalExporter {
    pub(super) fn write_brief(&self, d: &Diagnosis, out: &mut dyn Write) -> io::Result<()> {
        let width = self.columns();
        Self::write_header(d, out, width)?;
        writeln!(out)?;
        Self::write_insight(d, out, width)?;
        write_findings(d, out, width)?;

        let rows = d.kernels.len().min(KERNELS_SHOWN);
        self.write_rows(d, out, width, rows, false)?;
        if d.kernels.len() > rows {
            let rest = &d.kernels[rows..];
            let pct: f64 = rest.iter().map(|k| k.pct_of_total).sum();
            writeln!(
                out,
                "  ... {} more kernel(s), {pct:.1}% of kernel time (--verbose lists them)",
                rest.len()
            )?;
        }
        writeln!(out)?;

        write_ops(d, out, width)?;
        write_timeline(d, out, width)?;

        let disagreements = d.ncu_disagreements().len();
        if disagreements > 0 {
            para(
                out,
                width,
                "",
                "  ",
                &format!(
                    "Nsight Compute's own top rule points elsewhere for {disagreements} kernel(s) (--verbose says where and why)"
                ),
            )?;
            writeln!(out)?;
        }
        let mut noted = false;
        for n in d.notes.iter().filter(|n| !is_method_note(n)) {
            para(out, width, "note: ", "      ", &escape::terminal(n))?;
            noted = true;
        }
        if noted {
            writeln!(out)?;
        }
        para(
            out,
            width,
            "",
            "",
            "Evidence, actions and the notes under each kernel: --verbose (-v).",
        )
    }
}

/// The findings in rank order, one each: gain first, then what to change
/// and where.
fn write_findings(d: &Diagnosis, out: &mut dyn Write, width: usize) -> io::Result<()> {
    if d.recommendations.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "Findings, ranked by expected gain for the whole workload"
    )?;
    let shown = &d.recommendations[..d.recommendations.len().min(FINDINGS_SHOWN)];
    let gains: Vec<String> = shown.iter().map(format::gain_short).collect();
    let gain_width = gains.iter().map(|g| chars(g)).max().unwrap_or(0);
    let rank_width = shown.last().map_or(1, |r| r.rank.to_string().len());
    for (r, gain) in shown.iter().zip(&gains) {
        let first = format!(
            "  {:>rank_width$}. {gain}{}  ",
            r.rank,
            " ".repeat(gain_width - chars(gain))
        );
        let rest = " ".repeat(chars(&first));
        let mut text = format!(
            "{} [{}]",
            escape::terminal(&r.title),
            escape::terminal(&r.kernel_short)
        );
        if let Some(why) = r.withheld() {
            text.push_str(&format!(": {}", escape::terminal(why)));
        }
        para(out, width, &first, &rest, &text)?;
        if let Some(v) = format::verified(d, r) {
            para(out, width, &rest, &rest, &escape::terminal(&v))?;
        }
    }
    let more = d.recommendations.len() - shown.len();
    if more > 0 {
        writeln!(out, "  ... {more} more finding(s) (--verbose lists them)")?;
    }
    writeln!(out)
}

/// The ops with the most kernel time, one line each.
fn write_ops(d: &Diagnosis, out: &mut dyn Write, width: usize) -> io::Result<()> {
    if d.ops.is_empty() {
        return Ok(());
    }
    writeln!(out, "Kernel time by framework op")?;
    for o in d.ops.iter().take(OPS_SHOWN) {
        let text = format!(
            "{} {:.1}%  {}: {} launches",
            format::duration(o.total_ns),
            o.pct_of_total,
            o.op,
            o.launches
        );
        para(out, width, "  ", "    ", &escape::terminal(&text))?;
    }
    if d.ops.len() > OPS_SHOWN {
        writeln!(
            out,
            "  ... {} more ops (--verbose: 15 with shapes and kernels; all in the JSON)",
            d.ops.len() - OPS_SHOWN
        )?;
    }
    writeln!(out)
}

/// The timeline's figures; its verdict only where the key insight does not
/// already say it, its idle gaps in `--verbose`.
fn write_timeline(d: &Diagnosis, out: &mut dyn Write, width: usize) -> io::Result<()> {
    let Some(t) = &d.timeline else {
        return Ok(());
    };
    let said = d.primary.as_ref().map_or("", |p| p.insight.as_str());
    writeln!(out, "Timeline")?;
    for (label, value) in format::timeline_lines(t) {
        let repeated = label == "Verdict" && said.contains(value.trim_end_matches('.'));
        if repeated || label.starts_with("Idle gap") {
            continue;
        }
        para(out, width, "  ", "    ", &format!("{label}: {value}"))?;
    }
    writeln!(out)
}

/// The note on how gains are computed: the method behind every figure,
/// for `--verbose` (the findings' heading says what the figures are).
fn is_method_note(note: &str) -> bool {
    note.starts_with("Gains: ")
}
