//! What the sampler thread (`sampling`) and CUPTI's API callback
//! (`callbacks`) share: whether the trace is sampled, the sampler's lock and
//! wake-up, and the detach handshake. `close_window` sets `DETACH_PENDING`
//! and waits; the first API exit after it calls `detach_now`, which detaches
//! CUPTI (`cuptiFinalize`), clears the flag and wakes the sampler.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use cudarc::cupti::sys;

use crate::buffers::{BUFFERS_BACK, BUFFERS_OUT};

/// `KOPT_TRACER_SAMPLE` asked for windows (set once, by `init`).
pub(crate) static SAMPLING: AtomicBool = AtomicBool::new(false);

/// The sampler's state and the condition its thread sleeps on.
pub(crate) struct Sampler {
    state: Mutex<SamplerState>,
    pub(crate) wake: std::sync::Condvar,
}

pub(crate) struct SamplerState {
    /// The exit handler runs: stop at once.
    pub(crate) exiting: bool,
    /// CUPTI records now (a window is open since `window_start`).
    pub(crate) recording: bool,
    pub(crate) window_start: u64,
}

pub(crate) static SAMPLER: Sampler = Sampler {
    state: Mutex::new(SamplerState {
        exiting: false,
        recording: false,
        window_start: 0,
    }),
    wake: std::sync::Condvar::new(),
};

pub(crate) fn sampler_state() -> std::sync::MutexGuard<'static, SamplerState> {
    SAMPLER.state.lock().unwrap_or_else(|e| e.into_inner())
}

/// The callback subscriber of the current attachment (null when none):
/// selected API calls in a sampled window, every call while a detach waits.
pub(crate) static SUBSCRIBER: std::sync::atomic::AtomicPtr<std::ffi::c_void> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

pub(crate) fn subscriber() -> sys::CUpti_SubscriberHandle {
    SUBSCRIBER.load(Ordering::SeqCst).cast()
}

/// The window closed: the next API exit detaches CUPTI. An atomic, so the
/// callback on every API call checks it without the lock; it is cleared
/// under the lock, before the sampler is woken.
pub(crate) static DETACH_PENDING: AtomicBool = AtomicBool::new(false);
/// A whole-run trace ended on the program's request (`kopt_tracer_stop`):
/// the exit handler leaves CUPTI alone (any CUPTI call would attach it again).
pub(crate) static STOPPED: AtomicBool = AtomicBool::new(false);
/// Buffers CUPTI still held, empty, when it detached: not lost to another client.
pub(crate) static BUFFERS_LEFT_AT_DETACH: AtomicU64 = AtomicU64::new(0);

/// Detach CUPTI (first API exit after a window closed).
pub(crate) fn detach_now() {
    // Held throughout: the sampler waits on the flag under this lock.
    let _st = sampler_state();
    if !DETACH_PENDING.load(Ordering::SeqCst) {
        return;
    }
    let held = BUFFERS_OUT
        .load(Ordering::SeqCst)
        .saturating_sub(BUFFERS_BACK.load(Ordering::SeqCst));
    BUFFERS_LEFT_AT_DETACH.store(held, Ordering::SeqCst);
    // SAFETY: called from CUPTI's API-exit callback, where NVIDIA's sample
    // calls it; the window's records were flushed (`end_recording`) and,
    // with the sampler's lock held, nothing attaches meanwhile. No handle
    // is used after: the subscriber is cleared just below.
    unsafe { sys::cuptiFinalize() };
    SUBSCRIBER.store(std::ptr::null_mut(), Ordering::SeqCst);
    DETACH_PENDING.store(false, Ordering::SeqCst);
    SAMPLER.wake.notify_all();
}
