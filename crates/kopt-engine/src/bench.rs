//! `kopt bench`: variants run interleaved (the order rotates every round, so
//! drift cancels), each timed by the best source available, until the
//! stopping rule holds; then a seeded bootstrap interval of each candidate's
//! median ratio to the first variant, and keep / marginal / revert.
//!
//! The loop ([`run_bench`]) takes a [`Sampler`], so it is tested without
//! spawning processes; [`ProcessSampler`] runs real commands.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kopt_bench::{bootstrap_median_ratio, decide, median, outliers, relative_noise};
// Part of `Measurement`, so front ends name it through the engine.
pub use kopt_bench::StopRule;
use kopt_model::{BenchReport, Timeline, VariantResult, VerdictKind};

use crate::error::{Error, Result};
use crate::progress::Progress;

/// Where samples come from (`--timing`, Python's `timing=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(try_from = "String", into = "&'static str")]
pub enum TimingChoice {
    /// GPU time per NVTX range when the first variant opens repeated ranges,
    /// else the samples it prints, else wall time.
    #[default]
    Auto,
    /// GPU time from kopt's tracer (per range, else the run's kernel time).
    Gpu,
    /// `{"kopt_sample_ns": N}` lines the command prints.
    Reported,
    /// The whole process's wall time.
    Wall,
}

impl TimingChoice {
    /// Its name, as `--timing` and Python's `timing=` take it.
    pub fn name(self) -> &'static str {
        match self {
            TimingChoice::Auto => "auto",
            TimingChoice::Gpu => "gpu",
            TimingChoice::Reported => "reported",
            TimingChoice::Wall => "wall",
        }
    }
}

impl From<TimingChoice> for &'static str {
    fn from(t: TimingChoice) -> &'static str {
        t.name()
    }
}

impl TryFrom<String> for TimingChoice {
    type Error = String;

    fn try_from(name: String) -> std::result::Result<TimingChoice, String> {
        [
            TimingChoice::Auto,
            TimingChoice::Gpu,
            TimingChoice::Reported,
            TimingChoice::Wall,
        ]
        .into_iter()
        .find(|t| t.name() == name)
        .ok_or_else(|| format!("timing {name:?} is not one of auto, gpu, reported, wall"))
    }
}

/// The source a bench settled on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// GPU time per iteration (NVTX / ProfilerStep range) from kopt's tracer.
    GpuRanges,
    /// GPU time of all the run's kernels from kopt's tracer (asked for, never chosen).
    GpuKernels,
    Reported,
    Wall,
}

impl Source {
    pub fn describe(self, range: Option<&str>) -> String {
        match self {
            Source::GpuRanges => format!(
                "GPU time per iteration (kopt's tracer: from the start of the first GPU activity to the end of the last, of the kernels and copies issued in each `{}` range; the first range of each run is warm-up)",
                range.unwrap_or("?")
            ),
            Source::GpuKernels => "GPU kernel time of the whole run (kopt's tracer: sum of kernel durations)".into(),
            Source::Reported => "self-reported samples".into(),
            Source::Wall => "wall time of the whole process".into(),
        }
    }
}

/// How runs are timed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timing {
    pub source: Source,
    /// The NVTX range family for [`Source::GpuRanges`].
    pub range: Option<String>,
    /// The GPU the tracer saw.
    pub device: Option<String>,
    /// kopt's tracer library, for the GPU sources.
    pub tracer: Option<PathBuf>,
}

impl Timing {
    pub fn untraced(source: Source) -> Timing {
        Timing {
            source,
            range: None,
            device: None,
            tracer: None,
        }
    }
}

/// One run of a command.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Run {
    /// Samples, seconds.
    pub samples: Vec<f64>,
    pub wall_s: f64,
    /// Stopped at the time budget before it finished.
    pub cut: bool,
}

/// Runs commands and times them: real processes, or a fake in tests.
pub trait Sampler {
    /// Decide how runs are timed; may run `first` (the first variant) once.
    fn choose(&mut self, choice: TimingChoice, range: Option<&str>, first: &str) -> Result<Timing>;
    /// Run `command` once, stopping it after `budget` (samples printed
    /// before the cut still count).
    fn run(&mut self, command: &str, timing: &Timing, budget: Option<Duration>) -> Result<Run>;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariantSpec {
    pub name: String,
    pub command: String,
}

impl VariantSpec {
    /// `NAME=CMD`, as `-n` takes it.
    pub fn parse(s: &str) -> Result<VariantSpec> {
        s.split_once('=')
            .filter(|(n, c)| !n.trim().is_empty() && !c.trim().is_empty())
            .map(|(n, c)| VariantSpec {
                name: n.trim().to_string(),
                command: c.to_string(),
            })
            .ok_or_else(|| Error::Usage(format!("-n {s}: expected NAME=CMD")))
    }
}

/// How variants are timed and judged: the part of a request `bench` and
/// `tune` share (the CLI's `MeasureArgs`, Python's keyword arguments).
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// The speed-up that counts for KEEP (0.05 = 5%).
    pub threshold: f64,
    /// The slow-down still treated as noise.
    pub noise: f64,
    /// Untimed runs of each variant first.
    pub warmup: u32,
    pub stop: StopRule,
    pub seed: u64,
    pub timing: TimingChoice,
    pub range: Option<String>,
    pub tracer: Option<PathBuf>,
    /// The file every variant writes, compared with the reference's.
    pub check: Option<PathBuf>,
    pub tol: Option<f64>,
}

impl Default for Measurement {
    /// The CLI's defaults.
    fn default() -> Measurement {
        Measurement {
            threshold: 0.05,
            noise: 0.01,
            warmup: 1,
            stop: StopRule::default(),
            seed: 42,
            timing: TimingChoice::Auto,
            range: None,
            tracer: None,
            check: None,
            tol: None,
        }
    }
}

impl Measurement {
    /// The in-process gate's (`kopt.bench` on two Python callables): the
    /// same rule, with a budget for calls timed inside one process, which
    /// need far less time than whole processes.
    pub fn in_process() -> Measurement {
        Measurement {
            warmup: 3,
            stop: StopRule {
                min_samples: 20,
                min_time_s: 0.2,
                max_time_s: 2.0,
                ..StopRule::default()
            },
            ..Measurement::default()
        }
    }

    pub fn validate(&self) -> Result<()> {
        let s = &self.stop;
        let finite_at_least_zero = |x: f64| x >= 0.0 && x.is_finite();
        let valid = self.threshold > 0.0
            && self.threshold < 1.0
            && finite_at_least_zero(self.noise)
            && finite_at_least_zero(s.min_time_s)
            && finite_at_least_zero(s.noise_target)
            && s.max_time_s > 0.0
            && s.max_time_s.is_finite();
        if !valid {
            return Err(Error::Usage(
                "--threshold must be in (0, 1); --noise, --noise-target, --min-time >= 0; --max-time > 0".into(),
            ));
        }
        let most = crate::workload::MAX_SECONDS;
        for (flag, v) in [("--max-time", s.max_time_s), ("--min-time", s.min_time_s)] {
            if v > most {
                return Err(Error::Usage(format!(
                    "{flag} must be at most {most:e} seconds, got {v:e}"
                )));
            }
        }
        if let Some(t) = self.tol {
            if !(t.is_finite() && t >= 0.0) {
                return Err(Error::Usage(format!(
                    "--tol must be a finite number of 0 or more, got {t}"
                )));
            }
        }
        Ok(())
    }
}

