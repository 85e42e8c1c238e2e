//! Nsight Compute CSV: the raw (wide) page and the details (long) page,
//! told apart by their header. Columns are found by name, never position.

mod details;
mod raw;

use kopt_model::{Device, Dim3, KernelLaunch};

use crate::number::{detect_style, NumberStyle};
use crate::IngestError;

/// Which `ncu --page` produced a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NcuPage {
    /// `--page raw`: one row per launch, one column per metric, a units row.
    Raw,
    /// `--page details`: one row per (launch, section, metric or rule).
    Details,
}

impl NcuPage {
    pub fn as_str(self) -> &'static str {
        match self {
            NcuPage::Raw => "ncu-raw",
            NcuPage::Details => "ncu-details",
        }
    }
}

/// What one ncu CSV holds.
#[derive(Debug, Clone)]
pub struct NcuFile {
    pub page: NcuPage,
    /// Device attributes (raw page only: the details page carries none but CC and SM count).
    pub device: Option<Device>,
    pub launches: Vec<KernelLaunch>,
    /// Values left unknown as implausible, one line each ("line N: the
    /// metric, the value, why"): the profile's source carries them to the
    /// report's notes.
    pub excluded: Vec<String>,
}

/// How far into a file kopt looks for the header line before giving up.
const HEADER_SEARCH_LINES: usize = 200;

/// Parse an ncu CSV held in memory. `path` only labels errors.
pub fn parse_ncu_csv(bytes: &[u8], path: &str) -> Result<NcuFile, IngestError> {
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(IngestError::Empty { path: path.into() });
    }
    if let Some(offset) = bytes.iter().take(64 * 1024).position(|&b| b == 0) {
        return Err(IngestError::Binary {
            path: path.into(),
            offset,
        });
    }
    let header = find_header(bytes, path)?;
    let body = &bytes[header.offset..];
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(body);
    let mut record = csv::ByteRecord::new();
    let ctx = Ctx {
        path,
        line_offset: header.line - 1,
    };
    if !reader
        .read_byte_record(&mut record)
        .map_err(|e| ctx.csv_error(e))?
    {
        return Err(IngestError::at(path, header.line, "header line expected"));
    }
    let columns: Vec<String> = record
        .iter()
        .map(|c| String::from_utf8_lossy(c).trim().to_string())
        .collect();
    // Any column only the long format has decides it; missing siblings are then reported by name.
    let page = if columns.iter().any(|c| {
        matches!(
            c.as_str(),
            "Section Name" | "Metric Name" | "Metric Value" | "Rule Name"
        )
    }) {
        NcuPage::Details
    } else {
        NcuPage::Raw
    };
    match page {
        NcuPage::Raw => raw::parse(&mut reader, &columns, &ctx),
        NcuPage::Details => details::parse(&mut reader, &columns, &ctx),
    }
}

/// Shared parsing context: names the file and maps CSV lines to file lines.
pub(crate) struct Ctx<'a> {
    pub path: &'a str,
    /// Lines before the header (`==PROF==` output, program output).
    pub line_offset: u64,
}

impl Ctx<'_> {
    /// An error once `held` launches reach the launch budget.
    pub fn launch_budget(&self, held: usize, line: u64) -> Result<(), IngestError> {
        let max = crate::budget::NCU_MAX_LAUNCHES;
        if held as u64 >= max.checked()? {
            return Err(IngestError::at(
                self.path,
                line,
                format!(
                    "more than {} kernel launches: not read (launch budget); {}",
                    max.get(),
                    max.how_to_raise()
                ),
            ));
        }
        Ok(())
    }

    pub fn line_of(&self, record: &csv::ByteRecord) -> u64 {
        record.position().map_or(0, |p| p.line()) + self.line_offset
    }

    pub fn csv_error(&self, e: csv::Error) -> IngestError {
        let line = e.position().map_or(0, |p| p.line()) + self.line_offset;
        IngestError::at(self.path, line, format!("malformed CSV: {e}"))
    }

    /// Position of a required column, or an error naming it.
    pub fn column(&self, columns: &[String], name: &str, hint: &str) -> Result<usize, IngestError> {
        columns.iter().position(|c| c == name).ok_or_else(|| {
            IngestError::at(
                self.path,
                self.line_offset + 1,
                format!("missing column \"{name}\" in the header{hint}"),
            )
        })
    }
}

impl Ctx<'_> {
    /// The end-of-file checks both pages share: some rows, and some time to rank.
    pub fn require_timed_rows(
        &self,
        first_row_line: Option<u64>,
        any_duration: bool,
        no_rows: &str,
        no_time: &str,
    ) -> Result<(), IngestError> {
        let Some(first) = first_row_line else {
            return Err(IngestError::at(self.path, self.line_offset + 1, no_rows));
        };
        if !any_duration {
            return Err(IngestError::at(self.path, first, no_time));
        }
        Ok(())
    }
}

