//! Nsight Compute's own rule results, compared with kopt's verdict.
//!
//! Sorting ncu's OPT rules by estimated speedup names the wrong cause for
//! kernels at a roofline (a DRAM-bound copy gets "HighPipeUtilization" and
//! "L2 Compression") and for small grids ("HighPipeUtilization" before
//! "LaunchConfiguration"). kopt reports where the two differ and why.

use kopt_model::{BottleneckClass, KernelLaunch, KernelVerdict, NcuDisagreement, NcuRule};

/// The class an ncu rule points at.
pub fn rule_class(rule: &NcuRule) -> BottleneckClass {
    let d = rule.description.as_str();
    match rule.name.as_str() {
        "LaunchConfiguration" | "SOLBottleneck"
            if d.contains("too small") || d.contains("less than the GPU") =>
        {
            BottleneckClass::SmallGrid
        }
        "LaunchConfiguration" if d.contains("partial wave") => BottleneckClass::PartialWave,
        "LaunchConfiguration" => BottleneckClass::SmallGrid,
        "ThreadDivergence" => BottleneckClass::Divergence,
        "CPIStall" if d.contains("barrier") => BottleneckClass::Sync,
        "TheoreticalOccupancy" | "AchievedOccupancy" => BottleneckClass::Occupancy,
        "SharedMemoryConflicts" | "UncoalescedSharedAccess" => BottleneckClass::BankConflict,
        "UncoalescedGlobalAccess" | "MemoryCacheAccessPattern" => BottleneckClass::Uncoalesced,
        "HighPipeUtilization" if d.contains("under-utilized") => BottleneckClass::Latency,
        "HighPipeUtilization" | "FPInstructions" => BottleneckClass::Compute,
        "MemoryL2Compression" | "SOLBottleneck" if d.contains("Memory is more heavily") => {
            BottleneckClass::Memory
        }
        "MemoryL2Compression" => BottleneckClass::Memory,
        "CPIStall" | "IssueSlotUtilization" => BottleneckClass::Latency,
        "WorkloadImbalance" => BottleneckClass::Balanced,
        _ => BottleneckClass::Latency,
    }
}

/// ncu's top OPT rule by estimated speedup over the kernel's launches.
pub fn top_rule<'a>(launches: &[&'a KernelLaunch]) -> Option<&'a NcuRule> {
    launches
        .iter()
        .flat_map(|l| l.ncu_rules.iter())
        .filter(|r| r.kind == "OPT" && r.estimated_speedup_pct.is_some())
        .max_by(|a, b| {
            a.estimated_speedup_pct
                .unwrap_or(0.0)
                .total_cmp(&b.estimated_speedup_pct.unwrap_or(0.0))
        })
}

/// Where ncu's top rule names another class than kopt's verdict on the same
/// launches: the rule and why kopt differs. Takes the launches and the
/// verdict, not the roll-up's group, so this module does not import it back.
pub fn disagreement(launches: &[&KernelLaunch], v: &KernelVerdict) -> Option<NcuDisagreement> {
    let rule = top_rule(launches)?;
    let ncu_class = rule_class(rule);
    let kopt = v.bottleneck.class;
    if kopt == BottleneckClass::Unknown {
        return None;
    }
    let same = ncu_class == kopt
        // "All pipes under-utilized" on a small grid is the same diagnosis in other words.
        || (kopt == BottleneckClass::SmallGrid && ncu_class == BottleneckClass::Latency && rule.name != "CPIStall");
    if same {
        return None;
    }
    let why = if v.bottleneck.at_roofline {
        format!(
            "the kernel runs at {:.0}% of its {} roofline; ncu's {} estimate ({}) assumes another unit could speed it up, but the limiting unit is already saturated: move fewer bytes or do less work instead",
            v.bottleneck.unit_pct.unwrap_or(0.0),
            v.bottleneck.unit.map_or("", |u| u.as_str()),
            rule.name,
            if rule.speedup_type.is_empty() { "unscoped" } else { rule.speedup_type.as_str() },
        )
    } else {
        match kopt {
            BottleneckClass::SmallGrid => "the grid does not fill one wave of the GPU; until it does, pipe utilisation and stall figures describe a few busy SMs, not the kernel's limit".to_string(),
            BottleneckClass::Uncoalesced => "most sectors the kernel moves are wasted: fix the access pattern first, every other memory figure improves with it".to_string(),
            BottleneckClass::BankConflict => "shared-memory bank conflicts serialise the L1/shared pipe, which is the busiest unit; DRAM is far from its peak".to_string(),
            BottleneckClass::Occupancy => "too few warps are resident to hide latency; the occupancy limiter is the root cause of the stalls ncu ranks".to_string(),
            BottleneckClass::Divergence => "most lanes of each issued instruction are idle: pipe utilisation counts issued instructions, the useful work is a fraction of it".to_string(),
            BottleneckClass::Atomics => "the warps wait on atomics or reductions that serialise in L2; the pipes and bandwidth look idle because the atomic unit works one address at a time".to_string(),
            BottleneckClass::Sync => "warps spend most stall cycles at barriers; the SM throughput figure is not work on a pipe".to_string(),
            BottleneckClass::PartialWave => "the last wave of blocks runs on a few SMs while the rest idle; ncu's occupancy and imbalance rules describe the same launch shape".to_string(),
            _ => format!(
                "kopt ranks by the limiting unit (SM {:.0}%, memory {:.0}%); ncu's rule estimates are independent upper bounds",
                v.compute_sol_pct.unwrap_or(0.0),
                v.memory_sol_pct.unwrap_or(0.0)
            ),
        }
    };
    Some(NcuDisagreement {
        ncu_rule: rule.name.clone(),
        ncu_speedup_pct: rule.estimated_speedup_pct,
        ncu_speedup_type: rule.speedup_type.clone(),
        ncu_class,
        why_kopt_differs: why,
    })
}
