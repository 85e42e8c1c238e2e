//! The HTML page: self-contained, escaped everywhere, one roofline point per hot kernel.

use std::path::PathBuf;

use kopt_analyze::{analyze, AnalyzeOptions};
use kopt_ingest::{merge_profile, read_ncu_csv};
use kopt_model::Diagnosis;
use kopt_report::{html, roofline, Format};

fn diagnose(rel: &str) -> Diagnosis {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel);
    analyze(
        &merge_profile(vec![(rel.into(), read_ncu_csv(&path).unwrap())]),
        &AnalyzeOptions::default(),
    )
}

#[test]
fn hostile_kernel_names_never_become_markup() {
    let mut d = diagnose("labeled-suite-h100/ncu_raw_base.csv");
    let evil = "<script>alert(1)</script>";
    for k in d.kernels.iter_mut().take(3) {
        k.name = format!("void {evil}<float>(int &, \"q\")");
        k.short_name = evil.into();
        k.root_cause = format!("{evil} & more");
    }
    if let Some(p) = d.primary.as_mut() {
        p.component_short = evil.into();
        p.insight = evil.into();
    }
    let page = Format::Html.exporter(None).render_to_string(&d);
    assert!(
        !page.to_ascii_lowercase().contains("<script"),
        "a script element leaked"
    );
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;/script&gt;") || page.contains("&#60;script&#62;")
    );
}

/// #39: `-f html` to stdout carried a kernel name's raw escape sequences
/// (clear screen, set title) to the terminal it was printed on.
#[test]
fn terminal_escape_sequences_in_names_never_reach_the_page() {
    let mut d = diagnose("labeled-suite-h100/ncu_raw_base.csv");
    let evil = "k\u{1b}[2J\u{1b}]0;owned\u{7}\u{9b}31m";
    for k in d.kernels.iter_mut().take(3) {
        k.name = format!("void {evil}(float*)");
        k.short_name = evil.into();
        k.root_cause = evil.into();
    }
    d.device.name = evil.into();
    d.notes.push(evil.into());
    let page = Format::Html.exporter(None).render_to_string(&d);
    let raw: Vec<char> = page
        .chars()
        .filter(|c| c.is_control() && *c != '\n' && *c != '\t')
        .collect();
    assert!(
        raw.is_empty(),
        "raw control characters in the page: {raw:?}"
    );
    assert!(
        page.contains("\\u{1b}[2J"),
        "the escape is shown, not dropped"
    );
}

#[test]
fn page_is_self_contained() {
    let page = Format::Html
        .exporter(None)
        .render_to_string(&diagnose("h100-probe/ncu_raw.csv"));
    let lower = page.to_ascii_lowercase();
    for forbidden in [
        "<script",
        "<link",
        "src=\"http",
        "href=\"http",
        "@import",
        "url(http",
    ] {
        assert!(!lower.contains(forbidden), "{forbidden} found");
    }
    assert!(lower.contains("prefers-color-scheme: dark"));
    assert!(lower.contains("@media print"));
    assert!(page.starts_with("<!DOCTYPE html>"));
}

#[test]
fn one_roofline_point_per_hot_kernel() {
    let d = diagnose("labeled-suite-h100/ncu_raw_base.csv");
    let (page, points) = html::page(&d);
    let with_counters = d
        .kernels
        .iter()
        .filter(|k| {
            kopt_analyze::roofline::has_counters(k)
                && kopt_analyze::roofline::has_intensity(k, &d.device.peaks)
        })
        .count();
    assert_eq!(
        points,
        with_counters.min(kopt_analyze::roofline::PLOTTED_KERNELS_MAX)
    );
    assert_eq!(page.matches("<circle class=\"pt ").count(), points);
    // Ceilings of the device are drawn.
    assert!(page.contains("DRAM 3.35 TB/s"));
    assert!(page.contains("bf16 tensor 989.0 TFLOP/s"));
}

#[test]
fn tensor_gemm_sits_near_the_tensor_roof_and_copies_at_the_bandwidth_roof() {
    let d = diagnose("labeled-suite-h100/ncu_raw_base.csv");
    let gemm = d
        .kernels
        .iter()
        .find(|k| k.name.starts_with("nvjet"))
        .unwrap();
    let p = roofline::point(gemm, &d).unwrap();
    assert!(p.rate > 0.9e15 && p.rate < 1.0e15, "{}", p.rate);
    let copy = d
        .kernels
        .iter()
        .find(|k| k.name == "kopt_copy_coalesced")
        .unwrap();
    assert!(
        roofline::point(copy, &d).is_none(),
        "a copy has no FLOPs: no intensity, no point"
    );
    let chart = roofline::chart(&d);
    assert!(chart
        .left_out
        .iter()
        .any(|(n, _)| n == "kopt_copy_coalesced"));
    let (page, _) = html::page(&d);
    assert!(page.contains("are not on the chart"), "the copy is named");
}

