//! A packet generator and packet sinks in memory: the traffic source and the links
//! out of a device under test, for benchmarks of the real stack (`mpstack bench
//! router`), with no kernel in the way.
//!
//! What it owns: frame templates per queue, the sinks' counters, and one recycling
//! list per queue index. A generator queue is a receive ring that never runs dry:
//! each `rx_burst` hands out `max` frames, the templates in turn. A sink queue is a
//! transmit ring whose wire takes everything: `tx_burst` counts the frames and gives
//! their buffers back to the generator queue of the same index, as a NIC's driver
//! refills its receive ring with the buffers transmission completed. With one worker
//! per queue index (the stack gives queue `q` to worker `q % workers`), a buffer stays
//! on its worker's core from reception to transmission and back.
//!
//! What a frame costs here is what a NIC's descriptor handling costs a driver: a
//! recycled buffer is reset and the template's bytes written into it (the DMA), the
//! header gets the queue and the template's RSS hash (Toeplitz, precomputed as a NIC
//! computes it), and the sink's count is a plain add. Nothing is allocated once the
//! recycling lists hold a burst's worth, and no lock is taken per frame: each list is
//! locked once per burst by each side (the same thread, so never contended).
//! `mpstack bench router` measures this cost alone in its "devices only" row.
//!
//! With [`Buffers::Pool`] ([`PktGen::with_buffers`]) there is no recycling list: a
//! sink frees each buffer to the mbuf pool (the worker's per-thread cache) and the
//! generator allocates a cluster from it for each frame, as a driver refills its
//! receive ring with `m_getcl`; what the pool's allocation and free add is then in
//! every packet's cost.
//!
//! Call order: build a [`PktGen`] for a number of queues, make its devices
//! ([`PktGen::generator`], [`PktGen::sink`]), attach them to a stack, and read
//! [`PktGen::counts`] while it runs.

use crate::{rss, Device, DeviceInfo, Instant, Mbuf, Offloads, Queue, QueueStats};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Buffers a recycling list keeps at most: beyond, the sink frees them (a sink
/// that transmits more than its generator receives does not grow without bound).
const RECYCLE_MAX: usize = 8192;

/// Where the sinks put the buffers they are done with, and where the generator gets
/// the buffers it fills.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Buffers {
    /// Straight back to the generator queue of the same index (a recycling list per
    /// queue), reset and refilled there: no allocation and no free once the lists
    /// hold a burst's worth.
    #[default]
    Recycled,
    /// Freed to the mbuf pool by the sink, allocated from it by the generator, one
    /// cluster a frame: a driver's receive refill and transmit completion.
    Pool,
}

/// Counters of one queue index, written once per burst by its owner; a cache line
/// pair of its own, so that two workers' queues share no line (as two NIC queues
/// share no register).
#[derive(Debug, Default)]
#[repr(align(128))]
struct QueueCounts {
    generated: AtomicU64,
    sunk: AtomicU64,
    sunk_bytes: AtomicU64,
}

/// What the generator and the sinks of one setup share.
#[derive(Debug)]
struct Shared {
    queues: usize,
    buffers: Buffers,
    recycle: Vec<Padded<Mutex<Vec<Mbuf>>>>,
    counts: Vec<QueueCounts>,
    mtu: usize,
    /// Frames the sinks still copy into `captured` (checked once per burst).
    capture_left: AtomicUsize,
    captured: Mutex<Vec<Vec<u8>>>,
}

/// A value on cache lines of its own: the per-queue recycle lists are locked by
/// their own worker on every burst, and a lock word on a line another worker's
/// lock also sits on would bounce between the cores.
#[derive(Debug)]
#[repr(align(128))]
struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Packets generated and sunk so far, over all queues.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GenCounts {
    pub generated: u64,
    pub sunk: u64,
    pub sunk_bytes: u64,
}

