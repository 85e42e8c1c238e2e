//! #39: a history database travels with a cloned repository, so its schema
//! is not trusted: a trigger or view planted in it is refused before kopt
//! writes or reads a run, and nothing in it runs.

use kopt_store::History;
use rusqlite::Connection;

fn planted(sql: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("history.db");
    // A genuine history first, then the plant.
    drop(History::open(&p).unwrap());
    let c = Connection::open(&p).unwrap();
    c.execute_batch(sql).unwrap();
    drop(c);
    (d, p)
}

const FLIP_VERDICT: &str = "CREATE TRIGGER flip AFTER INSERT ON runs BEGIN \
     UPDATE runs SET verdict = 'PASS' WHERE id = NEW.id; END;";

#[test]
fn a_trigger_in_the_history_is_refused_for_writing_and_reading() {
    let (_d, p) = planted(FLIP_VERDICT);
    let e = History::open(&p)
        .err()
        .expect("a trigger must be refused")
        .to_string();
    assert!(e.contains("trigger") && e.contains("flip"), "{e}");
    let e = History::open_existing(&p)
        .err()
        .expect("refused for reading too")
        .to_string();
    assert!(e.contains("trigger") && e.contains("flip"), "{e}");
}

#[test]
fn a_view_in_the_history_is_refused() {
    let (_d, p) = planted("CREATE VIEW v AS SELECT * FROM runs;");
    let e = History::open(&p)
        .err()
        .expect("a view must be refused")
        .to_string();
    assert!(e.contains("view") && e.contains("'v'"), "{e}");
}

#[test]
fn a_plain_history_still_opens_and_records() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("history.db");
    drop(History::open(&p).unwrap());
    assert_eq!(History::open(&p).unwrap().count().unwrap(), 0);
    assert!(History::open_existing(&p).is_ok());
}

/// A `runs` table of the planter's own making: a generated column, a CHECK
/// or DEFAULT expression, or an index on an expression is code SQLite runs
/// on every read or write (a round-four plant ran 3.9 GB of it per read).
#[test]
fn a_runs_table_unlike_kopts_is_refused() {
    let columns = "kind TEXT NOT NULL, started_utc TEXT NOT NULL, command TEXT NOT NULL, \
         device TEXT, git_rev TEXT, verdict TEXT, run_dir TEXT";
    for (what, table) in [
        (
            "generated column",
            format!(
                "CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, {columns}, \
                 summary TEXT NOT NULL, report_json TEXT GENERATED ALWAYS AS \
                 (length(hex(zeroblob(1000)))) VIRTUAL)"
            ),
        ),
        (
            "check",
            format!(
                "CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, {columns}, \
                 summary TEXT NOT NULL CHECK (length(randomblob(10)) > 0), report_json TEXT)"
            ),
        ),
    ] {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("history.db");
        let c = Connection::open(&p).unwrap();
        c.execute_batch(&table).unwrap();
        drop(c);
        let e = History::open_existing(&p)
            .err()
            .unwrap_or_else(|| panic!("{what}: must be refused"))
            .to_string();
        assert!(e.contains("refused") && e.contains("'runs'"), "{what}: {e}");
    }
    let (_d, p) = planted("CREATE INDEX heavy ON runs(length(hex(zeroblob(1000))));");
    let e = History::open(&p)
        .err()
        .expect("an index is refused")
        .to_string();
    assert!(e.contains("index") && e.contains("heavy"), "{e}");
    // A DEFAULT expression runs on every insert that leaves the column out.
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("history.db");
    let c = Connection::open(&p).unwrap();
    c.execute_batch(
        "CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, \
         started_utc TEXT NOT NULL, command TEXT NOT NULL, device TEXT, git_rev TEXT, \
         summary TEXT NOT NULL, verdict TEXT DEFAULT (hex(randomblob(10))), run_dir TEXT, \
         report_json TEXT)",
    )
    .unwrap();
    drop(c);
    let e = History::open(&p)
        .err()
        .expect("a DEFAULT is refused")
        .to_string();
    assert!(e.contains("DEFAULT"), "{e}");
}

/// A fifth hostile round: `.kopt/history.db` linked to another program's
/// database got a `runs` table and WAL mode. A database that holds tables
/// and none of kopt's is refused before anything is written.
#[test]
fn another_programs_database_is_refused_and_left_as_it_was() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("contacts.db");
    let c = Connection::open(&p).unwrap();
    c.execute_batch("CREATE TABLE contacts (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT); INSERT INTO contacts (name) VALUES ('a');")
        .unwrap();
    drop(c);
    let before = std::fs::read(&p).unwrap();
    let link = d.path().join("history.db");
    std::os::unix::fs::symlink(&p, &link).unwrap();
    let e = History::open(&link)
        .err()
        .expect("another program's database must be refused")
        .to_string();
    assert!(
        e.contains("not a kopt history") && e.contains("contacts"),
        "{e}"
    );
    // Read, it is no history (and nothing is written either).
    assert!(History::open_existing(&link).is_err());
    assert_eq!(std::fs::read(&p).unwrap(), before);
    assert!(!d.path().join("contacts.db-wal").exists());
}

