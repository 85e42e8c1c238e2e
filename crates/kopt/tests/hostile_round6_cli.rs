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
