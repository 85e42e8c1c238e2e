//! Parsers for profiler output. Nothing here runs a process: converting a
//! `.ncu-rep` report to CSV is `kopt-collect`'s job.

mod error;
pub mod ncu;
pub mod number;
pub mod units;

use std::path::Path;

use kopt_model::{Device, Profile, Source};

pub use error::IngestError;
pub use ncu::{parse_ncu_csv, NcuFile, NcuPage};

/// Read and parse one ncu CSV file from disk.
pub fn read_ncu_csv(path: &Path) -> Result<NcuFile, IngestError> {
    let label = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| IngestError::Io {
        path: label.clone(),
        source,
    })?;
    parse_ncu_csv(&bytes, &label)
}

/// Merge parsed files into one profile. The first device that names itself
/// (the raw page does, the details page does not) describes the workload.
pub fn merge_profile(files: Vec<(String, NcuFile)>) -> Profile {
    let mut device: Option<Device> = None;
    let mut launches = Vec::new();
    let mut sources = Vec::new();
    for (path, file) in files {
        sources.push(Source {
            path,
            format: file.page.as_str().to_string(),
            launches: file.launches.len(),
        });
        if let Some(d) = file.device {
            let better = match &device {
                None => true,
                Some(cur) => file.page == NcuPage::Raw && cur.name.starts_with("unknown"),
            };
            if better {
                device = Some(d);
            }
        }
        launches.extend(file.launches);
    }
    Profile {
        device: device.unwrap_or_else(Device::unknown),
        launches,
        sources,
    }
}
