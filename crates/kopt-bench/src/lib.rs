//! The statistics behind `kopt bench` (seed 002's protocol): when to stop
//! sampling, how sure a speed-up is, and the keep / marginal / revert verdict.
//! Pure functions over samples; running workloads is kopt-collect's job.
//! And the correctness gate ([`compare_tensors`]) on tensors kopt-ingest read.

pub mod compare;
pub mod gate;
pub mod sample;
pub mod stats;
pub mod verdict;

pub use compare::{
    compare, compare_tensor, compare_tensor_gate, compare_tensors, compare_tensors_gate,
    default_elementwise, default_tolerance, CompareReport, Comparison, Gate, Side,
    TensorComparison,
};
pub use gate::{judge, CheckFacts, GateFacts, GateSettings, ShapeFacts, SideFacts};
pub use sample::{
    sample_bounds_text, sample_ns_in_bounds, sample_s_in_bounds, MAX_SAMPLES, MAX_SAMPLE_NS,
    MIN_SAMPLE_NS,
};
pub use stats::{bootstrap_median_ratio, median, outliers, relative_noise, Interval, StopRule};
pub use verdict::{decide, Verdict, VerdictKind};
