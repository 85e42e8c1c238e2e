//! The H100 advice suite's fixtures, kopt's analysis of a capture, and the
//! docs blocks its tests keep equal to what the tool prints.

#![allow(dead_code)] // each test file uses its own part

use std::path::{Path, PathBuf};
use std::process::Command;

/// A path in fixtures/advice-h100.
pub fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/advice-h100")
        .join(rel)
}

pub fn benchmarks_md() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/benchmarks.md")
}

/// A JSON file of fixtures/advice-h100.
pub fn json(rel: &str) -> serde_json::Value {
    let path = fixture(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `KOPT_BLESS=1`: rewrite the pinned files instead of checking them.
pub fn blessing() -> bool {
    std::env::var("KOPT_BLESS").is_ok_and(|v| v == "1")
}

/// `kopt analyze -f json DIR`.
pub fn analyze(dir: &Path) -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["analyze", "-f", "json"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}: {}",
        dir.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// `doc` with the text between `begin` and `end` replaced by `block`.
pub fn replace_block(doc: &str, begin: &str, end: &str, block: &str) -> Option<String> {
    let b = doc.find(begin)? + begin.len();
    let e = b + doc[b..].find(end)?;
    Some(format!("{}\n{block}{}", &doc[..b], &doc[e..]))
}
