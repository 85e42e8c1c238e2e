//! `kopt analyze`: read profiler output, diagnose, report.

use std::path::Path;

use kopt_analyze::{analyze, AnalyzeOptions};
use kopt_collect::{CsvPage, Ncu};
use kopt_ingest::{
    merge_profile, parse_ncu_csv, profile_from_timeline, profile_from_trace, read_kineto,
    read_kopt_trace_set, read_ncu_csv, read_run_folder, NcuFile,
};
use kopt_model::{Diagnosis, Profile};

use crate::options::{AnalyzeRequest, ReportOptions};
use crate::output::write_report;

pub fn run(req: &AnalyzeRequest) -> anyhow::Result<()> {
    let mut files = Vec::new();
    let mut profiles = Vec::new();
    let mut traces = Vec::new();
    for path in &req.files {
        if path.is_dir() {
            profiles.push(read_run_folder(path)?);
        } else if is_kopt_trace(path) {
            let label = path.display().to_string();
            let t = read_kopt_trace_set(path)?;
            traces.push(profile_from_timeline(
                t.timeline,
                &label,
                "kopt trace (CUPTI)",
            ));
        } else if is_trace(path) {
            let label = path.display().to_string();
            traces.push(profile_from_trace(read_kineto(path)?, &label));
        } else {
            files.extend(load(path, req.ncu.as_deref())?);
        }
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
    let diagnosis = diagnose(profile, &req.report, req.top);
    emit(&diagnosis, &req.report)
}

/// Device overrides, measured peaks, then the analysis.
pub fn diagnose(mut profile: Profile, report: &ReportOptions, top: Option<usize>) -> Diagnosis {
    if let Some(name) = &report.device {
        profile.device.name = name.clone();
        profile.device.resolve_peaks();
    }
    profile.device.apply_measured_peaks(&report.measured_peaks);
    let diagnosis = analyze(&profile, &AnalyzeOptions { top });
    // The profile of a large trace is millions of small allocations and kopt
    // exits after the report: freeing them one by one only delays the exit.
    std::mem::forget(profile);
    diagnosis
}

/// A run's last step (`kopt profile`, `kopt trace`): name the run in the
/// diagnosis, keep the JSON report in its folder, then print the report.
pub fn finish_run(
    mut diagnosis: Diagnosis,
    run: kopt_model::RunInfo,
    kind: &str,
    db: &Path,
    report: &ReportOptions,
) -> anyhow::Result<()> {
    let dir = std::path::PathBuf::from(&run.run_dir);
    let argv = run.argv.join(" ");
    diagnosis.run = Some(run);
    let json = serde_json::to_string_pretty(&diagnosis)?;
    std::fs::write(dir.join("report.json"), &json)?;
    let summary = diagnosis.primary.as_ref().map_or_else(
        || format!("{} kernels", diagnosis.kernels.len()),
        |p| {
            format!(
                "primary {} / {} ({:.1}% of kernel time)",
                p.component_short, p.class, p.pct_of_total
            )
        },
    );
    crate::history_cmd::record(
        db,
        kopt_store::RunRow {
            id: 0,
            kind: kind.into(),
            started_utc: crate::run_record::utc_timestamp(std::time::SystemTime::now()),
            command: argv,
            device: Some(diagnosis.device.name.clone()),
            git_rev: kopt_store::git_revision(Path::new(".")),
            summary,
            verdict: None,
            run_dir: Some(dir.display().to_string()),
            report_json: Some(json),
        },
    );
    emit(&diagnosis, report)
}

pub fn emit(diagnosis: &Diagnosis, report: &ReportOptions) -> anyhow::Result<()> {
    if let Some(html) = &report.html {
        let page = kopt_report::Format::Html.exporter(None);
        write_report(Some(html), |out| page.render(diagnosis, out))?;
    }
    let exporter = report.format.exporter(report.width);
    write_report(report.output.as_deref(), |out| {
        exporter.render(diagnosis, out)
    })
}

/// kopt's own trace (JSON lines from kopt-tracer): by extension, or by its first record.
fn is_kopt_trace(path: &Path) -> bool {
    if path.extension().is_some_and(|e| e == "jsonl") {
        return true;
    }
    use std::io::Read;
    let mut head = [0u8; 16];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    head[..n].starts_with(b"{\"t\":")
}

/// A chrome-trace JSON (torch.profiler / Kineto): by extension, or by its first byte.
fn is_trace(path: &Path) -> bool {
    if path.extension().is_some_and(|e| e == "json") {
        return true;
    }
    use std::io::Read;
    let mut head = [0u8; 64];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    head[..n].iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

/// One input path: a CSV page, or a .ncu-rep exported through ncu (raw page
/// for the counters, details page for ncu's rules).
fn load(path: &Path, ncu: Option<&Path>) -> anyhow::Result<Vec<(String, NcuFile)>> {
    let label = path.display().to_string();
    if path.extension().is_some_and(|e| e == "ncu-rep") {
        if !path.exists() {
            anyhow::bail!("{label}: no such file");
        }
        let ncu = Ncu::locate(ncu, std::env::var_os("PATH").as_deref())?;
        let raw = ncu.export_csv(path, CsvPage::Raw)?;
        let details = ncu.export_csv(path, CsvPage::Details)?;
        let raw_label = format!("{label} (raw page)");
        let details_label = format!("{label} (details page)");
        return Ok(vec![
            (raw_label.clone(), parse_ncu_csv(&raw, &raw_label)?),
            (
                details_label.clone(),
                parse_ncu_csv(&details, &details_label)?,
            ),
        ]);
    }
    Ok(vec![(label, read_ncu_csv(path)?)])
}
