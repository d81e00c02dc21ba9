//! Memory links: a point-to-point [`wire`] and a shared-segment [`Hub`].
//!
//! A wire is a hub with two ports. A frame sent on one port reaches every other
//! port, each receiver drawing its own loss, delay and duplication from the
//! sender's seeded [`Impairer`](crate::impair::Impairer). Frames are not copied:
//! each receiver gets a reference to the same buffers (`m_copypacket`), and a
//! receiver that writes into one gets its own copy of the written segment.
//!
//! Receive queues are time-ordered (arrival time, then send order), bounded by
//! [`WireConfig::queue_limit`] frames; a frame that finds the queue full is
//! dropped and counted in the sender's `odrops`. With several queues per port, a
//! frame goes to the queue its RSS hash picks, as on a multi-queue NIC.

use crate::impair::{Impairer, Impairments};
use crate::poll::Notifier;
use crate::rss;
use crate::{Device, DeviceInfo, Instant, Mbuf, Queue, QueueStats};
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

/// How a memory link behaves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WireConfig {
    pub impair: Impairments,
    /// Queue pairs per port (for multi-worker stacks).
    pub num_queues: usize,
    /// Largest L3 packet; longer frames are dropped as `oerrors`.
    pub mtu: usize,
    /// Frames in flight towards one receive queue before drops start.
    pub queue_limit: usize,
    /// Seed of the impairment randomness.
    pub seed: u64,
    /// Offloads every port advertises (none by default). With `tso`, a port takes
    /// packets up to that size and the peer receives them whole; with `csum`,
    /// checksums are neither filled in nor checked on this wire (it corrupts
    /// nothing), so a capture of it shows them unfilled, as tcpdump on a Linux
    /// interface with offloads does. The wire's impairments act on whole packets.
    pub offload: crate::Offloads,
}

impl Default for WireConfig {
    fn default() -> Self {
        WireConfig {
            impair: Impairments::default(),
            num_queues: 1,
            mtu: 1500,
            queue_limit: 1024,
            seed: 0,
            offload: crate::Offloads::default(),
        }
    }
}

/// Largest frame a port accepts: MTU (or the segmentation offload's size) plus
/// Ethernet header and one 802.1Q tag. Short frames pass untouched, so tests can
/// show the stack counting runts.
fn max_frame(cfg: &WireConfig) -> usize {
    cfg.mtu.max(cfg.offload.tso) + 14 + 4
}

struct InFlight {
    at: Instant,
    seq: u64,
    m: Mbuf,
}

