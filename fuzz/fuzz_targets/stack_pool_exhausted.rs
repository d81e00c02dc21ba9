//! Frames into a router whose buffer pool is all but empty. Before each frame the
//! target takes every buffer and packet record the pool will give (the pool is bounded
//! with `mbuf::pool::set_limit`), then hands back as many of each class as the input
//! says — often none — so that an allocation fails at whichever step of input,
//! forwarding, fragmentation, ICMP errors, firewall rejects or ARP/ND resolution the
//! frame reaches first.
//!
//! The router: one worker polled in this thread (`Stack::poll`, virtual time), two
//! links (the second with MTU 1280), forwarding on both families, routes through a
//! resolved and an unresolved gateway of each family, a reject route of each, no
//! default route (net unreachable), and ipfw on every IP point with `check-state`,
//! a `keep-state` rule, `reset`, `reject` and `unreach6`. The input is a raw frame, or
//! the fields of an IPv4, IPv6, ARP or neighbour discovery packet the target builds
//! with valid checksums (so that it gets past the checks a random frame dies at),
//! sent in on either link.
//!
//! What must hold: no panic, no hang; every frame the link took ends in a counter
//! (forwarded, delivered, taken into reassembly, received as ARP, taken by a hook, or
//! a drop counter); and once the held buffers go back, the router forwards a good
//! frame again. The stack is kept between inputs, so held packets, neighbour entries,
//! states and fragment queues carry over.
#![no_main]

use dev::{Device, Duration, Instant, Queue};
use libfuzzer_sys::fuzz_target;
use mbuf::Mbuf;
use mpstack_fuzz::Input;
use net::iface::{IfConfig, Inet6Addr, InetAddr};
use net::{Stack, StackConfig, Stats};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Mutex;
use wire::checksum;
use wire::{EthernetAddress, IpProtocol};

/// The pool's bound: 64 clusters (and 1,024 small buffers, 1,088 records, one jumbo
/// cluster). Well above what the stack below may keep in its own queues (at most 32
/// packets held for ARP and ND, 16 KiB in reassembly), so that the recovery check
/// means "nothing leaked or stuck", not "the stack's tables are full"; small, because
/// the target takes all of it before every input.
const POOL_CLUSTERS: usize = 64;

const MAC_R1: [u8; 6] = [0x02, 0, 0, 0, 0x01, 0x01];
const MAC_R2: [u8; 6] = [0x02, 0, 0, 0, 0x02, 0x01];
/// The resolved host on link 1 and the resolved gateway on link 2.
const MAC_H1: [u8; 6] = [0x02, 0, 0, 0, 0x01, 0x02];
const MAC_H2: [u8; 6] = [0x02, 0, 0, 0, 0x02, 0x02];
/// A neighbour the router has not resolved (ARP replies and advertisements use it).
const MAC_X: [u8; 6] = [0x02, 0, 0, 0, 0x09, 0x09];

const fn v4(a: u8, b: u8, c: u8, d: u8) -> Ipv4Addr {
    Ipv4Addr::new(a, b, c, d)
}
const fn v6(a: u16, b: u16, c: u16, h: u16) -> Ipv6Addr {
    Ipv6Addr::new(a, b, c, 0, 0, 0, 0, h)
}

