//! The buffer pool: reference-counted buffers in three size classes, carved from
//! slabs, handed out through per-thread caches.
//!
//! What it owns: every byte a packet lives in. Each buffer starts with a small
//! header (an atomic reference count and the capacity) followed by its data:
//! a *small* buffer holds [`MLEN`] bytes (the whole buffer, header included, is
//! [`MSIZE`] bytes, as a 4.4BSD mbuf was), a *cluster* holds [`MCLBYTES`], a
//! *jumbo* cluster holds [`MJUMBYTES`]: a whole 64 KiB segment for a device that
//! takes segmentation offload (FreeBSD's `MJUM16BYTES` and `MJUMPAGESIZE` serve the
//! same end), and a *256 KiB* cluster holds [`MJUM256BYTES`]: an application's
//! large write, whose bytes the send buffer and the segments then share.
//!
//! How it allocates (the FreeBSD UMA / VPP buffer-pool pattern):
//! - [`Buf::alloc`] and the drop of the last reference touch only the calling
//!   thread's cache (a `thread_local` stack of free buffers per class). No lock,
//!   no heap allocation, no shared cache line written.
//! - An empty cache refills [`BATCH`] buffers from the global free list under one
//!   lock; a cache that reaches [`CACHE_HIGH`] gives [`BATCH`] back the same way
//!   (for jumbo and 256 KiB clusters far fewer: [`Class::cache_high`]).
//!   A buffer freed on another thread simply joins that thread's cache.
//! - When the global list is empty the pool grows by one slab (64 clusters or
//!   256 small buffers in one zeroed heap allocation), up to the limit set by
//!   [`set_limit`]. Beyond it allocation fails with [`NoBufs`] and is counted.
//! - Slabs go back to the heap only when asked, with [`reclaim`] (FreeBSD's
//!   `uma_reclaim`, which the page daemon calls under memory pressure): after a crowd
//!   of connections has gone, say. It frees every slab whose buffers are all on the
//!   global free list. Free buffers in threads' caches keep their slabs: `reclaim`
//!   gives back the calling thread's cache and asks the others to give back theirs
//!   at their next [`reclaim_if_asked`], which a thread calls when it goes idle (the
//!   stack's workers before they sleep, the services' runtime when a thread
//!   parks), and which frees the slabs that made whole. Between reclaims no slab is
//!   freed, so the fast paths never look at slabs. The slabs in use stay listed in
//!   the global pool, so they are reachable for the process's lifetime (Miri's leak
//!   checker agrees; no `-Zmiri-ignore-leaks`).
//! - A thread's cache goes back to the global list when the thread exits.
//!
//! Slabs are zeroed when created and bytes stay initialised from then on, so a
//! recycled buffer may hold bytes of an earlier packet, exactly as a recycled
//! mbuf does; they are never exposed except through `prepend`, whose caller
//! overwrites them.
//!
//! [`MSIZE`]: crate::MSIZE
//! [`MLEN`]: crate::MLEN
//! [`MCLBYTES`]: crate::MCLBYTES
//! [`MJUMBYTES`]: crate::MJUMBYTES
//! [`MJUM256BYTES`]: crate::MJUM256BYTES

use std::alloc::{self, Layout};
use std::cell::{Cell, RefCell};
use std::ptr::{self, NonNull};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::{NoBufs, MCLBYTES, MJUM256BYTES, MJUMBYTES, MLEN, MSIZE};

/// Header at the start of every buffer. `cap` is written once, when the slab is
/// created; `refcnt` is only ever touched atomically.
#[repr(C)]
struct BufHdr {
    refcnt: AtomicU32,
    cap: u32,
    /// The [`Class`] (written once, with `cap`).
    class: u8,
    _reserved: [u8; 7],
}

