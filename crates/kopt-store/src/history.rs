//! The run history: one SQLite database (bundled SQLite, WAL journal), one
//! row per profile, trace or compare run, each written in its own transaction
//! so a killed kopt never takes earlier runs with it.
//!
//! Writers open it with [`History::open`] (folders and database created);
//! readers with [`History::open_existing`], which creates nothing and says
//! "no history yet" where there is none. A row that cannot be read (a NULL
//! or wrongly typed column, text that is not UTF-8) is skipped and counted
//! by [`History::listing`], never allowed to hide the good ones.

use std::path::{Path, PathBuf};

use rusqlite::config::DbConfig;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("{path}: cannot open the history database: {source}")]
    Open {
        path: String,
        #[source]
        source: rusqlite::Error,
    },
    #[error("{path}: history database error: {source}")]
    Sql {
        path: String,
        #[source]
        source: rusqlite::Error,
    },
    #[error("{path}: cannot create its folder: {source}")]
    Folder {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: no run with id {id}")]
    NoSuchRun { path: String, id: i64 },
    /// A read found no database (or one without runs): nothing was created.
    #[error("{path}: no history yet")]
    NoHistory { path: String },
    #[error("{path}: not a history database ({kind})")]
    NotAFile { path: String, kind: &'static str },
    #[error("{path}: cannot read: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The database holds code (a trigger, view, index or expression) a
    /// history never has:
    /// it may have come with a cloned repository, so it is not run.
    #[error(
        "{path}: refused: the history database holds {objects}, which kopt never \
         creates; a planted one could rewrite verdicts. Move the file aside to start afresh"
    )]
    Untrusted { path: String, objects: String },
    /// A database of another program (a link planted at the history, a
    /// `--db` naming the wrong file): kopt adds nothing to it.
    #[error(
        "{path}: refused: not a kopt history, it holds another program's tables ({tables}); \
         name another file with --db"
    )]
    Foreign { path: String, tables: String },
    /// One of kopt's tables exists with other columns (a database of an
    /// older tool, or one made by hand): kopt neither reads nor writes it,
    /// as rows that do not fit would vanish from listings.
    #[error(
        "{path}: refused: its table '{table}' is not kopt's ({differences}); kopt changes \
         nothing in it. Move the file aside or name another with --db"
    )]
    Shape {
        path: String,
        table: String,
        differences: String,
    },
    /// SQLite's side file beside the history (`-wal`, `-shm`, `-journal`)
    /// is a link or not a regular file: SQLite would write through it.
    #[error(
        "{path}: refused: the history's SQLite side file is {kind}, where SQLite writes \
         (a planted link would redirect its writes); remove it (SQLite makes it afresh) \
         or name another history with --db"
    )]
    SideFile { path: String, kind: String },
    /// The `runs` table already holds the largest id SQLite can give: no
    /// row can be added (SQLite reports it as a full disk).
    #[error(
        "{path}: the history's run ids are used up (a row holds id 9223372036854775807,          the largest there is); no run can be recorded in it. Name another file with --db"
    )]
    IdsUsedUp { path: String },
    #[error("{path}: run {id} cannot be read: {message}")]
    BadRow {
        path: String,
        id: i64,
        message: String,
    },
}

/// One recorded run: plain data, in kopt-model so reports can lay it out.
pub use kopt_model::history::RunRow;

/// A row [`History::listing`] could not read.
#[derive(Debug, Clone, PartialEq)]
pub struct SkippedRow {
    /// Its id, where even that could not be read `None`.
    pub id: Option<i64>,
    /// What is wrong with it (the column and the error).
    pub reason: String,
}

/// The rows of a listing that could be read, and those that could not.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Listing {
    /// Newest first.
    pub rows: Vec<RunRow>,
    /// Newest first.
    pub skipped: Vec<SkippedRow>,
}

