//! The same input gives the same bytes, run after run: the ops table's
//! ties and the nested-range list once followed hash-map order, which
//! changes with every process.

use std::path::PathBuf;
use std::process::Command;

fn analyze_json(input: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(input);
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["analyze", "-f", "json"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{input}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

#[test]
fn op_tables_and_step_details_are_the_same_every_run() {
    for input in [
        // Op rows tied on time and name, told apart by their shapes.
        "advice-h100/bert_b32_s128_fp32-ops",
        // Four ranges nested in the step, listed in its detail.
        "training-capture-h200/train_mlp.trace.jsonl.gz",
    ] {
        let first = analyze_json(input);
        for run in 1..6 {
            assert!(
                analyze_json(input) == first,
                "{input}: run {run} differs from the first"
            );
        }
    }
}
