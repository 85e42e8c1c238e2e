//! The real-model advice suite on an H100 (fixtures/advice-h100, made by
//! scripts/checks/advice/run.sh): every capture is analysed again and its
//! #1 finding compared with what measure.py measured for the same model:
//! is it the best measured fix (or within 10% of its gain), is its
//! predicted step speed-up within 1.5x of the measured one, and is graph
//! capture (or torch.compile) #1 where it measured under 1.1x.
//!
//! The test pins what is seen, not the acceptance thresholds: suite.json
//! holds each capture's #1 and the counts per entry point, and
//! docs/benchmarks.md's block between `<!-- advice-h100 -->` markers is this
//! test's table. After a rule change, re-pin both with
//!
//! ```text
//! KOPT_BLESS=1 cargo test -p kopt --test advice_h100
//! ```
//!
//! and read the diff: it is the change's effect on the suite.

#[path = "support/advice.rs"]
mod advice;

use std::collections::BTreeMap;

use advice::{analyze, benchmarks_md, blessing, fixture, json};
use kopt_analyze::precision::{self, Fix};

const BEGIN: &str = "<!-- advice-h100 -->";
const END: &str = "<!-- /advice-h100 -->";

fn report(capture: &str) -> serde_json::Value {
    analyze(&fixture(capture))
}

/// The option of the fp32 precision finding (`enable_tf32`) its figure is
/// for, as measure.py names it: the finding prices TF32 and bf16 autocast
/// and headlines the faster, its title says which ("...: bf16 autocast (or
/// TF32)").
fn precision_option(finding: &serde_json::Value) -> &'static str {
    let title = finding["title"].as_str().unwrap_or_default();
    precision::headline_of(precision::ID, title).map_or(Fix::Tf32.fix(), Fix::fix)
}