/// The measuring options under the names front ends give them, flat: the
/// CLI's flags (`--min-time`) and Python's keywords (`min_time=`), read
/// through serde, where a key left out takes its default and an unknown
/// key is an error. [`MeasureOptions::lower`] is the one place they become a
/// [`Measurement`]; every default, the flags' and the keywords', is
/// `Measurement::default()`'s.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(default, deny_unknown_fields)]
pub struct MeasureOptions {
    /// Speed-up that counts for KEEP (0.05 = 5%)
    #[cfg_attr(feature = "clap", arg(long, default_value_t = Measurement::default().threshold))]
    pub threshold: f64,

    /// Slow-down still treated as noise (REVERT only beyond it)
    #[cfg_attr(feature = "clap", arg(long, default_value_t = Measurement::default().noise))]
    pub noise: f64,

    /// Untimed runs of each variant or config first
    #[cfg_attr(feature = "clap", arg(long, default_value_t = Measurement::default().warmup))]
    pub warmup: u32,

    /// Samples each variant or config needs at least
    #[cfg_attr(feature = "clap", arg(long, default_value_t = Measurement::default().stop.min_samples))]
    pub min_samples: usize,

    /// Seconds each variant or config runs at least
    #[cfg_attr(feature = "clap", arg(long, default_value_t = Measurement::default().stop.min_time_s))]
    pub min_time: f64,

    /// Seconds each variant or config may run at most; kopt bench counts them from a variant's first sample (start-up and warm-up excluded, up to max(60 s, 6x this))
    #[cfg_attr(feature = "clap", arg(long, default_value_t = Measurement::default().stop.max_time_s))]
    pub max_time: f64,

    /// Relative noise at which sampling may stop
    #[cfg_attr(feature = "clap", arg(long, default_value_t = Measurement::default().stop.noise_target))]
    pub noise_target: f64,

    /// Seed of the bootstrap (and of tune's random strategy): results reproduce
    #[cfg_attr(feature = "clap", arg(long, default_value_t = Measurement::default().seed))]
    pub seed: u64,

    /// Timing source: auto (GPU time per NVTX / ProfilerStep range from kopt's tracer when the
    /// command opens repeated ranges, else the samples it prints, else wall time), gpu,
    /// reported, wall
    #[cfg_attr(
        feature = "clap",
        arg(long, value_enum, default_value_t = Measurement::default().timing, value_name = "SOURCE")
    )]
    pub timing: TimingChoice,

    /// NVTX range name that marks one iteration for GPU timing (default: the most repeated)
    #[cfg_attr(feature = "clap", arg(long, value_name = "NAME"))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range: Option<String>,

    /// kopt's tracer library for GPU timing (default: libkopt_tracer.so next to kopt, or $KOPT_TRACER)
    #[cfg_attr(feature = "clap", arg(long, value_name = "PATH"))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tracer: Option<PathBuf>,

    /// Correctness gate: the .npy / .safetensors file each run writes (tune: or {CHECK} in the
    /// template); compared with the first variant's or the baseline config's (a failure is REVERT)
    #[cfg_attr(feature = "clap", arg(long, value_name = "FILE"))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<PathBuf>,

    /// Relative L2 tolerance for --check (default by dtype)
    #[cfg_attr(feature = "clap", arg(long, value_name = "REL_L2"))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tol: Option<f64>,
}

impl Default for MeasureOptions {
    fn default() -> MeasureOptions {
        MeasureOptions::from(&Measurement::default())
    }
}

impl MeasureOptions {
    /// The `Measurement` these options ask for.
    pub fn lower(self) -> Measurement {
        Measurement {
            threshold: self.threshold,
            noise: self.noise,
            warmup: self.warmup,
            stop: StopRule {
                min_samples: self.min_samples,
                min_time_s: self.min_time,
                max_time_s: self.max_time,
                noise_target: self.noise_target,
            },
            seed: self.seed,
            timing: self.timing,
            range: self.range,
            tracer: self.tracer,
            check: self.check,
            tol: self.tol,
        }
    }
}

