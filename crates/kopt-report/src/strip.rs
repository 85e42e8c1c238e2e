//! The timeline strip as inline SVG: one lane per GPU stream and one for the
//! host's launch and sync calls, idle stretches of the GPU shaded, and the
//! whole strip marked when launches set the pace.

use std::fmt::Write;

use kopt_model::{format_duration_ns, TimelineStrip};

use crate::escape;

const W: f64 = 1100.0;
const LABEL: f64 = 170.0;
const LANE: f64 = 22.0;
const TOP: f64 = 22.0;

pub fn svg(s: &TimelineStrip) -> String {
    let h = TOP + LANE * s.lanes.len() as f64 + 28.0;
    let x = |ns: i64| LABEL + (ns as f64 / s.window_ns.max(1) as f64) * (W - LABEL - 10.0);
    let mut o = String::new();
    let _ = write!(
        o,
        r#"<svg class="strip" viewBox="0 0 {W} {h:.0}" role="img" aria-labelledby="strip-title" xmlns="http://www.w3.org/2000/svg"><title id="strip-title">Timeline of {} lanes over {}</title>"#,
        s.lanes.len(),
        escape::html(&format_duration_ns(s.window_ns as f64))
    );
    if s.launch_bound {
        let _ = write!(
            o,
            r#"<text class="strip-flag" x="{LABEL}" y="14">launch bound: shaded stretches are the GPU idling between launches</text>"#
        );
    }
    let bottom = TOP + LANE * s.lanes.len() as f64;
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
        let ns = s.window_ns * q / 4;
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