struct Header {
    offset: usize,
    /// 1-based line number of the header.
    line: u64,
}

/// The header is the first line whose first cell is `ID` and which names a
/// `Kernel Name` column; everything before it (`==PROF==` lines, program
/// output) is skipped.
fn find_header(bytes: &[u8], path: &str) -> Result<Header, IngestError> {
    let mut offset = 0usize;
    for (i, line) in bytes
        .split(|&b| b == b'\n')
        .enumerate()
        .take(HEADER_SEARCH_LINES)
    {
        let text = String::from_utf8_lossy(line);
        let t = text.trim_start_matches('\u{feff}').trim();
        if (t.starts_with("\"ID\"") || t.starts_with("ID,")) && t.contains("Kernel Name") {
            return Ok(Header {
                offset,
                line: i as u64 + 1,
            });
        }
        offset += line.len() + 1;
    }
    Err(IngestError::format(
        path,
        format!(
            "not an Nsight Compute CSV: no header line starting with \"ID\" and naming \"Kernel Name\" in the first {HEADER_SEARCH_LINES} lines (export with `ncu --csv --page raw` or `--page details`)"
        ),
    ))
}

/// "(256, 1, 1)" or "256" -> Dim3.
pub(crate) fn parse_dim3(s: &str) -> Option<Dim3> {
    let nums: Vec<u32> = s
        .trim()
        .trim_matches(|c| c == '(' || c == ')')
        .split(',')
        .map(|p| p.trim().replace(['.', ' '], ""))
        .filter(|p| !p.is_empty())
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    match nums.as_slice() {
        [x] => Some(Dim3 { x: *x, y: 1, z: 1 }),
        [x, y] => Some(Dim3 { x: *x, y: *y, z: 1 }),
        [x, y, z] => Some(Dim3 {
            x: *x,
            y: *y,
            z: *z,
        }),
        _ => None,
    }
}

/// Decide a file's number style from a sample of its value cells.
/// The longest duration a kernel launch is believed to have: about 2.8
/// hours. ncu's replay of one longer launch is not a measurement kopt can
/// rank; a larger value is a broken capture.
pub const MAX_KERNEL_DURATION_NS: f64 = 1e13;

/// [`MAX_KERNEL_DURATION_NS`] in whole nanoseconds, for the readers whose
/// launches have a start and an end (kopt's trace, rocprof, Kineto).
pub const MAX_LAUNCH_NS: i64 = MAX_KERNEL_DURATION_NS as i64;

/// Why a launch from `start` to `end` ns cannot be one (longer than
/// [`MAX_LAUNCH_NS`]); None when it can.
pub(crate) fn launch_too_long(start: i64, end: i64) -> Option<String> {
    let lasts = i128::from(end) - i128::from(start);
    (lasts > i128::from(MAX_LAUNCH_NS)).then(|| {
        format!(
            "lasts {lasts} ns, beyond any kernel launch ({MAX_KERNEL_DURATION_NS:e} ns, 2.8 hours)"
        )
    })
}

/// A kernel duration checked at the parser boundary: `raw` as the file
/// wrote it, `v` in ns when it read as a number. NaN, zero (no launch takes
/// no time), negative, infinite or beyond [`MAX_KERNEL_DURATION_NS`] is an
/// error message; "n/a" or an empty cell stays missing.
pub(crate) fn check_duration(raw: &str, v: Option<f64>) -> Result<(), String> {
    if raw.trim().eq_ignore_ascii_case("nan") {
        return Err("NaN, not a duration (kopt does not read it as 0 ns)".into());
    }
    match v {
        None => Ok(()),
        Some(v) if !v.is_finite() => Err(format!("{v}, not a duration")),
        Some(v) if v < 0.0 => Err(format!(
            "a negative duration ({} ns)",
            kopt_model::figure::as_read(v)
        )),
        Some(0.0) => Err("a zero duration: every kernel launch takes time".into()),
        Some(v) if v > MAX_KERNEL_DURATION_NS => Err(format!(
            "{} ns, beyond any kernel launch ({MAX_KERNEL_DURATION_NS:e} ns, 2.8 hours)",
            kopt_model::figure::as_read(v)
        )),
        Some(_) => Ok(()),
    }
}

