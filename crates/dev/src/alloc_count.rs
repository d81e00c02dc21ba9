//! A counting global allocator for tests that prove "no heap allocation per packet".
//!
//! It lives here because a global allocator needs `unsafe`, which only `dev` and
//! `mbuf` may use. Install it in a test binary with
//! `#[global_allocator] static A: dev::alloc_count::CountingAlloc = dev::alloc_count::CountingAlloc;`
//! and bracket the code under test with [`start`] and [`stop`].

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

/// Forwards to the system allocator, counting allocations while enabled.
#[derive(Debug, Clone, Copy)]
pub struct CountingAlloc;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so
// `System`'s guarantees are ours; counting touches only atomics and never allocates.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
            BYTES.fetch_add(l.size() as u64, Ordering::Relaxed);
        }
        // SAFETY: same contract as our caller's, forwarded unchanged.
        unsafe { System.alloc(l) }
    }

    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
            BYTES.fetch_add(l.size() as u64, Ordering::Relaxed);
        }
        // SAFETY: same contract as our caller's, forwarded unchanged.
        unsafe { System.alloc_zeroed(l) }
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` was returned by `System` for layout `l` (all our allocations are).
        unsafe { System.dealloc(p, l) }
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
            BYTES.fetch_add(n as u64, Ordering::Relaxed);
        }
        // SAFETY: `p` was returned by `System` for layout `l`; `n` is the caller's.
        unsafe { System.realloc(p, l, n) }
    }
}

/// Resets the counters and starts counting (all threads).
pub fn start() {
    ALLOCS.store(0, Ordering::SeqCst);
    BYTES.store(0, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
}

/// Stops counting; returns (allocations, bytes) since [`start`].
pub fn stop() -> (u64, u64) {
    COUNTING.store(false, Ordering::SeqCst);
    (ALLOCS.load(Ordering::SeqCst), BYTES.load(Ordering::SeqCst))
}
