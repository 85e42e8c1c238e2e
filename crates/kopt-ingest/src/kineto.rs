//! Kineto / torch.profiler chrome-trace JSON.
//!
//! - `traceEvents` is visited one event at a time; only GPU activities, CUDA
//!   API calls and step annotations are kept.
//! - `ts` / `dur` are microseconds with a fraction: their digits are parsed
//!   into integer nanoseconds, never through `f64` (an `f64` near 1.7e15 ns
//!   cannot hold them).
//! - `cat` is matched case-insensitively; launches and kernels are linked by
//!   correlation id later, in the analysis.
//! - PyTorch is known to write invalid JSON (unescaped backslashes, quotes or
//!   control characters in names): on a syntax error the strings are repaired
//!   and the parse retried, and the report says where the first fault was.

use std::borrow::Cow;
use std::fmt;

use kopt_model::Timeline;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

pub use crate::kineto_events::us_text_to_ns;
use crate::kineto_events::{Collector, Fields};
use crate::IngestError;

/// A parsed trace and what had to be repaired to read it.
#[derive(Debug, Clone)]
pub struct KinetoTrace {
    pub timeline: Timeline,
    /// Set when the file was invalid JSON and a repaired copy was read.
    pub repaired: Option<String>,
    pub events_read: u64,
    /// GPU activities, API calls and steps left out because their `ts` or
    /// `dur` is not a usable number (negative, NaN, infinite, out of range).
    pub skipped_events: u64,
    /// What was wrong with the first of them, and where (its index in
    /// `traceEvents`). Events outside the profiler's own span (`cat:
    /// "Trace"`) are left out too, and counted here.
    pub first_skipped: Option<String>,
    /// Values of kept events left unknown as implausible: a grid or block no
    /// GPU runs, a byte count that is negative or not a number.
    pub unknown_values: u64,
    /// What was wrong with the first of them, and where.
    pub first_unknown: Option<String>,
    /// Names longer than [`crate::MAX_NAME_BYTES`], kept cut.
    pub names_cut: u64,
}

#[derive(Deserialize)]
struct RawEvent<'a> {
    #[serde(default, borrow)]
    ph: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    cat: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    ts: Option<&'a RawValue>,
    #[serde(default, borrow)]
    dur: Option<&'a RawValue>,
    #[serde(default, borrow)]
    tid: Option<&'a RawValue>,
    #[serde(default, borrow)]
    args: Option<RawArgs<'a>>,
}

#[derive(Deserialize, Default)]
struct RawArgs<'a> {
    #[serde(default, borrow)]
    correlation: Option<&'a RawValue>,
    #[serde(default, borrow)]
    stream: Option<&'a RawValue>,
    #[serde(default, borrow)]
    device: Option<&'a RawValue>,
    #[serde(default, borrow)]
    grid: Option<&'a RawValue>,
    #[serde(default, borrow)]
    block: Option<&'a RawValue>,
    #[serde(default, borrow)]
    bytes: Option<&'a RawValue>,
    #[serde(default, borrow, rename = "In msg nelems")]
    in_nelems: Option<&'a RawValue>,
    #[serde(default, borrow, rename = "Out msg nelems")]
    out_nelems: Option<&'a RawValue>,
    #[serde(default, borrow)]
    dtype: Option<&'a RawValue>,
    #[serde(default, borrow, rename = "Collective name")]
    collective: Option<&'a RawValue>,
}

/// A serde-read event handed to the collector as raw field text, as the
/// fast scanner hands it.
fn collect(c: &mut Collector, e: RawEvent) {
    let args = e.args.unwrap_or_default();
    c.take_fields(Fields {
        ph: e.ph.as_deref(),
        cat: e.cat.as_deref(),
        name: e.name.clone(),
        ts: e.ts.map(RawValue::get),
        dur: e.dur.map(RawValue::get),
        tid: e.tid.map(RawValue::get),
        correlation: args.correlation.map(RawValue::get),
        stream: args.stream.map(RawValue::get),
        device: args.device.map(RawValue::get),
        grid: args.grid.map(RawValue::get),
        block: args.block.map(RawValue::get),
        bytes: args.bytes.map(RawValue::get),
        in_nelems: args.in_nelems.map(RawValue::get),
        out_nelems: args.out_nelems.map(RawValue::get),
        dtype: args.dtype.map(RawValue::get),
        collective: args.collective.map(RawValue::get),
    });
}