/// The measured fix a finding's action is, as measure.py names it. Batch
/// norm folding's action is torch.compile with freezing (folding alone in
/// eager mode gains nothing, it says), so compile measures it where
/// measured, as it does the eager elementwise chains' fusion and the
/// whole-model torch.compile finding; the precision finding's is the
/// option it headlines.
fn fix_of(
    finding: &serde_json::Value,
    measured: &serde_json::Map<String, serde_json::Value>,
) -> Option<String> {
    let id = finding["id"].as_str().unwrap_or_default();
    let fix = match id {
        "enable_tf32" => precision_option(finding),
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

/// The other option the precision finding's action prices beside its
/// headline (a user following #1 may take either, and the action gives
/// both figures), and what it measured. It counts for "#1 is the best fix"
/// and the table says so ("yes, by its bf16_autocast option (headline
/// tf32)"), and the row is listed among the misses: the headline was not
/// the better option. The prediction is compared with the headline's
/// measurement only.
fn alternative_of(
    finding: &serde_json::Value,
    measured: &serde_json::Map<String, serde_json::Value>,
) -> Option<(String, f64)> {
    let fix = match finding["id"].as_str() {
        Some("enable_tf32") if precision_option(finding) == "tf32" => "bf16_autocast",
        Some("enable_tf32") => "tf32",
        _ => return None,
    };
    measured
        .get(fix)
        .and_then(|v| v.as_f64())
        .map(|m| (fix.to_string(), m))
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
    /// The fix #1's figure is for, where it names one of several (the
    /// precision finding's headlined option).
    option: Option<String>,
    /// The other fix #1's action names, and what it measured.
    alternative: Option<(String, f64)>,
    best_fix: String,
    best: f64,
    /// The #1 finding as the report gives it.
    first_finding: serde_json::Value,
}

impl Row {
    fn is_best(&self) -> bool {
        self.predicted_option_is_best() || self.alternative_is_best()
    }

    fn predicted_option_is_best(&self) -> bool {
        self.measured
            .is_some_and(|m| m - 1.0 >= 0.9 * (self.best - 1.0))
    }

    fn alternative_is_best(&self) -> bool {
        self.alternative
            .as_ref()
            .is_some_and(|(_, m)| m - 1.0 >= 0.9 * (self.best - 1.0))
    }

    fn best_text(&self) -> String {
        let headline = self.option.as_deref().unwrap_or_default();
        match (self.predicted_option_is_best(), self.alternative_is_best()) {
            (true, _) if self.option.is_some() => format!("yes ({headline})"),
            (true, _) => "yes".into(),
            (false, true) => format!(
                "yes, by its {} option (headline {headline})",
                self.alternative.as_ref().unwrap().0
            ),
            _ => "no".into(),
        }
    }

    /// Predicted over measured (or its inverse), when both exist.
    fn off(&self) -> Option<f64> {
        match (self.predicted, self.measured) {
            (Some((p, _, _)), Some(m)) => Some((p / m).max(m / p)),
            _ => None,
        }
    }

    fn within(&self) -> bool {
        self.off().is_some_and(|r| r <= 1.5)
    }

    /// Graph capture (or torch.compile) #1 where it measured under 1.1x.
    fn slow_fix_first(&self) -> bool {
        matches!(
            self.first.as_str(),
            "capture_cuda_graph" | "use_torch_compile"
        ) && !self.measured.is_some_and(|m| m >= 1.1)
    }

    /// #1's id, and the option its figure is for where it names several.
    fn first_text(&self) -> String {
        match &self.option {
            Some(o) => format!("{} ({o})", self.first),
            None => self.first.clone(),
        }
    }

    fn predicted_text(&self) -> String {
        match self.predicted {
            Some((e, l, h)) => format!("{e:.2}x ({l:.2}-{h:.2})"),
            None => "no figure".into(),
        }
    }

    fn measured_text(&self) -> String {
        self.measured
            .map_or("not measured".to_string(), |m| format!("{m:.2}x"))
    }

    /// The row of docs/benchmarks.md's table.
    fn markdown(&self) -> String {
        let yes = |b: bool| if b { "yes" } else { "no" };
        format!(
            "| {} | {} | {} | {} | {} | {} {:.2}x | {} | {} |",
            self.model,
            self.entry,
            self.first_text(),
            self.predicted_text(),
            self.measured_text(),
            self.best_fix,
            self.best,
            self.best_text(),
            yes(self.within()),
        )
    }

    /// The line of the misses' list, if this row misses either figure.
    fn miss(&self) -> Option<String> {
        let mut why = Vec::new();
        if !self.predicted_option_is_best() && self.alternative_is_best() {
            why.push(format!(
                "headlines {}, its other option {} measured best",
                self.option.as_deref().unwrap_or_default(),
                self.alternative.as_ref().unwrap().0
            ));
        }
        if !self.is_best() {
            why.push(format!("best fix {} {:.2}x", self.best_fix, self.best));
        }
        if !self.within() {
            why.push(match self.off() {
                Some(r) => format!("prediction {r:.2}x off"),
                None => "no prediction to compare".into(),
            });
        }
        if self.slow_fix_first() {
            why.push("a fix measured under 1.1x ranked #1".into());
        }
        (!why.is_empty()).then(|| {
            format!(
                "- {} ({}): #1 {} predicted {}, measured {}; {}.",
                self.model,
                self.entry,
                self.first_text(),
                self.predicted_text(),
                self.measured_text(),
                why.join("; ")
            )
        })
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
    let measured = fix_of(first, &speedups).map(|f| speedups[&f].as_f64().unwrap());
    let alternative = alternative_of(first, &speedups);
    let option = (id == "enable_tf32").then(|| precision_option(first).to_string());
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
        option,
        alternative,
        best_fix,
        best,
        first_finding: first.clone(),
    }
}

/// The captures with an ncu pass whose #1 (finding and predicted figure)
/// changes when the pass is left out: the `script, trace pass` captures
/// have none, and stand for `kopt profile --script` while this is empty.
fn ncu_pass_changes_first(rows: &[Row]) -> (usize, Vec<String>) {
    let first = |f: &serde_json::Value| (f["id"].clone(), f["predicted_speedup"].clone());
    let mut with_pass = 0;
    let mut changed = Vec::new();
    for row in rows {
        let capture = row.capture.as_str();
        let dir = fixture(capture);
        if !dir.join("pass2-targeted.csv").is_file() {
            continue;
        }
        with_pass += 1;
        let bare =
            std::env::temp_dir().join(format!("kopt-advice-{}-{capture}", std::process::id()));
        std::fs::create_dir_all(&bare).unwrap();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().is_some_and(|n| n != "pass2-targeted.csv") {
                std::fs::copy(&path, bare.join(path.file_name().unwrap())).unwrap();
            }
        }
        let without = analyze(&bare);
        std::fs::remove_dir_all(&bare).unwrap();
        if first(&without["recommendations"][0]) != first(&row.first_finding) {
            changed.push(capture.to_string());
        }
    }
    (with_pass, changed)
}

/// (captures, #1 the best fix, within 1.5x, graph or compile #1 under
/// 1.1x) per entry point.
type Counts = BTreeMap<String, [u64; 4]>;

const COUNT_KEYS: [&str; 4] = ["captures", "best", "within_1_5x", "slow_fix_first"];

fn counts(rows: &[Row]) -> Counts {
    let mut seen = Counts::new();
    for row in rows {
        let c = seen.entry(row.entry.clone()).or_default();
        c[0] += 1;
        c[1] += u64::from(row.is_best());
        c[2] += u64::from(row.within());
        c[3] += u64::from(row.slow_fix_first());
    }
    seen
}

/// The block between the markers in docs/benchmarks.md.
fn docs_block(rows: &[Row], seen: &Counts, ncu: &(usize, Vec<String>)) -> String {
    let mut s = String::from(
        "| model (card H100) | entry | kopt's #1 | predicted | measured (#1's fix) | best fix | #1 best | within 1.5x |\n\
         |---|---|---|--:|--:|---|---|---|\n",
    );
    for row in rows {
        s += &row.markdown();
        s.push('\n');
    }
    s += "\n| entry | captures | #1 the best fix (or within 10%) | prediction within 1.5x | graph or compile #1, measured under 1.1x |\n|---|--:|--:|--:|--:|\n";
    for (entry, c) in seen {
        s += &format!("| {entry} | {} | {} | {} | {} |\n", c[0], c[1], c[2], c[3]);
    }
    s += &format!(
        "\nWithout their ncu pass, {} of the {} captures that have one keep their #1 and its prediction{}.\n",
        ncu.0 - ncu.1.len(),
        ncu.0,
        if ncu.1.is_empty() {
            String::new()
        } else {
            format!(" (changed: {})", ncu.1.join(", "))
        }
    );
    let misses: Vec<String> = rows.iter().filter_map(Row::miss).collect();
    if !misses.is_empty() {
        s += "\nMisses:\n\n";
        for m in misses {
            s += &m;
            s.push('\n');
        }
    }
    s
}

fn replace_block(doc: &str, block: &str) -> Option<String> {
    advice::replace_block(doc, BEGIN, END, block)
}

#[test]
fn the_first_finding_against_the_best_measured_fix() {
    let mut suite = json("suite.json");
    let specs = suite["captures"].as_array().unwrap().clone();
    let rows: Vec<Row> = specs.iter().map(evaluate).collect();
    for row in &rows {
        println!("{}", row.markdown());
    }
    let seen = counts(&rows);
    println!("{COUNT_KEYS:?} per entry point: {seen:?}");
    let ncu = ncu_pass_changes_first(&rows);
    let block = docs_block(&rows, &seen, &ncu);
    let doc = std::fs::read_to_string(benchmarks_md()).unwrap();
    if blessing() {
        for (spec, row) in suite["captures"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .zip(&rows)
        {
            spec["first"] = row.first.clone().into();
        }
        suite["counts"] = seen
            .iter()
            .map(|(entry, c)| {
                let obj: serde_json::Map<String, serde_json::Value> = COUNT_KEYS
                    .iter()
                    .zip(c)
                    .map(|(k, n)| (k.to_string(), (*n).into()))
                    .collect();
                (entry.clone(), serde_json::Value::Object(obj))
            })
            .collect::<serde_json::Map<_, _>>()
            .into();
        suite["ncu_pass_changes_first"] = ncu.1.clone().into();
        let text = serde_json::to_string_pretty(&suite).unwrap() + "\n";
        std::fs::write(fixture("suite.json"), text).unwrap();
        let new_doc = replace_block(&doc, &block)
            .unwrap_or_else(|| panic!("docs/benchmarks.md lacks the {BEGIN} ... {END} block"));
        std::fs::write(benchmarks_md(), new_doc).unwrap();
        return;
    }
    let again = "(re-pin after a rule change: KOPT_BLESS=1 cargo test -p kopt --test advice_h100)";
    for (row, spec) in rows.iter().zip(&specs) {
        assert_eq!(
            row.first,
            spec["first"].as_str().unwrap(),
            "{} {again}",
            row.capture
        );
    }
    let expected: Counts = suite["counts"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(entry, c)| (entry.clone(), COUNT_KEYS.map(|k| c[k].as_u64().unwrap())))
        .collect();
    assert_eq!(seen, expected, "{COUNT_KEYS:?} per entry point {again}");
    let pinned: Vec<String> = suite["ncu_pass_changes_first"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        ncu.1, pinned,
        "captures whose #1 changes without the ncu pass {again}"
    );
    assert_eq!(
        replace_block(&doc, &block).as_deref(),
        Some(doc.as_str()),
        "docs/benchmarks.md's {BEGIN} block is not this test's table {again}"
    );
}

#[test]
fn every_capture_has_its_measurement_and_a_known_entry() {
    let suite = json("suite.json");
    for spec in suite["captures"].as_array().unwrap() {
        let capture = spec["capture"].as_str().unwrap();
        let model = spec["model"].as_str().unwrap();
        assert!(
            fixture(capture).join("trace.jsonl.gz").is_file(),
            "{capture}"
        );
        assert!(
            fixture(&format!("{model}.measured.json")).is_file(),
            "{model}"
        );
        let entry = spec["entry"].as_str().unwrap();
        assert!(
            ["plain", "script", "ops"]
                .iter()
                .any(|e| entry.starts_with(e)),
            "{capture}: entry {entry}"
        );
    }
}

#[test]
fn the_block_is_replaced_between_its_markers_only() {
    let doc = format!("a\n{BEGIN}\nold\n{END}\nb\n");
    assert_eq!(
        replace_block(&doc, "new\n").unwrap(),
        format!("a\n{BEGIN}\nnew\n{END}\nb\n")
    );
    assert!(replace_block("no markers", "x").is_none());
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
