//! [`Mbuf`]: a packet header plus a chain of segments, and the chain operations
//! of `uipc_mbuf.c`.
//!
//! Chain invariants (checked by `check` in the tests):
//! - `len` is the sum of the segment lengths (`m_pkthdr.len`);
//! - every segment is non-empty, except possibly the first, which then only
//!   carries headroom for prepends (as the empty cluster of [`Mbuf::new`]);
//! - a buffer is written only when this segment holds its only reference;
//!   shared buffers (after [`Mbuf::try_clone`] or [`Mbuf::split`]) are copied
//!   first (FreeBSD `M_WRITABLE`), so no holder ever sees another's writes.

use std::fmt;
use std::ptr::NonNull;

use crate::pool::{self, Buf, BufId, Class};
use crate::seglist::{Seg, SegList, INLINE};
use crate::{
    NoBufs, PktHdr, PullError, DEFAULT_HEADROOM, LINK_HEADROOM, MCLBYTES, MHLEN, MH_OFF, MLEN,
};

/// A packet: a pointer-sized handle to its record — the packet header and the
/// chain of reference-counted buffer segments — which lives in the pool, as
/// FreeBSD's `m_pkthdr` lives in the first mbuf, DPDK's in `rte_mbuf` and VPP's in
/// `vlib_buffer_t`. Moving a packet through the stack's queues and vectors moves 8
/// bytes; the record is reached through the handle (`m.hdr` works through
/// [`std::ops::Deref`], as through a `Box`). Dropping the handle drops the segments
/// and returns the record to the pool.
pub struct Mbuf {
    rec: NonNull<Pkt>,
}

/// A packet's record: what an [`Mbuf`] points to.
///
/// Laid out in this order (`repr(C)`) so that a packet of one segment has all it
/// uses in the record's first 64 bytes, one cache line (records start on one,
/// [`pool::REC_CAP`]): the header (24 bytes), the length, the segment list's tag
/// and count, and its first segment; a flood's copies ([`Mbuf::shares`]) copy and
/// later read that line alone.
#[repr(C)]
pub struct Pkt {
    /// The packet header; copied by `split` and `try_clone`.
    pub hdr: PktHdr,
    pub(crate) len: usize,
    pub(crate) segs: SegList,
}

const _: () = assert!(std::mem::size_of::<Pkt>() <= pool::REC_CAP);
const _: () = assert!(std::mem::align_of::<Pkt>() <= 16);
const _: () = assert!(std::mem::size_of::<Mbuf>() == 8);
const _: () = assert!(std::mem::size_of::<Option<Mbuf>>() == 8);

// SAFETY: an `Mbuf` owns its record exclusively (it is never copied or shared), and
// the record's contents (`PktHdr`, `SegList` of `Buf`s) are `Send`; sending the
// handle sends that ownership.
unsafe impl Send for Mbuf {}
// SAFETY: `&Mbuf` only gives `&Pkt`, and `Pkt` is `Sync` (its buffers are only read
// through shared references).
unsafe impl Sync for Mbuf {}

impl std::ops::Deref for Mbuf {
    type Target = Pkt;
    #[inline(always)]
    fn deref(&self) -> &Pkt {
        // SAFETY: `rec` points to a record initialised by `Mbuf::with_rec` and owned by
        // this handle until `drop`; `&self` excludes writes through it.
        unsafe { self.rec.as_ref() }
    }
}

impl std::ops::DerefMut for Mbuf {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Pkt {
        // SAFETY: as in `deref`; `&mut self` makes the borrow exclusive.
        unsafe { self.rec.as_mut() }
    }
}

impl Drop for Mbuf {
    /// Lets go of the segments' references and gives back the record together
    /// with the buffers whose last reference went, under one borrow of the pool's
    /// thread cache (not one for the record and one for each buffer).
    #[inline]
    fn drop(&mut self) {
        let mut freed = [const { None }; INLINE];
        // SAFETY: as in `deref_mut` (the record is this handle's until the end).
        unsafe { self.rec.as_mut() }.segs.release_inline(&mut freed);
        // SAFETY: the record was initialised by `with_rec` and is dropped exactly once,
        // here (what is left of it: a heap segment list); after this nothing reads
        // it, and it goes back to the pool.
        unsafe {
            std::ptr::drop_in_place(self.rec.as_ptr());
            pool::free_rec_with(self.rec.cast(), &mut freed);
        }
    }
}

