//! `kopt analyze DIR` on a folder of per-rank traces (#36): one job, each
//! rank its own row, the change that would speed the step named first and
//! priced. The traces are built here with known timings, so each figure
//! has an expected value; a real two-rank pair (HTA's test data) checks the
//! report holds together on traces nobody here wrote.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

const MB: u64 = 1 << 20;

/// One collective: (start us, duration us, op name, elements, dtype).
struct Coll {
    start: f64,
    dur: f64,
    kernel: &'static str,
    nelems: u64,
    dtype: &'static str,
}

/// One step: its start and end (us), compute kernels `(start, dur)` and
/// collectives.
type Step = (f64, f64, Vec<(f64, f64)>, Vec<Coll>);

/// A rank's Kineto trace: per step, compute kernels `(start, dur)` on
/// stream 7 and collectives on stream 20, `ProfilerStep#N` over each step.
fn rank_trace(rank: u32, world: u32, steps: &[Step]) -> String {
    let mut ev = String::new();
    let mut corr = 0;
    let mut push = |s: String| {
        if !ev.is_empty() {
            ev.push_str(",\n");
        }
        ev.push_str(&s);
    };
    for (i, (s0, s1, compute, colls)) in steps.iter().enumerate() {
        push(format!(
            r#"{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{i}","pid":1,"tid":1,"ts":{s0:.3},"dur":{:.3}}}"#,
            s1 - s0
        ));
        for (ts, dur) in compute {
            corr += 1;
            push(format!(
                r#"{{"ph":"X","cat":"kernel","name":"sm90_xmma_gemm_f32f32","pid":0,"tid":7,"ts":{ts:.3},"dur":{dur:.3},"args":{{"device":{rank},"stream":7,"correlation":{corr}}}}}"#
            ));
        }
        for c in colls {
            corr += 1;
            let name = match c.kernel {
                "allgather" => {
                    "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)".to_string()
                }
                _ => format!(
                    "ncclDevKernel_AllReduce_Sum_{}_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                    if c.dtype == "Float" { "f32" } else { "i32" }
                ),
            };
            let out = if c.kernel == "allgather" {
                c.nelems * u64::from(world)
            } else {
                c.nelems
            };
            push(format!(
                r#"{{"ph":"X","cat":"kernel","name":"{name}","pid":0,"tid":20,"ts":{:.3},"dur":{:.3},"args":{{"device":{rank},"stream":20,"correlation":{corr},"Collective name":"{}","In msg nelems":{},"Out msg nelems":{out},"Group size":{world},"dtype":"{}"}}}}"#,
                c.start, c.dur, c.kernel, c.nelems, c.dtype
            ));
        }
    }
    format!(
        "{{\"distributedInfo\": {{\"backend\": \"nccl\", \"rank\": {rank}, \"world_size\": {world}}},\n \"deviceProperties\": [{{\"name\": \"NVIDIA H200\", \"numSms\": 132}}],\n \"traceEvents\": [\n{ev}\n]}}\n"
    )
}

