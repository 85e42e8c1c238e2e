//! kopt's CUPTI injection library. Loaded into any CUDA program through
//! `CUDA_INJECTION64_PATH` (PyTorch, Triton, CuPy, CUDA C++ alike), it records
//! kernels, memcpy/memset and the CUDA API calls that launch, copy or
//! synchronise and NVTX ranges, with CUPTI's activity API, and writes one JSON object per
//! record to `$KOPT_TRACE_OUT`.
//!
//! It must never take the host process down: every entry point runs inside
//! `catch_unwind`, failures are reported once on stderr and tracing stops.
//! `KOPT_TRACER_SAMPLE=ON_MS/PERIOD_MS` traces windows of a run instead of
//! all of it (see `Sampler`).
//! Bindings: cudarc's `cupti` module with dynamic loading (libcupti is opened
//! at run time, so kopt builds without CUDA).

use std::collections::HashMap;
use std::ffi::CStr;
use std::io::{BufWriter, Write};
use std::panic::catch_unwind;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use cudarc::cupti::sys;

/// Activity buffers handed to CUPTI: 8 MiB unless `KOPT_TRACER_BUFFER_MB` says.
static BUFFER_BYTES: AtomicUsize = AtomicUsize::new(8 << 20);
const ALIGN: usize = 8;

fn buffer_layout() -> std::alloc::Layout {
    std::alloc::Layout::from_size_align(BUFFER_BYTES.load(Ordering::Relaxed), ALIGN)
        .expect("valid layout")
}

/// What waits for the drain thread, in trace order: a buffer CUPTI handed
/// back, or a line of kopt's own (a sampled window's bounds, written after
/// the window's last buffer).
enum Queued {
    Buffer { ptr: *mut u8, valid: usize },
    Line(String),
}
// SAFETY: CUPTI gives a buffer up when it completes it; from then on only
// the drain thread touches it.
unsafe impl Send for Queued {}

/// Completed buffers are turned into JSON lines on kopt's own thread, so
/// CUPTI's thread (or the application's, when CUPTI completes a buffer
/// there) only queues them. `KOPT_TRACER_SYNC_DRAIN=1` drains in place.
struct Drainer {
    queue: Mutex<DrainQueue>,
    ready: std::sync::Condvar,
}

struct DrainQueue {
    filled: Vec<Queued>,
    /// True while the drain thread runs and takes buffers; otherwise they
    /// are drained where CUPTI hands them back.
    accepting: bool,
}

static DRAINER: Drainer = Drainer {
    queue: Mutex::new(DrainQueue {
        filled: Vec::new(),
        accepting: false,
    }),
    ready: std::sync::Condvar::new(),
};
static DRAIN_THREAD: Mutex<Option<std::thread::JoinHandle<()>>> = Mutex::new(None);

fn drain_queue() -> std::sync::MutexGuard<'static, DrainQueue> {
    DRAINER.queue.lock().unwrap_or_else(|e| e.into_inner())
}

fn start_drain_thread() -> bool {
    drain_queue().accepting = true;
    let spawned = std::thread::Builder::new()
        .name("kopt-tracer-drain".into())
        .spawn(|| loop {
            let batch = {
                let mut q = drain_queue();
                while q.filled.is_empty() && q.accepting {
                    q = DRAINER.ready.wait(q).unwrap_or_else(|e| e.into_inner());
                }
                if q.filled.is_empty() {
                    return;
                }
                std::mem::take(&mut q.filled)
            };
            for item in batch {
                match item {
                    Queued::Buffer { ptr, valid } => {
                        let _ = catch_unwind(|| unsafe { drain(ptr, valid) });
                        unsafe { std::alloc::dealloc(ptr, buffer_layout()) };
                    }
                    Queued::Line(line) => write_out(&line),
                }
            }
        });
    match spawned {
        Ok(h) => {
            *DRAIN_THREAD.lock().unwrap_or_else(|e| e.into_inner()) = Some(h);
            true
        }
        Err(_) => {
            drain_queue().accepting = false;
            false
        }
    }
}

/// Stop the drain thread once the queue is empty, and wait for it.
fn finish_drain_thread() {
    drain_queue().accepting = false;
    DRAINER.ready.notify_all();
    join(&DRAIN_THREAD);
}

/// Wait for one of kopt's threads, if it was started.
fn join(slot: &Mutex<Option<std::thread::JoinHandle<()>>>) {
    let handle = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(h) = handle {
        let _ = h.join();
    }
}

