//! The real-model advice suite on an H100 (fixtures/advice-h100, made by
//! scripts/checks/advice/run.sh): every capture is analysed again and its
//! #1 finding compared with what measure.py measured for the same model:
//! is it the best measured fix (or within 10% of its gain), is its
//! predicted step speed-up within 1.5x of the measured one, and graph
//! capture (or torch.compile) is never #1 where it measured under 1.1x. suite.json pins each
//! capture's #1 and the counts seen per entry point; docs/benchmarks.md's
//! table is this test's rows.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/advice-h100")
        .join(rel)
}

fn json(rel: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(fixture(rel)).unwrap()).unwrap()
}

fn report(capture: &str) -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["analyze", "-f", "json"])
        .arg(fixture(capture))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The measured fix a finding's action is, as measure.py names it. Batch
/// norm folding's action is torch.compile with freezing (folding alone in
/// eager mode gains nothing, it says), so compile measures it where
/// measured, as it does the eager elementwise chains' fusion and the
/// whole-model torch.compile finding.
fn fix_of(id: &str, measured: &serde_json::Map<String, serde_json::Value>) -> Option<String> {
    let fix = match id {
        "enable_tf32" => "tf32",
        "use_fused_attention" => "sdpa",
        "use_channels_last" => "channels_last",
        "capture_cuda_graph" | "fuse_or_graph_launches" => "graph",
        "fold_batch_norm" if measured.contains_key("compile") => "compile",
        "fold_batch_norm" => "bn_fold",
        "fuse_eager_elementwise" | "use_torch_compile" => "compile",
        "pad_gemm_dims" => "pad",
        _ => return None,
    };
    measured.contains_key(fix).then(|| fix.to_string())
}

/// One capture against its measurements.
struct Row {
    capture: String,
    model: String,
    entry: String,
    first: String,
    /// (estimate, low, high) of the #1 finding's step speed-up.
    predicted: Option<(f64, f64, f64)>,
    /// What #1's fix measured, if measured.
    measured: Option<f64>,
    best_fix: String,
    best: f64,
}

impl Row {
    fn is_best(&self) -> bool {
        self.measured
            .is_some_and(|m| m - 1.0 >= 0.9 * (self.best - 1.0))
    }

    fn within(&self) -> bool {
        match (self.predicted, self.measured) {
            (Some((p, _, _)), Some(m)) => (p / m).max(m / p) <= 1.5,
            _ => false,
        }
    }

    /// The row of docs/benchmarks.md's table.
    fn markdown(&self) -> String {
        let predicted = match self.predicted {
            Some((e, l, h)) => format!("{e:.2}x ({l:.2}-{h:.2})"),
            None => "no figure".into(),
        };
        let measured = self
            .measured
            .map_or("not measured".to_string(), |m| format!("{m:.2}x"));
        format!(
            "| {} | {} | {} | {predicted} | {measured} | {} {:.2}x |",
            self.model, self.entry, self.first, self.best_fix, self.best
        )
    }
}

fn evaluate(row: &serde_json::Value) -> Row {
    let capture = row["capture"].as_str().unwrap().to_string();
    let model = row["model"].as_str().unwrap().to_string();
    let measured = json(&format!("{model}.measured.json"));
    let speedups = measured["speedup"].as_object().unwrap().clone();
    let r = report(&capture);
    let first = &r["recommendations"][0];
    let id = first["id"].as_str().unwrap().to_string();
    assert!(!r["primary"].is_null(), "{capture}");
    let (best_fix, best) = speedups
        .iter()
        .map(|(k, v)| (k.clone(), v.as_f64().unwrap()))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    let p = &first["predicted_speedup"];
    let predicted = p["estimate"]
        .as_f64()
        .map(|e| (e, p["low"].as_f64().unwrap(), p["high"].as_f64().unwrap()));
    let measured = fix_of(&id, &speedups).map(|f| speedups[&f].as_f64().unwrap());
    // Every finding with a figure ranks above every finding without.
    let recs = r["recommendations"].as_array().unwrap();
    if let Some(last_with) = recs.iter().rposition(|x| !x["predicted_speedup"].is_null()) {
        assert!(
            recs[..=last_with]
                .iter()
                .all(|x| !x["predicted_speedup"].is_null()
                    || x["evidence"].as_str().unwrap().contains("does not know")),
            "{capture}"
        );
    }
    Row {
        capture,
        model,
        entry: row["entry"].as_str().unwrap().to_string(),
        first: id,
        predicted,
        measured,
        best_fix,
        best,
    }
}

fn rows() -> Vec<Row> {
    let suite = json("suite.json");
    suite["captures"]
        .as_array()
        .unwrap()
        .iter()
        .map(evaluate)
        .collect()
}

#[test]
fn the_first_finding_against_the_best_measured_fix() {
    let suite = json("suite.json");
    let rows = rows();
    // (captures, #1 the best fix, within 1.5x) per entry point.
    let mut seen: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    for (row, spec) in rows.iter().zip(suite["captures"].as_array().unwrap()) {
        assert_eq!(
            row.first,
            spec["first"].as_str().unwrap(),
            "{}",
            row.capture
        );
        // Graph capture is never #1 where it measured under 1.1x.
        assert!(
            row.first != "capture_cuda_graph" || row.measured.is_some_and(|m| m >= 1.1),
            "{}: graph capture #1, measured {:?}",
            row.capture,
            row.measured
        );
        // Nor torch.compile where it measured under 1.1x (it measured
        // 0.97x and 1.05x on two of the suite's models).
        assert!(
            row.first != "use_torch_compile" || row.measured.is_some_and(|m| m >= 1.1),
            "{}: torch.compile #1, measured {:?}",
            row.capture,
            row.measured
        );
        println!("{}", row.markdown());
        let c = seen.entry(row.entry.clone()).or_default();
        c.0 += 1;
        c.1 += u64::from(row.is_best());
        c.2 += u64::from(row.within());
    }
    println!("(captures, #1 the best fix, within 1.5x) per entry point: {seen:?}");
    let expected: BTreeMap<String, (u64, u64, u64)> = suite["counts"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(entry, c)| {
            let n = |k: &str| c[k].as_u64().unwrap();
            (entry.clone(), (n("captures"), n("best"), n("within_1_5x")))
        })
        .collect();
    assert_eq!(
        seen, expected,
        "(captures, #1 the best fix, within 1.5x) per entry point"
    );
}

#[test]
fn the_benchmarks_table_is_the_tools_output() {
    let doc = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/benchmarks.md"),
    )
    .unwrap();
    let missing: Vec<String> = rows()
        .iter()
        .map(Row::markdown)
        .filter(|line| !doc.lines().any(|l| l == line))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/benchmarks.md lacks these rows of the advice table:\n{}",
        missing.join("\n")
    );
}

#[test]
fn no_padding_inside_fused_attention() {
    // ViT-Base with eager attention: S = 197 is not padded; SDPA is the fix.
    let r = report("vit_hf_b64_bf16_eager-ops");
    let recs = r["recommendations"].as_array().unwrap();
    assert_eq!(recs[0]["id"], "use_fused_attention");
    assert!(recs[0]["evidence"].as_str().unwrap().contains("197 x 197"));
    assert!(recs
        .iter()
        .all(|x| !x["title"].as_str().unwrap().contains("197 -> 256")));
}
