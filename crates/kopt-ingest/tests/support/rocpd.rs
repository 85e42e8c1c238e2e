//! Builds synthetic rocpd databases on the REAL schema: ROCprofiler-SDK's own
//! `rocpd_tables.sql`, `rocpd_views.sql` and `data_views.sql`
//! (fixtures/amd/rocpd-schema/, copied verbatim), with rows shaped the way
//! rocprofv3's generateRocpd.cpp writes them and made-up values. Shared by
//! kopt-ingest's rocpd tests and kopt's CLI tests (`#[path]` includes it).

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection};

pub const GUID: &str = "0000ddb5-8903-7903-b269-cd8d3745bb8a";

pub fn schema(file: &str) -> String {
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
pub fn empty_db(path: &Path) -> Connection {
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

pub fn symbol(c: &Connection, id: i64, name: Option<&str>) {
    c.execute(
        "INSERT INTO rocpd_info_kernel_symbol_00001234 (id, nid, pid, code_object_id, kernel_name, display_name, arch_vgpr_count, accum_vgpr_count, sgpr_count, group_segment_size)
         VALUES (?1, 1, 1, 1, ?2, ?2, 32, 0, 24, 0)",
        params![id, name],
    )
    .unwrap();
}

/// One dispatch with its event (category KERNEL_DISPATCH), as rocprofv3 writes it.
pub fn dispatch(c: &Connection, dispatch_id: i64, kernel: i64, start: i64, end: i64, grid: i64) {
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
pub fn api_call(c: &Connection, id: i64, name_id: i64, start: i64, end: i64) {
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
pub fn trace_db(path: &Path) {
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
