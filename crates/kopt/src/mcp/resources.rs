//! Run folders as resources: `kopt://runs/<id>/report.json` (as written),
//! `report.md` and `report.html` (rendered from it), `run.json`, so an
//! agent reads an earlier run without profiling again.

use std::path::{Path, PathBuf};

use kopt_engine::RecordPaths;
use kopt_model::Diagnosis;
use kopt_report::{Exporter, Format, HtmlExporter};
use serde_json::{json, Value};

/// The most bytes of a run file read: far above any report kopt writes.
const MAX_FILE_BYTES: u64 = 256 << 20;

/// Run folders listed at most (newest first).
const MAX_RUNS: usize = 200;

const FILES: &[(&str, &str, &str)] = &[
    ("report.json", "application/json", "the kopt/1 diagnosis"),
    ("report.md", "text/markdown", "the report in Markdown"),
    ("report.html", "text/html", "the self-contained HTML page"),
    (
        "run.json",
        "application/json",
        "the run record: argv, passes, timings",
    ),
];

fn runs_dir(cwd: &Path) -> PathBuf {
    RecordPaths::for_cwd(cwd).runs_dir
}

/// Run folder names with a report, newest first (the ids sort by time).
fn run_ids(cwd: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(runs_dir(cwd)) else {
        return Vec::new();
    };
    // Real folders only, with a report that is a regular file: a link
    // would be listed and then refused by resources/read.
    let mut ids: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| {
            e.path()
                .join("report.json")
                .symlink_metadata()
                .is_ok_and(|m| m.is_file())
        })
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    ids.sort_unstable_by(|a, b| b.cmp(a));
    ids.truncate(MAX_RUNS);
    ids
}

pub fn list(cwd: &Path) -> Result<Vec<Value>, String> {
    // The full schemas of the tools' outputs (tools/list sends their top
    // level only), then the run folders.
    let mut out: Vec<Value> = super::schema::DOCUMENTS
        .iter()
        .map(|(name, what)| {
            json!({
                "uri": super::schema::resource_uri(name),
                "name": format!("schema/{name}"),
                "title": format!("kopt/1 {name} schema ({what})"),
                "mimeType": "application/schema+json",
            })
        })
        .collect();
    for id in run_ids(cwd) {
        for (file, mime, what) in FILES {
            out.push(json!({
                "uri": format!("kopt://runs/{id}/{file}"),
                "name": format!("{id}/{file}"),
                "title": format!("run {id}: {what}"),
                "mimeType": mime,
            }));
        }
    }
    Ok(out)
}

pub fn templates() -> Vec<Value> {
    vec![json!({
        "uriTemplate": "kopt://runs/{id}/{file}",
        "name": "run folder",
        "description": "A kopt run folder's report.json, report.md, report.html or run.json",
    })]
}

