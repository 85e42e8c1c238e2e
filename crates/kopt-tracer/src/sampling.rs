//! Attaching CUPTI (`attach`: the activity kinds, callbacks and options the
//! switches ask for) and sampled tracing: windows of recording, each closed
//! by detaching CUPTI (`close_window`, then `detach::detach_now`).
//!
//! Sampled tracing. CUPTI's kernel records cost the application's launch
//! path about 0.8 us per launch on an H200 (a quarter of a bare launch), and
//! the cost stays after the activity kinds are disabled; it goes only when
//! CUPTI detaches (`cuptiFinalize`; `scripts/bench/cupti_floor`). So a sampled trace attaches for ON ms of every PERIOD,
//! then detaches, and writes each window's bounds after its records:
//! `{"t":"window","s":START,"e":END}` (CUPTI's clock).

use std::panic::catch_unwind;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use cudarc::cupti::sys;

use crate::apis::enable_selected_apis;
use crate::buffers::{buffer_completed, buffer_requested, queue_line};
use crate::callbacks::{on_api_call, subscribe_api_callbacks, take_api_lines, RECORD_API_CALLS};
use crate::config::{self, ApiMode};
use crate::cupti::{cupti_now, set_attribute};
use crate::detach::{
    sampler_state, subscriber, DETACH_PENDING, SAMPLER, SAMPLING, STOPPED, SUBSCRIBER,
};
use crate::records::window_line;
use crate::warn;

/// The activity kinds `attach` enabled: `close_window` disables the same.
static ENABLED: Mutex<Vec<sys::CUpti_ActivityKind>> = Mutex::new(Vec::new());

