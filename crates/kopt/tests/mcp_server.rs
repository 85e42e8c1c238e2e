//! `kopt mcp` driven over its pipes: the protocol's errors (malformed JSON,
//! unknown methods and tools, wrong argument types) each get a JSON-RPC
//! error or an error result and the server keeps serving; a client that
//! disconnects mid-call leaves no workload behind; analyze agrees with the
//! CLI. The MCP Python SDK's end-to-end test is crates/kopt-py/tests/test_mcp.py.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    dir: tempfile::TempDir,
}

impl Server {
    fn start(extra: &[&str]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        Server::start_in(dir, extra)
    }

    fn start_in(dir: tempfile::TempDir, extra: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kopt"))
            .arg("mcp")
            .args(extra)
            .current_dir(dir.path())
            .env("KOPT_TRACER", "/nonexistent/libkopt_tracer.so")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Server {
            child,
            stdin,
            stdout,
            dir,
        }
    }

    /// A call `id` of `tool` (profile or bench) whose workload writes its
    /// pid and sleeps a minute; its pid once it runs.
    /// Calls `history` (ids from 10) until one is not refused busy, at most
    /// `within` after the first.
    fn wait_for_a_free_slot(&mut self, within: Duration) {
        let start = Instant::now();
        loop {
            let r = self.call(
                10 + start.elapsed().as_millis() as u64,
                "history",
                json!({}),
            );
            if r["isError"] == false {
                return;
            }
            assert!(start.elapsed() < within, "{r}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn start_sleeper(&mut self, id: u64, tool: &str) -> i32 {
        let pid_file = self.dir.path().join(format!("pid-{id}"));
        let line = format!("echo $$ > {}; exec sleep 60", pid_file.display());
        let arguments = if tool == "bench" {
            json!({"baseline": [line], "candidate": ["true"], "shell": true, "budget_s": 300})
        } else {
            json!({"command": [line], "shell": true, "budget_s": 300})
        };
        self.send_raw(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
                .to_string(),
        );
        wait_for_pid(&pid_file)
    }

    fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// The next message that is not a notification.
    fn reply(&mut self) -> Value {
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "server closed stdout"
            );
            let v: Value = serde_json::from_str(&line).unwrap();
            if v.get("method").is_none() {
                return v;
            }
        }
    }

    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send_raw(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        );
        let r = self.reply();
        assert_eq!(r["id"], id, "{r}");
        r
    }

    fn call(&mut self, id: u64, tool: &str, arguments: Value) -> Value {
        self.request(
            id,
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        )["result"]
            .clone()
    }

    fn initialize(&mut self) -> Value {
        let r = self.request(
            0,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}),
        );
        self.send_raw(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        r
    }

    fn ping_ok(&mut self, id: u64) {
        let r = self.request(id, "ping", json!({}));
        assert_eq!(r["result"], json!({}), "{r}");
    }

    /// Close stdin; the server must exit 0 within `limit`.
    fn close(mut self, limit: Duration) {
        drop(self.stdin.take());
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "{status}");
                return;
            }
            assert!(
                start.elapsed() < limit,
                "server still running after stdin closed"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn initialize_and_list_tools() {
    let mut s = Server::start(&[]);
    let r = s.initialize();
    assert_eq!(r["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(r["result"]["serverInfo"]["name"], "kopt");
    let r = s.request(1, "tools/list", json!({}));
    let names: Vec<&str> = r["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "analyze",
            "analyze_ranks",
            "profile",
            "trace",
            "bench",
            "compare",
            "optimize",
            "tune",
            "details",
            "history",
            "journal_add"
        ]
    );
    // Small enough for an agent's budget for tools (#37): 146 KB before.
    let listed = r["result"]["tools"].to_string();
    assert!(
        listed.len() <= 20_000,
        "tools/list is {} bytes",
        listed.len()
    );
    for t in r["result"]["tools"].as_array().unwrap() {
        assert!(t["title"].is_string(), "{t}");
        let writes = matches!(
            t["name"].as_str().unwrap(),
            "profile" | "trace" | "bench" | "compare" | "optimize" | "tune" | "journal_add"
        );
        // compare records its verdict in the history: not read-only.
        assert_eq!(t["annotations"]["readOnlyHint"], !writes, "{t}");
    }
    // The full output schema is a resource the compact one names.
    let diag = &r["result"]["tools"][0]["outputSchema"];
    assert!(diag["description"]
        .as_str()
        .unwrap()
        .contains("kopt://schema/diagnosis"));
    let full = s.request(
        4,
        "resources/read",
        json!({"uri": "kopt://schema/diagnosis"}),
    );
    let text = full["result"]["contents"][0]["text"].as_str().unwrap();
    let full: Value = serde_json::from_str(text).unwrap();
    assert!(full["$defs"].is_object(), "{full}");
    for key in diag["properties"].as_object().unwrap().keys() {
        assert!(full["properties"].get(key).is_some(), "{key}");
    }
    // An older client gets its own revision; an unknown one the newest.
    let r = s.request(2, "initialize", json!({"protocolVersion": "2025-06-18"}));
    assert_eq!(r["result"]["protocolVersion"], "2025-06-18");
    let r = s.request(3, "initialize", json!({"protocolVersion": "1999-01-01"}));
    assert_eq!(r["result"]["protocolVersion"], "2025-11-25");
    // 2024-11-05 is spoken too: no output schemas, the report as text.
    let r = s.request(5, "initialize", json!({"protocolVersion": "2024-11-05"}));
    assert_eq!(r["result"]["protocolVersion"], "2024-11-05");
    let r = s.request(6, "tools/list", json!({}));
    assert!(r["result"]["tools"][0].get("outputSchema").is_none(), "{r}");
    let r = s.call(7, "history", json!({}));
    assert!(r.get("structuredContent").is_none(), "{r}");
    let last = r["content"].as_array().unwrap().last().unwrap()["text"]
        .as_str()
        .unwrap();
    let report: Value = serde_json::from_str(last).unwrap();
    assert_eq!(report["runs"], json!([]));
    s.close(Duration::from_secs(5));
}

#[test]
fn protocol_errors_answer_and_the_server_keeps_serving() {
    let mut s = Server::start(&[]);
    s.initialize();
    let cases: Vec<(&str, Value, i64)> = vec![
        ("{not json", Value::Null, -32700),
        ("[1, 2]", Value::Null, -32600),
        (r#"{"id": 5, "method": "ping"}"#, json!(5), -32600),
        (r#"{"jsonrpc": "2.0", "id": 6}"#, json!(6), -32600),
        (
            r#"{"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"}"#,
            Value::Null,
            -32600,
        ),
        // #39: an id beyond 64 bits came back rounded (a float): refused.
        (
            r#"{"jsonrpc": "2.0", "id": 18446744073709551616, "method": "ping"}"#,
            Value::Null,
            -32600,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 7, "method": "no/such"}"#,
            json!(7),
            -32601,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "nope"}}"#,
            json!(8),
            -32602,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {}}"#,
            json!(9),
            -32602,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": [1]}"#,
            json!(10),
            -32602,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 11, "method": "resources/read", "params": {"uri": "kopt://runs/../x/report.json"}}"#,
            json!(11),
            -32002,
        ),
    ];
    for (i, (line, id, code)) in cases.into_iter().enumerate() {
        s.send_raw(line);
        let r = s.reply();
        assert_eq!(r["error"]["code"], code, "{line}: {r}");
        assert_eq!(r["id"], id, "{line}: {r}");
        s.ping_ok(100 + i as u64);
    }
    // Invalid UTF-8 is a parse error too.
    s.stdin.as_mut().unwrap().write_all(b"\xff\xfe\n").unwrap();
    assert_eq!(s.reply()["error"]["code"], -32700);
    // #39: and inside a string (an id came back with U+FFFD in it).
    s.stdin
        .as_mut()
        .unwrap()
        .write_all(b"{\"jsonrpc\": \"2.0\", \"id\": \"a\xffb\", \"method\": \"ping\"}\n")
        .unwrap();
    let r = s.reply();
    assert_eq!(r["error"]["code"], -32700, "{r}");
    assert_eq!(r["id"], Value::Null, "{r}");
    // Round seven: a 1 MB method name came back whole in the error.
    let long = "m".repeat(1 << 20);
    s.send_raw(&format!(
        r#"{{"jsonrpc": "2.0", "id": 12, "method": "{long}"}}"#
    ));
    let r = s.reply();
    assert_eq!(r["error"]["code"], -32601, "{}", &r.to_string()[..200]);
    assert!(r.to_string().len() < 2_000, "{} bytes", r.to_string().len());
    // A notification gets no answer; the next request does.
    s.send_raw(r#"{"jsonrpc":"2.0","method":"notifications/whatever"}"#);
    s.ping_ok(200);
    s.close(Duration::from_secs(5));
}

