//! #39: budgets set through the environment. A variable that is not a
//! positive whole number is an error naming it, not a silent default.
//! Their own test binary: each test sets its variable for the whole
//! process (each a different one).

#[test]
fn an_invalid_gzip_ratio_variable_is_an_error_naming_it() {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(br#"{"traceEvents": []}"#).unwrap();
    let gz = enc.finish().unwrap();
    for bad in ["sixty-four", "0", "-3", "1e3", ""] {
        std::env::set_var("KOPT_GZIP_MAX_RATIO", bad);
        let e = kopt_ingest::parse_kineto(&gz, "t.json.gz").unwrap_err();
        let s = e.to_string();
        assert!(s.contains("KOPT_GZIP_MAX_RATIO"), "{bad}: {s}");
        assert!(s.contains("not a positive whole number"), "{bad}: {s}");
    }
    // A valid value is taken: whatever the empty trace's verdict, it is
    // not about the variable.
    std::env::set_var("KOPT_GZIP_MAX_RATIO", " 128 ");
    if let Err(e) = kopt_ingest::parse_kineto(&gz, "t.json.gz") {
        assert!(!e.to_string().contains("KOPT_GZIP_MAX_RATIO"), "{e}");
    }
}

#[test]
fn a_bare_step_file_past_its_record_budget_is_refused_with_its_line() {
    std::env::set_var("KOPT_BARE_STEPS_MAX_RECORDS", "3");
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join(kopt_ingest::BARE_STEPS_FILE);
    let line = |i: i64| {
        format!(
            "{{\"t\":\"bare_step\",\"name\":\"step\",\"s\":{},\"e\":{}}}\n",
            i * 100 + 1,
            i * 100 + 50
        )
    };
    std::fs::write(&p, (0..3).map(line).collect::<String>()).unwrap();
    assert_eq!(
        kopt_ingest::read_bare_steps(&p)
            .unwrap()
            .unwrap()
            .spans_ns
            .len(),
        3
    );
    std::fs::write(&p, (0..4).map(line).collect::<String>()).unwrap();
    let e = kopt_ingest::read_bare_steps(&p).unwrap_err().to_string();
    assert!(
        e.contains(":4") && e.contains("KOPT_BARE_STEPS_MAX_RECORDS="),
        "{e}"
    );
}
