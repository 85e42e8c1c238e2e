//! A distributed job from its ranks' timelines: each rank reduced on its
//! own ([`rank_profile`], so traces can be read and dropped one by one),
//! then compared ([`diagnose_ranks`]): GPU time per rank (compute,
//! communication, overlap, exposed communication, idle), collectives with
//! their bus bandwidth, the rank the others wait for, and priced changes.

mod advice;
pub mod collective;
mod cross;
mod profile;

use std::collections::BTreeMap;

use kopt_model::{
    CollectiveOp, CollectiveRow, PredictedSpeedup, RankAdvice, RanksDiagnosis, Straggler,
};

pub use profile::{rank_profile, CollectiveLaunch, RankProfile};

use advice::StepView;
use cross::{last_arrivals, match_collectives, Matched};

/// The GPU's peer link, bytes/s each way, by its name: NVLink's peak per
/// GPU (A100 12 links, H100/H200 18, B200 18 of NVLink 5); PCIe 5 x16
/// otherwise. Used to tell a launch's fixed cost from its transfer and to
/// say when the bus runs far below the link.
pub fn link_peak(device: Option<&str>) -> (f64, &'static str) {
    let name = device.unwrap_or("").to_ascii_uppercase();
    if ["H100", "H200", "H800", "H20", "GH200"]
        .iter()
        .any(|g| name.contains(g))
        && !name.contains("PCIE")
    {
        (450e9, "NVLink 4 (900 GB/s both ways)")
    } else if ["B200", "B100", "GB200"].iter().any(|g| name.contains(g)) {
        (900e9, "NVLink 5 (1.8 TB/s both ways)")
    } else if name.contains("A100") && !name.contains("PCIE") {
        (300e9, "NVLink 3 (600 GB/s both ways)")
    } else {
        (64e9, "PCIe 5 x16 (the link is not known: assumed)")
    }
}

/// A rank named straggler arrives last at this share of the collectives
/// whose spread is worth naming, at least.
const STRAGGLER_SHARE: f64 = 0.6;

fn ms(ns: f64) -> String {
    format!("{:.2} ms", ns / 1e6)
}

/// The job's step: the slowest rank's median step, else its span.
fn job_step(profiles: &[RankProfile]) -> f64 {
    profiles
        .iter()
        .map(|p| p.row.step_ns.unwrap_or(p.row.span_ns as f64))
        .fold(0.0, f64::max)
}

/// The profile that waited least at the collectives: its kernels are
/// mostly transfer.
fn reference(profiles: &[RankProfile], matched: &[Matched]) -> usize {
    (0..profiles.len())
        .min_by_key(|&r| matched.iter().map(|m| m.waits[r]).sum::<i64>())
        .unwrap_or(0)
}

/// The collective table of one profile, by op and element type.
fn collective_rows(
    p: &RankProfile,
    matched: &[Matched],
    at: usize,
    world: u32,
) -> Vec<CollectiveRow> {
    let transfer: BTreeMap<usize, i64> = matched
        .iter()
        .map(|m| (m.index[at], m.transfer_ns))
        .collect();
    let mut groups: BTreeMap<(CollectiveOp, Option<&str>), Vec<usize>> = BTreeMap::new();
    for (i, c) in p.collectives.iter().enumerate() {
        groups.entry((c.op, c.dtype)).or_default().push(i);
    }
    groups
        .into_iter()
        .map(|((op, dtype), idx)| {
            let launches: Vec<&CollectiveLaunch> = idx.iter().map(|&i| &p.collectives[i]).collect();
            let sized: Vec<(u64, i64)> = idx
                .iter()
                .filter_map(|&i| {
                    let c = &p.collectives[i];
                    c.bytes
                        .map(|b| (b, *transfer.get(&i).unwrap_or(&(c.end_ns - c.start_ns))))
                })
                .collect();
            let bytes = (sized.len() == launches.len()).then(|| sized.iter().map(|s| s.0).sum());
            let median_bytes = (!sized.is_empty()).then(|| {
                let mut b: Vec<u64> = sized.iter().map(|s| s.0).collect();
                b.sort_unstable();
                b[b.len() / 2] as f64
            });
            let bus = {
                let (b, t) = sized
                    .iter()
                    .fold((0.0, 0.0), |(b, t), s| (b + s.0 as f64, t + s.1 as f64));
                (t > 0.0).then(|| b / (t * 1e-9) * collective::bus_factor(op, world))
            };
            CollectiveRow {
                op,
                dtype: dtype.map(str::to_string),
                algorithm: launches.iter().find_map(|c| c.algorithm.clone()),
                count: launches.len() as u64,
                per_step: (p.row.steps > 0).then(|| launches.len() as f64 / p.row.steps as f64),
                total_ns: launches.iter().map(|c| c.end_ns - c.start_ns).sum(),
                bytes,
                median_bytes,
                bus_bytes_per_s: bus,
            }
        })
        .collect()
}

