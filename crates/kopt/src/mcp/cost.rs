//! Device time: what a long tool will cost before it runs (from the
//! history or a timing pass), and a watchdog that stops it at its budget.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a call is expected to cost, and where the figure comes from.
#[derive(Debug, Clone)]
pub struct Estimate {
    pub seconds: f64,
    /// In words: "history (run 12)", "timing pass (0.8 s)", "upper bound ...".
    pub basis: String,
}

/// Why a timing run gave no figure.
pub enum TimingError {
    /// The flag was set: the client cancelled, or the budget ran out.
    Stopped,
    /// It ran past the budget: its cost is at least the budget.
    OverBudget(f64),
    Failed(String),
}

/// Run `argv` once, as the tool would (no shell unless argv is one), in its
/// own process group; killed past `limit` or once `cancel` is set.
pub fn timing_run(argv: &[String], limit: f64, cancel: &AtomicBool) -> Result<f64, TimingError> {
    let Some((program, args)) = argv.split_first() else {
        return Err(TimingError::Failed("empty command".into()));
    };
    let start = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| TimingError::Failed(format!("cannot start {program}: {e}")))?;
    let pid = child.id() as i32;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let s = start.elapsed().as_secs_f64();
                return if status.success() {
                    Ok(s)
                } else {
                    Err(TimingError::Failed(format!(
                        "`{}` failed in its timing run ({status})",
                        argv.join(" ")
                    )))
                };
            }
            Ok(None) => {}
            Err(e) => {
                return Err(TimingError::Failed(format!(
                    "cannot wait for {program}: {e}"
                )))
            }
        }
        let over = start.elapsed().as_secs_f64() > limit;
        if over || cancel.load(Ordering::SeqCst) {
            // SAFETY: a plain syscall on the process group this function created.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
            let _ = child.wait();
            return Err(if over {
                TimingError::OverBudget(limit)
            } else {
                TimingError::Stopped
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The newest profile or trace run of the same argv in the history: the sum
/// of its passes (run.json) is what the next one costs.
pub fn from_history(db: &Path, kind: &str, argv: &[String]) -> Option<Estimate> {
    let rows = kopt_engine::history::list(db, 200).ok()?;
    rows.rows.iter().filter(|r| r.kind == kind).find_map(|r| {
        let dir = Path::new(r.run_dir.as_deref()?);
        let record = kopt_engine::run_folder::read_record(dir).ok()??;
        if record.argv != argv {
            return None;
        }
        let seconds: f64 = record.passes.iter().map(|p| p.elapsed_s).sum();
        (seconds > 0.0).then(|| Estimate {
            seconds,
            basis: format!("history: run {} took {seconds:.1} s", r.id),
        })
    })
}

/// Sets `cancel` once `budget` seconds have passed; `hit` says it did.
pub struct Watchdog {
    done: Arc<AtomicBool>,
}

impl Watchdog {
    pub fn start(budget: f64, cancel: Arc<AtomicBool>, hit: Arc<AtomicBool>) -> Watchdog {
        let done = Arc::new(AtomicBool::new(false));
        let d = Arc::clone(&done);
        let start = Instant::now();
        std::thread::spawn(move || {
            while !d.load(Ordering::SeqCst) {
                if start.elapsed().as_secs_f64() > budget {
                    hit.store(true, Ordering::SeqCst);
                    cancel.store(true, Ordering::SeqCst);
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Watchdog { done }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
    }
}
