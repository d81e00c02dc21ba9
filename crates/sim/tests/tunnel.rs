//! Scenario tests of IP tunnels (gif(4), gre(4)) through a router: two LANs joined
//! by a tunnel between their routers, whose outer packets cross a third router that
//! has no route to either LAN, for each kind and each pairing of inner and outer
//! family; what a tunnel does with packets too big for it, with keys that do not
//! match, with no tunnel at the far end, with an outer route through itself, and
//! with malformed encapsulations. Deterministic, in virtual time, with 1 and 2
//! workers.

use dev::mem::WireConfig;
use dev::{Duration, Queue};
use mbuf::Mbuf;
use net::tunnel::{TunnelKind, TunnelParams};
use net::IfIndex;
use sim::{HostId, HubId, Sim};
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

mod common;
use common::ping_n;

fn a4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn a6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

/// The network: `a` on LAN A behind `r1`, `b` on LAN B behind `r2`; `r1` and `r2`
/// reach each other through `m`, which routes the transit links only.
///
/// ```text
/// a --lanA-- r1 --t1-- m --t2-- r2 --lanB-- b
///            '======== tunnel ========'
/// ```
struct Net {
    s: Sim,
    a: HostId,
    b: HostId,
    r1: HostId,
    r2: HostId,
    m: HostId,
    la: HubId,
    t2: HubId,
    lb: HubId,
    /// The tunnels' interfaces on r1 and r2.
    tun: (IfIndex, IfIndex),
}

/// IPv4 and IPv6 addresses on a host's interface `i`.
fn addr6(s: &Sim, h: HostId, i: IfIndex, a: &str) {
    s.host(h).add_address6(i, a.parse().unwrap()).unwrap();
}

fn ifx(s: &Sim, h: HostId, k: usize) -> IfIndex {
    s.host(h).interfaces()[k].index
}

/// Builds the network with tunnels of `kind` (`keys`: r1's and r2's GRE keys)
/// whose outer packets are IPv6 if `outer6`; with `far_tunnel` false, r2 has none.
fn net(workers: usize, kind: (TunnelKind, TunnelKind), outer6: bool, far_tunnel: bool) -> Net {
    let mut s = Sim::new(41);
    let hubs: Vec<HubId> = (0..4).map(|_| s.add_hub(WireConfig::default())).collect();
    let [la, t1, t2, lb] = [hubs[0], hubs[1], hubs[2], hubs[3]];
    let a = s.add_host("a", workers);
    let r1 = s.add_host("r1", workers);
    let m = s.add_host("m", workers);
    let r2 = s.add_host("r2", workers);
    let b = s.add_host("b", workers);
    s.connect(a, la, "198.18.1.2/24");
    s.connect(r1, la, "198.18.1.1/24");
    s.connect(r1, t1, "198.18.10.1/24");
    s.connect(m, t1, "198.18.10.2/24");
    s.connect(m, t2, "198.18.20.1/24");
    s.connect(r2, t2, "198.18.20.2/24");
    s.connect(r2, lb, "198.18.2.1/24");
    s.connect(b, lb, "198.18.2.2/24");
    for (h, k, a) in [
        (a, 0, "2001:2:0:1::2/64"),
        (r1, 0, "2001:2:0:1::1/64"),
        (r1, 1, "2001:2:0:10::1/64"),
        (m, 0, "2001:2:0:10::2/64"),
        (m, 1, "2001:2:0:20::1/64"),
        (r2, 0, "2001:2:0:20::2/64"),
        (r2, 1, "2001:2:0:2::1/64"),
        (b, 0, "2001:2:0:2::2/64"),
    ] {
        let i = ifx(&s, h, k);
        addr6(&s, h, i, a);
    }
    for h in [r1, m, r2] {
        for i in s.host(h).interfaces() {
            s.host(h).set_forwarding(i.index, true, true).unwrap();
        }
    }
    // The transit links: r1 and r2 reach each other's through m.
    let via = |s: &Sim, h: HostId, dst: &str, gw: &str| {
        s.host(h)
            .add_route_via(dst.parse().unwrap(), gw.parse().unwrap())
            .unwrap();
    };
    via(&s, r1, "198.18.20.0/24", "198.18.10.2");
    via(&s, r1, "2001:2:0:20::/64", "2001:2:0:10::2");
    via(&s, r2, "198.18.10.0/24", "198.18.20.1");
    via(&s, r2, "2001:2:0:10::/64", "2001:2:0:20::1");
    // The hosts' default routers.
    for (h, gw4, gw6) in [
        (a, "198.18.1.1", "2001:2:0:1::1"),
        (b, "198.18.2.1", "2001:2:0:2::1"),
    ] {
        let st = s.host(h);
        st.set_default_gateway(Some(a4(gw4)));
        st.set_default_gateway6(Some((a6(gw6), st.interfaces()[0].index)));
    }
    // The tunnel, and the other LAN through it.
    let (e1, e2): (IpAddr, IpAddr) = if outer6 {
        (a6("2001:2:0:10::1").into(), a6("2001:2:0:20::2").into())
    } else {
        (a4("198.18.10.1").into(), a4("198.18.20.2").into())
    };
    let mk = |s: &Sim, h: HostId, k: TunnelKind, src, dst, me: (&str, &str)| {
        let st = s.host(h);
        let p = TunnelParams {
            kind: k,
            src,
            dst,
            mtu: None,
        };
        let t = st.add_tunnel("tun0", p).unwrap();
        st.add_address(t, me.0.parse().unwrap()).unwrap();
        st.add_address6(t, me.1.parse().unwrap()).unwrap();
        st.set_forwarding(t, true, true).unwrap();
        t
    };
    let t_r1 = mk(
        &s,
        r1,
        kind.0,
        e1,
        e2,
        ("198.18.99.1/30", "2001:2:0:99::1/64"),
    );
    via(&s, r1, "198.18.2.0/24", "198.18.99.2");
    via(&s, r1, "2001:2:0:2::/64", "2001:2:0:99::2");
    let t_r2 = if far_tunnel {
        let t = mk(
            &s,
            r2,
            kind.1,
            e2,
            e1,
            ("198.18.99.2/30", "2001:2:0:99::2/64"),
        );
        via(&s, r2, "198.18.1.0/24", "198.18.99.1");
        via(&s, r2, "2001:2:0:1::/64", "2001:2:0:99::1");
        t
    } else {
        IfIndex(0)
    };
    // Past duplicate address detection.
    s.run_for(Duration::from_secs(3));
    Net {
        s,
        a,
        b,
        r1,
        r2,
        m,
        la,
        t2,
        lb,
        tun: (t_r1, t_r2),
    }
}

