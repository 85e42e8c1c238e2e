//! One function per subcommand: lower the flags, call the engine, render.

use std::io::Write;
use std::path::{Path, PathBuf};

use kopt_engine::history::{DiffUnit, StoredReport};
use kopt_engine::Error;
use kopt_model::{format_duration_ns, Diagnosis, VerdictKind};
use kopt_report::{Exporter, Format, HtmlExporter};

use crate::cli::{
    AnalyzeArgs, BenchArgs, CompareArgs, HistoryArgs, HistoryCommand, JournalCommand, OptimizeArgs,
    ProfileArgs, TraceArgs,
};
use crate::exit::Failure;
use crate::options::{self, ReportOptions};
use crate::progress::TerminalProgress;

type Outcome = Result<(), Failure>;

pub fn analyze(a: &AnalyzeArgs) -> Outcome {
    let (req, report) = options::analyze(a)?;
    let diagnosis = match req.bare_run {
        Some(_) => {
            // The program runs twice before the report is written: a report
            // that cannot be written is said first.
            check_outputs(&report, None)?;
            kopt_engine::analyze(&req, &TerminalProgress::new(true))?
        }
        None => kopt_engine::analyze(&req, &kopt_engine::Silent)?,
    };
    emit_diagnosis(&diagnosis, &report, Vec::new())
}

pub fn profile(a: &ProfileArgs) -> Outcome {
    let (req, report) = options::profile(a)?;
    check_outputs(&report, None)?;
    let diagnosis = kopt_engine::profile(&req, &TerminalProgress::new(true))?;
    emit_diagnosis(&diagnosis, &report, Vec::new())
}

pub fn trace(a: &TraceArgs) -> Outcome {
    let (req, report, export) = options::trace(a)?;
    check_outputs(&report, export.as_deref())?;
    let traced = kopt_engine::trace(&req, &TerminalProgress::new(false))?;
    let mut extra = Vec::new();
    if let (Some(path), Some(timeline)) = (export, &traced.timeline) {
        let mut bytes = Vec::new();
        kopt_report::chrome_trace::write_chrome_trace(timeline, &mut bytes)
            .map_err(|e| Error::Output(format!("{}: {e}", path.display())))?;
        extra.push((path, bytes));
    }
    emit_diagnosis(&traced.diagnosis, &report, extra)
}

pub fn bench(a: &BenchArgs) -> Outcome {
    if let (Some(script), Some(candidate)) = (&a.script, &a.candidate_script) {
        return bench_scripts(a, script, candidate);
    }
    let req = options::bench(a)?;
    if let Some(o) = &a.output {
        kopt_store::check_writable([o.as_path()]).map_err(|e| Error::Output(e.to_string()))?;
    }
    let report = kopt_engine::bench(&req, &TerminalProgress::new(false))?;
    let text = kopt_report::render_bench(&report, a.format);
    write_or_print(a.output.as_deref(), text.as_bytes(), &[])?;
    if report.verdict == VerdictKind::Revert {
        return Err(Failure::Regression);
    }
    Ok(())
}

/// `kopt bench --script A.py --candidate-script B.py`: the in-process gate.
fn bench_scripts(a: &BenchArgs, script: &std::path::Path, candidate: &std::path::Path) -> Outcome {
    if let Some(o) = &a.output {
        kopt_store::check_writable([o.as_path()]).map_err(|e| Error::Output(e.to_string()))?;
    }
    let m = &a.measure;
    let req = kopt_engine::gate::GateScriptRequest {
        baseline: script.to_path_buf(),
        candidate: candidate.to_path_buf(),
        module: a.module.clone(),
        python: a.python.clone(),
        gpu: a.gpu.clone(),
        flush_l2: a.flush_l2,
        checks: 6,
        threshold: m.threshold,
        noise: m.noise,
        seed: m.seed,
        tol: m.tol,
        warmup: m.warmup.max(3),
        min_samples: m.min_samples.max(20),
        min_time: m.min_time.min(a.gate_time / 4.0),
        max_time: a.gate_time,
        noise_target: m.noise_target,
        tracer: m.tracer.clone(),
    };
    let report = kopt_engine::gate::bench_scripts(&req, &TerminalProgress::new(false))?;
    let text = kopt_report::render_gate(&report, a.format);
    write_or_print(a.output.as_deref(), text.as_bytes(), &[])?;
    if matches!(report.verdict, VerdictKind::Revert | VerdictKind::Suspect) {
        return Err(Failure::Regression);
    }
    Ok(())
}

