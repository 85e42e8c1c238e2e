//! Appending to OPTIMIZATIONS.md without ever losing what it held: the new
//! file is written beside the old one and renamed over it.

use std::os::unix::fs::OpenOptionsExt;
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
    /// The code change a user makes by hand to get the kept result.
    pub change: Option<String>,
}

impl Entry {
    pub fn to_markdown(&self) -> String {
        let mut s = format!(
            "## {}: {}\n\n",
            one_line(&self.when),
            one_line(&self.hypothesis)
        );
        for (label, value) in [
            ("Prediction", &self.prediction),
            ("Outcome", &self.outcome),
            ("Verdict", &self.verdict),
            ("Change", &self.change),
            ("Run", &self.run),
        ] {
            if let Some(v) = value {
                s.push_str(&format!("- **{label}:** {}\n", one_line(v)));
            }
        }
        s.push('\n');
        s
    }
}

/// A field as one line of text: every line break and control character
/// (an escape sequence a terminal would act on) becomes a space, so a
/// field can neither start an entry of its own nor drive the terminal.
fn one_line(s: &str) -> String {
    s.trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
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

/// The largest journal kopt reads, in bytes (`KOPT_JOURNAL_MAX_BYTES`
/// raises it): a journal is text people write; more is not one.
pub const JOURNAL_MAX_BYTES: u64 = 64 << 20;

/// The budget: `KOPT_JOURNAL_MAX_BYTES` when set (a positive whole number
/// of bytes, else an error naming it, as every other budget variable),
/// else [`JOURNAL_MAX_BYTES`].
fn journal_max_bytes() -> Result<u64, String> {
    match std::env::var("KOPT_JOURNAL_MAX_BYTES") {
        Err(std::env::VarError::NotPresent) => Ok(JOURNAL_MAX_BYTES),
        Ok(v) => v
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|v| *v > 0)
            .ok_or_else(|| {
                format!(
                    "KOPT_JOURNAL_MAX_BYTES={} is not a positive whole number of bytes",
                    kopt_model::text::echo(&v)
                )
            }),
        Err(e) => Err(format!("KOPT_JOURNAL_MAX_BYTES: {e}")),
    }
}

/// Read a journal: a regular file only (a FIFO would block, `/dev/zero`
/// never ends), at most [`JOURNAL_MAX_BYTES`] (a sparse 1.5 GB file is not
/// read whole), as UTF-8. `Ok(None)` when it does not exist.
pub fn read_journal(path: &Path) -> Result<Option<String>, JournalError> {
    use std::io::Read;
    let label = path.display().to_string();
    let err = |message: String| JournalError::Write {
        path: label.clone(),
        message,
    };
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(JournalError::Read {
                path: label,
                source,
            })
        }
    };
    if !meta.is_file() {
        return Err(err(
            "not a regular file (a FIFO, a device or a folder): the journal is a Markdown file; pass --file PATH of one".into(),
        ));
    }
    let max = journal_max_bytes().map_err(&err)?;
    if meta.len() > max {
        return Err(err(format!(
            "{} bytes, more than the journal budget of {max} bytes: not read; raise it with KOPT_JOURNAL_MAX_BYTES={}",
            meta.len(),
            meta.len()
        )));
    }
    // Opened non-blocking: a file swapped for a FIFO after the check must
    // not block; the read is capped as well.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|source| JournalError::Read {
            path: label.clone(),
            source,
        })?;
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| JournalError::Read {
            path: label.clone(),
            source,
        })?;
    if bytes.len() as u64 > max {
        return Err(err(format!(
            "more than the journal budget of {max} bytes: not read; raise it with KOPT_JOURNAL_MAX_BYTES"
        )));
    }
    String::from_utf8(bytes).map(Some).map_err(|e| {
        err(format!(
            "not UTF-8 text (byte {}): not a journal",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Append an entry; the journal is created with a title when missing.
///
/// The read-append-replace runs under an exclusive lock on the journal's
/// folder (the file itself is replaced by a rename, so a lock on it would
/// not hold): concurrent `journal add`s (CLI or MCP) each keep their entry.
pub fn append_entry(path: &Path, entry: &Entry) -> Result<(), JournalError> {
    let label = path.display().to_string();
    // The file the path names, through links (a dangling one too): two
    // names of one journal (a link in another folder) lock one folder and
    // write one file.
    let real = crate::files::written_at(path).unwrap_or_else(|| path.to_path_buf());
    let path = real.as_path();
    let _lock = lock_folder(path).map_err(|source| JournalError::Read {
        path: label.clone(),
        source,
    })?;
    let old = read_journal(path)?.unwrap_or_else(|| TITLE.to_string());
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

/// An exclusive `flock` on the folder holding `path`, released when the
/// returned handle is dropped.
fn lock_folder(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::io::AsRawFd;
    let handle = std::fs::File::open(crate::files::parent(path))?;
    loop {
        // SAFETY: a valid open descriptor, owned by `handle`.
        if unsafe { libc::flock(handle.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(handle);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
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
            change: None,
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
