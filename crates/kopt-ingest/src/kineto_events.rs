//! The events of a Kineto trace, as both readers hand them on: the raw text
//! of the fields kopt keeps ([`Fields`]) and what is made of them
//! ([`Collector`]: GPU activities, API calls, steps, and what was skipped).
//! Below both the serde reader (`kineto`) and the fast scanner
//! (`kineto_fast`), so neither imports the other for it.

use std::borrow::Cow;

use kopt_model::{ActivityKind, ApiCall, ApiKind, Dim3, GpuActivity, Range, Timeline};
use serde::Deserialize;

/// The raw text of the fields an event may carry.
#[derive(Default)]
pub(crate) struct Fields<'a> {
    pub ph: Option<&'a str>,
    pub cat: Option<&'a str>,
    pub name: Option<Cow<'a, str>>,
    pub ts: Option<&'a str>,
    pub dur: Option<&'a str>,
    pub tid: Option<&'a str>,
    pub correlation: Option<&'a str>,
    pub stream: Option<&'a str>,
    pub device: Option<&'a str>,
    pub grid: Option<&'a str>,
    pub block: Option<&'a str>,
    pub bytes: Option<&'a str>,
    /// A collective kernel's message (torch writes them on NCCL kernels):
    /// `In msg nelems`, `Out msg nelems`, `dtype`, `Collective name`.
    pub in_nelems: Option<&'a str>,
    pub out_nelems: Option<&'a str>,
    pub dtype: Option<&'a str>,
    pub collective: Option<&'a str>,
}

#[derive(Deserialize)]
pub(crate) struct DeviceProp<'a> {
    #[serde(default)]
    id: Option<u32>,
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, rename = "numSms")]
    num_sms: Option<u32>,
    #[serde(default, rename = "computeMajor")]
    compute_major: Option<u32>,
    #[serde(default, rename = "computeMinor")]
    compute_minor: Option<u32>,
}

impl DeviceProp<'_> {
    pub(crate) fn fill(self, t: &mut Timeline) {
        t.device_name = self.name.map(Cow::into_owned);
        t.sm_count = self.num_sms;
        t.compute_capability = self
            .compute_major
            .map(|major| format!("{major}.{}", self.compute_minor.unwrap_or(0)));
    }
}

/// Microseconds as JSON text ("4784577684397.93") to integer nanoseconds.
pub fn us_text_to_ns(text: &str) -> Option<i64> {
    let t = text.trim().trim_matches('"');
    if t.contains(['e', 'E']) {
        // Exponent notation: no exact digits to keep; the rare case goes
        // through f64, and only a finite value that fits comes back.
        let ns = (t.parse::<f64>().ok()? * 1000.0).round();
        return (ns.is_finite() && ns.abs() < 9.0e18).then_some(ns as i64);
    }
    let (neg, t) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t),
    };
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let int: i64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut ns_frac = 0i64;
    for (c, scale) in frac.chars().zip([100, 10, 1]) {
        ns_frac += i64::from(c.to_digit(10)?) * scale;
    }
    if !frac.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let v = int.checked_mul(1000)?.checked_add(ns_frac)?;
    Some(if neg { -v } else { v })
}

/// The least slack around the profiler's span before an event counts as
/// outside it: 1 ms (the GPU's and the host's clocks are aligned to within
/// microseconds; the last activities are flushed after the span closes).
const SPAN_SLACK_NS: i64 = 1_000_000;

/// The events found outside the profiler's span, counted as they are dropped.
struct Outside {
    count: u64,
    first: Option<String>,
    span: (i64, i64),
}

impl Outside {
    /// Whether an event from `s` to `e` lies within `lo..=hi`; counts it if not.
    fn keep(&mut self, name: &str, s: i64, e: i64, lo: i64, hi: i64) -> bool {
        if s >= lo && e <= hi {
            return true;
        }
        self.count += 1;
        if self.first.is_none() {
            let (start, end) = self.span;
            self.first = Some(format!(
                "\"{}\": {s}..{e} ns lies outside the profiler's span {start}..{end} ns",
                crate::echo(name)
            ));
        }
        false
    }
}

