//! Batch norm folded into the convolution for inference. Every input here
//! is synthetic: launch lists and a timeline built in code to look like a
//! ResNet block in eval mode, the same block training, and a model whose
//! batch norm is a generic kernel named only by its op.

use kopt_analyze::{analyze, AnalyzeOptions};
use kopt_model::{
    ActivityKind, ApiCall, ApiKind, Device, Dim3, GpuActivity, KernelLaunch, Metrics, Profile,
    Range, Timeline,
};

const CONV: &str = "sm80_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x32_stage4_warpsize2x2x1_g1_tensor16x8x16_kernel";
const BN_INF: &str = "void cudnn::bn_fw_inf_1C11_kernel_NHWC<__half, float, true, 1>(float, float, cudnnTensorStruct, __half const*, cudnnTensorStruct, __half*, float const*, float const*, float const*, float const*, float)";
const BN_ATEN: &str = "void at::native::batch_norm_transform_input_kernel<float, float, float, true, int>(at::GenericPackedTensorAccessor<float const, 3ul, at::RestrictPtrTraits, int>)";
const RELU: &str = "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#14}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, float, std::array<char*, 2ul>)";
const BN_BACKWARD: &str = "void at::native::batch_norm_backward_kernel<float, float, float, int>(at::GenericPackedTensorAccessor<float const, 3ul, at::RestrictPtrTraits, int>)";
const BN_STATS: &str =
    "void at::native::batch_norm_collect_statistics_kernel<float, float, float, int>(int)";

fn launch(id: u64, name: &str, ns: f64) -> KernelLaunch {
    KernelLaunch {
        id,
        name: name.into(),
        grid: Dim3 { x: 512, y: 1, z: 1 },
        block: Dim3 { x: 256, y: 1, z: 1 },
        stream: Some(7),
        metrics: Metrics {
            duration_ns: Some(ns),
            ..Default::default()
        },
        ncu_rules: Vec::new(),
    }
}

fn profile(seq: &[(&str, f64)], repeat: usize) -> Profile {
    let mut launches = Vec::new();
    for _ in 0..repeat {
        for (n, ns) in seq {
            launches.push(launch(launches.len() as u64, n, *ns));
        }
    }
    Profile {
        device: Device::unknown(),
        launches,
        sources: Vec::new(),
        timeline: None,
    }
}

/// Eval-mode ResNet block: conv (200 us), cuDNN bn (30 us), relu, conv, ATen bn (20 us).
fn inference() -> Profile {
    profile(
        &[
            (CONV, 200_000.0),
            (BN_INF, 30_000.0),
            (RELU, 15_000.0),
            (CONV, 200_000.0),
            (BN_ATEN, 20_000.0),
        ],
        10,
    )
}

#[test]
fn inference_batch_norm_is_one_fold_finding() {
    let d = analyze(&inference(), &AnalyzeOptions::default());
    let r = d
        .recommendations
        .iter()
        .find(|r| r.id == "fold_batch_norm")
        .expect("fold finding");
    assert!(r.title.contains("Fold batch norm"), "{}", r.title);
    assert!(r.action.contains("fuse_modules"), "{}", r.action);
    assert!(r.action.contains("torch.compile"), "{}", r.action);
    let g = r.gain.as_ref().unwrap();
    let total = 10.0 * 465_000.0;
    let bn = 10.0 * 50_000.0;
    // No timeline: the step is the summed kernel time. All of the batch
    // norms' time is the high end; eager folding alone gains nothing (the
    // bias add replaces the pass): the low end; the estimate between.
    let sp = r.predicted_speedup.as_ref().unwrap();
    assert!((sp.high - total / (total - bn)).abs() < 1e-9, "{}", sp.high);
    assert!((sp.low - 1.0).abs() < 1e-9, "{}", sp.low);
    assert!((sp.estimate - sp.high.sqrt()).abs() < 1e-9);
    assert!(sp.low < sp.estimate && sp.estimate < sp.high);
    // The gain is the same share of the step as the estimate.
    assert!((g.workload_pct - 100.0 * (1.0 - 1.0 / sp.estimate)).abs() < 1e-9);
    assert!((g.saved_ns - total * (1.0 - 1.0 / sp.estimate)).abs() < 1.0);
    assert!(sp.model.contains("epilogue"), "{}", sp.model);
    assert!(r.action.contains("freezing"), "{}", r.action);
    // The batch-norm rows point to it instead of advice of their own.
    for name in [BN_INF, BN_ATEN] {
        let k = d.kernels.iter().find(|k| k.name == name).unwrap();
        assert_eq!(k.covered_by.as_deref(), Some("fold_batch_norm"));
        assert!(k.root_cause.contains("Fold batch norm"), "{}", k.root_cause);
        assert!(d
            .recommendations
            .iter()
            .all(|x| x.id == "fold_batch_norm" || !x.kernel.contains(name)));
    }
    // The ReLU that follows each batch norm is torch.compile's to fuse.
    let relu = d.kernels.iter().find(|k| k.name == RELU).unwrap();
    assert_eq!(relu.covered_by.as_deref(), Some("use_torch_compile"));
}

