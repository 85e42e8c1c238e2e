//! One self-contained HTML page: inline CSS and SVG, no script, no network.
//! Every text goes through askama's HTML escaping (the SVG escapes its own).

use std::io::{self, Write};

use askama::Template;
use kopt_model::{BottleneckClass, Diagnosis};

use crate::{escape, format, roofline, Exporter};

pub struct HtmlExporter;

const CLASSES: [BottleneckClass; 14] = [
    BottleneckClass::LaunchOverhead,
    BottleneckClass::Memory,
    BottleneckClass::Compute,
    BottleneckClass::Latency,
    BottleneckClass::Occupancy,
    BottleneckClass::BankConflict,
    BottleneckClass::Uncoalesced,
    BottleneckClass::SmallGrid,
    BottleneckClass::Sync,
    BottleneckClass::Balanced,
    BottleneckClass::Divergence,
    BottleneckClass::Atomics,
    BottleneckClass::PartialWave,
    BottleneckClass::Unknown,
];

struct KernelRow {
    name: String,
    short: String,
    launches: u64,
    total: String,
    mean: String,
    pct: String,
    bw: String,
    mem: String,
    comp: String,
    tensor: String,
    occ: String,
    ai: String,
    class_css: &'static str,
    class_label: String,
    root_cause: String,
    findings: Vec<String>,
    /// The counters' evidence in one line (empty without).
    evidence: String,
}

struct RoofLabel {
    number: usize,
    name: String,
    class: &'static str,
    pct: String,
    placed: bool,
}

struct RecRow {
    title: String,
    kernel: String,
    gain: String,
    action: String,
    evidence: String,
    method: String,
    source: String,
}

struct DisagreementRow {
    kernel: String,
    rule: String,
    estimate: String,
    kopt: String,
    why: String,
}