const HDR: usize = std::mem::size_of::<BufHdr>();
const SMALL_STRIDE: usize = MSIZE;
/// Header + 2 KiB rounded up to a cache line, so no two clusters share a line.
const CLUSTER_STRIDE: usize = (HDR + MCLBYTES).div_ceil(64) * 64;
const JUMBO_STRIDE: usize = (HDR + MJUMBYTES).div_ceil(64) * 64;
const JUM256_STRIDE: usize = (HDR + MJUM256BYTES).div_ceil(64) * 64;
const SLAB_ALIGN: usize = 64;
const SMALL_PER_SLAB: usize = 256;
const CLUSTERS_PER_SLAB: usize = 64;
const JUMBOS_PER_SLAB: usize = 4;
const JUM256S_PER_SLAB: usize = 4;
const RECS_PER_SLAB: usize = 256;
/// Bytes of a packet record's stride: a packet header record takes two cache lines.
const REC_STRIDE: usize = 128;
/// Bytes a packet record may hold: its whole stride. A record needs no buffer
/// header while it is in use (no reference count: it has one owner, its handle;
/// its class is known), so it lies over its slot's header, which only the free
/// lists' bookkeeping has (and nothing reads but `grow`'s writes): a record then
/// starts on a cache line, and a packet of one segment has all of its record in
/// that line ([`crate::Pkt`]'s layout).
pub(crate) const REC_CAP: usize = REC_STRIDE;
/// Classes of buffers.
const CLASSES: usize = 5;
/// Buffers of the small classes (small, cluster, packet record) moved between a
/// thread cache and the global list under one lock ([`Class::batch`]).
pub(crate) const BATCH: usize = 128;
/// A thread cache holding this many free buffers of a small class gives [`BATCH`]
/// back ([`Class::cache_high`]): several receive bursts' worth, so that a worker
/// whose packets are freed where they were allocated never touches the global list
/// in steady state (with a high mark of one burst, every poll gave buffers back and
/// took them again, under the global lock).
pub(crate) const CACHE_HIGH: usize = 8 * BATCH;
/// The same for the large classes (jumbo and 256 KiB clusters), bounded by bytes
/// rather than count: 1024 free jumbo clusters are 66 MiB. When one thread
/// allocates them and another frees them (a TSO sender and its receiver), the
/// freeing thread's cache held that much while the allocating thread's ran dry and
/// carved new slabs: `bench tcp`'s threaded `mpstack-tso` row fell from ~58 to ~20
/// Gbit/s with 155 MB resident. 16 jumbos are 1 MiB, 16 256 KiB clusters 4 MiB.
const LARGE_BATCH: usize = 8;
const LARGE_CACHE_HIGH: usize = 2 * LARGE_BATCH;
/// Small buffers allowed per cluster of the limit: the same bytes (16 × 128 B ≈ 2 KiB).
const SMALL_PER_CLUSTER_LIMIT: usize = 16;
/// Clusters of the limit one jumbo cluster stands for: the same bytes.
const CLUSTERS_PER_JUMBO_LIMIT: usize = MJUMBYTES / MCLBYTES;
/// Clusters of the limit one 256 KiB cluster stands for: the same bytes.
const CLUSTERS_PER_JUM256_LIMIT: usize = MJUM256BYTES / MCLBYTES;
/// Packet records allowed per cluster of the limit: one for each small buffer and
/// cluster the limit allows, since every packet holds at least one of them.
const RECS_PER_CLUSTER_LIMIT: usize = SMALL_PER_CLUSTER_LIMIT + 1;
/// Default bound: 131072 clusters (272 MiB of clusters) and 16× as many small buffers.
pub const DEFAULT_CLUSTER_LIMIT: usize = 1 << 17;
/// Reference counts above this abort, as `Arc` does, instead of wrapping.
const MAX_REFS: u32 = i32::MAX as u32;

const _: () = assert!(HDR == 16);
const _: () = assert!(HDR + MLEN <= SMALL_STRIDE);
const _: () = assert!(SMALL_STRIDE.is_multiple_of(16) && CLUSTER_STRIDE.is_multiple_of(SLAB_ALIGN));
const _: () =
    assert!(JUMBO_STRIDE.is_multiple_of(SLAB_ALIGN) && JUM256_STRIDE.is_multiple_of(SLAB_ALIGN));
const _: () = assert!(REC_STRIDE.is_multiple_of(SLAB_ALIGN));

/// The four size classes of data buffers, and packet records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    Small = 0,
    Cluster = 1,
    Jumbo = 2,
    Jum256 = 3,
    /// A packet record (the header and segment list a packet handle points to):
    /// never holds data, never shared, never chosen by [`Class::for_len`].
    Rec = 4,
}

impl Class {
    #[inline]
    pub(crate) const fn cap(self) -> usize {
        match self {
            Class::Small => MLEN,
            Class::Cluster => MCLBYTES,
            Class::Jumbo => MJUMBYTES,
            Class::Jum256 => MJUM256BYTES,
            Class::Rec => REC_CAP,
        }
    }
    const fn stride(self) -> usize {
        match self {
            Class::Small => SMALL_STRIDE,
            Class::Cluster => CLUSTER_STRIDE,
            Class::Jumbo => JUMBO_STRIDE,
            Class::Jum256 => JUM256_STRIDE,
            Class::Rec => REC_STRIDE,
        }
    }
    const fn per_slab(self) -> usize {
        match self {
            Class::Small => SMALL_PER_SLAB,
            Class::Cluster => CLUSTERS_PER_SLAB,
            Class::Jumbo => JUMBOS_PER_SLAB,
            Class::Jum256 => JUM256S_PER_SLAB,
            Class::Rec => RECS_PER_SLAB,
        }
    }
    /// Buffers moved between a thread cache and the global list at once.
    #[inline]
    const fn batch(self) -> usize {
        match self {
            Class::Jumbo | Class::Jum256 => LARGE_BATCH,
            Class::Small | Class::Cluster | Class::Rec => BATCH,
        }
    }
    /// Free buffers a thread cache holds before it gives [`Class::batch`] back.
    #[inline]
    const fn cache_high(self) -> usize {
        match self {
            Class::Jumbo | Class::Jum256 => LARGE_CACHE_HIGH,
            Class::Small | Class::Cluster | Class::Rec => CACHE_HIGH,
        }
    }
    #[inline]
    const fn from_u8(c: u8) -> Class {
        match c {
            0 => Class::Small,
            1 => Class::Cluster,
            2 => Class::Jumbo,
            3 => Class::Jum256,
            _ => Class::Rec,
        }
    }
    /// The smallest class that holds `len` bytes (the largest for more).
    #[inline]
    pub(crate) const fn for_len(len: usize) -> Class {
        if len <= MLEN {
            Class::Small
        } else if len <= MCLBYTES {
            Class::Cluster
        } else if len <= MJUMBYTES {
            Class::Jumbo
        } else {
            Class::Jum256
        }
    }
}

