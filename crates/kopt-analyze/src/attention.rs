//! Eager attention: `matmul(q, k^T) -> softmax -> matmul(p, v)` written out
//! in framework ops (Hugging Face's `attn_implementation="eager"`, hand-made
//! attention with `bmm`/`baddbmm`) materialises the S x S scores in memory,
//! with a GEMM, a softmax and the elementwise passes between (scale, mask,
//! casts) each reading and writing them. PyTorch's fused
//! `scaled_dot_product_attention` (flash / memory-efficient kernels) keeps
//! them on chip. One finding covers every layer's attention.
//!
//! Found from op ranges (a softmax over `[.., S, S]` between two batched
//! matmuls of the same S), else from the kernel sequence (a GEMM, at most a
//! few elementwise kernels, a softmax kernel, at most a few more, a GEMM),
//! never where a fused attention kernel already runs.

use std::collections::HashMap;

use kopt_model::{
    ActivityKind, BottleneckClass, Device, LibraryFamily, OpSummary, Recommendation, Timeline,
};

pub const ID: &str = "use_fused_attention";

/// Share of the tensor peak a fused attention kernel reaches (estimate,
/// low, high): short sequences and 64-wide heads keep flash kernels well
/// under the GEMM peak.
const FLASH_EFFICIENCY: (f64, f64, f64) = (0.3, 0.15, 0.5);

/// Without op shapes: the fused kernel's time as a share of the two eager
/// GEMMs' time (same FLOPs, on tensor cores, no S x S round trip): estimate,
/// low (more time left), high. On the H100 ViT-Base capture (S = 197) the
/// fused kernel's FLOPs at the tensor rate above are 0.11 of the eager
/// GEMMs' time; aligned eager GEMMs already on tensor cores leave less.
const FLASH_SHARE_OF_GEMMS: (f64, f64, f64) = (0.3, 0.6, 0.1);

/// Kernels looked at on each side of a softmax for the GEMMs around it.
const REACH: usize = 4;

/// What the finding found, before it is priced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Found {
    /// GPU time of the attention kernels (GEMMs, softmax, the passes between).
    pub eager_ns: f64,
    /// Of which the two GEMMs.
    pub gemm_ns: f64,
    /// FLOPs of the two GEMMs, when op shapes give them.
    pub gemm_flops: Option<f64>,
    /// The sequence length, when op shapes give it.
    pub seq: Option<u64>,
    /// Attention layers run (softmax calls).
    pub calls: u64,
    /// Ops (name and shapes as in the op table) the finding covers: a padding
    /// finding on them is moot.
    pub ops: Vec<String>,
    pub from_ops: bool,
    /// The two GEMMs' kernel names, when found from the kernel sequence.
    pub gemm_kernels: Vec<String>,
}

/// `[[64, 12, 197, 197], [], []]` -> each input's dimensions.
pub fn parse_shapes(s: &str) -> Vec<Vec<u64>> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur: Vec<u64> = Vec::new();
    let mut num = String::new();
    for c in s.chars() {
        match c {
            '[' => {
                depth += 1;
                if depth == 2 {
                    cur.clear();
                }
            }
            ']' => {
                if !num.is_empty() {
                    cur.push(num.parse().unwrap_or(0));
                    num.clear();
                }
                if depth == 2 {
                    out.push(cur.clone());
                }
                depth -= 1;
            }
            ',' | ' ' if !num.is_empty() => {
                cur.push(num.parse().unwrap_or(0));
                num.clear();
            }
            d if d.is_ascii_digit() => num.push(d),
            _ => {}
        }
    }
    out
}

fn last2(d: &[u64]) -> Option<(u64, u64)> {
    (d.len() >= 2).then(|| (d[d.len() - 2], d[d.len() - 1]))
}

fn batch(d: &[u64]) -> u64 {
    d[..d.len().saturating_sub(2)]
        .iter()
        .product::<u64>()
        .max(1)
}

fn is_softmax_op(op: &str) -> bool {
    matches!(
        op,
        "aten::_softmax" | "aten::softmax" | "aten::_safe_softmax"
    )
}

fn is_batched_matmul_op(op: &str) -> bool {
    matches!(op, "aten::bmm" | "aten::baddbmm" | "aten::matmul")
}

fn row_key(r: &OpSummary) -> String {
    format!("{} {}", r.op, r.shapes.as_deref().unwrap_or(""))
}

