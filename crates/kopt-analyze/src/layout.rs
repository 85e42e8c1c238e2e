//! Layout conversions around convolutions: cuDNN's tensor-core kernels on
//! recent GPUs work in NHWC, so a model kept in PyTorch's default NCHW
//! layout pays a transpose into NHWC before each convolution and one back
//! after it (cuDNN's `nchwToNhwcKernel` / `nhwcToNchwKernel`). Converting
//! the model and its input to `torch.channels_last` once removes them. One
//! finding covers every conversion kernel.

use std::collections::HashMap;

use kopt_model::{BottleneckClass, OpShare, Recommendation};

use crate::rollup::KernelGroup;

pub const ID: &str = "use_channels_last";

/// Share of the convolutions' own time NHWC saves beyond the conversions
/// (estimate, high); see the model text for the measurements.
const CONV_NHWC_GAIN: (f64, f64) = (0.15, 0.3);

/// Share of the NCHW-only kernels' time channels_last saves (estimate,
/// high): their NHWC counterparts run faster; see the model text.
const NCHW_KERNEL_GAIN: (f64, f64) = (0.25, 0.5);

/// Kernels written for NCHW data that channels_last replaces with an NHWC
/// counterpart: cuDNN's kernels named for an NCHW output (`..._NCHW`,
/// `..._nchw_...`, `nchwkcrs` filters), ATen's depthwise convolution (NCHW
/// only; in channels_last PyTorch hands depthwise convolutions to cuDNN)
/// and ATen's NCHW batch-norm transform (channels_last has its own).
pub fn is_nchw_kernel(full: &str) -> bool {
    if is_layout_conversion(full) {
        return false;
    }
    let lower = full.to_ascii_lowercase();
    let q = kopt_model::qualified_function_name(full).to_ascii_lowercase();
    let f = q.rsplit("::").next().unwrap_or(&q);
    f.ends_with("_nchw")
        || f.contains("_nchw_")
        || f.contains("nchwkcrs")
        || lower.contains("conv_depthwise2d_forward")
        || (f == "batch_norm_transform_input_kernel")
}

/// cuDNN's layout conversion kernels, by their function name.
pub fn is_layout_conversion(full: &str) -> bool {
    let q = kopt_model::qualified_function_name(full).to_ascii_lowercase();
    let f = q.rsplit("::").next().unwrap_or(&q);
    f.starts_with("nchwtonhwc") || f.starts_with("nhwctonchw")
}

/// The conversion kernel groups. Where the trace names ops, only those a
/// convolution launched (a user's own permute is not cuDNN's to remove).
pub fn members(groups: &[KernelGroup], ops: Option<&HashMap<String, Vec<OpShare>>>) -> Vec<String> {
    groups
        .iter()
        .filter(|g| is_layout_conversion(&g.verdict.name))
        .filter(|g| {
            ops.and_then(|o| o.get(&g.verdict.name))
                .is_none_or(|s| s.is_empty() || s.iter().any(|s| s.op.contains("convolution")))
        })
        .map(|g| g.verdict.name.clone())
        .collect()
}