/// A free buffer, owned by whichever free list holds it.
struct FreePtr(NonNull<BufHdr>);

// SAFETY: a free buffer has no owner but the list holding it and no thread-affine
// state; handing it to another thread's list moves that sole ownership.
unsafe impl Send for FreePtr {}

/// One slab allocation, kept until [`reclaim`] finds all its buffers free.
struct Slab {
    base: NonNull<u8>,
    layout: Layout,
    class: Class,
    /// Buffers carved from it (fewer than [`Class::per_slab`] at the limit).
    n: usize,
}

impl Slab {
    /// The addresses its buffers' headers lie in.
    fn range(&self) -> std::ops::Range<usize> {
        let lo = self.base.as_ptr() as usize;
        lo..lo + self.n * self.class.stride()
    }
}

// SAFETY: the slab record is dereferenced only by `release_free_slabs`, under the
// global lock; the buffers inside are handed out through `FreePtr`/`Buf`.
unsafe impl Send for Slab {}

struct Global {
    free: [Vec<FreePtr>; CLASSES],
    total: [usize; CLASSES],
    slabs: Vec<Slab>,
    cluster_limit: usize,
}

static GLOBAL: Mutex<Global> = Mutex::new(Global {
    free: [Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new()],
    total: [0, 0, 0, 0, 0],
    slabs: Vec::new(),
    cluster_limit: DEFAULT_CLUSTER_LIMIT,
});
static ALLOC_FAIL: AtomicU64 = AtomicU64::new(0);

fn global() -> MutexGuard<'static, Global> {
    // The lists stay consistent even if a holder panicked (pushes and pops only).
    GLOBAL.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Global {
    fn limit(&self, class: Class) -> usize {
        match class {
            Class::Small => self.cluster_limit.saturating_mul(SMALL_PER_CLUSTER_LIMIT),
            Class::Cluster => self.cluster_limit,
            Class::Jumbo => self.cluster_limit / CLUSTERS_PER_JUMBO_LIMIT,
            Class::Jum256 => self.cluster_limit / CLUSTERS_PER_JUM256_LIMIT,
            Class::Rec => self.cluster_limit.saturating_mul(RECS_PER_CLUSTER_LIMIT),
        }
    }

    /// Adds one slab of `class` buffers to the free list; false at the limit or
    /// if the heap refuses.
    fn grow(&mut self, class: Class) -> bool {
        let c = class as usize;
        let n = class
            .per_slab()
            .min(self.limit(class).saturating_sub(self.total[c]));
        if n == 0 {
            return false;
        }
        let Ok(layout) = Layout::from_size_align(n * class.stride(), SLAB_ALIGN) else {
            return false;
        };
        // SAFETY: `layout` has a non-zero size (n >= 1, stride >= 128).
        let base = unsafe { alloc::alloc_zeroed(layout) };
        let Some(base) = NonNull::new(base) else {
            return false;
        };
        let want = self.total[c] + n;
        let list = &mut self.free[c];
        if list.capacity() < want {
            // Room for every buffer of the class, so that gives never reallocate.
            list.reserve_exact(want - list.len());
        }
        for i in 0..n {
            // SAFETY: i * stride + HDR <= n * stride, inside the allocation; the
            // offset is a multiple of 16, so the header is aligned.
            let hdr = unsafe { base.as_ptr().add(i * class.stride()) }.cast::<BufHdr>();
            // SAFETY: `hdr` is valid for writes and aligned (above); nobody else
            // can see this fresh memory yet.
            unsafe {
                ptr::write(
                    hdr,
                    BufHdr {
                        refcnt: AtomicU32::new(0),
                        cap: class.cap() as u32,
                        class: class as u8,
                        _reserved: [0; 7],
                    },
                );
            }
            // SAFETY: derived from a non-null slab pointer plus an in-bounds offset.
            list.push(FreePtr(unsafe { NonNull::new_unchecked(hdr) }));
        }
        self.total[c] = want;
        self.slabs.push(Slab {
            base,
            layout,
            class,
            n,
        });
        true
    }

    /// Frees every slab whose buffers are all on the global free list, taking them
    /// off it; the bytes given back. Sorts the free lists and the slabs by address
    /// (a few milliseconds for a full pool), so it is for [`reclaim`] only.
    fn release_free_slabs(&mut self) -> usize {
        let mut freed = 0;
        self.slabs
            .sort_unstable_by_key(|s| (s.class as u8, s.base.as_ptr() as usize));
        let mut gone = vec![false; self.slabs.len()];
        for c in 0..CLASSES {
            let list = &mut self.free[c];
            if list.is_empty() {
                continue;
            }
            list.sort_unstable_by_key(|p| p.0.as_ptr() as usize);
            // Slabs of this class, by address; the free buffers in each.
            let mut whole = Vec::new();
            let mut i = 0;
            for (k, slab) in self.slabs.iter().enumerate() {
                if slab.class as usize != c {
                    continue;
                }
                let r = slab.range();
                while i < list.len() && (list[i].0.as_ptr() as usize) < r.start {
                    i += 1;
                }
                let first = i;
                while i < list.len() && r.contains(&(list[i].0.as_ptr() as usize)) {
                    i += 1;
                }
                // A buffer is on one list at most once, so n of them in its range
                // are all of its buffers.
                if i - first == slab.n {
                    whole.push(r);
                    gone[k] = true;
                }
            }
            if whole.is_empty() {
                continue;
            }
            // Both sorted by address: one pass drops the whole slabs' buffers.
            let mut w = whole.iter().peekable();
            list.retain(|p| {
                let a = p.0.as_ptr() as usize;
                while w.peek().is_some_and(|r| r.end <= a) {
                    w.next();
                }
                !w.peek().is_some_and(|r| r.contains(&a))
            });
        }
        let mut k = 0;
        self.slabs.retain(|slab| {
            let keep = !gone[k];
            k += 1;
            if !keep {
                self.total[slab.class as usize] -= slab.n;
                freed += slab.layout.size();
                // SAFETY: every buffer of the slab was on the global free list (all
                // `n` of them, counted above) and has been taken off it, so no
                // `Buf`, record, cache or list refers into it any more; `base` and
                // `layout` are what `grow` allocated it with.
                unsafe { alloc::dealloc(slab.base.as_ptr(), slab.layout) };
            }
            keep
        });
        freed
    }
}

