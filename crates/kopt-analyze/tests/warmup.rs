//! Warm-up / autotuning trials left out of the diagnosis. Every input here
//! is synthetic: timelines and launch lists built in code to look like a
//! cuDNN benchmark search, Triton's autotuner and plain repeated workloads.

use kopt_analyze::{analyze, AnalyzeOptions};
use kopt_model::{
    ActivityKind, ApiCall, ApiKind, Device, Dim3, GpuActivity, KernelLaunch, Metrics, Profile,
    Range, Recorder, Timeline,
};

const CHOSEN_A: &str = "sm80_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x32_stage4_warpsize2x2x1_g1_tensor16x8x16_kernel";
const CHOSEN_B: &str = "void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(cudnn::winograd_nonfused::WinogradDataParams<float, float>)";
const TRIALS: [&str; 3] = [
    "void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, false, true>(int, int, int, float const*, int, float*, float const*, kernel_conv_params, unsigned long long, int, float, float, int, float const*, float const*, bool, int, int)",
    "void fft2d_r2c_32x32<float, false, 1u, false>(float2*, float const*, int, int, int, int, int, int, int, int, int, cudnn::reduced_divisor, bool, int2, int, int)",
    "sm80_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize64x64x64_stage5_warpsize2x2x1_g1_tensor16x8x16_kernel",
];
const NORMAL: &str = "void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, void at::native::templates::cuda::normal_and_transform<float, float>(int)>(long, at::PhiloxCudaState)";
const RELU: &str = "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#14}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, float, std::array<char*, 2ul>)";

/// Appends kernels one after another, each with its launch call.
struct Builder {
    t: Timeline,
    now: i64,
    corr: u64,
}

impl Builder {
    fn new(recorder: Recorder, whole_program: bool) -> Self {
        let t = Timeline {
            recorder,
            whole_program,
            ..Default::default()
        };
        Builder {
            t,
            now: 1_000_000,
            corr: 1,
        }
    }

    fn kernel(&mut self, name: &str, dur: i64, grid: Option<Dim3>, block: Option<Dim3>) {
        let c = self.corr;
        self.corr += 1;
        self.t.api_calls.push(ApiCall {
            kind: ApiKind::KernelLaunch,
            name: "cudaLaunchKernel".into(),
            start_ns: self.now,
            end_ns: self.now + 3_000,
            thread: 1,
            correlation: c,
            frame: None,
            op: None,
            op_span: None,
        });
        self.t.activities.push(GpuActivity {
            kind: ActivityKind::Kernel,
            name: name.into(),
            start_ns: self.now + 4_000,
            end_ns: self.now + 4_000 + dur,
            device: 0,
            stream: 7,
            correlation: c,
            grid,
            block,
            bytes: None,
            copy: None,
        });
        self.now += 4_000 + dur + 1_000;
    }

    fn range(&mut self, name: &str, body: impl FnOnce(&mut Self)) {
        let start = self.now;
        body(self);
        self.t.ranges.push(Range {
            name: name.into(),
            start_ns: start,
            end_ns: self.now,
            thread: None,
        });
        self.now += 10_000;
    }

    fn profile(self) -> Profile {
        kopt_ingest::profile_from_timeline(self.t, "synthetic", "synthetic timeline")
    }
}

fn dim(x: u32) -> Option<Dim3> {
    Some(Dim3 { x, y: 1, z: 1 })
}

/// A ResNet-like step under torch.profiler with cuDNN's benchmark mode: the
/// first step tries 3 other algorithms per convolution (each twice) before
/// running the chosen one; every later step runs the chosen ones only.
fn cudnn_benchmark() -> Profile {
    let mut b = Builder::new(Recorder::Kineto, false);
    for step in 0..6 {
        b.range(&format!("ProfilerStep#{step}"), |b| {
            for chosen in [CHOSEN_A, CHOSEN_B] {
                if step == 0 {
                    for trial in TRIALS {
                        for _ in 0..2 {
                            b.kernel(trial, 150_000, dim(120), dim(256));
                        }
                    }
                }
                b.kernel(chosen, 100_000, dim(120), dim(256));
                b.kernel(RELU, 20_000, dim(512), dim(128));
            }
        });
    }
    b.profile()
}

