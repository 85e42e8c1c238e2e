//! The terminal table at the widths people run: snapshots of the compact
//! and wide tables at 80, 120 and 200 columns on real captures (an ncu CSV,
//! a `kopt profile` run folder, a trace without counters), and a check that
//! no number or word of the source is split across lines.

use std::path::PathBuf;

use kopt_analyze::{analyze, AnalyzeOptions};
use kopt_ingest::{merge_profile, read_ncu_csv};
use kopt_model::Diagnosis;
use kopt_report::{Exporter, TerminalExporter};

const WIDTHS: [u16; 3] = [80, 120, 200];

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

fn suite() -> Diagnosis {
    let rel = "labeled-suite-h100/ncu_raw_base.csv";
    analyze(
        &merge_profile(vec![(rel.into(), read_ncu_csv(&fixture(rel)).unwrap())]),
        &AnalyzeOptions::default(),
    )
}

/// The report `kopt profile` wrote into its run folder (kopt/1 JSON).
fn profile_run() -> Diagnosis {
    let text = std::fs::read_to_string(fixture("profile-module-h200/run/report.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A torch.profiler trace alone: kernel times, no counters.
fn trace_only() -> Diagnosis {
    let trace = kopt_ingest::read_kineto(&fixture("seed000-h200/moe_trace.json")).unwrap();
    analyze(
        &kopt_ingest::profile_from_trace(trace, "moe_trace.json"),
        &AnalyzeOptions::default(),
    )
}

/// The whole report (`--verbose`), whose snapshots predate the brief default.
fn render(d: &Diagnosis, width: u16, wide: bool) -> String {
    TerminalExporter {
        width: Some(width),
        wide,
        verbose: true,
    }
    .render_to_string(d)
}

/// The default report: one screen.
fn brief(d: &Diagnosis, width: u16) -> String {
    TerminalExporter {
        width: Some(width),
        wide: false,
        verbose: false,
    }
    .render_to_string(d)
}

fn cases() -> Vec<(&'static str, Diagnosis)> {
    vec![
        ("suite", suite()),
        ("profile_run", profile_run()),
        ("trace_only", trace_only()),
    ]
}

#[test]
fn compact_table_snapshots() {
    for (name, d) in cases() {
        for w in WIDTHS {
            insta::assert_snapshot!(format!("{name}_compact_{w}"), render(&d, w, false));
        }
    }
}

/// #41: the default report fits one screen at 80 columns (at most 60
/// lines) and says nothing twice; the verbose one keeps every detail.
#[test]
fn brief_report_snapshots() {
    for (name, d) in cases() {
        for w in [80, 120] {
            let text = brief(&d, w);
            insta::assert_snapshot!(format!("{name}_brief_{w}"), text);
        }
    }
}

#[test]
fn brief_report_fits_one_screen_and_says_each_line_once() {
    for (name, d) in cases() {
        let text = brief(&d, 80);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.len() <= 60, "{name}: {} lines\n{text}", lines.len());
        let widest = lines.iter().map(|l| l.chars().count()).max().unwrap_or(0);
        assert!(widest <= 80, "{name}: a line of {widest} characters");
        let mut seen = std::collections::HashSet::new();
        for l in lines
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty() && !l.starts_with('─'))
        {
            assert!(seen.insert(l), "{name}: said twice: {l:?}\n{text}");
        }
        // Verdict and findings before the kernel table.
        let table = text.find("Kernel ").expect("a kernel table");
        if let Some(at) = text.find("Key insight") {
            assert!(at < table, "{name}: the verdict comes after the table");
        }
        if let Some(at) = text.find("Findings, ranked") {
            assert!(at < table, "{name}: the findings come after the table");
        }
        assert!(
            !text.contains("evidence: "),
            "{name}: evidence in the brief report"
        );
        assert!(
            text.contains("--verbose"),
            "{name}: no pointer to the detail"
        );
        let full = render(&d, 80, false);
        assert!(
            full.lines().count() > lines.len(),
            "{name}: verbose is not longer"
        );
        if !d.recommendations.is_empty() {
            assert!(
                full.contains("evidence: "),
                "{name}: verbose lost the evidence"
            );
        }
    }
}

#[test]
fn wide_table_snapshots() {
    for (name, d) in cases() {
        for w in [120, 200] {
            insta::assert_snapshot!(format!("{name}_wide_{w}"), render(&d, w, true));
        }
    }
}

/// The table part of a report: the header (down to the rule), then for each
/// kernel its row line and the indented lines under it.
struct Table<'a> {
    header: Vec<&'a str>,
    rows: Vec<(&'a str, Vec<&'a str>)>,
}

