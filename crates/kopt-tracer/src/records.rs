//! The trace's JSON lines (ARCHITECTURE.md, "The kopt trace format"): one
//! pure function per record kind, from plain values to one line ending in
//! `\n`. No CUDA here, so the format is tested against kopt-ingest's parser
//! without a GPU (`tests/tracer_records.rs`).

/// Escape a string for a JSON value.
pub fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A kernel as CUPTI recorded it (the fields kopt keeps, in CUPTI's types).
#[derive(Debug, Clone, Copy)]
pub struct KernelRecord<'a> {
    /// Mangled, as CUPTI gives it.
    pub name: &'a str,
    pub start: u64,
    pub end: u64,
    pub device: u32,
    pub stream: u32,
    pub correlation: u32,
    pub grid: [i32; 3],
    pub block: [i32; 3],
    pub registers: u16,
    /// Static and dynamic shared memory together, bytes per block.
    pub shared_memory: i64,
    pub graph: u32,
}

/// `{"t":"kernel",...}`
pub fn kernel_line(k: &KernelRecord<'_>) -> String {
    format!(
        "{{\"t\":\"kernel\",\"name\":{},\"s\":{},\"e\":{},\"dev\":{},\"str\":{},\"c\":{},\"g\":[{},{},{}],\"b\":[{},{},{}],\"reg\":{},\"smem\":{},\"graph\":{}}}\n",
        json_str(k.name),
        k.start,
        k.end,
        k.device,
        k.stream,
        k.correlation,
        k.grid[0],
        k.grid[1],
        k.grid[2],
        k.block[0],
        k.block[1],
        k.block[2],
        k.registers,
        k.shared_memory,
        k.graph
    )
}

/// A memcpy or memset as CUPTI recorded it.
#[derive(Debug, Clone, Copy)]
pub struct CopyRecord {
    pub start: u64,
    pub end: u64,
    pub device: u32,
    pub stream: u32,
    pub correlation: u32,
    pub bytes: u64,
}

/// `{"t":"memcpy",...}`, named after CUPTI's copy kind; `sk`/`dk` are
/// CUPTI's memory kinds of source and destination
/// (`CUpti_ActivityMemoryKind`: 1 pageable, 2 pinned, 3 device, 5 managed).
pub fn memcpy_line(copy_kind: u8, memory_kinds: [u8; 2], m: &CopyRecord) -> String {
    format!(
        "{{\"t\":\"memcpy\",\"name\":\"Memcpy kind {}\",\"s\":{},\"e\":{},\"dev\":{},\"str\":{},\"c\":{},\"bytes\":{},\"sk\":{},\"dk\":{}}}\n",
        copy_kind, m.start, m.end, m.device, m.stream, m.correlation, m.bytes, memory_kinds[0], memory_kinds[1]
    )
}

/// `{"t":"memset",...}`
pub fn memset_line(m: &CopyRecord) -> String {
    format!(
        "{{\"t\":\"memset\",\"name\":\"Memset\",\"s\":{},\"e\":{},\"dev\":{},\"str\":{},\"c\":{},\"bytes\":{}}}\n",
        m.start, m.end, m.device, m.stream, m.correlation, m.bytes
    )
}

/// `{"t":"api",...}`: a runtime or driver call, from an activity record or
/// from CUPTI's callbacks (`tid` is then the kernel's thread id).
pub fn api_line(name: &str, start: u64, end: u64, tid: i64, correlation: u32) -> String {
    format!(
        "{{\"t\":\"api\",\"name\":{},\"s\":{start},\"e\":{end},\"tid\":{tid},\"c\":{correlation}}}\n",
        json_str(name)
    )
}

/// A GPU as CUPTI describes it.
#[derive(Debug, Clone, Copy)]
pub struct DeviceRecord<'a> {
    pub id: u32,
    pub name: &'a str,
    pub sms: u32,
    /// Compute capability: major, minor.
    pub cc: [u32; 2],
    pub mem_bw_kbs: u64,
    pub clock_khz: u32,
}

