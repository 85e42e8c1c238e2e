//! The command line as clap sees it. Validation that clap cannot express
//! lives in `options`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use kopt_engine::{Backend, Candidate, MeasureOptions, Measurement, TimingPass};
use kopt_report::Format;

#[derive(Debug, Parser)]
#[command(
    name = "kopt",
    version,
    about = "Profile-guided GPU kernel optimization: where the time goes, why each hot kernel is slow, what to change first",
    after_help = "Exit codes: 0 success (also `kopt history` and `kopt journal show` with nothing recorded yet); 1 an error: bad input, a missing tool, a failed workload, an unwritable output, an unreadable history; 2 a wrong command line; 3 a REVERT verdict (bench, compare). Every error is one line on stderr starting 'kopt: error:'."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Diagnose existing profiler output: ncu CSV pages, .ncu-rep reports, rocprofv3 / rocprof / rocprof-compute output, torch.profiler traces, kopt traces and run folders
    Analyze(AnalyzeArgs),
    /// Run a workload under a profiler in cheap passes (ncu on NVIDIA, rocprofv3 on AMD), then diagnose it
    Profile(ProfileArgs),
    /// Record a timeline of any CUDA program (kopt's CUPTI tracer), then diagnose it
    Trace(TraceArgs),
    /// Correctness gate: compare a candidate's output tensors with a reference (.npy, .safetensors)
    Compare(CompareArgs),
    /// The optimization journal (OPTIMIZATIONS.md): hypothesis, prediction, outcome, verdict
    #[command(subcommand)]
    Journal(JournalCommand),
    /// Every recorded run (profile, trace, bench, compare, optimize, tune), newest first; `show ID`, `diff A B`, `calibration`
    History(HistoryArgs),
    /// A/B (or ablation) benchmark with a bootstrap interval and a keep / marginal / revert verdict
    Bench(BenchArgs),
    /// Apply the mechanical fixes to a PyTorch module (CUDA graph, torch.compile), check and measure each, keep or revert
    Optimize(OptimizeArgs),
    /// Autotune a command template over a parameter space (grid, random, halving), every trial checked, timed and cached
    Tune(TuneArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) on stdout
    Completions {
        /// The shell to complete for
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print a man page (roff) on stdout: kopt's, or a command's (`kopt man analyze > kopt-analyze.1`)
    Man {
        /// The command whose page to print (the pages kopt(1) refers to as kopt-COMMAND(1))
        #[arg(value_name = "COMMAND")]
        command: Option<String>,
    },
    /// Serve kopt's tools to coding agents over the Model Context Protocol (stdio)
    Mcp(McpArgs),
    /// Print the JSON Schema of a kopt/1 document (diagnosis, bench, compare, optimize, tune), or of all
    Schema {
        /// The document (default: every one, keyed by name)
        #[arg(value_name = "NAME")]
        name: Option<String>,
    },
}

#[derive(Debug, Args)]
pub struct McpArgs {
    /// Also let analyze and compare read files under DIR (default: only under the folder the server starts in)
    #[arg(long, value_name = "DIR")]
    pub allow_path: Vec<PathBuf>,

    /// Calls in flight at once, any tool (each may read whole traces into memory); a further one is refused as busy
    #[arg(long, value_name = "N", default_value_t = crate::mcp::DEFAULT_MAX_CALLS,
          value_parser = clap::value_parser!(u64).range(1..=64))]
    pub max_calls: u64,
}

#[derive(Debug, Args)]
#[command(
    mut_arg("gpu", |a| a.help("GPU the bare run uses (sets CUDA_VISIBLE_DEVICES)")),
    mut_arg("timeout", |a| a.help("Kill the bare run (its whole process group) after this many seconds, per run")),
    mut_arg("quiet", |a| a.help("Do not pass the program's output through (it stays in the run folder's logs)")),
    mut_arg("runs_dir", |a| a.help("Folder that receives the bare run's folder (its logs and steps) [default: .kopt/runs at the repository root, else here]")),
    mut_arg("db", |a| a.help("History database whose checked predictions (from kopt optimize runs) calibrate the report's predicted gains [default: .kopt/history.db at the repository root, else here]")),
    after_help = "Examples:\n  kopt analyze report.csv\n  kopt analyze trace.pt.trace.json.gz report.csv --format md\n  kopt analyze trace.pt.trace.json -- python3 train.py   (time the program's steps bare for the graph-capture prediction)"
)]
pub struct AnalyzeArgs {
    /// Profiler output: `ncu --csv --page raw|details` files, .ncu-rep reports (needs ncu), rocprofv3 CSV / JSON / rocpd .db output, legacy rocprof (v1/v2) CSVs, a rocprof-compute (Omniperf) workload folder, rocminfo text, torch.profiler / Kineto trace JSON, kopt trace JSONL, or a `kopt profile` run folder
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// Show only the N kernels with the most time (all still count in the total)
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,

