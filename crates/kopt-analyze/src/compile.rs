//! Whole-model torch.compile: Inductor fuses PyTorch's eager elementwise,
//! activation, normalization, reduction, softmax and copy kernels into their
//! neighbours, drops the layout conversions around convolutions (it picks
//! the layout), may replace an eager attention pattern with fused attention,
//! pads GEMMs whose dimensions are not multiples of 8 where it finds them
//! compute bound (shape padding, `pad_mm`), and launches fewer kernels.
//! GEMM and convolution kernels stay library calls. One finding predicts
//! what that does to the whole step, from the trace: the time in the
//! kernels Inductor fuses, the misaligned GEMMs' time padding saves, and
//! the launches it removes where the host sets the step's pace.

use std::collections::{HashMap, HashSet};

use kopt_model::{
    BottleneckClass, GainEstimate, KernelFamily, KernelLaunch, LibraryFamily, Peaks,
    PredictedSpeedup, Recommendation,
};

use crate::ranking::Base;

/// The finding's id (the ranking names it: its prediction is a step speed-up).
pub const ID: &str = crate::ranking::COMPILE_ID;

/// The share of the fusible kernels' time (outside softmax runs) that
/// their fused code still takes. Inductor folds most pointwise work into a
/// neighbour's pass or a reduction's, so what is left is well under the
/// one-pass-per-run bound (the low end). The one fitted constant: least
/// squares in log speed-up over the H100 advice suite's captures with
/// torch.compile measured (fixtures/advice-h100), GPT-2 b4 left out of the
/// fit (most of its gain beyond fusion is its LM head's misaligned GEMM
/// padded, priced since on its own, `Padding`): 0.16; each model left out in
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

/// Misaligned GEMMs Inductor's shape padding (`pad_mm`, on by default:
/// `config.shape_padding`) pads: kernel time saved over the trace.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Padding {
    /// Kernel time saved (estimate = high).
    pub saved_ns: f64,
    /// The pessimistic end.
    pub saved_low_ns: f64,
    /// GEMMs (op rows or kernels) padded.
    pub gemms: usize,
    /// How it was priced, for the finding's model.
    pub words: String,
}

/// The rate Inductor's `is_mm_compute_bound` divides by DRAM bandwidth for
/// a GEMM kernel: the FMA peak for fp32 on the FMA pipes, half the tensor
/// peak for TF32, the tensor peak otherwise (16-bit operands, or a name
/// that does not say: the stricter test), by the kernel's name.
fn gemm_peak(kernel: &str, peaks: &Peaks) -> Option<f64> {
    let n = kernel.to_ascii_lowercase();
    let tensor = peaks.tensor_bf16_flops.filter(|p| *p > 0.0);
    let fma = ["sgemm", "ffma", "f32f32_f32f32", "simt_s"];
    if !n.contains("f16") && fma.iter().any(|f| n.contains(f)) {
        peaks.fp32_flops.filter(|p| *p > 0.0)
    } else if n.contains("tf32") || n.contains("tensorop_s") {
        tensor.map(|p| p / 2.0)
    } else {
        tensor
    }
}

/// Whether Inductor's shape padding takes a misaligned GEMM: it pads only
/// a GEMM it finds compute bound, arithmetic intensity
/// `M*N*K / (M*K + N*K + M*N)` above half the machine balance (peak FLOP/s
/// over DRAM bytes/s; torch/_inductor/fx_passes/pad_mm.py,
/// `is_mm_compute_bound`), then keeps the padding where it benchmarks
/// faster (what the padding finding's price says). Unknown peaks: padded,
/// as Inductor does when it cannot read them.
pub fn inductor_pads(g: &crate::ops::MisalignedGemm, kernel: &str, peaks: &Peaks) -> bool {
    let (Some(flops), Some(bw)) = (
        gemm_peak(kernel, peaks),
        peaks.dram_bytes_per_s.filter(|b| *b > 0.0),
    ) else {
        return true;
    };
    g.intensity() > 0.5 * flops / bw
}

