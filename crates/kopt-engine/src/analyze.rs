//! Analyze existing profiler output: sniff each input's format, parse,
//! merge, diagnose.

use std::path::{Path, PathBuf};

use kopt_analyze::AnalyzeOptions;
use kopt_collect::{CsvPage, Ncu};
use kopt_ingest::{
    merge_profile, parse_ncu_csv, profile_from_timeline, profile_from_trace, read_kineto,
    read_kopt_trace_set, read_ncu_csv, read_rocprof_compute_dir, read_rocprof_files, NcuFile,
};
use kopt_model::{Diagnosis, Peaks, Profile};

use crate::error::{Error, Result};
use crate::profile::WorkloadOptions;
use crate::progress::{Progress, Stream};
use crate::trace::{bare_run_range, BareRun};
use kopt_collect::trace::locate_tracer;

/// How the analysis reads the device: a name for datasheet peaks, measured peaks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AnalysisOptions {
    /// Device name for datasheet peaks when the input names none.
    pub device: Option<String>,
    /// Measured peaks (SI units: bytes/s, FLOP/s), overriding the others.
    pub measured_peaks: Peaks,
    /// Show only the N kernels with the most time (all still count).
    pub top: Option<usize>,
    /// Keep warm-up / autotuning trial kernels in the table and totals
    /// (they are left out by default and summarised in one line).
    pub keep_warmup: bool,
    /// A history whose `kopt optimize` runs calibrate the predictions: once a
    /// rule has enough checked predictions, its recommendations quote them.
    pub calibration_db: Option<PathBuf>,
}

impl AnalysisOptions {
    pub fn validate(&self) -> Result<()> {
        if self.top == Some(0) {
            return Err(Error::Usage("--top must be at least 1".into()));
        }
        if self.device.as_deref().is_some_and(|d| d.trim().is_empty()) {
            return Err(Error::Usage("--device needs a name".into()));
        }
        let p = &self.measured_peaks;
        for (name, v) in [
            ("peak-dram-gbs", p.dram_bytes_per_s),
            ("peak-fp32-tflops", p.fp32_flops),
            ("peak-tensor-tflops", p.tensor_bf16_flops),
        ] {
            if let Some(x) = v {
                if !(x.is_finite() && x > 0.0) {
                    return Err(Error::Usage(format!(
                        "--{name} must be a positive number, got {x}"
                    )));
                }
            }
        }
        Ok(())
    }
}

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
            "The command after `--` was not run: the trace's steps are not marked by ProfilerStep#N or NVTX ranges, so a bare run could not time the same steps.",
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

/// Drop a profile off the caller's thread: a large trace's profile is
/// millions of small allocations, and freeing them one by one only delays
/// the report (a CLI exits right after; Python keeps going).
pub(crate) fn drop_in_background(profile: Profile) {
    let _ = std::thread::Builder::new()
        .name("kopt-drop".into())
        .spawn(move || drop(profile));
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
                let p = crate::run_folder::read_run_folder(path)?;
                named(&label, &p.device);
                profiles.push(p);
            }
            InputKind::KoptTrace => {
                let t = read_kopt_trace_set(path)?;
                let p = profile_from_timeline(t.timeline, &label, "kopt trace (CUPTI)");
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

/// Device overrides, measured peaks, then the analysis.
pub fn diagnose(mut profile: Profile, opts: &AnalysisOptions) -> Diagnosis {
    if let Some(name) = &opts.device {
        profile.device.name = name.clone();
        profile.device.resolve_peaks();
    }
    profile.device.apply_measured_peaks(&opts.measured_peaks);
    let mut diagnosis = kopt_analyze::analyze(
        &profile,
        &AnalyzeOptions {
            top: opts.top,
            keep_warmup: opts.keep_warmup,
        },
    );
    drop_in_background(profile);
    if let Some(db) = &opts.calibration_db {
        crate::history::apply_calibration(&mut diagnosis, db);
    }
    diagnosis
}

/// What an input path holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    RunFolder,
    KoptTrace,
    Kineto,
    NcuReport,
    NcuCsv,
    /// rocprofv3 / legacy rocprof CSV, rocprofv3 JSON, rocminfo text, a rocpd database.
    Rocprof,
    /// A rocprof-compute (Omniperf) workload folder.
    RocprofCompute,
}

