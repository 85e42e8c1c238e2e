//! The recommendation catalogue, drawn from the user's seeds: 000 (the
//! launch-overhead report), 001 (strategies), 002 (decision tree, options
//! A-H), 003 (hypotheses and likely fixes). Each entry is triggered by the
//! evidence of one class and carries a gain estimate where counters allow.

use kopt_model::{BottleneckClass, GainEstimate, HotUnit, Recommendation, StallReason};

use crate::rollup::KernelGroup;
use crate::rules::{is_amd, top_stall};

/// One strategy of the catalogue.
#[derive(Debug, Clone, Copy)]
pub struct Strategy {
    pub id: &'static str,
    pub title: &'static str,
    pub triggered_by: &'static [BottleneckClass],
    pub source: &'static str,
}

use BottleneckClass as C;

pub const CATALOGUE: &[Strategy] = &[
    Strategy {
        id: "capture_cuda_graph",
        title: "Capture the launch sequence in a CUDA graph",
        triggered_by: &[C::LaunchOverhead],
        source: "graph capture of a launch-bound pipeline (a MoE routing step went 57.0 -> 27.2 us); removing kernels that do no work",
    },
    Strategy {
        id: "fuse_or_graph_launches",
        title: "Fuse the tiny launches or capture them in a CUDA graph",
        triggered_by: &[C::SmallGrid, C::LaunchOverhead],
        source: "kernel elimination, graph capture, skipping no-op ops; persistent kernels",
    },
    Strategy {
        id: "fill_the_gpu",
        title: "Launch at least one full wave",
        triggered_by: &[C::SmallGrid],
        source: "block-size tuning; split-K or stream-K for GEMMs with few tiles; ncu's LaunchConfiguration rule",
    },
    Strategy {
        id: "coalesce_global_access",
        title: "Coalesce global memory access",
        triggered_by: &[C::Uncoalesced],
        source: "coalesced access (neighbouring threads, neighbouring addresses) and vectorized loads",
    },
    Strategy {
        id: "pad_or_swizzle_shared",
        title: "Pad or swizzle the shared-memory tile",
        triggered_by: &[C::BankConflict],
        source: "shared-memory padding or an XOR swizzle of the layout",
    },
    Strategy {
        id: "raise_occupancy",
        title: "Raise occupancy",
        triggered_by: &[C::Occupancy],
        source: "occupancy: fewer registers or less shared memory per block, smaller blocks",
    },
    Strategy {
        id: "hide_latency",
        title: "Put more independent work in flight",
        triggered_by: &[C::Latency],
        source: "more independent work in flight: loop unrolling, vectorized loads, prefetching (TMA on Hopper)",
    },
    Strategy {
        id: "reduce_synchronisation",
        title: "Cut barrier stalls",
        triggered_by: &[C::Sync],
        source: "rebalancing a pipeline: warp assignment, warp specialization",
    },
    Strategy {
        id: "regroup_divergent_work",
        title: "Regroup work so each warp takes one path",
        triggered_by: &[C::Divergence],
        source: "thread divergence: sort or bin work items by branch, warp-uniform conditions, predication of short branches; ncu's ThreadDivergence rule",
    },
    Strategy {
        id: "privatise_atomics",
        title: "Privatise the atomics: per-warp or per-block partials, then reduce",
        triggered_by: &[C::Atomics],
        source: "histogram and reduction privatisation: warp-aggregated atomics, shared-memory partials, one global atomic per block",
    },
    Strategy {
        id: "whole_waves",
        title: "Size the grid to whole waves",
        triggered_by: &[C::PartialWave],
        source: "wave quantisation: grid = SMs x resident blocks per SM (or a multiple), a persistent grid-stride loop, or smaller blocks; ncu's LaunchConfiguration rule",
    },
    Strategy {
        id: "cut_transcendentals",
        title: "Fewer transcendental operations, or cheaper variants",
        triggered_by: &[C::Compute],
        source: "special-function unit: hoist or tabulate sin/exp/log, fast-math intrinsics (__expf, __sinf, -use_fast_math), algebraic rewrites (exp(a)*exp(b) = exp(a+b)), FMA polynomials instead of XU",
    },
    Strategy {
        id: "cut_local_memory",
        title: "Keep per-thread data in registers (cut local-memory traffic)",
        triggered_by: &[C::Memory, C::Latency],
        source: "register pressure: fewer live values, shared memory as a cache, no spills",
    },
    Strategy {
        id: "move_fewer_bytes",
        title: "At the memory roofline: move fewer bytes",
        triggered_by: &[C::Memory],
        source: "moving fewer bytes: fusion, recomputation, lower precision",
    },
    Strategy {
        id: "tensor_roofline_do_less",
        title: "At the tensor roofline: fuse the epilogue or do less math",
        triggered_by: &[C::Compute],
        source: "epilogue fusion and cluster tuning for tensor-core kernels",
    },
    Strategy {
        id: "use_tensor_cores",
        title: "Move the math to tensor cores or cut instructions",
        triggered_by: &[C::Compute],
        source: "tensor cores; higher arithmetic intensity",
    },
    Strategy {
        id: "raise_hbm_bandwidth",
        title: "Raise achieved HBM bandwidth: more bytes in flight, a grid sized to the CUs",
        triggered_by: &[C::Memory],
        source: "vectorized loads and block-size tuning; rocprof-compute's roofline (AMD)",
    },
    Strategy {
        id: "library_call_settings",
        title: "Library kernel: change what it is handed (shapes, dtype, layout, settings), not its code",
        triggered_by: &[
            C::Memory,
            C::Compute,
            C::Latency,
            C::Occupancy,
            C::BankConflict,
            C::Uncoalesced,
            C::SmallGrid,
            C::Sync,
            C::Balanced,
            C::Divergence,
            C::Atomics,
            C::PartialWave,
        ],
        source: "library kernels: aligned shapes, bf16/TF32, channels_last, cudnn.benchmark, fused ops and torch.compile, graph capture",
    },
    Strategy {
        id: "autotune_config",
        title: "Autotune the launch configuration",
        triggered_by: &[C::Balanced, C::Memory, C::Compute],
        source: "autotuning the launch configuration (kopt tune)",
    },
];

