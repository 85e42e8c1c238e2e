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
    check(&diagnose("labeled-suite-h100/ncu_raw_auto.csv"));
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
