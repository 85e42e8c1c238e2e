//! `kopt history`: runs recorded, listed and diffed; and a kopt killed with
//! SIGKILL in the middle of writing leaves every earlier run readable.

use std::process::{Command, Stdio};
use std::time::Duration;

use kopt_store::History;

fn kopt(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn compare_and_trace_runs_are_recorded() {
    let d = tempfile::tempdir().unwrap();
    let npy = kopt_ingest::tensor::npy_bytes("<f4", &[2], &[0, 0, 128, 63, 0, 0, 0, 64]);
    std::fs::write(d.path().join("a.npy"), &npy).unwrap();
    std::fs::write(d.path().join("b.npy"), &npy).unwrap();
    assert!(kopt(d.path(), &["compare", "a.npy", "b.npy"])
        .status
        .success());
    // A traced run (the workload stands in for the tracer, as in trace_cli.rs).
    let trace = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/kopt-trace-h200/moe_trace.jsonl");
    std::fs::write(d.path().join("libkopt_tracer.so"), b"stand-in").unwrap();
    let cp = format!("cp '{}' \"$KOPT_TRACE_OUT\"", trace.display());
    // Two traced runs.
    for _ in 0..2 {
        let o = kopt(
            d.path(),
            &[
                "trace",
                "--tracer",
                "libkopt_tracer.so",
                "--format",
                "json",
                "--",
                "/bin/sh",
                "-c",
                &cp,
            ],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }

    let list = String::from_utf8_lossy(&kopt(d.path(), &["history"]).stdout).into_owned();
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 3, "{list}");
    assert!(
        lines[0].contains("trace") && lines[0].contains("launch_overhead"),
        "{list}"
    );
    assert!(
        lines[2].contains("compare") && lines[2].contains("within tolerance"),
        "{list}"
    );
    let diff = String::from_utf8_lossy(&kopt(d.path(), &["history", "diff", "2", "3"]).stdout)
        .into_owned();
    assert!(
        diff.contains("kernel time:") && diff.contains("gatherTopK"),
        "{diff}"
    );
    assert_eq!(
        kopt(d.path(), &["history", "show", "99"]).status.code(),
        Some(1)
    );
}

#[test]
fn sigkill_during_writes_keeps_every_committed_run() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("history.db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["history", "--db"])
        .arg(&db)
        .args(["stress", "--rows", "100000000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Let it write for a while, then kill it without warning.
    let mut waited = 0;
    while waited < 50 {
        std::thread::sleep(Duration::from_millis(100));
        waited += 1;
        if History::open(&db).and_then(|h| h.count()).unwrap_or(0) > 200 {
            break;
        }
    }
    child.kill().unwrap(); // SIGKILL on unix
    child.wait().unwrap();

    let h = History::open(&db).expect("the database opens after the kill");
    let n = h.count().unwrap();
    assert!(n > 200, "only {n} rows were written before the kill");
    let rows = h.list(n as usize).unwrap();
    assert_eq!(rows.len() as i64, n);
    // Every committed run is whole and in order: ids 1..=n, row i says "row i-1".
    for (k, r) in rows.iter().rev().enumerate() {
        assert_eq!(r.id, k as i64 + 1);
        assert_eq!(r.summary, format!("row {k}"));
        assert_eq!(r.report_json.as_deref().map(str::len), Some(512));
    }
    // And kopt itself lists them.
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["history", "--db"])
        .arg(&db)
        .args(["--limit", "3"])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 3);
}

/// The history database is a file anyone could have written: a stored
/// name that clears the screen, or a forged `kopt: error:` line, reaches
/// the terminal as visible escapes, never as control characters.
#[test]
fn stored_escape_sequences_are_printed_escaped() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("history.db");
    let evil = "name\u{1b}[2J\u{1b}]0;pwned\u{7}\nkopt: error: forged";
    let mut h = History::open(&db).unwrap();
    h.record(&kopt_store::RunRow {
        id: 0,
        kind: "bench".into(),
        started_utc: "2026-01-01T00:00:00Z".into(),
        command: format!("kopt bench {evil}"),
        device: Some(evil.into()),
        git_rev: Some(evil.into()),
        summary: evil.into(),
        verdict: Some(evil.into()),
        run_dir: Some(evil.into()),
        report_json: None,
    })
    .unwrap();
    drop(h);
    let db = db.to_str().unwrap();
    for args in [
        &["history", "--db", db][..],
        &["history", "--db", db, "show", "1"][..],
    ] {
        let o = kopt(d.path(), args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let out = String::from_utf8(o.stdout).unwrap();
        assert!(
            !out.chars().any(|c| c != '\n' && c.is_control()),
            "{args:?}: {out:?}"
        );
        assert!(out.contains("name\\u{1b}[2J"), "{args:?}: {out}");
        assert!(
            !out.lines().any(|l| l.starts_with("kopt: error")),
            "{args:?}: {out}"
        );
    }
}

/// An empty history is not an error: `kopt history` and `kopt history
/// calibration` both exit 0 with one line, whether the database is missing
/// (a fresh project) or holds no run; a file that is not a readable
/// database is an error naming it, for both; asking for a run that is not
/// there is an error.
#[test]
fn empty_history_exits_0_and_an_unreadable_one_1() {
    let d = tempfile::tempdir().unwrap();
    let text = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    let empty = d.path().join("empty.db");
    History::open(&empty).unwrap();
    let missing = d.path().join("missing.db");
    for db in [&missing, &empty] {
        let db = db.to_str().unwrap();
        for args in [
            vec!["history", "--db", db],
            vec!["history", "calibration", "--db", db],
        ] {
            let o = kopt(d.path(), &args);
            assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
            assert!(o.stderr.is_empty(), "{args:?}: {}", text(&o));
            let out = String::from_utf8_lossy(&o.stdout);
            assert_eq!(out.lines().count(), 1, "{args:?}: {out}");
            assert!(out.contains(db), "{args:?}: {out}");
        }
        let o = kopt(d.path(), &["history", "show", "1", "--db", db]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    }
    // The default location in a fresh folder: the same as a missing file.
    for args in [vec!["history"], vec!["history", "calibration"]] {
        let o = kopt(d.path(), &args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
    }
    assert!(
        !d.path().join(".kopt").exists(),
        "reading created the history"
    );
    let bad = d.path().join("bad.db");
    std::fs::write(&bad, "not a database, but long enough to be read as one").unwrap();
    let bad = bad.to_str().unwrap();
    for args in [
        vec!["history", "--db", bad],
        vec!["history", "calibration", "--db", bad],
    ] {
        let o = kopt(d.path(), &args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.starts_with("kopt: error: ") && err.contains(bad),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

/// The exit codes are in `kopt --help` (and so `man kopt`) and in
/// `kopt history --help`, where the empty history's 0 is said.
#[test]
fn exit_codes_are_documented_in_help() {
    let d = tempfile::tempdir().unwrap();
    let top = String::from_utf8_lossy(&kopt(d.path(), &["--help"]).stdout).into_owned();
    let top = top.split_whitespace().collect::<Vec<_>>().join(" ");
    for code in [
        "0 success",
        "1 an error",
        "2 a wrong command line",
        "3 a REVERT verdict",
    ] {
        assert!(top.contains(code), "{code}: {top}");
    }
    let history =
        String::from_utf8_lossy(&kopt(d.path(), &["history", "--help"]).stdout).into_owned();
    let history = history.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(history.contains("Exit codes: 0"), "{history}");
    assert!(history.contains("none was recorded yet"), "{history}");
}

/// A sixth hostile round (M5): a `runs` table with `id TEXT` was listed as
/// "no runs recorded", its rows dropped silently. A table of another shape
/// is an error naming the file and the column; a row a hand-made table
/// lets through that cannot be read is said in a note, not dropped.
#[test]
fn a_runs_table_of_another_shape_or_an_unreadable_row_is_said() {
    let d = tempfile::tempdir().unwrap();
    let other = d.path().join("other.db");
    let c = rusqlite::Connection::open(&other).unwrap();
    c.execute_batch(
        "CREATE TABLE runs (id TEXT, kind TEXT NOT NULL, started_utc TEXT NOT NULL, \
         command TEXT NOT NULL, device TEXT, git_rev TEXT, summary TEXT NOT NULL, \
         verdict TEXT, run_dir TEXT, report_json TEXT); \
         INSERT INTO runs VALUES ('abc', 'profile', 't', 'c', NULL, NULL, 's', NULL, NULL, NULL);",
    )
    .unwrap();
    drop(c);
    let o = kopt(d.path(), &["history", "--db", other.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(other.to_str().unwrap())
            && err.contains("'runs' is not kopt's")
            && err.contains("column id is TEXT"),
        "{err}"
    );
    // kopt's columns without NOT NULL, one row with a NULL summary.
    let loose = d.path().join("loose.db");
    let c = rusqlite::Connection::open(&loose).unwrap();
    c.execute_batch(
        "CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT, started_utc TEXT, \
         command TEXT, device TEXT, git_rev TEXT, summary TEXT, verdict TEXT, run_dir TEXT, \
         report_json TEXT); \
         INSERT INTO runs (kind, started_utc, command, summary) VALUES ('bench', 't', 'c', 'good'); \
         INSERT INTO runs (kind, started_utc, command, summary) VALUES ('bench', 't', 'c', NULL);",
    )
    .unwrap();
    drop(c);
    let o = kopt(d.path(), &["history", "--db", loose.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("good"), "{out}");
    assert!(
        out.contains("note: 1 run(s) in") && out.contains("run 2: "),
        "{out}"
    );
}
