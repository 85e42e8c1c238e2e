//! Number formatting shared by the human-readable exporters (untrusted
//! text is made safe to print by `crate::escape`).

use kopt_model::{Device, Diagnosis, KernelVerdict, PeakSource};

pub use kopt_model::figure::figure;
pub use kopt_model::format_duration_ns as duration;

/// Column names, the same in every format (terminal, Markdown, HTML).
pub mod col {
    pub const KERNEL: &str = "Kernel";
    pub const LAUNCHES: &str = "Launches";
    pub const TOTAL: &str = "Total";
    pub const MEAN: &str = "Mean";
    pub const PCT: &str = "% Total";
    pub const DRAM: &str = "DRAM GB/s";
    pub const MEM_SOL: &str = "Mem SOL %";
    pub const COMPUTE_SOL: &str = "Compute SOL %";
    pub const TENSOR: &str = "Tensor %";
    pub const OCCUPANCY: &str = "Occupancy %";
    pub const AI: &str = "AI (FLOP/B)";
    pub const CLASS: &str = "Class";
    pub const KEY_FIGURE: &str = "Key figure";
    pub const ROOT_CAUSE: &str = "Root cause";
}

/// The one figure behind a kernel's class, for the compact terminal table:
/// the hot unit's utilisation for throughput classes, the block count for a
/// small grid, occupancy for occupancy, SM and memory throughput for latency.
/// The root cause under the row says the rest.
pub fn key_figure(k: &KernelVerdict) -> String {
    use kopt_model::BottleneckClass as C;
    let b = &k.bottleneck;
    let unit = b.unit.zip(b.unit_pct).map(|(u, p)| {
        let name = match u {
            kopt_model::HotUnit::Dram => "DRAM",
            kopt_model::HotUnit::L2 => "L2",
            kopt_model::HotUnit::L1Shared => "L1/shared",
            kopt_model::HotUnit::Tensor => "tensor",
            kopt_model::HotUnit::Fp32 => "FP32",
            kopt_model::HotUnit::Alu => "ALU",
            kopt_model::HotUnit::Fp64 => "FP64",
            kopt_model::HotUnit::Xu => "XU",
            kopt_model::HotUnit::Lsu => "LSU",
            kopt_model::HotUnit::Sm => "SM",
        };
        format!("{name} {p:.0}%")
    });
    let sm_mem = || match (k.compute_sol_pct, k.memory_sol_pct) {
        (Some(c), Some(m)) => Some(format!("SM {c:.0}%, mem {m:.0}%")),
        _ => None,
    };
    let figure = match b.class {
        C::SmallGrid => {
            blocks(&k.grid).map(|n| format!("{n} block{}", if n == 1 { "" } else { "s" }))
        }
        C::Occupancy => k
            .occupancy_achieved_pct
            .or(k.occupancy_theoretical_pct)
            .map(|o| format!("occupancy {}%", pct(Some(o)))),
        C::LaunchOverhead => Some(format!("mean {}", duration(k.mean_ns))),
        C::Latency | C::Balanced | C::Sync => sm_mem(),
        _ => unit.or_else(sm_mem),
    };
    figure.unwrap_or_else(|| "-".into())
}

/// Blocks in a grid written "(x, y, z)".
fn blocks(grid: &str) -> Option<u64> {
    let dims: Vec<u64> = grid
        .trim_matches(|c| c == '(' || c == ')')
        .split(',')
        .map(|d| d.trim().parse().ok())
        .collect::<Option<_>>()?;
    (!dims.is_empty()).then(|| dims.iter().product())
}

/// `text` broken at spaces into lines of at most `width` characters; a word
/// longer than a line (a long path) is cut, after a `/` where one falls in
/// the line, so no line ever passes the width.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    let mut len = 0;
    for word in text.split_whitespace() {
        let w = word.chars().count();
        if len > 0 && len + 1 + w > width {
            lines.push(std::mem::take(&mut line));
            len = 0;
        }
        if len > 0 {
            line.push(' ');
            len += 1;
        }
        let mut rest = word;
        while len + rest.chars().count() > width {
            // Only a fresh line gets here: a word that fits after a space
            // was placed whole above, so the room is the whole width.
            let head = cut_point(rest, width - len);
            line.push_str(&rest[..head]);
            lines.push(std::mem::take(&mut line));
            len = 0;
            rest = &rest[head..];
        }
        line.push_str(rest);
        len += rest.chars().count();
    }
    if len > 0 || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// Byte length of the longest head of `word` that fits `room` characters,
