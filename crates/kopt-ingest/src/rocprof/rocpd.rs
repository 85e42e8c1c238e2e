//! rocpd databases: rocprofv3's SQLite output (`--output-format rocpd`, the
//! default of recent rocprofv3, `*_results.db`). Read through the views
//! rocprofv3 creates (ROCprofiler-SDK `data_views.sql`): `kernels` (one row
//! per dispatch), `counters_collection` (one row per counter per dispatch,
//! instances summed), `memory_copies`, `regions` (HIP API calls) and the
//! `rocpd_info_agent` view for the device (its `extdata` JSON holds the
//! agent record: CUs, clock, wave size, XCDs). A view from another schema
//! version may lack columns: only those a row means nothing without (a
//! kernel's name, start and end) are required, the rest read as unknown.

use std::collections::HashMap;
use std::path::Path;

use kopt_model::{ActivityKind, ApiCall, ApiKind, GpuActivity};
use rusqlite::types::{Value, ValueRef};
use rusqlite::{Connection, OpenFlags};

use super::parse::{kernel_name, MAX_TIME_NS};
use super::{AgentInfo, AmdFile, Dispatch};
use crate::IngestError;

/// The first bytes of every SQLite database file.
pub const SQLITE_MAGIC: &[u8] = b"SQLite format 3\0";

/// Flavours of the dispatch lists a database gives.
const KERNELS: &str = "rocpd database (kernels view)";
const KERNELS_COUNTED: &str = "rocpd database (kernels view with counters_collection)";
const COUNTERS_ONLY: &str = "rocpd database (counters_collection view)";

/// Read a rocpd database from disk, read-only.
pub fn read_rocpd(path: &Path, label: &str) -> Result<Vec<AmdFile>, IngestError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    // A database in WAL mode makes even a read-only reader create `-shm`
    // and `-wal` files beside it. Where no `-wal` is there (nothing left
    // uncheckpointed), the file is opened immutable: nothing is created.
    // A database with a `-wal` is still being written, or was left so:
    // read with it, as SQLite does.
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    // Opened (and checked) here first; SQLite opens what this descriptor
    // holds, so a link swapped after the check cannot lead it elsewhere.
    let file = crate::open_regular(path, label)?;
    let held = {
        use std::os::fd::AsRawFd;
        std::path::PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()))
    };
    let conn = if std::path::Path::new(&wal).exists() {
        Connection::open_with_flags(path, flags)
    } else if held.exists() {
        Connection::open_with_flags(immutable_uri(&held), flags | OpenFlags::SQLITE_OPEN_URI)
    } else {
        Connection::open_with_flags(immutable_uri(path), flags | OpenFlags::SQLITE_OPEN_URI)
    }
    .map_err(|e| sql_error(label, "cannot open as SQLite", &e))?;
    let size = std::fs::metadata(path).map_or(0, |m| stored_bytes(&m));
    read_guarded(&conn, label, size)
}

/// The bytes a file holds on disk, for the budgets that scale with it: its
/// length, but no more than the blocks it has, so a sparse file (`truncate
/// -s 20G` of a 28 KB database) does not lift every budget to 20 GB.
fn stored_bytes(m: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    m.len().min(m.blocks().saturating_mul(512))
}

/// `file:PATH?immutable=1`, the path percent-encoded where a URI needs it.
fn immutable_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push_str("?immutable=1");
    uri
}

/// Parse a rocpd database held in memory (fuzzing, tests).
pub fn parse_rocpd(bytes: &[u8], label: &str) -> Result<Vec<AmdFile>, IngestError> {
    if !bytes.starts_with(SQLITE_MAGIC) {
        return Err(IngestError::format(
            label,
            "not a rocpd database: no SQLite header (\"SQLite format 3\")",
        ));
    }
    // SQLite sizes its buffer with a C int.
    if bytes.len() > i32::MAX as usize {
        return Err(IngestError::format(
            label,
            "rocpd database over 2 GiB held in memory: read it from disk",
        ));
    }
    let mut conn =
        Connection::open_in_memory().map_err(|e| sql_error(label, "cannot open SQLite", &e))?;
    conn.deserialize_read_exact(rusqlite::MAIN_DB, bytes, bytes.len(), true)
        .map_err(|e| sql_error(label, "cannot load as SQLite", &e))?;
    read_guarded(&conn, label, bytes.len() as u64)
}