/// The rank the others wait for, and why, from its own timeline.
fn straggler(
    profiles: &[RankProfile],
    matched: &[Matched],
    step_ns: f64,
) -> Option<(usize, Straggler, f64)> {
    let min_skew = (step_ns * 0.005) as i64;
    let arrivals = last_arrivals(matched, profiles.len(), min_skew);
    let counted: u64 = arrivals.iter().map(|a| a.0).sum();
    let (at, &(last, waited)) = arrivals.iter().enumerate().max_by_key(|(_, a)| a.0)?;
    let steps = profiles[at].row.steps.max(1) as f64;
    let wait_per_step = waited as f64 / steps;
    if counted == 0
        || (last as f64) < STRAGGLER_SHARE * counted as f64
        || wait_per_step < 0.03 * step_ns
    {
        return None;
    }
    let others: Vec<&RankProfile> = profiles
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != at)
        .map(|(_, p)| p)
        .collect();
    let median = |f: &dyn Fn(&RankProfile) -> f64| {
        let mut v: Vec<f64> = others.iter().map(|p| f(p)).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let per_step = |p: &RankProfile, x: f64| x / p.row.steps.max(1) as f64;
    let me = &profiles[at];
    let extra_compute =
        per_step(me, me.row.compute_ns as f64) - median(&|p| per_step(p, p.row.compute_ns as f64));
    let extra_kernels = (per_step(me, me.compute_kernels as f64)
        - median(&|p| per_step(p, p.compute_kernels as f64)))
    .round() as i64;
    let host_gap = me.steps_host_ns.unwrap_or(0.0) - median(&|p| p.steps_host_ns.unwrap_or(0.0));
    let cause = if extra_compute >= 0.5 * wait_per_step {
        format!(
            "more GPU work: its compute kernels take {} more a step than the others' ({extra_kernels:+} kernels a step)",
            ms(extra_compute)
        )
    } else if host_gap >= 0.5 * wait_per_step {
        format!(
            "a slower host: its GPU sits idle {} more a step waiting for work (input pipeline, Python, launches)",
            ms(host_gap)
        )
    } else {
        "not in its GPU timeline: compute and idle time match the others' (look at its host: data loading, CPU contention)".into()
    };
    let matched_n = matched
        .iter()
        .filter(|m| m.skew_ns > min_skew)
        .count()
        .max(1);
    let mut waits: Vec<i64> = matched
        .iter()
        .filter(|m| m.skew_ns > min_skew && m.last == at)
        .map(|m| m.skew_ns)
        .collect();
    waits.sort_unstable();
    Some((
        at,
        Straggler {
            rank: me.row.rank,
            last_arrival_pct: 100.0 * last as f64 / matched_n as f64,
            median_wait_ns: waits.get(waits.len() / 2).copied().unwrap_or(0) as f64,
            extra_compute_ns: extra_compute,
            extra_kernels,
            cause,
        },
        wait_per_step,
    ))
}

fn imbalance_advice(s: &Straggler, wait_per_step: f64, step_ns: f64) -> RankAdvice {
    let saved = if s.extra_compute_ns > 0.0 {
        s.extra_compute_ns.min(wait_per_step)
    } else {
        wait_per_step
    };
    let at = |x: f64| step_ns / (step_ns - x.clamp(0.0, step_ns * 0.95));
    RankAdvice {
        rank: 0,
        id: "rank_imbalance".into(),
        title: format!("Balance rank {}'s work", s.rank),
        evidence: format!(
            "rank {} enters {:.0}% of the collectives last; the others wait {} a step for it; cause: {}",
            s.rank,
            s.last_arrival_pct,
            ms(wait_per_step),
            s.cause
        ),
        action: "give every rank the same work (shard sizes, sequence lengths, extra work on one rank such as logging or evaluation), or move the extra work off the step".into(),
        predicted_speedup: Some(PredictedSpeedup {
            estimate: at(saved),
            low: at(0.5 * saved),
            high: at(wait_per_step.max(saved)),
            model: "the straggler's extra time a step taken off the others' wait".into(),
        }),
    }
}

