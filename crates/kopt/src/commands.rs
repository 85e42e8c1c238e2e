//! One function per subcommand: lower the flags, call the engine, render.

use std::io::Write;
use std::path::{Path, PathBuf};

use kopt_engine::Error;
use kopt_model::{format_duration_ns, Diagnosis, VerdictKind};
use kopt_report::{Exporter, Format, HtmlExporter, Layout, Render};

use crate::cli::{
    AnalyzeArgs, BenchArgs, CompareArgs, HistoryArgs, HistoryCommand, JournalCommand, OptimizeArgs,
    ProfileArgs, TraceArgs,
};
use crate::exit::Failure;
use crate::options::{self, ReportOptions};
use crate::progress::TerminalProgress;

type Outcome = Result<(), Failure>;

pub fn analyze(a: &AnalyzeArgs) -> Outcome {
    // Started by the MCP server to analyse in a process of its own: read
    // only inside the server's folders.
    kopt_engine::confine_reads_from_env();
    let (req, report) = options::analyze(a)?;
    // A folder of per-rank traces is one distributed job, never merged.
    if let Some(files) = kopt_engine::ranks::rank_folder(&req.files)? {
        if req.bare_run.is_some() {
            return Err(Error::Usage(
                "a folder of per-rank traces is analysed as it is: a command after `--` applies to one trace".into(),
            )
            .into());
        }
        let d = kopt_engine::ranks::analyze_ranks(&files)?;
        return emit_ranks(&d, &report);
    }
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
        // A distributed job: every rank, each its own processes.
        let written = if traced.rank_timelines.is_empty() {
            kopt_report::chrome_trace::write_chrome_trace(timeline, &mut bytes)
        } else {
            let ranks: Vec<(u32, &kopt_model::Timeline)> =
                traced.rank_timelines.iter().map(|(r, t)| (*r, t)).collect();
            kopt_report::chrome_trace::write_chrome_trace_ranks(&ranks, &mut bytes)
        };
        written.map_err(|e| Error::Output(format!("{}: {e}", path.display())))?;
        extra.push((path, bytes));
    }
    match &traced.ranks {
        // The job's ranks follow rank 0's diagnosis in the text formats
        // (JSON keeps one document; the run folder has ranks.json).
        Some(ranks) if matches!(report.format, Format::Terminal | Format::Markdown) => {
            let layout = Layout {
                width: report.width,
                wide: report.wide,
                verbose: report.verbose,
            };
            let mut main = traced.diagnosis.render(report.format, layout);
            main.push('\n');
            main.push_str(&ranks.render(report.format, layout));
            check_outputs(&report, None)?;
            let html = report.html.as_ref().map(|p| {
                (
                    p.clone(),
                    HtmlExporter
                        .render_to_string(&traced.diagnosis)
                        .into_bytes(),
                )
            });
            extra.extend(html);
            let refs: Vec<(&Path, &[u8])> = extra
                .iter()
                .map(|(p, b)| (p.as_path(), b.as_slice()))
                .collect();
            write_or_print(report.output.as_deref(), main.as_bytes(), &refs)
        }
        _ => emit_diagnosis(&traced.diagnosis, &report, extra),
    }
}

pub fn bench(a: &BenchArgs) -> Outcome {
    if let (Some(script), Some(candidate)) = (&a.script, &a.candidate_script) {
        return bench_scripts(a, script, candidate);
    }
    let req = options::bench(a)?;
    if let Some(o) = &a.output {
        kopt_engine::check_outputs([o.as_path()])?;
    }
    let report = kopt_engine::bench(&req, &TerminalProgress::new(false))?;
    let text = report.render(a.format, Layout::default());
    write_or_print(a.output.as_deref(), text.as_bytes(), &[])?;
    if report.verdict == VerdictKind::Revert {
        return Err(Failure::Regression);
    }
    Ok(())
}

