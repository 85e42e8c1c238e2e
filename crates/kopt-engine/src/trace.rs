//! `kopt trace`: run any CUDA program under kopt's CUPTI tracer, keep the
//! trace in a run folder, diagnose the timeline.

use std::path::{Path, PathBuf};
use std::time::Instant;

use kopt_collect::trace::{locate_tracer, run_bare_steps, run_traced, Sampling};
use kopt_collect::{Stream, Workload};
use kopt_ingest::{profile_from_timeline, read_bare_steps, read_kopt_trace_set};
use kopt_model::run_folder::{BARE_STEPS_FILE, BEST_BARE_STEPS_FILE};
use kopt_model::{BareSteps, Diagnosis, RunInfo, Timeline};

use crate::diagnose::{diagnose, AnalysisOptions};
use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::record::finish_run;
use crate::workload::WorkloadOptions;

#[derive(Debug, Clone, PartialEq)]
pub struct TraceRequest {
    pub run: WorkloadOptions,
    /// Trace ON of every PERIOD and detach in between.
    pub sample: Option<Sampling>,
    /// Return the timeline too (for an export); it is cloned, so only on request.
    pub keep_timeline: bool,
    /// When the traced steps are NVTX or ProfilerStep ranges, run the
    /// workload again without CUPTI, timing only its step ranges, so every
    /// step figure starts from the untraced step.
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
    /// A distributed job's ranks (a launcher such as torchrun started
    /// several ranked processes): `diagnosis` is the first rank's.
    pub ranks: Option<kopt_model::RanksDiagnosis>,
    /// Every rank's timeline, by rank, when the request keeps timelines
    /// and the run was a distributed job (an export shows them all).
    pub rank_timelines: Vec<(u32, Timeline)>,
}

/// The job's ranks analysed, in a run folder of a distributed job.
pub const RANKS_JSON: &str = "ranks.json";

/// Said when the program's torch.profiler ran as kopt's stand-in.
pub(crate) const PROFILER_REPLACED: &str = "The program's torch.profiler.profile was replaced by kopt's stand-in (it records nothing and marks each step as a ProfilerStep#N NVTX range): kopt records the run itself, and the program's own profiler output was not written. KOPT_KEEP_TORCH_PROFILER=1 keeps the real one.";

/// The range family a bare run should time: the steps came from NVTX
/// ranges or `ProfilerStep#N` markers (torch.profiler's, kopt's stand-in
/// for it, or kopt's module driver), whatever the traced step looks like:
/// the recorder's cost can make a GPU-bound step look launch bound and the
/// other way round, so every host-time figure (launch bound, idle share,
/// graph gain, the step every finding's speed-up is figured on) takes the
/// untraced step. `kopt profile` and `kopt analyze -- CMD` ask too.
///
/// A program without ranges (steps from its sync calls, host pauses or the
/// kernel sequence's period) is timed by its synchronising calls instead
/// (`BARE_SYNC_RANGE`: the tracer records only their ends), where the
/// traced run made at least three: the analysis matches the two runs' calls.
/// With fewer sync calls, by its launch count: the tracer counts the launch
/// calls and times every step's worth of them (a launch range,
/// `kopt_model::bare_launch_range`).
pub(crate) fn bare_run_range(t: &Timeline) -> Option<String> {
    use kopt_model::StepSource;
    // A sampled trace's steps are the windows' (the time between is cut).
    if !t.sampled_windows.is_empty() {
        return None;
    }
    let is_kopt_trace = t.recorder == kopt_model::Recorder::KoptTracer;
    let t = kopt_analyze::timeline::summarize(t)?;
    let steps = t.steps?;
    let prediction = t.graph_prediction.as_ref()?;
    match steps.source {
        StepSource::Nvtx | StepSource::ProfilerStep => steps.family,
        // Only kopt's tracer runs bare this way (a torch.profiler trace's
        // program has its ProfilerStep markers).
        _ if is_kopt_trace && steps.family.is_none() && t.sync_calls >= 3 => {
            Some(kopt_model::BARE_SYNC_RANGE.to_string())
        }
        // Too few sync calls to time the steps by: one mark a step's
        // worth of launch calls.
        _ if is_kopt_trace && steps.family.is_none() && prediction.launches_per_step >= 1.0 => {
            Some(kopt_model::bare_launch_range(
                prediction.launches_per_step.round() as u64,
            ))
        }
        _ => None,
    }
}

