//! Snapshots of the three formats on the real captures. A change to any
//! figure, word or layout shows up here for review (`cargo insta review`).

use std::path::PathBuf;

use kopt_analyze::{analyze, AnalyzeOptions};
use kopt_ingest::{merge_profile, read_ncu_csv};
use kopt_model::Diagnosis;
use kopt_report::{Format, Layout};

fn diagnose(files: &[&str]) -> Diagnosis {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let parsed = files
        .iter()
        .map(|rel| (rel.to_string(), read_ncu_csv(&root.join(rel)).unwrap()))
        .collect();
    analyze(&merge_profile(parsed), &AnalyzeOptions::default())
}

/// The terminal's whole report (`--verbose`), as the snapshots have it.
fn render(d: &Diagnosis, format: Format) -> String {
    format
        .exporter_for(Layout {
            width: Some(180),
            verbose: true,
            ..Layout::default()
        })
        .render_to_string(d)
}

macro_rules! snapshot_all_formats {
    ($name:ident, $files:expr) => {
        #[test]
        fn $name() {
            let d = diagnose(&$files);
            insta::assert_snapshot!(
                concat!(stringify!($name), "_term"),
                render(&d, Format::Terminal)
            );
            insta::assert_snapshot!(
                concat!(stringify!($name), "_md"),
                render(&d, Format::Markdown)
            );
            insta::assert_snapshot!(
                concat!(stringify!($name), "_json"),
                render(&d, Format::Json)
            );
        }
    };
}

snapshot_all_formats!(suite_raw, ["labeled-suite-h100/ncu_raw_base.csv"]);
snapshot_all_formats!(suite_details, ["labeled-suite-h100/ncu_details.csv"]);
snapshot_all_formats!(
    probe_raw_with_rules,
    ["h100-probe/ncu_raw.csv", "h100-probe/ncu_details.csv"]
);

#[test]
fn json_is_valid_and_versioned() {
    let d = diagnose(&["labeled-suite-h100/ncu_raw_base.csv"]);
    let v: serde_json::Value = serde_json::from_str(&render(&d, Format::Json)).unwrap();
    assert_eq!(v["schema"], "kopt/1");
    assert_eq!(v["primary"]["type"], "small_grid");
    assert!(v["kernels"].as_array().unwrap().len() >= 9);
    assert!(
        v["recommendations"][0]["gain"]["workload_pct"]
            .as_f64()
            .unwrap()
            > 30.0
    );
}

#[test]
fn markdown_escapes_html_in_kernel_names() {
    let mut d = diagnose(&["h100-probe/ncu_raw.csv"]);
    d.kernels[0].short_name = "<script>alert(1)</script>|x".into();
    let md = render(&d, Format::Markdown);
    assert!(!md.contains("<script>"));
    assert!(md.contains("&lt;script&gt;alert(1)&lt;/script&gt;\\|x"));
}
