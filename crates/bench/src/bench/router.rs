//! `mpstack bench router`: 64-byte frames through the real [`net::Stack`] as a router
//! — the code `mpstack run --forwarding` runs, its own worker threads, its FIB, its
//! neighbour tables and, in some rows, its ipfw — with no kernel in the way: the
//! frames come from a generator device and leave through four sink devices, all in
//! memory ([`dev::gen`]).
//!
//! The rows, each measured for `--seconds` and kept as the best of `--rounds`:
//!
//! - `devices`: the generator's queue straight into a sink's, no stack: what the
//!   devices alone cost a packet (a recycled buffer reset and the frame written into
//!   it, as a NIC's DMA would; a count). Every other row pays it too.
//! - `v4-few`, `v4-full`: IPv4 forwarding with 4 routes, and with the full BGP table
//!   (`--table`, else the one `bench lpm` finds), at 1 worker and at `--workers`.
//! - `v4-connected`: IPv4 to 1,024 hosts on a /16 connected to out1 (their
//!   neighbour entries static), beside the 4 routes: forwarding decided by the
//!   connected route, each packet's link address from the neighbour table.
//! - `v6-few`, `v6-full`: the same for IPv6 (64-byte frames: 40 bytes of IPv6
//!   header, UDP, 2 bytes of data).
//! - `ipfw-0`, `ipfw-1`, `ipfw-10`, `ipfw-100`: IPv4 with 4 routes and ipfw on the
//!   IPv4 points in and out (a forwarded packet passes twice), holding that many
//!   rules that do not match (`deny ip from 192.0.2.N to any`) before `allow ip from
//!   any to any`; `ipfw-0` is the allow alone.
//! - `keep-state`: IPv4 with 4 routes and `check-state` + `allow ip from any to any
//!   keep-state`, over 1,048,576 flows whose states are made before the timing:
//!   every packet is a state lookup in a table of a million, on both passes.
//! - `design`: `bench forward`'s split design loop over the same full table, in the
//!   same run — not the product: a private loop over byte arrays that does a router's
//!   per-packet work and nothing else, so that the distance between the design and
//!   the product is on the page.
//!
//! Figures: Mpps on the wall clock (all workers); Mpps per core (packets per second
//! of the workers' own CPU time, read from `/proc/self/task/*/schedstat`, so a
//! worker that lost its core to other work is not charged for it); ns and cycles
//! (time-stamp counter) per packet on the core; the share of the run the workers had
//! a core for.
//!
//! `--plot FILE` draws two charts ([`plot`]): Mpps against workers, for which the
//! rows measured at more than one worker count are measured at every count from 1
//! to `--workers` (only when plotting: it multiplies the run time), and Mpps against
//! ipfw rules at 1 worker.
//!
//! Before timing, each stack row checks 256 forwarded frames against a radix-tree
//! oracle built from the same routes: out of the right interface's gateway (its MAC),
//! TTL or hop limit one less, IPv4 header checksum valid.

mod connected;
mod oracle;

use super::forward::{self, DesignKind};
use super::lpm::{self, SplitMix};
use super::progress;
use crate::BenchArgs;
use connected::{connect, CONNECTED_HOSTS};
use dev::gen::PktGen;
use dev::Device;
use net::iface::{IfConfig, Inet6Addr, InetAddr};
use net::{Stack, StackConfig};
use oracle::check;
use route::{IpPrefix, Prefix4, Prefix6, Radix, RouteSpec};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use wire::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpProtocol};

/// Bytes in a frame (without the FCS).
const FRAME: usize = 64;
/// Sink interfaces (ifindex 1..=OUT_IFACES); the generator is ifindex 0.
const OUT_IFACES: u32 = 4;
/// Gateways the routes are spread over, as in `bench forward`.
const GATEWAYS: u32 = 64;
/// Flows of the keep-state row: states in the table while it is timed.
const STATE_FLOWS: usize = 1 << 20;
/// Frames checked against the oracle before timing.
const CHECKED: usize = 256;
/// Thread names of the stack's workers (`{name}-w{id}`).
const STACK_NAME: &str = "rtr";

/// The rows' names, for `--skip`.
pub const CASES: [&str; 13] = [
    "devices",
    "v4-few",
    "v4-full",
    "v4-connected",
    "v6-few",
    "v6-full",
    "ipfw-0",
    "ipfw-1",
    "ipfw-10",
    "ipfw-100",
    "keep-state",
    "design",
    "2w",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    V4,
    V6,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Routes {
    Few,
    Full,
    /// The four routes and a connected /16 on out1 ([`CONNECTED_NET`]) whose
    /// [`CONNECTED_HOSTS`] hosts the frames go to, their neighbour entries static.
    Connected,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fw {
    None,
    /// This many non-matching rules before the allow.
    Rules(usize),
    KeepState,
}

#[derive(Clone, Copy, Debug)]
struct Case {
    name: &'static str,
    family: Family,
    routes: Routes,
    fw: Fw,
    workers: usize,
}

/// One measured row.
#[derive(Clone, Debug)]
struct Row {
    name: String,
    what: String,
    routes: usize,
    workers: usize,
    /// Packets a second, wall clock, all workers.
    mpps: f64,
    /// Packets a second of the workers' CPU time (each worker's rate on its core,
    /// summed over the workers).
    core_mpps: f64,
    /// CPU time of a packet on its worker's core.
    ns_per_packet: f64,
    cycles_per_packet: Option<f64>,
    /// Share of the run the workers had a core for.
    cpu_share: f64,
    packets: u64,
    /// Per stage of the stack (its runtime counters over the window): name, cycles
    /// a packet of that stage.
    stages: Vec<(&'static str, f64)>,
}

/// Where gateway `g` is: its interface and its address of each family.
fn gw_ifindex(g: u32) -> u32 {
    1 + g % OUT_IFACES
}
fn gw_addr4(g: u32) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, gw_ifindex(g) as u8, 2 + (g / OUT_IFACES) as u8)
}
fn gw_addr6(g: u32) -> Ipv6Addr {
    Ipv6Addr::new(
        0x2001,
        2,
        gw_ifindex(g) as u16,
        0,
        0,
        0,
        0,
        2 + (g / OUT_IFACES) as u16,
    )
}
fn gw_mac(g: u32) -> EthernetAddress {
    EthernetAddress([0x02, 0x00, 0x5e, 0x00, gw_ifindex(g) as u8, g as u8])
}
/// The router's MAC on interface `i`.
pub(super) fn if_mac(i: u32) -> EthernetAddress {
    EthernetAddress([0x02, 0x00, 0x00, 0x00, 0x00, 0x10 + i as u8])
}
const GEN_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0xee, 0x01]);

