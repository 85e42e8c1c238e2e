//! `kopt profile --backend rocprof` against a fake rocprofv3
//! (tests/support/fake-rocprofv3.sh; no AMD GPU in CI). The fake replays the
//! rocprofv3 documentation's real kernel trace (fixtures/amd/rocprofv3-docs/)
//! and writes counter-collection CSV in rocprofv3's real column layout with
//! made-up values; the agent is the synthetic MI300X agent_info.csv.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "support/skip.rs"]
mod skip;

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new(tools: &[(&str, &str)]) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        for (name, script) in tools {
            let p = bin.join(name);
            std::fs::write(&p, script).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        Env { dir }
    }

    fn with_rocprof() -> Env {
        let fake = std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/fake-rocprofv3.sh"),
        )
        .unwrap();
        Env::new(&[("rocprofv3", &fake)])
    }

    fn args_log(&self) -> PathBuf {
        self.dir.path().join("rocprof-args.log")
    }

    fn kopt(&self, args: &[&str], mode: &str) -> Output {
        let path = format!("{}:/usr/bin:/bin", self.dir.path().join("bin").display());
        Command::new(env!("CARGO_BIN_EXE_kopt"))
            .args(args)
            .env("PATH", path)
            .env("KOPT_TRACER", "/nonexistent/libkopt_tracer.so")
            .env("FAKE_ROC_MODE", mode)
            .env(
                "FAKE_ROC_TRACE",
                fixture("amd/rocprofv3-docs/kernel_trace.csv"),
            )
            .env(
                "FAKE_ROC_AGENT",
                fixture("amd/synthetic-rocprofv3-moe-route/agent_info.csv"),
            )
            .env("FAKE_ROC_ARGS_LOG", self.args_log())
            .current_dir(self.dir.path())
            .output()
            .unwrap()
    }

    fn only_run_dir(&self) -> PathBuf {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(self.dir.path().join("runs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(dirs.len(), 1, "{dirs:?}");
        dirs.pop().unwrap()
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn profile(env: &Env, extra: &[&str], mode: &str) -> Output {
    let mut args = vec!["profile", "--runs-dir", "runs", "--db", "history.db"];
    args.extend_from_slice(extra);
    args.extend([
        "--format",
        "json",
        "--",
        "/bin/echo",
        "hello from the workload",
    ]);
    env.kopt(&args, mode)
}

fn assert_rocprof_run(env: &Env, o: &Output) {
    assert!(o.status.success(), "{}", stderr(o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["schema"], "kopt/1");
    assert_eq!(report["device"]["name"], "AMD Instinct MI300X");
    // The docs' trace: 9 dispatches of four kernels.
    let kernels = report["kernels"].as_array().unwrap();
    assert_eq!(kernels.len(), 4, "{kernels:?}");
    let launches: u64 = kernels
        .iter()
        .map(|k| k["launches"].as_u64().unwrap())
        .sum();
    assert_eq!(launches, 9);
    assert!(stderr(o).contains("hello from the workload"));

    // Pass 1 traced, then one run per counter group, restricted to the kernels
    // that carry the time, with every counter of kopt's groups.
    let log = std::fs::read_to_string(env.args_log()).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    let groups = kopt_collect::rocprof::counter_groups(Some("gfx942"));
    assert_eq!(lines.len(), 1 + groups.len(), "{log}");
    assert_eq!(lines[0], "trace /bin/echo hello from the workload");
    for (line, group) in lines[1..].iter().zip(&groups) {
        let (counters, rest) = line.split_once(" | ").unwrap();
        assert_eq!(counters, format!("pmc {}", group.join(" ")));
        assert!(
            rest.contains("addition_kernel") && rest.contains("divide_kernel"),
            "{rest}"
        );
        assert!(
            rest.ends_with("| /bin/echo hello from the workload"),
            "{rest}"
        );
    }

    let dir = env.only_run_dir();
    for f in [
        "run.json",
        "report.json",
        "pass1-trace_kernel_trace.csv",
        "pass1-trace_agent_info.csv",
        "pass1-trace.log",
        "pass2-counters_counter_collection.csv",
        "pass5-counters_counter_collection.csv",
    ] {
        assert!(dir.join(f).exists(), "{f} missing in {}", dir.display());
    }
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(rec["status"], "ok");
    assert_eq!(rec["passes"].as_array().unwrap().len(), 1 + groups.len());
    assert_eq!(rec["profiler"], "rocprofv3");
    assert!(rec["profiler_path"]
        .as_str()
        .unwrap()
        .ends_with("/bin/rocprofv3"));
    assert!(rec["profiler_version"]
        .as_str()
        .unwrap()
        .contains("rocprofv3"));
    assert!(rec.get("ncu").is_none() && rec.get("ncu_version").is_none());
    assert!(rec["passes"][1]["command"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a == "--kernel-include-regex"));
}

#[test]
fn rocprof_backend_traces_then_counts_the_hot_kernels() {
    let env = Env::with_rocprof();
    let o = profile(&env, &["--backend", "rocprof"], "");
    assert_rocprof_run(&env, &o);
    // The counter passes' CSVs were read and joined onto the trace: the
    // report's sources name them.
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(env.only_run_dir().join("report.json")).unwrap())
            .unwrap();
    let text = report.to_string();
    assert!(
        text.contains("rocprofv3 counter collection"),
        "{}",
        &text[..text.len().min(3000)]
    );
}

/// `kopt analyze RUN_FOLDER` on the folder a rocprof run left.
fn analyze_folder(dir: &Path) -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["analyze", dir.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// What the diagnosis of a run says, without the run's own record (the
/// folder, argv and wall time that only `kopt profile` knows) and with each
/// source named by its file name (profile names the folder as `--runs-dir`
/// gave it, analyze as its argument does).
fn diagnosis_of(report: &serde_json::Value) -> serde_json::Value {
    let mut r = report.clone();
    r.as_object_mut().unwrap().remove("run");
    for s in r["sources"].as_array_mut().unwrap() {
        let name = Path::new(s["path"].as_str().unwrap())
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        s["path"] = name.into();
    }
    r
}

#[test]
fn analyze_reads_a_rocprof_run_folder_as_profile_did() {
    let env = Env::with_rocprof();
    let o = profile(&env, &["--backend", "rocprof"], "");
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let dir = env.only_run_dir();
    let again = analyze_folder(&dir);
    assert!(report["primary"].is_object(), "{report}");
    assert_eq!(again["primary"], report["primary"]);
    assert_eq!(again["kernels"], report["kernels"]);
    assert_eq!(again["device"], report["device"]);
    // Every pass's CSVs are inputs again: the trace and the counter passes.
    let sources = again["sources"].to_string();
    for f in [
        "pass1-trace_kernel_trace.csv",
        "pass2-counters_counter_collection.csv",
        "pass5-counters_counter_collection.csv",
    ] {
        assert!(sources.contains(f), "{f} not in {sources}");
    }
    assert_eq!(diagnosis_of(&again), diagnosis_of(&report));
    // Unfiltered, the timeline has every traced dispatch and launch call.
    assert_eq!(report["timeline"]["kernels"], 9);
    assert_eq!(report["timeline"]["kernel_launch_calls"], 9);
}

/// `--kernel`: rocprofv3 traced every kernel, so run.json keeps the filter
/// and `kopt analyze` applies it again.
#[test]
fn analyze_applies_a_rocprof_runs_kernel_filter() {
    let env = Env::with_rocprof();
    let o = profile(
        &env,
        &["--backend", "rocprof", "--kernel", "addition_kernel"],
        "",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = report["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["short_name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["addition_kernel"], "{report}");
    // The timeline is filtered too: only the 3 addition_kernel dispatches
    // and their 3 hipLaunchKernel calls of the 9 traced, as the table.
    let tl = &report["timeline"];
    assert_eq!(tl["kernels"], 3, "{tl}");
    assert_eq!(tl["kernel_launch_calls"], 3, "{tl}");
    let gaps = tl["largest_gaps"].to_string();
    for other in ["divide_kernel", "multiply_kernel", "subtract_kernel"] {
        assert!(!gaps.contains(other), "{other} in the gaps: {gaps}");
    }
    let dir = env.only_run_dir();
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(rec["kernel_filter"], "addition_kernel");
    let again = analyze_folder(&dir);
    assert_eq!(again["timeline"]["kernels"], 3);
    assert_eq!(diagnosis_of(&again), diagnosis_of(&report));

    // A run.json that is not one names itself.
    std::fs::write(dir.join("run.json"), "{\"schema\": ").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["analyze", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.starts_with("kopt: error: ")
            && e.contains(&format!(
                "{}: not a kopt run record",
                dir.join("run.json").display()
            )),
        "{e}"
    );
}

#[test]
fn auto_picks_rocprof_when_rocprofv3_is_there_and_no_nvidia_gpu() {
    if Path::new("/dev/nvidia0").exists() {
        skip::skip(
            "auto_picks_rocprof_when_rocprofv3_is_there_and_no_nvidia_gpu",
            "this machine has an NVIDIA GPU, so auto picks ncu",
        );
        return;
    }
    let env = Env::with_rocprof();
    let o = profile(&env, &[], "");
    assert_rocprof_run(&env, &o);
}

#[test]
fn auto_picks_ncu_when_nvidia_smi_is_on_path() {
    let fake = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/fake-rocprofv3.sh"),
    )
    .unwrap();
    let env = Env::new(&[("rocprofv3", &fake), ("nvidia-smi", "#!/bin/sh\nexit 0\n")]);
    let o = profile(&env, &[], "");
    // No ncu on this PATH: the ncu path is taken and says ncu is missing.
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("ncu (Nsight Compute) not found"),
        "{}",
        stderr(&o)
    );
    assert!(!env.args_log().exists());
}

#[test]
fn rocprof_failures_are_one_line_each() {
    // rocprofv3 missing.
    let env = Env::new(&[]);
    let o = profile(&env, &["--backend", "rocprof"], "");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("rocprofv3 (ROCprofiler-SDK) not found"),
        "{}",
        stderr(&o)
    );

    // rocprofv3 that refuses its flags.
    let env = Env::with_rocprof();
    let o = profile(&env, &["--backend", "rocprof"], "badflag");
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("pass1-trace")
            && e.contains("exited with code 2")
            && e.contains("unrecognized arguments"),
        "{e}"
    );

    // rocprofv3 that writes nothing (no kernels on an AMD GPU).
    let env = Env::with_rocprof();
    let o = profile(&env, &["--backend", "rocprof"], "nokernels");
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("rocprofv3 wrote no pass1-trace_*.csv"), "{e}");
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(env.only_run_dir().join("run.json")).unwrap())
            .unwrap();
    assert!(rec["status"].as_str().unwrap().starts_with("failed:"));

    // --deep has no rocprofv3 equivalent.
    let env = Env::with_rocprof();
    let o = profile(&env, &["--backend", "rocprof", "--deep"], "");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no rocprofv3 equivalent"),
        "{}",
        stderr(&o)
    );

    // --kernel that is no regex: one line saying why.
    let env = Env::with_rocprof();
    let o = profile(&env, &["--backend", "rocprof", "--kernel", "gemm("], "");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("--kernel: unclosed group"), "{e}");

    // --kernel that matches nothing in the trace.
    let env = Env::with_rocprof();
    let o = profile(&env, &["--backend", "rocprof", "--kernel", "gemm"], "");
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("no traced kernel matches"),
        "{}",
        stderr(&o)
    );
}
