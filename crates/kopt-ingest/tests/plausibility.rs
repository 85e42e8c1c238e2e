//! Values checked at the parser boundary (#27): ncu rates and counts, Kineto
//! times, dimensions and byte counts. Each crafted input below was read as
//! fact (or as a silent 0) before: now it is an error naming the file, line
//! and field, or a stated exclusion carried to the report.

use std::path::Path;

use kopt_ingest::{parse_kineto, parse_ncu_csv, profile_from_trace};

fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// A torch.profiler trace: the profiler's span from 10 ms for 100 ms,
/// and `events` (JSON objects) inside `traceEvents`.
fn kineto(events: &[&str]) -> Vec<u8> {
    let mut all = vec![
        r#"{"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 10000, "dur": 100000}"#,
        r#"{"ph": "X", "cat": "kernel", "name": "good", "pid": 0, "tid": 7, "ts": 20000, "dur": 5, "args": {"correlation": 1, "grid": [4, 1, 1], "block": [128, 1, 1]}}"#,
    ];
    all.extend_from_slice(events);
    format!("{{\"traceEvents\": [\n{}\n]}}", all.join(",\n")).into_bytes()
}

#[test]
fn kineto_events_past_the_profilers_span_are_left_out_and_stated() {
    // A kernel whose dur runs 10 s past a 100 ms capture, and an API call
    // that starts an hour before it: no measurement of this capture.
    // cudaEarly starts 9 ms before the span (slack: 1 ms).
    let bytes = kineto(&[
        r#"{"ph": "X", "cat": "kernel", "name": "endless", "pid": 0, "tid": 7, "ts": 30000, "dur": 10000000, "args": {"correlation": 2}}"#,
        r#"{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": -3600000000, "dur": 4, "args": {"correlation": 9}}"#,
        r#"{"ph": "X", "cat": "cuda_runtime", "name": "cudaEarly", "pid": 1, "tid": 1, "ts": 1000, "dur": 4, "args": {"correlation": 3}}"#,
    ]);
    let t = parse_kineto(&bytes, "span.json").unwrap();
    let names: Vec<_> = t.timeline.activities.iter().map(|a| &a.name).collect();
    assert_eq!(names, ["good"]);
    assert!(
        t.timeline.api_calls.is_empty(),
        "{:?}",
        t.timeline.api_calls
    );
    // The negative ts (skipped as it is read) and the two outside the span.
    assert_eq!(t.skipped_events, 3);
    let profile = profile_from_trace(t, "span.json");
    let format = &profile.sources[0].format;
    assert!(format.contains("3 event(s) left out"), "{format}");
    assert!(format.contains("outside the profiler's span"), "{format}");
}

#[test]
fn kineto_events_within_the_slack_of_the_span_are_kept() {
    // The last kernel ends 0.5 ms after the span: the GPU's activities are
    // flushed after the span closes (slack: 1 ms, or 1% of the span).
    let bytes = kineto(&[
        r#"{"ph": "X", "cat": "kernel", "name": "late", "pid": 0, "tid": 7, "ts": 109900, "dur": 600, "args": {"correlation": 2}}"#,
    ]);
    let t = parse_kineto(&bytes, "slack.json").unwrap();
    assert_eq!(t.timeline.activities.len(), 2);
    assert_eq!(t.skipped_events, 0);
}

