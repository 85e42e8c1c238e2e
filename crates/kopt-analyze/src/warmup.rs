//! Warm-up and autotuning trials: kernels launched only before the steady
//! state and never again. cuDNN's algorithm search
//! (`torch.backends.cudnn.benchmark = True`) runs every candidate algorithm
//! of each convolution once or twice on the first call; Triton's autotuner
//! and torch.compile's first calls do the same with their configurations.
//! Those launches are not the workload: their advice would be about code
//! that never runs again.
//!
//! Two kinds of evidence, the strongest first:
//! - a timeline with steps: every launch of the kernel (name and launch
//!   configuration) falls in the warm-up steps the steady state cuts, none
//!   in the start-up before the first step (the program's set-up: its
//!   input, `torch.randn`'s kernel) and none in or after the steady state.
//!   Steps found only as a repeating pattern of one kernel are no evidence
//!   (every launch of that kernel is a "step");
//! - launch records in order without a timeline (an ncu capture): the
//!   workload repeats N times (most kernels launched a multiple of N times),
//!   and the kernel ran fewer than N times, all inside the first iteration
//!   (after its first kernel of the workload, before its last: kernels
//!   before the loop may set up its input and are kept). Without clear
//!   repetition nothing is left out.

use std::collections::{HashMap, HashSet};

use kopt_model::{
    kernel_short_name, ActivityKind, Dim3, KernelLaunch, Profile, StepSource, Timeline,
    WarmupEvidence, WarmupKernel, WarmupTrials,
};

use crate::timeline::{self, Phase};

/// A kernel as a trial is known: name and launch configuration (the
/// configuration is the default where the input records none).
pub type Key = (String, Dim3, Dim3);

/// The trials found, and how to tell their launches.
#[derive(Debug, Clone)]
pub struct Found {
    pub trials: WarmupTrials,
    /// Trial launch configurations by kernel name: looked up by a borrowed
    /// name, once per launch.
    keys: HashMap<String, HashSet<(Dim3, Dim3)>>,
}

impl Found {
    pub fn is_trial(&self, name: &str, grid: Dim3, block: Dim3) -> bool {
        self.keys
            .get(name)
            .is_some_and(|configs| configs.contains(&(grid, block)))
    }

    pub fn is_trial_launch(&self, l: &KernelLaunch) -> bool {
        self.is_trial(&l.name, l.grid, l.block)
    }

    pub fn is_trial_activity(&self, a: &kopt_model::GpuActivity) -> bool {
        a.kind == ActivityKind::Kernel
            && self.is_trial(
                &a.name,
                a.grid.unwrap_or_default(),
                a.block.unwrap_or_default(),
            )
    }
}

/// Fewest steady steps for the timeline evidence: one step alone says
/// nothing about what repeats.
const MIN_STEADY_STEPS: usize = 2;

/// Fewest iterations for the launch-count evidence.
const MIN_ITERATIONS: u64 = 3;

/// Share of the launches (trial candidates aside) that must belong to the
/// kernels that recur to the end of the capture.
const MIN_REPEATING_SHARE: f64 = 0.8;

/// The warm-up trials of a profile, None when there are none or the
/// evidence is not clear.
pub fn find(profile: &Profile) -> Option<Found> {
    match &profile.timeline {
        Some(t) => from_timeline(t, timeline::phases(t)?),
        None => from_launch_order(&profile.launches),
    }
}

/// `find` with the timeline's window already built (from
/// `profile.timeline`'s spliced form), so its steps are not found again.
pub fn find_in(profile: &Profile, window: Option<&timeline::Window>) -> Option<Found> {
    match (&profile.timeline, window) {
        (Some(t), Some(w)) => from_timeline(t, w.phases()?),
        (Some(_), None) => None,
        (None, _) => from_launch_order(&profile.launches),
    }
}

#[derive(Default)]
struct Tally {
    launches: u64,
    ns: f64,
    all_before: bool,
    seen: bool,
}

fn from_timeline(t: &Timeline, p: timeline::Phases) -> Option<Found> {
    if p.steady_steps < MIN_STEADY_STEPS {
        return None;
    }

    // Keys borrow the names: a million launches of a few kernels make a
    // few owned keys, not a million copies.
    let mut by_key: HashMap<(&str, Dim3, Dim3), Tally> = HashMap::new();
    let mut order: Vec<(&str, Dim3, Dim3)> = Vec::new();
    let mut steady: HashSet<(&str, Dim3, Dim3)> = HashSet::new();
    let mut steady_launches = 0usize;
    for (a, phase) in t.activities.iter().zip(&p.phase) {
        if a.kind != ActivityKind::Kernel {
            continue;
        }
        let key = (
            a.name.as_str(),
            a.grid.unwrap_or_default(),
            a.block.unwrap_or_default(),
        );
        if *phase == Phase::Steady {
            steady.insert(key);
            steady_launches += 1;
        }
        let e = by_key.entry(key).or_insert_with(|| {
            order.push(key);
            Tally {
                all_before: true,
                ..Default::default()
            }
        });
        e.seen = true;
        e.launches += 1;
        e.ns += a.duration_ns().max(0) as f64;
        // Start-up, steady state and after are kept; only launches all in
        // the cut warm-up steps are trials.
        e.all_before &= *phase == Phase::Warmup;
    }
    // The steady state must hold kernels of its own for the contrast to mean anything.
    if by_key.values().all(|e| e.all_before) {
        return None;
    }
    // A repeating pattern of one kernel (one launch a step, or one kernel
    // over and over) is launches, not the steps of a loop: nothing to call
    // warm-up.
    if p.source == StepSource::KernelPattern
        && (steady.len() <= 1 || steady_launches <= p.steady_steps)
    {
        return None;
    }
    let how = format!(
        "every launch came in the {} warm-up step{} cut before the steady state (steps found by {}; {} steady step{}), none in the start-up before the first step and none in or after the steady state",
        p.warmup_steps,
        if p.warmup_steps == 1 { "" } else { "s" },
        timeline::step_source_words(p.source),
        p.steady_steps,
        if p.steady_steps == 1 { "" } else { "s" },
    );
    let owned = |(n, g, b): (&str, Dim3, Dim3)| (n.to_string(), g, b);
    let by_key = by_key.into_iter().map(|(k, v)| (owned(k), v)).collect();
    let order = order.into_iter().map(owned).collect();
    build(order, by_key, how, WarmupEvidence::WarmupSteps)
}

