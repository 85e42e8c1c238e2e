//! Hardening, round three (#39): files crafted to make a reader lie, leave
//! files behind or read far more than it needs. Each test failed before
//! its fix.

use std::time::{Duration, Instant};

/// A binary file no reader claims falls to the CSV reader: it is refused
/// from its head, not after reading gigabytes.
#[test]
fn an_unknown_binary_file_is_refused_from_its_head() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("blob.bin");
    let f = std::fs::File::create(&p).unwrap();
    // Sparse: 2 GiB of zeros that take no disk.
    f.set_len(2 << 30).unwrap();
    drop(f);
    let start = Instant::now();
    let err = kopt_ingest::read_ncu_csv(&p).unwrap_err().to_string();
    assert!(err.contains("binary data (NUL byte at offset 0)"), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
}