impl Mbuf {
    /// A handle to a new record holding `pkt`; `NoBufs` if the pool has no record.
    #[inline]
    fn with_rec(pkt: Pkt) -> Result<Mbuf, NoBufs> {
        let p = pool::alloc_rec()?.cast::<Pkt>();
        // SAFETY: `p` is a free record slot of `REC_CAP` bytes, aligned to 16 (at
        // least `Pkt`'s size and alignment, asserted above), owned by nobody; writing
        // a whole value initialises it.
        unsafe { p.as_ptr().write(pkt) };
        Ok(Mbuf { rec: p })
    }
}

/// Bytes to add to a chain: a slice, or zeros (`m_copyback` past the end).
#[derive(Clone, Copy)]
enum Fill<'a> {
    Bytes(&'a [u8]),
    Zeros(usize),
}

impl Fill<'_> {
    #[inline]
    fn len(&self) -> usize {
        match self {
            Fill::Bytes(b) => b.len(),
            Fill::Zeros(n) => *n,
        }
    }
    fn write(&self, dst: &mut [u8], from: usize) {
        match self {
            Fill::Bytes(b) => dst.copy_from_slice(&b[from..from + dst.len()]),
            Fill::Zeros(_) => dst.fill(0),
        }
    }
}

/// Copies bytes `[off, off + out.len())` of the chain `segs` into `out`.
/// The caller has checked the range.
pub(crate) fn gather(segs: &[Seg], mut off: usize, out: &mut [u8]) {
    let mut done = 0;
    for s in segs {
        if done == out.len() {
            break;
        }
        let d = s.data();
        if off >= d.len() {
            off -= d.len();
            continue;
        }
        let n = (d.len() - off).min(out.len() - done);
        out[done..done + n].copy_from_slice(&d[off..off + n]);
        done += n;
        off = 0;
    }
    debug_assert_eq!(done, out.len(), "gather beyond the chain");
}

/// Removes `n` bytes from the front of the segments starting at index `from`,
/// dropping the segments it empties. The caller adjusts the packet length.
pub(crate) fn trim_segs_front(segs: &mut SegList, from: usize, mut n: usize) {
    while n > 0 && from < segs.len() {
        let s = &mut segs.as_mut_slice()[from];
        if s.len() <= n {
            n -= s.len();
            drop(segs.remove(from));
        } else {
            s.trim_front(n);
            n = 0;
        }
    }
    debug_assert_eq!(n, 0, "trim beyond the chain");
}

impl Mbuf {
    /// An empty packet with header `hdr` (no segment); `NoBufs` if the pool has no
    /// record.
    #[inline]
    pub fn empty(hdr: PktHdr) -> Result<Mbuf, NoBufs> {
        Mbuf::with_rec(Pkt {
            hdr,
            len: 0,
            segs: SegList::new(),
        })
    }

    /// An empty packet in one cluster, with [`DEFAULT_HEADROOM`] bytes of
    /// headroom for prepends and the rest of the cluster as tailroom for appends.
    pub fn new() -> Result<Mbuf, NoBufs> {
        let mut m = Mbuf::empty(PktHdr::default())?;
        m.segs
            .push(Seg::new(Buf::alloc(Class::Cluster)?, DEFAULT_HEADROOM, 0));
        Ok(m)
    }

    /// An empty packet in one buffer with [`DEFAULT_HEADROOM`] bytes of headroom and
    /// room for `len` bytes after it: a cluster when they fit, else a jumbo cluster,
    /// so that a segment built for a device with segmentation offload is one
    /// contiguous buffer, else a 256 KiB one (an application's large write).
    /// `NoBufs` beyond [`MJUM256BYTES`](crate::MJUM256BYTES).
    pub fn with_capacity(len: usize) -> Result<Mbuf, NoBufs> {
        let need = DEFAULT_HEADROOM.checked_add(len).ok_or(NoBufs)?;
        if need > crate::MJUM256BYTES {
            return Err(NoBufs);
        }
        let class = if need <= MCLBYTES {
            Class::Cluster
        } else {
            Class::for_len(need)
        };
        let mut m = Mbuf::empty(PktHdr::default())?;
        m.segs
            .push(Seg::new(Buf::alloc(class)?, DEFAULT_HEADROOM, 0));
        Ok(m)
    }

