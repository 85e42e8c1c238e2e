//! `kopt bench --format html`: the sample distributions (box plots in inline
//! SVG), each candidate's interval and verdict, on one self-contained page.

use askama::Template;

use crate::escape;

/// One variant as the page shows it.
pub struct VariantView {
    pub name: String,
    pub command: String,
    pub source: String,
    /// Seconds.
    pub samples: Vec<f64>,
    pub median: String,
    pub speedup: String,
    pub noise: String,
    /// "[low, high]" of the ratio to the first variant.
    pub interval: String,
    /// KEEP / MARGINAL / REVERT, or "baseline".
    pub verdict: String,
    pub reason: String,
}

#[derive(Template)]
#[template(path = "bench.html")]
struct Page<'a> {
    variants: &'a [VariantView],
    boxes: String,
    threshold: String,
    notes: &'a [String],
    version: &'static str,
}

fn quantile(sorted: &[f64], p: f64) -> f64 {
    let pos = p * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Horizontal box plots on one shared time axis: whiskers at min/max, box at
/// the quartiles, a line at the median, and every sample as a dot.
pub fn boxes_svg(variants: &[VariantView]) -> String {
    const W: f64 = 900.0;
    const LABEL: f64 = 150.0;
    const ROW: f64 = 46.0;
    let all: Vec<f64> = variants
        .iter()
        .flat_map(|v| v.samples.iter().copied())
        .collect();
    let (lo, hi) = all
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(*x), b.max(*x)));
    let span = (hi - lo).max(hi * 1e-6).max(1e-12);
    let (lo, hi) = (lo - 0.05 * span, hi + 0.05 * span);
    let x = |t: f64| LABEL + (t - lo) / (hi - lo) * (W - LABEL - 20.0);
    let h = ROW * variants.len() as f64 + 34.0;
    let mut s = format!(
        r#"<svg class="boxes" viewBox="0 0 {W} {h:.0}" role="img" aria-label="sample distributions" xmlns="http://www.w3.org/2000/svg">"#
    );
    for (i, v) in variants.iter().enumerate() {
        let y = 10.0 + ROW * i as f64;
        let mut sorted = v.samples.clone();
        sorted.sort_by(f64::total_cmp);
        s.push_str(&format!(
            r#"<text class="lbl" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LABEL - 8.0,
            y + 18.0,
            escape::html(&v.name)
        ));
        if sorted.is_empty() {
            continue;
        }
        let (q1, q2, q3) = (
            quantile(&sorted, 0.25),
            quantile(&sorted, 0.5),
            quantile(&sorted, 0.75),
        );
        let (mn, mx) = (sorted[0], sorted[sorted.len() - 1]);
        s.push_str(&format!(
            r#"<g class="box"><title>{}: median {}, {} samples</title><line class="whisker" x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}"/><rect class="iqr" x="{:.1}" y="{:.1}" width="{:.1}" height="24"/><line class="median" x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}"/></g>"#,
            escape::html(&v.name),
            escape::html(&v.median),
            sorted.len(),
            x(mn),
            y + 14.0,
            x(mx),
            y + 14.0,
            x(q1),
            y + 2.0,
            (x(q3) - x(q1)).max(1.0),
            x(q2),
            y,
            x(q2),
            y + 28.0
        ));
        for t in sorted.iter().take(2000) {
            s.push_str(&format!(
                r#"<circle class="dot" cx="{:.1}" cy="{:.1}" r="1.6"/>"#,
                x(*t),
                y + 36.0
            ));
        }
    }
    for q in 0..=4 {
        let t = lo + (hi - lo) * q as f64 / 4.0;
        s.push_str(&format!(
            r#"<text class="tick" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            x(t),
            h - 6.0,
            escape::html(&kopt_model::format_duration_ns(t * 1e9))
        ));
    }
    s.push_str("</svg>");
    s
}

pub fn page(variants: &[VariantView], threshold: f64, notes: &[String]) -> String {
    Page {
        variants,
        notes,
        boxes: boxes_svg(variants),
        threshold: format!("{:.0}%", 100.0 * threshold),
        version: env!("CARGO_PKG_VERSION"),
    }
    .render()
    .expect("the template renders from owned strings")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(name: &str, samples: Vec<f64>, verdict: &str) -> VariantView {
        VariantView {
            name: name.into(),
            command: format!("./app --{name} <x> & y"),
            source: "wall time of the whole process".into(),
            samples,
            median: "1.00 ms".into(),
            speedup: "1.000x".into(),
            noise: "0.5%".into(),
            interval: "[0.88, 0.92]".into(),
            verdict: verdict.into(),
            reason: "faster".into(),
        }
    }

    #[test]
    fn one_box_per_variant_and_everything_escaped() {
        let vs = vec![
            v(
                "<script>alert(1)</script>",
                vec![1e-3, 1.1e-3, 0.9e-3],
                "baseline",
            ),
            v("tiled", vec![0.8e-3, 0.82e-3, 0.79e-3], "KEEP"),
        ];
        let html = page(&vs, 0.05, &[]);
        assert_eq!(html.matches("<g class=\"box\">").count(), 2);
        assert!(!html.to_ascii_lowercase().contains("<script"));
        assert!(html.contains("KEEP"));
        assert!(html.contains("./app --tiled &lt;x&gt; &amp; y") || html.contains("&#60;x&#62;"));
    }
}
