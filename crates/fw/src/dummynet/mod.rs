//! dummynet: Rizzo's traffic shaper of FreeBSD's ipfw(8) ("TRAFFIC SHAPER (DUMMYNET)
//! CONFIGURATION"), sans-IO and generic over the packet, so that in a deterministic
//! simulation a pipe behaves exactly in virtual time.
//!
//! What it owns: pipes (a link of some bandwidth and propagation delay, with a
//! scheduler), queues (FreeBSD's flowsets: a weight, a flow mask and a queue size, from
//! which per-flow queues are made on demand), the packets held in either, and their
//! counters. What it may call: `std`. It never reads a clock and never frees a packet
//! behind the caller's back: a packet handed in comes back either from
//! [`Dummynet::poll`] or at once as the `Err` of the enqueue, with the [`DnDrop`] that
//! names the counter it went to (a deleted pipe's packets are the one exception, see
//! [`Dummynet::delete_pipe`]).
//!
//! # Time
//!
//! Times are `u64` nanoseconds from any origin, passed in by the caller; they must not
//! go backwards (a smaller `now` is taken as the largest seen so far). Nothing happens
//! between calls: every method first runs, in time order, the events due by its `now`
//! (a link finishing a packet and taking the next one), then does its work at `now`.
//! A driver loops `poll(now)` / `next_wakeup()` and jumps its clock to the wake-up
//! (quinn's `poll_timeout`); the release times it sees are then exact, not rounded to
//! a tick as FreeBSD's `hz` rounds them.
//!
//! # A packet's path (FreeBSD's `dummynet_enqueue`, `serve_sched`, `transmit_event`)
//!
//! 1. **Loss**: with probability `plr` the packet is dropped on entry ([`DnDrop::Loss`]),
//!    drawn from the instance's seeded generator, one draw per packet entering a pipe
//!    whose `plr` is not 0 — the same seed and the same calls give the same losses.
//!    `plr` is the pipe's, for all the traffic entering it; in FreeBSD it belongs to a
//!    flowset, so `pipe N config plr` applies to `pipe N` traffic only and a queue
//!    takes its own (`queue N config plr`, not supported here).
//! 2. **Queue**: it joins its queue — the pipe's own queue for `pipe N`, or for
//!    `queue N` the flowset's per-flow queue its masked flow selects, created on demand
//!    ([`DnDrop::TooManyFlows`] if the flowset already has its bound of queues). If that
//!    queue is full it is dropped ([`DnDrop::QueueFull`]); a queue counts the packets
//!    waiting to start transmission, not the one on the wire nor those in the delay line
//!    (as in FreeBSD, where the scheduler dequeues a packet when its transmission starts).
//!    A byte limit is a true bound: a packet is dropped if the queued bytes plus its own
//!    would exceed it (FreeBSD compares the bytes already queued, so may overshoot by one).
//! 3. **Link**: the scheduler (FIFO or WF2Q+) picks the next packet when the link is
//!    free; it is on the wire for `len * 8 / bw` seconds after the previous one ends.
//!    The link keeps FreeBSD's credit in bits (scaled by 10^9, so exact in
//!    nanoseconds): a packet may start when the credit is not negative, costs its bits,
//!    and the link is busy until the credit is back to zero (the time rounded up to
//!    the nanosecond; the remainder is carried, so there is no drift). `bw 0` means no
//!    limit: the packet goes straight to the delay line.
//! 4. **Delay line**: it is held `delay` after its transmission ends, then released by
//!    `poll`. A delay line releases in order (FreeBSD's `transmit_event` looks only at
//!    its head), so lowering `delay` never lets a packet overtake an earlier one.
//!
//! **Burst** (ipfw's `burst size`): a token bucket of `burst` bytes, refilled at `bw`
//! while the link is idle (not transmitting and nothing queued). Packets that find
//! credit start at once and leave at line rate, modelled as instantly, so they are
//! released `delay` after they entered; the packet that takes the credit below zero
//! leaves when its bits have been paid for at `bw`. FreeBSD recomputes the credit as
//! `min(burst, bw * idle_time)` whenever a packet finds the pipe idle in a later tick,
//! discarding what is left of an earlier burst; with nanosecond time every packet is
//! in a later "tick", so here the unspent credit is kept (capped at `burst`). A new
//! pipe has been idle forever: its first packets get the whole burst.
//!
//! # Schedulers
//!
//! Every pipe has one link and one scheduler ([`SchedKind`], WF2Q+ unless told
//! otherwise, as in FreeBSD). Its queues are the pipe's own queue (weight 1, limit from
//! the pipe's `queue`, for the `pipe N` action) and the per-flow queues of every
//! flowset attached to it. FreeBSD gives `pipe N` traffic a FIFO scheduler of its own
//! with its own copy of the link, so that it does not share the bandwidth with
//! `queue` traffic of the same pipe; here a pipe is one link, shared by both.
//!
//! * FIFO serves packets in arrival order, whatever their queue (each queue still
//!   has its own limit).
//! * WF2Q+ is FreeBSD's `dn_sched_wf2q.c` (Bennett and Zhang, "Hierarchical packet
//!   fair queueing algorithms", SIGCOMM 1996): a virtual time `V` advanced by
//!   `len / sum(weights of active queues)` per packet sent; a queue that becomes
//!   backlogged gets start tag `S = max(V, F)` and finish tag `F = S + len / weight`;
//!   among the eligible queues (`S <= V`) the one with the smallest `F` is served; if
//!   none is eligible `V` jumps to the smallest `S`. A queue that empties stays in the
//!   active set (idle heap) until `V` passes its `F`, so a flow cannot gain by pausing.
//!   Tags are 64.64 fixed point in `u128` (FreeBSD's are 32.31 in `u64`), so weights
//!   1:2:3 get 1:2:3 of the bytes to within 0.5% (the test's figure); ties go to the
//!   lower queue index. `V` and the weight sum are reset when the scheduler empties.
//!
//! # Bounds
//!
//! A configuration may not ask for a queue larger than the [`DnLimits`] of the
//! instance (FreeBSD's `net.inet.ip.dummynet.pipe_slot_limit`, 100 slots, and
//! `pipe_byte_limit`, 1 MB, which ipfw(8) checks before configuring), nor a delay
//! beyond 10 s ([`MAX_DELAY`], ipfw(8)'s "delay must be < 10000"): `configure_pipe`
//! and `configure_queue` refuse it with [`DnError::QueueTooLong`] or
//! [`DnError::BadDelay`]. Changing the limits ([`Dummynet::set_limits`]) leaves
//! what is configured as it is, as FreeBSD does.
//!
//! A flowset makes at most `buckets * 16` per-flow queues in its pipe (FreeBSD's
//! `dn_max_ratio` of 16 flows per hash bucket; default 64 buckets, so 1024 flows). When
//! the bound is reached, idle queues are expired first (the WF2Q+ idle heap is drained),
//! then the packet is dropped ([`DnDrop::TooManyFlows`]). A queue holds at most its
//! limit; the delay line holds what the link has sent in the last `delay`, at most
//! `bw * delay` bytes plus one burst (with `bw 0`, what arrived in the last `delay`,
//! at most 10 s of it: the packets' pool bounds it, as FreeBSD's mbufs do). An idle per-flow queue
//! (empty and, with WF2Q+, out of the idle heap) is kept for its flow's next packet,
//! as FreeBSD keeps idle queues until its lazy expiry; idle queues are freed when
//! their flowset reaches its bound, and at once when the flowset is deleted or
//! reconfigured with another pipe or mask (its busy queues drain first).
//!
//! Costs: enqueue and the service of a packet are O(log active queues); `poll` and
//! `next_wakeup` visit every pipe, which suits the tens of pipes of a simulation
//! rather than FreeBSD's thousands of dynamic pipes (no event heap). Measured
//! (`dummynet_bench`, release, one pipe at line rate): about 50 ns per packet for
//! enqueue + poll through `pipe N` with FIFO, 65 with WF2Q+, 120 through a masked
//! `queue N`, 230-280 with 64-4096 WF2Q+ flows; a bare delay line costs 10.
//!
//! Not modelled: `pipe N config mask` (dynamic pipes, a scheduler instance per flow),
//! the `rr`, `prio` and `qfq` schedulers, RED/GRED, `profile` (extra bits per
//! packet), `noerror` and per-queue `plr`. Beyond ipfw(8)'s API: [`DnDrop::NoSuchQueue`],
//! [`QueueConfig::buckets`], [`Dummynet::configure_sched`], [`Dummynet::apply`] and
//! [`Dummynet::queues`].