/// `len` bytes over TCP from `a` to `b`'s `to`; what arrived.
fn tcp_transfer(n: &mut Net, to: SocketAddr, len: usize) -> Vec<u8> {
    let lis = n.s.host(n.b).tcp_listen(to, 4).unwrap();
    lis.set_nonblocking(true).unwrap();
    let c = n.s.host(n.a).tcp_connect_nonblocking(to).unwrap();
    n.s.run_for(Duration::from_millis(100));
    let (srv, _) = lis.accept().expect("the connection through the tunnel");
    srv.set_nonblocking(true).unwrap();
    c.set_nonblocking(true).unwrap();
    let data = pattern(len);
    let mut sent = 0;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    n.s.run_until(Duration::from_secs(60), |_| {
        while sent < data.len() {
            match (&c).write(&data[sent..]) {
                Ok(k) => sent += k,
                Err(_) => break,
            }
        }
        while let Ok(k) = (&srv).read(&mut buf) {
            if k == 0 {
                break;
            }
            got.extend_from_slice(&buf[..k]);
        }
        got.len() >= data.len()
    });
    got
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

fn netstat(n: &Net) -> String {
    let mut t = String::new();
    for (name, h) in [("r1", n.r1), ("m", n.m), ("r2", n.r2)] {
        t.push_str(name);
        t.push_str(":\n");
        n.s.host(h).stats().write_netstat(&mut t, false).unwrap();
    }
    t
}

/// Each kind, each outer family, each inner family: ping (IPv4 inside) and 1 MiB
/// of TCP byte-exact across the tunnel; the middle router sees the outer packets
/// only and drops nothing.
#[test]
fn gif_and_gre_carry_ping_and_tcp_for_every_pairing_of_families() {
    let kinds = [
        ("gif", TunnelKind::Gif),
        ("gre", TunnelKind::Gre { key: None }),
        ("gre key", TunnelKind::Gre { key: Some(42) }),
    ];
    for workers in [1, 2] {
        for (name, k) in kinds {
            for outer6 in [false, true] {
                let mut n = net(workers, (k, k), outer6, true);
                let what = format!(
                    "{name}, outer IPv{}, workers={workers}",
                    if outer6 { 6 } else { 4 }
                );
                let got = ping_n(&mut n.s, n.a, a4("198.18.2.2"), 5, 1000);
                assert_eq!(got, 5, "{what}\n{}", netstat(&n));
                for to in ["198.18.2.2:5001", "[2001:2:0:2::2]:5002"] {
                    let to: SocketAddr = to.parse().unwrap();
                    let got = tcp_transfer(&mut n, to, 1 << 20);
                    assert!(
                        got == pattern(1 << 20),
                        "{what}, to {to}: {} bytes\n{}",
                        got.len(),
                        netstat(&n)
                    );
                }
                let (r1, m, r2) = (
                    n.s.host(n.r1).stats(),
                    n.s.host(n.m).stats(),
                    n.s.host(n.r2).stats(),
                );
                for st in [&r1, &r2] {
                    assert!(
                        st.tunnel.ipackets > 700 && st.tunnel.opackets > 700,
                        "{what}: {:?}",
                        st.tunnel
                    );
                }
                // The middle router forwarded the outer packets and nothing else.
                let outer = if outer6 { m.ip6.forward } else { m.ip.forward };
                let other = if outer6 { m.ip.forward } else { m.ip6.forward };
                assert!(outer > 1400 && other == 0, "{what}\n{}", netstat(&n));
                // Drops: none but multicast listener reports for groups a host is
                // not in, and what the tunnel's MTU refused.
                let drops = |st: &net::stats::Stats| st.total_drops() - st.ip6.notmember;
                assert_eq!(drops(&m), 0, "{what}\n{}", netstat(&n));
                // The tunnel's MTU (1280 for gif, 1476 for GRE) is below the LANs':
                // our TCP sends IPv4 without Don't Fragment, so r1 fragments the
                // inner datagrams to fit it (never the outer ones: m saw none); over
                // IPv6 the first full-sized segments were answered with its MTU.
                assert!(r1.ip.fragmented > 0, "{what}: {:?}", r1.ip);
                assert_eq!(m.ip.fragments, 0, "{what}: {:?}", m.ip);
                assert!(r1.icmp6.outpkttoobig > 0, "{what}: {:?}", r1.icmp6);
                for st in [&r1, &r2] {
                    assert_eq!(drops(st), st.ip6.toobig, "{what}\n{}", netstat(&n));
                }
            }
        }
    }
}

/// The inner packet's TTL is decremented by the two routers at the tunnel's ends
/// only; the outer header starts at FreeBSD's 30 and is decremented by the middle
/// router.
#[test]
fn the_tunnel_counts_as_one_hop() {
    let mut n = net(1, (TunnelKind::Gif, TunnelKind::Gif), false, true);
    let mut transit = n.s.attach_raw(n.t2);
    let mut lan_b = n.s.attach_raw(n.lb);
    let u =
        n.s.host(n.a)
            .udp_bind("198.18.1.2:0".parse::<SocketAddr>().unwrap())
            .unwrap();
    u.send_to(b"ttl", "198.18.2.2:9".parse::<SocketAddr>().unwrap())
        .unwrap();
    n.s.run_for(Duration::from_millis(20));
    let frames = |q: &mut Box<dyn Queue>, now| {
        let mut v = Vec::new();
        q.rx_burst(now, &mut v, 256);
        v.iter().map(bytes).collect::<Vec<_>>()
    };
    let now = n.s.now();
    // Between m and r2: outer IPv4, protocol 4, from r1's end to r2's.
    let outer: Vec<(u8, u8)> = frames(&mut transit, now)
        .iter()
        .filter(|b| b.len() > 54 && b[12..14] == [0x08, 0x00] && b[23] == 4)
        .filter(|b| b[30..34] == [198, 18, 20, 2])
        .map(|b| (b[22], b[42]))
        .collect();
    assert_eq!(outer, vec![(29, 63)], "(outer TTL, inner TTL) after m");
    // On LAN B: the datagram as b gets it, 64 less r1 and r2.
    let inner: Vec<u8> = frames(&mut lan_b, now)
        .iter()
        .filter(|b| b.len() > 34 && b[12..14] == [0x08, 0x00] && b[23] == 17)
        .map(|b| b[22])
        .collect();
    assert_eq!(inner, vec![62]);
}

fn bytes(m: &Mbuf) -> Vec<u8> {
    let mut b = vec![0u8; m.len()];
    m.copydata(0, &mut b).unwrap();
    b
}

/// The outer header carries the inner packet's DSCP, not its ECN codepoint (RFC
/// 6040's compatibility mode), and the inner header crosses unchanged.
#[test]
fn the_outer_header_carries_the_inner_dscp() {
    for outer6 in [false, true] {
        let mut n = net(1, (TunnelKind::Gif, TunnelKind::Gif), outer6, true);
        let mut lan_a = n.s.attach_raw(n.la);
        let mut transit = n.s.attach_raw(n.t2);
        // A UDP datagram from a to b with DSCP 46 (EF) and ECT(1), to r1.
        let r1 = n.s.host(n.r1).interfaces()[0].mac;
        let mut f = Vec::new();
        f.extend_from_slice(&r1.0);
        f.extend_from_slice(&n.s.host(n.a).interfaces()[0].mac.0);
        f.extend_from_slice(&[0x08, 0x00]);
        let mut ip = vec![0x45, 0xb9, 0, 32, 0, 7, 0, 0, 64, 17, 0, 0];
        ip.extend_from_slice(&[198, 18, 1, 2, 198, 18, 2, 2]);
        let sum = !wire::checksum::data(&ip);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&[0x30, 0x39, 0, 9, 0, 12, 0, 0, b'd', b's', b'c', b'p']);
        let now = n.s.now();
        lan_a.tx_burst(now, &mut vec![Mbuf::from_slice(&f).unwrap()]);
        n.s.run_for(Duration::from_millis(20));
        let mut v = Vec::new();
        transit.rx_burst(n.s.now(), &mut v, 256);
        // (outer DSCP and ECN, inner TOS) of r1's packet into the tunnel.
        let seen: Vec<(u8, u8)> = v
            .iter()
            .map(bytes)
            .filter_map(|b| {
                if outer6 {
                    let tc = ((b[14] & 0x0f) << 4) | (b[15] >> 4);
                    let to_r2 = b.len() > 74 && b[38..54] == a6("2001:2:0:20::2").octets();
                    (to_r2 && b[12..14] == [0x86, 0xdd] && b[20] == 4).then(|| (tc, b[55]))
                } else {
                    (b.len() > 54
                        && b[12..14] == [0x08, 0x00]
                        && b[23] == 4
                        && b[30..34] == [198, 18, 20, 2])
                    .then(|| (b[15], b[35]))
                }
            })
            .collect();
        assert_eq!(seen, vec![(0xb8, 0xb9)], "outer6={outer6}");
    }
}

