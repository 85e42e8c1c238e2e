//! Reading the run history back: lists, one run, and two runs side by side,
//! compared as typed reports.

use std::collections::BTreeMap;
use std::path::Path;

use kopt_model::compare::CompareReport;
use kopt_model::figure::ratio;
pub use kopt_model::history::{
    Calibration, CalibrationPoint, DiffRow, DiffUnit, RuleCalibration, RunDiff, RunListing,
    RunShow, StoredReport, CALIBRATION_MIN_POINTS, PLAUSIBLE_SPEEDUP,
};
use kopt_model::{BenchReport, Diagnosis};
use kopt_store::{History, RunRow};

use crate::error::{Error, Result};
use crate::record::RecordPaths;

/// A recorded run's report, read back as the type its kind wrote.
pub fn read_report(row: &RunRow) -> StoredReport {
    let Some(json) = row.report_json.as_deref() else {
        return StoredReport::None;
    };
    let parsed = match row.kind.as_str() {
        // A diagnosis with a figure kopt could not have written (an edited
        // row) is not one this kopt reads back: it never reaches a renderer.
        "profile" | "trace" => serde_json::from_str(json)
            .ok()
            .filter(|d| kopt_ingest::stored::check_diagnosis(d).is_ok())
            .map(|d| StoredReport::Diagnosis(Box::new(d))),
        // A measurement with a figure none could be (-5x, 1e308) likewise.
        "bench" | "compare" | "optimize" | "tune" => {
            serde_json::from_str::<serde_json::Value>(json)
                .ok()
                .filter(|v| kopt_ingest::stored::unmeasurable_figure(v).is_none())
                .and_then(|v| measurement(&row.kind, v))
        }
        _ => None,
    };
    parsed.unwrap_or(StoredReport::None)
}

/// A measurement document of `kind` from its checked JSON.
fn measurement(kind: &str, v: serde_json::Value) -> Option<StoredReport> {
    match kind {
        "bench" => serde_json::from_value(v)
            .ok()
            .map(|b| StoredReport::Bench(Box::new(b))),
        "compare" => serde_json::from_value(v)
            .ok()
            .map(|c| StoredReport::Compare(Box::new(c))),
        "optimize" => serde_json::from_value(v)
            .ok()
            .map(|o| StoredReport::Optimize(Box::new(o))),
        "tune" => serde_json::from_value(v)
            .ok()
            .map(|t| StoredReport::Tune(Box::new(t))),
        _ => None,
    }
}

