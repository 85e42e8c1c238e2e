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

/// The timeline's summary, graph replay costed from the device the trace names.
pub fn summarize(t: &Timeline) -> Option<TimelineSummary> {
    let replay = kopt_model::graph_replay_ns_per_kernel(t.device_name.as_deref().unwrap_or(""));
    summarize_with_replay(t, replay)
}

/// The summary with the device model's graph-replay cost per kernel (ns, and
/// whether it came from the per-card table).
pub fn summarize_for_device(t: &Timeline, device: &kopt_model::Device) -> Option<TimelineSummary> {
    let replay = match device.graph_replay_ns_per_kernel {
        Some(ns) => (ns, true),
        None => kopt_model::graph_replay_ns_per_kernel(&device.name),
    };
    summarize_with_replay(t, replay)
}

/// Busy share of the steady-state window above which the GPU, not the
/// launches, sets the pace: no graph capture is recommended.
pub const COMPUTE_BOUND_BUSY_PCT: f64 = 90.0;

/// A step longer than this many times the median is warm-up (first call,
/// compilation, autotuning, allocator growth).
const WARMUP_FACTOR: f64 = 1.5;

/// Steps found in a trace, in launch (host) time.
#[derive(Debug, Clone)]
pub struct Steps {
    pub source: StepSource,
    pub family: Option<String>,
    pub detail: String,
    /// Start of each step, sorted.
    pub starts: Vec<i64>,
    /// End of each step: a marker's end, else the next step's start (the
    /// last one's: the launch of its last activity).
    pub ends: Vec<i64>,
    /// True when steps tile the time between them (sync, gaps, pattern):
    /// an activity launched between a step's end and the next start is not lost.
    pub contiguous: bool,
}

impl Steps {
    /// Where step `i`'s time runs to: the next step's start, at least its
    /// own end (a marker may end after the next begins).
    pub fn until(&self, i: usize) -> i64 {
        self.starts
            .get(i + 1)
            .copied()
            .unwrap_or(self.ends[i])
            .max(self.ends[i])
    }
}

use kopt_model::{ActivityKind, GpuActivity, StepSource};

/// When each activity was launched: its API call's start (by correlation),
/// else its own start. Also the call's end (or the activity's end).
fn launch_spans(t: &Timeline) -> HashMap<u64, (i64, i64)> {
    t.api_calls
        .iter()
        .filter(|c| c.kind != ApiKind::Other && c.correlation != 0)
        .map(|c| (c.correlation, (c.start_ns, c.end_ns)))
        .collect()
}

fn launched_at(a: &GpuActivity, calls: &HashMap<u64, (i64, i64)>) -> (i64, i64) {
    match calls.get(&a.correlation).filter(|_| a.correlation != 0) {
        Some(&(s, e)) => (s.min(a.start_ns), e.min(a.end_ns).max(s)),
        None => (a.start_ns, a.end_ns),
    }
}

/// The signature of an activity for the period search: kernels by name and
/// launch shape (a first layer with other shapes differs from the next), copies by name.
fn signature(a: &GpuActivity) -> String {
    match a.kind {
        ActivityKind::Kernel => format!(
            "{}|{:?}|{:?}",
            a.name,
            a.grid.map(|g| (g.x, g.y, g.z)),
            a.block.map(|b| (b.x, b.y, b.z))
        ),
        _ => a.name.clone(),
    }
}

/// The most common value and the share of items that have it.
fn mode(counts: &[usize]) -> Option<(usize, f64)> {
    let mut by: HashMap<usize, usize> = HashMap::new();
    for c in counts {
        *by.entry(*c).or_default() += 1;
    }
    let (value, n) = by.into_iter().max_by_key(|(v, n)| (*n, *v))?;
    Some((value, n as f64 / counts.len().max(1) as f64))
}

/// Segments of launches (activities in launch order) between boundaries
/// must look alike to be steps: at least 3, most with the same kernel count.
fn consistent(kernel_counts: &[usize]) -> Option<usize> {
    let nonempty: Vec<usize> = kernel_counts.iter().copied().filter(|c| *c > 0).collect();
    if nonempty.len() < 3 {
        return None;
    }
    let (m, share) = mode(&nonempty)?;
    (share >= 0.6).then_some(m)
}

/// The steps of a timeline, from the most trusted evidence there is:
/// `ProfilerStep#N`, a repeated NVTX range, synchronisation calls, host
/// gaps between bursts of launches, the period of the activity sequence.
pub fn find_steps(t: &Timeline) -> Option<Steps> {
    let calls = launch_spans(t);
    let mut order: Vec<(&GpuActivity, (i64, i64))> = t
        .activities
        .iter()
        .map(|a| (a, launched_at(a, &calls)))
        .collect();
    order.sort_by_key(|(a, (s, _))| (*s, a.start_ns));
    profiler_steps(t)
        .or_else(|| nvtx_steps(t, &order))
        .or_else(|| marked_period_steps(t, &order))
        .or_else(|| sync_steps(t, &order))
        .or_else(|| host_gap_steps(&order))
        .or_else(|| pattern_steps(&order))
}

fn profiler_steps(t: &Timeline) -> Option<Steps> {
    let mut seen = std::collections::HashSet::new();
    let mut spans: Vec<(i64, i64)> = t
        .ranges
        .iter()
        .filter(|r| kopt_model::range_family(&r.name) == "ProfilerStep")
        .filter(|r| seen.insert(r.name.as_str()))
        .map(|r| (r.start_ns, r.end_ns))
        .collect();
    if spans.len() < 2 {
        return None;
    }
    spans.sort_unstable();
    let n = spans.len();
    Some(Steps {
        source: StepSource::ProfilerStep,
        family: Some("ProfilerStep".into()),
        detail: format!("torch.profiler's ProfilerStep#N annotations ({n} steps, each counted once: the CPU and GPU copies of a step are one step)"),
        starts: spans.iter().map(|s| s.0).collect(),
        ends: spans.iter().map(|s| s.1).collect(),
        contiguous: false,
    })
}

fn nvtx_steps(t: &Timeline, order: &[(&GpuActivity, (i64, i64))]) -> Option<Steps> {
    let mut families: HashMap<&str, Vec<(i64, i64)>> = HashMap::new();
    for r in &t.ranges {
        families
            .entry(kopt_model::range_family(&r.name))
            .or_default()
            .push((r.start_ns, r.end_ns));
    }
    families.retain(|name, v| *name != "ProfilerStep" && v.len() >= 3);
    for v in families.values_mut() {
        v.sort_unstable();
    }
    let inside = |inner: &[(i64, i64)], outer: &[(i64, i64)]| {
        let within = inner
            .iter()
            .filter(|(s, e)| {
                let i = outer.partition_point(|o| o.0 <= *s);
                i > 0 && outer[i - 1].1 >= *e
            })
            .count();
        within as f64 >= 0.9 * inner.len() as f64
    };
    let launches: Vec<i64> = order.iter().map(|(_, (s, _))| *s).collect();
    let holds_work = |spans: &[(i64, i64)]| {
        let with = spans
            .iter()
            .filter(|(s, e)| {
                let i = launches.partition_point(|l| l < s);
                launches.get(i).is_some_and(|l| l <= e)
            })
            .count();
        with * 2 >= spans.len()
    };
    // The outermost repeated range: one not nested in another repeated family.
    let names: Vec<&str> = families.keys().copied().collect();
    let (name, spans) = families
        .iter()
        .filter(|(name, spans)| {
            holds_work(spans)
                && !names.iter().any(|o| {
                    o != *name && families[o].len() < spans.len() && inside(spans, &families[o])
                })
        })
        .max_by_key(|(name, spans)| {
            let covered: i64 = spans.iter().map(|(s, e)| e - s).sum();
            (spans.len(), covered, std::cmp::Reverse(**name))
        })?;
    let nested = names
        .iter()
        .filter(|o| *o != name && inside(&families[*o], spans))
        .map(|o| format!("\"{o}\""))
        .collect::<Vec<_>>();
    let nested = if nested.is_empty() {
        String::new()
    } else {
        format!("; {} nest inside it", nested.join(", "))
    };
    Some(Steps {
        source: StepSource::Nvtx,
        family: Some(name.to_string()),
        detail: format!(
            "the NVTX range \"{name}\" ({} ranges, the outermost repeated range{nested})",
            spans.len()
        ),
        starts: spans.iter().map(|s| s.0).collect(),
        ends: spans.iter().map(|s| s.1).collect(),
        contiguous: false,
    })
}

/// Steps that tile the launches: segment `k` holds the activities from
/// `bounds[k]` up to the next boundary.
fn tiled(order: &[(&GpuActivity, (i64, i64))], first: &[usize]) -> (Vec<i64>, Vec<i64>) {
    let starts: Vec<i64> = first.iter().map(|&i| order[i].1 .0).collect();
    let mut ends: Vec<i64> = starts.iter().skip(1).map(|s| s - 1).collect();
    if let Some(&last) = first.last() {
        ends.push(
            order[last..]
                .iter()
                .map(|(_, (s, _))| *s)
                .max()
                .unwrap_or(0),
        );
    }
    (starts, ends)
}

fn kernel_counts(order: &[(&GpuActivity, (i64, i64))], first: &[usize]) -> Vec<usize> {
    first
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            let j = first.get(k + 1).copied().unwrap_or(order.len());
            order[i..j]
                .iter()
                .filter(|(a, _)| a.kind == ActivityKind::Kernel)
                .count()
        })
        .collect()
}

/// When each call that makes the host wait for the GPU ended (device,
/// stream and event syncs, blocking copies), in order.
fn host_sync_ends(t: &Timeline) -> Vec<i64> {
    let mut ends: Vec<i64> = t
        .api_calls
        .iter()
        .filter(|c| {
            c.kind == ApiKind::Synchronize
                || (c.kind == ApiKind::Memory
                    && c.name.contains("emcpy")
                    && !c.name.contains("Async"))
        })
        .map(|c| c.end_ns)
        .collect();
    ends.sort_unstable();
    ends
}

