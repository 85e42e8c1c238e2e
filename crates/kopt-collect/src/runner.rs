//! Running a program (ncu wrapping the workload) as its own process group:
//! argv passed as given (no shell), output teed to a log file and to the
//! caller, a timeout that kills the whole group.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

thread_local! {
    static CANCEL: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// Run `f` so that, once `flag` is set, every run started on this thread
/// (here and in kopt's other process loops) has its process group killed
/// and no new run starts: a front end's cancellation (the MCP server).
pub fn cancellable<R>(flag: Option<Arc<AtomicBool>>, f: impl FnOnce() -> R) -> R {
    let _guard = enter_cancellable(flag);
    f()
}

/// [`cancellable`] for the rest of a scope: a thread a workflow starts
/// takes its parent's [`cancel_flag`] with this.
pub fn enter_cancellable(flag: Option<Arc<AtomicBool>>) -> CancelGuard {
    CancelGuard(CANCEL.with(|c| c.replace(flag)))
}

/// Puts the thread's previous flag back when dropped.
pub struct CancelGuard(Option<Arc<AtomicBool>>);

impl Drop for CancelGuard {
    fn drop(&mut self) {
        let before = self.0.take();
        CANCEL.with(|c| *c.borrow_mut() = before);
    }
}

/// This thread's cancellation flag, to hand to the threads it starts.
pub fn cancel_flag() -> Option<Arc<AtomicBool>> {
    CANCEL.with(|c| c.borrow().clone())
}

/// Whether the front end cancelled the work running on this thread.
pub fn cancel_requested() -> bool {
    CANCEL.with(|c| {
        c.borrow()
            .as_ref()
            .is_some_and(|f| f.load(Ordering::SeqCst))
    })
}

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

/// Run `spec`; every output line goes to `on_line` as it arrives.
/// A cancelled caller's run is killed like a timed-out one.
pub fn run(spec: &RunSpec, on_line: &(dyn Fn(Stream, &str) + Sync)) -> std::io::Result<RunOutcome> {
    if cancel_requested() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Interrupted,
            "cancelled",
        ));
    }
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // Its own process group, so a timeout kills the workload ncu started too.
        cmd.process_group(0);
    }
    let log = Arc::new(Mutex::new(std::io::BufWriter::new(std::fs::File::create(
        &spec.log,
    )?)));
    let tail: Arc<Mutex<VecDeque<String>>> = Arc::new(Mutex::new(VecDeque::new()));
    let start = Instant::now();
    let mut child = cmd.spawn()?;
    let pid = child.id();
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");

    let (status, timed_out) = std::thread::scope(
        |scope| -> std::io::Result<(std::process::ExitStatus, bool)> {
            for (stream, reader) in [
                (Stream::Stdout, Box::new(stdout) as Box<dyn Read + Send>),
                (Stream::Stderr, Box::new(stderr) as Box<dyn Read + Send>),
            ] {
                let (log, tail) = (Arc::clone(&log), Arc::clone(&tail));
                scope.spawn(move || {
                    for line in BufReader::new(reader).split(b'\n') {
                        let Ok(bytes) = line else { break };
                        let text = String::from_utf8_lossy(&bytes)
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
                });
            }
            let deadline = spec.timeout.map(|t| start + t);
            loop {
                if let Some(status) = child.try_wait()? {
                    return Ok((status, false));
                }
                if deadline.is_some_and(|d| Instant::now() >= d) || cancel_requested() {
                    kill_group(pid);
                    let status = child.wait()?;
                    return Ok((status, true));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        },
    )?;
    if let Ok(mut f) = log.lock() {
        f.flush()?;
    }
    let tail = tail
        .lock()
        .map(|t| t.iter().cloned().collect())
        .unwrap_or_default();
    #[cfg(unix)]
    let signal = std::os::unix::process::ExitStatusExt::signal(&status);
    #[cfg(not(unix))]
    let signal = None;
    Ok(RunOutcome {
        code: status.code(),
        signal,
        timed_out,
        elapsed: start.elapsed(),
        tail,
    })
}

/// SIGTERM the group, give it a moment to flush, then SIGKILL.
fn kill_group(pid: u32) {
    #[cfg(unix)]
    unsafe {
        // SAFETY: plain syscalls on a process group we created.
        let pgid = -(pid as i32);
        libc::kill(pgid, libc::SIGTERM);
        std::thread::sleep(Duration::from_millis(500));
        libc::kill(pgid, libc::SIGKILL);
    }
    #[cfg(not(unix))]
    let _ = pid;
}

/// What `program --version` printed: (stdout, stderr); None when it cannot
/// run. Each tool's caller picks its version line.
pub fn version_output(program: &Path) -> Option<(String, String)> {
    let out = std::process::Command::new(program)
        .arg("--version")
        .output()
        .ok()?;
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
    fn cancellation_kills_the_group_and_starts_nothing_more() {
        let dir = tempfile::tempdir().unwrap();
        let flag = Arc::new(AtomicBool::new(false));
        let setter = Arc::clone(&flag);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            setter.store(true, Ordering::SeqCst);
        });
        let t = Instant::now();
        cancellable(Some(flag), || {
            let out = run(&spec(dir.path(), "/bin/sleep", &["30"], None), &|_, _| {}).unwrap();
            assert!(!out.success());
            assert!(t.elapsed() < Duration::from_secs(5));
            let again = run(&spec(dir.path(), "/bin/true", &[], None), &|_, _| {});
            assert_eq!(again.unwrap_err().kind(), std::io::ErrorKind::Interrupted);
        });
        assert!(!cancel_requested(), "the flag is this call's only");
    }
}
