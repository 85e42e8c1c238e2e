//! A distributed job's report: the changes first, then one row per rank,
//! the collectives and the straggler.

use std::fmt::Write;

use kopt_model::{format_duration_ns, RanksDiagnosis};

use crate::{Format, Layout, Render};

fn dur(ns: f64) -> String {
    format_duration_ns(ns)
}

fn bytes(b: f64) -> String {
    match b {
        b if b >= 1e9 => format!("{:.2} GB", b / 1e9),
        b if b >= 1e6 => format!("{:.2} MB", b / 1e6),
        b if b >= 1e3 => format!("{:.1} kB", b / 1e3),
        b => format!("{b:.0} B"),
    }
}

/// The rows of the rank table, as cells.
fn rank_cells(d: &RanksDiagnosis) -> Vec<[String; 8]> {
    d.ranks
        .iter()
        .map(|r| {
            [
                r.rank.to_string(),
                r.step_ns.map_or("-".into(), dur),
                dur(r.compute_ns as f64),
                dur(r.comm_ns as f64),
                format!("{:.1}%", r.overlap_pct),
                dur(r.exposed_comm_ns as f64),
                dur(r.idle_ns as f64),
                r.collectives.to_string(),
            ]
        })
        .collect()
}

const RANK_HEAD: [&str; 8] = [
    "rank", "step", "compute", "comm", "overlap", "exposed", "idle", "colls",
];

