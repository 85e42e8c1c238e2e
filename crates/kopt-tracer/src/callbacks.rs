//! CUPTI's callbacks for CUDA API calls. A sampled trace (or
//! `KOPT_TRACER_APIS=callbacks`) takes the selected calls (`apis`) from
//! them (`on_api_call`), and the callback also detaches CUPTI at the first
//! API exit after a window closed (`detach`). A continuous trace has CUPTI
//! record the selected calls as activity records instead
//! (`apis::enable_selected_apis`).

use std::panic::catch_unwind;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use cudarc::cupti::sys;

use crate::apis::{api_name, selected_apis};
use crate::cupti::cupti_now;
use crate::detach::{detach_now, DETACH_PENDING, SAMPLING, SUBSCRIBER};
use crate::records;

/// A sampled window is open: the callback records the selected calls.
pub(crate) static RECORD_API_CALLS: AtomicBool = AtomicBool::new(false);
/// Counts the windows: an entry left by a call that a window's close cut
/// short is not matched with a later call's exit.
static WINDOW_GEN: AtomicU64 = AtomicU64::new(0);

/// An API call a thread is inside.
struct Entered {
    domain: u32,
    cbid: u32,
    start: u64,
    window: u64,
    /// A driver call made by a runtime call: the runtime call is the record
    /// (as in CUPTI's activity records).
    nested: bool,
}
/// API lines the callbacks wrote in the open window (or, for a whole run
/// with `KOPT_TRACER_APIS=callbacks`, since the last hand-over).
static API_LINES: Mutex<String> = Mutex::new(String::new());
/// A whole run hands its API lines to the writer once they reach this size.
const API_LINES_FLUSH_BYTES: usize = 1 << 20;

thread_local! {
    /// Entry times of the API calls this thread is inside (a runtime call
    /// makes driver calls).
    static ENTERED: std::cell::RefCell<Vec<Entered>> = const { std::cell::RefCell::new(Vec::new()) };
}

pub(crate) fn take_api_lines() -> String {
    std::mem::take(&mut *API_LINES.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Subscribe to CUPTI's callbacks for the selected API calls. The
/// subscription is CUPTI's again after it detaches, so every attachment
/// makes its own.
///
/// # Safety
/// libcupti is loaded; called while setting CUPTI up (`attach`), when no
/// subscriber of this attachment exists yet.
pub(crate) unsafe fn subscribe_api_callbacks() -> bool {
    let mut handle: sys::CUpti_SubscriberHandle = std::ptr::null_mut();
    // SAFETY: `handle` is a local out-pointer; `on_api_call` has the
    // signature of CUpti_CallbackFunc, is a plain function (lives for the
    // process) and ignores its user data, passed null here.
    if unsafe { sys::cuptiSubscribe(&mut handle, Some(on_api_call), std::ptr::null_mut()) }
        != sys::CUptiResult::CUPTI_SUCCESS
    {
        return false;
    }
    SUBSCRIBER.store(handle.cast(), Ordering::SeqCst);
    WINDOW_GEN.fetch_add(1, Ordering::SeqCst);
    for &(domain, cbid) in selected_apis() {
        // SAFETY: `handle` was returned by cuptiSubscribe just above (this
        // attachment's, not yet finalized); domain and id are CUPTI's own.
        unsafe { sys::cuptiEnableCallback(1, handle, domain, cbid) };
    }
    RECORD_API_CALLS.store(true, Ordering::SeqCst);
    true
}

/// CUPTI's callback for runtime and driver API calls: in a sampled window,
/// a selected call becomes an `api` line; once the window closed, the first
/// call's exit detaches CUPTI from the process (where NVIDIA's sample does).
///
/// # Safety
/// Called by CUPTI only: for the runtime and driver domains `data` points to
/// a CUpti_CallbackData valid for the call.
pub(crate) unsafe extern "C" fn on_api_call(
    _userdata: *mut std::ffi::c_void,
    domain: sys::CUpti_CallbackDomain,
    cbid: sys::CUpti_CallbackId,
    data: *const std::ffi::c_void,
) {
    let _ = catch_unwind(|| {
        use sys::CUpti_CallbackDomain as D;
        if !(domain == D::CUPTI_CB_DOMAIN_RUNTIME_API || domain == D::CUPTI_CB_DOMAIN_DRIVER_API)
            || data.is_null()
        {
            return;
        }
        // callbackSite is the first field of CUpti_CallbackData; 1 = exit.
        // SAFETY: `data` is not null and, for these two domains, points to
        // the CUpti_CallbackData CUPTI passes for the callback's duration;
        // its first field is the 4-byte `callbackSite`, read as an integer.
        let exit = unsafe { *(data as *const u32) } == 1;
        if DETACH_PENDING.load(Ordering::SeqCst) {
            if exit {
                detach_now();
            }
            return;
        }
        if !RECORD_API_CALLS.load(Ordering::Relaxed) {
            return;
        }
        let now = cupti_now();
        let window = WINDOW_GEN.load(Ordering::Relaxed);
        if !exit {
            ENTERED.with(|e| {
                let mut e = e.borrow_mut();
                let nested = domain == D::CUPTI_CB_DOMAIN_DRIVER_API
                    && e.iter().any(|x| {
                        x.window == window && x.domain == D::CUPTI_CB_DOMAIN_RUNTIME_API as u32
                    });
                e.push(Entered {
                    domain: domain as u32,
                    cbid,
                    start: now,
                    window,
                    nested,
                });
            });
            return;
        }
        // The matching entry; entries left by calls a window's close cut go.
        let entry = ENTERED.with(|e| {
            let mut e = e.borrow_mut();
            while let Some(x) = e.pop() {
                if (x.domain, x.cbid) == (domain as u32, cbid) {
                    return Some(x);
                }
            }
            None
        });
        let Some(Entered {
            start,
            window: entered_in,
            nested: false,
            ..
        }) = entry
        else {
            return;
        };
        if entered_in != window {
            return;
        }
        // SAFETY: as above: `data` is this callback's CUpti_CallbackData,
        // valid until the callback returns.
        let correlation = unsafe { (*(data as *const sys::CUpti_CallbackData)).correlationId };
        // SAFETY: gettid takes no arguments and touches no memory.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) };
        let line = records::api_line(&api_name(domain, cbid), start, now, tid as i64, correlation);
        let mut lines = API_LINES.lock().unwrap_or_else(|e| e.into_inner());
        lines.push_str(&line);
        // A whole run's calls go to the writer in pieces, not all at exit.
        if lines.len() >= API_LINES_FLUSH_BYTES && !SAMPLING.load(Ordering::Relaxed) {
            let full = std::mem::take(&mut *lines);
            drop(lines);
            crate::buffers::queue_line(full);
        }
    });
}
