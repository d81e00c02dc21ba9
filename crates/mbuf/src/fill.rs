//! [`FillBuf`]: one buffer that a writer fills front to back, handing each piece
//! it wrote out as a packet of its own that shares the buffer (Linux's
//! `page_frag`, from which a socket's writes are copied into pages that the
//! segments then reference). A stream of writes of any size then lands in a few
//! large buffers, once, and whoever takes the pieces (a send buffer, segments
//! cut from it, a receiver on the same machine) holds them by reference.
//!
//! Why writing into a shared buffer is sound here: the pieces handed out cover
//! bytes before the fill mark only, and a shared buffer's windows never grow over
//! bytes no window covered (appends and prepends need the buffer unshared, which
//! it is not while the `FillBuf` holds it; joining two windows in `Mbuf::cat`
//! covers what they covered). So the bytes at and after the mark are nobody's
//! but the `FillBuf`'s, and writing them races with no reader of the pieces.

use crate::pool::{Buf, Class};
use crate::seglist::Seg;
use crate::{Mbuf, NoBufs, PktHdr, MCLBYTES};

/// A buffer being filled; see the module documentation.
pub struct FillBuf {
    buf: Buf,
    /// Bytes before it have been handed out; bytes from it on are ours alone.
    mark: usize,
}

impl std::fmt::Debug for FillBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FillBuf")
            .field("cap", &self.buf.cap())
            .field("mark", &self.mark)
            .finish()
    }
}

impl FillBuf {
    /// A fresh buffer with room for at least `len` bytes (a cluster, a jumbo
    /// cluster or a 256 KiB one, as [`Mbuf::with_capacity`] picks); `NoBufs`
    /// beyond [`MJUM256BYTES`](crate::MJUM256BYTES).
    pub fn new(len: usize) -> Result<FillBuf, NoBufs> {
        if len > crate::MJUM256BYTES {
            return Err(NoBufs);
        }
        let class = if len <= MCLBYTES {
            Class::Cluster
        } else {
            Class::for_len(len)
        };
        Ok(FillBuf {
            buf: Buf::alloc(class)?,
            mark: 0,
        })
    }

    /// Bytes left to fill.
    pub fn room(&self) -> usize {
        self.buf.cap() - self.mark
    }

    /// Copies as much of `data` as there is room for to the mark and returns it as
    /// a packet of one segment sharing this buffer (empty when there is no room).
    /// `NoBufs` (nothing written) when the pool has no packet record.
    pub fn fill(&mut self, data: &[u8]) -> Result<Mbuf, NoBufs> {
        self.fill_with(data.len(), |dst| {
            dst.copy_from_slice(&data[..dst.len()]);
            dst.len()
        })
    }

    /// Lends `f` up to `max` bytes of room at the mark (as much as there is) to
    /// write into, and returns what it says it wrote (at most what it was lent)
    /// as a packet of one segment sharing this buffer: a writer's bytes land in
    /// the buffer with no copy of their own. The bytes lent hold whatever the
    /// buffer held before (initialised, not necessarily zero); those `f` did not
    /// claim stay this buffer's, for the next fill. `f` is not called when there
    /// is no room, and `NoBufs` (nothing lent) when the pool has no packet record.
    pub fn fill_with(
        &mut self,
        max: usize,
        f: impl FnOnce(&mut [u8]) -> usize,
    ) -> Result<Mbuf, NoBufs> {
        let n = max.min(self.room());
        let mut m = Mbuf::empty(PktHdr::default())?;
        if n == 0 {
            return Ok(m);
        }
        // SAFETY: `[mark, mark + n)` is inside the buffer (`n <= room`), and no
        // segment's window reaches it: every window of this buffer was handed out
        // by `fill_with` over bytes before the mark, and windows of a shared buffer
        // (this one holds a reference) only grow over bytes that windows covered
        // (module documentation). So nothing reads or writes these bytes but `f`,
        // within this call; the slab's bytes are initialised (zeroed when made).
        let dst = unsafe { self.buf.bytes_mut_beyond_windows(self.mark, n) };
        let k = f(dst).min(n);
        if k == 0 {
            return Ok(m);
        }
        m.segs.push(Seg::new(self.buf.clone(), self.mark, k));
        m.len = k;
        self.mark += k;
        Ok(m)
    }
}
