//! kopt's own trace: JSON lines written by the `kopt-tracer` injection library
//! (one record per line: kernel, api, memcpy, memset, and a closing `end`).
//! Kernel names arrive mangled and are demangled here. A sampled trace closes
//! each window with a `window` record after the window's records: CUPTI
//! starts afresh in every window, so correlation and NVTX ids are matched
//! within their window only.

use std::borrow::Cow;
use std::path::Path;

use kopt_model::run_folder::BARE_STEPS_FILE;
use kopt_model::{
    ActivityKind, ApiCall, ApiKind, CopyKind, Dim3, GpuActivity, MemoryKind, Range, Timeline,
};
use serde::Deserialize;

use crate::IngestError;

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow)]
    t: Cow<'a, str>,
    /// Borrowed where it holds no escape: a huge name is not copied before it is cut.
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default)]
    s: Option<i64>,
    #[serde(default)]
    e: Option<i64>,
    #[serde(default)]
    dev: Option<u32>,
    #[serde(default, rename = "str")]
    stream: Option<u64>,
    #[serde(default)]
    c: Option<u64>,
    #[serde(default)]
    g: Option<[u32; 3]>,
    #[serde(default)]
    b: Option<[u32; 3]>,
    #[serde(default)]
    tid: Option<u64>,
    #[serde(default)]
    bytes: Option<u64>,
    /// A copy's source and destination memory kinds (CUPTI's `CUpti_ActivityMemoryKind`).
    #[serde(default)]
    sk: Option<u8>,
    #[serde(default)]
    dk: Option<u8>,
    /// The process record's place in a distributed job (launcher variables).
    #[serde(default)]
    rank: Option<u32>,
    #[serde(default)]
    world_size: Option<u32>,
    #[serde(default)]
    dropped: Option<u64>,
    #[serde(default)]
    lost_buffers: Option<u64>,
    /// Device records: SM count, compute capability, memory bandwidth (KB/s), SM clock (kHz).
    #[serde(default)]
    sms: Option<u32>,
    #[serde(default)]
    cc: Option<Vec<u32>>,
    #[serde(default)]
    mem_bw_kbs: Option<u64>,
    #[serde(default)]
    clock_khz: Option<u64>,
    /// NVTX range id (range_start / range_end), device id (device).
    #[serde(default)]
    id: Option<u64>,
    /// The process record's run id (`KOPT_TRACE_RUN`).
    #[serde(default, borrow)]
    run: Option<Cow<'a, str>>,
}

/// A parsed kopt trace and what it says about its own completeness.
#[derive(Debug, Clone)]
pub struct KoptTrace {
    pub timeline: Timeline,
    /// False when the `end` record is missing (the process died before exit).
    pub ended: bool,
    pub dropped_records: u64,
    /// Records left out at the edges of sampled windows: flushed before the
    /// GPU wrote their timestamps, or launched while CUPTI was attaching.
    pub incomplete_records: u64,
    /// Activity buffers CUPTI never handed back: another CUPTI client (the
    /// program's own torch.profiler, nsys) took tracing over during the run.
    pub lost_buffers: u64,
    /// How many processes' traces were merged (1 for one file).
    pub processes: u32,
    /// Records left out because their times are unusable (negative,
    /// ending before they start, beyond about 73 years of nanoseconds).
    pub invalid_records: u64,
    /// The first of them: its line and what was wrong.
    pub first_invalid: Option<String>,
    /// Names longer than [`crate::MAX_NAME_BYTES`], kept cut (and not demangled).
    pub names_cut: u64,
    /// Kernels whose launch geometry no GPU runs (a zero dimension, a block
    /// over 1024 threads, a grid dimension over 2^31 - 1): kept with their
    /// time, the grid and block left unknown.
    pub impossible_geometry: u64,
    /// The first of them: its line and what was wrong.
    pub first_impossible_geometry: Option<String>,
    /// Distinct kernel names kept mangled because demangling them would
    /// pass the demangler's budget ([`demangle_bounded`]).
    pub names_left_mangled: u64,
    /// The run id of the process record (`KOPT_TRACE_RUN`), when written.
    pub run: Option<String>,
    /// The other processes' files merged in (`trace.jsonl.<pid>`).
    pub merged_files: Vec<String>,
    /// `trace.jsonl.<pid>` files beside the trace that another run wrote
    /// (their run id differs), left out.
    pub other_runs_left_out: Vec<String>,
    /// `trace.jsonl.<pid>` files of this run that another rank wrote
    /// (`kopt analyze` of the run folder reads the ranks as one job).
    pub other_ranks_left_out: Vec<String>,
    /// `trace.jsonl.<pid>` files that are the trace or a sibling again (a
    /// hard link, a symlink, a copy with the same records), left out: each
    /// as `FILE (the same file as OTHER)` or `FILE (the same records as OTHER)`.
    pub repeats_left_out: Vec<String>,
    /// The bare run's step file read into `timeline.bare_steps`
    /// ([`bare_steps_beside`]), by its file name.
    pub bare_steps_file: Option<String>,
}

impl KoptTrace {
    /// Whether any kernel, copy or set was recorded: a trace without any
    /// is well-formed but gives nothing to analyse.
    pub fn has_gpu_activity(&self) -> bool {
        !self.timeline.activities.is_empty()
    }

    /// The source's format as reports list it: `kopt trace (CUPTI)`, then
    /// the files merged in, those of other runs left out, and names kept
    /// mangled.
    pub fn source_format(&self) -> String {
        let mut notes = Vec::new();
        if !self.merged_files.is_empty() {
            notes.push(format!("merged with {}", self.merged_files.join(", ")));
        }
        if !self.other_runs_left_out.is_empty() {
            notes.push(format!(
                "left out {} (another run's)",
                self.other_runs_left_out.join(", ")
            ));
        }
        if !self.other_ranks_left_out.is_empty() {
            notes.push(format!(
                "left out {} (other ranks: analyze the run folder for the job)",
                self.other_ranks_left_out.join(", ")
            ));
        }
        if !self.repeats_left_out.is_empty() {
            notes.push(format!(
                "left out {} (merged once)",
                self.repeats_left_out.join(", ")
            ));
        }
        if let Some(file) = &self.bare_steps_file {
            notes.push(format!("bare run's steps from {file}"));
        }
        if self.invalid_records > 0 {
            notes.push(format!(
                "{} record(s) left out for impossible times (outside the clock's range, ending before they start, or longer than any launch), the first: {}",
                self.invalid_records,
                self.first_invalid.as_deref().unwrap_or("")
            ));
        }
        if self.impossible_geometry > 0 {
            notes.push(format!(
                "{} kernel(s) with a launch geometry no GPU runs, their grid and block left unknown, the first: {}",
                self.impossible_geometry,
                self.first_impossible_geometry.as_deref().unwrap_or("")
            ));
        }
        if self.names_left_mangled > 0 {
            notes.push(format!(
                "{} kernel name(s) kept mangled: nested deeper than the demangler follows ({DEMANGLE_RECURSION} levels) or longer than {DEMANGLED_MAX_BYTES} bytes demangled",
                self.names_left_mangled
            ));
        }
        if notes.is_empty() {
            "kopt trace (CUPTI)".to_string()
        } else {
            format!("kopt trace (CUPTI; {})", notes.join("; "))
        }
    }
}

/// `_ZN2at6native...` -> `void at::native::...`; other names unchanged.
/// Bounded: a name longer than [`crate::MAX_NAME_BYTES`] is not parsed, the
/// demangler's recursion is limited, and a demangled text that would grow
/// past [`DEMANGLED_MAX_BYTES`] (back-references can double it at each
/// step) is abandoned: the mangled name is returned as it is.
pub fn demangle(name: &str) -> String {
    demangle_bounded(name).0
}

