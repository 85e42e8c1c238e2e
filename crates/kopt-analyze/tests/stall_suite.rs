//! The stall suite (issue #29): CUDA kernels each slow for one planted
//! reason, captured on an H100 (`fixtures/stall-suite-h100/`). Every page
//! kopt reads names each kernel's cause: `kopt profile`'s run folder (the
//! default passes), `ncu --set full` as raw and details pages, and ncu's
//! basic set where its few counters can tell.

use std::path::PathBuf;

use kopt_analyze::{analyze, AnalyzeOptions};
use kopt_ingest::{merge_profile, read_ncu_csv};
use kopt_model::{BottleneckClass as C, Diagnosis, HotUnit, KernelVerdict};

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/stall-suite-h100")
        .join(rel)
}

fn diagnose(rel: &str) -> Diagnosis {
    let file = read_ncu_csv(&fixture(rel)).unwrap();
    analyze(
        &merge_profile(vec![(rel.to_string(), file)]),
        &AnalyzeOptions::default(),
    )
}

fn diagnose_run() -> Diagnosis {
    analyze(
        &kopt_ingest::read_run_folder(&fixture("profile")).unwrap(),
        &AnalyzeOptions::default(),
    )
}

fn kernel<'a>(d: &'a Diagnosis, name: &str) -> &'a KernelVerdict {
    d.kernels
        .iter()
        .find(|k| k.name.starts_with(name))
        .unwrap_or_else(|| panic!("{name} missing"))
}

/// The class each page must give each kernel, and the hot unit where one is
/// named. Planted: one active lane per warp; a barrier after every tiny
/// step; every thread's atomicAdd into 64 counters; a __sinf/__expf/rsqrtf
/// loop; 133 blocks on 132 SMs at 1 block/SM; a pointer chase on 132 small
/// blocks (3% of a wave: kopt says small grid and names the latency as a
/// finding); a 32x32 shared transpose without padding.
const FULL: &[(&str, C, Option<HotUnit>)] = &[
    ("stall_divergent", C::Divergence, None),
    ("stall_barrier", C::Sync, None),
    ("stall_atomic", C::Atomics, None),
    ("stall_xu", C::Compute, Some(HotUnit::Xu)),
    ("stall_tail", C::PartialWave, None),
    ("stall_chase", C::SmallGrid, None),
    ("stall_transpose_bank", C::BankConflict, None),
];

fn check(d: &Diagnosis, expected: &[(&str, C, Option<HotUnit>)], page: &str) {
    for (name, class, unit) in expected {
        let k = kernel(d, name);
        assert_eq!(
            k.bottleneck.class, *class,
            "{page} {name}: {}",
            k.root_cause
        );
        if unit.is_some() {
            assert_eq!(k.bottleneck.unit, *unit, "{page} {name}: {}", k.root_cause);
        }
    }
}

#[test]
fn kopt_profile_run_folder_names_every_cause() {
    let d = diagnose_run();
    show(&d);
    check(&d, FULL, "profile");
}

#[test]
fn full_set_raw_page_names_every_cause() {
    check(&diagnose("full_raw.csv.gz"), FULL, "full raw");
}

#[test]
fn full_set_details_page_names_every_cause() {
    check(&diagnose("full_details.csv"), FULL, "full details");
}

/// ncu's basic set has no stall, lane or conflict counters: the causes its
/// pipe, L2-atomic and L1-bank utilisation can show are named; divergence
/// and barriers cannot be seen there (a check says what is missing).
#[test]
fn basic_set_raw_page_names_what_its_counters_show() {
    let d = diagnose("basic_raw.csv");
    check(
        &d,
        &[
            ("stall_atomic", C::Atomics, None),
            ("stall_xu", C::Compute, Some(HotUnit::Xu)),
            ("stall_tail", C::PartialWave, None),
            ("stall_chase", C::SmallGrid, None),
            ("stall_transpose_bank", C::BankConflict, None),
        ],
        "basic raw",
    );
    // The barrier kernel's 91% SM throughput is no pipe's work: not a roofline.
    let k = kernel(&d, "stall_barrier");
    assert!(!k.bottleneck.at_roofline, "{}", k.root_cause);
    assert!(k
        .checks_not_run
        .iter()
        .any(|c| c.starts_with("warp stall reasons")));
}