/// A run id is one plain folder name: nothing that climbs out, nothing a
/// URI would need escaped.
fn is_run_id(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// The resource of a history row's run folder: only a folder that is one
/// of this server's run folders (its real parent the runs folder, its name
/// a run id) with a report. A stored `run_dir` is anyone's text: another
/// project's folder ending in a name this one also has, or one a link
/// leads out of, must not give a link to a different run.
pub fn run_resource(cwd: &Path, run_dir: &str) -> Option<String> {
    let root = std::fs::canonicalize(runs_dir(cwd)).ok()?;
    let real = std::fs::canonicalize(cwd.join(run_dir)).ok()?;
    let id = real.file_name()?.to_str()?;
    (real.parent() == Some(root.as_path()) && is_run_id(id) && real.join("report.json").is_file())
        .then(|| format!("kopt://runs/{id}/report.json"))
}

pub fn read(cwd: &Path, uri: &str) -> Result<Value, String> {
    let not_found = || format!("resource not found: {uri}");
    if let Some(name) = uri.strip_prefix("kopt://schema/") {
        let schema = super::schema::document(name).ok_or_else(not_found)?;
        return Ok(json!({
            "uri": uri,
            "mimeType": "application/schema+json",
            "text": schema.to_string(),
        }));
    }
    let rest = uri.strip_prefix("kopt://runs/").ok_or_else(not_found)?;
    let (id, file) = rest.split_once('/').ok_or_else(not_found)?;
    if !is_run_id(id) {
        return Err(not_found());
    }
    let (_, mime, _) = FILES
        .iter()
        .find(|(f, _, _)| *f == file)
        .ok_or_else(not_found)?;
    let root = runs_dir(cwd);
    let dir = root.join(id);
    // One policy for every file a client names: its real path inside the
    // runs folder, a regular file, under the cap (a symlink out, a FIFO or
    // a device is refused, never followed).
    let read = |name: &str| {
        let path = dir.join(name);
        if path.symlink_metadata().is_err() {
            return Err(not_found());
        }
        let bytes = kopt_store::confined::read_inside(&root, &path, MAX_FILE_BYTES)
            .map_err(|e| format!("{uri}: {e}"))?;
        String::from_utf8(bytes).map_err(|_| format!("{uri}: {name} is not UTF-8 text"))
    };
    let text = match file {
        "report.json" | "run.json" => read(file)?,
        _ => {
            let d: Diagnosis =
                kopt_engine::record::diagnosis_from_json(&read("report.json")?, "report.json")
                    .map_err(|e| format!("{uri}: {e}"))?;
            if file == "report.md" {
                Format::Markdown.exporter(None).render_to_string(&d)
            } else {
                HtmlExporter.render_to_string(&d)
            }
        }
    };
    Ok(json!({"uri": uri, "mimeType": mime, "text": text}))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sixth hostile round (L7): a history row's resource was built from
    /// its run_dir's last component, whatever folder it named.
    #[test]
    fn a_history_rows_resource_is_one_of_this_servers_run_folders() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join(".git")).unwrap();
        let runs = d.path().join(".kopt/runs");
        for run in ["r1", "odd name"] {
            std::fs::create_dir_all(runs.join(run)).unwrap();
            std::fs::write(runs.join(run).join("report.json"), "{}").unwrap();
        }
        let elsewhere = d.path().join("other/r1");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("report.json"), "{}").unwrap();
        std::os::unix::fs::symlink(&elsewhere, runs.join("linked")).unwrap();
        let at = |p: &Path| run_resource(d.path(), p.to_str().unwrap());
        assert_eq!(
            at(&runs.join("r1")).as_deref(),
            Some("kopt://runs/r1/report.json")
        );
        // Relative to the server's folder, as kopt records it there.
        assert_eq!(
            run_resource(d.path(), ".kopt/runs/r1").as_deref(),
            Some("kopt://runs/r1/report.json")
        );
        for not_ours in [
            elsewhere.clone(),
            runs.join("linked"),
            runs.join("odd name"),
            runs.join("r1/.."),
            d.path().join("missing/r1"),
        ] {
            assert_eq!(at(&not_ours), None, "{}", not_ours.display());
        }
    }

    /// Round seven: resources/list named linked run folders that
    /// resources/read then refused.
    #[test]
    fn only_real_run_folders_are_listed() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join(".git")).unwrap();
        let runs = d.path().join(".kopt/runs");
        std::fs::create_dir_all(runs.join("r1")).unwrap();
        std::fs::write(runs.join("r1/report.json"), "{}").unwrap();
        let elsewhere = d.path().join("other/r2");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("report.json"), "{}").unwrap();
        std::os::unix::fs::symlink(&elsewhere, runs.join("r2")).unwrap();
        std::fs::create_dir_all(runs.join("r3")).unwrap();
        std::os::unix::fs::symlink(elsewhere.join("report.json"), runs.join("r3/report.json"))
            .unwrap();
        assert_eq!(run_ids(d.path()), ["r1"]);
    }

    /// #39: a symlink in a run folder made resources/read return any file.
    #[test]
    fn a_run_file_linked_outside_the_runs_folder_is_not_read() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join(".git")).unwrap();
        let run = d.path().join(".kopt/runs/r1");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(d.path().join("secret.txt"), "outside text").unwrap();
        std::os::unix::fs::symlink(d.path().join("secret.txt"), run.join("run.json")).unwrap();
        std::fs::write(run.join("report.json"), "{}").unwrap();
        let e = read(d.path(), "kopt://runs/r1/run.json").unwrap_err();
        assert!(!e.contains("outside text") && e.contains("refused"), "{e}");
    }
}
