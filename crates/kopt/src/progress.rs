//! The engine's progress events on a terminal: a spinner per pass (or a
//! line per round for bench) when stderr is a terminal, plain lines
//! otherwise; the workload's output passed through to stderr, so the
//! report alone is on stdout.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use kopt_engine::progress::{Progress, Stream};

pub struct TerminalProgress {
    bar: Option<ProgressBar>,
    /// Print a line per pass when there is no spinner (bench prints nothing then).
    lines: bool,
}

impl TerminalProgress {
    /// `lines`: without a terminal, still say which pass runs (profile does).
    pub fn new(lines: bool) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::new_spinner();
            b.set_style(
                ProgressStyle::with_template("{spinner} kopt: {msg} [{elapsed}]")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            b.enable_steady_tick(Duration::from_millis(120));
            b
        });
        TerminalProgress { bar, lines }
    }

    fn line(&self, msg: &str) {
        match &self.bar {
            Some(b) => b.println(msg),
            None => eprintln!("{msg}"),
        }
    }
}

impl Progress for TerminalProgress {
    fn pass_started(&self, n: usize, total: usize, what: &str) {
        let msg = format!("pass {n}/{total}: {what}");
        match &self.bar {
            Some(b) => {
                b.reset_elapsed();
                b.set_message(msg);
            }
            None if self.lines => eprintln!("kopt: {msg} ..."),
            None => {}
        }
    }

    fn pass_done(&self, n: usize, total: usize, seconds: f64) {
        if self.bar.is_some() || self.lines {
            self.line(&format!("kopt: pass {n}/{total} done in {seconds:.1} s"));
        }
    }

    fn note(&self, message: &str) {
        self.line(&format!("kopt: {message}"));
    }

    fn workload_line(&self, _stream: Stream, line: &str, passthrough: bool) {
        if passthrough {
            self.line(line);
        }
    }

    fn bench_round(&self, round: usize, samples: &[(String, usize)]) {
        if let Some(b) = &self.bar {
            let counts: Vec<String> = samples.iter().map(|(n, s)| format!("{n} {s}")).collect();
            b.set_message(format!("round {round}: samples {}", counts.join(", ")));
        }
    }

    fn finished(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
