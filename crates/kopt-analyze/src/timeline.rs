//! Timeline analysis, the same for a Kineto trace and kopt's tracer: wall vs
//! GPU-busy time, idle gaps, host launch cost against kernel duration, and
//! whether launch overhead sets the pace (seed 000's 2.35x came from that).

use std::collections::HashMap;

use kopt_model::{ApiKind, IdleGap, Timeline, TimelineSummary};

/// The GPU busy less than this share of the wall time, with kernels no longer
/// than their launches, is launch bound.
pub const LAUNCH_BOUND_BUSY_PCT: f64 = 50.0;
/// Gaps listed in the report.
const GAPS_SHOWN: usize = 5;

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The smallest period p (at least 2 repeats) with which the sequence repeats
/// itself at 90% of positions or more: `names[i] == names[i + p]` for 90% of
/// the `n - p` positions.
///
/// Checking every p position by position is quadratic (80,000 kernels whose
/// order never repeats took 26 s). Names become integer ids, and each p is
/// first bounded from above in O(1): position i can match only if some name
/// occurs both in `names[..n - p]` and in `names[p..]`, so the matches are at
/// most the sum over names of the smaller of its two counts, a sum kept up to
/// date as p grows. Only a p that bound lets through is counted, in chunks
/// that stop once too many positions differ. A trace of distinct names (or
/// of names that rarely recur) is done in linear time; one with few names
/// in an order that never repeats costs a fraction of the old count, its
/// chunks compare integers and stop after about a tenth of the positions.
pub fn repeated_period(names: &[&str]) -> Option<usize> {
    let n = names.len();
    if n < 2 {
        return None;
    }
    let mut id_of: HashMap<&str, usize> = HashMap::new();
    let ids: Vec<usize> = names
        .iter()
        .map(|s| {
            let next = id_of.len();
            *id_of.entry(s).or_insert(next)
        })
        .collect();
    // Occurrences of each id in the compared prefix `ids[..n - p]` and
    // suffix `ids[p..]`, and the sum of their minima: the bound, for p = 1.
    let mut prefix = vec![0usize; id_of.len()];
    let mut suffix = vec![0usize; id_of.len()];
    for (i, &x) in ids.iter().enumerate() {
        if i + 1 < n {
            prefix[x] += 1;
        }
        if i > 0 {
            suffix[x] += 1;
        }
    }
    let mut bound: usize = prefix.iter().zip(&suffix).map(|(a, b)| a.min(b)).sum();
    for p in 1..=n / 2 {
        if p > 1 {
            // From p - 1 to p: the prefix loses ids[n - p], the suffix ids[p - 1].
            if let (Some(&x), Some(&y)) = (ids.get(n - p), ids.get(p - 1)) {
                bound -= usize::from(prefix[x] <= suffix[x]);
                prefix[x] -= 1;
                bound -= usize::from(suffix[y] <= prefix[y]);
                suffix[y] -= 1;
            }
        }
        let m = n - p;
        if repeats_enough(bound, m) && matches_at_lag(&ids, p) {
            return Some(p);
        }
    }
    None
}

/// The 90% rule: `same` of `m` compared positions are equal.
fn repeats_enough(same: usize, m: usize) -> bool {
    same as f64 >= 0.9 * m as f64
}

/// Whether `ids[i] == ids[i + p]` for enough positions, counted in chunks
/// that stop as soon as the positions that differ rule it out.
fn matches_at_lag(ids: &[usize], p: usize) -> bool {
    let (Some(head), Some(tail)) = (ids.get(..ids.len().saturating_sub(p)), ids.get(p..)) else {
        return false;
    };
    let m = head.len();
    // The fewest equal positions that pass, found by the rule itself (no rounding doubts).
    let mut need = ((0.9 * m as f64).ceil() as usize).min(m);
    while need > 0 && repeats_enough(need - 1, m) {
        need -= 1;
    }
    while need < m && !repeats_enough(need, m) {
        need += 1;
    }
    let allowed = m - need;
    let mut differ = 0usize;
    for (a, b) in head.chunks(4096).zip(tail.chunks(4096)) {
        differ += a.iter().zip(b).filter(|(x, y)| x != y).count();
        if differ > allowed {
            return false;
        }
    }
    true
}

