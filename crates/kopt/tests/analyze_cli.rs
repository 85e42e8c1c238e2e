//! `kopt analyze` as a user runs it: real fixtures, every format, and every
//! kind of bad input (one-line error naming file and line, exit code 1, no panic).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// rocpd databases built on ROCprofiler-SDK's real schema (shared with
/// kopt-ingest's rocpd tests).
#[path = "../../kopt-ingest/tests/support/rocpd.rs"]
mod rocpd;

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

fn kopt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(args)
        .output()
        .expect("kopt runs")
}

fn kopt_with_path(args: &[&str], path_var: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(args)
        .env("PATH", path_var)
        .output()
        .expect("kopt runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A bad input: exit 1, one line on stderr naming the file, no panic.
fn assert_clean_error(o: &Output, file: &Path, needle: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "one line expected: {err}"
    );
    assert!(
        err.contains(&file.display().to_string()),
        "names the file: {err}"
    );
    assert!(err.contains(needle), "expected {needle:?} in: {err}");
    assert!(o.stdout.is_empty(), "no partial report on stdout");
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn every_format_on_the_labeled_suite() {
    let raw = fixture("labeled-suite-h100/ncu_raw_base.csv");
    let raw = raw.to_str().unwrap();
    let term = kopt(&["analyze", raw, "--width", "160"]);
    assert!(term.status.success(), "{}", stderr(&term));
    let text = stdout(&term);
    assert!(text.contains("Key insight"));
    assert!(text.contains("kopt_gridstride_8blocks / small_grid"));

    let md = kopt(&["analyze", raw, "--format", "md"]);
    assert!(md.status.success());
    assert!(stdout(&md).contains("| Kernel | Launches | Total | Mean | % Total | DRAM GB/s |"));

    let json = kopt(&["analyze", raw, "--format", "json", "--top", "3"]);
    assert!(json.status.success());
    let text = stdout(&json);
    assert!(text.contains("\"schema\": \"kopt/1\""));
    assert!(text.contains("\"type\": \"small_grid\""));
    // --top keeps three kernels; recommendations still cover the workload.
    assert_eq!(text.matches("\"short_name\"").count(), 3);
}

#[test]
fn full_kernel_names_stay_in_json() {
    let raw = fixture("h100-probe/ncu_raw.csv");
    let o = kopt(&["analyze", raw.to_str().unwrap(), "--format", "json"]);
    assert!(o.status.success());
    assert!(stdout(&o).contains(
        "void sbtopk::gatherTopK<float, unsigned int, 2, 0>(detail::TensorInfo<const T1, T2>"
    ));
}

#[test]
fn empty_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "empty.csv", b"");
    assert_clean_error(
        &kopt(&["analyze", p.to_str().unwrap()]),
        &p,
        "file is empty",
    );
}

#[test]
fn truncated_file() {
    let dir = tempfile::tempdir().unwrap();
    let full = std::fs::read(fixture("labeled-suite-h100/ncu_raw_base.csv")).unwrap();
    // Cut in the middle of a row, as an interrupted copy would.
    let newline = full[full.len() / 2..]
        .iter()
        .position(|&b| b == b'\n')
        .unwrap()
        + full.len() / 2;
    let p = write(dir.path(), "cut.csv", &full[..newline + 300]);
    let o = kopt(&["analyze", p.to_str().unwrap()]);
    assert_clean_error(&o, &p, "truncated");
    let err = stderr(&o);
    let after = err.split(p.to_str().unwrap()).nth(1).unwrap();
    let line: String = after
        .trim_start_matches(':')
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    assert!(line.parse::<u64>().unwrap() > 3, "names the line: {err}");
}

#[test]
fn wrong_csv() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "sales.csv",
        b"region,quarter,revenue\nnorth,Q1,100\n",
    );
    assert_clean_error(
        &kopt(&["analyze", p.to_str().unwrap()]),
        &p,
        "not an Nsight Compute CSV",
    );
}

#[test]
fn binary_junk() {
    let dir = tempfile::tempdir().unwrap();
    let junk: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let p = write(dir.path(), "junk.csv", &junk);
    assert_clean_error(&kopt(&["analyze", p.to_str().unwrap()]), &p, "binary data");
}

