//! Steps marked by the program itself: ProfilerStep#N and repeated NVTX ranges.

use std::collections::HashMap;

use kopt_model::{GpuActivity, StepSource, Timeline};

use super::Steps;

pub(super) fn profiler_steps(t: &Timeline) -> Option<Steps> {
    let mut seen = std::collections::HashSet::new();
    let mut spans: Vec<(i64, i64)> = t
        .ranges
        .iter()
        .filter(|r| kopt_model::range_family(&r.name) == "ProfilerStep")
        .filter(|r| seen.insert(r.name.as_str()))
        .map(|r| (r.start_ns, r.end_ns))
        .collect();
    if spans.len() < 2 {
        return None;
    }
    spans.sort_unstable();
    let n = spans.len();
    Some(Steps {
        source: StepSource::ProfilerStep,
        family: Some("ProfilerStep".into()),
        detail: format!("torch.profiler's ProfilerStep#N annotations ({n} steps, each counted once: the CPU and GPU copies of a step are one step)"),
        starts: spans.iter().map(|s| s.0).collect(),
        ends: spans.iter().map(|s| s.1).collect(),
        contiguous: false,
    })
}

pub(super) fn nvtx_steps(t: &Timeline, order: &[(&GpuActivity, (i64, i64))]) -> Option<Steps> {
    let mut families: HashMap<&str, Vec<(i64, i64)>> = HashMap::new();
    for r in &t.ranges {
        families
            .entry(kopt_model::range_family(&r.name))
            .or_default()
            .push((r.start_ns, r.end_ns));
    }
    families.retain(|name, v| *name != "ProfilerStep" && v.len() >= 3);
    for v in families.values_mut() {
        v.sort_unstable();
    }
    let inside = |inner: &[(i64, i64)], outer: &[(i64, i64)]| {
        let within = inner
            .iter()
            .filter(|(s, e)| {
                let i = outer.partition_point(|o| o.0 <= *s);
                i > 0 && outer[i - 1].1 >= *e
            })
            .count();
        within as f64 >= 0.9 * inner.len() as f64
    };
    let launches: Vec<i64> = order.iter().map(|(_, (s, _))| *s).collect();
    let holds_work = |spans: &[(i64, i64)]| {
        let with = spans
            .iter()
            .filter(|(s, e)| {
                let i = launches.partition_point(|l| l < s);
                launches.get(i).is_some_and(|l| l <= e)
            })
            .count();
        with * 2 >= spans.len()
    };
    // The outermost repeated range: one not nested in another repeated family.
    // Sorted: the detail lists the nested names, the same every run.
    let mut names: Vec<&str> = families.keys().copied().collect();
    names.sort_unstable();
    let (name, spans) = families
        .iter()
        .filter(|(name, spans)| {
            // A phase (kopt:forward ...) is part of a step, never one.
            !name.starts_with("kopt:")
                && holds_work(spans)
                && !names.iter().any(|o| {
                    o != *name && families[o].len() < spans.len() && inside(spans, &families[o])
                })
        })
        .max_by_key(|(name, spans)| {
            let covered: i64 = spans.iter().map(|(s, e)| e - s).sum();
            (spans.len(), covered, std::cmp::Reverse(**name))
        })?;
    let nested = names
        .iter()
        .filter(|o| *o != name && inside(&families[*o], spans))
        .map(|o| format!("\"{o}\""))
        .collect::<Vec<_>>();
    let nested = if nested.is_empty() {
        String::new()
    } else {
        format!("; {} nest inside it", nested.join(", "))
    };
    Some(Steps {
        source: StepSource::Nvtx,
        family: Some(name.to_string()),
        detail: format!(
            "the NVTX range \"{name}\" ({} ranges, the outermost repeated range{nested})",
            spans.len()
        ),
        starts: spans.iter().map(|s| s.0).collect(),
        ends: spans.iter().map(|s| s.1).collect(),
        contiguous: false,
    })
}