/// Destinations a built packet may have: a resolved route, an unresolved gateway,
/// the connected link 2 (mostly unresolved), a reject route, no route, the router
/// itself, broadcast and multicast.
const DST4: [Ipv4Addr; 11] = [
    v4(198, 19, 0, 5),
    v4(198, 20, 0, 5),
    v4(198, 18, 2, 7),
    v4(198, 18, 2, 2),
    v4(198, 18, 129, 1),
    v4(203, 0, 113, 1),
    v4(198, 18, 1, 1),
    v4(198, 18, 2, 1),
    v4(198, 18, 1, 255),
    v4(255, 255, 255, 255),
    v4(224, 0, 0, 1),
];
/// Sources: the resolved host, unresolved hosts (an ICMP error to one needs ARP),
/// the one ipfw denies, a far network (errors go back through a gateway), zero.
const SRC4: [Ipv4Addr; 6] = [
    v4(198, 18, 1, 2),
    v4(198, 18, 1, 77),
    v4(198, 18, 1, 66),
    v4(198, 19, 0, 5),
    v4(198, 18, 2, 2),
    v4(0, 0, 0, 0),
];
const DST6: [Ipv6Addr; 9] = [
    v6(0x2001, 2, 9, 5),
    v6(0x2001, 2, 0xa, 5),
    v6(0x2001, 2, 2, 7),
    v6(0x2001, 2, 2, 2),
    v6(0x2001, 2, 8, 1),
    v6(0x2001, 0xdb8, 0, 1),
    v6(0x2001, 2, 1, 1),
    v6(0xff02, 0, 0, 1),
    v6(0xff02, 0, 0, 2),
];
const SRC6: [Ipv6Addr; 5] = [
    v6(0x2001, 2, 1, 2),
    v6(0x2001, 2, 1, 77),
    v6(0x2001, 2, 9, 5),
    v6(0xfe80, 0, 0, 2),
    v6(0, 0, 0, 0),
];
/// ARP and ND subjects: the router's addresses, the unresolved gateways, a stranger.
const ARP_ADDRS: [Ipv4Addr; 6] = [
    v4(198, 18, 1, 1),
    v4(198, 18, 2, 1),
    v4(198, 18, 2, 9),
    v4(198, 18, 2, 7),
    v4(198, 18, 1, 77),
    v4(198, 18, 1, 2),
];
const ND_ADDRS: [Ipv6Addr; 6] = [
    v6(0x2001, 2, 1, 1),
    v6(0x2001, 2, 2, 1),
    v6(0x2001, 2, 2, 9),
    v6(0x2001, 2, 2, 7),
    v6(0x2001, 2, 1, 77),
    v6(0x2001, 2, 1, 2),
];

/// Every buffer and record the pool would give, held in packets: data buffers many
/// to a packet (so that records last), then records alone (`copym` of nothing).
#[derive(Default)]
struct Held {
    smalls: Vec<Mbuf>,
    clusters: Vec<Mbuf>,
    big: Vec<Mbuf>,
    recs: Vec<Mbuf>,
}

impl Held {
    fn grab_all(&mut self) {
        let byte = [0u8; 1];
        let cluster = [0u8; mbuf::MCLBYTES];
        for n in [64, 8, 1] {
            let parts = vec![&byte[..]; n];
            while let Ok(m) = Mbuf::from_parts(&parts) {
                self.smalls.push(m);
            }
            let parts = vec![&cluster[..]; n];
            while let Ok(m) = Mbuf::from_parts(&parts) {
                self.clusters.push(m);
            }
        }
        // A jumbo cluster, then a 256 KiB one.
        for len in [4096, 100_000] {
            while let Ok(m) = Mbuf::with_capacity(len) {
                self.big.push(m);
            }
        }
        let Some(any) = self.smalls.first().or(self.clusters.first()) else {
            return;
        };
        let mut recs = Vec::new();
        while let Ok(m) = any.copym(0, 0) {
            recs.push(m);
        }
        self.recs.append(&mut recs);
    }

    /// Gives back `recs` records, `smalls` small buffers, `clusters` clusters and
    /// `big` large ones (the last each with its record), as far as they are held.
    fn release(&mut self, recs: usize, smalls: usize, clusters: usize, big: usize) {
        self.recs.truncate(self.recs.len().saturating_sub(recs));
        // Segments cut off the end of a packet: the buffers go, the record stays.
        if let Some(m) = self.smalls.iter_mut().find(|m| m.len() > smalls) {
            let keep = m.len() - smalls;
            m.truncate(keep);
        }
        let bytes = clusters * mbuf::MCLBYTES;
        if let Some(m) = self.clusters.iter_mut().find(|m| m.len() > bytes) {
            let keep = m.len() - bytes;
            m.truncate(keep);
        }
        self.big.truncate(self.big.len().saturating_sub(big));
    }

    fn release_all(&mut self) {
        self.recs.clear();
        self.smalls.clear();
        self.clusters.clear();
        self.big.clear();
    }
}

