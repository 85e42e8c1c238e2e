//! `kopt profile`: run the workload in tiers (every launch timed by kopt's
//! tracer or ncu, kopt's metrics on the kernels that carry the time,
//! optionally `--set full` on the very top), keep every artifact in a run
//! folder, then diagnose.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kopt_analyze::top_kernel_functions;
use kopt_collect::{CapturedPass, Ncu, Pass, Stream, Workload};
use kopt_ingest::{merge_profile, read_ncu_csv};
use kopt_model::{Diagnosis, RunInfo};

use crate::analyze::{diagnose, AnalysisOptions};
use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::run_folder::{create_run_dir, read_run_folder, PassRecord, Profiler, RunRecord};

/// Share of kernel time the targeted pass covers (within `top`): the last
/// percent is spread over kernels too small to be worth a replay.
pub(crate) const TARGET_COVERAGE: f64 = 0.99;

/// What times every launch in pass 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum TimingPass {
    /// kopt's CUPTI tracer: the real timeline, gaps and launch cost too.
    #[default]
    Tracer,
    /// ncu's serialised replay: no timeline.
    Ncu,
}

/// Which profiler collects: NVIDIA's ncu (with kopt's CUPTI tracer) or
/// AMD's rocprofv3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Backend {
    /// rocprofv3 when it is on PATH and no NVIDIA GPU is (no nvidia-smi on
    /// PATH, no /dev/nvidia0); ncu otherwise.
    #[default]
    Auto,
    /// Nsight Compute (and kopt's tracer for pass 1).
    Ncu,
    /// rocprofv3 (ROCprofiler-SDK): kernel trace, then counter passes.
    Rocprof,
}

impl Backend {
    /// `Auto` resolved against a PATH.
    pub fn resolve(self, path_var: Option<&std::ffi::OsStr>) -> Backend {
        match self {
            Backend::Auto
                if kopt_collect::rocprof::rocprofv3_on_path(path_var)
                    && !kopt_collect::rocprof::nvidia_present(path_var) =>
            {
                Backend::Rocprof
            }
            Backend::Auto => Backend::Ncu,
            b => b,
        }
    }
}

/// How a workload runs (shared by profile and trace).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkloadOptions {
    /// argv as given: argv[0] is the program (no shell).
    pub argv: Vec<String>,
    /// `CUDA_VISIBLE_DEVICES` for the workload.
    pub gpu: Option<String>,
    /// Kill its whole process group after this long (per pass for profile).
    pub timeout: Option<Duration>,
    /// Keep the workload's output in the logs only.
    pub quiet: bool,
    /// kopt's tracer library (default: beside the kopt binary, or $KOPT_TRACER).
    pub tracer: Option<PathBuf>,
    /// Folder of run folders.
    pub runs_dir: PathBuf,
    /// History database.
    pub db: PathBuf,
    /// Use this folder as the run folder (it is created if missing) instead
    /// of a new one under `runs_dir`: a front end that writes the workload's
    /// script first (the Python package) names it.
    pub run_dir: Option<PathBuf>,
}

impl WorkloadOptions {
    pub fn validate(&self) -> Result<()> {
        if self.argv.first().is_none_or(|p| p.is_empty()) {
            return Err(Error::Usage(
                "nothing to run: give a command after `--` (kopt profile -- python3 bench.py) or --script FILE".into(),
            ));
        }
        if self.timeout.is_some_and(|t| t.is_zero()) {
            return Err(Error::Usage(
                "--timeout must be a positive number of seconds".into(),
            ));
        }
        Ok(())
    }

