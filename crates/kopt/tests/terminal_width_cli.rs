//! `kopt analyze`'s terminal table at the widths people run: the compact
//! default fits the width, `--wide` brings every column back.

use std::path::PathBuf;
use std::process::Command;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/labeled-suite-h100/ncu_raw_base.csv")
}

fn analyze(args: &[&str]) -> String {
    analyze_file(&fixture(), args)
}

fn analyze_file(file: &std::path::Path, args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .arg("analyze")
        .arg(file)
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
    // The whole report (the root causes under the rows are --verbose's).
    let text = analyze(&["--width", "80", "--verbose"]);
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

/// The header names the input file; a checkout deep in a CI runner's tree
/// gives a path longer than the line, which must break, not overflow.
#[test]
fn a_long_input_path_still_fits() {
    let dir = std::env::temp_dir().join(format!(
        "kopt-width-{}/a-directory-name-long-enough-to-pass-eighty-columns/on-its-own",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("ncu_raw_base.csv");
    std::fs::copy(fixture(), &file).unwrap();
    let text = analyze_file(&file, &["--width", "80"]);
    for line in text.lines() {
        assert!(line.chars().count() <= 80, "{line:?}");
    }
    assert!(text.contains("ncu_raw_base.csv (ncu-raw"), "{text}");
    std::fs::remove_dir_all(dir.ancestors().nth(2).unwrap()).ok();
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

/// #41: the labeled suite and a `kopt profile` run folder fit one screen at
/// 80 columns by default (at most 60 lines, no line twice); `-v` and
/// `--verbose` print the whole report. Run as the README does: from the
/// repository root, paths relative to it.
#[test]
fn the_default_report_fits_one_screen() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let run = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
            .arg("analyze")
            .args(args)
            .current_dir(&root)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    for file in [
        "fixtures/labeled-suite-h100/ncu_raw_base.csv",
        "fixtures/profile-module-h200/run",
    ] {
        let brief = run(&[file, "--width", "80"]);
        let lines: Vec<&str> = brief.lines().collect();
        assert!(lines.len() <= 60, "{file}: {} lines", lines.len());
        let mut seen = std::collections::HashSet::new();
        for l in lines
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty() && !l.starts_with('─'))
        {
            assert!(seen.insert(l), "{file}: said twice: {l:?}");
        }
        let short = run(&[file, "--width", "80", "-v"]);
        let long = run(&[file, "--width", "80", "--verbose"]);
        assert_eq!(short, long);
        assert!(long.contains("evidence: "), "{file}");
        assert!(long.lines().count() > lines.len());
    }
}
