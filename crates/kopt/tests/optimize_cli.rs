//! `kopt optimize` end to end without a GPU: a fake ncu for the baseline,
//! a fake Python for the harness. Candidate choice, verdicts (speed and
//! correctness), failures in one line, the journal, the history.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A .safetensors file of one f32 tensor `out`.
fn safetensors(path: &Path, values: &[f32]) {
    let header = format!(
        "{{\"out\":{{\"dtype\":\"F32\",\"shape\":[{}],\"data_offsets\":[0,{}]}}}}",
        values.len(),
        4 * values.len()
    );
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend(header.as_bytes());
    for v in values {
        bytes.extend(v.to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

fn install(dir: &Path, src: &str, name: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::copy(repo(src), &p).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

const MODULE: &str = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x.topk(2).values\n\ndef get_inputs():\n    return [torch.randn(4, 64)]\n";

fn optimize(dir: &Path, extra: &[&str]) -> Output {
    optimize_env(dir, extra, &[])
}

fn optimize_env(dir: &Path, extra: &[&str], envs: &[(&str, &str)]) -> Output {
    optimize_command(dir, extra, envs).output().unwrap()
}

/// `kopt optimize` of the fake module in `dir` with the fake ncu and
/// Python installed there, not started.
fn optimize_command(dir: &Path, extra: &[&str], envs: &[(&str, &str)]) -> Command {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    install(&bin, "tests/support/fake-ncu.sh", "ncu");
    let python = install(dir, "tests/support/fake-python.sh", "fake-python");
    safetensors(&dir.join("ref.safetensors"), &[1.0, 2.0, 3.0, 4.0]);
    safetensors(&dir.join("bad.safetensors"), &[1.0, 2.0, 3.0, 9.0]);
    safetensors(
        &dir.join("close.safetensors"),
        &[1.001, 2.002, 3.003, 4.004],
    );
    std::fs::write(dir.join("topk.py"), MODULE).unwrap();
    let fixture = |rel: &str| repo("../../fixtures").join(rel);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kopt"));
    cmd.args([
        "optimize", "--script", "topk.py", "--module", "topk", "--python",
    ])
    .arg(&python)
    .args([
        "--runs-dir",
        "runs",
        "--db",
        "h.db",
        "--journal-file",
        "J.md",
        "-q",
    ])
    .args(extra)
    .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
    .env("KOPT_TRACER", "/nonexistent/libkopt_tracer.so")
    .env(
        "FAKE_PASS1",
        fixture("labeled-suite-h200-profile/profile_pass1_timing.csv"),
    )
    .env(
        "FAKE_PASS2",
        fixture("labeled-suite-h200-profile/profile_pass2_targeted.csv"),
    )
    .env("FAKE_PASS3", fixture("labeled-suite-h100/ncu_details.csv"))
    .env("FAKE_REF", dir.join("ref.safetensors"))
    .env("FAKE_BAD", dir.join("bad.safetensors"))
    .env("FAKE_CLOSE_FILE", dir.join("close.safetensors"))
    .env("FAKE_CLOSE", "tf32,bf16_autocast")
    .env("FAKE_SKIP", "sdpa")
    .env("FAKE_WRONG", "compile_max_autotune")
    .env("FAKE_FAILS", "compile_max_autotune_graph")
    .envs(envs.iter().copied())
    .current_dir(dir);
    cmd
}

fn json(o: &Output) -> serde_json::Value {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn candidate<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap()
}

#[test]
fn the_default_budget_leaves_the_autotuned_compile_out_and_says_so() {
    let d = tempfile::tempdir().unwrap();
    let v = json(&optimize(d.path(), &["--candidate", "graph", "-f", "json"]));
    // 120 s by default: the max-autotune compile (expected minutes) does not
    // fit; the form asked for by name is tried whatever it costs.
    let left_out = candidate(&v, "compile_max_autotune");
    assert_eq!(left_out["tried"], false);
    let why = left_out["reason"].as_str().unwrap();
    assert!(why.starts_with("left out to fit the budget"), "{why}");
    assert_eq!(candidate(&v, "graph")["tried"], true);
    let o = optimize(d.path(), &["--budget", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("`none`"));
}

#[test]
fn impossible_harness_samples_give_no_verdict() {
    // A negative step (a tampered or broken harness result): no KEEP of
    // -20000x recorded, an error that says which sample.
    let d = tempfile::tempdir().unwrap();
    let o = optimize_env(
        d.path(),
        &["--candidate", "graph", "-f", "json"],
        &[("FAKE_TIMES", "graph=-5")],
    );
    assert_ne!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("of 'graph' is -5"), "{err}");
    let journal = std::fs::read_to_string(d.path().join("J.md")).unwrap_or_default();
    assert!(!journal.contains("KEEP"), "{journal}");
}

#[test]
fn candidates_are_checked_measured_and_decided() {
    let d = tempfile::tempdir().unwrap();
    let v = json(&optimize(
        d.path(),
        &[
            "--candidate",
            "graph",
            "--candidate",
            "compile-max-autotune-graph",
            "--budget",
            "none",
            "-f",
            "json",
        ],
    ));
    // The labeled suite's counters: kernels set the pace, so the diagnosis
    // alone picks only the autotuned compile; the graph forms are forced.
    let graph = candidate(&v, "graph");
    assert!(graph["reason"].as_str().unwrap().starts_with("asked for"));
    assert_eq!(graph["verdict"]["kind"], "KEEP");
    assert_eq!(graph["correctness"]["passed"], true);
    let s = graph["measured_speedup"].as_f64().unwrap();
    assert!((4.5..5.5).contains(&s), "{s}");
    // Fast but wrong: REVERT, the failing tensor named.
    let wrong = candidate(&v, "compile_max_autotune");
    assert_eq!(wrong["tried"], true);
    assert_eq!(wrong["correctness"]["passed"], false);
    assert_eq!(wrong["verdict"]["kind"], "REVERT");
    // Failed to capture: REVERT with the error in one line, the run went on.
    let failed = candidate(&v, "compile_max_autotune_graph");
    assert_eq!(failed["failure"]["phase"], "capture");
    assert_eq!(failed["verdict"]["kind"], "REVERT");
    // Not asked for and no reason in the diagnosis: skipped, with the reason.
    let skipped = candidate(&v, "compile_reduce_overhead");
    assert_eq!(skipped["tried"], false);
    assert!(skipped["verdict"].is_null());
    assert_eq!(v["best"], "graph");
    // No tracer here: the kept result is not profiled, and the report says so.
    let kept = &v["kept_profile"];
    assert_eq!(kept["variant"], "graph");
    assert!(kept["kept"].is_null());
    let why = kept["error"].as_str().unwrap();
    assert!(
        why.contains("the kept result (graph) could not be traced") && why.contains("tracer"),
        "{why}"
    );
    let ablation: Vec<&str> = v["ablation"]["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    assert_eq!(ablation, ["eager", "graph", "compile_max_autotune"]);
    // One journal entry per candidate tried, each with its verdict.
    let journal = std::fs::read_to_string(d.path().join("J.md")).unwrap();
    assert_eq!(journal.matches("\n## ").count(), 3, "{journal}");
    assert!(journal.contains("**Verdict:** KEEP") && journal.contains("could not capture"));
    // The run folder keeps the report; the history has the run, readable.
    let run_dir = PathBuf::from(d.path()).join(v["run_dir"].as_str().unwrap());
    assert!(run_dir.join("optimize.json").is_file());
    assert!(run_dir.join("baseline/run.json").is_file());
    let show = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["history", "--db", "h.db", "show", "2"])
        .current_dir(d.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains("(optimize)") && text.contains("Best: graph"),
        "{text}"
    );
}

const MODEL_LEVEL: [&str; 12] = [
    "--candidate",
    "graph",
    "--candidate",
    "channels-last",
    "--candidate",
    "tf32",
    "--candidate",
    "sdpa",
    "--candidate",
    "cudnn-benchmark",
    "-f",
    "json",
];

fn verdict(v: &serde_json::Value, name: &str) -> String {
    candidate(v, name)["verdict"]["kind"]
        .as_str()
        .unwrap_or("-")
        .to_string()
}

#[test]
fn model_level_candidates_are_applied_stacked_and_journaled() {
    let d = tempfile::tempdir().unwrap();
    let v = json(&optimize(d.path(), &MODEL_LEVEL));
    // channels_last: other kernels, same precision, output unchanged: KEEP.
    let cl = candidate(&v, "channels_last");
    assert_eq!(verdict(&v, "channels_last"), "KEEP");
    assert_eq!(cl["changes_numerics"], false);
    assert!(cl["tolerance"].as_str().unwrap().contains("same precision"));
    // The model has no attention switch: not tried, the harness's reason said.
    let sdpa = candidate(&v, "sdpa");
    assert_eq!(sdpa["tried"], false);
    assert!(sdpa["reason"]
        .as_str()
        .unwrap()
        .starts_with("not applicable: fake"));
    assert!(sdpa["verdict"].is_null());
    // 10% slower: never kept.
    assert_eq!(verdict(&v, "cudnn_benchmark"), "REVERT");
    // TF32 moves the outputs by 1e-3 (within its tolerance) and runs 2x
    // faster, but changes numerics: not kept without --allow-precision.
    let tf32 = candidate(&v, "tf32");
    assert_eq!(tf32["correctness"]["passed"], true);
    assert_eq!(tf32["changes_numerics"], true);
    assert_eq!(verdict(&v, "tf32"), "REVERT");
    let why = tf32["verdict"]["reason"].as_str().unwrap();
    assert!(
        why.starts_with("faster by 2.0") && why.contains("needs --allow-precision"),
        "{why}"
    );
    // The kept singles stacked, best first: graph (5x) + channels_last (1.4x).
    let stack = candidate(&v, "graph+channels_last");
    assert_eq!(
        stack["parts"],
        serde_json::json!(["graph", "channels_last"])
    );
    assert_eq!(stack["verdict"]["kind"], "KEEP");
    let s = stack["measured_speedup"].as_f64().unwrap();
    assert!((6.5..7.8).contains(&s), "{s}");
    assert_eq!(v["best"], "graph+channels_last");
    assert_eq!(v["allow_precision"], false);
    // Kept changes land in the journal with the line a user would write.
    let journal = std::fs::read_to_string(d.path().join("J.md")).unwrap();
    assert!(
        journal.contains("**Change:** `model = model.to(memory_format=torch.channels_last)`"),
        "{journal}"
    );
    assert!(journal.contains("needs --allow-precision"), "{journal}");
    // A reverted candidate carries no change to make.
    let tf32_entry = journal
        .split("\n## ")
        .find(|e| e.contains(": tf32 for topk"))
        .unwrap();
    assert!(!tf32_entry.contains("**Change:**"), "{tf32_entry}");
}

#[test]
fn allow_precision_keeps_tf32_and_stacks_it() {
    let d = tempfile::tempdir().unwrap();
    let mut args = MODEL_LEVEL.to_vec();
    args.push("--allow-precision");
    let v = json(&optimize(d.path(), &args));
    assert_eq!(verdict(&v, "tf32"), "KEEP");
    assert_eq!(v["allow_precision"], true);
    // graph 5x, tf32 2x, channels_last 1.43x: stacked in that order.
    assert_eq!(verdict(&v, "graph+tf32"), "KEEP");
    assert_eq!(v["best"], "graph+tf32+channels_last");
    let by_hand = candidate(&v, "graph+tf32+channels_last")["by_hand"]
        .as_array()
        .unwrap()
        .len();
    assert!(by_hand >= 4, "{by_hand}");
    // The same outputs off by 1e-3 fail a candidate that should not move them.
    let d = tempfile::tempdir().unwrap();
    let o = optimize(
        d.path(),
        &[
            "--candidate",
            "channels-last",
            "-f",
            "json",
            "--allow-precision",
        ],
    );
    let v = json(&o);
    assert_eq!(verdict(&v, "channels_last"), "KEEP");
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args([
            "optimize",
            "--script",
            "x.py",
            "--candidate",
            "tf32",
            "--skip",
            "tf32",
        ])
        .current_dir(d.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("contradict"));
}

#[test]
fn the_markdown_report_has_the_table_and_the_ablation() {
    let d = tempfile::tempdir().unwrap();
    let o = optimize(
        d.path(),
        &["--candidate", "graph", "-f", "md", "--no-journal"],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let md = String::from_utf8_lossy(&o.stdout);
    assert!(
        md.contains("| Candidate | Tried | Predicted | Measured |"),
        "{md}"
    );
    assert!(
        md.contains("| Version | Median |") && md.contains("| eager |"),
        "{md}"
    );
    assert!(!d.path().join("J.md").exists());
}

/// A stand-in tracer library: the fake Python writes the trace itself.
fn fake_tracer(dir: &Path) -> String {
    let p = dir.join("libkopt_tracer.so");
    std::fs::write(&p, b"").unwrap();
    p.display().to_string()
}

fn kernel_row<'a>(p: &'a serde_json::Value, part: &str) -> &'a serde_json::Value {
    p["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"].as_str().unwrap().contains(part))
        .unwrap_or_else(|| panic!("{part}: {p}"))
}

#[test]
fn the_kept_result_is_traced_with_its_graph_replayed_kernels_by_name() {
    let d = tempfile::tempdir().unwrap();
    let tracer = fake_tracer(d.path());
    let v = json(&optimize(
        d.path(),
        &[
            "--tracer",
            &tracer,
            "--candidate",
            "graph",
            "--no-counters",
            "-f",
            "json",
        ],
    ));
    assert_eq!(v["best"], "graph");
    let k = &v["kept_profile"];
    assert_eq!(k["variant"], "graph");
    assert!(k["error"].is_null(), "{k}");
    let (eager, kept) = (&k["eager"], &k["kept"]);
    // Eager: four kernels a step, each its own launch call.
    assert_eq!(eager["launches_per_step"], 4.0);
    assert_eq!(eager["graph_launches_per_step"], 0.0);
    // Kept: the same four kernels replayed from one graph launch a step,
    // each listed by name with its own time, counted as graph nodes.
    assert_eq!(kept["launches_per_step"], 1.0);
    assert_eq!(kept["graph_launches_per_step"], 1.0);
    assert_eq!(kept["kernels_per_step"], 4.0);
    let steps = kept["steps"].as_u64().unwrap();
    assert!(steps >= 10, "{kept}");
    for (part, ns) in [
        ("gemm", 40_000.0),
        ("GeluCUDAKernelImpl", 10_000.0),
        ("splitKreduce_kernel", 8_000.0),
        ("vectorized_layer_norm_kernel", 12_000.0),
    ] {
        let row = kernel_row(kept, part);
        assert_eq!(row["ns_per_step"], ns, "{part}");
        assert_eq!(row["launches_per_step"], 1.0, "{part}");
        assert_eq!(row["in_graph"], steps, "{part}");
        assert_eq!(kernel_row(eager, part)["in_graph"], 0, "{part}");
    }
    let pct = kernel_row(kept, "gemm")["pct"].as_f64().unwrap();
    assert!((pct - 400.0 / 7.0).abs() < 1e-9, "{pct}");
    let (es, ks) = (
        eager["step_ns"].as_f64().unwrap(),
        kept["step_ns"].as_f64().unwrap(),
    );
    assert!(ks < es, "kept {ks} vs eager {es}");
    // Its run folder holds the trace; the report in the run folder has it too.
    let run = d.path().join(kept["run_dir"].as_str().unwrap());
    assert!(run.join("trace.jsonl").is_file() && run.ends_with("kept"));
    let saved: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            d.path()
                .join(v["run_dir"].as_str().unwrap())
                .join("optimize.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(saved["kept_profile"], v["kept_profile"]);
    // Every format shows it: terminal and Markdown (HTML renders the Markdown).
    for (fmt, header) in [("term", "time/step"), ("md", "| Kernel | Time/step |")] {
        let d = tempfile::tempdir().unwrap();
        let tracer = fake_tracer(d.path());
        let o = optimize(
            d.path(),
            &[
                "--tracer",
                &tracer,
                "--candidate",
                "graph",
                "--no-counters",
                "-f",
                fmt,
            ],
        );
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            text.contains("Where the time went after the change (graph traced")
                && text.contains(header)
                && text.contains("1 (1 graph)")
                && text.contains("vectorized_layer_norm_kernel")
                && text.contains("splitKreduce_kernel"),
            "{fmt}: {text}"
        );
    }
}

#[test]
fn a_kept_result_that_fails_under_the_tracer_is_said_and_the_verdicts_stand() {
    let d = tempfile::tempdir().unwrap();
    let tracer = fake_tracer(d.path());
    let o = optimize_env(
        d.path(),
        &[
            "--tracer",
            &tracer,
            "--candidate",
            "graph",
            "--no-counters",
            "-f",
            "json",
        ],
        &[("FAKE_KEPT_FAILS", "1")],
    );
    let v = json(&o);
    assert_eq!(v["best"], "graph");
    let k = &v["kept_profile"];
    assert!(k["kept"].is_null());
    assert_eq!(k["eager"]["launches_per_step"], 4.0);
    let why = k["error"].as_str().unwrap();
    assert!(
        why.starts_with("the kept result (graph) could not be traced: ") && !why.contains('\n'),
        "{why}"
    );
    // --no-profile-kept: not traced, nothing said.
    let d = tempfile::tempdir().unwrap();
    let tracer = fake_tracer(d.path());
    let v = json(&optimize(
        d.path(),
        &[
            "--tracer",
            &tracer,
            "--candidate",
            "graph",
            "--no-counters",
            "--no-profile-kept",
            "-f",
            "json",
        ],
    ));
    assert_eq!(v["best"], "graph");
    assert!(v.get("kept_profile").is_none(), "{v}");
}

#[test]
fn a_script_without_the_module_convention_is_a_usage_error() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("plain.py"), "print(1)\n").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args([
            "optimize",
            "--script",
            "plain.py",
            "--runs-dir",
            "runs",
            "--db",
            "h.db",
        ])
        .current_dir(d.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("kopt: error: ") && err.contains("get_inputs()"),
        "{err}"
    );
    // A refused script is never copied: no run folder (a fifth hostile
    // round found a 3 GB sparse file written out whole, and /etc/passwd
    // behind a link copied, before the refusal).
    assert!(!d.path().join("runs").exists(), "a run folder was left");
    std::os::unix::fs::symlink("/etc/passwd", d.path().join("link.py")).unwrap();
    let big = std::fs::File::create(d.path().join("big.py")).unwrap();
    big.set_len(64 << 20).unwrap();
    std::os::unix::fs::symlink("/dev/zero", d.path().join("zero.py")).unwrap();
    for (script, expected) in [
        ("link.py", "needs a module script"),
        ("big.py", "larger than"),
        ("zero.py", "not a regular file"),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
            .args(["optimize", "--script", script, "--runs-dir", "runs"])
            .current_dir(d.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(expected), "{script}: {err}");
        assert!(
            !d.path().join("runs").exists(),
            "{script}: a run folder was left"
        );
    }
}

