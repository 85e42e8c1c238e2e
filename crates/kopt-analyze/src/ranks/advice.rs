//! Changes for a distributed step, each priced from the traces: what
//! time it takes off the step the job pays (the slowest rank's), with a
//! range for what the model cannot see.

use kopt_model::{CollectiveOp, PredictedSpeedup, RankAdvice};

use super::cross::Matched;
use super::profile::RankProfile;

/// DDP's default bucket, bytes (`bucket_cap_mb=25`).
const DDP_BUCKET_BYTES: f64 = 25.0 * 1024.0 * 1024.0;
/// A step's share below which an exposed cost is not worth a finding.
const MIN_SHARE: f64 = 0.03;

/// What the findings read: per step, on the reference rank (the one that
/// waits least, whose collectives are mostly transfer, not wait).
pub struct StepView<'a> {
    pub step_ns: f64,
    pub steps: f64,
    pub reference: &'a RankProfile,
    pub matched: &'a [Matched],
    /// Index of the reference profile.
    pub reference_at: usize,
    /// The GPU's link to its peers, bytes/s one way ([`super::link_peak`]).
    pub link_bytes_per_s: f64,
}

impl StepView<'_> {
    fn per_step(&self, total: f64) -> f64 {
        total / self.steps
    }

    /// The reference rank's exposed time of one op, per step.
    fn exposed(&self, op: CollectiveOp) -> f64 {
        self.per_step(
            self.reference
                .collectives
                .iter()
                .filter(|c| c.op == op)
                .map(|c| c.exposed_ns as f64)
                .sum(),
        )
    }

    /// (transfer ns, bytes) of each matched launch of `op`.
    fn transfers(&self, op: CollectiveOp) -> Vec<(f64, Option<u64>)> {
        self.matched
            .iter()
            .filter(|m| m.op == op)
            .map(|m| {
                let c = &self.reference.collectives[m.index[self.reference_at]];
                (m.transfer_ns as f64, c.bytes)
            })
            .collect()
    }

    fn speedup(&self, saved: f64, low: f64, high: f64, model: String) -> Option<PredictedSpeedup> {
        let at = |s: f64| self.step_ns / (self.step_ns - s.clamp(0.0, self.step_ns * 0.95));
        (saved > 0.0).then(|| PredictedSpeedup {
            estimate: at(saved),
            low: at(low.min(saved)),
            high: at(high.max(saved)),
            model,
        })
    }
}

fn ms(ns: f64) -> String {
    format!("{:.2} ms", ns / 1e6)
}

/// The fixed cost of one launch, ns: the intercept of transfer time
/// against bytes (least squares) when the sizes vary enough to fit one;
/// else what each launch takes beyond its bytes at the link's peak.
fn fixed_cost(sized: &[(f64, f64)], link_bytes_per_s: f64) -> f64 {
    let n = sized.len() as f64;
    let (mt, mb) = sized
        .iter()
        .fold((0.0, 0.0), |(t, b), s| (t + s.0 / n, b + s.1 / n));
    let var_b = sized.iter().map(|s| (s.1 - mb).powi(2)).sum::<f64>() / n;
    if var_b.sqrt() > 0.1 * mb {
        let cov = sized.iter().map(|s| (s.1 - mb) * (s.0 - mt)).sum::<f64>() / n;
        let slope = (cov / var_b).max(0.0);
        return (mt - slope * mb).max(0.0);
    }
    let mut beyond: Vec<f64> = sized
        .iter()
        .map(|(t, b)| (t - b / link_bytes_per_s * 1e9).max(0.0))
        .collect();
    beyond.sort_by(f64::total_cmp);
    beyond[beyond.len() / 2]
}

/// Many small all-reduces: DDP's buckets are too small. Each launch pays
/// a fixed cost ([`fixed_cost`], from the trace's own launches); merged
/// into 25 MB buckets the count drops.
pub fn bucket_size(v: &StepView) -> Option<RankAdvice> {
    let launches = v.transfers(CollectiveOp::AllReduce);
    let per_step = launches.len() as f64 / v.steps;
    let sized: Vec<(f64, f64)> = launches
        .iter()
        .filter_map(|&(t, b)| b.map(|b| (t, b as f64)))
        .collect();
    if per_step < 8.0 || sized.len() * 2 < launches.len() {
        return None;
    }
    let mut bytes: Vec<f64> = sized.iter().map(|s| s.1).collect();
    bytes.sort_by(f64::total_cmp);
    let median_bytes = bytes[bytes.len() / 2];
    if median_bytes > DDP_BUCKET_BYTES / 4.0 {
        return None;
    }
    let fixed_ns = fixed_cost(&sized, v.link_bytes_per_s);
    let total_bytes = v.per_step(bytes.iter().sum());
    let merged = (total_bytes / DDP_BUCKET_BYTES).ceil().max(1.0);
    let saved_comm = (per_step - merged).max(0.0) * fixed_ns;
    let exposed = v.exposed(CollectiveOp::AllReduce);
    let saved = saved_comm.min(exposed);
    if saved < MIN_SHARE * v.step_ns {
        return None;
    }
    Some(RankAdvice {
        rank: 0,
        id: "ddp_bucket_size".into(),
        title: "Fewer, larger gradient buckets".into(),
        evidence: format!(
            "{per_step:.0} all-reduces a step of median {:.2} MB ({:.1} MB in all): each pays about {} beyond its bytes, and {} of all-reduce a step is not hidden under compute",
            median_bytes / 1e6,
            total_bytes / 1e6,
            ms(fixed_ns),
            ms(exposed)
        ),
        action: "DistributedDataParallel(..., bucket_cap_mb=25) or larger (the default is 25; a smaller cap makes one all-reduce per few parameters)".into(),
        predicted_speedup: v.speedup(
            saved,
            saved * 0.5,
            exposed,
            format!(
                "{per_step:.0} launches merged into {merged:.0} of 25 MB save {} of fixed cost a step, at most the {} exposed",
                ms(saved_comm),
                ms(exposed)
            ),
        ),
    })
}