#[test]
fn wrong_argument_types_are_error_results() {
    let mut s = Server::start(&[]);
    s.initialize();
    for (tool, args) in [
        ("analyze", json!({"files": 5})),
        ("analyze", json!({})),
        (
            "bench",
            json!({"baseline": ["true"], "candidate": ["true"], "budget_s": "ten"}),
        ),
        ("compare", json!({"reference": 1, "candidate": 2})),
        ("history", json!({"limit": -1})),
        (
            "profile",
            json!({"command": ["true"], "budget_s": 5, "extra": 1}),
        ),
    ] {
        let r = s.call(1, tool, args.clone());
        assert_eq!(r["isError"], true, "{tool} {args}: {r}");
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("invalid arguments"), "{text}");
        s.ping_ok(2);
    }
    s.close(Duration::from_secs(5));
}

#[test]
fn analyze_matches_the_cli_and_paths_stay_inside() {
    let csv = fixture("labeled-suite-h100/ncu_raw_base.csv");
    let cli = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["analyze", "-f", "json"])
        .arg(&csv)
        .output()
        .unwrap();
    assert!(cli.status.success());
    let cli: Value = serde_json::from_slice(&cli.stdout).unwrap();

    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(&csv, dir.path().join("base.csv")).unwrap();
    let mut s = Server::start_in(dir, &[]);
    s.initialize();
    let r = s.call(1, "analyze", json!({"files": ["base.csv"]}));
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["primary"], cli["primary"]);
    assert_eq!(r["structuredContent"]["schema"], "kopt/1");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("Primary bottleneck"), "{text}");

    // The fixture itself is outside the server's folder: refused.
    let r = s.call(2, "analyze", json!({"files": [csv.display().to_string()]}));
    assert_eq!(r["isError"], true, "{r}");
    assert!(r["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("--allow-path"));
    let r = s.call(3, "analyze", json!({"files": ["../../etc/passwd"]}));
    assert_eq!(r["isError"], true, "{r}");
    s.close(Duration::from_secs(5));

    // Allowed with --allow-path.
    let fixtures = fixture("labeled-suite-h100");
    let mut s = Server::start(&["--allow-path", fixtures.to_str().unwrap()]);
    s.initialize();
    let r = s.call(1, "analyze", json!({"files": [csv.display().to_string()]}));
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["primary"], cli["primary"]);
    s.close(Duration::from_secs(5));
}

