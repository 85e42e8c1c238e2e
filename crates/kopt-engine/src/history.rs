//! Reading the run history back: lists, one run, and two runs side by side,
//! compared as typed reports.

use std::collections::BTreeMap;
use std::path::Path;

use kopt_model::compare::CompareReport;
use kopt_model::{BenchReport, Diagnosis};
use kopt_store::{History, RunRow};

use crate::error::{Error, Result};

/// A recorded run's report, read back as the type its kind wrote.
#[derive(Debug, Clone, PartialEq)]
pub enum StoredReport {
    Diagnosis(Box<Diagnosis>),
    Bench(Box<BenchReport>),
    Compare(Box<CompareReport>),
    Optimize(Box<kopt_model::optimize::OptimizeReport>),
    /// No report, or one this kopt cannot read (an older schema).
    None,
}

impl StoredReport {
    pub fn of(row: &RunRow) -> StoredReport {
        let Some(json) = row.report_json.as_deref() else {
            return StoredReport::None;
        };
        let parsed = match row.kind.as_str() {
            "profile" | "trace" => serde_json::from_str(json)
                .map(|d| StoredReport::Diagnosis(Box::new(d)))
                .ok(),
            "bench" => serde_json::from_str(json)
                .map(|b| StoredReport::Bench(Box::new(b)))
                .ok(),
            "compare" => serde_json::from_str(json)
                .map(|c| StoredReport::Compare(Box::new(c)))
                .ok(),
            "optimize" => serde_json::from_str(json)
                .map(|o| StoredReport::Optimize(Box::new(o)))
                .ok(),
            _ => None,
        };
        parsed.unwrap_or(StoredReport::None)
    }
}

/// The newest `limit` runs; the database is opened for reading only (a
/// missing one is an error, never created).
pub fn list(db: &Path, limit: usize) -> Result<Vec<RunRow>> {
    Ok(History::open_existing(db)?.list(limit)?)
}

pub fn show(db: &Path, id: i64) -> Result<(RunRow, StoredReport)> {
    let row = History::open_existing(db)?.get(id)?;
    let report = StoredReport::of(&row);
    Ok((row, report))
}

/// One compared figure of two runs.
#[derive(Debug, Clone, PartialEq)]
pub struct DiffRow {
    pub name: String,
    pub a: Option<f64>,
    pub b: Option<f64>,
}

impl DiffRow {
    /// b relative to a, in percent.
    pub fn change_pct(&self) -> Option<f64> {
        match (self.a, self.b) {
            (Some(a), Some(b)) if a > 0.0 => Some(100.0 * (b / a - 1.0)),
            _ => None,
        }
    }
}

/// What is compared, and in which unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffUnit {
    /// Kernel time, nanoseconds (profile and trace runs).
    KernelNs,
    /// Median time per variant, seconds (bench runs).
    MedianS,
    /// Relative L2 error per tensor (compare runs).
    RelL2,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunDiff {
    pub a: RunRow,
    pub b: RunRow,
    pub unit: DiffUnit,
    /// The whole run's figure (total kernel time), where there is one.
    pub total: Option<DiffRow>,
    pub rows: Vec<DiffRow>,
}

pub fn diff(db: &Path, ia: i64, ib: i64) -> Result<RunDiff> {
    let h = History::open_existing(db)?;
    let (a, b) = (h.get(ia)?, h.get(ib)?);
    // An optimize run compares as its ablation (median time per variant).
    let as_bench = |r: StoredReport| match r {
        StoredReport::Optimize(o) => o
            .ablation
            .map_or(StoredReport::None, |b| StoredReport::Bench(Box::new(b))),
        other => other,
    };
    let (ra, rb) = (
        as_bench(StoredReport::of(&a)),
        as_bench(StoredReport::of(&b)),
    );
    let pair = |x: BTreeMap<String, f64>, y: BTreeMap<String, f64>| -> Vec<DiffRow> {
        let mut names: Vec<&String> = x.keys().chain(y.keys()).collect();
        names.sort();
        names.dedup();
        names
            .into_iter()
            .map(|n| DiffRow {
                name: n.clone(),
                a: x.get(n).copied(),
                b: y.get(n).copied(),
            })
            .collect()
    };
    let (unit, total, rows) = match (&ra, &rb) {
        (StoredReport::Diagnosis(x), StoredReport::Diagnosis(y)) => {
            let kernels = |d: &Diagnosis| {
                let mut m = BTreeMap::new();
                for k in &d.kernels {
                    *m.entry(k.short_name.clone()).or_insert(0.0) += k.total_ns;
                }
                m
            };
            let total = DiffRow {
                name: "kernel time".into(),
                a: Some(x.total_kernel_ns),
                b: Some(y.total_kernel_ns),
            };
            (DiffUnit::KernelNs, Some(total), pair(kernels(x), kernels(y)))
        }
        (StoredReport::Bench(x), StoredReport::Bench(y)) => {
            let medians = |r: &BenchReport| {
                r.variants
                    .iter()
                    .map(|v| (v.name.clone(), v.median_s))
                    .collect::<BTreeMap<_, _>>()
            };
            (DiffUnit::MedianS, None, pair(medians(x), medians(y)))
        }
        (StoredReport::Compare(x), StoredReport::Compare(y)) => {
            let errors = |r: &CompareReport| {
                r.tensors
                    .iter()
                    .filter_map(|t| Some((t.name.clone(), t.rel_l2?)))
                    .collect::<BTreeMap<_, _>>()
            };
            (DiffUnit::RelL2, None, pair(errors(x), errors(y)))
        }
        _ => {
            return Err(Error::Usage(format!(
                "runs {ia} ({}) and {ib} ({}) cannot be compared: history diff takes two profile/trace runs, two bench or optimize runs, or two compare runs, each with its report",
                a.kind, b.kind
            )))
        }
    };
    Ok(RunDiff {
        a,
        b,
        unit,
        total,
        rows,
    })
}
