//! What a TCP connection's application handle shares with its worker: two byte
//! channels built from lock-free queues of chunks, and a few atomic flags.
//!
//! A byte channel passes chunks through a bounded `ArrayQueue`: `Vec<u8>`s, which
//! a second queue returns emptied, or pieces of packet buffers (a writer's bulk
//! bytes, copied once into buffers it fills front to back; a received segment's
//! data, held where it arrived), so in the steady state nobody allocates and
//! nobody takes a lock: the worker is the only consumer of `tx` and the only
//! producer of `rx`; the application (one reader, one writer at a time, serialised
//! by the handle) is the other side.
//!
//! The flags and options shared beside the channels (`StreamShared`, `ListenShared`)
//! are in `shared`.

use super::sndbuf::Chunk;
use super::tcb::Payload;
use crossbeam_queue::ArrayQueue;
use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

mod shared;

pub(crate) use shared::{err, phase, IpOpts, ListenShared, Overflow, StreamShared};

/// Bytes per chunk.
pub(crate) const CHUNK: usize = 16 * 1024;
/// Smallest chunk allocated.
const MIN_CHUNK: usize = 256;

/// A bounded, single-producer single-consumer stream of bytes in chunks.
///
/// The queues are made on first use: an idle connection (the common case among
/// thousands) pays for none of them.
#[derive(Debug)]
pub(crate) struct ByteChan {
    /// Boxed: an unused channel costs a pointer, not two cache-padded queues.
    qs: OnceLock<Box<Queues>>,
    bytes: AtomicUsize,
    /// Grows only ([`ByteChan::grow_to`]): FreeBSD rounds a socket buffer up to
    /// whole segments once the connection knows its MSS.
    cap: AtomicUsize,
    /// A lower bound than `cap` while the stack's TCP memory is under pressure
    /// (`tcp::mem`; `usize::MAX` otherwise), set by the worker: the producer
    /// finds no room beyond it. `cap` stays what the socket was given.
    limit: AtomicUsize,
}

/// A channel's queues in two tiers. Most connections move a few small messages, and
/// a queue with a slot for every KiB of the bound (258 for 256 KiB) costs more to make
/// than their whole exchange: so a channel starts with [`SMALL`] slots each way and
/// adds the full-size queues the first time the small one is full. The producer
/// never goes back to the small tier once the large one exists, and the consumer
/// looks for the large tier before it empties the small one, so the order holds.
#[derive(Debug)]
struct Queues {
    q: ArrayQueue<Chunk>,
    free: ArrayQueue<Vec<u8>>,
    big: OnceLock<Box<Tier>>,
    /// Slots of the large tier.
    big_slots: usize,
}

#[derive(Debug)]
struct Tier {
    q: ArrayQueue<Chunk>,
    free: ArrayQueue<Vec<u8>>,
}

/// Slots of a channel's first tier.
const SMALL: usize = 8;

/// Queues of channels that are gone, kept per thread for the next channels made
/// there: making them (a box and two queues) was a fifth of the allocations of the
/// connection-rate bench. Emptied, without a large tier, with their small free
/// chunks, so a new connection's first messages allocate nothing.
const SPARE_QUEUES: usize = 512;
/// Free chunks larger than this are not kept with spare queues.
const SPARE_CHUNK: usize = 1024;

thread_local! {
    // Boxed: a channel holds its queues by box, and they move in and out whole.
    #[allow(clippy::vec_box)]
    static SPARE: RefCell<Vec<Box<Queues>>> = const { RefCell::new(Vec::new()) };
}

impl Drop for ByteChan {
    fn drop(&mut self) {
        if let Some(q) = self.qs.take() {
            q.retire();
        }
    }
}

impl Queues {
    /// Queues from this thread's spares, or new ones.
    fn recycled(big_slots: usize) -> Box<Queues> {
        match SPARE.try_with(|s| s.borrow_mut().pop()).ok().flatten() {
            Some(mut q) => {
                q.big_slots = big_slots;
                q
            }
            None => Box::new(Queues::new(big_slots)),
        }
    }

    /// Empties the queues (their owner is gone) and keeps them for reuse.
    fn retire(mut self: Box<Self>) {
        while self.q.pop().is_some() {}
        self.big = OnceLock::new();
        let mut keep = Vec::new();
        while let Some(c) = self.free.pop() {
            if c.capacity() <= SPARE_CHUNK {
                keep.push(c);
            }
        }
        for c in keep {
            let _ = self.free.push(c);
        }
        let _ = SPARE.try_with(|s| {
            let mut s = s.borrow_mut();
            if s.len() < SPARE_QUEUES {
                s.push(self);
            }
        });
    }

    fn new(big_slots: usize) -> Self {
        Queues {
            q: ArrayQueue::new(SMALL),
            free: ArrayQueue::new(SMALL),
            big: OnceLock::new(),
            big_slots,
        }
    }