    /// Nsight Compute binary used to read .ncu-rep files
    #[arg(long, value_name = "PATH")]
    pub ncu: Option<PathBuf>,

    /// The program that made the trace: when its steps are marked (ProfilerStep#N or NVTX ranges), kopt runs it again bare (its torch.profiler replaced by step markers, no CUPTI) and times the same steps, so every step figure starts from the step without the profiler's cost
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,

    /// kopt's tracer library, loaded as NVTX's injection to time the steps of the bare run (default: libkopt_tracer.so next to kopt, or $KOPT_TRACER)
    #[arg(long, value_name = "PATH")]
    pub tracer: Option<PathBuf>,

    #[command(flatten)]
    pub run: RunArgs,

    #[command(flatten)]
    pub report: ReportArgs,
}

/// How the report is printed and which peaks it uses (shared by analyze and profile).
#[derive(Debug, Args, Clone)]
pub struct ReportArgs {
    /// Output format
    #[arg(long, short = 'f', value_enum, default_value = "term")]
    pub format: Format,

    /// Write the report to FILE instead of standard output
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Also write the self-contained HTML page (roofline, tables, verdicts) to FILE
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// Device name for datasheet peaks when the input names none (e.g. "H100 PCIe")
    #[arg(long, value_name = "NAME")]
    pub device: Option<String>,

    /// Measured DRAM bandwidth in GB/s (overrides attribute and datasheet peaks)
    #[arg(long, value_name = "GB/S")]
    pub peak_dram_gbs: Option<f64>,

    /// Measured FP32 peak in TFLOP/s
    #[arg(long, value_name = "TFLOP/S")]
    pub peak_fp32_tflops: Option<f64>,

    /// Measured dense bf16 tensor-core peak in TFLOP/s
    #[arg(long, value_name = "TFLOP/S")]
    pub peak_tensor_tflops: Option<f64>,

    /// Width of the terminal table (default: the terminal's)
    #[arg(long, value_name = "COLUMNS")]
    pub width: Option<u16>,

    /// Terminal table with every column (launches, mean, bandwidth, SOL, tensor, occupancy, AI), not the compact default
    #[arg(long)]
    pub wide: bool,

    /// The whole terminal report: each finding's evidence, action, estimate and source, the notes under each kernel, every kernel and op (the default fits one screen)
    #[arg(long, short = 'v')]
    pub verbose: bool,

    /// Keep warm-up / autotuning trial kernels (launched only in the warm-up steps before the steady state, e.g. cuDNN's benchmark search) in the table and totals; by default they are left out and summarised in one line
    #[arg(long)]
    pub keep_warmup: bool,
}

/// How a workload is run (shared by profile and trace).
#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    /// GPU to run on (sets CUDA_VISIBLE_DEVICES; HIP_VISIBLE_DEVICES under `--backend rocprof`)
    #[arg(long, value_name = "ID")]
    pub gpu: Option<String>,

    /// Kill the workload (its whole process group) after this many seconds (per pass for profile)
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,

    /// Do not pass the workload's output through (it stays in the run folder's logs)
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// Folder that receives one sub-folder per run [default: .kopt/runs at the repository root, else here]
    #[arg(long, value_name = "DIR")]
    pub runs_dir: Option<PathBuf>,

    /// History database every run is recorded in [default: .kopt/history.db at the repository root, else here]
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  kopt profile -- python3 bench.py --size 4096\n  kopt profile --script topk_sort.py --module topk_sort --gpu 1\n  kopt profile --kernel 'gemm|softmax' --profile-top 5 -- ./my_cuda_app\n  kopt profile --deep -- python3 bench.py\n  kopt profile --backend rocprof --gpu 0 -- ./my_hip_app"
)]
pub struct ProfileArgs {
    /// The workload: a program and its arguments, passed as given (no shell)
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,

