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

const GUID: &str = "0000ddb5-8903-7903-b269-cd8d3745bb8a";

fn schema(file: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/amd/rocpd-schema")
        .join(file);
    std::fs::read_to_string(&p)
        .unwrap()
        .replace("{{uuid}}", "_00001234")
        .replace("{{guid}}", GUID)
}

/// An empty rocpd database: the real tables and views, one node, process,
/// thread, queue, a CPU and an MI300X agent (extdata as rocprofv3 writes it).
fn empty_db(path: &Path) -> Connection {
    let c = Connection::open(path).unwrap();
    // Test speed only: nothing here needs durability.
    c.execute_batch("PRAGMA synchronous = OFF; PRAGMA journal_mode = MEMORY;")
        .unwrap();
    for f in ["rocpd_tables.sql", "rocpd_views.sql", "data_views.sql"] {
        c.execute_batch(&schema(f))
            .unwrap_or_else(|e| panic!("{f}: {e}"));
    }
    c.execute_batch(
        r#"
        INSERT INTO rocpd_info_node_00001234 (id, hash, machine_id, hostname) VALUES (1, 7, 'm0', 'node0');
        INSERT INTO rocpd_info_process_00001234 (id, nid, pid, command) VALUES (1, 1, 4242, 'python3 bench.py');
        INSERT INTO rocpd_info_thread_00001234 (id, nid, pid, tid) VALUES (1, 1, 1, 4242);
        INSERT INTO rocpd_info_agent_00001234 (id, nid, pid, type, absolute_index, logical_index, type_index, name, product_name, extdata)
            VALUES (0, 1, 1, 'CPU', 0, 0, 0, 'AMD EPYC 9654', 'AMD EPYC 9654', '{"cpu_cores_count":96}');
        INSERT INTO rocpd_info_agent_00001234 (id, nid, pid, type, absolute_index, logical_index, type_index, name, model_name, product_name, extdata)
            VALUES (2, 1, 1, 'GPU', 2, 1, 0, 'gfx942', 'aqua_vanjaram', 'AMD Instinct MI300X',
            '{"cu_count":304,"simd_per_cu":4,"max_waves_per_simd":8,"wave_front_size":64,"num_xcc":8,"max_engine_clk_fcompute":2100,"lds_size_in_kb":64,"name":"gfx942"}');
        INSERT INTO rocpd_info_queue_00001234 (id, nid, pid, name) VALUES (1, 1, 1, 'Queue 1');
        INSERT INTO rocpd_info_stream_00001234 (id, nid, pid, name) VALUES (0, 1, 1, 'Stream 0');
        INSERT INTO rocpd_info_code_object_00001234 (id, nid, pid, agent_id, uri) VALUES (1, 1, 1, 2, 'file:///bench.hsaco');
        INSERT INTO rocpd_string_00001234 (id, string) VALUES
            (1, 'KERNEL_DISPATCH'), (2, 'HIP_RUNTIME_API_EXT'), (3, 'MEMORY_COPY'),
            (4, 'hipLaunchKernel'), (5, 'MEMORY_COPY_HOST_TO_DEVICE'), (6, 'hipMemcpyAsync'),
            (7, 'main_region');
        "#,
    )
    .unwrap();
    c
}

fn symbol(c: &Connection, id: i64, name: Option<&str>) {
    c.execute(
        "INSERT INTO rocpd_info_kernel_symbol_00001234 (id, nid, pid, code_object_id, kernel_name, display_name, arch_vgpr_count, accum_vgpr_count, sgpr_count, group_segment_size)
         VALUES (?1, 1, 1, 1, ?2, ?2, 32, 0, 24, 0)",
        params![id, name],
    )
    .unwrap();
}

/// One dispatch with its event (category KERNEL_DISPATCH), as rocprofv3 writes it.
fn dispatch(c: &Connection, dispatch_id: i64, kernel: i64, start: i64, end: i64, grid: i64) {
    let event = 1000 + dispatch_id;
    c.execute(
        "INSERT INTO rocpd_event_00001234 (id, category_id, correlation_id) VALUES (?1, 1, ?2)",
        params![event, dispatch_id],
    )
    .unwrap();
    c.execute(
        "INSERT INTO rocpd_kernel_dispatch_00001234 (id, nid, pid, tid, agent_id, kernel_id, dispatch_id, queue_id, stream_id, start, end,
            private_segment_size, group_segment_size, workgroup_size_x, workgroup_size_y, workgroup_size_z, grid_size_x, grid_size_y, grid_size_z, region_name_id, event_id)
         VALUES (?1, 1, 1, 1, 2, ?2, ?1, 1, 0, ?3, ?4, 0, 0, 256, 1, 1, ?5, 1, 1, 7, ?6)",
        params![dispatch_id, kernel, start, end, grid, event],
    )
    .unwrap();
}

/// A HIP API call (a region with an event of category HIP_RUNTIME_API_EXT).
fn api_call(c: &Connection, id: i64, name_id: i64, start: i64, end: i64) {
    let event = 5000 + id;
    c.execute(
        "INSERT INTO rocpd_event_00001234 (id, category_id, correlation_id) VALUES (?1, 2, ?2)",
        params![event, id],
    )
    .unwrap();
    c.execute(
        "INSERT INTO rocpd_region_00001234 (id, nid, pid, tid, start, end, name_id, event_id) VALUES (?1, 1, 1, 1, ?2, ?3, ?4, ?5)",
        params![id, start, end, name_id, event],
    )
    .unwrap();
}

/// A launch-bound step: 200 tiny kernels of 2 us, each launched by a
/// hipLaunchKernel of 6 us, so the GPU idles between them; one host-to-device copy.
fn trace_db(path: &Path) {
    let c = empty_db(path);
    symbol(
        &c,
        1,
        Some("void tiny_add<float>(float*, float const*, int)"),
    );
    symbol(&c, 2, Some("tiny_scale(float*, float, int)"));
    let t0: i64 = 1_550_151_853_000_000;
    for i in 0..200i64 {
        let launch = t0 + i * 8_000;
        api_call(&c, i + 1, 4, launch, launch + 6_000);
        let k = if i % 2 == 0 { 1 } else { 2 };
        dispatch(&c, i + 1, k, launch + 6_500, launch + 8_500, 4096);
    }
    c.execute(
        "INSERT INTO rocpd_event_00001234 (id, category_id, correlation_id) VALUES (9000, 3, 9000)",
        [],
    )
    .unwrap();
    c.execute(
        "INSERT INTO rocpd_memory_copy_00001234 (id, nid, pid, tid, start, end, name_id, dst_agent_id, src_agent_id, size, queue_id, stream_id, event_id)
         VALUES (1, 1, 1, 1, ?1, ?2, 5, 2, 0, 1048576, 1, 0, 9000)",
        params![t0 - 100_000, t0 - 50_000],
    )
    .unwrap();
}

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
        amd.source.contains("rocpd rocpd_info_agent"),
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
    assert!(profile
        .sources
        .iter()
        .any(|s| s.format.contains("rocpd database (kernels view)") && s.launches == 200));

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
        e.contains("oldschema.db") && e.contains("kernels view") && e.contains("no such column"),
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