fn sync_steps(t: &Timeline, order: &[(&GpuActivity, (i64, i64))]) -> Option<Steps> {
    let bounds = host_sync_ends(t);
    if bounds.len() < 3 || order.is_empty() {
        return None;
    }
    // The first activity launched after each boundary starts a segment.
    let mut first: Vec<usize> = vec![0];
    for b in &bounds {
        let i = order.partition_point(|(_, (s, _))| s < b);
        if i < order.len() && first.last() != Some(&i) {
            first.push(i);
        }
    }
    let counts = kernel_counts(order, &first);
    let per = consistent(&counts)?;
    let (starts, ends) = tiled(order, &first);
    Some(Steps {
        source: StepSource::Sync,
        family: None,
        detail: format!(
            "host synchronisation calls ({} segments between synchronising calls, most of {per} kernel(s))",
            starts.len()
        ),
        starts,
        ends,
        contiguous: true,
    })
}

fn host_gap_steps(order: &[(&GpuActivity, (i64, i64))]) -> Option<Steps> {
    if order.len() < 6 {
        return None;
    }
    // Host time between the end of one launch and the start of the next.
    let mut gaps: Vec<(i64, usize)> = Vec::with_capacity(order.len());
    let mut reach = order[0].1 .1;
    for (i, (_, (s, e))) in order.iter().enumerate().skip(1) {
        gaps.push(((s - reach).max(0), i));
        reach = reach.max(*e);
    }
    let mut sorted: Vec<i64> = gaps.iter().map(|g| g.0).collect();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    // Natural breaks in the sorted gaps, largest jump first: the first that
    // cuts the launches into alike bursts marks the steps.
    let mut breaks: Vec<(f64, i64)> = (0..(sorted.len() / 2).min(sorted.len().saturating_sub(1)))
        .filter(|&i| sorted[i] >= 10_000)
        .map(|i| (sorted[i] as f64 / sorted[i + 1].max(100) as f64, sorted[i]))
        .filter(|(ratio, _)| *ratio >= 3.0)
        .collect();
    breaks.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (_, threshold) in breaks.into_iter().take(8) {
        let mut first: Vec<usize> = vec![0];
        first.extend(gaps.iter().filter(|g| g.0 >= threshold).map(|g| g.1));
        let counts = kernel_counts(order, &first);
        let Some(per) = consistent(&counts).filter(|p| *p >= 2) else {
            continue;
        };
        let (starts, ends) = tiled(order, &first);
        return Some(Steps {
            source: StepSource::HostGap,
            family: None,
            detail: format!(
                "host idle stretches of {} or more between bursts of launches ({} bursts, most of {per} kernels)",
                kopt_model::format_duration_ns(threshold as f64),
                starts.len()
            ),
            starts,
            ends,
            contiguous: true,
        });
    }
    None
}

/// Fewest repeats of a candidate step in the steady tail.
const MIN_REPEATS: usize = 3;

/// Most multiples of the sequence's own period tried as the step.
const MAX_MULTIPLE: usize = 64;

/// How a candidate period's boundaries are marked: its phase, the share of
/// boundaries marked, the share synced, their mean pause, the mean pause
/// elsewhere.
type Marks = (usize, f64, f64, f64, f64);

/// Steps of a program without ranges, as the period of its kernel sequence
/// that the host marks. The period is looked for in the second half of the
/// kernels (warm-up and set-up come first): the shortest period p0 the
/// sequence repeats with, then its multiples. A multiple is the step when
/// its boundaries are marked by the host (nearly every boundary follows a
/// synchronising call, or a host pause several times the pauses inside);
/// of the marked multiples the shortest is taken, unless a longer one's
/// boundaries stand out again (a step's end pauses longer than the layer
/// syncs inside it). Not a layer (its repeats inside a step are not
/// marked), not a sync call (the model's own syncs recur inside a step at
/// the same places, so they mark nothing the step's period does not), and
/// the warm-up before is left to the steady-state cut. None where no
/// multiple is marked: the other detectors follow.
fn marked_period_steps(t: &Timeline, order: &[(&GpuActivity, (i64, i64))]) -> Option<Steps> {
    let kernels: Vec<usize> = order
        .iter()
        .enumerate()
        .filter(|(_, (a, _))| a.kind == ActivityKind::Kernel)
        .map(|(i, _)| i)
        .collect();
    let n = kernels.len();
    if n < 2 * MIN_REPEATS {
        return None;
    }
    let sigs: Vec<String> = kernels.iter().map(|&i| signature(order[i].0)).collect();
    let mut id_of: HashMap<&str, usize> = HashMap::new();
    let ids: Vec<usize> = sigs
        .iter()
        .map(|s| {
            let next = id_of.len();
            *id_of.entry(s.as_str()).or_insert(next)
        })
        .collect();
    // Host marks before each kernel: a synchronising call ended since the
    // previous launch, and the host pause since it.
    let syncs = host_sync_ends(t);
    let launch = |k: usize| order[kernels[k]].1;
    let synced: Vec<bool> = (0..n)
        .map(|k| {
            k > 0 && {
                let (from, to) = (launch(k - 1).0, launch(k).0);
                let i = syncs.partition_point(|s| *s <= from);
                syncs.get(i).is_some_and(|s| *s <= to)
            }
        })
        .collect();
    let pause: Vec<f64> = (0..n)
        .map(|k| {
            if k == 0 {
                0.0
            } else {
                (launch(k).0 - launch(k - 1).1).max(0) as f64
            }
        })
        .collect();
    // The steady tail: the second half of the kernels, else a shorter end
    // where a long warm-up (cuDNN's algorithm search launches thousands of
    // trial kernels) fills the first half.
    let mut tail_len = n / 2;
    let found = loop {
        if tail_len < 2 * MIN_REPEATS {
            break None;
        }
        if let Some(f) = marked_period_in(&ids, &synced, &pause, n - tail_len) {
            break Some((n - tail_len, f));
        }
        tail_len /= 2;
    };
    let (tail_from, (period, p0, (phase, _, synced_share, mean, inside))) = found?;
    // Boundaries over the tail, then back over the lead while a period's
    // kernels still repeat the next period's.
    let mut bounds: Vec<usize> = (tail_from + phase..n).step_by(period).collect();
    let mut b = *bounds.first()?;
    while b >= period {
        let a = b - period;
        let same = (0..period)
            .filter(|&i| b + i < n && ids[a + i] == ids[b + i])
            .count();
        if (same as f64) < 0.9 * period as f64 {
            break;
        }
        bounds.insert(0, a);
        b = a;
    }
    // The first call before them (cuDNN's algorithm search adds its trial
    // kernels there) repeats nothing but starts at a mark too: one more
    // step, which the steady-state cut then takes as warm-up.
    let typical = median(pause[tail_from + 1..].to_vec()).unwrap_or(0.0);
    let pause_mark = (3.0 * typical).max(10_000.0);
    if let Some(&b) = bounds.first() {
        if let Some(m) = (1..b).rev().find(|&k| synced[k] || pause[k] >= pause_mark) {
            if b - m >= period / 2 {
                bounds.insert(0, m);
            }
        }
    }
    // A partial period at the end is not a step.
    if let Some(&last) = bounds.last() {
        if last + period > n {
            bounds.pop();
        }
    }
    if bounds.len() < MIN_REPEATS {
        return None;
    }
    // A step starts after the longest host pause between the previous
    // period's last kernel and its first: a copy launched after the pause
    // belongs to the step it precedes, one before it (a result copied back)
    // to the step it ends.
    let first: Vec<usize> = bounds
        .iter()
        .map(|&k| {
            let to = kernels[k];
            let Some(&from) = k.checked_sub(1).and_then(|j| kernels.get(j)) else {
                return to;
            };
            (from + 1..=to)
                .max_by_key(|&j| (order[j].1 .0 - order[j - 1].1 .1, std::cmp::Reverse(j)))
                .unwrap_or(to)
        })
        .collect();
    let (starts, mut ends) = tiled(order, &first);
    // The last step ends with the last launch before the next period's
    // first kernel (its copies after its kernels too).
    if let (Some(last), Some(&k)) = (ends.last_mut(), bounds.last()) {
        let until = kernels.get(k + period).copied().unwrap_or(order.len());
        *last = order[kernels[k]..until]
            .iter()
            .map(|(_, (s, _))| *s)
            .max()
            .unwrap_or(*last);
    }
    let fmt = kopt_model::format_duration_ns;
    let (source, mark) = if synced_share >= 0.9 {
        (
            StepSource::Sync,
            format!(
                "a synchronising call before {:.0}% of its starts",
                100.0 * synced_share
            ),
        )
    } else {
        (
            StepSource::HostGap,
            format!(
                "a host pause of {} on average before each start, {} elsewhere",
                fmt(mean),
                fmt(inside)
            ),
        )
    };
    let nested = if period != p0 && period % p0 == 0 {
        format!(
            "; a shorter pattern of {p0} kernels repeats {} times inside it (layers of a step)",
            period / p0
        )
    } else {
        String::new()
    };
    Some(Steps {
        source,
        family: None,
        detail: format!(
            "the repeating sequence of {period} kernels that the host marks ({mark}; {} whole repeats{nested})",
            starts.len()
        ),
        starts,
        ends,
        contiguous: true,
    })
}

