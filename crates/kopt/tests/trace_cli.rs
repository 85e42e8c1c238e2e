//! `kopt trace` without a GPU: the workload stands in for the tracer and
//! writes a real recorded trace to $KOPT_TRACE_OUT, so the whole command
//! (run folder, report, Perfetto export) and its failures are exercised.

use std::path::PathBuf;
use std::process::Command;

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

/// `kopt trace --format json` in `dir` with a stand-in tracer library and
/// `script` (a shell command) as the workload.
fn trace_running(dir: &std::path::Path, script: &str, extra: &[&str]) -> std::process::Output {
    let tracer = dir.join("libkopt_tracer.so");
    std::fs::write(&tracer, b"stand-in").unwrap();
    Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args([
            "trace",
            "--runs-dir",
            "runs",
            "--format",
            "json",
            "--tracer",
        ])
        .arg(&tracer)
        .args(extra)
        .args(["--", "/bin/sh", "-c", script])
        .current_dir(dir)
        .output()
        .unwrap()
}

/// The workload copies `trace` to where the tracer would write ($KOPT_TRACE_OUT).
fn trace_replaying(
    dir: &std::path::Path,
    trace: &std::path::Path,
    extra: &[&str],
) -> std::process::Output {
    let script = format!(
        "test -n \"$CUDA_INJECTION64_PATH\" && cp '{}' \"$KOPT_TRACE_OUT\"",
        trace.display()
    );
    trace_running(dir, &script, extra)
}

#[test]
fn traced_run_reports_and_exports() {
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("out.json");
    let src = fixture("kopt-trace-h200/moe_trace.jsonl");
    let export_arg = export.display().to_string();
    let o = trace_replaying(dir.path(), &src, &["--export", "perfetto", &export_arg]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["primary"]["type"], "launch_overhead");
    assert_eq!(report["timeline"]["launch_bound"], true);
    let exported: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&export).unwrap()).unwrap();
    let events = exported["traceEvents"].as_array().unwrap();
    assert!(events.iter().filter(|e| e["cat"] == "kernel").count() == 121);
    let run = std::fs::read_dir(dir.path().join("runs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert!(
        run.join("trace.jsonl").exists()
            && run.join("report.json").exists()
            && run.join("trace.log").exists()
    );
}

#[test]
fn missing_tracer_and_missing_trace_are_explained() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args([
            "trace",
            "--runs-dir",
            "runs",
            "--tracer",
            "/nonexistent/libkopt_tracer.so",
            "--",
            "/bin/true",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("tracer library not found"));

    let tracer = dir.path().join("libkopt_tracer.so");
    std::fs::write(&tracer, b"stand-in").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["trace", "--runs-dir", "runs", "--tracer"])
        .arg(&tracer)
        .args(["--", "/bin/true"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("the tracer wrote no trace"));

    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["trace", "--runs-dir", "runs", "--tracer"])
        .arg(&tracer)
        .args(["--", "/bin/sh", "-c", "echo boom >&2; exit 4"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("exited with code 4") && err.contains("boom"),
        "{err}"
    );
}

#[test]
fn a_profiler_taking_cupti_over_is_reported() {
    // The tracer's end record counts buffers CUPTI never handed back (seen on
    // the H200 when the program started torch.profiler itself).
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("kopt-trace-h200/moe_trace.jsonl")).unwrap();
    let body: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains("\"t\":\"end\""))
        .collect();
    let taken = dir.path().join("taken.jsonl");
    std::fs::write(
        &taken,
        format!(
            "{}\n{{\"t\":\"end\",\"records\":10,\"dropped\":0,\"lost_buffers\":2}}\n",
            body.join("\n")
        ),
    )
    .unwrap();
    let o = trace_replaying(dir.path(), &taken, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let notes = report["notes"].to_string();
    assert!(
        notes.contains("Another CUPTI client took tracing over")
            && notes.contains("2 activity buffer"),
        "{notes}"
    );
}

