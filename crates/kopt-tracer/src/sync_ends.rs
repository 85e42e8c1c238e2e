//! The bare run of a program without step ranges: CUPTI's callback API
//! only, enabled for the calls that make the host wait for the GPU (device,
//! context, stream and event synchronisation, blocking copies), and no
//! activity records, so kernels and launches run as they do untraced. Each
//! such call's end becomes one line of `$KOPT_BARE_SYNCS_OUT`:
//! `{"t":"bare_sync","pid":P,"e":E}` (host monotonic clock, ns), written when
//! the call returns. The traced run's steps of such a program are marked by
//! the same calls, so the analysis matches the two runs' sync calls and
//! reads the untraced step period off them.
//!
//! A driver call made inside a runtime call is not a line of its own (the
//! runtime call is, as in the traced run's activity records).
//!
//! With `$KOPT_BARE_LAUNCH_EVERY=N` too (a program that marks no steps and
//! makes too few sync calls to time them by), the kernel launch calls'
//! callbacks are enabled instead of the sync calls' (a program's start-up
//! copies would otherwise outnumber the marks): each launch call (graph launches count
//! one, a driver launch inside a runtime one does not count) adds one to a
//! counter, and every N-th (N = the traced step's launch count: one line a
//! step) becomes `{"t":"bare_launch","pid":P,"every":N,"n":ORDINAL,"e":E}`,
//! E the time the call began. Its cost is the callback's entry and exit on
//! every launch (an atomic add; a line only every N); the analysis reads the
//! untraced step period off the marks of the traced run's steady steps.

use std::cell::Cell;
use std::ffi::c_void;
use std::io::Write;
use std::panic::catch_unwind;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use cudarc::cupti::sys;

use crate::cupti::c_text;

static OUT: OnceLock<Mutex<std::fs::File>> = OnceLock::new();

/// Launch calls made so far (outermost ones).
static LAUNCHES: AtomicU64 = AtomicU64::new(0);

/// Callback ids CUPTI numbers below this; a bit a launch call's.
const MAX_CBID: usize = 1500;

/// The launch counting, when `$KOPT_BARE_LAUNCH_EVERY` asked for it: every
/// how many launches a line, and which callback ids (runtime, driver) are
/// launch calls.
struct LaunchMarks {
    every: u64,
    runtime: Vec<bool>,
    driver: Vec<bool>,
}

static MARKS: OnceLock<LaunchMarks> = OnceLock::new();

/// `$KOPT_BARE_LAUNCH_EVERY`: mark every N-th launch call (N >= 1).
pub(crate) fn launch_every() -> Option<u64> {
    std::env::var("KOPT_BARE_LAUNCH_EVERY")
        .ok()?
        .trim()
        .parse()
        .ok()
        .filter(|n| *n > 0)
}

/// A kernel or graph launch call, by CUPTI's name, as kopt-model's
/// `ApiKind::of` counts launches (`tests/launch_names.rs` holds the two
/// together): graph launches, kernel launches, cooperative ones, `cuLaunchGrid`.
pub fn counts_as_launch(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.contains("graphlaunch")
        || lower.contains("launchkernel")
        || lower.contains("launchcooperativekernel")
        || lower == "culaunchgrid"
}

/// The line a marked launch becomes.
pub(crate) fn launch_line(pid: u32, every: u64, ordinal: u64, start_ns: i64) -> String {
    format!(
        "{{\"t\":\"bare_launch\",\"pid\":{pid},\"every\":{every},\"n\":{ordinal},\"e\":{start_ns}}}\n"
    )
}

