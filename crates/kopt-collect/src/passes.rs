//! kopt's tiered collection, the reason to use it instead of `ncu --set full`:
//!
//! 1. timing: every launch, one cheap metric (no replay), to find where the time goes;
//! 2. targeted: kopt's metric list, only for the kernels that carry the time,
//!    a bounded number of launches per launch configuration;
//! 3. deep (optional): `--set full` for the very top kernels, once each.
//!
//! Each pass writes `<name>.ncu-rep`, `<name>.csv` and `<name>.log` to the run folder.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kopt_model::run_folder::{DEEP_PASS, TARGETED_PASS, TIMING_PASS};

use crate::diagnose::{diagnose, PassFailure};
use crate::runner::{self, RunOutcome, RunSpec, Stream};
use crate::{kopt_metrics, CollectError, CsvPage, Ncu};

/// Metrics of the timing pass: the duration and launch attributes, which need
/// no counter replay.
pub const TIMING_METRICS: &[&str] = &[
    "gpu__time_duration.sum",
    "launch__grid_size",
    "launch__block_size",
    "launch__sm_count",
    "launch__registers_per_thread",
];

/// The program to profile.
#[derive(Debug, Clone)]
pub struct Workload {
    /// argv as given: `argv[0]` is the program.
    pub argv: Vec<String>,
    /// `CUDA_VISIBLE_DEVICES` for the workload.
    pub gpu: Option<String>,
    pub timeout: Option<Duration>,
}

/// One pass of the tiered collection.
#[derive(Debug, Clone)]
pub enum Pass {
    /// Every launch (optionally only kernels whose demangled name matches the regex).
    Timing { kernel_regex: Option<String> },
    /// kopt's metric list for the named kernel functions, `launches` per launch configuration.
    Targeted {
        functions: Vec<String>,
        launches: u32,
    },
    /// `--set full` for the named kernel functions, `launches` per launch configuration.
    Deep {
        functions: Vec<String>,
        launches: u32,
    },
}

impl Pass {
    pub fn file_stem(&self) -> &'static str {
        match self {
            Pass::Timing { .. } => TIMING_PASS,
            Pass::Targeted { .. } => TARGETED_PASS,
            Pass::Deep { .. } => DEEP_PASS,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Pass::Timing { .. } => "timing every launch".into(),
            Pass::Targeted { functions, launches } => format!(
                "kopt's {} metrics on the top {} kernel(s), {launches} launch(es) per configuration",
                kopt_metrics().len(),
                functions.len()
            ),
            Pass::Deep { functions, launches } => format!(
                "--set full on the top {} kernel(s), {launches} launch(es) per configuration",
                functions.len()
            ),
        }
    }

    /// ncu's options for this pass (before the application), without the output options.
    pub fn ncu_args(&self) -> Vec<String> {
        let mut a: Vec<String> = Vec::new();
        match self {
            Pass::Timing { kernel_regex } => {
                // Only durations here: no cache flush or clock locking between
                // launches (cheaper, and closer to the workload's own timing).
                a.extend([
                    "--cache-control".into(),
                    "none".into(),
                    "--clock-control".into(),
                    "none".into(),
                    "--metrics".into(),
                    TIMING_METRICS.join(","),
                ]);
                if let Some(r) = kernel_regex {
                    a.extend([
                        "--kernel-name-base".into(),
                        "demangled".into(),
                        "--kernel-name".into(),
                        format!("regex:{r}"),
                    ]);
                }
            }
            Pass::Targeted {
                functions,
                launches,
            }
            | Pass::Deep {
                functions,
                launches,
            } => {
                if let Pass::Deep { .. } = self {
                    a.extend(["--set".into(), "full".into()]);
                } else {
                    a.extend(["--metrics".into(), kopt_metrics().join(",")]);
                }
                a.extend([
                    "--kernel-name-base".into(),
                    "function".into(),
                    "--kernel-name".into(),
                    function_regex(functions),
                    "--filter-mode".into(),
                    "per-launch-config".into(),
                    "--launch-count".into(),
                    launches.to_string(),
                ]);
            }
        }
        a
    }
}

/// `regex:(^|:)(name1|name2)$`: matches the function with or without a namespace prefix.
pub fn function_regex(functions: &[String]) -> String {
    let alternatives: Vec<String> = functions.iter().map(|f| regex_escape(f)).collect();
    format!("regex:(^|:)({})$", alternatives.join("|"))
}

/// `s` with the regex metacharacters ncu's and rocprofv3's filters share escaped.
pub(crate) fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\^$.|?*+()[]{}".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// What a pass left in the run folder.
#[derive(Debug, Clone)]
pub struct CapturedPass {
    pub report: PathBuf,
    pub csv: PathBuf,
    pub log: PathBuf,
    pub outcome: RunOutcome,
    /// The full ncu command line, for run.json.
    pub command: Vec<String>,
}

