//! kopt's rocprofv3 counter groups against rocprof-compute's own pass files
//! for gfx942 (`fixtures/amd/omniperf-vcopy-mi300x/perfmon/`, an MI300X run):
//! the per-pass limits kopt sizes its groups by are the ones those files
//! reach, and the level counters sit in a pass without other SQ work.

use std::collections::BTreeMap;
use std::path::PathBuf;

use kopt_collect::rocprof::{counter_block, BLOCK_LIMITS, COUNTER_GROUPS};

/// Each pass file's counters (`pmc: A B C`), by file name; a counter read
/// per channel (`TCC_HIT[0]` ... `TCC_HIT[15]`) counts once.
fn pass_files() -> BTreeMap<String, Vec<String>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/amd/omniperf-vcopy-mi300x/perfmon");
    let mut passes = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let counters = text
            .lines()
            .find_map(|l| l.strip_prefix("pmc:"))
            .unwrap_or_else(|| panic!("{}: no pmc line", path.display()))
            .split_whitespace()
            .map(|c| c.split('[').next().unwrap_or(c).to_string())
            .collect::<std::collections::BTreeSet<String>>()
            .into_iter()
            .collect();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        passes.insert(name, counters);
    }
    passes
}

#[test]
fn block_limits_are_what_rocprof_compute_fills() {
    let passes = pass_files();
    assert_eq!(passes.len(), 24, "{:?}", passes.keys());
    // The most counters of one block that any of its pmc_perf passes holds.
    let mut most: BTreeMap<&str, usize> = BTreeMap::new();
    for (name, counters) in passes.iter().filter(|(n, _)| n.starts_with("pmc_perf_")) {
        let mut per_block: BTreeMap<&str, usize> = BTreeMap::new();
        for c in counters {
            *per_block.entry(counter_block(c)).or_default() += 1;
        }
        for (block, n) in per_block {
            let m = most.entry(block).or_default();
            *m = (*m).max(n);
            if let Some((_, limit)) = BLOCK_LIMITS.iter().find(|(b, _)| *b == block) {
                assert!(
                    n <= *limit,
                    "{name}: {n} {block} counters, kopt allows {limit}"
                );
            }
        }
    }
    for (block, limit) in BLOCK_LIMITS {
        assert_eq!(most.get(block), Some(limit), "{block}");
    }
}

#[test]
fn level_counters_run_in_a_pass_of_their_own() {
    let passes = pass_files();
    let level = |c: &str| c.contains("_LEVEL") || c.ends_with("_ACCUM_PREV_HIRES");
    // rocprof-compute: an SQ level counter's pass holds no other one.
    for (name, counters) in &passes {
        let levels: Vec<&String> = counters
            .iter()
            .filter(|c| c.starts_with("SQ_") && c.contains("_LEVEL"))
            .collect();
        assert!(levels.len() <= 1, "{name}: {levels:?}");
    }
    assert!(passes["SQ_LEVEL_WAVES.txt"]
        .iter()
        .any(|c| c == "SQ_ACCUM_PREV_HIRES"));
    // kopt: the group with SQ_LEVEL_WAVES has no SQ counter but the level pair.
    let group = COUNTER_GROUPS
        .iter()
        .find(|g| g.contains(&"SQ_LEVEL_WAVES"))
        .unwrap();
    assert!(group.iter().all(|c| !c.starts_with("SQ_") || level(c)));
}