static OUT: Mutex<Option<BufWriter<std::fs::File>>> = Mutex::new(None);
static NAMES: Mutex<Option<HashMap<(u32, u32), String>>> = Mutex::new(None);
static ACTIVE: AtomicBool = AtomicBool::new(false);
static RECORDS: AtomicU64 = AtomicU64::new(0);
/// Buffers handed to CUPTI and handed back: after the final flush a
/// difference means another CUPTI client (torch.profiler, nsys) took the
/// activity callbacks over and received kopt's records.
static BUFFERS_OUT: AtomicU64 = AtomicU64::new(0);
static BUFFERS_BACK: AtomicU64 = AtomicU64::new(0);
/// The process that set tracing up. A child forked from it (a DataLoader
/// worker, say) inherits the exit handler but not CUPTI or the drain thread:
/// there the handler does nothing, and the parent's trace stays whole.
static TRACED_PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// An opt-in switch: the variable is set to 1.
fn env_flag(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| v == "1")
}

/// A C string from CUPTI as text, None for a null pointer.
///
/// # Safety
/// `p` is null or points to a NUL-terminated string.
unsafe fn c_text(p: *const std::ffi::c_char) -> Option<String> {
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// Set one CUPTI activity attribute; the value's size is its type's.
unsafe fn set_attribute<T>(attr: sys::CUpti_ActivityAttribute, mut value: T) -> sys::CUptiResult {
    let mut size = std::mem::size_of::<T>();
    unsafe { sys::cuptiActivitySetAttribute(attr, &mut size, (&mut value as *mut T).cast()) }
}

fn warn(msg: &str) {
    eprintln!("kopt-tracer: {msg}");
}

/// Escape a string for a JSON value.
fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The trace file of this process: `path` for the first CUDA process of the
/// workload, `path.<pid>` for every other one (child processes, torchrun
/// ranks, compile workers): none truncates another's trace.
fn open_trace_file(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    let create = |p: &std::path::Path| {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(p)
    };
    match create(path) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let mut own = path.as_os_str().to_owned();
            own.push(format!(".{}", std::process::id()));
            create(std::path::Path::new(&own))
        }
        other => other,
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
    let Some(path) = std::env::var_os("KOPT_TRACE_OUT") else {
        warn("KOPT_TRACE_OUT is not set; tracing is off");
        return;
    };
    if !unsafe { sys::is_culib_present() } {
        warn("libcupti not found: add CUDA's lib64 (or extras/CUPTI/lib64) to LD_LIBRARY_PATH; tracing is off");
        return;
    }
    match open_trace_file(std::path::Path::new(&path)) {
        Ok(f) => {
            let mut w = BufWriter::with_capacity(1 << 20, f);
            let _ = writeln!(w, "{{\"t\":\"process\",\"pid\":{}}}", std::process::id());
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
    if let Some(mb) = std::env::var("KOPT_TRACER_BUFFER_MB")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|mb| (1..=1024).contains(mb))
    {
        BUFFER_BYTES.store(mb << 20, Ordering::Relaxed);
    }
    if !env_flag("KOPT_TRACER_SYNC_DRAIN") && !start_drain_thread() {
        warn("cannot start the drain thread; draining in CUPTI's thread");
    }
    let sample = std::env::var("KOPT_TRACER_SAMPLE").ok().and_then(|v| {
        let parsed = parse_sample(&v);
        if parsed.is_none() {
            warn(&format!("KOPT_TRACER_SAMPLE={v} is not ON_MS/PERIOD_MS with 0 < ON < PERIOD; tracing the whole run"));
        }
        parsed
    });
    SAMPLING.store(sample.is_some(), Ordering::SeqCst);
    let Some(start) = (unsafe { attach(true) }) else {
        return;
    };
    TRACED_PID.store(std::process::id(), Ordering::SeqCst);
    unsafe { libc::atexit(at_exit) };
    if let Some((on_ms, period_ms)) = sample {
        start_sampler(start, on_ms, period_ms);
    }
}

/// The activity kinds `attach` enabled: `close_window` disables the same.
static ENABLED: Mutex<Vec<sys::CUpti_ActivityKind>> = Mutex::new(Vec::new());

/// Set CUPTI up to record (again, after a sampled detach, when `first` is
/// false: CUPTI forgets everything when it detaches). Returns when recording
/// began (CUPTI's clock), None when CUPTI refuses the callbacks; warnings
/// only the first time.
unsafe fn attach(first: bool) -> Option<u64> {
    let warn = |msg: &str| {
        if first {
            warn(msg)
        }
    };
    unsafe {
        if env_flag("KOPT_TRACER_HW_TRACE") {
            // Hardware-event-based timestamps (lower launch overhead where the GPU
            // supports it); asked for before anything else is set up.
            let r = sys::cuptiActivityEnableHWTrace(1);
            if r != sys::CUptiResult::CUPTI_SUCCESS {
                warn(&format!("hardware tracing unavailable on this GPU or driver ({r:?}); using CUPTI's default"));
            }
        }
        let r = sys::cuptiActivityRegisterCallbacks(Some(buffer_requested), Some(buffer_completed));
        if r != sys::CUptiResult::CUPTI_SUCCESS {
            warn(&format!("cuptiActivityRegisterCallbacks failed ({r:?}); is another profiler (torch.profiler, nsys) attached? tracing is off"));
            return None;
        }
        if let Some(n) = std::env::var("KOPT_TRACER_PREALLOC")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
        {
            // Device buffers and timestamp-semaphore pools allocated up front,
            // so none is allocated between two launches.
            use sys::CUpti_ActivityAttribute as A;
            for attr in [
                A::CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE,
                A::CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_PRE_ALLOCATE_VALUE,
            ] {
                let r = set_attribute(attr, n);
                if r != sys::CUptiResult::CUPTI_SUCCESS {
                    warn(&format!("{attr:?} not set ({r:?})"));
                }
            }
        }
        if env_flag("KOPT_TRACER_PER_THREAD_BUFFERS") {
            // One activity buffer per host thread: launches from different
            // threads stop contending for CUPTI's shared buffer.
            let r = set_attribute(
                sys::CUpti_ActivityAttribute::CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER,
                1u8,
            );
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
                if !subscribe_api_callbacks() {
                    warn("CUPTI callbacks unavailable: the sampled windows have no launch calls");
                }
            }
            ApiMode::All => {
                kinds.push(sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_RUNTIME);
                kinds.push(sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_DRIVER);
            }
            ApiMode::Select => {
                if !enable_selected_apis() {
                    warn("this CUPTI cannot select single API calls; recording all of them");
                    kinds.push(sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_RUNTIME);
                    kinds.push(sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_DRIVER);
                }
            }
            ApiMode::Off => {}
        }
        for kind in &kinds {
            let r = sys::cuptiActivityEnable(*kind);
            if r != sys::CUptiResult::CUPTI_SUCCESS {
                warn(&format!("cuptiActivityEnable({kind:?}) failed ({r:?}); another CUPTI client is probably active (only one works at a time)"));
            }
        }

        *ENABLED.lock().unwrap_or_else(|e| e.into_inner()) = kinds;
    }
    // The window opens once recording is on: setting CUPTI up takes
    // milliseconds that are kopt's, not the program's. (A record stamped
    // while the last kind was being enabled widens the window when read.)
    Some(cupti_now())
}

