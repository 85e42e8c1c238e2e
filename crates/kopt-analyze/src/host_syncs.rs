//! The host waiting for the GPU inside a step (#35): `.item()`, `.cpu()`,
//! `.tolist()`, printing a tensor, `torch.cuda.synchronize`, data-dependent
//! shapes (`nonzero`, boolean masks) and blocking copies. Each such sync
//! that has more launches after it in its step stops the host from running
//! ahead: the GPU idles from the sync's return until the host has launched
//! the next work, and CUDA graph capture of the step is impossible. A sync
//! that ends the step (after its last launch) costs neither, and is left out.

use std::collections::BTreeMap;

use kopt_model::{
    ActivityKind, ApiCall, ApiKind, GpuActivity, HostSyncs, MemoryKind, PredictedSpeedup,
    Recommendation, SyncSite, Timeline,
};

/// Id of the finding.
pub const ID: &str = "remove_host_syncs";

/// The GPU's idle after the syncs (waiting for the host to launch again),
/// as a share of the step, from which the host and the GPU are taken to
/// take turns (GPU time saved then comes off the step in full). The host's
/// wait alone says the GPU sets the pace, which the busy share covers.
const SERIALIZED_SHARE: f64 = 0.10;

/// Sites listed by name in the finding; the rest are counted.
const SITES_SHOWN: usize = 4;

/// Whether a call makes the host wait for the GPU: a synchronize call, or a
/// read back the host waits for (`cudaMemcpy` without Async, or an async
/// copy into pageable memory, which the driver stages synchronously).
/// Input copies to the device are the copies finding's (`copies.rs`).
fn blocks(call: &ApiCall, copy: Option<&GpuActivity>) -> bool {
    match call.kind {
        ApiKind::Synchronize => true,
        ApiKind::Memory => {
            let lower = call.name.to_ascii_lowercase();
            let to_device = lower.contains("htod")
                || copy
                    .and_then(|a| a.copy)
                    .is_some_and(|k| k.direction == kopt_model::CopyDirection::HostToDevice);
            if lower.contains("memset") || to_device {
                return false;
            }
            let pageable = copy
                .and_then(|a| a.copy)
                .is_some_and(|k| k.src == MemoryKind::Pageable || k.dst == MemoryKind::Pageable);
            !lower.contains("async") || pageable
        }
        _ => false,
    }
}

/// What a sync is in the user's terms, from the op that made it or the call.
pub fn what(op: Option<&str>, api: &str) -> String {
    let op = op.unwrap_or("");
    let named = match op {
        "aten::item" | "aten::_local_scalar_dense" => {
            Some(".item() (a tensor read as a Python number)")
        }
        "aten::is_nonzero" => Some("a tensor used as a Python bool (if tensor: ...)"),
        "aten::nonzero" | "aten::nonzero_static" | "aten::argwhere" => {
            Some("nonzero() (a data-dependent shape)")
        }
        "aten::masked_select" | "aten::index" | "aten::index_put_" => {
            Some("a boolean mask index (a data-dependent shape)")
        }
        "aten::unique" | "aten::_unique2" | "aten::unique_consecutive" => {
            Some("unique() (a data-dependent shape)")
        }
        "aten::repeat_interleave" => Some("repeat_interleave() (a data-dependent shape)"),
        "aten::tolist" => Some(".tolist()"),
        "aten::equal" => Some("torch.equal (read on the host)"),
        _ => None,
    };
    if let Some(n) = named {
        return n.into();
    }
    if matches!(op, "aten::to" | "aten::_to_copy" | "aten::copy_") {
        return ".cpu() / .to(\"cpu\") / a blocking copy".into();
    }
    let lower = api.to_ascii_lowercase();
    if lower.contains("devicesynchronize") {
        "torch.cuda.synchronize() (or cudaDeviceSynchronize)".into()
    } else if lower.contains("memcpy") {
        "a blocking copy (.cpu(), .item(), .tolist(), printing a tensor, or pageable memory)".into()
    } else if lower.contains("eventsynchronize") {
        "an event wait (Event.synchronize / elapsed_time)".into()
    } else {
        "a stream sync (.item(), .cpu(), .tolist(), printing a tensor, or torch.cuda.synchronize())"
            .into()
    }
}

