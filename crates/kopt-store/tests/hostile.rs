//! #27: the journal is read only as a bounded regular file, and a write's
//! temporary file cannot be redirected by a planted symlink.

use std::path::Path;
use std::time::{Duration, Instant};

use kopt_store::journal::{append_entry, read_journal, Entry};

fn entry() -> Entry {
    Entry {
        when: "2026-11-26 23:00 UTC".into(),
        hypothesis: "h".into(),
        ..Entry::default()
    }
}

fn mkfifo(p: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

/// Runs `f` on a thread; fails if it does not return within 5 s (it
/// blocked on a FIFO before).
fn within_5s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(5))
        .expect("blocked for more than 5 s")
}

#[test]
fn a_fifo_journal_is_refused_without_blocking() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("OPTIMIZATIONS.md");
    mkfifo(&fifo);
    let p = fifo.clone();
    let e = within_5s(move || read_journal(&p).unwrap_err().to_string());
    assert!(e.contains("not a regular file"), "{e}");
    let p = fifo.clone();
    let e = within_5s(move || append_entry(&p, &entry()).unwrap_err().to_string());
    assert!(e.contains("not a regular file"), "{e}");
}

#[test]
fn a_journal_linked_to_dev_zero_or_sparse_and_huge_is_not_read_whole() {
    let d = tempfile::tempdir().unwrap();
    let zero = d.path().join("zero.md");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let started = Instant::now();
    let e = read_journal(&zero).unwrap_err().to_string();
    assert!(e.contains("not a regular file"), "{e}");
    // A sparse 1.5 GB file: refused from its size, in no time.
    let sparse = d.path().join("sparse.md");
    let f = std::fs::File::create(&sparse).unwrap();
    f.set_len(1_500_000_000).unwrap();
    let e = read_journal(&sparse).unwrap_err().to_string();
    assert!(e.contains("journal budget"), "{e}");
    assert!(e.contains("KOPT_JOURNAL_MAX_BYTES="), "{e}");
    let e = append_entry(&sparse, &entry()).unwrap_err().to_string();
    assert!(e.contains("journal budget"), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // A normal journal still reads and appends.
    let ok = d.path().join("ok.md");
    append_entry(&ok, &entry()).unwrap();
    assert!(read_journal(&ok)
        .unwrap()
        .unwrap()
        .contains("## 2026-11-26"));
}

#[test]
fn a_symlink_planted_at_the_old_temporary_name_does_not_redirect_a_write() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("report.json");
    let victim = d.path().join("victim.txt");
    std::fs::write(&victim, "keep").unwrap();
    // The name the write used to take: `.NAME.kopt-tmp-PID`.
    let planted = d
        .path()
        .join(format!(".report.json.kopt-tmp-{}", std::process::id()));
    std::os::unix::fs::symlink(&victim, &planted).unwrap();
    kopt_store::files::write_file(&out, b"{}").unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "{}");
    // A new file gets the mode a plain create gives, not tempfile's 0600.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
    assert_ne!(mode, 0o600, "{mode:o}");
}
