//! A run folder's layout (`.kopt/runs/<id>/`): the names of the files kopt
//! writes there and reads back, and `run.json`'s record. One place, so the
//! collector that writes a file, the reader that reads it and the engine
//! that names it agree. Plain data: reading `run.json` is kopt-ingest's,
//! writing it the engine's.

use serde::{Deserialize, Serialize};

pub use crate::SCHEMA;

/// What a `kopt profile` run did, rewritten after every pass.
pub const RUN_JSON: &str = "run.json";
/// The diagnosis of a finished run, as `kopt/1` JSON.
pub const REPORT_JSON: &str = "report.json";
/// kopt's tracer's trace (pass 1 of `kopt profile`, `kopt trace`); other
/// processes of the workload write `trace.jsonl.<pid>` beside it.
pub const TRACE_FILE: &str = "trace.jsonl";
/// ncu's passes by file stem (kopt-collect names each pass's CSV, report
/// and log after it), then their CSVs. The timing pass runs when the
/// tracer could not time the launches; the targeted pass puts kopt's
/// metrics on the kernels that carry the time; the deep pass is `--set
/// full` on the very top kernels.
pub const TIMING_PASS: &str = "pass1-timing";
pub const TARGETED_PASS: &str = "pass2-targeted";
pub const DEEP_PASS: &str = "pass3-deep";
pub const TIMING_CSV: &str = "pass1-timing.csv";
pub const TARGETED_CSV: &str = "pass2-targeted.csv";
pub const DEEP_CSV: &str = "pass3-deep.csv";
/// The bare run's step ranges, beside the trace.
pub const BARE_STEPS_FILE: &str = "bare_steps.jsonl";
/// Where the best bare run's steps wait while the next run writes its own.
pub const BEST_BARE_STEPS_FILE: &str = "bare_steps.best.jsonl";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PassRecord {
    pub name: String,
    pub description: String,
    pub command: Vec<String>,
    pub elapsed_s: f64,
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// The file(s) the pass wrote, comma-separated when several.
    pub csv: String,
}

/// The profiler that ran a run's passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Profiler {
    /// NVIDIA Nsight Compute (pass 1 may be kopt's CUPTI tracer).
    #[default]
    Ncu,
    /// AMD rocprofv3 (ROCprofiler-SDK).
    Rocprofv3,
}

impl Profiler {
    pub fn name(self) -> &'static str {
        match self {
            Profiler::Ncu => "ncu",
            Profiler::Rocprofv3 => "rocprofv3",
        }
    }
}

/// `run.json`. Run folders written before kopt named the profiler hold
/// `ncu` / `ncu_version` / `cuda_visible_devices` instead of
/// `profiler_path` / `profiler_version` / `visible_devices`, and no
/// `profiler` (they are ncu runs): they still load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunRecord {
    pub schema: String,
    pub id: String,
    pub kopt_version: String,
    pub started_utc: String,
    pub cwd: String,
    pub argv: Vec<String>,
    #[serde(default)]
    pub module: Option<String>,
    /// `--gpu`, exported to the workload as CUDA_VISIBLE_DEVICES (ncu) or
    /// HIP_VISIBLE_DEVICES (rocprofv3).
    #[serde(default, alias = "cuda_visible_devices")]
    pub visible_devices: Option<String>,
    #[serde(default)]
    pub profiler: Profiler,
    /// The profiler binary that ran the passes.
    #[serde(alias = "ncu")]
    pub profiler_path: String,
    /// Its `--version` line.
    #[serde(default, alias = "ncu_version")]
    pub profiler_version: Option<String>,
    /// rocprofv3 runs: `--kernel`. rocprofv3's trace records every kernel,
    /// so the regex is applied whenever the folder is read, by `kopt
    /// profile` and by `kopt analyze` alike (ncu applies it while profiling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_filter: Option<String>,
    #[serde(default)]
    pub passes: Vec<PassRecord>,
    /// What the counter pass covered when the timeline decided it (`kopt
    /// profile` without `--profile-top`): "skipped: REASON" or "only
    /// KERNELS: REASON". Absent when it covered the hottest kernels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<String>,
    /// "running", "ok", or `"failed: <reason>"`.
    pub status: String,
    #[serde(default)]
    pub wall_s: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_csvs_are_named_after_their_passes() {
        for (stem, csv) in [
            (TIMING_PASS, TIMING_CSV),
            (TARGETED_PASS, TARGETED_CSV),
            (DEEP_PASS, DEEP_CSV),
        ] {
            assert_eq!(format!("{stem}.csv"), csv);
        }
    }
}
