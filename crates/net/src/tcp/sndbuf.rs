//! A connection's send buffer: the bytes from SND.UNA on, as a queue of chunks.
//!
//! Large chunks come whole from the application's byte channel, so a byte written
//! by the application is copied once, into the channel, and not again into a ring:
//! a `Vec` moves in ([`SndBuf::push_chunk`]), and a chunk in a packet buffer
//! ([`SndBuf::push_mbuf`]) is held by reference, which lets a segment share it too
//! instead of copying it (FreeBSD's `tcp_output` builds its segments with
//! `m_copym` from the socket buffer the same way; see [`Piece::shared`]). Small
//! pieces are appended to the last chunk ([`SndBuf::push_slice`]), so a stream of
//! small writes does not become a long list of tiny chunks. Acknowledged `Vec`
//! chunks wait in a short spare list for the connection's owner to hand back to
//! the channel ([`SndBuf::take_spare`]), where the application's next writes reuse
//! them; a packet buffer goes back to its pool when its last holder lets go.

use mbuf::Mbuf;
use std::collections::VecDeque;

/// Largest chunk this buffer allocates for slices; the first is sized to its data
/// (a 64-byte request does not take 16 KiB) and each next one twice the last.
const FILL_CHUNK: usize = 16 * 1024;
const FILL_MIN: usize = 256;
/// Acknowledged chunks kept for reuse.
const SPARE_MAX: usize = 8;

/// Bytes on their way out or in, as the send buffer and the byte channels
/// (`chan`) hold them: a buffer of their own, or a packet holding exactly them (a
/// received segment's data, in a few segments at most, or a large write in a
/// packet buffer of one: no copy on the way to the reader or into segments).
#[derive(Debug)]
pub(crate) enum Chunk {
    Bytes(Vec<u8>),
    Pkt(Mbuf),
}

impl Chunk {
    /// The bytes, of a chunk that holds them in one run (its own, or a packet of
    /// one segment: what the send buffer and the send channel hold).
    pub(crate) fn data(&self) -> &[u8] {
        match self {
            Chunk::Bytes(v) => v,
            Chunk::Pkt(m) => {
                debug_assert!(m.nsegs() <= 1, "a chunk of one run");
                m.first()
            }
        }
    }

    /// The bytes from `off` to the end of the run that holds them: the rest of a
    /// chunk of its own, or of the packet segment holding byte `off` (a received
    /// segment's data may be held in a few).
    pub(crate) fn run_at(&self, off: usize) -> &[u8] {
        match self {
            Chunk::Bytes(v) => v.get(off..).unwrap_or_default(),
            Chunk::Pkt(m) => {
                let mut off = off;
                for s in m.segments() {
                    if off < s.len() {
                        return &s[off..];
                    }
                    off -= s.len();
                }
                &[]
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Chunk::Bytes(v) => v.len(),
            Chunk::Pkt(m) => m.len(),
        }
    }
}

#[derive(Debug, Default)]
pub struct SndBuf {
    /// Each chunk with the stream offset of its first byte (counted from the first
    /// byte this buffer ever held), so a range is found by binary search rather than
    /// by walking the chunks before it for every segment.
    /// The first chunk may begin before the first byte held (acknowledged bytes at
    /// its front).
    chunks: VecDeque<(u64, Chunk)>,
    len: usize,
    /// Stream offset of the next byte to be appended.
    end: u64,
    /// The first spare chunk, held inline: a short connection acknowledges one
    /// chunk, and a list of its own would be an allocation per connection (5% of
    /// the connection-rate bench).
    spare1: Option<Vec<u8>>,
    /// More spare chunks, up to [`SPARE_MAX`] in all.
    spare: Vec<Vec<u8>>,
}

impl SndBuf {
    /// Bytes held.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `c` (not empty) as the last chunk.
    fn push_back(&mut self, c: Chunk) {
        let n = c.len();
        self.chunks.push_back((self.end, c));
        self.len += n;
        self.end += n as u64;
    }

    /// Appends a copy of `data`, into the last chunk's free capacity first.
    pub fn push_slice(&mut self, mut data: &[u8]) {
        if let Some((_, Chunk::Bytes(last))) = self.chunks.back_mut() {
            let n = (last.capacity() - last.len()).min(data.len());
            last.extend_from_slice(&data[..n]);
            data = &data[n..];
            self.len += n;
            self.end += n as u64;
        }
        while !data.is_empty() {
            let last = match self.chunks.back() {
                Some((_, Chunk::Bytes(v))) => v.capacity(),
                _ => 0,
            };
            let want = data
                .len()
                .max(2 * last)
                .next_power_of_two()
                .clamp(FILL_MIN, FILL_CHUNK);
            let mut c = match self.take_spare() {
                Some(c) if c.capacity() >= want.min(data.len()) => c,
                _ => Vec::with_capacity(want),
            };
            c.clear();
            let n = c.capacity().min(data.len());
            c.extend_from_slice(&data[..n]);
            data = &data[n..];
            self.push_back(Chunk::Bytes(c));
        }
    }

