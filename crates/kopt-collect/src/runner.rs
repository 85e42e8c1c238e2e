//! Running a program as its own process group: argv passed as given (no
//! shell), output read line by line as it arrives, a timeout that stops the
//! whole group. [`run_group`] is the one runner (bench's timed runs use it
//! directly); [`run`] adds the log file and the tail that profiler passes,
//! traced runs and the optimize harness keep; [`output`] runs a short query
//! (`--version`, `nvidia-smi`) to its end.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
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

/// Set once the whole process is told to stop (a signal to the `kopt`
/// binary): every run on every thread is cancelled.
static STOP_ALL: AtomicBool = AtomicBool::new(false);

/// Cancel every run of the process, now and to come. Async-signal-safe
/// (one atomic store), so a signal handler may call it.
pub fn cancel_all() {
    STOP_ALL.store(true, Ordering::SeqCst);
}

/// Whether [`cancel_all`] was called.
pub fn all_cancelled() -> bool {
    STOP_ALL.load(Ordering::SeqCst)
}

/// Whether the front end cancelled the work running on this thread, or the
/// whole process was told to stop.
pub fn cancel_requested() -> bool {
    all_cancelled()
        || CANCEL.with(|c| {
            c.borrow()
                .as_ref()
                .is_some_and(|f| f.load(Ordering::SeqCst))
        })
}

/// How often a waiting runner looks for a cancellation.
const CANCEL_POLL: Duration = Duration::from_millis(50);

/// Lines of output kept in memory for error reports.
const TAIL_LINES: usize = 40;

/// Bytes of one line kept in the error-report tail; the log has more.
const TAIL_LINE_BYTES: usize = 4096;

/// Longest line [`run`] passes on and logs whole (a program printing
/// without newlines must not grow memory without bound); a longer one is
/// left out of the log with a note.
const RUN_MAX_LINE: usize = 1 << 20;

/// Batches of lines in flight from a reader to the runner: when the
/// runner is behind, the reader waits and the program blocks on its full
/// pipe, instead of its output piling up in memory.
const BATCHES_IN_FLIGHT: usize = 16;

/// Bytes read from a pipe at once; one batch holds at most one read's
/// lines (plus a line that spans reads, at most `max_line`).
const READ_CHUNK: usize = 64 << 10;

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
    /// Most bytes both streams together may print; past it the whole group
    /// is killed at once and [`GroupExit::output_over`] is set.
    pub max_output: Option<u64>,
}

/// How a process group's leader ended.
#[derive(Debug)]
pub struct GroupExit {
    pub status: std::process::ExitStatus,
    /// From the start to the leader's exit, measured when it exits.
    pub elapsed: Duration,
    /// Its time was up and the group was stopped.
    pub timed_out: bool,
    /// It printed more than [`GroupSpec::max_output`] and was killed.
    pub output_over: bool,
    /// Lines longer than [`GroupSpec::max_line`], not passed on.
    pub long_lines: u64,
}

/// Lines one reader read: `text` holds them back to back, `ends` each
/// one's (line number, end offset in `text`). One allocation per read,
/// not per line.
struct Batch {
    stream: Stream,
    text: Vec<u8>,
    ends: Vec<(u64, usize)>,
}

/// What a reader sends the runner.
enum Piped {
    Lines(Batch),
    /// The stream ended; this many of its lines were too long to pass on.
    Closed {
        long_lines: u64,
    },
}

/// A pipe that counts what is read from it: the output cap is judged as
/// the bytes arrive, skipped long lines included.
struct Counted<R> {
    inner: R,
    bytes: Arc<std::sync::atomic::AtomicU64>,
}

impl<R: std::io::Read> std::io::Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Read `reader` to its end (or until the runner hangs up), sending its
/// lines in batches, one per read, over the bounded channel.
fn send_lines(
    reader: impl std::io::Read,
    stream: Stream,
    max_line: usize,
    tx: &mpsc::SyncSender<Piped>,
) {
    let new_batch = || Batch {
        stream,
        text: Vec::new(),
        ends: Vec::new(),
    };
    // Both callbacks touch the batch, one after the other.
    let batch = RefCell::new(new_batch());
    let long_lines = split_lines(
        BufReader::with_capacity(READ_CHUNK, reader),
        max_line,
        &mut |n, line| {
            let mut b = batch.borrow_mut();
            b.text.extend_from_slice(line);
            let end = b.text.len();
            b.ends.push((n, end));
        },
        &mut || {
            let mut b = batch.borrow_mut();
            if b.ends.is_empty() {
                return true;
            }
            let full = std::mem::replace(&mut *b, new_batch());
            tx.send(Piped::Lines(full)).is_ok()
        },
    );
    let _ = tx.send(Piped::Closed { long_lines });
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
    #[error("cancelled")]
    Cancelled,
}

