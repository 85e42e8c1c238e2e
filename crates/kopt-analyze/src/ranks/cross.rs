//! Across ranks: collectives matched by order, clocks aligned on their
//! ends, who arrived last and how long the others waited.

use std::collections::BTreeMap;

use kopt_model::CollectiveOp;

use super::profile::RankProfile;

/// One collective seen on every rank.
#[derive(Debug, Clone, PartialEq)]
pub struct Matched {
    pub op: CollectiveOp,
    /// Index into the profiles of the rank that entered last.
    pub last: usize,
    /// Entry times' spread, ns (aligned clocks).
    pub skew_ns: i64,
    /// Per profile: how long it waited for the last one, ns.
    pub waits: Vec<i64>,
    /// The shortest kernel of it over the ranks: the transfer itself, the
    /// others' kernels hold their wait too.
    pub transfer_ns: i64,
    /// Index of the collective in each profile's list.
    pub index: Vec<usize>,
}

/// Each profile's collectives of each op, in order: `[profile][op] -> indices`.
fn by_op(profiles: &[RankProfile]) -> Vec<BTreeMap<CollectiveOp, Vec<usize>>> {
    profiles
        .iter()
        .map(|p| {
            let mut m: BTreeMap<CollectiveOp, Vec<usize>> = BTreeMap::new();
            for (i, c) in p.collectives.iter().enumerate() {
                m.entry(c.op).or_default().push(i);
            }
            m
        })
        .collect()
}

fn median_i64(mut v: Vec<i64>) -> i64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[v.len() / 2]
}

/// The n-th collective of each op matched across all ranks (as far as the
/// rank with fewest goes), clocks aligned: a collective ends on every rank
/// at about the same moment, so each rank's offset to the first is the
/// median difference of their end times (one host's clocks agree already;
/// this also lines up hosts whose clocks do not).
pub fn match_collectives(profiles: &[RankProfile]) -> (Vec<Matched>, Vec<i64>) {
    if profiles.len() < 2 {
        return (Vec::new(), vec![0; profiles.len()]);
    }
    let ops = by_op(profiles);
    let mut groups: Vec<(CollectiveOp, Vec<usize>)> = Vec::new();
    for (op, first) in &ops[0] {
        let n = ops
            .iter()
            .map(|m| m.get(op).map_or(0, Vec::len))
            .min()
            .unwrap_or(0)
            .min(first.len());
        for k in 0..n {
            groups.push((*op, ops.iter().map(|m| m[op][k]).collect()));
        }
    }
    let offsets: Vec<i64> = (0..profiles.len())
        .map(|r| {
            median_i64(
                groups
                    .iter()
                    .map(|(_, idx)| {
                        profiles[r].collectives[idx[r]].end_ns
                            - profiles[0].collectives[idx[0]].end_ns
                    })
                    .collect(),
            )
        })
        .collect();
    let matched = groups
        .into_iter()
        .map(|(op, index)| {
            let starts: Vec<i64> = index
                .iter()
                .enumerate()
                .map(|(r, &i)| profiles[r].collectives[i].start_ns - offsets[r])
                .collect();
            let (last, latest) = starts
                .iter()
                .enumerate()
                .max_by_key(|&(r, s)| (*s, std::cmp::Reverse(r)))
                .map(|(r, s)| (r, *s))
                .unwrap_or((0, 0));
            let earliest = starts.iter().copied().min().unwrap_or(latest);
            let transfer_ns = index
                .iter()
                .enumerate()
                .map(|(r, &i)| {
                    let c = &profiles[r].collectives[i];
                    c.end_ns - c.start_ns
                })
                .min()
                .unwrap_or(0);
            Matched {
                op,
                last,
                skew_ns: latest - earliest,
                waits: starts.iter().map(|s| latest - s).collect(),
                transfer_ns,
                index,
            }
        })
        .collect();
    (matched, offsets)
}

/// How often each profile arrived last, and the others' summed wait for
/// it, over collectives with a spread worth naming (above `min_skew_ns`).
pub fn last_arrivals(matched: &[Matched], ranks: usize, min_skew_ns: i64) -> Vec<(u64, i64)> {
    let mut out = vec![(0u64, 0i64); ranks];
    for m in matched.iter().filter(|m| m.skew_ns > min_skew_ns) {
        let waited: i64 = m.waits.iter().sum();
        if let Some(o) = out.get_mut(m.last) {
            o.0 += 1;
            o.1 += waited / (ranks.max(2) as i64 - 1);
        }
    }
    out
}
