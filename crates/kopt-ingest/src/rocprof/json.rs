//! rocprofv3's JSON output (`--output-format json`, `*_results.json`): a
//! top-level `rocprofiler-sdk-tool` array, one object per process, each with
//! `agents`, `counters`, `kernel_symbols`, `strings` (operation names per
//! record kind), `buffer_records` (`kernel_dispatch`, `memory_copy`,
//! `hip_api`, ...) and `callback_records.counter_collection`. The layout is
//! ROCprofiler-SDK's `source/docs/rocprofv3-schema.json`.

use std::collections::HashMap;

use kopt_model::{ActivityKind, ApiCall, ApiKind, GpuActivity};
use serde_json::Value;

use super::parse::{kernel_name, MAX_TIME_NS};
use super::{AgentInfo, AmdFile, Dispatch};
use crate::IngestError;

/// The key rocprofv3's JSON output starts with.
pub const TOP_KEY: &str = "rocprofiler-sdk-tool";

/// rocprofiler's agent type for a GPU (`ROCPROFILER_AGENT_TYPE_GPU`).
const AGENT_TYPE_GPU: u64 = 2;

/// Does the start of a file look like rocprofv3 JSON? (`{` then the key
/// `"rocprofiler-sdk-tool"` first, as rocprofv3 writes it.)
pub fn sniff_json(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    let t = text.trim_start_matches('\u{feff}').trim_start();
    let Some(rest) = t.strip_prefix('{') else {
        return false;
    };
    rest.trim_start()
        .strip_prefix('"')
        .is_some_and(|r| r.starts_with(TOP_KEY) && r[TOP_KEY.len()..].starts_with('"'))
}

/// An agent record (`agents[]` in JSON, `rocpd_info_agent.extdata` in rocpd):
/// what kopt's device model uses from it.
pub(crate) fn agent_from_record(v: &Value) -> AgentInfo {
    let n = |k: &str| v.get(k).and_then(Value::as_f64).filter(|x| *x > 0.0);
    let s = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|x| !x.is_empty())
    };
    let waves =
        n("max_waves_per_cu").or_else(|| Some(n("max_waves_per_simd")? * n("simd_per_cu")?));
    let product = s("product_name")
        .or(s("model_name"))
        .or(s("name"))
        .unwrap_or("");
    AgentInfo {
        product: crate::cap_name(product).0.into_owned(),
        arch: s("name")
            .filter(|a| a.starts_with("gfx"))
            .map(str::to_string),
        node: v
            .get("node_id")
            .and_then(Value::as_u64)
            .map(|x| x.to_string()),
        cus: n("cu_count").map(|x| x.min(u32::MAX as f64) as u32),
        sclk_mhz: n("max_engine_clk_fcompute"),
        mclk_mhz: None,
        wave_size: n("wave_front_size").map(|x| x.min(u32::MAX as f64) as u32),
        lds_bytes_per_cu: n("lds_size_in_kb").map(|kb| (kb * 1024.0).min(u64::MAX as f64) as u64),
        max_waves_per_cu: waves.map(|x| x.min(u32::MAX as f64) as u32),
        xcds: n("num_xcc").map(|x| x.min(u32::MAX as f64) as u32),
        l2_channels: None,
        l2_bytes: None,
        hbm_bytes_per_s: None,
        memory_bytes: None,
        source: "rocprofv3 JSON agents".into(),
        unread: None,
    }
}

/// A record's place in the file, for messages: `buffer_records.kernel_dispatch[3]`.
struct At<'a> {
    label: &'a str,
    process: usize,
    path: String,
}

