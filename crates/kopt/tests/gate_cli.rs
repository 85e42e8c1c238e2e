//! `kopt bench --script A.py --candidate-script B.py` without a GPU: a fake
//! interpreter stands in for Python and writes the facts the gate's harness
//! would, so the engine's path (harness written, run, facts judged,
//! rendered, exit code) is tested whole.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

/// A "python" that writes `facts` to the path after `--out`.
fn fake_python(dir: &Path, facts: &str) -> String {
    let facts_file = dir.join("facts.json");
    std::fs::write(&facts_file, facts).unwrap();
    let exe = dir.join("python");
    std::fs::write(
        &exe,
        format!(
            "#!/bin/sh\ngrep -q 'class Harness' \"$1\" || exit 9\nwhile [ $# -gt 0 ]; do\n  if [ \"$1\" = --out ]; then cp {} \"$2\"; fi\n  shift\ndone\n",
            facts_file.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    exe.display().to_string()
}

fn run(dir: &Path, python: &str, extra: &[&str]) -> Output {
    std::fs::write(dir.join("a.py"), "").unwrap();
    std::fs::write(dir.join("b.py"), "").unwrap();
    Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["bench", "--script", "a.py", "--candidate-script", "b.py"])
        .args(["--python", python])
        .args(extra)
        .env("KOPT_TRACER", "/nonexistent/libkopt_tracer.so")
        .current_dir(dir)
        .output()
        .unwrap()
}

fn facts(candidate_s: f64, checks: &str) -> String {
    let side = |t: f64| {
        let v: Vec<String> = (0..12)
            .map(|i| format!("{}", t * (1.0 + 0.001 * f64::from(i))))
            .collect();
        format!(r#"{{"name":"x","event_s":[{}]}}"#, v.join(","))
    };
    format!(
        r#"{{"device":"NVIDIA H100 80GB HBM3","shapes":[{{"shape":"default","baseline":{},"candidate":{},"checks":{checks}}}],"seconds":1.5}}"#,
        side(1e-3),
        side(candidate_s)
    )
}

const GOOD: &str =
    r#"[{"call":0,"ref_dtype":"f32","cand_dtype":"f32","shape_matches":true,"rel_l2":1e-8}]"#;

#[test]
fn keep_exits_zero_and_reports_the_verdict() {
    let d = tempfile::tempdir().unwrap();
    let py = fake_python(d.path(), &facts(0.8e-3, GOOD));
    let o = run(d.path(), &py, &[]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("verdict: KEEP"), "{out}");
}

#[test]
fn suspect_exits_three_with_its_reason_in_json() {
    let d = tempfile::tempdir().unwrap();
    let aliased = r#"[{"call":0,"ref_dtype":"f32","cand_dtype":"f32","shape_matches":true,"rel_l2":0.0,"aliases_input":true}]"#;
    let py = fake_python(d.path(), &facts(0.5e-3, aliased));
    let o = run(d.path(), &py, &["--format", "json"]);
    assert_eq!(o.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["verdict"], "SUSPECT");
    assert_eq!(v["shapes"][0]["suspect"][0]["reason"], "aliases-input");
}

#[test]
fn clear_errors() {
    let d = tempfile::tempdir().unwrap();
    // A harness that fails.
    let o = run(d.path(), "false", &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("harness"));
    // No interpreter at all.
    let o = run(d.path(), "/nonexistent/python3", &[]);
    assert_ne!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/python3"));
    // A missing script; --candidate-script without --script.
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["bench", "--script", "nope.py", "--candidate-script", "b.py"])
        .env("KOPT_TRACER", "/nonexistent/libkopt_tracer.so")
        .current_dir(d.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["bench", "--candidate-script", "b.py"])
        .current_dir(d.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}
