//! What crosses between the sweep and its workers: a trial's job and
//! outcome, the final comparison's job, and the timing and stopping rule
//! they carry. Serializable, so an executor may send them to another host
//! (the Python package's Ray executor does).

use std::path::PathBuf;

use kopt_bench::StopRule;
use serde::{Deserialize, Serialize};

use crate::bench::{Source, Timing, TimingChoice};
use crate::error::{Error, Result};

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

pub(super) fn choice_name(c: TimingChoice) -> &'static str {
    match c {
        TimingChoice::Auto => "auto",
        TimingChoice::Gpu => "gpu",
        TimingChoice::Reported => "reported",
        TimingChoice::Wall => "wall",
    }
}

pub(super) fn parse_choice(s: &str) -> Result<TimingChoice> {
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

pub(super) fn source_name(s: Source) -> &'static str {
    match s {
        Source::GpuRanges => "gpu_ranges",
        Source::GpuKernels => "gpu_kernels",
        Source::Reported => "reported",
        Source::Wall => "wall",
    }
}

pub(super) fn parse_source(s: &str) -> Option<Source> {
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
    pub(super) fn timing(&self) -> Result<Option<Timing>> {
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
