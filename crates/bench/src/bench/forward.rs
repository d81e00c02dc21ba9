//! `mpstack bench forward`: IPv4 forwarding of 64-byte frames in memory through a full
//! table, in the three designs of the PRESTO 2009 paper (Qing Li, Kip Macy: "the
//! FreeBSD split L2/L3 routing"), side by side, with 1 and 2 workers — the shape of
//! its Figures 7 (legacy vs split) and 9 (split plus flow table), measured:
//!
//! - `legacy`: FreeBSD 7's unified table. The lookup yields a shared, reference-counted
//!   route entry (one per prefix) whose state, reference count included, sits behind
//!   its mutex (`rt_mtx`), and whose gateway's L2 address sits in the gateway's own
//!   cloned host entry (`rt_gwroute` with its `llinfo`), again reference-counted under
//!   its lock. Per packet, the `rtalloc1`/`rt_check`/`arpresolve`/`RTFREE` sequence of
//!   `ip_output`: four lock/unlock pairs, two references taken and dropped, two
//!   counters written — all on lines every worker shares.
//! - `split`: FreeBSD 13's and our design ([`route::Fib`]): the lookup yields a
//!   next-hop index, the next-hop object ([`route::NextHop`]) holds the L2 rewrite,
//!   read with two atomic loads; nothing written to shared memory.
//! - `split+flowtable`: `split` behind a per-worker [`route::FlowTable`] keyed on the
//!   destination (the paper's forwarding mode) or, with `--flow-mode 4tuple`, on the
//!   addresses, ports and protocol (stateful ECMP's): a hit skips the longest-prefix
//!   match; an entry is (next-hop index, generation), validated against the next hop.
//!
//! The longest-prefix match is our Poptrie in all three, so that only the design
//! differs (in `legacy` its leaves are route entries, one per prefix, as rtentries
//! were; in the others, next hops). `--nexthops` sets how many gateways the routes
//! share: with one, every worker takes the same gateway entry's lock per packet, the
//! paper's single-destination case.
//!
//! What each worker does with each packet (a fast path's checks, as VPP's
//! `ip4-input` does them): Ethernet type is IPv4; version 4 and no options (IHL 5:
//! anything else would go to the slow path); total length within the frame; the
//! header checksum, verified in full; TTL > 1 (RFC 1812 §5.2.7.1; else ICMP time
//! exceeded, the slow path); route lookup; TTL decremented with the checksum updated
//! incrementally (RFC 1624); the L2 rewrite (destination MAC from the next hop, source
//! MAC of the outgoing interface); then "transmit": the rewritten frame is written to
//! the worker's transmit ring and counted on its interface. The input frames are
//! pre-built (valid checksums, destinations inside announced prefixes, a fixed number
//! of flows split over the workers by a flow hash as RSS would) and reused, so the
//! input is never written.
//!
//! Before timing, every design forwards every packet once (twice for the flow table:
//! misses, then hits; of flows `bench router` gives, a sample), and each output frame
//! is checked against the radix-tree oracle (interface and destination MAC of the
//! right next hop, TTL 63, valid checksum).

use super::lpm::{self, Source, SplitMix};
use super::progress;
use crate::BenchArgs;
use route::{
    flow_hash4, Fib, FibAlgo, FlowKey, FlowMode, FlowStats, FlowTable, FlowTableConfig, IpPrefix,
    Lookup, Poptrie4, Prefix4, Radix, Rib, RouteSpec, RtBus,
};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::process::ExitCode;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};
use wire::{
    EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpProtocol, Ipv4Packet, Ipv4Repr,
    UdpPacket, UdpRepr,
};

mod cli;
pub use cli::main;

/// Bytes in a frame (without the FCS): Ethernet 14 + IPv4 20 + UDP 8 + 22 of data.
const FRAME: usize = 64;
type Frame = [u8; FRAME];
/// Outgoing interfaces (ifindex 1..=IFACES).
const IFACES: usize = 4;
/// The most next hops (gateways) `--nexthops` may ask for: each has an address
/// 10.<ifindex>.0.<1 + index>.
pub const MAX_GATEWAYS: u32 = 250;
/// Packets between two readings of the clock (the workers' `now`).
const BATCH: usize = 256;
/// Slots of a worker's transmit ring.
const TX_SLOTS: usize = 1024;
/// Packets checked against the oracle before timing given flows ([`measure`]).
const CHECK_GIVEN: usize = 1 << 16;
/// The RSS hash's seed (which worker a flow goes to).
const RSS_SEED: u64 = 0x5253_5321;

/// The three designs, in the order they are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DesignKind {
    Legacy,
    Split,
    SplitFlow,
}

impl DesignKind {
    pub const ALL: [DesignKind; 3] = [DesignKind::Legacy, DesignKind::Split, DesignKind::SplitFlow];