struct EventsSeed<'c>(&'c mut Collector);

impl<'de> DeserializeSeed<'de> for EventsSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for EventsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of trace events")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(e) = seq.next_element_seed(EventSeed)? {
            collect(self.0, e);
        }
        Ok(())
    }
}

/// One event, which must be a JSON object: serde would read a struct from
/// an array as well (`[]` as an event with every field missing).
struct EventSeed;

impl<'de> DeserializeSeed<'de> for EventSeed {
    type Value = RawEvent<'de>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<RawEvent<'de>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EventSeed {
    type Value = RawEvent<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a trace event (a JSON object)")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawEvent<'de>, A::Error> {
        RawEvent::deserialize(de::value::MapAccessDeserializer::new(map))
    }
}

struct FileSeed<'c>(&'c mut Collector);

impl<'de> DeserializeSeed<'de> for FileSeed<'_> {
    type Value = bool;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FileSeed<'_> {
    /// Whether `traceEvents` was present.
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a chrome-trace object with \"traceEvents\"")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let mut seen = false;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match key.as_ref() {
                "traceEvents" => {
                    map.next_value_seed(EventsSeed(self.0))?;
                    seen = true;
                }
                "distributedInfo" => {
                    let raw: &RawValue = map.next_value()?;
                    self.0.take_distributed_info(raw.get());
                }
                "deviceProperties" => {
                    let raw: &RawValue = map.next_value()?;
                    self.0.take_device_properties(raw.get());
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(seen)
    }
}

fn parse_once(bytes: &[u8]) -> Result<(Collector, bool), serde_json::Error> {
    let mut c = Collector::default();
    // Well-formed files take the fast scanner; anything unexpected goes to serde.
    if let Some(seen) = crate::kineto_fast::scan(bytes, &mut c) {
        return Ok((c, seen));
    }
    parse_serde(bytes)
}

/// The serde path: slower, but it names the byte where a broken file breaks.
fn parse_serde(bytes: &[u8]) -> Result<(Collector, bool), serde_json::Error> {
    let mut c = Collector::default();
    // UTF-8 checked once for the whole file is cheaper than once per string.
    let seen = match std::str::from_utf8(bytes) {
        Ok(text) => {
            let mut de = serde_json::Deserializer::from_str(text);
            let seen = FileSeed(&mut c).deserialize(&mut de)?;
            de.end()?;
            seen
        }
        Err(_) => {
            let mut de = serde_json::Deserializer::from_slice(bytes);
            let seen = FileSeed(&mut c).deserialize(&mut de)?;
            de.end()?;
            seen
        }
    };
    Ok((c, seen))
}

/// Byte offset of a serde_json error's line and column.
fn byte_offset(bytes: &[u8], e: &serde_json::Error) -> usize {
    let (line, col) = (e.line(), e.column());
    let mut offset = 0usize;
    for (i, l) in bytes.split(|&b| b == b'\n').enumerate() {
        if i + 1 == line {
            return offset + col.saturating_sub(1);
        }
        offset += l.len() + 1;
    }
    bytes.len()
}