impl From<GroupError> for std::io::Error {
    fn from(e: GroupError) -> std::io::Error {
        match e {
            GroupError::Spawn { source, .. } | GroupError::Wait(source) => source,
            GroupError::Lost => std::io::Error::other("lost its process"),
            GroupError::Cancelled => {
                std::io::Error::new(std::io::ErrorKind::Interrupted, "cancelled")
            }
        }
    }
}

/// The one process runner: `spec.program` (no shell unless it is one) in a
/// process group of its own, stdin closed, each line of stdout and stderr
/// handed to `on_stdout` / `on_stderr` (1-based line numbers) as it
/// arrives, and the whole group stopped when its time is up.
pub fn run_group(
    spec: &GroupSpec<'_>,
    on_stdout: &mut (dyn FnMut(u64, &[u8]) + Send),
    on_stderr: &mut (dyn FnMut(u64, &[u8]) + Send),
) -> Result<GroupExit, GroupError> {
    if cancel_requested() {
        return Err(GroupError::Cancelled);
    }
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
        // Out of the terminal's group, a workload would outlive a kopt that
        // is killed outright: it gets SIGKILL when its parent dies.
        #[cfg(target_os = "linux")]
        {
            let parent = std::process::id() as libc::pid_t;
            // SAFETY: between fork and exec only async-signal-safe calls are
            // made (prctl, getppid); nothing allocates or takes a lock.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    // The parent died before the prctl: nobody waits for us.
                    if libc::getppid() != parent {
                        return Err(std::io::Error::other("kopt exited before the run started"));
                    }
                    Ok(())
                });
            }
        }
    }
    let mut child = cmd.spawn().map_err(|source| GroupError::Spawn {
        program: spec.program.display().to_string(),
        source,
    })?;
    let start = Instant::now();
    let pid = child.id();
    let _reaped = ReapOnExit::register(pid);
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    // Readers own the pipes and send lines here: the run ends when the
    // program does (or its time is up), not when the last holder of its
    // output closes it. A `setsid` descendant (its own session, out of reach
    // of the group kill) may keep the pipes open for ever: its readers are
    // left behind after a short drain, not waited for.
    let (line_tx, line_rx) = mpsc::sync_channel::<Piped>(BATCHES_IN_FLIGHT);
    let printed = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let max_line = spec.max_line;
    let mut open_streams = 0;
    for (stream, reader) in [
        (
            Stream::Stdout,
            stdout.map(|r| Box::new(r) as Box<dyn std::io::Read + Send>),
        ),
        (
            Stream::Stderr,
            stderr.map(|r| Box::new(r) as Box<dyn std::io::Read + Send>),
        ),
    ] {
        let Some(inner) = reader else { continue };
        open_streams += 1;
        let tx = line_tx.clone();
        let bytes = Arc::clone(&printed);
        std::thread::spawn(move || {
            send_lines(Counted { inner, bytes }, stream, max_line, &tx);
        });
    }
    drop(line_tx);
    // The leader is waited for on a thread of its own, so `elapsed` is exact.
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let status = child.wait();
        let _ = done_tx.send((status, start.elapsed()));
    });
    let deadline = spec.timeout.map(|t| start + t);
    let over = |printed: &std::sync::atomic::AtomicU64| {
        spec.max_output
            .is_some_and(|cap| printed.load(Ordering::Relaxed) > cap)
    };
    let (mut ended, mut long_lines): (Option<Ended>, u64) = (None, 0);
    loop {
        // Lines first, in slices, so a timeout or a front end's
        // cancellation is seen within CANCEL_POLL.
        match line_rx.recv_timeout(CANCEL_POLL) {
            Ok(Piped::Lines(batch)) => {
                let on_line: &mut (dyn FnMut(u64, &[u8]) + Send) = match batch.stream {
                    Stream::Stdout => &mut *on_stdout,
                    Stream::Stderr => &mut *on_stderr,
                };
                let mut from = 0;
                for &(n, end) in &batch.ends {
                    on_line(n, &batch.text[from..end]);
                    from = end;
                }
            }
            Ok(Piped::Closed { long_lines: l }) => {
                open_streams -= 1;
                long_lines += l;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => open_streams = 0,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if ended.is_none() {
            // Judged as the bytes arrive, before the leader's exit: a
            // flood is stopped at its cap, not when it ends by itself.
            if over(&printed) {
                kill_group(pid, Stop::Kill);
                let (status, elapsed) = done_rx.recv().map_err(|_| GroupError::Lost)?;
                return Ok(GroupExit {
                    status: status.map_err(GroupError::Wait)?,
                    elapsed,
                    timed_out: false,
                    output_over: true,
                    long_lines,
                });
            }
            match done_rx.try_recv() {
                Ok((status, elapsed)) => ended = Some((status, elapsed, false, Instant::now())),
                Err(mpsc::TryRecvError::Disconnected) => return Err(GroupError::Lost),
                Err(mpsc::TryRecvError::Empty) => {
                    if cancel_requested() || deadline.is_some_and(|d| Instant::now() >= d) {
                        kill_group(pid, spec.stop);
                        let (status, elapsed) = done_rx.recv().map_err(|_| GroupError::Lost)?;
                        ended = Some((status, elapsed, true, Instant::now()));
                    }
                }
            }
        }
        if let Some((_, _, _, at)) = &ended {
            // Output still in the pipes is read; a descendant still holding
            // them after the drain is not waited for.
            if open_streams == 0 || at.elapsed() >= OUTPUT_DRAIN {
                let (status, elapsed, timed_out, _) = ended.take().expect("ended");
                return Ok(GroupExit {
                    status: status.map_err(GroupError::Wait)?,
                    elapsed,
                    timed_out,
                    output_over: over(&printed),
                    long_lines,
                });
            }
        }
    }
}

/// The leader's exit as the runner saw it: status, elapsed, whether its
/// time was up, and when it was seen (the output drain runs from there).
type Ended = (
    std::io::Result<std::process::ExitStatus>,
    Duration,
    bool,
    Instant,
);

/// The reaper's script: it reads `+PGID` / `-PGID` lines while kopt runs
/// and, when its input closes (kopt exited or was killed, even by
/// SIGKILL), kills every group still listed: the workloads in flight.
const REAPER_SCRIPT: &str = r#"groups=" "
while read -r op pg; do
  case "$op" in
    +) groups="$groups$pg " ;;
    -) new=" "; for g in $groups; do [ "$g" = "$pg" ] || new="$new$g "; done; groups=$new ;;
  esac