pub fn compare(a: &CompareArgs) -> Outcome {
    let req = options::compare(a)?;
    if let Some(o) = &a.output {
        kopt_store::check_writable([o.as_path()]).map_err(|e| Error::Output(e.to_string()))?;
    }
    let report = kopt_engine::compare(&req, &TerminalProgress::new(false))?;
    let text = kopt_report::render_compare(&report, a.format);
    write_or_print(a.output.as_deref(), text.as_bytes(), &[])?;
    if !report.passed {
        return Err(Failure::Regression);
    }
    Ok(())
}

pub fn optimize(a: &OptimizeArgs) -> Outcome {
    let req = options::optimize(a)?;
    if let Some(o) = &a.output {
        kopt_store::check_writable([o.as_path()]).map_err(|e| Error::Output(e.to_string()))?;
    }
    let report = kopt_engine::optimize(&req, &TerminalProgress::new(true))?;
    let text = kopt_report::render_optimize(&report, a.format);
    write_or_print(a.output.as_deref(), text.as_bytes(), &[])
}

pub fn journal(cmd: &JournalCommand) -> Outcome {
    let cwd = std::env::current_dir().map_err(|e| Error::Input(format!("current folder: {e}")))?;
    match cmd {
        JournalCommand::Show { file } => {
            let path = file
                .clone()
                .unwrap_or_else(|| kopt_engine::journal::default_file(&cwd));
            print(kopt_engine::journal::read(&path)?.as_bytes())
        }
        JournalCommand::Add(a) => {
            let path = a
                .file
                .clone()
                .unwrap_or_else(|| kopt_engine::journal::default_file(&cwd));
            let req = kopt_engine::journal::JournalEntryRequest {
                hypothesis: a.hypothesis.clone(),
                predict: a.predict.clone(),
                outcome: a.outcome.clone(),
                verdict: a.verdict.clone(),
                run: a.run.clone(),
            };
            kopt_engine::journal::add_entry(&path, &req)?;
            eprintln!("kopt: journal entry added to {}", path.display());
            Ok(())
        }
    }
}