/// One generator-and-sinks setup of `queues` queue pairs per device.
#[derive(Clone, Debug)]
pub struct PktGen {
    shared: Arc<Shared>,
}

impl PktGen {
    /// A setup whose devices have `queues` queue pairs each (one per worker) and
    /// carry packets up to `mtu` bytes.
    pub fn new(queues: usize, mtu: usize) -> PktGen {
        PktGen::with_buffers(queues, mtu, Buffers::Recycled)
    }

    /// [`PktGen::new`] with the buffers handled as `buffers` says.
    pub fn with_buffers(queues: usize, mtu: usize, buffers: Buffers) -> PktGen {
        let queues = queues.max(1);
        PktGen {
            shared: Arc::new(Shared {
                queues,
                buffers,
                recycle: (0..queues)
                    .map(|_| Padded(Mutex::new(Vec::with_capacity(RECYCLE_MAX))))
                    .collect(),
                counts: (0..queues).map(|_| QueueCounts::default()).collect(),
                mtu,
                capture_left: AtomicUsize::new(0),
                captured: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The generator: a device whose receive queues hand out `frames`, each queue
    /// those whose RSS hash picks it (as a NIC spreads flows), in the order given,
    /// over and over. A queue that no frame hashes to repeats the whole list.
    pub fn generator(&self, name: &str, frames: &[Vec<u8>]) -> GenDevice {
        let n = self.shared.queues;
        let hashes: Vec<u32> = frames.iter().map(|f| rss::frame_hash(f)).collect();
        let mut picks: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, &h) in hashes.iter().enumerate() {
            picks[rss::queue_of(h, n)].push(i);
        }
        let per_queue = picks
            .into_iter()
            .map(|mut pick| {
                if pick.is_empty() {
                    pick = (0..frames.len()).collect();
                }
                Templates::of(pick.iter().map(|&i| (&frames[i][..], hashes[i])))
            })
            .collect();
        GenDevice {
            shared: self.shared.clone(),
            name: name.to_string(),
            per_queue,
        }
    }

    /// A sink: a device whose transmit queues take every frame.
    pub fn sink(&self, name: &str) -> SinkDevice {
        SinkDevice {
            shared: self.shared.clone(),
            name: name.to_string(),
        }
    }

    /// Makes the sinks keep a copy of the next `frames` frames they take (and
    /// forgets those kept before): for checking what a stack sends before timing it.
    pub fn capture(&self, frames: usize) {
        lock(&self.shared.captured).clear();
        self.shared.capture_left.store(frames, Ordering::Relaxed);
    }

    /// The frames kept since [`PktGen::capture`].
    pub fn captured(&self) -> Vec<Vec<u8>> {
        lock(&self.shared.captured).clone()
    }

    /// [`PktGen::counts`] per queue index (per worker, when each worker owns the
    /// queues of one index).
    pub fn queue_counts(&self) -> Vec<GenCounts> {
        self.shared
            .counts
            .iter()
            .map(|q| GenCounts {
                generated: q.generated.load(Ordering::Relaxed),
                sunk: q.sunk.load(Ordering::Relaxed),
                sunk_bytes: q.sunk_bytes.load(Ordering::Relaxed),
            })
            .collect()
    }

    /// Frames generated and sunk so far (as of each queue's last burst).
    pub fn counts(&self) -> GenCounts {
        let mut c = GenCounts::default();
        for q in &self.shared.counts {
            c.generated += q.generated.load(Ordering::Relaxed);
            c.sunk += q.sunk.load(Ordering::Relaxed);
            c.sunk_bytes += q.sunk_bytes.load(Ordering::Relaxed);
        }
        c
    }

    /// Runs a generator queue straight into a sink queue of the same index, with no
    /// stack in between, for `packets` frames in bursts of `burst`: the cost the
    /// devices alone add to every packet of a benchmark.
    pub fn loopback(gen: &mut dyn Queue, sink: &mut dyn Queue, packets: u64, burst: usize) {
        let mut v = Vec::with_capacity(burst);
        let mut done = 0;
        while done < packets {
            let n = gen.rx_burst(Instant::ZERO, &mut v, burst);
            done += n as u64;
            sink.tx_burst(Instant::ZERO, &mut v);
        }
    }
}

/// Templates ahead of the one being handed out whose bytes are prefetched.
const PREFETCH_AHEAD: usize = 8;

/// A queue's frames, their bytes back to back in one buffer (in huge pages when
/// large: a million frames are 64 MB that the queue reads in order, as a NIC's
/// receive ring is written in order), and where each is.
#[derive(Debug)]
struct Templates {
    bytes: mbuf::mem::HugeSlice<u8>,
    list: Vec<Template>,
}

#[derive(Clone, Copy, Debug)]
struct Template {
    off: usize,
    len: u32,
    hash: u32,
}

impl Templates {
    fn of<'a>(frames: impl Iterator<Item = (&'a [u8], u32)>) -> Templates {
        let mut bytes = Vec::new();
        let mut list = Vec::new();
        for (f, hash) in frames {
            list.push(Template {
                off: bytes.len(),
                len: f.len() as u32,
                hash,
            });
            bytes.extend_from_slice(f);
        }
        Templates {
            bytes: mbuf::mem::HugeSlice::from_slice(&bytes),
            list,
        }
    }

    /// Starts fetching template `i`'s bytes into the cache (none past the list's
    /// end: the few after the wrap are read cold, and no division per frame).
    #[inline]
    fn prefetch(&self, i: usize) {
        #[cfg(target_arch = "x86_64")]
        if let Some(t) = self.list.get(i) {
            let p = self.bytes[t.off..].as_ptr();
            // SAFETY: `_mm_prefetch` only hints the cache; it reads nothing the
            // program sees and faults on no address (`p` points into `bytes`
            // anyway). SSE is part of x86-64.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast())
            };
        }
    }