pub fn strategy(id: &str) -> &'static Strategy {
    CATALOGUE
        .iter()
        .find(|s| s.id == id)
        .unwrap_or_else(|| panic!("catalogue has no strategy {id}"))
}

fn gain(group: &KernelGroup, saved_ns: f64, total_ns: f64, method: &str) -> GainEstimate {
    let kernel_ns = group.verdict.total_ns.max(1.0);
    GainEstimate {
        kernel_pct: 100.0 * saved_ns / kernel_ns,
        workload_pct: if total_ns > 0.0 {
            100.0 * saved_ns / total_ns
        } else {
            0.0
        },
        saved_ns,
        method: method.to_string(),
    }
}

/// The recommendations one kernel triggers (unranked).
pub fn recommend(group: &KernelGroup, total_ns: f64) -> Vec<Recommendation> {
    let v = &group.verdict;
    let recoverable = group
        .recoverable_ns
        .map(|ns| gain(group, ns, total_ns, group.recoverable_method));
    if let Some(lib) = v.library.as_ref().filter(|l| !l.caller_can_edit) {
        return library_advice(group, lib);
    }
    let local = crate::rules::local_memory(&group.representative.metrics).filter(|l| l.primary);
    if let Some(local) = local {
        return vec![local_memory_advice(group, local, recoverable)];
    }
    match v.bottleneck.class {
        C::SmallGrid
        | C::Uncoalesced
        | C::BankConflict
        | C::Occupancy
        | C::Sync
        | C::Divergence
        | C::Atomics
        | C::PartialWave => access_advice(group, recoverable),
        _ => pace_advice(group, recoverable),
    }
}

/// A recommendation of strategy `id` for the group's kernel (unranked).
fn emit(
    group: &KernelGroup,
    id: &str,
    evidence: String,
    action: String,
    gain: Option<GainEstimate>,
) -> Recommendation {
    let v = &group.verdict;
    let s = strategy(id);
    Recommendation {
        rank: 0,
        id: s.id.to_string(),
        title: s.title.to_string(),
        kernel: v.name.clone(),
        kernel_short: v.short_name.clone(),
        class: v.bottleneck.class,
        evidence,
        action,
        source: s.source.to_string(),
        gain,
        predicted_speedup: None,
    }
}

