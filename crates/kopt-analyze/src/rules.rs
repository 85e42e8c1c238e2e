//! Per-launch classification: Nsight Compute's own thresholds (DESIGN.md),
//! ordered so that a kernel at its roofline is never sent to micro-tuning and
//! a planted defect (uncoalesced access, bank conflicts) is named before the
//! unit it makes hot.

use kopt_model::{Bottleneck, BottleneckClass, Finding, HotUnit, Metrics, StallReason};

/// C or M at or above this: throughput bound (ncu SOLBottleneck).
pub const THROUGHPUT_BOUND_PCT: f64 = 80.0;
/// C and M below this: latency bound (ncu SOLBottleneck).
pub const LATENCY_BOUND_PCT: f64 = 60.0;
/// |C - M| at or above this: compute- or memory-leaning.
pub const LEANING_DIFF_PCT: f64 = 10.0;
/// Shared-memory bank conflicts matter from this share of wavefronts.
pub const BANK_CONFLICT_PCT: f64 = 10.0;
/// Excess global sectors from this share make uncoalescing the primary cause.
pub const UNCOALESCED_PRIMARY_PCT: f64 = 40.0;
/// ... and from this share a secondary finding.
pub const UNCOALESCED_FINDING_PCT: f64 = 15.0;
/// Tensor pipe at or above this: a tensor-core kernel.
pub const TENSOR_KERNEL_PCT: f64 = 60.0;
/// Theoretical occupancy below this is "low".
pub const LOW_OCCUPANCY_PCT: f64 = 50.0;
/// A kernel shorter than this is in launch-latency territory on current GPUs.
pub const TINY_KERNEL_NS: f64 = 10_000.0;
/// The share of a unit's peak a tuned kernel reaches in practice; estimates
/// of "time after the fix" use it as the attainable ceiling.
pub const ATTAINABLE_PCT: f64 = 90.0;

/// Active lanes per warp instruction at or below this: divergence is the
/// cause (at most half the lanes do work; ncu's ThreadDivergence rule).
pub const DIVERGENCE_PRIMARY_LANES: f64 = 16.0;
/// ... and below this a finding.
pub const DIVERGENCE_FINDING_LANES: f64 = 24.0;
/// Barrier + membar stalls from this share of all stall cycles make
/// synchronisation the cause, whatever the SM throughput says.
pub const SYNC_PRIMARY_SHARE_PCT: f64 = 40.0;
/// ... and from this share a finding.
pub const SYNC_FINDING_SHARE_PCT: f64 = 20.0;
/// Atomic L2 sectors from this share of global traffic make atomics the cause.
pub const ATOMICS_PRIMARY_PCT: f64 = 50.0;
/// ... and from this share a finding.
pub const ATOMICS_FINDING_PCT: f64 = 10.0;
/// The XU (special-function) pipe from this utilisation, the busiest pipe:
/// the transcendental math is the cause.
pub const XU_PRIMARY_PCT: f64 = 50.0;
/// A partial last wave that idles this share of the kernel's SM time or
/// more is the cause (e.g. 133 blocks on 132 SMs at 1 block/SM: 50%).
pub const PARTIAL_WAVE_PRIMARY: f64 = 0.25;
/// ... and from this share a finding.
pub const PARTIAL_WAVE_FINDING: f64 = 0.10;

/// Local-memory sectors from this share of all L1 global + local sectors
/// make register spills / local arrays the primary cause.
pub const LOCAL_PRIMARY_PCT: f64 = 20.0;
/// ... and from this share a secondary finding.
pub const LOCAL_FINDING_PCT: f64 = 5.0;

/// What the local-memory counters say about a launch.
#[derive(Debug, Clone, Copy)]
pub struct LocalMemory {
    /// Local sectors as a share of global + local L1 sectors, %.
    pub share_pct: f64,
    pub sectors: f64,
    /// Local load and store instructions executed, where collected.
    pub instructions: Option<f64>,
    pub primary: bool,
}

/// Local-memory traffic (register spills, per-thread arrays indexed at run
/// time), where the local sector counters were collected.
pub fn local_memory(m: &Metrics) -> Option<LocalMemory> {
    if m.local_ld_sectors.is_none() && m.local_st_sectors.is_none() {
        return None;
    }
    let local = m.local_ld_sectors.unwrap_or(0.0) + m.local_st_sectors.unwrap_or(0.0);
    let global = m.global_ld_sectors.unwrap_or(0.0) + m.global_st_sectors.unwrap_or(0.0);
    let share_pct = if local + global > 0.0 {
        100.0 * local / (local + global)
    } else {
        0.0
    };
    let instructions = match (m.local_ld_inst, m.local_st_inst) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
    };
    Some(LocalMemory {
        share_pct,
        sectors: local,
        instructions,
        primary: share_pct >= LOCAL_PRIMARY_PCT && local > 0.0,
    })
}

/// AMD: a launch read from rocprof output carries its wavefront size (64
/// on CDNA); NVIDIA launches never do. Decides the HIP / CDNA wording.
pub fn is_amd(m: &Metrics) -> bool {
    m.vendor() == kopt_model::Vendor::Amd
}

/// AMD roofline position (rocprof-compute's roofline): arithmetic intensity
/// in FLOP per HBM byte and the device's ridge point, where both are known.
pub fn amd_roofline(m: &Metrics) -> Option<(f64, f64)> {
    let flops = m.flops?;
    let ridge = m.ridge_flop_per_byte?;
    let bytes = m.dram_bytes_read.unwrap_or(0.0) + m.dram_bytes_write.unwrap_or(0.0);
    (bytes > 0.0 && is_amd(m)).then(|| (flops / bytes, ridge))
}

/// A bandwidth in the unit a reader expects.
pub fn format_rate(bytes_per_s: f64) -> String {
    use kopt_model::figure::figure;
    if !bytes_per_s.is_finite() {
        "n/a GB/s (not a finite rate)".into()
    } else if bytes_per_s >= 1e12 {
        format!("{} TB/s", figure(bytes_per_s / 1e12, 2))
    } else {
        format!("{} GB/s", figure(bytes_per_s / 1e9, 0))
    }
}

/// "SM 12%", or on AMD without VALU / MFMA counters, that compute was not counted.
fn compute_words(m: &Metrics, c: f64) -> String {
    if is_amd(m) && m.sm_pct.is_none() {
        "compute not counted (no VALU / MFMA counters)".to_string()
    } else {
        format!("SM {}", pct(c))
    }
}

/// The checks kopt could not run on a launch for lack of counters, each
/// with what it needs.
pub fn checks_not_run(m: &Metrics) -> Vec<String> {
    if has_no_counters(m) {
        return vec![
            "every counter-based check: no counters were collected for this kernel, only its time (and grid) is known".into(),
        ];
    }
    let mut out = Vec::new();
    let mut missing = |absent: bool, what: &str| {
        if absent {
            out.push(what.to_string());
        }
    };
    missing(
        m.dram_pct.is_none() && m.dram_bytes_read.is_none() && m.dram_bytes_per_s.is_none(),
        "DRAM roofline: needs dram__throughput.avg.pct_of_peak_sustained_elapsed / dram__bytes_read.sum",
    );
    missing(
        excess_sector_pct(m).is_none(),
        "coalescing: needs the L1 sector counters (l1tex__t_sectors_pipe_lsu_mem_global_op_ld/st.sum with smsp__sass_data_bytes_mem_global_op_ld/st.sum)",
    );
    missing(
        conflict_pct(m).is_none(),
        "shared-memory bank conflicts: needs l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld/st.sum and the shared wavefront counters",
    );
    missing(
        m.stalls.is_empty(),
        "warp stall reasons: needs smsp__average_warps_issue_stalled_*_per_issue_active.ratio",
    );
    missing(
        m.occupancy_theoretical_pct.is_none() && m.occupancy_limit_registers.is_none(),
        "occupancy: needs sm__maximum_warps_per_active_cycle_pct and launch__occupancy_limit_*",
    );
    missing(
        [m.tensor_pct, m.fma_pct, m.alu_pct, m.fp64_pct]
            .iter()
            .all(Option::is_none),
        "pipe utilisation (tensor / FP32 / ALU): needs sm__pipe_*_cycles_active",
    );
    missing(
        local_memory(m).is_none(),
        "register spills / local memory: needs l1tex__t_sectors_pipe_lsu_mem_local_op_ld/st.sum",
    );
    out
}

/// The root cause with a note where the class rests on partial evidence:
/// the checks that could have named another cause did not run.
pub fn with_partial_evidence(cause: &str, class: BottleneckClass, m: &Metrics) -> String {
    use BottleneckClass as C;
    if has_no_counters(m) {
        return cause.to_string();
    }
    let mut gaps = Vec::new();
    let memory_like = matches!(class, C::Memory | C::Latency | C::Balanced | C::Occupancy);
    if memory_like && excess_sector_pct(m).is_none() {
        gaps.push("coalescing (no L1 sector counters)");
    }
    if memory_like && conflict_pct(m).is_none() && m.l1_pct.is_some_and(|p| p >= 40.0) {
        gaps.push("shared-memory bank conflicts (no wavefront counters)");
    }
    if matches!(class, C::Latency | C::Sync) && m.stalls.is_empty() {
        gaps.push("stall reasons (no stall counters)");
    }
    if gaps.is_empty() {
        cause.to_string()
    } else {
        format!(
            "{cause} (partial evidence: {} could not be checked)",
            gaps.join(", ")
        )
    }
}

