//! rocprofv3 JSON output. The files under
//! fixtures/amd/synthetic-rocprofv3-json/ are SYNTHETIC (generate.py there,
//! written from ROCprofiler-SDK's documented JSON schema): no real
//! rocprofv3 JSON file was available.

use std::path::PathBuf;

use kopt_analyze::AnalyzeOptions;
use kopt_ingest::read_rocprof_files;
use kopt_ingest::rocprof::{parse_rocprofv3_json, sniff, sniff_json, AmdFile};
use kopt_model::BottleneckClass;

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/amd/synthetic-rocprofv3-json")
        .join(rel)
}

#[test]
fn sniffed_by_the_top_level_key() {
    let bytes = std::fs::read(fixture("results.json")).unwrap();
    assert!(sniff_json(&bytes[..4096]));
    assert!(sniff(&bytes[..4096]));
    assert!(sniff_json(
        b"\xef\xbb\xbf  {  \"rocprofiler-sdk-tool\" : []}"
    ));
    for other in [
        &b"{\"traceEvents\": [], \"rocprofiler-sdk-tool\": []}"[..],
        b"{\"rocprofiler-sdk-tools\": []}",
        b"[{\"rocprofiler-sdk-tool\": []}]",
        b"",
    ] {
        assert!(!sniff_json(other), "{}", String::from_utf8_lossy(other));
    }
}

#[test]
fn kernel_trace_gives_timeline_device_and_launch_overhead() {
    let p = read_rocprof_files(&[fixture("results.json")]).unwrap();
    assert_eq!(p.device.name, "AMD Instinct MI300X");
    assert_eq!(p.device.sm_count, Some(304));
    let amd = p.device.amd.as_ref().unwrap();
    assert_eq!(amd.max_waves_per_cu, Some(32));
    assert_eq!(amd.arch.as_deref(), Some("gfx942"));
    assert_eq!(p.launches.len(), 60);
    let first = &p.launches[0];
    // formatted_kernel_name from kernel_symbols, by kernel_id.
    assert_eq!(
        first.name,
        "void tiny_add<float>(float*, float const*, int)"
    );
    assert_eq!(p.launches[1].name, "tiny_scale(float*, float, int)");
    assert_eq!(first.metrics.duration_ns, Some(2_000.0));
    assert_eq!(first.grid.x, 16);
    assert_eq!(first.block.x, 256);
    // One file, one input: agents, the copy and the API calls are part of it.
    assert_eq!(p.sources.len(), 1, "{:?}", p.sources);
    assert_eq!(
        p.sources[0].format,
        "rocprofv3 JSON (kernel_dispatch) + agent info + 1 memory copy + 60 HIP API calls"
    );
    assert_eq!(p.sources[0].launches, 60);
    let tl = p.timeline.as_ref().unwrap();
    assert_eq!(tl.activities.len(), 61);
    let copy = tl
        .activities
        .iter()
        .find(|a| a.name.starts_with("Memcpy"))
        .unwrap();
    // The operation's name from strings.buffer_records[10]; the agent's node id.
    assert_eq!(copy.name, "Memcpy HOST_TO_DEVICE");
    assert_eq!(copy.bytes, Some(1_048_576));
    assert_eq!(copy.device, 2);
    assert_eq!(tl.api_calls.len(), 60);
    assert!(tl.api_calls.iter().all(|c| c.name == "hipLaunchKernel"));

    let d = kopt_analyze::analyze(&p, &AnalyzeOptions::default());
    let t = d.timeline.as_ref().unwrap();
    assert!(t.launch_bound, "{}", t.verdict);
    assert_eq!(t.kernel_launch_calls, 60);
    assert_eq!(
        d.primary.as_ref().unwrap().class,
        BottleneckClass::LaunchOverhead
    );
    assert!(d
        .recommendations
        .iter()
        .any(|r| r.title.contains("HIP graph")));
}