/// A run folder or a trace's sibling that links outside the server's
/// folders is not followed: only the path the client names was checked
/// before (#39).
#[test]
fn analyze_follows_no_link_out_of_the_allowed_folders() {
    let outside = tempfile::tempdir().unwrap();
    let trace = "{\"t\":\"process\",\"pid\":1}\n{\"t\":\"kernel\",\"name\":\"k\",\"s\":1000,\"e\":2000,\"dev\":0,\"str\":7,\"c\":1,\"g\":[1,1,1],\"b\":[32,1,1]}\n{\"t\":\"end\"}\n";
    std::fs::write(outside.path().join("other.jsonl"), trace).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::os::unix::fs::symlink(outside.path().join("other.jsonl"), run.join("trace.jsonl"))
        .unwrap();
    std::fs::write(dir.path().join("trace.jsonl"), trace).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("other.jsonl"),
        dir.path().join("trace.jsonl.77"),
    )
    .unwrap();
    let mut s = Server::start_in(dir, &[]);
    s.initialize();
    for (id, file) in [(1, "run"), (2, "trace.jsonl")] {
        let r = s.call(id, "analyze", json!({"files": [file]}));
        assert_eq!(r["isError"], true, "{file}: {r}");
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("outside the folders"), "{text}");
    }
    s.close(Duration::from_secs(5));
}

/// A 100 KB path is not echoed whole in the error a client reads (#39).
#[test]
fn tool_errors_do_not_echo_a_huge_argument_whole() {
    let mut s = Server::start(&[]);
    s.initialize();
    let huge = "y".repeat(100_000);
    let r = s.call(1, "analyze", json!({"files": [huge]}));
    assert_eq!(r["isError"], true, "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(
        text.len() < 1200 && text.contains(" bytes]…"),
        "{} bytes",
        text.len()
    );
    s.close(Duration::from_secs(5));
}

