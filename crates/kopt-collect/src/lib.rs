//! Running profiler tools for kopt: finding `ncu`, running workloads under it
//! in passes (process groups, timeouts, failures explained), exporting
//! `.ncu-rep` reports to the CSV pages kopt-ingest parses. No analysis here.

pub mod diagnose;
pub mod gpus;
pub mod module_script;
pub mod passes;
pub mod profiler_shim;
pub mod rocprof;
pub mod runner;
pub mod trace;

pub use diagnose::PassFailure;
pub use passes::{CapturedPass, Pass, PassError, Workload};
pub use rocprof::{CapturedRocPass, RocPass, Rocprof, RocprofError};
pub use runner::Stream;

use std::path::{Path, PathBuf};

/// kopt's targeted metric list (comments stripped), shared with the capture scripts.
pub const KOPT_METRICS_FILE: &str = include_str!("../ncu-metrics.txt");

pub fn kopt_metrics() -> Vec<&'static str> {
    KOPT_METRICS_FILE
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error("ncu (Nsight Compute) not found (looked in: {searched}); install Nsight Compute (it ships with the CUDA toolkit), pass --ncu PATH, or export the report where ncu exists: `ncu -i REPORT.ncu-rep --csv --page raw > report.csv`")]
    NcuNotFound { searched: String },
    #[error("{path}: --ncu points to no executable file")]
    NcuNotExecutable { path: String },
    #[error("{report}: `{command}` failed ({status}): {stderr}")]
    ExportFailed {
        report: String,
        command: String,
        status: String,
        stderr: String,
    },
    #[error("{report}: `{command}` {why}")]
    ExportBudget {
        report: String,
        command: String,
        why: String,
    },
    #[error("{report}: cannot run {ncu}: {source}")]
    Spawn {
        report: String,
        ncu: String,
        #[source]
        source: std::io::Error,
    },
}

/// Where CUDA installs put ncu when it is not on PATH.
const WELL_KNOWN: &[&str] = &["/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu"];

/// A located Nsight Compute command-line binary.
#[derive(Debug, Clone)]
pub struct Ncu {
    pub path: PathBuf,
}

/// Whether `path` is an Nsight Compute report (`.ncu-rep`, a regular
/// file) that ncu must export to CSV before it can be read. Anything else
/// is left to kopt-ingest, which also refuses what is not a regular file.
pub fn is_ncu_report(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "ncu-rep") && path.is_file()
}

/// A page of ncu's CSV export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CsvPage {
    Raw,
    Details,
}

fn is_executable(p: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    }
    #[cfg(not(unix))]
    {
        p.is_file()
    }
}

impl Ncu {
    /// `explicit` (from `--ncu`) wins; then `PATH`; then well-known install folders.
    pub fn locate(
        explicit: Option<&Path>,
        path_var: Option<&std::ffi::OsStr>,
    ) -> Result<Ncu, CollectError> {
        if let Some(p) = explicit {
            return if is_executable(p) {
                Ok(Ncu {
                    path: p.to_path_buf(),
                })
            } else {
                Err(CollectError::NcuNotExecutable {
                    path: p.display().to_string(),
                })
            };
        }
        let mut searched = Vec::new();
        if let Some(var) = path_var {
            for dir in std::env::split_paths(var) {
                let candidate = dir.join("ncu");
                if is_executable(&candidate) {
                    return Ok(Ncu { path: candidate });
                }
            }
            searched.push("PATH".to_string());
        }
        for known in WELL_KNOWN {
            let p = Path::new(known);
            if is_executable(p) {
                return Ok(Ncu {
                    path: p.to_path_buf(),
                });
            }
            searched.push(known.to_string());
        }
        Err(CollectError::NcuNotFound {
            searched: searched.join(", "),
        })
    }

    /// `ncu -i REPORT --csv --page raw --print-units base` (or `--page details`),
    /// within the export budgets ([`ExportLimits::from_env`]).
    pub fn export_csv(&self, report: &Path, page: CsvPage) -> Result<Vec<u8>, CollectError> {
        self.export_csv_within(report, page, ExportLimits::from_env())
    }