    /// A packet holding `hdr`, a packet's headers that travel in a buffer of their
    /// own ahead of data shared with another packet (a segment cut from a larger
    /// one): at the end of a small buffer when they leave [`LINK_HEADROOM`] in
    /// front of them, else as [`Mbuf::with_capacity`]. A frame's headers then take
    /// two cache lines of a small buffer, not a 2 KiB cluster's.
    pub fn with_headers(hdr: &[u8]) -> Result<Mbuf, NoBufs> {
        let len = hdr.len();
        if len + LINK_HEADROOM > MLEN {
            let mut m = Mbuf::with_capacity(len)?;
            m.append(hdr)?;
            return Ok(m);
        }
        let mut buf = Buf::alloc(Class::Small)?;
        fill_new(&mut buf, MLEN - len, hdr)?;
        let mut m = Mbuf::empty(PktHdr::default())?;
        m.segs.push(Seg::new(buf, MLEN - len, len));
        m.len = len;
        Ok(m)
    }

    /// A packet holding `data`: [`DEFAULT_HEADROOM`] bytes of headroom in the first
    /// cluster, then as many clusters as the data needs.
    pub fn from_slice(data: &[u8]) -> Result<Mbuf, NoBufs> {
        let mut m = Mbuf::new()?;
        m.append(data)?;
        Ok(m)
    }

    /// A received frame laid out as NetBSD's `m_devget` lays it out, which is the
    /// layout the m_pulldown paper measured:
    /// - `len <= MHLEN`: one packet-header small buffer;
    /// - `len <= MHLEN + MLEN`: a header small buffer with `MHLEN` bytes and a
    ///   second small buffer with the rest;
    /// - longer: clusters of `MCLBYTES`, no headroom.
    pub fn devget(data: &[u8]) -> Result<Mbuf, NoBufs> {
        let mut m = Mbuf::empty(PktHdr::default())?;
        if data.len() <= MHLEN + MLEN {
            let (a, b) = data.split_at(data.len().min(MHLEN));
            let mut buf = Buf::alloc(Class::Small)?;
            fill_new(&mut buf, MH_OFF, a)?;
            m.segs.push(Seg::new(buf, MH_OFF, a.len()));
            if !b.is_empty() {
                let mut buf = Buf::alloc(Class::Small)?;
                fill_new(&mut buf, 0, b)?;
                m.segs.push(Seg::new(buf, 0, b.len()));
            }
        } else {
            for chunk in data.chunks(MCLBYTES) {
                let mut buf = Buf::alloc(Class::Cluster)?;
                fill_new(&mut buf, 0, chunk)?;
                m.segs.push(Seg::new(buf, 0, chunk.len()));
            }
        }
        m.len = data.len();
        Ok(m)
    }

    /// A packet with one segment per non-empty part, each at the start of its own
    /// buffer (a small buffer if the part fits in `MLEN`, else a cluster; a part
    /// longer than `MCLBYTES` takes several clusters). Tests and benchmarks use it
    /// to build exact layouts.
    pub fn from_parts(parts: &[&[u8]]) -> Result<Mbuf, NoBufs> {
        let mut m = Mbuf::empty(PktHdr::default())?;
        for part in parts {
            for chunk in part.chunks(MCLBYTES) {
                let mut buf = Buf::alloc(Class::for_len(chunk.len()))?;
                fill_new(&mut buf, 0, chunk)?;
                m.segs.push(Seg::new(buf, 0, chunk.len()));
                m.len += chunk.len();
            }
        }
        Ok(m)
    }

    /// Makes this packet hold exactly `data`, [`DEFAULT_HEADROOM`] bytes into its
    /// first buffer, with a fresh header: what a driver does when it refills a
    /// receive descriptor with a buffer that came back from transmission. The first
    /// buffer is kept when this packet holds it alone and it is large enough (no
    /// allocation); otherwise the packet is rebuilt in a new cluster. On `NoBufs` the
    /// packet is left empty.
    #[inline]
    pub fn recycle(&mut self, data: &[u8]) -> Result<(), NoBufs> {
        let need = DEFAULT_HEADROOM + data.len();
        self.hdr = PktHdr::default();
        self.segs.truncate(1);
        let reusable = self
            .segs
            .first()
            .is_some_and(|s| s.buf.is_unique() && s.buf.cap() >= need);
        if !reusable {
            self.segs.truncate(0);
            self.len = 0;
            let buf = Buf::alloc(Class::for_len(need.max(MCLBYTES)))?;
            self.segs.push(Seg::new(buf, DEFAULT_HEADROOM, 0));
        }
        self.len = data.len();
        let s = &mut self.segs.as_mut_slice()[0];
        s.set_window(DEFAULT_HEADROOM, data.len());
        if let Some(dst) = s.data_mut(0, data.len()) {
            dst.copy_from_slice(data);
        }
        Ok(())
    }