/// The summary an agent reads carries each finding's figure and says
/// which evidence was missing (#37: an AMD trace without counters said
/// only "unknown").
#[test]
fn summaries_name_gains_and_missing_counters() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture("amd/synthetic-rocprofv3-moe-route/kernel_trace.csv"),
        dir.path().join("kernel_trace.csv"),
    )
    .unwrap();
    std::fs::copy(
        fixture("kopt-trace-h200/moe_trace.jsonl"),
        dir.path().join("moe.jsonl"),
    )
    .unwrap();
    let mut s = Server::start_in(dir, &[]);
    s.initialize();
    let r = s.call(1, "analyze", json!({"files": ["kernel_trace.csv"]}));
    assert_eq!(r["isError"], false, "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("**Missing evidence:** no hardware counters"),
        "{text}"
    );
    assert!(
        text.contains("predicted ") || text.contains("no figure"),
        "{text}"
    );
    // A launch-bound primary's share is the idle window, not kernel time.
    let r = s.call(2, "analyze", json!({"files": ["moe.jsonl"]}));
    assert_eq!(r["isError"], false, "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("of the steady-state window idle)"), "{text}");
    s.close(Duration::from_secs(5));
}

/// `details` (#37): one kernel with the findings about it, or one section,
/// without the whole diagnosis.
#[test]
fn details_gives_one_kernel_or_one_section() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture("labeled-suite-h100/ncu_raw_base.csv"),
        dir.path().join("base.csv"),
    )
    .unwrap();
    std::fs::copy(
        fixture("training-capture-h200/train_mlp.trace.jsonl.gz"),
        dir.path().join("train.jsonl.gz"),
    )
    .unwrap();
    let mut s = Server::start_in(dir, &[]);
    s.initialize();
    let r = s.call(
        1,
        "details",
        json!({"files": ["base.csv"], "kernel": "TRANSPOSE"}),
    );
    assert_eq!(r["isError"], false, "{r}");
    let k = &r["structuredContent"]["kernel"];
    assert!(
        k["name"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("transpose"),
        "{k}"
    );
    assert!(k["bottleneck"]["class"].is_string(), "{k}");
    assert!(r["structuredContent"]["findings"].is_array(), "{r}");

    let r = s.call(
        2,
        "details",
        json!({"files": ["train.jsonl.gz"], "section": "timeline"}),
    );
    assert_eq!(r["isError"], false, "{r}");
    let phases = &r["structuredContent"]["timeline"]["phases"]["phases"];
    assert_eq!(phases[0]["name"], "data", "{r}");

    let r = s.call(
        3,
        "details",
        json!({"files": ["base.csv"], "kernel": "no_such_kernel"}),
    );
    assert_eq!(r["isError"], true, "{r}");
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("the hottest are"),
        "{r}"
    );
    let r = s.call(4, "details", json!({"files": ["base.csv"]}));
    assert_eq!(r["isError"], true, "{r}");
    let r = s.call(
        5,
        "details",
        json!({"files": ["base.csv"], "section": "nope"}),
    );
    assert_eq!(r["isError"], true, "{r}");
    // An empty kernel is in every name: refused, not the hottest (#39).
    let r = s.call(6, "details", json!({"files": ["base.csv"], "kernel": " "}));
    assert_eq!(r["isError"], true, "{r}");
    assert!(r.to_string().contains("kernel is empty"), "{r}");
    s.close(Duration::from_secs(5));
}

