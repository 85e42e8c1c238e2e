//! Copies between host and device in the steady steps (#35): bytes a step,
//! pageable or pinned, blocking or not, achieved bandwidth against the host
//! link's peak; and the finding that pins the input and copies it without
//! blocking (`pin_memory()` + `non_blocking=True`, `DataLoader(pin_memory=True)`).

use std::collections::{BTreeMap, HashMap};

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
    let calls: HashMap<u64, &ApiCall> = t
        .api_calls
        .iter()
        .filter(|c| c.correlation != 0)
        .map(|c| (c.correlation, c))
        .collect();
    let in_steps = |at: i64| {
        let w = windows.partition_point(|w| w.0 <= at);
        w.checked_sub(1).is_some_and(|i| at <= windows[i].1)
    };
    // (direction, host memory) -> [count, bytes, gpu ns, call ns], blocking, frames
    type Acc = ([f64; 4], bool, Vec<String>);
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
            .or_insert(([0.0; 4], false, Vec::new()));
        e.0[0] += 1.0;
        e.0[1] += a.bytes.unwrap_or(0) as f64;
        e.0[2] += copy_ns(a);
        e.0[3] += call_ns;
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
    // Now: the host is held for the whole call (staging and copy), the
    // GPU's queue drains meanwhile. Pinned and non-blocking: the copy at
    // the link's speed on the step's path (the forward waits for it); low:
    // at half the link's speed; high: at its full speed and hidden behind
    // the step's other work (prefetched a step ahead), the link the limit.
    let now: f64 = pageable
        .iter()
        .map(|g| g.call_ns_per_step.max(g.gpu_ns_per_step))
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
                "{} {:.1} a step, {:.1} MB, {} on the GPU at {:.1} GB/s, the host held {} a step{at}",
                g.direction,
                g.per_step,
                g.bytes_per_step / 1e6,
                fmt(g.gpu_ns_per_step),
                g.achieved_bytes_per_s / 1e9,
                fmt(g.call_ns_per_step)
            )
        })
        .collect();
    let link = c
        .link
        .clone()
        .unwrap_or_else(|| "an assumed PCIe Gen4 x16 (32 GB/s)".into());
    let model = format!(
        "step after = step - (pageable copies' time now - the same bytes pinned at {:.0}% of {link}): {} - ({} - {}) = {}; low: pinned at half the link's speed; high: at its full speed, hidden behind the step's other work (prefetched a step ahead)",
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
        gain: Some(kopt_model::GainEstimate {
            kernel_pct: 0.0,
            workload_pct: 100.0 * (1.0 - 1.0 / estimate),
            saved_ns: saved * c.steps as f64,
            method: model.clone(),
        }),
        predicted_speedup: Some(PredictedSpeedup {
            estimate,
            low: low.min(estimate),
            high: high.max(estimate),
            model,
        }),
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
        let r = recommend(&c, 10e6).unwrap();
        let sp = r.predicted_speedup.unwrap();
        // 6 ms now, 64 MiB at 51 GB/s = 1.3 ms pinned: 10 ms -> 5.3 ms.
        assert!((1.8..2.0).contains(&sp.estimate), "{sp:?}");
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
}
