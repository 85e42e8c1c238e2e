//! `kopt optimize --script` on the advice suite's models, on an H100
//! (fixtures/optimize-h100, made by scripts/checks/optimize/suite.sh):
//! each report reads back, no candidate or stack that failed its check or
//! measured slower is kept, each run took under 5 minutes, and the kept
//! candidates hold measure.py's best single fix where the run found it.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use kopt_model::optimize::OptimizeReport;
use kopt_model::VerdictKind;
use kopt_report::{Format, Layout, Render};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/optimize-h100")
}

fn reports() -> BTreeMap<String, OptimizeReport> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir()).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(model) = name.strip_suffix(".optimize.json.gz") else {
            continue;
        };
        let mut text = String::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        out.insert(model.to_string(), serde_json::from_str(&text).unwrap());
    }
    out
}

/// measure.py's best single fix per model, from both calls' lines.
fn best_measured_fix(files: &[&Path]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for f in files {
        for line in std::fs::read_to_string(f).unwrap().lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            if let Some(fix) = v["best"]["fix"].as_str() {
                out.insert(v["model"].as_str().unwrap().to_string(), fix.to_string());
            }
        }
    }
    out
}

fn kept(r: &OptimizeReport) -> impl Iterator<Item = &kopt_model::optimize::CandidateResult> {
    r.candidates.iter().filter(|c| {
        c.verdict
            .as_ref()
            .is_some_and(|v| v.kind == VerdictKind::Keep)
    })
}

#[test]
fn nothing_kept_fails_its_check_or_measures_slower() {
    let all = reports();
    assert_eq!(all.len(), 8, "{:?}", all.keys());
    for (model, r) in &all {
        assert!(r.allow_precision, "{model}");
        for c in kept(r) {
            assert_eq!(
                c.correctness.as_ref().map(|k| k.passed),
                Some(true),
                "{model} {}",
                c.name
            );
            assert!(c.measured_speedup.unwrap() > 1.0, "{model} {}", c.name);
        }
        // The best is the fastest kept one.
        let fastest = kept(r)
            .map(|c| c.measured_speedup.unwrap())
            .fold(0.0, f64::max);
        match &r.best {
            Some(b) => {
                let best = r.candidates.iter().find(|c| &c.name == b).unwrap();
                assert_eq!(best.measured_speedup.unwrap(), fastest, "{model}");
            }
            None => assert_eq!(fastest, 0.0, "{model}"),
        }
        for format in [Format::Terminal, Format::Markdown, Format::Json] {
            assert!(!r.render(format, Layout::default()).is_empty());
        }
    }
    // The stack whose outputs came back NaN (graph capture of the
    // channels_last ResNet-50 at batch 1) was caught by the check.
    let r = &all["resnet50_b1_fp32"];
    let stack = r
        .candidates
        .iter()
        .find(|c| c.name == "graph+channels_last")
        .unwrap();
    assert_eq!(stack.parts, ["graph", "channels_last"]);
    assert_eq!(stack.verdict.as_ref().unwrap().kind, VerdictKind::Revert);
    assert_eq!(stack.correctness.as_ref().map(|k| k.passed), Some(false));
}

#[test]
fn the_best_measured_single_fix_is_kept_in_7_of_8_runs_under_5_minutes() {
    let all = reports();
    let best = best_measured_fix(&[
        &dir().join("measured.jsonl"),
        &dir().join("measured-call1.jsonl"),
    ]);
    let mut found = Vec::new();
    let mut missed = Vec::new();
    for (model, r) in &all {
        let fix = &best[model];
        if kept(r).any(|c| c.name.split('+').any(|p| p == fix)) {
            found.push(model.as_str());
        } else {
            missed.push(model.as_str());
        }
    }
    assert_eq!(found.len(), 7, "found {found:?}, missed {missed:?}");
    // The miss: graph capture of bf16 BERT-base at batch 1 was checked with
    // compare's bf16 default then (1e-2) and differed by 1.1e-2.
    assert_eq!(missed, ["bert_b1_s64_bf16"]);
    let graph = all["bert_b1_s64_bf16"]
        .candidates
        .iter()
        .find(|c| c.name == "graph")
        .unwrap();
    let t = &graph.correctness.as_ref().unwrap().tensors[0];
    assert!(t.rel_l2.unwrap() > 1e-2 && t.rel_l2.unwrap() < 1.2e-2);
    // Every run that finished took under 5 minutes (wall.txt: suite.sh's
    // "exit N seconds S" per model; mobilenetv3 was cut by the call's budget).
    let wall = std::fs::read_to_string(dir().join("wall.txt")).unwrap();
    for line in wall.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let (model, exit, seconds) = (w[0], w[2], w[4].parse::<u32>().unwrap());
        assert!(seconds < 300, "{line}");
        assert_eq!(exit == "0", all.contains_key(model), "{line}");
    }
}
