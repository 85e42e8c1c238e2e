//! fp32 matrix work on the FMA pipes of a tensor-core GPU. PyTorch keeps
//! fp32 matmuls off the tensor cores unless TF32 is allowed
//! (`torch.backends.cuda.matmul.allow_tf32`, off by default), so an fp32
//! model on an Ampere or Hopper GPU runs cuBLAS's FMA kernels
//! (`sm80_xmma_gemm_f32f32_f32f32_*`, `*sgemm*`, CUTLASS SIMT) at a few
//! percent of the card's matrix peak. One finding covers every such kernel,
//! with two options priced on their own and the faster one headlined:
//!
//! - TF32: the same kernels at the TF32 tensor peak; nothing else changes.
//! - bf16 autocast: the GEMMs and convolutions at the bf16 tensor peak (2x
//!   TF32's on Ampere and Hopper), but autocast casts their fp32 operands
//!   to bf16 on every call: every weight on every forward (its cast cache
//!   lives only inside one autocast region) and activations arriving from
//!   fp32 ops (layer norm, softmax and the other fp32-listed ops, residual
//!   sums). Each cast is one more op and kernel: bytes through DRAM on the
//!   GPU and one more dispatch and launch on the host, which sets the pace
//!   of a launch-bound step and can surface on a GPU-bound one once its
//!   GEMMs are fast.
//!
//! bf16 changes the numerics more than TF32 (8 mantissa bits in the
//! products and bf16 activations between the listed ops).

use std::collections::HashMap;

use kopt_model::{
    BottleneckClass, Device, OpShare, PredictedSpeedup, Recommendation, TimelineSummary,
};

use crate::ranking::Base;
use crate::rollup::KernelGroup;

pub const ID: &str = crate::ranking::PRECISION_ID;

/// Share of its own peak a TF32 tensor-core GEMM reaches, relative to the
/// share an FMA GEMM reaches of the FP32 peak: estimate, low, high. fp32
/// operands stay 4 bytes in TF32, so the same GEMM has half the bytes per
/// FLOP margin of a bf16 one and mid-size GEMMs stop well short of the peak.
/// Calibrated on the H100 (peak ratio 7.4x): BERT-base fp32 (batch 32 x
/// 128) ran its FMA GEMMs 3.3x faster with TF32 (2.67x end to end, 90% of
/// its kernel time in those GEMMs): 3.3 / 7.4 = 0.45.
const TENSOR_EFFICIENCY: (f64, f64, f64) = (0.55, 0.33, 0.8);

/// TF32 speed ratio when the device peaks are unknown (an Ampere/Hopper
/// card's 7-8x peak ratio times the efficiencies above).
const DEFAULT_PEAK_RATIO: f64 = 7.4;

/// An fp32 GEMM or convolution on the FMA pipes, by its kernel name: the
/// name must say fp32 math (cuBLAS/cuDNN's `f32f32_f32f32`, `sgemm`,
/// CUTLASS SIMT over float); TF32, bf16, fp16, int8 and fp8 kernels, gemv
/// and cuDNN's legacy type-templated convolutions (`convolve_sgemm`, whose
/// name does not give the type) are not.
pub fn is_fp32_fma_matmul(full: &str) -> bool {
    let n = full.to_ascii_lowercase();
    const OTHER_MATH: [&str; 15] = [
        "tf32", "bf16", "bfloat16", "f16", "fp16", "half", "h884", "h1688", "h16816", "hmma", "i8",
        "int8", "e4m3", "e5m2", "s1688",
    ];
    if OTHER_MATH.iter().any(|k| n.contains(k))
        || n.contains("convolve_sgemm")
        || n.contains("gemv")
    {
        return false;
    }
    n.contains("_f32f32_f32f32_")
        || n.contains("sgemm")
        || (n.contains("opclasssimt") && n.contains("float"))
}

/// A GPU with TF32 tensor cores: NVIDIA compute capability 8.0 or later.
pub fn has_tf32(device: &Device) -> bool {
    if device.amd.is_some() {
        return false;
    }
    device
        .compute_capability
        .as_deref()
        .and_then(|cc| cc.split('.').next())
        .and_then(|m| m.trim().parse::<u32>().ok())
        .is_some_and(|major| major >= 8)
}

/// The kernel groups the finding covers.
pub fn members(groups: &[KernelGroup], device: &Device) -> Vec<String> {
    if !has_tf32(device) {
        return Vec::new();
    }
    groups
        .iter()
        .filter(|g| is_fp32_fma_matmul(&g.verdict.name))
        .map(|g| g.verdict.name.clone())
        .collect()
}

