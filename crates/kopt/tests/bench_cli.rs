//! `kopt bench` in wall-time and self-reported modes, on commands whose
//! durations are known.

use std::process::{Command, Output};

fn bench(dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kopt"))
        .arg("bench")
        .args([
            "--min-samples",
            "5",
            "--min-time",
            "0.2",
            "--max-time",
            "1.5",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// The JSON report of a run that must have succeeded.
fn json_report(o: &Output) -> serde_json::Value {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn wall_time_keep_and_revert() {
    let d = tempfile::tempdir().unwrap();
    let o = bench(
        d.path(),
        &[
            "--baseline",
            "sleep 0.06",
            "--candidate",
            "sleep 0.03",
            "--format",
            "json",
        ],
    );
    let v = json_report(&o);
    assert_eq!(v["variants"][1]["verdict"]["kind"], "KEEP");
    assert_eq!(v["variants"][1]["source"], "wall time of the whole process");
    let speedup = v["variants"][1]["speedup_vs_first"].as_f64().unwrap();
    assert!(speedup > 1.3 && speedup < 2.2, "{speedup}");

    let o = bench(
        d.path(),
        &["-n", "fast=sleep 0.03", "-n", "slow=sleep 0.05"],
    );
    assert_eq!(
        o.status.code(),
        Some(3),
        "REVERT exits 3: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    // Both verdicts are in the history.
    let h = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .arg("history")
        .current_dir(d.path())
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&h.stdout);
    assert!(
        list.contains("candidate: KEEP") && list.contains("slow: REVERT"),
        "{list}"
    );
}

#[test]
fn self_reported_samples_win_over_wall_time() {
    let d = tempfile::tempdir().unwrap();
    let emit = |ns: u32| {
        format!("for i in 0 1 2 3 4 5 6 7 8 9; do echo '{{\"kopt_sample_ns\": {ns}'$i'}}'; done")
    };
    let o = bench(
        d.path(),
        &[
            "--baseline",
            &emit(1000),
            "--candidate",
            &emit(1000),
            "--format",
            "json",
        ],
    );
    let v = json_report(&o);
    assert_eq!(v["variants"][0]["source"], "self-reported samples");
    assert_eq!(v["variants"][1]["verdict"]["kind"], "MARGINAL");
    let median = v["variants"][0]["median_s"].as_f64().unwrap();
    assert!((median - 10_004.5e-9).abs() < 1e-9, "{median}");

    // The samples are found the same way with and without a tracer library
    // (with one, here a stand-in, in the traced probe run; without, in a plain run).
    let stand_in = d.path().join("libkopt_tracer.so");
    std::fs::write(&stand_in, b"stand-in").unwrap();
    for tracer in [
        stand_in,
        std::path::PathBuf::from("/nonexistent/libkopt_tracer.so"),
    ] {
        let o = bench(
            d.path(),
            &[
                "--tracer",
                tracer.to_str().unwrap(),
                "--baseline",
                &emit(1000),
                "--candidate",
                &emit(1000),
                "--format",
                "json",
            ],
        );
        let v = json_report(&o);
        assert_eq!(
            v["variants"][0]["source"], "self-reported samples",
            "{tracer:?}"
        );
    }
}

#[test]
fn failures_and_usage() {
    let d = tempfile::tempdir().unwrap();
    let o = bench(d.path(), &["--baseline", "true", "--candidate", "exit 7"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("`exit 7` failed"));
    assert_eq!(bench(d.path(), &["-n", "only=true"]).status.code(), Some(2));
    assert_eq!(bench(d.path(), &["-n", "noequals"]).status.code(), Some(2));
}

#[test]
fn check_gate_turns_a_fast_wrong_candidate_into_revert_and_the_journal_records_it() {
    let d = tempfile::tempdir().unwrap();
    let vals: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let bad: Vec<u8> = [1.0f32, f32::NAN, 3.0, 4.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    std::fs::write(
        d.path().join("good.npy"),
        kopt_ingest::tensor::npy_bytes("<f4", &[4], &vals),
    )
    .unwrap();
    std::fs::write(
        d.path().join("bad.npy"),
        kopt_ingest::tensor::npy_bytes("<f4", &[4], &bad),
    )
    .unwrap();
    let o = bench(
        d.path(),
        &[
            "--baseline",
            "sleep 0.05; cp good.npy out.npy",
            "--candidate",
            "cp bad.npy out.npy",
            "--check",
            "out.npy",
            "--journal",
            "skip the slow path",
            "--format",
            "json",
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["variants"][1]["correct"], false);
    assert_eq!(v["variants"][1]["verdict"]["kind"], "REVERT");
    let journal = std::fs::read_to_string(d.path().join("OPTIMIZATIONS.md")).unwrap();
    assert!(
        journal.contains(": skip the slow path") && journal.contains("- **Verdict:** REVERT"),
        "{journal}"
    );
}

#[test]
fn html_page_with_distributions() {
    let d = tempfile::tempdir().unwrap();
    let o = bench(
        d.path(),
        &[
            "-n",
            "base=sleep 0.04",
            "-n",
            "faster=sleep 0.02",
            "--format",
            "html",
            "-o",
            "ab.html",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(d.path().join("ab.html")).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert_eq!(page.matches("<g class=\"box\">").count(), 2);
    assert!(page.contains("class=\"v-KEEP\""));
    assert!(!page.to_ascii_lowercase().contains("<script"));
}

/// A kopt trace of `steps` NVTX `step` ranges whose kernels span `span_ns` each
/// (two kernels with a launch gap between them).
fn ranged_trace(steps: u64, span_ns: u64) -> String {
    let mut s = String::from(
        "{\"t\":\"device\",\"id\":0,\"name\":\"NVIDIA H200\",\"sms\":132,\"cc\":[9,0]}\n",
    );
    for i in 0..steps {
        let t0 = 1_000_000 + i * 1_000_000;
        let (c1, c2) = (10 * i + 1, 10 * i + 2);
        s += &format!("{{\"t\":\"range_start\",\"id\":{i},\"s\":{t0},\"tid\":1,\"name\":\"step\",\"dom\":\"\"}}\n");
        s += &format!("{{\"t\":\"api\",\"name\":\"cuLaunchKernel\",\"s\":{},\"e\":{},\"tid\":1,\"c\":{c1}}}\n", t0 + 10, t0 + 15);
        s += &format!("{{\"t\":\"api\",\"name\":\"cuLaunchKernel\",\"s\":{},\"e\":{},\"tid\":1,\"c\":{c2}}}\n", t0 + 20, t0 + 25);
        s += &format!("{{\"t\":\"range_end\",\"id\":{i},\"s\":{}}}\n", t0 + 30);
        // Kernels run after the range closed (asynchronous launches).
        let k = t0 + 100 + i % 3;
        s += &format!("{{\"t\":\"kernel\",\"name\":\"k1\",\"s\":{k},\"e\":{},\"dev\":0,\"str\":7,\"c\":{c1}}}\n", k + span_ns / 4);
        s += &format!("{{\"t\":\"kernel\",\"name\":\"k2\",\"s\":{},\"e\":{},\"dev\":0,\"str\":7,\"c\":{c2}}}\n", k + span_ns / 2, k + span_ns);
    }
    s + "{\"t\":\"end\",\"records\":0,\"dropped\":0}\n"
}

#[test]
fn gpu_time_per_nvtx_range_from_the_tracer() {
    // No GPU here: the "workload" writes a recorded-style trace where the
    // tracer would ($KOPT_TRACE_OUT), so the whole tracer path runs.
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("base.jsonl"), ranged_trace(6, 100_000)).unwrap();
    std::fs::write(d.path().join("new.jsonl"), ranged_trace(6, 80_000)).unwrap();
    let fake_tracer = d.path().join("libkopt_tracer.so");
    std::fs::write(&fake_tracer, b"").unwrap();
    let tracer = fake_tracer.to_str().unwrap();
    let o = bench(
        d.path(),
        &[
            "--tracer",
            tracer,
            "--baseline",
            "cat base.jsonl > \"$KOPT_TRACE_OUT\"",
            "--candidate",
            "cat new.jsonl > \"$KOPT_TRACE_OUT\"",
            "--format",
            "json",
        ],
    );
    let v = json_report(&o);
    let source = v["variants"][0]["source"].as_str().unwrap();
    assert!(
        source.starts_with("GPU time per iteration") && source.contains("`step`"),
        "{source}"
    );
    // The first of each run's 6 ranges is warm-up: 5 samples per run.
    assert_eq!(v["variants"][0]["samples"].as_u64().unwrap() % 5, 0);
    let base = v["variants"][0]["median_s"].as_f64().unwrap();
    assert!(
        (base - 100_000e-9).abs() < 1e-12,
        "span, gap included: {base}"
    );
    assert_eq!(v["variants"][1]["verdict"]["kind"], "KEEP");
    let speedup = v["variants"][1]["speedup_vs_first"].as_f64().unwrap();
    assert!((speedup - 1.25).abs() < 1e-9, "{speedup}");
    // The history names the GPU the tracer saw.
    let h = std::process::Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["history", "show", "1"])
        .current_dir(d.path())
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&h.stdout);
    assert!(shown.contains("device: NVIDIA H200"), "{shown}");

    // Asked for a range the program never opens: a clear error.
    let o = bench(
        d.path(),
        &[
            "--tracer",
            tracer,
            "--timing",
            "gpu",
            "--range",
            "decode",
            "--baseline",
            "cat base.jsonl > \"$KOPT_TRACE_OUT\"",
            "--candidate",
            "cat new.jsonl > \"$KOPT_TRACE_OUT\"",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("fewer than two `decode` ranges"));

    // A program that never uses CUDA under --timing gpu.
    let o = bench(
        d.path(),
        &[
            "--tracer",
            tracer,
            "--timing",
            "gpu",
            "--baseline",
            "true",
            "--candidate",
            "true",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("gave no GPU samples"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // A workload that fails under the tracer: its exit code, its last line,
    // and a log that is still there to read.
    let o = bench(
        d.path(),
        &[
            "--tracer",
            tracer,
            "--timing",
            "gpu",
            "--baseline",
            "echo boom >&2; exit 4",
            "--candidate",
            "true",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        err.contains("exited with code 4") && err.contains("boom"),
        "{err}"
    );
    let log = err
        .split("full log: ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .expect("the error names the log");
    assert!(std::path::Path::new(log).is_file(), "{log}");
    std::fs::remove_dir_all(std::path::Path::new(log).parent().unwrap()).ok();
    // --timing reported on a command that prints no samples.
    let o = bench(
        d.path(),
        &[
            "--timing",
            "reported",
            "--baseline",
            "true",
            "--candidate",
            "true",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("printed no"));
}

#[test]
fn a_program_taking_7_s_to_start_gets_a_verdict_with_default_flags() {
    // --max-time (10 s) counts from the first sample (#26): before, the
    // 7 s warm-up left 3 s for a 7 s first run, which was cut ("gave no
    // sample"). The program is slow in its first two runs (start-up
    // caches), fast after, so the test takes about 30 s, not minutes.
    let d = tempfile::tempdir().unwrap();
    let script = |name: &str| {
        let count = d.path().join(format!("{name}.runs"));
        format!(
            "sh -c 'n=$(cat {c} 2>/dev/null || echo 0); echo $((n+1)) > {c}; if [ $n -lt 2 ]; then sleep 7; else sleep 0.02; fi'",
            c = count.display()
        )
    };
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args([
            "bench",
            "--baseline",
            &script("a"),
            "--candidate",
            &script("b"),
            "--format",
            "json",
        ])
        .current_dir(d.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        matches!(o.status.code(), Some(0 | 3)),
        "exit {:?}: {stderr}",
        o.status.code()
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["variants"][1]["verdict"]["kind"].is_string(), "{v}");
}
