//! `kopt profile --backend rocprof`: the workload under AMD's rocprofv3, in
//! passes like the ncu path — a kernel trace of every dispatch, then counter
//! passes (`--pmc`) restricted to the kernels that carry the time
//! (`--kernel-include-regex`). Each pass writes CSV (`--output-format csv`)
//! into the run folder under its own name (`-d DIR -o NAME`) and a log.

use std::path::{Path, PathBuf};

use crate::passes::{PassError, Workload};
use crate::runner::{self, RunOutcome, RunSpec, Stream};

/// Counter groups, one rocprofv3 run each (`--pmc` fails when a set does
/// not fit one pass). Sized to the per-pass hardware limits that
/// rocprof-compute's own pass files show on gfx942 (MI300X, the real
/// `fixtures/amd/omniperf-vcopy-mi300x/perfmon/pmc_perf_*.txt`): at most 8 SQ
/// counters, 4 TCC, 4 TCP and 2 GRBM counters per pass (pmc_perf_0 and _2
/// fill exactly those), and the level counters SQ_LEVEL_WAVES /
/// SQ_ACCUM_PREV_HIRES in a pass of their own (`perfmon/SQ_LEVEL_WAVES.txt`).
/// Names are gfx942's; [`counter_groups`] renames the TCC fabric counters
/// for gfx90a / gfx908. These are the counters kopt-ingest's AMD formulas
/// read (rocprof-compute's speed-of-light formulas).
pub const COUNTER_GROUPS: &[&[&str]] = &[
    // HBM reads, pipe utilisation, LDS, vL1D.
    &[
        "GRBM_GUI_ACTIVE",
        "SQ_WAVES",
        "SQ_ACTIVE_INST_VALU",
        "SQ_VALU_MFMA_BUSY_CYCLES",
        "SQ_LDS_IDX_ACTIVE",
        "SQ_LDS_BANK_CONFLICT",
        "TCC_EA0_RDREQ_sum",
        "TCC_EA0_RDREQ_32B_sum",
        "TCC_BUBBLE_sum",
        "TCP_TOTAL_CACHE_ACCESSES_sum",
    ],
    // HBM writes, L2 hit rate, FP32 / FP64 VALU work.
    &[
        "GRBM_GUI_ACTIVE",
        "SQ_INSTS_VALU_ADD_F32",
        "SQ_INSTS_VALU_MUL_F32",
        "SQ_INSTS_VALU_FMA_F32",
        "SQ_INSTS_VALU_TRANS_F32",
        "SQ_INSTS_VALU_ADD_F64",
        "SQ_INSTS_VALU_MUL_F64",
        "SQ_INSTS_VALU_FMA_F64",
        "SQ_INSTS_VALU_TRANS_F64",
        "TCC_EA0_WRREQ_sum",
        "TCC_EA0_WRREQ_64B_sum",
        "TCC_HIT_sum",
        "TCC_MISS_sum",
    ],
    // FP16 VALU and MFMA work, L2 requests.
    &[
        "GRBM_GUI_ACTIVE",
        "SQ_INSTS_VALU_ADD_F16",
        "SQ_INSTS_VALU_MUL_F16",
        "SQ_INSTS_VALU_FMA_F16",
        "SQ_INSTS_VALU_TRANS_F16",
        "SQ_INSTS_VALU_MFMA_MOPS_F16",
        "SQ_INSTS_VALU_MFMA_MOPS_BF16",
        "SQ_INSTS_VALU_MFMA_MOPS_F32",
        "SQ_INSTS_VALU_MFMA_MOPS_F64",
        "TCC_REQ_sum",
        "TCP_TCC_READ_REQ_sum",
        "TCP_TCC_WRITE_REQ_sum",
    ],
    // Occupancy: the wave-level accumulation.
    &["GRBM_GUI_ACTIVE", "SQ_LEVEL_WAVES", "SQ_ACCUM_PREV_HIRES"],
];

/// Per-pass counter limits by hardware block (see [`COUNTER_GROUPS`]).
pub const BLOCK_LIMITS: &[(&str, usize)] = &[("SQ", 8), ("TCC", 4), ("TCP", 4), ("GRBM", 2)];

/// The block a counter belongs to (`TCC_HIT_sum` -> `TCC`).
pub fn counter_block(counter: &str) -> &str {
    counter.split('_').next().unwrap_or(counter)
}

