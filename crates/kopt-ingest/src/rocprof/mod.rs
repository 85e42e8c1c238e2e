//! AMD Instinct profiler output: rocprofv3 CSV (kernel trace, counter
//! collection in its long one-row-per-counter format, kernel stats, memory
//! copy and HIP API traces, agent info), legacy rocprof v1 / v2 (results,
//! `--stats`, `--pmc`), rocprof-compute workload folders (pmc_perf*.csv,
//! SQ_*.csv, timestamps.csv, sysinfo.csv) and rocminfo text.
//!
//! Files of one run are merged into one [`Profile`]: counter passes are
//! joined onto the kernel trace by kernel name and occurrence (the n-th
//! dispatch of a kernel in one pass is its n-th in the others), so passes
//! from separate runs of a deterministic workload line up.

mod json;
mod metrics;
mod parse;
mod rocpd;
mod table;

pub use json::{parse_rocprofv3_json, sniff_json};
pub use rocpd::{parse_rocpd, read_rocpd, SQLITE_MAGIC};

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use kopt_model::{
    ActivityKind, AmdDevice, ApiCall, Device, Dim3, GpuActivity, KernelLaunch, PeakSource, Profile,
    Source, Timeline,
};

use crate::IngestError;

/// A kernel-stats file alone is expanded to this many launches at most
/// (one per call, each of the mean duration).
pub const MAX_STATS_LAUNCHES: u64 = 10_000;

/// One kernel dispatch as rocprof printed it; the grid is in work-items.
#[derive(Debug, Clone, PartialEq)]
pub struct Dispatch {
    pub id: u64,
    pub name: String,
    pub name_cut: bool,
    pub agent: Option<String>,
    pub queue: Option<u64>,
    pub stream: Option<u64>,
    pub correlation: Option<u64>,
    pub grid: [u64; 3],
    pub workgroup: [u64; 3],
    pub lds_bytes: Option<f64>,
    pub scratch_bytes: Option<f64>,
    pub arch_vgpr: Option<f64>,
    pub accum_vgpr: Option<f64>,
    pub sgpr: Option<f64>,
    pub wave_size: Option<f64>,
    pub start_ns: Option<i64>,
    pub end_ns: Option<i64>,
    /// Counter name and value, in the file's order.
    pub counters: Vec<(String, f64)>,
    /// The line the dispatch came from.
    pub line: u64,
}

impl Dispatch {
    pub fn counter(&self, name: &str) -> Option<f64> {
        self.counters
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
    }

    /// Per-instance counters (`TCC_HIT[3]`) summed into `TCC_HIT_sum` where
    /// the file has no sum; level accumulations renamed by their pass
    /// (SQ_ACCUM_PREV_HIRES means waves in the SQ_LEVEL_WAVES pass and
    /// latency in SQ_INST_LEVEL_*), so passes merge without clashing.
    pub(crate) fn finish_counters(&mut self) {
        // Hashed, in the counters' order: a dispatch may have tens of
        // thousands of per-instance counters.
        let mut sums: Vec<(String, f64)> = Vec::new();
        let mut sum_at: HashMap<String, usize> = HashMap::new();
        for (name, v) in &self.counters {
            if let Some((base, rest)) = name.split_once('[') {
                if rest.ends_with(']') {
                    let key = format!("{base}_sum");
                    match sum_at.get(&key) {
                        Some(&i) => sums[i].1 += v,
                        None => {
                            sum_at.insert(key.clone(), sums.len());
                            sums.push((key, *v));
                        }
                    }
                }
            }
        }
        let have: std::collections::HashSet<String> =
            self.counters.iter().map(|(n, _)| n.clone()).collect();
        for (k, v) in sums {
            if !have.contains(&k) {
                self.counters.push((k, v));
            }
        }
        let level = self
            .counters
            .iter()
            .map(|(n, _)| n.as_str())
            .find(|n| {
                *n == "SQ_LEVEL_WAVES" || n.starts_with("SQ_INST_LEVEL_") || *n == "SQ_IFETCH_LEVEL"
            })
            .map(str::to_string);
        if let Some(level) = level {
            for (n, _) in &mut self.counters {
                if n == "SQ_ACCUM_PREV_HIRES" || n == "GRBM_GUI_ACTIVE" {
                    *n = format!("{n}@{level}");
                }
            }
        }
    }

    fn function(&self) -> String {
        kopt_model::kernel_function_name(&self.name)
    }
}

/// One row of a kernel-stats file (`*_kernel_stats.csv`, `results.stats.csv`).
#[derive(Debug, Clone, PartialEq)]
pub struct KernelStat {
    pub name: String,
    pub calls: u64,
    pub total_ns: f64,
}