/// The profiler's own span event: `"cat": "Trace"`.
fn is_span(cat: &str) -> bool {
    cat.eq_ignore_ascii_case("Trace")
}

/// The largest timestamp or duration kopt accepts, in nanoseconds (about
/// 146 years: epoch times until 2116). Both are non-negative, so a start
/// plus a duration, and the difference of any two such times, fit in an `i64`.
pub(crate) const MAX_TIME_NS: i64 = (1 << 62) - 1;

/// Collects the events kopt uses while the events are walked (by serde or the fast scanner).
#[derive(Default)]
pub(crate) struct Collector {
    pub(crate) timeline: Timeline,
    pub(crate) events: u64,
    /// Events of kept kinds with an unusable `ts` / `dur`, and the first one's index and fault.
    pub(crate) skipped: u64,
    pub(crate) first_skipped: Option<(u64, String)>,
    pub(crate) names_cut: u64,
    /// `ProfilerStep#N` as the GPU saw it (`gpu_user_annotation`): torch
    /// writes each step twice, on the CPU and on the GPU; these are kept
    /// only where the CPU copy is missing (see [`Collector::finish_steps`]).
    pub(crate) gpu_steps: Vec<Range>,
    /// The profiler's own span (`cat: "Trace"`, "PyTorch Profiler (0)"):
    /// start and end in ns, the first one seen.
    pub(crate) span: Option<(i64, i64)>,
    /// Values of kept events left unknown as implausible (grid or block
    /// dimensions, byte counts), and the first one's index and fault.
    pub(crate) unknown_values: u64,
    pub(crate) first_unknown: Option<(u64, String)>,
    /// The user's Python frames (`python_function` events outside
    /// libraries, from `with_stack=True`) and the ops that sync with the
    /// host (`cpu_op`): what a sync or copy call is named after.
    pub(crate) frames: Vec<Span>,
    pub(crate) sync_ops: Vec<Span>,
    /// The autograd engine's ops (thread, start, end): the backward phase.
    pub(crate) autograd_ops: Vec<(u64, i64, i64)>,
}

/// torch.profiler's `distributedInfo`: the rank and world size of the
/// process that wrote the trace.
#[derive(Deserialize)]
pub(crate) struct DistributedInfo {
    #[serde(default)]
    rank: Option<u32>,
    #[serde(default)]
    world_size: Option<u32>,
}

impl DistributedInfo {
    /// Into the timeline, when the rank is there and inside the world.
    pub(crate) fn fill(self, t: &mut Timeline) {
        if let Some(rank) = self.rank {
            if self.world_size.is_none_or(|w| rank < w) {
                t.rank = Some(kopt_model::RankInfo {
                    rank,
                    world_size: self.world_size,
                });
            }
        }
    }
}

/// Bytes of one element of torch's scalar type as the profiler names it.
fn dtype_bytes(dtype: &str) -> Option<u64> {
    Some(match dtype.trim().trim_matches('"') {
        "Double" | "Long" | "ComplexFloat" | "UInt64" => 8,
        "Float" | "Int" | "UInt32" | "ComplexHalf" => 4,
        "Half" | "BFloat16" | "Short" | "UInt16" => 2,
        "Byte" | "Char" | "Bool" | "Float8_e4m3fn" | "Float8_e5m2" => 1,
        _ => return None,
    })
}

/// A collective kernel's message fields, as the trace wrote them.
struct CollectiveArgs<'a> {
    in_nelems: Option<&'a str>,
    out_nelems: Option<&'a str>,
    dtype: Option<&'a str>,
    collective: Option<&'a str>,
}

/// A collective kernel's message size in bytes, nccl-tests' convention:
/// the output of an all-gather, the input of every other op.
fn collective_bytes(e: &CollectiveArgs, name: &str) -> Option<u64> {
    let size = dtype_bytes(e.dtype?)?;
    let gather = e
        .collective
        .map(|c| {
            c.trim_matches('"')
                .to_ascii_lowercase()
                .contains("allgather")
        })
        .unwrap_or_else(|| name.contains("AllGather"));
    let nelems = if gather { e.out_nelems } else { e.in_nelems };
    text_u64(nelems)?.checked_mul(size)
}

