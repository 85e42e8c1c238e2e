//! Running a program as its own process group: argv passed as given (no
//! shell), output read line by line as it arrives, a timeout that stops the
//! whole group. [`run_group`] is the one runner (bench's timed runs use it
//! directly); [`run`] adds the log file and the tail that profiler passes,
//! traced runs and the optimize harness keep; [`output`] runs a short query
//! (`--version`, `nvidia-smi`) to its end.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

/// Lines of output kept in memory for error reports.
const TAIL_LINES: usize = 40;

/// What to run and how.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Extra environment (e.g. CUDA_VISIBLE_DEVICES).
    pub env: Vec<(String, String)>,
    pub timeout: Option<Duration>,
    /// Where the combined output is written in full.
    pub log: PathBuf,
}

/// Which stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// Exit code; None when killed by a signal.
    pub code: Option<i32>,
    /// The signal that killed it (Unix), if one did.
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub elapsed: Duration,
    /// The last lines of output (both streams, in arrival order).
    pub tail: Vec<String>,
}

impl RunOutcome {
    pub fn success(&self) -> bool {
        !self.timed_out && self.code == Some(0)
    }
}

/// How a process group is stopped when its time is up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGTERM, half a second to flush (a profiler writing its report),
    /// then SIGKILL.
    TermThenKill,
    /// SIGKILL at once (a benchmark run past its budget: nothing to keep).
    Kill,
}

/// A program run as its own process group, its output read line by line.
#[derive(Debug, Clone)]
pub struct GroupSpec<'a> {
    pub program: &'a Path,
    pub args: &'a [String],
    /// Extra environment (e.g. CUDA_VISIBLE_DEVICES).
    pub env: &'a [(String, String)],
    /// Stop the whole group after this long.
    pub timeout: Option<Duration>,
    pub stop: Stop,
    /// Longest line passed on whole, in bytes; a longer one is skipped (a
    /// program printing without newlines must not grow memory without bound).
    pub max_line: usize,
}

/// How a process group's leader ended.
#[derive(Debug)]
pub struct GroupExit {
    pub status: std::process::ExitStatus,
    /// From the start to the leader's exit, measured when it exits.
    pub elapsed: Duration,
    /// Its time was up and the group was stopped.
    pub timed_out: bool,
}

/// Why a process group could not be run to its end.
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("cannot wait: {0}")]
    Wait(std::io::Error),
    #[error("lost its process")]
    Lost,
}

impl From<GroupError> for std::io::Error {
    fn from(e: GroupError) -> std::io::Error {
        match e {
            GroupError::Spawn { source, .. } | GroupError::Wait(source) => source,
            GroupError::Lost => std::io::Error::other("lost its process"),
        }
    }
}