pub struct History {
    conn: Connection,
    path: PathBuf,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    started_utc TEXT NOT NULL,
    command TEXT NOT NULL,
    device TEXT,
    git_rev TEXT,
    summary TEXT NOT NULL,
    verdict TEXT,
    run_dir TEXT,
    report_json TEXT
);";

/// Sets the connection up so that nothing stored in the file runs (SQLite's
/// defensive mode, no triggers, `trusted_schema` off), then refuses a file
/// whose schema holds anything but the tables kopt creates, exactly as it
/// creates them (a trigger, a view, an index, a generated column, a CHECK
/// or DEFAULT expression).
fn distrust_schema(conn: &Connection, label: &str) -> Result<(), HistoryError> {
    let sql = |source| HistoryError::Sql {
        path: label.to_string(),
        source,
    };
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)
        .map_err(sql)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER, false)
        .map_err(sql)?;
    conn.pragma_update(None, "trusted_schema", false)
        .map_err(sql)?;
    // Nothing in the schema may be code: no trigger or view anywhere, and
    // on the tables kopt reads and writes no generated column, CHECK or
    // DEFAULT expression and no index of the planter's (each runs on reads
    // or writes). Other tables are never touched, so they are left alone.
    // Only what can run is selected, so objects of no concern (thousands
    // of indexes on another table) cannot push one past the limit; were
    // the limit reached, every row past kopt's own is refused anyway.
    // SQLite's names ignore ASCII case (`RUNS` is kopt's `runs`), so every
    // name is compared lower-cased, as SQLite itself compares them.
    let mut stmt = conn
        .prepare(
            "SELECT lower(type), name, lower(tbl_name), sql FROM sqlite_master \
             WHERE (lower(type) IN ('trigger', 'view') \
                OR lower(tbl_name) IN ('runs', 'tune_trials', 'tune_finals')) \
               AND NOT (lower(type) = 'index' AND sql IS NULL) \
             ORDER BY type, name LIMIT 4097",
        )
        .map_err(sql)?;
    let objects: Vec<(String, String, String, Option<String>)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .map_err(sql)?
        .collect::<Result<_, _>>()
        .map_err(sql)?;
    let mut found: Vec<String> = Vec::new();
    // Constraints' own indexes (no SQL) are left out above: thousands of
    // UNIQUE constraints filled the limit and hid a planted index. Past
    // the limit still, the schema is no history kopt wrote.
    if objects.len() > 4096 {
        found.push("more than 4096 triggers, views and schema objects of kopt's tables".into());
    }
    for (kind, name, table, text) in &objects {
        let ours = is_kopt_table(table);
        match kind.as_str() {
            "trigger" | "view" => found.push(format!("a {kind} {name:?}")),
            // UNIQUE constraints' own indexes have no SQL, no expression.
            "index" if ours && text.is_some() => found.push(format!("an index {name:?}")),
            "table" if ours => {
                let upper = text.as_deref().unwrap_or("").to_uppercase();
                let code = ["CHECK", "DEFAULT", "GENERATED", " AS "]
                    .iter()
                    .find(|k| upper.contains(**k));
                let hidden: i64 = conn
                    .query_row(
                        "SELECT COUNT(*) FROM pragma_table_xinfo(?1) WHERE hidden != 0",
                        [name],
                        |r| r.get(0),
                    )
                    .map_err(sql)?;
                // Constraints kopt never declares, which make its own
                // writes fail with SQLite's words (a foreign key to a
                // missing table, a collation, no rowid for its ids).
                let option = ["REFERENCES", "COLLATE", "WITHOUT ROWID"]
                    .iter()
                    .find(|k| upper.contains(**k));
                if let Some(k) = code {
                    found.push(format!("a table {name:?} with a {} expression", k.trim()));
                } else if let Some(k) = option {
                    found.push(format!("a table {name:?} declared with {k}"));
                } else if hidden > 0 {
                    found.push(format!("a table {name:?} with generated columns"));
                }
            }
            _ => {}
        }
    }
    if found.is_empty() {
        return Ok(());
    }
    let objects = found
        .iter()
        .take(5)
        .map(|s| s.replace('"', "'"))
        .collect::<Vec<_>>()
        .join(", ")
        + if found.len() > 5 { ", ..." } else { "" };
    Err(HistoryError::Untrusted {
        path: label.to_string(),
        objects,
    })
}