#[test]
fn missing_column() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("h100-probe/ncu_raw.csv")).unwrap();
    let p = write(
        dir.path(),
        "nodur.csv",
        text.replace(
            "\"gpu__time_duration.sum\"",
            "\"gpu__time_duration.renamed\"",
        )
        .as_bytes(),
    );
    let o = kopt(&["analyze", p.to_str().unwrap()]);
    assert_clean_error(&o, &p, "missing column \"gpu__time_duration.sum\"");
    assert!(
        stderr(&o).contains(":3:"),
        "header is line 3: {}",
        stderr(&o)
    );

    let details = std::fs::read_to_string(fixture("h100-probe/ncu_details.csv")).unwrap();
    let p = write(
        dir.path(),
        "novalue.csv",
        details
            .replacen("\"Metric Value\"", "\"Value\"", 1)
            .as_bytes(),
    );
    assert_clean_error(
        &kopt(&["analyze", p.to_str().unwrap()]),
        &p,
        "missing column \"Metric Value\"",
    );
}

#[test]
fn na_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("h100-probe/ncu_raw.csv")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<String> = lines[..4].iter().map(|s| s.to_string()).collect();
    for row in &lines[4..] {
        let cells: Vec<&str> = row.trim_matches('"').split("\",\"").collect();
        let blanked: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| if i < 11 { c.to_string() } else { "n/a".into() })
            .collect();
        out.push(format!("\"{}\"", blanked.join("\",\"")));
    }
    let p = write(dir.path(), "na.csv", out.join("\n").as_bytes());
    let o = kopt(&["analyze", p.to_str().unwrap()]);
    assert_clean_error(&o, &p, "n/a in every row");
    assert!(
        stderr(&o).contains(":5:"),
        "first data row is line 5: {}",
        stderr(&o)
    );
}

#[test]
fn missing_file() {
    let p = PathBuf::from("/nonexistent/kopt/report.csv");
    assert_clean_error(&kopt(&["analyze", p.to_str().unwrap()]), &p, "cannot read");
}

#[test]
fn usage_errors_exit_2() {
    let raw = fixture("h100-probe/ncu_raw.csv");
    let o = kopt(&["analyze", raw.to_str().unwrap(), "--format", "xml"]);
    assert_eq!(o.status.code(), Some(2));
    // clap names the flag and the value it refused, and lists the formats.
    let err = stderr(&o);
    assert!(err.contains("'xml'") && err.contains("--format"), "{err}");
    assert!(err.contains("term") && err.contains("html"), "{err}");
    assert_eq!(kopt(&["analyze"]).status.code(), Some(2));
    assert_eq!(kopt(&["frobnicate"]).status.code(), Some(2));
}

#[test]
fn ncu_rep_without_ncu_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let rep = write(dir.path(), "run.ncu-rep", b"\x00\x01binary report");
    let o = kopt_with_path(&["analyze", rep.to_str().unwrap()], dir.path());
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("ncu (Nsight Compute) not found"), "{err}");
    assert!(err.contains("--ncu PATH"), "{err}");
}