/// The one process runner: `spec.program` (no shell unless it is one) in a
/// process group of its own, stdin closed, each line of stdout and stderr
/// handed to `on_stdout` / `on_stderr` (1-based line numbers) as it
/// arrives, and the whole group stopped when its time is up. The leader is
/// waited for on a thread of its own, so `elapsed` is exact (no polling).
pub fn run_group(
    spec: &GroupSpec<'_>,
    on_stdout: &mut (dyn FnMut(u64, &[u8]) + Send),
    on_stderr: &mut (dyn FnMut(u64, &[u8]) + Send),
) -> Result<GroupExit, GroupError> {
    let mut cmd = Command::new(spec.program);
    cmd.args(spec.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in spec.env {
        cmd.env(k, v);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // Its own process group, so a timeout kills what the program started too.
        cmd.process_group(0);
    }
    let mut child = cmd.spawn().map_err(|source| GroupError::Spawn {
        program: spec.program.display().to_string(),
        source,
    })?;
    let start = Instant::now();
    let pid = child.id();
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let (done_tx, done_rx) = mpsc::channel();
    let max_line = spec.max_line;
    std::thread::scope(|scope| {
        scope.spawn(move || {
            if let Some(out) = stdout {
                for_each_line(BufReader::new(out), max_line, on_stdout);
            }
        });
        scope.spawn(move || {
            if let Some(err) = stderr {
                for_each_line(BufReader::new(err), max_line, on_stderr);
            }
        });
        scope.spawn(move || {
            let status = child.wait();
            let _ = done_tx.send((status, start.elapsed()));
        });
        let waited = match spec.timeout {
            Some(t) => done_rx.recv_timeout(t).ok(),
            None => done_rx.recv().ok(),
        };
        let (status, elapsed, timed_out) = match waited {
            Some((status, elapsed)) => (status, elapsed, false),
            None => {
                kill_group(pid, spec.stop);
                let (status, elapsed) = done_rx.recv().map_err(|_| GroupError::Lost)?;
                (status, elapsed, true)
            }
        };
        Ok(GroupExit {
            status: status.map_err(GroupError::Wait)?,
            elapsed,
            timed_out,
        })
    })
}

/// Call `f(line_number, line)` for every line of `r` (the last one without
/// its newline too); a line longer than `max_line` bytes is skipped but
/// counted.
pub fn for_each_line(mut r: impl BufRead, max_line: usize, f: &mut (dyn FnMut(u64, &[u8]) + Send)) {
    let mut line = Vec::new();
    let mut n = 0u64;
    let mut too_long = false;
    loop {
        let buf = match r.fill_buf() {
            Ok([]) | Err(_) => break,
            Ok(b) => b,
        };
        let (chunk, ends) = match buf.iter().position(|&c| c == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if line.len() + chunk.len() <= max_line {
            line.extend_from_slice(chunk);
        } else {
            too_long = true;
        }
        let used = ends.unwrap_or(buf.len());
        r.consume(used);
        if ends.is_some() {
            n += 1;
            if !too_long {
                f(n, &line);
            }
            line.clear();
            too_long = false;
        }
    }
    if !line.is_empty() && !too_long {
        f(n + 1, &line);
    }
}

/// Run `spec`: output teed to its log file and to `on_line` as it arrives,
/// the last lines kept for error reports, a timeout that stops the whole
/// group gently (SIGTERM, then SIGKILL).
pub fn run(spec: &RunSpec, on_line: &(dyn Fn(Stream, &str) + Sync)) -> std::io::Result<RunOutcome> {
    let log = Mutex::new(std::io::BufWriter::new(std::fs::File::create(&spec.log)?));
    let tail: Mutex<VecDeque<String>> = Mutex::new(VecDeque::new());
    let line_to = |stream: Stream| {
        let (log, tail) = (&log, &tail);
        move |_: u64, bytes: &[u8]| {
            let text = String::from_utf8_lossy(bytes)
                .trim_end_matches('\r')
                .to_string();
            if let Ok(mut f) = log.lock() {
                let _ = writeln!(f, "{text}");
            }
            if let Ok(mut t) = tail.lock() {
                if t.len() == TAIL_LINES {
                    t.pop_front();
                }
                t.push_back(text.clone());
            }
            on_line(stream, &text);
        }
    };
    let exit = run_group(
        &GroupSpec {
            program: &spec.program,
            args: &spec.args,
            env: &spec.env,
            timeout: spec.timeout,
            stop: Stop::TermThenKill,
            max_line: usize::MAX,
        },
        &mut line_to(Stream::Stdout),
        &mut line_to(Stream::Stderr),
    )?;
    if let Ok(mut f) = log.lock() {
        f.flush()?;
    }
    let tail = tail
        .lock()
        .map(|t| t.iter().cloned().collect())
        .unwrap_or_default();
    #[cfg(unix)]
    let signal = std::os::unix::process::ExitStatusExt::signal(&exit.status);
    #[cfg(not(unix))]
    let signal = None;
    Ok(RunOutcome {
        code: exit.status.code(),
        signal,
        timed_out: exit.timed_out,
        elapsed: exit.elapsed,
        tail,
    })
}

/// Stop the group: SIGTERM, a moment to flush, then SIGKILL; or SIGKILL.
fn kill_group(pid: u32, stop: Stop) {
    #[cfg(unix)]
    unsafe {
        // SAFETY: plain syscalls on a process group we created.
        let pgid = -(pid as i32);
        if stop == Stop::TermThenKill {
            libc::kill(pgid, libc::SIGTERM);
            std::thread::sleep(Duration::from_millis(500));
        }
        libc::kill(pgid, libc::SIGKILL);
    }
    #[cfg(not(unix))]
    let _ = (pid, stop);
}

/// What a short query run to its end printed (`--version`, `nvidia-smi
/// --query-gpu`, `ncu -i REPORT --csv`), and how it exited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Printed {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub status: std::process::ExitStatus,
}

/// `program args` run to its end, stdin closed, both streams captured.
pub fn output<S: AsRef<std::ffi::OsStr>>(program: &Path, args: &[S]) -> std::io::Result<Printed> {
    let out = Command::new(program).args(args).output()?;
    Ok(Printed {
        stdout: out.stdout,
        stderr: out.stderr,
        status: out.status,
    })
}

/// What `program --version` printed: (stdout, stderr); None when it cannot
/// run. Each tool's caller picks its version line.
pub fn version_output(program: &Path) -> Option<(String, String)> {
    let out = output(program, &["--version"]).ok()?;
    Some((
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// The file a log line of `name` goes to inside `dir`.
pub fn log_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.log"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(dir: &Path, program: &str, args: &[&str], timeout: Option<u64>) -> RunSpec {
        RunSpec {
            program: program.into(),
            args: args.iter().map(|s| s.to_string()).collect(),
            env: vec![("KOPT_TEST_VAR".into(), "42".into())],
            timeout: timeout.map(Duration::from_secs),
            log: dir.join("run.log"),
        }
    }

    #[test]
    fn passes_argv_without_a_shell_and_tees_output() {
        let dir = tempfile::tempdir().unwrap();
        let lines = Mutex::new(Vec::new());
        let out = run(
            &spec(
                dir.path(),
                "/bin/sh",
                &[
                    "-c",
                    "echo \"$1 $KOPT_TEST_VAR\"; echo err >&2; exit 3",
                    "sh",
                    "a b;c",
                ],
                None,
            ),
            &|s, l| lines.lock().unwrap().push((s, l.to_string())),
        )
        .unwrap();
        assert_eq!(out.code, Some(3));
        assert!(!out.success());
        let lines = lines.into_inner().unwrap();
        assert!(
            lines.contains(&(Stream::Stdout, "a b;c 42".to_string())),
            "{lines:?}"
        );
        assert!(lines.contains(&(Stream::Stderr, "err".to_string())));
        let log = std::fs::read_to_string(dir.path().join("run.log")).unwrap();
        assert!(log.contains("a b;c 42") && log.contains("err"));
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("grandchild-survived");
        // The shell starts a grandchild that would write the marker after 3 s.
        let script = format!("(sleep 3; touch '{}') & sleep 30", marker.display());
        let t = Instant::now();
        let out = run(
            &spec(dir.path(), "/bin/sh", &["-c", &script], Some(1)),
            &|_, _| {},
        )
        .unwrap();
        assert!(out.timed_out);
        assert!(t.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_secs(3));
        assert!(!marker.exists(), "grandchild outlived the timeout");
    }

    #[test]
    fn lines_are_split_and_long_ones_skipped() {
        let text = format!("a\n{}\nb\nlast", "x".repeat(100 + 10));
        let mut seen = Vec::new();
        for_each_line(
            std::io::BufReader::with_capacity(7, text.as_bytes()),
            100,
            &mut |n, l| seen.push((n, String::from_utf8_lossy(l).into_owned())),
        );
        assert_eq!(
            seen,
            [
                (1, "a".to_string()),
                (3, "b".to_string()),
                (4, "last".to_string())
            ]
        );
    }

    #[test]
    fn a_run_past_its_budget_is_killed_at_once_and_timed_exactly() {
        let args = ["-c".to_string(), "echo one; sleep 30".to_string()];
        let mut lines = Vec::new();
        let exit = run_group(
            &GroupSpec {
                program: Path::new("/bin/sh"),
                args: &args,
                env: &[],
                timeout: Some(Duration::from_millis(300)),
                stop: Stop::Kill,
                max_line: 1024,
            },
            &mut |n, l| lines.push((n, String::from_utf8_lossy(l).into_owned())),
            &mut |_, _| {},
        )
        .unwrap();
        assert!(exit.timed_out);
        assert!(exit.elapsed < Duration::from_secs(5), "{:?}", exit.elapsed);
        assert_eq!(lines, [(1, "one".to_string())]);
        let err = run_group(
            &GroupSpec {
                program: Path::new("/no/such/program"),
                args: &[],
                env: &[],
                timeout: None,
                stop: Stop::Kill,
                max_line: 1024,
            },
            &mut |_, _| {},
            &mut |_, _| {},
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cannot start /no/such/program: "),
            "{err}"
        );
    }
}
