//! Small statistics over samples and spans: median, mode, percentiles,
//! the union length of intervals.

use std::collections::HashMap;

pub(crate) fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The most common value and the share of items that have it.
pub(super) fn mode(counts: &[usize]) -> Option<(usize, f64)> {
    let mut by: HashMap<usize, usize> = HashMap::new();
    for c in counts {
        *by.entry(*c).or_default() += 1;
    }
    let (value, n) = by.into_iter().max_by_key(|(v, n)| (*n, *v))?;
    Some((value, n as f64 / counts.len().max(1) as f64))
}

pub(super) fn percentile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return 0.0;
    }
    let i = ((s.len() - 1) as f64 * q).round() as usize;
    s[i.min(s.len() - 1)]
}

/// Union length of intervals.
pub(super) fn union_ns(mut spans: Vec<(i64, i64)>) -> i64 {
    spans.sort_unstable();
    let mut total = 0;
    let mut cur: Option<(i64, i64)> = None;
    for (s, e) in spans {
        match cur {
            Some((cs, ce)) if s <= ce => cur = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                cur = Some((s, e));
            }
            None => cur = Some((s, e)),
        }
    }
    total + cur.map_or(0, |(s, e)| e - s)
}