/// The timeline's calls and GPU work in time order, as the sync search
/// looks them up.
struct SyncIndex<'t> {
    /// Copies by correlation id.
    copies: rustc_hash::FxHashMap<u64, &'t GpuActivity>,
    /// Kernel and graph launch starts, sorted.
    launches: Vec<i64>,
    /// Every GPU activity's start, sorted.
    gpu_starts: Vec<i64>,
    /// Host-to-device copy calls' starts, sorted.
    input_copies: Vec<i64>,
}

impl<'t> SyncIndex<'t> {
    fn new(t: &'t Timeline) -> Self {
        let copies: rustc_hash::FxHashMap<u64, &GpuActivity> = t
            .activities
            .iter()
            .filter(|a| a.kind == ActivityKind::Memcpy)
            .map(|a| (a.correlation, a))
            .collect();
        let launches = sorted_launch_starts(t);
        let mut gpu_starts: Vec<i64> = t.activities.iter().map(|a| a.start_ns).collect();
        gpu_starts.sort_unstable();
        // Copies to the device: a blocking copy's own sync is the copies
        // finding's (`copies.rs`), not a read the user wrote.
        let mut input_copies: Vec<i64> = t
            .api_calls
            .iter()
            .filter(|c| c.kind == ApiKind::Memory && c.correlation != 0)
            .filter(|c| {
                copies.get(&c.correlation).is_some_and(|a| {
                    a.copy
                        .is_some_and(|k| k.direction == kopt_model::CopyDirection::HostToDevice)
                })
            })
            .map(|c| c.start_ns)
            .collect();
        input_copies.sort_unstable();
        SyncIndex {
            copies,
            launches,
            gpu_starts,
            input_copies,
        }
    }

    /// Blocking calls in order, grouped: those with no launch between them
    /// are one sync (`.item()` is a copy into pageable memory, then a
    /// stream sync).
    fn blocking_groups<'c>(&self, calls: &'c [ApiCall]) -> Vec<Vec<&'c ApiCall>> {
        let mut blocking: Vec<&ApiCall> = calls
            .iter()
            .filter(|c| blocks(c, self.copies.get(&c.correlation).copied()))
            .collect();
        blocking.sort_by_key(|c| c.start_ns);
        let mut groups: Vec<Vec<&ApiCall>> = Vec::new();
        for c in blocking {
            let joins = groups.last().and_then(|g| g.last()).is_some_and(|prev| {
                let after_prev = self.launches.partition_point(|s| *s < prev.end_ns);
                self.launches
                    .get(after_prev)
                    .is_none_or(|s| *s > c.start_ns)
            });
            match groups.last_mut() {
                Some(g) if joins => g.push(c),
                _ => groups.push(vec![c]),
            }
        }
        groups
    }

    /// Whether a host-to-device copy came before `at` with no launch between.
    fn follows_input_copy(&self, at: i64) -> bool {
        let i = self.input_copies.partition_point(|s| *s <= at);
        i.checked_sub(1).is_some_and(|j| {
            let copy = self.input_copies[j];
            let after = self.launches.partition_point(|s| *s < copy);
            self.launches.get(after).is_none_or(|s| *s > at)
        })
    }

    /// For a group that stops the host mid-step (inside a steady step, not
    /// after an input copy, with more work launched after it in the same
    /// step): how long the GPU then sat idle. None: not mid-step.
    fn mid_step_idle(&self, g: &[&ApiCall], windows: &[(i64, i64)]) -> Option<f64> {
        let (first, last) = (g[0], g[g.len() - 1]);
        if self.follows_input_copy(first.start_ns) {
            return None;
        }
        // Its step: the window holding its start.
        let w = windows.partition_point(|w| w.0 <= first.start_ns);
        let &(_, step_end) = w.checked_sub(1).map(|i| &windows[i])?;
        // A step runs up to (not including) the next one's start.
        if first.start_ns >= step_end {
            return None;
        }
        // More work launched after it in the same step: mid-step.
        let next_launch = self.launches.partition_point(|s| *s < last.end_ns);
        if self
            .launches
            .get(next_launch)
            .is_none_or(|s| *s >= step_end)
        {
            return None;
        }
        let next_gpu = self.gpu_starts.partition_point(|s| *s < last.end_ns);
        Some(
            self.gpu_starts
                .get(next_gpu)
                .map_or(0.0, |s| (s - last.end_ns).max(0) as f64),
        )
    }
}