struct Rig {
    stack: Stack,
    now: Instant,
    /// Our ends of link 1 and link 2.
    ports: [Box<dyn Queue>; 2],
    held: Held,
    good_seq: u32,
    endings: Vec<bool>,
    _ipfw: std::sync::Arc<net::ipfw::Ipfw>,
}

static RIG: Mutex<Option<Rig>> = Mutex::new(None);

fn port(d: dev::mem::MemDevice) -> Box<dyn Queue> {
    Box::new(d).into_queues().pop().expect("a queue")
}

fn rig() -> Rig {
    // Before anything takes a buffer: what is carved stays carved.
    mbuf::pool::set_limit(POOL_CLUSTERS);
    let mut stack = Stack::new(StackConfig {
        name: "exhausted".into(),
        workers: 1,
        isn_secret: Some(7),
        dad_transmits: 0,
        // Bounds on what the stack may keep, well inside the pool: ARP and ND, 8
        // entries each holding 1 packet, on each link; reassembly, 16 KiB.
        arp: net::arp::ArpParams {
            max_entries: 8,
            max_hold: 1,
            ..Default::default()
        },
        frag: net::FragParams {
            max_datagrams: 8,
            max_bytes: 16 * 1024,
            max_per_source: 4,
            ..Default::default()
        },
        ..StackConfig::default()
    });
    let (l1, p1) = dev::mem::wire(dev::mem::WireConfig::default());
    let (l2, p2) = dev::mem::wire(dev::mem::WireConfig {
        mtu: 1280,
        ..Default::default()
    });
    for (i, (dev, mac)) in [(l1, MAC_R1), (l2, MAC_R2)].into_iter().enumerate() {
        let n = i as u8 + 1;
        let ifx = stack
            .add_interface(
                Box::new(dev),
                IfConfig {
                    name: Some(format!("r{n}")),
                    mac: Some(EthernetAddress(mac)),
                    addrs: vec![InetAddr::new(v4(198, 18, n, 1), 24)],
                    mtu: None,
                },
            )
            .unwrap();
        stack
            .add_address6(ifx, Inet6Addr::new(v6(0x2001, 2, u16::from(n), 1), 64))
            .unwrap();
        stack.set_forwarding(ifx, true, true).unwrap();
    }
    let cfg = stack.config();
    cfg.ifaces[0]
        .arp
        .insert_static(v4(198, 18, 1, 2), EthernetAddress(MAC_H1));
    cfg.ifaces[0]
        .nd6
        .insert_static(v6(0x2001, 2, 1, 2), EthernetAddress(MAC_H1));
    cfg.ifaces[1]
        .arp
        .insert_static(v4(198, 18, 2, 2), EthernetAddress(MAC_H2));
    cfg.ifaces[1]
        .nd6
        .insert_static(v6(0x2001, 2, 2, 2), EthernetAddress(MAC_H2));
    let p = |s: &str| s.parse::<route::IpPrefix>().unwrap();
    let a = |s: &str| s.parse::<IpAddr>().unwrap();
    stack
        .add_route_via(p("198.19.0.0/16"), a("198.18.2.2"))
        .unwrap();
    stack
        .add_route_via(p("198.20.0.0/16"), a("198.18.2.9"))
        .unwrap();
    stack
        .add_route_via(p("2001:2:9::/48"), a("2001:2:2::2"))
        .unwrap();
    stack
        .add_route_via(p("2001:2:a::/48"), a("2001:2:2::9"))
        .unwrap();
    for d in ["198.18.129.0/24", "2001:2:8::/48"] {
        stack
            .add_route(route::RouteSpec::discard(p(d), route::NhKind::Reject))
            .unwrap();
    }
    let ipfw = net::ipfw::Ipfw::new(fw::RulesetConfig::default(), 1).unwrap();
    ipfw.load(
        "add 100 check-state
add 150 reset tcp from any to any 22
add 200 allow tcp from any to any setup keep-state
add 300 allow udp from any to any 7 keep-state
add 400 reject udp from any to any 53
add 410 unreach6 port udp from any to any 54
add 600 deny ip from 198.18.1.66 to any
add 900 allow ip from any to any",
    )
    .unwrap();
    ipfw.attach(&stack);
    let mut rig = Rig {
        stack,
        now: Instant::ZERO,
        ports: [port(p1), port(p2)],
        held: Held::default(),
        good_seq: 0,
        endings: endings_mask(),
        _ipfw: ipfw,
    };
    // Past the start-up reports (MLD, router solicitations).
    for _ in 0..30 {
        rig.stack.poll(rig.now);
        rig.now += Duration::from_millis(100);
        rig.drain();
    }
    rig
}

