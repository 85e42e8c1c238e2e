//! One rocprof / rocprofv3 / rocprof-compute CSV file: its kind from the
//! header, its rows as dispatches, stats, copies, API calls or agents.

use std::collections::HashMap;

use kopt_model::{ActivityKind, ApiCall, ApiKind, GpuActivity};

use super::table::{integer, number, read_table, Table};
use super::{AgentInfo, AmdFile, Dispatch, KernelStat};
use crate::IngestError;

/// Timestamps beyond this (about 36 years of nanoseconds) are refused: what
/// reads a timeline multiplies spans by small factors.
pub(crate) const MAX_TIME_NS: u64 = (1 << 60) - 1;

/// Columns that describe a dispatch rather than count something.
const DISPATCH_FIELDS: &[&str] = &[
    "Kind",
    "Agent_Id",
    "GPU_ID",
    "gpu-id",
    "Queue_Id",
    "Queue_ID",
    "queue-id",
    "queue-index",
    "Stream_Id",
    "Thread_Id",
    "TID",
    "tid",
    "Process_Id",
    "PID",
    "pid",
    "Dispatch_Id",
    "Dispatch_ID",
    "Index",
    "Kernel_Id",
    "Kernel_Name",
    "KernelName",
    "Correlation_Id",
    "Correlation_ID",
    "Start_Timestamp",
    "End_Timestamp",
    "BeginNs",
    "EndNs",
    "DispatchNs",
    "CompleteNs",
    "DurationNs",
    "LDS_Block_Size",
    "LDS_Per_Workgroup",
    "lds",
    "Scratch_Size",
    "Scratch_Per_Workitem",
    "scr",
    "VGPR_Count",
    "Arch_VGPR",
    "arch_vgpr",
    "vgpr",
    "Accum_VGPR_Count",
    "Accum_VGPR",
    "accum_vgpr",
    "SGPR_Count",
    "SGPR",
    "sgpr",
    "Wave_Size",
    "wave_size",
    "Workgroup_Size",
    "wgr",
    "Workgroup_Size_X",
    "Workgroup_Size_Y",
    "Workgroup_Size_Z",
    "Grid_Size",
    "grd",
    "Grid_Size_X",
    "Grid_Size_Y",
    "Grid_Size_Z",
    "sig",
    "obj",
    "XCC_Index",
    "Counter_Name",
    "Counter_Value",
    "Private_Segment_Size",
    "Group_Segment_Size",
    "Guid",
];

/// A column rocprof-compute repeats per merged pass (`Wave_Size_3`, `Correlation_ID_12`).
fn is_dispatch_field(name: &str) -> bool {
    if DISPATCH_FIELDS.contains(&name) {
        return true;
    }
    match name.rsplit_once('_') {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            DISPATCH_FIELDS.contains(&base)
        }
        _ => false,
    }
}

/// The kernel name with the code-object suffix rocprof appends cut
/// (`vecCopy(...) (.kd)`, `__amd_rocclr_fillBufferAligned.kd`), capped.
pub(crate) fn kernel_name(raw: &str) -> (String, bool) {
    let t = raw.trim();
    let t = t.strip_suffix(" (.kd)").unwrap_or(t);
    let t = t.strip_suffix(".kd").unwrap_or(t);
    let (name, cut) = crate::cap_name(t);
    (name.into_owned(), cut)
}