/// Sites keyed by (user frame, op, API call): count, wait, idle after.
type SiteTotals = BTreeMap<(Option<String>, Option<String>, String), [f64; 3]>;

/// The mid-step syncs' totals over every steady step.
#[derive(Default)]
struct SyncTotals {
    n: usize,
    in_optimizer: usize,
    wait: f64,
    idle: f64,
    op_host: f64,
    frames_known: bool,
    last_op_span: Option<(i64, i64)>,
    sites: SiteTotals,
}

impl SyncTotals {
    /// One mid-step sync (a group of blocking calls) and the GPU idle after it.
    fn add(&mut self, g: &[&ApiCall], idle_after: f64) {
        let w_ns: f64 = g
            .iter()
            .map(|c| (c.end_ns - c.start_ns).max(0) as f64)
            .sum();
        self.n += 1;
        self.wait += w_ns;
        self.idle += idle_after;
        // The op's own host time, once per op (its calls share it).
        let span = g.iter().find_map(|c| c.op_span);
        self.op_host += match span {
            Some(s) if Some(s) != self.last_op_span => (s.1 - s.0).max(0) as f64,
            Some(_) => 0.0,
            None => w_ns,
        };
        self.last_op_span = span.or(self.last_op_span);
        // The site: the user's line and the op where any call of the group
        // has them; the call that waited longest.
        let frame = g.iter().find_map(|c| c.frame.clone());
        let op = g.iter().find_map(|c| c.op.clone());
        let longest = g
            .iter()
            .max_by_key(|c| c.end_ns - c.start_ns)
            .unwrap_or(&g[0]);
        self.frames_known |= frame.is_some();
        let api = longest
            .name
            .split("_v")
            .next()
            .unwrap_or(&longest.name)
            .to_string();
        let e = self.sites.entry((frame, op, api)).or_insert([0.0; 3]);
        e[0] += 1.0;
        e[1] += w_ns;
        e[2] += idle_after;
    }
}

/// Sites per step, the costliest (wait and idle after) first.
fn sites_per_step(sites: SiteTotals, steps: f64) -> Vec<SyncSite> {
    let mut sites: Vec<SyncSite> = sites
        .into_iter()
        .map(|((frame, op, api), [count, w, i])| SyncSite {
            what: what(op.as_deref(), &api),
            frame,
            op,
            api,
            per_step: count / steps,
            wait_per_step_ns: w / steps,
            gpu_idle_after_per_step_ns: i / steps,
        })
        .collect();
    sites.sort_by(|a, b| {
        (b.gpu_idle_after_per_step_ns + b.wait_per_step_ns)
            .total_cmp(&(a.gpu_idle_after_per_step_ns + a.wait_per_step_ns))
    });
    sites
}

