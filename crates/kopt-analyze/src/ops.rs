//! Kernels traced back to the framework ops that launched them. PyTorch's
//! `emit_nvtx(record_shapes=True)` wraps every op in an NVTX range named
//! `aten::addmm, seq = 12, sizes = [[8, 768], [768, 3072], []]`; a kernel
//! belongs to the innermost op range open when its launch call started.

use std::collections::HashMap;

use kopt_model::{
    ActivityKind, BottleneckClass, GainEstimate, OpShare, OpSummary, PredictedSpeedup,
    Recommendation, Timeline,
};

/// An op range's name parsed: the op and its input shapes.
pub fn parse_op(name: &str) -> Option<(String, Option<String>)> {
    let op = name.split(',').next()?.trim();
    // Framework ops are namespaced (`aten::`, `prim::`, `torchvision::`);
    // user annotations and step markers are not ops.
    if !op.contains("::") || op.contains(' ') {
        return None;
    }
    // `sizes = [[8, 768], [768, 3072]]`: the balanced brackets only (later
    // keys such as `input_op_ids` differ per call and would split the rows).
    let shapes = name.find("sizes = ").and_then(|i| {
        let rest = &name[i + "sizes = ".len()..];
        let mut depth = 0i32;
        for (j, c) in rest.char_indices() {
            match c {
                '[' => depth += 1,
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(rest[..=j].to_string());
                    }
                }
                _ if depth == 0 => return None,
                _ => {}
            }
        }
        None
    });
    Some((op.to_string(), shapes))
}

/// Per kernel name, the ops that launched it; and the per-op table.
pub struct Attribution {
    pub by_kernel: HashMap<String, Vec<OpShare>>,
    pub table: Vec<OpSummary>,
    /// Full kernel names per table row (the table keeps short ones).
    pub full_names: Vec<Vec<String>>,
    /// Calls (op ranges) per op and shapes, whether they launched a kernel
    /// or not: an op may launch several kernels a call (an RNN, split-K).
    pub calls: HashMap<(String, Option<String>), u64>,
}

impl Attribution {
    /// The first full kernel name of a table row ("" where none is known).
    pub fn first_kernel(&self, row: usize) -> String {
        self.full_names
            .get(row)
            .and_then(|k| k.first())
            .cloned()
            .unwrap_or_default()
    }
}

/// Attribute every kernel of `t` whose launch call falls inside an op range.
/// None when the timeline has no op ranges.
pub fn attribute(t: &Timeline, total_ns: f64) -> Option<Attribution> {
    attribute_where(t, total_ns, |_| true)
}

