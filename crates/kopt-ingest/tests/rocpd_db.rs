//! rocpd databases (rocprofv3 `--output-format rocpd`). No real `.db` file
//! from an AMD GPU was available: every database here is SYNTHETIC, built by
//! the test on the REAL schema — ROCprofiler-SDK's own `rocpd_tables.sql`,
//! `rocpd_views.sql` and `data_views.sql` (fixtures/amd/rocpd-schema/, copied
//! verbatim) — with rows shaped the way rocprofv3's generateRocpd.cpp writes
//! them. The views kopt reads (`kernels`, `counters_collection`,
//! `memory_copies`, `regions`, `rocpd_info_agent`) are therefore the real
//! views over the real tables; only the values are made up.

use std::path::{Path, PathBuf};

use kopt_analyze::AnalyzeOptions;
use kopt_ingest::read_rocprof_files;
use kopt_ingest::rocprof::{parse_rocpd, AmdFile};
use kopt_model::BottleneckClass;
use rusqlite::{params, Connection};

#[path = "support/rocpd.rs"]
mod support;
use support::{dispatch, empty_db, symbol, trace_db};

fn db_path(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}

#[test]
fn kernel_trace_database_gives_timeline_device_and_launch_overhead() {
    let d = tempfile::tempdir().unwrap();
    let p = db_path(&d, "bench_results.db");
    trace_db(&p);
    let profile = read_rocprof_files(std::slice::from_ref(&p)).unwrap();
    assert_eq!(profile.device.name, "AMD Instinct MI300X");
    assert_eq!(profile.device.sm_count, Some(304));
    let amd = profile.device.amd.as_ref().unwrap();
    assert_eq!(amd.arch.as_deref(), Some("gfx942"));
    assert_eq!(amd.max_waves_per_cu, Some(32));
    assert_eq!(amd.xcds, Some(8));
    assert!(
        amd.source.starts_with("rocpd_info_agent view (CUs, clock)"),
        "{}",
        amd.source
    );
    assert_eq!(profile.launches.len(), 200);
    let first = &profile.launches[0];
    assert_eq!(
        first.name,
        "void tiny_add<float>(float*, float const*, int)"
    );
    assert_eq!(first.metrics.duration_ns, Some(2_000.0));
    // 4096 work-items in workgroups of 256.
    assert_eq!(first.grid.x, 16);
    assert_eq!(first.block.x, 256);
    assert_eq!(first.metrics.registers_per_thread, Some(32.0));
    let tl = profile
        .timeline
        .as_ref()
        .expect("a kernel trace has a timeline");
    // 200 kernels and the copy.
    assert_eq!(tl.activities.len(), 201);
    assert!(tl
        .activities
        .iter()
        .any(|a| a.name == "Memcpy HOST_TO_DEVICE" && a.bytes == Some(1_048_576) && a.device == 2));
    assert_eq!(tl.api_calls.len(), 200);
    assert_eq!(tl.api_calls[0].name, "hipLaunchKernel");
    // One database, one input: its agents, copies and API calls are part of it.
    assert_eq!(profile.sources.len(), 1, "{:?}", profile.sources);
    let source = &profile.sources[0];
    assert_eq!(source.path, p.display().to_string());
    assert_eq!(
        source.format,
        "rocpd database (kernels view) + agent info + 1 memory copy + 200 HIP API calls"
    );
    assert_eq!(source.launches, 200);

    // The GPU is busy 2 us of every 8: launch overhead, with HIP graph advice.
    let diag = kopt_analyze::analyze(&profile, &AnalyzeOptions::default());
    let t = diag.timeline.as_ref().expect("timeline analysis");
    assert!(t.launch_bound, "{}", t.verdict);
    assert_eq!(t.kernel_launch_calls, 200);
    assert_eq!(
        diag.primary.as_ref().unwrap().class,
        BottleneckClass::LaunchOverhead
    );
    assert!(diag
        .recommendations
        .iter()
        .any(|r| r.title.contains("HIP graph")));
}