/// The host syncs inside `windows` (the steady steps' host spans, in
/// order): each blocking call with a kernel launch after it in its step;
/// those inside `optimizer` (the optimizer's step ranges, sorted) counted
/// apart too.
pub fn summarize(
    t: &Timeline,
    windows: &[(i64, i64)],
    optimizer: &[(i64, i64)],
    step_ns: f64,
    busy_per_step_ns: f64,
    recorder_overhead_per_step_ns: f64,
) -> Option<HostSyncs> {
    if windows.is_empty() {
        return None;
    }
    let index = SyncIndex::new(t);
    let mut totals = SyncTotals::default();
    for g in &index.blocking_groups(&t.api_calls) {
        if let Some(idle_after) = index.mid_step_idle(g, windows) {
            totals.add(g, idle_after);
            let at = g[0].start_ns;
            let i = optimizer.partition_point(|r| r.0 <= at);
            totals.in_optimizer += usize::from(i > 0 && at < optimizer[i - 1].1);
        }
    }
    if totals.n == 0 {
        return None;
    }
    let steps = windows.len() as f64;
    let (wait, idle, op_host) = (
        totals.wait / steps,
        totals.idle / steps,
        (totals.op_host / steps).max(totals.wait / steps),
    );
    Some(HostSyncs {
        steps: windows.len() as u64,
        mid_step_per_step: totals.n as f64 / steps,
        in_optimizer_per_step: totals.in_optimizer as f64 / steps,
        wait_per_step_ns: wait,
        gpu_idle_after_per_step_ns: idle,
        op_host_per_step_ns: op_host,
        step_ns,
        gpu_busy_per_step_ns: busy_per_step_ns,
        recorder_overhead_per_step_ns: recorder_overhead_per_step_ns.clamp(0.0, 0.9 * step_ns),
        serialized: step_ns > 0.0 && idle / step_ns >= SERIALIZED_SHARE,
        sites: sites_per_step(totals.sites, steps),
        frames_known: totals.frames_known,
    })
}

/// A site in words: what it is, where, how often.
fn site_words(s: &SyncSite) -> String {
    let fmt = kopt_model::format_duration_ns;
    let at = s
        .frame
        .as_deref()
        .map_or(String::new(), |f| format!(" at {}", f));
    format!(
        "{}{at} ({:.1} a step via {}; host waits {}, GPU idles {} after)",
        s.what,
        s.per_step,
        s.api,
        fmt(s.wait_per_step_ns),
        fmt(s.gpu_idle_after_per_step_ns)
    )
}

/// Why graph capture cannot be recommended for this step, in words that
/// name the first site.
pub fn capture_blocker(h: &HostSyncs) -> String {
    let first = h.sites.first();
    let what = first.map_or("a host sync".to_string(), |s| {
        let short = s.what.split(" (").next().unwrap_or(&s.what).to_string();
        match &s.frame {
            Some(f) => format!("{short} at {}", f),
            None => short,
        }
    });
    format!(
        "CUDA graph capture (and torch.compile's reduce-overhead) is impossible while {what} syncs inside the step ({:.1} syncs a step); moving the syncs out of the step, or keeping the values on the GPU, would make it legal",
        h.mid_step_per_step
    )
}