/// A destination the router must not see as its own or on a link: the benchmarking
/// range its interfaces use, and addresses no router forwards.
fn unusable4(a: u32) -> bool {
    let o = Ipv4Addr::from(a).octets();
    o[0] == 0
        || o[0] == 127
        || o[0] >= 224
        || (o[0] == 169 && o[1] == 254)
        || (o[0] == 198 && (o[1] & 0xfe) == 18)
}
fn unusable6(a: u128) -> bool {
    let a6 = Ipv6Addr::from(a);
    let s = a6.segments();
    (s[0] & 0xe000) != 0x2000 || (s[0] == 0x2001 && s[1] == 2)
}

/// The routes of a row: the table's, each to one of the gateways, or four that
/// cover the whole space.
struct Table4 {
    routes: Vec<(Prefix4, u32)>,
    oracle: Radix<u32>,
}
struct Table6 {
    routes: Vec<(Prefix6, u32)>,
    oracle: Radix<u128>,
}

fn table4(raw: &[(Prefix4, u32)]) -> Table4 {
    let dedup: BTreeMap<Prefix4, u32> = raw
        .iter()
        .map(|&(p, nh)| (Prefix4::new(p.addr, p.len), nh % GATEWAYS))
        .collect();
    let routes: Vec<(Prefix4, u32)> = dedup.into_iter().collect();
    let mut oracle = Radix::new();
    for &(p, nh) in &routes {
        oracle.insert(p, nh);
    }
    Table4 { routes, oracle }
}
fn table6(raw: &[(Prefix6, u32)]) -> Table6 {
    let dedup: BTreeMap<Prefix6, u32> = raw
        .iter()
        .map(|&(p, nh)| (Prefix6::new(p.addr, p.len), nh % GATEWAYS))
        .collect();
    let routes: Vec<(Prefix6, u32)> = dedup.into_iter().collect();
    let mut oracle = Radix::new();
    for &(p, nh) in &routes {
        oracle.insert(p, nh);
    }
    Table6 { routes, oracle }
}
fn few4() -> Vec<(Prefix4, u32)> {
    (0..4u32).map(|i| (Prefix4::new(i << 30, 2), i)).collect()
}
fn few6() -> Vec<(Prefix6, u32)> {
    (0..4u32)
        .map(|i| (Prefix6::new(u128::from(i) << 126, 2), i))
        .collect()
}

/// `n` destinations inside the table's prefixes (seeded), none of them unusable.
fn dests4(routes: &[(Prefix4, u32)], n: usize, seed: u64) -> Vec<u32> {
    let mut rng = SplitMix(seed);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let (p, _) = routes[rng.below(routes.len() as u64) as usize];
        let host = u32::MAX.checked_shr(p.len as u32).unwrap_or(0);
        let d = p.addr | (rng.next() as u32 & host);
        if !unusable4(d) {
            out.push(d);
        }
    }
    out
}
fn dests6(routes: &[(Prefix6, u32)], n: usize, seed: u64) -> Vec<u128> {
    let mut rng = SplitMix(seed);
    let mut out = Vec::with_capacity(n);
    let mut tries = 0u64;
    while out.len() < n && tries < 100 * n as u64 {
        tries += 1;
        let (p, _) = routes[rng.below(routes.len() as u64) as usize];
        let host = u128::MAX.checked_shr(p.len as u32).unwrap_or(0);
        let r = (rng.next() as u128) << 64 | rng.next() as u128;
        let d = p.addr | (r & host);
        if !unusable6(d) {
            out.push(d);
        }
    }
    out
}

/// Ethernet + IPv4 + UDP to `dst` from a host on the generator's link, 64 bytes,
/// every checksum valid, TTL 64.
pub(super) fn frame4(dst: u32, i: usize) -> Vec<u8> {
    frame4_port(dst, i, [53, 123, 443, 4789][i % 4])
}

