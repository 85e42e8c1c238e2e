//! The roofline as an inline SVG, written by kopt: log-log axes, the DRAM
//! roof and the FP32 / tensor ceilings of the device, one point per hot
//! kernel at its arithmetic intensity and achieved rate.

use std::fmt::Write;

use kopt_analyze::roofline;
use kopt_model::{BottleneckClass, Diagnosis, KernelVerdict};

use crate::escape;

const W: f64 = 760.0;
const H: f64 = 440.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 20.0;
const BOTTOM: f64 = 50.0;
const X_MIN: f64 = 1e-2;
const X_MAX: f64 = 1e4;

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

/// Kernels labelled with a number on the chart (hottest first); the legend
/// under the chart names them.
pub const LABELS_MAX: usize = 12;
/// At most this many ticks on an axis.
const TICKS_MAX: usize = 64;
/// The largest rate (FLOP/s or byte/s) the chart draws a roof for: far above
/// any accelerator (a zetta-rate), far below where the axis's decades stop
/// being finite. A report or flag holding more (1e308 once made the tick
/// loop endless) has that roof left out.
const RATE_CEILING: f64 = 1e21;

/// The peaks with every figure that is not a finite rate in (0, 1e21]
/// dropped: the chart's axis and loop bounds are derived from them.
fn plottable_peaks(p: &kopt_model::Peaks) -> kopt_model::Peaks {
    let ok = |v: Option<f64>| v.filter(|x| x.is_finite() && *x > 0.0 && *x <= RATE_CEILING);
    kopt_model::Peaks {
        dram_bytes_per_s: ok(p.dram_bytes_per_s),
        fp32_flops: ok(p.fp32_flops),
        tensor_bf16_flops: ok(p.tensor_bf16_flops),
    }
}

/// Where a kernel sits on this chart: kopt-analyze's roofline figures,
/// clamped into the chart's range; `None` for a kernel without an
/// intensity (no FLOPs or no DRAM bytes), which gets no point.
pub fn point(k: &KernelVerdict, d: &Diagnosis) -> Option<Point> {
    let f = roofline::figures(k, &d.device.peaks);
    let ai = f.flop_per_byte()?;
    Some(Point {
        ai: ai.clamp(X_MIN, X_MAX),
        rate: f.flops_per_s,
        clamped: !(X_MIN..=X_MAX).contains(&ai),
    })
}

fn class_css(c: BottleneckClass) -> &'static str {
    c.as_str()
}

/// One numbered kernel of the chart, for the legend under it.
#[derive(Debug, Clone)]
pub struct Label {
    pub number: usize,
    pub name: String,
    pub class: &'static str,
    pub pct_of_total: f64,
    /// False when the chart had no free spot for the number (the point is
    /// still drawn; its tooltip names it).
    pub placed: bool,
}

/// The chart: the SVG (empty when no kernel has a point), how many points
/// it holds, the numbered kernels, and the kernels with counters but no
/// intensity, left off the chart (short name, share of kernel time).
#[derive(Debug, Clone, Default)]
pub struct Chart {
    pub svg: String,
    pub points: usize,
    pub labels: Vec<Label>,
    pub left_out: Vec<(String, f64)>,
}

/// An axis-aligned box in chart units.
#[derive(Debug, Clone, Copy)]
struct Rect {
    x0: f64,
    y0: f64,
    x1: f64,
    y1: f64,
}

impl Rect {
    fn hits(&self, o: &Rect) -> bool {
        self.x0 < o.x1 && o.x0 < self.x1 && self.y0 < o.y1 && o.y0 < self.y1
    }

    fn hits_circle(&self, cx: f64, cy: f64, r: f64) -> bool {
        let nx = cx.clamp(self.x0, self.x1);
        let ny = cy.clamp(self.y0, self.y1);
        (nx - cx).powi(2) + (ny - cy).powi(2) < r * r
    }

    fn inside(&self, o: &Rect) -> bool {
        self.x0 >= o.x0 && self.x1 <= o.x1 && self.y0 >= o.y0 && self.y1 <= o.y1
    }
}

/// Font sizes of the chart's text (the page's CSS sets the same).
const LABEL_FONT: f64 = 11.0;
/// A generous average glyph width of the page's sans-serif, per pixel of font size.
const GLYPH: f64 = 0.62;

