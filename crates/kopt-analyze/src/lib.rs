//! kopt's analysis: per-launch rules, per-kernel roll-up, the workload's
//! primary bottleneck and ranked recommendations. Prints nothing.

pub mod attention;
pub mod batchnorm;
pub mod catalogue;
pub mod compile;
pub mod copies;
pub mod counter_plan;
pub mod fusion;
mod gain;
pub mod host_syncs;
pub mod layout;
pub mod library;
pub mod ncu_rules;
pub mod ops;
pub mod optimizer;
pub mod precision;
pub mod ranking;
pub mod ranks;
pub mod rollup;
pub mod roofline;
pub mod rules;
pub mod steady_strip;
pub mod step_phases;
pub mod timeline;
pub mod warmup;

use kopt_model::{Diagnosis, PeakSource, PrimaryBottleneck, Profile, SCHEMA};

/// What `analyze` may be told beyond the profile.
#[derive(Debug, Clone, Default)]
pub struct AnalyzeOptions {
    /// Keep only the N kernels with the most time (the rest still count in the total).
    pub top: Option<usize>,
    /// Keep warm-up / autotuning trial kernels (launched only in the warm-up
    /// steps before the steady state) in the table, totals and gains; they
    /// are left out by default.
    pub keep_warmup: bool,
}

/// A kernel whose recoverable time is under this share of the workload is
/// not worth naming as the primary bottleneck over the hottest kernel.
const PRIMARY_MIN_GAIN_PCT: f64 = 1.0;

pub fn analyze(profile: &Profile, options: &AnalyzeOptions) -> Diagnosis {
    // The timeline's steps are found once, for the warm-up cut and the summary.
    let spliced = profile.timeline.as_ref().map(|t| t.spliced());
    let window = spliced.as_deref().and_then(timeline::Window::new);
    let warmup = warmup::find_in(profile, window.as_ref());
    let left_out = warmup.as_ref().filter(|_| !options.keep_warmup);
    let steady = left_out.map(|w| steady_launches(profile, w));
    let launches: &[kopt_model::KernelLaunch] = steady.as_deref().unwrap_or(&profile.launches);
    let total_ns: f64 = launches.iter().filter_map(|l| l.metrics.duration_ns).sum();
    let mut groups = rollup::group(launches, total_ns);
    let (timeline, strip, steady_strip) = timeline_views(profile, window.as_ref());

    // Kernels traced back to the framework ops that launched them.
    let attribution = profile.timeline.as_ref().and_then(|t| {
        ops::attribute_where(t, total_ns, |a| {
            left_out.is_none_or(|w| !w.is_trial_activity(a))
        })
    });
    let (misaligned, padding) = gemm_padding(&mut groups, attribution.as_ref(), total_ns);
    let step_base = ranking::Base::of(timeline.as_ref(), total_ns);
    let Families {
        bn_members,
        folded,
        relaid,
        fp32_members,
        tf32,
    } = family_findings(
        &mut groups,
        &profile.device,
        timeline.as_ref(),
        attribution.as_ref(),
        &step_base,
        total_ns,
    );
    let (eager_attention, fused_attention, padding) = attention_finding(
        profile,
        attribution.as_ref(),
        |a| left_out.is_none_or(|w| !w.is_trial_activity(a)),
        !fp32_members.is_empty(),
        padding,
        total_ns,
    );
    let (pointwise, fused) = fusion_finding(
        &groups,
        launches,
        folded.is_some().then_some(bn_members.as_slice()),
        profile.device.peaks.dram_bytes_per_s,
        attribution.as_ref(),
        total_ns,
    );
    // Graph capture, from the timeline.
    let graph = timeline
        .as_ref()
        .and_then(|t| graph_finding(t, profile.device.amd.is_some()));
    let base = step_base;
    let (compiled, compile_members) = compile_finding(&CompileInputs {
        groups: &groups,
        launches,
        attribution: attribution.as_ref(),
        misaligned: &misaligned,
        eager_attention: eager_attention.as_ref(),
        device: &profile.device,
        total_ns,
        base: &base,
        fused_attention: fused_attention.is_some(),
        graph: graph.as_ref(),
        optimizer_launches: &profile
            .timeline
            .as_ref()
            .map(optimizer::launch_ids)
            .unwrap_or_default(),
        input_wait_ns: timeline
            .as_ref()
            .and_then(|t| t.host_copies.as_ref())
            .map_or(0.0, copies::input_wait_ns),
        syncs_per_step: timeline
            .as_ref()
            .and_then(|t| t.host_syncs.as_ref())
            .map_or(0.0, |h| h.mid_step_per_step - h.in_optimizer_per_step),
    });
    let fused = if compiled.is_some() { None } else { fused };
    cover_fused(
        &mut groups,
        compiled.as_ref().or(fused.as_ref()),
        &compile_members,
        &pointwise,
    );
    let whole_model = WholeModel {
        padding,
        fused,
        compiled: compiled.map(|r| name_compile_kernels(r, &groups)),
        folded,
        relaid,
        tf32,
        fused_attention,
    };
    let (recommendations, primary) = ranked_with_primary(
        &groups,
        &whole_model,
        graph,
        timeline.as_ref(),
        &base,
        total_ns,
        profile.device.amd.is_some(),
    );
    let counters_collected = launches.iter().any(|l| !rules::has_no_counters(&l.metrics));
    let (mut kernels, notes) = explained_kernels(
        profile,
        groups,
        counters_collected,
        &whole_model.covering(),
        timeline.as_ref(),
        total_ns,
    );
    if let Some(n) = options.top {
        kernels.truncate(n);
    }
    let ops = ops_table(attribution, &mut kernels);
    Diagnosis {
        schema: SCHEMA.into(),
        run: None,
        device: profile.device.clone(),
        sources: profile.sources.clone(),
        total_kernel_ns: total_ns,
        kernels,
        primary,
        recommendations,
        timeline,
        strip,
        steady_strip,
        notes,
        ops,
        warmup_trials: warmup.map(|w| kopt_model::WarmupTrials {
            kept: options.keep_warmup,
            ..w.trials
        }),
        verified: Vec::new(),
    }
}

/// The findings that cover kernels across the whole model, in the order
/// the ranking takes them.
struct WholeModel {
    padding: Vec<kopt_model::Recommendation>,
    fused: Option<kopt_model::Recommendation>,
    compiled: Option<kopt_model::Recommendation>,
    folded: Option<kopt_model::Recommendation>,
    relaid: Option<kopt_model::Recommendation>,
    tf32: Option<kopt_model::Recommendation>,
    fused_attention: Option<kopt_model::Recommendation>,
}