impl Rig {
    /// Takes what the router sent on both links.
    fn drain(&mut self) -> [Vec<Mbuf>; 2] {
        let mut out = [Vec::new(), Vec::new()];
        for (p, o) in self.ports.iter_mut().zip(out.iter_mut()) {
            while p.rx_burst(self.now, o, 256) > 0 {}
        }
        out
    }

    /// Runs the stack at `now` until it has nothing left to do at once (bounded),
    /// then once more `step` later.
    fn run(&mut self, step: Duration) {
        for _ in 0..8 {
            match self.stack.poll(self.now) {
                Some(t) if t <= self.now => continue,
                _ => break,
            }
        }
        self.now += step;
        self.stack.poll(self.now);
    }
}

/// The counters a frame can end in: forwarded, delivered, taken into reassembly,
/// received as ARP, consumed or rejected by a hook, or any drop counter.
const ENDINGS: [&str; 9] = [
    "ip.forward",
    "ip6.forward",
    "ip.delivered",
    "ip6.delivered",
    "ip.fragments",
    "ip6.fragments",
    "arp.received",
    "pfil.consumed",
    "pfil.rejected",
];

/// Which of the counters, in `Stats::for_each` order, are endings: worked out once
/// by name, so that each input sums them without comparing strings.
fn endings_mask() -> Vec<bool> {
    let drops: Vec<&str> = net::DropReason::ALL.iter().map(|r| r.counter()).collect();
    let mut mask = Vec::new();
    Stats::default().for_each(|g, n, _| {
        let name = format!("{g}.{n}");
        mask.push(ENDINGS.contains(&name.as_str()) || drops.contains(&name.as_str()));
    });
    mask
}

fn endings(mask: &[bool], s: &Stats) -> u64 {
    let (mut i, mut sum) = (0, 0);
    s.for_each(|_, _, v| {
        if mask[i] {
            sum += v;
        }
        i += 1;
    });
    sum
}

fn changed(a: &Stats, b: &Stats) -> String {
    let mut before = Vec::new();
    a.for_each(|g, n, v| before.push((g, n, v)));
    let mut out = String::new();
    let mut i = 0;
    b.for_each(|g, n, v| {
        if before[i].2 != v {
            out.push_str(&format!("  {g}.{n}: {} -> {v}\n", before[i].2));
        }
        i += 1;
    });
    out
}

fn eth(dst: [u8; 6], src: [u8; 6], ty: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + payload.len());
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ty.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn l4_checksum(src: IpAddr, dst: IpAddr, proto: IpProtocol, l4: &[u8]) -> u16 {
    !checksum::combine(&[
        checksum::pseudo_header(&src, &dst, proto, l4.len() as u32),
        checksum::data(l4),
    ])
}