/// Parse one CSV file of any rocprof flavour.
pub(crate) fn parse_csv(bytes: &[u8], label: &str) -> Result<AmdFile, IngestError> {
    let table = read_table(bytes, label)?;
    let t = &table;
    if t.header.is_empty() {
        return Err(IngestError::Empty {
            path: label.to_string(),
        });
    }
    if t.has("Counter_Name") && t.has("Counter_Value") {
        return counters_long(t, label);
    }
    if t.has("Direction") && t.has("Start_Timestamp") {
        return memory_copies(t, label);
    }
    if t.has("Function") && t.has("Start_Timestamp") {
        return api_calls(t, label);
    }
    if t.has("Name") && t.has("Calls") && t.has("TotalDurationNs") {
        return stats(t, label);
    }
    if t.has("Agent_Type") && t.has("Cu_Count") {
        return agents(t, label);
    }
    if t.has("gpu_model") || (t.has("gpu_arch") && t.has("cu_per_gpu")) {
        return sysinfo(t, label);
    }
    if t.col(&["Kernel_Name", "KernelName"]).is_some() {
        return dispatches_wide(t, label);
    }
    Err(IngestError::format(
        label,
        format!(
            "not a rocprof CSV kopt reads (header starts \"{}\"): expected a kernel trace, counter collection, kernel stats, memory copy or HIP API trace, agent info, legacy rocprof results or a rocprof-compute pmc_perf / SQ_* / sysinfo file",
            crate::echo(&t.header.iter().take(4).cloned().collect::<Vec<_>>().join(","))
        ),
    ))
}

struct Cols {
    id: Option<usize>,
    name: usize,
    agent: Option<usize>,
    queue: Option<usize>,
    stream: Option<usize>,
    correlation: Option<usize>,
    grid: [Option<usize>; 3],
    wg: [Option<usize>; 3],
    lds: Option<usize>,
    scratch: Option<usize>,
    vgpr: Option<usize>,
    accum: Option<usize>,
    sgpr: Option<usize>,
    wave: Option<usize>,
    start: Option<usize>,
    end: Option<usize>,
    duration: Option<usize>,
}

impl Cols {
    fn of(t: &Table) -> Option<Cols> {
        Some(Cols {
            id: t.col(&["Dispatch_Id", "Dispatch_ID", "Index"]),
            name: t.col(&["Kernel_Name", "KernelName"])?,
            agent: t.col(&["Agent_Id", "GPU_ID", "gpu-id"]),
            queue: t.col(&["Queue_Id", "Queue_ID", "queue-id"]),
            stream: t.col(&["Stream_Id"]),
            correlation: t.col(&["Correlation_Id", "Correlation_ID"]),
            grid: [
                t.col(&["Grid_Size_X", "Grid_Size", "grd"]),
                t.col(&["Grid_Size_Y"]),
                t.col(&["Grid_Size_Z"]),
            ],
            wg: [
                t.col(&["Workgroup_Size_X", "Workgroup_Size", "wgr"]),
                t.col(&["Workgroup_Size_Y"]),
                t.col(&["Workgroup_Size_Z"]),
            ],
            lds: t.col(&["LDS_Block_Size", "LDS_Per_Workgroup", "lds"]),
            scratch: t.col(&["Scratch_Size", "Scratch_Per_Workitem", "scr"]),
            vgpr: t.col(&["VGPR_Count", "Arch_VGPR", "arch_vgpr", "vgpr"]),
            accum: t.col(&["Accum_VGPR_Count", "Accum_VGPR", "accum_vgpr"]),
            sgpr: t.col(&["SGPR_Count", "SGPR", "sgpr"]),
            wave: t.col(&["Wave_Size", "wave_size"]),
            start: t.col(&["Start_Timestamp", "BeginNs"]),
            end: t.col(&["End_Timestamp", "EndNs"]),
            duration: t.col(&["DurationNs"]),
        })
    }

