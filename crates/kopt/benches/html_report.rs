//! The HTML report for a 2,000-kernel workload: page size, and render time in
//! headless Chromium against a named peer measured in the same run (a blank
//! page through the same browser start-up).
//!
//!     cargo bench -p kopt --bench html_report
//!
//! Goals (issue 6): under 2 MB and under 1 s to render on the 2-core machine.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const KERNELS: usize = 2000;
const RUNS: usize = 5;

/// 2,000 distinct kernels: real rows of the labeled suite, renamed.
fn synthesize(dir: &Path) -> PathBuf {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/labeled-suite-h100/ncu_raw_base.csv");
    let text = std::fs::read_to_string(src).unwrap();
    let mut lines = text.lines();
    let (header, units) = (lines.next().unwrap(), lines.next().unwrap());
    let rows: Vec<&str> = lines.filter(|l| !l.is_empty()).collect();
    let path = dir.join("kernels2000.csv");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    writeln!(out, "{header}\n{units}").unwrap();
    for i in 0..KERNELS {
        let row = rows[i % rows.len()];
        let mut cells: Vec<String> = row[1..row.len() - 1]
            .split("\",\"")
            .map(str::to_string)
            .collect();
        cells[0] = i.to_string();
        cells[4] = format!(
            "void ns::kernel_{i}<float, {}, (int)-1>(const T1 *, T2 &)",
            i % 7
        );
        writeln!(out, "\"{}\"", cells.join("\",\"")).unwrap();
    }
    out.flush().unwrap();
    path
}

#[path = "../tests/support/chromium.rs"]
mod chromium;

use chromium::{chromium, headless};

fn render_time(chrome: &Path, page: &Path, profile: &Path) -> Duration {
    let mut samples: Vec<Duration> = (0..RUNS)
        .map(|i| {
            let t = Instant::now();
            let out = headless(chrome, Path::new(&format!("{}-{i}", profile.display())))
                .arg("--dump-dom")
                .arg(format!("file://{}", page.display()))
                .output()
                .unwrap();
            assert!(out.status.success());
            t.elapsed()
        })
        .collect();
    samples.sort();
    samples[RUNS / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let csv = synthesize(dir.path());
    let page = dir.path().join("report.html");
    let t = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["analyze", "--format", "html", "-o"])
        .arg(&page)
        .arg(&csv)
        .output()
        .unwrap();
    let generate = t.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&page).unwrap();
    let size = html.len();
    let rows = html.matches("<tr><td class=\"name\"").count();
    let points = html.matches("<circle class=\"pt ").count();

    println!();
    println!("html_report: {KERNELS} kernels analysed; the page shows {rows} table rows (hottest first, the rest summed) and {points} roofline points");
    println!("| what | figure | goal |");
    println!("|---|--:|---|");
    println!(
        "| page size | {:.2} MB | < 2 MB: {} |",
        size as f64 / 1e6,
        if size < 2_000_000 { "met" } else { "MISSED" }
    );
    println!(
        "| kopt analyze --format html (generate) | {:.3} s | - |",
        generate.as_secs_f64()
    );
    match chromium() {
        Some(chrome) => {
            let blank = dir.path().join("blank.html");
            std::fs::write(&blank, "<!DOCTYPE html><html><body></body></html>").unwrap();
            let peer = render_time(&chrome, &blank, &dir.path().join("p-blank"));
            let full = render_time(&chrome, &page, &dir.path().join("p-report"));
            let net = full.saturating_sub(peer);
            println!(
                "| chromium --dump-dom, blank page (peer) | {:.3} s | - |",
                peer.as_secs_f64()
            );
            println!(
                "| chromium --dump-dom, 2,000-kernel report | {:.3} s | - |",
                full.as_secs_f64()
            );
            println!(
                "| render time (report minus blank) | {:.3} s | < 1 s: {} |",
                net.as_secs_f64(),
                if net < Duration::from_secs(1) {
                    "met"
                } else {
                    "MISSED"
                }
            );
        }
        None => println!("| chromium | not installed: render time not measured | - |"),
    }
}
