//! The tools: arguments (their input schemas derive from these structs, and
//! the same structs parse the calls), the engine request each lowers to,
//! the `kopt/1` object it returns (output schema from kopt-model's types)
//! and a short Markdown summary.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use kopt_engine::progress::{Progress, Stream};
use kopt_engine::{Error, HistoryDb, Workload};
use kopt_model::Diagnosis;
use kopt_report::Summary as _;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::cost::{self, Estimate, TimingError};
use super::schema::{input, output};
use super::{Config, Out};

/// What a running call can reach.
pub struct Context<'a> {
    pub config: &'a Config,
    pub out: &'a Out,
    pub token: Option<Value>,
    /// Set by `notifications/cancelled`, the budget's watchdog or a client gone.
    pub cancel: Arc<AtomicBool>,
    pub budget_hit: Arc<AtomicBool>,
    pub progress_n: AtomicU64,
}

impl<'a> Context<'a> {
    pub fn new(
        config: &'a Config,
        out: &'a Out,
        token: Option<Value>,
        cancel: Arc<AtomicBool>,
    ) -> Self {
        Context {
            config,
            out,
            token,
            cancel,
            budget_hit: Arc::default(),
            progress_n: AtomicU64::new(0),
        }
    }

    /// The call was stopped by its budget (it still answers), not by the client.
    pub fn budget_stop(&self) -> bool {
        self.budget_hit.load(Ordering::SeqCst)
    }

    /// `notifications/progress`, when the client asked for it.
    fn notify(&self, message: &str) {
        let Some(token) = &self.token else { return };
        let n = self.progress_n.fetch_add(1, Ordering::SeqCst) + 1;
        self.out.send(&json!({
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": token, "progress": n, "message": message}
        }));
    }
}

impl Context<'_> {
    /// A line every client sees (`notifications/message`), progress or not:
    /// the cost before a long tool runs.
    fn log(&self, message: &str) {
        self.out.send(&json!({
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "logger": "kopt", "data": message}
        }));
        self.notify(message);
    }
}

impl Progress for Context<'_> {
    fn pass_started(&self, n: usize, total: usize, what: &str) {
        self.notify(&format!("pass {n}/{total}: {what}"));
    }
    fn pass_done(&self, n: usize, total: usize, seconds: f64) {
        self.notify(&format!("pass {n}/{total} done in {seconds:.1} s"));
    }
    fn note(&self, message: &str) {
        self.notify(message);
    }
    fn workload_line(&self, _stream: Stream, _line: &str, _passthrough: bool) {}
    fn bench_round(&self, round: usize, samples: &[(String, usize)]) {
        let counts: Vec<String> = samples.iter().map(|(n, s)| format!("{n} {s}")).collect();
        self.notify(&format!("round {round}: samples {}", counts.join(", ")));
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Analyze,
    AnalyzeRanks,
    Profile,
    Trace,
    Bench,
    Compare,
    Optimize,
    Tune,
    History,
    JournalAdd,
    Details,
}

const TOOLS: &[(Tool, &str)] = &[
    (Tool::Analyze, "analyze"),
    (Tool::AnalyzeRanks, "analyze_ranks"),
    (Tool::Profile, "profile"),
    (Tool::Trace, "trace"),
    (Tool::Bench, "bench"),
    (Tool::Compare, "compare"),
    (Tool::Optimize, "optimize"),
    (Tool::Tune, "tune"),
    (Tool::History, "history"),
    (Tool::JournalAdd, "journal_add"),
    (Tool::Details, "details"),
];

impl Tool {
    /// Tools that run a workload on the device: one at a time, since two
    /// would perturb each other's measurements.
    pub fn runs_workload(self) -> bool {
        matches!(
            self,
            Tool::Profile | Tool::Trace | Tool::Bench | Tool::Optimize | Tool::Tune
        )
    }
}

pub fn find(name: &str) -> Option<Tool> {
    TOOLS.iter().find(|(_, n)| *n == name).map(|(t, _)| *t)
}

// ---- arguments -------------------------------------------------------------

/// Read a distributed job from its ranks' traces (no device time).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RanksArgs {
    /// A folder under the server's folder: one torch.profiler trace per
    /// rank, or the run folder of `kopt trace` over a launcher (torchrun).
    pub folder: String,
}

/// Diagnose existing profiler output (no device time).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnalyzeArgs {
    /// Profiler output under the server's folder: ncu CSV pages, .ncu-rep
    /// reports, rocprof output, torch.profiler / Kineto traces, kopt traces,
    /// `kopt profile` run folders.
    pub files: Vec<String>,
    /// Show the N kernels with the most time (default 20).
    #[serde(default)]
    pub top: Option<usize>,
    /// Device name for datasheet peaks when the input names none (e.g. "H100 PCIe").
    #[serde(default)]
    pub device: Option<String>,
}

/// One kernel's verdict and the findings about it, or one section.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DetailsArgs {
    /// As `analyze`'s (a report.json kopt wrote too).
    pub files: Vec<String>,
    /// Part of a kernel's name (the hottest match).
    #[serde(default)]
    pub kernel: Option<String>,
    /// Or a section.
    #[serde(default)]
    pub section: Option<Section>,
    #[serde(default)]
    pub device: Option<String>,
}

// The sections of a diagnosis `details` returns (undocumented variants keep
// tools/list small: the names say it).
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Section {
    Findings,
    Kernels,
    Timeline,
    Ops,
    Warmup,
    Notes,
}

/// The command a long tool runs.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunArgs {
    /// The workload's argv, run as given in the server's folder (no shell).
    #[serde(default)]
    pub command: Vec<String>,
    /// Run `command` (then one string) through /bin/sh -c.
    #[serde(default)]
    pub shell: bool,
    /// Device seconds this call may spend: refused when the estimate is
    /// larger, stopped when spent.
    pub budget_s: f64,
    /// CUDA_VISIBLE_DEVICES for the workload.
    #[serde(default)]
    pub gpu: Option<String>,
    /// Kill the workload (its process group) after this many seconds, per run.
    #[serde(default)]
    pub timeout_s: Option<f64>,
}