/// Escape what makes PyTorch's JSON invalid: backslashes that start no valid
/// escape and raw control characters inside strings. Returns the repaired
/// bytes and how many faults were fixed.
fn repair(bytes: &[u8]) -> (Vec<u8>, usize) {
    let mut out = Vec::with_capacity(bytes.len() + 64);
    let mut fixes = 0;
    let mut in_string = false;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if !in_string {
            if b == b'"' {
                in_string = true;
            }
            out.push(b);
            i += 1;
            continue;
        }
        match b {
            b'\\' => {
                let next = bytes.get(i + 1).copied();
                match next {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                        out.extend_from_slice(&bytes[i..i + 2]);
                        i += 2;
                    }
                    Some(b'u')
                        if bytes
                            .get(i + 2..i + 6)
                            .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) =>
                    {
                        out.extend_from_slice(&bytes[i..i + 6]);
                        i += 6;
                    }
                    _ => {
                        out.extend_from_slice(b"\\\\");
                        fixes += 1;
                        i += 1;
                    }
                }
            }
            b'"' => {
                // A quote that does not end the string (what follows cannot follow a string) is escaped.
                let rest = bytes[i + 1..]
                    .iter()
                    .find(|c| !c.is_ascii_whitespace())
                    .copied();
                if matches!(rest, Some(b',' | b':' | b'}' | b']') | None) {
                    in_string = false;
                    out.push(b);
                } else {
                    out.extend_from_slice(b"\\\"");
                    fixes += 1;
                }
                i += 1;
            }
            c if c < 0x20 => {
                out.extend_from_slice(format!("\\u{c:04x}").as_bytes());
                fixes += 1;
                i += 1;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    (out, fixes)
}

/// The first two bytes of a gzip stream.
pub const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// A reader that counts the bytes read through it: the compressed bytes
/// a decoder has taken so far.
struct Counted<R> {
    inner: R,
    read: u64,
}

impl<R: std::io::Read> std::io::Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

/// Decompress a gzip stream (several members, as `cat a.gz b.gz` makes,
/// included) as it is read, within the gzip budgets: at most
/// [`crate::budget::GZIP_MAX_RATIO`] times the compressed bytes read so
/// far (and at least [`crate::budget::GZIP_RATIO_FLOOR_BYTES`]), never
/// more than [`crate::budget::GZIP_MAX_BYTES`]. The ratio is checked as
/// the stream inflates, so a bomb stops a little past the floor, whatever
/// the file's size, rather than at its whole-file allowance. A stream that
/// holds gzip again (a double-compressed file, 25 KB that would inflate to
/// 10 GiB) is refused after its first bytes. The output is allocated once
/// when the stream's trailer says its size.
pub(crate) fn gunzip(
    r: impl std::io::Read,
    compressed_len: u64,
    size_hint: Option<u64>,
    path: &str,
) -> Result<Vec<u8>, IngestError> {
    use crate::budget::{GZIP_MAX_BYTES, GZIP_MAX_RATIO, GZIP_RATIO_FLOOR_BYTES};
    use std::io::Read;
    let ratio = GZIP_MAX_RATIO.checked()?;
    let max_bytes = GZIP_MAX_BYTES.checked()?;
    let by_ratio = |compressed: u64| compressed.saturating_mul(ratio).max(GZIP_RATIO_FLOOR_BYTES);
    let limit = by_ratio(compressed_len).min(max_bytes);
    let broken = |got: usize, e: std::io::Error| {
        IngestError::format(
            path,
            format!("gzip data broken after {got} decompressed bytes (truncated download?): {e}"),
        )
    };
    let over = |size: &str, how: String| {
        IngestError::format(
            path,
            format!(
                "gzip budget: decompresses to more than {size} (a decompression bomb?): not read; {how}"
            ),
        )
    };
    // The ratio a limit amounts to (the floor can make it more than the
    // variable's), so that a suggested ratio is above it.
    let ratio_in_force = |limit: u64, compressed: u64| limit.div_ceil(compressed.max(1));
    let counted = Counted { inner: r, read: 0 };
    let mut stream = flate2::read::MultiGzDecoder::new(counted).take(limit.saturating_add(1));
    let mut head = [0u8; 2];
    let got = crate::read_up_to(&mut stream, &mut head).map_err(|e| broken(0, e))?;
    if got == 2 && head == GZIP_MAGIC {
        return Err(IngestError::format(
            path,
            "gzip inside gzip (compressed twice): not read; decompress it once (gunzip) and pass the result",
        ));
    }
    let mut out = Vec::new();
    if let Some(n) = size_hint.filter(|n| *n <= limit) {
        // The trailer's size is the file's claim: a reservation the memory
        // cannot give is skipped (the buffer then grows as data comes), not
        // an abort.
        let _ = out.try_reserve_exact(usize::try_from(n).unwrap_or(0));
    }
    out.extend_from_slice(&head[..got]);
    let mut chunk = vec![0u8; 256 << 10];
    loop {
        let n = match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(broken(out.len(), e)),
        };
        out.extend_from_slice(&chunk[..n]);
        let inflated = out.len() as u64;
        if inflated > limit {
            return Err(if limit == max_bytes && limit < by_ratio(compressed_len) {
                over(
                    &format!("{limit} bytes"),
                    GZIP_MAX_BYTES.how_to_raise_above(limit),
                )
            } else {
                over(
                    &format!("{limit} bytes, {ratio}x its {compressed_len} compressed bytes or the {GZIP_RATIO_FLOOR_BYTES}-byte floor"),
                    GZIP_MAX_RATIO.how_to_raise_above(ratio_in_force(limit, compressed_len)),
                )
            });
        }
        let taken = stream.get_ref().get_ref().read;
        if inflated > by_ratio(taken) {
            return Err(over(
                &format!("{ratio}x the {taken} compressed bytes read so far"),
                GZIP_MAX_RATIO.how_to_raise_above(ratio_in_force(by_ratio(taken), taken)),
            ));
        }
    }
    Ok(out)
}

