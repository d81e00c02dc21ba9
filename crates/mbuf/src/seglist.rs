//! The segment list of a packet: up to [`INLINE`] segments stored inline (no
//! heap allocation, which covers almost every packet: devget makes at most two,
//! a prepend adds one), spilling to a `Vec` beyond.

use std::mem::MaybeUninit;

use crate::pool::{Buf, Freed};

/// Segments held without a heap allocation.
pub(crate) const INLINE: usize = 4;

/// A window `[off, off + len)` into a buffer, holding one reference to it.
///
/// Invariant: `off + len <= buf.cap()`, asserted by every method that moves the
/// window's end ([`Seg::new`], [`Seg::set_len`], [`Seg::set_window`]); the others
/// keep the end where it is. Nothing replaces `buf` but `Seg::new`. So [`Seg::data`]
/// reads the window without looking at the buffer's header (its capacity) again,
/// which keeps the header's cache line out of a packet's read path.
#[derive(Clone, Debug)]
pub(crate) struct Seg {
    pub(crate) buf: Buf,
    off: u32,
    len: u32,
}

impl Seg {
    #[inline]
    pub(crate) fn new(buf: Buf, off: usize, len: usize) -> Seg {
        assert!(off <= buf.cap() && len <= buf.cap() - off);
        Seg {
            buf,
            off: off as u32,
            len: len as u32,
        }
    }
    #[inline]
    pub(crate) fn off(&self) -> usize {
        self.off as usize
    }
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }
    #[inline]
    pub(crate) fn end(&self) -> usize {
        self.off() + self.len()
    }
    #[inline]
    pub(crate) fn set_len(&mut self, len: usize) {
        assert!(len <= self.buf.cap() - self.off());
        self.len = len as u32;
    }
    /// Moves the window to `[off, off + len)` of the buffer.
    #[inline]
    pub(crate) fn set_window(&mut self, off: usize, len: usize) {
        assert!(off <= self.buf.cap() && len <= self.buf.cap() - off);
        self.off = off as u32;
        self.len = len as u32;
    }
    /// Drops `n` bytes from the front of the window.
    #[inline]
    pub(crate) fn trim_front(&mut self, n: usize) {
        assert!(n <= self.len());
        self.off += n as u32;
        self.len -= n as u32;
    }
    /// Grows the window `n` bytes to the front (into headroom).
    #[inline]
    pub(crate) fn grow_front(&mut self, n: usize) {
        assert!(n <= self.off());
        self.off -= n as u32;
        self.len += n as u32;
    }
    #[inline]
    pub(crate) fn data(&self) -> &[u8] {
        // SAFETY: `off + len <= cap` (the type's invariant).
        unsafe { self.buf.bytes_unchecked(self.off(), self.len()) }
    }
    /// `[from, from + len)` of the window, writable; `None` if the buffer is shared.
    #[inline]
    pub(crate) fn data_mut(&mut self, from: usize, len: usize) -> Option<&mut [u8]> {
        assert!(from <= self.len() && len <= self.len() - from);
        let off = self.off();
        // SAFETY: inside the window (checked above), so inside the buffer (the
        // type's invariant).
        unsafe { self.buf.bytes_mut_unchecked(off + from, len) }
    }
    /// The whole window, writable, when the caller has just seen the buffer
    /// unshared (`buf.is_unique()`) through `&mut self`.
    ///
    /// # Safety
    /// `self.buf.is_unique()` was true, and `self` has been held by `&mut` since.
    #[inline]
    pub(crate) unsafe fn data_mut_unique(&mut self) -> &mut [u8] {
        let (off, len) = (self.off(), self.len());
        // SAFETY: the window is inside the buffer (the type's invariant), and the
        // buffer is unshared (the caller's contract).
        unsafe { self.buf.bytes_mut_assume_unique(off, len) }
    }
    /// Usable space before the data: 0 if the buffer is shared (M_LEADINGSPACE).
    #[inline]
    pub(crate) fn headroom(&self) -> usize {
        if self.buf.is_unique() {
            self.off()
        } else {
            0
        }
    }
    /// Usable space after the data: 0 if the buffer is shared (M_TRAILINGSPACE).
    #[inline]
    pub(crate) fn tailroom(&self) -> usize {
        if self.buf.is_unique() {
            self.buf.cap() - self.end()
        } else {
            0
        }
    }
    /// A new segment for `[from, from + len)` of this one, sharing the buffer.
    #[inline]
    pub(crate) fn share(&self, from: usize, len: usize) -> Seg {
        debug_assert!(from + len <= self.len());
        Seg::new(self.buf.clone(), self.off() + from, len)
    }
    /// A segment over the same window, holding a reference that
    /// [`Buf::add_refs`] took on this segment's buffer.
    ///
    /// # Safety
    /// As [`Buf::claim`]: that reference is unclaimed, and given to this segment only.
    #[inline]
    pub(crate) unsafe fn claim_share(&self) -> Seg {
        Seg {
            // SAFETY: the caller's contract is `claim`'s.
            buf: unsafe { self.buf.claim() },
            off: self.off,
            len: self.len,
        }
    }
    /// Where byte `from` of this segment lies: its buffer and offset in it, for
    /// [`Seg::continued_by`] (no reference taken).
    #[inline]
    pub(crate) fn share_window(&self, from: usize) -> Window<'_> {
        Window {
            buf: &self.buf,
            off: self.off() + from,
        }
    }
    /// Whether `next` starts in this segment's buffer right where this window
    /// ends: the two windows are one run of the buffer's bytes, which one segment
    /// (holding one reference) may hold.
    #[inline]
    pub(crate) fn continued_by(&self, next: &Window<'_>) -> bool {
        self.buf.same_as(next.buf) && next.off == self.end()
    }
}