/// Run a workload under ncu in cheap passes, then diagnose it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfileArgs {
    #[serde(flatten)]
    pub run: RunArgs,
    /// A script file instead of `command`; kopt drives a module script.
    #[serde(default)]
    pub script: Option<String>,
    /// The module's name (default: the file's).
    #[serde(default)]
    pub module: Option<String>,
    /// Only kernels whose name matches this regex.
    #[serde(default)]
    pub kernel: Option<String>,
    /// Add a `--set full` pass for the 3 hottest kernels.
    #[serde(default)]
    pub deep: bool,
    /// Show only the N kernels with the most time.
    #[serde(default)]
    pub top: Option<usize>,
}

/// Record a timeline with kopt's CUPTI tracer, then diagnose it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TraceArgs {
    #[serde(flatten)]
    pub run: RunArgs,
}

/// A/B benchmark with a bootstrap interval and a KEEP / MARGINAL / REVERT verdict.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BenchArgs {
    /// The baseline's argv (no shell unless `shell`).
    pub baseline: Vec<String>,
    /// The candidate's argv.
    pub candidate: Vec<String>,
    /// Each command is one string run through /bin/sh -c.
    #[serde(default)]
    pub shell: bool,
    /// Device seconds this call may spend.
    pub budget_s: f64,
    /// The speed-up that counts for KEEP (default 0.05).
    #[serde(default)]
    pub threshold: Option<f64>,
    /// Samples per variant at least (default 10).
    #[serde(default)]
    pub min_samples: Option<usize>,
    /// Seconds per variant at most (default 10).
    #[serde(default)]
    pub max_time_s: Option<f64>,
    /// Untimed runs of each variant first (default 1).
    #[serde(default)]
    pub warmup: Option<u32>,
    #[serde(default)]
    pub seed: Option<u64>,
}

/// Correctness gate: a candidate's tensors against a reference's.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompareArgs {
    /// Reference tensors (.npy, .safetensors) under the server's folder.
    pub reference: String,
    /// Candidate tensors.
    pub candidate: String,
    /// Relative L2 tolerance (default by dtype).
    #[serde(default)]
    pub tol: Option<f64>,
    /// The candidate ran float32 math on tensor cores.
    #[serde(default)]
    pub tf32: bool,
    /// Element-wise absolute tolerance (`atol + rtol*|reference|`; default by dtype).
    #[serde(default)]
    pub atol: Option<f64>,
    /// Element-wise relative tolerance (default by dtype).
    #[serde(default)]
    pub rtol: Option<f64>,
    /// Compare a candidate of another dtype (else it fails).
    #[serde(default)]
    pub allow_dtype_change: bool,
}

/// Apply the mechanical fixes to a PyTorch module script, check and measure each.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OptimizeArgs {
    /// A module script (class Model, get_inputs) under the server's folder.
    pub script: String,
    /// The class to pick (default: the script's stem).
    #[serde(default)]
    pub module: Option<String>,
    /// Python interpreter (default python3).
    #[serde(default)]
    pub python: Option<String>,
    /// Device seconds this call may spend.
    pub budget_s: f64,
    /// Seconds each candidate's benchmark may take per variant (default 20).
    #[serde(default)]
    pub max_time_s: Option<f64>,
    #[serde(default)]
    pub gpu: Option<String>,
}

/// Autotune a command template over a parameter space.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TuneArgs {
    /// The command template with `{NAME}` placeholders (run through /bin/sh -c).
    pub template: String,
    /// Parameters as `NAME=v1,v2,...` (or `NAME=range(a,b[,step])`).
    pub params: Vec<String>,
    /// Constraints over the parameters (e.g. `BM*BN <= 16384`).
    #[serde(default)]
    pub constraints: Vec<String>,
    /// Configs for the random strategy.
    #[serde(default)]
    pub trials: Option<usize>,
    /// The problem (shape) the sweep is for: part of the cache key.
    #[serde(default)]
    pub key: Option<String>,
    /// Device seconds this call may spend.
    pub budget_s: f64,
    /// Samples per config at least (default 10).
    #[serde(default)]
    pub min_samples: Option<usize>,
    /// Seconds per config at most (default 10).
    #[serde(default)]
    pub max_time_s: Option<f64>,
}

/// What was already measured: the run history, newest first, or one run.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryArgs {
    /// One run, with its stored kopt/1 report.
    #[serde(default)]
    pub id: Option<i64>,
    /// Newest runs to list (default 20).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// Add an entry to the optimization journal (OPTIMIZATIONS.md).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JournalAddArgs {
    pub hypothesis: String,
    #[serde(default)]
    pub predict: Option<String>,
    #[serde(default)]
    pub outcome: Option<String>,
    /// KEEP, MARGINAL or REVERT.
    #[serde(default)]
    pub verdict: Option<String>,
    /// The run the entry is about (a history id or run folder).
    #[serde(default)]
    pub run: Option<String>,
}

/// `history`'s result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct HistoryResult {
    pub db: String,
    /// Newest first.
    pub runs: Vec<HistoryRun>,
    /// The stored kopt/1 report of the run asked for by id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<Value>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct HistoryRun {
    pub id: i64,
    pub kind: String,
    pub started_utc: String,
    pub command: String,
    pub device: Option<String>,
    pub git_rev: Option<String>,
    pub summary: String,
    pub verdict: Option<String>,
    pub run_dir: Option<String>,
    /// The run folder's report as a resource, when it has one.
    pub resource: Option<String>,
}

/// `journal_add`'s result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct JournalResult {
    /// The journal the entry went to.
    pub file: String,
}

// ---- listing ---------------------------------------------------------------