fn from_launch_order(launches: &[KernelLaunch]) -> Option<Found> {
    let mut ordered: Vec<&KernelLaunch> = launches.iter().collect();
    ordered.sort_by_key(|l| l.id);
    let mut positions: HashMap<Key, Vec<usize>> = HashMap::new();
    let mut order: Vec<Key> = Vec::new();
    for (i, l) in ordered.iter().enumerate() {
        let key = (l.name.clone(), l.grid, l.block);
        positions
            .entry(key.clone())
            .or_insert_with(|| {
                order.push(key);
                Vec::new()
            })
            .push(i);
    }
    // The iteration count: the greatest common divisor of the launch counts
    // of the kernels still running in the second half of the capture (each
    // runs a whole number of times per iteration).
    let half = ordered.len() / 2;
    let recurring: Vec<&Vec<usize>> = positions
        .values()
        .filter(|p| p.last().is_some_and(|&i| i >= half))
        .collect();
    let n = recurring.iter().map(|p| p.len() as u64).fold(0, gcd);
    if n < MIN_ITERATIONS || recurring.len() < 2 {
        return None;
    }
    // The first iteration runs from the first launch of a recurring kernel
    // to the latest first-iteration launch of one (its m-th of m*N). A
    // trial runs inside it, between the workload's own kernels; a kernel
    // before it may be the input's set-up and is kept.
    let first_start = recurring.iter().map(|p| p[0]).min()?;
    let first_end = recurring
        .iter()
        .map(|p| p[p.len() / n as usize - 1])
        .max()?;
    let candidates: HashSet<&Key> = positions
        .iter()
        .filter(|(_, p)| {
            (p.len() as u64) < n && p.iter().all(|&i| i > first_start && i < first_end)
        })
        .map(|(k, _)| k)
        .collect();
    if candidates.is_empty() {
        return None;
    }
    let rest: usize = positions
        .iter()
        .filter(|(k, _)| !candidates.contains(k))
        .map(|(_, p)| p.len())
        .sum();
    let in_recurring: usize = recurring.iter().map(|p| p.len()).sum();
    if rest == 0 || (in_recurring as f64) < MIN_REPEATING_SHARE * rest as f64 {
        return None;
    }
    let mut by_key: HashMap<Key, Tally> = HashMap::new();
    for l in &ordered {
        let key = (l.name.clone(), l.grid, l.block);
        let e = by_key.entry(key.clone()).or_default();
        e.seen = true;
        e.launches += 1;
        e.ns += l.metrics.duration_ns.unwrap_or(0.0);
        e.all_before = candidates.contains(&key);
    }
    let how = format!(
        "the capture repeats {n} times (the {} kernels still running in its second half, {:.0}% of the other launches, each ran a multiple of {n} times); each of these ran fewer than {n} times, all inside the first iteration (launches {} to {}, between the workload's own kernels), and never again",
        recurring.len(),
        100.0 * in_recurring as f64 / rest as f64,
        first_start + 1,
        first_end + 1
    );
    build(order, by_key, how, WarmupEvidence::FirstIteration)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn build(
    order: Vec<Key>,
    by_key: HashMap<Key, Tally>,
    how_found: String,
    evidence: WarmupEvidence,
) -> Option<Found> {
    let mut kernels = Vec::new();
    let mut keys: HashMap<String, HashSet<(Dim3, Dim3)>> = HashMap::new();
    for key in order {
        let Some(e) = by_key.get(&key).filter(|e| e.seen && e.all_before) else {
            continue;
        };
        let config = |d: Dim3| (d != Dim3::default()).then(|| d.to_string());
        kernels.push(WarmupKernel {
            short_name: kernel_short_name(&key.0),
            name: key.0.clone(),
            grid: config(key.1),
            block: config(key.2),
            launches: e.launches,
            total_ns: e.ns,
        });
        keys.entry(key.0).or_default().insert((key.1, key.2));
    }
    if kernels.is_empty() {
        return None;
    }
    kernels.sort_by(|a, b| b.total_ns.total_cmp(&a.total_ns));
    Some(Found {
        trials: WarmupTrials {
            launches: kernels.iter().map(|k| k.launches).sum(),
            total_ns: kernels.iter().map(|k| k.total_ns).sum(),
            kernels,
            how_found,
            evidence,
            kept: false,
        },
        keys,
    })
}
