//! Copies between host and device in the steady steps (#35): bytes a step,
//! pageable or pinned, blocking or not, achieved bandwidth against the host
//! link's peak; and the finding that pins the input and copies it without
//! blocking (`pin_memory()` + `non_blocking=True`, `DataLoader(pin_memory=True)`).

use std::collections::BTreeMap;

use kopt_model::{
    ActivityKind, ApiCall, CopyDirection, CopyGroup, GpuActivity, HostCopies, MemoryKind,
    PredictedSpeedup, Recommendation, Timeline,
};

/// Id of the finding.
pub const ID: &str = "pin_host_memory";

/// Share of the link's peak a pinned copy reaches (PCIe's protocol
/// overhead; NVIDIA's bandwidthTest reaches 80-90%).
const PINNED_SHARE: f64 = 0.8;

/// Copies smaller than this a step are not worth a finding.
const MIN_BYTES_PER_STEP: f64 = 1024.0 * 1024.0;

/// The host link's peak per direction (bytes/s) and its name, from the
/// device's name and compute capability: PCIe Gen5 x16 for Hopper and
/// MI300, Gen4 x16 for Ampere and Ada, NVLink-C2C for Grace Hopper.
pub fn link_peak(name: Option<&str>, cc: Option<&str>) -> Option<(f64, String)> {
    let name = name.unwrap_or("").to_ascii_uppercase();
    if name.contains("GH200") || name.contains("GB200") {
        return Some((450e9, "NVLink-C2C (450 GB/s per direction)".into()));
    }
    if name.contains("MI300") || name.contains("MI325") {
        return Some((64e9, "PCIe Gen5 x16 (64 GB/s per direction)".into()));
    }
    match cc.unwrap_or("") {
        "9.0" | "10.0" | "12.0" => Some((64e9, "PCIe Gen5 x16 (64 GB/s per direction)".into())),
        "8.0" | "8.6" | "8.9" => Some((32e9, "PCIe Gen4 x16 (32 GB/s per direction)".into())),
        _ => None,
    }
}

fn kind_words(k: MemoryKind) -> &'static str {
    match k {
        MemoryKind::Pageable => "pageable",
        MemoryKind::Pinned => "pinned",
        _ => "unknown",
    }
}

/// The host <-> device copies launched in `windows` (the steady steps).
pub fn summarize(t: &Timeline, windows: &[(i64, i64)]) -> Option<HostCopies> {
    if windows.is_empty() {
        return None;
    }
    let calls: rustc_hash::FxHashMap<u64, &ApiCall> = t
        .api_calls
        .iter()
        .filter(|c| c.correlation != 0)
        .map(|c| (c.correlation, c))
        .collect();
    let in_steps = |at: i64| {
        let w = windows.partition_point(|w| w.0 <= at);
        w.checked_sub(1).is_some_and(|i| at <= windows[i].1)
    };
    // When the GPU last finished work before each start: a copy that the
    // GPU waited for shows as idle just before it.
    let mut spans: Vec<(i64, i64)> = t
        .activities
        .iter()
        .map(|a| (a.start_ns, a.end_ns))
        .collect();
    spans.sort_unstable();
    let mut busy_until = Vec::with_capacity(spans.len());
    let mut until = i64::MIN;
    for (_, e) in &spans {
        busy_until.push(until);
        until = until.max(*e);
    }
    let idle_before = |a: &GpuActivity| {
        let i = spans.partition_point(|s| s.0 < a.start_ns);
        let last = if i < spans.len() {
            busy_until[i]
        } else {
            until
        };
        if last == i64::MIN {
            0.0
        } else {
            (a.start_ns - last).max(0) as f64
        }
    };
    // (direction, host memory) -> [count, bytes, gpu ns, call ns, idle
    // before ns], blocking, frames
    type Acc = ([f64; 5], bool, Vec<String>);
    let mut groups: BTreeMap<(&'static str, &'static str), Acc> = BTreeMap::new();
    for a in t
        .activities
        .iter()
        .filter(|a| a.kind == ActivityKind::Memcpy)
    {
        let Some(k) = a.copy else { continue };
        let (dir, host) = match k.direction {
            CopyDirection::HostToDevice => ("HtoD", k.src),
            CopyDirection::DeviceToHost => ("DtoH", k.dst),
            _ => continue,
        };
        let call = calls.get(&a.correlation).copied();
        let launched = call.map_or(a.start_ns, |c| c.start_ns);
        if !in_steps(launched) {
            continue;
        }
        let call_ns = call.map_or(0.0, |c| (c.end_ns - c.start_ns).max(0) as f64);
        let blocking = host == MemoryKind::Pageable
            || call.is_some_and(|c| !c.name.to_ascii_lowercase().contains("async"));
        let e = groups
            .entry((dir, kind_words(host)))
            .or_insert(([0.0; 5], false, Vec::new()));
        e.0[0] += 1.0;
        e.0[1] += a.bytes.unwrap_or(0) as f64;
        e.0[2] += copy_ns(a);
        e.0[3] += call_ns;
        e.0[4] += idle_before(a);
        e.1 |= blocking;
        if let Some(f) = call.and_then(|c| c.frame.as_ref()) {
            if !e.2.contains(f) && e.2.len() < 4 {
                e.2.push(f.clone());
            }
        }
    }
    if groups.is_empty() {
        return None;
    }
    let steps = windows.len() as f64;
    let mut out: Vec<CopyGroup> = groups
        .into_iter()
        .map(
            |((direction, host_memory), (v, blocking, frames))| CopyGroup {
                direction: direction.into(),
                host_memory: host_memory.into(),
                per_step: v[0] / steps,
                bytes_per_step: v[1] / steps,
                gpu_ns_per_step: v[2] / steps,
                call_ns_per_step: v[3] / steps,
                gpu_idle_before_ns_per_step: v[4] / steps,
                achieved_bytes_per_s: if v[2] > 0.0 {
                    v[1] / (v[2] * 1e-9)
                } else {
                    0.0
                },
                blocking,
                frames,
            },
        )
        .collect();
    out.sort_by(|a, b| {
        (b.gpu_ns_per_step.max(b.call_ns_per_step))
            .total_cmp(&a.gpu_ns_per_step.max(a.call_ns_per_step))
    });
    let link = link_peak(t.device_name.as_deref(), t.compute_capability.as_deref());
    Some(HostCopies {
        steps: windows.len() as u64,
        groups: out,
        link_peak_bytes_per_s: link.as_ref().map(|l| l.0),
        link: link.map(|l| l.1),
    })
}