#[derive(Template)]
#[template(path = "report.html")]
struct Page {
    title: String,
    module: String,
    device: String,
    meta: Vec<String>,
    has_primary: bool,
    primary_component: String,
    primary_class: &'static str,
    primary_insight: String,
    roofline: String,
    points: usize,
    roof_labels: Vec<RoofLabel>,
    /// Kernels with counters but no point, said under the chart.
    roof_left_out: String,
    timeline_lines: Vec<(String, String)>,
    strip: String,
    classes: Vec<&'static str>,
    classes_present: Vec<&'static str>,
    /// The kernel table's column names, as in the terminal and Markdown.
    columns: [&'static str; 13],
    kernel_chunks: Vec<Vec<KernelRow>>,
    /// "N more kernels, P% of kernel time" when the table is cut.
    kernels_hidden: String,
    recs: Vec<RecRow>,
    recs_hidden: usize,
    disagreements: Vec<DisagreementRow>,
    notes: Vec<String>,
    version: &'static str,
}

/// Table rows per `<tbody>`: the browser lays out a chunk only when it is on screen.
const ROWS_PER_CHUNK: usize = 100;
/// Recommendations listed on the page; the rest stay in the JSON report.
const RECS_SHOWN: usize = 50;
/// Kernel rows on the page (hottest first). Past a few hundred rows the
/// browser's table work dominates (2,000 rows took 1.5 s to render on a
/// 2-core machine); the tail is summed in one row and stays whole in JSON.
pub const TABLE_ROWS_SHOWN: usize = 400;

/// Full kernel names can run to thousands of characters; the tooltip keeps this many characters, then an ellipsis.
const TOOLTIP_MAX: usize = 600;

fn hidden_kernels(d: &Diagnosis) -> String {
    let rest = d.kernels.get(TABLE_ROWS_SHOWN..).unwrap_or_default();
    if rest.is_empty() {
        return String::new();
    }
    let share: f64 = rest.iter().map(|k| k.pct_of_total).sum();
    let launches: u64 = rest.iter().map(|k| k.launches).sum();
    format!(
        "{} more kernels ({launches} launches, {share:.2}% of kernel time) are in the JSON report (--format json).",
        rest.len()
    )
}

pub fn page(d: &Diagnosis) -> (String, usize) {
    let chart = roofline::chart(d);
    let points = chart.points;
    let module = d
        .run
        .as_ref()
        .and_then(|r| r.module.clone())
        .unwrap_or_default();
    let meta = format::header_lines(d);
    let mut present: Vec<&'static str> = Vec::new();
    for k in &d.kernels {
        let c = k.bottleneck.class.as_str();
        if !present.contains(&c) {
            present.push(c);
        }
    }
    let shown = &d.kernels[..d.kernels.len().min(TABLE_ROWS_SHOWN)];
    // Full names cut for the tooltip, two kernels never reading the same.
    let full: Vec<&str> = shown.iter().map(|k| k.name.as_str()).collect();
    let tooltips = kopt_model::clip_distinct(&full, TOOLTIP_MAX + 1);
    let page = Page {
        title: if module.is_empty() {
            d.device.name.clone()
        } else {
            module.clone()
        },
        module,
        device: format::device_line(&d.device),
        meta,
        has_primary: d.primary.is_some(),
        primary_component: d
            .primary
            .as_ref()
            .map(|p| p.component_short.clone())
            .unwrap_or_default(),
        primary_class: d.primary.as_ref().map_or("unknown", |p| p.class.as_str()),
        primary_insight: d
            .primary
            .as_ref()
            .map(|p| p.insight.clone())
            .unwrap_or_default(),
        roof_left_out: left_out_note(&chart.left_out),
        roofline: chart.svg,
        points,
        roof_labels: chart
            .labels
            .into_iter()
            .map(|l| RoofLabel {
                number: l.number,
                name: l.name,
                class: l.class,
                pct: format::pct(Some(l.pct_of_total)),
                placed: l.placed,
            })
            .collect(),
        timeline_lines: d
            .timeline
            .as_ref()
            .map(format::timeline_lines)
            .unwrap_or_default(),
        strip: d
            .strip
            .as_ref()
            .map(|w| crate::strip::strips(w, d.steady_strip.as_ref()))
            .unwrap_or_default(),
        classes: CLASSES.iter().map(|c| c.as_str()).collect(),
        classes_present: present,
        kernels_hidden: hidden_kernels(d),
        columns: crate::markdown::KERNEL_COLUMNS,
        kernel_chunks: shown
            .chunks(ROWS_PER_CHUNK)
            .zip(tooltips.chunks(ROWS_PER_CHUNK))
            .map(|(chunk, tips)| {
                chunk
                    .iter()
                    .zip(tips)
                    .map(|(k, tip)| KernelRow {
                        name: tip.clone(),
                        short: breakable_name(&k.short_name),
                        launches: k.launches,
                        total: format::duration(k.total_ns),
                        mean: format::duration(k.mean_ns),
                        pct: format::pct(Some(k.pct_of_total)),
                        bw: format::gbs(k.dram_bytes_per_s),
                        mem: format::pct(k.memory_sol_pct),
                        comp: format::pct(k.compute_sol_pct),
                        tensor: format::pct(k.tensor_pct),
                        occ: format::occupancy(k),
                        ai: format::intensity(k),
                        class_css: k.bottleneck.class.as_str(),
                        class_label: format::class(k),
                        root_cause: k.root_cause.clone(),
                        findings: k.findings.iter().map(|f| f.evidence.clone()).collect(),
                        evidence: format::evidence_line(k).unwrap_or_default(),
                    })
                    .collect()
            })
            .collect(),
        recs_hidden: d.recommendations.len().saturating_sub(RECS_SHOWN),
        recs: d
            .recommendations
            .iter()
            .take(RECS_SHOWN)
            .map(|r| RecRow {
                title: r.title.clone(),
                kernel: r.kernel_short.clone(),
                gain: match format::verified(d, r) {
                    Some(v) => format!("{}; {v}", format::gain(r)),
                    None => format::gain(r),
                },
                action: r.action.clone(),
                evidence: r.evidence_shown().to_string(),
                method: r
                    .gain
                    .as_ref()
                    .map(|g| g.method.clone())
                    .unwrap_or_default(),
                source: r.source.clone(),
            })
            .collect(),
        disagreements: d
            .ncu_disagreements()
            .into_iter()
            .map(|(k, n)| DisagreementRow {
                kernel: k.short_name.clone(),
                rule: n.ncu_rule.clone(),
                estimate: n
                    .ncu_speedup_pct
                    .map_or("-".into(), |s| format!("{s:.1}% {}", n.ncu_speedup_type)),
                kopt: format::class(k),
                why: n.why_kopt_differs.clone(),
            })
            .collect(),
        notes: d.notes.clone(),
        version: env!("CARGO_PKG_VERSION"),
    };
    (
        page.render()
            .expect("the template renders from owned strings"),
        points,
    )
}

impl Exporter for HtmlExporter {
    fn render(&self, d: &Diagnosis, out: &mut dyn Write) -> io::Result<()> {
        out.write_all(escape::html_document(&page(d).0).as_bytes())
    }
}

/// Kernels named at most in the note on those left off the roofline.
const LEFT_OUT_NAMED: usize = 8;

/// The kernels with counters the roofline cannot place, hottest first.
fn left_out_note(left_out: &[(String, f64)]) -> String {
    if left_out.is_empty() {
        return String::new();
    }
    let mut names: Vec<String> = left_out
        .iter()
        .take(LEFT_OUT_NAMED)
        .map(|(n, pct)| format!("{n} ({}%)", format::pct(Some(*pct))))
        .collect();
    if left_out.len() > LEFT_OUT_NAMED {
        names.push(format!("{} more", left_out.len() - LEFT_OUT_NAMED));
    }
    format!(
        "{} kernel(s) with counters are not on the chart: no FLOP or no DRAM byte was counted (a copy, data served from cache, counters without FLOPs), so they have no arithmetic intensity to place them at: {}.",
        left_out.len(),
        names.join(", ")
    )
}

/// A kernel name as HTML with a line-break opportunity after each separator
/// (`::`, `_`, `,`, `<`, `(`, a space), so a narrow name column wraps between
/// the parts of an identifier, never inside one (the CSS breaks inside a
/// part only when one part alone is wider than the column).
fn breakable_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + name.len() / 4);
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
        // After "::" (not between its colons), and after the other separators.
        let sep = match c {
            ':' => chars.peek() != Some(&':'),
            '_' | ',' | '<' | '(' | ' ' => true,
            _ => false,
        };
        if sep && chars.peek().is_some() {
            out.push_str("<wbr>");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::breakable_name;

    #[test]
    fn names_break_between_parts_and_stay_escaped() {
        assert_eq!(
            breakable_name("at::native::vectorized_kernel<float>"),
            "at::<wbr>native::<wbr>vectorized_<wbr>kernel&lt;<wbr>float&gt;"
        );
        // No break opportunity inside an identifier, none at the end.
        assert_eq!(breakable_name("Kernel2"), "Kernel2");
        assert_eq!(breakable_name("a_"), "a_");
        // Markup in a name stays text.
        assert_eq!(
            breakable_name("k<\"x\">&'y'"),
            "k&lt;<wbr>&quot;x&quot;&gt;&amp;&#39;y&#39;"
        );
    }
}