/// Counter collection: FETCH_SIZE / WRITE_SIZE (KiB) and GRBM_GUI_ACTIVE per
/// dispatch, one pmc row per counter (the view sums instances).
#[test]
fn counters_collection_joins_counters_by_dispatch() {
    let d = tempfile::tempdir().unwrap();
    let p = db_path(&d, "counters_results.db");
    let c = empty_db(&p);
    symbol(
        &c,
        1,
        Some("stream_copy(double const*, double*, unsigned long)"),
    );
    let t0: i64 = 3_200_098_838_431_081;
    for i in 0..3i64 {
        dispatch(
            &c,
            i + 1,
            1,
            t0 + i * 1_000_000,
            t0 + i * 1_000_000 + 200_000,
            1 << 24,
        );
    }
    for (id, name) in [(1, "FETCH_SIZE"), (2, "WRITE_SIZE"), (3, "GRBM_GUI_ACTIVE")] {
        c.execute(
            "INSERT INTO rocpd_info_pmc_00001234 (id, nid, pid, agent_id, target_arch, name, symbol, description, component, value_type, block, expression)
             VALUES (?1, 1, 1, 2, 'GPU', ?2, ?2, '', 'rocm', 'ABS', '', '')",
            params![id, name],
        )
        .unwrap();
    }
    let mut row = 0;
    for i in 0..3i64 {
        // Two instances of FETCH_SIZE: the view sums them.
        for (pmc, v) in [
            (1, 131_072.0),
            (1, 131_072.0),
            (2, 262_144.0),
            (3, 420_000.0),
        ] {
            row += 1;
            c.execute(
                "INSERT INTO rocpd_pmc_event_00001234 (id, event_id, pmc_id, value) VALUES (?1, ?2, ?3, ?4)",
                params![row, 1001 + i, pmc, v],
            )
            .unwrap();
        }
    }
    drop(c);
    let bytes = std::fs::read(&p).unwrap();
    let files = parse_rocpd(&bytes, "counters_results.db").unwrap();
    let ds = files
        .iter()
        .find_map(|f| match f {
            AmdFile::Dispatches(flavor, ds) => Some((flavor, ds)),
            _ => None,
        })
        .unwrap();
    assert!(ds.0.contains("counters_collection"), "{}", ds.0);
    assert_eq!(ds.1.len(), 3);
    assert_eq!(ds.1[0].counter("FETCH_SIZE"), Some(262_144.0));

    let profile = read_rocprof_files(&[p]).unwrap();
    assert_eq!(profile.launches.len(), 3);
    let m = &profile.launches[0].metrics;
    assert_eq!(m.duration_ns, Some(200_000.0));
    // 256 MiB read + 256 MiB written in 200 us: 2.68 TB/s, half of MI300X's 5.3 TB/s.
    assert_eq!(m.dram_bytes_read, Some(256.0 * 1024.0 * 1024.0));
    assert_eq!(m.dram_bytes_write, Some(256.0 * 1024.0 * 1024.0));
    let pct = m.dram_pct.unwrap();
    assert!((pct - 50.4).abs() < 1.0, "{pct}");
    // Counter collection serialises dispatches: no timeline from it.
    assert!(profile.timeline.is_none());
}

fn error_of(path: &Path) -> String {
    read_rocprof_files(&[path.to_path_buf()])
        .unwrap_err()
        .to_string()
}

#[test]
fn malformed_databases_give_errors_naming_file_view_and_row() {
    let d = tempfile::tempdir().unwrap();

    // A kernel symbol without a name: the kernels view's name is NULL.
    let p = db_path(&d, "nullname.db");
    let c = empty_db(&p);
    symbol(&c, 1, None);
    dispatch(&c, 7, 1, 1_000, 2_000, 64);
    drop(c);
    let e = error_of(&p);
    assert!(
        e.contains("nullname.db")
            && e.contains("kernels view, row id 7")
            && e.contains("name is NULL"),
        "{e}"
    );

    // End before start: a negative duration.
    let p = db_path(&d, "negative.db");
    let c = empty_db(&p);
    symbol(&c, 1, Some("k"));
    dispatch(&c, 3, 1, 5_000, 4_000, 64);
    drop(c);
    let e = error_of(&p);
    assert!(
        e.contains("negative.db") && e.contains("row id 3") && e.contains("negative duration"),
        "{e}"
    );

    // A negative timestamp.
    let p = db_path(&d, "negstart.db");
    let c = empty_db(&p);
    symbol(&c, 1, Some("k"));
    dispatch(&c, 4, 1, -5, 4_000, 64);
    drop(c);
    let e = error_of(&p);
    assert!(e.contains("start is negative"), "{e}");

    // A counter value that is NULL.
    let p = db_path(&d, "nullcounter.db");
    let c = empty_db(&p);
    symbol(&c, 1, Some("k"));
    dispatch(&c, 1, 1, 1_000, 2_000, 64);
    c.execute_batch(
        "INSERT INTO rocpd_info_pmc_00001234 (id, nid, pid, agent_id, name, symbol) VALUES (1, 1, 1, 2, 'SQ_WAVES', 'SQ_WAVES');
         INSERT INTO rocpd_pmc_event_00001234 (id, event_id, pmc_id, value) VALUES (1, 1001, 1, NULL);",
    )
    .unwrap();
    drop(c);
    let e = error_of(&p);
    assert!(
        e.contains("counters_collection view") && e.contains("SQ_WAVES is NULL"),
        "{e}"
    );

    // An older or altered schema: the kernels view lacks a column kopt reads.
    let p = db_path(&d, "oldschema.db");
    let c = empty_db(&p);
    c.execute_batch("DROP VIEW kernels; CREATE VIEW kernels AS SELECT id, start, end FROM rocpd_kernel_dispatch;")
        .unwrap();
    drop(c);
    let e = error_of(&p);
    assert!(
        e.contains("oldschema.db")
            && e.contains("kernels view has no `name` column, which kopt needs")
            && e.contains("(its columns: id, start, end)"),
        "{e}"
    );

    // SQLite, but not rocpd (kopt's own history, say).
    let p = db_path(&d, "history.db");
    Connection::open(&p)
        .unwrap()
        .execute_batch("CREATE TABLE runs (id INTEGER PRIMARY KEY, kind TEXT);")
        .unwrap();
    let e = error_of(&p);
    assert!(
        e.contains("history.db") && e.contains("not a rocprofv3 rocpd database"),
        "{e}"
    );

    // An empty rocpd database: no dispatches.
    let p = db_path(&d, "empty.db");
    drop(empty_db(&p));
    let e = error_of(&p);
    assert!(
        e.contains("empty.db") && e.contains("no kernel dispatches"),
        "{e}"
    );
}

