//! What a router does with hostile IPv4 and IPv6 input (issue 29): source-routed
//! packets are dropped and counted, malformed options are answered with a
//! parameter problem pointing at the bad octet, well-formed Record Route still
//! passes, packets that claim the router's own address as their source are neither
//! forwarded nor delivered to it (the LAND attack), and ARP that claims a subnet's network or broadcast address teaches
//! nothing. Frames are written by hand on a raw port, as an attacker would.

use dev::mem::WireConfig;
use dev::{Duration, Queue};
use mbuf::Mbuf;
use net::iface::IfIndex;
use sim::{HostId, Sim};
use std::net::{Ipv4Addr, Ipv6Addr};
use wire::EthernetAddress;

mod common;
use common::{ip4_udp_with_options as ip4, ping_n};

/// The attacker on the raw port: 198.18.1.2 / 2001:2:1::2.
const X: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xaa]);
const X4: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 2);
const B4: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 2);

/// A raw port (X) and router R (198.18.1.1/24) on a hub; R — B over a link
/// (198.18.2.0/24); both families, R forwarding, R knowing X's link address.
struct Rig {
    s: Sim,
    port: Box<dyn Queue>,
    r: HostId,
    b: HostId,
    r_mac: EthernetAddress,
    r_if: IfIndex,
}

fn rig() -> Rig {
    let mut s = Sim::new(29);
    let hub = s.add_hub(WireConfig::default());
    let r = s.add_host("r", 1);
    let b = s.add_host("b", 1);
    let r_if = s.connect(r, hub, "198.18.1.1/24");
    let (r2, b2) = s.link(
        r,
        "198.18.2.1/24",
        b,
        "198.18.2.2/24",
        WireConfig::default(),
    );
    let six = |h: HostId, i: IfIndex, a: &str| s.host(h).add_address6(i, a.parse().unwrap());
    six(r, r_if, "2001:2:1::1/64").unwrap();
    six(r, r2, "2001:2:2::1/64").unwrap();
    six(b, b2, "2001:2:2::2/64").unwrap();
    for i in s.host(r).interfaces() {
        s.host(r).set_forwarding(i.index, true, true).unwrap();
    }
    s.host(b)
        .set_default_gateway(Some(Ipv4Addr::new(198, 18, 2, 1)));
    let port = s.attach_raw(hub);
    let ifp = s.host(r).config().ifaces[r_if.get()].clone();
    ifp.arp.insert_static(X4, X);
    ifp.nd6.insert_static("2001:2:1::2".parse().unwrap(), X);
    let r_mac = ifp.mac;
    // Duplicate address detection.
    s.run_for(Duration::from_secs(3));
    let mut rig = Rig {
        s,
        port,
        r,
        b,
        r_mac,
        r_if,
    };
    sniff(&mut rig);
    rig
}

