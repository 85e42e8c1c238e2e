use std::io::{self, Write};

use kopt_model::{Diagnosis, KernelVerdict};

use crate::escape;
use crate::format::{self, col, wrap};
use crate::Exporter;

mod brief;

/// Tables for a terminal. The default report is brief (one screen: the
/// verdict, the findings with their gains, one line per kernel; see
/// `brief`); `verbose` adds the evidence, the actions and the notes under
/// each kernel. The default table is compact: kernel, time, share, class
/// and the one figure behind it; `wide` shows every column. Both fit
/// `width` where they can: kernel names are shortened with an ellipsis and
/// text is wrapped only between words, so no number or word is split
/// across lines.
pub struct TerminalExporter {
    /// Line width; `None` asks the terminal (else `$COLUMNS`, else 100).
    pub width: Option<u16>,
    /// Every column of the Markdown and HTML tables, not the compact set.
    pub wide: bool,
    /// The whole detail: root cause and notes under each row, each
    /// finding's evidence, action, estimate and source.
    pub verbose: bool,
}

/// Width used when neither the caller nor a terminal names one.
const FALLBACK_WIDTH: usize = 100;
/// The kernel column never grows past this (names are shortened instead).
const KERNEL_MAX: usize = 60;
/// The kernel column shrinks to this before other columns wrap their headers.
const KERNEL_MIN: usize = 16;
/// ... and to this before the table is let overflow.
const KERNEL_FLOOR: usize = 8;
const GUTTER: usize = 2;
/// Indent of the root cause and findings under a row.
const INDENT: &str = "    ";

struct Column {
    header: &'static str,
    right: bool,
    cells: Vec<String>,
}

impl Column {
    fn new(
        header: &'static str,
        right: bool,
        d: &Diagnosis,
        f: impl Fn(&KernelVerdict) -> String,
    ) -> Self {
        Column {
            header,
            right,
            cells: d
                .kernels
                .iter()
                .map(|k| escape::terminal(&f(k)).into_owned())
                .collect(),
        }
    }

    fn cells_width(&self) -> usize {
        self.cells.iter().map(|c| chars(c)).max().unwrap_or(0)
    }

    /// Narrowest width that splits no word of the header and no cell.
    fn min_width(&self) -> usize {
        let header = self.header.split(' ').map(chars).max().unwrap_or(0);
        header.max(self.cells_width())
    }

    fn natural_width(&self) -> usize {
        chars(self.header).max(self.cells_width())
    }
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

fn pad(s: &str, width: usize, right: bool) -> String {
    let fill = " ".repeat(width.saturating_sub(chars(s)));
    if right {
        format!("{fill}{s}")
    } else {
        format!("{s}{fill}")
    }
}

impl Exporter for TerminalExporter {
    /// Untrusted text goes through `escape::terminal` where it is written; the
    /// whole report then through `escape::terminal_lines`, so no control
    /// character but the line break reaches the terminal.
    fn render(&self, d: &Diagnosis, out: &mut dyn Write) -> io::Result<()> {
        let mut buf = Vec::new();
        if self.verbose {
            self.write_report(d, &mut buf)?;
        } else {
            self.write_brief(d, &mut buf)?;
        }
        let text = String::from_utf8_lossy(&buf);
        out.write_all(escape::terminal_lines(&text).as_bytes())
    }
}

/// Writes `text` word-wrapped to `width`, the first line after `first`, the
/// rest after `rest`.
fn para(out: &mut dyn Write, width: usize, first: &str, rest: &str, text: &str) -> io::Result<()> {
    let room = width.saturating_sub(chars(rest)).max(20);
    let first_room = width.saturating_sub(chars(first)).max(20);
    // Wrap the first line to its own room, the remainder to the rest's.
    let lines = wrap(text, first_room);
    let head = lines.first().cloned().unwrap_or_default();
    writeln!(out, "{first}{head}")?;
    let tail: Vec<&str> = lines.iter().skip(1).map(String::as_str).collect();
    if !tail.is_empty() {
        for line in wrap(&tail.join(" "), room) {
            writeln!(out, "{rest}{line}")?;
        }
    }
    Ok(())
}

impl TerminalExporter {
    /// The width the report is laid out for.
    pub fn columns(&self) -> usize {
        if let Some(w) = self.width {
            return usize::from(w);
        }
        if let Some(w) = comfy_table::Table::new().width() {
            return usize::from(w);
        }
        std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.trim().parse().ok())
            .filter(|&c: &usize| c >= 40)
            .unwrap_or(FALLBACK_WIDTH)
    }