#[test]
fn long_tails_are_summed_not_dropped() {
    let mut d = diagnose("labeled-suite-h100/ncu_raw_base.csv");
    let template = d.kernels[0].clone();
    while d.kernels.len() < html::TABLE_ROWS_SHOWN + 50 {
        let mut k = template.clone();
        k.name = format!("tail_kernel_{}", d.kernels.len());
        k.pct_of_total = 0.01;
        d.kernels.push(k);
    }
    let total = d.kernels.len();
    let (page, _) = html::page(&d);
    assert_eq!(
        page.matches("<tr><td class=\"name\"").count(),
        html::TABLE_ROWS_SHOWN
    );
    let hidden = total - html::TABLE_ROWS_SHOWN;
    assert!(
        page.contains(&format!("{hidden} more kernels")),
        "the tail is named"
    );
}

#[test]
fn trace_reports_draw_the_timeline_strip() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/seed000-h200/moe_trace.json");
    let trace = kopt_ingest::read_kineto(&path).unwrap();
    let d = analyze(
        &kopt_ingest::profile_from_trace(trace, "moe_trace.json"),
        &AnalyzeOptions::default(),
    );
    let (page, _) = html::page(&d);
    assert!(page.contains("<svg class=\"strip\""));
    assert!(page.contains("launch bound: shaded stretches"));
    // One host lane and one GPU lane (a single stream), in the steady
    // state's strip and again in the whole trace's, folded under it.
    assert_eq!(page.matches("class=\"lane-label\"").count(), 4);
    let (steady, whole) = page.split_once("<details class=\"strip-whole\">").unwrap();
    assert_eq!(steady.matches("class=\"lane-label\"").count(), 2);
    assert_eq!(whole.matches("class=\"lane-label\"").count(), 2);
    assert!(page.matches("<rect class=\"idle\"").count() > 10);
    // No kernel has counters: no chart of points piled in one corner, a note instead.
    assert!(!page.contains("<svg class=\"roofline\""));
    assert!(page.contains("No roofline: no kernel has counters"));
}

#[test]
fn hottest_points_are_numbered_and_listed() {
    let d = diagnose("labeled-suite-h100/ncu_raw_base.csv");
    let chart = roofline::chart(&d);
    assert_eq!(chart.labels.len(), chart.points.min(roofline::LABELS_MAX));
    assert!(chart.labels.iter().all(|l| l.placed), "{:?}", chart.labels);
    assert_eq!(
        chart.svg.matches("class=\"pt-label\"").count(),
        chart.labels.len()
    );
    assert_eq!(chart.labels[0].name, "kopt_gridstride_8blocks");
    let (page, _) = html::page(&d);
    assert!(page.contains("<li value=\"1\"><span class=\"dot b-small_grid\"></span><span class=\"name\">kopt_gridstride_8blocks</span> 35.5%</li>"));
    // One tick style: SI prefixes, no exponent notation.
    assert!(!chart.svg.contains(">1e"), "exponent ticks");
    assert!(chart.svg.contains(" G<") && chart.svg.contains(" T<"));
}

#[test]
fn kernel_rows_carry_the_counters_evidence() {
    let d = diagnose("labeled-suite-h100/ncu_raw_base.csv");
    let (page, _) = html::page(&d);
    let with = d.kernels.iter().filter(|k| k.evidence.is_some()).count();
    assert!(with > 0);
    assert_eq!(
        page.matches("<span class=\"note evidence\">evidence: stalls ")
            .count(),
        with
    );
    // The transpose's bank conflicts show as MIO throttling.
    assert!(page.contains("evidence: stalls mio_throttle 51%"), "{page}");
}

/// #39: a stored report (or a flag) with an extreme peak or rate once made
/// the axis top infinite and the tick loop never end.
#[test]
fn extreme_peaks_and_rates_render_a_bounded_page() {
    for huge in [1e296, 1e308, f64::MAX, f64::INFINITY, f64::NAN] {
        let mut d = diagnose("labeled-suite-h100/ncu_raw_base.csv");
        d.device.peaks.fp32_flops = Some(huge);
        d.device.peaks.tensor_bf16_flops = Some(huge);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(html::page(&d).0.len());
        });
        let len = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("peak {huge}: the page did not finish in 10 s"));
        assert!(len < 4_000_000, "peak {huge}: a {len}-byte page");
    }
}