/// How far a percentage of peak may stray past 0..100 and still be taken
/// as ncu's rounding and replay-to-replay skew (it prints 100.3 at times).
pub const PCT_SLACK: f64 = 1.0;
/// The largest percentage of peak read as a saturated unit. ncu's
/// per-active-cycle percentages overshoot on real captures (L1/TEX at 138
/// to 285 % on H100 and H200 in the fixtures: the unit's active cycles and
/// its throughput come from different counters): the unit was busy, so the
/// figure is capped at 100 % and the report says so. Past this, the number
/// is no measurement at all.
pub const PCT_CAPPED_UP_TO: f64 = 1000.0;
/// A DRAM (or any memory) rate no GPU reaches: 100 TB/s, over ten times the
/// fastest HBM of 2026. Where the device's peak is known, 1.5x it is the bound.
pub const MAX_BYTES_PER_S: f64 = 1e14;
/// How far above the device's datasheet peak a measured DRAM rate may go
/// (ncu's rate over a microsecond kernel is coarse) before it is no measurement.
pub const PEAK_SLACK: f64 = 1.5;
/// A clock no GPU runs at: 10 GHz.
pub const MAX_CLOCK_HZ: f64 = 1e10;

/// What a metric's value may be: told by its unit (or, on a raw page
/// without a units row, by its name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Quantity {
    /// Percent of a peak: 0 to 100.
    Percent,
    /// Bytes per second.
    ByteRate,
    /// Cycles per second (a clock).
    Clock,
    /// Counts, sizes and ratios of counts: not negative.
    Count,
}

impl Quantity {
    pub(crate) fn of(metric: &str, unit: &str) -> Quantity {
        let u = unit.trim().to_ascii_lowercase();
        let per_second = u.ends_with("/second") || u.ends_with("/s");
        if u == "%" || (u.is_empty() && metric.contains("pct")) {
            Quantity::Percent
        } else if (per_second && u.contains("byte"))
            || (u.is_empty() && metric.starts_with("dram__bytes") && metric.ends_with("per_second"))
        {
            Quantity::ByteRate
        } else if u.ends_with("hz")
            || (per_second && u.starts_with("cycle"))
            || (u.is_empty() && metric.starts_with("sm__cycles") && metric.ends_with("per_second"))
        {
            Quantity::Clock
        } else {
            Quantity::Count
        }
    }
}

/// What becomes of one metric value read from ncu (duration apart: see
/// [`check_duration`]).
#[derive(Debug, PartialEq)]
pub(crate) enum Verdict {
    Keep,
    /// Read as the given value instead, and stated (a percentage of peak
    /// overshooting 100: see [`PCT_CAPPED_UP_TO`]).
    Cap(f64, String),
    /// Left unknown and stated: the value is one derived figure gone wrong
    /// (a percentage or rate over a near-zero denominator, counter skew
    /// between replay passes), and the rest of the row is sound, so the
    /// launch is still ranked by its time; the rules that need the figure
    /// report it missing rather than act on a false one.
    Exclude(String),
    /// An error naming the line and metric: a negative count or an
    /// impossible launch cannot come out of a working ncu, only out of a
    /// damaged or edited file, so nothing else in it is taken as fact.
    Refuse(String),
}

/// Launch attributes with hard limits on every NVIDIA GPU (raw name,
/// details name, least, most, why).
const LAUNCH_LIMITS: &[(&str, &str, f64, f64, &str)] = &[
    (
        "launch__block_size",
        "Block Size",
        1.0,
        1024.0,
        "a thread block has 1 to 1024 threads",
    ),
    (
        "launch__grid_size",
        "Grid Size",
        1.0,
        f64::INFINITY,
        "a grid has at least one block",
    ),
    (
        "launch__sm_count",
        "# SMs",
        1.0,
        f64::INFINITY,
        "a GPU has at least one SM",
    ),
    (
        "launch__registers_per_thread",
        "Registers Per Thread",
        0.0,
        255.0,
        "a thread has at most 255 registers",
    ),
];

