//! AMD profiler output: the real captures under fixtures/amd/ (rocprof v1
//! on MI250, rocprof-compute on MI300X, the rocprofv3 documentation's
//! files) and the synthetic launch-bound rocprofv3 trace, through parsing
//! and the analysis.

use std::path::{Path, PathBuf};

use kopt_analyze::AnalyzeOptions;
use kopt_ingest::rocprof::{merge_rocprof, parse_rocprof, AmdFile};
use kopt_ingest::{read_rocprof_compute_dir, read_rocprof_files, IngestError};
use kopt_model::{BottleneckClass, PeakSource};

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/amd")
        .join(rel)
}

fn parse(rel: &str) -> AmdFile {
    let p = fixture(rel);
    let bytes = std::fs::read(&p).unwrap();
    parse_rocprof(&bytes, rel).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn dispatches(f: &AmdFile) -> &[kopt_ingest::rocprof::Dispatch] {
    match f {
        AmdFile::Dispatches(_, d) => d,
        other => panic!("not dispatches: {}", other.describe()),
    }
}

#[test]
fn mi250_stencils_get_hbm_bandwidth_per_kernel_and_a_primary() {
    let dir = "rocprof-v1-mi250";
    let p = read_rocprof_files(&[
        fixture(&format!("{dir}/results.csv")),
        fixture(&format!("{dir}/data_movement.csv")),
        fixture(&format!("{dir}/results.sysinfo.txt")),
    ])
    .unwrap();
    // rocminfo names "MI250X/MI250"; its 104 CUs make it an MI250 GCD.
    assert_eq!(p.device.name, "AMD Instinct MI250 (one GCD)");
    assert_eq!(p.device.sm_count, Some(104));
    assert_eq!(p.device.peaks.dram_bytes_per_s, Some(1.6384e12));
    assert_eq!(
        p.device.amd.as_ref().unwrap().arch.as_deref(),
        Some("gfx90a")
    );
    assert_eq!(p.launches.len(), 1023);
    let first = &p.launches[0];
    assert_eq!(first.name, "initialize_polynomial_kernel");
    assert_eq!(first.metrics.duration_ns, Some(11_503_756.0));
    // FETCH_SIZE / WRITE_SIZE are KiB.
    assert_eq!(first.metrics.dram_bytes_read, Some(8.875 * 1024.0));
    assert_eq!(first.metrics.dram_bytes_write, Some(604_304.0 * 1024.0));
    // 207667200 work-items in workgroups of 256.
    assert_eq!(first.grid.x, 811_200);
    assert!(p
        .timeline
        .as_ref()
        .is_some_and(|t| t.activities.len() == 1023));

    let d = kopt_analyze::analyze(&p, &AnalyzeOptions::default());
    let z = d
        .kernels
        .iter()
        .find(|k| k.name == "compute_fd_z_kernel")
        .unwrap();
    assert_eq!(z.launches, 100);
    // 871 GB/s of HBM traffic against 1.64 TB/s.
    let bw = p
        .launches
        .iter()
        .filter(|l| l.name == "compute_fd_z_kernel")
        .map(|l| l.metrics.dram_bytes_per_s.unwrap())
        .sum::<f64>()
        / 100.0;
    assert!((bw / 1e9 - 871.0).abs() < 5.0, "{bw}");
    assert!(
        z.root_cause.contains("memory 53%") && z.root_cause.contains("compute not counted"),
        "{}",
        z.root_cause
    );
    for k in &d.kernels {
        assert_ne!(k.bottleneck.class, BottleneckClass::Unknown, "{}", k.name);
    }
    let primary = d.primary.as_ref().unwrap();
    assert_eq!(primary.component, "compute_fd_z_kernel");
    assert_eq!(primary.class, BottleneckClass::Latency);
    // The stats file is the same run summed: a summary, no launches of its own.
    let with_stats = read_rocprof_files(&[
        fixture(&format!("{dir}/results.csv")),
        fixture(&format!("{dir}/results.stats.csv")),
    ])
    .unwrap();
    assert_eq!(with_stats.launches.len(), 1023);
}

#[test]
fn mi250_stats_alone_expand_into_launches_at_their_mean() {
    let p = read_rocprof_files(&[fixture("rocprof-v1-mi250/results.stats.csv")]).unwrap();
    assert_eq!(p.launches.len(), 1023);
    let z: Vec<_> = p
        .launches
        .iter()
        .filter(|l| l.name == "compute_fd_z_kernel")
        .collect();
    assert_eq!(z.len(), 100);
    assert!((z[0].metrics.duration_ns.unwrap() - 5_468_630.66).abs() < 1.0);
    assert_eq!(p.device.peak_source, PeakSource::Unknown);
}

/// The untouched rocprof-compute output with its sysinfo.csv, as one folder.
fn vcopy_folder() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = fixture("omniperf-vcopy-mi300x");
    for e in std::fs::read_dir(src.join("original-c079f133")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
    }
    std::fs::copy(src.join("sysinfo.csv"), dir.path().join("sysinfo.csv")).unwrap();
    dir
}