/// What a bare run of `range` times, in words.
pub(crate) fn bare_timed_words(range: &str) -> String {
    if range == kopt_model::BARE_SYNC_RANGE {
        "synchronising calls (the program marks no steps; only those calls' ends are recorded)"
            .into()
    } else if let Some(every) = kopt_model::bare_launch_every(range) {
        format!(
            "steps by its launch calls (the program marks no steps and makes too few synchronising calls; the calls are counted and every {every}th, one a step, timed)"
        )
    } else {
        format!("'{range}' ranges")
    }
}

/// A bare run: the workload again with no recorder, only its step ranges
/// timed, for the graph-capture prediction's eager time.
pub(crate) struct BareRun {
    range: String,
    /// The steps were read into the timeline.
    read: bool,
    /// What the prediction does without them.
    fallback: String,
    notes: Vec<String>,
}

impl BareRun {
    /// Run it into `dir` and put the steps it timed into `timeline`; what
    /// went wrong becomes a note, never an error (the trace stands on its own).
    pub(crate) fn run(
        workload: &Workload,
        tracer: &Path,
        range: &str,
        dir: &Path,
        timeline: &mut Timeline,
        progress: &dyn Progress,
        on_line: &(dyn Fn(Stream, &str) + Sync),
    ) -> BareRun {
        let recorder = recorder_words(timeline);
        match bare_steps_in_process(dir, range) {
            Ok(Some(steps)) => {
                progress.note(&in_process_words(&steps, range));
                timeline.bare_steps = Some(steps);
                return BareRun {
                    range: range.to_string(),
                    read: true,
                    fallback: fallback_words(timeline),
                    notes: Vec::new(),
                };
            }
            Ok(None) => {}
            Err(e) => progress.note(&format!("{e}; timing them in a separate run")),
        }
        progress.note(&format!(
            "steps recorded: running the workload twice more without {recorder}, timing its {}, so the step every figure is based on is the untraced one (two more runs)",
            bare_timed_words(range)
        ));
        let fallback = fallback_words(timeline);
        let mut notes = Vec::new();
        match time_bare_steps(workload, tracer, range, dir, on_line) {
            Ok(timed) => {
                if timed.steps.is_none() {
                    notes.push(format!(
                        "The bare run (the workload again without {recorder}) timed no {}: {fallback}.",
                        bare_timed_words(range)
                    ));
                }
                notes.extend(timed.later_failure);
                timeline.bare_steps = timed.steps;
            }
            Err(e) => notes.push(format!(
                "The bare run (the workload again without {recorder}) failed: {e}; {fallback}."
            )),
        }
        BareRun {
            range: range.to_string(),
            read: timeline.bare_steps.is_some(),
            fallback,
            notes,
        }
    }

    /// No run, for the reason given.
    pub(crate) fn skipped(why: &str) -> BareRun {
        BareRun {
            range: String::new(),
            read: false,
            fallback: String::new(),
            notes: vec![why.to_string()],
        }
    }

    /// Its notes, and one more when its steps were too few to use.
    pub(crate) fn add_notes(mut self, diagnosis: &mut Diagnosis) {
        let used = diagnosis
            .timeline
            .as_ref()
            .and_then(|t| t.graph_prediction.as_ref())
            .is_some_and(|g| g.eager_measured_bare);
        if self.read && !used {
            self.notes.push(format!(
                "The bare run's {} gave too few steps to use (three periods after warm-up, matched to the traced run's, are needed): {}.",
                bare_timed_words(&self.range), self.fallback
            ));
        }
        diagnosis.notes.extend(self.notes);
    }
}

/// How many times a bare run runs the workload. Host noise only adds time,
/// and on a noisy host one run of a short program came out 1.7x slower
/// throughout than another run of it a minute later (H100, 2026-11-26,
/// fixtures/predictions-h100-profiler-2): the faster of two is kept.
pub(crate) const BARE_RUNS: usize = 2;

/// What `time_bare_steps` timed.
pub(crate) struct TimedSteps {
    /// The steps of the faster run (None: the first run timed no range).
    pub steps: Option<BareSteps>,
    /// Runs whose steps counted.
    pub runs: usize,
    /// A later run that failed, as a note.
    pub later_failure: Option<String>,
}

impl TimedSteps {
    pub(crate) fn runs_words(&self) -> String {
        match self.runs {
            1 => "one run".into(),
            n => format!("the faster of {n} runs"),
        }
    }
}

/// The workload a bare run runs: the same command without the module
/// driver's `ops` argument, since PyTorch's op ranges cost host time per op
/// with or without a recorder (`kopt trace` and `kopt analyze` of a
/// `--ops` command time the unrecorded steps, as `kopt profile` does).
pub(crate) fn bare_workload(workload: &Workload) -> Workload {
    Workload {
        argv: crate::module_script::without_op_ranges(&workload.argv),
        ..workload.clone()
    }
}

