//! Merging the passes of `kopt profile`: the timing pass has every launch's
//! time, the targeted pass has counters for a sample of launches of the top
//! kernels, the deep pass has ncu's rules for the very top. Counters are
//! extended from the sampled launch to the launches of the same kernel and
//! launch configuration (else the same kernel), keeping each launch's own time.

use std::collections::HashMap;
use std::path::Path;

use kopt_model::{
    kernel_function_name, kernel_match_key, Device, Dim3, KernelLaunch, Profile, Source,
};

use crate::{read_ncu_csv, IngestError, NcuFile};

/// File names of a run folder's passes (written by kopt-collect).
pub const TIMING_CSV: &str = "pass1-timing.csv";
pub const TARGETED_CSV: &str = "pass2-targeted.csv";
pub const DEEP_CSV: &str = "pass3-deep.csv";

pub fn merge_tiered(
    timing: NcuFile,
    targeted: Option<NcuFile>,
    deep: Option<NcuFile>,
    sources: Vec<Source>,
) -> Profile {
    let device: Device = targeted
        .as_ref()
        .and_then(|t| t.device.clone())
        .or(timing.device.clone())
        .unwrap_or_else(Device::unknown);
    let mut launches = timing.launches;
    if let Some(t) = &targeted {
        // Names are matched without namespaces: ncu spells them differently from run to run.
        let by_config: HashMap<(String, Dim3, Dim3), &KernelLaunch> = t
            .launches
            .iter()
            .map(|l| ((kernel_match_key(&l.name), l.grid, l.block), l))
            .collect();
        let by_name: HashMap<String, &KernelLaunch> = t
            .launches
            .iter()
            .map(|l| (kernel_match_key(&l.name), l))
            .collect();
        for l in &mut launches {
            let key = kernel_match_key(&l.name);
            let sample = by_config
                .get(&(key.clone(), l.grid, l.block))
                .or_else(|| by_name.get(&key));
            if let Some(s) = sample {
                let own_time = l.metrics.duration_ns;
                l.metrics = s.metrics.clone();
                l.metrics.duration_ns = own_time.or(s.metrics.duration_ns);
            }
        }
    }
    if let Some(d) = &deep {
        let mut rules_by_fn: HashMap<String, &KernelLaunch> = HashMap::new();
        for l in &d.launches {
            rules_by_fn
                .entry(kernel_function_name(&l.name))
                .or_insert(l);
        }
        for l in &mut launches {
            if let Some(src) = rules_by_fn.get(&kernel_function_name(&l.name)) {
                l.ncu_rules = src.ncu_rules.clone();
                let (m, dm) = (&mut l.metrics, &src.metrics);
                m.shared_conflict_pct_from_rule = dm.shared_conflict_pct_from_rule;
                m.uncoalesced_excess_pct_from_rule = dm.uncoalesced_excess_pct_from_rule;
            }
        }
    }
    Profile {
        device,
        launches,
        sources,
        timeline: None,
    }
}

/// Read a `kopt profile` run folder (`.kopt/runs/<id>/`) back into a profile.
pub fn read_run_folder(dir: &Path) -> Result<Profile, IngestError> {
    let timing_path = dir.join(TIMING_CSV);
    if !timing_path.exists() {
        return Err(IngestError::Format {
            path: dir.display().to_string(),
            message: format!(
                "not a kopt run folder: no {TIMING_CSV} (the timing pass did not finish?)"
            ),
        });
    }
    let mut sources = Vec::new();
    let mut read = |name: &str, format: &str| -> Result<Option<NcuFile>, IngestError> {
        let p = dir.join(name);
        if !p.exists() {
            return Ok(None);
        }
        let f = read_ncu_csv(&p)?;
        sources.push(Source {
            path: p.display().to_string(),
            format: format.to_string(),
            launches: f.launches.len(),
        });
        Ok(Some(f))
    };
    let timing = read(TIMING_CSV, "kopt-profile timing pass (ncu-raw)")?.expect("checked above");
    let targeted = read(TARGETED_CSV, "kopt-profile targeted pass (ncu-raw)")?;
    let deep = read(DEEP_CSV, "kopt-profile deep pass (ncu-details)")?;
    Ok(merge_tiered(timing, targeted, deep, sources))
}