/// A place in a buffer: [`Seg::share_window`].
pub(crate) struct Window<'a> {
    buf: &'a Buf,
    off: usize,
}

impl Seg {
    /// This segment's start, as a [`Window`].
    #[inline]
    pub(crate) fn window(&self) -> Window<'_> {
        self.share_window(0)
    }
}

/// A small vector of segments.
pub(crate) enum SegList {
    /// The first `len` entries of `segs` are initialised.
    Inline {
        len: usize,
        segs: [MaybeUninit<Seg>; INLINE],
    },
    Heap(Vec<Seg>),
}

impl SegList {
    pub(crate) const fn new() -> SegList {
        SegList::Inline {
            len: 0,
            segs: [const { MaybeUninit::uninit() }; INLINE],
        }
    }

    #[inline]
    pub(crate) fn as_slice(&self) -> &[Seg] {
        match self {
            // SAFETY: the first `len` entries are initialised (type invariant) and
            // `MaybeUninit<Seg>` has the layout of `Seg`.
            SegList::Inline { len, segs } => unsafe {
                std::slice::from_raw_parts(segs.as_ptr().cast::<Seg>(), *len)
            },
            SegList::Heap(v) => v,
        }
    }

    #[inline]
    pub(crate) fn as_mut_slice(&mut self) -> &mut [Seg] {
        match self {
            // SAFETY: as in `as_slice`, and `&mut self` makes the borrow exclusive.
            SegList::Inline { len, segs } => unsafe {
                std::slice::from_raw_parts_mut(segs.as_mut_ptr().cast::<Seg>(), *len)
            },
            SegList::Heap(v) => v,
        }
    }

    /// For an inline list, the addresses where its initialised entries end and
    /// where its room for entries ends.
    #[inline]
    pub(crate) fn inline_ends(&self) -> Option<(usize, usize)> {
        match self {
            SegList::Inline { len, segs } => {
                let start = segs.as_ptr() as usize;
                let size = std::mem::size_of::<Seg>();
                Some((start + *len * size, start + INLINE * size))
            }
            SegList::Heap(_) => None,
        }
    }

