//! Turning ncu's output into one-line failures that say what to do.

use crate::runner::RunOutcome;

/// Why a profiling pass failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PassFailure {
    #[error("no permission to read GPU performance counters (ERR_NVGPUCTRPERM): run as root, or load the driver with `options nvidia NVreg_RestrictProfilingToAdminUsers=0` (then reboot or reload nvidia), see https://developer.nvidia.com/ERR_NVGPUCTRPERM")]
    CounterPermission,
    #[error("no usable GPU or driver: {0}")]
    NoGpu(String),
    #[error("the workload timed out after {0} s; kopt killed its process group")]
    Timeout(u64),
    #[error("the workload exited with code {code}; last lines of its output: {tail}")]
    WorkloadFailed { code: i32, tail: String },
    #[error("ncu profiled no kernel: the workload launched none that matched (check --kernel, or that it runs on the GPU)")]
    NoKernels,
    #[error("ncu failed: {0}")]
    Ncu(String),
    #[error("rocprofv3: {0}")]
    Rocprof(String),
    /// HSA_STATUS_ERROR_OUT_OF_RESOURCES: the GPU is there, but something the
    /// run asked for did not fit (counter hardware, or memory).
    #[error("the GPU ran out of resources (HSA_STATUS_ERROR_OUT_OF_RESOURCES): {why}; rocprofv3 said: {line}")]
    OutOfResources { why: &'static str, line: String },
}

/// Classify a finished ncu run. `Ok(())` when the pass produced a report.
pub fn diagnose(outcome: &RunOutcome, timeout_s: Option<u64>) -> Result<(), PassFailure> {
    let text = outcome.tail.join("\n");
    if outcome.timed_out {
        return Err(PassFailure::Timeout(timeout_s.unwrap_or(0)));
    }
    if text.contains("ERR_NVGPUCTRPERM") {
        return Err(PassFailure::CounterPermission);
    }
    for marker in [
        "no CUDA-capable device",
        "CUDA driver version is insufficient",
        "Failed to initialize CUDA",
        "cuInit failed",
        "NVIDIA driver on your system is too old",
        "Found no NVIDIA driver",
    ] {
        if let Some(line) = outcome.tail.iter().find(|l| l.contains(marker)) {
            return Err(PassFailure::NoGpu(line.trim().to_string()));
        }
    }
    // "==ERROR== The application returned an error code (3)."
    let app_code = outcome.tail.iter().find_map(|l| {
        let rest = l.split("The application returned an error code (").nth(1)?;
        rest.split(')').next()?.trim().parse::<i32>().ok()
    });
    if let Some(code) = app_code {
        return Err(PassFailure::WorkloadFailed {
            code,
            tail: workload_tail(&outcome.tail),
        });
    }
    if let Some(line) = outcome.tail.iter().find(|l| l.contains("==ERROR==")) {
        return Err(PassFailure::Ncu(
            line.replace("==ERROR==", "").trim().to_string(),
        ));
    }
    if text.contains("No kernels were profiled") {
        return Err(PassFailure::NoKernels);
    }
    match outcome.code {
        Some(0) => Ok(()),
        Some(code) => Err(PassFailure::WorkloadFailed {
            code,
            tail: workload_tail(&outcome.tail),
        }),
        None => Err(PassFailure::Ncu("ncu was killed by a signal".into())),
    }
}

/// The workload's own last lines: ncu's `==PROF==` chatter removed, joined with " | ".
fn workload_tail(tail: &[String]) -> String {
    let own: Vec<&str> = tail
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty() && !l.starts_with("==PROF==") && !l.starts_with("==ERROR=="))
        .collect();
    let last: Vec<&str> = own.iter().rev().take(5).rev().copied().collect();
    if last.is_empty() {
        "(no output)".into()
    } else {
        last.join(" | ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn outcome(code: Option<i32>, timed_out: bool, lines: &[&str]) -> RunOutcome {
        RunOutcome {
            code,
            signal: None,
            timed_out,
            elapsed: Duration::from_secs(1),
            tail: lines.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn permission() {
        let o = outcome(Some(1), false, &["==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters on the target device 0."]);
        let e = diagnose(&o, None).unwrap_err();
        assert_eq!(e, PassFailure::CounterPermission);
        assert!(e
            .to_string()
            .contains("NVreg_RestrictProfilingToAdminUsers=0"));
    }

    #[test]
    fn workload_exit_code_and_tail() {
        let o = outcome(
            Some(3),
            false,
            &[
                "==PROF== Connected to process 12",
                "Traceback (most recent call last):",
                "ValueError: bad size",
                "==PROF== Disconnected from process 12",
                "==ERROR== The application returned an error code (3).",
            ],
        );
        let e = diagnose(&o, None).unwrap_err();
        assert_eq!(
            e,
            PassFailure::WorkloadFailed {
                code: 3,
                tail: "Traceback (most recent call last): | ValueError: bad size".into()
            }
        );
    }

    #[test]
    fn timeout_no_gpu_no_kernels_and_ncu_errors() {
        assert_eq!(
            diagnose(&outcome(None, true, &[]), Some(5)).unwrap_err(),
            PassFailure::Timeout(5)
        );
        assert!(matches!(
            diagnose(
                &outcome(
                    Some(1),
                    false,
                    &["RuntimeError: Found no NVIDIA driver on your system."]
                ),
                None
            )
            .unwrap_err(),
            PassFailure::NoGpu(_)
        ));
        assert_eq!(
            diagnose(
                &outcome(Some(0), false, &["==WARNING== No kernels were profiled."]),
                None
            )
            .unwrap_err(),
            PassFailure::NoKernels
        );
        assert_eq!(
            diagnose(
                &outcome(
                    Some(1),
                    false,
                    &["==ERROR== Failed to find metric foo__bar"]
                ),
                None
            )
            .unwrap_err(),
            PassFailure::Ncu("Failed to find metric foo__bar".into())
        );
        assert!(diagnose(&outcome(Some(0), false, &["==PROF== Disconnected"]), None).is_ok());
    }
}