#[test]
fn kineto_absurd_dims_and_negative_bytes_are_left_unknown_and_stated() {
    let bytes = kineto(&[
        r#"{"ph": "X", "cat": "kernel", "name": "zero_block", "pid": 0, "tid": 7, "ts": 30000, "dur": 5, "args": {"correlation": 2, "grid": [4, 1, 1], "block": [0, 1, 1]}}"#,
        r#"{"ph": "X", "cat": "kernel", "name": "huge_block", "pid": 0, "tid": 7, "ts": 30010, "dur": 5, "args": {"correlation": 3, "grid": [4, 1, 1], "block": [4096, 1, 1]}}"#,
        r#"{"ph": "X", "cat": "kernel", "name": "huge_grid", "pid": 0, "tid": 7, "ts": 30020, "dur": 5, "args": {"correlation": 4, "grid": [4294967295, 1, 1], "block": [64, 1, 1]}}"#,
        r#"{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": 30030, "dur": 5, "args": {"correlation": 5, "bytes": -4096}}"#,
        r#"{"ph": "X", "cat": "gpu_memset", "name": "Memset", "pid": 0, "tid": 7, "ts": 30040, "dur": 5, "args": {"correlation": 6, "bytes": "nan"}}"#,
    ]);
    let t = parse_kineto(&bytes, "dims.json").unwrap();
    let by_name = |n: &str| t.timeline.activities.iter().find(|a| a.name == n).unwrap();
    for n in ["zero_block", "huge_block", "huge_grid"] {
        let a = by_name(n);
        assert_eq!((a.grid, a.block), (None, None), "{n}");
    }
    assert_eq!(by_name("Memcpy HtoD").bytes, None);
    assert_eq!(by_name("Memset").bytes, None);
    // The sound kernel keeps its dims.
    assert!(by_name("good").block.is_some());
    assert_eq!(t.unknown_values, 5);
    assert!(
        t.first_unknown
            .as_deref()
            .unwrap()
            .contains("block [0, 1, 1]"),
        "{:?}",
        t.first_unknown
    );
    let profile = profile_from_trace(t, "dims.json");
    let format = &profile.sources[0].format;
    assert!(
        format.contains("5 implausible value(s) left unknown"),
        "{format}"
    );
}

#[test]
fn kineto_fixtures_have_nothing_left_out() {
    // The checks must not cost a real capture anything: every torch trace
    // of the fixtures (gzip'ed ones too) reads with no event skipped and no
    // value left unknown.
    let mut read = 0;
    let mut stack = vec![fixtures()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let torch = name.ends_with(".pt.trace.json.gz")
                || (name.ends_with(".json") && name.contains("trace"));
            if !torch || name.contains("perfetto") {
                continue;
            }
            let Ok(t) = kopt_ingest::read_kineto(&path) else {
                continue;
            };
            read += 1;
            assert_eq!(
                (t.skipped_events, t.unknown_values),
                (0, 0),
                "{}: {:?} {:?}",
                path.display(),
                t.first_skipped,
                t.first_unknown
            );
        }
    }
    assert!(read >= 10, "only {read} torch traces among the fixtures");
}

/// An ncu raw page (units row included) with one launch whose cells are
/// `cells` for the metric columns `metrics`.
fn ncu_raw(metrics: &[(&str, &str)], cells: &[&str]) -> Vec<u8> {
    let mut head = vec![
        "\"ID\"",
        "\"Kernel Name\"",
        "\"Block Size\"",
        "\"Grid Size\"",
        "\"gpu__time_duration.sum\"",
    ]
    .into_iter()
    .map(String::from)
    .collect::<Vec<_>>();
    let mut units: Vec<String> = ["", "", "", "", "nsecond"]
        .iter()
        .map(|u| format!("\"{u}\""))
        .collect();
    for (m, u) in metrics {
        head.push(format!("\"{m}\""));
        units.push(format!("\"{u}\""));
    }
    let mut row: Vec<String> = ["0", "kern(float*)", "(256, 1, 1)", "(1024, 1, 1)", "1,500"]
        .iter()
        .map(|c| format!("\"{c}\""))
        .collect();
    row.extend(cells.iter().map(|c| format!("\"{c}\"")));
    format!(
        "{}\n{}\n{}\n",
        head.join(","),
        units.join(","),
        row.join(",")
    )
    .into_bytes()
}