/// The counter groups for a gfx target (`gfx942`; `None`: gfx942's names).
/// gfx90a / gfx908 name the fabric counters TCC_EA_* and have no TCC_BUBBLE.
pub fn counter_groups(arch: Option<&str>) -> Vec<Vec<String>> {
    let older = matches!(arch, Some(a) if a.starts_with("gfx90"));
    COUNTER_GROUPS
        .iter()
        .map(|g| {
            g.iter()
                .filter(|c| !(older && c.starts_with("TCC_BUBBLE")))
                .map(|c| {
                    if older {
                        c.replace("TCC_EA0_", "TCC_EA_")
                    } else {
                        c.to_string()
                    }
                })
                .collect()
        })
        .collect()
}

/// One rocprofv3 pass.
#[derive(Debug, Clone)]
pub enum RocPass {
    /// Every dispatch timed (`--kernel-trace`), with the HIP runtime API calls.
    Trace,
    /// A counter group for the named kernel functions.
    Counters {
        index: usize,
        counters: Vec<String>,
        functions: Vec<String>,
    },
}

impl RocPass {
    pub fn file_stem(&self) -> String {
        match self {
            RocPass::Trace => "pass1-trace".into(),
            RocPass::Counters { index, .. } => format!("pass{}-counters", index + 2),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            RocPass::Trace => "kernel trace of every dispatch (rocprofv3 --kernel-trace)".into(),
            RocPass::Counters {
                counters,
                functions,
                ..
            } => format!(
                "{} counters (rocprofv3 --pmc) on the top {} kernel(s)",
                counters.len(),
                functions.len()
            ),
        }
    }

    /// rocprofv3's options for this pass, without the output options.
    pub fn rocprof_args(&self) -> Vec<String> {
        match self {
            RocPass::Trace => vec!["--kernel-trace".into(), "--hip-runtime-trace".into()],
            RocPass::Counters {
                counters,
                functions,
                ..
            } => {
                let mut a = vec!["--pmc".to_string()];
                a.extend(counters.iter().cloned());
                a.push("--kernel-include-regex".into());
                a.push(kernel_regex(functions));
                a
            }
        }
    }
}

/// A regex (ECMAScript, what rocprofv3's std::regex reads) matching the
/// named functions as whole identifiers inside a full kernel signature
/// (`void tiny_add<float>(float*, int)` for `tiny_add`).
pub fn kernel_regex(functions: &[String]) -> String {
    let alternatives: Vec<String> = functions
        .iter()
        .map(|f| crate::passes::regex_escape(f))
        .collect();
    format!(
        "(^|[^A-Za-z0-9_])({})([^A-Za-z0-9_]|$)",
        alternatives.join("|")
    )
}

/// A located rocprofv3.
#[derive(Debug, Clone)]
pub struct Rocprof {
    pub path: PathBuf,
}

/// Where ROCm installs put rocprofv3 when it is not on PATH.
const WELL_KNOWN: &[&str] = &["/opt/rocm/bin/rocprofv3"];

#[derive(Debug, thiserror::Error)]
pub enum RocprofError {
    #[error("rocprofv3 (ROCprofiler-SDK) not found (looked in: {searched}); install ROCm's rocprofiler-sdk, pass --rocprof PATH, or profile with rocprofv3 yourself and run `kopt analyze` on its output")]
    NotFound { searched: String },
    #[error("{path}: --rocprof points to no executable file")]
    NotExecutable { path: String },
}

fn find_in_path(name: &str, path_var: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path_var?)
        .map(|d| d.join(name))
        .find(|p| crate::is_executable(p))
}

impl Rocprof {
    /// `explicit` (from `--rocprof`) wins; then PATH; then /opt/rocm/bin.
    pub fn locate(
        explicit: Option<&Path>,
        path_var: Option<&std::ffi::OsStr>,
    ) -> Result<Rocprof, RocprofError> {
        if let Some(p) = explicit {
            return if crate::is_executable(p) {
                Ok(Rocprof {
                    path: p.to_path_buf(),
                })
            } else {
                Err(RocprofError::NotExecutable {
                    path: p.display().to_string(),
                })
            };
        }
        if let Some(p) = find_in_path("rocprofv3", path_var) {
            return Ok(Rocprof { path: p });
        }
        let mut searched = vec!["PATH".to_string()];
        for known in WELL_KNOWN {
            if crate::is_executable(Path::new(known)) {
                return Ok(Rocprof {
                    path: PathBuf::from(known),
                });
            }
            searched.push(known.to_string());
        }
        Err(RocprofError::NotFound {
            searched: searched.join(", "),
        })
    }