impl At<'_> {
    fn err(&self, message: impl std::fmt::Display) -> IngestError {
        IngestError::format(
            self.label,
            format!("{TOP_KEY}[{}].{}: {message}", self.process, self.path),
        )
    }

    /// A non-negative integer field (a number written as a float is
    /// accepted when whole); missing or null is `None`.
    fn uint(&self, v: &Value, key: &str) -> Result<Option<u64>, IngestError> {
        match v.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(x)) => match x.as_u64() {
                Some(u) => Ok(Some(u)),
                None => match x.as_f64() {
                    Some(f) if (0.0..1.8e19).contains(&f) && f.fract() == 0.0 => Ok(Some(f as u64)),
                    _ => Err(self.err(format!("{key} is {x}, not a non-negative integer"))),
                },
            },
            Some(other) => Err(self.err(format!(
                "{key}: expected a number, found {}",
                kind_of(other)
            ))),
        }
    }

    /// `{"handle": N}` (agent, queue, counter ids), or a bare number.
    fn handle(&self, v: &Value, key: &str) -> Result<Option<u64>, IngestError> {
        match v.get(key) {
            Some(h @ Value::Object(_)) => self.uint(h, "handle"),
            _ => self.uint(v, key),
        }
    }

    fn span(&self, v: &Value) -> Result<(i64, i64), IngestError> {
        let start = self.uint(v, "start_timestamp")?;
        let end = self.uint(v, "end_timestamp")?;
        match (start, end) {
            (Some(s), Some(e)) if s <= e && e <= MAX_TIME_NS => Ok((s as i64, e as i64)),
            (Some(s), Some(e)) if e < s => Err(self.err(format!(
                "end_timestamp ({e}) before start_timestamp ({s}), a negative duration"
            ))),
            (Some(_), Some(_)) => Err(self.err("timestamp out of range")),
            _ => Err(self.err("start_timestamp / end_timestamp missing")),
        }
    }

    /// A kernel dispatch's [`At::span`], no longer than any launch.
    fn launch_span(&self, v: &Value) -> Result<(i64, i64), IngestError> {
        let (s, e) = self.span(v)?;
        match crate::ncu::launch_too_long(s, e) {
            Some(why) => Err(self.err(format!("start_timestamp {s} to end_timestamp {e}: {why}"))),
            None => Ok((s, e)),
        }
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The array at `key` of `v` (missing or null: empty).
fn array<'v>(at: &At, v: &'v Value, key: &str) -> Result<&'v [Value], IngestError> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(other) => Err(at.err(format!(
            "{key}: expected an array, found {}",
            kind_of(other)
        ))),
    }
}

/// Operation names per record kind: `strings.buffer_records[kind].operations[op]`.
struct OpNames(Vec<Vec<String>>);

impl OpNames {
    fn of(process: &Value) -> OpNames {
        let kinds = process
            .get("strings")
            .and_then(|s| s.get("buffer_records"))
            .and_then(Value::as_array);
        OpNames(
            kinds
                .map(|ks| {
                    ks.iter()
                        .map(|k| {
                            k.get("operations")
                                .and_then(Value::as_array)
                                .map(|ops| {
                                    ops.iter()
                                        .map(|o| o.as_str().unwrap_or("").to_string())
                                        .collect()
                                })
                                .unwrap_or_default()
                        })
                        .collect()
                })
                .unwrap_or_default(),
        )
    }

    fn name(&self, kind: Option<u64>, op: Option<u64>) -> Option<&str> {
        let k = self.0.get(usize::try_from(kind?).ok()?)?;
        k.get(usize::try_from(op?).ok()?)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }
}

/// Parse rocprofv3 JSON: agents, kernel dispatches (counters joined on by
/// dispatch id), memory copies and HIP API calls.
pub fn parse_rocprofv3_json(bytes: &[u8], label: &str) -> Result<Vec<AmdFile>, IngestError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(IngestError::Empty {
            path: label.to_string(),
        });
    }
    let root: Value = serde_json::from_slice(bytes).map_err(|e| {
        IngestError::at(
            label,
            e.line() as u64,
            format!("not valid JSON: {}", crate::one_line(&e.to_string())),
        )
    })?;
    let processes = processes(&root, label)?;
    let mut agents = Vec::new();
    let mut traced: Vec<Dispatch> = Vec::new();
    let mut counted_only: Vec<Dispatch> = Vec::new();
    let mut copies = Vec::new();
    let mut api = Vec::new();
    for (p, process) in processes.iter().enumerate() {
        let mut at = At {
            label,
            process: p,
            path: String::new(),
        };
        if !process.is_object() {
            at.path = "(process)".into();
            return Err(at.err(format!("expected an object, found {}", kind_of(process))));
        }
        let t = tables(&mut at, process, &mut agents)?;
        let none = Value::Null;
        let buffers = process.get("buffer_records").unwrap_or(&none);
        let callbacks = process.get("callback_records").unwrap_or(&none);
        dispatches(
            &mut at,
            &t,
            buffers,
            callbacks,
            &mut traced,
            &mut counted_only,
        )?;
        memory_copies(&mut at, &t, buffers, &mut copies)?;
        hip_calls(&mut at, &t, buffers, &mut api)?;
    }
    Ok(assemble(agents, traced, counted_only, copies, api))
}

