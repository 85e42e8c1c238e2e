//! Kernels traced back to the framework ops that launched them. PyTorch's
//! `emit_nvtx(record_shapes=True)` wraps every op in an NVTX range named
//! `aten::addmm, seq = 12, sizes = [[8, 768], [768, 3072], []]`; a kernel
//! belongs to the innermost op range open when its launch call started.

use std::collections::HashMap;

use kopt_model::{ActivityKind, OpShare, OpSummary, Timeline};

/// An op range's name parsed: the op and its input shapes.
pub fn parse_op(name: &str) -> Option<(String, Option<String>)> {
    let op = name.split(',').next()?.trim();
    // Framework ops are namespaced (`aten::`, `prim::`, `torchvision::`);
    // user annotations and step markers are not ops.
    if !op.contains("::") || op.contains(' ') {
        return None;
    }
    let shapes = name
        .find("sizes = ")
        .map(|i| name[i + "sizes = ".len()..].trim().to_string())
        .filter(|s| !s.is_empty());
    Some((op.to_string(), shapes))
}

/// Per kernel name, the ops that launched it; and the per-op table.
pub struct Attribution {
    pub by_kernel: HashMap<String, Vec<OpShare>>,
    pub table: Vec<OpSummary>,
}

/// Attribute every kernel of `t` whose launch call falls inside an op range.
/// None when the timeline has no op ranges.
pub fn attribute(t: &Timeline, total_ns: f64) -> Option<Attribution> {
    let mut ranges: Vec<(i64, i64, usize)> = Vec::new();
    let mut parsed: Vec<(String, Option<String>)> = Vec::new();
    for r in &t.ranges {
        if let Some(p) = parse_op(&r.name) {
            ranges.push((r.start_ns, r.end_ns, parsed.len()));
            parsed.push(p);
        }
    }
    if ranges.is_empty() {
        return None;
    }
    ranges.sort_unstable_by_key(|&(s, e, _)| (s, std::cmp::Reverse(e)));
    // Launch calls by correlation id: a kernel's op is decided where it was launched.
    let launch_at: HashMap<u64, i64> = t
        .api_calls
        .iter()
        .filter(|a| a.correlation != 0)
        .map(|a| (a.correlation, a.start_ns))
        .collect();
    let mut kernels: Vec<(i64, &str, i64)> = t
        .activities
        .iter()
        .filter(|a| a.kind == ActivityKind::Kernel)
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
        *per_kernel.entry((name, op)).or_default() += 1;
        let e = per_op.entry(op).or_default();
        e.0 += 1;
        e.1 += dur.max(0) as f64;
        if !e.2.contains(&name) {
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
        shares.sort_by(|a, b| b.launches.cmp(&a.launches).then(a.op.cmp(&b.op)));
    }
    // Ops with the same name and shapes are one row.
    let mut rows: HashMap<(String, Option<String>), OpSummary> = HashMap::new();
    for (op, (launches, ns, names)) in per_op {
        let (o, shapes) = &parsed[op];
        let row = rows
            .entry((o.clone(), shapes.clone()))
            .or_insert_with(|| OpSummary {
                op: o.clone(),
                shapes: shapes.clone(),
                kernels: Vec::new(),
                launches: 0,
                total_ns: 0.0,
                pct_of_total: 0.0,
            });
        row.launches += launches;
        row.total_ns += ns;
        for n in names {
            let short = kopt_model::kernel_short_name(n);
            if !row.kernels.contains(&short) {
                row.kernels.push(short);
            }
        }
    }
    let mut table: Vec<OpSummary> = rows.into_values().collect();
    for r in &mut table {
        r.pct_of_total = if total_ns > 0.0 {
            100.0 * r.total_ns / total_ns
        } else {
            0.0
        };
    }
    table.sort_by(|a, b| b.total_ns.total_cmp(&a.total_ns).then(a.op.cmp(&b.op)));
    Some(Attribution { by_kernel, table })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kopt_model::{ApiCall, ApiKind, GpuActivity, Range};

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
        }
    }

    fn range(name: &str, s: i64, e: i64) -> Range {
        Range {
            name: name.into(),
            start_ns: s,
            end_ns: e,
        }
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
