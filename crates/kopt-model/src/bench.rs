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
}

impl VerdictKind {
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictKind::Keep => "KEEP",
            VerdictKind::Marginal => "MARGINAL",
            VerdictKind::Revert => "REVERT",
        }
    }

    /// The worse of two verdicts (REVERT over MARGINAL over KEEP).
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
}

impl BenchReport {
    pub fn candidates(&self) -> &[VariantResult] {
        self.variants.get(1..).unwrap_or_default()
    }
}