impl WholeModel {
    fn findings(&self) -> impl Iterator<Item = &kopt_model::Recommendation> {
        let rest = [
            self.fused.as_ref(),
            self.compiled.as_ref(),
            self.folded.as_ref(),
            self.relaid.as_ref(),
            self.tf32.as_ref(),
            self.fused_attention.as_ref(),
        ];
        self.padding.iter().chain(rest.into_iter().flatten())
    }

    /// The findings a kernel's root cause may name as covering it.
    fn covering(&self) -> Covering<'_> {
        Covering {
            padding: &self.padding,
            folded: self.folded.as_ref(),
            compiled: self.compiled.as_ref(),
            fused: self.fused.as_ref(),
        }
    }
}

/// Every recommendation ranked (per-kernel, whole-model, and the
/// timeline's: graph capture, host syncs, copies) and the primary
/// bottleneck named from the ranking.
fn ranked_with_primary(
    groups: &[rollup::KernelGroup],
    whole_model: &WholeModel,
    graph: Option<kopt_model::Recommendation>,
    timeline: Option<&kopt_model::TimelineSummary>,
    base: &ranking::Base,
    total_ns: f64,
    amd: bool,
) -> (Vec<kopt_model::Recommendation>, Option<PrimaryBottleneck>) {
    let tiny_groups: Vec<&rollup::KernelGroup> = groups
        .iter()
        .filter(|g| g.tiny && g.verdict.covered_by.is_none())
        .collect();
    let from_timeline = graph.into_iter().chain(syncs_and_copies(timeline, base));
    let recommendations = ranked_recommendations(
        groups,
        &tiny_groups,
        whole_model.findings(),
        from_timeline,
        timeline,
        base,
        total_ns,
    );
    let primary = primary_bottleneck(
        &recommendations,
        groups,
        &tiny_groups,
        timeline,
        total_ns,
        amd,
    );
    (recommendations, primary)
}

/// The pointwise kernels a fusion would cover (less the batch-norm
/// members folding already covers, when it stands) and the fusion finding.
fn fusion_finding(
    groups: &[rollup::KernelGroup],
    launches: &[kopt_model::KernelLaunch],
    folded_members: Option<&[String]>,
    peak_dram: Option<f64>,
    attribution: Option<&ops::Attribution>,
    total_ns: f64,
) -> (Vec<String>, Option<kopt_model::Recommendation>) {
    let mut pointwise = fusion::members(groups);
    if let Some(folded) = folded_members {
        pointwise.retain(|m| !folded.contains(m));
    }
    let fused = fusion::recommend(
        launches,
        &pointwise,
        total_ns,
        peak_dram,
        attribution.map(|a| &a.by_kernel),
    );
    (pointwise, fused)
}

/// The kernel table, each verdict's root cause completed (counters,
/// covering finding, launch overhead), with the profile's notes.
fn explained_kernels(
    profile: &Profile,
    groups: Vec<rollup::KernelGroup>,
    counters_collected: bool,
    covering: &Covering,
    timeline: Option<&kopt_model::TimelineSummary>,
    total_ns: f64,
) -> (Vec<kopt_model::KernelVerdict>, Vec<String>) {
    let mut notes = notes(profile, &groups, timeline.is_some(), total_ns);
    let mut kernels: Vec<_> = groups.into_iter().map(|g| g.verdict).collect();
    notes.extend(timeline_only_note(profile, counters_collected, &kernels));
    notes.extend(
        timeline
            .and_then(|t| t.steps.as_ref())
            .and_then(|s| s.other_threads.clone()),
    );
    notes.extend(bare_steps_unused_note(profile, timeline));
    for k in &mut kernels {
        explain_kernel(k, counters_collected, covering, timeline);
    }
    (kernels, notes)
}

/// GEMMs with a dimension not a multiple of 8 and the padding finding;
/// each kernel's library root cause named against it.
fn gemm_padding(
    groups: &mut [rollup::KernelGroup],
    attribution: Option<&ops::Attribution>,
    total_ns: f64,
) -> (Vec<ops::MisalignedGemm>, Vec<kopt_model::Recommendation>) {
    // GEMMs with a dimension not a multiple of 8: the padding finding's and
    // torch.compile's (Inductor pads them) from the same prices.
    let misaligned: Vec<ops::MisalignedGemm> = attribution
        .as_ref()
        .map(|a| ops::misaligned_gemms(a))
        .unwrap_or_default();
    let padding: Vec<_> = attribution
        .as_ref()
        .map(|a| ops::gemm_alignment(a, &misaligned, total_ns))
        .unwrap_or_default();
    for g in groups
        .iter_mut()
        .filter(|g| g.verdict.bottleneck.class != kopt_model::BottleneckClass::Unknown)
    {
        library_root_cause(&mut g.verdict, &padding);
    }
    (misaligned, padding)
}

/// Eager attention (from the op table, else the kernel sequence of the
/// activities `keep` keeps), its fused-attention finding, and the padding
/// findings left once attention is fused.
fn attention_finding(
    profile: &Profile,
    attribution: Option<&ops::Attribution>,
    keep: impl Fn(&kopt_model::GpuActivity) -> bool,
    tf32_advised: bool,
    padding: Vec<kopt_model::Recommendation>,
    total_ns: f64,
) -> (
    Option<attention::Found>,
    Option<kopt_model::Recommendation>,
    Vec<kopt_model::Recommendation>,
) {
    // Eager attention (matmul -> softmax -> matmul): one finding, SDPA.
    let eager_attention = attribution
        .as_ref()
        .and_then(|a| attention::from_ops(&a.table))
        .or_else(|| {
            profile
                .timeline
                .as_ref()
                .and_then(|t| attention::from_kernels(t, keep))
        });
    let fused_attention = eager_attention
        .as_ref()
        .and_then(|f| attention::recommend(f, total_ns, &profile.device, tf32_advised));
    // Padding S inside attention is moot: the fused kernel never writes S x S.
    let padding: Vec<_> = match &eager_attention {
        Some(f) if fused_attention.is_some() => padding
            .into_iter()
            .filter(|r| !f.ops.iter().any(|op| r.evidence.starts_with(op.as_str())))
            .collect(),
        _ => padding,
    };
    (eager_attention, fused_attention, padding)
}

/// The op table, each kernel given its share by op.
fn ops_table(
    attribution: Option<ops::Attribution>,
    kernels: &mut [kopt_model::KernelVerdict],
) -> Vec<kopt_model::OpSummary> {
    match attribution {
        Some(mut a) => {
            for k in kernels.iter_mut() {
                if let Some(shares) = a.by_kernel.remove(&k.name) {
                    k.ops = shares;
                }
            }
            a.table
        }
        None => Vec::new(),
    }
}