    /// Appends `c` as it is, without copying its bytes.
    pub fn push_chunk(&mut self, c: Vec<u8>) {
        if c.is_empty() {
            return self.keep_spare(c);
        }
        self.push_back(Chunk::Bytes(c));
    }

    /// Whether byte `off` of `m` continues the last chunk, in the same buffer.
    pub fn continues(&self, m: &Mbuf, off: usize) -> bool {
        match self.chunks.back() {
            Some((_, Chunk::Pkt(last))) => last.joins(m, off),
            _ => false,
        }
    }

    /// Appends the bytes of `m` without copying them: the buffer holds `m` (one
    /// chunk per segment), and segments share its buffers. A packet of one
    /// segment that continues the last chunk in the same buffer (the next bytes of
    /// a write whose start went before) joins that chunk instead, so a write taken
    /// a few KiB at a time, as acknowledgments open room, stays one chunk.
    pub fn push_mbuf(&mut self, m: Mbuf) {
        if m.nsegs() <= 1 {
            if m.is_empty() {
                return;
            }
            if let Some((_, Chunk::Pkt(last))) = self.chunks.back_mut() {
                if last.joins(&m, 0) {
                    let n = m.len();
                    last.cat(m);
                    debug_assert_eq!(last.nsegs(), 1, "joined into its one segment");
                    self.len += n;
                    self.end += n as u64;
                    return;
                }
            }
            self.push_back(Chunk::Pkt(m));
            return;
        }
        let mut off = 0;
        for s in m.segments() {
            if !s.is_empty() {
                match m.copym(off, s.len()) {
                    Ok(c) => self.push_back(Chunk::Pkt(c)),
                    // No record in the pool: the bytes are copied, never lost.
                    Err(_) => self.push_back(Chunk::Bytes(s.to_vec())),
                }
            }
            off += s.len();
        }
    }

    /// Drops the first `n` bytes (acknowledged).
    pub fn drain(&mut self, n: usize) {
        self.len -= n.min(self.len);
        // Chunks that end at or before the first byte still held go.
        let first = self.end - self.len as u64;
        while self
            .chunks
            .front()
            .is_some_and(|(start, c)| start + c.len() as u64 <= first)
        {
            if let Some((_, Chunk::Bytes(c))) = self.chunks.pop_front() {
                self.keep_spare(c);
            }
        }
    }

    fn keep_spare(&mut self, c: Vec<u8>) {
        if self.spare1.is_none() {
            self.spare1 = Some(c);
        } else if self.spare.len() + 1 < SPARE_MAX {
            self.spare.push(c);
        }
    }

    /// An acknowledged chunk to give back to whoever fills the buffer.
    pub fn take_spare(&mut self) -> Option<Vec<u8>> {
        self.spare.pop().or_else(|| self.spare1.take())
    }

    /// Bytes `[off, off + n)` (clamped to what is held) as pieces of the chunks.
    pub fn pieces(&self, off: usize, n: usize) -> Pieces<'_> {
        let off = off.min(self.len);
        // The chunk holding byte `off`, and where in it.
        let abs = self.end - (self.len - off) as u64;
        let chunk = self
            .chunks
            .partition_point(|(start, c)| start + c.len() as u64 <= abs);
        let at = self
            .chunks
            .get(chunk)
            .map_or(0, |(start, _)| (abs - start) as usize);
        Pieces {
            buf: self,
            chunk,
            at,
            left: n.min(self.len - off),
        }
    }

    /// Frees everything, spare chunks too.
    pub fn release(&mut self) {
        *self = SndBuf::default();
    }
}

/// A piece of a send buffer's range: bytes within one chunk.
#[derive(Clone, Copy, Debug)]
pub struct Piece<'a> {
    pub data: &'a [u8],
    /// The packet the bytes lie in and their offset in it, when the chunk is a
    /// packet buffer: a segment may take them with [`Mbuf::copym`] (no copy).
    pub shared: Option<(&'a Mbuf, usize)>,
}

/// The pieces of a range of a [`SndBuf`], in order.
#[derive(Clone, Debug)]
pub struct Pieces<'a> {
    buf: &'a SndBuf,
    /// Chunk to look in next, and the offset into the chunks from there.
    chunk: usize,
    at: usize,
    left: usize,
}

impl<'a> Iterator for Pieces<'a> {
    type Item = Piece<'a>;

