//! `kopt optimize`'s parts below its run (`optimize_run.rs`): the request,
//! the candidates the diagnosis gives a reason for (`choose`), the
//! harness that builds each, checks it against eager on fresh inputs and
//! times all interleaved in one process, the keep / revert verdicts with
//! the bench statistics, stacks, the journal; and `kopt profile --verify`,
//! which measures the top recommendations with the same harness.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kopt_collect::runner::{self, RunSpec};
use kopt_model::compare::CompareReport;
use kopt_model::optimize::{Baseline, CandidateFailure, CandidateResult, OptimizeReport};
use kopt_model::{BenchReport, BottleneckClass, Diagnosis, Verdict, VerdictKind};
use serde::Deserialize;

use crate::bench::{decide_all, Decision, Measured, Measurement};
use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::workload::WorkloadOptions;

pub use crate::candidate::{Candidate, Numerics};

#[derive(Debug, Clone, PartialEq)]
pub struct OptimizeRequest {
    /// A module script (KernelBench convention).
    pub script: PathBuf,
    /// The class to pick and the run's label (default: the script's stem).
    pub module: Option<String>,
    pub python: String,
    pub gpu: Option<String>,
    /// Per process (the baseline profile's passes, the harness).
    pub timeout: Option<Duration>,
    pub quiet: bool,
    pub tracer: Option<PathBuf>,
    pub ncu: Option<PathBuf>,
    /// Counters on the hot kernels too (ncu); else the timeline only.
    pub counters: bool,
    /// Try these whatever the diagnosis says (empty: let it choose).
    pub force: Vec<Candidate>,
    /// Never try these (the diagnosis's choice notwithstanding).
    pub skip: Vec<Candidate>,
    /// Keep candidates that change numerics (TF32, bf16) when they pass
    /// their precision's tolerance.
    pub allow_precision: bool,
    /// Combine the kept candidates greedily after the singles.
    pub stack: bool,
    /// Run the kept result once more under kopt's tracer and report where
    /// its time went (`OptimizeReport::kept_profile`).
    pub profile_kept: bool,
    pub threshold: f64,
    pub noise: f64,
    pub seed: u64,
    pub min_samples: usize,
    pub max_time_s: f64,
    pub noise_target: f64,
    /// Profile steps of the baseline.
    pub steps: u32,
    pub runs_dir: PathBuf,
    pub db: PathBuf,
    /// Journal entries go here (None: no journal).
    pub journal: Option<PathBuf>,
    /// The whole run's time budget: candidates are tried by predicted gain
    /// per expected cost while their expected costs fit, the rest left out
    /// with the reason (`fit_budget`). None: every chosen candidate.
    pub budget: Option<Duration>,
    /// Run nothing: judge what an interrupted run left in this run folder
    /// (its baseline and the harness's samples), then record it as the run
    /// would have (`optimize_run::conclude_interrupted`). `script` and
    /// `module` come from the folder.
    pub conclude: Option<PathBuf>,
}

impl OptimizeRequest {
    /// A request with the CLI's defaults: how variants are timed and judged
    /// comes from `Measurement::default()`, the one place those live.
    pub fn new(script: PathBuf) -> OptimizeRequest {
        let paths = crate::record::RecordPaths::current();
        let m = Measurement::default();
        OptimizeRequest {
            script,
            module: None,
            python: "python3".into(),
            gpu: None,
            timeout: None,
            quiet: false,
            tracer: None,
            ncu: None,
            counters: true,
            force: Vec::new(),
            skip: Vec::new(),
            allow_precision: false,
            stack: true,
            profile_kept: true,
            threshold: m.threshold,
            noise: m.noise,
            seed: m.seed,
            min_samples: m.stop.min_samples,
            max_time_s: m.stop.max_time_s,
            noise_target: m.stop.noise_target,
            steps: 20,
            runs_dir: paths.runs_dir,
            db: paths.db,
            journal: Some(paths.journal),
            budget: None,
            conclude: None,
        }
    }

    pub fn validate(&self) -> Result<()> {
        if !(self.threshold > 0.0 && self.threshold < 1.0) {
            return Err(Error::Usage("--threshold must be in (0, 1)".into()));
        }
        if !(self.max_time_s > 0.0 && self.max_time_s.is_finite()) {
            return Err(Error::Usage(
                "--max-time must be a positive number of seconds".into(),
            ));
        }
        if self.max_time_s > crate::workload::MAX_SECONDS {
            return Err(Error::Usage(format!(
                "--max-time must be at most {:e} seconds, got {:e}",
                crate::workload::MAX_SECONDS,
                self.max_time_s
            )));
        }
        if self.min_samples < 2 {
            return Err(Error::Usage("--min-samples must be at least 2".into()));
        }
        if self.steps == 0 {
            return Err(Error::Usage("--steps must be at least 1".into()));
        }
        if let Some(c) = self.force.iter().find(|c| self.skip.contains(c)) {
            return Err(Error::Usage(format!(
                "--candidate {0} and --skip {0} contradict each other",
                c.name()
            )));
        }
        Ok(())
    }

    pub(crate) fn module_name(&self) -> String {
        self.module.clone().unwrap_or_else(|| {
            self.script
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "module".into())
        })
    }
}

/// A candidate as the diagnosis sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub candidate: Candidate,
    pub tried: bool,
    pub reason: String,
    pub predicted_speedup: Option<f64>,
    pub prediction_model: Option<String>,
    /// The rank of the finding it comes from (the diagnosis's order).
    pub rank: Option<usize>,
}

/// What building and timing a candidate is expected to cost, seconds: the
/// compile forms compile the model (Inductor's autotuning benchmarks every
/// GEMM's configurations), the others are a rebuild and a few rounds of
/// timing. Rough by design: they decide what fits a budget, not a figure.
pub(crate) fn expected_cost_s(c: Candidate) -> f64 {
    match c {
        Candidate::CompileMaxAutotune | Candidate::CompileMaxAutotuneGraph => 180.0,
        Candidate::Compile | Candidate::CompileReduceOverhead | Candidate::CompileFreezing => 45.0,
        _ => 8.0,
    }
}

/// A training step's choices: the candidates its harness cannot apply are
/// not tried (and spend none of the budget), with the reason.
pub fn restrict_to_training(choices: &mut [Choice]) {
    let those: Vec<&str> = Candidate::ALL
        .into_iter()
        .filter(|c| c.applies_to_training())
        .map(Candidate::name)
        .collect();
    for c in choices
        .iter_mut()
        .filter(|c| !c.candidate.applies_to_training())
    {
        c.tried = false;
        c.reason = format!(
            "not applicable: {} is not a candidate for a training step (those: {}); the diagnosis: {}",
            c.candidate.name(),
            those.join(", "),
            c.reason
        );
    }
}

/// What measuring the stacks is expected to cost, seconds: one process
/// builds them all, each compile form compiling once.
pub(crate) fn stacks_cost_s(stacks: &[Variant]) -> f64 {
    stacks
        .iter()
        .map(|v| {
            v.parts
                .iter()
                .map(|c| expected_cost_s(*c))
                .fold(0.0, f64::max)
        })
        .sum()
}

/// Keeps the chosen candidates whose expected costs fit `left`, seconds:
/// by predicted gain per expected second (no prediction: a 1.05x guess),
/// the rest left out with their cost and the budget in the reason. The
/// candidates in `force` (asked for by name) are always tried, and spend
/// the budget first.
pub fn fit_budget(choices: &mut [Choice], left_s: f64, force: &[Candidate]) {
    let mut order: Vec<usize> = (0..choices.len()).filter(|&i| choices[i].tried).collect();
    let value = |c: &Choice| {
        if force.contains(&c.candidate) {
            return f64::INFINITY;
        }
        (c.predicted_speedup.unwrap_or(1.05) - 1.0).max(0.0) / expected_cost_s(c.candidate)
    };
    order.sort_by(|&a, &b| value(&choices[b]).total_cmp(&value(&choices[a])));
    let mut spent = 0.0;
    for i in order {
        let cost = expected_cost_s(choices[i].candidate);
        if spent + cost <= left_s || force.contains(&choices[i].candidate) {
            spent += cost;
            continue;
        }
        let c = &mut choices[i];
        c.tried = false;
        c.reason = format!(
            "left out to fit the budget: expected to take about {cost:.0} s, {:.0} s of the budget left after the candidates with more predicted gain per second ({})",
            (left_s - spent).max(0.0),
            c.reason
        );
    }
}

