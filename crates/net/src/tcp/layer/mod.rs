//! TCP on a worker: demultiplexing segments to connections, listeners and resets;
//! building segments; moving bytes between control blocks and their applications.
//!
//! Every flow has a home worker, a symmetric Toeplitz hash of its 4-tuple modulo the
//! worker count, so any worker computes it alike. A segment that arrives elsewhere
//! is handed to its home through that worker's lock-free inbox; with RSS steering
//! that matches (the memory links steer by the same hash) that never happens.
//!
//! One file per stage, as FreeBSD's `netinet/tcp_*.c`: `input` (`tcp_input`:
//! validate, hand to the home worker, find the connection or its TIME_WAIT remnant),
//! `listen` (a segment that finds no connection: listeners, SYN cookies, resets),
//! `output` (`service`: application to control block to wire and back, and
//! `send_segment` down to `ip_output`), `timer` (the worker's deadlines), `msg`
//! (what applications and other workers ask), `slab` (slots that keep their
//! indexes), `cx` (TCP's batch context, which holds the worker's tables: here, so
//! that the context and the layer that takes it are not two modules importing
//! each other). This file holds the worker's tables and what a new connection starts
//! with. They call the control block (`tcb`), the application's channels (`chan`),
//! `ip` and `ip6` for routes and output, and the worker's context (`Cx`) for handoff
//! and drop counters.

pub(crate) mod cx;
mod input;
mod limit;
mod listen;
mod mem;
mod msg;
mod output;
mod slab;
mod timer;

pub(crate) use cx::TcpCx;
pub(crate) use input::{tcp4_input, tcp6_input};
pub(crate) use mem::tcp_mem_tick;
pub(crate) use msg::{tcp_ctlinput, tcp_msg};
pub(crate) use output::{send_segment, tcp_flush};
pub(crate) use timer::tcp_timers;

use super::chan::{IpOpts, ListenShared, StreamShared};
use super::tcb::{SegOut, Tcb, TcpConfig, TimeWait};
pub(crate) use crate::inet::cx::{HardError, TcpCtl};
use crate::inet::ip::IpInfo;
use crate::FxBuild;
use mbuf::Mbuf;
use slab::Slab;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Work handed to a worker by applications or by other workers.
#[derive(Debug)]
pub(crate) enum TcpMsg {
    /// An IPv4 packet carrying a segment of a flow homed here.
    Segment(Mbuf, TcpIn),
    /// What an ICMP error about this connection says (`tcp_ctlinput`).
    Ctl(Tuple, TcpCtl),
    /// An application asks for a connection.
    Connect(Arc<StreamShared>),
    /// An application wrote, shut down or dropped its handle.
    Wake(Arc<StreamShared>),
    /// The control plane asks for the worker's connections (`netstat -an`).
    List(Arc<ConnList>),
}

/// One connection as `netstat -an` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnInfo {
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// netstat's name of the state (`ESTABLISHED`, `TIME_WAIT`, `LISTEN`, …).
    pub state: &'static str,
    /// Bytes the application wrote and the peer has not acknowledged.
    pub send_q: usize,
    /// Bytes received and not yet read.
    pub recv_q: usize,
    /// `TCP_INFO`, for a connection with a control block (not a listener, not a
    /// TIME_WAIT remnant).
    pub info: Option<super::tcb::TcpInfo>,
}

/// A request for every worker's connections: each adds its own and counts down.
#[derive(Debug, Default)]
pub(crate) struct ConnList {
    pub out: std::sync::Mutex<Vec<ConnInfo>>,
    pub left: std::sync::atomic::AtomicUsize,
    /// Drop the connections this selects (and list only those): tcpdrop(8).
    pub drop: Option<TcpDrop>,
}

/// Which connections tcpdrop(8) drops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TcpDrop {
    /// Every one (`tcpdrop -a`).
    All,
    /// Every one in this state, by netstat's name (`tcpdrop -s TIME_WAIT`).
    State(String),
    /// The one with these addresses (`tcpdrop LADDR LPORT FADDR FPORT`).
    Conn {
        local: SocketAddr,
        remote: SocketAddr,
    },
}

impl TcpDrop {
    fn selects(&self, c: &ConnInfo) -> bool {
        match self {
            TcpDrop::All => true,
            TcpDrop::State(s) => s.eq_ignore_ascii_case(c.state),
            TcpDrop::Conn { local, remote } => c.local == *local && c.remote == *remote,
        }
    }
}

