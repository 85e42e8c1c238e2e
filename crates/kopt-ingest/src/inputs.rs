//! `kopt analyze`'s inputs read and merged into one profile: each input
//! sniffed ([`crate::detect`]) and read by the reader of its kind, ncu
//! pages merged, counters from run folders, the timeline from a trace.
//! A `.ncu-rep` report comes already exported (running ncu is
//! kopt-collect's), so reading the inputs never leaves this crate.

use std::path::{Path, PathBuf};

use kopt_model::{Diagnosis, Profile};

use crate::budget::Budget;

use crate::detect::{sniff, InputKind};
use crate::{
    merge_profile, parse_ncu_csv, profile_from_timeline, profile_from_trace, read_kineto,
    read_kopt_trace_set, read_ncu_csv, read_rocprof_compute_dir, read_rocprof_files, IngestError,
    NcuFile,
};

/// A `.ncu-rep` report's two CSV pages, as ncu exported them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportedReport {
    /// The report, as the input names it.
    pub path: PathBuf,
    /// The raw page (the counters).
    pub raw: Vec<u8>,
    /// The details page (ncu's rules).
    pub details: Vec<u8>,
}

/// One file given twice (by another name, `./x` or a link) would be merged
/// as two captures, its launches and time doubled: refused by identity.
fn refuse_repeats(paths: &[PathBuf]) -> Result<(), IngestError> {
    use std::os::unix::fs::MetadataExt;
    let mut seen: std::collections::HashMap<(u64, u64), &PathBuf> = Default::default();
    for p in paths {
        let Ok(m) = std::fs::metadata(p) else {
            continue;
        };
        if let Some(first) = seen.insert((m.dev(), m.ino()), p) {
            return Err(IngestError::format(
                &p.display().to_string(),
                format!(
                    "the same file as {}: give each input once (it would count twice)",
                    crate::echo(&first.display().to_string())
                ),
            ));
        }
    }
    Ok(())
}