/// `attribute` over the kernel activities `keep` accepts (warm-up trials left out).
pub fn attribute_where(
    t: &Timeline,
    total_ns: f64,
    keep: impl Fn(&kopt_model::GpuActivity) -> bool,
) -> Option<Attribution> {
    let mut ranges: Vec<(i64, i64, usize)> = Vec::new();
    // Each distinct (op, shapes) once: every call of an op is its own range,
    // and a kernel's launchers are counted per op and shapes, not per call.
    let mut parsed: Vec<(String, Option<String>)> = Vec::new();
    let mut index: HashMap<(String, Option<String>), usize> = HashMap::new();
    for r in &t.ranges {
        if let Some(p) = parse_op(&r.name) {
            let id = *index.entry(p).or_insert_with_key(|p| {
                parsed.push(p.clone());
                parsed.len() - 1
            });
            ranges.push((r.start_ns, r.end_ns, id));
        }
    }
    if ranges.is_empty() {
        return None;
    }
    let mut calls: HashMap<(String, Option<String>), u64> = HashMap::new();
    for &(_, _, id) in &ranges {
        *calls.entry(parsed[id].clone()).or_default() += 1;
    }
    ranges.sort_unstable_by_key(|&(s, e, _)| (s, std::cmp::Reverse(e)));
    // Launch calls by correlation id: a kernel's op is decided where it was launched.
    let launch_at: rustc_hash::FxHashMap<u64, i64> = t
        .api_calls
        .iter()
        .filter(|a| a.correlation != 0)
        .map(|a| (a.correlation, a.start_ns))
        .collect();
    let mut kernels: Vec<(i64, &str, i64)> = t
        .activities
        .iter()
        .filter(|a| a.kind == ActivityKind::Kernel && keep(a))
        .filter_map(|a| {
            let at = launch_at.get(&a.correlation)?;
            Some((*at, a.name.as_str(), a.duration_ns()))
        })
        .collect();
    kernels.sort_unstable_by_key(|k| k.0);
    // One sweep: ranges open in start order; the innermost open one (the
    // latest started that has not ended) owns the launch.
    let mut open: Vec<(i64, usize)> = Vec::new(); // (end, parsed index)
    let mut next = 0;
    let mut per_kernel: HashMap<(&str, usize), u64> = HashMap::new();
    let mut per_op: HashMap<usize, (u64, f64, Vec<&str>)> = HashMap::new();
    for (at, name, dur) in kernels {
        while next < ranges.len() && ranges[next].0 <= at {
            open.push((ranges[next].1, ranges[next].2));
            next += 1;
        }
        open.retain(|&(end, _)| end >= at);
        let Some(&(_, op)) = open.last() else {
            continue;
        };
        let count = per_kernel.entry((name, op)).or_default();
        let first = *count == 0;
        *count += 1;
        let e = per_op.entry(op).or_default();
        e.0 += 1;
        e.1 += dur.max(0) as f64;
        if first {
            e.2.push(name);
        }
    }
    let mut by_kernel: HashMap<String, Vec<OpShare>> = HashMap::new();
    for ((name, op), launches) in per_kernel {
        let (o, shapes) = &parsed[op];
        by_kernel
            .entry(name.to_string())
            .or_default()
            .push(OpShare {
                op: o.clone(),
                shapes: shapes.clone(),
                launches,
            });
    }
    for shares in by_kernel.values_mut() {
        shares.sort_by(|a, b| {
            b.launches
                .cmp(&a.launches)
                .then(a.op.cmp(&b.op))
                .then(a.shapes.cmp(&b.shapes))
        });
    }
    // Ops with the same name and shapes are one row.
    let mut rows: HashMap<(String, Option<String>), (OpSummary, Vec<String>)> = HashMap::new();
    // In first-seen op order, so a row's kernels are listed the same way
    // every run (a hash map's order is not).
    let mut per_op: Vec<_> = per_op.into_iter().collect();
    per_op.sort_unstable_by_key(|(op, _)| *op);
    for (op, (launches, ns, names)) in per_op {
        let (o, shapes) = &parsed[op];
        let (row, full) = rows.entry((o.clone(), shapes.clone())).or_insert_with(|| {
            (
                OpSummary {
                    op: o.clone(),
                    shapes: shapes.clone(),
                    kernels: Vec::new(),
                    launches: 0,
                    total_ns: 0.0,
                    pct_of_total: 0.0,
                },
                Vec::new(),
            )
        });
        row.launches += launches;
        row.total_ns += ns;
        for n in names {
            let short = kopt_model::kernel_short_name(n);
            if !row.kernels.contains(&short) {
                row.kernels.push(short);
                full.push(n.to_string());
            }
        }
    }
    let mut pairs: Vec<(OpSummary, Vec<String>)> = rows.into_values().collect();
    for (r, _) in &mut pairs {
        r.pct_of_total = if total_ns > 0.0 {
            100.0 * r.total_ns / total_ns
        } else {
            0.0
        };
    }
    pairs.sort_by(|a, b| {
        b.0.total_ns
            .total_cmp(&a.0.total_ns)
            .then(a.0.op.cmp(&b.0.op))
            .then(a.0.shapes.cmp(&b.0.shapes))
    });
    let (table, full_names) = pairs.into_iter().unzip();
    Some(Attribution {
        by_kernel,
        table,
        full_names,
        calls,
    })
}

/// The shapes string parsed: `[[4096, 768], [768, 50257], []]`.
fn parse_shapes(s: &str) -> Option<Vec<Vec<u64>>> {
    let inner = s.trim().strip_prefix('[')?.strip_suffix(']')?;
    let mut out = Vec::new();
    let mut rest = inner;
    while let Some(open) = rest.find('[') {
        let close = open + rest[open..].find(']')?;
        let dims: Option<Vec<u64>> = rest[open + 1..close]
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(|d| d.parse().ok())
            .collect();
        out.push(dims?);
        rest = &rest[close + 1..];
    }
    Some(out)
}

