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
    let mut ids: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("report.json").is_file())
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
    // A run id is one plain folder name: nothing that climbs out.
    let plain = |s: &str| {
        !s.is_empty()
            && s != "."
            && s != ".."
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    if !plain(id) {
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
