//! The format contract between the tracer and kopt-ingest: lines written by
//! the tracer's own writer functions (`kopt_tracer::records`) are read back
//! by `kopt_ingest::parse_kopt_trace`, and every field the tracer records
//! arrives in the timeline where the analysis expects it. No CUDA needed.

use kopt_ingest::parse_kopt_trace;
use kopt_model::{ActivityKind, ApiKind, Dim3};
use kopt_tracer::records::{
    api_line, device_line, end_line, kernel_line, marker_line, memcpy_line, memset_line,
    process_line, window_line, CopyRecord, DeviceRecord, KernelRecord,
};

/// NVTX marker flags as CUPTI sets them.
const RANGE_START: u32 = 2;
const RANGE_END: u32 = 4;
const INSTANTANEOUS: u32 = 1;

/// A mangled C++ kernel: `void kopt::step<float>(float*, int)`.
const MANGLED: &str = "_ZN4kopt4stepIfEEvPT_i";
/// Mangled-looking, with every kind of character JSON must escape: not a
/// valid symbol, so the parser keeps it as it is, escapes undone.
const ODD: &str = "_Z6triton\"poi\"\\fused\n\t\u{1}\u{1f}_0";

fn kernel<'a>(
    name: &'a str,
    start: u64,
    end: u64,
    stream: u32,
    correlation: u32,
) -> KernelRecord<'a> {
    KernelRecord {
        name,
        start,
        end,
        device: 0,
        stream,
        correlation,
        grid: [120, 2, 1],
        block: [256, 1, 1],
        registers: 40,
        shared_memory: 16384,
        graph: 0,
    }
}

/// A whole trace as the tracer writes it, in the order it writes it: the
/// process line first, the activity records as CUPTI's buffers deliver them
/// (kernels and copies before the API calls that launched them is common),
/// the end record last.
fn trace(window: Option<(u64, u64)>) -> String {
    let mut t = String::new();
    t += &process_line(4242, Some("run-1"));
    t += &device_line(&DeviceRecord {
        id: 0,
        name: "NVIDIA H200 \"SXM\"",
        sms: 132,
        cc: [9, 0],
        mem_bw_kbs: 4_800_000_000,
        clock_khz: 1_980_000,
    });
    t += &kernel_line(&kernel(MANGLED, 2_000, 7_000, 7, 11));
    t += &kernel_line(&kernel(ODD, 8_000, 9_500, 13, 14));
    let copy = CopyRecord {
        start: 10_000,
        end: 12_000,
        device: 0,
        stream: 7,
        correlation: 12,
        bytes: 1 << 20,
    };
    t += &memcpy_line(1, [1, 3], &copy);
    t += &memset_line(&CopyRecord {
        start: 12_500,
        end: 12_700,
        correlation: 13,
        bytes: 4096,
        ..copy
    });
    // The two API paths (activity records, CUPTI callbacks) write the same line.
    t += &api_line("cudaLaunchKernel_v7000", 1_000, 1_400, 42, 11);
    t += &api_line("cudaMemcpyAsync_v3020", 9_000, 9_200, 42, 12);
    t += &api_line("cudaMemsetAsync_v3020", 9_300, 9_400, 42, 13);
    t += &api_line("cuLaunchKernel", 7_500, 7_800, 43, 14);
    t += &api_line("cudaDeviceSynchronize_v3020", 12_800, 13_000, 42, 0);
    for (flags, id, ts, name) in [
        (RANGE_START, 1, 1_100, Some("step \"1\"")),
        (RANGE_START, 2, 1_200, Some("forward\\attn")),
        (INSTANTANEOUS, 3, 1_300, Some("a mark")),
        (RANGE_END, 2, 9_000, None),
        (RANGE_END, 1, 13_000, None),
    ] {
        if let Some(line) = marker_line(flags, id, ts, 42, name.map(String::from), None) {
            t += &line;
        }
    }
    if let Some((s, e)) = window {
        t += &window_line(s, e);
    }
    t += &end_line(11, 2, 0);
    t
}

#[test]
fn every_line_is_one_json_object() {
    for line in trace(Some((900, 14_000))).lines() {
        assert!(
            line.starts_with("{\"t\":\"") && line.ends_with('}'),
            "{line}"
        );
        assert!(!line.contains(['\n', '\t', '\u{1}']), "{line:?}");
    }
}

