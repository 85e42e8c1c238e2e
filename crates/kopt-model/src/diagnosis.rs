use serde::{Deserialize, Serialize};

use crate::{Device, Source};

/// The bottleneck vocabulary of kopt's JSON (DESIGN.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum BottleneckClass {
    LaunchOverhead,
    Memory,
    Compute,
    Latency,
    Occupancy,
    BankConflict,
    Uncoalesced,
    SmallGrid,
    Sync,
    Balanced,
    /// Threads of a warp take different paths: most lanes idle.
    Divergence,
    /// Atomics or reductions serialise on a few addresses.
    Atomics,
    /// A last partial wave of blocks leaves most SMs idle.
    PartialWave,
    /// No counters were collected for this kernel (e.g. below the top N that
    /// `kopt profile` profiles in depth): its time counts, its cause is unknown.
    Unknown,
}

impl BottleneckClass {
    pub fn as_str(self) -> &'static str {
        match self {
            BottleneckClass::LaunchOverhead => "launch_overhead",
            BottleneckClass::Memory => "memory",
            BottleneckClass::Compute => "compute",
            BottleneckClass::Latency => "latency",
            BottleneckClass::Occupancy => "occupancy",
            BottleneckClass::BankConflict => "bank_conflict",
            BottleneckClass::Uncoalesced => "uncoalesced",
            BottleneckClass::SmallGrid => "small_grid",
            BottleneckClass::Sync => "sync",
            BottleneckClass::Balanced => "balanced",
            BottleneckClass::Divergence => "divergence",
            BottleneckClass::Atomics => "atomics",
            BottleneckClass::PartialWave => "partial_wave",
            BottleneckClass::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for BottleneckClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The hardware unit that limits a memory- or compute-class kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum HotUnit {
    Dram,
    L2,
    L1Shared,
    Tensor,
    Fp32,
    Alu,
    Fp64,
    /// The special-function unit (sin, cos, exp2, rsqrt, conversions).
    Xu,
    /// The load/store unit (shared, global, local memory instructions).
    Lsu,
    /// The SM as a whole, when no pipe counter tells which one.
    Sm,
}

impl HotUnit {
    pub fn as_str(self) -> &'static str {
        match self {
            HotUnit::Dram => "dram",
            HotUnit::L2 => "l2",
            HotUnit::L1Shared => "l1_shared",
            HotUnit::Tensor => "tensor",
            HotUnit::Fp32 => "fp32",
            HotUnit::Alu => "alu",
            HotUnit::Fp64 => "fp64",
            HotUnit::Xu => "xu",
            HotUnit::Lsu => "lsu",
            HotUnit::Sm => "sm",
        }
    }
}

/// The class of one kernel, with the unit and whether it sits at its roofline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Bottleneck {
    pub class: BottleneckClass,
    pub unit: Option<HotUnit>,
    /// Utilisation of the hot unit, % of peak.
    pub unit_pct: Option<f64>,
    /// True when the hot unit runs at or above the throughput-bound threshold (80%).
    pub at_roofline: bool,
}

/// A secondary observation about a kernel, with the evidence behind it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Finding {
    pub class: BottleneckClass,
    pub evidence: String,
}

/// An expected gain: what share of the kernel and of the workload a change may save.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GainEstimate {
    /// Share of the kernel's own time that may be saved, 0..=100.
    pub kernel_pct: f64,
    /// Share of the whole workload's time that may be saved, 0..=100
    /// (kernel_pct weighted by the kernel's share of the total).
    pub workload_pct: f64,
    /// Nanoseconds saved per run of the workload.
    pub saved_ns: f64,
    /// How the figure was computed, in one sentence.
    pub method: String,
}

/// Where Nsight Compute's own top-ranked rule points elsewhere than kopt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct NcuDisagreement {
    pub ncu_rule: String,
    pub ncu_speedup_pct: Option<f64>,
    pub ncu_speedup_type: String,
    pub ncu_class: BottleneckClass,
    pub why_kopt_differs: String,
}

