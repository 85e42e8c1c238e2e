//! Every document kopt prints, in every format, behind one trait
//! ([`Render`]): a diagnosis (one exporter module per format), the bench,
//! compare, tune and optimize reports, and the run history's documents.
//! They decide nothing: every figure and word comes from kopt-analyze, the
//! bench statistics or the engine.

pub mod bench_html;
mod bench_report;
pub mod chrome_trace;
mod compare_report;
pub mod escape;
mod format;
mod history_report;
pub mod html;
mod json;
mod markdown;
mod optimize_report;
mod ranks_report;
pub mod roofline;
mod strip;
mod summary;
mod terminal;
mod tune_report;

use std::io::{self, Write};

use kopt_model::Diagnosis;

pub use format::evidence_line;
pub use html::HtmlExporter;
pub use json::JsonExporter;
pub use markdown::MarkdownExporter;
pub use summary::Summary;
pub use terminal::TerminalExporter;

/// A document kopt prints: a [`Diagnosis`], a bench, compare, tune or
/// optimize report, or one of the history's (listing, one run, diff,
/// calibration). Every front end renders through this, so the CLI and
/// Python print the same text.
pub trait Render {
    /// The document as text in `format`; `layout` matters to the terminal only.
    fn render(&self, format: Format, layout: Layout) -> String;
}

/// How the terminal lays a document out (other formats ignore it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Layout {
    /// Columns the tables fit into (default: the terminal's width).
    pub width: Option<u16>,
    /// Every column of the kernel table, however wide.
    pub wide: bool,
    /// The whole detail (evidence, actions, notes under each kernel), not
    /// the one-screen default.
    pub verbose: bool,
}

impl Layout {
    /// Tables fitted into `width` columns (`None`: the terminal's).
    pub fn width(width: Option<u16>) -> Layout {
        Layout {
            width,
            ..Layout::default()
        }
    }
}

impl Render for Diagnosis {
    fn render(&self, format: Format, layout: Layout) -> String {
        format.exporter_for(layout).render_to_string(self)
    }
}

/// One output format of a diagnosis, writing to any stream.
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

    /// The exporter for this format; `width` bounds terminal tables (the
    /// terminal's report is the brief default).
    pub fn exporter(self, width: Option<u16>) -> Box<dyn Exporter> {
        self.exporter_for(Layout::width(width))
    }

    /// The exporter for this format laid out as `layout` says (it matters
    /// to the terminal only).
    pub fn exporter_for(self, layout: Layout) -> Box<dyn Exporter> {
        match self {
            Format::Terminal => Box::new(TerminalExporter {
                width: layout.width,
                wide: layout.wide,
                verbose: layout.verbose,
            }),
            Format::Markdown => Box::new(MarkdownExporter),
            Format::Json => Box::new(JsonExporter),
            Format::Html => Box::new(HtmlExporter),
        }
    }
}
