//! `ipfw fwd` (issue 47): a router's input rule that names a next hop sends the
//! packet there instead of by its route, or to the router's own stack when the next
//! hop is one of its addresses; a packet no rule tags is routed as before. Both
//! families, in virtual time.

use dev::mem::WireConfig;
use dev::Duration;
use net::ipfw::Ipfw;
use net::IfIndex;
use sim::{HostId, Sim};
use std::net::{IpAddr, SocketAddr};

/// a — r — b, and r — c: r routes `far` (v4 198.18.5.0/24, v6 2001:2:5::/48) by
/// b; b and c both hold the addresses `far` names, so whichever receives a
/// datagram tells which way the router sent it.
struct Lab {
    s: Sim,
    a: HostId,
    r: HostId,
    b: HostId,
    c: HostId,
}

const FAR4: [&str; 2] = ["198.18.5.9", "198.18.5.10"];
const FAR6: [&str; 2] = ["2001:2:5::9", "2001:2:5::10"];

fn lab(rules: &str) -> Lab {
    let (mut s, a, r, b) = sim::routed(47, 1);
    let c = s.add_host("c", 1);
    let (r3, c3) = s.link(
        r,
        "198.18.3.1/24",
        c,
        "198.18.3.2/24",
        WireConfig::default(),
    );
    s.host(r).set_forwarding(r3, true, true).unwrap();
    s.host(c)
        .set_default_gateway(Some("198.18.3.1".parse().unwrap()));
    // IPv6 beside IPv4 on every link: 2001:2:N::/64 on link N.
    let v6 = |s: &Sim, h: HostId, i: IfIndex, a: &str| {
        s.host(h).add_address6(i, a.parse().unwrap()).unwrap();
    };
    let ifs = |s: &Sim, h: HostId| s.host(h).interfaces();
    let (ra, rb) = (ifs(&s, r)[0].index, ifs(&s, r)[1].index);
    v6(&s, a, ifs(&s, a)[0].index, "2001:2:1::2/64");
    v6(&s, r, ra, "2001:2:1::1/64");
    v6(&s, r, rb, "2001:2:2::1/64");
    v6(&s, b, ifs(&s, b)[0].index, "2001:2:2::2/64");
    v6(&s, r, r3, "2001:2:3::1/64");
    v6(&s, c, c3, "2001:2:3::2/64");
    s.host(a)
        .set_default_gateway6(Some(("2001:2:1::1".parse().unwrap(), ifs(&s, a)[0].index)));
    s.host(b)
        .set_default_gateway6(Some(("2001:2:2::1".parse().unwrap(), ifs(&s, b)[0].index)));
    s.host(c)
        .set_default_gateway6(Some(("2001:2:3::1".parse().unwrap(), c3)));
    for (h, i) in [(b, ifs(&s, b)[0].index), (c, c3)] {
        for f in FAR4 {
            s.host(h)
                .add_address(i, format!("{f}/32").parse().unwrap())
                .unwrap();
        }
        for f in FAR6 {
            v6(&s, h, i, &format!("{f}/128"));
        }
    }
    s.host(r)
        .add_route_via(
            "198.18.5.0/24".parse().unwrap(),
            "198.18.2.2".parse().unwrap(),
        )
        .unwrap();
    s.host(r)
        .add_route_via(
            "2001:2:5::/48".parse().unwrap(),
            "2001:2:2::2".parse().unwrap(),
        )
        .unwrap();
    // Duplicate address detection done.
    s.run_for(Duration::from_secs(3));
    let fw = Ipfw::new(fw::RulesetConfig::default(), 1).unwrap();
    fw.load(rules).unwrap_or_else(|e| panic!("{e}"));
    fw.attach(s.host(r));
    Lab { s, a, r, b, c }
}