/// The marked period of `ids[tail_from..]` (see `marked_period_steps`):
/// the period, the sequence's own shortest period, and the marks.
fn marked_period_in(
    ids: &[usize],
    synced: &[bool],
    pause: &[f64],
    tail_from: usize,
) -> Option<(usize, usize, Marks)> {
    let n = ids.len();
    let names: Vec<String> = ids[tail_from..].iter().map(|i| i.to_string()).collect();
    let tail: Vec<&str> = names.iter().map(String::as_str).collect();
    let p0 = repeated_period(&tail);
    let tail_len = n - tail_from;
    // A pause marks a boundary when it is several times the typical pause.
    let typical = median(pause[tail_from + 1..].to_vec()).unwrap_or(0.0);
    let pause_mark = (3.0 * typical).max(10_000.0);
    // For a period p: the phase whose boundaries are marked best, the share
    // of its boundaries marked (a sync, or a long pause), of them synced,
    // their mean pause, and the mean pause elsewhere.
    let score = |p: usize| -> Marks {
        let mut best = (0usize, -1.0f64, 0.0f64, 0.0f64);
        for ph in 0..p {
            let at: Vec<usize> = (tail_from + ph..n).step_by(p).filter(|&k| k > 0).collect();
            if at.is_empty() {
                continue;
            }
            let share = |f: &dyn Fn(usize) -> bool| {
                at.iter().filter(|&&k| f(k)).count() as f64 / at.len() as f64
            };
            let marked = share(&|k| synced[k] || pause[k] >= pause_mark);
            let synced_share = share(&|k| synced[k]);
            let mean = at.iter().map(|&k| pause[k]).sum::<f64>() / at.len() as f64;
            if (marked, mean) > (best.1, best.3) {
                best = (ph, marked, synced_share, mean);
            }
        }
        let ph = best.0;
        let inside: Vec<f64> = (tail_from + 1..n)
            .filter(|k| (k - tail_from) % p != ph)
            .map(|k| pause[k])
            .collect();
        let inside_mean = inside.iter().sum::<f64>() / inside.len().max(1) as f64;
        (ph, best.1, best.2, best.3, inside_mean)
    };
    // Candidates: the multiples of the sequence's own period, and the
    // spacings of the host's marks (a step of 64 cell steps and a few
    // kernels more is no multiple of the cell's period).
    let mut candidates: Vec<usize> = Vec::new();
    if let Some(p0) = p0 {
        candidates.extend(
            (1..=MAX_MULTIPLE)
                .map(|k| p0 * k)
                .take_while(|p| p * MIN_REPEATS <= tail_len),
        );
    }
    // Syncs alone, long pauses alone, and both: a stray pause (the
    // interpreter's garbage collection) must not hide the syncs' spacing.
    let kinds: [&dyn Fn(usize) -> bool; 3] = [&|k| synced[k], &|k| pause[k] >= pause_mark, &|k| {
        synced[k] || pause[k] >= pause_mark
    }];
    for is_mark in kinds {
        let marks: Vec<usize> = (tail_from + 1..n).filter(|&k| is_mark(k)).collect();
        for lag in 1..=8usize {
            let mut spacing: Vec<usize> = marks.windows(lag + 1).map(|w| w[lag] - w[0]).collect();
            spacing.sort_unstable();
            if let Some((p, share)) = mode(&spacing) {
                if share >= 0.5 && p >= 2 && p * MIN_REPEATS <= tail_len {
                    candidates.push(p);
                }
            }
        }
    }
    candidates.sort_unstable();
    candidates.dedup();
    let mut step: Option<(usize, Marks)> = None;
    for p in candidates {
        // The candidate must repeat as a whole.
        if match_share(&ids[tail_from..], p) >= 0.9 {
            let sc = score(p);
            if sc.1 >= 0.9 {
                match step {
                    None => step = Some((p, sc)),
                    // A longer marked period replaces a shorter one only
                    // where its boundaries pause clearly longer than the
                    // shorter one's: the step's end, not one more layer.
                    Some((q, s0)) if p % q == 0 && sc.3 >= 2.0 * s0.3.max(1.0) => {
                        step = Some((p, sc))
                    }
                    _ => {}
                }
            }
        }
    }
    step.map(|(p, sc)| (p, p0.unwrap_or(p), sc))
}

/// Share of positions `i` with `ids[i] == ids[i + lag]`.
fn match_share(ids: &[usize], lag: usize) -> f64 {
    let m = ids.len().saturating_sub(lag);
    if m == 0 {
        return 0.0;
    }
    let same = ids.iter().zip(&ids[lag..]).filter(|(a, b)| a == b).count();
    same as f64 / m as f64
}

fn pattern_steps(order: &[(&GpuActivity, (i64, i64))]) -> Option<Steps> {
    let sigs: Vec<String> = order.iter().map(|(a, _)| signature(a)).collect();
    let refs: Vec<&str> = sigs.iter().map(String::as_str).collect();
    let inner = repeated_period(&refs)?;
    let n = refs.len();
    let mut id_of: HashMap<&str, usize> = HashMap::new();
    let ids: Vec<usize> = refs
        .iter()
        .map(|s| {
            let next = id_of.len();
            *id_of.entry(s).or_insert(next)
        })
        .collect();
    // An outer period is justified where it repeats clearly better than the
    // inner one (a layer repeats inside a step, the step's ends differ).
    let base = match_share(&ids, inner);
    let mut period = inner;
    if base < 0.99 {
        for m in 2..=64usize {
            let p = inner * m;
            if p * 3 > n {
                break;
            }
            let share = match_share(&ids, p);
            if share >= 0.97 && share >= base + 0.5 * (1.0 - base) {
                period = p;
                break;
            }
        }
    }
    if n / period < 2 {
        return None;
    }
    // The phase: where the host pauses longest between repeats, else so the
    // last repeat is whole (the lead is set-up).
    let gap_before = |i: usize| -> i64 {
        if i == 0 {
            return 0;
        }
        (order[i].1 .0 - order[i - 1].1 .1).max(0)
    };
    let mean_gap = (1..n).map(gap_before).sum::<i64>() as f64 / (n - 1).max(1) as f64;
    let phase = (0..period.min(n))
        .map(|ph| {
            let idx: Vec<usize> = (ph..n).step_by(period).filter(|&i| i > 0).collect();
            let mean =
                idx.iter().map(|&i| gap_before(i)).sum::<i64>() as f64 / idx.len().max(1) as f64;
            (ph, mean)
        })
        .filter(|(_, mean)| *mean > 1.2 * mean_gap + 1_000.0)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map_or(n % period, |(ph, _)| ph);
    let first: Vec<usize> = (phase..n)
        .step_by(period)
        .filter(|i| i + period <= n)
        .collect();
    // Two repeats could be anything (a warm-up and one run): three make a step.
    if first.len() < 3 {
        return None;
    }
    let (starts, mut ends) = tiled(order, &first);
    if let (Some(last), Some(&i)) = (ends.last_mut(), first.last()) {
        *last = order[i..i + period]
            .iter()
            .map(|(_, (s, _))| *s)
            .max()
            .unwrap_or(*last);
    }
    let nested = if period != inner {
        format!(
            "; a shorter pattern of {inner} repeats {} times inside it (layers of a step): the outer period is the step",
            period / inner
        )
    } else {
        String::new()
    };
    Some(Steps {
        source: StepSource::KernelPattern,
        family: None,
        detail: format!(
            "the repeating sequence of {period} GPU activities ({} whole repeats{nested}); no step markers, syncs or host gaps mark steps",
            first.len()
        ),
        starts,
        ends,
        contiguous: true,
    })
}

/// Step periods (one start to the next) of the bare run, when it timed the
/// range family the traced steps came from: the first `warmup_steps` (at
/// least one: module loading, first calls) left out as in the traced run.
/// None with fewer than three periods left.
fn bare_step_periods(t: &Timeline, family: Option<&str>, warmup_steps: usize) -> Option<Vec<f64>> {
    let bare = t.bare_steps.as_ref()?;
    if family? != kopt_model::range_family(&bare.range) {
        return None;
    }
    let periods: Vec<f64> = bare
        .periods_ns(warmup_steps.max(1))
        .into_iter()
        .filter(|p| *p > 0.0)
        .collect();
    (periods.len() >= 3).then_some(periods)
}

/// Step periods of a sync-only bare run (range `BARE_SYNC_RANGE`) for
/// steps without ranges: the traced run's steady step boundaries are
/// matched to the synchronising calls that ended before each (the k-th
/// traced call is the k-th bare one, counted from the end, where start-up
/// may differ), and the bare periods read between those calls' ends. None
/// where a step holds no sync call, the calls do not line up, or fewer
/// than three periods are left; also where the bare steps come out more
/// than 10% slower than the traced ones (a bare run cannot be: the two
/// runs' calls did not match).
fn bare_sync_periods(t: &Timeline, steps: &Steps, steady: &Steady) -> Option<Vec<f64>> {
    let bare = t.bare_steps.as_ref()?;
    if bare.range != kopt_model::BARE_SYNC_RANGE || steps.family.is_some() {
        return None;
    }
    let traced = host_sync_ends(t);
    let mut bare_ends: Vec<i64> = bare.spans_ns.iter().map(|s| s.1).collect();
    bare_ends.sort_unstable();
    let bounds: Vec<i64> = (steady.first..=steady.last + 1)
        .filter_map(|i| steps.starts.get(i).copied())
        .collect();
    let counts: Vec<usize> = bounds
        .iter()
        .map(|b| traced.partition_point(|e| e <= b))
        .collect();
    if counts.first().is_none_or(|k| *k == 0) || counts.windows(2).any(|w| w[1] <= w[0]) {
        return None;
    }
    let shift = bare_ends.len() as i64 - traced.len() as i64;
    let times: Vec<i64> = counts
        .iter()
        .map(|&k| {
            let i = k as i64 - 1 + shift;
            usize::try_from(i)
                .ok()
                .and_then(|i| bare_ends.get(i).copied())
        })
        .collect::<Option<_>>()?;
    let periods: Vec<f64> = times.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
    if periods.len() < 3 || periods.iter().any(|p| *p <= 0.0) {
        return None;
    }
    let traced_mean = (bounds[bounds.len() - 1] - bounds[0]) as f64 / (bounds.len() - 1) as f64;
    no_slower_than_traced(periods, traced_mean)
}

/// A bare run's step periods, kept only when their mean is at most 10%
/// above the traced step's: a bare step cannot be slower, so a slower one
/// means the two runs' marks did not line up.
fn no_slower_than_traced(periods: Vec<f64>, traced_mean: f64) -> Option<Vec<f64>> {
    let bare_mean = periods.iter().sum::<f64>() / periods.len() as f64;
    (bare_mean <= 1.1 * traced_mean).then_some(periods)
}

