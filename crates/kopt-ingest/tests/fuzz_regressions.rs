//! Inputs a fuzz campaign found: each one panicked, hung, ran out of memory,
//! or was accepted while it was garbage. Every error must be an
//! `IngestError` on one line that names the file.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use kopt_ingest::{
    parse_kineto, parse_kopt_trace, parse_ncu_csv, read_kineto, read_kopt_trace,
    read_kopt_trace_set, read_ncu_csv, read_run_folder, IngestError, MAX_NAME_BYTES,
};

fn one_line(e: &IngestError) -> String {
    let s = e.to_string();
    assert!(
        !s.contains('\n') && !s.contains('\r'),
        "two-line error: {s:?}"
    );
    s
}

// ---- 1. a file that ends right after a backslash inside a string ----

#[test]
fn kineto_ending_after_a_backslash_is_an_error_with_its_offset() {
    let bytes = br#"{"a":"\"#;
    assert_eq!(bytes.len(), 7);
    let e = parse_kineto(bytes, "cut.json").unwrap_err();
    let s = one_line(&e);
    assert!(s.starts_with("cut.json: byte "), "{s}");
    // The same cut inside traceEvents, in a name, a key and a skipped value.
    for text in [
        r#"{"traceEvents": [{"name": "\"#,
        r#"{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "a\"#,
        r#"{"traceEvents": [{"\"#,
        r#"{"traceEvents": [{"ph": "B", "x": {"y": "\"#,
        r#"{"deviceProperties": [{"name": "\"#,
        "\"\\",
        "{\"a\":[\"\\",
    ] {
        let e = parse_kineto(text.as_bytes(), "cut.json").unwrap_err();
        assert!(one_line(&e).starts_with("cut.json: "), "{text}: {e}");
    }
}

/// A small trace with every kind of value the scanners look at or skip.
const TRACE: &str = r#"{"schemaVersion": 1, "deviceProperties": [{"name": "NVIDIA H200", "numSms": 132}],
"traceEvents": [
{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 10.5, "dur": 2, "tid": 3, "args": {"correlation": 1}},
{"ph": "X", "cat": "kernel", "name": "k\"q\\u00e9", "ts": 13, "dur": 4.25, "args": {"correlation": 1, "grid": [1, 2, 3], "block": [32, 1, 1], "stream": 7, "device": 0}},
{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 30, "args": {"nested": {"a": [1, {"b": "}]"}]}}},
{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 9, "dur": 20},
{"ph": "i", "name": "x\\y", "ts": 3}
]}"#;

#[test]
fn no_prefix_of_a_trace_panics() {
    let bytes = TRACE.as_bytes();
    assert!(parse_kineto(bytes, "t.json").is_ok());
    for end in 0..bytes.len() {
        if let Err(e) = parse_kineto(&bytes[..end], "t.json") {
            assert!(one_line(&e).starts_with("t.json"), "{e}");
        }
    }
}

#[test]
fn no_single_byte_change_of_a_trace_panics() {
    let bytes = TRACE.as_bytes();
    for at in 0..bytes.len() {
        for b in [
            b'\\', b'"', b'{', b'}', b'[', b']', b',', b':', 0xC3, 0x00, b'-',
        ] {
            let mut m = bytes.to_vec();
            m[at] = b;
            if let Ok(t) = parse_kineto(&m, "t.json") {
                for a in &t.timeline.activities {
                    assert!(a.end_ns >= a.start_ns, "{a:?}");
                }
            }
            let mut cut = m.clone();
            cut.truncate(at + 1);
            let _ = parse_kineto(&cut, "t.json");
        }
    }
}

// ---- 3. FIFOs, directories, devices ----

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(status.success(), "mkfifo {}", path.display());
}

/// `f()` on another thread: a reader that blocks on a FIFO fails the test
/// instead of hanging it.
fn within_10s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the reader returned instead of blocking")
}

fn assert_not_regular(e: Result<impl std::fmt::Debug, IngestError>, path: &Path, kind: &str) {
    let e = e.expect_err("a non-regular file is refused");
    let s = one_line(&e);
    assert_eq!(
        s,
        format!("{}: not a regular file ({kind})", path.display()),
        "{e:?}"
    );
}

