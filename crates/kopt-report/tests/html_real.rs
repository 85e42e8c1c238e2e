//! The HTML page's charts on real captures, read from the SVG's
//! coordinates: no roofline point piled on the axis (kernels without an
//! intensity are named instead), no two labels on top of each other, and a
//! timeline strip that spends its width on the steady state, with what it
//! leaves out marked.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use kopt_analyze::{analyze, AnalyzeOptions};
use kopt_model::Diagnosis;
use kopt_report::html;

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

fn run_folder(path: &Path) -> Diagnosis {
    let p = kopt_ingest::read_run_folder_filtered(path).unwrap();
    analyze(&p, &AnalyzeOptions::default())
}

/// Every capture of the real-model advice suite (run folders of `kopt
/// profile` / `kopt trace` on an H100).
fn advice_runs() -> &'static [(String, Diagnosis)] {
    static RUNS: std::sync::OnceLock<Vec<(String, Diagnosis)>> = std::sync::OnceLock::new();
    RUNS.get_or_init(read_advice_runs)
}

fn read_advice_runs() -> Vec<(String, Diagnosis)> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(fixture("advice-h100"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 10, "{dirs:?}");
    dirs.iter()
        .map(|d| {
            (
                d.file_name().unwrap().to_string_lossy().into_owned(),
                run_folder(d),
            )
        })
        .collect()
}

/// The attributes of each element `<NAME class="CLASS..." ...>` in `svg`
/// whose class starts with `class`, with the text up to the next `<`.
fn elements(svg: &str, name: &str, class: &str) -> Vec<(HashMap<String, String>, String)> {
    let open = format!("<{name} class=\"{class}");
    let mut out = Vec::new();
    let mut rest = svg;
    while let Some(at) = rest.find(&open) {
        let tag_end = rest[at..].find('>').unwrap() + at;
        let tag = &rest[at + name.len() + 1..tag_end];
        let mut attrs = HashMap::new();
        for part in tag.split("\" ") {
            if let Some((k, v)) = part.split_once("=\"") {
                attrs.insert(k.trim().to_string(), v.trim_end_matches('"').to_string());
            }
        }
        let text_end = rest[tag_end..]
            .find('<')
            .map_or(rest.len(), |i| i + tag_end);
        out.push((attrs, rest[tag_end + 1..text_end].to_string()));
        rest = &rest[tag_end..];
    }
    out
}

fn num(a: &HashMap<String, String>, k: &str) -> f64 {
    a[k].parse().unwrap()
}

/// A text's box as the chart measures it (11 px font, 0.62 em a glyph).
fn text_box(a: &HashMap<String, String>, text: &str) -> (f64, f64, f64, f64) {
    let (x, y) = (num(a, "x"), num(a, "y"));
    let w = text.chars().count() as f64 * 11.0 * 0.62;
    let x0 = match a.get("text-anchor").map(String::as_str) {
        Some("end") => x - w,
        Some("middle") => x - w / 2.0,
        _ => x,
    };
    (x0, y - 11.0, x0 + w, y + 3.0)
}

fn overlap(a: (f64, f64, f64, f64), b: (f64, f64, f64, f64)) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

/// The roofline's SVG in a page.
fn roofline_svg(page: &str) -> &str {
    let at = page.find("<svg class=\"roofline\"").unwrap_or(page.len());
    let end = page[at..].find("</svg>").map_or(page.len(), |e| at + e);
    &page[at..end]
}

#[test]
fn amd_kernels_without_flops_are_named_not_piled_on_the_axis() {
    // rocprof-compute's counters give bytes but no FLOPs for the copy.
    let p = kopt_ingest::read_rocprof_compute_dir(&fixture("amd/omniperf-vcopy-mi300x")).unwrap();
    let d = analyze(&p, &AnalyzeOptions::default());
    let (page, points) = html::page(&d);
    assert_eq!(points, 0);
    assert!(!page.contains("<circle class=\"pt"), "a point was drawn");
    assert!(
        page.contains("are not on the chart"),
        "the copy is not named"
    );
    assert!(page.contains("vecCopy"), "the copy is not named");
}