#[test]
fn truncated_or_corrupt_databases_never_panic() {
    let d = tempfile::tempdir().unwrap();
    let p = db_path(&d, "t.db");
    trace_db(&p);
    let bytes = std::fs::read(&p).unwrap();
    // Not SQLite at all.
    let e = parse_rocpd(b"\"Kind\",\"Agent_Id\"\n", "x.db")
        .unwrap_err()
        .to_string();
    assert!(e.contains("x.db") && e.contains("no SQLite header"), "{e}");
    // Cut at several points, and with pages overwritten: an error or a
    // (partial) read, never a panic.
    for cut in [16, 100, 4096, bytes.len() / 2, bytes.len() - 1] {
        let r = parse_rocpd(&bytes[..cut], "cut.db");
        if let Err(e) = r {
            assert!(e.to_string().contains("cut.db"), "{e}");
        }
    }
    let mut garbled = bytes.clone();
    for i in (4096..garbled.len()).step_by(97) {
        garbled[i] ^= 0x5a;
    }
    if let Err(e) = parse_rocpd(&garbled, "garbled.db") {
        assert!(e.to_string().contains("garbled.db"), "{e}");
    }
}

/// A kernels view (and a memory_copies view) from an older or newer schema
/// that lacks columns kopt can do without: read, those fields unknown.
#[test]
fn views_missing_optional_columns_are_still_read() {
    let d = tempfile::tempdir().unwrap();
    let p = db_path(&d, "older_results.db");
    trace_db(&p);
    let full = read_rocprof_files(std::slice::from_ref(&p)).unwrap();
    let c = Connection::open(&p).unwrap();
    // The views' rows kept as tables, the views rebuilt without the columns.
    c.execute_batch(
        "CREATE TABLE kernels_rows AS SELECT * FROM kernels;
         CREATE TABLE copies_rows AS SELECT * FROM memory_copies;
         DROP VIEW kernels;
         DROP VIEW memory_copies;
         CREATE VIEW kernels AS SELECT id, guid, dispatch_id, name, agent_abs_index, queue_id,
             start, end, grid_x, grid_y, grid_z, workgroup_x, workgroup_y, workgroup_z,
             lds_size, vgpr_count, sgpr_count FROM kernels_rows;
         CREATE VIEW memory_copies AS SELECT id, name, start, end, size FROM copies_rows;",
    )
    .unwrap();
    drop(c);
    let older = read_rocprof_files(std::slice::from_ref(&p)).unwrap();
    assert_eq!(older.launches.len(), 200);
    assert_eq!(older.launches[0].name, full.launches[0].name);
    assert_eq!(
        older.launches[0].metrics.duration_ns,
        full.launches[0].metrics.duration_ns
    );
    assert_eq!(older.launches[0].grid, full.launches[0].grid);
    // No stream_id: the queue stands in, as for files without streams.
    assert_eq!(older.launches[0].stream, Some(1));
    let tl = older.timeline.as_ref().unwrap();
    assert_eq!(tl.activities.len(), 201);
    let copy = tl
        .activities
        .iter()
        .find(|a| a.name == "Memcpy HOST_TO_DEVICE")
        .unwrap();
    assert_eq!(copy.bytes, Some(1_048_576));
    // The launch calls still find their kernels by correlation (the
    // dispatch id stands in for the missing corr_id).
    let diag = kopt_analyze::analyze(&older, &AnalyzeOptions::default());
    let t = diag.timeline.as_ref().unwrap();
    assert!(t.launch_bound, "{}", t.verdict);

    // Without dispatch_id, the row id numbers the dispatches.
    let c = Connection::open(&p).unwrap();
    c.execute_batch(
        "DROP VIEW kernels;
         CREATE VIEW kernels AS SELECT id, name, start, end FROM kernels_rows;",
    )
    .unwrap();
    drop(c);
    let bare = read_rocprof_files(std::slice::from_ref(&p)).unwrap();
    assert_eq!(bare.launches.len(), 200);
    assert_eq!(bare.launches[0].grid.x, 1);
}