/// GRE keys that differ: r2 refuses r1's packets (counted), nothing crosses.
#[test]
fn gre_packets_with_another_key_are_refused() {
    let k = (
        TunnelKind::Gre { key: Some(7) },
        TunnelKind::Gre { key: Some(8) },
    );
    let mut n = net(1, k, false, true);
    assert_eq!(ping_n(&mut n.s, n.a, a4("198.18.2.2"), 3, 56), 0);
    let st = n.s.host(n.r2).stats();
    assert!(st.tunnel.nomatch >= 3, "{:?}", st.tunnel);
    assert_eq!(st.tunnel.ipackets, 0);
}

/// No tunnel at the far end: r2 answers the encapsulated packets as packets of an
/// unknown protocol (ICMP protocol unreachable; IPv6 Parameter Problem).
#[test]
fn no_tunnel_at_the_far_end_is_an_unknown_protocol() {
    for outer6 in [false, true] {
        let mut n = net(1, (TunnelKind::Gif, TunnelKind::Gif), outer6, false);
        assert_eq!(ping_n(&mut n.s, n.a, a4("198.18.2.2"), 3, 56), 0);
        let st = n.s.host(n.r2).stats();
        if outer6 {
            assert!(st.ip6.unknownhdr >= 3, "{:?}", st.ip6);
            assert!(st.icmp6.outparamprob >= 3, "{:?}", st.icmp6);
        } else {
            assert!(st.ip.noproto >= 3, "{:?}", st.ip);
            assert!(st.icmp.outunreach >= 3, "{:?}", st.icmp);
        }
        assert_eq!(st.tunnel.ipackets, 0);
    }
}