/// A GPU agent as agent_info.csv, sysinfo.csv or rocminfo describe it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentInfo {
    pub product: String,
    pub arch: Option<String>,
    pub node: Option<String>,
    pub cus: Option<u32>,
    pub sclk_mhz: Option<f64>,
    pub mclk_mhz: Option<f64>,
    pub wave_size: Option<u32>,
    pub lds_bytes_per_cu: Option<u64>,
    pub max_waves_per_cu: Option<u32>,
    pub xcds: Option<u32>,
    pub l2_channels: Option<u32>,
    pub l2_bytes: Option<u64>,
    pub hbm_bytes_per_s: Option<f64>,
    pub memory_bytes: Option<u64>,
    pub source: String,
    /// What could not be read from the description (then kopt's table
    /// fills in), said where the input is named.
    pub unread: Option<String>,
}

/// What one AMD file holds.
#[derive(Debug, Clone, PartialEq)]
pub enum AmdFile {
    /// Per-dispatch rows, with the flavour they came in.
    Dispatches(&'static str, Vec<Dispatch>),
    Stats(Vec<KernelStat>),
    Copies(Vec<GpuActivity>),
    Api(Vec<ApiCall>),
    Agents(Vec<AgentInfo>),
}

impl AmdFile {
    pub fn describe(&self) -> &'static str {
        match self {
            AmdFile::Dispatches(f, _) => f,
            AmdFile::Stats(_) => "rocprof kernel stats",
            AmdFile::Copies(_) => "rocprofv3 memory copy trace",
            AmdFile::Api(_) => "rocprofv3 HIP API trace",
            AmdFile::Agents(_) => "AMD agent info",
        }
    }
}

/// Does the start of a file look like AMD profiler output kopt reads?
/// (`head`: the first bytes.) Any SQLite database counts: the rocpd reader
/// says so when it lacks rocpd's views.
pub fn sniff(head: &[u8]) -> bool {
    if head.starts_with(SQLITE_MAGIC) {
        return true;
    }
    if sniff_json(head) {
        return true;
    }
    let text = String::from_utf8_lossy(head);
    if text.starts_with("CMD: rocminfo") || text.contains("HSA System Attributes") {
        return true;
    }
    let first = text
        .trim_start_matches('\u{feff}')
        .lines()
        .next()
        .unwrap_or("");
    let has = |c: &str| first.contains(c);
    has("Kernel_Name")
        || has("KernelName")
        || has("Counter_Name")
        || (has("Agent_Type") && has("Cu_Count"))
        || (has("gpu_model") && has("gpu_arch"))
        || (has("Function") && has("Start_Timestamp"))
        || (has("Direction") && has("Start_Timestamp"))
        || (has("\"Name\"") && has("Calls") && has("TotalDurationNs"))
}

/// Parse one AMD file's bytes (CSV of any flavour, or rocminfo text).
pub fn parse_rocprof(bytes: &[u8], label: &str) -> Result<AmdFile, IngestError> {
    let head = &bytes[..bytes.len().min(4096)];
    let text = String::from_utf8_lossy(head);
    if text.starts_with("CMD: rocminfo") || text.contains("HSA System Attributes") {
        let all = String::from_utf8_lossy(bytes);
        return match parse::rocminfo(&all) {
            Some(a) => Ok(AmdFile::Agents(vec![a])),
            None => Err(IngestError::format(
                label,
                "rocminfo output without a GPU agent",
            )),
        };
    }
    parse::parse_csv(bytes, label)
}

/// Parse one AMD input from disk into what it holds: a rocpd database is
/// read in place (by its SQLite header), rocprofv3 JSON and every CSV or text
/// flavour from their bytes.
pub fn read_rocprof_file(path: &Path) -> Result<Vec<AmdFile>, IngestError> {
    let label = path.display().to_string();
    let mut head = [0u8; 16];
    let n = {
        let mut f = crate::open_regular(path, &label)?;
        crate::read_up_to(&mut f, &mut head).map_err(|source| IngestError::Io {
            path: label.clone(),
            source,
        })?
    };
    if head[..n].starts_with(SQLITE_MAGIC) {
        return read_rocpd(path, &label);
    }
    let bytes = crate::read_regular(path, &label)?;
    if sniff_json(&bytes[..bytes.len().min(4096)]) {
        return parse_rocprofv3_json(&bytes, &label);
    }
    Ok(vec![parse_rocprof(&bytes, &label)?])
}

/// Read, parse and merge AMD files of one run.
pub fn read_rocprof_files(paths: &[PathBuf]) -> Result<Profile, IngestError> {
    let mut files = Vec::new();
    for p in paths {
        let label = p.display().to_string();
        for f in read_rocprof_file(p)? {
            files.push((label.clone(), f));
        }
    }
    merge_rocprof(files, true)
}