    pub fn name(self) -> &'static str {
        match self {
            DesignKind::Legacy => "legacy",
            DesignKind::Split => "split",
            DesignKind::SplitFlow => "split+flowtable",
        }
    }

    fn what(self) -> &'static str {
        match self {
            DesignKind::Legacy => "unified L2/L3: rtentry + llinfo under mutexes (FreeBSD 7)",
            DesignKind::Split => "split L2/L3: Fib -> NextHop, lock-free",
            DesignKind::SplitFlow => "split + per-worker flow table",
        }
    }
}

/// Where gateway `g` is: its interface, address and MAC.
fn gw_ifindex(g: u32) -> u32 {
    1 + g % IFACES as u32
}
fn gw_addr(g: u32) -> Ipv4Addr {
    Ipv4Addr::new(10, gw_ifindex(g) as u8, 0, 1 + g as u8)
}
fn gw_mac(g: u32) -> [u8; 6] {
    [0x02, 0x00, 0x5e, 0x00, gw_ifindex(g) as u8, g as u8]
}
/// The router's own MAC on interface `ifindex` (0 is the input interface).
fn if_mac(ifindex: u32) -> [u8; 6] {
    [0x02, 0x00, 0x00, 0x00, 0x00, 0x10 + ifindex as u8]
}

/// What a design answers for a destination: outgoing interface and destination MAC.
type L2Next = (u32, [u8; 6]);

/// One forwarding design, as a worker holds it.
trait Design {
    /// The next hop of `pkt`, whose destination is `dst` (already read by the input
    /// checks).
    fn next_hop(&mut self, pkt: &Frame, dst: u32, now: u64) -> Option<L2Next>;
    fn flow_stats(&self) -> Option<FlowStats> {
        None
    }
}

// ---- legacy: FreeBSD 7's rtentry + llinfo --------------------------------------

/// A route entry (`rtentry`): everything mutable behind its own lock (`rt_mtx`),
/// the reference count included, as FreeBSD 7's `RT_ADDREF` under `RT_LOCK`.
#[derive(Debug)]
struct RtEntry {
    mtx: Mutex<RtInner>,
}

#[derive(Debug)]
struct RtInner {
    /// `rt_refcnt`.
    refcnt: u32,
    /// `rt_use`: packets sent through this route.
    used: u64,
    /// `rt_gwroute`: the gateway's cloned host route, which holds the ARP entry.
    gwroute: u32,
}

/// The gateway's cloned host route (`RTF_LLINFO`) with its ARP entry (`llinfo_arp`).
#[derive(Debug)]
struct GwRoute {
    ifindex: u32,
    mtx: Mutex<GwInner>,
}

#[derive(Debug)]
struct GwInner {
    refcnt: u32,
    mac: [u8; 6],
    /// `rmx_pksent`-like bookkeeping, written under the lock per packet.
    pksent: u64,
}

/// The legacy table: Poptrie whose leaves index one entry per prefix. The entries
/// sit in one array, as a UMA zone's slabs hold them (one heap object each would add
/// a TLB miss per packet on this machine and blame the design for the allocator).
#[derive(Debug)]
struct LegacyTable {
    lpm: Poptrie4,
    rt: Vec<RtEntry>,
    gw: Vec<GwRoute>,
}

impl LegacyTable {
    fn build(routes: &[(Prefix4, u32)], nexthops: u32) -> Self {
        let gw = (0..nexthops)
            .map(|g| GwRoute {
                ifindex: gw_ifindex(g),
                mtx: Mutex::new(GwInner {
                    refcnt: 1,
                    mac: gw_mac(g),
                    pksent: 0,
                }),
            })
            .collect();
        let rt = routes
            .iter()
            .map(|&(_, g)| RtEntry {
                mtx: Mutex::new(RtInner {
                    refcnt: 1,
                    used: 0,
                    gwroute: g,
                }),
            })
            .collect();
        let indexed: Vec<(Prefix4, u32)> = routes
            .iter()
            .enumerate()
            .map(|(i, &(p, _))| (p, i as u32))
            .collect();
        LegacyTable {
            lpm: Poptrie4::build(&indexed),
            rt,
            gw,
        }
    }
}

struct Legacy<'a>(&'a LegacyTable);