/// [`demangle`], and whether the name was left mangled because it is past
/// the demangler's budget (nested deeper than it follows, or demangling to
/// more than [`DEMANGLED_MAX_BYTES`]) rather than because it is not C++.
///
/// The budget bounds work, not only output: cpp_demangle backtracks, and a
/// failed alternative's substitutions stay in its table, so a malformed name
/// whose template arguments nest literals of template types costs about
/// three times more time and memory with each level (a 140-byte name, 16
/// levels, took more than 21 GB). The parse recursion limit is what bounds
/// that: each such level takes about 8 of its frames, so
/// [`DEMANGLE_RECURSION`] keeps the worst name to a few milliseconds and
/// megabytes, while kernel names from PyTorch, CUTLASS and Triton take
/// fewer than 48.
pub fn demangle_bounded(name: &str) -> (String, bool) {
    if !name.starts_with("_Z") || name.len() > crate::MAX_NAME_BYTES {
        return (name.to_string(), false);
    }
    // cpp_demangle adds to the numbers it reads unchecked (`T<n>_` takes
    // n + 1): a number no real name holds overflows, which is a panic in a
    // debug build. Lengths and indexes in kernel names stay far below 10^9.
    if longest_digit_run(name) > MAX_NAME_DIGITS {
        return (name.to_string(), true);
    }
    // And should another such path remain, the mangled name is kept rather
    // than the run lost.
    std::panic::catch_unwind(|| demangle_within_budget(name))
        .unwrap_or_else(|_| (name.to_string(), true))
}

fn demangle_within_budget(name: &str) -> (String, bool) {
    let parse = cpp_demangle::ParseOptions::default().recursion_limit(DEMANGLE_RECURSION);
    let print = cpp_demangle::DemangleOptions::default().recursion_limit(DEMANGLE_PRINT_RECURSION);
    let symbol = match cpp_demangle::Symbol::new_with_options(name, &parse) {
        Ok(symbol) => symbol,
        Err(cpp_demangle::error::Error::TooMuchRecursion) => return (name.to_string(), true),
        Err(_) => return (name.to_string(), false),
    };
    let mut out = CappedText(String::new());
    match symbol.structured_demangle(&mut out, &print) {
        Ok(()) => (out.0, false),
        Err(_) => (name.to_string(), true),
    }
}

/// The most digits in a row a name is demangled with (see
/// [`demangle_bounded`]).
const MAX_NAME_DIGITS: usize = 9;

fn longest_digit_run(name: &str) -> usize {
    name.as_bytes()
        .split(|b| !b.is_ascii_digit())
        .map(<[u8]>::len)
        .max()
        .unwrap_or(0)
}

/// Nesting the demangler's parser follows before giving up (see
/// [`demangle_bounded`] for why it is this low).
pub const DEMANGLE_RECURSION: u32 = 64;
/// Nesting followed while printing (the output cap bounds its work).
const DEMANGLE_PRINT_RECURSION: u32 = 128;
/// The longest demangled name kept, in bytes.
pub const DEMANGLED_MAX_BYTES: usize = 4 * crate::MAX_NAME_BYTES;

/// Text that refuses to grow past [`DEMANGLED_MAX_BYTES`].
struct CappedText(String);

impl std::fmt::Write for CappedText {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.0.len().saturating_add(s.len()) > DEMANGLED_MAX_BYTES {
            return Err(std::fmt::Error);
        }
        self.0.push_str(s);
        Ok(())
    }
}

/// What a device record says about one GPU.
#[derive(Clone)]
struct DeviceRecord {
    name: String,
    sms: Option<u32>,
    cc: Option<String>,
    mem_bw: Option<f64>,
    clock_hz: Option<f64>,
}

impl DeviceRecord {
    fn of(line: &Line, name: String) -> Self {
        let cc = match line.cc.as_deref() {
            Some([major, minor, ..]) => Some(format!("{major}.{minor}")),
            Some([major]) => Some(format!("{major}.0")),
            _ => None,
        };
        DeviceRecord {
            name,
            sms: line.sms.filter(|n| *n > 0),
            cc,
            // CUPTI reports global memory bandwidth in KB/s, the clock in kHz.
            mem_bw: line.mem_bw_kbs.filter(|b| *b > 0).map(|b| b as f64 * 1e3),
            clock_hz: line.clock_khz.filter(|c| *c > 0).map(|c| c as f64 * 1e3),
        }
    }
}

/// CUPTI's `CUpti_ActivityMemcpyKind`, named as Kineto names copies.
pub fn memcpy_kind_name(kind: u64) -> Option<&'static str> {
    Some(match kind {
        1 => "Memcpy HtoD",
        2 => "Memcpy DtoH",
        3 => "Memcpy HtoA",
        4 => "Memcpy AtoH",
        5 => "Memcpy AtoA",
        6 => "Memcpy AtoD",
        7 => "Memcpy DtoA",
        8 => "Memcpy DtoD",
        9 => "Memcpy HtoH",
        10 => "Memcpy PtoP",
        _ => return None,
    })
}

/// The tracer writes copies as `Memcpy kind N`: named here, unknown kinds kept as written.
fn copy_name(name: &str) -> Option<&'static str> {
    let n = name.strip_prefix("Memcpy kind ")?.trim().parse().ok()?;
    memcpy_kind_name(n)
}

/// CUPTI's `CUpti_ActivityMemoryKind` as kopt's memory kind (arrays and
/// static allocations count as device and managed memory).
fn memory_kind(kind: Option<u8>) -> MemoryKind {
    match kind {
        Some(1) => MemoryKind::Pageable,
        Some(2) => MemoryKind::Pinned,
        Some(3 | 4 | 6) => MemoryKind::Device,
        Some(5 | 7) => MemoryKind::Managed,
        _ => MemoryKind::Unknown,
    }
}

/// A tracer copy's direction (from its `Memcpy kind N` name) and memory
/// kinds (`sk`/`dk`; unknown in traces older than them).
fn tracer_copy(name: &str, src: Option<u8>, dst: Option<u8>) -> Option<CopyKind> {
    let named = copy_name(name).or_else(|| name.starts_with("Memcpy ").then_some(name))?;
    let mut kind = crate::kineto_events::copy_kind(named)?;
    kind.src = memory_kind(src);
    kind.dst = memory_kind(dst);
    Some(kind)
}

fn dim(v: Option<[u32; 3]>) -> Option<Dim3> {
    v.map(|[x, y, z]| Dim3 { x, y, z })
}

/// The records read since the last `window` line of a sampled trace.
///
/// A window starts at its first API call (else its first record): attaching
/// CUPTI again stalls the program for milliseconds (about 5 ms seen on an
/// H200), time that is kopt's, not the program's; a kernel launched while
/// CUPTI was attaching, its launch call unrecorded, is dropped as incomplete.
/// And a window covers a record CUPTI stamped a little before it opened.
#[derive(Default)]
struct OpenWindow {
    /// Earliest start and latest end of its records.
    span: Option<(i64, i64)>,
    first_call: Option<i64>,
    /// Where its activities and ranges begin in the timeline's lists.
    activities_from: usize,
    ranges_from: usize,
}

impl OpenWindow {
    fn saw(&mut self, start: i64, end: i64, api_call: bool) {
        self.span = Some(
            self.span
                .map_or((start, end), |(lo, hi)| (lo.min(start), hi.max(end))),
        );
        if api_call {
            self.first_call = Some(self.first_call.map_or(start, |f| f.min(start)));
        }
    }

    /// Close the window at its recorded bounds, or (None: the run died
    /// before writing them) at its records' own. Returns the records left out.
    fn close(&mut self, t: &mut Timeline, bounds: Option<(i64, i64)>) -> u64 {
        let mut left_out = 0;
        let window = match (self.span.take(), bounds) {
            (Some((lo, hi)), bounds) => {
                let previous_end = t.sampled_windows.last().map_or(i64::MIN, |w| w.1);
                let start = self.first_call.take().unwrap_or(lo).max(previous_end);
                let end = bounds.map_or(hi, |(_, e)| e.max(hi));
                left_out = keep_from(&mut t.activities, self.activities_from, |a| {
                    a.start_ns >= start
                });
                keep_from(&mut t.ranges, self.ranges_from, |r| r.start_ns >= start);
                Some((start, end))
            }
            (None, bounds) => bounds,
        };
        if let Some(w) = window {
            t.sampled_windows.push(w);
        }
        (self.activities_from, self.ranges_from) = (t.activities.len(), t.ranges.len());
        left_out
    }
}