/// The finding: remove the syncs from the step, with the step it predicts.
pub fn recommend(h: &HostSyncs) -> Option<Recommendation> {
    let fmt = kopt_model::format_duration_ns;
    // The step as it runs unrecorded. The syncing ops' host time is taken
    // as recorded: their calls into the driver are what the recorder
    // slows least (the suite's H200 captures: 1.5-1.9x against 2.1-2.9x
    // measured, under-predicted either way).
    let wall = h.step_ns - h.recorder_overhead_per_step_ns;
    if wall <= 0.0 || h.step_ns <= 0.0 {
        return None;
    }
    // Without the syncs the host runs ahead of the GPU: the step takes as
    // long as the busier of the two, the host's time outside the syncing
    // ops (their work and wait go with them) or the GPU's busy time. Low:
    // only the GPU's idle after each sync is hidden.
    let host_active = (wall - h.op_host_per_step_ns.max(h.wait_per_step_ns)).max(1.0);
    let after = host_active.max(h.gpu_busy_per_step_ns).min(wall).max(1.0);
    let estimate = wall / after;
    let high = estimate;
    let low =
        (wall / (wall - h.gpu_idle_after_per_step_ns.min(wall - after)).max(1.0)).min(estimate);
    let hidden = wall - after;
    // The syncs are named even where removing them gains nothing on its
    // own (the GPU sets the pace): they are what stops graph capture.
    let priced = estimate >= 1.005;
    let shown: Vec<String> = h.sites.iter().take(SITES_SHOWN).map(site_words).collect();
    let more = h.sites.len().saturating_sub(SITES_SHOWN);
    let more = if more > 0 {
        format!("; and {more} more site(s)")
    } else {
        String::new()
    };
    let frames = if h.frames_known {
        String::new()
    } else {
        " Source lines unknown: a torch.profiler trace with with_stack=True (or `kopt profile --script --ops`) names each one.".into()
    };
    let serial = if h.serialized {
        " The host and the GPU take turns: GPU time saved comes off the step in full."
    } else {
        ""
    };
    let alone = if priced {
        ""
    } else {
        " The GPU sets the pace: removing them gains little on its own, but it makes graph capture legal."
    };
    let evidence = format!(
        "{:.1} host syncs a step inside the step (more launches follow each): {}{more}. Per step the host waits {} in them and the GPU idles {} after them, of a {} step.{serial}{alone} {}.{frames}",
        h.mid_step_per_step,
        shown.join("; "),
        fmt(h.wait_per_step_ns),
        fmt(h.gpu_idle_after_per_step_ns),
        fmt(wall),
        capture_blocker(h)
    );
    let model = format!(
        "step after = the busier of the host (its time not blocked in the syncs, {}) and the GPU ({} busy): {} -> {} ({} saved); low: only the GPU's idle after the syncs hidden",
        fmt(host_active),
        fmt(h.gpu_busy_per_step_ns),
        fmt(wall),
        fmt(after),
        fmt(hidden)
    );
    Some(Recommendation {
        rank: 0,
        id: ID.into(),
        title: "Remove host syncs from the step".into(),
        kernel: "the step's host syncs".into(),
        kernel_short: format!("{:.0} syncs a step", h.mid_step_per_step.round()),
        class: kopt_model::BottleneckClass::Sync,
        evidence,
        action: "Keep values on the GPU instead of reading them on the host inside the step: no .item()/.cpu()/.tolist()/print of a tensor per layer (log every N steps, after the step); torch.where or masking with fixed shapes instead of nonzero() or boolean indexing; non_blocking=True copies into pinned memory; no torch.cuda.synchronize() in the step. Then the host runs ahead of the GPU, and the step can be captured in a CUDA graph.".into(),
        source: "Nsight Systems' sync-API and blocking-copy rules; HTA's host wait".into(),
        gain: priced.then(|| kopt_model::GainEstimate {
            kernel_pct: 0.0,
            workload_pct: 100.0 * (1.0 - 1.0 / estimate.max(1.0)),
            saved_ns: (wall - after) * h.steps as f64,
            method: model.clone(),
        }),
        predicted_speedup: priced.then_some(PredictedSpeedup {
            estimate,
            low,
            high,
            model,
        }),
    })
}

/// Every kernel and graph launch call's host start, sorted.
pub(crate) fn sorted_launch_starts(t: &Timeline) -> Vec<i64> {
    let mut starts: Vec<i64> = t
        .api_calls
        .iter()
        .filter(|c| matches!(c.kind, ApiKind::KernelLaunch | ApiKind::GraphLaunch))
        .map(|c| c.start_ns)
        .collect();
    starts.sort_unstable();
    starts
}

#[cfg(test)]
mod tests {
    use super::*;
    use kopt_model::{CopyDirection, CopyKind};