fn ether(dst: EthernetAddress, ty: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = dst.0.to_vec();
    f.extend_from_slice(&X.0);
    f.extend_from_slice(&ty.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// An IPv6 UDP datagram from `src` to `dst` (the router does not look at its
/// checksum).
fn ip6(src: Ipv6Addr, dst: Ipv6Addr) -> Vec<u8> {
    let udp = [0x30, 0x39, 0, 9, 0, 12, 0, 0, b'h', b'e', b'y', b'!'];
    let mut p = vec![0x60, 0, 0, 0, 0, udp.len() as u8, 17, 64];
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(&udp);
    p
}

fn send(r: &mut Rig, frame: Vec<u8>) {
    let now = r.s.now();
    r.port
        .tx_burst(now, &mut vec![Mbuf::from_slice(&frame).unwrap()]);
    r.s.run_for(Duration::from_millis(20));
}

fn send4(r: &mut Rig, src: Ipv4Addr, dst: Ipv4Addr, opts: &[u8]) {
    let f = ether(r.r_mac, 0x0800, &ip4(src, dst, opts));
    send(r, f);
}

/// Frames the raw port received since last asked.
fn sniff(r: &mut Rig) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    while r.port.rx_burst(r.s.now(), &mut v, 256) > 0 {}
    v.iter().map(|m| m.to_vec()).collect()
}

/// The ICMPv4 messages R sent to X: (type, code, second word, quoted source).
fn icmp_to_x(r: &mut Rig) -> Vec<(u8, u8, [u8; 4], Ipv4Addr)> {
    sniff(r)
        .into_iter()
        .filter(|f| f.len() > 14 + 20 + 8 + 20 && f[12..14] == [8, 0] && f[14 + 9] == 1)
        .map(|f| {
            let ip = &f[14..];
            let hl = usize::from(ip[0] & 15) * 4;
            let m = &ip[hl..];
            let q = &m[8..];
            (
                m[0],
                m[1],
                [m[4], m[5], m[6], m[7]],
                Ipv4Addr::new(q[12], q[13], q[14], q[15]),
            )
        })
        .collect()
}

#[test]
fn source_routed_packets_are_dropped_and_counted_not_forwarded() {
    let mut r = rig();
    let b_before = r.s.host(r.b).stats().ip.total;
    // LSRR through R towards B, B as the destination; then SSRR addressed to R
    // naming B as the next hop; then LSRR after a NOP, for R itself (route done).
    send4(&mut r, X4, B4, &[131, 7, 4, 198, 18, 2, 2, 0]);
    let r1 = Ipv4Addr::new(198, 18, 1, 1);
    send4(&mut r, X4, r1, &[137, 7, 4, 198, 18, 2, 2, 0]);
    send4(&mut r, X4, r1, &[1, 131, 7, 8, 198, 18, 1, 1]);
    let st = r.s.host(r.r).stats();
    assert_eq!(st.ip.srcroute, 3, "{:?}", st.ip);
    assert_eq!(st.ip.forward, 0);
    assert_eq!(st.ip.delivered, 0, "not delivered to R either");
    assert_eq!(r.s.host(r.b).stats().ip.total, b_before, "B got nothing");
    // The same datagram without the option goes through (and B's port
    // unreachable back to X).
    send4(&mut r, X4, B4, &[]);
    assert_eq!(r.s.host(r.b).stats().ip.total, b_before + 1);
    assert_eq!(r.s.host(r.r).stats().ip.forward, 2);
}

#[test]
fn malformed_options_get_a_parameter_problem_pointing_at_the_bad_octet() {
    let mut r = rig();
    // Record Route claiming 40 bytes in the 8 the header has: its length octet,
    // octet 21, is wrong.
    send4(&mut r, X4, B4, &[7, 40, 4, 0, 0, 0, 0, 0]);
    // Record Route whose pointer (octet 22) is below 4.
    send4(&mut r, X4, B4, &[7, 7, 3, 0, 0, 0, 0, 0]);
    // A NOP, then an unknown option of length 1 (its length, octet 22).
    send4(&mut r, X4, B4, &[1, 0x99, 1, 0]);
    // Timestamp with an unknown flag (octet 23).
    send4(&mut r, X4, B4, &[68, 8, 5, 2, 0, 0, 0, 0]);
    let got = icmp_to_x(&mut r);
    assert_eq!(
        got,
        vec![
            (12, 0, [21, 0, 0, 0], X4),
            (12, 0, [22, 0, 0, 0], X4),
            (12, 0, [22, 0, 0, 0], X4),
            (12, 0, [23, 0, 0, 0], X4),
        ],
        "a parameter problem for each, pointing at the offending octet"
    );
    let st = r.s.host(r.r).stats();
    assert_eq!(st.ip.badoptions, 4);
    assert_eq!(st.icmp.outparamprob, 4);
    assert_eq!(st.ip.forward, 0, "none forwarded");
}

#[test]
fn well_formed_record_route_timestamp_and_nops_are_still_forwarded() {
    let mut r = rig();
    let b_before = r.s.host(r.b).stats().ip.total;
    // NOP, Record Route with room for one address.
    send4(&mut r, X4, B4, &[1, 7, 7, 4, 0, 0, 0, 0]);
    // A full Record Route (pointer past its length), and a Timestamp with room.
    send4(&mut r, X4, B4, &[7, 7, 8, 1, 2, 3, 4, 0]);
    send4(&mut r, X4, B4, &[68, 8, 5, 0, 0, 0, 0, 0]);
    // Router Alert (RFC 2113), unknown to the walk: passed.
    send4(&mut r, X4, B4, &[0x94, 4, 0, 0]);
    let st = r.s.host(r.r).stats();
    assert_eq!(st.ip.badoptions, 0, "{:?}", st.ip);
    assert_eq!(
        r.s.host(r.b).stats().ip.total,
        b_before + 4,
        "B got all four"
    );
    // What came back to X is B's port unreachables, forwarded by R.
    let back = icmp_to_x(&mut r);
    assert_eq!(back.len(), 4);
    assert!(back.iter().all(|m| (m.0, m.1) == (3, 3)), "{back:?}");
}

#[test]
fn packets_with_our_own_source_address_are_not_forwarded() {
    let mut r = rig();
    let b_before = r.s.host(r.b).stats();
    // R's address on X's network, and on B's, as the source of packets to B.
    send4(&mut r, Ipv4Addr::new(198, 18, 1, 1), B4, &[]);
    send4(&mut r, Ipv4Addr::new(198, 18, 2, 1), B4, &[]);
    let b6: Ipv6Addr = "2001:2:2::2".parse().unwrap();
    for src in ["2001:2:1::1", "2001:2:2::1"] {
        let f = ether(r.r_mac, 0x86dd, &ip6(src.parse().unwrap(), b6));
        send(&mut r, f);
    }
    let st = r.s.host(r.r).stats();
    assert_eq!(st.ip.localsrc, 2, "{:?}", st.ip);
    assert_eq!(st.ip6.localsrc, 2, "{:?}", st.ip6);
    assert_eq!((st.ip.forward, st.ip6.forward), (0, 0));
    let b_after = r.s.host(r.b).stats();
    assert_eq!(b_after.ip.total, b_before.ip.total, "B got nothing");
    // From X's own address both go through.
    send4(&mut r, X4, B4, &[]);
    let f = ether(r.r_mac, 0x86dd, &ip6("2001:2:1::2".parse().unwrap(), b6));
    send(&mut r, f);
    assert_eq!(r.s.host(r.b).stats().ip.total, b_before.ip.total + 1);
    // (B drops the IPv6 one for its checksum, silently: one forwarded.)
    assert_eq!(r.s.host(r.r).stats().ip6.forward, 1);
    // What R sends itself still works: to B, and to its own addresses.
    let (s, rr) = (&mut r.s, r.r);
    assert_eq!(ping_n(s, rr, B4, 2, 32), 2);
    assert_eq!(ping_n(s, rr, Ipv4Addr::new(198, 18, 2, 1), 2, 32), 2);
    assert_eq!(ping_n(s, rr, Ipv4Addr::new(198, 18, 1, 1), 2, 32), 2);
    assert_eq!(r.s.host(r.r).stats().ip.localsrc, 2);
}

/// A TCP SYN from `sport` to `dport` (sequence 1, no options), its checksum made
/// over `pseudo` (the family's pseudo-header without the length and protocol).
fn tcp_syn(pseudo: &[u8], sport: u16, dport: u16) -> Vec<u8> {
    let mut t = Vec::new();
    t.extend_from_slice(&sport.to_be_bytes());
    t.extend_from_slice(&dport.to_be_bytes());
    t.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
    let mut ps = pseudo.to_vec();
    ps.extend_from_slice(&[0, 6, 0, t.len() as u8]);
    ps.extend_from_slice(&t);
    let sum = !wire::checksum::data(&ps);
    t[16..18].copy_from_slice(&sum.to_be_bytes());
    t
}

/// An IPv4 TCP SYN from `src`:`sport` to `dst`:`dport`, checksums right.
fn syn4(src: Ipv4Addr, sport: u16, dst: Ipv4Addr, dport: u16) -> Vec<u8> {
    let pseudo = [src.octets(), dst.octets()].concat();
    let t = tcp_syn(&pseudo, sport, dport);
    let mut p = vec![0x45, 0, 0, 20 + t.len() as u8, 0, 1, 0, 0, 64, 6, 0, 0];
    p.extend_from_slice(&pseudo);
    let sum = !wire::checksum::data(&p);
    p[10..12].copy_from_slice(&sum.to_be_bytes());
    p.extend_from_slice(&t);
    p
}

/// An IPv6 TCP SYN from `src`:`sport` to `dst`:`dport`, its checksum right.
fn syn6(src: Ipv6Addr, sport: u16, dst: Ipv6Addr, dport: u16) -> Vec<u8> {
    let pseudo = [src.octets(), dst.octets()].concat();
    let t = tcp_syn(&pseudo, sport, dport);
    let mut p = vec![0x60, 0, 0, 0, 0, t.len() as u8, 6, 64];
    p.extend_from_slice(&pseudo);
    p.extend_from_slice(&t);
    p
}

#[test]
fn a_land_syn_from_our_own_address_and_port_is_dropped_not_answered() {
    // The LAND attack: a SYN whose source is the destination, address and port,
    // to a listening port. R neither answers it (to itself, over and over) nor
    // hands it to TCP; Linux drops it as a martian source, FreeBSD's tcp_input as
    // LAND.
    let mut r = rig();
    let h = r.s.host(r.r);
    let _l4 = h
        .tcp_listen(std::net::SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 4)
        .unwrap();
    let _l6 = h
        .tcp_listen(
            std::net::SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 80, 0, 0),
            4,
        )
        .unwrap();
    let before = r.s.host(r.r).stats();
    let r1 = Ipv4Addr::new(198, 18, 1, 1);
    let f = ether(r.r_mac, 0x0800, &syn4(r1, 80, r1, 80));
    send(&mut r, f);
    let r61: Ipv6Addr = "2001:2:1::1".parse().unwrap();
    let f = ether(r.r_mac, 0x86dd, &syn6(r61, 80, r61, 80));
    send(&mut r, f);
    // R's address on B's network as the source, to its address on X's.
    let r2 = Ipv4Addr::new(198, 18, 2, 1);
    let f = ether(r.r_mac, 0x0800, &syn4(r2, 1234, r1, 80));
    send(&mut r, f);
    // A broadcast claiming R's address: R's own come back, or a spoof.
    let bcast = ip4(r1, Ipv4Addr::new(198, 18, 1, 255), &[]);
    let f = ether(EthernetAddress::BROADCAST, 0x0800, &bcast);
    send(&mut r, f);
    let st = r.s.host(r.r).stats();
    assert_eq!(st.ip.localsrc, before.ip.localsrc + 3, "{:?}", st.ip);
    assert_eq!(st.ip6.localsrc, before.ip6.localsrc + 1, "{:?}", st.ip6);
    assert_eq!(st.ip.delivered, before.ip.delivered, "nothing delivered");
    assert_eq!(st.tcp.rcvtotal, before.tcp.rcvtotal, "TCP saw none");
    assert_eq!(st.tcp.sndtotal, before.tcp.sndtotal, "and answered none");
    assert!(sniff(&mut r).is_empty(), "nothing on the wire either");
    // A SYN from X to the same port is answered (SYN-ACK), over both families.
    let f = ether(r.r_mac, 0x0800, &syn4(X4, 80, r1, 80));
    send(&mut r, f);
    let x6: Ipv6Addr = "2001:2:1::2".parse().unwrap();
    let f = ether(r.r_mac, 0x86dd, &syn6(x6, 80, r61, 80));
    send(&mut r, f);
    let got = sniff(&mut r);
    let synack = |f: &Vec<u8>, ty: [u8; 2], at: usize| f[12..14] == ty && f[at] == 0x12;
    assert!(got.iter().any(|f| synack(f, [8, 0], 14 + 20 + 13)), "v4");
    assert!(
        got.iter().any(|f| synack(f, [0x86, 0xdd], 14 + 40 + 13)),
        "v6"
    );
    // What R sends itself to itself still arrives: over the loopback queue.
    let (s, rr) = (&mut r.s, r.r);
    assert_eq!(ping_n(s, rr, r1, 2, 32), 2);
    assert_eq!(ping_n(s, rr, r2, 2, 32), 2);
    let st = r.s.host(r.r).stats();
    assert_eq!(st.ip.localsrc, before.ip.localsrc + 3, "{:?}", st.ip);
}

