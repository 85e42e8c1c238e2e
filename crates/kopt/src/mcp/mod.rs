//! `kopt mcp`: the engine's workflows as Model Context Protocol tools over
//! stdio (newline-delimited JSON-RPC 2.0), for coding agents.
//!
//! Hand-written on serde_json rather than an SDK: the engine's workflows
//! are blocking functions, so the server is a reader loop on stdin, a
//! worker thread per tool call and one lock around stdout; an async SDK
//! would add a runtime to bridge back to threads. What it speaks: the
//! `initialize` handshake up to revision 2025-11-25, `ping`, `tools/list`,
//! `tools/call` (structured content with output schemas, progress
//! notifications, `notifications/cancelled`), `resources/list` and
//! `resources/read` (run folders).

mod cost;
mod resources;
pub mod schema;
mod tools;

use std::collections::HashMap;
use std::io::{BufRead, Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Longest message read; a longer line is skipped with a parse error.
const MAX_LINE: u64 = 16 << 20;

/// Revisions of the `initialize` handshake this server speaks, oldest first.
const PROTOCOL_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// The first revision with tool output schemas and structured content;
/// a client of an older one gets the report as JSON text instead.
const STRUCTURED_SINCE: &str = "2025-06-18";

/// Whether the session's revision has structured tool output (until the
/// client's `initialize` says otherwise, the newest's behaviour).
type Structured = Arc<AtomicBool>;

// JSON-RPC error codes.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL_ERROR: i64 = -32603;
/// MCP: a resource URI that names nothing.
const RESOURCE_NOT_FOUND: i64 = -32002;

/// How the server was started.
#[derive(Debug, Clone)]
pub struct Config {
    /// Tools run here; paths given to `analyze` and `compare` must be under it.
    pub cwd: PathBuf,
    /// Further folders `analyze` and `compare` may read (`--allow-path`).
    pub allowed: Vec<PathBuf>,
    /// Calls in flight at once, any tool (`--max-calls`).
    pub max_calls: usize,
}

/// Calls in flight at once by default: each may hold a whole trace's
/// analysis in memory (0.4 GB for an EfficientNet capture), and 40 at once
/// took 15 GB; a further call is refused as busy.
pub const DEFAULT_MAX_CALLS: u64 = 4;

/// One line of JSON at a time on stdout, whichever thread writes.
#[derive(Clone)]
pub struct Out {
    sink: Arc<Mutex<Box<dyn Write + Send>>>,
}

impl Out {
    pub fn new(sink: Box<dyn Write + Send>) -> Out {
        Out {
            sink: Arc::new(Mutex::new(sink)),
        }
    }

    /// A client that went away is not an error here: the reader sees EOF.
    pub fn send(&self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        let mut sink = self.sink.lock().unwrap_or_else(|e| e.into_inner());
        let _ = sink.write_all(line.as_bytes()).and_then(|_| sink.flush());
    }

    fn result(&self, id: &Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    fn error(&self, id: &Value, code: i64, message: &str) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        );
    }
}

/// A tool call running now.
struct InFlight {
    /// Stops its workload: the client's cancellation, its budget, or stdin
    /// closed.
    cancel: Arc<AtomicBool>,
    /// The client cancelled it: it gets no answer.
    by_client: Arc<AtomicBool>,
    runs_workload: bool,
}

/// Tool calls running now, by request id (its JSON text). A call is
/// answered by whoever takes it out of the map (its worker, or the server
/// at exit), while holding the lock, so each gets one answer and the
/// server never exits between a call's removal and its answer.
#[derive(Clone, Default)]
struct Running {
    calls: Arc<Mutex<HashMap<String, InFlight>>>,
    /// Stdin closed: the calls in flight are stopped and each answered.
    closing: Arc<AtomicBool>,
}