/// The finding over the conversion kernels; None when there are none or
/// they take no time.
pub fn recommend(
    groups: &[KernelGroup],
    members: &[String],
    total_ns: f64,
) -> Option<Recommendation> {
    let of = crate::rollup::groups_named(groups, members);
    let saved: f64 = of.iter().map(|g| g.verdict.total_ns).sum();
    let launches: u64 = of.iter().map(|g| g.verdict.launches).sum();
    if of.is_empty() || saved <= 0.0 || saved >= total_ns {
        return None;
    }
    // The convolutions themselves run faster on NHWC data they need not
    // convert (cuDNN's native layout for tensor cores).
    let nchw: f64 = groups
        .iter()
        .filter(|g| is_nchw_kernel(&g.verdict.name))
        .map(|g| g.verdict.total_ns)
        .sum();
    let conv: f64 = groups
        .iter()
        .filter(|g| !is_nchw_kernel(&g.verdict.name))
        .filter(|g| {
            crate::library::classify(&g.verdict.name)
                .is_some_and(|f| f.family == kopt_model::LibraryFamily::Convolution)
        })
        .map(|g| g.verdict.total_ns)
        .sum();
    let (c_est, c_hi) = CONV_NHWC_GAIN;
    let (n_est, n_hi) = NCHW_KERNEL_GAIN;
    let at = |s: f64| total_ns / (total_ns - s.min(total_ns * 0.999));
    let low = at(saved / 2.0);
    let fmt = kopt_model::format_duration_ns;
    let shorts: Vec<&str> = of.iter().map(|g| g.verdict.short_name.as_str()).collect();
    let model = format!("in channels_last the convolutions read and write NHWC directly, so cuDNN's NCHW<->NHWC conversions no longer run: saved = their measured time, plus {:.0}% ({:.0}% at most) of the convolutions' own time ({}), which run faster on NHWC, plus {:.0}% ({:.0}% at most) of the time of kernels written for NCHW data ({}: cuDNN's NCHW-output kernels, ATen's depthwise convolution and NCHW batch norm), which channels_last replaces with NHWC ones; speed-up = kernel time / (kernel time - saved); low: half of the conversions saved (ops without an NHWC kernel may convert back), no convolution gain. Measured conversions-only predictions against channels_last: ResNet-50 bf16 H200 b256 1.36x vs 1.52x, H100 b256 1.32x vs 1.42x, H100 b128 1.31x vs 1.44x, MobileNetV3 fp32 H100 b128 1.11x vs 1.26x: the convolutions gain 10-25% of their time. The NCHW-only kernels' share: MobileNetV3 (H100, fp32, b128), whose cuDNN NCHW batch norm and ATen depthwise convolutions take 44% of kernel time, measured 1.26x where conversions and convolutions alone account for 1.13x: a quarter of their time", 100.0 * c_est, 100.0 * c_hi, fmt(conv), 100.0 * n_est, 100.0 * n_hi, fmt(nchw));
    let (mut gain, mut speedup) = crate::gain::saved_time_gain(
        saved + c_est * conv + n_est * nchw,
        total_ns,
        100.0,
        low,
        model,
    );
    speedup.high = at(saved + c_hi * conv + n_hi * nchw);
    gain.kernel_pct = 100.0 * gain.saved_ns / (saved + conv + nchw).max(1.0);
    let predicted = crate::gain::kernel_time_speedup_words(&speedup);
    Some(Recommendation {
        rank: 0,
        id: ID.into(),
        title: "Run the model in channels_last memory format".into(),
        kernel: members.join(" | "),
        kernel_short: format!(
            "{} layout-conversion kernel{}",
            of.len(),
            if of.len() == 1 { "" } else { "s" }
        ),
        class: BottleneckClass::Memory,
        evidence: format!(
            "cuDNN converts between NCHW and NHWC around the convolutions: {} ({}) take {} ({:.1}% of kernel time) in {launches} launches, copying every activation tensor twice",
            if of.len() == 1 { "one conversion kernel" } else { "the conversion kernels" },
            shorts.join(", "),
            fmt(saved),
            100.0 * saved / total_ns,
        ),
        action: format!(
            "Convert the model and its inputs once: model = model.to(memory_format=torch.channels_last); x = x.to(memory_format=torch.channels_last) (torch.compile keeps the layout). Predicted: {} of conversions removed, {predicted}.",
            fmt(saved)
        ),
        source: "memory format: NHWC (channels_last) tensors for cuDNN's tensor-core convolutions (PyTorch channels_last guide, cuDNN developer guide)".into(),
        gain: Some(gain),
        predicted_speedup: Some(speedup),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_kernels_are_known_by_name() {
        assert!(is_layout_conversion("void cudnn::ops::nchwToNhwcKernel<__nv_bfloat16, __nv_bfloat16, float, false, true, (cudnnKernelDataType_t)2>(cudnn::ops::nchw2nhwc_params_t<float>, __nv_bfloat16 const*, __nv_bfloat16*)"));
        assert!(is_layout_conversion("nhwcToNchwKernel"));
        assert!(!is_layout_conversion("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>()"));
        assert!(!is_layout_conversion(
            "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc"
        ));
    }

    #[test]
    fn nchw_only_kernels_are_known_by_name() {
        for name in [
            "void cudnn::bn_fw_inf_1C11_kernel_NCHW<float, float, true, 1>(float, float, cudnnTensorStruct, float const*)",
            "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize256x64x8_stage3_warpsize2x2x1_g1_ffma_aligna4_alignc4_execute_kernel__5x_cudnn",
            "_ZN2at6native51_GLOBAL__N__a30dace1_18_DepthwiseConv2d_cu_9959487031conv_depthwise2d_forward_kernelILi3EfiEEvN5torch10headeronly6detail27GenericPacked",
            "void at::native::batch_norm_transform_input_kernel<c10::BFloat16, c10::BFloat16, float, true, int>(int)",
        ] {
            assert!(is_nchw_kernel(name), "{name}");
        }
        for name in [
            "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x64x32_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
            "void at::native::batch_norm_transform_input_channels_last_kernel<float, float, float, 4>(int)",
            "nchwToNhwcKernel",
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>()",
        ] {
            assert!(!is_nchw_kernel(name), "{name}");
        }
    }
}