/// [`frame4`] to UDP port `dport`.
pub(super) fn frame4_port(dst: u32, i: usize, dport: u16) -> Vec<u8> {
    let src = Ipv4Addr::new(198, 18, 0, 2 + (i % 250) as u8);
    let dst = Ipv4Addr::from(dst);
    let payload = FRAME - 14 - 20 - 8;
    let udp = wire::UdpRepr {
        src_port: 1024 + (i % 60_000) as u16,
        dst_port: dport,
    };
    let ip = wire::Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: IpProtocol::Udp,
        payload_len: udp.buffer_len(payload),
        hop_limit: 64,
        dscp: 0,
        ident: i as u16,
        dont_frag: true,
    };
    let mut out = vec![0u8; FRAME];
    let mut fr = EthernetFrame::new_unchecked(&mut out[..]);
    EthernetRepr {
        src_addr: GEN_MAC,
        dst_addr: if_mac(0),
        ethertype: EtherType::Ipv4,
    }
    .emit(&mut fr);
    let mut p = wire::Ipv4Packet::new_unchecked(fr.payload_mut());
    ip.emit(&mut p);
    udp.emit(
        &mut wire::UdpPacket::new_unchecked(p.payload_mut()),
        &src.into(),
        &dst.into(),
        payload,
        |b| b.fill(0x5a),
        true,
    );
    out
}

/// Ethernet + IPv6 + UDP to `dst`, 64 bytes (2 bytes of data), hop limit 64.
fn frame6(dst: u128, i: usize) -> Vec<u8> {
    let src = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2 + (i % 250) as u16);
    let dst = Ipv6Addr::from(dst);
    let payload = FRAME - 14 - 40 - 8;
    let udp = wire::UdpRepr {
        src_port: 1024 + (i % 60_000) as u16,
        dst_port: [53, 123, 443, 4789][i % 4],
    };
    let mut out = vec![0u8; FRAME];
    let mut fr = EthernetFrame::new_unchecked(&mut out[..]);
    EthernetRepr {
        src_addr: GEN_MAC,
        dst_addr: if_mac(0),
        ethertype: EtherType::Ipv6,
    }
    .emit(&mut fr);
    let ip = fr.payload_mut();
    ip[0] = 0x60;
    ip[4..6].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
    ip[6] = 17;
    ip[7] = 64;
    ip[8..24].copy_from_slice(&src.octets());
    ip[24..40].copy_from_slice(&dst.octets());
    udp.emit(
        &mut wire::UdpPacket::new_unchecked(&mut ip[40..]),
        &src.into(),
        &dst.into(),
        payload,
        |b| b.fill(0x5a),
        true,
    );
    out
}

/// A router stack of `workers` workers on a generator (in0) and four sinks, with
/// `routes`' gateways resolved statically.
fn router(
    gen: &PktGen,
    frames: &[Vec<u8>],
    workers: usize,
    routes4: &[(Prefix4, u32)],
    routes6: &[(Prefix6, u32)],
) -> Result<Stack, String> {
    let mut stack = Stack::new(StackConfig {
        name: STACK_NAME.into(),
        workers,
        isn_secret: Some(0x726f_7574),
        dad_transmits: 0,
        send_redirects: false,
        ..StackConfig::default()
    });
    let err = |e: net::StackError| format!("bench router: {e}");
    let mut ifs = Vec::new();
    for i in 0..=OUT_IFACES {
        let ic = IfConfig {
            name: Some(if i == 0 {
                "in0".into()
            } else {
                format!("out{i}")
            }),
            mac: Some(if_mac(i)),
            addrs: vec![InetAddr::new(Ipv4Addr::new(198, 18, i as u8, 1), 24)],
            mtu: None,
        };
        let dev: Box<dyn dev::Device> = if i == 0 {
            Box::new(gen.generator("gen", frames))
        } else {
            Box::new(gen.sink(&format!("sink{i}")))
        };
        let idx = stack.add_interface(dev, ic).map_err(err)?;
        if !routes6.is_empty() {
            let a = Ipv6Addr::new(0x2001, 2, i as u16, 0, 0, 0, 0, 1);
            stack
                .add_address6(idx, Inet6Addr::new(a, 64))
                .map_err(err)?;
        }
        stack.set_forwarding(idx, true, true).map_err(err)?;
        ifs.push(idx);
    }
    let cfg = stack.config();
    for g in 0..GATEWAYS {
        let ifp = &cfg.ifaces[gw_ifindex(g) as usize];
        ifp.arp.insert_static(gw_addr4(g), gw_mac(g));
        if !routes6.is_empty() {
            ifp.nd6.insert_static(gw_addr6(g), gw_mac(g));
        }
    }
    let r = stack.route_batch(|rib| -> Result<(), route::RtError> {
        for &(p, g) in routes4 {
            let dst = IpPrefix::new(Ipv4Addr::from(p.addr).into(), p.len);
            rib.add(RouteSpec::via(dst, gw_addr4(g).into(), gw_ifindex(g)))?;
        }
        for &(p, g) in routes6 {
            let dst = IpPrefix::new(Ipv6Addr::from(p.addr).into(), p.len);
            rib.add(RouteSpec::via(dst, gw_addr6(g).into(), gw_ifindex(g)))?;
        }
        Ok(())
    });
    r.map_err(|e| format!("bench router: adding routes: {e}"))?;
    Ok(stack)
}

