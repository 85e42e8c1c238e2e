//! Eager elementwise chains: PyTorch runs each elementwise or reduction op
//! as its own kernel over the whole tensor, so a chain of them (the pieces
//! of a GELU, a residual add and a cast) reads and writes the tensor once
//! per op. One finding adds them up and estimates what fusing each chain
//! into one pass would save.

use std::collections::HashMap;

use kopt_model::{BottleneckClass, Dim3, KernelLaunch, OpShare, Recommendation};

use crate::rollup::KernelGroup;

pub const ID: &str = "fuse_eager_elementwise";

/// A member launch longer than this is not "small": one elementwise pass
/// of a millisecond moves gigabytes, and fusing it is a design question
/// rather than launch bookkeeping.
pub const SMALL_POINTWISE_NS: f64 = 1e6;

/// The kernel groups the finding covers: PyTorch's eager elementwise and
/// reduction kernels, memory- or latency-class (or of unknown class: a
/// timeline), each launch small. Tiny launches are left to the
/// launch-overhead finding.
pub fn members(groups: &[KernelGroup]) -> Vec<String> {
    groups
        .iter()
        .filter(|g| !g.tiny)
        .filter(|g| {
            g.verdict
                .library
                .as_ref()
                .is_some_and(crate::library::is_eager_pointwise)
        })
        .filter(|g| {
            matches!(
                g.verdict.bottleneck.class,
                BottleneckClass::Memory
                    | BottleneckClass::Latency
                    | BottleneckClass::Unknown
                    | BottleneckClass::Balanced
            )
        })
        .filter(|g| g.verdict.mean_ns < SMALL_POINTWISE_NS)
        .map(|g| g.verdict.name.clone())
        .collect()
}

/// One chain: consecutive member launches on one stream over the same size.
struct Chain {
    launches: usize,
    now_ns: f64,
    /// The heaviest member by DRAM bytes, (bytes, its time); None where a
    /// member has no byte counters.
    heaviest: Option<(f64, f64)>,
    /// The longest member launch.
    max_ns: f64,
    /// Grid and block of its launches: ATen sizes an elementwise kernel's
    /// grid from the tensor, so launches of one size work on tensors of one
    /// size.
    size: (Dim3, Dim3),
}

/// A fused pass takes at least this share of its chain's longest member:
/// a member that moved few or no DRAM bytes (L2-resident data) is not made
/// free by fusing, and a fused kernel still launches, reads and writes.
const MIN_PASS_SHARE: f64 = 0.25;

/// A fused chain takes at least this share of the chain's measured time.
const MIN_CHAIN_SHARE: f64 = 0.1;

/// Fused-time model of one chain: one read of its inputs and one write of
/// its output is what its heaviest member already moves. With DRAM bytes
/// from counters, that member's bytes at the achievable bandwidth (its
/// measured time scaled by its DRAM throughput against the attainable
/// one); without, the longest member's measured time. Floors: a quarter of
/// the longest member, a tenth of the chain. Pessimistic end: twice that
/// (a second input, e.g. a residual, read from memory). Never above the
/// chain's time.
fn fused_ns(c: &Chain, achievable_bw: Option<f64>) -> (f64, f64) {
    let pass = match (c.heaviest, achievable_bw) {
        (Some((b, _)), Some(bw)) if bw > 0.0 && b.is_finite() => b / bw * 1e9,
        _ => c.max_ns,
    };
    let base = pass
        .max(MIN_PASS_SHARE * c.max_ns)
        .max(MIN_CHAIN_SHARE * c.now_ns);
    (base.min(c.now_ns), (2.0 * base).min(c.now_ns))
}

/// Whether a launch's size is known: a grid and block were recorded.
fn known_size(l: &KernelLaunch) -> bool {
    l.grid.product() > 0 && l.block.product() > 0
}

