//! `kopt profile`: run the workload under ncu in tiers (timing every launch,
//! kopt's metrics on the kernels that carry the time, optionally --set full
//! on the very top), keep every artifact in a run folder, then diagnose.

use std::io::IsTerminal;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use indicatif::{ProgressBar, ProgressStyle};
use kopt_analyze::top_kernel_functions;
use kopt_collect::{CapturedPass, Ncu, Pass, Stream, Workload};
use kopt_ingest::{merge_profile, read_ncu_csv, read_run_folder};
use kopt_model::{Diagnosis, RunInfo};

use crate::analyze_cmd::{diagnose, finish_run};
use crate::options::ProfileRequest;
use crate::run_record::{create_run_dir, utc_timestamp, PassRecord, RunRecord};

/// Share of kernel time the targeted pass covers (within --top): the last
/// percent is spread over kernels too small to be worth a replay.
const TARGET_COVERAGE: f64 = 0.99;

pub fn run(req: &ProfileRequest) -> anyhow::Result<()> {
    let ncu = Ncu::locate(req.ncu.as_deref(), std::env::var_os("PATH").as_deref())?;
    let (id, dir) = create_run_dir(&req.runs_dir)?;
    let started = Instant::now();
    let mut record = RunRecord {
        schema: "kopt/1",
        id,
        kopt_version: env!("CARGO_PKG_VERSION"),
        started_utc: utc_timestamp(SystemTime::now()),
        cwd: std::env::current_dir()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        argv: req.argv.clone(),
        module: req.module.clone(),
        cuda_visible_devices: req.gpu.clone(),
        ncu: ncu.path.display().to_string(),
        ncu_version: ncu.version(),
        passes: Vec::new(),
        status: "running".into(),
        wall_s: None,
    };
    record.save(&dir)?;
    let progress = Progress::new(if req.deep_top.is_some() { 3 } else { 2 });
    let result = passes(req, &ncu, &dir, &mut record, &progress);
    progress.finish();
    record.wall_s = Some(started.elapsed().as_secs_f64());
    match result {
        Ok(diagnosis) => {
            record.status = "ok".into();
            record.save(&dir)?;
            let run = RunInfo {
                module: req.module.clone(),
                argv: req.argv.clone(),
                run_dir: dir.display().to_string(),
                wall_s: started.elapsed().as_secs_f64(),
            };
            finish_run(diagnosis, run, "profile", &req.db, &req.report)
        }
        Err(e) => {
            record.status = format!("failed: {e}");
            // The failure is what the user needs; a second error saving the record would hide it.
            let _ = record.save(&dir);
            Err(e)
        }
    }
}

fn passes(
    req: &ProfileRequest,
    ncu: &Ncu,
    dir: &Path,
    record: &mut RunRecord,
    progress: &Progress,
) -> anyhow::Result<Diagnosis> {
    let workload = Workload {
        argv: req.argv.clone(),
        gpu: req.gpu.clone(),
        timeout: req.timeout,
    };
    // Pass 1: where the time goes, from kopt's tracer (the real timeline:
    // gaps and launch cost too) or else ncu. The workload's own output is shown here only.
    // --kernel filters the tracer's kernels when Rust's regex syntax takes it;
    // otherwise ncu applies it in its own timing pass.
    let filter = req
        .kernel_regex
        .as_deref()
        .map(regex::Regex::new)
        .transpose();
    let traced = if let (true, Ok(filter)) = (req.trace_timing, filter) {
        match kopt_collect::trace::locate_tracer(req.tracer.as_deref()) {
            Ok(tracer) => tracer_pass(
                &tracer,
                &workload,
                dir,
                record,
                progress,
                req,
                filter.as_ref(),
            )?,
            Err(e) => {
                progress.note(&format!("{e}; timing every launch with ncu instead"));
                None
            }
        }
    } else {
        None
    };
    let mut step = |n: usize, pass: Pass, passthrough: bool| -> anyhow::Result<CapturedPass> {
        progress.start(n, &pass.describe());
        let t = Instant::now();
        let on_line = |s: Stream, l: &str| progress.output(s, l, passthrough);
        let captured = ncu.capture(&pass, &workload, dir, &on_line)?;
        record.passes.push(PassRecord {
            name: pass.file_stem().into(),
            description: pass.describe(),
            command: captured.command.clone(),
            elapsed_s: t.elapsed().as_secs_f64(),
            exit_code: captured.outcome.code,
            csv: captured.csv.display().to_string(),
        });
        record.save(dir)?;
        progress.done(n, t.elapsed());
        Ok(captured)
    };

    let functions = match traced {
        Some(functions) => functions,
        None => {
            let timing = step(
                1,
                Pass::Timing {
                    kernel_regex: req.kernel_regex.clone(),
                },
                !req.quiet,
            )?;
            let timing_file = read_ncu_csv(&timing.csv)?;
            let functions = top_kernel_functions(
                &merge_profile(vec![(String::new(), timing_file)]),
                req.top,
                TARGET_COVERAGE,
            );
            if functions.is_empty() {
                anyhow::bail!(
                    "{}: the timing pass recorded no kernel time",
                    timing.csv.display()
                );
            }
            functions
        }
    };

    // Pass 2: kopt's metrics on the kernels that carry the time.
    step(
        2,
        Pass::Targeted {
            functions: functions.clone(),
            launches: req.launches,
        },
        false,
    )?;

    // Pass 3: ncu's full sections for the very top, when asked.
    if let Some(n) = req.deep_top {
        let top: Vec<String> = functions.iter().take(n).cloned().collect();
        step(
            3,
            Pass::Deep {
                functions: top,
                launches: 1,
            },
            false,
        )?;
    }
    let profile = read_run_folder(dir)?;
    Ok(diagnose(profile, &req.report, None))
}