    /// The run folder: the one named, else a new one under `runs_dir`.
    pub(crate) fn create_run_dir(&self) -> Result<(String, PathBuf)> {
        match &self.run_dir {
            Some(dir) => {
                std::fs::create_dir_all(dir)
                    .map_err(|e| crate::error::io_error(dir, "create", e))?;
                // A named folder may hold an earlier run's bare steps.
                let _ = std::fs::remove_file(dir.join(kopt_ingest::BARE_STEPS_FILE));
                let _ = std::fs::remove_file(dir.join(crate::trace::BEST_BARE_STEPS_FILE));
                let id = dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                Ok((id, dir.clone()))
            }
            None => create_run_dir(&self.runs_dir),
        }
    }

    pub(crate) fn workload(&self) -> Workload {
        Workload {
            argv: self.argv.clone(),
            gpu: self.gpu.clone(),
            timeout: self.timeout,
        }
    }
}

/// A timeout in seconds from a front end, checked.
pub fn timeout_from_secs(t: Option<f64>) -> Result<Option<Duration>> {
    match t {
        Some(t) if !(t.is_finite() && t > 0.0) => Err(Error::Usage(format!(
            "--timeout must be a positive number of seconds, got {t}"
        ))),
        Some(t) => Ok(Some(Duration::from_secs_f64(t))),
        None => Ok(None),
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProfileRequest {
    pub run: WorkloadOptions,
    /// Name of the module under study; labels the run and the report.
    pub module: Option<String>,
    /// Only kernels whose name matches (Rust regex for the tracer; ncu's syntax otherwise).
    pub kernel_regex: Option<String>,
    /// Profile in depth at most this many distinct kernels (`--profile-top`;
    /// `analysis.top` is how many the report shows, as in `analyze`).
    pub profile_top: usize,
    /// Launches per launch configuration in the targeted pass.
    pub launches: u32,
    /// Add `--set full` for this many of the hottest kernels.
    pub deep_top: Option<usize>,
    pub ncu: Option<PathBuf>,
    pub timing_pass: TimingPass,
    /// ncu, rocprofv3, or picked from what is installed.
    pub backend: Backend,
    /// rocprofv3 binary (default: PATH, then /opt/rocm/bin).
    pub rocprof: Option<PathBuf>,
    /// After the tracer's pass, when its steps are NVTX ranges, run the
    /// workload again without CUPTI (twice, the faster kept), timing only
    /// the steps, so every step figure starts from the untraced step.
    pub bare_run: bool,
    pub analysis: AnalysisOptions,
}

impl ProfileRequest {
    /// A request with the CLI's defaults for `argv`.
    pub fn new(argv: Vec<String>) -> ProfileRequest {
        let paths = crate::record::RecordPaths::current();
        ProfileRequest {
            run: WorkloadOptions {
                argv,
                runs_dir: paths.runs_dir,
                db: paths.db,
                ..Default::default()
            },
            module: None,
            kernel_regex: None,
            profile_top: 20,
            launches: 1,
            deep_top: None,
            ncu: None,
            timing_pass: TimingPass::Tracer,
            backend: Backend::Auto,
            rocprof: None,
            bare_run: true,
            analysis: AnalysisOptions::default(),
        }
    }

    pub fn validate(&self) -> Result<()> {
        self.run.validate()?;
        if self.profile_top == 0 {
            return Err(Error::Usage("--profile-top must be at least 1".into()));
        }
        if self.launches == 0 {
            return Err(Error::Usage("--launches must be at least 1".into()));
        }
        if self.deep_top == Some(0) {
            return Err(Error::Usage("--deep-top must be at least 1".into()));
        }
        if self.kernel_regex.as_deref().is_some_and(str::is_empty) {
            return Err(Error::Usage("--kernel needs a regex".into()));
        }
        self.analysis.validate()
    }
}

/// The run folder and the record of a profiler run (not saved yet).
pub(crate) fn start_run(
    req: &ProfileRequest,
    profiler: Profiler,
    path: &Path,
    version: Option<String>,
) -> Result<(PathBuf, RunRecord)> {
    let (id, dir) = req.run.create_run_dir()?;
    let mut record = RunRecord::start(id, req.run.argv.clone(), profiler, path, version);
    record.module = req.module.clone();
    record.visible_devices = req.run.gpu.clone();
    Ok((dir, record))
}

/// Profile a workload; the diagnosis names the run (its folder, argv, wall time).
pub fn profile(req: &ProfileRequest, progress: &dyn Progress) -> Result<Diagnosis> {
    req.validate()?;
    if req.backend.resolve(std::env::var_os("PATH").as_deref()) == Backend::Rocprof {
        return crate::profile_rocprof::profile_rocprof(req, progress);
    }
    let ncu = Ncu::locate(req.ncu.as_deref(), std::env::var_os("PATH").as_deref())?;
    let started = Instant::now();
    let (dir, mut record) = start_run(req, Profiler::Ncu, &ncu.path, ncu.version())?;
    record.save(&dir)?;
    let total = if req.deep_top.is_some() { 3 } else { 2 };
    let mut passes = Passes {
        req,
        ncu: &ncu,
        dir: &dir,
        record: &mut record,
        progress,
        total,
    };
    let result = passes.run();
    conclude_profile(req, &dir, &mut record, started, result, progress)
}

/// A profile run's end, whichever profiler ran it: the record's status and
/// wall time saved, the run put in the history, or the failure returned.
pub(crate) fn conclude_profile(
    req: &ProfileRequest,
    dir: &Path,
    record: &mut RunRecord,
    started: Instant,
    result: Result<Diagnosis>,
    progress: &dyn Progress,
) -> Result<Diagnosis> {
    progress.finished();
    record.wall_s = Some(started.elapsed().as_secs_f64());
    match result {
        Ok(diagnosis) => {
            record.status = "ok".into();
            record.save(dir)?;
            let run = RunInfo {
                module: req.module.clone(),
                argv: req.run.argv.clone(),
                run_dir: dir.display().to_string(),
                wall_s: started.elapsed().as_secs_f64(),
            };
            finish_run(diagnosis, run, "profile", &req.run.db, progress)
        }
        Err(e) => {
            record.status = format!("failed: {e}");
            // The failure is what the user needs; a second error saving the record would hide it.
            let _ = record.save(dir);
            Err(e)
        }
    }
}

/// A run's last step (`profile`, `trace`): name the run in the diagnosis,
/// keep the JSON report in its folder, record it in the history.
pub(crate) fn finish_run(
    mut diagnosis: Diagnosis,
    run: RunInfo,
    kind: &str,
    db: &Path,
    progress: &dyn Progress,
) -> Result<Diagnosis> {
    let dir = PathBuf::from(&run.run_dir);
    let argv = run.argv.join(" ");
    diagnosis.run = Some(run);
    let json =
        serde_json::to_string_pretty(&diagnosis).map_err(|e| Error::Output(e.to_string()))?;
    let report = dir.join("report.json");
    std::fs::write(&report, &json).map_err(|e| crate::error::io_error(&report, "write", e))?;
    let summary = diagnosis.primary.as_ref().map_or_else(
        || format!("{} kernels", diagnosis.kernels.len()),
        |p| {
            format!(
                "primary {} / {} ({:.1}% of kernel time)",
                p.component_short, p.class, p.pct_of_total
            )
        },
    );
    let mut row = crate::record::run_row(kind, argv, summary);
    row.device = Some(diagnosis.device.name.clone());
    row.run_dir = Some(dir.display().to_string());
    row.report_json = Some(json);
    crate::record::record_run(db, &row, progress);
    Ok(diagnosis)
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
        let workload = req.run.workload();
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
                                self.bare_pass(&tracer, &workload, &range);
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
        let profile = read_run_folder(self.dir)?;
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
        self.record.save(self.dir)?;
        self.progress
            .pass_done(n, self.total, t.elapsed().as_secs_f64());
        Ok(captured)
    }

    /// The bare run after the tracer's pass: the workload without CUPTI
    /// (and without PyTorch's op ranges, which cost host time per op),
    /// timing the `range` steps into the run folder, where reading the
    /// folder back picks them up. A failure is a note: the prediction then
    /// takes the tracer's cost from its constant.
    fn bare_pass(&mut self, tracer: &Path, workload: &Workload, range: &str) {
        let progress = self.progress;
        progress.note(&format!(
            "steps recorded: running the workload twice more without the tracer, timing its '{range}' ranges, so the step every figure is based on is the untraced one (two more runs; --no-bare-run skips this)"
        ));
        let bare = Workload {
            argv: crate::module_script::without_op_ranges(&workload.argv),
            ..workload.clone()
        };
        let on_line = |s: Stream, l: &str| forward_ncu_line(progress, s, l, false);
        let t = Instant::now();
        match crate::trace::time_bare_steps(&bare, tracer, range, self.dir, &on_line) {
            Ok(timed) => {
                let file = self.dir.join(kopt_ingest::BARE_STEPS_FILE);
                self.record.passes.push(PassRecord {
                    name: "bare-steps".into(),
                    description: format!(
                        "the '{range}' steps timed without CUPTI ({})",
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
                if let Err(e) = self.record.save(self.dir) {
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
        let run = match kopt_collect::trace::run_traced(workload, tracer, None, self.dir, &on_line)
        {
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
            command: workload.argv.clone(),
            elapsed_s: t.elapsed().as_secs_f64(),
            exit_code: run.outcome.code,
            csv: run.trace.display().to_string(),
        });
        self.record.save(self.dir)?;
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

/// ncu's own chatter stays in the log; its errors are reported by kopt.
/// `--kernel` matched none of the traced kernels: the error names up to
/// eight that were seen, so the user can correct the pattern.
pub(crate) fn no_kernel_matches(re: &regex::Regex, launches: &[kopt_model::KernelLaunch]) -> Error {
    let mut names: Vec<String> = launches
        .iter()
        .map(|l| kopt_model::kernel_short_name(&l.name))
        .collect();
    names.sort();
    names.dedup();
    names.truncate(8);
    Error::Input(format!(
        "--kernel {}: no traced kernel matches (kernels seen: {})",
        re.as_str(),
        names.join(", ")
    ))
}

fn forward_ncu_line(progress: &dyn Progress, s: Stream, line: &str, passthrough: bool) {
    if line.starts_with("==PROF==") || line.starts_with("==ERROR==") {
        return;
    }
    progress.workload_line(s, line, passthrough);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_profile_requests() {
        let ok = ProfileRequest::new(vec!["python3".into(), "bench.py".into()]);
        assert!(ok.validate().is_ok());
        type Mutation = Box<dyn Fn(&mut ProfileRequest)>;
        let cases: Vec<(Mutation, &str)> = vec![
            (Box::new(|r| r.run.argv.clear()), "nothing to run"),
            (Box::new(|r| r.profile_top = 0), "--profile-top"),
            (Box::new(|r| r.launches = 0), "--launches"),
            (Box::new(|r| r.deep_top = Some(0)), "--deep-top"),
            (
                Box::new(|r| r.run.timeout = Some(Duration::ZERO)),
                "--timeout",
            ),
            (
                Box::new(|r| r.kernel_regex = Some(String::new())),
                "--kernel",
            ),
            (
                Box::new(|r| r.analysis.device = Some(String::new())),
                "--device",
            ),
        ];
        for (mutate, expected) in cases {
            let mut r = ok.clone();
            mutate(&mut r);
            let err = r.validate().unwrap_err();
            assert!(err.to_string().contains(expected), "{err} / {expected}");
        }
        assert!(timeout_from_secs(Some(-2.0)).is_err());
        assert_eq!(
            timeout_from_secs(Some(1.5)).unwrap(),
            Some(Duration::from_millis(1500))
        );
    }
}
