//! A fast path for well-formed Kineto traces: a hand-written scanner that
//! walks `traceEvents` and looks only at the fields kopt keeps, skipping
//! everything else without building it. Anything it does not expect makes it
//! give up (`None`); the serde path then parses the file and, for a broken
//! file, reports the fault with its byte offset and repairs what it can.

use std::borrow::Cow;

use crate::kineto_events::{Collector, Fields};

struct Scan<'a> {
    /// The whole file, UTF-8 checked once; slices are cut at ASCII delimiters.
    t: &'a str,
    b: &'a [u8],
    i: usize,
}

impl<'a> Scan<'a> {
    fn ws(&mut self) {
        while matches!(self.b.get(self.i), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.b.get(self.i) == Some(&c)).then(|| self.i += 1)
    }

    /// A string's raw contents (between the quotes) and whether it holds escapes.
    fn string(&mut self) -> Option<(&'a str, bool)> {
        self.eat(b'"')?;
        let start = self.i;
        let mut escaped = false;
        // Most strings in a trace are short keys: a plain loop beats
        // memchr's set-up for them; long names go to memchr below.
        while let Some(&c) = self.b.get(self.i) {
            if self.i - start >= 24 {
                break;
            }
            match c {
                b'"' => {
                    let s = self.t.get(start..self.i)?;
                    self.i += 1;
                    return Some((s, false));
                }
                b'\\' => break,
                _ => self.i += 1,
            }
        }
        loop {
            let rel = memchr::memchr2(b'"', b'\\', self.b.get(self.i..)?)?;
            self.i += rel;
            if self.b.get(self.i) == Some(&b'\\') {
                escaped = true;
                // The file may end right after the backslash: then there is
                // no escaped character to step over, and no string.
                self.b.get(self.i + 1)?;
                self.i += 2;
                continue;
            }
            let s = self.t.get(start..self.i)?;
            self.i += 1;
            return Some((s, escaped));
        }
    }