/// Step periods of a launch-count bare run (a launch range: every N-th
/// launch call timed, N the traced step's launch count) for steps without
/// ranges: the traced run's steady steps span launch ordinals
/// `[first, end)` (its launch calls counted as the tracer counts them); the
/// bare marks inside that span, consecutive ones `N` launches apart, are one
/// step apart whatever the phase, and their time differences, scaled to the
/// traced step's mean launch count, are the untraced periods (those past
/// `WARMUP_FACTOR` times their median left out). None under three periods,
/// and where the bare steps come out more than 10% slower
/// than the traced ones (the two runs' launches did not line up).
fn bare_launch_periods(t: &Timeline, steps: &Steps, steady: &Steady) -> Option<Vec<f64>> {
    let bare = t.bare_steps.as_ref()?;
    kopt_model::bare_launch_every(&bare.range)?;
    if steps.family.is_some() {
        return None;
    }
    let mut launches: Vec<i64> = t
        .api_calls
        .iter()
        .filter(|c| matches!(c.kind, ApiKind::KernelLaunch | ApiKind::GraphLaunch))
        .map(|c| c.start_ns)
        .collect();
    launches.sort_unstable();
    let from = *steps.starts.get(steady.first)?;
    let until = steps
        .starts
        .get(steady.last + 1)
        .copied()
        .unwrap_or_else(|| steps.until(steady.last).saturating_add(1));
    let first = launches.partition_point(|s| *s < from) as i64;
    let end = launches.partition_point(|s| *s < until) as i64;
    let n_steps = (steady.last + 1 - steady.first) as f64;
    if end <= first || n_steps < 1.0 {
        return None;
    }
    let per_step = (end - first) as f64 / n_steps;
    let mut marks: Vec<(i64, i64)> = bare
        .spans_ns
        .iter()
        .map(|&(time, ordinal)| (ordinal, time))
        .filter(|&(ordinal, _)| ordinal >= first && ordinal <= end)
        .collect();
    marks.sort_unstable();
    let periods: Vec<f64> = marks
        .windows(2)
        .map(|w| (w[1].1 - w[0].1) as f64 * per_step / (w[1].0 - w[0].0).max(1) as f64)
        .collect();
    if periods.iter().any(|p| *p <= 0.0) {
        return None;
    }
    // A pause of the bare run's own (its first call, a collection) is not
    // a step: periods past the warm-up factor of the median are left out.
    let mid = median(periods.clone())?;
    let periods: Vec<f64> = periods
        .into_iter()
        .filter(|p| *p <= WARMUP_FACTOR * mid)
        .collect();
    if periods.len() < 3 {
        return None;
    }
    no_slower_than_traced(periods, (until - from) as f64 / n_steps)
}

/// The host's time to issue a step, as traced: from the step's start to
/// the end of its last launch call, less what launch calls spent beyond the
/// median call (blocked on a full launch queue or the allocator, not host
/// work); the median over the steady steps. None without steps or launches.
fn host_issue_per_step(
    t: &Timeline,
    steps: Option<&Steps>,
    steady: Option<&Steady>,
    calls: &HashMap<u64, (i64, i64)>,
) -> Option<f64> {
    let (s, st) = (steps?, steady?);
    let n = st.last.checked_sub(st.first)? + 1;
    let mut last_end = vec![i64::MIN; n];
    let mut blocked = vec![0.0f64; n];
    let mut spans: Vec<(usize, f64)> = Vec::new();
    for (a, k) in t.activities.iter().zip(&st.step_of) {
        let Some(i) = k.filter(|i| (st.first..=st.last).contains(i)) else {
            continue;
        };
        if let Some(&(cs, ce)) = calls.get(&a.correlation).filter(|_| a.correlation != 0) {
            spans.push((i - st.first, (ce - cs) as f64));
            last_end[i - st.first] = last_end[i - st.first].max(ce);
        }
    }
    let med = median(spans.iter().map(|x| x.1).collect())?;
    for (j, d) in spans {
        blocked[j] += (d - med).max(0.0);
    }
    median(
        (0..n)
            .filter(|&j| last_end[j] > i64::MIN)
            .map(|j| ((last_end[j] - s.starts[st.first + j]) as f64 - blocked[j]).max(0.0))
            .collect(),
    )
}

fn percentile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return 0.0;
    }
    let i = ((s.len() - 1) as f64 * q).round() as usize;
    s[i.min(s.len() - 1)]
}

/// Union length of intervals.
fn union_ns(mut spans: Vec<(i64, i64)>) -> i64 {
    spans.sort_unstable();
    let mut total = 0;
    let mut cur: Option<(i64, i64)> = None;
    for (s, e) in spans {
        match cur {
            Some((cs, ce)) if s <= ce => cur = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                cur = Some((s, e));
            }
            None => cur = Some((s, e)),
        }
    }
    total + cur.map_or(0, |(s, e)| e - s)
}

/// The steady state: which steps are warm-up, and the window of the rest.
struct Steady {
    /// Indices of the steady steps (consecutive).
    first: usize,
    last: usize,
    /// Step of each activity (index into `Steps`), if any.
    step_of: Vec<Option<usize>>,
}

fn steady_steps(t: &Timeline, steps: &Steps, calls: &HashMap<u64, (i64, i64)>) -> Steady {
    let n = steps.starts.len();
    let step_of: Vec<Option<usize>> = t
        .activities
        .iter()
        .map(|a| {
            let at = launched_at(a, calls).0;
            let i = steps.starts.partition_point(|s| *s <= at).checked_sub(1)?;
            let inside = at <= steps.ends[i]
                || (steps.contiguous && steps.starts.get(i + 1).is_some_and(|next| at < *next));
            inside.then_some(i)
        })
        .collect();
    let mut kernels = vec![0usize; n];
    for (a, s) in t.activities.iter().zip(&step_of) {
        if let (Some(i), ActivityKind::Kernel) = (s, a.kind) {
            kernels[*i] += 1;
        }
    }
    let duration = |i: usize| -> f64 {
        let next = steps.starts.get(i + 1).copied().unwrap_or(steps.ends[i]);
        (next.max(steps.ends[i]) - steps.starts[i]) as f64
    };
    // A whole-program trace holds the first call (lazy module loads, cuBLAS
    // handles, autotuning): its first step is warm-up whatever it costs.
    let mut first = usize::from(t.whole_program && n >= 3);
    let rest: Vec<usize> = (first..n).collect();
    let counts: Vec<usize> = rest.iter().map(|&i| kernels[i]).collect();
    let typical = mode(&counts).map_or(0, |m| m.0);
    let durations: Vec<f64> = rest.iter().map(|&i| duration(i)).collect();
    let median_d = percentile(&durations, 0.5);
    while first + 1 < n
        && first < n / 2
        && (duration(first) > WARMUP_FACTOR * median_d || kernels[first] != typical)
    {
        first += 1;
    }
    Steady {
        first,
        last: n - 1,
        step_of,
    }
}

/// Where an activity falls against the steady-state window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Start-up: before the loop's first step (the program's set-up, its
    /// input), cut "steps" that run none of the steady state's kernels
    /// included.
    StartUp,
    /// In a warm-up step that was cut (or between two of them).
    Warmup,
    /// A steady step, or between two of them.
    Steady,
    /// After the last steady step.
    After,
}

/// Each activity's phase (in `t.activities` order), with the steps behind it.
pub struct Phases {
    pub phase: Vec<Phase>,
    pub source: StepSource,
    pub steady_steps: usize,
    pub warmup_steps: usize,
}

/// The phase of every activity against the steady state the summary uses;
/// None without steps.
pub fn phases(t: &Timeline) -> Option<Phases> {
    let spliced = t.spliced();
    let t: &Timeline = &spliced;
    let calls = launch_spans(t);
    let steps = find_steps(t)?;
    let st = steady_steps(t, &steps, &calls);
    let from = steps.starts[st.first];
    // The loop starts at the first step that runs any of the steady
    // state's kernels: a cut "step" of none of them (a burst of set-up
    // launches, e.g. the input generated once) is start-up, not warm-up.
    fn kernel_key(a: &GpuActivity) -> (&str, Option<kopt_model::Dim3>, Option<kopt_model::Dim3>) {
        (a.name.as_str(), a.grid, a.block)
    }
    let in_steady: std::collections::HashSet<_> = t
        .activities
        .iter()
        .zip(&st.step_of)
        .filter(|(a, k)| {
            a.kind == ActivityKind::Kernel && k.is_some_and(|i| (st.first..=st.last).contains(&i))
        })
        .map(|(a, _)| kernel_key(a))
        .collect();
    let loop_step = (0..st.first)
        .find(|&j| {
            t.activities.iter().zip(&st.step_of).any(|(a, k)| {
                *k == Some(j)
                    && a.kind == ActivityKind::Kernel
                    && in_steady.contains(&kernel_key(a))
            })
        })
        .unwrap_or(st.first);
    let first_step = steps.starts[loop_step];
    let until = steps.until(st.last);
    let phase = t
        .activities
        .iter()
        .zip(&st.step_of)
        .map(|(a, k)| match k {
            Some(i) if *i < loop_step => Phase::StartUp,
            Some(i) if *i < st.first => Phase::Warmup,
            Some(_) => Phase::Steady,
            None => {
                let at = launched_at(a, &calls).0;
                if at < first_step {
                    Phase::StartUp
                } else if at < from {
                    Phase::Warmup
                } else if at <= until {
                    Phase::Steady
                } else {
                    Phase::After
                }
            }
        })
        .collect();
    Some(Phases {
        phase,
        source: steps.source,
        steady_steps: st.last + 1 - st.first,
        warmup_steps: st.first - loop_step,
    })
}

