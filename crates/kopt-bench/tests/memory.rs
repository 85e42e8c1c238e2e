//! Memory of the gate: two u8 arrays of N bytes used to cost about 17 N (every
//! element widened to f64, twice over); reading and comparing them must cost
//! about the files' size. Alone in its binary: the allocator below counts
//! every allocation of the process.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use kopt_bench::compare_tensors;
use kopt_ingest::tensor::{npy_bytes, read_tensors};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator; only a counter is kept.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::SeqCst) + layout.size();
            PEAK.fetch_max(now, Ordering::SeqCst);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[test]
fn two_u8_arrays_cost_about_their_size() {
    const N: usize = 8 << 20;
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("a.npy"), d.path().join("b.npy"));
    {
        let mut data: Vec<u8> = (0..N).map(|i| (i % 251) as u8).collect();
        std::fs::write(&a, npy_bytes("|u1", &[N], &data)).unwrap();
        if let Some(x) = data.get_mut(N / 2) {
            *x = x.wrapping_add(1);
        }
        std::fs::write(&b, npy_bytes("|u1", &[N], &data)).unwrap();
    }
    let before = LIVE.load(Ordering::SeqCst);
    PEAK.store(before, Ordering::SeqCst);
    let reference = read_tensors(&a).unwrap();
    let candidate = read_tensors(&b).unwrap();
    let report = compare_tensors(&reference, &candidate, None, false);
    let peak = PEAK.load(Ordering::SeqCst) - before;
    // One element differs, by one: u8 must match exactly.
    assert!(!report.passed);
    assert_eq!(report.tensors[0].max_abs, Some(1.0));
    assert_eq!(report.tensors[0].compared, N as u64);
    // The two files and little else (widening alone would be 16 N).
    assert!(
        peak < 2 * N + N / 4,
        "peak {} MB for two files of {} MB",
        peak >> 20,
        N >> 20
    );
}