impl From<&Measurement> for MeasureOptions {
    /// A measurement under the front ends' names: `MeasureOptions::default()`
    /// and Python's `measure_defaults()` are the default's.
    fn from(m: &Measurement) -> MeasureOptions {
        MeasureOptions {
            threshold: m.threshold,
            noise: m.noise,
            warmup: m.warmup,
            min_samples: m.stop.min_samples,
            min_time: m.stop.min_time_s,
            max_time: m.stop.max_time_s,
            noise_target: m.stop.noise_target,
            seed: m.seed,
            timing: m.timing,
            range: m.range.clone(),
            tracer: m.tracer.clone(),
            check: m.check.clone(),
            tol: m.tol,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct BenchRequest {
    /// The first is the baseline.
    pub variants: Vec<VariantSpec>,
    pub measure: Measurement,
    /// Record the verdict in the journal with this hypothesis.
    pub journal: Option<String>,
    pub journal_file: PathBuf,
    pub db: PathBuf,
}

impl BenchRequest {
    /// A request with the CLI's defaults.
    pub fn new(variants: Vec<VariantSpec>) -> BenchRequest {
        let paths = crate::record::RecordPaths::current();
        BenchRequest {
            variants,
            measure: Measurement::default(),
            journal: None,
            journal_file: paths.journal,
            db: paths.db,
        }
    }

    pub fn validate(&self) -> Result<()> {
        if self.variants.len() < 2 {
            return Err(Error::Usage(
                "give --baseline and --candidate, or at least two -n NAME=CMD variants".into(),
            ));
        }
        let mut names: Vec<&str> = self.variants.iter().map(|v| v.name.as_str()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::Usage(format!(
                "variant name {} is given twice",
                w[0]
            )));
        }
        self.measure.validate()?;
        if self.journal.as_deref().is_some_and(|h| h.trim().is_empty()) {
            return Err(Error::Usage("--journal needs a hypothesis".into()));
        }
        Ok(())
    }
}

/// Samples kept per variant: a program printing samples without end must
/// not grow memory or the bootstrap without bound.
pub use kopt_bench::MAX_SAMPLES;

struct Variant {
    name: String,
    command: String,
    samples: Vec<f64>,
    /// Seconds spent in timed runs (the stopping rule's clock).
    spent: f64,
    /// Seconds spent in every run, warm-up included (bounds the runs
    /// before the first sample).
    used: f64,
    /// The longest run so far, in seconds.
    longest: f64,
    /// A run was cut at the per-run bound after giving samples: no more runs.
    ended: bool,
    /// A streaming run was cut at its budget before any sample: the next
    /// one runs to its end.
    full_run: bool,
    correct: Option<bool>,
    check_problems: Vec<String>,
}

/// How long a run before a variant's first sample may take: start-up and
/// warm-up are outside --max-time, but a program that never gives a
/// sample must still end.
pub fn first_sample_wait(max_time_s: f64) -> f64 {
    (6.0 * max_time_s).max(60.0)
}

/// The measuring loop: timing choice, warm-up (and the correctness gate),
/// interleaved rounds until the stopping rule holds, then the verdicts.
pub fn run_bench(
    req: &BenchRequest,
    sampler: &mut dyn Sampler,
    progress: &dyn Progress,
) -> Result<BenchReport> {
    req.validate()?;
    let mut vs: Vec<Variant> = req
        .variants
        .iter()
        .map(|v| Variant {
            name: v.name.clone(),
            command: v.command.clone(),
            samples: Vec::new(),
            spent: 0.0,
            used: 0.0,
            longest: 0.0,
            ended: false,
            full_run: false,
            correct: None,
            check_problems: Vec::new(),
        })
        .collect();
    let timing = sampler.choose(
        req.measure.timing,
        req.measure.range.as_deref(),
        &vs[0].command,
    )?;
    let rule = StopRule {
        min_samples: req.measure.stop.min_samples.max(2),
        ..req.measure.stop
    };
    // --max-time bounds sampling, never a run in progress (#37): every
    // run may take up to `first_wait`, the bound that ends a program that
    // never finishes; a run started within the budget finishes, and a
    // variant whose runs are longer than --max-time is sampled until
    // --min-samples, as hyperfine does, with a note. --max-time counts from
    // a variant's first sample for sources giving one sample when a run
    // ends (the process's wall time, its kernels' sum); a source streaming
    // samples within a run (reported, per-range GPU time) counts every
    // sampling run.
    let per_run = matches!(timing.source, Source::Wall | Source::GpuKernels);
    let first_wait = first_sample_wait(rule.max_time_s);
    let whole_run = Some(crate::workload::secs(first_wait));
    // A streaming source's sampling run is cut where its budget ends (its
    // samples so far count); one cut before its first sample is run again
    // to its end once (a program printing its samples as it exits).
    let sampling_budget = |v: &Variant| {
        if per_run || v.full_run {
            whole_run
        } else {
            Some(crate::workload::secs((rule.max_time_s - v.spent).max(0.0)))
        }
    };
    let done = |v: &Variant| {
        v.samples.len() >= MAX_SAMPLES
            || v.ended
            || (rule.should_stop(&v.samples, v.spent)
                && (v.samples.len() >= rule.min_samples || v.longest <= rule.max_time_s))
    };
    let mut outputs = Vec::new();
    for v in vs.iter_mut() {
        // Warm-up is outside --max-time, but bounded as its help says: up
        // to max(60 s, 6 x --max-time) a variant, whatever --warmup asks.
        let mut warm_s = 0.0;
        for _ in 0..req
            .measure
            .warmup
            .max(u32::from(req.measure.check.is_some()))
        {
            if warm_s >= first_wait {
                break;
            }
            let run = sampler.run(&v.command, &timing, whole_run)?;
            warm_s += run.wall_s;
            v.used += run.wall_s;
            if run.cut {
                return Err(Error::WorkloadFailed(format!(
                    "`{}`: its warm-up run had not finished after {:.1} s (a run may take max(60 s, 6 x --max-time)); raise --max-time",
                    v.command, run.wall_s
                )));
            }
            v.longest = v.longest.max(run.wall_s);
        }
        if let Some(path) = &req.measure.check {
            // Fresh output per variant: a stale file must not pass for a new one.
            let tensors = kopt_ingest::tensor::read_tensors(path)
                .map_err(|e| Error::WorkloadFailed(format!("`{}`: {e}", v.command)))?;
            let _ = std::fs::remove_file(path);
            outputs.push(tensors);
        }
    }
    if let Some((reference, rest)) = outputs.split_first() {
        for (v, out) in vs.iter_mut().skip(1).zip(rest) {
            let report = kopt_bench::compare_tensors(reference, out, req.measure.tol, false);
            v.check_problems.extend(report.problems.iter().cloned());
            for t in &report.tensors {
                v.check_problems
                    .extend(t.problems.iter().map(|p| format!("{}: {p}", t.name)));
            }
            v.correct = Some(report.passed);
        }
    }
    let mut round = 0usize;
    while vs.iter().any(|v| !done(v)) {
        let n = vs.len();
        for k in 0..n {
            let v = &mut vs[(k + round) % n];
            if done(v) {
                continue;
            }
            let sampling = !v.samples.is_empty() || !per_run;
            let budget = sampling_budget(v);
            let run = sampler.run(&v.command, &timing, budget)?;
            if let Some(bad) = run
                .samples
                .iter()
                .find(|s| !kopt_bench::sample_s_in_bounds(**s))
            {
                return Err(Error::WorkloadFailed(format!(
                    "`{}` gave a sample of {} s: samples must be positive, finite and {}",
                    v.command,
                    kopt_model::figure::as_read(*bad),
                    kopt_bench::sample_bounds_text()
                )));
            }
            if sampling {
                v.spent += run.wall_s;
            }
            v.used += run.wall_s;
            v.samples.extend(run.samples);
            v.samples.truncate(MAX_SAMPLES);
            if run.cut {
                if v.samples.is_empty() && !per_run && !v.full_run {
                    v.full_run = true;
                    continue;
                }
                if v.samples.is_empty() {
                    let before = if v.longest > 0.0 {
                        format!(" (its warm-up run took {:.1} s)", v.longest)
                    } else {
                        String::new()
                    };
                    return Err(Error::WorkloadFailed(format!(
                        "`{}` gave no sample: one run had not finished after {:.1} s{before}; a run may take max(60 s, 6 x --max-time ({} s)): raise --max-time",
                        v.command, run.wall_s, rule.max_time_s
                    )));
                }
                // Its run was cut at the bound: what it gave is all it gets.
                v.ended = true;
            }
            v.longest = v.longest.max(run.wall_s);
            if v.samples.is_empty() && !per_run && !run.cut {
                return Err(Error::WorkloadFailed(format!(
                    "`{}` ran to its end ({:.1} s) without giving a sample: check the timing source",
                    v.command, run.wall_s
                )));
            }
            if v.samples.is_empty() && per_run && v.used >= first_wait {
                // Runs that finish without a sample: the first-sample wait
                // bounds them as it bounds one long run.
                return Err(Error::WorkloadFailed(format!(
                    "`{}` gave no sample in {:.1} s of runs (one run took {:.1} s); raise --max-time",
                    v.command, v.used, run.wall_s
                )));
            }
        }
        round += 1;
        let counts: Vec<(String, usize)> = vs
            .iter()
            .map(|v| (v.name.clone(), v.samples.len()))
            .collect();
        progress.bench_round(round, &counts);
    }
    progress.finished();
    let mut report = report(req, &vs, &timing);
    report.notes = long_run_notes(&vs, &rule);
    Ok(report)
}

/// A note for each variant sampled past --max-time to reach --min-samples
/// because one run alone was longer than --max-time.
fn long_run_notes(vs: &[Variant], rule: &StopRule) -> Vec<String> {
    vs.iter()
        .filter(|v| v.longest > rule.max_time_s)
        .map(|v| {
            format!(
                "`{}`: one run took {:.1} s, longer than --max-time ({} s): sampled to --min-samples ({} samples, {:.1} s); lower --min-samples for a quicker, less certain verdict",
                v.name,
                v.longest,
                rule.max_time_s,
                v.samples.len(),
                v.spent
            )
        })
        .collect()
}

fn report(req: &BenchRequest, vs: &[Variant], timing: &Timing) -> BenchReport {
    let measured: Vec<Measured> = vs
        .iter()
        .map(|v| Measured {
            name: v.name.clone(),
            command: v.command.clone(),
            samples: v.samples.clone(),
            correct: v.correct,
            check_problems: v.check_problems.clone(),
        })
        .collect();
    let decision = Decision {
        threshold: req.measure.threshold,
        noise: req.measure.noise,
        seed: req.measure.seed,
    };
    decide_all(
        &measured,
        &decision,
        &timing.source.describe(timing.range.as_deref()),
        timing.device.clone(),
    )
}

/// One variant's samples (seconds) and its correctness, ready for verdicts.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub name: String,
    pub command: String,
    pub samples: Vec<f64>,
    pub correct: Option<bool>,
    pub check_problems: Vec<String>,
}

/// What counts as faster, as noise, and the bootstrap's seed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    pub threshold: f64,
    pub noise: f64,
    pub seed: u64,
}

