//! The roofline as an inline SVG, written by kopt: log-log axes, the DRAM
//! roof and the FP32 / tensor ceilings of the device, one point per hot
//! kernel at its arithmetic intensity and achieved rate.

use std::fmt::Write;

use kopt_model::{BottleneckClass, Diagnosis, KernelVerdict};

/// At most this many kernels (by time) get a point.
pub const HOT_KERNELS_MAX: usize = 100;

const W: f64 = 760.0;
const H: f64 = 440.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 20.0;
const BOTTOM: f64 = 50.0;
const X_MIN: f64 = 1e-2;
const X_MAX: f64 = 1e4;

/// Text for SVG: the page template's escaping does not reach inside `|safe` markup.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Where a kernel sits on the chart.
#[derive(Debug, Clone)]
pub struct Point {
    /// FLOP per DRAM byte (clamped into the chart).
    pub ai: f64,
    /// Achieved FLOP/s (FP32 counted, tensor estimated from pipe utilisation).
    pub rate: f64,
    /// True when a figure was clamped to the chart's edge (no FLOPs, or no DRAM bytes).
    pub clamped: bool,
}

/// The kernels that get a point: those with counters, hottest first.
pub fn hot_kernels(d: &Diagnosis) -> Vec<&KernelVerdict> {
    d.kernels
        .iter()
        .filter(|k| k.bottleneck.class != BottleneckClass::Unknown)
        .take(HOT_KERNELS_MAX)
        .collect()
}

pub fn point(k: &KernelVerdict, d: &Diagnosis) -> Point {
    let tensor_rate = match (k.tensor_pct, d.device.peaks.tensor_bf16_flops) {
        // Tensor FLOPs are not counted by kopt's metrics; the pipe's busy share
        // of the peak stands for them.
        (Some(p), Some(peak)) if p >= 1.0 => p / 100.0 * peak,
        _ => 0.0,
    };
    let rate = k.fp32_flops_per_s.unwrap_or(0.0) + tensor_rate;
    let bw = k.dram_bytes_per_s.unwrap_or(0.0);
    if rate <= 0.0 {
        // No floating-point work: show the bandwidth achieved at the left edge.
        return Point {
            ai: X_MIN,
            rate: (bw * X_MIN).max(1.0),
            clamped: true,
        };
    }
    if bw <= 0.0 {
        return Point {
            ai: X_MAX,
            rate,
            clamped: true,
        };
    }
    let ai = rate / bw;
    Point {
        ai: ai.clamp(X_MIN, X_MAX),
        rate,
        clamped: !(X_MIN..=X_MAX).contains(&ai),
    }
}

fn class_css(c: BottleneckClass) -> &'static str {
    c.as_str()
}