#[test]
fn mi300x_vcopy_is_memory_bound_against_5_3_tbs() {
    let dir = vcopy_folder();
    assert!(kopt_ingest::is_rocprof_compute_dir(dir.path()));
    let p = read_rocprof_compute_dir(dir.path()).unwrap();
    assert_eq!(p.device.name, "AMD Instinct MI300X");
    assert_eq!(p.device.sm_count, Some(304));
    // sysinfo.csv's hbm_bw (5324.8 GB/s) over the datasheet's 5.3 TB/s: they agree.
    assert_eq!(p.device.peaks.dram_bytes_per_s, Some(5324.8e9));
    assert_eq!(p.device.amd.as_ref().unwrap().xcds, Some(8));
    assert!(p.timeline.is_none(), "counter replay gives no timeline");
    assert_eq!(p.launches.len(), 3);
    let m = &p.launches[0].metrics;
    assert_eq!(m.duration_ns, Some(13_720.0));
    // rocprof-compute's L2-fabric formulas: 128 x 65536 + 64 x 239 read, 64 x 131072 written.
    assert_eq!(m.dram_bytes_read, Some(8_403_904.0));
    assert_eq!(m.dram_bytes_write, Some(8_388_608.0));
    let rate = m.dram_bytes_per_s.unwrap();
    assert!((rate / 1e12 - 1.224).abs() < 0.001, "{rate}");
    assert!((m.l2_hit_pct.unwrap() - 33.5).abs() < 0.1);
    assert!(m.valu_pct.unwrap() < 1.0);
    assert_eq!(m.mfma_pct, Some(0.0));
    // SQ_LEVEL_WAVES' accumulation over its own pass's GRBM_GUI_ACTIVE.
    let occ = m.occupancy_achieved_pct.unwrap();
    assert!((occ - 26.2).abs() < 0.2, "{occ}");
    assert_eq!(m.flops, Some(0.0));
    assert_eq!(m.grid_size, Some(4096.0));

    let d = kopt_analyze::analyze(&p, &AnalyzeOptions::default());
    let k = &d.kernels[0];
    assert_eq!(k.bottleneck.class, BottleneckClass::Memory);
    assert!(
        k.root_cause.contains("1.22 TB/s") && k.root_cause.contains("of 5.32 TB/s"),
        "{}",
        k.root_cause
    );
    assert_eq!(d.primary.as_ref().unwrap().class, BottleneckClass::Memory);
    assert_eq!(d.recommendations[0].id, "raise_hbm_bandwidth");
    assert!(d.recommendations[0].action.contains("304 CUs"));
}

#[test]
fn hand_edited_vcopy_folder_says_its_timestamps_are_unusable() {
    // Upstream rounded the timestamps to 8.1097E+14 (README): durations
    // come from GRBM_GUI_ACTIVE at SCLK instead, and the input says so.
    let p = read_rocprof_compute_dir(&fixture("omniperf-vcopy-mi300x")).unwrap();
    assert!(p.launches.iter().all(|l| l.metrics.duration_ns.is_some()));
    assert!(
        p.sources
            .iter()
            .any(|s| s.format.contains("timestamps are unusable")),
        "{:?}",
        p.sources
    );
}