/// The launches left once warm-up trials are cut.
fn steady_launches(profile: &Profile, w: &warmup::Found) -> Vec<kopt_model::KernelLaunch> {
    profile
        .launches
        .iter()
        .filter(|l| !w.is_trial_launch(l))
        .cloned()
        .collect()
}

/// A note for a trace without counters where kernels stay unknown.
fn timeline_only_note(
    profile: &Profile,
    counters_collected: bool,
    kernels: &[kopt_model::KernelVerdict],
) -> Option<String> {
    let unknown = kernels
        .iter()
        .any(|k| k.bottleneck.class == kopt_model::BottleneckClass::Unknown);
    if counters_collected || !unknown {
        return None;
    }
    let vendor = profile.device.vendor();
    Some(format!("Timeline only: no counters were collected for this input, so a kernel without a timeline finding is classed unknown; {} (or {}) gives each kernel's cause.", vendor.profile_command(), vendor.manual_counters()))
}

/// Host syncs inside the step, blocking copies from pageable memory and
/// an optimizer not yet fused (#35), each priced on the step.
fn syncs_and_copies(
    timeline: Option<&kopt_model::TimelineSummary>,
    base: &ranking::Base,
) -> Vec<kopt_model::Recommendation> {
    let host_syncs = timeline
        .and_then(|t| t.host_syncs.as_ref())
        .and_then(host_syncs::recommend);
    let pinned_copies = timeline
        .and_then(|t| t.host_copies.as_ref())
        .and_then(|c| copies::recommend(c, base.wall_ns));
    let prefetch = timeline
        .and_then(|t| t.host_copies.as_ref())
        .and_then(|c| copies::recommend_prefetch(c, base.wall_ns));
    // The recorder slows the optimizer's launches as it slows the step.
    let optimizer_findings = timeline.map_or(Vec::new(), |t| {
        let Some(o) = t.optimizer.as_ref() else {
            return Vec::new();
        };
        let recorded = t
            .graph_prediction
            .as_ref()
            .filter(|p| p.eager_per_step_ns > 0.0)
            .map_or(1.0, |p| p.eager_corrected_per_step_ns / p.eager_per_step_ns);
        optimizer::recommend(o, base.wall_ns, recorded)
            .into_iter()
            .chain(optimizer::recommend_set_to_none(o, base.wall_ns, recorded))
            .collect()
    });
    host_syncs
        .into_iter()
        .chain(pinned_copies)
        .chain(prefetch)
        .chain(optimizer_findings)
        .collect()
}

/// Every finding in one ranking: the per-kernel advice of kernels no
/// whole-model finding covers, the whole-model findings (`whole_model`, in
/// order), the tiny kernels', then the timeline's (graph capture, host
/// syncs, pageable copies: `from_timeline`); each finding's predicted
/// speed-up of the whole step on one base (the bare step where known),
/// findings without a figure after every finding with one, by their
/// kernel's share. Gains too small to act on are dropped; ranks numbered.
fn ranked_recommendations<'r>(
    groups: &[rollup::KernelGroup],
    tiny_groups: &[&rollup::KernelGroup],
    whole_model: impl Iterator<Item = &'r kopt_model::Recommendation>,
    from_timeline: impl Iterator<Item = kopt_model::Recommendation>,
    timeline: Option<&kopt_model::TimelineSummary>,
    base: &ranking::Base,
    total_ns: f64,
) -> Vec<kopt_model::Recommendation> {
    let mut recommendations: Vec<_> = groups
        .iter()
        .filter(|g| !g.tiny && g.verdict.covered_by.is_none())
        .flat_map(|g| catalogue::recommend(g, total_ns))
        .collect();
    recommendations.extend(whole_model.cloned());
    recommendations.extend(catalogue::recommend_tiny(tiny_groups, total_ns, timeline));
    recommendations.extend(from_timeline);
    // One ranking: each finding's predicted speed-up of the whole step on
    // one base (the bare step where known); findings without a figure
    // after every finding with one, by their kernel's share.
    // By name, once: a finding a kernel over tens of thousands of kernels
    // made a search each quadratic.
    let share: std::collections::HashMap<&str, f64> = groups
        .iter()
        .map(|g| (g.verdict.name.as_str(), g.verdict.pct_of_total))
        .collect();
    ranking::rank(&mut recommendations, base, |k| {
        share.get(k).copied().unwrap_or(0.0)
    });
    // Gains too small to act on are noise, not advice.
    recommendations.retain(|r| r.gain.as_ref().is_none_or(|g| g.workload_pct >= 0.05));
    for (i, r) in recommendations.iter_mut().enumerate() {
        r.rank = i + 1;
    }
    recommendations
}

/// The findings over a family of kernels, each covering its members:
/// batch norm folded, NCHW<->NHWC conversions, fp32 GEMMs under TF32.
struct Families {
    bn_members: Vec<String>,
    folded: Option<kopt_model::Recommendation>,
    relaid: Option<kopt_model::Recommendation>,
    fp32_members: Vec<String>,
    tf32: Option<kopt_model::Recommendation>,
}

fn family_findings(
    groups: &mut [rollup::KernelGroup],
    device: &kopt_model::Device,
    timeline: Option<&kopt_model::TimelineSummary>,
    attribution: Option<&ops::Attribution>,
    base: &ranking::Base,
    total_ns: f64,
) -> Families {
    // PyTorch's eager elementwise chains: one finding for all of them, in
    // place of each kernel's own advice.
    // Batch norm in inference: one finding, the kernels fold away.
    let by_kernel = attribution.map(|a| &a.by_kernel);
    let bn_members = batchnorm::members(groups, by_kernel);
    let folded = batchnorm::recommend(groups, &bn_members, total_ns, by_kernel);
    let set: std::collections::HashSet<&str> = bn_members.iter().map(String::as_str).collect();
    cover(groups, folded.as_ref(), |name| set.contains(name));
    // cuDNN's NCHW<->NHWC conversions: one finding, channels_last.
    let layout_members = layout::members(groups, by_kernel);
    let relaid = layout::recommend(groups, &layout_members, total_ns);
    let set: std::collections::HashSet<&str> = layout_members.iter().map(String::as_str).collect();
    cover(groups, relaid.as_ref(), |name| set.contains(name));
    // fp32 GEMMs on the FMA pipes of a tensor-core GPU: one finding, TF32.
    let fp32_members = precision::members(groups, device);
    let tf32 = precision::recommend(
        groups,
        &fp32_members,
        total_ns,
        device,
        &precision::StepFacts {
            base,
            timeline,
            by_kernel,
            op_calls: attribution.map(|a| &a.calls),
        },
    );
    let set: std::collections::HashSet<&str> = fp32_members.iter().map(String::as_str).collect();
    cover(groups, tf32.as_ref(), |name| set.contains(name));
    Families {
        bn_members,
        folded,
        relaid,
        fp32_members,
        tf32,
    }
}