/// Which host API calls are recorded (`KOPT_TRACER_APIS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ApiMode {
    /// Only the calls kopt reads: launches, graph launches, syncs, copies (default).
    Select,
    /// Every runtime and driver call (filtered when written).
    All,
    /// None: kernels and copies only, the lowest overhead.
    Off,
}

impl ApiMode {
    fn parse(v: Option<&str>) -> ApiMode {
        match v {
            Some("all") => ApiMode::All,
            Some("off") | Some("none") => ApiMode::Off,
            _ => ApiMode::Select,
        }
    }

    fn from_env() -> ApiMode {
        ApiMode::parse(std::env::var("KOPT_TRACER_APIS").ok().as_deref())
    }
}

/// Enable activity records for the selected runtime and driver APIs only.
/// False when this CUPTI cannot select APIs (then whole kinds are enabled).
unsafe fn enable_selected_apis() -> bool {
    use sys::CUpti_CallbackDomain as D;
    for &(domain, cbid) in selected_apis() {
        let enable = if domain == D::CUPTI_CB_DOMAIN_RUNTIME_API {
            sys::cuptiActivityEnableRuntimeApi
        } else {
            sys::cuptiActivityEnableDriverApi
        };
        if unsafe { enable(cbid, 1) } != sys::CUptiResult::CUPTI_SUCCESS {
            return false;
        }
    }
    !selected_apis().is_empty()
}