/// The basic details page has only speed of light, launch and occupancy.
#[test]
fn basic_set_details_page_names_the_launch_shape_causes() {
    check(
        &diagnose("basic_details.csv"),
        &[
            ("stall_tail", C::PartialWave, None),
            ("stall_chase", C::SmallGrid, None),
        ],
        "basic details",
    );
}

/// "At roofline" only when the useful work is near peak: the divergent
/// kernel's FMA pipe is 95% busy with 1 lane in 32 doing work.
#[test]
fn a_divergent_kernel_is_not_at_its_roofline() {
    for d in [diagnose_run(), diagnose("full_details.csv")] {
        let k = kernel(&d, "stall_divergent");
        assert!(!k.bottleneck.at_roofline);
        assert!(
            k.root_cause.contains("1.1 of 32 lanes active"),
            "{}",
            k.root_cause
        );
        let r = d
            .recommendations
            .iter()
            .find(|r| r.kernel == k.name)
            .unwrap();
        assert_eq!(r.id, "regroup_divergent_work");
        assert!(
            r.action
                .starts_with("1 of 32 lanes active: regroup work so a warp takes one path"),
            "{}",
            r.action
        );
        // Gain: useful / issued lane slots.
        let g = r.gain.as_ref().unwrap();
        assert!(g.kernel_pct > 90.0, "{}", g.kernel_pct);
    }
}

/// Each cause comes with its fix and a gain model.
#[test]
fn every_cause_has_its_fix() {
    let d = diagnose_run();
    for (name, id) in [
        ("stall_divergent", "regroup_divergent_work"),
        ("stall_barrier", "reduce_synchronisation"),
        ("stall_atomic", "privatise_atomics"),
        ("stall_xu", "cut_transcendentals"),
        ("stall_tail", "whole_waves"),
        ("stall_transpose_bank", "pad_or_swizzle_shared"),
    ] {
        let k = kernel(&d, name);
        let r = d
            .recommendations
            .iter()
            .find(|r| r.kernel == k.name)
            .unwrap_or_else(|| panic!("{name}: no recommendation"));
        assert_eq!(r.id, id, "{name}");
        if id != "cut_transcendentals" {
            // At the XU roofline the gain is "do less", with no figure.
            assert!(r.gain.is_some(), "{name}: no gain");
        }
    }
    let tail = kernel(&d, "stall_tail");
    let r = d
        .recommendations
        .iter()
        .find(|r| r.kernel == tail.name)
        .unwrap();
    assert!(
        r.action.contains("132 blocks here: 132 SMs x 1 per SM"),
        "{}",
        r.action
    );
    let g = r.gain.as_ref().unwrap();
    assert!((g.kernel_pct - 49.6).abs() < 1.0, "{}", g.kernel_pct);
}

/// The per-kernel evidence: stall breakdown, pipes, lanes, atomics, waves.
#[test]
fn evidence_is_reported_per_kernel() {
    let d = diagnose_run();
    let e = |name: &str| kernel(&d, name).evidence.clone().unwrap();
    let barrier = e("stall_barrier");
    assert_eq!(barrier.stalls[0].reason, kopt_model::StallReason::Barrier);
    assert!((barrier.stalls[0].share_pct - 51.6).abs() < 1.0);
    assert!(e("stall_divergent").active_threads_per_inst.unwrap() < 1.2);
    assert!(e("stall_divergent").divergent_branches.unwrap() > 0.0);
    assert!(e("stall_atomic").l2_atomic_sectors.unwrap() > 1e6);
    assert_eq!(e("stall_xu").pipes[0].pipe, HotUnit::Xu);
    let tail = e("stall_tail");
    assert!((tail.waves.unwrap() - 133.0 / 132.0).abs() < 1e-6);
    assert!(tail.last_wave_fill_pct.unwrap() < 1.0);
}