impl Running {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, InFlight>> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How long the server waits at exit for the calls it stopped to answer
/// for themselves; those still running are then answered with an error.
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// Calls that run a workload at once: one, since two on one device would
/// perturb each other's timings; a further one is refused, saying which
/// runs (an agent that fires 300 benches must not start 300 workloads).
const MAX_WORKLOAD_CALLS: usize = 1;

/// Serve MCP on stdin / stdout until the client closes stdin.
pub fn serve_stdio(config: Config) -> std::io::Result<()> {
    // Not only the paths a client names: every file an input leads to (a
    // run folder's entries, a trace's siblings) is read inside these.
    let roots: Vec<PathBuf> = std::iter::once(config.cwd.clone())
        .chain(config.allowed.iter().cloned())
        .collect();
    kopt_engine::confine_reads(&roots);
    let out = Out::new(Box::new(std::io::stdout()));
    serve(std::io::stdin().lock(), out, config)
}

/// Serve requests read from `input`; replies and notifications go to `out`.
pub fn serve(mut input: impl BufRead, out: Out, config: Config) -> std::io::Result<()> {
    let config = Arc::new(config);
    let running = Running::default();
    let structured: Structured = Arc::new(AtomicBool::new(true));
    let mut workers = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        if (&mut input).take(MAX_LINE).read_until(b'\n', &mut line)? == 0 {
            break;
        }
        if line.len() as u64 == MAX_LINE && line.last() != Some(&b'\n') {
            // Skip the rest of the line: one message is not worth the memory.
            let mut rest = Vec::new();
            while (&mut input).take(MAX_LINE).read_until(b'\n', &mut rest)? > 0 {
                if rest.last() == Some(&b'\n') {
                    break;
                }
                rest.clear();
            }
            out.error(
                &Value::Null,
                PARSE_ERROR,
                "parse error: a message longer than 16 MiB",
            );
            continue;
        }
        // Parsed from the bytes: invalid UTF-8 anywhere (an id's string
        // too) is a parse error, never replaced and echoed back altered.
        let text = line.trim_ascii();
        if text.is_empty() {
            continue;
        }
        let message: Value = match serde_json::from_slice(text) {
            Ok(v) => v,
            Err(e) => {
                out.error(&Value::Null, PARSE_ERROR, &format!("parse error: {e}"));
                continue;
            }
        };
        if let Some(worker) = handle(message, &out, &config, &running, &structured) {
            workers.push(worker);
        }
        workers.retain(|w: &std::thread::JoinHandle<()>| !w.is_finished());
    }
    // The client closed stdin: stop every call's workload, let each
    // answer (with its result, or the error its stop gives), and answer
    // those that do not stop in time, then leave.
    running.closing.store(true, Ordering::SeqCst);
    for call in running.lock().values() {
        call.cancel.store(true, Ordering::SeqCst);
    }
    let deadline = Instant::now() + EXIT_GRACE;
    while workers.iter().any(|w| !w.is_finished()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut calls = running.lock();
    for (key, call) in calls.drain() {
        if call.by_client.load(Ordering::SeqCst) {
            continue;
        }
        let id: Value = serde_json::from_str(&key).unwrap_or(Value::Null);
        out.result(
            &id,
            json!({
                "content": [{"type": "text", "text": format!(
                    "stopped: the client closed stdin while this call ran, and it did not finish within {} s of being stopped; the server exited (its workload is killed with it)",
                    EXIT_GRACE.as_secs()
                )}],
                "isError": true,
            }),
        );
    }
    Ok(())
}

/// One message; a tool call returns its worker thread.
fn handle(
    message: Value,
    out: &Out,
    config: &Arc<Config>,
    running: &Running,
    structured: &Structured,
) -> Option<std::thread::JoinHandle<()>> {
    let Value::Object(msg) = message else {
        out.error(
            &Value::Null,
            INVALID_REQUEST,
            "invalid request: a JSON-RPC 2.0 message is one object (batches are not part of MCP)",
        );
        return None;
    };
    let id = msg.get("id").cloned();
    // A number id must be an integer a client's 64 bits hold: a larger one
    // is read as a float and would come back rounded.
    let id_ok = match &id {
        Some(Value::String(_)) => true,
        Some(Value::Number(n)) => n.is_i64() || n.is_u64(),
        _ => false,
    };
    let method = msg.get("method").and_then(Value::as_str);
    if msg.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        if id.is_some() || method.is_some() {
            out.error(
                &id.filter(|_| id_ok).unwrap_or(Value::Null),
                INVALID_REQUEST,
                "invalid request: \"jsonrpc\" must be \"2.0\"",
            );
        }
        return None;
    }
    let Some(method) = method else {
        // A response from the client (this server sends no requests): nothing to do.
        if msg.contains_key("result") || msg.contains_key("error") {
            return None;
        }
        out.error(
            &id.filter(|_| id_ok).unwrap_or(Value::Null),
            INVALID_REQUEST,
            "invalid request: no \"method\"",
        );
        return None;
    };
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    let Some(id) = id else {
        notification(method, &params, running);
        return None;
    };
    if !id_ok {
        out.error(
            &Value::Null,
            INVALID_REQUEST,
            "invalid request: \"id\" must be a string or an integer within 64 bits",
        );
        return None;
    }
    if !(params.is_object() || params.is_null()) {
        out.error(
            &id,
            INVALID_PARAMS,
            "invalid params: \"params\" must be an object",
        );
        return None;
    }
    match method {
        "initialize" => {
            let reply = initialize(&params);
            let version = reply["protocolVersion"].as_str().unwrap_or_default();
            structured.store(version >= STRUCTURED_SINCE, Ordering::SeqCst);
            out.result(&id, reply)
        }
        // Every message is info; a client's level changes nothing.
        "ping" | "logging/setLevel" => out.result(&id, json!({})),
        "tools/list" => {
            let mut list = tools::list();
            if !structured.load(Ordering::SeqCst) {
                for t in list.iter_mut().filter_map(Value::as_object_mut) {
                    t.remove("outputSchema");
                    t.remove("title");
                }
            }
            out.result(&id, json!({ "tools": list }))
        }
        "tools/call" => {
            let structured = structured.load(Ordering::SeqCst);
            return call(id, &params, out, config, running, structured);
        }
        "resources/list" => match resources::list(&config.cwd) {
            Ok(list) => out.result(&id, json!({"resources": list})),
            Err(e) => out.error(&id, INTERNAL_ERROR, &e),
        },
        "resources/templates/list" => {
            out.result(&id, json!({"resourceTemplates": resources::templates()}))
        }
        "resources/read" => match params.get("uri").and_then(Value::as_str) {
            None => out.error(
                &id,
                INVALID_PARAMS,
                "invalid params: \"uri\" (a string) is required",
            ),
            Some(uri) => match resources::read(&config.cwd, uri) {
                Ok(contents) => out.result(&id, json!({"contents": [contents]})),
                Err(e) => out.error(&id, RESOURCE_NOT_FOUND, &e),
            },
        },
        _ => out.error(
            &id,
            METHOD_NOT_FOUND,
            // Quoted as any input is: cut and escaped (a 1 MB name came back whole).
            &format!("method not found: {}", kopt_model::text::echo(method)),
        ),
    }
    None
}