/// fp32 gradients on the wire: a bf16 compression hook halves the bytes.
pub fn bf16_compression(v: &StepView) -> Option<RankAdvice> {
    let fp32: Vec<_> = v
        .reference
        .collectives
        .iter()
        .filter(|c| c.op == CollectiveOp::AllReduce && c.dtype == Some("f32"))
        .collect();
    if fp32.is_empty() {
        return None;
    }
    let transfer: f64 = v.per_step(
        v.matched
            .iter()
            .filter(|m| {
                m.op == CollectiveOp::AllReduce
                    && v.reference.collectives[m.index[v.reference_at]].dtype == Some("f32")
            })
            .map(|m| m.transfer_ns as f64)
            .sum(),
    );
    let exposed = v.per_step(fp32.iter().map(|c| c.exposed_ns as f64).sum());
    let saved = exposed.min(transfer / 2.0);
    if saved < MIN_SHARE * v.step_ns {
        return None;
    }
    Some(RankAdvice {
        rank: 0,
        id: "bf16_gradient_compression".into(),
        title: "Send gradients in bf16".into(),
        evidence: format!(
            "{} all-reduces a step carry fp32 gradients: {} of transfer, {} of it exposed",
            (fp32.len() as f64 / v.steps).round(),
            ms(transfer),
            ms(exposed)
        ),
        action: "from torch.distributed.algorithms.ddp_comm_hooks import default_hooks; model.register_comm_hook(None, default_hooks.bf16_compress_hook) (FSDP: MixedPrecision(reduce_dtype=torch.bfloat16))".into(),
        predicted_speedup: v.speedup(
            saved,
            saved * 0.5,
            exposed.min(transfer * 0.6),
            "half the fp32 all-reduce bytes, taken off its exposed time".into(),
        ),
    })
}

/// FSDP's all-gathers not hidden: prefetch the next unit's parameters.
pub fn fsdp_prefetch(v: &StepView) -> Option<RankAdvice> {
    let exposed = v.exposed(CollectiveOp::AllGather);
    let gathers = v
        .reference
        .collectives
        .iter()
        .filter(|c| c.op == CollectiveOp::AllGather)
        .count();
    if exposed < MIN_SHARE * v.step_ns || gathers == 0 {
        return None;
    }
    let compute = v.per_step(v.reference.row.compute_ns as f64);
    let saved = (0.8 * exposed).min(compute);
    Some(RankAdvice {
        rank: 0,
        id: "fsdp_prefetch".into(),
        title: "Prefetch sharded parameters".into(),
        evidence: format!(
            "{:.0} all-gathers a step with {} of them not hidden under compute: each unit waits for its own parameters",
            gathers as f64 / v.steps,
            ms(exposed)
        ),
        action: "FSDP(..., backward_prefetch=BackwardPrefetch.BACKWARD_PRE, forward_prefetch=True) (FSDP2: module.set_modules_to_forward_prefetch / set_modules_to_backward_prefetch)".into(),
        predicted_speedup: v.speedup(
            saved,
            0.5 * exposed,
            exposed,
            "the exposed all-gather time mostly hidden under the previous unit's compute".into(),
        ),
    })
}

/// A small integer all-reduce each step beside the gradients': DDP's map
/// of used parameters, which it sends only with `find_unused_parameters`.
pub fn find_unused(v: &StepView) -> Option<RankAdvice> {
    let flags: Vec<_> = v
        .reference
        .collectives
        .iter()
        .filter(|c| {
            c.op == CollectiveOp::AllReduce
                && matches!(c.dtype, Some("i32" | "i64" | "u8" | "i8"))
                && c.bytes.is_none_or(|b| b <= 4 << 20)
        })
        .collect();
    let gradients = v.reference.collectives.iter().any(|c| {
        c.op == CollectiveOp::AllReduce && matches!(c.dtype, Some("f32" | "bf16" | "f16"))
    });
    let per_step = flags.len() as f64 / v.steps;
    if !gradients || !(0.5..=2.0).contains(&per_step) {
        return None;
    }
    let cost = v.per_step(flags.iter().map(|c| (c.end_ns - c.start_ns) as f64).sum());
    let exposed = v.per_step(flags.iter().map(|c| c.exposed_ns as f64).sum());
    Some(RankAdvice {
        rank: 0,
        id: "ddp_find_unused_parameters".into(),
        title: "Drop find_unused_parameters".into(),
        evidence: format!(
            "one integer all-reduce a step ({} exposed) beside the gradients': DDP's used-parameter map, sent only with find_unused_parameters=True, which also walks the autograd graph on the host every forward",
            ms(exposed)
        ),
        action: "DistributedDataParallel(..., find_unused_parameters=False) when every parameter gets a gradient each step (static_graph=True when the set is fixed)".into(),
        predicted_speedup: v.speedup(
            exposed.max(cost),
            exposed,
            3.0 * cost.max(exposed),
            "the map's all-reduce off the step; the host's graph walk is not in the GPU trace (upper bound 3x the all-reduce)".into(),
        ),
    })
}