/// The outer destination routed through the tunnel itself: the packets are
/// dropped and counted, and the stack keeps running.
#[test]
fn an_outer_route_through_the_tunnel_is_refused() {
    let mut n = net(2, (TunnelKind::Gif, TunnelKind::Gif), false, true);
    let r1 = n.s.host(n.r1);
    r1.delete_route("198.18.20.0/24".parse().unwrap(), None)
        .unwrap();
    r1.add_route(route::RouteSpec {
        dst: "198.18.20.2/32".parse().unwrap(),
        gateway: None,
        ifindex: u32::from(n.tun.0 .0),
        kind: route::NhKind::Forward,
        mtu: 0,
        flags: route::RtFlags::STATIC,
    })
    .unwrap();
    assert_eq!(ping_n(&mut n.s, n.a, a4("198.18.2.2"), 3, 56), 0);
    let st = n.s.host(n.r1).stats();
    assert!(st.tunnel.looped >= 3, "{:?}", st.tunnel);
    // Restored, it carries again.
    let r1 = n.s.host(n.r1);
    r1.delete_route("198.18.20.2/32".parse().unwrap(), None)
        .unwrap();
    r1.add_route_via(
        "198.18.20.0/24".parse().unwrap(),
        "198.18.10.2".parse().unwrap(),
    )
    .unwrap();
    assert_eq!(ping_n(&mut n.s, n.a, a4("198.18.2.2"), 3, 56), 3);
}

