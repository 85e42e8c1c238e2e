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
        Some(v) if v < 0.0 => Err(format!("a negative duration ({v} ns)")),
        Some(0.0) => Err("a zero duration: every kernel launch takes time".into()),
        Some(v) if v > MAX_KERNEL_DURATION_NS => Err(format!(
            "{v} ns, beyond any kernel launch ({MAX_KERNEL_DURATION_NS:e} ns, 2.8 hours)"
        )),
        Some(_) => Ok(()),
    }
}

pub(crate) fn sample_style(values: &[String]) -> NumberStyle {
    detect_style(values.iter().map(String::as_str))
}

#[cfg(test)]
mod tests {
    use super::*;

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
