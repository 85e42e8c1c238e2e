//! `kopt tune`'s report in every format, from the typed [`TuneReport`]: the
//! winner and its speed-up over the baseline config with the interval and
//! verdict, then every trial; the HTML page adds a chart of time per config.

use kopt_model::figure::{figure, ratio};
use std::fmt::Write as _;

use kopt_model::format_duration_ns;
use kopt_model::tune::{TrialResult, TrialStatus, TuneReport};

use crate::escape;
use crate::{Format, Layout, Render};

fn median(t: &TrialResult) -> String {
    t.median_s
        .map_or("-".into(), |m| format_duration_ns(m * 1e9))
}

fn noise(t: &TrialResult) -> String {
    t.relative_noise
        .map_or("-".into(), |n| format!("{}%", figure(100.0 * n, 2)))
}

fn speedup(t: &TrialResult) -> String {
    t.speedup_vs_baseline
        .map_or("-".into(), |s| format!("{}x", ratio(s, 3)))
}

/// Trials fastest first; rejected, failed and pruned after the measured.
fn ordered(r: &TuneReport) -> Vec<&TrialResult> {
    let mut v: Vec<&TrialResult> = r.trials.iter().collect();
    v.sort_by(|a, b| {
        let rank = |t: &TrialResult| match t.status {
            TrialStatus::Ok => 0,
            TrialStatus::Pruned => 1,
            TrialStatus::Rejected => 2,
            TrialStatus::Failed => 3,
        };
        rank(a).cmp(&rank(b)).then(
            a.median_s
                .unwrap_or(f64::MAX)
                .total_cmp(&b.median_s.unwrap_or(f64::MAX)),
        )
    });
    v
}

fn summary_lines(r: &TuneReport) -> Vec<String> {
    let mut o = Vec::new();
    o.push(format!(
        "kopt tune: {} over {} configs ({} in the space, {} excluded by constraints){}",
        r.strategy,
        r.trials.len(),
        r.space_size,
        r.excluded,
        r.key
            .as_deref()
            .map_or(String::new(), |k| format!(", key {k}"))
    ));
    o.push(format!(
        "device: {}{}; GPUs: {}; timed by: {}",
        r.device.as_deref().unwrap_or("-"),
        r.driver
            .as_deref()
            .map_or(String::new(), |d| format!(" (driver {d})")),
        if r.gpus.is_empty() {
            "as given".to_string()
        } else {
            r.gpus.join(",")
        },
        r.source
    ));
    o.push(format!(
        "trials: {} measured, {} from the cache; samples: {} in trials ({} measured now), {} in the final comparison{}; {:.1} s",
        r.measured_trials,
        r.cached_trials,
        r.trial_samples,
        r.measured_samples,
        r.final_samples,
        if r.final_cached { " (cached)" } else { "" },
        r.wall_s
    ));
    match &r.winner {
        Some(w) => {
            o.push(format!(
                "winner: {}  {}  {}x vs the baseline {}",
                w.label,
                format_duration_ns(w.median_s * 1e9),
                ratio(w.speedup_vs_baseline, 3),
                r.baseline
            ));
            if let Some(iv) = &w.ratio_interval {
                o.push(format!(
                    "  time ratio {} (interval {} to {}, {:.0}% confidence)",
                    ratio(iv.estimate, 3),
                    ratio(iv.low, 3),
                    ratio(iv.high, 3),
                    100.0 * iv.confidence
                ));
            }
            if let Some(v) = &w.verdict {
                o.push(format!("  {}: {}", v.kind, v.reason));
            } else if w.label == r.baseline {
                o.push("  the baseline config is the fastest".into());
            }
            o.push(format!("  command: {}", w.command));
        }
        None => o.push("winner: none (no config ran correctly)".into()),
    }
    o.extend(r.notes.iter().map(|n| format!("note: {n}")));
    o
}

/// The report as text in `format`.
impl Render for TuneReport {
    fn render(&self, format: Format, _layout: Layout) -> String {
        let r = self;
        match format {
            Format::Json => {
                let mut s = serde_json::to_string_pretty(r).unwrap_or_default();
                s.push('\n');
                s
            }
            Format::Html => crate::escape::html_document(&html(r)).into_owned(),
            Format::Markdown => crate::escape::terminal_lines(&markdown(r)).into_owned(),
            Format::Terminal => crate::escape::terminal_lines(&terminal(r)).into_owned(),
        }
    }
}