#[test]
fn ncu_percentages_beyond_0_to_100_and_nan_are_left_unknown_and_stated() {
    let bytes = ncu_raw(
        &[
            ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "%"),
            ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "%"),
            ("lts__throughput.avg.pct_of_peak_sustained_elapsed", "%"),
            ("l1tex__throughput.avg.pct_of_peak_sustained_active", "%"),
            ("dram__bytes_write.sum", "byte"),
        ],
        &["2500", "-3", "100.4", "nan", "inf"],
    );
    let f = parse_ncu_csv(&bytes, "pct.csv").unwrap();
    let m = &f.launches[0].metrics;
    assert_eq!(m.dram_pct, None);
    assert_eq!(m.sm_pct, None);
    // Rounding above 100 is kept as ncu wrote it.
    assert_eq!(m.l2_pct, Some(100.4));
    assert_eq!(m.l1_pct, None);
    assert_eq!(m.dram_bytes_write, None);
    assert_eq!(f.excluded.len(), 4, "{:?}", f.excluded);
    let find = |what: &str| f.excluded.iter().find(|e| e.contains(what)).unwrap();
    let dram = find("dram__throughput.avg.pct_of_peak_sustained_elapsed");
    assert!(dram.starts_with("line 3: "), "{dram}");
    assert!(dram.contains("left unknown"), "{dram}");
    assert!(find("l1tex__throughput").contains("nan, not a number"));
    assert!(find("dram__bytes_write.sum").contains("inf, not a number"));
    let profile = kopt_ingest::merge_profile(vec![("pct.csv".into(), f)]);
    assert_eq!(profile.sources[0].excluded.len(), 4);
}

#[test]
fn ncu_percentages_overshooting_100_are_read_as_100_and_stated() {
    // ncu's per-active-cycle L1/TEX throughput at 285 % (as on the H200
    // profile_module capture): the unit was saturated.
    let bytes = ncu_raw(
        &[("l1tex__throughput.avg.pct_of_peak_sustained_active", "%")],
        &["285.41"],
    );
    let f = parse_ncu_csv(&bytes, "over.csv").unwrap();
    assert_eq!(f.launches[0].metrics.l1_pct, Some(100.0));
    assert_eq!(f.excluded.len(), 1);
    assert!(
        f.excluded[0].contains("285.41 % is beyond 100 % of peak: read as 100 %"),
        "{:?}",
        f.excluded
    );
}