/// Keep the items from `from` on that pass `keep` (those before stay);
/// returns how many went.
fn keep_from<T>(v: &mut Vec<T>, from: usize, keep: impl Fn(&T) -> bool) -> u64 {
    let mut tail = v.split_off(from);
    let before = tail.len();
    tail.retain(keep);
    let gone = (before - tail.len()) as u64;
    v.append(&mut tail);
    gone
}

/// Parse a kopt trace held in memory as bytes: invalid UTF-8 is reported
/// with its line and byte offset. `path` only labels errors.
pub fn parse_kopt_trace_bytes(bytes: &[u8], path: &str) -> Result<KoptTrace, IngestError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => parse_kopt_trace(text, path),
        Err(e) => {
            let offset = e.valid_up_to();
            let line = bytes
                .get(..offset)
                .map_or(0, |b| memchr::memchr_iter(b'\n', b).count())
                + 1;
            Err(IngestError::at(
                path,
                line as u64,
                format!("byte {offset}: invalid UTF-8 (a kopt trace is UTF-8 JSON lines)"),
            ))
        }
    }
}

/// Whether a record's time is one kopt can compute with.
fn usable_ns(t: i64) -> bool {
    (0..=crate::kineto_events::MAX_TIME_NS).contains(&t)
}

/// What a kopt trace's records build up, one line at a time: the timeline,
/// the counts of records left out, and the state that spans lines (open
/// ranges, the sampled window, the devices seen, names already demangled).
struct TraceBuilder {
    t: Timeline,
    ended: bool,
    dropped: u64,
    lost_buffers: u64,
    incomplete: u64,
    invalid: u64,
    first_invalid: Option<String>,
    names_cut: u64,
    impossible_geometry: u64,
    first_impossible_geometry: Option<String>,
    names_left_mangled: u64,
    run: Option<String>,
    /// Each distinct name is demangled once: a trace repeats its kernels.
    demangled: std::collections::HashMap<String, String>,
    records: u64,
    /// Devices by id; the report names the one the kernels ran on.
    devices: std::collections::HashMap<u64, DeviceRecord>,
    /// NVTX ranges open by id until their end record arrives.
    open: std::collections::HashMap<u64, (String, i64, Option<u64>)>,
    /// Sampled windows closed so far: correlation ids (CUPTI's are 32-bit)
    /// carry the window in bits 32..48 (processes use the bits above).
    window: u64,
    open_window: OpenWindow,
}

impl TraceBuilder {
    fn new() -> Self {
        TraceBuilder {
            t: Timeline {
                whole_program: true,
                recorder: kopt_model::Recorder::KoptTracer,
                ..Timeline::default()
            },
            ended: false,
            dropped: 0,
            lost_buffers: 0,
            incomplete: 0,
            invalid: 0,
            first_invalid: None,
            names_cut: 0,
            impossible_geometry: 0,
            first_impossible_geometry: None,
            names_left_mangled: 0,
            run: None,
            demangled: std::collections::HashMap::new(),
            records: 0,
            devices: std::collections::HashMap::new(),
            open: std::collections::HashMap::new(),
            window: 0,
            open_window: OpenWindow::default(),
        }
    }

    fn reject(&mut self, line_no: u64, why: String) {
        self.invalid += 1;
        if self.first_invalid.is_none() {
            self.first_invalid = Some(format!("line {line_no}: {why}"));
        }
    }

    /// A correlation id moved into the current window's range.
    fn scoped(&self, c: Option<u64>) -> u64 {
        match c.unwrap_or(0) {
            0 => 0,
            c => (c & 0xFFFF_FFFF) | (self.window.min(0xFFFF) << 32),
        }
    }

    /// One parsed record.
    fn record(&mut self, line: &Line, line_no: u64) {
        self.records += 1;
        let name = line.name.as_deref().map(|n| {
            let (capped, cut) = crate::cap_name(n);
            self.names_cut += u64::from(cut);
            capped
        });
        if !self.control_record(line, name.as_deref(), line_no) {
            self.timed_record(line, name, line_no);
        }
    }

    /// Records that describe rather than time: the process, devices, NVTX
    /// range bounds and window closings. False: not one of them.
    fn control_record(&mut self, line: &Line, name: Option<&str>, line_no: u64) -> bool {
        let owned_name = || name.unwrap_or_default().to_string();
        match (line.t.as_ref(), line.id, line.s) {
            ("process", _, _) => {
                if self.run.is_none() {
                    self.run = line.run.as_deref().map(crate::echo);
                }
                if let (None, Some(rank)) = (self.t.rank, line.rank) {
                    if line.world_size.is_none_or(|w| rank < w) {
                        self.t.rank = Some(kopt_model::RankInfo {
                            rank,
                            world_size: line.world_size,
                        });
                    }
                }
            }
            ("range_start", Some(id), Some(s)) => {
                if !usable_ns(s) {
                    self.reject(line_no, format!("range start {s} ns"));
                    return true;
                }
                self.open_window.saw(s, s, false);
                self.open.insert(id, (owned_name(), s, line.tid));
            }
            ("device", Some(id), _) => {
                self.devices
                    .insert(id, DeviceRecord::of(line, owned_name()));
            }
            ("window", _, Some(s)) => {
                let e = line.e.unwrap_or(s);
                let bounds = if usable_ns(s) && usable_ns(e) && s <= e {
                    Some((s, e))
                } else {
                    self.reject(line_no, format!("window {s}..{e} ns"));
                    None
                };
                let left_out = self.open_window.close(&mut self.t, bounds);
                self.incomplete = self.incomplete.saturating_add(left_out);
                self.window += 1;
                // A range still open when its window closed never gets its end here.
                self.open.clear();
            }
            ("range_end", Some(id), Some(e)) => {
                if let Some((name, start_ns, thread)) = self.open.remove(&id) {
                    if usable_ns(e) && e >= start_ns {
                        self.t.ranges.push(Range {
                            name,
                            start_ns,
                            end_ns: e,
                            thread,
                        });
                    } else {
                        let why = format!("range end {e} ns (its start: {start_ns} ns)");
                        self.reject(line_no, why);
                    }
                }
            }
            _ => return false,
        }
        true
    }

    /// Kernels, copies, memsets and API calls (and the closing `end`).
    fn timed_record(&mut self, line: &Line, name: Option<Cow<'_, str>>, line_no: u64) {
        let (Some(s), Some(e)) = (line.s, line.e) else {
            if line.t == "end" {
                self.ended = true;
                self.dropped = line.dropped.unwrap_or(0);
                self.lost_buffers = line.lost_buffers.unwrap_or(0);
            }
            return;
        };
        let kind = match line.t.as_ref() {
            "kernel" => Some(ActivityKind::Kernel),
            "memcpy" => Some(ActivityKind::Memcpy),
            "memset" => Some(ActivityKind::Memset),
            _ => None,
        };
        if kind.is_some() && (s <= 0 || e < s) {
            // CUPTI flushed the record before the GPU wrote its timestamps
            // (a sampled window closing under running kernels).
            self.incomplete += 1;
            return;
        }
        if (kind.is_some() || line.t == "api") && !(usable_ns(s) && usable_ns(e) && s <= e) {
            self.reject(
                line_no,
                format!("{} from {s} to {e} ns", crate::echo(&line.t)),
            );
            return;
        }
        if let Some(why) = kind.and_then(|_| crate::ncu::launch_too_long(s, e)) {
            self.reject(
                line_no,
                format!("{} from {s} to {e} ns: {why}", crate::echo(&line.t)),
            );
            return;
        }
        if kind.is_some() || line.t == "api" {
            self.open_window.saw(s, e, line.t == "api");
        }
        let name = name.unwrap_or_default();
        if let Some(kind) = kind {
            self.activity(line, kind, name, (s, e), line_no);
        } else if line.t == "api" {
            self.t.api_calls.push(ApiCall {
                kind: ApiKind::of(&name),
                name: name.into_owned(),
                start_ns: s,
                end_ns: e,
                thread: line.tid.unwrap_or(0),
                correlation: self.scoped(line.c),
                frame: None,
                op: None,
                op_span: None,
            });
        }
    }