mod parse;
mod pipe;
mod sched;
#[cfg(test)]
mod tests;

pub use parse::{parse_config, DnCommand, ParseError};

use pipe::Pipe;
use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

/// Pipe and queue numbers are 1..=65535, as in ipfw(8).
pub const MAX_NUMBER: u32 = 65535;
/// Queues per hash bucket before a flowset refuses new flows (FreeBSD's `dn_max_ratio`).
pub const MAX_FLOWS_PER_BUCKET: usize = 16;
/// Hash buckets of a flowset unless configured (FreeBSD's `hash_size` default).
pub const DEFAULT_BUCKETS: u32 = 64;
/// Largest `buckets` (FreeBSD's `max_hash_size`).
pub const MAX_BUCKETS: u32 = 65536;
/// The queue size of a pipe or queue unless configured: 50 slots, as in FreeBSD.
pub const DEFAULT_QUEUE: QueueLimit = QueueLimit::Slots(50);
/// The longest `delay`: ipfw(8) refuses more than 10000 ms ("delay must be < 10000").
pub const MAX_DELAY: Duration = Duration::from_secs(10);

/// The largest queue a `pipe` or `queue` may be configured with: FreeBSD's
/// `net.inet.ip.dummynet.pipe_slot_limit` and `pipe_byte_limit`, which ipfw(8)
/// checks before it configures ("2 <= queue size <= 100", "queue size must be <
/// 1048576B": both limits are inclusive, whatever the second message says).
/// A queue then holds at most this much whatever the traffic offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DnLimits {
    /// Slots of a queue sized in packets: 1 or more (FreeBSD's sysctl refuses 0).
    pub slots: usize,
    /// Bytes of a queue sized in bytes: 1500 or more (likewise).
    pub bytes: usize,
}