/// Derived figures every rule reads.
#[derive(Debug, Clone, Default)]
pub struct Signals {
    pub c: f64,
    pub m: f64,
    pub waves: Option<f64>,
    pub conflict_pct: Option<f64>,
    pub excess_sector_pct: Option<f64>,
    pub occupancy_limiter: Option<&'static str>,
}

impl Signals {
    pub fn of(m: &Metrics) -> Self {
        let mem_units = [m.dram_pct, m.l2_pct, m.l1_pct];
        let mem = m
            .memory_pct
            .or_else(|| mem_units.iter().flatten().copied().reduce(f64::max))
            .unwrap_or(0.0);
        // ncu prints waves rounded to 0.01; recompute from the grid and the
        // occupancy limits where they are known.
        let exact = match (m.grid_size, m.sm_count, blocks_per_sm(m)) {
            (Some(g), Some(sms), Some(b)) if sms > 0.0 && b > 0.0 => Some(g / (sms * b)),
            _ => None,
        };
        // Without either, a grid smaller than the SM count is under one wave.
        let waves = exact
            .or(m.waves_per_sm)
            .or_else(|| Some(m.grid_size? / m.sm_count?));
        Signals {
            c: m.sm_pct.unwrap_or(0.0),
            m: mem,
            waves,
            conflict_pct: conflict_pct(m),
            excess_sector_pct: excess_sector_pct(m),
            occupancy_limiter: occupancy_limiter(m),
        }
    }
}

/// Bank-conflict wavefronts as a share of all shared wavefronts.
pub fn conflict_pct(m: &Metrics) -> Option<f64> {
    let conflicts = m.shared_ld_conflicts.unwrap_or(0.0) + m.shared_st_conflicts.unwrap_or(0.0);
    let wavefronts = m.shared_ld_wavefronts.unwrap_or(0.0) + m.shared_st_wavefronts.unwrap_or(0.0);
    let counted = (wavefronts > 0.0).then(|| 100.0 * conflicts / wavefronts);
    match (counted, m.shared_conflict_pct_from_rule) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b).or_else(|| conflict_pct_from_banks(m)),
    }
}

/// L1 data-pipe wavefronts from this utilisation, with the data banks
/// doing at most a quarter of it: each wavefront touches a few banks.
const BANK_ESTIMATE_WAVEFRONTS_PCT: f64 = 60.0;

/// Without conflict counters (ncu's basic set): when the L1 data pipe is
/// busy with wavefronts while its banks do a small share of that work and
/// L2/DRAM are quiet (the traffic stays inside the SM), the wavefronts are
/// replays of conflicting shared accesses: 1 - banks / wavefronts.
pub fn conflict_pct_from_banks(m: &Metrics) -> Option<f64> {
    let wf = m
        .l1_wavefronts_pct
        .filter(|w| *w >= BANK_ESTIMATE_WAVEFRONTS_PCT)?;
    let banks = m.l1_bank_reads_pct? + m.l1_bank_writes_pct.unwrap_or(0.0);
    let outside = m.l2_pct.unwrap_or(0.0).max(m.dram_pct.unwrap_or(0.0));
    (banks <= 0.25 * wf && outside < 30.0).then(|| 100.0 * (1.0 - banks / wf))
}

/// Sectors moved beyond what the threads asked for, as a share of all global sectors.
pub fn excess_sector_pct(m: &Metrics) -> Option<f64> {
    let requested =
        m.global_ld_bytes_requested.unwrap_or(0.0) + m.global_st_bytes_requested.unwrap_or(0.0);
    let moved = 32.0 * (m.global_ld_sectors.unwrap_or(0.0) + m.global_st_sectors.unwrap_or(0.0));
    let counted = (moved > 0.0 && m.global_ld_bytes_requested.is_some())
        .then(|| (100.0 * (1.0 - requested / moved)).clamp(0.0, 100.0));
    counted.or(m.uncoalesced_excess_pct_from_rule)
}

/// Resident blocks per SM: the smallest of the occupancy limits.
pub fn blocks_per_sm(m: &Metrics) -> Option<f64> {
    [
        m.occupancy_limit_blocks,
        m.occupancy_limit_registers,
        m.occupancy_limit_shared_mem,
        m.occupancy_limit_warps,
    ]
    .into_iter()
    .flatten()
    .reduce(f64::min)
}

/// Without an L1 throughput counter (a capture of a few metrics), the busy
/// memory unit is the shared/L1 pipe when most shared wavefronts are
/// conflicts and memory throughput is well above what DRAM and L2 show
/// (or they were not collected either) (#23).
fn shared_is_busiest_without_l1(m: &Metrics, s: &Signals) -> bool {
    if m.l1_pct.is_some() || s.conflict_pct.is_none_or(|c| c < 50.0) || s.m < 40.0 {
        return false;
    }
    let others = m.dram_pct.unwrap_or(0.0).max(m.l2_pct.unwrap_or(0.0));
    s.m >= others + LEANING_DIFF_PCT
}

/// The occupancy limiter: the launch__occupancy_limit_* with the fewest blocks.
pub fn occupancy_limiter(m: &Metrics) -> Option<&'static str> {
    [
        ("registers", m.occupancy_limit_registers),
        ("shared memory", m.occupancy_limit_shared_mem),
        ("warps per SM", m.occupancy_limit_warps),
        ("blocks per SM", m.occupancy_limit_blocks),
    ]
    .into_iter()
    .filter_map(|(n, v)| Some((n, v?)))
    .min_by(|a, b| a.1.total_cmp(&b.1))
    .map(|(n, _)| n)
}

