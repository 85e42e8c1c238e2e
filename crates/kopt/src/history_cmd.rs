//! `kopt history`: every profile, trace and compare run, newest first.

use std::collections::BTreeMap;
use std::path::Path;

use kopt_store::{History, RunRow};

use crate::cli::{HistoryArgs, HistoryCommand};

/// Record a finished run. The run's own results are already printed or
/// written: a history that cannot be written is a warning, not a failure.
pub fn record(db: &Path, row: RunRow) {
    let result = History::open(db).and_then(|mut h| h.record(&row));
    if let Err(e) = result {
        eprintln!("kopt: warning: run not recorded in the history: {e}");
    }
}

pub fn run(a: &HistoryArgs) -> anyhow::Result<()> {
    let mut h = History::open(&a.db)?;
    match &a.command {
        None => {
            let rows = h.list(a.limit)?;
            if rows.is_empty() {
                println!("no runs recorded in {}", a.db.display());
            }
            for r in rows {
                println!(
                    "{:>5}  {}  {:<8} {}  | {}{}",
                    r.id,
                    r.started_utc,
                    r.kind,
                    r.summary,
                    r.command,
                    r.git_rev.map_or(String::new(), |g| format!("  @{g}"))
                );
            }
        }
        Some(HistoryCommand::Show { id }) => {
            let r = h.get(*id)?;
            println!("run {} ({}) at {}", r.id, r.kind, r.started_utc);
            println!("command: {}", r.command);
            for (k, v) in [
                ("device", &r.device),
                ("git", &r.git_rev),
                ("verdict", &r.verdict),
                ("run folder", &r.run_dir),
            ] {
                if let Some(v) = v {
                    println!("{k}: {v}");
                }
            }
            println!("summary: {}", r.summary);
            if let Some(j) = &r.report_json {
                println!("{j}");
            }
        }
        Some(HistoryCommand::Diff { a: ia, b: ib }) => {
            let (ra, rb) = (h.get(*ia)?, h.get(*ib)?);
            println!(
                "run {} ({}) vs run {} ({})",
                ra.id, ra.summary, rb.id, rb.summary
            );
            let times = |r: &RunRow| -> (Option<f64>, BTreeMap<String, f64>) {
                let v: serde_json::Value = r
                    .report_json
                    .as_deref()
                    .and_then(|j| serde_json::from_str(j).ok())
                    .unwrap_or_default();
                let mut m = BTreeMap::new();
                for k in v["kernels"].as_array().into_iter().flatten() {
                    if let (Some(n), Some(t)) = (k["short_name"].as_str(), k["total_ns"].as_f64()) {
                        m.insert(n.to_string(), t);
                    }
                }
                (v["total_kernel_ns"].as_f64(), m)
            };
            let ((ta, ka), (tb, kb)) = (times(&ra), times(&rb));
            if let (Some(ta), Some(tb)) = (ta, tb) {
                println!(
                    "kernel time: {} -> {} ({:+.1}%)",
                    kopt_model::format_duration_ns(ta),
                    kopt_model::format_duration_ns(tb),
                    100.0 * (tb / ta - 1.0)
                );
            }
            let names: std::collections::BTreeSet<&String> = ka.keys().chain(kb.keys()).collect();
            for n in names {
                let (x, y) = (ka.get(n), kb.get(n));
                let change = match (x, y) {
                    (Some(x), Some(y)) if *x > 0.0 => format!("{:+.1}%", 100.0 * (y / x - 1.0)),
                    (None, Some(_)) => "new".into(),
                    (Some(_), None) => "gone".into(),
                    _ => "-".into(),
                };
                let fmt =
                    |v: Option<&f64>| v.map_or("-".into(), |t| kopt_model::format_duration_ns(*t));
                println!("  {n:<40} {:>12} {:>12}  {change}", fmt(x), fmt(y));
            }
        }
        Some(HistoryCommand::Stress { rows }) => {
            for i in 0..*rows {
                h.record(&RunRow {
                    id: 0,
                    kind: "stress".into(),
                    started_utc: format!("row {i}"),
                    command: "kopt history stress".into(),
                    device: None,
                    git_rev: None,
                    summary: format!("row {i}"),
                    verdict: None,
                    run_dir: None,
                    report_json: Some("x".repeat(512)),
                })?;
            }
        }
    }
    Ok(())
}