impl DnLimits {
    /// The smallest `bytes` FreeBSD's sysctl takes (one Ethernet MTU).
    pub const MIN_BYTES: usize = 1500;

    /// Whether these are limits FreeBSD's sysctls would take.
    pub fn is_valid(&self) -> bool {
        self.slots >= 1 && self.bytes >= Self::MIN_BYTES
    }

    fn check(&self, q: QueueLimit) -> Result<(), DnError> {
        match q {
            QueueLimit::Slots(n) if n > self.slots => Err(DnError::QueueTooLong {
                asked: q,
                limit: QueueLimit::Slots(self.slots),
            }),
            QueueLimit::Bytes(n) if n > self.bytes => Err(DnError::QueueTooLong {
                asked: q,
                limit: QueueLimit::Bytes(self.bytes),
            }),
            _ => Ok(()),
        }
    }
}

impl Default for DnLimits {
    /// FreeBSD's defaults: 100 slots, 1 MB.
    fn default() -> Self {
        DnLimits {
            slots: 100,
            bytes: 1 << 20,
        }
    }
}

/// A packet as dummynet sees it: its length on the wire and its flow.
pub trait DnPacket {
    /// Bytes that the link must carry (the IP datagram, as FreeBSD's `m_pkthdr.len`).
    fn len(&self) -> usize;
    /// The flow a `queue` mask selects from.
    fn flow(&self) -> FlowKey;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A packet's flow: protocol, addresses and ports (0 for protocols without ports).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowKey {
    pub proto: u8,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
}

impl FlowKey {
    /// The key `mask` leaves of this one: the flowset's per-flow queue is chosen by it.
    pub fn masked(&self, mask: &FlowMask) -> FlowKey {
        FlowKey {
            proto: self.proto & mask.proto,
            src: mask_addr(self.src, mask.src_ip, mask.src_ip6),
            dst: mask_addr(self.dst, mask.dst_ip, mask.dst_ip6),
            sport: self.sport & mask.src_port,
            dport: self.dport & mask.dst_port,
        }
    }
}