/// Marks the kernels the torch.compile finding (its members, not tiny,
/// not covered yet) or the elementwise chains' finding (`pointwise`) covers.
fn cover_fused(
    groups: &mut [rollup::KernelGroup],
    finding: Option<&kopt_model::Recommendation>,
    compile_members: &[String],
    pointwise: &[String],
) {
    if let Some(f) = finding {
        // Sets, not lists: tens of thousands of distinct kernels made the
        // membership test quadratic.
        let compile_members: std::collections::HashSet<&str> =
            compile_members.iter().map(String::as_str).collect();
        let pointwise: std::collections::HashSet<&str> =
            pointwise.iter().map(String::as_str).collect();
        let covers = |g: &rollup::KernelGroup| {
            if f.id == compile::ID {
                !g.tiny
                    && g.verdict.covered_by.is_none()
                    && compile_members.contains(g.verdict.name.as_str())
            } else {
                pointwise.contains(g.verdict.name.as_str())
            }
        };
        for g in groups.iter_mut().filter(|g| covers(g)) {
            g.verdict.covered_by = Some(f.id.clone());
        }
    }
}

/// The timeline's summary and the strips drawn from it.
fn timeline_views(
    profile: &Profile,
    window: Option<&timeline::Window>,
) -> (
    Option<kopt_model::TimelineSummary>,
    Option<kopt_model::TimelineStrip>,
    Option<kopt_model::SteadyStrip>,
) {
    let timeline = profile
        .timeline
        .as_ref()
        .filter(|t| !t.activities.is_empty())
        .zip(window)
        .and_then(|(t, w)| timeline::summarize_window_for_device(t, w, &profile.device));
    let strip = match (&profile.timeline, &timeline) {
        (Some(t), Some(s)) => timeline::strip(t, s),
        _ => None,
    };
    let steady_strip = match (&profile.timeline, &timeline, &strip) {
        (Some(t), Some(s), Some(whole)) => steady_strip::steady_strip(t, s, whole),
        _ => None,
    };
    (timeline, strip, steady_strip)
}

/// Marks the kernels a whole-model finding covers (`is_member` by name).
fn cover(
    groups: &mut [rollup::KernelGroup],
    finding: Option<&kopt_model::Recommendation>,
    is_member: impl Fn(&str) -> bool,
) {
    if let Some(f) = finding {
        for g in groups.iter_mut().filter(|g| is_member(&g.verdict.name)) {
            g.verdict.covered_by = Some(f.id.clone());
        }
    }
}

/// The graph-capture finding from the timeline; a HIP graph on AMD GPUs.
fn graph_finding(t: &kopt_model::TimelineSummary, amd: bool) -> Option<kopt_model::Recommendation> {
    let mut r = graph_recommendation(t)?;
    if let Some(o) = &t.optimizer {
        // A training step: the capture must hold the optimizer's step too,
        // which only a capturable optimizer allows, and the harness does
        // not apply it (graph capture is no training candidate there).
        r.action = format!(
            "{} This is a training step ({} in its {} form): capture the forward, the backward and the optimizer's step together, with the optimizer built with capturable=True where it takes one (Adam, AdamW and most others; SGD needs none), each batch copied into static input tensors, a few warm-up steps on a side stream before capturing, and no `.item()` or other host sync inside; `kopt optimize` does not apply it to a training step, so apply it by hand and time it with `kopt bench`.",
            r.action, o.name, o.form
        );
    }
    if amd {
        // The same fix on AMD GPUs is a HIP graph.
        for text in [&mut r.title, &mut r.action, &mut r.evidence] {
            *text = text
                .replace("CUDA graph", "HIP graph")
                .replace(
                    "torch.cuda.graphs / cudaStreamBeginCapture",
                    "torch.cuda.graphs (HIP graphs under ROCm) / hipStreamBeginCapture",
                )
                .replace("cudaStreamBeginCapture", "hipStreamBeginCapture");
        }
    }
    Some(r)
}

/// What the torch.compile finding is priced from.
struct CompileInputs<'a> {
    groups: &'a [rollup::KernelGroup<'a>],
    launches: &'a [kopt_model::KernelLaunch],
    attribution: Option<&'a ops::Attribution>,
    misaligned: &'a [ops::MisalignedGemm],
    eager_attention: Option<&'a attention::Found>,
    device: &'a kopt_model::Device,
    total_ns: f64,
    base: &'a ranking::Base,
    /// Whether the fused-attention finding was made.
    fused_attention: bool,
    graph: Option<&'a kopt_model::Recommendation>,
    /// Launches of the optimizer's step: `torch.compile(model)` compiles
    /// the forward and backward, never the optimizer's step.
    optimizer_launches: &'a std::collections::HashSet<u64>,
    /// GPU idle a step before its input copies (the host preparing them).
    input_wait_ns: f64,
    /// Host syncs a step inside the step, outside the optimizer's step
    /// (graph breaks under Dynamo).
    syncs_per_step: f64,
}

