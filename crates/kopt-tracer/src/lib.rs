//! kopt's CUPTI injection library. Loaded into any CUDA program through
//! `CUDA_INJECTION64_PATH` (PyTorch, Triton, CuPy, CUDA C++ alike), it records
//! kernels, memcpy/memset and the CUDA API calls that launch, copy or
//! synchronise and NVTX ranges, with CUPTI's activity API, and writes one JSON object per
//! record to `$KOPT_TRACE_OUT`.
//!
//! It must never take the host process down: every entry point runs inside
//! `catch_unwind`, failures are reported once on stderr and tracing stops.
//! `KOPT_TRACER_SAMPLE=ON_MS/PERIOD_MS` traces windows of a run instead of
//! all of it (see `sampling`).
//! Bindings: cudarc's `cupti` module with dynamic loading (libcupti is opened
//! at run time, so kopt builds without CUDA).
//!
//! Modules, by concern:
//! - `config`: the environment switches;
//! - `apis`: which API calls are kept, and their names;
//! - `buffers`: CUPTI's activity buffers, the drain thread, record decoding;
//! - `detach`: the sampled flag, the sampler's lock and the detach handshake
//!   that `sampling` and `callbacks` share;
//! - `callbacks`: CUPTI's API callbacks;
//! - `sampling`: attaching CUPTI, sampled windows;
//! - [`records`]: the trace's JSON lines, pure functions (public: the
//!   format contract with kopt-ingest is tested through them);
//! - `output`: the trace file; `cupti`: small CUPTI wrappers;
//! - `sync_ends`: the bare run of a program without step ranges (the ends
//!   of the host's synchronising calls, CUPTI's callbacks only).
//!
//! This file holds the entry point, initialisation and the exit handler.

#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]

mod apis;
mod buffers;
mod callbacks;
mod config;
mod cupti;
mod detach;
mod nvtx;
mod output;
pub mod records;
pub use sync_ends::counts_as_launch;
mod sampling;
mod sync_ends;

use std::io::{BufWriter, Write};
use std::panic::catch_unwind;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use cudarc::cupti::sys;

use crate::buffers::{BUFFERS_BACK, BUFFERS_OUT, RECORDS};
use crate::detach::{BUFFERS_LEFT_AT_DETACH, SAMPLING};
use crate::output::OUT;
use crate::sampling::DROPPED;

static ACTIVE: AtomicBool = AtomicBool::new(false);
/// The process that set tracing up. A child forked from it (a DataLoader
/// worker, say) inherits the exit handler but not CUPTI or the drain thread:
/// there the handler does nothing, and the parent's trace stays whole.
static TRACED_PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn warn(msg: &str) {
    eprintln!("kopt-tracer: {msg}");
}

/// Wait for one of kopt's threads, if it was started.
fn join(slot: &Mutex<Option<std::thread::JoinHandle<()>>>) {
    let handle = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(h) = handle {
        let _ = h.join();
    }
}

/// Entry point CUDA calls when it loads the library.
#[no_mangle]
pub extern "C" fn InitializeInjection() -> i32 {
    if catch_unwind(init).is_err() {
        warn("initialisation panicked; tracing is off");
    }
    // 1 = success for the CUDA driver: the program runs whether tracing works or not.
    1
}

