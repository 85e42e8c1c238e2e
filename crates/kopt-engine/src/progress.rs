//! What a long workflow tells its front end while it runs. The CLI draws
//! spinners and passes the workload's output through; the Python package
//! stays quiet; tests record the events.

pub use kopt_collect::Stream;

/// Run a workflow so that setting the flag kills the workload's process
/// group and starts no other run (the hook lives in kopt-collect's runner
/// and bench's process loop; threads a workflow starts inherit it).
pub use kopt_collect::runner::cancellable;

/// Stop every run of the process (a signal to the `kopt` binary), and
/// whether that happened.
pub use kopt_collect::runner::{all_cancelled, cancel_all};

/// Events of a running workflow; every method has a silent default.
pub trait Progress: Sync {
    /// Pass `n` of `total` starts (`kopt profile`).
    fn pass_started(&self, _n: usize, _total: usize, _what: &str) {}
    fn pass_done(&self, _n: usize, _total: usize, _seconds: f64) {}
    /// A line between steps: a fallback taken, a note on what was skipped.
    fn note(&self, _message: &str) {}
    /// A line the workload printed (`passthrough`: the user asked to see it).
    fn workload_line(&self, _stream: Stream, _line: &str, _passthrough: bool) {}
    /// A benchmark round finished: samples so far per variant.
    fn bench_round(&self, _round: usize, _samples: &[(String, usize)]) {}
    fn finished(&self) {}
}

/// No output at all.
pub struct Silent;

impl Progress for Silent {}