/// A host-side event by thread and time: `name` is a user frame
/// (`file.py:LINE in function`) or an op name.
#[derive(Debug, Clone)]
pub(crate) struct Span {
    pub tid: u64,
    pub start_ns: i64,
    pub end_ns: i64,
    pub name: String,
}

/// Ops whose CUDA kernels make the host wait (a value read back, a shape
/// that depends on data, a blocking copy).
const SYNC_OPS: &[&str] = &[
    "aten::item",
    "aten::_local_scalar_dense",
    "aten::is_nonzero",
    "aten::nonzero",
    "aten::nonzero_static",
    "aten::argwhere",
    "aten::masked_select",
    "aten::index",
    "aten::index_put_",
    "aten::unique",
    "aten::_unique2",
    "aten::unique_consecutive",
    "aten::repeat_interleave",
    "aten::tolist",
    "aten::equal",
    "aten::to",
    "aten::_to_copy",
    "aten::copy_",
];

/// torch.optim's annotations of its step and zero_grad.
fn is_optimizer_phase(name: &str) -> bool {
    name.starts_with("Optimizer.step#")
        || name.starts_with("Optimizer.zero_grad#")
        || name.starts_with(DATA_PHASE)
}

/// torch's annotation of a DataLoader's `__next__` (a step's data phase).
const DATA_PHASE: &str = "enumerate(DataLoader)#";

/// The autograd engine's op around each backward function; their union
/// on a thread is the backward phase of a Kineto trace without kopt's
/// markers (the phase range `BACKWARD_PHASE`).
const AUTOGRAD_OP: &str = "autograd::engine::evaluate_function";

use kopt_model::BACKWARD_PHASE;

/// The union of the autograd ops' intervals per thread, as backward
/// phase ranges.
fn backward_ranges(mut v: Vec<(u64, i64, i64)>) -> Vec<Range> {
    v.sort_unstable();
    let mut out: Vec<Range> = Vec::new();
    let mut cur: Option<(u64, i64, i64)> = None;
    for (tid, s, e) in v {
        match &mut cur {
            Some((t, _, ce)) if *t == tid && s <= *ce => *ce = (*ce).max(e),
            _ => {
                if let Some((_, cs, ce)) = cur.take() {
                    out.push(Range {
                        name: BACKWARD_PHASE.into(),
                        start_ns: cs,
                        end_ns: ce,
                        thread: None,
                    });
                }
                cur = Some((tid, s, e));
            }
        }
    }
    if let Some((_, cs, ce)) = cur {
        out.push(Range {
            name: BACKWARD_PHASE.into(),
            start_ns: cs,
            end_ns: ce,
            thread: None,
        });
    }
    out
}

/// A `python_function` event's name as the user's source line, when it is
/// the user's own code (not the standard library's, a site package's or
/// torch's): `train.py(34): step` -> `train.py:34 in step`.
pub(crate) fn user_frame(name: &str) -> Option<String> {
    user_frame_at(name, None)
}

/// `user_frame`, naming the statements `lines` (found in the source,
/// `source_lines`) instead of the function's first line: `train.py:37/41 in step`.
pub(crate) fn user_frame_at(name: &str, lines: Option<&[u32]>) -> Option<String> {
    let f = crate::source_lines::parse_frame(name)?;
    let path = f.path;
    let library = [
        "site-packages/",
        "dist-packages/",
        "<frozen",
        "/lib/python3",
        "/lib64/python3",
    ]
    .iter()
    .any(|l| path.contains(l))
        || path.starts_with("torch/")
        || path.contains("/torch/");
    if library {
        return None;
    }
    // Deep paths shortened to their last three parts: a line in a report.
    let parts: Vec<&str> = path.rsplitn(4, '/').collect();
    let short = if parts.len() == 4 {
        format!(".../{}/{}/{}", parts[2], parts[1], parts[0])
    } else {
        path.to_string()
    };
    let at = match lines {
        Some(l) if !l.is_empty() => l.iter().map(u32::to_string).collect::<Vec<_>>().join("/"),
        _ => f.line.to_string(),
    };
    Some(format!("{short}:{at} in {}", crate::cap_name(f.func).0))
}