/// The runtime and driver calls kopt keeps, looked up once (3,000 name
/// queries): a sampled trace subscribes to them again at every window.
fn selected_apis() -> &'static [(sys::CUpti_CallbackDomain, u32)] {
    static SELECTED: std::sync::OnceLock<Vec<(sys::CUpti_CallbackDomain, u32)>> =
        std::sync::OnceLock::new();
    SELECTED.get_or_init(|| {
        let mut ids = Vec::new();
        for domain in [
            sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RUNTIME_API,
            sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API,
        ] {
            // Callback ids are small dense integers; names that do not resolve are skipped.
            for cbid in 1..1500u32 {
                if callback_name(domain, cbid).is_some_and(|name| keep_api(&name)) {
                    ids.push((domain, cbid));
                }
            }
        }
        ids
    })
}

/// `KOPT_TRACER_SAMPLE=ON_MS/PERIOD_MS`: trace ON_MS of every PERIOD_MS.
fn parse_sample(v: &str) -> Option<(u64, u64)> {
    let (on, period) = v.split_once('/')?;
    let (on, period) = (
        on.trim().parse::<u64>().ok()?,
        period.trim().parse::<u64>().ok()?,
    );
    (on > 0 && on < period).then_some((on, period))
}

/// Sampled tracing. CUPTI's kernel records cost the application's launch
/// path about 0.8 us per launch on an H200 (a quarter of a bare launch), and
/// the cost stays after the activity kinds are disabled; it goes only when
/// CUPTI detaches (`cuptiFinalize`; `scripts/bench/cupti_floor`). So a sampled trace attaches for ON ms of every PERIOD,
/// then detaches, and writes each window's bounds after its records:
/// `{"t":"window","s":START,"e":END}` (CUPTI's clock).
struct Sampler {
    state: Mutex<SamplerState>,
    wake: std::sync::Condvar,
}

struct SamplerState {
    /// The exit handler runs: stop at once.
    exiting: bool,
    /// CUPTI records now (a window is open since `window_start`).
    recording: bool,
    window_start: u64,
}

static SAMPLER: Sampler = Sampler {
    state: Mutex::new(SamplerState {
        exiting: false,
        recording: false,
        window_start: 0,
    }),
    wake: std::sync::Condvar::new(),
};
static SAMPLING: AtomicBool = AtomicBool::new(false);
static SAMPLER_THREAD: Mutex<Option<std::thread::JoinHandle<()>>> = Mutex::new(None);
/// Records CUPTI dropped, summed over the windows (it forgets on detach).
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Buffers CUPTI still held, empty, when it detached: not lost to another client.
static BUFFERS_LEFT_AT_DETACH: AtomicU64 = AtomicU64::new(0);

fn sampler_state() -> std::sync::MutexGuard<'static, SamplerState> {
    SAMPLER.state.lock().unwrap_or_else(|e| e.into_inner())
}

fn cupti_now() -> u64 {
    let mut t = 0u64;
    unsafe { sys::cuptiGetTimestamp(&mut t) };
    t
}

fn window_line(start: u64, end: u64) -> String {
    format!("{{\"t\":\"window\",\"s\":{start},\"e\":{end}}}\n")
}

fn start_sampler(window_start: u64, on_ms: u64, period_ms: u64) {
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
        let Some(start) = (unsafe { attach(false) }) else {
            warn("CUPTI refused to attach again; the trace ends at the last window");
            return;
        };
        st.recording = true;
        st.window_start = start;
    }
}