/// Library code: the class is a measurement, but the fixes of the
/// kernel's own code (access pattern, tiles, occupancy) are not the
/// caller's to make. At its roofline the library did its part: the
/// roofline advice, in what the caller controls, replaces the generic
/// advice about shapes and settings.
fn library_advice(group: &KernelGroup, lib: &kopt_model::KernelFamily) -> Vec<Recommendation> {
    let v = &group.verdict;
    let class = v.bottleneck.class;
    let mut out = Vec::new();
    let mut push = |id: &str, evidence: String, action: String, gain: Option<GainEstimate>| {
        out.push(emit(group, id, evidence, action, gain));
    };
    if let Some((id, evidence, action)) = library_at_roofline(group, lib) {
        push(id, evidence, action, None);
        if let Some(r) = out.last_mut() {
            r.source = "a library kernel at its roofline: less work around it and cheaper math, through what its caller controls (fusion by torch.compile or the library's epilogues, lower precision)".into();
        }
        return out;
    }
    if class != C::Unknown && class != C::LaunchOverhead {
        push(
            "library_call_settings",
            v.root_cause.clone(),
            crate::library::caller_advice(lib, &v.name),
            None,
        );
        if let Some(r) = out.last_mut() {
            r.title = format!(
                "{} {} kernel: change its inputs or settings, not its code",
                lib.library,
                lib.family.as_str()
            );
        }
    }
    out
}

/// Local memory (spills, run-time-indexed per-thread arrays) as the cause.
fn local_memory_advice(
    group: &KernelGroup,
    local: crate::rules::LocalMemory,
    recoverable: Option<GainEstimate>,
) -> Recommendation {
    let v = &group.verdict;
    let m = &group.representative.metrics;
    emit(
        group,
        "cut_local_memory",
        v.root_cause.clone(),
        format!(
            "Local memory is per-thread data the compiler could not keep in registers ({} registers per thread now). Index per-thread arrays with compile-time constants (unroll the loops that index them) so they stay in registers; move arrays indexed at run time to shared memory; keep fewer values live across loops (recompute, narrower types); check `-Xptxas -v` for spill stores/loads. __launch_bounds__ / -maxrregcount trade registers for occupancy: raise the register limit if spills come from a cap, lower it only if occupancy, not spills, is the limit. {:.0}% of the kernel's L1 sectors are local.",
            m.registers_per_thread.map_or("?".into(), |r| format!("{r:.0}")),
            local.share_pct
        ),
        recoverable,
    )
}

