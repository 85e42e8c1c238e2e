//! What `kopt bench` concludes: per variant its samples, the interval of its
//! median ratio to the first variant, and the keep / marginal / revert verdict.

use serde::{Deserialize, Serialize};

/// A two-sided confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Interval {
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
    pub confidence: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum VerdictKind {
    Keep,
    Marginal,
    Revert,
    /// The in-process gate caught the candidate gaming the measurement
    /// (cached output, work the timer missed, ...): never kept, whatever its time.
    Suspect,
}

impl VerdictKind {
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictKind::Keep => "KEEP",
            VerdictKind::Marginal => "MARGINAL",
            VerdictKind::Revert => "REVERT",
            VerdictKind::Suspect => "SUSPECT",
        }
    }

    /// The worse of two verdicts (SUSPECT over REVERT over MARGINAL over KEEP).
    pub fn worst(self, other: VerdictKind) -> VerdictKind {
        self.max(other)
    }
}

impl std::fmt::Display for VerdictKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Verdict {
    pub kind: VerdictKind,
    /// Why, in one sentence with the figures.
    pub reason: String,
    /// What to do next.
    pub next: String,
}

/// One variant of a benchmark, measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct VariantResult {
    pub name: String,
    pub command: String,
    /// How it was timed, in words.
    pub source: String,
    /// Number of samples.
    pub samples: usize,
    /// The samples themselves, seconds, in the order taken.
    pub values_s: Vec<f64>,
    pub outliers: usize,
    pub median_s: f64,
    pub relative_noise: Option<f64>,
    /// Median of the first variant / median of this one (above 1 = faster).
    pub speedup_vs_first: f64,
    /// Interval of median(this) / median(first); None for the first variant.
    pub ratio_interval: Option<Interval>,
    pub verdict: Option<Verdict>,
    /// The correctness gate's result against the first variant, when one ran.
    pub correct: Option<bool>,
    pub check_problems: Vec<String>,
}

/// Everything `kopt bench` measured and decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BenchReport {
    pub schema: String,
    /// The speed-up that counts for KEEP (0.05 = 5%).
    pub threshold: f64,
    /// The slow-down still treated as noise.
    pub noise: f64,
    pub seed: u64,
    /// The GPU the tracer saw, when it timed the runs.
    pub device: Option<String>,
    /// The first variant is the baseline.
    pub variants: Vec<VariantResult>,
    /// The worst verdict of the candidates.
    pub verdict: VerdictKind,
    /// How the sampling went where it left the usual rule (a run longer
    /// than --max-time sampled to --min-samples).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl BenchReport {
    pub fn candidates(&self) -> &[VariantResult] {
        self.variants.get(1..).unwrap_or_default()
    }
}

/// Why the in-process gate does not trust a candidate's timing or output
/// (`kopt.bench(baseline=fn, candidate=fn)`): each a named verdict
/// `SUSPECT: <reason>`, never KEEP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum SuspectReason {
    /// A checked call returned an earlier call's result for new inputs.
    CachedOutput,
    /// Poisoned (NaN) elements survived the call: part of the output was never written.
    PartialOutput,
    /// Right on some checked calls, wrong on others.
    InconsistentOutput,
    /// The output is a view or alias of an input.
    AliasesInput,
    /// The output carries less precision than the reference's (dtype or mantissa bits).
    LowerPrecision,
    /// Work the caller's stream does not wait for (a side stream left unjoined).
    SideStream,
    /// No GPU work in the timed window.
    NoKernel,
    /// CUDA events, the tracer's kernel time and wall time disagree beyond noise.
    TimingDisagrees,
    /// A measured rate above the device's peak bandwidth or FLOP/s.
    AbovePeak,
    /// Faster only while its data sits in L2: the flushed timing does not keep it.
    L2Flattered,
    /// The candidate replaced the harness's timing or synchronisation functions.
    HarnessTampered,
}

impl SuspectReason {
    pub const ALL: [SuspectReason; 11] = [
        SuspectReason::CachedOutput,
        SuspectReason::PartialOutput,
        SuspectReason::InconsistentOutput,
        SuspectReason::AliasesInput,
        SuspectReason::LowerPrecision,
        SuspectReason::SideStream,
        SuspectReason::NoKernel,
        SuspectReason::TimingDisagrees,
        SuspectReason::AbovePeak,
        SuspectReason::L2Flattered,
        SuspectReason::HarnessTampered,
    ];

    /// The reason's name in `SUSPECT: <name>` and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            SuspectReason::CachedOutput => "cached-output",
            SuspectReason::PartialOutput => "partial-output",
            SuspectReason::InconsistentOutput => "inconsistent-output",
            SuspectReason::AliasesInput => "aliases-input",
            SuspectReason::LowerPrecision => "lower-precision",
            SuspectReason::SideStream => "side-stream",
            SuspectReason::NoKernel => "no-kernel",
            SuspectReason::TimingDisagrees => "timing-disagrees",
            SuspectReason::AbovePeak => "above-peak",
            SuspectReason::L2Flattered => "l2-flattered",
            SuspectReason::HarnessTampered => "harness-tampered",
        }
    }
}

impl std::fmt::Display for SuspectReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One reason to distrust a candidate, with the evidence in words.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Suspicion {
    pub reason: SuspectReason,
    pub detail: String,
}

/// The in-process verdict on one input shape: the warm A/B (the candidate's
/// verdict SUSPECT when a defense fired), the L2-flushed A/B beside it when
/// asked for, and every suspicion with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GateShape {
    /// The shape as the caller named it (`str(shape)`), or "default".
    pub shape: String,
    pub warm: BenchReport,
    /// The same pair timed with L2 flushed before every call (`flush_l2=True`).
    pub flushed: Option<BenchReport>,
    pub suspect: Vec<Suspicion>,
    /// How many calls of each side were checked against the reference on fresh inputs.
    pub checked_calls: usize,
    pub verdict: VerdictKind,
}

/// `kopt.bench(baseline=fn, candidate=fn, ...)`: both callables timed in one
/// process, per shape and overall (the worst shape's verdict).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GateReport {
    pub schema: String,
    pub device: Option<String>,
    pub shapes: Vec<GateShape>,
    pub verdict: VerdictKind,
    /// Wall seconds the whole verdict took (warm-up, checks, timing).
    pub seconds: f64,
    /// What the harness could not check, and why (no tracer, no `out=`, ...).
    pub notes: Vec<String>,
}