fn mask_addr(a: IpAddr, len4: u8, len6: u8) -> IpAddr {
    match a {
        IpAddr::V4(a) => {
            let m = u32::MAX
                .checked_shl(32 - u32::from(len4.min(32)))
                .unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & m))
        }
        IpAddr::V6(a) => {
            let m = u128::MAX
                .checked_shl(128 - u32::from(len6.min(128)))
                .unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & m))
        }
    }
}

/// ipfw's `mask`: which bits of a flow make it a flow of its own. Addresses are
/// prefix lengths per family (ipfw writes IPv4 masks as `0xffffff00`, which must be
/// contiguous here); ports and protocol are bit masks. The default masks nothing: one
/// queue for the whole flowset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct FlowMask {
    pub src_ip: u8,
    pub dst_ip: u8,
    pub src_ip6: u8,
    pub dst_ip6: u8,
    pub src_port: u16,
    pub dst_port: u16,
    pub proto: u8,
}

impl FlowMask {
    /// No mask: all packets of a flowset share one queue.
    pub const NONE: FlowMask = FlowMask {
        src_ip: 0,
        dst_ip: 0,
        src_ip6: 0,
        dst_ip6: 0,
        src_port: 0,
        dst_port: 0,
        proto: 0,
    };
    /// ipfw's `mask all`: a queue per 5-tuple.
    pub const ALL: FlowMask = FlowMask {
        src_ip: 32,
        dst_ip: 32,
        src_ip6: 128,
        dst_ip6: 128,
        src_port: 0xffff,
        dst_port: 0xffff,
        proto: 0xff,
    };

    fn is_valid(&self) -> bool {
        self.src_ip <= 32 && self.dst_ip <= 32 && self.src_ip6 <= 128 && self.dst_ip6 <= 128
    }
}

/// How much a queue may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QueueLimit {
    /// Packets (ipfw's `queue N`).
    Slots(usize),
    /// Bytes (ipfw's `queue NKbytes`).
    Bytes(usize),
}

impl QueueLimit {
    /// Whether a packet of `len` bytes fits a queue holding `pkts` packets of `bytes`.
    fn admits(self, pkts: usize, bytes: usize, len: usize) -> bool {
        match self {
            QueueLimit::Slots(n) => pkts < n,
            QueueLimit::Bytes(n) => bytes.saturating_add(len) <= n,
        }
    }

    fn is_valid(self) -> bool {
        !matches!(self, QueueLimit::Slots(0) | QueueLimit::Bytes(0))
    }

    /// The number of slots or bytes.
    fn amount(self) -> usize {
        match self {
            QueueLimit::Slots(n) | QueueLimit::Bytes(n) => n,
        }
    }
}

/// A pipe's scheduler (ipfw's `sched N config type ...`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum SchedKind {
    /// Arrival order across all queues.
    Fifo,
    /// Worst-case fair weighted fair queueing, FreeBSD's default.
    #[default]
    Wf2q,
}

/// `pipe N config ...`: a link and its scheduler.
#[derive(Clone, Debug, PartialEq)]
pub struct PipeConfig {
    /// Bits per second; 0 is no limit.
    pub bandwidth: u64,
    /// Propagation delay, after the transmission (nanosecond resolution).
    pub delay: Duration,
    /// Packet loss rate on entry, 0..=1.
    pub plr: f64,
    /// The pipe's own queue (for `pipe N` traffic).
    pub queue: QueueLimit,
    /// Bytes that may leave at line rate after an idle period.
    pub burst: u64,
    pub sched: SchedKind,
}

impl Default for PipeConfig {
    fn default() -> Self {
        PipeConfig {
            bandwidth: 0,
            delay: Duration::ZERO,
            plr: 0.0,
            queue: DEFAULT_QUEUE,
            burst: 0,
            sched: SchedKind::default(),
        }
    }
}

/// `queue N config ...`: a flowset, whose per-flow queues feed pipe `pipe`'s scheduler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    pub pipe: u32,
    /// 1..=100.
    pub weight: u32,
    pub mask: FlowMask,
    /// The limit of each per-flow queue.
    pub queue: QueueLimit,
    /// ipfw's `buckets`: the flowset makes at most `buckets * 16` per-flow queues.
    pub buckets: u32,
}

