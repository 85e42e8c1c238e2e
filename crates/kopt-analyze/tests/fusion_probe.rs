//! The eager elementwise chain of fixtures/h100-probe (`big * 2.0 + 1.0`:
//! two ATen elementwise kernels back to back) with its DRAM byte counters
//! set to 0, as an L2-resident tensor reads: the fused-pass estimate must
//! stay finite and above zero. Synthetic edit of a real capture.

use std::path::PathBuf;

use kopt_analyze::{analyze, AnalyzeOptions};
use kopt_ingest::{merge_profile, parse_ncu_csv};

fn probe_with_l2_resident_chain() -> Vec<u8> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/h100-probe/ncu_raw.csv");
    let text = std::fs::read_to_string(path).unwrap();
    let mut dram: Vec<usize> = Vec::new();
    let mut name_at = 0;
    let mut out = String::new();
    let mut edited = 0;
    for line in text.lines() {
        // Every field is quoted: `"a","b,c",...`.
        let inner = line
            .strip_prefix('"')
            .and_then(|l| l.strip_suffix('"'))
            .unwrap_or(line);
        let mut fields: Vec<String> = inner.split("\",\"").map(str::to_string).collect();
        if line.starts_with("\"ID\"") {
            dram = (0..fields.len())
                .filter(|&i| fields[i].starts_with("dram__bytes_"))
                .collect();
            name_at = fields.iter().position(|f| f == "Kernel Name").unwrap();
        } else if !dram.is_empty()
            && fields
                .get(name_at)
                .is_some_and(|n| n.contains("vectorized_elementwise_kernel"))
        {
            for &i in &dram {
                fields[i] = "0".into();
            }
            edited += 1;
        }
        if line.starts_with('"') {
            out.push('"');
            out.push_str(&fields.join("\",\""));
            out.push('"');
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    assert_eq!(edited, 2, "the two elementwise rows");
    out.into_bytes()
}

#[test]
fn an_l2_resident_chain_is_not_fused_to_nothing() {
    let file = parse_ncu_csv(&probe_with_l2_resident_chain(), "ncu_raw.csv").unwrap();
    let d = analyze(
        &merge_profile(vec![("ncu_raw.csv".into(), file)]),
        &AnalyzeOptions::default(),
    );
    // The chain is torch.compile's finding now (it subsumes the fusion
    // finding); its low end keeps each run's longest launch.
    let r = d
        .recommendations
        .iter()
        .find(|r| r.id == kopt_analyze::compile::ID)
        .expect("the torch.compile finding");
    let sp = r.predicted_speedup.as_ref().unwrap();
    assert!(
        sp.estimate.is_finite() && sp.estimate > 1.0,
        "{}",
        sp.estimate
    );
    assert!(sp.low.is_finite() && sp.low <= sp.estimate);
    let g = r.gain.as_ref().unwrap();
    // The chain: 175 + 176 us; the fused code keeps FUSED_LEFT of it, so
    // some is saved, never all of it.
    assert!(
        g.saved_ns > 0.0
            && g.saved_ns <= 351_040.0 * (1.0 - kopt_analyze::compile::FUSED_LEFT) + 1.0,
        "{}",
        g.saved_ns
    );
    assert!(!r.action.contains("inf"), "{}", r.action);
    // The JSON carries the number, not null.
    let v = serde_json::to_value(&d).unwrap();
    let rec = v["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == kopt_analyze::compile::ID)
        .unwrap();
    assert!(rec["predicted_speedup"]["estimate"].is_f64(), "{rec}");
}
