//! fp32 matrix work on the FMA pipes of a tensor-core GPU. PyTorch keeps
//! fp32 matmuls off the tensor cores unless TF32 is allowed
//! (`torch.backends.cuda.matmul.allow_tf32`, off by default), so an fp32
//! model on an Ampere or Hopper GPU runs cuBLAS's FMA kernels
//! (`sm80_xmma_gemm_f32f32_f32f32_*`, `*sgemm*`, CUTLASS SIMT) at a few
//! percent of the card's matrix peak. One finding covers every such kernel:
//! allow TF32 (or run under bf16 autocast); the numerics change.

use kopt_model::{BottleneckClass, Device, Recommendation};

use crate::rollup::KernelGroup;

pub const ID: &str = "enable_tf32";

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

pub fn recommend(
    groups: &[KernelGroup],
    members: &[String],
    total_ns: f64,
    device: &Device,
) -> Option<Recommendation> {
    let of: Vec<&KernelGroup> = groups
        .iter()
        .filter(|g| members.contains(&g.verdict.name))
        .collect();
    let time: f64 = of.iter().map(|g| g.verdict.total_ns).sum();
    if of.is_empty() || time <= 0.0 || total_ns <= 0.0 {
        return None;
    }
    let (ratio, from_peaks) = peak_ratio(device);
    let speed = |eff: f64| (ratio * eff).max(1.0);
    let (est, lo, hi) = TENSOR_EFFICIENCY;
    let saved = |eff: f64| time * (1.0 - 1.0 / speed(eff));
    let at = |eff: f64| total_ns / (total_ns - saved(eff));
    let fmt = kopt_model::format_duration_ns;
    let shorts: Vec<&str> = of.iter().map(|g| g.verdict.short_name.as_str()).collect();
    let model = format!(
        "these kernels' time / the TF32-over-FMA speed ratio: {:.1}x (range {:.1}-{:.1}x) = the TF32 tensor peak over the FP32 FMA peak ({ratio:.1}x{}) x {est:.2} ({lo:.2}-{hi:.2}), the share of its peak a TF32 GEMM reaches against an FMA GEMM's (fp32 operands keep 4 bytes); calibrated on an H100: BERT-base fp32 at batch 32 x 128, its FMA GEMMs 3.3x faster with TF32, 2.67x end to end",
        speed(est),
        speed(lo),
        speed(hi),
        if from_peaks { ", this device's peaks" } else { ", a typical Ampere/Hopper card" },
    );
    let gain = kopt_model::GainEstimate {
        kernel_pct: 100.0 * saved(est) / time,
        workload_pct: 100.0 * saved(est) / total_ns,
        saved_ns: saved(est),
        method: model.clone(),
    };
    let speedup = kopt_model::PredictedSpeedup {
        estimate: at(est),
        low: at(lo),
        high: at(hi),
        model,
    };
    Some(Recommendation {
        rank: 0,
        id: ID.into(),
        title: "Let fp32 matmuls and convolutions use the tensor cores (TF32 or bf16 autocast)"
            .into(),
        kernel: members.join(" | "),
        kernel_short: format!(
            "{} fp32 FMA GEMM kernel{}",
            of.len(),
            if of.len() == 1 { "" } else { "s" }
        ),
        class: BottleneckClass::Compute,
        evidence: format!(
            "fp32 GEMMs/convolutions run on the FMA pipes of a tensor-core GPU ({}): {} ({}) take {} ({:.1}% of kernel time); the kernel names say fp32 math (no tf32, bf16 or fp16), so TF32 is off",
            device.name,
            if of.len() == 1 { "one kernel" } else { "these kernels" },
            shorts.join(", "),
            fmt(time),
            100.0 * time / total_ns,
        ),
        action: format!(
            "Allow TF32 before the model runs: torch.backends.cuda.matmul.allow_tf32 = True and torch.backends.cudnn.allow_tf32 = True (or torch.set_float32_matmul_precision(\"high\")), or run the forward pass under torch.autocast(\"cuda\", dtype=torch.bfloat16). The numerics change: TF32 keeps a 10-bit mantissa in the products, bf16 8 bits; check the outputs against fp32. Predicted: these kernels {:.1}x faster, {:.2}x ({:.2}-{:.2}x) for the workload's kernel time.",
            speed(est),
            at(est),
            at(lo),
            at(hi),
        ),
        source: "mixed precision: TF32 tensor cores for fp32 matmuls (PyTorch's TF32 notes, torch.set_float32_matmul_precision), bf16 autocast".into(),
        gain: Some(gain),
        predicted_speedup: Some(speedup),
    })
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
}