thread_local! {
    /// Selected runtime calls this thread is inside.
    static RUNTIME_DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// A call that blocks the host until GPU work is done, by CUPTI's name:
/// the calls the analysis reads as the host's sync marks (kopt-model's
/// `ApiKind::Synchronize`, and blocking copies: a memcpy that is not
/// `Async`).
pub(crate) fn blocks_host(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    if lower.contains("launch") {
        return false;
    }
    lower.contains("synchronize") || (lower.contains("memcpy") && !lower.contains("async"))
}

/// `$KOPT_BARE_SYNCS_OUT`, when this run is a sync-only bare run.
pub(crate) fn out_path() -> Option<std::ffi::OsString> {
    std::env::var_os("KOPT_BARE_SYNCS_OUT").filter(|p| !p.is_empty())
}

fn now_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a local timespec clock_gettime writes; CLOCK_MONOTONIC
    // always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// The line a sync call's end becomes.
pub(crate) fn sync_line(pid: u32, end_ns: i64) -> String {
    format!("{{\"t\":\"bare_sync\",\"pid\":{pid},\"e\":{end_ns}}}\n")
}

/// Set the sync-only bare run up: open the output, subscribe to CUPTI's
/// callbacks and enable them for the blocking calls only. False (with a
/// warning) when it could not; the program runs on either way.
///
/// # Safety
/// libcupti is loaded (checked by the caller); called once, from
/// `InitializeInjection`.
pub(crate) unsafe fn start(path: &std::ffi::OsStr) -> bool {
    let file = match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        Ok(f) => f,
        Err(e) => {
            crate::warn(&format!(
                "{}: cannot create: {e}; the bare run records nothing",
                path.to_string_lossy()
            ));
            return false;
        }
    };
    if OUT.set(Mutex::new(file)).is_err() {
        return false;
    }
    let mut handle: sys::CUpti_SubscriberHandle = std::ptr::null_mut();
    // SAFETY: `handle` is a local out-pointer; `on_call` has the signature
    // of CUpti_CallbackFunc, is a plain function of this never-unloaded
    // library and ignores its user data, passed null.
    if unsafe { sys::cuptiSubscribe(&mut handle, Some(on_call), std::ptr::null_mut()) }
        != sys::CUptiResult::CUPTI_SUCCESS
    {
        crate::warn("cannot subscribe to CUPTI's callbacks; the bare run records nothing");
        return false;
    }
    let every = launch_every();
    let mut runtime_launch = vec![false; MAX_CBID];
    let mut driver_launch = vec![false; MAX_CBID];
    let mut enabled = 0;
    for domain in [
        sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RUNTIME_API,
        sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API,
    ] {
        // Callback ids are small dense integers; ids without a name are unused.
        for cbid in 1..MAX_CBID as u32 {
            let mut p: *const std::ffi::c_char = std::ptr::null();
            // SAFETY: `p` is a local out-pointer; domain and id are plain
            // values (an unknown id is an error, not UB).
            let named = unsafe { sys::cuptiGetCallbackName(domain, cbid, &mut p) }
                == sys::CUptiResult::CUPTI_SUCCESS;
            // SAFETY: on success CUPTI set `p` to its static NUL-terminated
            // name of the call, or left it null.
            let name = if named { unsafe { c_text(p) } } else { None };
            let launch = every.is_some() && name.as_deref().is_some_and(counts_as_launch);
            let sync = every.is_none() && name.is_some_and(|n| blocks_host(&n));
            if (launch || sync)
                // SAFETY: `handle` is the subscriber made above; domain and
                // id are CUPTI's own.
                && unsafe { sys::cuptiEnableCallback(1, handle, domain, cbid) }
                    == sys::CUptiResult::CUPTI_SUCCESS
            {
                enabled += 1;
                if launch {
                    match domain {
                        sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RUNTIME_API => {
                            runtime_launch[cbid as usize] = true
                        }
                        _ => driver_launch[cbid as usize] = true,
                    }
                }
            }
        }
    }
    if let Some(every) = every {
        let _ = MARKS.set(LaunchMarks {
            every,
            runtime: runtime_launch,
            driver: driver_launch,
        });
    }
    if enabled == 0 {
        crate::warn("CUPTI enabled no synchronising or launch call's callback; the bare run records nothing");
        return false;
    }
    true
}

