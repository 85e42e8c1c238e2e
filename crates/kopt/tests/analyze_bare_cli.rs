//! `kopt analyze TRACE -- CMD` without a GPU: the command stands in for the
//! program and its bare run, writing the step lines kopt's tracer would
//! write as NVTX injection, so the whole path (which steps, the run folder,
//! the torch.profiler stand-in on PYTHONPATH, the prediction) is exercised.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

fn analyze_with_command(dir: &Path, trace: &Path, script: &str) -> std::process::Output {
    let tracer = dir.join("libkopt_tracer.so");
    std::fs::write(&tracer, b"stand-in").unwrap();
    Command::new(env!("CARGO_BIN_EXE_kopt"))
        .arg("analyze")
        .arg(trace)
        .args(["--runs-dir", "runs", "--format", "json", "--tracer"])
        .arg(&tracer)
        .args(["--", "/bin/sh", "-c", script])
        .current_dir(dir)
        .output()
        .unwrap()
}

/// A bare run's step lines: `n` ProfilerStep ranges from #3, `period_us` apart.
fn bare_steps_script(n: usize, period_us: i64) -> String {
    let mut lines = String::new();
    for i in 0..n {
        let s = 1_000_000_000 + i as i64 * period_us * 1000;
        lines.push_str(&format!(
            "{{\"t\":\"bare_step\",\"pid\":7,\"name\":\"ProfilerStep#{}\",\"s\":{s},\"e\":{}}}\n",
            i + 3,
            s + period_us * 1000 - 500
        ));
    }
    // The command checks what kopt gave it, as the real program's NVTX and
    // Python would meet it, then writes what the tracer would.
    format!(
        "test -n \"$NVTX_INJECTION64_PATH\" && test -z \"$CUDA_INJECTION64_PATH\" \
         && test \"$KOPT_BARE_STEPS_RANGE\" = ProfilerStep \
         && test -f \"${{PYTHONPATH%%:*}}/sitecustomize.py\" \
         && printf '%s' '{lines}' > \"$KOPT_BARE_STEPS_OUT\""
    )
}

/// The one run folder the bare run made.
fn the_run(dir: &Path) -> PathBuf {
    let runs: Vec<PathBuf> = std::fs::read_dir(dir.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs[0].clone()
}

fn report(o: &std::process::Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn a_profiler_trace_is_predicted_from_its_program_timed_bare() {
    let dir = tempfile::tempdir().unwrap();
    let trace = fixture("predictions-h200-bare/moe.pt.trace.json.gz");
    let traced = report(
        &Command::new(env!("CARGO_BIN_EXE_kopt"))
            .args(["analyze", "--format", "json"])
            .arg(&trace)
            .output()
            .unwrap(),
    );
    let g0 = &traced["timeline"]["graph_prediction"];
    assert_eq!(g0["eager_measured_bare"], false);

    let o = analyze_with_command(dir.path(), &trace, &bare_steps_script(11, 170));
    let r = report(&o);
    let g = &r["timeline"]["graph_prediction"];
    assert_eq!(g["eager_measured_bare"], true, "{}", r["notes"]);
    let eager = g["eager_corrected_per_step_ns"].as_f64().unwrap();
    assert!((eager - 170_000.0).abs() < 1.0, "{eager}");
    // The GPU side is the trace's: the same time after capture.
    assert_eq!(g["graph_per_step_ns"], g0["graph_per_step_ns"]);
    let model = g["speedup"]["model"].as_str().unwrap();
    assert!(
        model.contains("measured bare") && model.contains("torch.profiler cost"),
        "{model}"
    );
    // The bare run left its folder: log, steps, the stand-in.
    let run = the_run(dir.path());
    assert!(run.join("bare_steps.jsonl").is_file());
    assert!(run.join("python-shim/sitecustomize.py").is_file());
}

#[test]
fn a_gpu_bound_trace_is_timed_bare_too() {
    // Two large matmuls a step: GPU bound. Its steps are marked
    // (ProfilerStep#N), so the command runs: every finding's speed-up is
    // figured on the untraced step, not only graph capture's.
    let dir = tempfile::tempdir().unwrap();
    let trace = fixture("predictions-h200-bare/matmuls.pt.trace.json.gz");
    let o = analyze_with_command(dir.path(), &trace, "touch ran");
    let r = report(&o);
    assert!(dir.path().join("ran").exists(), "{}", r["notes"]);
    assert!(
        !r["notes"].to_string().contains("was not run"),
        "{}",
        r["notes"]
    );
}

#[test]
fn a_failing_or_silent_command_leaves_the_trace_estimate_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let trace = fixture("predictions-h200-bare/moe.pt.trace.json.gz");
    let r = report(&analyze_with_command(
        dir.path(),
        &trace,
        "echo boom >&2; exit 3",
    ));
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("bare run") && notes.contains("failed") && notes.contains("boom"),
        "{notes}"
    );
    assert_eq!(
        r["timeline"]["graph_prediction"]["eager_measured_bare"],
        false
    );
    let r = report(&analyze_with_command(dir.path(), &trace, "true"));
    assert!(
        r["notes"]
            .to_string()
            .contains("timed no 'ProfilerStep' range"),
        "{}",
        r["notes"]
    );
}

