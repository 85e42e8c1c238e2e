//! Launches grouped into distinct kernels: totals, time-weighted figures,
//! and the class that carries most of the kernel's time.

use std::collections::HashMap;

use kopt_model::{kernel_short_name, BottleneckClass, Finding, KernelLaunch, KernelVerdict};

use crate::ncu_rules::disagreement;
use crate::rules::{classify, occupancy_limiter, LaunchVerdict};

/// A kernel's verdict plus what the recommendation step needs.
pub struct KernelGroup<'a> {
    pub verdict: KernelVerdict,
    pub launches: Vec<&'a KernelLaunch>,
    /// The launch whose class the kernel took (the one carrying most time in that class).
    pub representative: &'a KernelLaunch,
    pub representative_verdict: LaunchVerdict,
    /// Nanoseconds the class's fix could save over all launches, if counters tell.
    pub recoverable_ns: Option<f64>,
    pub recoverable_method: &'static str,
    pub tiny: bool,
}

/// Time-weighted mean of an optional per-launch figure.
fn weighted(
    launches: &[(&KernelLaunch, f64)],
    f: impl Fn(&KernelLaunch) -> Option<f64>,
) -> Option<f64> {
    let (mut sum, mut weight) = (0.0, 0.0);
    for (l, w) in launches {
        if let Some(v) = f(l) {
            sum += v * w;
            weight += w;
        }
    }
    (weight > 0.0).then(|| sum / weight)
}

fn summed(
    launches: &[(&KernelLaunch, f64)],
    f: impl Fn(&KernelLaunch) -> Option<f64>,
) -> Option<f64> {
    let vals: Vec<f64> = launches.iter().filter_map(|(l, _)| f(l)).collect();
    (!vals.is_empty()).then(|| vals.iter().sum())
}

pub fn group(launches: &[KernelLaunch], total_ns: f64) -> Vec<KernelGroup<'_>> {
    let mut order: Vec<&str> = Vec::new();
    let mut by_name: HashMap<&str, Vec<&KernelLaunch>> = HashMap::new();
    for l in launches {
        by_name
            .entry(l.name.as_str())
            .or_insert_with(|| {
                order.push(l.name.as_str());
                Vec::new()
            })
            .push(l);
    }
    let mut groups: Vec<KernelGroup> = order
        .into_iter()
        .map(|name| build(name, by_name.remove(name).unwrap_or_default(), total_ns))
        .collect();
    groups.sort_by(|a, b| b.verdict.total_ns.total_cmp(&a.verdict.total_ns));
    disambiguate_short_names(&mut groups);
    fuse_tiny_steps(&mut groups);
    groups
}

/// Every launch's verdict. Launches without counters (a trace: thousands of
/// launches of one kernel) differ only by class, so each class is worded once
/// and shared; the wording's duration is that of the class's longest launch,
/// which is the one the report shows.
fn verdicts(launches: &[&KernelLaunch]) -> (Vec<LaunchVerdict>, Vec<usize>) {
    if !launches
        .iter()
        .all(|l| crate::rules::has_no_counters(&l.metrics))
    {
        let all: Vec<LaunchVerdict> = launches.iter().map(|l| classify(&l.metrics)).collect();
        let which = (0..all.len()).collect();
        return (all, which);
    }
    let classes: Vec<BottleneckClass> = launches
        .iter()
        .map(|l| crate::rules::class_without_counters(&l.metrics))
        .collect();
    let mut worded: Vec<LaunchVerdict> = Vec::new();
    let mut slot: HashMap<BottleneckClass, usize> = HashMap::new();
    for (i, class) in classes.iter().enumerate() {
        if slot.contains_key(class) {
            continue;
        }
        let longest = (i..launches.len())
            .filter(|&j| classes[j] == *class)
            .max_by(|&a, &b| {
                let d = |k: usize| launches[k].metrics.duration_ns.unwrap_or(0.0);
                d(a).total_cmp(&d(b))
            })
            .unwrap_or(i);
        slot.insert(*class, worded.len());
        worded.push(classify(&launches[longest].metrics));
    }
    let which = classes.iter().map(|c| slot[c]).collect();
    (worded, which)
}