thread_local! {
    /// The budget the progress handler stopped a query for, if it did: the
    /// error of the interrupted query is replaced by one naming it.
    static TRIPPED: std::cell::Cell<Option<String>> = const { std::cell::Cell::new(None) };
    /// Rows read from the database so far, against [`row_budget`].
    static ROWS: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, u64::MAX)) };
}

/// Rows a database of `size` bytes may yield through kopt's queries: a view
/// can join, but a 4 KB file yielding millions of rows is computing them
/// (a recursive or cross join), not reading them. A row kopt reads stands
/// for a stored one of at least 8 bytes (a dispatch's id and two
/// timestamps alone take 20), so one eighth of the file, and 20,000 rows
/// however small the file: a 6 KB view crossing a 10-row table six times
/// (10^6 rows) took over 2 GB downstream with the old floor of 2^20 rows.
fn row_budget(size: u64) -> u64 {
    (size / 8).max(20_000)
}

/// [`read_conn`] with the database treated as untrusted: its views are
/// SQL the file brings. Nothing writes (`query_only`), functions a view
/// calls must be harmless (`trusted_schema` off), recursive CTEs are
/// refused when a statement is prepared, strings and blobs are capped at
/// 16 MiB, temporary tables stay in memory, and a progress handler stops
/// any query past the work budget ([`crate::budget::SQLITE_MSTEPS`]), the
/// time budget ([`crate::budget::SQLITE_SECONDS`]) or the memory budget
/// ([`crate::budget::SQLITE_TEMP_MB`]); the rows read are capped relative
/// to the file's size.
fn read_guarded(conn: &Connection, label: &str, size: u64) -> Result<Vec<AmdFile>, IngestError> {
    use crate::budget::{SQLITE_MSTEPS, SQLITE_SECONDS, SQLITE_TEMP_MB};
    let setup = |e| sql_error(label, "cannot set up SQLite", &e);
    for (pragma, value) in [
        ("query_only", "ON"),
        ("trusted_schema", "OFF"),
        ("temp_store", "MEMORY"),
    ] {
        conn.pragma_update(None, pragma, value).map_err(setup)?;
    }
    conn.set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_LENGTH, 16 << 20)
        .map_err(setup)?;
    set_recursion_guard(conn, true);
    let seconds = SQLITE_SECONDS.checked()?;
    // The budget, or four times the file when that is more (sorting a big
    // database's rows is legitimate work).
    let temp_bytes = SQLITE_TEMP_MB
        .checked()?
        .saturating_mul(1 << 20)
        .max(size.saturating_mul(4));
    let started = std::time::Instant::now();
    // The handler runs every `EVERY` steps: often enough that rows of
    // computed 16 MiB strings cannot pile up gigabytes between two looks
    // at the memory counter (every 10,000 steps, 3.3 GB did).
    const EVERY: i32 = 100;
    let max_calls = SQLITE_MSTEPS
        .checked()?
        .saturating_mul(1_000_000 / EVERY as u64)
        .max(size.saturating_mul(256) / EVERY as u64);
    let mut calls = 0u64;
    // SAFETY: sqlite3_memory_used only reads SQLite's allocation counter.
    let base = unsafe { rusqlite::ffi::sqlite3_memory_used() }.max(0) as u64;
    TRIPPED.with(|t| t.set(None));
    ROWS.with(|r| r.set((0, row_budget(size))));
    conn.progress_handler(
        EVERY,
        Some(move || {
            // SAFETY: as above.
            let used = unsafe { rusqlite::ffi::sqlite3_memory_used() }.max(0) as u64;
            calls += 1;
            let why = if calls > max_calls {
                Some(format!(
                    "SQLite work budget: its queries took more than {} million steps for a {size}-byte database (a view computing rows, not reading them?); {}",
                    max_calls / (1_000_000 / EVERY as u64),
                    SQLITE_MSTEPS.how_to_raise_above(max_calls / (1_000_000 / EVERY as u64))
                ))
            } else if started.elapsed().as_secs() >= seconds {
                Some(format!(
                    "SQLite time budget: its queries ran past {seconds} s; {}",
                    SQLITE_SECONDS.how_to_raise_above(seconds)
                ))
            } else if used.saturating_sub(base) > temp_bytes {
                Some(format!(
                    "SQLite memory budget: its queries took more than {} MiB; {}",
                    temp_bytes >> 20,
                    SQLITE_TEMP_MB.how_to_raise_above(temp_bytes >> 20)
                ))
            } else {
                None
            };
            let stop = why.is_some();
            if stop {
                TRIPPED.with(|t| t.set(why));
            }
            stop
        }),
    );
    let out = read_conn(conn, label);
    conn.progress_handler(0, None::<fn() -> bool>);
    set_recursion_guard(conn, false);
    TRIPPED.with(|t| t.set(None));
    ROWS.with(|r| r.set((0, u64::MAX)));
    out
}