fn terminal(r: &TuneReport) -> String {
    let mut o = String::new();
    for l in summary_lines(r) {
        let _ = writeln!(o, "{l}");
    }
    let width = r
        .trials
        .iter()
        .map(|t| t.label.chars().count())
        .max()
        .unwrap_or(6)
        .clamp(6, 60);
    let _ = writeln!(
        o,
        "\n{:<width$} {:>9} {:>12} {:>9} {:>7} {:>8} {:>4}  note",
        "config", "status", "median", "speed-up", "samples", "noise", "gpu"
    );
    for t in ordered(r) {
        let mut note = t.reason.clone().unwrap_or_default();
        if t.cached {
            note = if note.is_empty() {
                "cached".into()
            } else {
                format!("cached; {note}")
            };
        }
        if t.label == r.baseline {
            note = if note.is_empty() {
                "baseline".into()
            } else {
                format!("baseline; {note}")
            };
        }
        let _ = writeln!(
            o,
            "{:<width$} {:>9} {:>12} {:>9} {:>7} {:>8} {:>4}  {}",
            kopt_model::clip_chars(&t.label, width),
            t.status.as_str(),
            median(t),
            speedup(t),
            t.values_s.len(),
            noise(t),
            t.gpu.as_deref().unwrap_or("-"),
            kopt_model::clip_chars(&note, 160)
        );
    }
    o
}

fn markdown(r: &TuneReport) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "## kopt tune\n");
    for l in summary_lines(r) {
        let _ = writeln!(o, "- {}", escape::markdown_cell(&l));
    }
    let _ = writeln!(
        o,
        "\n| Config | Status | Median | Speed-up vs baseline | Samples | Noise | GPU | Note |"
    );
    let _ = writeln!(o, "|---|---|--:|--:|--:|--:|---|---|");
    for t in ordered(r) {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            escape::markdown_cell(&t.label),
            t.status,
            median(t),
            speedup(t),
            t.values_s.len(),
            noise(t),
            t.gpu.as_deref().unwrap_or("-"),
            escape::markdown_cell(&format!(
                "{}{}",
                if t.cached { "cached " } else { "" },
                t.reason.as_deref().unwrap_or("")
            ))
        );
    }
    o
}

/// Horizontal bars: each measured config's median, fastest first, on one axis.
fn chart(r: &TuneReport) -> String {
    let rows: Vec<&TrialResult> = ordered(r)
        .into_iter()
        .filter(|t| t.median_s.is_some())
        .collect();
    const W: f64 = 900.0;
    const LABEL: f64 = 260.0;
    const ROW: f64 = 20.0;
    let max = rows
        .iter()
        .filter_map(|t| t.median_s)
        .fold(0.0f64, f64::max)
        .max(1e-12);
    let h = ROW * rows.len() as f64 + 30.0;
    let mut s = format!(
        r#"<svg class="chart" viewBox="0 0 {W} {h:.0}" role="img" aria-label="median time per config" xmlns="http://www.w3.org/2000/svg">"#
    );
    let winner = r.winner.as_ref().map(|w| w.label.as_str());
    for (i, t) in rows.iter().enumerate() {
        let m = t.median_s.unwrap_or(0.0);
        let y = 10.0 + ROW * i as f64;
        let len = (m / max) * (W - LABEL - 110.0);
        let colour = match t.status {
            _ if Some(t.label.as_str()) == winner => "#2a9d4b",
            TrialStatus::Ok if t.label == r.baseline => "#4a6fa5",
            TrialStatus::Ok => "#8aa4c8",
            TrialStatus::Pruned => "#c8c8c8",
            TrialStatus::Rejected => "#d9534f",
            TrialStatus::Failed => "#999999",
        };
        let _ = write!(
            s,
            r#"<text x="{:.0}" y="{:.0}" text-anchor="end" font-size="11">{}</text><rect x="{LABEL}" y="{:.0}" width="{len:.1}" height="{:.0}" fill="{colour}"><title>{} {} ({})</title></rect><text x="{:.1}" y="{:.0}" font-size="11">{}</text>"#,
            LABEL - 6.0,
            y + 13.0,
            escape::html(&t.label),
            y + 2.0,
            ROW - 5.0,
            escape::html(&t.label),
            escape::html(&median(t)),
            t.status,
            LABEL + len + 4.0,
            y + 13.0,
            escape::html(&median(t))
        );
    }
    s.push_str("</svg>");
    s
}