/// netstat's name of a state.
pub(crate) fn state_name(s: crate::tcp::tcb::State) -> &'static str {
    use crate::tcp::tcb::State as S;
    match s {
        S::Closed => "CLOSED",
        S::SynSent => "SYN_SENT",
        S::SynReceived => "SYN_RCVD",
        S::Established => "ESTABLISHED",
        S::FinWait1 => "FIN_WAIT_1",
        S::FinWait2 => "FIN_WAIT_2",
        S::CloseWait => "CLOSE_WAIT",
        S::Closing => "CLOSING",
        S::LastAck => "LAST_ACK",
        S::TimeWait => "TIME_WAIT",
    }
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
fn conn_cfg(cx: &mut TcpCx<'_, '_>, t: &Tuple, buffers: (usize, usize)) -> TcpConfig {
    let base = cx.tcp.cfg;
    let (ifp, ip_hdr) = match t.remote.ip() {
        IpAddr::V4(d) => (
            crate::inet::ip::ip_route(&cx.inet(), d).map(|(ifp, _, _)| ifp),
            20,
        ),
        IpAddr::V6(d) => (
            crate::inet6::ip6::ip6_route(&cx.inet6(), d, None).map(|(ifp, _)| ifp),
            40,
        ),
    };
    // The configured MSS is IPv4's; IPv6's header is 20 bytes longer.
    let family_mss = base.mss.saturating_sub(ip_hdr as u16 - 20);
    let (tso_max, mss) = match ifp {
        // A device that segments takes segments up to its size: room for the IP
        // header and the largest TCP header beside the data. RFC 9293 §3.7.1: the
        // MSS we offer (and send with) is the interface's MTU less the fixed IP and
        // TCP headers, so a host on a 1280-byte link does not invite 1500-byte
        // packets and one on a 9000-byte link takes 8960-byte segments (FreeBSD's
        // tcp_mssopt, Linux's advertised MSS; FreeBSD's snd-syn scripts check it).
        Some(ifp) => {
            // A path MTU learnt from ICMP counts too (FreeBSD's tcp_mssopt reads
            // it from the host cache).
            let path = match t.remote.ip() {
                IpAddr::V4(d) => cx.v4.inet.path_mtu4(d, cx.link.now),
                IpAddr::V6(d) => cx.v6.inet6.nd6.path_mtu(d, cx.link.now),
            };
            let mtu = path.map_or(ifp.mtu, |p| ifp.mtu.min(p as usize));
            let link_mss = u16::try_from(mtu.saturating_sub(ip_hdr + 20)).unwrap_or(u16::MAX);
            // Without a device that segments, segments of up to GSO_MAX, which
            // `ip::fit_link` cuts (`ip.swgso`): one pass of TCP output per 64 KiB.
            let tso = match (base.tso, ifp.offload.tso) {
                (false, _) => 0,
                (true, 0) => crate::tcp::tcb::GSO_MAX,
                (true, device) => device,
            };
            (tso.saturating_sub(ip_hdr + 60) as u32, link_mss.max(16))
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
    /// The buffer the last chunk queued by reference to the reader ends in
    /// (`ByteChan::push_payload`'s note).
    rx_held: Option<mbuf::BufId>,
    /// The deadline this connection has in the worker's timer heap, if any.
    timer_at: Option<dev::Instant>,
    /// Listed in the worker's `deferred`, to be serviced at the end of the batch.
    deferred: bool,
    /// The IP header fields its segments carry (the socket's `IP_TTL`, `IP_TOS`).
    ip: IpOpts,
    /// Counted in the worker's `orphans`: its application has closed it and it is
    /// neither closed nor in TIME_WAIT.
    orphan: bool,
    /// Bytes its buffers and channels held when last serviced, counted in the
    /// worker's `mem` (`tcp::mem`).
    mem: usize,
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
            rx_held: None,
            timer_at: None,
            deferred: false,
            ip: IpOpts::default(),
            orphan: false,
            mem: 0,
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
    fn passive(
        cx: &TcpCx<'_, '_>,
        tuple: Tuple,
        tcb: Tcb,
        l: Arc<ListenShared>,
        half_open: bool,
    ) -> Conn {
        let p = &cx.tcp.cfg;
        let s = Arc::new(StreamShared::new(
            tuple.local,
            tuple.remote,
            cx.link.worker,
            l.buffers.0,
            l.buffers.1,
        ));
        s.opt_nodelay.store(p.nodelay, Ordering::Release);
        // The listener's IP options, as a BSD socket's are copied to the
        // connections it accepts (FreeBSD's syncache_socket).
        let ip = l.ip_opts();
        s.opt_ttl.store(ip.ttl, Ordering::Release);
        s.opt_tos.store(ip.tos, Ordering::Release);
        Conn {
            listener: Some(l),
            half_open,
            ip,
            ..Conn::new(tuple, tcb, s)
        }
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
    tws: Slab<(Tuple, TimeWait, IpOpts)>,
    /// The remnants' deadlines, (deadline, slot, generation), in the order they
    /// were set. Every wait is as long (the stack's `time_wait`), so this is also
    /// deadline order, and a FIFO does what the heap does for connections. A wait
    /// a retransmitted FIN restarted goes to the back when its old deadline comes
    /// up, so each remnant has one entry (and such a one may end late, by less than
    /// the time between the FIN and its old deadline; never early).
    tw_queue: VecDeque<(dev::Instant, usize, u32)>,
    /// Connections marked `orphan` (bounded by `TcpConfig::max_orphans`).
    orphans: usize,
    /// This worker's share of `TcpConfig::challenge_ack_limit` and `rst_limit`.
    challenge_limit: limit::RateLimit,
    rst_limit: limit::RateLimit,
    /// TCP memory (`tcp::mem`): what this worker's connections hold, as their
    /// `mem`s add up; what it last published; the state its connections are
    /// clamped for; when it next looks at the total, and next reclaims orphans
    /// while above high.
    mem: usize,
    mem_published: usize,
    mem_state: crate::tcp::mem::MemState,
    mem_check: Option<dev::Instant>,
    mem_reclaim: Option<dev::Instant>,
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

    /// Drops the connections `which` selects; appends them, as they were, to
    /// `out`.
    pub(crate) fn drop_conns(
        &mut self,
        cx: &mut TcpCx<'_, '_>,
        which: &TcpDrop,
        out: &mut Vec<ConnInfo>,
    ) {
        let mut all = Vec::new();
        self.list(&mut all);
        for info in all.into_iter().filter(|c| which.selects(c)) {
            let t = Tuple {
                local: info.local,
                remote: info.remote,
            };
            match self.conns.get(&t).copied() {
                Some(Found::Conn(i)) => {
                    let i = i as usize;
                    if let Some(c) = self.slab.get_mut(i) {
                        c.tcb.drop_conn(&mut cx.link.stats.tcp);
                    }
                    // Sends the reset, tells the application, frees the slot.
                    output::service(cx, self, i);
                }
                Some(Found::TimeWait(j)) => {
                    cx.link.stats.tcp.closed += 1;
                    self.remove_tw(j as usize);
                }
                None => continue,
            }
            out.push(info);
        }
    }

    /// The worker's connections and TIME_WAIT remnants, for `netstat -an`.
    pub(crate) fn list(&self, out: &mut Vec<ConnInfo>) {
        for c in self.slab.iter() {
            out.push(ConnInfo {
                local: c.tuple.local,
                remote: c.tuple.remote,
                state: state_name(c.tcb.state()),
                send_q: c.s.tx.len(),
                recv_q: c.s.rx.len() + c.s.rx_peeked.load(Ordering::Relaxed),
                info: Some(c.tcb.info()),
            });
        }
        for (t, _, _) in self.tws.iter() {
            out.push(ConnInfo {
                local: t.local,
                remote: t.remote,
                state: "TIME_WAIT",
                send_q: 0,
                recv_q: 0,
                info: None,
            });
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
            orphans: 0,
            challenge_limit: limit::RateLimit::default(),
            rst_limit: limit::RateLimit::default(),
            mem: 0,
            mem_published: 0,
            mem_state: crate::tcp::mem::MemState::Normal,
            mem_check: None,
            mem_reclaim: None,
        }
    }

    /// Orphans this worker holds (`TcpConfig::max_orphans`).
    pub fn orphans(&self) -> usize {
        self.orphans
    }

    /// Bytes this worker's connections hold (`tcp::mem`).
    pub fn mem(&self) -> usize {
        self.mem
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

    /// Keeps `t`'s TIME_WAIT as its remnant alone (its connection is gone), with
    /// the IP options its ACKs carry.
    fn insert_tw(&mut self, t: Tuple, rem: TimeWait, ip: IpOpts) {
        let j = self.tws.insert((t, rem, ip));
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
        if let Some((t, _, _)) = self.tws.remove(j) {
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
        if std::mem::take(&mut c.orphan) {
            self.orphans -= 1;
        }
        self.mem -= std::mem::take(&mut c.mem);
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