    /// [`Ncu::export_csv`] under the one runner: ncu's process group is
    /// stopped past `limits.seconds`, and its output is kept up to
    /// `limits.max_bytes` (a report is a file anyone can hand over).
    pub fn export_csv_within(
        &self,
        report: &Path,
        page: CsvPage,
        limits: ExportLimits,
    ) -> Result<Vec<u8>, CollectError> {
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "-i".as_ref(),
            report.as_os_str(),
            "--csv".as_ref(),
            "--page".as_ref(),
        ];
        match page {
            CsvPage::Raw => args.extend(["raw", "--print-units", "base"].map(std::ffi::OsStr::new)),
            CsvPage::Details => args.push("details".as_ref()),
        };
        let shown = format!(
            "{} -i {} --csv --page {}",
            self.path.display(),
            report.display(),
            if page == CsvPage::Raw {
                "raw --print-units base"
            } else {
                "details"
            }
        );
        let args: Vec<String> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let spec = runner::GroupSpec {
            program: &self.path,
            args: &args,
            env: &[],
            timeout: Some(std::time::Duration::from_secs(limits.seconds)),
            stop: runner::Stop::Kill,
            // A CSV row of thousands of metrics is a few hundred KiB; a
            // longer line is no export (and is said, below).
            max_line: usize::try_from(limits.max_bytes.min(EXPORT_MAX_LINE)).unwrap_or(usize::MAX),
            // Stopped as soon as it passes the cap, not when it ends.
            max_output: Some(limits.max_bytes),
        };
        let (mut stdout, mut stderr, mut over, mut no_memory) =
            (Vec::new(), Vec::new(), false, false);
        let mut keep = |buf: &mut Vec<u8>, line: &[u8]| {
            if over || no_memory {
                return;
            }
            if (buf.len() + line.len() + 1) as u64 > limits.max_bytes {
                over = true;
                return;
            }
            // Grown with a fallible reserve: past what the machine can hold,
            // an error, never an abort (doubling a 2 GiB buffer asks for 4).
            if buf.try_reserve(line.len() + 1).is_err() {
                no_memory = true;
                *buf = Vec::new();
                return;
            }
            buf.extend_from_slice(line);
            buf.push(b'\n');
        };
        let exit = runner::run_group(
            &spec,
            &mut |_, line| keep(&mut stdout, line),
            &mut |_, line| {
                // Its last lines are what an error quotes: 64 KiB is plenty.
                if stderr.len() < 64 << 10 {
                    stderr.extend_from_slice(line);
                    stderr.push(b'\n');
                }
            },
        )
        .map_err(|e| CollectError::Spawn {
            report: report.display().to_string(),
            ncu: self.path.display().to_string(),
            source: e.into(),
        })?;
        let budget = |why: String| CollectError::ExportBudget {
            report: report.display().to_string(),
            command: shown.clone(),
            why,
        };
        if no_memory {
            return Err(budget(format!(
                "printed more than this machine could hold in memory (under the {}-byte cap) and was stopped; lower KOPT_NCU_EXPORT_MAX_BYTES or export on a larger machine",
                limits.max_bytes
            )));
        }
        if exit.long_lines > 0 {
            return Err(budget(format!(
                "printed {} line(s) over {EXPORT_MAX_LINE} bytes: not a CSV page kopt reads",
                exit.long_lines
            )));
        }
        if over || exit.output_over {
            return Err(budget(format!(
                "printed more than {} bytes and was stopped; raise KOPT_NCU_EXPORT_MAX_BYTES to read it",
                limits.max_bytes
            )));
        }
        if exit.timed_out {
            return Err(budget(format!(
                "ran past {} s and was stopped; raise KOPT_NCU_EXPORT_SECONDS to give it longer",
                limits.seconds
            )));
        }
        let output = runner::Printed {
            stdout,
            stderr,
            status: exit.status,
        };
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let stdout = String::from_utf8_lossy(&output.stdout);
            let text = if stderr.trim().is_empty() {
                stdout
            } else {
                stderr
            };
            return Err(CollectError::ExportFailed {
                report: report.display().to_string(),
                command: shown,
                status: output.status.to_string(),
                stderr: last_line(&text),
            });
        }
        Ok(output.stdout)
    }
}

/// The last non-empty line: ncu puts its reason there.
/// Longest line of a `.ncu-rep` export kept.
const EXPORT_MAX_LINE: u64 = 64 << 20;

/// How long a `.ncu-rep` export may run and how much it may print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportLimits {
    pub seconds: u64,
    pub max_bytes: u64,
}

impl ExportLimits {
    /// 600 s and 4 GiB, or `KOPT_NCU_EXPORT_SECONDS` / `KOPT_NCU_EXPORT_MAX_BYTES`.
    pub fn from_env() -> ExportLimits {
        let var = |name: &str, default: u64| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .filter(|v| *v > 0)
                .unwrap_or(default)
        };
        ExportLimits {
            seconds: var("KOPT_NCU_EXPORT_SECONDS", 600),
            max_bytes: var("KOPT_NCU_EXPORT_MAX_BYTES", 4 << 30),
        }
    }
}