/// SQLite's authorizer, called as each statement is prepared: a recursive
/// CTE is refused, anything else allowed.
///
/// Installed through the C API rather than rusqlite's `authorizer`: that one
/// decodes the names it is given as UTF-8 and panics on a table or column
/// name that is not (a crafted database's), which printed a panic under a
/// clean error. This one looks at the action code alone.
extern "C" fn deny_recursive(
    _arg: *mut std::ffi::c_void,
    action: std::ffi::c_int,
    _param1: *const std::ffi::c_char,
    _param2: *const std::ffi::c_char,
    _db: *const std::ffi::c_char,
    _accessor: *const std::ffi::c_char,
) -> std::ffi::c_int {
    if action == rusqlite::ffi::SQLITE_RECURSIVE {
        rusqlite::ffi::SQLITE_DENY
    } else {
        rusqlite::ffi::SQLITE_OK
    }
}

fn set_recursion_guard(conn: &Connection, on: bool) {
    type Authorizer = unsafe extern "C" fn(
        *mut std::ffi::c_void,
        std::ffi::c_int,
        *const std::ffi::c_char,
        *const std::ffi::c_char,
        *const std::ffi::c_char,
        *const std::ffi::c_char,
    ) -> std::ffi::c_int;
    let hook: Option<Authorizer> = on.then_some(deny_recursive as Authorizer);
    // SAFETY: the handle is the open connection's; the callback takes no
    // user data (null) and reads none of its pointer arguments.
    unsafe {
        rusqlite::ffi::sqlite3_set_authorizer(conn.handle(), hook, std::ptr::null_mut());
    }
}

/// One more row read: an error past the row budget.
fn count_row(label: &str, view: &str) -> Result<(), IngestError> {
    let (n, limit) = ROWS.with(|r| r.get());
    if n >= limit {
        return Err(IngestError::format(
            label,
            format!(
                "{view} view: more than {limit} rows from this database, more than a file of its size holds (a view computing rows, not reading them): not read"
            ),
        ));
    }
    ROWS.with(|r| r.set((n + 1, limit)));
    Ok(())
}

fn sql_error(label: &str, what: &str, e: &rusqlite::Error) -> IngestError {
    if let Some(why) = TRIPPED.with(|t| t.take()) {
        return IngestError::format(label, format!("{what}: {why}"));
    }
    let text = e.to_string();
    if text.contains("not authorized") {
        return IngestError::format(
            label,
            format!("{what}: a view kopt reads uses a recursive query (WITH RECURSIVE), which rocprofv3 never writes: not run"),
        );
    }
    IngestError::format(label, format!("{what}: {e}"))
}

/// Which of the views kopt reads the database has.
fn objects(conn: &Connection, label: &str) -> Result<Vec<String>, IngestError> {
    let q = "SELECT name FROM sqlite_master WHERE type IN ('view', 'table')";
    let mut stmt = conn
        .prepare(q)
        .map_err(|e| sql_error(label, "not a readable SQLite database", &e))?;
    let names = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
        .map_err(|e| sql_error(label, "not a readable SQLite database", &e))?;
    Ok(names)
}

fn read_conn(conn: &Connection, label: &str) -> Result<Vec<AmdFile>, IngestError> {
    let have = objects(conn, label)?;
    let has = |n: &str| have.iter().any(|h| h == n);
    if !has("kernels") && !has("counters_collection") {
        return Err(IngestError::format(
            label,
            "SQLite database without the rocpd views kopt reads (kernels, counters_collection): not a rocprofv3 rocpd database (rocprofv3 --output-format rocpd writes them)",
        ));
    }
    let mut kernels = if has("kernels") {
        query_kernels(conn, label)?
    } else {
        Vec::new()
    };
    let mut flavor = KERNELS;
    if has("counters_collection") {
        let counted = query_counters(conn, label)?;
        if !counted.is_empty() {
            let index: HashMap<(String, u64), usize> = kernels
                .iter()
                .enumerate()
                .map(|(i, (guid, d))| ((guid.clone(), d.id), i))
                .collect();
            let mut extra = Vec::new();
            for (guid, c) in counted {
                match index.get(&(guid.clone(), c.id)) {
                    Some(&i) => kernels[i].1.counters = c.counters,
                    // A dispatch the kernels view leaves out (its joins
                    // found no event, thread or region row) keeps its
                    // counters with the counters view's own fields.
                    None => extra.push((guid, c)),
                }
            }
            flavor = if kernels.is_empty() {
                COUNTERS_ONLY
            } else {
                KERNELS_COUNTED
            };
            kernels.extend(extra);
        }
    }
    let mut out = Vec::new();
    if has("rocpd_info_agent") {
        let agents = query_agents(conn, label, &kernels)?;
        if !agents.is_empty() {
            out.push(AmdFile::Agents(agents));
        }
    }
    let mut dispatches: Vec<Dispatch> = kernels.into_iter().map(|(_, d)| d).collect();
    for d in &mut dispatches {
        d.finish_counters();
    }
    out.push(AmdFile::Dispatches(flavor, dispatches));
    if has("memory_copies") {
        let copies = query_copies(conn, label)?;
        if !copies.is_empty() {
            out.push(AmdFile::Copies(copies));
        }
    }
    if has("regions") {
        let api = query_api(conn, label)?;
        if !api.is_empty() {
            out.push(AmdFile::Api(api));
        }
    }
    Ok(out)
}