#[test]
fn rocprofv3_doc_files_parse() {
    let trace = parse("rocprofv3-docs/kernel_trace.csv");
    let d = dispatches(&trace);
    assert!(!d.is_empty());
    assert_eq!(
        d[0].name,
        "void addition_kernel<float>(float*, float const*, float const*, int, int)"
    );
    assert_eq!(d[0].grid, [1024, 1024, 1]);
    assert_eq!(d[0].workgroup, [64, 1, 1]);
    assert_eq!(d[0].end_ns.unwrap() - d[0].start_ns.unwrap(), 12_800);
    assert_eq!(
        dispatches(&parse("rocprofv3-docs/kernel_trace_truncated.csv"))[0].name,
        "addition_kernel"
    );
    // Long format, new columns (timestamps) and old (kernel_names.csv, none).
    for (f, stamped) in [
        ("rocprofv3-docs/counter_collection.csv", true),
        ("rocprofv3-docs/kernel_names.csv", false),
    ] {
        let c = parse(f);
        let d = dispatches(&c);
        assert!(!d.is_empty(), "{f}");
        assert_eq!(d[0].counter("SQ_WAVES"), Some(16384.0), "{f}");
        assert_eq!(d[0].start_ns.is_some(), stamped, "{f}");
    }
    match parse("rocprofv3-docs/memory_copy_trace.csv") {
        AmdFile::Copies(c) => {
            assert!(c[0].name.contains("HOST_TO_DEVICE") && c[0].end_ns > c[0].start_ns)
        }
        other => panic!("{}", other.describe()),
    }
    for f in ["hip_trace.csv", "hip_runtime_trace.csv", "rocpd-to-csv.csv"] {
        match parse(&format!("rocprofv3-docs/{f}")) {
            AmdFile::Api(a) => assert!(!a.is_empty(), "{f}"),
            other => panic!("{f}: {}", other.describe()),
        }
    }
    // The docs' trace alone: no agent file, so the device stays unknown but AMD.
    let p = read_rocprof_files(&[
        fixture("rocprofv3-docs/kernel_trace.csv"),
        fixture("rocprofv3-docs/memory_copy_trace.csv"),
    ])
    .unwrap();
    assert!(p.device.amd.is_some());
    assert!(p.timeline.as_ref().unwrap().activities.len() > dispatches(&trace).len());
    // Counter collection joined onto a trace by kernel name and occurrence.
    let c = read_rocprof_files(&[fixture("rocprofv3-docs/counter_collection.csv")]).unwrap();
    assert!(c.launches.iter().all(|l| l.metrics.duration_ns.is_some()));
}

#[test]
fn synthetic_launch_bound_trace_gives_launch_overhead_and_a_hip_graph() {
    // SYNTHETIC (fixtures/amd/synthetic-rocprofv3-moe-route/README.md).
    let dir = "synthetic-rocprofv3-moe-route";
    let p = read_rocprof_files(&[
        fixture(&format!("{dir}/kernel_trace.csv")),
        fixture(&format!("{dir}/hip_api_trace.csv")),
        fixture(&format!("{dir}/agent_info.csv")),
    ])
    .unwrap();
    assert_eq!(p.device.name, "AMD Instinct MI300X");
    assert_eq!(p.launches.len(), 120);
    let d = kopt_analyze::analyze(&p, &AnalyzeOptions::default());
    let t = d.timeline.as_ref().unwrap();
    assert!(t.launch_bound, "{}", t.verdict);
    assert_eq!(t.kernel_launch_calls, 120);
    assert_eq!(
        d.primary.as_ref().unwrap().class,
        BottleneckClass::LaunchOverhead
    );
    let hip = d
        .recommendations
        .iter()
        .find(|r| r.title.contains("HIP graph"))
        .expect("a HIP graph recommendation");
    assert!(
        hip.action.contains("hipStreamBeginCapture"),
        "{}",
        hip.action
    );
}

fn err(bytes: &[u8]) -> String {
    parse_rocprof(bytes, "bad.csv").unwrap_err().to_string()
}