/// The first pass of a `kopt profile --backend rocprof` run folder: the
/// kernel trace, written as `pass1-trace_<kind>.csv` (kopt-collect's
/// `RocPass::file_stem`; the counter passes are `pass<N>-counters`).
pub const TRACE_PASS: &str = "pass1-trace";

/// The rocprofv3 CSVs of a `kopt profile --backend rocprof` run folder, in
/// the order `kopt profile` read them: by pass number, then by path. Like
/// kopt-collect's `rocprof::output_files`, folders up to three levels down
/// count (rocprofv3 may add `%hostname%/%pid%`-style folders); links and
/// anything but regular files are left alone. Empty when the kernel-trace
/// pass left nothing: not a rocprofv3 run folder.
pub fn run_folder_files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<(u32, PathBuf)> = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0)];
    while let Some((d, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() && depth < 3 {
                stack.push((e.path(), depth + 1));
            } else if ft.is_file() {
                if let Some(n) = pass_number(&e.file_name().to_string_lossy()) {
                    out.push((n, e.path()));
                }
            }
        }
    }
    if !out.iter().any(|(n, _)| *n == 1) {
        return Vec::new();
    }
    out.sort();
    out.into_iter().map(|(_, p)| p).collect()
}

/// `pass3-counters_counter_collection.csv` -> 3; `pass1-trace_*.csv` -> 1;
/// anything else (an ncu pass's `pass2-targeted.csv`, a log) -> None.
fn pass_number(name: &str) -> Option<u32> {
    let (stem, _) = name.strip_suffix(".csv")?.split_once('_')?;
    if stem == TRACE_PASS {
        return Some(1);
    }
    let n = stem.strip_prefix("pass")?.strip_suffix("-counters")?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok().filter(|n| *n >= 2)
}

/// Is `dir` a rocprof-compute (Omniperf) workload folder?
pub fn is_rocprof_compute_dir(dir: &Path) -> bool {
    compute_files(dir).is_ok_and(|f| f.iter().any(|p| file_name(p).starts_with("pmc_perf")))
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The files of a workload folder kopt reads, pmc_perf first.
fn compute_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = file_name(p);
            n.ends_with(".csv")
                && (n.starts_with("pmc_perf")
                    || n.starts_with("SQ_")
                    || n == "timestamps.csv"
                    || n == "sysinfo.csv")
        })
        .collect();
    out.sort_by_key(|p| {
        let n = file_name(p);
        (!n.starts_with("pmc_perf"), n != "timestamps.csv", n)
    });
    Ok(out)
}

/// Read a rocprof-compute workload folder: pmc_perf*.csv, the SQ_*.csv
/// level passes, timestamps.csv and sysinfo.csv. Its dispatches ran
/// serialised under counter collection, so no timeline is built.
pub fn read_rocprof_compute_dir(dir: &Path) -> Result<Profile, IngestError> {
    let label = dir.display().to_string();
    let paths = compute_files(dir).map_err(|source| IngestError::Io {
        path: label.clone(),
        source,
    })?;
    if !paths.iter().any(|p| file_name(p).starts_with("pmc_perf")) {
        return Err(IngestError::format(
            &label,
            "not a rocprof-compute workload folder (no pmc_perf*.csv)",
        ));
    }
    let mut files = Vec::new();
    for p in &paths {
        let l = p.display().to_string();
        let bytes = crate::read_regular(p, &l)?;
        files.push((l.clone(), parse::parse_csv(&bytes, &l)?));
    }
    merge_rocprof(files, false)
}

