//! Steps marked by the program itself: ProfilerStep#N and repeated NVTX ranges.

use std::collections::HashMap;

use kopt_model::{GpuActivity, Range, StepSource, Timeline};

use super::Steps;

/// Step markers of other host threads, left out of the steps.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(super) struct OtherThreads {
    pub ranges: usize,
    pub threads: usize,
}

impl OtherThreads {
    /// The report's note on the markers left out, where any were.
    pub fn sentence(&self, family: &str) -> Option<String> {
        (self.ranges > 0).then(|| {
            format!(
                "Steps come from one host thread: {} \"{family}\" range(s) of {} other thread(s) were left out of the step list (another thread's markers, a data loader's or a logger's, are not the loop's steps).",
                self.ranges, self.threads
            )
        })
    }

    /// What the step detail adds: nothing when no range was left out.
    pub fn note(&self) -> String {
        if self.ranges == 0 {
            return String::new();
        }
        format!(
            "; {} range(s) of {} other host thread(s) left out: steps come from one thread",
            self.ranges, self.threads
        )
    }
}

/// The ranges of one host thread: the one holding the most (the first to
/// start on a tie), with the ranges whose thread the trace does not say.
/// A second thread's markers (a data loader's, a logger's) are not steps
/// of the same loop.
pub(super) fn one_thread(ranges: Vec<&Range>) -> (Vec<&Range>, OtherThreads) {
    let mut per: HashMap<u64, (usize, i64)> = HashMap::new();
    for r in &ranges {
        if let Some(tid) = r.thread {
            let e = per.entry(tid).or_insert((0, r.start_ns));
            e.0 += 1;
            e.1 = e.1.min(r.start_ns);
        }
    }
    let Some(main) = per
        .iter()
        .max_by_key(|(tid, (n, first))| (*n, std::cmp::Reverse(*first), std::cmp::Reverse(**tid)))
        .map(|(tid, _)| *tid)
    else {
        return (ranges, OtherThreads::default());
    };
    let others = OtherThreads {
        ranges: per
            .iter()
            .filter(|(t, _)| **t != main)
            .map(|(_, (n, _))| n)
            .sum(),
        threads: per.len() - 1,
    };
    let kept = ranges
        .into_iter()
        .filter(|r| r.thread.is_none_or(|t| t == main))
        .collect();
    (kept, others)
}

pub(super) fn profiler_steps(t: &Timeline) -> Option<Steps> {
    let mut seen = std::collections::HashSet::new();
    let (marked, others) = one_thread(
        t.ranges
            .iter()
            .filter(|r| kopt_model::range_family(&r.name) == "ProfilerStep")
            .collect(),
    );
    let mut spans: Vec<(i64, i64)> = marked
        .into_iter()
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
        detail: format!("torch.profiler's ProfilerStep#N annotations ({n} steps, each counted once: the CPU and GPU copies of a step are one step){}", others.note()),
        starts: spans.iter().map(|s| s.0).collect(),
        ends: spans.iter().map(|s| s.1).collect(),
        contiguous: false,
        other_threads: others.sentence("ProfilerStep"),
    })
}

pub(super) fn nvtx_steps(t: &Timeline, order: &[(&GpuActivity, (i64, i64))]) -> Option<Steps> {
    let mut by_family: HashMap<&str, Vec<&Range>> = HashMap::new();
    for r in &t.ranges {
        by_family
            .entry(kopt_model::range_family(&r.name))
            .or_default()
            .push(r);
    }
    // Each family from one host thread, the others' ranges counted.
    let mut others: HashMap<&str, OtherThreads> = HashMap::new();
    let mut families: HashMap<&str, Vec<(i64, i64)>> = by_family
        .into_iter()
        .map(|(name, ranges)| {
            let (kept, left) = one_thread(ranges);
            others.insert(name, left);
            (name, kept.iter().map(|r| (r.start_ns, r.end_ns)).collect())
        })
        .collect();
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
    let left = others.get(name).copied().unwrap_or_default();
    Some(Steps {
        source: StepSource::Nvtx,
        family: Some(name.to_string()),
        detail: format!(
            "the NVTX range \"{name}\" ({} ranges, the outermost repeated range{nested}){}",
            spans.len(),
            left.note()
        ),
        starts: spans.iter().map(|s| s.0).collect(),
        ends: spans.iter().map(|s| s.1).collect(),
        contiguous: false,
        other_threads: left.sentence(name),
    })
}