/// A training step's phase range (`kopt:forward` ...; docs/training.md).
fn is_phase(name: &str) -> bool {
    name.starts_with("kopt:")
}

/// A Kineto memcpy's direction and memory kinds from its name
/// (`Memcpy HtoD (Pageable -> Device)`).
pub(crate) fn copy_kind(name: &str) -> Option<kopt_model::CopyKind> {
    use kopt_model::{CopyDirection as D, MemoryKind as M};
    let rest = name.strip_prefix("Memcpy ")?;
    let (dir, kinds) = rest.split_once(' ').unwrap_or((rest, ""));
    let direction = match dir {
        "HtoD" => D::HostToDevice,
        "DtoH" => D::DeviceToHost,
        "DtoD" => D::DeviceToDevice,
        "HtoH" => D::HostToHost,
        "PtoP" => D::PeerToPeer,
        _ => return None,
    };
    let kind = |w: &str| match w.trim() {
        "Pageable" => M::Pageable,
        "Pinned" => M::Pinned,
        "Device" => M::Device,
        "Managed" => M::Managed,
        _ => M::Unknown,
    };
    let (src, dst) = kinds
        .trim()
        .strip_prefix('(')
        .and_then(|k| k.strip_suffix(')'))
        .and_then(|k| k.split_once("->"))
        .map_or((M::Unknown, M::Unknown), |(a, b)| (kind(a), kind(b)));
    Some(kopt_model::CopyKind {
        direction,
        src,
        dst,
    })
}

/// How far back from a call the spans holding it are looked for: frames
/// and ops nest a few dozen deep, siblings before them are passed over.
const SPAN_LOOKBACK: usize = 256;

/// The innermost span of `spans` (sorted by start) on `tid` holding `at`.
fn innermost(spans: &[Span], tid: u64, at: i64) -> Option<&Span> {
    let i = spans.partition_point(|s| s.start_ns <= at);
    spans[..i]
        .iter()
        .rev()
        .take(SPAN_LOOKBACK)
        .find(|s| s.tid == tid && s.end_ns >= at)
}

/// The outermost span holding `at` (the op the user called, `aten::item`,
/// rather than the `aten::_local_scalar_dense` inside it).
fn outermost(spans: &[Span], tid: u64, at: i64) -> Option<&Span> {
    let i = spans.partition_point(|s| s.start_ns <= at);
    spans[i.saturating_sub(SPAN_LOOKBACK)..i]
        .iter()
        .find(|s| s.tid == tid && s.end_ns >= at)
}

fn text_u64(v: Option<&str>) -> Option<u64> {
    let t = v?.trim().trim_matches('"');
    t.parse::<u64>()
        .ok()
        .or_else(|| t.parse::<f64>().ok().map(|f| f as u64))
}

/// A count (bytes) as the trace wrote it: `Ok(None)` when absent, `Err`
/// when it is there but negative, fractional-negative, NaN or infinite: a
/// cast would read those as 0 or saturate, and report a figure as fact.
fn text_count(v: Option<&str>) -> Result<Option<u64>, String> {
    let Some(raw) = v else { return Ok(None) };
    let t = raw.trim().trim_matches('"');
    if let Ok(n) = t.parse::<u64>() {
        return Ok(Some(n));
    }
    match t.parse::<f64>() {
        Ok(f) if f.is_finite() && f >= 0.0 && f < u64::MAX as f64 => Ok(Some(f as u64)),
        _ => Err(format!("{} is not a count", crate::echo(raw))),
    }
}

/// The largest thread block (work-group) of CUDA and HIP alike.
const MAX_BLOCK_THREADS: u64 = 1024;
/// The largest grid dimension either vendor's launch takes (CUDA's x limit;
/// HIP's grid, in work-items, is bounded by the same 2^31 - 1).
const MAX_GRID_DIM: u32 = (1 << 31) - 1;

