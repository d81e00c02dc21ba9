//! TCP on a worker: demultiplexing segments to connections, listeners and resets;
//! building segments; moving bytes between control blocks and their applications.
//!
//! Every flow has a home worker, a symmetric Toeplitz hash of its 4-tuple modulo the
//! worker count, so any worker computes it alike. A segment that arrives elsewhere
//! is handed to its home through that worker's lock-free inbox; with RSS steering
//! that matches (the memory links steer by the same hash) that never happens.

use super::chan::{err, phase, ListenShared, Piece, StreamShared};
use super::sndbuf::Piece as SndPiece;
use super::tcb::{
    reset_for, wscale_for, CookieOpts, Payload, SegIn, SegOut, State, Tcb, TcpConfig, TcpError,
    TimeWait, PAYLOAD_PIECES,
};
use crate::ip::{self, IpInfo, IpOut, DEFAULT_TTL};
use crate::ip6::Ip6Out;
use crate::stats::DropReason;
use crate::worker::Cx;
use crate::FxBuild;
use mbuf::Mbuf;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use wire::{IpProtocol, TcpPacket, TcpRepr};

/// Work handed to a worker by applications or by other workers.
#[derive(Debug)]
pub(crate) enum TcpMsg {
    /// An IPv4 packet carrying a segment of a flow homed here.
    Segment(Mbuf, TcpIn),
    /// A Packet Too Big for this connection: its segments shrink to this MSS.
    PathMtu(Tuple, u32),
    /// An application asks for a connection.
    Connect(Arc<StreamShared>),
    /// An application wrote, shut down or dropped its handle.
    Wake(Arc<StreamShared>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tuple {
    pub local: SocketAddr,
    pub remote: SocketAddr,
}

/// The connection table's hash: whole words, where `SocketAddr`'s own feeds the hasher
/// an address a byte at a time (4% of the connection-rate bench's time).
impl Hash for Tuple {
    fn hash<H: Hasher>(&self, h: &mut H) {
        let ports = u64::from(self.local.port()) << 16 | u64::from(self.remote.port());
        match (self.local.ip(), self.remote.ip()) {
            (IpAddr::V4(l), IpAddr::V4(r)) => {
                h.write_u64(u64::from(l.to_bits()) << 32 | u64::from(r.to_bits()));
                h.write_u64(ports);
            }
            (l, r) => {
                for a in [l, r] {
                    let b = match a {
                        IpAddr::V4(a) => a.to_ipv6_mapped().to_bits(),
                        IpAddr::V6(a) => a.to_bits(),
                    };
                    h.write_u64(b as u64);
                    h.write_u64((b >> 64) as u64);
                }
                h.write_u64(ports | 1 << 63);
            }
        }
    }
}

/// What TCP input needs from the network layer, either family.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TcpIn {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// Offset of the TCP header.
    pub off: usize,
    /// Sent to a broadcast or multicast address.
    pub bcast: bool,
}

impl From<IpInfo> for TcpIn {
    fn from(i: IpInfo) -> Self {
        TcpIn {
            src: IpAddr::V4(i.src),
            dst: IpAddr::V4(i.dst),
            off: i.hlen,
            bcast: i.bcast,
        }
    }
}

/// A new connection's settings: the stack's, with its buffer sizes (send, receive),
/// and the MSS of its family and of the interface its route leaves by.
fn conn_cfg(cx: &Cx<'_>, t: &Tuple, buffers: (usize, usize)) -> TcpConfig {
    let base = cx.tcp_cfg;
    let (ifp, ip_hdr) = match t.remote.ip() {
        IpAddr::V4(d) => (crate::ip::ip_route(cx, d).map(|(ifp, _, _)| ifp), 20),
        IpAddr::V6(d) => (crate::ip6::ip6_route(cx, d, None).map(|(ifp, _)| ifp), 40),
    };
    // The configured MSS is IPv4's; IPv6's header is 20 bytes longer.
    let family_mss = base.mss.saturating_sub(ip_hdr as u16 - 20);
    let (tso_max, mss) = match ifp {
        // A device that segments takes segments up to its size: room for the IP
        // header and the largest TCP header beside the data. RFC 9293 §3.7.1: the
        // MSS we offer (and send with) is the interface's MTU less the fixed IP and
        // TCP headers (but not below RFC 9293's 536), so a host on a 1280-byte link
        // does not invite 1500-byte packets.
        Some(ifp) => {
            let link_mss = u16::try_from(ifp.mtu.saturating_sub(ip_hdr + 20)).unwrap_or(u16::MAX);
            // Without a device that segments, segments of up to GSO_MAX, which
            // `ip::fit_link` cuts (`ip.swgso`): one pass of TCP output per 64 KiB.
            let tso = match (base.tso, ifp.offload.tso) {
                (false, _) => 0,
                (true, 0) => crate::tcp::tcb::GSO_MAX,
                (true, device) => device,
            };
            (
                tso.saturating_sub(ip_hdr + 60) as u32,
                family_mss.min(link_mss.max(536)),
            )
        }
        None => (0, family_mss),
    };
    TcpConfig {
        tso_max,
        sndbuf: buffers.0,
        rcvbuf: buffers.1,
        mss,
        ..base
    }
}

/// The home worker of a flow (symmetric: both directions agree).
pub(crate) fn flow_home(a: SocketAddr, b: SocketAddr, nworkers: usize) -> usize {
    if nworkers <= 1 {
        return 0;
    }
    // The same Toeplitz input as the device's RSS hash of the frame (dev::rss).
    let mut input = [0u8; 36];
    let n = match (a.ip(), b.ip()) {
        (IpAddr::V4(x), IpAddr::V4(y)) => {
            input[0..4].copy_from_slice(&x.octets());
            input[4..8].copy_from_slice(&y.octets());
            input[8..10].copy_from_slice(&a.port().to_be_bytes());
            input[10..12].copy_from_slice(&b.port().to_be_bytes());
            12
        }
        (x, y) => {
            let o = |ip: IpAddr| match ip {
                IpAddr::V6(v) => v.octets(),
                IpAddr::V4(v) => v.to_ipv6_mapped().octets(),
            };
            input[0..16].copy_from_slice(&o(x));
            input[16..32].copy_from_slice(&o(y));
            input[32..34].copy_from_slice(&a.port().to_be_bytes());
            input[34..36].copy_from_slice(&b.port().to_be_bytes());
            36
        }
    };
    let input = &input[..n];
    dev::rss::queue_of(
        dev::rss::toeplitz(&dev::rss::SYMMETRIC_KEY, input),
        nworkers,
    )
}

struct Conn {
    tuple: Tuple,
    tcb: Tcb,
    s: Arc<StreamShared>,
    listener: Option<Arc<ListenShared>>,
    /// Handed to the listener's accept queue (or never will be).
    announced: bool,
    /// Counted in the listener's SYN queue (`half_open`).
    half_open: bool,
    fin_requested: bool,
    tx_partial: Option<(super::sndbuf::Chunk, usize)>,
    /// The deadline this connection has in the worker's timer heap, if any.
    timer_at: Option<dev::Instant>,
    /// Listed in the worker's `deferred`, to be serviced at the end of the batch.
    deferred: bool,
}

/// The addresses of a vacant connection.
const VACANT_ADDR: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
    std::net::Ipv4Addr::UNSPECIFIED,
    0,
));