/// `kopt bench --script A.py --candidate-script B.py`: the in-process gate.
fn bench_scripts(a: &BenchArgs, script: &std::path::Path, candidate: &std::path::Path) -> Outcome {
    if let Some(o) = &a.output {
        kopt_engine::check_outputs([o.as_path()])?;
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
    let text = kopt_report::Render::render(&report, a.format, kopt_report::Layout::default());
    write_or_print(a.output.as_deref(), text.as_bytes(), &[])?;
    if matches!(report.verdict, VerdictKind::Revert | VerdictKind::Suspect) {
        return Err(Failure::Regression);
    }
    Ok(())
}

pub fn compare(a: &CompareArgs) -> Outcome {
    let req = options::compare(a)?;
    if let Some(o) = &a.output {
        kopt_engine::check_outputs([o.as_path()])?;
    }
    let report = kopt_engine::compare(&req, &TerminalProgress::new(false))?;
    let text = report.render(a.format, Layout::default());
    write_or_print(a.output.as_deref(), text.as_bytes(), &[])?;
    if !report.passed {
        return Err(Failure::Regression);
    }
    Ok(())
}

pub fn optimize(a: &OptimizeArgs) -> Outcome {
    let req = options::optimize(a)?;
    if let Some(o) = &a.output {
        kopt_engine::check_outputs([o.as_path()])?;
    }
    let report = kopt_engine::optimize(&req, &TerminalProgress::new(true))?;
    let text = report.render(a.format, Layout::default());
    write_or_print(a.output.as_deref(), text.as_bytes(), &[])
}

pub fn journal(cmd: &JournalCommand) -> Outcome {
    match cmd {
        JournalCommand::Show { file } => {
            // The file is anyone's text: control characters (escape
            // sequences) are shown as visible escapes, line breaks kept.
            let (path, text) = kopt_engine::journal::read(file.as_deref())?;
            match text {
                Some(text) => print(kopt_report::escape::terminal_lines(&text).as_bytes()),
                // Nothing written yet is not an error, as with `kopt history`.
                None => print(
                    format!(
                        "no journal entries yet in {} (`kopt journal add` writes one)\n",
                        path.display()
                    )
                    .as_bytes(),
                ),
            }
        }
        JournalCommand::Add(a) => {
            let req = kopt_engine::journal::JournalEntryRequest {
                hypothesis: a.hypothesis.clone(),
                predict: a.predict.clone(),
                outcome: a.outcome.clone(),
                verdict: a.verdict.clone(),
                run: a.run.clone(),
            };
            let (path, _) = kopt_engine::journal::add_entry(a.file.as_deref(), &req)?;
            eprintln!("kopt: journal entry added to {}", path.display());
            Ok(())
        }
    }
}

pub fn history(a: &HistoryArgs) -> Outcome {
    let db = a.db.as_deref();
    let (terminal, layout) = (Format::Terminal, Layout::default());
    let text = match &a.command {
        None => kopt_engine::history::list(db, a.limit)?.render(terminal, layout),
        Some(HistoryCommand::Show { id }) => {
            kopt_engine::history::show(db, *id)?.render(terminal, layout)
        }
        Some(HistoryCommand::Diff { a: ia, b: ib }) => {
            kopt_engine::history::diff(db, *ia, *ib)?.render(terminal, layout)
        }
        Some(HistoryCommand::Calibration) => {
            kopt_engine::history::calibration_report(db)?.render(terminal, layout)
        }
        Some(HistoryCommand::Stress { rows }) => {
            kopt_engine::history::fill_for_stress(db, *rows)?;
            String::new()
        }
    };
    print(text.as_bytes())
}

/// Every file a report command will write, checked before the workload runs.
fn check_outputs(r: &ReportOptions, export: Option<&Path>) -> Result<(), Error> {
    let paths = [r.output.as_deref(), r.html.as_deref(), export];
    kopt_engine::check_outputs(paths.into_iter().flatten())
}

/// The diagnosis in its format to -o or stdout, the HTML page and any
/// extra files beside it; nothing is written unless every file can be.
fn emit_diagnosis(d: &Diagnosis, r: &ReportOptions, extra: Vec<(PathBuf, Vec<u8>)>) -> Outcome {
    let layout = Layout {
        width: r.width,
        wide: r.wide,
        verbose: r.verbose,
    };
    let main = d.render(r.format, layout);
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

fn emit_ranks(d: &kopt_model::RanksDiagnosis, r: &ReportOptions) -> Outcome {
    let layout = Layout {
        width: r.width,
        wide: r.wide,
        verbose: r.verbose,
    };
    let main = d.render(r.format, layout);
    let html = r
        .html
        .as_ref()
        .map(|p| (p.as_path(), d.render(Format::Html, layout).into_bytes()));
    let refs: Vec<(&Path, &[u8])> = html.iter().map(|(p, b)| (*p, b.as_slice())).collect();
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
        kopt_engine::check_outputs([o.as_path()])?;
    }
    let report = kopt_engine::tune(&req, &TerminalProgress::new(true))?;
    let text = report.render(a.format, Layout::default());
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
    let (db, winners) = kopt_engine::tune::cached_winners(db, key)?;
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
    print(kopt_report::escape::terminal_lines(&o).as_bytes())
}

pub fn mcp(a: &crate::cli::McpArgs) -> Outcome {
    let cwd = std::env::current_dir().map_err(|e| Error::Input(format!("current folder: {e}")))?;
    let config = crate::mcp::Config {
        allowed: a.allow_path.iter().map(|p| cwd.join(p)).collect(),
        cwd,
        max_calls: a.max_calls as usize,
    };
    crate::mcp::serve_stdio(config).map_err(|e| Error::Input(format!("standard input: {e}")))?;
    Ok(())
}

pub fn schema(name: Option<&str>) -> Outcome {
    print(crate::mcp::schema::print(name)?.as_bytes())
}