/// The torch.compile finding, and the kernels Inductor would fuse.
fn compile_finding(x: &CompileInputs) -> (Option<kopt_model::Recommendation>, Vec<String>) {
    let CompileInputs {
        groups,
        launches,
        attribution,
        misaligned,
        eager_attention,
        device,
        total_ns,
        base,
        fused_attention,
        graph,
        optimizer_launches,
        input_wait_ns,
        syncs_per_step,
    } = *x;
    let by_kernel = attribution.map(|a| &a.by_kernel);
    // The whole model under torch.compile: one finding over every kernel
    // Inductor fuses; it subsumes the elementwise chains' finding. Not for a
    // model already compiled (Triton kernels of Inductor's in the trace).
    let already_compiled = groups.iter().any(|g| {
        g.verdict
            .library
            .as_ref()
            .is_some_and(|f| f.family == kopt_model::LibraryFamily::Generated)
    });
    let compile_members: Vec<String> = groups
        .iter()
        .filter(|g| g.verdict.library.as_ref().is_some_and(compile::is_fusible))
        .map(|g| g.verdict.name.clone())
        .collect();
    let compiled = if already_compiled {
        None
    } else {
        let softmax: std::collections::HashSet<&str> = groups
            .iter()
            .filter(|g| {
                g.verdict
                    .library
                    .as_ref()
                    .is_some_and(|f| f.family == kopt_model::LibraryFamily::Softmax)
            })
            .map(|g| g.verdict.name.as_str())
            .collect();
        let set = compile::member_set(&compile_members);
        let model_launches = launches
            .iter()
            .filter(|l| !optimizer_launches.contains(&l.id));
        let mut f = compile::fusible(model_launches, |n| {
            match (set.contains(n), softmax.contains(n)) {
                (false, _) => compile::Member::No,
                (true, true) => compile::Member::Softmax,
                (true, false) if layout::is_layout_conversion(n) => compile::Member::Conversion,
                (true, false) => compile::Member::Fusible,
            }
        });
        // The launches removed are a share of all the step makes: the
        // optimizer's stay, and so does the host time they cost.
        f.all_launches = launches.len();
        f.idle_not_launches_ns = input_wait_ns;
        f.graph_breaks_per_step = syncs_per_step;
        for g in groups {
            if let Some(family) = &g.verdict.library {
                let member = set.contains(g.verdict.name.as_str());
                f.kinds.add(&g.verdict.name, family, member);
            }
        }
        // Misaligned GEMMs Inductor's shape padding pads: priced from op
        // shapes as the padding finding prices them where the trace has
        // GEMM shapes, else from the kernels' names.
        let pad = match &attribution {
            Some(a) if ops::has_gemm_shapes(a) => {
                compile::padding_from_shapes(misaligned, |row| a.first_kernel(row), &device.peaks)
            }
            _ => {
                let attention_gemms: std::collections::HashSet<&str> = eager_attention
                    .iter()
                    .flat_map(|f| f.gemm_kernels.iter().map(String::as_str))
                    .collect();
                compile::padding_from_names(launches, device.sm_count, &attention_gemms)
            }
        };
        compile::recommend(
            &f,
            &compile_members,
            total_ns,
            base,
            fused_attention,
            graph
                .as_ref()
                .and_then(|g| g.predicted_speedup.as_ref())
                .map(|p| p.estimate),
            &fusion::ops_behind(&compile_members, by_kernel),
            &pad,
        )
    };
    (compiled, compile_members)
}

/// The compile finding names the kernels it alone covers: batch norm and
/// layout conversions stay their own findings' (they rank against it).
fn name_compile_kernels(
    mut r: kopt_model::Recommendation,
    groups: &[rollup::KernelGroup],
) -> kopt_model::Recommendation {
    let own: Vec<&str> = groups
        .iter()
        .filter(|g| g.verdict.covered_by.as_deref() == Some(compile::ID))
        .map(|g| g.verdict.name.as_str())
        .collect();
    if !own.is_empty() {
        r.kernel = own.join(" | ");
    }
    r
}

/// The primary bottleneck is what tops the recommendations: the finding
/// with the most recoverable time.
fn primary_bottleneck(
    recommendations: &[kopt_model::Recommendation],
    groups: &[rollup::KernelGroup],
    tiny_groups: &[&rollup::KernelGroup],
    timeline: Option<&kopt_model::TimelineSummary>,
    total_ns: f64,
    amd: bool,
) -> Option<PrimaryBottleneck> {
    let launch_bound = timeline.filter(|t| t.launch_bound);
    let graph = recommendations
        .iter()
        .find(|r| r.id == "capture_cuda_graph");
    let primary = match recommendations.first() {
        Some(r)
            if r.id == fusion::ID
                || r.id == compile::ID
                || r.id == batchnorm::ID
                || r.id == layout::ID
                || r.id == precision::ID
                || r.id == attention::ID =>
        {
            Some(fusion_primary(r, groups))
        }
        Some(r) if r.id == "capture_cuda_graph" => timeline
            .map(|t| launch_primary(t, Some(r)))
            .or_else(|| primary(groups, total_ns)),
        Some(r)
            if r.gain
                .as_ref()
                .is_some_and(|g| g.workload_pct >= PRIMARY_MIN_GAIN_PCT) =>
        {
            let gain = r.gain.as_ref().map(|g| g.workload_pct);
            match groups.iter().find(|g| g.verdict.name == r.kernel) {
                Some(g) => primary_of(g, gain, groups),
                // The tiny launches together: where the timeline measured
                // launches setting the pace, that is what they cost.
                None => Some(match launch_bound {
                    Some(t) => launch_primary(t, graph),
                    None => aggregate_primary(r, tiny_groups),
                }),
            }
        }
        // No finding with a measured gain: the timeline's verdict, a
        // measurement, names the primary where it says launches set the
        // pace (the key insight and the verdict say the same); else the
        // kernel with the most time.
        _ => match launch_bound {
            Some(t) => Some(launch_primary(t, graph)),
            None => primary(groups, total_ns),
        },
    };
    let mut primary = primary;
    if let (Some(p), true) = (primary.as_mut(), amd) {
        p.insight = p.insight.replace("CUDA graph", "HIP graph");
    }
    primary
}

/// Notes the reader must know: launch overhead without a timeline,
/// values not taken as written, unknown peaks, merged pages, the gains' model.
fn notes(
    profile: &Profile,
    groups: &[rollup::KernelGroup],
    has_timeline: bool,
    total_ns: f64,
) -> Vec<String> {
    let mut notes = Vec::new();
    let tiny: Vec<_> = groups.iter().filter(|g| g.tiny).collect();
    if !tiny.is_empty() && !has_timeline {
        let launches: u64 = tiny.iter().map(|g| g.verdict.launches).sum();
        let ns: f64 = tiny.iter().map(|g| g.verdict.total_ns).sum();
        let vendor = profile.device.vendor();
        notes.push(format!(
            "{launches} launches of {} kernel(s) run under {:.0} us each ({:.1}% of kernel time). Counters cannot show launch overhead: {} serialises kernels, so the gaps between them are invisible. A timeline ({}) measures it; graph capture of such a pipeline is often worth 2x or more.",
            tiny.len(),
            rules::TINY_KERNEL_NS / 1e3,
            if total_ns > 0.0 { 100.0 * ns / total_ns } else { 0.0 },
            vendor.counter_profiler(),
            vendor.timeline_tools()
        ));
    }
    // Values the parsers would not take as fact (#27): each input says which.
    for source in profile.sources.iter().filter(|s| !s.excluded.is_empty()) {
        const SHOWN: usize = 3;
        let more = source.excluded.len().saturating_sub(SHOWN);
        notes.push(format!(
            "{}: {} implausible value(s) not taken as written: {}{}",
            source.path,
            source.excluded.len(),
            source.excluded[..source.excluded.len().min(SHOWN)].join("; "),
            if more > 0 {
                format!("; and {more} more")
            } else {
                String::new()
            }
        ));
    }
    if profile.device.peak_source == PeakSource::Unknown {
        notes.push("Device peaks unknown: achieved bandwidth is shown, but not against a roofline (pass --device or --peak-dram-gbs).".into());
    }
    if profile.sources.iter().any(|s| s.format == "ncu-details")
        && profile.sources.iter().any(|s| s.format == "ncu-raw")
    {
        notes.push("Raw and details pages were merged: if both came from the same run, each kernel's launches are counted twice.".into());
    }
    notes.push(format!(
        "Gains: the share of a kernel's time its fix could save (model named per recommendation; estimates assume a tuned kernel reaches {:.0}% of a unit's peak), weighted by the kernel's share of the summed kernel time.",
        rules::ATTAINABLE_PCT
    ));
    notes
}

