use serde::{Deserialize, Serialize};

use crate::Device;

/// A CUDA launch dimension.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Dim3 {
    pub x: u32,
    pub y: u32,
    pub z: u32,
}

impl Dim3 {
    pub fn product(&self) -> u64 {
        self.x as u64 * self.y as u64 * self.z as u64
    }
}

impl std::fmt::Display for Dim3 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "({}, {}, {})", self.x, self.y, self.z)
    }
}

/// Warp stall reasons kopt reads (`smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum StallReason {
    LongScoreboard,
    ShortScoreboard,
    Barrier,
    Membar,
    MioThrottle,
    LgThrottle,
    MathPipeThrottle,
    Wait,
    NotSelected,
    NoInstruction,
    BranchResolving,
}

impl StallReason {
    pub const ALL: [StallReason; 11] = [
        StallReason::LongScoreboard,
        StallReason::ShortScoreboard,
        StallReason::Barrier,
        StallReason::Membar,
        StallReason::MioThrottle,
        StallReason::LgThrottle,
        StallReason::MathPipeThrottle,
        StallReason::Wait,
        StallReason::NotSelected,
        StallReason::NoInstruction,
        StallReason::BranchResolving,
    ];

    /// The `<reason>` part of the ncu metric name.
    pub fn metric_stem(self) -> &'static str {
        match self {
            StallReason::LongScoreboard => "long_scoreboard",
            StallReason::ShortScoreboard => "short_scoreboard",
            StallReason::Barrier => "barrier",
            StallReason::Membar => "membar",
            StallReason::MioThrottle => "mio_throttle",
            StallReason::LgThrottle => "lg_throttle",
            StallReason::MathPipeThrottle => "math_pipe_throttle",
            StallReason::Wait => "wait",
            StallReason::NotSelected => "not_selected",
            StallReason::NoInstruction => "no_instruction",
            StallReason::BranchResolving => "branch_resolving",
        }
    }

    /// What the stall means, in words a kernel engineer uses.
    pub fn meaning(self) -> &'static str {
        match self {
            StallReason::LongScoreboard => "waiting on global/local memory (L1TEX)",
            StallReason::ShortScoreboard => "waiting on shared memory or special math (MIO)",
            StallReason::Barrier => "waiting at __syncthreads()",
            StallReason::Membar => "waiting on a memory fence",
            StallReason::MioThrottle => "MIO queue full (shared memory / special math pressure)",
            StallReason::LgThrottle => "LSU queue full (too many global/local memory instructions)",
            StallReason::MathPipeThrottle => "math pipe busy",
            StallReason::Wait => "fixed-latency dependency",
            StallReason::NotSelected => "eligible but another warp issued",
            StallReason::NoInstruction => "instruction cache miss / no instruction",
            StallReason::BranchResolving => {
                "waiting for a branch target to resolve (divergent or indirect branches)"
            }
        }
    }
}