pub fn history(a: &HistoryArgs) -> Outcome {
    use std::fmt::Write as _;
    let db =
        a.db.clone()
            .unwrap_or_else(|| kopt_engine::RecordPaths::current().db);
    let mut o = String::new();
    match &a.command {
        None => {
            let rows = kopt_engine::history::list(&db, a.limit)?;
            if rows.is_empty() {
                let _ = writeln!(o, "no runs recorded in {}", db.display());
            }
            for r in rows {
                let _ = writeln!(
                    o,
                    "{:>5}  {}  {:<8} {}  | {}{}",
                    r.id,
                    r.started_utc,
                    r.kind,
                    r.summary,
                    r.command,
                    r.git_rev.map_or(String::new(), |g| format!("  @{g}"))
                );
            }
        }
        Some(HistoryCommand::Show { id }) => {
            let (r, report) = kopt_engine::history::show(&db, *id)?;
            let _ = writeln!(o, "run {} ({}) at {}", r.id, r.kind, r.started_utc);
            let _ = writeln!(o, "command: {}", r.command);
            for (k, v) in [
                ("device", &r.device),
                ("git", &r.git_rev),
                ("verdict", &r.verdict),
                ("run folder", &r.run_dir),
            ] {
                if let Some(v) = v {
                    let _ = writeln!(o, "{k}: {v}");
                }
            }
            let _ = writeln!(o, "summary: {}\n", r.summary);
            match report {
                StoredReport::Diagnosis(d) => {
                    o.push_str(&Format::Terminal.exporter(None).render_to_string(&d))
                }
                StoredReport::Bench(b) => {
                    o.push_str(&kopt_report::render_bench(&b, Format::Terminal))
                }
                StoredReport::Compare(c) => {
                    o.push_str(&kopt_report::render_compare(&c, Format::Terminal))
                }
                StoredReport::Optimize(r) => {
                    o.push_str(&kopt_report::render_optimize(&r, Format::Terminal))
                }
                StoredReport::Tune(r) => {
                    o.push_str(&kopt_report::render_tune(&r, Format::Terminal))
                }
                StoredReport::None => {
                    if let Some(j) = &r.report_json {
                        let _ = writeln!(
                            o,
                            "(a report this kopt cannot read back: {} bytes of JSON)",
                            j.len()
                        );
                    }
                }
            }
        }
        Some(HistoryCommand::Diff { a: ia, b: ib }) => {
            let d = kopt_engine::history::diff(&db, *ia, *ib)?;
            let _ = writeln!(
                o,
                "run {} ({}) vs run {} ({})",
                d.a.id, d.a.summary, d.b.id, d.b.summary
            );
            let fmt = |v: Option<f64>| match (v, d.unit) {
                (None, _) => "-".to_string(),
                (Some(t), DiffUnit::KernelNs) => format_duration_ns(t),
                (Some(t), DiffUnit::MedianS) => format_duration_ns(t * 1e9),
                (Some(e), DiffUnit::RelL2) => format!("{e:.3e}"),
            };
            let change = |r: &kopt_engine::history::DiffRow| match (r.a, r.b, r.change_pct()) {
                (_, _, Some(p)) => format!("{p:+.1}%"),
                (None, Some(_), _) => "new".into(),
                (Some(_), None, _) => "gone".into(),
                _ => "-".into(),
            };
            if let Some(t) = &d.total {
                let _ = writeln!(
                    o,
                    "{}: {} -> {} ({})",
                    t.name,
                    fmt(t.a),
                    fmt(t.b),
                    change(t)
                );
            }
            let what = match d.unit {
                DiffUnit::KernelNs => "kernel",
                DiffUnit::MedianS => "variant or config (median)",
                DiffUnit::RelL2 => "tensor (rel L2)",
            };
            let _ = writeln!(
                o,
                "  {what:<40} {:>12} {:>12}  change",
                format!("run {}", d.a.id),
                format!("run {}", d.b.id)
            );
            for r in &d.rows {
                let _ = writeln!(
                    o,
                    "  {:<40} {:>12} {:>12}  {}",
                    r.name,
                    fmt(r.a),
                    fmt(r.b),
                    change(r)
                );
            }
        }
        Some(HistoryCommand::Calibration) => {
            let points = kopt_engine::history::calibration_points(&db)?;
            if points.is_empty() {
                let _ = writeln!(o, "no checked predictions in {} yet: kopt optimize records them (predicted and measured speed-up per candidate)", db.display());
            }
            for c in kopt_engine::history::calibration(&db)? {
                let quoted = if c.points >= kopt_engine::history::CALIBRATION_MIN_POINTS {
                    "quoted in reports"
                } else {
                    "not quoted yet"
                };
                let _ = writeln!(
                    o,
                    "{:<22} {:>3} point(s)  measured/predicted median {:.2} ({:.2} to {:.2})  {quoted}",
                    c.rule, c.points, c.median_ratio, c.min_ratio, c.max_ratio
                );
            }
            for p in &points {
                let _ = writeln!(
                    o,
                    "  run {:>5}  {:<22} predicted {:.2}x, measured {:.2}x",
                    p.run, p.rule, p.predicted, p.measured
                );
            }
        }
        Some(HistoryCommand::Stress { rows }) => {
            let mut h = kopt_store::History::open(&db).map_err(Error::from)?;
            for i in 0..*rows {
                let mut row = kopt_engine::record::run_row(
                    "stress",
                    "kopt history stress".into(),
                    format!("row {i}"),
                );
                row.started_utc = format!("row {i}");
                row.git_rev = None;
                row.report_json = Some("x".repeat(512));
                h.record(&row).map_err(Error::from)?;
            }
        }
    }
    print(o.as_bytes())
}

