//! Host syncs and pageable copies in a torch.profiler trace (#35): each
//! named with the user's source line (with_stack=True frames), graph
//! capture never recommended for a step that syncs, the copy priced
//! against pinned memory.

use std::fmt::Write as _;
use std::process::Command;

/// A Kineto trace of `steps` training steps. Each: an input copy from
/// pageable memory (train.py:40), then `layers` kernels, `.item()` after
/// each but the last (model.py:12) when `sync` is set.
fn trace(steps: usize, layers: usize, sync: bool, copy: bool) -> String {
    let mut ev = String::new();
    let mut push = |e: String| {
        if !ev.is_empty() {
            ev.push_str(",\n");
        }
        ev.push_str(&e);
    };
    let x = |cat: &str, name: &str, ts: f64, dur: f64, tid: u32, args: &str| {
        format!(
            r#"{{"ph":"X","cat":"{cat}","name":"{name}","pid":1,"tid":{tid},"ts":{ts:.3},"dur":{dur:.3},"args":{{{args}}}}}"#
        )
    };
    let mut t = 1000.0;
    let mut corr = 0;
    for s in 0..steps {
        let step_start = t;
        let mut step_events = Vec::new();
        // Input copy: 64 MB from pageable memory, the host held 6 ms.
        if copy {
            corr += 1;
            step_events.push(x(
                "python_function",
                "train.py(40): main",
                t,
                6000.0,
                10,
                "",
            ));
            step_events.push(x(
                "cuda_runtime",
                "cudaMemcpyAsync",
                t + 1.0,
                5990.0,
                10,
                &format!(r#""correlation":{corr}"#),
            ));
            step_events.push(x(
                "gpu_memcpy",
                "Memcpy HtoD (Pageable -> Device)",
                t + 900.0,
                5000.0,
                7,
                &format!(r#""correlation":{corr},"device":0,"stream":7,"bytes":67108864"#),
            ));
            t += 6000.0;
        }
        for l in 0..layers {
            corr += 1;
            step_events.push(x(
                "cuda_runtime",
                "cudaLaunchKernel",
                t,
                8.0,
                10,
                &format!(r#""correlation":{corr}"#),
            ));
            step_events.push(x(
                "kernel",
                &format!("layer_kernel_{l}"),
                t + 10.0,
                300.0,
                7,
                &format!(r#""correlation":{corr},"device":0,"stream":7"#),
            ));
            t += 10.0;
            if sync && l + 1 < layers {
                // .item(): the host waits for the layer, then launches the next.
                let wait_end = t + 300.0;
                step_events.push(x(
                    "python_function",
                    "model.py(12): forward",
                    t,
                    wait_end - t + 2.0,
                    10,
                    "",
                ));
                step_events.push(x("cpu_op", "aten::item", t + 0.5, wait_end - t, 10, ""));
                step_events.push(x(
                    "cpu_op",
                    "aten::_local_scalar_dense",
                    t + 0.6,
                    wait_end - t - 0.2,
                    10,
                    "",
                ));
                step_events.push(x(
                    "cuda_runtime",
                    "cudaStreamSynchronize",
                    t + 1.0,
                    wait_end - t - 1.0,
                    10,
                    r#""correlation":0"#,
                ));
                t = wait_end + 40.0;
            }
        }
        t += 300.0;
        step_events.push(x(
            "user_annotation",
            &format!("ProfilerStep#{s}"),
            step_start - 1.0,
            t - step_start + 2.0,
            10,
            "",
        ));
        for e in step_events {
            push(e);
        }
        t += 50.0;
    }
    let mut out = String::new();
    let _ = write!(
        out,
        r#"{{"deviceProperties":[{{"id":0,"name":"NVIDIA H200","numSms":132,"computeMajor":9,"computeMinor":0}}],"traceEvents":[{ev}]}}"#
    );
    out
}

fn analyze(text: &str) -> serde_json::Value {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("trace.json");
    std::fs::write(&path, text).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["analyze", "--format", "json"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn ids(v: &serde_json::Value) -> Vec<String> {
    v["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_sync_per_layer_is_named_with_its_line_and_capture_is_not_advised() {
    let v = analyze(&trace(12, 8, true, false));
    let h = &v["timeline"]["host_syncs"];
    assert!(
        (h["mid_step_per_step"].as_f64().unwrap() - 7.0).abs() < 0.01,
        "{h}"
    );
    assert_eq!(h["serialized"], true, "{h}");
    assert_eq!(h["sites"][0]["frame"], "model.py:12 in forward", "{h}");
    assert_eq!(h["sites"][0]["op"], "aten::item", "{h}");
    let ids = ids(&v);
    assert!(ids.contains(&"remove_host_syncs".to_string()), "{ids:?}");
    assert!(!ids.contains(&"capture_cuda_graph".to_string()), "{ids:?}");
    let r = v["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "remove_host_syncs")
        .unwrap();
    let evidence = r["evidence"].as_str().unwrap();
    assert!(evidence.contains("model.py:12"), "{evidence}");
    assert!(
        evidence.contains("capture") && evidence.contains("impossible"),
        "{evidence}"
    );
}

#[test]
fn a_sync_is_named_by_its_statement_where_the_source_is_here() {
    // torch.profiler names the function by its first line (here a
    // decorator's); with the file readable, the `.item()` statement is
    // named instead.
    let d = tempfile::tempdir().unwrap();
    let model = d.path().join("model.py");
    std::fs::write(
        &model,
        "import torch\n\n@torch.no_grad()\ndef forward(x, layers):\n    for layer in layers:\n        x = layer(x)\n        if x.abs().max().item() > 1e4:  # a sync\n            break\n    return x\n",
    )
    .unwrap();
    let text = trace(12, 8, true, false).replace(
        "model.py(12): forward",
        &format!("{}(3): forward", model.display()),
    );
    let v = analyze(&text);
    let frame = v["timeline"]["host_syncs"]["sites"][0]["frame"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(frame.ends_with("/model.py:7 in forward"), "{frame}");
    // Without the file, the function's first line, as the trace has it.
    std::fs::remove_file(&model).unwrap();
    let v = analyze(&text);
    let frame = v["timeline"]["host_syncs"]["sites"][0]["frame"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(frame.ends_with("/model.py:3 in forward"), "{frame}");
}

#[test]
fn a_pageable_input_copy_is_named_and_priced() {
    let v = analyze(&trace(12, 8, false, true));
    let g = &v["timeline"]["host_copies"]["groups"][0];
    assert_eq!(g["direction"], "HtoD", "{g}");
    assert_eq!(g["host_memory"], "pageable", "{g}");
    assert_eq!(g["frames"][0], "train.py:40 in main", "{g}");
    let r = v["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "pin_host_memory")
        .expect("a pinned-memory finding");
    assert!(
        r["predicted_speedup"]["estimate"].as_f64().unwrap() > 1.5,
        "{r}"
    );
    assert!(r["evidence"].as_str().unwrap().contains("PCIe Gen5"), "{r}");
    // No sync inside the step: nothing said of syncs.
    assert!(v["timeline"]["host_syncs"].is_null());
}