impl QueueConfig {
    /// A flowset feeding `pipe` with the defaults: weight 1, no mask, 50 slots.
    pub fn new(pipe: u32) -> Self {
        QueueConfig {
            pipe,
            weight: 1,
            mask: FlowMask::NONE,
            queue: DEFAULT_QUEUE,
            buckets: DEFAULT_BUCKETS,
        }
    }

    fn max_flows(&self) -> usize {
        self.buckets as usize * MAX_FLOWS_PER_BUCKET
    }
}

/// Why a configuration was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DnError {
    /// Pipe and queue numbers are 1..=65535.
    BadNumber(u32),
    /// Weights are 1..=100.
    BadWeight(u32),
    /// `plr` is a probability.
    BadPlr,
    /// A queue limit of 0.
    BadQueueLimit,
    /// `buckets` is 1..=65536.
    BadBuckets(u32),
    /// A prefix length beyond the family's.
    BadMask,
    /// A queue larger than [`DnLimits`] allows.
    QueueTooLong {
        asked: QueueLimit,
        limit: QueueLimit,
    },
    /// A delay beyond [`MAX_DELAY`].
    BadDelay,
}

impl fmt::Display for DnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DnError::BadNumber(n) => write!(f, "number {n} is not in 1..=65535"),
            DnError::BadWeight(w) => write!(f, "weight {w} is not in 1..=100"),
            DnError::BadPlr => write!(f, "plr is not in 0..=1"),
            DnError::BadQueueLimit => write!(f, "queue size is 0"),
            DnError::BadBuckets(b) => write!(f, "buckets {b} is not in 1..=65536"),
            DnError::BadMask => write!(f, "mask prefix is longer than the address"),
            DnError::QueueTooLong { asked, limit } => {
                let (what, sysctl) = match limit {
                    QueueLimit::Slots(_) => ("slots", "pipe_slot_limit"),
                    QueueLimit::Bytes(_) => ("bytes", "pipe_byte_limit"),
                };
                write!(
                    f,
                    "queue size {asked} is more than {limit} (at most {} {what}: \
                     net.inet.ip.dummynet.{sysctl})",
                    limit.amount()
                )
            }
            DnError::BadDelay => write!(f, "delay is more than 10000 ms"),
        }
    }
}

impl std::error::Error for DnError {}

/// Why a packet was not taken. Each maps to one counter of [`PipeStats`]
/// (`NoSuchPipe` and `NoSuchQueue` to none: there is no pipe to count them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DnDrop {
    /// The pipe (or the queue's pipe) is not configured.
    NoSuchPipe,
    /// The queue is not configured.
    NoSuchQueue,
    /// Its queue was full (`drop_full`).
    QueueFull,
    /// `plr` (`drop_loss`).
    Loss,
    /// Its flowset has as many per-flow queues as it may (`drop_flows`).
    TooManyFlows,
}

/// A pipe's counters, for `ipfw pipe show`. Every packet that entered is, at any
/// moment, counted once in `out`, a `drop_*`, `queued` (waiting in the pipe's queues)
/// or `delayed` (sent, in the delay line): `in_pkts = out_pkts + drop_loss_pkts +
/// drop_full_pkts + drop_flows_pkts + queued_pkts + delayed_pkts`, likewise for bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PipeStats {
    pub in_pkts: u64,
    pub in_bytes: u64,
    pub out_pkts: u64,
    pub out_bytes: u64,
    pub drop_loss_pkts: u64,
    pub drop_loss_bytes: u64,
    pub drop_full_pkts: u64,
    pub drop_full_bytes: u64,
    pub drop_flows_pkts: u64,
    pub drop_flows_bytes: u64,
    pub queued_pkts: u64,
    pub queued_bytes: u64,
    pub delayed_pkts: u64,
    pub delayed_bytes: u64,
    /// Per-flow queues that exist now, the pipe's own queue not included.
    pub flows: u64,
}

/// A flowset (`queue N`).
#[derive(Debug)]
struct Flowset {
    cfg: QueueConfig,
}