    /// Run this Python script (with --python) instead of a command
    #[arg(long, value_name = "FILE", conflicts_with = "command")]
    pub script: Option<PathBuf>,

    /// Python interpreter for --script
    #[arg(long, default_value = "python3", value_name = "EXE")]
    pub python: String,

    /// Name of the module under study; labels the run and the report
    #[arg(long, value_name = "NAME")]
    pub module: Option<String>,

    /// Only kernels whose demangled name matches this regex
    #[arg(long, value_name = "REGEX")]
    pub kernel: Option<String>,

    /// For a module script: record PyTorch's op ranges with input shapes
    /// (emit_nvtx), so each kernel is traced back to the op that launched it
    /// (costs host time per op: launch-bound figures read higher)
    #[arg(long, requires = "script")]
    pub ops: bool,

    /// Skip the bare run: when the tracer's steps are NVTX ranges, kopt runs the workload twice more without CUPTI (and without --ops' op ranges), timing only the steps (a program without ranges: only its sync calls), so every step figure starts from the step as it runs untraced
    #[arg(long)]
    pub no_bare_run: bool,

    /// Measure the top N recommendations that have an automatic fix (graph capture, channels_last, TF32, SDPA, batch-norm folding) on the module script: each shows "verified: measured X" beside its prediction, and the ranking uses the measurement
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub verify: usize,

    /// Collect counters on the N hottest distinct kernels, always. Without
    /// it the counter pass covers at most 20, only those whose counters
    /// could change the first finding, and is skipped (with the reason)
    /// when the timeline's first finding saves more than any kernel's time
    #[arg(long, value_name = "N")]
    pub profile_top: Option<usize>,

    /// Show only the N kernels with the most time, as in analyze (all still
    /// count in the total)
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,

    /// Launches per kernel launch configuration in the targeted pass
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub launches: u32,

    /// Add a pass with ncu's full sections (--set full) for the hottest kernels
    #[arg(long)]
    pub deep: bool,

    /// Kernels the deep pass covers
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub deep_top: usize,

    /// Nsight Compute binary
    #[arg(long, value_name = "PATH")]
    pub ncu: Option<PathBuf>,

    /// Profiler: ncu (NVIDIA), rocprof (AMD rocprofv3: a kernel trace, then
    /// counter passes on the kernels that carry the time), or auto (rocprof
    /// when rocprofv3 is on PATH and no NVIDIA GPU is, else ncu)
    #[arg(long, value_enum, default_value = "auto", value_name = "BACKEND")]
    pub backend: Backend,

    /// rocprofv3 binary (default: PATH, then /opt/rocm/bin/rocprofv3)
    #[arg(long, value_name = "PATH")]
    pub rocprof: Option<PathBuf>,

    /// Pass 1 (every launch's time): tracer (kopt's CUPTI tracer: the real
    /// timeline; falls back to ncu when the tracer library is missing, records
    /// nothing, or --kernel is not a regex kopt can read) or ncu (serialised
    /// replay, no timeline)
    #[arg(long, value_enum, default_value = "tracer", value_name = "SOURCE")]
    pub timing_pass: TimingPass,

    /// kopt's tracer library (default: libkopt_tracer.so next to kopt, or $KOPT_TRACER)
    #[arg(long, value_name = "PATH")]
    pub tracer: Option<PathBuf>,

    #[command(flatten)]
    pub run: RunArgs,

    #[command(flatten)]
    pub report: ReportArgs,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  kopt trace -- python3 train_step.py\n  kopt trace --export perfetto out.json -- ./app\n\nNVTX ranges (nvtxRangePush, torch.cuda.nvtx.range_push) are recorded: the most repeated one marks iterations.\nTracer settings (environment): KOPT_TRACER_APIS=select|all|off (which API calls are recorded; default select),\nKOPT_TRACER_BUFFER_MB, KOPT_TRACER_PREALLOC, KOPT_TRACER_PER_THREAD_BUFFERS=1, KOPT_TRACER_HW_TRACE=1, KOPT_TRACER_SYNC_DRAIN=1.\nOnly one CUPTI client traces at a time: a program that starts torch.profiler itself takes tracing over (the report says so)."
)]
pub struct TraceArgs {
    /// The workload: a program and its arguments, passed as given (no shell)
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,

