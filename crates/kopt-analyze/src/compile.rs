//! Whole-model torch.compile: Inductor fuses PyTorch's eager elementwise,
//! activation, normalization, reduction, softmax and copy kernels into their
//! neighbours, drops the layout conversions around convolutions (it picks
//! the layout), may replace an eager attention pattern with fused attention,
//! and launches fewer kernels. GEMM and convolution kernels stay library
//! calls. One finding predicts what that does to the whole step, from the
//! trace: the time in the kernels Inductor fuses, and the launches it
//! removes where the host sets the step's pace.

use std::collections::{HashMap, HashSet};

use kopt_model::{
    BottleneckClass, GainEstimate, KernelFamily, KernelLaunch, LibraryFamily, PredictedSpeedup,
    Recommendation,
};

use crate::ranking::Base;

/// The finding's id (the ranking names it: its prediction is a step speed-up).
pub const ID: &str = crate::ranking::COMPILE_ID;

/// The share of the fusible kernels' time (outside softmax runs) that
/// their fused code still takes. Inductor folds most pointwise work into a
/// neighbour's pass or a reduction's, so what is left is well under the
/// one-pass-per-run bound (the low end). The one fitted constant: least
/// squares in log speed-up over the H100 advice suite's captures with
/// torch.compile measured (fixtures/advice-h100), GPT-2 left out of the fit
/// (its gain is mostly the attention pattern replaced, which the estimate
/// does not assume and the high end carries): 0.16; each model left out in
/// turn, 0.12-0.22 (docs/benchmarks.md has the table). Fitted before lone
/// launches (a run of one) were left out of the saving; with them left out
/// the suite's compile predictions are 0.91-1.15x of what compile measured
/// on the seven models other than GPT-2, so the constant stays.
pub const FUSED_LEFT: f64 = 0.16;

/// Compile time seen on the H100 advice suite (fixtures/advice-h100,
/// `compile_s` of the models measured, torch 2.11): an example, not a rule.
const COMPILE_S_SEEN: &str = "13-23 s for the suite's models on an H100 (fixtures/advice-h100)";

/// Kernel families Inductor generates code for in place of ATen's eager
/// kernels: elementwise/activation, reductions, normalization (batch norm
/// in inference decomposes to pointwise), softmax, copies and layout
/// conversions (ATen's, and cuDNN's NCHW<->NHWC transforms, which Inductor's
/// layout choice removes). GEMMs, convolutions, attention libraries and the
/// framework's other kernels (RNN cells, sorting) stay.
pub fn is_fusible(f: &KernelFamily) -> bool {
    use LibraryFamily as F;
    if f.library.starts_with("PyTorch") {
        return matches!(
            f.family,
            F::Elementwise | F::Reduction | F::Normalization | F::Softmax | F::Copy
        );
    }
    f.library == "cuDNN" && matches!(f.family, F::Normalization | F::OtherLibrary)
}

/// What the trace shows Inductor could fuse.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Fusible {
    /// Kernel time of the fusible launches.
    pub ns: f64,
    /// Each run's longest launch summed: one pass per run (the low end).
    pub heaviest_ns: f64,
    pub launches: usize,
    /// Runs: consecutive fusible launches on one stream, between other kernels.
    pub runs: usize,
    /// Runs of two launches or more.
    pub chains: usize,
    /// Runs with a softmax (attention's scores between its two GEMMs, when
    /// eager): their time and their longest launches.
    pub softmax_runs_ns: f64,
    pub softmax_heaviest_ns: f64,
    /// Runs of a single pointwise launch (not a layout conversion) between
    /// two kernels Inductor leaves as library calls: nothing to fuse it
    /// with (Inductor does not fuse into cuBLAS's or cuDNN's epilogues in
    /// its default mode), so it stays one pass, as in eager mode.
    pub lone_ns: f64,
    /// All kernel launches.
    pub all_launches: usize,
}