/// The file's processes: an array, or one process written as an object.
fn processes<'v>(root: &'v Value, label: &str) -> Result<&'v [Value], IngestError> {
    match root.get(TOP_KEY) {
        Some(Value::Array(a)) => Ok(a.as_slice()),
        // One process written as an object (older tools) reads the same.
        Some(o @ Value::Object(_)) => Ok(std::slice::from_ref(o)),
        Some(other) => Err(IngestError::format(
            label,
            format!("{TOP_KEY}: expected an array, found {}", kind_of(other)),
        )),
        None => Err(IngestError::format(
            label,
            format!("not rocprofv3 JSON: no top-level \"{TOP_KEY}\" key"),
        )),
    }
}

/// One process's lookup tables: agent handles to node ids, kernel symbols
/// and counter names by id, operation names.
struct Tables<'v> {
    agent_node: HashMap<u64, u64>,
    symbols: HashMap<u64, &'v Value>,
    counter_names: HashMap<u64, String>,
    ops: OpNames,
}

/// The process's tables; its GPU agents are added to `agents`.
fn tables<'v>(
    at: &mut At,
    process: &'v Value,
    agents: &mut Vec<AgentInfo>,
) -> Result<Tables<'v>, IngestError> {
    // Agents: id handle -> node id (the CSV's "Agent N").
    let mut agent_node: HashMap<u64, u64> = HashMap::new();
    for (i, a) in array(at, process, "agents")?.iter().enumerate() {
        at.path = format!("agents[{i}]");
        let id = at.handle(a, "id")?;
        let node = at.uint(a, "node_id")?;
        if let (Some(id), Some(node)) = (id, node) {
            agent_node.insert(id, node);
        }
        if at.uint(a, "type")? == Some(AGENT_TYPE_GPU) {
            agents.push(agent_from_record(a));
        }
    }
    // Kernel symbols by kernel id.
    let mut symbols: HashMap<u64, &Value> = HashMap::new();
    for (i, s) in array(at, process, "kernel_symbols")?.iter().enumerate() {
        at.path = format!("kernel_symbols[{i}]");
        if let Some(id) = at.uint(s, "kernel_id")? {
            symbols.insert(id, s);
        }
    }
    // Counter names by counter id.
    let mut counter_names: HashMap<u64, String> = HashMap::new();
    for (i, c) in array(at, process, "counters")?.iter().enumerate() {
        at.path = format!("counters[{i}]");
        if let (Some(id), Some(name)) = (at.handle(c, "id")?, c.get("name").and_then(Value::as_str))
        {
            counter_names.insert(id, name.to_string());
        }
    }
    Ok(Tables {
        agent_node,
        symbols,
        counter_names,
        ops: OpNames::of(process),
    })
}

/// A kernel dispatch from its record and `dispatch_info`, named from its
/// kernel symbol; times, counters and line are the caller's to set.
fn dispatch(t: &Tables, at: &At, rec: &Value, info: &Value) -> Result<Dispatch, IngestError> {
    let kernel_id = at.uint(info, "kernel_id")?;
    let sym = kernel_id.and_then(|k| t.symbols.get(&k).copied());
    let raw = sym
        .and_then(|s| {
            [
                "formatted_kernel_name",
                "demangled_kernel_name",
                "kernel_name",
            ]
            .iter()
            .find_map(|k| s.get(*k).and_then(Value::as_str).filter(|n| !n.is_empty()))
        })
        .map(str::to_string)
        .unwrap_or_else(|| match kernel_id {
            Some(k) => format!("kernel_id {k} (no kernel symbol in the file)"),
            None => "unknown kernel (no kernel_id)".to_string(),
        });
    let (name, name_cut) = kernel_name(&raw);
    let dim = |key: &str| -> Result<[u64; 3], IngestError> {
        let mut v = [1u64; 3];
        if let Some(d) = info.get(key) {
            for (k, axis) in ["x", "y", "z"].iter().enumerate() {
                if let Some(x) = at.uint(d, axis)? {
                    v[k] = x;
                }
            }
        }
        Ok(v)
    };
    let agent = at
        .handle(info, "agent_id")?
        .map(|h| t.agent_node.get(&h).copied().unwrap_or(h));
    let num = |v: &Value, k: &str| -> Result<Option<f64>, IngestError> {
        Ok(at.uint(v, k)?.map(|x| x as f64))
    };
    // Register counts: the record's own, else its kernel symbol's.
    let rec_or_symbol = |k: &str| -> Result<Option<f64>, IngestError> {
        match num(rec, k)? {
            Some(v) => Ok(Some(v)),
            None => Ok(sym.map(|s| num(s, k)).transpose()?.flatten()),
        }
    };
    let corr = rec
        .get("correlation_id")
        .map(|c| at.uint(c, "internal"))
        .transpose()?
        .flatten();
    Ok(Dispatch {
        id: at
            .uint(info, "dispatch_id")?
            .ok_or_else(|| at.err("dispatch_info without a dispatch_id"))?,
        name,
        name_cut,
        agent: agent.map(|a| format!("Agent {a}")),
        queue: at.handle(info, "queue_id")?,
        stream: at.handle(rec, "stream_id")?,
        correlation: corr,
        grid: dim("grid_size")?,
        workgroup: dim("workgroup_size")?,
        lds_bytes: num(info, "group_segment_size")?,
        scratch_bytes: num(info, "private_segment_size")?,
        arch_vgpr: rec_or_symbol("arch_vgpr_count")?,
        accum_vgpr: rec_or_symbol("accum_vgpr_count")?,
        sgpr: rec_or_symbol("sgpr_count")?,
        wave_size: None,
        start_ns: None,
        end_ns: None,
        counters: Vec::new(),
        line: 0,
    })
}