/// An upper layer of `proto` (UDP, TCP, ICMP or ICMPv6, else opaque) from `src` to
/// `dst` with `data` after its header and its checksum filled in.
fn upper(inp: &mut Input<'_>, proto: u8, src: IpAddr, dst: IpAddr, data: &[u8]) -> Vec<u8> {
    let ports = [7u16, 9, 22, 53, 54, 80, 33434];
    let sport = ports[usize::from(inp.u8()) % ports.len()];
    let dport = ports[usize::from(inp.u8()) % ports.len()];
    let mut l4 = Vec::new();
    let csum_at = match proto {
        17 => {
            l4.extend_from_slice(&sport.to_be_bytes());
            l4.extend_from_slice(&dport.to_be_bytes());
            l4.extend_from_slice(&((8 + data.len()) as u16).to_be_bytes());
            l4.extend_from_slice(&[0, 0]);
            Some(6)
        }
        6 => {
            l4.extend_from_slice(&sport.to_be_bytes());
            l4.extend_from_slice(&dport.to_be_bytes());
            l4.extend_from_slice(&inp.u32().to_be_bytes());
            l4.extend_from_slice(&inp.u32().to_be_bytes());
            l4.push(5 << 4);
            l4.push(inp.u8() & 0x3f);
            l4.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
            Some(16)
        }
        1 | 58 => {
            // Echo request, or whatever type and code the input gives.
            let (ty, code) = if inp.u8() & 1 == 0 {
                (if proto == 1 { 8 } else { 128 }, 0)
            } else {
                (inp.u8(), inp.u8())
            };
            l4.extend_from_slice(&[ty, code, 0, 0]);
            l4.extend_from_slice(&inp.u32().to_be_bytes());
            Some(2)
        }
        _ => None,
    };
    l4.extend_from_slice(data);
    if let Some(at) = csum_at {
        let c = if proto == 1 {
            !checksum::data(&l4)
        } else {
            l4_checksum(src, dst, IpProtocol::from(proto), &l4)
        };
        let c = if c == 0 && proto == 17 { 0xffff } else { c };
        l4[at..at + 2].copy_from_slice(&c.to_be_bytes());
    }
    l4
}

fn pick_proto(b: u8) -> u8 {
    [17, 6, 1, 58, 17, 6, 47, 0][usize::from(b % 8)]
}

/// An IPv4 packet from the input's choices: addresses from the tables, any TTL, DF,
/// fragment fields, any length up to what the link carries.
fn ipv4(inp: &mut Input<'_>, max: usize) -> Vec<u8> {
    let src = SRC4[usize::from(inp.u8()) % SRC4.len()];
    let dst = DST4[usize::from(inp.u8()) % DST4.len()];
    let mut proto = pick_proto(inp.u8());
    if proto == 58 {
        proto = 1;
    }
    let ttl = match inp.u8() {
        0..=15 => 1,
        16..=23 => 0,
        t => t,
    };
    let flags = inp.u8();
    // Room for the largest upper-layer header (TCP's 20 bytes).
    let len = usize::from(inp.u16()) % (max - 20 - 20);
    let data = vec![0x5a; len];
    let l4 = upper(inp, proto, src.into(), dst.into(), &data);
    let mut p = vec![0u8; 20];
    p.extend_from_slice(&l4);
    let total = p.len() as u16;
    {
        let mut ip = wire::Ipv4Packet::new_unchecked(&mut p[..]);
        ip.set_version(4);
        ip.set_header_len(20);
        ip.set_total_len(total);
        ip.set_ident(inp.u16());
        ip.set_dont_frag(flags & 1 != 0);
        if flags & 6 == 6 {
            // A fragment: any offset, more to come or not.
            ip.set_more_frags(flags & 8 != 0);
            ip.set_frag_offset(u16::from(inp.u8()) * 8);
        }
        ip.set_hop_limit(ttl);
        ip.set_next_header(IpProtocol::from(proto));
        ip.set_src_addr(src);
        ip.set_dst_addr(dst);
        ip.fill_checksum();
    }
    p
}

/// An IPv6 packet from the input's choices, with a Fragment header when it says so.
fn ipv6(inp: &mut Input<'_>, max: usize) -> Vec<u8> {
    let src = SRC6[usize::from(inp.u8()) % SRC6.len()];
    let dst = DST6[usize::from(inp.u8()) % DST6.len()];
    let mut proto = pick_proto(inp.u8());
    if proto == 1 {
        proto = 58;
    }
    let hlim = match inp.u8() {
        0..=15 => 1,
        16..=23 => 0,
        240..=255 => 255,
        h => h,
    };
    let frag = inp.u8();
    let len = usize::from(inp.u16()) % (max - 40 - 8 - 20);
    let data = vec![0xa5; len];
    let l4 = upper(inp, proto, src.into(), dst.into(), &data);
    let mut ext = Vec::new();
    let next = if frag & 3 == 3 {
        // A Fragment header: any offset, M flag, identification.
        let off = u16::from(inp.u8()) << 3 | u16::from(frag & 4 != 0);
        ext.extend_from_slice(&[proto, 0]);
        ext.extend_from_slice(&off.to_be_bytes());
        ext.extend_from_slice(&inp.u32().to_be_bytes());
        44
    } else {
        proto
    };
    let plen = (ext.len() + l4.len()) as u16;
    let mut p = vec![0x60, 0, 0, 0];
    p.extend_from_slice(&plen.to_be_bytes());
    p.push(next);
    p.push(hlim);
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(&ext);
    p.extend_from_slice(&l4);
    p
}