/// The firewall of a row, attached to `stack`.
fn firewall(stack: &Stack, fw: Fw, workers: usize) -> Result<(), String> {
    let rules = match fw {
        Fw::None => return Ok(()),
        Fw::Rules(n) => {
            let mut s = String::new();
            for i in 0..n {
                s.push_str(&format!(
                    "add {} deny ip from 192.0.2.{} to any\n",
                    100 + i,
                    i % 250 + 1
                ));
            }
            s.push_str("add 60000 allow ip from any to any\n");
            s
        }
        Fw::KeepState => {
            "add 100 check-state\nadd 200 allow ip from any to any keep-state\n".into()
        }
    };
    let mut cfg = fw::RulesetConfig::default();
    cfg.states.max_states = STATE_FLOWS + STATE_FLOWS / 4;
    let f = net::ipfw::Ipfw::new(cfg, workers).map_err(|e| format!("bench router: ipfw: {e}"))?;
    f.load(&rules)
        .map_err(|e| format!("bench router: ipfw rules: {e}"))?;
    f.attach(stack);
    Ok(())
}

/// CPU time of the workers of the stack named `name`, per worker, from /proc.
fn worker_cpu(name: &str) -> Vec<Duration> {
    dev::cpu::threads_cpu_time(&format!("{name}-w"))
        .into_iter()
        .map(|(_, t)| t)
        .collect()
}

pub(super) struct Window {
    pub packets: Vec<u64>,
    pub cpu: Vec<Duration>,
    pub secs: f64,
    pub runtime: Option<net::runtime::Runtime>,
}

fn row_of(name: &str, what: String, routes: usize, w: &Window, hz: Option<f64>) -> Row {
    let packets: u64 = w.packets.iter().sum();
    let cpu: f64 = w.cpu.iter().map(Duration::as_secs_f64).sum();
    let workers = w.packets.len().max(1);
    let core_mpps = w
        .packets
        .iter()
        .zip(&w.cpu)
        .map(|(&p, c)| p as f64 / c.as_secs_f64().max(1e-9) / 1e6)
        .sum();
    let ns = cpu * 1e9 / packets.max(1) as f64;
    Row {
        name: name.to_string(),
        what,
        routes,
        workers,
        mpps: packets as f64 / w.secs.max(1e-9) / 1e6,
        core_mpps,
        ns_per_packet: ns,
        cycles_per_packet: hz.map(|h| ns * h / 1e9),
        cpu_share: cpu / (w.secs * workers as f64).max(1e-9),
        packets,
        stages: w
            .runtime
            .iter()
            .flat_map(|r| r.iter())
            .filter(|(_, s)| s.packets > 0)
            .map(|(st, s)| (st.name(), s.cycles_per_packet()))
            .collect(),
    }
}

/// Runs a started stack for `rounds` windows of `secs`; the best window.
fn time_stack(stack: &Stack, gen: &PktGen, workers: usize, secs: f64, rounds: u32) -> Window {
    time_stack_named(stack, STACK_NAME, gen, workers, secs, rounds)
}

/// [`time_stack`] for a stack named `name` (its workers' threads are `{name}-wN`).
pub(super) fn time_stack_named(
    stack: &Stack,
    name: &str,
    gen: &PktGen,
    workers: usize,
    secs: f64,
    rounds: u32,
) -> Window {
    let mut best: Option<Window> = None;
    for _ in 0..rounds {
        let r0 = stack.runtime();
        let (c0, t0, w0) = (gen.queue_counts(), worker_cpu(name), Instant::now());
        std::thread::sleep(Duration::from_secs_f64(secs));
        let (c1, t1, w1) = (gen.queue_counts(), worker_cpu(name), Instant::now());
        let r1 = stack.runtime();
        let packets: Vec<u64> = (0..workers)
            .map(|q| c1[q].sunk.saturating_sub(c0[q].sunk))
            .collect();
        let cpu: Vec<Duration> = (0..workers)
            .map(|q| {
                t1.get(q)
                    .copied()
                    .unwrap_or_default()
                    .saturating_sub(t0.get(q).copied().unwrap_or_default())
            })
            .collect();
        let w = Window {
            packets,
            cpu,
            secs: (w1 - w0).as_secs_f64(),
            runtime: Some(r1.since(&r0)),
        };
        let rate = |w: &Window| w.packets.iter().sum::<u64>() as f64 / w.secs;
        if best.as_ref().is_none_or(|b| rate(&w) > rate(b)) {
            best = Some(w);
        }
    }
    best.unwrap_or(Window {
        packets: vec![0],
        cpu: vec![Duration::ZERO],
        secs: 1.0,
        runtime: None,
    })
}

