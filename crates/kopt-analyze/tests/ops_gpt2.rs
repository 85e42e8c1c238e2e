//! GPT-2 prefill on an H200 (fixtures/ops-gpt2-h200, made by
//! scripts/checks/ops/run.sh with --ops): kernels traced back to their ops,
//! and the LM head's misaligned vocabulary found with the padding fix.

use std::path::PathBuf;

use kopt_analyze::{analyze, AnalyzeOptions};
use kopt_ingest::{profile_from_timeline, read_kopt_trace};
use kopt_model::Diagnosis;

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/ops-gpt2-h200")
        .join(rel)
}

fn gpt2() -> Diagnosis {
    let t = read_kopt_trace(&fixture("gpt2.trace.jsonl.gz")).unwrap();
    analyze(
        &profile_from_timeline(t.timeline, "gpt2", "kopt trace"),
        &AnalyzeOptions::default(),
    )
}

#[test]
fn kernels_name_their_ops_and_shapes() {
    let d = gpt2();
    let head = &d.ops[0];
    assert_eq!(head.op, "aten::mm");
    assert_eq!(head.shapes.as_deref(), Some("[[4096, 768], [768, 50257]]"));
    assert_eq!(head.kernels, ["Kernel2"]);
    assert!(head.pct_of_total > 40.0, "{}", head.pct_of_total);
    let k = d
        .kernels
        .iter()
        .find(|k| k.short_name == "Kernel2")
        .unwrap();
    assert_eq!(k.ops[0].op, "aten::mm");
    // The GELU pieces are separate elementwise ops on the same shape.
    for op in ["aten::pow", "aten::tanh", "aten::mul"] {
        assert!(d.ops.iter().any(|o| o.op == op), "{op}");
    }
}

#[test]
fn the_misaligned_vocabulary_gets_the_padding_fix_within_1_5x() {
    let d = gpt2();
    let r = d
        .recommendations
        .iter()
        .find(|r| r.id == "pad_gemm_dims")
        .expect("a padding recommendation");
    assert!(r.title.contains("50257 -> 50304"), "{}", r.title);
    assert_eq!(r.kernel_short, "Kernel2");
    let predicted = r.predicted_speedup.as_ref().unwrap().estimate;
    let measured: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("padding_measured.json")).unwrap())
            .unwrap();
    let measured = measured["speedup"].as_f64().unwrap();
    let off = (predicted / measured).max(measured / predicted);
    assert!(
        off <= 1.5,
        "predicted {predicted:.2}x, measured {measured:.2}x"
    );
}