/// Set CUPTI up to record (again, after a sampled detach, when `first` is
/// false: CUPTI forgets everything when it detaches). Returns when recording
/// began (CUPTI's clock), None when CUPTI refuses the callbacks; warnings
/// only the first time.
///
/// # Safety
/// libcupti is loaded (`init` checked), and no other thread attaches or
/// detaches CUPTI meanwhile: `init` calls it before the sampler thread
/// exists, the sampler thread under the sampler's lock once the previous
/// detach is done.
pub(crate) unsafe fn attach(first: bool) -> Option<u64> {
    let warn = |msg: &str| {
        if first {
            warn(msg)
        }
    };
    if config::hw_trace() {
        // Hardware-event-based timestamps (lower launch overhead where the GPU
        // supports it); asked for before anything else is set up.
        // SAFETY: a plain value (1: on); libcupti is loaded (caller).
        let r = unsafe { sys::cuptiActivityEnableHWTrace(1) };
        if r != sys::CUptiResult::CUPTI_SUCCESS {
            warn(&format!(
                "hardware tracing unavailable on this GPU or driver ({r:?}); using CUPTI's default"
            ));
        }
    }
    // SAFETY: both callbacks have the signatures CUPTI's registration
    // expects (the bindings' types), are plain functions of this library
    // (never unloaded), and keep the buffer ownership rules of `buffers`.
    let r = unsafe {
        sys::cuptiActivityRegisterCallbacks(Some(buffer_requested), Some(buffer_completed))
    };
    if r != sys::CUptiResult::CUPTI_SUCCESS {
        warn(&format!("cuptiActivityRegisterCallbacks failed ({r:?}); is another profiler (torch.profiler, nsys) attached? tracing is off"));
        return None;
    }
    if let Some(n) = config::prealloc() {
        // Device buffers and timestamp-semaphore pools allocated up front,
        // so none is allocated between two launches.
        use sys::CUpti_ActivityAttribute as A;
        for attr in [
            A::CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE,
            A::CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_PRE_ALLOCATE_VALUE,
        ] {
            // SAFETY: both attributes take a size_t, and `n` is a usize.
            let r = unsafe { set_attribute(attr, n) };
            if r != sys::CUptiResult::CUPTI_SUCCESS {
                warn(&format!("{attr:?} not set ({r:?})"));
            }
        }
    }
    if config::per_thread_buffers() {
        // One activity buffer per host thread: launches from different
        // threads stop contending for CUPTI's shared buffer.
        // SAFETY: the attribute takes a uint8_t, and the value is a u8.
        let r = unsafe {
            set_attribute(
                sys::CUpti_ActivityAttribute::CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER,
                1u8,
            )
        };
        if r != sys::CUptiResult::CUPTI_SUCCESS {
            warn(&format!("per-thread activity buffers unavailable ({r:?})"));
        }
    }
    let mut kinds = vec![
        sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
        sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY,
        sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET,
        // NVTX ranges; CUPTI sees them when NVTX_INJECTION64_PATH names
        // libcupti (kopt trace sets it).
        sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MARKER,
        // The GPU's name and SM count: the report's peaks come from them.
        sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_DEVICE,
    ];
    match ApiMode::from_env() {
        // Selected API activity records do not come back after CUPTI
        // detached and attached again (seen on an H200, CUDA 13.0), and
        // recording every call slows a PyTorch step by half: a sampled
        // trace takes the selected calls from CUPTI's callbacks instead.
        ApiMode::Select if SAMPLING.load(Ordering::SeqCst) => {
            // SAFETY: libcupti is loaded and this attachment has no
            // subscriber yet (CUPTI dropped the last one when it detached).
            if !unsafe { subscribe_api_callbacks() } {
                warn("CUPTI callbacks unavailable: the sampled windows have no launch calls");
            }
        }
        ApiMode::Callbacks => {
            // SAFETY: as above; a whole-run trace subscribes once.
            if !unsafe { subscribe_api_callbacks() } {
                warn("CUPTI callbacks unavailable: no launch calls are recorded");
            }
        }
        ApiMode::All => {
            crate::buffers::COUNT_API_CALLS.store(true, Ordering::SeqCst);
            kinds.push(sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_RUNTIME);
            kinds.push(sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_DRIVER);
        }
        ApiMode::Select => {
            // SAFETY: libcupti is loaded; CUPTI is being set up (caller).
            if !unsafe { enable_selected_apis() } {
                warn("this CUPTI cannot select single API calls; recording all of them");
                kinds.push(sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_RUNTIME);
                kinds.push(sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_DRIVER);
            }
        }
        ApiMode::Off => {}
    }
    for kind in &kinds {
        // SAFETY: a plain enum value; the buffer callbacks it needs were
        // registered above.
        let r = unsafe { sys::cuptiActivityEnable(*kind) };
        if r != sys::CUptiResult::CUPTI_SUCCESS {
            warn(&format!("cuptiActivityEnable({kind:?}) failed ({r:?}); another CUPTI client is probably active (only one works at a time)"));
        }
    }

    *ENABLED.lock().unwrap_or_else(|e| e.into_inner()) = kinds;
    // The window opens once recording is on: setting CUPTI up takes
    // milliseconds that are kopt's, not the program's. (A record stamped
    // while the last kind was being enabled widens the window when read.)
    Some(cupti_now())
}

static SAMPLER_THREAD: Mutex<Option<std::thread::JoinHandle<()>>> = Mutex::new(None);
/// Records CUPTI dropped, summed over the windows (it forgets on detach).
pub(crate) static DROPPED: AtomicU64 = AtomicU64::new(0);

pub(crate) fn start_sampler(window_start: u64, on_ms: u64, period_ms: u64) {
    {
        let mut st = sampler_state();
        st.recording = true;
        st.window_start = window_start;
    }
    let on = std::time::Duration::from_millis(on_ms);
    let off = std::time::Duration::from_millis(period_ms - on_ms);
    let spawned = std::thread::Builder::new()
        .name("kopt-tracer-sampler".into())
        .spawn(move || {
            let _ = catch_unwind(|| sampler_loop(on, off));
        });
    match spawned {
        Ok(h) => *SAMPLER_THREAD.lock().unwrap_or_else(|e| e.into_inner()) = Some(h),
        Err(_) => warn("cannot start the sampling thread; tracing the whole run"),
    }
}

