//! kopt's output policy, one place for every file it writes for the user
//! (reports, HTML pages, exports, the journal):
//! - a regular file is replaced atomically (a temporary file in the same
//!   folder, then a rename), and only when the user could write it;
//! - a symlink is followed and its target replaced (the link stays);
//! - a FIFO or character device is written directly, never replaced;
//! - a directory, a read-only file or a missing folder is an error that
//!   names the user's path, never the temporary file;
//! - several outputs are checked together first ([`check_writable`]), so
//!   nothing is written unless every one of them can be.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct OutputError {
    pub path: String,
    pub message: String,
}

fn fail(path: &Path, message: impl Into<String>) -> OutputError {
    OutputError {
        path: path.display().to_string(),
        message: message.into(),
    }
}

/// How a path is written.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// Replace (or create) this regular file, the symlink's target when the
    /// user named a link.
    Replace(PathBuf),
    /// Write into it as it is (FIFO, character device).
    Stream(PathBuf),
}

fn target(path: &Path) -> Result<Target, OutputError> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if std::fs::symlink_metadata(path).is_ok() {
                // A link to a file not made yet: create what it points to
                // (as `echo > link` does), one level deep.
                let dest = std::fs::read_link(path)
                    .map_err(|e| fail(path, format!("cannot follow the symlink: {e}")))?;
                let dest = parent(path).join(dest);
                if std::fs::symlink_metadata(&dest).is_ok() {
                    return Err(fail(path, "a symlink to a symlink to nothing; not written"));
                }
                return match target(&dest) {
                    Ok(t) => Ok(t),
                    Err(e) => Err(fail(
                        path,
                        format!("a symlink to {}: {}", dest.display(), e.message),
                    )),
                };
            }
            None
        }
        Err(e) => return Err(fail(path, format!("cannot write: {e}"))),
    };
    let real = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path)
            .map_err(|e| fail(path, format!("cannot follow the symlink: {e}")))?,
        _ => path.to_path_buf(),
    };
    match meta {
        None => {
            let dir = parent(&real);
            match std::fs::metadata(dir) {
                Ok(d) if d.is_dir() => {
                    if !writable(dir) {
                        return Err(fail(
                            path,
                            format!("cannot write: folder {} is not writable", dir.display()),
                        ));
                    }
                    Ok(Target::Replace(real))
                }
                Ok(_) => Err(fail(
                    path,
                    format!("cannot write: {} is not a folder", dir.display()),
                )),
                Err(_) => Err(fail(
                    path,
                    format!("cannot write: folder {} does not exist", dir.display()),
                )),
            }
        }
        Some(m) if m.is_dir() => Err(fail(path, "is a folder, not a file")),
        Some(m) if m.file_type().is_fifo() || m.file_type().is_char_device() => {
            Ok(Target::Stream(real))
        }
        Some(m) if m.is_file() => {
            // Root may write anything: the mode bits say what the owner meant.
            if m.permissions().mode() & 0o222 == 0 || !writable(&real) {
                return Err(fail(path, "read-only file; not replaced"));
            }
            if !writable(parent(&real)) {
                return Err(fail(
                    path,
                    format!(
                        "cannot replace: folder {} is not writable",
                        parent(&real).display()
                    ),
                ));
            }
            Ok(Target::Replace(real))
        }
        Some(_) => Err(fail(path, "not a regular file, FIFO or character device")),
    }
}

/// The process's umask, from /proc (reading it with umask(2) would change
/// it for a moment under other threads); 022 when unknown.
fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

/// Where a write to `path` lands: its real folder and name, a link at
/// `path` followed by hand (a dangling one too: the write creates its
/// target), folders not made yet resolved as far as they exist. The one
/// answer for every writer that must know the file behind a name (the
/// journal's lock, outputs naming one file, the MCP server's records).
/// None past 40 links, as the kernel's limit for one lookup.
pub fn written_at(path: &Path) -> Option<PathBuf> {
    written_at_within(path, 0)
}

fn written_at_within(path: &Path, links: usize) -> Option<PathBuf> {
    if links > 40 {
        return None;
    }
    let Some(name) = path.file_name() else {
        // `.`, `/`, `x/..`: a folder, whatever it resolves to.
        return std::fs::canonicalize(path).ok();
    };
    let dir = parent(path);
    let dir = match std::fs::canonicalize(dir) {
        Ok(d) => d,
        Err(_) => written_at_within(dir, links + 1)?,
    };
    let at = dir.join(name);
    match std::fs::symlink_metadata(&at) {
        // Relative to the link's folder; an absolute target replaces it.
        Ok(m) if m.file_type().is_symlink() => {
            written_at_within(&dir.join(std::fs::read_link(&at).ok()?), links + 1)
        }
        _ => Some(at),
    }
}

pub(crate) fn parent(p: &Path) -> &Path {
    p.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

fn writable(p: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// Check that every path can be written under the policy, before any is.
pub fn check_writable<'a>(paths: impl IntoIterator<Item = &'a Path>) -> Result<(), OutputError> {
    for p in paths {
        target(p)?;
    }
    Ok(())
}

/// Write `bytes` to `path` under the policy.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    match target(path)? {
        Target::Stream(p) => OpenOptions::new()
            .write(true)
            .open(&p)
            .and_then(|mut f| f.write_all(bytes))
            .map_err(|e| fail(path, format!("cannot write: {e}"))),
        Target::Replace(real) => replace(path, &real, bytes),
    }
}