/// An ARP packet from X: `op` 1 request, 2 reply; sender `spa`, target `tpa`.
fn arp(r: &Rig, op: u8, spa: Ipv4Addr, tpa: Ipv4Addr) -> Vec<u8> {
    let mut a = vec![0, 1, 8, 0, 6, 4, 0, op];
    a.extend_from_slice(&X.0);
    a.extend_from_slice(&spa.octets());
    a.extend_from_slice(&if op == 1 { [0; 6] } else { r.r_mac.0 });
    a.extend_from_slice(&tpa.octets());
    let dst = if op == 1 {
        EthernetAddress::BROADCAST
    } else {
        r.r_mac
    };
    ether(dst, 0x0806, &a)
}

fn arp_entry(r: &Rig, i: IfIndex, a: Ipv4Addr) -> bool {
    r.s.host(r.r).config().ifaces[i.get()]
        .arp
        .entries()
        .iter()
        .any(|e| e.ip == a)
}

#[test]
fn arp_claiming_a_subnets_network_or_broadcast_address_creates_no_entry() {
    let mut r = rig();
    let us = Ipv4Addr::new(198, 18, 1, 1);
    let net = Ipv4Addr::new(198, 18, 1, 0);
    let bcast = Ipv4Addr::new(198, 18, 1, 255);
    for op in [1, 2] {
        for spa in [net, bcast] {
            let f = arp(&r, op, spa, us);
            send(&mut r, f);
        }
    }
    assert!(!arp_entry(&r, r.r_if, net), "no entry for the network");
    assert!(!arp_entry(&r, r.r_if, bcast), "no entry for the broadcast");
    let st = r.s.host(r.r).stats();
    assert_eq!(st.arp.badspa, 4, "{:?}", st.arp);
    assert_eq!(st.arp.txreplies, 0, "and no answer to them");
    // An ordinary neighbour is still learnt.
    let f = arp(&r, 1, Ipv4Addr::new(198, 18, 1, 3), us);
    send(&mut r, f);
    assert!(arp_entry(&r, r.r_if, Ipv4Addr::new(198, 18, 1, 3)));
    assert_eq!(r.s.host(r.r).stats().arp.txreplies, 1);
}