/// One row of a view, its cells checked one by one with messages that name
/// the view, the row's id and the column.
struct Row<'a> {
    label: &'a str,
    view: &'a str,
    id: String,
    cells: Vec<Value>,
    names: &'a [&'a str],
}

impl Row<'_> {
    fn at(&self, message: String) -> IngestError {
        IngestError::format(
            self.label,
            format!("{} view, row id {}: {message}", self.view, self.id),
        )
    }

    /// The cell of `col`; NULL when the view has no such column.
    fn cell(&self, col: &str) -> &Value {
        self.names
            .iter()
            .position(|n| *n == col)
            .and_then(|i| self.cells.get(i))
            .unwrap_or(&Value::Null)
    }

    /// A number cell; NULL is `None`.
    fn num(&self, col: &str) -> Result<Option<f64>, IngestError> {
        match self.cell(col) {
            Value::Null => Ok(None),
            Value::Integer(v) => Ok(Some(*v as f64)),
            Value::Real(v) if v.is_finite() => Ok(Some(*v)),
            Value::Real(v) => Err(self.at(format!("{col} is {v}, not a finite number"))),
            Value::Text(t) => match t.trim().parse::<f64>() {
                Ok(v) if v.is_finite() => Ok(Some(v)),
                _ => Err(self.at(format!(
                    "{col}: expected a number, found \"{}\"",
                    crate::echo(t)
                ))),
            },
            Value::Blob(b) => Err(self.at(format!(
                "{col}: expected a number, found a {}-byte blob",
                b.len()
            ))),
        }
    }

    /// A non-negative integer cell (ids, sizes, timestamps); NULL is `None`.
    fn uint(&self, col: &str) -> Result<Option<u64>, IngestError> {
        if let Value::Integer(v) = self.cell(col) {
            return u64::try_from(*v)
                .map(Some)
                .map_err(|_| self.at(format!("{col} is negative ({v})")));
        }
        match self.num(col)? {
            None => Ok(None),
            Some(v) if v < 0.0 => Err(self.at(format!(
                "{col} is negative ({})",
                kopt_model::figure::as_read(v)
            ))),
            Some(v) if v >= 1.8e19 => Err(self.at(format!(
                "{col}: {} is out of range",
                kopt_model::figure::as_read(v)
            ))),
            Some(v) => Ok(Some(v.round() as u64)),
        }
    }

    fn required(&self, col: &str) -> Result<u64, IngestError> {
        self.uint(col)?
            .ok_or_else(|| self.at(format!("{col} is NULL")))
    }

    fn text(&self, col: &str) -> Option<String> {
        match self.cell(col) {
            Value::Text(t) => Some(t.clone()),
            Value::Integer(v) => Some(v.to_string()),
            _ => None,
        }
    }

    /// start and end: both present, in range and in order.
    fn span(&self, what: &str) -> Result<(i64, i64), IngestError> {
        let start = self.required("start")?;
        let end = self.required("end")?;
        if start > MAX_TIME_NS || end > MAX_TIME_NS {
            return Err(self.at(format!("{what}: timestamp out of range")));
        }
        if end < start {
            return Err(self.at(format!(
                "{what}: end ({end}) before start ({start}), a negative duration"
            )));
        }
        Ok((start as i64, end as i64))
    }
}