/// A thread's free buffers, per class.
struct Cache {
    free: [Vec<FreePtr>; CLASSES],
}

impl Drop for Cache {
    fn drop(&mut self) {
        let mut g = global();
        for c in 0..CLASSES {
            g.free[c].append(&mut self.free[c]);
        }
    }
}

thread_local! {
    static CACHE: RefCell<Cache> = const {
        RefCell::new(Cache { free: [Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new()] })
    };
}

/// Bumped by [`reclaim`]: a thread whose [`SEEN`] differs gives its cache back at
/// its next [`reclaim_if_asked`].
static RECLAIM: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The last [`RECLAIM`] this thread answered.
    static SEEN: Cell<u64> = const { Cell::new(0) };
}

/// Gives memory back to the heap: the calling thread's cache goes back to the
/// global list, every slab whose buffers are all free there is freed, and every
/// other thread is asked to give its cache back at its next [`reclaim_if_asked`]
/// (which frees the slabs that then become whole). Returns the bytes freed now.
///
/// Costs a sort of the free lists under the global lock (milliseconds for a full
/// pool): call it after a bulk of frees (a crowd of connections gone), not per
/// packet. Follow it with the C library's trim (`dev::heap::trim`) to return the
/// freed slabs' pages to the system where the allocator keeps them.
pub fn reclaim() -> usize {
    let now = RECLAIM.fetch_add(1, Ordering::Relaxed) + 1;
    let _ = SEEN.try_with(|s| s.set(now));
    give_back_cache()
}

/// Where a thread goes idle (before it sleeps or parks): if [`reclaim`] has been
/// called since this thread last answered, gives its cache back and frees the slabs
/// that made whole, returning the bytes freed. Otherwise one atomic load and a
/// thread-local read.
#[inline]
pub fn reclaim_if_asked() -> usize {
    let now = RECLAIM.load(Ordering::Relaxed);
    match SEEN.try_with(|s| s.replace(now)) {
        Ok(seen) if seen != now => give_back_cache(),
        _ => 0,
    }
}

/// The calling thread's cache back to the global list, then the whole slabs freed.
fn give_back_cache() -> usize {
    let mut g = global();
    let _ = CACHE.try_with(|cache| {
        let mut cache = cache.borrow_mut();
        for c in 0..CLASSES {
            g.free[c].append(&mut cache.free[c]);
        }
    });
    g.release_free_slabs()
}

/// Takes up to [`Class::batch`] buffers from the global list into `local`, growing
/// the pool if the global list is empty.
fn refill(local: &mut Vec<FreePtr>, class: Class) -> bool {
    if local.capacity() < class.cache_high() {
        local.reserve_exact(class.cache_high());
    }
    let mut g = global();
    let c = class as usize;
    if g.free[c].is_empty() && !g.grow(class) {
        return false;
    }
    let list = &mut g.free[c];
    let at = list.len().saturating_sub(class.batch());
    local.extend(list.drain(at..));
    true
}

#[inline]
fn take(class: Class) -> Option<FreePtr> {
    let from_cache = CACHE.try_with(|cache| {
        let mut cache = cache.borrow_mut();
        let local = &mut cache.free[class as usize];
        if local.is_empty() && !refill(local, class) {
            return None;
        }
        local.pop()
    });
    match from_cache {
        Ok(p) => p,
        // The thread is exiting and its cache is gone: go to the global list.
        Err(_) => {
            let mut g = global();
            let c = class as usize;
            if g.free[c].is_empty() && !g.grow(class) {
                return None;
            }
            g.free[c].pop()
        }
    }
}

/// A free buffer of `class` onto `local`, a thread cache's list of that class,
/// [`Class::batch`] of them to the global list when it reaches
/// [`Class::cache_high`].
#[inline]
fn put(local: &mut Vec<FreePtr>, p: FreePtr, class: Class) {
    local.push(p);
    if local.len() >= class.cache_high() {
        let at = local.len() - class.batch();
        global().free[class as usize].extend(local.drain(at..));
    }
}

#[inline]
fn give(p: FreePtr, class: Class) {
    let mut p = Some(p);
    let _ = CACHE.try_with(|cache| {
        if let Some(p) = p.take() {
            put(&mut cache.borrow_mut().free[class as usize], p, class);
        }
    });
    if let Some(p) = p {
        global().free[class as usize].push(p);
    }
}

