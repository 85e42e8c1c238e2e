//! Named exit codes, so CI gates need no output parsing.

use std::process::ExitCode;

/// 0: success.
pub const OK: u8 = 0;
/// 1: an error (bad input, missing tool, failed workload).
pub const ERROR: u8 = 1;
/// 2: the command line was wrong (clap uses 2 for its own usage errors too).
pub const USAGE: u8 = 2;
/// 3: a "regression / revert" verdict (a failed correctness gate; kopt bench later).
pub const REGRESSION: u8 = 3;

pub enum Failure {
    Usage(String),
    Error(anyhow::Error),
    /// The command worked and its verdict is REVERT; the report is already printed.
    Regression,
}

/// Print a failure as one line on stderr and turn it into the exit code.
pub fn report(result: Result<(), Failure>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::from(OK),
        Err(Failure::Usage(msg)) => {
            eprintln!("kopt: usage error: {msg}");
            ExitCode::from(USAGE)
        }
        Err(Failure::Regression) => ExitCode::from(REGRESSION),
        Err(Failure::Error(e)) => {
            if is_broken_pipe(&e) {
                return ExitCode::from(OK);
            }
            let chain: Vec<String> = e.chain().map(|c| c.to_string()).collect();
            eprintln!("kopt: error: {}", dedup_chain(&chain));
            ExitCode::from(ERROR)
        }
    }
}

/// Readers of `kopt ... | head` close the pipe early; that is not an error.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// "context: cause" on one line, skipping causes a context already quotes.
fn dedup_chain(chain: &[String]) -> String {
    let mut out: Vec<&str> = Vec::new();
    for c in chain {
        if !out.iter().any(|o| o.contains(c.as_str())) {
            out.push(c);
        }
    }
    out.join(": ")
}
