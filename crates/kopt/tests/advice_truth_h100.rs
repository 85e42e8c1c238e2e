//! How steady the advice suite's truth is (fixtures/advice-h100-diag, made
//! by scripts/checks/advice/diag.sh on an H100): each model's eager step
//! timed in three phases of one process (alone, beside its CUDA graph,
//! after torch.compile), against measure.py's eager and kopt's bare step;
//! and BERT b1's CUDA graph traced, against its eager trace.
//!
//! docs/benchmarks.md's block between `<!-- advice-h100-truth -->` markers
//! is this test's output; `KOPT_BLESS=1 cargo test -p kopt --test
//! advice_truth_h100` rewrites it.

#[path = "support/advice.rs"]
mod advice;

use advice::{analyze, benchmarks_md, blessing, fixture};

const BEGIN: &str = "<!-- advice-h100-truth -->";
const END: &str = "<!-- /advice-h100-truth -->";

fn ms(v: &serde_json::Value) -> String {
    v.as_f64()
        .map(|x| format!("{x:.2}"))
        .unwrap_or_else(|| "-".into())
}

/// kopt's bare step of the model's `--script` capture, in ms.
fn kopt_bare_ms(model: &str) -> Option<f64> {
    let dir = fixture(&format!("{model}-script"));
    if !dir.is_dir() {
        return None;
    }
    let g = &analyze(&dir)["timeline"]["graph_prediction"];
    g["eager_measured_bare"]
        .as_bool()
        .unwrap_or(false)
        .then(|| g["eager_corrected_per_step_ns"].as_f64().map(|ns| ns / 1e6))
        .flatten()
}

fn phases_table() -> String {
    let text = std::fs::read_to_string(fixture("../advice-h100-diag/phases.jsonl")).unwrap();
    let mut out = String::from(
        "| model (card H100) | measure.py eager | eager alone | eager beside graph | eager after compile | graph | compile | kopt bare (script) |\n|---|--:|--:|--:|--:|--:|--:|--:|\n",
    );
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let row: serde_json::Value = serde_json::from_str(line).unwrap();
        let model = row["model"].as_str().unwrap();
        let measured: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(fixture(&format!("{model}.measured.json"))).unwrap(),
        )
        .unwrap();
        let p = &row["phases"];
        // The graph and compile figures of the phase that timed them last.
        let graph = if p["after_compile"]["ms"]["graph"].is_null() {
            &p["beside_graph"]["ms"]["graph"]
        } else {
            &p["after_compile"]["ms"]["graph"]
        };
        out += &format!(
            "| {model} | {} | {} | {} | {} | {} | {} | {} |\n",
            ms(&measured["ms"]["eager"]),
            ms(&p["alone"]["ms"]["eager"]),
            ms(&p["beside_graph"]["ms"]["eager"]),
            ms(&p["after_compile"]["ms"]["eager"]),
            ms(graph),
            ms(&p["after_compile"]["ms"]["compile"]),
            kopt_bare_ms(model)
                .map(|x| format!("{x:.2}"))
                .unwrap_or_else(|| "-".into()),
        );
    }
    out
}

fn graph_lines() -> String {
    let eager = &analyze(&fixture("bert_b1_s64_bf16-script"))["timeline"];
    let graphed = &analyze(&fixture("../advice-h100-diag/bert_b1_s64_bf16-graph"))["timeline"];
    let us = |v: &serde_json::Value| format!("{:.0} us", v.as_f64().unwrap() / 1e3);
    format!(
        "bert_b1_s64_bf16: eager step {} kernels, {} GPU busy (`--script` capture); its CUDA graph's replay {} kernels, {} GPU busy ({} graph launches); kopt's predicted graphed step {}.\n",
        eager["kernels_per_iteration"],
        us(&eager["busy_per_iteration_ns"]),
        graphed["kernels_per_iteration"],
        us(&graphed["busy_per_iteration_ns"]),
        graphed["graph_launches"],
        us(&eager["graph_prediction"]["graph_per_step_ns"]),
    )
}

fn replace_block(doc: &str, block: &str) -> Option<String> {
    advice::replace_block(doc, BEGIN, END, block)
}

#[test]
fn the_truths_noise_and_the_graphed_bert_step_as_documented() {
    let block = format!("{}\n{}", phases_table(), graph_lines());
    let doc = std::fs::read_to_string(benchmarks_md()).unwrap();
    if blessing() {
        let new_doc = replace_block(&doc, &block).expect("docs/benchmarks.md lacks the block");
        std::fs::write(benchmarks_md(), new_doc).unwrap();
        return;
    }
    assert_eq!(
        replace_block(&doc, &block).as_deref(),
        Some(doc.as_str()),
        "docs/benchmarks.md's {BEGIN} block is not this test's output (KOPT_BLESS=1 cargo test -p kopt --test advice_truth_h100)"
    );
}

#[test]
fn the_graphed_bert_step_runs_more_kernels_than_its_eager_step() {
    let eager = &analyze(&fixture("bert_b1_s64_bf16-script"))["timeline"];
    let graphed = &analyze(&fixture("../advice-h100-diag/bert_b1_s64_bf16-graph"))["timeline"];
    assert_eq!(graphed["kernel_launch_calls"].as_u64(), Some(0));
    assert!(graphed["graph_launches"].as_u64().unwrap() >= 20);
    let k = |t: &serde_json::Value| t["kernels_per_iteration"].as_f64().unwrap();
    assert!(k(graphed) > 2.0 * k(eager), "{} {}", k(graphed), k(eager));
}