    /// Packet length in bytes (`m_pkthdr.len`).
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of segments in the chain.
    #[inline]
    pub fn nsegs(&self) -> usize {
        self.segs.len()
    }

    /// Bytes of the buffers the chain holds (Linux's `truesize`): what keeping the
    /// packet costs, whatever its length — an 8-byte fragment received into a
    /// cluster holds a whole cluster. A shared buffer is counted whole, so the sum
    /// over several packets may exceed what they hold together. Tables that queue
    /// packets from the network (reassembly) bound themselves with it.
    pub fn buf_bytes(&self) -> usize {
        self.segs.as_slice().iter().map(|s| s.buf.cap()).sum()
    }

    /// [`Mbuf::buf_bytes`] without the segments in the buffer `other` names (one
    /// another holder pins already, so keeping this packet costs nothing more of
    /// it).
    pub fn buf_bytes_except(&self, other: Option<BufId>) -> usize {
        self.segs
            .as_slice()
            .iter()
            .filter(|s| Some(s.buf.id()) != other)
            .map(|s| s.buf.cap())
            .sum()
    }

    /// The buffer that holds this packet's last byte, if it has any.
    pub fn last_buf(&self) -> Option<BufId> {
        self.segs.as_slice().last().map(|s| s.buf.id())
    }

    /// The data of each segment, in order (the first may be empty).
    #[inline]
    pub fn segments(&self) -> impl Iterator<Item = &[u8]> {
        self.segs.as_slice().iter().map(Seg::data)
    }

    /// The data of the first segment (`mtod`); empty if there is none, or if the
    /// first segment only carries headroom — use [`Mbuf::pulldown`] to reach
    /// bytes wherever they are.
    #[inline]
    pub fn first(&self) -> &[u8] {
        self.segs.first().map_or(&[], Seg::data)
    }

    /// The first `N` bytes, writable, when the first segment holds them (copied first
    /// if its buffer is shared); `None` when it does not, or when that copy needed a
    /// buffer and the pool had none. The caller counts the drop: an exhausted pool is
    /// never an empty slice to index.
    #[inline]
    pub fn head_mut<const N: usize>(&mut self) -> Option<&mut [u8; N]> {
        self.try_first_mut().ok()?.first_chunk_mut::<N>()
    }

    /// The first segment's data, writable: copied first if its buffer is shared;
    /// `NoBufs` if that copy needed a buffer and the pool had none.
    #[inline(always)]
    pub fn try_first_mut(&mut self) -> Result<&mut [u8], NoBufs> {
        match self.segs.first().map(|s| s.buf.is_unique()) {
            None => Ok(&mut []),
            // The common case, one look at the count: ours alone already.
            // SAFETY: seen unshared just now, and `&mut self` held since.
            Some(true) => Ok(unsafe { self.segs.as_mut_slice()[0].data_mut_unique() }),
            Some(false) => self.try_first_mut_slow(),
        }
    }

    #[inline(never)]
    fn try_first_mut_slow(&mut self) -> Result<&mut [u8], NoBufs> {
        self.make_writable(0)?;
        let s = &mut self.segs.as_mut_slice()[0];
        let n = s.len();
        s.data_mut(0, n).ok_or(NoBufs)
    }

    /// Usable space before the data (`M_LEADINGSPACE`): 0 if the first buffer is
    /// shared.
    #[inline]
    pub fn headroom(&self) -> usize {
        self.segs.first().map_or(0, Seg::headroom)
    }

    /// `M_PREPEND`: `len` new bytes at the front, contiguous, returned for the
    /// caller to fill (their contents are unspecified). Uses the first buffer's
    /// headroom if it is unshared and large enough; otherwise adds a new leading
    /// buffer with the bytes at its end, so later prepends find headroom again.
    /// `len` must be at most `MCLBYTES` (else `NoBufs`).
    #[inline(always)]
    pub fn prepend(&mut self, len: usize) -> Result<&mut [u8], NoBufs> {
        if len > MCLBYTES {
            return Err(NoBufs);
        }
        if len == 0 {
            return Ok(&mut []);
        }
        // The common case (a link header in front of a packet that came with
        // headroom): one look at the count, no copy.
        if self
            .segs
            .first()
            .is_some_and(|s| s.off() >= len && s.buf.is_unique())
        {
            let Pkt {
                len: plen, segs, ..
            } = &mut **self;
            *plen += len;
            let s = &mut segs.as_mut_slice()[0];
            s.grow_front(len);
            // SAFETY: seen unshared just now, and `&mut self` held since.
            return Ok(&mut unsafe { s.data_mut_unique() }[..len]);
        }
        self.prepend_slow(len)
    }