    fn columns_for(&self, d: &Diagnosis) -> Vec<Column> {
        let kernel = Column::new(col::KERNEL, false, d, |k| k.short_name.clone());
        let total = Column::new(col::TOTAL, true, d, |k| format::duration(k.total_ns));
        let pct = Column::new(col::PCT, true, d, |k| format::pct(Some(k.pct_of_total)));
        let class = Column::new(col::CLASS, false, d, format::class);
        if !self.wide {
            let key = Column::new(col::KEY_FIGURE, false, d, format::key_figure);
            return vec![kernel, total, pct, class, key];
        }
        vec![
            kernel,
            Column::new(col::LAUNCHES, true, d, |k| k.launches.to_string()),
            total,
            Column::new(col::MEAN, true, d, |k| format::duration(k.mean_ns)),
            pct,
            Column::new(col::DRAM, true, d, |k| format::gbs(k.dram_bytes_per_s)),
            Column::new(col::MEM_SOL, true, d, |k| format::pct(k.memory_sol_pct)),
            Column::new(col::COMPUTE_SOL, true, d, |k| {
                format::pct(k.compute_sol_pct)
            }),
            Column::new(col::TENSOR, true, d, |k| format::pct(k.tensor_pct)),
            Column::new(col::OCCUPANCY, true, d, format::occupancy_figures),
            Column::new(col::AI, true, d, format::intensity),
            class,
        ]
    }

    /// Column widths: the kernel column gives way first, then headers wrap
    /// between words, then the kernel column gives way again; cells never wrap.
    fn widths(cols: &[Column], width: usize) -> Vec<usize> {
        let gutters = GUTTER * cols.len().saturating_sub(1);
        let kernel_natural = cols[0].natural_width().min(KERNEL_MAX);
        let mut w: Vec<usize> = cols.iter().map(Column::natural_width).collect();
        w[0] = kernel_natural;
        let total = |w: &[usize]| w.iter().sum::<usize>() + gutters;
        let over = total(&w).saturating_sub(width);
        w[0] -= over.min(w[0].saturating_sub(KERNEL_MIN.min(kernel_natural)));
        for (i, c) in cols.iter().enumerate().skip(1) {
            let over = total(&w).saturating_sub(width);
            w[i] -= over.min(w[i] - c.min_width());
        }
        let over = total(&w).saturating_sub(width);
        w[0] -= over.min(w[0].saturating_sub(KERNEL_FLOOR.min(kernel_natural)));
        w
    }

    fn write_table(&self, d: &Diagnosis, out: &mut dyn Write, width: usize) -> io::Result<()> {
        self.write_rows(d, out, width, d.kernels.len(), true)
    }

    /// The table's header and its first `rows` rows; `detail` writes each
    /// row's root cause and notes under it.
    fn write_rows(
        &self,
        d: &Diagnosis,
        out: &mut dyn Write,
        width: usize,
        rows: usize,
        detail: bool,
    ) -> io::Result<()> {
        let cols = self.columns_for(d);
        let w = Self::widths(&cols, width);
        let headers: Vec<Vec<String>> = cols
            .iter()
            .zip(&w)
            .map(|(c, &w)| wrap(c.header, w))
            .collect();
        let header_lines = headers.iter().map(Vec::len).max().unwrap_or(1);
        let gutter = " ".repeat(GUTTER);
        for line in 0..header_lines {
            let cells: Vec<String> = cols
                .iter()
                .zip(&w)
                .zip(&headers)
                .map(|((c, &w), h)| pad(h.get(line).map_or("", String::as_str), w, c.right))
                .collect();
            writeln!(out, "{}", cells.join(&gutter).trim_end())?;
        }
        let rule = w.iter().sum::<usize>() + GUTTER * (w.len() - 1);
        writeln!(out, "{}", "─".repeat(rule))?;
        // One cause shared by every row (a trace without counters) is said
        // once, above the rows, instead of under each of them.
        let shared = shared_root_cause(d);
        if let Some(cause) = shared.as_deref() {
            let all = d
                .kernels
                .iter()
                .all(|k| row_cause(&k.root_cause, Some(cause)).is_none());
            let lead = if all {
                "Every kernel"
            } else if detail {
                "Unless its row says otherwise"
            } else {
                "Most kernels"
            };
            para(
                out,
                width,
                "",
                "",
                &escape::terminal(&format!("{lead}: {cause}")),
            )?;
            writeln!(out, "{}", "─".repeat(rule))?;
        }
        // Kernel names cut to the column, never broken across lines, and
        // never two kernels reading the same.
        let names = kopt_model::clip_distinct(&cols[0].cells, w[0].max(1));
        for (row, k) in d.kernels.iter().enumerate().take(rows) {
            let cells: Vec<String> = cols
                .iter()
                .zip(&w)
                .enumerate()
                .map(|(i, (c, &w))| {
                    let text = if i == 0 {
                        names[row].clone()
                    } else {
                        c.cells[row].clone()
                    };
                    pad(&text, w, c.right)
                })
                .collect();
            writeln!(out, "{}", cells.join(&gutter).trim_end())?;
            if !detail {
                continue;
            }
            if let Some(cause) =
                row_cause(&k.root_cause, shared.as_deref()).filter(|c| !c.is_empty())
            {
                para(out, width, INDENT, INDENT, &escape::terminal(&cause))?;
            }
            for f in &k.findings {
                let text = format!("also: {} ({})", escape::terminal(&f.evidence), f.class);
                para(out, width, INDENT, INDENT, &text)?;
            }
            if let Some(line) = format::ops_line(k) {
                para(out, width, INDENT, INDENT, &escape::terminal(&line))?;
            }
            // The counters' evidence in the detailed table only.
            if let Some(line) = format::evidence_line(k).filter(|_| self.wide) {
                let text = format!("evidence: {}", escape::terminal(&line));
                para(out, width, INDENT, INDENT, &text)?;
            }
        }
        Ok(())
    }