/// The box a text of `n` characters takes, its baseline at `y`.
fn text_box(x: f64, y: f64, chars: usize, anchor: &str, font: f64) -> Rect {
    let w = chars as f64 * font * GLYPH;
    let x0 = match anchor {
        "end" => x - w,
        "middle" => x - w / 2.0,
        _ => x,
    };
    Rect {
        x0: x0 - 1.0,
        y0: y - font,
        x1: x0 + w + 1.0,
        y1: y + font * 0.3,
    }
}

/// The chart, and how many kernel points it holds.
pub fn svg(d: &Diagnosis) -> (String, usize) {
    let c = chart(d);
    (c.svg, c.points)
}

/// The chart's log-log axes: arithmetic intensity across (fixed decades),
/// FLOP/s up from the slowest point's decade to three times the top rate's.
#[derive(Debug, Clone, Copy)]
struct Scale {
    y_min: f64,
    y_max: f64,
}

impl Scale {
    fn new(top_rate: f64, rates: impl Iterator<Item = f64>) -> Self {
        let y_max = 10f64.powf((top_rate * 3.0).log10().ceil());
        let y_min = rates.fold(y_max / 1e6, f64::min).max(1.0);
        let y_min = 10f64.powf(y_min.log10().floor());
        Scale { y_min, y_max }
    }

    fn sx(&self, x: f64) -> f64 {
        LEFT + (x.log10() - X_MIN.log10()) / (X_MAX.log10() - X_MIN.log10()) * (W - LEFT - RIGHT)
    }

    fn sy(&self, y: f64) -> f64 {
        let (y_min, y_max) = (self.y_min, self.y_max);
        let y = y.clamp(y_min, y_max);
        TOP + (1.0 - (y.log10() - y_min.log10()) / (y_max.log10() - y_min.log10()))
            * (H - TOP - BOTTOM)
    }
}

/// The SVG being drawn and what text placement must keep clear of.
struct Canvas {
    s: String,
    scale: Scale,
    /// The plotting area, inset from the axes.
    plot: Rect,
    /// Every point's circle: centre and radius.
    circles: Vec<(f64, f64, f64)>,
    /// Text already on the chart: no label may touch these.
    taken: Vec<Rect>,
}

impl Canvas {
    /// Whether a label box is clear of other text and of the points.
    fn free(&self, b: &Rect) -> bool {
        b.inside(&self.plot)
            && !self.taken.iter().any(|t| t.hits(b))
            && !self
                .circles
                .iter()
                .any(|&(ox, oy, or)| b.hits_circle(ox, oy, or + 1.0))
    }

    /// Grid and axes: decades, and the axis titles.
    fn axes(&mut self) {
        let Scale { y_min, y_max } = self.scale;
        let s = &mut self.s;
        let mut x = X_MIN;
        for _ in 0..TICKS_MAX {
            if x > X_MAX * 1.001 {
                break;
            }
            let px = self.scale.sx(x);
            // The end ticks lean inwards, clear of the y axis's labels.
            let anchor = if x <= X_MIN * 1.001 {
                "start"
            } else if x >= X_MAX * 0.999 {
                "end"
            } else {
                "middle"
            };
            let _ = write!(
                s,
                r#"<line class="grid" x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{:.1}"/><text class="tick" x="{px:.1}" y="{:.1}" text-anchor="{anchor}">{}</text>"#,
                H - BOTTOM,
                H - BOTTOM + 16.0,
                si(x)
            );
            x *= 10.0;
        }
        // Every decade while they are 14 px apart or more, else every other one.
        let decades = (y_max / y_min).log10().round().max(1.0);
        let step = if (H - TOP - BOTTOM) / decades >= 14.0 {
            10.0
        } else {
            100.0
        };
        let mut y = y_min;
        // Bounded by count as well: y_max is finite (plottable peaks), and a
        // chart never needs more than a few dozen decades.
        for _ in 0..TICKS_MAX {
            if y > y_max * 1.001 {
                break;
            }
            let py = self.scale.sy(y);
            let _ = write!(
                s,
                r#"<line class="grid" x1="{LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}"/><text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                W - RIGHT,
                LEFT - 6.0,
                py + 4.0,
                si(y)
            );
            y *= step;
        }
        let _ = write!(
            s,
            r#"<text class="axis" x="{:.1}" y="{:.1}" text-anchor="middle">arithmetic intensity (FLOP per DRAM byte)</text><text class="axis" transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">achieved FLOP/s</text>"#,
            (LEFT + W - RIGHT) / 2.0,
            H - 10.0,
            (TOP + H - BOTTOM) / 2.0
        );
    }