fn html(r: &TuneReport) -> String {
    let mut o = String::new();
    o.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>kopt tune</title><style>body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse}td,th{padding:3px 8px;border-bottom:1px solid #ddd;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}.ok{color:#2a6}.rejected{color:#c33}.failed{color:#777}.pruned{color:#999}pre{white-space:pre-wrap}</style></head><body>\n<h1>kopt tune</h1>\n");
    o.push_str("<ul>");
    for l in summary_lines(r) {
        let _ = write!(o, "<li>{}</li>", escape::html(&l));
    }
    o.push_str("</ul>\n<h2>Median time per config</h2>\n");
    o.push_str(&chart(r));
    o.push_str("\n<h2>Trials</h2>\n<table><tr><th>Config</th><th>Status</th><th>Median</th><th>Speed-up vs baseline</th><th>Samples</th><th>Noise</th><th>GPU</th><th>Note</th></tr>\n");
    for t in ordered(r) {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td class=\"{}\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>",
            escape::html(&t.label),
            t.status,
            t.status,
            escape::html(&median(t)),
            escape::html(&speedup(t)),
            t.values_s.len(),
            escape::html(&noise(t)),
            escape::html(t.gpu.as_deref().unwrap_or("-")),
            escape::html(&format!(
                "{}{}",
                if t.cached { "cached " } else { "" },
                t.reason.as_deref().unwrap_or("")
            ))
        );
    }
    o.push_str("</table>\n");
    if let Some(f) = &r.final_comparison {
        o.push_str("<h2>Final comparison (interleaved on one GPU)</h2>\n<pre>");
        o.push_str(&escape::html(
            &f.render(Format::Terminal, Layout::default()),
        ));
        o.push_str("</pre>\n");
    }
    let _ = writeln!(
        o,
        "<p>Template: <code>{}</code></p>\n<p>kopt {}</p></body></html>",
        escape::html(&r.template),
        escape::html(&r.kopt_version)
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use kopt_model::tune::{TuneParam, TuneWinner};

    fn trial(label: &str, status: TrialStatus, m: Option<f64>) -> TrialResult {
        TrialResult {
            label: label.into(),
            config: [("B".to_string(), label[2..].to_string())].into(),
            command: format!("./k {label}"),
            status,
            reason: (status != TrialStatus::Ok).then(|| format!("{status} because")),
            values_s: m.map_or(Vec::new(), |m| vec![m, m]),
            median_s: m,
            relative_noise: m.map(|_| 0.001),
            speedup_vs_baseline: m.map(|m| 2e-3 / m),
            correct: Some(status != TrialStatus::Rejected),
            cached: false,
            measured_samples: 2,
            gpu: Some("0".into()),
            round: 0,
        }
    }

    fn report() -> TuneReport {
        TuneReport {
            schema: "kopt/1".into(),
            template: "./k {B}".into(),
            key: Some("M=1024".into()),
            device: Some("NVIDIA H100".into()),
            driver: Some("550.1".into()),
            kopt_version: "0.1.0".into(),
            strategy: "grid".into(),
            params: vec![TuneParam {
                name: "B".into(),
                values: vec!["1".into(), "2".into(), "3".into(), "4".into()],
            }],
            constraints: vec![],
            space_size: 4,
            excluded: 0,
            gpus: vec!["0".into()],
            source: "self-reported samples".into(),
            baseline: "B=1".into(),
            trials: vec![
                trial("B=1", TrialStatus::Ok, Some(2e-3)),
                trial("B=2", TrialStatus::Ok, Some(1e-3)),
                trial("B=3", TrialStatus::Rejected, Some(0.5e-3)),
                trial("B=4", TrialStatus::Failed, None),
            ],
            final_comparison: None,
            winner: Some(TuneWinner {
                label: "B=2".into(),
                config: [("B".to_string(), "2".to_string())].into(),
                command: "./k 2".into(),
                median_s: 1e-3,
                speedup_vs_baseline: 2.0,
                ratio_interval: None,
                verdict: None,
            }),
            measured_trials: 4,
            cached_trials: 0,
            trial_samples: 6,
            measured_samples: 6,
            final_samples: 0,
            final_cached: false,
            wall_s: 1.0,
            notes: vec![],
        }
    }

    #[test]
    fn every_format_names_the_winner_and_the_rejected() {
        let r = report();
        for f in [Format::Terminal, Format::Markdown, Format::Html] {
            let s = r.render(f, Layout::default());
            assert!(s.contains("winner: B=2"), "{f:?}: {s}");
            assert!(s.contains("rejected because"), "{f:?}");
            assert!(s.contains("2.000x"), "{f:?}");
        }
        let t = r.render(Format::Terminal, Layout::default());
        let lines: Vec<&str> = t.lines().filter(|l| l.starts_with("B=")).collect();
        assert!(
            lines[0].starts_with("B=2") && lines[3].starts_with("B=4"),
            "{t}"
        );
        let html = r.render(Format::Html, Layout::default());
        assert_eq!(
            html.matches("<rect").count(),
            3,
            "one bar per measured config"
        );
        let back: TuneReport =
            serde_json::from_str(&r.render(Format::Json, Layout::default())).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn the_winner_becomes_a_triton_config() {
        let mut r = report();
        r.params = vec![
            TuneParam {
                name: "BLOCK_M".into(),
                values: vec![],
            },
            TuneParam {
                name: "WARPS".into(),
                values: vec![],
            },
            TuneParam {
                name: "num_stages".into(),
                values: vec![],
            },
        ];
        let w = r.winner.as_mut().unwrap();
        w.config = [
            ("BLOCK_M".to_string(), "128".to_string()),
            ("WARPS".to_string(), "4".to_string()),
            ("num_stages".to_string(), "3".to_string()),
        ]
        .into();
        assert_eq!(
            r.triton_config().unwrap(),
            "triton.Config({\"BLOCK_M\": 128}, num_warps=4, num_stages=3),"
        );
    }
}
