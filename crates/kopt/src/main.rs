//! `kopt`: thin entry point. Arguments are parsed in `cli`, validated in
//! `options`, and handed to the library crates by the command modules.

mod analyze_cmd;
mod bench_cmd;
mod cli;
mod compare_cmd;
mod exit;
mod history_cmd;
mod journal_cmd;
mod options;
mod output;
mod profile_cmd;
mod run_record;
mod trace_cmd;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    let result = match cli.command {
        cli::Command::Analyze(args) => options::AnalyzeRequest::try_from(args)
            .map_err(exit::Failure::Usage)
            .and_then(|req| analyze_cmd::run(&req).map_err(exit::Failure::Error)),
        cli::Command::Profile(args) => options::ProfileRequest::try_from(args)
            .map_err(exit::Failure::Usage)
            .and_then(|req| profile_cmd::run(&req).map_err(exit::Failure::Error)),
        cli::Command::Trace(args) => options::TraceRequest::try_from(args)
            .map_err(exit::Failure::Usage)
            .and_then(|req| trace_cmd::run(&req).map_err(exit::Failure::Error)),
        cli::Command::Compare(args) => compare_cmd::run(&args),
        cli::Command::Journal(cmd) => journal_cmd::run(cmd),
        cli::Command::Bench(args) => bench_cmd::run(&args),
        cli::Command::History(args) => history_cmd::run(&args).map_err(exit::Failure::Error),
    };
    exit::report(result)
}
