//! Analyze existing profiler output: sniff each input's format, parse,
//! merge, diagnose.

use std::path::{Path, PathBuf};

use kopt_collect::{CsvPage, Ncu};
use kopt_ingest::inputs::{read_inputs, ExportedReport};
use kopt_model::{Diagnosis, Profile};

use crate::diagnose::diagnose;
pub use crate::diagnose::AnalysisOptions;
use crate::error::{Error, Result};
use crate::progress::{Progress, Stream};
use crate::trace::{bare_run_range, BareRun};
use crate::workload::WorkloadOptions;
use kopt_collect::trace::locate_tracer;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct AnalyzeRequest {
    /// ncu CSV pages, .ncu-rep reports, Kineto traces, kopt traces, run folders.
    pub files: Vec<PathBuf>,
    /// Nsight Compute binary for .ncu-rep inputs.
    pub ncu: Option<PathBuf>,
    /// The program that made the trace: when its steps look launch bound,
    /// kopt runs it bare (torch.profiler replaced by step markers, no
    /// CUPTI) and times the same steps, so the graph-capture prediction
    /// starts from the eager step without the profiler's cost.
    pub bare_run: Option<WorkloadOptions>,
    pub analysis: AnalysisOptions,
}

impl AnalyzeRequest {
    pub fn validate(&self) -> Result<()> {
        if self.files.is_empty() {
            return Err(Error::Usage(
                "nothing to analyze: give at least one file".into(),
            ));
        }
        if let Some(run) = &self.bare_run {
            run.validate()?;
        }
        self.analysis.validate()
    }
}

/// Read every input and diagnose the workload they describe.
pub fn analyze(req: &AnalyzeRequest, progress: &dyn Progress) -> Result<Diagnosis> {
    req.validate()?;
    if let [only] = req.files.as_slice() {
        if kopt_ingest::detect::sniff(only)? == kopt_ingest::detect::InputKind::KoptReport {
            return rerender_report(only, req);
        }
    }
    let mut profile = load_inputs(&req.files, req.ncu.as_deref())?;
    let bare = match &req.bare_run {
        Some(run) => Some(time_steps_bare(&mut profile, run, progress)?),
        None => None,
    };
    let mut diagnosis = diagnose(profile, &req.analysis);
    if let Some(bare) = bare {
        bare.add_notes(&mut diagnosis);
    }
    Ok(diagnosis)
}

/// kopt's own JSON report read back: its diagnosis as stored, for any
/// format. The report keeps what kopt concluded, not the profiler's data,
/// so it cannot be analysed again; a note says so.
fn rerender_report(path: &Path, req: &AnalyzeRequest) -> Result<Diagnosis> {
    if req.bare_run.is_some() {
        return Err(Error::Usage(format!(
            "{} is kopt's own report: a command after `--` needs the trace it times (give the trace or the run folder)",
            kopt_model::text::one_line(&path.display().to_string())
        )));
    }
    let mut d = kopt_ingest::inputs::read_kopt_report(path)?;
    d.notes.push(format!(
        "Re-rendered from kopt's report {}: it keeps the diagnosis, not the profiler's data, so nothing was analysed again (analysis options do not apply; analyze the original inputs for that).",
        kopt_model::text::one_line(&path.display().to_string())
    ));
    Ok(d)
}

/// `kopt analyze TRACE -- CMD`: the command's steps timed bare into the
/// trace's timeline. Skipped, with a note, when the trace does not call
/// for it (no launch-bound marked steps).
fn time_steps_bare(
    profile: &mut Profile,
    run: &WorkloadOptions,
    progress: &dyn Progress,
) -> Result<BareRun> {
    let Some(timeline) = profile.timeline.as_mut() else {
        return Err(Error::Usage(
            "a command after `--` times a trace's steps bare, but the inputs hold no timeline (give a torch.profiler or kopt trace)".into(),
        ));
    };
    let Some(range) = bare_run_range(timeline) else {
        return Ok(BareRun::skipped(
            "The command after `--` was not run: the trace's steps are not marked by ProfilerStep#N or NVTX ranges, so a bare run could not time the same steps.",
        ));
    };
    let tracer = locate_tracer(run.tracer.as_deref())?;
    let (_, run) = run.accept()?;
    let dir = run.folder();
    let passthrough = !run.quiet;
    let on_line = |s: Stream, line: &str| progress.workload_line(s, line, passthrough);
    Ok(BareRun::run(
        &run.launch(),
        &tracer,
        &range,
        &dir,
        timeline,
        progress,
        &on_line,
    ))
}

/// The inputs merged into one profile (kopt-ingest's `read_inputs`):
/// `.ncu-rep` reports are exported through ncu first, so every input is
/// then read by kopt-ingest alone.
pub fn load_inputs(paths: &[PathBuf], ncu: Option<&Path>) -> Result<Profile> {
    let mut reports = Vec::new();
    for path in paths.iter().filter(|p| kopt_collect::is_ncu_report(p)) {
        reports.push(export_ncu_rep(path, ncu)?);
    }
    Ok(read_inputs(paths, &reports)?)
}

/// A .ncu-rep exported through ncu: the raw page for the counters, the
/// details page for ncu's rules.
fn export_ncu_rep(path: &Path, ncu: Option<&Path>) -> Result<ExportedReport> {
    let ncu = Ncu::locate(ncu, std::env::var_os("PATH").as_deref())?;
    Ok(ExportedReport {
        path: path.to_path_buf(),
        raw: ncu.export_csv(path, CsvPage::Raw)?,
        details: ncu.export_csv(path, CsvPage::Details)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_requests() {
        let ok = AnalyzeRequest {
            files: vec!["a.csv".into()],
            ..Default::default()
        };
        assert!(ok.validate().is_ok());
        type Mutation = Box<dyn Fn(&mut AnalyzeRequest)>;
        let cases: Vec<(Mutation, &str)> = vec![
            (Box::new(|r| r.files.clear()), "nothing to analyze"),
            (Box::new(|r| r.analysis.top = Some(0)), "--top"),
            (
                Box::new(|r| r.analysis.measured_peaks.dram_bytes_per_s = Some(-1.0)),
                "--peak-dram-gbs",
            ),
            (
                Box::new(|r| r.analysis.measured_peaks.fp32_flops = Some(f64::NAN)),
                "--peak-fp32-tflops",
            ),
            (
                Box::new(|r| r.analysis.device = Some(" ".into())),
                "--device",
            ),
            (
                Box::new(|r| r.analysis.device = Some("H100".repeat(25_000))),
                "at most 128 characters",
            ),
            (
                Box::new(|r| r.analysis.device = Some("H100\x1b]0;owned\x07".into())),
                "no control characters",
            ),
        ];
        for (mutate, expected) in cases {
            let mut r = ok.clone();
            mutate(&mut r);
            let err = r.validate().unwrap_err();
            assert!(matches!(err, Error::Usage(_)));
            assert!(err.to_string().contains(expected), "{err} / {expected}");
        }
    }
}