/// The counters kopt reads for one launch, normalised to base units.
/// Every field is optional: what a capture did not collect stays `None`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Metrics {
    pub duration_ns: Option<f64>,
    /// SM clock during the launch, Hz.
    pub sm_clock_hz: Option<f64>,
    /// C: `sm__throughput.avg.pct_of_peak_sustained_elapsed`.
    pub sm_pct: Option<f64>,
    /// M: `gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed`.
    pub memory_pct: Option<f64>,
    pub dram_pct: Option<f64>,
    pub l2_pct: Option<f64>,
    pub l1_pct: Option<f64>,
    pub dram_bytes_read: Option<f64>,
    pub dram_bytes_write: Option<f64>,
    /// DRAM bandwidth as ncu's details page reports it, bytes/s (when bytes are absent).
    pub dram_bytes_per_s: Option<f64>,
    pub grid_size: Option<f64>,
    pub block_size: Option<f64>,
    pub registers_per_thread: Option<f64>,
    pub shared_mem_static: Option<f64>,
    pub shared_mem_dynamic: Option<f64>,
    pub waves_per_sm: Option<f64>,
    pub sm_count: Option<f64>,
    pub occupancy_limit_blocks: Option<f64>,
    pub occupancy_limit_registers: Option<f64>,
    pub occupancy_limit_shared_mem: Option<f64>,
    pub occupancy_limit_warps: Option<f64>,
    pub occupancy_theoretical_pct: Option<f64>,
    pub occupancy_achieved_pct: Option<f64>,
    pub tensor_pct: Option<f64>,
    pub fma_pct: Option<f64>,
    pub alu_pct: Option<f64>,
    pub fp64_pct: Option<f64>,
    pub inst_ffma: Option<f64>,
    pub inst_fadd: Option<f64>,
    pub inst_fmul: Option<f64>,
    pub shared_ld_conflicts: Option<f64>,
    pub shared_st_conflicts: Option<f64>,
    pub shared_ld_wavefronts: Option<f64>,
    pub shared_st_wavefronts: Option<f64>,
    pub global_ld_bytes_requested: Option<f64>,
    pub global_st_bytes_requested: Option<f64>,
    pub global_ld_sectors: Option<f64>,
    pub global_st_sectors: Option<f64>,
    pub global_ld_requests: Option<f64>,
    /// Local-memory L1 sectors loaded (`l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum`):
    /// register spills and dynamically indexed per-thread arrays.
    #[serde(default)]
    pub local_ld_sectors: Option<f64>,
    /// Local-memory L1 sectors stored (`l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum`).
    #[serde(default)]
    pub local_st_sectors: Option<f64>,
    /// Local load instructions executed (`smsp__inst_executed_op_local_ld.sum`).
    #[serde(default)]
    pub local_ld_inst: Option<f64>,
    /// Local store instructions executed (`smsp__inst_executed_op_local_st.sum`).
    #[serde(default)]
    pub local_st_inst: Option<f64>,
    /// XU (special-function: sin, cos, exp2, rsqrt, conversions) pipe, % of
    /// peak (`sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xu_pct: Option<f64>,
    /// LSU pipe (shared, global, local memory instructions), % of peak
    /// (`sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lsu_pct: Option<f64>,
    /// Active threads per executed warp instruction, 1..=32
    /// (`smsp__thread_inst_executed_per_inst_executed.ratio`; the details
    /// page's "Avg. Active Threads Per Warp"): below 32, lanes idle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_threads_per_inst: Option<f64>,
    /// Branch targets where the warp's threads diverged
    /// (`smsp__sass_branch_targets_threads_divergent.sum`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub divergent_branches: Option<f64>,
    /// Global atomics at L1, tag lookups (`l1tex__t_set_accesses_pipe_lsu_mem_global_op_atom.sum`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_atom_accesses: Option<f64>,
    /// Global reductions (atomics whose result is unused: `RED`) at L1
    /// (`l1tex__t_set_accesses_pipe_lsu_mem_global_op_red.sum`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_red_accesses: Option<f64>,
    /// L2 sectors of atomics (`lts__t_sectors_op_atom.sum`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_atom_sectors: Option<f64>,
    /// L2 sectors of reductions (`lts__t_sectors_op_red.sum`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_red_sectors: Option<f64>,
    /// Shared-memory atomic wavefronts (`l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom.sum`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_atom_wavefronts: Option<f64>,
    /// The busiest SM pipe or issue slots, % (ncu's "SM Busy" on the details
    /// page): with `sm_pct` high and this low, the SM figure is not pipe work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_busy_pct: Option<f64>,
    /// L2 atomic unit busy, % of peak (`lts__d_atomic_input_cycles_active.avg.pct_of_peak_sustained_elapsed`,
    /// in ncu's basic set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_atomic_pct: Option<f64>,
    /// L1 data-pipe wavefronts, % of peak (`l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l1_wavefronts_pct: Option<f64>,
    /// L1 data-bank reads + writes, % of peak (`l1tex__data_bank_reads` /
    /// `_writes.avg.pct_of_peak_sustained_elapsed`): far below the
    /// wavefronts, each wavefront touches few banks (conflicts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l1_bank_reads_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l1_bank_writes_pct: Option<f64>,
    /// Cycles between two issued instructions of a warp, all reasons
    /// together (`smsp__average_warp_latency_per_inst_issued.ratio`; the
    /// details page's "Warp Cycles Per Issued Instruction").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warp_cycles_per_issue: Option<f64>,
    /// Cycles per issued instruction spent in each stall reason.
    pub stalls: Vec<(StallReason, f64)>,
    /// Percent of shared wavefronts that are bank conflicts, from ncu's rule text
    /// (details page, where the raw counters are absent).
    pub shared_conflict_pct_from_rule: Option<f64>,
    /// Percent of global sectors that are excessive, from ncu's UncoalescedGlobalAccess rule.
    pub uncoalesced_excess_pct_from_rule: Option<f64>,
    /// AMD: threads per wavefront as rocprof reports it (64 on CDNA); `None`
    /// on NVIDIA. Its presence marks a launch as AMD's (HIP wording).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wavefront_size: Option<f64>,
    /// AMD: VALU utilisation, % (rocprof-compute: 100 x SQ_ACTIVE_INST_VALU / (GRBM_GUI_ACTIVE per XCD x CUs)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valu_pct: Option<f64>,
    /// AMD: MFMA (matrix core) utilisation, % (100 x SQ_VALU_MFMA_BUSY_CYCLES / (GRBM_GUI_ACTIVE per XCD x CUs x 4)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mfma_pct: Option<f64>,
    /// AMD: LDS utilisation, % (100 x SQ_LDS_IDX_ACTIVE / (GRBM_GUI_ACTIVE per XCD x CUs)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lds_pct: Option<f64>,
    /// AMD: LDS bank conflicts per access (SQ_LDS_BANK_CONFLICT / (SQ_LDS_IDX_ACTIVE - SQ_LDS_BANK_CONFLICT)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lds_bank_conflicts_per_access: Option<f64>,
    /// L2 hit rate, % (AMD: 100 x TCC_HIT / (TCC_HIT + TCC_MISS)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_hit_pct: Option<f64>,
    /// FLOPs the launch executed, counted from instruction counters (AMD:
    /// rocprof-compute's VALU FLOPs plus MFMA MOPs x 512).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops: Option<f64>,
    /// The device's roofline ridge point, FLOP per DRAM byte (FP32 peak /
    /// DRAM peak): a kernel left of it is memory bound on the roofline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ridge_flop_per_byte: Option<f64>,
    /// Where the counters were copied from a sampled launch of the same
    /// kernel and launch configuration (`kopt profile`'s targeted pass):
    /// that launch's duration, which rates (bytes/s, FLOP/s) pair with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters_duration_ns: Option<f64>,
    /// True when the counters were copied from a launch of another
    /// configuration (grid/block) of the same kernel: its class stands in for
    /// this launch's, but its byte and instruction counts are not this
    /// launch's and no rate is computed from them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub counters_from_other_config: bool,
}