fn text_dim3(v: Option<&str>) -> Option<Dim3> {
    let nums: Vec<u32> = v?
        .trim_matches(|c| c == '[' || c == ']')
        .split(',')
        .map(|p| p.trim().parse().ok())
        .collect::<Option<_>>()?;
    match nums.as_slice() {
        [x, y, z] => Some(Dim3 {
            x: *x,
            y: *y,
            z: *z,
        }),
        _ => None,
    }
}

/// Why a kernel's grid or block cannot be one a GPU ran, if it cannot: a
/// zero dimension, a block over [`MAX_BLOCK_THREADS`] threads, a grid
/// dimension over [`MAX_GRID_DIM`].
pub(crate) fn implausible_dims(grid: Option<Dim3>, block: Option<Dim3>) -> Option<String> {
    let zero = |d: &Dim3| d.x == 0 || d.y == 0 || d.z == 0;
    if let Some(b) = block {
        if zero(&b) || b.product() > MAX_BLOCK_THREADS {
            return Some(format!(
                "block [{}, {}, {}] is not 1 to {MAX_BLOCK_THREADS} threads",
                b.x, b.y, b.z
            ));
        }
    }
    if let Some(g) = grid {
        if zero(&g) || g.x.max(g.y).max(g.z) > MAX_GRID_DIM {
            return Some(format!(
                "grid [{}, {}, {}] has a dimension of 0 or over {MAX_GRID_DIM}",
                g.x, g.y, g.z
            ));
        }
    }
    None
}

impl Collector {
    /// The events of the next stretch of the file, in file order.
    pub(crate) fn append(&mut self, next: Collector) {
        let mut t = next.timeline;
        // The first stretch moves in whole: no copy of the largest vectors.
        if self.timeline.activities.is_empty() && self.timeline.api_calls.is_empty() {
            std::mem::swap(&mut self.timeline.activities, &mut t.activities);
            std::mem::swap(&mut self.timeline.api_calls, &mut t.api_calls);
        }
        self.timeline.activities.extend(t.activities);
        self.timeline.api_calls.extend(t.api_calls);
        self.timeline.ranges.extend(t.ranges);
        self.timeline.phase_ranges.extend(t.phase_ranges);
        self.gpu_steps.extend(next.gpu_steps);
        self.frames.extend(next.frames);
        self.sync_ops.extend(next.sync_ops);
        self.autograd_ops.extend(next.autograd_ops);
        if self.first_skipped.is_none() {
            // The next stretch counted its events from 0.
            self.first_skipped = next
                .first_skipped
                .map(|(i, why)| (i.saturating_add(self.events), why));
        }
        if self.first_unknown.is_none() {
            self.first_unknown = next
                .first_unknown
                .map(|(i, why)| (i.saturating_add(self.events), why));
        }
        self.span = self.span.or(next.span);
        self.unknown_values = self.unknown_values.saturating_add(next.unknown_values);
        self.events = self.events.saturating_add(next.events);
        self.skipped = self.skipped.saturating_add(next.skipped);
        self.names_cut = self.names_cut.saturating_add(next.names_cut);
    }

    /// Count an event left out, keeping the first one's index and fault.
    fn skip(&mut self, why: impl FnOnce() -> String) {
        self.skipped += 1;
        if self.first_skipped.is_none() {
            // `events` was already counted for this event: its index is one less.
            self.first_skipped = Some((self.events.saturating_sub(1), why()));
        }
    }

    /// Count a value left unknown, keeping the first one's index and fault.
    fn unknown(&mut self, why: impl FnOnce() -> String) {
        self.unknown_values += 1;
        if self.first_unknown.is_none() {
            self.first_unknown = Some((self.events.saturating_sub(1), why()));
        }
    }