#[test]
fn on_a_slash_31_both_addresses_are_neighbours() {
    // RFC 3021: a /31 has no network or broadcast address; the "network" address
    // is the other end's.
    let mut s = Sim::new(31);
    let hub = s.add_hub(WireConfig::default());
    let r = s.add_host("r", 1);
    let i = s.connect(r, hub, "198.18.3.1/31");
    let mut port = s.attach_raw(hub);
    let r_mac = s.host(r).config().ifaces[i.get()].mac;
    s.run_for(Duration::from_millis(100));
    let peer = Ipv4Addr::new(198, 18, 3, 0);
    let mut a = vec![0, 1, 8, 0, 6, 4, 0, 1];
    a.extend_from_slice(&X.0);
    a.extend_from_slice(&peer.octets());
    a.extend_from_slice(&[0; 6]);
    a.extend_from_slice(&Ipv4Addr::new(198, 18, 3, 1).octets());
    let mut f = EthernetAddress::BROADCAST.0.to_vec();
    f.extend_from_slice(&X.0);
    f.extend_from_slice(&[8, 6]);
    f.extend_from_slice(&a);
    let now = s.now();
    port.tx_burst(now, &mut vec![Mbuf::from_slice(&f).unwrap()]);
    s.run_for(Duration::from_millis(20));
    let ifp = s.host(r).config().ifaces[i.get()].clone();
    assert!(ifp.arp.entries().iter().any(|e| e.ip == peer));
    assert_eq!(s.host(r).stats().arp.badspa, 0);
    assert_eq!(s.host(r).stats().arp.txreplies, 1);
    let _ = r_mac;
}

