//! A counting global allocator for the stable driver: the live heap, its
//! peak since the last [`reset_peak`], and a hard limit past which an
//! allocation fails (the process then aborts, as libFuzzer's
//! `-malloc_limit_mb` would stop it). A binary opts in with
//! `#[global_allocator] static A: kopt_fuzz::alloc::CountingAlloc = kopt_fuzz::alloc::CountingAlloc;`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

pub struct CountingAlloc;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);
static INSTALLED: AtomicBool = AtomicBool::new(false);
static REPORTED: AtomicBool = AtomicBool::new(false);

impl CountingAlloc {
    fn grow(&self, size: usize) -> bool {
        INSTALLED.store(true, Relaxed);
        let now = CURRENT.fetch_add(size, Relaxed) + size;
        if now > LIMIT.load(Relaxed) {
            CURRENT.fetch_sub(size, Relaxed);
            if !REPORTED.swap(true, Relaxed) {
                // Small allocations still pass: only the one that crosses fails.
                eprintln!(
                    "kopt-fuzz: an allocation of {size} bytes would take the heap past the limit of {} bytes; the input being run is in the driver's current-input file",
                    LIMIT.load(Relaxed)
                );
            }
            return false;
        }
        PEAK.fetch_max(now, Relaxed);
        true
    }
}

// SAFETY: every call is forwarded to the system allocator; only counters are kept.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !self.grow(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's layout (and pointer) forwarded unchanged to the system allocator.
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            CURRENT.fetch_sub(layout.size(), Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !self.grow(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's layout (and pointer) forwarded unchanged to the system allocator.
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            CURRENT.fetch_sub(layout.size(), Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's layout (and pointer) forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = layout.size();
        if new_size > old && !self.grow(new_size - old) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's layout (and pointer) forwarded unchanged to the system allocator.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            if new_size > old {
                CURRENT.fetch_sub(new_size - old, Relaxed);
            }
        } else if new_size < old {
            CURRENT.fetch_sub(old - new_size, Relaxed);
        }
        p
    }
}

/// Whether the running binary counts its heap with [`CountingAlloc`].
pub fn installed() -> bool {
    // Anything allocates before a driver asks.
    drop(Box::new(0u8));
    INSTALLED.load(Relaxed)
}

/// The live heap now, in bytes.
pub fn current() -> usize {
    CURRENT.load(Relaxed)
}

/// Start a new peak at the live heap; returns it.
pub fn reset_peak() -> usize {
    let now = CURRENT.load(Relaxed);
    PEAK.store(now, Relaxed);
    now
}

/// The highest live heap since the last [`reset_peak`].
pub fn peak() -> usize {
    PEAK.load(Relaxed)
}

/// Fail allocations that would take the live heap past `bytes`.
pub fn set_limit(bytes: usize) {
    LIMIT.store(bytes, Relaxed);
}