/// From the op table: softmax over `[.., S, S]` and the batched matmuls that
/// make (`[.., S, d] x [.., d, S]`) and consume (`[.., S, S] x [.., S, d]`) it.
pub fn from_ops(table: &[OpSummary]) -> Option<Found> {
    let fused = table
        .iter()
        .any(|r| r.op.contains("scaled_dot_product") || r.op.contains("flash_attention"));
    let mut seqs: Vec<u64> = table
        .iter()
        .filter(|r| is_softmax_op(&r.op))
        .filter_map(|r| {
            let s = parse_shapes(r.shapes.as_deref()?);
            let (a, b) = last2(s.first()?)?;
            (a == b && a >= 8).then_some(a)
        })
        .collect();
    seqs.sort_unstable();
    seqs.dedup();
    let mut found = Found {
        from_ops: true,
        ..Found::default()
    };
    let mut flops = 0.0;
    for &s in &seqs {
        let gemms: Vec<(&OpSummary, f64)> = table
            .iter()
            .filter(|r| is_batched_matmul_op(&r.op))
            .filter_map(|r| {
                let sh = parse_shapes(r.shapes.as_deref()?);
                let ins: Vec<&Vec<u64>> = sh.iter().filter(|d| d.len() >= 3).collect();
                let (x, y) = (ins.first()?, ins.get(1)?);
                let (m, k) = last2(x)?;
                let (k2, n) = last2(y)?;
                let scores = m == s && n == s && k == k2;
                let context = m == s && k == s && k2 == s;
                (k == k2 && (scores || context))
                    .then(|| (r, 2.0 * batch(x) as f64 * m as f64 * n as f64 * k as f64))
            })
            .collect();
        if gemms.len() < 2 {
            continue;
        }
        for (r, f) in &gemms {
            found.gemm_ns += r.total_ns;
            found.eager_ns += r.total_ns;
            flops += f * r.launches as f64;
            found.ops.push(row_key(r));
        }
        for r in table.iter().filter(|r| !is_batched_matmul_op(&r.op)) {
            let Some(sh) = r.shapes.as_deref().map(parse_shapes) else {
                continue;
            };
            let on_scores = sh
                .first()
                .and_then(|d| last2(d))
                .is_some_and(|(a, b)| a == s && b == s);
            if on_scores {
                found.eager_ns += r.total_ns;
                if is_softmax_op(&r.op) {
                    found.calls += r.launches;
                }
                found.ops.push(row_key(r));
            }
        }
        found.seq = Some(found.seq.map_or(s, |x| x.max(s)));
    }
    if fused || found.calls == 0 || found.gemm_ns <= 0.0 {
        return None;
    }
    // Launches of an op row count kernels; a GEMM op launches one.
    found.gemm_flops = (flops > 0.0).then_some(flops);
    Some(found)
}

/// ATen's copy of a strided view into a contiguous tensor
/// (`direct_copy_kernel_cuda` behind `.contiguous()`, `reshape`, `clone`),
/// by its (mangled or demangled) name; not a concatenation or gather.
pub fn is_layout_copy(name: &str) -> bool {
    name.contains("direct_copy_kernel")
}

fn family(name: &str) -> Option<LibraryFamily> {
    crate::library::classify(name).map(|f| f.family)
}