#[test]
fn a_fifo_is_refused_by_every_reader() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("trace.json");
    mkfifo(&fifo);
    let p = fifo.clone();
    assert_not_regular(within_10s(move || read_kineto(&p)), &fifo, "a FIFO");
    let p = fifo.clone();
    assert_not_regular(within_10s(move || read_ncu_csv(&p)), &fifo, "a FIFO");
    let p = fifo.clone();
    assert_not_regular(within_10s(move || read_kopt_trace(&p)), &fifo, "a FIFO");
    let p = fifo.clone();
    assert_not_regular(within_10s(move || read_kopt_trace_set(&p)), &fifo, "a FIFO");
    // A symbolic link is followed: to a FIFO it is refused too.
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&fifo, &link).unwrap();
    let p = link.clone();
    assert_not_regular(within_10s(move || read_kineto(&p)), &link, "a FIFO");
}

#[test]
fn a_fifo_in_a_run_folder_is_refused() {
    // Under the timing trace's name.
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    mkfifo(&trace);
    let d = dir.path().to_path_buf();
    assert_not_regular(within_10s(move || read_run_folder(&d)), &trace, "a FIFO");

    // Beside a good trace, under the name of another process's trace.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("trace.jsonl"),
        "{\"t\":\"kernel\",\"name\":\"k\",\"s\":10,\"e\":20}\n",
    )
    .unwrap();
    let other = dir.path().join("trace.jsonl.4242");
    mkfifo(&other);
    let d = dir.path().to_path_buf();
    assert_not_regular(within_10s(move || read_run_folder(&d)), &other, "a FIFO");

    // Under the name of the ncu timing pass.
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("pass1-timing.csv");
    mkfifo(&csv);
    let d = dir.path().to_path_buf();
    assert_not_regular(within_10s(move || read_run_folder(&d)), &csv, "a FIFO");
}

#[test]
fn a_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("trace.json");
    std::fs::create_dir(&sub).unwrap();
    assert_not_regular(read_kineto(&sub), &sub, "a directory");
    assert_not_regular(read_ncu_csv(&sub), &sub, "a directory");
    assert_not_regular(read_kopt_trace(&sub), &sub, "a directory");
}

// ---- 4. huge names ----

/// A mangled name of `len` bytes: `_Z` and one long identifier.
fn huge_mangled(len: usize) -> String {
    let ident = len - 2 - len.to_string().len() - 1;
    format!("_Z{ident}{}v", "a".repeat(ident))
}

#[test]
fn a_huge_kernel_name_is_cut_and_counted() {
    let name = huge_mangled(3_200_000);
    let text = format!(
        "{{\"t\":\"kernel\",\"name\":\"{name}\",\"s\":10,\"e\":20,\"c\":1}}\n{{\"t\":\"kernel\",\"name\":\"_Z1fv\",\"s\":30,\"e\":40,\"c\":2}}\n"
    );
    let t = parse_kopt_trace(&text, "big.jsonl").unwrap();
    assert_eq!(t.names_cut, 1);
    let names: Vec<&str> = t
        .timeline
        .activities
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    assert!(names[0].len() <= MAX_NAME_BYTES + 64, "{}", names[0].len());
    assert!(names[0].starts_with("_Z"), "a cut name is not demangled");
    assert!(
        names[0].ends_with("[name cut: 3200000 bytes in all]"),
        "{}",
        &names[0][MAX_NAME_BYTES - 10..]
    );
    assert_eq!(names[1], "f()", "short names are still demangled");
}

#[test]
fn a_huge_kineto_name_is_cut_and_counted() {
    let name = "n".repeat(1_000_000);
    let text = format!(
        r#"{{"traceEvents": [{{"ph": "X", "cat": "kernel", "name": "{name}", "ts": 1, "dur": 2}}]}}"#
    );
    let t = parse_kineto(text.as_bytes(), "big.json").unwrap();
    assert_eq!(t.names_cut, 1);
    assert!(t.timeline.activities[0].name.len() <= MAX_NAME_BYTES + 64);
}

#[test]
fn demangling_is_bounded() {
    // Longer than the cap: not parsed at all, returned as it is.
    let long = huge_mangled(MAX_NAME_BYTES + 1);
    assert_eq!(kopt_ingest::kopt_trace::demangle(&long), long);
    // Back-references that double the text at each step (2^40 characters
    // demangled): abandoned past the cap, the mangled name kept.
    let doubling = |steps: usize| {
        let mut name = String::from("_Z1fI1AIS_S_E");
        for i in 0..steps {
            let id = std::char::from_digit(i as u32 % 36, 36)
                .unwrap()
                .to_ascii_uppercase();
            name.push_str(&format!("S_IS{id}_S{id}_E"));
        }
        name + "Ev"
    };
    let small = kopt_ingest::kopt_trace::demangle(&doubling(3));
    assert!(small.starts_with("void f<"), "{small}");
    let name = doubling(35);
    assert_eq!(kopt_ingest::kopt_trace::demangle(&name), name);
}

