//! Appending to OPTIMIZATIONS.md without ever losing what it held: the new
//! file is written beside the old one and renamed over it.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("{path}: cannot read: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Write { path: String, message: String },
}

/// One journal entry (seed 003's fix template, seed 002's decision).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Entry {
    /// "YYYY-MM-DD HH:MM UTC".
    pub when: String,
    pub hypothesis: String,
    pub prediction: Option<String>,
    pub outcome: Option<String>,
    /// KEEP, MARGINAL or REVERT.
    pub verdict: Option<String>,
    /// A run folder or run id.
    pub run: Option<String>,
}

impl Entry {
    pub fn to_markdown(&self) -> String {
        let mut s = format!("## {}: {}\n\n", self.when, self.hypothesis.trim());
        for (label, value) in [
            ("Prediction", &self.prediction),
            ("Outcome", &self.outcome),
            ("Verdict", &self.verdict),
            ("Run", &self.run),
        ] {
            if let Some(v) = value {
                s.push_str(&format!("- **{label}:** {}\n", v.trim()));
            }
        }
        s.push('\n');
        s
    }
}

const TITLE: &str = "# Optimization journal\n\nWritten by `kopt journal add`: hypothesis, prediction, measured outcome, verdict.\n\n";

/// OPTIMIZATIONS.md at the root of the git repository holding `start`, or in `start`.
pub fn find_journal(start: &Path) -> PathBuf {
    let mut dir = Some(start);
    while let Some(d) = dir {
        if d.join(".git").exists() {
            return d.join("OPTIMIZATIONS.md");
        }
        dir = d.parent();
    }
    start.join("OPTIMIZATIONS.md")
}

/// Append an entry; the journal is created with a title when missing.
pub fn append_entry(path: &Path, entry: &Entry) -> Result<(), JournalError> {
    let label = path.display().to_string();
    let old = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => TITLE.to_string(),
        Err(source) => {
            return Err(JournalError::Read {
                path: label,
                source,
            })
        }
    };
    let mut text = old;
    if !text.ends_with("\n\n") {
        text.push_str(if text.ends_with('\n') { "\n" } else { "\n\n" });
    }
    text.push_str(&entry.to_markdown());
    crate::files::write_file(path, text.as_bytes()).map_err(|e| JournalError::Write {
        path: label,
        message: e.message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(h: &str) -> Entry {
        Entry {
            when: "2026-11-25 23:50 UTC".into(),
            hypothesis: h.into(),
            prediction: Some("-30% in k_transpose".into()),
            outcome: Some("-53% (398 -> 187 us)".into()),
            verdict: Some("KEEP".into()),
            run: None,
        }
    }

    #[test]
    fn creates_then_appends_keeping_earlier_entries() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("OPTIMIZATIONS.md");
        append_entry(&p, &entry("pad smem rows")).unwrap();
        append_entry(&p, &entry("vectorize loads")).unwrap();
        let t = std::fs::read_to_string(&p).unwrap();
        assert!(t.starts_with("# Optimization journal"));
        let a = t.find("## 2026-11-25 23:50 UTC: pad smem rows").unwrap();
        let b = t.find("## 2026-11-25 23:50 UTC: vectorize loads").unwrap();
        assert!(a < b);
        assert!(t.contains("- **Prediction:** -30% in k_transpose\n"));
        assert!(!t.contains("Run:"));
    }

    #[test]
    fn finds_the_repository_root() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join(".git")).unwrap();
        std::fs::create_dir_all(d.path().join("src/kernels")).unwrap();
        assert_eq!(
            find_journal(&d.path().join("src/kernels")),
            d.path().join("OPTIMIZATIONS.md")
        );
    }

    #[test]
    fn an_unwritable_journal_is_an_error_and_the_old_text_stays() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("OPTIMIZATIONS.md");
        append_entry(&p, &entry("first")).unwrap();
        let before = std::fs::read_to_string(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o444)).unwrap();
        let err = append_entry(&p, &entry("second")).unwrap_err().to_string();
        assert!(err.contains("read-only"), "{err}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), before);
    }

    #[test]
    fn a_symlinked_journal_gets_the_entry_in_its_target() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("notes/journal.md");
        std::fs::create_dir_all(real.parent().unwrap()).unwrap();
        let link = d.path().join("OPTIMIZATIONS.md");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        append_entry(&real, &entry("first")).unwrap();
        append_entry(&link, &entry("second")).unwrap();
        let t = std::fs::read_to_string(&real).unwrap();
        assert!(t.contains("first") && t.contains("second"), "{t}");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
    }
}
