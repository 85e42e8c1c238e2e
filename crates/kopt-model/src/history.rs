//! The run history as documents: a listing, one run, two runs side by side,
//! and how well predictions held. kopt-store reads and writes the rows, the
//! engine builds these, kopt-report lays them out.

use serde::Serialize;

use crate::compare::CompareReport;
use crate::optimize::OptimizeReport;
use crate::tune::TuneReport;
use crate::{BenchReport, Diagnosis};

/// One recorded run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunRow {
    pub id: i64,
    /// profile, trace, compare, bench.
    pub kind: String,
    pub started_utc: String,
    pub command: String,
    pub device: Option<String>,
    pub git_rev: Option<String>,
    /// One line for people (primary bottleneck, verdict...).
    pub summary: String,
    pub verdict: Option<String>,
    pub run_dir: Option<String>,
    /// The full machine report (kopt/1 JSON), when there is one.
    pub report_json: Option<String>,
}

/// A recorded run's report, read back as the type its kind wrote.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", content = "report", rename_all = "snake_case")]
pub enum StoredReport {
    Diagnosis(Box<Diagnosis>),
    Bench(Box<BenchReport>),
    Compare(Box<CompareReport>),
    Optimize(Box<OptimizeReport>),
    Tune(Box<TuneReport>),
    /// No report, or one this kopt cannot read (an older schema).
    None,
}

/// `kopt history`: the newest runs of one database.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunListing {
    /// The database, as the user named it (said when it holds no run).
    pub db: String,
    pub rows: Vec<RunRow>,
    /// Rows within the limit that could not be read (a NULL or a blob
    /// where text belongs), each as "run ID: why": said, never dropped
    /// silently.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<String>,
}

/// `kopt history show ID`: one run and its report.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunShow {
    pub row: RunRow,
    pub report: StoredReport,
}

/// One compared figure of two runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum DiffUnit {
    /// Kernel time, nanoseconds (profile and trace runs).
    KernelNs,
    /// Median time per variant, seconds (bench runs).
    MedianS,
    /// Relative L2 error per tensor (compare runs).
    RelL2,
}

/// `kopt history diff A B`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunDiff {
    pub a: RunRow,
    pub b: RunRow,
    pub unit: DiffUnit,
    /// The whole run's figure (total kernel time), where there is one.
    pub total: Option<DiffRow>,
    pub rows: Vec<DiffRow>,
}

/// One prediction checked by a measurement: `kopt optimize` predicts a
/// candidate's speed-up from the diagnosis, then measures it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CalibrationPoint {
    /// The recommendation whose model made the prediction.
    pub rule: String,
    pub predicted: f64,
    pub measured: f64,
    pub run: i64,
}

/// measured / predicted for one rule, over the runs that checked it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RuleCalibration {
    pub rule: String,
    pub points: usize,
    /// Median of measured / predicted (1 = the model was right; below 1 it
    /// predicted too much).
    pub median_ratio: f64,
    pub min_ratio: f64,
    pub max_ratio: f64,
}

/// Calibrations quoted in reports only from this many points on.
pub const CALIBRATION_MIN_POINTS: usize = 3;

/// `kopt history calibration`: every checked prediction, and per rule.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Calibration {
    /// The database, as the user named it (said when it holds no point).
    pub db: String,
    pub rules: Vec<RuleCalibration>,
    pub points: Vec<CalibrationPoint>,
    /// Stored predictions left out as implausible (a speed-up of 0, 1e308,
    /// outside 1/1000..1000), one line each: their run and figures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
}

/// The speed-ups a calibration takes: a ratio of two measured times;
/// outside 1/1000..1000 it is no measurement (an edited row, a broken clock).
pub const PLAUSIBLE_SPEEDUP: std::ops::RangeInclusive<f64> = 1e-3..=1e3;