/// Creating tunnels: what is refused, with a clear error.
#[test]
fn tunnel_creation_errors() {
    let mut s = Sim::new(5);
    let h = s.add_host("h", 1);
    let hub = s.add_hub(WireConfig::default());
    s.connect(h, hub, "198.18.0.1/24");
    let st = s.host(h);
    let p = |src: &str, dst: &str| TunnelParams {
        kind: TunnelKind::Gif,
        src: src.parse().unwrap(),
        dst: dst.parse().unwrap(),
        mtu: None,
    };
    let e = st
        .add_tunnel("gif0", p("198.18.0.1", "2001:2::1"))
        .unwrap_err();
    assert!(e.to_string().contains("different families"), "{e}");
    let e = st
        .add_tunnel("gif0", p("0.0.0.0", "198.18.5.1"))
        .unwrap_err();
    assert!(e.to_string().contains("cannot be a tunnel's source"), "{e}");
    let e = st
        .add_tunnel("gif0", p("198.18.0.1", "224.0.0.1"))
        .unwrap_err();
    assert!(e.to_string().contains("destination"), "{e}");
    let e = st
        .add_tunnel(
            "gif0",
            TunnelParams {
                mtu: Some(500),
                ..p("198.18.0.1", "198.18.5.1")
            },
        )
        .unwrap_err();
    assert!(e.to_string().contains("MTU 500"), "{e}");
    let t = st
        .add_tunnel("gif0", p("198.18.0.1", "198.18.5.1"))
        .unwrap();
    assert_eq!(st.interfaces()[t.get()].mtu, 1280);
    let e = st
        .add_tunnel("gif1", p("198.18.0.1", "198.18.5.1"))
        .unwrap_err();
    assert!(e.to_string().contains("gif0 has the tunnel"), "{e}");
    let e = st
        .add_tunnel("gif0", p("198.18.0.1", "198.18.6.1"))
        .unwrap_err();
    assert!(e.to_string().contains("exists already"), "{e}");
    // GRE tunnels between the same ends differ by key.
    let gre = |key| TunnelParams {
        kind: TunnelKind::Gre { key },
        ..p("198.18.0.1", "198.18.5.1")
    };
    let g = st.add_tunnel("gre0", gre(None)).unwrap();
    assert_eq!(st.interfaces()[g.get()].mtu, 1476);
    st.add_tunnel("gre1", gre(Some(1))).unwrap();
    assert!(st.add_tunnel("gre2", gre(Some(1))).is_err());
    assert_eq!(st.tunnels().len(), 3);
}