impl Conn {
    /// A connection of `tuple` with `tcb`, shared with its application through `s`;
    /// not yet announced to a listener, nothing pending.
    fn new(tuple: Tuple, tcb: Tcb, s: Arc<StreamShared>) -> Conn {
        Conn {
            tuple,
            tcb,
            s,
            listener: None,
            announced: false,
            half_open: false,
            fin_requested: false,
            tx_partial: None,
            timer_at: None,
            deferred: false,
        }
    }

    /// A connection that holds nothing, for a box kept for reuse.
    fn vacant(s: &Arc<StreamShared>) -> Conn {
        let t = Tuple {
            local: VACANT_ADDR,
            remote: VACANT_ADDR,
        };
        Conn::new(t, Tcb::vacant(), s.clone())
    }

    /// A connection a listener's SYN (`half_open`) or a SYN cookie created.
    fn passive(cx: &Cx<'_>, tuple: Tuple, tcb: Tcb, l: Arc<ListenShared>, half_open: bool) -> Conn {
        let p = &cx.tcp_cfg;
        let s = Arc::new(StreamShared::new(
            tuple.local,
            tuple.remote,
            cx.worker,
            l.buffers.0,
            l.buffers.1,
        ));
        s.opt_nodelay.store(p.nodelay, Ordering::Release);
        Conn {
            listener: Some(l),
            half_open,
            ..Conn::new(tuple, tcb, s)
        }
    }
}

/// Slots that keep their indexes, for the connection table and the timers to name:
/// a freed slot is reused, its generation bumped so that a timer entry naming its
/// old occupant is told apart. An occupant may be held out of its slot (`take`, then
/// put back) while it is worked on.
struct Slab<T> {
    slots: Vec<Option<T>>,
    free: Vec<usize>,
    gens: Vec<u32>,
}

impl<T> Slab<T> {
    fn new() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
            gens: Vec::new(),
        }
    }

    /// Puts `v` in a free slot; returns the slot.
    fn insert(&mut self, v: T) -> usize {
        match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(v);
                i
            }
            None => {
                self.slots.push(Some(v));
                self.gens.push(0);
                self.slots.len() - 1
            }
        }
    }

    /// Frees slot `i` (occupied, or its occupant held out); returns what was in it.
    fn remove(&mut self, i: usize) -> Option<T> {
        self.gens[i] = self.gens[i].wrapping_add(1);
        self.free.push(i);
        self.slots[i].take()
    }

    /// Slot `i`'s generation (a slot that exists).
    fn gen(&self, i: usize) -> u32 {
        self.gens[i]
    }

    /// Whether `g` is slot `i`'s generation: an entry naming it is current.
    fn is_current(&self, i: usize, g: u32) -> bool {
        self.gens.get(i) == Some(&g)
    }

    fn get(&self, i: usize) -> Option<&T> {
        self.slots.get(i).and_then(Option::as_ref)
    }

    fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        self.slots.get_mut(i).and_then(Option::as_mut)
    }

    /// Holds slot `i`'s occupant out of it, to [`Slab::put_back`].
    fn take(&mut self, i: usize) -> Option<T> {
        self.slots.get_mut(i).and_then(Option::take)
    }

    fn put_back(&mut self, i: usize, v: T) {
        self.slots[i] = Some(v);
    }
}

/// What the connection table names. Slots as `u32`, so that an entry of the table
/// stays a word (there are at most `max_conns`).
#[derive(Clone, Copy)]
enum Found {
    /// A connection, by slot.
    Conn(u32),
    /// A TIME_WAIT remnant, by slot.
    TimeWait(u32),
}

const _: () = assert!(std::mem::size_of::<Found>() == 8);

/// A worker's TCP state: its connections and scratch space.
pub(crate) struct TcpWorker {
    conns: HashMap<Tuple, Found, FxBuild>,
    /// Boxed: `service` takes a connection out of its slot and puts it back, which
    /// should move a pointer, not the control block's kilobyte.
    slab: Slab<Box<Conn>>,
    segs: Vec<SegOut>,
    scratch: Vec<u8>,
    /// Connections' next deadlines, earliest first: (deadline, slot, generation).
    /// An entry is current while its connection's `timer_at` names it; a deadline
    /// that moves later keeps its entry, which, when it comes up early, is pushed
    /// again for the real deadline. So at most a few entries per connection, and a
    /// due timer costs O(log n), not a scan of every connection.
    timers: BinaryHeap<Reverse<(dev::Instant, usize, u32)>>,
    pub max_conns: usize,
    /// Readers to wake at the end of the worker's batch: one wake-up for all the
    /// segments of a burst, not one for the first of them.
    readers: Vec<Arc<StreamShared>>,
    /// Connections whose segments of this batch are in and whose output waits for
    /// the end of it ([`tcp_flush`]): one ACK for a burst of data, one pass
    /// of output for a burst of ACKs.
    deferred: Vec<usize>,
    /// Boxes of connections that are gone, holding a vacant connection, for the next
    /// ones to move into (at most [`BOX_SPARE`]): a kilobyte allocated and freed per
    /// connection was, with the page faults of the heap growing back, a tenth of
    /// the connection-rate bench.
    #[allow(clippy::vec_box)]
    boxes: Vec<Box<Conn>>,
    /// What a vacant connection refers to: no application, no channels.
    vacant: Arc<StreamShared>,
    /// Connections reduced to what TIME_WAIT needs ([`TimeWait`], FreeBSD's
    /// `tcptw`) once their application is gone, with their tuples.
    tws: Slab<(Tuple, TimeWait)>,
    /// The remnants' deadlines, (deadline, slot, generation), in the order they
    /// were set. Every wait is as long (the stack's `time_wait`), so this is also
    /// deadline order, and a FIFO does what the heap does for connections. A wait
    /// a retransmitted FIN restarted goes to the back when its old deadline comes
    /// up, so each remnant has one entry (and such a one may end late, by less than
    /// the time between the FIN and its old deadline; never early).
    tw_queue: VecDeque<(dev::Instant, usize, u32)>,
}

/// Connection boxes a worker keeps for reuse.
const BOX_SPARE: usize = 256;

impl std::fmt::Debug for TcpWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpWorker")
            .field("conns", &self.conns.len())
            .finish()
    }
}

impl TcpWorker {
    /// Wakes the readers collected during the batch (end of a worker's poll).
    pub fn wake_readers(&mut self) {
        for s in self.readers.drain(..) {
            s.wake_reader();
        }
    }