/// TF32 tensor peak over the FP32 FMA peak (dense TF32 is half the dense
/// bf16 rate on Ampere and Hopper).
fn peak_ratio(device: &Device) -> (f64, bool) {
    match (device.peaks.tensor_bf16_flops, device.peaks.fp32_flops) {
        (Some(t), Some(f)) if t > 0.0 && f > 0.0 => (t / 2.0 / f, true),
        _ => (DEFAULT_PEAK_RATIO, false),
    }
}

/// Bytes one fp32 element costs to cast to bf16: 4 read, 2 written.
const CAST_BYTES_PER_ELEMENT: f64 = 6.0;

/// The two options the finding prices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fix {
    Tf32,
    Bf16Autocast,
}

impl Fix {
    /// The name the optimize harness and measure.py give it.
    pub fn fix(self) -> &'static str {
        match self {
            Fix::Tf32 => "tf32",
            Fix::Bf16Autocast => "bf16_autocast",
        }
    }

    fn words(self) -> &'static str {
        match self {
            Fix::Tf32 => "TF32",
            Fix::Bf16Autocast => "bf16 autocast",
        }
    }

    fn title(self) -> String {
        let other = match self {
            Fix::Tf32 => Fix::Bf16Autocast,
            Fix::Bf16Autocast => Fix::Tf32,
        };
        format!("{TITLE_PREFIX}{} (or {})", self.words(), other.words())
    }
}

const TITLE_PREFIX: &str = "Let fp32 matmuls and convolutions use the tensor cores: ";

/// The option a finding of this id headlines (its predicted figure is that
/// option's), read from its title.
pub fn headline(r: &Recommendation) -> Option<Fix> {
    headline_of(&r.id, &r.title)
}

/// `headline` from a finding's id and title (as its JSON carries them).
pub fn headline_of(id: &str, title: &str) -> Option<Fix> {
    let rest = title.strip_prefix(TITLE_PREFIX).filter(|_| id == ID)?;
    if rest.starts_with(Fix::Bf16Autocast.words()) {
        Some(Fix::Bf16Autocast)
    } else if rest.starts_with(Fix::Tf32.words()) {
        Some(Fix::Tf32)
    } else {
        None
    }
}

/// Element counts of the tensor operands in an op's recorded input shapes
/// (`[[768], [4096, 768], [768, 768], [], []]`): every innermost bracket
/// group with a dimension; scalars (`[]`) and malformed groups are none.
fn operand_elements(shapes: &str) -> Vec<f64> {
    let mut out = Vec::new();
    let mut group: Option<String> = None;
    for c in shapes.chars() {
        match c {
            '[' => group = Some(String::new()),
            ']' => {
                if let Some(g) = group.take() {
                    let dims: Option<Vec<f64>> = g
                        .split(',')
                        .map(|d| d.trim().parse::<u64>().ok().map(|v| v as f64))
                        .collect();
                    if let Some(d) = dims.filter(|d| !d.is_empty()) {
                        out.push(d.iter().product());
                    }
                }
            }
            _ => {
                if let Some(g) = group.as_mut() {
                    g.push(c);
                }
            }
        }
    }
    out
}

/// The casts autocast adds, over the kernels' whole window: launches and
/// bytes at most (every fp32 operand of every call cast: weights always,
/// activations where they come from fp32 ops) and at least (each call's
/// largest operand, the activation where tokens outnumber features,
/// arriving in bf16 from an earlier autocast op).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Casts {
    launches: (f64, f64),
    bytes: (f64, f64),
    /// From the ops' recorded shapes; else two casts a GEMM call (weight
    /// and input; bias unknown), one at least, bytes unknown.
    from_shapes: bool,
}

