//! The timeline strip of the steady state alone. A trace's start-up
//! (imports, context creation, first calls, autotuning) can take most of its
//! window: a strip of the whole trace then spends its width there and
//! merges the steady state's launches into solid bars. The steady state gets
//! a strip of its own, at its own resolution, and says what it leaves out.

use kopt_model::{SteadyStrip, Timeline, TimelineStrip, TimelineSummary};

use crate::timeline::strip;

/// The steady state gets its own strip when it spans less than this share
/// of the whole strip's window.
const OWN_STRIP_BELOW: f64 = 0.9;

/// The steady state's strip, or `None` where it is (nearly) the whole
/// window or was not found.
pub fn steady_strip(
    t: &Timeline,
    summary: &TimelineSummary,
    whole: &TimelineStrip,
) -> Option<SteadyStrip> {
    let st = summary.steady_state.as_ref()?;
    let span = st.end_ns - st.start_ns;
    if span <= 0 || span as f64 >= OWN_STRIP_BELOW * whole.window_ns as f64 {
        return None;
    }
    // Sampled traces are spliced (time between windows cut) as the
    // summary's figures are.
    let spliced = t.spliced();
    let t: &Timeline = &spliced;
    // The steady state's bounds are offsets from the trace's start, as the
    // summary takes them.
    let trace_start = crate::timeline::trace_start_ns(t)?;
    let trace_end = t.activities.iter().map(|a| a.end_ns).max()?;
    let (lo, hi) = (trace_start + st.start_ns, trace_start + st.end_ns);
    let inside = |s: i64| s >= lo && s < hi;
    let window = Timeline {
        activities: t
            .activities
            .iter()
            .filter(|a| inside(a.start_ns))
            .cloned()
            .collect(),
        api_calls: t
            .api_calls
            .iter()
            .filter(|c| inside(c.start_ns))
            .cloned()
            .collect(),
        ..Timeline::default()
    };
    Some(SteadyStrip {
        strip: strip(&window, summary)?,
        cut_before_ns: st.start_ns.max(0),
        cut_after_ns: (trace_end - hi).max(0),
    })
}