#[test]
fn a_command_needs_a_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let page = fixture("h100-probe/ncu_raw.csv");
    let o = analyze_with_command(dir.path(), &page, "true");
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no timeline"), "{err}");
}

#[test]
fn the_faster_of_two_bare_runs_is_kept_in_either_order() {
    // Host noise only adds time: one run of a short program can come out
    // slow throughout, so kopt runs it twice and keeps the faster.
    let trace = fixture("predictions-h200-bare/moe.pt.trace.json.gz");
    for (first, second) in [(300, 170), (170, 300)] {
        let dir = tempfile::tempdir().unwrap();
        let script = format!(
            "if [ -e once ]; then {}; else touch once; {}; fi",
            bare_steps_script(11, second),
            bare_steps_script(11, first)
        );
        let r = report(&analyze_with_command(dir.path(), &trace, &script));
        let g = &r["timeline"]["graph_prediction"];
        assert_eq!(g["eager_measured_bare"], true, "{}", r["notes"]);
        let eager = g["eager_corrected_per_step_ns"].as_f64().unwrap();
        assert!((eager - 170_000.0).abs() < 1.0, "{first}/{second}: {eager}");
        let run = the_run(dir.path());
        // The folder keeps the steps used, and only those.
        let kept = std::fs::read_to_string(run.join("bare_steps.jsonl")).unwrap();
        let s: Vec<i64> = kept
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["s"]
                    .as_i64()
                    .unwrap()
            })
            .collect();
        assert_eq!(s[2] - s[1], 170_000);
        assert_eq!(
            std::fs::read_dir(&run)
                .unwrap()
                .filter(|e| {
                    e.as_ref()
                        .unwrap()
                        .file_name()
                        .to_string_lossy()
                        .starts_with("bare_steps")
                })
                .count(),
            1
        );
    }
}

#[test]
fn a_failing_second_bare_run_keeps_the_first_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let trace = fixture("predictions-h200-bare/moe.pt.trace.json.gz");
    let script = format!(
        "if [ -e once ]; then echo second-boom >&2; exit 3; else touch once; {}; fi",
        bare_steps_script(11, 170)
    );
    let r = report(&analyze_with_command(dir.path(), &trace, &script));
    let g = &r["timeline"]["graph_prediction"];
    assert_eq!(g["eager_measured_bare"], true, "{}", r["notes"]);
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("Bare run 2 of 2 failed") && notes.contains("second-boom"),
        "{notes}"
    );
    let run = the_run(dir.path());
    // Each run's log apart: the first's steps next to the second's failure.
    assert!(run.join("bare.log").is_file() && run.join("bare-2.log").is_file());
    assert!(std::fs::read_to_string(run.join("bare-2.log"))
        .unwrap()
        .contains("second-boom"));
    assert!(run.join("bare_steps.jsonl").is_file());
    assert!(!run.join("bare_steps.best.jsonl").exists());
}

