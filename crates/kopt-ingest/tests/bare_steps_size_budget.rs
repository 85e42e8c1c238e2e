//! #39: a bare-steps file past its size budget suggests the size it needs.
//! Its own test binary: it sets a budget variable for the whole process.

#[test]
fn a_bare_step_file_past_its_size_budget_suggests_its_own_size() {
    std::env::set_var("KOPT_BARE_STEPS_MAX_BYTES", "100");
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("big").join(kopt_ingest::BARE_STEPS_FILE);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let line = "{\"t\":\"bare_step\",\"name\":\"step\",\"s\":1,\"e\":50}\n";
    std::fs::write(&p, line.repeat(10)).unwrap();
    let size = std::fs::metadata(&p).unwrap().len();
    let e = kopt_ingest::read_bare_steps(&p).unwrap_err().to_string();
    assert!(
        e.contains(&format!("KOPT_BARE_STEPS_MAX_BYTES={size}")),
        "{e}"
    );
}
