//! A program with no step marker and no sync call, captured on an H100
//! (fixtures/launch-count-h100): its steps are the kernel sequence's period
//! and its bare run the launch-count mode; the untraced step comes from the
//! marks, and it sits between the program's own bare clock and the traced
//! step.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn the_launch_count_bare_run_times_the_untraced_step() {
    let trace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/launch-count-h100/trace.jsonl.gz");
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["analyze", "-f", "json"])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let t = &v["timeline"];
    assert_eq!(t["sync_calls"], 0);
    assert_eq!(t["steps"]["source"], "kernel_pattern");
    let g = &t["graph_prediction"];
    assert_eq!(g["eager_measured_bare"], true);
    assert_eq!(g["kernels_per_step"], 40.0);
    let bare = g["eager_corrected_per_step_ns"].as_f64().unwrap();
    let traced = g["eager_per_step_ns"].as_f64().unwrap();
    // measured_bare.txt: the program's own clock, 595.20 us a step; the
    // marks' run pays its launch callbacks, the traced run the tracer.
    assert!(bare > 595_200.0 && bare < 1.3 * 595_200.0, "{bare}");
    assert!(traced > 1.5 * bare, "{traced} vs {bare}");
    assert!(g["speedup"]["model"]
        .as_str()
        .unwrap()
        .contains("kernel launch calls"));
    // The CLI guide's figures are this analysis's.
    let readme = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli.md"),
    )
    .unwrap();
    let said = format!(
        "came out {:.0} us a step this\nway, against {:.2} ms traced",
        bare / 1e3,
        traced / 1e6
    );
    assert!(readme.contains(&said), "{said}");
}