/// A finding's predicted step speed-up and how it was made: the ranking's
/// figure, else the timeline's graph model (graph capture), else the gain
/// (the step cannot fall below what the finding leaves).
fn prediction_of(d: &Diagnosis, rec: &kopt_model::Recommendation) -> Option<(f64, String)> {
    let timeline = (rec.id == "capture_cuda_graph")
        .then(|| {
            d.timeline
                .as_ref()
                .and_then(|t| t.graph_prediction.as_ref())
        })
        .flatten()
        .map(|g| &g.speedup);
    rec.predicted_speedup
        .as_ref()
        .or(timeline)
        .map(|p| {
            (
                p.estimate,
                format!("{} (range {:.2}x to {:.2}x)", p.model, p.low, p.high),
            )
        })
        .or_else(|| {
            rec.gain
                .as_ref()
                .filter(|g| g.workload_pct > 0.0 && g.workload_pct < 100.0)
                .map(|g| (100.0 / (100.0 - g.workload_pct), g.method.clone()))
        })
}

/// Which candidates the diagnosis gives a reason for, and what it predicts:
/// the tried ones first, in the diagnosis's order (the rank of the finding
/// each comes from, then the predicted speed-up), then the skipped ones,
/// each with its reason. `force` tries a candidate whatever the diagnosis
/// says; `skip` never does.
pub fn choose(d: &Diagnosis, force: &[Candidate], skip: &[Candidate]) -> Vec<Choice> {
    let timeline = d.timeline.as_ref();
    let busy = timeline.map(|t| t.busy_pct);
    let launch_bound = timeline.is_some_and(|t| t.launch_bound)
        || d.primary
            .as_ref()
            .is_some_and(|p| p.class == BottleneckClass::LaunchOverhead);
    let busy_text = busy.map_or("GPU busy share unknown (no timeline)".to_string(), |b| {
        format!("GPU busy {b:.1}% of the steady-state window")
    });
    let rec = |id: &str| d.recommendations.iter().find(|r| r.id == id);
    let fusion = d
        .recommendations
        .iter()
        .any(|r| r.id.contains("fuse") || r.title.to_ascii_lowercase().contains("fuse"));
    let cudnn = d.kernels.iter().any(|k| {
        k.library.as_ref().is_some_and(|l| l.library == "cuDNN")
            || k.name.to_ascii_lowercase().contains("cudnn")
    });
    let found = |id: &str, yes: String, no: &str| match rec(id) {
        Some(r) => (true, format!("{yes} (finding #{}: {})", r.rank, r.title)),
        None => (false, no.to_string()),
    };
    let mut choices: Vec<Choice> = Candidate::ALL
        .iter()
        .map(|&c| {
            let (mut tried, mut reason) = match c {
                Candidate::CompileMaxAutotune if launch_bound => (false, format!("launch bound ({busy_text}): faster kernels cannot help while launches set the pace")),
                Candidate::CompileMaxAutotune => (true, format!("kernels rather than launches set the pace ({busy_text}): Inductor's autotuned kernels may be faster")),
                Candidate::CompileMaxAutotuneGraph if launch_bound && !fusion => (false, "launch bound, but no fusion finding: compiling first adds nothing a plain graph does not".to_string()),
                Candidate::Graph | Candidate::CompileReduceOverhead | Candidate::CompileMaxAutotuneGraph if launch_bound => (true, format!("launch bound ({busy_text}): replaying the step from a CUDA graph removes the per-launch cost")),
                Candidate::Graph | Candidate::CompileReduceOverhead | Candidate::CompileMaxAutotuneGraph => (false, format!("{busy_text}: launches do not set the pace, so a CUDA graph would save almost nothing")),
                Candidate::ChannelsLast => found("use_channels_last", "cuDNN converts layouts around NCHW convolutions: channels_last removes the conversions".into(), "no layout conversions around convolutions in the step (no channels_last finding)"),
                Candidate::Tf32 => found("enable_tf32", "float32 matmuls or convolutions on the FMA pipes: TF32 runs them on the tensor cores".into(), "no float32 GEMM or convolution on the FMA pipes (no TF32 finding)"),
                Candidate::Bf16Autocast => found("enable_tf32", "float32 matmuls or convolutions on the FMA pipes: bf16 runs them on the tensor cores at half the bytes".into(), "no float32 GEMM or convolution on the FMA pipes (no TF32 finding)"),
                Candidate::Sdpa => found("use_fused_attention", "attention in eager ops: scaled_dot_product_attention fuses it".into(), "no attention in eager ops (no fused-attention finding)"),
                Candidate::Compile => found("use_torch_compile", "kernels Inductor fuses (elementwise, normalization, softmax chains) take a share of the step: torch.compile fuses them".into(), "no fusible kernels worth compiling (no torch.compile finding)"),
                Candidate::CompileFreezing => found("fold_batch_norm", "batch norm runs as its own kernels: freezing folds it into the convolutions".into(), "no batch norm to fold (no batch-norm finding)"),
                Candidate::CudnnBenchmark if cudnn => (true, "cuDNN kernels in the step: benchmark mode picks the fastest algorithm per shape".into()),
                Candidate::CudnnBenchmark => (false, "no cuDNN kernel in the step".into()),
                Candidate::FusedOptimizer => found("use_fused_optimizer", "the training step's optimizer runs in for-loop or foreach form: fused=True makes it one kernel per step".into(), "no optimizer finding (a training step whose optimizer is not fused)"),
                Candidate::ForeachOptimizer => (false, "the fused form is tried for an optimizer finding; foreach only with --candidate foreach-optimizer".into()),
            };
            if force.contains(&c) && !tried {
                tried = true;
                reason = format!("asked for with --candidate (the diagnosis alone would skip it: {reason})");
            }
            if skip.contains(&c) {
                tried = false;
                reason = format!("left out with --skip ({reason})");
            }
            let source = c.finding().and_then(rec);
            // The precision finding's figure is its headlined option's
            // (TF32 or bf16 autocast); the other option gets none here.
            let prediction = source
                .filter(|r| {
                    !matches!(c, Candidate::Tf32 | Candidate::Bf16Autocast)
                        || Candidate::for_recommendation(r) == Some(c)
                })
                .and_then(|r| prediction_of(d, r))
                .or_else(|| {
                    // Graph forms keep the timeline's model without a finding.
                    (c.removes_launches() && source.is_none())
                        .then(|| {
                            d.timeline
                                .as_ref()
                                .and_then(|t| t.graph_prediction.as_ref())
                                .filter(|_| launch_bound)
                                .map(|g| {
                                    (
                                        g.speedup.estimate,
                                        format!(
                                            "{} (range {:.2}x to {:.2}x)",
                                            g.speedup.model, g.speedup.low, g.speedup.high
                                        ),
                                    )
                                })
                        })
                        .flatten()
                });
            Choice {
                candidate: c,
                tried,
                reason,
                predicted_speedup: prediction.as_ref().map(|p| p.0),
                prediction_model: prediction.map(|p| p.1),
                rank: source.map(|r| r.rank),
            }
        })
        .collect();
    // Tried first; then the finding's rank (unranked last), the larger
    // prediction, and the fixed order of ALL (a stable sort keeps it).
    choices.sort_by(|a, b| {
        b.tried
            .cmp(&a.tried)
            .then(
                a.rank
                    .unwrap_or(usize::MAX)
                    .cmp(&b.rank.unwrap_or(usize::MAX)),
            )
            .then(
                b.predicted_speedup
                    .unwrap_or(0.0)
                    .total_cmp(&a.predicted_speedup.unwrap_or(0.0)),
            )
    });
    choices
}

#[derive(Debug, Deserialize)]
struct HarnessCandidate {
    description: String,
    status: String,
    #[serde(default)]
    phase: Option<String>,
    #[serde(default)]
    error: Option<String>,
    /// Why the harness did not apply it (status "skipped").
    #[serde(default)]
    reason: Option<String>,
}

/// How eager runs float32 work in the module's process.
#[derive(Debug, Default, Deserialize)]
struct HarnessPrecision {
    #[serde(default)]
    matmul_tf32: bool,
    #[serde(default)]
    cudnn_tf32: bool,
    /// Whether the model has cuDNN modules (convolutions, RNNs).
    #[serde(default)]
    uses_cudnn: bool,
}