#[test]
fn ncu_rep_through_a_fake_ncu_attaches_rules_to_the_raw_page() {
    let dir = tempfile::tempdir().unwrap();
    let raw = fixture("h100-probe/ncu_raw.csv");
    let details = fixture("h100-probe/ncu_details.csv");
    let script = format!(
        "#!/bin/sh\ncase \"$*\" in\n  *'--page raw'*) /bin/cat '{}' ;;\n  *'--page details'*) /bin/cat '{}' ;;\n  *) echo \"unexpected: $*\" >&2; exit 9 ;;\nesac\n",
        raw.display(),
        details.display()
    );
    let ncu = write(dir.path(), "ncu", script.as_bytes());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&ncu, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let rep = write(dir.path(), "probe.ncu-rep", b"fake");
    let o = kopt_with_path(
        &["analyze", rep.to_str().unwrap(), "--format", "json"],
        dir.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    // 17 launches from the raw page, not 17 + 12.
    assert!(text.contains("\"launches\": 17"), "{text}");
    assert!(text.contains("rules attached"));
}

#[test]
fn failed_run_keeps_an_existing_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = write(dir.path(), "report.md", b"earlier report\n");
    let bad = write(dir.path(), "bad.csv", b"");
    let o = kopt(&[
        "analyze",
        bad.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "earlier report\n");

    let good = fixture("h100-probe/ncu_raw.csv");
    let o = kopt(&[
        "analyze",
        good.to_str().unwrap(),
        "-f",
        "md",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read_to_string(&out)
        .unwrap()
        .starts_with("# kopt analysis"));
    // No temporary file left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

#[test]
fn truncated_and_invalid_traces_name_the_byte_offset() {
    let dir = tempfile::tempdir().unwrap();
    let full = std::fs::read(fixture("h100-probe/torch_trace.json")).unwrap();
    let p = write(dir.path(), "cut.json", &full[..full.len() / 2]);
    let o = kopt(&["analyze", p.to_str().unwrap()]);
    assert_clean_error(&o, &p, "truncated");
    assert!(stderr(&o).contains(": byte "), "{}", stderr(&o));

    let p = write(dir.path(), "notatrace.json", br#"{"rows": [1, 2, 3]}"#);
    assert_clean_error(
        &kopt(&["analyze", p.to_str().unwrap()]),
        &p,
        "no \"traceEvents\"",
    );
}

#[test]
fn a_trace_alone_gives_the_timeline_verdict() {
    let o = kopt(&[
        "analyze",
        fixture("seed000-h200/moe_trace.json").to_str().unwrap(),
        "--format",
        "md",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let md = stdout(&o);
    assert!(md.contains("## Timeline"));
    assert!(md.contains("/ **launch_overhead**"), "{md}");
    assert!(md.contains("Capture the launch sequence in a CUDA graph"));
}

/// The run folder `profile_module` left on an H200 (seed 000's MoE routing
/// step at batch 4): launch bound, graph capture first.
#[test]
fn profile_module_run_folder_is_launch_bound() {
    let run = fixture("profile-module-h200/run");
    let o = kopt(&["analyze", run.to_str().unwrap(), "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["primary"]["type"], "launch_overhead");
    assert_eq!(v["timeline"]["launch_bound"], true);
    assert_eq!(v["recommendations"][0]["id"], "capture_cuda_graph");
    let names: Vec<&str> = v["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["short_name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"gatherTopK") && names.contains(&"bitonicSortKVInPlace"),
        "{names:?}"
    );
}

/// A launch-bound rocprofv3 kernel trace (synthetic, seed 000's MoE routing
/// kernels on an MI300X): the same diagnosis, in HIP's words.
#[test]
fn an_amd_pipeline_gets_the_hip_graph() {
    let dir = fixture("amd/synthetic-rocprofv3-moe-route");
    let trace = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("kernel_trace.csv"))
        .unwrap();
    let o = kopt(&["analyze", trace.to_str().unwrap(), "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["primary"]["type"], "launch_overhead");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(!text.contains("CUDA graph"), "CUDA wording on an AMD GPU");
    assert!(v["recommendations"][0]["title"]
        .as_str()
        .unwrap()
        .contains("HIP graph"));
}

/// Kernels that ran only in the warm-up steps (cuDNN's algorithm search)
/// are left out of the table and named in one line in every format;
/// `--keep-warmup` keeps them. A kernel of the start-up before the first
/// step (the input generated once, `torch.randn`) is not a warm-up trial.
#[test]
fn warmup_kernels_are_left_out_and_said_in_every_format() {
    // Synthetic (fixtures/synthetic-timelines/kopt_cudnn_benchmark.jsonl):
    // cuDNN's algorithm search tries 3 kernels 12 times in the first step;
    // the input generated once before the loop (normal_kernel) is start-up
    // and stays.
    let trace = fixture("synthetic-timelines/kopt_cudnn_benchmark.jsonl");
    let path = trace.to_str().unwrap();
    let line = "Left out: 3 kernels that ran only in warm-up steps, never in the steady state (warm-up or autotuning trials: 12 launches, 1.80 ms)";
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    for format in ["term", "md"] {
        let mut args = vec!["analyze", path, "-f", format];
        if format == "term" {
            args.extend(["--html", html.to_str().unwrap()]);
        }
        let o = kopt(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let out = stdout(&o);
        // The terminal wraps the line at its width.
        let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains(line), "{format}: {out}");
        assert!(!out.contains("implicit_convolve_sgemm"), "{format}: {out}");
        assert!(out.contains("normal_kernel"), "{format}: {out}");
    }
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains(line), "html");
    let o = kopt(&["analyze", path, "-f", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let w = &v["warmup_trials"];
    assert_eq!(w["launches"], 12);
    assert_eq!(w["evidence"], "warmup_steps");
    assert_eq!(w["kernels"].as_array().unwrap().len(), 3);
    let names = |v: &serde_json::Value| -> Vec<String> {
        v["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(names(&v)
        .iter()
        .all(|n| !n.contains("implicit_convolve_sgemm")));
    assert!(names(&v).iter().any(|n| n.contains("normal_kernel")));
    assert_eq!(names(&v).len(), 4);
    let o = kopt(&["analyze", path, "-f", "json", "--keep-warmup"]);
    let kept: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(kept["warmup_trials"]["kept"], true);
    assert!(names(&kept)
        .iter()
        .any(|n| n.contains("implicit_convolve_sgemm")));
    assert!(kept["total_kernel_ns"].as_f64() > v["total_kernel_ns"].as_f64());
    let o = kopt(&["analyze", path, "--keep-warmup"]);
    let flat = stdout(&o).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("Kept on request: 3 kernels that ran only in warm-up steps")
            && flat.contains("they count in the table and totals"),
        "{flat}"
    );
    // The input generated before the loop of a recorded trace is kept too.
    let o = kopt(&[
        "analyze",
        fixture("kopt-trace-h200/moe_trace.jsonl").to_str().unwrap(),
        "-f",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["warmup_trials"].is_null(), "{}", v["warmup_trials"]);
    assert!(names(&v)
        .iter()
        .any(|n| n.contains("distribution_elementwise_grid_stride_kernel")));
}

/// rocprofv3's JSON output and a rocpd database are recognised by their
/// content, no flag: the synthetic launch-bound JSON trace and a rocpd
/// database built on the real schema (200 tiny kernels behind 6 us launch
/// calls) both come out launch-bound on an MI300X, in HIP's words.
#[test]
fn rocprofv3_json_and_rocpd_databases_are_sniffed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bench_results.db");
    rocpd::trace_db(&db);
    // The name does not matter: the SQLite header does.
    let renamed = dir.path().join("capture");
    std::fs::copy(&db, &renamed).unwrap();
    let json = fixture("amd/synthetic-rocprofv3-json/results.json");
    for (input, kernels) in [(&json, 60), (&db, 200), (&renamed, 200)] {
        let o = kopt(&["analyze", input.to_str().unwrap(), "--format", "json"]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}: {}",
            input.display(),
            stderr(&o)
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(
            v["device"]["name"],
            "AMD Instinct MI300X",
            "{}",
            input.display()
        );
        assert_eq!(
            v["primary"]["type"],
            "launch_overhead",
            "{}",
            input.display()
        );
        assert_eq!(v["timeline"]["launch_bound"], true);
        let launches: u64 = v["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["launches"].as_u64().unwrap())
            .sum();
        assert_eq!(launches, kernels, "{}", input.display());
        let expected = if input == &json {
            "rocprofv3 JSON"
        } else {
            "rocpd database"
        };
        let sources = v["sources"].to_string();
        assert!(sources.contains(expected), "{}: {sources}", input.display());
        assert!(v["recommendations"][0]["title"]
            .as_str()
            .unwrap()
            .contains("HIP graph"));
    }
}

/// A cut-off rocpd database and broken rocprofv3 JSON: exit 1, one line
/// naming the file, no panic.
#[test]
fn truncated_rocpd_and_malformed_rocprofv3_json_are_clean_errors() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full.db");
    rocpd::trace_db(&full);
    let bytes = std::fs::read(&full).unwrap();
    // The SQLite header survives, the schema pages do not: an interrupted copy.
    for (name, len) in [
        ("cut_results.db", 100),
        ("half_results.db", bytes.len() / 2),
    ] {
        let cut = write(dir.path(), name, &bytes[..len]);
        let o = kopt(&["analyze", cut.to_str().unwrap()]);
        assert_clean_error(&o, &cut, "not a readable SQLite database");
        assert!(stderr(&o).starts_with("kopt: error: "), "{}", stderr(&o));
    }

    let json = std::fs::read(fixture("amd/synthetic-rocprofv3-json/results.json")).unwrap();
    // Cut in the middle of the records, as a killed writer leaves it.
    let broken = write(dir.path(), "broken_results.json", &json[..json.len() / 2]);
    let o = kopt(&["analyze", broken.to_str().unwrap()]);
    assert_clean_error(&o, &broken, "not valid JSON");
    assert!(stderr(&o).starts_with("kopt: error: "), "{}", stderr(&o));

    // Valid JSON with rocprofv3's top-level key but no records in it.
    let empty = write(
        dir.path(),
        "empty_results.json",
        br#"{"rocprofiler-sdk-tool": [{"agents": []}]}"#,
    );
    let o = kopt(&["analyze", empty.to_str().unwrap()]);
    assert_clean_error(&o, &empty, "no kernel dispatches");
    assert!(stderr(&o).starts_with("kopt: error: "), "{}", stderr(&o));
}

/// The terminal report with its wrapping undone, so phrases can be searched.
/// The whole report (`--verbose`: evidence, actions, notes under each
/// kernel), flattened.
fn flat_report(inputs: &[&Path]) -> String {
    let mut args = vec!["analyze", "--verbose"];
    args.extend(inputs.iter().map(|p| p.to_str().unwrap()));
    let o = kopt(&args);
    assert!(
        o.status.success(),
        "{}: {}",
        inputs[0].display(),
        stderr(&o)
    );
    stdout(&o).split_whitespace().collect::<Vec<_>>().join(" ")
}

/// AMD inputs are told about AMD tools and CUs; NVIDIA reports keep ncu,
/// kopt trace and SMs word for word.
#[test]
fn amd_reports_name_cus_and_amd_profilers() {
    let nvidia_words = [
        " SMs",
        "ncu",
        "kopt trace",
        "kopt profile,",
        "kopt profile (",
    ];
    // rocprof v1 kernel trace + rocminfo (MI250 GCD): timeline, no counters.
    let v1 = flat_report(&[
        &fixture("amd/rocprof-v1-mi250/results.csv"),
        &fixture("amd/rocprof-v1-mi250/results.sysinfo.txt"),
    ]);
    assert!(
        v1.contains("AMD Instinct MI250 (one GCD), 104 CUs;"),
        "{v1}"
    );
    assert!(
        v1.contains("kopt profile --backend rocprof (or rocprofv3 --pmc with kopt's counter groups) gives each kernel's cause"),
        "{v1}"
    );
    // The rocprofv3 documentation's kernel trace: counters missing.
    let docs = flat_report(&[&fixture("amd/rocprofv3-docs/kernel_trace.csv")]);
    assert!(
        docs.contains("profile it (kopt profile --backend rocprof, or rocprofv3 --pmc with kopt's counter groups) to learn why it is slow"),
        "{docs}"
    );
    // rocprof-compute (Omniperf) workload folder.
    let omniperf = flat_report(&[&fixture("amd/omniperf-vcopy-mi300x/original-c079f133")]);
    assert!(
        omniperf.contains("profile it (kopt profile --backend rocprof,"),
        "{omniperf}"
    );
    // rocprofv3 counter collection of tiny kernels, no timeline (MI300X).
    let counted = flat_report(&[&fixture(
        "amd/synthetic-rocprofv3-json/counters_results.json",
    )]);
    for phrase in [
        "AMD Instinct MI300X, 304 CUs;",
        "Tiny launch: 16 block(s) on 304 CUs for 2.4 us",
        "a timeline is needed to measure it (rocprofv3's counter collection serialises kernels)",
        "Counters cannot show launch overhead: rocprofv3's counter collection serialises kernels",
        "A timeline (rocprofv3 --kernel-trace --hip-runtime-trace, torch.profiler) measures it",
        "Measure the host launch cost with a timeline (rocprofv3 --kernel-trace --hip-runtime-trace, torch.profiler): rocprofv3's counter collection cannot see it.",
    ] {
        assert!(counted.contains(phrase), "{phrase}: {counted}");
    }
    for (name, text) in [
        ("v1", &v1),
        ("docs", &docs),
        ("omniperf", &omniperf),
        ("counted", &counted),
    ] {
        for w in nvidia_words {
            assert!(!text.contains(w), "{name}: NVIDIA wording {w:?}: {text}");
        }
    }

    // NVIDIA: unchanged.
    let h100 = flat_report(&[&fixture("labeled-suite-h100/ncu_raw_base.csv")]);
    for phrase in [
        "132 SMs, CC 9",
        "on 132 SMs",
        "ncu serialises kernels",
        "A timeline (kopt trace, torch.profiler) measures it",
        "(kopt trace, torch.profiler): ncu cannot see it.",
    ] {
        assert!(h100.contains(phrase), "{phrase}: {h100}");
    }
    assert!(!h100.contains("CUs") && !h100.contains("rocprof"), "{h100}");
    let traced = flat_report(&[&fixture("kopt-trace-h200/moe_trace.jsonl")]);
    assert!(
        traced.contains("kopt profile (or ncu with kopt's metric list) gives each kernel's cause"),
        "{traced}"
    );
}

/// Round seven: two traces were both listed as inputs while the figures
/// came from the first (the timeline from the last): never merged now.
#[test]
fn two_timelines_are_refused_not_mixed() {
    let a = fixture("training-h200/sync_item_layer.trace.json.gz");
    let b = fixture("training-h200/copy_pageable.trace.json.gz");
    let o = kopt(&["analyze", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let e = stderr(&o);
    assert!(
        e.contains("are 2 timelines") && e.contains("copy_pageable"),
        "{e}"
    );
}
