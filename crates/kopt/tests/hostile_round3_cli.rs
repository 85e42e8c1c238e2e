//! Hardening, round three (#39), the cases that live in the command line:
//! what an error echoes, what its messages claim, what -o may write over.

use std::path::PathBuf;
use std::process::Command;

#[path = "support/cli.rs"]
mod cli;
use cli::{kopt, stderr};

fn suite() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/labeled-suite-h100/ncu_raw_base.csv")
}

/// A 100 KB value or path is not echoed whole: the error stays a short
/// line and keeps the words that say what is wrong.
#[test]
fn errors_do_not_echo_a_huge_input_whole() {
    let d = tempfile::tempdir().unwrap();
    let huge = "x".repeat(100_000);
    let suite = suite().display().to_string();
    for args in [
        vec!["history", "--db", huge.as_str()],
        vec!["analyze", &suite, "-o", &format!("{huge}/r.json")],
        vec!["journal", "show", "--file", huge.as_str()],
        vec!["analyze", &suite, "--top", huge.as_str()],
        vec![huge.as_str()],
    ] {
        let o = kopt(d.path(), &args);
        let err = stderr(&o);
        assert!(!o.status.success(), "{:?}", &args[..1]);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("kopt: error: "), "{err}");
        assert!(err.len() < 1200, "{:?}: {} bytes", &args[..1], err.len());
        assert!(err.contains(" bytes]…"), "{err}");
    }
}

/// What a flag's message says of its range agrees with its other messages.
#[test]
fn range_messages_do_not_contradict_each_other() {
    let d = tempfile::tempdir().unwrap();
    let suite = suite().display().to_string();
    let o = kopt(d.path(), &["analyze", &suite, "--top", "0"]);
    assert!(
        stderr(&o).contains("--top must be at least 1"),
        "{}",
        stderr(&o)
    );
    // Not "a number of 0 or more", which 0 is.
    let o = kopt(d.path(), &["analyze", &suite, "--top", "-1"]);
    let err = stderr(&o);
    assert!(
        err.contains("--top takes no negative number") && !err.contains("0 or more"),
        "{err}"
    );
    // inf is not negative: "non-negative" was no reason to refuse it.
    let o = kopt(d.path(), &["compare", "a.npy", "b.npy", "--rtol", "inf"]);
    let err = stderr(&o);
    assert!(
        err.contains("--rtol must be a finite number of 0 or more, got inf"),
        "{err}"
    );
}

/// -o and --html are refused when they are the input by file identity:
/// `./in.csv`, an absolute path, a symlink to it.
#[test]
fn outputs_that_are_the_input_are_refused_by_identity() {
    let d = tempfile::tempdir().unwrap();
    std::fs::copy(suite(), d.path().join("in.csv")).unwrap();
    std::os::unix::fs::symlink("in.csv", d.path().join("link.csv")).unwrap();
    let before = std::fs::read(d.path().join("in.csv")).unwrap();
    let abs = d.path().join("in.csv").display().to_string();
    for (flag, out) in [
        ("-o", "./in.csv"),
        ("-o", abs.as_str()),
        ("-o", "link.csv"),
        ("--html", "./in.csv"),
    ] {
        let o = kopt(d.path(), &["analyze", "in.csv", flag, out]);
        assert_eq!(o.status.code(), Some(2), "{flag} {out}");
        assert!(
            stderr(&o).contains("would overwrite an input"),
            "{}",
            stderr(&o)
        );
    }
    assert_eq!(std::fs::read(d.path().join("in.csv")).unwrap(), before);
}

/// Round four: a trace's sibling of another process is read with it, so
/// `-o` or `--html` onto the sibling would replace an input.
#[test]
fn outputs_onto_a_traces_sibling_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let trace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/kopt-trace-h200/moe_sampled_trace.jsonl");
    std::fs::copy(&trace, d.path().join("trace.jsonl")).unwrap();
    std::fs::copy(&trace, d.path().join("trace.jsonl.55")).unwrap();
    let before = std::fs::read(d.path().join("trace.jsonl.55")).unwrap();
    for flag in ["-o", "--html"] {
        let o = kopt(
            d.path(),
            &["analyze", "trace.jsonl", flag, "trace.jsonl.55"],
        );
        assert_eq!(o.status.code(), Some(2), "{flag}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("would overwrite an input"),
            "{}",
            stderr(&o)
        );
    }
    assert_eq!(
        std::fs::read(d.path().join("trace.jsonl.55")).unwrap(),
        before
    );
}

/// `kopt analyze FIXTURE` with KOPT_TIMELINE_MAX_ACTIVITIES=`budget`: its
/// standard error, after checking it failed as an input error.
fn analyze_within_activity_budget(fixture: &str, budget: &str) -> String {
    let d = tempfile::tempdir().unwrap();
    let trace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(fixture);
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["analyze"])
        .arg(&trace)
        .env("KOPT_TIMELINE_MAX_ACTIVITIES", budget)
        .current_dir(d.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    stderr(&o)
}

/// Round four: a timeline past its activity budget is refused by name
/// instead of the process aborting on a failed allocation (2.5M launches
/// asked for 5 GB at once).
#[test]
fn a_timeline_past_its_activity_budget_is_refused() {
    let e = analyze_within_activity_budget("training-capture-h200/train_mlp.trace.jsonl.gz", "100");
    // The suggestion is the count the trace holds (four times the budget
    // would not reach it).
    let held = e
        .split(": ")
        .find_map(|part| part.strip_suffix(" GPU activities"))
        .unwrap_or_else(|| panic!("{e}"));
    assert!(held.parse::<u64>().unwrap() > 400, "{e}");
    assert!(
        e.contains("more than the timeline budget of 100")
            && e.contains(&format!("KOPT_TIMELINE_MAX_ACTIVITIES={held} ")),
        "{e}"
    );
}

/// The same budget holds for an AMD kernel trace: its dispatches are
/// counted before each becomes a launch record.
#[test]
fn an_amd_kernel_trace_past_the_activity_budget_is_refused() {
    let e =
        analyze_within_activity_budget("amd/synthetic-rocprofv3-moe-route/kernel_trace.csv", "10");
    assert!(
        e.contains("120 GPU activities: more than the timeline budget of 10"),
        "{e}"
    );
}

/// A fifth hostile round: one file given three times was merged as three
/// captures (636 launches, 55.62 ms, no note); by identity it is refused.
#[test]
fn one_file_given_twice_is_refused() {
    let d = tempfile::tempdir().unwrap();
    std::fs::copy(suite(), d.path().join("n.csv")).unwrap();
    std::os::unix::fs::symlink(d.path().join("n.csv"), d.path().join("link.csv")).unwrap();
    for second in ["./n.csv", "link.csv"] {
        let o = kopt(d.path(), &["analyze", "n.csv", second]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("the same file as n.csv"),
            "{}",
            stderr(&o)
        );
    }
}