/// The history opened for reading only (never created), or `None` where
/// there is none yet (no file, or an empty one): a history with no runs,
/// not an error. A file that is not a readable database is an error.
fn open_for_reading(db: &Path) -> Result<Option<History>> {
    match History::open_existing(db) {
        Ok(h) => Ok(Some(h)),
        Err(kopt_store::HistoryError::NoHistory { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The newest `limit` runs of `db` (default: the project's history); none
/// where no run was recorded yet.
pub fn list(db: Option<&Path>, limit: usize) -> Result<RunListing> {
    // A listing of no run would read "no runs recorded" of a full history.
    if limit == 0 {
        return Err(crate::Error::Usage(
            "--limit must be at least 1 (it is how many runs are listed)".into(),
        ));
    }
    let db = &RecordPaths::db_or(db)?;
    let listing = match open_for_reading(db)? {
        Some(h) => h.listing(limit)?,
        None => kopt_store::history::Listing::default(),
    };
    let unreadable = listing
        .skipped
        .iter()
        .map(|s| {
            let id = s.id.map_or("?".to_string(), |id| id.to_string());
            format!("run {id}: {}", kopt_model::text::echo(&s.reason))
        })
        .collect();
    Ok(RunListing {
        db: db.display().to_string(),
        rows: listing.rows,
        unreadable,
    })
}

pub fn show(db: Option<&Path>, id: i64) -> Result<RunShow> {
    let row = History::open_existing(&RecordPaths::db_or(db)?)?.get(id)?;
    let report = read_report(&row);
    Ok(RunShow { row, report })
}

pub fn diff(db: Option<&Path>, ia: i64, ib: i64) -> Result<RunDiff> {
    let h = History::open_existing(&RecordPaths::db_or(db)?)?;
    let (a, b) = (h.get(ia)?, h.get(ib)?);
    // An optimize run compares as its ablation (median time per variant).
    let as_bench = |r: StoredReport| match r {
        StoredReport::Optimize(o) => o
            .ablation
            .map_or(StoredReport::None, |b| StoredReport::Bench(Box::new(b))),
        other => other,
    };
    let (ra, rb) = (as_bench(read_report(&a)), as_bench(read_report(&b)));
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
        (StoredReport::Tune(x), StoredReport::Tune(y)) => {
            let medians = |r: &kopt_model::tune::TuneReport| {
                r.trials
                    .iter()
                    .filter_map(|t| Some((t.label.clone(), t.median_s?)))
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
                "runs {ia} ({}) and {ib} ({}) cannot be compared: history diff takes two profile/trace runs, two bench or optimize runs, two tune runs, or two compare runs, each with its report",
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

/// The recommendation a candidate's prediction comes from (a stack's
/// prediction is its parts', so it calibrates no one rule).
fn rule_of(candidate: &str) -> Option<&'static str> {
    crate::candidate::Candidate::from_name(candidate).and_then(|c| c.finding())
}

/// Every checked prediction in the history (optimize runs: a candidate
/// that ran, passed its correctness check and carried a prediction).
pub fn calibration_points(db: &Path) -> Result<Vec<CalibrationPoint>> {
    Ok(checked_points(db)?.0)
}

/// A figure as typed, in scientific notation when far from 1 (1e308 is
/// not 309 digits).
fn shown(x: f64) -> String {
    if x != 0.0 && !(1e-3..1e6).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// The checked predictions, and those left out for a predicted or measured
/// speed-up outside [`PLAUSIBLE_SPEEDUP`] (each said with its run): a
/// stored 0 or 1e308 would make every ratio of its rule 0 or infinite.
fn checked_points(db: &Path) -> Result<(Vec<CalibrationPoint>, Vec<String>)> {
    let (mut points, mut left_out) = (Vec::new(), Vec::new());
    let Some(h) = open_for_reading(db)? else {
        return Ok((points, left_out));
    };
    h.for_each_of_kind("optimize", |row| {
        // Read directly, not through `read_report` (which drops a report
        // with an impossible figure whole): each implausible point is
        // left out here by name.
        let Some(r) = row
            .report_json
            .as_deref()
            .and_then(|j| serde_json::from_str::<kopt_model::optimize::OptimizeReport>(j).ok())
        else {
            return;
        };
        for c in &r.candidates {
            let (Some(rule), Some(predicted), Some(measured)) =
                (rule_of(&c.name), c.predicted_speedup, c.measured_speedup)
            else {
                continue;
            };
            if !c.correctness.as_ref().is_some_and(|k| k.passed) {
                continue;
            }
            if !(PLAUSIBLE_SPEEDUP.contains(&predicted) && PLAUSIBLE_SPEEDUP.contains(&measured)) {
                left_out.push(format!(
                    "run {}: {} predicted {}x, measured {}x: not a speed-up kopt measures (1/1000 to 1000)",
                    row.id,
                    kopt_model::text::one_line(&c.name),
                    shown(predicted),
                    shown(measured)
                ));
                continue;
            }
            points.push(CalibrationPoint {
                rule: rule.into(),
                predicted,
                measured,
                run: row.id,
            });
        }
    })?;
    Ok((points, left_out))
}

/// The points grouped per rule.
pub fn calibration(db: &Path) -> Result<Vec<RuleCalibration>> {
    Ok(per_rule(calibration_points(db)?))
}

fn per_rule(points: Vec<CalibrationPoint>) -> Vec<RuleCalibration> {
    let mut by_rule: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for p in points {
        by_rule
            .entry(p.rule)
            .or_default()
            .push(p.measured / p.predicted);
    }
    by_rule
        .into_iter()
        .map(|(rule, mut r)| {
            r.sort_by(f64::total_cmp);
            RuleCalibration {
                rule,
                points: r.len(),
                median_ratio: r[r.len() / 2],
                min_ratio: r[0],
                max_ratio: r[r.len() - 1],
            }
        })
        .collect()
}

/// `rows` filler runs recorded in `db` (default: the project's history):
/// `kopt history stress`, for measuring listing and cleanup at size.
pub fn fill_for_stress(db: Option<&Path>, rows: u64) -> Result<()> {
    let mut h = History::open(&RecordPaths::db_or(db)?)?;
    for i in 0..rows {
        let mut row =
            crate::record::run_row("stress", "kopt history stress".into(), format!("row {i}"));
        row.started_utc = format!("row {i}");
        row.git_rev = None;
        row.report_json = Some("x".repeat(512));
        h.record(&row)?;
    }
    Ok(())
}

/// Every checked prediction and their grouping per rule, as `kopt history
/// calibration` shows them.
pub fn calibration_report(db: Option<&Path>) -> Result<Calibration> {
    let db = &RecordPaths::db_or(db)?;
    let (points, left_out) = checked_points(db)?;
    Ok(Calibration {
        db: db.display().to_string(),
        rules: per_rule(points.clone()),
        points,
        left_out,
    })
}

/// Quote each rule's calibration (from `CALIBRATION_MIN_POINTS` points on)
/// in the recommendations it applies to. A missing history changes nothing.
pub fn apply_calibration(d: &mut kopt_model::Diagnosis, db: &Path) {
    let Ok(cal) = calibration(db) else {
        return;
    };
    for c in cal.iter().filter(|c| c.points >= CALIBRATION_MIN_POINTS) {
        for r in d.recommendations.iter_mut().filter(|r| r.id == c.rule) {
            let text = format!(
                " Calibration: measured / predicted was {} (median of {} kopt optimize runs in the history, {} to {}).",
                ratio(c.median_ratio, 2),
                c.points,
                ratio(c.min_ratio, 2),
                ratio(c.max_ratio, 2)
            );
            r.action.push_str(&text);
            if let Some(g) = r.gain.as_mut() {
                g.method.push_str(&text);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kopt_model::compare::CompareReport;
    use kopt_model::optimize::{Baseline, CandidateResult, OptimizeReport};

    fn optimize_row(predicted: f64, measured: f64) -> RunRow {
        let candidate = |name: &str| CandidateResult {
            name: name.into(),
            parts: Vec::new(),
            changes_numerics: false,
            tolerance: None,
            by_hand: Vec::new(),
            description: String::new(),
            tried: true,
            reason: String::new(),
            predicted_speedup: Some(predicted),
            prediction_model: None,
            failure: None,
            correctness: Some(CompareReport {
                schema: "kopt/1".into(),
                passed: true,
                tensors: Vec::new(),
                problems: Vec::new(),
            }),
            measured_speedup: Some(measured),
            verdict: None,
        };
        let r = OptimizeReport {
            schema: "kopt/1".into(),
            module: "m".into(),
            script: "m.py".into(),
            run_dir: "runs/x".into(),
            device: None,
            baseline: Baseline {
                primary_component: None,
                primary_type: None,
                busy_pct: None,
                launch_bound: true,
                run_dir: String::new(),
                notes: Vec::new(),
            },
            candidates: vec![candidate("graph"), candidate("compile_max_autotune")],
            best: None,
            allow_precision: false,
            ablation: None,
            kept_profile: None,
        };
        let mut row = crate::record::run_row("optimize", "kopt optimize".into(), "s".into());
        row.report_json = Some(serde_json::to_string(&r).unwrap());
        row
    }

    /// #39: a stored speed-up of 0, 1e308 or 1e-308 made a rule's ratios
    /// 0 or infinite, printed as `inf` in reports and `kopt history
    /// calibration`. Such points are left out, each said with its run.
    #[test]
    fn implausible_stored_speedups_are_left_out_and_said() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("h.db");
        let mut h = History::open(&db).unwrap();
        for (p, m) in [
            (6.0, 5.0),
            (1e-308, 4.0),
            (4.0, 1e308),
            (4.0, 0.0),
            (8.0, 4.0),
        ] {
            h.record(&optimize_row(p, m)).unwrap();
        }
        let report = calibration_report(Some(&db)).unwrap();
        assert_eq!(report.points.len(), 2);
        assert_eq!(report.left_out.len(), 3, "{:?}", report.left_out);
        for figure in ["predicted 1e-308x", "measured 1e308x", "measured 0x"] {
            assert!(
                report.left_out.iter().any(|l| l.contains(figure)),
                "{figure}: {:?}",
                report.left_out
            );
        }
        let c = &report.rules[0];
        for r in [c.median_ratio, c.min_ratio, c.max_ratio] {
            assert!(r.is_finite() && r > 0.0, "{c:?}");
        }
    }

    /// #39: a stored diagnosis with a figure kopt could not have written
    /// (an edited history row) is not read back into a renderer.
    #[test]
    fn a_stored_diagnosis_with_an_implausible_figure_is_not_read_back() {
        let stored = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/profile-module-h200/run/report.json");
        let mut d: kopt_model::Diagnosis =
            serde_json::from_str(&std::fs::read_to_string(stored).unwrap()).unwrap();
        let mut row = crate::record::run_row("profile", "kopt profile".into(), "s".into());
        row.report_json = Some(serde_json::to_string(&d).unwrap());
        assert!(matches!(read_report(&row), StoredReport::Diagnosis(_)));
        d.total_kernel_ns = -1.0;
        row.report_json = Some(serde_json::to_string(&d).unwrap());
        assert!(matches!(read_report(&row), StoredReport::None));
    }

    #[test]
    fn predictions_checked_by_optimize_calibrate_their_rule() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("h.db");
        let mut h = History::open(&db).unwrap();
        for (p, m) in [(6.0, 5.0), (4.0, 4.0), (8.0, 4.0)] {
            h.record(&optimize_row(p, m)).unwrap();
        }
        let cal = calibration(&db).unwrap();
        // compile_max_autotune has no graph-capture prediction: one rule only.
        assert_eq!(cal.len(), 1);
        let c = &cal[0];
        assert_eq!((c.rule.as_str(), c.points), ("capture_cuda_graph", 3));
        assert!((c.median_ratio - 5.0 / 6.0).abs() < 1e-9);
        assert_eq!((c.min_ratio, c.max_ratio), (0.5, 1.0));
        // No history yet: nothing calibrated, not an error.
        let missing = calibration(&d.path().join("none.db")).unwrap();
        assert!(missing.is_empty());
        // A report whose graph-capture recommendation the history checked
        // three times quotes the calibration.
        let req = crate::AnalyzeRequest {
            files: vec![std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../fixtures/profile-module-h200/run")],
            analysis: crate::AnalysisOptions {
                calibration: crate::HistoryDb::At(db.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        let diag = crate::analyze(&req, &crate::Silent).unwrap();
        let rec = diag
            .recommendations
            .iter()
            .find(|r| r.id == "capture_cuda_graph")
            .unwrap();
        assert!(
            rec.action
                .contains("Calibration: measured / predicted was 0.83"),
            "{}",
            rec.action
        );
        // Without the history nothing changes, and nothing is created.
        let none = d.path().join("absent/h.db");
        let plain = crate::analyze(
            &crate::AnalyzeRequest {
                analysis: crate::AnalysisOptions {
                    calibration: crate::HistoryDb::At(none.clone()),
                    ..Default::default()
                },
                ..req
            },
            &crate::Silent,
        )
        .unwrap();
        assert!(plain
            .recommendations
            .iter()
            .all(|r| !r.action.contains("Calibration")));
        assert!(!none.exists() && !d.path().join("absent").exists());
    }
}