pub fn list() -> Vec<Value> {
    let long = "Long tool: give budget_s (device seconds); it estimates its cost first (history or a timing pass), refuses above the budget, reports device seconds in _meta, sends progress, stops its workload when cancelled.";
    let mut tools = vec![
        tool(
            "analyze",
            "Analyze profiler output",
            "Diagnose existing profiler output (ncu CSV, .ncu-rep, rocprof, torch.profiler traces, kopt traces, run folders): where the time goes, why each hot kernel is slow, what to change first. No device time.",
            input::<AnalyzeArgs>(),
            document("diagnosis"),
            true,
        ),
        tool(
            "analyze_ranks",
            "Analyze a distributed job's ranks",
            "Read a data-parallel job from its ranks' traces (a folder of per-rank torch.profiler traces, or a kopt trace run folder of torchrun): per rank compute, communication, overlap, exposed communication and idle; collectives with bus bandwidth; the straggler and why; priced DDP/FSDP changes. No device time.",
            input::<RanksArgs>(),
            document("ranks"),
            true,
        ),
        tool(
            "profile",
            "Profile a workload",
            &format!("Run a workload under Nsight Compute in cheap passes (timing, targeted counters, optional deep pass) and diagnose it. {long}"),
            input::<ProfileArgs>(),
            document("diagnosis"),
            false,
        ),
        tool(
            "trace",
            "Trace a workload's timeline",
            &format!("Record a timeline of a CUDA program with kopt's CUPTI tracer and diagnose it (idle gaps, launch-bound steps, graph-capture prediction). {long}"),
            input::<TraceArgs>(),
            document("diagnosis"),
            false,
        ),
        tool(
            "bench",
            "A/B benchmark two commands",
            &format!("A/B benchmark of two commands: samples until the stop rule, bootstrap interval of the ratio, KEEP / MARGINAL / REVERT. {long}"),
            input::<BenchArgs>(),
            document("bench"),
            false,
        ),
        tool(
            "compare",
            "Compare output tensors",
            "Correctness gate: a candidate's output tensors (.npy, .safetensors) against a reference's; NaN, Inf, shape and dtype problems fail it. No device time.",
            input::<CompareArgs>(),
            document("compare"),
            false,
        ),
        tool(
            "optimize",
            "Optimize a PyTorch module",
            &format!("Apply the mechanical fixes (CUDA graph, torch.compile) to a PyTorch module script, check and measure each, keep or revert. {long}"),
            input::<OptimizeArgs>(),
            document("optimize"),
            false,
        ),
        tool(
            "tune",
            "Autotune a command",
            &format!("Autotune a command template over a parameter space, every trial checked, timed and cached. {long}"),
            input::<TuneArgs>(),
            document("tune"),
            false,
        ),
        tool(
            "details",
            "One kernel or one section of a diagnosis",
            "One kernel's verdict (class, evidence, counters) with its findings, or one section of a diagnosis, without the whole. No device time.",
            input::<DetailsArgs>(),
            json!({"type": "object"}),
            true,
        ),
        tool(
            "history",
            "Run history",
            "What was already measured: the run history (profile, trace, bench, compare, optimize, tune), newest first, or one run with its stored report. Check it before paying for a measurement again.",
            input::<HistoryArgs>(),
            output::<HistoryResult>(),
            true,
        ),
        tool(
            "journal_add",
            "Add a journal entry",
            "Add an entry to the optimization journal (OPTIMIZATIONS.md): hypothesis, prediction, outcome, verdict.",
            input::<JournalAddArgs>(),
            output::<JournalResult>(),
            false,
        ),
    ];
    for t in &mut tools {
        if let Some(o) = t.get_mut("outputSchema").and_then(Value::as_object_mut) {
            o.remove("$schema");
        }
    }
    tools
}

/// One tool's entry in `tools/list`. No tool deletes or overwrites what a
/// user has: those that write add run folders, history rows or journal
/// entries (`destructiveHint` false).
fn tool(
    name: &str,
    title: &str,
    description: &str,
    input: Value,
    output: Value,
    read_only: bool,
) -> Value {
    let mut annotations =
        json!({"title": title, "readOnlyHint": read_only, "openWorldHint": false});
    if !read_only {
        annotations["destructiveHint"] = json!(false);
    }
    json!({
        "name": name,
        "title": title,
        "description": description,
        "inputSchema": input,
        "outputSchema": output,
        "annotations": annotations,
    })
}

/// The compact output schema of the `kopt/1` document `name`.
fn document(name: &str) -> Value {
    super::schema::compact(&super::schema::document(name).unwrap_or(Value::Null), name)
}

// ---- calls -----------------------------------------------------------------

/// Run a tool; every failure is a result with `isError` (the model reads it).
pub fn run(tool: Tool, arguments: Value, ctx: &Context) -> Value {
    match dispatch(tool, arguments, ctx) {
        Ok(v) => v,
        Err(message) => tool_error(&message, None),
    }
}

fn parse<T: for<'de> Deserialize<'de>>(arguments: Value) -> Result<T, String> {
    serde_json::from_value(arguments).map_err(|e| format!("invalid arguments: {e}"))
}

fn dispatch(tool: Tool, arguments: Value, ctx: &Context) -> Result<Value, String> {
    if !matches!(tool, Tool::Analyze | Tool::AnalyzeRanks | Tool::Details) {
        records_inside(ctx.config)?;
    }
    match tool {
        Tool::Analyze => analyze(parse(arguments)?, ctx),
        Tool::AnalyzeRanks => analyze_ranks(parse(arguments)?, ctx),
        Tool::Profile => profile(parse(arguments)?, ctx),
        Tool::Trace => trace(parse(arguments)?, ctx),
        Tool::Bench => bench(parse(arguments)?, ctx),
        Tool::Compare => compare(parse(arguments)?, ctx),
        Tool::Optimize => optimize(parse(arguments)?, ctx),
        Tool::Tune => tune(parse(arguments)?, ctx),
        Tool::History => history(parse(arguments)?, ctx),
        Tool::JournalAdd => journal_add(parse(arguments)?, ctx),
        Tool::Details => details(parse(arguments)?, ctx),
    }
}

fn tool_error(message: &str, meta: Option<Value>) -> Value {
    // A path or value the client sent is not echoed whole (100 KB of it).
    let mut v = json!({
        "content": [{"type": "text", "text": kopt_model::text::cut_long_words(message)}],
        "isError": true,
    });
    if let Some(m) = meta {
        v["_meta"] = m;
    }
    v
}

fn tool_ok<T: Serialize>(report: &T, text: String, meta: Option<Value>) -> Result<Value, String> {
    let structured = serde_json::to_value(report).map_err(|e| e.to_string())?;
    let mut v = json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
        "isError": false,
    });
    if let Some(m) = meta {
        v["_meta"] = m;
    }
    Ok(v)
}

fn engine(e: Error) -> String {
    format!("kopt: error: {e}")
}

