//! No report may claim more than the hardware can do: every bandwidth and
//! FLOP/s figure kopt prints for any fixture it accepts stays at or below
//! the device's peak. A figure above it means counters of one launch were
//! divided by the time of another (e.g. another launch configuration).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Clock and measurement variance a real figure may show over the datasheet peak.
const TOLERANCE: f64 = 1.02;

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

/// Numbers before `unit` in `text` ("4.81 TB/s" -> 4.81).
fn figures(text: &str, unit: &str) -> Vec<f64> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(unit) {
        let head = rest[..i].trim_end();
        let num: String = head
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        if let Ok(v) = num.parse::<f64>() {
            out.push(v);
        }
        rest = &rest[i + unit.len()..];
    }
    out
}

fn strings(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

#[test]
fn no_report_shows_a_rate_above_the_device_peak() {
    let mut files = Vec::new();
    inputs(&fixtures(), &mut files);
    let (mut accepted, mut with_rates, mut checked, mut shares_checked) = (0, 0, 0, 0);
    for f in &files {
        let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
            .args(["analyze", "-f", "json"])
            .arg(f)
            .output()
            .unwrap();
        if !o.status.success() {
            continue;
        }
        accepted += 1;
        let d: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let peaks = &d["device"]["peaks"];
        let dram = peaks["dram_bytes_per_s"].as_f64();
        let fp32 = peaks["fp32_flops"].as_f64();
        let tensor = peaks["tensor_bf16_flops"].as_f64();
        let mut any = false;
        for k in d["kernels"].as_array().unwrap() {
            let name = k["short_name"].as_str().unwrap_or("?");
            if let (Some(bw), Some(p)) = (k["dram_bytes_per_s"].as_f64(), dram) {
                any = true;
                checked += 1;
                assert!(
                    bw <= p * TOLERANCE,
                    "{}: {name}: {:.2} TB/s over the {:.2} TB/s peak",
                    f.display(),
                    bw / 1e12,
                    p / 1e12
                );
            }
            if let (Some(fl), Some(p)) = (k["fp32_flops_per_s"].as_f64(), fp32) {
                any = true;
                checked += 1;
                assert!(
                    fl <= p * TOLERANCE,
                    "{}: {name}: {:.1} TFLOP/s FP32 over the {:.1} peak",
                    f.display(),
                    fl / 1e12,
                    p / 1e12
                );
            }
        }
        // Shares are of a whole: a kernel's, the primary's, a finding's.
        let shares = d["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| ("kernel", &k["pct_of_total"]))
            .chain([("primary", &d["primary"]["pct_of_total"])])
            .chain(
                d["recommendations"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .flat_map(|r| {
                        [
                            ("finding's kernel share", &r["gain"]["kernel_pct"]),
                            ("finding's workload share", &r["gain"]["workload_pct"]),
                        ]
                    }),
            );
        for (what, v) in shares {
            if let Some(pct) = v.as_f64() {
                shares_checked += 1;
                assert!(
                    (0.0..=100.0 + 1e-9).contains(&pct),
                    "{}: {what} {pct}% is not a share",
                    f.display()
                );
            }
        }
        // Figures in the text: bandwidths against the DRAM peak, FLOP rates
        // against the highest compute peak.
        let mut texts = Vec::new();
        strings(&d["kernels"], &mut texts);
        strings(&d["recommendations"], &mut texts);
        strings(&d["primary"], &mut texts);
        let top_flops = tensor.into_iter().chain(fp32).fold(0.0f64, f64::max);
        for t in &texts {
            if let Some(p) = dram {
                for v in figures(t, "TB/s") {
                    any = true;
                    checked += 1;
                    assert!(
                        v * 1e12 <= p * TOLERANCE,
                        "{}: {v} TB/s in: {t}",
                        f.display()
                    );
                }
            }
            if top_flops > 0.0 {
                for v in figures(t, "TFLOP/s") {
                    any = true;
                    checked += 1;
                    assert!(
                        v * 1e12 <= top_flops * TOLERANCE,
                        "{}: {v} TFLOP/s in: {t}",
                        f.display()
                    );
                }
            }
        }
        with_rates += usize::from(any);
    }
    // The test checks real figures, not an empty set.
    assert!(accepted >= 15, "only {accepted} fixtures accepted");
    assert!(
        with_rates >= 5 && checked >= 50,
        "{with_rates} reports, {checked} figures"
    );
    assert!(shares_checked >= 500, "{shares_checked} shares");
    eprintln!("{accepted} fixtures accepted, {with_rates} with rates, {checked} figures checked, {shares_checked} shares");
}
