//! `kopt profile --backend rocprof`: the AMD path. Pass 1 is rocprofv3's
//! kernel trace (every dispatch timed, HIP runtime calls, agent info); the
//! kernels that carry the time then get kopt's counter groups, one rocprofv3
//! run per group (`--pmc`, restricted with `--kernel-include-regex`). The
//! run folder is then read back as `kopt analyze` reads it (kopt-ingest's
//! rocprof reader joins the counters onto the trace by kernel and
//! occurrence) and diagnosed.

use std::path::{Path, PathBuf};
use std::time::Instant;

use kopt_analyze::top_kernel_functions;
use kopt_collect::rocprof::counter_groups;
use kopt_collect::{RocPass, Rocprof, Stream};
use kopt_model::Diagnosis;

use crate::diagnose::diagnose;
use crate::error::{Error, Result};
use crate::profile_run::{
    conclude_profile, no_kernel_matches, start_run, ProfileRequest, TARGET_COVERAGE,
};
use crate::progress::Progress;
use crate::run_folder::save_record;
use kopt_ingest::read_run_folder_filtered;
use kopt_model::run_folder::{PassRecord, Profiler, RunRecord};

/// Profile a workload with rocprofv3.
pub(crate) fn profile_rocprof(req: &ProfileRequest, progress: &dyn Progress) -> Result<Diagnosis> {
    if req.deep_top.is_some() {
        return Err(Error::Usage(
            "--deep-top is ncu's --set full: there is no rocprofv3 equivalent; use rocprof-compute for a full AMD analysis and `kopt analyze` its workload folder".into(),
        ));
    }
    let rocprof = Rocprof::locate(req.rocprof.as_deref(), std::env::var_os("PATH").as_deref())?;
    let filter = req
        .kernel_regex
        .as_deref()
        .map(regex::Regex::new)
        .transpose()
        .map_err(|e| {
            Error::Usage(format!(
                "--kernel: {}",
                kopt_ingest::run_folder::regex_error(&e)
            ))
        })?;
    let started = Instant::now();
    let (req, dir, mut record) =
        start_run(req, Profiler::Rocprofv3, &rocprof.path, rocprof.version())?;
    let req = &req;
    // rocprofv3 traces every kernel: the filter is applied on reading.
    record.kernel_filter = req.kernel_regex.clone();
    save_record(&record, &dir)?;
    let result = run_passes(req, &rocprof, &dir, &mut record, progress, filter.as_ref());
    conclude_profile(req, &dir, &mut record, started, result, progress)
}

fn run_passes(
    req: &ProfileRequest,
    rocprof: &Rocprof,
    dir: &Path,
    record: &mut RunRecord,
    progress: &dyn Progress,
    filter: Option<&regex::Regex>,
) -> Result<Diagnosis> {
    let workload = req.run.launch();
    let groups_for = |arch: Option<&str>| counter_groups(arch);
    // The total is known once the trace names the GPU; the group count does
    // not depend on it.
    let total = 1 + groups_for(None).len();
    let mut step = |n: usize, pass: RocPass, passthrough: bool| -> Result<Vec<PathBuf>> {
        progress.pass_started(n, total, &pass.describe());
        let t = Instant::now();
        let on_line = |s: Stream, l: &str| progress.workload_line(s, l, passthrough);
        let captured = rocprof.capture(&pass, &workload, dir, &on_line)?;
        record.passes.push(PassRecord {
            name: pass.file_stem(),
            description: pass.describe(),
            command: captured.command.clone(),
            elapsed_s: t.elapsed().as_secs_f64(),
            exit_code: captured.outcome.code,
            csv: captured
                .csvs
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        });
        save_record(record, dir)?;
        progress.pass_done(n, total, t.elapsed().as_secs_f64());
        Ok(captured.csvs)
    };

    // Pass 1: the kernel trace; the workload's own output is shown here only.
    let trace_files = step(1, RocPass::Trace, !req.run.quiet)?;
    let mut trace = kopt_ingest::read_rocprof_files(&trace_files)?;
    if let Some(re) = filter {
        if !trace.launches.iter().any(|l| re.is_match(&l.name)) {
            return Err(no_kernel_matches(re, &trace.launches));
        }
        trace.retain_kernels(|name| re.is_match(name));
    }
    let functions = top_kernel_functions(&trace, req.profile_top, TARGET_COVERAGE);
    if functions.is_empty() {
        return Err(Error::WorkloadFailed(format!(
            "{}: the kernel trace recorded no kernel time",
            trace_files
                .first()
                .map_or_else(|| dir.display().to_string(), |p| p.display().to_string())
        )));
    }
    let arch = trace.device.amd.as_ref().and_then(|a| a.arch.clone());

    // Counter passes on the kernels that carry the time.
    for (i, counters) in groups_for(arch.as_deref()).into_iter().enumerate() {
        let pass = RocPass::Counters {
            index: i,
            counters,
            functions: functions.clone(),
        };
        step(i + 2, pass, false)?;
    }
    // The folder read back the way `kopt analyze` reads it (run.json's
    // kernel_filter included), so both give the same diagnosis.
    let profile = read_run_folder_filtered(dir)?;
    Ok(diagnose(profile, &req.analysis))
}