#[test]
fn malformed_files_fail_with_file_and_line() {
    let trace = "\"Kind\",\"Kernel_Name\",\"Dispatch_Id\",\"Start_Timestamp\",\"End_Timestamp\"\n";
    let e = err(format!("{trace}\"KERNEL_DISPATCH\",\"k\",1,10,x20\n").as_bytes());
    assert!(
        e.starts_with("bad.csv:2: End_Timestamp: expected a number"),
        "{e}"
    );
    let e = err(format!("{trace}\"KERNEL_DISPATCH\",\"k\",1\n").as_bytes());
    assert!(
        e.starts_with("bad.csv:2: 3 fields where the header has 5"),
        "{e}"
    );
    let e = err(format!("{trace}\"KERNEL_DISPATCH\",\"k\",1,10,inf\n").as_bytes());
    assert!(e.contains("bad.csv:2:"), "{e}");
    let e = err(b"");
    assert!(e.contains("empty"), "{e}");
    let e = err(b"\"Kernel_Name\"\n\0\n");
    assert!(e.contains("binary data"), "{e}");
    let e = err(b"a,b,c\n1,2,3\n");
    assert!(e.contains("not a rocprof CSV"), "{e}");
    let copy = "\"Kind\",\"Direction\",\"Start_Timestamp\",\"End_Timestamp\"\n\"MEMORY_COPY\",\"X\",20,10\n";
    let e = err(copy.as_bytes());
    assert!(
        e.starts_with("bad.csv:2:") && e.contains("out of order"),
        "{e}"
    );
    // A stats file alone expands per call, within a bound.
    let stats = "\"Name\",\"Calls\",\"TotalDurationNs\",\"AverageNs\",\"Percentage\"\n\"k\",99999999999,5,1,100\n";
    let f = parse_rocprof(stats.as_bytes(), "s.csv").unwrap();
    let e = merge_rocprof(vec![("s.csv".into(), f)], true).unwrap_err();
    assert!(e.to_string().contains("at most"), "{e}");
    // Only regular files are read.
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("fifo.csv");
    let ok = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(ok.success());
    match read_rocprof_files(&[fifo]) {
        Err(IngestError::NotRegular { .. }) => {}
        other => panic!("{other:?}"),
    }
    assert!(read_rocprof_compute_dir(Path::new(d.path())).is_err());
}

#[test]
fn fuzz_regression_huge_timestamp_is_refused_at_its_line() {
    // fuzz/regressions/rocprof/timestamp-i64-max.csv: End_Timestamp i64::MAX
    // overflowed the timeline strip's tick arithmetic downstream.
    let t = "\"Kind\",\"Kernel_Name\",\"Dispatch_Id\",\"Start_Timestamp\",\"End_Timestamp\"\n\"KERNEL_DISPATCH\",\"k\",1,10,9223372036854775807\n";
    let e = err(t.as_bytes());
    assert!(e.starts_with("bad.csv:2: timestamp out of range"), "{e}");
}

/// A `kopt profile --backend rocprof` run folder reads back through
/// `read_run_folder`: every pass's CSVs (one pass in a rocprofv3-made
/// subfolder), in pass order, as `kopt profile` merged them; logs, run.json
/// and other files are left out.
#[test]
fn rocprof_run_folder_reads_every_pass_in_order() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let copy = |from: &str, to: &Path| {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(fixture(from), to).unwrap();
    };
    let agent = "synthetic-rocprofv3-moe-route/agent_info.csv";
    copy(
        "rocprofv3-docs/kernel_trace.csv",
        &dir.join("pass1-trace_kernel_trace.csv"),
    );
    copy(agent, &dir.join("pass1-trace_agent_info.csv"));
    copy(
        "rocprofv3-docs/counter_collection.csv",
        &dir.join("host0/4242/pass2-counters_counter_collection.csv"),
    );
    copy(agent, &dir.join("pass10-counters_agent_info.csv"));
    std::fs::write(dir.join("pass1-trace.log"), "log").unwrap();
    std::fs::write(dir.join("run.json"), "{}").unwrap();
    std::fs::write(dir.join("passX-counters_x.csv"), "not a pass").unwrap();

    let files = kopt_ingest::rocprof::run_folder_files(dir);
    let names: Vec<String> = files
        .iter()
        .map(|p| p.strip_prefix(dir).unwrap().display().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "pass1-trace_agent_info.csv",
            "pass1-trace_kernel_trace.csv",
            "host0/4242/pass2-counters_counter_collection.csv",
            "pass10-counters_agent_info.csv",
        ]
    );
    let folder = kopt_ingest::read_run_folder(dir).unwrap();
    assert_eq!(folder, read_rocprof_files(&files).unwrap());
    assert_eq!(folder.device.name, "AMD Instinct MI300X");
    assert_eq!(folder.launches.len(), 9);
    assert!(folder
        .sources
        .iter()
        .any(|s| s.path.ends_with("pass2-counters_counter_collection.csv")));

    // Counter passes without the trace pass: not a run folder kopt can read.
    std::fs::remove_file(dir.join("pass1-trace_kernel_trace.csv")).unwrap();
    std::fs::remove_file(dir.join("pass1-trace_agent_info.csv")).unwrap();
    assert!(kopt_ingest::rocprof::run_folder_files(dir).is_empty());
    let err = kopt_ingest::read_run_folder(dir).unwrap_err().to_string();
    assert!(
        err.contains("not a kopt run folder") && err.contains("pass1-trace_*.csv"),
        "{err}"
    );
}
