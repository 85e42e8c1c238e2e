//! Number formatting shared by the human-readable exporters.

use kopt_model::{Device, Diagnosis, KernelVerdict, PeakSource};

pub use kopt_model::format_duration_ns as duration;

pub fn pct(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if v >= 10.0 => format!("{v:.1}"),
        Some(v) if v >= 0.01 => format!("{v:.2}"),
        Some(0.0) => "0".into(),
        Some(v) => format!("{v:.1e}"),
    }
}

/// Bandwidth in GB/s with precision that keeps tiny figures readable (seed 000 shows 0.02).
pub fn gbs(bytes_per_s: Option<f64>) -> String {
    match bytes_per_s {
        None => "-".into(),
        Some(b) => {
            let g = b / 1e9;
            if g >= 100.0 {
                format!("{g:.0}")
            } else if g >= 1.0 {
                format!("{g:.1}")
            } else {
                format!("{g:.2}")
            }
        }
    }
}

pub fn occupancy(k: &KernelVerdict) -> String {
    match (k.occupancy_achieved_pct, k.occupancy_theoretical_pct) {
        (None, None) => "-".into(),
        (a, t) => {
            let lim = k
                .occupancy_limiter
                .as_deref()
                .filter(|_| t.is_some_and(|t| t < 100.0))
                .map_or(String::new(), |l| format!(" ({l})"));
            format!("{}/{}{lim}", pct(a), pct(t))
        }
    }
}

/// "achieved/theoretical" without the limiter (terminal tables; the root cause names it).
pub fn occupancy_figures(k: &KernelVerdict) -> String {
    match (k.occupancy_achieved_pct, k.occupancy_theoretical_pct) {
        (None, None) => "-".into(),
        (a, t) => format!("{}/{}", pct(a), pct(t)),
    }
}

pub fn intensity(k: &KernelVerdict) -> String {
    k.arithmetic_intensity.map_or("-".into(), |ai| {
        if ai >= 1e4 {
            format!("{ai:.1e}")
        } else if ai >= 10.0 {
            format!("{ai:.0}")
        } else {
            format!("{ai:.2}")
        }
    })
}

pub fn class(k: &KernelVerdict) -> String {
    let b = &k.bottleneck;
    let mut s = b.class.as_str().to_string();
    if let Some(u) = b.unit.filter(|_| {
        matches!(
            b.class,
            kopt_model::BottleneckClass::Memory | kopt_model::BottleneckClass::Compute
        )
    }) {
        s.push(':');
        s.push_str(u.as_str());
    }
    if b.at_roofline {
        s.push_str(" @roofline");
    }
    s
}

pub fn device_line(d: &Device) -> String {
    let mut parts = vec![d.name.clone()];
    if let Some(sm) = d.sm_count {
        parts.push(format!("{sm} SMs"));
    }
    if let Some(cc) = &d.compute_capability {
        parts.push(format!("CC {cc}"));
    }
    let p = &d.peaks;
    let mut peaks = Vec::new();
    if let Some(b) = p.dram_bytes_per_s {
        peaks.push(format!("DRAM {:.2} TB/s", b / 1e12));
    }
    if let Some(f) = p.fp32_flops {
        peaks.push(format!("FP32 {:.1} TFLOP/s", f / 1e12));
    }
    if let Some(f) = p.tensor_bf16_flops {
        peaks.push(format!("bf16 tensor {:.0} TFLOP/s", f / 1e12));
    }
    let source = match &d.peak_source {
        PeakSource::Measured => "measured, from the command line".to_string(),
        PeakSource::DeviceAttributes => "from device attributes".to_string(),
        PeakSource::Datasheet(k) => format!("datasheet: {k}"),
        PeakSource::Unknown => "unknown".to_string(),
    };
    if peaks.is_empty() {
        format!("{}; peaks {source}", parts.join(", "))
    } else {
        format!(
            "{}; peaks {} ({source})",
            parts.join(", "),
            peaks.join(", ")
        )
    }
}