pub fn summarize_with_replay(t: &Timeline, replay: (f64, bool)) -> Option<TimelineSummary> {
    if t.activities.is_empty() {
        return None;
    }
    let sampling = sampled_coverage(t);
    // Time between sampled windows was never traced: it is cut, not idle.
    let spliced = t.spliced();
    let t: &Timeline = &spliced;
    let calls = launch_spans(t);
    let trace_start = trace_start_ns(t)?;
    let steps = find_steps(t);
    let steady = steps.as_ref().map(|s| steady_steps(t, s, &calls));

    let mut acts = steady_activities(t, steps.as_ref(), steady.as_ref(), &calls);
    acts.sort_by_key(|a| a.start_ns);
    let (start, window_end) = match (&steps, &steady) {
        (Some(s), Some(st)) => {
            let end = s.until(st.last);
            // Where the host runs ahead of a busy GPU, the first steady
            // step is launched while earlier work still runs: the window
            // opens when that work is done (at the latest at the step's first activity).
            let launched = s.starts[st.first];
            let earlier_end = t
                .activities
                .iter()
                .zip(&st.step_of)
                .filter(|(a, k)| {
                    k.is_none_or(|i| i < st.first) && launched_at(a, &calls).0 < launched
                })
                .map(|(a, _)| a.end_ns)
                .max()
                .unwrap_or(launched);
            let opens = launched.max(earlier_end.min(acts[0].start_ns));
            (opens.min(acts[0].start_ns), end)
        }
        _ => {
            let first_api = t
                .api_calls
                .iter()
                .filter(|c| c.kind != ApiKind::Other)
                .map(|c| c.start_ns)
                .min();
            (
                first_api.map_or(acts[0].start_ns, |s| s.min(acts[0].start_ns)),
                i64::MIN,
            )
        }
    };
    let end = acts
        .iter()
        .map(|a| a.end_ns)
        .max()
        .unwrap_or(start)
        .max(window_end);
    let wall = (end - start).max(1);

    // Union of busy intervals, and the gaps between them (labelled once the
    // largest are known: naming every gap of a long trace costs more than the rest).
    let mut busy = 0i64;
    let mut gaps: Vec<(i64, i64, &GpuActivity, &GpuActivity)> = Vec::new();
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

    let in_window = |c: &&kopt_model::ApiCall| c.start_ns >= start && c.start_ns <= end;
    let launches: HashMap<u64, &kopt_model::ApiCall> = t
        .api_calls
        .iter()
        .filter(|c| matches!(c.kind, ApiKind::KernelLaunch | ApiKind::GraphLaunch))
        .map(|c| (c.correlation, c))
        .collect();
    let kernels: Vec<&&GpuActivity> = acts
        .iter()
        .filter(|a| a.kind == ActivityKind::Kernel)
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
    let count = |kind: ApiKind| {
        t.api_calls
            .iter()
            .filter(|c| c.kind == kind)
            .filter(in_window)
            .count() as u64
    };
    let median_launch = median(
        t.api_calls
            .iter()
            .filter(|c| c.kind == ApiKind::KernelLaunch)
            .filter(in_window)
            .map(|c| (c.end_ns - c.start_ns) as f64)
            .collect(),
    );
    let median_kernel = median(kernels.iter().map(|k| k.duration_ns() as f64).collect());
    let busy_pct = 100.0 * busy as f64 / wall as f64;
    let iterations = steady.as_ref().map(|st| (st.last + 1 - st.first) as u64);
    let fmt = kopt_model::format_duration_ns;

    let step_detection = steps.as_ref().map(|s| kopt_model::StepDetection {
        source: s.source,
        found: s.starts.len() as u64,
        family: s.family.clone(),
        detail: s.detail.clone(),
    });
    let steady_state = match (&steps, &steady) {
        (Some(s), Some(st)) => {
            let startup = (s.starts[0] - trace_start).max(0);
            let warmup = s.starts[st.first] - s.starts[0];
            let trailing_end = t.activities.iter().map(|a| a.end_ns).max().unwrap_or(end);
            let trailing = (trailing_end - end).max(0);
            let mut cut = Vec::new();
            if startup > 0 {
                cut.push(format!(
                    "{} of start-up before the first step",
                    fmt(startup as f64)
                ));
            }
            if st.first > 0 {
                cut.push(format!(
                    "{} warm-up step{} ({}: first call, compilation, allocator growth)",
                    st.first,
                    if st.first == 1 { "" } else { "s" },
                    fmt(warmup as f64)
                ));
            }
            if trailing > 0 {
                cut.push(format!(
                    "{} after the last whole step",
                    fmt(trailing as f64)
                ));
            }
            let description = if cut.is_empty() {
                format!("steady state: all {} steps", st.last + 1 - st.first)
            } else {
                format!(
                    "steady state: {} steps; cut {}",
                    st.last + 1 - st.first,
                    cut.join(", ")
                )
            };
            Some(kopt_model::SteadyState {
                start_ns: start - trace_start,
                end_ns: end - trace_start,
                steps: (st.last + 1 - st.first) as u64,
                startup_ns: startup,
                warmup_steps: st.first as u64,
                warmup_ns: warmup,
                trailing_ns: trailing,
                description,
            })
        }
        _ => None,
    };

    // The window's kernels all come from graph replays: no kernel launch
    // call, at least one graph launch.
    let already_graphed = count(ApiKind::KernelLaunch) == 0 && count(ApiKind::GraphLaunch) > 0;
    // Per-step figures and the graph-capture prediction.
    let graph_prediction = {
        let n = iterations.unwrap_or(1).max(1) as f64;
        let (eager_steps, busy_steps): (Vec<f64>, Vec<f64>) = match (&steps, &steady) {
            (Some(s), Some(st)) => (st.first..=st.last)
                .filter(|&i| i < st.last || st.last == st.first || s.starts.get(i + 1).is_some())
                .map(|i| {
                    let next = s.starts.get(i + 1).copied().unwrap_or(end).max(s.ends[i]);
                    let spans: Vec<(i64, i64)> = t
                        .activities
                        .iter()
                        .zip(&st.step_of)
                        .filter(|(_, k)| **k == Some(i))
                        .map(|(a, _)| (a.start_ns, a.end_ns))
                        .collect();
                    ((next - s.starts[i]) as f64, union_ns(spans) as f64)
                })
                .unzip(),
            _ => (vec![wall as f64], vec![busy as f64]),
        };
        let recorder = t.recorder;
        let per_launch = recorder.overhead_per_launch_ns();
        // A graph replay is one launch call for all its kernels.
        let launch_calls = (count(ApiKind::KernelLaunch) + count(ApiKind::GraphLaunch)) as f64;
        let launches_per_step = if launch_calls > 0.0 {
            launch_calls / n
        } else {
            kernels.len() as f64 / n
        };
        // Framework op ranges (emit_nvtx) in the steps: each costs host
        // time the bare step does not pay.
        let op_ranges_per_step = match (&steps, &steady) {
            (Some(s), Some(st)) => {
                let from = s.starts[st.first];
                let to = s
                    .starts
                    .get(st.last + 1)
                    .copied()
                    .unwrap_or(end)
                    .max(s.ends[st.last]);
                let k = t
                    .ranges
                    .iter()
                    .filter(|r| r.start_ns >= from && r.start_ns < to)
                    .filter(|r| crate::ops::parse_op(&r.name).is_some())
                    .count();
                k as f64 / (st.last + 1 - st.first) as f64
            }
            _ => {
                t.ranges
                    .iter()
                    .filter(|r| crate::ops::parse_op(&r.name).is_some())
                    .count() as f64
                    / n
            }
        };
        let launch_overhead = per_launch * launches_per_step;
        let op_overhead = op_ranges_per_step * kopt_model::NVTX_OP_RANGE_NS;
        let host_traced = host_issue_per_step(t, steps.as_ref(), steady.as_ref(), &calls);
        let overhead = launch_overhead + op_overhead;
        // The mean step period from one step's start to the next: the last
        // step has no next start, and its end (the GPU's last activity)
        // misses the host time that follows it.
        let eager = match (&steps, &steady) {
            (Some(s), Some(st)) if st.last > st.first => {
                let next = s.starts.get(st.last + 1).copied();
                match next {
                    Some(next) => (next - s.starts[st.first]) as f64 / n,
                    None => (s.starts[st.last] - s.starts[st.first]) as f64 / (n - 1.0),
                }
            }
            _ => wall as f64 / n,
        };
        let eager = eager.max(busy as f64 / n);
        let busy_step = busy as f64 / n;
        let kernels_step = kernels.len() as f64 / n;
        let (c, from_table) = replay;
        let warmup_steps = steady.as_ref().map_or(0, |st| st.first);
        let band = recorder.overhead_band();
        let bare = bare_step_periods(
            t,
            steps.as_ref().and_then(|s| s.family.as_deref()),
            warmup_steps,
        )
        .or_else(|| match (&steps, &steady) {
            (Some(s), Some(st)) => {
                bare_sync_periods(t, s, st).or_else(|| bare_launch_periods(t, s, st))
            }
            _ => None,
        });
        let bare_range = t.bare_steps.as_ref().map(|b| b.range.as_str());
        let bare_words = if bare_range == Some(kopt_model::BARE_SYNC_RANGE) {
            "steps of a second run without CUPTI's records, matched to the traced steps by the synchronising calls that end them"
        } else if bare_range.and_then(kopt_model::bare_launch_every).is_some() {
            "steps of a second run without CUPTI's records, timed by the program's clock every step's worth of kernel launch calls (the calls counted, one timed a step), matched to the traced steps by the launch count"
        } else {
            "steps of a second run without CUPTI, only the step ranges timed"
        };
        let (corrected, overhead, per_launch, e_lo, e_hi) = match &bare {
            // Measured without any recorder: nothing to take out.
            Some(p) => {
                // The mean period, as the traced eager time is.
                let bare_eager = (p.iter().sum::<f64>() / p.len() as f64).max(busy_step);
                let measured = (eager - bare_eager).max(0.0);
                (
                    bare_eager,
                    measured,
                    measured / launches_per_step.max(1.0),
                    percentile(p, 0.25).max(percentile(&busy_steps, 0.25)),
                    percentile(p, 0.75).max(percentile(&busy_steps, 0.75)),
                )
            }
            None => match recorder.slowdown() {
                // torch.profiler: its cost grows with the step's host work.
                Some((factor, (f_lo, f_hi))) => {
                    let cap = launches_per_step * kopt_model::KINETO_MAX_NS_PER_LAUNCH;
                    let take = |e: f64, f: f64| e - (e * (1.0 - 1.0 / f)).min(cap);
                    let corrected = take(eager, factor).max(busy_step);
                    let overhead = eager - corrected;
                    (
                        corrected,
                        overhead,
                        overhead / launches_per_step.max(1.0),
                        take(percentile(&eager_steps, 0.25), f_hi)
                            .max(percentile(&busy_steps, 0.25)),
                        take(percentile(&eager_steps, 0.75), f_lo)
                            .max(percentile(&busy_steps, 0.75)),
                    )
                }
                None => (
                    (eager - overhead).max(busy_step),
                    overhead,
                    per_launch,
                    // The recorder's cost strays widely between machines; the
                    // op-range cost is one workload's figure.
                    (percentile(&eager_steps, 0.25) - band.1 * launch_overhead - 1.5 * op_overhead)
                        .max(percentile(&busy_steps, 0.25)),
                    (percentile(&eager_steps, 0.75) - band.0 * launch_overhead - 0.5 * op_overhead)
                        .max(percentile(&busy_steps, 0.75)),
                ),
            },
        };
        let graph = busy_step + kernels_step * c;
        let estimate = corrected / graph.max(1.0);
        let g_lo = percentile(&busy_steps, 0.25) + kernels_step * c * 0.5;
        let g_hi = percentile(&busy_steps, 0.75) + kernels_step * c * 2.0;
        // Replay never costs more than launching the same kernels eagerly.
        let low = (e_lo / g_hi.max(1.0)).max(1.0).min(estimate);
        let high = (e_hi / g_lo.max(1.0)).max(estimate);
        let card = if from_table {
            "this card's figure"
        } else {
            "the Hopper figure, used for cards kopt has no figure for"
        };
        // The recorder's cost taken out can leave less than the GPU's own
        // time: the eager step never runs below it, and the text says so.
        let result = if eager - overhead < corrected {
            format!(
                " = {}, under the GPU-busy time per step, which the eager step never runs below: {}",
                fmt((eager - overhead).max(0.0)),
                fmt(corrected)
            )
        } else {
            format!(" = {}", fmt(corrected))
        };
        let ops_term = if op_ranges_per_step > 0.0 {
            format!(
                " - {:.0} op ranges x {} (PyTorch's op recording, x0.5-1.5 in the range)",
                op_ranges_per_step,
                fmt(kopt_model::NVTX_OP_RANGE_NS)
            )
        } else {
            String::new()
        };
        let model = match &bare {
            Some(p) => format!(
                "speed-up = eager time per step measured bare / (GPU-busy time per step + kernels per step x graph replay cost per kernel): {} eager (mean of {} {bare_words}; {} as traced, so {} cost {} a launch here); {} busy + {:.0} kernels x {} = {} after capture. Range: bare steps' 25th-75th percentiles, replay cost x0.5-2 ({} us per kernel is {card}).",
                fmt(corrected),
                p.len(),
                fmt(eager),
                recorder.as_str(),
                fmt(per_launch),
                fmt(busy_step),
                kernels_step,
                fmt(c),
                fmt(graph),
                c / 1e3,
            ),
            None => match recorder.slowdown() {
                Some((factor, (f_lo, f_hi))) => format!(
                    "speed-up = eager time per step without {rec}'s cost / (GPU-busy time per step + kernels per step x graph replay cost per kernel): {} as traced less {rec}'s cost, {} (a traced step taken as x{factor} the bare one, {rec}'s typical slowdown of a launch-bound PyTorch step, x{f_lo}-{f_hi} across the machines measured; at most {} a launch; the eager time never below the GPU-busy time) = {} eager; {} busy + {:.0} kernels x {} = {} after capture. Range: steps' 25th-75th percentiles, slowdown x{f_lo}-{f_hi}, replay cost x0.5-2 ({} us per kernel is {card}). For a figure to plan with, time the steps bare: `kopt analyze TRACE -- PROGRAM` runs the program again with its profiler stood in for (or `kopt trace -- PROGRAM`).",
                    fmt(eager),
                    fmt(overhead),
                    fmt(kopt_model::KINETO_MAX_NS_PER_LAUNCH),
                    fmt(corrected),
                    fmt(busy_step),
                    kernels_step,
                    fmt(c),
                    fmt(graph),
                    c / 1e3,
                    rec = recorder.as_str(),
                ),
                None => format!(
                    "speed-up = eager time per step without the recorder's cost / (GPU-busy time per step + kernels per step x graph replay cost per kernel): {} - {:.0} launches x {} ({}){ops_term}{result} eager; {} busy + {:.0} kernels x {} = {} after capture. Range: steps' 25th-75th percentiles, recorder cost x{}-{} (what it was across the machines measured), replay cost x0.5-2 ({} us per kernel is {card}).",
                    fmt(eager),
                    launches_per_step,
                    fmt(per_launch),
                    recorder.as_str(),
                    fmt(busy_step),
                    kernels_step,
                    fmt(c),
                    fmt(graph),
                    band.0,
                    band.1,
                    c / 1e3,
                ),
            },
        };
        Some(kopt_model::GraphPrediction {
            eager_per_step_ns: eager,
            recorder_overhead_per_step_ns: overhead,
            recorder_ns_per_launch: per_launch,
            launches_per_step,
            op_ranges_per_step,
            eager_corrected_per_step_ns: corrected,
            eager_measured_bare: bare.is_some(),
            busy_per_step_ns: busy_step,
            kernels_per_step: kernels_step,
            replay_ns_per_kernel: c,
            replay_cost_from_table: from_table,
            graph_per_step_ns: graph,
            speedup: kopt_model::PredictedSpeedup {
                estimate,
                low,
                high,
                model,
            },
            // The recorder's modelled cost (not the bare run's measure,
            // which a GPU-bound step hides) comes off the traced host time.
            host_per_step_ns: host_traced
                .map(|h| (h - launch_overhead - op_overhead).clamp(0.0, corrected)),
        })
        // A step already replayed from a graph has nothing left to capture.
        .filter(|_| !kernels.is_empty() && !already_graphed)
    };

    let window_note = match (&steady_state, &step_detection) {
        (Some(ss), Some(sd)) => format!(
            " (steady state: {} of {} steps, found from {}; {})",
            ss.steps,
            sd.found,
            step_source_words(sd.source),
            ss.description.trim_start_matches("steady state: ")
        ),
        _ => " (no repeating step found: the whole trace)".to_string(),
    };
    // What sets the pace, from the untraced step where a bare run timed it:
    // the recorder's host cost per launch and op makes a GPU-bound step
    // look idle.
    let bare_busy_pct = graph_prediction
        .as_ref()
        .filter(|p| p.eager_measured_bare && p.eager_corrected_per_step_ns > 0.0)
        .map(|p| (100.0 * p.busy_per_step_ns / p.eager_corrected_per_step_ns).min(100.0_f64));
    let pace_pct = bare_busy_pct.unwrap_or(busy_pct);
    let launch_bound = pace_pct < LAUNCH_BOUND_BUSY_PCT
        && match (median_kernel, median_launch) {
            (Some(k), Some(l)) => k <= 2.0 * l,
            (Some(k), None) => k < crate::rules::TINY_KERNEL_NS,
            _ => false,
        };
    let bare_note = match (bare_busy_pct, graph_prediction.as_ref()) {
        (Some(b), Some(p)) => format!(
            " Untraced (bare run): {} a step against {} traced; the GPU is busy {b:.1}% of the untraced step.",
            fmt(p.eager_corrected_per_step_ns),
            fmt(p.eager_per_step_ns)
        ),
        _ => String::new(),
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
    } else if pace_pct >= COMPUTE_BOUND_BUSY_PCT {
        format!(
            "GPU bound: the GPU is busy {pace_pct:.1}% of the {}{window_note}; launch overhead is hidden behind GPU work, so graph capture would not help.",
            if bare_busy_pct.is_some() {
                "untraced step".to_string()
            } else {
                format!("{} window", fmt(wall as f64))
            }
        )
    } else {
        format!(
            "Partly idle: the GPU is busy {busy_pct:.1}% of the {} window{window_note}; see the largest gaps for what the host does in between.",
            fmt(wall as f64)
        )
    };
    let verdict = verdict + &bare_note;
    // Host syncs and host copies inside the steady steps (#35).
    let windows: Vec<(i64, i64)> = match (&steps, &steady) {
        (Some(s), Some(st)) => (st.first..=st.last)
            .map(|i| (s.starts[i], s.until(i)))
            .collect(),
        _ => vec![(start, end)],
    };
    let step_ns = wall as f64 / windows.len().max(1) as f64;
    let host_syncs = crate::host_syncs::summarize(t, &windows, step_ns);
    let host_copies = crate::copies::summarize(t, &windows);
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
        steps: step_detection,
        steady_state,
        graph_prediction,
        host_syncs,
        host_copies,
    })
}