/// One result of Nsight Compute's own rules (details page), kept so the
/// report can show where kopt and ncu disagree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct NcuRule {
    pub section: String,
    pub name: String,
    /// OPT, INF, WRN, ERR.
    pub kind: String,
    pub description: String,
    /// "local" or "global" as ncu prints it; empty when none.
    pub speedup_type: String,
    pub estimated_speedup_pct: Option<f64>,
}

/// One profiled kernel launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct KernelLaunch {
    /// ncu's launch ID within its file.
    pub id: u64,
    /// The kernel name as the profiler printed it (demangled C++ for ncu).
    pub name: String,
    pub grid: Dim3,
    pub block: Dim3,
    pub stream: Option<u64>,
    pub metrics: Metrics,
    pub ncu_rules: Vec<NcuRule>,
}

/// Which input a profile came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Source {
    pub path: String,
    /// "ncu-raw" or "ncu-details".
    pub format: String,
    pub launches: usize,
    /// Values of this input left unknown as implausible (where, which, why):
    /// the analysis repeats them among its notes, so no value is dropped
    /// silently.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded: Vec<String>,
}

/// Everything kopt knows about one workload, merged from one or more inputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Profile {
    pub device: Device,
    pub launches: Vec<KernelLaunch>,
    pub sources: Vec<Source>,
    /// A timeline (trace), when one of the inputs was a trace.
    pub timeline: Option<crate::Timeline>,
}

impl Metrics {
    /// AMD when the launch was read from AMD profiler output (it carries its
    /// wavefront size; NVIDIA launches never do), else NVIDIA.
    pub fn vendor(&self) -> crate::Vendor {
        if self.wavefront_size.is_some() {
            crate::Vendor::Amd
        } else {
            crate::Vendor::Nvidia
        }
    }
}

impl Profile {
    /// Keep only the kernels whose name `keep` accepts: the launches, the
    /// timeline's kernel activities and the launch calls that made them
    /// (joined by correlation), so the table, the timeline analysis and the
    /// graph prediction all describe the same kernels. Memory copies, syncs
    /// and other API calls stay: they are not kernels.
    pub fn retain_kernels(&mut self, keep: impl Fn(&str) -> bool) {
        self.launches.retain(|l| keep(&l.name));
        let Some(t) = self.timeline.as_mut() else {
            return;
        };
        use crate::{ActivityKind, ApiKind};
        let mut dropped = std::collections::HashSet::new();
        let mut kept = std::collections::HashSet::new();
        t.activities.retain(|a| {
            if a.kind != ActivityKind::Kernel {
                return true;
            }
            let k = keep(&a.name);
            if k {
                kept.insert(a.correlation);
            } else {
                dropped.insert(a.correlation);
            }
            k
        });
        // A correlation shared by a kept kernel (a graph launch runs many)
        // keeps its call.
        t.api_calls.retain(|c| {
            !matches!(c.kind, ApiKind::KernelLaunch | ApiKind::GraphLaunch)
                || !dropped.contains(&c.correlation)
                || kept.contains(&c.correlation)
        });
    }
}