fn casts(
    of: &[&KernelGroup],
    by_kernel: Option<&HashMap<String, Vec<OpShare>>>,
    op_calls: Option<&HashMap<(String, Option<String>), u64>>,
) -> Casts {
    let shared: Vec<&OpShare> = of
        .iter()
        .filter_map(|g| by_kernel.and_then(|b| b.get(&g.verdict.name)))
        .flatten()
        .filter(|s| s.shapes.is_some())
        .collect();
    if shared.is_empty() {
        let calls: f64 = of.iter().map(|g| g.verdict.launches as f64).sum();
        return Casts {
            launches: (2.0 * calls, calls),
            bytes: (0.0, 0.0),
            from_shapes: false,
        };
    }
    let mut c = Casts {
        launches: (0.0, 0.0),
        bytes: (0.0, 0.0),
        from_shapes: true,
    };
    // Each op call once, however many of these kernels it launched: its
    // recorded calls, else its launches of the kernel that launched most.
    let mut per_op: HashMap<(String, Option<String>), u64> = HashMap::new();
    for s in shared {
        let key = (s.op.clone(), s.shapes.clone());
        let n = op_calls
            .and_then(|c| c.get(&key).copied())
            .unwrap_or(s.launches);
        let e = per_op.entry(key).or_default();
        *e = (*e).max(n);
    }
    for ((_, shapes), calls) in per_op {
        let ops = operand_elements(shapes.as_deref().unwrap_or_default());
        let calls = calls as f64;
        let all: f64 = ops.iter().sum();
        let largest = ops.iter().copied().fold(0.0, f64::max);
        c.launches.0 += calls * ops.len() as f64;
        c.launches.1 += calls * ops.len().saturating_sub(1) as f64;
        c.bytes.0 += calls * all * CAST_BYTES_PER_ELEMENT;
        c.bytes.1 += calls * (all - largest) * CAST_BYTES_PER_ELEMENT;
    }
    c
}

/// What the finding knows of the step beyond the kernels: the ranking's
/// base (the step as it runs untraced), the timeline (launches and the
/// host's time per step) and the kernels' ops (shapes) where recorded.
pub struct StepFacts<'a> {
    pub base: &'a Base,
    pub timeline: Option<&'a TimelineSummary>,
    pub by_kernel: Option<&'a HashMap<String, Vec<OpShare>>>,
    /// Calls per op and shapes (op ranges), where recorded.
    pub op_calls: Option<&'a HashMap<(String, Option<String>), u64>>,
}

/// The members by kind, naming only those present (#41).
fn kinds_of(of: &[&KernelGroup]) -> &'static str {
    let conv = |g: &&KernelGroup| {
        g.verdict
            .library
            .as_ref()
            .is_some_and(|f| f.family == kopt_model::LibraryFamily::Convolution)
    };
    match (of.iter().any(conv), of.iter().all(conv)) {
        (true, true) => "convolutions",
        (true, false) => "GEMMs/convolutions",
        _ => "GEMMs",
    }
}

/// The two options' predicted ranges overlap (and the other is a gain):
/// the model cannot tell which is faster.
fn close(first: &Priced, other: &Priced) -> bool {
    other.high >= first.low && other.estimate > 1.0
}

/// One option's step speed-up: estimate, low, high, and its model.
struct Priced {
    estimate: f64,
    low: f64,
    high: f64,
    model: String,
}