/// Each variant against the first: the seeded bootstrap interval of the
/// median ratio and the keep / marginal / revert verdict (`kopt bench` and
/// `kopt optimize` decide the same way).
pub fn decide_all(
    vs: &[Measured],
    d: &Decision,
    source: &str,
    device: Option<String>,
) -> BenchReport {
    let base_samples = vs.first().map(|b| b.samples.as_slice()).unwrap_or_default();
    let base_median = median(base_samples).unwrap_or(f64::NAN);
    let mut worst = VerdictKind::Keep;
    let variants = vs
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let m = median(&v.samples).unwrap_or(f64::NAN);
            let interval = (i > 0)
                .then(|| bootstrap_median_ratio(base_samples, &v.samples, 2000, 0.95, d.seed))
                .flatten();
            let verdict = interval.map(|iv| decide(&iv, d.threshold, d.noise, v.correct));
            if let Some(vd) = &verdict {
                worst = worst.worst(vd.kind);
            }
            VariantResult {
                name: v.name.clone(),
                command: v.command.clone(),
                source: source.to_string(),
                samples: v.samples.len(),
                values_s: v.samples.clone(),
                outliers: outliers(&v.samples).len(),
                median_s: m,
                relative_noise: relative_noise(&v.samples),
                speedup_vs_first: base_median / m,
                ratio_interval: interval,
                verdict,
                correct: v.correct,
                check_problems: v.check_problems.clone(),
            }
        })
        .collect();
    BenchReport {
        schema: kopt_model::SCHEMA.into(),
        threshold: d.threshold,
        noise: d.noise,
        seed: d.seed,
        device,
        variants,
        verdict: worst,
        notes: Vec::new(),
    }
}

/// Measure with real processes, then record the verdict in the history and,
/// when asked, in the journal.
pub fn bench(req: &BenchRequest, progress: &dyn Progress) -> Result<BenchReport> {
    req.validate()?;
    let mut sampler = ProcessSampler::new(req.measure.tracer.clone())?;
    let report = run_bench(req, &mut sampler, progress)?;
    record(req, &report, progress)?;
    Ok(report)
}