/// From the kernel sequence of each stream: GEMM, a few kernels, softmax, a
/// few kernels, GEMM.
pub fn from_kernels(
    t: &Timeline,
    keep: impl Fn(&kopt_model::GpuActivity) -> bool,
) -> Option<Found> {
    let mut by_stream: HashMap<u64, Vec<&kopt_model::GpuActivity>> = HashMap::new();
    for a in t
        .activities
        .iter()
        .filter(|a| a.kind == ActivityKind::Kernel && keep(a))
    {
        by_stream.entry(a.stream).or_default().push(a);
    }
    let mut fams: HashMap<&str, Option<LibraryFamily>> = HashMap::new();
    let mut found = Found::default();
    for acts in by_stream.values_mut() {
        acts.sort_by_key(|a| a.start_ns);
        let fam: Vec<Option<LibraryFamily>> = acts
            .iter()
            .map(|a| {
                *fams
                    .entry(a.name.as_str())
                    .or_insert_with(|| family(&a.name))
            })
            .collect();
        if fam.contains(&Some(LibraryFamily::Attention)) {
            return None;
        }
        let mut covered_until = 0usize;
        for i in 0..acts.len() {
            if fam[i] != Some(LibraryFamily::Softmax) || i < covered_until {
                continue;
            }
            let is_gemm = |j: usize| fam[j] == Some(LibraryFamily::Gemm);
            let between = |j: usize| {
                matches!(
                    fam[j],
                    Some(LibraryFamily::Elementwise) | Some(LibraryFamily::Copy)
                )
            };
            let Some(before) = (1..=REACH.min(i))
                .map(|d| i - d)
                .take_while(|&j| is_gemm(j) || between(j))
                .find(|&j| is_gemm(j))
            else {
                continue;
            };
            let Some(after) = (i + 1..(i + 1 + REACH).min(acts.len()))
                .take_while(|&j| is_gemm(j) || between(j))
                .find(|&j| is_gemm(j))
            else {
                continue;
            };
            // The layout copies right before the first GEMM (q and k made
            // contiguous for the batched GEMM: `.contiguous()` or matmul's
            // reshape of a transposed view) are attention's too: the fused
            // kernel takes q, k and v strided.
            let first = (1..=REACH)
                .take_while(|&d| d <= before && before - d >= covered_until)
                .take_while(|&d| is_layout_copy(&acts[before - d].name))
                .last()
                .map_or(before, |d| before - d);
            for (j, a) in acts.iter().enumerate().take(after + 1).skip(first) {
                let d = a.duration_ns().max(0) as f64;
                found.eager_ns += d;
                if j == before || j == after {
                    found.gemm_ns += d;
                    if !found.gemm_kernels.contains(&a.name) {
                        found.gemm_kernels.push(a.name.clone());
                    }
                }
            }
            found.calls += 1;
            covered_until = after + 1;
        }
    }
    (found.calls >= 2 && found.gemm_ns > 0.0).then_some(found)
}