pub fn recommend(
    groups: &[KernelGroup],
    members: &[String],
    total_ns: f64,
    device: &Device,
    step: &StepFacts,
) -> Option<Recommendation> {
    let of = crate::rollup::groups_named(groups, members);
    let time: f64 = of.iter().map(|g| g.verdict.total_ns).sum();
    if of.is_empty() || time <= 0.0 || total_ns <= 0.0 {
        return None;
    }
    let fmt = kopt_model::format_duration_ns;
    let (ratio, from_peaks) = peak_ratio(device);
    let (est, lo, hi) = TENSOR_EFFICIENCY;
    let share = (time / total_ns).clamp(0.0, 1.0);
    let peaks_words = if from_peaks {
        "this device's peaks"
    } else {
        "a typical Ampere/Hopper card"
    };

    // TF32: the kernels at the TF32 peak, the saving on the step as the
    // ranking takes every kernel gain (x the GPU's busy share).
    let speed_t = |eff: f64| (ratio * eff).max(1.0);
    let saved_t = |eff: f64| share * (1.0 - 1.0 / speed_t(eff));
    let (t_est, t_lo, t_hi) =
        step.base
            .kernel_share_speedups(saved_t(est), saved_t(lo), saved_t(hi));
    let tf32 = Priced {
        estimate: t_est,
        low: t_lo,
        high: t_hi,
        model: format!(
            "these kernels' time / the TF32-over-FMA speed ratio: {:.1}x (range {:.1}-{:.1}x) = the TF32 tensor peak over the FP32 FMA peak ({ratio:.1}x, {peaks_words}) x {est:.2} ({lo:.2}-{hi:.2}), the share of its peak a TF32 GEMM reaches against an FMA GEMM's (fp32 operands keep 4 bytes; calibrated on an H100: BERT-base fp32 at batch 32 x 128, its FMA GEMMs 3.3x faster with TF32, 2.67x end to end); the kernel time saved ({:.1}%, range {:.1}-{:.1}%) comes off {} x the GPU's busy share of the step ({:.0}%; low: x that share again, high: all of it){}",
            speed_t(est),
            speed_t(lo),
            speed_t(hi),
            100.0 * saved_t(est),
            100.0 * saved_t(lo),
            100.0 * saved_t(hi),
            step.base.words,
            100.0 * step.base.busy_share(),
            step.base.host_floor_words(saved_t(est)),
        ),
    };

    // bf16 autocast: the kernels at the bf16 peak (twice TF32's), the
    // casts' bytes on the GPU, their launches on the host; the step is
    // whichever of the two is longer.
    let bf16 = price_bf16(&of, share, total_ns, device, step, 2.0 * ratio, peaks_words);

    let (first, other, first_fig, other_fig) = if bf16.estimate > tf32.estimate {
        (Fix::Bf16Autocast, Fix::Tf32, &bf16, &tf32)
    } else {
        (Fix::Tf32, Fix::Bf16Autocast, &tf32, &bf16)
    };
    let kernel_speed = match first {
        Fix::Tf32 => speed_t(est),
        Fix::Bf16Autocast => (2.0 * ratio * est).max(1.0),
    };
    let saved = time * (1.0 - 1.0 / kernel_speed);
    let shorts: Vec<&str> = of.iter().map(|g| g.verdict.short_name.as_str()).collect();
    let model = format!(
        "{} predicted for the step: {}. The other option, {}: {}x ({}): {}",
        first.words(),
        first_fig.model,
        other.words(),
        kopt_model::figure::ratio(other_fig.estimate, 2),
        kopt_model::figure::ratio_range(other_fig.low, other_fig.high, 2),
        other_fig.model,
    );
    let gain = kopt_model::GainEstimate {
        kernel_pct: 100.0 * saved / time,
        workload_pct: 100.0 * (1.0 - 1.0 / first_fig.estimate.max(1.0)),
        saved_ns: step.base.wall_ns * (1.0 - 1.0 / first_fig.estimate.max(1.0)),
        method: model.clone(),
    };
    let speedup = PredictedSpeedup {
        estimate: first_fig.estimate,
        low: first_fig.low,
        high: first_fig.high,
        model,
    };
    // Where the two ranges overlap the model cannot tell the options
    // apart: say so, once.
    let close_words = if close(first_fig, other_fig) {
        format!(
            " {} is close (the two predicted ranges overlap): measure both before choosing (kopt optimize --allow-precision times each).",
            other.words()
        )
    } else {
        String::new()
    };
    let tf32_call = "torch.backends.cuda.matmul.allow_tf32 = True and torch.backends.cudnn.allow_tf32 = True (or torch.set_float32_matmul_precision(\"high\"))";
    let bf16_call = "run the forward pass under torch.autocast(\"cuda\", dtype=torch.bfloat16)";
    let figure = |p: &Priced| {
        format!(
            "{}x ({})",
            kopt_model::figure::ratio(p.estimate, 2),
            kopt_model::figure::ratio_range(p.low, p.high, 2)
        )
    };
    let action = match first {
        Fix::Tf32 => format!(
            "Allow TF32 before the model runs: {tf32_call}. Predicted: the step {}, these kernels {:.1}x faster. bf16 autocast ({bf16_call}) is predicted {} for the step: {}.{close_words} The numerics change: TF32 keeps a 10-bit mantissa in the products; bf16 keeps 8 and stores activations in bf16, a larger change; check the outputs against fp32.",
            figure(&tf32),
            speed_t(est),
            figure(&bf16),
            if bf16.estimate < 1.0 {
                "slower than now (autocast's casts cost more than its faster GEMMs save)"
            } else {
                "less than TF32"
            },
        ),
        Fix::Bf16Autocast => format!(
            "Use bf16 autocast: {bf16_call}. Predicted: the step {}, against {} with TF32 ({tf32_call}).{close_words} The numerics change more than with TF32: bf16 keeps an 8-bit mantissa (TF32 10) and stores the listed ops' activations in bf16; check the outputs against fp32, and take TF32 where they drift too far.",
            figure(&bf16),
            figure(&tf32),
        ),
    };
    Some(Recommendation {
        rank: 0,
        id: ID.into(),
        title: first.title(),
        kernel: members.join(" | "),
        kernel_short: format!(
            "{} fp32 FMA GEMM kernel{}",
            of.len(),
            if of.len() == 1 { "" } else { "s" }
        ),
        class: BottleneckClass::Compute,
        evidence: format!(
            "fp32 {} run on the FMA pipes of a tensor-core GPU ({}): {} ({}) take {} ({:.1}% of kernel time); the kernel names say fp32 math (no tf32, bf16 or fp16), so TF32 is off",
            kinds_of(&of),
            device.name,
            if of.len() == 1 { "one kernel" } else { "these kernels" },
            shorts.join(", "),
            fmt(time),
            100.0 * time / total_ns,
        ),
        action,
        source: "mixed precision: TF32 tensor cores for fp32 matmuls (PyTorch's TF32 notes, torch.set_float32_matmul_precision), bf16 autocast (torch.amp: the ops it casts to bf16 and those it keeps in fp32)".into(),
        gain: Some(gain),
        predicted_speedup: Some(speedup),
    })
}