    fn api(kind: ApiKind, name: &str, s: i64, e: i64, c: u64) -> ApiCall {
        ApiCall {
            kind,
            name: name.into(),
            start_ns: s,
            end_ns: e,
            thread: 1,
            correlation: c,
            frame: None,
            op: None,
            op_span: None,
        }
    }

    fn kernel(s: i64, e: i64, c: u64) -> GpuActivity {
        GpuActivity {
            kind: ActivityKind::Kernel,
            name: "k".into(),
            start_ns: s,
            end_ns: e,
            device: 0,
            stream: 7,
            correlation: c,
            grid: None,
            block: None,
            bytes: None,
            copy: None,
        }
    }

    /// A step of `layers` layers: launch (10 us host), kernel (40 us GPU),
    /// then `.item()` (a stream sync) after each layer but the last.
    fn step(t: &mut Timeline, at: i64, layers: usize, c: &mut u64) -> i64 {
        let mut host = at;
        for l in 0..layers {
            *c += 1;
            t.api_calls.push(api(
                ApiKind::KernelLaunch,
                "cudaLaunchKernel",
                host,
                host + 10_000,
                *c,
            ));
            let gpu = host + 12_000;
            t.activities.push(kernel(gpu, gpu + 40_000, *c));
            host += 10_000;
            if l + 1 < layers {
                let mut s = api(
                    ApiKind::Synchronize,
                    "cudaStreamSynchronize",
                    host,
                    gpu + 40_000,
                    0,
                );
                s.frame = Some("model.py:12 in forward".into());
                s.op = Some("aten::_local_scalar_dense".into());
                t.api_calls.push(s);
                host = gpu + 40_000 + 5_000;
            }
        }
        host + 40_000
    }

    /// The grouping and mid-step steps on their own: a pageable read then a
    /// sync with no launch between are one sync; a launch between starts a
    /// new one; a sync with nothing launched after it in its step (its
    /// end) is not mid-step.
    #[test]
    fn blocking_calls_group_until_a_launch_and_count_mid_step_only() {
        let t = Timeline {
            api_calls: vec![
                api(ApiKind::KernelLaunch, "cudaLaunchKernel", 0, 10, 1),
                api(ApiKind::Memory, "cudaMemcpy", 100, 150, 0),
                api(ApiKind::Synchronize, "cudaStreamSynchronize", 160, 200, 0),
                api(ApiKind::KernelLaunch, "cudaLaunchKernel", 300, 310, 2),
                api(ApiKind::Synchronize, "cudaDeviceSynchronize", 400, 500, 0),
            ],
            activities: vec![kernel(20, 90, 1), kernel(320, 390, 2)],
            ..Timeline::default()
        };
        let index = SyncIndex::new(&t);
        let groups = index.blocking_groups(&t.api_calls);
        let starts: Vec<Vec<i64>> = groups
            .iter()
            .map(|g| g.iter().map(|c| c.start_ns).collect())
            .collect();
        assert_eq!(starts, vec![vec![100, 160], vec![400]]);
        let windows = [(0, 600)];
        // The GPU waits from the sync's end (200) to the next kernel (320).
        assert_eq!(index.mid_step_idle(&groups[0], &windows), Some(120.0));
        assert_eq!(index.mid_step_idle(&groups[1], &windows), None);
        // Outside every step: not counted.
        assert_eq!(index.mid_step_idle(&groups[0], &[(1_000, 2_000)]), None);
    }

