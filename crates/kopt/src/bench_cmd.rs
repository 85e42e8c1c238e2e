//! `kopt bench`: seed 002's protocol as one command. Variants run
//! interleaved (the order rotates every round, so drift cancels), each timed
//! by the samples it reports itself or else by its wall time, until the
//! stopping rule holds; then a seeded bootstrap interval of the median ratio
//! against the first variant, and keep / marginal / revert.

use std::process::Command;
use std::time::Instant;

use kopt_bench::{
    bootstrap_median_ratio, decide, median, outliers, relative_noise, StopRule, VerdictKind,
};

use std::path::Path;

use kopt_model::Timeline;

use crate::cli::BenchArgs;
use crate::exit::Failure;

struct Variant {
    name: String,
    command: String,
    samples: Vec<f64>,
    /// Seconds spent running it (the stopping rule's clock).
    spent: f64,
    /// The output it wrote (with --check), and the gate's result against the first variant's.
    output: Option<Vec<kopt_ingest::tensor::Tensor>>,
    correct: Option<bool>,
    check_problems: Vec<String>,
}

/// Samples a run printed itself: `{"kopt_sample_ns": N}` or `{"kopt_sample_s": x}` lines, in seconds.
fn reported_samples(stdout: &str) -> Vec<f64> {
    stdout
        .lines()
        .filter(|l| l.contains("kopt_sample"))
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l.trim()).ok())
        .filter_map(|v| {
            v.get("kopt_sample_ns")
                .and_then(|x| x.as_f64())
                .map(|ns| ns * 1e-9)
                .or_else(|| v.get("kopt_sample_s").and_then(|x| x.as_f64()))
        })
        .collect()
}

/// Where samples come from, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// GPU time per iteration (NVTX / ProfilerStep range) from kopt's tracer.
    GpuRanges,
    /// GPU time of all the run's kernels from kopt's tracer (asked for, never chosen).
    GpuKernels,
    /// `{"kopt_sample_ns": N}` lines the command prints.
    Reported,
    /// The whole process's wall time.
    Wall,
}

impl Source {
    fn describe(self, range: Option<&str>) -> String {
        match self {
            Source::GpuRanges => format!(
                "GPU time per iteration (kopt's tracer: from the start of the first GPU activity to the end of the last, of the kernels and copies issued in each `{}` range; the first range of each run is warm-up)",
                range.unwrap_or("?")
            ),
            Source::GpuKernels => "GPU kernel time of the whole run (kopt's tracer: sum of kernel durations)".into(),
            Source::Reported => "self-reported samples".into(),
            Source::Wall => "wall time of the whole process".into(),
        }
    }
}

/// How runs are timed: the source and, for the tracer, its library and range family.
struct Timing {
    source: Source,
    tracer: Option<std::path::PathBuf>,
    range: Option<String>,
    /// The GPU the tracer saw (for the history).
    device: Option<String>,
}

/// Run once plainly; returns (self-reported samples, wall seconds).
fn run_plain(command: &str) -> anyhow::Result<(Vec<f64>, f64)> {
    let t = Instant::now();
    let out = Command::new("/bin/sh").args(["-c", command]).output()?;
    let wall = t.elapsed().as_secs_f64();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(3).collect();
        anyhow::bail!(
            "`{command}` failed ({}): {}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        );
    }
    Ok((
        reported_samples(&String::from_utf8_lossy(&out.stdout)),
        wall,
    ))
}

/// What one run under kopt's tracer gave.
struct TracedRun {
    /// None when the program wrote no trace (it never used CUDA).
    timeline: Option<Timeline>,
    /// The samples it printed itself.
    reported: Vec<f64>,
    wall: f64,
}

