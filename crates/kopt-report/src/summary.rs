//! Short Markdown summaries, for agents (the MCP server's text content,
//! beside the whole document as structured content): the verdict or the
//! primary bottleneck, the first fixes with their figures, and the evidence
//! that was missing. Names from outside kopt are escaped as table cells
//! are; kopt's own prose only loses control characters.

use std::fmt::Write as _;
use std::path::Path;

use kopt_model::compare::CompareReport;
use kopt_model::{format_duration_ns, BenchReport, BottleneckClass, Diagnosis, KernelVerdict};

use crate::escape::{markdown_cell as name, terminal as prose};

/// A document's summary in a few lines of Markdown.
pub trait Summary {
    fn summary(&self) -> String;
}

impl Summary for Diagnosis {
    fn summary(&self) -> String {
        let d = self;
        let mut o = String::new();
        match &d.primary {
            Some(p) => {
                // The share means what the primary is: the idle window for
                // launch overhead, a kernel's time, else the workload's.
                let of = if p.class == BottleneckClass::LaunchOverhead {
                    "of the steady-state window idle"
                } else if d.kernels.iter().any(|k| k.name == p.component) {
                    "of kernel time"
                } else {
                    "of the workload"
                };
                let _ = writeln!(
                    o,
                    "**Primary bottleneck:** {} is {} ({:.1}% {of})",
                    name(&p.component_short),
                    p.class,
                    p.pct_of_total
                );
                if !p.insight.is_empty() {
                    let _ = writeln!(o, "{}", prose(&p.insight));
                }
            }
            None => {
                let _ = writeln!(o, "**No primary bottleneck** found.");
            }
        }
        let _ = writeln!(
            o,
            "\n{} kernel(s), {} of kernel time on {}.",
            d.kernels.len(),
            format_duration_ns(d.total_kernel_ns),
            name(&d.device.name)
        );
        if !d.recommendations.is_empty() {
            let _ = writeln!(o, "\nWhat to change first:");
        }
        for r in d.recommendations.iter().take(3) {
            let gain = match (&r.predicted_speedup, &r.gain) {
                (Some(p), _) => format!(
                    ", predicted {}x ({})",
                    kopt_model::figure::ratio(p.estimate, 2),
                    kopt_model::figure::ratio_range(p.low, p.high, 2)
                ),
                (None, Some(g)) => format!(", up to {:.0}% of the workload", g.workload_pct),
                (None, None) => ", no figure".into(),
            };
            let _ = writeln!(
                o,
                "{}. **{}** ({}{gain}): {}",
                r.rank,
                prose(&r.title),
                name(&r.kernel_short),
                prose(&r.action)
            );
        }
        missing_counters(&mut o, &d.kernels);
        if let Some(run) = &d.run {
            if let Some(id) = Path::new(&run.run_dir).file_name() {
                let _ = writeln!(
                    o,
                    "\nRun folder: `kopt://runs/{}/report.json` (also report.md, report.html).",
                    name(&id.to_string_lossy())
                );
            }
        }
        o
    }
}

/// What the evidence did not cover: kernels whose cause is unknown because
/// no counters were collected for them.
fn missing_counters(o: &mut String, kernels: &[KernelVerdict]) {
    let unknown: Vec<&KernelVerdict> = kernels
        .iter()
        .filter(|k| k.bottleneck.class == BottleneckClass::Unknown)
        .collect();
    if unknown.is_empty() {
        return;
    }
    let pct: f64 = unknown.iter().map(|k| k.pct_of_total).sum();
    let _ = writeln!(
        o,
        "\n**Missing evidence:** no hardware counters for {} kernel(s) ({pct:.1}% of kernel time): their time counts, their cause is unknown. Collect counters for them (`profile`, or ncu / rocprofv3 --pmc on the hot kernels) to get a class and a fix.",
        unknown.len()
    );
}

impl Summary for BenchReport {
    fn summary(&self) -> String {
        let mut o = format!("**Verdict: {}**\n\n", self.verdict);
        for v in &self.variants {
            let _ = write!(
                o,
                "- {}: median {} over {} samples",
                name(&v.name),
                format_duration_ns(v.median_s * 1e9),
                v.samples
            );
            if let Some(verdict) = &v.verdict {
                let _ = write!(
                    o,
                    ", {}x: {} {}",
                    kopt_model::figure::ratio(v.speedup_vs_first, 3),
                    verdict.kind,
                    prose(&verdict.reason)
                );
            }
            o.push('\n');
        }
        o
    }
}

impl Summary for CompareReport {
    fn summary(&self) -> String {
        let mut o = if self.passed {
            format!(
                "**PASSED**: {} tensor(s) within tolerance.\n",
                self.tensors.len()
            )
        } else {
            "**FAILED** (REVERT):\n".to_string()
        };
        for t in self.tensors.iter().filter(|t| !t.passed) {
            let _ = writeln!(o, "- {}: {}", name(&t.name), prose(&t.problems.join("; ")));
        }
        for p in &self.problems {
            let _ = writeln!(o, "- {}", prose(p));
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_forge_markdown_or_drive_a_terminal() {
        let report: CompareReport = serde_json::from_value(serde_json::json!({
            "schema": "kopt/1",
            "passed": false,
            "tensors": [{
                "name": "out|<b>\u{1b}[2J",
                "reference_dtype": "float32", "candidate_dtype": "float32",
                "reference_shape": [2], "candidate_shape": [2],
                "rel_l2": 1.0, "max_abs": 3.0, "tolerance": 0.001,
                "nan": [0, 0], "inf": [0, 0],
                "passed": false,
                "problems": ["max abs error 3\nforged line"],
                "warnings": []
            }],
            "problems": []
        }))
        .unwrap();
        let s = report.summary();
        assert!(s.contains("out\\|&lt;b&gt;\\u{1b}[2J"), "{s}");
        assert!(s.contains("max abs error 3\\u{a}forged line"), "{s}");
        assert!(!s.contains('\u{1b}'), "{s}");
    }
}
