//! When each GPU activity was launched, and where the trace starts.

use kopt_model::{ApiKind, GpuActivity, Timeline};

/// Launch call spans (host start, end) by correlation id. Fx-hashed: the
/// keys are the tracer's own counters, and a million of them are looked
/// up several times per analysis.
pub(crate) type CallSpans = rustc_hash::FxHashMap<u64, (i64, i64)>;

/// The launch calls' spans by correlation id.
pub(super) fn launch_spans(t: &Timeline) -> CallSpans {
    t.api_calls
        .iter()
        .filter(|c| c.kind != ApiKind::Other && c.correlation != 0)
        .map(|c| (c.correlation, (c.start_ns, c.end_ns)))
        .collect()
}

/// When an activity was launched: its API call's start (by correlation),
/// else its own start. Also the call's end (or the activity's end).
pub(super) fn launched_at(a: &GpuActivity, calls: &CallSpans) -> (i64, i64) {
    match calls.get(&a.correlation).filter(|_| a.correlation != 0) {
        Some(&(s, e)) => (s.min(a.start_ns), e.min(a.end_ns).max(s)),
        None => (a.start_ns, a.end_ns),
    }
}

/// Where the trace starts: its first record of any kind, so start-up
/// (imports, context creation) counts from there. The steady state's
/// bounds in the summary are offsets from it.
pub(crate) fn trace_start_ns(t: &Timeline) -> Option<i64> {
    t.api_calls
        .iter()
        .map(|c| c.start_ns)
        .chain(t.activities.iter().map(|a| a.start_ns))
        .chain(t.ranges.iter().map(|r| r.start_ns))
        .min()
}
