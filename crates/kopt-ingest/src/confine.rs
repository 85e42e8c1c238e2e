//! The folders a front end lets its client read. The MCP server checks the
//! paths a client names, but an input leads to other files: the entries of
//! a run folder, a trace's `trace.jsonl.<pid>` siblings and its bare-steps
//! file, a rocprof-compute folder's CSVs. Each of them is opened through
//! [`check`], so a symlink planted in a run folder cannot lead a read
//! outside the allowed folders. The command line sets no roots: a user may
//! read any file of theirs.

use std::path::{Path, PathBuf};
use std::sync::RwLock;

use crate::IngestError;

/// The allowed folders, real paths; `None` reads anywhere.
static ROOTS: RwLock<Option<Vec<PathBuf>>> = RwLock::new(None);

/// From now on, this process reads input files only where their real path
/// (every symlink resolved) lies inside one of `roots`. A root that does not
/// resolve allows nothing.
pub fn confine_reads(roots: &[PathBuf]) {
    let real = roots
        .iter()
        .filter_map(|r| std::fs::canonicalize(r).ok())
        .collect();
    if let Ok(mut slot) = ROOTS.write() {
        *slot = Some(real);
    }
}

/// The environment variable a front end sets on a kopt it starts to read
/// for it (the MCP server's isolated analysis): the allowed folders, one
/// per line. It can only narrow what the process reads.
pub const READ_ROOTS_VAR: &str = "KOPT_READ_ROOTS";

/// [`confine_reads`] to the folders [`READ_ROOTS_VAR`] names, when it is
/// set (to anything: an empty or unreadable value allows nothing).
pub fn confine_reads_from_env() {
    let Some(value) = std::env::var_os(READ_ROOTS_VAR) else {
        return;
    };
    let roots: Vec<PathBuf> = value
        .to_str()
        .map(|v| {
            v.lines()
                .filter(|l| !l.is_empty())
                .map(PathBuf::from)
                .collect()
        })
        .unwrap_or_default();
    confine_reads(&roots);
}

/// The value of [`READ_ROOTS_VAR`] for `roots`; None where a root cannot
/// be written in it (not UTF-8, or a line break in its name).
pub fn read_roots_value(roots: &[PathBuf]) -> Option<String> {
    let mut out = String::new();
    for r in roots {
        let s = r.to_str().filter(|s| !s.contains(['\n', '\r']))?;
        out.push_str(s);
        out.push('\n');
    }
    Some(out)
}

/// Refuse `path` when reads are confined and its real path lies outside
/// every allowed folder (or cannot be resolved).
pub fn check(path: &Path, label: &str) -> Result<(), IngestError> {
    inside_roots(|| std::fs::canonicalize(path), label)
}

/// Refuse an opened `file` when reads are confined and the file itself
/// (what the descriptor holds, `/proc/self/fd/N`) lies outside every
/// allowed folder: a link swapped between [`check`] and the open is
/// caught here, where the path's check alone let an outside file through.
pub fn check_opened(file: &std::fs::File, label: &str) -> Result<(), IngestError> {
    use std::os::fd::AsRawFd;
    inside_roots(
        || std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())),
        label,
    )
}

/// Whether reads are confined to allowed folders at all.
pub fn confined() -> bool {
    ROOTS.read().is_ok_and(|g| g.is_some())
}

fn inside_roots(
    real: impl FnOnce() -> std::io::Result<PathBuf>,
    label: &str,
) -> Result<(), IngestError> {
    let Ok(guard) = ROOTS.read() else {
        return Ok(());
    };
    let Some(roots) = guard.as_ref() else {
        return Ok(());
    };
    let real = real().map_err(|source| IngestError::Io {
        path: label.to_string(),
        source,
    })?;
    if roots.iter().any(|r| real.starts_with(r)) {
        return Ok(());
    }
    Err(IngestError::format(
        label,
        format!(
            "refused: it resolves to {}, outside the folders this server may read",
            real.display()
        ),
    ))
}
