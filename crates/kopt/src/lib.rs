//! The `kopt` command line as a library, so the Python package's `kopt`
//! console script runs the same code as the binary.

mod cli;
mod commands;
mod completions;
mod exit;
mod mcp;
mod options;
mod progress;

use std::ffi::OsString;

use clap::Parser;

/// Run kopt with `args` (the program name first); returns the exit code.
/// Usage errors and `--help` exit the process, as clap does.
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = cli::Cli::parse_from(args);
    let result = match &cli.command {
        cli::Command::Analyze(a) => commands::analyze(a),
        cli::Command::Profile(a) => commands::profile(a),
        cli::Command::Trace(a) => commands::trace(a),
        cli::Command::Compare(a) => commands::compare(a),
        cli::Command::Journal(c) => commands::journal(c),
        cli::Command::History(a) => commands::history(a),
        cli::Command::Bench(a) => commands::bench(a),
        cli::Command::Optimize(a) => commands::optimize(a),
        cli::Command::Tune(a) => commands::tune(a),
        cli::Command::Completions { shell } => completions::completions(*shell),
        cli::Command::Man => completions::man(),
        cli::Command::Mcp(a) => commands::mcp(a),
        cli::Command::Schema { name } => commands::schema(name.as_deref()),
    };
    exit::report(result)
}