    /// The DRAM roof up to the ridge, its label under the rising roof at
    /// the first of a few spots along it that is free.
    fn dram_ceiling(&mut self, bw: f64, top_rate: f64) {
        let sc = self.scale;
        let ridge = top_rate / bw;
        let x_end = ridge.min(X_MAX);
        let text = format!("DRAM {:.2} TB/s", bw / 1e12);
        let n = text.chars().count();
        // Under the rising roof (its lowest point over the text is the left
        // end), at the first of a few spots along it that is free.
        let (lx, ly) = [1.5, 4.0, 12.0, 40.0, 120.0]
            .into_iter()
            .map(|f| {
                let x = X_MIN * f;
                (sc.sx(x) + 4.0, sc.sy(bw * x) + LABEL_FONT + 4.0)
            })
            .find(|&(x, y)| self.free(&text_box(x, y, n, "start", LABEL_FONT)))
            .unwrap_or((
                sc.sx(X_MIN) + 4.0,
                sc.sy(bw * X_MIN * 1.5) + LABEL_FONT + 4.0,
            ));
        let _ = write!(
            self.s,
            r#"<line class="roof dram" x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}"><title>{text}</title></line><text class="roof-label" x="{lx:.1}" y="{ly:.1}">{text}</text>"#,
            sc.sx(X_MIN),
            sc.sy(bw * X_MIN),
            sc.sx(x_end),
            sc.sy(bw * x_end),
        );
        self.taken
            .push(text_box(lx, ly, text.chars().count(), "start", LABEL_FONT));
    }

    /// A flat compute roof from its ridge with the DRAM roof, its label
    /// above or below the line, from the right end leftwards: the first
    /// spot clear of text and points, else of text only.
    fn compute_ceiling(&mut self, name: &str, p: f64, bw: f64) {
        let sc = self.scale;
        let x0 = (p / bw).clamp(X_MIN, X_MAX);
        let text = format!("{name} {:.1} TFLOP/s", p / 1e12);
        let n = text.chars().count();
        let w = n as f64 * LABEL_FONT * GLYPH;
        let x_hi = sc.sx(X_MAX) - 4.0;
        // Below the line only right of the ridge (left of it the
        // sloped roof runs there); above it anywhere.
        let ridge = (sc.sx(x0) + w + 4.0).min(x_hi);
        let far = (LEFT + w + 8.0).min(x_hi);
        let along = |lo: f64, i: u32| x_hi - (x_hi - lo) * f64::from(i) / 12.0;
        let spots = (0..=12).flat_map(|i| {
            [
                (along(far, i), sc.sy(p) - 5.0),
                (along(ridge, i), sc.sy(p) + LABEL_FONT + 3.0),
            ]
        });
        let (lx, ly) = spots
            .clone()
            .find(|&(x, y)| self.free(&text_box(x, y, n, "end", LABEL_FONT)))
            .or_else(|| {
                spots.clone().find(|&(x, y)| {
                    !self
                        .taken
                        .iter()
                        .any(|t| t.hits(&text_box(x, y, n, "end", LABEL_FONT)))
                })
            })
            .unwrap_or((x_hi, sc.sy(p) - 5.0));
        let b = text_box(lx, ly, n, "end", LABEL_FONT);
        let _ = write!(
            self.s,
            r#"<line class="roof compute" x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}"><title>{text}</title></line><text class="roof-label" x="{lx:.1}" y="{ly:.1}" text-anchor="end">{text}</text>"#,
            sc.sx(x0),
            sc.sy(p),
            sc.sx(X_MAX),
            sc.sy(p),
        );
        self.taken.push(b);
    }

    /// The points, in `order` (biggest first so small ones stay visible
    /// on top).
    fn points(&mut self, points: &[(Point, &KernelVerdict)], order: &[usize]) {
        for &i in order {
            let (p, k) = &points[i];
            let (cx, cy, r) = self.circles[i];
            let _ = write!(
                self.s,
                r#"<circle class="pt c-{}{}" cx="{cx:.1}" cy="{cy:.1}" r="{r:.1}"><title>{} | {} | {:.1}% of time | {:.3} FLOP/B{} | {}</title></circle>"#,
                class_css(k.bottleneck.class),
                if p.clamped { " clamped" } else { "" },
                escape::html(&k.name),
                escape::html(k.bottleneck.class.as_str()),
                k.pct_of_total,
                p.ai,
                if p.clamped {
                    " (clamped to the chart)"
                } else {
                    ""
                },
                escape::html(&k.root_cause)
            );
        }
    }