/// A folder of per-rank traces through `analyze_ranks` (#36): the job's
/// diagnosis as structured content, the report as text; a folder that is
/// not one is refused by name.
#[test]
fn analyze_ranks_reads_a_job() {
    let dir = tempfile::tempdir().unwrap();
    let ranks = dir.path().join("traces");
    std::fs::create_dir(&ranks).unwrap();
    for r in ["rank-0.json.gz", "rank-1.json.gz"] {
        std::fs::copy(fixture("multigpu-hta").join(r), ranks.join(r)).unwrap();
    }
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    let mut s = Server::start_in(dir, &[]);
    s.initialize();
    let r = s.call(1, "analyze_ranks", json!({"folder": "traces"}));
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["world_size"], 128);
    assert_eq!(r["structuredContent"]["ranks"].as_array().unwrap().len(), 2);
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("# kopt: 128 ranks"), "{text}");
    let r = s.call(2, "analyze_ranks", json!({"folder": "empty"}));
    assert_eq!(r["isError"], true, "{r}");
    assert!(r["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("not a folder of per-rank traces"));
    s.close(Duration::from_secs(5));
}

/// Waits (at most 5 s) until nothing of `pid` runs.
fn wait_gone(pid: i32) {
    let start = Instant::now();
    while alive(pid) {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "workload {pid} still running"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn alive(pid: i32) -> bool {
    // A zombie is gone for this purpose: nothing of it runs.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.contains(") Z "),
        Err(_) => false,
    }
}

fn wait_for_pid(file: &Path) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(pid) = std::fs::read_to_string(file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return pid;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the workload never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_client_that_disconnects_mid_call_leaves_nothing_running() {
    let mut s = Server::start(&[]);
    s.initialize();
    let pid = s.start_sleeper(1, "bench");
    assert!(alive(pid));
    s.close(Duration::from_secs(10));
    wait_gone(pid);
}

/// A sixth hostile round (L2): calls running when stdin closed got no
/// answer. Each is stopped and answered (an error saying stdin closed)
/// before the server exits; one the client cancelled stays unanswered.
#[test]
fn calls_in_flight_when_stdin_closes_are_answered() {
    let mut s = Server::start(&[]);
    s.initialize();
    let pid = s.start_sleeper(1, "bench");
    drop(s.stdin.take());
    let mut replies = Vec::new();
    let mut text = String::new();
    while s.stdout.read_line(&mut text).unwrap() > 0 {
        let v: Value = serde_json::from_str(&text).unwrap();
        if v.get("method").is_none() {
            replies.push(v);
        }
        text.clear();
    }
    assert!(s.child.wait().unwrap().success());
    assert!(!alive(pid), "workload {pid} still running");
    let answer = replies
        .iter()
        .find(|r| r["id"] == 1)
        .unwrap_or_else(|| panic!("no answer to the call in flight: {replies:?}"));
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let said = answer["result"]["content"][0]["text"].as_str().unwrap();
    // Its timing pass was stopped, not over its budget.
    assert!(
        said.contains("closed stdin") && !said.contains("budget"),
        "{said}"
    );

    // Cancelled by the client, then stdin closed: still no answer.
    let mut s = Server::start(&[]);
    s.initialize();
    s.start_sleeper(2, "bench");
    s.send_raw(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}"#);
    drop(s.stdin.take());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut s.stdout, &mut rest).unwrap();
    assert!(!rest.contains("\"id\":2"), "{rest}");
    assert!(s.child.wait().unwrap().success());
}

#[test]
fn cancelled_call_kills_its_workload_and_gets_no_answer() {
    let mut s = Server::start(&[]);
    s.initialize();
    let pid = s.start_sleeper(7, "profile");
    s.send_raw(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"test"}}"#);
    wait_gone(pid);
    // The next answer is the ping's, not the cancelled call's.
    s.ping_ok(8);
    s.close(Duration::from_secs(5));
}

#[test]
fn calls_past_max_calls_are_refused_as_busy_whatever_the_tool() {
    // 40 analyze calls at once took 15 GB: every tool counts.
    let mut s = Server::start(&["--max-calls", "1"]);
    s.initialize();
    let pid = s.start_sleeper(7, "profile");
    let r = s.call(8, "history", json!({}));
    assert_eq!(r["isError"], true, "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("busy: 1 calls in flight") && text.contains("--max-calls"),
        "{r}"
    );
    // Pings are no tool calls: they still answer.
    s.ping_ok(9);
    s.send_raw(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"test"}}"#);
    wait_gone(pid);
    // The slot is free once the cancelled call has ended.
    s.wait_for_a_free_slot(Duration::from_secs(5));
    s.close(Duration::from_secs(5));
}

