//! Parsers for profiler output. Nothing here runs a process: converting a
//! `.ncu-rep` report to CSV is `kopt-collect`'s job.

pub mod budget;
pub mod confine;
pub mod detect;
mod error;
pub mod inputs;
pub mod kineto;
mod kineto_events;
mod kineto_fast;
pub mod kopt_trace;
pub mod ncu;
pub mod number;
pub mod ranks;
pub mod rocprof;
pub mod run_folder;
mod source_lines;
pub mod stored;
pub mod tensor;
pub mod tiered;
pub mod units;

use std::path::Path;

use kopt_model::{Device, Profile, Source};

pub use error::{echo, one_line, IngestError};
pub use kineto::{parse_kineto, KinetoTrace};
pub use kopt_model::run_folder::BARE_STEPS_FILE;
pub use kopt_trace::{
    bare_steps_beside, parse_kopt_trace, read_bare_steps, read_kopt_trace, read_kopt_trace_set,
    KoptTrace,
};
pub use ncu::{parse_ncu_csv, NcuFile, NcuPage};
pub use rocprof::{
    is_rocprof_compute_dir, parse_rocprof, read_rocprof_compute_dir, read_rocprof_files, AmdFile,
};
pub use run_folder::{read_run_folder_filtered, read_run_record};
pub use tiered::{merge_tiered, read_run_folder, TimingPass};

/// The longest kernel (or activity) name kept, in bytes. Longer names are
/// cut at ingest (see [`cap_name`]): a fuzzed 200 MB name otherwise costs
/// gigabytes through demangling and every copy the analysis makes.
pub const MAX_NAME_BYTES: usize = 4096;

/// `name` cut to at most [`MAX_NAME_BYTES`] bytes (at a character boundary)
/// and marked as cut, with whether it was; a shorter name is returned as it is.
pub fn cap_name(name: &str) -> (std::borrow::Cow<'_, str>, bool) {
    if name.len() <= MAX_NAME_BYTES {
        return (std::borrow::Cow::Borrowed(name), false);
    }
    let mut end = MAX_NAME_BYTES;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    let head = name.get(..end).unwrap_or_default();
    (
        std::borrow::Cow::Owned(format!("{head}… [name cut: {} bytes in all]", name.len())),
        true,
    )
}

/// Open `path` for reading if it is a regular file (symbolic links
/// followed). A FIFO would block the read forever and a device such as
/// `/dev/zero` never ends: both, and directories, are refused by name.
pub(crate) fn open_regular(path: &Path, label: &str) -> Result<std::fs::File, IngestError> {
    let io = |source| IngestError::Io {
        path: label.to_string(),
        source,
    };
    let not_regular = |kind| IngestError::NotRegular {
        path: label.to_string(),
        kind,
    };
    confine::check(path, label)?;
    // Checked before opening: opening a FIFO for reading blocks until a writer comes.
    if let Some(kind) = error::non_regular_kind(std::fs::metadata(path).map_err(io)?.file_type()) {
        return Err(not_regular(kind));
    }
    let file = std::fs::File::open(path).map_err(io)?;
    // And what was opened, in case the path changed in between: its kind,
    // and where it lies (a link swapped after the check above).
    if let Some(kind) = error::non_regular_kind(file.metadata().map_err(io)?.file_type()) {
        return Err(not_regular(kind));
    }
    confine::check_opened(&file, label)?;
    Ok(file)
}

/// The whole of a regular file.
pub(crate) fn read_regular(path: &Path, label: &str) -> Result<Vec<u8>, IngestError> {
    use std::io::Read;
    let mut file = open_regular(path, label)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|source| IngestError::Io {
            path: label.to_string(),
            source,
        })?;
    Ok(bytes)
}

/// Read and parse a Kineto / torch.profiler trace from disk.
pub fn read_kineto(path: &Path) -> Result<KinetoTrace, IngestError> {
    let t = read_kineto_whole(path)?;
    budget::check_activities(&t.timeline, &path.display().to_string())?;
    Ok(t)
}

