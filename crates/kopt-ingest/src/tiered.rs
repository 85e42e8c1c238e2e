//! Merging the passes of `kopt profile`: the timing pass (kopt's tracer, or
//! ncu when the tracer cannot run) has every launch's time, the targeted pass has counters for a sample of launches of the top
//! kernels, the deep pass has ncu's rules for the very top. Counters are
//! extended from the sampled launch to the launches of the same kernel and
//! launch configuration (else the same kernel), keeping each launch's own time.

use std::collections::HashMap;
use std::path::Path;

use kopt_model::{
    kernel_function_name, kernel_match_key, Device, Dim3, KernelLaunch, Profile, Source, Timeline,
};

use crate::{read_kopt_trace_set, read_ncu_csv, IngestError, NcuFile};

/// File names of a run folder's passes (written by kopt-collect; the
/// layout is kopt-model's).
pub use kopt_model::run_folder::{DEEP_CSV, TARGETED_CSV, TIMING_CSV, TRACE_FILE as TIMING_TRACE};

/// Pass 1 of a run: every launch with its own time, from ncu or kopt's tracer
/// (then with the timeline, so the trace and the counters feed one diagnosis).
#[derive(Debug, Clone, Default)]
pub struct TimingPass {
    pub launches: Vec<KernelLaunch>,
    pub device: Option<Device>,
    pub timeline: Option<Timeline>,
}

impl From<NcuFile> for TimingPass {
    fn from(f: NcuFile) -> Self {
        TimingPass {
            launches: f.launches,
            device: f.device,
            timeline: None,
        }
    }
}

impl TimingPass {
    /// Pass 1 from kopt's tracer: one launch per kernel record, and the
    /// trace as an input of the report.
    pub fn from_timeline(t: Timeline, path: &str) -> (Self, Source) {
        let mut profile =
            crate::profile_from_timeline(t, path, "kopt-profile timing pass (kopt trace, CUPTI)");
        let source = profile.sources.pop().unwrap_or_else(|| Source {
            path: path.to_string(),
            format: "kopt-profile timing pass (kopt trace, CUPTI)".into(),
            launches: profile.launches.len(),
            excluded: Vec::new(),
        });
        // The tracer's device record names the GPU: the targeted pass's
        // device, when there is one, still wins (see `merge_tiered`).
        let device = Some(profile.device).filter(|d| !d.name.starts_with("unknown"));
        let pass = TimingPass {
            launches: profile.launches,
            device,
            timeline: profile.timeline,
        };
        (pass, source)
    }
}