/// Run once under kopt's tracer.
fn run_traced(command: &str, tracer: &Path) -> anyhow::Result<TracedRun> {
    let dir = tempfile::tempdir()?;
    let workload = kopt_collect::Workload {
        argv: vec!["/bin/sh".into(), "-c".into(), command.into()],
        gpu: None,
        timeout: None,
    };
    let stdout = std::sync::Mutex::new(String::new());
    let keep = |stream: kopt_collect::Stream, line: &str| {
        if stream == kopt_collect::Stream::Stdout && line.contains("kopt_sample") {
            let mut out = stdout.lock().unwrap_or_else(|e| e.into_inner());
            out.push_str(line);
            out.push('\n');
        }
    };
    let t = Instant::now();
    let traced = kopt_collect::trace::run_traced(&workload, tracer, None, dir.path(), &keep);
    let wall = t.elapsed().as_secs_f64();
    let reported = reported_samples(&stdout.lock().unwrap_or_else(|e| e.into_inner()));
    match traced {
        Ok(run) => Ok(TracedRun {
            timeline: Some(kopt_ingest::read_kopt_trace_set(&run.trace)?.timeline),
            reported,
            wall,
        }),
        Err(kopt_collect::trace::TraceError::NoTrace(..)) => Ok(TracedRun {
            timeline: None,
            reported,
            wall,
        }),
        Err(e) => {
            // The error names the run's log: keep it.
            let _ = dir.keep();
            Err(anyhow::anyhow!("`{command}`: {e}"))
        }
    }
}

/// Samples (seconds) of one traced run for a GPU source.
fn gpu_samples(t: &Timeline, timing: &Timing) -> Vec<f64> {
    match timing.source {
        Source::GpuRanges => {
            let per = kopt_analyze::timeline::gpu_time_per_range(t, timing.range.as_deref())
                .map(|(_, v)| v)
                .unwrap_or_default();
            let skip = usize::from(per.len() >= 3);
            per[skip..].iter().map(|ns| *ns as f64 * 1e-9).collect()
        }
        _ => {
            let ns: i64 = t
                .activities
                .iter()
                .filter(|a| a.kind == kopt_model::ActivityKind::Kernel)
                .map(|a| a.duration_ns())
                .sum();
            if ns > 0 {
                vec![ns as f64 * 1e-9]
            } else {
                Vec::new()
            }
        }
    }
}

/// Run once with the chosen source; returns (samples, wall seconds).
fn run_once(command: &str, timing: &Timing) -> anyhow::Result<(Vec<f64>, f64)> {
    match (timing.source, &timing.tracer) {
        (Source::GpuRanges | Source::GpuKernels, Some(tracer)) => {
            let run = run_traced(command, tracer)?;
            let wall = run.wall;
            let samples = run
                .timeline
                .map(|t| gpu_samples(&t, timing))
                .unwrap_or_default();
            if samples.is_empty() {
                anyhow::bail!(
                    "`{command}` gave no GPU samples under kopt's tracer ({}): time it with --timing reported or wall",
                    timing.source.describe(timing.range.as_deref())
                );
            }
            Ok((samples, wall))
        }
        (Source::Reported, _) => {
            let (samples, wall) = run_plain(command)?;
            if samples.is_empty() {
                anyhow::bail!(
                    "`{command}` printed no {{\"kopt_sample_ns\": N}} lines (--timing reported)"
                );
            }
            Ok((samples, wall))
        }
        _ => {
            let (_, wall) = run_plain(command)?;
            Ok((vec![wall], wall))
        }
    }
}