/// `p` (an IPv4 packet from [`ip4`]) with TTL `ttl`, its header checksum made again.
fn with_ttl(mut p: Vec<u8>, ttl: u8) -> Vec<u8> {
    p[8] = ttl;
    p[10..12].copy_from_slice(&[0, 0]);
    let hl = usize::from(p[0] & 15) * 4;
    let sum = !wire::checksum::data(&p[..hl]);
    p[10..12].copy_from_slice(&sum.to_be_bytes());
    p
}

#[test]
fn directed_broadcasts_are_not_forwarded_but_a_slash_31s_addresses_are() {
    // RFC 2644: a router does not forward a directed broadcast by default. B's
    // network 198.18.2.0/24 is on R's other link: its broadcast address, and its
    // network address (the old all-zeros broadcast), are refused, counted.
    let mut r = rig();
    // C beyond two /31 links (RFC 3021: no network or broadcast address there).
    let c = r.s.add_host("c", 1);
    r.s.link(
        r.r,
        "198.18.4.1/31",
        c,
        "198.18.4.0/31",
        WireConfig::default(),
    );
    r.s.link(
        r.r,
        "198.18.5.0/31",
        c,
        "198.18.5.1/31",
        WireConfig::default(),
    );
    r.s.host(c)
        .set_default_gateway(Some(Ipv4Addr::new(198, 18, 4, 1)));
    for i in r.s.host(r.r).interfaces() {
        r.s.host(r.r).set_forwarding(i.index, true, true).unwrap();
    }
    r.s.run_for(Duration::from_secs(3));
    sniff(&mut r);
    let b_before = r.s.host(r.b).stats().ip.total;
    send4(&mut r, X4, Ipv4Addr::new(198, 18, 2, 255), &[]);
    send4(&mut r, X4, Ipv4Addr::new(198, 18, 2, 0), &[]);
    let st = r.s.host(r.r).stats();
    assert_eq!(st.ip.bcastfwd, 2, "{:?}", st.ip);
    assert_eq!(st.ip.forward, 0);
    assert_eq!(r.s.host(r.b).stats().ip.total, b_before, "B got neither");
    assert!(icmp_to_x(&mut r).is_empty(), "and no error about them");
    // The network address of X's own subnet is refused as well (it would go
    // back out of the link it came in on).
    send4(&mut r, X4, Ipv4Addr::new(198, 18, 1, 0), &[]);
    assert_eq!(r.s.host(r.r).stats().ip.bcastfwd, 3);
    // The broadcast of X's own subnet is a broadcast to R, as before: delivered,
    // not forwarded (UDP port 9 is closed: counted, unanswered).
    send4(&mut r, X4, Ipv4Addr::new(198, 18, 1, 255), &[]);
    let st = r.s.host(r.r).stats();
    assert_eq!(st.udp.noportbcast, 1, "{:?}", st.udp);
    assert_eq!(st.ip.bcastfwd, 3);
    // A host on B's network is forwarded to, as ever.
    send4(&mut r, X4, B4, &[]);
    assert_eq!(r.s.host(r.b).stats().ip.total, b_before + 1);
    // Both addresses of a /31 are hosts': forwarded.
    let c_before = r.s.host(c).stats().ip.total;
    send4(&mut r, X4, Ipv4Addr::new(198, 18, 4, 0), &[]);
    send4(&mut r, X4, Ipv4Addr::new(198, 18, 5, 1), &[]);
    let st = r.s.host(r.r).stats();
    assert_eq!(st.ip.bcastfwd, 3, "{:?}", st.ip);
    assert_eq!(r.s.host(c).stats().ip.total, c_before + 2, "C got both");
}