/// A lock that survives a panicking holder (none panics here).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Design for Legacy<'_> {
    #[inline]
    fn next_hop(&mut self, _pkt: &Frame, dst: u32, _now: u64) -> Option<L2Next> {
        let t = self.0;
        let rt = &t.rt[t.lpm.lookup(dst)? as usize];
        // rtalloc1(): the route, referenced and counted under its lock.
        let g = {
            let mut r = lock(&rt.mtx);
            r.refcnt += 1;
            r.used += 1;
            r.gwroute
        };
        // rt_check() + arpresolve(): the gateway's host route referenced, its ARP
        // entry read, under its lock; then released (RTFREE).
        let gw = &t.gw[g as usize];
        let mac = {
            let mut l = lock(&gw.mtx);
            l.refcnt += 1;
            l.pksent += 1;
            l.mac
        };
        lock(&gw.mtx).refcnt -= 1;
        // ip_output()'s RTFREE(ro.ro_rt) once the packet is out.
        lock(&rt.mtx).refcnt -= 1;
        Some((gw.ifindex, mac))
    }
}

// ---- split: Fib -> NextHop ---------------------------------------------------------

struct Split<'a>(&'a Fib);

impl Design for Split<'_> {
    #[inline]
    fn next_hop(&mut self, _pkt: &Frame, dst: u32, now: u64) -> Option<L2Next> {
        // The hash is asked for only by a multipath route (none in this table).
        let nh = self.0.lookup4(Ipv4Addr::from(dst), || 0)?;
        Some((nh.ifindex, nh.l2(now)?))
    }
}

struct SplitFlow<'a> {
    fib: &'a Fib,
    flows: FlowTable<(u32, u32)>,
}

impl<'a> SplitFlow<'a> {
    fn new(fib: &'a Fib, flows: usize, mode: FlowMode) -> Self {
        SplitFlow {
            fib,
            flows: FlowTable::new(FlowTableConfig {
                mode,
                // Room for every flow a worker sees, at a quarter load: few set conflicts.
                capacity: (flows * 4).max(4096),
                ..FlowTableConfig::default()
            }),
        }
    }
}

impl Design for SplitFlow<'_> {
    #[inline]
    fn next_hop(&mut self, pkt: &Frame, dst: u32, now: u64) -> Option<L2Next> {
        let fib = self.fib;
        let key = match self.flows.mode() {
            FlowMode::Destination => FlowKey::v4(0, dst, 0, 0, 0),
            // The input checks passed: IHL 5, so the ports are at 34 (UDP's and TCP's
            // first four bytes alike).
            FlowMode::FourTuple => {
                let ip = Ipv4Packet::new_unchecked(&pkt[14..]);
                let l4 = UdpPacket::new_unchecked(&pkt[34..]);
                FlowKey::v4(
                    u32::from(ip.src_addr()),
                    dst,
                    u8::from(ip.next_header()),
                    l4.src_port(),
                    l4.dst_port(),
                )
            }
        };
        let (i, _) = self.flows.lookup_or_insert_with(
            &key,
            now,
            |&(i, generation)| fib.nexthop(i).is_some_and(|n| n.is_valid(generation)),
            || {
                fib.lookup4(Ipv4Addr::from(dst), || 0)
                    .map(|n| (n.index, n.generation()))
            },
        )?;
        let nh = fib.nexthop(i)?;
        Some((nh.ifindex, nh.l2(now)?))
    }

    fn flow_stats(&self) -> Option<FlowStats> {
        Some(self.flows.stats())
    }
}

// ---- the per-packet path --------------------------------------------------------------

/// Why a packet was not forwarded (none should be, in this workload).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DropReason {
    NotIpv4,
    SlowPath,
    BadLen,
    BadSum,
    TtlExceeded,
    NoRoute,
}

/// The fast path's input checks (VPP's `ip4-input`); the destination if they pass.
#[inline(always)]
fn ip_input(inp: &Frame) -> Result<u32, DropReason> {
    let eth = EthernetFrame::new_unchecked(&inp[..]);
    if eth.ethertype() != EtherType::Ipv4 {
        return Err(DropReason::NotIpv4);
    }
    let ip = Ipv4Packet::new_unchecked(eth.payload());
    // Options (IHL > 5) and other versions leave the fast path.
    if ip.version() != 4 || ip.header_len() != 20 {
        return Err(DropReason::SlowPath);
    }
    let len = ip.total_len() as usize;
    if !(20..=FRAME - 14).contains(&len) {
        return Err(DropReason::BadLen);
    }
    if !ip.verify_checksum() {
        return Err(DropReason::BadSum);
    }
    // RFC 1812 §5.2.7.1: a packet that cannot be forwarded because its TTL would reach
    // zero is answered with a Time Exceeded (by the slow path).
    if ip.hop_limit() <= 1 {
        return Err(DropReason::TtlExceeded);
    }
    Ok(u32::from(ip.dst_addr()))
}

