//! torch.optim's step (#35): which form the optimizer runs in (a kernel
//! per parameter and operation, multi-tensor `foreach` kernels, or one
//! fused kernel family), from the kernels launched inside its
//! `Optimizer.step#NAME.step` annotation, and the finding that moves it to
//! `fused=True`.

use kopt_model::{
    ActivityKind, ApiKind, OptimizerStep, PredictedSpeedup, Recommendation, Timeline,
};

/// Id of the finding.
pub const ID: &str = "use_fused_optimizer";

/// Id of the zero_grad finding.
pub const ZERO_GRAD_ID: &str = "zero_grad_set_to_none";

/// torch's annotation around `optimizer.zero_grad()`.
const ZERO_GRAD_RANGE: &str = "Optimizer.zero_grad#";

/// The module driver's range around the optimizer's step, before its class.
const DRIVER_PHASE: &str = "kopt:optimizer#";

/// GPU time of the fused step against each form's (Adam's update reads
/// and writes each state tensor once fused; the for-loop form makes about
/// a dozen elementwise passes, foreach about half as many), with the
/// range around it: (estimate, low end's, high end's).
fn gpu_ratio(form: &str) -> (f64, f64, f64) {
    match form {
        "for-loop" => (0.3, 0.5, 0.2),
        _ => (0.6, 0.8, 0.45),
    }
}

/// Host time of a fused step: a few launches per parameter group.
const FUSED_HOST_NS: f64 = 30_000.0;

/// The optimizer's step inside `windows` (the steady steps), where the
/// trace annotates it.
pub fn summarize(t: &Timeline, windows: &[(i64, i64)]) -> Option<OptimizerStep> {
    let in_window = |r: &&kopt_model::Range| {
        let w = windows.partition_point(|w| w.0 <= r.start_ns);
        w.checked_sub(1).is_some_and(|i| r.start_ns < windows[i].1)
    };
    let mut steps: Vec<&kopt_model::Range> = t
        .phase_ranges
        .iter()
        .filter(|r| r.name.starts_with("Optimizer.step#"))
        .filter(in_window)
        .collect();
    // kopt's module driver marks the step `kopt:optimizer#CLASS` (an NVTX
    // range in kopt's own trace, where torch's annotation is not recorded).
    if steps.is_empty() {
        steps = t
            .ranges
            .iter()
            .chain(&t.phase_ranges)
            .filter(|r| r.name.starts_with(DRIVER_PHASE))
            .filter(in_window)
            .collect();
    }
    if steps.is_empty() {
        return None;
    }
    let launched = launch_times(t);
    let mut spans: Vec<(i64, i64)> = steps.iter().map(|r| (r.start_ns, r.end_ns)).collect();
    spans.sort_unstable();
    let (mut kernels, mut gpu) = (0usize, 0.0);
    let (mut multi, mut fused) = (false, false);
    for a in kernels_in(t, &spans, &launched) {
        kernels += 1;
        gpu += (a.end_ns - a.start_ns).max(0) as f64;
        let lower = a.name.to_ascii_lowercase();
        multi |= lower.contains("multi_tensor_apply");
        fused |= lower.contains("fused") && (lower.contains("adam") || lower.contains("sgd"));
    }
    let n = steps.len() as f64;
    let host: f64 = steps
        .iter()
        .map(|r| (r.end_ns - r.start_ns).max(0) as f64)
        .sum();
    let name = steps[0]
        .name
        .trim_start_matches("Optimizer.step#")
        .trim_start_matches(DRIVER_PHASE)
        .split('.')
        .next()
        .unwrap_or("")
        .to_string();
    let form = if fused {
        "fused"
    } else if multi {
        "foreach"
    } else {
        "for-loop"
    };
    Some(OptimizerStep {
        name,
        form: form.into(),
        host_ns_per_step: host / n,
        kernels_per_step: kernels as f64 / n,
        gpu_ns_per_step: gpu / n,
        zero_grad_fill: zero_grad_fill(t, &in_window, &launched, steps.len()),
    })
}