/// Advice for how the kernel uses the GPU: grid and waves, access
/// patterns, occupancy, barriers, divergence, atomics.
fn access_advice(group: &KernelGroup, recoverable: Option<GainEstimate>) -> Vec<Recommendation> {
    let v = &group.verdict;
    let m = &group.representative.metrics;
    let class = v.bottleneck.class;
    let sms = m.sm_count.unwrap_or(0.0);
    let mut out = Vec::new();
    let mut push = |id: &str, evidence: String, action: String, gain: Option<GainEstimate>| {
        out.push(emit(group, id, evidence, action, gain));
    };
    match class {
        C::SmallGrid => {
            let per_sm = [m.occupancy_limit_blocks, m.occupancy_limit_registers, m.occupancy_limit_shared_mem, m.occupancy_limit_warps]
                .into_iter()
                .flatten()
                .reduce(f64::min);
            let wave = per_sm.map_or(String::new(), |b| format!(" (one wave here is {:.0} blocks: {sms:.0} SMs x {b:.0} blocks/SM)", sms * b));
            // The GEMM remedy only for a GEMM (#41: no kinds the input lacks).
            let gemm = v.library.as_ref().is_some_and(|f| f.family == kopt_model::LibraryFamily::Gemm)
                || v.name.to_ascii_lowercase().contains("gemm");
            push(
                "fill_the_gpu",
                format!("grid {} on {sms:.0} {}: {}", v.grid, m.vendor().units(), v.root_cause),
                if is_amd(m) {
                    format!(
                        "Size the grid from the device, not a constant: at least one workgroup per CU ({sms:.0} CUs here), ideally a full wave of workgroups{wave}. For a grid-stride loop launch hipDeviceProp_t::multiProcessorCount x hipOccupancyMaxActiveBlocksPerMultiprocessor workgroups{}",
                        if gemm { "; for a GEMM with few output tiles, split K or use stream-K (hipBLASLt / composable_kernel)." } else { "." }
                    )
                } else {
                    format!(
                        "Size the grid from the device, not a constant: at least one block per SM, ideally a full wave{wave}. For a grid-stride loop use SMs x blocks-per-SM from the occupancy API{}",
                        if gemm { "; for a GEMM with few output tiles, split K or use stream-K." } else { "." }
                    )
                },
                recoverable,
            );
        }
        C::Uncoalesced => push(
            "coalesce_global_access",
            v.root_cause.clone(),
            "Make neighbouring threads touch neighbouring addresses: change the layout (structure of arrays), stage strided or transposed access through shared memory, or sort gather indices; then vectorize (16-byte loads).".into(),
            recoverable,
        ),
        C::BankConflict => push(
            "pad_or_swizzle_shared",
            v.root_cause.clone(),
            if is_amd(m) {
                format!(
                    "LDS has 32 banks of 4 bytes: pad each LDS row by one dword (e.g. __shared__ float tile[64][65]) or XOR-swizzle the column index so the lanes of a wavefront hit different banks; prefer ds_read_b128 with a layout the compiler can keep conflict-free, and check SQ_LDS_BANK_CONFLICT before/after ({} conflicts per access now).",
                    m.lds_bank_conflicts_per_access.map_or("?".into(), |c| format!("{c:.2}"))
                )
            } else {
                "Pad each shared row by one element (e.g. tile[32][33]) or XOR-swizzle the column index so a warp's accesses land in 32 different banks; in CuTe/CUTLASS try 128B/64B/32B swizzles and profile the conflicts before/after.".into()
            },
            recoverable,
        ),
        C::Occupancy => {
            let limiter = v.occupancy_limiter.as_deref().unwrap_or("resources");
            let how = match limiter {
                "shared memory" => format!(
                    "cut shared memory per block ({:.0} KB now: smaller tiles, fewer pipeline stages) or give each block more threads to use it",
                    (m.shared_mem_static.unwrap_or(0.0) + m.shared_mem_dynamic.unwrap_or(0.0)) / 1024.0
                ),
                "registers" => format!(
                    "cut registers per thread ({:.0} now: __launch_bounds__, -maxrregcount, recompute instead of keeping values live)",
                    m.registers_per_thread.unwrap_or(0.0)
                ),
                "warps per SM" | "blocks per SM" => "change the block size so more warps fit on an SM".into(),
                _ => "free the resource that limits resident blocks".into(),
            };
            push(
                "raise_occupancy",
                v.root_cause.clone(),
                format!("Raise occupancy: {how}; alternatively keep more loads in flight per thread (unroll, vector loads) so fewer warps suffice."),
                recoverable,
            );
        }
        C::Sync => push(
            "reduce_synchronisation",
            v.root_cause.clone(),
            format!(
                "Fewer block-wide barriers: do more work between two __syncthreads() (several steps per barrier, double-buffered shared tiles), use warp-level sync where only a warp shares data (__syncwarp, shuffles, cooperative_groups tiles), and let more blocks share an SM ({} resident per SM now) so one block's wait is another's issue slot; for pipelines, split producer and consumer warps with asynchronous copies and mbarriers.",
                crate::rules::blocks_per_sm(m).map_or("?".into(), |b| format!("{b:.0}"))
            ),
            recoverable,
        ),
        C::Divergence => {
            let lanes = crate::rules::active_lanes(m).unwrap_or(32.0);
            let block = m
                .block_size
                .filter(|b| *b > 0.0 && b % 32.0 != 0.0)
                .map_or(String::new(), |b| {
                    format!(" The block size ({b:.0}) is not a multiple of 32: round it up first, so no warp starts with idle lanes.")
                });
            push(
                "regroup_divergent_work",
                v.root_cause.clone(),
                format!(
                    "{lanes:.0} of 32 lanes active: regroup work so a warp takes one path. Sort or bin the work items by the branch they take (one warp per case), make the condition warp-uniform (branch on warp index, not lane), turn short branches into selects, and move rare heavy paths into a second pass over a compacted list.{block} Gain: up to the useful/issued lane ratio ({:.0}x fewer instructions).",
                    32.0 / lanes.max(1.0)
                ),
                recoverable,
            );
        }
        C::Atomics => push(
            "privatise_atomics",
            v.root_cause.clone(),
            "Privatise: accumulate per warp (__reduce_add_sync / shuffles, or warp-aggregated atomics) or per block in shared memory, then one global atomic (or a second reduction kernel) per block; spread hot counters over several copies and sum them at the end. Atomics on a few addresses serialise in L2 however many threads issue them.".into(),
            recoverable,
        ),
        C::PartialWave => {
            let per_sm = crate::rules::blocks_per_sm(m);
            let wave = per_sm.map_or(String::new(), |b| format!(" ({:.0} blocks here: {sms:.0} SMs x {b:.0} per SM)", sms * b));
            push(
                "whole_waves",
                v.root_cause.clone(),
                format!(
                    "Size the grid to whole waves{wave}: split the work into a multiple of one wave, run a persistent grid-stride loop over exactly one wave, or use smaller blocks so more fit per SM and the last wave's remainder shrinks."
                ),
                recoverable,
            );
        }
        _ => {}
    }
    out
}