#[test]
fn a_report_that_cannot_be_written_is_refused_before_the_program_runs() {
    let dir = tempfile::tempdir().unwrap();
    let trace = fixture("predictions-h200-bare/moe.pt.trace.json.gz");
    let tracer = dir.path().join("libkopt_tracer.so");
    std::fs::write(&tracer, b"stand-in").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .arg("analyze")
        .arg(&trace)
        .args(["-o", "no/such/dir/r.json", "--runs-dir", "runs", "--tracer"])
        .arg(&tracer)
        .args(["--", "/bin/sh", "-c", "touch ran"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(!dir.path().join("ran").exists());
}

/// A trace kept under its workload's name (`moe.trace.jsonl.gz`, as the
/// fixtures and `kopt trace` users keep runs) is read with the
/// `moe.bare_steps.jsonl` beside it: the prediction is the bare run's
/// (fixtures/predictions-h200-bare, an H200), and the input line says so.
/// Copied alone, without the file, the same trace falls back to the
/// tracer's typical cost.
#[test]
fn a_renamed_trace_reads_the_bare_steps_beside_it() {
    let run = |trace: &Path| {
        let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
            .args(["analyze", "--format", "json"])
            .arg(trace)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        report(&o)
    };
    let with = run(&fixture("predictions-h200-bare/moe.trace.jsonl.gz"));
    let graph = |v: &serde_json::Value| v["timeline"]["graph_prediction"].clone();
    assert_eq!(
        graph(&with)["eager_measured_bare"],
        true,
        "{}",
        graph(&with)
    );
    let source = with["sources"][0]["format"].as_str().unwrap().to_string();
    assert!(
        source.contains("bare run's steps from moe.bare_steps.jsonl"),
        "{source}"
    );

    let d = tempfile::tempdir().unwrap();
    let alone = d.path().join("moe.trace.jsonl.gz");
    std::fs::copy(fixture("predictions-h200-bare/moe.trace.jsonl.gz"), &alone).unwrap();
    let without = run(&alone);
    assert_eq!(graph(&without)["eager_measured_bare"], false);
    assert!(!without["sources"][0]["format"]
        .as_str()
        .unwrap()
        .contains("bare run"));
}

/// A kopt trace of a program that marks no steps and never waits for the
/// GPU: 14 forward passes of 25 kernels (a launch call 5 us apart each,
/// kernels of 2 us), 60 us of host work between passes, no sync call.
fn unsynced_trace(dir: &Path) -> PathBuf {
    let mut t = String::from("{\"t\":\"process\",\"pid\":7}\n");
    let mut c = 1u64;
    let mut at = 1_000_000i64;
    for _ in 0..14 {
        for k in 0..25 {
            t.push_str(&format!(
                "{{\"t\":\"api\",\"name\":\"cudaLaunchKernel_v7000\",\"s\":{at},\"e\":{},\"tid\":1,\"c\":{c}}}\n",
                at + 4_000
            ));
            t.push_str(&format!(
                "{{\"t\":\"kernel\",\"name\":\"layer_op_{k}\",\"s\":{},\"e\":{},\"dev\":0,\"str\":7,\"c\":{c},\"g\":[1,1,1],\"b\":[32,1,1],\"reg\":16,\"smem\":0,\"graph\":0}}\n",
                at + 5_000,
                at + 7_000
            ));
            c += 1;
            at += 5_000;
        }
        at += 60_000;
    }
    t.push_str(&format!(
        "{{\"t\":\"end\",\"records\":{},\"dropped\":0,\"lost_buffers\":0}}\n",
        2 * (c - 1)
    ));
    let p = dir.join("trace.jsonl");
    std::fs::write(&p, t).unwrap();
    p
}

#[test]
fn a_program_without_ranges_or_syncs_is_timed_bare_by_its_launch_count() {
    let dir = tempfile::tempdir().unwrap();
    let trace = unsynced_trace(dir.path());
    // The command stands in for the program under the tracer's
    // launch-count mode: CUPTI injection, every 25th launch call timed, one
    // mark a step 120 us apart (the untraced step).
    let mut lines = String::new();
    for i in 0..14i64 {
        lines.push_str(&format!(
            "{{\"t\":\"bare_launch\",\"pid\":9,\"every\":25,\"n\":{},\"e\":{}}}\n",
            25 * i,
            2_000_000_000 + i * 120_000
        ));
    }
    let script = format!(
        "test -n \"$CUDA_INJECTION64_PATH\" && test -z \"$NVTX_INJECTION64_PATH\" \
         && test \"$KOPT_BARE_LAUNCH_EVERY\" = 25 \
         && printf '%s' '{lines}' > \"$KOPT_BARE_SYNCS_OUT\""
    );
    let r = report(&analyze_with_command(dir.path(), &trace, &script));
    let t = &r["timeline"];
    assert_eq!(t["sync_calls"], 0);
    let g = &t["graph_prediction"];
    assert_eq!(g["eager_measured_bare"], true, "{}", r["notes"]);
    let eager = g["eager_corrected_per_step_ns"].as_f64().unwrap();
    assert!((eager - 120_000.0).abs() < 1.0, "{eager}");
    assert!(
        g["speedup"]["model"]
            .as_str()
            .unwrap()
            .contains("kernel launch calls"),
        "{}",
        g["speedup"]["model"]
    );
    let run = the_run(dir.path());
    assert!(run.join("bare_steps.jsonl").is_file());
}

/// A run folder of a real H100 capture (BERT b1, kopt's driver) with the
/// bare-steps file replaced by `lines`: the prediction's eager step.
fn with_bare_lines(lines: &str) -> serde_json::Value {
    with_bare_lines_report(lines)["timeline"]["graph_prediction"].clone()
}

/// The whole report of `with_bare_lines`.
fn with_bare_lines_report(lines: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture("advice-h100/bert_b1_s64_bf16-script/trace.jsonl.gz"),
        dir.path().join("trace.jsonl.gz"),
    )
    .unwrap();
    std::fs::write(dir.path().join("bare_steps.jsonl"), lines).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["analyze", "--format", "json"])
        .arg(dir.path())
        .output()
        .unwrap();
    report(&o)
}

