//! One bound on a launch's duration in every reader (the ncu reader's 2.8
//! hours): a kernel lasting days or years is a broken record, refused or
//! left out with a note by each reader's own convention (#39).

use std::path::{Path, PathBuf};

use kopt_ingest::ncu::MAX_LAUNCH_NS;

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/amd")
        .join(rel)
}

/// `rel` with `from` replaced by `to` once, written into `dir`.
fn edited(dir: &Path, rel: &str, from: &str, to: &str) -> PathBuf {
    let text = std::fs::read_to_string(fixture(rel)).unwrap();
    assert!(text.contains(from), "{rel}: {from}");
    let out = dir.join(Path::new(rel).file_name().unwrap());
    std::fs::write(&out, text.replacen(from, to, 1)).unwrap();
    out
}

fn refusal(paths: &[PathBuf]) -> String {
    kopt_ingest::read_rocprof_files(paths)
        .map(|_| "read".to_string())
        .unwrap_or_else(|e| e.to_string())
}

#[test]
fn a_kopt_trace_kernel_longer_than_any_launch_is_left_out_and_said() {
    let kernel = |name: &str, s: i64, e: i64| {
        format!("{{\"t\":\"kernel\",\"name\":\"{name}\",\"s\":{s},\"e\":{e},\"dev\":0,\"str\":7,\"c\":1}}\n")
    };
    let text = kernel("ok", 1000, 2000)
        + &kernel("at_bound", 1000, 1000 + MAX_LAUNCH_NS)
        + &kernel("years", 1, 1_000_000_000_000_000_000);
    let t = kopt_ingest::parse_kopt_trace(&text, "t.jsonl").unwrap();
    let names: Vec<&str> = t
        .timeline
        .activities
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(names, ["ok", "at_bound"]);
    assert_eq!(t.invalid_records, 1);
    let first = t.first_invalid.as_deref().unwrap();
    assert!(
        first.starts_with("line 3: kernel from 1 to 1000000000000000000 ns: lasts 999999999999999999 ns, beyond any kernel launch"),
        "{first}"
    );
    assert!(
        t.source_format().contains("or longer than any launch"),
        "{}",
        t.source_format()
    );
}

#[test]
fn a_rocprof_csv_dispatch_longer_than_any_launch_is_refused_by_line() {
    let d = tempfile::tempdir().unwrap();
    // rocprofv3: Start_Timestamp moved to 1 ns.
    let v3 = edited(
        d.path(),
        "rocprofv3-docs/kernel_trace.csv",
        ",1550151853029637,",
        ",1,",
    );
    let e = refusal(&[v3]);
    assert!(
        e.contains("kernel_trace.csv:2: Start_Timestamp 1 to End_Timestamp 1550151853042437: lasts 1550151853042436 ns, beyond any kernel launch"),
        "{e}"
    );
    // rocprof v1: BeginNs.
    let v1 = edited(
        d.path(),
        "rocprof-v1-mi250/results.csv",
        ",1219236692544578,",
        ",1,",
    );
    let e = refusal(&[v1]);
    assert!(
        e.contains("results.csv:2: BeginNs 1 to EndNs 1219236704048334: lasts"),
        "{e}"
    );
}

#[test]
fn a_rocprofv3_json_dispatch_longer_than_any_launch_is_refused_by_record() {
    let d = tempfile::tempdir().unwrap();
    let j = edited(
        d.path(),
        "synthetic-rocprofv3-json/results.json",
        "\"start_timestamp\": 1550151853006500",
        "\"start_timestamp\": 1",
    );
    let e = refusal(&[j]);
    assert!(
        e.contains("kernel_dispatch[") || e.contains("counter_collection["),
        "{e}"
    );
    assert!(e.contains("start_timestamp 1 to end_timestamp"), "{e}");
    assert!(e.contains("beyond any kernel launch"), "{e}");
}

#[test]
fn a_kineto_kernel_longer_than_any_launch_is_left_out_and_counted() {
    let event = |name: &str, ts: &str, dur: &str| {
        format!("{{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"{name}\",\"pid\":0,\"tid\":7,\"ts\":{ts},\"dur\":{dur},\"args\":{{\"device\":0,\"stream\":7,\"correlation\":1}}}}")
    };
    let text = format!(
        "{{\"traceEvents\":[{},{}]}}",
        event("ok", "100.0", "2.5"),
        event("five_hours", "200.0", "18000000000.0")
    );
    let t = kopt_ingest::parse_kineto(text.as_bytes(), "k.json").unwrap();
    let names: Vec<&str> = t
        .timeline
        .activities
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(names, ["ok"]);
    assert_eq!(t.skipped_events, 1);
    let first = t.first_skipped.as_deref().unwrap();
    assert!(
        first.contains("\"five_hours\": lasts 18000000000000 ns, beyond any kernel launch"),
        "{first}"
    );
}

/// A dispatch whose end is not after its start, with nothing to estimate
/// its duration from, is said with its line, not dropped silently.
#[test]
fn a_rocprof_dispatch_ending_before_it_starts_is_said() {
    let d = tempfile::tempdir().unwrap();
    let csv = edited(
        d.path(),
        "rocprofv3-docs/kernel_trace.csv",
        ",1550151853029637,1550151853042437,",
        ",1550151853029637,1550151853029000,",
    );
    let p = kopt_ingest::read_rocprof_files(&[csv]).unwrap();
    let said: Vec<&str> = p.sources.iter().map(|s| s.format.as_str()).collect();
    assert!(
        said.iter()
            .any(|f| f.contains("1 dispatch(es) left without a duration, the first at line 2")),
        "{said:?}"
    );
}