    pub fn new(max_conns: usize) -> Self {
        TcpWorker {
            conns: HashMap::default(),
            slab: Slab::new(),
            segs: Vec::with_capacity(64),
            readers: Vec::with_capacity(64),
            deferred: Vec::with_capacity(64),
            scratch: vec![0u8; 65_536],
            timers: BinaryHeap::new(),
            max_conns,
            boxes: Vec::new(),
            vacant: Arc::new(StreamShared::new(VACANT_ADDR, VACANT_ADDR, 0, 0, 0)),
            tws: Slab::new(),
            tw_queue: VecDeque::new(),
        }
    }

    pub fn poll_at(&self) -> Option<dev::Instant> {
        let conns = self.timers.peek().map(|Reverse((t, _, _))| *t);
        let tws = self.tw_queue.front().map(|(t, _, _)| *t);
        conns.into_iter().chain(tws).min()
    }

    /// Registers slot `i`'s connection's next deadline (after it was serviced).
    fn arm(&mut self, i: usize, c: &mut Conn) {
        if let Some(t) = c.tcb.poll_at() {
            if c.timer_at.is_none_or(|r| t < r) {
                c.timer_at = Some(t);
                self.timers.push(Reverse((t, i, self.slab.gen(i))));
                // Stale entries (deadlines that moved) leave only when their time
                // comes, which for a keepalive is hours: sweep them when they
                // outnumber the connections, so the heap stays O(connections).
                if self.timers.len() > 4 * self.conns.len() + 64 {
                    let slab = &self.slab;
                    let (here, at) = (i, t);
                    self.timers.retain(|Reverse((t, j, g))| {
                        (*j == here && *t == at)
                            || (slab.is_current(*j, *g)
                                && slab.get(*j).is_some_and(|c| c.timer_at == Some(*t)))
                    });
                }
            }
        }
    }

    /// Entries in the timer heap (current and stale), a gauge.
    pub fn timer_entries(&self) -> usize {
        self.timers.len() + self.tw_queue.len()
    }

    /// Connections this worker holds: control blocks, and TIME_WAIT remnants.
    pub fn count(&self) -> usize {
        self.conns.len()
    }

    fn insert(&mut self, c: Conn) -> usize {
        let t = c.tuple;
        let c = match self.boxes.pop() {
            Some(mut b) => {
                *b = c;
                b
            }
            None => Box::new(c),
        };
        let i = self.slab.insert(c);
        self.conns.insert(t, Found::Conn(i as u32));
        i
    }

    /// Forgets slot `i`'s connection (`t` its tuple).
    fn remove(&mut self, i: usize, t: &Tuple) {
        self.conns.remove(t);
        if let Some(c) = self.slab.remove(i) {
            self.recycle(c);
        }
    }

    /// Forgets slot `i`'s connection `c`, held out of its slot by the caller.
    fn remove_held(&mut self, i: usize, c: Box<Conn>) {
        self.remove(i, &c.tuple);
        self.recycle(c);
    }

    /// Keeps `t`'s TIME_WAIT as its remnant alone (its connection is gone).
    fn insert_tw(&mut self, t: Tuple, rem: TimeWait) {
        let j = self.tws.insert((t, rem));
        self.tw_queue.push_back((rem.deadline, j, self.tws.gen(j)));
        self.conns.insert(t, Found::TimeWait(j as u32));
        // Remnants a new incarnation ended early (RFC 6191) leave their entries
        // until those come up, a minute on: sweep them when they outnumber the
        // live ones, so that a peer reopening 4-tuples fast cannot grow the queue.
        if self.tw_queue.len() > 2 * self.conns.len() + 64 {
            let tws = &self.tws;
            self.tw_queue.retain(|&(_, j, g)| tws.is_current(j, g));
        }
    }

    /// Forgets the TIME_WAIT remnant in slot `j`.
    fn remove_tw(&mut self, j: usize) {
        if let Some((t, _)) = self.tws.remove(j) {
            self.conns.remove(&t);
        }
    }

    /// The connection `t` names, if it is one (not a TIME_WAIT remnant).
    fn conn_slot(&self, t: &Tuple) -> Option<usize> {
        match self.conns.get(t) {
            Some(&Found::Conn(i)) => Some(i as usize),
            _ => None,
        }
    }

    /// Ends a removed connection: what it holds goes now, its box is kept for the
    /// next connection while there are fewer than [`BOX_SPARE`].
    fn recycle(&mut self, mut c: Box<Conn>) {
        if self.boxes.len() < BOX_SPARE {
            *c = Conn::vacant(&self.vacant);
            self.boxes.push(c);
        }
    }
}

/// RFC 6528: ISN = M + F(4-tuple, secret), M a 4 µs clock.
fn isn(secret: u64, t: &Tuple, now: dev::Instant) -> u32 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    secret.hash(&mut h);
    t.hash(&mut h);
    (h.finish() as u32).wrapping_add((now.as_nanos() / 4_000) as u32)
}

/// The timestamp clock's offset for a pair of hosts (RFC 7323 §7.1 allows one per
/// connection; one per address pair, as Linux keys it, keeps TSval rising across
/// incarnations of a 4-tuple, which TIME_WAIT reuse by timestamp relies on).
fn ts_offset(secret: u64, t: &Tuple) -> u32 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (secret ^ 0x7e57_a3b1_u64).hash(&mut h);
    t.local.ip().hash(&mut h);
    t.remote.ip().hash(&mut h);
    h.finish() as u32
}

/// The MSS values a SYN cookie can carry (3 bits; RFC 4987's classic encoding).
const COOKIE_MSS: [u16; 8] = [216, 536, 1024, 1200, 1220, 1360, 1440, 1460];

fn cookie_hash(secret: u64, t: &Tuple, epoch: u32) -> u32 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (secret ^ 0xc00c_1e5a_u64).hash(&mut h);
    t.hash(&mut h);
    epoch.hash(&mut h);
    h.finish() as u32
}

/// A SYN cookie: 5 bits of a 64-second clock, 3 bits of MSS, 24 bits of keyed hash.
fn cookie_make(secret: u64, t: &Tuple, now: dev::Instant, mss: u16) -> u32 {
    let epoch = (now.as_nanos() / 64_000_000_000) as u32;
    let idx = COOKIE_MSS.iter().rposition(|&m| m <= mss).unwrap_or(0) as u32;
    ((epoch & 0x1f) << 27) | (idx << 24) | (cookie_hash(secret, t, epoch) & 0x00ff_ffff)
}

/// The MSS a valid cookie (from this or the previous 64 s) carries.
fn cookie_check(secret: u64, t: &Tuple, cookie: u32, now: dev::Instant) -> Option<u16> {
    let cur = (now.as_nanos() / 64_000_000_000) as u32;
    for epoch in [cur, cur.wrapping_sub(1)] {
        if (epoch & 0x1f) == cookie >> 27
            && cookie_hash(secret, t, epoch) & 0x00ff_ffff == cookie & 0x00ff_ffff
        {
            return Some(COOKIE_MSS[((cookie >> 24) & 7) as usize]);
        }
    }
    None
}