#[test]
fn cudnn_benchmark_trials_are_left_out() {
    let p = cudnn_benchmark();
    let d = analyze(&p, &AnalyzeOptions::default());
    let w = d.warmup_trials.as_ref().expect("trials found");
    assert!(!w.kept);
    assert_eq!(w.kernels.len(), 3, "{:?}", w.kernels);
    // 3 algorithms x 2 tries x 2 convolutions.
    assert_eq!(w.launches, 12);
    assert!(
        (w.total_ns - 12.0 * 150_000.0).abs() < 1.0,
        "{}",
        w.total_ns
    );
    assert!(
        w.how_found
            .contains("warm-up step cut before the steady state"),
        "{}",
        w.how_found
    );
    for k in &d.kernels {
        assert!(
            !TRIALS.contains(&k.name.as_str()),
            "{} in the table",
            k.name
        );
    }
    // The chosen algorithms stay whole (their first-step launches too).
    let a = d.kernels.iter().find(|k| k.name == CHOSEN_A).unwrap();
    assert_eq!(a.launches, 6);
    // Totals and shares are of what is left.
    let steady: f64 = 6.0 * 2.0 * 120_000.0;
    assert!(
        (d.total_kernel_ns - steady).abs() < 1.0,
        "{}",
        d.total_kernel_ns
    );
    let pct: f64 = d.kernels.iter().map(|k| k.pct_of_total).sum();
    assert!((pct - 100.0).abs() < 1e-6, "{pct}");
    for r in &d.recommendations {
        assert!(!TRIALS.iter().any(|t| r.kernel.contains(t)), "{}", r.kernel);
    }
    // Kept on request: in the table and the total, still named in the JSON.
    let kept = analyze(
        &p,
        &AnalyzeOptions {
            keep_warmup: true,
            ..Default::default()
        },
    );
    let w = kept.warmup_trials.as_ref().unwrap();
    assert!(w.kept);
    assert!(kept.kernels.iter().any(|k| k.name == TRIALS[0]));
    assert!((kept.total_kernel_ns - steady - 12.0 * 150_000.0).abs() < 1.0);
}

#[test]
fn old_json_without_the_field_still_reads() {
    let d = analyze(&cudnn_benchmark(), &AnalyzeOptions::default());
    let mut v = serde_json::to_value(&d).unwrap();
    assert!(v["warmup_trials"]["kernels"][0]["launches"].as_u64() == Some(4));
    v.as_object_mut().unwrap().remove("warmup_trials");
    let back: kopt_model::Diagnosis = serde_json::from_value(v).unwrap();
    assert!(back.warmup_trials.is_none());
}

const MATMUL: &str = "matmul_kernel";
const POI: &str = "triton_poi_fused_add_relu_0";

/// A whole-program kopt trace of a loop whose matmul is Triton-autotuned:
/// the first step benchmarks four configurations (grid and block differ),
/// each three times, then runs the winner; later steps run the winner only.
fn triton_autotune() -> Profile {
    let configs = [(64, 128), (128, 256), (32, 64), (256, 128)];
    let winner = configs[1];
    let mut b = Builder::new(Recorder::KoptTracer, true);
    for step in 0..5 {
        b.range("train_step", |b| {
            if step == 0 {
                for (g, bl) in configs {
                    for _ in 0..3 {
                        b.kernel(MATMUL, 80_000, dim(g), dim(bl));
                    }
                }
            }
            b.kernel(MATMUL, 60_000, dim(winner.0), dim(winner.1));
            b.kernel(POI, 10_000, dim(1024), dim(256));
        });
    }
    b.profile()
}

#[test]
fn triton_autotune_configurations_are_left_out_by_configuration() {
    let d = analyze(&triton_autotune(), &AnalyzeOptions::default());
    let w = d.warmup_trials.as_ref().expect("trials found");
    // Three losing configurations; the winner's trial launches stay with it.
    assert_eq!(w.kernels.len(), 3, "{:?}", w.kernels);
    assert!(w.kernels.iter().all(|k| k.name == MATMUL));
    assert!(w
        .kernels
        .iter()
        .all(|k| k.grid.as_deref() != Some("(128, 1, 1)")));
    assert_eq!(w.launches, 9);
    let m = d.kernels.iter().find(|k| k.name == MATMUL).unwrap();
    assert_eq!(m.launches, 3 + 5);
    assert_eq!(m.grid, "(128, 1, 1)");
}