    /// Numbers for the hottest points, each at the nearest free spot around
    /// its point (a leader line when it had to move away), never on other
    /// text. Every numbered point is listed, placed or not.
    fn point_labels(&mut self, points: &[(Point, &KernelVerdict)], order: &[usize]) -> Vec<Label> {
        let mut labels = Vec::new();
        for (n, &i) in order.iter().take(LABELS_MAX).enumerate() {
            let number = n + 1;
            let (_, k) = &points[i];
            let (cx, cy, r) = self.circles[i];
            let text = number.to_string();
            let w = text.chars().count() as f64 * LABEL_FONT * GLYPH + 2.0;
            // The same extent as `text_box`: a font size above the baseline,
            // 0.3 of it below, so numbers and ceiling labels are kept apart alike.
            let h = LABEL_FONT * 1.3;
            let spot = label_spot(cx, cy, r, w, h, &self.plot, &self.taken, &self.circles);
            if let Some((b, leader)) = spot {
                if leader {
                    let (bx, by) = ((b.x0 + b.x1) / 2.0, (b.y0 + b.y1) / 2.0);
                    let dist = ((bx - cx).powi(2) + (by - cy).powi(2)).sqrt().max(1e-9);
                    let _ = write!(
                        self.s,
                        r#"<line class="leader" x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}"/>"#,
                        cx + (bx - cx) / dist * r,
                        cy + (by - cy) / dist * r,
                        bx - (bx - cx) / dist * (h / 2.0),
                        by - (by - cy) / dist * (h / 2.0),
                    );
                }
                let _ = write!(
                    self.s,
                    r#"<text class="pt-label" x="{:.1}" y="{:.1}" text-anchor="middle">{text}<title>{}</title></text>"#,
                    (b.x0 + b.x1) / 2.0,
                    b.y1 - LABEL_FONT * 0.3,
                    escape::html(&k.short_name)
                );
                self.taken.push(b);
            }
            labels.push(Label {
                number,
                name: k.short_name.clone(),
                class: class_css(k.bottleneck.class),
                pct_of_total: k.pct_of_total,
                placed: spot.is_some(),
            });
        }
        labels
    }
}

/// The roofline with its points numbered where they fit; nothing when no
/// kernel has counters.
pub fn chart(d: &Diagnosis) -> Chart {
    let peaks = &plottable_peaks(&d.device.peaks);
    let top_rate = [peaks.tensor_bf16_flops, peaks.fp32_flops]
        .into_iter()
        .flatten()
        .fold(1e12_f64, f64::max);
    let left_out: Vec<(String, f64)> = roofline::unplotted_kernels(d)
        .into_iter()
        .map(|k| (k.short_name.clone(), k.pct_of_total))
        .collect();
    let hot = roofline::plotted_kernels(d);
    if hot.is_empty() {
        return Chart {
            left_out,
            ..Chart::default()
        };
    }
    let points: Vec<(Point, &KernelVerdict)> = hot
        .iter()
        .filter_map(|k| Some((point(k, d)?, *k)))
        .collect();
    let scale = Scale::new(top_rate, points.iter().map(|(p, _)| p.rate));
    let radius = |k: &KernelVerdict| 3.0 + 14.0 * (k.pct_of_total / 100.0).sqrt();
    let mut c = Canvas {
        s: String::new(),
        scale,
        plot: Rect {
            x0: LEFT + 2.0,
            y0: TOP + 2.0,
            x1: W - RIGHT - 2.0,
            y1: H - BOTTOM - 2.0,
        },
        circles: points
            .iter()
            .map(|(p, k)| (scale.sx(p.ai), scale.sy(p.rate), radius(k)))
            .collect(),
        taken: Vec::new(),
    };
    let _ = write!(
        c.s,
        r#"<svg class="roofline" viewBox="0 0 {W} {H}" role="img" aria-labelledby="roofline-title" xmlns="http://www.w3.org/2000/svg"><title id="roofline-title">Roofline of {} kernels on {}</title>"#,
        points.len(),
        escape::html(&d.device.name)
    );
    c.axes();
    // Points (drawn after the ceilings), biggest first.
    let mut order: Vec<usize> = (0..points.len()).collect();
    order.sort_by(|&a, &b| {
        points[b]
            .1
            .pct_of_total
            .total_cmp(&points[a].1.pct_of_total)
    });
    // Ceilings, their labels kept clear of each other and of the points.
    if let Some(bw) = peaks.dram_bytes_per_s {
        c.dram_ceiling(bw, top_rate);
        for (name, peak) in [
            ("FP32", peaks.fp32_flops),
            ("bf16 tensor", peaks.tensor_bf16_flops),
        ] {
            if let Some(p) = peak {
                c.compute_ceiling(name, p, bw);
            }
        }
    }
    c.points(&points, &order);
    let labels = c.point_labels(&points, &order);
    c.s.push_str("</svg>");
    Chart {
        svg: c.s,
        points: points.len(),
        labels,
        left_out,
    }
}

