use std::io::{self, Write};

use kopt_model::Diagnosis;

use crate::escape;
use crate::format::{self, col};
use crate::Exporter;

/// The kernel table's columns, named as in the terminal and HTML tables.
pub(crate) const KERNEL_COLUMNS: [&str; 13] = [
    col::KERNEL,
    col::LAUNCHES,
    col::TOTAL,
    col::MEAN,
    col::PCT,
    col::DRAM,
    col::MEM_SOL,
    col::COMPUTE_SOL,
    col::TENSOR,
    col::OCCUPANCY,
    col::AI,
    col::CLASS,
    col::ROOT_CAUSE,
];

/// Markdown for a pull request, in the terminal report's order: the key
/// insight and the ranked findings first, then the kernel table and the rest.
pub struct MarkdownExporter;

impl Exporter for MarkdownExporter {
    /// Untrusted text goes through `escape::markdown_cell` (and so `escape::terminal`); the whole
    /// report then through `escape::terminal_lines`, so no control character
    /// but the line break reaches a terminal that shows the Markdown.
    fn render(&self, d: &Diagnosis, out: &mut dyn Write) -> io::Result<()> {
        let mut buf = Vec::new();
        self.write_report(d, &mut buf)?;
        let text = String::from_utf8_lossy(&buf);
        out.write_all(escape::terminal_lines(&text).as_bytes())
    }
}

impl MarkdownExporter {
    fn write_report(&self, d: &Diagnosis, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "# kopt analysis")?;
        writeln!(out)?;
        writeln!(
            out,
            "- Device: {}",
            escape::markdown_cell(&format::device_line(&d.device))
        )?;
        for line in format::header_lines(d) {
            writeln!(out, "- {}", escape::markdown_cell(&line))?;
        }
        writeln!(out)?;
        if let Some(p) = &d.primary {
            writeln!(out, "## Key insight")?;
            writeln!(out)?;
            writeln!(
                out,
                "**Primary bottleneck:** `{}` / **{}**",
                escape::markdown_cell(&p.component_short),
                p.class
            )?;
            writeln!(out)?;
            writeln!(out, "{}", escape::markdown_cell(&p.insight))?;
            writeln!(out)?;
        }

        if !d.recommendations.is_empty() {
            writeln!(out, "## Recommendations")?;
            writeln!(out)?;
            writeln!(out, "| # | Change | Kernel | Expected gain | Evidence |")?;
            writeln!(out, "|--:|---|---|---|---|")?;
            for r in &d.recommendations {
                writeln!(
                    out,
                    "| {} | {} | {} | {} | {} |",
                    r.rank,
                    escape::markdown_cell(&r.title),
                    escape::markdown_cell(&r.kernel_short),
                    escape::markdown_cell(&match format::verified(d, r) {
                        Some(v) => format!("{}; {v}", format::gain(r)),
                        None => format::gain(r),
                    }),
                    escape::markdown_cell(r.evidence_shown())
                )?;
            }
            writeln!(out)?;
            for r in &d.recommendations {
                writeln!(
                    out,
                    "{}. **{}** (`{}`): {}",
                    r.rank,
                    escape::markdown_cell(&r.title),
                    escape::markdown_cell(&r.kernel_short),
                    escape::markdown_cell(&r.action)
                )?;
                if let Some(g) = &r.gain {
                    writeln!(out, "   Estimate: {}.", escape::markdown_cell(&g.method))?;
                }
                writeln!(out, "   Source: {}.", escape::markdown_cell(&r.source))?;
            }
            writeln!(out)?;
        }

        writeln!(out, "## Profiling analysis")?;
        writeln!(out)?;
        writeln!(out, "| {} |", KERNEL_COLUMNS.join(" | "))?;
        writeln!(out, "|---|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|---|---|")?;
        for k in &d.kernels {
            writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                escape::markdown_cell(&k.short_name),
                k.launches,
                format::duration(k.total_ns),
                format::duration(k.mean_ns),
                format::pct(Some(k.pct_of_total)),
                format::gbs(k.dram_bytes_per_s),
                format::pct(k.memory_sol_pct),
                format::pct(k.compute_sol_pct),
                format::pct(k.tensor_pct),
                escape::markdown_cell(&format::occupancy(k)),
                format::intensity(k),
                escape::markdown_cell(&format::class(k)),
                escape::markdown_cell(&k.root_cause),
            )?;
        }
        writeln!(
            out,
            "| **Total** | | **{}** | | 100 | | | | | | | | |",
            format::duration(d.total_kernel_ns)
        )?;
        writeln!(out)?;

        let evidence: Vec<(&str, String)> = d
            .kernels
            .iter()
            .filter_map(|k| Some((k.short_name.as_str(), format::evidence_line(k)?)))
            .collect();
        if !evidence.is_empty() {
            writeln!(out, "### What the counters show per kernel")?;
            writeln!(out)?;
            for (name, line) in evidence {
                writeln!(
                    out,
                    "- {}: {}",
                    escape::markdown_cell(name),
                    escape::markdown_cell(&line)
                )?;
            }
            writeln!(out)?;
        }

        if !d.ops.is_empty() {
            writeln!(out, "## Kernel time by framework op")?;
            writeln!(out)?;
            writeln!(
                out,
                "| Op | Input shapes | Launches | Total | % Total | Kernels |"
            )?;
            writeln!(out, "|---|---|--:|--:|--:|---|")?;
            for o in &d.ops {
                writeln!(
                    out,
                    "| {} | {} | {} | {} | {:.1} | {} |",
                    escape::markdown_cell(&o.op),
                    escape::markdown_cell(o.shapes.as_deref().unwrap_or("-")),
                    o.launches,
                    format::duration(o.total_ns),
                    o.pct_of_total,
                    escape::markdown_cell(&o.kernels.join(", "))
                )?;
            }
            writeln!(out)?;
        }

        if let Some(t) = &d.timeline {
            writeln!(out, "## Timeline")?;
            writeln!(out)?;
            writeln!(out, "| | |")?;
            writeln!(out, "|---|---|")?;
            for (label, value) in format::timeline_lines(t) {
                writeln!(
                    out,
                    "| {} | {} |",
                    escape::markdown_cell(&label),
                    escape::markdown_cell(&value)
                )?;
            }
            writeln!(out)?;
        }

        let disagreements = d.ncu_disagreements();
        if !disagreements.is_empty() {
            writeln!(out, "## Where Nsight Compute's ranking differs")?;
            writeln!(out)?;
            writeln!(
                out,
                "| Kernel | ncu's top rule | ncu estimate | kopt | Why |"
            )?;
            writeln!(out, "|---|---|--:|---|---|")?;
            for (k, n) in disagreements {
                writeln!(
                    out,
                    "| {} | {} | {} | {} | {} |",
                    escape::markdown_cell(&k.short_name),
                    escape::markdown_cell(&n.ncu_rule),
                    n.ncu_speedup_pct.map_or("-".into(), |s| format!(
                        "{s:.1}% {}",
                        escape::markdown_cell(&n.ncu_speedup_type)
                    )),
                    escape::markdown_cell(&format::class(k)),
                    escape::markdown_cell(&n.why_kopt_differs)
                )?;
            }
            writeln!(out)?;
        }
        if !d.notes.is_empty() {
            writeln!(out, "## Notes")?;
            writeln!(out)?;
            for n in &d.notes {
                writeln!(out, "- {}", escape::markdown_cell(n))?;
            }
        }
        Ok(())
    }
}
