//! What `kopt optimize` did: the baseline's diagnosis in brief, each
//! candidate with why it was tried or skipped, its correctness against
//! eager, its measured and predicted speed-up, and the verdict.

use serde::{Deserialize, Serialize};

use crate::compare::CompareReport;
use crate::{BenchReport, BottleneckClass, Verdict};

/// The baseline as the diagnosis saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Baseline {
    pub primary_component: Option<String>,
    pub primary_type: Option<BottleneckClass>,
    /// GPU busy share of the steady-state window, when a timeline was recorded.
    pub busy_pct: Option<f64>,
    pub launch_bound: bool,
    /// The baseline's run folder (the profile's artifacts).
    pub run_dir: String,
    /// What the diagnosis could not see (no counters, ...).
    pub notes: Vec<String>,
}

/// A candidate that could not be built or run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CandidateFailure {
    /// capture, compile or run.
    pub phase: String,
    /// One line.
    pub error: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CandidateResult {
    /// The candidate's name (graph, channels_last, tf32, ...); a combination
    /// joins its parts with `+`.
    pub name: String,
    /// The single candidates a combination stacks, best first; empty for a
    /// single candidate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<String>,
    /// True when it changes the numerics on purpose (TF32, bf16): checked
    /// with its precision's tolerance, kept only with `--allow-precision`.
    #[serde(default)]
    pub changes_numerics: bool,
    /// The tolerance its outputs were checked with, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerance: Option<String>,
    /// The change a user would make by hand, one line of Python each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_hand: Vec<String>,
    pub description: String,
    /// False when the diagnosis gave no reason to try it.
    pub tried: bool,
    /// Why it was tried or skipped, from the diagnosis.
    pub reason: String,
    /// The diagnosis's predicted speed-up over eager, where it makes one.
    pub predicted_speedup: Option<f64>,
    /// How the prediction was made.
    pub prediction_model: Option<String>,
    pub failure: Option<CandidateFailure>,
    /// Its outputs against eager's on fresh inputs.
    pub correctness: Option<CompareReport>,
    /// Median eager time / median candidate time.
    pub measured_speedup: Option<f64>,
    /// None for a skipped candidate.
    pub verdict: Option<Verdict>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OptimizeReport {
    pub schema: String,
    pub module: String,
    pub script: String,
    pub run_dir: String,
    pub device: Option<String>,
    pub baseline: Baseline,
    pub candidates: Vec<CandidateResult>,
    /// The fastest KEEP candidate or combination, if any.
    pub best: Option<String>,
    /// Whether candidates that change numerics (TF32, bf16) could be kept.
    #[serde(default)]
    pub allow_precision: bool,
    /// Eager and every candidate that ran: the ablation table's data.
    pub ablation: Option<BenchReport>,
}