/// The shaper: pipes, flowsets and the seeded loss generator. See the module doc for
/// the semantics and the call order (enqueue at any time, then `poll` at or after
/// `next_wakeup`).
pub struct Dummynet<T: DnPacket> {
    pipes: BTreeMap<u32, Pipe<T>>,
    flowsets: BTreeMap<u32, Flowset>,
    rng: u64,
    /// The largest `now` seen.
    now: u64,
    /// Arrival order of packets (FIFO order, and order across a scheduler change).
    seq: u64,
    /// Released packets of several pipes, merged by release time.
    scratch: Vec<(u64, T)>,
    /// The largest queue a configuration may ask for.
    limits: DnLimits,
}

impl<T: DnPacket> fmt::Debug for Dummynet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dummynet")
            .field("pipes", &self.pipes.keys().collect::<Vec<_>>())
            .field("queues", &self.flowsets)
            .field("now", &self.now)
            .finish()
    }
}

fn check_number(n: u32) -> Result<(), DnError> {
    if (1..=MAX_NUMBER).contains(&n) {
        Ok(())
    } else {
        Err(DnError::BadNumber(n))
    }
}

/// Whether a [`Dummynet`] with limits `lim` would take `cmd` in [`Dummynet::apply`]:
/// its errors come from the command and the limits alone, never from what is
/// configured, so a caller applying several can check them all first and apply all
/// or none.
pub fn check_command(cmd: &DnCommand, lim: &DnLimits) -> Result<(), DnError> {
    match cmd {
        DnCommand::Pipe(n, cfg) => check_pipe(*n, cfg, lim),
        DnCommand::Queue(n, cfg) => check_queue(*n, cfg, lim),
        DnCommand::Sched(..) | DnCommand::DeletePipe(_) | DnCommand::DeleteQueue(_) => Ok(()),
    }
}

fn check_pipe(n: u32, cfg: &PipeConfig, lim: &DnLimits) -> Result<(), DnError> {
    check_number(n)?;
    if !(0.0..=1.0).contains(&cfg.plr) {
        return Err(DnError::BadPlr);
    }
    if !cfg.queue.is_valid() {
        return Err(DnError::BadQueueLimit);
    }
    lim.check(cfg.queue)?;
    if cfg.delay > MAX_DELAY {
        return Err(DnError::BadDelay);
    }
    Ok(())
}

fn check_queue(n: u32, cfg: &QueueConfig, lim: &DnLimits) -> Result<(), DnError> {
    check_number(n)?;
    check_number(cfg.pipe)?;
    if !(1..=100).contains(&cfg.weight) {
        return Err(DnError::BadWeight(cfg.weight));
    }
    if !cfg.queue.is_valid() {
        return Err(DnError::BadQueueLimit);
    }
    lim.check(cfg.queue)?;
    if !(1..=MAX_BUCKETS).contains(&cfg.buckets) {
        return Err(DnError::BadBuckets(cfg.buckets));
    }
    if !cfg.mask.is_valid() {
        return Err(DnError::BadMask);
    }
    Ok(())
}

impl<T: DnPacket> Dummynet<T> {
    /// An empty shaper; `seed` drives the `plr` losses.
    pub fn new(seed: u64) -> Self {
        Dummynet {
            pipes: BTreeMap::new(),
            flowsets: BTreeMap::new(),
            rng: seed,
            now: 0,
            seq: 0,
            scratch: Vec::new(),
            limits: DnLimits::default(),
        }
    }

    /// The queue limits configurations are checked against.
    pub fn limits(&self) -> DnLimits {
        self.limits
    }

    /// Changes the queue limits (FreeBSD's `sysctl net.inet.ip.dummynet.pipe_slot_limit`
    /// and `pipe_byte_limit`); false, and nothing changed, if they are not
    /// [valid](DnLimits::is_valid). As in FreeBSD, pipes and queues already
    /// configured keep their size: the limits apply to the next configuration.
    pub fn set_limits(&mut self, lim: DnLimits) -> bool {
        if lim.is_valid() {
            self.limits = lim;
        }
        lim.is_valid()
    }

