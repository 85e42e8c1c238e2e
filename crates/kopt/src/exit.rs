//! Named exit codes, so CI gates need no output parsing.

/// 0: success.
pub const OK: u8 = 0;
/// 1: an error (bad input, missing tool, failed workload).
pub const ERROR: u8 = 1;
/// 2: the command line was wrong (clap uses 2 for its own usage errors too).
pub const USAGE: u8 = 2;
/// 3: a REVERT verdict (a failed correctness gate, a slower candidate).
pub const REGRESSION: u8 = 3;

/// How a command ended when it did not simply succeed.
pub enum Failure {
    Error(kopt_engine::Error),
    /// The command worked and its verdict is REVERT; the report is already printed.
    Regression,
}

impl From<kopt_engine::Error> for Failure {
    fn from(e: kopt_engine::Error) -> Self {
        Failure::Error(e)
    }
}

/// Print a failure as one line on stderr (one prefix for every error) and
/// turn it into the exit code.
pub fn report(result: Result<(), Failure>) -> u8 {
    match result {
        Ok(()) => OK,
        Err(Failure::Regression) => REGRESSION,
        Err(Failure::Error(e)) => {
            eprintln!(
                "kopt: error: {}",
                kopt_model::text::error_line(&e.to_string())
            );
            match e {
                kopt_engine::Error::Usage(_) => USAGE,
                _ => ERROR,
            }
        }
    }
}