    /// A kernel, copy or memset, its geometry checked.
    fn activity(
        &mut self,
        line: &Line,
        kind: ActivityKind,
        name: Cow<'_, str>,
        (s, e): (i64, i64),
        line_no: u64,
    ) {
        let copy = (kind == ActivityKind::Memcpy)
            .then(|| tracer_copy(&name, line.sk, line.dk))
            .flatten();
        let (mut grid, mut block) = (dim(line.g), dim(line.b));
        if let Some(why) = crate::kineto_events::implausible_dims(grid, block) {
            self.impossible_geometry += 1;
            self.first_impossible_geometry
                .get_or_insert(format!("line {line_no}: {why}"));
            (grid, block) = (None, None);
        }
        let correlation = self.scoped(line.c);
        let name = self.display_name(kind, name);
        self.t.activities.push(GpuActivity {
            kind,
            name,
            start_ns: s,
            end_ns: e,
            device: line.dev.unwrap_or(0),
            stream: line.stream.unwrap_or(0),
            correlation,
            grid,
            block,
            bytes: line.bytes,
            copy,
        });
    }

    /// A kernel's name demangled (once per distinct name), a copy's named
    /// by its direction; a cut name is kept as it is: it is no longer a
    /// whole symbol.
    fn display_name(&mut self, kind: ActivityKind, name: Cow<'_, str>) -> String {
        if kind == ActivityKind::Kernel && name.len() <= crate::MAX_NAME_BYTES {
            if let Some(d) = self.demangled.get(name.as_ref()) {
                return d.clone();
            }
            let (d, over_budget) = demangle_bounded(&name);
            self.names_left_mangled += u64::from(over_budget);
            self.demangled.insert(name.into_owned(), d.clone());
            d
        } else if let Some(named) = copy_name(&name).filter(|_| kind == ActivityKind::Memcpy) {
            named.to_string()
        } else {
            name.into_owned()
        }
    }

    /// The device the most kernels ran on (the lowest id on a tie), or the
    /// first device recorded where no kernel names one.
    fn main_device(&self) -> Option<&DeviceRecord> {
        let mut per: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
        for a in self
            .t
            .activities
            .iter()
            .filter(|a| a.kind == ActivityKind::Kernel)
        {
            *per.entry(a.device).or_default() += 1;
        }
        let busiest = per
            .into_iter()
            .max_by_key(|(d, n)| (*n, std::cmp::Reverse(*d)))
            .map(|(d, _)| d);
        busiest
            .and_then(|d| self.devices.get(&u64::from(d)))
            .or_else(|| {
                self.devices
                    .iter()
                    .min_by_key(|(id, _)| **id)
                    .map(|(_, d)| d)
            })
    }

    fn finish(mut self) -> KoptTrace {
        self.t.ranges.sort_by_key(|r| r.start_ns);
        // Records of a window the run ended in without closing it (no exit handler).
        if !self.t.sampled_windows.is_empty() {
            let left_out = self.open_window.close(&mut self.t, None);
            self.incomplete = self.incomplete.saturating_add(left_out);
        }
        let mut names: Vec<(u32, String)> = self
            .devices
            .iter()
            .filter_map(|(id, d)| Some((u32::try_from(*id).ok()?, d.name.clone())))
            .filter(|(_, n)| !n.trim().is_empty())
            .collect();
        names.sort();
        self.t.device_names = names;
        if let Some(d) = self.main_device().cloned() {
            self.t.device_name = Some(d.name).filter(|n| !n.trim().is_empty());
            self.t.sm_count = d.sms;
            self.t.compute_capability = d.cc;
            self.t.mem_bandwidth_bytes_per_s = d.mem_bw;
            self.t.sm_clock_hz = d.clock_hz;
        }
        KoptTrace {
            timeline: self.t,
            ended: self.ended,
            dropped_records: self.dropped,
            incomplete_records: self.incomplete,
            lost_buffers: self.lost_buffers,
            processes: 1,
            invalid_records: self.invalid,
            first_invalid: self.first_invalid,
            names_cut: self.names_cut,
            impossible_geometry: self.impossible_geometry,
            first_impossible_geometry: self.first_impossible_geometry,
            names_left_mangled: self.names_left_mangled,
            run: self.run,
            merged_files: Vec::new(),
            bare_steps_file: None,
            other_runs_left_out: Vec::new(),
            other_ranks_left_out: Vec::new(),
            repeats_left_out: Vec::new(),
        }
    }
}

pub fn parse_kopt_trace(text: &str, path: &str) -> Result<KoptTrace, IngestError> {
    parse_within(text, path, usize::MAX).map(|(t, _)| t)
}

/// [`parse_kopt_trace`], stopped once it holds more than `room` activities:
/// then what was read so far (its process record, which run and rank it
/// is) and true.
fn parse_within(text: &str, path: &str, room: usize) -> Result<(KoptTrace, bool), IngestError> {
    if text.trim().is_empty() {
        return Err(IngestError::Empty { path: path.into() });
    }
    let mut builder = TraceBuilder::new();
    let mut at = 0usize;
    let mut line_no = 0u64;
    for raw in text.split_inclusive('\n') {
        let line_start = at;
        at += raw.len();
        line_no += 1;
        let last_unterminated = !raw.ends_with('\n');
        if raw.trim().is_empty() {
            continue;
        }
        let line: Line = match serde_json::from_str(raw) {
            Ok(l) => l,
            // A process killed mid-write leaves a cut last line: what came
            // before stands. Only a record's beginning after records read:
            // a file of one broken line is not a trace.
            Err(e)
                if last_unterminated
                    && builder.records > 0
                    && raw.trim_start().starts_with('{')
                    && e.is_eof() =>
            {
                break
            }
            Err(e) => {
                let offset = line_start + e.column().saturating_sub(1);
                return Err(IngestError::at(
                    path,
                    line_no,
                    format!("byte {offset}: expected one kopt trace record (a JSON object): {e}"),
                ));
            }
        };
        builder.record(&line, line_no);
        if builder.t.activities.len() > room {
            return Ok((builder.finish(), true));
        }
    }
    Ok((builder.finish(), false))
}

/// The trace at `path` and those other processes of the same workload wrote
/// beside it (`path.<pid>`), merged into one timeline. Correlation ids are
/// per process: each further process's are moved to their own range so
/// launches still find their kernels.
pub fn read_kopt_trace_set(path: &Path) -> Result<KoptTrace, IngestError> {
    let t = read_kopt_trace_set_whole(path)?;
    crate::budget::check_activities(&t.timeline, &path.display().to_string())?;
    Ok(t)
}