/// A path the client gave, resolved in the server's folder; refused outside
/// it and the `--allow-path` folders.
fn allowed_path(config: &Config, given: &str) -> Result<PathBuf, String> {
    let path = config.cwd.join(given);
    let real = std::fs::canonicalize(&path).map_err(|e| format!("{given}: {e}"))?;
    let inside = std::iter::once(&config.cwd)
        .chain(&config.allowed)
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .any(|d| real.starts_with(d));
    if !inside {
        return Err(format!(
            "{given}: outside the server's folder ({}); start kopt mcp with --allow-path DIR to allow it",
            config.cwd.display()
        ));
    }
    Ok(path)
}

/// The records a tool writes or reads (the history, the run folders, the
/// journal) stay inside the server's folders and its project: a link
/// planted at one of them, or at `.kopt`, would have the server write
/// elsewhere.
fn records_inside(config: &Config) -> Result<(), String> {
    // The records' home is the project's root (RecordPaths), which may be
    // above the server's folder.
    let project = kopt_engine::record::project_root(&config.cwd);
    let roots: Vec<PathBuf> = [&config.cwd, &project]
        .into_iter()
        .chain(&config.allowed)
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .collect();
    let paths = kopt_engine::RecordPaths::for_cwd(&config.cwd);
    for p in [&paths.db, &paths.runs_dir, &paths.journal] {
        let inside = kopt_store::files::written_at(p)
            .is_some_and(|r| roots.iter().any(|d| r.starts_with(d)));
        if !inside {
            return Err(format!(
                "refused: {} leads outside the server's folders (a link?); kopt keeps its records inside them",
                p.display()
            ));
        }
    }
    Ok(())
}

fn analyze(a: AnalyzeArgs, ctx: &Context) -> Result<Value, String> {
    let top = Some(a.top.unwrap_or(ANALYZE_DEFAULT_TOP));
    let d = diagnose_files(&a.files, analysis_options(top, a.device), ctx)?;
    tool_ok(&d, d.summary(), None)
}

/// Kernels an `analyze` answer lists when the client names no `top` (all
/// still count): the whole table of a 400k-kernel trace was a 391 MB answer.
const ANALYZE_DEFAULT_TOP: usize = 20;
/// Most bytes the analysis process may print (its JSON document).
const ANALYSIS_MAX_OUTPUT: u64 = 256 << 20;
/// Longest an analysis may run.
const ANALYSIS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// The diagnosis of files the client named (each inside the allowed
/// folders), made by `kopt analyze` in a process of its own, reading only
/// inside the server's folders: a cancel kills it at once, and an input
/// that exhausts memory or crashes a reader ends that process, never the
/// server and the calls it serves.
fn diagnose_files(
    files: &[String],
    analysis: kopt_engine::AnalysisOptions,
    ctx: &Context,
) -> Result<Diagnosis, String> {
    let files = files
        .iter()
        .map(|f| allowed_path(ctx.config, f))
        .collect::<Result<Vec<_>, _>>()?;
    kopt_engine::AnalyzeRequest {
        files: files.clone(),
        ncu: None,
        bare_run: None,
        analysis: analysis.clone(),
    }
    .validate()
    .map_err(engine)?;
    if kopt_engine::ranks::rank_folder(&files)
        .map_err(engine)?
        .is_some()
    {
        return Err(
            "a folder of per-rank traces is one distributed job: analyse it with the analyze_ranks tool, never merged"
                .into(),
        );
    }
    let mut args: Vec<String> = vec!["analyze".into(), "--format".into(), "json".into()];
    if let Some(top) = analysis.top {
        args.extend(["--top".into(), top.to_string()]);
    }
    if let Some(device) = &analysis.device {
        args.extend(["--device".into(), device.clone()]);
    }
    for f in &files {
        let f = f
            .to_str()
            .ok_or_else(|| format!("{}: not a UTF-8 path", f.display()))?;
        args.push(f.to_string());
    }
    let roots: Vec<PathBuf> = std::iter::once(ctx.config.cwd.clone())
        .chain(ctx.config.allowed.iter().cloned())
        .collect();
    let roots = kopt_engine::read_roots_value(&roots).ok_or(
        "the server's folders cannot be handed to its analysis process (a name with a line break, or not UTF-8)",
    )?;
    let exe = std::env::current_exe().map_err(|e| format!("kopt's own binary: {e}"))?;
    let env = [(kopt_engine::READ_ROOTS_VAR.to_string(), roots)];
    let run = kopt_engine::progress::cancellable(Some(Arc::clone(&ctx.cancel)), || {
        kopt_engine::child::capture(&exe, &args, &env, ANALYSIS_TIMEOUT, ANALYSIS_MAX_OUTPUT)
    });
    let c = match run {
        Ok(c) => c,
        Err(kopt_engine::child::GroupError::Cancelled) => return Err("cancelled".into()),
        Err(e) => return Err(format!("kopt: error: the analysis process: {e}")),
    };
    if c.output_over {
        let how = if analysis.top.is_some() {
            "give a smaller `top`"
        } else {
            "too many kernels for `details`: ask `analyze` with a `top`"
        };
        return Err(format!(
            "kopt: error: the analysis printed more than {} MiB and was stopped: {how}",
            ANALYSIS_MAX_OUTPUT >> 20
        ));
    }
    if c.timed_out {
        return Err(format!(
            "kopt: error: the analysis ran past {} s and was stopped",
            ANALYSIS_TIMEOUT.as_secs()
        ));
    }
    if !c.status.success() {
        return Err(child_error(&c));
    }
    serde_json::from_slice(&c.stdout)
        .map_err(|e| format!("kopt: error: the analysis printed no readable diagnosis: {e}"))
}

/// The analysis process's own error (from its "kopt: error:" line on), or
/// how it ended.
fn child_error(c: &kopt_engine::child::Captured) -> String {
    if let Some(at) = c
        .stderr_tail
        .iter()
        .position(|l| l.starts_with("kopt: error:"))
    {
        return c.stderr_tail[at..].join("\n");
    }
    let how = {
        use std::os::unix::process::ExitStatusExt;
        match c.status.signal() {
            Some(sig) => {
                format!("stopped by signal {sig} (out of memory, or the input changed while read)")
            }
            None => format!("failed ({})", c.status),
        }
    };
    let tail = c.stderr_tail.join(" | ");
    format!(
        "kopt: error: the analysis process {how}{}",
        if tail.is_empty() {
            String::new()
        } else {
            format!(": {}", kopt_model::text::one_line(&tail))
        }
    )
}

