//! Reading the history: a read creates nothing, and an unreadable row is
//! skipped and counted instead of failing the whole listing.

use std::path::Path;

use kopt_store::history::{Listing, SkippedRow};
use kopt_store::{History, HistoryError, RunRow};
use rusqlite::Connection;

fn run(summary: &str) -> RunRow {
    RunRow {
        id: 0,
        kind: "compare".into(),
        started_utc: "2026-11-26T08:00:00Z".into(),
        command: "kopt compare a.npy b.npy".into(),
        device: None,
        git_rev: None,
        summary: summary.into(),
        verdict: Some("PASS".into()),
        run_dir: None,
        report_json: None,
    }
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn reading_a_missing_history_creates_nothing() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("nonexistent/dir/h.db");
    let e = History::open_existing(&db).err().expect("no history");
    assert!(matches!(e, HistoryError::NoHistory { .. }), "{e:?}");
    assert_eq!(e.to_string(), format!("{}: no history yet", db.display()));
    assert!(entries(d.path()).is_empty(), "{:?}", entries(d.path()));
    // In an existing folder too.
    let db = d.path().join("h.db");
    assert!(matches!(
        History::open_existing(&db),
        Err(HistoryError::NoHistory { .. })
    ));
    assert!(entries(d.path()).is_empty());
}

#[test]
fn an_empty_file_or_a_database_without_runs_is_no_history() {
    let d = tempfile::tempdir().unwrap();
    let empty = d.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    assert!(matches!(
        History::open_existing(&empty),
        Err(HistoryError::NoHistory { .. })
    ));
    assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0);
    let other = d.path().join("other.db");
    Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t (x INTEGER);")
        .unwrap();
    let e = History::open_existing(&other).err().unwrap();
    assert_eq!(
        e.to_string(),
        format!("{}: no history yet", other.display())
    );
}

#[test]
fn a_directory_or_garbage_is_a_clear_error() {
    let d = tempfile::tempdir().unwrap();
    let e = History::open_existing(d.path()).err().unwrap().to_string();
    assert_eq!(
        e,
        format!(
            "{}: not a history database (a directory)",
            d.path().display()
        )
    );
    let junk = d.path().join("junk.db");
    std::fs::write(
        &junk,
        b"this is not sqlite, it is a text file long enough to have a header",
    )
    .unwrap();
    let e = History::open_existing(&junk).err().unwrap().to_string();
    assert!(e.starts_with(&junk.display().to_string()), "{e}");
}

#[test]
fn an_existing_history_is_read_and_not_written() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join(".kopt/history.db");
    {
        let mut h = History::open(&db).unwrap();
        h.record(&run("first")).unwrap();
        h.record(&run("second")).unwrap();
    }
    let mut h = History::open_existing(&db).unwrap();
    let rows = h.list(10).unwrap();
    assert_eq!(
        rows.iter().map(|r| r.summary.as_str()).collect::<Vec<_>>(),
        vec!["second", "first"]
    );
    assert_eq!(h.get(rows[1].id).unwrap().summary, "first");
    assert!(h.record(&run("third")).is_err(), "a read-only handle wrote");
    drop(h);
    assert_eq!(History::open(&db).unwrap().count().unwrap(), 2);
}

/// A history whose table was made without NOT NULL (an older kopt, or a
/// hand edit), holding good rows and bad ones.
fn history_with_bad_rows(db: &Path) -> (i64, i64, Vec<i64>) {
    let good_a = {
        let mut h = History::open(db).unwrap();
        h.record(&run("good a")).unwrap()
    };
    let c = Connection::open(db).unwrap();
    c.execute_batch(
        "ALTER TABLE runs RENAME TO old;
         CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT, started_utc TEXT,
             command TEXT, device TEXT, git_rev TEXT, summary TEXT, verdict TEXT, run_dir TEXT,
             report_json TEXT);
         INSERT INTO runs SELECT * FROM old; DROP TABLE old;",
    )
    .unwrap();
    let mut bad = Vec::new();
    for sql in [
        // A NULL where a value is required.
        "INSERT INTO runs (kind, started_utc, command, summary) VALUES ('compare', 't', 'c', NULL)",
        // A blob where text belongs.
        "INSERT INTO runs (kind, started_utc, command, summary) VALUES (x'00ff', 't', 'c', 's')",
        // Text that is not UTF-8.
        "INSERT INTO runs (kind, started_utc, command, summary, device) VALUES ('compare', 't', 'c', 's', CAST(x'ff' AS TEXT))",
    ] {
        c.execute(sql, []).unwrap();
        bad.push(c.last_insert_rowid());
    }
    drop(c);
    let good_b = History::open(db).unwrap().record(&run("good b")).unwrap();
    (good_a, good_b, bad)
}

#[test]
fn bad_rows_are_skipped_and_counted() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("h.db");
    let (good_a, good_b, bad) = history_with_bad_rows(&db);
    let h = History::open_existing(&db).unwrap();
    let Listing { rows, skipped } = h.listing(100).unwrap();
    assert_eq!(
        rows.iter().map(|r| r.id).collect::<Vec<_>>(),
        vec![good_b, good_a]
    );
    assert_eq!(
        skipped.iter().map(|s| s.id).collect::<Vec<_>>(),
        bad.iter().rev().map(|&id| Some(id)).collect::<Vec<_>>()
    );
    for SkippedRow { reason, .. } in &skipped {
        assert!(!reason.is_empty());
    }
    // list() keeps the good rows.
    assert_eq!(h.list(100).unwrap().len(), 2);
    // The limit counts rows, read or not: the newest two are good b and a bad one.
    let l = h.listing(2).unwrap();
    assert_eq!((l.rows.len(), l.skipped.len()), (1, 1));
    // One bad row asked for by id is an error naming it.
    let e = h.get(bad[0]).err().unwrap();
    assert!(
        matches!(e, HistoryError::BadRow { id, .. } if id == bad[0]),
        "{e:?}"
    );
    assert!(
        e.to_string().starts_with(&format!(
            "{}: run {} cannot be read: ",
            db.display(),
            bad[0]
        )),
        "{e}"
    );
    assert_eq!(h.get(good_a).unwrap().summary, "good a");
}

#[test]
fn runs_of_one_kind_are_handed_over_one_at_a_time_newest_first() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("h.db");
    let mut h = History::open(&db).unwrap();
    for (kind, summary) in [("optimize", "a"), ("compare", "b"), ("optimize", "c")] {
        let mut r = run(summary);
        r.kind = kind.into();
        h.record(&r).unwrap();
    }
    let mut seen = Vec::new();
    h.for_each_of_kind("optimize", |r| seen.push(r.summary))
        .unwrap();
    assert_eq!(seen, ["c", "a"]);
    h.for_each_of_kind("tune", |_| panic!("no tune runs"))
        .unwrap();
}
