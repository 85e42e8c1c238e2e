//! How a workload runs: its argv, GPU, timeout and where its run folder
//! goes. Shared by every workflow that runs one (`profile`, `trace`, the
//! bare run of `analyze TRACE -- CMD`, `optimize`).

use std::path::PathBuf;
use std::time::Duration;

use kopt_collect::Workload;
use kopt_model::run_folder::{BARE_STEPS_FILE, BEST_BARE_STEPS_FILE};

use crate::error::{Error, Result};
use crate::run_folder::create_run_dir;

/// How a workload runs (shared by profile, trace and analyze's bare run).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkloadOptions {
    /// argv as given: `argv[0]` is the program (no shell).
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
                let _ = std::fs::remove_file(dir.join(BARE_STEPS_FILE));
                let _ = std::fs::remove_file(dir.join(BEST_BARE_STEPS_FILE));
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

/// The longest time kopt accepts for a timeout or a time budget, in
/// seconds (about 31 years): beyond it `Duration::from_secs_f64` panics
/// (`1e19`, `1e300`), and no run is meant to last longer.
pub const MAX_SECONDS: f64 = 1e9;

/// A timeout in seconds from a front end, checked.
pub fn timeout_from_secs(t: Option<f64>) -> Result<Option<Duration>> {
    match t {
        Some(t) if !(t.is_finite() && t > 0.0) => Err(Error::Usage(format!(
            "--timeout must be a positive number of seconds, got {t}"
        ))),
        Some(t) if t > MAX_SECONDS => Err(Error::Usage(format!(
            "--timeout must be at most {MAX_SECONDS:e} seconds, got {t:e}"
        ))),
        Some(t) => Ok(Some(secs(t))),
        None => Ok(None),
    }
}

/// `s` seconds as a `Duration`: negative or NaN is zero, too large is
/// `Duration::MAX` (never the panic of `Duration::from_secs_f64`).
pub fn secs(s: f64) -> Duration {
    if s.is_nan() || s <= 0.0 {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(s).unwrap_or(Duration::MAX)
}

/// How one timed run of a command ended ([`time_once`]).
#[derive(Debug)]
pub enum TimedRun {
    /// It ran to its end: wall seconds, and its exit status when it failed.
    Finished {
        seconds: f64,
        failure: Option<String>,
    },
    /// It was still running at the limit; its group was stopped.
    OverLimit,
    /// The front end cancelled it (its group was stopped).
    Cancelled,
}

/// Run `argv` once (no shell unless argv names one) through kopt-collect's
/// runner, output read and dropped, stopped at `limit`: how a front end
/// times a workload before it pays for a measurement (MCP's estimate).
pub fn time_once(argv: &[String], limit: Duration) -> Result<TimedRun> {
    use kopt_collect::runner::{run_group, GroupError, GroupSpec, Stop};
    let Some((program, args)) = argv.split_first() else {
        return Err(Error::Usage("empty command".into()));
    };
    let exit = run_group(
        &GroupSpec {
            program: std::path::Path::new(program),
            args,
            env: &[],
            timeout: Some(limit),
            stop: Stop::Kill,
            max_line: 4096,
        },
        &mut |_, _| {},
        &mut |_, _| {},
    );
    match exit {
        Ok(e) if e.timed_out => Ok(TimedRun::OverLimit),
        Ok(e) => Ok(TimedRun::Finished {
            seconds: e.elapsed.as_secs_f64(),
            failure: (!e.status.success()).then(|| e.status.to_string()),
        }),
        Err(GroupError::Cancelled) => Ok(TimedRun::Cancelled),
        Err(e) => Err(Error::WorkloadFailed(format!("{program}: {e}"))),
    }
}