/// Most characters of a section's text; the structured content is whole.
const DETAILS_TEXT_MAX: usize = 16_000;

fn details(a: DetailsArgs, ctx: &Context) -> Result<Value, String> {
    let (kernel, section) = match (a.kernel, a.section) {
        (Some(k), None) => (Some(k), None),
        (None, Some(s)) => (None, Some(s)),
        _ => return Err("give either `kernel` or `section`, not both or neither".into()),
    };
    let d = diagnose_files(&a.files, analysis_options(None, a.device), ctx)?;
    let part = match (kernel, section) {
        (Some(query), _) => kernel_details(&d, &query)?,
        (_, Some(section)) => section_details(&d, section),
        _ => unreachable!("one of the two, checked above"),
    };
    let mut text = serde_json::to_string_pretty(&part).map_err(|e| e.to_string())?;
    if text.len() > DETAILS_TEXT_MAX {
        let cut = (0..=DETAILS_TEXT_MAX)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        text.truncate(cut);
        text.push_str("\n... (cut; the structured content is whole)");
    }
    tool_ok(&part, text, None)
}

/// The kernel `query` names (the most time among matches), with the
/// findings about it.
fn kernel_details(d: &Diagnosis, query: &str) -> Result<Value, String> {
    // An empty query is in every name: it would answer with the hottest.
    if query.trim().is_empty() {
        return Err("invalid arguments: kernel is empty: give part of a kernel's name".into());
    }
    let q = query.to_lowercase();
    let k = d
        .kernels
        .iter()
        .filter(|k| k.name.to_lowercase().contains(&q) || k.short_name.to_lowercase().contains(&q))
        .max_by(|a, b| a.total_ns.total_cmp(&b.total_ns))
        .ok_or_else(|| {
            let names: Vec<&str> = d
                .kernels
                .iter()
                .take(8)
                .map(|k| k.short_name.as_str())
                .collect();
            format!(
                "no kernel matches {:?}; the hottest are: {}",
                kopt_model::text::cut_long_words(query),
                names.join(", ")
            )
        })?;
    let findings: Vec<&kopt_model::Recommendation> = d
        .recommendations
        .iter()
        .filter(|r| r.kernel == k.name || r.kernel.split(", ").any(|n| n == k.short_name))
        .collect();
    Ok(json!({"kernel": k, "findings": findings}))
}

/// One section of `d` as JSON.
fn section_details(d: &Diagnosis, section: Section) -> Value {
    match section {
        Section::Findings => json!({"findings": d.recommendations, "primary": d.primary}),
        Section::Kernels => json!({"kernels": d.kernels.iter().map(|k| json!({
            "name": k.short_name,
            "total_ns": k.total_ns,
            "pct_of_total": k.pct_of_total,
            "launches": k.launches,
            "class": k.bottleneck.class,
            "root_cause": k.root_cause,
        })).collect::<Vec<_>>()}),
        Section::Timeline => json!({"timeline": d.timeline}),
        Section::Ops => json!({"ops": d.ops}),
        Section::Warmup => json!({"warmup_trials": d.warmup_trials}),
        Section::Notes => json!({"notes": d.notes}),
    }
}

fn analyze_ranks(a: RanksArgs, ctx: &Context) -> Result<Value, String> {
    let folder = allowed_path(ctx.config, &a.folder)?;
    let files = kopt_engine::ranks::rank_folder(std::slice::from_ref(&folder))
        .map_err(engine)?
        .ok_or_else(|| {
            format!(
                "kopt: error: {}: not a folder of per-rank traces (two or more *.json / *.json.gz traces, or a run folder of ranked kopt traces)",
                a.folder
            )
        })?;
    let d = kopt_engine::ranks::analyze_ranks(&files).map_err(engine)?;
    let text = kopt_report::Render::render(&d, kopt_report::Format::Markdown, Default::default());
    tool_ok(&d, text, None)
}

fn analysis_options(top: Option<usize>, device: Option<String>) -> kopt_engine::AnalysisOptions {
    kopt_engine::AnalysisOptions {
        device,
        measured_peaks: Default::default(),
        top,
        keep_warmup: false,
        calibration: HistoryDb::Project,
    }
}

/// The argv a workload runs as.
fn argv(run: &RunArgs) -> Result<Vec<String>, String> {
    match (run.shell, run.command.as_slice()) {
        (_, []) => Err("invalid arguments: command is empty".into()),
        (true, [line]) => Ok(vec!["/bin/sh".into(), "-c".into(), line.clone()]),
        (true, _) => Err("invalid arguments: with shell, command is one string".into()),
        (false, words) => Ok(words.to_vec()),
    }
}

fn workload(run: &RunArgs, argv: Vec<String>) -> Result<kopt_engine::WorkloadOptions, String> {
    Ok(kopt_engine::WorkloadOptions {
        gpu: run.gpu.clone(),
        timeout: kopt_engine::profile::timeout_from_secs(run.timeout_s).map_err(engine)?,
        quiet: true,
        ..kopt_engine::WorkloadOptions::command(argv)
    })
}

fn check_budget(budget: f64) -> Result<(), String> {
    // Past MAX_SECONDS a deadline overflows the clock (1e19 panicked).
    let max = kopt_engine::profile::MAX_SECONDS;
    if budget.is_finite() && budget > 0.0 && budget <= max {
        Ok(())
    } else {
        Err(format!(
            "invalid arguments: budget_s must be a positive number of seconds, at most {max:e}"
        ))
    }
}

/// The timing pass of a command, as an estimate source.
fn timed(what: &Workload, budget: f64, ctx: &Context) -> Result<f64, Result<Value, String>> {
    ctx.notify(&format!(
        "timing pass: {} once, to estimate the cost",
        what.describe()
    ));
    match cost::timing_run(what, budget, &ctx.cancel) {
        Ok(s) => Ok(s),
        Err(TimingError::Stopped) => Err(Err("cancelled".into())),
        Err(TimingError::OverBudget(b)) => Err(Ok(tool_error(
            &format!("refused: the timing pass alone ran past the budget of {b:.1} s (device seconds spent: {b:.1})"),
            Some(json!({"kopt/budget_s": budget, "kopt/device_s": b, "kopt/estimate_s": null})),
        ))),
        Err(TimingError::Failed(m)) => Err(Err(m)),
    }
}

