//! One pipe: its queues, scheduler, link and delay line (FreeBSD's scheduler
//! instance `dn_sch_inst` with its link and `delay_line`).
//!
//! What it owns: the packets between entry and release, the per-flow queues of the
//! flowsets feeding it (made and freed here), the link's credit and its counters.

use super::sched::{Sched, Tags, Wf2q, WfState, ONE};
use super::{DnDrop, DnPacket, FlowKey, PipeConfig, PipeStats, QueueConfig, QueueLimit};
use std::collections::hash_map::RandomState;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::net::IpAddr;

/// The pipe's own queue, for the `pipe N` action; never freed.
pub(super) const OWN_QUEUE: u32 = 0;

/// Credit is in bits times 10^9, so that `elapsed_ns * bw` adds exactly.
const NS: i128 = 1_000_000_000;

/// A queue: the pipe's own, or a flowset's per-flow queue.
#[derive(Debug)]
pub(super) struct FlowQueue<T> {
    /// (arrival order, packet).
    pub(super) pkts: VecDeque<(u64, T)>,
    pub(super) bytes: usize,
    pub(super) weight: u32,
    /// `ONE / weight`.
    pub(super) inv_w: u128,
    pub(super) limit: QueueLimit,
    /// The flowset and masked flow it serves, while the flowset maps that flow here.
    owner: Option<FlowId>,
    /// The flow map points here (false once the flowset is deleted or remade).
    mapped: bool,
    pub(super) tags: Tags,
    /// In use (not on the free list).
    live: bool,
    /// On the pipe's list of queues that went idle.
    listed: bool,
}

impl<T> FlowQueue<T> {
    /// Empty and unknown to the scheduler.
    fn is_free_to_go(&self) -> bool {
        self.pkts.is_empty() && self.tags.state == WfState::New
    }

    fn new(weight: u32, limit: QueueLimit, owner: Option<FlowId>) -> Self {
        FlowQueue {
            pkts: VecDeque::new(),
            bytes: 0,
            weight,
            inv_w: ONE / u128::from(weight),
            limit,
            mapped: owner.is_some(),
            owner,
            tags: Tags::NEW,
            live: true,
            listed: false,
        }
    }
}

#[derive(Debug)]
pub(super) struct Pipe<T> {
    pub(super) cfg: PipeConfig,
    /// In, out and drop counters (the others are computed).
    c: PipeStats,
    queues: Vec<FlowQueue<T>>,
    free: Vec<u32>,
    flows: HashMap<FlowId, u32, FlowHash>,
    /// Per-flow queues each flowset has mapped.
    fs_flows: HashMap<u32, usize>,
    sched: Sched,
    /// Queues the scheduler has let go of since the last look (FIFO: emptied;
    /// WF2Q+: out of the idle heap).
    expired: Vec<u32>,
    /// Queues that went idle, to be freed when their flowset needs room.
    idle: Vec<u32>,
    queued_pkts: u64,
    queued_bytes: u64,
    /// (release time, packet), release times not decreasing.
    dline: VecDeque<(u64, T)>,
    dline_bytes: u64,
    /// FreeBSD's `credit`: bits the link may still send, times 10^9.
    credit: i128,
    /// When `credit` was last brought up to date.
    sched_time: u64,
    /// Since when the link has been idle; `None`: never busy.
    idle_since: Option<u64>,
    /// Transmitting: the next service is at `next_service`.
    busy: bool,
    next_service: u64,
}

/// A flowset's masked flow, packed into integers for a cheap hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct FlowId {
    src: u128,
    dst: u128,
    /// proto, ports and the two families.
    rest: u64,
    fs: u32,
}

impl FlowId {
    fn new(fs: u32, k: &FlowKey) -> Self {
        let a = |ip: IpAddr| match ip {
            IpAddr::V4(a) => (u128::from(u32::from(a)), 0),
            IpAddr::V6(a) => (u128::from(a), 1),
        };
        let (src, s6) = a(k.src);
        let (dst, d6) = a(k.dst);
        FlowId {
            src,
            dst,
            rest: u64::from(k.proto)
                | u64::from(k.sport) << 8
                | u64::from(k.dport) << 24
                | s6 << 40
                | d6 << 41,
            fs,
        }
    }
}