/// The whole-model findings a kernel's root cause points to.
struct Covering<'a> {
    padding: &'a [kopt_model::Recommendation],
    folded: Option<&'a kopt_model::Recommendation>,
    compiled: Option<&'a kopt_model::Recommendation>,
    fused: Option<&'a kopt_model::Recommendation>,
}

/// A kernel's root cause completed: missing counters explained, the
/// finding that covers it named, launch overhead measured on the timeline.
fn explain_kernel(
    k: &mut kopt_model::KernelVerdict,
    counters_collected: bool,
    c: &Covering,
    timeline: Option<&kopt_model::TimelineSummary>,
) {
    explain_missing_counters(k, counters_collected);
    if k.bottleneck.class == kopt_model::BottleneckClass::Unknown {
        library_root_cause(k, c.padding);
    }
    if let Some(f) = c
        .folded
        .filter(|f| k.covered_by.as_deref() == Some(f.id.as_str()))
    {
        k.root_cause = format!(
            "{} Batch norm in inference: see \"{}\" for the fix and its gain.",
            k.root_cause.trim_end_matches('.').to_string() + ".",
            f.title
        );
    } else if let Some(f) = c
        .compiled
        .filter(|f| k.covered_by.as_deref() == Some(f.id.as_str()))
    {
        k.root_cause = format!(
            "{} An eager kernel torch.compile fuses into its neighbours: see \"{}\" for the fix and its gain.",
            k.root_cause.trim_end_matches('.').to_string() + ".",
            f.title
        );
    } else if let Some(f) = c
        .fused
        .filter(|f| k.covered_by.as_deref() == Some(f.id.as_str()))
    {
        k.root_cause = format!(
            "{} Part of an eager elementwise chain: see \"{}\" for the fix and its gain.",
            k.root_cause.trim_end_matches('.').to_string() + ".",
            f.title
        );
    }
    if let Some(t) = timeline {
        for f in k
            .findings
            .iter_mut()
            .filter(|f| f.class == kopt_model::BottleneckClass::LaunchOverhead)
        {
            f.evidence = format!(
                "runs {}: at this size the launch itself can cost more than the work; the timeline measures it: a median launch call of {}, the GPU busy {:.1}% of the steady-state window",
                kopt_model::format_duration_ns(k.mean_ns),
                t.median_launch_ns.map_or("-".into(), kopt_model::format_duration_ns),
                t.busy_pct
            );
        }
    }
}

/// Bare function names of the distinct kernels carrying the most time, the
/// fewest needed to cover `coverage` (0..=1) of it, at most `max`: what
/// `kopt profile` examines in depth. Warm-up trials never run again: they
/// are not worth a pass.
pub fn top_kernel_functions(profile: &Profile, max: usize, coverage: f64) -> Vec<String> {
    let warmup = warmup::find(profile);
    let mut by_fn: Vec<(String, f64)> = Vec::new();
    let mut at: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for l in profile
        .launches
        .iter()
        .filter(|l| warmup.as_ref().is_none_or(|w| !w.is_trial_launch(l)))
    {
        let f = kopt_model::kernel_function_name(&l.name);
        let d = l.metrics.duration_ns.unwrap_or(0.0);
        match at.get(&f) {
            Some(&i) => by_fn[i].1 += d,
            None => {
                at.insert(f.clone(), by_fn.len());
                by_fn.push((f, d));
            }
        }
    }
    by_fn.sort_by(|a, b| b.1.total_cmp(&a.1));
    let total: f64 = by_fn.iter().map(|(_, t)| t).sum();
    let mut covered = 0.0;
    let mut out = Vec::new();
    for (f, t) in by_fn {
        if out.len() >= max || (total > 0.0 && covered / total >= coverage) {
            break;
        }
        covered += t;
        out.push(f);
    }
    out
}

/// The graph-capture recommendation where the timeline gives a reason for
/// it: launches set the pace, or the predicted speed-up is worth naming; never
/// for a GPU busy most of the steady state, nor for a step already replayed
/// from a graph.
fn graph_recommendation(t: &kopt_model::TimelineSummary) -> Option<kopt_model::Recommendation> {
    let p = t.graph_prediction.as_ref()?;
    let already_graphed = t.graph_launches > 0 && t.kernel_launch_calls == 0;
    // Without steps the prediction covers the whole trace as one sequence:
    // named only where launches clearly set the pace.
    let worth = t.launch_bound || (t.steps.is_some() && p.speedup.estimate >= GRAPH_MIN_SPEEDUP);
    // The untraced step's busy share where a bare run timed it.
    let busy_pct = if p.eager_measured_bare && p.eager_corrected_per_step_ns > 0.0 {
        100.0 * p.busy_per_step_ns / p.eager_corrected_per_step_ns
    } else {
        t.busy_pct
    };
    // Capture is impossible while the step syncs with the host inside it:
    // the host-sync finding says so instead (#35).
    if t.host_syncs.is_some() {
        return None;
    }
    if busy_pct > timeline::COMPUTE_BOUND_BUSY_PCT
        || already_graphed
        || !worth
        || p.speedup.estimate <= 1.0
    {
        return None;
    }
    catalogue::graph_capture(t)
}

/// A predicted speed-up below this is not worth a graph-capture recommendation
/// unless launches clearly set the pace.
const GRAPH_MIN_SPEEDUP: f64 = 1.1;