/// From op shapes: the padding finding's price (the padded GEMM's FLOPs at
/// the workload's aligned rate) for each misaligned GEMM Inductor pads.
pub fn padding_from_shapes(
    gemms: &[crate::ops::MisalignedGemm],
    kernel: impl Fn(usize) -> String,
    peaks: &Peaks,
) -> Padding {
    let mut p = Padding::default();
    let mut rate = 0.0f64;
    for g in gemms
        .iter()
        .filter(|g| inductor_pads(g, &kernel(g.row), peaks))
    {
        p.saved_ns += g.saved_ns;
        p.saved_low_ns += g.saved_low_ns.min(g.saved_ns);
        p.gemms += 1;
        rate = rate.max(g.rate);
    }
    if p.gemms > 0 {
        p.words = format!(
            "the misaligned GEMMs Inductor's shape padding takes (compute bound by its test) run padded at the workload's aligned rate ({:.0} TFLOP/s; the padding finding's price; low: half that rate)",
            rate / 1e12
        );
    }
    p
}

/// A tensor-core GEMM kernel's operand alignment from its name: cuBLAS's
/// and CUTLASS's `..._alignN` (N elements), with the element size (2 bytes
/// for bf16/fp16, 4 for TF32). None for other kernels (FMA kernels'
/// `align1` says nothing about the shapes: alignment does not limit them).
pub fn operand_alignment(kernel: &str) -> Option<(u32, u32)> {
    let n = kernel.to_ascii_lowercase();
    if !(n.contains("tensorop") || n.contains("wmma")) {
        return None;
    }
    let at = n.rfind("_align")? + "_align".len();
    let digits: String = n[at..].chars().take_while(char::is_ascii_digit).collect();
    let align: u32 = digits.parse().ok().filter(|a| *a > 0)?;
    let elem = if n.contains("f16") { 2 } else { 4 };
    Some((align, elem))
}

/// A convolution kernel by its name (cuDNN's, CUTLASS's for cuDNN, ATen's).
fn is_convolution_kernel(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "fprop",
        "dgrad",
        "wgrad",
        "convolve",
        "cudnn",
        "conv2d",
        "conv_depthwise",
    ]
    .iter()
    .any(|c| n.contains(c))
        || crate::library::classify(name).map(|f| f.family) == Some(LibraryFamily::Convolution)
}

/// The access width a tensor-core GEMM kernel's loads reach at full
/// alignment: 16 bytes (one vector load, one `cp.async` or TMA box row).
const FULL_ACCESS_BYTES: u32 = 16;

/// Without op shapes: tensor-core GEMM kernels whose name says their
/// operands are aligned to fewer than 16 bytes (`_align1` for bf16 is 2
/// bytes: the shapes have a dimension that is not a multiple of 8), each
/// launch filling the GPU at least once (a smaller launch is latency bound,
/// and Inductor pads only GEMMs it finds compute bound), not one of the
/// eager attention's GEMMs in `exclude` (one of their dimensions is the head
/// size, which keeps them under Inductor's compute-bound test). Such a
/// kernel loads its tiles `align x element` bytes at a time instead of 16,
/// so padded it takes `align x element / 16` of its time (estimate and
/// high), twice that (low). On the H100 GPT-2 b4 capture with op shapes the
/// LM head's `align1` bf16 kernel (3.34 ms a call) gives 0.42 ms this way
/// against 0.45 ms from its FLOPs at the workload's aligned rate.
pub fn padding_from_names(
    launches: &[KernelLaunch],
    sm_count: Option<u32>,
    exclude: &HashSet<&str>,
) -> Padding {
    let mut p = Padding::default();
    // cuDNN runs some convolutions (1x1, NCHW) as CUTLASS GEMM kernels,
    // misaligned where H x W is not a multiple of 8, and Inductor's shape
    // padding never sees a convolution; without op ranges such a kernel
    // cannot be told from a matmul's, so none counts where convolutions run.
    // Names are judged once each: a million launches of a few kernels.
    let names: HashSet<&str> = launches.iter().map(|l| l.name.as_str()).collect();
    if names.iter().any(|n| is_convolution_kernel(n)) {
        return p;
    }
    let misaligned: HashMap<&str, u32> = names
        .into_iter()
        .filter(|n| !exclude.contains(n))
        .filter_map(|n| {
            let (align, elem) = operand_alignment(n)?;
            let width = align.saturating_mul(elem);
            (width < FULL_ACCESS_BYTES
                && crate::library::classify(n).map(|f| f.family) == Some(LibraryFamily::Gemm))
            .then_some((n, width))
        })
        .collect();
    let mut kernels: HashSet<&str> = HashSet::new();
    let mut widths: Vec<u32> = Vec::new();
    let fills = sm_count.unwrap_or(1).max(1) as u64;
    for l in launches {
        let Some(&width) = misaligned.get(l.name.as_str()) else {
            continue;
        };
        let ctas = l.grid.x as u64 * l.grid.y as u64 * l.grid.z as u64;
        if ctas < fills {
            continue;
        }
        let d = l.metrics.duration_ns.unwrap_or(0.0).max(0.0);
        let left = width as f64 / FULL_ACCESS_BYTES as f64;
        p.saved_ns += d * (1.0 - left);
        p.saved_low_ns += d * (1.0 - 2.0 * left).max(0.0);
        if kernels.insert(l.name.as_str()) {
            widths.push(width);
        }
    }
    p.gemms = kernels.len();
    if p.gemms > 0 {
        widths.sort_unstable();
        widths.dedup();
        let w: Vec<String> = widths.iter().map(|w| format!("{w}")).collect();
        p.words = format!(
            "no op shapes: the tensor-core GEMM kernels whose names say their operands are aligned to {} bytes (a dimension not a multiple of 8), launches that fill the GPU, run padded (Inductor's shape padding) with 16-byte loads: that share of their time (low: twice it)",
            w.join(", ")
        );
    }
    p
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
    /// GPU idle a step that fewer launches cannot shorten: the host
    /// preparing the next input before copying it (the step's idle
    /// before its input copies), ns. Set by the caller; 0 when unknown.
    pub idle_not_launches_ns: f64,
    /// Host syncs a step inside the step (`.item()`, `.cpu()`, a print of
    /// a tensor): Dynamo breaks the graph at each, and the host keeps a
    /// guard check and a graph call per piece, so no host time between
    /// launches is counted as removed (compile measured 0.86-0.98x on the
    /// three syncing steps of the training suite, fixtures/training-h200).
    /// Set by the caller; 0 when unknown.
    pub graph_breaks_per_step: f64,
    /// The kernel kinds in the trace, so the finding names only those.
    pub kinds: Kinds,
}