/// The chart, and how many kernel points it holds.
pub fn svg(d: &Diagnosis) -> (String, usize) {
    let peaks = &d.device.peaks;
    let top_rate = [peaks.tensor_bf16_flops, peaks.fp32_flops]
        .into_iter()
        .flatten()
        .fold(1e12_f64, f64::max);
    let hot = hot_kernels(d);
    let points: Vec<(Point, &KernelVerdict)> = hot.iter().map(|k| (point(k, d), *k)).collect();
    let y_max = 10f64.powf((top_rate * 3.0).log10().ceil());
    let y_min = points
        .iter()
        .map(|(p, _)| p.rate)
        .fold(y_max / 1e6, f64::min)
        .max(1.0);
    let y_min = 10f64.powf(y_min.log10().floor());
    let sx = |x: f64| {
        LEFT + (x.log10() - X_MIN.log10()) / (X_MAX.log10() - X_MIN.log10()) * (W - LEFT - RIGHT)
    };
    let sy = |y: f64| {
        let y = y.clamp(y_min, y_max);
        TOP + (1.0 - (y.log10() - y_min.log10()) / (y_max.log10() - y_min.log10()))
            * (H - TOP - BOTTOM)
    };

    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="roofline" viewBox="0 0 {W} {H}" role="img" aria-labelledby="roofline-title" xmlns="http://www.w3.org/2000/svg"><title id="roofline-title">Roofline of {} kernels on {}</title>"#,
        points.len(),
        esc(&d.device.name)
    );
    // Grid and axes: decades.
    let mut x = X_MIN;
    while x <= X_MAX * 1.001 {
        let px = sx(x);
        let _ = write!(
            s,
            r#"<line class="grid" x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{:.1}"/><text class="tick" x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            H - BOTTOM,
            H - BOTTOM + 16.0,
            tick(x)
        );
        x *= 10.0;
    }
    let mut y = y_min;
    while y <= y_max * 1.001 {
        let py = sy(y);
        let _ = write!(
            s,
            r#"<line class="grid" x1="{LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}"/><text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            W - RIGHT,
            LEFT - 6.0,
            py + 4.0,
            rate_tick(y)
        );
        y *= 10.0;
    }
    let _ = write!(
        s,
        r#"<text class="axis" x="{:.1}" y="{:.1}" text-anchor="middle">arithmetic intensity (FLOP per DRAM byte)</text><text class="axis" transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">achieved FLOP/s</text>"#,
        (LEFT + W - RIGHT) / 2.0,
        H - 10.0,
        (TOP + H - BOTTOM) / 2.0
    );
    // Ceilings.
    if let Some(bw) = peaks.dram_bytes_per_s {
        let ridge = top_rate / bw;
        let x_end = ridge.min(X_MAX);
        let _ = write!(
            s,
            r#"<line class="roof dram" x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}"><title>DRAM {:.2} TB/s</title></line><text class="roof-label" x="{:.1}" y="{:.1}">DRAM {:.2} TB/s</text>"#,
            sx(X_MIN),
            sy(bw * X_MIN),
            sx(x_end),
            sy(bw * x_end),
            bw / 1e12,
            sx(X_MIN) + 6.0,
            sy(bw * X_MIN * 3.0) - 6.0,
            bw / 1e12
        );
        for (name, peak) in [
            ("FP32", peaks.fp32_flops),
            ("bf16 tensor", peaks.tensor_bf16_flops),
        ] {
            if let Some(p) = peak {
                let x0 = (p / bw).clamp(X_MIN, X_MAX);
                let _ = write!(
                    s,
                    r#"<line class="roof compute" x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}"><title>{name} {:.1} TFLOP/s</title></line><text class="roof-label" x="{:.1}" y="{:.1}" text-anchor="end">{name} {:.1} TFLOP/s</text>"#,
                    sx(x0),
                    sy(p),
                    sx(X_MAX),
                    sy(p),
                    p / 1e12,
                    sx(X_MAX) - 4.0,
                    sy(p) - 5.0,
                    p / 1e12
                );
            }
        }
    }
    // Points: biggest first so small ones stay visible on top.
    let mut order: Vec<usize> = (0..points.len()).collect();
    order.sort_by(|&a, &b| {
        points[b]
            .1
            .pct_of_total
            .total_cmp(&points[a].1.pct_of_total)
    });
    for (rank, &i) in order.iter().enumerate() {
        let (p, k) = &points[i];
        let r = 3.0 + 14.0 * (k.pct_of_total / 100.0).sqrt();
        let _ = write!(
            s,
            r#"<circle class="pt c-{}{}" cx="{:.1}" cy="{:.1}" r="{r:.1}"><title>{} | {} | {:.1}% of time | {:.3} FLOP/B{} | {}</title></circle>"#,
            class_css(k.bottleneck.class),
            if p.clamped { " clamped" } else { "" },
            sx(p.ai),
            sy(p.rate),
            esc(&k.name),
            esc(k.bottleneck.class.as_str()),
            k.pct_of_total,
            p.ai,
            if p.clamped {
                " (clamped to the chart)"
            } else {
                ""
            },
            esc(&k.root_cause)
        );
        if rank < 8 {
            // Labels near the right edge go to the left of their point.
            let right_half = sx(p.ai) > LEFT + 0.6 * (W - LEFT - RIGHT);
            let (lx, anchor) = if right_half {
                (sx(p.ai) - r - 3.0, "end")
            } else {
                (sx(p.ai) + r + 3.0, "start")
            };
            let _ = write!(
                s,
                r#"<text class="pt-label" x="{lx:.1}" y="{:.1}" text-anchor="{anchor}">{}</text>"#,
                sy(p.rate) + 4.0,
                esc(&k.short_name)
            );
        }
    }
    s.push_str("</svg>");
    (s, points.len())
}

fn tick(x: f64) -> String {
    if x >= 1.0 {
        format!("{x:.0}")
    } else {
        format!("{x}")
    }
}

fn rate_tick(y: f64) -> String {
    let e = y.log10().round() as i32;
    match e {
        9 => "1 G".into(),
        10 => "10 G".into(),
        11 => "100 G".into(),
        12 => "1 T".into(),
        13 => "10 T".into(),
        14 => "100 T".into(),
        15 => "1 P".into(),
        16 => "10 P".into(),
        _ => format!("1e{e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::esc;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            esc("<script>a&b</script>\"'"),
            "&lt;script&gt;a&amp;b&lt;/script&gt;&quot;&#39;"
        );
    }
}