/// The kind of an input: folders are run folders; files by extension, else
/// by their first bytes. Anything but a folder or a regular file is refused
/// here, before a reader could block on a FIFO or read a device forever.
pub fn sniff(path: &Path) -> Result<InputKind> {
    let meta = std::fs::metadata(path)
        .map_err(|e| Error::Input(format!("{}: cannot read: {e}", path.display())))?;
    if meta.is_dir() {
        if kopt_ingest::is_rocprof_compute_dir(path) {
            return Ok(InputKind::RocprofCompute);
        }
        return Ok(InputKind::RunFolder);
    }
    if !meta.is_file() {
        return Err(Error::Input(format!(
            "{}: not a regular file (kopt reads files and run folders only)",
            path.display()
        )));
    }
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    if path.to_string_lossy().ends_with(".jsonl.gz") {
        return Ok(InputKind::KoptTrace);
    }
    use std::io::Read;
    let mut first = vec![0u8; 4096];
    let head = |first: &mut Vec<u8>| {
        std::fs::File::open(path)
            .and_then(|mut f| f.read(first))
            .unwrap_or(0)
    };
    match ext {
        "jsonl" => return Ok(InputKind::KoptTrace),
        // rocprofv3's JSON output by its top-level key; any other JSON is a
        // Kineto / Chrome trace.
        "json" => {
            let n = head(&mut first);
            if kopt_ingest::rocprof::sniff_json(&first[..n]) {
                return Ok(InputKind::Rocprof);
            }
            return Ok(InputKind::Kineto);
        }
        "gz" => return Ok(InputKind::Kineto),
        "ncu-rep" => return Ok(InputKind::NcuReport),
        _ => {}
    }
    let n = head(&mut first);
    if kopt_ingest::rocprof::sniff(&first[..n]) {
        return Ok(InputKind::Rocprof);
    }
    let head = &first[..n.min(64)];
    Ok(if head.starts_with(b"{\"t\":") {
        InputKind::KoptTrace
    } else if head.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
        || head.starts_with(&[0x1f, 0x8b])
    {
        InputKind::Kineto
    } else {
        InputKind::NcuCsv
    })
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

    #[test]
    fn sniffs_formats_and_refuses_special_files() {
        let d = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let p = d.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        assert_eq!(
            sniff(&write("t", "{\"t\":\"kernel\"}")).unwrap(),
            InputKind::KoptTrace
        );
        assert_eq!(
            sniff(&write("k", "  {\"traceEvents\":[]}")).unwrap(),
            InputKind::Kineto
        );
        assert_eq!(
            sniff(&write("c", "\"ID\",\"x\"")).unwrap(),
            InputKind::NcuCsv
        );
        // .json: rocprofv3's by its top-level key, Kineto / Chrome otherwise.
        assert_eq!(
            sniff(&write("r.json", "{\n  \"rocprofiler-sdk-tool\": [")).unwrap(),
            InputKind::Rocprof
        );
        assert_eq!(
            sniff(&write("k.json", "{\"schemaVersion\":1,\"traceEvents\":[]}")).unwrap(),
            InputKind::Kineto
        );
        assert_eq!(
            sniff(&write("x.json", "{\"rocprofiler-sdk-tools\": []}")).unwrap(),
            InputKind::Kineto
        );
        // A SQLite database under any name goes to the rocpd reader.
        assert_eq!(
            sniff(&write("results", "SQLite format 3\0rest")).unwrap(),
            InputKind::Rocprof
        );
        assert_eq!(sniff(d.path()).unwrap(), InputKind::RunFolder);
        let fifo = d.path().join("fifo");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let err = sniff(&fifo).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
    }
}