    #[inline]
    fn frame(&self, t: Template) -> &[u8] {
        &self.bytes[t.off..t.off + t.len as usize]
    }
}

/// The generator's device ([`PktGen::generator`]).
#[derive(Debug)]
pub struct GenDevice {
    shared: Arc<Shared>,
    name: String,
    per_queue: Vec<Templates>,
}

impl Device for GenDevice {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            name: self.name.clone(),
            mtu: self.shared.mtu,
            num_queues: self.shared.queues,
            hw_addr: None,
            offload: Offloads::default(),
        }
    }
    fn into_queues(self: Box<Self>) -> Vec<Box<dyn Queue>> {
        let shared = self.shared;
        self.per_queue
            .into_iter()
            .enumerate()
            .map(|(q, templates)| {
                Box::new(GenQueue {
                    shared: shared.clone(),
                    queue: q,
                    templates,
                    next: 0,
                    stats: QueueStats::default(),
                    spare: Vec::new(),
                }) as Box<dyn Queue>
            })
            .collect()
    }
}

/// One receive queue of the generator.
#[derive(Debug)]
pub struct GenQueue {
    shared: Arc<Shared>,
    queue: usize,
    templates: Templates,
    next: usize,
    stats: QueueStats,
    /// Buffers taken from the recycling list and not yet used (kept across bursts
    /// so the list is locked once per burst).
    spare: Vec<Mbuf>,
}