/// Estimate, refuse or run under the budget's watchdog, report the cost.
fn long_run<T>(
    ctx: &Context,
    budget: f64,
    estimate: impl FnOnce() -> Result<Estimate, Result<Value, String>>,
    work: impl FnOnce() -> Result<T, Error>,
    respond: impl FnOnce(&T, Value) -> Result<Value, String>,
) -> Result<Value, String> {
    check_budget(budget)?;
    let start = Instant::now();
    let est = match estimate() {
        Ok(e) => e,
        Err(early) => return early,
    };
    let spent = start.elapsed().as_secs_f64();
    let total = spent + est.seconds;
    let meta = |device: f64| {
        json!({
            "kopt/budget_s": budget,
            "kopt/estimate_s": total,
            "kopt/estimate_basis": est.basis,
            "kopt/device_s": device,
        })
    };
    if total > budget {
        return Ok(tool_error(
            &format!(
                "refused: estimated cost {total:.1} s ({}) exceeds the budget of {budget:.1} s; nothing more ran (device seconds spent: {spent:.1})",
                est.basis
            ),
            Some(meta(spent)),
        ));
    }
    ctx.log(&format!(
        "estimated cost {total:.1} s ({}), budget {budget:.1} s",
        est.basis
    ));
    let watchdog = cost::Watchdog::start(
        budget - spent,
        Arc::clone(&ctx.cancel),
        Arc::clone(&ctx.budget_hit),
    );
    let result = kopt_engine::progress::cancellable(Some(Arc::clone(&ctx.cancel)), work);
    drop(watchdog);
    let device = start.elapsed().as_secs_f64();
    if ctx.budget_stop() {
        return Ok(tool_error(
            &format!("stopped: the budget of {budget:.1} s was spent (estimate was {total:.1} s, {}); the workload was killed", est.basis),
            Some(meta(device)),
        ));
    }
    match result {
        Ok(report) => {
            let mut m = meta(device);
            m["kopt/summary"] = json!(format!(
                "device seconds: {device:.1} of a {budget:.1} s budget (estimate {total:.1} s, {})",
                est.basis
            ));
            respond(&report, m)
        }
        Err(e) => Ok(tool_error(&engine(e), Some(meta(device)))),
    }
}

fn with_cost(text: String, meta: &Value) -> String {
    match meta.get("kopt/summary").and_then(Value::as_str) {
        Some(s) => format!("{text}\n_{s}_\n"),
        None => text,
    }
}

fn profile(a: ProfileArgs, ctx: &Context) -> Result<Value, String> {
    let what = match (&a.script, a.run.command.is_empty()) {
        (Some(script), true) => {
            let path = allowed_path(ctx.config, script)?;
            Workload::from_script_file(&path, "python3", a.module.as_deref(), false)
                .map_err(engine)?
        }
        (None, _) => Workload::Command(argv(&a.run)?),
        (Some(_), false) => {
            return Err("invalid arguments: give command or script, not both".into())
        }
    };
    let mut req = kopt_engine::ProfileRequest::new(Vec::new());
    req.run = kopt_engine::WorkloadOptions {
        workload: what.clone(),
        ..workload(&a.run, Vec::new())?
    };
    req.module = a.module.clone();
    req.kernel_regex = a.kernel.clone();
    req.deep_top = a.deep.then_some(3);
    req.analysis = analysis_options(a.top, None);
    req.validate().map_err(engine)?;
    let passes = if a.deep { 4.0 } else { 3.0 };
    let db = req.run.db.clone();
    // A script's command is its driver's in a run folder not made yet: no
    // earlier run has the same one.
    let what_argv = match &what {
        Workload::Command(argv) => Some(argv),
        Workload::Script(_) => None,
    };
    long_run(
        ctx,
        a.run.budget_s,
        || match what_argv.and_then(|argv| cost::from_history(db.as_deref(), "profile", argv)) {
            Some(e) => Ok(e),
            None => {
                let t = timed(&what, a.run.budget_s, ctx)?;
                Ok(Estimate {
                    seconds: t * passes,
                    basis: format!("timing pass {t:.1} s x {passes} passes"),
                })
            }
        },
        || kopt_engine::profile(&req, ctx),
        |d, meta| tool_ok(d, with_cost(d.summary(), &meta), Some(meta)),
    )
}

fn trace(a: TraceArgs, ctx: &Context) -> Result<Value, String> {
    let argv = argv(&a.run)?;
    let req = kopt_engine::TraceRequest {
        run: workload(&a.run, argv.clone())?,
        sample: None,
        keep_timeline: false,
        bare_run: true,
        analysis: analysis_options(None, None),
    };
    req.validate().map_err(engine)?;
    let db = req.run.db.clone();
    long_run(
        ctx,
        a.run.budget_s,
        || match cost::from_history(db.as_deref(), "trace", &argv) {
            Some(e) => Ok(e),
            None => {
                let t = timed(&Workload::Command(argv.clone()), a.run.budget_s, ctx)?;
                Ok(Estimate {
                    seconds: t * 3.0,
                    basis: format!("timing pass {t:.1} s x 3 runs (traced, bare twice)"),
                })
            }
        },
        || kopt_engine::trace(&req, ctx),
        |t, meta| {
            tool_ok(
                &t.diagnosis,
                with_cost(t.diagnosis.summary(), &meta),
                Some(meta),
            )
        },
    )
}

/// A shell line that runs exactly `words` (each quoted).
fn shell_line(words: &[String], shell: bool) -> Result<String, String> {
    match (shell, words) {
        (_, []) => Err("invalid arguments: a command is empty".into()),
        (true, [line]) => Ok(line.clone()),
        (true, _) => Err("invalid arguments: with shell, each command is one string".into()),
        (false, words) => Ok(words
            .iter()
            .map(|w| {
                let plain = !w.is_empty()
                    && w.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c));
                if plain {
                    w.clone()
                } else {
                    format!("'{}'", w.replace('\'', "'\\''"))
                }
            })
            .collect::<Vec<_>>()
            .join(" ")),
    }
}

