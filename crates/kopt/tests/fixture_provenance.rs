//! The provenance files beside the captures in `fixtures/` say what the
//! folder's name and README say: the card (`card.txt`, `device.txt`: the
//! nvidia-smi line of the GPU that made the capture), kopt's version
//! (`versions.txt`), and the metrics an ncu capture was asked for
//! (`metrics_used.txt`, each a column of the capture unless ncu gave none).

use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// Every file under `dir` named `name`, recursively.
fn find(dir: &Path, name: &str, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            find(&path, name, out);
        } else if path.file_name().is_some_and(|n| n == name) {
            out.push(path);
        }
    }
}

/// The card a capture folder is named after (`predictions-h200-bare`: h200).
fn card_in_name(path: &Path) -> Option<String> {
    path.ancestors()
        .filter_map(|a| a.file_name()?.to_str())
        .flat_map(|n| n.split('-'))
        .find(|part| part.starts_with('h') && part[1..].parse::<u32>().is_ok())
        .map(str::to_uppercase)
}

#[test]
fn card_files_name_the_card_of_their_folder_and_readme() {
    let mut files = Vec::new();
    find(&fixtures(), "card.txt", &mut files);
    find(&fixtures(), "device.txt", &mut files);
    assert!(files.len() >= 10, "{files:?}");
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let gpu = text
            .lines()
            .find(|l| l.starts_with("NVIDIA "))
            .unwrap_or_else(|| panic!("{}: no nvidia-smi line", path.display()));
        let model = gpu["NVIDIA ".len()..].split([' ', ',']).next().unwrap();
        assert_eq!(
            Some(model.to_string()),
            card_in_name(&path),
            "{}: {gpu}",
            path.display()
        );
        // The nearest README says the card too.
        let readme = path
            .ancestors()
            .skip(1)
            .map(|d| d.join("README.md"))
            .find(|r| r.is_file())
            .unwrap();
        let said = std::fs::read_to_string(&readme).unwrap();
        assert!(
            said.contains(model),
            "{} does not name {model}",
            readme.display()
        );
    }
}

#[test]
fn versions_file_names_kopt() {
    let text =
        std::fs::read_to_string(fixtures().join("profile-module-h200/versions.txt")).unwrap();
    assert!(text.lines().all(|l| l.starts_with("kopt ")), "{text}");
}

#[test]
fn every_metric_asked_for_is_a_column_of_the_capture() {
    let dir = fixtures().join("labeled-suite-h100");
    let metrics = std::fs::read_to_string(dir.join("metrics_used.txt")).unwrap();
    let csv = std::fs::read_to_string(dir.join("ncu_raw_base.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    let columns: Vec<&str> = header.split(',').map(|c| c.trim_matches('"')).collect();
    let metrics: Vec<&str> = metrics.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(metrics.len(), 49);
    // ncu 2025.3.1 on the H100 gave no column for the gmma tensor pipe (the
    // README says so); every other metric asked for is there.
    let absent: Vec<&str> = metrics
        .into_iter()
        .filter(|m| !columns.contains(m))
        .collect();
    assert_eq!(
        absent,
        ["sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"]
    );
}

/// A module run folder keeps the driver its `run.json` ran and the module
/// script the driver loads, as kopt wrote them.
#[test]
fn the_module_run_folder_holds_what_it_ran() {
    let run = fixtures().join("profile-module-h200/run");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    let driver = json["argv"][1].as_str().unwrap();
    assert!(driver.ends_with("/kopt_driver.py"), "{driver}");
    let driver = std::fs::read_to_string(run.join("kopt_driver.py")).unwrap();
    assert!(
        driver.contains("topk_sort"),
        "the driver loads the module script"
    );
    let script = std::fs::read_to_string(run.join("topk_sort.py")).unwrap();
    assert!(script.contains("nn.Module"), "{script}");
}
