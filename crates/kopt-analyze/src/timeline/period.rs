//! The period a sequence of names repeats with, found in near-linear time.

use std::collections::HashMap;

/// The smallest period p (at least 2 repeats) with which the sequence repeats
/// itself at 90% of positions or more: `names[i] == names[i + p]` for 90% of
/// the `n - p` positions.
///
/// Checking every p position by position is quadratic (80,000 kernels whose
/// order never repeats took 26 s). Names become integer ids, and each p is
/// first bounded from above in O(1): position i can match only if some name
/// occurs both in `names[..n - p]` and in `names[p..]`, so the matches are at
/// most the sum over names of the smaller of its two counts, a sum kept up to
/// date as p grows. Only a p that bound lets through is counted, in chunks
/// that stop once too many positions differ. A trace of distinct names (or
/// of names that rarely recur) is done in linear time; one with few names
/// in an order that never repeats costs a fraction of the old count, its
/// chunks compare integers and stop after about a tenth of the positions.
pub fn repeated_period(names: &[&str]) -> Option<usize> {
    repeated_period_of_ids(&intern(names.iter().copied()))
}

/// Each item as a small integer id, in first-seen order.
pub(crate) fn intern<T: std::hash::Hash + Eq>(items: impl Iterator<Item = T>) -> Vec<usize> {
    let mut id_of: HashMap<T, usize> = HashMap::new();
    items
        .map(|s| {
            let next = id_of.len();
            *id_of.entry(s).or_insert(next)
        })
        .collect()
}

/// `repeated_period` of a sequence already interned (ids from 0, first
/// seen first).
pub(crate) fn repeated_period_of_ids(ids: &[usize]) -> Option<usize> {
    let n = ids.len();
    if n < 2 {
        return None;
    }
    let distinct = ids.iter().max().map_or(0, |m| m + 1);
    // Occurrences of each id in the compared prefix `ids[..n - p]` and
    // suffix `ids[p..]`, and the sum of their minima: the bound, for p = 1.
    let mut prefix = vec![0usize; distinct];
    let mut suffix = vec![0usize; distinct];
    for (i, &x) in ids.iter().enumerate() {
        if i + 1 < n {
            prefix[x] += 1;
        }
        if i > 0 {
            suffix[x] += 1;
        }
    }
    let mut bound: usize = prefix.iter().zip(&suffix).map(|(a, b)| a.min(b)).sum();
    for p in 1..=n / 2 {
        if p > 1 {
            // From p - 1 to p: the prefix loses ids[n - p], the suffix ids[p - 1].
            if let (Some(&x), Some(&y)) = (ids.get(n - p), ids.get(p - 1)) {
                bound -= usize::from(prefix[x] <= suffix[x]);
                prefix[x] -= 1;
                bound -= usize::from(suffix[y] <= prefix[y]);
                suffix[y] -= 1;
            }
        }
        let m = n - p;
        if repeats_enough(bound, m) && matches_at_lag(ids, p) {
            return Some(p);
        }
    }
    None
}

/// The 90% rule: `same` of `m` compared positions are equal.
pub(super) fn repeats_enough(same: usize, m: usize) -> bool {
    same as f64 >= 0.9 * m as f64
}

/// Whether `ids[i] == ids[i + p]` for enough positions, counted in chunks
/// that stop as soon as the positions that differ rule it out.
pub(super) fn matches_at_lag(ids: &[usize], p: usize) -> bool {
    let (Some(head), Some(tail)) = (ids.get(..ids.len().saturating_sub(p)), ids.get(p..)) else {
        return false;
    };
    let m = head.len();
    // The fewest equal positions that pass, found by the rule itself (no rounding doubts).
    let mut need = ((0.9 * m as f64).ceil() as usize).min(m);
    while need > 0 && repeats_enough(need - 1, m) {
        need -= 1;
    }
    while need < m && !repeats_enough(need, m) {
        need += 1;
    }
    let allowed = m - need;
    let mut differ = 0usize;
    for (a, b) in head.chunks(4096).zip(tail.chunks(4096)) {
        differ += a.iter().zip(b).filter(|(x, y)| x != y).count();
        if differ > allowed {
            return false;
        }
    }
    true
}

/// Share of positions `i` with `ids[i] == ids[i + lag]`.
pub(super) fn match_share(ids: &[usize], lag: usize) -> f64 {
    let m = ids.len().saturating_sub(lag);
    if m == 0 {
        return 0.0;
    }
    let same = ids.iter().zip(&ids[lag..]).filter(|(a, b)| a == b).count();
    same as f64 / m as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods() {
        let step = ["topk", "sort", "sort2", "cat"];
        let seq: Vec<&str> = step.iter().cycle().take(40).copied().collect();
        assert_eq!(repeated_period(&seq), Some(4));
        assert_eq!(repeated_period(&["a", "b", "c"]), None);
        assert_eq!(repeated_period(&["k"; 10]), Some(1));
    }

    /// The definition, position by position (what `repeated_period` replaced).
    fn period_by_definition(names: &[&str]) -> Option<usize> {
        let n = names.len();
        (1..=n / 2).find(|&p| {
            let same = (0..n - p).filter(|&i| names[i] == names[i + p]).count();
            same as f64 >= 0.9 * (n - p) as f64
        })
    }

    #[test]
    fn periods_agree_with_the_definition() {
        // Steps with noise: a warm-up lead, names replaced here and there,
        // few names in a pseudo-random order, distinct names.
        let pool: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
        let mut seed = 12345u64;
        let mut next = |m: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % m
        };
        for case in 0..300 {
            let n = 1 + next(300);
            let period = 1 + next(12);
            let alphabet = 1 + next(pool.len());
            let noise = next(25);
            let lead = next(10);
            let seq: Vec<&str> = (0..n)
                .map(|i| {
                    if i < lead || next(100) < noise {
                        pool[next(alphabet)].as_str()
                    } else {
                        pool[(i - lead) % period % alphabet].as_str()
                    }
                })
                .collect();
            assert_eq!(
                repeated_period(&seq),
                period_by_definition(&seq),
                "case {case}: {seq:?}"
            );
        }
        let distinct: Vec<String> = (0..500).map(|i| format!("d{i}")).collect();
        let distinct: Vec<&str> = distinct.iter().map(String::as_str).collect();
        assert_eq!(repeated_period(&distinct), None);
        assert_eq!(repeated_period(&[]), None);
        assert_eq!(repeated_period(&["a"]), None);
        assert_eq!(repeated_period(&["a", "a"]), Some(1));
    }
}