/// `zero_grad` inside the steady steps, when it launches kernels: it fills
/// the gradients with zeros (`set_to_none=False`, or a loop of
/// `p.grad.zero_()` under the annotation). Per training step, over the
/// optimizer's `steps` steps.
fn zero_grad_fill(
    t: &Timeline,
    in_window: &dyn Fn(&&kopt_model::Range) -> bool,
    launched: &rustc_hash::FxHashMap<u64, i64>,
    steps: usize,
) -> Option<kopt_model::ZeroGradFill> {
    let mut spans: Vec<(i64, i64)> = t
        .phase_ranges
        .iter()
        .filter(|r| r.name.starts_with(ZERO_GRAD_RANGE))
        .filter(in_window)
        .map(|r| (r.start_ns, r.end_ns))
        .collect();
    spans.sort_unstable();
    // Nested or repeated annotations of one call count once.
    spans.dedup_by(|b, a| b.0 < a.1);
    if spans.is_empty() || steps == 0 {
        return None;
    }
    let (kernels, gpu) = kernels_in(t, &spans, launched).fold((0usize, 0.0), |(n, ns), a| {
        (n + 1, ns + (a.end_ns - a.start_ns).max(0) as f64)
    });
    if kernels == 0 {
        return None;
    }
    let n = steps as f64;
    let host: f64 = spans.iter().map(|s| (s.1 - s.0).max(0) as f64).sum();
    Some(kopt_model::ZeroGradFill {
        host_ns_per_step: host / n,
        kernels_per_step: kernels as f64 / n,
        gpu_ns_per_step: gpu / n,
    })
}

/// The kernels launched (by their host launch call) inside `spans`, sorted.
fn kernels_in<'a>(
    t: &'a Timeline,
    spans: &'a [(i64, i64)],
    launched: &'a rustc_hash::FxHashMap<u64, i64>,
) -> impl Iterator<Item = &'a kopt_model::GpuActivity> + 'a {
    t.activities
        .iter()
        .filter(|a| a.kind == ActivityKind::Kernel)
        .filter(move |a| launched_inside(a, spans, launched))
}

/// Whether `a`'s launch call started inside one of `spans` (sorted).
fn launched_inside(
    a: &kopt_model::GpuActivity,
    spans: &[(i64, i64)],
    launched: &rustc_hash::FxHashMap<u64, i64>,
) -> bool {
    launched.get(&a.correlation).is_some_and(|at| {
        let i = spans.partition_point(|s| s.0 <= *at);
        i.checked_sub(1).is_some_and(|j| *at <= spans[j].1)
    })
}

/// The finding for a `zero_grad` that fills the gradients with zeros,
/// priced on the step as [`recommend`] prices the optimizer's: the call's
/// time now (its host time less the recorder's share, at least its
/// kernels') comes off the step.
pub fn recommend_set_to_none(
    o: &OptimizerStep,
    wall_ns: f64,
    recorded: f64,
) -> Option<Recommendation> {
    let fmt = kopt_model::format_duration_ns;
    let z = o.zero_grad_fill.as_ref()?;
    if wall_ns <= 0.0 {
        return None;
    }
    let now = (z.host_ns_per_step * recorded.clamp(0.05, 1.0)).max(z.gpu_ns_per_step);
    // The range: all of it, or only its kernels' GPU time.
    let after = |saved: f64| (wall_ns - saved).max(0.05 * wall_ns);
    let estimate = wall_ns / after(now);
    if estimate < 1.005 {
        return None;
    }
    let model = format!(
        "step after = step - zero_grad's time now: {} - {} (its annotation's host time, less the recorder's share, at least its kernels' {}); low: only the kernels' GPU time saved",
        fmt(wall_ns),
        fmt(now),
        fmt(z.gpu_ns_per_step),
    );
    Some(Recommendation {
        rank: 0,
        id: ZERO_GRAD_ID.into(),
        title: "Let zero_grad drop the gradients instead of zeroing them".into(),
        kernel: format!("torch.optim.{}'s zero_grad", o.name),
        kernel_short: format!("{} zero_grad (fills)", o.name),
        class: kopt_model::BottleneckClass::LaunchOverhead,
        evidence: format!(
            "optimizer.zero_grad() launches {:.0} kernels a step ({} of host time, {} on the GPU): it fills every gradient with zeros, which the next backward then adds to.",
            z.kernels_per_step,
            fmt(z.host_ns_per_step),
            fmt(z.gpu_ns_per_step)
        ),
        action: "Call optimizer.zero_grad(set_to_none=True) (the default since PyTorch 2.0; model.zero_grad() too): the gradients are dropped, and backward writes them instead of adding to zeros. Code that reads .grad before backward must then expect None.".into(),
        source: "PyTorch's torch.optim.Optimizer.zero_grad documentation (set_to_none)".into(),
        gain: Some(kopt_model::GainEstimate {
            kernel_pct: 0.0,
            workload_pct: 100.0 * (1.0 - 1.0 / estimate),
            saved_ns: wall_ns - after(now),
            method: model.clone(),
        }),
        predicted_speedup: Some(PredictedSpeedup {
            estimate,
            low: wall_ns / after(z.gpu_ns_per_step.min(now)),
            high: estimate,
            model,
        }),
    })
}