#[test]
fn a_second_workload_call_is_refused_while_one_runs_and_sigkill_stops_it() {
    let mut s = Server::start(&[]);
    s.initialize();
    let pid = s.start_sleeper(7, "profile");
    // #37: 300 benches started 300 workloads; now one at a time.
    let r = s.call(
        8,
        "bench",
        json!({"baseline": ["true"], "candidate": ["true"]}),
    );
    assert_eq!(r["isError"], true, "{r}");
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("busy"),
        "{r}"
    );
    // Tools that run nothing still answer.
    let r = s.call(9, "history", json!({}));
    assert_eq!(r["isError"], false, "{r}");
    // Killing the server outright leaves no workload behind.
    s.child.kill().unwrap();
    let _ = s.child.wait();
    let start = Instant::now();
    while alive(pid) {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "workload {pid} outlived the server's SIGKILL"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn over_budget_is_refused_up_front() {
    let mut s = Server::start(&[]);
    s.initialize();
    let r = s.call(
        1,
        "bench",
        json!({"baseline": ["sleep", "0.3"], "candidate": ["sleep", "0.3"], "budget_s": 1.0}),
    );
    assert_eq!(r["isError"], true, "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("refused"), "{text}");
    assert!(r["_meta"]["kopt/estimate_s"].as_f64().unwrap() > 1.0, "{r}");
    let r = s.call(
        2,
        "bench",
        json!({"baseline": ["true"], "candidate": ["true"], "budget_s": -1}),
    );
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("budget_s"),
        "{r}"
    );
    // A budget past the clock's range panicked in the runner (1e19).
    for (id, tool) in [(3, "trace"), (4, "profile"), (5, "tune")] {
        let args = if tool == "tune" {
            json!({"template": "true {x}", "params": ["x=1"], "budget_s": 1e19})
        } else {
            json!({"command": ["true"], "budget_s": 1e19})
        };
        let r = s.call(id, tool, args);
        assert_eq!(r["isError"], true, "{tool}: {r}");
        assert!(r.to_string().contains("at most 1e9"), "{tool}: {r}");
    }
    s.close(Duration::from_secs(5));
}

/// `profile` takes a script (#37, #40): a module script is timed in a
/// scratch folder for the estimate, so a failing one leaves no run folder;
/// scripts outside the allowed folders and a script beside a command are
/// refused.
#[test]
fn profile_takes_a_module_script() {
    let mut s = Server::start(&[]);
    s.initialize();
    std::fs::write(
        s.dir.path().join("m.py"),
        "raise SystemExit(3)\nclass Model:\n    pass\ndef get_inputs():\n    return []\n",
    )
    .unwrap();
    let r = s.call(1, "profile", json!({"script": "m.py", "budget_s": 60}));
    let text = r["content"][0]["text"].as_str().unwrap_or_default();
    assert_eq!(r["isError"], true, "{r}");
    assert!(
        text.contains("the script of module m failed in its timing run"),
        "{text}"
    );
    assert!(
        !s.dir.path().join(".kopt/runs").exists(),
        "an estimate left a run folder"
    );
    let r = s.call(
        2,
        "profile",
        json!({"script": "m.py", "command": ["true"], "budget_s": 5}),
    );
    assert!(r.to_string().contains("not both"), "{r}");
    let r = s.call(
        3,
        "profile",
        json!({"script": "/etc/hostname", "budget_s": 5}),
    );
    assert!(r.to_string().contains("outside"), "{r}");
    s.close(Duration::from_secs(5));
}

/// #37: the estimate is an upper bound; when only the sampling time is too
/// long for the budget, it is capped to fit (and said) rather than refused,
/// and the verdict comes within the budget.
#[test]
fn a_bench_too_long_for_its_budget_samples_less_instead() {
    let mut s = Server::start(&[]);
    s.initialize();
    let r = s.call(
        1,
        "bench",
        json!({"baseline": ["sleep", "0.05"], "candidate": ["sleep", "0.05"], "budget_s": 5}),
    );
    assert_eq!(r["isError"], false, "{r}");
    let basis = r["_meta"]["kopt/estimate_basis"].as_str().unwrap();
    assert!(basis.contains("max_time_s capped to"), "{basis}");
    let (estimate, spent) = (
        r["_meta"]["kopt/estimate_s"].as_f64().unwrap(),
        r["_meta"]["kopt/device_s"].as_f64().unwrap(),
    );
    assert!(estimate <= 5.0 && spent <= 5.0, "{r}");
    assert!(
        estimate >= spent * 0.5,
        "estimate {estimate} s, spent {spent} s"
    );
    s.close(Duration::from_secs(5));
}

/// A fifth hostile round: links planted at the records (`.kopt`, the
/// journal) had the server write outside its folder. Refused, and the
/// outside files untouched.
#[test]
fn records_behind_a_planted_link_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("notes.md");
    std::fs::write(&victim, "mine\n").unwrap();
    let d = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&victim, d.path().join("OPTIMIZATIONS.md")).unwrap();
    let mut s = Server::start_in(d, &[]);
    s.initialize();
    let r = s.call(1, "journal_add", json!({"hypothesis": "x"}));
    assert_eq!(r["isError"], true, "{r}");
    assert!(r.to_string().contains("leads outside"), "{r}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "mine\n");
    // A .kopt folder that is a link out: no history created there.
    std::fs::remove_file(s.dir.path().join("OPTIMIZATIONS.md")).unwrap();
    std::os::unix::fs::symlink(outside.path(), s.dir.path().join(".kopt")).unwrap();
    let r = s.call(2, "history", json!({}));
    assert_eq!(r["isError"], true, "{r}");
    assert!(!outside.path().join("history.db").exists());
    s.close(Duration::from_secs(5));
}