fn read_kopt_trace_set_whole(path: &Path) -> Result<KoptTrace, IngestError> {
    let first = read_trace_file(path, usize::MAX)?;
    let mut merged = first.trace;
    // Past the budget alone: refused before any sibling is read.
    crate::budget::check_activities(&merged.timeline, &path.display().to_string())?;
    let (Some(dir), Some(stem)) = (path.parent(), path.file_name()) else {
        return Ok(merged);
    };
    let stem = stem.to_string_lossy().into_owned();
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let mut others: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .map_err(|source| IngestError::Io {
            path: dir.display().to_string(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix(stem.as_str()))
                .and_then(|rest| rest.strip_prefix('.'))
                .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    others.sort();
    let max =
        usize::try_from(crate::budget::TIMELINE_MAX_ACTIVITIES.checked()?).unwrap_or(usize::MAX);
    // The files merged so far, by identity and by text: one read twice (a
    // link to it, a copy of it) would count its kernels twice.
    let first_name = stem.clone();
    let mut identities: Vec<((u64, u64), String)> = file_identity(path)
        .map(|id| (id, first_name.clone()))
        .into_iter()
        .collect();
    let mut texts: Vec<(u64, String)> = vec![(first.text_hash, first_name.clone())];
    let mut i = 0u64;
    for other in &others {
        let file = other
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let identity = file_identity(other);
        if let Some((_, same)) = identities.iter().find(|(id, _)| Some(*id) == identity) {
            merged
                .repeats_left_out
                .push(format!("{file} (the same file as {same})"));
            continue;
        }
        // Read no further than the budget leaves: memory stays bounded by
        // it however many siblings there are.
        let room = max.saturating_sub(merged.timeline.activities.len());
        let TraceFile {
            trace: next,
            over_room,
            text_hash,
        } = read_trace_file(other, room)?;
        if let Some((_, same)) = texts.iter().find(|(h, _)| *h == text_hash) {
            merged
                .repeats_left_out
                .push(format!("{file} (the same records as {same})"));
            continue;
        }
        // Another run's process (a run id that differs, or one run with an
        // id and the other without) is not part of this workload.
        if next.run != merged.run {
            merged.other_runs_left_out.push(file);
            continue;
        }
        // Another rank of a distributed job is its own timeline: merged,
        // two GPUs' steps would read as one GPU's.
        if next.timeline.rank.map(|r| r.rank) != merged.timeline.rank.map(|r| r.rank) {
            merged.other_ranks_left_out.push(file);
            continue;
        }
        // Another GPU's process would be labelled with the first one's name
        // and its kernels priced on its peaks.
        if let (Some(a), Some(b)) = (
            merged.timeline.device_name.as_deref(),
            next.timeline.device_name.as_deref(),
        ) {
            if a != b {
                return Err(IngestError::Inputs(format!(
                    "{} ran on {} and {} (beside it) on {}: one report is one GPU's; analyze each file alone",
                    crate::one_line(&path.display().to_string()),
                    crate::echo(a),
                    crate::echo(&file),
                    crate::echo(b)
                )));
            }
        }
        if over_room {
            return Err(sibling_past_budget(path, &merged, &file, max));
        }
        identities.extend(identity.map(|id| (id, file.clone())));
        texts.push((text_hash, file.clone()));
        merged.merged_files.push(file);
        i += 1;
        // Ids below 2^48 (32 bits and the window's 16): each process its own
        // block above them (wrapping past 65535 processes, never overflowing).
        let shift = i.wrapping_shl(48);
        let moved = |c: u64| if c == 0 { 0 } else { c.wrapping_add(shift) };
        let t = next.timeline;
        merged
            .timeline
            .activities
            .extend(t.activities.into_iter().map(|mut a| {
                a.correlation = moved(a.correlation);
                a
            }));
        merged
            .timeline
            .api_calls
            .extend(t.api_calls.into_iter().map(|mut c| {
                c.correlation = moved(c.correlation);
                c
            }));
        merged.timeline.ranges.extend(t.ranges);
        merged.timeline.sampled_windows = union_of_windows(
            std::mem::take(&mut merged.timeline.sampled_windows),
            t.sampled_windows,
        );
        if merged.timeline.device_name.is_none() {
            merged.timeline.device_name = t.device_name;
            merged.timeline.sm_count = t.sm_count;
            merged.timeline.compute_capability = t.compute_capability;
            merged.timeline.mem_bandwidth_bytes_per_s = t.mem_bandwidth_bytes_per_s;
            merged.timeline.sm_clock_hz = t.sm_clock_hz;
        }
        merged.ended &= next.ended;
        merged.dropped_records = merged.dropped_records.saturating_add(next.dropped_records);
        merged.incomplete_records = merged
            .incomplete_records
            .saturating_add(next.incomplete_records);
        merged.lost_buffers = merged.lost_buffers.saturating_add(next.lost_buffers);
        merged.invalid_records = merged.invalid_records.saturating_add(next.invalid_records);
        merged.first_invalid = merged.first_invalid.or(next.first_invalid);
        merged.names_cut = merged.names_cut.saturating_add(next.names_cut);
        merged.impossible_geometry = merged
            .impossible_geometry
            .saturating_add(next.impossible_geometry);
        merged.first_impossible_geometry = merged
            .first_impossible_geometry
            .take()
            .or(next.first_impossible_geometry);
        merged.names_left_mangled = merged
            .names_left_mangled
            .saturating_add(next.names_left_mangled);
        merged.processes = merged.processes.saturating_add(1);
    }
    if !merged.merged_files.is_empty() {
        merged.timeline.activities.sort_by_key(|a| a.start_ns);
        merged.timeline.api_calls.sort_by_key(|c| c.start_ns);
        merged.timeline.ranges.sort_by_key(|r| r.start_ns);
    }
    let bare = bare_steps_beside(dir, &stem);
    if bare.is_file() {
        merged.timeline.bare_steps = read_bare_steps(&bare)?;
        if merged.timeline.bare_steps.is_some() {
            merged.bare_steps_file = bare.file_name().map(|n| n.to_string_lossy().into_owned());
        }
    }
    Ok(merged)
}

/// The refusal of a trace set whose sibling `file` takes it past the
/// activity budget `max`, said when that sibling is read.
fn sibling_past_budget(path: &Path, merged: &KoptTrace, file: &str, max: usize) -> IngestError {
    let budget = crate::budget::TIMELINE_MAX_ACTIVITIES;
    IngestError::format(
        &path.display().to_string(),
        format!(
            "with {} beside it, more than {max} GPU activities ({} in the {} file(s) merged before it): more than the timeline budget of {max}, not analysed; record fewer steps or sample (kopt trace --sample), or {}",
            crate::echo(file),
            merged.timeline.activities.len(),
            merged.merged_files.len() + 1,
            budget.how_to_raise_above(max as u64)
        ),
    )
}

/// Where the bare run's steps of the trace named `trace_name` in `dir` lie:
/// `<w>.bare_steps.jsonl` for a trace kept as `<w>.trace.jsonl` or
/// `<w>.trace.jsonl.gz` (a run's files copied out under the workload's
/// name), else the run folder's own `bare_steps.jsonl`.
pub fn bare_steps_beside(dir: &Path, trace_name: &str) -> std::path::PathBuf {
    let workload = [".trace.jsonl", ".trace.jsonl.gz"]
        .iter()
        .find_map(|ext| trace_name.strip_suffix(ext))
        .filter(|w| !w.is_empty());
    match workload {
        Some(w) => dir.join(format!("{w}.{BARE_STEPS_FILE}")),
        None => dir.join(BARE_STEPS_FILE),
    }
}

/// One line of `bare_steps.jsonl`:
/// `{"t":"bare_step","pid":P,"name":N,"s":S,"e":E}`.
#[derive(Deserialize)]
struct BareStepLine {
    #[serde(default)]
    pid: u32,
    name: String,
    s: i64,
    e: i64,
    /// Timed by kopt's module driver after the tracer stopped, in the
    /// traced process.
    #[serde(default)]
    in_process: bool,
}

/// One line of a sync-only bare run: `{"t":"bare_sync","pid":P,"e":E}`,
/// the end of one of the host's synchronising calls.
#[derive(Deserialize)]
struct BareSyncLine {
    #[serde(default)]
    pid: u32,
    e: i64,
}

/// One mark of a launch-count bare run:
/// `{"t":"bare_launch","pid":P,"every":N,"n":ORDINAL,"e":E}`, the start of
/// the process's ORDINAL-th launch call (every N-th is marked).
#[derive(Deserialize)]
struct BareLaunchLine {
    #[serde(default)]
    pid: u32,
    every: u64,
    n: u64,
    e: i64,
}

/// The longest step a bare run may time: a day. A training or inference
/// step runs milliseconds to minutes; more is a broken clock or an edited file.
pub const MAX_BARE_STEP_NS: i64 = 86_400 * 1_000_000_000;

/// Why a bare step's start and end cannot be one step's, if they cannot.
fn implausible_step(s: i64, e: i64) -> Option<String> {
    if !(usable_ns(s) && usable_ns(e)) {
        Some("a time outside the clock's range".into())
    } else if e < s {
        Some("it ends before it starts".into())
    } else if e == s {
        Some("a step of no time".into())
    } else if e - s > MAX_BARE_STEP_NS {
        Some(format!("{} s, longer than a day", (e - s) / 1_000_000_000))
    } else {
        None
    }
}

/// A regular file read whole, refused past `budget` bytes.
fn read_within(
    path: &Path,
    label: &str,
    budget: &crate::budget::Budget,
) -> Result<Vec<u8>, IngestError> {
    use std::io::Read;
    let max = budget.checked()?;
    let mut bytes = Vec::new();
    crate::open_regular(path, label)?
        .take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| IngestError::Io {
            path: label.to_string(),
            source,
        })?;
    if bytes.len() as u64 > max {
        // The file's size is what it needs (read only as far as the cap).
        let how = match std::fs::metadata(path) {
            Ok(m) if m.len() > max => budget.how_to_raise_to(m.len()),
            _ => budget.how_to_raise(),
        };
        return Err(IngestError::format(
            label,
            format!("more than {max} bytes: not read (size budget); {how}"),
        ));
    }
    Ok(bytes)
}

/// Read the step ranges a bare run timed (kopt's tracer as NVTX injection
/// only, no CUPTI), or the ends of the synchronising calls a sync-only bare
/// run timed (range `BARE_SYNC_RANGE`). Lines of other kinds are skipped; a
/// malformed step or sync line is an error with its line number. Steps are grouped by process and range
/// family (`step#3` is a `step`); the largest group is the run's. None when
/// no step was recorded.
pub fn read_bare_steps(path: &Path) -> Result<Option<kopt_model::BareSteps>, IngestError> {
    #[derive(Deserialize)]
    struct Kind {
        t: String,
    }
    let label = path.display().to_string();
    let bytes = read_within(path, &label, &crate::budget::BARE_STEPS_MAX_BYTES)?;
    let max_records = crate::budget::BARE_STEPS_MAX_RECORDS.checked()?;
    let mut records = 0u64;
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        IngestError::at(
            &label,
            1,
            format!("invalid UTF-8 at byte {}", e.valid_up_to()),
        )
    })?;
    let mut groups: std::collections::BTreeMap<(u32, String), Vec<(i64, i64)>> = Default::default();
    let mut in_process: std::collections::BTreeMap<(u32, String), bool> = Default::default();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = |e: serde_json::Error| {
            IngestError::at(&label, i as u64 + 1, format!("not a bare-step line: {e}"))
        };
        let kind = serde_json::from_str::<Kind>(line).map_err(at)?.t;
        if matches!(kind.as_str(), "bare_sync" | "bare_launch" | "bare_step") {
            records += 1;
            if records > max_records {
                return Err(IngestError::at(
                    &label,
                    i as u64 + 1,
                    format!(
                        "more than {max_records} bare-run records: not read (a bare run times a few thousand steps); {}",
                        crate::budget::BARE_STEPS_MAX_RECORDS.how_to_raise()
                    ),
                ));
            }
        }
        if kind == "bare_sync" {
            let l: BareSyncLine = serde_json::from_str(line).map_err(at)?;
            if !usable_ns(l.e) {
                return Err(IngestError::at(
                    &label,
                    i as u64 + 1,
                    format!("sync end out of range: {} ns", l.e),
                ));
            }
            groups
                .entry((l.pid, kopt_model::BARE_SYNC_RANGE.to_string()))
                .or_default()
                .push((l.e, l.e));
            continue;
        }
        if kind == "bare_launch" {
            let l: BareLaunchLine = serde_json::from_str(line).map_err(at)?;
            let ordinal = i64::try_from(l.n).ok().filter(|_| l.every > 0);
            let Some(ordinal) = ordinal.filter(|_| usable_ns(l.e)) else {
                return Err(IngestError::at(
                    &label,
                    i as u64 + 1,
                    format!(
                        "launch mark out of range: launch {} of every {} at {} ns",
                        l.n, l.every, l.e
                    ),
                ));
            };
            groups
                .entry((l.pid, kopt_model::bare_launch_range(l.every)))
                .or_default()
                .push((l.e, ordinal));
            continue;
        }
        if kind != "bare_step" {
            continue;
        }
        let l: BareStepLine = serde_json::from_str(line).map_err(at)?;
        if let Some(why) = implausible_step(l.s, l.e) {
            return Err(IngestError::at(
                &label,
                i as u64 + 1,
                format!(
                    "step times out of range: start {} ns, end {} ns ({why})",
                    l.s, l.e
                ),
            ));
        }
        let family = kopt_model::range_family(&l.name).to_string();
        // A group is in-process only when every line of it says so.
        let flag = in_process.entry((l.pid, family.clone())).or_insert(true);
        *flag &= l.in_process;
        groups.entry((l.pid, family)).or_default().push((l.s, l.e));
    }
    Ok(groups
        .into_iter()
        .max_by_key(|(_, v)| v.len())
        .map(|(key, mut spans_ns)| {
            spans_ns.sort_unstable();
            kopt_model::BareSteps {
                in_process: in_process.get(&key).copied().unwrap_or(false),
                range: key.1,
                spans_ns,
            }
        }))
}