fn last_line(text: &str) -> String {
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("no output")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn fake_ncu(dir: &Path, body: &str) -> PathBuf {
        let p = dir.join("ncu");
        let mut f = std::fs::File::create(&p).unwrap();
        writeln!(f, "#!/bin/sh\n{body}").unwrap();
        drop(f);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        p
    }

    #[test]
    fn metric_list_has_the_rule_inputs() {
        let m = kopt_metrics();
        for needed in [
            "gpu__time_duration.sum",
            "sm__throughput.avg.pct_of_peak_sustained_elapsed",
            "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
            "launch__waves_per_multiprocessor",
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
        ] {
            assert!(m.contains(&needed), "{needed}");
        }
        assert!(m.iter().all(|x| !x.contains(' ')));
    }

    /// A `.ncu-rep` export that hangs or prints without end is stopped at
    /// its budget, with the variable that raises it (#39).
    #[test]
    fn an_export_is_bounded_in_time_and_output() {
        let dir = tempfile::tempdir().unwrap();
        let limits = ExportLimits {
            seconds: 1,
            max_bytes: 1 << 20,
        };
        let report = Path::new("/tmp/x.ncu-rep");
        let hang = Ncu::locate(Some(&fake_ncu(dir.path(), "exec sleep 60")), None).unwrap();
        let start = std::time::Instant::now();
        let err = hang
            .export_csv_within(report, CsvPage::Raw, limits)
            .unwrap_err()
            .to_string();
        assert!(err.contains("KOPT_NCU_EXPORT_SECONDS"), "{err}");
        assert!(start.elapsed().as_secs() < 10, "{:?}", start.elapsed());
        let flood = Ncu::locate(Some(&fake_ncu(dir.path(), "exec yes ID,name")), None).unwrap();
        let err = flood
            .export_csv_within(report, CsvPage::Raw, limits)
            .unwrap_err()
            .to_string();
        assert!(err.contains("KOPT_NCU_EXPORT_MAX_BYTES"), "{err}");
    }

    /// An export printing without end is stopped the moment it passes the
    /// output cap, long before its time budget (#39: it ran on to the
    /// timeout, its output growing in memory).
    #[test]
    fn an_export_past_its_output_cap_is_stopped_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let limits = ExportLimits {
            seconds: 60,
            max_bytes: 1 << 20,
        };
        let flood = Ncu::locate(Some(&fake_ncu(dir.path(), "exec yes ID,name")), None).unwrap();
        let start = std::time::Instant::now();
        let err = flood
            .export_csv_within(Path::new("/tmp/x.ncu-rep"), CsvPage::Raw, limits)
            .unwrap_err()
            .to_string();
        assert!(start.elapsed().as_secs() < 10, "{:?}", start.elapsed());
        assert!(
            err.contains("printed more than 1048576 bytes and was stopped"),
            "{err}"
        );
        assert!(err.contains("KOPT_NCU_EXPORT_MAX_BYTES"), "{err}");
        assert!(err.contains("--csv --page raw"), "the command: {err}");
    }

    /// A line longer than any CSV row is refused, not held whole: the
    /// line buffer was as large as the whole output cap (4 GiB).
    #[test]
    fn an_export_line_past_the_line_cap_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let limits = ExportLimits {
            seconds: 60,
            max_bytes: 256 << 20,
        };
        let long = format!("head -c {} /dev/zero | tr '\\0' a", EXPORT_MAX_LINE + 1024);
        let ncu = Ncu::locate(Some(&fake_ncu(dir.path(), &long)), None).unwrap();
        let err = ncu
            .export_csv_within(Path::new("/tmp/x.ncu-rep"), CsvPage::Raw, limits)
            .unwrap_err()
            .to_string();
        assert!(err.contains("1 line(s) over 67108864 bytes"), "{err}");
    }

    #[test]
    fn finds_ncu_on_path_and_passes_the_report() {
        let dir = tempfile::tempdir().unwrap();
        fake_ncu(dir.path(), "echo \"args: $*\"");
        let ncu = Ncu::locate(None, Some(dir.path().as_os_str())).unwrap();
        let out = ncu
            .export_csv(Path::new("/tmp/x.ncu-rep"), CsvPage::Raw)
            .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap().trim(),
            "args: -i /tmp/x.ncu-rep --csv --page raw --print-units base"
        );
    }

    #[test]
    fn missing_ncu_says_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let err = Ncu::locate(None, Some(dir.path().as_os_str())).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("ncu (Nsight Compute) not found"), "{msg}");
        assert!(msg.contains("--ncu PATH"), "{msg}");
        assert_eq!(msg.lines().count(), 1);
    }

    #[test]
    fn explicit_path_must_be_executable() {
        let dir = tempfile::tempdir().unwrap();
        let err = Ncu::locate(Some(&dir.path().join("nope")), None).unwrap_err();
        assert!(matches!(err, CollectError::NcuNotExecutable { .. }));
    }

    #[test]
    fn failing_export_reports_ncus_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = fake_ncu(
            dir.path(),
            "echo '==ERROR== noise' >&2; echo '==ERROR== Failed to open report' >&2; exit 1",
        );
        let ncu = Ncu::locate(Some(&p), None).unwrap();
        let err = ncu
            .export_csv(Path::new("bad.ncu-rep"), CsvPage::Details)
            .unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("bad.ncu-rep: "), "{msg}");
        assert!(msg.contains("Failed to open report"), "{msg}");
        assert_eq!(msg.lines().count(), 1);
    }
}
