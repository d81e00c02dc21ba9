//! Memory for large tables read at packet rate: backed by huge pages where the
//! kernel allows it.
//!
//! A lookup into a table of tens of megabytes (a million firewall states, a
//! million frames for a generator) misses the cache, and with 4 KiB pages it
//! misses the TLB too: the second-level TLB covers a few megabytes, so nearly every
//! lookup also walks the page tables. Linux's transparent huge pages back a region
//! with 2 MiB pages when asked (`madvise(MADV_HUGEPAGE)`; the default setting,
//! `madvise`, gives them to no one else), which makes those walks rare.
//!
//! [`HugeSlice`] maps its own memory for that (anonymous `mmap`, aligned to a huge
//! page), asks for huge pages, and only then writes it, so that the page faults
//! that fill it already take huge pages. Memory from the global allocator would
//! not do: glibc serves even large allocations from memory freed earlier, whose
//! pages were faulted in small. Elsewhere (another OS, a small table, Miri) it is
//! an ordinary boxed slice.

use std::ops::{Deref, DerefMut};

/// A huge page's size on x86-64 and arm64 Linux.
const HUGE: usize = 2 << 20;

/// Tables smaller than this are left on the heap (a few huge pages' worth is not
/// worth a mapping of its own).
const MIN_MAPPED: usize = 4 * HUGE;

/// A fixed-length slice in memory of its own, in huge pages when the kernel gives
/// them (see the module).
pub struct HugeSlice<T> {
    store: Store<T>,
}

enum Store<T> {
    Heap(Box<[T]>),
    #[cfg(all(target_os = "linux", not(miri)))]
    Mapped {
        /// The first element (the mapping's first huge-page boundary).
        ptr: std::ptr::NonNull<T>,
        len: usize,
        /// The whole mapping, for `munmap`.
        base: *mut libc::c_void,
        map_len: usize,
    },
}

// SAFETY: a `HugeSlice<T>` owns its elements as a `Box<[T]>` does (the mapping is
// private to it and freed once, in `drop`), so it may cross threads when `T` may.
unsafe impl<T: Send> Send for HugeSlice<T> {}
// SAFETY: `&HugeSlice<T>` only gives `&[T]`.
unsafe impl<T: Sync> Sync for HugeSlice<T> {}

impl<T> HugeSlice<T> {
    /// `len` elements, element `i` made by `f(i)`, in huge pages when large.
    pub fn new(len: usize, mut f: impl FnMut(usize) -> T) -> HugeSlice<T> {
        #[cfg(all(target_os = "linux", not(miri)))]
        if let Some(bytes) = len.checked_mul(size_of::<T>()) {
            if bytes >= MIN_MAPPED && align_of::<T>() <= HUGE {
                if let Some(s) = Self::mapped(len, bytes, &mut f) {
                    return s;
                }
            }
        }
        HugeSlice {
            store: Store::Heap((0..len).map(f).collect()),
        }
    }

    /// A copy of `v`.
    pub fn from_slice(v: &[T]) -> HugeSlice<T>
    where
        T: Copy,
    {
        HugeSlice::new(v.len(), |i| v[i])
    }

    #[cfg(all(target_os = "linux", not(miri)))]
    fn mapped(len: usize, bytes: usize, f: &mut impl FnMut(usize) -> T) -> Option<HugeSlice<T>> {
        let map_len = bytes.checked_add(HUGE)?;
        // SAFETY: a fresh private anonymous mapping: no address is given, so it
        // overlaps nothing the program holds.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return None;
        }
        let start = (base as usize).next_multiple_of(HUGE);
        // SAFETY: `[start, start + bytes)` lies inside the mapping just made
        // (`start - base < HUGE`, and the mapping is `bytes + HUGE` long);
        // MADV_HUGEPAGE changes no contents, it only asks for huge pages. A failure
        // (huge pages off) leaves small pages, which work the same.
        unsafe {
            libc::madvise(start as *mut libc::c_void, bytes, libc::MADV_HUGEPAGE);
        }
        let ptr = start as *mut T;
        for i in 0..len {
            // SAFETY: element `i` lies inside the mapping (above), is aligned (a
            // huge-page boundary is aligned for any `T` whose alignment is at most
            // that, checked by the caller, and `size_of::<T>()` is a multiple of
            // its alignment), and is written once, before anything reads it.
            unsafe { ptr.add(i).write(f(i)) };
        }
        Some(HugeSlice {
            store: Store::Mapped {
                ptr: std::ptr::NonNull::new(ptr)?,
                len,
                base,
                map_len,
            },
        })
    }

    /// Whether the elements sit in a mapping of their own (else on the heap).
    pub fn is_mapped(&self) -> bool {
        !matches!(self.store, Store::Heap(_))
    }
}