    /// Producer: queues a chunk, or gives it back when every slot is taken.
    fn push(&self, c: Chunk) -> Result<(), Chunk> {
        if let Some(t) = self.big.get() {
            return t.q.push(c);
        }
        match self.q.push(c) {
            Ok(()) => Ok(()),
            Err(c) if self.big_slots > 0 => self
                .big
                .get_or_init(|| {
                    Box::new(Tier {
                        q: ArrayQueue::new(self.big_slots),
                        free: ArrayQueue::new(self.big_slots),
                    })
                })
                .q
                .push(c),
            Err(c) => Err(c),
        }
    }

    /// Consumer: the next chunk in order.
    fn pop(&self) -> Option<Chunk> {
        // The large tier first (an acquire): every chunk the producer put on the
        // small one before making it is then visible below.
        let big = self.big.get();
        self.q.pop().or_else(|| big.and_then(|t| t.q.pop()))
    }

    /// Whether a push would fail now.
    fn is_full(&self) -> bool {
        match self.big.get() {
            Some(t) => t.q.is_full(),
            None => self.big_slots == 0 && self.q.is_full(),
        }
    }

    /// Producer: an emptied chunk to reuse.
    fn take_free(&self) -> Option<Vec<u8>> {
        self.free
            .pop()
            .or_else(|| self.big.get().and_then(|t| t.free.pop()))
    }

    /// Consumer: returns an emptied chunk (dropped when there is no room).
    fn give_free(&self, c: Vec<u8>) {
        let c = match self.big.get() {
            Some(t) => match t.free.push(c) {
                Ok(()) => return,
                Err(c) => c,
            },
            None => c,
        };
        let _ = self.free.push(c);
    }
}

impl ByteChan {
    pub fn new(cap: usize) -> Self {
        ByteChan {
            qs: OnceLock::new(),
            bytes: AtomicUsize::new(0),
            cap: AtomicUsize::new(cap),
            limit: AtomicUsize::new(usize::MAX),
        }
    }

    fn queues(&self) -> &Queues {
        self.qs.get_or_init(|| {
            // Room for many small chunks: a producer that pushes a segment at a time
            // must not run out of slots before it runs out of bytes.
            let chunks = self.cap().div_ceil(1024).max(1) + 2;
            Queues::recycled(chunks.saturating_sub(SMALL))
        })
    }

    /// Frees the queues and the chunks in them (the channel is made again on next
    /// use); whatever was queued is dropped. Returns whether there were any.
    pub fn release(&mut self) -> bool {
        *self.bytes.get_mut() = 0;
        match self.qs.take() {
            Some(q) => {
                q.retire();
                true
            }
            None => false,
        }
    }

    /// The bound, in bytes.
    pub fn cap(&self) -> usize {
        self.cap.load(Ordering::Relaxed)
    }

    /// Sets the bound to `cap`, lower or higher (`SO_SNDBUF` / `SO_RCVBUF` on an
    /// open connection). Bytes queued beyond a lowered bound stay; no more are
    /// taken until they leave.
    pub fn set_cap(&self, cap: usize) {
        self.cap.store(cap, Ordering::Relaxed);
    }

    /// Raises the bound to `cap` (never lowers it). A channel whose queues exist
    /// keeps their slots: `space` says 0 while every slot is taken, as before.
    pub fn grow_to(&self, cap: usize) {
        self.cap.fetch_max(cap, Ordering::Relaxed);
    }

    /// Clamps the room to `n` bytes (`usize::MAX`: no clamp); whether that
    /// raised it (a waiting producer is to be woken).
    pub fn set_limit(&self, n: usize) -> bool {
        self.limit.swap(n, Ordering::Relaxed) < n
    }

    /// The bound in force: `cap`, or the clamp when lower.
    fn bound(&self) -> usize {
        self.cap().min(self.limit.load(Ordering::Relaxed))
    }