/// `inp` rewritten for `next` into `out`.
#[inline(always)]
fn ip_rewrite(inp: &Frame, out: &mut Frame, (ifindex, mac): L2Next) {
    *out = *inp;
    let mut f = EthernetFrame::new_unchecked(&mut out[..]);
    f.set_dst_addr(EthernetAddress(mac));
    f.set_src_addr(EthernetAddress(if_mac(ifindex)));
    // RFC 1812 §5.3.1 and RFC 1624: TTL - 1, checksum updated incrementally.
    Ipv4Packet::new_unchecked(f.payload_mut()).decrement_hop_limit();
}

/// A worker's transmit side: a ring of frames and a count per interface.
struct Tx {
    ring: Vec<Frame>,
    head: usize,
    per_if: [u64; IFACES + 1],
    drops: u64,
}

impl Tx {
    fn new() -> Self {
        Tx {
            ring: vec![[0; FRAME]; TX_SLOTS],
            head: 0,
            per_if: [0; IFACES + 1],
            drops: 0,
        }
    }
}

/// Forwards a batch of at most [`BATCH`] frames, a stage at a time over the whole
/// batch as a VPP node does (input checks, then lookups, then rewrite and transmit),
/// so that the lookups of neighbouring packets, independent of each other, overlap
/// their cache misses instead of waiting behind each packet's rewrite.
#[inline(never)]
fn forward_batch<D: Design>(d: &mut D, pkts: &[Frame], tx: &mut Tx, now: u64) {
    debug_assert!(pkts.len() <= BATCH);
    let mut dst = [Err(DropReason::NoRoute); BATCH];
    for (r, p) in dst.iter_mut().zip(pkts) {
        *r = ip_input(p);
    }
    let mut next = [None; BATCH];
    for ((n, r), p) in next.iter_mut().zip(&dst).zip(pkts) {
        if let Ok(a) = *r {
            *n = d.next_hop(p, a, now);
        }
    }
    for (p, n) in pkts.iter().zip(&next) {
        match *n {
            Some(nh) => {
                ip_rewrite(p, &mut tx.ring[tx.head % TX_SLOTS], nh);
                tx.per_if[nh.0 as usize % (IFACES + 1)] += 1;
                tx.head += 1;
            }
            None => tx.drops += 1,
        }
    }
}

/// What one worker measured.
#[derive(Clone, Copy, Debug, Default)]
struct WorkerRun {
    packets: u64,
    drops: u64,
    secs: f64,
    /// Time-stamp counter ticks over the run (0 without a TSC).
    ticks: u64,
    /// CPU time the worker's thread had over the run (as much as `secs` on an idle
    /// machine; less when other work took its core).
    cpu_secs: f64,
    flows: Option<FlowStats>,
}

/// Runs `d` over `pkts` for `secs` (after one untimed pass, and after `start`).
fn worker<D: Design>(mut d: D, pkts: &[Frame], secs: f64, start: &Barrier) -> WorkerRun {
    let mut tx = Tx::new();
    let t0 = Instant::now();
    let now = |t0: Instant| t0.elapsed().as_nanos() as u64;
    for b in pkts.chunks(BATCH) {
        forward_batch(&mut d, b, &mut tx, now(t0));
    }
    let warm = tx.head as u64 + tx.drops;
    start.wait();
    let (t1, c1) = (Instant::now(), dev::cpu::rdtsc().unwrap_or(0));
    let cpu1 = dev::cpu::thread_cpu_time();
    let deadline = Duration::from_secs_f64(secs);
    let (elapsed, c2) = loop {
        for b in pkts.chunks(BATCH) {
            forward_batch(&mut d, b, &mut tx, now(t0));
        }
        let e = t1.elapsed();
        if e >= deadline {
            break (e, dev::cpu::rdtsc().unwrap_or(0));
        }
    };
    let cpu_secs = match (cpu1, dev::cpu::thread_cpu_time()) {
        (Some(a), Some(b)) => (b - a).as_secs_f64(),
        _ => elapsed.as_secs_f64(),
    };
    black_box(&tx.ring);
    let packets = tx.head as u64 + tx.drops - warm;
    WorkerRun {
        packets,
        drops: tx.drops,
        secs: elapsed.as_secs_f64(),
        ticks: c2.wrapping_sub(c1),
        cpu_secs,
        flows: d.flow_stats(),
    }
}

// ---- the workload -----------------------------------------------------------------------

/// One flow: a UDP 4-tuple.
#[derive(Clone, Copy, Debug)]
pub struct Flow {
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    pub dport: u16,
}

/// `n` flows to destinations inside announced prefixes, from 198.18.0.0/15.
fn make_flows(routes: &[(Prefix4, u32)], n: usize, seed: u64) -> Vec<Flow> {
    let mut rng = SplitMix(seed);
    (0..n)
        .map(|_| {
            let (p, _) = routes[rng.below(routes.len() as u64) as usize];
            let host = u32::MAX.checked_shr(p.len as u32).unwrap_or(0);
            Flow {
                src: 0xc612_0000 | (rng.next() as u32 & 0x1_ffff),
                dst: p.addr | (rng.next() as u32 & host),
                sport: 1024 + rng.below(60_000) as u16,
                dport: [53, 123, 443, 4789][rng.below(4) as usize],
            }
        })
        .collect()
}