/// Stop recording and hand every record to the drain thread, counting what
/// CUPTI dropped. For a sampled window (its start given), the kinds are
/// disabled first and the window's API lines and bounds follow its records.
fn end_recording(window_start: Option<u64>) {
    let end = cupti_now();
    RECORD_API_CALLS.store(false, Ordering::SeqCst);
    unsafe {
        if window_start.is_some() {
            for kind in ENABLED.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                sys::cuptiActivityDisable(*kind);
            }
        }
        sys::cuptiActivityFlushAll(1);
        let mut dropped = 0usize;
        sys::cuptiActivityGetNumDroppedRecords(std::ptr::null_mut(), 0, &mut dropped);
        DROPPED.fetch_add(dropped as u64, Ordering::SeqCst);
    }
    if let Some(start) = window_start {
        queue_line(take_api_lines());
        queue_line(window_line(start, end));
    }
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
    end_recording(Some(st.window_start));
    st.recording = false;
    DETACH_PENDING.store(true, Ordering::SeqCst);
    // Our lock is released before CUPTI is called: the callback takes it
    // from inside CUPTI's dispatch.
    drop(st);
    let mut subscriber = subscriber();
    if subscriber.is_null() {
        // No API calls recorded (KOPT_TRACER_APIS=off|all): subscribe now, for the detach.
        let r = unsafe {
            sys::cuptiSubscribe(&mut subscriber, Some(on_api_call), std::ptr::null_mut())
        };
        if r == sys::CUptiResult::CUPTI_SUCCESS {
            SUBSCRIBER.store(subscriber.cast(), Ordering::SeqCst);
        } else {
            subscriber = std::ptr::null_mut();
        }
    }
    let subscribed = !subscriber.is_null();
    if subscribed {
        for domain in [
            sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API,
            sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RUNTIME_API,
        ] {
            unsafe { sys::cuptiEnableDomain(1, subscriber, domain) };
        }
    }
    let mut st = sampler_state();
    if !subscribed {
        warn("cannot subscribe to CUDA API callbacks to detach CUPTI; tracing the rest of the run");
        DETACH_PENDING.store(false, Ordering::SeqCst);
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

/// The callback subscriber of the current attachment (null when none):
/// selected API calls in a sampled window, every call while a detach waits.
static SUBSCRIBER: std::sync::atomic::AtomicPtr<std::ffi::c_void> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());
/// A sampled window is open: the callback records the selected calls.
static RECORD_API_CALLS: AtomicBool = AtomicBool::new(false);
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
/// The window closed: the next API exit detaches CUPTI. An atomic, so the
/// callback on every API call checks it without the lock; it is cleared
/// under the lock, before the sampler is woken.
static DETACH_PENDING: AtomicBool = AtomicBool::new(false);
/// API lines the callbacks wrote in the open window.
static API_LINES: Mutex<String> = Mutex::new(String::new());