    #[test]
    fn a_sync_per_layer_is_found_named_and_serialized() {
        let mut t = Timeline::default();
        let mut c = 0;
        let mut at = 0;
        let mut windows = Vec::new();
        for _ in 0..4 {
            let end = step(&mut t, at, 3, &mut c);
            windows.push((at, end));
            at = end + 1_000;
        }
        let step_ns = (windows[0].1 - windows[0].0) as f64;
        let h = summarize(&t, &windows, &[], step_ns, 120_000.0, 0.0).unwrap();
        // Two mid-step syncs a step; none at a step's end.
        assert!((h.mid_step_per_step - 2.0).abs() < 1e-9, "{h:?}");
        assert!(h.serialized);
        assert!(h.frames_known);
        assert_eq!(h.sites.len(), 1);
        assert!(h.sites[0].what.starts_with(".item()"));
        assert_eq!(h.sites[0].frame.as_deref(), Some("model.py:12 in forward"));
        // The GPU idles from each sync's return to the next kernel.
        assert!(h.gpu_idle_after_per_step_ns > 0.0);
        let r = recommend(&h).unwrap();
        let sp = r.predicted_speedup.unwrap();
        assert!(
            sp.estimate > 1.0 && sp.low <= sp.estimate && sp.estimate <= sp.high,
            "{sp:?}"
        );
        assert!(r.evidence.contains("model.py:12"), "{}", r.evidence);
        assert!(r.evidence.contains("impossible"), "{}", r.evidence);
        assert_eq!(h.in_optimizer_per_step, 0.0);
        // The same syncs inside optimizer ranges (one range a step) are
        // counted apart: compiling the model breaks no graph there.
        let h = summarize(&t, &windows, &windows, step_ns, 120_000.0, 0.0).unwrap();
        assert!((h.in_optimizer_per_step - 2.0).abs() < 1e-9, "{h:?}");
    }

    #[test]
    fn a_sync_that_ends_the_step_is_not_counted() {
        let mut t = Timeline::default();
        let mut c = 0;
        let mut windows = Vec::new();
        let mut at = 0;
        for _ in 0..3 {
            let end = step(&mut t, at, 1, &mut c);
            // The driver's sync after the step's last launch.
            t.api_calls.push(api(
                ApiKind::Synchronize,
                "cudaDeviceSynchronize",
                end - 30_000,
                end,
                0,
            ));
            windows.push((at, end));
            at = end + 1_000;
        }
        assert!(summarize(&t, &windows, &[], 60_000.0, 40_000.0, 0.0).is_none());
    }

    #[test]
    fn reads_into_pageable_memory_block_input_copies_and_pinned_reads_do_not() {
        let mut copy = kernel(0, 1, 5);
        copy.kind = ActivityKind::Memcpy;
        let call = api(ApiKind::Memory, "cudaMemcpyAsync", 0, 1, 5);
        copy.copy = Some(CopyKind {
            direction: CopyDirection::DeviceToHost,
            src: MemoryKind::Device,
            dst: MemoryKind::Pageable,
        });
        assert!(blocks(&call, Some(&copy)));
        // Input copies are the copies finding's, pageable or not.
        copy.copy = Some(CopyKind {
            direction: CopyDirection::HostToDevice,
            src: MemoryKind::Pageable,
            dst: MemoryKind::Device,
        });
        assert!(!blocks(&call, Some(&copy)));
        // non_blocking=True into pinned memory: the host goes on.
        copy.copy = Some(CopyKind {
            direction: CopyDirection::DeviceToHost,
            src: MemoryKind::Device,
            dst: MemoryKind::Pinned,
        });
        assert!(!blocks(&call, Some(&copy)));
        assert!(blocks(&api(ApiKind::Memory, "cudaMemcpy", 0, 1, 6), None));
        assert!(!blocks(
            &api(ApiKind::Memory, "cudaMemsetAsync", 0, 1, 7),
            None
        ));
    }

    #[test]
    fn ops_are_named_in_the_users_terms() {
        assert!(what(Some("aten::nonzero"), "cudaStreamSynchronize").contains("nonzero"));
        assert!(what(Some("aten::index"), "cudaMemcpyAsync").contains("boolean mask"));
        assert!(what(None, "cudaDeviceSynchronize").contains("torch.cuda.synchronize"));
        assert!(what(Some("aten::_to_copy"), "cudaMemcpyAsync").contains(".cpu()"));
    }
}