fn notification(method: &str, params: &Value, running: &Running) {
    if method == "notifications/cancelled" {
        if let Some(id) = params.get("requestId") {
            if let Some(call) = running.lock().get(&id.to_string()) {
                call.by_client.store(true, Ordering::SeqCst);
                call.cancel.store(true, Ordering::SeqCst);
            }
        }
    }
    // notifications/initialized and the rest need nothing.
}

/// A tool's error result when stdin closed while it ran: said to be the
/// stop's doing where the stop caused it (the call says it was cancelled or
/// stopped). A result that completed, or an error of its own (bad
/// arguments, a missing file), is left as it is.
fn said_stopped_at_exit(mut result: Value) -> Value {
    if result["isError"] != json!(true) {
        return result;
    }
    if let Some(Value::String(text)) = result
        .get_mut("content")
        .and_then(|c| c.get_mut(0))
        .and_then(|c| c.get_mut("text"))
    {
        let by_the_stop = text.contains("cancelled") || text.contains("stopped");
        if by_the_stop {
            *text = format!("stopped: the client closed stdin while this call ran: {text}");
        }
    }
    result
}

/// A tool result for a client older than structured output: the report
/// as one more text block, as the spec asks of servers for such clients.
fn unstructured(mut result: Value) -> Value {
    if let Some(data) = result
        .as_object_mut()
        .and_then(|r| r.remove("structuredContent"))
    {
        if let Some(content) = result["content"].as_array_mut() {
            content.push(json!({"type": "text", "text": data.to_string()}));
        }
    }
    result
}

fn initialize(params: &Value) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = asked
        .filter(|v| PROTOCOL_VERSIONS.contains(v))
        .unwrap_or(PROTOCOL_VERSIONS[PROTOCOL_VERSIONS.len() - 1]);
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {}, "resources": {}, "logging": {}},
        "serverInfo": {"name": "kopt", "title": "kopt: profile-guided GPU kernel optimization", "version": env!("CARGO_PKG_VERSION")},
        "instructions": "kopt's profiler and benchmark as tools. Check `history` before paying for a measurement again. Long tools (profile, trace, bench, optimize, tune) take budget_s, the device seconds you allow: each says its estimate first and refuses when it exceeds the budget. Results carry the kopt/1 report as structured content; run folders are resources (kopt://runs/ID/report.json)."
    })
}