fn record(req: &BenchRequest, r: &BenchReport, progress: &dyn Progress) -> Result<()> {
    let summary = r
        .candidates()
        .iter()
        .map(|v| {
            format!(
                "{}: {}",
                v.name,
                v.verdict.as_ref().map_or("-", |d| d.kind.as_str())
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let command = r
        .variants
        .iter()
        .map(|v| format!("{}={}", v.name, v.command))
        .collect::<Vec<_>>()
        .join(" | ");
    let mut row = crate::record::run_row("bench", command, summary);
    row.device = r.device.clone();
    row.verdict = Some(r.verdict.as_str().into());
    row.report_json = serde_json::to_string(r).ok();
    crate::record::record_run(&req.db, &row, progress);
    if let Some(h) = &req.journal {
        let base = &r.variants[0].name;
        let outcome = r
            .candidates()
            .iter()
            .map(|v| {
                format!(
                    "{}: {:.3}x vs {base} ({})",
                    v.name,
                    v.speedup_vs_first,
                    v.verdict.as_ref().map_or("", |d| d.reason.as_str())
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        let entry = kopt_store::Entry {
            when: crate::run_folder::journal_timestamp(std::time::SystemTime::now()),
            hypothesis: h.clone(),
            prediction: None,
            outcome: Some(outcome),
            verdict: Some(r.verdict.as_str().into()),
            run: Some("kopt bench (see kopt history)".into()),
            change: None,
        };
        crate::record::refuse_planted_link(&req.journal_file)?;
        kopt_store::append_entry(&req.journal_file, &entry)?;
    }
    Ok(())
}

/// Samples a run printed itself: `{"kopt_sample_ns": N}` or
/// `{"kopt_sample_s": x}` lines, in seconds. A sample outside the bound
/// every sample passes (kopt_bench's: 1 ns to 1e13 ns; a 1e-300 ns sample
/// made any candidate a KEEP) is an error naming its line.
pub fn parse_sample_line(line: &str, line_no: u64) -> Result<Option<f64>> {
    if !line.contains("kopt_sample") {
        return Ok(None);
    }
    let Ok(v) = serde_json::from_str::<serde_json::Value>(line.trim()) else {
        return Ok(None);
    };
    let value = v
        .get("kopt_sample_ns")
        .map(|x| (x, 1e9))
        .or_else(|| v.get("kopt_sample_s").map(|x| (x, 1.0)));
    let Some((x, scale)) = value else {
        return Ok(None);
    };
    match x.as_f64().map(|n| n / scale) {
        // Divided, not multiplied by 1e-9: 1000 ns is exactly 1e-6 s.
        Some(s) if kopt_bench::sample_s_in_bounds(s) => Ok(Some(s)),
        _ => Err(Error::WorkloadFailed(format!(
            "stdout line {line_no}: {}: a sample must be a positive, finite time {}",
            kopt_model::clip_chars(line.trim(), 120),
            kopt_bench::sample_bounds_text()
        ))),
    }
}

/// Real processes: `/bin/sh -c COMMAND`, plainly or under kopt's tracer.
pub struct ProcessSampler {
    tracer: Option<PathBuf>,
}

impl ProcessSampler {
    pub fn new(tracer: Option<PathBuf>) -> Result<ProcessSampler> {
        Ok(ProcessSampler { tracer })
    }

    fn locate_tracer(&self) -> Result<PathBuf> {
        Ok(kopt_collect::trace::locate_tracer(self.tracer.as_deref())?)
    }

    /// One traced run: GPU time per range when it opens at least two ranges
    /// of one family, else the run's kernel time; and whether it printed samples.
    fn probe(&self, tracer: PathBuf, range: Option<&str>, first: &str) -> Result<(Timing, bool)> {
        let run = run_traced(first, &tracer, None)?;
        // The first rank stands for the job in choosing the source.
        let t = run.timeline.as_ref().and_then(|ranks| ranks.first());
        let ranges = t.map(|t| t.iteration_ranges(range)).unwrap_or_default();
        let family =
            (ranges.len() >= 2).then(|| kopt_model::range_family(&ranges[0].name).to_string());
        let timing = Timing {
            source: if family.is_some() {
                Source::GpuRanges
            } else {
                Source::GpuKernels
            },
            range: family.or_else(|| range.map(str::to_string)),
            device: t.and_then(|t| t.device_name.clone()),
            tracer: Some(tracer),
        };
        Ok((timing, !run.reported.is_empty()))
    }
}

impl Sampler for ProcessSampler {
    fn choose(&mut self, choice: TimingChoice, range: Option<&str>, first: &str) -> Result<Timing> {
        let reported_or_wall = |reported: bool| {
            Timing::untraced(if reported {
                Source::Reported
            } else {
                Source::Wall
            })
        };
        Ok(match choice {
            TimingChoice::Gpu => {
                let (timing, _) = self.probe(self.locate_tracer()?, range, first)?;
                if timing.source == Source::GpuKernels && range.is_some() {
                    return Err(Error::WorkloadFailed(format!(
                        "`{first}` opened fewer than two `{}` ranges under kopt's tracer",
                        range.unwrap_or("")
                    )));
                }
                timing
            }
            TimingChoice::Reported => Timing::untraced(Source::Reported),
            TimingChoice::Wall => Timing::untraced(Source::Wall),
            // The traced run also shows whether the program prints samples: no second run.
            TimingChoice::Auto => match self.locate_tracer() {
                Ok(tr) => match self.probe(tr, range, first)? {
                    (timing, _) if timing.source == Source::GpuRanges => timing,
                    (_, reported) => reported_or_wall(reported),
                },
                Err(_) => {
                    let run = run_plain(first, None)?;
                    reported_or_wall(!run.samples.is_empty())
                }
            },
        })
    }

    fn run(&mut self, command: &str, timing: &Timing, budget: Option<Duration>) -> Result<Run> {
        match (timing.source, &timing.tracer) {
            (Source::GpuRanges | Source::GpuKernels, Some(tracer)) => {
                let run = run_traced(command, tracer, budget)?;
                if run.cut {
                    return Ok(Run {
                        samples: Vec::new(),
                        wall_s: run.wall,
                        cut: true,
                    });
                }
                let samples = run
                    .timeline
                    .map(|ranks| {
                        slowest_rank(ranks.iter().map(|t| gpu_samples(t, timing)).collect())
                    })
                    .unwrap_or_default();
                if samples.is_empty() {
                    return Err(Error::WorkloadFailed(format!(
                        "`{command}` gave no GPU samples under kopt's tracer ({}): time it with --timing reported or wall",
                        timing.source.describe(timing.range.as_deref())
                    )));
                }
                Ok(Run {
                    samples,
                    wall_s: run.wall,
                    cut: false,
                })
            }
            (Source::Reported, _) => {
                let run = run_plain(command, budget)?;
                if run.samples.is_empty() && !run.cut {
                    return Err(Error::WorkloadFailed(format!(
                        "`{command}` printed no {{\"kopt_sample_ns\": N}} lines (--timing reported)"
                    )));
                }
                Ok(run)
            }
            _ => {
                let run = run_plain(command, budget)?;
                Ok(Run {
                    samples: if run.cut {
                        Vec::new()
                    } else {
                        vec![run.wall_s]
                    },
                    ..run
                })
            }
        }
    }
}

/// Run `/bin/sh -c command` once (kopt-collect's process-group runner),
/// reading its samples as they are printed; past `budget` its process group
/// is killed and the run is `cut`.
fn run_plain(command: &str, budget: Option<Duration>) -> Result<Run> {
    use kopt_collect::runner::{run_group, GroupError, GroupSpec, Stop};

    let mut samples = Vec::new();
    let mut bad = None;
    let mut on_stdout = |n: u64, line: &[u8]| {
        if bad.is_some() || samples.len() >= MAX_SAMPLES {
            return; // keep draining the pipe so the program is not blocked
        }
        match parse_sample_line(&String::from_utf8_lossy(line), n) {
            Ok(Some(s)) => samples.push(s),
            Ok(None) => {}
            Err(e) => bad = Some(e),
        }
    };
    let mut tail = std::collections::VecDeque::new();
    let mut on_stderr = |_: u64, line: &[u8]| {
        if tail.len() == 3 {
            tail.pop_front();
        }
        tail.push_back(String::from_utf8_lossy(line).into_owned());
    };
    let args = ["-c".to_string(), command.to_string()];
    let exit = run_group(
        &GroupSpec {
            program: Path::new("/bin/sh"),
            args: &args,
            env: &[],
            timeout: budget,
            stop: Stop::Kill,
            max_line: MAX_LINE,
            max_output: None,
        },
        &mut on_stdout,
        &mut on_stderr,
    )
    .map_err(|e| match e {
        GroupError::Spawn { source, .. } => {
            Error::WorkloadFailed(format!("cannot start /bin/sh: {source}"))
        }
        e => Error::WorkloadFailed(format!("`{command}`: {e}")),
    })?;
    let tail = tail.into_iter().collect::<Vec<_>>().join(" | ");
    if !exit.timed_out && !exit.status.success() {
        return Err(Error::WorkloadFailed(format!(
            "`{command}` failed ({}): {tail}",
            exit.status
        )));
    }
    let samples = bad.map_or(Ok(samples), Err);
    Ok(Run {
        samples: samples.map_err(|e| e.context(format!("`{command}`")))?,
        wall_s: exit.elapsed.as_secs_f64(),
        cut: exit.timed_out,
    })
}

/// Longest line kept whole; the rest of a longer one is skipped (a program
/// printing without newlines must not grow memory without bound).
const MAX_LINE: usize = 64 * 1024;

/// What one run under kopt's tracer gave.
struct TracedRun {
    /// None when the program wrote no trace (it never used CUDA). One
    /// timeline per rank when a launcher started several ranked processes.
    timeline: Option<Vec<Timeline>>,
    /// The samples it printed itself.
    reported: Vec<f64>,
    wall: f64,
    cut: bool,
}

fn run_traced(command: &str, tracer: &Path, budget: Option<Duration>) -> Result<TracedRun> {
    let dir = tempfile::tempdir().map_err(|e| Error::Output(format!("temporary folder: {e}")))?;
    let workload = kopt_collect::Workload {
        argv: vec!["/bin/sh".into(), "-c".into(), command.into()],
        gpu: None,
        timeout: budget,
    };
    let reported = std::sync::Mutex::new(Vec::new());
    let lines = std::sync::atomic::AtomicU64::new(0);
    let bad = std::sync::Mutex::new(None);
    let keep = |stream: kopt_collect::Stream, line: &str| {
        if stream != kopt_collect::Stream::Stdout {
            return;
        }
        let n = lines.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        match parse_sample_line(line, n) {
            Ok(Some(s)) => {
                // As a plain run's: at most MAX_SAMPLES kept, however many printed.
                let mut kept = reported.lock().unwrap_or_else(|e| e.into_inner());
                if kept.len() < MAX_SAMPLES {
                    kept.push(s);
                }
            }
            Ok(None) => {}
            Err(e) => {
                bad.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get_or_insert(e);
            }
        }
    };
    let t = Instant::now();
    let traced = kopt_collect::trace::run_traced(&workload, tracer, None, dir.path(), &keep);
    let wall = t.elapsed().as_secs_f64();
    if let Some(e) = bad.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e.context(format!("`{command}`")));
    }
    let reported = reported.into_inner().unwrap_or_else(|e| e.into_inner());
    match traced {
        Ok(run) => Ok(TracedRun {
            timeline: Some(rank_timelines(&run.trace, dir.path())?),
            reported,
            wall,
            cut: false,
        }),
        Err(kopt_collect::trace::TraceError::NoTrace(..)) => Ok(TracedRun {
            timeline: None,
            reported,
            wall,
            cut: false,
        }),
        Err(kopt_collect::trace::TraceError::Timeout(_)) if budget.is_some() => Ok(TracedRun {
            timeline: None,
            reported,
            wall,
            cut: true,
        }),
        Err(e) => {
            // The error names the run's log: keep it.
            let _ = dir.keep();
            Err(Error::from(e).context(format!("`{command}`")))
        }
    }
}

/// The trace's timeline, or each rank's when the run folder holds the
/// ranks of a launched job (torchrun): never merged into one.
fn rank_timelines(trace: &Path, dir: &Path) -> Result<Vec<Timeline>> {
    match kopt_ingest::ranks::kopt_trace_ranks(dir)? {
        Some(files) => files
            .iter()
            .map(|f| kopt_ingest::ranks::read_rank_trace(f).map_err(Error::from))
            .collect(),
        None => Ok(vec![kopt_ingest::read_kopt_trace_set(trace)?.timeline]),
    }
}

/// A job's samples from its ranks': the n-th step takes as long as its
/// slowest rank's n-th step (the ranks wait for each other), over the
/// steps every rank has.
fn slowest_rank(per_rank: Vec<Vec<f64>>) -> Vec<f64> {
    let n = per_rank.iter().map(Vec::len).min().unwrap_or(0);
    (0..n)
        .map(|i| per_rank.iter().map(|r| r[i]).fold(0.0, f64::max))
        .collect()
}

/// Samples (seconds) of one traced run for a GPU source.
fn gpu_samples(t: &Timeline, timing: &Timing) -> Vec<f64> {
    match timing.source {
        Source::GpuRanges => {
            let per = kopt_analyze::timeline::gpu_time_per_range(t, timing.range.as_deref())
                .map(|(_, v)| v)
                .unwrap_or_default();
            let skip = usize::from(per.len() >= 3);
            per.get(skip..)
                .unwrap_or_default()
                .iter()
                .map(|ns| *ns as f64 * 1e-9)
                .collect()
        }
        _ => {
            let ns: i64 = t
                .activities
                .iter()
                .filter(|a| a.kind == kopt_model::ActivityKind::Kernel)
                .map(|a| a.duration_ns())
                .sum();
            if ns > 0 {
                vec![ns as f64 * 1e-9]
            } else {
                Vec::new()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::HashMap;

    #[test]
    fn a_jobs_step_is_its_slowest_ranks() {
        let job = slowest_rank(vec![vec![1.0, 5.0, 2.0], vec![3.0, 1.0]]);
        assert_eq!(
            job,
            vec![3.0, 5.0],
            "per step the slowest, over the steps both ran"
        );
        assert_eq!(slowest_rank(vec![vec![2.0, 4.0]]), vec![2.0, 4.0]);
        assert!(slowest_rank(Vec::new()).is_empty());
    }

    #[test]
    fn measure_options_lower_to_the_default_measurement_unless_given() {
        assert_eq!(MeasureOptions::default().lower(), Measurement::default());
        let given: MeasureOptions = serde_json::from_value(serde_json::json!({
            "min_time": 0, "max_time": 3, "timing": "wall", "tol": 0.01
        }))
        .unwrap();
        let m = given.lower();
        assert_eq!((m.stop.min_time_s, m.stop.max_time_s), (0.0, 3.0));
        assert_eq!((m.timing, m.tol), (TimingChoice::Wall, Some(0.01)));
        let d = Measurement::default();
        assert_eq!(
            (m.threshold, m.warmup, m.stop.min_samples),
            (d.threshold, d.warmup, d.stop.min_samples)
        );
    }

    #[test]
    fn the_in_process_measurement_keeps_the_rule_and_shortens_the_budget() {
        let (gate, d) = (Measurement::in_process(), Measurement::default());
        gate.validate().unwrap();
        assert_eq!(
            (gate.threshold, gate.noise, gate.seed),
            (d.threshold, d.noise, d.seed)
        );
        assert_eq!(gate.stop.noise_target, d.stop.noise_target);
        assert!(
            gate.stop.max_time_s < d.stop.max_time_s && gate.stop.min_time_s < d.stop.min_time_s
        );
    }

    #[test]
    fn measure_options_name_what_they_refuse() {
        let unknown = serde_json::from_value::<MeasureOptions>(serde_json::json!({"max_tme": 3}));
        assert!(unknown.unwrap_err().to_string().contains("max_tme"));
        let timing = serde_json::from_value::<MeasureOptions>(serde_json::json!({"timing": "cpu"}));
        assert!(timing
            .unwrap_err()
            .to_string()
            .contains(r#"timing "cpu" is not one of auto, gpu, reported, wall"#));
    }

    #[test]
    fn measure_options_serialize_under_the_keyword_names() {
        let v = serde_json::to_value(MeasureOptions::default()).unwrap();
        // The unset paths and tolerance are left out, as Python's
        // `measure_defaults()` leaves them.
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "max_time",
                "min_samples",
                "min_time",
                "noise",
                "noise_target",
                "seed",
                "threshold",
                "timing",
                "warmup"
            ]
        );
        assert_eq!(v["timing"], "auto");
    }

    /// Commands are names of synthetic distributions: `NAME` gives samples
    /// around `times[NAME]` with ±0.2% noise (quiet enough for the stopping rule), one per run, each run taking
    /// `run_s` of the bench's clock. Every call is logged.
    struct FakeSampler {
        times: HashMap<&'static str, f64>,
        run_s: f64,
        rng: fastrand::Rng,
        log: RefCell<Vec<String>>,
        cut_after: Option<usize>,
        source: Source,
    }

    impl FakeSampler {
        fn new(times: &[(&'static str, f64)]) -> FakeSampler {
            FakeSampler {
                times: times.iter().copied().collect(),
                run_s: 0.01,
                rng: fastrand::Rng::with_seed(7),
                log: RefCell::new(Vec::new()),
                cut_after: None,
                source: Source::Wall,
            }
        }
    }

    impl Sampler for FakeSampler {
        fn choose(&mut self, _: TimingChoice, _: Option<&str>, _: &str) -> Result<Timing> {
            // One sample when a run ends, as the wall time of a process.
            Ok(Timing::untraced(self.source))
        }

        fn run(&mut self, command: &str, _: &Timing, budget: Option<Duration>) -> Result<Run> {
            self.log.borrow_mut().push(command.to_string());
            let Some(t) = self.times.get(command) else {
                return Err(Error::WorkloadFailed(format!(
                    "`{command}` failed (exit 1)"
                )));
            };
            let runs = self.log.borrow().len();
            let cut = self.cut_after.is_some_and(|n| runs > n)
                || budget.is_some_and(|b| b.as_secs_f64() < self.run_s);
            let samples = if cut {
                Vec::new()
            } else {
                vec![t * (1.0 + 0.004 * (self.rng.f64() - 0.5))]
            };
            Ok(Run {
                samples,
                wall_s: self.run_s,
                cut,
            })
        }
    }

    fn request(variants: &[(&str, &str)]) -> BenchRequest {
        let mut r = BenchRequest::new(
            variants
                .iter()
                .map(|(n, c)| VariantSpec {
                    name: n.to_string(),
                    command: c.to_string(),
                })
                .collect(),
        );
        r.db = PathBuf::from("/nonexistent/never-written.db");
        r.measure.stop.min_time_s = 0.0;
        r
    }

    #[test]
    fn a_faster_candidate_is_kept_and_a_slower_one_reverted() {
        let mut s = FakeSampler::new(&[("base", 1.0e-3), ("fast", 0.8e-3), ("slow", 1.2e-3)]);
        let req = request(&[("base", "base"), ("fast", "fast"), ("slow", "slow")]);
        let r = run_bench(&req, &mut s, &crate::Silent).unwrap();
        assert_eq!(r.variants.len(), 3);
        assert!(r.variants[0].verdict.is_none());
        assert_eq!(
            r.variants[1].verdict.as_ref().unwrap().kind,
            VerdictKind::Keep
        );
        assert_eq!(
            r.variants[2].verdict.as_ref().unwrap().kind,
            VerdictKind::Revert
        );
        assert_eq!(r.verdict, VerdictKind::Revert);
        let speedup = r.variants[1].speedup_vs_first;
        assert!((1.2..1.3).contains(&speedup), "{speedup}");
        for v in &r.variants {
            assert!(v.samples >= 10, "{}: {}", v.name, v.samples);
            assert_eq!(v.samples, v.values_s.len());
        }
    }

    #[test]
    fn rounds_interleave_and_rotate() {
        let mut s = FakeSampler::new(&[("a", 1.0), ("b", 1.0), ("c", 1.0)]);
        let mut req = request(&[("a", "a"), ("b", "b"), ("c", "c")]);
        req.measure.warmup = 0;
        run_bench(&req, &mut s, &crate::Silent).unwrap();
        let log = s.log.borrow();
        // Round 0: a b c; round 1: b c a; round 2: c a b.
        assert_eq!(&log[..9], ["a", "b", "c", "b", "c", "a", "c", "a", "b"]);
    }

    #[test]
    fn warmup_runs_come_first_and_are_not_samples() {
        let mut s = FakeSampler::new(&[("a", 1.0), ("b", 1.0)]);
        let mut req = request(&[("a", "a"), ("b", "b")]);
        req.measure.warmup = 2;
        let r = run_bench(&req, &mut s, &crate::Silent).unwrap();
        let log = s.log.borrow();
        assert_eq!(&log[..4], ["a", "a", "b", "b"]);
        let total_samples: usize = r.variants.iter().map(|v| v.samples).sum();
        assert_eq!(log.len(), total_samples + 4);
    }

    /// `--warmup 1000` of 7 s runs does not take two hours: warm-up stops at the
    /// bound `--max-time`'s help gives, max(60 s, 6 x --max-time) (#39).
    #[test]
    fn warmup_is_bounded_by_the_first_sample_wait() {
        let mut s = FakeSampler::new(&[("a", 1.0), ("b", 1.0)]);
        s.run_s = 7.0;
        let mut req = request(&[("a", "a"), ("b", "b")]);
        req.measure.warmup = 1000;
        req.measure.stop.max_time_s = 5.0;
        run_bench(&req, &mut s, &crate::Silent).unwrap();
        let log = s.log.borrow();
        // 60 s of 7 s runs: 9 warm-up runs a variant, then its samples.
        let warm = log.iter().take_while(|c| *c == "a").count();
        assert_eq!(warm, 9, "{:?}", &log[..log.len().min(20)]);
    }

    #[test]
    fn the_stopping_rule_bounds_the_time() {
        let mut s = FakeSampler::new(&[("a", 1.0), ("b", 1.0)]);
        s.run_s = 0.4;
        let mut req = request(&[("a", "a"), ("b", "b")]);
        req.measure.warmup = 0;
        req.measure.stop.max_time_s = 2.0;
        req.measure.stop.noise_target = 0.0; // never quiet enough: only the clock stops it
        let r = run_bench(&req, &mut s, &crate::Silent).unwrap();
        for v in &r.variants {
            // The first sample's run, then 2 s of runs.
            assert_eq!(v.samples, 6, "{}", v.name);
        }
    }

    #[test]
    fn a_run_cut_at_the_budget_ends_the_variant_without_failing() {
        let mut s = FakeSampler::new(&[("a", 1.0), ("b", 1.0)]);
        s.cut_after = Some(8);
        let mut req = request(&[("a", "a"), ("b", "b")]);
        req.measure.warmup = 0;
        req.measure.stop.noise_target = 0.0;
        let r = run_bench(&req, &mut s, &crate::Silent).unwrap();
        assert!(r.variants.iter().all(|v| v.samples == 4));
    }

    #[test]
    fn runs_longer_than_max_time_are_sampled_to_min_samples() {
        // #37: --max-time never cuts a run; 5 s runs under a 1 s --max-time
        // give --min-samples samples each and a note saying so.
        let mut s = FakeSampler::new(&[("a", 1.0), ("b", 1.0)]);
        s.run_s = 5.0;
        let mut req = request(&[("a", "a"), ("b", "b")]);
        req.measure.stop.max_time_s = 1.0;
        req.measure.stop.min_samples = 4;
        let r = run_bench(&req, &mut s, &crate::Silent).unwrap();
        assert!(r.variants[1].verdict.is_some());
        assert!(r.variants.iter().all(|v| v.samples == 4), "{r:?}");
        assert_eq!(r.notes.len(), 2, "{:?}", r.notes);
        assert!(
            r.notes[0].contains("one run took 5.0 s, longer than --max-time (1 s)"),
            "{:?}",
            r.notes
        );
    }

    #[test]
    fn an_eleven_second_program_gets_a_verdict_with_default_flags() {
        // The case of #37: one run of 11 s against the default 10 s
        // --max-time, warm-up included, for both kinds of timing source.
        for source in [Source::Wall, Source::Reported] {
            let mut s = FakeSampler::new(&[("a", 1.0), ("b", 0.5)]);
            s.source = source;
            s.run_s = 11.0;
            let req = request(&[("a", "a"), ("b", "b")]);
            let r = run_bench(&req, &mut s, &crate::Silent).unwrap();
            let min = Measurement::default().stop.min_samples;
            assert!(r.variants.iter().all(|v| v.samples == min), "{r:?}");
            assert_eq!(
                r.variants[1].verdict.as_ref().unwrap().kind,
                VerdictKind::Keep
            );
            assert_eq!(r.notes.len(), 2);
        }
    }

    #[test]
    fn runs_within_max_time_add_no_note() {
        let mut s = FakeSampler::new(&[("a", 1.0), ("b", 1.0)]);
        let req = request(&[("a", "a"), ("b", "b")]);
        let r = run_bench(&req, &mut s, &crate::Silent).unwrap();
        assert!(r.notes.is_empty(), "{:?}", r.notes);
    }

    #[test]
    fn a_streaming_run_that_ends_without_a_sample_is_an_error() {
        let mut s = FakeSampler::new(&[("a", 1.0), ("b", 1.0)]);
        s.source = Source::Reported;
        s.run_s = 5.0;
        s.cut_after = Some(0);
        let mut req = request(&[("a", "a"), ("b", "b")]);
        req.measure.warmup = 0;
        let err = run_bench(&req, &mut s, &crate::Silent)
            .unwrap_err()
            .to_string();
        assert!(err.contains("gave no sample"), "{err}");
    }

    #[test]
    fn a_run_past_the_first_sample_wait_is_an_error_saying_how_long_it_ran() {
        let mut s = FakeSampler::new(&[("a", 1.0), ("b", 1.0)]);
        s.run_s = 70.0;
        let mut req = request(&[("a", "a"), ("b", "b")]);
        req.measure.warmup = 0;
        let err = run_bench(&req, &mut s, &crate::Silent)
            .unwrap_err()
            .to_string();
        assert!(err.contains("had not finished after 70.0 s"), "{err}");
        assert!(err.contains("--max-time"), "{err}");
        // In the warm-up too.
        req.measure.warmup = 1;
        let err = run_bench(&req, &mut s, &crate::Silent)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("warm-up run had not finished after 70.0 s"),
            "{err}"
        );
    }

    #[test]
    fn a_failing_variant_fails_the_bench() {
        let mut s = FakeSampler::new(&[("a", 1.0)]);
        let req = request(&[("a", "a"), ("broken", "broken")]);
        let err = run_bench(&req, &mut s, &crate::Silent).unwrap_err();
        assert!(matches!(err, Error::WorkloadFailed(_)));
        assert!(err.to_string().contains("`broken`"), "{err}");
    }

    #[test]
    fn non_positive_samples_are_refused() {
        struct Bad;
        impl Sampler for Bad {
            fn choose(&mut self, _: TimingChoice, _: Option<&str>, _: &str) -> Result<Timing> {
                Ok(Timing::untraced(Source::Reported))
            }
            fn run(&mut self, _: &str, _: &Timing, _: Option<Duration>) -> Result<Run> {
                Ok(Run {
                    samples: vec![-5e-9],
                    wall_s: 0.01,
                    cut: false,
                })
            }
        }
        let req = request(&[("a", "a"), ("b", "b")]);
        let err = run_bench(&req, &mut Bad, &crate::Silent).unwrap_err();
        assert!(err.to_string().contains("positive"), "{err}");
    }

    #[test]
    fn sample_lines_are_parsed_and_checked() {
        assert_eq!(
            parse_sample_line("{\"kopt_sample_ns\": 1500}", 1).unwrap(),
            Some(1.5e-6)
        );
        assert_eq!(
            parse_sample_line("{\"kopt_sample_s\": 0.25}", 1).unwrap(),
            Some(0.25)
        );
        assert_eq!(parse_sample_line("hello", 1).unwrap(), None);
        for bad in [
            "{\"kopt_sample_ns\": -5}",
            "{\"kopt_sample_ns\": 0}",
            "{\"kopt_sample_s\": \"x\"}",
            // #39: `--timing reported` took 1e308 s as a sample.
            "{\"kopt_sample_s\": 1e308}",
            "{\"kopt_sample_ns\": 1e300}",
            "{\"kopt_sample_s\": 10001}",
            // Round eight: a sample under a nanosecond made a KEEP.
            "{\"kopt_sample_ns\": 1e-300}",
            "{\"kopt_sample_ns\": 0.5}",
            "{\"kopt_sample_s\": 1e-10}",
        ] {
            let err = parse_sample_line(bad, 7).unwrap_err().to_string();
            assert!(
                err.contains("stdout line 7") && err.contains("between 1 ns and 1e13 ns"),
                "{err}"
            );
        }
        // The edges are inside: 1 ns and 1e13 ns.
        let edge = |l: &str| parse_sample_line(l, 1).unwrap();
        assert_eq!(edge("{\"kopt_sample_ns\": 1}"), Some(1e-9));
        assert_eq!(edge("{\"kopt_sample_s\": 1e-9}"), Some(1e-9));
        assert_eq!(edge("{\"kopt_sample_ns\": 1e13}"), Some(1e4));
        assert_eq!(edge("{\"kopt_sample_s\": 10000}"), Some(1e4));
    }

    #[test]
    fn requests_are_validated() {
        let ok = request(&[("a", "a"), ("b", "b")]);
        assert!(ok.validate().is_ok());
        type Mutation = Box<dyn Fn(&mut BenchRequest)>;
        let cases: Vec<(Mutation, &str)> = vec![
            (Box::new(|r| r.variants.truncate(1)), "at least two"),
            (Box::new(|r| r.variants[1].name = "a".into()), "twice"),
            (Box::new(|r| r.measure.threshold = 1.5), "--threshold"),
            (Box::new(|r| r.measure.stop.max_time_s = 0.0), "--max-time"),
            (Box::new(|r| r.measure.tol = Some(-1.0)), "--tol"),
            (Box::new(|r| r.journal = Some(" ".into())), "--journal"),
        ];
        for (mutate, expected) in cases {
            let mut r = ok.clone();
            mutate(&mut r);
            let err = r.validate().unwrap_err();
            assert!(err.to_string().contains(expected), "{err} / {expected}");
        }
        assert!(VariantSpec::parse("noequals").is_err());
        assert_eq!(VariantSpec::parse("x=sleep 1").unwrap().command, "sleep 1");
    }

    #[test]
    fn real_processes_are_cut_at_the_budget() {
        let t = Instant::now();
        let run = run_plain(
            "echo '{\"kopt_sample_ns\": 1000}'; sleep 30",
            Some(Duration::from_millis(300)),
        )
        .unwrap();
        assert!(run.cut);
        assert_eq!(run.samples, vec![1e-6]);
        assert!(t.elapsed() < Duration::from_secs(20));
        let err = run_plain("echo oops >&2; exit 7", None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("oops"), "{err}");
    }
}