// ---- 5. garbage accepted ----

#[test]
fn a_one_line_kopt_trace_without_newline_is_read_or_refused() {
    let complete = r#"{"t":"kernel","name":"_Z1fv","s":10,"e":25,"c":1}"#;
    let t = parse_kopt_trace(complete, "one.jsonl").unwrap();
    assert_eq!(t.timeline.activities.len(), 1, "a complete line is read");
    assert_eq!(t.timeline.activities[0].duration_ns(), 15);

    for garbage in ["x", "{\"t\":\"kern", "{", "[1,2]", "{\"a\":1}"] {
        let e = parse_kopt_trace(garbage, "one.jsonl").unwrap_err();
        let s = one_line(&e);
        assert!(s.starts_with("one.jsonl:1: byte "), "{garbage}: {s}");
    }
    // After records, a cut last line is what a killed process leaves: dropped.
    let t = parse_kopt_trace(&format!("{complete}\n{{\"t\":\"kern"), "two.jsonl").unwrap();
    assert_eq!(t.timeline.activities.len(), 1);
    // But a complete last line that is not a record is not a cut one.
    let e = parse_kopt_trace(&format!("{complete}\n[1]"), "two.jsonl").unwrap_err();
    assert!(one_line(&e).starts_with("two.jsonl:2: "), "{e}");
}

#[test]
fn events_must_be_objects() {
    let e = parse_kineto(br#"{"traceEvents":[[],{}]}"#, "t.json").unwrap_err();
    let s = one_line(&e);
    assert!(s.contains("a trace event (a JSON object)"), "{s}");
    assert!(s.starts_with("t.json: byte "), "{s}");
}

#[test]
fn a_trace_without_gpu_activity_is_an_error_of_its_own() {
    for text in [
        r#"{"traceEvents":[{}]}"#,
        r#"{"traceEvents":[]}"#,
        r#"{"traceEvents":[{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}]}"#,
    ] {
        let e = parse_kineto(text.as_bytes(), "cpu.json").unwrap_err();
        assert!(
            matches!(e, IngestError::NoGpuActivity { .. }),
            "{text}: {e}"
        );
        assert!(one_line(&e).starts_with("cpu.json: no GPU activity"), "{e}");
    }
    // A kopt trace with no kernel says so.
    let t = parse_kopt_trace("{\"t\":\"end\",\"records\":0,\"dropped\":0}\n", "t.jsonl").unwrap();
    assert!(!t.has_gpu_activity());
}

/// #39: kernels at ts +1e17 us were dropped as unusable and the trace
/// then said "no GPU activity" (was CUDA enabled?): the activity was
/// there, its timestamps were implausible, and the error says that.
#[test]
fn kernels_at_implausible_timestamps_are_said_not_missing() {
    for ts in ["1e17", "-5", "1e300"] {
        let text = format!(
            r#"{{"traceEvents":[{{"ph": "X", "cat": "kernel", "name": "k", "ts": {ts}, "dur": 2, "pid": 0, "tid": 7}}]}}"#
        );
        let e = parse_kineto(text.as_bytes(), "far.json").unwrap_err();
        let s = one_line(&e);
        assert!(!matches!(e, IngestError::NoGpuActivity { .. }), "{ts}: {s}");
        assert!(
            s.contains("implausible") && s.contains("1 event(s) left out"),
            "{ts}: {s}"
        );
    }
}

#[test]
fn unusable_durations_are_skipped_and_counted_never_negative() {
    for dur in [
        "-1",
        "-0.001",
        "NaN",
        "Infinity",
        "-Infinity",
        "1e999",
        "-1e3",
        "\"x\"",
        "1e-999x",
    ] {
        let text = format!(
            r#"{{"traceEvents": [
{{"ph": "X", "cat": "kernel", "name": "good", "ts": 5, "dur": 1}},
{{"ph": "X", "cat": "kernel", "name": "bad", "ts": 10, "dur": {dur}}}
]}}"#
        );
        let t = match parse_kineto(text.as_bytes(), "d.json") {
            Ok(t) => t,
            // Invalid JSON the serde path refuses (NaN is no JSON number): an error is fine too.
            Err(e) => {
                assert!(one_line(&e).starts_with("d.json: byte "), "{dur}: {e}");
                continue;
            }
        };
        let names: Vec<&str> = t
            .timeline
            .activities
            .iter()
            .map(|a| a.name.as_str())
            .collect();
        assert_eq!(names, vec!["good"], "dur {dur}");
        assert_eq!(t.skipped_events, 1, "dur {dur}");
        let first = t.first_skipped.as_deref().unwrap();
        assert!(
            first.starts_with("event 1 of traceEvents: \"bad\": dur "),
            "{first}"
        );
        let p = kopt_ingest::profile_from_trace(t, "d.json");
        assert!(p.sources[0].format.contains("1 event(s) left out"));
        assert!(p
            .launches
            .iter()
            .all(|l| l.metrics.duration_ns.is_some_and(|d| d >= 0.0)));
    }
    // A timestamp out of range would overflow its end: skipped too.
    let t = parse_kineto(
        br#"{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1},
{"ph": "X", "cat": "kernel", "name": "late", "ts": 9.3e15, "dur": 9.3e15}]}"#,
        "d.json",
    )
    .unwrap();
    assert_eq!(t.skipped_events, 1);
}

