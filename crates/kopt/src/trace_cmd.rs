//! `kopt trace`: run any CUDA program under kopt's CUPTI tracer, keep the
//! trace in a run folder, diagnose the timeline, optionally export it.

use std::time::Instant;

use kopt_collect::trace::{locate_tracer, run_traced};
use kopt_collect::{Stream, Workload};
use kopt_ingest::{profile_from_timeline, read_kopt_trace_set};
use kopt_model::RunInfo;

use crate::analyze_cmd::{diagnose, finish_run};
use crate::options::TraceRequest;
use crate::output::write_report;
use crate::run_record::create_run_dir;

pub fn run(req: &TraceRequest) -> anyhow::Result<()> {
    let tracer = locate_tracer(req.tracer.as_deref())?;
    let (_, dir) = create_run_dir(&req.runs_dir)?;
    let started = Instant::now();
    let workload = Workload {
        argv: req.argv.clone(),
        gpu: req.gpu.clone(),
        timeout: req.timeout,
    };
    let quiet = req.quiet;
    let on_line = move |_: Stream, line: &str| {
        if !quiet {
            eprintln!("{line}");
        }
    };
    let traced = run_traced(&workload, &tracer, req.sample, &dir, &on_line)?;
    let trace = read_kopt_trace_set(&traced.trace)?;
    let label = traced.trace.display().to_string();
    if let Some(path) = &req.export {
        write_report(Some(path), |out| {
            kopt_report::chrome_trace::write_chrome_trace(&trace.timeline, out)
        })?;
    }
    let windows = trace.timeline.sampled_windows.len();
    let caught_nothing = trace.timeline.activities.is_empty();
    let profile = profile_from_timeline(trace.timeline, &label, "kopt trace (CUPTI)");
    let mut diagnosis = diagnose(profile, &req.report, None);
    if !trace.ended {
        diagnosis.notes.insert(0, "The trace did not end cleanly (the program exited without running its exit handlers, or was killed): the last activity records may be missing.".into());
    }
    if trace.processes > 1 {
        diagnosis.notes.insert(
            0,
            format!(
                "{} processes of the workload used CUDA; their traces are merged into one timeline (trace.jsonl and trace.jsonl.<pid> in the run folder).",
                trace.processes
            ),
        );
    }
    if trace.lost_buffers > 0 {
        diagnosis.notes.insert(
            0,
            format!(
                "Another CUPTI client took tracing over during the run ({} activity buffer(s) never came back to kopt): the program probably starts torch.profiler (or runs under nsys) itself, and only one CUPTI client traces at a time. Kernels from that point on are missing here; remove the profiler from the program for kopt trace, or give its own trace to kopt analyze.",
                trace.lost_buffers
            ),
        );
    }
    if windows > 0 && caught_nothing {
        diagnosis.notes.insert(
            0,
            format!("The {windows} sampled window(s) caught no GPU activity: the program's GPU work fell between them. Use longer windows or a shorter period (--sample 50ms/200ms), or trace the whole run."),
        );
    } else if trace.incomplete_records > 0 {
        diagnosis.notes.push(format!(
            "{} activity records at the edges of the sampled windows were left out (launched while CUPTI attached, or flushed before the GPU stamped them).",
            trace.incomplete_records
        ));
    }
    if trace.dropped_records > 0 {
        diagnosis.notes.insert(
            0,
            format!(
                "CUPTI dropped {} activity records (buffers full): totals are lower bounds.",
                trace.dropped_records
            ),
        );
    }
    let run = RunInfo {
        module: None,
        argv: req.argv.clone(),
        run_dir: dir.display().to_string(),
        wall_s: started.elapsed().as_secs_f64(),
    };
    finish_run(diagnosis, run, "trace", &req.db, &req.report)
}
