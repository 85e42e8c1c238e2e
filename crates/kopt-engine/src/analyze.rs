//! Analyze existing profiler output: sniff each input's format, parse,
//! merge, diagnose.

use std::path::{Path, PathBuf};

use kopt_collect::{CsvPage, Ncu};
use kopt_ingest::detect::{sniff, InputKind};
use kopt_ingest::{
    merge_profile, parse_ncu_csv, profile_from_timeline, profile_from_trace, read_kineto,
    read_kopt_trace_set, read_ncu_csv, read_rocprof_compute_dir, read_rocprof_files, NcuFile,
};
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
            "The command after `--` was not run: the trace's steps are not launch bound with ProfilerStep#N or NVTX step markers, so no graph-capture prediction needs a bare eager time.",
        ));
    };
    let tracer = locate_tracer(run.tracer.as_deref())?;
    let (_, dir) = run.create_run_dir()?;
    let passthrough = !run.quiet;
    let on_line = |s: Stream, line: &str| progress.workload_line(s, line, passthrough);
    Ok(BareRun::run(
        &run.workload(),
        &tracer,
        &range,
        &dir,
        timeline,
        progress,
        &on_line,
    ))
}

/// The inputs merged into one profile: counters per kernel from ncu pages
/// and run folders, the timeline from a trace.
pub fn load_inputs(paths: &[PathBuf], ncu: Option<&Path>) -> Result<Profile> {
    let mut files = Vec::new();
    let mut profiles = Vec::new();
    let mut traces = Vec::new();
    // AMD files of one run (rocprofv3 / rocprof / rocpd), merged together.
    let mut amd = Vec::new();
    // (input, GPU it names): captures of two GPUs are never merged silently.
    let mut devices: Vec<(String, String)> = Vec::new();
    let mut named = |label: &str, device: &kopt_model::Device| {
        if !device.name.starts_with(&kopt_model::Device::unknown().name) {
            devices.push((label.to_string(), device.name.clone()));
        }
    };
    for path in paths {
        let label = path.display().to_string();
        match sniff(path)? {
            InputKind::RocprofCompute => {
                let p = read_rocprof_compute_dir(path)?;
                named(&label, &p.device);
                profiles.push(p);
            }
            InputKind::Rocprof => amd.push(path.clone()),
            InputKind::RunFolder => {
                // ncu and rocprofv3 run folders, as `kopt profile` read them.
                let p = kopt_ingest::read_run_folder_filtered(path)?;
                named(&label, &p.device);
                profiles.push(p);
            }
            InputKind::KoptTrace => {
                let t = read_kopt_trace_set(path)?;
                let format = t.source_format();
                let p = profile_from_timeline(t.timeline, &label, &format);
                named(&label, &p.device);
                traces.push(p);
            }
            InputKind::Kineto => {
                let p = profile_from_trace(read_kineto(path)?, &label);
                named(&label, &p.device);
                traces.push(p);
            }
            InputKind::NcuReport => {
                for (l, f) in export_ncu_rep(path, ncu)? {
                    if let Some(d) = &f.device {
                        named(&l, d);
                    }
                    files.push((l, f));
                }
            }
            InputKind::NcuCsv => {
                let f = read_ncu_csv(path)?;
                if let Some(d) = &f.device {
                    named(&label, d);
                }
                files.push((label, f));
            }
        }
    }
    if !amd.is_empty() {
        let p = read_rocprof_files(&amd)?;
        named(&amd[0].display().to_string(), &p.device);
        // A kernel trace brings its timeline: it goes with the traces.
        if p.timeline.is_some() {
            traces.push(p);
        } else {
            profiles.push(p);
        }
    }
    if let Some((other, other_device)) = devices.iter().find(|(_, d)| *d != devices[0].1) {
        let (first, first_device) = &devices[0];
        return Err(Error::Input(format!(
            "{first} is from {first_device} but {other} is from {other_device}: kopt does not merge captures of two GPUs into one table; analyze each on its own"
        )));
    }
    let mut profile = merge_profile(files);
    for p in profiles {
        if profile.launches.is_empty() {
            profile.device = p.device;
        }
        profile.launches.extend(p.launches);
        profile.sources.extend(p.sources);
        // A run folder whose pass 1 was kopt's tracer brings its timeline.
        if p.timeline.is_some() {
            profile.timeline = p.timeline;
        }
    }
    for t in traces {
        // With counters present, the trace feeds the timeline view only:
        // its kernels are the counters' kernels, timed without ncu's serialisation.
        if profile.launches.is_empty() {
            profile.device = t.device;
            profile.launches = t.launches;
        }
        profile.sources.extend(t.sources);
        profile.timeline = t.timeline;
    }
    let has_activity = profile
        .timeline
        .as_ref()
        .is_some_and(|t| !t.activities.is_empty());
    if profile.launches.is_empty() && !has_activity {
        let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        return Err(Error::Input(format!(
            "no GPU kernels in {}",
            names.join(", ")
        )));
    }
    Ok(profile)
}

/// A .ncu-rep exported through ncu: the raw page for the counters, the
/// details page for ncu's rules.
fn export_ncu_rep(path: &Path, ncu: Option<&Path>) -> Result<Vec<(String, NcuFile)>> {
    let label = path.display().to_string();
    let ncu = Ncu::locate(ncu, std::env::var_os("PATH").as_deref())?;
    let raw = ncu.export_csv(path, CsvPage::Raw)?;
    let details = ncu.export_csv(path, CsvPage::Details)?;
    let raw_label = format!("{label} (raw page)");
    let details_label = format!("{label} (details page)");
    Ok(vec![
        (raw_label.clone(), parse_ncu_csv(&raw, &raw_label)?),
        (
            details_label.clone(),
            parse_ncu_csv(&details, &details_label)?,
        ),
    ])
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