    /// `ipfw pipe N config ...`. Reconfiguring keeps every queued packet: a new
    /// bandwidth applies from the end of the packet on the wire, a new delay to packets
    /// sent from then on, a new queue size to arrivals, a new scheduler takes the
    /// queued packets (to FIFO in their arrival order; to WF2Q+ as newly backlogged
    /// queues); `burst` caps the credit from the next idle period on.
    pub fn configure_pipe(&mut self, n: u32, cfg: PipeConfig) -> Result<(), DnError> {
        check_pipe(n, &cfg, &self.limits)?;
        match self.pipes.get_mut(&n) {
            Some(p) => p.reconfigure(cfg),
            None => {
                self.pipes.insert(n, Pipe::new(cfg));
            }
        }
        Ok(())
    }

    /// `ipfw queue N config ...`. A flowset may name a pipe not configured yet (its
    /// packets are then dropped as [`DnDrop::NoSuchPipe`]). Reconfiguring with the same
    /// pipe and mask updates the weight and limit of its existing per-flow queues; with
    /// another pipe or mask, the existing queues are let drain and new ones are made.
    pub fn configure_queue(&mut self, n: u32, cfg: QueueConfig) -> Result<(), DnError> {
        check_queue(n, &cfg, &self.limits)?;
        if let Some(old) = self.flowsets.get(&n) {
            if let Some(p) = self.pipes.get_mut(&old.cfg.pipe) {
                if old.cfg.pipe == cfg.pipe && old.cfg.mask == cfg.mask {
                    p.update_flowset(n, cfg.weight, cfg.queue);
                } else {
                    p.orphan_flowset(n);
                }
            }
        }
        self.flowsets.insert(n, Flowset { cfg });
        Ok(())
    }

    /// `ipfw sched N config type ...`: change pipe `n`'s scheduler, keeping its packets.
    /// False if there is no such pipe.
    pub fn configure_sched(&mut self, n: u32, kind: SchedKind) -> bool {
        match self.pipes.get_mut(&n) {
            Some(p) => {
                let mut cfg = p.cfg.clone();
                cfg.sched = kind;
                p.reconfigure(cfg);
                true
            }
            None => false,
        }
    }

    /// Apply a parsed command.
    pub fn apply(&mut self, cmd: DnCommand) -> Result<bool, DnError> {
        match cmd {
            DnCommand::Pipe(n, cfg) => self.configure_pipe(n, cfg).map(|()| true),
            DnCommand::Queue(n, cfg) => self.configure_queue(n, cfg).map(|()| true),
            DnCommand::Sched(n, kind) => Ok(self.configure_sched(n, kind)),
            DnCommand::DeletePipe(n) => Ok(self.delete_pipe(n)),
            DnCommand::DeleteQueue(n) => Ok(self.delete_queue(n)),
        }
    }

    /// `ipfw pipe N delete`. The packets it holds are dropped with it, uncounted (its
    /// counters go too). Flowsets feeding it stay, and drop as `NoSuchPipe` until a
    /// pipe `n` is configured again.
    pub fn delete_pipe(&mut self, n: u32) -> bool {
        self.pipes.remove(&n).is_some()
    }

    /// `ipfw queue N delete`. Its per-flow queues drain into their pipe.
    pub fn delete_queue(&mut self, n: u32) -> bool {
        match self.flowsets.remove(&n) {
            Some(fs) => {
                if let Some(p) = self.pipes.get_mut(&fs.cfg.pipe) {
                    p.orphan_flowset(n);
                }
                true
            }
            None => false,
        }
    }

    fn clock(&mut self, now: u64) -> u64 {
        self.now = self.now.max(now);
        self.now
    }

    /// One draw of the loss generator (splitmix64): true if the packet is lost.
    fn lost(rng: &mut u64, plr: f64) -> bool {
        if plr <= 0.0 {
            return false;
        }
        *rng = rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        ((z >> 11) as f64) < plr * (1u64 << 53) as f64
    }

