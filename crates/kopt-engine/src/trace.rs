//! `kopt trace`: run any CUDA program under kopt's CUPTI tracer, keep the
//! trace in a run folder, diagnose the timeline.

use std::path::PathBuf;
use std::time::Instant;

use kopt_collect::trace::{locate_tracer, run_bare_steps, run_traced, Sampling};
use kopt_collect::Stream;
use kopt_ingest::{profile_from_timeline, read_bare_steps, read_kopt_trace_set};
use kopt_model::{Diagnosis, RunInfo, Timeline};

use crate::analyze::{diagnose, AnalysisOptions};
use crate::error::{Error, Result};
use crate::profile::{finish_run, WorkloadOptions};
use crate::progress::Progress;

#[derive(Debug, Clone, PartialEq)]
pub struct TraceRequest {
    pub run: WorkloadOptions,
    /// Trace ON of every PERIOD and detach in between.
    pub sample: Option<Sampling>,
    /// Return the timeline too (for an export); it is cloned, so only on request.
    pub keep_timeline: bool,
    /// When the traced steps look launch bound, run the workload a second
    /// time without CUPTI, timing only its step ranges, so the graph-capture
    /// prediction starts from the bare eager step.
    pub bare_run: bool,
    pub analysis: AnalysisOptions,
}

impl TraceRequest {
    pub fn validate(&self) -> Result<()> {
        self.run.validate()?;
        self.analysis.validate()
    }
}

/// A traced run: its diagnosis and the timeline itself (for exports).
pub struct Traced {
    pub diagnosis: Diagnosis,
    pub timeline: Option<Timeline>,
    /// The trace file in the run folder.
    pub trace: PathBuf,
}

/// The NVTX range family a bare run should time: the steps came from it
/// and the timeline predicts a graph-capture gain. `kopt profile` asks too.
pub(crate) fn bare_run_range(t: &Timeline) -> Option<String> {
    let t = kopt_analyze::timeline::summarize(t)?;
    let steps = t.steps?;
    (t.launch_bound && t.graph_prediction.is_some() && steps.source == kopt_model::StepSource::Nvtx)
        .then_some(steps.family)
        .flatten()
}

/// `--sample ON/PERIOD`, checked.
pub fn parse_sampling(text: &str) -> Result<Sampling> {
    Sampling::parse(text).map_err(Error::Usage)
}

pub fn trace(req: &TraceRequest, progress: &dyn Progress) -> Result<Traced> {
    req.validate()?;
    let tracer = locate_tracer(req.run.tracer.as_deref())?;
    let (_, dir) = req.run.create_run_dir()?;
    let bare_file = dir.join(kopt_ingest::BARE_STEPS_FILE);
    let started = Instant::now();
    let passthrough = !req.run.quiet;
    let on_line = |s: Stream, line: &str| progress.workload_line(s, line, passthrough);
    let traced = run_traced(&req.run.workload(), &tracer, req.sample, &dir, &on_line)?;
    let mut trace = read_kopt_trace_set(&traced.trace)?;
    let label = traced.trace.display().to_string();
    let windows = trace.timeline.sampled_windows.len();
    let caught_nothing = trace.timeline.activities.is_empty();
    // Decided from the timeline alone, so the diagnosis is made once.
    let bare_range = (req.bare_run && req.sample.is_none())
        .then(|| bare_run_range(&trace.timeline))
        .flatten();
    let mut bare_notes = Vec::new();
    if let Some(range) = &bare_range {
        progress.note(&format!(
            "launch bound: running the workload again without the tracer, timing its '{range}' ranges, for the graph-capture prediction (--no-bare-run skips this)"
        ));
        let fallback =
            "the graph-capture prediction takes the tracer's cost from its per-launch constant";
        match run_bare_steps(&req.run.workload(), &tracer, range, &dir, &on_line) {
            Ok(Some(path)) => match read_bare_steps(&path) {
                Ok(steps) => trace.timeline.bare_steps = steps,
                Err(e) => {
                    let _ = std::fs::remove_file(&path);
                    bare_notes.push(format!(
                        "The bare run's steps could not be read ({e}): {fallback}."
                    ));
                }
            },
            Ok(None) => bare_notes.push(format!(
                "The bare run (the workload again without the tracer) timed no '{range}' range: {fallback}."
            )),
            Err(e) => {
                // A partial file would mislead a later `kopt analyze` of the folder.
                let _ = std::fs::remove_file(&bare_file);
                bare_notes.push(format!(
                    "The bare run (the workload again without the tracer) failed: {e}; {fallback}."
                ));
            }
        }
    }
    let read_steps = trace.timeline.bare_steps.is_some();
    // An export needs the timeline after the diagnosis; else it moves.
    let timeline = if req.keep_timeline {
        trace.timeline.clone()
    } else {
        std::mem::take(&mut trace.timeline)
    };
    let mut diagnosis = diagnose(
        profile_from_timeline(timeline, &label, "kopt trace (CUPTI)"),
        &req.analysis,
    );
    let used = diagnosis
        .timeline
        .as_ref()
        .and_then(|t| t.graph_prediction.as_ref())
        .is_some_and(|g| g.eager_measured_bare);
    if read_steps && !used {
        bare_notes.push(format!(
            "The bare run timed too few '{}' steps to use (three periods after warm-up are needed): the graph-capture prediction takes the tracer's cost from its per-launch constant.",
            bare_range.as_deref().unwrap_or_default()
        ));
    }
    diagnosis.notes.extend(bare_notes);
    let timeline = req.keep_timeline.then_some(trace.timeline);
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
        argv: req.run.argv.clone(),
        run_dir: dir.display().to_string(),
        wall_s: started.elapsed().as_secs_f64(),
    };
    let diagnosis = finish_run(diagnosis, run, "trace", &req.run.db, progress)?;
    Ok(Traced {
        diagnosis,
        timeline,
        trace: traced.trace,
    })
}
