//! `kopt profile --verify N` without a GPU: a real H100 capture's
//! diagnosis (fixtures/advice-h100, ViT with eager attention: SDPA #1,
//! torch.compile #2), its top recommendations measured by the fake
//! optimize harness (tests/support/fake-python.sh, told to measure compile
//! faster than SDPA), then every format shows the measurement beside the
//! prediction and the ranking follows what was measured.

use std::path::{Path, PathBuf};

use kopt_report::{Format, Layout, Render};

fn repo(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A .safetensors file of one f32 tensor `out`.
fn safetensors(path: &Path, values: &[f32]) {
    let header = format!(
        "{{\"out\":{{\"dtype\":\"F32\",\"shape\":[{}],\"data_offsets\":[0,{}]}}}}",
        values.len(),
        4 * values.len()
    );
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend(header.as_bytes());
    for v in values {
        bytes.extend(v.to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

const MODULE: &str = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n\ndef get_inputs():\n    return [torch.randn(4)]\n";

/// The ViT capture's diagnosis, verified with the fake harness; `wrong`
/// names the candidate whose outputs are wrong.
fn verified(dir: &Path, wrong: &str, top: usize) -> kopt_model::Diagnosis {
    let python = dir.join("fake-python");
    std::fs::copy(repo("tests/support/fake-python.sh"), &python).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    safetensors(&dir.join("ref.safetensors"), &[1.0, 2.0, 3.0, 4.0]);
    safetensors(&dir.join("bad.safetensors"), &[1.0, 2.0, 3.0, 9.0]);
    // The fake harness reads its settings from the environment.
    std::env::set_var("FAKE_REF", dir.join("ref.safetensors"));
    std::env::set_var("FAKE_BAD", dir.join("bad.safetensors"));
    std::env::set_var("FAKE_WRONG", wrong);
    // Against eager's 100 us: compile 1.67x, SDPA 1.25x, the other way
    // round from the predictions, so the ranking has something to follow.
    std::env::set_var("FAKE_TIMES", "compile=60000,sdpa=80000");
    let req = kopt_engine::AnalyzeRequest {
        files: vec![repo(
            "../../fixtures/advice-h100/vit_hf_b64_bf16_eager-plain",
        )],
        ..Default::default()
    };
    let mut d = kopt_engine::analyze(&req, &kopt_engine::Silent).unwrap();
    let run = dir.join("run");
    let prepared = kopt_engine::module_script::prepare(
        &run,
        MODULE,
        "vit",
        &python.display().to_string(),
        3,
        20,
        false,
    )
    .unwrap();
    let opts = kopt_engine::WorkloadOptions {
        quiet: true,
        ..kopt_engine::WorkloadOptions::command(prepared.argv.clone())
    };
    kopt_engine::optimize::verify_recommendations(
        &mut d,
        &prepared.argv,
        &opts,
        &run,
        top,
        &kopt_engine::Silent,
    );
    d
}

fn ids(d: &kopt_model::Diagnosis) -> Vec<&str> {
    d.recommendations.iter().map(|r| r.id.as_str()).collect()
}

// One test: the fake harness's settings are process-wide environment.
#[test]
fn verified_recommendations_are_ranked_by_what_was_measured() {
    let dir = tempfile::tempdir().unwrap();
    let before = {
        let req = kopt_engine::AnalyzeRequest {
            files: vec![repo(
                "../../fixtures/advice-h100/vit_hf_b64_bf16_eager-plain",
            )],
            ..Default::default()
        };
        kopt_engine::analyze(&req, &kopt_engine::Silent).unwrap()
    };
    // Before: SDPA #1, torch.compile #2 (their predictions).
    assert_eq!(
        &ids(&before)[..2],
        ["use_fused_attention", "use_torch_compile"]
    );
    let d = verified(dir.path(), "none", 2);
    // The fake harness measures compile 1.67x and SDPA 1.25x: compile first.
    assert_eq!(d.verified.len(), 2, "{:?}", d.notes);
    let sdpa = d.verification("use_fused_attention").unwrap();
    assert_eq!(sdpa.candidate, "sdpa");
    assert_eq!(sdpa.correct, Some(true));
    let m = sdpa.measured_speedup.unwrap();
    assert!((1.2..1.3).contains(&m), "{m}");
    assert!(sdpa.predicted_speedup.is_some_and(|p| p > 1.0));
    let compile = d.verification("use_torch_compile").unwrap();
    assert_eq!(compile.candidate, "compile");
    assert!(compile
        .measured_speedup
        .is_some_and(|m| (1.5..1.8).contains(&m)));
    assert_eq!(&ids(&d)[..2], ["use_torch_compile", "use_fused_attention"]);
    assert_eq!(d.recommendations[0].rank, 1);
    assert!(d.notes.iter().any(|n| n.contains("ranked by the measured")));
    // Every format says it beside the prediction.
    for format in [Format::Terminal, Format::Markdown, Format::Html] {
        let text = d.render(format, Layout::default());
        assert!(
            text.contains("; verified: measured 1.6"),
            "{format:?}: {text}"
        );
        assert!(text.contains("; verified: measured 1.2"), "{format:?}");
    }
    let json = d.render(Format::Json, Layout::default());
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let recs: Vec<&str> = v["verified"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["recommendation"].as_str().unwrap())
        .collect();
    assert!(recs.contains(&"use_fused_attention") && recs.contains(&"use_torch_compile"));

    // A fix that fails its check is shown as such and ranks by its prediction.
    let dir = tempfile::tempdir().unwrap();
    let d = verified(dir.path(), "sdpa", 2);
    let sdpa = d.verification("use_fused_attention").unwrap();
    assert_eq!(sdpa.correct, Some(false));
    // SDPA keeps its predicted figure; compile ranks by what it measured.
    let compile = d.verification("use_torch_compile").unwrap();
    let (predicted, measured) = (
        sdpa.predicted_speedup.unwrap(),
        compile.measured_speedup.unwrap(),
    );
    assert!(
        (predicted - measured).abs() > 0.01,
        "{predicted} vs {measured}"
    );
    let expected = if predicted > measured {
        ["use_fused_attention", "use_torch_compile"]
    } else {
        ["use_torch_compile", "use_fused_attention"]
    };
    assert_eq!(&ids(&d)[..2], expected, "{predicted} vs {measured}");
    let text = d.render(Format::Terminal, Layout::default());
    assert!(
        text.contains("not verified: sdpa measured 1.2") && text.contains("failed its check"),
        "{text}"
    );

    // Only the top N with a fix kopt applies are measured.
    let dir = tempfile::tempdir().unwrap();
    let d = verified(dir.path(), "none", 1);
    assert_eq!(d.verified.len(), 1);
    assert_eq!(d.verified[0].candidate, "sdpa");
}