/// `{"t":"device",...}`
pub fn device_line(d: &DeviceRecord<'_>) -> String {
    format!(
        "{{\"t\":\"device\",\"id\":{},\"name\":{},\"sms\":{},\"cc\":[{},{}],\"mem_bw_kbs\":{},\"clock_khz\":{}}}\n",
        d.id,
        json_str(d.name),
        d.sms,
        d.cc[0],
        d.cc[1],
        d.mem_bw_kbs,
        d.clock_khz
    )
}

/// One NVTX marker record as a trace line: a range's start (with its name)
/// or end (same id); instantaneous marks are skipped.
pub fn marker_line(
    flags: u32,
    id: u32,
    timestamp: u64,
    tid: u32,
    name: Option<String>,
    domain: Option<String>,
) -> Option<String> {
    const START: u32 = 2;
    const END: u32 = 4;
    if flags & START != 0 {
        Some(format!(
            "{{\"t\":\"range_start\",\"id\":{id},\"s\":{timestamp},\"tid\":{tid},\"name\":{},\"dom\":{}}}\n",
            json_str(name.as_deref().unwrap_or("")),
            json_str(domain.as_deref().unwrap_or(""))
        ))
    } else if flags & END != 0 {
        Some(format!(
            "{{\"t\":\"range_end\",\"id\":{id},\"s\":{timestamp}}}\n"
        ))
    } else {
        None
    }
}

/// `{"t":"window",...}`: a sampled window's bounds, after its records.
pub fn window_line(start: u64, end: u64) -> String {
    format!("{{\"t\":\"window\",\"s\":{start},\"e\":{end}}}\n")
}

/// `{"t":"process",...}`: the trace's first line; `run` is the workload's
/// `KOPT_TRACE_RUN` (the same in every process of one run), so a reader
/// merges only the `trace.jsonl.<pid>` files of that run.
pub fn process_line(pid: u32, run: Option<&str>) -> String {
    process_line_of(pid, run, None)
}

/// A process's place in a distributed job, from the launcher's
/// environment (torchrun, mpirun and Slurm wrappers set `RANK`,
/// `LOCAL_RANK` and `WORLD_SIZE`): which trace is which rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankRecord {
    pub rank: u32,
    pub local_rank: Option<u32>,
    pub world_size: u32,
}

/// `{"t":"process","pid":P[,"run":R][,"rank":N,"local_rank":L,"world_size":W]}`.
pub fn process_line_of(pid: u32, run: Option<&str>, rank: Option<RankRecord>) -> String {
    let mut line = format!("{{\"t\":\"process\",\"pid\":{pid}");
    if let Some(run) = run {
        line += &format!(",\"run\":{}", json_str(run));
    }
    if let Some(r) = rank {
        line += &format!(",\"rank\":{}", r.rank);
        if let Some(l) = r.local_rank {
            line += &format!(",\"local_rank\":{l}");
        }
        line += &format!(",\"world_size\":{}", r.world_size);
    }
    line + "}\n"
}

/// `{"t":"api_counts","calls":{NAME:N,...}}`: every runtime and driver call
/// CUPTI recorded, by name, including those not written as `api` lines
/// (`KOPT_TRACER_APIS=all`): how many calls a step makes.
pub fn api_counts_line(counts: &[(String, u64)]) -> String {
    let calls: Vec<String> = counts
        .iter()
        .map(|(name, n)| format!("{}:{n}", json_str(name)))
        .collect();
    format!(
        "{{\"t\":\"api_counts\",\"calls\":{{{}}}}}\n",
        calls.join(",")
    )
}