#[test]
fn the_parser_reads_every_record_the_tracer_writes() {
    let parsed = parse_kopt_trace(&trace(None), "trace.jsonl").unwrap();
    assert!(parsed.ended, "the end record closes the trace");
    assert_eq!(parsed.dropped_records, 2);
    assert_eq!(parsed.lost_buffers, 0);
    assert_eq!(
        (
            parsed.invalid_records,
            parsed.incomplete_records,
            parsed.names_cut
        ),
        (0, 0, 0)
    );
    let t = &parsed.timeline;
    assert!(t.whole_program);
    assert!(t.sampled_windows.is_empty(), "a continuous trace");

    // The device names the trace.
    assert_eq!(t.device_name.as_deref(), Some("NVIDIA H200 \"SXM\""));
    assert_eq!(t.sm_count, Some(132));

    // Kernels: demangled, or (not mangled) exactly as named, escapes undone.
    assert_eq!(t.activities.len(), 4);
    let k = &t.activities[0];
    assert_eq!(k.kind, ActivityKind::Kernel);
    assert_eq!(k.name, "void kopt::step<float>(float*, int)");
    assert_eq!((k.start_ns, k.end_ns), (2_000, 7_000));
    assert_eq!((k.device, k.stream), (0, 7));
    assert_eq!(k.grid, Some(Dim3 { x: 120, y: 2, z: 1 }));
    assert_eq!(k.block, Some(Dim3 { x: 256, y: 1, z: 1 }));
    assert_eq!(k.bytes, None);
    let odd = &t.activities[1];
    assert_eq!(odd.kind, ActivityKind::Kernel);
    assert_eq!(
        odd.name, ODD,
        "quotes, backslashes and control characters survive"
    );
    assert_eq!((odd.start_ns, odd.end_ns, odd.stream), (8_000, 9_500, 13));

    // Copies and sets: name, times, stream, bytes.
    let cp = &t.activities[2];
    assert_eq!(cp.kind, ActivityKind::Memcpy);
    // Copy kind 1 is host to device: the parser keeps the tracer's name or
    // names the kind as Kineto does; either way the kind survives.
    assert!(
        matches!(cp.name.as_str(), "Memcpy kind 1" | "Memcpy HtoD"),
        "{}",
        cp.name
    );
    assert_eq!((cp.start_ns, cp.end_ns, cp.stream), (10_000, 12_000, 7));
    assert_eq!(cp.bytes, Some(1 << 20));
    // Its memory kinds survive the round trip: pageable host to device.
    let kinds = cp.copy.map(|c| (c.direction, c.src, c.dst));
    assert_eq!(
        kinds,
        Some((
            kopt_model::CopyDirection::HostToDevice,
            kopt_model::MemoryKind::Pageable,
            kopt_model::MemoryKind::Device
        ))
    );
    assert_eq!((cp.grid, cp.block), (None, None));
    let set = &t.activities[3];
    assert_eq!(set.kind, ActivityKind::Memset);
    assert_eq!(set.name, "Memset");
    assert_eq!((set.start_ns, set.end_ns), (12_500, 12_700));
    assert_eq!(set.bytes, Some(4096));

    // API calls: kinds, times, threads, and the correlation join: each
    // activity finds the call that launched it.
    let kinds: Vec<(&str, ApiKind, u64)> = t
        .api_calls
        .iter()
        .map(|c| (c.name.as_str(), c.kind, c.thread))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("cudaLaunchKernel_v7000", ApiKind::KernelLaunch, 42),
            ("cudaMemcpyAsync_v3020", ApiKind::Memory, 42),
            ("cudaMemsetAsync_v3020", ApiKind::Memory, 42),
            ("cuLaunchKernel", ApiKind::KernelLaunch, 43),
            ("cudaDeviceSynchronize_v3020", ApiKind::Synchronize, 42),
        ]
    );
    assert_eq!(
        (t.api_calls[0].start_ns, t.api_calls[0].end_ns),
        (1_000, 1_400)
    );
    for (activity, call) in [(0, 0), (1, 3), (2, 1), (3, 2)] {
        let a = &t.activities[activity];
        let launched_by: Vec<&str> = t
            .api_calls
            .iter()
            .filter(|c| c.correlation == a.correlation)
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(
            launched_by,
            vec![t.api_calls[call].name.as_str()],
            "{}",
            a.name
        );
    }
    assert_eq!(t.api_calls[4].correlation, 0, "a sync launches nothing");

    // NVTX: ranges paired by id, names unescaped, marks skipped.
    let ranges: Vec<(&str, i64, i64)> = t
        .ranges
        .iter()
        .map(|r| (r.name.as_str(), r.start_ns, r.end_ns))
        .collect();
    assert_eq!(
        ranges,
        vec![
            ("step \"1\"", 1_100, 13_000),
            ("forward\\attn", 1_200, 9_000)
        ]
    );
}

#[test]
fn a_sampled_window_keeps_its_records_and_bounds() {
    let parsed = parse_kopt_trace(&trace(Some((900, 14_000))), "trace.jsonl").unwrap();
    assert!(parsed.ended);
    assert_eq!(parsed.incomplete_records, 0);
    let t = &parsed.timeline;
    assert_eq!(
        t.sampled_windows,
        vec![(1_000, 14_000)],
        "the window opens at its first API call and closes at its recorded end"
    );
    assert_eq!(t.activities.len(), 4);
    assert_eq!(t.ranges.len(), 2);
    let k = &t.activities[0];
    let launch = t.api_calls.iter().find(|c| c.correlation == k.correlation);
    assert_eq!(
        launch.map(|c| c.name.as_str()),
        Some("cudaLaunchKernel_v7000")
    );
}

#[test]
fn a_trace_cut_before_its_end_record_is_reported() {
    let whole = trace(None);
    let cut = &whole[..whole.rfind("{\"t\":\"end\"").unwrap()];
    let parsed = parse_kopt_trace(cut, "trace.jsonl").unwrap();
    assert!(!parsed.ended);
    assert_eq!(parsed.timeline.activities.len(), 4);
}
