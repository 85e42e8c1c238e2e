//! kopt's plain data types. No I/O here: parsers fill these, the analyzer
//! reads them, exporters print them.
//!
//! Conventions (DESIGN.md): times in nanoseconds, bytes as `u64`/`f64` bytes,
//! rates in bytes/s or FLOP/s, percentages in 0..=100.

pub mod bench;
pub mod compare;
mod device;
pub mod device_limits;
mod diagnosis;
pub mod figure;
pub mod history;
mod launch;
mod names;
pub mod optimize;
mod peaks;
pub mod ranks;
pub mod run_folder;
pub mod tensor;
pub mod text;
mod timeline;
pub mod tune;

pub use bench::{
    BenchReport, GateReport, GateShape, Interval, SuspectReason, Suspicion, VariantResult, Verdict,
    VerdictKind,
};
pub use device::{AmdDevice, Device, PeakSource, Peaks, Vendor};
pub use diagnosis::{
    Bottleneck, BottleneckClass, CopyGroup, Diagnosis, Finding, GainEstimate, GraphPrediction,
    HostCopies, HostSyncs, HotUnit, IdleGap, KernelEvidence, KernelFamily, KernelVerdict,
    LibraryFamily, NcuDisagreement, OpShare, OpSummary, OptimizerStep, PipeUse, PredictedSpeedup,
    PrimaryBottleneck, Recommendation, RunInfo, SampledCoverage, StallShare, SteadyState,
    SteadyStrip, StepDetection, StepPhase, StepPhases, StepSource, StripLane, SyncSite,
    TimelineStrip, TimelineSummary, Verification, WarmupEvidence, WarmupKernel, WarmupTrials,
    ZeroGradFill, FIGURE_WITHHELD,
};
pub use launch::{Dim3, KernelLaunch, Metrics, NcuRule, Profile, Source, StallReason};
pub use names::{
    clip_chars, clip_distinct, format_duration_ns, kernel_function_name, kernel_match_key,
    kernel_short_name, qualified_function_name,
};
pub use peaks::{
    amd_spec, datasheet_names, datasheet_peaks, graph_replay_ns_per_kernel, AmdSpec, AMD_SPECS,
    DEFAULT_GRAPH_REPLAY_NS_PER_KERNEL,
};
pub use ranks::{
    CollectiveOp, CollectiveRow, RankAdvice, RankInfo, RankRow, RanksDiagnosis, Straggler,
};
pub use timeline::{
    bare_launch_every, bare_launch_range, range_family, ActivityKind, ApiCall, ApiKind, BareSteps,
    CopyDirection, CopyKind, GpuActivity, MemoryKind, Range, Recorder, Timeline, BACKWARD_PHASE,
    BARE_LAUNCH_RANGE_PREFIX, BARE_SYNC_RANGE, KINETO_MAX_NS_PER_LAUNCH, KINETO_NS_PER_LAUNCH,
    KINETO_SLOWDOWN, KINETO_SLOWDOWN_BAND, KOPT_TRACER_NS_PER_LAUNCH, NVTX_OP_RANGE_NS,
};

/// Version tag of every JSON document kopt writes for machines.
pub const SCHEMA: &str = "kopt/1";