fn arp(inp: &mut Input<'_>, src_mac: [u8; 6]) -> Vec<u8> {
    let op = if inp.u8() & 1 == 0 { 1u16 } else { 2 };
    let spa = ARP_ADDRS[usize::from(inp.u8()) % ARP_ADDRS.len()];
    let tpa = ARP_ADDRS[usize::from(inp.u8()) % ARP_ADDRS.len()];
    let mut p = vec![0, 1, 8, 0, 6, 4];
    p.extend_from_slice(&op.to_be_bytes());
    p.extend_from_slice(&src_mac);
    p.extend_from_slice(&spa.octets());
    p.extend_from_slice(&[0; 6]);
    p.extend_from_slice(&tpa.octets());
    p
}

/// A neighbour solicitation or advertisement (hop limit 255, a link-layer option),
/// to the router, a solicited-node group or all nodes.
fn nd(inp: &mut Input<'_>, src_mac: [u8; 6]) -> (Vec<u8>, [u8; 6]) {
    let advert = inp.u8() & 1 != 0;
    let target = ND_ADDRS[usize::from(inp.u8()) % ND_ADDRS.len()];
    let src = if advert {
        target
    } else {
        ND_ADDRS[usize::from(inp.u8()) % ND_ADDRS.len()]
    };
    let t = target.octets();
    let (dst, dst_mac) = match inp.u8() % 3 {
        0 => (
            Ipv6Addr::new(
                0xff02,
                0,
                0,
                0,
                0,
                1,
                0xff00 | u16::from(t[13]),
                u16::from_be_bytes([t[14], t[15]]),
            ),
            [0x33, 0x33, 0xff, t[13], t[14], t[15]],
        ),
        1 => (v6(0xff02, 0, 0, 1), [0x33, 0x33, 0, 0, 0, 1]),
        _ => (v6(0x2001, 2, 1, 1), MAC_R1),
    };
    let mut l4 = vec![if advert { 136 } else { 135 }, 0, 0, 0];
    l4.extend_from_slice(&[if advert { inp.u8() & 0xe0 } else { 0 }, 0, 0, 0]);
    l4.extend_from_slice(&t);
    l4.extend_from_slice(&[if advert { 2 } else { 1 }, 1]);
    l4.extend_from_slice(&src_mac);
    let c = l4_checksum(src.into(), dst.into(), IpProtocol::Icmpv6, &l4);
    l4[2..4].copy_from_slice(&c.to_be_bytes());
    let mut p = vec![0x60, 0, 0, 0];
    p.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    p.extend_from_slice(&[58, 255]);
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(&l4);
    (p, dst_mac)
}

/// The frame an input describes, and the link (0 or 1) it comes in on.
fn frame(inp: &mut Input<'_>) -> (Vec<u8>, usize) {
    let sel = inp.u8();
    let link = usize::from(sel >> 7);
    let (rmac, hmac) = [(MAC_R1, MAC_H1), (MAC_R2, MAC_H2)][link];
    // Link 2 carries 1280 bytes of IP, link 1 1500.
    let max = [1500, 1280][link];
    let f = match sel % 8 {
        0 | 1 => {
            let mut f = inp.0.to_vec();
            if f.len() >= 14 && f[0] & 1 == 0 {
                f[..6].copy_from_slice(&rmac);
            }
            f
        }
        2 | 3 => eth(rmac, hmac, 0x0800, &ipv4(inp, max)),
        4 | 5 => eth(rmac, hmac, 0x86dd, &ipv6(inp, max)),
        6 => {
            let src_mac = if inp.u8() & 1 == 0 { MAC_X } else { hmac };
            let dst = if inp.u8() & 1 == 0 { [0xff; 6] } else { rmac };
            eth(dst, src_mac, 0x0806, &arp(inp, src_mac))
        }
        _ => {
            let src_mac = if inp.u8() & 1 == 0 { MAC_X } else { hmac };
            let (p, dst) = nd(inp, src_mac);
            eth(dst, src_mac, 0x86dd, &p)
        }
    };
    (f, link)
}