/// The workload run bare (`bare_workload`) `BARE_RUNS` times, the `range`
/// steps timed; the steps of the run with the shortest mean step are
/// returned and stay in `dir/bare_steps.jsonl` (the folder read back gives
/// the same steps), each run's log in `bare.log`, `bare-2.log`. An error of the first run is
/// returned (a partial file is removed); a later run's failure leaves the
/// earlier steps and says so.
pub(crate) fn time_bare_steps(
    workload: &Workload,
    tracer: &Path,
    range: &str,
    dir: &Path,
    on_line: &(dyn Fn(Stream, &str) + Sync),
) -> std::result::Result<TimedSteps, String> {
    let workload = &bare_workload(workload);
    let file = dir.join(BARE_STEPS_FILE);
    let kept = dir.join(BEST_BARE_STEPS_FILE);
    let mut best: Option<(f64, BareSteps)> = None;
    let mut runs = 0;
    let mut later_failure = None;
    for run in 1..=BARE_RUNS {
        let outcome = run_bare_steps(workload, tracer, range, dir, run, on_line)
            .map_err(|e| e.to_string())
            .and_then(|path| match path {
                Some(p) => {
                    read_bare_steps(&p).map_err(|e| format!("its steps could not be read ({e})"))
                }
                None => Ok(None),
            });
        match outcome {
            Ok(Some(steps)) => {
                runs += 1;
                let mean = steps.mean_period_ns().unwrap_or(f64::INFINITY);
                if best.as_ref().is_none_or(|(m, _)| mean < *m) {
                    best = Some((mean, steps));
                    std::fs::rename(&file, &kept)
                        .map_err(|e| format!("cannot keep {}: {e}", file.display()))?;
                }
            }
            Ok(None) if run == 1 => {
                return Ok(TimedSteps {
                    steps: None,
                    runs: 0,
                    later_failure,
                })
            }
            Err(e) if run == 1 => {
                // A partial file would mislead a later `kopt analyze` of the folder.
                let _ = std::fs::remove_file(&file);
                return Err(e);
            }
            Ok(None) => {
                later_failure = Some(format!(
                    "Bare run {run} of {BARE_RUNS} timed no {}: the steps are the earlier run's.",
                    bare_timed_words(range)
                ));
                break;
            }
            Err(e) => {
                later_failure = Some(format!(
                    "Bare run {run} of {BARE_RUNS} failed ({e}): the steps are the earlier run's."
                ));
                break;
            }
        }
    }
    if best.is_some() {
        std::fs::rename(&kept, &file)
            .map_err(|e| format!("cannot restore {}: {e}", kept.display()))?;
    }
    Ok(TimedSteps {
        steps: best.map(|(_, steps)| steps),
        runs,
        later_failure,
    })
}

/// `workload` with kopt's module driver told to time its steps bare in the
/// traced process once the trace ends (the tracer stops, CUPTI detaches),
/// into `dir`'s bare-steps file: the separate bare runs are then not
/// needed. None for any other command.
pub(crate) fn with_bare_steps_in_process(workload: &Workload, dir: &Path) -> Option<Workload> {
    kopt_collect::module_script::with_bare_steps_in_process(
        &workload.argv,
        &dir.join(BARE_STEPS_FILE),
    )
    .map(|argv| Workload {
        argv,
        ..workload.clone()
    })
}

/// The `range` steps the traced process timed bare itself (see
/// `with_bare_steps_in_process`), None when it timed none (the tracer could
/// not stop, or the driver was not run); a file of other steps, or one that
/// does not read, is removed (said in the error), so the bare run's own
/// file takes its place.
pub(crate) fn bare_steps_in_process(
    dir: &Path,
    range: &str,
) -> std::result::Result<Option<BareSteps>, String> {
    let file = dir.join(BARE_STEPS_FILE);
    if !file.exists() {
        return Ok(None);
    }
    match read_bare_steps(&file) {
        Ok(Some(steps)) if steps.in_process && steps.range == range => Ok(Some(steps)),
        outcome => {
            let _ = std::fs::remove_file(&file);
            match outcome {
                Err(e) => Err(format!(
                    "the steps timed in the traced process were not read ({e})"
                )),
                _ => Ok(None),
            }
        }
    }
}

