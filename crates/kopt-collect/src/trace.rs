//! Running a workload under kopt's CUPTI tracer (`CUDA_INJECTION64_PATH`).

use std::path::{Path, PathBuf};

use kopt_model::run_folder::{BARE_STEPS_FILE, TRACE_FILE};

use crate::passes::Workload;
use crate::runner::{self, RunOutcome, RunSpec, Stream};

/// Where CUDA installs libcupti; added to the workload's library path.
const CUPTI_DIRS: &[&str] = &[
    "/usr/local/cuda/lib64",
    "/usr/local/cuda/extras/CUPTI/lib64",
];

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("kopt's tracer library not found at {0}: it is built with kopt (`cargo build --release` puts libkopt_tracer.so next to the kopt binary); pass --tracer PATH")]
    NoTracer(String),
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the workload timed out after {0} s; kopt killed its process group")]
    Timeout(u64),
    #[error(
        "the workload exited with code {code}; last lines of its output: {tail} (full log: {log})"
    )]
    WorkloadFailed {
        code: i32,
        tail: String,
        log: String,
    },
    #[error("the workload was killed by signal {signal} ({name}); last lines of its output: {tail} (full log: {log}; the trace so far is kept beside it)")]
    Killed {
        signal: i32,
        name: &'static str,
        tail: String,
        log: String,
    },
    #[error("cannot write {path}: {source}")]
    Setup {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the tracer wrote no trace ({0} is missing): did the program use CUDA? (full log: {1})"
    )]
    NoTrace(String, String),
}

/// The tracer next to the running kopt binary, unless given.
pub fn locate_tracer(explicit: Option<&Path>) -> Result<PathBuf, TraceError> {
    let candidate = match explicit {
        Some(p) => p.to_path_buf(),
        None => match std::env::var_os("KOPT_TRACER") {
            Some(p) => PathBuf::from(p),
            None => std::env::current_exe()
                .ok()
                .and_then(|e| e.parent().map(|d| d.join("libkopt_tracer.so")))
                .unwrap_or_else(|| PathBuf::from("libkopt_tracer.so")),
        },
    };
    if candidate.is_file() {
        Ok(candidate)
    } else {
        Err(TraceError::NoTracer(candidate.display().to_string()))
    }
}

/// The first libcupti in the library path (`libcupti.so`, else a versioned one).
fn find_libcupti(lib_path: &[String]) -> Option<PathBuf> {
    lib_path
        .iter()
        .flat_map(|entry| entry.split(':'))
        .filter(|d| !d.is_empty())
        .find_map(|d| {
            let plain = Path::new(d).join("libcupti.so");
            if plain.is_file() {
                return Some(plain);
            }
            let mut versioned: Vec<PathBuf> = std::fs::read_dir(d)
                .ok()?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("libcupti.so."))
                })
                .collect();
            versioned.sort();
            versioned.into_iter().next()
        })
}

/// Sampled tracing: kopt's tracer records `on` of every `period` and
/// detaches from CUDA in between, where CUPTI's per-launch cost goes too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sampling {
    pub on: std::time::Duration,
    pub period: std::time::Duration,
}

impl Sampling {
    /// `ON/PERIOD`: `10ms/100ms`, `0.5s/5s`; a bare number is milliseconds.
    pub fn parse(text: &str) -> Result<Sampling, String> {
        let bad = |why: &str| format!("--sample {text}: {why} (e.g. --sample 10ms/100ms)");
        let (on, period) = text
            .split_once('/')
            .ok_or_else(|| bad("expected ON/PERIOD"))?;
        let ms = |part: &str| -> Result<u64, String> {
            let part = part.trim();
            let (number, scale) = if let Some(n) = part.strip_suffix("ms") {
                (n, 1.0)
            } else if let Some(n) = part.strip_suffix('s') {
                (n, 1000.0)
            } else {
                (part, 1.0)
            };
            let v: f64 = number
                .trim()
                .parse()
                .map_err(|_| bad(&format!("'{part}' is not a duration")))?;
            let v = v * scale;
            if !(v.is_finite() && v >= 1.0) {
                return Err(bad(&format!("'{part}' is under 1 ms")));
            }
            Ok(v.round() as u64)
        };
        let (on, period) = (ms(on)?, ms(period)?);
        if on >= period {
            return Err(bad("the window must be shorter than the period"));
        }
        Ok(Sampling {
            on: std::time::Duration::from_millis(on),
            period: std::time::Duration::from_millis(period),
        })
    }

