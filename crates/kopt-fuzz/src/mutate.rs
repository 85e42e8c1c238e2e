//! A small structure-blind mutator with a seeded PRNG: byte flips,
//! insertions, deletions, truncations, duplicated chunks, splices between
//! inputs, and values that break parsers (huge and negative numbers, NaN,
//! stray backslashes, unclosed quotes, control characters).

/// SplitMix64: tiny, seedable, good enough to pick mutations.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// An index into a slice of `len` > 0 items, or 0 for an empty one.
    pub fn index(&mut self, len: usize) -> usize {
        if len == 0 {
            0
        } else {
            self.below(len)
        }
    }

    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
}

/// Tokens that break parsers, inserted or written over a number.
pub const INTERESTING: &[&str] = &[
    "0",
    "-0",
    "-1",
    "1e308",
    "1e309",
    "-1e309",
    "1e-400",
    "NaN",
    "nan",
    "inf",
    "-inf",
    "Infinity",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "-9223372036854775808",
    "4294967296",
    "2147483648",
    "99999999999999999999999999999999",
    "0.000000000000000000000001",
    "1.7976931348623157e308",
    "0x10",
    "1,5",
    "\"",
    "\\",
    "\\u",
    "\\ud800",
    "\\u0000",
    "\"\"",
    "\",\"",
    "null",
    "true",
    "[]",
    "{}",
    "[[[[[[[[",
    "{\"\":",
    ",",
    ":",
    "\n",
    "\r\n",
    "\t",
    "\u{1b}[31m",
    "\u{7}",
    "\u{0}",
    "\u{85}",
    "\u{202e}",
    "é",
    "(",
    ")",
    "<",
    ">",
    "::",
    "#",
    "%",
    " ",
];

/// Bytes written over one byte.
const BYTES: &[u8] = &[
    0, 0xff, 0x7f, 0x80, 0xc3, b'"', b'\\', b',', b'\n', b'\r', b'{', b'}', b'[', b']', b':', b' ',
    b'0', b'9', b'-', b'.', b'e', 0x1b, 0x07,
];

/// One to eight stacked mutations of `input`; `others` are splice partners.
/// The result is at most `max_len` bytes.
pub fn mutate(rng: &mut Rng, input: &[u8], others: &[&[u8]], max_len: usize) -> Vec<u8> {
    let mut v = input.to_vec();
    let rounds = 1 + rng.below(8);
    for _ in 0..rounds {
        mutate_once(rng, &mut v, others);
        v.truncate(max_len);
    }
    v
}

fn mutate_once(rng: &mut Rng, v: &mut Vec<u8>, others: &[&[u8]]) {
    let len = v.len();
    match rng.below(14) {
        // Flip a bit.
        0 if len > 0 => {
            let i = rng.below(len);
            v[i] ^= 1 << rng.below(8);
        }
        // Write an interesting byte.
        1 if len > 0 => {
            let i = rng.below(len);
            v[i] = BYTES[rng.below(BYTES.len())];
        }
        // Insert random bytes.
        2 => {
            let at = rng.index(len + 1);
            let n = 1 + rng.below(8);
            let bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
            v.splice(at..at, bytes);
        }
        // Delete a range.
        3 if len > 0 => {
            let a = rng.below(len);
            let n = 1 + rng.below((len - a).min(64));
            v.drain(a..a + n);
        }
        // Truncate.
        4 if len > 0 => {
            v.truncate(rng.below(len));
        }
        // Duplicate a chunk somewhere else (repeated structure: events, rows).
        5 if len > 0 => {
            let a = rng.below(len);
            let n = 1 + rng.below((len - a).min(512));
            let chunk = v[a..a + n].to_vec();
            let at = rng.index(len + 1);
            v.splice(at..at, chunk);
        }
        // Splice: a prefix of this input and a suffix of another.
        6 if !others.is_empty() => {
            let o = others[rng.below(others.len())];
            let cut = rng.index(len + 1);
            let from = rng.index(o.len() + 1);
            v.truncate(cut);
            v.extend_from_slice(&o[from..]);
        }
        // Insert a chunk of another input.
        7 if !others.is_empty() => {
            let o = others[rng.below(others.len())];
            if !o.is_empty() {
                let a = rng.below(o.len());
                let n = 1 + rng.below((o.len() - a).min(256));
                let at = rng.index(len + 1);
                v.splice(at..at, o[a..a + n].iter().copied());
            }
        }
        // Insert an interesting token.
        8 | 9 => {
            let t = INTERESTING[rng.below(INTERESTING.len())].as_bytes();
            let at = rng.index(len + 1);
            v.splice(at..at, t.iter().copied());
        }
        // Replace a number with an interesting token.
        10 | 11 => {
            if let Some((a, b)) = pick_number(rng, v) {
                let t = INTERESTING[rng.below(INTERESTING.len())].as_bytes();
                v.splice(a..b, t.iter().copied());
            }
        }
        // Replace a number with a nearby or huge one.
        12 => {
            if let Some((a, b)) = pick_number(rng, v) {
                let n: i128 = match rng.below(4) {
                    0 => rng.below(4) as i128 - 1,
                    1 => (rng.next_u64() >> rng.below(64)) as i128,
                    2 => -((rng.next_u64() >> rng.below(64)) as i128),
                    _ => i128::from(u64::MAX) + rng.below(3) as i128,
                };
                v.splice(a..b, n.to_string().bytes());
            }
        }
        // Cut a quote: an unclosed string.
        _ => {
            let quotes: Vec<usize> = (0..len).filter(|&i| v[i] == b'"').collect();
            if !quotes.is_empty() {
                v.remove(quotes[rng.below(quotes.len())]);
            } else if len > 0 {
                let at = rng.below(len);
                v.insert(at, b'"');
            }
        }
    }
}

/// A run of ASCII digits (with a leading minus and decimals) in `v`.
fn pick_number(rng: &mut Rng, v: &[u8]) -> Option<(usize, usize)> {
    if v.is_empty() {
        return None;
    }
    // Look from a random point for the next digit, wrapping once.
    let start = rng.below(v.len());
    let pos = (start..v.len())
        .chain(0..start)
        .find(|&i| v[i].is_ascii_digit())?;
    let mut a = pos;
    while a > 0 && (v[a - 1].is_ascii_digit() || v[a - 1] == b'.' || v[a - 1] == b'-') {
        a -= 1;
    }
    let mut b = pos;
    while b < v.len() && (v[b].is_ascii_digit() || matches!(v[b], b'.' | b'e' | b'E' | b'+')) {
        b += 1;
    }
    Some((a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_mutation_is_repeatable_and_bounded() {
        let seed = br#"{"traceEvents": [{"ph": "X", "ts": 12.5, "dur": 3}]}"#;
        let run = |s| {
            let mut rng = Rng::new(s);
            (0..200)
                .map(|_| mutate(&mut rng, seed, &[b"other,1,2\n"], 100))
                .collect::<Vec<_>>()
        };
        let a = run(7);
        assert_eq!(a, run(7));
        assert_ne!(a, run(8));
        assert!(a.iter().all(|m| m.len() <= 100));
        assert!(a.iter().any(|m| m.as_slice() != seed.as_slice()));
    }
}