/// What the graph-capture prediction does without bare steps, in words.
fn fallback_words(timeline: &Timeline) -> String {
    let recorder = recorder_words(timeline);
    match timeline.recorder.slowdown() {
        Some((factor, _)) => format!(
            "the graph-capture prediction takes {recorder}'s cost as its typical slowdown of the step (x{factor})"
        ),
        None => format!(
            "the graph-capture prediction takes {recorder}'s cost from its per-launch constant"
        ),
    }
}

/// The progress line for steps the traced process timed bare itself.
pub(crate) fn in_process_words(steps: &BareSteps, range: &str) -> String {
    format!(
        "steps recorded: {} '{range}' steps timed again in the traced process after the tracer detached, so the step every figure is based on is the untraced one (no second run)",
        steps.spans_ns.len()
    )
}

/// The recorder of a timeline, as a note names it.
fn recorder_words(t: &Timeline) -> &'static str {
    match t.recorder {
        kopt_model::Recorder::KoptTracer => "the tracer",
        r => r.as_str(),
    }
}

/// `--sample ON/PERIOD`, checked.
pub fn parse_sampling(text: &str) -> Result<Sampling> {
    Sampling::parse(text).map_err(Error::Usage)
}

pub fn trace(req: &TraceRequest, progress: &dyn Progress) -> Result<Traced> {
    req.validate()?;
    let tracer = locate_tracer(req.run.tracer.as_deref())?;
    let (_, run) = req.run.accept()?;
    let dir = run.folder();
    let started = Instant::now();
    let passthrough = !req.run.quiet;
    let on_line = |s: Stream, line: &str| progress.workload_line(s, line, passthrough);
    let launch = run.launch();
    // The module driver times its bare steps itself once the trace ends.
    let in_process = (req.bare_run && req.sample.is_none())
        .then(|| with_bare_steps_in_process(&launch, &dir))
        .flatten();
    let traced = run_traced(
        in_process.as_ref().unwrap_or(&launch),
        &tracer,
        req.sample,
        &dir,
        &on_line,
    )?;
    let mut trace = read_kopt_trace_set(&traced.trace)?;
    let first_rank = trace.timeline.rank.map_or(0, |r| r.rank);
    let label = traced.trace.display().to_string();
    let windows = trace.timeline.sampled_windows.len();
    let caught_nothing = trace.timeline.activities.is_empty();
    // Decided from the timeline alone, so the diagnosis is made once.
    let bare_range = (req.bare_run && req.sample.is_none())
        .then(|| bare_run_range(&trace.timeline))
        .flatten();
    let bare = bare_range.map(|range| {
        BareRun::run(
            &launch,
            &tracer,
            &range,
            &dir,
            &mut trace.timeline,
            progress,
            &on_line,
        )
    });
    // An export needs the timeline after the diagnosis; else it moves.
    let timeline = if req.keep_timeline {
        trace.timeline.clone()
    } else {
        std::mem::take(&mut trace.timeline)
    };
    let mut diagnosis = diagnose(
        profile_from_timeline(timeline, &label, &trace.source_format()),
        &req.analysis,
    );
    if let Some(bare) = bare {
        bare.add_notes(&mut diagnosis);
    }
    if kopt_collect::profiler_shim::replaced_mark(&dir).exists() {
        diagnosis.notes.push(PROFILER_REPLACED.into());
    }
    let timeline = req.keep_timeline.then_some(trace.timeline);
    if !trace.ended {
        diagnosis.notes.insert(0, "The trace did not end cleanly (the program exited without running its exit handlers, or was killed): the last activity records may be missing.".into());
    }
    let rank_files = kopt_ingest::ranks::kopt_trace_ranks(&dir)?;
    let rank_timelines = match (&rank_files, req.keep_timeline) {
        (Some(files), true) => files
            .iter()
            .map(|f| {
                let t = kopt_ingest::ranks::read_rank_trace(f)?;
                Ok((t.rank.map_or(0, |r| r.rank), t))
            })
            .collect::<Result<Vec<_>>>()?,
        _ => Vec::new(),
    };
    let ranks = match rank_files {
        Some(files) => {
            let r = crate::ranks::analyze_ranks(&files)?;
            // Kept with the run: the job's figures outlive the terminal.
            let json = serde_json::to_vec_pretty(&r).map_err(|e| Error::Output(e.to_string()))?;
            kopt_store::write_file(&dir.join(RANKS_JSON), &json)
                .map_err(|e| Error::Output(e.to_string()))?;
            Some(r)
        }
        None => None,
    };
    if let Some(r) = &ranks {
        diagnosis.notes.insert(
            0,
            format!(
                "{} ranks traced: this diagnosis is rank {}'s alone; the job's ranks (communication, overlap, stragglers) are analysed apart (`kopt analyze {}`).",
                r.ranks.len(),
                first_rank,
                dir.display()
            ),
        );
    } else if trace.processes > 1 {
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
    let info = RunInfo {
        module: None,
        argv: run.argv().to_vec(),
        run_dir: dir.display().to_string(),
        wall_s: started.elapsed().as_secs_f64(),
    };
    let diagnosis = finish_run(diagnosis, info, "trace", &run.db(), progress)?;
    Ok(Traced {
        diagnosis,
        timeline,
        trace: traced.trace,
        ranks,
        rank_timelines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(rel: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures")
            .join(rel)
    }

    #[test]
    fn a_bare_run_drops_the_module_drivers_op_ranges_only() {
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let driven = |last: &[&str]| {
            let mut a = argv(&[
                "python3",
                "/r/kopt_profile_driver.py",
                "m.py",
                "M",
                "3",
                "20",
            ]);
            a.extend(argv(last));
            Workload {
                argv: a,
                gpu: Some("1".into()),
                timeout: None,
            }
        };
        let bare = bare_workload(&driven(&["ops"]));
        assert_eq!(bare.argv, driven(&[]).argv);
        assert_eq!(bare.gpu.as_deref(), Some("1"));
        assert_eq!(bare_workload(&driven(&[])).argv, driven(&[]).argv);
        // A user's own program keeps every argument, `ops` included.
        let own = Workload {
            argv: argv(&["python3", "app.py", "a", "b", "c", "ops"]),
            gpu: None,
            timeout: None,
        };
        assert_eq!(bare_workload(&own).argv, own.argv);
    }

    #[test]
    fn a_bare_run_times_marked_steps_of_whole_traces_only() {
        let t = read_kopt_trace_set(&fixture("predictions-h200-bare/moe.trace.jsonl.gz"))
            .unwrap()
            .timeline;
        assert_eq!(bare_run_range(&t).as_deref(), Some("step"));
        let k = kopt_ingest::read_kineto(&fixture("predictions-h200-bare/moe.pt.trace.json.gz"))
            .unwrap()
            .timeline;
        assert_eq!(bare_run_range(&k).as_deref(), Some("ProfilerStep"));
        // Sampled: the steps are the windows', the time between cut.
        let mut sampled = t.clone();
        sampled.sampled_windows = vec![(0, 1)];
        assert_eq!(bare_run_range(&sampled), None);
        // GPU bound too: the untraced step is the base of every finding.
        let m =
            kopt_ingest::read_kineto(&fixture("predictions-h200-bare/matmuls.pt.trace.json.gz"))
                .unwrap()
                .timeline;
        assert_eq!(bare_run_range(&m).as_deref(), Some("ProfilerStep"));
    }

    #[test]
    fn a_program_without_ranges_is_timed_bare_by_its_sync_calls() {
        // A plain inference loop (no NVTX) that copies its result back
        // every step: its steps are marked by those syncs.
        let t = read_kopt_trace_set(&fixture(
            "advice-h100/resnet50_b1_fp32-plain/trace.jsonl.gz",
        ))
        .unwrap()
        .timeline;
        assert_eq!(
            bare_run_range(&t).as_deref(),
            Some(kopt_model::BARE_SYNC_RANGE)
        );
        assert!(bare_timed_words(kopt_model::BARE_SYNC_RANGE).contains("synchronising calls"));
        assert_eq!(bare_timed_words("step"), "'step' ranges");
    }

    #[test]
    fn a_program_without_ranges_or_syncs_is_timed_bare_by_its_launch_count() {
        // The same loop with its sync calls gone (a program that never
        // waits for the GPU): its steps are the kernel sequence's period,
        // timed bare by one mark a step's worth of launch calls.
        let mut t = read_kopt_trace_set(&fixture(
            "advice-h100/resnet50_b1_fp32-plain/trace.jsonl.gz",
        ))
        .unwrap()
        .timeline;
        t.api_calls
            .retain(|c| c.kind != kopt_model::ApiKind::Synchronize);
        let range = bare_run_range(&t).unwrap();
        let every = kopt_model::bare_launch_every(&range).unwrap();
        let s = kopt_analyze::timeline::summarize(&t).unwrap();
        let per_step = s.graph_prediction.unwrap().launches_per_step;
        assert_eq!(every, per_step.round() as u64, "{per_step}");
        assert!(bare_timed_words(&range).contains(&format!("every {every}th")));
    }
}