/// The devices-only row: one thread per queue runs its generator into a sink.
pub(super) fn devices(workers: usize, secs: f64, rounds: u32, frames: &[Vec<u8>]) -> Window {
    let mut best: Option<Window> = None;
    for _ in 0..rounds {
        let gen = PktGen::new(workers, 1500);
        let gq = Box::new(gen.generator("gen", frames)).into_queues();
        let sq = Box::new(gen.sink("sink")).into_queues();
        let cpus = dev::cpu::allowed_cpus().unwrap_or_default();
        let stop = std::sync::atomic::AtomicBool::new(false);
        let w0 = Instant::now();
        let runs: Vec<(u64, Duration)> = std::thread::scope(|s| {
            let hs: Vec<_> = gq
                .into_iter()
                .zip(sq)
                .enumerate()
                .map(|(i, (mut g, mut k))| {
                    let stop = &stop;
                    let cpu = cpus.get(i % cpus.len().max(1)).copied();
                    s.spawn(move || {
                        if let Some(c) = cpu {
                            let _ = dev::cpu::pin_current_thread(c);
                        }
                        let t0 = dev::cpu::thread_cpu_time().unwrap_or_default();
                        let mut v = Vec::with_capacity(64);
                        let mut n = 0u64;
                        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                            for _ in 0..64 {
                                n += g.rx_burst(dev::Instant::ZERO, &mut v, 64) as u64;
                                k.tx_burst(dev::Instant::ZERO, &mut v);
                            }
                        }
                        let t1 = dev::cpu::thread_cpu_time().unwrap_or_default();
                        (n, t1.saturating_sub(t0))
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_secs_f64(secs));
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            hs.into_iter()
                .map(|h| h.join().unwrap_or((0, Duration::ZERO)))
                .collect()
        });
        let w = Window {
            packets: runs.iter().map(|r| r.0).collect(),
            cpu: runs.iter().map(|r| r.1).collect(),
            secs: w0.elapsed().as_secs_f64(),
            runtime: None,
        };
        let rate = |w: &Window| w.packets.iter().sum::<u64>() as f64 / w.secs;
        if best.as_ref().is_none_or(|b| rate(&w) > rate(b)) {
            best = Some(w);
        }
    }
    best.unwrap_or(Window {
        packets: vec![0],
        cpu: vec![Duration::ZERO],
        secs: 1.0,
        runtime: None,
    })
}

fn what(c: &Case, routes: usize) -> String {
    let fam = match c.family {
        Family::V4 => "IPv4",
        Family::V6 => "IPv6",
    };
    let fw = match c.fw {
        Fw::None => String::new(),
        Fw::Rules(0) => ", ipfw: allow only".into(),
        Fw::Rules(n) => format!(", ipfw: {n} rules + allow"),
        Fw::KeepState => format!(", ipfw keep-state, {STATE_FLOWS} states"),
    };
    if c.routes == Routes::Connected {
        return format!(
            "{fam} forwarding to {CONNECTED_HOSTS} hosts on a connected /16 (neighbours resolved), {routes} routes{fw}"
        );
    }
    format!("{fam} forwarding, {routes} routes{fw}")
}

/// The stack rows to measure, each at 1 worker and, for those that scale, at
/// `two` (with `plotting`, at every count up to it); `--skip`'s left out.
fn cases(skip: &dyn Fn(&str) -> bool, plotting: bool, two: usize) -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    let mut add = |name, family, routes, fw, both: bool| {
        if skip(name) {
            return;
        }
        cases.push(Case {
            name,
            family,
            routes,
            fw,
            workers: 1,
        });
        if both && !skip("2w") {
            // With --plot, every worker count up to --workers, for the curve; without,
            // the last one only.
            let first = if plotting { 2 } else { two };
            for workers in first..=two {
                cases.push(Case {
                    name,
                    family,
                    routes,
                    fw,
                    workers,
                });
            }
        }
    };
    add("v4-few", Family::V4, Routes::Few, Fw::None, true);
    add("v4-full", Family::V4, Routes::Full, Fw::None, true);
    add(
        "v4-connected",
        Family::V4,
        Routes::Connected,
        Fw::None,
        false,
    );
    add("v6-few", Family::V6, Routes::Few, Fw::None, false);
    add("v6-full", Family::V6, Routes::Full, Fw::None, true);
    add("ipfw-0", Family::V4, Routes::Few, Fw::Rules(0), false);
    add("ipfw-1", Family::V4, Routes::Few, Fw::Rules(1), false);
    add("ipfw-10", Family::V4, Routes::Few, Fw::Rules(10), true);
    add("ipfw-100", Family::V4, Routes::Few, Fw::Rules(100), false);
    add("keep-state", Family::V4, Routes::Few, Fw::KeepState, false);
    cases
}

pub fn main(a: &BenchArgs) -> Result<ExitCode, String> {
    if let Some(s) = a.skip.iter().find(|s| !CASES.contains(&s.as_str())) {
        return Err(format!(
            "bench router: --skip: unknown '{s}' (known: {})",
            CASES.join(", ")
        ));
    }
    let skip = |n: &str| a.skip.iter().any(|s| s == n);
    let two = if a.workers > 1 { a.workers as usize } else { 2 };
    let secs = a.seconds;
    let rounds = a.rounds;
    let hz = dev::cpu::tsc_hz(Duration::from_millis(50));
    let (raw4, raw6, source) = lpm::load_tables(a, "router")?;
    progress(a, "router: building the oracles");
    let full4 = table4(&raw4);
    let full6 = table6(&raw6);
    let few4t = table4(&few4());
    let few6t = table6(&few6());
    let flows = a.flows as usize;
    let d4 = dests4(&full4.routes, flows, 0x666c_6f77);
    let d6 = dests6(&full6.routes, flows, 0x666c_6f77);
    let frames4: Vec<Vec<u8>> = d4.iter().enumerate().map(|(i, &d)| frame4(d, i)).collect();
    let frames6: Vec<Vec<u8>> = d6.iter().enumerate().map(|(i, &d)| frame6(d, i)).collect();
    let (conn4, frames_conn) = connected::table_and_frames(flows);

    let plotting = a.plot.is_some();
    let cases = cases(&skip, plotting, two);
    let mut rows: Vec<Row> = Vec::new();
    if !skip("devices") {
        for w in [1, two] {
            if w > 1 && skip("2w") {
                continue;
            }
            progress(a, &format!("router: devices only, {w} worker(s)"));
            let win = devices(w, secs, rounds, &frames4);
            rows.push(row_of(
                "devices",
                "generator -> sink, no stack".into(),
                0,
                &win,
                hz,
            ));
        }
    }
    let mut state_frames: Vec<Vec<u8>> = Vec::new();
    for c in &cases {
        let (t4, t6): (&Table4, &Table6) = match (c.family, c.routes) {
            (Family::V4, Routes::Few) => (&few4t, &table6_empty()),
            (Family::V4, Routes::Full) => (&full4, &table6_empty()),
            (Family::V4, Routes::Connected) => (&conn4, &table6_empty()),
            (Family::V6, Routes::Connected) => unreachable!("no IPv6 connected row"),
            (Family::V6, Routes::Few) => (&table4_empty(), &few6t),
            (Family::V6, Routes::Full) => (&table4_empty(), &full6),
        };
        let nroutes = t4.routes.len() + t6.routes.len();
        let frames: &[Vec<u8>] = match (c.family, c.fw) {
            (Family::V4, Fw::KeepState) => {
                if state_frames.is_empty() {
                    progress(a, &format!("router: {STATE_FLOWS} flows for keep-state"));
                    let d = dests4(&full4.routes, STATE_FLOWS, 0x7374_6174);
                    state_frames = d.iter().enumerate().map(|(i, &d)| frame4(d, i)).collect();
                }
                &state_frames
            }
            (Family::V4, _) if c.routes == Routes::Connected => &frames_conn,
            (Family::V4, _) => &frames4,
            (Family::V6, _) => &frames6,
        };
        progress(
            a,
            &format!(
                "router: {}, {} worker(s): building the stack ({nroutes} routes)",
                c.name, c.workers
            ),
        );
        let gen = PktGen::new(c.workers, 1500);
        let mut stack = router(&gen, frames, c.workers, &t4.routes, &t6.routes)?;
        if c.routes == Routes::Connected {
            connect(&stack)?;
        }
        firewall(&stack, c.fw, c.workers)?;
        stack
            .start()
            .map_err(|e| format!("bench router: starting the workers: {e}"))?;
        // Warm up: states made, neighbours and caches warm; then check a sample.
        let warm = if c.fw == Fw::KeepState {
            let target = gen.counts().generated + frames.len() as u64 + 1;
            let t0 = Instant::now();
            while gen.counts().generated < target && t0.elapsed() < Duration::from_secs(20) {
                std::thread::sleep(Duration::from_millis(20));
            }
            0.05
        } else {
            0.2
        };
        std::thread::sleep(Duration::from_secs_f64(warm));
        gen.capture(CHECKED);
        let t0 = Instant::now();
        while gen.captured().len() < CHECKED && t0.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let cap = gen.captured();
        let checked = check(&cap, &t4.oracle, &t6.oracle);
        let checked = match checked {
            Ok(n) if n > 0 => n,
            Ok(_) => {
                stack.stop();
                let mut counters = String::new();
                let _ = stack.stats().write_netstat(&mut counters, false);
                return Err(format!(
                    "bench router: {}: no frame came out of the router; its counters:\n{counters}",
                    c.name
                ));
            }
            Err(e) => {
                stack.stop();
                return Err(format!("bench router: {}: {e}", c.name));
            }
        };
        progress(
            a,
            &format!(
                "router: {}, {} worker(s): {checked} frames match the oracle; {rounds} x {secs} s",
                c.name, c.workers
            ),
        );
        let win = time_stack(&stack, &gen, c.workers, secs, rounds);
        stack.stop();
        rows.push(row_of(c.name, what(c, nroutes), nroutes, &win, hz));
    }

    let mut design: Vec<forward::Row> = Vec::new();
    if !skip("design") {
        let p = forward::Params {
            flows,
            packets: a.packets as usize,
            secs,
            rounds,
            workers: two,
            designs: &[DesignKind::Split],
            nexthops: GATEWAYS,
            flow_mode: route::FlowMode::Destination,
        };
        let (r, _, _) =
            forward::measure(&raw4, p, |m| progress(a, &format!("router: design: {m}")))?;
        design = r;
    }

    let table = match &source {
        lpm::Source::File(p) => p.clone(),
        lpm::Source::Synthetic(_) => "synthetic".into(),
    };
    if let Some(path) = &a.plot {
        plot(path, &rows, &design, two)?;
    }
    if a.json {
        for r in &rows {
            println!(
                "{{\"bench\":\"router\",\"case\":\"{}\",\"what\":\"{}\",\"routes\":{},\"workers\":{},\"mpps\":{:.3},\"mpps_per_core\":{:.3},\"ns_per_packet\":{:.2},\"cycles_per_packet\":{},\"core_share\":{:.3},\"packets\":{},\"table\":\"{}\",\"stage_cycles_per_packet\":{{{}}}}}",
                r.name,
                r.what,
                r.routes,
                r.workers,
                r.mpps,
                r.core_mpps / r.workers as f64,
                r.ns_per_packet,
                r.cycles_per_packet.map_or("null".into(), |c| format!("{c:.1}")),
                r.cpu_share,
                r.packets,
                table.replace('\\', "\\\\").replace('"', "\\\""),
                r.stages
                    .iter()
                    .map(|(n, c)| format!("\"{n}\":{c:.1}"))
                    .collect::<Vec<_>>()
                    .join(",")
            );
        }
        for r in &design {
            println!(
                "{{\"bench\":\"router\",\"case\":\"design\",\"what\":\"bench forward's split loop (not the product)\",\"routes\":{},\"workers\":{},\"mpps\":{:.3},\"mpps_per_core\":{:.3},\"ns_per_packet\":{:.2},\"cycles_per_packet\":{:.1},\"core_share\":{:.3},\"packets\":{},\"table\":\"{}\"}}",
                full4.routes.len(),
                r.workers,
                r.mpps,
                r.core_mpps / r.workers as f64,
                r.ns_per_packet,
                r.ticks_per_packet,
                r.cpu_share,
                r.packets,
                table.replace('\\', "\\\\").replace('"', "\\\"")
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "64-byte frames through the real Stack (generator -> in0 -> router -> out1..out4 -> sinks, in memory); best of {rounds} windows of {secs} s"
    );
    match &source {
        lpm::Source::File(p) => println!(
            "full table: {} ({} IPv4, {} IPv6 prefixes)",
            p,
            full4.routes.len(),
            full6.routes.len()
        ),
        lpm::Source::Synthetic(why) => println!("full table: SYNTHETIC ({why})"),
    }
    println!(
        "{flows} flows (destinations inside announced prefixes, spread over the workers by RSS); {GATEWAYS} gateways on {OUT_IFACES} interfaces"
    );
    if let Some(h) = hz {
        println!("cycles: time-stamp counter ticks ({:.3} GHz)", h / 1e9);
    }
    println!();
    println!(
        "{:<12} {:>2} {:>8} {:>10} {:>8} {:>8} {:>6}  what",
        "row", "w", "Mpps", "Mpps/core", "ns/pkt", "cyc/pkt", "core%"
    );
    let line = |name: &str,
                workers: usize,
                mpps: f64,
                per_core: f64,
                ns: f64,
                cyc: Option<f64>,
                share: f64,
                what: &str| {
        println!(
            "{:<12} {:>2} {:>8.2} {:>10.2} {:>8.1} {:>8} {:>6.0}  {}",
            name,
            workers,
            mpps,
            per_core,
            ns,
            cyc.map_or("-".into(), |c| format!("{c:.0}")),
            share * 100.0,
            what
        )
    };
    for r in &rows {
        line(
            &r.name,
            r.workers,
            r.mpps,
            r.core_mpps / r.workers as f64,
            r.ns_per_packet,
            r.cycles_per_packet,
            r.cpu_share,
            &r.what,
        );
    }
    for r in &design {
        line(
            "design",
            r.workers,
            r.mpps,
            r.core_mpps / r.workers as f64,
            r.ns_per_packet,
            Some(r.ticks_per_packet),
            r.cpu_share,
            "bench forward's split loop over the full IPv4 table: a private loop, not the product",
        );
    }
    println!();
    println!("cycles a packet in each stage of the stack (its runtime counters, VPP's `show runtime`), 1 worker:");
    for r in rows
        .iter()
        .filter(|r| r.workers == 1 && !r.stages.is_empty())
    {
        let parts: Vec<String> = r
            .stages
            .iter()
            .map(|(n, c)| format!("{n} {c:.0}"))
            .collect();
        println!("  {:<12} {}", r.name, parts.join(", "));
    }
    println!();
    let find = |n: &str, w: usize| rows.iter().find(|r| r.name == n && r.workers == w);
    if let (Some(one), Some(many)) = (find("v4-full", 1), find("v4-full", two)) {
        println!(
            "v4-full scaling, 1 -> {two} workers: {:.2}x wall, {:.2}x on core",
            many.mpps / one.mpps.max(1e-9),
            many.core_mpps / one.core_mpps.max(1e-9)
        );
    }
    if let (Some(st), Some(d)) = (find("v4-full", 1), design.iter().find(|r| r.workers == 1)) {
        println!(
            "v4-full, 1 worker: the product runs at {:.2}x the design loop's per-core rate ({:.1} vs {:.1} ns a packet)",
            (st.core_mpps) / d.core_mpps.max(1e-9),
            st.ns_per_packet,
            d.ns_per_packet
        );
    }
    connected::summary(find("v4-connected", 1), find("v4-few", 1));
    if let (Some(st), Some(dv)) = (find("v4-few", 1), find("devices", 1)) {
        println!(
            "v4-few, 1 worker: {:.1} ns a packet on the core, of which the devices {:.1}",
            st.ns_per_packet, dv.ns_per_packet
        );
    }
    if let Some(p) = &a.plot {
        let (w, r) = plot_paths(p);
        println!("plots: {} and {}", w.display(), r.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Where `--plot FILE` puts its two charts: FILE-workers and FILE-rules, the
/// suffix before the extension.
fn plot_paths(p: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    (
        crate::plot::with_suffix(p, "workers"),
        crate::plot::with_suffix(p, "rules"),
    )
}

/// The two charts of `--plot`: Mpps on the wall clock against workers (1..=`two`),
/// a line a stack row measured at more than one worker count, the design loop dashed
/// (measured at 1 and `two` only); and Mpps against ipfw rules at 1 worker, the
/// same stack without ipfw (v4-few) dashed beside it.
fn plot(
    path: &std::path::Path,
    rows: &[Row],
    design: &[forward::Row],
    two: usize,
) -> Result<(), String> {
    use crate::plot::{lines, Axes, Series};
    let (pw, pr) = plot_paths(path);
    let mut names: Vec<&str> = Vec::new();
    for r in rows {
        if r.workers > 1 && r.name != "devices" && !names.contains(&r.name.as_str()) {
            names.push(&r.name);
        }
    }
    let mut series: Vec<Series> = names
        .iter()
        .map(|n| Series {
            name: (*n).into(),
            points: rows
                .iter()
                .filter(|r| r.name == *n)
                .map(|r| ((r.workers - 1) as f64, r.mpps))
                .collect(),
            reference: false,
        })
        .collect();
    if !design.is_empty() {
        series.push(Series {
            name: "design loop (bench forward, not the product)".into(),
            points: design
                .iter()
                .map(|r| ((r.workers - 1) as f64, r.mpps))
                .collect(),
            reference: true,
        });
    }
    lines(
        &pw,
        &Axes {
            title: "bench router: 64-byte frames through the Stack, by workers".into(),
            x_desc: "workers".into(),
            y_desc: "Mpps (wall clock, all workers)".into(),
            x_labels: Some((1..=two).map(|w| w.to_string()).collect()),
        },
        &series,
    )?;
    let rules = [
        ("ipfw-0", 0),
        ("ipfw-1", 1),
        ("ipfw-10", 10),
        ("ipfw-100", 100),
    ];
    let at1 = |n: &str| rows.iter().find(|r| r.name == n && r.workers == 1);
    let mut series = vec![Series {
        name: "ipfw, N deny rules before the allow".into(),
        points: rules
            .iter()
            .enumerate()
            .filter_map(|(k, (n, _))| Some((k as f64, at1(n)?.mpps)))
            .collect(),
        reference: false,
    }];
    if let Some(base) = at1("v4-few") {
        series.push(Series {
            name: "v4-few, no ipfw".into(),
            points: (0..rules.len()).map(|k| (k as f64, base.mpps)).collect(),
            reference: true,
        });
    }
    lines(
        &pr,
        &Axes {
            title: "bench router: ipfw rules on the Stack's IPv4 path, 1 worker".into(),
            x_desc: "rules before the allow (each packet passes ipfw twice)".into(),
            y_desc: "Mpps (wall clock)".into(),
            x_labels: Some(rules.iter().map(|(_, n)| n.to_string()).collect()),
        },
        &series,
    )
}

fn table4_empty() -> Table4 {
    Table4 {
        routes: Vec::new(),
        oracle: Radix::new(),
    }
}
fn table6_empty() -> Table6 {
    Table6 {
        routes: Vec::new(),
        oracle: Radix::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_64_bytes_with_valid_headers() {
        let f = frame4(u32::from(Ipv4Addr::new(203, 0, 113, 7)), 3);
        assert_eq!(f.len(), FRAME);
        assert_eq!(wire::checksum::data(&f[14..34]), 0xffff);
        let f6 = frame6(u128::from(Ipv6Addr::new(0x2a00, 1, 0, 0, 0, 0, 0, 9)), 3);
        assert_eq!(f6.len(), FRAME);
        assert_eq!(f6[14] >> 4, 6);
    }

    #[test]
    fn destinations_avoid_the_routers_own_ranges() {
        let r = few4();
        for d in dests4(&r, 10_000, 1) {
            assert!(!unusable4(d));
        }
        for d in dests6(&few6(), 10_000, 1) {
            assert!(!unusable6(d));
        }
    }

    #[test]
    fn a_router_forwards_what_the_oracle_says() {
        let _quiet = crate::bench::heap_quiet();
        let t = table4(&few4());
        let d = dests4(&t.routes, 64, 2);
        let frames: Vec<Vec<u8>> = d.iter().enumerate().map(|(i, &d)| frame4(d, i)).collect();
        let gen = PktGen::new(1, 1500);
        let mut stack = router(&gen, &frames, 1, &t.routes, &[]).unwrap();
        gen.capture(64);
        let mut now = dev::Instant::ZERO;
        for _ in 0..4 {
            stack.poll(now);
            now += Duration::from_millis(1);
        }
        let cap = gen.captured();
        assert_eq!(check(&cap, &t.oracle, &Radix::new()), Ok(64));
    }

    /// Not a check: a harness for instruction counts of the forwarding path under
    /// callgrind (no hardware counters on these machines): one thread polls a
    /// router of `ROUTER_POLLS` (default 2000) bursts of 64 frames, with ipfw and
    /// `ROUTER_FW` non-matching rules before an allow when that is set.
    /// `valgrind --tool=callgrind target/release/deps/mpstack-… --ignored
    /// --exact bench::router::tests::callgrind_forward`.
    #[test]
    #[ignore]
    fn callgrind_forward() {
        let _quiet = crate::bench::heap_quiet();
        let polls: usize = std::env::var("ROUTER_POLLS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2000);
        let t = table4(&few4());
        let d = dests4(&t.routes, 1024, 2);
        let frames: Vec<Vec<u8>> = d.iter().enumerate().map(|(i, &d)| frame4(d, i)).collect();
        let gen = PktGen::new(1, 1500);
        let mut stack = router(&gen, &frames, 1, &t.routes, &[]).unwrap();
        // ROUTER_FW=N: ipfw with N non-matching rules before the allow;
        // ROUTER_FW=ks: keep-state.
        match std::env::var("ROUTER_FW").ok().as_deref() {
            Some("ks") => firewall(&stack, Fw::KeepState, 1).unwrap(),
            Some(n) => {
                if let Ok(n) = n.parse() {
                    firewall(&stack, Fw::Rules(n), 1).unwrap();
                }
            }
            None => {}
        }
        let mut now = dev::Instant::ZERO;
        for _ in 0..polls {
            stack.poll(now);
            now += Duration::from_micros(10);
        }
        println!("{:?}", gen.counts());
        let mut s = String::new();
        stack.runtime().write_table(&mut s).unwrap();
        println!("{s}");
    }
}
