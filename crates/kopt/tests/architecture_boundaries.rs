//! ARCHITECTURE.md's boundaries, checked on the source: processes start
//! only in kopt-collect (its one runner owns timeouts, process groups and
//! cancellation), no crate includes another crate's files, and the analysis
//! depends on nothing above the model.

use std::path::{Path, PathBuf};

fn crates_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Each crate's non-test source: its `src/` files, each cut at its first
/// `#[cfg(test)]` (unit tests sit at the end of their file).
fn shipped_sources() -> Vec<(String, PathBuf, String)> {
    let mut out = Vec::new();
    for krate in std::fs::read_dir(crates_dir()).unwrap().flatten() {
        let name = krate.file_name().to_string_lossy().into_owned();
        let mut files = Vec::new();
        rust_files(&krate.path().join("src"), &mut files);
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            let shipped = match text.find("#[cfg(test)]") {
                Some(i) => text[..i].to_string(),
                None => text,
            };
            out.push((name.clone(), f, shipped));
        }
    }
    assert!(out.len() > 50, "found only {} source files", out.len());
    out
}

#[test]
fn only_kopt_collect_starts_processes() {
    let offenders: Vec<String> = shipped_sources()
        .into_iter()
        .filter(|(krate, _, _)| krate != "kopt-collect")
        .filter(|(_, _, text)| text.contains("process::Command") || text.contains("Command::new("))
        .map(|(_, f, _)| f.display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "processes started outside kopt_collect::runner: {offenders:?}"
    );
}

#[test]
fn no_crate_includes_another_crates_files() {
    let mut offenders = Vec::new();
    for (krate, file, text) in shipped_sources() {
        let crate_root = crates_dir().join(&krate).canonicalize().unwrap();
        for (i, _) in text.match_indices("include_") {
            let rest = &text[i..];
            let macro_len = ["include_str!(\"", "include_bytes!(\""]
                .iter()
                .find(|m| rest.starts_with(**m))
                .map(|m| m.len());
            let Some(len) = macro_len else { continue };
            let Some(end) = rest[len..].find('"') else {
                continue;
            };
            let rel = &rest[len..len + end];
            let target = file.parent().unwrap().join(rel);
            let target = target.canonicalize().unwrap_or(target);
            if !target.starts_with(&crate_root) {
                offenders.push(format!("{}: {rel}", file.display()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "includes across crates: {offenders:?}"
    );
}

#[test]
fn the_analysis_depends_on_the_model_only() {
    let manifest = std::fs::read_to_string(crates_dir().join("kopt-analyze/Cargo.toml")).unwrap();
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .and_then(|s| s.split("\n[").next())
        .unwrap();
    let kopt_deps: Vec<&str> = deps
        .lines()
        .filter_map(|l| l.split(['.', ' ', '=']).next())
        .filter(|n| n.starts_with("kopt"))
        .collect();
    assert_eq!(
        kopt_deps,
        ["kopt-model"],
        "kopt-analyze's kopt dependencies"
    );
}
