//! A profile run, whichever profiler runs it (ncu with kopt's tracer in
//! `profile.rs`, rocprofv3 in `profile_rocprof.rs`): the request, the run
//! folder and record at its start, and its end. Both profilers build on
//! this module, so neither reaches back into the other.

use std::path::{Path, PathBuf};
use std::time::Instant;

use kopt_model::run_folder::{Profiler, RunRecord};
use kopt_model::{Diagnosis, RunInfo};

use crate::diagnose::AnalysisOptions;
use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::record::finish_run;
use crate::run_folder::{save_record, start_record};
use crate::workload::WorkloadOptions;

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
    /// Collect counters on the `profile_top` kernels whatever the timeline
    /// says (`--profile-top`, `--deep`). Otherwise the counter pass covers
    /// only kernels whose counters could change the first finding, and is
    /// skipped when none could (`kopt_analyze::counter_plan`).
    pub counters_forced: bool,
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
    /// Measure this many of the top recommendations that have an automatic
    /// fix (a module script only; 0: none).
    pub verify: usize,
}

impl ProfileRequest {
    /// A request with the CLI's defaults for `argv`.
    pub fn new(argv: Vec<String>) -> ProfileRequest {
        ProfileRequest {
            run: WorkloadOptions::command(argv),
            module: None,
            kernel_regex: None,
            profile_top: 20,
            counters_forced: false,
            launches: 1,
            deep_top: None,
            ncu: None,
            timing_pass: TimingPass::Tracer,
            backend: Backend::Auto,
            rocprof: None,
            bare_run: true,
            analysis: AnalysisOptions::default(),
            verify: 0,
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
        if self.verify > 0 && !self.run.workload.is_driven() {
            return Err(Error::Usage(
                "--verify measures fixes on a module script: give --script FILE (a Model class and get_inputs())".into(),
            ));
        }
        self.analysis.validate()
    }
}

/// The request accepted (`WorkloadOptions::accept`: its run folder made,
/// a script written there), with that folder and the record of the
/// profiler run (not saved yet).
pub(crate) fn start_run(
    req: &ProfileRequest,
    profiler: Profiler,
    path: &Path,
    version: Option<String>,
) -> Result<(ProfileRequest, PathBuf, RunRecord)> {
    let (id, run) = req.run.accept()?;
    let dir = run.folder();
    let mut record = start_record(id, run.argv().to_vec(), profiler, path, version);
    record.module = req.module.clone();
    record.visible_devices = req.run.gpu.clone();
    let accepted = ProfileRequest { run, ..req.clone() };
    Ok((accepted, dir, record))
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
            save_record(record, dir)?;
            let run = RunInfo {
                module: req.module.clone(),
                argv: req.run.argv().to_vec(),
                run_dir: dir.display().to_string(),
                wall_s: started.elapsed().as_secs_f64(),
            };
            finish_run(diagnosis, run, "profile", &req.run.db(), progress)
        }
        Err(e) => {
            record.status = format!("failed: {e}");
            // The failure is what the user needs; a second error saving the record would hide it.
            let _ = save_record(record, dir);
            Err(e)
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{timeout_from_secs, Workload};
    use std::time::Duration;

    #[test]
    fn rejects_bad_profile_requests() {
        let ok = ProfileRequest::new(vec!["python3".into(), "bench.py".into()]);
        assert!(ok.validate().is_ok());
        type Mutation = Box<dyn Fn(&mut ProfileRequest)>;
        let cases: Vec<(Mutation, &str)> = vec![
            (
                Box::new(|r| r.run.workload = Workload::Command(Vec::new())),
                "nothing to run",
            ),
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
