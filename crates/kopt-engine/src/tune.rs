//! `kopt tune`: a parameter sweep over a command template, each trial timed
//! with the bench engine's sources and stopping rule.
//!
//! The space ([`space`]): parameters with lists and ranges, constraints in a
//! small expression language (no eval). Strategies: grid, random and
//! successive halving (the bootstrap interval decides who survives). Every
//! trial's output is compared with the baseline config's (`--check`); a
//! failing, timing-out or wrong config is recorded and skipped. Each trial
//! is committed to the cache (`kopt_store::TuneCache`) as it finishes, so a
//! second sweep measures nothing already measured and a killed one loses no
//! finished trial. Trials run through an [`Executor`]: [`LocalExecutor`]
//! runs one worker thread per GPU (each trial with its own
//! `CUDA_VISIBLE_DEVICES`); the Python package plugs in Ray. The best
//! configs are then timed interleaved on one GPU ([`run_bench`]) so the
//! verdict is not a cross-GPU artefact.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use kopt_bench::{bootstrap_median_ratio, median, relative_noise, StopRule};
use kopt_model::tune::{TrialResult, TrialStatus, TuneParam, TuneReport, TuneWinner};
use kopt_model::BenchReport;
use kopt_store::{CachedTrial, TrialKey, TuneCache};
use serde::{Deserialize, Serialize};

use crate::bench::Measurement;

use crate::bench::{
    run_bench, BenchRequest, Run, Sampler, Source, Timing, TimingChoice, VariantSpec,
};
use crate::error::{Error, Result};
use crate::progress::Progress;

pub use space::{Expr, Param, Space};

/// Points a grid or halving sweep may enumerate.
pub const MAX_POINTS: usize = 100_000;

/// The placeholder a template uses for the `--check` file: each worker
/// substitutes a file of its own, so parallel trials never share one.
pub const CHECK_PLACEHOLDER: &str = "{CHECK}";

/// How configs are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Strategy {
    /// Every point of the space.
    Grid,
    /// `--trials N` points drawn at random (seeded), the baseline always among them.
    Random,
    /// Successive halving: all get a few samples, the slower half is dropped, survivors get more.
    Halving,
}

impl Strategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Grid => "grid",
            Strategy::Random => "random",
            Strategy::Halving => "halving",
        }
    }
}

/// A sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneRequest {
    /// The command with `{NAME}` placeholders (run through /bin/sh -c).
    pub template: String,
    pub space: Space,
    /// None: grid up to 64 points, halving beyond.
    pub strategy: Option<Strategy>,
    /// Configs for the random strategy.
    pub trials: Option<usize>,
    /// The reference config (default: the first point of the space).
    pub baseline: Option<BTreeMap<String, String>>,
    /// The problem (shape) the sweep is for: part of the cache key.
    pub key: Option<String>,
    /// Ignore the cache (results are still written to it).
    pub fresh: bool,
    /// GPUs to run on, one worker each (None: all visible).
    pub gpus: Option<Vec<String>>,
    /// How many of the best configs the final comparison times.
    pub top: usize,
    pub measure: Measurement,
    /// Samples each config gets in the first halving round.
    pub halving_start: usize,
    pub db: PathBuf,
}

impl TuneRequest {
    /// A request with the CLI's defaults.
    pub fn new(template: String, space: Space) -> TuneRequest {
        TuneRequest {
            template,
            space,
            strategy: None,
            trials: None,
            baseline: None,
            key: None,
            fresh: false,
            gpus: None,
            top: 3,
            measure: Measurement::default(),
            halving_start: 2,
            db: crate::record::RecordPaths::current().db,
        }
    }

    pub fn validate(&self) -> Result<()> {
        if self.template.trim().is_empty() {
            return Err(Error::Usage(
                "nothing to tune: give a command template after `--`".into(),
            ));
        }
        if self.space.params.is_empty() {
            return Err(Error::Usage(
                "no parameters: give --param NAME=VALUES or --space FILE".into(),
            ));
        }
        for p in &self.space.params {
            if !self.template.contains(&format!("{{{}}}", p.name)) {
                return Err(Error::Usage(format!(
                    "parameter {} does not appear in the command template as {{{}}}",
                    p.name, p.name
                )));
            }
        }
        self.measure.validate()?;
        if self.top == 0 {
            return Err(Error::Usage("--top must be at least 1".into()));
        }
        if self.halving_start < 2 {
            return Err(Error::Usage(
                "halving needs at least 2 samples per config in its first round".into(),
            ));
        }
        match (self.strategy, self.trials) {
            (Some(Strategy::Random), None) => {
                return Err(Error::Usage("--strategy random needs --trials N".into()))
            }
            (_, Some(0)) => return Err(Error::Usage("--trials must be at least 1".into())),
            (Some(Strategy::Grid | Strategy::Halving), Some(_)) => {
                return Err(Error::Usage(
                    "--trials is for --strategy random (grid and halving try every point)".into(),
                ))
            }
            _ => {}
        }
        if let Some(g) = &self.gpus {
            if g.is_empty()
                || g.iter()
                    .any(|x| x.trim().is_empty() || x.contains(['\'', ' ', ';']))
            {
                return Err(Error::Usage(
                    "--gpus takes GPU ids separated by commas (e.g. 0,1)".into(),
                ));
            }
            let mut sorted = g.clone();
            sorted.sort();
            if sorted.windows(2).any(|w| w[0] == w[1]) {
                return Err(Error::Usage(
                    "--gpus names a GPU twice: trials never share a GPU".into(),
                ));
            }
        }
        if let Some(b) = &self.baseline {
            for name in b.keys() {
                if !self.space.params.iter().any(|p| &p.name == name) {
                    return Err(Error::Usage(format!(
                        "--baseline names {name}, which is not a parameter"
                    )));
                }
            }
            if let Some(p) = self.space.params.iter().find(|p| !b.contains_key(&p.name)) {
                return Err(Error::Usage(format!(
                    "--baseline must give every parameter: {} is missing",
                    p.name
                )));
            }
            for (n, v) in b {
                space::check_value(n, v)?;
            }
        }
        Ok(())
    }

    /// The strategy this sweep uses.
    pub fn chosen_strategy(&self, points: usize) -> Strategy {
        match (self.strategy, self.trials) {
            (Some(s), _) => s,
            (None, Some(_)) => Strategy::Random,
            (None, None) if points <= 64 => Strategy::Grid,
            _ => Strategy::Halving,
        }
    }

    /// Timing choice, correctness gate and baseline: results measured under
    /// other settings are not reused.
    fn settings(&self, baseline: &BTreeMap<String, String>) -> String {
        let timing = match self.measure.timing {
            TimingChoice::Auto => "auto",
            TimingChoice::Gpu => "gpu",
            TimingChoice::Reported => "reported",
            TimingChoice::Wall => "wall",
        };
        let check = match (&self.measure.check, self.measure.tol) {
            (None, _) => "none".to_string(),
            (Some(_), Some(t)) => format!("tol={t:e};baseline={}", canonical(baseline)),
            (Some(_), None) => format!("tol=dtype;baseline={}", canonical(baseline)),
        };
        format!(
            "timing={timing};range={};warmup={};check={check}",
            self.measure.range.as_deref().unwrap_or(""),
            self.measure.warmup
        )
    }
}

/// A config as canonical JSON (names sorted): the cache's parameter key.
pub fn canonical(config: &BTreeMap<String, String>) -> String {
    serde_json::to_string(config).unwrap_or_default()
}

/// What a worker measures: one config, until the stopping rule holds or
/// until it has `samples` samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialJob {
    /// The trial's index in the sweep.
    pub index: usize,
    /// The command, parameters substituted (`{CHECK}` is the worker's).
    pub command: String,
    /// Untimed runs first (the correctness output comes from the last).
    pub warmup: u32,
    /// The check file's name: the output to keep, when the gate is on.
    pub check: Option<PathBuf>,
    /// Measure until this many samples in all; None: until the stopping rule holds.
    pub samples: Option<usize>,
    pub stop: StopSpec,
    /// Samples (and their timed seconds) measured before, from the cache or an earlier round.
    pub have: Vec<f64>,
    pub have_spent_s: f64,
    pub timing: TimingSpec,
}

/// [`StopRule`] as jobs carry it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StopSpec {
    pub min_samples: usize,
    pub min_time_s: f64,
    pub noise_target: f64,
    pub max_time_s: f64,
}

impl From<StopRule> for StopSpec {
    fn from(r: StopRule) -> Self {
        StopSpec {
            min_samples: r.min_samples,
            min_time_s: r.min_time_s,
            noise_target: r.noise_target,
            max_time_s: r.max_time_s,
        }
    }
}

impl From<StopSpec> for StopRule {
    fn from(r: StopSpec) -> Self {
        StopRule {
            min_samples: r.min_samples,
            min_time_s: r.min_time_s,
            noise_target: r.noise_target,
            max_time_s: r.max_time_s,
        }
    }
}

/// How a job is timed: the choice to resolve, or the source already resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimingSpec {
    /// auto, gpu, reported, wall.
    pub choice: String,
    /// gpu_ranges, gpu_kernels, reported, wall, once resolved.
    pub source: Option<String>,
    pub range: Option<String>,
    pub tracer: Option<PathBuf>,
}

fn choice_name(c: TimingChoice) -> &'static str {
    match c {
        TimingChoice::Auto => "auto",
        TimingChoice::Gpu => "gpu",
        TimingChoice::Reported => "reported",
        TimingChoice::Wall => "wall",
    }
}

fn parse_choice(s: &str) -> Result<TimingChoice> {
    Ok(match s {
        "auto" => TimingChoice::Auto,
        "gpu" => TimingChoice::Gpu,
        "reported" => TimingChoice::Reported,
        "wall" => TimingChoice::Wall,
        _ => {
            return Err(Error::Usage(format!(
                "timing {s:?}: auto, gpu, reported or wall"
            )))
        }
    })
}