/// `tcp_input` from `ip_input`: validates, then processes here or hands to the home.
pub(crate) fn tcp_input(cx: &mut Cx<'_>, tw: &mut TcpWorker, m: Mbuf, info: TcpIn) {
    let len = m.len().saturating_sub(info.off);
    if len < 20 {
        return cx.drop_pkt(m, DropReason::TcpShort);
    }
    let mut ports = [0u8; 4];
    if m.copydata(info.off, &mut ports).is_err() {
        return cx.drop_pkt(m, DropReason::TcpShort);
    }
    let sport = u16::from_be_bytes([ports[0], ports[1]]);
    let dport = u16::from_be_bytes([ports[2], ports[3]]);
    let local = SocketAddr::new(info.dst, dport);
    let remote = SocketAddr::new(info.src, sport);
    // The device's RSS hash is the flow's hash when it has one (the symmetric key
    // makes both directions agree); otherwise compute it.
    let home = if m.hdr.rss_hash != 0 && cx.nworkers > 1 {
        dev::rss::queue_of(m.hdr.rss_hash, cx.nworkers)
    } else {
        flow_home(local, remote, cx.nworkers)
    };
    if home != cx.worker {
        cx.stats.tcp.handoff += 1;
        cx.handoff_tcp(home, TcpMsg::Segment(m, info));
        return;
    }
    tcp_input_local(cx, tw, m, info);
}

/// For a chain of at most [`PAYLOAD_PIECES`] segments whose first holds the whole
/// TCP header at `off`: that segment from `off` (header and any data after it), and
/// the segment's data, from its first buffer and the others, as a [`Payload`].
fn header_and_data(m: &Mbuf, off: usize) -> Option<(&[u8], Payload<'_>)> {
    if m.nsegs() > PAYLOAD_PIECES {
        return None;
    }
    let mut segs = m.segments();
    let first = segs.next()?.get(off..)?;
    let doff = usize::from(*first.get(12)? >> 4) * 4;
    if doff < 20 {
        return None;
    }
    let mut data = Payload::from(first.get(doff..)?);
    for s in segs {
        data.push(s);
    }
    Some((first, data))
}