/// Advice for what sets the kernel's pace: a pipe, latency, a roofline,
/// launch overhead.
fn pace_advice(group: &KernelGroup, recoverable: Option<GainEstimate>) -> Vec<Recommendation> {
    let v = &group.verdict;
    let m = &group.representative.metrics;
    let class = v.bottleneck.class;
    let sms = m.sm_count.unwrap_or(0.0);
    let mut out = Vec::new();
    let mut push = |id: &str, evidence: String, action: String, gain: Option<GainEstimate>| {
        out.push(emit(group, id, evidence, action, gain));
    };
    match class {
        C::Compute if v.bottleneck.unit == Some(HotUnit::Xu) => push(
            "cut_transcendentals",
            v.root_cause.clone(),
            "The special-function unit (XU) does sin, cos, exp2, log2, rsqrt, rcp and type conversions at 16 lanes per clock per SM (1/8 of FMA): call fewer of them (hoist out of loops, tabulate, combine exp(a)*exp(b) into exp(a+b)), use the fast-math variants where accuracy allows (__expf, __sinf, __fdividef, -use_fast_math), or evaluate a short FMA polynomial instead.".into(),
            recoverable,
        ),
        C::Latency => {
            let stall = top_stall(m).map(|(r, _, _)| r);
            let how = match stall {
                Some(StallReason::LongScoreboard) => "more bytes in flight per thread: vectorized (16-byte) loads, unrolled loops, prefetch with cp.async or TMA",
                Some(StallReason::ShortScoreboard) | Some(StallReason::MioThrottle) => "less shared-memory and special-function pressure: fewer shared round-trips, register caching, intrinsics",
                Some(StallReason::LgThrottle) => "fewer, wider global memory instructions (vector loads)",
                Some(StallReason::Wait) | Some(StallReason::MathPipeThrottle) => "more independent instructions (unroll, several accumulators)",
                _ => "more independent work per warp and more warps",
            };
            push("hide_latency", v.root_cause.clone(), format!("Neither memory nor compute is busy: {how}."), recoverable);
        }
        C::Memory if v.bottleneck.at_roofline => push(
            "move_fewer_bytes",
            format!(
                "{} at {:.0}% of peak; {} of the workload",
                v.bottleneck.unit.map_or("memory", |u| u.as_str()),
                v.bottleneck.unit_pct.unwrap_or(0.0),
                pct(v.pct_of_total)
            ),
            format!(
                "Tuning cannot beat the roofline. Move fewer bytes: fuse with the kernel that produces or consumes this data, store in a narrower type (bf16/fp8), recompute instead of storing, or skip the pass. Every 10% fewer bytes saves about {:.1} us here ({} of the workload).",
                0.1 * v.total_ns / 1e3,
                pct(0.1 * v.pct_of_total)
            ),
            None,
        ),
        C::Compute if v.bottleneck.at_roofline && v.bottleneck.unit == Some(HotUnit::Tensor) => push(
            "tensor_roofline_do_less",
            format!("tensor pipe at {:.0}% of peak; {} of the workload", v.bottleneck.unit_pct.unwrap_or(0.0), pct(v.pct_of_total)),
            "The tensor cores are saturated: fuse the epilogue (bias, activation, residual) into this GEMM so no extra pass runs, use a lower precision (fp8) where accuracy allows, or do less math. Tile/cluster autotuning helps only shapes far from this one.".into(),
            None,
        ),
        C::Compute if v.bottleneck.at_roofline => push(
            "use_tensor_cores",
            format!(
                "{} pipe at {:.0}% of peak; {} of the workload",
                v.bottleneck.unit.map_or("SM", |u| u.as_str()),
                v.bottleneck.unit_pct.unwrap_or(0.0),
                pct(v.pct_of_total)
            ),
            if is_amd(m) {
                "The VALU is saturated: if this is matrix-like math, move it to the MFMA matrix cores (bf16/fp16/fp8 via hipBLASLt / rocBLAS, composable_kernel, __builtin_amdgcn_mfma_* intrinsics, or tl.dot in Triton on ROCm); otherwise cut instructions (packed FP32 v_pk_fma_f32, fast-math intrinsics, less index arithmetic).".into()
            } else {
                "The pipe is saturated: if this is matrix-like math, move it to tensor cores (tf32/bf16 via tl.dot, WMMA/WGMMA, cuBLAS); otherwise cut instructions (fused multiply-adds, fast-math intrinsics, less index arithmetic).".into()
            },
            None,
        ),
        C::Memory if is_amd(m) => {
            let grid = m.grid_size.unwrap_or(0.0);
            let per_cu = if sms > 0.0 { grid / sms } else { 0.0 };
            let tail = per_cu - per_cu.floor();
            let sizing = if sms > 0.0 && grid > 0.0 {
                format!(
                    " The grid is {grid:.0} workgroups on {sms:.0} CUs ({per_cu:.1} per CU{}).",
                    if tail > 0.0 && per_cu < 8.0 {
                        format!(": the last round leaves {:.0}% of the CUs idle; size it to a multiple of the CU count or use a grid-stride loop over CUs x resident workgroups", 100.0 * (1.0 - tail))
                    } else {
                        String::new()
                    }
                )
            } else {
                String::new()
            };
            push(
                "raise_hbm_bandwidth",
                v.root_cause.clone(),
                format!(
                    "Left of the ridge the kernel can only go as fast as HBM: put more bytes in flight per wavefront (16-byte loads: float4 / global_load_dwordx4, unrolled loops), keep enough wavefronts resident per CU (VGPRs, LDS per workgroup), and touch each byte once (fuse with the producer or consumer).{sizing}"
                ),
                recoverable,
            );
        }
        C::Memory | C::Compute | C::Balanced => push(
            "autotune_config",
            v.root_cause.clone(),
            "Below the roofline without a single defect: autotune block/tile sizes, num_warps and num_stages for this problem size, and cache the winner per shape.".into(),
            recoverable,
        ),
        C::Unknown => {}
        C::LaunchOverhead => push(
            "fuse_or_graph_launches",
            v.root_cause.clone(),
            if is_amd(m) {
                "Capture the launch sequence in a HIP graph (hipStreamBeginCapture / hipGraphLaunch; torch.cuda.graphs works on ROCm) or fuse the kernels.".into()
            } else {
                "Capture the launch sequence in a CUDA graph or fuse the kernels.".into()
            },
            recoverable,
        ),
        _ => {}
    }
    out
}