/// The tables kopt reads and writes.
const KOPT_TABLES: [&str; 3] = ["runs", "tune_trials", "tune_finals"];

/// `name` is one of kopt's tables as SQLite resolves names: ASCII letters
/// in any case (SQLite's own folding; `RUNS` is `runs`).
fn is_kopt_table(name: &str) -> bool {
    KOPT_TABLES.iter().any(|t| t.eq_ignore_ascii_case(name))
}

/// A table's columns as `pragma_table_info` gives them: name, declared
/// type (upper case), NOT NULL, primary-key position.
fn columns(conn: &Connection, table: &str) -> rusqlite::Result<Vec<(String, String, bool, i64)>> {
    let mut stmt = conn.prepare(
        "SELECT name, upper(type), \"notnull\", pk FROM pragma_table_info(?1) ORDER BY cid LIMIT 4096",
    )?;
    let rows = stmt.query_map([table], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
    })?;
    rows.collect()
}

/// How `found`'s columns differ from `expected`'s, in words (empty: none).
fn column_differences(
    expected: &[(String, String, bool, i64)],
    found: &[(String, String, bool, i64)],
) -> Vec<String> {
    let shown = |s: &str| kopt_model::text::echo(s).replace('"', "'");
    let declared = |c: &(String, String, bool, i64)| {
        let mut d = if c.1.is_empty() {
            "untyped".to_string()
        } else {
            shown(&c.1)
        };
        if c.3 > 0 {
            d.push_str(" PRIMARY KEY");
        }
        d
    };
    let mut out = Vec::new();
    let mut missing = Vec::new();
    for e in expected {
        match found.iter().find(|f| f.0.eq_ignore_ascii_case(&e.0)) {
            None => missing.push(e.0.as_str()),
            // NOT NULL may be missing (a hand-made table): a row with a
            // NULL is skipped and counted by the listing, not lost.
            Some(f) if (&f.1, f.3) != (&e.1, e.3) => out.push(format!(
                "column {} is {} where kopt's is {}",
                e.0,
                declared(f),
                declared(e)
            )),
            Some(_) => {}
        }
    }
    if !missing.is_empty() {
        out.insert(0, format!("no column {}", missing.join(", ")));
    }
    for f in found {
        if !expected.iter().any(|e| e.0.eq_ignore_ascii_case(&f.0)) {
            out.push(format!("a column {} kopt never creates", shown(&f.0)));
        }
    }
    out
}

/// Refuses a database in which one of kopt's tables exists with other
/// columns, types or primary key than kopt creates (a `runs` table with `id TEXT`
/// would have every row skipped by the listing). Compared with the tables
/// the schema gives in a database of its own, so the two never drift.
fn check_shape(conn: &Connection, label: &str) -> Result<(), HistoryError> {
    let sql = |source| HistoryError::Sql {
        path: label.to_string(),
        source,
    };
    let reference = Connection::open_in_memory().map_err(sql)?;
    reference
        .execute_batch(SCHEMA)
        .and_then(|()| reference.execute_batch(crate::tune_cache::SCHEMA))
        .map_err(sql)?;
    for table in KOPT_TABLES {
        let found = columns(conn, table).map_err(sql)?;
        if found.is_empty() {
            continue; // not there yet: kopt creates it
        }
        let differences = column_differences(&columns(&reference, table).map_err(sql)?, &found);
        if !differences.is_empty() {
            let mut text = differences
                .iter()
                .take(4)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ");
            if differences.len() > 4 {
                text.push_str(&format!("; {} more", differences.len() - 4));
            }
            return Err(HistoryError::Shape {
                path: label.to_string(),
                table: table.to_string(),
                differences: text,
            });
        }
    }
    Ok(())
}