impl Queue for GenQueue {
    fn rx_burst(&mut self, _now: Instant, out: &mut Vec<Mbuf>, max: usize) -> usize {
        if self.templates.list.is_empty() {
            return 0;
        }
        if self.spare.len() < max && self.shared.buffers == Buffers::Recycled {
            let mut r = lock(&self.shared.recycle[self.queue]);
            let take = r.len().min(max.saturating_mul(2));
            let at = r.len() - take;
            self.spare.extend(r.drain(at..));
        }
        let mut n = 0;
        let mut bytes = 0;
        while n < max {
            let t = self.templates.list[self.next];
            self.next += 1;
            if self.next == self.templates.list.len() {
                self.next = 0;
            }
            // A NIC's DMA leaves a frame in the cache before the driver reads it; a
            // template a few frames ahead is fetched meanwhile, so that a long list
            // (a million flows) streams from memory as a receive ring does not.
            self.templates.prefetch(self.next + PREFETCH_AHEAD);
            let frame = self.templates.frame(t);
            let m = match self.spare.pop() {
                Some(mut m) => m.recycle(frame).map(|()| m),
                None => Mbuf::with_capacity(frame.len()).and_then(|mut m| {
                    m.append(frame)?;
                    Ok(m)
                }),
            };
            let Ok(mut m) = m else {
                self.stats.idrops += 1;
                break;
            };
            m.hdr.rxq = self.queue as u16;
            m.hdr.rss_hash = t.hash;
            bytes += u64::from(t.len);
            out.push(m);
            n += 1;
        }
        self.stats.ipackets += n as u64;
        self.stats.ibytes += bytes;
        self.shared.counts[self.queue]
            .generated
            .store(self.stats.ipackets, Ordering::Relaxed);
        n
    }

    fn tx_burst(&mut self, _now: Instant, pkts: &mut Vec<Mbuf>) -> usize {
        // A generator has no wire to send on.
        self.stats.odrops += pkts.len() as u64;
        pkts.clear();
        0
    }

    fn stats(&self) -> QueueStats {
        self.stats
    }
}

/// A sink's device ([`PktGen::sink`]).
#[derive(Debug)]
pub struct SinkDevice {
    shared: Arc<Shared>,
    name: String,
}

impl Device for SinkDevice {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            name: self.name.clone(),
            mtu: self.shared.mtu,
            num_queues: self.shared.queues,
            hw_addr: None,
            offload: Offloads::default(),
        }
    }
    fn into_queues(self: Box<Self>) -> Vec<Box<dyn Queue>> {
        (0..self.shared.queues)
            .map(|q| {
                Box::new(SinkQueue {
                    shared: self.shared.clone(),
                    queue: q,
                    stats: QueueStats::default(),
                }) as Box<dyn Queue>
            })
            .collect()
    }
}

/// One transmit queue of a sink.
#[derive(Debug)]
pub struct SinkQueue {
    shared: Arc<Shared>,
    queue: usize,
    stats: QueueStats,
}

impl Queue for SinkQueue {
    fn rx_burst(&mut self, _now: Instant, _out: &mut Vec<Mbuf>, _max: usize) -> usize {
        0
    }

    fn tx_burst(&mut self, _now: Instant, pkts: &mut Vec<Mbuf>) -> usize {
        let n = pkts.len();
        let mut bytes = 0;
        for m in pkts.iter() {
            bytes += m.len() as u64;
        }
        if self.shared.capture_left.load(Ordering::Relaxed) > 0 {
            let mut c = lock(&self.shared.captured);
            for m in pkts.iter() {
                let left = self.shared.capture_left.load(Ordering::Relaxed);
                if left == 0 {
                    break;
                }
                self.shared.capture_left.store(left - 1, Ordering::Relaxed);
                c.push(m.to_vec());
            }
        }
        if self.shared.buffers == Buffers::Recycled {
            let mut r = lock(&self.shared.recycle[self.queue]);
            let room = RECYCLE_MAX.saturating_sub(r.len()).min(n);
            r.extend(pkts.drain(..room));
        }
        // What is left (all of it with `Buffers::Pool`) goes back to the pool.
        pkts.clear();
        self.stats.opackets += n as u64;
        self.stats.obytes += bytes;
        let c = &self.shared.counts[self.queue];
        c.sunk.fetch_add(n as u64, Ordering::Relaxed);
        c.sunk_bytes.fetch_add(bytes, Ordering::Relaxed);
        n
    }