impl Fusible {
    /// The launches fusion removes, as a share of all: each run becomes one.
    pub fn removed_launch_share(&self) -> f64 {
        if self.all_launches == 0 {
            return 0.0;
        }
        (self.launches.saturating_sub(self.runs)) as f64 / self.all_launches as f64
    }
}

/// What a kernel is to the run scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Member {
    /// Not fused: a GEMM, convolution, attention or unknown kernel.
    No,
    Fusible,
    /// A fusible softmax.
    Softmax,
    /// A layout conversion around a convolution: Inductor's layout choice
    /// removes it, alone or in a run.
    Conversion,
}

/// Runs of fusible launches (by `member`) per stream, in launch order.
pub fn fusible(launches: &[KernelLaunch], member: impl Fn(&str) -> Member) -> Fusible {
    let mut order: Vec<&KernelLaunch> = launches.iter().collect();
    order.sort_by_key(|l| l.id);
    let mut f = Fusible {
        all_launches: order.len(),
        ..Fusible::default()
    };
    // Open run per stream.
    #[derive(Default)]
    struct Run {
        launches: usize,
        ns: f64,
        longest: f64,
        softmax: bool,
        conversion: bool,
    }
    let mut open: HashMap<Option<u64>, Run> = HashMap::new();
    let close = |f: &mut Fusible, run: Run| {
        f.runs += 1;
        f.chains += usize::from(run.launches >= 2);
        f.heaviest_ns += run.longest;
        if run.softmax {
            f.softmax_runs_ns += run.ns;
            f.softmax_heaviest_ns += run.longest;
        } else if run.launches == 1 && !run.conversion {
            f.lone_ns += run.ns;
        }
    };
    for l in order {
        let d = l.metrics.duration_ns.unwrap_or(0.0);
        let m = member(&l.name);
        if m == Member::No {
            if let Some(run) = open.remove(&l.stream) {
                close(&mut f, run);
            }
            continue;
        }
        f.ns += d;
        f.launches += 1;
        let run = open.entry(l.stream).or_default();
        run.launches += 1;
        run.ns += d;
        run.longest = run.longest.max(d);
        run.softmax |= m == Member::Softmax;
        run.conversion |= m == Member::Conversion;
    }
    let mut rest: Vec<Run> = open.into_values().collect();
    rest.sort_by(|a, b| a.longest.total_cmp(&b.longest));
    for run in rest {
        close(&mut f, run);
    }
    f
}

/// The share of all kernel time the estimate saves: (1 - `FUSED_LEFT`) of
/// the fusible time outside softmax runs and lone launches, and of a
/// softmax run all but its longest launch; a lone launch stays.
fn estimated_kernel_share(f: &Fusible, total_ns: f64) -> f64 {
    let phi = (f.ns / total_ns).clamp(0.0, 1.0);
    let sm = (f.softmax_runs_ns / total_ns).clamp(0.0, phi);
    let sm_heavy = (f.softmax_heaviest_ns / total_ns).clamp(0.0, sm);
    let lone = (f.lone_ns / total_ns).clamp(0.0, phi - sm);
    (phi - sm - lone) * (1.0 - FUSED_LEFT) + (sm - sm_heavy)
}

/// Step speed-ups (estimate, low, high) on `base`. The GPU-busy part of the
/// step loses the fused kernel time: `(1 - FUSED_LEFT)` of the fusible time
/// in runs of two launches or more outside softmax runs, and of a softmax
/// run all but its longest launch (fused, a softmax still reads its scores
/// and writes its probabilities once; only an attention kernel avoids
/// that), a lone pointwise launch nothing (estimate); all but each run's
/// longest launch (low); all of it and, where eager attention was found,
/// `attention` on top: the share its pattern replaced saves beyond the
/// fusible kernels, the two GEMMs less the fused kernel (high: Inductor's
/// pattern matcher may or may not replace it). The idle part (the GPU
/// waiting on the host) shrinks with the launches removed.
pub fn step_speedups(f: &Fusible, total_ns: f64, base: &Base, attention: f64) -> (f64, f64, f64) {
    if total_ns <= 0.0 || base.wall_ns <= 0.0 {
        return (1.0, 1.0, 1.0);
    }
    let phi = (f.ns / total_ns).clamp(0.0, 1.0);
    let heavy = (f.heaviest_ns / total_ns).clamp(0.0, phi);
    let idle = (base.wall_ns - base.busy_ns).max(0.0) * f.removed_launch_share();
    let step = |kernel_share: f64| {
        let saved = (base.busy_ns * kernel_share + idle).min(0.95 * base.wall_ns);
        base.wall_ns / (base.wall_ns - saved)
    };
    let high_share = (phi + attention.clamp(0.0, 1.0)).min(1.0);
    let est = step(estimated_kernel_share(f, total_ns));
    let low = step(phi - heavy).min(est);
    let high = step(high_share).max(est);
    (est, low, high)
}

