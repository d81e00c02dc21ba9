//! `bench router`'s addresses, route tables and frames: where the gateways are, the
//! routes of a row with the radix-tree oracle built from them, the destinations the
//! frames go to, and the frames themselves (Ethernet + IPv4 or IPv6 + UDP, 64 bytes,
//! every checksum valid).

use super::{FRAME, GATEWAYS, OUT_IFACES};
use crate::bench::forward::Flow;
use crate::bench::lpm::SplitMix;
use route::{Prefix4, Prefix6, Radix};
use std::collections::{BTreeMap, HashSet};
use std::net::{Ipv4Addr, Ipv6Addr};
use wire::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpProtocol};

/// Where gateway `g` is: its interface and its address of each family.
pub(super) fn gw_ifindex(g: u32) -> u32 {
    1 + g % OUT_IFACES
}
pub(super) fn gw_addr4(g: u32) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, gw_ifindex(g) as u8, 2 + (g / OUT_IFACES) as u8)
}
pub(super) fn gw_addr6(g: u32) -> Ipv6Addr {
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
pub(super) fn gw_mac(g: u32) -> EthernetAddress {
    EthernetAddress([0x02, 0x00, 0x5e, 0x00, gw_ifindex(g) as u8, g as u8])
}
/// The router's MAC on interface `i`.
pub(crate) fn if_mac(i: u32) -> EthernetAddress {
    EthernetAddress([0x02, 0x00, 0x00, 0x00, 0x00, 0x10 + i as u8])
}
const GEN_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0xee, 0x01]);

/// A destination the router must not see as its own or on a link: the benchmarking
/// range its interfaces use, and addresses no router forwards.
pub(super) fn unusable4(a: u32) -> bool {
    let o = Ipv4Addr::from(a).octets();
    o[0] == 0
        || o[0] == 127
        || o[0] >= 224
        || (o[0] == 169 && o[1] == 254)
        || (o[0] == 198 && (o[1] & 0xfe) == 18)
}
pub(super) fn unusable6(a: u128) -> bool {
    let a6 = Ipv6Addr::from(a);
    let s = a6.segments();
    (s[0] & 0xe000) != 0x2000 || (s[0] == 0x2001 && s[1] == 2)
}

/// The routes of a row: the table's, each to one of the gateways, or four that
/// cover the whole space.
#[derive(Debug, Default)]
pub(super) struct Table4 {
    pub routes: Vec<(Prefix4, u32)>,
    pub oracle: Radix<u32>,
}
#[derive(Debug, Default)]
pub(super) struct Table6 {
    pub routes: Vec<(Prefix6, u32)>,
    pub oracle: Radix<u128>,
}