    /// Also export the timeline: `--export perfetto FILE` (chrome-trace JSON for ui.perfetto.dev)
    #[arg(long, num_args = 2, value_names = ["FORMAT", "FILE"])]
    pub export: Vec<String>,

    /// kopt's CUPTI tracer library (default: libkopt_tracer.so next to kopt, or $KOPT_TRACER)
    #[arg(long, value_name = "PATH")]
    pub tracer: Option<PathBuf>,

    /// Trace ON of every PERIOD (e.g. 10ms/100ms) and detach from CUDA in between: CUPTI's per-launch cost applies inside the windows only; figures cover the windows
    #[arg(long, value_name = "ON/PERIOD")]
    pub sample: Option<String>,

    /// Skip the bare run: when the traced steps are NVTX or ProfilerStep ranges, kopt runs the workload twice more without CUPTI, timing only those ranges (a program without ranges: only its sync calls), so every step figure starts from the step as it runs untraced
    #[arg(long)]
    pub no_bare_run: bool,

    #[command(flatten)]
    pub run: RunArgs,

    #[command(flatten)]
    pub report: ReportArgs,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Exit codes: 0 every tensor within tolerance, 3 a mismatch (the REVERT verdict), 1 unreadable input."
)]
pub struct CompareArgs {
    /// Reference output (.npy or .safetensors)
    #[arg(value_name = "REFERENCE")]
    pub reference: PathBuf,

    /// Candidate output (.npy or .safetensors)
    #[arg(value_name = "CANDIDATE")]
    pub candidate: PathBuf,

    /// Relative L2 tolerance (default by dtype: f64 1e-12, f32 1e-5, tf32 5e-4, f16/bf16 1e-2, integers exact)
    #[arg(long, value_name = "REL_L2")]
    pub tol: Option<f64>,

    /// The candidate ran float32 math on tensor cores (tf32): tolerance 5e-4
    #[arg(long)]
    pub tf32: bool,

    /// Element-wise absolute tolerance: each element must satisfy |candidate - reference| <= atol + rtol*|reference| (torch.allclose's rule) [default by dtype: f64 1e-10, f32 1e-5, tf32 1e-3, f16 1e-3, bf16 1e-2, integers 0]
    #[arg(long, value_name = "ATOL")]
    pub atol: Option<f64>,

    /// Element-wise relative tolerance (see --atol) [default by dtype: f64 1e-8, f32 1e-4, tf32 5e-3, f16 1e-2, bf16 5e-2, integers 0; at least --tol]
    #[arg(long, value_name = "RTOL")]
    pub rtol: Option<f64>,

    /// Compare a candidate whose dtype differs from the reference's (judged with the looser type's tolerances); without it, a changed dtype fails
    #[arg(long)]
    pub allow_dtype_change: bool,

    /// Output format
    #[arg(long, short = 'f', value_enum, default_value = "term")]
    pub format: Format,