    /// The rule action `pipe N`: the packet joins pipe `pipe`'s own queue.
    pub fn enqueue_pipe(&mut self, pipe: u32, pkt: T, now: u64) -> Result<(), (T, DnDrop)> {
        let now = self.clock(now);
        let Some(p) = self.pipes.get_mut(&pipe) else {
            return Err((pkt, DnDrop::NoSuchPipe));
        };
        p.advance(now);
        let len = pkt.len();
        p.count_in(len);
        if Self::lost(&mut self.rng, p.cfg.plr) {
            p.count_drop(DnDrop::Loss, len);
            return Err((pkt, DnDrop::Loss));
        }
        self.seq += 1;
        p.enqueue(pipe::OWN_QUEUE, self.seq, pkt, now)
    }

    /// The rule action `queue N`: the packet joins the per-flow queue of flowset
    /// `queue` that its masked flow selects, in the flowset's pipe.
    pub fn enqueue_queue(&mut self, queue: u32, pkt: T, now: u64) -> Result<(), (T, DnDrop)> {
        let now = self.clock(now);
        let Some(fs) = self.flowsets.get(&queue) else {
            return Err((pkt, DnDrop::NoSuchQueue));
        };
        let Some(p) = self.pipes.get_mut(&fs.cfg.pipe) else {
            return Err((pkt, DnDrop::NoSuchPipe));
        };
        p.advance(now);
        let len = pkt.len();
        p.count_in(len);
        if Self::lost(&mut self.rng, p.cfg.plr) {
            p.count_drop(DnDrop::Loss, len);
            return Err((pkt, DnDrop::Loss));
        }
        let key = pkt.flow().masked(&fs.cfg.mask);
        let qid = match p.find_flow(queue, &key) {
            Some(q) => q,
            None => {
                // A new queue is empty: a packet it could not hold is refused before
                // the queue is made, so no empty queue is left behind.
                if !fs.cfg.queue.admits(0, 0, len) {
                    p.count_drop(DnDrop::QueueFull, len);
                    return Err((pkt, DnDrop::QueueFull));
                }
                match p.new_flow(queue, key, &fs.cfg) {
                    Some(q) => q,
                    None => {
                        p.count_drop(DnDrop::TooManyFlows, len);
                        return Err((pkt, DnDrop::TooManyFlows));
                    }
                }
            }
        };
        self.seq += 1;
        p.enqueue(qid, self.seq, pkt, now)
    }

    /// Appends to `out` every packet whose release time is `<= now`, in release order
    /// (ties: lower pipe number first, then the order they were sent).
    pub fn poll(&mut self, now: u64, out: &mut Vec<T>) {
        let now = self.clock(now);
        let mut ready = 0;
        for p in self.pipes.values_mut() {
            p.advance(now);
            if p.ready(now) {
                ready += 1;
            }
        }
        if ready <= 1 {
            for p in self.pipes.values_mut() {
                p.release(now, |_, pkt| out.push(pkt));
            }
            return;
        }
        let scratch = &mut self.scratch;
        for p in self.pipes.values_mut() {
            p.release(now, |t, pkt| scratch.push((t, pkt)));
        }
        // Stable: equal times keep pipe order, then each delay line's order.
        scratch.sort_by_key(|e| e.0);
        out.extend(scratch.drain(..).map(|e| e.1));
    }

    /// The earliest time at which `poll` may have something to do: a packet's release,
    /// or the link of a pipe with queued packets taking the next one (when its release
    /// time becomes known). `None` if no packet is held.
    pub fn next_wakeup(&self) -> Option<u64> {
        self.pipes.values().filter_map(|p| p.next_event()).min()
    }

    /// A pipe's counters.
    pub fn pipe_stats(&self, n: u32) -> Option<PipeStats> {
        self.pipes.get(&n).map(|p| p.stats())
    }

    /// Every pipe with its configuration and counters, by number (`ipfw pipe show`).
    pub fn pipes(&self) -> Vec<(u32, PipeConfig, PipeStats)> {
        self.pipes
            .iter()
            .map(|(n, p)| (*n, p.cfg.clone(), p.stats()))
            .collect()
    }

    /// Every flowset with its configuration (`ipfw queue show`).
    pub fn queues(&self) -> Vec<(u32, QueueConfig)> {
        self.flowsets
            .iter()
            .map(|(n, f)| (*n, f.cfg.clone()))
            .collect()
    }
}
