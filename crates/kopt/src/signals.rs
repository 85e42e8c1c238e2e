//! SIGINT, SIGTERM and SIGHUP to the `kopt` binary: every workload is in
//! a process group of its own (out of reach of the terminal's Ctrl-C), so
//! the first signal cancels every run, whose runner stops its group, and
//! the process exits with 128 + the signal once they are stopped (at most
//! five seconds later); a second signal exits at once. SIGKILL cannot be
//! caught: the runner gives each workload PR_SET_PDEATHSIG for that.

use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

/// How long the runners get to stop their groups before the process exits.
const GRACE: Duration = Duration::from_secs(5);

/// The first signal received, 0 for none.
static RECEIVED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only async-signal-safe work: atomic stores and _exit.
    if RECEIVED
        .compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(128 + sig) };
    }
    kopt_engine::progress::cancel_all();
}

/// The signal that stopped kopt, if one did.
pub fn received() -> Option<i32> {
    Some(RECEIVED.load(Ordering::SeqCst)).filter(|s| *s != 0)
}

/// Install the handlers and the thread that ends the process after one.
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a handler that only does async-signal-safe work, installed
        // with sigaction (no SA_RESETHAND: a second signal exits at once).
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
    let _ = std::thread::Builder::new()
        .name("kopt-signals".into())
        .spawn(|| loop {
            std::thread::sleep(Duration::from_millis(50));
            if let Some(sig) = received() {
                // The runners see the cancellation within 50 ms and stop
                // their groups (SIGTERM, half a second, SIGKILL).
                std::thread::sleep(GRACE);
                std::process::exit(128 + sig);
            }
        });
}
