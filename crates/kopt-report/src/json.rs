use std::io::{self, Write};

use kopt_model::Diagnosis;

use crate::Exporter;

/// Versioned JSON (`"schema": "kopt/1"`) for tools and agents; full kernel names.
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn render(&self, d: &Diagnosis, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, d).map_err(io::Error::other)?;
        writeln!(out)
    }
}