    /// Write the report to FILE instead of standard output
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// History database the comparison is recorded in [default: .kopt/history.db at the repository root, else here]
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum JournalCommand {
    /// Append an entry to OPTIMIZATIONS.md (at the git repository's root by default)
    Add(JournalAddArgs),
    /// Print the journal
    Show {
        /// Journal file (default: OPTIMIZATIONS.md at the repository root)
        #[arg(long, value_name = "FILE")]
        file: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
pub struct JournalAddArgs {
    /// What you think slows the kernel and what you change
    #[arg(long, value_name = "TEXT")]
    pub hypothesis: String,

    /// What should move, and by how much (e.g. '-30% in k_transpose')
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    pub predict: Option<String>,

    /// What was measured
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    pub outcome: Option<String>,

    /// KEEP, MARGINAL or REVERT
    #[arg(long, value_name = "VERDICT")]
    pub verdict: Option<String>,

    /// The run folder or run id the outcome comes from
    #[arg(long, value_name = "RUN")]
    pub run: Option<String>,

    /// Journal file (default: OPTIMIZATIONS.md at the repository root)
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Exit codes: 0 the runs listed, or one line where none was recorded yet (no database, or an empty one); 1 a database that cannot be read (named), or a run ID that is not there."
)]
pub struct HistoryArgs {
    /// History database [default: .kopt/history.db at the repository root, else here]
    #[arg(long, value_name = "FILE", global = true)]
    pub db: Option<PathBuf>,

    /// Runs listed
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub limit: usize,

    #[command(subcommand)]
    pub command: Option<HistoryCommand>,
}

#[derive(Debug, Subcommand)]
pub enum HistoryCommand {
    /// One run in full
    Show { id: i64 },
    /// Two runs side by side: total time, primary bottleneck, per-kernel time
    Diff { a: i64, b: i64 },
    /// Predicted vs measured per rule, from the kopt optimize runs recorded
    Calibration,
    /// Write rows in a loop (for the crash test; not for users)
    #[command(hide = true)]
    Stress {
        #[arg(long, default_value_t = 1_000_000)]
        rows: u64,
    },
}

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  kopt bench --baseline 'python3 k.py --impl ref' --candidate 'python3 k.py --impl new'\n  kopt bench -n base='./app --v1' -n tiled='./app --v2' -n swizzled='./app --v3'\n\nTiming, best first (--timing auto): GPU time per iteration from kopt's tracer when the command opens repeated NVTX ranges (one per iteration); else the lines {\"kopt_sample_ns\": N} (or {\"kopt_sample_s\": x}) it prints; else its wall time. The report names the source. Exit code 3 when a candidate's verdict is REVERT."
)]
pub struct BenchArgs {
    /// Baseline command (run through /bin/sh -c, like hyperfine)
    #[arg(long, value_name = "CMD", requires = "candidate")]
    pub baseline: Option<String>,

    /// Candidate command
    #[arg(long, value_name = "CMD")]
    pub candidate: Option<String>,

    /// Named variants for an ablation: NAME=CMD, the first is the baseline
    #[arg(short = 'n', long = "variant", value_name = "NAME=CMD", conflicts_with_all = ["baseline", "candidate"])]
    pub variants: Vec<String>,

    /// Baseline module script (an nn.Module class and get_inputs()): with --candidate-script, both are timed in one Python process by the in-process gate (CUDA events, fresh inputs checked, SUSPECT for a candidate that games the timer)
    #[arg(long, value_name = "FILE", requires = "candidate_script", conflicts_with_all = ["baseline", "candidate", "variants"])]
    pub script: Option<PathBuf>,

    /// Candidate module script, the same class and call as --script's
    #[arg(long, value_name = "FILE", requires = "script")]
    pub candidate_script: Option<PathBuf>,

    /// The class both module scripts define
    #[arg(
        long,
        value_name = "NAME",
        default_value = "Model",
        requires = "script"
    )]
    pub module: String,

    /// Python interpreter (with PyTorch) for --script
    #[arg(
        long,
        value_name = "EXE",
        default_value = "python3",
        requires = "script"
    )]
    pub python: String,

    /// With --script: time the pair again with L2 flushed before every call, reported beside the warm verdict
    #[arg(long, requires = "script")]
    pub flush_l2: bool,

    /// With --script: seconds of timing in all (the in-process gate's budget; --max-time is the process-level bench's)
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 2.0,
        requires = "script"
    )]
    pub gate_time: f64,

    /// With --script: GPU the process uses (sets CUDA_VISIBLE_DEVICES)
    #[arg(long, value_name = "ID", requires = "script")]
    pub gpu: Option<String>,

    #[command(flatten)]
    pub measure: MeasureOptions,

    /// Record the verdict in OPTIMIZATIONS.md with this hypothesis
    #[arg(long, value_name = "HYPOTHESIS")]
    pub journal: Option<String>,

    /// Output format
    #[arg(long, short = 'f', value_enum, default_value = "term")]
    pub format: Format,

    /// Write the report to FILE instead of standard output
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// History database the verdict is recorded in [default: .kopt/history.db at the repository root, else here]
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
}