/// The kernel kinds a trace holds, as the compile finding names them: the
/// members' families and the library calls around them (#41: no "GEMMs and
/// convolutions" in a trace without either).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Kinds {
    /// PyTorch's fusible families among the members, in a fixed order.
    pytorch: Vec<&'static str>,
    cudnn_conversions: bool,
    cudnn_normalization: bool,
    cudnn_other: bool,
    gemms: bool,
    convolutions: bool,
}

impl Kinds {
    /// Counts kernel `name` of `family`; `member`: one the finding fuses.
    pub fn add(&mut self, name: &str, family: &KernelFamily, member: bool) {
        use LibraryFamily as F;
        if !member {
            self.gemms |= family.family == F::Gemm;
            self.convolutions |= family.family == F::Convolution;
            return;
        }
        if family.library.starts_with("PyTorch") {
            let word = match family.family {
                F::Elementwise => "elementwise",
                F::Normalization => "normalization",
                F::Reduction => "reduction",
                F::Softmax => "softmax",
                F::Copy => "copy",
                _ => "other",
            };
            if !self.pytorch.contains(&word) {
                self.pytorch.push(word);
                let order = [
                    "elementwise",
                    "normalization",
                    "reduction",
                    "softmax",
                    "copy",
                ];
                self.pytorch
                    .sort_by_key(|w| order.iter().position(|o| o == w).unwrap_or(order.len()));
            }
        } else if crate::layout::is_layout_conversion(name) {
            self.cudnn_conversions = true;
        } else if family.family == F::Normalization {
            self.cudnn_normalization = true;
        } else {
            self.cudnn_other = true;
        }
    }

    /// The members, named by kind: "PyTorch's eager elementwise and softmax
    /// kernels and cuDNN's layout conversions".
    fn members(&self) -> String {
        let mut parts = Vec::new();
        if !self.pytorch.is_empty() {
            parts.push(format!(
                "PyTorch's eager {} kernels",
                join_and(&self.pytorch)
            ));
        }
        for (present, words) in [
            (self.cudnn_conversions, "cuDNN's layout conversions"),
            (self.cudnn_normalization, "cuDNN's normalization kernels"),
            (self.cudnn_other, "other cuDNN kernels"),
        ] {
            if present {
                parts.push(words.to_string());
            }
        }
        if parts.is_empty() {
            return "The fusible kernels".into();
        }
        join_and(&parts)
    }

    /// The library calls the members' runs sit between.
    fn library_calls(&self) -> Option<&'static str> {
        match (self.gemms, self.convolutions) {
            (true, true) => Some("GEMMs and convolutions"),
            (true, false) => Some("GEMMs"),
            (false, true) => Some("convolutions"),
            (false, false) => None,
        }
    }
}

