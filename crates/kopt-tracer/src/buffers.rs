//! CUPTI's activity buffers: handed to CUPTI on request, taken back when
//! complete, turned into trace lines (`drain`) on kopt's drain thread (or in
//! place with `KOPT_TRACER_SYNC_DRAIN=1`), then freed.
//!
//! Ownership: `buffer_requested` allocates a buffer with `buffer_layout()`
//! and gives it to CUPTI; CUPTI gives it back exactly once through
//! `buffer_completed`; from then on it belongs to kopt: it is either queued
//! for the drain thread or drained in place, and freed once, after `drain`.

use std::collections::HashMap;
use std::panic::catch_unwind;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use cudarc::cupti::sys;

use crate::apis::{api_name, keep_api};
use crate::cupti::c_text;
use crate::output::write_out;
use crate::records::{self, CopyRecord, DeviceRecord, KernelRecord};

/// Activity buffers handed to CUPTI: 8 MiB unless `KOPT_TRACER_BUFFER_MB` says.
static BUFFER_BYTES: AtomicUsize = AtomicUsize::new(8 << 20);
const ALIGN: usize = 8;

/// Records read from CUPTI's buffers (the `end` record's `records`).
pub(crate) static RECORDS: AtomicU64 = AtomicU64::new(0);
/// Runtime and driver calls CUPTI recorded, by name (`KOPT_TRACER_APIS=all`),
/// written once at exit (`records::api_counts_line`).
static API_CALL_COUNTS: Mutex<Option<HashMap<String, u64>>> = Mutex::new(None);
/// Set by `attach` when every call is recorded: only then are the counts
/// every call's (in `select` mode CUPTI records the selected ones alone).
pub(crate) static COUNT_API_CALLS: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// The call counts so far, by name (empty unless every call was recorded).
pub(crate) fn take_api_call_counts() -> Vec<(String, u64)> {
    let mut counts: Vec<(String, u64)> = API_CALL_COUNTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .unwrap_or_default()
        .into_iter()
        .collect();
    counts.sort();
    counts
}

/// Buffers handed to CUPTI and handed back: after the final flush a
/// difference means another CUPTI client (torch.profiler, nsys) took the
/// activity callbacks over and received kopt's records.
pub(crate) static BUFFERS_OUT: AtomicU64 = AtomicU64::new(0);
pub(crate) static BUFFERS_BACK: AtomicU64 = AtomicU64::new(0);

/// Set the buffer size; `init` calls it before CUPTI asks for any buffer, so
/// every buffer is allocated and freed with the same layout.
pub(crate) fn set_buffer_mb(mb: usize) {
    BUFFER_BYTES.store(mb << 20, Ordering::Relaxed);
}

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
// SAFETY: the pointer is a buffer `buffer_requested` allocated, which CUPTI
// gave up when it completed it (`buffer_completed`): it is owned by this
// value alone, and from then on only the drain thread reads and frees it.
// Nothing else in `Queued` is tied to a thread.
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