/// The timeline's graph-capture recommendation, from the predicted per-step
/// time after capture; None where the prediction gives no gain worth naming.
pub fn graph_capture(t: &kopt_model::TimelineSummary) -> Option<Recommendation> {
    let p = t.graph_prediction.as_ref()?;
    let s = strategy("capture_cuda_graph");
    let fmt = kopt_model::format_duration_ns;
    let saved_step = (p.eager_corrected_per_step_ns - p.graph_per_step_ns).max(0.0);
    let share = 100.0 * saved_step / p.eager_corrected_per_step_ns.max(1.0);
    let steps = t.iterations.unwrap_or(1).max(1) as f64;
    let sp = &p.speedup;
    let recorder = if p.recorder_overhead_per_step_ns > 0.0 {
        format!(
            " ({} recorded, less the recorder's {} per step)",
            fmt(p.eager_per_step_ns),
            fmt(p.recorder_overhead_per_step_ns)
        )
    } else {
        String::new()
    };
    let figures = format!(
        "Predicted {}x ({}): {} per step now{recorder}, {} after capture ({} GPU busy + {:.0} kernels x {} replay each).",
        kopt_model::figure::ratio(sp.estimate, 1),
        kopt_model::figure::ratio_range(sp.low, sp.high, 1),
        fmt(p.eager_corrected_per_step_ns),
        fmt(p.graph_per_step_ns),
        fmt(p.busy_per_step_ns),
        p.kernels_per_step,
        fmt(p.replay_ns_per_kernel),
    );
    Some(Recommendation {
        rank: 0,
        id: s.id.to_string(),
        title: s.title.to_string(),
        kernel: "the whole launch sequence".into(),
        kernel_short: format!("{} launches", t.kernel_launch_calls.max(t.kernels)),
        class: C::LaunchOverhead,
        evidence: format!("{} {figures}", t.verdict),
        action: format!(
            "Capture the steady-state step in a CUDA graph (torch.cuda.graphs / cudaStreamBeginCapture) and replay it; fuse or remove kernels that do almost no work; keep allocations and host syncs out of the captured region. {figures}"
        ),
        source: s.source.to_string(),
        gain: Some(GainEstimate {
            kernel_pct: share,
            workload_pct: share,
            saved_ns: saved_step * steps,
            method: format!(
                "predicted per step: {} -> {} ({}x, range {}); {}",
                fmt(p.eager_corrected_per_step_ns),
                fmt(p.graph_per_step_ns),
                kopt_model::figure::ratio(sp.estimate, 1),
                kopt_model::figure::ratio_range(sp.low, sp.high, 1),
                sp.model
            ),
        }),
        predicted_speedup: Some(sp.clone()),
    })
}