/// Tell the sampler thread the process exits, and wait for it.
pub(crate) fn stop_sampler() {
    sampler_state().exiting = true;
    SAMPLER.wake.notify_all();
    crate::join(&SAMPLER_THREAD);
}

/// Sleep, unless the exit handler wakes us first (then true).
fn exiting_after(d: std::time::Duration) -> bool {
    let st = sampler_state();
    let (st, _) = SAMPLER
        .wake
        .wait_timeout_while(st, d, |st| !st.exiting)
        .unwrap_or_else(|e| e.into_inner());
    st.exiting
}

fn sampler_loop(on: std::time::Duration, off: std::time::Duration) {
    loop {
        if exiting_after(on) || !close_window() || exiting_after(off) {
            return;
        }
        let mut st = sampler_state();
        if st.exiting {
            return;
        }
        // SAFETY: libcupti is loaded (tracing started); the previous detach
        // finished (`close_window` returned true once DETACH_PENDING was
        // cleared) and the sampler's lock, held here, keeps the exit handler
        // and `detach_now` out until this attachment is recorded.
        let Some(start) = (unsafe { attach(false) }) else {
            warn("CUPTI refused to attach again; the trace ends at the last window");
            return;
        };
        st.recording = true;
        st.window_start = start;
    }
}

/// How recording ends: at the exit handler, at a sampled window's close
/// (its start given), or on the program's request (`stop_whole_run`).
#[derive(Clone, Copy)]
pub(crate) enum Ending {
    Exit,
    Window(u64),
    Stop,
}

/// Stop recording and hand every record to the drain thread, counting what
/// CUPTI dropped. Before a detach (a window's close, a stop) the kinds are
/// disabled first; a window's API lines and bounds follow its records.
pub(crate) fn end_recording(ending: Ending) {
    let end = cupti_now();
    RECORD_API_CALLS.store(false, Ordering::SeqCst);
    if !matches!(ending, Ending::Exit) {
        for kind in ENABLED.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            // SAFETY: a plain enum value, one `attach` enabled.
            unsafe { sys::cuptiActivityDisable(*kind) };
        }
    }
    // SAFETY: a plain flag (1: CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); CUPTI
    // hands the buffers back through `buffer_completed`, which takes no
    // lock this thread holds but the drain queue's, briefly.
    unsafe { sys::cuptiActivityFlushAll(1) };
    let mut dropped = 0usize;
    // SAFETY: a null context (CUPTI's global queue) and stream 0 are plain
    // values; `dropped` is a local out-pointer CUPTI writes one size_t to.
    unsafe { sys::cuptiActivityGetNumDroppedRecords(std::ptr::null_mut(), 0, &mut dropped) };
    DROPPED.fetch_add(dropped as u64, Ordering::SeqCst);
    if let Ending::Window(start) = ending {
        queue_line(take_api_lines());
        queue_line(window_line(start, end));
    } else {
        // A whole run with KOPT_TRACER_APIS=callbacks: the calls left.
        let lines = take_api_lines();
        if !lines.is_empty() {
            queue_line(lines);
        }
    }
}