/// A fifth hostile round: one 50 MB summary in the history made a 100 MB
/// reply. Each listed field is cut to a line's worth.
#[test]
fn a_huge_history_field_is_cut_in_the_listing() {
    let d = tempfile::tempdir().unwrap();
    let mut h = kopt_store::History::open(&d.path().join(".kopt/history.db")).unwrap();
    let mut row = kopt_engine::record::run_row("bench", "true".into(), "x".repeat(200_000));
    row.verdict = Some("KEEP".into());
    h.record(&row).unwrap();
    drop(h);
    let mut s = Server::start_in(d, &[]);
    s.initialize();
    let r = s.call(1, "history", json!({}));
    assert_eq!(r["isError"], false, "{r}");
    let summary = r["structuredContent"]["runs"][0]["summary"]
        .as_str()
        .unwrap();
    assert!(summary.len() < 2_000, "{} bytes", summary.len());
    assert!(
        r.to_string().len() < 20_000,
        "{} bytes",
        r.to_string().len()
    );
    s.close(Duration::from_secs(5));
}

#[test]
fn history_and_resources_of_an_empty_folder() {
    let mut s = Server::start(&[]);
    s.initialize();
    let r = s.call(1, "history", json!({}));
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["runs"], json!([]));
    let r = s.request(2, "resources/list", json!({}));
    // No run folder yet: the tools' full output schemas alone.
    let uris: Vec<&str> = r["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(
        uris,
        [
            "kopt://schema/diagnosis",
            "kopt://schema/bench",
            "kopt://schema/compare",
            "kopt://schema/optimize",
            "kopt://schema/tune",
            "kopt://schema/ranks"
        ]
    );
    let r = s.request(
        3,
        "resources/read",
        json!({"uri": "kopt://runs/nope/report.json"}),
    );
    assert_eq!(r["error"]["code"], -32002, "{r}");
    s.close(Duration::from_secs(5));
}

#[test]
fn schemas_are_committed() {
    let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/schema");
    for name in ["diagnosis", "bench", "compare", "optimize", "tune", "ranks"] {
        let out = Command::new(env!("CARGO_BIN_EXE_kopt"))
            .args(["schema", name])
            .output()
            .unwrap();
        assert!(out.status.success());
        let path = docs.join(format!("{name}.json"));
        if std::env::var_os("KOPT_UPDATE_SCHEMAS").is_some() {
            std::fs::write(&path, &out.stdout).unwrap();
        }
        // Compared as JSON: key order is serde_json's business.
        let committed: Option<Value> = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let current: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            committed.as_ref() == Some(&current),
            "docs/schema/{name}.json differs from the kopt/1 types: review and run `KOPT_UPDATE_SCHEMAS=1 cargo test -p kopt --test mcp_server schemas_are_committed`"
        );
    }
    let out = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["schema", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_call_is_stopped_when_its_budget_is_spent() {
    let mut s = Server::start(&[]);
    s.initialize();
    // Fast in the timing pass, slow afterwards: the estimate fits the
    // budget, the run does not.
    let marker = s.dir.path().join("timed");
    let pid_file = s.dir.path().join("pid");
    let line = format!(
        "if [ -f {m} ]; then echo $$ > {p}; exec sleep 60; fi; touch {m}",
        m = marker.display(),
        p = pid_file.display()
    );
    s.send_raw(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "bench",
            "_meta": {"progressToken": "b1"},
            "arguments": {"baseline": [line], "candidate": ["true"], "shell": true, "budget_s": 3, "min_samples": 2, "max_time_s": 0.5}}})
        .to_string(),
    );
    let start = Instant::now();
    let mut progress = Vec::new();
    let mut logged = false;
    let r = loop {
        let mut l = String::new();
        assert!(s.stdout.read_line(&mut l).unwrap() > 0);
        let v: Value = serde_json::from_str(&l).unwrap();
        if v["method"] == "notifications/progress" {
            assert_eq!(v["params"]["progressToken"], "b1");
            progress.push(v["params"]["progress"].as_u64().unwrap());
        } else if v["method"] == "notifications/message" {
            assert!(
                v["params"]["data"]
                    .as_str()
                    .unwrap()
                    .starts_with("estimated cost"),
                "{v}"
            );
            logged = true;
        } else {
            break v;
        }
    };
    assert!(start.elapsed() < Duration::from_secs(15));
    let result = &r["result"];
    assert_eq!(result["isError"], true, "{r}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("stopped: the budget"), "{text}");
    let device = result["_meta"]["kopt/device_s"].as_f64().unwrap();
    assert!((2.5..10.0).contains(&device), "{device}");
    assert!(
        !progress.is_empty() && progress.windows(2).all(|w| w[0] < w[1]),
        "{progress:?}"
    );
    assert!(logged, "the estimate was not said before the run");
    let pid = wait_for_pid(&pid_file);
    wait_gone(pid);
    s.close(Duration::from_secs(5));
}