fn copy_ns(a: &GpuActivity) -> f64 {
    (a.end_ns - a.start_ns).max(0) as f64
}

/// A finding's gain and predicted step speed-up from its model's figures
/// (the rest of the recommendation is the caller's).
fn priced(estimate: f64, low: f64, high: f64, saved_ns: f64, model: String) -> Recommendation {
    Recommendation {
        rank: 0,
        id: String::new(),
        title: String::new(),
        kernel: String::new(),
        kernel_short: String::new(),
        class: kopt_model::BottleneckClass::Sync,
        evidence: String::new(),
        action: String::new(),
        source: String::new(),
        gain: Some(kopt_model::GainEstimate {
            kernel_pct: 0.0,
            workload_pct: 100.0 * (1.0 - 1.0 / estimate),
            saved_ns,
            method: model.clone(),
        }),
        predicted_speedup: Some(PredictedSpeedup {
            estimate,
            low: low.min(estimate),
            high: high.max(estimate),
            model,
        }),
    }
}

/// Id of the input-starvation finding.
pub const PREFETCH_ID: &str = "prefetch_input_batches";

/// The share of the step the GPU must wait for its input before the
/// starvation finding is made.
const MIN_STARVED_SHARE: f64 = 0.1;

/// The part of a group's idle-before that the copy calls themselves
/// account for (staging pageable memory): at most the calls' time.
fn staging_ns(g: &CopyGroup) -> f64 {
    g.gpu_idle_before_ns_per_step.min(g.call_ns_per_step)
}

/// GPU idle a step while the host prepares the input it then copies in:
/// each host-to-device group's idle before its copies, less the calls'
/// own staging. Fewer launches do not shorten it; workers preparing the
/// next batch do.
pub fn input_wait_ns(c: &HostCopies) -> f64 {
    c.groups
        .iter()
        .filter(|g| g.direction == "HtoD")
        .map(|g| (g.gpu_idle_before_ns_per_step - staging_ns(g)).max(0.0))
        .sum()
}

/// `input_wait_ns` where the step counts as input-starved (at least
/// `MIN_STARVED_SHARE` of `step_ns`), else 0.
pub fn starved_wait_ns(c: &HostCopies, step_ns: f64) -> f64 {
    let wait = input_wait_ns(c);
    if step_ns > 0.0 && wait >= MIN_STARVED_SHARE * step_ns {
        wait
    } else {
        0.0
    }
}