/// The columns a view has, in order (`SELECT * ... LIMIT 0`: no row read).
fn view_columns(conn: &Connection, label: &str, view: &str) -> Result<Vec<String>, IngestError> {
    let fail = |e: rusqlite::Error| sql_error(label, &format!("{view} view"), &e);
    // Preparing the view says whether it exists and compiles.
    conn.prepare(&format!("SELECT * FROM `{view}` LIMIT 0"))
        .map_err(fail)?;
    // Names read as values: rusqlite's column_names() panics on a name that
    // is not UTF-8 (a damaged or hostile file), a value decodes lossily.
    let mut stmt = conn
        .prepare("SELECT name FROM pragma_table_info(?1)")
        .map_err(fail)?;
    let mut rows = stmt.query([view]).map_err(fail)?;
    let mut names = Vec::new();
    while let Some(row) = rows.next().map_err(fail)? {
        if let rusqlite::types::ValueRef::Text(b) = row.get_ref(0).map_err(fail)? {
            names.push(String::from_utf8_lossy(b).into_owned());
        }
    }
    Ok(names)
}

/// What to read from a view: the columns wanted, those without which its
/// rows mean nothing, and how to pick and order them. A wanted column the
/// view lacks (an older or newer rocpd schema) reads as NULL; a required
/// one missing is an error naming the view and the column.
struct Query<'a> {
    view: &'a str,
    cols: &'a [&'a str],
    required: &'a [&'a str],
    /// A `WHERE` condition on required columns, or "".
    filter: &'a str,
    /// `ORDER BY` columns; those the view lacks are left out.
    order: &'a [&'a str],
}

/// Run a [`Query`]; each row handed to `each` as a checked [`Row`].
fn query_rows(
    conn: &Connection,
    label: &str,
    q: &Query,
    mut each: impl FnMut(Row) -> Result<(), IngestError>,
) -> Result<(), IngestError> {
    let view = q.view;
    let have = view_columns(conn, label, view)?;
    let has = |c: &str| have.iter().any(|h| h == c);
    if let Some(missing) = q.required.iter().find(|c| !has(c)) {
        return Err(IngestError::format(
            label,
            format!(
                "{view} view has no `{missing}` column, which kopt needs (its columns: {}): not a rocpd schema kopt reads",
                crate::echo(&have.join(", "))
            ),
        ));
    }
    let names: Vec<&str> = q.cols.iter().copied().filter(|c| has(c)).collect();
    if names.is_empty() {
        return Ok(());
    }
    // Backquotes: a double-quoted name SQLite cannot resolve would be read
    // as a string literal, hiding a missing column.
    let quote = |c: &&str| format!("`{c}`");
    let mut sql = format!(
        "SELECT {} FROM `{view}`",
        names.iter().map(quote).collect::<Vec<_>>().join(", ")
    );
    if !q.filter.is_empty() {
        sql += &format!(" WHERE {}", q.filter);
    }
    let order: Vec<String> = q.order.iter().filter(|c| has(c)).map(quote).collect();
    if !order.is_empty() {
        sql += &format!(" ORDER BY {}", order.join(", "));
    }
    let fail = |e: rusqlite::Error| sql_error(label, &format!("{view} view"), &e);
    let mut stmt = conn.prepare(&sql).map_err(fail)?;
    let mut rows = stmt.query([]).map_err(fail)?;
    let mut n = 0u64;
    while let Some(r) = rows.next().map_err(fail)? {
        count_row(label, view)?;
        n += 1;
        let mut cells = Vec::with_capacity(names.len());
        for (i, column) in names.iter().enumerate() {
            // Through ValueRef: rusqlite's Value panics on TEXT that is not
            // UTF-8 (fuzz/regressions/rocpd/text-not-utf8.db).
            cells.push(match r.get_ref(i).map_err(fail)? {
                ValueRef::Null => Value::Null,
                ValueRef::Integer(v) => Value::Integer(v),
                ValueRef::Real(v) => Value::Real(v),
                // A text no profiler writes (a 16 MB kernel name, 2,000
                // rows of them reached 3.3 GB before the SQLite budget):
                // refused before it is copied.
                ValueRef::Text(t) if t.len() > MAX_TEXT_CELL_BYTES => {
                    return Err(IngestError::format(
                        label,
                        format!(
                            "{view} view, result row {n}, column `{column}`: {} bytes of text, more than any name or value a profiler writes ({MAX_TEXT_CELL_BYTES} bytes): not read",
                            t.len()
                        ),
                    ))
                }
                ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
                ValueRef::Blob(b) => Value::Blob(b.to_vec()),
            });
        }
        let at = names.iter().position(|c| *c == "id");
        let id = match at.and_then(|i| cells.get(i)) {
            Some(Value::Integer(v)) => v.to_string(),
            _ => format!("? (result row {n})"),
        };
        each(Row {
            label,
            view,
            id,
            cells,
            names: &names,
        })?;
    }
    Ok(())
}

