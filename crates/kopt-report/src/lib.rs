//! Exporters for a [`Diagnosis`]: one module per format behind one trait.
//! They decide nothing: every figure and word comes from kopt-analyze.

pub mod bench_html;
mod bench_report;
pub mod chrome_trace;
mod compare_report;
mod format;
pub mod html;
mod json;
mod markdown;
mod optimize_report;
pub mod roofline;
mod strip;
mod terminal;
mod tune_report;

use std::io::{self, Write};

use kopt_model::Diagnosis;

pub use bench_report::{render_bench, render_gate};
pub use compare_report::render_compare;
pub use html::HtmlExporter;
pub use json::JsonExporter;
pub use markdown::MarkdownExporter;
pub use optimize_report::render_optimize;
pub use terminal::TerminalExporter;
pub use tune_report::render_tune;

/// One output format.
pub trait Exporter {
    fn render(&self, diagnosis: &Diagnosis, out: &mut dyn Write) -> io::Result<()>;

    /// Convenience for tests and callers that want a string.
    fn render_to_string(&self, diagnosis: &Diagnosis) -> String {
        let mut buf = Vec::new();
        self.render(diagnosis, &mut buf)
            .expect("writing to a Vec cannot fail");
        String::from_utf8(buf).expect("exporters write UTF-8")
    }
}

/// The formats `--format` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Format {
    #[cfg_attr(
        feature = "clap",
        value(name = "term", alias = "terminal", alias = "text")
    )]
    Terminal,
    #[cfg_attr(feature = "clap", value(name = "md", alias = "markdown"))]
    Markdown,
    Json,
    Html,
}

impl Format {
    pub const NAMES: [&'static str; 4] = ["term", "md", "json", "html"];

    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "term" | "terminal" | "text" => Some(Format::Terminal),
            "md" | "markdown" => Some(Format::Markdown),
            "json" => Some(Format::Json),
            "html" => Some(Format::Html),
            _ => None,
        }
    }

    /// The exporter for this format; `width` bounds terminal tables.
    pub fn exporter(self, width: Option<u16>) -> Box<dyn Exporter> {
        self.exporter_with(width, false)
    }

    /// `exporter`, with `wide` asking the terminal table for every column.
    pub fn exporter_with(self, width: Option<u16>, wide: bool) -> Box<dyn Exporter> {
        match self {
            Format::Terminal => Box::new(TerminalExporter { width, wide }),
            Format::Markdown => Box::new(MarkdownExporter),
            Format::Json => Box::new(JsonExporter),
            Format::Html => Box::new(HtmlExporter),
        }
    }
}
