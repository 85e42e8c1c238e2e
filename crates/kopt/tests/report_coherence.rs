//! One message per fact (#41), on every bundled capture kopt accepts: a
//! finding whose figure is withheld says so once, with why, and claims no
//! figure elsewhere; no finding names a kernel kind (GEMM, convolution,
//! cuDNN's layout conversions) that the input does not hold; the default
//! terminal report says no line twice.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// Run folders (a `kopt profile` run: `run.json`) and single profiler files.
fn inputs(dir: &Path, out: &mut Vec<PathBuf>) {
    if dir.join("run.json").exists() {
        out.push(dir.to_path_buf());
        return;
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            inputs(&p, out);
            continue;
        }
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if [".csv", ".json", ".jsonl", ".gz"]
            .iter()
            .any(|ext| name.ends_with(ext))
        {
            out.push(p);
        }
    }
}

fn kopt(args: &[&str]) -> Option<String> {
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(args)
        .env("COLUMNS", "80")
        .output()
        .unwrap();
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Words that name a kernel kind, and the library family that must be in
/// the input for a finding to use them.
const KINDS: [(&str, &str); 3] = [
    ("GEMM", "gemm"),
    ("convolution", "convolution"),
    ("cuDNN's layout conversions", ""),
];

/// `text` without `aten::name` tokens.
fn without_op_names(text: &str) -> String {
    text.split(' ')
        .filter(|w| !w.contains("::"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn problems_of(input: &str, d: &serde_json::Value) -> Vec<String> {
    let mut problems = Vec::new();
    let kernels = d["kernels"].as_array().cloned().unwrap_or_default();
    let families: HashSet<&str> = kernels
        .iter()
        .filter_map(|k| k["library"]["family"].as_str())
        .collect();
    let names: Vec<String> = kernels
        .iter()
        .filter_map(|k| k["name"].as_str().map(str::to_lowercase))
        .collect();
    let ops: Vec<String> = d["ops"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o["op"].as_str().map(str::to_lowercase))
        .collect();
    let conversions = names
        .iter()
        .any(|n| n.contains("nchwtonhwc") || n.contains("nhwctonchw"));
    for r in d["recommendations"].as_array().into_iter().flatten() {
        let id = r["id"].as_str().unwrap_or("?");
        let evidence = r["evidence"].as_str().unwrap_or("");
        let action = r["action"].as_str().unwrap_or("");
        // Evidence and action; op names (`aten::cudnn_convolution`) are
        // the input's own words.
        let text = without_op_names(&format!("{evidence} {action}"));
        let withheld = evidence.matches("No figure is given").count();
        if withheld > 1 {
            problems.push(format!("{input}: {id} says twice that no figure is given"));
        }
        if withheld == 1 {
            if !r["gain"].is_null() || !r["predicted_speedup"].is_null() {
                problems.push(format!("{input}: {id} withholds its figure and gives one"));
            }
            if text.contains("Predicted") {
                problems.push(format!("{input}: {id} withholds its figure and predicts"));
            }
        }
        for (word, family) in KINDS {
            let present = if family.is_empty() {
                conversions
            } else {
                families.contains(family) || ops.iter().any(|o| o.contains(&family[..4]))
            };
            if text.contains(word) && !present {
                problems.push(format!(
                    "{input}: {id} names {word:?}, which the input does not hold"
                ));
            }
        }
    }
    problems
}

#[test]
fn no_report_contradicts_itself_or_names_an_absent_kernel_kind() {
    let mut files = Vec::new();
    inputs(&fixtures(), &mut files);
    let mut problems = Vec::new();
    let mut checked = 0;
    for f in &files {
        let input = f.to_str().unwrap();
        // A stored report is rendered as an earlier kopt wrote it.
        if input.ends_with("report.json") {
            continue;
        }
        let Some(json) = kopt(&["analyze", "-f", "json", input]) else {
            continue; // not an input kopt accepts (a sidecar file)
        };
        let d: serde_json::Value = serde_json::from_str(&json).unwrap();
        problems.extend(problems_of(input, &d));
        // Wide enough that no line wraps: a repeated line is a repeated
        // fact, not two wrapped tails that read alike.
        let brief = kopt(&["analyze", "--width", "1000", input]).expect("the terminal report");
        let mut seen = HashSet::new();
        for line in brief
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('─'))
        {
            if !seen.insert(line) {
                problems.push(format!("{input}: the default report says twice {line:?}"));
            }
        }
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} fixtures accepted");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