/// kopt's verdict on one distinct kernel (its launches grouped).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct KernelVerdict {
    /// The full kernel name (JSON keeps it whole; tables shorten it).
    pub name: String,
    pub short_name: String,
    pub launches: u64,
    pub total_ns: f64,
    pub mean_ns: f64,
    /// Share of the summed kernel time, 0..=100.
    pub pct_of_total: f64,
    pub grid: String,
    pub block: String,
    /// Achieved DRAM bandwidth, bytes/s.
    pub dram_bytes_per_s: Option<f64>,
    /// DRAM bytes per launch (read + write).
    pub dram_bytes: Option<f64>,
    /// `gpu__compute_memory_throughput` (memory SOL), %.
    pub memory_sol_pct: Option<f64>,
    pub dram_sol_pct: Option<f64>,
    /// `sm__throughput` (compute SOL), %.
    pub compute_sol_pct: Option<f64>,
    pub tensor_pct: Option<f64>,
    pub occupancy_achieved_pct: Option<f64>,
    pub occupancy_theoretical_pct: Option<f64>,
    pub occupancy_limiter: Option<String>,
    /// FP32 FLOP per DRAM byte, where both counters were collected.
    pub arithmetic_intensity: Option<f64>,
    /// Achieved FP32 FLOP/s.
    pub fp32_flops_per_s: Option<f64>,
    pub bottleneck: Bottleneck,
    /// The root cause in words, with the figures that show it.
    pub root_cause: String,
    pub findings: Vec<Finding>,
    pub ncu_disagreement: Option<NcuDisagreement>,
    /// Checks that could not run for lack of counters, each with what it
    /// needs (e.g. "coalescing: needs the L1 sector counters ..."); a class
    /// resting on them is partial evidence.
    #[serde(default)]
    pub checks_not_run: Vec<String>,
    /// The framework ops that launched this kernel (PyTorch's NVTX op
    /// ranges, when the workload was run with them), most launches first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ops: Vec<OpShare>,
    /// The library the kernel comes from (cuBLAS, cuDNN, ATen, ...), when
    /// its name tells: its code is then not the caller's to change, and the
    /// advice is about what the caller hands it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<KernelFamily>,
    /// Set when this kernel's launches belong to a fused finding (e.g. an
    /// eager elementwise chain): the id of the recommendation that covers it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub covered_by: Option<String>,
    /// What the counters say about why the kernel is slow, beyond its
    /// class: stall breakdown, pipe utilisation, lanes active, atomics, waves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<KernelEvidence>,
}

/// The evidence behind a kernel's verdict (#29), from its representative
/// launch; each part is there only where its counters were collected.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct KernelEvidence {
    /// Warp stall reasons, largest first: cycles per issued instruction and
    /// share of all stall cycles, %.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stalls: Vec<StallShare>,
    /// Pipe utilisation, % of each pipe's peak, busiest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pipes: Vec<PipeUse>,
    /// Active threads per executed warp instruction (1..=32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_threads_per_inst: Option<f64>,
    /// Divergent branch targets (`smsp__sass_branch_targets_threads_divergent.sum`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub divergent_branches: Option<f64>,
    /// Global atomic/reduction accesses at L1 (tag lookups).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_atomic_accesses: Option<f64>,
    /// L2 sectors of atomics and reductions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_atomic_sectors: Option<f64>,
    /// Shared-memory atomic wavefronts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_atomic_wavefronts: Option<f64>,
    /// Waves of blocks: grid / (SMs x resident blocks per SM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waves: Option<f64>,
    /// How full the last wave is, % (100 when the grid is whole waves).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_wave_fill_pct: Option<f64>,
}

/// One stall reason's cycles per issued instruction and its share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StallShare {
    pub reason: crate::StallReason,
    pub cycles_per_issue: f64,
    pub share_pct: f64,
}

/// One pipe's utilisation, % of its peak.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PipeUse {
    pub pipe: HotUnit,
    pub pct: f64,
}

/// Which library a kernel comes from and what kind of work it does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct KernelFamily {
    pub family: LibraryFamily,
    /// e.g. "cuBLAS", "cuDNN", "PyTorch (ATen)", "NCCL".
    pub library: String,
    /// False for library code: the caller changes shapes, dtype, layout,
    /// settings and fusion, not the kernel.
    pub caller_can_edit: bool,
}