/// The device the agents describe (the first GPU agent), with the table's
/// figures for what the files leave out.
pub fn amd_device(agent: Option<&AgentInfo>) -> Device {
    let Some(a) = agent else {
        let mut d = Device::unknown();
        d.name =
            "unknown GPU (AMD; no agent_info.csv, sysinfo.csv or rocminfo among the inputs)".into();
        d.amd = Some(AmdDevice {
            product: String::new(),
            wave_size: 64,
            source: "no device description in the inputs".into(),
            ..AmdDevice::default()
        });
        return d;
    };
    let spec = kopt_model::amd_spec(&a.product, a.cus, a.sclk_mhz)
        .or_else(|| kopt_model::amd_spec(a.arch.as_deref().unwrap_or(""), a.cus, a.sclk_mhz));
    let mut d = Device::unknown();
    d.name = match (spec, a.product.is_empty()) {
        (Some(s), _) => s.name.to_string(),
        (None, false) => a.product.clone(),
        (None, true) => format!(
            "AMD GPU ({})",
            a.arch.as_deref().unwrap_or("unknown gfx target")
        ),
    };
    d.sm_count = a.cus.or(spec.map(|s| s.cus));
    d.sm_clock_hz = a
        .sclk_mhz
        .filter(|v| *v > 0.0)
        .or(spec.map(|s| s.max_sclk_mhz))
        .map(|mhz| mhz * 1e6);
    d.mem_clock_hz = None;
    d.l2_bytes = a.l2_bytes.or(spec.map(|s| s.l2_bytes));
    d.memory_bytes = a.memory_bytes.or(spec.map(|s| s.memory_bytes));
    d.resolve_peaks();
    if let Some(bw) = a.hbm_bytes_per_s.filter(|v| *v > 0.0) {
        d.peaks.dram_bytes_per_s = Some(bw);
        d.peak_source = PeakSource::DeviceAttributes;
    }
    let from = |file: bool| {
        if file {
            a.source.as_str()
        } else {
            "kopt's AMD table"
        }
    };
    d.amd = Some(AmdDevice {
        product: a.product.clone(),
        arch: a.arch.clone().or(spec.map(|s| s.arch.to_string())),
        wave_size: a.wave_size.unwrap_or(64),
        lds_bytes_per_cu: a.lds_bytes_per_cu.or(spec.map(|s| s.lds_bytes_per_cu)),
        max_waves_per_cu: a.max_waves_per_cu.or(spec.map(|s| s.max_waves_per_cu)),
        xcds: a.xcds.or(spec.map(|s| s.xcds)),
        l2_channels: a.l2_channels.or(spec.map(|s| s.l2_channels)),
        vl1d_bytes_per_clock: spec
            .map(|s| s.vl1d_bytes_per_clock)
            .or(match a.arch.as_deref() {
                Some("gfx90a") | Some("gfx908") => Some(64),
                Some(_) => Some(128),
                None => None,
            }),
        fp8_flops: spec.and_then(|s| s.fp8_matrix_flops),
        source: {
            let table = spec.map_or("nowhere (part not in kopt's AMD table)".to_string(), |s| {
                format!("{}: {}", from(false), s.source)
            });
            match &a.unread {
                // The name came from the file, the figures did not.
                Some(why) => format!(
                    "{} (name only: {why}); CUs, clock, peaks and the rest from {table}",
                    from(true)
                ),
                None => format!(
                    "{} (CUs, clock{}); peaks and the rest from {table}",
                    from(true),
                    if a.hbm_bytes_per_s.is_some() {
                        ", HBM bandwidth"
                    } else {
                        ""
                    }
                ),
            }
        },
    });
    d
}

/// Dispatches joined by kernel name and occurrence.
fn occurrence_keys(ds: &[Dispatch]) -> Vec<(String, usize)> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    ds.iter()
        .map(|d| {
            let f = d.function();
            let n = seen.entry(f.clone()).or_insert(0);
            *n += 1;
            (f, *n - 1)
        })
        .collect()
}

/// The most work-items an AMD workgroup holds (HIP's limit on every CDNA
/// and RDNA GPU).
const MAX_WORKGROUP: u64 = 1024;