/// ending after a `/` when one falls past the middle of the room.
fn cut_point(word: &str, room: usize) -> usize {
    let end = word.char_indices().nth(room).map_or(word.len(), |(i, _)| i);
    match word[..end].rfind('/') {
        Some(slash) if slash + 1 > end / 2 => slash + 1,
        _ => end,
    }
}

/// A percentage for a table cell: one place from 10 on, two from 0.01, a
/// smaller one in scientific notation down to 0.001 and "<0.001" below (a
/// denormal is not "4.9e-324"); "n/a" when not finite.
pub fn pct(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if !v.is_finite() => "n/a".into(),
        Some(v) if v >= 10.0 => figure(v, 1),
        Some(v) if v >= 0.01 => format!("{v:.2}"),
        Some(0.0) => "0".into(),
        Some(v) if v >= 1e-3 => format!("{v:.1e}"),
        Some(v) if v > 0.0 => "<0.001".into(),
        Some(v) => figure(v, 2),
    }
}

/// Bandwidth in GB/s with precision that keeps tiny figures readable (seed 000 shows 0.02).
pub fn gbs(bytes_per_s: Option<f64>) -> String {
    match bytes_per_s {
        None => "-".into(),
        Some(b) if !b.is_finite() => "n/a".into(),
        Some(b) => {
            let g = b / 1e9;
            if g >= 100.0 {
                figure(g, 0)
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
        if !ai.is_finite() {
            "n/a".into()
        } else if ai >= 1e4 {
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
        parts.push(format!("{sm} {}", d.vendor().units()));
    }
    if let Some(cc) = &d.compute_capability {
        parts.push(format!("CC {cc}"));
    }
    let p = &d.peaks;
    let mut peaks = Vec::new();
    if let Some(b) = p.dram_bytes_per_s {
        peaks.push(format!("DRAM {} TB/s", figure(b / 1e12, 2)));
    }
    if let Some(f) = p.fp32_flops {
        peaks.push(format!("FP32 {} TFLOP/s", figure(f / 1e12, 1)));
    }
    if let Some(f) = p.tensor_bf16_flops {
        peaks.push(format!("bf16 tensor {} TFLOP/s", figure(f / 1e12, 0)));
    }
    let source = match &d.peak_source {
        PeakSource::Measured => "measured, from the command line".to_string(),
        PeakSource::DeviceAttributes => "from device attributes".to_string(),
        PeakSource::Datasheet(k) => format!("datasheet: {k}"),
        PeakSource::Unknown => "unknown".to_string(),
    };
    let line = if peaks.is_empty() {
        format!("{}; peaks {source}", parts.join(", "))
    } else {
        format!(
            "{}; peaks {} ({source})",
            parts.join(", "),
            peaks.join(", ")
        )
    };
    crate::escape::terminal(&line).into_owned()
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
            "Input: {} ({}, {} launch{})",
            s.path,
            s.format,
            s.launches,
            if s.launches == 1 { "" } else { "es" }
        ));
    }
    v.push(summary_line(d));
    if let Some(w) = &d.warmup_trials {
        v.push(warmup_line(w));
    }
    v.into_iter()
        .map(|l| crate::escape::terminal(&l).into_owned())
        .collect()
}