/// The hottest memory unit.
fn memory_unit(m: &Metrics) -> Option<(HotUnit, f64)> {
    [
        (HotUnit::Dram, m.dram_pct),
        (HotUnit::L2, m.l2_pct),
        (HotUnit::L1Shared, m.l1_pct),
    ]
    .into_iter()
    .filter_map(|(u, v)| Some((u, v?)))
    .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// The hottest compute pipe, when a pipe counter explains the SM's load
/// (a 2% tensor pipe does not make a kernel tensor-bound).
fn compute_unit(m: &Metrics) -> Option<(HotUnit, f64)> {
    let sm = m.sm_pct.unwrap_or(0.0);
    [
        (HotUnit::Tensor, m.tensor_pct),
        (HotUnit::Fp32, m.fma_pct),
        (HotUnit::Alu, m.alu_pct),
        (HotUnit::Fp64, m.fp64_pct),
        (HotUnit::Xu, m.xu_pct),
        (HotUnit::Lsu, m.lsu_pct),
    ]
    .into_iter()
    .filter_map(|(u, v)| Some((u, v?)))
    .max_by(|a, b| a.1.total_cmp(&b.1))
    .filter(|(_, p)| *p >= 0.5 * sm)
}

/// The stall reason with the most cycles per issued instruction, and its share.
pub fn top_stall(m: &Metrics) -> Option<(StallReason, f64, f64)> {
    let total = stall_total(m);
    let (r, v) = m
        .stalls
        .iter()
        .filter(|(r, _)| *r != StallReason::NotSelected)
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    (total > 0.0).then(|| (*r, *v, 100.0 * v / total))
}

/// Lanes doing work per executed warp instruction (1..=32), where counted.
pub fn active_lanes(m: &Metrics) -> Option<f64> {
    m.active_threads_per_inst
        .filter(|l| *l > 0.0)
        .map(|l| l.min(32.0))
}

/// The share of issued lane slots that do useful work: 1 where not counted.
/// Pipe utilisation counts issued instructions; the useful work is that
/// scaled by the active lanes.
pub fn useful_share(m: &Metrics) -> f64 {
    active_lanes(m).map_or(1.0, |l| l / 32.0)
}

/// Stall cycles per issued instruction over all reasons: the larger of the
/// reasons' sum and ncu's "Warp Cycles Per Issued Instruction" (the details
/// page names only the top reasons).
fn stall_total(m: &Metrics) -> f64 {
    let sum: f64 = m.stalls.iter().map(|(_, v)| v).sum();
    sum.max(m.warp_cycles_per_issue.unwrap_or(0.0))
}

/// The share of stall cycles, %, that the given reasons take.
pub fn stall_share(m: &Metrics, reasons: &[StallReason]) -> Option<f64> {
    let total = stall_total(m);
    let part: f64 = m
        .stalls
        .iter()
        .filter(|(r, _)| reasons.contains(r))
        .map(|(_, v)| v)
        .sum();
    (total > 0.0 && !m.stalls.is_empty()).then(|| 100.0 * part / total)
}

/// Every stall reason with its cycles per issued instruction and share, largest first.
pub fn stall_breakdown(m: &Metrics) -> Vec<(StallReason, f64, f64)> {
    let total = stall_total(m);
    let mut out: Vec<(StallReason, f64, f64)> = m
        .stalls
        .iter()
        .filter(|(_, v)| *v > 0.0)
        .map(|(r, v)| (*r, *v, if total > 0.0 { 100.0 * v / total } else { 0.0 }))
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    out
}

/// Every pipe counter collected, % of its peak, busiest first.
pub fn pipes(m: &Metrics) -> Vec<(HotUnit, f64)> {
    let mut out: Vec<(HotUnit, f64)> = [
        (HotUnit::Tensor, m.tensor_pct),
        (HotUnit::Fp32, m.fma_pct),
        (HotUnit::Alu, m.alu_pct),
        (HotUnit::Fp64, m.fp64_pct),
        (HotUnit::Xu, m.xu_pct),
        (HotUnit::Lsu, m.lsu_pct),
    ]
    .into_iter()
    .filter_map(|(u, v)| Some((u, v?)))
    .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    out
}

/// What the atomic counters say about a launch.
#[derive(Debug, Clone, Copy)]
pub struct Atomics {
    /// Global atomic and reduction accesses at L1 (tag lookups).
    pub l1_accesses: f64,
    /// L2 sectors of atomics and reductions.
    pub l2_sectors: f64,
    /// Shared-memory atomic wavefronts.
    pub shared_wavefronts: f64,
    /// The larger of: atomic L2 sectors as a share of atomic + global L1
    /// sectors, and shared atomic wavefronts as a share of all shared
    /// wavefronts, %.
    pub share_pct: f64,
}

/// Atomics and reductions, where their counters were collected.
pub fn atomics(m: &Metrics) -> Option<Atomics> {
    let parts = [
        m.global_atom_accesses,
        m.global_red_accesses,
        m.l2_atom_sectors,
        m.l2_red_sectors,
        m.shared_atom_wavefronts,
        m.l2_atomic_pct,
    ];
    if parts.iter().all(Option::is_none) {
        return None;
    }
    let l1 = m.global_atom_accesses.unwrap_or(0.0) + m.global_red_accesses.unwrap_or(0.0);
    let l2 = m.l2_atom_sectors.unwrap_or(0.0) + m.l2_red_sectors.unwrap_or(0.0);
    let shared = m.shared_atom_wavefronts.unwrap_or(0.0);
    let global = m.global_ld_sectors.unwrap_or(0.0) + m.global_st_sectors.unwrap_or(0.0);
    let share = |part: f64, rest: f64| {
        if part + rest > 0.0 {
            100.0 * part / (part + rest)
        } else {
            0.0
        }
    };
    let shared_rest = m.shared_ld_wavefronts.unwrap_or(0.0) + m.shared_st_wavefronts.unwrap_or(0.0);
    // Without sector counters (ncu's basic set): the L2 atomic unit's
    // activity as a share of all L2 activity, once it does measurable work.
    let unit_share = match (m.l2_atomic_pct, m.l2_pct) {
        (Some(a), Some(l2)) if a >= 0.5 && l2 > 0.0 => (100.0 * a / l2).min(100.0),
        _ => 0.0,
    };
    Some(Atomics {
        l1_accesses: l1,
        l2_sectors: l2,
        shared_wavefronts: shared,
        share_pct: share(l2, global)
            .max(share(shared, shared_rest))
            .max(unit_share),
    })
}

/// The XU pipe's utilisation where no XU counter was collected (the details
/// page: ncu's pipe rule leaves XU out): ncu's "SM Busy" is high while no
/// named pipe explains it, warps wait on the MIO queue that feeds XU (or on
/// a throttled math pipe that is none of the named ones), and shared memory
/// (the queue's other user) is idle.
pub fn xu_inferred(m: &Metrics) -> Option<f64> {
    if m.xu_pct.is_some() {
        return None;
    }
    let busy = m.sm_busy_pct.filter(|b| *b >= XU_PRIMARY_PCT)?;
    let named = pipes(m).first().map_or(0.0, |(_, p)| *p);
    let (r, _, share) = top_stall(m)?;
    (named < 0.6 * busy
        && matches!(
            r,
            StallReason::MioThrottle | StallReason::ShortScoreboard | StallReason::MathPipeThrottle
        )
        && share >= 40.0
        && m.l1_pct.unwrap_or(0.0) < 20.0)
        .then_some(busy)
}

/// Atomics where no atomic counter was collected (the details page): the
/// LSU queue is full (LG throttle, most stall cycles) while no memory unit
/// moves data, which is what contended atomics or reductions look like.
/// Returns the LG-throttle share of stalls.
pub fn atomics_inferred(m: &Metrics) -> Option<f64> {
    if atomics(m).is_some() {
        return None;
    }
    let (r, _, share) = top_stall(m)?;
    let moving = [m.memory_pct, m.l1_pct, m.l2_pct, m.dram_pct]
        .into_iter()
        .flatten()
        .fold(0.0, f64::max);
    (r == StallReason::LgThrottle && share >= 50.0 && moving < 10.0).then_some(share)
}

/// The last wave of blocks: (waves, how full the last one is in %, the
/// share of the kernel's SM time left idle by it), for grids of more than
/// one wave. Each wave is taken to last as long as a full one.
pub fn last_wave(waves: Option<f64>) -> Option<(f64, f64, f64)> {
    let w = waves.filter(|w| *w > 1.0)?;
    let whole = w.floor();
    let part = w - whole;
    if part < 1e-6 {
        return Some((w, 100.0, 0.0));
    }
    Some((w, 100.0 * part, 1.0 - w / (whole + 1.0)))
}

/// The evidence behind a launch's verdict, for the report: None when no
/// part of it was counted.
pub fn evidence(m: &Metrics) -> Option<kopt_model::KernelEvidence> {
    let wave = last_wave(Signals::of(m).waves);
    let a = atomics(m);
    let e = kopt_model::KernelEvidence {
        stalls: stall_breakdown(m)
            .into_iter()
            .map(
                |(reason, cycles_per_issue, share_pct)| kopt_model::StallShare {
                    reason,
                    cycles_per_issue,
                    share_pct,
                },
            )
            .collect(),
        pipes: pipes(m)
            .into_iter()
            .map(|(pipe, pct)| kopt_model::PipeUse { pipe, pct })
            .collect(),
        active_threads_per_inst: active_lanes(m),
        divergent_branches: m.divergent_branches,
        global_atomic_accesses: a.map(|a| a.l1_accesses),
        l2_atomic_sectors: a.map(|a| a.l2_sectors),
        shared_atomic_wavefronts: a.map(|a| a.shared_wavefronts),
        waves: wave.map(|(w, _, _)| w),
        last_wave_fill_pct: wave.map(|(_, f, _)| f),
    };
    (e != kopt_model::KernelEvidence::default()).then_some(e)
}

/// One launch's verdict and the share of its time a fix could recover.
#[derive(Debug, Clone)]
pub struct LaunchVerdict {
    pub bottleneck: Bottleneck,
    pub root_cause: String,
    pub findings: Vec<Finding>,
    /// Share of this launch's time the class's fix could save, 0..=1; None
    /// when counters cannot say (at roofline, or launch latency of a tiny kernel).
    pub recoverable: Option<f64>,
    pub method: &'static str,
    pub tiny: bool,
}

fn pct(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.0}%")
    } else {
        format!("{v:.1}%")
    }
}

/// Headroom to the attainable ceiling given the busiest unit after the fix.
fn headroom(busiest_after_pct: f64) -> f64 {
    (1.0 - busiest_after_pct / ATTAINABLE_PCT).clamp(0.0, 1.0)
}

fn unit_label(u: HotUnit) -> &'static str {
    match u {
        HotUnit::Dram => "DRAM",
        HotUnit::L2 => "L2",
        HotUnit::L1Shared => "L1/shared",
        HotUnit::Tensor => "tensor-pipe",
        HotUnit::Fp32 => "FP32-pipe",
        HotUnit::Alu => "ALU-pipe",
        HotUnit::Fp64 => "FP64-pipe",
        HotUnit::Xu => "XU-pipe",
        HotUnit::Lsu => "LSU-pipe",
        HotUnit::Sm => "SM",
    }
}

/// True when no throughput counter was collected for the launch.
pub fn has_no_counters(m: &Metrics) -> bool {
    [
        m.sm_pct,
        m.memory_pct,
        m.dram_pct,
        m.l2_pct,
        m.l1_pct,
        m.tensor_pct,
    ]
    .iter()
    .all(Option::is_none)
}

/// The class of a launch known only by its time and grid (a trace): a tiny
/// launch on a small grid is still recognisable, anything else is unknown.
/// `classify` gives the same class, with the text; this is the cheap part for
/// traces with millions of launches.
pub fn class_without_counters(m: &Metrics) -> BottleneckClass {
    let duration = m.duration_ns.unwrap_or(0.0);
    let waves = Signals::of(m).waves;
    if duration > 0.0 && duration < TINY_KERNEL_NS && waves.is_some_and(|w| w < 1.0) {
        BottleneckClass::SmallGrid
    } else {
        BottleneckClass::Unknown
    }
}

/// One launch being classified: its metrics, the signals derived from
/// them, and the findings gathered by the stages so far.
struct Judge<'a> {
    m: &'a Metrics,
    s: Signals,
    duration: f64,
    tiny: bool,
    hottest: f64,
    findings: Vec<Finding>,
}

impl<'a> Judge<'a> {
    fn new(m: &'a Metrics) -> Self {
        let s = Signals::of(m);
        let duration = m.duration_ns.unwrap_or(0.0);
        let hottest = s.c.max(s.m);
        Judge {
            m,
            s,
            duration,
            tiny: duration > 0.0 && duration < TINY_KERNEL_NS,
            hottest,
            findings: Vec::new(),
        }
    }

    /// The verdict, carrying the findings gathered so far.
    fn verdict(
        &mut self,
        class: BottleneckClass,
        unit: Option<(HotUnit, f64)>,
        cause: String,
        recoverable: Option<f64>,
        method: &'static str,
    ) -> LaunchVerdict {
        let unit_pct = unit.map(|(_, p)| p);
        // At the roofline only when the useful work is near peak: a pipe
        // busy with instructions whose lanes mostly idle is not.
        let useful = if class == BottleneckClass::Compute {
            useful_share(self.m)
        } else {
            1.0
        };
        LaunchVerdict {
            bottleneck: Bottleneck {
                class,
                unit: unit.map(|(u, _)| u),
                unit_pct,
                at_roofline: unit_pct.unwrap_or(self.hottest) * useful >= THROUGHPUT_BOUND_PCT
                    && matches!(class, BottleneckClass::Memory | BottleneckClass::Compute),
            },
            root_cause: cause,
            findings: std::mem::take(&mut self.findings),
            recoverable,
            method,
            tiny: self.tiny,
        }
    }
}