fn init() {
    if ACTIVE.swap(true, Ordering::SeqCst) {
        return;
    }
    let Some(path) = config::trace_out() else {
        if let Some(out) = sync_ends::out_path() {
            // SAFETY: as below: only tries to open libcupti.
            if unsafe { sys::is_culib_present() } {
                // SAFETY: libcupti is present; the ACTIVE swap makes this
                // the process's only call.
                unsafe { sync_ends::start(&out) };
            } else {
                warn("libcupti not found: the bare run records no synchronising call");
            }
            return;
        }
        warn("KOPT_TRACE_OUT is not set; tracing is off");
        return;
    };
    // SAFETY: only tries to open libcupti (dlopen, closed again); no
    // arguments, no pointers. libcupti's initialisers are the ones CUDA
    // runs when it loads CUPTI itself.
    if !unsafe { sys::is_culib_present() } {
        warn("libcupti not found: add CUDA's lib64 (or extras/CUPTI/lib64) to LD_LIBRARY_PATH; tracing is off");
        return;
    }
    match output::open_trace_file(std::path::Path::new(&path)) {
        Ok(f) => {
            let mut w = BufWriter::with_capacity(1 << 20, f);
            let _ = w.write_all(
                records::process_line_of(
                    std::process::id(),
                    config::trace_run().as_deref(),
                    config::rank(),
                )
                .as_bytes(),
            );
            *OUT.lock().unwrap_or_else(|e| e.into_inner()) = Some(w)
        }
        Err(e) => {
            warn(&format!(
                "{}: cannot create: {e}; tracing is off",
                path.to_string_lossy()
            ));
            return;
        }
    }
    if let Some(mb) = config::buffer_mb() {
        buffers::set_buffer_mb(mb);
    }
    if !config::sync_drain() && !buffers::start_drain_thread() {
        warn("cannot start the drain thread; draining in CUPTI's thread");
    }
    let sample = config::sample();
    SAMPLING.store(sample.is_some(), Ordering::SeqCst);
    // SAFETY: libcupti is present (checked above); the ACTIVE swap makes
    // this the process's only first attach, and no sampler thread exists
    // yet, so nothing attaches or detaches concurrently.
    let Some(start) = (unsafe { sampling::attach(true) }) else {
        return;
    };
    TRACED_PID.store(std::process::id(), Ordering::SeqCst);
    // SAFETY: `at_exit` is an `extern "C" fn()` of this library, which is
    // never unloaded; it catches every panic, so nothing unwinds into libc.
    // Registered once: the ACTIVE swap above.
    unsafe { libc::atexit(at_exit) };
    if let Some((on_ms, period_ms)) = sample {
        sampling::start_sampler(start, on_ms, period_ms);
    }
}

/// Ends a whole-run trace before the program does, for a program that runs
/// on untraced afterwards (kopt's module driver times its bare steps after
/// its traced ones, in one process): every record so far is handed to the
/// writer and CUPTI detaches at the exit of the program's next CUDA call
/// (call one, e.g. a device synchronisation, before timing anything). The
/// trace file is completed at exit as usual. Returns 1 when the trace ended
/// here; 0 when this process traces nothing, the trace is sampled, it was
/// already stopped, or CUPTI could not be asked to detach (recording goes
/// on). Found by a program through `dlsym` on `CUDA_INJECTION64_PATH`.
#[no_mangle]
pub extern "C" fn kopt_tracer_stop() -> i32 {
    let stopped = catch_unwind(|| {
        TRACED_PID.load(Ordering::SeqCst) == std::process::id() && sampling::stop_whole_run()
    });
    i32::from(stopped.unwrap_or(false))
}

extern "C" fn at_exit() {
    if TRACED_PID.load(Ordering::SeqCst) != std::process::id() {
        return;
    }
    let _ = catch_unwind(|| {
        let sampling = SAMPLING.load(Ordering::SeqCst);
        if sampling {
            sampling::stop_sampler();
        }
        // A detached CUPTI is left alone: any CUPTI call would attach it again.
        let st = detach::sampler_state();
        if sampling && st.recording {
            sampling::end_recording(sampling::Ending::Window(st.window_start));
        } else if !sampling && !detach::STOPPED.load(Ordering::SeqCst) {
            sampling::end_recording(sampling::Ending::Exit);
        }
        drop(st);
        let dropped = DROPPED.load(Ordering::SeqCst);
        // Every buffer is back from CUPTI: let the drain thread write them all.
        buffers::finish_drain_thread();
        if let Ok(mut guard) = OUT.lock() {
            if let Some(w) = guard.as_mut() {
                let lost = BUFFERS_OUT
                    .load(Ordering::SeqCst)
                    .saturating_sub(BUFFERS_BACK.load(Ordering::SeqCst))
                    .saturating_sub(BUFFERS_LEFT_AT_DETACH.load(Ordering::SeqCst));
                let counts = buffers::take_api_call_counts();
                if !counts.is_empty() {
                    let _ = w.write_all(records::api_counts_line(&counts).as_bytes());
                }
                let _ = w.write_all(
                    records::end_line(RECORDS.load(Ordering::Relaxed), dropped, lost).as_bytes(),
                );
                let _ = w.flush();
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_without_a_trace_is_refused() {
        // Nothing attached in this process: nothing to stop, and no panic.
        assert_eq!(kopt_tracer_stop(), 0);
    }

    #[test]
    fn initialisation_without_an_output_path_is_harmless() {
        // No KOPT_TRACE_OUT in the test environment: a warning, no panic, success code.
        std::env::remove_var("KOPT_TRACE_OUT");
        assert_eq!(InitializeInjection(), 1);
    }
}