#[test]
fn a_one_step_trace_leaves_nothing_out() {
    // No steps: nothing to call a steady state, so nothing is a warm-up.
    let mut b = Builder::new(Recorder::KoptTracer, true);
    b.kernel("init_weights", 50_000, dim(10), dim(128));
    for _ in 0..4 {
        b.kernel(MATMUL, 60_000, dim(128), dim(256));
    }
    let d = analyze(&b.profile(), &AnalyzeOptions::default());
    assert!(d.warmup_trials.is_none());
    assert!(d.kernels.iter().any(|k| k.name == "init_weights"));
    // One marked step is no steady state either.
    let mut b = Builder::new(Recorder::Kineto, false);
    b.range("ProfilerStep#0", |b| {
        b.kernel("first_only", 50_000, dim(10), dim(128));
        b.kernel(MATMUL, 60_000, dim(128), dim(256));
    });
    let d = analyze(&b.profile(), &AnalyzeOptions::default());
    assert!(d.warmup_trials.is_none());
    assert_eq!(d.kernels.len(), 2);
}

#[test]
fn steps_alike_from_the_first_leave_nothing_out() {
    let mut b = Builder::new(Recorder::Kineto, false);
    for step in 0..5 {
        b.range(&format!("ProfilerStep#{step}"), |b| {
            b.kernel(CHOSEN_A, 100_000, dim(120), dim(256));
            b.kernel(RELU, 20_000, dim(512), dim(128));
        });
    }
    let d = analyze(&b.profile(), &AnalyzeOptions::default());
    assert!(d.warmup_trials.is_none());
}

fn launch(id: u64, name: &str, ns: f64) -> KernelLaunch {
    KernelLaunch {
        id,
        name: name.into(),
        grid: Dim3 { x: 120, y: 1, z: 1 },
        block: Dim3 { x: 256, y: 1, z: 1 },
        stream: Some(7),
        metrics: Metrics {
            duration_ns: Some(ns),
            ..Default::default()
        },
        ncu_rules: Vec::new(),
    }
}

fn ncu(names: &[&str]) -> Profile {
    Profile {
        device: Device::unknown(),
        launches: names
            .iter()
            .enumerate()
            .map(|(i, n)| launch(i as u64, n, 100_000.0))
            .collect(),
        sources: Vec::new(),
        timeline: None,
    }
}

/// An ncu capture of 4 iterations of [conv, relu, conv, relu, conv] (the
/// first two convs one kernel), cuDNN trying two other algorithms before
/// the last convolution of iteration `trials_at`.
fn ncu_iterations(trials_at: usize) -> Vec<&'static str> {
    let mut v = Vec::new();
    for it in 0..4 {
        v.extend([CHOSEN_A, RELU, CHOSEN_A, RELU]);
        if it == trials_at {
            v.extend([TRIALS[0], TRIALS[1]]);
        }
        v.push(CHOSEN_B);
    }
    v
}

#[test]
fn an_ncu_capture_that_repeats_leaves_out_first_iteration_trials() {
    let p = ncu(&ncu_iterations(0));
    let d = analyze(&p, &AnalyzeOptions::default());
    let w = d.warmup_trials.as_ref().expect("trials found");
    assert_eq!(w.kernels.len(), 2);
    assert_eq!(w.launches, 2);
    assert!(w.how_found.contains("repeats 4 times"), "{}", w.how_found);
    assert_eq!(d.kernels.len(), 3);
    assert!((d.total_kernel_ns - 20.0 * 100_000.0).abs() < 1.0);
}

