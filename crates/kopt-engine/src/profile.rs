//! `kopt profile`: run the workload in tiers (every launch timed by kopt's
//! tracer or ncu, kopt's metrics on the kernels that carry the time,
//! optionally `--set full` on the very top), keep every artifact in a run
//! folder, then diagnose.

use std::path::Path;
use std::time::Instant;

use kopt_analyze::counter_plan::CounterPlan;
use kopt_analyze::top_kernel_functions;
use kopt_collect::{CapturedPass, Ncu, Pass, Stream, Workload};
use kopt_ingest::{merge_profile, read_ncu_csv, read_run_folder_filtered};
use kopt_model::run_folder::{PassRecord, Profiler, RunRecord, BARE_STEPS_FILE};
use kopt_model::Diagnosis;

use crate::diagnose::diagnose;
use crate::error::{Error, Result};
use crate::profile_run::{conclude_profile, no_kernel_matches, start_run, TARGET_COVERAGE};
use crate::progress::Progress;
use crate::run_folder::save_record;

// The request and its parts, where front ends have always found them.
pub use crate::profile_run::{Backend, ProfileRequest, TimingPass};
pub use crate::workload::{secs, timeout_from_secs, WorkloadOptions, MAX_SECONDS};

/// Profile a workload; the diagnosis names the run (its folder, argv, wall time).
pub fn profile(req: &ProfileRequest, progress: &dyn Progress) -> Result<Diagnosis> {
    req.validate()?;
    if req.backend.resolve(std::env::var_os("PATH").as_deref()) == Backend::Rocprof {
        return crate::profile_rocprof::profile_rocprof(req, progress);
    }
    let ncu = Ncu::locate(req.ncu.as_deref(), std::env::var_os("PATH").as_deref())?;
    let started = Instant::now();
    let (req, dir, mut record) = start_run(req, Profiler::Ncu, &ncu.path, ncu.version())?;
    let req = &req;
    save_record(&record, &dir)?;
    let total = if req.deep_top.is_some() { 3 } else { 2 };
    let mut passes = Passes {
        req,
        ncu: &ncu,
        dir: &dir,
        record: &mut record,
        progress,
        total,
    };
    let result = passes.run().map(|mut d| {
        if req.verify > 0 {
            crate::optimize::verify_recommendations(
                &mut d,
                req.run.argv(),
                &req.run,
                &dir,
                req.verify,
                progress,
            );
        }
        d
    });
    conclude_profile(req, &dir, &mut record, started, result, progress)
}

struct Passes<'a> {
    req: &'a ProfileRequest,
    ncu: &'a Ncu,
    dir: &'a Path,
    record: &'a mut RunRecord,
    progress: &'a dyn Progress,
    total: usize,
}