/// How steps were found, in a few words.
pub fn step_source_words(s: StepSource) -> &'static str {
    match s {
        StepSource::ProfilerStep => "ProfilerStep#N markers",
        StepSource::Nvtx => "NVTX ranges",
        StepSource::Sync => "synchronisation calls",
        StepSource::HostGap => "host gaps between bursts of launches",
        StepSource::KernelPattern => "the repeating kernel pattern",
    }
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

/// The activities of the steady state: those of its steps, and those
/// launched between two of its steps (outside a marker, still in the loop);
/// every activity where no steady state was found.
fn steady_activities<'a>(
    t: &'a Timeline,
    steps: Option<&Steps>,
    steady: Option<&Steady>,
    calls: &HashMap<u64, (i64, i64)>,
) -> Vec<&'a GpuActivity> {
    let mut acts: Vec<&'a GpuActivity> = match (steps, steady) {
        (Some(s), Some(st)) => {
            let from = s.starts[st.first];
            let until = s.ends[st.last];
            t.activities
                .iter()
                .zip(&st.step_of)
                .filter(|(a, k)| {
                    k.is_some_and(|i| i >= st.first && i <= st.last) || {
                        let at = launched_at(a, calls).0;
                        k.is_none() && at >= from && at <= until
                    }
                })
                .map(|(a, _)| a)
                .collect()
        }
        _ => t.activities.iter().collect(),
    };
    if acts.is_empty() {
        acts = t.activities.iter().collect();
    }
    acts
}