/// A sixth hostile round (M5): a `runs` table with `id TEXT` was accepted
/// and every row that did not fit vanished from `kopt history`. A table of
/// kopt's with other columns is refused, naming the file and the column,
/// for reading and before any write, and the file is left as it was.
#[test]
fn a_runs_table_of_another_shape_is_refused_naming_what_differs() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("history.db");
    let c = Connection::open(&p).unwrap();
    c.execute_batch(
        "CREATE TABLE runs (id TEXT, kind TEXT NOT NULL, started_utc TEXT NOT NULL, \
         command TEXT NOT NULL, device TEXT, git_rev TEXT, summary TEXT NOT NULL, \
         verdict TEXT, run_dir TEXT, report_json TEXT, extra BLOB); \
         INSERT INTO runs VALUES ('abc', 'profile', 't', 'c', NULL, NULL, 's', NULL, NULL, NULL, NULL);",
    )
    .unwrap();
    drop(c);
    let before = std::fs::read(&p).unwrap();
    for e in [
        History::open_existing(&p)
            .err()
            .expect("refused for reading"),
        History::open(&p).err().expect("refused for writing"),
    ] {
        let e = e.to_string();
        assert!(e.starts_with(&p.display().to_string()), "{e}");
        assert!(
            e.contains("'runs' is not kopt's")
                && e.contains("column id is TEXT where kopt's is INTEGER PRIMARY KEY")
                && e.contains("extra"),
            "{e}"
        );
    }
    assert_eq!(std::fs::read(&p).unwrap(), before, "nothing is written");
    assert!(!d.path().join("history.db-wal").exists());
    // A missing column, and a tune table of another shape, likewise.
    let p2 = d.path().join("h2.db");
    let c = Connection::open(&p2).unwrap();
    c.execute_batch("CREATE TABLE runs (id INTEGER PRIMARY KEY, kind TEXT NOT NULL)")
        .unwrap();
    drop(c);
    let e = History::open(&p2).err().expect("refused").to_string();
    assert!(
        e.contains("no column started_utc, command,") && e.contains(" summary,"),
        "{e}"
    );
    let p3 = d.path().join("h3.db");
    let c = Connection::open(&p3).unwrap();
    c.execute_batch("CREATE TABLE tune_finals (id INTEGER PRIMARY KEY, key TEXT)")
        .unwrap();
    drop(c);
    let e = History::open(&p3).err().expect("refused").to_string();
    assert!(e.contains("'tune_finals' is not kopt's"), "{e}");
}

/// A sixth hostile round (L8): a planted `history.db-wal` or `-shm` link
/// was refused only as SQLite's "unable to open database file". Each side
/// file that is a link, a directory or a hard link is named with what it
/// is, for reading and writing, and its target is left untouched.
#[test]
fn a_side_file_that_is_a_link_is_refused_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("history.db");
    {
        let mut h = History::open(&p).unwrap();
        h.record(&kopt_store::RunRow {
            id: 0,
            kind: "bench".into(),
            started_utc: "t".into(),
            command: "c".into(),
            device: None,
            git_rev: None,
            summary: "s".into(),
            verdict: None,
            run_dir: None,
            report_json: None,
        })
        .unwrap();
    }
    let target = d.path().join("precious.txt");
    std::fs::write(&target, "keep me").unwrap();
    for suffix in ["-wal", "-shm", "-journal"] {
        let side = d.path().join(format!("history.db{suffix}"));
        let _ = std::fs::remove_file(&side);
        std::os::unix::fs::symlink(&target, &side).unwrap();
        for e in [
            History::open(&p).err().expect("refused for writing"),
            History::open_existing(&p)
                .err()
                .expect("refused for reading"),
        ] {
            let e = e.to_string();
            assert!(
                e.starts_with(&side.display().to_string())
                    && e.contains("side file is a symbolic link")
                    && e.contains("precious.txt"),
                "{suffix}: {e}"
            );
        }
        std::fs::remove_file(&side).unwrap();
    }
    let side = d.path().join("history.db-wal");
    std::fs::hard_link(&target, &side).unwrap();
    let e = History::open(&p).err().expect("a hard link").to_string();
    assert!(e.contains("a hard link (2 names"), "{e}");
    std::fs::remove_file(&side).unwrap();
    std::fs::create_dir(&side).unwrap();
    let e = History::open(&p).err().expect("a directory").to_string();
    assert!(e.contains("side file is a directory"), "{e}");
    std::fs::remove_dir(&side).unwrap();
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
    assert_eq!(History::open(&p).unwrap().count().unwrap(), 1);
}