impl PartialEq for InFlight {
    fn eq(&self, o: &Self) -> bool {
        self.at == o.at && self.seq == o.seq
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for InFlight {
    /// Reversed, so the max-heap pops the earliest arrival (then the earliest sent).
    fn cmp(&self, o: &Self) -> Ordering {
        o.at.cmp(&self.at).then(o.seq.cmp(&self.seq))
    }
}

/// Frames in flight towards one receive queue, popped in (arrival, send order).
///
/// Most links neither delay unevenly nor reorder, so arrivals come in order: those
/// go on a FIFO (O(1) each way); only a frame due before the FIFO's last one (jitter,
/// reordering) goes on the heap. Popping takes the earlier of the two fronts, so the
/// order is exactly the heap-only order.
#[derive(Default)]
struct Inbox {
    fifo: VecDeque<InFlight>,
    heap: BinaryHeap<InFlight>,
    seq: u64,
}

impl Inbox {
    fn len(&self) -> usize {
        self.fifo.len() + self.heap.len()
    }

    fn push(&mut self, at: Instant, m: Mbuf) {
        let seq = self.seq;
        self.seq += 1;
        let f = InFlight { at, seq, m };
        if self.fifo.back().is_none_or(|b| b.at <= at) {
            self.fifo.push_back(f);
        } else {
            self.heap.push(f);
        }
    }

    /// The earliest arrival: (time, whether it is the FIFO's front).
    fn next(&self) -> Option<(Instant, bool)> {
        match (self.fifo.front(), self.heap.peek()) {
            (Some(a), Some(b)) => Some(if (a.at, a.seq) <= (b.at, b.seq) {
                (a.at, true)
            } else {
                (b.at, false)
            }),
            (Some(a), None) => Some((a.at, true)),
            (None, Some(b)) => Some((b.at, false)),
            (None, None) => None,
        }
    }

    /// The earliest frame if it has arrived by `now`.
    fn pop_due(&mut self, now: Instant) -> Option<InFlight> {
        match self.next()? {
            (at, _) if at > now => None,
            (_, true) => self.fifo.pop_front(),
            (_, false) => self.heap.pop(),
        }
    }

    fn poll_at(&self) -> Option<Instant> {
        self.next().map(|(at, _)| at)
    }
}

struct Port {
    /// Whether [`Hub::poll_at`] looks at this port: false for ports a test reads by
    /// hand (or never), whose stale frames must not keep a simulator awake.
    watched: bool,
    inboxes: Vec<Mutex<Inbox>>,
    /// Per receive queue: an eventfd that a worker thread sleeping in `poll(2)` waits
    /// on. Armed only once someone asks for the queue's descriptor, so simulations
    /// make no system calls.
    wakers: Vec<Waker>,
    tx: Mutex<Impairer>,
}

struct Waker {
    notifier: Option<Notifier>,
    armed: AtomicBool,
    pending: AtomicBool,
}

impl Waker {
    fn new() -> Self {
        Waker {
            notifier: Notifier::new().ok(),
            armed: AtomicBool::new(false),
            pending: AtomicBool::new(false),
        }
    }

    /// Producer side: frames were queued.
    fn wake(&self) {
        // A plain load first: while the flag is up (a busy consumer) a frame costs no
        // read-modify-write on the shared line.
        if self.armed.load(AtomicOrdering::Acquire)
            && !self.pending.load(AtomicOrdering::Acquire)
            && !self.pending.swap(true, AtomicOrdering::AcqRel)
        {
            if let Some(n) = &self.notifier {
                n.notify();
            }
        }
    }

    /// Consumer side: the queue was found empty and the consumer may sleep.
    /// Drains the descriptor first, then lowers the flag: lowering it first would
    /// let a producer's token land in between and be drained with the flag up, and a
    /// later producer, seeing the flag up, would not write one.
    fn clear(&self) {
        if self.armed.load(AtomicOrdering::Relaxed) && self.pending.load(AtomicOrdering::Acquire) {
            if let Some(n) = &self.notifier {
                n.drain();
            }
            self.pending.store(false, AtomicOrdering::SeqCst);
        }
    }
}

struct Segment {
    cfg: WireConfig,
    name: String,
    ports: RwLock<Vec<Arc<Port>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A shared segment: every frame sent on a port reaches every other port.
#[derive(Clone)]
pub struct Hub {
    seg: Arc<Segment>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.seg.ports.read().map(|p| p.len()).unwrap_or(0);
        f.debug_struct("Hub")
            .field("name", &self.seg.name)
            .field("ports", &n)
            .finish()
    }
}

impl Hub {
    pub fn new(cfg: WireConfig) -> Hub {
        Hub::named("hub", cfg)
    }

    pub fn named(name: &str, mut cfg: WireConfig) -> Hub {
        cfg.num_queues = cfg.num_queues.max(1);
        cfg.queue_limit = cfg.queue_limit.max(1);
        Hub {
            seg: Arc::new(Segment {
                cfg,
                name: name.to_string(),
                ports: RwLock::new(Vec::new()),
            }),
        }
    }

    /// A new port on the hub, as a device with the hub's `num_queues` queue pairs.
    pub fn port(&self) -> MemDevice {
        self.port_with_queues(self.seg.cfg.num_queues)
    }

    /// A new port with its own number of queue pairs (a multi-worker host on a hub
    /// of single-queue ones).
    pub fn port_with_queues(&self, queues: usize) -> MemDevice {
        self.add_port(queues, true)
    }

    /// A port that [`Hub::poll_at`] ignores: for a test that injects frames and reads
    /// (or ignores) what arrives by hand.
    pub fn unwatched_port(&self) -> MemDevice {
        self.add_port(1, false)
    }

    fn add_port(&self, queues: usize, watched: bool) -> MemDevice {
        let queues = queues.max(1);
        let mut ports = self.seg.ports.write().unwrap_or_else(|e| e.into_inner());
        let idx = ports.len();
        let cfg = self.seg.cfg;
        // Each port's randomness is its own stream, derived from the hub's seed.
        let seed = cfg.seed ^ (idx as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let port = Arc::new(Port {
            watched,
            inboxes: (0..queues).map(|_| Mutex::new(Inbox::default())).collect(),
            wakers: (0..queues).map(|_| Waker::new()).collect(),
            tx: Mutex::new(Impairer::new(cfg.impair, seed)),
        });
        ports.push(port);
        MemDevice {
            seg: self.seg.clone(),
            idx,
        }
    }
}

impl Hub {
    /// The earliest arrival pending on any port: what a simulator must wake for
    /// after a round in which some port sent.
    pub fn poll_at(&self) -> Option<Instant> {
        let ports = self.seg.ports.read().unwrap_or_else(|e| e.into_inner());
        ports
            .iter()
            .filter(|p| p.watched)
            .flat_map(|p| p.inboxes.iter())
            .filter_map(|q| lock(q).poll_at())
            .min()
    }

    /// Frames in flight towards all ports.
    pub fn in_flight(&self) -> usize {
        let ports = self.seg.ports.read().unwrap_or_else(|e| e.into_inner());
        ports
            .iter()
            .flat_map(|p| p.inboxes.iter())
            .map(|q| lock(q).len())
            .sum()
    }

    /// A point-to-point wire as a two-port hub; returns the hub and both ends.
    pub fn wire(cfg: WireConfig) -> (Hub, MemDevice, MemDevice) {
        let hub = Hub::named("wire", cfg);
        let (a, b) = (hub.port(), hub.port());
        (hub, a, b)
    }
}

/// Two devices joined back to back.
pub fn wire(cfg: WireConfig) -> (MemDevice, MemDevice) {
    let hub = Hub::named("wire", cfg);
    (hub.port(), hub.port())
}

/// One port of a hub or end of a wire.
pub struct MemDevice {
    seg: Arc<Segment>,
    idx: usize,
}

impl std::fmt::Debug for MemDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemDevice")
            .field("segment", &self.seg.name)
            .field("port", &self.idx)
            .finish()
    }
}

impl MemDevice {
    fn nqueues(&self) -> usize {
        self.seg.ports.read().unwrap_or_else(|e| e.into_inner())[self.idx]
            .inboxes
            .len()
    }
}

impl Device for MemDevice {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            name: format!(
                "{}{}",
                if self.seg.name == "wire" { "mw" } else { "mh" },
                self.idx
            ),
            mtu: self.seg.cfg.mtu,
            num_queues: self.nqueues(),
            hw_addr: None,
            offload: self.seg.cfg.offload,
        }
    }
    fn into_queues(self: Box<Self>) -> Vec<Box<dyn Queue>> {
        let me = self.seg.ports.read().unwrap_or_else(|e| e.into_inner())[self.idx].clone();
        (0..self.nqueues())
            .map(|q| {
                Box::new(MemQueue {
                    seg: self.seg.clone(),
                    me: me.clone(),
                    port: self.idx,
                    queue: q,
                    stats: QueueStats::default(),
                    staged: Vec::new(),
                    woken: Vec::new(),
                }) as Box<dyn Queue>
            })
            .collect()
    }
}