/// The steady state of a traced run with steps, per step: its time, its
/// launch calls, and its kernels by time (the top `KERNELS_SHOWN`, the rest
/// summed). A kernel node of a replayed CUDA graph is its own activity (the
/// graph launch's correlation id), so graph-replayed kernels are listed by
/// name with their own time and counted as in-graph. None without steps.
/// `run_dir` is left empty for the caller.
pub fn step_profile(t: &Timeline) -> Option<kopt_model::optimize::StepProfile> {
    use kopt_model::optimize::{StepKernel, StepProfile, KERNELS_SHOWN};
    let summary = summarize(t)?;
    let steps = summary.iterations.filter(|&n| n > 0)?;
    let spliced = t.spliced();
    let t: &Timeline = &spliced;
    let calls = launch_spans(t);
    let found = find_steps(t)?;
    let steady = steady_steps(t, &found, &calls);
    let graph_calls: std::collections::HashSet<u64> = t
        .api_calls
        .iter()
        .filter(|c| c.kind == ApiKind::GraphLaunch)
        .map(|c| c.correlation)
        .collect();
    // name -> (launches, total ns, in-graph launches), in first-seen order.
    let mut rows: Vec<(String, u64, i64, u64)> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for a in steady_activities(t, Some(&found), Some(&steady), &calls) {
        if a.kind != ActivityKind::Kernel {
            continue;
        }
        let i = *index.entry(a.name.as_str()).or_insert_with(|| {
            rows.push((a.name.clone(), 0, 0, 0));
            rows.len() - 1
        });
        rows[i].1 += 1;
        rows[i].2 += a.duration_ns();
        rows[i].3 += u64::from(graph_calls.contains(&a.correlation));
    }
    let total: i64 = rows.iter().map(|r| r.2).sum();
    rows.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
    let n = steps as f64;
    let pct = |ns: i64| {
        if total > 0 {
            100.0 * ns as f64 / total as f64
        } else {
            0.0
        }
    };
    let rest = rows.split_off(rows.len().min(KERNELS_SHOWN));
    Some(StepProfile {
        run_dir: String::new(),
        steps,
        step_ns: summary.wall_ns as f64 / n,
        busy_per_step_ns: summary.gpu_busy_ns as f64 / n,
        launches_per_step: (summary.kernel_launch_calls + summary.graph_launches) as f64 / n,
        graph_launches_per_step: summary.graph_launches as f64 / n,
        kernels_per_step: summary.kernels as f64 / n,
        kernels: rows
            .into_iter()
            .map(|(name, launches, ns, in_graph)| StepKernel {
                short_name: kopt_model::kernel_short_name(&name),
                name,
                launches_per_step: launches as f64 / n,
                ns_per_step: ns as f64 / n,
                pct: pct(ns),
                in_graph,
            })
            .collect(),
        other_kernels: rest.len() as u64,
        other_pct: pct(rest.iter().map(|r| r.2).sum()),
    })
}

