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

pub fn group(launches: &[KernelLaunch], total_ns: f64) -> Vec<KernelGroup<'_>> {
    let mut order: Vec<&str> = Vec::new();
    let mut by_name: rustc_hash::FxHashMap<&str, Vec<&KernelLaunch>> = Default::default();
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
    let Counts {
        bytes,
        flops,
        unjoined,
    } = counts(&timed);
    let rate = |a: Option<(f64, f64, f64)>| {
        a.filter(|(v, t, _)| *v > 0.0 && *t > 0.0)
            .map(|(v, t, _)| v / (t * 1e-9))
    };
    let dram_total = bytes.map(|(b, _, _)| b);
    let mut checks_not_run = crate::rules::checks_not_run(&rep.metrics);
    if unjoined {
        checks_not_run.push("bandwidth and FLOP/s: the counters come from a launch of another configuration (grid/block) of this kernel, so no rate is shown (profile this configuration to get one)".into());
    }
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
        dram_bytes_per_s: rate(bytes),
        dram_bytes: bytes.map(|(b, _, k)| b / k),
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
        arithmetic_intensity: match (flops.map(|f| f.0), dram_total) {
            (Some(f), Some(b)) if b > 0.0 && f > 0.0 => Some(f / b),
            _ => None,
        },
        fp32_flops_per_s: rate(flops),
        bottleneck: rep_verdict.bottleneck,
        root_cause: crate::rules::with_partial_evidence(
            &rep_verdict.root_cause,
            rep_verdict.bottleneck.class,
            &rep.metrics,
        ),
        findings,
        ncu_disagreement: None,
        checks_not_run,
        ops: Vec::new(),
        library: crate::library::classify(name),
        covered_by: None,
        evidence: crate::rules::evidence(&rep.metrics),
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
    group.verdict.ncu_disagreement = disagreement(&group.launches, &group.verdict);
    group
}

/// A count summed over the launches that have it, the time paired with
/// it, and how many launches: (count, ns, launches).
type Paired = Option<(f64, f64, f64)>;

/// DRAM bytes and FP32 FLOPs of a kernel's launches, each with its paired
/// time; `unjoined` where only launches of another configuration had them.
struct Counts {
    bytes: Paired,
    flops: Paired,
    unjoined: bool,
}

fn counts(timed: &[(&KernelLaunch, f64)]) -> Counts {
    // Rates come from counts and durations of the same launches: a launch
    // whose counters were copied from its configuration's sample pairs with
    // the sample's time; one copied from another configuration is not joined.
    let joined: Vec<(&KernelLaunch, f64)> = timed
        .iter()
        .filter(|(l, _)| !l.metrics.counters_from_other_config)
        .map(|(l, d)| (*l, l.metrics.counters_duration_ns.unwrap_or(*d)))
        .collect();
    let bytes_of = |l: &KernelLaunch| {
        Some(l.metrics.dram_bytes_read? + l.metrics.dram_bytes_write.unwrap_or(0.0))
    };
    let flops_of = |l: &KernelLaunch| {
        let mm = &l.metrics;
        Some(2.0 * mm.inst_ffma? + mm.inst_fadd.unwrap_or(0.0) + mm.inst_fmul.unwrap_or(0.0))
    };
    // (count, paired time, launches) over the joined launches that have it.
    let paired = |f: &dyn Fn(&KernelLaunch) -> Option<f64>| {
        let mut acc: Paired = None;
        for (l, d) in &joined {
            if let Some(v) = f(l) {
                let a = acc.get_or_insert((0.0, 0.0, 0.0));
                a.0 += v;
                a.1 += d;
                a.2 += 1.0;
            }
        }
        acc
    };
    let bytes = paired(&bytes_of).or_else(|| {
        // The details page gives a rate, not bytes.
        paired(&|l: &KernelLaunch| {
            Some(
                l.metrics.dram_bytes_per_s?
                    * l.metrics.counters_duration_ns.or(l.metrics.duration_ns)?
                    * 1e-9,
            )
        })
    });
    let flops = paired(&flops_of);
    let unjoined = bytes.is_none()
        && flops.is_none()
        && timed.iter().any(|(l, _)| {
            l.metrics.counters_from_other_config
                && (bytes_of(l).is_some()
                    || flops_of(l).is_some()
                    || l.metrics.dram_bytes_per_s.is_some())
        });
    Counts {
        bytes,
        flops,
        unjoined,
    }
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

/// The groups whose kernel is one of `names`, in the groups' order (by a
/// set: tens of thousands of names are looked up once each).
pub fn groups_named<'g, 'p>(
    groups: &'g [KernelGroup<'p>],
    names: &[String],
) -> Vec<&'g KernelGroup<'p>> {
    let names: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
    groups
        .iter()
        .filter(|g| names.contains(g.verdict.name.as_str()))
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use kopt_model::{Dim3, Metrics};

    // Synthetic: one kernel at two launch configurations, as `kopt profile`
    // merges them: each launch keeps its own (trace) time; counters were
    // copied from the targeted pass's sample of each configuration.
    fn launch(
        id: u64,
        grid: u32,
        own_ns: f64,
        bytes: f64,
        sample_ns: f64,
        other: bool,
    ) -> KernelLaunch {
        KernelLaunch {
            id,
            name: "conv_like".into(),
            grid: Dim3 {
                x: grid,
                y: 1,
                z: 1,
            },
            block: Dim3 { x: 256, y: 1, z: 1 },
            stream: None,
            metrics: Metrics {
                duration_ns: Some(own_ns),
                dram_bytes_read: Some(bytes),
                dram_bytes_write: Some(0.0),
                counters_duration_ns: Some(sample_ns),
                counters_from_other_config: other,
                ..Default::default()
            },
            ncu_rules: Vec::new(),
        }
    }

    #[test]
    fn rates_pair_counts_with_the_time_of_the_launches_they_came_from() {
        // 4 MB in 2 us under ncu (2 TB/s); the traced launch ran 1 us (warm
        // cache): bytes over the trace's time would claim 4 TB/s.
        let l = [launch(0, 100, 1_000.0, 4e6, 2_000.0, false)];
        let g = group(&l, 1_000.0);
        let bw = g[0].verdict.dram_bytes_per_s.unwrap();
        assert!((bw - 2e12).abs() < 1e3, "{bw}");
        assert_eq!(g[0].verdict.dram_bytes, Some(4e6));
    }

    #[test]
    fn counters_of_another_configuration_give_no_rate_and_say_so() {
        // The large configuration's 40 MB, copied onto a small
        // configuration's 5 us launches, would read 8 TB/s.
        let l = [
            launch(0, 10, 5_000.0, 40e6, 20_000.0, true),
            launch(1, 10, 5_000.0, 40e6, 20_000.0, true),
        ];
        let g = group(&l, 10_000.0);
        assert_eq!(g[0].verdict.dram_bytes_per_s, None);
        assert!(
            g[0].verdict
                .checks_not_run
                .iter()
                .any(|c| c.contains("another configuration")),
            "{:?}",
            g[0].verdict.checks_not_run
        );
        // Mixed: only the joined configuration's launches make the rate.
        let l = [
            launch(0, 100, 20_000.0, 40e6, 20_000.0, false),
            launch(1, 10, 5_000.0, 40e6, 20_000.0, true),
        ];
        let g = group(&l, 25_000.0);
        let bw = g[0].verdict.dram_bytes_per_s.unwrap();
        assert!((bw - 2e12).abs() < 1e3, "{bw}");
    }
}