fn read_kineto_whole(path: &Path) -> Result<KinetoTrace, IngestError> {
    let label = path.display().to_string();
    let io = |source| IngestError::Io {
        path: label.clone(),
        source,
    };
    let mut file = open_regular(path, &label)?;
    // A gzipped trace (`.pt.trace.json.gz`) is decompressed as it is read.
    let mut magic = [0u8; 2];
    let head = read_up_to(&mut file, &mut magic).map_err(io)?;
    if magic.get(..head) == Some(&kineto::GZIP_MAGIC[..]) {
        use std::io::Seek;
        let len = file.metadata().map_err(io)?.len();
        let mut tail = [0u8; 4];
        let hint = match len.checked_sub(4) {
            Some(at) => {
                file.seek(std::io::SeekFrom::Start(at)).map_err(io)?;
                let n = read_up_to(&mut file, &mut tail).map_err(io)?;
                (n == 4).then(|| u64::from(u32::from_le_bytes(tail)))
            }
            None => None,
        };
        file.rewind().map_err(io)?;
        let bytes = kineto::gunzip(std::io::BufReader::new(file), len, hint, &label)?;
        return parse_kineto(without_bom(&bytes), &label);
    }
    // Read, not mapped: a file truncated while it was mapped killed the
    // process with SIGBUS (the MCP server with it), and a reader must not
    // be stopped by what another process does to its input.
    let len = file.metadata().map_err(io)?.len();
    let max = budget::TRACE_MAX_BYTES.checked()?;
    if len > max {
        return Err(IngestError::format(
            &label,
            format!(
                "trace size budget: {len} bytes, more than {max}; {}",
                budget::TRACE_MAX_BYTES.how_to_raise_to(len)
            ),
        ));
    }
    // Read from where the magic check left off; at most the budget and one
    // byte (a file growing while read is cut there, and said).
    use std::io::Read;
    let mut bytes = magic[..head].to_vec();
    bytes.reserve(usize::try_from(len).unwrap_or(0));
    file.take(max.saturating_sub(head as u64).saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > max {
        return Err(IngestError::format(
            &label,
            format!(
                "trace size budget: more than {max} bytes (it grew while read); {}",
                budget::TRACE_MAX_BYTES.how_to_raise()
            ),
        ));
    }
    parse_kineto(without_bom(&bytes), &label)
}

/// The text after a UTF-8 byte-order mark, which some editors write and
/// JSON does not allow.
fn without_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes)
}