/// Which buffer a packet's bytes lie in ([`crate::Mbuf::last_buf`]), to tell
/// whether two packets share one: its address, through which nothing can be
/// reached. Meaningful while some packet holds the buffer (a freed buffer's
/// identity passes to the next holder of its memory).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufId(usize);

/// One counted reference to a pool buffer. Dropping the last reference returns
/// the buffer to the dropping thread's cache.
///
/// Invariant: while a `Buf` exists the buffer's count is >= 1 and counts it.
/// Bytes are written only through [`Buf::bytes_mut`], which requires the count to
/// be exactly 1 — then this handle is the only one, and `&mut self` excludes
/// every reader. Shared buffers are read-only (FreeBSD's `M_WRITABLE`).
pub(crate) struct Buf(NonNull<BufHdr>);

// SAFETY: the count is atomic; bytes are only written through a unique handle
// (count 1, `&mut self`), so handles on different threads only ever read.
unsafe impl Send for Buf {}
// SAFETY: `&Buf` allows reads of the bytes and atomic increments of the count only.
unsafe impl Sync for Buf {}

impl Buf {
    /// A fresh buffer of `class` with a count of 1, or `NoBufs` (counted) at the
    /// pool limit.
    #[inline]
    pub(crate) fn alloc(class: Class) -> Result<Buf, NoBufs> {
        match take(class) {
            Some(FreePtr(p)) => {
                // SAFETY: `p` points to an initialised header inside a live slab;
                // a free buffer is referenced by no `Buf`, so we are alone here.
                unsafe { (*p.as_ptr()).refcnt.store(1, Ordering::Relaxed) };
                Ok(Buf(p))
            }
            None => {
                ALLOC_FAIL.fetch_add(1, Ordering::Relaxed);
                Err(NoBufs)
            }
        }
    }

    #[inline]
    fn hdr(&self) -> &BufHdr {
        // SAFETY: by the type invariant the buffer is live (count >= 1) and its
        // header initialised; `cap` is immutable and `refcnt` atomic, so a shared
        // reference is sound while other handles touch the count.
        unsafe { self.0.as_ref() }
    }

    pub(crate) fn cap(&self) -> usize {
        self.hdr().cap as usize
    }

    #[inline]
    pub(crate) fn class(&self) -> Class {
        Class::from_u8(self.hdr().class)
    }

    /// Whether `other` is a reference to the same buffer.
    #[inline]
    pub(crate) fn same_as(&self, other: &Buf) -> bool {
        self.0 == other.0
    }

    /// The buffer's identity.
    #[inline]
    pub(crate) fn id(&self) -> BufId {
        BufId(self.0.as_ptr() as usize)
    }

    /// True if this is the only reference, i.e. the bytes may be written.
    #[inline]
    pub(crate) fn is_unique(&self) -> bool {
        // Acquire pairs with the Release decrement of the other holders, so their
        // reads happen before our writes.
        self.hdr().refcnt.load(Ordering::Acquire) == 1
    }

    #[inline]
    fn data(&self) -> *mut u8 {
        // SAFETY: the data area starts right after the header, inside the slab
        // allocation (HDR + cap <= stride).
        unsafe { self.0.as_ptr().cast::<u8>().add(HDR) }
    }

    /// Bytes `[off, off + len)` of the buffer.
    ///
    /// # Panics
    /// If the range is outside the buffer (a bug in this crate, never input).
    #[cfg(test)]
    pub(crate) fn bytes(&self, off: usize, len: usize) -> &[u8] {
        assert!(off <= self.cap() && len <= self.cap() - off);
        // SAFETY: in bounds (checked above); slab bytes are always initialised
        // (zeroed at creation); nobody writes them while this handle exists
        // unless through `bytes_mut` on *this* handle, which `&self` excludes.
        unsafe { std::slice::from_raw_parts(self.data().add(off), len) }
    }

    /// Bytes `[off, off + len)` for writing, or `None` if the buffer is shared.
    ///
    /// # Panics
    /// If the range is outside the buffer (a bug in this crate, never input).
    #[inline]
    pub(crate) fn bytes_mut(&mut self, off: usize, len: usize) -> Option<&mut [u8]> {
        assert!(off <= self.cap() && len <= self.cap() - off);
        if !self.is_unique() {
            return None;
        }
        // SAFETY: in bounds and initialised as in `bytes`; the count is 1, so this
        // handle is the only one and `&mut self` makes the borrow exclusive.
        Some(unsafe { std::slice::from_raw_parts_mut(self.data().add(off), len) })
    }
}

impl Buf {
    /// [`Buf::bytes`] without the bounds check.
    ///
    /// # Safety
    /// `off + len <= self.cap()`.
    #[inline]
    pub(crate) unsafe fn bytes_unchecked(&self, off: usize, len: usize) -> &[u8] {
        debug_assert!(off <= self.cap() && len <= self.cap() - off);
        // SAFETY: in bounds (the caller's contract); initialised and not written
        // meanwhile, as in `bytes`.
        unsafe { std::slice::from_raw_parts(self.data().add(off), len) }
    }