    /// The dispatch a row describes, without counters.
    fn dispatch(
        &self,
        t: &Table,
        cells: &[String],
        line: u64,
        label: &str,
        ordinal: u64,
    ) -> Result<Dispatch, IngestError> {
        let cell = |i: usize| cells.get(i).map_or("", String::as_str);
        let col = |i: usize| t.header.get(i).map_or("", String::as_str);
        let int = |c: Option<usize>| -> Result<Option<u64>, IngestError> {
            match c {
                Some(i) => integer(cell(i), label, line, col(i)),
                None => Ok(None),
            }
        };
        let num = |c: Option<usize>| -> Result<Option<f64>, IngestError> {
            match c {
                Some(i) => number(cell(i), label, line, col(i)),
                None => Ok(None),
            }
        };
        let (name, name_cut) = kernel_name(cell(self.name));
        if name.is_empty() {
            return Err(IngestError::at(label, line, "empty kernel name"));
        }
        let agent = self
            .agent
            .map(|i| cell(i).to_string())
            .filter(|a| !a.is_empty());
        let mut grid = [1u64; 3];
        let mut wg = [1u64; 3];
        for k in 0..3 {
            if let Some(v) = int(self.grid[k])? {
                grid[k] = v;
            }
            if let Some(v) = int(self.wg[k])? {
                wg[k] = v;
            }
        }
        let mut start = int(self.start)?;
        let mut end = int(self.end)?;
        if let (Some(s), None, Some(d)) = (start, end, int(self.duration)?) {
            end = s.checked_add(d);
        }
        if start.is_some_and(|s| s > MAX_TIME_NS) || end.is_some_and(|e| e > MAX_TIME_NS) {
            return Err(IngestError::at(label, line, "timestamp out of range"));
        }
        // Both below 2^60: they fit an i64.
        if let (Some(s), Some(e)) = (start, end) {
            if let Some(why) = crate::ncu::launch_too_long(s as i64, e as i64) {
                let name = |c: Option<usize>| c.map_or("", col);
                return Err(IngestError::at(
                    label,
                    line,
                    format!(
                        "{} {s} to {} {e}: {why}",
                        name(self.start),
                        if self.end.is_some() {
                            name(self.end)
                        } else {
                            "its end"
                        }
                    ),
                ));
            }
        }
        if start.is_none() || end.is_none() {
            start = None;
            end = None;
        }
        Ok(Dispatch {
            id: int(self.id)?.unwrap_or(ordinal),
            name,
            name_cut,
            agent,
            queue: int(self.queue)?,
            stream: int(self.stream)?,
            correlation: int(self.correlation)?,
            grid,
            workgroup: wg,
            lds_bytes: num(self.lds)?,
            scratch_bytes: num(self.scratch)?,
            arch_vgpr: num(self.vgpr)?,
            accum_vgpr: num(self.accum)?,
            sgpr: num(self.sgpr)?,
            wave_size: num(self.wave)?,
            start_ns: start.map(|s| s as i64),
            end_ns: end.map(|e| e as i64),
            counters: Vec::new(),
            line,
        })
    }
}

/// One row per dispatch: a rocprofv3 kernel trace, legacy rocprof results
/// (trace or `--pmc` run), rocprofv2 or rocprof-compute's per-pass files.
fn dispatches_wide(t: &Table, label: &str) -> Result<AmdFile, IngestError> {
    let cols = Cols::of(t).expect("kernel name column checked by the caller");
    let counter_cols: Vec<usize> = (0..t.header.len())
        .filter(|&i| !is_dispatch_field(&t.header[i]))
        .collect();
    let mut out = Vec::with_capacity(t.rows.len());
    for (n, (line, cells)) in t.rows.iter().enumerate() {
        let mut d = cols.dispatch(t, cells, *line, label, n as u64)?;
        for &i in &counter_cols {
            if let Some(v) = number(&cells[i], label, *line, &t.header[i])? {
                d.counters.push((t.header[i].clone(), v));
            }
        }
        d.finish_counters();
        out.push(d);
    }
    let flavor = if t.has("Kind") {
        "rocprofv3 kernel trace"
    } else if t.has("KernelName") && t.has("BeginNs") {
        "rocprof (v1) kernel trace"
    } else if t.has("KernelName") {
        "rocprof (v1) counters (--pmc)"
    } else if counter_cols.is_empty() && cols.start.is_some() {
        "rocprofv2 / rocprof-compute dispatch timestamps"
    } else if counter_cols.is_empty() {
        "rocprof-compute dispatch list"
    } else {
        "rocprofv2 / rocprof-compute counters (one row per dispatch)"
    };
    Ok(AmdFile::Dispatches(flavor, out))
}