/// `{"t":"end",...}`: the last line, written by the exit handler.
pub fn end_line(records: u64, dropped: u64, lost_buffers: u64) -> String {
    format!(
        "{{\"t\":\"end\",\"records\":{records},\"dropped\":{dropped},\"lost_buffers\":{lost_buffers}}}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_counts_are_one_object() {
        let line = api_counts_line(&[
            ("cudaGetDevice_v3020".into(), 7),
            ("cuLaunchKernel".into(), 2),
        ]);
        assert_eq!(
            line,
            "{\"t\":\"api_counts\",\"calls\":{\"cudaGetDevice_v3020\":7,\"cuLaunchKernel\":2}}\n"
        );
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_str("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    }

    #[test]
    fn nvtx_markers_become_range_lines() {
        let start = marker_line(2, 7, 1000, 42, Some("step".into()), None).unwrap();
        assert_eq!(
            start,
            "{\"t\":\"range_start\",\"id\":7,\"s\":1000,\"tid\":42,\"name\":\"step\",\"dom\":\"\"}\n"
        );
        let end = marker_line(4, 7, 2000, 42, None, None).unwrap();
        assert_eq!(end, "{\"t\":\"range_end\",\"id\":7,\"s\":2000}\n");
        assert!(marker_line(1, 8, 3000, 42, Some("mark".into()), None).is_none());
    }

    #[test]
    fn window_process_and_end_lines() {
        assert_eq!(window_line(5, 9), "{\"t\":\"window\",\"s\":5,\"e\":9}\n");
        assert_eq!(process_line(12, None), "{\"t\":\"process\",\"pid\":12}\n");
        let rank = RankRecord {
            rank: 1,
            local_rank: Some(1),
            world_size: 2,
        };
        assert_eq!(
            process_line_of(12, None, Some(rank)),
            "{\"t\":\"process\",\"pid\":12,\"rank\":1,\"local_rank\":1,\"world_size\":2}\n"
        );
        assert_eq!(
            process_line(12, Some("r1")),
            "{\"t\":\"process\",\"pid\":12,\"run\":\"r1\"}\n"
        );
        assert_eq!(
            end_line(3, 1, 0),
            "{\"t\":\"end\",\"records\":3,\"dropped\":1,\"lost_buffers\":0}\n"
        );
    }

    /// The lines byte for byte as the tracer wrote them before the writer
    /// became functions of its own.
    #[test]
    fn lines_match_the_format_written_so_far() {
        let k = KernelRecord {
            name: "_Z1kPi",
            start: 10,
            end: 20,
            device: 0,
            stream: 7,
            correlation: 3,
            grid: [4, 1, 1],
            block: [128, 1, 1],
            registers: 32,
            shared_memory: 1024,
            graph: 0,
        };
        assert_eq!(
            kernel_line(&k),
            "{\"t\":\"kernel\",\"name\":\"_Z1kPi\",\"s\":10,\"e\":20,\"dev\":0,\"str\":7,\"c\":3,\"g\":[4,1,1],\"b\":[128,1,1],\"reg\":32,\"smem\":1024,\"graph\":0}\n"
        );
        let m = CopyRecord {
            start: 1,
            end: 2,
            device: 0,
            stream: 7,
            correlation: 4,
            bytes: 64,
        };
        assert_eq!(
            memcpy_line(1, [1, 3], &m),
            "{\"t\":\"memcpy\",\"name\":\"Memcpy kind 1\",\"s\":1,\"e\":2,\"dev\":0,\"str\":7,\"c\":4,\"bytes\":64,\"sk\":1,\"dk\":3}\n"
        );
        assert_eq!(
            memset_line(&m),
            "{\"t\":\"memset\",\"name\":\"Memset\",\"s\":1,\"e\":2,\"dev\":0,\"str\":7,\"c\":4,\"bytes\":64}\n"
        );
        assert_eq!(
            api_line("cudaLaunchKernel_v7000", 5, 6, 42, 3),
            "{\"t\":\"api\",\"name\":\"cudaLaunchKernel_v7000\",\"s\":5,\"e\":6,\"tid\":42,\"c\":3}\n"
        );
        let d = DeviceRecord {
            id: 0,
            name: "NVIDIA H200",
            sms: 132,
            cc: [9, 0],
            mem_bw_kbs: 4_800_000_000,
            clock_khz: 1_980_000,
        };
        assert_eq!(
            device_line(&d),
            "{\"t\":\"device\",\"id\":0,\"name\":\"NVIDIA H200\",\"sms\":132,\"cc\":[9,0],\"mem_bw_kbs\":4800000000,\"clock_khz\":1980000}\n"
        );
    }
}