    /// `KOPT_TRACER_SAMPLE`'s value: milliseconds, `ON/PERIOD`.
    pub fn env_value(&self) -> String {
        format!("{}/{}", self.on.as_millis(), self.period.as_millis())
    }
}

/// What a traced run left behind.
#[derive(Debug)]
pub struct TracedRun {
    pub trace: PathBuf,
    pub log: PathBuf,
    pub outcome: RunOutcome,
}

/// CUPTI's usual folders that exist, then the caller's `LD_LIBRARY_PATH`.
fn cupti_library_path() -> Vec<String> {
    let mut lib_path: Vec<String> = CUPTI_DIRS
        .iter()
        .filter(|d| Path::new(d).is_dir())
        .map(|d| d.to_string())
        .collect();
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
        lib_path.push(old.to_string_lossy().into_owned());
    }
    lib_path
}

pub fn run_traced(
    workload: &Workload,
    tracer: &Path,
    sampling: Option<Sampling>,
    dir: &Path,
    on_line: &(dyn Fn(Stream, &str) + Sync),
) -> Result<TracedRun, TraceError> {
    let trace = dir.join(TRACE_FILE);
    let log = runner::log_path(dir, "trace");
    let lib_path = cupti_library_path();
    let mut env = vec![
        (
            "CUDA_INJECTION64_PATH".to_string(),
            tracer.display().to_string(),
        ),
        ("KOPT_TRACE_OUT".to_string(), trace.display().to_string()),
        // The id of this run in every process's trace: the reader merges
        // only this run's `trace.jsonl.<pid>` files.
        ("KOPT_TRACE_RUN".to_string(), run_id()),
        ("LD_LIBRARY_PATH".to_string(), lib_path.join(":")),
    ];
    // NVTX ranges reach CUPTI only when NVTX loads libcupti as its injection.
    if std::env::var_os("NVTX_INJECTION64_PATH").is_none() {
        if let Some(cupti) = find_libcupti(&lib_path) {
            env.push(("NVTX_INJECTION64_PATH".into(), cupti.display().to_string()));
        }
    }
    if let Some(g) = &workload.gpu {
        env.push(("CUDA_VISIBLE_DEVICES".into(), g.clone()));
    }
    if let Some(s) = sampling {
        env.push(("KOPT_TRACER_SAMPLE".into(), s.env_value()));
    }
    env.extend(python_shim(dir)?);
    let outcome = run_checked(workload, env, &log, on_line)?;
    if !trace.is_file() {
        return Err(TraceError::NoTrace(
            trace.display().to_string(),
            log.display().to_string(),
        ));
    }
    Ok(TracedRun {
        trace,
        log,
        outcome,
    })
}

/// Run the workload with `env` added, logging to `log`; a timeout, a
/// non-zero exit or a fatal signal is an error that quotes its last lines.
fn run_checked(
    workload: &Workload,
    env: Vec<(String, String)>,
    log: &Path,
    on_line: &(dyn Fn(Stream, &str) + Sync),
) -> Result<RunOutcome, TraceError> {
    let (program, args) = workload
        .argv
        .split_first()
        .expect("validated: argv is not empty");
    let spec = RunSpec {
        program: PathBuf::from(program),
        args: args.to_vec(),
        env,
        timeout: workload.timeout,
        log: log.to_path_buf(),
    };
    let outcome = runner::run(&spec, on_line).map_err(|source| TraceError::Spawn {
        program: program.clone(),
        source,
    })?;
    if outcome.timed_out {
        return Err(TraceError::Timeout(
            workload.timeout.map_or(0, |t| t.as_secs()),
        ));
    }
    let tail = || {
        let tail: Vec<&str> = outcome
            .tail
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty())
            .collect();
        match tail[tail.len().saturating_sub(5)..].join(" | ") {
            t if t.is_empty() => "(no output)".to_string(),
            t => t,
        }
    };
    if let Some(code) = outcome.code.filter(|c| *c != 0) {
        return Err(TraceError::WorkloadFailed {
            code,
            tail: tail(),
            log: log.display().to_string(),
        });
    }
    if let Some(signal) = outcome.signal {
        return Err(TraceError::Killed {
            signal,
            name: signal_name(signal),
            tail: tail(),
            log: log.display().to_string(),
        });
    }
    Ok(outcome)
}