fn source_name(s: Source) -> &'static str {
    match s {
        Source::GpuRanges => "gpu_ranges",
        Source::GpuKernels => "gpu_kernels",
        Source::Reported => "reported",
        Source::Wall => "wall",
    }
}

fn parse_source(s: &str) -> Option<Source> {
    Some(match s {
        "gpu_ranges" => Source::GpuRanges,
        "gpu_kernels" => Source::GpuKernels,
        "reported" => Source::Reported,
        "wall" => Source::Wall,
        _ => return None,
    })
}

impl TimingSpec {
    /// The [`Timing`] of a resolved spec (the tracer located on this machine).
    fn timing(&self) -> Result<Option<Timing>> {
        let Some(source) = self.source.as_deref().and_then(parse_source) else {
            return Ok(None);
        };
        let tracer = match source {
            Source::GpuRanges | Source::GpuKernels => {
                Some(kopt_collect::trace::locate_tracer(self.tracer.as_deref())?)
            }
            _ => None,
        };
        Ok(Some(Timing {
            source,
            range: self.range.clone(),
            device: None,
            tracer,
        }))
    }
}

/// What a worker measured for one job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialOutcome {
    pub index: usize,
    /// New samples (seconds), after the job's `have`.
    pub samples: Vec<f64>,
    /// Seconds of timed runs, and of every run (warm-up included).
    pub spent_s: f64,
    pub used_s: f64,
    /// Why it failed (the trial is then skipped).
    pub failure: Option<String>,
    /// The kept check output, for the driver's comparison.
    pub output: Option<PathBuf>,
    /// The timing source it resolved (first job only) and the GPU the tracer saw.
    pub source: Option<String>,
    pub range: Option<String>,
    pub device: Option<String>,
    /// The GPU (CUDA_VISIBLE_DEVICES) it ran on.
    pub gpu: Option<String>,
}

/// The final comparison: the baseline first, timed interleaved on one GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FinalJob {
    /// (label, command).
    pub variants: Vec<(String, String)>,
    pub warmup: u32,
    pub stop: StopSpec,
    pub threshold: f64,
    pub noise: f64,
    pub seed: u64,
    pub timing: TimingSpec,
}

/// Where trials run: threads on this host's GPUs, or a cluster.
pub trait Executor: Sync {
    /// The GPUs trials run on (empty: no GPU selection).
    fn gpus(&self) -> Vec<String>;
    /// The device's name and driver version, for the cache key.
    fn device(&self) -> (Option<String>, Option<String>);
    /// Run every job; `done` is called with each outcome as it finishes (the
    /// driver commits it to the cache then).
    fn run_trials(&self, jobs: Vec<TrialJob>, done: &mut dyn FnMut(TrialOutcome)) -> Result<()>;
    /// Time the final comparison interleaved on one GPU.
    fn run_final(&self, job: &FinalJob) -> Result<BenchReport>;
}

/// A sampler for one worker (worker index given).
pub type SamplerFactory<'a> = dyn Fn(usize) -> Box<dyn Sampler + Send> + Sync + 'a;

/// One worker thread per GPU on this host.
pub struct LocalExecutor<'a> {
    gpus: Vec<String>,
    factory: Box<SamplerFactory<'a>>,
    scratch: tempfile::TempDir,
    device: (Option<String>, Option<String>),
}

impl<'a> LocalExecutor<'a> {
    /// Real processes on `gpus` (None: every visible GPU, else one worker without GPU selection).
    pub fn new(
        gpus: Option<Vec<String>>,
        tracer: Option<PathBuf>,
    ) -> Result<LocalExecutor<'static>> {
        let gpus = gpus.unwrap_or_else(visible_gpus);
        let device = query_device(gpus.first().map(String::as_str));
        let factory: Box<SamplerFactory<'static>> = Box::new(move |_| {
            Box::new(
                crate::bench::ProcessSampler::new(tracer.clone())
                    .expect("a ProcessSampler is only a path"),
            )
        });
        LocalExecutor::with_factory(gpus, device, factory)
    }

    /// Any samplers (tests): `gpus` are the labels workers set, `device` the cache's device.
    pub fn with_factory(
        gpus: Vec<String>,
        device: (Option<String>, Option<String>),
        factory: Box<SamplerFactory<'a>>,
    ) -> Result<LocalExecutor<'a>> {
        let scratch = tempfile::Builder::new()
            .prefix("kopt-tune-")
            .tempdir()
            .map_err(|e| Error::Output(format!("temporary folder: {e}")))?;
        Ok(LocalExecutor {
            gpus,
            factory,
            scratch,
            device,
        })
    }

    fn worker_gpu(&self, w: usize) -> Option<&str> {
        self.gpus.get(w).map(String::as_str)
    }
}