/// The finding, priced: the eager attention kernels' time against a fused
/// kernel's estimate.
pub fn recommend(
    found: &Found,
    total_ns: f64,
    device: &Device,
    fp32: bool,
) -> Option<Recommendation> {
    if total_ns <= 0.0 || found.eager_ns <= 0.0 {
        return None;
    }
    let tensor = device.peaks.tensor_bf16_flops.filter(|p| *p > 0.0);
    let fp32_peak = device.peaks.fp32_flops.filter(|p| *p > 0.0);
    // fp32 inputs take the memory-efficient kernel on the FMA pipes.
    let rate = if fp32 { fp32_peak } else { tensor };
    let (fused, how): ([f64; 3], String) = match (found.gemm_flops, rate) {
        (Some(f), Some(r)) => {
            let (e, lo, hi) = FLASH_EFFICIENCY;
            (
                [1e9 * f / (r * e), 1e9 * f / (r * lo), 1e9 * f / (r * hi)],
                format!(
                    "the fused kernel's time = the two GEMMs' {:.1} GFLOP at {:.0}% ({:.0}-{:.0}%) of the {} peak ({:.0} TFLOP/s)",
                    f / 1e9,
                    100.0 * e,
                    100.0 * lo,
                    100.0 * hi,
                    if fp32 { "FP32" } else { "tensor" },
                    r / 1e12
                ),
            )
        }
        _ => {
            let (e, lo, hi) = FLASH_SHARE_OF_GEMMS;
            (
                [found.gemm_ns * e, found.gemm_ns * lo, found.gemm_ns * hi],
                format!(
                    "no op shapes: the fused kernel's time = {:.0}% ({:.0}-{:.0}%) of the two eager GEMMs' time (same FLOPs on tensor cores, the S x S scores never leave the chip)",
                    100.0 * e,
                    100.0 * hi,
                    100.0 * lo
                ),
            )
        }
    };
    let saved = |f: f64| (found.eager_ns - f).clamp(0.0, total_ns * 0.999);
    let at = |f: f64| total_ns / (total_ns - saved(f));
    let [est, low, high] = fused;
    if saved(est) <= 0.0 {
        return None;
    }
    let fmt = kopt_model::format_duration_ns;
    let copies = if found.from_ops {
        ""
    } else {
        ", and the copies that make q and k contiguous right before the first GEMM: the fused kernel reads them strided"
    };
    let model = format!(
        "saved = the eager attention kernels' time (both GEMMs, the softmax and the elementwise passes over the S x S scores{copies}) - the fused kernel's; {how}; measured on an H100: ViT-Base bf16 (batch 64, S = 197) 2.13x with SDPA"
    );
    let seq = found
        .seq
        .map_or(String::new(), |s| format!(" over {s} x {s} scores"));
    Some(Recommendation {
        rank: 0,
        id: ID.into(),
        title: "Use fused attention (scaled_dot_product_attention) instead of eager matmul-softmax-matmul".into(),
        kernel: String::new(),
        kernel_short: format!("{} eager attention calls", found.calls),
        class: BottleneckClass::Memory,
        evidence: format!(
            "attention runs eagerly{seq}: {} softmax calls, each between two batched GEMMs ({}), with the passes between take {} ({:.1}% of kernel time), writing and reading the scores in memory each time{}",
            found.calls,
            fmt(found.gemm_ns),
            fmt(found.eager_ns),
            100.0 * found.eager_ns / total_ns,
            if found.from_ops { "" } else { " (found from the kernel sequence: GEMM, softmax, GEMM)" },
        ),
        action: format!(
            "Call torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=..., is_causal=...) in place of matmul -> softmax -> matmul; in Hugging Face models pass attn_implementation=\"sdpa\" (or \"flash_attention_2\") when building the model. The fused kernel never writes the scores, so padding the sequence length is not needed. Predicted: {} of attention kernels -> {}, {}x ({}) for the workload's kernel time.",
            fmt(found.eager_ns),
            fmt(est),
            kopt_model::figure::ratio(at(est), 2),
            kopt_model::figure::ratio_range(at(low), at(high), 2)
        ),
        source: "fused attention: FlashAttention / memory-efficient attention through torch.nn.functional.scaled_dot_product_attention".into(),
        gain: Some(kopt_model::GainEstimate {
            kernel_pct: 100.0 * saved(est) / found.eager_ns,
            workload_pct: 100.0 * saved(est) / total_ns,
            saved_ns: saved(est),
            method: model.clone(),
        }),
        predicted_speedup: Some(kopt_model::PredictedSpeedup {
            estimate: at(est),
            low: at(low),
            high: at(high),
            model,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(op: &str, shapes: &str, ns: f64, launches: u64) -> OpSummary {
        OpSummary {
            op: op.into(),
            shapes: Some(shapes.into()),
            kernels: vec![],
            launches,
            total_ns: ns,
            pct_of_total: 0.0,
        }
    }

    #[test]
    fn shapes_parse() {
        assert_eq!(
            parse_shapes("[[64, 12, 197, 197], [], []]"),
            vec![vec![64, 12, 197, 197], vec![], vec![]]
        );
        assert_eq!(
            parse_shapes("[[768, 197, 64], [768, 64, 197]]"),
            vec![vec![768, 197, 64], vec![768, 64, 197]]
        );
    }

    #[test]
    fn eager_attention_is_found_from_ops() {
        let table = vec![
            row("aten::bmm", "[[768, 197, 64], [768, 64, 197]]", 36e6, 276),
            row("aten::bmm", "[[768, 197, 197], [768, 197, 64]]", 24e6, 276),
            row("aten::_softmax", "[[64, 12, 197, 197], [], []]", 23e6, 276),
            row("aten::mul", "[[64, 12, 197, 197], []]", 11e6, 276),
            row(
                "aten::addmm",
                "[[768], [12608, 768], [768, 768], [], []]",
                28e6,
                1104,
            ),
            row(
                "aten::add",
                "[[64, 197, 768], [64, 197, 768], []]",
                9e6,
                552,
            ),
        ];
        let f = from_ops(&table).unwrap();
        assert_eq!(f.seq, Some(197));
        assert_eq!(f.calls, 276);
        assert_eq!(f.eager_ns, 94e6);
        assert_eq!(f.gemm_ns, 60e6);
        // 2 x 768 x 197 x 197 x 64 per GEMM, two GEMMs, 276 calls each.
        let want = 2.0 * 2.0 * 768.0 * 197.0 * 197.0 * 64.0 * 276.0;
        assert!((f.gemm_flops.unwrap() - want).abs() / want < 1e-9);
        assert_eq!(f.ops.len(), 4);
        // A model already on SDPA: nothing to do.
        let mut fused = table.clone();
        fused.push(row(
            "aten::scaled_dot_product_attention",
            "[[64, 12, 197, 64]]",
            1e6,
            276,
        ));
        assert!(from_ops(&fused).is_none());
        // A classifier's softmax over [B, classes]: not attention.
        let head = vec![
            row(
                "aten::addmm",
                "[[1000], [64, 768], [768, 1000], [], []]",
                1e6,
                10,
            ),
            row("aten::_softmax", "[[64, 1000], [], []]", 1e5, 10),
        ];
        assert!(from_ops(&head).is_none());
    }

    #[test]
    fn the_fused_estimate_prices_the_flops() {
        let mut d = Device::unknown();
        d.peaks.tensor_bf16_flops = Some(989e12);
        d.peaks.fp32_flops = Some(66.9e12);
        let found = Found {
            eager_ns: 100e6,
            gemm_ns: 60e6,
            gemm_flops: Some(100e12 * 0.3 * 0.01),
            seq: Some(197),
            calls: 10,
            ops: vec![],
            from_ops: true,
            gemm_kernels: vec![],
        };
        let r = recommend(&found, 200e6, &d, false).unwrap();
        let sp = r.predicted_speedup.unwrap();
        // fused: 0.3 TFLOP at 0.3 x 989 TFLOP/s = ~1 ms; saved ~99 ms of 200.
        assert!(
            (sp.estimate - 200.0 / 101.0).abs() < 0.01,
            "{}",
            sp.estimate
        );
        assert!(sp.low <= sp.estimate && sp.estimate <= sp.high);
    }

    /// One layer's kernels as ViT's eager attention runs them: the q/k/v
    /// projections, q and k made contiguous, QK^T, scale, upcast, softmax,
    /// downcast, v made contiguous, PV, the output made contiguous, the
    /// output projection (us each).
    fn eager_layer(t: &mut Timeline, at: &mut i64) {
        let gemm = "nvjet_sm90_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN";
        let bmm = "void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_64x64_nn_align1>(Params)";
        let copy = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1} const&)::{lambda(int)#1})";
        let mul = "void at::native::vectorized_elementwise_kernel<8, at::native::AUnaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, at::native::AUnaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul>)";
        let softmax = "void (anonymous namespace)::softmax_warp_forward<float, float, float, 8, false, false>(float*, float const*, int, int, int, bool const*, int, bool)";
        let layer = [
            (gemm, 25),
            (gemm, 25),
            (gemm, 25),
            (copy, 30),
            (copy, 62),
            (bmm, 134),
            (mul, 40),
            (copy, 95),
            (softmax, 82),
            (copy, 61),
            (copy, 30),
            (bmm, 90),
            (copy, 29),
            (gemm, 26),
        ];
        for (name, us) in layer {
            let c = t.activities.len() as u64;
            t.activities.push(kopt_model::GpuActivity {
                kind: ActivityKind::Kernel,
                name: name.into(),
                start_ns: *at,
                end_ns: *at + us * 1000,
                device: 0,
                stream: 7,
                correlation: c,
                grid: None,
                block: None,
                bytes: None,
                copy: None,
            });
            *at += us * 1000 + 2000;
        }
    }

    #[test]
    fn eager_attention_from_kernels_counts_the_layout_copies_before_the_first_gemm() {
        let mut t = Timeline::default();
        let mut at = 0;
        for _ in 0..3 {
            eager_layer(&mut t, &mut at);
        }
        let f = from_kernels(&t, |_| true).unwrap();
        assert_eq!(f.calls, 3);
        assert_eq!(f.gemm_ns, 3.0 * 224_000.0);
        // q and k copies (92 us) + QK^T .. PV (532 us); not the output's
        // copy after PV, which SDPA's caller still makes, nor the projections.
        assert_eq!(f.eager_ns, 3.0 * (92_000.0 + 532_000.0));
        assert!(!f.from_ops);
        let mut d = Device::unknown();
        d.peaks.tensor_bf16_flops = Some(989e12);
        let r = recommend(&f, 3.0 * 1_200_000.0, &d, false).unwrap();
        assert!(r
            .predicted_speedup
            .unwrap()
            .model
            .contains("copies that make q and k contiguous"));
    }
}