/// Asks for the cache line of `x` to be brought into the caches (x86-64's
/// `prefetcht0`; nothing elsewhere). Unlike a load it holds no place in the core's
/// window until the line arrives, so a loop of them puts every miss of a vector in
/// flight at once (VPP's prefetch ahead): a table lookup issues it for its slot
/// before it reads the slot.
#[inline(always)]
pub fn prefetch<T>(x: &T) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: a prefetch is a hint: it reads nothing into the program and faults
    // on no address; `x` is a live reference anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (x as *const T).cast(),
        )
    };
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = x;
}

impl<T> Deref for HugeSlice<T> {
    type Target = [T];

    #[inline]
    fn deref(&self) -> &[T] {
        match &self.store {
            Store::Heap(b) => b,
            #[cfg(all(target_os = "linux", not(miri)))]
            // SAFETY: `len` elements, all written in `mapped`, live until `drop`;
            // `&self` keeps them from being changed through `deref_mut` meanwhile.
            Store::Mapped { ptr, len, .. } => unsafe {
                std::slice::from_raw_parts(ptr.as_ptr(), *len)
            },
        }
    }
}

impl<T> DerefMut for HugeSlice<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.store {
            Store::Heap(b) => b,
            #[cfg(all(target_os = "linux", not(miri)))]
            // SAFETY: as in `deref`, and `&mut self` makes this the only view.
            Store::Mapped { ptr, len, .. } => unsafe {
                std::slice::from_raw_parts_mut(ptr.as_ptr(), *len)
            },
        }
    }
}

impl<T> Drop for HugeSlice<T> {
    fn drop(&mut self) {
        #[cfg(all(target_os = "linux", not(miri)))]
        if let Store::Mapped {
            ptr,
            len,
            base,
            map_len,
        } = self.store
        {
            // SAFETY: the elements were all written and are dropped once, here;
            // then the mapping, made in `mapped` and unmapped nowhere else, goes.
            // Nothing refers to them any more (`&mut self`).
            unsafe {
                std::ptr::drop_in_place(std::ptr::slice_from_raw_parts_mut(ptr.as_ptr(), len));
                libc::munmap(base, map_len);
            }
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for HugeSlice<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HugeSlice")
            .field("len", &self.len())
            .field("mapped", &self.is_mapped())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_large_slice_is_mapped_and_a_small_one_is_not() {
        // Miri runs the heap path, slowly.
        let n = if cfg!(miri) { 20_000 } else { 3 << 20 };
        let mut v = HugeSlice::new(n, |i| i as u64 * 3);
        assert_eq!(v.len(), n);
        assert_eq!(v[12345], 12345 * 3);
        v[7] = 1;
        assert_eq!(v[7], 1);
        assert_eq!(v.is_mapped(), cfg!(all(target_os = "linux", not(miri))));
        let small = HugeSlice::from_slice(&[1u8, 2, 3]);
        assert_eq!(&small[..], &[1, 2, 3]);
        assert!(!small.is_mapped());
        assert!(HugeSlice::<u32>::new(0, |_| 0).is_empty());
    }

    #[test]
    fn every_element_is_dropped_once() {
        static DROPS: AtomicUsize = AtomicUsize::new(0);
        struct D(#[allow(dead_code)] [u64; 4]);
        impl Drop for D {
            fn drop(&mut self) {
                DROPS.fetch_add(1, Ordering::Relaxed);
            }
        }
        // Miri runs the heap path; the mapped one needs 8 MiB.
        let n = if cfg!(miri) { 100 } else { 300_000 };
        drop(HugeSlice::new(n, |i| D([i as u64; 4])));
        assert_eq!(DROPS.load(Ordering::Relaxed), n);
    }
}