/// One line on the warm-up / autotuning trials: left out, or kept on
/// request. It says the rule that found them, and names no CLI flag (the
/// Python API shows the same line).
pub fn warmup_line(w: &kopt_model::WarmupTrials) -> String {
    let n = w.kernels.len();
    let rule = match w.evidence {
        kopt_model::WarmupEvidence::WarmupSteps => {
            "ran only in warm-up steps, never in the steady state"
        }
        kopt_model::WarmupEvidence::FirstIteration => {
            "ran only in the first iteration, fewer times than the loop"
        }
    };
    let what = format!(
        "{n} kernel{} that {rule} (warm-up or autotuning trials: {} launch{}, {})",
        if n == 1 { "" } else { "s" },
        w.launches,
        if w.launches == 1 { "" } else { "es" },
        duration(w.total_ns)
    );
    if w.kept {
        format!(
            "Kept on request: {what}; {} in the table and totals",
            if n == 1 { "it counts" } else { "they count" }
        )
    } else {
        format!("Left out: {what}")
    }
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

/// What `--verify` measured for a recommendation, beside its prediction:
/// "predicted 1.31x; verified: measured 1.43x (channels_last, KEEP)".
pub fn verified(d: &kopt_model::Diagnosis, r: &kopt_model::Recommendation) -> Option<String> {
    let v = d.verification(&r.id)?;
    let predicted = v
        .predicted_speedup
        .map_or("no prediction".to_string(), |p| {
            format!("predicted {p:.2}x")
        });
    let measured = match (v.measured_speedup, v.correct) {
        (Some(m), Some(true)) => format!(
            "verified: measured {m:.2}x ({}{})",
            v.candidate,
            v.verdict
                .map_or(String::new(), |k| format!(", {}", k.as_str()))
        ),
        (Some(m), _) => format!(
            "not verified: {} measured {m:.2}x but failed its check against eager",
            v.candidate
        ),
        (None, _) => format!("not verified: {} ({})", v.candidate, v.note),
    };
    Some(format!("{predicted}; {measured}"))
}

pub fn gain(r: &kopt_model::Recommendation) -> String {
    match &r.gain {
        // A finding over the whole step (graph capture) has no kernel share
        // apart from the workload's; one over several kernels (a fusion
        // chain, batch norm) gives the share of their time.
        Some(g) if (g.kernel_pct - g.workload_pct).abs() < 0.05 => format!(
            "up to {}% of the workload ({})",
            figure(g.workload_pct, 1),
            duration(g.saved_ns)
        ),
        Some(g) => format!(
            "up to {}% of the workload ({}% of {}, {})",
            figure(g.workload_pct, 1),
            figure(g.kernel_pct, 0),
            if r.kernel_short.ends_with(" kernels") {
                "their time"
            } else {
                "this kernel"
            },
            duration(g.saved_ns)
        ),
        None if r.withheld().is_some() => {
            format!("no figure is given: {}", r.withheld().unwrap_or_default())
        }
        None if r.id == "fuse_or_graph_launches" => {
            "not measurable from counters: launch overhead needs a timeline".into()
        }
        None if r.id == "library_call_settings" => {
            "no figure: library code, the gain depends on the setting or shape changed".into()
        }
        None => "no tuning gain at the roofline; gain depends on the work removed".into(),
    }
}

/// A finding's gain in a few words, for the one-line list: the share of
/// the workload, or why there is no figure.
pub fn gain_short(r: &kopt_model::Recommendation) -> String {
    match &r.gain {
        Some(g) => format!("up to {}%", figure(g.workload_pct, 1)),
        None if r.withheld().is_some() => "no figure".into(),
        None if r.id == "fuse_or_graph_launches" => "needs a timeline".into(),
        None if r.id == "library_call_settings" => "no figure (library)".into(),
        None => "at the roofline".into(),
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
    if let Some(p) = &t.phases {
        let mut parts: Vec<String> = p
            .phases
            .iter()
            .map(|ph| {
                format!(
                    "{} {} ({:.0}%; GPU {}, {:.0} kernels)",
                    ph.name,
                    duration(ph.host_ns_per_step),
                    ph.share_pct,
                    duration(ph.gpu_ns_per_step),
                    ph.kernels_per_step
                )
            })
            .collect();
        if !p.missing.is_empty() {
            parts.push(format!("not marked: {}", p.missing.join(", ")));
        }
        let from = if p.source.starts_with("torch") {
            ", from torch.profiler's annotations, forward inferred"
        } else {
            ""
        };
        v.push((
            format!("Step phases (host, mean of {} steps{from})", p.steps),
            parts.join("; "),
        ));
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
    v.into_iter()
        .map(|(label, value)| {
            (
                crate::escape::terminal(&label).into_owned(),
                crate::escape::terminal(&value).into_owned(),
            )
        })
        .collect()
}

/// Stall reasons and pipes an evidence line names at most.
const EVIDENCE_TOP: usize = 3;

/// What the counters say beyond a kernel's class (#29), in one line: its
/// largest stall reasons, busiest pipes, lanes active, atomics and waves;
/// `None` without evidence.
pub fn evidence_line(k: &kopt_model::KernelVerdict) -> Option<String> {
    let e = k.evidence.as_ref()?;
    let mut parts = Vec::new();
    // Below 1% a stall or a pipe says nothing.
    let stalls: Vec<String> = e
        .stalls
        .iter()
        .filter(|s| s.share_pct >= 1.0)
        .take(EVIDENCE_TOP)
        .map(|s| {
            format!(
                "{} {:.0}% ({:.1} cycles per issue)",
                s.reason.metric_stem(),
                s.share_pct,
                s.cycles_per_issue
            )
        })
        .collect();
    if !stalls.is_empty() {
        parts.push(format!("stalls {}", stalls.join(", ")));
    }
    let pipes: Vec<String> = e
        .pipes
        .iter()
        .filter(|p| p.pct >= 1.0)
        .take(EVIDENCE_TOP)
        .map(|p| format!("{} {:.0}%", p.pipe.as_str(), p.pct))
        .collect();
    if !pipes.is_empty() {
        parts.push(format!("pipes {}", pipes.join(", ")));
    }
    if let Some(t) = e.active_threads_per_inst {
        parts.push(format!("{t:.1} of 32 threads active per instruction"));
    }
    if let Some(n) = e.divergent_branches.filter(|n| *n > 0.0) {
        parts.push(format!("{n:.0} divergent branch targets"));
    }
    let atomics: Vec<String> = [
        (e.global_atomic_accesses, "global"),
        (e.l2_atomic_sectors, "L2 sectors"),
        (e.shared_atomic_wavefronts, "shared"),
    ]
    .into_iter()
    .filter_map(|(n, what)| Some(format!("{:.0} {what}", n.filter(|n| *n > 0.0)?)))
    .collect();
    if !atomics.is_empty() {
        parts.push(format!("atomics {}", atomics.join(", ")));
    }
    if let Some(w) = e.waves {
        let last = e
            .last_wave_fill_pct
            .map_or(String::new(), |f| format!(" (last {f:.0}% full)"));
        parts.push(format!("{w:.2} waves{last}"));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// A kernel's launching ops in one line: "op: aten::addmm [[8, 768], ...] (12)".
pub fn ops_line(k: &kopt_model::KernelVerdict) -> Option<String> {
    if k.ops.is_empty() {
        return None;
    }
    let parts: Vec<String> = k
        .ops
        .iter()
        .take(3)
        .map(|o| {
            let shapes = o
                .shapes
                .as_deref()
                .map_or(String::new(), |s| format!(" {s}"));
            let n = o.launches;
            format!(
                "{}{shapes} ({n} launch{})",
                o.op,
                if n == 1 { "" } else { "es" }
            )
        })
        .collect();
    let more = k.ops.len().saturating_sub(3);
    Some(format!(
        "op: {}{}",
        parts.join("; "),
        if more > 0 {
            format!("; {more} more")
        } else {
            String::new()
        }
    ))
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
    fn the_warmup_line_says_its_rule_and_agrees_in_number() {
        let one = kopt_model::WarmupTrials {
            kernels: vec![kopt_model::WarmupKernel {
                name: "trial".into(),
                short_name: "trial".into(),
                grid: None,
                block: None,
                launches: 1,
                total_ns: 1_000.0,
            }],
            launches: 1,
            total_ns: 1_000.0,
            how_found: String::new(),
            evidence: kopt_model::WarmupEvidence::FirstIteration,
            kept: true,
        };
        assert_eq!(
            warmup_line(&one),
            "Kept on request: 1 kernel that ran only in the first iteration, fewer times than the loop (warm-up or autotuning trials: 1 launch, 1.00 us); it counts in the table and totals"
        );
        let mut two = one.clone();
        two.kernels.push(two.kernels[0].clone());
        two.launches = 2;
        two.evidence = kopt_model::WarmupEvidence::WarmupSteps;
        two.kept = false;
        assert_eq!(
            warmup_line(&two),
            "Left out: 2 kernels that ran only in warm-up steps, never in the steady state (warm-up or autotuning trials: 2 launches, 1.00 us)"
        );
        two.kept = true;
        assert!(warmup_line(&two).ends_with("; they count in the table and totals"));
        assert!(!warmup_line(&two).contains("--"));
    }

    #[test]
    fn wrap_never_passes_the_width() {
        assert_eq!(wrap("a bb ccc", 4), ["a bb", "ccc"]);
        let path = "Input: /check/work/main/crates/kopt/../../fixtures/labeled-suite-h100/ncu_raw_base.csv (ncu-raw)";
        for width in [1, 7, 20, 40, 80] {
            let lines = wrap(path, width);
            assert!(
                lines.iter().all(|l| l.chars().count() <= width),
                "{lines:?}"
            );
            // Nothing lost: the pieces put back together are the text.
            let joined: String = lines.concat();
            assert_eq!(joined.replace(' ', ""), path.replace(' ', ""));
        }
        // A long path breaks after a slash where one is near the end.
        assert_eq!(wrap("/aaaa/bbbb/cccc", 12), ["/aaaa/bbbb/", "cccc"]);
        assert_eq!(wrap("ünïcödé", 3), ["ünï", "cöd", "é"]);
    }

    /// A profile whose kernel, device and file names carry terminal escapes
    /// (ESC sequences that retitle the window or recolour, BEL): neither
    /// byte may reach the terminal or Markdown report.
    #[test]
    fn untrusted_names_cannot_reach_the_terminal() {
        use crate::{Exporter, MarkdownExporter, TerminalExporter};
        let evil = "evil\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m";
        let json_evil = "evil\\u001b]0;pwned\\u0007\\u001b[2J\\u009b31m";
        let trace = format!(
            r#"{{"t":"device","id":0,"name":"GPU{json_evil}","sms":132}}
{{"t":"range_start","id":1,"s":0,"tid":1,"name":"step{json_evil}","dom":""}}
{{"t":"api","name":"cudaLaunchKernel","s":100,"e":105,"tid":1,"c":1}}
{{"t":"kernel","name":"{json_evil}","s":110,"e":120,"dev":0,"str":7,"c":1}}
{{"t":"api","name":"cudaLaunchKernel","s":200,"e":205,"tid":1,"c":2}}
{{"t":"kernel","name":"other{json_evil}","s":90000,"e":99000,"dev":0,"str":7,"c":2}}
{{"t":"range_end","id":1,"s":100000}}
{{"t":"end","records":4,"dropped":0}}
"#
        );
        let t = kopt_ingest::parse_kopt_trace(&trace, "t.jsonl").unwrap();
        let profile = kopt_ingest::profile_from_timeline(
            t.timeline,
            &format!("trace{evil}.jsonl"),
            "kopt trace",
        );
        assert!(profile.launches[0].name.contains('\u{1b}'));
        let mut d = kopt_analyze::analyze(&profile, &Default::default());
        d.notes.push(format!("a note quoting {evil}"));
        for (name, text) in [
            (
                "term",
                TerminalExporter {
                    width: Some(200),
                    wide: false,
                    verbose: true,
                }
                .render_to_string(&d),
            ),
            ("md", MarkdownExporter.render_to_string(&d)),
        ] {
            for bad in ['\u{1b}', '\u{7}', '\u{9b}'] {
                assert!(!text.contains(bad), "{name} output holds {bad:?}:\n{text}");
            }
            assert!(text.contains("\\u{1b}]0;pwned\\u{7}"), "{name}:\n{text}");
            assert!(
                !text.chars().any(|c| c != '\n' && c.is_control()),
                "{name}:\n{text}"
            );
        }
    }

    /// The diagnosis of a one-launch kopt trace read as `label`.
    fn one_kernel_diagnosis(label: &str) -> Diagnosis {
        let trace = r#"{"t":"api","name":"cudaLaunchKernel","s":100,"e":105,"tid":1,"c":1}
{"t":"kernel","name":"k","s":110,"e":120,"dev":0,"str":7,"c":1}
{"t":"end","records":2,"dropped":0}
"#;
        let t = kopt_ingest::parse_kopt_trace(trace, "t.jsonl").unwrap();
        let profile = kopt_ingest::profile_from_timeline(t.timeline, label, "kopt trace");
        kopt_analyze::analyze(&profile, &Default::default())
    }

    /// One Input line per source; one launch is "1 launch".
    #[test]
    fn input_lines_count_launches_in_words() {
        let mut d = one_kernel_diagnosis("one.jsonl");
        let mut second = d.sources[0].clone();
        second.path = "two.csv".into();
        second.launches = 2;
        d.sources.push(second);
        let inputs: Vec<String> = header_lines(&d)
            .into_iter()
            .filter(|l| l.starts_with("Input: "))
            .collect();
        assert_eq!(
            inputs,
            [
                "Input: one.jsonl (kopt trace, 1 launch)",
                "Input: two.csv (kopt trace, 2 launches)"
            ]
        );
    }

    /// A sixth hostile round (L4): "4.9e-324" in a % column, "inf GB/s",
    /// 301-digit figures and "(1.6-999999959.4x)" reached the reports.
    /// A diagnosis holding such figures renders sanely in every human
    /// format.
    #[test]
    fn extreme_figures_render_sanely_in_every_format() {
        use crate::{Exporter, HtmlExporter, MarkdownExporter, TerminalExporter};
        let mut d = one_kernel_diagnosis("t.jsonl");
        let k = &mut d.kernels[0];
        k.pct_of_total = 4.9e-324;
        k.memory_sol_pct = Some(f64::NAN);
        k.compute_sol_pct = Some(5e-324);
        k.dram_bytes_per_s = Some(f64::INFINITY);
        k.arithmetic_intensity = Some(f64::INFINITY);
        d.device.peaks.dram_bytes_per_s = Some(1e300);
        d.device.peaks.fp32_flops = Some(f64::INFINITY);
        let mut r = kopt_model::Recommendation {
            rank: 1,
            id: "graph_capture".into(),
            title: "Capture".into(),
            kernel: "k".into(),
            kernel_short: "k".into(),
            class: kopt_model::BottleneckClass::LaunchOverhead,
            evidence: String::new(),
            action: String::new(),
            source: String::new(),
            gain: None,
            predicted_speedup: None,
        };
        r.predicted_speedup = Some(kopt_model::PredictedSpeedup {
            estimate: 1e300,
            low: 1.6,
            high: 999_999_959.4,
            model: String::new(),
        });
        r.gain = Some(kopt_model::GainEstimate {
            kernel_pct: f64::INFINITY,
            workload_pct: 1e300,
            saved_ns: f64::NAN,
            method: String::new(),
        });
        d.recommendations = vec![r];
        for (name, text) in [
            (
                "term",
                TerminalExporter {
                    width: Some(200),
                    wide: true,
                    verbose: true,
                }
                .render_to_string(&d),
            ),
            ("md", MarkdownExporter.render_to_string(&d)),
            ("html", HtmlExporter.render_to_string(&d)),
            ("summary", crate::summary::Summary::summary(&d)),
        ] {
            for bad in ["e-324", "inf", "NaN", "999999959"] {
                assert!(!text.contains(bad), "{name} holds {bad}:\n{text}");
            }
            let longest_digits = text
                .split(|c: char| !c.is_ascii_digit())
                .map(str::len)
                .max()
                .unwrap_or(0);
            assert!(
                longest_digits < 24,
                "{name}: a {longest_digits}-digit figure"
            );
        }
    }

    #[test]
    fn bandwidth_keeps_small_figures() {
        assert_eq!(gbs(Some(0.02e9)), "0.02");
        assert_eq!(gbs(Some(2_987.4e9)), "2987");
        assert_eq!(gbs(None), "-");
    }
}