#[test]
fn a_candidate_that_breaks_cuda_state_fails_and_the_rest_are_judged() {
    // #37: graph capture failed on a step with a host sync and left CUDA's
    // state broken, so the next get_inputs() raised and no candidate got a
    // verdict. The harness now asks for a fresh process without it.
    let d = tempfile::tempdir().unwrap();
    let o = optimize_env(
        d.path(),
        &[
            "--candidate",
            "graph",
            "--candidate",
            "tf32",
            "--candidate",
            "compile",
            "--format",
            "json",
        ],
        &[("FAKE_BREAKS", "graph")],
    );
    let v = json(&o);
    // A candidate that failed is REVERT with its failure: phase and reason.
    let graph = candidate(&v, "graph");
    assert_eq!(graph["verdict"]["kind"], "REVERT", "{graph}");
    assert_eq!(graph["failure"]["phase"], "capture", "{graph}");
    let why = graph["failure"]["error"].as_str().unwrap();
    assert!(why.contains("left CUDA's state broken"), "{graph}");
    for name in ["tf32", "compile"] {
        let c = candidate(&v, name);
        assert!(c["failure"].is_null(), "{c}");
        assert!(c["measured_speedup"].as_f64().unwrap() > 1.0, "{c}");
    }
    assert!(v["best"].is_string(), "{v}");
    // The second process's log beside the first's.
    let runs = d.path().join("runs");
    let run = std::fs::read_dir(&runs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert!(run.join("candidates/harness-2.log").exists());
}

/// The singles' run folder (`runs/<id>`) of an optimize run in `dir`.
fn run_folder(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir.join("runs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
}

/// #37: a harness that never finishes is stopped at --timeout, and the
/// samples its last checkpoint holds are judged: verdicts, not an error.
#[test]
fn a_harness_stopped_at_its_timeout_keeps_the_verdicts_so_far() {
    let d = tempfile::tempdir().unwrap();
    let o = optimize_env(
        d.path(),
        &[
            "--candidate",
            "tf32",
            "--candidate",
            "graph",
            "--timeout",
            "4",
            "--format",
            "json",
        ],
        &[("FAKE_HANGS", "1")],
    );
    let v = json(&o);
    assert!(
        candidate(&v, "graph")["measured_speedup"].as_f64().unwrap() > 3.0,
        "{v}"
    );
    let notes = v["baseline"]["notes"].to_string();
    assert!(
        notes.contains("stopped at --timeout after 40 timing round(s)"),
        "{notes}"
    );
    assert!(run_folder(d.path()).join("optimize.json").is_file());
}

/// #37: SIGTERM to kopt (a kill, Ctrl-C) while the candidates are timed
/// leaves the verdicts measured so far on disk: optimize.json and the
/// history row.
/// The optimize.json a stopped run left in `run`: graph capture judged
/// from the samples so far (over 3x); the baseline's notes.
fn graph_kept_notes(run: &Path) -> String {
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("optimize.json")).unwrap()).unwrap();
    assert!(
        candidate(&report, "graph")["measured_speedup"]
            .as_f64()
            .unwrap()
            > 3.0,
        "{report}"
    );
    report["baseline"]["notes"].to_string()
}