/// A launch's bottleneck class, root cause and findings: the stages below
/// in order, the first that decides giving the verdict; findings of the
/// stages before it ride along.
pub fn classify(m: &Metrics) -> LaunchVerdict {
    if has_no_counters(m) {
        return without_counters(m);
    }
    let mut j = Judge::new(m);
    dominant_stall(&mut j);
    let stages: [fn(&mut Judge) -> Option<LaunchVerdict>; 9] = [
        grid_fill,
        tensor_or_memory_access,
        bank_conflicts,
        divergence,
        atomics_contention,
        barriers,
        special_function_pipe,
        throughput_bound,
        latency_bound,
    ];
    for stage in stages {
        if let Some(v) = stage(&mut j) {
            return v;
        }
    }
    leaning_or_balanced(&mut j)
}

/// The verdict of a launch without counters: a tiny launch on a small
/// grid, else unknown.
fn without_counters(m: &Metrics) -> LaunchVerdict {
    let duration = m.duration_ns.unwrap_or(0.0);
    if class_without_counters(m) == BottleneckClass::SmallGrid {
        return LaunchVerdict {
            bottleneck: Bottleneck {
                class: BottleneckClass::SmallGrid,
                unit: None,
                unit_pct: None,
                at_roofline: false,
            },
            root_cause: format!(
                "Tiny launch: {} block(s) on {} {} for {:.1} us (from the timeline; no counters)",
                m.grid_size.map_or("?".into(), |g| format!("{g:.0}")),
                m.sm_count.map_or("?".into(), |g| format!("{g:.0}")),
                m.vendor().units(),
                duration / 1e3
            ),
            findings: Vec::new(),
            recoverable: None,
            method: "",
            tiny: true,
        };
    }
    LaunchVerdict {
        bottleneck: Bottleneck {
            class: BottleneckClass::Unknown,
            unit: None,
            unit_pct: None,
            at_roofline: false,
        },
        root_cause:
            "No counters: only its time is known (a trace, or not among the kernels profiled in depth)"
                .into(),
        findings: Vec::new(),
        recoverable: None,
        method: "",
        tiny: false,
    }
}

/// The stall that dominates a kernel far from any roofline, as a finding.
fn dominant_stall(j: &mut Judge) {
    let m = j.m;
    let hottest = j.hottest;
    // The stall that dominates a kernel far from any roofline: ncu's
    // CPIStall rule names it, so the report does too (barriers have their
    // own finding; near a roofline the busy unit is the story).
    if let Some((r, cycles, share)) = top_stall(m).filter(|(r, _, share)| {
        *share >= 50.0
            && hottest < LATENCY_BOUND_PCT
            && !matches!(r, StallReason::Barrier | StallReason::Membar)
    }) {
        j.findings.push(Finding {
            class: BottleneckClass::Latency,
            evidence: format!(
                "warps mostly {} ({cycles:.1} cycles per issued instruction, {} of stall cycles)",
                r.meaning(),
                pct(share)
            ),
        });
    }
}

/// Stages 1 and 1b: a grid under one wave, or a partial last wave.
fn grid_fill(j: &mut Judge) -> Option<LaunchVerdict> {
    let m = j.m;
    let s = j.s.clone();
    let hottest = j.hottest;
    let tiny = j.tiny;
    let duration = j.duration;
    // 1. Under one wave: nothing else matters until the grid fills the GPU.
    if let Some(w) = s.waves.filter(|w| *w < 1.0) {
        let grid = m.grid_size.map_or("?".into(), |g| format!("{g:.0}"));
        let sms = m.sm_count.map_or("?".into(), |g| format!("{g:.0}"));
        let units = m.vendor().units();
        if tiny {
            j.findings.push(Finding {
                class: BottleneckClass::LaunchOverhead,
                evidence: format!(
                    "runs {:.1} us: at this size the launch itself (host API call and GPU scheduling) can cost more than the work; a timeline is needed to measure it ({} serialises kernels)",
                    duration / 1e3,
                    m.vendor().counter_profiler()
                ),
            });
            return Some(j.verdict(
                BottleneckClass::SmallGrid,
                None,
                format!("Tiny launch: {grid} block(s) on {sms} {units} for {:.1} us (latency / launch bound)", duration / 1e3),
                None,
                "",
            ));
        }
        if let Some(e) = s
            .excess_sector_pct
            .filter(|e| *e >= UNCOALESCED_FINDING_PCT)
        {
            j.findings.push(Finding {
                class: BottleneckClass::Uncoalesced,
                evidence: format!(
                    "{} of global sectors moved are not used by the threads",
                    pct(e)
                ),
            });
        }
        let recoverable = headroom(hottest).min(1.0 - w);
        return Some(j.verdict(
            BottleneckClass::SmallGrid,
            None,
            format!("Small grid: {grid} blocks fill {} of one wave on {sms} {units}", pct(100.0 * w)),
            Some(recoverable),
            "time if the grid filled the GPU and ran at the attainable ceiling (min of roofline headroom and idle-SM share)",
        ));
    }

    // 1b. A partial last wave: most SMs idle while the last blocks run.
    let wave = last_wave(s.waves);
    // A memory-bound kernel's last wave can still fill the memory system:
    // the idle-SM model holds where the SMs, not DRAM, set the pace.
    let sm_paced = s.m < LATENCY_BOUND_PCT || s.c >= s.m;
    if let Some((w, fill, idle)) = wave.filter(|(_, _, idle)| {
        *idle >= PARTIAL_WAVE_PRIMARY && hottest < THROUGHPUT_BOUND_PCT && sm_paced
    }) {
        // Few resident blocks per SM make each wave coarse: say what limits them.
        if let Some(o) = m
            .occupancy_theoretical_pct
            .filter(|o| *o <= LOW_OCCUPANCY_PCT)
        {
            j.findings.push(occupancy_finding(o, s.occupancy_limiter));
        }
        return Some(j.verdict(
            BottleneckClass::PartialWave,
            None,
            format!(
                "Partial last wave: {} blocks make {w:.2} waves on {} SMs ({} resident per SM); the last wave is {} full, so about {} of the kernel's SM time is idle",
                m.grid_size.map_or("?".into(), |g| format!("{g:.0}")),
                m.sm_count.map_or("?".into(), |g| format!("{g:.0}")),
                blocks_per_sm(m).map_or("?".into(), |b| format!("{b:.0}")),
                pct(fill),
                pct(100.0 * idle)
            ),
            Some(idle),
            "time if the same work ran in whole waves: waves / ceil(waves) of now",
        ));
    }
    if let Some((w, fill, idle)) = wave.filter(|(_, _, idle)| *idle >= PARTIAL_WAVE_FINDING) {
        j.findings.push(Finding {
            class: BottleneckClass::PartialWave,
            evidence: format!(
                "{w:.2} waves: the last wave is {} full, about {} of SM time idle",
                pct(fill),
                pct(100.0 * idle)
            ),
        });
    }
    None
}

/// Stages 2 to 3b: the tensor pipe, uncoalesced access, local memory.
fn tensor_or_memory_access(j: &mut Judge) -> Option<LaunchVerdict> {
    let m = j.m;
    let s = j.s.clone();
    let excess = s.excess_sector_pct;
    // 2. Tensor-core kernels: judged by the tensor pipe, whatever feeds it.
    if let Some(t) = m.tensor_pct.filter(|t| *t >= TENSOR_KERNEL_PCT) {
        let at = t >= THROUGHPUT_BOUND_PCT;
        let cause = if at {
            format!("Tensor-core bound at {} of peak (at roofline)", pct(t))
        } else {
            format!(
                "Tensor-core kernel at {} of peak, below the roofline",
                pct(t)
            )
        };
        return Some(j.verdict(
            BottleneckClass::Compute,
            Some((HotUnit::Tensor, t)),
            cause,
            (!at).then(|| headroom(t)),
            "roofline headroom of the tensor pipe",
        ));
    }

    // 3. Uncoalesced global access makes memory look busy with wasted sectors.
    if let Some(e) = excess.filter(|e| *e >= UNCOALESCED_PRIMARY_PCT && (s.m >= 40.0 || s.m >= s.c))
    {
        let unit = memory_unit(m);
        return Some(j.verdict(
            BottleneckClass::Uncoalesced,
            unit,
            format!(
                "Uncoalesced global access: {} of the sectors moved are never used (memory {} busy)",
                pct(e),
                pct(s.m)
            ),
            Some((e / 100.0) * (s.m / ATTAINABLE_PCT).min(1.0)),
            "excess sectors removed from memory-bound time",
        ));
    }
    // 3b. Local memory: spilled registers or per-thread arrays indexed at
    // run time turn register accesses into L1/L2/DRAM traffic.
    let local = local_memory(m);
    if let Some(l) = local.filter(|l| l.primary) {
        let (class, unit) = if s.m >= s.c {
            (BottleneckClass::Memory, memory_unit(m))
        } else {
            (BottleneckClass::Latency, None)
        };
        let inst = l.instructions.map_or(String::new(), |i| {
            format!(", {i:.0} local load/store instructions")
        });
        return Some(j.verdict(
            class,
            unit,
            format!(
                "Local-memory traffic (register spills or per-thread arrays indexed at run time): {} of the L1 sectors moved are local{inst}, {} registers per thread; memory {} busy",
                pct(l.share_pct),
                m.registers_per_thread.map_or("?".into(), |r| format!("{r:.0}")),
                pct(s.m)
            ),
            Some((l.share_pct / 100.0) * (s.m / ATTAINABLE_PCT).clamp(0.1, 1.0)),
            "local-memory sectors removed from the memory time",
        ));
    }
    if let Some(l) = local.filter(|l| l.share_pct >= LOCAL_FINDING_PCT) {
        j.findings.push(Finding {
            class: BottleneckClass::Memory,
            evidence: format!(
                "{} of L1 sectors are local memory (register spills or run-time-indexed per-thread arrays)",
                pct(l.share_pct)
            ),
        });
    }
    if let Some(e) = excess.filter(|e| *e >= UNCOALESCED_FINDING_PCT) {
        j.findings.push(Finding {
            class: BottleneckClass::Uncoalesced,
            evidence: format!(
                "{} of global sectors moved are not used by the threads",
                pct(e)
            ),
        });
    }
    None
}