/// A UDP datagram from the resolved host on link 1 through the resolved route, to a
/// port every rule allows, carrying `seq`.
fn good_frame(seq: u32) -> Vec<u8> {
    let (src, dst) = (v4(198, 18, 1, 2), v4(198, 19, 0, 5));
    let mut l4 = vec![0x30, 0x39, 0, 9, 0, 12, 0, 0];
    l4.extend_from_slice(&seq.to_be_bytes());
    let c = l4_checksum(src.into(), dst.into(), IpProtocol::Udp, &l4);
    l4[6..8].copy_from_slice(&c.to_be_bytes());
    let mut p = vec![0u8; 20];
    p.extend_from_slice(&l4);
    let total = p.len() as u16;
    let mut ip = wire::Ipv4Packet::new_unchecked(&mut p[..]);
    ip.set_version(4);
    ip.set_header_len(20);
    ip.set_total_len(total);
    ip.set_hop_limit(64);
    ip.set_next_header(IpProtocol::Udp);
    ip.set_src_addr(src);
    ip.set_dst_addr(dst);
    ip.fill_checksum();
    eth(MAC_R1, MAC_H1, 0x0800, &p)
}

fuzz_target!(|data: &[u8]| {
    let mut g = RIG.lock().unwrap_or_else(|e| e.into_inner());
    let r = g.get_or_insert_with(rig);
    let mut inp = Input(data);
    // How many of each the pool keeps free for this frame, and how long it runs.
    let (k_rec, k_small, k_cluster, k_big) = (
        usize::from(inp.u8() % 8),
        usize::from(inp.u8() % 8),
        usize::from(inp.u8() % 4),
        usize::from(inp.u8() % 2),
    );
    let step = Duration::from_millis(10 + u64::from(inp.u8()));
    let (bytes, link) = frame(&mut inp);

    r.held.release_all();
    let Ok(m) = Mbuf::from_slice(&bytes) else {
        panic!("no buffer for the input frame with nothing held: the stack holds the pool");
    };
    r.held.grab_all();
    assert!(
        Mbuf::from_parts(&[&[0u8][..]]).is_err(),
        "the pool still gives buffers after grab_all: {:?}",
        mbuf::pool::stats()
    );
    r.held.release(k_rec, k_small, k_cluster, k_big);

    let before = r.stack.stats();
    let now = r.now;
    let took = r.ports[link].tx_burst(now, &mut vec![m]);
    r.run(step);
    let after = r.stack.stats();
    drop(r.drain());
    if took == 1 {
        assert!(
            endings(&r.endings, &after) > endings(&r.endings, &before),
            "a frame in on link {} ended in no counter; frame {:02x?}\ncounters that moved:\n{}",
            link + 1,
            bytes,
            changed(&before, &after)
        );
    }

    // Everything back: the router forwards again.
    r.held.release_all();
    r.good_seq = r.good_seq.wrapping_add(1);
    let seq = r.good_seq;
    let Ok(good) = Mbuf::from_slice(&good_frame(seq)) else {
        panic!("no buffer for the good frame with nothing held: the stack holds the pool");
    };
    let now = r.now;
    r.ports[0].tx_burst(now, &mut vec![good]);
    r.run(Duration::from_millis(1));
    let [_, out2] = r.drain();
    let forwarded = out2.iter().any(|m| {
        let f = m.to_vec();
        f.len() >= 46
            && f[..6] == MAC_H2
            && f[12..14] == [8, 0]
            && f[14 + 8] == 63
            && f[42..46] == seq.to_be_bytes()
    });
    if !forwarded {
        let mut c = String::new();
        let _ = r.stack.stats().write_netstat(&mut c, false);
        panic!(
            "the good frame {seq} was not forwarded once the pool was free again; pool {:?}; counters:\n{c}",
            mbuf::pool::stats()
        );
    }
});