/// Values no AMD GPU reports, checked where every AMD format meets (CSV,
/// JSON, rocpd): a dispatch's workgroup of 0 or more than 1024 work-items,
/// an empty grid, negative or non-finite register, LDS or scratch sizes,
/// and counters that are negative or not finite (instances whose sum
/// overflowed) are errors naming the kernel and line; an agent's CU count,
/// wave size or clock out of range is left unknown, and the input says so.
fn check_plausible(label: &str, f: &mut AmdFile) -> Result<(), IngestError> {
    match f {
        AmdFile::Dispatches(_, ds) => {
            for d in ds.iter() {
                let at = |why: String| {
                    IngestError::at(
                        label,
                        d.line,
                        format!("kernel {}: {why}", crate::echo(&d.name)),
                    )
                };
                let wg = d.workgroup.iter().try_fold(1u64, |a, &b| a.checked_mul(b));
                match wg {
                    Some(n) if (1..=MAX_WORKGROUP).contains(&n) => {}
                    _ => {
                        return Err(at(format!(
                        "workgroup size {:?}: an AMD workgroup has 1 to {MAX_WORKGROUP} work-items",
                        d.workgroup
                    )))
                    }
                }
                if d.grid.contains(&0) {
                    return Err(at(format!("grid size {:?}: an empty grid", d.grid)));
                }
                for (what, v) in [
                    ("LDS bytes", d.lds_bytes),
                    ("scratch bytes", d.scratch_bytes),
                    ("VGPRs", d.arch_vgpr),
                    ("AGPRs", d.accum_vgpr),
                    ("SGPRs", d.sgpr),
                ] {
                    if let Some(v) = v.filter(|v| !(v.is_finite() && *v >= 0.0)) {
                        return Err(at(format!(
                            "{what} is {}: negative or not a number",
                            kopt_model::figure::as_read(v)
                        )));
                    }
                }
                if let Some((n, v)) = d
                    .counters
                    .iter()
                    .find(|(_, v)| !(v.is_finite() && *v >= 0.0))
                {
                    return Err(at(format!(
                        "counter {} is {}: counters are finite and not negative (instances whose sum overflows?)",
                        crate::echo(n),
                        kopt_model::figure::as_read(*v)
                    )));
                }
            }
        }
        AmdFile::Agents(agents) => {
            for a in agents.iter_mut() {
                let mut dropped = Vec::new();
                if let Some(n) = a.cus.filter(|n| !(1..=1024).contains(n)) {
                    dropped.push(format!("{n} CUs"));
                    a.cus = None;
                }
                if let Some(n) = a.wave_size.filter(|n| *n != 32 && *n != 64) {
                    dropped.push(format!("wave size {n}"));
                    a.wave_size = None;
                }
                if let Some(n) = a.xcds.filter(|n| !(1..=64).contains(n)) {
                    dropped.push(format!("{n} XCDs"));
                    a.xcds = None;
                }
                // Sizes and counts beyond any GPU (an LDS of 1.8e19 bytes
                // per CU reached the JSON as fact): left unknown.
                for (what, slot, lo, hi) in [
                    (
                        "LDS bytes per CU",
                        &mut a.lds_bytes_per_cu,
                        1 << 10,
                        1 << 20,
                    ),
                    ("L2 bytes", &mut a.l2_bytes, 1 << 10, 1 << 30),
                    ("memory bytes", &mut a.memory_bytes, 1 << 20, 1 << 44),
                ] {
                    if let Some(v) = slot.filter(|v| !(lo..=hi).contains(v)) {
                        dropped.push(format!("{what} {v}"));
                        *slot = None;
                    }
                }
                for (what, slot, hi) in [
                    ("max waves per CU", &mut a.max_waves_per_cu, 64),
                    ("L2 channels", &mut a.l2_channels, 1024),
                ] {
                    if let Some(v) = slot.filter(|v| !(1..=hi).contains(v)) {
                        dropped.push(format!("{what} {v}"));
                        *slot = None;
                    }
                }
                if let Some(v) = a
                    .hbm_bytes_per_s
                    .filter(|v| !(v.is_finite() && *v > 0.0 && *v <= crate::ncu::MAX_BYTES_PER_S))
                {
                    dropped.push(format!("HBM {} bytes/s", kopt_model::figure::as_read(v)));
                    a.hbm_bytes_per_s = None;
                }
                for (what, slot) in [("SCLK", &mut a.sclk_mhz), ("MCLK", &mut a.mclk_mhz)] {
                    if let Some(v) = slot.filter(|v| !(v.is_finite() && *v > 0.0 && *v <= 10_000.0))
                    {
                        dropped.push(format!("{what} {} MHz", kopt_model::figure::as_read(v)));
                        *slot = None;
                    }
                }
                if !dropped.is_empty() {
                    let why = format!("implausible, left unknown: {}", dropped.join(", "));
                    a.unread = Some(match a.unread.take() {
                        Some(u) => format!("{u}; {why}"),
                        None => why,
                    });
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Merge parsed AMD files into one profile. `timeline`: build the timeline
/// from a kernel trace (false for counter-replay captures).
pub fn merge_rocprof(
    mut files: Vec<(String, AmdFile)>,
    timeline: bool,
) -> Result<Profile, IngestError> {
    for (label, f) in files.iter_mut() {
        check_plausible(label, f)?;
    }
    let mut sources = Sources::default();
    let Sorted {
        agents,
        traces,
        mut counted,
        stats,
        copies,
        api,
    } = sort_files(files, &mut sources);
    let device = amd_device(agents.first());
    let model = metrics::Model::of(&device);

    // The base: the kernel trace where there is one (timestamps not
    // stretched by counter replay), else the first counter pass.
    let trace_based = traces
        .iter()
        .any(|(_, _, ds)| ds.iter().any(|d| d.start_ns.is_some()));
    let mut base: Vec<Dispatch> = Vec::new();
    let mut base_rest: Vec<(String, &'static str, Vec<Dispatch>)> = Vec::new();
    if trace_based {
        for (label, flavor, ds) in traces {
            sources.add(&label, flavor.to_string(), ds.len());
            base.extend(ds);
        }
    } else {
        base_rest = traces;
        if !counted.is_empty() {
            let (label, flavor, ds) = counted.remove(0);
            sources.add(&label, flavor.to_string(), ds.len());
            base = ds;
        }
    }
    join_passes(
        &mut base,
        counted.into_iter().chain(base_rest),
        &mut sources,
    );
    // Each dispatch becomes a launch record: the timeline's budget holds
    // for AMD's traces as for the others.
    let label = sources
        .iter()
        .find(|s| s.launches > 0)
        .map_or_else(|| "rocprof input".to_string(), |s| s.path.clone());
    crate::budget::check_activity_count(base.len() + copies.len(), &label)?;

    let mut launches: Vec<KernelLaunch> = base
        .iter()
        .map(|d| {
            let wg = metrics::workgroups(d);
            let dim = |v: [u64; 3]| Dim3 {
                x: v[0].min(u32::MAX as u64) as u32,
                y: v[1].min(u32::MAX as u64) as u32,
                z: v[2].min(u32::MAX as u64) as u32,
            };
            KernelLaunch {
                id: d.id,
                name: d.name.clone(),
                grid: dim(wg),
                block: dim(d.workgroup),
                stream: d.stream.or(d.queue),
                metrics: metrics::metrics(d, &model),
                ncu_rules: Vec::new(),
            }
        })
        .collect();

    // Durations estimated from GRBM_GUI_ACTIVE where timestamps were unusable: said.
    let estimated = base
        .iter()
        .filter(|d| !matches!((d.start_ns, d.end_ns), (Some(s), Some(e)) if e > s))
        .filter(|d| metrics::grbm_duration_ns(d, &model).is_some())
        .count();
    // The notes go on the first file with launches.
    let label = sources
        .iter()
        .find(|s| s.launches > 0)
        .map(|s| s.path.clone())
        .unwrap_or_default();
    if estimated > 0 {
        sources.extra(
            &label,
            "durations".into(),
            format!(
                "{estimated} dispatch duration(s) estimated from GRBM_GUI_ACTIVE cycles at SCLK: their timestamps are unusable (End_Timestamp not after Start_Timestamp; rounded?)"
            ),
        );
    }

    // Timestamps out of order and nothing to estimate from: no duration,
    // left out of the kernel times; said, with the first one's line.
    let mut no_duration = base.iter().filter(|d| {
        matches!((d.start_ns, d.end_ns), (Some(s), Some(e)) if e <= s)
            && metrics::grbm_duration_ns(d, &model).is_none()
    });
    if let Some(first) = no_duration.next() {
        sources.extra(
            &label,
            "durations".into(),
            format!(
                "{} dispatch(es) left without a duration, the first at line {}: End_Timestamp not after Start_Timestamp, and no GRBM_GUI_ACTIVE count to estimate it from",
                1 + no_duration.count(),
                first.line
            ),
        );
    }

    let mut tl = None;
    if timeline && trace_based {
        tl = Some(timeline_of(&base, &launches, copies, api, &device));
    }

    // Stats only where no dispatch file gives the launches one by one.
    expand_stats(stats, &mut launches, &mut sources, &device)?;
    if launches.iter().all(|l| l.metrics.duration_ns.is_none())
        && tl.as_ref().is_none_or(|t| t.activities.is_empty())
    {
        // The file the dispatches came from, else every input.
        let label = match sources.iter().find(|s| s.launches > 0) {
            Some(s) => s.path.clone(),
            None => {
                let mut paths: Vec<&str> = Vec::new();
                for s in sources.iter() {
                    if !paths.contains(&s.path.as_str()) {
                        paths.push(&s.path);
                    }
                }
                paths.join(", ")
            }
        };
        let why = if launches.is_empty() {
            "no kernel dispatches"
        } else {
            "no dispatch with usable timestamps (End_Timestamp after Start_Timestamp; rounded or hand-edited timestamps leave none)"
        };
        return Err(IngestError::format(&label, why.to_string()));
    }
    // Launch ids unique within the profile.
    let mut seen = std::collections::HashSet::new();
    if !launches.iter().all(|l| seen.insert(l.id)) {
        for (i, l) in launches.iter_mut().enumerate() {
            l.id = i as u64;
        }
    }
    Ok(Profile {
        device,
        launches,
        sources: sources.per_file(),
        timeline: tl,
    })
}

/// The merge's inputs sorted by kind: dispatch files without counters
/// (traces) and with them, stats, copies, API calls and agents.
struct Sorted {
    agents: Vec<AgentInfo>,
    traces: Vec<(String, &'static str, Vec<Dispatch>)>,
    counted: Vec<(String, &'static str, Vec<Dispatch>)>,
    stats: Vec<(String, Vec<KernelStat>)>,
    copies: Vec<GpuActivity>,
    api: Vec<ApiCall>,
}

fn sort_files(files: Vec<(String, AmdFile)>, sources: &mut Sources) -> Sorted {
    let mut agents: Vec<AgentInfo> = Vec::new();
    let mut traces: Vec<(String, &'static str, Vec<Dispatch>)> = Vec::new();
    let mut counted: Vec<(String, &'static str, Vec<Dispatch>)> = Vec::new();
    let mut stats: Vec<(String, Vec<KernelStat>)> = Vec::new();
    let mut copies = Vec::new();
    let mut api = Vec::new();
    for (label, f) in files {
        let what = f.describe();
        match f {
            AmdFile::Dispatches(flavor, ds) => {
                if ds.iter().all(|d| d.counters.is_empty()) {
                    traces.push((label, flavor, ds));
                } else {
                    counted.push((label, flavor, ds));
                }
            }
            AmdFile::Stats(s) => stats.push((label, s)),
            AmdFile::Copies(c) => {
                let n = c.len();
                let extra = format!("{n} memory cop{}", if n == 1 { "y" } else { "ies" });
                sources.extra(&label, what.to_string(), extra);
                copies.extend(c);
            }
            AmdFile::Api(a) => {
                let n = a.len();
                let extra = format!("{n} HIP API call{}", if n == 1 { "" } else { "s" });
                sources.extra(&label, what.to_string(), extra);
                api.extend(a);
            }
            AmdFile::Agents(a) => {
                let from = a.first().map_or("no GPU agent", |a| a.source.as_str());
                let (format, extra) = match a.first().and_then(|a| a.unread.as_deref()) {
                    Some(why) => (
                        format!("{what} ({from}; {why})"),
                        format!("agent info ({why})"),
                    ),
                    None => (format!("{what} ({from})"), "agent info".to_string()),
                };
                sources.extra(&label, format, extra);
                agents.extend(a);
            }
        }
    }
    Sorted {
        agents,
        traces,
        counted,
        stats,
        copies,
        api,
    }
}

/// Counter passes (and, for a counter base, timestamp-only files) joined
/// onto the base's dispatches by kernel occurrence.
fn join_passes(
    base: &mut [Dispatch],
    passes: impl Iterator<Item = (String, &'static str, Vec<Dispatch>)>,
    sources: &mut Sources,
) {
    let keys = occurrence_keys(base);
    let index: HashMap<(String, usize), usize> =
        keys.into_iter().enumerate().map(|(i, k)| (k, i)).collect();
    for (label, flavor, ds) in passes {
        let mut joined = 0usize;
        for (d, key) in ds.iter().zip(occurrence_keys(&ds)) {
            let Some(&i) = index.get(&key) else { continue };
            joined += 1;
            let b = &mut base[i];
            // A set, not a search per counter: linear in the counters.
            let mut have: std::collections::HashSet<String> =
                b.counters.iter().map(|(n, _)| n.clone()).collect();
            for (n, v) in &d.counters {
                if have.insert(n.clone()) {
                    b.counters.push((n.clone(), *v));
                }
            }
            if b.start_ns.is_none() && d.start_ns.is_some() {
                b.start_ns = d.start_ns;
                b.end_ns = d.end_ns;
            }
        }
        let note = if joined < ds.len() {
            format!(
                "{flavor}; joined onto the dispatches of the base file: {joined} of {} ({} with no matching kernel occurrence left out)",
                ds.len(),
                ds.len() - joined
            )
        } else {
            format!("{flavor}; joined onto the dispatches of the base file")
        };
        sources.add(&label, note, 0);
    }
}

/// The timeline of a kernel trace: its dispatches as kernels, with the
/// copies and API calls.
fn timeline_of(
    base: &[Dispatch],
    launches: &[KernelLaunch],
    copies: Vec<GpuActivity>,
    mut api: Vec<ApiCall>,
    device: &kopt_model::Device,
) -> Timeline {
    let mut activities: Vec<GpuActivity> = base
        .iter()
        .zip(launches)
        .filter_map(|(d, l)| {
            Some(GpuActivity {
                kind: ActivityKind::Kernel,
                name: d.name.clone(),
                start_ns: d.start_ns?,
                end_ns: d.end_ns?.max(d.start_ns?),
                device: d
                    .agent
                    .as_deref()
                    .map_or(0, |a| a.trim_start_matches("Agent ").parse().unwrap_or(0)),
                stream: d.stream.or(d.queue).unwrap_or(0),
                correlation: d.correlation.unwrap_or(d.id),
                grid: Some(l.grid),
                block: Some(l.block),
                bytes: None,
                copy: None,
            })
        })
        .collect();
    activities.extend(copies);
    activities.sort_by_key(|a| a.start_ns);
    api.sort_by_key(|c| c.start_ns);
    Timeline {
        activities,
        api_calls: api,
        device_name: Some(device.name.clone()),
        sm_count: device.sm_count,
        whole_program: false,
        ..Timeline::default()
    }
}

/// Stats files expand into launches at each kernel's mean duration, only
/// where no dispatch file gives the launches one by one.
fn expand_stats(
    stats: Vec<(String, Vec<KernelStat>)>,
    launches: &mut Vec<KernelLaunch>,
    sources: &mut Sources,
    device: &kopt_model::Device,
) -> Result<(), IngestError> {
    for (label, s) in stats {
        if !launches.is_empty() {
            sources.add(
                &label,
                "rocprof kernel stats (summary; the per-dispatch file gives the launches)".into(),
                0,
            );
            continue;
        }
        let calls: u64 = s.iter().map(|k| k.calls).fold(0u64, u64::saturating_add);
        if calls > MAX_STATS_LAUNCHES {
            return Err(IngestError::format(
                &label,
                format!(
                    "kernel stats for {calls} calls: kopt expands a stats file alone into at most {MAX_STATS_LAUNCHES} launches; give the per-dispatch kernel trace (*_kernel_trace.csv, results.csv) instead"
                ),
            ));
        }
        let before = launches.len();
        for k in &s {
            let mean = if k.calls > 0 {
                k.total_ns / k.calls as f64
            } else {
                0.0
            };
            for _ in 0..k.calls {
                launches.push(KernelLaunch {
                    id: launches.len() as u64,
                    name: k.name.clone(),
                    grid: Dim3::default(),
                    block: Dim3::default(),
                    stream: None,
                    metrics: kopt_model::Metrics {
                        duration_ns: Some(mean),
                        sm_count: device.sm_count.map(f64::from),
                        wavefront_size: Some(64.0),
                        ..Default::default()
                    },
                    ncu_rules: Vec::new(),
                });
            }
        }
        sources.add(
            &label,
            "rocprof kernel stats (each call at the kernel's mean duration; no grid, no counters)"
                .into(),
            launches.len() - before,
        );
    }
    Ok(())
}

/// The inputs of a merge, part by part: a file that holds several parts (a
/// rocpd database, rocprofv3 JSON: dispatches, agents, copies, API calls)
/// is still one input.
#[derive(Default)]
struct Sources(Vec<(Source, Option<String>)>);

impl Sources {
    /// A part that stands for its file: dispatches, stats, a counter pass.
    fn add(&mut self, path: &str, format: String, launches: usize) {
        self.0.push((
            Source {
                path: path.to_string(),
                format,
                launches,
                excluded: Vec::new(),
            },
            None,
        ));
    }

    /// A part that goes with a trace: `format` names it alone, `extra` as
    /// part of the trace's file ("agent info", "200 HIP API calls"):
    /// "rocpd database (kernels view) + agent info + 200 HIP API calls".
    fn extra(&mut self, path: &str, format: String, extra: String) {
        self.0.push((
            Source {
                path: path.to_string(),
                format,
                launches: 0,
                excluded: Vec::new(),
            },
            Some(extra),
        ));
    }

    fn iter(&self) -> impl Iterator<Item = &Source> {
        self.0.iter().map(|(s, _)| s)
    }

    /// One source per file, in the order the files first came: its main
    /// parts' formats, then what else it held; launches summed.
    fn per_file(self) -> Vec<Source> {
        let mut files: Vec<Vec<(Source, Option<String>)>> = Vec::new();
        for p in self.0 {
            match files.iter_mut().find(|f| f[0].0.path == p.0.path) {
                Some(f) => f.push(p),
                None => files.push(vec![p]),
            }
        }
        files
            .into_iter()
            .map(|mut parts| {
                if parts.len() == 1 {
                    return parts.remove(0).0;
                }
                let launches = parts.iter().map(|(s, _)| s.launches).sum();
                let path = parts[0].0.path.clone();
                let (mut main, mut extra): (Vec<_>, Vec<_>) =
                    parts.into_iter().partition(|(_, e)| e.is_none());
                if main.is_empty() && !extra.is_empty() {
                    // No dispatches: the first part names the file in full.
                    main.push(extra.remove(0));
                }
                let head = main
                    .into_iter()
                    .map(|(s, _)| s.format)
                    .collect::<Vec<_>>()
                    .join("; ");
                let with: Vec<String> = extra.into_iter().filter_map(|(_, e)| e).collect();
                let format = if with.is_empty() {
                    head
                } else {
                    format!("{head} + {}", with.join(" + "))
                };
                Source {
                    path,
                    format,
                    launches,
                    excluded: Vec::new(),
                }
            })
            .collect()
    }
}