/// Round seven: thousands of harmless objects listed first once pushed an
/// index on `runs` past the schema query's limit, unseen.
#[test]
fn an_index_behind_thousands_of_others_is_still_refused() {
    let mut sql = String::from("CREATE TABLE junk(a);");
    for i in 0..4_100 {
        sql.push_str(&format!("CREATE INDEX i{i:05} ON junk(a);"));
    }
    sql.push_str("CREATE INDEX zz ON runs(length(hex(zeroblob(1000))));");
    let (_d, p) = planted(&sql);
    let e = History::open(&p)
        .err()
        .expect("the index on runs is refused")
        .to_string();
    assert!(e.contains("index") && e.contains("zz"), "{e}");
}

/// #39: SQLite's names ignore letter case, the schema check's did not: a
/// table spelled `RUNS` (kopt's `runs` to SQLite) carried an expression
/// index that wrote 300 MB per row, or a CHECK that kept only the verdicts
/// it liked, past the check. Every spelling is now kopt's table.
#[test]
fn code_on_kopts_tables_is_refused_whatever_their_letter_case() {
    let runs = |name: &str, extra: &str| {
        format!(
            "CREATE TABLE {name} (id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, \
             started_utc TEXT NOT NULL, command TEXT NOT NULL, device TEXT, git_rev TEXT, \
             summary TEXT NOT NULL, verdict TEXT, run_dir TEXT, report_json TEXT{extra});"
        )
    };
    let cases = [
        (
            runs("RUNS", "") + "CREATE INDEX zz ON RUNS(printf('%.*c', 1000, summary));",
            "index 'zz'",
        ),
        (
            runs("Runs", "") + "CREATE INDEX zz ON rUNs(printf('%.*c', 1000, summary));",
            "index 'zz'",
        ),
        (
            runs(
                "RUNS",
                ", CHECK (verdict IS NULL OR verdict NOT LIKE '%REVERT%')",
            ),
            "table 'RUNS' with a CHECK expression",
        ),
        (
            runs("runs", "") + "CREATE INDEX tt ON TUNE_TRIALS(length(samples_json));",
            "index 'tt'",
        ),
    ];
    for (sql, what) in cases {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("history.db");
        // A genuine history with kopt's tune tables, its runs table then
        // made again under another spelling, with the plant.
        drop(kopt_store::TuneCache::open(&p).unwrap());
        let c = Connection::open(&p).unwrap();
        c.execute_batch(&format!("DROP TABLE runs; {sql}")).unwrap();
        drop(c);
        let before = std::fs::read(&p).unwrap();
        for e in [
            History::open(&p).err().map(|e| e.to_string()),
            History::open_existing(&p).err().map(|e| e.to_string()),
            kopt_store::TuneCache::open(&p).err().map(|e| e.to_string()),
        ] {
            let e = e.unwrap_or_else(|| panic!("{what}: must be refused"));
            assert!(e.contains("refused") && e.contains(what), "{what}: {e}");
        }
        assert_eq!(
            std::fs::read(&p).unwrap(),
            before,
            "{what}: the file was changed"
        );
    }
}

/// Round nine: 4,200 UNIQUE constraints on `runs` (harmless, each with an
/// index of no SQL) filled the schema query's limit and hid an expression
/// index, or the table's own CHECK, behind them.
#[test]
fn constraint_indexes_cannot_hide_code_on_kopts_tables() {
    // Distinct column lists (ordered lists of kopt's own columns after id,
    // shortest first), each a constraint with its own index.
    let cols = [
        "kind",
        "started_utc",
        "command",
        "device",
        "git_rev",
        "summary",
        "verdict",
        "run_dir",
        "report_json",
    ];
    let mut lists: Vec<Vec<&str>> = cols.iter().map(|c| vec![*c]).collect();
    let mut at = 0;
    while lists.len() < 4_200 {
        let grown: Vec<Vec<&str>> = cols
            .iter()
            .filter(|c| !lists[at].contains(c))
            .map(|c| [lists[at].clone(), vec![*c]].concat())
            .collect();
        lists.extend(grown);
        at += 1;
    }
    let uniques: String = lists[..4_200]
        .iter()
        .map(|l| format!(", UNIQUE(id, {})", l.join(", ")))
        .collect();
    for (extra, index, what) in [
        (
            "",
            "CREATE INDEX zz ON runs(printf('%.*c', 1000, summary));",
            "index 'zz'",
        ),
        (
            ", CHECK (verdict IS NULL OR verdict NOT LIKE '%REVERT%')",
            "",
            "CHECK expression",
        ),
    ] {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("history.db");
        drop(kopt_store::TuneCache::open(&p).unwrap());
        let c = Connection::open(&p).unwrap();
        c.execute_batch(&format!(
            "DROP TABLE runs; CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, \
             started_utc TEXT NOT NULL, command TEXT NOT NULL, device TEXT, git_rev TEXT, \
             summary TEXT NOT NULL, verdict TEXT, run_dir TEXT, report_json TEXT{extra}{uniques}); {index}"
        ))
        .unwrap();
        let indexes: i64 = c
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'runs'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(indexes > 4_096, "{indexes}");
        drop(c);
        let e = History::open(&p).err().expect("refused").to_string();
        assert!(e.contains(what), "{e}");
    }
}