    /// The device, the inputs and the totals.
    fn write_header(d: &Diagnosis, out: &mut dyn Write, width: usize) -> io::Result<()> {
        para(
            out,
            width,
            "kopt  ",
            "      ",
            &format::device_line(&d.device),
        )?;
        for line in format::header_lines(d) {
            para(out, width, "  ", "    ", &line)?;
        }
        Ok(())
    }

    /// The primary bottleneck and what it means.
    fn write_insight(d: &Diagnosis, out: &mut dyn Write, width: usize) -> io::Result<()> {
        if let Some(p) = &d.primary {
            para(
                out,
                width,
                "",
                "  ",
                &format!(
                    "Key insight  [primary bottleneck: {} / {}]",
                    escape::terminal(&p.component_short),
                    p.class
                ),
            )?;
            para(out, width, "  ", "  ", &escape::terminal(&p.insight))?;
            writeln!(out)?;
        }
        Ok(())
    }

    /// The whole report (`--verbose`).
    fn write_report(&self, d: &Diagnosis, out: &mut dyn Write) -> io::Result<()> {
        let width = self.columns();
        Self::write_header(d, out, width)?;
        writeln!(out)?;
        self.write_table(d, out, width)?;
        writeln!(out)?;

        if !d.ops.is_empty() {
            writeln!(out, "Kernel time by framework op (input shapes)")?;
            for o in d.ops.iter().take(15) {
                let shapes = o
                    .shapes
                    .as_deref()
                    .map_or(String::new(), |s| format!(" {s}"));
                let text = format!(
                    "{} {:.1}%  {}{}: {} launches of {}",
                    format::duration(o.total_ns),
                    o.pct_of_total,
                    o.op,
                    shapes,
                    o.launches,
                    o.kernels.join(", ")
                );
                para(out, width, "  ", "    ", &escape::terminal(&text))?;
            }
            if d.ops.len() > 15 {
                writeln!(out, "  ... {} more ops in the JSON", d.ops.len() - 15)?;
            }
            writeln!(out)?;
        }

        if let Some(t) = &d.timeline {
            writeln!(out, "Timeline")?;
            for (label, value) in format::timeline_lines(t) {
                para(out, width, "  ", "    ", &format!("{label}: {value}"))?;
            }
            writeln!(out)?;
        }

        Self::write_insight(d, out, width)?;

        if !d.recommendations.is_empty() {
            writeln!(
                out,
                "Recommendations, ranked by expected gain for the whole workload"
            )?;
            for r in &d.recommendations {
                let rank = format!("  {}. ", r.rank);
                let rest = " ".repeat(chars(&rank));
                para(
                    out,
                    width,
                    &rank,
                    &rest,
                    &format!(
                        "{} [{}]: {}",
                        escape::terminal(&r.title),
                        escape::terminal(&r.kernel_short),
                        escape::terminal(&format::gain(r))
                    ),
                )?;
                let more = format!("{rest}  ");
                if let Some(v) = format::verified(d, r) {
                    para(out, width, &rest, &more, &escape::terminal(&v))?;
                }
                para(
                    out,
                    width,
                    &rest,
                    &more,
                    &format!("evidence: {}", escape::terminal(r.evidence_shown())),
                )?;
                para(
                    out,
                    width,
                    &rest,
                    &more,
                    &format!("do: {}", escape::terminal(&r.action)),
                )?;
                if let Some(g) = &r.gain {
                    para(
                        out,
                        width,
                        &rest,
                        &more,
                        &format!("estimate: {}", escape::terminal(&g.method)),
                    )?;
                }
                para(
                    out,
                    width,
                    &rest,
                    &more,
                    &format!("from: {}", escape::terminal(&r.source)),
                )?;
            }
            writeln!(out)?;
        }

        let disagreements = d.ncu_disagreements();
        if !disagreements.is_empty() {
            writeln!(out, "Where Nsight Compute's own top rule points elsewhere")?;
            for (k, n) in disagreements {
                let speedup = n.ncu_speedup_pct.map_or(String::new(), |s| {
                    format!(
                        " {s:.1}%{}",
                        if n.ncu_speedup_type.is_empty() {
                            String::new()
                        } else {
                            format!(" ({})", escape::terminal(&n.ncu_speedup_type))
                        }
                    )
                });
                para(
                    out,
                    width,
                    "  ",
                    "    ",
                    &format!(
                        "{}: ncu ranks {}{} first ({}); kopt says {}: {}",
                        escape::terminal(&k.short_name),
                        escape::terminal(&n.ncu_rule),
                        speedup,
                        n.ncu_class,
                        escape::terminal(&format::class(k)),
                        escape::terminal(&n.why_kopt_differs)
                    ),
                )?;
            }
            writeln!(out)?;
        }

        for n in &d.notes {
            para(out, width, "note: ", "      ", &escape::terminal(n))?;
        }
        Ok(())
    }
}