/// Run the workload again without CUPTI's activity records: kopt's tracer
/// is loaded as NVTX's injection only and times the ranges of the `range`
/// family (the traced run's steps) into `dir/bare_steps.jsonl`, logging to
/// `bare.log` (run 1) or `bare-N.log`. With `range` =
/// `BARE_SYNC_RANGE` (a program without step ranges) it is loaded as
/// CUDA's injection instead and records only the ends of the host's
/// synchronising calls (CUPTI's callbacks for those calls alone); with a
/// launch range (`kopt_model::bare_launch_range(N)`, a program with too few
/// sync calls), it also counts the launch calls and times every N-th. None when
/// the program timed no such range or call (it made none, or its NVTX did
/// not load the tool).
pub fn run_bare_steps(
    workload: &Workload,
    tracer: &Path,
    range: &str,
    dir: &Path,
    run: usize,
    on_line: &(dyn Fn(Stream, &str) + Sync),
) -> Result<Option<PathBuf>, TraceError> {
    let out = dir.join(BARE_STEPS_FILE);
    let log = match run {
        0 | 1 => runner::log_path(dir, "bare"),
        n => runner::log_path(dir, &format!("bare-{n}")),
    };
    let launch_every = kopt_model::bare_launch_every(range);
    let mut env = if range == kopt_model::BARE_SYNC_RANGE || launch_every.is_some() {
        let mut env = vec![
            (
                "CUDA_INJECTION64_PATH".to_string(),
                tracer.display().to_string(),
            ),
            ("KOPT_BARE_SYNCS_OUT".to_string(), out.display().to_string()),
            // libcupti is found where the traced run finds it.
            (
                "LD_LIBRARY_PATH".to_string(),
                cupti_library_path().join(":"),
            ),
        ];
        // A launch-count run: every N-th launch call marked too.
        if let Some(n) = launch_every {
            env.push(("KOPT_BARE_LAUNCH_EVERY".to_string(), n.to_string()));
        }
        env
    } else {
        vec![
            (
                "NVTX_INJECTION64_PATH".to_string(),
                tracer.display().to_string(),
            ),
            ("KOPT_BARE_STEPS_OUT".to_string(), out.display().to_string()),
            ("KOPT_BARE_STEPS_RANGE".to_string(), range.to_string()),
        ]
    };
    if let Some(g) = &workload.gpu {
        env.push(("CUDA_VISIBLE_DEVICES".into(), g.clone()));
    }
    env.extend(python_shim(dir)?);
    run_checked(workload, env, &log, on_line)?;
    Ok(std::fs::metadata(&out)
        .is_ok_and(|m| m.len() > 0)
        .then_some(out))
}

/// The torch.profiler stand-in for the workload's Python, written into `dir`.
/// An id for one traced run: this process, the time and a counter, so two
/// runs writing into one folder never share it.
fn run_id() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}-{nanos:x}-{n}", std::process::id())
}

fn python_shim(dir: &Path) -> Result<Vec<(String, String)>, TraceError> {
    crate::profiler_shim::shim_env(dir).map_err(|source| TraceError::Setup {
        path: crate::profiler_shim::shim_file(dir).display().to_string(),
        source,
    })
}

/// The usual name of a fatal signal.
fn signal_name(signal: i32) -> &'static str {
    match signal {
        4 => "SIGILL",
        6 => "SIGABRT: an abort, e.g. heap corruption detected by malloc",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL: out of memory, or killed from outside",
        11 => "SIGSEGV: a crash",
        15 => "SIGTERM",
        _ => "a signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_reads_on_and_period() {
        let s = Sampling::parse("10ms/100ms").unwrap();
        assert_eq!(s.env_value(), "10/100");
        assert_eq!(Sampling::parse("0.5s/5s").unwrap().env_value(), "500/5000");
        assert_eq!(Sampling::parse("20/200").unwrap().env_value(), "20/200");
        for bad in [
            "10ms",
            "100ms/10ms",
            "10ms/10ms",
            "0.2ms/10ms",
            "x/100ms",
            "10ms/-1s",
        ] {
            let e = Sampling::parse(bad).unwrap_err();
            assert!(e.starts_with(&format!("--sample {bad}:")), "{e}");
        }
    }

    #[test]
    fn libcupti_is_found_in_the_library_path() {
        let dir = tempfile::tempdir().unwrap();
        let empty = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("libcupti.so.13"), b"").unwrap();
        let path = vec![format!(
            "{}:{}",
            empty.path().display(),
            dir.path().display()
        )];
        assert_eq!(
            find_libcupti(&path),
            Some(dir.path().join("libcupti.so.13"))
        );
        std::fs::write(dir.path().join("libcupti.so"), b"").unwrap();
        assert_eq!(find_libcupti(&path), Some(dir.path().join("libcupti.so")));
        assert_eq!(find_libcupti(&[empty.path().display().to_string()]), None);
    }
}