fn collective_cells(d: &RanksDiagnosis) -> Vec<[String; 6]> {
    d.collectives
        .iter()
        .map(|c| {
            [
                format!(
                    "{}{}",
                    c.op.as_str(),
                    c.dtype
                        .as_deref()
                        .map(|t| format!(" {t}"))
                        .unwrap_or_default()
                ),
                c.per_step.map_or(c.count.to_string(), |p| {
                    format!("{} ({p:.1}/step)", c.count)
                }),
                dur(c.total_ns as f64),
                c.median_bytes.map_or("-".into(), bytes),
                c.bus_bytes_per_s.map_or("-".into(), |b| {
                    format!("{} GB/s", kopt_model::figure::figure(b / 1e9, 1))
                }),
                c.algorithm.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect()
}

const COLL_HEAD: [&str; 6] = [
    "collective",
    "launches",
    "time",
    "median size",
    "bus bw",
    "algorithm",
];

fn table<const N: usize>(o: &mut String, head: [&str; N], rows: &[[String; N]]) {
    let mut width = head.map(str::len);
    for r in rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |o: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        let parts: Vec<String> = cells
            .zip(width)
            .enumerate()
            .map(|(i, (c, w))| {
                if i == 0 {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        let _ = writeln!(o, "  {}", parts.join("  ").trim_end());
    };
    line(o, &mut head.iter().copied());
    for r in rows {
        line(o, &mut r.iter().map(String::as_str));
    }
}

fn md_table<const N: usize>(o: &mut String, head: [&str; N], rows: &[[String; N]]) {
    let _ = writeln!(o, "| {} |", head.join(" | "));
    let _ = writeln!(o, "|{}", "---|".repeat(N));
    for r in rows {
        let cells: Vec<String> = r.iter().map(|c| crate::escape::markdown_cell(c)).collect();
        let _ = writeln!(o, "| {} |", cells.join(" | "));
    }
}

fn terminal(d: &RanksDiagnosis, md: bool) -> String {
    let mut o = String::new();
    let h = |o: &mut String, t: &str| {
        let _ = if md {
            writeln!(o, "\n## {t}\n")
        } else {
            writeln!(o, "\n{t}")
        };
    };
    let _ = writeln!(
        o,
        "{}{} ranks{}",
        if md { "# kopt: " } else { "kopt: " },
        d.world_size,
        d.device_name
            .as_deref()
            .map(|n| format!(" on {n}"))
            .unwrap_or_default()
    );
    h(&mut o, "Recommendations");
    if d.recommendations.is_empty() {
        let _ = writeln!(
            o,
            "  none: communication is hidden and the ranks are balanced"
        );
    }
    for r in &d.recommendations {
        let gain = r.predicted_speedup.as_ref().map_or(String::new(), |p| {
            format!(
                " -- predicted {}x ({})",
                kopt_model::figure::ratio(p.estimate, 2),
                kopt_model::figure::ratio_range(p.low, p.high, 2)
            )
        });
        let _ = writeln!(o, "  #{} {}{gain}", r.rank, r.title);
        let _ = writeln!(o, "     why: {}", r.evidence);
        let _ = writeln!(o, "     do:  {}", r.action);
    }
    h(
        &mut o,
        "Ranks (GPU time over the trace; overlap = communication under compute)",
    );
    if md {
        md_table(&mut o, RANK_HEAD, &rank_cells(d));
    } else {
        table(&mut o, RANK_HEAD, &rank_cells(d));
    }
    if !d.collectives.is_empty() {
        h(
            &mut o,
            "Collectives (the rank that waited least; bus bandwidth as nccl-tests defines it)",
        );
        if md {
            md_table(&mut o, COLL_HEAD, &collective_cells(d));
        } else {
            table(&mut o, COLL_HEAD, &collective_cells(d));
        }
    }
    if let Some(s) = &d.straggler {
        h(&mut o, "Straggler");
        let _ = writeln!(
            o,
            "  rank {} enters {:.0}% of the collectives last (median spread {}): {}",
            s.rank,
            s.last_arrival_pct,
            dur(s.median_wait_ns),
            s.cause
        );
    } else if let Some(skew) = d.median_skew_ns {
        let _ = writeln!(
            o,
            "\n  {} collectives matched across ranks; median entry spread {}: no straggler",
            d.matched_collectives,
            dur(skew)
        );
    }
    for n in &d.notes {
        let _ = writeln!(o, "\nnote: {n}");
    }
    o
}

/// One bar per rank over its span: compute alone, communication under
/// compute, communication exposed, copies and idle, in proportion.
fn rank_bars(d: &RanksDiagnosis) -> String {
    const W: f64 = 720.0;
    const ROW: usize = 22;
    let parts = [
        ("compute alone", "#4c78a8"),
        ("communication under compute", "#72b7b2"),
        ("communication exposed", "#e45756"),
        ("copies and other", "#b279a2"),
        ("idle", "#d8d8d8"),
    ];
    let mut o = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">",
        W as usize + 80,
        ROW * (d.ranks.len() + 2)
    );
    for (i, r) in d.ranks.iter().enumerate() {
        let span = r.span_ns.max(1) as f64;
        let compute_alone = (r.compute_ns - r.overlapped_comm_ns).max(0) as f64;
        let other = (span
            - compute_alone
            - r.overlapped_comm_ns as f64
            - r.exposed_comm_ns as f64
            - r.idle_ns as f64)
            .max(0.0);
        let widths = [
            compute_alone,
            r.overlapped_comm_ns as f64,
            r.exposed_comm_ns as f64,
            other,
            r.idle_ns as f64,
        ];
        let y = i * ROW;
        let _ = write!(o, "<text x=\"0\" y=\"{}\">rank {}</text>", y + 15, r.rank);
        let mut x = 70.0;
        for (w, (label, color)) in widths.iter().zip(parts) {
            let px = w / span * W;
            let _ = write!(
                o,
                "<rect x=\"{x:.1}\" y=\"{y}\" width=\"{px:.1}\" height=\"{}\" fill=\"{color}\"><title>{label}: {}</title></rect>",
                ROW - 4,
                dur(*w)
            );
            x += px;
        }
    }
    let y = d.ranks.len() * ROW + 14;
    let mut x = 70.0;
    for (label, color) in parts {
        let _ = write!(
            o,
            "<rect x=\"{x}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{color}\"/><text x=\"{}\" y=\"{y}\">{label}</text>",
            y - 9,
            x + 14.0
        );
        x += 14.0 + 7.0 * label.len() as f64 + 12.0;
    }
    o + "</svg>"
}

impl Render for RanksDiagnosis {
    fn render(&self, format: Format, _layout: Layout) -> String {
        match format {
            Format::Json => {
                let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
                s.push('\n');
                s
            }
            Format::Markdown => terminal(self, true),
            Format::Terminal => crate::escape::terminal_lines(&terminal(self, false)).into_owned(),
            Format::Html => format!(
                "<!doctype html><meta charset=\"utf-8\"><title>kopt: ranks</title>\n<h1>kopt: {} ranks</h1>\n{}\n<pre>{}</pre>\n",
                self.world_size,
                rank_bars(self),
                crate::escape::html(&terminal(self, false))
            ),
        }
    }
}