    #[inline(never)]
    fn prepend_slow(&mut self, len: usize) -> Result<&mut [u8], NoBufs> {
        let fits = self.segs.first().is_some_and(|s| s.headroom() >= len);
        if fits {
            if let Some(s) = self.segs.first_mut() {
                s.grow_front(len);
            }
        } else {
            let buf = Buf::alloc(Class::for_len(len))?;
            let off = buf.cap() - len;
            if self.segs.first().is_some_and(|s| s.len() == 0) {
                drop(self.segs.remove(0));
            }
            self.segs.insert(0, Seg::new(buf, off, len));
        }
        self.len += len;
        self.segs.as_mut_slice()[0].data_mut(0, len).ok_or(NoBufs)
    }

    /// `m_adj`: trims `n` bytes from the head if `n > 0`, `-n` bytes from the tail
    /// if `n < 0`; trimming more than the packet empties it.
    #[inline]
    pub fn adj(&mut self, n: isize) {
        // The common case (a link header stripped): the first segment holds more.
        if n > 0 {
            let Pkt { len, segs, .. } = &mut **self;
            if let Some(s) = segs.first_mut() {
                if s.len() > n as usize {
                    s.trim_front(n as usize);
                    *len -= n as usize;
                    return;
                }
            }
        }
        let k = n.unsigned_abs().min(self.len);
        if n >= 0 {
            self.trim_head(k);
        } else {
            self.truncate(self.len - k);
        }
    }

    #[inline]
    fn trim_head(&mut self, mut n: usize) {
        self.len -= n;
        while n > 0 {
            let more = self.segs.len() > 1;
            let s = &mut self.segs.as_mut_slice()[0];
            if s.len() <= n && more {
                n -= s.len();
                drop(self.segs.remove(0));
            } else {
                let k = n.min(s.len());
                s.trim_front(k);
                n -= k;
                debug_assert_eq!(n, 0);
                break;
            }
        }
    }

    /// Shortens the packet to `len` bytes (no effect if it is not longer). The
    /// first segment is kept, possibly empty, so its headroom survives.
    pub fn truncate(&mut self, len: usize) {
        if len >= self.len {
            return;
        }
        let mut rem = len;
        let mut cut = self.segs.len();
        for (i, s) in self.segs.as_mut_slice().iter_mut().enumerate() {
            if rem <= s.len() {
                s.set_len(rem);
                cut = if rem == 0 && i > 0 { i } else { i + 1 };
                break;
            }
            rem -= s.len();
        }
        self.segs.truncate(cut);
        self.len = len;
    }

    /// `m_split`: this packet keeps `[0, off)`, the returned one holds the rest
    /// (with a copy of the header). Nothing is copied: a segment cut in two is
    /// shared by both packets (reference count), and becomes read-only for both
    /// until one lets go. `off >= len` returns an empty packet.
    pub fn split(&mut self, off: usize) -> Result<Mbuf, NoBufs> {
        let mut rest = Mbuf::empty(self.hdr)?;
        if off >= self.len {
            return Ok(rest);
        }
        let (k, loff) = self.locate(off);
        if loff == 0 {
            rest.segs = self.segs.split_off(k);
        } else {
            let tail = self.segs.split_off(k + 1);
            let s = &mut self.segs.as_mut_slice()[k];
            let second = s.share(loff, s.len() - loff);
            s.set_len(loff);
            rest.segs.push(second);
            rest.segs.append(tail);
        }
        rest.len = self.len - off;
        self.len = off;
        Ok(rest)
    }

    /// `m_cat`: appends `other`'s segments (no copy); its header is dropped. A
    /// first segment of `other` that continues this packet's last one in the same
    /// buffer (the next window of a buffer both share, as consecutive frames cut
    /// from one segment are) joins it, so the chain does not grow (Linux's
    /// `skb_try_coalesce` does the same for page fragments).
    pub fn cat(&mut self, mut other: Mbuf) {
        if other.len == 0 {
            return;
        }
        let mut segs = std::mem::replace(&mut other.segs, SegList::new());
        if segs.first().is_some_and(|s| s.len() == 0) {
            drop(segs.remove(0));
        }
        self.len += other.len;
        if let (Some(last), Some(first)) = (self.segs.last_mut(), segs.first()) {
            if last.continued_by(&first.window()) {
                last.set_len(last.len() + first.len());
                drop(segs.remove(0));
            }
        }
        self.segs.append(segs);
    }