#[test]
fn ncu_negative_counts_are_errors_naming_line_and_column() {
    for (metric, unit, cell) in [
        ("dram__bytes_read.sum", "byte", "-4,096"),
        (
            "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
            "sector",
            "-1",
        ),
        ("launch__registers_per_thread", "register/thread", "-32"),
        (
            "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
            "",
            "-0.5",
        ),
    ] {
        let bytes = ncu_raw(&[(metric, unit)], &[cell]);
        let e = parse_ncu_csv(&bytes, "neg.csv").unwrap_err().to_string();
        assert!(e.starts_with("neg.csv:3: "), "{e}");
        assert!(e.contains(metric), "{e}");
        assert!(e.contains("negative"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }
}

#[test]
fn ncu_impossible_launches_are_errors() {
    for (metric, unit, cell, what) in [
        ("launch__block_size", "", "0", "block"),
        ("launch__block_size", "", "2048", "block"),
        ("launch__grid_size", "", "0", "grid"),
        ("launch__sm_count", "", "0", "SM"),
        (
            "launch__registers_per_thread",
            "register/thread",
            "300",
            "register",
        ),
    ] {
        let bytes = ncu_raw(&[(metric, unit)], &[cell]);
        let e = parse_ncu_csv(&bytes, "launch.csv")
            .map(|f| format!("read: {:?}", f.launches[0].metrics))
            .unwrap_or_else(|e| e.to_string());
        assert!(e.starts_with("launch.csv:3: "), "{metric} {cell}: {e}");
        assert!(e.contains(what), "{metric} {cell}: {e}");
    }
}

#[test]
fn ncu_rates_beyond_any_device_are_left_unknown_and_stated() {
    // 400 TB/s of DRAM traffic, a 90 GHz SM clock: beyond any GPU.
    let bytes = ncu_raw(
        &[
            ("dram__bytes.sum.per_second", "byte/second"),
            ("sm__cycles_elapsed.avg.per_second", "cycle/second"),
        ],
        &["400,000,000,000,000", "90,000,000,000"],
    );
    let f = parse_ncu_csv(&bytes, "rate.csv").unwrap();
    let m = &f.launches[0].metrics;
    assert_eq!((m.dram_bytes_per_s, m.sm_clock_hz), (None, None));
    assert_eq!(f.excluded.len(), 2, "{:?}", f.excluded);
}

#[test]
fn ncu_dram_traffic_beyond_the_devices_peak_is_left_unknown() {
    // An H100 (3.35 TB/s): 1 GB in 1.5 us is 667 TB/s, far past its peak,
    // and a rate of 20 TB/s too; 3 TB/s stays.
    let head = "\"ID\",\"Kernel Name\",\"device__attribute_display_name\",\"gpu__time_duration.sum\",\"dram__bytes_read.sum\",\"dram__bytes.sum.per_second\"\n\"\",\"\",\"\",\"nsecond\",\"byte\",\"byte/second\"\n";
    let rows = "\"0\",\"a\",\"NVIDIA H100 80GB HBM3\",\"1500\",\"1000000000\",\"20000000000000\"\n\"1\",\"b\",\"NVIDIA H100 80GB HBM3\",\"1500\",\"4500\",\"3000000000000\"\n";
    let f = parse_ncu_csv(format!("{head}{rows}").as_bytes(), "peak.csv").unwrap();
    let (a, b) = (&f.launches[0].metrics, &f.launches[1].metrics);
    assert_eq!((a.dram_bytes_read, a.dram_bytes_per_s), (None, None));
    assert_eq!(b.dram_bytes_read, Some(4500.0));
    assert_eq!(b.dram_bytes_per_s, Some(3e12));
    assert_eq!(f.excluded.len(), 2, "{:?}", f.excluded);
    assert!(f.excluded[0].contains("line 3"), "{:?}", f.excluded);
    assert!(f.excluded[0].contains("peak"), "{:?}", f.excluded);
}

#[test]
fn ncu_details_page_values_are_checked_too() {
    let head = "\"ID\",\"Kernel Name\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n";
    let ok = "\"0\",\"k\",\"GPU Speed Of Light Throughput\",\"Duration\",\"usecond\",\"2.5\"\n";
    let pct = "\"0\",\"k\",\"GPU Speed Of Light Throughput\",\"DRAM Throughput\",\"%\",\"-180\"\n";
    let f = parse_ncu_csv(format!("{head}{ok}{pct}").as_bytes(), "d.csv").unwrap();
    assert_eq!(f.launches[0].metrics.dram_pct, None);
    assert_eq!(f.excluded.len(), 1, "{:?}", f.excluded);
    assert!(f.excluded[0].starts_with("line 3: "), "{:?}", f.excluded);
    let neg =
        "\"0\",\"k\",\"Launch Statistics\",\"Registers Per Thread\",\"register/thread\",\"-8\"\n";
    let e = parse_ncu_csv(format!("{head}{ok}{neg}").as_bytes(), "d.csv")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("d.csv:3: ") && e.contains("Registers Per Thread"),
        "{e}"
    );
}

#[test]
fn ncu_fixtures_have_nothing_left_out() {
    let mut read = 0;
    let mut stack = vec![fixtures()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "csv") {
                continue;
            }
            let Ok(f) = kopt_ingest::read_ncu_csv(&path) else {
                continue;
            };
            read += 1;
            // ncu's per-active-cycle percentages overshoot on real
            // captures: read as 100 % and stated; nothing else is touched.
            for e in &f.excluded {
                assert!(e.contains("read as 100 %"), "{}: {e}", path.display());
            }
        }
    }
    assert!(read >= 15, "only {read} ncu CSVs among the fixtures");
}
