//! `kopt profile` against a fake ncu: the passes, the run folder, and every
//! failure explained in one line (no GPU in CI).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let ncu = bin.join("ncu");
        std::fs::copy(
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/fake-ncu.sh"),
            &ncu,
        )
        .unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&ncu, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        Env { dir }
    }

    fn runs(&self) -> PathBuf {
        self.dir.path().join("runs")
    }

    fn args_log(&self) -> PathBuf {
        self.dir.path().join("ncu-args.log")
    }

    /// kopt profile with no tracer library: pass 1 falls back to ncu.
    fn kopt(&self, args: &[&str], mode: &str) -> Output {
        self.kopt_with_tracer(args, mode, Path::new("/nonexistent/libkopt_tracer.so"))
    }

    fn kopt_with_tracer(&self, args: &[&str], mode: &str, tracer: &Path) -> Output {
        let path = format!("{}:/usr/bin:/bin", self.dir.path().join("bin").display());
        Command::new(env!("CARGO_BIN_EXE_kopt"))
            .args(args)
            .env("KOPT_TRACER", tracer)
            .env("PATH", path)
            .env("FAKE_NCU_MODE", mode)
            .env(
                "FAKE_PASS1",
                fixture("labeled-suite-h200-profile/profile_pass1_timing.csv"),
            )
            .env(
                "FAKE_PASS2",
                fixture("labeled-suite-h200-profile/profile_pass2_targeted.csv"),
            )
            .env("FAKE_PASS3", fixture("labeled-suite-h100/ncu_details.csv"))
            .env("FAKE_NCU_ARGS_LOG", self.args_log())
            .current_dir(self.dir.path())
            .output()
            .unwrap()
    }

    fn only_run_dir(&self) -> PathBuf {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(self.runs())
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

fn run_json(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap()
}

#[test]
fn two_passes_a_run_folder_and_a_report() {
    let env = Env::new();
    let o = env.kopt(
        &[
            "profile",
            "--runs-dir",
            "runs",
            "--format",
            "json",
            "--module",
            "suite",
            "--",
            "/bin/echo",
            "hello from the workload",
        ],
        "",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["schema"], "kopt/1");
    assert_eq!(report["run"]["module"], "suite");
    assert_eq!(report["primary"]["type"], "small_grid");
    // The workload's output is passed through on stderr in pass 1 (stdout parsed as JSON above).
    assert!(stderr(&o).contains("hello from the workload"));
    assert_eq!(report["run"]["argv"][1], "hello from the workload");

    let dir = env.only_run_dir();
    for f in [
        "run.json",
        "report.json",
        "pass1-timing.csv",
        "pass1-timing.log",
        "pass2-targeted.csv",
        "pass2-targeted.log",
    ] {
        assert!(dir.join(f).exists(), "{f} missing in {}", dir.display());
    }
    let rec = run_json(&dir);
    assert_eq!(rec["status"], "ok");
    assert_eq!(rec["passes"].as_array().unwrap().len(), 2);
    assert_eq!(rec["argv"][0], "/bin/echo");
    assert_eq!(rec["profiler"], "ncu");
    assert!(rec["profiler_path"].as_str().unwrap().ends_with("/ncu"));
    assert!(rec["profiler_version"]
        .as_str()
        .unwrap()
        .contains("2025.3.1"));

    // argv reaches the workload as given, after kopt's ncu options.
    let log = std::fs::read_to_string(env.args_log()).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(
        lines,
        [
            "timing /bin/echo hello from the workload",
            "targeted /bin/echo hello from the workload"
        ]
    );

    // `kopt analyze` reads the run folder again and agrees.
    let again = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["analyze", dir.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    assert!(again.status.success(), "{}", stderr(&again));
    let again: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(again["primary"], report["primary"]);
}

/// `--top` means what it means in analyze (kernels shown); how many kernels
/// the targeted pass measures is `--profile-top`.
#[test]
fn top_limits_the_report_as_in_analyze() {
    let env = Env::new();
    let args = |extra: &[&'static str]| {
        let mut v = vec!["profile", "--runs-dir", "runs", "--format", "json"];
        v.extend_from_slice(extra);
        v.extend_from_slice(&["--", "/bin/echo", "x"]);
        v
    };
    let all = env.kopt(&args(&[]), "");
    assert!(all.status.success(), "{}", stderr(&all));
    let all: serde_json::Value = serde_json::from_slice(&all.stdout).unwrap();
    let shown = all["kernels"].as_array().unwrap().len();
    assert!(shown > 1, "the suite has several kernels");

    let one = env.kopt(&args(&["--top", "1", "--profile-top", "5"]), "");
    assert!(one.status.success(), "{}", stderr(&one));
    let one: serde_json::Value = serde_json::from_slice(&one.stdout).unwrap();
    assert_eq!(one["kernels"].as_array().unwrap().len(), 1);
    assert_eq!(one["kernels"][0]["name"], all["kernels"][0]["name"]);
    // The hidden kernels still count in the total and the diagnosis.
    assert_eq!(one["primary"], all["primary"]);
}

#[test]
fn deep_pass_adds_ncu_rules() {
    let env = Env::new();
    let o = env.kopt(
        &[
            "profile",
            "--runs-dir",
            "runs",
            "--deep",
            "--quiet",
            "--format",
            "json",
            "--",
            "/bin/true",
        ],
        "",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = env.only_run_dir();
    assert!(dir.join("pass3-deep.csv").exists());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("\"ncu_disagreement\": {"),
        "deep pass rules reach the report"
    );
}

#[test]
fn workload_failure_reports_exit_code_and_output() {
    let env = Env::new();
    let o = env.kopt(
        &[
            "profile",
            "--runs-dir",
            "runs",
            "--",
            "/bin/sh",
            "-c",
            "echo 'RuntimeError: shapes do not match' >&2; exit 3",
        ],
        "",
    );
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    let last = err.trim_end().lines().last().unwrap();
    assert!(last.contains("the workload exited with code 3"), "{err}");
    assert!(last.contains("RuntimeError: shapes do not match"), "{err}");
    assert!(last.contains("pass1-timing.log"), "names the log: {err}");
    assert!(run_json(&env.only_run_dir())["status"]
        .as_str()
        .unwrap()
        .starts_with("failed: "));
}

#[test]
fn timeout_kills_the_workload() {
    let env = Env::new();
    let t = std::time::Instant::now();
    let o = env.kopt(
        &[
            "profile",
            "--runs-dir",
            "runs",
            "--timeout",
            "1",
            "--",
            "/bin/sleep",
            "30",
        ],
        "",
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(t.elapsed().as_secs() < 15);
    assert!(stderr(&o).contains("timed out after 1 s"), "{}", stderr(&o));
}

#[test]
fn counter_permission_says_what_to_change() {
    let env = Env::new();
    let o = env.kopt(
        &["profile", "--runs-dir", "runs", "--", "/bin/true"],
        "perm",
    );
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("ERR_NVGPUCTRPERM"), "{err}");
    assert!(
        err.contains("NVreg_RestrictProfilingToAdminUsers=0"),
        "{err}"
    );
}

#[test]
fn no_kernels_is_explained() {
    let env = Env::new();
    let o = env.kopt(
        &["profile", "--runs-dir", "runs", "--", "/bin/true"],
        "nokernels",
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("ncu profiled no kernel"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn missing_ncu_and_usage_errors() {
    let env = Env::new();
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["profile", "--runs-dir", "runs", "--", "/bin/true"])
        .env("PATH", "/nonexistent")
        .current_dir(env.dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("ncu (Nsight Compute) not found"),
        "{}",
        stderr(&o)
    );

    let o = env.kopt(&["profile"], "");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("nothing to profile"));
}

/// A refused output is said before anything is created: a module script's
/// run folder included (#40).
#[test]
fn a_refused_output_leaves_no_run_folder() {
    let env = Env::new();
    let script = env.dir.path().join("m.py");
    std::fs::write(
        &script,
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\ndef get_inputs():\n    return [torch.randn(2)]\n",
    )
    .unwrap();
    let o = env.kopt(
        &[
            "profile",
            "--script",
            script.to_str().unwrap(),
            "--runs-dir",
            "runs",
            "-o",
            "missing/out.json",
        ],
        "",
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("does not exist"), "{}", stderr(&o));
    assert!(
        !env.dir.path().join("runs").exists(),
        "a run folder was created"
    );
}

/// `kopt profile` of seed 000's MoE module from recorded H200 data: the
/// stand-in tracer replays kopt's trace of it (pass 1), the fake ncu its
/// targeted pass. `extra` goes before the workload.
fn moe_profile(env: &Env, extra: &[&str]) -> Output {
    let tracer = env.dir.path().join("libkopt_tracer.so");
    std::fs::write(&tracer, b"stand-in").unwrap();
    let trace = fixture("kopt-trace-h200/moe_trace.jsonl");
    let workload = format!(
        "if [ -n \"$KOPT_TRACE_OUT\" ]; then cp '{}' \"$KOPT_TRACE_OUT\"; fi",
        trace.display()
    );
    Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["profile", "--runs-dir", "runs", "--format", "json"])
        .args(extra)
        .args(["--", "/bin/sh", "-c"])
        .arg(&workload)
        .env("KOPT_TRACER", &tracer)
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", env.dir.path().join("bin").display()),
        )
        .env(
            "FAKE_PASS2",
            fixture("moe-route-h200-profile/pass2-targeted.csv"),
        )
        .env("FAKE_NCU_ARGS_LOG", env.args_log())
        .current_dir(env.dir.path())
        .output()
        .unwrap()
}

#[test]
fn kernel_regex_picks_among_the_traced_kernels() {
    let env = Env::new();
    // --profile-top: the counter pass runs although graph capture decides
    // the first finding.
    let o = moe_profile(
        &env,
        &["--kernel", "gatherTopK|bitonicSort", "--profile-top", "20"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let log = std::fs::read_to_string(env.args_log()).unwrap();
    assert!(log.lines().all(|l| l.starts_with("targeted")), "{log}");
    // The targeted pass asks ncu for the matching kernels only.
    let passes = run_json(&env.only_run_dir())["passes"].clone();
    assert_eq!(passes[0]["name"], "pass1-trace");
    // The trace has no step marker and no sync call: its bare run (by the
    // launch count) comes before the ncu pass.
    let names: Vec<&str> = passes
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert_eq!(names[1], "bare-steps", "{names:?}");
    let ncu = passes[2]["command"].to_string();
    assert!(
        ncu.contains("gatherTopK") && ncu.contains("bitonicSortKVInPlace"),
        "{ncu}"
    );
    assert!(!ncu.contains("softmax_warp_forward"), "{ncu}");
    // The report still has the whole timeline.
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["timeline"]["launch_bound"], true);

    let env = Env::new();
    let o = moe_profile(&env, &["--kernel", "no_such_kernel"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("--kernel no_such_kernel: no traced kernel matches")
            && err.contains("gatherTopK"),
        "{err}"
    );
}

#[test]
fn the_counter_pass_is_skipped_where_the_timeline_decides_the_first_finding() {
    // Launch bound: graph capture saves more of the step than any kernel's
    // whole time, so no kernel's counters could change the first finding.
    let env = Env::new();
    let o = moe_profile(&env, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let log = std::fs::read_to_string(env.args_log()).unwrap_or_default();
    assert!(log.trim().is_empty(), "ncu ran: {log}");
    let err = stderr(&o);
    assert!(
        err.contains("counter pass skipped: the first finding"),
        "{err}"
    );
    let record = run_json(&env.only_run_dir());
    let counters = record["counters"].as_str().unwrap();
    assert!(counters.starts_with("skipped: "), "{counters}");
    let names: Vec<&str> = record["passes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["pass1-trace", "bare-steps"]);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["recommendations"][0]["id"], "capture_cuda_graph");
    let notes = report["notes"].to_string();
    assert!(
        notes.contains("Counter pass skipped: the first finding")
            && !notes.contains("Timeline only:"),
        "{notes}"
    );
}

#[test]
fn tracer_timeline_as_pass_one_and_counters_feed_one_diagnosis() {
    // Real data from one module on the H200: kopt's trace of moe_route (pass
    // 1, written by the stand-in tracer) and ncu's targeted pass of the same
    // module (from the fake ncu). Kernel names come from two demanglers.
    let env = Env::new();
    let o = moe_profile(&env, &["--profile-top", "20"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let log = std::fs::read_to_string(env.args_log()).unwrap();
    assert!(
        log.lines().all(|l| l.starts_with("targeted")),
        "ncu ran the targeted pass only: {log}"
    );
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // The timeline: launch bound, as `kopt trace` found on the GPU.
    assert_eq!(report["timeline"]["launch_bound"], true);
    assert_eq!(report["primary"]["type"], "launch_overhead");
    // The counters: every hot kernel got ncu's metrics despite the two demanglers.
    let kernels = report["kernels"].as_array().unwrap();
    let hot: Vec<&serde_json::Value> = kernels
        .iter()
        .filter(|k| k["pct_of_total"].as_f64().unwrap_or(0.0) > 5.0)
        .collect();
    assert!(hot.len() >= 4, "{kernels:?}");
    for k in &hot {
        assert!(
            !k["occupancy_achieved_pct"].is_null() && !k["compute_sol_pct"].is_null(),
            "no counters on {}",
            k["name"]
        );
    }
    let dir = env.only_run_dir();
    assert!(dir.join("trace.jsonl").exists() && dir.join("pass2-targeted.csv").exists());
    assert!(!dir.join("pass1-timing.csv").exists());
    assert_eq!(run_json(&dir)["passes"][0]["name"], "pass1-trace");
    // The folder reads back the same way.
    let again = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["analyze", "--format", "json"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(again.status.success(), "{}", stderr(&again));
    let back: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(back["primary"]["type"], "launch_overhead");
}

/// A module script (Model, get_inputs) is driven by kopt: the run folder
/// holds the script, the loader and the driver, and the driver is what runs.
#[test]
fn a_module_script_is_driven_by_kopt() {
    let env = Env::new();
    let script = env.dir.path().join("topk.py");
    std::fs::write(
        &script,
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x.topk(2)\n\ndef get_inputs():\n    return [torch.randn(4, 64)]\n",
    )
    .unwrap();
    // The fake ncu runs the workload: `true` stands in for Python.
    let o = env.kopt(
        &[
            "profile",
            "--runs-dir",
            "runs",
            "--python",
            "true",
            "--script",
            script.to_str().unwrap(),
            "--module",
            "topk",
        ],
        "",
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let dir = env.only_run_dir();
    for f in [
        "topk.py",
        "kopt_module.py",
        "kopt_profile_driver.py",
        "run.json",
    ] {
        assert!(dir.join(f).is_file(), "{f}");
    }
    let argv = run_json(&dir)["argv"].clone();
    assert_eq!(argv[0], "true");
    assert!(argv[1]
        .as_str()
        .unwrap()
        .ends_with("kopt_profile_driver.py"));
    assert_eq!(argv[3], "topk");
}

/// `kopt profile --script` of a module script with a stand-in interpreter
/// that acts as kopt's driver under the tracer: it writes a real H200 trace
/// of a driven module (kopt_step ranges) and, when `times_in_process` and
/// told `bare_out=PATH`, the steps timed bare in the traced process (the
/// same H200 run's bare steps, marked in-process); as a bare run it writes
/// them to `$KOPT_BARE_STEPS_OUT`. Every start is logged to `starts.log`.
fn driven_profile(env: &Env, times_in_process: bool) -> Output {
    let dir = env.dir.path();
    let tracer = dir.join("libkopt_tracer.so");
    std::fs::write(&tracer, b"stand-in").unwrap();
    let run = fixture("item-in-forward-h200/run");
    let steps = std::fs::read_to_string(run.join("bare_steps.jsonl")).unwrap();
    std::fs::write(dir.join("bare.jsonl"), &steps).unwrap();
    std::fs::write(
        dir.join("in-process.jsonl"),
        steps.replace("}\n", ",\"in_process\":true}\n"),
    )
    .unwrap();
    let in_process = if times_in_process {
        "for a in \"$@\"; do case $a in bare_out=*) cp in-process.jsonl \"${a#bare_out=}\";; esac; done\n"
    } else {
        ""
    };
    let python = dir.join("python");
    std::fs::write(
        &python,
        format!(
            "#!/bin/sh\necho \"${{KOPT_BARE_STEPS_OUT:+bare }}$*\" >> starts.log\n\
             if [ -n \"$KOPT_TRACE_OUT\" ]; then cp '{}' \"$KOPT_TRACE_OUT\"\n{in_process}\
             elif [ -n \"$KOPT_BARE_STEPS_OUT\" ]; then cp bare.jsonl \"$KOPT_BARE_STEPS_OUT\"; fi\n",
            run.join("trace.jsonl").display()
        ),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args([
            "profile",
            "--runs-dir",
            "runs",
            "--format",
            "json",
            "--python",
        ])
        .arg(&python)
        .arg("--script")
        .arg(run.join("Model.py"))
        .env("KOPT_TRACER", &tracer)
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", dir.join("bin").display()),
        )
        // The step syncs inside (graph breaks): compile's first finding no
        // longer outranks every kernel, so a counter pass runs.
        .env(
            "FAKE_PASS2",
            fixture("labeled-suite-h200-profile/profile_pass2_targeted.csv"),
        )
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn the_driver_times_its_bare_steps_in_the_traced_process() {
    let env = Env::new();
    let o = driven_profile(&env, true);
    assert!(o.status.success(), "{}", stderr(&o));
    // The traced start times the bare steps: no separate bare runs (the
    // counter pass starts it once more).
    let starts = std::fs::read_to_string(env.dir.path().join("starts.log")).unwrap();
    assert_eq!(
        starts.lines().filter(|l| l.starts_with("bare ")).count(),
        0,
        "{starts}"
    );
    assert!(
        starts.lines().next().unwrap().contains("bare_out="),
        "{starts}"
    );
    let record = run_json(&env.only_run_dir());
    let bare = &record["passes"][1];
    assert_eq!(bare["name"], "bare-steps", "{record}");
    assert!(
        bare["description"]
            .as_str()
            .unwrap()
            .contains("in the traced process"),
        "{bare}"
    );
    assert!(
        stderr(&o).contains("timed again in the traced process"),
        "{}",
        stderr(&o)
    );
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let g = &report["timeline"]["graph_prediction"];
    assert_eq!(g["eager_measured_bare"], true, "{}", report["notes"]);
    let model = g["speedup"]["model"].as_str().unwrap();
    assert!(model.contains("after the tracer detached"), "{model}");
}

#[test]
fn a_tracer_that_cannot_stop_leaves_the_bare_steps_to_separate_runs() {
    // The driver was told, but the tracer did not stop (an older library,
    // CUPTI refusing the callbacks): it wrote nothing, and kopt times the
    // steps in separate runs as before, with the same figures.
    let env = Env::new();
    let o = driven_profile(&env, false);
    assert!(o.status.success(), "{}", stderr(&o));
    let starts = std::fs::read_to_string(env.dir.path().join("starts.log")).unwrap();
    assert_eq!(
        starts.lines().filter(|l| l.starts_with("bare ")).count(),
        2,
        "{starts}"
    );
    assert!(
        starts.lines().skip(1).all(|l| !l.contains("bare_out=")),
        "{starts}"
    );
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let g = &report["timeline"]["graph_prediction"];
    assert_eq!(g["eager_measured_bare"], true, "{}", report["notes"]);
    let model = g["speedup"]["model"].as_str().unwrap();
    assert!(model.contains("a second run without CUPTI"), "{model}");
}