/// The kind of work a library kernel does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum LibraryFamily {
    Gemm,
    Convolution,
    Attention,
    Collective,
    /// Generated by a compiler (Triton kernels from torch.compile).
    Generated,
    Elementwise,
    Reduction,
    Normalization,
    Softmax,
    Copy,
    OtherFramework,
    /// A library's kernel of no family kopt knows (e.g. a cuDNN layout
    /// transform): library code, with no family-specific advice.
    OtherLibrary,
}

impl LibraryFamily {
    pub fn as_str(self) -> &'static str {
        match self {
            LibraryFamily::Gemm => "GEMM",
            LibraryFamily::Convolution => "convolution",
            LibraryFamily::Attention => "attention",
            LibraryFamily::Collective => "collective",
            LibraryFamily::Generated => "generated",
            LibraryFamily::Elementwise => "elementwise",
            LibraryFamily::Reduction => "reduction",
            LibraryFamily::Normalization => "normalization",
            LibraryFamily::Softmax => "softmax",
            LibraryFamily::Copy => "copy/index",
            LibraryFamily::OtherFramework => "framework",
            LibraryFamily::OtherLibrary => "library",
        }
    }
}

/// A framework op (e.g. `aten::addmm`) with its input shapes, as one
/// kernel's launcher.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OpShare {
    pub op: String,
    /// Input shapes as the framework wrote them, e.g. `[[8, 768], [768, 3072]]`.
    pub shapes: Option<String>,
    pub launches: u64,
}

/// One framework op (and input shapes) over the whole workload: the kernels
/// it launched and their time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OpSummary {
    pub op: String,
    pub shapes: Option<String>,
    /// Short names of the kernels it launched.
    pub kernels: Vec<String>,
    pub launches: u64,
    /// GPU time of those launches.
    pub total_ns: f64,
    /// Share of the summed kernel time, 0..=100.
    pub pct_of_total: f64,
}

/// A ranked change to make, tied to the evidence that triggers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Recommendation {
    pub rank: usize,
    /// Catalogue id, e.g. `coalesce_global_access`.
    pub id: String,
    pub title: String,
    pub kernel: String,
    pub kernel_short: String,
    pub class: BottleneckClass,
    pub evidence: String,
    pub action: String,
    /// Where in the seeds this strategy comes from.
    pub source: String,
    /// None when kopt cannot put a number on it from counters alone.
    pub gain: Option<GainEstimate>,
    /// The predicted speed-up of the whole step (graph capture), with its range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_speedup: Option<PredictedSpeedup>,
}

/// How a finding's evidence starts the sentence that says why its figure
/// is withheld (a prediction too uncertain to give); reports headline that
/// sentence instead of a gain.
pub const FIGURE_WITHHELD: &str = "No figure is given: ";

impl Recommendation {
    /// Why this finding's figure is withheld, if it is.
    pub fn withheld(&self) -> Option<&str> {
        let at = self.evidence.find(FIGURE_WITHHELD)?;
        Some(self.evidence[at + FIGURE_WITHHELD.len()..].trim_end())
    }

    /// The evidence without the withheld-figure sentence (said once, as
    /// the finding's headline).
    pub fn evidence_shown(&self) -> &str {
        match self.evidence.find(FIGURE_WITHHELD) {
            Some(at) => self.evidence[..at].trim_end(),
            None => &self.evidence,
        }
    }
}

/// A predicted speed-up (eager time over predicted time), with the range the
/// inputs' spread and the model's constants allow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PredictedSpeedup {
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
    /// How it was computed, with the constants used.
    pub model: String,
}

/// The workload a `kopt profile` run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunInfo {
    /// `--module` label, if given.
    pub module: Option<String>,
    pub argv: Vec<String>,
    /// The run folder with every pass's raw artifacts.
    pub run_dir: String,
    /// Wall time of the whole profile (all passes).
    pub wall_s: f64,
}