#[test]
fn an_oversized_message_is_skipped_whole() {
    let mut s = Server::start(&[]);
    s.initialize();
    let huge = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"x\":\"{}\"}}",
        "a".repeat(17 << 20)
    );
    s.send_raw(&huge);
    let r = s.reply();
    assert_eq!(r["error"]["code"], -32700, "{r}");
    s.ping_ok(2);
    s.close(Duration::from_secs(5));
}

/// Round seven: a trace's frames name source files anywhere; the server
/// read one outside its folders and returned its statement lines.
#[test]
fn statement_sources_outside_the_servers_folders_are_not_read() {
    let outside = tempfile::tempdir().unwrap();
    let workloads = fixture("../scripts/checks/training/workloads.py");
    std::fs::copy(&workloads, outside.path().join("outside_w.py")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let gz = fixture("training-h200/sync_item_layer.trace.json.gz");
    let out = Command::new("gzip").arg("-dc").arg(&gz).output().unwrap();
    let trace = String::from_utf8(out.stdout).unwrap();
    let named = |dir: &Path, to: &str| {
        std::fs::write(
            dir.join("t.pt.trace.json"),
            trace.replace("\"workloads.py(", &format!("\"{to}(")),
        )
        .unwrap();
    };
    named(
        dir.path(),
        &outside.path().join("outside_w.py").display().to_string(),
    );
    let mut s = Server::start_in(dir, &[]);
    s.initialize();
    let text = s
        .call(1, "analyze", json!({"files": ["t.pt.trace.json"]}))
        .to_string();
    assert!(!text.contains("outside_w.py:133"), "{text}");
    assert!(
        text.contains("outside_w.py:130"),
        "the function's line stays: {text}"
    );
    // The same source inside the server's folder is read.
    std::fs::copy(&workloads, s.dir.path().join("inside_w.py")).unwrap();
    named(
        s.dir.path(),
        &s.dir.path().join("inside_w.py").display().to_string(),
    );
    let text = s
        .call(2, "analyze", json!({"files": ["t.pt.trace.json"]}))
        .to_string();
    assert!(text.contains("inside_w.py:133"), "{text}");
}

/// A kopt trace of `n` launches of one short kernel, one device.
fn many_launches_trace(path: &Path, n: u64) {
    use std::io::Write;
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(w, r#"{{"t":"process","pid":1,"run":"1-1-0"}}"#).unwrap();
    writeln!(w, r#"{{"t":"device","id":0,"name":"NVIDIA H100 80GB HBM3","sms":132,"cc":[9,0],"mem_bw_kbs":3352320000,"clock_khz":1980000}}"#).unwrap();
    for i in 0..n {
        let s = 1_000_000 + i * 10_000;
        writeln!(w, r#"{{"t":"kernel","name":"k{}","s":{},"e":{},"dev":0,"str":7,"c":{},"g":[1,1,1],"b":[128,1,1],"reg":16,"smem":0,"graph":0}}"#, i % 50, s + 2_000, s + 5_000, i + 1).unwrap();
        writeln!(
            w,
            r#"{{"t":"api","name":"cudaLaunchKernel_v7000","s":{},"e":{},"tid":1,"c":{}}}"#,
            s,
            s + 1_000,
            i + 1
        )
        .unwrap();
    }
}

/// analyze runs in a process of its own: a cancel frees its slot at once
/// (in the server's process the analysis ran on for seconds), and an
/// answer lists 20 kernels unless the client asks for more (a
/// 400k-kernel table was a 391 MB answer).
#[test]
fn analyze_is_cancelled_at_once_and_lists_twenty_kernels() {
    let dir = tempfile::tempdir().unwrap();
    many_launches_trace(&dir.path().join("big.jsonl"), 300_000);
    many_launches_trace(&dir.path().join("small.jsonl"), 500);
    let mut s = Server::start_in(dir, &["--max-calls", "1"]);
    s.initialize();
    let r = s.call(1, "analyze", json!({"files": ["small.jsonl"]}));
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(
        r["structuredContent"]["kernels"].as_array().unwrap().len(),
        20,
        "{r}"
    );
    let r = s.call(2, "analyze", json!({"files": ["small.jsonl"], "top": 100}));
    assert_eq!(
        r["structuredContent"]["kernels"].as_array().unwrap().len(),
        50
    );

    s.send_raw(
        &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "analyze", "arguments": {"files": ["big.jsonl"]}}})
        .to_string(),
    );
    std::thread::sleep(Duration::from_millis(300));
    s.send_raw(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"test"}}"#);
    s.wait_for_a_free_slot(Duration::from_secs(3));
    s.close(Duration::from_secs(5));
}