done
for g in $groups; do kill -KILL "-$g" 2>/dev/null; done"#;

/// The process's reaper (a `/bin/sh` in a group of its own), started with
/// the first run; None where it cannot start (the leader's
/// PR_SET_PDEATHSIG still covers a killed kopt).
fn reaper() -> Option<&'static Mutex<std::process::ChildStdin>> {
    static REAPER: std::sync::OnceLock<Option<Mutex<std::process::ChildStdin>>> =
        std::sync::OnceLock::new();
    REAPER
        .get_or_init(|| {
            let mut cmd = Command::new("/bin/sh");
            cmd.args(["-c", REAPER_SCRIPT])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            #[cfg(unix)]
            {
                use std::os::unix::process::CommandExt;
                // Out of the terminal's group: a Ctrl-C to kopt leaves it be.
                cmd.process_group(0);
            }
            // Never waited for: it outlives kopt by design and ends itself.
            let mut child = cmd.spawn().ok()?;
            child.stdin.take().map(Mutex::new)
        })
        .as_ref()
}

/// A run's group listed with the reaper while its leader runs.
struct ReapOnExit(u32);

impl ReapOnExit {
    fn register(pgid: u32) -> ReapOnExit {
        reap_line('+', pgid);
        ReapOnExit(pgid)
    }
}

impl Drop for ReapOnExit {
    fn drop(&mut self) {
        reap_line('-', self.0);
    }
}

fn reap_line(op: char, pgid: u32) {
    if let Some(r) = reaper() {
        let mut stdin = r.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(stdin, "{op} {pgid}").and_then(|_| stdin.flush());
    }
}

/// Call `f(line_number, line)` for every line of `r` (the last one without
/// its newline too); a line longer than `max_line` bytes is skipped but
/// counted.
pub fn for_each_line(r: impl BufRead, max_line: usize, f: &mut (dyn FnMut(u64, &[u8]) + Send)) {
    split_lines(r, max_line, f, &mut || true);
}

