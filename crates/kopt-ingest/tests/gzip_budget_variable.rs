//! #39: a budget variable that is not a positive whole number is an error
//! naming it, not a silent default. Its own test binary: it sets the
//! variable for the whole process.

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