    /// [`Buf::bytes_mut`] without the bounds check.
    ///
    /// # Safety
    /// `off + len <= self.cap()`.
    #[inline]
    pub(crate) unsafe fn bytes_mut_unchecked(
        &mut self,
        off: usize,
        len: usize,
    ) -> Option<&mut [u8]> {
        debug_assert!(off <= self.cap() && len <= self.cap() - off);
        if !self.is_unique() {
            return None;
        }
        // SAFETY: in bounds (the caller's contract); the count is 1 and `&mut self`
        // makes the borrow exclusive, as in `bytes_mut`.
        Some(unsafe { std::slice::from_raw_parts_mut(self.data().add(off), len) })
    }
}

impl Buf {
    /// The bytes `[off, off + len)`, writable, with neither check.
    ///
    /// # Safety
    /// `off + len <= self.cap()`, and the caller saw `is_unique()` true while
    /// holding `&mut self` (so no other handle can have been made since: making one
    /// takes this one).
    #[inline]
    pub(crate) unsafe fn bytes_mut_assume_unique(&mut self, off: usize, len: usize) -> &mut [u8] {
        debug_assert!(self.is_unique() && off <= self.cap() && len <= self.cap() - off);
        // SAFETY: in bounds and unique (the caller's contract); `&mut self` makes the
        // borrow exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.data().add(off), len) }
    }
}

impl Buf {
    /// The bytes `[off, off + len)`, writable, in a buffer that may be shared.
    ///
    /// # Safety
    /// `off + len <= self.cap()`, and no other handle's window covers or can come
    /// to cover these bytes while the returned slice lives: every other holder
    /// keeps to bytes before `off` (the contract of [`crate::FillBuf`]).
    #[inline]
    pub(crate) unsafe fn bytes_mut_beyond_windows(&mut self, off: usize, len: usize) -> &mut [u8] {
        assert!(off <= self.cap() && len <= self.cap() - off);
        // SAFETY: in bounds (checked above); no other handle reads or writes these
        // bytes (the caller's contract), and `&mut self` excludes this handle's
        // other uses, so the slice is the only access to them.
        unsafe { std::slice::from_raw_parts_mut(self.data().add(off), len) }
    }
}

impl Clone for Buf {
    fn clone(&self) -> Buf {
        // Relaxed, as `Arc::clone`: a new reference is made from an existing one.
        let old = self.hdr().refcnt.fetch_add(1, Ordering::Relaxed);
        if old > MAX_REFS {
            std::process::abort();
        }
        Buf(self.0)
    }
}

impl Buf {
    /// Takes `k` more references to the buffer with one atomic add, for `k` handles
    /// made later by [`Buf::claim`] (a flood's copies: one add for all of them, where
    /// `k` clones make `k`). References not claimed go back with [`Buf::unref`].
    #[inline]
    pub(crate) fn add_refs(&self, k: u32) {
        // Relaxed, as in `clone`: the new references are made from an existing one.
        let old = self.hdr().refcnt.fetch_add(k, Ordering::Relaxed);
        if old > MAX_REFS || k > MAX_REFS {
            std::process::abort();
        }
    }

    /// A handle holding one of the references [`Buf::add_refs`] took.
    ///
    /// # Safety
    /// The caller took a reference with `add_refs` on this buffer that no handle
    /// holds yet, and hands each such reference to one handle only.
    #[inline]
    pub(crate) unsafe fn claim(&self) -> Buf {
        Buf(self.0)
    }

    /// Gives back `k` references that [`Buf::add_refs`] took and no handle claimed.
    ///
    /// # Safety
    /// At least `k` such references are unclaimed. Since `self` holds a reference
    /// of its own, the count stays at 1 or more: the buffer is never freed here.
    #[inline]
    pub(crate) unsafe fn unref(&self, k: u32) {
        // Release, as a handle's drop: nothing was read through these references,
        // but it costs nothing on this rare path to keep the drop's ordering.
        let old = self.hdr().refcnt.fetch_sub(k, Ordering::Release);
        debug_assert!(old > k, "unref below the caller's own reference");
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        // The only reference (FreeBSD's `mb_free_ext` tests the same before its
        // atomic): nobody else can take one, since that needs one, so no atomic
        // read-modify-write is needed. Acquire pairs with the Release decrements of
        // holders that let go earlier.
        if self.hdr().refcnt.load(Ordering::Acquire) != 1
            && self.hdr().refcnt.fetch_sub(1, Ordering::Release) != 1
        {
            return;
        }
        // Pairs with the Release decrements of the other holders: their accesses
        // happen before the buffer is recycled.
        fence(Ordering::Acquire);
        let class = self.class();
        give(FreePtr(self.0), class);
    }
}

impl Buf {
    /// Lets go of this handle's reference as its drop does, but gives a buffer whose
    /// last reference this was to the caller instead of to the thread's cache, so
    /// that a packet's drop gives back its record and its buffers under one borrow
    /// of the cache ([`free_rec_with`]).
    #[inline]
    pub(crate) fn release(self) -> Option<Freed> {
        let p = self.0;
        // As in `drop`: no atomic read-modify-write for the only reference.
        let last = self.hdr().refcnt.load(Ordering::Acquire) == 1
            || self.hdr().refcnt.fetch_sub(1, Ordering::Release) == 1;
        std::mem::forget(self);
        if !last {
            return None;
        }
        // As in `drop`: the other holders' accesses happen before the reuse.
        fence(Ordering::Acquire);
        // SAFETY: the last reference is gone, so nobody else reads the header.
        let class = Class::from_u8(unsafe { p.as_ref() }.class);
        Some(Freed(FreePtr(p), class))
    }
}