/// Processes a segment of a flow homed on this worker.
pub(crate) fn tcp_input_local(cx: &mut Cx<'_>, tw: &mut TcpWorker, m: Mbuf, info: TcpIn) {
    let len = m.len() - info.off;
    let mut scratch = std::mem::take(&mut tw.scratch);
    // Checked by the device, or never filled in: made by a stack on this machine
    // (looped back, or over a link with checksum offload).
    let sum_ok = m.hdr.csum_flags & (mbuf::CSUM_L4_VALID | mbuf::CSUM_L4_NEEDED) != 0;
    // Parse in place when the packet is one segment (what devices deliver), or a
    // header buffer and the buffers of data after it (what a sender sharing its send
    // buffer makes); gather into the worker's scratch buffer other chains.
    let mut chained = None;
    let bytes: &[u8] = if m.nsegs() == 1 {
        &m.first()[info.off..info.off + len]
    } else if let Some((h, data)) = sum_ok.then(|| header_and_data(&m, info.off)).flatten() {
        chained = Some(data);
        h
    } else {
        // As long as the longest packet a device delivers (a large segment from
        // one with segmentation offload: bounded by its frame size).
        if scratch.len() < len {
            scratch.resize(len, 0);
        }
        if m.copydata(info.off, &mut scratch[..len]).is_err() {
            tw.scratch = scratch;
            return cx.drop_pkt(m, DropReason::TcpShort);
        }
        &scratch[..len]
    };
    let (src, dst) = (info.src, info.dst);
    let parsed = match TcpPacket::new_checked(bytes) {
        Err(_) => Err(DropReason::TcpBadOff),
        Ok(p) => {
            if !sum_ok && !p.verify_checksum(&src, &dst) {
                Err(DropReason::TcpBadSum)
            } else {
                TcpRepr::parse(&p, &src, &dst, false).map_err(|_| DropReason::TcpBadOff)
            }
        }
    };
    let repr = match parsed {
        Ok(r) => r,
        Err(why) => {
            why.count(cx.stats);
            tw.scratch = scratch;
            return;
        }
    };
    let mut seg = SegIn::from_repr(&repr);
    if let Some(data) = chained {
        seg.payload = data;
    }
    // Output (the ACK, new data) may wait for the rest of the batch when the
    // segment asks nothing urgent of it.
    let plain = !(seg.syn || seg.fin || seg.rst);
    let tuple = Tuple {
        local: SocketAddr::new(info.dst, repr.dst_port),
        remote: SocketAddr::new(info.src, repr.src_port),
    };
    if info.bcast {
        tw.scratch = scratch;
        return DropReason::TcpNoPort.count(cx.stats);
    }
    let found = tw.conns.get(&tuple).copied();
    if let Some(Found::TimeWait(j)) = found {
        if !time_wait_input(cx, tw, j as usize, &tuple, &seg) {
            tw.scratch = scratch;
            return;
        }
    } else if let Some(Found::Conn(i)) = found {
        let i = i as usize;
        let reuse = tw
            .slab
            .get(i)
            .is_some_and(|c| c.tcb.time_wait_accepts_syn(&seg));
        if reuse {
            // A new incarnation of the 4-tuple ends the old TIME_WAIT early.
            cx.stats.tcp.timewaitreuse += 1;
            tw.remove(i, &tuple);
        } else {
            if let Some(c) = tw.slab.get_mut(i) {
                // In-order data goes straight into the application's channel when
                // nothing waits in the receive buffer (this worker is the channel's
                // only producer); the rest is buffered as usual.
                let (tcb, s) = (&mut c.tcb, &c.s);
                let (mut direct, mut shared) = (0, 0);
                tcb.input_to(&seg, cx.now, &mut cx.stats.tcp, &mut |b| {
                    let (k, by_ref) = s.rx.push_pkt(&m, b);
                    direct += k;
                    shared += if by_ref { k } else { 0 };
                    k
                });
                cx.stats.tcp.rcvbyteshared += shared as u64;
                if direct > 0 {
                    note_reader(&mut tw.readers, s);
                }
                if plain && c.tcb.output_may_wait() {
                    if !std::mem::replace(&mut c.deferred, true) {
                        tw.deferred.push(i);
                    }
                    tw.scratch = scratch;
                    return;
                }
            }
            tw.scratch = scratch;
            service(cx, tw, i);
            return;
        }
    }
    // No connection: a listener's SYN, the ACK of a SYN cookie, or a reset.
    let listener = cx.cfg.tcp_listen.get(&tuple.local.port()).and_then(|v| {
        // A listener of the segment's family: on this address, else on the
        // unspecified one (an IPv6 listener takes IPv6 only).
        v.iter()
            .find(|l| l.local.ip() == info.dst)
            .or_else(|| {
                v.iter().find(|l| {
                    l.local.ip().is_unspecified() && l.local.is_ipv4() == info.dst.is_ipv4()
                })
            })
            .cloned()
    });
    let listener = listener.filter(|l| !l.closed.load(Ordering::Acquire));
    // SYN+FIN is no way to open a connection (Linux drops it too).
    let is_syn = seg.syn && seg.ack.is_none() && !seg.rst && !seg.fin;
    if let (Some(l), false, false, Some(ack)) = (&listener, seg.syn, seg.rst, seg.ack) {
        if let Some(mss) = cookie_check(cx.isn_secret, &tuple, ack.wrapping_sub(1), cx.now) {
            cx.stats.tcp.syncookiesrecvd += 1;
            if l.accept_q.is_full() || tw.conns.len() >= tw.max_conns {
                // No room: refuse with a reset rather than leave the client believing
                // it is connected (Linux's tcp_abort_on_overflow).
                DropReason::TcpListenDrop.count(cx.stats);
                let rst = reset_for(&seg);
                tw.scratch = scratch;
                if let Some(r) = rst {
                    cx.stats.tcp.sndrst += 1;
                    send_segment(cx, &tuple, &r, std::iter::empty());
                }
                return;
            }
            let cfg = conn_cfg(cx, &tuple, l.buffers);
            let opts = seg.ts.map(|(tsval, tsecr)| CookieOpts {
                wscale: Some((tsecr & 0xf) as u8).filter(|w| *w != 0xf),
                sack: tsecr & 0x10 != 0,
                ts: (tsval, tsecr),
            });
            let mut tcb = Tcb::from_cookie(
                cfg,
                ack.wrapping_sub(1),
                seg.seq.wrapping_sub(1),
                mss,
                seg.wnd,
                opts,
            );
            tcb.set_ts_offset(ts_offset(cx.isn_secret, &tuple));
            tcb.input(&seg, cx.now, &mut cx.stats.tcp);
            tw.scratch = scratch;
            cx.stats.tcp.accepts += 1;
            let i = tw.insert(Conn::passive(cx, tuple, tcb, l.clone(), false));
            return service(cx, tw, i);
        }
    }
    if listener.is_some() && !is_syn && seg.ack.is_none() {
        // LISTEN, "other control or text" without SYN or ACK (a FIN, Xmas or null
        // probe), or a RST: drop silently (RFC 9293 §3.10.7.2), as BSD and Linux do.
        cx.stats.tcp.listennosyn += 1;
        tw.scratch = scratch;
        return;
    }
    let Some(l) = listener.filter(|_| is_syn) else {
        DropReason::TcpNoPort.count(cx.stats);
        if let Some(r) = reset_for(&seg) {
            cx.stats.tcp.sndrst += 1;
            send_segment(cx, &tuple, &r, std::iter::empty());
        }
        tw.scratch = scratch;
        return;
    };
    if l.half_open.load(Ordering::Acquire) >= l.backlog || tw.conns.len() >= tw.max_conns {
        // The queue is full: answer with a SYN cookie and keep no state (RFC 4987).
        cx.stats.tcp.syncookiessent += 1;
        let cookie = cookie_make(cx.isn_secret, &tuple, cx.now, seg.mss.unwrap_or(536));
        let cfg = conn_cfg(cx, &tuple, l.buffers);
        let mut synack = SegOut {
            seq: cookie,
            ack: seg.seq.wrapping_add(1),
            ack_flag: true,
            syn: true,
            wnd: cfg.rcvbuf.min(65_535) as u16,
            mss: Some(cfg.mss),
            ..SegOut::default()
        };
        // With timestamps the cookie keeps the SYN's other options too: the low six
        // bits of our TSval carry the peer's window scale and SACK permitted, and the
        // ACK echoes them back (as Linux does).
        if let (true, Some((peer_ts, _))) = (cfg.timestamps, seg.ts) {
            let ws = seg.wscale.filter(|_| cfg.window_scaling);
            let bits = u32::from(ws.map_or(0xf, |w| w.min(14)))
                | (u32::from(seg.sack_perm && cfg.sack) << 4);
            let clock = (cx.now.as_millis() as u32).wrapping_add(ts_offset(cx.isn_secret, &tuple));
            // At or below the clock, so later timestamps never run backwards.
            let tsval =
                ((clock & !0x3f) | bits).wrapping_sub(if bits > (clock & 0x3f) { 64 } else { 0 });
            synack.ts = Some((tsval, peer_ts));
            synack.wscale = ws.map(|_| wscale_for(&cfg));
            synack.sack_perm = seg.sack_perm && cfg.sack;
        }
        tw.scratch = scratch;
        send_segment(cx, &tuple, &synack, std::iter::empty());
        return;
    }
    let iss = isn(cx.isn_secret, &tuple, cx.now);
    let cfg = conn_cfg(cx, &tuple, l.buffers);
    let Some(mut tcb) = Tcb::accept(cfg, iss, &seg) else {
        tw.scratch = scratch;
        return;
    };
    tcb.set_ts_offset(ts_offset(cx.isn_secret, &tuple));
    tw.scratch = scratch;
    l.half_open.fetch_add(1, Ordering::AcqRel);
    let i = tw.insert(Conn::passive(cx, tuple, tcb, l, true));
    service(cx, tw, i);
}

/// A segment for a connection reduced to its TIME_WAIT remnant (slot `j`): answered
/// as the connection would have; returns true when it is a SYN that ended the wait
/// (RFC 6191), for a listener to take.
fn time_wait_input(
    cx: &mut Cx<'_>,
    tw: &mut TcpWorker,
    j: usize,
    t: &Tuple,
    seg: &SegIn<'_>,
) -> bool {
    let Some((_, rem)) = tw.tws.get_mut(j) else {
        return false;
    };
    if rem.accepts_syn(seg) {
        cx.stats.tcp.timewaitreuse += 1;
        tw.remove_tw(j);
        return true;
    }
    if rem.input(seg, cx.now, cx.tcp_cfg.time_wait, &mut cx.stats.tcp) {
        let ack = rem.ack(cx.now, &mut cx.stats.tcp);
        send_segment(cx, t, &ack, std::iter::empty());
    }
    false
}