/// CUPTI's callback for the enabled blocking calls: the end of a runtime
/// call, or of a driver call made outside one, becomes a line; and, with
/// launch marks, for the launch calls: counted at their entry.
///
/// # Safety
/// Called by CUPTI only: for the runtime and driver domains `data` points to
/// a CUpti_CallbackData valid for the call.
unsafe extern "C" fn on_call(
    _userdata: *mut c_void,
    domain: sys::CUpti_CallbackDomain,
    cbid: sys::CUpti_CallbackId,
    data: *const c_void,
) {
    let _ = catch_unwind(|| {
        use sys::CUpti_CallbackDomain as D;
        if data.is_null() {
            return;
        }
        // SAFETY: `data` is not null and, for these two domains, points to
        // the CUpti_CallbackData CUPTI passes for the callback's duration;
        // its first field is the 4-byte `callbackSite` (1 = exit).
        let exit = unsafe { *(data as *const u32) } == 1;
        let marks = MARKS.get();
        let is_launch = marks.is_some_and(|m| {
            let ids = match domain {
                D::CUPTI_CB_DOMAIN_RUNTIME_API => &m.runtime,
                _ => &m.driver,
            };
            ids.get(cbid as usize).copied().unwrap_or(false)
        });
        // A launch counts at its entry, outside any runtime call of ours.
        if is_launch && !exit {
            let outermost = RUNTIME_DEPTH.with(|d| d.get() == 0);
            if domain == D::CUPTI_CB_DOMAIN_RUNTIME_API {
                RUNTIME_DEPTH.with(|d| d.set(d.get() + 1));
            }
            if outermost {
                let n = LAUNCHES.fetch_add(1, Ordering::Relaxed);
                if let Some(m) = marks.filter(|m| n.is_multiple_of(m.every)) {
                    write_line(&launch_line(std::process::id(), m.every, n, now_ns()));
                }
            }
            return;
        }
        if is_launch {
            if domain == D::CUPTI_CB_DOMAIN_RUNTIME_API {
                RUNTIME_DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
            }
            return;
        }
        let record = match domain {
            D::CUPTI_CB_DOMAIN_RUNTIME_API => RUNTIME_DEPTH.with(|d| {
                if exit {
                    d.set(d.get().saturating_sub(1));
                } else {
                    d.set(d.get() + 1);
                }
                exit
            }),
            D::CUPTI_CB_DOMAIN_DRIVER_API => exit && RUNTIME_DEPTH.with(|d| d.get() == 0),
            _ => false,
        };
        if !record {
            return;
        }
        write_line(&sync_line(std::process::id(), now_ns()));
    });
}

fn write_line(line: &str) {
    if let Some(out) = OUT.get() {
        if let Ok(mut f) = out.lock() {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launch_mark_is_one_json_line() {
        let l = launch_line(7, 318, 636, 1_000_000_123);
        assert!(l.ends_with('\n') && l.matches('\n').count() == 1);
        let v = l.trim_end();
        assert_eq!(
            v,
            r#"{"t":"bare_launch","pid":7,"every":318,"n":636,"e":1000000123}"#
        );
    }

    #[test]
    fn launch_calls_are_kernel_and_graph_launches_only() {
        for name in [
            "cudaLaunchKernel_v7000",
            "cudaLaunchKernelExC_v11060",
            "cuLaunchKernel",
            "cuLaunchKernelEx",
            "cudaLaunchCooperativeKernel_v9000",
            "cudaGraphLaunch_v10000",
            "cuGraphLaunch",
        ] {
            assert!(counts_as_launch(name), "{name}");
            assert!(!blocks_host(name), "{name}");
        }
        for name in [
            "cudaLaunchHostFunc_v10000",
            "cudaMemcpyAsync_v3020",
            "cudaStreamSynchronize_v3020",
            "cuGraphInstantiate",
        ] {
            assert!(!counts_as_launch(name), "{name}");
        }
    }

    #[test]
    fn blocking_calls_are_syncs_and_copies_that_are_not_async() {
        for name in [
            "cudaDeviceSynchronize_v3020",
            "cudaStreamSynchronize_ptsz_v7000",
            "cudaEventSynchronize_v3020",
            "cuCtxSynchronize",
            "cuStreamSynchronize",
            "cudaMemcpy_v3020",
            "cuMemcpyDtoH_v2",
        ] {
            assert!(blocks_host(name), "{name}");
        }
        for name in [
            "cudaMemcpyAsync_v3020",
            "cuMemcpyDtoHAsync_v2",
            "cudaLaunchKernel_v7000",
            "cudaStreamQuery_v3020",
            "cudaGetDevice_v3020",
        ] {
            assert!(!blocks_host(name), "{name}");
        }
    }

    #[test]
    fn a_sync_line_is_a_bare_sync_record() {
        assert_eq!(
            sync_line(7, 1_000),
            "{\"t\":\"bare_sync\",\"pid\":7,\"e\":1000}\n"
        );
    }
}