/// The GPU starved of input: it waits each step while the host prepares
/// the batch it then copies in. DataLoader workers prepare the next batch
/// while the GPU works, pinned so the copy neither blocks nor crawls.
pub fn recommend_prefetch(c: &HostCopies, step_ns: f64) -> Option<Recommendation> {
    let fmt = kopt_model::format_duration_ns;
    let wait = input_wait_ns(c);
    if step_ns <= 0.0 || wait < MIN_STARVED_SHARE * step_ns {
        return None;
    }
    let peak = c.link_peak_bytes_per_s.unwrap_or(32e9);
    let inputs: Vec<&CopyGroup> = c.groups.iter().filter(|g| g.direction == "HtoD").collect();
    // The copies themselves, pinned at the link's speed, issued without
    // blocking (what pin_host_memory prices), come off as well.
    let copies: f64 = inputs
        .iter()
        .filter(|g| g.host_memory != "pinned")
        .map(|g| {
            staging_ns(g)
                + (g.gpu_ns_per_step - g.bytes_per_step / (PINNED_SHARE * peak) * 1e9).max(0.0)
        })
        .sum();
    let at = |saved: f64| step_ns / (step_ns - saved.min(0.95 * step_ns)).max(1.0);
    let (estimate, low, high) = (at(wait + copies), at(0.5 * wait), at(wait + copies));
    if estimate < 1.01 {
        return None;
    }
    let frames: Vec<&str> = inputs
        .iter()
        .flat_map(|g| g.frames.iter().map(String::as_str))
        .collect();
    let site = if frames.is_empty() {
        String::new()
    } else {
        format!(" (the copies from {})", frames.join(", "))
    };
    let model = format!(
        "step after = step - (the GPU's wait for the host to prepare the input + the copies' cost unpinned): {} - ({} + {}); low: workers hide half the wait",
        fmt(step_ns),
        fmt(wait),
        fmt(copies)
    );
    Some(Recommendation {
        rank: 0,
        id: PREFETCH_ID.into(),
        title: "Prepare the next batch while the GPU works".into(),
        kernel: "the step's input pipeline".into(),
        kernel_short: format!("input wait {} a step", fmt(wait)),
        class: kopt_model::BottleneckClass::Sync,
        evidence: format!(
            "The GPU sits idle {} a step ({:.0}% of it) while the host prepares the input it then copies in{site}: the input pipeline, not the GPU, sets the pace.",
            fmt(wait),
            100.0 * wait / step_ns
        ),
        action: "Load and prepare batches in worker processes, a batch or two ahead, pinned: DataLoader(dataset, batch_size=..., num_workers=4 (or more: one per few CPU cores), pin_memory=True, prefetch_factor=2, persistent_workers=True), then x.to(device, non_blocking=True); move per-batch work (decoding, augmentation, tokenisation) out of the training loop into the dataset.".into(),
        source: "PyTorch's DataLoader documentation (num_workers, pin_memory, prefetch_factor); Nsight Systems' and TraceML's input-bound step".into(),
        ..priced(estimate, low, high, (wait + copies) * c.steps as f64, model)
    })
}

