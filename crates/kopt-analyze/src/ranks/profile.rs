//! One rank's timeline reduced to what the cross-rank analysis needs: the
//! breakdown of its GPU time and its collectives in order. Small enough
//! that a job's thousands of ranks fit in memory once their traces are
//! dropped.

use kopt_model::{ActivityKind, CollectiveOp, RankRow, Timeline};

use super::collective::{is_comm_kernel, parse};
use crate::timeline::median;

/// One collective kernel on one rank.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectiveLaunch {
    pub op: CollectiveOp,
    pub start_ns: i64,
    pub end_ns: i64,
    pub bytes: Option<u64>,
    pub dtype: Option<&'static str>,
    pub algorithm: Option<String>,
    /// Time of it with no compute kernel beside it, ns.
    pub exposed_ns: i64,
}

/// A rank, reduced.
#[derive(Debug, Clone, PartialEq)]
pub struct RankProfile {
    pub row: RankRow,
    pub world_size: Option<u32>,
    pub device_name: Option<String>,
    pub collectives: Vec<CollectiveLaunch>,
    /// Compute kernels (count) per step, and the union of their time per
    /// step; over the whole span when no steps are marked.
    pub compute_kernels: u64,
    /// Host time inside steps with no kernel running on the GPU, ns:
    /// a slow host shows here.
    pub steps_host_ns: Option<f64>,
}

/// Sorted, disjoint intervals.
type Union = Vec<(i64, i64)>;