fn kopt(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(args)
        .output()
        .expect("kopt runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn analyze_json(dir: &Path) -> serde_json::Value {
    let (ok, out, err) = kopt(&["analyze", dir.to_str().unwrap(), "-f", "json"]);
    assert!(ok, "kopt analyze failed: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["schema"], "kopt/ranks/1");
    v
}

fn write(dir: &Path, traces: &[String]) {
    for (r, t) in traces.iter().enumerate() {
        std::fs::write(dir.join(format!("worker{r}.pt.trace.json")), t).unwrap();
    }
}

fn first(d: &serde_json::Value) -> (&str, f64) {
    let r = &d["recommendations"][0];
    (
        r["id"].as_str().unwrap_or(""),
        r["predicted_speedup"]["estimate"].as_f64().unwrap_or(0.0),
    )
}

/// Rank 1 computes 4 ms a step, rank 0 3 ms; both then all-reduce 0.5 ms
/// worth, which ends together: rank 0 waits 1 ms a step for rank 1.
#[test]
fn a_rank_with_more_work_is_the_straggler_and_balancing_it_is_priced() {
    let dir = tempfile::tempdir().unwrap();
    let mut traces = Vec::new();
    for rank in 0..2u32 {
        let compute = if rank == 1 { 4000.0 } else { 3000.0 };
        let steps: Vec<_> = (0..4)
            .map(|i| {
                let t = 1000.0 + f64::from(i) * 4600.0;
                let ar = Coll {
                    start: t + compute,
                    dur: 4500.0 - compute,
                    kernel: "allreduce",
                    nelems: 8 * MB,
                    dtype: "Float",
                };
                (t, t + 4600.0, vec![(t, compute)], vec![ar])
            })
            .collect();
        traces.push(rank_trace(rank, 2, &steps));
    }
    write(dir.path(), &traces);
    let d = analyze_json(dir.path());
    assert_eq!(d["ranks"].as_array().unwrap().len(), 2);
    assert_eq!(d["straggler"]["rank"], 1);
    let cause = d["straggler"]["cause"].as_str().unwrap();
    assert!(cause.starts_with("more GPU work"), "{cause}");
    let (id, gain) = first(&d);
    assert_eq!(id, "rank_imbalance");
    // 1 ms of 4.6 ms saved: 4.6 / 3.6.
    assert!((gain - 4.6 / 3.6).abs() < 0.02, "{gain}");
    // Rank 0's all-reduce kernel holds its 1 ms wait; the transfer is rank 1's 0.5 ms.
    let row = &d["collectives"][0];
    assert_eq!(row["op"], "all_reduce");
    assert_eq!(row["total_ns"], 4 * 500_000);
}

/// 48 all-reduces a step of 4 MB gradients (a 0.25 MB bucket cap makes
/// one per layer), serial after the backward's compute, 30 us each of
/// which about 9 us is the bytes at NVLink's peak.
#[test]
fn many_small_all_reduces_call_for_larger_buckets() {
    let dir = tempfile::tempdir().unwrap();
    let mut traces = Vec::new();
    for rank in 0..2u32 {
        let steps: Vec<_> = (0..3)
            .map(|i| {
                let t = 1000.0 + f64::from(i) * 5000.0;
                let colls = (0..48)
                    .map(|k| Coll {
                        start: t + 3000.0 + f64::from(k) * 30.0,
                        dur: 30.0,
                        kernel: "allreduce",
                        nelems: MB,
                        dtype: "Float",
                    })
                    .collect();
                (t, t + 5000.0, vec![(t, 3000.0)], colls)
            })
            .collect();
        traces.push(rank_trace(rank, 2, &steps));
    }
    write(dir.path(), &traces);
    let d = analyze_json(dir.path());
    let (id, gain) = first(&d);
    assert_eq!(id, "ddp_bucket_size", "{}", d["recommendations"]);
    // 48 x 4 MiB = 192 MiB fit 8 buckets of 25 MiB: 40 launches fewer, each
    // 30 us less its bytes at NVLink's 450 GB/s (9.3 us): 0.83 ms off 5 ms.
    let fixed = 30.0 - 4.0 * MB as f64 / 450e9 * 1e6;
    let want = 5.0 / (5.0 - 40.0 * fixed / 1000.0);
    assert!((gain - want).abs() < 0.01, "{gain} vs {want}");
    assert!(d["straggler"].is_null());
}

/// One 64 MB fp32 all-reduce a step, 2 ms of which 1.5 ms is not hidden.
#[test]
fn exposed_fp32_gradients_call_for_bf16_compression() {
    let dir = tempfile::tempdir().unwrap();
    let mut traces = Vec::new();
    for rank in 0..2u32 {
        let steps: Vec<_> = (0..3)
            .map(|i| {
                let t = 1000.0 + f64::from(i) * 6000.0;
                let ar = Coll {
                    start: t + 2500.0,
                    dur: 2000.0,
                    kernel: "allreduce",
                    nelems: 16 * MB,
                    dtype: "Float",
                };
                (t, t + 6000.0, vec![(t, 3000.0)], vec![ar])
            })
            .collect();
        traces.push(rank_trace(rank, 2, &steps));
    }
    write(dir.path(), &traces);
    let d = analyze_json(dir.path());
    let (id, gain) = first(&d);
    assert_eq!(id, "bf16_gradient_compression");
    // min(exposed 1.5 ms, transfer / 2 = 1 ms) off 6 ms.
    assert!((gain - 6.0 / 5.0).abs() < 0.01, "{gain}");
    let rank0 = &d["ranks"][0];
    assert_eq!(rank0["overlapped_comm_ns"], 3 * 500_000);
    assert_eq!(rank0["exposed_comm_ns"], 3 * 1_500_000);
    assert!((rank0["overlap_pct"].as_f64().unwrap() - 25.0).abs() < 1e-9);
}

/// FSDP's all-gathers each before its unit's compute, none prefetched.
#[test]
fn exposed_all_gathers_call_for_prefetch() {
    let dir = tempfile::tempdir().unwrap();
    let mut traces = Vec::new();
    for rank in 0..2u32 {
        let steps: Vec<_> = (0..3)
            .map(|i| {
                let t = 1000.0 + f64::from(i) * 8000.0;
                let mut compute = Vec::new();
                let mut colls = Vec::new();
                for u in 0..8 {
                    let at = t + f64::from(u) * 1000.0;
                    colls.push(Coll {
                        start: at,
                        dur: 300.0,
                        kernel: "allgather",
                        nelems: 2 * MB,
                        dtype: "Float",
                    });
                    compute.push((at + 300.0, 700.0));
                }
                (t, t + 8000.0, compute, colls)
            })
            .collect();
        traces.push(rank_trace(rank, 2, &steps));
    }
    write(dir.path(), &traces);
    let d = analyze_json(dir.path());
    let (id, gain) = first(&d);
    assert_eq!(id, "fsdp_prefetch");
    // 0.8 x 2.4 ms exposed off 8 ms.
    assert!((gain - 8.0 / (8.0 - 0.8 * 2.4)).abs() < 0.01, "{gain}");
}

#[test]
fn the_real_pair_reads_as_one_job_with_its_notes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/multigpu-hta");
    let (ok, out, err) = kopt(&["analyze", dir.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.starts_with("kopt: 128 ranks"), "{out}");
    assert!(out.contains("2 of 128 ranks' traces given"), "{out}");
    assert!(out.contains("no message sizes"), "{out}");
    let d = analyze_json(&dir);
    let mut seen = String::new();
    for r in d["ranks"].as_array().unwrap() {
        let span = r["span_ns"].as_i64().unwrap();
        let parts = ["compute_ns", "idle_ns"].map(|k| r[k].as_i64().unwrap());
        assert!(parts.iter().all(|p| (0..=span).contains(p)));
        let pct = r["overlap_pct"].as_f64().unwrap();
        assert!((0.0..=100.0).contains(&pct));
        let _ = write!(seen, "{} ", r["rank"]);
    }
    assert_eq!(seen, "0 1 ");
}

#[test]
fn two_traces_of_one_rank_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let one = rank_trace(0, 2, &[(0.0, 10.0, vec![(0.0, 5.0)], Vec::new())]);
    std::fs::write(dir.path().join("a.json"), &one).unwrap();
    std::fs::write(dir.path().join("b.json"), &one).unwrap();
    let (ok, _, err) = kopt(&["analyze", dir.path().to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("both say they are rank 0"), "{err}");
}