/// Fill `buf` from `r` as far as the input goes; how many bytes came.
pub(crate) fn read_up_to(r: &mut impl std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while let Some(rest) = buf.get_mut(got..).filter(|b| !b.is_empty()) {
        match r.read(rest) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Read and parse one ncu CSV file from disk; a gzipped page (`.csv.gz`,
/// told by its bytes) is decompressed first, within the gzip budgets.
pub fn read_ncu_csv(path: &Path) -> Result<NcuFile, IngestError> {
    use std::io::Read;
    let label = path.display().to_string();
    let io = |source| IngestError::Io {
        path: label.clone(),
        source,
    };
    // Anything no other reader claimed ends up here: its head is looked at
    // before the rest is read, so a binary file of gigabytes is refused
    // after 64 KiB, not after reading it whole.
    let mut file = open_regular(path, &label)?;
    let mut bytes = vec![0u8; 64 << 10];
    let n = read_up_to(&mut file, &mut bytes).map_err(io)?;
    bytes.truncate(n);
    if !bytes.starts_with(&kineto::GZIP_MAGIC) {
        if let Some(offset) = bytes.iter().position(|&b| b == 0) {
            return Err(IngestError::Binary {
                path: label,
                offset,
            });
        }
    }
    file.read_to_end(&mut bytes).map_err(io)?;
    if bytes.starts_with(&kineto::GZIP_MAGIC) {
        let plain = kineto::decompress(&bytes, &label)?;
        return parse_ncu_csv(&plain, &label);
    }
    parse_ncu_csv(&bytes, &label)
}

/// Merge parsed files into one profile.
///
/// A details page whose launches (ID and name) all appear in a raw page is
/// the same run exported twice (what a `.ncu-rep` gives): its rules are
/// attached to the raw launches instead of counting the launches again.
/// Otherwise files are concatenated. The first device that names itself
/// (the raw page does, the details page does not) describes the workload.
pub fn merge_profile(files: Vec<(String, NcuFile)>) -> Profile {
    let mut device: Option<Device> = None;
    let mut launches: Vec<kopt_model::KernelLaunch> = Vec::new();
    let mut sources = Vec::new();
    let (raws, details): (Vec<_>, Vec<_>) =
        files.into_iter().partition(|(_, f)| f.page == NcuPage::Raw);
    let mut raw_files: Vec<(String, NcuFile)> = raws;
    let mut extra: Vec<(String, NcuFile)> = Vec::new();
    for (path, det) in details {
        match raw_files.iter_mut().find(|(_, raw)| same_run(raw, &det)) {
            Some((_, raw)) => {
                attach_rules(raw, &det);
                sources.push(Source {
                    path,
                    format: "ncu-details (rules attached to the raw page's launches)".into(),
                    launches: 0,
                    excluded: det.excluded,
                });
            }
            None => extra.push((path, det)),
        }
    }
    for (path, file) in raw_files.into_iter().chain(extra) {
        sources.push(Source {
            path,
            format: file.page.as_str().to_string(),
            launches: file.launches.len(),
            excluded: file.excluded,
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
        // The first file's launches are taken whole: extending an empty
        // vector would copy them all (1.2 KB a launch) while both live.
        if launches.is_empty() {
            launches = file.launches;
        } else {
            launches.extend(file.launches);
        }
    }
    Profile {
        device: device.unwrap_or_else(Device::unknown),
        launches,
        sources,
        timeline: None,
    }
}

fn same_run(raw: &NcuFile, details: &NcuFile) -> bool {
    let names: std::collections::HashMap<u64, &str> = raw
        .launches
        .iter()
        .map(|l| (l.id, l.name.as_str()))
        .collect();
    !details.launches.is_empty()
        && details
            .launches
            .iter()
            .all(|d| names.get(&d.id).is_some_and(|n| *n == d.name))
}

/// Rules, and the figures only rules carry, from a details page onto the raw launches.
fn attach_rules(raw: &mut NcuFile, details: &NcuFile) {
    let by_id: std::collections::HashMap<u64, &kopt_model::KernelLaunch> =
        details.launches.iter().map(|l| (l.id, l)).collect();
    for l in &mut raw.launches {
        let Some(d) = by_id.get(&l.id) else { continue };
        l.ncu_rules = d.ncu_rules.clone();
        let (m, dm) = (&mut l.metrics, &d.metrics);
        m.shared_conflict_pct_from_rule = dm.shared_conflict_pct_from_rule;
        m.uncoalesced_excess_pct_from_rule = dm.uncoalesced_excess_pct_from_rule;
        for (slot, v) in [
            (&mut m.tensor_pct, dm.tensor_pct),
            (&mut m.fma_pct, dm.fma_pct),
            (&mut m.alu_pct, dm.alu_pct),
            (&mut m.fp64_pct, dm.fp64_pct),
            (&mut m.memory_pct, dm.memory_pct),
            (&mut m.l1_pct, dm.l1_pct),
            (&mut m.l2_pct, dm.l2_pct),
        ] {
            if slot.is_none() {
                *slot = v;
            }
        }
    }
}

/// A profile from a trace alone: every kernel activity becomes a launch with
/// its duration and grid (no counters), and the timeline is kept for the
/// timeline analysis.
pub fn profile_from_trace(trace: KinetoTrace, path: &str) -> Profile {
    let mut notes = Vec::new();
    if let Some(r) = &trace.repaired {
        notes.push(format!("repaired: {r}"));
    }
    if trace.skipped_events > 0 {
        notes.push(format!(
            "{} event(s) left out for a ts or dur that is unusable or outside the profiler's span, the first: {}",
            trace.skipped_events,
            trace.first_skipped.as_deref().unwrap_or("-")
        ));
    }
    if trace.unknown_values > 0 {
        notes.push(format!(
            "{} implausible value(s) left unknown, the first: {}",
            trace.unknown_values,
            trace.first_unknown.as_deref().unwrap_or("-")
        ));
    }
    if trace.names_cut > 0 {
        notes.push(format!(
            "{} name(s) longer than {MAX_NAME_BYTES} bytes cut",
            trace.names_cut
        ));
    }
    let format = if notes.is_empty() {
        "kineto trace".to_string()
    } else {
        format!("kineto trace ({})", notes.join("; "))
    };
    profile_from_timeline(trace.timeline, path, &format)
}

/// Drop activities that repeat an earlier one exactly (kind, name, times,
/// device, stream, correlation): one launch recorded twice (events
/// appended again, a writer's retry) is one launch, not two on one stream
/// at the same instant. How many were dropped.
fn drop_duplicate_activities(t: &mut kopt_model::Timeline) -> usize {
    use std::hash::{Hash, Hasher};
    type Key<'a> = (u8, &'a str, i64, i64, u32, u64, u64);
    let key = |a: &kopt_model::GpuActivity| -> (u8, i64, i64, u32, u64, u64) {
        (
            a.kind as u8,
            a.start_ns,
            a.end_ns,
            a.device,
            a.stream,
            a.correlation,
        )
    };
    // Hash -> the first activity with it; a hash hit is compared in full.
    let mut first: std::collections::HashMap<u64, usize> = Default::default();
    let mut keep = vec![true; t.activities.len()];
    let mut dropped = 0;
    for (i, a) in t.activities.iter().enumerate() {
        let k = key(a);
        let full: Key = (k.0, a.name.as_str(), k.1, k.2, k.3, k.4, k.5);
        let mut h = std::collections::hash_map::DefaultHasher::new();
        full.hash(&mut h);
        match first.entry(h.finish()) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(i);
            }
            std::collections::hash_map::Entry::Occupied(o) => {
                let b = &t.activities[*o.get()];
                if key(b) == k && b.name == a.name {
                    keep[i] = false;
                    dropped += 1;
                }
            }
        }
    }
    if dropped > 0 {
        let mut keep = keep.into_iter();
        t.activities.retain(|_| keep.next().unwrap_or(true));
    }
    dropped
}

/// The names of GPUs of another model than the trace's device that ran
/// kernels in it, joined; None when every kernel ran on one model.
fn other_gpu_models(t: &kopt_model::Timeline) -> Option<String> {
    if t.device_names.len() < 2 {
        return None;
    }
    let ran: std::collections::BTreeSet<u32> = t
        .activities
        .iter()
        .filter(|a| a.kind == kopt_model::ActivityKind::Kernel)
        .map(|a| a.device)
        .collect();
    let main = t.device_name.as_deref()?;
    let mut others: Vec<String> = t
        .device_names
        .iter()
        .filter(|(id, name)| ran.contains(id) && name != main)
        .map(|(id, name)| format!("{} (device {id})", kopt_model::text::one_line(name)))
        .collect();
    others.dedup();
    (!others.is_empty()).then(|| others.join(", "))
}

/// The GPU a trace names (kopt trace's device records, Kineto's
/// `deviceProperties`), with peaks from what it reports: the memory
/// bandwidth CUPTI gives wins over the datasheet, FP32 comes from SMs x clock.
pub fn device_from_timeline(t: &kopt_model::Timeline) -> Device {
    let mut device = Device::unknown();
    let Some(name) = &t.device_name else {
        return device;
    };
    device.name = name.clone();
    device.sm_count = t.sm_count;
    device.compute_capability = t.compute_capability.clone();
    device.sm_clock_hz = t.sm_clock_hz;
    device.resolve_peaks();
    if let Some(bw) = t.mem_bandwidth_bytes_per_s {
        device.peaks.dram_bytes_per_s = Some(bw);
        if let Some(fp32) = device.fp32_peak_from_attributes() {
            device.peaks.fp32_flops = Some(fp32);
        }
        device.peak_source = kopt_model::PeakSource::DeviceAttributes;
    }
    device
}

/// The device's figures no GPU could have left unknown (a 1e-297 Hz
/// clock, 0 SMs, a 100 KB name), each said as a source's exclusion so the
/// analysis repeats it among its notes.
pub fn device_left_out(device: &mut Device) -> Vec<String> {
    device
        .leave_out_implausible()
        .into_iter()
        .map(|why| format!("device {why}: left unknown"))
        .collect()
}

/// A profile from any timeline (Kineto or kopt's own tracer).
pub fn profile_from_timeline(mut t: kopt_model::Timeline, path: &str, format: &str) -> Profile {
    let mut said = Vec::new();
    let dropped = drop_duplicate_activities(&mut t);
    if dropped > 0 {
        said.push(format!(
            "{dropped} record(s) repeating another activity exactly (same name, times, device, stream and correlation) counted once"
        ));
    }
    if let Some(others) = other_gpu_models(&t) {
        said.push(format!(
            "kernels ran on GPUs of other models too ({others}): every figure uses {}'s peaks; analyse each GPU's trace apart",
            t.device_name.as_deref().unwrap_or("the first GPU's")
        ));
    }
    let format = if said.is_empty() {
        format.to_string()
    } else if let Some(open) = format.strip_suffix(')') {
        format!("{open}; {})", said.join("; "))
    } else {
        format!("{format} ({})", said.join("; "))
    };
    let format = format.as_str();
    let sm_count = t.sm_count.map(f64::from);
    let launches = t
        .activities
        .iter()
        .filter(|a| a.kind == kopt_model::ActivityKind::Kernel)
        .enumerate()
        .map(|(i, a)| kopt_model::KernelLaunch {
            id: i as u64,
            name: a.name.clone(),
            grid: a.grid.unwrap_or_default(),
            block: a.block.unwrap_or_default(),
            stream: Some(a.stream),
            metrics: kopt_model::Metrics {
                duration_ns: Some(a.duration_ns() as f64),
                grid_size: a.grid.map(|g| g.product() as f64),
                block_size: a.block.map(|b| b.product() as f64),
                sm_count,
                ..Default::default()
            },
            ncu_rules: Vec::new(),
        })
        .collect::<Vec<_>>();
    let mut device = device_from_timeline(&t);
    let excluded = device_left_out(&mut device);
    Profile {
        device,
        sources: vec![Source {
            path: path.to_string(),
            format: format.to_string(),
            launches: launches.len(),
            excluded,
        }],
        launches,
        timeline: Some(t),
    }
}