/// rocprofv3's counter collection: one row per counter per dispatch, grouped
/// into dispatches in their first appearance's order.
fn counters_long(t: &Table, label: &str) -> Result<AmdFile, IngestError> {
    let Some(cols) = Cols::of(t) else {
        return Err(IngestError::format(
            label,
            "counter collection without a Kernel_Name column",
        ));
    };
    let name_col = t.col(&["Counter_Name"]).expect("checked by the caller");
    let value_col = t.col(&["Counter_Value"]).expect("checked by the caller");
    let mut out: Vec<Dispatch> = Vec::new();
    let mut index: HashMap<(u64, String), usize> = HashMap::new();
    // (dispatch, counter) -> where the dispatch keeps it.
    let mut counter_at: HashMap<(usize, String), usize> = HashMap::new();
    for (n, (line, cells)) in t.rows.iter().enumerate() {
        let d = cols.dispatch(t, cells, *line, label, n as u64)?;
        // The dispatch id where the file has one (older versions: the correlation id).
        let key = match cols.id {
            Some(_) => (d.id, d.name.clone()),
            None => (d.correlation.unwrap_or(n as u64), d.name.clone()),
        };
        let counter = cells[name_col].clone();
        if counter.is_empty() {
            return Err(IngestError::at(label, *line, "empty Counter_Name"));
        }
        let Some(value) = number(&cells[value_col], label, *line, "Counter_Value")? else {
            continue;
        };
        let at = match index.get(&key) {
            Some(&i) => i,
            None => {
                index.insert(key, out.len());
                out.push(d);
                out.len() - 1
            }
        };
        // Indexed, not searched: one dispatch can have tens of thousands
        // of counter rows (per-instance counters), and a search per row
        // made a 1.5 MB file take 32 s.
        let slot = &mut out[at];
        match counter_at.get(&(at, counter.clone())) {
            // A counter reported per dimension instance is summed.
            Some(&k) => slot.counters[k].1 += value,
            None => {
                counter_at.insert((at, counter.clone()), slot.counters.len());
                slot.counters.push((counter, value));
            }
        }
    }
    for d in &mut out {
        d.finish_counters();
    }
    Ok(AmdFile::Dispatches(
        "rocprofv3 counter collection (one row per counter)",
        out,
    ))
}

fn stats(t: &Table, label: &str) -> Result<AmdFile, IngestError> {
    let name = t.col(&["Name"]).expect("checked");
    let calls = t.col(&["Calls"]).expect("checked");
    let total = t.col(&["TotalDurationNs"]).expect("checked");
    let mut out = Vec::new();
    for (line, cells) in &t.rows {
        let (n, _) = kernel_name(&cells[name]);
        let c = integer(&cells[calls], label, *line, "Calls")?.unwrap_or(0);
        let ns = number(&cells[total], label, *line, "TotalDurationNs")?.unwrap_or(0.0);
        if ns < 0.0 {
            return Err(IngestError::at(label, *line, "negative TotalDurationNs"));
        }
        out.push(KernelStat {
            name: n,
            calls: c,
            total_ns: ns,
        });
    }
    Ok(AmdFile::Stats(out))
}

fn timestamps(
    t: &Table,
    cells: &[String],
    line: u64,
    label: &str,
) -> Result<(i64, i64), IngestError> {
    let s = t.col(&["Start_Timestamp"]).expect("checked");
    let e = t
        .col(&["End_Timestamp"])
        .expect("End_Timestamp comes with Start_Timestamp");
    let start = integer(&cells[s], label, line, "Start_Timestamp")?;
    let end = integer(&cells[e], label, line, "End_Timestamp")?;
    match (start, end) {
        (Some(s), Some(e)) if s <= e && e <= MAX_TIME_NS => Ok((s as i64, e as i64)),
        _ => Err(IngestError::at(
            label,
            line,
            "Start_Timestamp / End_Timestamp missing, out of range or out of order",
        )),
    }
}

fn require(t: &Table, label: &str, cols: &[&str]) -> Result<(), IngestError> {
    match cols.iter().find(|c| !t.has(c)) {
        Some(c) => Err(IngestError::format(label, format!("no {c} column"))),
        None => Ok(()),
    }
}