/// The windows two processes' traces cover together. A continuous trace
/// (no windows) covers everything, and so does the union.
fn union_of_windows(a: Vec<(i64, i64)>, b: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    if a.is_empty() || b.is_empty() {
        return Vec::new();
    }
    let mut all: Vec<(i64, i64)> = a.into_iter().chain(b).collect();
    all.sort_unstable();
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(all.len());
    for (s, e) in all {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

pub fn read_kopt_trace(path: &Path) -> Result<KoptTrace, IngestError> {
    Ok(read_trace_file(path, usize::MAX)?.trace)
}

/// One trace file as the set reader sees it.
struct TraceFile {
    trace: KoptTrace,
    /// It held more activities than the room it was given: `trace` is cut.
    over_room: bool,
    /// A hash of its text (decompressed): a copy of a file reads the same.
    text_hash: u64,
}

/// `path` read (decompressed when gzipped) and parsed, stopped past `room`
/// activities ([`parse_within`]).
fn read_trace_file(path: &Path, room: usize) -> Result<TraceFile, IngestError> {
    let label = path.display().to_string();
    let bytes = crate::read_regular(path, &label)?;
    // A gzipped trace (`trace.jsonl.gz`, kept small as a fixture or an
    // attachment) is decompressed first, with the Kineto reader's bounds.
    let plain = if bytes.starts_with(&crate::kineto::GZIP_MAGIC) {
        crate::kineto::gunzip(
            bytes.as_slice(),
            bytes.len() as u64,
            crate::kineto::gzip_size_hint(&bytes),
            &label,
        )?
    } else {
        bytes
    };
    let text_hash = {
        use std::hash::Hasher;
        let mut h = std::hash::DefaultHasher::new();
        h.write(&plain);
        h.finish()
    };
    let text = std::str::from_utf8(&plain).map_err(|_| ());
    let (trace, over_room) = match text {
        Ok(text) => parse_within(text, &label, room)?,
        // The UTF-8 error, with its line and offset.
        Err(()) => (parse_kopt_trace_bytes(&plain, &label)?, false),
    };
    Ok(TraceFile {
        trace,
        over_room,
        text_hash,
    })
}

/// The file `path` names (device and inode, through symlinks), where the
/// system says.
fn file_identity(path: &Path) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"{"t":"api","name":"cudaLaunchKernel_v7000","s":1000,"e":6000,"tid":42,"c":7}
{"t":"kernel","name":"_Z14kopt_tiny_stepPi","s":9000,"e":11500,"dev":0,"str":7,"c":7,"g":[1,1,1],"b":[32,1,1],"reg":16,"smem":0,"graph":0}
{"t":"memset","name":"Memset","s":12000,"e":12600,"dev":0,"str":7,"c":8,"bytes":4}
{"t":"end","records":3,"dropped":0}
"#;

    /// The builder's steps on their own: the scoped correlation id carries
    /// the window, the main device is the one most kernels ran on, and a
    /// kernel name is demangled once however often it repeats.
    #[test]
    fn builder_steps_scope_ids_pick_the_busiest_device_and_demangle_once() {
        let mut b = TraceBuilder::new();
        let lines = [
            r#"{"t":"device","id":0,"name":"GPU zero","sms":10}"#,
            r#"{"t":"device","id":1,"name":"GPU one","sms":20}"#,
            r#"{"t":"kernel","name":"_Z1fv","s":10,"e":20,"dev":1,"c":3}"#,
            r#"{"t":"kernel","name":"_Z1fv","s":30,"e":40,"dev":1,"c":4}"#,
            r#"{"t":"kernel","name":"_Z1gv","s":50,"e":60,"dev":0,"c":5}"#,
        ];
        for (i, l) in lines.iter().enumerate() {
            let line: Line = serde_json::from_str(l).unwrap();
            b.record(&line, i as u64 + 1);
        }
        assert_eq!(b.scoped(Some(7)), 7);
        b.window = 2;
        assert_eq!(b.scoped(Some(7)), 7 | (2 << 32));
        assert_eq!(b.scoped(None), 0, "no correlation stays none");
        assert_eq!(b.main_device().map(|d| d.name.as_str()), Some("GPU one"));
        assert_eq!(
            b.demangled.len(),
            2,
            "two distinct kernels, demangled once each"
        );
        let t = b.finish().timeline;
        assert_eq!(t.sm_count, Some(20));
        assert_eq!(t.activities[0].name, "f()");
        // No kernels at all: the first device recorded is named.
        let mut b = TraceBuilder::new();
        for l in [
            r#"{"t":"device","id":3,"name":"later"}"#,
            r#"{"t":"device","id":2,"name":"first"}"#,
        ] {
            b.record(&serde_json::from_str(l).unwrap(), 1);
        }
        assert_eq!(b.main_device().map(|d| d.name.as_str()), Some("first"));
    }

    #[test]
    fn ranges_keep_the_thread_that_opened_them() {
        let text = r#"{"t":"range_start","id":1,"s":100,"tid":42,"name":"step"}
{"t":"range_end","id":1,"s":200}
{"t":"range_start","id":2,"s":300,"name":"step"}
{"t":"range_end","id":2,"s":400}
"#;
        let t = parse_kopt_trace(text, "r.jsonl").unwrap().timeline;
        let threads: Vec<Option<u64>> = t.ranges.iter().map(|r| r.thread).collect();
        assert_eq!(threads, vec![Some(42), None]);
    }

    /// #39: records with impossible times (a range ending before it
    /// starts) were counted and then never said: a note names them.
    #[test]
    fn ranges_ending_before_they_start_are_said() {
        let text = r#"{"t":"range_start","id":1,"s":500,"tid":1,"name":"step"}
{"t":"range_end","id":1,"s":200}
{"t":"range_start","id":2,"s":600,"tid":1,"name":"step"}
{"t":"range_end","id":2,"s":900}
{"t":"kernel","name":"k","s":610,"e":620,"dev":0,"str":7,"c":1}
"#;
        let t = parse_kopt_trace(text, "r.jsonl").unwrap();
        assert_eq!(t.timeline.ranges.len(), 1);
        let f = t.source_format();
        assert!(
            f.contains("1 record(s) left out for impossible times")
                && f.contains("line 2: range end 200 ns (its start: 500 ns)"),
            "{f}"
        );
    }

    #[test]
    fn copies_carry_their_direction_and_memory_kinds() {
        use kopt_model::CopyDirection;
        let text = r#"{"t":"memcpy","name":"Memcpy kind 1","s":100,"e":200,"dev":0,"str":7,"c":1,"bytes":64,"sk":1,"dk":3}
{"t":"memcpy","name":"Memcpy kind 2","s":300,"e":400,"dev":0,"str":7,"c":2,"bytes":64,"sk":3,"dk":2}
{"t":"memcpy","name":"Memcpy kind 8","s":500,"e":600,"dev":0,"str":7,"c":3,"bytes":64,"sk":3,"dk":3}
{"t":"memcpy","name":"Memcpy kind 1","s":700,"e":800,"dev":0,"str":7,"c":4,"bytes":64}
{"t":"memcpy","name":"Memcpy kind 1","s":900,"e":950,"dev":0,"str":7,"c":5,"bytes":64,"sk":5,"dk":99}
{"t":"memset","name":"Memset","s":960,"e":970,"dev":0,"str":7,"c":6,"bytes":4}
{"t":"end","records":6,"dropped":0}
"#;
        let t = parse_kopt_trace(text, "copies.jsonl").unwrap().timeline;
        let kinds: Vec<_> = t
            .activities
            .iter()
            .map(|a| a.copy.map(|c| (c.direction, c.src, c.dst)))
            .collect();
        use CopyDirection as D;
        use MemoryKind as M;
        assert_eq!(
            kinds,
            vec![
                Some((D::HostToDevice, M::Pageable, M::Device)),
                Some((D::DeviceToHost, M::Device, M::Pinned)),
                Some((D::DeviceToDevice, M::Device, M::Device)),
                // A trace written before the tracer recorded memory kinds.
                Some((D::HostToDevice, M::Unknown, M::Unknown)),
                // Managed memory; a kind CUPTI may add later is unknown, not an error.
                Some((D::HostToDevice, M::Managed, M::Unknown)),
                None,
            ]
        );
    }

    #[test]
    fn a_gzipped_trace_reads_as_the_plain_one() {
        use std::io::Write;
        let d = tempfile::tempdir().unwrap();
        let plain = d.path().join("t.jsonl");
        std::fs::write(&plain, SAMPLE).unwrap();
        let gz = d.path().join("t.jsonl.gz");
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(SAMPLE.as_bytes()).unwrap();
        std::fs::write(&gz, e.finish().unwrap()).unwrap();
        let (a, b) = (
            read_kopt_trace(&plain).unwrap(),
            read_kopt_trace(&gz).unwrap(),
        );
        assert_eq!(a.timeline, b.timeline);
        assert_eq!(b.timeline.activities.len(), 2);
    }

    #[test]
    fn sampled_windows_scope_correlations_and_ranges() {
        // Two windows; CUPTI numbered both from 1 again after detaching. The
        // range opened in the first window closes (same id) in the second:
        // not one range. A kernel flushed before its timestamps is skipped.
        let text = r#"{"t":"process","pid":10}
{"t":"range_start","id":3,"s":90,"tid":1,"name":"step","dom":""}
{"t":"api","name":"cuLaunchKernel","s":100,"e":105,"tid":1,"c":1}
{"t":"kernel","name":"first","s":110,"e":120,"dev":0,"str":7,"c":1}
{"t":"kernel","name":"cut","s":0,"e":0,"dev":0,"str":7,"c":2}
{"t":"window","s":50,"e":200}
{"t":"api","name":"cuLaunchKernel","s":5000,"e":5005,"tid":1,"c":1}
{"t":"kernel","name":"second","s":5010,"e":5030,"dev":0,"str":7,"c":1}
{"t":"kernel","name":"early","s":4899,"e":4950,"dev":0,"str":7,"c":2}
{"t":"range_end","id":3,"s":5040}
{"t":"window","s":4900,"e":5100}
{"t":"end","records":6,"dropped":0}
"#;
        let t = parse_kopt_trace(text, "trace.jsonl").unwrap();
        let tl = &t.timeline;
        assert_eq!(
            tl.sampled_windows,
            vec![(100, 200), (5000, 5100)],
            "a window starts at its first launch call"
        );
        let names: Vec<&str> = tl.activities.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, vec!["first", "second"]);
        assert_eq!(
            (t.dropped_records, t.incomplete_records),
            (0, 2),
            "the kernel without timestamps and the one launched before the window's first call"
        );
        assert_ne!(tl.activities[0].correlation, tl.activities[1].correlation);
        for (k, call) in tl.activities.iter().zip(&tl.api_calls) {
            assert_eq!(
                k.correlation, call.correlation,
                "{} finds its own launch",
                k.name
            );
        }
        assert!(tl.ranges.is_empty(), "no range across windows");
    }

    #[test]
    fn a_sampled_run_that_died_keeps_its_last_open_window() {
        let text = r#"{"t":"kernel","name":"a","s":110,"e":120,"dev":0,"str":7,"c":1}
{"t":"window","s":100,"e":200}
{"t":"kernel","name":"b","s":5010,"e":5030,"dev":0,"str":7,"c":1}
"#;
        let t = parse_kopt_trace(text, "trace.jsonl").unwrap();
        assert!(!t.ended);
        assert_eq!(t.timeline.sampled_windows, vec![(110, 200), (5010, 5030)]);
    }

    #[test]
    fn windows_of_two_processes_join() {
        assert_eq!(
            union_of_windows(vec![(0, 10), (100, 110)], vec![(5, 20), (200, 210)]),
            vec![(0, 20), (100, 110), (200, 210)]
        );
        assert!(
            union_of_windows(vec![(0, 10)], Vec::new()).is_empty(),
            "a continuous trace covers all"
        );
    }

    #[test]
    fn traces_of_several_processes_merge_with_their_own_correlations() {
        let dir = tempfile::tempdir().unwrap();
        let one = r#"{"t":"process","pid":10}
{"t":"api","name":"cudaLaunchKernel","s":100,"e":105,"tid":1,"c":1}
{"t":"kernel","name":"first","s":110,"e":120,"dev":0,"str":7,"c":1}
{"t":"end","records":2,"dropped":0}
"#;
        let two = r#"{"t":"process","pid":11}
{"t":"api","name":"cudaLaunchKernel","s":50,"e":55,"tid":2,"c":1}
{"t":"kernel","name":"second","s":60,"e":90,"dev":0,"str":7,"c":1}
"#;
        std::fs::write(dir.path().join("trace.jsonl"), one).unwrap();
        std::fs::write(dir.path().join("trace.jsonl.11"), two).unwrap();
        std::fs::write(dir.path().join("trace.log"), "not a trace").unwrap();
        let t = read_kopt_trace_set(&dir.path().join("trace.jsonl")).unwrap();
        assert_eq!(t.processes, 2);
        assert!(!t.ended, "the second process never wrote its end record");
        let names: Vec<&str> = t
            .timeline
            .activities
            .iter()
            .map(|a| a.name.as_str())
            .collect();
        assert_eq!(
            names,
            vec!["second", "first"],
            "one timeline, in time order"
        );
        let (k2, k1) = (&t.timeline.activities[0], &t.timeline.activities[1]);
        assert_ne!(k1.correlation, k2.correlation);
        for k in [k1, k2] {
            let launch = t
                .timeline
                .api_calls
                .iter()
                .find(|c| c.correlation == k.correlation);
            assert!(launch.is_some_and(|c| c.start_ns < k.start_ns));
        }
    }

    #[test]
    fn the_device_the_kernels_ran_on_names_the_trace() {
        let text = r#"{"t":"device","id":0,"name":"NVIDIA H200","sms":132,"cc":[9,0],"mem_bw_kbs":4800000000,"clock_khz":1980000}
{"t":"device","id":1,"name":"NVIDIA H100 80GB HBM3","sms":132,"cc":[9,0],"mem_bw_kbs":3350000000,"clock_khz":1980000}
{"t":"kernel","name":"k","s":10,"e":20,"dev":1,"str":7,"c":1}
{"t":"end","records":3,"dropped":0}
"#;
        let t = parse_kopt_trace(text, "trace.jsonl").unwrap().timeline;
        assert_eq!(t.device_name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
        assert_eq!(t.sm_count, Some(132));
        assert_eq!(t.compute_capability.as_deref(), Some("9.0"));
        assert_eq!(t.mem_bandwidth_bytes_per_s, Some(3.35e12));
        assert_eq!(t.sm_clock_hz, Some(1.98e9));
        assert_eq!(t.recorder, kopt_model::Recorder::KoptTracer);
    }

    #[test]
    fn copies_are_named_by_kind() {
        let text = r#"{"t":"memcpy","name":"Memcpy kind 8","s":10,"e":20,"dev":0,"str":7,"c":1,"bytes":64}
{"t":"memcpy","name":"Memcpy kind 1","s":30,"e":40,"dev":0,"str":7,"c":2,"bytes":64}
{"t":"memcpy","name":"Memcpy kind 10","s":50,"e":60,"dev":0,"str":7,"c":3,"bytes":64}
{"t":"memcpy","name":"Memcpy kind 77","s":70,"e":80,"dev":0,"str":7,"c":4,"bytes":64}
"#;
        let t = parse_kopt_trace(text, "trace.jsonl").unwrap().timeline;
        let names: Vec<&str> = t.activities.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "Memcpy DtoD",
                "Memcpy HtoD",
                "Memcpy PtoP",
                "Memcpy kind 77"
            ]
        );
    }

    #[test]
    fn nvtx_ranges_pair_by_id() {
        let text = r#"{"t":"range_start","id":2,"s":100,"tid":1,"name":"step","dom":""}
{"t":"range_start","id":3,"s":150,"tid":1,"name":"inner","dom":""}
{"t":"range_end","id":3,"s":180}
{"t":"range_end","id":2,"s":200}
{"t":"range_start","id":4,"s":300,"tid":1,"name":"never closed","dom":""}
{"t":"end","records":5,"dropped":0}
"#;
        let t = parse_kopt_trace(text, "trace.jsonl").unwrap().timeline;
        let got: Vec<(&str, i64, i64)> = t
            .ranges
            .iter()
            .map(|r| (r.name.as_str(), r.start_ns, r.end_ns))
            .collect();
        assert_eq!(got, vec![("step", 100, 200), ("inner", 150, 180)]);
    }

    #[test]
    fn parses_and_demangles() {
        let t = parse_kopt_trace(SAMPLE, "trace.jsonl").unwrap();
        assert!(t.ended);
        assert_eq!(t.timeline.activities.len(), 2);
        assert_eq!(t.timeline.activities[0].name, "kopt_tiny_step(int*)");
        assert_eq!(
            t.timeline.activities[0].grid,
            Some(Dim3 { x: 1, y: 1, z: 1 })
        );
        assert_eq!(t.timeline.api_calls[0].kind, ApiKind::KernelLaunch);
        assert_eq!(demangle("kopt_copy"), "kopt_copy");
    }

    #[test]
    fn a_cut_last_line_is_dropped_and_the_missing_end_reported() {
        let cut = &SAMPLE[..SAMPLE.find("{\"t\":\"end\"").unwrap() + 10];
        let t = parse_kopt_trace(cut, "trace.jsonl").unwrap();
        assert!(!t.ended);
        assert_eq!(t.timeline.activities.len(), 2);
    }

    #[test]
    fn garbage_in_the_middle_names_the_line() {
        let bad = SAMPLE.replacen("{\"t\":\"memset\"", "not json {", 1);
        let e = parse_kopt_trace(&bad, "trace.jsonl")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("trace.jsonl:3: "), "{e}");
    }

    #[test]
    fn a_number_past_usize_is_left_mangled_not_a_panic() {
        // `T<n>_` with n = usize::MAX: cpp_demangle's n + 1 overflowed.
        let name = "_Z1fIT18446744073709551615_EvT_";
        assert_eq!(demangle_bounded(name), (name.to_string(), true));
        // Real names keep demangling.
        assert_eq!(demangle("_Z3fooi"), "foo(int)");
    }
}
