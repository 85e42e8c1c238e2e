//! A fast path for well-formed Kineto traces: a hand-written scanner that
//! walks `traceEvents` and looks only at the fields kopt keeps, skipping
//! everything else without building it. Anything it does not expect makes it
//! give up (`None`); the serde path then parses the file and, for a broken
//! file, reports the fault with its byte offset and repairs what it can.

use std::borrow::Cow;

use super::kineto::Collector;

struct Scan<'a> {
    /// The whole file, UTF-8 checked once; slices are cut at ASCII delimiters.
    t: &'a str,
    b: &'a [u8],
    i: usize,
}

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
}

impl<'a> Scan<'a> {
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\n' | b'\r' | b'\t') {
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
        loop {
            let rel = memchr::memchr2(b'"', b'\\', &self.b[self.i..])?;
            self.i += rel;
            if self.b[self.i] == b'\\' {
                escaped = true;
                self.i += 2;
                continue;
            }
            let s = &self.t[start..self.i];
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
                            depth -= 1;
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
                while self.i < self.b.len()
                    && !matches!(
                        self.b[self.i],
                        b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t'
                    )
                {
                    self.i += 1;
                }
                if self.i == start {
                    return None;
                }
            }
        }
        self.t.get(start..self.i)
    }

    /// `{"k": v, ...}` calling `f` with each key and the scanner positioned at its value.
    fn object(&mut self, mut f: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
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
            f(self, key)?;
            self.ws();
            match *self.b.get(self.i)? {
                b',' => self.i += 1,
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

/// Parse `bytes` if it is a well-formed trace; `None` sends the caller to the serde path.
pub(crate) fn scan(bytes: &[u8], c: &mut Collector) -> Option<bool> {
    let text = std::str::from_utf8(bytes).ok()?;
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
            loop {
                let mut f = Fields::default();
                s.object(|s, k| {
                    match k {
                        "ph" => f.ph = Some(plain(s.value()?)),
                        "cat" => f.cat = Some(plain(s.value()?)),
                        "name" => {
                            let (raw, escaped) = s.string()?;
                            f.name = Some(if escaped {
                                Cow::Owned(
                                    serde_json::from_str::<String>(&format!("\"{raw}\"")).ok()?,
                                )
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
                                return Some(());
                            }
                            s.object(|s, a| {
                                let v = s.value()?;
                                match a {
                                    "correlation" => f.correlation = Some(v),
                                    "stream" => f.stream = Some(v),
                                    "device" => f.device = Some(v),
                                    "grid" => f.grid = Some(v),
                                    "block" => f.block = Some(v),
                                    "bytes" => f.bytes = Some(v),
                                    _ => {}
                                }
                                Some(())
                            })?;
                        }
                        _ => {
                            s.value()?;
                        }
                    }
                    Some(())
                })?;
                c.take_fields(f);
                s.ws();
                match *s.b.get(s.i)? {
                    b',' => s.i += 1,
                    b']' => {
                        s.i += 1;
                        return Some(());
                    }
                    _ => return None,
                }
            }
        }
        "deviceProperties" => {
            let start = {
                s.ws();
                s.i
            };
            s.value()?;
            c.take_device_properties(&text[start..s.i]);
            Some(())
        }
        _ => s.value().map(|_| ()),
    })?;
    s.ws();
    (s.i == bytes.len()).then_some(seen)
}