pub fn merge_tiered(
    timing: impl Into<TimingPass>,
    targeted: Option<NcuFile>,
    deep: Option<NcuFile>,
    sources: Vec<Source>,
) -> Profile {
    let timing: TimingPass = timing.into();
    let device: Device = targeted
        .as_ref()
        .and_then(|t| t.device.clone())
        .or(timing.device.clone())
        .unwrap_or_else(Device::unknown);
    let mut launches = timing.launches;
    if let Some(t) = &targeted {
        // Names are matched without namespaces: ncu spells them differently
        // from run to run, and its demangler differs from the tracer's in
        // small ways (spaces, literals); the function name and launch
        // configuration are the last resort.
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
        let by_function: HashMap<(String, Dim3, Dim3), &KernelLaunch> = t
            .launches
            .iter()
            .map(|l| ((kernel_function_name(&l.name), l.grid, l.block), l))
            .collect();
        for l in &mut launches {
            let key = kernel_match_key(&l.name);
            let sample = by_config
                .get(&(key.clone(), l.grid, l.block))
                .or_else(|| by_name.get(&key))
                .or_else(|| by_function.get(&(kernel_function_name(&l.name), l.grid, l.block)));
            if let Some(s) = sample {
                let own_time = l.metrics.duration_ns;
                let own_stream = l.stream;
                let same_config = s.grid == l.grid && s.block == l.block;
                l.metrics = s.metrics.clone();
                l.metrics.duration_ns = own_time.or(s.metrics.duration_ns);
                // Rates pair the sample's counts with the sample's own time;
                // another configuration's counts pair with nothing here.
                l.metrics.counters_duration_ns = s.metrics.duration_ns;
                l.metrics.counters_from_other_config = !same_config;
                l.stream = own_stream.or(s.stream);
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
        timeline: timing.timeline,
    }
}

/// Read a `kopt profile` run folder (`.kopt/runs/<id>/`) back into a
/// profile: an ncu run's passes (tracer or ncu timing, targeted, deep) or a
/// rocprofv3 run's (`pass1-trace_*.csv`, `pass<N>-counters_*.csv`).
pub fn read_run_folder(dir: &Path) -> Result<Profile, IngestError> {
    let timing_path = dir.join(TIMING_CSV);
    // A run folder kept small (a fixture, an attachment) may hold its
    // trace gzipped; the trace reader tells gzip from its bytes.
    let plain = dir.join(TIMING_TRACE);
    let gzipped = dir.join(format!("{TIMING_TRACE}.gz"));
    let trace_path = if !plain.exists() && gzipped.exists() {
        gzipped
    } else {
        plain
    };
    if !timing_path.exists() && !trace_path.exists() {
        // `kopt profile --backend rocprof`: rocprofv3's CSVs by pass.
        let files = crate::rocprof::run_folder_files(dir);
        if !files.is_empty() {
            return crate::rocprof::read_rocprof_files(&files);
        }
        return Err(IngestError::Format {
            path: dir.display().to_string(),
            message: format!(
                "not a kopt run folder: no {TIMING_TRACE}, {TIMING_CSV} or {}_*.csv (the first pass did not finish?)",
                crate::rocprof::TRACE_PASS
            ),
        });
    }
    let mut sources = Vec::new();
    let timing = if timing_path.exists() {
        None
    } else {
        let trace = read_kopt_trace_set(&trace_path)?;
        let (pass, source) =
            TimingPass::from_timeline(trace.timeline, &trace_path.display().to_string());
        sources.push(source);
        Some(pass)
    };
    let mut read = |name: &str, format: &str| -> Result<Option<NcuFile>, IngestError> {
        let p = dir.join(name);
        if !p.exists() {
            return Ok(None);
        }
        let mut f = read_ncu_csv(&p)?;
        sources.push(Source {
            path: p.display().to_string(),
            format: format.to_string(),
            launches: f.launches.len(),
            excluded: std::mem::take(&mut f.excluded),
        });
        Ok(Some(f))
    };
    let timing = match timing {
        Some(t) => t,
        // Checked above, but the folder may have changed since.
        None => read(TIMING_CSV, "kopt-profile timing pass (ncu-raw)")?
            .ok_or_else(|| {
                IngestError::format(
                    &dir.display().to_string(),
                    format!("{TIMING_CSV} went away while the run folder was read"),
                )
            })?
            .into(),
    };
    let targeted = read(TARGETED_CSV, "kopt-profile targeted pass (ncu-raw)")?;
    let deep = read(DEEP_CSV, "kopt-profile deep pass (ncu-details)")?;
    one_device(
        dir,
        [
            ("the timing pass", timing.device.as_ref()),
            (
                TARGETED_CSV,
                targeted.as_ref().and_then(|t| t.device.as_ref()),
            ),
            (DEEP_CSV, deep.as_ref().and_then(|d| d.device.as_ref())),
        ],
    )?;
    Ok(merge_tiered(timing, targeted, deep, sources))
}

/// A run's passes ran on one GPU: passes of different GPUs copied into one
/// folder would pair one card's counters with another's times (and the
/// report would name only one). Passes whose device is unknown agree with
/// any.
fn one_device(dir: &Path, passes: [(&str, Option<&Device>); 3]) -> Result<(), IngestError> {
    let named: Vec<(&str, &Device)> = passes
        .iter()
        .filter_map(|(pass, d)| Some((*pass, (*d)?)))
        .filter(|(_, d)| !d.name.is_empty() && !d.name.starts_with("unknown"))
        .collect();
    // Two cards of one name can differ (an H100 PCIe's 114 SMs against an
    // SXM's 132): the SM count and compute capability, where both passes
    // say, must agree too.
    let differ = |x: &Device, y: &Device| {
        let both =
            |a: Option<&str>, b: Option<&str>| matches!((a, b), (Some(a), Some(b)) if a != b);
        x.name != y.name
            || matches!((x.sm_count, y.sm_count), (Some(a), Some(b)) if a != b)
            || both(
                x.compute_capability.as_deref(),
                y.compute_capability.as_deref(),
            )
    };
    let said = |d: &Device| match d.sm_count {
        Some(n) => format!("{} ({n} SMs)", crate::echo(&d.name)),
        None => crate::echo(&d.name),
    };
    if let Some(((a, da), (b, db))) = named
        .iter()
        .flat_map(|x| named.iter().map(move |y| (*x, *y)))
        .find(|((_, da), (_, db))| differ(da, db))
    {
        return Err(IngestError::format(
            &dir.display().to_string(),
            format!(
                "{a} ran on {} and {b} on {}: one run folder holds one GPU's passes (profile again, or analyze each pass's file on its own)",
                said(da),
                said(db)
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(rel: &str) -> std::path::PathBuf {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures")
            .join(rel)
    }

    #[test]
    fn passes_of_one_name_but_other_sm_counts_are_refused() {
        // Round seven: a 114-SM pass beside 132-SM ones, one name, was
        // merged and reported with the 114-SM peaks.
        let d = tempfile::tempdir().unwrap();
        let run = fixture("moe-route-h200-profile");
        for f in ["pass1-timing.csv", "pass3-deep.csv", "run.json"] {
            std::fs::copy(run.join(f), d.path().join(f)).unwrap();
        }
        let text = std::fs::read_to_string(run.join("pass2-targeted.csv")).unwrap();
        let mut rows: Vec<String> = Vec::new();
        let mut column = None;
        for line in text.lines() {
            let cells: Vec<&str> = line.split("\",\"").collect();
            if line.starts_with("\"ID\"") {
                column = cells
                    .iter()
                    .position(|c| c.trim_matches('"') == "device__attribute_multiprocessor_count");
            }
            match column {
                Some(i) if line.starts_with("\"0\"") || line.starts_with("\"1") => {
                    let mut cells: Vec<String> = cells.iter().map(|c| c.to_string()).collect();
                    cells[i] = "114".into();
                    rows.push(cells.join("\",\""));
                }
                _ => rows.push(line.to_string()),
            }
        }
        std::fs::write(d.path().join("pass2-targeted.csv"), rows.join("\n")).unwrap();
        let e = read_run_folder(d.path()).unwrap_err().to_string();
        assert!(e.contains("114 SMs") && e.contains("132 SMs"), "{e}");
    }

    #[test]
    fn passes_of_two_gpus_in_one_folder_are_refused_by_name() {
        let d = tempfile::tempdir().unwrap();
        let h200 = fixture("labeled-suite-h200-profile");
        std::fs::copy(
            h200.join("profile_pass1_timing.csv"),
            d.path().join(TIMING_CSV),
        )
        .unwrap();
        std::fs::copy(
            h200.join("profile_pass2_targeted.csv"),
            d.path().join(TARGETED_CSV),
        )
        .unwrap();
        let p = read_run_folder(d.path()).unwrap();
        assert!(p.device.name.contains("H200"), "{}", p.device.name);
        std::fs::copy(
            fixture("labeled-suite-h100/ncu_raw_base.csv"),
            d.path().join(TARGETED_CSV),
        )
        .unwrap();
        let e = read_run_folder(d.path()).unwrap_err().to_string();
        assert!(
            e.contains("H100") && e.contains("H200") && e.contains("one GPU"),
            "{e}"
        );
    }
}
