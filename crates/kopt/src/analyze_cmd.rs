//! `kopt analyze`: read profiler output, diagnose, report.

use std::path::Path;

use kopt_analyze::{analyze, AnalyzeOptions};
use kopt_collect::{CsvPage, Ncu};
use kopt_ingest::{merge_profile, parse_ncu_csv, read_ncu_csv, NcuFile};

use crate::options::AnalyzeRequest;
use crate::output::write_report;

pub fn run(req: &AnalyzeRequest) -> anyhow::Result<()> {
    let mut files = Vec::new();
    for path in &req.files {
        for (label, file) in load(path, req.ncu.as_deref())? {
            files.push((label, file));
        }
    }
    let mut profile = merge_profile(files);
    if let Some(name) = &req.device {
        profile.device.name = name.clone();
        profile.device.resolve_peaks();
    }
    profile.device.apply_measured_peaks(&req.measured_peaks);
    let diagnosis = analyze(&profile, &AnalyzeOptions { top: req.top });
    let exporter = req.format.exporter(req.width);
    write_report(req.output.as_deref(), |out| {
        exporter.render(&diagnosis, out)
    })
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