/// Every file a report command will write, checked before the workload runs.
fn check_outputs(r: &ReportOptions, export: Option<&Path>) -> Result<(), Error> {
    let paths = [r.output.as_deref(), r.html.as_deref(), export];
    kopt_store::check_writable(paths.into_iter().flatten())
        .map_err(|e| Error::Output(e.to_string()))
}

/// The diagnosis in its format to -o or stdout, the HTML page and any
/// extra files beside it; nothing is written unless every file can be.
fn emit_diagnosis(d: &Diagnosis, r: &ReportOptions, extra: Vec<(PathBuf, Vec<u8>)>) -> Outcome {
    let main = r.format.exporter_with(r.width, r.wide).render_to_string(d);
    let mut files = extra;
    if let Some(html) = &r.html {
        files.push((html.clone(), HtmlExporter.render_to_string(d).into_bytes()));
    }
    let refs: Vec<(&Path, &[u8])> = files
        .iter()
        .map(|(p, b)| (p.as_path(), b.as_slice()))
        .collect();
    write_or_print(r.output.as_deref(), main.as_bytes(), &refs)
}

fn write_or_print(output: Option<&Path>, main: &[u8], files: &[(&Path, &[u8])]) -> Outcome {
    let mut all: Vec<(&Path, &[u8])> = files.to_vec();
    if let Some(o) = output {
        all.push((o, main));
    }
    kopt_engine::write_outputs(&all)?;
    if output.is_none() {
        print(main)?;
    }
    Ok(())
}

/// Standard output; a reader that closed the pipe early (`| head`) is not an error.
fn print(bytes: &[u8]) -> Outcome {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Error::Output(format!("standard output: {e}")).into())
        }
        _ => Ok(()),
    }
}

pub fn tune(a: &crate::cli::TuneArgs) -> Outcome {
    if let Some(crate::cli::TuneCommand::Show { key, db }) = &a.show {
        return tune_show(key.as_deref(), db.as_deref());
    }
    let req = options::tune(a)?;
    if let Some(o) = &a.output {
        kopt_store::check_writable([o.as_path()]).map_err(|e| Error::Output(e.to_string()))?;
    }
    let report = kopt_engine::tune(&req, &TerminalProgress::new(true))?;
    let text = kopt_report::render_tune(&report, a.format);
    match a.emit {
        Some(crate::cli::TuneEmit::Triton) => {
            let entry = report.triton_config().ok_or_else(|| {
                Error::WorkloadFailed("no config ran correctly: nothing to emit".into())
            })?;
            match &a.output {
                Some(o) => kopt_engine::write_outputs(&[(o.as_path(), text.as_bytes())])?,
                None => eprint!("{text}"),
            }
            print(format!("{entry}\n").as_bytes())
        }
        None => write_or_print(a.output.as_deref(), text.as_bytes(), &[]),
    }
}

fn tune_show(key: Option<&str>, db: Option<&Path>) -> Outcome {
    use std::fmt::Write as _;
    let db = db.map_or_else(|| kopt_engine::RecordPaths::current().db, Path::to_path_buf);
    let winners = kopt_engine::tune::cached_winners(&db, key)?;
    let mut o = String::new();
    if winners.is_empty() {
        let _ = writeln!(o, "no tune results cached in {}", db.display());
    }
    for w in winners {
        let config: std::collections::BTreeMap<String, String> =
            serde_json::from_str(&w.params).unwrap_or_default();
        let config = config
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        let _ = writeln!(
            o,
            "{}  key {}  {} (driver {}, kopt {})\n  winner {}  {}  of {} cached trials\n  template: {}",
            w.updated_utc,
            if w.key.is_empty() { "-" } else { &w.key },
            w.device,
            if w.driver.is_empty() { "-" } else { &w.driver },
            w.kopt_version,
            config,
            format_duration_ns(w.median_s * 1e9),
            w.trials,
            w.template
        );
    }
    // Templates and keys are the user's text: no control character reaches the terminal.
    let safe: String = o
        .chars()
        .map(|c| if c.is_control() && c != '\n' { '?' } else { c })
        .collect();
    print(safe.as_bytes())
}