/// A GEMM op's (batch, M, N, K) from its input shapes.
fn gemm_dims(op: &str, shapes: &[Vec<u64>]) -> Option<(u64, u64, u64, u64)> {
    let mats: Vec<&Vec<u64>> = match op {
        "aten::mm" | "aten::bmm" | "aten::matmul" => shapes.iter().take(2).collect(),
        "aten::addmm" | "aten::baddbmm" | "aten::addbmm" => shapes.iter().skip(1).take(2).collect(),
        _ => return None,
    };
    let (a, b) = (mats.first()?, mats.get(1)?);
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (m, k) = (a[a.len() - 2], a[a.len() - 1]);
    let (k2, n) = (b[b.len() - 2], b[b.len() - 1]);
    if k != k2 {
        return None;
    }
    let batch: u64 = a[..a.len() - 2].iter().product::<u64>().max(1);
    Some((batch, m, n, k))
}

/// Tensor cores take fp16/bf16 GEMMs whose dimensions are multiples of 8
/// (16 bytes); libraries fall back to slower kernels otherwise.
const ALIGN: u64 = 8;
/// What a dimension is padded to: a multiple of 64 also fills whole tiles.
const PAD_TO: u64 = 64;

/// Whether any GEMM op of the table has input shapes (op ranges recorded
/// with shapes): then its misaligned GEMMs are known from them.
pub fn has_gemm_shapes(a: &Attribution) -> bool {
    a.table.iter().any(|r| {
        r.shapes
            .as_deref()
            .and_then(parse_shapes)
            .is_some_and(|s| gemm_dims(&r.op, &s).is_some())
    })
}

/// A GEMM op whose N or K is not a multiple of 8, priced padded: its FLOPs
/// at the best rate this workload's aligned GEMMs reached.
#[derive(Debug, Clone, PartialEq)]
pub struct MisalignedGemm {
    /// Row of the op table.
    pub row: usize,
    /// (batch, M, N, K).
    pub dims: (u64, u64, u64, u64),
    /// Each dimension as padded (a multiple of `PAD_TO` where misaligned).
    pub padded: (u64, u64, u64, u64),
    pub per_call_ns: f64,
    /// The padded GEMM's time per call at `rate`.
    pub padded_ns: f64,
    /// The best rate of the workload's aligned GEMMs, FLOP/s.
    pub rate: f64,
    /// Kernel time saved over all calls (estimate; low: at half `rate`).
    pub saved_ns: f64,
    pub saved_low_ns: f64,
}

impl MisalignedGemm {
    /// Arithmetic intensity (FLOPs per element moved) as Inductor's shape
    /// padding reckons it: `M*N*K / (M*K + N*K + M*N)`, batch left out.
    pub fn intensity(&self) -> f64 {
        let (_, m, n, k) = self.dims;
        let (m, n, k) = (m as f64, n as f64, k as f64);
        let d = m * k + n * k + m * n;
        if d > 0.0 {
            m * n * k / d
        } else {
            0.0
        }
    }
}

/// A GEMM's FLOPs from its (batch, M, N, K).
fn gemm_flops((b, m, n, k): (u64, u64, u64, u64)) -> f64 {
    2.0 * (b * m) as f64 * n as f64 * k as f64
}

/// GEMMs whose N or K is not a multiple of 8 and that padding makes faster
/// (the padded GEMM's FLOPs at the rate the workload's own aligned GEMMs
/// reached); none where no aligned GEMM gives a rate.
pub fn misaligned_gemms(a: &Attribution) -> Vec<MisalignedGemm> {
    let gemms: Vec<(usize, (u64, u64, u64, u64))> = a
        .table
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let dims = gemm_dims(&r.op, &parse_shapes(r.shapes.as_deref()?)?)?;
            Some((i, dims))
        })
        .collect();
    // The best rate any aligned GEMM of this workload reached.
    let aligned_rate = gemms
        .iter()
        .filter(|(_, (_, _, n, k))| n.is_multiple_of(ALIGN) && k.is_multiple_of(ALIGN))
        .filter_map(|&(i, d)| {
            let r = &a.table[i];
            (r.total_ns > 0.0).then(|| gemm_flops(d) * r.launches as f64 / (r.total_ns * 1e-9))
        })
        .filter(|x| x.is_finite() && *x > 0.0)
        .fold(None, |best: Option<f64>, x| {
            Some(best.map_or(x, |b| b.max(x)))
        });
    let Some(rate) = aligned_rate else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for &(i, (b, m, n, k)) in &gemms {
        if n.is_multiple_of(ALIGN) && k.is_multiple_of(ALIGN) {
            continue;
        }
        let row = &a.table[i];
        let pad = |x: u64| {
            if x.is_multiple_of(ALIGN) {
                x
            } else {
                x.div_ceil(PAD_TO) * PAD_TO
            }
        };
        let padded = (b, m, pad(n), pad(k));
        let per_call_ns = row.total_ns / row.launches.max(1) as f64;
        let padded_ns = gemm_flops(padded) / rate * 1e9;
        let saved = (per_call_ns - padded_ns).max(0.0) * row.launches as f64;
        if saved <= 0.0 || !saved.is_finite() {
            continue;
        }
        // Half the aligned rate as the pessimistic end.
        let saved_low = (per_call_ns - 2.0 * padded_ns).max(0.0) * row.launches as f64;
        out.push(MisalignedGemm {
            row: i,
            dims: (b, m, n, k),
            padded,
            per_call_ns,
            padded_ns,
            rate,
            saved_ns: saved,
            saved_low_ns: saved_low,
        });
    }
    out
}