#[test]
fn kopt_trace_times_that_cannot_be_computed_with_are_skipped() {
    let text = "{\"t\":\"kernel\",\"name\":\"k\",\"s\":10,\"e\":20,\"c\":1}\n\
{\"t\":\"api\",\"name\":\"cudaLaunchKernel\",\"s\":-9223372036854775808,\"e\":5,\"c\":1}\n\
{\"t\":\"kernel\",\"name\":\"far\",\"s\":10,\"e\":9223372036854775807,\"c\":2}\n\
{\"t\":\"api\",\"name\":\"cudaLaunchKernel\",\"s\":30,\"e\":20,\"c\":3}\n\
{\"t\":\"end\",\"records\":4,\"dropped\":18446744073709551615}\n";
    let t = parse_kopt_trace(text, "t.jsonl").unwrap();
    assert_eq!(t.timeline.activities.len(), 1);
    assert!(t.timeline.api_calls.is_empty());
    assert_eq!(t.invalid_records, 3);
    assert_eq!(
        t.first_invalid.as_deref(),
        Some("line 2: api from -9223372036854775808 to 5 ns")
    );
    // NaN cannot be a kopt trace time: the line is refused with its place.
    let e = parse_kopt_trace(
        "{\"t\":\"kernel\",\"name\":\"k\",\"s\":1.5,\"e\":NaN}\n",
        "t.jsonl",
    )
    .unwrap_err();
    assert!(one_line(&e).starts_with("t.jsonl:1: byte "), "{e}");
}

#[test]
fn counters_of_merged_processes_saturate() {
    let dir = tempfile::tempdir().unwrap();
    let end = "{\"t\":\"kernel\",\"name\":\"k\",\"s\":10,\"e\":20,\"c\":4294967295}\n{\"t\":\"end\",\"records\":1,\"dropped\":18446744073709551615,\"lost_buffers\":18446744073709551615}\n";
    // Three processes (a file repeating another's records is merged once).
    for (pid, name) in [
        (0, "trace.jsonl"),
        (1, "trace.jsonl.1"),
        (2, "trace.jsonl.2"),
    ] {
        let text = format!("{{\"t\":\"process\",\"pid\":{pid}}}\n{end}");
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let t = read_kopt_trace_set(&dir.path().join("trace.jsonl")).unwrap();
    assert_eq!(t.processes, 3);
    assert_eq!(t.dropped_records, u64::MAX);
    assert_eq!(t.lost_buffers, u64::MAX);
}

// ---- 6. messages ----

#[test]
fn invalid_utf8_in_a_kopt_trace_names_line_and_byte() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let mut bytes =
        b"{\"t\":\"kernel\",\"name\":\"k\",\"s\":10,\"e\":20}\n{\"t\":\"kernel\",\"name\":\""
            .to_vec();
    let bad_at = bytes.len();
    bytes.extend_from_slice(b"\xff\xfe\",\"s\":30,\"e\":40}\n");
    std::fs::write(&path, &bytes).unwrap();
    let e = read_kopt_trace(&path).unwrap_err();
    assert_eq!(
        one_line(&e),
        format!(
            "{}:2: byte {bad_at}: invalid UTF-8 (a kopt trace is UTF-8 JSON lines)",
            path.display()
        )
    );
}

const RAW_HEADER: &str = "\"ID\",\"Kernel Name\",\"Grid Size\",\"Block Size\",\"gpu__time_duration.sum\"\n\"\",\"\",\"\",\"\",\"nsecond\"\n";