    /// Whether [`Mbuf::cat`] would join the byte at `off` of `other` to this
    /// packet's last segment: it lies in the same buffer, right after this
    /// packet's last byte.
    pub fn joins(&self, other: &Mbuf, off: usize) -> bool {
        let (k, loff) = other.locate(off);
        match (self.segs.as_slice().last(), other.segs.as_slice().get(k)) {
            (Some(last), Some(s)) => last.continued_by(&s.share_window(loff)),
            _ => false,
        }
    }

    /// `m_copym` then `m_cat` without the packet between them: appends bytes
    /// `[off, off + len)` of `src` (clamped to its length), sharing its buffers (no
    /// copy), the first joining this packet's last segment when it continues it.
    /// `NoBufs` is never returned today (sharing allocates nothing) but kept for a
    /// spill of the segment list.
    pub fn append_shared(&mut self, src: &Mbuf, off: usize, len: usize) -> Result<(), NoBufs> {
        let off = off.min(src.len);
        let mut left = len.min(src.len - off);
        self.len += left;
        let (k, mut loff) = src.locate(off);
        for s in src.segs.as_slice().iter().skip(k) {
            if left == 0 {
                break;
            }
            let n = (s.len() - loff).min(left);
            match self.segs.last_mut() {
                Some(last) if last.continued_by(&s.share_window(loff)) => {
                    last.set_len(last.len() + n)
                }
                _ => self.segs.push(s.share(loff, n)),
            }
            left -= n;
            loff = 0;
        }
        Ok(())
    }

    /// `m_append`: appends `data`, filling the last buffer's tailroom (if it is
    /// unshared) and then new clusters. On `NoBufs` the packet is unchanged.
    pub fn append(&mut self, data: &[u8]) -> Result<(), NoBufs> {
        self.extend(Fill::Bytes(data))
    }

    fn extend(&mut self, fill: Fill<'_>) -> Result<(), NoBufs> {
        let total = fill.len();
        let orig = self.len;
        let mut done = 0;
        if let Some(last) = self.segs.last_mut() {
            let n = last.tailroom().min(total);
            if n > 0 {
                let end = last.end();
                if let Some(dst) = last.buf.bytes_mut(end, n) {
                    fill.write(dst, 0);
                    last.set_len(last.len() + n);
                    done = n;
                }
            }
        }
        while done < total {
            let mut buf = match Buf::alloc(Class::Cluster) {
                Ok(b) => b,
                Err(e) => {
                    self.len = orig + done;
                    self.truncate(orig);
                    return Err(e);
                }
            };
            let n = (total - done).min(MCLBYTES);
            if let Some(dst) = buf.bytes_mut(0, n) {
                fill.write(dst, done);
            }
            self.segs.push(Seg::new(buf, 0, n));
            done += n;
        }
        self.len = orig + total;
        Ok(())
    }

    /// `m_copydata`: copies `[off, off + out.len())` into `out`.
    pub fn copydata(&self, off: usize, out: &mut [u8]) -> Result<(), PullError> {
        match off.checked_add(out.len()) {
            Some(end) if end <= self.len => {
                gather(self.segs.as_slice(), off, out);
                Ok(())
            }
            _ => Err(PullError::OutOfRange),
        }
    }

    /// `m_copyback`: writes `data` at `off`, copying shared segments first, and
    /// extending the packet (zero-filling any gap) if it ends past the end. On
    /// `NoBufs` the packet is unchanged.
    pub fn copyback(&mut self, off: usize, data: &[u8]) -> Result<(), NoBufs> {
        let end = off.checked_add(data.len()).ok_or(NoBufs)?;
        let orig = self.len;
        if end > orig {
            if off > orig {
                self.extend(Fill::Zeros(off - orig))?;
            }
            let from = orig.max(off) - off;
            if let Err(e) = self.extend(Fill::Bytes(&data[from..])) {
                self.truncate(orig);
                return Err(e);
            }
        }
        let over_end = end.min(orig);
        if off >= over_end {
            return Ok(());
        }
        // Make every touched segment writable before writing any byte, so that a
        // failure leaves the packet as it was.
        let (k0, loff0) = self.locate(off);
        let mut pos = off - loff0;
        let mut i = k0;
        while pos < over_end {
            if let Err(e) = self.make_writable(i) {
                self.truncate(orig);
                return Err(e);
            }
            pos += self.segs.as_slice()[i].len();
            i += 1;
        }
        let mut src = &data[..over_end - off];
        let mut loff = loff0;
        for s in &mut self.segs.as_mut_slice()[k0..i] {
            let n = (s.len() - loff).min(src.len());
            if let Some(dst) = s.data_mut(loff, n) {
                dst.copy_from_slice(&src[..n]);
            }
            src = &src[n..];
            loff = 0;
        }
        debug_assert!(src.is_empty());
        Ok(())
    }