/// Stage 4: shared-memory bank conflicts.
fn bank_conflicts(j: &mut Judge) -> Option<LaunchVerdict> {
    let m = j.m;
    let s = j.s.clone();
    let conflicts = s.conflict_pct.filter(|p| *p >= BANK_CONFLICT_PCT);
    // On AMD the LDS is its own unit: its utilisation decides.
    let shared_matters = m.l1_pct.is_some_and(|p| p >= 40.0)
        || m.shared_conflict_pct_from_rule.is_some()
        || m.lds_pct.is_some_and(|p| p >= 40.0)
        || shared_is_busiest_without_l1(m, &s);
    // 4. Bank conflicts serialise shared-memory access.
    if let Some(cp) = conflicts.filter(|_| shared_matters) {
        let next = m
            .dram_pct
            .unwrap_or(0.0)
            .max(m.l2_pct.unwrap_or(0.0))
            .max(s.c);
        return Some(j.verdict(
            BottleneckClass::BankConflict,
            Some((HotUnit::L1Shared, m.l1_pct.unwrap_or(s.m))),
            format!(
                "Shared-memory bank conflicts: {} of shared wavefronts are conflicts (L1/shared {} busy, DRAM {})",
                pct(cp),
                pct(m.l1_pct.unwrap_or(s.m)),
                pct(m.dram_pct.unwrap_or(0.0))
            ),
            Some(headroom(next).min(cp / 100.0)),
            "time if the kernel became bound by its next-busiest unit (DRAM/L2/SM) at the attainable ceiling",
        ));
    }
    if let Some(cp) = conflicts {
        j.findings.push(Finding {
            class: BottleneckClass::BankConflict,
            evidence: format!("{} of shared wavefronts are bank conflicts", pct(cp)),
        });
    }
    None
}

/// Stage 4b: divergence or partial warps.
fn divergence(j: &mut Judge) -> Option<LaunchVerdict> {
    let m = j.m;
    let s = j.s.clone();
    let lanes = active_lanes(m);
    let busiest_pipe = pipes(m).first().copied();
    let memory_at_peak = s.m >= THROUGHPUT_BOUND_PCT && s.m > s.c;
    // 4b. Divergence: most lanes of each issued instruction do nothing.
    if let Some(l) = lanes.filter(|l| *l <= DIVERGENCE_PRIMARY_LANES && !memory_at_peak) {
        let after = (l / 32.0).max(s.m / ATTAINABLE_PCT).min(1.0);
        let branches = m
            .divergent_branches
            .filter(|b| *b > 0.0)
            .map_or(String::new(), |b| {
                format!(", {b:.0} divergent branch targets")
            });
        // Blocks of fewer than 32 threads idle lanes without any branch.
        let what = match m.block_size.filter(|b| *b < 32.0) {
            Some(b) => format!("Partial warps (blocks of {b:.0} threads)"),
            None => "Thread divergence".to_string(),
        };
        return Some(j.verdict(
            BottleneckClass::Divergence,
            busiest_pipe.filter(|(_, p)| *p > 0.0),
            format!(
                "{what}: {l:.1} of 32 lanes active per instruction{branches}; the SM issues {:.0}x the instructions the useful work needs (SM {}, busiest pipe {})",
                32.0 / l,
                pct(s.c),
                busiest_pipe.map_or("?".into(), |(u, p)| format!("{} {}", unit_label(u), pct(p)))
            ),
            Some(1.0 - after),
            "useful / issued lane slots: time if every lane of each instruction did work, floored by the memory time",
        ));
    }
    if let Some(l) = lanes.filter(|l| *l < DIVERGENCE_FINDING_LANES) {
        j.findings.push(Finding {
            class: BottleneckClass::Divergence,
            evidence: format!(
                "{l:.1} of 32 lanes active per instruction (divergence or partial warps)"
            ),
        });
    }
    None
}

/// Stage 4c: atomics carrying the traffic, counted or inferred.
fn atomics_contention(j: &mut Judge) -> Option<LaunchVerdict> {
    let m = j.m;
    let s = j.s.clone();
    let atomic = atomics(m);
    // 4c. Atomics: global or shared atomics carry the traffic and serialise
    // where many threads hit the same addresses.
    // A compute kernel that ends with one atomic per block has a large
    // atomic share of a little traffic: its warps do not wait on memory.
    let waits_on_memory = top_stall(m).is_none_or(|(r, _, _)| {
        matches!(
            r,
            StallReason::LgThrottle
                | StallReason::LongScoreboard
                | StallReason::Membar
                | StallReason::MioThrottle
                | StallReason::ShortScoreboard
        )
    });
    if let Some(a) = atomic.filter(|a| {
        a.share_pct >= ATOMICS_PRIMARY_PCT
            && waits_on_memory
            && !(s.c >= THROUGHPUT_BOUND_PCT && s.c > s.m)
    }) {
        let l2 = m
            .l2_pct
            .map_or(String::new(), |p| format!(", L2 {} busy", pct(p)));
        let mut counts: Vec<String> = [
            (a.l1_accesses, "global atomic requests"),
            (a.l2_sectors, "L2 atomic sectors"),
            (a.shared_wavefronts, "shared atomic wavefronts"),
        ]
        .into_iter()
        .filter(|(n, _)| *n > 0.0)
        .map(|(n, what)| format!("{n:.0} {what}"))
        .collect();
        if let Some(u) = m.l2_atomic_pct.filter(|u| *u > 0.0) {
            counts.push(format!("L2 atomic unit {} busy", pct(u)));
        }
        return Some(j.verdict(
            BottleneckClass::Atomics,
            memory_unit(m).filter(|(_, p)| *p > 0.0),
            format!(
                "Atomics: {} of the kernel's memory traffic is atomic ({}){l2}; many threads on few addresses serialise in L2 without using its bandwidth",
                pct(a.share_pct),
                counts.join(", ")
            ),
            Some((a.share_pct / 100.0) * 0.9),
            "atomic traffic removed from the memory time (per-warp or per-block partials leave one atomic per block), 90% at most",
        ));
    }
    if let Some(share) = atomics_inferred(m) {
        return Some(j.verdict(
            BottleneckClass::Atomics,
            None,
            format!(
                "Atomics or reductions contending (inferred: no atomic counters on this page): {} of warp stall cycles wait for the LSU queue, yet memory moves almost nothing (memory {}, L2 {}); the global memory instructions queue behind atomics on a few addresses",
                pct(share),
                pct(s.m),
                pct(m.l2_pct.unwrap_or(0.0))
            ),
            Some(0.9 * share / 100.0),
            "LSU-queue stall share removed (per-warp or per-block partials leave one atomic per block), 90% at most",
        ));
    }
    if let Some(a) = atomic.filter(|a| a.share_pct >= ATOMICS_FINDING_PCT) {
        j.findings.push(Finding {
            class: BottleneckClass::Atomics,
            evidence: format!(
                "{} of memory traffic is atomics or reductions",
                pct(a.share_pct)
            ),
        });
    }
    None
}

/// Stage 4d: warps waiting at barriers or fences.
fn barriers(j: &mut Judge) -> Option<LaunchVerdict> {
    let m = j.m;
    let s = j.s.clone();
    let sync_share = stall_share(m, &[StallReason::Barrier, StallReason::Membar]);
    let busiest_pipe = pipes(m).first().copied();
    let memory_at_peak = s.m >= THROUGHPUT_BOUND_PCT && s.m > s.c;
    // 4d. Barriers: warps wait at __syncthreads() (or fences) most of the
    // time. A busy SM figure does not clear it unless a pipe is near peak.
    let pipe_at_peak = busiest_pipe.is_some_and(|(_, p)| p >= THROUGHPUT_BOUND_PCT);
    if let Some(share) =
        sync_share.filter(|sh| *sh >= SYNC_PRIMARY_SHARE_PCT && !pipe_at_peak && !memory_at_peak)
    {
        let top = stall_breakdown(m)
            .into_iter()
            .find(|(r, _, _)| matches!(r, StallReason::Barrier | StallReason::Membar));
        let (r, cycles) = top.map_or((StallReason::Barrier, 0.0), |(r, c, _)| (r, c));
        let per_sm =
            blocks_per_sm(m).map_or(String::new(), |b| format!(", {b:.0} block(s) per SM"));
        return Some(j.verdict(
            BottleneckClass::Sync,
            None,
            format!(
                "Sync-bound: {} of warp stall cycles are {} ({cycles:.1} cycles per issued instruction){per_sm}; SM {}, memory {}",
                pct(share),
                r.meaning(),
                pct(s.c),
                pct(s.m)
            ),
            Some((share / 100.0).min(headroom(busiest_pipe.map_or(0.0, |(_, p)| p)).max(0.0))),
            "barrier share of stall cycles, capped by the busiest pipe's headroom",
        ));
    }
    if let Some(share) = sync_share.filter(|sh| *sh >= SYNC_FINDING_SHARE_PCT) {
        j.findings.push(Finding {
            class: BottleneckClass::Sync,
            evidence: format!(
                "{} of warp stall cycles are at barriers or fences",
                pct(share)
            ),
        });
    }
    None
}