/// The frame of flow `f`: Ethernet + IPv4 + UDP, every checksum valid, TTL 64.
fn frame(f: &Flow, ident: u16) -> Frame {
    let payload = FRAME - 14 - 20 - 8;
    let udp = UdpRepr {
        src_port: f.sport,
        dst_port: f.dport,
    };
    let (src, dst) = (Ipv4Addr::from(f.src), Ipv4Addr::from(f.dst));
    let ip = Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: IpProtocol::Udp,
        payload_len: udp.buffer_len(payload),
        hop_limit: 64,
        dscp: 0,
        ident,
        dont_frag: true,
    };
    let eth = EthernetRepr {
        src_addr: EthernetAddress([0x02, 0, 0, 0, 0xee, 0x01]),
        dst_addr: EthernetAddress(if_mac(0)),
        ethertype: EtherType::Ipv4,
    };
    let mut out = [0u8; FRAME];
    let mut fr = EthernetFrame::new_unchecked(&mut out[..]);
    eth.emit(&mut fr);
    let mut packet = Ipv4Packet::new_unchecked(fr.payload_mut());
    ip.emit(&mut packet);
    udp.emit(
        &mut UdpPacket::new_unchecked(packet.payload_mut()),
        &src.into(),
        &dst.into(),
        payload,
        |b| b.fill(0x5a),
        true,
    );
    out
}

/// The packets of worker `w` of `workers`: `n` frames of the flows RSS gives it,
/// each flow in turn in a seeded random order, then again in another, so that every
/// flow is in the buffer (when `n` is at least the worker's share of the flows) and
/// as often as any other.
fn worker_packets(flows: &[Flow], workers: usize, w: usize, n: usize, seed: u64) -> Vec<Frame> {
    let mut mine: Vec<Frame> = flows
        .iter()
        .filter(|f| {
            flow_hash4(f.src, f.dst, 17, f.sport, f.dport, RSS_SEED) as usize % workers == w
        })
        .enumerate()
        .map(|(i, f)| frame(f, i as u16))
        .collect();
    let mut rng = SplitMix(seed ^ w as u64);
    let mut out = Vec::with_capacity(n);
    while out.len() < n && !mine.is_empty() {
        // Fisher-Yates.
        for i in (1..mine.len()).rev() {
            mine.swap(i, rng.below(i as u64 + 1) as usize);
        }
        out.extend(mine.iter().take(n - out.len()));
    }
    out
}

/// Everything the designs read, built once.
struct Tables {
    /// The deduplicated routes, each to a gateway `0..nexthops`.
    routes: Vec<(Prefix4, u32)>,
    oracle: Radix<u32>,
    legacy: LegacyTable,
    fib: Fib,
    /// What the flow table design keys its entries on.
    flow_mode: FlowMode,
}

impl Tables {
    /// `nexthops` gateways (at most [`MAX_GATEWAYS`]) spread over the interfaces; a
    /// route's is its next hop in `raw` modulo `nexthops`.
    fn build(
        raw: &[(Prefix4, u32)],
        nexthops: u32,
        flow_mode: FlowMode,
        mut progress: impl FnMut(&str),
    ) -> Result<Self, String> {
        let nexthops = nexthops.clamp(1, MAX_GATEWAYS);
        // A prefix listed twice keeps its last next hop, as `Lookup::build` does.
        let dedup: BTreeMap<Prefix4, u32> = raw
            .iter()
            .map(|&(p, nh)| (Prefix4::new(p.addr, p.len), nh % nexthops))
            .collect();
        let routes: Vec<(Prefix4, u32)> = dedup.into_iter().collect();
        progress(&format!(
            "{} prefixes: radix oracle, legacy table, Rib -> Fib (Poptrie)",
            routes.len()
        ));
        let oracle = Radix::build(&routes);
        let legacy = LegacyTable::build(&routes, nexthops);
        let mut rib = Rib::new(Arc::new(RtBus::new()), FibAlgo::Poptrie, routes.len() + 1);
        for &(p, g) in &routes {
            rib.add(RouteSpec::via(
                IpPrefix::V4(p),
                IpAddr::V4(gw_addr(g)),
                gw_ifindex(g),
            ))
            .map_err(|e| format!("bench forward: {p}: {e}"))?;
        }
        let fib = rib.compile();
        // The neighbour tables' part: every gateway resolved, for good.
        for nh in fib.nexthops() {
            let Some(IpAddr::V4(gw)) = nh.gateway else {
                return Err(format!(
                    "bench forward: next hop {} has no gateway",
                    nh.index
                ));
            };
            let g = u32::from(gw.octets()[3]) - 1;
            nh.set_l2(gw_mac(g), u64::MAX);
        }
        Ok(Tables {
            routes,
            oracle,
            legacy,
            fib,
            flow_mode,
        })
    }

