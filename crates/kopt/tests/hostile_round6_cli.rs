//! #39, a sixth hostile round: the command line's answers to inputs that
//! cannot work (an empty script, a FIFO as a script, peaks no device has,
//! a device name kopt does not know, a listing of no runs).

#[path = "support/cli.rs"]
mod cli;
use cli::{kopt, stderr};

/// L5: `kopt profile --script` of an empty file was accepted (and run);
/// a FIFO as the script exits as the same input error from profile and
/// optimize.
#[test]
fn an_empty_or_fifo_script_is_refused_alike_by_profile_and_optimize() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("empty.py"), "\n# nothing here\n").unwrap();
    let fifo = d.path().join("fifo.py");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success()));
    for command in ["profile", "optimize"] {
        let o = kopt(d.path(), &[command, "--script", "empty.py"]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{command}: {e}");
        assert!(
            e.contains("empty.py") && e.contains("nothing to run"),
            "{command}: {e}"
        );
        let o = kopt(d.path(), &[command, "--script", "fifo.py"]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{command}: {e}");
        assert!(
            e.contains("fifo.py") && e.contains("not a regular file"),
            "{command}: {e}"
        );
    }
    assert!(!d.path().join(".kopt").exists(), "a run folder was made");
}

/// L6: `--peak-dram-gbs 1e-300` was accepted; `--device zzz` renamed an
/// identified H100 and dropped its bf16 peak.
#[test]
fn peaks_outside_any_device_and_unknown_device_names() {
    let trace = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/synthetic-timelines/kineto_profiler_steps.json");
    let trace = trace.to_str().unwrap();
    let d = tempfile::tempdir().unwrap();
    let o = kopt(d.path(), &["analyze", trace, "--peak-dram-gbs", "1e-300"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("--peak-dram-gbs must be within 1 to 100000 GB/s"),
        "{e}"
    );
    let o = kopt(
        d.path(),
        &["analyze", trace, "--device", "zzz", "-f", "json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["device"]["name"], "NVIDIA H100 80GB HBM3");
    assert_eq!(v["device"]["peaks"]["tensor_bf16_flops"], 989e12);
    assert!(
        v["notes"]
            .to_string()
            .contains("--device zzz is not a GPU kopt has peaks for"),
        "{}",
        v["notes"]
    );
}

/// L7: `kopt history --limit 0` said "no runs recorded" of a history
/// holding runs.
#[test]
fn a_history_limit_of_0_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("h.db");
    drop(kopt_store::History::open(&db).unwrap());
    let o = kopt(
        d.path(),
        &["history", "--db", db.to_str().unwrap(), "--limit", "0"],
    );
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("--limit must be at least 1"), "{e}");
    assert!(o.stdout.is_empty());
}