    /// Leave out the kept events that lie outside the profiler's own span
    /// (when the trace has one): a `dur` that runs past the end of the
    /// capture, or a start before it, cannot be a measurement of it. A
    /// stated exclusion, not an error: the other events are sound. The
    /// slack covers the GPU clock's offset from the host's and the flush
    /// at the end of the capture. Returns how many were left out and what
    /// was wrong with the first.
    pub(crate) fn drop_outside_span(&mut self) -> (u64, Option<String>) {
        let Some((start, end)) = self.span else {
            return (0, None);
        };
        let slack = SPAN_SLACK_NS.max((end - start) / 100);
        let (lo, hi) = (start.saturating_sub(slack), end.saturating_add(slack));
        let mut out = Outside {
            count: 0,
            first: None,
            span: (start, end),
        };
        let t = &mut self.timeline;
        t.activities
            .retain(|a| out.keep(&a.name, a.start_ns, a.end_ns, lo, hi));
        t.api_calls
            .retain(|a| out.keep(&a.name, a.start_ns, a.end_ns, lo, hi));
        t.ranges
            .retain(|r| out.keep(&r.name, r.start_ns, r.end_ns, lo, hi));
        (out.count, out.first)
    }

    /// Each step once: the CPU `user_annotation` copy of `ProfilerStep#N`
    /// (the launches it holds start inside it), else the GPU copy; a name
    /// seen twice in one form is kept once too.
    /// Each sync and copy call named after the user's line and the op it
    /// was made in, where the trace has them.
    pub(crate) fn finish_frames(&mut self) {
        let backward = backward_ranges(std::mem::take(&mut self.autograd_ops));
        self.timeline.phase_ranges.extend(backward);
        let mut frames = std::mem::take(&mut self.frames);
        let mut ops = std::mem::take(&mut self.sync_ops);
        if frames.is_empty() && ops.is_empty() {
            return;
        }
        frames.sort_by_key(|s| s.start_ns);
        ops.sort_by_key(|s| s.start_ns);
        // Statement lines from the source where it is readable here.
        let mut sources = crate::source_lines::Sources::default();
        for c in self
            .timeline
            .api_calls
            .iter_mut()
            .filter(|c| matches!(c.kind, ApiKind::Synchronize | ApiKind::Memory))
        {
            let op = outermost(&ops, c.thread, c.start_ns);
            c.frame = innermost(&frames, c.thread, c.start_ns).and_then(|s| {
                let lines = sources.statements(&s.name, op.map(|o| o.name.as_str()));
                user_frame_at(&s.name, lines.as_deref())
            });
            c.op = op.map(|s| s.name.clone());
            c.op_span = op.map(|s| (s.start_ns, s.end_ns));
        }
    }

    pub(crate) fn finish_steps(&mut self) {
        let gpu = std::mem::take(&mut self.gpu_steps);
        let t = &mut self.timeline;
        let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
        // Phases (kopt:forward ...) repeat once a step by design.
        t.ranges
            .retain(|r| is_phase(&r.name) || seen.insert(r.name.clone()));
        for r in gpu {
            if seen.insert(r.name.clone()) {
                t.ranges.push(r);
            }
        }
        t.ranges.sort_by_key(|r| r.start_ns);
        t.recorder = kopt_model::Recorder::Kineto;
    }

    /// `distributedInfo`: a value that is not the object torch writes is
    /// left out (the rank then comes from the file name, or nowhere).
    pub(crate) fn take_distributed_info(&mut self, raw: &str) {
        if let Ok(info) = serde_json::from_str::<DistributedInfo>(raw) {
            info.fill(&mut self.timeline);
        }
    }

    pub(crate) fn take_device_properties(&mut self, raw: &str) {
        if let Ok(props) = serde_json::from_str::<Vec<DeviceProp>>(raw) {
            // Every device by id (kernels may run on several); the first
            // names the trace's device, as before.
            self.timeline.device_names = props
                .iter()
                .enumerate()
                .filter_map(|(i, p)| {
                    let name = p.name.as_deref()?.trim();
                    let id = p.id.unwrap_or(u32::try_from(i).ok()?);
                    (!name.is_empty()).then(|| (id, name.to_string()))
                })
                .collect();
            if let Some(p) = props.into_iter().next() {
                p.fill(&mut self.timeline);
            }
        }
    }

