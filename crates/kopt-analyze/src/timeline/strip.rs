//! The drawable strip of GPU lanes, host calls and idle stretches.

use kopt_model::{ApiKind, Timeline, TimelineSummary};

/// Horizontal resolution the strip is merged to (spans closer than this share of the window join).
pub(super) const STRIP_COLUMNS: i64 = 1500;

/// The drawable strip: GPU lanes per device and stream, a host lane of
/// launch/sync calls, and the idle stretches of the GPU.
pub fn strip(t: &Timeline, summary: &TimelineSummary) -> Option<kopt_model::TimelineStrip> {
    let spliced = t.spliced();
    let t: &Timeline = &spliced;
    let start = t
        .activities
        .iter()
        .map(|a| a.start_ns)
        .chain(
            t.api_calls
                .iter()
                .filter(|c| c.kind != ApiKind::Other)
                .map(|c| c.start_ns),
        )
        .min()?;
    let end = t.activities.iter().map(|a| a.end_ns).max()?;
    let window = (end - start).max(1);
    let pixel = (window / STRIP_COLUMNS).max(1);
    let merge = |mut spans: Vec<(i64, i64)>| -> Vec<(i64, i64)> {
        spans.sort_unstable();
        let mut out: Vec<(i64, i64)> = Vec::new();
        for (s, e) in spans {
            match out.last_mut() {
                Some(last) if s - last.1 <= pixel => last.1 = last.1.max(e),
                _ => out.push((s, e)),
            }
        }
        out
    };
    let mut lanes: std::collections::BTreeMap<(u32, u64), Vec<(i64, i64)>> = Default::default();
    for a in &t.activities {
        lanes
            .entry((a.device, a.stream))
            .or_default()
            .push((a.start_ns - start, a.end_ns - start));
    }
    let mut out: Vec<kopt_model::StripLane> = lanes
        .into_iter()
        .map(|((dev, stream), spans)| kopt_model::StripLane {
            label: format!("GPU {dev} stream {stream}"),
            spans: merge(spans),
            host: false,
        })
        .collect();
    let host: Vec<(i64, i64)> = t
        .api_calls
        .iter()
        .filter(|c| c.kind != ApiKind::Other && c.start_ns >= start)
        .map(|c| (c.start_ns - start, (c.end_ns - start).min(window)))
        .collect();
    if !host.is_empty() {
        out.insert(
            0,
            kopt_model::StripLane {
                label: "host launch / sync calls".into(),
                spans: merge(host),
                host: true,
            },
        );
    }
    // Idle stretches: complement of all GPU spans, wider than a pixel.
    let all: Vec<(i64, i64)> = merge(
        t.activities
            .iter()
            .map(|a| (a.start_ns - start, a.end_ns - start))
            .collect(),
    );
    let idle = all
        .windows(2)
        .map(|w| (w[0].1, w[1].0 - w[0].1))
        .filter(|(_, d)| *d > pixel)
        .collect();
    Some(kopt_model::TimelineStrip {
        window_ns: window,
        lanes: out,
        idle,
        launch_bound: summary.launch_bound,
    })
}