/// Pass 1 under kopt's tracer: the kernels covering the time, or None when
/// the tracer recorded no kernel (no CUPTI, another CUPTI client), so ncu times them instead.
fn tracer_pass(
    tracer: &Path,
    workload: &Workload,
    dir: &Path,
    record: &mut RunRecord,
    progress: &Progress,
    req: &ProfileRequest,
    kernel_filter: Option<&regex::Regex>,
) -> anyhow::Result<Option<Vec<String>>> {
    let passthrough = !req.quiet;
    let what = "timeline of every launch (kopt's CUPTI tracer)";
    progress.start(1, what);
    let t = Instant::now();
    let on_line = |s: Stream, l: &str| progress.output(s, l, passthrough);
    let run = match kopt_collect::trace::run_traced(workload, tracer, None, dir, &on_line) {
        Ok(run) => run,
        Err(kopt_collect::trace::TraceError::NoTrace(..)) => {
            progress.note("the tracer wrote no trace; timing every launch with ncu instead");
            return Ok(None);
        }
        Err(e) => return Err(e.into()),
    };
    record.passes.push(PassRecord {
        name: "pass1-trace".into(),
        description: what.into(),
        command: workload.argv.clone(),
        elapsed_s: t.elapsed().as_secs_f64(),
        exit_code: run.outcome.code,
        csv: run.trace.display().to_string(),
    });
    record.save(dir)?;
    let trace = kopt_ingest::read_kopt_trace_set(&run.trace)?;
    let label = run.trace.display().to_string();
    let (timing, _) = kopt_ingest::TimingPass::from_timeline(trace.timeline, &label);
    let mut profile = kopt_ingest::merge_tiered(timing, None, None, Vec::new());
    if let Some(re) = kernel_filter {
        if !profile.launches.is_empty() && !profile.launches.iter().any(|l| re.is_match(&l.name)) {
            let mut names: Vec<String> = profile
                .launches
                .iter()
                .map(|l| kopt_model::kernel_short_name(&l.name))
                .collect();
            names.sort();
            names.dedup();
            names.truncate(8);
            anyhow::bail!(
                "--kernel {}: no traced kernel matches (kernels seen: {})",
                re.as_str(),
                names.join(", ")
            );
        }
        profile.launches.retain(|l| re.is_match(&l.name));
    }
    let functions = top_kernel_functions(&profile, req.top, TARGET_COVERAGE);
    if functions.is_empty() {
        progress.note("the tracer recorded no kernels; timing every launch with ncu instead");
        // The ncu pass's CSV takes precedence when the folder is read back.
        return Ok(None);
    }
    progress.done(1, t.elapsed());
    Ok(Some(functions))
}

/// A spinner per pass on a terminal, plain lines otherwise; the workload's
/// output goes to stderr so the report alone is on stdout.
struct Progress {
    bar: Option<ProgressBar>,
    total: usize,
}

impl Progress {
    fn new(total: usize) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::new_spinner();
            b.set_style(
                ProgressStyle::with_template("{spinner} kopt: {msg} [{elapsed}]")
                    .expect("valid template"),
            );
            b.enable_steady_tick(Duration::from_millis(120));
            b
        });
        Progress { bar, total }
    }

    fn start(&self, n: usize, what: &str) {
        let msg = format!("pass {n}/{}: {what}", self.total);
        match &self.bar {
            Some(b) => {
                b.reset_elapsed();
                b.set_message(msg);
            }
            None => eprintln!("kopt: {msg} ..."),
        }
    }

    fn done(&self, n: usize, took: Duration) {
        let msg = format!(
            "kopt: pass {n}/{} done in {:.1} s",
            self.total,
            took.as_secs_f64()
        );
        match &self.bar {
            Some(b) => b.println(msg),
            None => eprintln!("{msg}"),
        }
    }

    /// A line between passes (a fallback taken, say).
    fn note(&self, msg: &str) {
        match &self.bar {
            Some(b) => b.println(format!("kopt: {msg}")),
            None => eprintln!("kopt: {msg}"),
        }
    }

    fn output(&self, _stream: Stream, line: &str, passthrough: bool) {
        // ncu's own chatter stays in the log; its errors are reported by kopt.
        if !passthrough || line.starts_with("==PROF==") || line.starts_with("==ERROR==") {
            return;
        }
        match &self.bar {
            Some(b) => b.println(line),
            None => eprintln!("{line}"),
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