/// Pick the timing source. `auto` runs the first variant once under kopt's
/// tracer, before the warm-up: repeated NVTX / ProfilerStep ranges mean GPU
/// time per iteration; else the samples it prints; else wall time.
fn choose_timing(a: &BenchArgs, first: &str) -> Result<Timing, Failure> {
    let tracer = || {
        kopt_collect::trace::locate_tracer(a.tracer.as_deref())
            .map_err(|e| Failure::Error(e.into()))
    };
    // One traced run: GPU time per range when it opens at least two ranges
    // of one family, else the run's kernel time; and whether it printed samples.
    let probe = |tracer: std::path::PathBuf| -> Result<(Timing, bool), Failure> {
        let run = run_traced(first, &tracer).map_err(Failure::Error)?;
        let t = run.timeline.as_ref();
        let ranges = t
            .map(|t| t.iteration_ranges(a.range.as_deref()))
            .unwrap_or_default();
        let family =
            (ranges.len() >= 2).then(|| kopt_model::range_family(&ranges[0].name).to_string());
        let timing = Timing {
            source: if family.is_some() {
                Source::GpuRanges
            } else {
                Source::GpuKernels
            },
            range: family.or_else(|| a.range.clone()),
            device: t.and_then(|t| t.device_name.clone()),
            tracer: Some(tracer),
        };
        Ok((timing, !run.reported.is_empty()))
    };
    let untraced = |source| Timing {
        source,
        tracer: None,
        range: None,
        device: None,
    };
    let reported_or_wall = |reported: bool| {
        untraced(if reported {
            Source::Reported
        } else {
            Source::Wall
        })
    };
    Ok(match a.timing.as_str() {
        "gpu" => {
            let (timing, _) = probe(tracer()?)?;
            if timing.source == Source::GpuKernels && a.range.is_some() {
                return Err(Failure::Error(anyhow::anyhow!(
                    "`{first}` opened fewer than two `{}` ranges under kopt's tracer",
                    a.range.as_deref().unwrap_or("")
                )));
            }
            timing
        }
        "reported" => untraced(Source::Reported),
        "wall" => untraced(Source::Wall),
        // The traced run also shows whether the program prints samples: no second run.
        _ => match tracer() {
            Ok(tr) => match probe(tr)? {
                (timing, _) if timing.source == Source::GpuRanges => timing,
                (_, reported) => reported_or_wall(reported),
            },
            Err(_) => {
                let (reported, _) = run_plain(first).map_err(Failure::Error)?;
                reported_or_wall(!reported.is_empty())
            }
        },
    })
}

fn variants(a: &BenchArgs) -> Result<Vec<Variant>, Failure> {
    let v = |name: &str, command: &str| Variant {
        name: name.to_string(),
        command: command.to_string(),
        samples: Vec::new(),
        spent: 0.0,
        output: None,
        correct: None,
        check_problems: Vec::new(),
    };
    if let (Some(b), Some(c)) = (&a.baseline, &a.candidate) {
        return Ok(vec![v("baseline", b), v("candidate", c)]);
    }
    let list: Vec<Variant> = a
        .variants
        .iter()
        .map(|s| {
            s.split_once('=')
                .filter(|(n, c)| !n.trim().is_empty() && !c.trim().is_empty())
                .map(|(n, c)| v(n.trim(), c))
                .ok_or_else(|| Failure::Usage(format!("-n {s}: expected NAME=CMD")))
        })
        .collect::<Result<_, _>>()?;
    if list.len() < 2 {
        return Err(Failure::Usage(
            "give --baseline and --candidate, or at least two -n NAME=CMD variants".into(),
        ));
    }
    Ok(list)
}

pub fn run(a: &BenchArgs) -> Result<(), Failure> {
    if !matches!(a.format.as_str(), "term" | "md" | "json" | "html") {
        return Err(Failure::Usage(format!(
            "--format {} is not one of term, md, json, html",
            a.format
        )));
    }
    if !(a.threshold > 0.0 && a.threshold < 1.0)
        || a.noise < 0.0
        || a.min_time < 0.0
        || a.max_time <= 0.0
    {
        return Err(Failure::Usage(
            "--threshold must be in (0, 1); --noise, --min-time >= 0; --max-time > 0".into(),
        ));
    }
    if !matches!(a.timing.as_str(), "auto" | "gpu" | "reported" | "wall") {
        return Err(Failure::Usage(format!(
            "--timing {} is not one of auto, gpu, reported, wall",
            a.timing
        )));
    }
    let mut vs = variants(a)?;
    let timing = choose_timing(a, &vs[0].command)?;
    let rule = StopRule {
        min_samples: a.min_samples.max(2),
        min_time_s: a.min_time,
        noise_target: a.noise_target,
        max_time_s: a.max_time,
    };
    for v in vs.iter_mut() {
        for _ in 0..a.warmup.max(u32::from(a.check.is_some())) {
            run_once(&v.command, &timing).map_err(Failure::Error)?;
        }
        if let Some(path) = &a.check {
            // Fresh output per variant: a stale file must not pass for a new one.
            let tensors =
                kopt_ingest::tensor::read_tensors(path).map_err(|e| Failure::Error(e.into()))?;
            std::fs::remove_file(path).ok();
            v.output = Some(tensors);
        }
    }
    if a.check.is_some() {
        let reference = vs[0].output.clone().unwrap_or_default();
        for v in vs.iter_mut().skip(1) {
            let out = v.output.as_deref().unwrap_or_default();
            // Paired and compared as `kopt compare` does.
            let results = crate::compare_cmd::compare_tensors(&reference, out, a.tol, false);
            for cmp in &results {
                v.check_problems
                    .extend(cmp.problems.iter().map(|p| format!("{}: {p}", cmp.name)));
            }
            v.correct = Some(results.iter().all(|c| c.passed));
        }
    }
    let mut round = 0usize;
    while vs.iter().any(|v| !rule.should_stop(&v.samples, v.spent)) {
        let n = vs.len();
        for k in 0..n {
            let i = (k + round) % n;
            if rule.should_stop(&vs[i].samples, vs[i].spent) {
                continue;
            }
            let (samples, wall) = run_once(&vs[i].command, &timing).map_err(Failure::Error)?;
            let v = &mut vs[i];
            v.spent += wall;
            v.samples.extend(samples);
        }
        round += 1;
    }
    let source = timing.source.describe(timing.range.as_deref());
    report(a, &vs, &source, timing.device)
}