/// "a", "a and b", "a, b and c".
fn join_and<S: AsRef<str>>(words: &[S]) -> String {
    let words: Vec<&str> = words.iter().map(AsRef::as_ref).collect();
    match words.split_last() {
        None => String::new(),
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
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
pub fn fusible<'a>(
    launches: impl IntoIterator<Item = &'a KernelLaunch>,
    member: impl Fn(&str) -> Member,
) -> Fusible {
    let mut order: Vec<&KernelLaunch> = launches.into_iter().collect();
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
    let mut open: rustc_hash::FxHashMap<Option<u64>, Run> = Default::default();
    // Judged once per name: a million launches of a few kernels.
    let mut judged: rustc_hash::FxHashMap<&str, Member> = Default::default();
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
        let m = *judged
            .entry(l.name.as_str())
            .or_insert_with(|| member(&l.name));
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
/// longest launch (low); all of it (high). Each end assumes an eager
/// attention pattern stays as it is: on the suite's two models with one
/// (HF ViT and GPT-2, fixtures/advice-h100) Inductor did not replace it
/// (compile 1.31x against SDPA's 2.04x; compile 2.61x, with SDPA 3.60x),
/// and the SDPA finding carries that gain. On top of each, the GEMM time
/// Inductor's shape padding saves (`pad`: estimate and high its estimate,
/// low its low end). The idle part (the GPU waiting on the host) shrinks
/// with the launches removed, less the idle launches do not cause, and
/// not at all in a step that syncs inside (graph breaks). The kernel time
/// saved stops at the host's own time where `base` knows it.
pub fn step_speedups(f: &Fusible, total_ns: f64, base: &Base, pad: &Padding) -> (f64, f64, f64) {
    if total_ns <= 0.0 || base.wall_ns <= 0.0 {
        return (1.0, 1.0, 1.0);
    }
    let phi = (f.ns / total_ns).clamp(0.0, 1.0);
    let heavy = (f.heaviest_ns / total_ns).clamp(0.0, phi);
    // Padding saves GEMM time, outside the fusible kernels'.
    let padded = (pad.saved_ns / total_ns).clamp(0.0, 1.0 - phi);
    let padded_low = (pad.saved_low_ns / total_ns).clamp(0.0, padded);
    let idle = if f.graph_breaks_per_step > 0.0 {
        0.0
    } else {
        (base.wall_ns - base.busy_ns - f.idle_not_launches_ns).max(0.0) * f.removed_launch_share()
    };
    // The kernel time saved stops at the host's own time (estimate and
    // low end, as every kernel-time finding's: `Base::floor_room`); the
    // high end, "all of it", does not.
    let step = |kernel_share: f64, floored: bool| {
        let mut kernel = base.busy_ns * kernel_share.min(1.0);
        if floored {
            kernel = kernel.min(base.floor_room());
        }
        let saved = (kernel + idle).min(0.95 * base.wall_ns);
        base.wall_ns / (base.wall_ns - saved)
    };
    let high_share = phi + padded;
    let est = step(estimated_kernel_share(f, total_ns) + padded, true);
    let low = step(phi - heavy + padded_low, true).min(est);
    let high = step(high_share, false).max(est);
    (est, low, high)
}

/// What Inductor does here, naming only the kinds in the trace.
fn what_inductor_does(kinds: &Kinds, attention: bool) -> String {
    let mut does = vec!["fuses these kernels into one pass per run or into their neighbours"];
    if kinds.convolutions {
        does.push("chooses the convolutions' layout");
    }
    if attention {
        does.push(
            "replaces eager attention patterns with fused attention where it recognises them",
        );
    }
    if kinds.gemms {
        does.push("pads GEMMs whose dimensions are not multiples of 8 where it finds them compute bound (shape padding)");
    }
    does.push("launches fewer kernels");
    let stay = kinds
        .library_calls()
        .map_or(String::new(), |c| format!("; {c} stay library calls"));
    let subsumes = if attention {
        "fusing the elementwise chains by hand and, where it matches, the attention pattern"
    } else {
        "fusing the elementwise chains by hand"
    };
    format!(
        "Inductor {}{stay}. This subsumes {subsumes}.",
        join_and(&does)
    )
}

/// The finding, None where no run of two fusible launches exists (nothing
/// for Inductor to fuse). `attention`: eager attention was found (its own
/// finding, SDPA); `graph`: graph capture's step
/// estimate where it fires; `ops`: the framework ops behind the members,
/// most launches first, where op ranges were recorded; `pad`: the GEMM time
/// Inductor's shape padding saves.
#[allow(clippy::too_many_arguments)]
pub fn recommend(
    f: &Fusible,
    members: &[String],
    total_ns: f64,
    base: &Base,
    attention: bool,
    graph: Option<f64>,
    ops: &[&str],
    pad: &Padding,
) -> Option<Recommendation> {
    if f.chains == 0 || f.ns <= 0.0 || total_ns <= 0.0 {
        return None;
    }
    let (est, low, high) = step_speedups(f, total_ns, base, pad);
    if est <= 1.0 {
        return None;
    }
    let fmt = kopt_model::format_duration_ns;
    let removed = f.removed_launch_share();
    // Misaligned GEMMs to pad are GEMMs in the trace.
    let mut kinds = f.kinds.clone();
    kinds.gemms |= pad.gemms > 0;
    let model = format!(
        "step speed-up on {}: the GPU-busy part of the step ({:.0}%) loses {:.0}% of the fusible kernels' time in runs of two launches or more (what Inductor's fused code leaves: {FUSED_LEFT:.2} of it, fitted on the H100 advice suite) and all but the longest launch of a run with a softmax, while a pointwise launch alone between two library calls stays one pass ({:.1}% of kernel time: nothing to fuse it into); the idle part (the GPU waiting on the host) shrinks by the launches removed ({:.0}% of all, each run of fusible launches becoming one){}{}; low: each run keeps its longest launch (one pass); high: all fusible time goes{}",
        base.words,
        100.0 * base.busy_share(),
        100.0 * (1.0 - FUSED_LEFT),
        100.0 * f.lone_ns / total_ns,
        100.0 * removed,
        if f.graph_breaks_per_step > 0.0 {
            format!(
                "; but the step syncs with the host {:.1} times a step inside: Dynamo breaks the graph at each sync and the host keeps a guard check and a graph call per piece, so no idle time is counted as removed",
                f.graph_breaks_per_step
            )
        } else {
            String::new()
        },
        base.host_floor_words_ns(
            base.busy_ns * (estimated_kernel_share(f, total_ns) + pad.saved_ns / total_ns).min(1.0)
        ),
        if attention {
            "; each end leaves the eager attention pattern as it is (on the suite's HF ViT and GPT-2 Inductor's pattern matcher did not replace it; the SDPA finding prices that)"
        } else {
            ""
        },
    );
    let model = if pad.gemms > 0 && pad.saved_ns > 0.0 {
        format!(
            "{model}; on top of each, misaligned GEMMs padded ({:.1}% of kernel time saved, low {:.1}%): {}",
            100.0 * pad.saved_ns / total_ns,
            100.0 * pad.saved_low_ns.min(pad.saved_ns) / total_ns,
            pad.words
        )
    } else {
        model
    };
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
    // attention pattern stays. On the suite's ViT compile measured 1.31x
    // against SDPA's 2.04x, and on its GPT-2 b4 compile and SDPA together
    // 3.60x against compile's 2.61x (the optimize harness, one H100): the
    // pattern was not replaced there either (GPT-2's compile gain is the
    // fusion and its LM head padded; fixtures/advice-h100).
    let attention_words = if attention {
        " Eager attention runs too (its own finding): this estimate assumes Inductor leaves that pattern as it is (its pattern matcher replaces some written-out attentions, and did not on the H100 suite's HF ViT and GPT-2); calling scaled_dot_product_attention first and compiling after gets both."
    } else {
        ""
    };
    let padded_words = if pad.gemms > 0 && pad.saved_ns > 0.0 {
        format!(
            " {} misaligned GEMM{} (a dimension not a multiple of 8) run{} on the library's slow unaligned kernels: Inductor's shape padding pads {}, saving {:.1}% of kernel time.",
            pad.gemms,
            if pad.gemms == 1 { "" } else { "s" },
            if pad.gemms == 1 { "s" } else { "" },
            if pad.gemms == 1 { "it" } else { "them" },
            100.0 * pad.saved_ns / total_ns
        )
    } else {
        String::new()
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
            "{}{ops_named} take {} ({:.1}% of kernel time) in {} launches; {} runs of them sit between {}, {} of two launches or more, each launch reading and writing whole tensors that the next one reads again.{padded_words}{attention_words}{stacking}",
            kinds.members(),
            fmt(f.ns),
            100.0 * f.ns / total_ns,
            f.launches,
            f.runs,
            kinds
                .library_calls()
                .map_or("other kernels".to_string(), |c| format!("the {c}")),
            f.chains,
        ),
        action: format!(
            "Wrap the model once: `model = torch.compile(model)` (default mode). {} Compilation is paid once per input shape (e.g. {COMPILE_S_SEEN}); keep shapes static or mark dynamic ones.{hints} Predicted: {est:.2}x ({low:.2}-{high:.2}x) for the step.",
            what_inductor_does(&kinds, attention)
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
            serialized: false,
            host_floor_ns: 0.0,
            input_wait_ns: 0.0,
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
        let (est, low, high) = step_speedups(&f, total, &base(total, total), &Padding::default());
        // The run of three fuses; the lone launch after the second GEMM
        // has nothing to fuse into and stays.
        assert!((f.lone_ns - 10_000.0).abs() < 1e-9);
        let want = total / (total - 40_000.0 * (1.0 - FUSED_LEFT));
        assert!((est - want).abs() < 1e-9, "{est} vs {want}");
        // Low: each run keeps its longest launch, 20 us saved.
        assert!((low - total / (total - 20_000.0)).abs() < 1e-9, "{low}");
        // High: all 50 us.
        assert!((high - total / (total - 50_000.0)).abs() < 1e-9, "{high}");
        let r = recommend(
            &f,
            &m,
            total,
            &base(total, total),
            false,
            None,
            &[],
            &Padding::default(),
        )
        .unwrap();
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
    fn the_hosts_own_time_and_graph_breaks_bound_the_step() {
        let m = members();
        let set = member_set(&m);
        let mut f = fusible(&step(), |n| member_of(&set, n));
        let total = 250_000.0;
        // 1 ms of wall, 250 us busy; the host needs 990 us of it.
        let floored = Base {
            host_floor_ns: 990_000.0,
            ..base(1_000_000.0, total)
        };
        let free = step_speedups(&f, total, &base(1_000_000.0, total), &Padding::default());
        let (est, low, high) = step_speedups(&f, total, &floored, &Padding::default());
        // The kernel time saved stops at 10 us; the idle part still goes.
        let idle = 750_000.0 / 3.0;
        assert!((est - 1e6 / (1e6 - 10_000.0 - idle)).abs() < 1e-9, "{est}");
        assert!(low <= est && high == free.2, "{low} {high} {free:?}");
        // A step that syncs inside: no idle time counted as removed.
        f.graph_breaks_per_step = 2.0;
        let (est, _, _) = step_speedups(&f, total, &floored, &Padding::default());
        assert!((est - 1e6 / (1e6 - 10_000.0)).abs() < 1e-9, "{est}");
        let r = recommend(
            &f,
            &m,
            total,
            &floored,
            false,
            None,
            &[],
            &Padding::default(),
        )
        .unwrap();
        let model = r.predicted_speedup.unwrap().model;
        assert!(model.contains("syncs with the host 2.0 times"), "{model}");
        assert!(model.contains("cannot run faster than its host"), "{model}");
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
        let (est, low, _) = step_speedups(&f, total, &base(total, total), &Padding::default());
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
        let (est, _, _) = step_speedups(&f, total, &b, &Padding::default());
        let saved = 40_000.0 * (1.0 - FUSED_LEFT) + 750_000.0 / 3.0;
        assert!((est - 1_000_000.0 / (1_000_000.0 - saved)).abs() < 1e-9);
        // Graph capture bigger: the finding says which and how they stack.
        let r = recommend(
            &f,
            &m,
            total,
            &b,
            false,
            Some(4.0),
            &[],
            &Padding::default(),
        )
        .unwrap();
        assert!(r
            .evidence
            .contains("Graph capture predicts more here (4.00x)"));
    }

    #[test]
    fn eager_attention_stays_in_every_end_and_is_named() {
        // Inductor did not replace the suite's eager attention patterns: the
        // range is the same with or without one; the finding says so.
        let m = members();
        let set = member_set(&m);
        let f = fusible(&step(), |n| member_of(&set, n));
        let total = 250_000.0;
        let b = base(total, total);
        let none = Padding::default();
        let plain = recommend(&f, &m, total, &b, false, None, &[], &none).unwrap();
        let attn = recommend(&f, &m, total, &b, true, None, &[], &none).unwrap();
        assert_eq!(
            plain
                .predicted_speedup
                .as_ref()
                .map(|p| (p.estimate, p.low, p.high)),
            attn.predicted_speedup
                .as_ref()
                .map(|p| (p.estimate, p.low, p.high))
        );
        assert!(attn.evidence.contains("scaled_dot_product_attention first"));
        assert!(!plain
            .evidence
            .contains("scaled_dot_product_attention first"));
        assert!(attn
            .predicted_speedup
            .unwrap()
            .model
            .contains("did not replace it"));
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
        let (est, _, _) = step_speedups(&f, total, &base(total, total), &Padding::default());
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
            false,
            None,
            &[],
            &Padding::default()
        )
        .is_none());
        // Nor without fusible kernels at all.
        let f = fusible(&l, |_| Member::No);
        assert!(recommend(
            &f,
            &[],
            220_000.0,
            &base(220_000.0, 220_000.0),
            false,
            None,
            &[],
            &Padding::default()
        )
        .is_none());
    }

    const HEAD: &str = "void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_tn_align1>(cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_tn_align1::Params)";
    const ALIGNED: &str = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT";

    fn with_grid(mut l: KernelLaunch, x: u32, y: u32, z: u32) -> KernelLaunch {
        l.grid = Dim3 { x, y, z };
        l
    }

    #[test]
    fn kernel_names_give_the_operand_alignment() {
        assert_eq!(operand_alignment(HEAD), Some((1, 2)));
        assert_eq!(
            operand_alignment(
                "cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x1_tn_align2"
            ),
            Some((2, 2))
        );
        // TF32 tensor-op kernels: 4-byte elements, align4 is 16 bytes.
        assert_eq!(
            operand_alignment("cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4"),
            Some((4, 4))
        );
        // FMA kernels' align1 says nothing; xmma's aligna4 is not `_alignN`.
        assert_eq!(
            operand_alignment("cutlass_80_simt_sgemm_128x32_8x5_nn_align1"),
            None
        );
        assert_eq!(
            operand_alignment("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel"),
            None
        );
        assert_eq!(operand_alignment(ALIGNED), None);
        assert_eq!(operand_alignment("tensorop_bf16_align"), None);
        assert_eq!(operand_alignment("tensorop_bf16_align0"), None);
    }

    #[test]
    fn a_misaligned_gemm_kernel_is_priced_by_its_access_width() {
        // Two launches of the LM head's align1 bf16 kernel (3.2 ms each,
        // 12800 CTAs) and an aligned GEMM.
        let l = vec![
            with_grid(launch(0, HEAD, 3_200_000.0), 256, 50, 1),
            with_grid(launch(1, ALIGNED, 100_000.0), 2, 66, 1),
            with_grid(launch(2, HEAD, 3_200_000.0), 256, 50, 1),
        ];
        let p = padding_from_names(&l, Some(132), &HashSet::new());
        assert_eq!(p.gemms, 1);
        // 2-byte loads instead of 16-byte ones: 1/8 of the time stays.
        assert!(
            (p.saved_ns - 6_400_000.0 * 7.0 / 8.0).abs() < 1e-6,
            "{}",
            p.saved_ns
        );
        assert!((p.saved_low_ns - 6_400_000.0 * 6.0 / 8.0).abs() < 1e-6);
        assert!(p.words.contains("2 bytes"), "{}", p.words);
        // The eager attention's GEMMs are left out (head-size dimension:
        // under Inductor's compute-bound test).
        let attention: HashSet<&str> = [HEAD].into_iter().collect();
        assert_eq!(
            padding_from_names(&l, Some(132), &attention),
            Padding::default()
        );
        // A launch that does not fill the GPU is latency bound: left out.
        let small = vec![with_grid(launch(0, HEAD, 50_000.0), 2, 1, 1)];
        assert_eq!(
            padding_from_names(&small, Some(132), &HashSet::new()).gemms,
            0
        );
        // Convolutions in the trace: cuDNN's GEMM kernels for 1x1
        // convolutions look the same, so nothing counts.
        let mut conv = l.clone();
        conv.push(launch(3, "void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_64x64_32x10_nhwc_align8>(int)", 10_000.0));
        assert_eq!(
            padding_from_names(&conv, Some(132), &HashSet::new()).gemms,
            0
        );
        // No duration, no grid: nothing saved, no panic.
        let odd = vec![with_grid(
            KernelLaunch {
                metrics: Metrics::default(),
                ..launch(0, HEAD, 0.0)
            },
            0,
            0,
            0,
        )];
        assert_eq!(
            padding_from_names(&odd, None, &HashSet::new()).saved_ns,
            0.0
        );
    }

    fn misaligned(m: u64, n: u64, k: u64) -> crate::ops::MisalignedGemm {
        crate::ops::MisalignedGemm {
            row: 0,
            dims: (1, m, n, k),
            padded: (1, m, n.div_ceil(64) * 64, k),
            per_call_ns: 1000.0,
            padded_ns: 200.0,
            rate: 700e12,
            saved_ns: 8000.0,
            saved_low_ns: 6000.0,
        }
    }

    fn h100() -> Peaks {
        Peaks {
            dram_bytes_per_s: Some(3.35e12),
            fp32_flops: Some(66.9e12),
            tensor_bf16_flops: Some(989e12),
        }
    }

    #[test]
    fn inductor_pads_only_compute_bound_gemms() {
        // GPT-2's LM head, 4096 x 768 x 50257 in bf16: intensity 638, over
        // half the H100's bf16 balance (148).
        let head = misaligned(4096, 50257, 768);
        assert!(
            (head.intensity() - 638.0).abs() < 1.0,
            "{}",
            head.intensity()
        );
        assert!(inductor_pads(&head, HEAD, &h100()));
        // ViT's attention scores, 197 x 197 x 64: intensity 39, left as is.
        let scores = misaligned(197, 197, 64);
        assert!(!inductor_pads(&scores, HEAD, &h100()));
        // In fp32 on the FMA pipes the balance is 10: padded.
        assert!(inductor_pads(
            &scores,
            "cutlass_80_simt_sgemm_64x64_8x5_nn_align1",
            &h100()
        ));
        // Unknown peaks: padded, as Inductor does when it cannot read them.
        assert!(inductor_pads(&scores, HEAD, &Peaks::default()));
        let p = padding_from_shapes(&[head.clone(), scores], |_| HEAD.into(), &h100());
        assert_eq!(p.gemms, 1);
        assert_eq!((p.saved_ns, p.saved_low_ns), (8000.0, 6000.0));
        assert!(p.words.contains("700 TFLOP/s"), "{}", p.words);
    }

    #[test]
    fn padding_saves_gemm_time_on_top_of_fusion() {
        let m = members();
        let set = member_set(&m);
        let f = fusible(&step(), |n| member_of(&set, n));
        let total = 250_000.0;
        let b = base(total, total);
        let none = step_speedups(&f, total, &b, &Padding::default());
        let pad = Padding {
            saved_ns: 50_000.0,
            saved_low_ns: 25_000.0,
            gemms: 1,
            words: "test padding".into(),
        };
        let (est, low, high) = step_speedups(&f, total, &b, &pad);
        let fused = 40_000.0 * (1.0 - FUSED_LEFT);
        assert!(
            (est - total / (total - fused - 50_000.0)).abs() < 1e-9,
            "{est}"
        );
        assert!(
            (low - total / (total - 20_000.0 - 25_000.0)).abs() < 1e-9,
            "{low}"
        );
        assert!((high - total / (total - 100_000.0)).abs() < 1e-9, "{high}");
        assert!(est > none.0 && low > none.1 && high > none.2);
        let r = recommend(&f, &m, total, &b, false, None, &[], &pad).unwrap();
        let model = r.predicted_speedup.unwrap().model;
        assert!(
            model.contains(
                "misaligned GEMMs padded (20.0% of kernel time saved, low 10.0%): test padding"
            ),
            "{model}"
        );
        assert!(r.action.contains("shape padding"));
        assert!(
            r.evidence
                .contains("1 misaligned GEMM (a dimension not a multiple of 8) runs"),
            "{}",
            r.evidence
        );
        assert!(r.evidence.contains("saving 20.0% of kernel time"));
        let plain = recommend(&f, &m, total, &b, false, None, &[], &Padding::default()).unwrap();
        assert!(!plain.evidence.contains("misaligned"));
        // More saved than the GEMMs hold: capped, never past the step.
        let huge = Padding {
            saved_ns: 1e12,
            saved_low_ns: 1e12,
            ..pad
        };
        let (est, low, high) = step_speedups(&f, total, &b, &huge);
        assert!(est.is_finite() && low <= est && est <= high && high <= 20.0 + 1e-9);
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