    /// Bytes queued.
    pub fn len(&self) -> usize {
        self.bytes.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Room left (0 when every chunk slot is taken).
    pub fn space(&self) -> usize {
        if self.qs.get().is_some_and(|qs| qs.is_full()) {
            return 0;
        }
        self.bound().saturating_sub(self.len())
    }

    /// Producer: queues as much of `data` as fits; returns how much.
    pub fn push(&self, data: &[u8]) -> usize {
        self.push_filling(data, &mut None)
    }

    /// Producer: as [`ByteChan::push`], a writer's bytes copied once into packet
    /// buffers that `fill` (the writer's, kept between calls) fills front to back:
    /// each piece a chunk sharing its buffer, so the send buffer, the segments and
    /// a receiver on this machine all take the bytes by reference, and a write
    /// that finds little room lands beside the last one rather than in a chunk of
    /// its own that is copied again on the way out. A writer starts filling with
    /// a large write ([`PKT_CHUNK_MIN`]) and, a bulk stream, keeps on; small
    /// writes before it (requests) go into chunks of their own sized to them.
    pub fn push_filling(&self, mut data: &[u8], fill: &mut Option<mbuf::FillBuf>) -> usize {
        if data.is_empty() {
            return 0;
        }
        let qs = self.queues();
        let mut done = 0;
        // Whether the pool has packet buffers to spare: asked once per call (it
        // takes the pool's lock), not per chunk.
        let mut plenty = None;
        while !data.is_empty() {
            let room = data.len().min(self.space());
            if room == 0 {
                break;
            }
            let c = (fill.is_some() || room >= PKT_CHUNK_MIN)
                .then(|| self.fill_chunk(&data[..room], fill, &mut plenty))
                .flatten();
            let c = match c {
                Some(c) => c,
                None => {
                    let n = room.min(CHUNK);
                    // A new chunk is as large as this piece needs (a 64-byte request
                    // does not take 16 KiB); a reused one grows to what it is asked
                    // to hold.
                    let mut c = qs.take_free().unwrap_or_else(|| {
                        Vec::with_capacity(n.next_power_of_two().clamp(MIN_CHUNK, CHUNK))
                    });
                    c.clear();
                    c.extend_from_slice(&data[..n]);
                    Chunk::Bytes(c)
                }
            };
            let n = c.len();
            if let Err(c) = qs.push(c) {
                c.recycle(qs);
                break;
            }
            self.bytes.fetch_add(n, Ordering::AcqRel);
            data = &data[n..];
            done += n;
        }
        done
    }

    /// Producer: lends `f` room for up to `max` bytes (what the channel has room
    /// for, in one piece) in the packet buffer `fill` is filling, as
    /// [`ByteChan::push_filling`] writes into, or in a chunk of its own when the
    /// pool has no buffers to spare; queues what `f` says it wrote. The writer's
    /// bytes are written once, in place. Returns how many were queued: 0 when the
    /// channel is full (`f` not called), when `f` wrote nothing, or, rarely, when
    /// every queue slot is taken (what `f` wrote is then dropped; the writer
    /// writes it again).
    pub fn push_with(
        &self,
        max: usize,
        fill: &mut Option<mbuf::FillBuf>,
        mut f: impl FnMut(&mut [u8]) -> usize,
    ) -> usize {
        let room = max.min(self.space());
        if room == 0 {
            return 0;
        }
        let qs = self.queues();
        let from_fill = self
            .fill_buf(room, fill, &mut None)
            .and_then(|b| b.fill_with(room, &mut f).ok());
        let c = match from_fill {
            Some(m) if m.is_empty() => return 0,
            Some(m) => Chunk::Pkt(m),
            None => {
                // No packet buffer: a chunk of its own, lent whole.
                let n = room.min(CHUNK);
                let mut v = qs.take_free().unwrap_or_default();
                v.clear();
                v.resize(n, 0);
                let k = f(&mut v).min(n);
                v.truncate(k);
                if k == 0 {
                    qs.give_free(v);
                    return 0;
                }
                Chunk::Bytes(v)
            }
        };
        self.push_chunk(qs, c).unwrap_or(0)
    }

    /// Producer: takes bytes off the front of `m` by reference — its buffers
    /// become the channel's chunks, one per buffer run, nothing copied — as many
    /// as there is room for; `m` keeps the rest. Returns how many it took.
    pub fn push_mbuf(&self, m: &mut mbuf::Mbuf) -> usize {
        let mut done = 0;
        while !m.is_empty() {
            let n = m.first().len().min(self.space());
            if n == 0 {
                break;
            }
            let Ok(rest) = m.split(n) else { break };
            let head = std::mem::replace(m, rest);
            match self.queues().push(Chunk::Pkt(head)) {
                Ok(()) => {
                    self.bytes.fetch_add(n, Ordering::AcqRel);
                    done += n;
                }
                Err(c) => {
                    // No slot after all: the bytes go back in front of the rest.
                    if let Chunk::Pkt(head) = c {
                        let rest = std::mem::replace(m, head);
                        m.cat(rest);
                    }
                    break;
                }
            }
        }
        done
    }

    /// What of `data` the buffer being filled takes, as a chunk; a new buffer when
    /// it is full or there is none, if the pool has them to spare ([`mbuf::pool::
    /// plenty_for`]: at least half the buffers of each size are kept for
    /// packets). `None` when there is no buffer for it.
    fn fill_chunk(
        &self,
        data: &[u8],
        fill: &mut Option<mbuf::FillBuf>,
        plenty: &mut Option<bool>,
    ) -> Option<Chunk> {
        let m = self.fill_buf(data.len(), fill, plenty)?.fill(data).ok()?;
        (!m.is_empty()).then_some(Chunk::Pkt(m))
    }

    /// The writer's buffer being filled, with room: a new one, as large as `want`
    /// up to the channel's chunk size, when it is full or there is none, if the
    /// pool has them to spare (asked once per call through `plenty`).
    fn fill_buf<'f>(
        &self,
        want: usize,
        fill: &'f mut Option<mbuf::FillBuf>,
        plenty: &mut Option<bool>,
    ) -> Option<&'f mut mbuf::FillBuf> {
        if fill.as_ref().is_none_or(|f| f.room() == 0) {
            let len = want.clamp(PKT_CHUNK_MIN, self.pkt_chunk_len());
            if !*plenty.get_or_insert_with(|| mbuf::pool::plenty_for(len)) {
                return None;
            }
            *fill = Some(mbuf::FillBuf::new(len).ok()?);
        }
        fill.as_mut()
    }

    /// The largest packet-buffer chunk for this channel: a quarter of its bound,
    /// 64 KiB to [`PKT_CHUNK`], so that the bytes of a few chunks are always in
    /// flight and the writer refills one while the others wait for their ACK.
    /// (With 256 KiB chunks in a 256 KiB channel, bench tcp's mpstack-polled row
    /// lost 3%; with 64 KiB ones in the 1 MiB channels of mpstack-polled-big the
    /// 8% above.)
    /// Under a memory clamp, no larger than the clamp: a writer's buffer is
    /// memory too.
    fn pkt_chunk_len(&self) -> usize {
        let limit = self.limit.load(Ordering::Relaxed);
        if limit < self.cap() {
            return limit.clamp(PKT_CHUNK_MIN, PKT_CHUNK);
        }
        (self.cap() / 4).clamp(64 * 1024, PKT_CHUNK)
    }

    /// Consumer: gives back a chunk taken whole by [`ByteChan::drain_moving`], for the
    /// producer to fill again (dropped when there is no room).
    pub fn recycle(&self, c: Vec<u8>) {
        if let Some(qs) = self.qs.get() {
            qs.give_free(c);
        }
    }

    /// Producer: queues a received segment's data (`data`, in pieces that lie in the
    /// packet `m`), all of it or nothing but what fits. Runs of up to
    /// [`RUN_SEGS`] pieces go by reference to `m`'s buffers, one chunk each (no
    /// copy, and one queue slot for a whole merged segment rather than one per
    /// frame); a run that is short or fills less than a quarter of the buffers it
    /// would pin ([`worth_holding`]) is copied, runs next to each other into one
    /// chunk. What lies outside `m` (a gathered copy) is copied too. Returns how
    /// much was taken, and how much of it by reference.
    ///
    /// `last` is the producer's note of the buffer the last chunk held by reference
    /// ends in: a run that starts in it pins none of it anew, so that part does not
    /// count against the run (a sender's large buffer, cut into frames and merged
    /// again by LRO, arrives as several runs, and the later ones may be short).
    /// The chunks that lie in one buffer are then consecutive in the queue, the
    /// first of them worth holding on its own, so what the channel pins stays
    /// within the rule's bound of what it holds, but for the run of chunks the
    /// reader is taking from (which may have lost its first): one buffer.
    pub fn push_payload(
        &self,
        m: &mbuf::Mbuf,
        data: Payload<'_>,
        last: &mut Option<mbuf::BufId>,
    ) -> (usize, usize) {
        let total = data.len();
        if total == 0 {
            return (0, 0);
        }
        if total > self.space() {
            // As much as fits, copied; the rest waits for room.
            let mut n = 0;
            for p in data.pieces() {
                let k = self.push(p);
                n += k;
                if k < p.len() {
                    break;
                }
            }
            return (n, 0);
        }
        let qs = self.queues();
        let mut off = data.pieces().next().and_then(|p| offset_in(m, p));
        let (mut done, mut by_ref) = (0, 0);
        // Copied runs gather here until a run by reference (or the end) comes.
        let mut copy: Option<Vec<u8>> = None;
        let mut pieces = data.pieces().peekable();
        while pieces.peek().is_some() {
            let mut run = Payload::default();
            for _ in 0..RUN_SEGS {
                match pieces.next() {
                    Some(p) => {
                        run.push(p);
                    }
                    None => break,
                }
            }
            let len = run.len();
            let held = off
                .filter(|o| len >= HOLD_MIN && o + len <= m.len())
                .and_then(|o| m.copym(o, len).ok())
                .filter(|c| worth_holding(c.buf_bytes_except(*last), len));
            off = off.map(|o| o + len);
            match held {
                Some(c) => {
                    if let Some(v) = copy.take() {
                        match self.push_chunk(qs, Chunk::Bytes(v)) {
                            Ok(n) => done += n,
                            Err(()) => return (done, by_ref),
                        }
                    }
                    let end = c.last_buf();
                    match self.push_chunk(qs, Chunk::Pkt(c)) {
                        Ok(n) => (done, by_ref, *last) = (done + n, by_ref + n, end),
                        Err(()) => return (done, by_ref),
                    }
                }
                None => {
                    let v = copy.get_or_insert_with(|| {
                        let want = (total - done).clamp(MIN_CHUNK, RX_CHUNK);
                        let mut v = qs
                            .take_free()
                            .unwrap_or_else(|| Vec::with_capacity(want.next_power_of_two()));
                        v.clear();
                        v
                    });
                    for p in run.pieces() {
                        v.extend_from_slice(p);
                    }
                }
            }
        }
        if let Some(v) = copy {
            if let Ok(n) = self.push_chunk(qs, Chunk::Bytes(v)) {
                done += n;
            }
        }
        (done, by_ref)
    }

    /// Producer: queues one chunk and counts its bytes; `Err` (the chunk recycled)
    /// when every slot is taken.
    fn push_chunk(&self, qs: &Queues, c: Chunk) -> Result<usize, ()> {
        let n = c.len();
        match qs.push(c) {
            Ok(()) => {
                self.bytes.fetch_add(n, Ordering::AcqRel);
                Ok(n)
            }
            Err(c) => {
                c.recycle(qs);
                Err(())
            }
        }
    }

    /// Consumer: copies up to `buf.len()` bytes out; `partial` holds the chunk being
    /// read (consumer-side state) as (chunk, offset).
    pub fn pop_into(&self, partial: &mut Option<(Chunk, usize)>, buf: &mut [u8]) -> usize {
        let mut done = 0;
        self.drain_with(partial, buf.len(), |b| {
            buf[done..done + b.len()].copy_from_slice(b);
            done += b.len();
            b.len()
        })
    }

    /// Consumer: hands up to `max` bytes to `f` chunk piece by chunk piece; `f` returns
    /// how many it took (stops early when it takes less).
    pub fn drain_with(
        &self,
        partial: &mut Option<(Chunk, usize)>,
        max: usize,
        mut f: impl FnMut(&[u8]) -> usize,
    ) -> usize {
        self.drain_moving(partial, max, usize::MAX, |p| match p {
            Piece::Part(b) | Piece::InPkt { data: b, .. } => f(b),
            Piece::Whole(_) => unreachable!("no chunk is whole-sized at usize::MAX"),
        })
    }

    /// Consumer: as [`ByteChan::drain_with`], but a chunk of at least `whole` bytes
    /// that fits in what is left of `max` goes to `f` by value ([`Piece::Whole`],
    /// which must take all of it): the consumer keeps the bytes without copying them
    /// and gives the chunk back later through [`ByteChan::recycle`].
    pub fn drain_moving(
        &self,
        partial: &mut Option<(Chunk, usize)>,
        max: usize,
        whole: usize,
        mut f: impl FnMut(Piece<'_>) -> usize,
    ) -> usize {
        let Some(qs) = self.qs.get() else {
            return 0;
        };
        let mut done = 0;
        while done < max {
            if partial.is_none() {
                match qs.pop() {
                    Some(Chunk::Bytes(c)) if c.len() >= whole && c.len() <= max - done => {
                        done += c.len();
                        f(Piece::Whole(c));
                        continue;
                    }
                    Some(c) => *partial = Some((c, 0)),
                    None => break,
                }
            }
            let Some((c, off)) = partial.as_mut() else {
                break;
            };
            let run = c.run_at(*off);
            let want = run.len().min(max - done);
            let data = &run[..want];
            let took = match &*c {
                Chunk::Pkt(m) => f(Piece::InPkt { m, off: *off, data }),
                Chunk::Bytes(_) => f(Piece::Part(data)),
            }
            .min(want);
            *off += took;
            done += took;
            if *off == c.len() {
                if let Some((c, _)) = partial.take() {
                    c.recycle(qs);
                }
            }
            if took < want || want == 0 {
                break;
            }
        }
        self.bytes.fetch_sub(done, Ordering::AcqRel);
        done
    }
}