pub(crate) fn start_drain_thread() -> bool {
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
                        // SAFETY: `ptr` is a buffer CUPTI completed with
                        // `valid` bytes written; it was taken off the queue
                        // just now, so this thread alone owns it, and it is
                        // freed only below, after `drain` returned.
                        let _ = catch_unwind(|| unsafe { drain(ptr, valid) });
                        // SAFETY: `ptr` was allocated by `buffer_requested`
                        // with `buffer_layout()`, which cannot have changed
                        // (the size is set in `init` before CUPTI asks for
                        // any buffer); this is its only free (the queue held
                        // it once).
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
pub(crate) fn finish_drain_thread() {
    drain_queue().accepting = false;
    DRAINER.ready.notify_all();
    crate::join(&DRAIN_THREAD);
}

/// Write a line after every buffer queued so far: through the drain thread
/// when it runs, else at once (buffers were drained in place).
pub(crate) fn queue_line(line: String) {
    let mut q = drain_queue();
    if q.accepting {
        q.filled.push(Queued::Line(line));
        DRAINER.ready.notify_one();
    } else {
        drop(q);
        write_out(&line);
    }
}

/// CUPTI's request for an empty buffer (`cuptiActivityRegisterCallbacks`).
///
/// # Safety
/// Called by CUPTI only, with valid pointers to write the buffer, its size
/// and the record limit to.
pub(crate) unsafe extern "C" fn buffer_requested(
    buffer: *mut *mut u8,
    size: *mut usize,
    max_records: *mut usize,
) {
    let ok = catch_unwind(|| {
        // SAFETY: `buffer_layout()` has a non-zero size (at least 1 MiB) and
        // a valid alignment; a null result (out of memory) is handled below.
        let p = unsafe { std::alloc::alloc(buffer_layout()) };
        if !p.is_null() {
            BUFFERS_OUT.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: CUPTI passes valid, writable out-pointers for the
        // callback's duration. The buffer (when not null) is
        // `BUFFER_BYTES` long, the size written with it, and now CUPTI's
        // until it hands it back through `buffer_completed`.
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
        // SAFETY: the same out-pointers CUPTI passed (valid for the
        // callback); no buffer (null, size 0) tells CUPTI to drop records.
        unsafe {
            *buffer = std::ptr::null_mut();
            *size = 0;
        }
    }
}

/// CUPTI hands a buffer back, `valid` bytes of it records.
///
/// # Safety
/// Called by CUPTI only, with a buffer `buffer_requested` allocated (or
/// null) that CUPTI no longer uses.
pub(crate) unsafe extern "C" fn buffer_completed(
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
        // SAFETY: CUPTI handed the buffer back (it no longer writes to it)
        // with `valid` bytes of records, and it was not queued, so this call
        // owns it until the free below.
        let _ = catch_unwind(|| unsafe { drain(buffer, valid) });
        // SAFETY: allocated by `buffer_requested` with `buffer_layout()`
        // (unchanged since `init`), not queued, so freed here once.
        unsafe { std::alloc::dealloc(buffer, buffer_layout()) };
    }
}

/// Turn a completed buffer's records into trace lines and write them.
///
/// # Safety
/// `buffer` is null or a buffer CUPTI completed with `valid` bytes of
/// activity records, owned by the caller (not freed during the call).
unsafe fn drain(buffer: *mut u8, valid: usize) {
    if buffer.is_null() || valid == 0 {
        return;
    }
    let mut lines = String::with_capacity(valid / 2);
    let mut record: *mut sys::CUpti_Activity = std::ptr::null_mut();
    // SAFETY: `buffer` holds `valid` bytes of records (the caller's
    // promise); `record` is the cursor CUPTI advances, null to start.
    while unsafe { sys::cuptiActivityGetNextRecord(buffer, valid, &mut record) }
        == sys::CUptiResult::CUPTI_SUCCESS
    {
        // SAFETY: on success `record` points to a whole record inside the
        // buffer, which outlives this loop; every record starts with its kind.
        let kind = unsafe { (*record).kind };
        use sys::CUpti_ActivityKind as K;
        match kind {
            K::CUPTI_ACTIVITY_KIND_KERNEL | K::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL => {
                // The fields kopt reads sit in the prefix every Kernel record version shares.
                // SAFETY: a record of this kind is a CUpti_ActivityKernel*
                // (Kernel10 for CUDA 13.0's CUPTI); the fields read are in
                // the prefix all versions share, inside the buffer, which
                // lives until the caller frees it after this function.
                let k = unsafe { &*(record as *const sys::CUpti_ActivityKernel10) };
                // SAFETY: CUPTI's kernel name is null or a NUL-terminated
                // string it keeps for the process's life.
                let name = unsafe { c_text(k.name) }.unwrap_or_else(|| "?".into());
                lines.push_str(&records::kernel_line(&KernelRecord {
                    name: &name,
                    start: k.start,
                    end: k.end,
                    device: k.deviceId,
                    stream: k.streamId,
                    correlation: k.correlationId,
                    grid: [k.gridX, k.gridY, k.gridZ],
                    block: [k.blockX, k.blockY, k.blockZ],
                    registers: k.registersPerThread,
                    shared_memory: k.staticSharedMemory as i64 + k.dynamicSharedMemory as i64,
                    graph: k.graphId,
                }));
            }
            K::CUPTI_ACTIVITY_KIND_RUNTIME | K::CUPTI_ACTIVITY_KIND_DRIVER => {
                // SAFETY: records of the runtime and driver kinds are
                // CUpti_ActivityAPI, whole inside the buffer (see above).
                let a = unsafe { &*(record as *const sys::CUpti_ActivityAPI) };
                let domain = if kind == K::CUPTI_ACTIVITY_KIND_RUNTIME {
                    sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RUNTIME_API
                } else {
                    sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API
                };
                let name = api_name(domain, a.cbid);
                if COUNT_API_CALLS.load(Ordering::Relaxed) {
                    *API_CALL_COUNTS
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert_with(HashMap::new)
                        .entry(name.clone())
                        .or_insert(0) += 1;
                }
                if keep_api(&name) {
                    lines.push_str(&records::api_line(
                        &name,
                        a.start,
                        a.end,
                        i64::from(a.threadId),
                        a.correlationId,
                    ));
                }
            }
            K::CUPTI_ACTIVITY_KIND_MARKER => {
                // SAFETY: marker records are CUpti_ActivityMarker2, whole
                // inside the buffer (see above).
                let m = unsafe { &*(record as *const sys::CUpti_ActivityMarker2) };
                // Flags are a bit set: read them as an integer, not as the enum.
                // SAFETY: `flags` is the u32 right after the u32 `kind` at
                // the record's start (inside the record, 4-byte aligned);
                // read as an integer because a combination of flags is not
                // a valid value of the enum.
                let flags = unsafe { *(record as *const u32).add(1) };
                // SAFETY: for a marker, `objectId` holds the thread variant
                // (`pt`); both variants are plain integers, so reading
                // either is defined.
                let tid = unsafe { m.objectId.pt.threadId };
                // SAFETY: name and domain are null or NUL-terminated strings
                // CUPTI keeps at least while the record is read.
                let (name, domain) = unsafe { (c_text(m.name), c_text(m.domain)) };
                if let Some(line) =
                    records::marker_line(flags, m.id, m.timestamp, tid, name, domain)
                {
                    lines.push_str(&line);
                }
            }
            K::CUPTI_ACTIVITY_KIND_DEVICE => {
                // The fields read here sit in the prefix Device2..5 share.
                // SAFETY: device records are CUpti_ActivityDevice* (Device5
                // layout for the fields read, the prefix Device2..5 share),
                // inside the buffer (see above).
                let d = unsafe { &*(record as *const sys::CUpti_ActivityDevice5) };
                // SAFETY: the device name is null or a NUL-terminated string
                // CUPTI keeps while the record is read.
                let name = unsafe { c_text(d.name) }.unwrap_or_else(|| "?".into());
                lines.push_str(&records::device_line(&DeviceRecord {
                    id: d.id,
                    name: &name,
                    sms: d.numMultiprocessors,
                    cc: [d.computeCapabilityMajor, d.computeCapabilityMinor],
                    mem_bw_kbs: d.globalMemoryBandwidth,
                    clock_khz: d.coreClockRate,
                }));
            }
            K::CUPTI_ACTIVITY_KIND_MEMCPY => {
                // SAFETY: memcpy records are CUpti_ActivityMemcpy6 for
                // CUDA 13.0's CUPTI, inside the buffer (see above).
                let m = unsafe { &*(record as *const sys::CUpti_ActivityMemcpy6) };
                lines.push_str(&records::memcpy_line(
                    m.copyKind,
                    [m.srcKind, m.dstKind],
                    &CopyRecord {
                        start: m.start,
                        end: m.end,
                        device: m.deviceId,
                        stream: m.streamId,
                        correlation: m.correlationId,
                        bytes: m.bytes,
                    },
                ));
            }
            K::CUPTI_ACTIVITY_KIND_MEMSET => {
                // SAFETY: memset records are CUpti_ActivityMemset4 for
                // CUDA 13.0's CUPTI, inside the buffer (see above).
                let m = unsafe { &*(record as *const sys::CUpti_ActivityMemset4) };
                lines.push_str(&records::memset_line(&CopyRecord {
                    start: m.start,
                    end: m.end,
                    device: m.deviceId,
                    stream: m.streamId,
                    correlation: m.correlationId,
                    bytes: m.bytes,
                }));
            }
            _ => {}
        }
        RECORDS.fetch_add(1, Ordering::Relaxed);
    }
    write_out(&lines);
}