fn replace(user_path: &Path, real: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    let name = real
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // An unpredictable name created with O_EXCL (tempfile): a symlink
    // planted at a predictable name (`.NAME.kopt-tmp-PID`) redirected the
    // write. Removed on failure.
    let mode = std::fs::metadata(real).ok().map(|m| m.permissions());
    let result = (|| -> std::io::Result<()> {
        let mut f = tempfile::Builder::new()
            .prefix(&format!(".{name}.kopt-tmp-"))
            .tempfile_in(parent(real))?;
        f.write_all(bytes)?;
        // The old file's mode, or what a plain create would give (tempfile
        // makes 0600).
        let mode = mode.unwrap_or_else(|| std::fs::Permissions::from_mode(0o666 & !umask()));
        f.as_file().set_permissions(mode)?;
        f.as_file().sync_all()?;
        f.persist(real).map_err(|e| e.error)?;
        Ok(())
    })();
    result.map_err(|e| fail(user_path, format!("cannot write: {e}")))
}

/// Whether the readers take `out` along with the file `input`: a kopt
/// trace's siblings of other processes (`trace.jsonl.<pid>`) and the bare
/// steps beside a trace (`bare_steps.jsonl`, `NAME.bare_steps.jsonl`).
fn read_beside(out: &Path, input: &Path) -> bool {
    let parent = |p: &Path| {
        let dir = p.parent().filter(|d| !d.as_os_str().is_empty());
        std::fs::canonicalize(dir.unwrap_or(Path::new(".")))
    };
    let (Ok(od), Ok(id)) = (parent(out), parent(input)) else {
        return false;
    };
    let (Some(on), Some(inn)) = (
        out.file_name().and_then(|n| n.to_str()),
        input.file_name().and_then(|n| n.to_str()),
    ) else {
        return false;
    };
    let sibling = on
        .strip_prefix(inn)
        .and_then(|rest| rest.strip_prefix('.'))
        .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()));
    od == id && (sibling || on.ends_with("bare_steps.jsonl"))
}

/// Whether writing `out` would write over `input`: the same file by
/// identity (device and inode, symlinks followed), not by path text, so
/// `./in.csv`, an absolute path or a link to the input all count; a file
/// inside an input folder counts too. Where `out` does not exist yet,
/// nothing is overwritten unless the text is the same. A file read along with
/// an input file (its trace siblings, its bare steps) counts as it.
pub fn overwrites(out: &Path, input: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if out == input {
        return true;
    }
    let (Ok(o), Ok(i)) = (std::fs::metadata(out), std::fs::metadata(input)) else {
        return false;
    };
    if (o.dev(), o.ino()) == (i.dev(), i.ino()) {
        return true;
    }
    if i.is_file() && read_beside(out, input) {
        return true;
    }
    i.is_dir()
        && matches!(
            (std::fs::canonicalize(out), std::fs::canonicalize(input)),
            (Ok(o), Ok(i)) if o.starts_with(&i)
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkfifo(p: &Path) {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid path; the FIFO lives in a temporary folder.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn replaces_a_regular_file_and_keeps_its_mode() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.txt");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_file(&p, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        assert_eq!(
            std::fs::read_dir(d.path()).unwrap().count(),
            1,
            "no temp left"
        );
    }

    #[test]
    fn a_symlink_is_followed_and_stays_a_link() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("real.md");
        std::fs::write(&target, "old").unwrap();
        let link = d.path().join("link.md");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_file(&link, b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
    }

    #[test]
    fn a_fifo_is_written_directly() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("pipe");
        mkfifo(&p);
        let reader = {
            let p = p.clone();
            std::thread::spawn(move || std::fs::read(p).unwrap())
        };
        write_file(&p, b"through the pipe").unwrap();
        assert_eq!(reader.join().unwrap(), b"through the pipe");
        assert!(std::fs::metadata(&p).unwrap().file_type().is_fifo());
    }

    #[test]
    fn refusals_name_the_users_path() {
        let d = tempfile::tempdir().unwrap();
        let ro = d.path().join("ro.txt");
        std::fs::write(&ro, "keep").unwrap();
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o444)).unwrap();
        let dir = d.path().join("sub");
        std::fs::create_dir(&dir).unwrap();
        let missing = d.path().join("missing/x.json");
        let dangling = d.path().join("dangling");
        std::os::unix::fs::symlink(d.path().join("nowhere/x"), &dangling).unwrap();
        for (p, what) in [
            (&ro, "read-only"),
            (&dir, "is a folder"),
            (&missing, "does not exist"),
            (&dangling, "does not exist"),
        ] {
            let e = write_file(p, b"x").unwrap_err().to_string();
            assert!(e.starts_with(&p.display().to_string()), "{e}");
            assert!(e.contains(what), "{e}");
            assert!(!e.contains("kopt-tmp"), "{e}");
        }
        assert_eq!(std::fs::read_to_string(&ro).unwrap(), "keep");
    }

    #[test]
    fn check_writable_refuses_before_anything_is_written() {
        let d = tempfile::tempdir().unwrap();
        let keep = d.path().join("keep.html");
        std::fs::write(&keep, "old page").unwrap();
        let bad = d.path().join("missing/x.json");
        assert!(check_writable([keep.as_path(), bad.as_path()]).is_err());
        assert_eq!(std::fs::read_to_string(&keep).unwrap(), "old page");
    }
}
