//! #39, round 9: a link swapped between the path's check and the open let
//! an outside file through MCP analyze. What a descriptor holds is checked
//! too. Its own test binary: confinement is for the whole process.

#[test]
fn an_opened_file_is_judged_by_what_it_is_not_by_its_path() {
    let inside = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.json");
    std::fs::write(&secret, b"{}").unwrap();
    let ok = inside.path().join("ok.json");
    std::fs::write(&ok, b"{}").unwrap();
    kopt_ingest::confine::confine_reads(&[inside.path().to_path_buf()]);
    assert!(kopt_ingest::confine::confined());
    // The path checked was inside; what was opened is the outside file
    // (the swap's end state).
    let link = inside.path().join("trace.json");
    std::os::unix::fs::symlink(&ok, &link).unwrap();
    kopt_ingest::confine::check(&link, "trace.json").unwrap();
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(&secret, &link).unwrap();
    let opened = std::fs::File::open(&link).unwrap();
    let e = kopt_ingest::confine::check_opened(&opened, "trace.json").unwrap_err();
    assert!(e.to_string().contains("outside the folders"), "{e}");
    let fine = std::fs::File::open(&ok).unwrap();
    kopt_ingest::confine::check_opened(&fine, "ok.json").unwrap();
    // Every reader opens through the check: the link is refused.
    let e = kopt_ingest::read_kineto(&link).unwrap_err();
    assert!(e.to_string().contains("outside the folders"), "{e}");
}
