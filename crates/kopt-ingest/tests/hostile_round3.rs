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

fn kopt_trace(device: &str, kernels: &[&str]) -> String {
    let mut t = format!(
        "{{\"t\":\"process\",\"pid\":1}}\n{{\"t\":\"device\",\"id\":0,\"name\":\"{device}\",\"sms\":132,\"cc\":[9,0],\"mem_bw_kbs\":3350000000,\"clock_khz\":1980000}}\n"
    );
    for k in kernels {
        t.push_str(k);
        t.push('\n');
    }
    t.push_str("{\"t\":\"end\"}\n");
    t
}

/// A block of 0 threads or a grid of 2^32 - 1 blocks is no launch a GPU
/// ran: the kernel keeps its time, its geometry is left unknown and said.
#[test]
fn impossible_launch_geometry_in_a_kopt_trace_is_left_unknown_and_said() {
    let text = kopt_trace(
        "NVIDIA H100",
        &[
            r#"{"t":"kernel","name":"kA","s":1000,"e":2000,"dev":0,"str":7,"c":8,"g":[4294967295,1,1],"b":[0,1,1]}"#,
            r#"{"t":"kernel","name":"kB","s":3000,"e":5000,"dev":0,"str":7,"c":9,"g":[4,1,1],"b":[2048,2048,64]}"#,
            r#"{"t":"kernel","name":"kC","s":6000,"e":7000,"dev":0,"str":7,"c":10,"g":[4,1,1],"b":[256,1,1]}"#,
        ],
    );
    let t = kopt_ingest::parse_kopt_trace(&text, "geo.jsonl").unwrap();
    let a = &t.timeline.activities;
    assert_eq!(a.len(), 3);
    assert_eq!((a[0].grid, a[0].block), (None, None));
    assert_eq!((a[1].grid, a[1].block), (None, None));
    assert!(a[2].block.is_some());
    let format = t.source_format();
    assert!(
        format.contains("2 kernel(s) with a launch geometry no GPU runs")
            && format.contains("line 3: block [0, 1, 1]"),
        "{format}"
    );
}

/// `trace.jsonl.<pid>` of a process on another GPU is not merged under
/// the first GPU's name.
#[test]
fn a_sibling_trace_of_another_gpu_is_refused_by_name() {
    let d = tempfile::tempdir().unwrap();
    let k = r#"{"t":"kernel","name":"k","s":1000,"e":2000,"dev":0,"str":7,"c":8,"g":[4,1,1],"b":[32,1,1]}"#;
    std::fs::write(
        d.path().join("trace.jsonl"),
        kopt_trace("NVIDIA H200", &[k]),
    )
    .unwrap();
    std::fs::write(
        d.path().join("trace.jsonl.2"),
        kopt_trace("NVIDIA H100 80GB HBM3", &[k]),
    )
    .unwrap();
    let err = kopt_ingest::read_kopt_trace_set(&d.path().join("trace.jsonl"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("NVIDIA H200") && err.contains("trace.jsonl.2") && err.contains("H100"),
        "{err}"
    );
    // The same GPU in both: merged as before (another process's kernel:
    // a file repeating the trace's own records is merged once).
    let k2 = k.replace("\"c\":8", "\"c\":9");
    std::fs::write(
        d.path().join("trace.jsonl.2"),
        kopt_trace("NVIDIA H200", &[&k2]),
    )
    .unwrap();
    let t = kopt_ingest::read_kopt_trace_set(&d.path().join("trace.jsonl")).unwrap();
    assert_eq!(t.merged_files, ["trace.jsonl.2"]);
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

/// A rocpd database in WAL mode is read without leaving `-shm` / `-wal`
/// files beside it (a read-only input must stay as it was).
#[test]
fn a_wal_mode_rocpd_database_is_read_leaving_nothing_beside_it() {
    let corpus =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/rocpd/trace.db");
    let d = tempfile::tempdir().unwrap();
    // A name a URI must encode.
    let p = d.path().join("my run?#%.db");
    std::fs::copy(corpus, &p).unwrap();
    let conn = rusqlite::Connection::open(&p).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    drop(conn);
    let before: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(before.len(), 1, "{before:?}");
    let profile = kopt_ingest::read_rocprof_files(std::slice::from_ref(&p)).unwrap();
    assert!(!profile.launches.is_empty());
    let after: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(after, before);
}