/// Data shorter than this is copied rather than held by reference to a packet
/// buffer.
pub(crate) const HOLD_MIN: usize = 1024;
/// Most pieces of a received segment one chunk holds by reference: what a packet
/// holds without a list on the heap (`mbuf`'s inline segments).
const RUN_SEGS: usize = 4;
/// Largest chunk a received segment's copied data takes: a whole 64 KiB segment.
const RX_CHUNK: usize = 64 * 1024;
/// A write at least this long starts a writer filling packet buffers (a quarter of
/// a jumbo cluster's 64 KiB, the ratio of [`worth_holding`]), up to [`PKT_CHUNK`]
/// bytes each ([`ByteChan::push_filling`]).
const PKT_CHUNK_MIN: usize = 16 * 1024;
/// Bytes per packet-buffer chunk: 256 KiB, in a 256 KiB cluster (a jumbo cluster
/// for less than it holds). Against 64 KiB chunks, a quarter of the per-chunk work
/// (allocate, queue, share, free) for a bulk transfer: bench tcp's
/// mpstack-polled-big row moved 148.2-153.2 Gbit/s against 139.4-142.7, six runs
/// each, alternated.
const PKT_CHUNK: usize = 256 * 1024;

/// Where `piece` starts in the packet `m`, if it lies in one of its segments.
fn offset_in(m: &mbuf::Mbuf, piece: &[u8]) -> Option<usize> {
    let at = piece.as_ptr() as usize;
    let mut pos = 0;
    for s in m.segments() {
        let base = s.as_ptr() as usize;
        if at >= base && at + piece.len() <= base + s.len() {
            return Some(pos + (at - base));
        }
        pos += s.len();
    }
    None
}