/// The first free box of `w` x `h` around a circle: rings of growing
/// distance, eight directions each; first clear of every circle, then of
/// text only. The flag says whether a leader line should join them.
#[allow(clippy::too_many_arguments)]
fn label_spot(
    cx: f64,
    cy: f64,
    r: f64,
    w: f64,
    h: f64,
    plot: &Rect,
    taken: &[Rect],
    circles: &[(f64, f64, f64)],
) -> Option<(Rect, bool)> {
    const DIRS: [(f64, f64); 8] = [
        (1.0, 0.0),
        (1.0, -1.0),
        (0.0, -1.0),
        (-1.0, -1.0),
        (-1.0, 0.0),
        (-1.0, 1.0),
        (0.0, 1.0),
        (1.0, 1.0),
    ];
    for avoid_points in [true, false] {
        for gap in [2.0, 10.0, 22.0, 36.0, 54.0, 76.0, 102.0, 132.0] {
            for (dx, dy) in DIRS {
                let d = r + gap;
                // The box's centre, pushed out so its near edge sits at `d`.
                let bx = cx + dx * (d + w / 2.0);
                let by = cy + dy * (d + h / 2.0);
                let b = Rect {
                    x0: bx - w / 2.0,
                    y0: by - h / 2.0,
                    x1: bx + w / 2.0,
                    y1: by + h / 2.0,
                };
                if !b.inside(plot) || taken.iter().any(|t| t.hits(&b)) {
                    continue;
                }
                if avoid_points
                    && circles
                        .iter()
                        .any(|&(ox, oy, or)| b.hits_circle(ox, oy, or + 1.0))
                {
                    continue;
                }
                return Some((b, gap > 2.0));
            }
        }
    }
    None
}

/// One tick style on both axes: SI prefixes ("100 M", "1 G", "10 k"), plain
/// decimals below one.
pub fn si(v: f64) -> String {
    if v < 1.0 {
        let digits = (-v.log10()).ceil().max(0.0) as usize;
        return format!("{v:.digits$}");
    }
    let e = v.log10().round() as i32;
    let prefixes = ["", " k", " M", " G", " T", " P", " E", " Z", " Y"];
    let idx = (e / 3).clamp(0, prefixes.len() as i32 - 1);
    let mant = 10f64.powi(e - 3 * idx);
    format!("{mant:.0}{}", prefixes[idx as usize])
}

#[cfg(test)]
mod tests {
    use super::{si, Scale, BOTTOM, H, LEFT, TOP, X_MAX, X_MIN};

    /// The scale step on its own: the y axis runs from the slowest point's
    /// decade (at least 1 FLOP/s, at most six decades under the top) to
    /// the decade over three times the top rate; rates outside it are
    /// drawn on its edge.
    #[test]
    fn the_scale_spans_the_slowest_point_to_three_times_the_top_rate() {
        let s = Scale::new(60e12, [3.2e9, 5e11].into_iter());
        assert_eq!((s.y_min, s.y_max), (1e9, 1e15));
        let s = Scale::new(60e12, [1e14].into_iter());
        assert_eq!(s.y_min, 1e9, "no point lower: six decades under the top");
        let s = Scale::new(1e12, [0.5].into_iter());
        assert_eq!(s.y_min, 1.0, "never under 1 FLOP/s");
        let s = Scale::new(60e12, [3.2e9].into_iter());
        assert_eq!(s.sy(1e30), TOP, "over the top: on the top edge");
        assert_eq!(
            s.sy(1e-3),
            H - BOTTOM,
            "under the bottom: on the bottom edge"
        );
        assert_eq!(s.sx(X_MIN), LEFT);
        assert!((s.sx(X_MAX) - (super::W - super::RIGHT)).abs() < 1e-9);
    }

    #[test]
    fn ticks_use_si_prefixes_everywhere() {
        let got: Vec<String> = [0.01, 0.1, 1.0, 10.0, 1e3, 1e4, 1e8, 1e9, 1e12, 1e15, 1e16]
            .into_iter()
            .map(si)
            .collect();
        assert_eq!(
            got,
            ["0.01", "0.1", "1", "10", "1 k", "10 k", "100 M", "1 G", "1 T", "1 P", "10 P"]
        );
    }
}