/// Everything `kopt analyze` concludes about a workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Diagnosis {
    pub schema: String,
    /// Set by `kopt profile`; absent when existing files were analysed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<RunInfo>,
    pub device: Device,
    pub sources: Vec<Source>,
    /// Sum of kernel durations (ncu serialises kernels, so this is GPU-busy time).
    pub total_kernel_ns: f64,
    pub kernels: Vec<KernelVerdict>,
    /// The kernel and class that cost the workload the most recoverable time.
    pub primary: Option<PrimaryBottleneck>,
    pub recommendations: Vec<Recommendation>,
    /// The timeline's view, when a trace was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<TimelineSummary>,
    /// What the HTML page draws of the timeline.
    #[serde(skip)]
    pub strip: Option<TimelineStrip>,
    /// The steady state's own strip, where it is not (nearly) the whole trace.
    #[serde(skip)]
    pub steady_strip: Option<SteadyStrip>,
    /// Caveats the reader must know (e.g. a timeline is needed for launch overhead).
    pub notes: Vec<String>,
    /// Kernel time by framework op and input shapes, largest first (when the
    /// timeline has op ranges: PyTorch's emit_nvtx).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ops: Vec<OpSummary>,
    /// Kernels that ran only in the warm-up steps before the steady state
    /// (cuDNN's algorithm search, Triton's autotuning, a first call's
    /// one-off work) and never again: left out of the table, totals, gains and primary bottleneck
    /// unless kept on request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_trials: Option<WarmupTrials>,
    /// Recommendations kopt measured (`kopt profile --verify N`): each one's
    /// automatic fix applied to the module and timed against eager. The
    /// recommendations are then ordered by what was measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verified: Vec<Verification>,
}

impl Diagnosis {
    /// What kopt measured for the recommendation `id`, if it did.
    pub fn verification(&self, id: &str) -> Option<&Verification> {
        self.verified.iter().find(|v| v.recommendation == id)
    }
}

/// A recommendation measured: the fix it names applied by kopt (the
/// optimize harness's candidate), checked against eager and timed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Verification {
    /// The recommendation's id (e.g. `use_channels_last`).
    pub recommendation: String,
    /// The candidate that applied it (e.g. `channels_last`).
    pub candidate: String,
    /// The recommendation's predicted step speed-up, when it made one.
    pub predicted_speedup: Option<f64>,
    /// Median eager step / median step with the fix (CUDA events, one
    /// process, interleaved); None when it could not run.
    pub measured_speedup: Option<f64>,
    /// Whether its outputs passed the check against eager's.
    pub correct: Option<bool>,
    /// KEEP, MARGINAL or REVERT by the bench statistics (precision changes
    /// judged by their tolerance, as with `--allow-precision`).
    pub verdict: Option<crate::VerdictKind>,
    /// Why it has no measurement, or what the verdict said.
    pub note: String,
}

/// Warm-up / autotuning trial kernels and how they were told apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WarmupTrials {
    /// One entry per kernel name and launch configuration, most time first.
    pub kernels: Vec<WarmupKernel>,
    pub launches: u64,
    pub total_ns: f64,
    /// The evidence, in one sentence.
    pub how_found: String,
    /// Which rule found them.
    #[serde(default)]
    pub evidence: WarmupEvidence,
    /// True when they were kept in the table and totals (`--keep-warmup`).
    #[serde(default)]
    pub kept: bool,
}

/// The rule that told warm-up trials apart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum WarmupEvidence {
    /// A timeline with steps: every launch in the warm-up steps cut before
    /// the steady state.
    #[default]
    WarmupSteps,
    /// Launch records in order (an ncu capture, no steady state): ran only
    /// in the first iteration of a repeating capture, fewer times than the
    /// loop.
    FirstIteration,
}

/// One warm-up trial kernel (a name and launch configuration).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WarmupKernel {
    pub name: String,
    pub short_name: String,
    /// Grid and block, e.g. `(120, 1, 1)`, where the input records them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<String>,
    pub launches: u64,
    pub total_ns: f64,
}

/// Seed 000's "key insight": component and type of the workload's main bottleneck.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PrimaryBottleneck {
    pub component: String,
    pub component_short: String,
    #[serde(rename = "type")]
    pub class: BottleneckClass,
    pub pct_of_total: f64,
    pub insight: String,
}

impl Diagnosis {
    /// The kernels whose verdict differs from Nsight Compute's top rule, in table order.
    pub fn ncu_disagreements(&self) -> Vec<(&KernelVerdict, &NcuDisagreement)> {
        self.kernels
            .iter()
            .filter_map(|k| Some((k, k.ncu_disagreement.as_ref()?)))
            .collect()
    }
}