/// Before kopt writes: a database that holds tables, none of them kopt's,
/// is another program's (a link planted at the history, a `--db` naming
/// the wrong file), and kopt adds nothing to it. (Reading one is "no
/// history yet".)
fn refuse_foreign(conn: &Connection, label: &str) -> Result<(), HistoryError> {
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name LIMIT 4096")
        .map_err(|source| HistoryError::Sql {
            path: label.to_string(),
            source,
        })?;
    let tables: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .and_then(|rows| rows.collect())
        .map_err(|source| HistoryError::Sql {
            path: label.to_string(),
            source,
        })?;
    if tables.is_empty() || tables.iter().any(|t| is_kopt_table(t)) {
        return Ok(());
    }
    Err(HistoryError::Foreign {
        path: label.to_string(),
        tables: tables
            .iter()
            .filter(|t| !t.eq_ignore_ascii_case("sqlite_sequence"))
            .take(5)
            .map(|t| kopt_model::text::echo(t))
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// SQLite's side files beside a database: the write-ahead log, its
/// shared-memory index, the rollback journal.
const SIDE_FILES: [&str; 3] = ["-wal", "-shm", "-journal"];

/// Refuses a side file that is a symbolic link, not a regular file, or a
/// regular file with other names (a hard link): SQLite opens and writes it
/// as the history's own, so through a link it would write elsewhere, and
/// it says only "unable to open database file".
fn check_side_files(path: &Path) -> Result<(), HistoryError> {
    use std::os::unix::fs::MetadataExt;
    for suffix in SIDE_FILES {
        let mut side = path.as_os_str().to_owned();
        side.push(suffix);
        let side = PathBuf::from(side);
        let meta = match std::fs::symlink_metadata(&side) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => {
                return Err(HistoryError::Read {
                    path: side.display().to_string(),
                    source,
                })
            }
        };
        let kind = if meta.file_type().is_symlink() {
            let to = std::fs::read_link(&side)
                .map(|t| kopt_model::text::echo(&t.display().to_string()))
                .unwrap_or_default();
            format!("a symbolic link (to {to})")
        } else if meta.is_dir() {
            "a directory".to_string()
        } else if !meta.is_file() {
            "not a regular file (a FIFO, socket or device)".to_string()
        } else if meta.nlink() > 1 {
            format!("a hard link ({} names for one file)", meta.nlink())
        } else {
            continue;
        };
        return Err(HistoryError::SideFile {
            path: side.display().to_string(),
            kind,
        });
    }
    Ok(())
}

/// The columns a run is read with: anyone's text cut to 4,096 characters
/// and a stored report past [`REPORT_MAX_BYTES`] left unread (listing three
/// runs with 300 MB reports took 1.18 GB), so a row costs a bounded amount.
macro_rules! row_columns_from_runs {
    () => {
        "SELECT id, substr(kind, 1, 4096), substr(started_utc, 1, 4096), substr(command, 1, 4096), substr(device, 1, 4096), substr(git_rev, 1, 4096), substr(summary, 1, 4096), substr(verdict, 1, 4096), substr(run_dir, 1, 4096), CASE WHEN length(CAST(report_json AS BLOB)) <= 16777216 THEN report_json END FROM runs"
    };
}

/// The largest stored report read back, in bytes (the SQL above): a
/// diagnosis of a large trace is a few MB.
pub const REPORT_MAX_BYTES: u64 = 16 << 20;

impl History {
    pub fn open(path: &Path) -> Result<History, HistoryError> {
        let label = path.display().to_string();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| HistoryError::Folder {
                path: dir.display().to_string(),
                source,
            })?;
        }
        check_side_files(path)?;
        let conn = Connection::open(path).map_err(|source| HistoryError::Open {
            path: label.clone(),
            source,
        })?;
        let sql = |source| HistoryError::Sql {
            path: label.clone(),
            source,
        };
        distrust_schema(&conn, &label)?;
        refuse_foreign(&conn, &label)?;
        check_shape(&conn, &label)?;
        // WAL: readers never see a half-written transaction, and a killed
        // writer's partial transaction is rolled back on the next open.
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(sql)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(sql)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(sql)?;
        conn.execute_batch(SCHEMA).map_err(sql)?;
        Ok(History {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// The connection, set up as `open` leaves it, for tables that live in
    /// the same database (the tune cache).
    pub(crate) fn into_connection(self) -> Connection {
        self.conn
    }

    /// Open an existing history for reading only. Nothing is created: a
    /// missing file (or folder), or a database without runs, is
    /// [`HistoryError::NoHistory`]; writing through the handle fails.
    pub fn open_existing(path: &Path) -> Result<History, HistoryError> {
        let label = path.display().to_string();
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(HistoryError::NoHistory { path: label })
            }
            Err(source) => {
                return Err(HistoryError::Read {
                    path: label,
                    source,
                })
            }
        };
        if !meta.is_file() {
            let kind = if meta.is_dir() {
                "a directory"
            } else {
                "not a regular file"
            };
            return Err(HistoryError::NotAFile { path: label, kind });
        }
        // A database nothing ever wrote to: no runs, and nothing to open.
        if meta.len() == 0 {
            return Err(HistoryError::NoHistory { path: label });
        }
        check_side_files(path)?;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|source| HistoryError::Open {
            path: label.clone(),
            source,
        })?;
        let sql = |source| HistoryError::Sql {
            path: label.clone(),
            source,
        };
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(sql)?;
        distrust_schema(&conn, &label)?;
        check_shape(&conn, &label)?;
        let has_runs: bool = conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND lower(name) = 'runs')",
                [],
                |r| r.get(0),
            )
            .map_err(sql)?;
        if !has_runs {
            return Err(HistoryError::NoHistory { path: label });
        }
        Ok(History {
            conn,
            path: path.to_path_buf(),
        })
    }

    fn err(&self, source: rusqlite::Error) -> HistoryError {
        HistoryError::Sql {
            path: self.path.display().to_string(),
            source,
        }
    }

    /// Record a run in one transaction; returns its id.
    pub fn record(&mut self, r: &RunRow) -> Result<i64, HistoryError> {
        let tx = self.conn.transaction().map_err(|e| HistoryError::Sql {
            path: self.path.display().to_string(),
            source: e,
        })?;
        tx.execute(
            "INSERT INTO runs (kind, started_utc, command, device, git_rev, summary, verdict, run_dir, report_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![r.kind, r.started_utc, r.command, r.device, r.git_rev, r.summary, r.verdict, r.run_dir, r.report_json],
        )
        .map_err(|e| {
            // SQLite says "database or disk is full" when the ids are used
            // up as when the disk is: say which it is.
            let ids_used_up = e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull)
                && tx
                    .query_row("SELECT max(id) FROM runs", [], |r| r.get::<_, Option<i64>>(0))
                    .ok()
                    .flatten()
                    == Some(i64::MAX);
            if ids_used_up {
                HistoryError::IdsUsedUp {
                    path: self.path.display().to_string(),
                }
            } else {
                HistoryError::Sql {
                    path: self.path.display().to_string(),
                    source: e,
                }
            }
        })?;
        let id = tx.last_insert_rowid();
        tx.commit().map_err(|e| HistoryError::Sql {
            path: self.path.display().to_string(),
            source: e,
        })?;
        Ok(id)
    }

    fn row(r: &rusqlite::Row) -> rusqlite::Result<RunRow> {
        Ok(RunRow {
            id: r.get(0)?,
            kind: r.get(1)?,
            started_utc: r.get(2)?,
            command: r.get(3)?,
            device: r.get(4)?,
            git_rev: r.get(5)?,
            summary: r.get(6)?,
            verdict: r.get(7)?,
            run_dir: r.get(8)?,
            report_json: r.get(9)?,
        })
    }

    /// A row, or why it cannot be read (a value the column's type cannot
    /// hold: NULL, a blob, text that is not UTF-8).
    fn checked_row(r: &rusqlite::Row) -> Result<RunRow, SkippedRow> {
        Self::row(r).map_err(|e| SkippedRow {
            id: r.get(0).ok(),
            reason: e.to_string(),
        })
    }

    /// The newest `limit` runs, newest first: those that can be read, and
    /// those that cannot (each counts towards `limit`). Only a failure of
    /// the database itself is an error.
    pub fn listing(&self, limit: usize) -> Result<Listing, HistoryError> {
        let mut stmt = self
            .conn
            .prepare(concat!(
                row_columns_from_runs!(),
                " ORDER BY id DESC LIMIT ?1"
            ))
            .map_err(|e| self.err(e))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut out = Listing::default();
        for row in stmt
            .query_map([limit], |r| Ok(Self::checked_row(r)))
            .map_err(|e| self.err(e))?
        {
            match row.map_err(|e| self.err(e))? {
                Ok(r) => out.rows.push(r),
                Err(s) => out.skipped.push(s),
            }
        }
        Ok(out)
    }

    /// The newest runs first, those that can be read (see [`History::listing`]
    /// for the count of those skipped).
    pub fn list(&self, limit: usize) -> Result<Vec<RunRow>, HistoryError> {
        Ok(self.listing(limit)?.rows)
    }

    /// Every readable run of `kind`, newest first, handed to `each` one at
    /// a time: a large history is never held whole (calibration read 966 MB
    /// of reports to use the optimize runs among them).
    pub fn for_each_of_kind(
        &self,
        kind: &str,
        mut each: impl FnMut(RunRow),
    ) -> Result<(), HistoryError> {
        let mut stmt = self
            .conn
            .prepare(concat!(
                row_columns_from_runs!(),
                " WHERE kind = ?1 ORDER BY id DESC"
            ))
            .map_err(|e| self.err(e))?;
        for row in stmt
            .query_map([kind], |r| Ok(Self::checked_row(r)))
            .map_err(|e| self.err(e))?
        {
            if let Ok(r) = row.map_err(|e| self.err(e))? {
                each(r);
            }
        }
        Ok(())
    }

    pub fn get(&self, id: i64) -> Result<RunRow, HistoryError> {
        self.conn
            .query_row(
                concat!(row_columns_from_runs!(), " WHERE id = ?1"),
                [id],
                |r| Ok(Self::checked_row(r)),
            )
            .optional()
            .map_err(|e| self.err(e))?
            .ok_or(HistoryError::NoSuchRun {
                path: self.path.display().to_string(),
                id,
            })?
            .map_err(|s| HistoryError::BadRow {
                path: self.path.display().to_string(),
                id,
                message: s.reason,
            })
    }

    pub fn count(&self) -> Result<i64, HistoryError> {
        self.conn
            .query_row("SELECT COUNT(*) FROM runs", [], |r| r.get(0))
            .map_err(|e| self.err(e))
    }
}

