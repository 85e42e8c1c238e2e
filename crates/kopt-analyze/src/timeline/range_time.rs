//! GPU time per iteration range.

use kopt_model::{ApiKind, Timeline};

/// GPU time per iteration: for each range of the iteration family (the most
/// repeated NVTX / ProfilerStep name, or `family`), the time from the first
/// GPU activity issued inside it (kernel, copy, set) starting to the last one
/// ending, so launch gaps count as well as GPU work. An activity belongs to
/// the range its API call (kernel or graph launch, copy, set) started in,
/// matched by correlation id; without API records, to the range it started
/// in. Returns the family's name and one value per range that issued work.
pub fn gpu_time_per_range(t: &Timeline, family: Option<&str>) -> Option<(String, Vec<i64>)> {
    let ranges = t.iteration_ranges(family);
    let name = kopt_model::range_family(&ranges.first()?.name).to_string();
    let launch_start: rustc_hash::FxHashMap<u64, i64> = t
        .api_calls
        .iter()
        .filter(|c| c.kind != ApiKind::Other && c.correlation != 0)
        .map(|c| (c.correlation, c.start_ns))
        .collect();
    // Ranges of one family do not nest: sort by start and binary-search each activity.
    let mut spans: Vec<(i64, i64)> = ranges.iter().map(|r| (r.start_ns, r.end_ns)).collect();
    spans.sort_unstable();
    let mut per: Vec<Option<(i64, i64)>> = vec![None; spans.len()];
    for k in &t.activities {
        let at = launch_start
            .get(&k.correlation)
            .copied()
            .unwrap_or(k.start_ns);
        let idx = spans.partition_point(|s| s.0 <= at);
        if idx > 0 && at <= spans[idx - 1].1 {
            let slot = &mut per[idx - 1];
            *slot = Some(match *slot {
                Some((s, e)) => (s.min(k.start_ns), e.max(k.end_ns)),
                None => (k.start_ns, k.end_ns),
            });
        }
    }
    Some((
        name,
        per.into_iter().flatten().map(|(s, e)| e - s).collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::synthetic::{kernel, launch};
    use kopt_model::{ApiCall, GpuActivity};

    #[test]
    fn gpu_time_per_range_follows_the_launch() {
        // Two steps; the second step's kernel starts after the range closed
        // (asynchronous), but its launch was inside: it still counts there.
        // The first step: 120..150 and 160..170, a 50 ns span with its gap.
        let t = Timeline {
            activities: vec![kernel(120, 30, 1), kernel(160, 10, 2), kernel(320, 50, 3)],
            api_calls: vec![launch(110, 5, 1), launch(130, 5, 2), launch(250, 5, 3)],
            ranges: vec![
                kopt_model::Range {
                    name: "step".into(),
                    start_ns: 100,
                    end_ns: 200,
                    thread: None,
                },
                kopt_model::Range {
                    name: "step".into(),
                    start_ns: 200,
                    end_ns: 300,
                    thread: None,
                },
            ],
            ..Timeline::default()
        };
        assert_eq!(
            gpu_time_per_range(&t, None),
            Some(("step".to_string(), vec![50, 50]))
        );
        assert_eq!(gpu_time_per_range(&t, Some("other")), None);

        // A copy issued in the step before its kernels starts the step's GPU time.
        let mut with_copy = t.clone();
        with_copy.api_calls.push(ApiCall {
            kind: ApiKind::Memory,
            name: "cudaMemcpyAsync".into(),
            start_ns: 102,
            end_ns: 104,
            thread: 1,
            correlation: 5,
            frame: None,
            op: None,
            op_span: None,
        });
        with_copy.activities.push(GpuActivity {
            kind: kopt_model::ActivityKind::Memcpy,
            name: "Memcpy HtoD".into(),
            start_ns: 105,
            end_ns: 115,
            device: 0,
            stream: 7,
            correlation: 5,
            grid: None,
            block: None,
            bytes: Some(4096),
            copy: None,
        });
        assert_eq!(
            gpu_time_per_range(&with_copy, None),
            Some(("step".to_string(), vec![65, 50]))
        );

        // A graph replay: its kernels carry the cudaGraphLaunch call's correlation id.
        let mut graph_launch = launch(1_010, 5, 9);
        graph_launch.kind = ApiKind::GraphLaunch;
        let g = Timeline {
            activities: vec![kernel(1_100, 10, 9), kernel(1_112, 10, 9)],
            api_calls: vec![graph_launch],
            ranges: vec![kopt_model::Range {
                name: "step".into(),
                start_ns: 1_000,
                end_ns: 1_020,
                thread: None,
            }],
            ..Timeline::default()
        };
        assert_eq!(
            gpu_time_per_range(&g, None),
            Some(("step".to_string(), vec![22]))
        );
    }
}