    /// `m_copypacket`: a second packet sharing every buffer (reference counts);
    /// only the header and the segment list are copied. Writes through either
    /// packet copy the written segment first.
    pub fn try_clone(&self) -> Result<Mbuf, NoBufs> {
        Mbuf::with_rec(Pkt {
            hdr: self.hdr,
            len: self.len,
            segs: self.segs.clone(),
        })
    }

    /// `n` copies of this packet, as `n` calls of [`Mbuf::try_clone`] would make
    /// them (every buffer shared, written only after a copy), but with one atomic
    /// add per segment for all of them instead of one per segment and copy: a
    /// bridge's flood. The copies come from the iterator, each `NoBufs` when the
    /// pool has no record for it; the references of copies never taken go back
    /// when it is dropped.
    pub fn shares(&self, n: usize) -> Shares<'_> {
        let left = u32::try_from(n).unwrap_or(u32::MAX);
        if left > 0 {
            for s in self.segs.as_slice() {
                s.buf.add_refs(left);
            }
        }
        Shares { pkt: self, left }
    }

    /// `m_copym`: a packet holding bytes `[off, off + len)` of this one (clamped to
    /// its length), with a copy of the header. Nothing is copied: every segment of
    /// the range is shared (reference counts), so both packets see the same bytes
    /// and either copies a segment before writing to it. A TCP send buffer hands
    /// its data to segments this way (FreeBSD's `tcp_output` does the same).
    pub fn copym(&self, off: usize, len: usize) -> Result<Mbuf, NoBufs> {
        let mut out = Mbuf::empty(self.hdr)?;
        let off = off.min(self.len);
        let mut left = len.min(self.len - off);
        out.len = left;
        let (k, mut loff) = self.locate(off);
        for s in self.segs.as_slice().iter().skip(k) {
            if left == 0 {
                break;
            }
            let n = (s.len() - loff).min(left);
            out.segs.push(s.share(loff, n));
            left -= n;
            loff = 0;
        }
        Ok(out)
    }

    /// The packet's bytes, gathered.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len);
        for s in self.segments() {
            v.extend_from_slice(s);
        }
        v
    }

    /// The segment holding byte `off` and the offset within it; for `off ==
    /// len`, `(nsegs, 0)`. Segments that end at `off` are skipped, so the byte is
    /// always inside the returned segment (as m_pulldown's walk).
    #[inline]
    pub(crate) fn locate(&self, mut off: usize) -> (usize, usize) {
        for (i, s) in self.segs.as_slice().iter().enumerate() {
            if s.len() > off {
                return (i, off);
            }
            off -= s.len();
        }
        (self.segs.len(), off)
    }

    /// Copies segment `i` into a buffer of its own if its buffer is shared,
    /// keeping the same offsets so its headroom and tailroom survive.
    #[inline]
    pub(crate) fn make_writable(&mut self, i: usize) -> Result<(), NoBufs> {
        let s = &mut self.segs.as_mut_slice()[i];
        if s.buf.is_unique() {
            return Ok(());
        }
        let mut buf = Buf::alloc(s.buf.class())?;
        fill_new(&mut buf, s.off(), s.data())?;
        *s = Seg::new(buf, s.off(), s.len());
        Ok(())
    }

    /// Asserts the chain invariants (tests).
    #[cfg(test)]
    pub(crate) fn check(&self) {
        let segs = self.segs.as_slice();
        assert_eq!(segs.iter().map(Seg::len).sum::<usize>(), self.len);
        for s in segs.iter().skip(1) {
            assert!(s.len() > 0, "empty segment after the first: {self:?}");
        }
        for s in segs {
            assert!(s.end() <= s.buf.cap());
        }
    }
}

/// The copies of a packet that [`Mbuf::shares`] made room for.
///
/// Invariant: every buffer of `pkt`'s segments holds `left` references, taken by
/// `shares`, that no handle holds; the borrow keeps the segments as they were.
#[derive(Debug)]
pub struct Shares<'a> {
    pkt: &'a Pkt,
    left: u32,
}