/// One metric value checked at the parser boundary: `raw` as the file wrote
/// it, `v` in kopt's base unit when it read as a number (None: "n/a", empty,
/// or NaN, which ncu's number reading treats as missing).
pub(crate) fn check_value(metric: &str, unit: &str, raw: &str, v: Option<f64>) -> Verdict {
    let t = raw.trim();
    // The value in the file's own unit: `v` is in kopt's base unit (Hz for
    // a "Ghz" column), which the file's unit would misname.
    let factor = crate::units::to_base_factor(unit);
    let shown = |v: f64| {
        let in_unit = if factor != 0.0 { v / factor } else { v };
        format!("{} {}", kopt_model::figure::as_read(in_unit), unit.trim())
            .trim_end()
            .to_string()
    };
    // The number reading takes NaN and infinities for missing: look at the text.
    if t.parse::<f64>().is_ok_and(|f| !f.is_finite()) || v.is_some_and(|v| !v.is_finite()) {
        // ncu writes "n/a" for a metric it has no value for; NaN or inf
        // comes from a ratio over a zero denominator: that one figure is lost.
        return Verdict::Exclude(format!("{}, not a number: left unknown", crate::echo(t)));
    }
    let Some(v) = v else { return Verdict::Keep };
    if v < 0.0 && Quantity::of(metric, unit) != Quantity::Percent {
        return Verdict::Refuse(format!(
            "{}: a negative value where ncu counts or measures (damaged or edited file?)",
            shown(v)
        ));
    }
    if let Some((.., lo, hi, why)) = LAUNCH_LIMITS
        .iter()
        .find(|(raw_name, details_name, ..)| metric == *raw_name || metric == *details_name)
    {
        if v < *lo || v > *hi {
            return Verdict::Refuse(format!("{}: {why}", shown(v)));
        }
        return Verdict::Keep;
    }
    match Quantity::of(metric, unit) {
        Quantity::Percent if v > 100.0 + PCT_SLACK && v <= PCT_CAPPED_UP_TO => Verdict::Cap(
            100.0,
            format!("{} is beyond 100 % of peak: read as 100 %", shown(v)),
        ),
        Quantity::Percent if !(-PCT_SLACK..=100.0 + PCT_SLACK).contains(&v) => Verdict::Exclude(
            format!("{} is beyond 0..100 % of peak: left unknown", shown(v)),
        ),
        Quantity::Percent => Verdict::Keep,
        Quantity::ByteRate if v > MAX_BYTES_PER_S => Verdict::Exclude(format!(
            "{} bytes/s is beyond any GPU ({MAX_BYTES_PER_S:e}): left unknown",
            kopt_model::figure::as_read(v)
        )),
        Quantity::Clock if v > MAX_CLOCK_HZ => Verdict::Exclude(format!(
            "{} Hz is beyond any GPU clock ({MAX_CLOCK_HZ:e}): left unknown",
            kopt_model::figure::as_read(v)
        )),
        _ => Verdict::Keep,
    }
}

/// DRAM traffic checked against the device once it is known (the raw page
/// names it on every row): a rate, or bytes over the launch's duration, past
/// [`PEAK_SLACK`] x the device's peak (or [`MAX_BYTES_PER_S`] when the peak
/// is unknown) is no measurement of that device; the DRAM figures of that
/// launch are left unknown and stated, the launch stays with its time.
pub(crate) fn check_dram_against_device(
    launches: &mut [KernelLaunch],
    lines: &[u64],
    device: Option<&Device>,
    excluded: &mut Vec<String>,
) {
    let (limit, what) = match device.and_then(|d| Some((d.peaks.dram_bytes_per_s?, &d.name))) {
        Some((peak, name)) => (
            peak * PEAK_SLACK,
            format!("{PEAK_SLACK}x the {} peak of {:.0} GB/s", name, peak / 1e9),
        ),
        None => (MAX_BYTES_PER_S, format!("{MAX_BYTES_PER_S:e} bytes/s")),
    };
    for (l, line) in launches.iter_mut().zip(lines) {
        let m = &mut l.metrics;
        if let Some(rate) = m.dram_bytes_per_s.filter(|r| *r > limit) {
            excluded.push(format!(
                "line {line}: DRAM rate {} GB/s is beyond {what}: left unknown",
                kopt_model::figure::figure(rate / 1e9, 0)
            ));
            m.dram_bytes_per_s = None;
        }
        let bytes = m.dram_bytes_read.unwrap_or(0.0) + m.dram_bytes_write.unwrap_or(0.0);
        if let Some(ns) = m
            .duration_ns
            .filter(|ns| *ns > 0.0 && bytes / (ns * 1e-9) > limit)
        {
            excluded.push(format!(
                "line {line}: {} DRAM bytes in {} ns ({} GB/s) is beyond {what}: left unknown",
                kopt_model::figure::as_read(bytes),
                kopt_model::figure::as_read(ns),
                kopt_model::figure::figure(bytes / ns, 0)
            ));
            m.dram_bytes_read = None;
            m.dram_bytes_write = None;
        }
    }
}

pub(crate) fn sample_style(values: &[String]) -> NumberStyle {
    detect_style(values.iter().map(String::as_str))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_value_is_quoted_as_the_file_wrote_it() {
        // 1.6 in a "Ghz" column is 1.6e9 Hz in kopt's base unit; the
        // message names the file's number with the file's unit.
        match check_value("SM Frequency", "Ghz", "-1.6", Some(-1.6e9)) {
            Verdict::Refuse(why) => assert!(why.starts_with("-1.6 Ghz: a negative value"), "{why}"),
            _ => panic!("a negative clock is refused"),
        }
    }

    #[test]
    fn dims() {
        assert_eq!(parse_dim3("(256, 1, 1)"), Some(Dim3 { x: 256, y: 1, z: 1 }));
        assert_eq!(parse_dim3("(1, 2, 1)"), Some(Dim3 { x: 1, y: 2, z: 1 }));
        assert_eq!(
            parse_dim3("1056"),
            Some(Dim3 {
                x: 1056,
                y: 1,
                z: 1
            })
        );
        assert_eq!(parse_dim3("abc"), None);
    }
}