/// The finding, None where no run of two fusible launches exists (nothing
/// for Inductor to fuse). `attention`: the kernel-time share replacing the
/// eager attention pattern saves beyond the fusible kernels (its GEMMs less
/// the fused kernel), 0 without one; `graph`: graph capture's step
/// estimate where it fires; `ops`: the framework ops behind the members,
/// most launches first, where op ranges were recorded.
pub fn recommend(
    f: &Fusible,
    members: &[String],
    total_ns: f64,
    base: &Base,
    attention: f64,
    graph: Option<f64>,
    ops: &[&str],
) -> Option<Recommendation> {
    if f.chains == 0 || f.ns <= 0.0 || total_ns <= 0.0 {
        return None;
    }
    let (est, low, high) = step_speedups(f, total_ns, base, attention);
    if est <= 1.0 {
        return None;
    }
    let fmt = kopt_model::format_duration_ns;
    let removed = f.removed_launch_share();
    let model = format!(
        "step speed-up on {}: the GPU-busy part of the step ({:.0}%) loses {:.0}% of the fusible kernels' time in runs of two launches or more (what Inductor's fused code leaves: {FUSED_LEFT:.2} of it, fitted on the H100 advice suite) and all but the longest launch of a run with a softmax, while a pointwise launch alone between two library calls stays one pass ({:.1}% of kernel time: nothing to fuse it into); the idle part (the GPU waiting on the host) shrinks by the launches removed ({:.0}% of all, each run of fusible launches becoming one); low: each run keeps its longest launch (one pass); high: all fusible time goes{}",
        base.words,
        100.0 * base.busy_share(),
        100.0 * (1.0 - FUSED_LEFT),
        100.0 * f.lone_ns / total_ns,
        100.0 * removed,
        if attention > 0.0 {
            ", and the eager attention's two GEMMs less the fused kernel on top (Inductor's pattern matcher replaces the attention pattern on some models, not all)"
        } else {
            ""
        },
    );
    let stacking = match graph {
        Some(g) if g > est => format!(
            " Graph capture predicts more here ({g:.2}x): the step is launch bound; torch.compile(model, mode=\"reduce-overhead\") does both (graphs captured over the compiled code), so apply graph capture first and this on top: the idle time it removes is the same time, not counted twice."
        ),
        Some(g) => format!(
            " Graph capture also fires ({g:.2}x); both remove host time between launches, so their gains do not multiply: mode=\"reduce-overhead\" does both."
        ),
        None => String::new(),
    };
    // How it stacks with the SDPA finding: the estimate assumes the eager
    // attention pattern stays (Inductor replaced it on the suite's GPT-2,
    // compile 3.10x against SDPA's 1.27x, and not on its ViT, 1.31x against
    // 2.04x: fixtures/advice-h100).
    let attention_words = if attention > 0.0 {
        " Eager attention runs too (its own finding): this estimate assumes Inductor leaves that pattern as it is, which it does on some models and not others; calling scaled_dot_product_attention first and compiling after gets both."
    } else {
        ""
    };
    let saved_ns = base.wall_ns * (1.0 - 1.0 / est);
    let ops_named = if ops.is_empty() {
        String::new()
    } else {
        format!(" (ops: {})", ops.join(", "))
    };
    // Where compiling is not an option, the fused ops that replace the
    // chains seen (fusion.rs names them).
    let hints = match crate::fusion::fused_op_hints(ops) {
        h if h.is_empty() => h,
        h => format!(
            "{}.",
            h.replace("; or use fused ops:", " Without compiling, fused ops:")
        ),
    };
    Some(Recommendation {
        rank: 0,
        id: ID.into(),
        title: "Compile the whole model with torch.compile".into(),
        kernel: members.join(" | "),
        kernel_short: format!(
            "{} fusible kernel{}",
            members.len(),
            if members.len() == 1 { "" } else { "s" }
        ),
        class: BottleneckClass::Memory,
        evidence: format!(
            "PyTorch's eager elementwise, normalization, reduction, softmax and copy kernels and cuDNN's layout conversions{ops_named} take {} ({:.1}% of kernel time) in {} launches; {} runs of them sit between the GEMMs and convolutions, {} of two launches or more, each launch reading and writing whole tensors that the next one reads again.{attention_words}{stacking}",
            fmt(f.ns),
            100.0 * f.ns / total_ns,
            f.launches,
            f.runs,
            f.chains,
        ),
        action: format!(
            "Wrap the model once: `model = torch.compile(model)` (default mode). Inductor fuses these kernels into one pass per run or into their neighbours, chooses the convolutions' layout, replaces eager attention patterns with fused attention where it recognises them, and launches fewer kernels; GEMMs and convolutions stay library calls. This subsumes fusing the elementwise chains by hand and, where it matches, the attention pattern. Compilation is paid once per input shape (e.g. {COMPILE_S_SEEN}); keep shapes static or mark dynamic ones.{hints} Predicted: {est:.2}x ({low:.2}-{high:.2}x) for the step."
        ),
        source: "torch.compile / TorchInductor: operator fusion, layout selection, fewer launches".into(),
        gain: Some(GainEstimate {
            // Of the fusible kernels' own time, the kernel part alone (the
            // idle time removed is not theirs).
            kernel_pct: 100.0 * estimated_kernel_share(f, total_ns) * total_ns / f.ns,
            workload_pct: 100.0 * (1.0 - 1.0 / est),
            saved_ns,
            method: model.clone(),
        }),
        predicted_speedup: Some(PredictedSpeedup {
            estimate: est,
            low,
            high,
            model,
        }),
    })
}