#[test]
fn child_processes_write_their_own_traces_and_are_merged() {
    // Two processes under one `kopt trace`: the first wrote trace.jsonl, the
    // other trace.jsonl.<pid> (as the tracer does); one report covers both.
    let dir = tempfile::tempdir().unwrap();
    let src = fixture("kopt-trace-h200/moe_trace.jsonl");
    let nvtx = fixture("kopt-trace-h200/nvtx_vk_trace.jsonl");
    let script = format!(
        "cp '{}' \"$KOPT_TRACE_OUT\" && cp '{}' \"$KOPT_TRACE_OUT.4242\"",
        src.display(),
        nvtx.display()
    );
    let o = trace_running(dir.path(), &script, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let launches: u64 = report["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["launches"].as_u64().unwrap())
        .sum();
    // Every kernel is in the table: the input's set-up kernel (one launch
    // before the loop) is start-up, not a warm-up trial.
    assert!(
        report["warmup_trials"].is_null(),
        "{}",
        report["warmup_trials"]
    );
    assert_eq!(launches, 121 + 23, "both processes' kernels");
    assert!(report["notes"].to_string().contains("2 processes"));
}

#[test]
fn a_sampled_trace_is_diagnosed_over_its_windows() {
    // Recorded on the H200: `kopt trace --sample 10ms/100ms` of seed 000's MoE
    // step, 7 windows over 0.88 s. The time between windows is cut, not idle.
    let dir = tempfile::tempdir().unwrap();
    let src = fixture("kopt-trace-h200/moe_sampled_trace.jsonl");
    let script = format!(
        "test \"$KOPT_TRACER_SAMPLE\" = 10/100 && cp '{}' \"$KOPT_TRACE_OUT\"",
        src.display()
    );
    let o = trace_running(dir.path(), &script, &["--sample", "10ms/100ms"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["primary"]["type"], "launch_overhead");
    let t = &report["timeline"];
    assert_eq!(t["sampling"]["windows"], 7);
    let busy = t["busy_pct"].as_f64().unwrap();
    assert!(
        (5.0..40.0).contains(&busy),
        "busy {busy}%: the time between windows must not count as idle"
    );
    // 1,455 kernels in the windows; the 2 after the last whole step are cut
    // from the steady state (timeline.steady_state.trailing_ns says so).
    assert_eq!(t["kernels"], 1453);
    let per_step = t["busy_per_iteration_ns"].as_f64().unwrap();
    assert!((15_000.0..25_000.0).contains(&per_step), "{per_step}");

    // A short program whose GPU work fell between the windows: said plainly.
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(
        &empty,
        "{\"t\":\"process\",\"pid\":7}\n{\"t\":\"window\",\"s\":100,\"e\":200}\n{\"t\":\"end\",\"records\":0,\"dropped\":0,\"lost_buffers\":0}\n",
    )
    .unwrap();
    let o = trace_replaying(dir.path(), &empty, &["--sample", "10ms/100ms"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        report["notes"][0]
            .as_str()
            .unwrap()
            .contains("caught no GPU activity"),
        "{}",
        report["notes"]
    );

    // A window as long as its period, or no period: refused before anything runs.
    for bad in ["100ms/100ms", "10ms", "0.1ms/1s"] {
        let o = trace_running(dir.path(), "exit 9", &["--sample", bad]);
        assert_eq!(o.status.code(), Some(2), "--sample {bad}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("--sample"),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn a_workload_killed_by_a_signal_is_an_error_not_a_report() {
    // Before, a crash (no exit code) passed as success with a cut trace.
    let dir = tempfile::tempdir().unwrap();
    let src = fixture("kopt-trace-h200/moe_trace.jsonl");
    let script = format!(
        "head -50 '{}' > \"$KOPT_TRACE_OUT\"; echo about to crash; kill -SEGV $$",
        src.display()
    );
    let o = trace_running(dir.path(), &script, &[]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("killed by signal 11") && err.contains("about to crash"),
        "{err}"
    );
    let kept = std::fs::read_dir(dir.path().join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path().join("trace.jsonl"))
        .any(|p| p.is_file());
    assert!(kept, "the trace so far stays in the run folder");
}

#[test]
fn a_program_whose_torch_profiler_was_stood_in_for_is_told_so() {
    // The stand-in on PYTHONPATH marks the run folder when the program
    // creates torch.profiler.profile; the workload plays that part here.
    let dir = tempfile::tempdir().unwrap();
    let src = fixture("kopt-trace-h200/moe_trace.jsonl");
    let script = format!(
        "test -f \"${{PYTHONPATH%%:*}}/sitecustomize.py\" && touch \"$KOPT_PROFILER_SHIM_NOTE\" && cp '{}' \"$KOPT_TRACE_OUT\"",
        src.display()
    );
    let o = trace_running(dir.path(), &script, &["--no-bare-run"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let notes = report["notes"].to_string();
    assert!(notes.contains("replaced by kopt's stand-in"), "{notes}");
    // Without the mark, no such note.
    let o = trace_replaying(dir.path(), &src, &["--no-bare-run"]);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(!report["notes"].to_string().contains("stand-in"));
}

/// A kopt trace of one rank: `steps` NVTX steps of 1 ms, each a compute
/// kernel of `compute_us` then an all-reduce until 900 us into the step.
fn rank_trace(rank: u32, compute_us: i64, steps: i64) -> String {
    let mut t = format!(
        "{{\"t\":\"process\",\"pid\":{},\"rank\":{rank},\"local_rank\":{rank},\"world_size\":2}}\n",
        100 + rank
    );
    let mut c = 0;
    for s in 0..steps {
        let at = 1_000_000 + s * 1_000_000;
        t += &format!("{{\"t\":\"range_start\",\"id\":{},\"s\":{at},\"tid\":1,\"name\":\"ProfilerStep#{s}\",\"dom\":\"\"}}\n", s + 1);
        for (name, start, end) in [
            ("gemm_kernel", at + 10_000, at + 10_000 + compute_us * 1000),
            (
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                at + 10_000 + compute_us * 1000,
                at + 900_000,
            ),
        ] {
            c += 1;
            t += &format!("{{\"t\":\"api\",\"name\":\"cudaLaunchKernel\",\"s\":{},\"e\":{},\"tid\":1,\"c\":{c}}}\n", at + c, at + c + 2000);
            t += &format!("{{\"t\":\"kernel\",\"name\":\"{name}\",\"s\":{start},\"e\":{end},\"dev\":{rank},\"str\":7,\"c\":{c}}}\n");
        }
        t += &format!(
            "{{\"t\":\"range_end\",\"id\":{},\"e\":{}}}\n",
            s + 1,
            at + 1_000_000
        );
    }
    t + "{\"t\":\"end\",\"records\":1,\"dropped\":0}\n"
}

/// `kopt trace -- torchrun ...` (#36): each rank's trace.jsonl.<pid> kept
/// apart, rank 0's diagnosis, the job's ranks after it and in ranks.json,
/// and a Perfetto export with every rank's processes.
#[test]
fn a_launched_job_is_read_rank_by_rank() {
    let dir = tempfile::tempdir().unwrap();
    let (r0, r1) = (dir.path().join("r0.jsonl"), dir.path().join("r1.jsonl"));
    std::fs::write(&r0, rank_trace(0, 300, 6)).unwrap();
    std::fs::write(&r1, rank_trace(1, 700, 6)).unwrap();
    let export = dir.path().join("job.json");
    let script = format!(
        "cp '{}' \"$KOPT_TRACE_OUT\" && cp '{}' \"$KOPT_TRACE_OUT.4242\"",
        r0.display(),
        r1.display()
    );
    let tracer = dir.path().join("libkopt_tracer.so");
    std::fs::write(&tracer, b"stand-in").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["trace", "--no-bare-run", "--runs-dir", "runs", "--tracer"])
        .arg(&tracer)
        .args(["--export", "perfetto"])
        .arg(&export)
        .args(["--", "/bin/sh", "-c", &script])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("kopt: 2 ranks"), "{out}");
    assert!(
        out.contains("rank_imbalance") || out.contains("Balance rank 1"),
        "{out}"
    );
    let run = std::fs::read_dir(dir.path().join("runs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let ranks: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("ranks.json")).unwrap()).unwrap();
    assert_eq!(ranks["schema"], "kopt/ranks/1");
    assert_eq!(ranks["straggler"]["rank"], 1, "{ranks}");
    let exported = std::fs::read_to_string(&export).unwrap();
    assert!(exported.contains("rank 1: GPU 1") && exported.contains("rank 0: CPU"));
}