/// A root cause as (label, rest): "cuBLAS GEMM kernel (library code): no
/// counters ..." is a short label and what was found; a cause without such a
/// label is all rest.
fn cause_parts(cause: &str) -> (Option<&str>, &str) {
    match cause.split_once(": ") {
        Some((label, rest)) if label.chars().count() <= 60 && !label.contains(". ") => {
            (Some(label), rest)
        }
        _ => (None, cause),
    }
}

/// `text` starts with `sentence`, ignoring the case of its first letter:
/// what follows it, if so.
fn after_sentence<'a>(text: &'a str, sentence: &str) -> Option<&'a str> {
    let mut t = text.chars();
    let mut s = sentence.chars();
    match (t.next(), s.next()) {
        (Some(p), Some(q)) if p.to_lowercase().eq(q.to_lowercase()) => {
            t.as_str().strip_prefix(s.as_str())
        }
        _ => None,
    }
}

/// What a row still prints when `shared` is said above the table: nothing
/// when its cause is the shared one, its label alone when only the label
/// differs, the rest of its cause when more follows the shared sentence.
fn row_cause(cause: &str, shared: Option<&str>) -> Option<String> {
    let Some(shared) = shared else {
        return Some(cause.to_string());
    };
    let (label, rest) = cause_parts(cause);
    let more = after_sentence(rest, shared)
        .map(|m| m.trim_start_matches(['.', ' ']))
        .filter(|m| {
            m.is_empty() || rest.len() > shared.len() && rest[shared.len()..].starts_with(". ")
        });
    match (label, more) {
        (None, Some("")) => None,
        (Some(l), Some("")) => Some(l.to_string()),
        (None, Some(m)) => Some(m.to_string()),
        (Some(l), Some(m)) => Some(format!("{l}. {m}")),
        (_, None) => Some(cause.to_string()),
    }
}

/// The root cause most kernel rows share (at least three rows and half of
/// them: a trace without counters), with or without a row's own label in
/// front ("cuBLAS GEMM kernel (library code): ..."), said once above the rows.
fn shared_root_cause(d: &Diagnosis) -> Option<String> {
    let mut counts: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for k in d.kernels.iter().filter(|k| !k.root_cause.is_empty()) {
        // The first sentence after the label: what rows with more to say
        // share with the others.
        let rest = cause_parts(&k.root_cause).1;
        let first = rest.split_once(". ").map_or(rest, |(f, _)| f);
        let mut chars = first.chars();
        let key: String = chars
            .next()
            .map(|c| c.to_uppercase().chain(chars).collect())
            .unwrap_or_default();
        *counts.entry(key).or_default() += 1;
    }
    let (cause, n) = counts
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))?;
    (n >= 3 && 2 * n >= d.kernels.len()).then_some(cause)
}