/// The kernel trace's dispatches (into `traced`), and counter collection
/// joined on by dispatch id; dispatches counted but not traced go to
/// `counted_only`.
fn dispatches(
    at: &mut At,
    t: &Tables,
    buffers: &Value,
    callbacks: &Value,
    traced: &mut Vec<Dispatch>,
    counted_only: &mut Vec<Dispatch>,
) -> Result<(), IngestError> {
    // Kernel dispatches (the kernel trace).
    let first = traced.len();
    for (i, rec) in array(at, buffers, "kernel_dispatch")?.iter().enumerate() {
        at.path = format!("buffer_records.kernel_dispatch[{i}]");
        let info = rec
            .get("dispatch_info")
            .filter(|v| v.is_object())
            .ok_or_else(|| at.err("no dispatch_info object"))?;
        let mut d = dispatch(t, at, rec, info)?;
        let (s, e) = at.launch_span(rec)?;
        d.start_ns = Some(s);
        d.end_ns = Some(e);
        d.line = i as u64;
        traced.push(d);
    }
    let index: HashMap<u64, usize> = traced[first..]
        .iter()
        .enumerate()
        .map(|(i, d)| (d.id, first + i))
        .collect();
    // Counter collection, joined on by dispatch id.
    for (i, rec) in array(at, callbacks, "counter_collection")?
        .iter()
        .enumerate()
    {
        at.path = format!("callback_records.counter_collection[{i}]");
        let data = rec
            .get("dispatch_data")
            .filter(|v| v.is_object())
            .ok_or_else(|| at.err("no dispatch_data object"))?;
        let info = data
            .get("dispatch_info")
            .filter(|v| v.is_object())
            .ok_or_else(|| at.err("no dispatch_data.dispatch_info object"))?;
        let counters = counter_values(at, rec, &t.counter_names)?;
        let mut d = dispatch(t, at, rec, info)?;
        match index.get(&d.id) {
            Some(&k) => traced[k].counters.extend(counters),
            None => {
                // Counter collection without a kernel trace: the
                // dispatch's own timestamps where the record has them.
                if data.get("start_timestamp").is_some() {
                    let (s, e) = at.launch_span(data)?;
                    d.start_ns = Some(s);
                    d.end_ns = Some(e);
                }
                d.counters = counters;
                d.line = i as u64;
                counted_only.push(d);
            }
        }
    }
    Ok(())
}

/// A counter collection record's values by counter name, one value per
/// dimension instance summed, as the CSV output does.
fn counter_values(
    at: &At,
    rec: &Value,
    counter_names: &HashMap<u64, String>,
) -> Result<Vec<(String, f64)>, IngestError> {
    let mut counters: Vec<(String, f64)> = Vec::new();
    for (j, r) in array(at, rec, "records")?.iter().enumerate() {
        let id = at.handle(r, "counter_id")?;
        let value = match r.get("value") {
            Some(Value::Number(n)) => n.as_f64().filter(|v| v.is_finite()),
            _ => None,
        }
        .ok_or_else(|| at.err(format!("records[{j}]: value missing or not a number")))?;
        let name = match id.and_then(|id| counter_names.get(&id)) {
            Some(n) => n.clone(),
            None => {
                return Err(at.err(format!(
                    "records[{j}]: counter id {} not among the file's counters",
                    id.map_or("(none)".to_string(), |i| i.to_string())
                )))
            }
        };
        // One value per dimension instance: summed, as the CSV output does.
        match counters.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => *v += value,
            None => counters.push((name, value)),
        }
    }
    Ok(counters)
}

