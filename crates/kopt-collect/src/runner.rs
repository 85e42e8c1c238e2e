//! Running a program (ncu wrapping the workload) as its own process group:
//! argv passed as given (no shell), output teed to a log file and to the
//! caller, a timeout that kills the whole group.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Lines of output kept in memory for error reports.
const TAIL_LINES: usize = 40;

/// How long output is still read after the program ended, when something
/// else (a descendant in its own session) keeps its pipes open.
const OUTPUT_DRAIN: Duration = Duration::from_secs(2);

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
pub fn run(spec: &RunSpec, on_line: &(dyn Fn(Stream, &str) + Sync)) -> std::io::Result<RunOutcome> {
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

    // Readers own the pipes and send lines here: the run ends when the
    // program does (or its timeout), not when the last holder of its output
    // closes it. A `setsid` descendant (its own session, out of reach of the
    // group kill) may keep the pipes open for ever: its readers are left
    // behind after a short drain, not waited for.
    let (tx, rx) = std::sync::mpsc::channel::<Option<(Stream, Vec<u8>)>>();
    for (stream, reader) in [
        (Stream::Stdout, Box::new(stdout) as Box<dyn Read + Send>),
        (Stream::Stderr, Box::new(stderr) as Box<dyn Read + Send>),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(reader).split(b'\n') {
                let Ok(bytes) = line else { break };
                if tx.send(Some((stream, bytes))).is_err() {
                    return;
                }
            }
            let _ = tx.send(None);
        });
    }
    drop(tx);
    let handle = |stream: Stream, bytes: Vec<u8>| {
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
    };
    let deadline = spec.timeout.map(|t| start + t);
    let mut open_streams = 2;
    let mut ended: Option<(std::process::ExitStatus, bool, Instant)> = None;
    let (status, timed_out) = loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(Some((stream, bytes))) => handle(stream, bytes),
            Ok(None) => open_streams -= 1,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => open_streams = 0,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        if ended.is_none() {
            if let Some(status) = child.try_wait()? {
                ended = Some((status, false, Instant::now()));
            } else if deadline.is_some_and(|d| Instant::now() >= d) {
                kill_group(pid);
                ended = Some((child.wait()?, true, Instant::now()));
            }
        }
        if let Some((status, timed_out, at)) = ended {
            // Output still in the pipes is read; a descendant still holding
            // them after the drain is not waited for.
            if open_streams == 0 || at.elapsed() >= OUTPUT_DRAIN {
                break (status, timed_out);
            }
        }
    };
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
    fn a_setsid_descendant_holding_the_output_does_not_hold_the_run() {
        // The descendant leaves the process group (its own session) and
        // keeps stdout open for 60 s: the timeout returned only after it.
        let dir = tempfile::tempdir().unwrap();
        let t = Instant::now();
        let out = run(
            &spec(
                dir.path(),
                "/bin/sh",
                &["-c", "echo before; setsid sleep 60 & sleep 30"],
                Some(1),
            ),
            &|_, _| {},
        )
        .unwrap();
        assert!(out.timed_out);
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        assert!(out.tail.contains(&"before".to_string()), "{:?}", out.tail);
        // Without a timeout too: the program exits, its descendant stays.
        let t = Instant::now();
        let out = run(
            &spec(
                dir.path(),
                "/bin/sh",
                &["-c", "setsid sleep 60 & echo done"],
                None,
            ),
            &|_, _| {},
        )
        .unwrap();
        assert_eq!(out.code, Some(0));
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        assert!(out.tail.contains(&"done".to_string()), "{:?}", out.tail);
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
}
