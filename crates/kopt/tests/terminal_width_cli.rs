//! `kopt analyze`'s terminal table at the widths people run: the compact
//! default fits the width, `--wide` brings every column back.

use std::path::PathBuf;
use std::process::Command;

fn analyze(args: &[&str]) -> String {
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/labeled-suite-h100/ncu_raw_base.csv");
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .arg("analyze")
        .arg(&fixture)
        .args(args)
        .output()
        .expect("kopt runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

fn header(report: &str) -> String {
    let lines: Vec<&str> = report.lines().collect();
    let rule = lines.iter().position(|l| l.starts_with('─')).unwrap();
    let start = lines[..rule].iter().rposition(|l| l.is_empty()).unwrap() + 1;
    lines[start..rule].join(" ")
}

#[test]
fn compact_table_fits_eighty_columns() {
    let text = analyze(&["--width", "80"]);
    for line in text.lines() {
        assert!(line.chars().count() <= 80, "{line:?}");
    }
    let h = header(&text);
    for c in ["Kernel", "Total", "% Total", "Class", "Key figure"] {
        assert!(h.contains(c), "{c} missing from {h:?}");
    }
    assert!(!h.contains("Launches"), "the compact table: {h:?}");
    // The root cause sits under its row, indented.
    assert!(text.contains("\n    Small grid: 8 blocks fill 0.8% of one wave on 132 SMs\n"));
}

#[test]
fn wide_shows_every_column() {
    let text = analyze(&["--width", "200", "--wide"]);
    let h = header(&text);
    for c in [
        "Kernel",
        "Launches",
        "Total",
        "Mean",
        "% Total",
        "DRAM GB/s",
        "Mem SOL %",
        "Compute SOL %",
        "Tensor %",
        "Occupancy %",
        "AI (FLOP/B)",
        "Class",
    ] {
        assert!(h.contains(c), "{c} missing from {h:?}");
    }
    let row = text
        .lines()
        .find(|l| l.starts_with("kopt_gather_strided"))
        .unwrap();
    assert!(
        row.contains(" 819.74 us ") && row.contains(" 409.87 us "),
        "{row}"
    );
}