/// Each kernel launch's host start, by correlation id.
fn launch_times(t: &Timeline) -> rustc_hash::FxHashMap<u64, i64> {
    t.api_calls
        .iter()
        .filter(|c| c.kind == ApiKind::KernelLaunch && c.correlation != 0)
        .map(|c| (c.correlation, c.start_ns))
        .collect()
}

/// The optimizer step's ranges in the trace: torch's annotation, else the
/// module driver's range.
pub(crate) fn step_ranges(t: &Timeline) -> Vec<(i64, i64)> {
    let torch: Vec<(i64, i64)> = t
        .phase_ranges
        .iter()
        .filter(|r| r.name.starts_with("Optimizer.step#"))
        .map(|r| (r.start_ns, r.end_ns))
        .collect();
    let mut spans = if torch.is_empty() {
        t.ranges
            .iter()
            .chain(&t.phase_ranges)
            .filter(|r| r.name.starts_with(DRIVER_PHASE))
            .map(|r| (r.start_ns, r.end_ns))
            .collect()
    } else {
        torch
    };
    spans.sort_unstable();
    spans
}

/// The kernels the optimizer's step launched, by their index among the
/// timeline's kernels (the launch ids a timeline's profile gives them).
pub fn launch_ids(t: &Timeline) -> std::collections::HashSet<u64> {
    let spans = step_ranges(t);
    if spans.is_empty() {
        return Default::default();
    }
    let launched = launch_times(t);
    t.activities
        .iter()
        .filter(|a| a.kind == ActivityKind::Kernel)
        .enumerate()
        .filter(|(_, a)| launched_inside(a, &spans, &launched))
        .map(|(i, _)| i as u64)
        .collect()
}