/// ncu's rules on the full capture name causes: kopt names every one of
/// them too, as its class or a finding. Rules left out: generic ones that
/// name no cause (achieved occupancy, issue slots, all pipes under-used,
/// workload imbalance, L2 compression, speed of light) and those under 5%.
#[test]
fn kopt_names_every_cause_ncu_names() {
    let d = diagnose("full_details.csv");
    let generic = [
        "AchievedOccupancy",
        "IssueSlotUtilization",
        "WorkloadImbalance",
        "MemoryL2Compression",
        "SOLBottleneck",
        "FPInstructions",
    ];
    let file = read_ncu_csv(&fixture("full_details.csv")).unwrap();
    for l in &file.launches {
        let k = d.kernels.iter().find(|k| k.name == l.name).unwrap();
        let named: Vec<C> = std::iter::once(k.bottleneck.class)
            .chain(k.findings.iter().map(|f| f.class))
            .collect();
        for r in &l.ncu_rules {
            let under = r.name == "HighPipeUtilization" && r.description.contains("under-utilized");
            if r.kind != "OPT"
                || generic.contains(&r.name.as_str())
                || under
                || r.estimated_speedup_pct.is_none_or(|p| p < 5.0)
            {
                continue;
            }
            let class = kopt_analyze::ncu_rules::rule_class(r);
            assert!(
                named.contains(&class),
                "{}: ncu's {} ({:?}) not named by kopt: {:?} / {}",
                k.short_name,
                r.name,
                class,
                named,
                k.root_cause
            );
        }
    }
}

fn show(d: &Diagnosis) {
    for k in &d.kernels {
        eprintln!(
            "{:22} {:13} {:?} {:?} roof={} | {}",
            k.short_name,
            k.bottleneck.class.as_str(),
            k.bottleneck.unit,
            k.bottleneck.unit_pct.map(|p| p.round()),
            k.bottleneck.at_roofline,
            k.root_cause
        );
        for f in &k.findings {
            eprintln!("      + {} {}", f.class.as_str(), f.evidence);
        }
        if let Some(n) = &k.ncu_disagreement {
            eprintln!(
                "      ncu {} ({:?}): {}",
                n.ncu_rule, n.ncu_class, n.why_kopt_differs
            );
        }
    }
}

/// #23: bank conflicts first on every page size. The labeled suite's
/// unpadded transpose (97% of shared wavefronts in conflicts) cut down to
/// 16 metrics without the L1 throughput counter was `memory:dram`: its
/// "memory throughput 89%" is the shared pipe.
#[test]
fn bank_conflicts_first_with_only_sixteen_metrics() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/labeled-suite-h100/ncu_raw_base.csv");
    let mut profile = merge_profile(vec![("raw".into(), read_ncu_csv(&path).unwrap())]);
    for l in &mut profile.launches {
        let m = &l.metrics;
        l.metrics = kopt_model::Metrics {
            duration_ns: m.duration_ns,
            sm_clock_hz: m.sm_clock_hz,
            sm_pct: m.sm_pct,
            memory_pct: m.memory_pct,
            dram_pct: m.dram_pct,
            dram_bytes_read: m.dram_bytes_read,
            dram_bytes_write: m.dram_bytes_write,
            grid_size: m.grid_size,
            block_size: m.block_size,
            registers_per_thread: m.registers_per_thread,
            waves_per_sm: m.waves_per_sm,
            sm_count: m.sm_count,
            shared_ld_conflicts: m.shared_ld_conflicts,
            shared_st_conflicts: m.shared_st_conflicts,
            shared_ld_wavefronts: m.shared_ld_wavefronts,
            shared_st_wavefronts: m.shared_st_wavefronts,
            ..Default::default()
        };
    }
    let d = analyze(&profile, &AnalyzeOptions::default());
    let k = kernel(&d, "kopt_transpose_smem_naive");
    assert_eq!(k.bottleneck.class, C::BankConflict, "{}", k.root_cause);
    assert!(
        !k.findings.iter().any(|f| f.class == C::BankConflict),
        "not demoted to a finding"
    );
    // Its padded twin has no conflicts and stays DRAM-bound.
    let p = kernel(&d, "kopt_transpose_smem_padded");
    assert_eq!(p.bottleneck.class, C::Memory, "{}", p.root_cause);
    // The stall suite's transpose on every page it was captured in.
    for page in ["full_raw.csv.gz", "full_details.csv", "basic_raw.csv"] {
        let d = diagnose(page);
        let k = kernel(&d, "stall_transpose_bank");
        assert_eq!(
            k.bottleneck.class,
            C::BankConflict,
            "{page}: {}",
            k.root_cause
        );
    }
}
