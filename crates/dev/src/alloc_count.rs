//! A counting global allocator for tests that prove "no heap allocation per packet".
//!
//! It lives here because a global allocator needs `unsafe`, which only `dev` and
//! `mbuf` may use. Install it in a test binary with
//! `#[global_allocator] static A: dev::alloc_count::CountingAlloc = dev::alloc_count::CountingAlloc;`
//! and bracket the code under test with [`start`] and [`stop`].
//!
//! Independently of [`start`]/[`stop`], it always keeps the number of heap bytes in use
//! ([`live_bytes`]: allocated and not yet freed, by the requested sizes), for
//! measurements of memory per object.

use std::alloc::{GlobalAlloc, Layout, System};
use std::backtrace::Backtrace;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
/// Whether the first allocation counted gets its backtrace kept ([`start_culprit`]).
static CULPRIT: AtomicBool = AtomicBool::new(false);
static FIRST: Mutex<Option<Backtrace>> = Mutex::new(None);

thread_local! {
    /// Set while this thread captures a backtrace: the capture's own allocations
    /// come back through the allocator and must neither be counted nor captured
    /// (capturing inside a capture would recurse). `const` and without a destructor,
    /// so reading it never allocates.
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
}

/// Counts one allocation of `size` bytes, while counting is on.
#[inline]
fn counted(size: usize) {
    if !COUNTING.load(Ordering::Relaxed) {
        return;
    }
    // A thread being torn down has no thread-locals left: treat it as inside.
    if IN_HOOK.try_with(Cell::get).unwrap_or(true) {
        return;
    }
    BYTES.fetch_add(size as u64, Ordering::Relaxed);
    if ALLOCS.fetch_add(1, Ordering::Relaxed) == 0 && CULPRIT.load(Ordering::Relaxed) {
        let _ = IN_HOOK.try_with(|f| f.set(true));
        let bt = Backtrace::force_capture();
        if let Ok(mut first) = FIRST.try_lock() {
            *first = Some(bt);
        }
        let _ = IN_HOOK.try_with(|f| f.set(false));
    }
}
/// Bytes allocated minus bytes freed since the process started (signed: a block freed
/// here may, in principle, come from before the allocator was installed).
static LIVE: AtomicI64 = AtomicI64::new(0);

fn live_add(n: usize) {
    LIVE.fetch_add(n as i64, Ordering::Relaxed);
}

fn live_sub(n: usize) {
    LIVE.fetch_sub(n as i64, Ordering::Relaxed);
}

/// Forwards to the system allocator, counting allocations while enabled.
#[derive(Debug, Clone, Copy)]
pub struct CountingAlloc;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so
// `System`'s guarantees are ours; counting touches only atomics and never allocates.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        counted(l.size());
        // SAFETY: same contract as our caller's, forwarded unchanged.
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            live_add(l.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        counted(l.size());
        // SAFETY: same contract as our caller's, forwarded unchanged.
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            live_add(l.size());
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` was returned by `System` for layout `l` (all our allocations are).
        unsafe { System.dealloc(p, l) };
        live_sub(l.size());
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        counted(n);
        // SAFETY: `p` was returned by `System` for layout `l`; `n` is the caller's.
        let q = unsafe { System.realloc(p, l, n) };
        // On failure the old block stays allocated, unchanged.
        if !q.is_null() {
            live_sub(l.size());
            live_add(n);
        }
        q
    }
}

/// Resets the counters and starts counting (all threads).
pub fn start() {
    CULPRIT.store(false, Ordering::SeqCst);
    ALLOCS.store(0, Ordering::SeqCst);
    BYTES.store(0, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
}

/// Like [`start`], keeping a backtrace of the first allocation counted, so that a
/// test that finds one can name the path that made it ([`stop_culprit`]).
pub fn start_culprit() {
    if let Ok(mut first) = FIRST.lock() {
        *first = None;
    }
    start();
    CULPRIT.store(true, Ordering::SeqCst);
}

/// Stops counting: (allocations, bytes, the first one's backtrace if
/// [`start_culprit`] began the count).
pub fn stop_culprit() -> (u64, u64, Option<Backtrace>) {
    let (n, b) = stop();
    CULPRIT.store(false, Ordering::SeqCst);
    let first = FIRST.lock().ok().and_then(|mut f| f.take());
    (n, b, first)
}

/// Stops counting; returns (allocations, bytes) since [`start`].
pub fn stop() -> (u64, u64) {
    COUNTING.store(false, Ordering::SeqCst);
    (ALLOCS.load(Ordering::SeqCst), BYTES.load(Ordering::SeqCst))
}

/// Heap bytes in use (requested sizes, allocator overhead not included) through this
/// allocator; 0 when it is not the global allocator.
pub fn live_bytes() -> u64 {
    LIVE.load(Ordering::Relaxed).max(0) as u64
}