fn build<'a>(name: &str, launches: Vec<&'a KernelLaunch>, total_ns: f64) -> KernelGroup<'a> {
    let timed: Vec<(&KernelLaunch, f64)> = launches
        .iter()
        .map(|l| (*l, l.metrics.duration_ns.unwrap_or(0.0)))
        .collect();
    let kernel_ns: f64 = timed.iter().map(|(_, d)| d).sum();
    let (worded, which) = verdicts(&launches);
    let verdicts: Vec<&LaunchVerdict> = which.iter().map(|&k| &worded[k]).collect();

    // The class carrying the most time wins; its longest launch represents it.
    let mut time_by_class: HashMap<BottleneckClass, f64> = HashMap::new();
    for ((_, d), v) in timed.iter().zip(&verdicts) {
        *time_by_class.entry(v.bottleneck.class).or_default() += d.max(1.0);
    }
    let class = time_by_class
        .iter()
        .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(c, _)| *c)
        .expect("a kernel has at least one launch");
    let rep_index = (0..launches.len())
        .filter(|&i| verdicts[i].bottleneck.class == class)
        .max_by(|&a, &b| timed[a].1.total_cmp(&timed[b].1))
        .expect("class came from these launches");
    let rep = launches[rep_index];
    let rep_verdict = verdicts[rep_index].clone();

    // Tiny kernels are judged together, as a step (see `fuse_tiny_steps`).
    let recoverable_ns = if rep_verdict.tiny {
        None
    } else {
        let parts: Vec<f64> = timed
            .iter()
            .zip(&verdicts)
            .filter_map(|((_, d), v)| Some(d * v.recoverable?))
            .collect();
        (!parts.is_empty()).then(|| parts.iter().sum())
    };
    let recoverable_method = rep_verdict.method;

    let mut findings: Vec<Finding> = Vec::new();
    for v in &verdicts {
        for f in &v.findings {
            if !findings.iter().any(|g| g.class == f.class) && f.class != class {
                // One finding per class: the first launch's evidence stands for the rest.
                findings.push(f.clone());
            }
        }
    }

    let m = |f: fn(&kopt_model::Metrics) -> Option<f64>| weighted(&timed, |l| f(&l.metrics));
    let dram_total = summed(&timed, |l| {
        Some(l.metrics.dram_bytes_read? + l.metrics.dram_bytes_write.unwrap_or(0.0))
    })
    .or_else(|| {
        // The details page gives a rate, not bytes.
        summed(&timed, |l| {
            Some(l.metrics.dram_bytes_per_s? * l.metrics.duration_ns? * 1e-9)
        })
    });
    let flops = summed(&timed, |l| {
        let mm = &l.metrics;
        Some(2.0 * mm.inst_ffma? + mm.inst_fadd.unwrap_or(0.0) + mm.inst_fmul.unwrap_or(0.0))
    });
    let n = launches.len() as f64;
    let verdict = KernelVerdict {
        name: name.to_string(),
        short_name: kernel_short_name(name),
        launches: launches.len() as u64,
        total_ns: kernel_ns,
        mean_ns: kernel_ns / n,
        pct_of_total: if total_ns > 0.0 {
            100.0 * kernel_ns / total_ns
        } else {
            0.0
        },
        grid: rep.grid.to_string(),
        block: rep.block.to_string(),
        dram_bytes_per_s: dram_total
            .filter(|_| kernel_ns > 0.0)
            .map(|b| b / (kernel_ns * 1e-9)),
        dram_bytes: dram_total.map(|b| b / n),
        memory_sol_pct: weighted(&timed, |l| {
            (!crate::rules::has_no_counters(&l.metrics))
                .then(|| crate::rules::Signals::of(&l.metrics).m)
        }),
        dram_sol_pct: m(|x| x.dram_pct),
        compute_sol_pct: m(|x| x.sm_pct),
        tensor_pct: m(|x| x.tensor_pct),
        occupancy_achieved_pct: m(|x| x.occupancy_achieved_pct),
        occupancy_theoretical_pct: m(|x| x.occupancy_theoretical_pct),
        occupancy_limiter: occupancy_limiter(&rep.metrics).map(str::to_string),
        arithmetic_intensity: match (flops, dram_total) {
            (Some(f), Some(b)) if b > 0.0 && f > 0.0 => Some(f / b),
            _ => None,
        },
        fp32_flops_per_s: flops
            .filter(|f| *f > 0.0 && kernel_ns > 0.0)
            .map(|f| f / (kernel_ns * 1e-9)),
        bottleneck: rep_verdict.bottleneck,
        root_cause: crate::rules::with_partial_evidence(
            &rep_verdict.root_cause,
            rep_verdict.bottleneck.class,
            &rep.metrics,
        ),
        findings,
        ncu_disagreement: None,
        checks_not_run: crate::rules::checks_not_run(&rep.metrics),
        ops: Vec::new(),
        library: crate::library::classify(name),
        covered_by: None,
    };
    let mut group = KernelGroup {
        verdict,
        launches,
        representative: rep,
        representative_verdict: rep_verdict,
        recoverable_ns,
        recoverable_method,
        tiny: false,
    };
    group.tiny = group.representative_verdict.tiny;
    group.verdict.ncu_disagreement = disagreement(&group);
    group
}