/// Kernels by their short name; copies and sets by what the trace calls them.
fn label(a: &kopt_model::GpuActivity) -> String {
    match a.kind {
        kopt_model::ActivityKind::Kernel => kopt_model::kernel_short_name(&a.name),
        _ => a.name.clone(),
    }
}

pub fn summarize(t: &Timeline) -> Option<TimelineSummary> {
    if t.activities.is_empty() {
        return None;
    }
    let sampling = sampled_coverage(t);
    // Time between sampled windows was never traced: it is cut, not idle.
    let spliced = t.spliced();
    let t: &Timeline = &spliced;
    let mut all: Vec<&kopt_model::GpuActivity> = t.activities.iter().collect();
    all.sort_by_key(|a| a.start_ns);
    // A whole-program trace starts with set-up (imports, lazy module loads,
    // the first step's one-time costs): with a repeating step, the window
    // starts at the second step, at the launch of its first kernel.
    let kernel_names: Vec<&str> = all
        .iter()
        .filter(|a| a.kind == kopt_model::ActivityKind::Kernel)
        .map(|a| a.name.as_str())
        .collect();
    // With iteration ranges (NVTX, ProfilerStep) the first one is the warm-up.
    let steps = t.iteration_ranges(None);
    let warmup_end = match repeated_period(&kernel_names) {
        _ if t.whole_program && steps.len() >= 3 => steps.iter().map(|r| r.start_ns).nth(1),
        Some(p) if t.whole_program && t.ranges.is_empty() && kernel_names.len() / p >= 3 => {
            let lead = kernel_names.len() % p;
            all.iter()
                .filter(|a| a.kind == kopt_model::ActivityKind::Kernel)
                .nth(lead + p)
                .map(|k| {
                    let launch = t
                        .api_calls
                        .iter()
                        .find(|c| c.correlation == k.correlation && c.correlation != 0)
                        .map_or(k.start_ns, |c| c.start_ns);
                    launch.min(k.start_ns)
                })
        }
        _ => None,
    };
    let acts: Vec<&kopt_model::GpuActivity> = match warmup_end {
        Some(w) => all.iter().copied().filter(|a| a.start_ns >= w).collect(),
        None => all,
    };
    if acts.is_empty() {
        return None;
    }
    let first_api = t
        .api_calls
        .iter()
        .filter(|c| c.kind != ApiKind::Other && warmup_end.is_none_or(|w| c.start_ns >= w))
        .map(|c| c.start_ns)
        .min();
    let start = first_api.map_or(acts[0].start_ns, |s| s.min(acts[0].start_ns));
    let end = acts.iter().map(|a| a.end_ns).max().unwrap_or(start);
    let wall = (end - start).max(1);

    // Union of busy intervals, and the gaps between them (labelled once the
    // largest are known: naming every gap of a long trace costs more than the rest).
    let mut busy = 0i64;
    let mut gaps: Vec<(i64, i64, &kopt_model::GpuActivity, &kopt_model::GpuActivity)> = Vec::new();
    let (mut cur_start, mut cur_end) = (acts[0].start_ns, acts[0].end_ns);
    let mut cur_last = acts[0];
    for a in &acts[1..] {
        if a.start_ns > cur_end {
            busy += cur_end - cur_start;
            gaps.push((cur_end - start, a.start_ns - cur_end, cur_last, a));
            cur_start = a.start_ns;
            cur_end = a.end_ns;
        } else {
            cur_end = cur_end.max(a.end_ns);
        }
        if a.end_ns >= cur_end {
            cur_last = a;
        }
    }
    busy += cur_end - cur_start;
    gaps.sort_by_key(|g| std::cmp::Reverse(g.1));
    gaps.truncate(GAPS_SHOWN);
    let gaps: Vec<IdleGap> = gaps
        .into_iter()
        .map(|(at_ns, duration_ns, after, before)| IdleGap {
            at_ns,
            duration_ns,
            after: label(after),
            before: label(before),
        })
        .collect();

    let launches: HashMap<u64, &kopt_model::ApiCall> = t
        .api_calls
        .iter()
        .filter(|c| matches!(c.kind, ApiKind::KernelLaunch | ApiKind::GraphLaunch))
        .map(|c| (c.correlation, c))
        .collect();
    let kernels: Vec<&&kopt_model::GpuActivity> = acts
        .iter()
        .filter(|a| a.kind == kopt_model::ActivityKind::Kernel)
        .collect();
    let mut shorter = 0u64;
    let mut to_start = Vec::new();
    for k in &kernels {
        if let Some(call) = launches.get(&k.correlation) {
            if call.kind == ApiKind::KernelLaunch && k.duration_ns() < call.end_ns - call.start_ns {
                shorter += 1;
            }
            to_start.push((k.start_ns - call.start_ns) as f64);
        }
    }
    let count = |kind: ApiKind| t.api_calls.iter().filter(|c| c.kind == kind).count() as u64;
    let median_launch = median(
        t.api_calls
            .iter()
            .filter(|c| c.kind == ApiKind::KernelLaunch)
            .map(|c| (c.end_ns - c.start_ns) as f64)
            .collect(),
    );
    let median_kernel = median(kernels.iter().map(|k| k.duration_ns() as f64).collect());
    let busy_pct = 100.0 * busy as f64 / wall as f64;
    // Iterations: ProfilerStep / NVTX ranges when present, else the period of
    // the kernel-name sequence (a training or inference step repeats itself).
    let iterations = if t.ranges.is_empty() {
        let names: Vec<&str> = kernels.iter().map(|k| k.name.as_str()).collect();
        repeated_period(&names).map(|p| (names.len() / p).max(1) as u64)
    } else {
        Some(
            steps
                .iter()
                .filter(|r| warmup_end.is_none_or(|w| r.start_ns >= w))
                .count() as u64,
        )
    };
    let launch_bound = busy_pct < LAUNCH_BOUND_BUSY_PCT
        && match (median_kernel, median_launch) {
            (Some(k), Some(l)) => k <= 2.0 * l,
            (Some(k), None) => k < crate::rules::TINY_KERNEL_NS,
            _ => false,
        };
    let fmt = kopt_model::format_duration_ns;
    let window_note = if warmup_end.is_some() {
        " (from the second step on: the first is warm-up)"
    } else {
        ""
    };
    let verdict = if launch_bound {
        format!(
            "Launch bound: the GPU is busy {busy_pct:.1}% of the {} window{window_note}; kernels run {} (median) while each launch call costs {} of host time; {} of {} kernels ran shorter than their launch.",
            fmt(wall as f64),
            median_kernel.map_or("-".into(), fmt),
            median_launch.map_or("-".into(), fmt),
            shorter,
            kernels.len()
        )
    } else if busy_pct >= 80.0 {
        format!(
            "GPU bound: the GPU is busy {busy_pct:.1}% of the {} window{window_note}; launch overhead is hidden behind GPU work, so graph capture would not help.",
            fmt(wall as f64)
        )
    } else {
        format!(
            "Partly idle: the GPU is busy {busy_pct:.1}% of the {} window{window_note}; see the largest gaps for what the host does in between.",
            fmt(wall as f64)
        )
    };
    Some(TimelineSummary {
        wall_ns: wall,
        gpu_busy_ns: busy,
        busy_pct,
        kernels: kernels.len() as u64,
        memory_ops: (acts.len() - kernels.len()) as u64,
        kernel_launch_calls: count(ApiKind::KernelLaunch),
        graph_launches: count(ApiKind::GraphLaunch),
        sync_calls: count(ApiKind::Synchronize),
        median_launch_ns: median_launch,
        median_kernel_ns: median_kernel,
        kernels_shorter_than_launch: shorter,
        median_launch_to_start_ns: median(to_start),
        largest_gaps: gaps,
        iterations,
        kernels_per_iteration: iterations.map(|n| kernels.len() as f64 / n as f64),
        busy_per_iteration_ns: iterations.map(|n| busy as f64 / n as f64),
        launch_bound,
        verdict,
        sampling,
    })
}