impl Passes<'_> {
    fn run(&mut self) -> Result<Diagnosis> {
        let req = self.req;
        let workload = req.run.launch();
        // Pass 1: where the time goes, from kopt's tracer (the real timeline:
        // gaps and launch cost too) or else ncu. The workload's own output is
        // shown here only. --kernel filters the tracer's kernels when Rust's
        // regex syntax takes it; otherwise ncu applies it in its own timing pass.
        let filter = req
            .kernel_regex
            .as_deref()
            .map(regex::Regex::new)
            .transpose();
        let traced = match (req.timing_pass, filter) {
            (TimingPass::Tracer, Ok(filter)) => {
                match kopt_collect::trace::locate_tracer(req.run.tracer.as_deref()) {
                    Ok(tracer) => self.tracer_pass(&tracer, &workload, filter.as_ref())?.map(
                        |(functions, bare_range)| {
                            if let Some(range) = bare_range {
                                if !self.bare_steps_in_process(&range) {
                                    self.bare_pass(&tracer, &workload, &range);
                                }
                            }
                            functions
                        },
                    ),
                    Err(e) => {
                        self.progress
                            .note(&format!("{e}; timing every launch with ncu instead"));
                        None
                    }
                }
            }
            _ => None,
        };
        let traced_functions = traced.is_some();
        let functions = match traced {
            Some(functions) => functions,
            None => {
                let timing = self.step(
                    1,
                    Pass::Timing {
                        kernel_regex: req.kernel_regex.clone(),
                    },
                    &workload,
                    !req.run.quiet,
                )?;
                let timing_file = read_ncu_csv(&timing.csv)?;
                let functions = top_kernel_functions(
                    &merge_profile(vec![(String::new(), timing_file)]),
                    req.profile_top,
                    TARGET_COVERAGE,
                );
                if functions.is_empty() {
                    return Err(Error::WorkloadFailed(format!(
                        "{}: the timing pass recorded no kernel time",
                        timing.csv.display()
                    )));
                }
                functions
            }
        };
        // The timeline alone may already decide the first finding: then
        // the counter pass (ncu's replay) cannot change it.
        let traced_only = traced_functions && !req.counters_forced && req.deep_top.is_none();
        let functions = if traced_only {
            let d = diagnose(read_run_folder_filtered(self.dir)?, &req.analysis);
            match kopt_analyze::counter_plan::counter_plan(&d) {
                CounterPlan::All => functions,
                CounterPlan::Kernels {
                    functions: only,
                    reason,
                } => {
                    self.progress.note(&format!(
                        "counter pass on {} kernel{} only: {reason} (--profile-top N collects counters on the N hottest)",
                        only.len(),
                        if only.len() == 1 { "" } else { "s" }
                    ));
                    self.record.counters = Some(format!("only {}: {reason}", only.join(", ")));
                    only
                }
                CounterPlan::Skip { reason } => {
                    self.progress.note(&format!(
                        "counter pass skipped: {reason} (--profile-top N collects counters on the N hottest)"
                    ));
                    self.record.counters = Some(format!("skipped: {reason}"));
                    save_record(self.record, self.dir)?;
                    return Ok(counters_skipped_note(d, &reason));
                }
            }
        } else {
            functions
        };
        // Pass 2: kopt's metrics on the kernels that carry the time.
        self.step(
            2,
            Pass::Targeted {
                functions: functions.clone(),
                launches: req.launches,
            },
            &workload,
            false,
        )?;
        // Pass 3: ncu's full sections for the very top, when asked.
        if let Some(n) = req.deep_top {
            let top: Vec<String> = functions.iter().take(n).cloned().collect();
            self.step(
                3,
                Pass::Deep {
                    functions: top,
                    launches: 1,
                },
                &workload,
                false,
            )?;
        }
        let profile = read_run_folder_filtered(self.dir)?;
        Ok(diagnose(profile, &req.analysis))
    }

    fn step(
        &mut self,
        n: usize,
        pass: Pass,
        workload: &Workload,
        passthrough: bool,
    ) -> Result<CapturedPass> {
        self.progress.pass_started(n, self.total, &pass.describe());
        let t = Instant::now();
        let progress = self.progress;
        let on_line = |s: Stream, l: &str| forward_ncu_line(progress, s, l, passthrough);
        let captured = self.ncu.capture(&pass, workload, self.dir, &on_line)?;
        self.record.passes.push(PassRecord {
            name: pass.file_stem().into(),
            description: pass.describe(),
            command: captured.command.clone(),
            elapsed_s: t.elapsed().as_secs_f64(),
            exit_code: captured.outcome.code,
            csv: captured.csv.display().to_string(),
        });
        save_record(self.record, self.dir)?;
        self.progress
            .pass_done(n, self.total, t.elapsed().as_secs_f64());
        Ok(captured)
    }

    /// Whether the traced run timed its `range` steps bare itself (kopt's
    /// module driver, after the tracer stopped and CUPTI detached: no second
    /// import and model build). Recorded as the bare pass when it did;
    /// otherwise a file it left is removed, and the bare run times them.
    fn bare_steps_in_process(&mut self, range: &str) -> bool {
        let steps = match crate::trace::bare_steps_in_process(self.dir, range) {
            Ok(Some(steps)) => steps,
            Ok(None) => return false,
            Err(e) => {
                self.progress
                    .note(&format!("{e}; timing them in a separate run"));
                return false;
            }
        };
        let file = self.dir.join(BARE_STEPS_FILE);
        self.progress
            .note(&crate::trace::in_process_words(&steps, range));
        self.record.passes.push(PassRecord {
            name: "bare-steps".into(),
            description: format!(
                "the '{range}' ranges timed without CUPTI in the traced process, after the tracer detached"
            ),
            command: Vec::new(),
            elapsed_s: 0.0,
            exit_code: Some(0),
            csv: file.display().to_string(),
        });
        if let Err(e) = save_record(self.record, self.dir) {
            self.progress.note(&format!("run record not updated: {e}"));
        }
        true
    }

    /// The bare run after the tracer's pass: the workload without CUPTI
    /// (and without PyTorch's op ranges, which cost host time per op),
    /// timing the `range` steps into the run folder, where reading the
    /// folder back picks them up. A failure is a note: the prediction then
    /// takes the tracer's cost from its constant.
    fn bare_pass(&mut self, tracer: &Path, workload: &Workload, range: &str) {
        let progress = self.progress;
        progress.note(&format!(
            "steps recorded: running the workload twice more without the tracer, timing its {}, so the step every figure is based on is the untraced one (two more runs; --no-bare-run skips this)",
            crate::trace::bare_timed_words(range)
        ));
        let bare = crate::trace::bare_workload(workload);
        let on_line = |s: Stream, l: &str| forward_ncu_line(progress, s, l, false);
        let t = Instant::now();
        match crate::trace::time_bare_steps(&bare, tracer, range, self.dir, &on_line) {
            Ok(timed) => {
                let file = self.dir.join(BARE_STEPS_FILE);
                self.record.passes.push(PassRecord {
                    name: "bare-steps".into(),
                    description: format!(
                        "the {} timed without CUPTI's records ({})",
                        crate::trace::bare_timed_words(range),
                        timed.runs_words()
                    ),
                    command: bare.argv.clone(),
                    elapsed_s: t.elapsed().as_secs_f64(),
                    exit_code: Some(0),
                    csv: if timed.steps.is_some() {
                        file.display().to_string()
                    } else {
                        String::new()
                    },
                });
                if let Some(why) = &timed.later_failure {
                    progress.note(why);
                }
                if let Err(e) = save_record(self.record, self.dir) {
                    progress.note(&format!("run record not updated: {e}"));
                }
            }
            Err(e) => {
                progress.note(&format!(
                    "the bare run failed ({e}); the graph-capture prediction takes the tracer's cost from its per-launch constant"
                ));
            }
        }
    }

    /// Pass 1 under kopt's tracer: the kernels covering the time and, when
    /// the steps are NVTX ranges, their range family for a bare run; None when the tracer recorded no kernel (no CUPTI, another
    /// CUPTI client), so ncu times them instead.
    fn tracer_pass(
        &mut self,
        tracer: &Path,
        workload: &Workload,
        kernel_filter: Option<&regex::Regex>,
    ) -> Result<Option<(Vec<String>, Option<String>)>> {
        let req = self.req;
        let passthrough = !req.run.quiet;
        let what = "timeline of every launch (kopt's CUPTI tracer)";
        self.progress.pass_started(1, self.total, what);
        let t = Instant::now();
        let progress = self.progress;
        let on_line = |s: Stream, l: &str| forward_ncu_line(progress, s, l, passthrough);
        // The module driver times its bare steps itself once the trace ends.
        let in_process = req
            .bare_run
            .then(|| crate::trace::with_bare_steps_in_process(workload, self.dir))
            .flatten();
        let traced = in_process.as_ref().unwrap_or(workload);
        let run = match kopt_collect::trace::run_traced(traced, tracer, None, self.dir, &on_line) {
            Ok(run) => run,
            Err(kopt_collect::trace::TraceError::NoTrace(..)) => {
                progress.note("the tracer wrote no trace; timing every launch with ncu instead");
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        };
        self.record.passes.push(PassRecord {
            name: "pass1-trace".into(),
            description: what.into(),
            command: traced.argv.clone(),
            elapsed_s: t.elapsed().as_secs_f64(),
            exit_code: run.outcome.code,
            csv: run.trace.display().to_string(),
        });
        save_record(self.record, self.dir)?;
        let trace = kopt_ingest::read_kopt_trace_set(&run.trace)?;
        let bare_range = req
            .bare_run
            .then(|| crate::trace::bare_run_range(&trace.timeline))
            .flatten();
        let label = run.trace.display().to_string();
        let (timing, _) = kopt_ingest::TimingPass::from_timeline(trace.timeline, &label);
        let mut profile = kopt_ingest::merge_tiered(timing, None, None, Vec::new());
        if let Some(re) = kernel_filter {
            if !profile.launches.is_empty()
                && !profile.launches.iter().any(|l| re.is_match(&l.name))
            {
                return Err(no_kernel_matches(re, &profile.launches));
            }
            profile.launches.retain(|l| re.is_match(&l.name));
        }
        let functions = top_kernel_functions(&profile, req.profile_top, TARGET_COVERAGE);
        if functions.is_empty() {
            progress.note("the tracer recorded no kernels; timing every launch with ncu instead");
            // The ncu pass's CSV takes precedence when the folder is read back.
            return Ok(None);
        }
        progress.pass_done(1, self.total, t.elapsed().as_secs_f64());
        Ok(Some((functions, bare_range)))
    }
}

/// The timeline's diagnosis with the reason the counter pass was skipped
/// in place of the generic "no counters were collected" note.
fn counters_skipped_note(mut d: Diagnosis, reason: &str) -> Diagnosis {
    d.notes.retain(|n| !n.starts_with("Timeline only:"));
    d.notes.push(format!(
        "Counter pass skipped: {reason}. Kernels without a timeline finding are classed unknown; --profile-top N collects counters on the N hottest."
    ));
    d
}

/// ncu's own chatter stays in the log; its errors are reported by kopt.
fn forward_ncu_line(progress: &dyn Progress, s: Stream, line: &str, passthrough: bool) {
    if line.starts_with("==PROF==") || line.starts_with("==ERROR==") {
        return;
    }
    progress.workload_line(s, line, passthrough);
}