/// Messages from applications and other workers.
pub(crate) fn tcp_msg(cx: &mut Cx<'_>, tw: &mut TcpWorker, msg: TcpMsg) {
    match msg {
        TcpMsg::Segment(m, info) => tcp_input_local(cx, tw, m, info),
        TcpMsg::PathMtu(tuple, mss) => {
            if let Some(i) = tw.conn_slot(&tuple) {
                let changed = tw
                    .slab
                    .get_mut(i)
                    .is_some_and(|c| c.tcb.path_mtu(mss, &mut cx.stats.tcp));
                if changed {
                    service(cx, tw, i);
                }
            }
        }
        TcpMsg::Connect(s) => {
            let tuple = Tuple {
                local: s.local,
                remote: s.remote,
            };
            let in_use = tw.conns.contains_key(&tuple);
            if in_use || tw.conns.len() >= tw.max_conns {
                if in_use {
                    cx.stats.tcp.connaddrinuse += 1;
                } else {
                    cx.stats.tcp.conntablefull += 1;
                }
                s.error.store(err::REFUSED, Ordering::Release);
                s.phase.store(phase::CLOSED, Ordering::Release);
                s.wake();
                return;
            }
            let iss = isn(cx.isn_secret, &tuple, cx.now);
            let cfg = conn_cfg(cx, &tuple, (s.tx.cap(), s.rx.cap()));
            let mut tcb = Tcb::connect(cfg, iss, &mut cx.stats.tcp);
            tcb.set_ts_offset(ts_offset(cx.isn_secret, &tuple));
            // An active open has no listener to announce it to.
            let i = tw.insert(Conn {
                announced: true,
                ..Conn::new(tuple, tcb, s)
            });
            service(cx, tw, i);
        }
        TcpMsg::Wake(s) => {
            s.queued.store(false, Ordering::Release);
            let tuple = Tuple {
                local: s.local,
                remote: s.remote,
            };
            if let Some(i) = tw.conn_slot(&tuple) {
                service(cx, tw, i);
            }
        }
    }
}

/// Runs the timers that are due, earliest first, from the worker's heap.
pub(crate) fn tcp_timers(cx: &mut Cx<'_>, tw: &mut TcpWorker) {
    time_wait_timers(cx, tw);
    // Bounded per poll, so a burst of expiries cannot starve the rest of the loop.
    for _ in 0..4096 {
        match tw.timers.peek() {
            Some(Reverse((t, _, _))) if *t <= cx.now => {}
            _ => return,
        }
        let Some(Reverse((t, i, g))) = tw.timers.pop() else {
            return;
        };
        if !tw.slab.is_current(i, g) {
            continue;
        }
        let due = match tw.slab.get_mut(i) {
            Some(c) if c.timer_at == Some(t) => {
                c.timer_at = None;
                c.tcb.poll_at()
            }
            // Stale: the connection holds an earlier entry, or none.
            _ => continue,
        };
        match due {
            Some(d) if d <= cx.now => service(cx, tw, i),
            Some(d) => {
                // Came up early (the deadline moved later): wait for the real one.
                if let Some(c) = tw.slab.get_mut(i) {
                    c.timer_at = Some(d);
                }
                tw.timers.push(Reverse((d, i, g)));
            }
            None => {}
        }
    }
}

/// Ends the TIME_WAIT remnants whose wait is over (at most 4096 a poll).
fn time_wait_timers(cx: &mut Cx<'_>, tw: &mut TcpWorker) {
    for _ in 0..4096 {
        let Some(&(t, j, g)) = tw.tw_queue.front().filter(|(t, _, _)| *t <= cx.now) else {
            return;
        };
        tw.tw_queue.pop_front();
        if !tw.tws.is_current(j, g) {
            continue;
        }
        match tw.tws.get(j).copied() {
            Some((_, rem)) if rem.deadline <= t => {
                tw.remove_tw(j);
                cx.stats.tcp.closed += 1;
            }
            // Restarted by a retransmitted FIN: to the back, for its new deadline.
            Some((_, rem)) => tw.tw_queue.push_back((rem.deadline, j, g)),
            None => {}
        }
    }
}

/// Services the connections whose output waited for the end of the batch
/// ([`Tcb::output_may_wait`]). Called by the worker after each stage that delivers
/// segments.
pub(crate) fn tcp_flush(cx: &mut Cx<'_>, tw: &mut TcpWorker) {
    let mut list = std::mem::take(&mut tw.deferred);
    for i in list.drain(..) {
        service(cx, tw, i);
    }
    debug_assert!(tw.deferred.is_empty(), "only input defers output");
    // The list's allocation comes back for the next batch.
    tw.deferred = list;
}

