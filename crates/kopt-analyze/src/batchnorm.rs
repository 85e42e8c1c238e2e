//! Batch norm in inference: with running statistics it is a per-channel
//! scale and shift, constants once the model is in eval mode, so it folds
//! into the weights and bias of the convolution before it. The batch-norm
//! pass is gone only where the bias lands in the convolution's epilogue
//! (torch.compile with freezing): eager PyTorch adds a convolution's bias
//! in a pass of its own, as costly as the batch norm it replaced (measured:
//! ResNet-50, bf16, batch 256, H200: folded 0.99x, compiled with freezing
//! 2.65x). One finding covers every batch-norm kernel. Training
//! (a backward pass, or batch statistics computed in the forward) cannot
//! fold: there the finding is not made.

use std::collections::HashMap;

use kopt_model::{BottleneckClass, OpShare, Recommendation};

use crate::library::{is_batch_norm, is_batch_norm_op};
use crate::rollup::KernelGroup;

pub const ID: &str = "fold_batch_norm";

/// Kernel-name pieces that mean training: a backward pass, or batch
/// statistics computed in the forward (train mode).
const TRAINING_KERNELS: [&str; 5] = [
    "backward",
    "bn_bw",
    "bn_fw_tr",
    "collect_statistics",
    "reduce_statistics",
];

/// Ops that mean training-mode batch norm.
fn is_training_op(op: &str) -> bool {
    op.contains("batch_norm")
        && (op.contains("backward")
            || op == "aten::_native_batch_norm_legit"
            || op == "aten::_native_batch_norm_legit_functional")
}

/// The batch-norm kernel groups: known by name, or launched only by
/// batch-norm ops where the trace names ops.
pub fn members(groups: &[KernelGroup], ops: Option<&HashMap<String, Vec<OpShare>>>) -> Vec<String> {
    groups
        .iter()
        .filter(|g| {
            let name = &g.verdict.name;
            is_batch_norm(name)
                || ops
                    .and_then(|o| o.get(name))
                    .is_some_and(|s| !s.is_empty() && s.iter().all(|s| is_batch_norm_op(&s.op)))
        })
        .map(|g| g.verdict.name.clone())
        .collect()
}

/// What in the trace says training, in words; None for inference.
pub fn training_evidence(
    groups: &[KernelGroup],
    ops: Option<&HashMap<String, Vec<OpShare>>>,
) -> Option<String> {
    for g in groups {
        let lower = g.verdict.name.to_ascii_lowercase();
        if is_batch_norm(&g.verdict.name) && TRAINING_KERNELS.iter().any(|p| lower.contains(p)) {
            return Some(format!(
                "training batch-norm kernel {}",
                g.verdict.short_name
            ));
        }
    }
    let ops = ops?;
    ops.values()
        .flatten()
        .find(|s| is_training_op(&s.op))
        .map(|s| format!("training op {}", s.op))
}

/// The finding over the batch-norm kernels, None when there are none, the
/// trace shows training, or they take no time.
pub fn recommend(
    groups: &[KernelGroup],
    members: &[String],
    total_ns: f64,
    ops: Option<&HashMap<String, Vec<OpShare>>>,
) -> Option<Recommendation> {
    if members.is_empty() || total_ns <= 0.0 || training_evidence(groups, ops).is_some() {
        return None;
    }
    let of = crate::rollup::groups_named(groups, members);
    let saved: f64 = of.iter().map(|g| g.verdict.total_ns).sum();
    let launches: u64 = of.iter().map(|g| g.verdict.launches).sum();
    if saved <= 0.0 || saved >= total_ns {
        return None;
    }
    // Folded in eager mode, the bias add costs what the batch norm did.
    let low = 1.0;
    let fmt = kopt_model::format_duration_ns;
    let mut op_names: Vec<&str> = of
        .iter()
        .flat_map(|g| {
            ops.and_then(|o| o.get(&g.verdict.name))
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .map(|s| s.op.as_str())
        })
        .collect();
    op_names.sort_unstable();
    op_names.dedup();
    let named = if op_names.is_empty() {
        String::new()
    } else {
        format!(" (ops: {})", op_names.join(", "))
    };
    let shorts: Vec<&str> = of.iter().map(|g| g.verdict.short_name.as_str()).collect();
    let model = "folding puts each batch norm's scale and shift (running statistics, eval mode) into the preceding convolution's weights and bias once; with the bias applied in the convolution's epilogue (torch.compile with freezing) the batch-norm passes no longer run: saved = their measured time; speed-up = kernel time / (kernel time - saved); low: 1.0x, folding in eager mode, where PyTorch adds the bias in a pass of its own (measured on an H200, ResNet-50 bf16 batch 256: eager folding 0.99x, torch.compile with freezing 2.65x of which this finding is part)".to_string();
    let (gain, speedup) = crate::gain::saved_time_gain(saved, total_ns, 100.0, low, model);
    let predicted = crate::gain::kernel_time_speedup_words(&speedup);
    Some(Recommendation {
        rank: 0,
        id: ID.into(),
        title: "Fold batch norm into the preceding convolution".into(),
        kernel: members.join(" | "),
        kernel_short: format!(
            "{} batch-norm kernel{}",
            members.len(),
            if members.len() == 1 { "" } else { "s" }
        ),
        class: BottleneckClass::Memory,
        evidence: format!(
            "{} batch-norm kernel{} ({}){named} take {} ({:.1}% of kernel time) in {launches} launches, and no backward pass or batch statistics appear: inference, where batch norm's running statistics are constants",
            of.len(),
            if of.len() == 1 { "" } else { "s" },
            shorts.join(", "),
            fmt(saved),
            100.0 * saved / total_ns,
        ),
        action: format!(
            "Compile the inference model with freezing: torch._inductor.config.freezing = True; model = torch.compile(model) under torch.no_grad / inference_mode; it folds each batch norm into the convolution before it and applies the bias in the convolution's epilogue. Folding alone in eager mode (torch.fx.experimental.optimization.fuse, torch.ao.quantization.fuse_modules) gains nothing: PyTorch then adds the convolution's bias in a pass as costly as the batch norm's. Predicted: {} of batch-norm kernels removed, {predicted}.",
            fmt(saved)
        ),
        source: "conv-batch-norm folding: inference-time constant folding of batch norm into the convolution's weights (torch.ao.quantization.fuse_modules, torch.fx fusion, torch.compile / Inductor)".into(),
        gain: Some(gain),
        predicted_speedup: Some(speedup),
    })
}