/// End a whole-run trace on the program's request (`kopt_tracer_stop`):
/// stop recording, hand every record to the drain thread and have CUPTI
/// detach at the exit of the program's next CUDA call, so what the program
/// runs afterwards runs as if untraced (kopt's module driver times its bare
/// steps there, in the traced process). Returns without waiting for the
/// detach: the caller is the thread whose next call performs it. False for
/// a sampled trace (its windows detach on their own), after the exit
/// handler began, after an earlier stop, or when CUPTI cannot be asked to
/// detach (the trace still ends here, but CUPTI stays attached).
pub(crate) fn stop_whole_run() -> bool {
    if SAMPLING.load(Ordering::SeqCst) || STOPPED.load(Ordering::SeqCst) {
        return false;
    }
    let st = sampler_state();
    if st.exiting || STOPPED.swap(true, Ordering::SeqCst) {
        return false;
    }
    end_recording(Ending::Stop);
    DETACH_PENDING.store(true, Ordering::SeqCst);
    // The callback takes the lock from inside CUPTI's dispatch.
    drop(st);
    if subscribe_for_detach() {
        return true;
    }
    // The records so far are kept; CUPTI stays attached (and costs its
    // launch tax), so the caller must not time untraced steps.
    DETACH_PENDING.store(false, Ordering::SeqCst);
    warn("cannot subscribe to CUDA API callbacks to detach CUPTI; the trace ends here, CUPTI stays attached");
    false
}

/// Make sure this attachment has a callback subscriber with every runtime
/// and driver call enabled, so the first API exit after `DETACH_PENDING`
/// runs `detach_now`. False when CUPTI refuses the subscription.
fn subscribe_for_detach() -> bool {
    let mut subscriber = subscriber();
    if subscriber.is_null() {
        // No API calls recorded through callbacks (KOPT_TRACER_APIS=off|all,
        // or a whole run's activity records): subscribe now, for the detach.
        // SAFETY: `subscriber` is a local out-pointer; `on_api_call` has
        // CUpti_CallbackFunc's signature, lives for the process and ignores
        // its user data (null).
        let r = unsafe {
            sys::cuptiSubscribe(&mut subscriber, Some(on_api_call), std::ptr::null_mut())
        };
        if r != sys::CUptiResult::CUPTI_SUCCESS {
            return false;
        }
        SUBSCRIBER.store(subscriber.cast(), Ordering::SeqCst);
    }
    for domain in [
        sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API,
        sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RUNTIME_API,
    ] {
        // SAFETY: `subscriber` is this attachment's handle, from
        // cuptiSubscribe (here or in `subscribe_api_callbacks`).
        // Caveat, kept as it was: when selected calls were already
        // subscribed, an API exit may run `detach_now` (cuptiFinalize)
        // between the load above and this call, and the handle is then
        // one CUPTI has let go; what CUPTI does with it is not
        // documented (the result is ignored).
        unsafe { sys::cuptiEnableDomain(1, subscriber, domain) };
    }
    true
}

/// End the open window: stop recording, hand every record to the drain
/// thread, write the window's bounds, and have CUPTI detach at the exit of
/// the application's next CUDA call (where NVIDIA's sample calls
/// `cuptiFinalize`). False when the run ends first or CUPTI cannot detach.
fn close_window() -> bool {
    let mut st = sampler_state();
    if st.exiting {
        return false;
    }
    end_recording(Ending::Window(st.window_start));
    st.recording = false;
    DETACH_PENDING.store(true, Ordering::SeqCst);
    // Our lock is released before CUPTI is called: the callback takes it
    // from inside CUPTI's dispatch.
    drop(st);
    let subscribed = subscribe_for_detach();
    let mut st = sampler_state();
    if !subscribed {
        warn("cannot subscribe to CUDA API callbacks to detach CUPTI; tracing the rest of the run");
        DETACH_PENDING.store(false, Ordering::SeqCst);
        // SAFETY: libcupti is loaded; CUPTI never detached (no subscriber,
        // so no `detach_now`), and the sampler's lock is held.
        if let Some(start) = unsafe { attach(false) } {
            st.recording = true;
            st.window_start = start;
        }
        return false;
    }
    // Wait for the application's next CUDA call (or the exit).
    while DETACH_PENDING.load(Ordering::SeqCst) && !st.exiting {
        st = SAMPLER
            .wake
            .wait_timeout(st, std::time::Duration::from_millis(50))
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
    !st.exiting
}