    /// True once the fields read so far show the event will not be kept
    /// (what `take_fields` drops), so the rest need not be read.
    pub(crate) fn dropped(e: &Fields) -> bool {
        if e.ph.is_some_and(|p| p != "X") {
            return true;
        }
        match (e.cat, e.name.as_deref()) {
            (Some(cat), Some(name)) => {
                Self::category(cat).is_none()
                    && !is_span(cat)
                    && !name.starts_with("ProfilerStep#")
                    && !is_phase(name)
                    && !Self::host_span(cat, name)
            }
            _ => false,
        }
    }

    /// A host-side event kept to name syncs or phases: a user frame, a
    /// sync op, or torch.optim's own annotation.
    fn host_span(cat: &str, name: &str) -> bool {
        (cat.eq_ignore_ascii_case("python_function") && user_frame(name).is_some())
            || (cat.eq_ignore_ascii_case("cpu_op")
                && (SYNC_OPS.contains(&name) || name.starts_with(AUTOGRAD_OP)))
            || (cat.eq_ignore_ascii_case("user_annotation") && is_optimizer_phase(name))
    }

    /// What a category keeps: a GPU activity, an API call, or nothing.
    fn category(cat: &str) -> Option<Option<ActivityKind>> {
        let is = |c: &str| cat.eq_ignore_ascii_case(c);
        if is("kernel") {
            Some(Some(ActivityKind::Kernel))
        } else if is("gpu_memcpy") || is("memcpy") {
            Some(Some(ActivityKind::Memcpy))
        } else if is("gpu_memset") || is("memset") {
            Some(Some(ActivityKind::Memset))
        } else if is("cuda_runtime") || is("cuda_driver") || is("runtime") || is("driver") {
            Some(None)
        } else {
            None
        }
    }

    /// The profiler's span, when its `ts` and `dur` are usable (an unusable
    /// one is no span: then no event is checked against it).
    fn take_span(&mut self, e: &Fields) {
        if self.span.is_some() {
            return;
        }
        let ts = e.ts.and_then(us_text_to_ns);
        let dur = e.dur.and_then(us_text_to_ns);
        if let (Some(ts), Some(dur)) = (ts, dur) {
            if (0..=MAX_TIME_NS).contains(&ts) && (0..=MAX_TIME_NS).contains(&dur) {
                self.span = Some((ts, ts + dur));
            }
        }
    }