/// The finding over the member kernels, None when no chain of two or more
/// launches exists. `ops` is the op attribution per kernel name, when the
/// timeline had op ranges.
pub fn recommend(
    launches: &[KernelLaunch],
    members: &[String],
    total_ns: f64,
    peak_dram: Option<f64>,
    ops: Option<&HashMap<String, Vec<OpShare>>>,
) -> Option<Recommendation> {
    if members.is_empty() || total_ns <= 0.0 {
        return None;
    }
    let achievable_bw = peak_dram.map(|p| p * crate::rules::ATTAINABLE_PCT / 100.0);
    let is_member: std::collections::HashSet<&str> = members.iter().map(String::as_str).collect();
    let mut order: Vec<&KernelLaunch> = launches.iter().collect();
    order.sort_by_key(|l| l.id);
    // Open chain per stream; a launch of any other kernel on the stream ends it.
    let mut open: HashMap<Option<u64>, Chain> = HashMap::new();
    let mut done: Vec<Chain> = Vec::new();
    for l in order {
        let d = l.metrics.duration_ns.unwrap_or(0.0);
        if !is_member.contains(l.name.as_str()) {
            if let Some(c) = open.remove(&l.stream) {
                done.push(c);
            }
            continue;
        }
        let bytes = l
            .metrics
            .dram_bytes_read
            .map(|r| r + l.metrics.dram_bytes_write.unwrap_or(0.0));
        // A launch over another size (another tensor: a per-parameter loop
        // of an optimizer, casts of many weights), or of unknown size, ends
        // the chain: fusing runs of different tensors saves no pass.
        let size = (l.grid, l.block);
        if open
            .get(&l.stream)
            .is_some_and(|c| c.size != size || !known_size(l))
        {
            done.extend(open.remove(&l.stream));
        }
        let c = open.entry(l.stream).or_insert(Chain {
            launches: 0,
            now_ns: 0.0,
            heaviest: Some((0.0, 0.0)),
            max_ns: 0.0,
            size,
        });
        c.launches += 1;
        c.now_ns += d;
        c.max_ns = c.max_ns.max(d);
        c.heaviest = match (c.heaviest, bytes) {
            (Some(h), Some(b)) if b > h.0 || c.launches == 1 => Some((b, d)),
            (Some(h), Some(_)) => Some(h),
            _ => None,
        };
    }
    done.extend(open.into_values());
    let chains: Vec<&Chain> = done.iter().filter(|c| c.launches >= 2).collect();
    if chains.is_empty() {
        return None;
    }
    let member_ns: f64 = done.iter().map(|c| c.now_ns).sum();
    let chained_ns: f64 = chains.iter().map(|c| c.now_ns).sum();
    let chained_launches: usize = chains.iter().map(|c| c.launches).sum();
    let (mut fused, mut fused_low) = (0.0, 0.0);
    for c in &chains {
        let (e, p) = fused_ns(c, achievable_bw);
        fused += e;
        fused_low += p;
    }
    let saved = (chained_ns - fused).max(0.0);
    let saved_low = (chained_ns - fused_low).max(0.0);
    // Nothing saved, or a model that would save all of the kernel time: no
    // finding (never an infinite or undefined speed-up).
    if !(saved > 0.0 && total_ns - saved > 0.0 && saved.is_finite()) {
        return None;
    }
    let bytes_model = chains.iter().all(|c| c.heaviest.is_some()) && achievable_bw.is_some();
    let fmt = kopt_model::format_duration_ns;
    let per_pass = if bytes_model {
        format!(
            "the heaviest member's DRAM bytes (from counters) at {:.0}% of the DRAM peak ({:.2} TB/s)",
            crate::rules::ATTAINABLE_PCT,
            achievable_bw.unwrap_or(0.0) / 1e12
        )
    } else {
        "the longest member's measured time (no DRAM byte counters: it already reads the chain's input once and writes one output)".to_string()
    };
    let model = format!(
        "chains = consecutive launches of PyTorch's elementwise/reduction kernels on one stream over the same size (grid and block); a fused chain moves one read of its inputs and one write of its output: {per_pass}, at least {:.0}% of its longest member and {:.0}% of the chain; speed-up = kernel time / (kernel time - saved); low: twice that per chain (a second input such as a residual read from memory)",
        100.0 * MIN_PASS_SHARE,
        100.0 * MIN_CHAIN_SHARE
    );
    let op_names = ops_behind(members, ops);
    let named = if op_names.is_empty() {
        String::new()
    } else {
        format!(" (ops: {})", op_names.join(", "))
    };
    let fused_ops = fused_op_hints(&op_names);
    let shorts: Vec<String> = members
        .iter()
        .map(|m| kopt_model::kernel_short_name(m))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let low = total_ns / (total_ns - saved_low);
    let (gain, speedup) = crate::gain::saved_time_gain(
        saved,
        total_ns,
        100.0 * saved / member_ns.max(1.0),
        low,
        model,
    );
    let predicted = crate::gain::kernel_time_speedup_words(&speedup);
    Some(Recommendation {
        rank: 0,
        id: ID.into(),
        title: "Fuse the eager elementwise chains (torch.compile or fused ops)".into(),
        kernel: members.join(" | "),
        kernel_short: format!(
            "{} elementwise kernel{}",
            members.len(),
            if members.len() == 1 { "" } else { "s" }
        ),
        class: BottleneckClass::Memory,
        evidence: format!(
            "{} ({}){named} take{} {} ({:.1}% of kernel time); {chained_launches} launches run in {} chain{} of two or more back to back ({}), each reading and writing whole tensors that the next one reads again",
            if members.len() == 1 {
                "One of PyTorch's elementwise/reduction kernels".to_string()
            } else {
                format!("{} of PyTorch's elementwise/reduction kernels", members.len())
            },
            shorts.join(", "),
            if members.len() == 1 { "s" } else { "" },
            fmt(member_ns),
            100.0 * member_ns / total_ns,
            chains.len(),
            if chains.len() == 1 { "" } else { "s" },
            fmt(chained_ns),
        ),
        action: format!(
            "Compile the model or block with torch.compile so each chain becomes one kernel that reads its inputs once and writes one output{fused_ops}. Predicted: {} -> {} for these chains, {predicted}.",
            fmt(chained_ns),
            fmt(fused),
        ),
        source: "operator fusion: one pass over memory instead of one per op (torch.compile / Inductor, fused PyTorch ops)".into(),
        gain: Some(gain),
        predicted_speedup: Some(speedup),
    })
}