#[test]
fn bare_steps_that_cannot_be_this_programs_are_not_used() {
    let step = |s: i64, e: i64| {
        format!("{{\"t\":\"bare_step\",\"pid\":1,\"name\":\"kopt_step\",\"s\":{s},\"e\":{e}}}\n")
    };
    // Believable: 5 ms steps one after another.
    let real: String = (0..23)
        .map(|i| {
            step(
                1_000_000_000 + i * 5_000_000,
                1_000_000_000 + i * 5_000_000 + 4_900_000,
            )
        })
        .collect();
    assert_eq!(with_bare_lines(&real)["eager_measured_bare"], true);
    // 1 us steps: faster than the GPU's own work in each step.
    let forged: String = (0..23)
        .map(|i| step(1_000_000_000 + i * 1_000, 1_000_000_000 + i * 1_000 + 500))
        .collect();
    let g = with_bare_lines(&forged);
    assert_eq!(g["eager_measured_bare"], false, "{g}");
    // Steps that overlap (60 s long, 5 ms apart) are no loop's steps.
    let overlapping: String = (0..23)
        .map(|i| {
            step(
                1_000_000_000 + i * 5_000_000,
                61_000_000_000 + i * 5_000_000,
            )
        })
        .collect();
    let g = with_bare_lines(&overlapping);
    assert_eq!(g["eager_measured_bare"], false, "{g}");
    // Round seven: unused, they were named in the Input line and said
    // nothing more; now a note says they were not used.
    let r = with_bare_lines_report(&overlapping);
    let notes = r["notes"].to_string();
    assert!(notes.contains("bare run's steps (23 of them"), "{notes}");
    let r = with_bare_lines_report(&real);
    assert!(!r["notes"].to_string().contains("were not used"));
}