/// bf16 autocast's step speed-up. GPU: busy time less the kernels' saving
/// at the bf16 peak, plus the casts' bytes at DRAM bandwidth. Host: its
/// time per step x (1 + added casts / launches): each cast is one op and
/// one launch, taken at the step's average host cost per launch (the host
/// sets the pace of a launch-bound step: its time is the bare step). The
/// step: the longer of the two, plus what the step spends on neither.
fn price_bf16(
    of: &[&KernelGroup],
    share: f64,
    total_ns: f64,
    device: &Device,
    step: &StepFacts,
    ratio: f64,
    peaks_words: &str,
) -> Priced {
    let fmt = kopt_model::format_duration_ns;
    let (est, lo, hi) = TENSOR_EFFICIENCY;
    let speed = |eff: f64| (ratio * eff).max(1.0);
    let wall = step.base.wall_ns.max(1.0);
    let busy = step.base.busy_ns.max(0.0);
    // Window totals to one step: the step's GPU time per kernel time.
    let per_step = if total_ns > 0.0 { busy / total_ns } else { 0.0 };
    let c = casts(of, step.by_kernel, step.op_calls);
    let dram = device.peaks.dram_bytes_per_s.filter(|b| *b > 0.0);
    let graph = step.timeline.and_then(|t| t.graph_prediction.as_ref());
    let launches = graph.map_or(0.0, |g| g.launches_per_step);
    let host = step.timeline.zip(graph).and_then(|(t, g)| {
        if t.launch_bound {
            Some((
                g.eager_corrected_per_step_ns.min(wall),
                "the step itself (launch bound: the host sets its pace)",
            ))
        } else {
            g.host_per_step_ns.map(|h| {
                (
                    h.min(wall),
                    "the traced host time to issue a step, less blocked launch calls and the recorder's modelled cost",
                )
            })
        }
    });
    let (h, host_words) =
        host.unwrap_or((0.0, "unknown (no timeline or no steps in it): not counted"));
    let rest = (wall - busy.max(h)).max(0.0);
    let at = |eff: f64, casts: f64, bytes: f64| {
        let gpu = busy * (1.0 - share * (1.0 - 1.0 / speed(eff)))
            + dram.map_or(0.0, |d| bytes * per_step / d * 1e9);
        let host = if launches > 0.0 {
            h * (1.0 + casts * per_step / launches)
        } else {
            h
        };
        (wall / (gpu.max(host) + rest).max(1.0), gpu, host)
    };
    let (e, gpu_e, host_e) = at(est, c.launches.0, c.bytes.0);
    let (l, _, _) = at(lo, c.launches.0, c.bytes.0);
    let (hgh, _, _) = at(hi, c.launches.1, c.bytes.1);
    let (low, high) = (l.min(e), hgh.max(e));
    let bytes_words = match (c.from_shapes, dram) {
        (true, Some(d)) => format!(
            "{:.0} MB of casts a step (every fp32 operand of the GEMM/convolution calls, from the ops' recorded shapes, 6 bytes an element; high end: each call's largest operand already bf16) at {:.0} GB/s",
            c.bytes.0 * per_step / 1e6,
            d / 1e9
        ),
        (true, None) => "the casts' bytes (DRAM bandwidth unknown: not counted)".to_string(),
        (false, _) => "the casts' bytes unknown without the ops' shapes (`--ops`): not counted".to_string(),
    };
    let model = format!(
        "the step = the longer of GPU and host, plus {} on neither. GPU: {} busy less these kernels' {:.1}% of kernel time at the bf16-over-FMA speed ratio {:.1}x ({:.1}x-{:.1}x; the bf16 tensor peak over the FP32 FMA peak, {ratio:.1}x, {peaks_words}, x the efficiency TF32 gets, {est:.2} ({lo:.2}-{hi:.2})), plus {bytes_words}: {}. Host: {} ({}) x (1 + {:.0} cast launches / {:.0} launches a step; each cast one op and launch at the step's average host cost; every weight cast each forward, activations from fp32 ops; {}): {}",
        fmt(rest),
        fmt(busy),
        100.0 * share,
        speed(est),
        speed(lo),
        speed(hi),
        fmt(gpu_e),
        fmt(h),
        host_words,
        c.launches.0 * per_step,
        launches,
        if c.from_shapes {
            "counted from the ops' shapes"
        } else {
            "two a GEMM call, weight and input, one at the high end"
        },
        fmt(host_e),
    );
    Priced {
        estimate: e,
        low,
        high,
        model,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fp32_fma_kernels_are_known_by_name() {
        for fma in [
            "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel_trt",
            "ampere_sgemm_128x64_tn",
            "sm90_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nhwckrsc_nchw_tilesize128x128x8",
            "void cutlass::Kernel<cutlass_80_simt_sgemm_128x128_8x4_nn_align1>(Params)",
            "void cutlass::gemm::kernel::Gemm<cutlass::gemm::threadblock::MmaPipelined<float, cutlass::arch::OpClassSimt>>()",
        ] {
            assert!(is_fp32_fma_matmul(fma), "{fma}");
        }
        for not in [
            "sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize64x64x16",
            "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc",
            "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn",
            "nvjet_sm90_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNT",
            "void precomputed_convolve_sgemm<__nv_bfloat16, 1024, 5, 5, 4, 3, 3, 1, false>()",
            "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false>()",
            "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_tn",
            "fmha_cutlassF_f32_aligned_64x64_rf_sm80",
        ] {
            assert!(!is_fp32_fma_matmul(not), "{not}");
        }
    }

    fn device(cc: &str) -> Device {
        let mut d = Device::unknown();
        d.name = "NVIDIA H100 80GB HBM3".into();
        d.compute_capability = Some(cc.into());
        d
    }

    #[test]
    fn only_tensor_core_gpus_get_the_finding() {
        assert!(has_tf32(&device("9.0")));
        assert!(has_tf32(&device("8.0")));
        assert!(!has_tf32(&device("7.0")));
        let mut d = device("");
        d.compute_capability = None;
        assert!(!has_tf32(&d));
    }

    const GEMM: &str = "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_ffma";

    fn h100() -> Device {
        let mut d = device("9.0");
        d.peaks.fp32_flops = Some(67e12);
        d.peaks.tensor_bf16_flops = Some(989e12);
        d.peaks.dram_bytes_per_s = Some(3.35e12);
        d
    }

    fn launches(gemm_ns: f64, other_ns: f64, n: u64) -> Vec<kopt_model::KernelLaunch> {
        let launch = |id: u64, name: &str, ns: f64| kopt_model::KernelLaunch {
            id,
            name: name.into(),
            grid: kopt_model::Dim3 { x: 132, y: 1, z: 1 },
            block: kopt_model::Dim3 { x: 128, y: 1, z: 1 },
            stream: Some(7),
            metrics: kopt_model::Metrics {
                duration_ns: Some(ns),
                ..Default::default()
            },
            ncu_rules: Vec::new(),
        };
        (0..n)
            .flat_map(|i| {
                [
                    launch(2 * i, GEMM, gemm_ns / n as f64),
                    launch(
                        2 * i + 1,
                        "vectorized_elementwise_kernel",
                        other_ns / n as f64,
                    ),
                ]
            })
            .collect()
    }

    /// A step of `wall` with the GPU busy `busy`, `per_step` launches, the
    /// host's time `host` (launch bound where it sets the pace).
    fn timeline(wall: f64, busy: f64, per_step: f64, host: f64) -> TimelineSummary {
        let launch_bound = busy < 0.5 * wall;
        TimelineSummary {
            wall_ns: wall as i64,
            gpu_busy_ns: busy as i64,
            busy_pct: 100.0 * busy / wall,
            kernels: per_step as u64,
            memory_ops: 0,
            kernel_launch_calls: per_step as u64,
            graph_launches: 0,
            sync_calls: 1,
            median_launch_ns: Some(5e3),
            median_kernel_ns: Some(busy / per_step),
            kernels_shorter_than_launch: 0,
            median_launch_to_start_ns: None,
            largest_gaps: Vec::new(),
            iterations: Some(1),
            kernels_per_iteration: Some(per_step),
            busy_per_iteration_ns: Some(busy),
            launch_bound,
            verdict: String::new(),
            sampling: None,
            steps: None,
            steady_state: None,
            graph_prediction: Some(kopt_model::GraphPrediction {
                eager_per_step_ns: wall,
                recorder_overhead_per_step_ns: 0.0,
                recorder_ns_per_launch: 0.0,
                launches_per_step: per_step,
                op_ranges_per_step: 0.0,
                eager_corrected_per_step_ns: wall,
                eager_measured_bare: true,
                busy_per_step_ns: busy,
                kernels_per_step: per_step,
                replay_ns_per_kernel: 400.0,
                replay_cost_from_table: true,
                graph_per_step_ns: busy,
                speedup: PredictedSpeedup {
                    estimate: 1.0,
                    low: 1.0,
                    high: 1.0,
                    model: String::new(),
                },
                host_per_step_ns: Some(host),
            }),
            host_syncs: None,
            host_copies: None,
            optimizer: None,
            phases: None,
        }
    }

    fn finding(
        gemm_ns: f64,
        other_ns: f64,
        t: &TimelineSummary,
        by_kernel: Option<&HashMap<String, Vec<OpShare>>>,
    ) -> Recommendation {
        let n = t.kernels / 2;
        let l = launches(gemm_ns, other_ns, n.max(1));
        let total = gemm_ns + other_ns;
        let groups = crate::rollup::group(&l, total);
        let d = h100();
        let m = members(&groups, &d);
        assert_eq!(m, [GEMM]);
        let base = Base::of(Some(t), total);
        recommend(
            &groups,
            &m,
            total,
            &d,
            &StepFacts {
                base: &base,
                timeline: Some(t),
                by_kernel,
                op_calls: None,
            },
        )
        .unwrap()
    }

    /// The other option's figure, from the model's words.
    fn other_estimate(r: &Recommendation) -> f64 {
        let m = &r.predicted_speedup.as_ref().unwrap().model;
        let at = m.find("The other option, ").unwrap();
        let rest = &m[at..];
        let x = rest.find(": ").unwrap() + 2;
        rest[x..].split('x').next().unwrap().parse().unwrap()
    }

    #[test]
    fn shapes_give_the_operands_elements() {
        assert_eq!(
            operand_elements("[[768], [4096, 768], [768, 768], [], []]"),
            [768.0, 4096.0 * 768.0, 768.0 * 768.0]
        );
        // Tensor lists nest; scalars and garbage are no operand.
        assert_eq!(
            operand_elements("[[[16, 256], [16, 256]], [1024, 256], []]").len(),
            3
        );
        assert!(operand_elements("[[a, 2], [",).is_empty());
        assert!(operand_elements("").is_empty());
    }

    /// #41: the other option is called close only when the two ranges
    /// overlap (and it is a gain at all).
    #[test]
    fn the_other_option_is_close_only_inside_the_range() {
        let p = |estimate, low, high| Priced {
            estimate,
            low,
            high,
            model: String::new(),
        };
        assert!(close(&p(2.32, 1.60, 3.10), &p(1.74, 1.50, 2.00)));
        assert!(close(&p(3.04, 2.83, 3.81), &p(2.54, 1.88, 3.08)));
        assert!(!close(&p(4.8, 4.2, 5.4), &p(3.0, 2.6, 3.3)));
        assert!(!close(&p(1.05, 0.90, 1.20), &p(0.95, 0.90, 1.00)));
    }

    #[test]
    fn a_gpu_bound_step_of_fp32_gemms_headlines_bf16() {
        // 30 ms a step, 27 ms of it FMA GEMMs, 128 launches, the host 3 ms.
        let t = timeline(30e6, 30e6, 128.0, 3e6);
        let r = finding(27e6, 3e6, &t, None);
        assert_eq!(headline(&r), Some(Fix::Bf16Autocast), "{}", r.title);
        let p = r.predicted_speedup.as_ref().unwrap();
        // GEMMs at the bf16 peak: 27 ms / (14.8 x 0.55) + 3 ms ~ 6.3 ms.
        assert!(p.estimate > 4.0 && p.estimate < 5.5, "{}", p.estimate);
        assert!(p.low <= p.estimate && p.estimate <= p.high);
        let tf32 = other_estimate(&r);
        assert!(tf32 > 2.5 && tf32 < p.estimate, "{tf32}");
        assert!(r.action.starts_with("Use bf16 autocast"), "{}", r.action);
        assert!(r.action.contains("numerics change more"));
    }

    #[test]
    fn a_host_that_surfaces_once_the_gemms_are_fast_keeps_tf32_first() {
        // The same GPU work, but the host needs 9 ms to issue the step:
        // two casts a GEMM call double its launches, 18 ms a step.
        let t = timeline(30e6, 30e6, 128.0, 9e6);
        let r = finding(27e6, 3e6, &t, None);
        assert_eq!(headline(&r), Some(Fix::Tf32), "{}", r.title);
        let bf16 = other_estimate(&r);
        assert!(bf16 < r.predicted_speedup.as_ref().unwrap().estimate);
        assert!((bf16 - 30.0 / 18.0).abs() < 0.1, "{bf16}");
    }

    #[test]
    fn a_launch_bound_step_gets_bf16_slower_than_now() {
        // 4 ms a step set by the host, the GPU busy 1 ms, 200 launches, 100
        // of them FMA GEMMs: 200 casts more to launch.
        let t = timeline(4e6, 1e6, 200.0, 4e6);
        let r = finding(0.6e6, 0.4e6, &t, None);
        assert_eq!(headline(&r), Some(Fix::Tf32), "{}", r.title);
        let bf16 = other_estimate(&r);
        assert!(bf16 < 1.0, "{bf16}");
        assert!((bf16 - 0.5).abs() < 0.05, "{bf16}");
        assert!(r.action.contains("slower than now"), "{}", r.action);
    }

    #[test]
    fn an_empty_step_gives_finite_figures() {
        // A timeline whose step reads 0 ns busy and 0 ns host: no division
        // by zero, no NaN.
        let t = timeline(1.0, 0.0, 2.0, 0.0);
        let r = finding(1e3, 1e3, &t, None);
        let p = r.predicted_speedup.as_ref().unwrap();
        for v in [p.estimate, p.low, p.high, other_estimate(&r)] {
            assert!(v.is_finite() && v > 0.0, "{v}");
        }
    }

    #[test]
    fn recorded_shapes_price_the_casts_bytes() {
        let t = timeline(30e6, 30e6, 128.0, 3e6);
        let share = |shapes: &str| {
            HashMap::from([(
                GEMM.to_string(),
                vec![OpShare {
                    op: "aten::addmm".into(),
                    shapes: Some(shapes.into()),
                    launches: 64,
                }],
            )])
        };
        let small = share("[[768], [4096, 768], [768, 768], [], []]");
        // 64 calls casting 10x larger operands: more bytes, a slower step.
        let large = share("[[7680], [40960, 768], [7680, 768], [], []]");
        let a = finding(27e6, 3e6, &t, Some(&small));
        let b = finding(27e6, 3e6, &t, Some(&large));
        let (pa, pb) = (
            a.predicted_speedup.as_ref().unwrap(),
            b.predicted_speedup.as_ref().unwrap(),
        );
        assert!(pa.model.contains("MB of casts a step"), "{}", pa.model);
        assert!(pb.estimate < pa.estimate, "{} {}", pb.estimate, pa.estimate);
        // 64 x (768 + 3.1M + 0.6M) elements x 6 bytes = 1.44 GB at 3.35 TB/s.
        let c = casts(
            &crate::rollup::group(&launches(1.0, 1.0, 1), 2.0)
                .iter()
                .filter(|g| g.verdict.name == GEMM)
                .collect::<Vec<_>>(),
            Some(&small),
            None,
        );
        assert!(c.from_shapes);
        assert_eq!(c.launches, (192.0, 128.0));
        let want = 64.0 * (768.0 + 4096.0 * 768.0 + 768.0 * 768.0) * 6.0;
        assert!((c.bytes.0 - want).abs() < 1.0);
        // An op that launches two of these kernels a call (split-K, an
        // RNN's steps) casts its operands once a call: its recorded calls.
        let calls = HashMap::from([(
            (
                "aten::addmm".to_string(),
                Some("[[768], [4096, 768], [768, 768], [], []]".to_string()),
            ),
            32u64,
        )]);
        let once = casts(
            &crate::rollup::group(&launches(1.0, 1.0, 1), 2.0)
                .iter()
                .filter(|g| g.verdict.name == GEMM)
                .collect::<Vec<_>>(),
            Some(&small),
            Some(&calls),
        );
        assert_eq!(once.launches, (96.0, 64.0));
        assert!((once.bytes.0 - want / 2.0).abs() < 1.0);
    }
}