/// The longest text cell read from a rocpd view: C++ kernel names run to
/// a few kilobytes; a JSON extdata column to tens.
const MAX_TEXT_CELL_BYTES: usize = 1 << 20;

const KERNEL_COLS: &[&str] = &[
    "id",
    "guid",
    "dispatch_id",
    "name",
    "agent_abs_index",
    "queue_id",
    "stream_id",
    "start",
    "end",
    "grid_x",
    "grid_y",
    "grid_z",
    "workgroup_x",
    "workgroup_y",
    "workgroup_z",
    "lds_size",
    "scratch_size",
    "vgpr_count",
    "accum_vgpr_count",
    "sgpr_count",
    "corr_id",
];

/// Where a view keeps a dispatch's fields: the `kernels` and
/// `counters_collection` views name the same fields differently.
struct DispatchColumns {
    name: &'static str,
    stream: Option<&'static str>,
    correlation: &'static str,
    grid: [&'static str; 3],
    workgroup: [&'static str; 3],
    lds: &'static str,
}

const KERNELS_VIEW: DispatchColumns = DispatchColumns {
    name: "name",
    stream: Some("stream_id"),
    correlation: "corr_id",
    grid: ["grid_x", "grid_y", "grid_z"],
    workgroup: ["workgroup_x", "workgroup_y", "workgroup_z"],
    lds: "lds_size",
};

const COUNTERS_VIEW: DispatchColumns = DispatchColumns {
    name: "kernel_name",
    stream: None,
    correlation: "correlation_id",
    grid: ["grid_size_x", "grid_size_y", "grid_size_z"],
    workgroup: ["workgroup_size_x", "workgroup_size_y", "workgroup_size_z"],
    lds: "lds_block_size",
};

/// The dispatch a row of either view describes, its counters still empty.
fn row_dispatch(row: &Row, cols: &DispatchColumns, id: u64) -> Result<Dispatch, IngestError> {
    let (name, name_cut) = dispatch_name(row, cols.name)?;
    let (start, end) = row.span(&format!("kernel {}", crate::echo(&name)))?;
    let dim = |c: [&str; 3]| -> Result<[u64; 3], IngestError> {
        let mut v = [1u64; 3];
        for k in 0..3 {
            if let Some(x) = row.uint(c[k])? {
                v[k] = x;
            }
        }
        Ok(v)
    };
    Ok(Dispatch {
        id,
        name,
        name_cut,
        agent: row.uint("agent_abs_index")?.map(|a| format!("Agent {a}")),
        queue: row.uint("queue_id")?,
        stream: match cols.stream {
            Some(c) => row.uint(c)?,
            None => None,
        },
        correlation: row.uint(cols.correlation)?,
        grid: dim(cols.grid)?,
        workgroup: dim(cols.workgroup)?,
        lds_bytes: row.num(cols.lds)?,
        scratch_bytes: row.num("scratch_size")?,
        arch_vgpr: row.num("vgpr_count")?,
        accum_vgpr: row.num("accum_vgpr_count")?,
        sgpr: row.num("sgpr_count")?,
        wave_size: None,
        start_ns: Some(start),
        end_ns: Some(end),
        counters: Vec::new(),
        line: row.uint("id")?.unwrap_or(0),
    })
}

fn dispatch_name(row: &Row, col: &str) -> Result<(String, bool), IngestError> {
    let raw = row.text(col).unwrap_or_default();
    let (name, cut) = kernel_name(&raw);
    if name.is_empty() {
        return Err(row.at(format!("{col} is NULL or empty")));
    }
    Ok((name, cut))
}

/// The `kernels` view: (guid, dispatch) in start order.
fn query_kernels(conn: &Connection, label: &str) -> Result<Vec<(String, Dispatch)>, IngestError> {
    let mut out = Vec::new();
    let q = Query {
        view: "kernels",
        cols: KERNEL_COLS,
        required: &["name", "start", "end"],
        filter: "",
        order: &["start", "id"],
    };
    let mut n = 0u64;
    query_rows(conn, label, &q, |row| {
        n += 1;
        // An older schema without dispatch_id: the row id, else its place.
        let id = match row.uint("dispatch_id")? {
            Some(id) => id,
            None => row.uint("id")?.unwrap_or(n),
        };
        let d = row_dispatch(&row, &KERNELS_VIEW, id)?;
        out.push((row.text("guid").unwrap_or_default(), d));
        Ok(())
    })?;
    Ok(out)
}

const COUNTER_COLS: &[&str] = &[
    "id",
    "guid",
    "dispatch_id",
    "kernel_name",
    "agent_abs_index",
    "queue_id",
    "grid_size_x",
    "grid_size_y",
    "grid_size_z",
    "workgroup_size_x",
    "workgroup_size_y",
    "workgroup_size_z",
    "lds_block_size",
    "scratch_size",
    "vgpr_count",
    "accum_vgpr_count",
    "sgpr_count",
    "correlation_id",
    "counter_name",
    "value",
    "start",
    "end",
];

/// The `counters_collection` view grouped into dispatches, in first-row order.
fn query_counters(conn: &Connection, label: &str) -> Result<Vec<(String, Dispatch)>, IngestError> {
    let mut out: Vec<(String, Dispatch)> = Vec::new();
    let mut index: HashMap<(String, u64), usize> = HashMap::new();
    let mut counter_at: HashMap<(usize, String), usize> = HashMap::new();
    let q = Query {
        view: "counters_collection",
        cols: COUNTER_COLS,
        required: &[
            "dispatch_id",
            "kernel_name",
            "counter_name",
            "value",
            "start",
            "end",
        ],
        filter: "",
        order: &["start", "dispatch_id", "counter_name"],
    };
    query_rows(conn, label, &q, |row| {
        let guid = row.text("guid").unwrap_or_default();
        let dispatch = row.required("dispatch_id")?;
        let counter = row.text("counter_name").unwrap_or_default();
        if counter.is_empty() {
            return Err(row.at("counter_name is NULL or empty".into()));
        }
        let Some(value) = row.num("value")? else {
            return Err(row.at(format!("value of {} is NULL", crate::echo(&counter))));
        };
        let key = (guid.clone(), dispatch);
        let at = match index.get(&key) {
            Some(&i) => i,
            None => {
                let d = row_dispatch(&row, &COUNTERS_VIEW, dispatch)?;
                index.insert(key, out.len());
                out.push((guid, d));
                out.len() - 1
            }
        };
        let d = &mut out[at].1;
        // Indexed: a search per row is quadratic in a dispatch's counters.
        match counter_at.get(&(at, counter.clone())) {
            // The view sums instances per dispatch and counter; a
            // database merged from several agents may still repeat one.
            Some(&k) => d.counters[k].1 += value,
            None => {
                counter_at.insert((at, counter.clone()), d.counters.len());
                d.counters.push((counter, value));
            }
        }
        Ok(())
    })?;
    Ok(out)
}

/// An agent's `extdata`, the JSON agent record (CUs, clocks, wave size):
/// TEXT as rocprofv3 writes it, or a BLOB (JSON text stored as bytes, or
/// SQLite's binary JSONB, turned back into text by SQLite's `json()`). When
/// it cannot be read, why: the agent's details then come from kopt's table.
fn extdata(conn: &Connection, cell: &Value) -> (serde_json::Value, Option<String>) {
    let text = match cell {
        Value::Null => return (serde_json::Value::Null, None),
        Value::Text(t) => Some(t.clone()),
        Value::Blob(b) => std::str::from_utf8(b)
            .ok()
            .filter(|t| serde_json::from_str::<serde_json::Value>(t).is_ok())
            .map(str::to_string)
            .or_else(|| {
                conn.query_row("SELECT json(?1)", [b], |r| r.get::<_, String>(0))
                    .ok()
            }),
        Value::Integer(_) | Value::Real(_) => None,
    };
    let what = match cell {
        Value::Blob(b) => format!("a {}-byte BLOB that is neither JSON nor JSONB", b.len()),
        _ => "not a JSON object".to_string(),
    };
    match text
        .as_deref()
        .map(serde_json::from_str::<serde_json::Value>)
    {
        Some(Ok(v)) if v.is_object() => (v, None),
        _ => (
            serde_json::Value::Null,
            Some(format!("its extdata could not be read ({what})")),
        ),
    }
}

/// GPU agents, the one most dispatches ran on first.
fn query_agents(
    conn: &Connection,
    label: &str,
    kernels: &[(String, Dispatch)],
) -> Result<Vec<AgentInfo>, IngestError> {
    let cols = &[
        "id",
        "type",
        "absolute_index",
        "name",
        "model_name",
        "product_name",
        "extdata",
    ];
    let mut found: Vec<(Option<u64>, AgentInfo)> = Vec::new();
    let q = Query {
        view: "rocpd_info_agent",
        cols,
        required: &["type"],
        filter: "",
        order: &["absolute_index"],
    };
    query_rows(conn, label, &q, |row| {
        if row.text("type").as_deref() != Some("GPU") {
            return Ok(());
        }
        let (ext, unread) = extdata(conn, row.cell("extdata"));
        let arch = row.text("name").filter(|n| n.starts_with("gfx"));
        let product = [row.text("product_name"), row.text("model_name")]
            .into_iter()
            .flatten()
            .find(|s| !s.trim().is_empty())
            .or_else(|| arch.clone())
            .unwrap_or_default();
        let mut a = super::json::agent_from_record(&ext);
        a.product = crate::cap_name(product.trim()).0.into_owned();
        a.arch = arch.or(a.arch);
        a.source = "rocpd_info_agent view".into();
        a.unread = unread;
        found.push((row.uint("absolute_index")?, a));
        Ok(())
    })?;
    let mut uses: HashMap<String, usize> = HashMap::new();
    for (_, d) in kernels {
        if let Some(a) = &d.agent {
            *uses.entry(a.clone()).or_default() += 1;
        }
    }
    let count =
        |i: &Option<u64>| i.map_or(0, |i| uses.get(&format!("Agent {i}")).copied().unwrap_or(0));
    found.sort_by_key(|(i, _)| std::cmp::Reverse(count(i)));
    Ok(found.into_iter().map(|(_, a)| a).collect())
}

fn query_copies(conn: &Connection, label: &str) -> Result<Vec<GpuActivity>, IngestError> {
    let cols = &[
        "id",
        "name",
        "start",
        "end",
        "size",
        "dst_agent_abs_index",
        "stream_id",
        "corr_id",
    ];
    let mut out = Vec::new();
    let q = Query {
        view: "memory_copies",
        cols,
        required: &["start", "end"],
        filter: "",
        order: &["start"],
    };
    query_rows(conn, label, &q, |row| {
        let (start_ns, end_ns) = row.span("memory copy")?;
        let name = row.text("name").unwrap_or_default();
        let direction = name.trim_start_matches("MEMORY_COPY_");
        out.push(GpuActivity {
            kind: ActivityKind::Memcpy,
            name: format!("Memcpy {}", crate::echo(direction)),
            start_ns,
            end_ns,
            device: row
                .uint("dst_agent_abs_index")?
                .map_or(0, |v| v.min(u32::MAX as u64) as u32),
            stream: row.uint("stream_id")?.unwrap_or(0),
            correlation: row.uint("corr_id")?.unwrap_or(0),
            grid: None,
            block: None,
            bytes: row.uint("size")?,
            copy: None,
        });
        Ok(())
    })?;
    Ok(out)
}

/// HIP API calls: the `regions` view's rows of a HIP category
/// (`HIP_RUNTIME_API_EXT`, `HIP_COMPILER_API_EXT`, as `rocpd convert` names
/// the domain).
fn query_api(conn: &Connection, label: &str) -> Result<Vec<ApiCall>, IngestError> {
    let cols = &["id", "category", "name", "tid", "start", "end", "corr_id"];
    let mut out = Vec::new();
    let q = Query {
        view: "regions",
        cols,
        required: &["category", "start", "end"],
        filter: "`category` LIKE 'HIP%'",
        order: &["start"],
    };
    query_rows(conn, label, &q, |row| {
        let (start_ns, end_ns) = row.span("HIP API call")?;
        let raw = row.text("name").unwrap_or_default();
        let (name, _) = crate::cap_name(&raw);
        out.push(ApiCall {
            kind: ApiKind::of(&name),
            name: name.into_owned(),
            start_ns,
            end_ns,
            thread: row.uint("tid")?.unwrap_or(0),
            correlation: row.uint("corr_id")?.unwrap_or(0),
            frame: None,
            op: None,
            op_span: None,
        });
        Ok(())
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sparse_file_counts_by_the_blocks_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sparse.db");
        let f = std::fs::File::create(&path).unwrap();
        std::io::Write::write_all(&mut &f, &[1u8; 4096]).unwrap();
        f.set_len(20 << 30).unwrap();
        let m = std::fs::metadata(&path).unwrap();
        assert_eq!(m.len(), 20 << 30);
        // What the file holds, not its apparent 20 GiB.
        assert!(stored_bytes(&m) < 1 << 20, "{}", stored_bytes(&m));
    }
}