    /// Skip any value; return its raw text.
    fn value(&mut self) -> Option<&'a str> {
        self.ws();
        let start = self.i;
        match *self.b.get(self.i)? {
            b'"' => {
                self.string()?;
            }
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match *self.b.get(self.i)? {
                        b'"' => {
                            self.string()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth = depth.checked_sub(1)?;
                            if depth == 0 {
                                self.i += 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                    self.i += 1;
                }
            }
            _ => {
                while self.b.get(self.i).is_some_and(|c| {
                    !matches!(c, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t')
                }) {
                    self.i += 1;
                }
                if self.i == start {
                    return None;
                }
            }
        }
        self.t.get(start..self.i)
    }

    /// From inside an object (after a `,`) to just past its closing `}`:
    /// strings are jumped over, braces counted; nothing else is looked at.
    fn skip_object_rest(&mut self) -> Option<()> {
        let mut depth = 1usize;
        loop {
            let rel = memchr::memchr3(b'"', b'{', b'}', self.b.get(self.i..)?)?;
            self.i += rel;
            match *self.b.get(self.i)? {
                b'"' => {
                    self.string()?;
                    continue;
                }
                b'{' => depth += 1,
                _ => {
                    depth = depth.checked_sub(1)?;
                    if depth == 0 {
                        self.i += 1;
                        return Some(());
                    }
                }
            }
            self.i += 1;
        }
    }

    /// `{"k": v, ...}` calling `f` with each key and the scanner positioned at its value.
    fn object(&mut self, mut f: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.object_while(|s, key| f(s, key).map(|()| true))
    }

    /// `object`, where `f` may answer `false`: the rest of the object is then
    /// skipped by its braces, its keys unread.
    fn object_while(
        &mut self,
        mut f: impl FnMut(&mut Self, &'a str) -> Option<bool>,
    ) -> Option<()> {
        self.eat(b'{')?;
        self.ws();
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            let (key, escaped) = self.string()?;
            if escaped {
                return None;
            }
            self.eat(b':')?;
            let more = f(self, key)?;
            self.ws();
            match *self.b.get(self.i)? {
                b',' if more => self.i += 1,
                b',' => {
                    self.i += 1;
                    return self.skip_object_rest();
                }
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }
}

fn plain(v: &str) -> &str {
    v.trim_matches('"')
}

/// Below this many bytes of events one thread scans them all.
const PARALLEL_MIN_BYTES: usize = 32 << 20;

/// Parse `bytes` if it is a well-formed trace; `None` sends the caller to the serde path.
pub(crate) fn scan(bytes: &[u8], c: &mut Collector) -> Option<bool> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    scan_with(bytes, c, threads)
}

/// `scan` with a given number of threads for the `traceEvents` array.
pub(crate) fn scan_with(bytes: &[u8], c: &mut Collector, threads: usize) -> Option<bool> {
    let text = utf8(bytes, threads)?;
    let mut s = Scan {
        t: text,
        b: bytes,
        i: 0,
    };
    let mut seen = false;
    s.object(|s, key| match key {
        "traceEvents" => {
            seen = true;
            s.eat(b'[')?;
            s.ws();
            if s.eat(b']').is_some() {
                return Some(());
            }
            let threads = if bytes.len().saturating_sub(s.i) >= PARALLEL_MIN_BYTES {
                threads
            } else {
                1
            };
            s.i = events(text, s.i, c, threads)?.0;
            Some(())
        }
        "distributedInfo" => {
            let start = {
                s.ws();
                s.i
            };
            s.value()?;
            c.take_distributed_info(text.get(start..s.i)?);
            Some(())
        }
        "deviceProperties" => {
            let start = {
                s.ws();
                s.i
            };
            s.value()?;
            c.take_device_properties(text.get(start..s.i)?);
            Some(())
        }
        _ => s.value().map(|_| ()),
    })?;
    s.ws();
    (s.i == bytes.len()).then_some(seen)
}

/// The file as text, its UTF-8 checked by `threads` threads for a large file.
fn utf8(bytes: &[u8], threads: usize) -> Option<&str> {
    if threads < 2 || bytes.len() < PARALLEL_MIN_BYTES {
        return std::str::from_utf8(bytes).ok();
    }
    // Cut at character starts (never at a continuation byte 0b10xxxxxx):
    // then the whole is valid exactly when every piece is.
    let mut cuts = vec![0];
    for k in 1..threads {
        let mut p = bytes.len() * k / threads;
        while bytes.get(p).is_some_and(|b| b & 0xC0 == 0x80) {
            p += 1;
        }
        cuts.push(p);
    }
    cuts.push(bytes.len());
    let valid = std::thread::scope(|scope| {
        let checks: Vec<_> = cuts
            .windows(2)
            .map(|w| {
                let piece = match w {
                    [from, to] => bytes.get(*from..*to),
                    _ => None,
                };
                scope.spawn(move || piece.is_some_and(|p| std::str::from_utf8(p).is_ok()))
            })
            .collect();
        checks.into_iter().all(|h| h.join().unwrap_or(false))
    });
    // SAFETY: every piece, cut at character starts, is valid UTF-8, so the
    // whole is (a sequence cannot straddle a cut that starts a character).
    valid.then(|| unsafe { std::str::from_utf8_unchecked(bytes) })
}

/// How one run of events ended.
enum RunEnd {
    /// At the array's closing `]`; the position after it.
    Close(usize),
    /// At the next event start, exactly where the next worker began.
    Handover,
}

/// Scan events from `start` (an event's `{`) until the array closes or, with
/// `stop`, until the position after a `,` reaches `stop`. `None`: the text is
/// not what the scanner expects; `Some(None)`: the run passed `stop` without
/// landing on it (the guessed boundary was inside an event).
fn event_run(
    t: &str,
    start: usize,
    stop: Option<usize>,
    c: &mut Collector,
) -> Option<Option<RunEnd>> {
    let mut s = Scan {
        t,
        b: t.as_bytes(),
        i: start,
    };
    loop {
        event(&mut s, c)?;
        s.ws();
        match *s.b.get(s.i)? {
            b',' => {
                s.i += 1;
                s.ws();
                if let Some(stop) = stop {
                    if s.i == stop {
                        return Some(Some(RunEnd::Handover));
                    }
                    if s.i > stop {
                        return Some(None);
                    }
                }
            }
            b']' => {
                s.i += 1;
                return Some(if stop.is_some() {
                    None
                } else {
                    Some(RunEnd::Close(s.i))
                });
            }
            _ => return None,
        }
    }
}

/// The `traceEvents` array from its first event to the position after `]`.
/// Large arrays are cut at guessed event boundaries and scanned by several
/// threads; each boundary is confirmed by the run before it landing exactly
/// on it, else the whole array is scanned again by one thread.
/// Returns the position after `]` and whether the threads' split held.
fn events(t: &str, start: usize, c: &mut Collector, threads: usize) -> Option<(usize, bool)> {
    let b = t.as_bytes();
    let span = b.len().checked_sub(start)?;
    let cuts: Vec<usize> = if threads > 1 {
        let mut cuts = vec![start];
        for k in 1..threads {
            match event_start_after(b, start + span * k / threads) {
                Some(p) if cuts.last().is_some_and(|last| p > *last) => cuts.push(p),
                _ => break,
            }
        }
        cuts
    } else {
        vec![start]
    };
    if cuts.len() > 1 {
        let results: Vec<Option<(Collector, Option<RunEnd>)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..cuts.len())
                .map(|k| {
                    let from = cuts.get(k).copied().unwrap_or(start);
                    let stop = cuts.get(k + 1).copied();
                    scope.spawn(move || {
                        let mut part = Collector::default();
                        let end = event_run(t, from, stop, &mut part)?;
                        Some((part, end))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().ok().flatten())
                .collect()
        });
        let mut parts = Vec::with_capacity(results.len());
        let mut close = None;
        let mut confirmed = true;
        for r in results {
            // A run that fails or overshoots may have started inside a string:
            // only the one-thread scan below can tell a broken file.
            match r {
                Some((part, Some(end))) => {
                    if let RunEnd::Close(p) = end {
                        close = Some(p);
                    }
                    parts.push(part);
                }
                _ => confirmed = false,
            }
        }
        if let (true, Some(close)) = (confirmed, close) {
            for part in parts {
                c.append(part);
            }
            return Some((close, true));
        }
    }
    match event_run(t, start, None, c)? {
        Some(RunEnd::Close(p)) => Some((p, false)),
        _ => None,
    }
}

/// The first position at or after `from` that looks like the start of an
/// event: a `{` preceded (whitespace aside) by `,` and before that by `}`.
/// Only a guess: the byte may sit inside a string; `events` confirms it.
fn event_start_after(b: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(rel) = memchr::memchr(b'{', b.get(i..)?) {
        let p = i + rel;
        let mut j = p;
        let prev = |j: &mut usize| -> Option<u8> {
            while *j > 0 {
                *j -= 1;
                match b.get(*j) {
                    Some(b' ' | b'\n' | b'\r' | b'\t') => {}
                    other => return other.copied(),
                }
            }
            None
        };
        if prev(&mut j) == Some(b',') && prev(&mut j) == Some(b'}') {
            return Some(p);
        }
        i = p + 1;
    }
    None
}

/// One event object into the collector. Most events (CPU ops, Python
/// frames, flow arrows) are dropped: once the fields read so far show it,
/// the rest of the object is skipped.
fn event(s: &mut Scan<'_>, c: &mut Collector) -> Option<()> {
    let mut f = Fields::default();
    s.object_while(|s, k| {
        match k {
            "ph" => f.ph = Some(plain(s.value()?)),
            "cat" => f.cat = Some(plain(s.value()?)),
            "name" => {
                let (raw, escaped) = s.string()?;
                f.name = Some(if escaped {
                    Cow::Owned(serde_json::from_str::<String>(&format!("\"{raw}\"")).ok()?)
                } else {
                    Cow::Borrowed(raw)
                });
            }
            "ts" => f.ts = Some(s.value()?),
            "dur" => f.dur = Some(s.value()?),
            "tid" => f.tid = Some(s.value()?),
            "args" => {
                if s.b.get({
                    s.ws();
                    s.i
                }) != Some(&b'{')
                {
                    s.value()?;
                } else {
                    s.object(|s, a| {
                        let v = s.value()?;
                        match a {
                            "correlation" => f.correlation = Some(v),
                            "stream" => f.stream = Some(v),
                            "device" => f.device = Some(v),
                            "grid" => f.grid = Some(v),
                            "block" => f.block = Some(v),
                            "bytes" => f.bytes = Some(v),
                            "In msg nelems" => f.in_nelems = Some(v),
                            "Out msg nelems" => f.out_nelems = Some(v),
                            "dtype" => f.dtype = Some(v),
                            "Collective name" => f.collective = Some(v),
                            _ => {}
                        }
                        Some(())
                    })?;
                }
            }
            _ => {
                s.value()?;
            }
        }
        Some(!Collector::dropped(&f))
    })?;
    c.take_fields(f);
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_is_checked_in_pieces() {
        // Multi-byte characters around every cut; then one broken byte.
        let text = "aé€😀".repeat(PARALLEL_MIN_BYTES / 10 + 1);
        for threads in [2, 3, 8] {
            assert_eq!(utf8(text.as_bytes(), threads), Some(text.as_str()));
        }
        let mut bad = text.clone().into_bytes();
        let mid = bad.len() / 2;
        bad[mid] = 0xFF;
        assert_eq!(utf8(&bad, 3), None);
        let mut cut = text.into_bytes();
        cut.truncate(cut.len() - 1); // the last emoji loses its last byte
        assert_eq!(utf8(&cut, 2), None);
    }

    #[test]
    fn a_plain_trace_is_split_between_threads() {
        let mut text = String::from("{\"traceEvents\": [\n");
        for i in 0..3000 {
            if i > 0 {
                text.push_str(",\n  ");
            }
            text.push_str(&format!(
                "{{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k{i}\", \"ts\": {i}.25, \"dur\": 1, \"args\": {{\"correlation\": {i}}}}}"
            ));
        }
        text.push_str("]}");
        let start = text.find('[').unwrap() + 2;
        let mut one = Collector::default();
        let (end1, split1) = events(&text, start, &mut one, 1).unwrap();
        assert!(!split1);
        for threads in [2, 4, 7] {
            let mut many = Collector::default();
            let (end, split) = events(&text, start, &mut many, threads).unwrap();
            assert!(split, "{threads} threads: every cut confirmed");
            assert_eq!(end, end1);
            assert_eq!(many.timeline.activities, one.timeline.activities);
            assert_eq!(many.events, 3000);
        }
    }

    /// A trace whose events hold strings that look like event boundaries.
    fn tricky_trace(n: usize) -> String {
        let mut s = String::from("{\"schemaVersion\": 1, \"traceEvents\": [\n");
        for i in 0..n {
            if i > 0 {
                s.push_str(",\n");
            }
            let name = if i % 7 == 0 { "x}, {y" } else { "k" };
            s.push_str(&format!(
                "{{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"{name}\", \"ts\": {}.5, \"dur\": 1, \"args\": {{\"correlation\": {i}, \"note\": \"}}, {{\"}}}}",
                1000 + i
            ));
        }
        s.push_str("\n], \"deviceProperties\": [{\"name\": \"NVIDIA H200\", \"numSms\": 132}]}");
        s
    }

    #[test]
    fn threads_give_the_same_timeline_as_one() {
        let text = tricky_trace(5000);
        let mut one = Collector::default();
        assert_eq!(scan_with(text.as_bytes(), &mut one, 1), Some(true));
        assert_eq!(one.timeline.activities.len(), 5000);
        for threads in [2, 3, 8] {
            let mut many = Collector::default();
            let b = text.as_bytes();
            let start = text.find('[').unwrap() + 2;
            // Force the parallel path on a small input.
            let (end, _) = events(&text, start, &mut many, threads).unwrap();
            assert_eq!(&b[end - 1..end], b"]");
            assert_eq!(
                many.timeline.activities, one.timeline.activities,
                "{threads}"
            );
            assert_eq!(many.events, one.events);
        }
    }

    #[test]
    fn a_boundary_guessed_inside_a_string_falls_back_to_one_thread() {
        // Every guessed cut lands in a string that looks like "}, {".
        let text = tricky_trace(50);
        let start = text.find('[').unwrap() + 2;
        let guess = event_start_after(text.as_bytes(), start + 10).unwrap();
        assert!(
            text[..=guess].ends_with("}, {"),
            "the guess is inside a string"
        );
        let mut c = Collector::default();
        events(&text, start, &mut c, 4).unwrap();
        assert_eq!(c.timeline.activities.len(), 50);
        let correlations: Vec<u64> = c
            .timeline
            .activities
            .iter()
            .map(|a| a.correlation)
            .collect();
        assert_eq!(correlations, (0..50).collect::<Vec<u64>>());
    }
}