/// The git revision of the repository holding `dir`, when there is one,
/// as git's short form (7 hex digits). Read from the repository's files,
/// not by running git: a cloned repository's config can name programs git
/// runs (`core.fsmonitor`), and recording a run must not run them.
pub fn git_revision(dir: &Path) -> Option<String> {
    let dir = std::fs::canonicalize(dir).ok()?;
    let git = dir
        .ancestors()
        .map(|d| d.join(".git"))
        .find(|g| g.exists())?;
    let git = if git.is_file() {
        // A worktree or submodule: `gitdir: PATH`.
        let text = read_small(&git)?;
        let to = text.strip_prefix("gitdir:")?.trim();
        git.parent()?.join(to)
    } else {
        git
    };
    let head = read_small(&git.join("HEAD"))?;
    let head = head.trim();
    let full = match head.strip_prefix("ref:") {
        None => head.to_string(),
        Some(name) => {
            let name = name.trim();
            // A worktree's branches live in the common directory.
            let common = read_small(&git.join("commondir"))
                .map(|c| git.join(c.trim()))
                .unwrap_or_else(|| git.clone());
            ref_target(&git, name).or_else(|| ref_target(&common, name))?
        }
    };
    let is_hex = full.len() >= 40 && full.bytes().all(|b| b.is_ascii_hexdigit());
    is_hex.then(|| full[..7].to_string())
}