fn sampled_coverage(t: &Timeline) -> Option<kopt_model::SampledCoverage> {
    let w = &t.sampled_windows;
    let (first, last) = (w.first()?, w.last()?);
    Some(kopt_model::SampledCoverage {
        windows: w.len() as u64,
        traced_ns: w.iter().map(|(s, e)| e - s).sum(),
        span_ns: last.1 - first.0,
    })
}

/// GPU time per iteration: for each range of the iteration family (the most
/// repeated NVTX / ProfilerStep name, or `family`), the time from the first
/// GPU activity issued inside it (kernel, copy, set) starting to the last one
/// ending, so launch gaps count as well as GPU work. An activity belongs to
/// the range its API call (kernel or graph launch, copy, set) started in,
/// matched by correlation id; without API records, to the range it started
/// in. Returns the family's name and one value per range that issued work.
pub fn gpu_time_per_range(t: &Timeline, family: Option<&str>) -> Option<(String, Vec<i64>)> {
    let ranges = t.iteration_ranges(family);
    let name = kopt_model::range_family(&ranges.first()?.name).to_string();
    let launch_start: HashMap<u64, i64> = t
        .api_calls
        .iter()
        .filter(|c| c.kind != ApiKind::Other && c.correlation != 0)
        .map(|c| (c.correlation, c.start_ns))
        .collect();
    // Ranges of one family do not nest: sort by start and binary-search each activity.
    let mut spans: Vec<(i64, i64)> = ranges.iter().map(|r| (r.start_ns, r.end_ns)).collect();
    spans.sort_unstable();
    let mut per: Vec<Option<(i64, i64)>> = vec![None; spans.len()];
    for k in &t.activities {
        let at = launch_start
            .get(&k.correlation)
            .copied()
            .unwrap_or(k.start_ns);
        let idx = spans.partition_point(|s| s.0 <= at);
        if idx > 0 && at <= spans[idx - 1].1 {
            let slot = &mut per[idx - 1];
            *slot = Some(match *slot {
                Some((s, e)) => (s.min(k.start_ns), e.max(k.end_ns)),
                None => (k.start_ns, k.end_ns),
            });
        }
    }
    Some((
        name,
        per.into_iter().flatten().map(|(s, e)| e - s).collect(),
    ))
}