    /// Design `k` as one worker holds it (a flow table sized for `flows`).
    fn design(&self, k: DesignKind, flows: usize) -> AnyDesign<'_> {
        match k {
            DesignKind::Legacy => AnyDesign::Legacy(Legacy(&self.legacy)),
            DesignKind::Split => AnyDesign::Split(Split(&self.fib)),
            DesignKind::SplitFlow => {
                AnyDesign::SplitFlow(SplitFlow::new(&self.fib, flows, self.flow_mode))
            }
        }
    }
}

/// A design chosen at run time; each worker loop is monomorphised by [`run`].
enum AnyDesign<'a> {
    Legacy(Legacy<'a>),
    Split(Split<'a>),
    SplitFlow(SplitFlow<'a>),
}

/// Forwards every packet (twice: a flow table misses, then hits) with design `k`,
/// through the workers' own [`forward_batch`], and checks every output frame against
/// the oracle; returns the number of wrong ones (and the first, described).
fn check(t: &Tables, k: DesignKind, pkts: &[Frame], flows: usize) -> (usize, Option<String>) {
    fn go<D: Design>(t: &Tables, mut d: D, pkts: &[Frame]) -> (usize, Option<String>) {
        let mut bad = 0;
        let mut first = None;
        let mut tx = Tx::new();
        for pass in 0..2 {
            for (c, chunk) in pkts.chunks(BATCH).enumerate() {
                let (head, drops) = (tx.head, tx.drops);
                forward_batch(&mut d, chunk, &mut tx, 0);
                if tx.drops != drops {
                    bad += (tx.drops - drops) as usize;
                    first.get_or_insert_with(|| {
                        format!("pass {pass}, batch {c}: {} dropped", tx.drops - drops)
                    });
                    continue;
                }
                for (j, p) in chunk.iter().enumerate() {
                    let out = &tx.ring[(head + j) % TX_SLOTS];
                    let dst = u32::from(Ipv4Packet::new_unchecked(&p[14..]).dst_addr());
                    let want = t.oracle.lookup(dst).map(|g| (gw_ifindex(g), gw_mac(g)));
                    // The interface, from the source MAC the rewrite wrote.
                    let ifindex = u32::from(out[11].wrapping_sub(0x10));
                    let got = Some((ifindex, <[u8; 6]>::try_from(&out[..6]).unwrap()));
                    let ip = Ipv4Packet::new_unchecked(&out[14..]);
                    // Only the MACs, the TTL (byte 22) and the checksum (24-25) change.
                    let rewritten = ip.hop_limit() == 63
                        && ip.verify_checksum()
                        && out[6..12] == if_mac(ifindex)
                        && out[12..22] == p[12..22]
                        && out[23] == p[23]
                        && out[26..] == p[26..];
                    if got != want || !rewritten {
                        bad += 1;
                        first.get_or_insert_with(|| {
                            format!(
                                "pass {pass}, packet {} to {}: got {got:?}, oracle {want:?}, rewrite ok {rewritten}",
                                c * BATCH + j,
                                Ipv4Addr::from(dst)
                            )
                        });
                    }
                }
            }
        }
        (bad, first)
    }
    match t.design(k, flows) {
        AnyDesign::Legacy(d) => go(t, d, pkts),
        AnyDesign::Split(d) => go(t, d, pkts),
        AnyDesign::SplitFlow(d) => go(t, d, pkts),
    }
}

/// Runs design `k` with one thread per packet set, pinned to the allowed CPUs in turn.
fn run(
    t: &Tables,
    k: DesignKind,
    sets: &[Vec<Frame>],
    flows: usize,
    secs: f64,
    cpus: &[usize],
) -> Vec<WorkerRun> {
    let start = Barrier::new(sets.len());
    std::thread::scope(|s| {
        let handles: Vec<_> = sets
            .iter()
            .enumerate()
            .map(|(w, pkts)| {
                let start = &start;
                let cpu = cpus.get(w % cpus.len().max(1)).copied();
                s.spawn(move || {
                    if let Some(c) = cpu {
                        // Best effort: unpinned, the numbers are noisier, not wrong.
                        let _ = dev::cpu::pin_current_thread(c);
                    }
                    match t.design(k, flows) {
                        AnyDesign::Legacy(d) => worker(d, pkts, secs, start),
                        AnyDesign::Split(d) => worker(d, pkts, secs, start),
                        AnyDesign::SplitFlow(d) => worker(d, pkts, secs, start),
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("forwarding worker panicked"))
            .collect()
    })
}

/// One design at one worker count, the best of the rounds.
#[derive(Clone, Debug)]
pub struct Row {
    pub design: DesignKind,
    pub workers: usize,
    /// Packets a second, all workers together.
    pub mpps: f64,
    /// Packets a second of each worker's own CPU time, summed: what the workers would
    /// forward if each had its core all the time (time asleep on a contended lock is
    /// not CPU time either, so this flatters the legacy design).
    pub core_mpps: f64,
    /// Per worker, wall time a packet (the mean over workers).
    pub wall_ns_per_packet: f64,
    /// Per worker, on-core time a packet: the thread's CPU time, and the TSC ticks
    /// scaled by the share of the run it was on a core (the mean over workers). On a
    /// machine shared with other work, this is the cost of a packet; the wall time
    /// also counts the time the worker waited for its core.
    pub ns_per_packet: f64,
    pub ticks_per_packet: f64,
    /// The share of the run the workers had a core for (1.0: all of it).
    pub cpu_share: f64,
    pub packets: u64,
    pub drops: u64,
    pub flows: Option<FlowStats>,
}

fn row(design: DesignKind, runs: &[WorkerRun]) -> Row {
    let n = runs.len() as f64;
    let mut flows: Option<FlowStats> = None;
    for r in runs {
        if let Some(s) = r.flows {
            let f = flows.get_or_insert_with(FlowStats::default);
            f.hits += s.hits;
            f.misses += s.misses;
            f.stale += s.stale;
            f.expired += s.expired;
            f.inserts += s.inserts;
            f.evictions += s.evictions;
        }
    }
    Row {
        design,
        workers: runs.len(),
        mpps: runs
            .iter()
            .map(|r| r.packets as f64 / r.secs.max(1e-9) / 1e6)
            .sum(),
        core_mpps: runs
            .iter()
            .map(|r| r.packets as f64 / r.cpu_secs.max(1e-9) / 1e6)
            .sum(),
        wall_ns_per_packet: runs
            .iter()
            .map(|r| r.secs * 1e9 / r.packets.max(1) as f64)
            .sum::<f64>()
            / n,
        ns_per_packet: runs
            .iter()
            .map(|r| r.cpu_secs * 1e9 / r.packets.max(1) as f64)
            .sum::<f64>()
            / n,
        ticks_per_packet: runs
            .iter()
            .map(|r| r.ticks as f64 * (r.cpu_secs / r.secs.max(1e-9)) / r.packets.max(1) as f64)
            .sum::<f64>()
            / n,
        cpu_share: runs
            .iter()
            .map(|r| r.cpu_secs / r.secs.max(1e-9))
            .sum::<f64>()
            / n,
        packets: runs.iter().map(|r| r.packets).sum(),
        drops: runs.iter().map(|r| r.drops).sum(),
        flows,
    }
}

/// The workload's parameters.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    pub flows: usize,
    pub packets: usize,
    pub secs: f64,
    pub rounds: u32,
    /// The second worker count (the first is 1).
    pub workers: usize,
    /// The designs to measure.
    pub designs: &'static [DesignKind],
    /// Gateways the routes are spread over (fewer: more contention on each).
    pub nexthops: u32,
    /// What the flow table design keys on.
    pub flow_mode: FlowMode,
}

/// Builds the tables, checks every design, and measures each at 1 and `p.workers`
/// workers over `given` flows (`p.flows` of them), else `p.flows` of its own; rows
/// in design order, 1 worker first.
pub fn measure(
    raw: &[(Prefix4, u32)],
    p: Params,
    given: Option<&[Flow]>,
    mut progress: impl FnMut(&str),
) -> Result<(Vec<Row>, usize, Vec<usize>), String> {
    let t = Tables::build(raw, p.nexthops, p.flow_mode, &mut progress)?;
    let own = || make_flows(&t.routes, p.flows, 0x666c_6f77);
    let flows = given.map_or_else(own, <[Flow]>::to_vec);
    let configs: Vec<Vec<Vec<Frame>>> = [1, p.workers]
        .iter()
        .map(|&n| {
            (0..n)
                .map(|w| worker_packets(&flows, n, w, p.packets, 0x7061_636b))
                .collect()
        })
        .collect();
    // The radix oracle takes microseconds a packet: given flows (`bench router`'s
    // million) are checked on a sample, the first packets of their shuffled order.
    let all = &configs[0][0];
    let sample = &all[..all.len().min(given.map_or(usize::MAX, |_| CHECK_GIVEN))];
    for &k in p.designs {
        let n = sample.len();
        progress(&format!(
            "{}: checking {n} packets against the radix oracle",
            k.name()
        ));
        let (bad, first) = check(&t, k, sample, p.flows);
        if bad > 0 {
            return Err(format!(
                "bench forward: {}: {bad} packets forwarded differently from the oracle; first: {}",
                k.name(),
                first.unwrap_or_default()
            ));
        }
    }
    let cpus = dev::cpu::allowed_cpus().unwrap_or_default();
    let mut best: Vec<Row> = Vec::new();
    for round in 1..=p.rounds {
        for &k in p.designs {
            for (ci, sets) in configs.iter().enumerate() {
                progress(&format!(
                    "round {round}/{}: {}, {} worker(s), {} s",
                    p.rounds,
                    k.name(),
                    sets.len(),
                    p.secs
                ));
                let r = row(k, &run(&t, k, sets, p.flows, p.secs, &cpus));
                let i = p.designs.iter().position(|&x| x == k).unwrap_or(0) * 2 + ci;
                if best.len() <= i {
                    best.push(r);
                } else if r.mpps > best[i].mpps {
                    best[i] = r;
                }
            }
        }
    }
    Ok((best, t.routes.len(), cpus))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One packet through the whole path (the workers use [`forward_batch`]);
    /// returns the outgoing interface.
    fn ip_forward<D: Design>(
        d: &mut D,
        inp: &Frame,
        out: &mut Frame,
        now: u64,
    ) -> Result<u32, DropReason> {
        let dst = ip_input(inp)?;
        let next = d.next_hop(inp, dst, now).ok_or(DropReason::NoRoute)?;
        ip_rewrite(inp, out, next);
        Ok(next.0)
    }

    #[test]
    fn frames_are_valid_and_split_over_workers() {
        let _quiet = crate::bench::heap_quiet();
        let routes = lpm::synthetic_table(2000, 3);
        let flows = make_flows(&routes, 500, 1);
        let a = worker_packets(&flows, 2, 0, 100, 9);
        let b = worker_packets(&flows, 2, 1, 100, 9);
        for f in a.iter().chain(&b) {
            let ip = Ipv4Packet::new_unchecked(&f[14..]);
            assert!(ip.verify_checksum());
            assert_eq!((ip.total_len(), ip.hop_limit()), (50, 64));
        }
        let dst = |f: &Frame| u32::from(Ipv4Packet::new_unchecked(&f[14..]).dst_addr());
        assert!(a
            .iter()
            .all(|x| b.iter().all(|y| dst(x) != dst(y) || x[34..38] != y[34..38])));
    }

    #[test]
    fn every_design_forwards_like_the_oracle() {
        let _quiet = crate::bench::heap_quiet();
        let raw = lpm::synthetic_table(5000, 11);
        let p = Params {
            flows: 1000,
            packets: 2000,
            secs: 0.02,
            rounds: 1,
            workers: 2,
            designs: &DesignKind::ALL,
            nexthops: 8,
            flow_mode: FlowMode::FourTuple,
        };
        let (rows, _, _) = measure(&raw, p, None, |_| {}).unwrap();
        assert_eq!(rows.len(), 6);
        for r in &rows {
            assert_eq!(r.drops, 0, "{r:?}");
            assert!(r.packets > 0 && r.mpps > 0.0, "{r:?}");
        }
        let f = rows[4].flows.unwrap();
        assert!(f.hits > f.misses, "{f:?}");
    }

    #[test]
    fn a_bad_packet_is_dropped_not_forwarded() {
        let _quiet = crate::bench::heap_quiet();
        let t = Tables::build(
            &lpm::synthetic_table(100, 2),
            64,
            FlowMode::Destination,
            |_| {},
        )
        .unwrap();
        let flows = make_flows(&t.routes, 1, 1);
        let good = frame(&flows[0], 1);
        let mut out = [0u8; FRAME];
        let mut d = Split(&t.fib);
        assert!(ip_forward(&mut d, &good, &mut out, 0).is_ok());
        let mut f = good;
        let mut ip = Ipv4Packet::new_unchecked(&mut f[14..]);
        ip.set_hop_limit(1);
        ip.fill_checksum();
        assert_eq!(
            ip_forward(&mut d, &f, &mut out, 0),
            Err(DropReason::TtlExceeded)
        );
        let mut f = good;
        f[14 + 10] ^= 1;
        assert_eq!(ip_forward(&mut d, &f, &mut out, 0), Err(DropReason::BadSum));
        let mut f = good;
        f[14] = 0x46;
        assert_eq!(
            ip_forward(&mut d, &f, &mut out, 0),
            Err(DropReason::SlowPath)
        );
        let mut f = good;
        f[12] = 0x86;
        assert_eq!(
            ip_forward(&mut d, &f, &mut out, 0),
            Err(DropReason::NotIpv4)
        );
    }
}