impl Shares<'_> {
    /// Copies not yet taken.
    pub fn left(&self) -> usize {
        self.left as usize
    }
}

impl Shares<'_> {
    /// The next copy of a packet whose segments are inline: its record is a bitwise
    /// copy of the packet's, straight from record to record (a `Pkt` built on the
    /// stack and then moved stalled on the store forwarding of its 112 bytes).
    #[inline]
    fn next_inline(&mut self) -> Result<Mbuf, NoBufs> {
        debug_assert!(self.left > 0 && self.pkt.segs.is_inline());
        let rec = match pool::alloc_rec() {
            Ok(r) => r.cast::<Pkt>(),
            Err(e) => {
                for s in self.pkt.segs.as_slice() {
                    // SAFETY: one of the `left` unclaimed references (type
                    // invariant), given back once: `left` goes down by one below.
                    unsafe { s.buf.unref(1) };
                }
                self.left -= 1;
                return Err(e);
            }
        };
        // SAFETY: `rec` is a free record slot of `REC_CAP` bytes aligned to 16, owned
        // by nobody (as in `Mbuf::with_rec`), and does not overlap the packet's
        // record. The copy initialises it with a valid `Pkt`: the header and length
        // are plain data, and an inline segment list's bitwise copy holds the same
        // windows, each copy of a segment owning one of the `left` unclaimed
        // references of its buffer (type invariant), which `left` going down by one
        // below gives up, exactly as `SegList::claim_shares` does.
        unsafe {
            std::ptr::copy_nonoverlapping(
                std::ptr::from_ref(self.pkt).cast::<u8>(),
                rec.as_ptr().cast::<u8>(),
                self.pkt.used_bytes(),
            );
        };
        self.left -= 1;
        Ok(Mbuf { rec })
    }
}

impl Iterator for Shares<'_> {
    type Item = Result<Mbuf, NoBufs>;

    #[inline]
    fn next(&mut self) -> Option<Result<Mbuf, NoBufs>> {
        if self.left == 0 {
            return None;
        }
        if self.pkt.segs.is_inline() {
            return Some(self.next_inline());
        }
        // SAFETY: one of the `left` unclaimed references of every segment's buffer
        // (type invariant), claimed once: this copy takes one of each, and `left`
        // goes down by one below.
        let segs = unsafe { self.pkt.segs.claim_shares() };
        self.left -= 1;
        // Without a record the segments' drop gives their references back.
        Some(Mbuf::with_rec(Pkt {
            hdr: self.pkt.hdr,
            len: self.pkt.len,
            segs,
        }))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

impl Drop for Shares<'_> {
    fn drop(&mut self) {
        if self.left == 0 {
            return;
        }
        for s in self.pkt.segs.as_slice() {
            // SAFETY: `left` references of every segment's buffer are unclaimed
            // (type invariant), and none is claimed after this.
            unsafe { s.buf.unref(self.left) };
        }
    }
}

impl Pkt {
    /// Bytes of this record from its start to the end of its last inline segment
    /// when the inline list's room for segments ends the record (its layout, checked
    /// here rather than assumed: then every byte after is an unused, uninitialised
    /// entry, which a copy need not carry); else the whole record.
    #[inline]
    pub(crate) fn used_bytes(&self) -> usize {
        let base = std::ptr::from_ref(self) as usize;
        let whole = std::mem::size_of::<Pkt>();
        match self.segs.inline_ends() {
            Some((used, room)) if room == base + whole => used - base,
            _ => whole,
        }
    }
}

/// Writes `data` at `off` of a freshly allocated (unshared) buffer.
pub(crate) fn fill_new(buf: &mut Buf, off: usize, data: &[u8]) -> Result<(), NoBufs> {
    buf.bytes_mut(off, data.len())
        .ok_or(NoBufs)?
        .copy_from_slice(data);
    Ok(())
}

impl fmt::Debug for Pkt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pkt")
            .field("hdr", &self.hdr)
            .field("len", &self.len)
            .field("nsegs", &self.segs.len())
            .finish()
    }
}

impl fmt::Debug for Mbuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Segs<'a>(&'a [Seg]);
        impl fmt::Debug for Segs<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_list()
                    .entries(self.0.iter().map(|s| (s.off(), s.len(), s.buf.cap())))
                    .finish()
            }
        }
        f.debug_struct("Mbuf")
            .field("hdr", &self.hdr)
            .field("len", &self.len)
            .field("segs(off,len,cap)", &Segs(self.segs.as_slice()))
            .finish()
    }
}