/// The finding for blocking copies from or to pageable memory: what they
/// cost the step now, against pinned copies at the link's speed issued
/// without blocking.
pub fn recommend(c: &HostCopies, step_ns: f64) -> Option<Recommendation> {
    let fmt = kopt_model::format_duration_ns;
    let pageable: Vec<&CopyGroup> = c
        .groups
        .iter()
        .filter(|g| g.host_memory == "pageable" && g.bytes_per_step >= MIN_BYTES_PER_STEP)
        .collect();
    if pageable.is_empty() || step_ns <= 0.0 {
        return None;
    }
    let peak = c.link_peak_bytes_per_s.unwrap_or(32e9);
    // What the pageable copies cost the step now: the GPU's wait for the
    // host to stage them (its idle just before each, at most the calls'
    // own time: the rest is the host preparing the input, which pinning
    // does not remove) and the copies at pageable speed. Pinned and non-blocking: no wait, the copy at the
    // link's speed on the step's path (the forward waits for it); low: at
    // half the link's speed; high: hidden behind the step's other work
    // (prefetched a step ahead). A host running ahead of a busy GPU hides
    // the staging: no idle, little saved.
    let now: f64 = pageable
        .iter()
        .map(|g| staging_ns(g) + g.gpu_ns_per_step)
        .sum();
    let bytes: f64 = pageable.iter().map(|g| g.bytes_per_step).sum();
    let at = |share: f64| 1e9 * bytes / (share * peak);
    let step_after = |pinned_ns: f64| (step_ns - (now - pinned_ns).max(0.0)).max(0.05 * step_ns);
    let after = step_after(at(PINNED_SHARE));
    let saved = step_ns - after;
    if saved <= 0.0 {
        return None;
    }
    let estimate = step_ns / after;
    let low = step_ns / step_after(at(0.5));
    // Hidden behind the rest of the step, but never faster than the link.
    let high = step_ns / (step_ns - now).max(at(1.0)).max(0.05 * step_ns);
    let pinned = at(PINNED_SHARE);
    let achieved: Vec<String> = pageable
        .iter()
        .map(|g| {
            let at = if g.frames.is_empty() {
                String::new()
            } else {
                format!(" from {}", g.frames.join(", "))
            };
            format!(
                "{} {:.1} a step, {} MB, {} on the GPU at {} GB/s, the host held {} and the GPU idle {} before them a step{at}",
                g.direction,
                g.per_step,
                kopt_model::figure::figure(g.bytes_per_step / 1e6, 1),
                fmt(g.gpu_ns_per_step),
                kopt_model::figure::figure(g.achieved_bytes_per_s / 1e9, 1),
                fmt(g.call_ns_per_step),
                fmt(g.gpu_idle_before_ns_per_step)
            )
        })
        .collect();
    let link = c
        .link
        .clone()
        .unwrap_or_else(|| "an assumed PCIe Gen4 x16 (32 GB/s)".into());
    let model = format!(
        "step after = step - (the GPU's wait for the pageable copies and their time now - the same bytes pinned at {:.0}% of {link}): {} - ({} - {}) = {}; low: pinned at half the link's speed; high: hidden behind the step's other work (prefetched a step ahead)",
        100.0 * PINNED_SHARE,
        fmt(step_ns),
        fmt(now),
        fmt(pinned),
        fmt(after)
    );
    Some(Recommendation {
        rank: 0,
        id: ID.into(),
        title: "Copy from pinned memory without blocking".into(),
        kernel: "host <-> device copies from pageable memory".into(),
        kernel_short: format!("{:.1} MB pageable a step", bytes / 1e6),
        class: kopt_model::BottleneckClass::Sync,
        evidence: format!(
            "Copies from or to pageable host memory block the host and run below the link's speed ({link}): {}.",
            achieved.join("; ")
        ),
        action: "Pin the host tensors and copy without blocking: x = x.pin_memory() once (or DataLoader(pin_memory=True, num_workers>0), which also prepares the next batch while the GPU works), then x.to(device, non_blocking=True); for outputs read back, copy into a pinned buffer with non_blocking=True and synchronise only where the value is needed.".into(),
        source: "Nsight Systems' pageable-memcpy rule; PyTorch's pinned-memory guide".into(),
        ..priced(estimate, low, high, saved * c.steps as f64, model)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kopt_model::{ApiKind, CopyKind};

    fn timeline(src: MemoryKind, call_ns: i64, copy_ns: i64, bytes: u64) -> Timeline {
        let mut t = Timeline {
            compute_capability: Some("9.0".into()),
            ..Timeline::default()
        };
        for i in 0..4u64 {
            let at = i as i64 * 10_000_000;
            t.api_calls.push(ApiCall {
                kind: ApiKind::Memory,
                name: "cudaMemcpyAsync".into(),
                start_ns: at,
                end_ns: at + call_ns,
                thread: 1,
                correlation: i + 1,
                frame: Some("train.py:40 in main".into()),
                op: None,
                op_span: None,
            });
            t.activities.push(GpuActivity {
                kind: ActivityKind::Memcpy,
                name: "Memcpy HtoD (Pageable -> Device)".into(),
                start_ns: at + call_ns - copy_ns,
                end_ns: at + call_ns,
                device: 0,
                stream: 7,
                correlation: i + 1,
                grid: None,
                block: None,
                bytes: Some(bytes),
                copy: Some(CopyKind {
                    direction: CopyDirection::HostToDevice,
                    src,
                    dst: MemoryKind::Device,
                }),
            });
            // The step's compute, from the copy's end to 0.1 ms before
            // the next step's.
            t.activities.push(GpuActivity {
                kind: ActivityKind::Kernel,
                name: "k".into(),
                start_ns: at + call_ns,
                end_ns: at + 9_900_000,
                device: 0,
                stream: 7,
                correlation: 100 + i,
                grid: None,
                block: None,
                bytes: None,
                copy: None,
            });
        }
        t
    }

    fn windows() -> Vec<(i64, i64)> {
        (0..4)
            .map(|i| (i * 10_000_000, i * 10_000_000 + 9_999_999))
            .collect()
    }

    #[test]
    fn pageable_input_copies_are_measured_and_priced() {
        // 64 MB a step, the host held 6 ms, the GPU copying 5 ms (13 GB/s).
        let t = timeline(MemoryKind::Pageable, 6_000_000, 5_000_000, 64 << 20);
        let c = summarize(&t, &windows()).unwrap();
        assert_eq!(c.groups.len(), 1);
        let g = &c.groups[0];
        assert_eq!(
            (g.direction.as_str(), g.host_memory.as_str()),
            ("HtoD", "pageable")
        );
        assert!(g.blocking);
        assert!((g.achieved_bytes_per_s / 1e9 - 13.4).abs() < 0.1, "{g:?}");
        assert_eq!(g.frames, ["train.py:40 in main"]);
        // The GPU idles 1.1 ms (from the last step's compute to the copy).
        assert!(
            (g.gpu_idle_before_ns_per_step - 825_000.0).abs() < 1.0,
            "{g:?}"
        );
        let r = recommend(&c, 10e6).unwrap();
        let sp = r.predicted_speedup.unwrap();
        // 1.1 ms idle and a 5 ms copy now (the first step has no idle
        // before it: 0.825 ms a step), 64 MiB at 51 GB/s = 1.3 ms pinned.
        assert!((1.8..1.95).contains(&sp.estimate), "{sp:?}");
        assert!(sp.low < sp.estimate && sp.estimate <= sp.high);
        assert!(r.evidence.contains("PCIe Gen5"), "{}", r.evidence);
        assert!(r.evidence.contains("train.py:40"), "{}", r.evidence);
    }

    #[test]
    fn pinned_copies_get_no_finding() {
        let t = timeline(MemoryKind::Pinned, 100_000, 1_300_000, 64 << 20);
        let c = summarize(&t, &windows()).unwrap();
        assert!(!c.groups[0].blocking);
        assert!(recommend(&c, 10e6).is_none());
    }

    #[test]
    fn links_by_device() {
        assert!(
            link_peak(Some("NVIDIA GH200 480GB"), Some("9.0"))
                .unwrap()
                .0
                > 400e9
        );
        assert_eq!(link_peak(Some("NVIDIA H200"), Some("9.0")).unwrap().0, 64e9);
        assert_eq!(
            link_peak(Some("NVIDIA A100-SXM4-80GB"), Some("8.0"))
                .unwrap()
                .0,
            32e9
        );
        assert!(link_peak(None, None).is_none());
    }

    fn input(idle_before_ms: f64, memory: &str) -> HostCopies {
        HostCopies {
            steps: 3,
            groups: vec![CopyGroup {
                direction: "HtoD".into(),
                host_memory: memory.into(),
                per_step: 2.0,
                bytes_per_step: 6.4e6,
                gpu_ns_per_step: 0.7e6,
                call_ns_per_step: 0.9e6,
                gpu_idle_before_ns_per_step: idle_before_ms * 1e6,
                achieved_bytes_per_s: 9e9,
                blocking: memory == "pageable",
                frames: vec!["train.py:40 in step".into()],
            }],
            link_peak_bytes_per_s: Some(64e9),
            link: None,
        }
    }

    #[test]
    fn a_gpu_waiting_for_its_input_calls_for_workers_and_pinning_is_priced_apart() {
        // 11 ms idle before the copies, of which the calls' 0.9 ms is staging.
        let c = input(11.0, "pageable");
        assert!((input_wait_ns(&c) - 10.1e6).abs() < 1.0);
        let r = recommend_prefetch(&c, 26e6).unwrap();
        let p = r.predicted_speedup.unwrap();
        // 10.1 ms of wait + 0.9 ms staging + (0.7 ms - 6.4 MB at 51.2 GB/s) off 26 ms.
        let saved = 10.1e6 + 0.9e6 + (0.7e6 - 6.4e6 / 51.2e9 * 1e9);
        assert!((p.estimate - 26e6 / (26e6 - saved)).abs() < 1e-6, "{p:?}");
        assert!(r.evidence.contains("train.py:40"));
        // Pinning alone removes the staging and the slow copy, not the wait.
        let pin = recommend(&c, 26e6).unwrap().predicted_speedup.unwrap();
        assert!(pin.estimate < 1.1 && pin.estimate < p.estimate, "{pin:?}");
        // A host that keeps ahead: no starvation finding.
        assert!(recommend_prefetch(&input(0.5, "pageable"), 26e6).is_none());
        // Pinned input still starved: workers still help.
        assert!(recommend_prefetch(&input(11.0, "pinned"), 26e6).is_some());
    }
}