impl Executor for LocalExecutor<'_> {
    fn gpus(&self) -> Vec<String> {
        self.gpus.clone()
    }

    fn device(&self) -> (Option<String>, Option<String>) {
        self.device.clone()
    }

    fn run_trials(&self, jobs: Vec<TrialJob>, done: &mut dyn FnMut(TrialOutcome)) -> Result<()> {
        let workers = self.gpus.len().max(1).min(jobs.len().max(1));
        let queue = Mutex::new(jobs.into_iter().collect::<VecDeque<_>>());
        let (tx, rx) = mpsc::channel();
        std::thread::scope(|scope| {
            for w in 0..workers {
                let tx = tx.clone();
                let queue = &queue;
                let gpu = self.worker_gpu(w).map(str::to_string);
                let dir = self.scratch.path().join(format!("w{w}"));
                scope.spawn(move || {
                    let mut sampler = (self.factory)(w);
                    loop {
                        let job = queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
                        let Some(job) = job else { break };
                        let out = run_trial_job(&job, sampler.as_mut(), gpu.as_deref(), &dir);
                        if tx.send(out).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(tx);
            for out in rx {
                done(out);
            }
        });
        Ok(())
    }

    fn run_final(&self, job: &FinalJob) -> Result<BenchReport> {
        let mut sampler = (self.factory)(0);
        run_final_job(
            job,
            sampler.as_mut(),
            self.worker_gpu(0),
            &self.scratch.path().join("final"),
        )
    }
}

/// The GPUs this process may use: CUDA_VISIBLE_DEVICES when set, else
/// every GPU nvidia-smi lists, else none.
pub fn visible_gpus() -> Vec<String> {
    if let Ok(v) = std::env::var("CUDA_VISIBLE_DEVICES") {
        let ids: Vec<String> = v
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        return ids;
    }
    nvidia_smi(&["--query-gpu=index", "--format=csv,noheader"])
        .map(|out| {
            out.lines()
                .map(|l| l.trim().to_string())
                .filter(|l| !l.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

fn nvidia_smi(args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("nvidia-smi")
        .args(args)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Name and driver of `gpu` (or the first GPU), from nvidia-smi.
pub fn query_device(gpu: Option<&str>) -> (Option<String>, Option<String>) {
    let mut args = vec!["--query-gpu=name,driver_version", "--format=csv,noheader"];
    if let Some(g) = gpu {
        args.extend(["-i", g]);
    }
    let Some(out) = nvidia_smi(&args) else {
        return (None, None);
    };
    let line = out.lines().next().unwrap_or("");
    match line.rsplit_once(',') {
        Some((name, driver)) => (
            Some(name.trim().to_string()).filter(|s| !s.is_empty()),
            Some(driver.trim().to_string()).filter(|s| !s.is_empty()),
        ),
        None => (None, None),
    }
}

/// The shell prefix that pins a command to one GPU.
fn on_gpu(gpu: Option<&str>, command: &str) -> String {
    match gpu {
        Some(g) => format!("CUDA_VISIBLE_DEVICES={g}; export CUDA_VISIBLE_DEVICES; {command}"),
        None => command.to_string(),
    }
}

/// The worker's file for `{CHECK}`: the check file's name in the worker's folder.
fn check_path(dir: &Path, check: &Path) -> PathBuf {
    dir.join(check.file_name().unwrap_or(std::ffi::OsStr::new("out.npy")))
}

/// Measure one job with `sampler`; never fails: a failure is in the outcome.
pub fn run_trial_job(
    job: &TrialJob,
    sampler: &mut dyn Sampler,
    gpu: Option<&str>,
    scratch: &Path,
) -> TrialOutcome {
    let mut out = TrialOutcome {
        index: job.index,
        samples: Vec::new(),
        spent_s: 0.0,
        used_s: 0.0,
        failure: None,
        output: None,
        source: None,
        range: None,
        device: None,
        gpu: gpu.map(str::to_string),
    };
    if let Err(e) = measure(job, sampler, gpu, scratch, &mut out) {
        out.failure = Some(e.to_string());
    }
    out
}

fn measure(
    job: &TrialJob,
    sampler: &mut dyn Sampler,
    gpu: Option<&str>,
    scratch: &Path,
    out: &mut TrialOutcome,
) -> Result<()> {
    let check_file = match &job.check {
        Some(c) if job.command.contains(CHECK_PLACEHOLDER) => {
            std::fs::create_dir_all(scratch)
                .map_err(|e| crate::error::io_error(scratch, "create", e))?;
            Some(check_path(scratch, c))
        }
        Some(c) => Some(c.clone()),
        None => None,
    };
    let placeholder = check_file
        .clone()
        .unwrap_or_else(|| scratch.join("check.npy"));
    let command = on_gpu(
        gpu,
        &job.command.replace(
            CHECK_PLACEHOLDER,
            &shell_quote(&placeholder.display().to_string()),
        ),
    );
    let timing = match job.timing.timing()? {
        Some(t) => t,
        None => {
            let t = sampler.choose(
                parse_choice(&job.timing.choice)?,
                job.timing.range.as_deref(),
                &command,
            )?;
            out.source = Some(source_name(t.source).to_string());
            out.range = t.range.clone();
            out.device = t.device.clone();
            t
        }
    };
    let rule: StopRule = job.stop.into();
    let budget = |used: f64| crate::profile::secs(rule.max_time_s - used);
    let mut used = job.have_spent_s;
    for _ in 0..job.warmup {
        let run = sampler.run(&command, &timing, Some(budget(used)))?;
        used += run.wall_s;
        out.used_s += run.wall_s;
        if run.cut {
            return Err(Error::WorkloadFailed(format!(
                "timed out: its warm-up run passed --max-time ({} s)",
                rule.max_time_s
            )));
        }
    }
    if let (Some(file), Some(_)) = (&check_file, &job.check) {
        if job.warmup > 0 {
            if !file.exists() {
                return Err(Error::WorkloadFailed(format!(
                    "it wrote no {} for --check",
                    file.display()
                )));
            }
            // Keep this trial's output under its own name: the next run overwrites the file.
            std::fs::create_dir_all(scratch)
                .map_err(|e| crate::error::io_error(scratch, "create", e))?;
            let ext = file.extension().and_then(|e| e.to_str()).unwrap_or("npy");
            let kept = scratch.join(format!("trial-{}.{ext}", job.index));
            std::fs::rename(file, &kept)
                .or_else(|_| std::fs::copy(file, &kept).map(|_| ()))
                .map_err(|e| crate::error::io_error(&kept, "keep the check output in", e))?;
            out.output = Some(kept);
        }
    }
    let mut samples = job.have.clone();
    let mut spent = job.have_spent_s;
    let mut empty_runs = 0;
    let enough = |s: &[f64], spent: f64| match job.samples {
        Some(n) => s.len() >= n || spent >= rule.max_time_s,
        None => rule.should_stop(s, spent),
    };
    while !enough(&samples, spent) {
        let run: Run = sampler.run(&command, &timing, Some(budget(used)))?;
        if let Some(bad) = run.samples.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
            return Err(Error::WorkloadFailed(format!(
                "a sample of {bad} s: samples must be positive and finite"
            )));
        }
        spent += run.wall_s;
        used += run.wall_s;
        out.spent_s += run.wall_s;
        out.used_s += run.wall_s;
        let got = run.samples.len();
        samples.extend(&run.samples);
        out.samples.extend(run.samples);
        if run.cut || samples.len() >= crate::bench::MAX_SAMPLES {
            break;
        }
        empty_runs = if got == 0 { empty_runs + 1 } else { 0 };
        if empty_runs >= 100 {
            return Err(Error::WorkloadFailed(
                "100 runs in a row gave no sample".into(),
            ));
        }
    }
    if samples.is_empty() {
        return Err(Error::WorkloadFailed(format!(
            "timed out: no sample within --max-time ({} s)",
            rule.max_time_s
        )));
    }
    Ok(())
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// A sampler whose timing is already decided.
struct Fixed<'a> {
    inner: &'a mut dyn Sampler,
    timing: Option<Timing>,
}

impl Sampler for Fixed<'_> {
    fn choose(&mut self, choice: TimingChoice, range: Option<&str>, first: &str) -> Result<Timing> {
        match &self.timing {
            Some(t) => Ok(t.clone()),
            None => self.inner.choose(choice, range, first),
        }
    }

    fn run(&mut self, command: &str, timing: &Timing, budget: Option<Duration>) -> Result<Run> {
        self.inner.run(command, timing, budget)
    }
}

/// The final comparison with `sampler` on `gpu`: the bench loop, interleaved.
pub fn run_final_job(
    job: &FinalJob,
    sampler: &mut dyn Sampler,
    gpu: Option<&str>,
    scratch: &Path,
) -> Result<BenchReport> {
    std::fs::create_dir_all(scratch).map_err(|e| crate::error::io_error(scratch, "create", e))?;
    let sink = shell_quote(&scratch.join("check.npy").display().to_string());
    let mut req = BenchRequest::new(
        job.variants
            .iter()
            .map(|(name, command)| VariantSpec {
                name: name.clone(),
                command: on_gpu(gpu, &command.replace(CHECK_PLACEHOLDER, &sink)),
            })
            .collect(),
    );
    req.measure.threshold = job.threshold;
    req.measure.noise = job.noise;
    req.measure.warmup = job.warmup;
    req.measure.stop = job.stop.into();
    req.measure.seed = job.seed;
    req.measure.timing = parse_choice(&job.timing.choice)?;
    req.measure.range = job.timing.range.clone();
    req.measure.tracer = job.timing.tracer.clone();
    let mut fixed = Fixed {
        timing: job.timing.timing()?,
        inner: sampler,
    };
    let mut r = run_bench(&req, &mut fixed, &crate::Silent)?;
    for (v, (_, command)) in r.variants.iter_mut().zip(&job.variants) {
        v.command = command.clone();
    }
    Ok(r)
}

/// One trial as the driver tracks it.
#[derive(Debug, Clone)]
struct Trial {
    config: BTreeMap<String, String>,
    label: String,
    command: String,
    samples: Vec<f64>,
    spent_s: f64,
    status: TrialStatus,
    reason: Option<String>,
    correct: Option<bool>,
    /// The stopping rule held (or --max-time passed): the samples are final.
    complete: bool,
    measured: usize,
    ran: bool,
    gpu: Option<String>,
    round: usize,
    output: Option<PathBuf>,
    source: Option<String>,
}

impl Trial {
    fn median(&self) -> Option<f64> {
        median(&self.samples)
    }

    fn usable(&self) -> bool {
        self.status == TrialStatus::Ok && !self.samples.is_empty()
    }
}

/// The sweep with real processes on this host's GPUs.
pub fn tune(req: &TuneRequest, progress: &dyn Progress) -> Result<TuneReport> {
    req.validate()?;
    let exec = LocalExecutor::new(req.gpus.clone(), req.measure.tracer.clone())?;
    let report = tune_with(req, &exec, progress)?;
    record(req, &report, progress);
    Ok(report)
}

/// The sweep in the run history, one row (its trials are in the tune cache).
pub fn record(req: &TuneRequest, r: &TuneReport, progress: &dyn Progress) {
    let summary = match &r.winner {
        Some(w) => format!(
            "tune {}: winner {} {:.3}x vs {} ({} trials, {} measured)",
            r.strategy,
            w.label,
            w.speedup_vs_baseline,
            r.baseline,
            r.trials.len(),
            r.measured_trials
        ),
        None => format!("tune {}: no winner ({} trials)", r.strategy, r.trials.len()),
    };
    let mut row = crate::record::run_row("tune", r.template.clone(), summary);
    row.device = r.device.clone();
    row.verdict = r
        .winner
        .as_ref()
        .and_then(|w| w.verdict.as_ref())
        .map(|v| v.kind.as_str().to_string());
    row.report_json = serde_json::to_string(r).ok();
    crate::record::record_run(&req.db, &row, progress);
}

/// Cached winners per template, key and device (`kopt tune show`).
pub fn cached_winners(db: &Path, key: Option<&str>) -> Result<Vec<kopt_store::CachedWinner>> {
    if !db.is_file() {
        return Err(Error::Input(format!("{}: no history yet", db.display())));
    }
    Ok(TuneCache::open(db)?.winners(key)?)
}

struct Driver<'a> {
    req: &'a TuneRequest,
    exec: &'a dyn Executor,
    progress: &'a dyn Progress,
    cache: Option<TuneCache>,
    key: TrialKey,
    trials: Vec<Trial>,
    timing: TimingSpec,
    device_seen: Option<String>,
    reference: Option<Vec<kopt_ingest::tensor::Tensor>>,
    notes: Vec<String>,
    done: usize,
}

/// The sweep through any executor.
pub fn tune_with(
    req: &TuneRequest,
    exec: &dyn Executor,
    progress: &dyn Progress,
) -> Result<TuneReport> {
    req.validate()?;
    let started = Instant::now();
    let gpus = exec.gpus();
    if gpus.len() > 1 && req.measure.check.is_some() && !req.template.contains(CHECK_PLACEHOLDER) {
        return Err(Error::Usage(format!(
            "--check with {} GPUs: write the output to {CHECK_PLACEHOLDER} in the template (each worker gets its own file)",
            gpus.len()
        )));
    }
    let (points, excluded) = req.space.points(MAX_POINTS)?;
    let baseline = match &req.baseline {
        Some(b) => b.clone(),
        None => points.first().cloned().ok_or_else(|| {
            Error::Usage(format!(
                "no point of the space satisfies the constraints ({excluded} excluded)"
            ))
        })?,
    };
    let n_points = points.len();
    let strategy = req.chosen_strategy(n_points);
    let mut chosen: Vec<BTreeMap<String, String>> = match strategy {
        Strategy::Random => {
            let n = req.trials.unwrap_or(points.len()).min(points.len());
            let mut rng = SplitMix(req.measure.seed);
            let mut idx: Vec<usize> = (0..points.len()).collect();
            for i in 0..n {
                let j = i + (rng.next() % (idx.len() - i) as u64) as usize;
                idx.swap(i, j);
            }
            let mut pick: Vec<usize> = idx[..n].to_vec();
            pick.sort_unstable();
            pick.into_iter().map(|i| points[i].clone()).collect()
        }
        _ => points,
    };
    // The baseline first, always measured.
    chosen.retain(|c| *c != baseline);
    chosen.insert(0, baseline.clone());
    let (device, driver) = exec.device();
    let key = TrialKey {
        template: req.template.clone(),
        params: String::new(),
        key: req.key.clone().unwrap_or_default(),
        device: device.clone().unwrap_or_else(|| "none".into()),
        driver: driver.clone().unwrap_or_default(),
        kopt_version: env!("CARGO_PKG_VERSION").into(),
        settings: req.settings(&baseline),
    };
    let cache = match TuneCache::open(&req.db) {
        Ok(c) => Some(c),
        Err(e) => {
            progress.note(&format!("warning: no tune cache, trials are not kept: {e}"));
            None
        }
    };
    let trials = chosen
        .into_iter()
        .map(|config| Trial {
            label: req.space.label(&config),
            command: req.space.substitute(&req.template, &config),
            config,
            samples: Vec::new(),
            spent_s: 0.0,
            status: TrialStatus::Ok,
            reason: None,
            correct: None,
            complete: false,
            measured: 0,
            ran: false,
            gpu: None,
            round: 0,
            output: None,
            source: None,
        })
        .collect();
    let mut d = Driver {
        req,
        exec,
        progress,
        cache,
        key,
        trials,
        timing: TimingSpec {
            choice: choice_name(req.measure.timing).into(),
            source: None,
            range: req.measure.range.clone(),
            tracer: req.measure.tracer.clone(),
        },
        device_seen: None,
        reference: None,
        notes: Vec::new(),
        done: 0,
    };
    if !req.fresh {
        d.load_cache();
    }
    progress.note(&format!(
        "tune: {} configs to try ({n_points} in the space, {excluded} excluded by constraints), strategy {}, {} worker(s)",
        d.trials.len(),
        strategy.as_str(),
        gpus.len().max(1)
    ));
    let result = d.sweep(strategy);
    for t in &d.trials {
        if let Some(o) = &t.output {
            let _ = std::fs::remove_file(o);
        }
    }
    result?;
    let (final_comparison, final_cached) = d.final_comparison()?;
    Ok(d.report(
        strategy,
        excluded,
        gpus,
        device,
        driver,
        final_comparison,
        final_cached,
        started.elapsed().as_secs_f64(),
    ))
}

impl Driver<'_> {
    fn trial_key(&self, t: &Trial) -> TrialKey {
        TrialKey {
            params: canonical(&t.config),
            ..self.key.clone()
        }
    }

    fn load_cache(&mut self) {
        let Some(cache) = &self.cache else { return };
        let mut hits = Vec::new();
        for (i, t) in self.trials.iter().enumerate() {
            match cache.get(&self.trial_key(t)) {
                // A failed baseline is tried again: the sweep cannot go on without it.
                Ok(Some(c)) if i == 0 && c.status == "failed" => {}
                Ok(Some(c)) => hits.push((i, c)),
                Ok(None) => {}
                Err(e) => {
                    self.progress.note(&format!("warning: tune cache: {e}"));
                    return;
                }
            }
        }
        for (i, c) in hits {
            let t = &mut self.trials[i];
            t.samples = c.samples;
            t.spent_s = c.spent_s;
            t.complete = c.complete;
            t.correct = c.correct;
            t.gpu = c.gpu;
            t.reason = c.reason;
            t.status = match c.status.as_str() {
                "rejected" => TrialStatus::Rejected,
                "failed" => TrialStatus::Failed,
                _ => TrialStatus::Ok,
            };
            if t.status != TrialStatus::Ok {
                t.complete = true;
            }
            if self.timing.source.is_none() && parse_source(&c.source).is_some() {
                self.timing.source = Some(c.source.clone());
            }
            t.source = Some(c.source);
        }
    }

    fn save(&mut self, i: usize) {
        let t = &self.trials[i];
        if self.cache.is_none() {
            return;
        }
        let status = match t.status {
            TrialStatus::Rejected => "rejected",
            TrialStatus::Failed => "failed",
            _ => "ok",
        };
        let row = CachedTrial {
            status: status.into(),
            reason: if t.status == TrialStatus::Pruned {
                None
            } else {
                t.reason.clone()
            },
            samples: t.samples.clone(),
            spent_s: t.spent_s,
            complete: t.complete,
            correct: t.correct,
            source: t
                .source
                .clone()
                .or_else(|| self.timing.source.clone())
                .unwrap_or_default(),
            gpu: t.gpu.clone(),
        };
        let key = self.trial_key(t);
        let now = crate::run_folder::utc_timestamp(std::time::SystemTime::now());
        if let Some(cache) = self.cache.as_mut() {
            if let Err(e) = cache.put(&key, &row, &now) {
                self.progress
                    .note(&format!("warning: trial not kept in the tune cache: {e}"));
            }
        }
    }

    /// The job that brings trial `i` to `samples` (None: the stopping rule).
    fn job(&self, i: usize, samples: Option<usize>) -> TrialJob {
        let t = &self.trials[i];
        let first = t.samples.is_empty();
        let check = self.req.measure.check.is_some() && first;
        TrialJob {
            index: i,
            command: t.command.clone(),
            warmup: if first {
                self.req.measure.warmup.max(u32::from(check))
            } else {
                0
            },
            check: if check {
                self.req.measure.check.clone()
            } else {
                None
            },
            samples,
            stop: self.req.measure.stop.into(),
            have: t.samples.clone(),
            have_spent_s: t.spent_s,
            timing: self.timing.clone(),
        }
    }

    fn needs(&self, i: usize, samples: Option<usize>) -> bool {
        let t = &self.trials[i];
        if t.status != TrialStatus::Ok || t.complete {
            return false;
        }
        match samples {
            Some(n) => t.samples.len() < n,
            None => true,
        }
    }

    /// Run `jobs`, folding each outcome in as it arrives (and committing it).
    fn run(&mut self, jobs: Vec<TrialJob>, round: usize) -> Result<()> {
        if jobs.is_empty() {
            return Ok(());
        }
        let total = self.trials.len();
        let targets: BTreeMap<usize, Option<usize>> =
            jobs.iter().map(|j| (j.index, j.samples)).collect();
        let exec = self.exec;
        let mut err = None;
        exec.run_trials(jobs, &mut |o| {
            let i = o.index;
            let target = targets.get(&i).copied().flatten();
            if let Err(e) = self.fold(o, target, round) {
                err.get_or_insert(e);
            }
            self.done += 1;
            let t = &self.trials[i];
            let what = match t.status {
                TrialStatus::Ok => t
                    .median()
                    .map_or("-".into(), |m| kopt_model::format_duration_ns(m * 1e9)),
                s => format!("{s}: {}", t.reason.as_deref().unwrap_or("")),
            };
            self.progress.note(&format!(
                "trial {}/{total} {} {what} ({} samples{})",
                i + 1,
                t.label,
                t.samples.len(),
                t.gpu
                    .as_deref()
                    .map_or(String::new(), |g| format!(", GPU {g}"))
            ));
        })?;
        err.map_or(Ok(()), Err)
    }

    fn fold(&mut self, o: TrialOutcome, target: Option<usize>, round: usize) -> Result<()> {
        let i = o.index;
        if let Some(s) = &o.source {
            if self.timing.source.is_none() {
                self.timing.source = Some(s.clone());
                self.timing.range = o.range.clone().or(self.timing.range.clone());
            }
        }
        if o.device.is_some() {
            self.device_seen = o.device.clone();
        }
        let rule = self.req.measure.stop;
        if let Some(out) = &o.output {
            if i == 0 {
                let r = kopt_ingest::tensor::read_tensors(out).map_err(|e| {
                    Error::WorkloadFailed(format!(
                        "the baseline config {}: its --check output: {e}",
                        self.trials[0].label
                    ))
                })?;
                self.reference = Some(r);
                let _ = std::fs::remove_file(out);
            }
        }
        let t = &mut self.trials[i];
        t.ran = true;
        t.round = round;
        t.gpu = o.gpu.clone().or(t.gpu.take());
        t.source = self.timing.source.clone();
        // A trial's output waits for the baseline's when that is not in yet.
        t.output = o.output.clone().filter(|_| i != 0);
        if let Some(f) = o.failure {
            t.status = TrialStatus::Failed;
            t.reason = Some(f);
            t.complete = true;
            t.measured += o.samples.len();
            t.samples.extend(o.samples);
        } else {
            t.measured += o.samples.len();
            t.samples.extend(o.samples);
            t.spent_s += o.spent_s;
            t.complete = t.complete
                || match target {
                    None => true,
                    Some(_) => {
                        rule.should_stop(&t.samples, t.spent_s) || t.spent_s >= rule.max_time_s
                    }
                };
        }
        if self.trials[i].output.is_none() {
            self.save(i);
        }
        self.gate_pending();
        Ok(())
    }

    /// Compare every trial's kept output with the baseline's, once that is
    /// in; a trial is committed to the cache only after its gate.
    fn gate_pending(&mut self) {
        let Some(reference) = &self.reference else {
            return;
        };
        let mut gated = Vec::new();
        for (i, t) in self.trials.iter_mut().enumerate().skip(1) {
            let Some(path) = t.output.take() else {
                continue;
            };
            let (passed, problems) = match kopt_ingest::tensor::read_tensors(&path) {
                Ok(c) => {
                    let rep =
                        kopt_bench::compare_tensors(reference, &c, self.req.measure.tol, false);
                    let mut problems = rep.problems.clone();
                    for x in &rep.tensors {
                        problems.extend(x.problems.iter().map(|p| format!("{}: {p}", x.name)));
                    }
                    (rep.passed, problems)
                }
                Err(e) => (false, vec![format!("its output cannot be read: {e}")]),
            };
            let _ = std::fs::remove_file(&path);
            t.correct = Some(passed);
            if !passed && t.status == TrialStatus::Ok {
                t.status = TrialStatus::Rejected;
                t.complete = true;
                t.reason = Some(format!(
                    "output differs from the baseline config's: {}",
                    kopt_model::clip_chars(&problems.join("; "), 300)
                ));
            }
            gated.push(i);
        }
        for i in gated {
            self.save(i);
        }
    }

    fn baseline_failed(&self) -> Result<()> {
        let b = &self.trials[0];
        if b.status == TrialStatus::Failed {
            return Err(Error::WorkloadFailed(format!(
                "the baseline config {} failed: {} (choose another with --baseline)",
                b.label,
                b.reason.as_deref().unwrap_or("")
            )));
        }
        Ok(())
    }

    fn sweep(&mut self, strategy: Strategy) -> Result<()> {
        let check = self.req.measure.check.is_some();
        let first_target = match strategy {
            Strategy::Halving => Some(self.req.halving_start),
            _ => None,
        };
        let others_need = (1..self.trials.len()).any(|i| self.needs(i, first_target));
        let baseline_needs = self.needs(0, first_target);
        // The baseline gives the reference output every other trial is
        // compared with; measured before, it runs once more for that only.
        let reference_job = (!baseline_needs && check && others_need).then(|| {
            let mut job = self.job(0, first_target);
            job.samples = Some(self.trials[0].samples.len());
            job.warmup = self.req.measure.warmup.max(1);
            job.check = self.req.measure.check.clone();
            job
        });
        // When the timing source must be probed (auto, gpu), the baseline
        // runs alone first and resolves it; otherwise it runs beside the others.
        let probe = matches!(
            self.req.measure.timing,
            TimingChoice::Auto | TimingChoice::Gpu
        ) && self.timing.source.is_none();
        let mut first_batch = Vec::new();
        if probe && (baseline_needs || others_need) {
            let job = reference_job.unwrap_or_else(|| self.job(0, first_target));
            self.run(vec![job], 0)?;
            self.baseline_failed()?;
        } else if let Some(job) = reference_job {
            first_batch.push(job);
        }
        self.baseline_failed()?;
        match strategy {
            Strategy::Grid | Strategy::Random => {
                first_batch.extend(
                    (0..self.trials.len())
                        .filter(|&i| self.needs(i, None))
                        .map(|i| self.job(i, None)),
                );
                self.run(first_batch, 0)?;
                self.after_first_batch()
            }
            Strategy::Halving => self.halving(first_batch),
        }
    }

    fn after_first_batch(&self) -> Result<()> {
        self.baseline_failed()?;
        let pending = self.trials.iter().any(|t| t.output.is_some());
        if self.req.measure.check.is_some() && self.reference.is_none() && pending {
            return Err(Error::WorkloadFailed(format!(
                "the baseline config {} gave no --check output to compare with",
                self.trials[0].label
            )));
        }
        Ok(())
    }

    /// Successive halving: every config gets `halving_start` samples; after
    /// each round the slower half goes, except configs whose interval
    /// against the leader cannot tell them apart yet; survivors get twice
    /// the samples, until `top` remain.
    fn halving(&mut self, first_batch: Vec<TrialJob>) -> Result<()> {
        let mut alive: Vec<usize> = (0..self.trials.len()).collect();
        let mut target = self.req.halving_start;
        let mut extra = first_batch;
        for round in 0..64 {
            let mut jobs = std::mem::take(&mut extra);
            jobs.extend(
                alive
                    .iter()
                    .copied()
                    .filter(|&i| self.needs(i, Some(target)))
                    .map(|i| self.job(i, Some(target))),
            );
            self.run(jobs, round)?;
            self.after_first_batch()?;
            alive.retain(|&i| self.trials[i].usable());
            for &i in &alive {
                self.trials[i].round = round;
            }
            if alive.len() <= self.req.top {
                break;
            }
            alive.sort_by(|&a, &b| {
                let (ma, mb) = (self.trials[a].median(), self.trials[b].median());
                ma.unwrap_or(f64::MAX).total_cmp(&mb.unwrap_or(f64::MAX))
            });
            let keep = alive.len().div_ceil(2).max(self.req.top);
            let leader = self.trials[alive[0]].samples.clone();
            let mut next = alive[..keep].to_vec();
            for &i in &alive[keep..] {
                let t = &self.trials[i];
                let iv =
                    bootstrap_median_ratio(&leader, &t.samples, 1000, 0.95, self.req.measure.seed);
                let clearly_slower = iv.is_some_and(|iv| iv.low > 1.0 + self.req.measure.noise);
                if clearly_slower || t.complete {
                    let reason = match iv {
                        Some(iv) => format!(
                            "dropped in halving round {round}: {:.2}x the leader's median (interval {:.2} to {:.2}) after {} samples",
                            iv.estimate,
                            iv.low,
                            iv.high,
                            t.samples.len()
                        ),
                        None => format!("dropped in halving round {round}"),
                    };
                    let t = &mut self.trials[i];
                    t.status = TrialStatus::Pruned;
                    t.reason = Some(reason);
                } else {
                    next.push(i);
                }
            }
            alive = next;
            target = target.saturating_mul(2);
        }
        Ok(())
    }

    fn ranked(&self) -> Vec<usize> {
        let mut ok: Vec<usize> = (0..self.trials.len())
            .filter(|&i| self.trials[i].usable())
            .collect();
        ok.sort_by(|&a, &b| {
            self.trials[a]
                .median()
                .unwrap_or(f64::MAX)
                .total_cmp(&self.trials[b].median().unwrap_or(f64::MAX))
        });
        ok
    }

    /// Baseline and the `top` best configs, interleaved on one GPU (cached).
    fn final_comparison(&mut self) -> Result<(Option<BenchReport>, bool)> {
        let ranked = self.ranked();
        let mut chosen: Vec<usize> = vec![0];
        chosen.extend(
            ranked
                .iter()
                .copied()
                .filter(|&i| i != 0)
                .take(self.req.top),
        );
        let baseline_ok = matches!(self.trials[0].status, TrialStatus::Ok | TrialStatus::Pruned);
        if chosen.len() < 2 || !baseline_ok || self.trials[0].samples.is_empty() {
            return Ok((None, false));
        }
        let candidates = serde_json::to_string(
            &chosen
                .iter()
                .map(|&i| canonical(&self.trials[i].config))
                .collect::<Vec<_>>(),
        )
        .unwrap_or_default();
        if !self.req.fresh {
            if let Some(cache) = &self.cache {
                if let Ok(Some(json)) = cache.get_final(&self.key, &candidates) {
                    if let Ok(r) = serde_json::from_str::<BenchReport>(&json) {
                        return Ok((Some(r), true));
                    }
                }
            }
        }
        let job = FinalJob {
            variants: chosen
                .iter()
                .map(|&i| (self.trials[i].label.clone(), self.trials[i].command.clone()))
                .collect(),
            // Every candidate that ran in this sweep is warm (JIT and disk caches).
            warmup: if chosen.iter().all(|&i| self.trials[i].ran) {
                0
            } else {
                self.req.measure.warmup
            },
            stop: self.req.measure.stop.into(),
            threshold: self.req.measure.threshold,
            noise: self.req.measure.noise,
            seed: self.req.measure.seed,
            timing: self.timing.clone(),
        };
        self.progress.note(&format!(
            "final comparison: {} timed interleaved on one GPU",
            job.variants
                .iter()
                .map(|(l, _)| l.as_str())
                .collect::<Vec<_>>()
                .join(" | ")
        ));
        match self.exec.run_final(&job) {
            Ok(r) => {
                if let (Some(cache), Ok(json)) = (self.cache.as_mut(), serde_json::to_string(&r)) {
                    let now = crate::run_folder::utc_timestamp(std::time::SystemTime::now());
                    if let Err(e) = cache.put_final(&self.key, &candidates, &json, &now) {
                        self.progress
                            .note(&format!("warning: final comparison not cached: {e}"));
                    }
                }
                Ok((Some(r), false))
            }
            Err(e) => {
                self.notes.push(format!(
                    "the final comparison failed ({e}): the winner is the best trial median"
                ));
                Ok((None, false))
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn report(
        &self,
        strategy: Strategy,
        excluded: usize,
        gpus: Vec<String>,
        device: Option<String>,
        driver: Option<String>,
        final_comparison: Option<BenchReport>,
        final_cached: bool,
        wall_s: f64,
    ) -> TuneReport {
        let base_median = self.trials[0].median();
        let trials: Vec<TrialResult> = self
            .trials
            .iter()
            .map(|t| {
                let m = t.median();
                TrialResult {
                    label: t.label.clone(),
                    config: t.config.clone(),
                    command: t.command.clone(),
                    status: t.status,
                    reason: t.reason.clone(),
                    values_s: t.samples.clone(),
                    median_s: m,
                    relative_noise: relative_noise(&t.samples),
                    speedup_vs_baseline: match (base_median, m) {
                        (Some(b), Some(m)) if t.status != TrialStatus::Failed => Some(b / m),
                        _ => None,
                    },
                    correct: t.correct,
                    cached: !t.ran,
                    measured_samples: t.measured,
                    gpu: t.gpu.clone(),
                    round: t.round,
                }
            })
            .collect();
        let winner = match &final_comparison {
            Some(f) => f
                .variants
                .iter()
                .min_by(|a, b| a.median_s.total_cmp(&b.median_s))
                .and_then(|v| {
                    let t = self.trials.iter().find(|t| t.label == v.name)?;
                    Some(TuneWinner {
                        label: t.label.clone(),
                        config: t.config.clone(),
                        command: t.command.clone(),
                        median_s: v.median_s,
                        speedup_vs_baseline: v.speedup_vs_first,
                        ratio_interval: v.ratio_interval,
                        verdict: v.verdict.clone(),
                    })
                }),
            None => self.ranked().first().map(|&i| {
                let t = &self.trials[i];
                let m = t.median().unwrap_or(f64::NAN);
                TuneWinner {
                    label: t.label.clone(),
                    config: t.config.clone(),
                    command: t.command.clone(),
                    median_s: m,
                    speedup_vs_baseline: base_median.map_or(f64::NAN, |b| b / m),
                    ratio_interval: None,
                    verdict: None,
                }
            }),
        };
        let source = self
            .timing
            .source
            .as_deref()
            .and_then(parse_source)
            .map_or("-".into(), |s| s.describe(self.timing.range.as_deref()));
        TuneReport {
            schema: kopt_model::SCHEMA.into(),
            template: self.req.template.clone(),
            key: self.req.key.clone(),
            device: device.or(self.device_seen.clone()),
            driver,
            kopt_version: env!("CARGO_PKG_VERSION").into(),
            strategy: strategy.as_str().into(),
            params: self
                .req
                .space
                .params
                .iter()
                .map(|p| TuneParam {
                    name: p.name.clone(),
                    values: p.values.clone(),
                })
                .collect(),
            constraints: self
                .req
                .space
                .constraints
                .iter()
                .map(|c| c.text.clone())
                .collect(),
            space_size: self.req.space.size_unfiltered().saturating_sub(excluded),
            excluded,
            gpus,
            source,
            baseline: self.trials[0].label.clone(),
            measured_trials: trials.iter().filter(|t| !t.cached).count(),
            cached_trials: trials.iter().filter(|t| t.cached).count(),
            trial_samples: trials.iter().map(|t| t.values_s.len()).sum(),
            measured_samples: trials.iter().map(|t| t.measured_samples).sum(),
            final_samples: final_comparison
                .as_ref()
                .map_or(0, |f| f.variants.iter().map(|v| v.samples).sum()),
            final_cached,
            trials,
            final_comparison,
            winner,
            wall_s,
            notes: self.notes.clone(),
        }
    }
}

/// A small seeded generator (splitmix64) for the random strategy.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// The search space: parameters, value lists and ranges, constraints.
pub mod space {
    use std::collections::BTreeMap;
    use std::path::Path;

    use crate::error::{Error, Result};

    /// Values a range may expand to.
    pub const MAX_VALUES: usize = 10_000;

    #[derive(Debug, Clone, PartialEq)]
    pub struct Param {
        pub name: String,
        pub values: Vec<String>,
    }

    #[derive(Debug, Clone, PartialEq, Default)]
    pub struct Space {
        pub params: Vec<Param>,
        pub constraints: Vec<Expr>,
    }

    /// A value must be a plain token: it goes into a shell command.
    pub fn check_value(name: &str, v: &str) -> Result<()> {
        let ok = !v.is_empty()
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-+:/@%".contains(c));
        if ok {
            Ok(())
        } else {
            Err(Error::Usage(format!(
                "{name}: value {v:?} is not a plain token (letters, digits, . _ - + : / @ %)"
            )))
        }
    }

    fn check_name(name: &str) -> Result<()> {
        let ok = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !matches!(name, "and" | "or" | "not" | "CHECK");
        if ok {
            Ok(())
        } else {
            Err(Error::Usage(format!(
                "parameter name {name:?}: letters, digits and _ (not CHECK, and, or, not)"
            )))
        }
    }

    fn fmt_num(x: f64) -> String {
        if x.fract() == 0.0 && x.abs() < 1e15 {
            format!("{}", x as i64)
        } else {
            format!("{x}")
        }
    }

    /// `64,128,256`, `64..256 step 64` (inclusive), `16..256 x2` (geometric), or one value.
    pub fn parse_values(name: &str, spec: &str) -> Result<Vec<String>> {
        let spec = spec.trim();
        let bad = |why: &str| Error::Usage(format!("{name}={spec}: {why}"));
        let mut out = Vec::new();
        for part in spec.split(',').map(str::trim) {
            if part.is_empty() {
                return Err(bad("an empty value"));
            }
            if let Some((a, rest)) = part.split_once("..") {
                let rest = rest.trim();
                let (b, how) = match rest.find(|c: char| c.is_whitespace() || c == 'x' || c == '*')
                {
                    Some(i) => (&rest[..i], rest[i..].trim()),
                    None => (rest, ""),
                };
                let num = |s: &str| {
                    s.trim()
                        .parse::<f64>()
                        .ok()
                        .filter(|x| x.is_finite())
                        .ok_or_else(|| bad(&format!("{s:?} is not a number")))
                };
                let (a, b) = (num(a)?, num(b)?);
                let (mul, step) = if let Some(s) = how.strip_prefix("step") {
                    (false, num(s)?)
                } else if let Some(s) = how.strip_prefix('x').or_else(|| how.strip_prefix('*')) {
                    (true, num(s)?)
                } else if how.is_empty() {
                    (false, 1.0)
                } else {
                    return Err(bad("a range is a..b, a..b step s, or a..b x f"));
                };
                if b < a {
                    return Err(bad("the range's end is below its start"));
                }
                if (!mul && step <= 0.0) || (mul && (step <= 1.0 || a <= 0.0)) {
                    return Err(bad(
                        "a step must be positive (a factor above 1, from a positive start)",
                    ));
                }
                let mut x = a;
                let eps = 1e-9 * b.abs().max(1.0);
                while x <= b + eps {
                    out.push(fmt_num(x));
                    if out.len() > MAX_VALUES {
                        return Err(bad(&format!("more than {MAX_VALUES} values")));
                    }
                    x = if mul { x * step } else { x + step };
                }
            } else {
                out.push(part.to_string());
            }
        }
        for v in &out {
            check_value(name, v)?;
        }
        let mut seen = std::collections::HashSet::new();
        out.retain(|v| seen.insert(v.clone()));
        Ok(out)
    }

    /// `--param NAME=VALUES`.
    pub fn parse_param(s: &str) -> Result<Param> {
        let (name, spec) = s
            .split_once('=')
            .ok_or_else(|| Error::Usage(format!("--param {s}: expected NAME=VALUES")))?;
        let name = name.trim();
        check_name(name)?;
        Ok(Param {
            name: name.to_string(),
            values: parse_values(name, spec)?,
        })
    }

    /// `NAME=VAL,NAME=VAL` (`--baseline`).
    pub fn parse_assignment(s: &str) -> Result<BTreeMap<String, String>> {
        let mut m = BTreeMap::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (n, v) = part
                .split_once('=')
                .ok_or_else(|| Error::Usage(format!("--baseline {s}: expected NAME=VALUE,...")))?;
            m.insert(n.trim().to_string(), v.trim().to_string());
        }
        if m.is_empty() {
            return Err(Error::Usage("--baseline needs NAME=VALUE,...".into()));
        }
        Ok(m)
    }

    impl Space {
        pub fn new(params: Vec<Param>, constraints: &[String]) -> Result<Space> {
            let mut names: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
            names.sort_unstable();
            if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
                return Err(Error::Usage(format!("parameter {} is given twice", w[0])));
            }
            if let Some(p) = params.iter().find(|p| p.values.is_empty()) {
                return Err(Error::Usage(format!("parameter {} has no values", p.name)));
            }
            let constraints = constraints
                .iter()
                .map(|c| Expr::parse(c, &names))
                .collect::<Result<_>>()?;
            Ok(Space {
                params,
                constraints,
            })
        }

        /// Points before the constraints (saturating).
        pub fn size_unfiltered(&self) -> usize {
            self.params
                .iter()
                .fold(1usize, |n, p| n.saturating_mul(p.values.len()))
        }

        /// Every point that satisfies the constraints, in order (the last
        /// parameter varies fastest), and how many the constraints excluded.
        pub fn points(&self, max: usize) -> Result<(Vec<BTreeMap<String, String>>, usize)> {
            let n = self.size_unfiltered();
            if n > max {
                return Err(Error::Usage(format!(
                    "the space has {n} points, more than {max}: narrow it"
                )));
            }
            let mut out = Vec::new();
            let mut excluded = 0;
            let mut idx = vec![0usize; self.params.len()];
            for _ in 0..n {
                let point: BTreeMap<String, String> = self
                    .params
                    .iter()
                    .zip(&idx)
                    .map(|(p, &i)| (p.name.clone(), p.values[i].clone()))
                    .collect();
                if self.admits(&point)? {
                    out.push(point);
                } else {
                    excluded += 1;
                }
                for k in (0..idx.len()).rev() {
                    idx[k] += 1;
                    if idx[k] < self.params[k].values.len() {
                        break;
                    }
                    idx[k] = 0;
                }
            }
            Ok((out, excluded))
        }

        pub fn admits(&self, point: &BTreeMap<String, String>) -> Result<bool> {
            for c in &self.constraints {
                if !c.eval(point)?.truthy() {
                    return Ok(false);
                }
            }
            Ok(true)
        }

        /// `NAME=VALUE,...` in the order of the parameters.
        pub fn label(&self, point: &BTreeMap<String, String>) -> String {
            self.params
                .iter()
                .filter_map(|p| point.get(&p.name).map(|v| format!("{}={v}", p.name)))
                .collect::<Vec<_>>()
                .join(",")
        }

        /// The template with every `{NAME}` replaced.
        pub fn substitute(&self, template: &str, point: &BTreeMap<String, String>) -> String {
            let mut s = template.to_string();
            for (n, v) in point {
                s = s.replace(&format!("{{{n}}}"), v);
            }
            s
        }

        /// A space file: a `[params]` table (`NAME = [..]`, `NAME = "a..b step s"`,
        /// `NAME = 4`) and `constraints = ["..."]`, a small TOML subset.
        pub fn parse_file(path: &Path) -> Result<(Vec<Param>, Vec<String>)> {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Error::Input(format!("{}: cannot read: {e}", path.display())))?;
            parse_space_text(&text).map_err(|e| Error::Input(format!("{}: {e}", path.display())))
        }
    }

    /// The space file's text (see [`Space::parse_file`]).
    pub fn parse_space_text(text: &str) -> std::result::Result<(Vec<Param>, Vec<String>), String> {
        let mut params = Vec::new();
        let mut constraints = Vec::new();
        let mut section = String::new();
        let mut lines = text.lines().enumerate().peekable();
        while let Some((n, raw)) = lines.next() {
            let line = strip_comment(raw).trim().to_string();
            if line.is_empty() {
                continue;
            }
            if line.starts_with('[') && !line.contains('=') {
                section = line
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .trim()
                    .to_string();
                if !matches!(section.as_str(), "params" | "constraints") {
                    return Err(format!(
                        "line {}: unknown table [{section}] (params, constraints)",
                        n + 1
                    ));
                }
                continue;
            }
            let (k, v) = line
                .split_once('=')
                .ok_or_else(|| format!("line {}: expected KEY = VALUE", n + 1))?;
            let key = k.trim().trim_matches('"').to_string();
            let mut value = v.trim().to_string();
            // Arrays may span lines.
            while value.starts_with('[') && !balanced(&value) {
                let Some((_, more)) = lines.next() else {
                    return Err(format!("line {}: unclosed [", n + 1));
                };
                value.push(' ');
                value.push_str(strip_comment(more).trim());
            }
            let items = parse_value(&value).map_err(|e| format!("line {}: {e}", n + 1))?;
            match (section.as_str(), key.as_str()) {
                ("params", name) => {
                    check_name(name).map_err(|e| format!("line {}: {e}", n + 1))?;
                    let mut values = Vec::new();
                    for (text, quoted) in items {
                        let vs = if quoted {
                            parse_values(name, &text)
                        } else {
                            check_value(name, &text).map(|_| vec![text])
                        };
                        values.extend(vs.map_err(|e| format!("line {}: {e}", n + 1))?);
                    }
                    params.push(Param {
                        name: name.to_string(),
                        values,
                    });
                }
                ("" | "constraints", "constraints" | "constraint" | "rules") => {
                    constraints.extend(items.into_iter().map(|(t, _)| t));
                }
                (s, k) => {
                    return Err(format!(
                        "line {}: unknown key {k}{} (params go under [params]; constraints = [\"...\"])",
                        n + 1,
                        if s.is_empty() { String::new() } else { format!(" in [{s}]") }
                    ))
                }
            }
        }
        Ok((params, constraints))
    }

    fn strip_comment(line: &str) -> &str {
        let mut in_str = None;
        for (i, c) in line.char_indices() {
            match (c, in_str) {
                ('"' | '\'', None) => in_str = Some(c),
                (c, Some(q)) if c == q => in_str = None,
                ('#', None) => return &line[..i],
                _ => {}
            }
        }
        line
    }

    fn balanced(s: &str) -> bool {
        let mut depth = 0i32;
        let mut in_str = None;
        for c in s.chars() {
            match (c, in_str) {
                ('"' | '\'', None) => in_str = Some(c),
                (c, Some(q)) if c == q => in_str = None,
                ('[', None) => depth += 1,
                (']', None) => depth -= 1,
                _ => {}
            }
        }
        depth <= 0
    }

    /// A value: `[a, "b", 3]`, `"text"` or a bare number/word; items with
    /// whether they were quoted.
    fn parse_value(v: &str) -> std::result::Result<Vec<(String, bool)>, String> {
        let v = v.trim();
        let inner = match v.strip_prefix('[') {
            Some(rest) => rest
                .strip_suffix(']')
                .ok_or("an array must end with ]")?
                .to_string(),
            None => v.to_string(),
        };
        let mut items = Vec::new();
        let mut cur = String::new();
        let mut quoted = false;
        let mut in_str: Option<char> = None;
        for c in inner.chars() {
            match (c, in_str) {
                ('"' | '\'', None) => {
                    in_str = Some(c);
                    quoted = true;
                }
                (c, Some(q)) if c == q => in_str = None,
                (',', None) => {
                    if !cur.trim().is_empty() || quoted {
                        items.push((cur.trim().to_string(), quoted));
                    }
                    cur.clear();
                    quoted = false;
                }
                (c, _) => cur.push(c),
            }
        }
        if in_str.is_some() {
            return Err("an unclosed string".into());
        }
        if !cur.trim().is_empty() || quoted {
            items.push((cur.trim().to_string(), quoted));
        }
        if items.is_empty() {
            return Err("no values".into());
        }
        Ok(items)
    }

    /// A constraint's value.
    #[derive(Debug, Clone, PartialEq)]
    pub enum Value {
        Num(f64),
        Str(String),
        Bool(bool),
    }

    impl Value {
        pub fn truthy(&self) -> bool {
            match self {
                Value::Num(x) => *x != 0.0,
                Value::Str(s) => !s.is_empty(),
                Value::Bool(b) => *b,
            }
        }
    }

    #[derive(Debug, Clone, PartialEq)]
    enum Node {
        Num(f64),
        Str(String),
        Var(String),
        Neg(Box<Node>),
        Not(Box<Node>),
        Bin(Op, Box<Node>, Box<Node>),
    }

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Op {
        Add,
        Sub,
        Mul,
        Div,
        Mod,
        Lt,
        Le,
        Gt,
        Ge,
        Eq,
        Ne,
        And,
        Or,
    }

    /// A constraint: `+ - * / %`, comparisons, `and` / `or` / `not` (also
    /// `&& || !`), parentheses, numbers, quoted strings and parameter names.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Expr {
        pub text: String,
        root: Node,
    }

    #[derive(Debug, Clone, PartialEq)]
    enum Tok {
        Num(f64),
        Str(String),
        Ident(String),
        Op(&'static str),
        LParen,
        RParen,
    }

    fn lex(s: &str) -> std::result::Result<Vec<Tok>, String> {
        let cs: Vec<char> = s.chars().collect();
        let mut i = 0;
        let mut out = Vec::new();
        while i < cs.len() {
            let c = cs[i];
            if c.is_whitespace() {
                i += 1;
            } else if c.is_ascii_digit()
                || (c == '.' && cs.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
            {
                let st = i;
                while i < cs.len() && (cs[i].is_ascii_alphanumeric() || cs[i] == '.') {
                    // 1e-3: a sign right after the exponent belongs to the number.
                    i += 1;
                    if i < cs.len()
                        && (cs[i] == '-' || cs[i] == '+')
                        && matches!(cs[i - 1], 'e' | 'E')
                    {
                        i += 1;
                    }
                }
                let t: String = cs[st..i].iter().collect();
                out.push(Tok::Num(
                    t.parse().map_err(|_| format!("{t:?} is not a number"))?,
                ));
            } else if c.is_ascii_alphabetic() || c == '_' {
                let st = i;
                while i < cs.len() && (cs[i].is_ascii_alphanumeric() || cs[i] == '_') {
                    i += 1;
                }
                let w: String = cs[st..i].iter().collect();
                out.push(match w.as_str() {
                    "and" => Tok::Op("and"),
                    "or" => Tok::Op("or"),
                    "not" => Tok::Op("not"),
                    "true" | "True" => Tok::Num(1.0),
                    "false" | "False" => Tok::Num(0.0),
                    _ => Tok::Ident(w),
                });
            } else if c == '"' || c == '\'' {
                let st = i + 1;
                i += 1;
                while i < cs.len() && cs[i] != c {
                    i += 1;
                }
                if i >= cs.len() {
                    return Err("an unclosed string".into());
                }
                out.push(Tok::Str(cs[st..i].iter().collect()));
                i += 1;
            } else if c == '(' {
                out.push(Tok::LParen);
                i += 1;
            } else if c == ')' {
                out.push(Tok::RParen);
                i += 1;
            } else {
                let two: String = cs[i..(i + 2).min(cs.len())].iter().collect();
                let op = match two.as_str() {
                    "<=" => Some("<="),
                    ">=" => Some(">="),
                    "==" => Some("=="),
                    "!=" => Some("!="),
                    "&&" => Some("and"),
                    "||" => Some("or"),
                    _ => None,
                };
                if let Some(op) = op {
                    out.push(Tok::Op(op));
                    i += 2;
                    continue;
                }
                let op = match c {
                    '+' => "+",
                    '-' => "-",
                    '*' => "*",
                    '/' => "/",
                    '%' => "%",
                    '<' => "<",
                    '>' => ">",
                    '!' => "not",
                    '=' => "==",
                    _ => return Err(format!("unexpected {c:?}")),
                };
                out.push(Tok::Op(op));
                i += 1;
            }
        }
        Ok(out)
    }

    struct Parser<'a> {
        toks: Vec<Tok>,
        at: usize,
        names: &'a [&'a str],
        depth: usize,
    }

    impl Parser<'_> {
        fn peek_op(&self) -> Option<&'static str> {
            match self.toks.get(self.at) {
                Some(Tok::Op(o)) => Some(o),
                _ => None,
            }
        }

        fn binary(
            &mut self,
            ops: &[(&str, Op)],
            next: fn(&mut Self) -> std::result::Result<Node, String>,
        ) -> std::result::Result<Node, String> {
            let mut left = next(self)?;
            while let Some(op) = self
                .peek_op()
                .and_then(|o| ops.iter().find(|(s, _)| *s == o).map(|(_, op)| *op))
            {
                self.at += 1;
                let right = next(self)?;
                left = Node::Bin(op, Box::new(left), Box::new(right));
            }
            Ok(left)
        }

        fn or(&mut self) -> std::result::Result<Node, String> {
            self.binary(&[("or", Op::Or)], Self::and)
        }

        fn and(&mut self) -> std::result::Result<Node, String> {
            self.binary(&[("and", Op::And)], Self::not)
        }

        fn not(&mut self) -> std::result::Result<Node, String> {
            if self.peek_op() == Some("not") {
                self.at += 1;
                return Ok(Node::Not(Box::new(self.nested(Self::not)?)));
            }
            self.cmp()
        }

        fn cmp(&mut self) -> std::result::Result<Node, String> {
            self.binary(
                &[
                    ("<", Op::Lt),
                    ("<=", Op::Le),
                    (">", Op::Gt),
                    (">=", Op::Ge),
                    ("==", Op::Eq),
                    ("!=", Op::Ne),
                ],
                Self::sum,
            )
        }

        fn sum(&mut self) -> std::result::Result<Node, String> {
            self.binary(&[("+", Op::Add), ("-", Op::Sub)], Self::product)
        }

        fn product(&mut self) -> std::result::Result<Node, String> {
            self.binary(
                &[("*", Op::Mul), ("/", Op::Div), ("%", Op::Mod)],
                Self::unary,
            )
        }

        fn nested(
            &mut self,
            f: fn(&mut Self) -> std::result::Result<Node, String>,
        ) -> std::result::Result<Node, String> {
            self.depth += 1;
            if self.depth > 64 {
                return Err("nested too deeply".into());
            }
            let r = f(self);
            self.depth -= 1;
            r
        }

        fn unary(&mut self) -> std::result::Result<Node, String> {
            if self.peek_op() == Some("-") {
                self.at += 1;
                return Ok(Node::Neg(Box::new(self.nested(Self::unary)?)));
            }
            if self.peek_op() == Some("+") {
                self.at += 1;
                return self.nested(Self::unary);
            }
            let tok = self.toks.get(self.at).cloned();
            self.at += 1;
            match tok {
                Some(Tok::Num(x)) => Ok(Node::Num(x)),
                Some(Tok::Str(s)) => Ok(Node::Str(s)),
                Some(Tok::Ident(n)) => {
                    if self.names.contains(&n.as_str()) {
                        Ok(Node::Var(n))
                    } else {
                        Err(format!(
                            "{n} is not a parameter ({})",
                            self.names.join(", ")
                        ))
                    }
                }
                Some(Tok::LParen) => {
                    let e = self.nested(Self::or)?;
                    match self.toks.get(self.at) {
                        Some(Tok::RParen) => {
                            self.at += 1;
                            Ok(e)
                        }
                        _ => Err("a ( without its )".into()),
                    }
                }
                Some(t) => Err(format!("unexpected {t:?}")),
                None => Err("it ends too early".into()),
            }
        }
    }

    /// The most tokens a constraint may have (see [`Expr::parse`]).
    pub const MAX_CONSTRAINT_TOKENS: usize = 1000;

    impl Expr {
        /// Parse `text`; only `names` may appear as variables.
        pub fn parse(text: &str, names: &[&str]) -> Result<Expr> {
            let bad = |why: String| Error::Usage(format!("constraint {text:?}: {why}"));
            let toks = lex(text).map_err(bad)?;
            // Evaluating (and dropping) the tree recurses once per operator
            // of a chain: a 40,000-term sum overflowed the stack.
            if toks.len() > MAX_CONSTRAINT_TOKENS {
                return Err(bad(format!(
                    "{} tokens; a constraint has at most {MAX_CONSTRAINT_TOKENS}",
                    toks.len()
                )));
            }
            let mut p = Parser {
                toks,
                at: 0,
                names,
                depth: 0,
            };
            let root = p.or().map_err(bad)?;
            if p.at < p.toks.len() {
                return Err(bad(format!("unexpected {:?}", p.toks[p.at])));
            }
            Ok(Expr {
                text: text.to_string(),
                root,
            })
        }

        pub fn eval(&self, vars: &BTreeMap<String, String>) -> Result<Value> {
            eval(&self.root, vars)
                .map_err(|e| Error::Usage(format!("constraint {:?} at {vars:?}: {e}", self.text)))
        }
    }

    fn num(v: &Value) -> std::result::Result<f64, String> {
        match v {
            Value::Num(x) => Ok(*x),
            Value::Bool(b) => Ok(f64::from(u8::from(*b))),
            Value::Str(s) => Err(format!("{s:?} is not a number")),
        }
    }

    fn eval(n: &Node, vars: &BTreeMap<String, String>) -> std::result::Result<Value, String> {
        Ok(match n {
            Node::Num(x) => Value::Num(*x),
            Node::Str(s) => Value::Str(s.clone()),
            Node::Var(name) => {
                let v = vars
                    .get(name)
                    .ok_or_else(|| format!("{name} has no value"))?;
                match v.parse::<f64>() {
                    Ok(x) if x.is_finite() => Value::Num(x),
                    _ => Value::Str(v.clone()),
                }
            }
            Node::Neg(a) => Value::Num(-num(&eval(a, vars)?)?),
            Node::Not(a) => Value::Bool(!eval(a, vars)?.truthy()),
            Node::Bin(Op::And, a, b) => {
                Value::Bool(eval(a, vars)?.truthy() && eval(b, vars)?.truthy())
            }
            Node::Bin(Op::Or, a, b) => {
                Value::Bool(eval(a, vars)?.truthy() || eval(b, vars)?.truthy())
            }
            Node::Bin(op, a, b) => {
                let (x, y) = (eval(a, vars)?, eval(b, vars)?);
                match op {
                    Op::Eq => Value::Bool(equal(&x, &y)),
                    Op::Ne => Value::Bool(!equal(&x, &y)),
                    _ => {
                        let (x, y) = (num(&x)?, num(&y)?);
                        match op {
                            Op::Add => Value::Num(x + y),
                            Op::Sub => Value::Num(x - y),
                            Op::Mul => Value::Num(x * y),
                            Op::Div | Op::Mod if y == 0.0 => return Err("division by zero".into()),
                            Op::Div => Value::Num(x / y),
                            Op::Mod => Value::Num(x % y),
                            Op::Lt => Value::Bool(x < y),
                            Op::Le => Value::Bool(x <= y),
                            Op::Gt => Value::Bool(x > y),
                            Op::Ge => Value::Bool(x >= y),
                            Op::Eq | Op::Ne | Op::And | Op::Or => unreachable!("handled above"),
                        }
                    }
                }
            }
        })
    }

    fn equal(x: &Value, y: &Value) -> bool {
        match (x, y) {
            (Value::Str(a), Value::Str(b)) => a == b,
            (Value::Str(_), _) | (_, Value::Str(_)) => false,
            _ => num(x).ok() == num(y).ok(),
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn point(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        }

        #[test]
        fn values_lists_and_ranges() {
            assert_eq!(
                parse_values("B", "64,128,256").unwrap(),
                ["64", "128", "256"]
            );
            assert_eq!(
                parse_values("B", "64..256 step 64").unwrap(),
                ["64", "128", "192", "256"]
            );
            assert_eq!(
                parse_values("B", "16..256 x2").unwrap(),
                ["16", "32", "64", "128", "256"]
            );
            assert_eq!(parse_values("S", "2..4").unwrap(), ["2", "3", "4"]);
            assert_eq!(
                parse_values("F", "0.5..1.5 step 0.5").unwrap(),
                ["0.5", "1", "1.5"]
            );
            assert_eq!(
                parse_values("M", "fast,slow,fast").unwrap(),
                ["fast", "slow"]
            );
            for bad in [
                "",
                "4..2",
                "1..8 step 0",
                "1..8 x1",
                "a;b",
                "1..1000000",
                "x y",
            ] {
                assert!(parse_values("B", bad).is_err(), "{bad}");
            }
            assert!(parse_param("B=1,2").is_ok());
            assert!(parse_param("1B=1").is_err());
            assert!(parse_param("CHECK=1").is_err());
        }

        #[test]
        fn constraints_evaluate_without_eval() {
            let names = ["BLOCK", "WARPS", "MODE"];
            let e = |s: &str| Expr::parse(s, &names).unwrap();
            let p = point(&[("BLOCK", "256"), ("WARPS", "8"), ("MODE", "fast")]);
            assert!(e("BLOCK * WARPS <= 2048").eval(&p).unwrap().truthy());
            assert!(!e("BLOCK * WARPS < 2048").eval(&p).unwrap().truthy());
            assert!(e("BLOCK % 64 == 0 and WARPS >= 4")
                .eval(&p)
                .unwrap()
                .truthy());
            assert!(e("BLOCK / WARPS == 32 || MODE == 'slow'")
                .eval(&p)
                .unwrap()
                .truthy());
            assert!(e("not (MODE == \"slow\")").eval(&p).unwrap().truthy());
            assert!(e("-BLOCK + 2 * (WARPS + 1) < 0").eval(&p).unwrap().truthy());
            assert!(e("1e3 < BLOCK * 4").eval(&p).unwrap().truthy());
            assert!(e("!(WARPS != 8)").eval(&p).unwrap().truthy());
            for bad in [
                "BLOCK * ",
                "(BLOCK",
                "OTHER > 1",
                "BLOCK > 1 )",
                "__import__('os')",
                "BLOCK ; 1",
                "'open",
            ] {
                assert!(Expr::parse(bad, &names).is_err(), "{bad}");
            }
            let deep = format!("{}1{}", "(".repeat(500), ")".repeat(500));
            assert!(Expr::parse(&deep, &names).is_err());
            assert!(e("BLOCK / (WARPS - 8) > 1").eval(&p).is_err());
            assert!(e("MODE * 2 > 1").eval(&p).is_err());
        }

        #[test]
        fn points_respect_constraints_in_order() {
            let s = Space::new(
                vec![
                    parse_param("B=64,128,256").unwrap(),
                    parse_param("W=4,8").unwrap(),
                ],
                &["B * W <= 1024".to_string()],
            )
            .unwrap();
            let (pts, excluded) = s.points(100).unwrap();
            let labels: Vec<String> = pts.iter().map(|p| s.label(p)).collect();
            assert_eq!(
                labels,
                [
                    "B=64,W=4",
                    "B=64,W=8",
                    "B=128,W=4",
                    "B=128,W=8",
                    "B=256,W=4"
                ]
            );
            assert_eq!(excluded, 1);
            assert!(s.points(3).is_err());
            assert_eq!(s.substitute("./k {B} {W} {B}", &pts[0]), "./k 64 4 64");
        }

        #[test]
        fn space_files_parse() {
            let text = r#"
# a matmul space
constraints = ["BLOCK_M * BLOCK_N <= 128 * 128",
               "WARPS <= 8"]  # trailing comment
[params]
BLOCK_M = [64, 128]
BLOCK_N = "32..128 x2"
WARPS = 4
MODE = ["a", 'b']
"#;
            let (params, constraints) = parse_space_text(text).unwrap();
            assert_eq!(params.len(), 4);
            assert_eq!(params[1].values, ["32", "64", "128"]);
            assert_eq!(params[2].values, ["4"]);
            assert_eq!(params[3].values, ["a", "b"]);
            assert_eq!(constraints.len(), 2);
            assert!(parse_space_text("[other]\nx = 1").is_err());
            assert!(parse_space_text("[params]\nB = [1, 2").is_err());
            assert!(parse_space_text("B = 1").is_err());
            assert!(parse_space_text("[params]\nB = [\"1;rm\"]").is_err());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triton_configs_and_shell_quoting() {
        assert_eq!(shell_quote("/tmp/a.npy"), "/tmp/a.npy");
        assert_eq!(shell_quote("/tmp/a b'c"), "'/tmp/a b'\\''c'");
        assert_eq!(
            on_gpu(Some("1"), "python3 k.py"),
            "CUDA_VISIBLE_DEVICES=1; export CUDA_VISIBLE_DEVICES; python3 k.py"
        );
        let mut r = SplitMix(1);
        let (a, b) = (r.next(), r.next());
        assert_ne!(a, b);
    }
}