/// Horizontal resolution the strip is merged to (spans closer than this share of the window join).
const STRIP_COLUMNS: i64 = 1500;

/// The drawable strip: GPU lanes per device and stream, a host lane of
/// launch/sync calls, and the idle stretches of the GPU.
pub fn strip(t: &Timeline, summary: &TimelineSummary) -> Option<kopt_model::TimelineStrip> {
    let spliced = t.spliced();
    let t: &Timeline = &spliced;
    let start = t
        .activities
        .iter()
        .map(|a| a.start_ns)
        .chain(
            t.api_calls
                .iter()
                .filter(|c| c.kind != ApiKind::Other)
                .map(|c| c.start_ns),
        )
        .min()?;
    let end = t.activities.iter().map(|a| a.end_ns).max()?;
    let window = (end - start).max(1);
    let pixel = (window / STRIP_COLUMNS).max(1);
    let merge = |mut spans: Vec<(i64, i64)>| -> Vec<(i64, i64)> {
        spans.sort_unstable();
        let mut out: Vec<(i64, i64)> = Vec::new();
        for (s, e) in spans {
            match out.last_mut() {
                Some(last) if s - last.1 <= pixel => last.1 = last.1.max(e),
                _ => out.push((s, e)),
            }
        }
        out
    };
    let mut lanes: std::collections::BTreeMap<(u32, u64), Vec<(i64, i64)>> = Default::default();
    for a in &t.activities {
        lanes
            .entry((a.device, a.stream))
            .or_default()
            .push((a.start_ns - start, a.end_ns - start));
    }
    let mut out: Vec<kopt_model::StripLane> = lanes
        .into_iter()
        .map(|((dev, stream), spans)| kopt_model::StripLane {
            label: format!("GPU {dev} stream {stream}"),
            spans: merge(spans),
            host: false,
        })
        .collect();
    let host: Vec<(i64, i64)> = t
        .api_calls
        .iter()
        .filter(|c| c.kind != ApiKind::Other && c.start_ns >= start)
        .map(|c| (c.start_ns - start, (c.end_ns - start).min(window)))
        .collect();
    if !host.is_empty() {
        out.insert(
            0,
            kopt_model::StripLane {
                label: "host launch / sync calls".into(),
                spans: merge(host),
                host: true,
            },
        );
    }
    // Idle stretches: complement of all GPU spans, wider than a pixel.
    let all: Vec<(i64, i64)> = merge(
        t.activities
            .iter()
            .map(|a| (a.start_ns - start, a.end_ns - start))
            .collect(),
    );
    let idle = all
        .windows(2)
        .map(|w| (w[0].1, w[1].0 - w[0].1))
        .filter(|(_, d)| *d > pixel)
        .collect();
    Some(kopt_model::TimelineStrip {
        window_ns: window,
        lanes: out,
        idle,
        launch_bound: summary.launch_bound,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kopt_model::{ActivityKind, ApiCall, GpuActivity};

    fn kernel(start: i64, dur: i64, corr: u64) -> GpuActivity {
        GpuActivity {
            kind: ActivityKind::Kernel,
            name: format!("k{corr}"),
            start_ns: start,
            end_ns: start + dur,
            device: 0,
            stream: 7,
            correlation: corr,
            grid: None,
            block: None,
            bytes: None,
        }
    }

    fn launch(start: i64, dur: i64, corr: u64) -> ApiCall {
        ApiCall {
            kind: ApiKind::KernelLaunch,
            name: "cudaLaunchKernel".into(),
            start_ns: start,
            end_ns: start + dur,
            thread: 1,
            correlation: corr,
        }
    }

    #[test]
    fn many_short_kernels_behind_slow_launches_are_launch_bound() {
        let mut t = Timeline::default();
        for i in 0..10 {
            let at = i * 10_000;
            t.api_calls.push(launch(at, 8_000, i as u64));
            t.activities.push(kernel(at + 9_000, 2_000, i as u64));
        }
        let s = summarize(&t).unwrap();
        assert!(s.launch_bound, "{}", s.verdict);
        assert_eq!(s.kernels_shorter_than_launch, 10);
        assert_eq!(s.gpu_busy_ns, 20_000);
        assert_eq!(s.wall_ns, 9 * 10_000 + 11_000);
        assert_eq!(s.largest_gaps[0].duration_ns, 8_000);
        assert_eq!(s.median_launch_ns, Some(8_000.0));
    }

    #[test]
    fn time_between_sampled_windows_is_not_idle() {
        // Two 4 ms windows of back-to-back 1 ms kernels, 100 ms apart: busy
        // throughout what was traced, not 8% of a 104 ms span.
        let mut t = Timeline::default();
        for (w, base) in [0i64, 100_000_000].into_iter().enumerate() {
            for i in 0..4 {
                let c = (w * 4 + i) as u64 + 1;
                t.api_calls.push(launch(base + i as i64 * 1_000, 500, c));
                t.activities
                    .push(kernel(base + 10_000 + i as i64 * 1_000_000, 1_000_000, c));
            }
            t.sampled_windows.push((base, base + 4_000_000));
        }
        let s = summarize(&t).unwrap();
        assert!(s.busy_pct > 95.0, "{}", s.verdict);
        assert!(!s.launch_bound);
        assert!(
            s.wall_ns < 9_000_000,
            "wall {} counts traced time only",
            s.wall_ns
        );
        let c = s.sampling.clone().expect("coverage of a sampled trace");
        assert_eq!(
            (c.windows, c.traced_ns, c.span_ns),
            (2, 8_000_000, 104_000_000)
        );
        let lines = strip(&t, &s).unwrap();
        assert!(
            lines.window_ns < 9_000_000,
            "the strip is drawn spliced too"
        );
    }

    #[test]
    fn long_kernels_are_not_launch_bound() {
        let mut t = Timeline::default();
        for i in 0..4 {
            t.api_calls.push(launch(i * 1_000_000, 8_000, i as u64));
            t.activities
                .push(kernel(i * 1_000_000 + 10_000, 990_000, i as u64));
        }
        let s = summarize(&t).unwrap();
        assert!(!s.launch_bound);
        assert!(s.busy_pct > 95.0);
        assert!(s.verdict.contains("would not help"));
    }

    #[test]
    fn gpu_time_per_range_follows_the_launch() {
        // Two steps; the second step's kernel starts after the range closed
        // (asynchronous), but its launch was inside: it still counts there.
        // The first step: 120..150 and 160..170, a 50 ns span with its gap.
        let t = Timeline {
            activities: vec![kernel(120, 30, 1), kernel(160, 10, 2), kernel(320, 50, 3)],
            api_calls: vec![launch(110, 5, 1), launch(130, 5, 2), launch(250, 5, 3)],
            ranges: vec![
                kopt_model::Range {
                    name: "step".into(),
                    start_ns: 100,
                    end_ns: 200,
                },
                kopt_model::Range {
                    name: "step".into(),
                    start_ns: 200,
                    end_ns: 300,
                },
            ],
            ..Timeline::default()
        };
        assert_eq!(
            gpu_time_per_range(&t, None),
            Some(("step".to_string(), vec![50, 50]))
        );
        assert_eq!(gpu_time_per_range(&t, Some("other")), None);

        // A copy issued in the step before its kernels starts the step's GPU time.
        let mut with_copy = t.clone();
        with_copy.api_calls.push(ApiCall {
            kind: ApiKind::Memory,
            name: "cudaMemcpyAsync".into(),
            start_ns: 102,
            end_ns: 104,
            thread: 1,
            correlation: 5,
        });
        with_copy.activities.push(GpuActivity {
            kind: kopt_model::ActivityKind::Memcpy,
            name: "Memcpy HtoD".into(),
            start_ns: 105,
            end_ns: 115,
            device: 0,
            stream: 7,
            correlation: 5,
            grid: None,
            block: None,
            bytes: Some(4096),
        });
        assert_eq!(
            gpu_time_per_range(&with_copy, None),
            Some(("step".to_string(), vec![65, 50]))
        );

        // A graph replay: its kernels carry the cudaGraphLaunch call's correlation id.
        let mut graph_launch = launch(1_010, 5, 9);
        graph_launch.kind = ApiKind::GraphLaunch;
        let g = Timeline {
            activities: vec![kernel(1_100, 10, 9), kernel(1_112, 10, 9)],
            api_calls: vec![graph_launch],
            ranges: vec![kopt_model::Range {
                name: "step".into(),
                start_ns: 1_000,
                end_ns: 1_020,
            }],
            ..Timeline::default()
        };
        assert_eq!(
            gpu_time_per_range(&g, None),
            Some(("step".to_string(), vec![22]))
        );
    }

    #[test]
    fn periods() {
        let step = ["topk", "sort", "sort2", "cat"];
        let seq: Vec<&str> = step.iter().cycle().take(40).copied().collect();
        assert_eq!(repeated_period(&seq), Some(4));
        assert_eq!(repeated_period(&["a", "b", "c"]), None);
        assert_eq!(repeated_period(&["k"; 10]), Some(1));
    }

    /// The definition, position by position (what `repeated_period` replaced).
    fn period_by_definition(names: &[&str]) -> Option<usize> {
        let n = names.len();
        (1..=n / 2).find(|&p| {
            let same = (0..n - p).filter(|&i| names[i] == names[i + p]).count();
            same as f64 >= 0.9 * (n - p) as f64
        })
    }

    #[test]
    fn periods_agree_with_the_definition() {
        // Steps with noise: a warm-up lead, names replaced here and there,
        // few names in a pseudo-random order, distinct names.
        let pool: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
        let mut seed = 12345u64;
        let mut next = |m: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % m
        };
        for case in 0..300 {
            let n = 1 + next(300);
            let period = 1 + next(12);
            let alphabet = 1 + next(pool.len());
            let noise = next(25);
            let lead = next(10);
            let seq: Vec<&str> = (0..n)
                .map(|i| {
                    if i < lead || next(100) < noise {
                        pool[next(alphabet)].as_str()
                    } else {
                        pool[(i - lead) % period % alphabet].as_str()
                    }
                })
                .collect();
            assert_eq!(
                repeated_period(&seq),
                period_by_definition(&seq),
                "case {case}: {seq:?}"
            );
        }
        let distinct: Vec<String> = (0..500).map(|i| format!("d{i}")).collect();
        let distinct: Vec<&str> = distinct.iter().map(String::as_str).collect();
        assert_eq!(repeated_period(&distinct), None);
        assert_eq!(repeated_period(&[]), None);
        assert_eq!(repeated_period(&["a"]), None);
        assert_eq!(repeated_period(&["a", "a"]), Some(1));
    }

    #[test]
    fn overlapping_streams_count_once() {
        let mut t = Timeline::default();
        t.activities.push(kernel(0, 100, 1));
        t.activities.push(kernel(50, 100, 2));
        t.activities.push(kernel(300, 100, 3));
        let s = summarize(&t).unwrap();
        assert_eq!(s.gpu_busy_ns, 250);
        assert_eq!(s.largest_gaps.len(), 1);
        assert_eq!(s.largest_gaps[0].duration_ns, 150);
    }
}