/// An idle stretch of the GPU between two activities.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct IdleGap {
    /// Offset from the start of the trace window.
    pub at_ns: i64,
    pub duration_ns: i64,
    /// The activity before and after the gap.
    pub after: String,
    pub before: String,
}

/// What the timeline says about the workload as a whole (what counters cannot see).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TimelineSummary {
    /// From the first traced CUDA call or activity to the last activity's end.
    pub wall_ns: i64,
    /// Union of kernel, memcpy and memset intervals.
    pub gpu_busy_ns: i64,
    pub busy_pct: f64,
    pub kernels: u64,
    pub memory_ops: u64,
    pub kernel_launch_calls: u64,
    pub graph_launches: u64,
    pub sync_calls: u64,
    /// Median host time of one kernel-launch API call.
    pub median_launch_ns: Option<f64>,
    pub median_kernel_ns: Option<f64>,
    /// Kernels that ran shorter than the API call that launched them (HTA's measure).
    pub kernels_shorter_than_launch: u64,
    /// Median delay from the launch call's start to the kernel's start.
    pub median_launch_to_start_ns: Option<f64>,
    pub largest_gaps: Vec<IdleGap>,
    /// `ProfilerStep#N` ranges, when the trace has them.
    pub iterations: Option<u64>,
    pub kernels_per_iteration: Option<f64>,
    /// GPU-busy time per iteration: what one step costs at best once launches
    /// stop setting the pace (e.g. replayed from a CUDA graph).
    pub busy_per_iteration_ns: Option<f64>,
    /// True when launch overhead, not GPU work, sets the pace.
    pub launch_bound: bool,
    pub verdict: String,
    /// A sampled trace: the figures above cover its windows only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampling: Option<SampledCoverage>,
    /// How the steps (iterations) were found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<StepDetection>,
    /// The steady-state window the figures above come from, and what was cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_state: Option<SteadyState>,
    /// Per-step time now and predicted after CUDA graph capture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_prediction: Option<GraphPrediction>,
    /// Host synchronisations inside the steady steps (`.item()`, `.cpu()`,
    /// blocking copies, `torch.cuda.synchronize`), where there are any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_syncs: Option<HostSyncs>,
    /// Copies between host and device in the steady steps, where any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_copies: Option<HostCopies>,
    /// torch.optim's step in the steady steps, where the trace marks it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimizer: Option<OptimizerStep>,
    /// The steady steps split into data, forward, backward and optimizer,
    /// where the trace marks them (`kopt:*` ranges, docs/training.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<StepPhases>,
}

/// A training step's phases, averaged over the steady steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StepPhases {
    /// Steady steps averaged.
    pub steps: u64,
    /// Mean step, from one step's start to the next's.
    pub step_ns: f64,
    /// `data`, `forward`, `backward`, `optimizer` (those marked), then
    /// `other`: the step's time in no phase.
    pub phases: Vec<StepPhase>,
    /// Of forward, backward and optimizer, those with no marker in the
    /// steps (a `train_step` marks the optimizer only).
    pub missing: Vec<String>,
    /// Where the phases came from: kopt's markers, or torch.profiler's
    /// annotations (forward then inferred).
    pub source: String,
}

/// One phase of a step: its host time and the GPU work it launched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StepPhase {
    pub name: String,
    /// Host time inside the phase's ranges, per step.
    pub host_ns_per_step: f64,
    /// That time's share of the step, 0..=100.
    pub share_pct: f64,
    /// Kernels launched inside the phase, per step.
    pub kernels_per_step: f64,
    /// Their GPU time, per step.
    pub gpu_ns_per_step: f64,
}

/// The optimizer's step as the trace shows it (`Optimizer.step#NAME.step`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OptimizerStep {
    /// The optimizer's class (`Adam`, `AdamW`, `SGD`, ...).
    pub name: String,
    /// "for-loop" (kernels per parameter), "foreach" (multi-tensor
    /// kernels) or "fused" (one fused kernel family).
    pub form: String,
    /// Host time of the step's annotation, per training step (as recorded).
    pub host_ns_per_step: f64,
    pub kernels_per_step: f64,
    pub gpu_ns_per_step: f64,
    /// `zero_grad` launching kernels (filling the gradients with zeros,
    /// `set_to_none=False`), when it does; `set_to_none=True` launches none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zero_grad_fill: Option<ZeroGradFill>,
}