impl HarnessPrecision {
    fn eager_tf32(&self) -> bool {
        self.matmul_tf32 || (self.cudnn_tf32 && self.uses_cudnn)
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct HarnessResult {
    #[serde(default)]
    device: Option<String>,
    candidates: BTreeMap<String, HarnessCandidate>,
    samples_ns: BTreeMap<String, Vec<f64>>,
    /// The harness stopped early: a failed candidate left its CUDA state
    /// broken; `candidates` holds the failed ones, the rest run again.
    #[serde(default)]
    restart: bool,
    #[serde(default)]
    precision: HarnessPrecision,
    /// Written while the harness still ran (a checkpoint): it was stopped
    /// or killed before its end.
    #[serde(default)]
    partial: bool,
    /// Why timing ended early (a stop signal, a timeout), in words.
    #[serde(default)]
    stopped: Option<String>,
    #[serde(default)]
    rounds: Option<u64>,
    /// Variants that held more than MAX_SAMPLES samples, with how many:
    /// only the first MAX_SAMPLES are judged.
    #[serde(skip)]
    cut: Vec<(String, usize)>,
}

/// The candidates a harness result names (measured, or failed): what an
/// interrupted run tried, forced or chosen.
pub(crate) fn candidates_in_result(path: &Path) -> Result<Vec<Candidate>> {
    let r = read_result(path)?;
    Ok(r.samples_ns
        .keys()
        .chain(r.candidates.keys())
        .filter_map(|n| Candidate::from_name(n))
        .fold(Vec::new(), |mut v, c| {
            if !v.contains(&c) {
                v.push(c);
            }
            v
        }))
}

impl HarnessResult {
    /// Whether eager and at least one other variant have samples to judge.
    fn has_samples(&self) -> bool {
        let timed = |n: &str| self.samples_ns.get(n).is_some_and(|s| !s.is_empty());
        timed("eager") && self.samples_ns.keys().any(|n| n != "eager" && timed(n))
    }
}

/// A variant the harness builds: one candidate, or several stacked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Variant {
    pub(crate) parts: Vec<Candidate>,
}

impl Variant {
    pub(crate) fn name(&self) -> String {
        self.parts
            .iter()
            .map(|c| c.name())
            .collect::<Vec<_>>()
            .join("+")
    }

    fn numerics(&self) -> Numerics {
        self.parts
            .iter()
            .map(|c| c.numerics())
            .max()
            .unwrap_or(Numerics::Reordered)
    }

