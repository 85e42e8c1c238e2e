//! Memory an ncu CSV costs per row (#39: a narrow 44 MB CSV took 4.9 GB,
//! about 2.4 KB a row). One test in this binary: the peak resident size
//! it reads is the whole process's, so no other test may run beside it.

/// The process's peak resident size so far, in KiB (Linux).
fn peak_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Merging the parsed files into a profile moves their launches: it held
/// a second copy of every launch (1.2 KB each) while both lived.
#[test]
fn merging_a_large_csv_into_a_profile_copies_no_launch() {
    let rows = 100_000;
    let mut csv =
        String::from("\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"\",\"\",\"nsecond\"\n");
    for i in 0..rows {
        csv.push_str(&format!("\"{i}\",\"k{}\",\"{}\"\n", i % 7, 1000 + i % 13));
    }
    let Some(start) = peak_kib() else { return };
    let file = kopt_ingest::parse_ncu_csv(csv.as_bytes(), "narrow.csv").unwrap();
    let parsed = peak_kib().unwrap();
    let profile = kopt_ingest::merge_profile(vec![("narrow.csv".into(), file)]);
    let merged = peak_kib().unwrap();
    assert_eq!(profile.launches.len(), rows);
    let parse_cost = parsed - start;
    let merge_cost = merged - parsed;
    assert!(
        merge_cost * 10 < parse_cost,
        "parsing took {parse_cost} KiB more, merging {merge_cost} KiB more"
    );
}
