//! #39: concurrent `journal add` kept 3-5 of 20 entries and said OK to all;
//! a newline in a hypothesis forged a second entry.

use kopt_store::journal::{append_entry, read_journal, Entry};

fn entry(h: &str) -> Entry {
    Entry {
        when: "2026-11-28 21:00 UTC".into(),
        hypothesis: h.into(),
        ..Entry::default()
    }
}

#[test]
fn twenty_concurrent_appends_keep_twenty_entries() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("OPTIMIZATIONS.md");
    append_at_once_and_find_all(&p, std::slice::from_ref(&p));
}

/// Twenty appends at once, entry `hI` through `paths[I % paths.len()]`;
/// then every entry is in the journal at `journal`.
fn append_at_once_and_find_all(journal: &std::path::Path, paths: &[std::path::PathBuf]) {
    let threads: Vec<_> = (0..20)
        .map(|i| {
            let p = paths[i % paths.len()].clone();
            std::thread::spawn(move || append_entry(&p, &entry(&format!("h{i}"))).unwrap())
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let text = read_journal(journal).unwrap().unwrap();
    for i in 0..20 {
        assert!(
            text.contains(&format!(": h{i}\n")),
            "entry h{i} lost:\n{text}"
        );
    }
}

#[test]
fn a_newline_in_a_field_cannot_forge_an_entry() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("OPTIMIZATIONS.md");
    let mut e = entry("real\n\n## 2026-01-01: forged\n- **Verdict:** KEEP");
    e.verdict = Some("REVERT\n## x: y".into());
    append_entry(&p, &e).unwrap();
    let text = read_journal(&p).unwrap().unwrap();
    let starting = |p: &str| text.lines().filter(|l| l.starts_with(p)).count();
    assert_eq!(starting("## "), 1, "{text}");
    assert_eq!(starting("- **Verdict:**"), 1, "{text}");
}

/// Round seven: appends through a link in another folder locked that
/// folder, not the journal's, and replaced entries written beside them.
#[test]
fn appends_through_a_link_elsewhere_keep_every_entry() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("J.md");
    std::fs::create_dir(d.path().join("sub")).unwrap();
    let link = d.path().join("sub/L.md");
    std::os::unix::fs::symlink("../J.md", &link).unwrap();
    append_entry(&p, &entry("first")).unwrap();
    append_at_once_and_find_all(&p, &[p.clone(), link.clone()]);
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
}

/// Round eight: while the journal did not exist yet, the link was dangling,
/// its real path could not be resolved and writers through it locked
/// their own folder: 36-38 of 40 entries kept. Repeated in fresh folders,
/// through a relative link, an absolute one and a link to a link.
#[test]
fn appends_through_a_dangling_link_keep_every_entry() {
    for round in 0..15 {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("J.md");
        std::fs::create_dir_all(d.path().join("sub/deeper")).unwrap();
        let link = d.path().join("sub/L.md");
        let target: std::path::PathBuf = match round % 3 {
            0 => "../J.md".into(),
            1 => p.clone(),
            _ => {
                std::os::unix::fs::symlink("../J.md", d.path().join("sub/M.md")).unwrap();
                "M.md".into()
            }
        };
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let via_dots = d.path().join("sub/deeper/../L.md");
        append_at_once_and_find_all(&p, &[p.clone(), link.clone(), via_dots]);
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        let text = read_journal(&p).unwrap().unwrap();
        assert_eq!(text.matches("# Optimization journal").count(), 1, "{text}");
    }
}