/// The agent's extdata as a BLOB: JSON bytes and SQLite's JSONB are read;
/// bytes that are neither are said, not silently dropped.
#[test]
fn agent_extdata_stored_as_a_blob() {
    let d = tempfile::tempdir().unwrap();
    let agent = "UPDATE rocpd_info_agent_00001234 SET extdata = ";
    // 300 CUs: not the table's 304, so a figure read from extdata shows.
    let cus = "replace(extdata, '\"cu_count\":304', '\"cu_count\":300')";
    for (name, set, read) in [
        ("text", cus.to_string(), true),
        ("bytes", format!("CAST({cus} AS BLOB)"), true),
        ("jsonb", format!("jsonb({cus})"), true),
        ("junk", "x'00ff10'".to_string(), false),
    ] {
        let p = db_path(&d, &format!("{name}_results.db"));
        trace_db(&p);
        let c = Connection::open(&p).unwrap();
        c.execute(&format!("{agent}{set} WHERE type = 'GPU'"), [])
            .unwrap();
        let stored: String = c
            .query_row(
                "SELECT typeof(extdata) FROM rocpd_info_agent WHERE type = 'GPU'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(
            stored,
            if name == "text" { "text" } else { "blob" },
            "{name}"
        );
        drop(c);
        let profile = read_rocprof_files(std::slice::from_ref(&p)).unwrap();
        let amd = profile.device.amd.as_ref().unwrap();
        let source = &profile.sources[0].format;
        if read {
            assert_eq!(profile.device.sm_count, Some(300), "{name}");
            assert!(!source.contains("could not be read"), "{name}: {source}");
        } else {
            // The name still came from the view; the figures from the table.
            assert_eq!(profile.device.name, "AMD Instinct MI300X");
            assert_eq!(profile.device.sm_count, Some(304));
            let why =
                "its extdata could not be read (a 3-byte BLOB that is neither JSON nor JSONB)";
            assert!(source.contains(&format!("agent info ({why})")), "{source}");
            assert!(amd.source.contains(why), "{}", amd.source);
            assert!(
                amd.source
                    .contains("CUs, clock, peaks and the rest from kopt's AMD table"),
                "{}",
                amd.source
            );
        }
    }
}

/// Round seven: a 28 KB database whose kernels view computes 16 MB names
/// reached 3.3 GB before the SQLite memory budget tripped; a name over
/// the text cap is refused before it is copied, and the budget looks
/// often enough that such rows cannot pile up.
#[test]
fn a_view_of_huge_computed_names_is_refused_in_bounded_memory() {
    let d = tempfile::tempdir().unwrap();
    let p = db_path(&d, "bigname.db");
    let c = Connection::open(&p).unwrap();
    c.execute_batch(
        "CREATE TABLE t(x INTEGER);
         INSERT INTO t VALUES (1), (2), (3);
         CREATE VIEW kernels AS SELECT x AS id, 'g' AS guid, x AS dispatch_id,
           printf('%.*c', 2000000, 'k') AS name, 0 AS agent_abs_index, 1 AS queue_id,
           1 AS stream_id, 1000000 + x * 100 AS start, 1000000 + x * 100 + 50 AS end,
           1 AS grid_x, 1 AS grid_y, 1 AS grid_z, 64 AS workgroup_x, 1 AS workgroup_y,
           1 AS workgroup_z, 0 AS lds_size, 0 AS scratch_size, 8 AS vgpr_count,
           0 AS accum_vgpr_count, 16 AS sgpr_count, x AS corr_id FROM t;",
    )
    .unwrap();
    drop(c);
    let e = error_of(&p);
    assert!(
        e.contains("bigname.db")
            && e.contains("column `name`")
            && e.contains("2000000 bytes of text"),
        "{e}"
    );
}