/// The lines under a report's title: module, workload and run folder (from
/// `kopt profile` / `kopt trace`), each input, and the time summary.
pub fn header_lines(d: &Diagnosis) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(r) = &d.run {
        if let Some(m) = &r.module {
            v.push(format!("Module: {m}"));
        }
        v.push(format!("Workload: {}", r.argv.join(" ")));
        v.push(format!(
            "Run folder: {} (profiled in {:.1} s)",
            r.run_dir, r.wall_s
        ));
    }
    for s in &d.sources {
        v.push(format!(
            "Input: {} ({}, {} launches)",
            s.path, s.format, s.launches
        ));
    }
    v.push(summary_line(d));
    v
}

pub fn summary_line(d: &Diagnosis) -> String {
    let launches: u64 = d.kernels.iter().map(|k| k.launches).sum();
    format!(
        "{} of kernel time, {} distinct kernel{} shown, {} launch{}",
        duration(d.total_kernel_ns),
        d.kernels.len(),
        if d.kernels.len() == 1 { "" } else { "s" },
        launches,
        if launches == 1 { "" } else { "es" }
    )
}

pub fn gain(r: &kopt_model::Recommendation) -> String {
    match &r.gain {
        Some(g) => format!(
            "up to {:.1}% of the workload ({:.0}% of this kernel, {})",
            g.workload_pct,
            g.kernel_pct,
            duration(g.saved_ns)
        ),
        None if r.id == "fuse_or_graph_launches" => {
            "not measurable from counters: launch overhead needs a timeline".into()
        }
        None => "no tuning gain at the roofline; gain depends on the work removed".into(),
    }
}

/// The timeline block shared by the terminal and Markdown exporters: (label, value) lines.
pub fn timeline_lines(t: &kopt_model::TimelineSummary) -> Vec<(String, String)> {
    let mut v = vec![
        ("Verdict".to_string(), t.verdict.clone()),
        (
            "Wall / GPU busy".into(),
            format!(
                "{} / {} ({:.1}% busy)",
                duration(t.wall_ns as f64),
                duration(t.gpu_busy_ns as f64),
                t.busy_pct
            ),
        ),
        (
            "Kernels / memory ops".into(),
            format!("{} / {}", t.kernels, t.memory_ops),
        ),
        (
            "Launch calls / graph launches / syncs".into(),
            format!(
                "{} / {} / {}",
                t.kernel_launch_calls, t.graph_launches, t.sync_calls
            ),
        ),
        (
            "Median launch call / kernel".into(),
            format!(
                "{} / {}",
                t.median_launch_ns.map_or("-".into(), duration),
                t.median_kernel_ns.map_or("-".into(), duration)
            ),
        ),
        (
            "Kernels shorter than their launch".into(),
            format!("{} of {}", t.kernels_shorter_than_launch, t.kernels),
        ),
        (
            "Median launch-to-start delay".into(),
            t.median_launch_to_start_ns.map_or("-".into(), duration),
        ),
    ];
    if let Some(c) = &t.sampling {
        v.insert(
            1,
            (
                "Sampled trace".into(),
                format!(
                    "{} windows, {} traced of {} ({:.1}%): figures cover the windows, with the time between them cut",
                    c.windows,
                    duration(c.traced_ns as f64),
                    duration(c.span_ns as f64),
                    100.0 * c.traced_ns as f64 / c.span_ns.max(1) as f64
                ),
            ),
        );
    }
    if let (Some(n), Some(k)) = (t.iterations, t.kernels_per_iteration) {
        v.push((
            "Iterations (steps or repeated kernel pattern)".into(),
            format!("{n}, {k:.1} kernels each"),
        ));
    }
    if let Some(b) = t.busy_per_iteration_ns {
        v.push(("GPU busy per iteration".into(), duration(b)));
    }
    for (i, g) in t.largest_gaps.iter().enumerate() {
        v.push((
            format!("Idle gap #{}", i + 1),
            format!(
                "{} at +{}, after {} before {}",
                duration(g.duration_ns as f64),
                duration(g.at_ns as f64),
                g.after,
                g.before
            ),
        ));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration(850.0), "850 ns");
        assert_eq!(duration(34_520.0), "34.52 us");
        assert_eq!(duration(1_525_984.0), "1.53 ms");
    }

    #[test]
    fn bandwidth_keeps_small_figures() {
        assert_eq!(gbs(Some(0.02e9)), "0.02");
        assert_eq!(gbs(Some(2_987.4e9)), "2987");
        assert_eq!(gbs(None), "-");
    }
}