/// [`for_each_line`], calling `drained()` whenever what was read is used up
/// (the next read may block: time to hand the lines on); it returns false
/// to stop reading. Returns how many lines were too long.
fn split_lines(
    mut r: impl BufRead,
    max_line: usize,
    f: &mut dyn FnMut(u64, &[u8]),
    drained: &mut dyn FnMut() -> bool,
) -> u64 {
    let mut line = Vec::new();
    let (mut n, mut long_lines) = (0u64, 0u64);
    let mut too_long = false;
    loop {
        let mut buf = match r.fill_buf() {
            Ok([]) | Err(_) => break,
            Ok(b) => b,
        };
        let read = buf.len();
        // Every line of this read, without a call to the reader between; a
        // line wholly inside the read is passed on without a copy.
        while !buf.is_empty() {
            let Some(i) = memchr::memchr(b'\n', buf) else {
                if !too_long && line.len() + buf.len() <= max_line {
                    line.extend_from_slice(buf);
                } else {
                    too_long = true;
                    line.clear();
                }
                break;
            };
            n += 1;
            if too_long || line.len() + i > max_line {
                long_lines += 1;
            } else if line.is_empty() {
                f(n, &buf[..i]);
            } else {
                line.extend_from_slice(&buf[..i]);
                f(n, &line);
            }
            line.clear();
            too_long = false;
            buf = &buf[i + 1..];
        }
        r.consume(read);
        if !drained() {
            return long_lines;
        }
    }
    if too_long {
        long_lines += 1;
    } else if !line.is_empty() {
        f(n + 1, &line);
    }
    drained();
    long_lines
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
                t.push_back(clip_bytes(&text, TAIL_LINE_BYTES).to_string());
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
            max_line: RUN_MAX_LINE,
            max_output: None,
        },
        &mut line_to(Stream::Stdout),
        &mut line_to(Stream::Stderr),
    )?;
    if let Ok(mut f) = log.lock() {
        if exit.long_lines > 0 {
            writeln!(
                f,
                "[kopt: {} line(s) longer than {RUN_MAX_LINE} bytes were left out of this log]",
                exit.long_lines
            )?;
        }
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

/// At most `max` bytes of `text`, cut at a character boundary.
fn clip_bytes(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
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
                max_output: None,
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
                max_output: None,
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

    fn group<'a>(args: &'a [String], max_output: Option<u64>) -> GroupSpec<'a> {
        GroupSpec {
            program: Path::new("/bin/sh"),
            args,
            env: &[],
            timeout: Some(Duration::from_secs(60)),
            stop: Stop::Kill,
            max_line: 1024,
            max_output,
        }
    }

    /// While the caller is slow to take lines, the program waits on its
    /// full pipe: its output does not pile up in kopt's memory (#39: 200 MB
    /// printed took 7.8 GB).
    #[test]
    fn a_slow_caller_holds_the_program_back_instead_of_buffering_its_output() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("all-printed");
        // 16 MB of short lines, then the marker.
        let args = [
            "-c".to_string(),
            format!("yes | head -c 16000000; touch '{}'", marker.display()),
        ];
        let (mut first, mut lines) = (true, 0u64);
        let mut printed_while_stalled = None;
        let exit = run_group(
            &group(&args, None),
            &mut |_, _| {
                if first {
                    // Stalled until the program has printed everything, or 5 s.
                    first = false;
                    let t = Instant::now();
                    while !marker.exists() && t.elapsed() < Duration::from_secs(5) {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    printed_while_stalled = Some(marker.exists());
                }
                lines += 1;
            },
            &mut |_, _| {},
        )
        .unwrap();
        assert_eq!(
            printed_while_stalled,
            Some(false),
            "the output was buffered"
        );
        assert!(exit.status.success() && !exit.output_over);
        assert_eq!(lines, 8_000_000, "every line still arrives");
        assert!(marker.exists());
    }

    /// Past `max_output` the group is killed at once, without newlines too.
    #[test]
    fn a_program_printing_past_its_output_cap_is_killed_at_once() {
        for script in ["yes", "head -c 100000000 /dev/zero; sleep 60"] {
            let args = ["-c".to_string(), script.to_string()];
            let t = Instant::now();
            let (mut bytes, mut lines) = (0usize, 0u64);
            let exit = run_group(
                &group(&args, Some(1 << 20)),
                &mut |_, l| {
                    bytes += l.len() + 1;
                    lines += 1;
                },
                &mut |_, _| {},
            )
            .unwrap();
            assert!(exit.output_over && !exit.timed_out, "{script}: {exit:?}");
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "{script}: {:?}",
                t.elapsed()
            );
            assert!(bytes <= 2 << 20, "{script}: {bytes} bytes passed on");
            if script == "yes" {
                assert!(lines > 0);
            } else {
                assert_eq!(lines, 0, "one line past max_line, skipped");
            }
        }
    }

    /// A line past [`RUN_MAX_LINE`] is left out of the log, with a note; the
    /// tail keeps the lines around it.
    #[test]
    fn a_run_leaves_out_a_giant_line_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let script = format!(
            "echo before; head -c {} /dev/zero | tr '\\0' x; echo; echo after",
            RUN_MAX_LINE + 10
        );
        let out = run(
            &spec(dir.path(), "/bin/sh", &["-c", &script], None),
            &|_, _| {},
        )
        .unwrap();
        assert_eq!(out.tail, ["before", "after"]);
        let log = std::fs::read_to_string(dir.path().join("run.log")).unwrap();
        assert!(
            log.starts_with("before\nafter\n"),
            "{}",
            clip_bytes(&log, 200)
        );
        assert!(log.contains("1 line(s) longer than 1048576 bytes"), "{log}");
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