#[test]
fn no_icmp_error_about_a_datagram_to_a_directed_broadcast_or_from_one() {
    // RFC 1122 §3.2.2, RFC 1812 §4.3.2.7: no ICMP error about a datagram sent to a
    // broadcast address (a directed broadcast of any of R's subnets, not only the
    // arrival link's) or from an address that names no single host.
    let mut r = rig();
    let r1 = Ipv4Addr::new(198, 18, 1, 1);
    let f = |dst: Ipv4Addr| with_ttl(ip4(X4, dst, &[]), 1);
    // TTL 1 to B's network's broadcast and network addresses: no time exceeded.
    for dst in [Ipv4Addr::new(198, 18, 2, 255), Ipv4Addr::new(198, 18, 2, 0)] {
        let p = ether(r.r_mac, 0x0800, &f(dst));
        send(&mut r, p);
    }
    // A malformed option in a datagram to B's network's broadcast address: no
    // parameter problem.
    send4(
        &mut r,
        X4,
        Ipv4Addr::new(198, 18, 2, 255),
        &[7, 40, 4, 0, 0, 0, 0, 0],
    );
    // To a closed UDP port of R, from B's network's broadcast address, and sent to
    // the broadcast address of X's: no port unreachable.
    send4(&mut r, Ipv4Addr::new(198, 18, 2, 255), r1, &[]);
    send4(&mut r, X4, Ipv4Addr::new(198, 18, 1, 255), &[]);
    let st = r.s.host(r.r).stats();
    assert_eq!(
        (
            st.icmp.outtimxceed,
            st.icmp.outparamprob,
            st.icmp.outunreach
        ),
        (0, 0, 0),
        "{:?}",
        st.icmp
    );
    assert!(icmp_to_x(&mut r).is_empty());
    // The same to a single host are answered: time exceeded, port unreachable.
    let p = ether(r.r_mac, 0x0800, &f(B4));
    send(&mut r, p);
    send4(&mut r, X4, r1, &[]);
    let got: Vec<_> = icmp_to_x(&mut r).iter().map(|m| (m.0, m.1)).collect();
    assert_eq!(got, vec![(11, 0), (3, 3)]);
}