/// Moves bytes between a connection and its application, sends what is due, updates
/// what the application sees, and frees a finished connection.
fn service(cx: &mut Cx<'_>, tw: &mut TcpWorker, i: usize) {
    let Some(mut c) = tw.slab.take(i) else {
        return;
    };
    c.deferred = false;
    // Borrowed, not cloned: the stream's reference count is shared with the
    // application thread.
    let s = &c.s;
    if s.opts_dirty.swap(false, Ordering::AcqRel) {
        c.tcb.set_nodelay(s.opt_nodelay.load(Ordering::Acquire));
        let ka = s.opt_keepalive_ns.load(Ordering::Acquire);
        c.tcb
            .set_keepalive((ka != 0).then(|| dev::Duration::from_nanos(ka)), cx.now);
    }
    // Application → control block.
    {
        let (tcb, tx_partial) = (&mut c.tcb, &mut c.tx_partial);
        let space = tcb.send_space();
        if space > 0 && (!s.tx.is_empty() || tx_partial.is_some()) {
            // Large chunks move into the send buffer whole (no copy), and so does a
            // small one into an empty buffer (a request: nothing to allocate); other
            // small ones are copied, so that small writes share chunks.
            let whole = if tcb.send_buffered() == 0 {
                1
            } else {
                MOVE_CHUNK
            };
            let took = s.tx.drain_moving(tx_partial, space, whole, |p| match p {
                // Offered only when it fits in `space`, so it is taken whole.
                Piece::Whole(c) => {
                    let n = c.len();
                    match tcb.send_chunk(c) {
                        Ok(()) => n,
                        Err(c) => {
                            let took = tcb.send(&c);
                            debug_assert_eq!(took, n, "a whole chunk beyond send_space");
                            took
                        }
                    }
                }
                // Bytes in a packet buffer: the send buffer keeps a reference, and
                // segments share it. Pieces shorter than a quarter of a chunk are
                // copied (as the space acknowledgments open, a segment or two at a
                // time, they would make a long list of tiny chunks).
                Piece::InPkt { m, off, data } if data.len() >= super::chan::PKT_CHUNK_MIN => {
                    match m.copym(off, data.len()).map(|c| tcb.send_mbuf(c)) {
                        Ok(Ok(())) => data.len(),
                        // No record in the pool, or no room for a shared chunk: copy.
                        _ => tcb.send(data),
                    }
                }
                Piece::Part(b) | Piece::InPkt { data: b, .. } => tcb.send(b),
            });
            // A writer may be waiting for room: wake it once a quarter of the channel
            // is free (or all of it), not for every segment's worth, so a bulk writer
            // and the worker do not trade a wake-up per burst.
            if took > 0 && (s.tx.is_empty() || s.tx.space() >= s.tx.cap() / 4) {
                s.wake_writer();
            }
        }
        // Acknowledged chunks go back to the channel for the writer to fill again.
        while let Some(chunk) = tcb.take_spare() {
            s.tx.recycle(chunk);
        }
    }
    let app_done = s.wr_shut.load(Ordering::Acquire) || s.dropped.load(Ordering::Acquire);
    if app_done && !c.fin_requested && s.tx.is_empty() && c.tx_partial.is_none() {
        c.fin_requested = true;
        c.tcb.close();
    }
    // Control block → application, then → wire: what the channel takes leaves the
    // receive buffer first, so the acknowledgment below carries the window it
    // opens (one segment out, not an ACK and then a window update).
    let mut moved = false;
    // Straight from the receive buffer into the channel's chunks, as much as the
    // channel takes (this worker is its only producer).
    while c.tcb.recv_available() > 0 && s.rx.space() > 0 {
        let k = c.tcb.recv_with(s.rx.space(), |b| s.rx.push(b));
        if k == 0 {
            break;
        }
        moved = true;
    }
    if moved {
        note_reader(&mut tw.readers, s);
    }
    tw.segs.clear();
    let mut segs = std::mem::take(&mut tw.segs);
    c.tcb.output(cx.now, &mut cx.stats.tcp, &mut segs);
    for seg in &segs {
        // Straight from the send buffer into the packet.
        send_segment(cx, &c.tuple, seg, c.tcb.payload(seg));
    }
    tw.segs = segs;
    if c.tcb.recv_finished() && c.tcb.recv_available() == 0 && !s.rx_eof.load(Ordering::Acquire) {
        s.rx_eof.store(true, Ordering::Release);
        s.wake();
    }
    // What the application sees.
    match c.tcb.state() {
        State::SynSent | State::SynReceived => {}
        State::Closed => {
            let e = match c.tcb.error() {
                None => err::NONE,
                Some(TcpError::Refused) => err::REFUSED,
                Some(TcpError::Reset) => err::RESET,
                Some(TcpError::TimedOut) => err::TIMED_OUT,
            };
            s.error.store(e, Ordering::Release);
            s.rx_eof.store(true, Ordering::Release);
            s.phase.store(phase::CLOSED, Ordering::Release);
            s.wake();
            if let Some(l) = &c.listener {
                if c.half_open {
                    l.half_open.fetch_sub(1, Ordering::AcqRel);
                }
            }
            tw.remove_held(i, c);
            return;
        }
        _ => {
            if s.phase.load(Ordering::Acquire) == phase::CONNECTING {
                s.phase.store(phase::ESTABLISHED, Ordering::Release);
                s.wake();
            }
            if !c.announced {
                c.announced = true;
                if let Some(l) = &c.listener {
                    if std::mem::take(&mut c.half_open) {
                        l.half_open.fetch_sub(1, Ordering::AcqRel);
                    }
                    if l.accept_q.push(s.clone()).is_err() {
                        // The accept queue is full: refuse, as a full listen queue does.
                        DropReason::TcpListenDrop.count(cx.stats);
                        c.tcb.abort();
                    } else {
                        l.wake();
                    }
                }
            }
        }
    }
    // TIME_WAIT lasts minutes and has nothing left to carry: once the application's
    // handle is gone (this worker holds the last reference), the byte channels and
    // the control block's buffers go, leaving the TCB alone (the connection-rate
    // bench had 45 KB per TIME_WAIT connection before this, 2 GB in a few seconds).
    if c.tcb.state() == State::TimeWait && c.tx_partial.is_none() {
        if let Some(sh) = Arc::get_mut(&mut c.s) {
            // With nothing owed to the peer, what is left of the connection is its
            // remnant: 48 bytes where the connection is a kilobyte (FreeBSD's
            // tcp_twstart).
            if let Some(rem) = c.tcb.time_wait() {
                let t = c.tuple;
                tw.remove_held(i, c);
                tw.insert_tw(t, rem);
                return;
            }
            if sh.release_channels() {
                c.tcb.release_buffers();
            }
        }
    }
    tw.arm(i, &mut c);
    let aborted = c.tcb.state() == State::Closed;
    tw.slab.put_back(i, c);
    if aborted {
        service(cx, tw, i);
    }
}

/// A stream that has new data for its reader: woken once at the end of the worker's
/// batch (whether a reader waits is asked once per batch, a fence, not per segment).
fn note_reader(readers: &mut Vec<Arc<StreamShared>>, s: &Arc<StreamShared>) {
    if !readers.iter().any(|r| Arc::ptr_eq(r, s)) {
        readers.push(s.clone());
    }
}

/// Chunks from the application's channel at least this long move into the send
/// buffer without a copy; shorter ones are copied so small writes share a chunk.
const MOVE_CHUNK: usize = 4096;

/// Whether a segment takes `p` by reference to its packet buffer rather than by
/// copy ([`super::chan::worth_holding`], the rule the receiver applies too). Large
/// segments for a device with segmentation offload share; a 1448-byte one out of a
/// 64 KiB buffer is copied.
fn shares<'a>(p: &SndPiece<'a>) -> Option<(&'a Mbuf, usize)> {
    p.shared
        .filter(|(m, _)| super::chan::worth_holding(m, p.data.len()))
}

/// The header `hdr` and the segment's data in one chain: one buffer for the
/// header and the bytes copied (a jumbo cluster for a segmentation-offload
/// device's large ones), so the receiver parses a copied segment in place; with
/// `share`, pieces that lie in packet buffers follow as segments of their own
/// ([`Mbuf::copym`], no copy). Copied bytes past a shared piece, or more than a
/// jumbo cluster holds, go into buffers of their own of the same kind. Also
/// returns how many bytes it shared; `None` when the pool has no buffer.
fn build_segment<'p>(
    hdr: &[u8],
    payload: impl Iterator<Item = SndPiece<'p>> + Clone,
    share: bool,
) -> Option<(Mbuf, usize)> {
    const MOST: usize = mbuf::MJUMBYTES - mbuf::DEFAULT_HEADROOM;
    let shares = |p: &SndPiece<'p>| shares(p).filter(|_| share);
    let mut copied: usize = payload
        .clone()
        .filter(|p| shares(p).is_none())
        .map(|p| p.data.len())
        .sum();
    let first = (hdr.len() + copied).min(MOST);
    let mut m = Mbuf::with_capacity(first).ok()?;
    m.append(hdr).ok()?;
    // Room left in the last buffer, which is ours to write.
    let mut room = first - hdr.len();
    let mut by_ref = 0;
    for piece in payload {
        if let Some((pm, at)) = shares(&piece) {
            m.cat(pm.copym(at, piece.data.len()).ok()?);
            by_ref += piece.data.len();
            room = 0;
            continue;
        }
        let mut data = piece.data;
        while !data.is_empty() {
            let n = if room == 0 {
                // A new buffer, filled before it joins: `cat` passes over an empty
                // one, and `append` would then have gone on in 2 KiB clusters.
                room = copied.min(MOST);
                let mut more = Mbuf::with_capacity(room).ok()?;
                let n = data.len().min(room);
                more.append(&data[..n]).ok()?;
                m.cat(more);
                n
            } else {
                let n = data.len().min(room);
                m.append(&data[..n]).ok()?;
                n
            };
            (room, copied, data) = (room - n, copied - n, &data[n..]);
        }
    }
    Some((m, by_ref))
}