/// `Agent 4` / `4` as a number (0 when absent or not numeric).
fn agent_number(s: &str) -> u32 {
    s.trim_start_matches("Agent ").trim().parse().unwrap_or(0)
}

fn memory_copies(t: &Table, label: &str) -> Result<AmdFile, IngestError> {
    require(t, label, &["End_Timestamp"])?;
    let dir = t.col(&["Direction"]).expect("checked");
    let corr = t.col(&["Correlation_Id", "Correlation_ID"]);
    let stream = t.col(&["Stream_Id"]);
    let dst = t.col(&["Destination_Agent_Id"]);
    let bytes = t.col(&["Bytes", "Size"]);
    let mut out = Vec::new();
    for (line, cells) in &t.rows {
        let (start_ns, end_ns) = timestamps(t, cells, *line, label)?;
        let get = |c: Option<usize>, n: &str| match c {
            Some(i) => integer(&cells[i], label, *line, n),
            None => Ok(None),
        };
        let direction = cells[dir].trim_start_matches("MEMORY_COPY_");
        out.push(GpuActivity {
            kind: ActivityKind::Memcpy,
            name: format!("Memcpy {}", crate::echo(direction)),
            start_ns,
            end_ns,
            device: dst.map_or(0, |i| agent_number(&cells[i])),
            stream: get(stream, "Stream_Id")?.unwrap_or(0),
            correlation: get(corr, "Correlation_Id")?.unwrap_or(0),
            grid: None,
            block: None,
            bytes: get(bytes, "Bytes")?,
            copy: None,
        });
    }
    Ok(AmdFile::Copies(out))
}

fn api_calls(t: &Table, label: &str) -> Result<AmdFile, IngestError> {
    require(t, label, &["End_Timestamp"])?;
    let func = t.col(&["Function"]).expect("checked");
    let corr = t.col(&["Correlation_Id", "Correlation_ID"]);
    let tid = t.col(&["Thread_Id", "TID"]);
    let mut out = Vec::new();
    for (line, cells) in &t.rows {
        let (start_ns, end_ns) = timestamps(t, cells, *line, label)?;
        let get = |c: Option<usize>, n: &str| match c {
            Some(i) => integer(&cells[i], label, *line, n),
            None => Ok(None),
        };
        let (name, _) = crate::cap_name(&cells[func]);
        out.push(ApiCall {
            kind: ApiKind::of(&name),
            name: name.into_owned(),
            start_ns,
            end_ns,
            thread: get(tid, "Thread_Id")?.unwrap_or(0),
            correlation: get(corr, "Correlation_Id")?.unwrap_or(0),
            frame: None,
            op: None,
            op_span: None,
        });
    }
    Ok(AmdFile::Api(out))
}

/// rocprofv3's agent_info.csv: one row per agent, CPUs and GPUs.
fn agents(t: &Table, label: &str) -> Result<AmdFile, IngestError> {
    let mut out = Vec::new();
    for (line, cells) in &t.rows {
        let get = |names: &[&str]| t.col(names).map(|i| cells[i].as_str()).unwrap_or("");
        if get(&["Agent_Type"]) != "GPU" {
            continue;
        }
        let num = |names: &[&str]| number(get(names), label, *line, names[0]);
        let product = [get(&["Product_Name"]), get(&["Model_Name"]), get(&["Name"])]
            .into_iter()
            .find(|s| !s.is_empty())
            .unwrap_or("")
            .to_string();
        let arch = Some(get(&["Name"]).to_string()).filter(|s| s.starts_with("gfx"));
        let waves_per_cu = match num(&["Max_Waves_Per_Cu"])? {
            Some(w) => Some(w),
            None => match (num(&["Max_Waves_Per_Simd"])?, num(&["Simd_Per_Cu"])?) {
                (Some(a), Some(b)) => Some(a * b),
                _ => None,
            },
        };
        out.push(AgentInfo {
            product: crate::cap_name(&product).0.into_owned(),
            arch,
            node: Some(get(&["Node_Id"]).to_string()).filter(|s| !s.is_empty()),
            cus: num(&["Cu_Count"])?.map(|v| v as u32),
            sclk_mhz: num(&["Max_Engine_Clk_Fcompute"])?,
            mclk_mhz: None,
            wave_size: num(&["Wave_Front_Size"])?.map(|v| v as u32),
            lds_bytes_per_cu: num(&["Lds_Size_In_Kb"])?.map(|v| (v * 1024.0) as u64),
            max_waves_per_cu: waves_per_cu.map(|v| v as u32),
            xcds: num(&["Num_Xcc"])?.map(|v| v as u32),
            l2_channels: None,
            l2_bytes: None,
            hbm_bytes_per_s: None,
            memory_bytes: None,
            source: "agent_info.csv".into(),
            unread: None,
        });
    }
    Ok(AmdFile::Agents(out))
}