#[test]
fn counter_collection_sums_instances_and_joins_the_trace() {
    let bytes = std::fs::read(fixture("counters_results.json")).unwrap();
    let files = parse_rocprofv3_json(&bytes, "counters_results.json").unwrap();
    let (flavor, ds) = files
        .iter()
        .find_map(|f| match f {
            AmdFile::Dispatches(flavor, ds) if !ds.is_empty() => Some((flavor, ds)),
            _ => None,
        })
        .unwrap();
    assert!(flavor.contains("counter_collection"), "{flavor}");
    assert_eq!(ds.len(), 60);
    // Two instances of 8 KiB.
    assert_eq!(ds[0].counter("FETCH_SIZE"), Some(16.0));
    assert_eq!(ds[0].counter("WRITE_SIZE"), Some(16.0));
    assert_eq!(ds[0].arch_vgpr, Some(8.0));

    // With the trace: the trace's timeline and durations, counters joined on
    // by kernel and occurrence.
    let p =
        read_rocprof_files(&[fixture("results.json"), fixture("counters_results.json")]).unwrap();
    assert_eq!(p.launches.len(), 60);
    assert_eq!(p.launches[0].metrics.duration_ns, Some(2_000.0));
    assert_eq!(p.launches[0].metrics.dram_bytes_read, Some(16.0 * 1024.0));
    assert!(p.timeline.is_some());
    // Alone: counters and the counter run's own durations, no timeline.
    let c = read_rocprof_files(&[fixture("counters_results.json")]).unwrap();
    assert_eq!(c.launches[0].metrics.duration_ns, Some(2_400.0));
    assert!(c.timeline.is_none());
}

fn err(text: &str) -> String {
    parse_rocprofv3_json(text.as_bytes(), "bad.json")
        .unwrap_err()
        .to_string()
}

#[test]
fn malformed_json_gives_errors_naming_file_and_record() {
    let e = err("{\"rocprofiler-sdk-tool\": [");
    assert!(
        e.starts_with("bad.json:") && e.contains("not valid JSON"),
        "{e}"
    );
    let e = err("{\"traceEvents\": []}");
    assert!(e.contains("no top-level \"rocprofiler-sdk-tool\""), "{e}");
    let e = err("{\"rocprofiler-sdk-tool\": 3}");
    assert!(e.contains("expected an array, found a number"), "{e}");
    let e = err("{\"rocprofiler-sdk-tool\": [{\"buffer_records\": {\"kernel_dispatch\": {}}}]}");
    assert!(e.contains("kernel_dispatch: expected an array"), "{e}");
    let dispatch = |start: &str, end: &str, extra: &str| {
        format!(
            "{{\"rocprofiler-sdk-tool\": [{{\"buffer_records\": {{\"kernel_dispatch\": [{{\"start_timestamp\": {start}, \"end_timestamp\": {end}, \"dispatch_info\": {{\"kernel_id\": 1, \"dispatch_id\": 1{extra}}}}}]}}}}]}}"
        )
    };
    let e = err(&dispatch("200", "100", ""));
    assert!(
        e.contains("rocprofiler-sdk-tool[0].buffer_records.kernel_dispatch[0]")
            && e.contains("negative duration"),
        "{e}"
    );
    let e = err(&dispatch("-5", "100", ""));
    assert!(e.contains("start_timestamp is -5"), "{e}");
    let e = err(&dispatch("null", "100", ""));
    assert!(e.contains("start_timestamp / end_timestamp missing"), "{e}");
    let e = err(&dispatch("1", "2", ", \"grid_size\": {\"x\": \"big\"}"));
    assert!(e.contains("x: expected a number, found a string"), "{e}");
    let e = err(
        "{\"rocprofiler-sdk-tool\": [{\"callback_records\": {\"counter_collection\": [{\"dispatch_data\": {\"dispatch_info\": {\"dispatch_id\": 1}}, \"records\": [{\"counter_id\": {\"handle\": 9}, \"value\": 1.0}]}]}}]}",
    );
    assert!(
        e.contains("counter_collection[0]") && e.contains("counter id 9 not among"),
        "{e}"
    );
    // A dispatch whose kernel has no symbol keeps a name that says so.
    let ok = parse_rocprofv3_json(dispatch("1", "2", "").as_bytes(), "x.json").unwrap();
    let AmdFile::Dispatches(_, ds) = &ok[0] else {
        panic!("dispatches first")
    };
    assert!(ds[0].name.contains("kernel_id 1"), "{}", ds[0].name);
    // No dispatches at all: the merge says so.
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("empty_results.json");
    std::fs::write(&p, "{\"rocprofiler-sdk-tool\": [{}]}").unwrap();
    let e = read_rocprof_files(&[p]).unwrap_err().to_string();
    assert!(
        e.contains("empty_results.json") && e.contains("no kernel dispatches"),
        "{e}"
    );
}
