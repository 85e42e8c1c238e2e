//! A kernel covered by one whole-model finding has that finding's words in
//! its root cause, never another's: the eager-elementwise-chain text was
//! appended to every covered kernel whenever the chain finding existed
//! (an fp32 SGEMM covered by the TF32 finding read "Part of an eager
//! elementwise chain"). Synthetic launch lists: a model already compiled
//! (a Triton kernel, so no torch.compile finding) with eager elementwise
//! chains and an fp32 SIMT GEMM on a TF32-capable GPU.

use kopt_analyze::{analyze, AnalyzeOptions};
use kopt_model::{Device, Dim3, KernelLaunch, Metrics, Profile};

const SGEMM: &str = "void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>(T1::Params)";
const RELU: &str = "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#14}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, float, std::array<char*, 2ul>)";
const ADD: &str = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)";
const TRITON: &str = "triton_poi_fused_add_gelu_mul_0";

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

fn profile(cc: &str, seq: &[(&str, f64)]) -> Profile {
    let mut device = Device::unknown();
    device.compute_capability = Some(cc.into());
    let mut launches = Vec::new();
    for _ in 0..10 {
        for (n, ns) in seq {
            launches.push(launch(launches.len() as u64, n, *ns));
        }
    }
    Profile {
        device,
        launches,
        sources: Vec::new(),
        timeline: None,
    }
}

const CHAIN_TEXT: &str = "eager elementwise chain";

#[test]
fn only_chain_members_are_said_to_be_part_of_a_chain() {
    let p = profile(
        "9.0",
        &[
            (SGEMM, 200_000.0),
            (RELU, 30_000.0),
            (ADD, 30_000.0),
            (TRITON, 40_000.0),
        ],
    );
    let d = analyze(&p, &AnalyzeOptions::default());
    let ids: Vec<&str> = d.recommendations.iter().map(|r| r.id.as_str()).collect();
    assert!(ids.contains(&"fuse_eager_elementwise"), "{ids:?}");
    assert!(ids.contains(&"enable_tf32"), "{ids:?}");
    let kernel = |name: &str| d.kernels.iter().find(|k| k.name == name).unwrap();
    let gemm = kernel(SGEMM);
    assert_eq!(gemm.covered_by.as_deref(), Some("enable_tf32"));
    assert!(
        !gemm.root_cause.contains(CHAIN_TEXT),
        "the TF32-covered GEMM: {}",
        gemm.root_cause
    );
    for member in [RELU, ADD] {
        let k = kernel(member);
        assert_eq!(k.covered_by.as_deref(), Some("fuse_eager_elementwise"));
        assert!(k.root_cause.contains(CHAIN_TEXT), "{}", k.root_cause);
    }
    let triton = kernel(TRITON);
    assert!(
        !triton.root_cause.contains(CHAIN_TEXT),
        "{}",
        triton.root_cause
    );
}

/// The same launches without the chain finding's members: nothing reads
/// as part of a chain, and the GEMM is still the TF32 finding's.
#[test]
fn no_chain_no_chain_text() {
    let p = profile("9.0", &[(SGEMM, 200_000.0), (TRITON, 40_000.0)]);
    let d = analyze(&p, &AnalyzeOptions::default());
    assert!(d.kernels.iter().all(|k| !k.root_cause.contains(CHAIN_TEXT)));
    let gemm = d.kernels.iter().find(|k| k.name == SGEMM).unwrap();
    assert_eq!(gemm.covered_by.as_deref(), Some("enable_tf32"));
}