#[test]
fn an_ncu_capture_without_clear_evidence_keeps_everything() {
    // The same kernels once each after the first iteration: not warm-up.
    let d = analyze(&ncu(&ncu_iterations(1)), &AnalyzeOptions::default());
    assert!(d.warmup_trials.is_none());
    // Before the first iteration: the input's set-up, kept.
    let mut names = vec![TRIALS[0]];
    names.extend(ncu_iterations(9));
    let d = analyze(&ncu(&names), &AnalyzeOptions::default());
    assert!(d.warmup_trials.is_none());
    // No repetition: every kernel once.
    let d = analyze(
        &ncu(&[TRIALS[0], CHOSEN_A, RELU, CHOSEN_B]),
        &AnalyzeOptions::default(),
    );
    assert!(d.warmup_trials.is_none());
    // Two iterations only: too few to tell.
    let d = analyze(
        &ncu(&[TRIALS[0], CHOSEN_A, RELU, CHOSEN_A, RELU]),
        &AnalyzeOptions::default(),
    );
    assert!(d.warmup_trials.is_none());
    // Kernels of unrelated counts (a suite of separate workloads): no common count.
    let mut names = vec![TRIALS[0]];
    names.extend(std::iter::repeat_n(CHOSEN_A, 3));
    names.extend(std::iter::repeat_n(RELU, 5));
    names.extend(std::iter::repeat_n(CHOSEN_B, 7));
    let d = analyze(&ncu(&names), &AnalyzeOptions::default());
    assert!(d.warmup_trials.is_none());
}

#[test]
fn start_up_kernels_before_the_first_step_are_kept() {
    // Synthetic: the cuDNN benchmark above, after a start-up that generates
    // the input (torch.randn's kernel) and initialises the weights, once
    // each before the first step: set-up, not warm-up; only the trials go.
    let mut b = Builder::new(Recorder::Kineto, false);
    b.kernel(NORMAL, 40_000, dim(1056), dim(256));
    b.kernel("init_weights", 30_000, dim(64), dim(256));
    b.now += 10_000;
    for step in 0..6 {
        b.range(&format!("ProfilerStep#{step}"), |b| {
            for chosen in [CHOSEN_A, CHOSEN_B] {
                if step == 0 {
                    for trial in TRIALS {
                        b.kernel(trial, 150_000, dim(120), dim(256));
                    }
                }
                b.kernel(chosen, 100_000, dim(120), dim(256));
                b.kernel(RELU, 20_000, dim(512), dim(128));
            }
        });
    }
    let d = analyze(&b.profile(), &AnalyzeOptions::default());
    let w = d.warmup_trials.as_ref().expect("trials found");
    assert_eq!(w.kernels.len(), 3, "{:?}", w.kernels);
    assert_eq!(w.evidence, kopt_model::WarmupEvidence::WarmupSteps);
    assert!(
        w.how_found.contains("none in the start-up"),
        "{}",
        w.how_found
    );
    for kept in [NORMAL, "init_weights"] {
        assert!(d.kernels.iter().any(|k| k.name == kept), "{kept} left out");
    }
}

#[test]
fn a_pattern_of_one_kernel_per_step_is_no_warmup_evidence() {
    // Synthetic: a whole-program trace of one kernel launched in a loop,
    // with another kernel once among its first launches: the "steps" are
    // the loop kernel's own launches, not iterations with a warm-up.
    let mut b = Builder::new(Recorder::KoptTracer, true);
    for i in 0..12 {
        b.kernel(MATMUL, 60_000, dim(128), dim(256));
        if i == 1 {
            b.kernel("reduce_once", 60_000, dim(128), dim(256));
        }
    }
    let d = analyze(&b.profile(), &AnalyzeOptions::default());
    assert!(d.warmup_trials.is_none(), "{:?}", d.warmup_trials);
    assert!(d.kernels.iter().any(|k| k.name == "reduce_once"));
}

/// rocprof v1 on an MI250 (fixtures/amd/rocprof-v1-mi250): the app's input
/// initialisation runs once (11.5 ms) before 100 iterations of 10 kernels.
#[test]
fn an_application_s_input_initialisation_is_kept() {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/amd/rocprof-v1-mi250/results.csv");
    let p = kopt_ingest::read_rocprof_files(&[path]).unwrap();
    let d = analyze(&p, &AnalyzeOptions::default());
    assert!(d.warmup_trials.is_none(), "{:?}", d.warmup_trials);
    let k = d
        .kernels
        .iter()
        .find(|k| k.name == "initialize_polynomial_kernel")
        .expect("kept");
    assert_eq!(k.launches, 1);
}