    fn describe(&self) -> String {
        self.parts
            .iter()
            .map(|c| c.describe())
            .collect::<Vec<_>>()
            .join("; then ")
    }
}

/// What the verdict half of optimize needs beside the harness's results.
#[derive(Debug, Clone, PartialEq)]
pub struct Conclusion {
    pub module: String,
    /// The script, as the report names it.
    pub script: String,
    /// The run folder; the harness wrote into `candidates/` under it.
    pub run_dir: PathBuf,
    pub baseline_dir: PathBuf,
    pub threshold: f64,
    pub noise: f64,
    pub seed: u64,
    /// Keep candidates that change numerics when they pass their tolerance.
    pub allow_precision: bool,
    pub journal: Option<PathBuf>,
    /// History the run is recorded in (default: the project's).
    pub db: Option<PathBuf>,
}

/// The verdicts from what a harness left in `run_dir/candidates/`
/// (`result.json`, `reference.safetensors`, `<candidate>.safetensors`):
/// the Python package runs the harness in its own process and ends here
/// (singles only: stacking needs a second harness run).
pub fn conclude_from_folder(
    setting: &Conclusion,
    diagnosis: &Diagnosis,
    force: &[Candidate],
    progress: &dyn Progress,
) -> Result<OptimizeReport> {
    progress.note("optimize: verdicts");
    let mut report = singles_from_folder(setting, diagnosis, force)?;
    // The stacks the singles call for, when a harness run measured them.
    let stacks = plan_stacks(&report);
    let dir = setting.run_dir.join("stacks");
    if !stacks.is_empty() && dir.join("result.json").is_file() {
        let h = read_result(&dir.join("result.json"))?;
        judge_stacks(setting, &mut report, &stacks, &h, &dir);
    }
    pick_best(&mut report);
    record(setting, &report, progress)?;
    Ok(report)
}

/// The stacks to measure after the singles a harness run wrote into
/// `run_dir/candidates/` (the CLI's greedy stacking, the same decision):
/// each a `+`-joined name for the harness, which writes its results into
/// `run_dir/stacks/`; `conclude_from_folder` then judges them too.
pub fn stacks_from_folder(
    setting: &Conclusion,
    diagnosis: &Diagnosis,
    force: &[Candidate],
) -> Result<Vec<String>> {
    let report = singles_from_folder(setting, diagnosis, force)?;
    Ok(plan_stacks(&report).iter().map(Variant::name).collect())
}

/// The singles' verdicts from `run_dir/candidates/result.json`.
fn singles_from_folder(
    setting: &Conclusion,
    diagnosis: &Diagnosis,
    force: &[Candidate],
) -> Result<OptimizeReport> {
    let choices = choose(diagnosis, force, &[]);
    let path = setting.run_dir.join("candidates/result.json");
    let harness = if choices.iter().any(|c| c.tried) {
        let mut r = read_result(&path)?;
        // A checkpoint: the harness (or kopt) ended before the timing did.
        if r.partial && r.stopped.is_none() {
            let rounds = r
                .rounds
                .map_or(String::new(), |n| format!(" after {n} timing round(s)"));
            r.stopped = Some(format!("cut short (the run was killed){rounds}"));
        }
        Some(r)
    } else {
        None
    };
    Ok(judge_singles(
        setting,
        diagnosis,
        &choices,
        harness.as_ref(),
    ))
}

/// What a harness that did not exit cleanly (stopped by kopt, timed out,
/// killed) left in result.json, when it holds samples to judge: the
/// verdicts so far are kept rather than lost with the run. A checkpoint
/// (`partial`) names how the timing was cut short.
fn stopped_result(path: &Path, outcome: &runner::RunOutcome) -> Option<HarnessResult> {
    let mut r = read_result(path).ok()?;
    if r.restart || !r.has_samples() {
        return None;
    }
    // A result written whole, without a stop, is the harness's end: its
    // process was stopped on its way out (the timing had finished).
    if r.partial {
        let how = if runner::cancel_requested() {
            "stopped by kopt"
        } else if outcome.timed_out {
            "stopped at --timeout"
        } else {
            "cut short (the harness was killed)"
        };
        let rounds = r
            .rounds
            .map_or(String::new(), |n| format!(" after {n} timing round(s)"));
        r.stopped = Some(format!("{how}{rounds}"));
    }
    Some(r)
}

/// The largest result.json kopt reads: millions of samples (a 20 us
/// step timed for minutes) fit many times over; more is no harness's.
const MAX_RESULT_BYTES: u64 = 256 << 20;

fn read_result(path: &Path) -> Result<HarnessResult> {
    let failed = |e: String| Error::WorkloadFailed(format!("{}: {e}", path.display()));
    let size = std::fs::metadata(path)
        .map_err(|e| failed(e.to_string()))?
        .len();
    if size > MAX_RESULT_BYTES {
        return Err(failed(format!(
            "{size} bytes, more than a harness result's {MAX_RESULT_BYTES}: not read"
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| failed(e.to_string()))?;
    let mut r: HarnessResult = serde_json::from_str(&text).map_err(|e| failed(e.to_string()))?;
    drop(text);
    // As bench and tune: at most MAX_SAMPLES per variant, the first ones
    // (rounds are interleaved, so every variant keeps the same rounds);
    // the bootstrap over each costs time in proportion.
    for (name, samples) in r.samples_ns.iter_mut() {
        if samples.len() > crate::bench::MAX_SAMPLES {
            r.cut.push((name.clone(), samples.len()));
            samples.truncate(crate::bench::MAX_SAMPLES);
        }
    }
    check_samples(&r, path)?;
    Ok(r)
}

/// A step no GPU runs: shorter than a nanosecond or longer than the
/// longest launch kopt reads (ncu's bound), or not a number. A harness
/// result holding one was not written by kopt's harness as it ran: no
/// verdict rests on it (a negative sample made a KEEP of -20073x).
fn check_samples(r: &HarnessResult, path: &Path) -> Result<()> {
    for (name, samples) in &r.samples_ns {
        if let Some((i, v)) = samples
            .iter()
            .enumerate()
            .find(|(_, v)| !kopt_bench::sample_ns_in_bounds(**v))
        {
            return Err(Error::WorkloadFailed(format!(
                "{}: sample {} of '{name}' is {}: a step's time must be {}; the timing cannot be trusted",
                path.display(),
                i + 1,
                kopt_model::figure::as_read(*v),
                kopt_bench::sample_bounds_text()
            )));
        }
    }
    Ok(())
}

/// One harness run's variants measured against its eager and checked with
/// each variant's tolerance: the ablation and, per variant, its check.
fn measure_run(
    setting: &Conclusion,
    module: &str,
    variants: &[Variant],
    h: &HarnessResult,
    dir: &Path,
) -> (
    Option<BenchReport>,
    BTreeMap<String, (CompareReport, String)>,
) {
    let mut measured = Vec::new();
    if let Some(eager) = h.samples_ns.get("eager") {
        measured.push(Measured {
            name: "eager".into(),
            command: format!("{module} (eager)"),
            samples: eager.iter().map(|ns| ns / 1e9).collect(),
            correct: None,
            check_problems: Vec::new(),
        });
    }
    let mut checks = BTreeMap::new();
    for v in variants {
        let name = v.name();
        let Some(samples) = h.samples_ns.get(&name) else {
            continue;
        };
        let (check, tolerance) = check_outputs(dir, &name, v.numerics(), h.precision.eager_tf32());
        measured.push(Measured {
            name: name.clone(),
            command: v.describe(),
            samples: samples.iter().map(|ns| ns / 1e9).collect(),
            correct: Some(check.passed),
            check_problems: check_problems(&check),
        });
        checks.insert(name, (check, tolerance));
    }
    let ablation = (measured.len() >= 2).then(|| {
        decide_all(
            &measured,
            &Decision {
                threshold: setting.threshold,
                noise: setting.noise,
                seed: setting.seed,
            },
            "GPU time per step (CUDA events around each forward, one process, each variant interleaved with eager, no tracer)",
            h.device.clone(),
        )
    });
    (ablation, checks)
}

/// A variant's result from its harness entry, check and timing; a
/// candidate that changes numerics is not kept without `allow_precision`.
#[allow(clippy::too_many_arguments)]
fn result_of(
    setting: &Conclusion,
    v: &Variant,
    tried: bool,
    reason: String,
    prediction: (Option<f64>, Option<String>),
    h: Option<&HarnessResult>,
    ablation: Option<&BenchReport>,
    checks: &mut BTreeMap<String, (CompareReport, String)>,
) -> CandidateResult {
    let name = v.name();
    let from_harness = h.and_then(|h| h.candidates.get(&name));
    let skipped_by_harness = from_harness.filter(|hc| hc.status == "skipped");
    let (tried, reason) = match skipped_by_harness {
        Some(hc) => (
            false,
            format!(
                "not applicable: {}",
                hc.reason.as_deref().unwrap_or("the harness skipped it")
            ),
        ),
        None => (tried, reason),
    };
    let failure = from_harness
        .filter(|hc| hc.status == "failed")
        .map(|hc| CandidateFailure {
            phase: hc.phase.clone().unwrap_or_else(|| "run".into()),
            error: hc.error.clone().unwrap_or_else(|| "failed".into()),
        });
    let variant = ablation.and_then(|a| a.variants.iter().find(|x| x.name == name));
    let changes_numerics = v.numerics().changes_precision();
    let verdict = match (&failure, variant) {
        (Some(f), _) => Some(Verdict {
            kind: VerdictKind::Revert,
            reason: format!("could not {}: {}", f.phase, f.error),
            next: "the run went on with the other candidates".into(),
        }),
        (None, Some(x)) => x.verdict.clone().map(|verdict| {
            if verdict.kind == VerdictKind::Keep && changes_numerics && !setting.allow_precision {
                Verdict {
                    kind: VerdictKind::Revert,
                    reason: format!(
                        "faster by {:.2}x, needs --allow-precision: it changes numerics ({} within its tolerance)",
                        x.speedup_vs_first,
                        v.numerics().as_str()
                    ),
                    next: "rerun with --allow-precision to keep it".into(),
                }
            } else {
                verdict
            }
        }),
        (None, None) if tried => Some(Verdict {
            kind: VerdictKind::Revert,
            reason: "no timing came back for it".into(),
            next: "see the harness log in the run folder".into(),
        }),
        _ => None,
    };
    let (correctness, tolerance) = match checks.remove(&name) {
        Some((c, t)) => (Some(c), Some(t)),
        None => (None, None),
    };
    CandidateResult {
        name,
        parts: if v.parts.len() > 1 {
            v.parts.iter().map(|c| c.name().to_string()).collect()
        } else {
            Vec::new()
        },
        changes_numerics,
        tolerance,
        by_hand: v
            .parts
            .iter()
            .flat_map(|c| c.by_hand().iter().map(|l| l.to_string()))
            .collect(),
        description: from_harness
            .map(|h| h.description.clone())
            .unwrap_or_else(|| v.describe()),
        tried,
        reason,
        predicted_speedup: prediction.0,
        prediction_model: prediction.1,
        failure,
        correctness,
        measured_speedup: variant.map(|x| x.speedup_vs_first),
        verdict,
    }
}

/// The singles' report: the baseline in brief, every choice (tried or
/// skipped) with its check, timing and verdict.
pub(crate) fn judge_singles(
    setting: &Conclusion,
    diagnosis: &Diagnosis,
    choices: &[Choice],
    harness: Option<&HarnessResult>,
) -> OptimizeReport {
    let mut report = OptimizeReport {
        schema: kopt_model::SCHEMA.into(),
        module: setting.module.clone(),
        script: setting.script.clone(),
        run_dir: setting.run_dir.display().to_string(),
        device: harness
            .and_then(|h| h.device.clone())
            .or_else(|| Some(diagnosis.device.name.clone())),
        baseline: Baseline {
            primary_component: diagnosis
                .primary
                .as_ref()
                .map(|p| p.component_short.clone()),
            primary_type: diagnosis.primary.as_ref().map(|p| p.class),
            busy_pct: diagnosis.timeline.as_ref().map(|t| t.busy_pct),
            launch_bound: diagnosis.timeline.as_ref().is_some_and(|t| t.launch_bound),
            run_dir: setting.baseline_dir.display().to_string(),
            notes: diagnosis.notes.clone(),
        },
        candidates: Vec::new(),
        best: None,
        allow_precision: setting.allow_precision,
        ablation: None,
        kept_profile: None,
    };
    if let Some(why) = harness.and_then(|h| h.stopped.as_ref()) {
        report.baseline.notes.push(format!(
            "The candidates' timing was {why}: the verdicts rest on the samples measured so far."
        ));
    }
    for (name, n) in harness.map_or(&[][..], |h| h.cut.as_slice()) {
        report.baseline.notes.push(format!(
            "The harness timed {n} steps of '{name}': the first {} are judged, as bench and tune keep.",
            crate::bench::MAX_SAMPLES
        ));
    }
    let variants: Vec<Variant> = choices
        .iter()
        .filter(|c| c.tried)
        .map(|c| Variant {
            parts: vec![c.candidate],
        })
        .collect();
    let (ablation, mut checks) = match harness {
        Some(h) => measure_run(
            setting,
            &setting.module,
            &variants,
            h,
            &setting.run_dir.join("candidates"),
        ),
        None => (None, BTreeMap::new()),
    };
    for c in choices {
        let v = Variant {
            parts: vec![c.candidate],
        };
        report.candidates.push(result_of(
            setting,
            &v,
            c.tried,
            c.reason.clone(),
            (c.predicted_speedup, c.prediction_model.clone()),
            harness,
            ablation.as_ref(),
            &mut checks,
        ));
    }
    report.ablation = ablation;
    report
}

fn is_kept(c: &CandidateResult) -> bool {
    c.verdict
        .as_ref()
        .is_some_and(|v| v.kind == VerdictKind::Keep)
}

/// The stacks to try: the kept singles in order of their measured speed-up,
/// each one added to the stack before it when it can stack with every
/// candidate already there (one graph form, one compile form); every
/// stack of two or more is tried.
pub(crate) fn plan_stacks(report: &OptimizeReport) -> Vec<Variant> {
    let mut kept: Vec<(Candidate, f64)> = report
        .candidates
        .iter()
        .filter(|c| c.parts.is_empty() && is_kept(c))
        .filter_map(|c| Some((Candidate::from_name(&c.name)?, c.measured_speedup?)))
        .collect();
    kept.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut stack: Vec<Candidate> = Vec::new();
    let mut plans = Vec::new();
    for (c, _) in kept {
        if stack.iter().all(|s| s.stacks_with(c)) {
            stack.push(c);
            if stack.len() >= 2 {
                plans.push(Variant {
                    parts: stack.clone(),
                });
            }
        }
    }
    plans
}

/// The stacks' results, each against the eager of its own harness run.
pub(crate) fn judge_stacks(
    setting: &Conclusion,
    report: &mut OptimizeReport,
    stacks: &[Variant],
    h: &HarnessResult,
    dir: &Path,
) {
    let (ablation, mut checks) = measure_run(setting, &setting.module, stacks, h, dir);
    for v in stacks {
        // The best of its parts' predictions: the stack's floor, if they add.
        let predicted = v
            .parts
            .iter()
            .filter_map(|p| {
                report
                    .candidates
                    .iter()
                    .find(|c| c.name == p.name())
                    .and_then(|c| c.predicted_speedup)
            })
            .reduce(f64::max);
        let reason = format!(
            "the kept candidates {} stacked greedily, best measured first",
            v.parts
                .iter()
                .map(|c| c.name())
                .collect::<Vec<_>>()
                .join(" + ")
        );
        let model = predicted.map(|_| "the best of its parts' predictions".to_string());
        report.candidates.push(result_of(
            setting,
            v,
            true,
            reason,
            (predicted, model),
            Some(h),
            ablation.as_ref(),
            &mut checks,
        ));
    }
    if let (Some(a), Some(first)) = (ablation, report.ablation.as_mut()) {
        // One ablation table: the stack run's rows, its own eager first
        // (the base of their speed-ups), after the singles'.
        first.variants.extend(a.variants.into_iter().map(|mut x| {
            x.name = format!("{} (stack run)", x.name);
            x
        }));
    }
}

/// The fastest KEEP candidate or stack.
pub(crate) fn pick_best(report: &mut OptimizeReport) {
    report.best = report
        .candidates
        .iter()
        .filter(|c| is_kept(c))
        .max_by(|a, b| {
            a.measured_speedup
                .unwrap_or(0.0)
                .total_cmp(&b.measured_speedup.unwrap_or(0.0))
        })
        .map(|c| c.name.clone());
}

/// `kopt profile --verify N`: the first `top` recommendations that have an
/// automatic candidate, each applied to the module script `argv` drives,
/// checked against eager (with its precision's tolerance: a measurement,
/// not a keep) and timed in one harness run under `run_dir/verify/`;
/// the measurements go into `d.verified` and the recommendations are then
/// ordered by them. A harness failure is a note, not an error: the
/// profile stands.
pub fn verify_recommendations(
    d: &mut Diagnosis,
    argv: &[String],
    run: &WorkloadOptions,
    run_dir: &Path,
    top: usize,
    progress: &dyn Progress,
) {
    let Some((python, script, module)) = crate::module_script::driven_script(argv) else {
        d.notes.push(
            "--verify measures fixes on a module script (--script FILE with a Model class and get_inputs()): nothing was verified".into(),
        );
        return;
    };
    let picks: Vec<(String, Candidate, Option<f64>, Option<String>)> = d
        .recommendations
        .iter()
        .filter_map(|r| {
            let c = Candidate::for_recommendation(r)?;
            let p = prediction_of(d, r);
            Some((r.id.clone(), c, p.as_ref().map(|p| p.0), p.map(|p| p.1)))
        })
        .take(top)
        .collect();
    if picks.is_empty() {
        d.notes.push("--verify: none of the recommendations names a fix kopt applies itself (graph capture, channels_last, TF32, SDPA, batch-norm folding): nothing was verified".into());
        return;
    }
    let variants: Vec<Variant> = picks.iter().map(|p| Variant { parts: vec![p.1] }).collect();
    progress.note(&format!(
        "verifying the top {} recommendation(s) with a fix kopt applies: {}",
        variants.len(),
        variants
            .iter()
            .map(Variant::name)
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let mut req = OptimizeRequest::new(script.clone());
    req.python = python;
    req.gpu = run.gpu.clone();
    req.timeout = run.timeout;
    req.quiet = run.quiet;
    let dir = run_dir.join("verify");
    let h = match run_harness(&req, &script, &module, &variants, &dir, progress) {
        Ok(h) => h,
        Err(e) => {
            d.notes.push(format!(
                "--verify: the fixes could not be measured ({e}); the ranking stands on its predictions"
            ));
            return;
        }
    };
    let setting = Conclusion {
        module: module.clone(),
        script: script.display().to_string(),
        run_dir: run_dir.to_path_buf(),
        baseline_dir: run_dir.to_path_buf(),
        threshold: req.threshold,
        noise: req.noise,
        seed: req.seed,
        // A measurement: precision changes are judged by their tolerance.
        allow_precision: true,
        journal: None,
        db: Some(req.db.clone()),
    };
    let (ablation, mut checks) = measure_run(&setting, &module, &variants, &h, &dir);
    for ((id, _, predicted, model), v) in picks.into_iter().zip(&variants) {
        let c = result_of(
            &setting,
            v,
            true,
            String::new(),
            (predicted, model),
            Some(&h),
            ablation.as_ref(),
            &mut checks,
        );
        let note = match (&c.failure, &c.verdict, c.tried) {
            (Some(f), _, _) => format!("could not {}: {}", f.phase, f.error),
            (None, _, false) => c.reason.clone(),
            (None, Some(v), _) => v.reason.clone(),
            (None, None, _) => "no timing came back for it".into(),
        };
        d.verified.push(kopt_model::Verification {
            recommendation: id,
            candidate: c.name,
            predicted_speedup: predicted,
            measured_speedup: c.measured_speedup,
            correct: c.correctness.map(|r| r.passed),
            verdict: c.verdict.map(|v| v.kind),
            note,
        });
    }
    rank_by_measurement(d);
}

/// The recommendations ordered by step speed-up, the measured one where
/// `--verify` measured a fix that passed its check, else the predicted one;
/// those with neither keep their order after them. Ranks are renumbered.
fn rank_by_measurement(d: &mut Diagnosis) {
    let figure = |r: &kopt_model::Recommendation| -> Option<f64> {
        match d.verification(&r.id) {
            Some(v) if v.correct == Some(true) && v.measured_speedup.is_some() => {
                v.measured_speedup
            }
            // The ranking's own figure (a range over 3x carries none).
            _ => r.predicted_speedup.as_ref().map(|p| p.estimate),
        }
    };
    let mut keyed: Vec<(Option<f64>, kopt_model::Recommendation)> = d
        .recommendations
        .iter()
        .map(|r| (figure(r), r.clone()))
        .collect();
    // Stable: equal figures and the unfigured keep the diagnosis's order.
    keyed.sort_by(|a, b| match (a.0, b.0) {
        (Some(x), Some(y)) => y.total_cmp(&x),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
    d.recommendations = keyed
        .into_iter()
        .enumerate()
        .map(|(i, (_, mut r))| {
            r.rank = i + 1;
            r
        })
        .collect();
    d.notes.push(
        "Recommendations ranked by the measured step speed-up where --verify measured the fix (and it passed its check), else by the predicted one.".into(),
    );
}

/// The harness's exit status asking for a fresh process without the
/// candidates that failed (kopt_optimize.py's `RESTART_EXIT`).
const HARNESS_RESTART: i32 = 75;

/// Run the harness on `variants`; when a failed candidate leaves its CUDA
/// state broken, run it again in a fresh process without the failed ones
/// (at most once per variant), their failures kept in the result.
pub(crate) fn run_harness(
    req: &OptimizeRequest,
    script: &Path,
    module: &str,
    variants: &[Variant],
    dir: &Path,
    progress: &dyn Progress,
) -> Result<HarnessResult> {
    std::fs::create_dir_all(dir).map_err(|e| crate::error::io_error(dir, "create", e))?;
    let mut names: Vec<String> = variants.iter().map(Variant::name).collect();
    let mut failed = BTreeMap::new();
    for attempt in 1..=variants.len().max(1) {
        let log = if attempt == 1 {
            dir.join("harness.log")
        } else {
            dir.join(format!("harness-{attempt}.log"))
        };
        let mut result = run_harness_once(req, script, module, &names, dir, &log, progress)?;
        if !result.restart {
            result.candidates.append(&mut failed);
            return Ok(result);
        }
        if result.candidates.is_empty() {
            return Err(Error::WorkloadFailed(format!(
                "the optimize harness asked for a fresh process but named no failed candidate (log: {})",
                log.display()
            )));
        }
        for name in result.candidates.keys() {
            progress.note(&format!(
                "{name} failed and left CUDA's state broken: the other candidates run again in a fresh process"
            ));
        }
        names.retain(|n| !result.candidates.contains_key(n));
        failed.append(&mut result.candidates);
    }
    Err(Error::WorkloadFailed(format!(
        "the optimize harness kept asking for a fresh process (log: {})",
        dir.display()
    )))
}

/// One harness process over `names`; a restart request is a result.
fn run_harness_once(
    req: &OptimizeRequest,
    script: &Path,
    module: &str,
    names: &[String],
    dir: &Path,
    log: &Path,
    progress: &dyn Progress,
) -> Result<HarnessResult> {
    let harness = crate::module_script::write_harness(dir)?;
    let spec = RunSpec {
        program: PathBuf::from(&req.python),
        args: vec![
            harness.display().to_string(),
            script.display().to_string(),
            module.to_string(),
            names.join(","),
            dir.display().to_string(),
            req.min_samples.to_string(),
            req.max_time_s.to_string(),
            req.noise_target.to_string(),
        ],
        env: req
            .gpu
            .iter()
            .map(|g| ("CUDA_VISIBLE_DEVICES".to_string(), g.clone()))
            .collect(),
        timeout: req.timeout,
        log: log.to_path_buf(),
    };
    let passthrough = !req.quiet;
    let on_line = |s, l: &str| progress.workload_line(s, l, passthrough);
    let outcome = runner::run(&spec, &on_line)
        .map_err(|e| Error::WorkloadFailed(format!("cannot start {}: {e}", req.python)))?;
    if !outcome.success() {
        if let Some(kept) = stopped_result(&dir.join("result.json"), &outcome) {
            if let Some(why) = &kept.stopped {
                progress.note(why);
            }
            return Ok(kept);
        }
    }
    if outcome.timed_out {
        return Err(Error::WorkloadFailed(format!(
            "the optimize harness timed out; kopt killed its process group (log: {})",
            spec.log.display()
        )));
    }
    if outcome.code == Some(HARNESS_RESTART) {
        let result = read_result(&dir.join("result.json"))?;
        if result.restart {
            return Ok(result);
        }
    }
    if !outcome.success() {
        let tail: Vec<&str> = outcome
            .tail
            .iter()
            .rev()
            .take(4)
            .map(String::as_str)
            .collect();
        return Err(Error::WorkloadFailed(format!(
            "the optimize harness failed ({}): {} (log: {})",
            outcome
                .code
                .map_or("killed".into(), |c| format!("exit {c}")),
            tail.into_iter().rev().collect::<Vec<_>>().join(" | "),
            spec.log.display()
        )));
    }
    read_result(&dir.join("result.json"))
}

/// A saved tensor named with this prefix is judged by its relative L2
/// alone: a training step's parameters as one vector, where single
/// elements move with the optimizer's rounding (kopt_optimize.py's
/// `training_state`).
const L2_ONLY: &str = "l2:";

/// A candidate's outputs against eager's, each tensor with the tolerance
/// of what the candidate changes (see [`Numerics::tolerance`]); returns the
/// check and the tolerance in words.
fn check_outputs(
    dir: &Path,
    name: &str,
    numerics: Numerics,
    eager_tf32: bool,
) -> (CompareReport, String) {
    let read = |f: &str| kopt_ingest::tensor::read_tensors(&dir.join(f));
    let (reference, candidate) = match (
        read("reference.safetensors"),
        read(&format!("{name}.safetensors")),
    ) {
        (Ok(r), Ok(c)) => (r, c),
        (r, c) => {
            let report = CompareReport {
                schema: kopt_model::SCHEMA.into(),
                passed: false,
                tensors: Vec::new(),
                problems: [r.err(), c.err()]
                    .into_iter()
                    .flatten()
                    .map(|e| e.to_string())
                    .collect(),
            };
            return (report, tolerance_words(numerics, &[], eager_tf32));
        }
    };
    let dtypes: Vec<String> = reference
        .iter()
        .map(|t| t.dtype.name().to_string())
        .collect();
    let words = tolerance_words(numerics, &dtypes, eager_tf32);
    // Per tensor: the element-wise rule scales with the reference's RMS.
    let mut tensors = Vec::new();
    let mut problems = Vec::new();
    for r in &reference {
        let Some(c) = candidate.iter().find(|c| c.name == r.name) else {
            problems.push(format!("tensor '{}' is missing from the candidate", r.name));
            continue;
        };
        let tol = numerics.tolerance(r.dtype.name(), eager_tf32);
        let (sum, n) = r
            .values()
            .filter(|v| v.is_finite())
            .fold((0.0, 0usize), |(s, n), v| (s + v * v, n + 1));
        let rms = if n > 0 { (sum / n as f64).sqrt() } else { 0.0 };
        let (atol, rtol) = if r.name.starts_with(L2_ONLY) {
            // Judged by the relative L2 alone; an element is wrong only
            // beyond ten times the largest reference value.
            let max = r
                .values()
                .filter(|v| v.is_finite())
                .fold(0.0f64, |m, v| m.max(v.abs()));
            (10.0 * max, 0.0)
        } else {
            (10.0 * tol * rms, 10.0 * tol)
        };
        let gate = kopt_bench::compare::Gate {
            tol: Some(tol),
            atol: Some(atol),
            rtol: Some(rtol),
            tf32: eager_tf32,
            allow_dtype_change: true,
        };
        tensors.push(kopt_bench::compare::compare_tensor_gate(
            &r.name, r, c, &gate,
        ));
    }
    for c in candidate
        .iter()
        .filter(|c| !reference.iter().any(|r| r.name == c.name))
    {
        problems.push(format!("tensor '{}' is missing from the reference", c.name));
    }
    if tensors.is_empty() && problems.is_empty() {
        problems.push("nothing compared: the reference holds no tensor".into());
    }
    let passed = problems.is_empty() && tensors.iter().all(|t| t.passed);
    (
        CompareReport {
            schema: kopt_model::SCHEMA.into(),
            passed,
            tensors,
            problems,
        },
        words,
    )
}

/// The tolerance a check used, in words.
fn tolerance_words(numerics: Numerics, dtypes: &[String], eager_tf32: bool) -> String {
    let mut kinds: Vec<&str> = dtypes.iter().map(String::as_str).collect();
    kinds.sort_unstable();
    kinds.dedup();
    let what = match numerics {
        Numerics::Reordered => "other kernels at the same precision",
        Numerics::Tf32 => "TF32",
        Numerics::Bf16 => "bf16",
    };
    let figures: Vec<String> = kinds
        .iter()
        .map(|d| {
            format!(
                "{d}: relative L2 {:.0e}, element-wise 10x that of the reference's RMS and of each element",
                numerics.tolerance(d, eager_tf32)
            )
        })
        .collect();
    let eager = if eager_tf32 {
        "; eager already runs float32 work in TF32"
    } else {
        ""
    };
    if figures.is_empty() {
        format!("{what}{eager}")
    } else {
        format!("{what} ({}){eager}", figures.join("; "))
    }
}

fn check_problems(r: &CompareReport) -> Vec<String> {
    let mut p = r.problems.clone();
    for t in &r.tensors {
        p.extend(t.problems.iter().map(|x| format!("{}: {x}", t.name)));
    }
    p
}

pub(crate) fn record(req: &Conclusion, r: &OptimizeReport, progress: &dyn Progress) -> Result<()> {
    let json = serde_json::to_string_pretty(r).map_err(|e| Error::Output(e.to_string()))?;
    let path = Path::new(&r.run_dir).join("optimize.json");
    std::fs::write(&path, &json).map_err(|e| crate::error::io_error(&path, "write", e))?;
    if let Some(journal) = &req.journal {
        for c in r.candidates.iter().filter(|c| c.tried) {
            let outcome = match (&c.failure, c.measured_speedup, &c.correctness) {
                (Some(f), _, _) => format!("could not {}: {}", f.phase, f.error),
                (None, Some(s), check) => format!(
                    "measured {s:.2}x vs eager on {}; correctness {}{}{}",
                    r.device.as_deref().unwrap_or("the GPU"),
                    match check {
                        Some(c) if c.passed => "PASS",
                        _ => "FAIL",
                    },
                    c.tolerance
                        .as_deref()
                        .map_or(String::new(), |t| format!(" ({t})")),
                    c.verdict
                        .as_ref()
                        .filter(|v| v.kind != VerdictKind::Keep)
                        .map_or(String::new(), |v| format!("; {}", v.reason))
                ),
                _ => "no measurement".into(),
            };
            let kept = c
                .verdict
                .as_ref()
                .is_some_and(|v| v.kind == VerdictKind::Keep);
            let entry = kopt_store::Entry {
                when: crate::run_folder::journal_timestamp(std::time::SystemTime::now()),
                hypothesis: format!("{} for {}: {}", c.description, r.module, c.reason),
                prediction: c.predicted_speedup.map(|p| {
                    format!(
                        "{p:.2}x faster per step ({})",
                        c.prediction_model.as_deref().unwrap_or("timeline model")
                    )
                }),
                outcome: Some(outcome),
                verdict: c.verdict.as_ref().map(|v| v.kind.as_str().to_string()),
                run: Some(r.run_dir.clone()),
                // What a user types to get the kept result without kopt.
                change: (kept && !c.by_hand.is_empty()).then(|| {
                    c.by_hand
                        .iter()
                        .map(|l| format!("`{l}`"))
                        .collect::<Vec<_>>()
                        .join("; ")
                }),
            };
            crate::record::refuse_planted_link(journal)?;
            kopt_store::append_entry(journal, &entry)?;
        }
    }
    let summary = match (
        &r.best,
        r.candidates
            .iter()
            .find(|c| Some(&c.name) == r.best.as_ref()),
    ) {
        (Some(b), Some(c)) => format!(
            "best {b}: {:.2}x measured{}",
            c.measured_speedup.unwrap_or(f64::NAN),
            c.predicted_speedup
                .map_or(String::new(), |p| format!(" (predicted up to {p:.2}x)"))
        ),
        _ => "no candidate kept".into(),
    };
    let mut row = crate::record::run_row(
        "optimize",
        format!("kopt optimize --script {} --module {}", r.script, r.module),
        summary,
    );
    row.device = r.device.clone();
    row.run_dir = Some(r.run_dir.clone());
    row.verdict = Some(if r.best.is_some() { "KEEP" } else { "REVERT" }.into());
    row.report_json = Some(json);
    match crate::record::RecordPaths::db_or(req.db.as_deref()) {
        Ok(db) => crate::record::record_run(&db, &row, progress),
        Err(e) => progress.note(&format!("warning: run not recorded in the history: {e}")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// #39: a result.json of 5M samples took 265 s to conclude (a bootstrap
    /// over every one): at most MAX_SAMPLES per variant are judged, the
    /// first ones, and a file no harness writes is not read at all.
    #[test]
    fn a_harness_result_keeps_at_most_max_samples_a_variant() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("result.json");
        let n = crate::bench::MAX_SAMPLES * 2 + 3;
        let samples = |base: f64| (0..n).map(|i| base + (i % 7) as f64).collect::<Vec<_>>();
        let json = serde_json::json!({
            "candidates": {"graph": {"description": "graph", "status": "ok"}},
            "samples_ns": {"eager": samples(100_000.0), "graph": samples(20_000.0)},
        });
        std::fs::write(&path, json.to_string()).unwrap();
        let r = read_result(&path).unwrap();
        for name in ["eager", "graph"] {
            assert_eq!(r.samples_ns[name].len(), crate::bench::MAX_SAMPLES);
        }
        assert_eq!(r.samples_ns["graph"][..3], [20_000.0, 20_001.0, 20_002.0]);
        assert_eq!(r.cut, [("eager".to_string(), n), ("graph".to_string(), n)]);

        let f = std::fs::File::create(&path).unwrap();
        f.set_len(MAX_RESULT_BYTES + 1).unwrap();
        let err = read_result(&path).unwrap_err().to_string();
        assert!(err.contains("more than a harness result's"), "{err}");
    }

    #[test]
    fn a_training_step_tries_only_what_its_harness_applies() {
        let choice = |candidate| Choice {
            candidate,
            tried: true,
            reason: "found".into(),
            predicted_speedup: Some(2.0),
            prediction_model: None,
            rank: None,
        };
        let mut c = vec![
            choice(Candidate::Graph),
            choice(Candidate::Tf32),
            choice(Candidate::CompileReduceOverhead),
            choice(Candidate::FusedOptimizer),
        ];
        restrict_to_training(&mut c);
        let tried: Vec<Candidate> = c.iter().filter(|c| c.tried).map(|c| c.candidate).collect();
        // Graph capture of the whole step is the harness's; reduce-overhead
        // compiles a forward.
        assert_eq!(
            tried,
            [Candidate::Graph, Candidate::Tf32, Candidate::FusedOptimizer]
        );
        assert!(c[2].reason.starts_with(
            "not applicable: compile_reduce_overhead is not a candidate for a training step"
        ));
        assert!(
            c[2].reason.ends_with("the diagnosis: found"),
            "{}",
            c[2].reason
        );
    }

    #[test]
    fn a_stack_costs_its_costliest_part_once() {
        let v = |parts: &[Candidate]| Variant {
            parts: parts.to_vec(),
        };
        let stacks = [
            v(&[Candidate::Compile, Candidate::Sdpa]),
            v(&[Candidate::Graph, Candidate::Tf32]),
        ];
        assert_eq!(stacks_cost_s(&stacks), 45.0 + 8.0);
        assert_eq!(stacks_cost_s(&[]), 0.0);
    }

    #[test]
    fn a_budget_keeps_the_most_gain_per_second() {
        let choice = |candidate, predicted: Option<f64>| Choice {
            candidate,
            tried: true,
            reason: "found".into(),
            predicted_speedup: predicted,
            prediction_model: None,
            rank: None,
        };
        let mut c = vec![
            choice(Candidate::CompileMaxAutotune, Some(1.8)),
            choice(Candidate::Graph, Some(3.0)),
            choice(Candidate::Compile, Some(1.5)),
            choice(Candidate::Tf32, None),
        ];
        fit_budget(&mut c, 70.0, &[]);
        let tried: Vec<Candidate> = c.iter().filter(|c| c.tried).map(|c| c.candidate).collect();
        // graph 8 s, compile 45 s, tf32 8 s fit in 70 s; max-autotune (180 s) does not.
        assert_eq!(
            tried,
            [Candidate::Graph, Candidate::Compile, Candidate::Tf32]
        );
        assert!(
            c[0].reason.starts_with("left out to fit the budget"),
            "{}",
            c[0].reason
        );
        assert!(c[0].reason.ends_with("(found)"));
        let mut all = vec![choice(Candidate::CompileMaxAutotune, Some(1.8))];
        fit_budget(&mut all, 1e6, &[]);
        assert!(all[0].tried, "a large budget leaves every candidate in");
        // Asked for by name: tried whatever the budget, and paid for first.
        let mut asked = vec![
            choice(Candidate::Graph, Some(3.0)),
            choice(Candidate::CompileMaxAutotune, Some(1.1)),
        ];
        fit_budget(&mut asked, 185.0, &[Candidate::CompileMaxAutotune]);
        assert!(asked[1].tried, "{}", asked[1].reason);
        assert!(!asked[0].tried, "180 s of 185 went to the one asked for");
    }

    fn diagnosis(path: &str) -> Diagnosis {
        let req = crate::AnalyzeRequest {
            files: vec![PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../fixtures")
                .join(path)],
            ..Default::default()
        };
        crate::analyze(&req, &crate::Silent).unwrap()
    }

    fn tried(choices: &[Choice]) -> Vec<&'static str> {
        choices
            .iter()
            .filter(|c| c.tried)
            .map(|c| c.candidate.name())
            .collect()
    }

    #[test]
    fn a_launch_bound_module_gets_the_graph_forms_with_a_prediction() {
        let d = diagnosis("profile-module-h200/run");
        let c = choose(&d, &[], &[]);
        let t = tried(&c);
        assert!(
            t.contains(&"graph") && t.contains(&"compile_reduce_overhead"),
            "{t:?}"
        );
        assert!(!t.contains(&"compile_max_autotune"), "{t:?}");
        let graph = c.iter().find(|c| c.candidate == Candidate::Graph).unwrap();
        let p = graph.predicted_speedup.unwrap();
        assert!(p > 2.0, "{p}");
        assert!(graph.reason.contains("launch bound"), "{}", graph.reason);
        let skipped = c
            .iter()
            .find(|c| c.candidate == Candidate::CompileMaxAutotune)
            .unwrap();
        assert!(skipped.reason.contains("cannot help"), "{}", skipped.reason);
    }

    #[test]
    fn a_busy_gpu_gets_no_graph_candidate() {
        // The labeled suite's counters: no timeline, nothing launch bound.
        let d = diagnosis("labeled-suite-h100/ncu_raw_base.csv");
        let c = choose(&d, &[], &[]);
        assert_eq!(tried(&c), ["compile_max_autotune"]);
        let graph = c.iter().find(|c| c.candidate == Candidate::Graph).unwrap();
        assert!(
            graph.reason.contains("launches do not set the pace"),
            "{}",
            graph.reason
        );
        // --candidate forces one, and says the diagnosis would have skipped it.
        let forced = choose(&d, &[Candidate::Graph], &[]);
        let g = forced
            .iter()
            .find(|c| c.candidate == Candidate::Graph)
            .unwrap();
        assert!(g.tried && g.reason.starts_with("asked for"), "{}", g.reason);
    }

    #[test]
    fn a_plain_script_is_refused_with_the_convention() {
        let d = tempfile::tempdir().unwrap();
        let script = d.path().join("plain.py");
        std::fs::write(&script, "print('hello')\n").unwrap();
        let mut req = OptimizeRequest::new(script);
        req.runs_dir = d.path().join("runs");
        req.db = d.path().join("h.db");
        req.journal = None;
        let err = crate::optimize_run::optimize(&req, &crate::Silent).unwrap_err();
        assert!(matches!(err, Error::Usage(_)));
        assert!(err.to_string().contains("get_inputs()"), "{err}");
    }

    #[test]
    fn a_failed_harness_candidate_is_revert_with_its_error() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("reference.safetensors"), b"").unwrap();
        let (r, _) = check_outputs(d.path(), "graph", Numerics::Reordered, false);
        assert!(!r.passed && !r.problems.is_empty());
    }

    fn choice(c: &[Choice], which: Candidate) -> &Choice {
        c.iter().find(|c| c.candidate == which).unwrap()
    }

    /// `name.safetensors` in `dir` with one f32 tensor per (name, values).
    fn save_f32(dir: &Path, file: &str, tensors: &[(&str, &[f32])]) {
        let (mut header, mut data) = (Vec::new(), Vec::new());
        for (name, v) in tensors {
            let start = data.len();
            data.extend(v.iter().flat_map(|x| x.to_le_bytes()));
            header.push(format!(
                r#""{name}":{{"dtype":"F32","shape":[{}],"data_offsets":[{start},{}]}}"#,
                v.len(),
                data.len()
            ));
        }
        let bytes =
            kopt_ingest::tensor::safetensors_bytes(&format!("{{{}}}", header.join(",")), &data);
        std::fs::write(dir.join(file), bytes).unwrap();
    }

    #[test]
    fn a_training_steps_parameters_are_judged_by_their_relative_l2_alone() {
        // Weights of 0.02 and a zero-initialised bias that moved by 1e-4:
        // the candidate flips that update, 1e-6 of the whole by L2.
        let mut reference = vec![0.02f32; 10_000];
        reference.push(1e-4);
        let mut candidate = reference.clone();
        candidate[10_000] = -1e-4;
        let d = tempfile::tempdir().unwrap();
        save_f32(
            d.path(),
            "reference.safetensors",
            &[
                ("l2:parameters", &reference),
                ("bias", &reference[10_000..]),
            ],
        );
        save_f32(
            d.path(),
            "fused_optimizer.safetensors",
            &[
                ("l2:parameters", &candidate),
                ("bias", &reference[10_000..]),
            ],
        );
        let (r, _) = check_outputs(d.path(), "fused_optimizer", Numerics::Reordered, false);
        assert!(r.passed, "{r:?}");
        // The same flip in a tensor of its own fails element by element.
        save_f32(
            d.path(),
            "fused_optimizer.safetensors",
            &[
                ("l2:parameters", &candidate),
                ("bias", &candidate[10_000..]),
            ],
        );
        let (r, _) = check_outputs(d.path(), "fused_optimizer", Numerics::Reordered, false);
        assert!(!r.passed);
        // A step that never ran moves the whole vector: caught.
        let stale = vec![0.0f32; 10_001];
        save_f32(
            d.path(),
            "fused_optimizer.safetensors",
            &[("l2:parameters", &stale), ("bias", &reference[10_000..])],
        );
        let (r, _) = check_outputs(d.path(), "fused_optimizer", Numerics::Reordered, false);
        assert!(!r.passed);
    }

    #[test]
    fn the_model_level_fixes_follow_their_findings() {
        // Real H100 captures of the advice suite, each with one finding.
        let cases = [
            (
                "advice-h100/resnet50_b128_bf16-plain",
                "use_channels_last",
                Candidate::ChannelsLast,
            ),
            (
                "advice-h100/bert_b32_s128_fp32-plain",
                "enable_tf32",
                Candidate::Tf32,
            ),
            (
                "advice-h100/vit_hf_b64_bf16_eager-plain",
                "use_fused_attention",
                Candidate::Sdpa,
            ),
            (
                "advice-h100/mobilenetv3_b128_fp32-plain",
                "use_torch_compile",
                Candidate::Compile,
            ),
        ];
        for (path, finding, which) in cases {
            assert_eq!(Candidate::for_finding(finding), Some(which), "{finding}");
            let d = diagnosis(path);
            let rank = d
                .recommendations
                .iter()
                .find(|r| r.id == finding)
                .unwrap()
                .rank;
            let c = choose(&d, &[], &[]);
            let got = choice(&c, which);
            assert!(got.tried, "{path}: {}", got.reason);
            assert!(
                got.reason.contains(&format!("finding #{rank}")),
                "{}",
                got.reason
            );
            assert!(got.predicted_speedup.is_some_and(|p| p > 1.0), "{path}");
            // Tried ones first, in the diagnosis's order.
            let tried: Vec<&Choice> = c.iter().take_while(|c| c.tried).collect();
            assert_eq!(tried.len(), c.iter().filter(|c| c.tried).count());
            let ranks: Vec<usize> = tried.iter().map(|c| c.rank.unwrap_or(usize::MAX)).collect();
            assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{path}: {ranks:?}");
        }
        // The CNN: no TF32 finding (bf16), so neither precision candidate;
        // no attention; cuDNN kernels, so benchmark mode is tried.
        let d = diagnosis("advice-h100/resnet50_b128_bf16-plain");
        let c = choose(&d, &[], &[]);
        for (which, why) in [
            (Candidate::Tf32, "no TF32 finding"),
            (Candidate::Bf16Autocast, "no TF32 finding"),
            (Candidate::Sdpa, "no fused-attention finding"),
        ] {
            let got = choice(&c, which);
            assert!(
                !got.tried && got.reason.contains(why),
                "{which:?}: {}",
                got.reason
            );
        }
        assert!(choice(&c, Candidate::CudnnBenchmark).tried);
        // The encoder: the precision finding headlines TF32 (bf16's casts
        // would expose the host); bf16 autocast is tried, with no figure.
        let d = diagnosis("advice-h100/bert_b32_s128_fp32-plain");
        let c = choose(&d, &[], &[]);
        let bf16 = choice(&c, Candidate::Bf16Autocast);
        assert!(bf16.tried && bf16.predicted_speedup.is_none());
        // ViT in fp32: bf16 autocast is the headline and gets the figure.
        let vit = diagnosis("advice-h100/vit_tv_b32_fp32-plain");
        let tf32 = vit
            .recommendations
            .iter()
            .find(|r| r.id == "enable_tf32")
            .unwrap();
        assert_eq!(
            Candidate::for_recommendation(tf32),
            Some(Candidate::Bf16Autocast)
        );
        let cv = choose(&vit, &[], &[]);
        let bf16 = choice(&cv, Candidate::Bf16Autocast);
        assert!(bf16.tried && bf16.predicted_speedup.is_some_and(|p| p > 2.0));
        assert!(choice(&cv, Candidate::Tf32).predicted_speedup.is_none());
        assert!(!choice(&c, Candidate::ChannelsLast).tried);
        assert!(!choice(&c, Candidate::CudnnBenchmark).tried);
        // --skip wins over the diagnosis, and says so.
        let c = choose(&d, &[], &[Candidate::Tf32]);
        let tf32 = choice(&c, Candidate::Tf32);
        assert!(!tf32.tried && tf32.reason.starts_with("left out with --skip"));
    }

    #[test]
    fn precision_candidates_get_their_dtype_tolerance() {
        assert_eq!(Numerics::Reordered.tolerance("f32", false), 1e-4);
        assert_eq!(Numerics::Reordered.tolerance("f32", true), 5e-3);
        assert_eq!(Numerics::Reordered.tolerance("bf16", false), 3e-2);
        assert_eq!(Numerics::Tf32.tolerance("f32", false), 5e-3);
        assert_eq!(Numerics::Bf16.tolerance("f32", false), 3e-2);
        // Graph replay is checked like any other kernel choice.
        assert_eq!(Candidate::Graph.numerics(), Numerics::Reordered);
        assert!(Candidate::Tf32.numerics().changes_precision());
        assert!(Candidate::Bf16Autocast.numerics().changes_precision());
        assert!(!Candidate::ChannelsLast.numerics().changes_precision());
        let stack = Variant {
            parts: vec![Candidate::ChannelsLast, Candidate::Tf32, Candidate::Graph],
        };
        assert_eq!(stack.numerics(), Numerics::Tf32);
        assert_eq!(stack.name(), "channels_last+tf32+graph");
    }

    #[test]
    fn stacks_hold_one_graph_form_and_one_compile_form() {
        use Candidate::*;
        assert!(ChannelsLast.stacks_with(Graph));
        assert!(CompileFreezing.stacks_with(Graph));
        assert!(!Graph.stacks_with(CompileReduceOverhead));
        assert!(!CompileMaxAutotune.stacks_with(CompileFreezing));
        assert!(!Graph.stacks_with(Graph));
        let kept = |name: &str, s: f64| CandidateResult {
            name: name.into(),
            parts: Vec::new(),
            changes_numerics: false,
            tolerance: None,
            by_hand: Vec::new(),
            description: String::new(),
            tried: true,
            reason: String::new(),
            predicted_speedup: None,
            prediction_model: None,
            failure: None,
            correctness: None,
            measured_speedup: Some(s),
            verdict: Some(Verdict {
                kind: VerdictKind::Keep,
                reason: String::new(),
                next: String::new(),
            }),
        };
        let mut report = OptimizeReport {
            schema: kopt_model::SCHEMA.into(),
            module: "m".into(),
            script: "m.py".into(),
            run_dir: "r".into(),
            device: None,
            baseline: Baseline {
                primary_component: None,
                primary_type: None,
                busy_pct: None,
                launch_bound: false,
                run_dir: String::new(),
                notes: Vec::new(),
            },
            candidates: vec![
                kept("compile_reduce_overhead", 1.9),
                kept("graph", 2.0),
                kept("channels_last", 1.3),
                kept("compile_freezing", 1.2),
            ],
            best: None,
            allow_precision: false,
            ablation: None,
            kept_profile: None,
        };
        // A skipped or reverted single never joins a stack.
        let mut reverted = kept("cudnn_benchmark", 1.5);
        reverted.verdict.as_mut().unwrap().kind = VerdictKind::Revert;
        report.candidates.push(reverted);
        let names: Vec<String> = plan_stacks(&report).iter().map(Variant::name).collect();
        assert_eq!(
            names,
            [
                "graph+channels_last",
                "graph+channels_last+compile_freezing"
            ]
        );
    }
}