    /// Run one pass of `workload` under rocprofv3; the CSV files it wrote.
    pub fn capture(
        &self,
        pass: &RocPass,
        workload: &Workload,
        dir: &Path,
        on_line: &(dyn Fn(Stream, &str) + Sync),
    ) -> Result<CapturedRocPass, PassError> {
        let stem = pass.file_stem();
        let pass_name: &'static str = match pass {
            RocPass::Trace => "pass1-trace",
            RocPass::Counters { .. } => "counter pass",
        };
        let log = runner::log_path(dir, &stem);
        let mut args = vec![
            "--output-format".to_string(),
            "csv".into(),
            "-d".into(),
            dir.display().to_string(),
            "-o".into(),
            stem.clone(),
        ];
        args.extend(pass.rocprof_args());
        args.push("--".into());
        args.extend(workload.argv.iter().cloned());
        let spec = RunSpec {
            program: self.path.clone(),
            args: args.clone(),
            env: workload
                .gpu
                .iter()
                .map(|g| ("HIP_VISIBLE_DEVICES".to_string(), g.clone()))
                .collect(),
            timeout: workload.timeout,
            log: log.clone(),
        };
        let outcome = runner::run(&spec, on_line).map_err(|source| PassError::Spawn {
            pass: pass_name,
            program: self.path.display().to_string(),
            source,
        })?;
        let failed = |failure| PassError::Failed {
            pass: pass_name,
            failure,
            log: log.display().to_string(),
        };
        let counters = matches!(pass, RocPass::Counters { .. });
        diagnose(&outcome, workload.timeout.map(|t| t.as_secs()), counters).map_err(failed)?;
        let csvs = output_files(dir, &stem);
        if csvs.is_empty() {
            return Err(failed(crate::PassFailure::Rocprof(format!(
                "rocprofv3 wrote no {stem}_*.csv under {} (does the workload launch kernels on an AMD GPU? see the log)",
                dir.display()
            ))));
        }
        let mut command = vec![self.path.display().to_string()];
        command.extend(args);
        Ok(CapturedRocPass {
            csvs,
            log,
            outcome,
            command,
        })
    }

    /// `rocprofv3 --version`'s first non-empty line, for the run record.
    pub fn version(&self) -> Option<String> {
        let (stdout, stderr) = crate::runner::version_output(&self.path)?;
        (stdout + &stderr)
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_string)
    }
}

/// What a rocprofv3 pass left in the run folder.
#[derive(Debug, Clone)]
pub struct CapturedRocPass {
    /// `<stem>_kernel_trace.csv`, `<stem>_counter_collection.csv`, `<stem>_agent_info.csv`, ...
    pub csvs: Vec<PathBuf>,
    pub log: PathBuf,
    pub outcome: RunOutcome,
    pub command: Vec<String>,
}