/// The member kernels' names as a set, for the run scan.
pub fn member_set(members: &[String]) -> HashSet<&str> {
    members.iter().map(String::as_str).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kopt_model::{Dim3, Metrics};

    fn launch(id: u64, name: &str, ns: f64) -> KernelLaunch {
        KernelLaunch {
            id,
            name: name.into(),
            grid: Dim3 { x: 100, y: 1, z: 1 },
            block: Dim3 { x: 128, y: 1, z: 1 },
            stream: Some(7),
            metrics: Metrics {
                duration_ns: Some(ns),
                ..Default::default()
            },
            ncu_rules: Vec::new(),
        }
    }

    /// Synthetic: GEMM, three fusible launches (10, 20, 10 us), GEMM, one
    /// lone fusible launch (10 us); GEMMs 100 us each.
    fn step() -> Vec<KernelLaunch> {
        vec![
            launch(0, "gemm", 100_000.0),
            launch(1, "ew", 10_000.0),
            launch(2, "norm", 20_000.0),
            launch(3, "ew", 10_000.0),
            launch(4, "gemm", 100_000.0),
            launch(5, "ew", 10_000.0),
        ]
    }

    fn members() -> Vec<String> {
        vec!["ew".into(), "norm".into()]
    }

    fn member_of(set: &HashSet<&str>, n: &str) -> Member {
        if set.contains(n) {
            Member::Fusible
        } else {
            Member::No
        }
    }

    fn base(wall: f64, busy: f64) -> Base {
        Base {
            wall_ns: wall,
            busy_ns: busy,
            words: "test".into(),
        }
    }

    #[test]
    fn runs_are_counted_between_other_kernels() {
        let m = members();
        let set = member_set(&m);
        let f = fusible(&step(), |n| member_of(&set, n));
        assert_eq!((f.launches, f.runs, f.chains, f.all_launches), (4, 2, 1, 6));
        assert!((f.ns - 50_000.0).abs() < 1e-9);
        // Longest of each run: 20 us and 10 us.
        assert!((f.heaviest_ns - 30_000.0).abs() < 1e-9);
        // Four fusible launches become two: 2 of 6 removed.
        assert!((f.removed_launch_share() - 2.0 / 6.0).abs() < 1e-12);
    }

    #[test]
    fn a_gpu_bound_step_loses_the_fused_kernel_time() {
        let m = members();
        let set = member_set(&m);
        let f = fusible(&step(), |n| member_of(&set, n));
        let total = 250_000.0;
        // GPU busy the whole step: no idle time to remove.
        let (est, low, high) = step_speedups(&f, total, &base(total, total), 0.0);
        // The run of three fuses; the lone launch after the second GEMM
        // has nothing to fuse into and stays.
        assert!((f.lone_ns - 10_000.0).abs() < 1e-9);
        let want = total / (total - 40_000.0 * (1.0 - FUSED_LEFT));
        assert!((est - want).abs() < 1e-9, "{est} vs {want}");
        // Low: each run keeps its longest launch, 20 us saved.
        assert!((low - total / (total - 20_000.0)).abs() < 1e-9, "{low}");
        // High: all 50 us.
        assert!((high - total / (total - 50_000.0)).abs() < 1e-9, "{high}");
        let r = recommend(&f, &m, total, &base(total, total), 0.0, None, &[]).unwrap();
        assert_eq!(r.id, ID);
        assert!(r.action.contains("model = torch.compile(model)"));
        assert!(r.action.contains("fixtures/advice-h100"));
        // The kernel part's share of the fusible kernels' own time.
        let g = r.gain.as_ref().unwrap();
        assert!((g.kernel_pct - 100.0 * 0.8 * (1.0 - FUSED_LEFT)).abs() < 1e-9);
        let sp = r.predicted_speedup.unwrap();
        assert!(sp.low <= sp.estimate && sp.estimate <= sp.high);
    }

    #[test]
    fn a_softmax_run_keeps_one_pass_over_the_scores() {
        // The middle run has a softmax (attention's scores): fused, it still
        // reads them and writes the probabilities, its longest launch.
        let m = members();
        let set = member_set(&m);
        let f = fusible(&step(), |n| match n {
            "norm" => Member::Softmax,
            n => member_of(&set, n),
        });
        assert!((f.softmax_runs_ns - 40_000.0).abs() < 1e-9);
        assert!((f.softmax_heaviest_ns - 20_000.0).abs() < 1e-9);
        let total = 250_000.0;
        let (est, low, _) = step_speedups(&f, total, &base(total, total), 0.0);
        // Saved: 20 us of the softmax run, none of the lone 10 us launch.
        let saved = 20_000.0;
        assert!((est - total / (total - saved)).abs() < 1e-9, "{est}");
        assert!(low <= est);
    }

    #[test]
    fn a_launch_bound_step_loses_idle_time_with_the_launches() {
        let m = members();
        let set = member_set(&m);
        let f = fusible(&step(), |n| member_of(&set, n));
        let total = 250_000.0;
        // The step runs 1 ms of wall for 250 us of kernels: 750 us idle, a
        // third of the launches go, so a third of the idle time.
        let b = base(1_000_000.0, total);
        let (est, _, _) = step_speedups(&f, total, &b, 0.0);
        let saved = 40_000.0 * (1.0 - FUSED_LEFT) + 750_000.0 / 3.0;
        assert!((est - 1_000_000.0 / (1_000_000.0 - saved)).abs() < 1e-9);
        // Graph capture bigger: the finding says which and how they stack.
        let r = recommend(&f, &m, total, &b, 0.0, Some(4.0), &[]).unwrap();
        assert!(r
            .evidence
            .contains("Graph capture predicts more here (4.00x)"));
    }

    #[test]
    fn eager_attention_widens_the_high_end_only() {
        let m = members();
        let set = member_set(&m);
        let f = fusible(&step(), |n| member_of(&set, n));
        let total = 250_000.0;
        let b = base(total, total);
        let plain = step_speedups(&f, total, &b, 0.0);
        let attn = step_speedups(&f, total, &b, 0.3);
        assert_eq!(plain.0, attn.0);
        assert_eq!(plain.1, attn.1);
        assert!(attn.2 > plain.2);
        let m = members();
        let r = recommend(&f, &m, total, &b, 0.3, None, &[]).unwrap();
        assert!(r.evidence.contains("scaled_dot_product_attention first"));
    }

    #[test]
    fn a_lone_layout_conversion_still_goes() {
        // GEMM, a lone conversion, GEMM, a lone pointwise launch: Inductor's
        // layout choice removes the conversion; the pointwise pass stays.
        let l = vec![
            launch(0, "conv", 100_000.0),
            launch(1, "nchwToNhwc", 10_000.0),
            launch(2, "conv", 100_000.0),
            launch(3, "ew", 10_000.0),
            launch(4, "conv", 100_000.0),
        ];
        let f = fusible(&l, |n| match n {
            "nchwToNhwc" => Member::Conversion,
            "ew" => Member::Fusible,
            _ => Member::No,
        });
        assert!((f.lone_ns - 10_000.0).abs() < 1e-9);
        let total = 320_000.0;
        let (est, _, _) = step_speedups(&f, total, &base(total, total), 0.0);
        assert!((est - total / (total - 10_000.0 * (1.0 - FUSED_LEFT))).abs() < 1e-9);
    }

    #[test]
    fn no_run_of_two_fuses_nothing() {
        // Fusible launches only between GEMMs, one at a time.
        let l = vec![
            launch(0, "gemm", 100_000.0),
            launch(1, "ew", 10_000.0),
            launch(2, "gemm", 100_000.0),
            launch(3, "ew", 10_000.0),
        ];
        let m = members();
        let set = member_set(&m);
        let f = fusible(&l, |n| member_of(&set, n));
        assert_eq!(f.chains, 0);
        assert!(recommend(
            &f,
            &m,
            220_000.0,
            &base(220_000.0, 220_000.0),
            0.0,
            None,
            &[]
        )
        .is_none());
        // Nor without fusible kernels at all.
        let f = fusible(&l, |_| Member::No);
        assert!(recommend(
            &f,
            &[],
            220_000.0,
            &base(220_000.0, 220_000.0),
            0.0,
            None,
            &[]
        )
        .is_none());
    }

    #[test]
    fn families_inductor_fuses_and_those_it_leaves() {
        let fam = |family, library: &str| KernelFamily {
            family,
            library: library.into(),
            caller_can_edit: false,
        };
        assert!(is_fusible(&fam(
            LibraryFamily::Elementwise,
            "PyTorch (ATen)"
        )));
        assert!(is_fusible(&fam(LibraryFamily::Softmax, "PyTorch (ATen)")));
        assert!(is_fusible(&fam(LibraryFamily::Normalization, "cuDNN")));
        assert!(is_fusible(&fam(LibraryFamily::OtherLibrary, "cuDNN")));
        assert!(!is_fusible(&fam(LibraryFamily::Gemm, "cuBLAS")));
        assert!(!is_fusible(&fam(LibraryFamily::Convolution, "cuDNN")));
        assert!(!is_fusible(&fam(
            LibraryFamily::OtherFramework,
            "PyTorch (ATen)"
        )));
        assert!(!is_fusible(&fam(
            LibraryFamily::Generated,
            "Triton (torch.compile)"
        )));
    }
}