    /// Whether the segments are held inline (no heap allocation).
    #[inline]
    pub(crate) fn is_inline(&self) -> bool {
        matches!(self, SegList::Inline { .. })
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        match self {
            SegList::Inline { len, .. } => *len,
            SegList::Heap(v) => v.len(),
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, seg: Seg) {
        match self {
            SegList::Inline { len, segs } if *len < INLINE => {
                segs[*len].write(seg);
                *len += 1;
            }
            SegList::Inline { len, segs } => {
                let n = std::mem::replace(len, 0);
                let mut v = Vec::with_capacity(2 * INLINE);
                for s in &segs[..n] {
                    // SAFETY: entries below `n` are initialised; `len` is already 0,
                    // so each is read (moved) out exactly once and never dropped here.
                    v.push(unsafe { s.assume_init_read() });
                }
                v.push(seg);
                *self = SegList::Heap(v);
            }
            SegList::Heap(v) => v.push(seg),
        }
    }

    #[inline]
    pub(crate) fn pop(&mut self) -> Option<Seg> {
        match self {
            SegList::Inline { len, segs } => {
                if *len == 0 {
                    return None;
                }
                *len -= 1;
                // SAFETY: entry `len` was initialised and is now outside the
                // initialised prefix, so it is moved out exactly once.
                Some(unsafe { segs[*len].assume_init_read() })
            }
            SegList::Heap(v) => v.pop(),
        }
    }

    pub(crate) fn insert(&mut self, at: usize, seg: Seg) {
        debug_assert!(at <= self.len());
        self.push(seg);
        self.as_mut_slice()[at..].rotate_right(1);
    }

    pub(crate) fn remove(&mut self, at: usize) -> Seg {
        self.as_mut_slice()[at..].rotate_left(1);
        match self.pop() {
            Some(s) => s,
            None => unreachable!("remove from an empty segment list"),
        }
    }

    pub(crate) fn truncate(&mut self, n: usize) {
        while self.len() > n {
            drop(self.pop());
        }
    }

    /// Moves segments `[at..]` into a new list.
    pub(crate) fn split_off(&mut self, at: usize) -> SegList {
        let mut rest = SegList::new();
        if let SegList::Heap(v) = self {
            if v.len() - at > INLINE {
                return SegList::Heap(v.split_off(at));
            }
        }
        let n = self.len() - at;
        self.as_mut_slice()[at..].reverse();
        for _ in 0..n {
            if let Some(s) = self.pop() {
                rest.push(s);
            }
        }
        rest
    }

    /// Moves all of `other`'s segments to the end of this list.
    pub(crate) fn append(&mut self, mut other: SegList) {
        other.as_mut_slice().reverse();
        while let Some(s) = other.pop() {
            self.push(s);
        }
    }

    #[inline]
    pub(crate) fn first(&self) -> Option<&Seg> {
        self.as_slice().first()
    }
    #[inline]
    pub(crate) fn first_mut(&mut self) -> Option<&mut Seg> {
        self.as_mut_slice().first_mut()
    }
    #[inline]
    pub(crate) fn last_mut(&mut self) -> Option<&mut Seg> {
        self.as_mut_slice().last_mut()
    }
}

impl SegList {
    /// A list of the same windows, each holding a reference that
    /// [`Buf::add_refs`] took on its buffer: for an inline list a bitwise copy of
    /// the entries, with no push and no count touched.
    ///
    /// # Safety
    /// As [`Seg::claim_share`], for every segment of the list.
    #[inline]
    pub(crate) unsafe fn claim_shares(&self) -> SegList {
        match self {
            SegList::Inline { len, segs } => SegList::Inline {
                len: *len,
                // SAFETY: a bitwise copy of the array: the first `len` entries are
                // initialised (type invariant) and each copy owns the unclaimed
                // reference the caller provides for it (`claim_share`'s contract,
                // which is all `claim_share` does beyond the copy); the rest stay
                // uninitialised, as `MaybeUninit` allows.
                segs: unsafe { std::ptr::read(segs) },
            },
            SegList::Heap(v) => SegList::Heap(
                v.iter()
                    // SAFETY: the caller's contract, for each segment once.
                    .map(|s| unsafe { s.claim_share() })
                    .collect(),
            ),
        }
    }
}

impl Clone for SegList {
    fn clone(&self) -> SegList {
        let mut l = SegList::new();
        if self.len() > INLINE {
            l = SegList::Heap(Vec::with_capacity(self.len()));
        }
        for s in self.as_slice() {
            l.push(s.clone());
        }
        l
    }
}

impl SegList {
    /// Empties an inline list, letting go of each segment's reference and putting
    /// the buffers whose last reference that was into `freed`, for the caller to
    /// give back with the packet's record under one borrow of the pool's cache
    /// ([`crate::pool::free_rec_with`]). A heap list is left as it is.
    #[inline]
    pub(crate) fn release_inline(&mut self, freed: &mut [Option<Freed>; INLINE]) {
        if let SegList::Inline { len, segs } = self {
            let n = std::mem::take(len);
            for (seg, out) in segs[..n].iter().zip(freed.iter_mut()) {
                // SAFETY: the first `n` entries were initialised and `len` is now 0,
                // so each is outside the initialised prefix and moved out once.
                let s = unsafe { seg.assume_init_read() };
                *out = s.buf.release();
            }
        }
    }
}

impl Drop for SegList {
    fn drop(&mut self) {
        if let SegList::Inline { .. } = self {
            self.truncate(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::Class;

    fn seg(tag: u8) -> Seg {
        let mut b = Buf::alloc(Class::Small).unwrap();
        b.bytes_mut(0, 1).unwrap()[0] = tag;
        Seg::new(b, 0, 1)
    }
    fn tags(l: &SegList) -> Vec<u8> {
        l.as_slice().iter().map(|s| s.data()[0]).collect()
    }

    #[test]
    fn push_spills_past_inline_and_keeps_order() {
        let mut l = SegList::new();
        for t in 0..7 {
            l.push(seg(t));
        }
        assert!(matches!(l, SegList::Heap(_)));
        assert_eq!(tags(&l), [0, 1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn insert_remove_split_append() {
        let mut l = SegList::new();
        for t in [1, 2, 4] {
            l.push(seg(t));
        }
        l.insert(0, seg(0));
        l.insert(3, seg(3));
        assert_eq!(tags(&l), [0, 1, 2, 3, 4]);
        assert_eq!(l.remove(2).data()[0], 2);
        let rest = l.split_off(1);
        assert_eq!(tags(&l), [0]);
        assert_eq!(tags(&rest), [1, 3, 4]);
        l.append(rest);
        assert_eq!(tags(&l), [0, 1, 3, 4]);
        let c = l.clone();
        assert!(!c.as_slice()[0].buf.is_unique());
        l.truncate(1);
        assert_eq!(tags(&c), [0, 1, 3, 4]);
        assert_eq!(l.len(), 1);
    }

    #[test]
    fn split_off_of_long_heap_list() {
        let mut l = SegList::new();
        for t in 0..12 {
            l.push(seg(t));
        }
        let rest = l.split_off(2);
        assert_eq!(tags(&l), [0, 1]);
        assert_eq!(tags(&rest), (2..12).collect::<Vec<u8>>());
    }
}