#[test]
fn training_batch_norm_is_not_folded() {
    // Forward with batch statistics, then the backward pass.
    let p = profile(
        &[
            (CONV, 200_000.0),
            (BN_STATS, 20_000.0),
            (BN_ATEN, 20_000.0),
            (RELU, 15_000.0),
            (BN_BACKWARD, 40_000.0),
        ],
        10,
    );
    let d = analyze(&p, &AnalyzeOptions::default());
    assert!(d.recommendations.iter().all(|r| r.id != "fold_batch_norm"));
    assert!(d
        .kernels
        .iter()
        .all(|k| k.covered_by.as_deref() != Some("fold_batch_norm")));
    // Batch statistics alone (train mode) cannot fold either.
    let p = profile(
        &[(CONV, 200_000.0), (BN_STATS, 20_000.0), (BN_ATEN, 20_000.0)],
        5,
    );
    let d = analyze(&p, &AnalyzeOptions::default());
    assert!(d.recommendations.iter().all(|r| r.id != "fold_batch_norm"));
}

#[test]
fn a_model_without_batch_norm_gets_no_fold_finding() {
    let p = profile(&[(CONV, 200_000.0), (RELU, 15_000.0)], 5);
    let d = analyze(&p, &AnalyzeOptions::default());
    assert!(d.recommendations.iter().all(|r| r.id != "fold_batch_norm"));
}

/// A timeline with PyTorch's op ranges: the batch norm runs as a generic
/// elementwise kernel whose name says nothing, under `aten::batch_norm`;
/// a second trace adds `aten::native_batch_norm_backward` (training).
fn with_ops(backward: bool) -> Profile {
    const GENERIC: &str = "void at::native::elementwise_kernel<128, 2, bn_lambda>(int, bn_lambda)";
    let mut t = Timeline::default();
    let mut now = 0i64;
    let mut corr = 1u64;
    let mut push = |t: &mut Timeline, op: &str, name: &str, dur: i64| {
        t.ranges.push(Range {
            name: op.into(),
            start_ns: now,
            end_ns: now + 5_000,
            thread: None,
        });
        t.api_calls.push(ApiCall {
            kind: ApiKind::KernelLaunch,
            name: "cudaLaunchKernel".into(),
            start_ns: now + 1_000,
            end_ns: now + 3_000,
            thread: 1,
            correlation: corr,
            frame: None,
            op: None,
            op_span: None,
        });
        t.activities.push(GpuActivity {
            kind: ActivityKind::Kernel,
            name: name.into(),
            start_ns: now + 4_000,
            end_ns: now + 4_000 + dur,
            device: 0,
            stream: 7,
            correlation: corr,
            grid: Some(Dim3 { x: 512, y: 1, z: 1 }),
            block: Some(Dim3 { x: 256, y: 1, z: 1 }),
            bytes: None,
            copy: None,
        });
        corr += 1;
        now += 4_000 + dur + 2_000;
    };
    for _ in 0..5 {
        push(&mut t, "aten::cudnn_convolution", CONV, 200_000);
        push(&mut t, "aten::batch_norm", GENERIC, 30_000);
        push(&mut t, "aten::relu", RELU, 15_000);
        if backward {
            push(
                &mut t,
                "aten::native_batch_norm_backward",
                "bn_grad_generic",
                40_000,
            );
        }
    }
    kopt_ingest::profile_from_timeline(t, "synthetic", "synthetic timeline")
}

#[test]
fn batch_norm_is_known_by_its_op_where_the_kernel_name_says_nothing() {
    let d = analyze(&with_ops(false), &AnalyzeOptions::default());
    let r = d
        .recommendations
        .iter()
        .find(|r| r.id == "fold_batch_norm")
        .expect("fold finding from the op");
    assert!(r.evidence.contains("aten::batch_norm"), "{}", r.evidence);
    assert!(r.kernel.contains("elementwise_kernel<128, 2, bn_lambda>"));
    let d = analyze(&with_ops(true), &AnalyzeOptions::default());
    assert!(d.recommendations.iter().all(|r| r.id != "fold_batch_norm"));
}

#[test]
fn a_finding_over_several_kernels_names_them_short_in_the_primary() {
    // Synthetic (the eval-mode block above): torch.compile (batch norm and
    // ReLU fused) tops the list, folding next; the primary component lists
    // the members' short names, not every full name joined (kilobytes of
    // templates).
    let d = analyze(&inference(), &AnalyzeOptions::default());
    let ids: Vec<&str> = d.recommendations.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids[..2], ["use_torch_compile", "fold_batch_norm"]);
    let p = d.primary.as_ref().unwrap();
    assert!(!p.component.contains(" | "), "{}", p.component);
    assert!(!p.component.contains('<'), "{}", p.component);
    assert!(p.component.len() < 200, "{}", p.component);
    // The ReLU's short name (the batch norms are the fold finding's).
    assert_eq!(p.component, "vectorized_elementwise_kernel");
}