thread_local! {
    /// Entry times of the API calls this thread is inside (a runtime call
    /// makes driver calls).
    static ENTERED: std::cell::RefCell<Vec<Entered>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn subscriber() -> sys::CUpti_SubscriberHandle {
    SUBSCRIBER.load(Ordering::SeqCst).cast()
}

fn take_api_lines() -> String {
    std::mem::take(&mut *API_LINES.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Subscribe to CUPTI's callbacks for the selected API calls. The
/// subscription is CUPTI's again after it detaches, so every attachment
/// makes its own.
unsafe fn subscribe_api_callbacks() -> bool {
    let mut handle: sys::CUpti_SubscriberHandle = std::ptr::null_mut();
    if unsafe { sys::cuptiSubscribe(&mut handle, Some(on_api_call), std::ptr::null_mut()) }
        != sys::CUptiResult::CUPTI_SUCCESS
    {
        return false;
    }
    SUBSCRIBER.store(handle.cast(), Ordering::SeqCst);
    WINDOW_GEN.fetch_add(1, Ordering::SeqCst);
    for &(domain, cbid) in selected_apis() {
        unsafe { sys::cuptiEnableCallback(1, handle, domain, cbid) };
    }
    RECORD_API_CALLS.store(true, Ordering::SeqCst);
    true
}

/// CUPTI's callback for runtime and driver API calls: in a sampled window,
/// a selected call becomes an `api` line; once the window closed, the first
/// call's exit detaches CUPTI from the process (where NVIDIA's sample does).
unsafe extern "C" fn on_api_call(
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
        let correlation = unsafe { (*(data as *const sys::CUpti_CallbackData)).correlationId };
        let tid = unsafe { libc::syscall(libc::SYS_gettid) };
        let line = format!(
            "{{\"t\":\"api\",\"name\":{},\"s\":{start},\"e\":{now},\"tid\":{tid},\"c\":{correlation}}}\n",
            json_str(&api_name(domain, cbid))
        );
        API_LINES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_str(&line);
    });
}

/// Detach CUPTI (first API exit after a window closed).
fn detach_now() {
    // Held throughout: the sampler waits on the flag under this lock.
    let _st = sampler_state();
    if !DETACH_PENDING.load(Ordering::SeqCst) {
        return;
    }
    let held = BUFFERS_OUT
        .load(Ordering::SeqCst)
        .saturating_sub(BUFFERS_BACK.load(Ordering::SeqCst));
    BUFFERS_LEFT_AT_DETACH.store(held, Ordering::SeqCst);
    unsafe { sys::cuptiFinalize() };
    SUBSCRIBER.store(std::ptr::null_mut(), Ordering::SeqCst);
    DETACH_PENDING.store(false, Ordering::SeqCst);
    SAMPLER.wake.notify_all();
}

extern "C" fn at_exit() {
    if TRACED_PID.load(Ordering::SeqCst) != std::process::id() {
        return;
    }
    let _ = catch_unwind(|| {
        let sampling = SAMPLING.load(Ordering::SeqCst);
        if sampling {
            sampler_state().exiting = true;
            SAMPLER.wake.notify_all();
            join(&SAMPLER_THREAD);
        }
        // A detached CUPTI is left alone: any CUPTI call would attach it again.
        let st = sampler_state();
        if !sampling {
            end_recording(None);
        } else if st.recording {
            end_recording(Some(st.window_start));
        }
        drop(st);
        let dropped = DROPPED.load(Ordering::SeqCst);
        // Every buffer is back from CUPTI: let the drain thread write them all.
        finish_drain_thread();
        if let Ok(mut guard) = OUT.lock() {
            if let Some(w) = guard.as_mut() {
                let lost = BUFFERS_OUT
                    .load(Ordering::SeqCst)
                    .saturating_sub(BUFFERS_BACK.load(Ordering::SeqCst))
                    .saturating_sub(BUFFERS_LEFT_AT_DETACH.load(Ordering::SeqCst));
                let _ = writeln!(
                    w,
                    "{{\"t\":\"end\",\"records\":{},\"dropped\":{dropped},\"lost_buffers\":{lost}}}",
                    RECORDS.load(Ordering::Relaxed)
                );
                let _ = w.flush();
            }
        }
    });
}

unsafe extern "C" fn buffer_requested(
    buffer: *mut *mut u8,
    size: *mut usize,
    max_records: *mut usize,
) {
    let ok = catch_unwind(|| {
        let p = unsafe { std::alloc::alloc(buffer_layout()) };
        if !p.is_null() {
            BUFFERS_OUT.fetch_add(1, Ordering::SeqCst);
        }
        unsafe {
            *buffer = p;
            *size = if p.is_null() {
                0
            } else {
                BUFFER_BYTES.load(Ordering::Relaxed)
            };
            *max_records = 0;
        }
    });
    if ok.is_err() {
        unsafe {
            *buffer = std::ptr::null_mut();
            *size = 0;
        }
    }
}

unsafe extern "C" fn buffer_completed(
    _ctx: cudarc::driver::sys::CUcontext,
    _stream: u32,
    buffer: *mut u8,
    _size: usize,
    valid: usize,
) {
    if buffer.is_null() {
        return;
    }
    BUFFERS_BACK.fetch_add(1, Ordering::SeqCst);
    let queued = catch_unwind(|| {
        let mut q = drain_queue();
        if q.accepting {
            q.filled.push(Queued::Buffer { ptr: buffer, valid });
            DRAINER.ready.notify_one();
        }
        q.accepting
    })
    .unwrap_or(false);
    if !queued {
        let _ = catch_unwind(|| unsafe { drain(buffer, valid) });
        unsafe { std::alloc::dealloc(buffer, buffer_layout()) };
    }
}

/// API calls worth keeping: launches, graph launches, synchronisation, copies.
fn keep_api(name: &str) -> bool {
    ["Launch", "Synchronize", "Memcpy", "Memset", "GraphLaunch"]
        .iter()
        .any(|k| name.contains(k))
}

fn api_name(domain: sys::CUpti_CallbackDomain, cbid: u32) -> String {
    let key = (domain as u32, cbid);
    let mut guard = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    let names = guard.get_or_insert_with(HashMap::new);
    names
        .entry(key)
        .or_insert_with(|| callback_name(domain, cbid).unwrap_or_else(|| format!("cbid{cbid}")))
        .clone()
}

/// CUPTI's name for a runtime or driver API call, None for an unused id.
fn callback_name(domain: sys::CUpti_CallbackDomain, cbid: u32) -> Option<String> {
    let mut p: *const std::ffi::c_char = std::ptr::null();
    if unsafe { sys::cuptiGetCallbackName(domain, cbid, &mut p) } != sys::CUptiResult::CUPTI_SUCCESS
    {
        return None;
    }
    unsafe { c_text(p) }
}

unsafe fn drain(buffer: *mut u8, valid: usize) {
    if buffer.is_null() || valid == 0 {
        return;
    }
    let mut lines = String::with_capacity(valid / 2);
    let mut record: *mut sys::CUpti_Activity = std::ptr::null_mut();
    while unsafe { sys::cuptiActivityGetNextRecord(buffer, valid, &mut record) }
        == sys::CUptiResult::CUPTI_SUCCESS
    {
        let kind = unsafe { (*record).kind };
        use sys::CUpti_ActivityKind as K;
        match kind {
            K::CUPTI_ACTIVITY_KIND_KERNEL | K::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL => {
                // The fields kopt reads sit in the prefix every Kernel record version shares.
                let k = unsafe { &*(record as *const sys::CUpti_ActivityKernel10) };
                let name = unsafe { c_text(k.name) }.unwrap_or_else(|| "?".into());
                lines.push_str(&format!(
                    "{{\"t\":\"kernel\",\"name\":{},\"s\":{},\"e\":{},\"dev\":{},\"str\":{},\"c\":{},\"g\":[{},{},{}],\"b\":[{},{},{}],\"reg\":{},\"smem\":{},\"graph\":{}}}\n",
                    json_str(&name),
                    k.start,
                    k.end,
                    k.deviceId,
                    k.streamId,
                    k.correlationId,
                    k.gridX,
                    k.gridY,
                    k.gridZ,
                    k.blockX,
                    k.blockY,
                    k.blockZ,
                    k.registersPerThread,
                    k.staticSharedMemory as i64 + k.dynamicSharedMemory as i64,
                    k.graphId
                ));
            }
            K::CUPTI_ACTIVITY_KIND_RUNTIME | K::CUPTI_ACTIVITY_KIND_DRIVER => {
                let a = unsafe { &*(record as *const sys::CUpti_ActivityAPI) };
                let domain = if kind == K::CUPTI_ACTIVITY_KIND_RUNTIME {
                    sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RUNTIME_API
                } else {
                    sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API
                };
                let name = api_name(domain, a.cbid);
                if keep_api(&name) {
                    lines.push_str(&format!(
                        "{{\"t\":\"api\",\"name\":{},\"s\":{},\"e\":{},\"tid\":{},\"c\":{}}}\n",
                        json_str(&name),
                        a.start,
                        a.end,
                        a.threadId,
                        a.correlationId
                    ));
                }
            }
            K::CUPTI_ACTIVITY_KIND_MARKER => {
                let m = unsafe { &*(record as *const sys::CUpti_ActivityMarker2) };
                // Flags are a bit set: read them as an integer, not as the enum.
                let flags = unsafe { *(record as *const u32).add(1) };
                let tid = unsafe { m.objectId.pt.threadId };
                let (name, domain) = unsafe { (c_text(m.name), c_text(m.domain)) };
                if let Some(line) = marker_line(flags, m.id, m.timestamp, tid, name, domain) {
                    lines.push_str(&line);
                }
            }
            K::CUPTI_ACTIVITY_KIND_DEVICE => {
                // The fields read here sit in the prefix Device2..5 share.
                let d = unsafe { &*(record as *const sys::CUpti_ActivityDevice5) };
                let name = unsafe { c_text(d.name) }.unwrap_or_else(|| "?".into());
                lines.push_str(&format!(
                    "{{\"t\":\"device\",\"id\":{},\"name\":{},\"sms\":{},\"cc\":[{},{}],\"mem_bw_kbs\":{},\"clock_khz\":{}}}\n",
                    { d.id },
                    json_str(&name),
                    { d.numMultiprocessors },
                    { d.computeCapabilityMajor },
                    { d.computeCapabilityMinor },
                    { d.globalMemoryBandwidth },
                    { d.coreClockRate }
                ));
            }
            K::CUPTI_ACTIVITY_KIND_MEMCPY => {
                let m = unsafe { &*(record as *const sys::CUpti_ActivityMemcpy6) };
                lines.push_str(&format!(
                    "{{\"t\":\"memcpy\",\"name\":\"Memcpy kind {}\",\"s\":{},\"e\":{},\"dev\":{},\"str\":{},\"c\":{},\"bytes\":{}}}\n",
                    m.copyKind, m.start, m.end, m.deviceId, m.streamId, m.correlationId, m.bytes
                ));
            }
            K::CUPTI_ACTIVITY_KIND_MEMSET => {
                let m = unsafe { &*(record as *const sys::CUpti_ActivityMemset4) };
                lines.push_str(&format!(
                    "{{\"t\":\"memset\",\"name\":\"Memset\",\"s\":{},\"e\":{},\"dev\":{},\"str\":{},\"c\":{},\"bytes\":{}}}\n",
                    m.start, m.end, m.deviceId, m.streamId, m.correlationId, m.bytes
                ));
            }
            _ => {}
        }
        RECORDS.fetch_add(1, Ordering::Relaxed);
    }
    write_out(&lines);
}

/// Append to the trace file.
fn write_out(text: &str) {
    if let Ok(mut guard) = OUT.lock() {
        if let Some(w) = guard.as_mut() {
            let _ = w.write_all(text.as_bytes());
        }
    }
}

/// Write a line after every buffer queued so far: through the drain thread
/// when it runs, else at once (buffers were drained in place).
fn queue_line(line: String) {
    let mut q = drain_queue();
    if q.accepting {
        q.filled.push(Queued::Line(line));
        DRAINER.ready.notify_one();
    } else {
        drop(q);
        write_out(&line);
    }
}

/// One NVTX marker record as a trace line: a range's start (with its name)
/// or end (same id); instantaneous marks are skipped.
fn marker_line(
    flags: u32,
    id: u32,
    timestamp: u64,
    tid: u32,
    name: Option<String>,
    domain: Option<String>,
) -> Option<String> {
    const START: u32 = 2;
    const END: u32 = 4;
    if flags & START != 0 {
        Some(format!(
            "{{\"t\":\"range_start\",\"id\":{id},\"s\":{timestamp},\"tid\":{tid},\"name\":{},\"dom\":{}}}\n",
            json_str(name.as_deref().unwrap_or("")),
            json_str(domain.as_deref().unwrap_or(""))
        ))
    } else if flags & END != 0 {
        Some(format!(
            "{{\"t\":\"range_end\",\"id\":{id},\"s\":{timestamp}}}\n"
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_str("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    }

    #[test]
    fn keeps_launch_sync_and_copy_calls_only() {
        assert!(keep_api("cudaLaunchKernel_v7000"));
        assert!(keep_api("cuLaunchKernelEx"));
        assert!(keep_api("cudaGraphLaunch_v10000"));
        assert!(keep_api("cudaDeviceSynchronize_v3020"));
        assert!(keep_api("cudaMemcpyAsync_v3020"));
        assert!(!keep_api("cudaGetDevice_v3020"));
    }

    #[test]
    fn nvtx_markers_become_range_lines() {
        let start = marker_line(2, 7, 1000, 42, Some("step".into()), None).unwrap();
        assert_eq!(
            start,
            "{\"t\":\"range_start\",\"id\":7,\"s\":1000,\"tid\":42,\"name\":\"step\",\"dom\":\"\"}\n"
        );
        let end = marker_line(4, 7, 2000, 42, None, None).unwrap();
        assert_eq!(end, "{\"t\":\"range_end\",\"id\":7,\"s\":2000}\n");
        assert!(marker_line(1, 8, 3000, 42, Some("mark".into()), None).is_none());
    }

    #[test]
    fn sampling_takes_on_and_period_in_ms() {
        assert_eq!(parse_sample("10/100"), Some((10, 100)));
        assert_eq!(parse_sample(" 5 / 50 "), Some((5, 50)));
        assert_eq!(
            parse_sample("100/100"),
            None,
            "a window as long as the period is no sampling"
        );
        assert_eq!(parse_sample("0/100"), None);
        assert_eq!(parse_sample("10"), None);
        assert_eq!(parse_sample("a/b"), None);
        assert_eq!(window_line(5, 9), "{\"t\":\"window\",\"s\":5,\"e\":9}\n");
    }

    #[test]
    fn api_mode_defaults_to_selected_calls() {
        assert_eq!(ApiMode::parse(None), ApiMode::Select);
        assert_eq!(ApiMode::parse(Some("all")), ApiMode::All);
        assert_eq!(ApiMode::parse(Some("off")), ApiMode::Off);
    }

    #[test]
    fn a_second_process_writes_beside_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        open_trace_file(&path).unwrap();
        assert!(path.exists());
        open_trace_file(&path).unwrap();
        let own = dir
            .path()
            .join(format!("trace.jsonl.{}", std::process::id()));
        assert!(own.exists(), "the second open goes to trace.jsonl.<pid>");
    }

    #[test]
    fn initialisation_without_an_output_path_is_harmless() {
        // No KOPT_TRACE_OUT in the test environment: a warning, no panic, success code.
        std::env::remove_var("KOPT_TRACE_OUT");
        assert_eq!(InitializeInjection(), 1);
    }
}