/// One queue pair of a memory port.
pub struct MemQueue {
    seg: Arc<Segment>,
    /// This queue's own port (ports are never removed): receiving needs no lock on
    /// the segment's port list.
    me: Arc<Port>,
    port: usize,
    queue: usize,
    stats: QueueStats,
    /// A burst's deliveries (port, queue, arrival, frame), staged so that each
    /// receiving queue is locked and woken once per burst, not once per frame.
    staged: Vec<(usize, usize, Instant, Option<Mbuf>)>,
    /// The (port, queue) pairs a burst reached, to wake; kept to be reused, so
    /// that a burst allocates nothing.
    woken: Vec<(usize, usize)>,
}

impl std::fmt::Debug for MemQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemQueue")
            .field("port", &self.port)
            .field("queue", &self.queue)
            .finish()
    }
}

/// [`Queue::tx_burst`] over a perfect wire to `peer`'s one queue: each frame
/// arrives now, in order, as the general path would deliver it (the receiver's
/// view of the header: the checksums and segmentation the wire's offloads
/// report); what finds the queue full is dropped and counted.
fn tx_direct(
    stats: &mut QueueStats,
    cfg: &WireConfig,
    now: Instant,
    pkts: &mut Vec<Mbuf>,
    peer: &Port,
) -> usize {
    let max = max_frame(cfg);
    let mut accepted = 0;
    {
        let mut inbox = lock(&peer.inboxes[0]);
        for mut m in pkts.drain(..) {
            let len = m.len();
            if len > max {
                stats.oerrors += 1;
                continue;
            }
            accepted += 1;
            stats.opackets += 1;
            stats.obytes += len as u64;
            if inbox.len() >= cfg.queue_limit {
                stats.odrops += 1;
                continue;
            }
            m.hdr = arrival_hdr(cfg, &m, 0);
            inbox.push(now, m);
        }
    }
    // After the pushes, as in the general path.
    if accepted > 0 {
        peer.wakers[0].wake();
    }
    accepted
}