/// An outer IPv4 packet from r1's tunnel end to r2's, protocol `proto`, carrying
/// `payload`, in a frame for r2.
fn outer_frame(n: &Net, proto: u8, payload: &[u8]) -> Mbuf {
    let r2 = n.s.host(n.r2).interfaces()[0].mac;
    let mut f = Vec::new();
    f.extend_from_slice(&r2.0);
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x99]);
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (20 + payload.len()) as u16;
    let mut ip = vec![0x45, 0, 0, 0, 0, 1, 0, 0, 64, proto, 0, 0];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&[198, 18, 10, 1, 198, 18, 20, 2]);
    let sum = !wire::checksum::data(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(payload);
    Mbuf::from_slice(&f).unwrap()
}

/// An inner IPv4 echo request from a to b.
fn inner_echo() -> Vec<u8> {
    let mut icmp = vec![8, 0, 0, 0, 0, 1, 0, 1, 1, 2, 3, 4];
    let sum = !wire::checksum::data(&icmp);
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    let total = (20 + icmp.len()) as u16;
    let mut ip = vec![0x45, 0, 0, 0, 0, 2, 0, 0, 64, 1, 0, 0];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&[198, 18, 1, 2, 198, 18, 2, 2]);
    let sum = !wire::checksum::data(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    ip.extend_from_slice(&icmp);
    ip
}

/// Hand-made encapsulations at r2: well-formed ones are taken (a GRE checksum that
/// verifies too), malformed ones counted and dropped, the stack unharmed.
#[test]
fn malformed_encapsulations_are_counted() {
    let gre = TunnelKind::Gre { key: None };
    let mut n = net(1, (gre, gre), false, true);
    let mut raw = n.s.attach_raw(n.t2);
    let inner = inner_echo();
    let with_gre = |hdr: &[u8], body: &[u8]| {
        let mut v = hdr.to_vec();
        v.extend_from_slice(body);
        v
    };
    // A GRE header with a checksum over header and payload.
    let mut csum = with_gre(&[0x80, 0, 0x08, 0x00, 0, 0, 0, 0], &inner);
    let s = !wire::checksum::data(&csum);
    csum[4..6].copy_from_slice(&s.to_be_bytes());
    let mut bad_csum = csum.clone();
    bad_csum[4] ^= 0xff;
    let cases: Vec<(&str, u8, Vec<u8>)> = vec![
        ("plain", 47, with_gre(&[0, 0, 0x08, 0x00], &inner)),
        ("checksummed", 47, csum),
        ("bad checksum", 47, bad_csum),
        ("version 1", 47, with_gre(&[0, 1, 0x08, 0x00], &inner)),
        ("routing bit", 47, with_gre(&[0x40, 0, 0x08, 0x00], &inner)),
        ("truncated", 47, vec![0x20, 0]),
        (
            "ethernet payload",
            47,
            with_gre(&[0, 0, 0x65, 0x58], &inner),
        ),
        (
            "IPv6 said, IPv4 inside",
            47,
            with_gre(&[0, 0, 0x86, 0xdd], &inner),
        ),
        (
            "a key r2 has no tunnel for",
            47,
            with_gre(&[0x20, 0, 0x08, 0x00, 0, 0, 0, 9], &inner),
        ),
    ];
    let mut v = Vec::new();
    for (_, proto, payload) in &cases {
        v.push(outer_frame(&n, *proto, payload));
    }
    raw.tx_burst(n.s.now(), &mut v);
    n.s.run_for(Duration::from_millis(50));
    let st = n.s.host(n.r2).stats();
    // Taken: the plain and the checksummed one, each answered by b through the
    // tunnel.
    assert_eq!(st.tunnel.ipackets, 2, "{:?}", st.tunnel);
    assert_eq!(st.tunnel.badhdr, 5, "{:?}", st.tunnel);
    assert_eq!(st.tunnel.noproto, 1, "{:?}", st.tunnel);
    assert_eq!(st.tunnel.nomatch, 1, "{:?}", st.tunnel);
    assert_eq!(n.s.host(n.b).stats().icmp.inecho, 2);
    // Still carrying.
    assert_eq!(ping_n(&mut n.s, n.a, a4("198.18.2.2"), 3, 56), 3);
}
