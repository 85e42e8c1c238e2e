//! `kopt profile` skips its counter pass where the timeline decides the
//! first finding (#38). On every bundled full profile (timeline and
//! counters of real models on H100s and H200s), the first finding and its
//! figure must be the same with the counters and without them, and the
//! plan made from the timeline alone says which kernels' counters could
//! have changed it.

#[path = "support/advice.rs"]
mod advice;

use std::path::{Path, PathBuf};

use kopt_analyze::counter_plan::{counter_plan, CounterPlan};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

fn analyze(dir: &Path) -> kopt_model::Diagnosis {
    serde_json::from_value(advice::analyze(dir)).unwrap()
}

/// The first finding's id and figure (rounded as reports print it).
fn first(d: &kopt_model::Diagnosis) -> (String, Option<String>) {
    let r = d.recommendations.first().expect("a finding");
    (
        r.id.clone(),
        r.gain.as_ref().map(|g| format!("{:.1}", g.workload_pct)),
    )
}

/// The run folder without its counter passes (the timeline and the bare
/// steps only), as `kopt profile` sees it before deciding.
fn timeline_only(dir: &Path, into: &Path) {
    std::fs::create_dir_all(into).unwrap();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("pass2") || name.starts_with("pass3") || name.contains("targeted") {
            continue;
        }
        std::fs::copy(e.path(), into.join(&name)).unwrap();
    }
}

#[test]
fn counters_never_change_the_first_finding_the_timeline_decides() {
    let mut folders: Vec<PathBuf> = Vec::new();
    for parent in ["advice-h100", "models"] {
        for e in std::fs::read_dir(fixtures().join(parent))
            .unwrap()
            .flatten()
        {
            let p = e.path();
            if p.join("pass2-targeted.csv").exists() && p.join("trace.jsonl.gz").exists() {
                folders.push(p);
            }
        }
    }
    folders.push(fixtures().join("moe-route-h200-profile"));
    folders.sort();
    assert!(folders.len() >= 15, "{folders:?}");
    let tmp = tempfile::tempdir().unwrap();
    let mut skipped = 0;
    for dir in &folders {
        let name = dir.file_name().unwrap();
        let bare = tmp.path().join(name);
        timeline_only(dir, &bare);
        let with = analyze(dir);
        let without = analyze(&bare);
        assert_eq!(first(&with), first(&without), "{}", dir.display());
        match counter_plan(&without) {
            CounterPlan::Skip { .. } => skipped += 1,
            CounterPlan::Kernels { functions, .. } => assert!(!functions.is_empty()),
            CounterPlan::All => {}
        }
    }
    // Most of these models are decided by the timeline: launch-bound steps,
    // precision and compile findings larger than any one kernel.
    assert!(
        skipped * 4 >= folders.len() * 3,
        "{skipped} of {} skipped",
        folders.len()
    );
}