#[test]
fn directed_broadcasts_are_forwarded_as_link_broadcasts_when_the_knob_is_on() {
    // `net.inet.ip.directed-broadcast=1`: FreeBSD's ip_output then sends a
    // directed broadcast to the link's broadcast address. B gets both forms
    // (it answers no ARP for them: only a link broadcast reaches it).
    let mut r = rig();
    r.s.host(r.r).set_directed_broadcast(true);
    r.s.run_for(Duration::from_secs(3));
    let b_before = r.s.host(r.b).stats().ip.total;
    send4(&mut r, X4, Ipv4Addr::new(198, 18, 2, 255), &[]);
    send4(&mut r, X4, Ipv4Addr::new(198, 18, 2, 0), &[]);
    r.s.run_for(Duration::from_millis(50));
    let st = r.s.host(r.r).stats();
    assert_eq!(st.ip.bcastfwd, 0, "{:?}", st.ip);
    assert_eq!(st.ip.forward, 2, "{:?}", st.ip);
    assert_eq!(r.s.host(r.b).stats().ip.total, b_before + 2, "B got both");
    // Off again: dropped and counted, as by default.
    r.s.host(r.r).set_directed_broadcast(false);
    send4(&mut r, X4, Ipv4Addr::new(198, 18, 2, 255), &[]);
    r.s.run_for(Duration::from_millis(50));
    assert_eq!(r.s.host(r.r).stats().ip.bcastfwd, 1);
    assert_eq!(r.s.host(r.b).stats().ip.total, b_before + 2);
}
