//! The labeled suite: every planted kernel gets its class, from both the raw
//! page (kopt's metric list) and the `--set full` details page.

use std::path::PathBuf;

use kopt_analyze::{analyze, AnalyzeOptions};
use kopt_ingest::{merge_profile, read_ncu_csv};
use kopt_model::{BottleneckClass as C, Diagnosis, HotUnit};

fn diagnose(rel: &str) -> Diagnosis {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel);
    let file = read_ncu_csv(&path).unwrap();
    analyze(
        &merge_profile(vec![(rel.to_string(), file)]),
        &AnalyzeOptions::default(),
    )
}

/// (kernel, class, hot unit when memory/compute, at roofline)
const PLANTED: &[(&str, C, Option<HotUnit>, bool)] = &[
    ("kopt_copy_coalesced", C::Memory, Some(HotUnit::Dram), true),
    ("kopt_gather_strided", C::Uncoalesced, None, false),
    ("kopt_transpose_smem_naive", C::BankConflict, None, false),
    (
        "kopt_transpose_smem_padded",
        C::Memory,
        Some(HotUnit::Dram),
        true,
    ),
    ("kopt_occupancy_smem", C::Occupancy, None, false),
    ("kopt_tiny_step", C::SmallGrid, None, false),
    ("kopt_fma_loop", C::Compute, Some(HotUnit::Fp32), true),
    ("nvjet", C::Compute, Some(HotUnit::Tensor), true),
    ("kopt_gridstride_8blocks", C::SmallGrid, None, false),
];

fn check(d: &Diagnosis) {
    for (name, class, unit, at) in PLANTED {
        let k = d
            .kernels
            .iter()
            .find(|k| k.name.starts_with(name))
            .unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(k.bottleneck.class, *class, "{name}: {}", k.root_cause);
        if let Some(u) = unit {
            assert_eq!(k.bottleneck.unit, Some(*u), "{name}: {}", k.root_cause);
        }
        assert_eq!(k.bottleneck.at_roofline, *at, "{name}: {}", k.root_cause);
    }
}

#[test]
fn raw_page_classes() {
    let d = diagnose("labeled-suite-h100/ncu_raw_base.csv");
    for k in &d.kernels {
        eprintln!(
            "{:40} {:14} {:>6.2}% {}",
            k.short_name,
            k.bottleneck.class.as_str(),
            k.pct_of_total,
            k.root_cause
        );
    }
    for r in &d.recommendations {
        eprintln!(
            "#{} {} {} {:?}",
            r.rank,
            r.id,
            r.kernel_short,
            r.gain.as_ref().map(|g| g.workload_pct)
        );
    }
    eprintln!("{:?}", d.primary);
    check(&d);
}

#[test]
fn auto_units_page_gives_the_same_classes() {
    check(&diagnose("labeled-suite-h100/ncu_raw_auto.csv.gz"));
}

#[test]
fn details_page_classes() {
    let d = diagnose("labeled-suite-h100/ncu_details.csv");
    for k in &d.kernels {
        eprintln!(
            "{:40} {:14} {}",
            k.short_name,
            k.bottleneck.class.as_str(),
            k.root_cause
        );
    }
    check(&d);
}

fn diagnose_run(rel: &str) -> Diagnosis {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel);
    analyze(
        &kopt_ingest::read_run_folder(&dir).unwrap(),
        &AnalyzeOptions::default(),
    )
}

/// `kopt profile`'s passes (timing + targeted), captured on an H200: the
/// same classes as the full captures.
#[test]
fn tiered_profile_passes_give_the_same_classes() {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/labeled-suite-h200-profile");
    let timing = read_ncu_csv(&dir.join("profile_pass1_timing.csv")).unwrap();
    let targeted = read_ncu_csv(&dir.join("profile_pass2_targeted.csv")).unwrap();
    assert_eq!(timing.launches.len(), 212);
    let profile = kopt_ingest::merge_tiered(timing, Some(targeted), None, Vec::new());
    let d = analyze(&profile, &AnalyzeOptions::default());
    for (name, class, _, at) in PLANTED {
        let k = d.kernels.iter().find(|k| k.name.starts_with(name)).unwrap();
        assert_eq!(k.bottleneck.class, *class, "{name}: {}", k.root_cause);
        assert_eq!(k.bottleneck.at_roofline, *at, "{name}");
    }
    // Every launch keeps its own time from the timing pass.
    let tiny = d
        .kernels
        .iter()
        .find(|k| k.name == "kopt_tiny_step")
        .unwrap();
    assert_eq!(tiny.launches, 192);
}