#[test]
fn real_models_roofline_points_sit_inside_and_labels_never_overlap() {
    for (name, d) in advice_runs() {
        let (page, points) = html::page(d);
        let svg = roofline_svg(&page);
        let circles = elements(svg, "circle", "pt ");
        assert_eq!(circles.len(), points, "{name}");
        // Every kernel with counters is a point or named under the chart.
        let with_counters = d
            .kernels
            .iter()
            .filter(|k| kopt_analyze::roofline::has_counters(k))
            .count();
        let left_out = kopt_analyze::roofline::unplotted_kernels(d).len();
        assert_eq!(
            points + left_out,
            with_counters.min(100 + left_out),
            "{name}"
        );
        if left_out > 0 {
            assert!(page.contains("are not on the chart"), "{name}");
        }
        // No point on the y axis (x = 70) unless its intensity is below the
        // chart's range, and then it is drawn hollow.
        for (a, _) in &circles {
            let cx = num(a, "cx");
            assert!((70.0..=740.0).contains(&cx), "{name}: {a:?}");
            if cx <= 70.5 {
                assert!(a["class"].contains("clamped"), "{name}: {a:?}");
            }
        }
        // Numbers and ceiling labels: no two boxes overlap.
        let mut boxes: Vec<(String, (f64, f64, f64, f64))> = Vec::new();
        for class in ["pt-label", "roof-label"] {
            for (a, text) in elements(svg, "text", class) {
                boxes.push((text.clone(), text_box(&a, &text)));
            }
        }
        if points > 0 {
            assert!(
                boxes.iter().any(|(t, _)| t == "1"),
                "{name}: no numbered point"
            );
        }
        for (i, (ta, a)) in boxes.iter().enumerate() {
            for (tb, b) in &boxes[i + 1..] {
                assert!(
                    !overlap(*a, *b),
                    "{name}: {ta:?} {a:?} overlaps {tb:?} {b:?}"
                );
            }
        }
    }
}

#[test]
fn the_strip_spends_its_width_on_the_steady_state() {
    let mut checked = 0;
    for (name, d) in advice_runs() {
        let (Some(whole), Some(t)) = (&d.strip, &d.timeline) else {
            continue;
        };
        let Some(st) = &t.steady_state else {
            continue;
        };
        let span = (st.end_ns - st.start_ns) as f64;
        let Some(steady) = &d.steady_strip else {
            assert!(
                span >= 0.9 * whole.window_ns as f64,
                "{name}: steady state {span} ns of {} ns and no strip of its own",
                whole.window_ns
            );
            continue;
        };
        checked += 1;
        let (page, _) = html::page(d);
        let (first, folded) = page
            .split_once("<details class=\"strip-whole\">")
            .unwrap_or_else(|| panic!("{name}: the whole trace is not folded under"));
        let first = &first[first.find("<svg class=\"strip\"").unwrap()..];
        // What it leaves out is marked, with its duration.
        let cuts = elements(first, "rect", "cut");
        assert!(!cuts.is_empty(), "{name}: no mark of the time left out");
        let before = kopt_model::format_duration_ns(steady.cut_before_ns as f64);
        assert!(
            steady.cut_before_ns == 0 || first.contains(&before),
            "{name}: {before}"
        );
        // The GPU's spans cover the plot's width, not a sliver of it.
        let spans = elements(first, "rect", "span gpu");
        assert!(!spans.is_empty(), "{name}");
        let lo = spans
            .iter()
            .map(|(a, _)| num(a, "x"))
            .fold(f64::MAX, f64::min);
        let hi = spans
            .iter()
            .map(|(a, _)| num(a, "x") + num(a, "width"))
            .fold(0.0, f64::max);
        // The strip's plot: 1100 wide, 170 of lane labels, 10 of margin,
        // at most two 64-wide blocks for the time left out.
        let plot = 1100.0 - 10.0 - 170.0 - 2.0 * 64.0;
        assert!(hi - lo > 0.8 * plot, "{name}: spans {lo}..{hi}");
        // In the whole trace's strip the same window took this share only.
        assert!(span < 0.9 * whole.window_ns as f64, "{name}");
        assert!(folded.contains("<svg class=\"strip\""), "{name}");
    }
    assert!(checked >= 1, "no capture with a long start-up");
}
