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
    /// The kept result (`best`) run once more under kopt's tracer: where
    /// the time went after the change, beside the eager baseline's trace.
    /// None when nothing was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_profile: Option<KeptProfile>,
}

/// The kept variant's traced steps beside eager's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct KeptProfile {
    /// The kept candidate or combination (`best`).
    pub variant: String,
    /// The eager baseline's trace, when it recorded one with steps.
    pub eager: Option<StepProfile>,
    /// The kept variant's trace; None when it could not be traced (`error`).
    pub kept: Option<StepProfile>,
    /// Why the kept variant (or eager's side) could not be traced, one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One traced run's steady-state steps: step time, launches, the kernels
/// that carry the time. Kernels replayed inside CUDA graphs are counted per
/// kernel node, by name, with their own time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StepProfile {
    /// The traced run's folder.
    pub run_dir: String,
    /// Steady-state steps the figures cover.
    pub steps: u64,
    /// Wall time per step under the tracer (CUPTI adds host time per launch).
    pub step_ns: f64,
    /// GPU-busy time per step.
    pub busy_per_step_ns: f64,
    /// Host launch calls per step: kernel launches plus graph launches.
    pub launches_per_step: f64,
    /// Of those, graph launches (`cudaGraphLaunch`).
    pub graph_launches_per_step: f64,
    /// Kernels that ran per step (graph nodes included).
    pub kernels_per_step: f64,
    /// The steady state's kernels by time, most first (at most the top
    /// `KERNELS_SHOWN`).
    pub kernels: Vec<StepKernel>,
    /// Kernels beyond the rows above and their share of kernel time.
    pub other_kernels: u64,
    pub other_pct: f64,
}

/// How many kernels a `StepProfile` lists.
pub const KERNELS_SHOWN: usize = 10;

/// A kernel of the steady state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StepKernel {
    /// The name as recorded (mangled).
    pub name: String,
    pub short_name: String,
    pub launches_per_step: f64,
    pub ns_per_step: f64,
    /// Share of the steady state's kernel time.
    pub pct: f64,
    /// Launches that ran as nodes of a replayed CUDA graph.
    pub in_graph: u64,
}