/// GEMMs whose N or K is not a multiple of 8: the fix a PyTorch user can
/// make is to pad the dimension (the vocabulary, a Linear's features). The
/// gain model is measured in the same workload: the padded GEMM's FLOPs at
/// the rate the workload's own aligned GEMMs reached.
/// `gemms`: `misaligned_gemms(a)`, which the torch.compile finding prices
/// too.
pub fn gemm_alignment(
    a: &Attribution,
    gemms: &[MisalignedGemm],
    total_ns: f64,
) -> Vec<Recommendation> {
    let mut out = Vec::new();
    if total_ns <= 0.0 {
        return out;
    }
    for g in gemms {
        let (b, m, n, k) = g.dims;
        let (rate, per_call_ns, padded_ns) = (g.rate, g.per_call_ns, g.padded_ns);
        let (saved, saved_low) = (g.saved_ns.min(total_ns * 0.999), g.saved_low_ns);
        let row = &a.table[g.row];
        let achieved = gemm_flops((b, m, n, k)) / (per_call_ns * 1e-9);
        let dim = if !n.is_multiple_of(ALIGN) {
            format!("N = {n} -> {}", g.padded.2)
        } else {
            format!("K = {k} -> {}", g.padded.3)
        };
        let estimate = total_ns / (total_ns - saved);
        let saved_low = saved_low.min(saved);
        let i = g.row;
        let shapes = row.shapes.clone().unwrap_or_default();
        let kernel = a.first_kernel(i);
        let kernel_short = row.kernels.first().cloned().unwrap_or_default();
        let method = format!(
            "the padded GEMM's FLOPs at {} TFLOP/s, the best rate this workload's aligned GEMMs reached; kernel time only",
            kopt_model::figure::figure(rate / 1e12, 0)
        );
        out.push(Recommendation {
            rank: 0,
            id: "pad_gemm_dims".into(),
            title: format!("Pad the GEMM dimension to a multiple of {PAD_TO} ({dim})"),
            kernel,
            kernel_short: kernel_short.clone(),
            class: BottleneckClass::Compute,
            evidence: format!(
                "{} {shapes}: {} is not a multiple of {ALIGN}, so the library leaves its tensor-core kernels for {kernel_short}: {} TFLOP/s, against {} TFLOP/s for this workload's aligned GEMMs ({} calls, {:.1}% of kernel time)",
                row.op,
                if !n.is_multiple_of(ALIGN) { n } else { k },
                kopt_model::figure::figure(achieved / 1e12, 0),
                kopt_model::figure::figure(rate / 1e12, 0),
                row.launches,
                row.pct_of_total
            ),
            action: format!(
                "Pad {dim} (e.g. a vocabulary or a Linear's features; zero rows or columns, then slice the result off): the padded GEMM is predicted at {:.2} ms per call instead of {:.2} ms, {}x for the workload's kernel time.",
                padded_ns / 1e6,
                per_call_ns / 1e6,
                kopt_model::figure::ratio(estimate, 2)
            ),
            source: "GEMM shapes: tensor cores need dimensions in multiples of 8 for fp16/bf16".into(),
            gain: Some(GainEstimate {
                kernel_pct: 100.0 * saved / row.total_ns,
                workload_pct: 100.0 * saved / total_ns,
                saved_ns: saved,
                method: method.clone(),
            }),
            predicted_speedup: Some(PredictedSpeedup {
                estimate,
                low: total_ns / (total_ns - saved_low),
                high: estimate,
                model: format!("speed-up = kernel time / (kernel time - saved); saved = calls x (call time - {method}); low: at half that rate"),
            }),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kopt_model::{ApiCall, ApiKind, GpuActivity, Range};

    #[test]
    fn a_misaligned_gemm_gets_the_padding_fix_from_the_aligned_rate() {
        let row = |op: &str, shapes: &str, launches: u64, ns: f64| OpSummary {
            op: op.into(),
            shapes: Some(shapes.into()),
            kernels: vec![format!("k_{op}")],
            launches,
            total_ns: ns,
            pct_of_total: 0.0,
        };
        // Aligned: 2*4096*768*3072 FLOPs in 30 us per call: 644 TFLOP/s.
        let aligned = row(
            "aten::addmm",
            "[[3072], [4096, 768], [768, 3072], [], []]",
            10,
            300_000.0,
        );
        let head = row("aten::mm", "[[4096, 768], [768, 50257]]", 10, 33_600_000.0);
        let a = Attribution {
            by_kernel: HashMap::new(),
            full_names: vec![vec!["aligned".into()], vec!["Kernel2".into()]],
            table: vec![aligned, head],
            calls: HashMap::new(),
        };
        let recs = gemm_alignment(&a, &misaligned_gemms(&a), 40_000_000.0);
        assert_eq!(recs.len(), 1);
        let r = &recs[0];
        assert_eq!(r.kernel, "Kernel2");
        assert!(r.title.contains("50257 -> 50304"), "{}", r.title);
        let p = r.predicted_speedup.as_ref().unwrap();
        // 316 GFLOP at 644 TFLOP/s = 0.49 ms per call instead of 3.36 ms.
        let saved = 10.0 * (3.36e6 - 2.0 * 4096.0 * 768.0 * 50304.0 / 644.245e12 * 1e9);
        assert!(
            (p.estimate - 40e6 / (40e6 - saved)).abs() < 0.05,
            "{}",
            p.estimate
        );
        assert!(p.low < p.estimate);
        assert_eq!(
            parse_shapes("[[4096, 768], [768, 50257], []]").unwrap()[1],
            vec![768, 50257]
        );
    }

    #[test]
    fn misaligned_gemms_carry_their_dims_and_price() {
        let row = |op: &str, shapes: Option<&str>, launches: u64, ns: f64| OpSummary {
            op: op.into(),
            shapes: shapes.map(Into::into),
            kernels: vec![format!("k_{op}")],
            launches,
            total_ns: ns,
            pct_of_total: 0.0,
        };
        let table = vec![
            row(
                "aten::addmm",
                Some("[[3072], [4096, 768], [768, 3072], [], []]"),
                10,
                300_000.0,
            ),
            row(
                "aten::mm",
                Some("[[4096, 768], [768, 50257]]"),
                10,
                33_600_000.0,
            ),
            row(
                "aten::add",
                Some("[[4096, 768], [4096, 768], []]"),
                10,
                1000.0,
            ),
        ];
        // Full names shorter than the table: no panic.
        let a = Attribution {
            by_kernel: HashMap::new(),
            full_names: vec![],
            table,
            calls: HashMap::new(),
        };
        assert!(has_gemm_shapes(&a));
        let g = misaligned_gemms(&a);
        assert_eq!(g.len(), 1);
        assert_eq!((g[0].row, g[0].dims), (1, (1, 4096, 50257, 768)));
        assert_eq!(g[0].padded, (1, 4096, 50304, 768));
        assert!((g[0].intensity() - 638.0).abs() < 1.0);
        assert!(g[0].saved_low_ns < g[0].saved_ns);
        // The padding finding prices the same saving.
        let recs = gemm_alignment(&a, &misaligned_gemms(&a), 40_000_000.0);
        assert_eq!(recs[0].gain.as_ref().unwrap().saved_ns, g[0].saved_ns);
        assert_eq!(recs[0].kernel, "");
        // Without shapes: none known, nothing priced.
        let bare = Attribution {
            by_kernel: HashMap::new(),
            full_names: vec![],
            table: vec![row("aten::mm", None, 10, 1e6)],
            calls: HashMap::new(),
        };
        assert!(!has_gemm_shapes(&bare));
        assert!(misaligned_gemms(&bare).is_empty());
    }

    #[test]
    fn op_names_parse_and_other_ranges_do_not() {
        assert_eq!(
            parse_op("aten::addmm, seq = 12, sizes = [[8, 768], [768, 3072], []]"),
            Some((
                "aten::addmm".into(),
                Some("[[8, 768], [768, 3072], []]".into())
            ))
        );
        assert_eq!(parse_op("aten::relu"), Some(("aten::relu".into(), None)));
        assert_eq!(
            parse_op("aten::mm, seq = 9, op_id = 21737, sizes = [[4096, 768], [768, 50257]], input_op_ids = [(21733,0)]"),
            Some(("aten::mm".into(), Some("[[4096, 768], [768, 50257]]".into())))
        );
        assert_eq!(
            parse_op("aten::mm, sizes = [[4096"),
            Some(("aten::mm".into(), None))
        );
        assert_eq!(parse_op("step"), None);
        assert_eq!(parse_op("ProfilerStep#3"), None);
    }

    fn kernel(name: &str, corr: u64, start: i64) -> GpuActivity {
        GpuActivity {
            kind: ActivityKind::Kernel,
            name: name.into(),
            start_ns: start,
            end_ns: start + 100,
            device: 0,
            stream: 7,
            correlation: corr,
            grid: None,
            block: None,
            bytes: None,
            copy: None,
        }
    }

    fn launch(corr: u64, at: i64) -> ApiCall {
        ApiCall {
            kind: ApiKind::KernelLaunch,
            name: "cudaLaunchKernel".into(),
            start_ns: at,
            end_ns: at + 5,
            thread: 1,
            correlation: corr,
            frame: None,
            op: None,
            op_span: None,
        }
    }

    fn range(name: &str, s: i64, e: i64) -> Range {
        Range {
            name: name.into(),
            start_ns: s,
            end_ns: e,
            thread: None,
        }
    }

    /// Every call of an op is a range of its own; a kernel launched by the
    /// same op and shapes in every layer lists that op once, with the count.
    #[test]
    fn calls_of_one_op_and_shapes_add_up() {
        let mut t = Timeline::default();
        for layer in 0..4i64 {
            let at = layer * 1000;
            let seq = layer + 1;
            t.ranges.push(range(
                &format!("aten::mm, seq = {seq}, sizes = [[4, 8], [8, 8]]"),
                at,
                at + 100,
            ));
            t.api_calls.push(launch(layer as u64 + 1, at + 10));
            t.activities
                .push(kernel("gemm", layer as u64 + 1, at + 50_000));
        }
        // The same op with other shapes stays apart.
        t.ranges.push(range(
            "aten::mm, seq = 9, sizes = [[4, 8], [8, 16]]",
            9000,
            9100,
        ));
        t.api_calls.push(launch(9, 9010));
        t.activities.push(kernel("gemm", 9, 60_000));
        let a = attribute(&t, 500.0).unwrap();
        let shares = &a.by_kernel["gemm"];
        assert_eq!(shares.len(), 2, "{shares:?}");
        assert_eq!(shares[0].launches, 4);
        assert_eq!(shares[0].shapes.as_deref(), Some("[[4, 8], [8, 8]]"));
        assert_eq!(shares[1].launches, 1);
        assert_eq!(a.table.len(), 2);
        assert_eq!(a.table[0].launches, 4);
    }

    #[test]
    fn the_innermost_open_op_owns_the_launch() {
        let t = Timeline {
            ranges: vec![
                range("step", 0, 1000),
                range("aten::linear, seq = 1, sizes = [[2, 8], [8, 8]]", 10, 200),
                range(
                    "aten::addmm, seq = 1, sizes = [[8], [2, 8], [8, 8]]",
                    20,
                    100,
                ),
                range("aten::gelu, seq = 2, sizes = [[2, 8]]", 300, 400),
            ],
            api_calls: vec![
                launch(1, 30),
                launch(2, 150),
                launch(3, 310),
                launch(4, 500),
            ],
            activities: vec![
                kernel("gemm", 1, 1000),
                kernel("bias_add", 2, 1200),
                kernel("gelu_kernel", 3, 1400),
                kernel("unowned", 4, 1600),
            ],
            ..Default::default()
        };
        let a = attribute(&t, 400.0).unwrap();
        assert_eq!(a.by_kernel["gemm"][0].op, "aten::addmm");
        assert_eq!(a.by_kernel["bias_add"][0].op, "aten::linear");
        assert_eq!(
            a.by_kernel["gelu_kernel"][0].shapes.as_deref(),
            Some("[[2, 8]]")
        );
        assert!(!a.by_kernel.contains_key("unowned"));
        assert_eq!(a.table.len(), 3);
        assert!((a.table[0].pct_of_total - 25.0).abs() < 1e-9);
        let none = Timeline {
            ranges: vec![range("step", 0, 10)],
            ..Default::default()
        };
        assert!(attribute(&none, 1.0).is_none());
    }
}