/// How the tiny launches' GPU time could shrink if each step's tiny launches
/// became one kernel. Counters carry no iteration structure, so the step
/// count is taken as the median launch count of the tiny kernels (a kernel
/// launched once per step; one-off set-up kernels do not move a median):
/// saved = tiny time x (1 - steps / tiny launches).
/// Returns (steps, saved share of tiny time), or None when nothing would fuse.
pub fn tiny_step_model(groups: &[KernelGroup]) -> Option<(u64, f64)> {
    let tiny: Vec<&KernelGroup> = groups.iter().filter(|g| g.tiny).collect();
    let launches: u64 = tiny.iter().map(|g| g.verdict.launches).sum();
    let mut counts: Vec<u64> = tiny.iter().map(|g| g.verdict.launches).collect();
    counts.sort_unstable();
    let steps = *counts.get(counts.len() / 2)?;
    let share = 1.0 - steps as f64 / launches as f64;
    (share > 0.0).then_some((steps, share))
}

pub const TINY_STEP_METHOD: &str = "if each step's tiny launches became one kernel (steps = median launch count of the tiny kernels), all but one launch's GPU time per step is saved; the host launch cost comes on top and needs a timeline";
/// The same where a timeline was given (its graph-capture figures cover the host cost).
pub const TINY_STEP_METHOD_TIMED: &str = "if each step's tiny launches became one kernel (steps = median launch count of the tiny kernels), all but one launch's GPU time per step is saved; the host launch cost comes on top (see the timeline)";

/// Give tiny kernels their share of the fused-step saving.
pub fn fuse_tiny_steps(groups: &mut [KernelGroup]) {
    if let Some((_, share)) = tiny_step_model(groups) {
        for g in groups.iter_mut().filter(|g| g.tiny) {
            g.recoverable_ns = Some(g.verdict.total_ns * share);
            g.recoverable_method = TINY_STEP_METHOD;
        }
    }
}

/// Two template instances can shorten to the same name; number them.
fn disambiguate_short_names(groups: &mut [KernelGroup]) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for g in groups.iter_mut() {
        let n = seen.entry(g.verdict.short_name.clone()).or_insert(0);
        *n += 1;
        if *n > 1 {
            g.verdict.short_name = format!("{} #{}", g.verdict.short_name, n);
        }
    }
}
