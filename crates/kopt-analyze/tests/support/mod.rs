//! What the prediction tests share: fixture paths and the measured steps.

use std::path::PathBuf;

pub fn fixture(set: &str, rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(set)
        .join(rel)
}

/// (eager us, graph us) per step, measured bare in the same call.
pub fn measured(set: &str, workload: &str) -> (f64, f64) {
    let text = std::fs::read_to_string(fixture(set, "measured.jsonl")).unwrap();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["workload"] == workload)
        .map(|v| {
            (
                v["eager_us"].as_f64().unwrap(),
                v["graph_us"].as_f64().unwrap(),
            )
        })
        .unwrap()
}

/// How far a prediction is from a measurement, either way (>= 1).
pub fn off(predicted: f64, measured: f64) -> f64 {
    (predicted / measured).max(measured / predicted)
}