/// A ref's commit from its loose file, else from `packed-refs`.
fn ref_target(git: &Path, name: &str) -> Option<String> {
    if name.split('/').any(|p| p.is_empty() || p == "..") {
        return None;
    }
    if let Some(text) = read_small(&git.join(name)) {
        return Some(text.trim().to_string());
    }
    let packed = read_small(&git.join("packed-refs"))?;
    packed.lines().find_map(|line| {
        let (sha, r) = line.split_once(' ')?;
        (r.trim() == name).then(|| sha.to_string())
    })
}

/// A repository file's text, at most 1 MiB (a ref, HEAD, packed-refs).
fn read_small(path: &Path) -> Option<String> {
    use std::io::Read;
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(1 << 20)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fifth hostile round: three runs with 300 MB reports took 1.18 GB
    /// to list. A row's text is cut and a report past the cap left unread.
    #[test]
    fn a_row_is_read_at_a_bounded_cost() {
        assert!(row_columns_from_runs!().contains(&REPORT_MAX_BYTES.to_string()));
        let d = tempfile::tempdir().unwrap();
        let mut h = History::open(&d.path().join("h.db")).unwrap();
        let row = |summary: String, report: String| RunRow {
            id: 0,
            kind: "bench".into(),
            started_utc: "2026-11-29T07:00:00Z".into(),
            command: "true".into(),
            device: None,
            git_rev: None,
            summary,
            verdict: None,
            run_dir: None,
            report_json: Some(report),
        };
        h.record(&row("s".repeat(100_000), "{}".into())).unwrap();
        h.record(&row("s".into(), " ".repeat(REPORT_MAX_BYTES as usize + 1)))
            .unwrap();
        let rows = h.list(10).unwrap();
        assert_eq!(
            rows[0].report_json, None,
            "a report past the cap is not read"
        );
        assert_eq!(rows[1].summary.len(), 4096);
        assert_eq!(rows[1].report_json.as_deref(), Some("{}"));
    }

    #[test]
    fn the_revision_is_read_from_the_repository_files() {
        let dir = tempfile::tempdir().unwrap();
        let git = dir.path().join(".git");
        std::fs::create_dir_all(git.join("refs/heads")).unwrap();
        let sha = "0123456789abcdef0123456789abcdef01234567";
        // A detached HEAD.
        std::fs::write(git.join("HEAD"), format!("{sha}\n")).unwrap();
        let sub = dir.path().join("a/b");
        std::fs::create_dir_all(&sub).unwrap();
        assert_eq!(git_revision(&sub).as_deref(), Some("0123456"));
        // A branch, loose then packed.
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(git.join("refs/heads/main"), format!("{sha}\n")).unwrap();
        assert_eq!(git_revision(dir.path()).as_deref(), Some("0123456"));
        std::fs::remove_file(git.join("refs/heads/main")).unwrap();
        let other = "fedcba9876543210fedcba9876543210fedcba98";
        std::fs::write(
            git.join("packed-refs"),
            format!("# pack-refs with: peeled\n{other} refs/heads/main\n"),
        )
        .unwrap();
        assert_eq!(git_revision(dir.path()).as_deref(), Some("fedcba9"));
        // A ref that climbs out of the repository, or garbage: no revision.
        std::fs::write(git.join("HEAD"), "ref: ../../etc/passwd\n").unwrap();
        assert_eq!(git_revision(dir.path()), None);
        std::fs::write(git.join("HEAD"), "not a commit\n").unwrap();
        assert_eq!(git_revision(dir.path()), None);
    }

    fn run(kind: &str, summary: &str) -> RunRow {
        RunRow {
            id: 0,
            kind: kind.into(),
            started_utc: "2026-11-25T23:50:00Z".into(),
            command: "python3 bench.py".into(),
            device: Some("NVIDIA H200".into()),
            git_rev: None,
            summary: summary.into(),
            verdict: None,
            run_dir: None,
            report_json: Some("{\"schema\":\"kopt/1\"}".into()),
        }
    }

    #[test]
    fn records_and_lists_newest_first() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(".kopt/history.db");
        let mut h = History::open(&p).unwrap();
        let a = h.record(&run("profile", "first")).unwrap();
        let b = h.record(&run("trace", "second")).unwrap();
        let rows = h.list(10).unwrap();
        assert_eq!(rows.iter().map(|r| r.id).collect::<Vec<_>>(), vec![b, a]);
        assert_eq!(h.get(a).unwrap().summary, "first");
        assert!(matches!(h.get(999), Err(HistoryError::NoSuchRun { .. })));
        drop(h);
        // Reopening keeps everything.
        assert_eq!(History::open(&p).unwrap().count().unwrap(), 2);
    }

    #[test]
    fn used_up_ids_are_said_as_such_not_as_a_full_disk() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("history.db");
        let mut h = History::open(&p).unwrap();
        h.record(&run("profile", "first")).unwrap();
        drop(h);
        let c = Connection::open(&p).unwrap();
        c.execute("UPDATE runs SET id = 9223372036854775807", [])
            .unwrap();
        drop(c);
        let mut h = History::open(&p).unwrap();
        let e = h.record(&run("trace", "second")).unwrap_err();
        assert!(matches!(e, HistoryError::IdsUsedUp { .. }), "{e:?}");
        assert!(e.to_string().contains("run ids are used up"), "{e}");
        // The row that was there is still there.
        assert_eq!(h.count().unwrap(), 1);
    }

    #[test]
    fn constraints_kopt_never_declares_are_refused_before_a_write() {
        for (what, sql) in [
            ("REFERENCES", "CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL REFERENCES nowhere(x), started_utc TEXT NOT NULL, command TEXT NOT NULL, device TEXT, git_rev TEXT, summary TEXT NOT NULL, verdict TEXT, run_dir TEXT, report_json TEXT);"),
            ("WITHOUT ROWID", "CREATE TABLE runs (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, started_utc TEXT NOT NULL, command TEXT NOT NULL, device TEXT, git_rev TEXT, summary TEXT NOT NULL, verdict TEXT, run_dir TEXT, report_json TEXT) WITHOUT ROWID;"),
        ] {
            let d = tempfile::tempdir().unwrap();
            let p = d.path().join("history.db");
            Connection::open(&p).unwrap().execute_batch(sql).unwrap();
            let e = History::open(&p).err().expect("refused").to_string();
            assert!(e.contains(what) && e.contains("refused"), "{what}: {e}");
        }
    }

    #[test]
    fn a_file_that_is_not_a_database_is_a_clear_error() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("history.db");
        std::fs::write(
            &p,
            b"this is not sqlite, it is a text file long enough to have a header",
        )
        .unwrap();
        let e = History::open(&p).err().unwrap().to_string();
        assert!(e.starts_with(&p.display().to_string()), "{e}");
    }
}