#[derive(Debug, Args)]
#[command(
    after_help = "The script follows the module convention: an nn.Module class (Model, or the one --module names), get_inputs() and optionally get_init_inputs().\n\nSteps: a baseline profile (kopt's tracer, and ncu on the hot kernels) and its diagnosis; the candidates the diagnosis gives a reason for, in its order (CUDA graph capture when launches set the pace, torch.compile modes, compile (the default mode) from the torch.compile finding, channels_last, tf32, bf16-autocast, sdpa, compile-freezing, cudnn-benchmark from their findings); each checked against eager on fresh inputs with the tolerance of what it changes (tf32 and bf16-autocast kept only with --allow-precision); all timed interleaved in one process (CUDA events per step); KEEP / MARGINAL / REVERT per candidate; the kept ones stacked greedily, each stack checked and timed; a journal entry each (a kept one with the line to type by hand), and the ablation table.\n\nExample:\n  kopt optimize --script moe_routing.py --module topk_sort --gpu 0"
)]
pub struct OptimizeArgs {
    /// The module script
    #[arg(long, value_name = "FILE", required_unless_present = "conclude")]
    pub script: Option<PathBuf>,

    /// Run nothing: judge and record what an interrupted run (killed after
    /// its candidates were measured) left in this run folder; give the
    /// verdict flags (--threshold, --allow-precision, ...) the run had
    #[arg(long, value_name = "RUN_DIR", conflicts_with = "script")]
    pub conclude: Option<PathBuf>,

    /// The class to optimize and the run's label (default: the script's name)
    #[arg(long, value_name = "NAME")]
    pub module: Option<String>,

    /// Python interpreter (with PyTorch)
    #[arg(long, default_value = "python3", value_name = "EXE")]
    pub python: String,

    /// Try this candidate whatever the diagnosis says (repeat for several)
    #[arg(long = "candidate", value_enum, value_name = "NAME")]
    pub candidates: Vec<Candidate>,

    /// Never try this candidate (repeat for several), e.g. the compile forms when minutes of compiling do not fit
    #[arg(long = "skip", value_enum, value_name = "NAME")]
    pub skip: Vec<Candidate>,

    /// Keep candidates that change numerics (tf32, bf16-autocast) when their outputs pass that precision's tolerance
    #[arg(long)]
    pub allow_precision: bool,

    /// The whole run's time budget, seconds (or `none`): candidates are tried by predicted gain per expected cost while they fit (the max-autotune compiles take minutes), the rest left out with the reason
    #[arg(long, value_name = "SECONDS", default_value = "120", value_parser = parse_budget)]
    pub budget: Budget,

    /// Do not combine the kept candidates after measuring them one by one
    #[arg(long)]
    pub no_stack: bool,

    /// Do not trace the kept result afterwards (its timeline and kernel
    /// table beside eager's)
    #[arg(long)]
    pub no_profile_kept: bool,

    /// Baseline from the timeline alone (no ncu pass)
    #[arg(long)]
    pub no_counters: bool,

    /// Speed-up that counts for KEEP (0.05 = 5%)
    #[arg(long, default_value_t = Measurement::default().threshold)]
    pub threshold: f64,

    /// Samples each variant needs at least
    #[arg(long, default_value_t = Measurement::default().stop.min_samples)]
    pub min_samples: usize,

    /// Seconds the interleaved timing may take at most (each harness run)
    #[arg(long, default_value_t = Measurement::default().stop.max_time_s)]
    pub max_time: f64,

    /// Seed of the bootstrap (results reproduce)
    #[arg(long, default_value_t = Measurement::default().seed)]
    pub seed: u64,

    /// Steps the baseline profile records (after 3 warm-up steps)
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub steps: u32,

    /// Do not write journal entries (OPTIMIZATIONS.md)
    #[arg(long)]
    pub no_journal: bool,

    /// Journal file (default: OPTIMIZATIONS.md at the repository root)
    #[arg(long, value_name = "FILE")]
    pub journal_file: Option<PathBuf>,

    /// kopt's tracer library (default: libkopt_tracer.so next to kopt, or $KOPT_TRACER)
    #[arg(long, value_name = "PATH")]
    pub tracer: Option<PathBuf>,

    /// Nsight Compute binary
    #[arg(long, value_name = "PATH")]
    pub ncu: Option<PathBuf>,

    #[command(flatten)]
    pub run: RunArgs,

    /// Output format
    #[arg(long, short = 'f', value_enum, default_value = "term")]
    pub format: Format,

