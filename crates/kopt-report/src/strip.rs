//! The timeline strip as inline SVG: one lane per GPU stream and one for the
//! host's launch and sync calls, idle stretches of the GPU shaded, and the
//! whole strip marked when launches set the pace.

use std::fmt::Write;

use kopt_model::{format_duration_ns, SteadyStrip, TimelineStrip};

use crate::escape;

const W: f64 = 1100.0;
const LABEL: f64 = 170.0;
const LANE: f64 = 22.0;
const TOP: f64 = 22.0;
const RIGHT: f64 = 10.0;
/// Width of the block that stands for the time a steady-state strip leaves
/// out on either side.
const CUT_W: f64 = 64.0;

/// The strips the page shows: the steady state's first where it has one,
/// the whole trace then folded away under it; else the whole trace.
pub fn strips(whole: &TimelineStrip, steady: Option<&SteadyStrip>) -> String {
    let Some(st) = steady else {
        return svg(whole);
    };
    format!(
        r#"{}<details class="strip-whole"><summary>The whole trace, start-up included ({})</summary>{}</details>"#,
        draw(&st.strip, st.cut_before_ns, st.cut_after_ns, "strip-title"),
        escape::html(&format_duration_ns(whole.window_ns as f64)),
        draw(whole, 0, 0, "strip-whole-title")
    )
}

/// The whole trace's strip.
pub fn svg(s: &TimelineStrip) -> String {
    draw(s, 0, 0, "strip-title")
}

/// A strip; `before` and `after` (ns) are the trace's time it leaves out,
/// each drawn as a narrow block of fixed width at its side.
fn draw(s: &TimelineStrip, before: i64, after: i64, title_id: &str) -> String {
    let h = TOP + LANE * s.lanes.len() as f64 + 28.0;
    let x0 = LABEL + if before > 0 { CUT_W } else { 0.0 };
    let x1 = W - RIGHT - if after > 0 { CUT_W } else { 0.0 };
    let x = |ns: i64| x0 + (ns as f64 / s.window_ns.max(1) as f64) * (x1 - x0);
    let mut o = String::new();
    let what = if before > 0 || after > 0 {
        "Steady state"
    } else {
        "Timeline"
    };
    let _ = write!(
        o,
        r#"<svg class="strip" viewBox="0 0 {W} {h:.0}" role="img" aria-labelledby="{title_id}" xmlns="http://www.w3.org/2000/svg"><title id="{title_id}">{what}: {} lanes over {}</title>"#,
        s.lanes.len(),
        escape::html(&format_duration_ns(s.window_ns as f64))
    );
    let bottom = TOP + LANE * s.lanes.len() as f64;
    for (ns, bx, side, what) in [
        (
            before,
            LABEL,
            "before",
            "start-up and warm-up before the steady state",
        ),
        (after, x1, "after", "work after the steady state"),
    ] {
        if ns <= 0 {
            continue;
        }
        let d = escape::html(&format_duration_ns(ns as f64));
        let _ = write!(
            o,
            r#"<rect class="cut" x="{bx:.1}" y="{TOP}" width="{:.1}" height="{:.1}"><title>{what}: {d}, left out of this strip</title></rect><text class="cut-label" x="{:.1}" y="{:.1}" text-anchor="middle">{side}</text><text class="cut-label" x="{:.1}" y="{:.1}" text-anchor="middle">{d}</text>"#,
            CUT_W - 4.0,
            bottom - TOP,
            bx + CUT_W / 2.0 - 2.0,
            (TOP + bottom) / 2.0 - 2.0,
            bx + CUT_W / 2.0 - 2.0,
            (TOP + bottom) / 2.0 + 11.0,
        );
    }
    if s.launch_bound {
        let _ = write!(
            o,
            r#"<text class="strip-flag" x="{LABEL}" y="14">launch bound: shaded stretches are the GPU idling between launches</text>"#
        );
    }
    for (start, dur) in &s.idle {
        let _ = write!(
            o,
            r#"<rect class="idle" x="{:.1}" y="{TOP}" width="{:.2}" height="{:.1}"><title>GPU idle {}</title></rect>"#,
            x(*start),
            (x(start + dur) - x(*start)).max(0.5),
            bottom - TOP,
            escape::html(&format_duration_ns(*dur as f64))
        );
    }
    for (i, lane) in s.lanes.iter().enumerate() {
        let y = TOP + LANE * i as f64;
        let _ = write!(
            o,
            r#"<text class="lane-label" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LABEL - 6.0,
            y + 15.0,
            escape::html(&lane.label)
        );
        let class = if lane.host { "span host" } else { "span gpu" };
        for (a, b) in &lane.spans {
            let _ = write!(
                o,
                r#"<rect class="{class}" x="{:.1}" y="{:.1}" width="{:.2}" height="{:.1}"/>"#,
                x(*a),
                y + 3.0,
                (x(*b) - x(*a)).max(0.6),
                LANE - 6.0
            );
        }
    }
    for q in 0..=4 {
        // In i128: a window near i64::MAX (a trace whose times lie decades
        // apart) overflowed when multiplied before the division.
        let ns = (i128::from(s.window_ns) * i128::from(q) / 4) as i64;
        let anchor = match q {
            0 => "start",
            4 => "end",
            _ => "middle",
        };
        let _ = write!(
            o,
            r#"<text class="tick" x="{:.1}" y="{:.1}" text-anchor="{anchor}">{}</text>"#,
            x(ns),
            bottom + 16.0,
            escape::html(&format_duration_ns(ns as f64))
        );
    }
    o.push_str("</svg>");
    o
}