/// The primary bottleneck when launches set the pace (the graph-capture
/// recommendation tops the list, or the timeline says so and no finding
/// has a measured gain); the graph-capture prediction quoted where there
/// is one.
fn launch_primary(
    t: &kopt_model::TimelineSummary,
    graph: Option<&kopt_model::Recommendation>,
) -> PrimaryBottleneck {
    let fmt = kopt_model::format_duration_ns;
    let predicted = match (graph.and_then(|r| r.predicted_speedup.as_ref()), &t.graph_prediction) {
        (Some(sp), Some(p)) => format!(
            " Capturing the steady-state step in a CUDA graph is predicted to run it {}x faster (range {}): {} per step now, {} after capture.",
            kopt_model::figure::ratio(sp.estimate, 1),
            kopt_model::figure::ratio_range(sp.low, sp.high, 1),
            fmt(p.eager_corrected_per_step_ns),
            fmt(p.graph_per_step_ns)
        ),
        _ => String::new(),
    };
    PrimaryBottleneck {
        component: format!("the workload's launch sequence ({} kernels)", t.kernels),
        component_short: format!("{} kernel launches", t.kernel_launch_calls.max(t.kernels)),
        class: kopt_model::BottleneckClass::LaunchOverhead,
        pct_of_total: 100.0 - t.busy_pct,
        insight: format!(
            "{} The GPU idles {:.1}% of the steady-state window waiting for the next launch.{predicted}",
            t.verdict,
            100.0 - t.busy_pct,
        ),
    }
}

/// Most member kernels a finding over several kernels names in its
/// primary component; the rest are counted.
const COMPONENT_MAX_NAMES: usize = 4;

/// The primary bottleneck when a finding over several kernels (the eager
/// elementwise chains, the batch norms to fold) tops the list. Its
/// component names the members by short name, most time first, a few at
/// most (full names run to kilobytes).
fn fusion_primary(
    r: &kopt_model::Recommendation,
    groups: &[rollup::KernelGroup],
) -> PrimaryBottleneck {
    let gain = r.gain.as_ref();
    let mut members: Vec<&rollup::KernelGroup> = groups
        .iter()
        .filter(|g| g.verdict.covered_by.as_deref() == Some(r.id.as_str()))
        .collect();
    members.sort_by(|a, b| b.verdict.total_ns.total_cmp(&a.verdict.total_ns));
    let mut names: Vec<&str> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for g in &members {
        if seen.insert(g.verdict.short_name.as_str()) {
            names.push(&g.verdict.short_name);
        }
    }
    let more = names.len().saturating_sub(COMPONENT_MAX_NAMES);
    names.truncate(COMPONENT_MAX_NAMES);
    let component = match more {
        0 => names.join(", "),
        n => format!("{} and {n} more", names.join(", ")),
    };
    PrimaryBottleneck {
        component: if component.is_empty() {
            r.kernel_short.clone()
        } else {
            component
        },
        component_short: r.kernel_short.clone(),
        class: r.class,
        // The members' share: saved / their time against saved / all
        // time. At most all of it: when the step's host time counts (a
        // compile that also removes launches and syncs), the saving is a
        // larger share of the step than of these kernels ("113%" before).
        pct_of_total: gain.map_or(0.0, |g| {
            if g.kernel_pct > 0.0 {
                (100.0 * g.workload_pct / g.kernel_pct).min(100.0)
            } else {
                0.0
            }
        }),
        insight: format!(
            "{}. {} could save up to {:.1}% of the workload.",
            r.evidence.trim_end().trim_end_matches('.'),
            match r.id.as_str() {
                batchnorm::ID => "Folding them into the convolutions",
                layout::ID => "Running the model in channels_last",
                _ => "Fusing the chains",
            },
            gain.map_or(0.0, |g| g.workload_pct)
        ),
    }
}

/// The primary bottleneck when the top recommendation covers several tiny kernels.
fn aggregate_primary(
    r: &kopt_model::Recommendation,
    tiny: &[&rollup::KernelGroup],
) -> PrimaryBottleneck {
    // A finding about no kernel of the table (a step's phase, a host
    // cost): it is the primary as it is, not a sum of tiny kernels.
    if tiny.is_empty() {
        return PrimaryBottleneck {
            component: r.kernel.clone(),
            component_short: r.kernel_short.clone(),
            class: r.class,
            pct_of_total: r.gain.as_ref().map_or(0.0, |g| g.workload_pct),
            insight: format!("{}: {}", r.title, r.evidence_shown().trim()),
        };
    }
    let share: f64 = tiny.iter().map(|g| g.verdict.pct_of_total).sum();
    let launches: u64 = tiny.iter().map(|g| g.verdict.launches).sum();
    let biggest = tiny
        .iter()
        .max_by(|a, b| a.verdict.total_ns.total_cmp(&b.verdict.total_ns))
        .map_or(String::new(), |g| {
            format!(
                " The largest of them: {} ({:.1}% of kernel time).",
                g.verdict.short_name, g.verdict.pct_of_total
            )
        });
    PrimaryBottleneck {
        component: r.kernel.clone(),
        component_short: r.kernel_short.clone(),
        class: r.class,
        pct_of_total: share,
        insight: format!(
            "{} tiny kernel(s) ({}) take {share:.1}% of kernel time in {launches} launches under {:.0} us each and do almost no work: fusing each step's launches or capturing them in a CUDA graph could save up to {:.1}% of kernel time.{biggest}",
            tiny.len(),
            r.kernel,
            rules::TINY_KERNEL_NS / 1e3,
            r.gain.as_ref().map_or(0.0, |g| g.workload_pct)
        ),
    }
}

/// A library kernel's root cause says whose code it is, and leads with a
/// shape finding about the call when one names this kernel: the measured
/// class stays, as a measurement.
fn library_root_cause(k: &mut kopt_model::KernelVerdict, padding: &[kopt_model::Recommendation]) {
    let Some(lib) = k.library.as_ref().filter(|l| !l.caller_can_edit) else {
        return;
    };
    let whose = format!(
        "{} {} kernel (library code)",
        lib.library,
        lib.family.as_str()
    );
    k.root_cause = match padding.iter().find(|r| r.kernel == k.name) {
        Some(r) => format!(
            "{whose}. Likely cause: {} (see \"{}\"). Measured: {}",
            r.evidence,
            r.title,
            lowercase_first(&k.root_cause)
        ),
        None => format!("{whose}: {}", lowercase_first(&k.root_cause)),
    };
}

/// A kernel without counters says why: not profiled in depth (below the
/// targeted pass's cut), or a timeline with no counters at all.
fn explain_missing_counters(k: &mut kopt_model::KernelVerdict, counters_collected: bool) {
    if k.bottleneck.class != kopt_model::BottleneckClass::Unknown {
        return;
    }
    k.root_cause = if counters_collected {
        format!(
            "Not profiled in depth: {:.1}% of kernel time, below the cut of the targeted pass (kopt profile --profile-top N or --kernel REGEX includes it); only its time is known",
            k.pct_of_total
        )
    } else {
        // The why and the way out are said once, in the report's notes.
        "No counters (timeline only), only its time is known".into()
    };
}