/// A buffer whose last reference went ([`Buf::release`]), not yet back in a cache.
pub(crate) struct Freed(FreePtr, Class);

/// Gives back record `p` and the buffers in `freed` under one borrow of the
/// thread's cache: a packet's drop.
///
/// # Safety
/// `p` came from [`alloc_rec`], is not used again, and whatever value it held has
/// been dropped.
#[inline]
pub(crate) unsafe fn free_rec_with(p: NonNull<u8>, freed: &mut [Option<Freed>]) {
    let mut rec = Some(rec_slot(p));
    let _ = CACHE.try_with(|cache| {
        let mut cache = cache.borrow_mut();
        for f in freed.iter_mut() {
            if let Some(Freed(b, class)) = f.take() {
                put(&mut cache.free[class as usize], b, class);
            }
        }
        if let Some(r) = rec.take() {
            put(&mut cache.free[Class::Rec as usize], r, Class::Rec);
        }
    });
    // The thread's cache is gone (its exit): the global list.
    for Freed(b, class) in freed.iter_mut().filter_map(Option::take) {
        give(b, class);
    }
    if let Some(r) = rec {
        give(r, Class::Rec);
    }
}

impl std::fmt::Debug for Buf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buf")
            .field("cap", &self.cap())
            .field("refcnt", &self.hdr().refcnt.load(Ordering::Relaxed))
            .finish()
    }
}

/// A packet record (a packet handle's header and segment list): [`REC_CAP`]
/// bytes, aligned to 16, from the thread's cache; `NoBufs` (counted) at the limit.
/// The bytes hold whatever the last record left: the caller writes a whole value
/// before reading any.
#[inline]
pub(crate) fn alloc_rec() -> Result<NonNull<u8>, NoBufs> {
    match take(Class::Rec) {
        // The record is the whole slot, from its start (REC_CAP == REC_STRIDE).
        Some(FreePtr(p)) => Ok(p.cast::<u8>()),
        None => {
            ALLOC_FAIL.fetch_add(1, Ordering::Relaxed);
            Err(NoBufs)
        }
    }
}

/// Returns a record from [`alloc_rec`] to the thread's cache (the tests'; a
/// packet's drop gives its record back with its buffers, [`free_rec_with`]).
///
/// # Safety
/// `p` came from [`alloc_rec`], is not used again, and whatever value it held has
/// been dropped.
#[cfg(test)]
pub(crate) unsafe fn free_rec(p: NonNull<u8>) {
    give(rec_slot(p), Class::Rec);
}

/// The free-list entry of record `p` from [`alloc_rec`]: its slot, which starts
/// where the record does.
#[inline]
fn rec_slot(p: NonNull<u8>) -> FreePtr {
    FreePtr(p.cast::<BufHdr>())
}

/// Pool-wide counters (global, not per thread).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Clusters carved from the slabs the pool holds (those [`reclaim`] freed no
    /// longer count).
    pub clusters_total: u64,
    /// Clusters on the global free list (not counting thread caches).
    pub clusters_free_global: u64,
    /// Small buffers carved from the slabs held.
    pub small_total: u64,
    /// Small buffers on the global free list (not counting thread caches).
    pub small_free_global: u64,
    /// Jumbo clusters carved from the slabs held.
    pub jumbo_total: u64,
    /// 256 KiB clusters carved from the slabs held.
    pub jum256_total: u64,
    /// Packet records carved from the slabs held.
    pub rec_total: u64,
    /// Allocations refused at the limit (or by the heap): ENOBUFS.
    pub alloc_fail: u64,
    /// Slabs held (allocated from the heap and not yet freed by [`reclaim`]).
    pub slabs: u64,
    /// The cluster limit in force (small buffers: 16× this).
    pub cluster_limit: u64,
}

/// A snapshot of the pool counters.
pub fn stats() -> PoolStats {
    let g = global();
    PoolStats {
        clusters_total: g.total[Class::Cluster as usize] as u64,
        clusters_free_global: g.free[Class::Cluster as usize].len() as u64,
        small_total: g.total[Class::Small as usize] as u64,
        small_free_global: g.free[Class::Small as usize].len() as u64,
        jumbo_total: g.total[Class::Jumbo as usize] as u64,
        jum256_total: g.total[Class::Jum256 as usize] as u64,
        rec_total: g.total[Class::Rec as usize] as u64,
        alloc_fail: ALLOC_FAIL.load(Ordering::Relaxed),
        slabs: g.slabs.len() as u64,
        cluster_limit: g.cluster_limit as u64,
    }
}

/// Whether at most half of the buffers the limit allows of the class that holds
/// `len` bytes after the default headroom (what
/// [`Mbuf::with_capacity`](crate::Mbuf::with_capacity) takes) are out of the global
/// free list (those in thread caches count as out, so the answer errs on the side
/// of no). Buffers that hold data for a long time rather than a packet in flight
/// (an application's writes waiting in a socket) are taken only then, so that they
/// cannot starve the receive path of buffers.
pub fn plenty_for(len: usize) -> bool {
    let class = Class::for_len(len.saturating_add(crate::DEFAULT_HEADROOM));
    let g = global();
    let c = class as usize;
    let out = g.total[c] - g.free[c].len();
    out < g.limit(class) / 2
}