/// The finding for an optimizer not yet fused, priced on the step:
/// `wall_ns` the step as it runs unrecorded, `recorded` the share of the
/// recorded step that is the step's own (the recorder slows the
/// optimizer's launches as it slows the rest).
pub fn recommend(o: &OptimizerStep, wall_ns: f64, recorded: f64) -> Option<Recommendation> {
    let fmt = kopt_model::format_duration_ns;
    // No kernel inside the step: nothing on the GPU to fuse (a trace
    // without kernels, or an optimizer on the CPU).
    if o.form == "fused" || wall_ns <= 0.0 || o.kernels_per_step <= 0.0 {
        return None;
    }
    let fusable = [
        "Adam", "AdamW", "SGD", "Adagrad", "Adamax", "NAdam", "RAdam",
    ];
    if !fusable.contains(&o.name.as_str()) {
        return None;
    }
    let now = (o.host_ns_per_step * recorded.clamp(0.05, 1.0)).max(o.gpu_ns_per_step);
    let (est, low, high) = gpu_ratio(&o.form);
    let after = |ratio: f64| (o.gpu_ns_per_step * ratio).max(FUSED_HOST_NS);
    let step = |ratio: f64| (wall_ns - (now - after(ratio)).max(0.0)).max(0.05 * wall_ns);
    let estimate = wall_ns / step(est);
    if estimate < 1.01 {
        return None;
    }
    let model = format!(
        "step after = step - (the optimizer's step now - fused): {} - ({} - max({} GPU x {est}, {} of launches)); the optimizer's step now: its annotation's host time, less the recorder's share, at least its kernels' {}; fused GPU time x{low}-{high} for the range",
        fmt(wall_ns),
        fmt(now),
        fmt(o.gpu_ns_per_step),
        fmt(FUSED_HOST_NS),
        fmt(o.gpu_ns_per_step),
    );
    Some(Recommendation {
        rank: 0,
        id: ID.into(),
        title: format!("Use the fused {} optimizer", o.name),
        kernel: format!("torch.optim.{}'s step", o.name),
        kernel_short: format!("{} step ({})", o.name, o.form),
        class: kopt_model::BottleneckClass::LaunchOverhead,
        evidence: format!(
            "torch.optim.{} runs in its {} form: {:.0} kernels and {} of host time a step ({} on the GPU).",
            o.name,
            o.form,
            o.kernels_per_step,
            fmt(o.host_ns_per_step),
            fmt(o.gpu_ns_per_step)
        ),
        action: format!(
            "Create the optimizer with fused=True (torch.optim.{}(params, ..., fused=True): one kernel family updates every parameter); foreach=True is the next best where fused is not available for the parameters' dtype or device.",
            o.name
        ),
        source: "PyTorch's torch.optim documentation (foreach and fused implementations)".into(),
        gain: Some(kopt_model::GainEstimate {
            kernel_pct: 0.0,
            workload_pct: 100.0 * (1.0 - 1.0 / estimate),
            saved_ns: wall_ns - step(est),
            method: model.clone(),
        }),
        predicted_speedup: Some(PredictedSpeedup {
            estimate,
            low: wall_ns / step(low),
            high: wall_ns / step(high),
            model,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kopt_model::{ApiCall, GpuActivity, Range};

    fn timeline(kernel: &str, per_step: u64) -> Timeline {
        let mut t = Timeline::default();
        let mut c = 0;
        for s in 0..4i64 {
            let at = s * 10_000_000;
            t.phase_ranges.push(Range {
                name: "Optimizer.step#Adam.step".into(),
                start_ns: at + 5_000_000,
                end_ns: at + 9_000_000,
                thread: None,
            });
            for k in 0..per_step as i64 {
                c += 1;
                launch(&mut t, c, at + 5_000_000 + k * 6_000, kernel, 2_000);
            }
        }
        t
    }

    /// A kernel `name` of `gpu_ns` launched at `host` (correlation `c`).
    fn launch(t: &mut Timeline, c: u64, host: i64, name: &str, gpu_ns: i64) {
        t.api_calls.push(ApiCall {
            kind: ApiKind::KernelLaunch,
            name: "cudaLaunchKernel".into(),
            start_ns: host,
            end_ns: host + 5_000,
            thread: 1,
            correlation: c,
            frame: None,
            op: None,
            op_span: None,
        });
        t.activities.push(GpuActivity {
            kind: ActivityKind::Kernel,
            name: name.into(),
            start_ns: host + 7_000,
            end_ns: host + 7_000 + gpu_ns,
            device: 0,
            stream: 7,
            correlation: c,
            grid: None,
            block: None,
            bytes: None,
            copy: None,
        });
    }

    fn windows() -> Vec<(i64, i64)> {
        (0..4)
            .map(|s| (s * 10_000_000, (s + 1) * 10_000_000))
            .collect()
    }

    #[test]
    fn the_for_loop_form_is_found_and_priced() {
        let t = timeline(
            "void at::native::vectorized_elementwise_kernel<4, at::native::addcmul_cuda_kernel>",
            600,
        );
        let o = summarize(&t, &windows()).unwrap();
        assert_eq!((o.name.as_str(), o.form.as_str()), ("Adam", "for-loop"));
        assert_eq!(o.kernels_per_step, 600.0);
        assert_eq!(o.host_ns_per_step, 4_000_000.0);
        let r = recommend(&o, 10e6, 1.0).unwrap();
        // No kernel inside the step (a trace with its kernels stripped, an
        // optimizer on the CPU): nothing to fuse, no finding.
        let cpu = OptimizerStep {
            kernels_per_step: 0.0,
            gpu_ns_per_step: 0.0,
            ..o.clone()
        };
        assert!(recommend(&cpu, 10e6, 1.0).is_none());
        let sp = r.predicted_speedup.unwrap();
        // 4 ms now, 1.2 ms of GPU x 0.3 fused: 10 ms -> 6.36 ms.
        assert!((1.5..1.65).contains(&sp.estimate), "{sp:?}");
        assert!(sp.low <= sp.estimate && sp.estimate <= sp.high);
        assert!(r.action.contains("fused=True"));
    }

    #[test]
    fn the_module_drivers_range_names_the_step_in_kopts_own_trace() {
        let mut t = timeline(
            "void at::native::vectorized_elementwise_kernel<4, at::native::addcmul_cuda_kernel>",
            100,
        );
        // kopt's tracer: the driver's NVTX range, no torch annotation.
        for r in std::mem::take(&mut t.phase_ranges) {
            t.ranges.push(Range {
                name: "kopt:optimizer#AdamW".into(),
                ..r
            });
        }
        let o = summarize(&t, &windows()).unwrap();
        assert_eq!((o.name.as_str(), o.form.as_str()), ("AdamW", "for-loop"));
        assert!(recommend(&o, 10e6, 1.0).is_some());
    }

    #[test]
    fn the_steps_kernels_are_known_by_their_launch_ids() {
        let t = timeline("elementwise", 3);
        let ids = launch_ids(&t);
        assert_eq!(ids.len(), 12, "3 kernels in each of 4 steps");
        assert!(launch_ids(&Timeline::default()).is_empty());
    }

    /// #35: a zero_grad that launches kernels fills the gradients with
    /// zeros; one that launches none (set_to_none) gets no finding.
    #[test]
    fn a_zero_filling_zero_grad_is_found_and_priced() {
        let mut t = timeline(
            "void at::native::multi_tensor_apply_kernel<AdamFunctor<float>>",
            2,
        );
        let mut c = 1_000;
        for s in 0..4i64 {
            let at = s * 10_000_000 + 1_000_000;
            t.phase_ranges.push(Range {
                name: "Optimizer.zero_grad#Adam.zero_grad".into(),
                start_ns: at,
                end_ns: at + 500_000,
                thread: None,
            });
            if s == 3 {
                // The last step's zero_grad drops the gradients: no kernel.
                continue;
            }
            for k in 0..3 {
                c += 1;
                let fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>";
                launch(&mut t, c, at + 10_000 + k * 100_000, fill, 10_000);
            }
        }
        let o = summarize(&t, &windows()).unwrap();
        let z = o.zero_grad_fill.clone().unwrap();
        // 9 fills over 4 steps; 0.5 ms of host time a step.
        assert_eq!(z.kernels_per_step, 2.25);
        assert_eq!(z.host_ns_per_step, 500_000.0);
        assert_eq!(z.gpu_ns_per_step, 22_500.0);
        let r = recommend_set_to_none(&o, 10e6, 1.0).unwrap();
        let sp = r.predicted_speedup.unwrap();
        // 10 ms less 0.5 ms: 1.053x; low: only the 22.5 us of fills.
        assert!((sp.estimate - 10.0 / 9.5).abs() < 1e-9, "{sp:?}");
        assert!(sp.low < 1.003 && sp.low > 1.0, "{sp:?}");
        assert!(r.action.contains("set_to_none=True"));
        // A zero_grad that launches nothing: no fill, no finding.
        let none = OptimizerStep {
            zero_grad_fill: None,
            ..o
        };
        assert!(recommend_set_to_none(&none, 10e6, 1.0).is_none());
        let dropped = timeline(
            "void at::native::multi_tensor_apply_kernel<AdamFunctor<float>>",
            2,
        );
        assert!(summarize(&dropped, &windows())
            .unwrap()
            .zero_grad_fill
            .is_none());
    }

    #[test]
    fn foreach_and_fused_forms_are_told_apart() {
        let foreach = timeline("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>>", 20);
        assert_eq!(summarize(&foreach, &windows()).unwrap().form, "foreach");
        let fused = timeline("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor<float, 4>>", 4);
        let o = summarize(&fused, &windows()).unwrap();
        assert_eq!(o.form, "fused");
        assert!(recommend(&o, 10e6, 1.0).is_none());
    }
}