/// Whether `len` bytes are worth holding by reference in buffers of `pinned`
/// bytes (rather than copied): they must be a good part of the buffers they pin,
/// about a quarter (the buffers at most 4.25 times the bytes), or a stream of small
/// segments in large buffers would hold far more memory than a channel's bound
/// says. A receiver applies it before it queues data by reference (with
/// [`HOLD_MIN`]). (A quarter and a bit: a 64 KiB segment's data, 65,483 bytes with
/// timestamps, is a little under a quarter of a 256 KiB cluster with its headroom.)
fn worth_holding(pinned: usize, len: usize) -> bool {
    pinned.saturating_mul(4) <= len.saturating_mul(17)
}

impl Chunk {
    /// Done with: own bytes go back for reuse, a packet's buffer to its pool.
    fn recycle(self, qs: &Queues) {
        if let Chunk::Bytes(v) = self {
            qs.give_free(v);
        }
    }
}

/// What [`ByteChan::drain_moving`] hands its consumer.
#[derive(Debug)]
pub(crate) enum Piece<'a> {
    /// A whole chunk, moved.
    Whole(Vec<u8>),
    /// Bytes to copy; the consumer says how many it took.
    Part(&'a [u8]),
    /// Bytes that lie in the packet `m` at offset `off`: the consumer copies them,
    /// or keeps a reference ([`mbuf::Mbuf::copym`]); it says how many it took.
    InPkt {
        m: &'a mbuf::Mbuf,
        off: usize,
        data: &'a [u8],
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn header_and_second(m: &mbuf::Mbuf) -> (&[u8], &[u8]) {
        let mut s = m.segments();
        (s.next().unwrap(), s.next().unwrap())
    }

    #[test]
    fn large_writes_go_into_packet_buffers_the_consumer_may_share() {
        let ch = ByteChan::new(256 * 1024);
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
        // A writer's bytes fill jumbo clusters (66 KiB), one chunk a piece; its next
        // write, however small, goes on in the last one. Without a buffer being
        // filled, a small write is a chunk of its own.
        let mut fill = None;
        assert_eq!(ch.push_filling(&data[..150_000], &mut fill), 150_000);
        assert_eq!(ch.push_filling(&data[150_000..150_100], &mut fill), 100);
        assert_eq!(ch.push(&data[150_100..150_200]), 100);
        let mut partial = None;
        let (mut got, mut kinds) = (Vec::new(), Vec::new());
        // The consumer takes at most 50,000 bytes at a time: a chunk is shared in parts.
        loop {
            let n = ch.drain_moving(&mut partial, 50_000, usize::MAX, |p| match p {
                Piece::InPkt { m, off, data } => {
                    assert_eq!(m.copym(off, data.len()).unwrap().to_vec(), data);
                    kinds.push(('p', data.len()));
                    got.extend_from_slice(data);
                    data.len()
                }
                Piece::Part(b) => {
                    kinds.push(('b', b.len()));
                    got.extend_from_slice(b);
                    b.len()
                }
                Piece::Whole(_) => unreachable!(),
            });
            if n == 0 {
                break;
            }
        }
        assert_eq!(got, data[..150_200]);
        assert_eq!(
            kinds,
            [
                ('p', 50_000),
                ('p', 17_584),
                ('p', 32_416),
                ('p', 35_168),
                ('p', 14_832),
                ('p', 100),
                ('b', 100)
            ]
        );
        assert!(ch.is_empty());
    }

    /// A merged segment (a header buffer, then the frames' data in buffers of their
    /// own): its data go by reference in chunks of a few pieces each, not one a
    /// frame, and read back in order whatever the reads' sizes.
    #[test]
    fn a_merged_segments_data_goes_in_a_few_chunks() {
        let ch = ByteChan::new(256 * 1024);
        let frames: Vec<Vec<u8>> = (0..6u32)
            .map(|k| (0..1448u32).map(|i| ((k * 1448 + i) % 251) as u8).collect())
            .collect();
        let mut m = mbuf::Mbuf::from_slice(b"headers").unwrap();
        for f in &frames {
            m.cat(mbuf::Mbuf::from_slice(f).unwrap());
        }
        let mut data = Payload::default();
        for (i, s) in m.segments().enumerate() {
            data.push(if i == 0 { &s[7..] } else { s });
        }
        assert_eq!(ch.push_payload(&m, data, &mut None), (6 * 1448, 6 * 1448));
        assert_eq!(ch.queues().q.len(), 2, "four pieces, then two");
        // Not in the packet (gathered into a scratch buffer): copied, into one chunk.
        let flat: Vec<u8> = frames.concat();
        let mut scattered = Payload::default();
        for c in flat.chunks(1000) {
            scattered.push(c);
        }
        assert_eq!(ch.push_payload(&m, scattered, &mut None), (flat.len(), 0));
        assert_eq!(ch.queues().q.len(), 3);
        let mut partial = None;
        let mut got = Vec::new();
        let mut out = vec![0u8; 777];
        loop {
            let k = ch.pop_into(&mut partial, &mut out);
            if k == 0 {
                break;
            }
            got.extend_from_slice(&out[..k]);
        }
        assert_eq!(got, [&flat[..], &flat[..]].concat());
        assert!(ch.is_empty());
        // More than there is room for: what fits, copied.
        let small = ByteChan::new(4096);
        assert_eq!(small.push_payload(&m, data, &mut None), (4096, 0));
    }

    /// A sender's large buffer cut into frames and merged again arrives as runs of
    /// it: the first must be worth holding on its own, the next ones pin nothing
    /// more of it and are held however short.
    #[test]
    fn runs_of_a_buffer_already_held_are_held_too() {
        let ch = ByteChan::new(256 * 1024);
        let big: Vec<u8> = (0..60_000u32).map(|i| (i % 241) as u8).collect();
        let mut x = mbuf::Mbuf::with_capacity(big.len()).unwrap();
        x.append(&big).unwrap();
        let y = x.copym(0, big.len()).unwrap();
        let mut last = None;
        // 2,000 bytes of a 66 KiB buffer, before anything of it is held: copied.
        fn piece(m: &mbuf::Mbuf, a: usize, b: usize) -> Payload<'_> {
            Payload::from(&m.first()[a..b])
        }
        assert_eq!(
            ch.push_payload(&x, piece(&x, 0, 2000), &mut last),
            (2000, 0)
        );
        assert_eq!(last, None);
        // 20,000 bytes of it: held; then 2,000 more of the same buffer: held too.
        let run = |a, b| ch.push_payload(&y, piece(&y, a, b), &mut None);
        assert_eq!(
            ch.push_payload(&x, piece(&x, 2000, 22_000), &mut last),
            (20_000, 20_000)
        );
        assert_eq!(last, x.last_buf());
        assert_eq!(
            ch.push_payload(&y, piece(&y, 22_000, 24_000), &mut last),
            (2000, 2000)
        );
        // Without the note, the same run is copied.
        assert_eq!(run(24_000, 26_000), (2000, 0));
        let mut other = mbuf::Mbuf::with_capacity(big.len()).unwrap();
        other.append(&big).unwrap();
        assert_eq!(
            ch.push_payload(&other, piece(&other, 0, 2000), &mut last),
            (2000, 0)
        );
        let mut got = Vec::new();
        let mut partial = None;
        let mut out = vec![0u8; 4096];
        loop {
            let k = ch.pop_into(&mut partial, &mut out);
            if k == 0 {
                break;
            }
            got.extend_from_slice(&out[..k]);
        }
        assert_eq!(got, [&big[..26_000], &big[..2000]].concat());
    }

    #[test]
    fn push_mbuf_queues_the_buffers_themselves_as_far_as_there_is_room() {
        let ch = ByteChan::new(3000);
        let a: Vec<u8> = (0..1800u32).map(|i| i as u8).collect();
        let b: Vec<u8> = (0..1500u32).map(|i| (i * 3) as u8).collect();
        let mut m = mbuf::Mbuf::from_slice(&a).unwrap();
        m.cat(mbuf::Mbuf::from_slice(&b).unwrap());
        let (pa, pb) = {
            let mut s = m.segments();
            (s.next().unwrap().as_ptr(), s.next().unwrap().as_ptr())
        };
        // Room for 3,000 of 3,300: the first buffer whole, 1,200 of the second.
        assert_eq!(ch.push_mbuf(&mut m), 3000);
        assert_eq!(m.len(), 300);
        assert_eq!(m.first(), &b[1200..]);
        assert_eq!(ch.push_mbuf(&mut m), 0, "full");
        assert_eq!(m.len(), 300, "kept");
        for (ptr, want) in [(pa, &a[..]), (pb, &b[..1200])] {
            match ch.queues().pop() {
                Some(Chunk::Pkt(c)) => {
                    assert_eq!(c.first(), want);
                    assert_eq!(c.first().as_ptr(), ptr, "the application's buffer itself");
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn received_data_is_queued_by_reference_only_when_it_fills_its_buffer() {
        let ch = ByteChan::new(64 * 1024);
        let frame: Vec<u8> = (0..1600u32).map(|i| (i % 251) as u8).collect();
        let m = mbuf::Mbuf::from_slice(&frame).unwrap();
        // 1,500 bytes of a 2 KiB cluster: held by reference, the buffer shared.
        let data = &m.first()[100..1600];
        assert_eq!(ch.push_payload(&m, data.into(), &mut None), (1500, 1500));
        match ch.queues().pop() {
            Some(Chunk::Pkt(held)) => {
                assert_eq!(held.len(), 1500);
                assert_eq!(held.first(), data);
                assert_eq!(held.first().as_ptr(), data.as_ptr(), "the same bytes");
            }
            other => panic!("{other:?}"),
        }
        ch.bytes.store(0, Ordering::Release);
        // In a later segment of a chain (a header buffer, then shared data): held too.
        let mut chain = mbuf::Mbuf::from_slice(b"header").unwrap();
        chain.cat(m.copym(0, 1600).unwrap());
        let (_, d) = header_and_second(&chain);
        assert_eq!(
            ch.push_payload(&chain, d[10..1510].into(), &mut None),
            (1500, 1500)
        );
        match ch.queues().pop() {
            Some(Chunk::Pkt(held)) => assert_eq!(held.first(), &frame[10..1510]),
            other => panic!("{other:?}"),
        }
        ch.bytes.store(0, Ordering::Release);
        // Short, or not inside the packet: copied.
        assert_eq!(
            ch.push_payload(&m, m.first()[..100].into(), &mut None),
            (100, 0)
        );
        assert_eq!(
            ch.push_payload(&m, frame[..1200].into(), &mut None),
            (1200, 0)
        );
        assert!(matches!(ch.queues().pop(), Some(Chunk::Bytes(v)) if v.len() == 100));
        assert!(matches!(ch.queues().pop(), Some(Chunk::Bytes(v)) if v.len() == 1200));
        ch.bytes.store(0, Ordering::Release);
        // 1,500 bytes in a 66 KiB jumbo cluster would pin 44 times their size: copied.
        let mut big = mbuf::Mbuf::with_capacity(60_000).unwrap();
        big.append(&frame).unwrap();
        assert_eq!(
            ch.push_payload(&big, big.first()[..1500].into(), &mut None),
            (1500, 0)
        );
        assert!(matches!(ch.queues().pop(), Some(Chunk::Bytes(_))));
        ch.bytes.store(0, Ordering::Release);
        // Mixed with copied chunks, the stream reads back in order.
        let mut want = Vec::new();
        for i in 0..6 {
            if i % 2 == 0 {
                assert_eq!(
                    ch.push_payload(&m, m.first()[..1600].into(), &mut None).0,
                    1600
                );
                want.extend_from_slice(&frame);
            } else {
                assert_eq!(ch.push(&frame[..77]), 77);
                want.extend_from_slice(&frame[..77]);
            }
        }
        let mut partial = None;
        let mut got = vec![0u8; want.len() + 10];
        let mut n = 0;
        while n < want.len() {
            let end = (n + 999).min(got.len());
            let k = ch.pop_into(&mut partial, &mut got[n..end]);
            assert!(k > 0);
            n += k;
        }
        assert_eq!(&got[..n], &want[..]);
        assert!(ch.is_empty());
    }

    #[test]
    fn byte_chan_moves_bytes_in_order_and_bounds_them() {
        let c = ByteChan::new(40_000);
        let data: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let n = c.push(&data);
        assert_eq!(n, 40_000);
        assert_eq!(c.space(), 0);
        let mut partial = None;
        let mut out = vec![0u8; 1000];
        let mut got = Vec::new();
        loop {
            let k = c.pop_into(&mut partial, &mut out);
            if k == 0 {
                break;
            }
            got.extend_from_slice(&out[..k]);
        }
        assert_eq!(got, data[..40_000]);
        assert!(c.is_empty());
        // Chunks are recycled: the next push reuses them.
        assert_eq!(c.push(&data[..5]), 5);
        let mut taken = Vec::new();
        let k = c.drain_with(&mut partial, 3, |b| {
            taken.extend_from_slice(b);
            b.len()
        });
        assert_eq!((k, &taken[..]), (3, &data[..3]));
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn small_pushes_spill_into_the_large_tier_in_order() {
        // 100-byte pushes: the first SMALL fill the small tier, the rest go to the
        // large one, made on the spot; the reader sees them in push order, and the
        // slot bound (42 for 40,000 bytes) stops the writer before the byte bound.
        let c = ByteChan::new(40_000);
        let mut pushed = Vec::new();
        for i in 0..1000u32 {
            let piece = [i as u8; 100];
            if c.push(&piece) == 0 {
                break;
            }
            pushed.extend_from_slice(&piece);
        }
        assert_eq!(pushed.len(), 100 * 42, "one chunk per slot");
        assert_eq!(c.space(), 0);
        let mut partial = None;
        let mut out = vec![0u8; 333];
        let mut got = Vec::new();
        loop {
            let k = c.pop_into(&mut partial, &mut out);
            if k == 0 {
                break;
            }
            got.extend_from_slice(&out[..k]);
        }
        assert_eq!(got, pushed);
    }

    #[test]
    fn a_writer_and_a_reader_thread_keep_the_byte_order() {
        // The tier switch happens while the reader drains: no byte is lost,
        // duplicated or reordered.
        let c = Arc::new(ByteChan::new(64 * 1024));
        const TOTAL: usize = 4 << 20;
        let w = {
            let c = c.clone();
            std::thread::spawn(move || {
                let mut sent = 0usize;
                let mut sizes = [7usize, 1, 300, 1448, 20_000, 64].iter().cycle();
                while sent < TOTAL {
                    let n = (*sizes.next().unwrap()).min(TOTAL - sent);
                    let piece: Vec<u8> = (sent..sent + n).map(|i| (i % 251) as u8).collect();
                    let mut off = 0;
                    while off < n {
                        let k = c.push(&piece[off..]);
                        if k == 0 {
                            std::thread::yield_now();
                        }
                        off += k;
                    }
                    sent += n;
                }
            })
        };
        let mut partial = None;
        let mut out = vec![0u8; 4096];
        let mut at = 0usize;
        while at < TOTAL {
            let k = c.pop_into(&mut partial, &mut out);
            if k == 0 {
                std::thread::yield_now();
                continue;
            }
            for (j, b) in out[..k].iter().enumerate() {
                assert_eq!(*b, ((at + j) % 251) as u8, "byte {}", at + j);
            }
            at += k;
        }
        w.join().unwrap();
        assert!(c.is_empty());
    }
}