/// What `optimizer.zero_grad()` costs a step when it fills the gradients
/// with zeros instead of dropping them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ZeroGradFill {
    /// Host time of its annotation, per training step (as recorded).
    pub host_ns_per_step: f64,
    pub kernels_per_step: f64,
    pub gpu_ns_per_step: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// The host waiting for the GPU inside a step: every sync whose step
/// launches more work after it (a sync that ends the step is not counted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HostSyncs {
    /// Steady steps looked at.
    pub steps: u64,
    /// Syncs inside a step (more launches follow in that step), per step.
    pub mid_step_per_step: f64,
    /// Of those, the syncs inside the optimizer's step (a for-loop or
    /// foreach optimizer reading its step counts): compiling the model
    /// breaks no graph there. Absent (0) where none were.
    #[serde(default, skip_serializing_if = "crate::diagnosis::is_zero")]
    pub in_optimizer_per_step: f64,
    /// Host time blocked in those calls, per step.
    pub wait_per_step_ns: f64,
    /// GPU idle after each returns until the GPU's next work, per step.
    pub gpu_idle_after_per_step_ns: f64,
    /// Host time in the ops that synced (their own work and their wait),
    /// per step, where the trace has op events; else the wait alone.
    #[serde(default)]
    pub op_host_per_step_ns: f64,
    /// The step's wall time these figures are shares of.
    pub step_ns: f64,
    /// GPU-busy time per step: the least the step can take once the host
    /// runs ahead.
    #[serde(default)]
    pub gpu_busy_per_step_ns: f64,
    /// The recorder's own host cost per step (torch.profiler's, kopt's
    /// tracer's), taken out of the step before the step after is predicted.
    #[serde(default)]
    pub recorder_overhead_per_step_ns: f64,
    /// The host and the GPU take turns: GPU time saved comes off the step
    /// in full (the GPU's idle after the syncs is a tenth of the step or more).
    pub serialized: bool,
    /// Where they come from, most GPU idle first.
    pub sites: Vec<SyncSite>,
    /// Whether any call carried the user's source line (a trace with
    /// Python stacks); when not, the report says how to get them.
    pub frames_known: bool,
}

/// One place in the user's code that syncs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SyncSite {
    /// `file.py:LINE in function`, when the trace had Python stacks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame: Option<String>,
    /// The framework op that synced (`aten::item`, `aten::nonzero`, ...),
    /// when the trace had op events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// The CUDA call that blocked (`cudaStreamSynchronize`, ...).
    pub api: String,
    /// What it is in the user's terms (".item()", "a boolean mask", ...).
    pub what: String,
    pub per_step: f64,
    pub wait_per_step_ns: f64,
    pub gpu_idle_after_per_step_ns: f64,
}

/// Host <-> device copies in the steady steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HostCopies {
    pub steps: u64,
    /// Per direction and memory kind, most time first.
    pub groups: Vec<CopyGroup>,
    /// The host link's peak, bytes/s, per direction, and what it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_peak_bytes_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
}

/// Copies of one direction from or to one kind of host memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CopyGroup {
    /// "HtoD" or "DtoH".
    pub direction: String,
    /// "pageable", "pinned" or "unknown".
    pub host_memory: String,
    pub per_step: f64,
    pub bytes_per_step: f64,
    /// GPU time of the copies, per step.
    pub gpu_ns_per_step: f64,
    /// Host time in the calls that issued them, per step.
    pub call_ns_per_step: f64,
    /// GPU idle just before them (the GPU waiting for the host to stage
    /// the copy), per step.
    #[serde(default)]
    pub gpu_idle_before_ns_per_step: f64,
    /// Bytes over GPU copy time.
    pub achieved_bytes_per_s: f64,
    /// The host waited for them (synchronous copies: pageable memory, or
    /// calls that do not return before the copy ends).
    pub blocking: bool,
    /// Where the calls come from (`file.py:LINE in function`), when known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<String>,
}