/// `kopt optimize` of tf32 and graph whose fake harness hangs after its
/// first checkpoint: the child and the checkpoint, once it is written.
// The child is returned: its caller signals and waits for it.
#[allow(clippy::zombie_processes)]
fn optimize_until_checkpoint(dir: &Path) -> (std::process::Child, PathBuf) {
    let mut child = optimize_command(
        dir,
        &["--candidate", "tf32", "--candidate", "graph"],
        &[("FAKE_HANGS", "1")],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let start = std::time::Instant::now();
    loop {
        let found = std::fs::read_dir(dir.join("runs"))
            .ok()
            .and_then(|mut r| r.next())
            .and_then(|e| e.ok())
            .map(|e| e.path().join("candidates/result.json"))
            .filter(|p| p.is_file());
        if let Some(p) = found {
            return (child, p);
        }
        if start.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the harness wrote no checkpoint");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_stopped_optimize_writes_the_verdicts_measured_so_far() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let (mut child, checkpoint) = optimize_until_checkpoint(dir);
    // The checkpoint is written before the fake harness starts sleeping.
    std::thread::sleep(std::time::Duration::from_millis(300));
    // SAFETY: a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status:?}");
    let run = checkpoint.parent().unwrap().parent().unwrap();
    let notes = graph_kept_notes(run);
    assert!(notes.contains("stopped by kopt"), "{notes}");
    assert!(notes.contains("The run was stopped"), "{notes}");
    let h = kopt_store::History::open(&dir.join("h.db")).unwrap();
    assert_eq!(h.list(5).unwrap()[0].kind, "optimize");
}

#[test]
fn a_killed_optimize_is_concluded_from_what_its_harness_measured() {
    // SIGKILL leaves no verdicts, only the harness's checkpoint; `kopt
    // optimize --conclude RUN_DIR` judges and records it afterwards.
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let (mut child, checkpoint) = optimize_until_checkpoint(dir);
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let run = checkpoint.parent().unwrap().parent().unwrap().to_path_buf();
    assert!(!run.join("optimize.json").exists());
    let conclude = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_kopt"))
            .args(["optimize", "--conclude"])
            .arg(&run)
            .args(["--db", "h.db", "--journal-file", "J.md", "-q", "-f", "json"])
            .args(extra)
            .current_dir(dir)
            .output()
            .unwrap()
    };
    let o = conclude(&[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let notes = graph_kept_notes(&run);
    assert!(notes.contains("cut short (the run was killed)"), "{notes}");
    let h = kopt_store::History::open(&dir.join("h.db")).unwrap();
    assert_eq!(h.list(5).unwrap()[0].kind, "optimize");
    // Concluded once: a second time is refused, nothing recorded twice.
    let again = conclude(&[]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already written"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let optimize_rows = |h: &kopt_store::History| {
        h.list(10)
            .unwrap()
            .iter()
            .filter(|r| r.kind == "optimize")
            .count()
    };
    assert_eq!(optimize_rows(&h), 1);
    // A folder that is no optimize run is refused by name.
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["optimize", "--conclude"])
        .arg(dir)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not a kopt optimize run folder"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