    pub(crate) fn take_fields(&mut self, e: Fields) {
        self.events += 1;
        if e.ph != Some("X") {
            return;
        }
        // What the event is decides first: most events (CPU ops, Python
        // frames) are dropped before any number is parsed or string copied.
        enum Keep {
            Activity(ActivityKind),
            Api,
            Step,
            Host,
        }
        let keep = match Self::category(e.cat.unwrap_or("")) {
            Some(Some(kind)) => Keep::Activity(kind),
            Some(None) => Keep::Api,
            None if e
                .cat
                .zip(e.name.as_deref())
                .is_some_and(|(c, n)| Self::host_span(c, n)) =>
            {
                Keep::Host
            }
            None if e.cat.is_some_and(is_span) => {
                self.take_span(&e);
                return;
            }
            None if e
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("ProfilerStep#") || is_phase(n)) =>
            {
                Keep::Step
            }
            None => return,
        };
        let message = CollectiveArgs {
            in_nelems: e.in_nelems,
            out_nelems: e.out_nelems,
            dtype: e.dtype,
            collective: e.collective,
        };
        let Some(name) = e.name else {
            return;
        };
        let shown = || crate::echo(&name);
        let ts = match e.ts.map(|t| (t, us_text_to_ns(t))) {
            None => return,
            Some((_, Some(ts))) if (0..=MAX_TIME_NS).contains(&ts) => ts,
            Some((raw, _)) => {
                return self.skip(|| {
                    format!(
                        "\"{}\": ts {} is not a timestamp kopt can use",
                        shown(),
                        crate::echo(raw)
                    )
                })
            }
        };
        // A missing `dur` is an instant; one that is there must be a
        // non-negative, finite number (never a negative duration in the profile).
        let dur = match e.dur.map(|d| (d, us_text_to_ns(d))) {
            None => 0,
            Some((_, Some(d))) if (0..=MAX_TIME_NS).contains(&d) => d,
            Some((raw, _)) => {
                return self.skip(|| {
                    format!(
                        "\"{}\": dur {} is not a non-negative number of microseconds",
                        shown(),
                        crate::echo(raw)
                    )
                })
            }
        };
        // Both bounded by MAX_TIME_NS: no overflow.
        let end = ts + dur;
        let name = {
            let (capped, cut) = crate::cap_name(&name);
            if cut {
                self.names_cut += 1;
                capped.into_owned()
            } else {
                name.into_owned()
            }
        };
        // A GPU activity longer than any launch is a broken record: left
        // out and counted, as an unusable `ts` or `dur` is.
        let too_long = matches!(keep, Keep::Activity(_))
            .then(|| crate::ncu::launch_too_long(ts, end))
            .flatten();
        if let Some(why) = too_long {
            return self.skip(|| format!("\"{}\": {why}", crate::echo(&name)));
        }
        match keep {
            Keep::Activity(kind) => {
                // Implausible values are left unknown and counted (the
                // report states how many): the event's time is still sound.
                let (mut grid, mut block) = (text_dim3(e.grid), text_dim3(e.block));
                if let Some(why) = implausible_dims(grid, block) {
                    self.unknown(|| format!("\"{}\": {why}", crate::echo(&name)));
                    (grid, block) = (None, None);
                }
                let bytes = text_count(e.bytes).unwrap_or_else(|why| {
                    self.unknown(|| format!("\"{}\": bytes {why}", crate::echo(&name)));
                    None
                });
                let bytes = bytes.or_else(|| {
                    (kind == ActivityKind::Kernel && message.in_nelems.is_some())
                        .then(|| collective_bytes(&message, &name))
                        .flatten()
                });
                let copy = (kind == ActivityKind::Memcpy)
                    .then(|| copy_kind(&name))
                    .flatten();
                self.timeline.activities.push(GpuActivity {
                    kind,
                    name,
                    start_ns: ts,
                    end_ns: end,
                    device: text_u64(e.device).unwrap_or(0) as u32,
                    stream: text_u64(e.stream).unwrap_or(0),
                    correlation: text_u64(e.correlation).unwrap_or(0),
                    grid,
                    block,
                    bytes,
                    copy,
                })
            }
            Keep::Host => {
                let tid = text_u64(e.tid).unwrap_or(0);
                let span = |name: String| Span {
                    tid,
                    start_ns: ts,
                    end_ns: end,
                    name,
                };
                if name.starts_with(AUTOGRAD_OP) {
                    self.autograd_ops.push((tid, ts, end));
                } else if e.cat.is_some_and(|c| c.eq_ignore_ascii_case("cpu_op")) {
                    self.sync_ops.push(span(name));
                } else if is_optimizer_phase(&name) {
                    self.timeline.phase_ranges.push(Range {
                        name,
                        start_ns: ts,
                        end_ns: end,
                        thread: None,
                    });
                } else if user_frame(&name).is_some() {
                    // Kept raw: the path finds the source (`finish_frames`).
                    self.frames.push(span(name));
                }
            }
            Keep::Api => self.timeline.api_calls.push(ApiCall {
                kind: ApiKind::of(&name),
                name,
                start_ns: ts,
                end_ns: end,
                thread: text_u64(e.tid).unwrap_or(0),
                correlation: text_u64(e.correlation).unwrap_or(0),
                frame: None,
                op: None,
                op_span: None,
            }),
            // A phase's GPU copy adds nothing to its CPU range.
            Keep::Step
                if is_phase(&name)
                    && e.cat
                        .is_some_and(|c| c.eq_ignore_ascii_case("gpu_user_annotation")) => {}
            Keep::Step
                if e.cat
                    .is_some_and(|c| c.eq_ignore_ascii_case("gpu_user_annotation")) =>
            {
                self.gpu_steps.push(Range {
                    name,
                    start_ns: ts,
                    end_ns: end,
                    thread: None,
                })
            }
            Keep::Step => self.timeline.ranges.push(Range {
                name,
                start_ns: ts,
                end_ns: end,
                thread: text_u64(e.tid),
            }),
        }
    }
}
