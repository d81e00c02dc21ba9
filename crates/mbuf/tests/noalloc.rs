//! After warm-up, the packet fast path makes no heap allocation: buffers come
//! from the thread's pool cache, segment lists of up to four segments are
//! inline. A counting global allocator proves it over 10,000 iterations.
//!
//! This file holds a single test so that no other test allocates meanwhile;
//! the counter is per thread anyway.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use mbuf::Mbuf;

struct Counting;

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    // `try_with`: the allocator may run while thread-locals are torn down.
    let _ = ON.try_with(|on| {
        if on.get() {
            let _ = ALLOCS.try_with(|a| a.set(a.get() + 1));
        }
    });
}

// SAFETY: forwards every call unchanged to the system allocator; counting
// touches only const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn fast_path(payload: &[u8], held: &Mbuf, rthdr_pkt: &[u8]) {
    // Receive + drop.
    let m = Mbuf::from_slice(payload).unwrap();
    drop(m);
    // Build an outgoing packet: payload, then headers in the headroom.
    let mut m = Mbuf::new().unwrap();
    m.append(&payload[..1000]).unwrap();
    m.prepend(20).unwrap().fill(0x45);
    m.prepend(14).unwrap().fill(0xff);
    drop(m);
    // Share (bridge flood, retransmit queue) + drop.
    let c = held.try_clone().unwrap();
    drop(c);
    // Header access that must restructure, and split/cat.
    let mut m = Mbuf::devget(rthdr_pkt).unwrap();
    m.pulldown(40, 72).unwrap()[3] = 0;
    let rest = m.split(60).unwrap();
    m.cat(rest);
    m.pullup2(120).unwrap();
    drop(m);
}

#[test]
#[cfg_attr(miri, ignore)]
fn steady_state_makes_no_heap_allocation() {
    let payload = vec![0xabu8; 1500];
    let rthdr_pkt = vec![0x11u8; 128];
    let held = Mbuf::from_slice(&payload).unwrap();
    for _ in 0..1000 {
        fast_path(&payload, &held, &rthdr_pkt);
    }
    ON.with(|on| on.set(true));
    ALLOCS.with(|a| a.set(0));
    drop(std::hint::black_box(Vec::<u8>::with_capacity(2048)));
    assert_eq!(ALLOCS.with(Cell::get), 1, "the counter counts");
    ALLOCS.with(|a| a.set(0));
    for _ in 0..10_000 {
        fast_path(&payload, &held, &rthdr_pkt);
    }
    ON.with(|on| on.set(false));
    assert_eq!(
        ALLOCS.with(Cell::get),
        0,
        "heap allocations in steady state"
    );
}