fn report(
    a: &BenchArgs,
    vs: &[Variant],
    source: &str,
    device: Option<String>,
) -> Result<(), Failure> {
    let base = &vs[0];
    let base_median = median(&base.samples).unwrap_or(f64::NAN);
    let mut rows = Vec::new();
    let mut worst = VerdictKind::Keep;
    for (i, v) in vs.iter().enumerate() {
        let m = median(&v.samples).unwrap_or(f64::NAN);
        let (interval, verdict) = if i == 0 {
            (None, None)
        } else {
            let iv = bootstrap_median_ratio(&base.samples, &v.samples, 2000, 0.95, a.seed)
                .expect("samples exist");
            let vd = decide(&iv, a.threshold, a.noise, v.correct);
            if vd.kind == VerdictKind::Revert
                || (vd.kind == VerdictKind::Marginal && worst == VerdictKind::Keep)
            {
                worst = vd.kind;
            }
            (Some(iv), Some(vd))
        };
        rows.push(serde_json::json!({
            "name": v.name,
            "command": v.command,
            "source": source,
            "samples": v.samples.len(),
            "outliers": outliers(&v.samples).len(),
            "median_s": m,
            "relative_noise": relative_noise(&v.samples),
            "speedup_vs_first": base_median / m,
            "ratio_interval": interval,
            "verdict": verdict,
            "correct": v.correct,
            "check_problems": v.check_problems,
        }));
    }
    let text = render(a, vs, &rows);
    crate::output::write_report(a.output.as_deref(), |out| out.write_all(text.as_bytes()))
        .map_err(Failure::Error)?;
    let summary = rows
        .iter()
        .skip(1)
        .map(|r| {
            format!(
                "{}: {}",
                r["name"].as_str().unwrap_or(""),
                r["verdict"]["kind"].as_str().unwrap_or("")
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    crate::history_cmd::record(
        &a.db,
        kopt_store::RunRow {
            id: 0,
            kind: "bench".into(),
            started_utc: crate::run_record::utc_timestamp(std::time::SystemTime::now()),
            command: vs
                .iter()
                .map(|v| format!("{}={}", v.name, v.command))
                .collect::<Vec<_>>()
                .join(" | "),
            device,
            git_rev: kopt_store::git_revision(std::path::Path::new(".")),
            summary,
            verdict: Some(format!("{worst:?}").to_ascii_uppercase()),
            run_dir: None,
            report_json: serde_json::to_string(&rows).ok(),
        },
    );
    if let Some(h) = &a.journal {
        let cwd = std::env::current_dir().map_err(|e| Failure::Error(e.into()))?;
        let stamp = crate::run_record::utc_timestamp(std::time::SystemTime::now());
        let outcome = rows
            .iter()
            .skip(1)
            .map(|r| {
                format!(
                    "{}: {:.3}x vs {} ({})",
                    r["name"].as_str().unwrap_or(""),
                    r["speedup_vs_first"].as_f64().unwrap_or(0.0),
                    base.name,
                    r["verdict"]["reason"].as_str().unwrap_or("")
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        let entry = kopt_store::Entry {
            when: format!("{} {} UTC", &stamp[..10], &stamp[11..16]),
            hypothesis: h.clone(),
            prediction: None,
            outcome: Some(outcome),
            verdict: Some(format!("{worst:?}").to_ascii_uppercase()),
            run: Some("kopt bench (see kopt history)".into()),
        };
        kopt_store::append_entry(&kopt_store::find_journal(&cwd), &entry)
            .map_err(|e| Failure::Error(e.into()))?;
    }
    if rows
        .iter()
        .skip(1)
        .any(|r| r["verdict"]["kind"] == "REVERT")
    {
        Err(Failure::Regression)
    } else {
        Ok(())
    }
}

/// The report in the chosen format, as text.
fn render(a: &BenchArgs, vs: &[Variant], rows: &[serde_json::Value]) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    match a.format.as_str() {
        "json" => {
            let doc = serde_json::json!({"schema": "kopt/1", "threshold": a.threshold, "seed": a.seed, "variants": rows});
            let _ = writeln!(
                o,
                "{}",
                serde_json::to_string_pretty(&doc).expect("serialisable")
            );
        }
        "html" => {
            let views: Vec<kopt_report::bench_html::VariantView> = vs
                .iter()
                .zip(rows)
                .map(|(v, r)| kopt_report::bench_html::VariantView {
                    name: v.name.clone(),
                    command: v.command.clone(),
                    source: r["source"].as_str().unwrap_or("").into(),
                    samples: v.samples.clone(),
                    median: kopt_model::format_duration_ns(
                        r["median_s"].as_f64().unwrap_or(0.0) * 1e9,
                    ),
                    speedup: format!("{:.3}x", r["speedup_vs_first"].as_f64().unwrap_or(0.0)),
                    noise: r["relative_noise"]
                        .as_f64()
                        .map_or("-".into(), |n| format!("{:.2}%", 100.0 * n)),
                    interval: r["ratio_interval"].as_object().map_or("-".into(), |i| {
                        format!(
                            "[{:.3}, {:.3}]",
                            i["low"].as_f64().unwrap_or(0.0),
                            i["high"].as_f64().unwrap_or(0.0)
                        )
                    }),
                    verdict: r["verdict"]["kind"].as_str().unwrap_or("baseline").into(),
                    reason: r["verdict"]["reason"].as_str().unwrap_or("").into(),
                })
                .collect();
            o.push_str(&kopt_report::bench_html::page(&views, a.threshold));
        }
        fmt => {
            let md = fmt == "md";
            if md {
                let _ = writeln!(
                    o,
                    "| Version | Median | Speedup vs first | Samples | Noise | Verdict vs first |"
                );
                let _ = writeln!(o, "|---|--:|--:|--:|--:|---|");
            }
            for r in rows {
                let verdict = r["verdict"]["kind"].as_str().unwrap_or("baseline");
                let line = (
                    r["name"].as_str().unwrap_or(""),
                    kopt_model::format_duration_ns(r["median_s"].as_f64().unwrap_or(0.0) * 1e9),
                    format!("{:.3}x", r["speedup_vs_first"].as_f64().unwrap_or(0.0)),
                    r["samples"].as_u64().unwrap_or(0),
                    r["relative_noise"]
                        .as_f64()
                        .map_or("-".into(), |n| format!("{:.2}%", 100.0 * n)),
                    verdict,
                );
                if md {
                    let _ = writeln!(
                        o,
                        "| {} | {} | {} | {} | {} | {} |",
                        line.0, line.1, line.2, line.3, line.4, line.5
                    );
                } else {
                    let _ = writeln!(
                        o,
                        "{:<14} {:>12} {:>9} {:>5} samples  noise {:>7}  {}",
                        line.0, line.1, line.2, line.3, line.4, line.5
                    );
                    if let Some(reason) = r["verdict"]["reason"].as_str() {
                        let _ = writeln!(
                            o,
                            "  {reason}; {}",
                            r["verdict"]["next"].as_str().unwrap_or("")
                        );
                    }
                    let _ = writeln!(o, "  timed by: {}", r["source"].as_str().unwrap_or(""));
                    for p in r["check_problems"].as_array().into_iter().flatten() {
                        let _ = writeln!(o, "  correctness: {}", p.as_str().unwrap_or(""));
                    }
                }
            }
        }
    }
    o
}