    fn next(&mut self) -> Option<Piece<'a>> {
        while self.left > 0 {
            let (_, c) = self.buf.chunks.get(self.chunk)?;
            let d = c.data();
            if self.at >= d.len() {
                self.at -= d.len();
                self.chunk += 1;
                continue;
            }
            let n = (d.len() - self.at).min(self.left);
            let p = Piece {
                data: &d[self.at..self.at + n],
                shared: match c {
                    Chunk::Pkt(m) => Some((m, self.at)),
                    Chunk::Bytes(_) => None,
                },
            };
            self.left -= n;
            self.at = 0;
            self.chunk += 1;
            return Some(p);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(b: &SndBuf, off: usize, n: usize) -> Vec<u8> {
        b.pieces(off, n).flat_map(|p| p.data).copied().collect()
    }

    #[test]
    fn chunks_and_slices_read_back_as_one_stream() {
        let mut model: Vec<u8> = Vec::new();
        let mut b = SndBuf::default();
        let mut next = 0u8;
        let mut bytes = |n: usize| -> Vec<u8> {
            (0..n)
                .map(|_| {
                    next = next.wrapping_add(7);
                    next
                })
                .collect()
        };
        for (i, n) in [10, 5000, 20_000, 3, 17_000, 1, 40_000]
            .into_iter()
            .enumerate()
        {
            let d = bytes(n);
            model.extend_from_slice(&d);
            match i % 3 {
                0 => b.push_slice(&d),
                1 => b.push_chunk(d),
                // A chain of clusters: one chunk per segment.
                _ => b.push_mbuf(Mbuf::from_slice(&d).unwrap()),
            }
            assert_eq!(b.len(), model.len());
            for (off, len) in [(0, model.len()), (1, 7), (model.len() / 2, 30_000)] {
                let len = len.min(model.len() - off);
                assert_eq!(collect(&b, off, len), model[off..off + len]);
            }
        }
        // Pieces in packet buffers say where: a segment can share them.
        let mut shared = 0;
        for p in b.pieces(0, model.len()) {
            if let Some((m, at)) = p.shared {
                assert_eq!(m.copym(at, p.data.len()).unwrap().to_vec(), p.data);
                shared += 1;
            }
        }
        assert!(shared > 10, "{shared}");
        // Acknowledge in uneven steps; what remains reads the same.
        for step in [3, 10_000, 1, 25_000, 7, 100_000] {
            let n = step.min(model.len());
            b.drain(n);
            model.drain(..n);
            assert_eq!(b.len(), model.len());
            assert_eq!(collect(&b, 0, model.len()), model);
            for off in (0..model.len()).step_by(997) {
                let len = 3000.min(model.len() - off);
                assert_eq!(collect(&b, off, len), model[off..off + len]);
            }
        }
        assert!(b.is_empty());
        // Emptied chunks are offered back, a bounded few.
        let mut spare = 0;
        while b.take_spare().is_some() {
            spare += 1;
        }
        assert!((1..=SPARE_MAX).contains(&spare), "{spare}");
    }

    #[test]
    fn a_write_taken_in_pieces_stays_one_chunk() {
        // A large write in a packet buffer, taken a few KiB at a time as room opens:
        // each piece continues the last one in the same buffer and joins it.
        let data: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
        // One segment, as the channel's packet chunks are.
        let mut w = Mbuf::with_capacity(data.len()).unwrap();
        w.append(&data).unwrap();
        let mut b = SndBuf::default();
        let mut at = 0;
        for n in [20_000, 3000, 1, 7000, 19_999] {
            assert_eq!(b.continues(&w, at), at > 0, "{at}");
            b.push_mbuf(w.copym(at, n).unwrap());
            at += n;
        }
        assert_eq!((b.len(), b.chunks.len()), (50_000, 1));
        assert_eq!(collect(&b, 0, 50_000), data);
        assert_eq!(b.pieces(123, 40_000).count(), 1);
        // Not the next bytes: a chunk of its own.
        b.push_mbuf(w.copym(0, 10).unwrap());
        assert_eq!(b.chunks.len(), 2);
        b.drain(49_999);
        assert_eq!(collect(&b, 0, 11), [&data[49_999..], &data[..10]].concat());
    }

    #[test]
    fn small_pieces_share_a_chunk() {
        let mut b = SndBuf::default();
        for _ in 0..1000 {
            b.push_slice(&[1, 2, 3]);
        }
        assert_eq!(b.len(), 3000);
        // 256, 512, 1024 and 2048 bytes: each new chunk twice the last.
        assert_eq!(b.chunks.len(), 4);
        assert_eq!(b.pieces(2999, 10).count(), 1);
        assert_eq!(collect(&b, 2998, 10), [2, 3]);
    }
}