#[cfg(test)]
mod retain_tests {
    use super::*;
    use crate::{ActivityKind, ApiCall, ApiKind, GpuActivity, Timeline};

    fn launch(id: u64, name: &str) -> KernelLaunch {
        KernelLaunch {
            id,
            name: name.into(),
            grid: Dim3::default(),
            block: Dim3::default(),
            stream: None,
            metrics: Metrics::default(),
            ncu_rules: Vec::new(),
        }
    }

    fn activity(kind: ActivityKind, name: &str, correlation: u64) -> GpuActivity {
        GpuActivity {
            kind,
            name: name.into(),
            start_ns: correlation as i64 * 100,
            end_ns: correlation as i64 * 100 + 10,
            device: 0,
            stream: 0,
            correlation,
            grid: None,
            block: None,
            bytes: None,
            copy: None,
        }
    }

    fn call(name: &str, correlation: u64) -> ApiCall {
        ApiCall {
            kind: ApiKind::of(name),
            name: name.into(),
            start_ns: correlation as i64 * 100 - 50,
            end_ns: correlation as i64 * 100 - 40,
            thread: 1,
            correlation,
            frame: None,
            op: None,
        }
    }

    #[test]
    fn retain_kernels_filters_launches_activities_and_their_launch_calls() {
        let mut p = Profile {
            device: crate::Device::unknown(),
            launches: vec![launch(1, "gemm"), launch(2, "softmax"), launch(3, "gemm")],
            sources: Vec::new(),
            timeline: Some(Timeline {
                activities: vec![
                    activity(ActivityKind::Kernel, "gemm", 1),
                    activity(ActivityKind::Kernel, "softmax", 2),
                    activity(ActivityKind::Memcpy, "Memcpy HtoD", 4),
                    activity(ActivityKind::Kernel, "gemm", 3),
                ],
                api_calls: vec![
                    call("hipLaunchKernel", 1),
                    call("hipLaunchKernel", 2),
                    call("hipLaunchKernel", 3),
                    call("hipMemcpy", 4),
                    // Same correlation as the dropped kernel, not a launch.
                    call("hipStreamSynchronize", 2),
                ],
                ..Timeline::default()
            }),
        };
        p.retain_kernels(|n| n == "gemm");
        let ids: Vec<u64> = p.launches.iter().map(|l| l.id).collect();
        assert_eq!(ids, [1, 3]);
        let t = p.timeline.as_ref().unwrap();
        let acts: Vec<(&str, u64)> = t
            .activities
            .iter()
            .map(|a| (a.name.as_str(), a.correlation))
            .collect();
        assert_eq!(acts, [("gemm", 1), ("Memcpy HtoD", 4), ("gemm", 3)]);
        let calls: Vec<(&str, u64)> = t
            .api_calls
            .iter()
            .map(|c| (c.name.as_str(), c.correlation))
            .collect();
        assert_eq!(
            calls,
            [
                ("hipLaunchKernel", 1),
                ("hipLaunchKernel", 3),
                ("hipMemcpy", 4),
                ("hipStreamSynchronize", 2)
            ]
        );
    }

    #[test]
    fn retain_kernels_keeps_a_graph_launch_that_still_runs_a_kept_kernel() {
        let mut p = Profile {
            device: crate::Device::unknown(),
            launches: Vec::new(),
            sources: Vec::new(),
            timeline: Some(Timeline {
                activities: vec![
                    activity(ActivityKind::Kernel, "gemm", 7),
                    activity(ActivityKind::Kernel, "softmax", 7),
                ],
                api_calls: vec![call("hipGraphLaunch", 7)],
                ..Timeline::default()
            }),
        };
        p.retain_kernels(|n| n == "gemm");
        let t = p.timeline.as_ref().unwrap();
        assert_eq!(t.activities.len(), 1);
        assert_eq!(t.api_calls.len(), 1);
    }
}