/// Stage 4e: the special-function (XU) pipe.
fn special_function_pipe(j: &mut Judge) -> Option<LaunchVerdict> {
    let m = j.m;
    let busiest_pipe = pipes(m).first().copied();
    // 4e. The special-function (XU) pipe: transcendentals cap the kernel.
    let xu_counted = busiest_pipe
        .filter(|(u, p)| *u == HotUnit::Xu && *p >= XU_PRIMARY_PCT)
        .map(|(_, p)| p);
    let xu_guess = xu_inferred(m);
    if let Some(xu) = xu_counted.or(xu_guess) {
        let useful = xu * useful_share(m);
        let at = useful >= THROUGHPUT_BOUND_PCT;
        let mio = stall_share(m, &[StallReason::MioThrottle, StallReason::ShortScoreboard])
            .filter(|p| *p >= 10.0)
            .map_or(String::new(), |p| {
                format!(
                    "; {} of stalls wait on the MIO queue / short scoreboard it feeds",
                    pct(p)
                )
            });
        return Some(j.verdict(
            BottleneckClass::Compute,
            Some((HotUnit::Xu, xu)),
            format!(
                "Special-function (XU) pipe {} busy{}{}: sin/cos/exp/log/rsqrt and conversions run at 1/8 of the FMA rate{mio}",
                pct(xu),
                if xu_counted.is_none() {
                    " (inferred: SM busy with no FMA/ALU pipe near it, warps waiting on the MIO queue, shared memory idle)"
                } else {
                    ""
                },
                if at { " (at its roofline)" } else { "" }
            ),
            (!at).then(|| headroom(xu)),
            "roofline headroom of the XU pipe",
        ));
    }
    None
}

/// Stages 5 and 5b: at or near a roofline; AMD's roofline left of the ridge.
fn throughput_bound(j: &mut Judge) -> Option<LaunchVerdict> {
    let m = j.m;
    let s = j.s.clone();
    let hottest = j.hottest;
    let low_occupancy = m
        .occupancy_theoretical_pct
        .filter(|p| *p < LOW_OCCUPANCY_PCT);
    // 5. Throughput bound: at or near a roofline.
    if hottest >= THROUGHPUT_BOUND_PCT {
        let (class, unit) = if s.c >= s.m {
            (
                BottleneckClass::Compute,
                // No pipe explains the SM figure: name the busiest pipe
                // anyway (not a roofline) rather than "SM at peak".
                compute_unit(m)
                    .or_else(|| pipes(m).first().copied().filter(|(_, p)| *p > 0.0))
                    .or(Some((HotUnit::Sm, s.c))),
            )
        } else {
            (
                BottleneckClass::Memory,
                memory_unit(m).or(Some((HotUnit::Dram, s.m))),
            )
        };
        let (u, p) = unit.expect("set above");
        let at = p >= THROUGHPUT_BOUND_PCT;
        let cause = if at {
            format!(
                "{}-bound at {} of peak (at roofline)",
                unit_label(u),
                pct(p)
            )
        } else {
            format!(
                "{}-bound: {} throughput {}, busiest unit {} {}",
                if class == BottleneckClass::Compute {
                    "Compute"
                } else {
                    "Memory"
                },
                if class == BottleneckClass::Compute {
                    "SM"
                } else {
                    "memory"
                },
                pct(hottest),
                unit_label(u),
                pct(p)
            )
        };
        if let Some(o) = low_occupancy.filter(|_| !at) {
            j.findings.push(occupancy_finding(o, s.occupancy_limiter));
        }
        return Some(j.verdict(
            class,
            unit,
            cause,
            (!at).then(|| headroom(p)),
            "roofline headroom of the busiest unit",
        ));
    }

    // 5b. AMD: rocprof-compute's roofline. A kernel left of the ridge point
    // (fewer FLOPs per HBM byte than peak FLOP/s over peak bandwidth) is
    // memory bound however far below the roof it runs.
    if let Some((ai, ridge)) = amd_roofline(m).filter(|(ai, ridge)| ai < ridge && s.m >= s.c) {
        let dram = m.dram_pct.unwrap_or(s.m);
        let rate = m.dram_bytes_per_s.unwrap_or(0.0);
        let peak = if dram > 0.0 {
            format!(" of {}", format_rate(100.0 * rate / dram))
        } else {
            String::new()
        };
        return Some(j.verdict(
            BottleneckClass::Memory,
            Some((HotUnit::Dram, dram)),
            format!(
                "Memory-bound on the roofline: {ai:.2} FLOP per HBM byte, left of the ridge at {ridge:.1}; HBM at {}, {}{peak}",
                format_rate(rate),
                pct(dram)
            ),
            Some(headroom(dram)),
            "HBM roofline headroom: time if the kernel reached the attainable share of peak bandwidth",
        ));
    }
    None
}

/// Stage 6: neither side near its peak.
fn latency_bound(j: &mut Judge) -> Option<LaunchVerdict> {
    let m = j.m;
    let s = j.s.clone();
    let hottest = j.hottest;
    let low_occupancy = m
        .occupancy_theoretical_pct
        .filter(|p| *p < LOW_OCCUPANCY_PCT);
    // 6. Latency bound: neither side near its peak.
    if hottest < LATENCY_BOUND_PCT {
        let stall = top_stall(m);
        if let Some(o) = low_occupancy {
            let limiter = s.occupancy_limiter.unwrap_or("resources");
            let blocks = match s.occupancy_limiter {
                Some("registers") => m.occupancy_limit_registers,
                Some("shared memory") => m.occupancy_limit_shared_mem,
                Some("warps per SM") => m.occupancy_limit_warps,
                Some("blocks per SM") => m.occupancy_limit_blocks,
                _ => None,
            };
            let per_sm = blocks.map_or(String::new(), |b| format!(", {b:.0} block(s)/SM"));
            return Some(j.verdict(
                BottleneckClass::Occupancy,
                None,
                format!(
                    "Low occupancy: {} theoretical ({} achieved), limited by {limiter}{per_sm}; SM {}, memory {}",
                    pct(o),
                    pct(m.occupancy_achieved_pct.unwrap_or(o)),
                    pct(s.c),
                    pct(s.m)
                ),
                Some(headroom(hottest).min(1.0 - o / 100.0)),
                "roofline headroom, capped by the unused share of warp slots",
            ));
        }
        if let Some((r, _, share)) = stall.filter(|(r, _, share)| {
            matches!(r, StallReason::Barrier | StallReason::Membar) && *share >= 30.0
        }) {
            return Some(j.verdict(
                BottleneckClass::Sync,
                None,
                format!(
                    "Sync-bound: {} of warp stalls are {}",
                    pct(share),
                    r.meaning()
                ),
                Some(headroom(hottest)),
                "roofline headroom (upper bound)",
            ));
        }
        let why = stall.map_or(String::new(), |(r, _, share)| {
            format!("; warps mostly {} ({} of stalls)", r.meaning(), pct(share))
        });
        return Some(j.verdict(
            BottleneckClass::Latency,
            None,
            format!(
                "Latency-bound: {}, memory {}{why}",
                compute_words(m, s.c),
                pct(s.m)
            ),
            Some(headroom(hottest)),
            "roofline headroom (upper bound)",
        ));
    }
    None
}

/// Stage 7: between 60% and 80%, leaning one way or balanced.
fn leaning_or_balanced(j: &mut Judge) -> LaunchVerdict {
    let m = j.m;
    let s = j.s.clone();
    let hottest = j.hottest;
    let low_occupancy = m
        .occupancy_theoretical_pct
        .filter(|p| *p < LOW_OCCUPANCY_PCT);
    // 7. Between 60% and 80%: leaning one way, or balanced.
    if let Some(o) = low_occupancy {
        j.findings.push(occupancy_finding(o, s.occupancy_limiter));
    }
    if (s.c - s.m).abs() >= LEANING_DIFF_PCT {
        let (class, unit) = if s.c > s.m {
            (
                BottleneckClass::Compute,
                compute_unit(m).unwrap_or((HotUnit::Sm, s.c)),
            )
        } else {
            (
                BottleneckClass::Memory,
                memory_unit(m).unwrap_or((HotUnit::Dram, s.m)),
            )
        };
        return j.verdict(
            class,
            Some(unit),
            format!(
                "{}-leaning: {}, memory {}, below the {}% throughput bound",
                if class == BottleneckClass::Compute {
                    "Compute"
                } else {
                    "Memory"
                },
                compute_words(m, s.c),
                pct(s.m),
                THROUGHPUT_BOUND_PCT
            ),
            Some(headroom(hottest)),
            "roofline headroom of the busiest unit",
        );
    }
    j.verdict(
        BottleneckClass::Balanced,
        None,
        format!(
            "Balanced: SM {}, memory {}, neither saturated",
            pct(s.c),
            pct(s.m)
        ),
        Some(headroom(hottest)),
        "roofline headroom (upper bound)",
    )
}

