//! Device time: what a long tool will cost before it runs (from the
//! history or a timing pass), and a watchdog that stops it at its budget.

use std::path::Path;
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

/// Run `argv` once, as the tool would (no shell unless argv is one),
/// through the engine's runner: its own process group, stopped past
/// `limit` or once `cancel` is set.
pub fn timing_run(
    workload: &kopt_engine::Workload,
    limit: f64,
    cancel: &Arc<AtomicBool>,
) -> Result<f64, TimingError> {
    use kopt_engine::workload::{time_workload_once, TimedRun};
    let limit_d = kopt_engine::workload::secs(limit);
    let run = kopt_engine::progress::cancellable(Some(Arc::clone(cancel)), || {
        time_workload_once(workload, limit_d)
    });
    match run.map_err(|e| TimingError::Failed(e.to_string()))? {
        TimedRun::Finished {
            seconds,
            failure: None,
        } => Ok(seconds),
        TimedRun::Finished {
            failure: Some(status),
            ..
        } => Err(TimingError::Failed(format!(
            "{} failed in its timing run ({status})",
            workload.describe()
        ))),
        TimedRun::OverLimit => Err(TimingError::OverBudget(limit)),
        TimedRun::Cancelled => Err(TimingError::Stopped),
    }
}

/// The newest profile or trace run of the same argv in the history: the sum
/// of its passes (run.json) is what the next one costs.
pub fn from_history(db: Option<&Path>, kind: &str, argv: &[String]) -> Option<Estimate> {
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