/// The stop rule's cost of one variant whose run takes `t` seconds.
/// What measuring one variant of a run time `t` costs at most under `m`:
/// a probe run and the warm-up runs, then sampling until `max_time_s` (a
/// noisy variant never meets the noise target sooner), or `min_samples`
/// runs when they take longer, and the run in progress at the limit.
fn variant_cost(t: f64, m: &kopt_engine::Measurement) -> f64 {
    t * (2.0 + m.warmup as f64) + sampling_cost(t, m)
}

/// The sampling part of [`variant_cost`].
fn sampling_cost(t: f64, m: &kopt_engine::Measurement) -> f64 {
    (m.stop.min_samples as f64 * t).max(m.stop.max_time_s.max(m.stop.min_time_s))
}

/// The `max_time_s` that makes `variants` variants of run times `times`
/// fit `budget` seconds, when a shorter sampling time (not below
/// `min_time_s` nor `min_samples` runs) can: an estimate capped to the
/// budget, said in its basis, instead of a refusal.
fn max_time_to_fit(times: &[f64], m: &kopt_engine::Measurement, budget: f64) -> Option<f64> {
    let fixed: f64 = times.iter().map(|t| t * (2.0 + m.warmup as f64)).sum();
    // A fifth of the budget left for the process starts the estimate leaves out.
    let per_variant = (budget * 0.8 - fixed) / times.len() as f64;
    let floor = times
        .iter()
        .map(|t| m.stop.min_samples as f64 * t)
        .fold(m.stop.min_time_s, f64::max);
    (per_variant >= floor && per_variant < m.stop.max_time_s).then_some(per_variant)
}

fn bench(a: BenchArgs, ctx: &Context) -> Result<Value, String> {
    let baseline = shell_line(&a.baseline, a.shell)?;
    let candidate = shell_line(&a.candidate, a.shell)?;
    let mut req = kopt_engine::BenchRequest::new(vec![
        kopt_engine::VariantSpec {
            name: "baseline".into(),
            command: baseline.clone(),
        },
        kopt_engine::VariantSpec {
            name: "candidate".into(),
            command: candidate.clone(),
        },
    ]);
    if let Some(t) = a.threshold {
        req.measure.threshold = t;
    }
    if let Some(n) = a.min_samples {
        req.measure.stop.min_samples = n;
    }
    if let Some(s) = a.max_time_s {
        req.measure.stop.max_time_s = s;
    }
    if let Some(w) = a.warmup {
        req.measure.warmup = w;
    }
    if let Some(s) = a.seed {
        req.measure.seed = s;
    }
    req.validate().map_err(engine)?;
    let capped = std::cell::Cell::new(None);
    long_run(
        ctx,
        a.budget_s,
        || {
            let mut times = Vec::new();
            for line in [&baseline, &candidate] {
                let argv = vec!["/bin/sh".to_string(), "-c".into(), line.clone()];
                times.push(timed(&Workload::Command(argv), a.budget_s, ctx)?);
            }
            let parts: Vec<String> = times.iter().map(|t| format!("{t:.2} s")).collect();
            let mut m = req.measure.clone();
            let mut cap = String::new();
            let bound = |m: &kopt_engine::Measurement| -> f64 {
                times.iter().map(|t| variant_cost(*t, m)).sum()
            };
            if bound(&m) > a.budget_s {
                if let Some(max_time) = max_time_to_fit(&times, &m, a.budget_s) {
                    m.stop.max_time_s = max_time;
                    capped.set(Some(max_time));
                    cap = format!(", max_time_s capped to {max_time:.1} s to fit the budget");
                }
            }
            Ok(Estimate {
                seconds: bound(&m),
                basis: format!(
                    "timing pass ({}), an upper bound under the stop rule: {} samples, {:.1} to {:.1} s a variant{cap}",
                    parts.join(", "),
                    m.stop.min_samples,
                    m.stop.min_time_s,
                    m.stop.max_time_s
                ),
            })
        },
        || {
            let mut req = req.clone();
            if let Some(max_time) = capped.get() {
                req.measure.stop.max_time_s = max_time;
            }
            kopt_engine::bench(&req, ctx)
        },
        |r, meta| tool_ok(r, with_cost(r.summary(), &meta), Some(meta)),
    )
}

fn compare(a: CompareArgs, ctx: &Context) -> Result<Value, String> {
    let req = kopt_engine::CompareRequest {
        reference: allowed_path(ctx.config, &a.reference)?,
        candidate: allowed_path(ctx.config, &a.candidate)?,
        tol: a.tol,
        tf32: a.tf32,
        atol: a.atol,
        rtol: a.rtol,
        allow_dtype_change: a.allow_dtype_change,
        db: HistoryDb::Project,
    };
    req.validate().map_err(engine)?;
    let r = kopt_engine::compare(&req, ctx).map_err(engine)?;
    let text = r.summary();
    tool_ok(&r, text, None)
}

fn optimize(a: OptimizeArgs, ctx: &Context) -> Result<Value, String> {
    let script = allowed_path(ctx.config, &a.script)?;
    let mut req = kopt_engine::OptimizeRequest::new(script);
    req.module = a.module;
    if let Some(p) = a.python {
        req.python = p;
    }
    req.gpu = a.gpu;
    req.quiet = true;
    if let Some(s) = a.max_time_s {
        req.max_time_s = s;
    }
    // The run fits its candidates to the budget (costly compile forms left
    // out, said in the report) rather than being refused for them.
    check_budget(a.budget_s)?;
    req.budget = Some(std::time::Duration::from_secs_f64(a.budget_s));
    req.validate().map_err(engine)?;
    let candidates = if req.force.is_empty() {
        kopt_engine::Candidate::ALL.len()
    } else {
        req.force.len()
    };
    let seconds = (candidates as f64 * 2.0 * req.max_time_s).min(a.budget_s);
    long_run(
        ctx,
        a.budget_s,
        || {
            Ok(Estimate {
                seconds,
                basis: format!(
                    "upper bound: {candidates} candidates x 2 variants x max_time_s {:.0} s, capped at budget_s (the run leaves out the candidates whose expected cost does not fit; the baseline's profile and the kept result's traced run not counted)",
                    req.max_time_s
                ),
            })
        },
        || kopt_engine::optimize(&req, ctx),
        |r, meta| {
            let text = kopt_report::Render::render(
                r,
                kopt_report::Format::Markdown,
                kopt_report::Layout::default(),
            );
            tool_ok(r, with_cost(text, &meta), Some(meta))
        },
    )
}