/// rocprof-compute's sysinfo.csv: one row describing the GPU profiled.
fn sysinfo(t: &Table, label: &str) -> Result<AmdFile, IngestError> {
    let Some((line, cells)) = t.rows.first() else {
        return Err(IngestError::format(label, "sysinfo.csv has no data row"));
    };
    let get = |name: &str| t.col(&[name]).map(|i| cells[i].as_str()).unwrap_or("");
    let num = |name: &str| number(get(name), label, *line, name);
    let agent = AgentInfo {
        product: crate::cap_name(get("gpu_model")).0.into_owned(),
        arch: Some(get("gpu_arch").to_string()).filter(|s| !s.is_empty()),
        node: None,
        cus: num("cu_per_gpu")?.map(|v| v as u32),
        sclk_mhz: num("max_sclk")?,
        mclk_mhz: num("max_mclk")?,
        wave_size: num("wave_size")?.map(|v| v as u32),
        lds_bytes_per_cu: None,
        max_waves_per_cu: num("max_waves_per_cu")?.map(|v| v as u32),
        xcds: num("num_xcd")?.map(|v| v as u32),
        l2_channels: num("total_l2_chan")?.map(|v| v as u32),
        l2_bytes: num("gpu_l2")?.map(|kb| (kb * 1024.0) as u64),
        hbm_bytes_per_s: num("hbm_bw")?.map(|gbs| gbs * 1e9),
        memory_bytes: None,
        source: "sysinfo.csv".into(),
        unread: None,
    };
    Ok(AmdFile::Agents(vec![agent]))
}

/// `rocminfo` text (legacy rocprof's `results.sysinfo.txt`): the first GPU agent.
pub(crate) fn rocminfo(text: &str) -> Option<AgentInfo> {
    let mut agents: Vec<HashMap<&str, &str>> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("Agent ") && line.len() < 16 {
            agents.push(HashMap::new());
            continue;
        }
        if let (Some(a), Some((k, v))) = (agents.last_mut(), line.split_once(':')) {
            a.entry(k.trim()).or_insert(v.trim());
        }
    }
    let gpu = agents
        .iter()
        .find(|a| a.get("Device Type") == Some(&"GPU"))?;
    let num = |k: &str| -> Option<f64> {
        gpu.get(k)?
            .split_whitespace()
            .next()?
            .split('(')
            .next()?
            .parse()
            .ok()
    };
    Some(AgentInfo {
        product: crate::cap_name(gpu.get("Marketing Name").copied().unwrap_or(""))
            .0
            .into_owned(),
        arch: gpu.get("Name").map(|s| s.to_string()),
        node: gpu.get("Node").map(|s| s.to_string()),
        cus: num("Compute Unit").map(|v| v as u32),
        sclk_mhz: num("Max Clock Freq. (MHz)"),
        mclk_mhz: None,
        wave_size: num("Wavefront Size").map(|v| v as u32),
        lds_bytes_per_cu: None,
        max_waves_per_cu: num("Max Waves Per CU").map(|v| v as u32),
        xcds: None,
        l2_channels: None,
        l2_bytes: None,
        hbm_bytes_per_s: None,
        memory_bytes: None,
        source: "rocminfo".into(),
        unread: None,
    })
}