/// ncu spells namespaces differently from run to run (`detail::TensorInfo`
/// vs `cuda::TensorInfo`): the passes must still line up.
#[test]
fn moe_route_run_folder_matches_kernels_across_passes() {
    let d = diagnose_run("moe-route-h200-profile");
    for k in d.kernels.iter().filter(|k| k.pct_of_total > 1.0) {
        assert_ne!(
            k.bottleneck.class,
            C::Unknown,
            "{} lost its counters",
            k.short_name
        );
        assert_eq!(k.bottleneck.class, C::SmallGrid, "{}", k.short_name);
    }
    // The deep pass's rules reached the kernels.
    assert!(d
        .kernels
        .iter()
        .any(|k| k.name.contains("gatherTopK") && k.ncu_disagreement.is_none()));
    let fuse = d
        .recommendations
        .iter()
        .find(|r| r.id == "fuse_or_graph_launches")
        .unwrap();
    // The key insight names what tops the recommendations (the fused tiny
    // kernels, ~83%), not one of them (gatherTopK's own 25.8% before).
    let p = d.primary.as_ref().unwrap();
    assert_eq!(d.recommendations[0].id, "fuse_or_graph_launches");
    assert_eq!(p.component_short, d.recommendations[0].kernel_short);
    assert!(p.insight.contains("83.5%"), "{}", p.insight);
    let g = fuse.gain.as_ref().unwrap();
    assert!(
        g.workload_pct > 75.0 && g.workload_pct < 90.0,
        "{}",
        g.workload_pct
    );
}

/// Without the L1 sector counters the strided gather cannot be told from a
/// bandwidth-bound kernel: the report says so instead of a bare roofline verdict.
#[test]
fn a_gather_without_sector_counters_says_coalescing_was_not_checked() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/labeled-suite-h100/ncu_raw_base.csv");
    let mut profile = merge_profile(vec![("raw".into(), read_ncu_csv(&path).unwrap())]);
    for l in &mut profile.launches {
        let m = &mut l.metrics;
        m.global_ld_sectors = None;
        m.global_st_sectors = None;
        m.global_ld_bytes_requested = None;
        m.global_st_bytes_requested = None;
    }
    let d = analyze(&profile, &AnalyzeOptions::default());
    let k = d
        .kernels
        .iter()
        .find(|k| k.name.starts_with("kopt_gather_strided"))
        .unwrap();
    assert_ne!(k.bottleneck.class, C::Uncoalesced);
    assert!(
        k.root_cause.contains("partial evidence: coalescing"),
        "{}",
        k.root_cause
    );
    assert!(k
        .checks_not_run
        .iter()
        .any(|c| c.starts_with("coalescing: needs the L1 sector counters")));
}

/// A kernel the targeted pass left out says why, with its share and how to include it.
#[test]
fn kernels_left_out_of_the_targeted_pass_say_why() {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/labeled-suite-h200-profile");
    let timing = read_ncu_csv(&dir.join("profile_pass1_timing.csv")).unwrap();
    let mut targeted = read_ncu_csv(&dir.join("profile_pass2_targeted.csv")).unwrap();
    // Leave one kernel out of the targeted pass, as its --profile-top cut would.
    targeted
        .launches
        .retain(|l| !l.name.starts_with("kopt_fma_loop"));
    let profile = kopt_ingest::merge_tiered(timing, Some(targeted), None, Vec::new());
    let d = analyze(&profile, &AnalyzeOptions::default());
    let k = d
        .kernels
        .iter()
        .find(|k| k.name.starts_with("kopt_fma_loop"))
        .unwrap();
    assert_eq!(k.bottleneck.class, C::Unknown);
    assert!(
        k.root_cause.starts_with("Not profiled in depth"),
        "{}",
        k.root_cause
    );
    assert!(k.root_cause.contains("--profile-top") && k.root_cause.contains("--kernel"));
    assert!(k.root_cause.contains(&format!("{:.1}%", k.pct_of_total)));
    assert_eq!(k.checks_not_run.len(), 1);
}

/// cuBLAS's GEMM (`nvjet_*`) runs at its tensor roofline: it keeps the
/// roofline advice in what its caller controls (epilogue fusion, fp8), not
/// the generic library advice about shapes that its own evidence
/// contradicts.
#[test]
fn a_library_gemm_at_the_tensor_roofline_keeps_the_roofline_advice() {
    let d = diagnose("labeled-suite-h100/ncu_raw_base.csv");
    let k = d
        .kernels
        .iter()
        .find(|k| k.name.starts_with("nvjet"))
        .unwrap();
    assert_eq!(
        k.library.as_ref().map(|l| l.library.as_str()),
        Some("cuBLAS")
    );
    let mine: Vec<_> = d
        .recommendations
        .iter()
        .filter(|r| r.kernel == k.name)
        .collect();
    assert_eq!(mine.len(), 1, "{mine:?}");
    let r = mine[0];
    assert_eq!(r.id, "tensor_roofline_do_less");
    assert!(r.title.starts_with("At the tensor roofline"), "{}", r.title);
    for what in ["epilogue", "torch.compile", "cuBLASLt", "fp8"] {
        assert!(r.action.contains(what), "{what}: {}", r.action);
    }
    // Nothing asks to change its code.
    for banned in ["tile", "swizzle", "shared memory", "Autotune"] {
        assert!(!r.action.contains(banned), "{banned}: {}", r.action);
    }
}