/// Where the step boundaries came from, most trusted first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum StepSource {
    /// torch.profiler's `ProfilerStep#N` annotations (each step counted once).
    ProfilerStep,
    /// A repeated NVTX range.
    Nvtx,
    /// Host synchronisation calls between steps.
    Sync,
    /// Idle stretches of the host between bursts of launches.
    HostGap,
    /// The period of the sequence of GPU activities.
    KernelPattern,
}

/// How the steps were found, in words too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StepDetection {
    pub source: StepSource,
    /// Steps found in the whole trace (before warm-up is cut).
    pub found: u64,
    /// The range family (`ProfilerStep`, an NVTX name), where one marks them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    pub detail: String,
    /// Where step markers of other host threads were left out: the note
    /// saying so (steps come from one thread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_threads: Option<String>,
}

/// The window the timeline figures come from: start-up idle and warm-up steps cut.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SteadyState {
    /// Window start and end, from the start of the trace.
    pub start_ns: i64,
    pub end_ns: i64,
    /// Steps in the window.
    pub steps: u64,
    /// Time before the first step (imports, allocation, module loads).
    pub startup_ns: i64,
    /// Steps cut at the start (first call, compilation, warm-up) and their time.
    pub warmup_steps: u64,
    pub warmup_ns: i64,
    /// Steps cut at the end (incomplete, or after the last marker).
    #[serde(default)]
    pub trailing_ns: i64,
    pub description: String,
}

/// Eager per-step time against the predicted per-step time after graph capture.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GraphPrediction {
    /// Steady-state wall time per step, as recorded.
    pub eager_per_step_ns: f64,
    /// The recorder's own cost per step taken out (launches per step x its per-launch cost).
    pub recorder_overhead_per_step_ns: f64,
    pub recorder_ns_per_launch: f64,
    pub launches_per_step: f64,
    /// Framework op ranges per step (PyTorch's emit_nvtx), each costing
    /// host time that is taken out with the recorder's.
    #[serde(default)]
    pub op_ranges_per_step: f64,
    /// Eager per-step time without the recorder's cost (never below GPU-busy time).
    pub eager_corrected_per_step_ns: f64,
    /// Steps of a bare run (no CUPTI) gave the eager time, not the
    /// recorder's estimated cost; then the recorder cost above is measured.
    #[serde(default)]
    pub eager_measured_bare: bool,
    pub busy_per_step_ns: f64,
    pub kernels_per_step: f64,
    /// The device model's replay cost per kernel.
    pub replay_ns_per_kernel: f64,
    /// False when the card is not in the table and the default was used.
    pub replay_cost_from_table: bool,
    /// GPU-busy time plus kernels x replay cost.
    pub graph_per_step_ns: f64,
    pub speedup: PredictedSpeedup,
    /// The host's own time per step, where the trace shows it: the median
    /// steady step from its start to its last launch call's end, less the
    /// time launch calls spent blocked beyond the median call and the
    /// recorder's modelled cost (its per-launch and per-op-range constants);
    /// at most the eager step. On a GPU-bound step it is otherwise hidden.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_per_step_ns: Option<f64>,
}

/// What a sampled trace (`kopt trace --sample`) covered of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SampledCoverage {
    pub windows: u64,
    /// Time inside the windows.
    pub traced_ns: i64,
    /// From the first window's start to the last one's end.
    pub span_ns: i64,
}

/// A drawable summary of the timeline for the HTML strip (not part of the JSON).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TimelineStrip {
    pub window_ns: i64,
    /// One lane per (device, stream) and one for the host's API calls.
    pub lanes: Vec<StripLane>,
    /// Idle stretches of the GPU: (start, duration), relative to the window.
    pub idle: Vec<(i64, i64)>,
    pub launch_bound: bool,
}

/// The steady state's own strip, drawn first where start-up, warm-up or
/// trailing work take a tenth of the trace or more (not part of the JSON).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SteadyStrip {
    /// The steady state's window at its own resolution.
    pub strip: TimelineStrip,
    /// The trace's time before and after the window, left out of it.
    pub cut_before_ns: i64,
    pub cut_after_ns: i64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct StripLane {
    pub label: String,
    /// (start, end) relative to the window, merged where closer than a pixel.
    pub spans: Vec<(i64, i64)>,
    pub host: bool,
}