fn call(
    id: Value,
    params: &Value,
    out: &Out,
    config: &Arc<Config>,
    running: &Running,
    structured: bool,
) -> Option<std::thread::JoinHandle<()>> {
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        out.error(
            &id,
            INVALID_PARAMS,
            "invalid params: \"name\" (a string) is required",
        );
        return None;
    };
    let Some(tool) = tools::find(name) else {
        out.error(&id, INVALID_PARAMS, &format!("unknown tool: {name}"));
        return None;
    };
    let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
    let token = params
        .get("_meta")
        .and_then(|m| m.get("progressToken"))
        .filter(|t| t.is_string() || t.is_number())
        .cloned();
    let key = id.to_string();
    let cancel = Arc::new(AtomicBool::new(false));
    let by_client = Arc::new(AtomicBool::new(false));
    {
        let mut map = running.lock();
        if map.contains_key(&key) {
            out.error(
                &id,
                INVALID_REQUEST,
                "invalid request: this id is already in use by a running call",
            );
            return None;
        }
        if map.len() >= config.max_calls.max(1) {
            out.result(
                &id,
                json!({
                    "content": [{"type": "text", "text": format!(
                        "busy: {} calls in flight already (at most {} at once, each may hold a whole trace in memory; `kopt mcp --max-calls` sets it); wait for one to finish, then call {name} again",
                        map.len(), config.max_calls.max(1)
                    )}],
                    "isError": true,
                }),
            );
            return None;
        }
        let busy = map.values().filter(|c| c.runs_workload).count();
        if tool.runs_workload() && busy >= MAX_WORKLOAD_CALLS {
            out.result(
                &id,
                json!({
                    "content": [{"type": "text", "text": format!(
                        "busy: {busy} call running a workload already (at most {MAX_WORKLOAD_CALLS} at once, so measurements do not perturb each other); wait for it to finish or cancel it, then call {name} again"
                    )}],
                    "isError": true,
                }),
            );
            return None;
        }
        map.insert(
            key.clone(),
            InFlight {
                cancel: Arc::clone(&cancel),
                by_client: Arc::clone(&by_client),
                runs_workload: tool.runs_workload(),
            },
        );
    }
    let (w_out, w_config, w_running, w_id) =
        (out.clone(), Arc::clone(config), running.clone(), id.clone());
    let spawned = std::thread::Builder::new()
        .name(format!("kopt-mcp {name}"))
        .spawn(move || {
            let (out, config, running, id) = (w_out, w_config, w_running, w_id);
            let ctx = tools::Context::new(&config, &out, token, Arc::clone(&cancel));
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                tools::run(tool, arguments, &ctx)
            }));
            let mut calls = running.lock();
            // Answered by the server at exit already.
            if calls.remove(&key).is_none() {
                return;
            }
            // A request the client cancelled gets no response (it stopped
            // waiting); one stopped by its budget or by stdin closing does.
            if by_client.load(Ordering::SeqCst) {
                return;
            }
            let closing = running.closing.load(Ordering::SeqCst);
            match result {
                Ok(result) => {
                    let result = if closing {
                        said_stopped_at_exit(result)
                    } else {
                        result
                    };
                    let result = if structured {
                        result
                    } else {
                        unstructured(result)
                    };
                    out.result(&id, result)
                }
                Err(_) => out.error(
                    &id,
                    INTERNAL_ERROR,
                    "internal error: the tool failed unexpectedly",
                ),
            }
            drop(calls);
        });
    match spawned {
        Ok(h) => Some(h),
        Err(e) => {
            // Nothing runs it: forget the id again.
            running.lock().remove(&id.to_string());
            out.error(
                &id,
                INTERNAL_ERROR,
                &format!("cannot start a worker thread: {e}"),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> Value {
        json!({"isError": true, "content": [{"type": "text", "text": text}]})
    }

    #[test]
    fn only_errors_the_stop_caused_are_said_to_be_the_stops() {
        let said = said_stopped_at_exit(error("cancelled"));
        assert_eq!(
            said["content"][0]["text"],
            "stopped: the client closed stdin while this call ran: cancelled"
        );
        for own in [
            "invalid arguments: files is empty",
            "x.json: No such file or directory",
        ] {
            assert_eq!(said_stopped_at_exit(error(own))["content"][0]["text"], own);
        }
        let ok = json!({"isError": false, "content": [{"type": "text", "text": "done"}]});
        assert_eq!(said_stopped_at_exit(ok.clone()), ok);
    }
}