/// One recommendation for all tiny launches together: they are fused or
/// graph-captured as a sequence, not one kernel at a time (seed 000).
pub fn recommend_tiny(
    groups: &[&KernelGroup],
    total_ns: f64,
    timeline: Option<&kopt_model::TimelineSummary>,
) -> Option<Recommendation> {
    let launches: u64 = groups.iter().map(|g| g.verdict.launches).sum();
    if launches == 0 {
        return None;
    }
    let tiny_ns: f64 = groups.iter().map(|g| g.verdict.total_ns).sum();
    let names: Vec<&str> = groups
        .iter()
        .map(|g| g.verdict.short_name.as_str())
        .collect();
    let shown = if names.len() > 4 {
        format!("{}, ... ({} kernels)", names[..4].join(", "), names.len())
    } else {
        names.join(", ")
    };
    let gain = groups
        .iter()
        .map(|g| g.recoverable_ns)
        .sum::<Option<f64>>()
        .map(|saved| GainEstimate {
            kernel_pct: 100.0 * saved / tiny_ns.max(1.0),
            workload_pct: if total_ns > 0.0 {
                100.0 * saved / total_ns
            } else {
                0.0
            },
            saved_ns: saved,
            method: match timeline {
                None => crate::rollup::TINY_STEP_METHOD.into(),
                Some(_) => crate::rollup::TINY_STEP_METHOD_TIMED.into(),
            },
        });
    let s = strategy("fuse_or_graph_launches");
    let amd = groups.iter().any(|g| is_amd(&g.representative.metrics));
    // Launches already replayed from a graph: fusing is what is left.
    let graphed = timeline.is_some_and(|t| t.graph_launches > 0 && t.kernel_launch_calls == 0);
    let (title, graph) = if graphed {
        (
            "Fuse the tiny kernels the graph replays",
            ": a graph replays them already, and each kernel node still costs its own start-up on the GPU",
        )
    } else if amd {
        (
            "Fuse the tiny launches or capture them in a HIP graph",
            "capture the sequence in a HIP graph (hipStreamBeginCapture / hipGraphInstantiate / hipGraphLaunch; torch.cuda.graphs works on ROCm)",
        )
    } else {
        (s.title, "capture the sequence in a CUDA graph")
    };
    let (kernel, short) = if groups.len() == 1 {
        (
            groups[0].verdict.name.clone(),
            groups[0].verdict.short_name.clone(),
        )
    } else {
        (shown.clone(), format!("{} tiny kernels", groups.len()))
    };
    Some(Recommendation {
        rank: 0,
        id: s.id.to_string(),
        title: title.to_string(),
        kernel,
        kernel_short: short,
        class: C::SmallGrid,
        evidence: format!(
            "{launches} launch{} under {:.0} us each ({shown}) take {} of GPU time and do almost no work",
            if launches == 1 { "" } else { "es" },
            crate::rules::TINY_KERNEL_NS / 1e3,
            kopt_model::format_duration_ns(tiny_ns)
        ),
        action: format!(
            "Fuse these launches (and their neighbours) into one kernel{}{graph}{}; remove launches whose result is never used. {}",
            if graphed { "" } else { ", or " },
            if graphed { "" } else { " and replay it" },
            match timeline {
                Some(t) if graphed => format!(
                    "The timeline shows {} graph launches replaying them, the GPU busy {:.1}% of the steady-state window.",
                    t.graph_launches,
                    t.busy_pct
                ),
                None => {
                    let vendor = if amd { kopt_model::Vendor::Amd } else { kopt_model::Vendor::Nvidia };
                    format!("Measure the host launch cost with a timeline ({}): {} cannot see it.", vendor.timeline_tools(), vendor.counter_profiler())
                }
                Some(t) => format!(
                    "The timeline shows the host cost: a median launch call of {}, the GPU busy {:.1}% of the steady-state window.",
                    t.median_launch_ns.map_or("-".into(), kopt_model::format_duration_ns),
                    t.busy_pct
                ),
            }
        ),
        source: s.source.to_string(),
        gain,
        predicted_speedup: None,
    })
}

