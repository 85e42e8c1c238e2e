//! Where kopt keeps its records, and recording a finished run.

use std::path::{Path, PathBuf};

use kopt_model::run_folder::REPORT_JSON;
use kopt_model::{Diagnosis, RunInfo};
use kopt_store::{History, RunRow};

use crate::error::{Error, Result};
use crate::progress::Progress;

/// One rule for every record kopt keeps (`.kopt/` with the history and the
/// run folders, OPTIMIZATIONS.md): the root of the git repository `start`
/// is in, else `start` itself.
pub fn project_root(start: &Path) -> PathBuf {
    let mut dir = Some(start);
    while let Some(d) = dir {
        if d.join(".git").exists() {
            return d.to_path_buf();
        }
        dir = d.parent();
    }
    start.to_path_buf()
}

/// The places records go, each overridable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordPaths {
    /// The history database.
    pub db: PathBuf,
    /// Folder of run folders.
    pub runs_dir: PathBuf,
    /// The journal.
    pub journal: PathBuf,
}

impl RecordPaths {
    /// The defaults for a command started in `cwd`.
    pub fn for_cwd(cwd: &Path) -> RecordPaths {
        let root = project_root(cwd);
        RecordPaths {
            db: root.join(".kopt/history.db"),
            runs_dir: root.join(".kopt/runs"),
            journal: root.join("OPTIMIZATIONS.md"),
        }
    }

    /// The defaults for the current folder.
    pub fn current() -> RecordPaths {
        RecordPaths::for_cwd(&std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")))
    }

    /// The history database a front end named, else the project's: the one
    /// place that default is applied (front ends pass what the user gave).
    /// The default is refused when a link was planted on its way
    /// ([`refuse_planted_link`]).
    pub(crate) fn db_or(db: Option<&Path>) -> Result<PathBuf> {
        match db {
            Some(db) => Ok(db.to_path_buf()),
            None => {
                let db = RecordPaths::current().db;
                refuse_planted_link(&db)?;
                Ok(db)
            }
        }
    }
}

/// Refuses a default record path (the history, the runs folder, the
/// journal, as [`RecordPaths::current`] gives them) when it, or a folder
/// between the project's root and it (`.kopt`), is a symbolic link. The
/// defaults lie in the repository, which a clone brings: a link planted
/// there (`OPTIMIZATIONS.md -> ../victim.sh`, `.kopt/history.db ->
/// ../../outside/new.db`) would have kopt write outside it. A path the user
/// named with a flag is not a default and may go through links as before.
pub fn refuse_planted_link(path: &Path) -> Result<()> {
    let Ok(cwd) = std::env::current_dir() else {
        return Ok(());
    };
    let defaults = RecordPaths::for_cwd(&cwd);
    let (what, flag) = if path == defaults.db {
        ("history database", "--db")
    } else if path == defaults.journal {
        ("journal", "--journal-file (or --file)")
    } else if path == defaults.runs_dir {
        ("runs folder", "--runs-dir")
    } else {
        return Ok(());
    };
    let root = project_root(&cwd);
    let Ok(below) = path.strip_prefix(&root) else {
        return Ok(());
    };
    let mut at = root.clone();
    for part in below.components() {
        at.push(part);
        let Ok(meta) = std::fs::symlink_metadata(&at) else {
            break; // not there yet: kopt creates it
        };
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&at)
                .map(|t| format!(" (to {})", kopt_model::text::echo(&t.display().to_string())))
                .unwrap_or_default();
            return Err(Error::Output(format!(
                "{}: refused: kopt's default {what} goes through a symbolic link at {}{target}; \
                 a link in a repository can make kopt write outside it. Remove the link, or \
                 name the file with {flag} to use it",
                path.display(),
                at.display()
            )));
        }
    }
    Ok(())
}

/// A history database a request reads or writes: none, the project's
/// ([`RecordPaths`], resolved by the engine), or one named.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum HistoryDb {
    #[default]
    Off,
    Project,
    At(PathBuf),
}

impl HistoryDb {
    /// The project's history unless `db` names one.
    pub fn project_or(db: Option<PathBuf>) -> HistoryDb {
        db.map_or(HistoryDb::Project, HistoryDb::At)
    }

    /// The database it names, resolved.
    pub fn resolve(&self) -> Option<PathBuf> {
        match self {
            HistoryDb::Off => None,
            HistoryDb::Project => Some(RecordPaths::current().db),
            HistoryDb::At(db) => Some(db.clone()),
        }
    }
}