/// A bare run's steps that came with the input but were not used (they do
/// not match the traced steps) are said: the Input line names their file,
/// and the step would otherwise seem measured bare.
fn bare_steps_unused_note(
    profile: &Profile,
    timeline: Option<&kopt_model::TimelineSummary>,
) -> Option<String> {
    let bare = profile.timeline.as_ref()?.bare_steps.as_ref()?;
    let prediction = timeline?.graph_prediction.as_ref()?;
    (!prediction.eager_measured_bare).then(|| {
        format!(
            "The bare run's steps ({} of them, range {}) were not used: they do not match the traced steps (too few, overlapping, of another range, slower than the traced steps or faster than the GPU's own work), so the step is the traced one less the recorder's modelled cost.",
            bare.spans_ns.len(),
            kopt_model::text::echo(&bare.range)
        )
    })
}

/// The kernel that costs the workload the most recoverable time; when no
/// kernel has a meaningful recoverable share, the hottest one (at its roofline).
fn primary(groups: &[rollup::KernelGroup], total_ns: f64) -> Option<PrimaryBottleneck> {
    if total_ns <= 0.0 {
        return None;
    }
    let best = groups
        .iter()
        .filter_map(|g| Some((g, g.recoverable_ns?)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let (g, gain_pct) = match best {
        Some((g, ns)) if 100.0 * ns / total_ns >= PRIMARY_MIN_GAIN_PCT => {
            (g, Some(100.0 * ns / total_ns))
        }
        _ => (groups.first()?, None),
    };
    primary_of(g, gain_pct, groups)
}

/// One kernel as the primary bottleneck, with the share of the workload its fix may save.
fn primary_of(
    g: &rollup::KernelGroup,
    gain_pct: Option<f64>,
    groups: &[rollup::KernelGroup],
) -> Option<PrimaryBottleneck> {
    let v = &g.verdict;
    let tiny_note = if g.tiny {
        let tiny: Vec<_> = groups.iter().filter(|t| t.tiny).collect();
        let share: f64 = tiny.iter().map(|t| t.verdict.pct_of_total).sum();
        format!(
            " Together the {} tiny kernel(s) take {:.1}% of kernel time: the step is launch-latency bound (see the fusion / graph-capture recommendation).",
            tiny.len(),
            share
        )
    } else {
        String::new()
    };
    let insight = match gain_pct {
        Some(p) => format!(
            "{} takes {:.1}% of kernel time ({} launch{}, {}): {}. Fixing it could save up to {:.1}% of the workload.",
            v.short_name,
            v.pct_of_total,
            v.launches,
            if v.launches == 1 { "" } else { "es" },
            kopt_model::format_duration_ns(v.total_ns),
            lowercase_first(&v.root_cause),
            p
        ) + &tiny_note,
        None if v.bottleneck.class == kopt_model::BottleneckClass::Unknown => {
            let vendor = g.representative.metrics.vendor();
            format!(
                "{} takes {:.1}% of kernel time, but no counters were collected for it: profile it ({}, or {}) to learn why it is slow.",
                v.short_name,
                v.pct_of_total,
                vendor.profile_command(),
                vendor.manual_counters()
            )
        }
        None => format!(
            "{} takes {:.1}% of kernel time and {}. No kernel has a large recoverable share: the remaining gains come from moving fewer bytes or doing less work.",
            v.short_name,
            v.pct_of_total,
            lowercase_first(&v.root_cause)
        ),
    };
    Some(PrimaryBottleneck {
        component: v.name.clone(),
        component_short: v.short_name.clone(),
        class: v.bottleneck.class,
        pct_of_total: v.pct_of_total,
        insight,
    })
}

/// The first letter in lower case, unless the word is an acronym or a unit
/// name: an upper-case letter or a digit second ("DRAM", "L2-bound",
/// "L1/shared").
fn lowercase_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f)
            if !c
                .clone()
                .next()
                .is_some_and(|n| n.is_uppercase() || n.is_ascii_digit()) =>
        {
            f.to_lowercase().chain(c).collect()
        }
        Some(_) => s.to_string(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::{fusion_finding, lowercase_first, rollup};
    use kopt_model::{Dim3, KernelLaunch, Metrics};

    fn launch(id: u64, name: &str, ns: f64) -> KernelLaunch {
        KernelLaunch {
            id,
            name: name.into(),
            grid: Dim3 {
                x: 4096,
                y: 1,
                z: 1,
            },
            block: Dim3 { x: 256, y: 1, z: 1 },
            stream: Some(7),
            metrics: Metrics {
                duration_ns: Some(ns),
                ..Default::default()
            },
            ncu_rules: Vec::new(),
        }
    }

    /// The fusion step on its own: eager pointwise kernels back to back are
    /// fusion members; those batch-norm folding already covers are not,
    /// and a chain left of one member fuses nothing.
    #[test]
    fn fusion_leaves_out_the_members_folding_covers() {
        let add =
            "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int)";
        let mul =
            "void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>>(int)";
        let launches: Vec<KernelLaunch> = (0..40)
            .map(|i| launch(i, if i % 2 == 0 { add } else { mul }, 50_000.0))
            .collect();
        let total: f64 = 40.0 * 50_000.0;
        let groups = rollup::group(&launches, total);
        let (pointwise, fused) = fusion_finding(&groups, &launches, None, None, None, total);
        assert_eq!(pointwise.len(), 2, "{pointwise:?}");
        assert!(fused.is_some());
        let folded = vec![add.to_string()];
        let (pointwise, fused) =
            fusion_finding(&groups, &launches, Some(&folded), None, None, total);
        assert_eq!(pointwise, vec![mul.to_string()]);
        assert!(fused.is_none(), "one member left: no chain to fuse");
    }

    #[test]
    fn acronyms_and_unit_names_keep_their_case() {
        assert_eq!(lowercase_first("Memory-bound"), "memory-bound");
        assert_eq!(lowercase_first("DRAM at 90%"), "DRAM at 90%");
        assert_eq!(lowercase_first("L2-bound: hits"), "L2-bound: hits");
        assert_eq!(lowercase_first("L1/shared at 80%"), "L1/shared at 80%");
        assert_eq!(lowercase_first("A"), "a");
        assert_eq!(lowercase_first(""), "");
    }
}
