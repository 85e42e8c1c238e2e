//! Parsing the real captures under fixtures/.

use std::path::PathBuf;

use kopt_ingest::{read_ncu_csv, NcuPage};

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

#[test]
fn probe_raw_page_with_prof_lines_and_thousands_separators() {
    let f = read_ncu_csv(&fixture("h100-probe/ncu_raw.csv")).unwrap();
    assert_eq!(f.page, NcuPage::Raw);
    assert_eq!(f.launches.len(), 17);
    let dev = f.device.unwrap();
    assert_eq!(dev.name, "NVIDIA H100 80GB HBM3");
    assert_eq!(dev.sm_count, Some(132));
    assert_eq!(dev.compute_capability.as_deref(), Some("9.0"));
    let gemm = f
        .launches
        .iter()
        .find(|l| l.name.starts_with("nvjet"))
        .unwrap();
    assert_eq!(gemm.metrics.duration_ns, Some(1_525_984.0));
    assert_eq!(gemm.metrics.tensor_pct, Some(97.07));
    // "245,671,424" in dram__bytes_write.sum of launch 2.
    assert_eq!(f.launches[2].metrics.dram_bytes_write, Some(245_671_424.0));
    assert_eq!(f.launches[2].grid.x, 1056);
}

#[test]
fn base_and_auto_units_agree() {
    let base = read_ncu_csv(&fixture("labeled-suite-h100/ncu_raw_base.csv")).unwrap();
    let auto = read_ncu_csv(&fixture("labeled-suite-h100/ncu_raw_auto.csv.gz")).unwrap();
    assert_eq!(base.launches.len(), auto.launches.len());
    assert_eq!(base.launches.len(), 212);
    for (b, a) in base.launches.iter().zip(&auto.launches) {
        assert_eq!(b.name, a.name);
        let (bd, ad) = (
            b.metrics.duration_ns.unwrap(),
            a.metrics.duration_ns.unwrap(),
        );
        // auto-scaled units print fewer digits (e.g. 0.193472 ms).
        assert!(
            (bd - ad).abs() <= 0.001 * bd + 1.0,
            "{}: {bd} vs {ad}",
            b.name
        );
        if let (Some(bb), Some(ab)) = (b.metrics.dram_bytes_read, a.metrics.dram_bytes_read) {
            assert!(
                (bb - ab).abs() <= 0.01 * bb + 1e3,
                "{}: {bb} vs {ab}",
                b.name
            );
        }
    }
}

#[test]
fn suite_details_page_with_rules() {
    let f = read_ncu_csv(&fixture("labeled-suite-h100/ncu_details.csv")).unwrap();
    assert_eq!(f.page, NcuPage::Details);
    assert_eq!(f.launches.len(), 19);
    let naive = f
        .launches
        .iter()
        .find(|l| l.name == "kopt_transpose_smem_naive")
        .unwrap();
    assert!(naive.metrics.shared_conflict_pct_from_rule.unwrap() > 90.0);
    assert!(naive
        .ncu_rules
        .iter()
        .any(|r| r.name == "SharedMemoryConflicts"));
    let gather = f
        .launches
        .iter()
        .find(|l| l.name == "kopt_gather_strided")
        .unwrap();
    assert_eq!(gather.metrics.uncoalesced_excess_pct_from_rule, Some(78.0));
    // Duration is printed in us or ms; kopt holds ns.
    let d = gather.metrics.duration_ns.unwrap();
    assert!(d > 100_000.0 && d < 1_000_000.0, "{d}");
    let dev = f.device.unwrap();
    assert_eq!(dev.sm_count, Some(132));
    let dram = dev.peaks.dram_bytes_per_s.unwrap();
    assert!(dram > 3.0e12 && dram < 3.6e12, "{dram}");
}

#[test]
fn probe_details_page() {
    let f = read_ncu_csv(&fixture("h100-probe/ncu_details.csv")).unwrap();
    assert_eq!(f.launches.len(), 12);
    assert!(f.launches.iter().all(|l| l.metrics.duration_ns.is_some()));
    assert!(f.launches.iter().all(|l| !l.ncu_rules.is_empty()));
}

/// The same export written in a decimal-comma locale (`1.024,5`) parses to the same numbers.
#[test]
fn decimal_comma_locale_gives_the_same_numbers() {
    let text = std::fs::read_to_string(fixture("h100-probe/ncu_raw.csv")).unwrap();
    let swapped: Vec<String> = text
        .lines()
        .map(|line| {
            if !line.starts_with('"') {
                return line.to_string();
            }
            let inner = line
                .strip_prefix('"')
                .and_then(|l| l.strip_suffix('"'))
                .unwrap();
            let cells: Vec<String> = inner
                .split("\",\"")
                .map(|c| {
                    let numeric = !c.is_empty()
                        && c.bytes()
                            .all(|b| b.is_ascii_digit() || b == b',' || b == b'.');
                    if numeric {
                        c.chars()
                            .map(|ch| match ch {
                                ',' => '.',
                                '.' => ',',
                                x => x,
                            })
                            .collect()
                    } else {
                        c.to_string()
                    }
                })
                .collect();
            format!("\"{}\"", cells.join("\",\""))
        })
        .collect();
    let comma = kopt_ingest::parse_ncu_csv(swapped.join("\n").as_bytes(), "comma.csv").unwrap();
    let dot = read_ncu_csv(&fixture("h100-probe/ncu_raw.csv")).unwrap();
    assert_eq!(comma.launches.len(), dot.launches.len());
    for (c, d) in comma.launches.iter().zip(&dot.launches) {
        assert_eq!(c.metrics, d.metrics, "{}", d.name);
    }
}

#[test]
fn truncated_details_row_is_reported_with_its_line() {
    let text = std::fs::read_to_string(fixture("h100-probe/ncu_details.csv")).unwrap();
    let cut = &text[..text.len() - 200];
    let cut = &cut[..cut.rfind('\n').unwrap() + 40];
    let err = kopt_ingest::parse_ncu_csv(cut.as_bytes(), "d.csv")
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("d.csv:"), "{err}");
    assert!(err.contains("truncated"), "{err}");
}

#[test]
fn a_gzipped_page_reads_as_the_plain_one() {
    use std::io::Write;
    let plain_path = fixture("h100-probe/ncu_raw.csv");
    let dir = tempfile::tempdir().unwrap();
    let gz_path = dir.path().join("ncu_raw.csv.gz");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&std::fs::read(&plain_path).unwrap()).unwrap();
    std::fs::write(&gz_path, gz.finish().unwrap()).unwrap();
    assert_eq!(
        kopt_ingest::detect::sniff(&gz_path).unwrap(),
        kopt_ingest::detect::InputKind::NcuCsv
    );
    let plain = read_ncu_csv(&plain_path).unwrap();
    let gzipped = read_ncu_csv(&gz_path).unwrap();
    assert_eq!(format!("{plain:?}"), format!("{gzipped:?}"));
}