/// The CSV files of one pass: `<stem>_*.csv` in `dir` or a folder below it
/// (rocprofv3 may add `%hostname%/%pid%`-style folders), sorted.
pub fn output_files(dir: &Path, stem: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0)];
    let prefix = format!("{stem}_");
    while let Some((d, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            let name = e.file_name().to_string_lossy().into_owned();
            if ft.is_dir() && depth < 3 {
                stack.push((p, depth + 1));
            } else if ft.is_file() && name.starts_with(&prefix) && name.ends_with(".csv") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Classify a finished rocprofv3 run; `counters`: a counter pass (`--pmc`).
fn diagnose(
    outcome: &RunOutcome,
    timeout_s: Option<u64>,
    counters: bool,
) -> Result<(), crate::PassFailure> {
    use crate::PassFailure;
    if outcome.timed_out {
        return Err(PassFailure::Timeout(timeout_s.unwrap_or(0)));
    }
    for marker in [
        "No GPU agents",
        "hipErrorNoDevice",
        "no ROCm-capable device",
    ] {
        if let Some(line) = outcome.tail.iter().find(|l| l.contains(marker)) {
            return Err(PassFailure::NoGpu(line.trim().to_string()));
        }
    }
    // The GPU was found: a counter group that does not fit the hardware's
    // counter slots, or the workload (with the profiler's buffers) out of
    // GPU memory or queues.
    let marker = "HSA_STATUS_ERROR_OUT_OF_RESOURCES";
    if let Some(line) = outcome.tail.iter().find(|l| l.contains(marker)) {
        let why = if counters {
            "this pass's counters may not fit this GPU's counter hardware together, or the workload ran out of GPU memory under counter collection; run the workload alone to tell which, and see the log"
        } else {
            "the workload ran out of GPU memory or queues under tracing; check that it runs alone and fits in memory with rocprofv3's buffers"
        };
        return Err(PassFailure::OutOfResources {
            why,
            line: line.trim().to_string(),
        });
    }
    match outcome.code {
        Some(0) => Ok(()),
        Some(code) => Err(PassFailure::WorkloadFailed {
            code,
            tail: outcome
                .tail
                .iter()
                .rev()
                .take(4)
                .rev()
                .cloned()
                .collect::<Vec<_>>()
                .join(" | "),
        }),
        None => Err(PassFailure::WorkloadFailed {
            code: -outcome.signal.unwrap_or(0),
            tail: format!("killed by signal {}", outcome.signal.unwrap_or(0)),
        }),
    }
}

/// Is an NVIDIA GPU here? (`nvidia-smi` on PATH or a /dev/nvidia0 device.)
pub fn nvidia_present(path_var: Option<&std::ffi::OsStr>) -> bool {
    find_in_path("nvidia-smi", path_var).is_some() || Path::new("/dev/nvidia0").exists()
}

/// Is rocprofv3 on PATH?
pub fn rocprofv3_on_path(path_var: Option<&std::ffi::OsStr>) -> bool {
    find_in_path("rocprofv3", path_var).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_fit_the_per_pass_limits() {
        for arch in [None, Some("gfx942"), Some("gfx90a")] {
            for g in counter_groups(arch) {
                for (block, limit) in BLOCK_LIMITS {
                    let n = g.iter().filter(|c| counter_block(c) == *block).count();
                    assert!(n <= *limit, "{arch:?} {g:?}: {n} {block} counters");
                }
                // The level counters only with GRBM_GUI_ACTIVE.
                if g.iter().any(|c| c == "SQ_ACCUM_PREV_HIRES") {
                    assert_eq!(g.len(), 3, "{g:?}");
                }
            }
        }
        let old = counter_groups(Some("gfx90a")).concat();
        assert!(old.contains(&"TCC_EA_RDREQ_sum".to_string()));
        assert!(!old
            .iter()
            .any(|c| c.contains("EA0") || c.contains("BUBBLE")));
    }

    #[test]
    fn pass_arguments_and_kernel_regex() {
        let r = kernel_regex(&["tiny_add".into(), "operator()".into()]);
        assert_eq!(
            r,
            "(^|[^A-Za-z0-9_])(tiny_add|operator\\(\\))([^A-Za-z0-9_]|$)"
        );
        let re = regex::Regex::new(&r).unwrap();
        assert!(re.is_match("void tiny_add<float>(float*, int)"));
        assert!(!re.is_match("tiny_add2(float*)"));
        let p = RocPass::Counters {
            index: 1,
            counters: vec!["SQ_WAVES".into(), "GRBM_GUI_ACTIVE".into()],
            functions: vec!["k".into()],
        };
        assert_eq!(p.file_stem(), "pass3-counters");
        let a = p.rocprof_args();
        assert_eq!(&a[..3], ["--pmc", "SQ_WAVES", "GRBM_GUI_ACTIVE"]);
        assert!(a.windows(2).any(|w| w[0] == "--kernel-include-regex"));
        assert!(RocPass::Trace
            .rocprof_args()
            .contains(&"--kernel-trace".to_string()));
    }

    fn outcome(code: i32, tail: &[&str]) -> RunOutcome {
        RunOutcome {
            code: Some(code),
            signal: None,
            timed_out: false,
            elapsed: std::time::Duration::from_secs(1),
            tail: tail.iter().map(|l| l.to_string()).collect(),
        }
    }

    /// HSA_STATUS_ERROR_OUT_OF_RESOURCES is not a missing GPU: it says what
    /// ran out, per pass, and quotes rocprofv3's line.
    #[test]
    fn out_of_resources_is_not_a_missing_gpu() {
        let line = "  E20260101 rocprofiler: HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary resources.";
        let counters = diagnose(&outcome(1, &["ok", line]), None, true).unwrap_err();
        let text = counters.to_string();
        assert!(
            matches!(counters, crate::PassFailure::OutOfResources { .. }),
            "{counters:?}"
        );
        assert!(!text.contains("no usable GPU"), "{text}");
        assert!(text.contains("counter hardware"), "{text}");
        assert!(text.contains("out of GPU memory"), "{text}");
        assert!(text.ends_with(line.trim()), "{text}");
        let trace = diagnose(&outcome(1, &[line]), None, false)
            .unwrap_err()
            .to_string();
        assert!(!trace.contains("counter hardware"), "{trace}");
        assert!(trace.contains("out of GPU memory"), "{trace}");
        // A missing GPU is still said so.
        let none = diagnose(&outcome(1, &["hipErrorNoDevice"]), None, false).unwrap_err();
        assert!(matches!(none, crate::PassFailure::NoGpu(_)), "{none:?}");
        assert!(diagnose(&outcome(0, &["done"]), None, true).is_ok());
    }
}
