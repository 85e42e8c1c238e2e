//! A program that replays a CUDA graph (fixtures/graph-replay-h100, a
//! real H100 capture): the kernels replayed inside the graph are listed by
//! name with their own time, not as one lump per graph launch.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn graph_replayed_kernels_are_listed_by_name_with_their_time() {
    let trace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/graph-replay-h100/trace.jsonl.gz");
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["analyze", "-f", "json"])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let kernels = v["kernels"].as_array().unwrap();
    // The step's five kernel nodes, each replayed once per launch (50
    // replays plus the 3 warm-up calls before capture).
    let name_of = |k: &serde_json::Value| k["name"].as_str().unwrap().to_string();
    for part in [
        "sm80_xmma_gemm_f32f32",
        "cutlass_80_simt_sgemm",
        "GeluCUDAKernelImpl",
        "splitKreduce_kernel",
        "vectorized_layer_norm_kernel",
    ] {
        let k = kernels
            .iter()
            .find(|k| name_of(k).contains(part))
            .unwrap_or_else(|| {
                panic!(
                    "{part}: {:?}",
                    kernels.iter().map(name_of).collect::<Vec<_>>()
                )
            });
        assert_eq!(k["launches"], 53, "{part}");
        let total = k["total_ns"].as_f64().unwrap();
        assert!(total > 50.0 * 1000.0, "{part}: {total} ns");
    }
    // No row is a graph launch: the launches are counted in the timeline.
    assert!(kernels.iter().all(|k| !name_of(k).contains("Graph")));
    let t = &v["timeline"];
    assert_eq!(t["kernel_launch_calls"], 0);
    assert!(t["graph_launches"].as_u64().unwrap() >= 45);
    // The table's time is the kernels' own: it sums to the trace's.
    let sum: f64 = kernels
        .iter()
        .map(|k| k["total_ns"].as_f64().unwrap())
        .sum();
    let total = v["total_kernel_ns"].as_f64().unwrap();
    assert!(
        (sum - total).abs() < 1e-6 * total.max(1.0),
        "{sum} vs {total}"
    );
}

/// The CUTLASS SIMT SGEMM (`cutlass::Kernel2<cutlass_80_simt_sgemm_...>`)
/// is named in the table by the kernel the wrapper runs, not `Kernel2`.
#[test]
fn the_cutlass_wrapper_is_named_by_the_kernel_it_runs() {
    let trace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/graph-replay-h100/trace.jsonl.gz");
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["analyze", "--width", "100"])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("cutlass_80_simt_sgemm_64x64_8x5_tn_align1 ")),
        "{text}"
    );
    assert!(!text.contains("Kernel2"), "{text}");
}
