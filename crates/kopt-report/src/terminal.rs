use std::io::{self, Write};

use comfy_table::{
    presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, ColumnConstraint, ContentArrangement, Table,
    Width,
};
use kopt_model::Diagnosis;

use crate::format::{self, safe};
use crate::Exporter;

/// Tables for a terminal: short kernel names, seed 000's columns and kopt's verdict.
pub struct TerminalExporter {
    /// Table width; `None` lets comfy-table ask the terminal (or not wrap).
    pub width: Option<u16>,
}

const HEADERS: [&str; 13] = [
    "Kernel",
    "Launches",
    "Total",
    "Mean",
    "% Total",
    "DRAM GB/s",
    "Mem SOL %",
    "Compute SOL %",
    "Tensor %",
    "Occ % ach/theo",
    "AI F/B",
    "Class",
    "Root cause",
];

/// Kernel names longer than this are cut in the table (JSON keeps them whole).
const KERNEL_COLUMN: usize = 32;

impl Exporter for TerminalExporter {
    /// Untrusted text goes through `format::safe` where it is written; the
    /// whole report then through `format::safe_report`, so no control
    /// character but the line break reaches the terminal.
    fn render(&self, d: &Diagnosis, out: &mut dyn Write) -> io::Result<()> {
        let mut buf = Vec::new();
        self.write_report(d, &mut buf)?;
        let text = String::from_utf8_lossy(&buf);
        out.write_all(format::safe_report(&text).as_bytes())
    }
}

impl TerminalExporter {
    fn write_report(&self, d: &Diagnosis, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "kopt  {}", format::device_line(&d.device))?;
        for line in format::header_lines(d) {
            writeln!(out, "  {line}")?;
        }
        writeln!(out)?;

        let mut table = Table::new();
        table.load_preset(UTF8_FULL_CONDENSED);
        match self.width {
            Some(w) => {
                table.set_content_arrangement(ContentArrangement::DynamicFullWidth);
                table.set_width(w);
            }
            None => {
                table.set_content_arrangement(ContentArrangement::Dynamic);
            }
        }
        table.set_header(HEADERS);
        for k in &d.kernels {
            table.add_row(vec![
                Cell::new(kopt_model::clip_chars(&safe(&k.short_name), KERNEL_COLUMN)),
                Cell::new(k.launches).set_alignment(CellAlignment::Right),
                Cell::new(format::duration(k.total_ns)).set_alignment(CellAlignment::Right),
                Cell::new(format::duration(k.mean_ns)).set_alignment(CellAlignment::Right),
                Cell::new(format::pct(Some(k.pct_of_total))).set_alignment(CellAlignment::Right),
                Cell::new(format::gbs(k.dram_bytes_per_s)).set_alignment(CellAlignment::Right),
                Cell::new(format::pct(k.memory_sol_pct)).set_alignment(CellAlignment::Right),
                Cell::new(format::pct(k.compute_sol_pct)).set_alignment(CellAlignment::Right),
                Cell::new(format::pct(k.tensor_pct)).set_alignment(CellAlignment::Right),
                Cell::new(format::occupancy_figures(k)),
                Cell::new(format::intensity(k)).set_alignment(CellAlignment::Right),
                Cell::new(safe(&format::class(k))),
                Cell::new(safe(&k.root_cause)),
            ]);
        }
        if let Some(col) = table.column_mut(HEADERS.len() - 1) {
            col.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(36)));
        }
        writeln!(out, "{table}")?;
        writeln!(out)?;

        if let Some(t) = &d.timeline {
            writeln!(out, "Timeline")?;
            for (label, value) in format::timeline_lines(t) {
                writeln!(out, "  {label}: {value}")?;
            }
            writeln!(out)?;
        }

        if let Some(p) = &d.primary {
            writeln!(
                out,
                "Key insight  [primary bottleneck: {} / {}]",
                safe(&p.component_short),
                p.class
            )?;
            writeln!(out, "  {}", safe(&p.insight))?;
            writeln!(out)?;
        }

        if !d.recommendations.is_empty() {
            writeln!(
                out,
                "Recommendations, ranked by expected gain for the whole workload"
            )?;
            for r in &d.recommendations {
                writeln!(
                    out,
                    "  {}. {}  [{}]  {}",
                    r.rank,
                    safe(&r.title),
                    safe(&r.kernel_short),
                    safe(&format::gain(r))
                )?;
                writeln!(out, "     evidence: {}", safe(&r.evidence))?;
                writeln!(out, "     do: {}", safe(&r.action))?;
                if let Some(g) = &r.gain {
                    writeln!(out, "     estimate: {}", safe(&g.method))?;
                }
                writeln!(out, "     from: {}", safe(&r.source))?;
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
                            format!(" ({})", safe(&n.ncu_speedup_type))
                        }
                    )
                });
                writeln!(
                    out,
                    "  {}: ncu ranks {}{} first ({}); kopt says {}: {}",
                    safe(&k.short_name),
                    safe(&n.ncu_rule),
                    speedup,
                    n.ncu_class,
                    safe(&format::class(k)),
                    safe(&n.why_kopt_differs)
                )?;
            }
            writeln!(out)?;
        }

        for k in d.kernels.iter().filter(|k| !k.findings.is_empty()) {
            for f in &k.findings {
                writeln!(
                    out,
                    "  also in {}: {} ({})",
                    safe(&k.short_name),
                    safe(&f.evidence),
                    f.class
                )?;
            }
        }
        if d.kernels.iter().any(|k| !k.findings.is_empty()) {
            writeln!(out)?;
        }
        for n in &d.notes {
            writeln!(out, "note: {}", safe(n))?;
        }
        Ok(())
    }
}
