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

/// A unit kopt does not know is not read as its base unit: the duration's
/// is an error, another column is left unknown and said.
#[test]
fn an_unknown_unit_is_said_not_read_as_the_base_unit() {
    let page = |dur: &str, bytes: &str| {
        format!(
            "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\",\"dram__bytes_read.sum\"\n\"\",\"\",\"{dur}\",\"{bytes}\"\n\"0\",\"k1\",\"1000\",\"5000\"\n"
        )
    };
    let err = kopt_ingest::parse_ncu_csv(page("furlong", "byte").as_bytes(), "u.csv")
        .unwrap_err()
        .to_string();
    assert!(err.contains("unit \"furlong\" is not a time unit"), "{err}");
    let f = kopt_ingest::parse_ncu_csv(page("usecond", "parsec").as_bytes(), "u.csv").unwrap();
    assert_eq!(f.launches[0].metrics.duration_ns, Some(1e6));
    assert_eq!(f.launches[0].metrics.dram_bytes_read, None);
    assert!(
        f.excluded
            .iter()
            .any(|e| e.contains("dram__bytes_read.sum") && e.contains("\"parsec\" unknown")),
        "{:?}",
        f.excluded
    );
}

/// A launch whose duration is "n/a" counts as 0 ns: the source says so.
#[test]
fn an_na_duration_is_said() {
    let page = "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"\",\"\",\"nsecond\"\n\"0\",\"k1\",\"1000\"\n\"1\",\"k2\",\"n/a\"\n";
    let f = kopt_ingest::parse_ncu_csv(page.as_bytes(), "na.csv").unwrap();
    assert_eq!(f.launches.len(), 2);
    assert!(
        f.excluded
            .iter()
            .any(|e| e.contains("n/a in 1 of 2 row(s)") && e.contains("line 4")),
        "{:?}",
        f.excluded
    );
}

/// AMD agent figures beyond any GPU (an LDS of 1.8e19 bytes per CU) are
/// left unknown and said, not reported as fact.
#[test]
fn implausible_amd_agent_figures_are_left_unknown() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/amd/synthetic-rocprofv3-json/results.json");
    let text = std::fs::read_to_string(fixture).unwrap();
    assert!(text.contains("\"lds_size_in_kb\": 64,"));
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("results.json");
    std::fs::write(
        &p,
        text.replace(
            "\"lds_size_in_kb\": 64,",
            "\"lds_size_in_kb\": 17592186044416,",
        ),
    )
    .unwrap();
    let profile = kopt_ingest::read_rocprof_files(&[p]).unwrap();
    let amd = profile.device.amd.as_ref().unwrap();
    // kopt's table figure for the MI300X instead.
    assert_eq!(amd.lds_bytes_per_cu, Some(64 << 10));
    assert!(
        amd.source.contains("implausible") && amd.source.contains("LDS bytes per CU"),
        "{}",
        amd.source
    );
}