fn tune(a: TuneArgs, ctx: &Context) -> Result<Value, String> {
    use kopt_engine::tune::space;
    let params = a
        .params
        .iter()
        .map(|p| space::parse_param(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let space = space::Space::new(params, &a.constraints).map_err(|e| e.to_string())?;
    let first: String = space.params.iter().fold(a.template.clone(), |t, p| {
        t.replace(
            &format!("{{{}}}", p.name),
            p.values.first().map_or("", |v| v.as_str()),
        )
    });
    let configs = a
        .trials
        .unwrap_or(space.size_unfiltered())
        .min(space.size_unfiltered());
    let mut req = kopt_engine::TuneRequest::new(a.template.clone(), space);
    req.trials = a.trials;
    req.key = a.key;
    if let Some(n) = a.min_samples {
        req.measure.stop.min_samples = n;
    }
    if let Some(s) = a.max_time_s {
        req.measure.stop.max_time_s = s;
    }
    req.validate().map_err(engine)?;
    long_run(
        ctx,
        a.budget_s,
        || {
            let argv = vec!["/bin/sh".to_string(), "-c".into(), first.clone()];
            let t = timed(&Workload::Command(argv.clone()), a.budget_s, ctx)?;
            let runs = configs + req.top + 1;
            Ok(Estimate {
                seconds: runs as f64 * variant_cost(t, &req.measure),
                basis: format!(
                    "timing pass {t:.2} s of the first config, {configs} configs and a final comparison of {} under the stop rule (an upper bound with the cache)",
                    req.top + 1
                ),
            })
        },
        || kopt_engine::tune(&req, ctx),
        |r, meta| {
            let text = kopt_report::Render::render(
                r,
                kopt_report::Format::Markdown,
                kopt_report::Layout::default(),
            );
            tool_ok(r, with_cost(text, &meta), Some(meta))
        },
    )
}

fn history(a: HistoryArgs, ctx: &Context) -> Result<Value, String> {
    let listing = kopt_engine::history::list(None, a.limit.unwrap_or(20)).map_err(engine)?;
    let mut result = HistoryResult {
        db: listing.db.clone(),
        runs: Vec::new(),
        report: None,
    };
    if Path::new(&listing.db).exists() {
        let rows = match a.id {
            Some(id) => {
                let shown = kopt_engine::history::show(None, id).map_err(engine)?;
                // The stored report as the history's reader checked it: a
                // row it cannot read back gives none.
                let readable = !matches!(shown.report, kopt_model::history::StoredReport::None);
                result.report = shown
                    .row
                    .report_json
                    .as_deref()
                    .filter(|_| readable)
                    .and_then(|j| serde_json::from_str(j).ok());
                vec![shown.row]
            }
            None => listing.rows,
        };
        result.runs = rows
            .into_iter()
            .map(|r| {
                let resource = r
                    .run_dir
                    .as_deref()
                    .and_then(|d| super::resources::run_resource(&ctx.config.cwd, d));
                // Anyone's text, read back: each field cut to a line's worth
                // (a 50 MB summary made a 100 MB reply).
                let cut = |s: String| kopt_model::text::one_line(&s);
                HistoryRun {
                    id: r.id,
                    kind: cut(r.kind),
                    started_utc: cut(r.started_utc),
                    command: cut(r.command),
                    device: r.device.map(cut),
                    git_rev: r.git_rev.map(cut),
                    summary: cut(r.summary),
                    verdict: r.verdict.map(cut),
                    run_dir: r.run_dir,
                    resource,
                }
            })
            .collect();
    } else if a.id.is_some() {
        return Err(format!("no history yet ({})", listing.db));
    }
    let mut text = if result.runs.is_empty() {
        format!("No runs recorded in {}.\n", result.db)
    } else {
        String::new()
    };
    // Read back from the history: anyone's text, escaped as table cells.
    let cell = kopt_report::escape::markdown_cell;
    for r in &result.runs {
        text.push_str(&format!(
            "- run {} ({}, {}): {} | `{}`\n",
            r.id,
            cell(&r.kind),
            cell(&r.started_utc),
            cell(&r.summary),
            cell(&r.command)
        ));
    }
    tool_ok(&result, text, None)
}

fn journal_add(a: JournalAddArgs, _ctx: &Context) -> Result<Value, String> {
    let req = kopt_engine::journal::JournalEntryRequest {
        hypothesis: a.hypothesis,
        predict: a.predict,
        outcome: a.outcome,
        verdict: a.verdict,
        run: a.run,
    };
    let (path, _) = kopt_engine::journal::add_entry(None, &req).map_err(engine)?;
    let result = JournalResult {
        file: path.display().to_string(),
    };
    tool_ok(
        &result,
        format!("Journal entry added to {}.\n", result.file),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_lists_object_schemas() {
        let tools = list();
        assert_eq!(tools.len(), TOOLS.len());
        for t in &tools {
            assert_eq!(t["inputSchema"]["type"], "object", "{}", t["name"]);
            assert_eq!(t["outputSchema"]["type"], "object", "{}", t["name"]);
        }
    }

    #[test]
    fn words_are_quoted_for_the_shell() {
        let w = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            shell_line(&w(&["sleep", "0.1"]), false).unwrap(),
            "sleep 0.1"
        );
        assert_eq!(
            shell_line(&w(&["echo", "a b", "$(x)", "it's"]), false).unwrap(),
            "echo 'a b' '$(x)' 'it'\\''s'"
        );
        assert_eq!(
            shell_line(&w(&["sleep 1 | cat"]), true).unwrap(),
            "sleep 1 | cat"
        );
        assert!(shell_line(&w(&["a", "b"]), true).is_err());
        assert!(shell_line(&[], false).is_err());
    }
}
