//! Memory for large tables read at packet rate: backed by huge pages where the
//! kernel allows it.
//!
//! A lookup into a table of tens of megabytes (a million firewall states, a
//! full-table FIB) misses the cache, and with 4 KiB pages it misses the TLB too:
//! the second-level TLB covers a few megabytes, so nearly every lookup also walks
//! the page tables. Linux's transparent huge pages back a region with 2 MiB pages
//! when asked (`madvise(MADV_HUGEPAGE)`; the default setting, `madvise`, gives them
//! to no one else), which makes those walks rare. [`huge_vec`] asks before the
//! memory is first touched, so that the page faults that fill it already take huge
//! pages. Elsewhere (another OS, huge pages off, Miri) it is `Vec::with_capacity`.

/// A huge page's size on x86-64 and arm64 Linux.
const HUGE: usize = 2 << 20;

/// Regions smaller than this are left alone (a few huge pages' worth of table
/// is not worth the rounding).
const MIN_ADVISE: usize = 4 * HUGE;

/// An empty vector with room for `cap` elements whose storage the kernel is asked
/// to back with huge pages (the whole 2 MiB pages inside it). Fill it before
/// anything else touches it: pages already faulted in stay small.
pub fn huge_vec<T>(cap: usize) -> Vec<T> {
    let v: Vec<T> = Vec::with_capacity(cap);
    let bytes = v.capacity().saturating_mul(size_of::<T>());
    if bytes >= MIN_ADVISE {
        advise_huge(v.as_ptr() as usize, bytes);
    }
    v
}

/// `madvise(MADV_HUGEPAGE)` over the whole huge pages of `[addr, addr + len)`.
/// A failure (huge pages disabled, an old kernel) changes nothing, so it is ignored.
#[allow(unused_variables)]
fn advise_huge(addr: usize, len: usize) {
    let start = addr.next_multiple_of(HUGE);
    let end = (addr + len) / HUGE * HUGE;
    if end <= start {
        return;
    }
    #[cfg(all(target_os = "linux", not(miri)))]
    // SAFETY: `[start, end)` lies inside one live allocation that the caller's
    // vector owns (its capacity, rounded inwards to whole huge pages), and
    // MADV_HUGEPAGE changes neither the mapping nor its contents: it only tells
    // the kernel which page size to back the range with. No Rust reference is
    // created to the memory.
    unsafe {
        libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_vector_is_an_ordinary_vector() {
        let mut v = huge_vec::<u64>(3 << 20);
        assert!(v.capacity() >= 3 << 20);
        v.extend((0..3u64 << 20).map(|i| i * 3));
        assert_eq!(v[12345], 12345 * 3);
        let small = huge_vec::<u8>(10);
        assert!(small.capacity() >= 10 && small.is_empty());
        let none = huge_vec::<u32>(0);
        assert!(none.is_empty());
    }
}