/// One datagram from a to `to`; which of `hosts` received it (by their index).
fn who_got(l: &mut Lab, hosts: &[HostId], to: SocketAddr) -> Vec<usize> {
    let socks: Vec<_> = hosts
        .iter()
        .map(|&h| {
            let any: IpAddr = if to.is_ipv4() {
                std::net::Ipv4Addr::UNSPECIFIED.into()
            } else {
                std::net::Ipv6Addr::UNSPECIFIED.into()
            };
            let sk =
                l.s.host(h)
                    .udp_bind(SocketAddr::new(any, to.port()))
                    .unwrap();
            sk.set_nonblocking(true).unwrap();
            sk
        })
        .collect();
    let any: IpAddr = if to.is_ipv4() {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    };
    let cli = l.s.host(l.a).udp_bind(SocketAddr::new(any, 0)).unwrap();
    cli.send_to(b"hello", to).unwrap();
    l.s.run_for(Duration::from_millis(200));
    let mut buf = [0u8; 64];
    socks
        .iter()
        .enumerate()
        .filter(|(_, sk)| sk.recv_from(&mut buf).is_ok())
        .map(|(i, _)| i)
        .collect()
}

fn sa(a: &str, port: u16) -> SocketAddr {
    SocketAddr::new(a.parse().unwrap(), port)
}

const RULES: &str = "
add 100 fwd 198.18.3.2 ip from any to 198.18.5.9 in
add 110 fwd 2001:2:3::2 ip6 from any to 2001:2:5::9 in
add 200 forward 198.18.1.1 udp from any to 198.18.7.7 7777 in
add 210 fwd 2001:2:1::1 udp from any to 2001:2:7::7 7777 in
add 65000 allow ip from any to any
";

#[test]
fn fwd_sends_to_its_next_hop_and_a_packet_it_misses_is_routed() {
    let mut l = lab(RULES);
    let (b, c) = (l.b, l.c);
    // Tagged: to c, not by the route to b.
    assert_eq!(who_got(&mut l, &[b, c], sa(FAR4[0], 5000)), vec![1]);
    assert_eq!(who_got(&mut l, &[b, c], sa(FAR6[0], 5001)), vec![1]);
    // Not matched: routed to b.
    assert_eq!(who_got(&mut l, &[b, c], sa(FAR4[1], 5002)), vec![0]);
    assert_eq!(who_got(&mut l, &[b, c], sa(FAR6[1], 5003)), vec![0]);
}

#[test]
fn fwd_to_an_address_of_the_router_delivers_to_its_own_socket() {
    let mut l = lab(RULES);
    let r = l.r;
    // The router has no route to 198.18.7.7 or 2001:2:7::7: only fwd brings them in.
    assert_eq!(who_got(&mut l, &[r], sa("198.18.7.7", 7777)), vec![0]);
    assert_eq!(who_got(&mut l, &[r], sa("2001:2:7::7", 7777)), vec![0]);
}

#[test]
fn without_the_fwd_rules_the_same_packets_follow_their_routes() {
    let mut l = lab("add 65000 allow ip from any to any\n");
    let (b, c, r) = (l.b, l.c, l.r);
    assert_eq!(who_got(&mut l, &[b, c], sa(FAR4[0], 5000)), vec![0]);
    assert_eq!(who_got(&mut l, &[b, c], sa(FAR6[0], 5001)), vec![0]);
    assert_eq!(
        who_got(&mut l, &[r], sa("198.18.7.7", 7777)),
        Vec::<usize>::new()
    );
    assert_eq!(
        who_got(&mut l, &[r], sa("2001:2:7::7", 7777)),
        Vec::<usize>::new()
    );
}

#[test]
fn fwd_to_a_next_hop_without_a_route_is_counted() {
    let mut l = lab(
        "add 100 fwd 198.18.9.9 ip from any to 198.18.5.9 in\nadd 65000 allow ip from any to any\n",
    );
    let (b, c, r) = (l.b, l.c, l.r);
    let before = l.s.host(r).stats().ip.noroute;
    assert_eq!(
        who_got(&mut l, &[b, c], sa(FAR4[0], 5000)),
        Vec::<usize>::new()
    );
    assert_eq!(l.s.host(r).stats().ip.noroute, before + 1);
}