/// Where the trace starts: its first record of any kind, so start-up
/// (imports, context creation) counts from there. The steady state's
/// bounds in the summary are offsets from it.
pub(crate) fn trace_start_ns(t: &Timeline) -> Option<i64> {
    t.api_calls
        .iter()
        .map(|c| c.start_ns)
        .chain(t.activities.iter().map(|a| a.start_ns))
        .chain(t.ranges.iter().map(|r| r.start_ns))
        .min()
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
            copy: None,
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
            frame: None,
            op: None,
        }
    }

    /// `steps` NVTX `step` ranges of 100 us; in each, one graph launch
    /// replaying three kernels (30, 20, 10 us), all sharing its correlation.
    fn graph_steps(steps: i64) -> Timeline {
        let mut t = Timeline::default();
        for i in 0..steps {
            let at = 1_000_000 + i * 100_000;
            let c = i as u64 + 1;
            t.ranges.push(kopt_model::Range {
                name: "step".into(),
                start_ns: at,
                end_ns: at + 5_000,
            });
            t.api_calls.push(ApiCall {
                kind: ApiKind::GraphLaunch,
                name: "cudaGraphLaunch".into(),
                ..launch(at + 1_000, 3_000, c)
            });
            let mut gpu = at + 10_000;
            for (name, ns) in [("gemm", 30_000), ("gelu", 20_000), ("norm", 10_000)] {
                t.activities.push(GpuActivity {
                    name: name.into(),
                    ..kernel(gpu, ns, c)
                });
                gpu += ns + 1_000;
            }
        }
        t
    }

    #[test]
    fn a_step_profile_lists_graph_replayed_kernels_by_name_per_step() {
        let p = step_profile(&graph_steps(12)).unwrap();
        assert!(p.steps >= 8, "{p:?}");
        assert_eq!(p.kernels_per_step, 3.0);
        assert_eq!(p.graph_launches_per_step, p.launches_per_step);
        let names: Vec<&str> = p.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["gemm", "gelu", "norm"]);
        for (k, ns) in p.kernels.iter().zip([30_000.0, 20_000.0, 10_000.0]) {
            assert_eq!(k.ns_per_step, ns, "{}", k.name);
            assert_eq!(k.launches_per_step, 1.0, "{}", k.name);
            assert_eq!(k.in_graph, p.steps, "{}", k.name);
        }
        assert_eq!(p.kernels[0].pct, 50.0);
        assert_eq!((p.other_kernels, p.other_pct), (0, 0.0));
        assert_eq!(p.busy_per_step_ns, 60_000.0);
        // Kernels launched one by one are not graph nodes.
        let mut t = graph_steps(12);
        for c in &mut t.api_calls {
            c.kind = ApiKind::KernelLaunch;
        }
        let p = step_profile(&t).unwrap();
        assert!(p.kernels.iter().all(|k| k.in_graph == 0));
        assert_eq!(p.graph_launches_per_step, 0.0);
        // No steps, no steady state to take figures from.
        assert!(step_profile(&Timeline::default()).is_none());
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
            frame: None,
            op: None,
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
            copy: None,
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

    /// Ten steps of three kernels, each step marked by an NVTX range;
    /// `graphed`: each step one cudaGraphLaunch replaying the three.
    fn three_kernel_steps(graphed: bool) -> Timeline {
        let mut t = Timeline::default();
        let mut corr = 0u64;
        for i in 0..10i64 {
            let at = i * 100_000;
            t.ranges.push(kopt_model::Range {
                name: "step".into(),
                start_ns: at,
                end_ns: at + 60_000,
            });
            if graphed {
                corr += 1;
                let mut g = launch(at + 1_000, 5_000, corr);
                g.kind = ApiKind::GraphLaunch;
                t.api_calls.push(g);
            }
            for k in 0..3i64 {
                if !graphed {
                    corr += 1;
                    t.api_calls
                        .push(launch(at + 1_000 + k * 8_000, 6_000, corr));
                }
                let mut a = kernel(at + 10_000 + k * 15_000, 12_000, corr);
                a.name = format!("k{k}");
                t.activities.push(a);
            }
        }
        t
    }

    #[test]
    fn a_step_replayed_from_a_graph_gets_no_capture_prediction() {
        let s = summarize(&three_kernel_steps(true)).unwrap();
        assert_eq!(s.kernel_launch_calls, 0);
        assert!(s.graph_launches >= 9);
        assert!(s.graph_prediction.is_none(), "{:?}", s.graph_prediction);
        // The same steps launched one kernel at a time: a prediction.
        let s = summarize(&three_kernel_steps(false)).unwrap();
        assert!(s.graph_prediction.is_some());
    }

    #[test]
    fn a_recorder_cost_over_the_idle_time_is_floored_in_words_and_figure() {
        // 100 us steps, 36 us of kernels: three launches of the tracer's
        // cost leave the eager step above the busy time.
        let mut t = three_kernel_steps(false);
        t.recorder = kopt_model::Recorder::KoptTracer;
        let s = summarize(&t).unwrap();
        let p = s.graph_prediction.unwrap();
        assert!(p.eager_corrected_per_step_ns > p.busy_per_step_ns);
        assert!(!p.speedup.model.contains("never runs below"));
        // Steps 40 us apart: the recorder's cost takes the eager step under
        // the GPU's 36 us of kernels; the words give both figures.
        for (i, r) in t.ranges.iter_mut().enumerate() {
            r.start_ns = i as i64 * 40_000;
            r.end_ns = r.start_ns + 39_000;
        }
        for (i, a) in t.activities.iter_mut().enumerate() {
            let (step, k) = ((i / 3) as i64, (i % 3) as i64);
            a.start_ns = step * 40_000 + 2_000 + k * 12_000;
            a.end_ns = a.start_ns + 12_000;
        }
        for (i, c) in t.api_calls.iter_mut().enumerate() {
            let (step, k) = ((i / 3) as i64, (i % 3) as i64);
            c.start_ns = step * 40_000 + k * 12_000;
            c.end_ns = c.start_ns + 1_500;
        }
        let s = summarize(&t).unwrap();
        let p = s.graph_prediction.unwrap();
        assert_eq!(p.eager_corrected_per_step_ns, p.busy_per_step_ns);
        let m = &p.speedup.model;
        assert!(m.contains("never runs below"), "{m}");
        assert!(
            m.contains(&format!(
                "never runs below: {} eager",
                kopt_model::format_duration_ns(p.eager_corrected_per_step_ns)
            )),
            "{m}"
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

    /// A program without ranges: `warmup` steps (one trial kernel more each,
    /// as cuDNN's benchmark search), then `steps` forward passes of
    /// `layers` identical 4-kernel layers and a head kernel; the model syncs
    /// after every `sync_every` layers (its own `.item()`), the loop copies
    /// the result back and syncs after each step, then the host pauses
    /// `loop_ns` before the next.
    fn forward_passes(
        warmup: usize,
        steps: usize,
        layers: usize,
        sync_every: usize,
        loop_ns: i64,
    ) -> Timeline {
        let mut t = Timeline::default();
        let mut c = 1u64;
        let mut at = 1_000_000i64;
        let sync = |t: &mut Timeline, at: &mut i64| {
            t.api_calls.push(ApiCall {
                kind: ApiKind::Synchronize,
                name: "cudaStreamSynchronize".into(),
                start_ns: *at,
                end_ns: *at + 2_000,
                thread: 1,
                correlation: 0,
                frame: None,
                op: None,
            });
            *at += 3_000;
        };
        for step in 0..warmup + steps {
            let mut push = |t: &mut Timeline, at: &mut i64, name: String| {
                t.api_calls.push(launch(*at, 4_000, c));
                let mut k = kernel(*at + 5_000, 2_000, c);
                k.name = name;
                t.activities.push(k);
                c += 1;
                *at += 5_000;
            };
            if step < warmup {
                push(&mut t, &mut at, "trial_algo".into());
            }
            for layer in 0..layers {
                for k in 0..4 {
                    push(&mut t, &mut at, format!("layer_op_{k}"));
                }
                if sync_every > 0 && (layer + 1) % sync_every == 0 {
                    sync(&mut t, &mut at);
                }
            }
            push(&mut t, &mut at, "head".into());
            sync(&mut t, &mut at);
            at += loop_ns;
        }
        t
    }

    /// The sync ends of a bare run of `forward_passes(warmup, steps, 6, 2,
    /// _)` (four syncs a step), `lead` extra calls at start-up, steps of
    /// `period_ns`.
    fn bare_syncs(
        warmup: usize,
        steps: usize,
        lead: usize,
        period_ns: i64,
    ) -> kopt_model::BareSteps {
        let mut ends: Vec<i64> = (0..lead as i64).map(|i| 10_000 + i).collect();
        for step in 0..(warmup + steps) as i64 {
            for k in 1..=4 {
                let e = 5_000_000 + step * period_ns + k * period_ns / 4;
                ends.push(e);
            }
        }
        kopt_model::BareSteps {
            range: kopt_model::BARE_SYNC_RANGE.into(),
            spans_ns: ends.into_iter().map(|e| (e, e)).collect(),
        }
    }

    #[test]
    fn a_program_without_ranges_is_timed_bare_by_its_sync_calls() {
        // 25 launches, 4 syncs and 50 us of host work a step: 187 us traced.
        for lead in [0, 3] {
            let mut t = forward_passes(2, 12, 6, 2, 50_000);
            t.recorder = kopt_model::Recorder::KoptTracer;
            t.bare_steps = Some(bare_syncs(2, 12, lead, 120_000));
            let g = summarize(&t).unwrap().graph_prediction.unwrap();
            assert!(g.eager_measured_bare, "lead {lead}: {}", g.speedup.model);
            assert!(
                (g.eager_corrected_per_step_ns - 120_000.0).abs() < 1.0,
                "lead {lead}: {}",
                g.eager_corrected_per_step_ns
            );
            assert!(
                (g.eager_per_step_ns - 187_000.0).abs() < 1_000.0,
                "{}",
                g.eager_per_step_ns
            );
            // The recorder's cost a launch is what the two runs differ by.
            assert!((g.recorder_ns_per_launch - 67_000.0 / 25.0).abs() < 50.0);
            assert!(
                g.speedup.model.contains("synchronising calls"),
                "{}",
                g.speedup.model
            );
        }
    }

    /// A launch-count bare run of `forward_passes(warmup, steps, 6, _, _)`
    /// (25 launches a step, one more in each warm-up step), every 25th
    /// launch call timed, steps of `period_ns`, `lead` extra launches at
    /// start-up.
    fn bare_launch_marks(
        warmup: usize,
        steps: usize,
        lead: i64,
        period_ns: i64,
    ) -> kopt_model::BareSteps {
        // Start-up and the first call (its algorithm trials) slow, then
        // launches at the step's pace.
        let per_step = 25i64;
        let warm = lead + per_step + 1;
        let total = lead + warmup as i64 * (per_step + 1) + steps as i64 * per_step;
        let time_of = |n: i64| {
            if n < warm {
                1_000_000 + n * 100_000
            } else {
                9_000_000 + (n - warm) * period_ns / per_step
            }
        };
        kopt_model::BareSteps {
            range: kopt_model::bare_launch_range(per_step as u64),
            spans_ns: (0..total)
                .step_by(per_step as usize)
                .map(|n| (time_of(n), n))
                .collect(),
        }
    }

    #[test]
    fn a_program_without_ranges_or_syncs_is_timed_bare_by_its_launch_count() {
        // No sync call at all: the steps come from the kernel sequence and
        // the host's pause between forward passes.
        for lead in [0, 7] {
            let mut t = forward_passes(2, 12, 6, 0, 50_000);
            t.api_calls.retain(|c| c.kind != ApiKind::Synchronize);
            t.recorder = kopt_model::Recorder::KoptTracer;
            let s = summarize(&t).unwrap();
            assert_eq!(s.sync_calls, 0);
            let traced = s.graph_prediction.unwrap();
            assert!(!traced.eager_measured_bare);
            t.bare_steps = Some(bare_launch_marks(2, 12, lead, 120_000));
            let g = summarize(&t).unwrap().graph_prediction.unwrap();
            assert!(g.eager_measured_bare, "lead {lead}: {}", g.speedup.model);
            assert!(
                (g.eager_corrected_per_step_ns - 120_000.0).abs() < 1.0,
                "lead {lead}: {}",
                g.eager_corrected_per_step_ns
            );
            assert!(
                g.speedup.model.contains("kernel launch calls"),
                "{}",
                g.speedup.model
            );
        }
        // Marks that come out slower than the traced steps did not line up
        // with them: the trace's own estimate stands.
        let mut t = forward_passes(2, 12, 6, 0, 50_000);
        t.api_calls.retain(|c| c.kind != ApiKind::Synchronize);
        t.recorder = kopt_model::Recorder::KoptTracer;
        t.bare_steps = Some(bare_launch_marks(2, 12, 0, 400_000));
        let g = summarize(&t).unwrap().graph_prediction.unwrap();
        assert!(!g.eager_measured_bare);
        // Nor does another program's range count.
        t.bare_steps = Some(kopt_model::BareSteps {
            range: "step".into(),
            spans_ns: vec![(0, 10), (20, 30), (40, 50), (60, 70), (80, 90)],
        });
        assert!(
            !summarize(&t)
                .unwrap()
                .graph_prediction
                .unwrap()
                .eager_measured_bare
        );
    }

    #[test]
    fn bare_sync_ends_that_do_not_match_the_steps_are_not_used() {
        let mut t = forward_passes(2, 12, 6, 2, 50_000);
        t.recorder = kopt_model::Recorder::KoptTracer;
        // Slower than traced: the two runs' calls do not line up.
        t.bare_steps = Some(bare_syncs(2, 12, 0, 400_000));
        let g = summarize(&t).unwrap().graph_prediction.unwrap();
        assert!(!g.eager_measured_bare);
        // Too few calls for the steps.
        t.bare_steps = Some(bare_syncs(0, 2, 0, 120_000));
        assert!(
            !summarize(&t)
                .unwrap()
                .graph_prediction
                .unwrap()
                .eager_measured_bare
        );
        // Another range's steps are not sync ends.
        let mut other = bare_syncs(2, 12, 0, 120_000);
        other.range = "step".into();
        t.bare_steps = Some(other);
        assert!(
            !summarize(&t)
                .unwrap()
                .graph_prediction
                .unwrap()
                .eager_measured_bare
        );
    }

    #[test]
    fn a_program_without_ranges_steps_by_its_forward_pass() {
        // Nested layers, the model's own syncs inside the step, warm-up
        // before: the step is the forward pass (6 x 4 + 1 kernels).
        for (sync_every, loop_ns) in [(0, 50_000), (2, 50_000), (1, 200_000), (0, 0)] {
            let t = forward_passes(2, 12, 6, sync_every, loop_ns);
            let s = find_steps(&t).unwrap();
            let kernels_per_step = 25;
            let n = s.starts.len();
            assert!(
                (12..=14).contains(&n),
                "sync every {sync_every}, loop {loop_ns}: {n} steps: {}",
                s.detail
            );
            let sum = summarize(&t).unwrap();
            assert_eq!(
                sum.kernels_per_iteration,
                Some(kernels_per_step as f64),
                "sync every {sync_every}, loop {loop_ns}: {}",
                s.detail
            );
        }
    }

    #[test]
    fn a_long_warm_up_does_not_hide_the_step() {
        // cuDNN's algorithm search: thousands of trial launches before the
        // loop fill more than half of the kernels; the step is still found.
        let mut t = forward_passes(0, 12, 6, 0, 50_000);
        for (c, i) in (1_000_000u64..).zip(0..2_000i64) {
            let at = -50_000_000 + i * 20_000;
            t.api_calls.push(launch(at, 4_000, c));
            let mut k = kernel(at + 5_000, 2_000, c);
            k.name = format!("trial_{}", i % 37);
            t.activities.push(k);
        }
        let sum = summarize(&t).unwrap();
        assert_eq!(sum.kernels_per_iteration, Some(25.0), "{}", sum.verdict);
    }

    #[test]
    fn a_sync_after_every_layer_is_not_a_step() {
        // The model syncs after every layer and the loop pauses no longer
        // than a layer sync: the step is still the period of the sequence
        // (the head kernel makes the layer period repeat imperfectly).
        let t = forward_passes(0, 10, 6, 1, 0);
        let sum = summarize(&t).unwrap();
        assert_eq!(sum.kernels_per_iteration, Some(25.0), "{}", sum.verdict);
    }

    #[test]
    fn a_pattern_of_layers_reports_the_step_it_nests_in() {
        // 10 steps of 6 layers x 4 kernels, evenly spaced (no gaps, syncs or
        // markers); the first layer's GEMM has another grid (input width):
        // the step (24 kernels) is justified, the layer (4) repeats inside it.
        let mut t = Timeline::default();
        let mut c = 1u64;
        for step in 0..10 {
            for layer in 0..6 {
                for k in 0..4 {
                    let at = c as i64 * 10_000;
                    t.api_calls.push(launch(at, 5_000, c));
                    let mut a = kernel(at + 6_000, 3_000, c);
                    a.name = format!("layer_op_{k}");
                    let x = if layer == 0 && k == 0 { 7 } else { 64 };
                    a.grid = Some(kopt_model::Dim3 { x, y: 1, z: 1 });
                    t.activities.push(a);
                    c += 1;
                }
            }
            let _ = step;
        }
        let steps = find_steps(&t).unwrap();
        assert_eq!(steps.source, StepSource::KernelPattern);
        assert_eq!(steps.starts.len(), 10, "{}", steps.detail);
        assert!(
            steps.detail.contains("shorter pattern of 4"),
            "{}",
            steps.detail
        );
        let s = summarize(&t).unwrap();
        assert_eq!(s.kernels_per_iteration, Some(24.0));
    }

    #[test]
    fn warm_up_steps_are_cut_from_the_window() {
        // 8 steps of 3 kernels with host gaps; the first step is 5x slower (compilation).
        let mut t = Timeline::default();
        let mut c = 1u64;
        let mut at = 1_000_000i64;
        for step in 0..8 {
            for _ in 0..3 {
                t.api_calls.push(launch(at, 2_000, c));
                t.activities.push(kernel(at + 3_000, 2_000, c));
                c += 1;
                at += if step == 0 { 200_000 } else { 3_000 };
            }
            at += 100_000;
        }
        let s = summarize(&t).unwrap();
        let ss = s.steady_state.unwrap();
        // The slow first step's own pauses split it into three bursts of one
        // kernel: all three are warm-up, the 7 alike steps remain.
        assert_eq!(ss.steps, 7, "{}", s.verdict);
        assert!(ss.warmup_steps >= 1 && ss.warmup_ns >= 600_000, "{ss:?}");
        assert_eq!(s.steps.unwrap().source, StepSource::HostGap);
        assert_eq!(s.kernels, 21);
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