fn table(report: &str) -> Table<'_> {
    let lines: Vec<&str> = report.lines().collect();
    let rule = lines
        .iter()
        .position(|l| l.starts_with('─'))
        .expect("the table has a rule under its header");
    let start = lines[..rule]
        .iter()
        .rposition(|l| l.is_empty())
        .expect("a blank line before the table")
        + 1;
    let mut rows: Vec<(&str, Vec<&str>)> = Vec::new();
    for line in &lines[rule + 1..] {
        if line.is_empty() {
            break;
        }
        if line.starts_with(' ') {
            rows.last_mut()
                .expect("a row before its root cause")
                .1
                .push(line);
        } else {
            rows.push((line, Vec::new()));
        }
    }
    Table {
        header: lines[start..rule].to_vec(),
        rows,
    }
}

/// Cells of a row line: separated by two or more spaces (cells hold single spaces only).
fn cells(line: &str) -> Vec<&str> {
    line.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

/// Every cell of every row against the strings it was made from: numbers,
/// classes and figures whole, kernel names whole or cut with an ellipsis,
/// the root cause and findings reassembled word for word from the lines
/// under the row; and every line within the width.
#[test]
fn no_number_or_word_is_split_across_lines() {
    for (name, d) in cases() {
        for wide in [false, true] {
            for w in WIDTHS {
                let report = render(&d, w, wide);
                let ctx = format!("{name} wide={wide} at {w} columns");
                let t = table(&report);
                assert_eq!(t.rows.len(), d.kernels.len(), "{ctx}: one row per kernel");
                if !wide {
                    for line in report.lines() {
                        let longest_word = line.split(' ').map(|s| s.chars().count()).max();
                        assert!(
                            line.chars().count() <= usize::from(w)
                                || longest_word.unwrap_or(0) + 6 > usize::from(w),
                            "{ctx}: line longer than the width: {line:?}"
                        );
                    }
                }
                // Headers: each header cell's words, read down its lines, are
                // the column names, whole.
                let header_words: Vec<&str> =
                    t.header.iter().flat_map(|l| l.split_whitespace()).collect();
                for col in ["Kernel", "Total", "% Total", "Class"] {
                    for word in col.split(' ') {
                        assert!(header_words.contains(&word), "{ctx}: header {word:?}");
                    }
                }
                for ((line, under), k) in t.rows.iter().zip(&d.kernels) {
                    let c = cells(line);
                    let mut want = vec![
                        kopt_model::format_duration_ns(k.total_ns),
                        pct(k.pct_of_total),
                    ];
                    if wide {
                        want.push(k.launches.to_string());
                        want.push(kopt_model::format_duration_ns(k.mean_ns));
                    }
                    let class = {
                        let mut s = k.bottleneck.class.as_str().to_string();
                        if let Some(u) = k.bottleneck.unit.filter(|_| {
                            matches!(
                                k.bottleneck.class,
                                kopt_model::BottleneckClass::Memory
                                    | kopt_model::BottleneckClass::Compute
                            )
                        }) {
                            s = format!("{s}:{}", u.as_str());
                        }
                        if k.bottleneck.at_roofline {
                            s.push_str(" @roofline");
                        }
                        s
                    };
                    want.push(class);
                    for v in &want {
                        assert!(
                            c.contains(&v.as_str()),
                            "{ctx}: {v:?} not a whole cell of {line:?}"
                        );
                    }
                    // Whole, or its head and end around an ellipsis (the
                    // end a counter where no cut tells two names apart).
                    let kernel = c[0];
                    let cut = kernel.split_once('…').is_some_and(|(head, tail)| {
                        !head.is_empty()
                            && k.short_name.starts_with(head)
                            && (k.short_name.ends_with(tail)
                                || tail
                                    .strip_prefix('~')
                                    .is_some_and(|n| n.parse::<usize>().is_ok()))
                    });
                    assert!(
                        kernel == k.short_name || cut,
                        "{ctx}: kernel cell {kernel:?} for {:?}",
                        k.short_name
                    );
                    let mut expected = vec![k.root_cause.clone()];
                    for f in &k.findings {
                        expected.push(format!("also: {} ({})", f.evidence, f.class));
                    }
                    if wide {
                        if let Some(line) = kopt_report::evidence_line(k) {
                            expected.push(format!("evidence: {line}"));
                        }
                    }
                    let got: Vec<&str> = under.iter().flat_map(|l| l.split_whitespace()).collect();
                    let expected = expected.join(" ");
                    let want: Vec<&str> = expected.split_whitespace().collect();
                    assert_eq!(got, want, "{ctx}: the text under {:?}", k.short_name);
                }
            }
        }
    }
}

/// The start of the evidence line the wide table prints under a kernel
/// (the largest stall), rebuilt here from the JSON fields.
fn evidence_line(k: &kopt_model::KernelVerdict) -> Option<String> {
    let e = k.evidence.as_ref()?;
    let mut parts = Vec::new();
    if let Some(s) = e.stalls.first().filter(|s| s.share_pct >= 1.0) {
        parts.push(format!(
            "stalls {} {:.0}% ({:.1} cycles per issue)",
            s.reason.metric_stem(),
            s.share_pct,
            s.cycles_per_issue
        ));
    }
    Some(parts.join("; ")).filter(|p| !p.is_empty())
}

/// The wide table shows each kernel's evidence (stall reasons first); the
/// compact one leaves it to the JSON.
#[test]
fn wide_table_shows_the_counters_evidence() {
    let d = suite();
    let with = d.kernels.iter().filter(|k| k.evidence.is_some()).count();
    assert!(with > 0, "the suite's kernels carry evidence");
    let wide = render(&d, 200, true);
    let compact = render(&d, 200, false);
    assert_eq!(
        wide.matches("    evidence: stalls ").count(),
        with,
        "{wide}"
    );
    assert!(!compact.contains("evidence: stalls "));
    for k in &d.kernels {
        if let Some(first) = evidence_line(k) {
            assert!(wide.contains(&first), "{first:?} not in\n{wide}");
        }
    }
}

/// Two different kernels never read the same, at any width: at 80
/// columns the labeled suite's two transposes once both read
/// `kopt_transpose_s…`.
#[test]
fn kernel_names_stay_distinct_at_every_width() {
    for (name, d) in cases() {
        for wide in [false, true] {
            for w in (40..=200).step_by(4) {
                let report = render(&d, w, wide);
                let t = table(&report);
                let shown: Vec<&str> = t.rows.iter().map(|(line, _)| cells(line)[0]).collect();
                for (i, a) in shown.iter().enumerate() {
                    for (j, b) in shown.iter().enumerate().skip(i + 1) {
                        assert!(
                            a != b || d.kernels[i].short_name == d.kernels[j].short_name,
                            "{name} wide={wide} at {w} columns: {:?} and {:?} both read {a:?}",
                            d.kernels[i].short_name,
                            d.kernels[j].short_name
                        );
                    }
                }
            }
        }
    }
    let at80 = render(&suite(), 80, false);
    let transposes: Vec<&str> = table(&at80)
        .rows
        .iter()
        .map(|(line, _)| cells(line)[0])
        .filter(|c| c.starts_with("kopt_tran"))
        .collect();
    assert_eq!(transposes.len(), 2, "{at80}");
    assert!(
        transposes.iter().any(|c| c.ends_with("naive")),
        "{transposes:?}"
    );
    assert!(
        transposes.iter().any(|c| c.ends_with("padded")),
        "{transposes:?}"
    );
}

fn pct(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.1}")
    } else if v >= 0.01 {
        format!("{v:.2}")
    } else if v == 0.0 {
        "0".into()
    } else {
        format!("{v:.1e}")
    }
}