/// The ops behind the member kernels, most launches first.
pub(crate) fn ops_behind<'a>(
    members: &[String],
    ops: Option<&'a HashMap<String, Vec<OpShare>>>,
) -> Vec<&'a str> {
    let mut op_launches: HashMap<&str, u64> = HashMap::new();
    if let Some(by_kernel) = ops {
        for m in members {
            for s in by_kernel.get(m).map(Vec::as_slice).unwrap_or_default() {
                *op_launches.entry(s.op.as_str()).or_default() += s.launches;
            }
        }
    }
    let mut op_list: Vec<(&str, u64)> = op_launches.into_iter().collect();
    op_list.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    op_list.into_iter().map(|(o, _)| o).collect()
}

/// Fused PyTorch ops that replace common eager chains, named from the ops seen.
pub(crate) fn fused_op_hints(ops: &[&str]) -> String {
    let has = |o: &str| ops.contains(&o);
    let mut hints = Vec::new();
    if has("aten::tanh") && has("aten::pow") && has("aten::mul") {
        hints.push("F.gelu(x, approximate=\"tanh\") in place of the tanh GELU written out (aten::pow, aten::tanh, aten::mul, aten::add)");
    }
    if has("aten::sigmoid") && has("aten::mul") {
        hints.push("F.silu in place of x * sigmoid(x)");
    }
    if has("aten::rsqrt") && (has("aten::mean") || has("aten::pow")) {
        hints.push("F.rms_norm / nn.RMSNorm in place of an RMS norm written out");
    }
    if has("aten::softmax") || has("aten::_softmax") {
        hints.push("F.scaled_dot_product_attention where the softmax is attention's");
    }
    if hints.is_empty() {
        String::new()
    } else {
        format!("; or use fused ops: {}", hints.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kopt_model::{Dim3, Metrics};

    fn launch(id: u64, name: &str, ns: f64, bytes: Option<f64>) -> KernelLaunch {
        KernelLaunch {
            id,
            name: name.into(),
            grid: Dim3 {
                x: 1000,
                y: 1,
                z: 1,
            },
            block: Dim3 { x: 128, y: 1, z: 1 },
            stream: Some(7),
            metrics: Metrics {
                duration_ns: Some(ns),
                dram_bytes_read: bytes.map(|b| b / 2.0),
                dram_bytes_write: bytes.map(|b| b / 2.0),
                ..Default::default()
            },
            ncu_rules: Vec::new(),
        }
    }

    // Synthetic: a GEMM, then three elementwise kernels back to back, then a
    // GEMM, then one lone elementwise kernel (a chain of one fuses nothing).
    fn sequence(bytes: bool) -> Vec<KernelLaunch> {
        let b = |x: f64| bytes.then_some(x);
        vec![
            launch(0, "gemm", 100_000.0, None),
            launch(1, "ew_a", 10_000.0, b(40e6)),
            launch(2, "ew_b", 20_000.0, b(80e6)),
            launch(3, "ew_c", 10_000.0, b(40e6)),
            launch(4, "gemm", 100_000.0, None),
            launch(5, "ew_a", 10_000.0, b(40e6)),
        ]
    }

    fn members() -> Vec<String> {
        vec!["ew_a".into(), "ew_b".into(), "ew_c".into()]
    }

    #[test]
    fn a_chain_is_fused_to_its_heaviest_pass_without_counters() {
        let l = sequence(false);
        let total: f64 = l.iter().map(|x| x.metrics.duration_ns.unwrap()).sum();
        let r = recommend(&l, &members(), total, Some(4e12), None).unwrap();
        let g = r.gain.unwrap();
        // Chain 1: 40 us now, 20 us fused (its heaviest member); the lone launch is not a chain.
        assert!((g.saved_ns - 20_000.0).abs() < 1e-6, "{}", g.saved_ns);
        let sp = r.predicted_speedup.unwrap();
        assert!((sp.estimate - total / (total - 20_000.0)).abs() < 1e-9);
        // Pessimistic end: twice the heaviest pass, 40 us: nothing saved.
        assert!((sp.low - 1.0).abs() < 1e-9, "{}", sp.low);
        assert!(r.evidence.contains("in 1 chain of"), "{}", r.evidence);
    }

    #[test]
    fn with_counters_the_fused_pass_runs_at_the_achievable_bandwidth() {
        let l = sequence(true);
        let total: f64 = l.iter().map(|x| x.metrics.duration_ns.unwrap()).sum();
        let peak = 4e12;
        let r = recommend(&l, &members(), total, Some(peak), None).unwrap();
        let fused = 80e6 / (peak * crate::rules::ATTAINABLE_PCT / 100.0) * 1e9;
        let g = r.gain.unwrap();
        assert!(
            (g.saved_ns - (40_000.0 - fused)).abs() < 1e-6,
            "{}",
            g.saved_ns
        );
        assert!(g.method.contains("DRAM bytes"), "{}", g.method);
        // Bounded by the members' share.
        assert!(g.workload_pct <= 100.0 * 50_000.0 / total);
    }

    #[test]
    fn another_kernel_between_breaks_the_chain_and_streams_are_apart() {
        let mut l = sequence(false);
        l[2].name = "softmax_user".into();
        let total: f64 = l.iter().map(|x| x.metrics.duration_ns.unwrap()).sum();
        assert!(recommend(&l, &members(), total, None, None).is_none());
        // Two launches on different streams do not chain.
        let mut l = vec![launch(0, "ew_a", 1e4, None), launch(1, "ew_b", 1e4, None)];
        l[1].stream = Some(8);
        assert!(recommend(&l, &members(), 2e4, None, None).is_none());
    }

    #[test]
    fn members_without_dram_bytes_are_not_fused_to_nothing() {
        // Synthetic: L2-resident members, counters say 0 DRAM bytes. The
        // fused pass is floored at a quarter of the longest member (and a
        // tenth of the chain), never 0 ns: the speed-up stays finite.
        let mut l = sequence(true);
        for x in &mut l[1..] {
            x.metrics.dram_bytes_read = Some(0.0);
            x.metrics.dram_bytes_write = Some(0.0);
        }
        let total: f64 = l.iter().map(|x| x.metrics.duration_ns.unwrap()).sum();
        let r = recommend(&l, &members(), total, Some(4e12), None).unwrap();
        let g = r.gain.unwrap();
        // Chain of 40 us, longest member 20 us: fused 5 us, saved 35 us.
        assert!((g.saved_ns - 35_000.0).abs() < 1e-6, "{}", g.saved_ns);
        let sp = r.predicted_speedup.unwrap();
        assert!(sp.estimate.is_finite() && sp.low.is_finite());
        assert!(
            !r.action.contains("inf") && !r.action.contains("NaN"),
            "{}",
            r.action
        );
        // A chain that is all of the kernel time still leaves its fused pass.
        let only = &l[1..4];
        let total: f64 = only.iter().map(|x| x.metrics.duration_ns.unwrap()).sum();
        let r = recommend(only, &members(), total, Some(4e12), None).unwrap();
        let sp = r.predicted_speedup.unwrap();
        assert!(
            sp.estimate.is_finite() && sp.estimate > 1.0,
            "{}",
            sp.estimate
        );
        // No time at all: no finding rather than 0/0.
        let mut zero = only.to_vec();
        for x in &mut zero {
            x.metrics.duration_ns = Some(0.0);
        }
        assert!(recommend(&zero, &members(), 1.0, Some(4e12), None).is_none());
    }

    #[test]
    fn launches_over_different_sizes_are_separate_chains() {
        // Synthetic: a non-foreach optimizer step, one elementwise launch per
        // parameter and each parameter of its own size: nothing to fuse.
        let mut l: Vec<KernelLaunch> = (0..8)
            .map(|i| {
                let mut x = launch(i, "ew_a", 10_000.0, None);
                x.grid.x = 100 + i as u32;
                x
            })
            .collect();
        assert!(recommend(&l, &members(), 80_000.0, None, None).is_none());
        // Two ops per parameter on the same tensor: 8 chains of 2.
        l = (0..16)
            .map(|i| {
                let mut x = launch(i, if i % 2 == 0 { "ew_a" } else { "ew_b" }, 10_000.0, None);
                x.grid.x = 100 + (i / 2) as u32;
                x
            })
            .collect();
        let r = recommend(&l, &members(), 160_000.0, None, None).unwrap();
        assert!(r.evidence.contains("in 8 chains"), "{}", r.evidence);
        let g = r.gain.unwrap();
        assert!((g.saved_ns - 80_000.0).abs() < 1e-6, "{}", g.saved_ns);
        // Launches of unknown size do not chain.
        let mut l = sequence(false);
        for x in &mut l {
            x.grid = Dim3::default();
        }
        let total: f64 = l.iter().map(|x| x.metrics.duration_ns.unwrap()).sum();
        assert!(recommend(&l, &members(), total, None, None).is_none());
    }

    #[test]
    fn one_member_kernel_is_said_in_the_singular() {
        // Synthetic: one kernel launched three times back to back.
        let l: Vec<_> = (0..3).map(|i| launch(i, "ew_a", 10_000.0, None)).collect();
        let r = recommend(&l, &["ew_a".to_string()], 30_000.0, None, None).unwrap();
        assert_eq!(r.kernel_short, "1 elementwise kernel");
        assert!(
            r.evidence
                .starts_with("One of PyTorch's elementwise/reduction kernels (ew_a) takes "),
            "{}",
            r.evidence
        );
    }

    #[test]
    fn known_chains_name_their_fused_op() {
        let hint = fused_op_hints(&["aten::mul", "aten::pow", "aten::tanh", "aten::add"]);
        assert!(hint.contains("F.gelu"), "{hint}");
        assert_eq!(fused_op_hints(&["aten::add"]), "");
    }
}