    fn stats(&self) -> QueueStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames() -> Vec<Vec<u8>> {
        (0..8u8)
            .map(|i| {
                let mut f = vec![0u8; 64];
                f[12] = 0x08; // IPv4
                f[14] = 0x45;
                f[26..30].copy_from_slice(&[198, 18, 0, i]);
                f[30..34].copy_from_slice(&[198, 19, i, 1]);
                f
            })
            .collect()
    }

    #[test]
    fn generator_hands_out_templates_in_turn_and_the_sink_recycles() {
        let g = PktGen::new(1, 1500);
        let fr = frames();
        let mut gq = Box::new(g.generator("gen", &fr)).into_queues();
        let mut sq = Box::new(g.sink("sink")).into_queues();
        let mut v = Vec::new();
        assert_eq!(gq[0].rx_burst(Instant::ZERO, &mut v, 12), 12);
        for (i, m) in v.iter().enumerate() {
            assert_eq!(m.to_vec(), fr[i % fr.len()]);
        }
        // A frame the stack changed comes back as the template.
        v[0].copyback(0, &[0xff; 6]).unwrap();
        assert_eq!(sq[0].tx_burst(Instant::ZERO, &mut v), 12);
        assert!(v.is_empty());
        assert_eq!(gq[0].rx_burst(Instant::ZERO, &mut v, 12), 12);
        for (i, m) in v.iter().enumerate() {
            assert_eq!(m.to_vec(), fr[(12 + i) % fr.len()]);
        }
        let c = g.counts();
        assert_eq!((c.generated, c.sunk, c.sunk_bytes), (24, 12, 12 * 64));
    }

    #[test]
    fn with_the_pool_the_sink_frees_and_the_generator_allocates() {
        let g = PktGen::with_buffers(1, 1500, Buffers::Pool);
        let fr = frames();
        let mut gq = Box::new(g.generator("gen", &fr)).into_queues();
        let mut sq = Box::new(g.sink("sink")).into_queues();
        let mut v = Vec::new();
        for round in 0..3 {
            assert_eq!(gq[0].rx_burst(Instant::ZERO, &mut v, 12), 12);
            for (i, m) in v.iter().enumerate() {
                assert_eq!(m.to_vec(), fr[(12 * round + i) % fr.len()]);
            }
            assert_eq!(sq[0].tx_burst(Instant::ZERO, &mut v), 12);
            assert!(v.is_empty());
        }
        assert!(lock(&g.shared.recycle[0]).is_empty());
        let c = g.counts();
        assert_eq!((c.generated, c.sunk), (36, 36));
    }

    #[test]
    fn queues_get_the_flows_rss_gives_them() {
        let g = PktGen::new(2, 1500);
        let fr = frames();
        let qs = Box::new(g.generator("gen", &fr)).into_queues();
        assert_eq!(qs.len(), 2);
        let mut total = 0;
        for (q, mut gq) in qs.into_iter().enumerate() {
            let mut v = Vec::new();
            gq.rx_burst(Instant::ZERO, &mut v, 8);
            for m in &v {
                assert_eq!(rss::queue_of(m.hdr.rss_hash, 2), q);
                assert_eq!(m.hdr.rxq as usize, q);
            }
            total += v.len();
        }
        assert_eq!(total, 16);
    }

    #[test]
    fn loopback_runs_without_a_stack() {
        let g = PktGen::new(1, 1500);
        let mut gq = Box::new(g.generator("gen", &frames())).into_queues();
        let mut sq = Box::new(g.sink("sink")).into_queues();
        g.capture(3);
        PktGen::loopback(&mut *gq[0], &mut *sq[0], 1000, 64);
        assert!(g.counts().sunk >= 1000);
        assert_eq!(g.captured(), frames()[..3].to_vec());
    }
}
