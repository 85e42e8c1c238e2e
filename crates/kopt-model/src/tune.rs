//! What `kopt tune` found: every trial of a parameter sweep (measured,
//! rejected by the correctness gate, failed, or dropped by successive
//! halving), the final interleaved comparison of the best configs, and the
//! winner with its speed-up over the baseline config.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{BenchReport, Interval, Verdict};

/// One tunable parameter and the values the sweep tries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TuneParam {
    pub name: String,
    pub values: Vec<String>,
}

/// What became of one trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum TrialStatus {
    /// Measured to the end (the stopping rule held, or it reached the final round).
    Ok,
    /// Dropped by successive halving: slower than the survivors.
    Pruned,
    /// Its output differs from the baseline config's: never chosen.
    Rejected,
    /// It failed, timed out or printed nothing to measure.
    Failed,
}

impl TrialStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TrialStatus::Ok => "ok",
            TrialStatus::Pruned => "pruned",
            TrialStatus::Rejected => "rejected",
            TrialStatus::Failed => "failed",
        }
    }
}

impl std::fmt::Display for TrialStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One configuration of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TrialResult {
    /// `NAME=VALUE,...` in the order the parameters were given.
    pub label: String,
    pub config: BTreeMap<String, String>,
    pub command: String,
    pub status: TrialStatus,
    /// Why it was rejected, failed or pruned.
    pub reason: Option<String>,
    /// Samples, seconds, in the order taken.
    pub values_s: Vec<f64>,
    pub median_s: Option<f64>,
    pub relative_noise: Option<f64>,
    /// Median of the baseline config / median of this one.
    pub speedup_vs_baseline: Option<f64>,
    /// The correctness gate's result against the baseline config.
    pub correct: Option<bool>,
    /// Every sample came from the cache: nothing was run for it.
    pub cached: bool,
    /// Samples measured in this run (the rest came from the cache).
    pub measured_samples: usize,
    /// The GPU (CUDA_VISIBLE_DEVICES) its samples were measured on.
    pub gpu: Option<String>,
    /// Last halving round it took part in (0 for grid and random).
    pub round: usize,
}

/// The best correct config, confirmed by the final interleaved comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TuneWinner {
    pub label: String,
    pub config: BTreeMap<String, String>,
    pub command: String,
    pub median_s: f64,
    /// Baseline median / winner median (above 1 = faster).
    pub speedup_vs_baseline: f64,
    /// Interval of median(winner) / median(baseline); None when the winner is the baseline.
    pub ratio_interval: Option<Interval>,
    pub verdict: Option<Verdict>,
}

/// Everything `kopt tune` measured and decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TuneReport {
    pub schema: String,
    /// The command with `{NAME}` placeholders.
    pub template: String,
    /// The problem the sweep is for (`--key`), part of the cache key.
    pub key: Option<String>,
    pub device: Option<String>,
    pub driver: Option<String>,
    pub kopt_version: String,
    /// grid, random or halving.
    pub strategy: String,
    pub params: Vec<TuneParam>,
    pub constraints: Vec<String>,
    /// Points of the space that satisfy the constraints.
    pub space_size: usize,
    /// Points the constraints excluded.
    pub excluded: usize,
    /// The GPUs the trials ran on (empty: no GPU selection).
    pub gpus: Vec<String>,
    /// How samples were timed, in words.
    pub source: String,
    pub baseline: String,
    /// One per config tried, in the order of the space.
    pub trials: Vec<TrialResult>,
    /// Baseline and the best configs, timed interleaved on one GPU.
    pub final_comparison: Option<BenchReport>,
    pub winner: Option<TuneWinner>,
    /// Trials that ran something in this run, and those the cache answered whole.
    pub measured_trials: usize,
    pub cached_trials: usize,
    /// Samples of all trials (the final comparison's apart).
    pub trial_samples: usize,
    /// Samples of the trials measured in this run.
    pub measured_samples: usize,
    pub final_samples: usize,
    pub final_cached: bool,
    pub wall_s: f64,
    pub notes: Vec<String>,
}

impl TuneReport {
    pub fn trial(&self, label: &str) -> Option<&TrialResult> {
        self.trials.iter().find(|t| t.label == label)
    }

    /// The winner as a `triton.Config(...)` list entry: `num_warps`,
    /// `num_stages`, `num_ctas` (or `WARPS`, `STAGES`...) become keywords,
    /// the other parameters the kernel's meta-parameters.
    pub fn triton_config(&self) -> Option<String> {
        let w = self.winner.as_ref()?;
        let mut meta = Vec::new();
        let mut kw = Vec::new();
        let literal = |v: &str| {
            if v.parse::<f64>().is_ok() || v == "True" || v == "False" || v == "None" {
                v.to_string()
            } else {
                format!("{v:?}")
            }
        };
        for p in &self.params {
            let Some(v) = w.config.get(&p.name) else {
                continue;
            };
            let lower = p.name.to_ascii_lowercase();
            let keyword = match lower.trim_start_matches("num_") {
                "warps" => Some("num_warps"),
                "stages" => Some("num_stages"),
                "ctas" => Some("num_ctas"),
                _ => None,
            };
            match keyword {
                Some(k) => kw.push(format!("{k}={}", literal(v))),
                None => meta.push(format!("{:?}: {}", p.name, literal(v))),
            }
        }
        let mut s = format!("triton.Config({{{}}}", meta.join(", "));
        for k in kw {
            s.push_str(", ");
            s.push_str(&k);
        }
        s.push_str("),");
        Some(s)
    }
}
