//! A program run for its printed result (a front end running kopt itself
//! in a process of its own): stdout kept up to a cap, the last lines of
//! stderr kept for the error, the whole group stopped at its timeout or
//! when the caller's cancel flag is set (kopt-collect's runner).

use std::collections::VecDeque;
use std::path::Path;
use std::time::Duration;

pub use kopt_collect::runner::GroupError;
use kopt_collect::runner::{run_group, GroupSpec, Stop};

/// What the program printed and how it ended.
#[derive(Debug)]
pub struct Captured {
    pub stdout: Vec<u8>,
    /// Its last lines of stderr (at most [`STDERR_LINES`]).
    pub stderr_tail: Vec<String>,
    pub status: std::process::ExitStatus,
    pub timed_out: bool,
    /// It printed more than the cap and was stopped.
    pub output_over: bool,
}

/// Lines of stderr kept for an error message.
pub const STDERR_LINES: usize = 8;

/// Longest stdout line kept whole: a pretty-printed JSON document's
/// lines are short, but a string in it may be long.
const MAX_LINE: usize = 64 * 1024 * 1024;

/// Run `program args` with `env` added, at most `timeout`, stopping it
/// once both streams together pass `max_output` bytes. Err when it cannot
/// start, or when the caller's run was cancelled (the group is killed).
pub fn capture(
    program: &Path,
    args: &[String],
    env: &[(String, String)],
    timeout: Duration,
    max_output: u64,
) -> Result<Captured, GroupError> {
    let mut stdout = Vec::new();
    let mut on_stdout = |_: u64, line: &[u8]| {
        stdout.extend_from_slice(line);
        stdout.push(b'\n');
    };
    let mut tail = VecDeque::new();
    let mut on_stderr = |_: u64, line: &[u8]| {
        if tail.len() == STDERR_LINES {
            tail.pop_front();
        }
        tail.push_back(String::from_utf8_lossy(line).into_owned());
    };
    let exit = run_group(
        &GroupSpec {
            program,
            args,
            env,
            timeout: Some(timeout),
            stop: Stop::Kill,
            max_line: MAX_LINE,
            max_output: Some(max_output),
        },
        &mut on_stdout,
        &mut on_stderr,
    )?;
    // The runner stops a cancelled group as it stops one out of time.
    if kopt_collect::runner::cancel_requested() {
        return Err(GroupError::Cancelled);
    }
    Ok(Captured {
        stdout,
        stderr_tail: tail.into(),
        status: exit.status,
        timed_out: exit.timed_out,
        output_over: exit.output_over,
    })
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn stdout_is_kept_and_stderr_tail_cut() {
        let args = vec![
            "-c".to_string(),
            "echo '{\"a\":' ; echo 1} ; for i in 1 2 3 4 5 6 7 8 9 10; do echo e$i >&2; done"
                .into(),
        ];
        let c = capture(
            Path::new("/bin/sh"),
            &args,
            &[],
            Duration::from_secs(20),
            1 << 20,
        )
        .unwrap();
        assert!(c.status.success());
        assert_eq!(String::from_utf8_lossy(&c.stdout), "{\"a\":\n1}\n");
        assert_eq!(c.stderr_tail.len(), STDERR_LINES);
        assert_eq!(c.stderr_tail.last().map(String::as_str), Some("e10"));
    }

    #[test]
    fn output_past_the_cap_stops_the_program() {
        let args = vec!["-c".to_string(), "yes".into()];
        let c = capture(
            Path::new("/bin/sh"),
            &args,
            &[],
            Duration::from_secs(20),
            1 << 16,
        )
        .unwrap();
        assert!(c.output_over && !c.status.success());
        assert!(c.stdout.len() < 1 << 22, "{}", c.stdout.len());
    }

    #[test]
    fn a_cancelled_caller_kills_the_program() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let flag = Arc::new(AtomicBool::new(false));
        let set = Arc::clone(&flag);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            set.store(true, Ordering::SeqCst);
        });
        let started = std::time::Instant::now();
        let args = vec!["-c".to_string(), "sleep 30".into()];
        let r = crate::progress::cancellable(Some(flag), || {
            capture(
                Path::new("/bin/sh"),
                &args,
                &[],
                Duration::from_secs(60),
                1 << 16,
            )
        });
        assert!(matches!(r, Err(GroupError::Cancelled)), "{r:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
