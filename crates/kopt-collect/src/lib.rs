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

    /// `ncu -i REPORT --csv --page raw --print-units base` (or `--page details`).
    pub fn export_csv(&self, report: &Path, page: CsvPage) -> Result<Vec<u8>, CollectError> {
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
        let output = runner::output(&self.path, &args).map_err(|source| CollectError::Spawn {
            report: report.display().to_string(),
            ncu: self.path.display().to_string(),
            source,
        })?;
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