fn union(mut v: Vec<(i64, i64)>) -> Union {
    v.sort_unstable();
    let mut out: Union = Vec::with_capacity(v.len());
    for (s, e) in v {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

fn measure(u: &Union) -> i64 {
    u.iter().map(|(s, e)| e - s).sum()
}

/// Time `[s, e)` spends inside `u` (a sorted disjoint union), found from
/// `from` on: the caller walks `s` upwards, so the search never goes back.
fn covered(u: &Union, from: &mut usize, s: i64, e: i64) -> i64 {
    while *from < u.len() && u[*from].1 <= s {
        *from += 1;
    }
    let mut i = *from;
    let mut t = 0;
    while i < u.len() && u[i].0 < e {
        t += u[i].1.min(e) - u[i].0.max(s);
        i += 1;
    }
    t
}

/// How much of `a` lies inside `b`, both sorted disjoint unions.
fn intersection(a: &Union, b: &Union) -> i64 {
    let mut from = 0;
    a.iter().map(|&(s, e)| covered(b, &mut from, s, e)).sum()
}

/// The step ranges the trace marks (`ProfilerStep#N`, NVTX steps).
fn steps(t: &Timeline) -> Vec<(i64, i64)> {
    let mut v: Vec<(i64, i64)> = t
        .ranges
        .iter()
        .filter(|r| r.end_ns > r.start_ns)
        .map(|r| (r.start_ns, r.end_ns))
        .collect();
    v.sort_unstable();
    v
}

/// A whole-program trace (kopt's tracer records set-up and warm-up too)
/// with marked steps: the correlations of the launches made inside a step,
/// so the breakdown covers the steps alone. None (keep all) for a trace
/// that covers only what its profiler chose, or without steps.
fn launched_in_steps(t: &Timeline) -> Option<std::collections::HashSet<u64>> {
    let steps = steps(t);
    if !t.whole_program || steps.is_empty() {
        return None;
    }
    let inside = |at: i64| {
        let i = steps.partition_point(|s| s.0 <= at);
        i > 0 && at < steps[i - 1].1
    };
    let keep: std::collections::HashSet<u64> = t
        .api_calls
        .iter()
        .filter(|c| c.correlation != 0 && inside(c.start_ns))
        .map(|c| c.correlation)
        .collect();
    (!keep.is_empty()).then_some(keep)
}

/// One rank's profile from its timeline; `source` names its trace.
pub fn rank_profile(t: &Timeline, source: &str) -> RankProfile {
    let (mut comm, mut compute, mut memory, mut all) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut collectives = Vec::new();
    let (mut compute_kernels, mut kept) = (0u64, 0u64);
    let in_steps = launched_in_steps(t);
    for a in t
        .activities
        .iter()
        .filter(|a| a.end_ns >= a.start_ns)
        .filter(|a| {
            in_steps
                .as_ref()
                .is_none_or(|keep| keep.contains(&a.correlation))
        })
    {
        let span = (a.start_ns, a.end_ns);
        kept += 1;
        all.push(span);
        match a.kind {
            ActivityKind::Memcpy | ActivityKind::Memset => memory.push(span),
            ActivityKind::Kernel if is_comm_kernel(&a.name) => {
                comm.push(span);
                let name = parse(&a.name);
                collectives.push(CollectiveLaunch {
                    op: name.op,
                    start_ns: a.start_ns,
                    end_ns: a.end_ns,
                    bytes: a.bytes,
                    dtype: name.dtype,
                    algorithm: name.algorithm,
                    exposed_ns: 0,
                });
            }
            ActivityKind::Kernel => {
                compute_kernels += 1;
                compute.push(span);
            }
        }
    }
    let (comm, compute, memory, all) = (union(comm), union(compute), union(memory), union(all));
    collectives.sort_by_key(|c| (c.start_ns, c.end_ns));
    let mut from = 0;
    for c in &mut collectives {
        let hidden = covered(&compute, &mut from, c.start_ns, c.end_ns);
        c.exposed_ns = (c.end_ns - c.start_ns - hidden).max(0);
    }
    let span_ns = match (all.first(), all.last()) {
        (Some(f), Some(l)) => l.1 - f.0,
        _ => 0,
    };
    let comm_ns = measure(&comm);
    let overlapped = intersection(&comm, &compute);
    let steps = steps(t);
    let step_ns = (steps.len() >= 2)
        .then(|| median(steps.iter().map(|(s, e)| (e - s) as f64).collect()))
        .flatten();
    let busy_in_steps: i64 = {
        let mut from = 0;
        steps
            .iter()
            .map(|&(s, e)| covered(&all, &mut from, s, e))
            .sum()
    };
    let steps_host_ns = (!steps.is_empty()).then(|| {
        let total: i64 = steps.iter().map(|(s, e)| e - s).sum();
        (total - busy_in_steps).max(0) as f64 / steps.len() as f64
    });
    let rank = t.rank.map_or(0, |r| r.rank);
    RankProfile {
        row: RankRow {
            rank,
            source: source.to_string(),
            span_ns,
            steps: steps.len(),
            step_ns,
            compute_ns: measure(&compute),
            comm_ns,
            memory_ns: measure(&memory),
            overlapped_comm_ns: overlapped,
            exposed_comm_ns: comm_ns - overlapped,
            idle_ns: span_ns - measure(&all),
            overlap_pct: if comm_ns > 0 {
                100.0 * overlapped as f64 / comm_ns as f64
            } else {
                0.0
            },
            kernels: kept,
            collectives: collectives.len() as u64,
        },
        world_size: t.rank.and_then(|r| r.world_size),
        device_name: t.device_name.clone(),
        collectives,
        compute_kernels,
        steps_host_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kopt_model::{GpuActivity, Range, RankInfo};

    pub(crate) fn kernel(name: &str, s: i64, e: i64, stream: u64) -> GpuActivity {
        GpuActivity {
            kind: ActivityKind::Kernel,
            name: name.into(),
            start_ns: s,
            end_ns: e,
            device: 0,
            stream,
            correlation: 0,
            grid: None,
            block: None,
            bytes: None,
            copy: None,
        }
    }

    #[test]
    fn a_whole_program_trace_counts_its_steps_launches_only() {
        use kopt_model::{ApiCall, ApiKind};
        let launch = |s: i64, c: u64| ApiCall {
            kind: ApiKind::of("cudaLaunchKernel"),
            name: "cudaLaunchKernel".into(),
            start_ns: s,
            end_ns: s + 1,
            thread: 1,
            correlation: c,
            frame: None,
            op: None,
            op_span: None,
        };
        let mut warm = kernel("warmup_gemm", 0, 50, 7);
        warm.correlation = 1;
        let mut inside = kernel("gemm", 110, 150, 7);
        inside.correlation = 2;
        let t = Timeline {
            activities: vec![warm, inside],
            api_calls: vec![launch(0, 1), launch(105, 2)],
            ranges: vec![Range {
                name: "ProfilerStep#0".into(),
                start_ns: 100,
                end_ns: 140,
                thread: None,
            }],
            whole_program: true,
            ..Timeline::default()
        };
        let p = rank_profile(&t, "trace.jsonl");
        assert_eq!(p.row.kernels, 1);
        assert_eq!(p.row.compute_ns, 40, "the warm-up kernel is left out");
    }

    #[test]
    fn overlap_is_communication_under_compute() {
        // compute 0-100 and 150-200; all-reduce 80-160: 20 + 10 hidden, 30 exposed.
        let t = Timeline {
            activities: vec![
                kernel("gemm", 0, 100, 7),
                kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", 80, 160, 9),
                kernel("gemm", 150, 200, 7),
            ],
            ranges: vec![
                Range {
                    name: "ProfilerStep#1".into(),
                    start_ns: 0,
                    end_ns: 100,
                    thread: None,
                },
                Range {
                    name: "ProfilerStep#2".into(),
                    start_ns: 100,
                    end_ns: 220,
                    thread: None,
                },
            ],
            rank: Some(RankInfo {
                rank: 1,
                world_size: Some(2),
            }),
            ..Timeline::default()
        };
        let p = rank_profile(&t, "r1.json");
        assert_eq!(p.row.rank, 1);
        assert_eq!(p.row.comm_ns, 80);
        assert_eq!(p.row.compute_ns, 150);
        assert_eq!(p.row.overlapped_comm_ns, 30);
        assert_eq!(p.row.exposed_comm_ns, 50);
        assert_eq!(p.row.idle_ns, 0);
        assert!((p.row.overlap_pct - 37.5).abs() < 1e-9);
        assert_eq!(p.collectives[0].exposed_ns, 50);
        assert_eq!(p.row.step_ns, Some(110.0));
        assert_eq!(p.steps_host_ns, Some(10.0), "200-220 had no kernel");
    }
}