    /// Write the report to FILE instead of standard output
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// What `kopt tune --emit` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TuneEmit {
    /// The winner as a `triton.Config(...)` list entry
    Triton,
}

#[derive(Debug, Args)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "Examples:\n  kopt tune --param BLOCK=64,128,256 --param WARPS=4,8 -- python3 k.py --block {BLOCK} --warps {WARPS}\n  kopt tune --space space.toml --check out.npy --gpus 0,1 -- python3 k.py --out {CHECK} --block {BLOCK}\n  kopt tune show --key M=4096\n\nValues: lists (64,128,256), ranges (64..256 step 64, 16..256 x2). Constraints: + - * / % < <= > >= == != and or not.\nSpace file: constraints = [\"BLOCK * WARPS <= 2048\"] and a [params] table (BLOCK = [64, 128], WARPS = \"1..8 x2\").\nEvery trial is timed as kopt bench times (GPU ranges, reported samples, or wall time) and cached in the history database: a second run measures nothing already measured (--fresh to measure again).\nWith --check and several GPUs, write the output to {CHECK}: each worker gets its own file."
)]
pub struct TuneArgs {
    #[command(subcommand)]
    pub show: Option<TuneCommand>,

    /// The command template: {NAME} is replaced by each parameter's value (one word: run as a shell command)
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,

    /// A parameter and its values: NAME=64,128,256, NAME=64..256 step 64, NAME=16..256 x2 (repeat)
    #[arg(long = "param", short = 'p', value_name = "NAME=VALUES")]
    pub params: Vec<String>,

    /// A space file: [params] table and constraints = [...]
    #[arg(long, value_name = "FILE")]
    pub space: Option<PathBuf>,

    /// A constraint every config must satisfy, e.g. 'BLOCK * WARPS <= 2048' (repeat)
    #[arg(long = "constraint", value_name = "EXPR")]
    pub constraints: Vec<String>,

    /// grid, random (with --trials) or halving [default: grid up to 64 configs, halving beyond]
    #[arg(long, value_enum, value_name = "STRATEGY")]
    pub strategy: Option<kopt_engine::Strategy>,

    /// Configs the random strategy tries
    #[arg(long, value_name = "N")]
    pub trials: Option<usize>,

    /// The reference config every output is compared with: NAME=VAL,... [default: the first point]
    #[arg(long, value_name = "NAME=VAL,...")]
    pub baseline: Option<String>,

    /// The problem (shape) the sweep is for; part of the cache key
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,

    /// Measure every trial again (the cache is updated)
    #[arg(long)]
    pub fresh: bool,

    /// GPUs to run trials on, one worker each: 0,1 [default: all visible]
    #[arg(long, value_name = "IDS")]
    pub gpus: Option<String>,

    /// Best configs timed again, interleaved on one GPU, against the baseline
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub top: usize,

    /// Print the winner in another form: triton (a triton.Config(...) entry on stdout; the report goes to -o or stderr)
    #[arg(long, value_enum, value_name = "FORM")]
    pub emit: Option<TuneEmit>,

    #[command(flatten)]
    pub measure: MeasureOptions,

    /// Output format
    #[arg(long, short = 'f', value_enum, default_value = "term")]
    pub format: Format,

    /// Write the report to FILE instead of standard output
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// History database holding the tune cache [default: .kopt/history.db at the repository root, else here]
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum TuneCommand {
    /// The cached winners, per command template, key and device
    Show {
        /// Only this key
        #[arg(long, value_name = "KEY")]
        key: Option<String>,

        /// History database [default: .kopt/history.db at the repository root, else here]
        #[arg(long, value_name = "FILE")]
        db: Option<PathBuf>,
    },
}

/// `optimize --budget`: seconds, or no budget at all.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Budget {
    Seconds(f64),
    Unbounded,
}

/// Parsed here, checked in `options` (a positive, finite number).
fn parse_budget(s: &str) -> Result<Budget, String> {
    if s.eq_ignore_ascii_case("none") {
        return Ok(Budget::Unbounded);
    }
    s.trim()
        .parse::<f64>()
        .map(Budget::Seconds)
        .map_err(|_| format!("'{s}' is not a number of seconds or `none`"))
}