/// The roofline recommendation for a library kernel at its roofline, worded
/// for what its caller controls: (strategy id, evidence, action).
fn library_at_roofline(
    group: &KernelGroup,
    lib: &kopt_model::KernelFamily,
) -> Option<(&'static str, String, String)> {
    let v = &group.verdict;
    let m = &group.representative.metrics;
    let b = &v.bottleneck;
    if !b.at_roofline {
        return None;
    }
    let whose = format!("{} {} kernel", lib.library, lib.family.as_str());
    let at = |unit: &str| {
        format!(
            "{whose} with the {unit} at {:.0}% of peak; {} of the workload",
            b.unit_pct.unwrap_or(0.0),
            pct(v.pct_of_total)
        )
    };
    let blas = if is_amd(m) { "hipBLASLt" } else { "cuBLASLt" };
    match b.class {
        C::Compute if b.unit == Some(HotUnit::Tensor) => Some((
            "tensor_roofline_do_less",
            at("tensor pipe"),
            format!(
                "The library kernel already runs the tensor cores at their roofline: tuning its shape or settings cannot make it faster. Remove the work around it or make the math cheaper: fuse the epilogue (bias, activation, residual) into the GEMM with torch.compile or {blas}'s epilogues (e.g. F.linear with its bias instead of a separate add), so no extra pass runs; use a lower precision (fp8 via torch._scaled_mm or Transformer Engine) where accuracy allows; or do less math (smaller or fewer matmuls)."
            ),
        )),
        C::Compute => Some((
            "use_tensor_cores",
            at(&format!("{} pipe", b.unit.map_or("SM", |u| u.as_str()))),
            "The library kernel saturates a pipe other than the tensor cores: hand it inputs that run on tensor cores instead (bf16/fp16 with torch.autocast, or TF32 for fp32 matmuls and convolutions: torch.backends.cuda.matmul.allow_tf32 / torch.set_float32_matmul_precision(\"high\")), or do less math.".into(),
        )),
        C::Memory => Some((
            "move_fewer_bytes",
            at(b.unit.map_or("memory", |u| u.as_str())),
            format!(
                "The library kernel already moves its bytes at the roofline: tuning cannot beat it. Move fewer bytes: fuse it with the op that produces or consumes its data (torch.compile, fused ops), keep the data in a narrower type (bf16/fp8), or skip the pass. Every 10% fewer bytes saves about {:.1} us here ({} of the workload).",
                0.1 * v.total_ns / 1e3,
                pct(0.1 * v.pct_of_total)
            ),
        )),
        _ => None,
    }
}

fn pct(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.0}%")
    } else {
        format!("{v:.1}%")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spilling_kernels_get_the_local_memory_fix_not_autotuning() {
        let launch = kopt_model::KernelLaunch {
            id: 0,
            name: "spill_kernel".into(),
            grid: kopt_model::Dim3 {
                x: 1056,
                y: 1,
                z: 1,
            },
            block: kopt_model::Dim3 { x: 256, y: 1, z: 1 },
            stream: None,
            metrics: kopt_model::Metrics {
                duration_ns: Some(200_000.0),
                sm_pct: Some(35.0),
                memory_pct: Some(70.0),
                l1_pct: Some(70.0),
                grid_size: Some(1_056.0),
                sm_count: Some(132.0),
                registers_per_thread: Some(255.0),
                global_ld_sectors: Some(1e6),
                local_ld_sectors: Some(2e6),
                local_st_sectors: Some(1e6),
                ..Default::default()
            },
            ncu_rules: Vec::new(),
        };
        let launches = [launch];
        let groups = crate::rollup::group(&launches, 200_000.0);
        let recs = recommend(&groups[0], 200_000.0);
        let ids: Vec<&str> = recs.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, vec!["cut_local_memory"]);
        let action = &recs[0].action;
        for needle in [
            "compile-time constants",
            "shared memory",
            "live",
            "__launch_bounds__",
        ] {
            assert!(action.contains(needle), "{needle}: {action}");
        }
        assert!(recs[0].gain.is_some());
    }

    #[test]
    fn ids_are_unique_and_every_class_is_covered() {
        for (i, a) in CATALOGUE.iter().enumerate() {
            assert!(
                CATALOGUE[i + 1..].iter().all(|b| b.id != a.id),
                "duplicate {}",
                a.id
            );
            // A user-visible source says what the strategy is, never which
            // internal document it came from.
            assert!(
                !a.source.is_empty() && !a.source.contains("seed"),
                "{}: {}",
                a.id,
                a.source
            );
        }
        // Every class but Unknown (no counters, nothing to recommend) has a strategy.
        for class in [
            C::LaunchOverhead,
            C::Memory,
            C::Compute,
            C::Latency,
            C::Occupancy,
            C::BankConflict,
            C::Uncoalesced,
            C::SmallGrid,
            C::Sync,
            C::Balanced,
        ] {
            assert!(
                CATALOGUE.iter().any(|s| s.triggered_by.contains(&class)),
                "no strategy for {class}"
            );
        }
    }
}