#[test]
fn a_csv_cell_with_a_newline_gives_a_one_line_error() {
    let csv =
        format!("{RAW_HEADER}\"0\",\"k\",\"(1, 1, 1)\",\"(32, 1, 1)\",\"12\nthirty\x1b[31m\"\n");
    let e = parse_ncu_csv(csv.as_bytes(), "n.csv").unwrap_err();
    let s = one_line(&e);
    assert!(
        s.contains(r#"expected a number, found "12\nthirty\u{1b}[31m""#),
        "{s}"
    );
    // A huge cell is echoed cut.
    let csv = format!(
        "{RAW_HEADER}\"0\",\"k\",\"(1, 1, 1)\",\"(32, 1, 1)\",\"{}\"\n",
        "x".repeat(100_000)
    );
    let s = one_line(&parse_ncu_csv(csv.as_bytes(), "n.csv").unwrap_err());
    assert!(s.len() < 400, "{}", s.len());
    assert!(s.contains("(100000 bytes in all)"), "{s}");
}

#[test]
fn a_negative_ncu_duration_is_an_error() {
    let csv = format!("{RAW_HEADER}\"0\",\"k\",\"(1, 1, 1)\",\"(32, 1, 1)\",\"-5\"\n");
    let s = one_line(&parse_ncu_csv(csv.as_bytes(), "n.csv").unwrap_err());
    assert!(
        s.starts_with("n.csv:3: ") && s.contains("negative duration"),
        "{s}"
    );
}

// ---- nothing panics, whatever the bytes ----

mod arbitrary_input {
    use proptest::prelude::*;

    /// Bytes drawn mostly from JSON's and CSV's punctuation, so that the
    /// scanners get deep into broken structure rather than failing at byte 0.
    fn jsonish() -> impl Strategy<Value = Vec<u8>> {
        let pieces = prop::sample::select(vec![
            &b"{"[..],
            b"}",
            b"[",
            b"]",
            b"\"",
            b"\\",
            b":",
            b",",
            b" ",
            b"\n",
            b"\"traceEvents\"",
            b"\"ph\"",
            b"\"X\"",
            b"\"cat\"",
            b"\"kernel\"",
            b"\"name\"",
            b"\"ts\"",
            b"\"dur\"",
            b"\"args\"",
            b"1",
            b"-1.5",
            b"1e999",
            b"\xc3",
            b"\xa9",
            b"\"t\"",
            b"\"s\"",
            b"\"e\"",
            b"\"ID\"",
            b"\"Kernel Name\"",
            b"\"gpu__time_duration.sum\"",
            b"\\u12",
        ]);
        prop::collection::vec(pieces, 0..60).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn parsers_return_errors_never_panic(bytes in jsonish()) {
            for r in [
                kopt_ingest::parse_kineto(&bytes, "f").err(),
                kopt_ingest::kopt_trace::parse_kopt_trace_bytes(&bytes, "f").err(),
                kopt_ingest::parse_ncu_csv(&bytes, "f").err(),
            ]
            .into_iter()
            .flatten()
            {
                let s = r.to_string();
                prop_assert!(s.starts_with("f") && !s.contains('\n'), "{}", s);
            }
        }
    }
}

// ---- 8. gzipped torch.profiler traces ----

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

#[test]
fn a_gzipped_trace_is_read_like_the_plain_one() {
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("host_1.1700000000.pt.trace.json.gz");
    std::fs::write(&gz, gzip(TRACE.as_bytes())).unwrap();
    let plain = parse_kineto(TRACE.as_bytes(), "t.json").unwrap();
    let read = read_kineto(&gz).unwrap();
    assert_eq!(read.timeline, plain.timeline);
    assert_eq!(read.timeline.activities.len(), 1);
    assert_eq!(read.timeline.device_name.as_deref(), Some("NVIDIA H200"));
    // In memory too.
    let parsed = parse_kineto(&gzip(TRACE.as_bytes()), "t.json.gz").unwrap();
    assert_eq!(parsed.timeline, plain.timeline);
}

#[test]
fn a_broken_gzipped_trace_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("t.json.gz");
    let whole = gzip(TRACE.as_bytes());
    std::fs::write(&gz, &whole[..whole.len() / 2]).unwrap();
    let s = one_line(&read_kineto(&gz).unwrap_err());
    assert!(
        s.starts_with(&format!("{}: gzip data broken after ", gz.display())),
        "{s}"
    );
    // Only the magic.
    let s = one_line(&parse_kineto(&[0x1f, 0x8b], "m.gz").unwrap_err());
    assert!(s.starts_with("m.gz: gzip data broken"), "{s}");
    // gzip in gzip.
    let s = one_line(&parse_kineto(&gzip(&gzip(b"{}")), "g.gz").unwrap_err());
    assert!(
        s.starts_with("g.gz: gzip inside gzip (compressed twice): not read"),
        "{s}"
    );
}
