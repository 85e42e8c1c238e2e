//! What a user of `kopt analyze` sees of the values the parsers will not
//! take as fact (#27): a one-line error naming file, line and field, or a
//! note in the report naming what was left unknown, never a silent figure.

#[path = "support/cli.rs"]
mod cli;
use cli::kopt;

/// An ncu raw page with a units row and one launch, `metric` (in `unit`)
/// written as `cell`.
fn ncu_raw(metric: &str, unit: &str, cell: &str) -> String {
    format!(
        "\"ID\",\"Kernel Name\",\"Block Size\",\"Grid Size\",\"gpu__time_duration.sum\",\"{metric}\"\n\
         \"\",\"\",\"\",\"\",\"nsecond\",\"{unit}\"\n\
         \"0\",\"kern(float*)\",\"(256, 1, 1)\",\"(1024, 1, 1)\",\"15,000\",\"{cell}\"\n"
    )
}

#[test]
fn a_negative_ncu_count_is_a_one_line_error_naming_line_and_column() {
    let d = tempfile::tempdir().unwrap();
    let csv = ncu_raw("dram__bytes_read.sum", "byte", "-1,048,576");
    std::fs::write(d.path().join("neg.csv"), csv).unwrap();
    let o = kopt(d.path(), &["analyze", "neg.csv"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.starts_with("kopt: error: neg.csv:3: "), "{err}");
    assert!(
        err.contains("\"dram__bytes_read.sum\"") && err.contains("negative"),
        "{err}"
    );
}

#[test]
fn an_ncu_percentage_beyond_100_is_named_in_the_report_not_taken_as_fact() {
    let d = tempfile::tempdir().unwrap();
    let csv = ncu_raw(
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "%",
        "4,200",
    );
    std::fs::write(d.path().join("pct.csv"), csv).unwrap();
    let o = kopt(d.path(), &["analyze", "pct.csv", "--format", "json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let excluded = &report["sources"][0]["excluded"];
    assert_eq!(excluded.as_array().map(Vec::len), Some(1), "{excluded}");
    let notes = report["notes"].as_array().unwrap();
    let note = notes
        .iter()
        .filter_map(|n| n.as_str())
        .find(|n| n.contains("not taken as written"))
        .unwrap_or_else(|| panic!("{notes:?}"));
    assert!(
        note.contains("line 3") && note.contains("4200 % is beyond 0..100 % of peak"),
        "{note}"
    );
    // The 4200 % is nowhere in the kernel's figures (42 % would show here).
    let kernel = &report["kernels"][0];
    assert_eq!(kernel["name"], "kern(float*)");
    assert!(kernel["dram_sol_pct"].is_null(), "{kernel}");
    assert!(kernel["memory_sol_pct"].is_null(), "{kernel}");
}

#[test]
fn a_kineto_kernel_outside_the_profilers_span_is_stated_in_the_report() {
    let d = tempfile::tempdir().unwrap();
    let trace = r#"{"traceEvents": [
{"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 10000, "dur": 100000},
{"ph": "X", "cat": "kernel", "name": "good", "pid": 0, "tid": 7, "ts": 20000, "dur": 50, "args": {"correlation": 1, "grid": [4, 1, 1], "block": [128, 1, 1]}},
{"ph": "X", "cat": "kernel", "name": "endless", "pid": 0, "tid": 7, "ts": 30000, "dur": 9000000000, "args": {"correlation": 2}},
{"ph": "X", "cat": "kernel", "name": "oversized", "pid": 0, "tid": 7, "ts": 40000, "dur": 50, "args": {"correlation": 3, "grid": [4, 1, 1], "block": [4096, 1, 1]}}
]}"#;
    std::fs::write(d.path().join("t.json"), trace).unwrap();
    let o = kopt(d.path(), &["analyze", "t.json", "--format", "json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let format = report["sources"][0]["format"].as_str().unwrap();
    assert!(
        format.contains("1 event(s) left out") && format.contains("\"endless\""),
        "{format}"
    );
    assert!(
        format.contains("1 implausible value(s) left unknown")
            && format.contains("block [4096, 1, 1]"),
        "{format}"
    );
    let names: Vec<&str> = report["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|k| k["name"].as_str())
        .collect();
    assert!(!names.iter().any(|n| n.contains("endless")), "{names:?}");
}

/// A sixth hostile round (L3): a trace's device with 0 SMs, a 1e-297 Hz
/// clock or a 100 KB name reached the JSON report as fact. Each is left
/// unknown and named in the report's notes; a stored report that holds
/// one is refused naming the field.
#[test]
fn implausible_device_figures_are_left_unknown_and_named() {
    let d = tempfile::tempdir().unwrap();
    let kernel = |i: u64| {
        format!(
            "{{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":{},\"dur\":10,\"args\":{{\"device\":0,\"stream\":7,\"correlation\":{i},\"grid\":[1,1,1],\"block\":[32,1,1]}}}}",
            1000 + i * 20
        )
    };
    let kineto = format!(
        "{{\"deviceProperties\":[{{\"id\":0,\"name\":\"{}\",\"numSms\":0,\"computeMajor\":9,\"computeMinor\":0}}],\"traceEvents\":[{}]}}",
        "Y".repeat(100_000),
        (0..3).map(kernel).collect::<Vec<_>>().join(",")
    );
    std::fs::write(d.path().join("k.json"), kineto).unwrap();
    // kopt's own trace: a device record with a clock of 1 kHz.
    let trace = "{\"t\":\"process\",\"pid\":1}\n\
        {\"t\":\"device\",\"id\":0,\"name\":\"NVIDIA H100 80GB HBM3\",\"sms\":132,\"cc\":[9,0],\"mem_bw_kbs\":1,\"clock_khz\":1}\n\
        {\"t\":\"kernel\",\"name\":\"k\",\"s\":1000,\"e\":2000,\"dev\":0,\"str\":7,\"c\":1,\"g\":[1,1,1],\"b\":[32,1,1]}\n\
        {\"t\":\"end\",\"records\":2,\"dropped\":0,\"lost_buffers\":0}\n";
    std::fs::write(d.path().join("trace.jsonl"), trace).unwrap();
    for (input, said) in [
        (
            "k.json",
            vec!["device name of 100000 characters", "device sm_count = 0"],
        ),
        (
            "trace.jsonl",
            vec![
                "device sm_clock_hz = 1e3 Hz",
                "device peaks.dram_bytes_per_s = 1e3",
            ],
        ),
    ] {
        let o = kopt(d.path(), &["analyze", input, "-f", "json"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{input}: {err}");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let device = &v["device"];
        assert!(device["name"].as_str().unwrap().len() <= 128, "{input}");
        assert!(
            device["sm_count"].is_null() || device["sm_count"] == 132,
            "{device}"
        );
        assert!(device["sm_clock_hz"].is_null(), "{device}");
        let notes = v["notes"].to_string();
        for s in said {
            assert!(notes.contains(s), "{input}: {s}: {notes}");
        }
        std::fs::write(d.path().join(format!("{input}.report.json")), &o.stdout).unwrap();
    }
    // The same figure in a stored report: refused, naming it.
    let stored = std::fs::read_to_string(d.path().join("trace.jsonl.report.json")).unwrap();
    assert!(stored.contains("\"sm_clock_hz\": null"), "{stored}");
    let edited = stored.replacen("\"sm_clock_hz\": null", "\"sm_clock_hz\": 1e-297", 1);
    std::fs::write(d.path().join("edited.json"), edited).unwrap();
    let o = kopt(d.path(), &["analyze", "edited.json"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("device.sm_clock_hz = 1e-297 Hz"), "{err}");
}