/// The flow map's hash: FxHash's multiply-rotate over the key's words, with a
/// per-map random seed and murmur3's finalizer. SipHash over the derived `Hash` of
/// an `IpAddr` key took 45% of enqueue + poll; the flow bound caps what colliding
/// keys could cost.
#[derive(Clone, Debug)]
struct FlowHash(u64);

impl FlowHash {
    fn new() -> Self {
        FlowHash(RandomState::new().build_hasher().finish())
    }
}

impl BuildHasher for FlowHash {
    type Hasher = FlowHasher;
    fn build_hasher(&self) -> FlowHasher {
        FlowHasher(self.0)
    }
}

#[derive(Debug)]
struct FlowHasher(u64);

impl FlowHasher {
    fn add(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for FlowHasher {
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0; 8];
            w[..c.len()].copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
    }
    fn write_u32(&mut self, x: u32) {
        self.add(u64::from(x));
    }
    fn write_u64(&mut self, x: u64) {
        self.add(x);
    }
    fn write_u128(&mut self, x: u128) {
        self.add(x as u64);
        self.add((x >> 64) as u64);
    }
    fn finish(&self) -> u64 {
        let mut z = self.0;
        z = (z ^ (z >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
        z = (z ^ (z >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        z ^ (z >> 33)
    }
}

fn nanos(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl<T: DnPacket> Pipe<T> {
    pub(super) fn new(cfg: PipeConfig) -> Self {
        Pipe {
            queues: vec![FlowQueue::new(1, cfg.queue, None)],
            sched: Sched::new(cfg.sched),
            cfg,
            c: PipeStats::default(),
            free: Vec::new(),
            flows: HashMap::with_hasher(FlowHash::new()),
            fs_flows: HashMap::new(),
            expired: Vec::new(),
            idle: Vec::new(),
            queued_pkts: 0,
            queued_bytes: 0,
            dline: VecDeque::new(),
            dline_bytes: 0,
            credit: 0,
            sched_time: 0,
            idle_since: None,
            busy: false,
            next_service: 0,
        }
    }

    pub(super) fn reconfigure(&mut self, cfg: PipeConfig) {
        if self.busy && cfg.bandwidth > 0 {
            // The packet on the wire ends when it was due to: the credit still owed
            // is restated at the new rate, which applies from then on.
            let left = u128::from(self.next_service - self.sched_time) * u128::from(cfg.bandwidth);
            self.credit = -i128::try_from(left).unwrap_or(i128::MAX);
        } else if !self.busy {
            // A smaller burst caps the credit an idle link has saved.
            let cap = i128::from(cfg.burst).saturating_mul(8 * NS);
            self.credit = self.credit.min(cap);
        }
        self.queues[OWN_QUEUE as usize].limit = cfg.queue;
        if cfg.sched != self.sched.kind() {
            self.change_sched(cfg.sched);
        }
        self.cfg = cfg;
    }

    /// Moves the queued packets to a scheduler of another kind.
    fn change_sched(&mut self, kind: super::SchedKind) {
        let old = std::mem::replace(&mut self.sched, Sched::new(kind));
        for q in &mut self.queues {
            q.tags = Tags::NEW;
        }
        match (old, kind) {
            (Sched::Fifo(order), super::SchedKind::Wf2q) => {
                let mut w = Wf2q::default();
                for qid in order {
                    w.backlogged(&mut self.queues, qid);
                }
                self.sched = Sched::Wf2q(w);
            }
            (_, super::SchedKind::Fifo) => {
                let mut all: Vec<(u64, u32)> = Vec::new();
                for (i, q) in self.queues.iter().enumerate() {
                    all.extend(q.pkts.iter().map(|p| (p.0, i as u32)));
                }
                all.sort_unstable();
                self.sched = Sched::Fifo(all.into_iter().map(|e| e.1).collect());
                // WF2Q+ kept empty queues in its idle heap; FIFO lets go of them.
                for i in 1..self.queues.len() as u32 {
                    let q = &self.queues[i as usize];
                    if q.live && q.pkts.is_empty() {
                        self.expired.push(i);
                    }
                }
                self.note_expired();
            }
            (Sched::Wf2q(_), super::SchedKind::Wf2q) => {}
        }
    }

    pub(super) fn update_flowset(&mut self, fs: u32, weight: u32, limit: QueueLimit) {
        for (id, &qid) in &self.flows {
            if id.fs == fs {
                self.queues[qid as usize].limit = limit;
                self.sched.set_weight(&mut self.queues, qid, weight);
            }
        }
    }

    /// Forgets flowset `fs`'s flows: its queues drain and are freed, new ones are made.
    pub(super) fn orphan_flowset(&mut self, fs: u32) {
        self.flows.retain(|k, _| k.fs != fs);
        self.fs_flows.remove(&fs);
        for i in 1..self.queues.len() as u32 {
            let q = &mut self.queues[i as usize];
            if q.live && q.owner.is_some_and(|o| o.fs == fs) {
                q.mapped = false;
                if q.is_free_to_go() {
                    self.free(i);
                }
            }
        }
    }

    pub(super) fn count_in(&mut self, len: usize) {
        self.c.in_pkts += 1;
        self.c.in_bytes += len as u64;
    }

    pub(super) fn count_drop(&mut self, why: DnDrop, len: usize) {
        let (p, b) = match why {
            DnDrop::Loss => (&mut self.c.drop_loss_pkts, &mut self.c.drop_loss_bytes),
            DnDrop::QueueFull => (&mut self.c.drop_full_pkts, &mut self.c.drop_full_bytes),
            DnDrop::TooManyFlows => (&mut self.c.drop_flows_pkts, &mut self.c.drop_flows_bytes),
            DnDrop::NoSuchPipe | DnDrop::NoSuchQueue => return,
        };
        *p += 1;
        *b += len as u64;
    }

    pub(super) fn find_flow(&self, fs: u32, key: &FlowKey) -> Option<u32> {
        self.flows.get(&FlowId::new(fs, key)).copied()
    }

    /// Makes flowset `fs`'s queue for `key`, unless the flowset is at its bound even
    /// after idle queues are expired.
    pub(super) fn new_flow(&mut self, fs: u32, key: FlowKey, cfg: &QueueConfig) -> Option<u32> {
        let max = cfg.max_flows();
        if self.fs_flows.get(&fs).copied().unwrap_or(0) >= max {
            self.expire();
            if self.fs_flows.get(&fs).copied().unwrap_or(0) >= max {
                return None;
            }
        }
        let id = FlowId::new(fs, &key);
        let q = FlowQueue::new(cfg.weight, cfg.queue, Some(id));
        let qid = match self.free.pop() {
            Some(i) => {
                self.queues[i as usize] = q;
                i
            }
            None => {
                self.queues.push(q);
                (self.queues.len() - 1) as u32
            }
        };
        self.flows.insert(id, qid);
        *self.fs_flows.entry(fs).or_insert(0) += 1;
        Some(qid)
    }

    /// Files the queues the scheduler let go of: an orphan is freed at once, a
    /// flowset's queue waits on the idle list (FreeBSD frees idle queues lazily too),
    /// so that a flow that pauses between packets does not remake its queue each time.
    fn note_expired(&mut self) {
        while let Some(qid) = self.expired.pop() {
            let q = &mut self.queues[qid as usize];
            if !q.mapped {
                if q.live && q.is_free_to_go() {
                    self.free(qid);
                }
            } else if !q.listed {
                q.listed = true;
                self.idle.push(qid);
            }
        }
    }

    /// Frees every idle queue (FreeBSD's queue expiry), WF2Q+'s idle heap first.
    fn expire(&mut self) {
        self.sched.expire_idle(&mut self.queues, &mut self.expired);
        self.note_expired();
        while let Some(qid) = self.idle.pop() {
            let q = &mut self.queues[qid as usize];
            q.listed = false;
            if q.live && q.is_free_to_go() {
                self.free(qid);
            }
        }
    }

    fn free(&mut self, qid: u32) {
        let q = &mut self.queues[qid as usize];
        q.live = false;
        if let Some(id) = q.owner.take() {
            if std::mem::take(&mut q.mapped) {
                self.flows.remove(&id);
                if let Some(n) = self.fs_flows.get_mut(&id.fs) {
                    *n -= 1;
                }
            }
        }
        self.free.push(qid);
    }

    /// Appends the packet to queue `qid`, or refuses it if the queue is full; starts
    /// the link if it was idle.
    pub(super) fn enqueue(
        &mut self,
        qid: u32,
        seq: u64,
        pkt: T,
        now: u64,
    ) -> Result<(), (T, DnDrop)> {
        let len = pkt.len();
        let q = &mut self.queues[qid as usize];
        if !q.limit.admits(q.pkts.len(), q.bytes, len) {
            self.count_drop(DnDrop::QueueFull, len);
            return Err((pkt, DnDrop::QueueFull));
        }
        q.pkts.push_back((seq, pkt));
        q.bytes += len;
        self.queued_pkts += 1;
        self.queued_bytes += len as u64;
        self.sched.enqueued(&mut self.queues, qid);
        if !self.busy {
            self.refill(now);
            self.serve(now);
        }
        Ok(())
    }

    /// The burst credit of an idle link: a bucket of `burst` bytes filled at `bw`
    /// (see the module doc for how this differs from FreeBSD's per-tick reset).
    fn refill(&mut self, now: u64) {
        let bw = self.cfg.bandwidth;
        if bw > 0 {
            let cap = i128::from(self.cfg.burst).saturating_mul(8 * NS);
            let have = self.credit.max(0);
            let gained = match self.idle_since {
                None => cap,
                Some(t) => {
                    let g = u128::from(now.saturating_sub(t)) * u128::from(bw);
                    i128::try_from(g).unwrap_or(i128::MAX)
                }
            };
            self.credit = have.saturating_add(gained).min(cap.max(have));
        }
        self.sched_time = now;
    }

    /// FreeBSD's `serve_sched` at `now`: sends while there is credit, then either
    /// goes idle or schedules its next service for when the credit is back to zero.
    fn serve(&mut self, now: u64) {
        let bw = self.cfg.bandwidth;
        if bw > 0 {
            let g = u128::from(now.saturating_sub(self.sched_time)) * u128::from(bw);
            self.credit = self
                .credit
                .saturating_add(i128::try_from(g).unwrap_or(i128::MAX));
        } else {
            self.credit = 0;
        }
        self.sched_time = now;
        self.busy = false;
        let release = now.saturating_add(nanos(self.cfg.delay));
        let mut sent = false;
        while self.credit >= 0 {
            let Some(pkt) = self.sched.dequeue(&mut self.queues, &mut self.expired) else {
                break;
            };
            let len = pkt.len();
            self.queued_pkts -= 1;
            self.queued_bytes -= len as u64;
            if bw > 0 {
                self.credit -= len as i128 * 8 * NS;
            }
            let t = self.dline.back().map_or(release, |b| b.0.max(release));
            self.dline.push_back((t, pkt));
            self.dline_bytes += len as u64;
            sent = true;
        }
        if !self.expired.is_empty() {
            self.note_expired();
        }
        if self.credit >= 0 {
            self.idle_since = Some(now);
        } else {
            // Rounded up; u64 division when it fits (i128's is a library call).
            let owed = self.credit.unsigned_abs();
            let t = match u64::try_from(owed) {
                Ok(o) => o.div_ceil(bw),
                Err(_) => u64::try_from(owed.div_ceil(u128::from(bw))).unwrap_or(u64::MAX),
            };
            if sent {
                // The packet that took the credit below zero leaves when it is paid.
                if let Some(b) = self.dline.back_mut() {
                    b.0 = b.0.saturating_add(t);
                }
            }
            self.busy = true;
            self.next_service = now.saturating_add(t);
        }
    }

    /// Runs the link's services due by `now`, each at its own time.
    pub(super) fn advance(&mut self, now: u64) {
        while self.busy && self.next_service <= now {
            self.serve(self.next_service);
        }
    }

    pub(super) fn ready(&self, now: u64) -> bool {
        self.dline.front().is_some_and(|p| p.0 <= now)
    }

    /// Hands `f` every packet of the delay line due by `now`, with its release time.
    pub(super) fn release(&mut self, now: u64, mut f: impl FnMut(u64, T)) {
        while self.ready(now) {
            let Some((t, pkt)) = self.dline.pop_front() else {
                break;
            };
            let len = pkt.len() as u64;
            self.dline_bytes -= len;
            self.c.out_pkts += 1;
            self.c.out_bytes += len;
            f(t, pkt);
        }
    }

    pub(super) fn next_event(&self) -> Option<u64> {
        let service = (self.busy && self.queued_pkts > 0).then_some(self.next_service);
        let release = self.dline.front().map(|p| p.0);
        match (service, release) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub(super) fn stats(&self) -> PipeStats {
        PipeStats {
            queued_pkts: self.queued_pkts,
            queued_bytes: self.queued_bytes,
            delayed_pkts: self.dline.len() as u64,
            delayed_bytes: self.dline_bytes,
            flows: (self.queues.len() - 1 - self.free.len()) as u64,
            ..self.c
        }
    }
}