/// What a receiver finds in a frame's header: the RSS hash, and what the wire's
/// offloads tell of its checksums (checked, and which are still to be filled: only
/// a sender with the wire's `csum` offload leaves any) and of its segmentation (a
/// segment sent whole for segmentation offload arrives whole, saying what it stands
/// for, as a virtio-net receiver's `gso_size`: a router cuts it to fit a link
/// without offload).
fn arrival_hdr(cfg: &WireConfig, m: &Mbuf, rss_hash: u32) -> mbuf::PktHdr {
    let csum_flags = if cfg.offload.csum {
        mbuf::CSUM_IP_VALID | mbuf::CSUM_L4_VALID | (m.hdr.csum_flags & mbuf::CSUM_L4_NEEDED)
    } else {
        0
    };
    let tso_segsz = if cfg.offload.tso != 0 {
        m.hdr.tso_segsz
    } else {
        0
    };
    mbuf::PktHdr {
        rss_hash,
        csum_flags,
        tso_segsz,
        ..Default::default()
    }
}

impl Queue for MemQueue {
    fn rx_burst(&mut self, now: Instant, out: &mut Vec<Mbuf>, max: usize) -> usize {
        let mut inbox = lock(&self.me.inboxes[self.queue]);
        let mut n = 0;
        while n < max {
            let Some(f) = inbox.pop_due(now) else { break };
            let mut m = f.m;
            m.hdr.rxq = self.queue as u16;
            self.stats.ipackets += 1;
            self.stats.ibytes += m.len() as u64;
            out.push(m);
            n += 1;
        }
        if n == 0 {
            // Going idle: take down the wake-up, so the next frame raises it. While
            // frames keep coming it stays up and producers make no system call. A
            // frame that lands between the look above and this is seen by
            // `poll_at` before the worker sleeps.
            drop(inbox);
            self.me.wakers[self.queue].clear();
        }
        n
    }