/// A kopt/1 diagnosis given as JSON (a stored `report.json`, a client's
/// text), read and its figures checked as a fresh input's are: a negative
/// duration or a 1e308 never reaches a renderer.
pub fn diagnosis_from_json(text: &str, label: &str) -> Result<Diagnosis> {
    let d: Diagnosis = serde_json::from_str(text)
        .map_err(|e| Error::Input(format!("{label}: not a kopt/1 diagnosis: {e}")))?;
    kopt_ingest::stored::check_diagnosis(&d)
        .map_err(|why| Error::Input(format!("{label}: {why}")))?;
    Ok(d)
}

/// Record a finished run. Its results are already printed or written: a
/// history that cannot be written is a note, not a failure.
pub fn record_run(db: &Path, row: &RunRow, progress: &dyn Progress) {
    if let Err(e) = refuse_planted_link(db) {
        progress.note(&format!("warning: run not recorded in the history: {e}"));
        return;
    }
    let result = History::open(db).and_then(|mut h| h.record(row));
    if let Err(e) = result {
        progress.note(&format!("warning: run not recorded in the history: {e}"));
    }
}

/// A history row with the fields every kind shares filled in.
pub fn run_row(kind: &str, command: String, summary: String) -> RunRow {
    RunRow {
        id: 0,
        kind: kind.into(),
        started_utc: crate::run_folder::utc_timestamp(std::time::SystemTime::now()),
        command,
        device: None,
        git_rev: kopt_store::git_revision(Path::new(".")),
        summary,
        verdict: None,
        run_dir: None,
        report_json: None,
    }
}

/// A run's last step (`profile`, `trace`): name the run in the diagnosis,
/// keep the JSON report in its folder, record it in the history.
pub(crate) fn finish_run(
    mut diagnosis: Diagnosis,
    run: RunInfo,
    kind: &str,
    db: &Path,
    progress: &dyn Progress,
) -> Result<Diagnosis> {
    let dir = PathBuf::from(&run.run_dir);
    let argv = run.argv.join(" ");
    diagnosis.run = Some(run);
    let json =
        serde_json::to_string_pretty(&diagnosis).map_err(|e| Error::Output(e.to_string()))?;
    let report = dir.join(REPORT_JSON);
    std::fs::write(&report, &json).map_err(|e| crate::error::io_error(&report, "write", e))?;
    let summary = diagnosis.primary.as_ref().map_or_else(
        || format!("{} kernels", diagnosis.kernels.len()),
        |p| {
            format!(
                "primary {} / {} ({:.1}% of kernel time)",
                p.component_short, p.class, p.pct_of_total
            )
        },
    );
    let mut row = run_row(kind, argv, summary);
    row.device = Some(diagnosis.device.name.clone());
    row.run_dir = Some(dir.display().to_string());
    row.report_json = Some(json);
    record_run(db, &row, progress);
    Ok(diagnosis)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// #39: a stored report read back by MCP's resources or Python is
    /// checked as fresh input: a negative duration is named, not rendered.
    #[test]
    fn a_stored_diagnosis_is_checked_when_read_back() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/profile-module-h200/run/report.json");
        let text = std::fs::read_to_string(path).unwrap();
        assert!(diagnosis_from_json(&text, "report.json").is_ok());
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["kernels"][0]["total_ns"] = serde_json::json!(-5.0);
        let err = diagnosis_from_json(&v.to_string(), "report.json")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("report.json") && err.contains("kernels[0]"),
            "{err}"
        );
        let err = diagnosis_from_json("{", "report_json")
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a kopt/1 diagnosis"), "{err}");
    }

    #[test]
    fn records_live_at_the_repository_root_else_here() {
        let d = tempfile::tempdir().unwrap();
        let sub = d.path().join("src/kernels");
        std::fs::create_dir_all(&sub).unwrap();
        assert_eq!(RecordPaths::for_cwd(&sub).db, sub.join(".kopt/history.db"));
        std::fs::create_dir(d.path().join(".git")).unwrap();
        let p = RecordPaths::for_cwd(&sub);
        assert_eq!(p.db, d.path().join(".kopt/history.db"));
        assert_eq!(p.runs_dir, d.path().join(".kopt/runs"));
        assert_eq!(p.journal, d.path().join("OPTIMIZATIONS.md"));
    }
}