/// The process's memory copies, onto `copies`.
fn memory_copies(
    at: &mut At,
    t: &Tables,
    buffers: &Value,
    copies: &mut Vec<GpuActivity>,
) -> Result<(), IngestError> {
    for (i, rec) in array(at, buffers, "memory_copy")?.iter().enumerate() {
        at.path = format!("buffer_records.memory_copy[{i}]");
        let (start_ns, end_ns) = at.span(rec)?;
        let op = t
            .ops
            .name(at.uint(rec, "kind")?, at.uint(rec, "operation")?)
            .unwrap_or("MEMORY_COPY");
        let dst = at
            .handle(rec, "dst_agent_id")?
            .map(|h| t.agent_node.get(&h).copied().unwrap_or(h));
        copies.push(GpuActivity {
            kind: ActivityKind::Memcpy,
            name: format!(
                "Memcpy {}",
                crate::echo(op.trim_start_matches("MEMORY_COPY_"))
            ),
            start_ns,
            end_ns,
            device: dst.map_or(0, |d| d.min(u32::MAX as u64) as u32),
            stream: at.handle(rec, "stream_id")?.unwrap_or(0),
            correlation: rec
                .get("correlation_id")
                .map(|c| at.uint(c, "internal"))
                .transpose()?
                .flatten()
                .unwrap_or(0),
            grid: None,
            block: None,
            bytes: at.uint(rec, "bytes")?,
            copy: None,
        });
    }
    Ok(())
}

/// The process's HIP API calls, onto `api`.
fn hip_calls(
    at: &mut At,
    t: &Tables,
    buffers: &Value,
    api: &mut Vec<ApiCall>,
) -> Result<(), IngestError> {
    for (i, rec) in array(at, buffers, "hip_api")?.iter().enumerate() {
        at.path = format!("buffer_records.hip_api[{i}]");
        let (start_ns, end_ns) = at.span(rec)?;
        let op = at.uint(rec, "operation")?;
        let name = match t.ops.name(at.uint(rec, "kind")?, op) {
            Some(n) => crate::cap_name(n).0.into_owned(),
            None => format!("HIP API operation {}", op.unwrap_or(0)),
        };
        api.push(ApiCall {
            kind: ApiKind::of(&name),
            name,
            start_ns,
            end_ns,
            thread: at.uint(rec, "thread_id")?.unwrap_or(0),
            correlation: rec
                .get("correlation_id")
                .map(|c| at.uint(c, "internal"))
                .transpose()?
                .flatten()
                .unwrap_or(0),
            frame: None,
            op: None,
            op_span: None,
        });
    }
    Ok(())
}

/// The files one rocprofv3 JSON stands for, as its CSV outputs would be.
fn assemble(
    agents: Vec<AgentInfo>,
    mut traced: Vec<Dispatch>,
    mut counted_only: Vec<Dispatch>,
    copies: Vec<GpuActivity>,
    api: Vec<ApiCall>,
) -> Vec<AmdFile> {
    let mut out = Vec::new();
    if !agents.is_empty() {
        out.push(AmdFile::Agents(agents));
    }
    for d in traced.iter_mut().chain(counted_only.iter_mut()) {
        d.finish_counters();
    }
    let counted = traced.iter().any(|d| !d.counters.is_empty());
    if !traced.is_empty() || counted_only.is_empty() {
        let flavor = if counted {
            "rocprofv3 JSON (kernel_dispatch with counter_collection)"
        } else {
            "rocprofv3 JSON (kernel_dispatch)"
        };
        out.push(AmdFile::Dispatches(flavor, traced));
    }
    if !counted_only.is_empty() {
        out.push(AmdFile::Dispatches(
            "rocprofv3 JSON (counter_collection)",
            counted_only,
        ));
    }
    if !copies.is_empty() {
        out.push(AmdFile::Copies(copies));
    }
    if !api.is_empty() {
        out.push(AmdFile::Api(api));
    }
    out
}