/// Builds one segment and sends it down `ip_output`.
/// `payload` is the segment's data (`seg.data_len` bytes) in pieces: copied into
/// the header's buffer, or shared where they lie in a packet buffer
/// ([`Mbuf::copym`], no copy).
pub(crate) fn send_segment<'p>(
    cx: &mut Cx<'_>,
    t: &Tuple,
    seg: &SegOut,
    payload: impl Iterator<Item = SndPiece<'p>> + Clone,
) {
    let repr = seg.to_repr(t.local.port(), t.remote.port(), &[]);
    let hlen = repr.header_len();
    let mut hdr = [0u8; 60];
    {
        let mut p = TcpPacket::new_unchecked(&mut hdr[..hlen]);
        repr.emit(&mut p, &t.local.ip(), &t.remote.ip(), false);
    }
    // At most PAYLOAD_PIECES buffers a segment (Linux's skb holds MAX_SKB_FRAGS,
    // 17): a receiver of ours takes no more by reference, and copied the whole of a
    // longer chain twice (into its scratch buffer, then into the channel). A send
    // buffer of mixed pieces (the first writes of a connection, say) makes one:
    // such a segment is built again with its data copied, once.
    let Some((mut m, by_ref)) = build_segment(&hdr[..hlen], payload.clone(), true)
        .filter(|(m, _)| m.nsegs() <= PAYLOAD_PIECES)
        .or_else(|| build_segment(&hdr[..hlen], payload, false))
    else {
        return DropReason::IpOutDropped.count(cx.stats);
    };
    cx.stats.tcp.sndbyteshared += by_ref as u64;
    // What the send buffer held of it (a probe may find less than it asked for).
    let total = m.len();
    let pseudo =
        wire::checksum::pseudo_header(&t.local.ip(), &t.remote.ip(), IpProtocol::Tcp, total as u32);
    // The checksum is left to the output interface (Linux's CHECKSUM_PARTIAL): the
    // field holds the pseudo-header sum, and `ip_send` / `ip6_send` finish it in
    // software for a device that does not (ip::csum_finish).
    m.first_mut()[16..18].copy_from_slice(&pseudo.to_be_bytes());
    m.hdr.csum_flags |= mbuf::CSUM_L4_NEEDED;
    m.hdr.tso_segsz = seg.tso_segsz;
    let (src, dst) = match (t.local.ip(), t.remote.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => (s, d),
        (IpAddr::V6(src), IpAddr::V6(dst)) => {
            return crate::ip6::ip6_output(
                cx,
                m,
                Ip6Out {
                    src,
                    dst,
                    proto: IpProtocol::Tcp,
                    hlim: crate::ip6::DEFAULT_HLIM,
                    keep_unspec: false,
                    ifindex: None,
                },
            );
        }
        _ => return DropReason::IpOutDropped.count(cx.stats),
    };
    ip::ip_output(
        cx,
        m,
        IpOut {
            src,
            dst,
            proto: IpProtocol::Tcp,
            ttl: DEFAULT_TTL,
            // Segments are sized by the MSS; Don't Fragment waits for path MTU
            // discovery (RFC 1191), which needs ICMP "fragmentation needed" handled.
            df: false,
        },
    );
}

/// A Packet Too Big quoting a segment of ours on `tuple`: the connection, on its home
/// worker, shrinks its segments to `mss`.
pub(crate) fn tcp_path_mtu(cx: &mut Cx<'_>, tuple: Tuple, mss: u32) {
    let home = flow_home(tuple.local, tuple.remote, cx.nworkers);
    if home != cx.worker {
        return cx.handoff_tcp(home, TcpMsg::PathMtu(tuple, mss));
    }
    if let Some(tw) = cx.tcp.take() {
        tcp_msg(cx, tw, TcpMsg::PathMtu(tuple, mss));
        cx.tcp = Some(tw);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The home computed from the 4-tuple is the one a device's RSS hash of the frame
    /// gives, in both directions, so either may be used.
    #[test]
    fn flow_home_agrees_with_the_device_hash() {
        let frame = |src: [u8; 4], dst: [u8; 4], sp: u16, dp: u16| {
            let mut f = vec![0u8; 14 + 20 + 20];
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f[14] = 0x45;
            f[14 + 9] = 6;
            f[26..30].copy_from_slice(&src);
            f[30..34].copy_from_slice(&dst);
            f[34..36].copy_from_slice(&sp.to_be_bytes());
            f[36..38].copy_from_slice(&dp.to_be_bytes());
            f
        };
        let a = SocketAddr::new([198, 18, 0, 1].into(), 40_000);
        for port in [7u16, 80, 5001, 65_000] {
            let b = SocketAddr::new([198, 18, 0, 2].into(), port);
            let to_b = dev::rss::frame_hash(&frame([198, 18, 0, 1], [198, 18, 0, 2], 40_000, port));
            let to_a = dev::rss::frame_hash(&frame([198, 18, 0, 2], [198, 18, 0, 1], port, 40_000));
            assert_eq!(to_a, to_b);
            for n in 2..9 {
                assert_eq!(flow_home(b, a, n), dev::rss::queue_of(to_b, n));
                assert_eq!(flow_home(a, b, n), dev::rss::queue_of(to_a, n));
            }
        }
    }

    #[test]
    fn flow_home_agrees_with_the_rss_hash_of_ipv6_frames() {
        let frame = |src: std::net::Ipv6Addr, dst: std::net::Ipv6Addr, sp: u16, dp: u16| {
            let mut f = vec![0u8; 14 + 40 + 20];
            f[12..14].copy_from_slice(&[0x86, 0xdd]);
            f[14] = 0x60;
            f[14 + 6] = 6;
            f[22..38].copy_from_slice(&src.octets());
            f[38..54].copy_from_slice(&dst.octets());
            f[54..56].copy_from_slice(&sp.to_be_bytes());
            f[56..58].copy_from_slice(&dp.to_be_bytes());
            f
        };
        let (x, y): (std::net::Ipv6Addr, std::net::Ipv6Addr) =
            ("2001:2::1".parse().unwrap(), "2001:2::2".parse().unwrap());
        let a = SocketAddr::new(x.into(), 40_000);
        for port in [7u16, 80, 5001, 65_000] {
            let b = SocketAddr::new(y.into(), port);
            let to_b = dev::rss::frame_hash(&frame(x, y, 40_000, port));
            let to_a = dev::rss::frame_hash(&frame(y, x, port, 40_000));
            assert_eq!(to_a, to_b);
            for n in 2..9 {
                assert_eq!(flow_home(b, a, n), dev::rss::queue_of(to_b, n));
                assert_eq!(flow_home(a, b, n), dev::rss::queue_of(to_a, n));
            }
        }
    }
}