fn occupancy_finding(theoretical: f64, limiter: Option<&str>) -> Finding {
    Finding {
        class: BottleneckClass::Occupancy,
        evidence: format!(
            "theoretical occupancy {} limited by {}",
            pct(theoretical),
            limiter.unwrap_or("resources")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_stage_decides_only_its_own_cause_and_findings_ride_along() {
        // The stages in turn give classify's verdict.
        let quiet = busy();
        let mut j = Judge::new(&quiet);
        let stages: [fn(&mut Judge) -> Option<LaunchVerdict>; 9] = [
            grid_fill,
            tensor_or_memory_access,
            bank_conflicts,
            divergence,
            atomics_contention,
            barriers,
            special_function_pipe,
            throughput_bound,
            latency_bound,
        ];
        let decided = stages
            .iter()
            .find_map(|stage| stage(&mut j))
            .unwrap_or_else(|| leaning_or_balanced(&mut j));
        assert_eq!(decided.root_cause, classify(&quiet).root_cause);
        // The grid stage passes a full grid on.
        assert!(grid_fill(&mut Judge::new(&quiet)).is_none());
        // Under one wave: the grid stage decides, later stages are not asked.
        let small = Metrics {
            grid_size: Some(66.0),
            ..busy()
        };
        let v = grid_fill(&mut Judge::new(&small)).expect("a small grid decides");
        assert_eq!(v.bottleneck.class, BottleneckClass::SmallGrid);
        assert_eq!(v.root_cause, classify(&small).root_cause);
        // A finding gathered before the deciding stage is carried by its verdict.
        let mut j = Judge::new(&quiet);
        j.findings.push(Finding {
            class: BottleneckClass::Latency,
            evidence: "planted".into(),
        });
        let v = leaning_or_balanced(&mut j);
        assert_eq!(v.findings.len(), 1);
        assert!(j.findings.is_empty());
        // No counters: the time alone, as before.
        let bare = Metrics {
            duration_ns: Some(2_000.0),
            ..Metrics::default()
        };
        assert_eq!(
            without_counters(&bare).bottleneck.class,
            classify(&bare).bottleneck.class
        );
    }

    /// A busy kernel with every counter of the targeted pass, quiet on all
    /// of them: each test below plants one cause.
    fn busy() -> Metrics {
        Metrics {
            duration_ns: Some(1e6),
            sm_pct: Some(55.0),
            memory_pct: Some(20.0),
            l1_pct: Some(20.0),
            l2_pct: Some(10.0),
            dram_pct: Some(5.0),
            grid_size: Some(1056.0),
            block_size: Some(256.0),
            sm_count: Some(132.0),
            occupancy_limit_blocks: Some(8.0),
            occupancy_limit_warps: Some(8.0),
            occupancy_theoretical_pct: Some(100.0),
            fma_pct: Some(50.0),
            alu_pct: Some(10.0),
            xu_pct: Some(0.0),
            lsu_pct: Some(5.0),
            active_threads_per_inst: Some(32.0),
            global_atom_accesses: Some(0.0),
            global_red_accesses: Some(0.0),
            l2_atom_sectors: Some(0.0),
            l2_red_sectors: Some(0.0),
            shared_atom_wavefronts: Some(0.0),
            global_ld_sectors: Some(1e6),
            global_st_sectors: Some(1e6),
            global_ld_bytes_requested: Some(32e6),
            global_st_bytes_requested: Some(32e6),
            stalls: vec![
                (StallReason::Wait, 4.0),
                (StallReason::LongScoreboard, 3.0),
                (StallReason::NotSelected, 2.0),
            ],
            ..Metrics::default()
        }
    }

    #[test]
    fn the_quiet_kernel_has_none_of_the_planted_causes() {
        let v = classify(&busy());
        assert_eq!(
            v.bottleneck.class,
            BottleneckClass::Latency,
            "{}",
            v.root_cause
        );
    }

    #[test]
    fn divergence_names_the_lanes_and_drops_the_roofline() {
        let mut m = busy();
        m.sm_pct = Some(99.0);
        m.fma_pct = Some(95.0);
        m.memory_pct = Some(1.0);
        m.active_threads_per_inst = Some(1.07);
        m.divergent_branches = Some(270_336.0);
        let v = classify(&m);
        assert_eq!(v.bottleneck.class, BottleneckClass::Divergence);
        assert!(!v.bottleneck.at_roofline);
        assert!(
            v.root_cause.contains("1.1 of 32 lanes active"),
            "{}",
            v.root_cause
        );
        // Gain: useful / issued lane slots, floored by the memory time.
        let r = v.recoverable.unwrap();
        assert!((r - (1.0 - 1.07 / 32.0)).abs() < 1e-3, "{r}");
        let mut fed = m.clone();
        fed.memory_pct = Some(45.0);
        let r = classify(&fed).recoverable.unwrap();
        assert!((r - 0.5).abs() < 1e-3, "{r}");
        // Blocks of 16 threads: the same lanes idle, named for what they are.
        let mut half = m.clone();
        half.active_threads_per_inst = Some(16.0);
        half.block_size = Some(16.0);
        let v = classify(&half);
        assert_eq!(v.bottleneck.class, BottleneckClass::Divergence);
        assert!(
            v.root_cause
                .starts_with("Partial warps (blocks of 16 threads)"),
            "{}",
            v.root_cause
        );
        // 20 of 32 lanes: a finding, not the cause.
        m.active_threads_per_inst = Some(20.0);
        let v = classify(&m);
        assert_ne!(v.bottleneck.class, BottleneckClass::Divergence);
        assert!(v
            .findings
            .iter()
            .any(|f| f.class == BottleneckClass::Divergence));
    }

    #[test]
    fn a_pipe_busy_with_idle_lanes_is_not_at_its_roofline() {
        // 24 of 32 lanes: FMA 95% busy issues 71% useful work.
        let mut m = busy();
        m.sm_pct = Some(96.0);
        m.fma_pct = Some(95.0);
        m.active_threads_per_inst = Some(24.0);
        let v = classify(&m);
        assert_eq!(v.bottleneck.class, BottleneckClass::Compute);
        assert!(!v.bottleneck.at_roofline, "{}", v.root_cause);
        m.active_threads_per_inst = Some(32.0);
        assert!(classify(&m).bottleneck.at_roofline);
    }

    #[test]
    fn barrier_stalls_make_a_busy_sm_sync_bound() {
        // The SM throughput figure is high (91%) but no pipe is near peak.
        let mut m = busy();
        m.sm_pct = Some(91.0);
        m.memory_pct = Some(50.0);
        m.l1_pct = Some(50.0);
        m.fma_pct = Some(13.0);
        m.alu_pct = Some(26.0);
        m.lsu_pct = Some(45.0);
        m.stalls = vec![
            (StallReason::Barrier, 12.8),
            (StallReason::MioThrottle, 3.5),
            (StallReason::ShortScoreboard, 3.2),
            (StallReason::NotSelected, 3.0),
        ];
        let v = classify(&m);
        assert_eq!(
            v.bottleneck.class,
            BottleneckClass::Sync,
            "{}",
            v.root_cause
        );
        assert!(v.root_cause.contains("__syncthreads()"), "{}", v.root_cause);
        assert!(v.recoverable.is_some_and(|r| r > 0.4));
        // With a pipe at its peak, the pipe is the story.
        m.fma_pct = Some(92.0);
        assert_ne!(classify(&m).bottleneck.class, BottleneckClass::Sync);
    }

    #[test]
    fn contended_atomics_are_named_from_their_counters() {
        let mut m = busy();
        m.sm_pct = Some(0.3);
        m.memory_pct = Some(1.6);
        m.l2_pct = Some(1.6);
        m.l1_pct = Some(1.1);
        m.fma_pct = Some(0.1);
        m.global_ld_sectors = Some(0.0);
        m.global_st_sectors = Some(0.0);
        m.global_red_accesses = Some(2.1e6);
        m.l2_red_sectors = Some(7.9e6);
        m.stalls = vec![
            (StallReason::LgThrottle, 4583.0),
            (StallReason::LongScoreboard, 918.0),
        ];
        let v = classify(&m);
        assert_eq!(
            v.bottleneck.class,
            BottleneckClass::Atomics,
            "{}",
            v.root_cause
        );
        assert!(v
            .root_cause
            .contains("100% of the kernel's memory traffic is atomic"));
        // ncu's basic set: only the L2 atomic unit's activity.
        let basic = Metrics {
            global_red_accesses: None,
            l2_red_sectors: None,
            l2_atom_sectors: None,
            global_atom_accesses: None,
            shared_atom_wavefronts: None,
            stalls: Vec::new(),
            l2_atomic_pct: Some(1.12),
            ..m.clone()
        };
        assert_eq!(classify(&basic).bottleneck.class, BottleneckClass::Atomics);
        // The details page: no atomic counter, the LSU queue full while nothing moves.
        let details = Metrics {
            l2_atomic_pct: None,
            ..basic.clone()
        };
        let mut details = details;
        details.stalls = vec![(StallReason::LgThrottle, 4583.0)];
        details.warp_cycles_per_issue = Some(5574.0);
        let v = classify(&details);
        assert_eq!(
            v.bottleneck.class,
            BottleneckClass::Atomics,
            "{}",
            v.root_cause
        );
        assert!(v.root_cause.contains("inferred"), "{}", v.root_cause);
        // A compute kernel ending in one atomic per block is not atomic-bound.
        let mut tail_atomic = busy();
        tail_atomic.sm_pct = Some(50.0);
        tail_atomic.global_ld_sectors = Some(0.0);
        tail_atomic.global_st_sectors = Some(0.0);
        tail_atomic.l2_red_sectors = Some(1056.0);
        assert_ne!(
            classify(&tail_atomic).bottleneck.class,
            BottleneckClass::Atomics
        );
    }

    #[test]
    fn the_special_function_pipe_is_named() {
        let mut m = busy();
        m.sm_pct = Some(97.0);
        m.xu_pct = Some(97.0);
        m.fma_pct = Some(33.0);
        m.stalls = vec![
            (StallReason::MioThrottle, 11.2),
            (StallReason::NotSelected, 2.6),
        ];
        let v = classify(&m);
        assert_eq!(v.bottleneck.class, BottleneckClass::Compute);
        assert_eq!(v.bottleneck.unit, Some(HotUnit::Xu));
        assert!(v.bottleneck.at_roofline);
        assert!(
            v.root_cause
                .starts_with("Special-function (XU) pipe 97% busy"),
            "{}",
            v.root_cause
        );
        // The details page has no XU counter: ncu's SM Busy, the MIO stall
        // and idle shared memory tell.
        m.xu_pct = None;
        m.sm_busy_pct = Some(96.9);
        m.l1_pct = Some(0.1);
        let v = classify(&m);
        assert_eq!(v.bottleneck.unit, Some(HotUnit::Xu), "{}", v.root_cause);
        assert!(v.root_cause.contains("inferred"));
    }

    #[test]
    fn a_half_empty_last_wave_is_named_with_its_cost() {
        let mut m = busy();
        m.grid_size = Some(133.0);
        m.block_size = Some(1024.0);
        m.occupancy_limit_blocks = Some(32.0);
        m.occupancy_limit_warps = Some(2.0);
        m.occupancy_limit_shared_mem = Some(1.0);
        m.occupancy_theoretical_pct = Some(50.0);
        m.sm_pct = Some(48.7);
        m.fma_pct = Some(91.0);
        let v = classify(&m);
        assert_eq!(
            v.bottleneck.class,
            BottleneckClass::PartialWave,
            "{}",
            v.root_cause
        );
        let (w, fill, idle) = last_wave(Signals::of(&m).waves).unwrap();
        assert!((w - 133.0 / 132.0).abs() < 1e-9);
        assert!(fill < 1.0 && (idle - 0.496).abs() < 1e-3);
        assert!((v.recoverable.unwrap() - idle).abs() < 1e-9);
        // Many waves: the tail costs little and is at most a finding.
        m.grid_size = Some(132.0 * 10.0 + 66.0);
        let v = classify(&m);
        assert_ne!(v.bottleneck.class, BottleneckClass::PartialWave);
        // Whole waves: nothing to say.
        assert_eq!(last_wave(Some(2.0)), Some((2.0, 100.0, 0.0)));
        assert_eq!(last_wave(Some(0.5)), None);
    }

    /// #23: a capture of a few metrics (no L1 throughput counter) with the
    /// conflict counters: 97% of shared wavefronts are conflicts and memory
    /// throughput 89% is the shared pipe, DRAM far below it.
    #[test]
    fn bank_conflicts_come_first_without_the_l1_counter() {
        let m = Metrics {
            duration_ns: Some(2e6),
            sm_pct: Some(8.0),
            memory_pct: Some(89.0),
            dram_pct: Some(20.0),
            grid_size: Some(16384.0),
            block_size: Some(256.0),
            sm_count: Some(132.0),
            shared_ld_conflicts: Some(65.5e6),
            shared_st_conflicts: Some(0.0),
            shared_ld_wavefronts: Some(67.6e6),
            shared_st_wavefronts: Some(2.1e6),
            ..Metrics::default()
        };
        let v = classify(&m);
        assert_eq!(
            v.bottleneck.class,
            BottleneckClass::BankConflict,
            "{}",
            v.root_cause
        );
        assert_eq!(v.bottleneck.unit, Some(HotUnit::L1Shared));
        // DRAM as busy as memory: the shared pipe is not shown to be the busy unit.
        let mut dram = m.clone();
        dram.dram_pct = Some(88.0);
        assert_eq!(classify(&dram).bottleneck.class, BottleneckClass::Memory);
        // ncu's basic set: no conflict counters, the L1 data pipe full of
        // wavefronts that touch few banks while L2 and DRAM idle.
        let basic = Metrics {
            shared_ld_conflicts: None,
            shared_st_conflicts: None,
            shared_ld_wavefronts: None,
            shared_st_wavefronts: None,
            l1_pct: Some(97.7),
            l2_pct: Some(2.8),
            dram_pct: Some(2.4),
            memory_pct: Some(96.8),
            l1_wavefronts_pct: Some(96.8),
            l1_bank_reads_pct: Some(2.8),
            l1_bank_writes_pct: Some(1.5),
            ..m
        };
        let v = classify(&basic);
        assert_eq!(
            v.bottleneck.class,
            BottleneckClass::BankConflict,
            "{}",
            v.root_cause
        );
        assert!(conflict_pct_from_banks(&basic).is_some_and(|p| p > 95.0));
    }

    /// A memory-leaning kernel whose L1 traffic is mostly local (spills).
    fn spilling() -> Metrics {
        Metrics {
            duration_ns: Some(200_000.0),
            sm_pct: Some(35.0),
            memory_pct: Some(70.0),
            l1_pct: Some(70.0),
            l2_pct: Some(55.0),
            dram_pct: Some(30.0),
            grid_size: Some(1_056.0),
            sm_count: Some(132.0),
            registers_per_thread: Some(255.0),
            global_ld_bytes_requested: Some(32.0 * 1e6),
            global_st_bytes_requested: Some(0.0),
            global_ld_sectors: Some(1e6),
            global_st_sectors: Some(0.0),
            local_ld_sectors: Some(2e6),
            local_st_sectors: Some(1e6),
            local_ld_inst: Some(4e5),
            local_st_inst: Some(2e5),
            ..Metrics::default()
        }
    }

    #[test]
    fn local_memory_traffic_is_named_with_its_own_fix() {
        let m = spilling();
        let v = classify(&m);
        assert!(
            v.root_cause.starts_with("Local-memory traffic"),
            "{}",
            v.root_cause
        );
        assert!(v.root_cause.contains("75%"), "{}", v.root_cause);
        assert!(v.recoverable.is_some_and(|r| r > 0.0));
        let l = local_memory(&m).unwrap();
        assert!(l.primary && (l.share_pct - 75.0).abs() < 1e-9);
        // Little local traffic: a finding, not the cause.
        let mut light = m.clone();
        light.local_ld_sectors = Some(6e4);
        light.local_st_sectors = Some(0.0);
        let v = classify(&light);
        assert!(!v.root_cause.contains("Local-memory"), "{}", v.root_cause);
        assert!(v
            .findings
            .iter()
            .any(|f| f.evidence.contains("local memory")));
    }

    /// vcopy on MI300X as rocprof-compute measured it (dispatch 0 of the fixture).
    fn amd_copy() -> Metrics {
        Metrics {
            duration_ns: Some(13_720.0),
            sm_pct: Some(0.1),
            valu_pct: Some(0.1),
            dram_pct: Some(23.0),
            dram_bytes_read: Some(8_403_904.0),
            dram_bytes_write: Some(8_388_608.0),
            dram_bytes_per_s: Some(1.224e12),
            grid_size: Some(4096.0),
            sm_count: Some(304.0),
            wavefront_size: Some(64.0),
            flops: Some(0.0),
            ridge_flop_per_byte: Some(163.4 / 5.3),
            ..Metrics::default()
        }
    }

    #[test]
    fn amd_kernel_left_of_the_ridge_is_memory_bound() {
        let v = classify(&amd_copy());
        assert_eq!(v.bottleneck.class, BottleneckClass::Memory);
        assert_eq!(v.bottleneck.unit, Some(HotUnit::Dram));
        assert!(!v.bottleneck.at_roofline);
        assert!(
            v.root_cause.contains("left of the ridge") && v.root_cause.contains("1.22 TB/s"),
            "{}",
            v.root_cause
        );
        assert!(v.root_cause.contains("of 5.32 TB/s"), "{}", v.root_cause);
        // Right of the ridge (or without the AMD marker) the SOL rules decide.
        let mut m = amd_copy();
        m.flops = Some(1e12);
        assert_eq!(classify(&m).bottleneck.class, BottleneckClass::Latency);
        let mut nv = amd_copy();
        nv.wavefront_size = None;
        assert_eq!(classify(&nv).bottleneck.class, BottleneckClass::Latency);
        // Without compute counters AMD text says so instead of "SM 0%".
        let mut bare = amd_copy();
        bare.flops = None;
        bare.sm_pct = None;
        let v = classify(&bare);
        assert!(
            v.root_cause.contains("compute not counted"),
            "{}",
            v.root_cause
        );
    }

    #[test]
    fn missing_counters_are_listed_and_mark_partial_evidence() {
        let mut m = spilling();
        m.local_ld_sectors = None;
        m.local_st_sectors = None;
        m.global_ld_sectors = None;
        m.global_st_sectors = None;
        m.global_ld_bytes_requested = None;
        m.global_st_bytes_requested = None;
        let checks = checks_not_run(&m);
        assert!(checks
            .iter()
            .any(|c| c.starts_with("coalescing: needs the L1 sector counters")));
        assert!(checks
            .iter()
            .any(|c| c.starts_with("register spills / local memory")));
        assert!(checks.iter().any(|c| c.starts_with("warp stall reasons")));
        let v = classify(&m);
        let cause = with_partial_evidence(&v.root_cause, v.bottleneck.class, &m);
        assert!(
            cause.contains("partial evidence: coalescing (no L1 sector counters)"),
            "{cause}"
        );
        // With every check's counters there is nothing to say.
        assert!(checks_not_run(&spilling())
            .iter()
            .all(|c| !c.starts_with("coalescing") && !c.starts_with("register spills")));
        let bare = Metrics {
            duration_ns: Some(1e5),
            ..Metrics::default()
        };
        assert_eq!(checks_not_run(&bare).len(), 1);
    }
}