/// The same names in every format: the terminal's wide header, the Markdown
/// table's and the HTML table's.
#[test]
fn column_names_agree_across_formats() {
    let d = suite();
    let md = kopt_report::MarkdownExporter.render_to_string(&d);
    let html = kopt_report::HtmlExporter.render_to_string(&d);
    let md_header = md
        .lines()
        .find(|l| l.starts_with("| Kernel |"))
        .expect("the Markdown kernel table");
    let md_cols: Vec<&str> = md_header
        .trim_matches('|')
        .split('|')
        .map(str::trim)
        .collect();
    let thead = html
        .split("<table class=\"kernels\">")
        .nth(1)
        .and_then(|t| t.split("</thead>").next())
        .expect("the HTML kernel table");
    let html_cols: Vec<&str> = thead
        .split("<th>")
        .skip(1)
        .map(|th| th[..th.find("</th>").unwrap()].trim())
        .collect();
    assert_eq!(md_cols, html_cols);
    let term = render(&d, 250, true);
    let header = table(&term).header.join(" ");
    for c in &md_cols {
        if *c == "Root cause" {
            continue; // written under each row in the terminal
        }
        assert!(header.contains(c), "terminal header lacks {c:?}: {header}");
    }
    assert!(!md.contains("Latency |"), "one name for the time column");
}