pub(super) fn table4(raw: &[(Prefix4, u32)]) -> Table4 {
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
pub(super) fn table6(raw: &[(Prefix6, u32)]) -> Table6 {
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
pub(super) fn few4() -> Vec<(Prefix4, u32)> {
    (0..4u32).map(|i| (Prefix4::new(i << 30, 2), i)).collect()
}
pub(super) fn few6() -> Vec<(Prefix6, u32)> {
    (0..4u32)
        .map(|i| (Prefix6::new(u128::from(i) << 126, 2), i))
        .collect()
}

/// A random host of prefix `p`.
fn host4(p: Prefix4, rng: &mut SplitMix) -> u32 {
    let host = u32::MAX.checked_shr(p.len as u32).unwrap_or(0);
    p.addr | (rng.next() as u32 & host)
}

/// `n` destinations inside the table's prefixes (seeded), none of them unusable.
pub(super) fn dests4(routes: &[(Prefix4, u32)], n: usize, seed: u64) -> Vec<u32> {
    let mut rng = SplitMix(seed);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let d = host4(routes[rng.below(routes.len() as u64) as usize].0, &mut rng);
        if !unusable4(d) {
            out.push(d);
        }
    }
    out
}

/// `n` destinations spread over the whole table, no two alike (seeded): the k-th a
/// host of route `k * routes / n` in address order (so with `n` up to the table's
/// size every destination has a route of its own, evenly over the space), then
/// shuffled, so that one packet's lookup walks a part of the table far from the
/// last one's and finds little of it in the cache. A destination that is unusable
/// or taken is drawn again from a random route.
pub(super) fn spread4(routes: &[(Prefix4, u32)], n: usize, seed: u64) -> Vec<u32> {
    let mut rng = SplitMix(seed);
    let mut seen = HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    let len = routes.len() as u64;
    let mut k = 0u64;
    while out.len() < n && len > 0 && k < 16 * n as u64 {
        let i = if k < n as u64 {
            k * len / n as u64
        } else {
            rng.below(len)
        };
        k += 1;
        let d = host4(routes[i as usize].0, &mut rng);
        if !unusable4(d) && seen.insert(d) {
            out.push(d);
        }
    }
    // Fisher-Yates.
    for i in (1..out.len()).rev() {
        out.swap(i, rng.below(i as u64 + 1) as usize);
    }
    out
}

pub(super) fn dests6(routes: &[(Prefix6, u32)], n: usize, seed: u64) -> Vec<u128> {
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

/// The flow of frame `i` to `dst` ([`frame4`]'s addresses and ports), as `bench
/// forward`'s design loop takes it: from a host on the generator's link, the UDP
/// ports by `i`.
pub(super) fn flow4(dst: u32, i: usize) -> Flow {
    Flow {
        src: u32::from(Ipv4Addr::new(198, 18, 0, 2 + (i % 250) as u8)),
        dst,
        sport: 1024 + (i % 60_000) as u16,
        dport: [53, 123, 443, 4789][i % 4],
    }
}

/// Ethernet + IPv4 + UDP to `dst` from a host on the generator's link, 64 bytes,
/// every checksum valid, TTL 64.
pub(crate) fn frame4(dst: u32, i: usize) -> Vec<u8> {
    frame4_flow(flow4(dst, i), i)
}

/// [`frame4`] to UDP port `dport`.
pub(crate) fn frame4_port(dst: u32, i: usize, dport: u16) -> Vec<u8> {
    frame4_flow(
        Flow {
            dport,
            ..flow4(dst, i)
        },
        i,
    )
}

/// The frame of flow `f`, IPv4 identification `i`.
fn frame4_flow(f: Flow, i: usize) -> Vec<u8> {
    let (src, dst) = (Ipv4Addr::from(f.src), Ipv4Addr::from(f.dst));
    let payload = FRAME - 14 - 20 - 8;
    let udp = wire::UdpRepr {
        src_port: f.sport,
        dst_port: f.dport,
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
pub(super) fn frame6(dst: u128, i: usize) -> Vec<u8> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use route::Lookup;

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
    fn spread_destinations_differ_and_cover_the_table() {
        // 4,096 /24s, one destination each (some routes unusable, 198.18.0.0/15's).
        let raw: Vec<(Prefix4, u32)> = (0..4096u32)
            .map(|i| (Prefix4::new(0xc600_0000 | i << 8, 24), i))
            .collect();
        let t = table4(&raw);
        let d = spread4(&t.routes, 4000, 7);
        assert_eq!(d.len(), 4000);
        assert_eq!(d.iter().collect::<HashSet<_>>().len(), 4000);
        assert!(d
            .iter()
            .all(|&a| !unusable4(a) && t.oracle.lookup(a).is_some()));
        let routes: HashSet<u32> = d.iter().map(|a| a >> 8).collect();
        assert!(routes.len() > 3900, "{} routes", routes.len());
        // Shuffled: not in address order.
        assert!(d.windows(2).filter(|w| w[0] < w[1]).count() < 3000);
        // More than the table's routes: still no two alike.
        let many = spread4(&t.routes, 10_000, 7);
        assert_eq!(many.iter().collect::<HashSet<_>>().len(), 10_000);
    }

    #[test]
    fn a_frame_carries_its_flow() {
        let f = frame4_port(u32::from(Ipv4Addr::new(203, 0, 113, 7)), 5, 9);
        let fl = flow4(u32::from(Ipv4Addr::new(203, 0, 113, 7)), 5);
        assert_eq!(f[26..30], fl.src.to_be_bytes());
        assert_eq!(f[30..34], fl.dst.to_be_bytes());
        assert_eq!(f[34..36], fl.sport.to_be_bytes());
        assert_eq!(f[36..38], 9u16.to_be_bytes());
    }
}