/// Bounds the pool to `max_clusters` clusters (and 16× as many small buffers, and
/// jumbo clusters of the same bytes).
/// Allocation beyond the bound fails with [`NoBufs`] and counts in
/// [`PoolStats::alloc_fail`]. Lowering the limit below what is already carved
/// stops further growth; memory already carved is kept. Up to [`CACHE_HIGH`]
/// free buffers per class (fewer of the large ones) may sit in each thread's
/// cache, so a thread can see `NoBufs` while another thread's cache still holds
/// free buffers.
pub fn set_limit(max_clusters: usize) {
    global().cluster_limit = max_clusters;
}

/// Times buffer `id` is on a free list, the calling thread's cache or the global
/// list: 1 once its last reference went, 0 while it is held (tests).
#[cfg(test)]
pub(crate) fn times_free(id: BufId) -> usize {
    let is = |p: &FreePtr| p.0.as_ptr() as usize == id.0;
    let cached = CACHE.with(|c| c.borrow().free.iter().flatten().filter(|p| is(p)).count());
    cached + global().free.iter().flatten().filter(|p| is(p)).count()
}

/// Free buffers of each class in the calling thread's cache (tests).
#[cfg(test)]
pub(crate) fn cached() -> [usize; CLASSES] {
    CACHE.with(|c| c.borrow().free.each_ref().map(Vec::len))
}

#[cfg(test)]
impl Buf {
    /// The buffer's reference count.
    pub(crate) fn refs(&self) -> u32 {
        self.hdr().refcnt.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_is_unique_and_clone_shares() {
        let mut a = Buf::alloc(Class::Cluster).unwrap();
        assert_eq!(a.cap(), MCLBYTES);
        assert!(a.is_unique());
        a.bytes_mut(0, 4).unwrap().copy_from_slice(b"abcd");
        let mut b = a.clone();
        assert!(!a.is_unique() && !b.is_unique());
        assert!(b.bytes_mut(0, 1).is_none(), "shared buffers are read-only");
        assert_eq!(b.bytes(0, 4), b"abcd");
        drop(a);
        assert!(b.is_unique());
        assert!(b.bytes_mut(0, 1).is_some());
    }

    #[test]
    fn small_class_holds_mlen() {
        let s = Buf::alloc(Class::Small).unwrap();
        assert_eq!(s.cap(), MLEN);
        assert_eq!(s.class(), Class::Small);
        assert_eq!(s.bytes(MLEN, 0).len(), 0);
    }

    #[test]
    fn freed_buffers_are_reused_from_the_thread_cache() {
        let a = Buf::alloc(Class::Small).unwrap();
        let p = a.0;
        drop(a);
        let b = Buf::alloc(Class::Small).unwrap();
        assert_eq!(b.0, p, "LIFO thread cache hands back the buffer just freed");
    }

    #[test]
    fn many_buffers_cross_batches() {
        let n = if cfg!(miri) { 80 } else { 1000 };
        let v: Vec<Buf> = (0..n).map(|_| Buf::alloc(Class::Small).unwrap()).collect();
        let s = stats();
        assert!(s.small_total as usize >= n);
        drop(v);
    }

    #[test]
    fn reclaim_leaves_held_buffers_intact_and_allocation_goes_on() {
        // Other tests share the pool meanwhile: only what this test holds is
        // checked (under Miri, that no freed slab is touched again).
        let mut keep = Buf::alloc(Class::Cluster).unwrap();
        keep.bytes_mut(0, 4).unwrap().copy_from_slice(b"keep");
        let rec = alloc_rec().unwrap();
        let freed: Vec<Buf> = (0..2 * CLUSTERS_PER_SLAB)
            .map(|_| Buf::alloc(Class::Cluster).unwrap())
            .chain((0..JUMBOS_PER_SLAB).map(|_| Buf::alloc(Class::Jumbo).unwrap()))
            .collect();
        drop(freed);
        reclaim();
        assert_eq!(
            reclaim_if_asked(),
            0,
            "this thread answered its own reclaim"
        );
        assert_eq!(keep.bytes(0, 4), b"keep");
        // SAFETY: `rec` came from alloc_rec and holds no value.
        unsafe { free_rec(rec) };
        let mut again = Buf::alloc(Class::Cluster).unwrap();
        again.bytes_mut(0, 2).unwrap().copy_from_slice(b"ok");
        assert_eq!(again.bytes(0, 2), b"ok");
        let other = std::thread::spawn(|| {
            let b = Buf::alloc(Class::Small).unwrap();
            drop(b);
            reclaim_if_asked();
        });
        reclaim();
        other.join().unwrap();
    }

    #[test]
    fn buffers_freed_on_another_thread_join_that_threads_cache() {
        let mut a = Buf::alloc(Class::Cluster).unwrap();
        a.bytes_mut(0, 3).unwrap().copy_from_slice(b"xyz");
        let b = a.clone();
        let t = std::thread::spawn(move || {
            assert_eq!(b.bytes(0, 3), b"xyz");
            drop(b);
        });
        t.join().unwrap();
        assert!(a.is_unique());
        let h = std::thread::spawn(move || drop(a));
        h.join().unwrap();
    }

    #[test]
    #[should_panic]
    fn out_of_bounds_bytes_panics() {
        let s = Buf::alloc(Class::Small).unwrap();
        let _ = s.bytes(MLEN, 1);
    }
}