/// Large messages moving far below the link's peak: reported, not changed
/// (topology and NCCL settings are the host's).
fn slow_bus(rows: &[CollectiveRow], device: Option<&str>) -> Option<String> {
    let (peak, link) = link_peak(device);
    let (row, bus) = rows
        .iter()
        .filter(|r| r.median_bytes.is_some_and(|b| b >= 16e6))
        .filter_map(|r| Some((r, r.bus_bytes_per_s?)))
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    (device.is_some() && bus < 0.4 * peak).then(|| {
        format!(
            "{} of median {:.0} MB moves at {} GB/s bus bandwidth, {:.0}% of {link}: check the topology (nvidia-smi topo -m: are the GPUs on NVLink?) and NCCL's choices (NCCL_DEBUG=INFO; NCCL_P2P_DISABLE, NCCL_ALGO, NCCL_PROTO left at their defaults?). kopt does not change them.",
            row.op.as_str(),
            row.median_bytes.unwrap_or(0.0) / 1e6,
            kopt_model::figure::figure(bus / 1e9, 0),
            100.0 * bus / peak
        )
    })
}

/// The job's diagnosis from its ranks' profiles (any order).
pub fn diagnose_ranks(mut profiles: Vec<RankProfile>) -> RanksDiagnosis {
    profiles.sort_by_key(|p| p.row.rank);
    let world = profiles
        .iter()
        .find_map(|p| p.world_size)
        .unwrap_or(profiles.len() as u32);
    let (matched, _) = match_collectives(&profiles);
    let step_ns = job_step(&profiles);
    let mut notes = Vec::new();
    if (profiles.len() as u32) < world {
        notes.push(format!(
            "{} of {world} ranks' traces given: stragglers and skew are judged among these only",
            profiles.len()
        ));
    }
    if profiles.iter().all(|p| p.collectives.is_empty()) {
        notes.push("no communication kernel (NCCL/RCCL) in any rank's trace: nothing to say about communication".into());
    } else if profiles
        .iter()
        .flat_map(|p| &p.collectives)
        .all(|c| c.bytes.is_none())
    {
        notes.push("the traces give no message sizes (torch writes them on NCCL kernels from 2.1 on): no bus bandwidth and no bucket finding".into());
    }
    let at = reference(&profiles, &matched);
    let mut recs = Vec::new();
    let straggler = (!matched.is_empty() && step_ns > 0.0)
        .then(|| straggler(&profiles, &matched, step_ns))
        .flatten();
    if let Some((_, s, wait)) = &straggler {
        recs.push(imbalance_advice(s, *wait, step_ns));
    }
    // A job without a step's length (one instant kernel) prices nothing.
    if let Some(reference) = profiles.get(at).filter(|_| step_ns > 0.0) {
        let view = StepView {
            step_ns,
            steps: reference.row.steps.max(1) as f64,
            reference,
            matched: &matched,
            reference_at: at,
            link_bytes_per_s: link_peak(reference.device_name.as_deref()).0,
        };
        recs.extend(
            [
                advice::bucket_size(&view),
                advice::bf16_compression(&view),
                advice::fsdp_prefetch(&view),
                advice::find_unused(&view),
            ]
            .into_iter()
            .flatten(),
        );
    }
    let gain = |r: &RankAdvice| r.predicted_speedup.as_ref().map_or(1.0, |p| p.estimate);
    recs.sort_by(|a, b| gain(b).total_cmp(&gain(a)));
    for (i, r) in recs.iter_mut().enumerate() {
        r.rank = i + 1;
    }
    let collectives = profiles
        .get(at)
        .map(|p| collective_rows(p, &matched, at, world))
        .unwrap_or_default();
    let device_name = profiles.iter().find_map(|p| p.device_name.clone());
    notes.extend(slow_bus(&collectives, device_name.as_deref()));
    let mut skews: Vec<i64> = matched.iter().map(|m| m.skew_ns).collect();
    skews.sort_unstable();
    RanksDiagnosis {
        schema: kopt_model::ranks::RANKS_SCHEMA.into(),
        world_size: world,
        device_name,
        collectives,
        ranks: profiles.iter().map(|p| p.row.clone()).collect(),
        matched_collectives: matched.len() as u64,
        median_skew_ns: skews.get(skews.len() / 2).map(|&s| s as f64),
        straggler: straggler.map(|(_, s, _)| s),
        recommendations: recs,
        notes,
    }
}