/// Two ncu files of one page holding the same launches (ncu's IDs, names,
/// grids, in order) are one capture twice, a copy or a re-run of one
/// program, even with a value changed: merged, they would double its
/// launches and time, as one file given twice would.
fn refuse_copies(files: &[(String, crate::NcuFile)]) -> Result<(), IngestError> {
    use std::hash::{Hash, Hasher};
    let mut seen: std::collections::HashMap<u64, &str> = Default::default();
    for (label, f) in files {
        if f.launches.is_empty() {
            continue;
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        format!("{:?}", f.page).hash(&mut h);
        for l in &f.launches {
            (l.id, &l.name).hash(&mut h);
            (
                l.grid.x, l.grid.y, l.grid.z, l.block.x, l.block.y, l.block.z,
            )
                .hash(&mut h);
        }
        if let Some(first) = seen.insert(h.finish(), label) {
            return Err(IngestError::format(
                label,
                format!(
                    "holds the same {} launches (ncu IDs, names, grids) as {}: one capture twice, or two runs of one program; give one capture (merged, its launches would count twice)",
                    f.launches.len(),
                    crate::echo(first)
                ),
            ));
        }
    }
    Ok(())
}

/// The inputs merged into one profile: counters per kernel from ncu pages
/// and run folders, the timeline from a trace.
pub fn read_inputs(paths: &[PathBuf], reports: &[ExportedReport]) -> Result<Profile, IngestError> {
    refuse_repeats(paths)?;
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
                let p = crate::run_folder::read_run_folder_filtered(path)?;
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
                for (l, f) in parse_exported_report(path, reports)? {
                    if let Some(d) = &f.device {
                        named(&l, d);
                    }
                    files.push((l, f));
                }
            }
            InputKind::KoptReport => {
                return Err(IngestError::Inputs(format!(
                    "{}: kopt's own JSON report is re-rendered alone (`kopt analyze {}`), never merged with other inputs",
                    crate::one_line(&label),
                    crate::one_line(&label)
                )));
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
        return Err(IngestError::Inputs(format!(
            "{first} is from {first_device} but {other} is from {other_device}: kopt does not merge captures of two GPUs into one table; analyze each on its own"
        )));
    }
    // Timelines are never merged: one trace's launches under another's
    // timeline mixed two runs (the first's kernels, the last's steps).
    if traces.len() > 1 {
        let names: Vec<String> = traces
            .iter()
            .filter_map(|t| t.sources.first().map(|s| crate::one_line(&s.path)))
            .collect();
        return Err(IngestError::Inputs(format!(
            "{} are {} timelines: kopt analyses one at a time (with ncu or rocprof counters beside it); analyze each on its own, or put the ranks of one job in a folder and analyze the folder",
            names.join(" and "),
            traces.len()
        )));
    }
    refuse_copies(&files)?;
    let mut profile = merge_profile(files);
    for p in profiles {
        if profile.launches.is_empty() {
            profile.device = p.device;
            // Taken whole, not copied into an empty vector.
            profile.launches = p.launches;
        } else {
            profile.launches.extend(p.launches);
        }
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
    // Whichever input named the device (an ncu page, a run folder, AMD
    // agents): its figures checked once more, as a trace's are.
    let left_out = crate::device_left_out(&mut profile.device);
    if let Some(first) = profile.sources.first_mut() {
        first.excluded.extend(left_out);
    }
    let has_activity = profile
        .timeline
        .as_ref()
        .is_some_and(|t| !t.activities.is_empty());
    if profile.launches.is_empty() && !has_activity {
        let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        return Err(IngestError::Inputs(format!(
            "no GPU kernels in {}",
            names.join(", ")
        )));
    }
    Ok(profile)
}

/// A .ncu-rep's exported pages parsed: the raw page for the counters, the
/// details page for ncu's rules.
fn parse_exported_report(
    path: &Path,
    reports: &[ExportedReport],
) -> Result<Vec<(String, NcuFile)>, IngestError> {
    let label = path.display().to_string();
    let Some(report) = reports.iter().find(|r| r.path == path) else {
        return Err(IngestError::format(
            &label,
            "a .ncu-rep report is read through ncu's CSV export, and it was not exported",
        ));
    };
    let raw_label = format!("{label} (raw page)");
    let details_label = format!("{label} (details page)");
    Ok(vec![
        (raw_label.clone(), parse_ncu_csv(&report.raw, &raw_label)?),
        (
            details_label.clone(),
            parse_ncu_csv(&report.details, &details_label)?,
        ),
    ])
}

/// The largest kopt JSON report read back, in bytes: a 2,000-kernel
/// diagnosis is about 2.4 MB.
pub const KOPT_REPORT_MAX_BYTES: Budget = Budget {
    var: "KOPT_REPORT_MAX_BYTES",
    default: 256 << 20,
    unit: "bytes",
    max: 1 << 40,
};

/// A diagnosis kopt wrote as JSON (`-f json`, a run folder's
/// `report.json`), read back as it was stored: the document's schema
/// checked first (another version, or another kind of kopt document, is
/// a one-line error saying so), its size within [`KOPT_REPORT_MAX_BYTES`].
pub fn read_kopt_report(path: &Path) -> Result<Diagnosis, IngestError> {
    use std::io::Read;
    let label = path.display().to_string();
    let io = |source| IngestError::Io {
        path: label.clone(),
        source,
    };
    let max = KOPT_REPORT_MAX_BYTES.checked()?;
    let mut bytes = Vec::new();
    let file = crate::open_regular(path, &label)?;
    // A regular file: its size is what raising the budget must reach.
    let size = file.metadata().map(|m| m.len()).ok();
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > max {
        let how = match size.filter(|s| *s > max) {
            Some(size) => KOPT_REPORT_MAX_BYTES.how_to_raise_to(size),
            None => KOPT_REPORT_MAX_BYTES.how_to_raise(),
        };
        return Err(IngestError::format(
            &label,
            format!("kopt report size budget: more than {max} bytes; {how}"),
        ));
    }
    // The schema and the keys that tell kopt's documents apart, read
    // before the whole document is typed.
    #[derive(serde::Deserialize)]
    struct Head {
        schema: String,
        kernels: Option<serde::de::IgnoredAny>,
        variants: Option<serde::de::IgnoredAny>,
        tensors: Option<serde::de::IgnoredAny>,
    }
    let head: Head = serde_json::from_slice(&bytes).map_err(|e| {
        IngestError::format(&label, format!("not a readable kopt JSON document: {e}"))
    })?;
    if head.schema != kopt_model::SCHEMA {
        return Err(IngestError::format(
            &label,
            format!(
                "a kopt JSON document of schema {}, and this kopt reads {}: render it with the kopt that wrote it",
                crate::echo(&head.schema),
                kopt_model::SCHEMA
            ),
        ));
    }
    if head.kernels.is_none() {
        let kind = if head.variants.is_some() {
            "a bench report"
        } else if head.tensors.is_some() {
            "a compare report"
        } else {
            "not an analysis"
        };
        return Err(IngestError::format(
            &label,
            format!(
                "{kind}: kopt analyze re-renders the JSON of kopt analyze, profile and trace (a diagnosis with \"kernels\")"
            ),
        ));
    }
    let d: Diagnosis = serde_json::from_slice(&bytes).map_err(|e| {
        IngestError::format(
            &label,
            format!(
                "a {} document that is not a readable diagnosis: {e}",
                kopt_model::SCHEMA
            ),
        )
    })?;
    crate::stored::check_diagnosis(&d).map_err(|why| {
        IngestError::format(
            &label,
            format!("{why} (an edited or damaged report?): not read"),
        )
    })?;
    Ok(d)
}