/// A pass failed: which one, and why.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    #[error("{pass}: {failure} (full log: {log})")]
    Failed {
        pass: &'static str,
        failure: PassFailure,
        log: String,
    },
    #[error("{pass}: cannot start {program}: {source}")]
    Spawn {
        pass: &'static str,
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Export(#[from] CollectError),
    #[error("{path}: cannot write: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl Ncu {
    /// Run one pass of `workload` under ncu and export its CSV page into `dir`.
    pub fn capture(
        &self,
        pass: &Pass,
        workload: &Workload,
        dir: &Path,
        on_line: &(dyn Fn(Stream, &str) + Sync),
    ) -> Result<CapturedPass, PassError> {
        let stem = pass.file_stem();
        let report = dir.join(format!("{stem}.ncu-rep"));
        let csv = dir.join(format!("{stem}.csv"));
        let log = runner::log_path(dir, stem);
        // The raw page is printed straight into the CSV file (ncu's own lines
        // go there too, before the header): no report to save and export.
        // The deep pass keeps its .ncu-rep, worth opening in Nsight Compute.
        let mut args: Vec<String> = match pass {
            Pass::Deep { .. } => vec![
                "-f".into(),
                "-o".into(),
                dir.join(stem).display().to_string(),
            ],
            _ => vec![
                "--csv".into(),
                "--page".into(),
                "raw".into(),
                "--print-units".into(),
                "base".into(),
                "--log-file".into(),
                csv.display().to_string(),
            ],
        };
        args.extend(pass.ncu_args());
        args.extend(workload.argv.iter().cloned());
        let spec = RunSpec {
            program: self.path.clone(),
            args: args.clone(),
            env: workload
                .gpu
                .iter()
                .map(|g| ("CUDA_VISIBLE_DEVICES".to_string(), g.clone()))
                .collect(),
            timeout: workload.timeout,
            log: log.clone(),
        };
        let mut outcome = runner::run(&spec, on_line).map_err(|source| PassError::Spawn {
            pass: stem,
            program: self.path.display().to_string(),
            source,
        })?;
        // ncu's errors and warnings went to the CSV file with --log-file.
        if let Ok(text) = std::fs::read_to_string(&csv) {
            outcome.tail.extend(
                text.lines()
                    .filter(|l| l.starts_with("==ERROR==") || l.starts_with("==WARNING=="))
                    .map(str::to_string),
            );
        }
        diagnose(&outcome, workload.timeout.map(|t| t.as_secs())).map_err(|failure| {
            PassError::Failed {
                pass: stem,
                failure,
                log: log.display().to_string(),
            }
        })?;
        // Should this ncu print the table to the console despite --log-file,
        // it is in the pass log: take it from there.
        let has_table = |p: &Path| std::fs::read_to_string(p).is_ok_and(|t| t.contains("\"ID\","));
        if !matches!(pass, Pass::Deep { .. }) && !has_table(&csv) && has_table(&log) {
            std::fs::copy(&log, &csv).map_err(|source| PassError::Write {
                path: csv.display().to_string(),
                source,
            })?;
        }
        if let Pass::Deep { .. } = pass {
            let bytes = self.export_csv(&report, CsvPage::Details)?;
            std::fs::write(&csv, bytes).map_err(|source| PassError::Write {
                path: csv.display().to_string(),
                source,
            })?;
        }
        let mut command = vec![self.path.display().to_string()];
        command.extend(args);
        Ok(CapturedPass {
            report,
            csv,
            log,
            outcome,
            command,
        })
    }

    /// `ncu --version`'s last line, for the run record.
    pub fn version(&self) -> Option<String> {
        let (stdout, _) = crate::runner::version_output(&self.path)?;
        stdout
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_regex_escapes_and_anchors() {
        let r = function_regex(&["kopt_copy".into(), "operator()".into()]);
        assert_eq!(r, "regex:(^|:)(kopt_copy|operator\\(\\))$");
    }

    #[test]
    fn pass_arguments() {
        let t = Pass::Timing {
            kernel_regex: Some("gemm".into()),
        }
        .ncu_args();
        let m = t.iter().position(|a| a == "--metrics").unwrap();
        assert!(t[m + 1].starts_with("gpu__time_duration.sum"));
        assert!(t.windows(2).any(|w| w == ["--clock-control", "none"]));
        assert!(t.contains(&"regex:gemm".to_string()));
        let p = Pass::Targeted {
            functions: vec!["k".into()],
            launches: 2,
        }
        .ncu_args();
        assert!(p
            .windows(2)
            .any(|w| w == ["--filter-mode", "per-launch-config"]));
        assert!(p.windows(2).any(|w| w == ["--launch-count", "2"]));
        let d = Pass::Deep {
            functions: vec!["k".into()],
            launches: 1,
        }
        .ncu_args();
        assert!(d.windows(2).any(|w| w == ["--set", "full"]));
    }
}