/// `bytes` decompressed under the gzip budgets (see `gunzip`): gzip in
/// gzip refused, the output capped by ratio and size.
pub fn decompress(bytes: &[u8], path: &str) -> Result<Vec<u8>, IngestError> {
    gunzip(bytes, bytes.len() as u64, gzip_size_hint(bytes), path)
}

/// The decompressed size a gzip file's trailer states (modulo 4 GiB, of its
/// last member): a hint for allocating once, never trusted beyond that.
pub(crate) fn gzip_size_hint(bytes: &[u8]) -> Option<u64> {
    let tail: [u8; 4] = bytes.get(bytes.len().checked_sub(4)?..)?.try_into().ok()?;
    Some(u64::from(u32::from_le_bytes(tail)))
}

/// Parse a trace held in memory, gzipped or not. `path` only labels errors.
pub fn parse_kineto(bytes: &[u8], path: &str) -> Result<KinetoTrace, IngestError> {
    if bytes.starts_with(&GZIP_MAGIC) {
        let plain = gunzip(bytes, bytes.len() as u64, gzip_size_hint(bytes), path)?;
        return parse_kineto(&plain, path);
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(IngestError::Empty { path: path.into() });
    }
    let (mut collector, seen, repaired) = match parse_once(bytes) {
        Ok((c, seen)) => (c, seen, None),
        Err(e) => {
            let offset = byte_offset(bytes, &e);
            if e.is_eof() {
                return Err(IngestError::Format {
                    path: path.into(),
                    message: format!("byte {offset}: the trace ends early (truncated file?): {e}"),
                });
            }
            if !e.is_syntax() {
                return Err(IngestError::Format {
                    path: path.into(),
                    message: format!("byte {offset}: not a chrome trace: {e}"),
                });
            }
            let (fixed, fixes) = repair(bytes);
            match parse_once(&fixed) {
                Ok((c, seen)) if fixes > 0 => (
                    c,
                    seen,
                    Some(format!(
                        "invalid JSON at byte {offset} ({e}); read after escaping {fixes} stray backslash, quote or control character(s) in strings"
                    )),
                ),
                _ => {
                    return Err(IngestError::Format {
                        path: path.into(),
                        message: format!("byte {offset}: invalid JSON that kopt cannot repair: {e}"),
                    })
                }
            }
        }
    };
    if !seen {
        return Err(IngestError::Format {
            path: path.into(),
            message: "no \"traceEvents\" array: not a chrome / Kineto trace".into(),
        });
    }
    collector.finish_steps();
    collector.finish_frames();
    let (outside, first_outside) = collector.drop_outside_span();
    if collector.timeline.activities.is_empty() {
        let left_out = collector.skipped.saturating_add(outside);
        if left_out > 0 {
            // Events were there, their times were not usable: that, not a
            // profiler without CUDA activities, is what to say.
            let first = collector
                .first_skipped
                .as_ref()
                .map(|(i, why)| format!("event {i} of traceEvents: {why}"))
                .or(first_outside)
                .unwrap_or_default();
            return Err(IngestError::Format {
                path: path.into(),
                message: format!(
                    "no usable GPU activity: {left_out} event(s) left out for a ts or dur that is implausible (unusable, or outside the profiler's span), the first: {first}"
                ),
            });
        }
        return Err(IngestError::NoGpuActivity {
            path: path.into(),
            events: collector.events,
        });
    }
    Ok(KinetoTrace {
        timeline: collector.timeline,
        repaired,
        events_read: collector.events,
        skipped_events: collector.skipped.saturating_add(outside),
        first_skipped: collector
            .first_skipped
            .map(|(i, why)| format!("event {i} of traceEvents: {why}"))
            .or(first_outside),
        unknown_values: collector.unknown_values,
        first_unknown: collector
            .first_unknown
            .map(|(i, why)| format!("event {i} of traceEvents: {why}")),
        names_cut: collector.names_cut,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn microseconds_to_integer_nanoseconds() {
        assert_eq!(
            us_text_to_ns("4784577684397.93"),
            Some(4_784_577_684_397_930)
        );
        assert_eq!(
            us_text_to_ns("1790857026000000.001"),
            Some(1_790_857_026_000_000_001)
        );
        assert_eq!(us_text_to_ns("5.856"), Some(5_856));
        assert_eq!(us_text_to_ns("12"), Some(12_000));
        assert_eq!(us_text_to_ns("0.0004"), Some(0));
        assert_eq!(us_text_to_ns("\"7.5\""), Some(7_500));
        assert_eq!(us_text_to_ns("abc"), None);
    }

    #[test]
    fn fast_scanner_and_serde_agree_on_real_traces() {
        for rel in [
            "h100-probe/torch_trace.json",
            "seed000-h200/moe_trace.json",
            "seed000-h200/matmul_trace.json",
        ] {
            let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../fixtures")
                .join(rel);
            let bytes = std::fs::read(path).unwrap();
            let mut fast = Collector::default();
            let seen = crate::kineto_fast::scan(&bytes, &mut fast)
                .expect("a well-formed trace takes the fast path");
            let (slow, slow_seen) = parse_serde(&bytes).unwrap();
            assert_eq!(seen, slow_seen);
            assert_eq!(fast.events, slow.events, "{rel}");
            assert_eq!(fast.timeline, slow.timeline, "{rel}");
            assert!(!fast.timeline.activities.is_empty());
        }
    }

    #[test]
    fn fast_scanner_gives_way_on_broken_input() {
        let mut c = Collector::default();
        assert!(crate::kineto_fast::scan(br#"{"traceEvents": [{"ph": "X", "#, &mut c).is_none());
        assert!(crate::kineto_fast::scan(
            br#"{"traceEvents": [{"name": "a\qb"}]} trailing"#,
            &mut c
        )
        .is_none());
    }

    #[test]
    fn repairs_what_pytorch_writes() {
        let bad = br#"{"traceEvents": [{"ph": "X", "cat": "Kernel", "name": "C:\qemp\kern "quoted" x", "ts": 1.5, "dur": 2, "args": {"correlation": 7}}]}"#;
        let t = parse_kineto(bad, "t.json").unwrap();
        assert_eq!(t.timeline.activities.len(), 1);
        assert_eq!(t.timeline.activities[0].name, "C:\\qemp\\kern \"quoted\" x");
        assert_eq!(t.timeline.activities[0].start_ns, 1500);
        assert!(t.repaired.unwrap().contains("byte"));
    }

    #[test]
    fn truncated_and_wrong_files_name_the_offset() {
        let e = parse_kineto(br#"{"traceEvents": [{"ph": "X", "#, "t.json")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("t.json: byte ") && e.contains("truncated"),
            "{e}"
        );
        let e = parse_kineto(br#"{"other": 1}"#, "t.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no \"traceEvents\""), "{e}");
        let e = parse_kineto(b"[1,2,3]", "t.json").unwrap_err().to_string();
        assert!(e.contains("not a chrome trace"), "{e}");
    }
}