/// The cause most rows share is said once above them; a row with a cause
/// of its own keeps it. The rows are a real report's (GPT-2 on an H200,
/// trace only) with their causes set by the test: three alike, one apart.
#[test]
fn a_cause_most_rows_share_is_said_once() {
    let rel = "ops-gpt2-h200/gpt2.trace.jsonl.gz";
    let t = kopt_ingest::read_kopt_trace(&fixture(rel)).unwrap();
    let mut d = analyze(
        &kopt_ingest::profile_from_timeline(t.timeline, rel, "kopt trace"),
        &AnalyzeOptions::default(),
    );
    d.kernels.truncate(4);
    let shared = "A cause three rows share, long enough to wrap at eighty columns of a terminal";
    for k in &mut d.kernels[..3] {
        k.root_cause = shared.into();
    }
    d.kernels[3].root_cause = "A cause of its own".into();
    let text = render(&d, 80, false);
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(flat.matches(shared).count(), 1, "{text}");
    assert!(flat.contains(&format!("Unless its row says otherwise: {shared}")));
    assert!(text.contains("    A cause of its own\n"), "{text}");
    // All four alike: "Every kernel".
    d.kernels[3].root_cause = shared.into();
    let text = render(&d, 80, false);
    assert!(
        text.contains("Every kernel: A cause three rows share"),
        "{text}"
    );
    // Two rows alike are not worth a line of their own.
    d.kernels.truncate(2);
    let text = render(&d, 80, false);
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(flat.matches(shared).count(), 2, "{text}");
}

/// Rows whose cause is a label and the shared sentence print the label
/// alone; a row with more after the shared sentence keeps the rest; the
/// shared sentence is told apart from its label-prefixed copies whatever
/// the case of its first letter (GPT-2's trace-only report, real rows).
#[test]
fn a_shared_sentence_leaves_labels_and_the_rest() {
    let rel = "ops-gpt2-h200/gpt2.trace.jsonl.gz";
    let t = kopt_ingest::read_kopt_trace(&fixture(rel)).unwrap();
    let mut d = analyze(
        &kopt_ingest::profile_from_timeline(t.timeline, rel, "kopt trace"),
        &AnalyzeOptions::default(),
    );
    d.kernels.truncate(5);
    let shared = "No counters (timeline only), only its time is known";
    d.kernels[0].root_cause = shared.into();
    d.kernels[1].root_cause =
        "cuBLAS GEMM kernel (library code): no counters (timeline only), only its time is known"
            .into();
    d.kernels[2].root_cause = "PyTorch (ATen) elementwise kernel (library code): no counters (timeline only), only its time is known. Part of a chain: see the fusion finding.".into();
    d.kernels[3].root_cause = shared.into();
    d.kernels[4].root_cause = "Small grid: 8 blocks fill 0.8% of one wave".into();
    let text = render(&d, 200, false);
    let table = text.split("Kernel time by framework op").next().unwrap();
    assert_eq!(table.matches("only its time is known").count(), 1, "{text}");
    assert!(text.contains("Unless its row says otherwise: No counters (timeline only)"));
    assert!(
        text.contains("\n    cuBLAS GEMM kernel (library code)\n"),
        "{text}"
    );
    assert!(text.contains("\n    PyTorch (ATen) elementwise kernel (library code). Part of a chain: see the fusion finding.\n"), "{text}");
    assert!(
        text.contains("\n    Small grid: 8 blocks fill 0.8% of one wave\n"),
        "{text}"
    );
}