    fn tx_burst(&mut self, now: Instant, pkts: &mut Vec<Mbuf>) -> usize {
        if pkts.is_empty() {
            return 0;
        }
        let ports = self.seg.ports.read().unwrap_or_else(|e| e.into_inner());
        let cfg = self.seg.cfg;
        // A perfect wire to one single-queue port (the benches' and most tests'):
        // straight into its queue, under one lock, with nothing to draw or stage.
        if cfg.impair.is_perfect() && ports.len() == 2 && ports.iter().all(|p| p.inboxes.len() == 1)
        {
            return tx_direct(&mut self.stats, &cfg, now, pkts, &ports[1 - self.port]);
        }
        let mut imp = lock(&ports[self.port].tx);
        let mut accepted = 0;
        let mut when = [Instant::ZERO; 2];
        // Only a multi-queue receiver needs the RSS hash; decided once per burst.
        let need_hash = ports.iter().any(|p| p.inboxes.len() > 1);
        for mut m in pkts.drain(..) {
            let len = m.len();
            if len > max_frame(&cfg) {
                self.stats.oerrors += 1;
                continue;
            }
            accepted += 1;
            self.stats.opackets += 1;
            self.stats.obytes += len as u64;
            let sent = imp.serialise(now, len);
            if imp.marks_ce() {
                if let Some(h) = m.head_mut::<54>() {
                    crate::impair::mark_ce(h);
                } else if let Some(h) = m.head_mut::<34>() {
                    crate::impair::mark_ce(h);
                }
            }
            let hash = if need_hash {
                let mut head = [0u8; 78];
                let h = len.min(head.len());
                let _ = m.copydata(0, &mut head[..h]);
                rss::frame_hash(&head[..h])
            } else {
                0
            };
            // Where it goes (a hub: every other port; impairments may drop or
            // duplicate), decided first so the last delivery takes the frame itself
            // and only the others are clones.
            let first = self.staged.len();
            for (i, port) in ports.iter().enumerate() {
                if i == self.port {
                    continue;
                }
                let n = imp.deliveries(sent, &mut when);
                let q = rss::queue_of(hash, port.inboxes.len());
                for &at in &when[..n] {
                    // The frame is filled in below.
                    self.staged.push((i, q, at, None));
                }
            }
            let hdr = arrival_hdr(&cfg, &m, hash);
            let last = self.staged.len();
            let mut m = Some(m);
            for j in first..last {
                let frame = if j + 1 == last {
                    m.take()
                } else {
                    m.as_ref().and_then(|m| m.try_clone().ok())
                };
                match frame {
                    Some(mut f) => {
                        f.hdr = hdr;
                        self.staged[j].3 = Some(f);
                    }
                    // No buffer for a copy: that delivery is lost.
                    None => self.stats.odrops += 1,
                }
            }
        }
        drop(imp);
        // Deliveries in order, one lock per run of frames for the same queue, one
        // wake-up per queue reached.
        let mut woken = std::mem::take(&mut self.woken);
        let mut staged = std::mem::take(&mut self.staged);
        let mut held: Option<(usize, usize, MutexGuard<'_, Inbox>)> = None;
        for (i, q, at, f) in staged.drain(..) {
            let Some(f) = f else { continue };
            let (_, _, inbox) = match held.take() {
                Some(h) if (h.0, h.1) == (i, q) => held.insert(h),
                other => {
                    // One lock at a time: the last queue's goes first.
                    drop(other);
                    if !woken.contains(&(i, q)) {
                        woken.push((i, q));
                    }
                    held.insert((i, q, lock(&ports[i].inboxes[q])))
                }
            };
            if inbox.len() >= cfg.queue_limit {
                self.stats.odrops += 1;
                continue;
            }
            inbox.push(at, f);
        }
        // After the pushes: a consumer that drained the queue and cleared its
        // wake-up before these frames landed sees the frames or the wake-up.
        drop(held);
        for &(i, q) in &woken {
            ports[i].wakers[q].wake();
        }
        woken.clear();
        self.woken = woken;
        self.staged = staged;
        accepted
    }

    fn poll_at(&self) -> Option<Instant> {
        lock(&self.me.inboxes[self.queue]).poll_at()
    }

    fn fd(&self) -> Option<std::os::fd::RawFd> {
        let w = &self.me.wakers[self.queue];
        let fd = w.notifier.as_ref()?.fd();
        w.armed.store(true, AtomicOrdering::Release);
        // Frames may already wait: make the first poll(2) return at once.
        w.pending.store(true, AtomicOrdering::Release);
        if let Some(n) = &w.notifier {
            n.notify();
        }
        Some(fd)
    }

    fn stats(&self) -> QueueStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Duration;

    fn frame(tag: u8, len: usize) -> Mbuf {
        let mut v = vec![tag; len];
        v[12] = 0x88;
        v[13] = 0xb5; // local experimental ethertype
        Mbuf::from_slice(&v).unwrap()
    }

    fn queues(d: MemDevice) -> Vec<Box<dyn Queue>> {
        Box::new(d).into_queues()
    }

    #[test]
    fn wire_carries_frames_both_ways_in_order() {
        let (a, b) = wire(WireConfig::default());
        let mut a = queues(a).remove(0);
        let mut b = queues(b).remove(0);
        let mut batch: Vec<Mbuf> = (0..5).map(|i| frame(i, 60)).collect();
        assert_eq!(a.tx_burst(Instant::ZERO, &mut batch), 5);
        assert!(batch.is_empty());
        let mut got = Vec::new();
        assert_eq!(b.rx_burst(Instant::ZERO, &mut got, 3), 3);
        assert_eq!(b.rx_burst(Instant::ZERO, &mut got, 32), 2);
        let tags: Vec<u8> = got.iter().map(|m| m.to_vec()[0]).collect();
        assert_eq!(tags, [0, 1, 2, 3, 4]);
        assert_eq!(
            a.rx_burst(Instant::ZERO, &mut got, 32),
            0,
            "no echo to the sender"
        );
        let mut back = vec![frame(9, 100)];
        b.tx_burst(Instant::ZERO, &mut back);
        got.clear();
        assert_eq!(a.rx_burst(Instant::ZERO, &mut got, 32), 1);
        assert_eq!(a.stats().ipackets, 1);
        assert_eq!(b.stats().opackets, 1);
        assert_eq!(b.stats().ipackets, 5);
    }

    #[test]
    fn delay_is_honoured_and_announced() {
        let cfg = WireConfig {
            impair: Impairments {
                delay: Duration::from_millis(5),
                ..Default::default()
            },
            ..Default::default()
        };
        let (a, b) = wire(cfg);
        let mut a = queues(a).remove(0);
        let mut b = queues(b).remove(0);
        a.tx_burst(Instant::from_millis(1), &mut vec![frame(1, 60)]);
        let mut got = Vec::new();
        assert_eq!(b.rx_burst(Instant::from_millis(5), &mut got, 8), 0);
        assert_eq!(b.poll_at(), Some(Instant::from_millis(6)));
        assert_eq!(b.rx_burst(Instant::from_millis(6), &mut got, 8), 1);
        assert_eq!(b.poll_at(), None);
    }

    #[test]
    fn jittered_frames_come_out_in_arrival_order() {
        // Jitter larger than the gap between frames: some arrivals go on the FIFO,
        // the overtaking ones on the heap; the receiver must see arrival order, with
        // send order breaking ties, and never a frame before its time.
        let cfg = WireConfig {
            impair: Impairments {
                delay: Duration::from_millis(1),
                jitter: Duration::from_millis(3),
                ..Default::default()
            },
            seed: 7,
            queue_limit: 4096,
            ..Default::default()
        };
        let (a, b) = wire(cfg);
        let mut a = queues(a).remove(0);
        let mut b = queues(b).remove(0);
        for i in 0..200u64 {
            let mut f = frame(0, 64);
            let v = f.to_vec();
            let mut v2 = v.clone();
            v2[14..22].copy_from_slice(&i.to_be_bytes());
            f = Mbuf::from_slice(&v2).unwrap();
            a.tx_burst(Instant::from_micros(100 * i), &mut vec![f]);
        }
        let mut seen = Vec::new();
        let mut now = Instant::ZERO;
        let mut last_at = Instant::ZERO;
        while let Some(at) = b.poll_at() {
            assert!(
                at >= last_at,
                "arrivals go backwards: {at:?} after {last_at:?}"
            );
            last_at = at;
            now = now.max(at);
            let mut got = Vec::new();
            b.rx_burst(now, &mut got, 1);
            for m in got {
                let v = m.to_vec();
                seen.push(u64::from_be_bytes(v[14..22].try_into().unwrap()));
            }
        }
        assert_eq!(seen.len(), 200);
        let mut sorted = seen.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..200).collect::<Vec<_>>());
        assert_ne!(seen, sorted, "3 ms of jitter over 100 us gaps reorders");
    }

    #[test]
    fn hub_floods_to_every_other_port() {
        let hub = Hub::new(WireConfig::default());
        let mut ports: Vec<Box<dyn Queue>> = (0..4).map(|_| queues(hub.port()).remove(0)).collect();
        ports[2].tx_burst(Instant::ZERO, &mut vec![frame(7, 64)]);
        for (i, p) in ports.iter_mut().enumerate() {
            let mut got = Vec::new();
            let n = p.rx_burst(Instant::ZERO, &mut got, 8);
            assert_eq!(n, usize::from(i != 2), "port {i}");
        }
    }

    #[test]
    fn oversize_frames_are_errors_and_full_queue_drops() {
        let (a, b) = wire(WireConfig {
            queue_limit: 4,
            ..Default::default()
        });
        let mut a = queues(a).remove(0);
        let _b = queues(b);
        let mut batch = vec![frame(1, 1519), frame(1, 1520)];
        assert_eq!(a.tx_burst(Instant::ZERO, &mut batch), 0);
        assert_eq!(a.stats().oerrors, 2);
        let mut batch: Vec<Mbuf> = (0..10).map(|i| frame(i, 60)).collect();
        a.tx_burst(Instant::ZERO, &mut batch);
        assert_eq!(a.stats().odrops, 6);
    }

    #[test]
    fn multi_queue_ports_steer_flows_by_rss() {
        let cfg = WireConfig {
            num_queues: 2,
            ..Default::default()
        };
        let (a, b) = wire(cfg);
        let mut a = queues(a).remove(0);
        let mut bq = queues(b);
        // UDP frames from 64 source ports: both queues get some, each flow one queue.
        for sp in 0..64u16 {
            let mut f = vec![0u8; 42];
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f[14] = 0x45;
            f[23] = 17;
            f[26..30].copy_from_slice(&[198, 18, 0, 1]);
            f[30..34].copy_from_slice(&[198, 18, 0, 2]);
            f[34..36].copy_from_slice(&sp.to_be_bytes());
            let m = Mbuf::from_slice(&f).unwrap();
            a.tx_burst(Instant::ZERO, &mut vec![m.try_clone().unwrap(), m]);
        }
        let mut counts = [0; 2];
        for (q, queue) in bq.iter_mut().enumerate() {
            let mut got = Vec::new();
            counts[q] = queue.rx_burst(Instant::ZERO, &mut got, 1000);
            for m in &got {
                assert_eq!(usize::from(m.hdr.rxq), q);
                assert_eq!(rss::queue_of(m.hdr.rss_hash, 2), q);
            }
        }
        assert_eq!(counts[0] + counts[1], 128);
        assert!(counts[0] > 0 && counts[1] > 0, "{counts:?}");
        assert!(
            counts[0] % 2 == 0,
            "both copies of a flow land on one queue"
        );
    }

    #[test]
    fn same_seed_same_deliveries() {
        let run = |seed| {
            let cfg = WireConfig {
                impair: Impairments {
                    loss: 0.3,
                    jitter: Duration::from_millis(2),
                    duplicate: 0.1,
                    ..Default::default()
                },
                seed,
                ..Default::default()
            };
            let (a, b) = wire(cfg);
            let mut a = queues(a).remove(0);
            let mut b = queues(b).remove(0);
            let mut batch: Vec<Mbuf> = (0..200).map(|i| frame(i as u8, 60)).collect();
            a.tx_burst(Instant::ZERO, &mut batch);
            let mut got = Vec::new();
            b.rx_burst(Instant::from_secs(1), &mut got, 1000);
            got.iter().map(|m| m.to_vec()[0]).collect::<Vec<u8>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
    }
}
