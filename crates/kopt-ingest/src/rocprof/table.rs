//! A rocprof CSV as a header and rows of cells, each row with its line.

use crate::IngestError;

/// The header and the rows of a CSV file; cells are kept as text.
pub(crate) struct Table {
    pub header: Vec<String>,
    /// (line number, cells); rows have the header's width.
    pub rows: Vec<(u64, Vec<String>)>,
}

impl Table {
    pub fn col(&self, names: &[&str]) -> Option<usize> {
        names
            .iter()
            .find_map(|n| self.header.iter().position(|h| h == n))
    }

    pub fn has(&self, name: &str) -> bool {
        self.header.iter().any(|h| h == name)
    }
}

/// Read `bytes` as a CSV with a header line. Empty input, NUL bytes and rows
/// of another width than the header are errors naming the file and line.
pub(crate) fn read_table(bytes: &[u8], label: &str) -> Result<Table, IngestError> {
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(IngestError::Empty {
            path: label.to_string(),
        });
    }
    if let Some(offset) = memchr::memchr(0, bytes) {
        return Err(IngestError::Binary {
            path: label.to_string(),
            offset,
        });
    }
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(bytes);
    let mut header: Option<Vec<String>> = None;
    let mut rows = Vec::new();
    let mut record = csv::StringRecord::new();
    loop {
        let line = reader.position().line();
        match reader.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => {
                let line = e.position().map_or(line, |p| p.line());
                return Err(IngestError::at(label, line, format!("not CSV: {e}")));
            }
        }
        let line = record.position().map_or(line, |p| p.line());
        if record.iter().all(|c| c.trim().is_empty()) {
            continue;
        }
        let cells: Vec<String> = record.iter().map(|c| c.trim().to_string()).collect();
        match &header {
            None => header = Some(cells),
            Some(h) if cells.len() != h.len() => {
                return Err(IngestError::at(
                    label,
                    line,
                    format!("{} fields where the header has {}", cells.len(), h.len()),
                ));
            }
            Some(_) => rows.push((line, cells)),
        }
    }
    Ok(Table {
        header: header.unwrap_or_default(),
        rows,
    })
}

/// A number cell: integers, decimals and exponents (`8.1097E+14`); empty is
/// `None`; anything else, or a value that is not finite, is an error.
pub(crate) fn number(
    cell: &str,
    label: &str,
    line: u64,
    column: &str,
) -> Result<Option<f64>, IngestError> {
    if cell.is_empty() {
        return Ok(None);
    }
    match cell.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(Some(v)),
        _ => Err(IngestError::at(
            label,
            line,
            format!(
                "{}: expected a number, found \"{}\"",
                crate::echo(column),
                crate::echo(cell)
            ),
        )),
    }
}

/// A non-negative integer cell (ids, timestamps): also accepted written as
/// a float, rounded; out of range is an error.
pub(crate) fn integer(
    cell: &str,
    label: &str,
    line: u64,
    column: &str,
) -> Result<Option<u64>, IngestError> {
    if let Ok(v) = cell.parse::<u64>() {
        return Ok(Some(v));
    }
    match number(cell, label, line, column)? {
        None => Ok(None),
        Some(v) if (0.0..1.8e19).contains(&v) => Ok(Some(v.round() as u64)),
        Some(v) => Err(IngestError::at(
            label,
            line,
            format!(
                "{}: {} is out of range",
                crate::echo(column),
                kopt_model::figure::as_read(v)
            ),
        )),
    }
}
