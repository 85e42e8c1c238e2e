//! `kopt compare`: the correctness gate on two outputs.

use std::path::PathBuf;

use kopt_ingest::tensor::read_tensors;
use kopt_model::compare::CompareReport;

use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::record::HistoryDb;

#[derive(Debug, Clone, PartialEq)]
pub struct CompareRequest {
    pub reference: PathBuf,
    pub candidate: PathBuf,
    /// Relative L2 tolerance (default by dtype).
    pub tol: Option<f64>,
    /// The candidate ran float32 math on tensor cores.
    pub tf32: bool,
    /// Element-wise tolerances (`atol + rtol*|reference|`); None: by dtype.
    pub atol: Option<f64>,
    pub rtol: Option<f64>,
    /// A candidate of another dtype is compared (else it fails).
    pub allow_dtype_change: bool,
    /// History database the comparison is recorded in (`Off`: not recorded).
    pub db: HistoryDb,
}

impl CompareRequest {
    pub fn validate(&self) -> Result<()> {
        for (flag, v) in [
            ("--tol", self.tol),
            ("--atol", self.atol),
            ("--rtol", self.rtol),
        ] {
            if let Some(t) = v {
                if !(t.is_finite() && t >= 0.0) {
                    return Err(Error::Usage(format!(
                        "{flag} must be a finite number of 0 or more, got {t}"
                    )));
                }
            }
        }
        Ok(())
    }

    /// The gate these settings make.
    pub fn gate(&self) -> kopt_bench::Gate {
        kopt_bench::Gate {
            tol: self.tol,
            atol: self.atol,
            rtol: self.rtol,
            tf32: self.tf32,
            allow_dtype_change: self.allow_dtype_change,
        }
    }
}

/// Compare every tensor of the reference with its pair in the candidate.
pub fn compare(req: &CompareRequest, progress: &dyn Progress) -> Result<CompareReport> {
    req.validate()?;
    let reference = read_tensors(&req.reference)?;
    let candidate = read_tensors(&req.candidate)?;
    let report = kopt_bench::compare_tensors_gate(&reference, &candidate, &req.gate());
    if let Some(db) = &req.db.resolve() {
        let failed: Vec<&str> = report
            .tensors
            .iter()
            .filter(|c| !c.passed)
            .map(|c| c.name.as_str())
            .collect();
        let summary = if report.passed {
            format!("{} tensor(s) within tolerance", report.tensors.len())
        } else if failed.is_empty() {
            format!("failed: {}", report.problems.join("; "))
        } else {
            format!("failed: {}", failed.join(", "))
        };
        let mut row = crate::record::run_row(
            "compare",
            format!(
                "kopt compare {} {}",
                req.reference.display(),
                req.candidate.display()
            ),
            summary,
        );
        row.verdict = Some(if report.passed { "PASS" } else { "REVERT" }.into());
        row.report_json = serde_json::to_string(&report).ok();
        crate::record::record_run(db, &row, progress);
    }
    Ok(report)
}
