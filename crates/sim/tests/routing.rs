//! Routing and forwarding scenarios (issue 5): each proves one behaviour of the FIB,
//! the next hops and `ip_forward`/`ip6_forward`, in virtual time. Those that carry
//! traffic run with 1 and 2 workers.

use dev::mem::WireConfig;
use dev::Duration;
use net::iface::IfIndex;
use route::{IpPrefix, NhKind, RouteSpec, RtmType};
use sim::{HostId, Sim};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

mod common;
use common::ping_n;

fn p(s: &str) -> IpPrefix {
    s.parse().unwrap()
}
fn a(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Forwarding on, both families, on every interface of `h`.
fn forwarding(s: &Sim, h: HostId) {
    for i in s.host(h).interfaces() {
        s.host(h).set_forwarding(i.index, true, true).unwrap();
    }
}

fn via(s: &Sim, h: HostId, dst: &str, gw: &str) {
    s.host(h)
        .add_route_via(p(dst), a(gw))
        .unwrap_or_else(|e| panic!("{dst} via {gw}: {e}"));
}

fn v6(s: &Sim, h: HostId, i: IfIndex, addr: &str) {
    s.host(h).add_address6(i, addr.parse().unwrap()).unwrap();
}

/// A — R1 — R2 — R3 — B, both families: network n is 198.18.n.0/24 and
/// 2001:2:n::/64; the left end of each link is .1 / ::1... except A and B, which
/// are .2 on their networks.
struct Chain {
    s: Sim,
    a: HostId,
    r: [HostId; 3],
    b: HostId,
}

fn chain(workers: usize) -> Chain {
    let mut s = Sim::new(5);
    // Frames are recorded from the devices attached after this.
    s.enable_trace();
    let a = s.add_host("a", workers);
    let r1 = s.add_host("r1", workers);
    let r2 = s.add_host("r2", workers);
    let r3 = s.add_host("r3", workers);
    let b = s.add_host("b", workers);
    let w = WireConfig::default;
    let (ia, i11) = s.link(a, "198.18.1.2/24", r1, "198.18.1.1/24", w());
    let (i12, i21) = s.link(r1, "198.18.2.1/24", r2, "198.18.2.2/24", w());
    let (i22, i31) = s.link(r2, "198.18.3.1/24", r3, "198.18.3.2/24", w());
    let (i32, ib) = s.link(r3, "198.18.4.1/24", b, "198.18.4.2/24", w());
    v6(&s, a, ia, "2001:2:1::2/64");
    v6(&s, r1, i11, "2001:2:1::1/64");
    v6(&s, r1, i12, "2001:2:2::1/64");
    v6(&s, r2, i21, "2001:2:2::2/64");
    v6(&s, r2, i22, "2001:2:3::1/64");
    v6(&s, r3, i31, "2001:2:3::2/64");
    v6(&s, r3, i32, "2001:2:4::1/64");
    v6(&s, b, ib, "2001:2:4::2/64");
    for r in [r1, r2, r3] {
        forwarding(&s, r);
    }
    // Network n is 198.18.n.0/24 and 2001:2:n::/64: (node, network, via network n's
    // address .k / ::k) for both families.
    let routes = [
        (a, "default", 1, 1),
        (b, "default", 4, 1),
        (r1, "3", 2, 2),
        (r1, "4", 2, 2),
        (r2, "1", 2, 1),
        (r2, "4", 3, 2),
        (r3, "1", 3, 1),
        (r3, "2", 3, 1),
    ];
    for (node, dst, net, k) in routes {
        let (d4, d6) = match dst {
            "default" => ("default".to_string(), "::/0".to_string()),
            n => (format!("198.18.{n}.0/24"), format!("2001:2:{n}::/64")),
        };
        via(&s, node, &d4, &format!("198.18.{net}.{k}"));
        via(&s, node, &d6, &format!("2001:2:{net}::{k}"));
    }
    // Duplicate address detection.
    s.run_for(Duration::from_secs(3));
    s.take_trace();
    Chain {
        s,
        a,
        r: [r1, r2, r3],
        b,
    }
}

/// `n` datagrams of `size` bytes from `from` to an echo loop on `to` (run by the
/// test on `echo`'s socket); returns how many came back intact.
fn udp_echo_n(
    s: &mut Sim,
    from: HostId,
    echo: HostId,
    to: SocketAddr,
    n: usize,
    size: usize,
) -> usize {
    let srv = s.host(echo).udp_bind(to).unwrap();
    srv.set_nonblocking(true).unwrap();
    let any: SocketAddr = if to.is_ipv6() {
        "[::]:0".parse().unwrap()
    } else {
        "0.0.0.0:0".parse().unwrap()
    };
    let cli = s.host(from).udp_bind(any).unwrap();
    cli.set_nonblocking(true).unwrap();
    let mut buf = vec![0u8; 70000];
    let mut got = 0;
    for i in 0..n {
        let data: Vec<u8> = (0..size).map(|j| (i + j) as u8).collect();
        cli.send_to(&data, to).unwrap();
        s.run_for(Duration::from_millis(5));
        while let Ok((len, peer)) = srv.recv_from(&mut buf) {
            srv.send_to(&buf[..len], peer).unwrap();
        }
        s.run_for(Duration::from_millis(5));
        while let Ok((len, _)) = cli.recv_from(&mut buf) {
            assert_eq!(&buf[..len], &data[..], "datagram {i}");
            got += 1;
        }
    }
    got
}

#[test]
fn ipv4_forwarding_across_three_routers() {
    for workers in [1, 2] {
        let mut c = chain(workers);
        let b = Ipv4Addr::new(198, 18, 4, 2);
        assert_eq!(ping_n(&mut c.s, c.a, b, 20, 1000), 20, "workers={workers}");
        let to: SocketAddr = "198.18.4.2:7".parse().unwrap();
        assert_eq!(udp_echo_n(&mut c.s, c.a, c.b, to, 10, 3000), 10);
        for r in c.r {
            let st = c.s.host(r).stats();
            // 20 echoes and 20 replies; 10 datagrams each way in 3 fragments.
            assert_eq!(st.ip.forward, 40 + 60, "workers={workers} {:?}", st.ip);
            // (MLD reports reach neighbours that joined no group: ip6.notmember.)
            assert_eq!(st.total_drops() - st.ip6.notmember, 0, "{st:#?}");
        }
    }
}

#[test]
fn ipv6_forwarding_across_three_routers() {
    for workers in [1, 2] {
        let mut c = chain(workers);
        let to: SocketAddr = "[2001:2:4::2]:7".parse().unwrap();
        assert_eq!(
            udp_echo_n(&mut c.s, c.a, c.b, to, 20, 1000),
            20,
            "workers={workers}"
        );
        for r in c.r {
            let st = c.s.host(r).stats();
            assert_eq!(st.ip6.forward, 40, "workers={workers} {:?}", st.ip6);
        }
    }
}

/// The ICMP messages (type, code, source, the message's bytes 4..8) that `host`
/// originated (TTL 64: not those it forwarded).
fn icmp4_sent(trace: &[sim::TraceRecord], host: &str) -> Vec<(u8, u8, Ipv4Addr, [u8; 4])> {
    trace
        .iter()
        .filter(|t| t.host == host && t.frame.len() > 42 && t.frame[12..14] == [8, 0])
        .filter_map(|t| {
            let ip = &t.frame[14..];
            let hl = usize::from(ip[0] & 15) * 4;
            (ip[9] == 1 && ip[8] == 64 && ip.len() >= hl + 8).then(|| {
                let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
                let m = &ip[hl..];
                (m[0], m[1], src, [m[4], m[5], m[6], m[7]])
            })
        })
        .collect()
}

#[test]
fn ttl_expiry_along_a_path_is_reported_by_each_router_in_turn() {
    let mut c = chain(1);
    let sock =
        c.s.host(c.a)
            .udp_bind("0.0.0.0:0".parse::<SocketAddr>().unwrap())
            .unwrap();
    // traceroute: one probe per TTL to an unused port.
    for ttl in 1..=4 {
        sock.set_ttl(ttl).unwrap();
        sock.send_to(b"probe", "198.18.4.2:33434".parse::<SocketAddr>().unwrap())
            .unwrap();
        c.s.run_for(Duration::from_millis(50));
    }
    let trace = c.s.take_trace();
    let hops: Vec<(String, u8, u8, Ipv4Addr)> = ["r1", "r2", "r3", "b"]
        .iter()
        .flat_map(|h| {
            icmp4_sent(&trace, h)
                .into_iter()
                .map(move |(t, code, src, _)| (h.to_string(), t, code, src))
        })
        .collect();
    assert_eq!(
        hops,
        vec![
            ("r1".into(), 11, 0, Ipv4Addr::new(198, 18, 1, 1)),
            ("r2".into(), 11, 0, Ipv4Addr::new(198, 18, 2, 2)),
            ("r3".into(), 11, 0, Ipv4Addr::new(198, 18, 3, 2)),
            ("b".into(), 3, 3, Ipv4Addr::new(198, 18, 4, 2)),
        ],
        "time exceeded from each router (from its address towards the source), then port unreachable"
    );
    for r in c.r {
        assert_eq!(c.s.host(r).stats().ip.timeexceed, 1);
    }
}

/// R between A (198.18.1.0/24) and a hub (198.18.2.0/24) with next hops N1..N3.
fn fan(workers: usize) -> (Sim, HostId, HostId, [HostId; 3]) {
    fan_with(workers, None)
}

/// [`fan`] with R keeping a flow table (or not).
fn fan_with(
    workers: usize,
    flow_table: Option<route::FlowTableConfig>,
) -> (Sim, HostId, HostId, [HostId; 3]) {
    let mut s = Sim::new(9);
    s.enable_trace();
    let a = s.add_host("a", workers);
    let r = s.add_host_with(net::StackConfig {
        name: "r".into(),
        workers,
        flow_table,
        ..net::StackConfig::default()
    });
    s.link(
        a,
        "198.18.1.2/24",
        r,
        "198.18.1.1/24",
        WireConfig::default(),
    );
    let hub = s.add_hub(WireConfig::default());
    s.connect(r, hub, "198.18.2.1/24");
    let mut n = [a; 3];
    for (i, h) in n.iter_mut().enumerate() {
        *h = s.add_host(&format!("n{}", i + 1), 1);
        s.connect(*h, hub, &format!("198.18.2.{}/24", 11 + i));
    }
    forwarding(&s, r);
    via(&s, a, "default", "198.18.1.1");
    // R knows its neighbours' addresses before the flows start (else the first
    // packets of 300 flows would overflow ARP's hold queue).
    for i in 0..3 {
        assert_eq!(
            ping_n(&mut s, r, Ipv4Addr::new(198, 18, 2, 11 + i), 1, 8),
            1
        );
    }
    assert_eq!(ping_n(&mut s, a, Ipv4Addr::new(198, 18, 1, 1), 1, 8), 1);
    (s, a, r, n)
}

/// Which next hop (by the destination MAC of R's frames) each flow (by UDP source
/// port) took towards 198.19.0.0/16.
fn flows_by_hop(s: &Sim, trace: &[sim::TraceRecord], n: &[HostId]) -> HashMap<u16, usize> {
    let macs: Vec<[u8; 6]> = n.iter().map(|h| s.host(*h).interfaces()[0].mac.0).collect();
    let mut m = HashMap::new();
    for t in trace
        .iter()
        .filter(|t| t.host == "r" && t.frame.len() >= 42)
    {
        let f = &t.frame;
        if f[12..14] != [8, 0] || f[23] != 17 || f[30] != 198 || f[31] != 19 {
            continue;
        }
        let Some(hop) = macs.iter().position(|mac| f[0..6] == mac[..]) else {
            continue;
        };
        let sport = u16::from_be_bytes([f[34], f[35]]);
        let prev = m.insert(sport, hop);
        assert!(
            prev.is_none() || prev == Some(hop),
            "a flow switched hops within a round"
        );
    }
    m
}

fn send_flows(s: &mut Sim, socks: &[net::socket::UdpSocket]) -> Vec<sim::TraceRecord> {
    s.take_trace();
    for (i, k) in socks.iter().enumerate() {
        k.send_to(
            b"flow",
            SocketAddr::new(Ipv4Addr::new(198, 19, 0, (i % 250) as u8 + 1).into(), 9),
        )
        .unwrap();
    }
    s.run_for(Duration::from_millis(100));
    s.take_trace()
}

#[test]
fn ecmp_spreads_flows_over_its_next_hops() {
    for workers in [1, 2] {
        let (mut s, ha, r, n) = fan(workers);
        via(&s, r, "198.19.0.0/16", "198.18.2.11");
        via(&s, r, "198.19.0.0/16", "198.18.2.12");
        via(&s, r, "198.19.0.0/16", "198.18.2.13");
        let info = s.host(r).route_get(a("198.19.0.1")).unwrap();
        assert_eq!(info.paths.len(), 3);
        let socks: Vec<_> = (0..300)
            .map(|_| {
                s.host(ha)
                    .udp_bind("0.0.0.0:0".parse::<SocketAddr>().unwrap())
                    .unwrap()
            })
            .collect();
        let trace = send_flows(&mut s, &socks);
        let by = flows_by_hop(&s, &trace, &n);
        assert_eq!(by.len(), 300, "every flow forwarded");
        for hop in 0..3 {
            let k = by.values().filter(|&&h| h == hop).count();
            assert!((70..=130).contains(&k), "hop {hop} took {k} of 300 flows");
        }
    }
}

/// Flow → next hop before and after a third next hop joins 198.19.0.0/16.
fn flows_across_a_new_nexthop(
    workers: usize,
    flow_table: Option<route::FlowTableConfig>,
) -> (HashMap<u16, usize>, HashMap<u16, usize>, net::Stats) {
    let (mut s, ha, r, n) = fan_with(workers, flow_table);
    via(&s, r, "198.19.0.0/16", "198.18.2.11");
    via(&s, r, "198.19.0.0/16", "198.18.2.12");
    let socks: Vec<_> = (0..300)
        .map(|_| {
            s.host(ha)
                .udp_bind("0.0.0.0:0".parse::<SocketAddr>().unwrap())
                .unwrap()
        })
        .collect();
    let t = send_flows(&mut s, &socks);
    let before = flows_by_hop(&s, &t, &n);
    via(&s, r, "198.19.0.0/16", "198.18.2.13");
    let t = send_flows(&mut s, &socks);
    let after = flows_by_hop(&s, &t, &n);
    // New flows after the change do use the new next hop.
    let fresh: Vec<_> = (0..300)
        .map(|_| {
            s.host(ha)
                .udp_bind("0.0.0.0:0".parse::<SocketAddr>().unwrap())
                .unwrap()
        })
        .collect();
    let t = send_flows(&mut s, &fresh);
    let new_flows = flows_by_hop(&s, &t, &n);
    assert!(
        new_flows.values().filter(|&&h| h == 2).count() > 50,
        "new flows reach the new next hop"
    );
    (before, after, s.host(r).stats())
}

#[test]
fn ecmp_keeps_flows_when_nexthop_added() {
    for workers in [1, 2] {
        // Without a flow table: the new next hop takes its share of buckets, and only
        // the flows hashed to those buckets move — all of them to the new hop.
        let (before, after, _) = flows_across_a_new_nexthop(workers, None);
        assert_eq!((before.len(), after.len()), (300, 300));
        let moved: Vec<u16> = before
            .iter()
            .filter(|(p, h)| after[p] != **h)
            .map(|(p, _)| *p)
            .collect();
        assert!(
            moved.iter().all(|p| after[p] == 2),
            "a flow moved between two old next hops"
        );
        assert!(
            (70..=130).contains(&moved.len()),
            "{} of 300 flows moved",
            moved.len()
        );
        // With a flow table (4-tuple mode): not one existing flow moves.
        let ft = route::FlowTableConfig {
            mode: route::FlowMode::FourTuple,
            ..route::FlowTableConfig::default()
        };
        let (before, after, st) = flows_across_a_new_nexthop(workers, Some(ft));
        assert_eq!((before.len(), after.len()), (300, 300));
        assert_eq!(before, after, "workers={workers}: a flow moved");
        assert!(
            st.flow.hits >= 300,
            "the second round hit the table: {:?}",
            st.flow
        );
    }
}

#[test]
fn icmp_redirect_when_a_packet_leaves_by_its_arrival_interface() {
    // A, R and G share one network; A's default router is R, which routes
    // 198.19.0.0/16 through G: R forwards A's packet to G and tells A to use G.
    let mut s = Sim::new(3);
    s.enable_trace();
    let hub = s.add_hub(WireConfig::default());
    let ha = s.add_host("a", 1);
    let r = s.add_host("r", 1);
    let g = s.add_host("g", 1);
    s.connect(ha, hub, "198.18.1.2/24");
    s.connect(r, hub, "198.18.1.1/24");
    s.connect(g, hub, "198.18.1.3/24");
    forwarding(&s, r);
    via(&s, ha, "default", "198.18.1.1");
    via(&s, r, "198.19.0.0/16", "198.18.1.3");
    let k = s
        .host(ha)
        .udp_bind("0.0.0.0:0".parse::<SocketAddr>().unwrap())
        .unwrap();
    k.send_to(b"x", "198.19.0.1:9".parse::<SocketAddr>().unwrap())
        .unwrap();
    s.run_for(Duration::from_millis(100));
    let sent = icmp4_sent(&s.take_trace(), "r");
    assert_eq!(
        sent,
        vec![(5, 1, Ipv4Addr::new(198, 18, 1, 1), [198, 18, 1, 3])],
        "one host redirect naming G"
    );
    assert_eq!(s.host(r).stats().ip.redirectsent, 1);
    assert_eq!(
        s.host(r).stats().ip.forward,
        1,
        "and the packet still forwarded"
    );
    assert_eq!(s.host(g).stats().ip.cantforward, 1, "G got it");
}

#[test]
fn route_flags_and_what_each_kind_of_route_does() {
    let (mut s, ha, r, _) = fan(1);
    let rt = s.host(r);
    rt.add_route(RouteSpec::discard(p("198.19.1.0/24"), NhKind::Blackhole))
        .unwrap();
    rt.add_route(RouteSpec::discard(p("198.19.2.0/24"), NhKind::Reject))
        .unwrap();
    rt.add_route(RouteSpec::discard(p("198.19.3.0/24"), NhKind::Prohibit))
        .unwrap();
    via(&s, r, "198.19.4.4/32", "198.18.2.11");
    via(&s, r, "198.19.5.0/24", "198.18.2.12");
    let flags: HashMap<String, String> = s
        .host(r)
        .routes()
        .into_iter()
        .map(|i| (i.dst.to_string(), i.flags.to_string()))
        .collect();
    let want = [
        ("198.18.1.0/24", "UC"),
        ("198.18.2.0/24", "UC"),
        ("198.19.1.0/24", "USB"),
        ("198.19.2.0/24", "URS"),
        ("198.19.3.0/24", "URSP"),
        ("198.19.4.4/32", "UGHS"),
        ("198.19.5.0/24", "UGS"),
    ];
    for (d, f) in want {
        assert_eq!(flags.get(d).map(String::as_str), Some(f), "{d}: {flags:?}");
    }
    s.take_trace();
    let k = s
        .host(ha)
        .udp_bind("0.0.0.0:0".parse::<SocketAddr>().unwrap())
        .unwrap();
    for d in [
        "198.19.1.1",
        "198.19.2.1",
        "198.19.3.1",
        "198.20.0.1",
        "198.19.4.4",
    ] {
        k.send_to(b"x", SocketAddr::new(a(d), 9)).unwrap();
        s.run_for(Duration::from_millis(20));
    }
    let codes: Vec<(u8, u8)> = icmp4_sent(&s.take_trace(), "r")
        .into_iter()
        .map(|(t, c, _, _)| (t, c))
        .collect();
    assert_eq!(
        codes,
        vec![(3, 1), (3, 13), (3, 0)],
        "blackhole silent; reject: host unreachable; prohibit: administratively \
         prohibited; no route: net unreachable"
    );
    let st = s.host(r).stats();
    assert_eq!(
        (st.ip.blackhole, st.ip.reject, st.ip.noroute, st.ip.forward),
        (1, 2, 1, 1)
    );
    // Deleting a route takes its destination with it.
    s.host(r).delete_route(p("198.19.4.4/32"), None).unwrap();
    assert!(s.host(r).route_get(a("198.19.4.4")).is_none());
}

#[test]
fn routing_message_stream_contents() {
    let mut s = Sim::new(4);
    let ha = s.add_host("a", 1);
    let r = s.add_host("r", 1);
    let sub = s.host(r).subscribe_routes(256);
    s.link(
        ha,
        "198.18.1.2/24",
        r,
        "198.18.1.1/24",
        WireConfig::default(),
    );
    forwarding(&s, r);
    via(&s, r, "198.19.0.0/16", "198.18.1.2");
    assert_eq!(ping_n(&mut s, r, Ipv4Addr::new(198, 18, 1, 2), 1, 8), 1);
    s.host(r).route_get(a("198.19.7.7")).unwrap();
    s.host(r).delete_route(p("198.19.0.0/16"), None).unwrap();
    via(&s, ha, "default", "198.18.1.1");
    let k = s
        .host(ha)
        .udp_bind("0.0.0.0:0".parse::<SocketAddr>().unwrap())
        .unwrap();
    k.send_to(b"x", "198.20.0.1:9".parse::<SocketAddr>().unwrap())
        .unwrap();
    s.run_for(Duration::from_millis(50));
    let got: Vec<String> = sub.drain().iter().map(|m| format!("{m}")).collect();
    let kinds: Vec<RtmType> = sub.drain().iter().map(|m| m.kind).collect();
    assert!(kinds.is_empty());
    let want_prefixes = [
        "RTM_NEWADDR seq 1 198.18.1.0/24 gateway 198.18.1.1 if 0 flags <U>",
        "RTM_ADD seq 2 198.18.1.0/24 if 0 flags <UC>",
        "RTM_ADD seq 3 198.19.0.0/16 gateway 198.18.1.2 if 0 flags <UGS>",
        "RTM_ADD seq 4 198.18.1.2/32 lladdr ",
        "RTM_GET seq 5 198.19.0.0/16 gateway 198.18.1.2 if 0 flags <UGS>",
        "RTM_DELETE seq 6 198.19.0.0/16 gateway 198.18.1.2 if 0 flags <UGS>",
        "RTM_MISS seq 7 198.20.0.1/32 if 0 flags <>",
    ];
    assert_eq!(got.len(), want_prefixes.len(), "{got:#?}");
    for (g, w) in got.iter().zip(want_prefixes) {
        assert!(g.starts_with(w), "{g} should start with {w}\n{got:#?}");
    }
    assert!(got[3].ends_with("flags <UHL>"), "{}", got[3]);
}

#[test]
fn path_mtu_discovery_through_a_smaller_second_link() {
    for workers in [1, 2] {
        let mut s = Sim::new(6);
        let ha = s.add_host("a", workers);
        let r = s.add_host("r", workers);
        let hb = s.add_host("b", workers);
        let (ia, ir1) = s.link(
            ha,
            "198.18.1.2/24",
            r,
            "198.18.1.1/24",
            WireConfig::default(),
        );
        let small = WireConfig {
            mtu: 1280,
            ..WireConfig::default()
        };
        let (ir2, ib) = s.link(r, "198.18.2.1/24", hb, "198.18.2.2/24", small);
        v6(&s, ha, ia, "2001:2:1::2/64");
        v6(&s, r, ir1, "2001:2:1::1/64");
        v6(&s, r, ir2, "2001:2:2::1/64");
        v6(&s, hb, ib, "2001:2:2::2/64");
        forwarding(&s, r);
        via(&s, ha, "default", "198.18.1.1");
        via(&s, hb, "default", "198.18.2.1");
        via(&s, ha, "::/0", "2001:2:1::1");
        via(&s, hb, "::/0", "2001:2:2::1");
        s.run_for(Duration::from_secs(3));
        // IPv4 with Don't Fragment: the router answers with the next hop's MTU.
        let k = s
            .host(ha)
            .udp_bind("0.0.0.0:0".parse::<SocketAddr>().unwrap())
            .unwrap();
        k.set_dont_fragment(true);
        k.send_to(&[7u8; 1400], "198.18.2.2:9".parse::<SocketAddr>().unwrap())
            .unwrap();
        s.run_for(Duration::from_millis(50));
        assert_eq!(s.host(r).stats().ip.toobig, 1);
        let now = s.now();
        assert_eq!(
            s.host(ha)
                .config()
                .path_mtu4(Ipv4Addr::new(198, 18, 2, 2), now),
            Some(1280),
            "workers={workers}"
        );
        // IPv6: Packet Too Big; the source then fragments, and the datagram arrives.
        let to: SocketAddr = "[2001:2:2::2]:7".parse().unwrap();
        let srv = s.host(hb).udp_bind(to).unwrap();
        srv.set_nonblocking(true).unwrap();
        let k6 = s
            .host(ha)
            .udp_bind("[::]:0".parse::<SocketAddr>().unwrap())
            .unwrap();
        k6.send_to(&[9u8; 1400], to).unwrap();
        s.run_for(Duration::from_millis(50));
        assert_eq!(s.host(r).stats().ip6.toobig, 1);
        k6.send_to(&[9u8; 1400], to).unwrap();
        s.run_for(Duration::from_millis(50));
        let mut buf = [0u8; 2000];
        let (n, _) = srv
            .recv_from(&mut buf)
            .expect("the second datagram arrives in fragments");
        assert_eq!(n, 1400);
        assert!(s.host(ha).stats().ip6.fragmented >= 1);
    }
}

#[test]
fn router_advertisements_configure_a_host_that_then_reaches_past_the_router() {
    for workers in [1, 2] {
        let mut s = Sim::new(8);
        let h = s.add_host_with(net::StackConfig {
            name: "h".into(),
            workers,
            slaac: true,
            ..net::StackConfig::default()
        });
        let r = s.add_host("r", workers);
        let b = s.add_host("b", workers);
        let (ih, ir1) = s.link(h, "", r, "198.18.1.1/24", WireConfig::default());
        let (ir2, ib) = s.link(
            r,
            "198.18.2.1/24",
            b,
            "198.18.2.2/24",
            WireConfig::default(),
        );
        // The host has only its link-local address; SLAAC needs IPv6 on.
        v6(&s, h, ih, "fe80::1234/64");
        v6(&s, r, ir1, "2001:2:1::1/64");
        v6(&s, r, ir2, "2001:2:2::1/64");
        v6(&s, b, ib, "2001:2:2::2/64");
        forwarding(&s, r);
        s.host(r).set_router_advertisements(ir1, true).unwrap();
        via(&s, b, "::/0", "2001:2:2::1");
        s.run_for(Duration::from_secs(8));
        let mac = s.host(h).interfaces()[0].mac.0;
        let eui = net::iface::Inet6Addr::link_local(wire::EthernetAddress(mac))
            .addr
            .segments();
        let want = std::net::Ipv6Addr::new(0x2001, 2, 1, 0, eui[4], eui[5], eui[6], eui[7]);
        let addrs: Vec<_> = s
            .host(h)
            .addresses6()
            .into_iter()
            .map(|x| x.1.addr)
            .collect();
        assert!(
            addrs.contains(&want),
            "workers={workers}: SLAAC address {want} in {addrs:?}"
        );
        let st = s.host(r).stats();
        assert!(st.icmp6.outrouteradvert >= 1, "{:?}", st.icmp6);
        let to: SocketAddr = "[2001:2:2::2]:7".parse().unwrap();
        assert_eq!(udp_echo_n(&mut s, h, b, to, 5, 200), 5, "workers={workers}");
    }
}

/// A host that comes up long after a router's first advertisements solicits one
/// (RFC 4861 §6.3.7), and the router, listening to all-routers (RFC 4291 §2.8),
/// answers within a second instead of at its next periodic advertisement, minutes
/// later.
#[test]
fn a_late_host_gets_an_advertisement_when_it_solicits_one() {
    for workers in [1, 2] {
        let mut s = Sim::new(9);
        let hub = s.add_hub(WireConfig::default());
        let r = s.add_host("r", workers);
        let ir = s.connect(r, hub, "198.18.1.1/24");
        v6(&s, r, ir, "2001:2:1::1/64");
        forwarding(&s, r);
        s.host(r).set_router_advertisements(ir, true).unwrap();
        // Past the initial advertisements (three, 16 s apart at most).
        s.run_for(Duration::from_secs(60));
        let sent = s.host(r).stats().icmp6.outrouteradvert;
        let h = s.add_host_with(net::StackConfig {
            name: "h".into(),
            workers,
            slaac: true,
            ..net::StackConfig::default()
        });
        let ih = s.connect(h, hub, "");
        v6(&s, h, ih, "fe80::1234/64");
        s.run_for(Duration::from_secs(5));
        let st = s.host(r).stats();
        assert!(
            st.icmp6.inroutersolicit >= 1,
            "workers={workers}: {:?}",
            st.icmp6
        );
        assert!(
            st.icmp6.outrouteradvert > sent,
            "workers={workers}: no answer"
        );
        let global = s
            .host(h)
            .addresses6()
            .into_iter()
            .any(|x| x.1.addr.segments()[0] == 0x2001);
        assert!(global, "workers={workers}: no SLAAC address within 5 s");
    }
}

#[test]
fn hop_limit_expiry_and_redirects_over_ipv6() {
    // Hop limit: r1 answers a hop-limit-1 datagram with Time Exceeded.
    let mut c = chain(1);
    let k =
        c.s.host(c.a)
            .udp_bind("[::]:0".parse::<SocketAddr>().unwrap())
            .unwrap();
    k.set_ttl(1).unwrap();
    k.send_to(
        b"probe",
        "[2001:2:4::2]:33434".parse::<SocketAddr>().unwrap(),
    )
    .unwrap();
    c.s.run_for(Duration::from_millis(50));
    assert_eq!(c.s.host(c.r[0]).stats().ip6.timeexceed, 1);
    assert_eq!(c.s.host(c.a).stats().icmp6.intimxceed, 1);
    // Redirect: A, R and G on one link; R's route for 2001:2:9::/48 is G's
    // link-local address, so R tells A to use G directly.
    let mut s = Sim::new(12);
    let hub = s.add_hub(WireConfig::default());
    let ha = s.add_host("a", 1);
    let r = s.add_host("r", 1);
    let g = s.add_host("g", 1);
    let ia = s.connect(ha, hub, "198.18.1.2/24");
    let ir = s.connect(r, hub, "198.18.1.1/24");
    let ig = s.connect(g, hub, "198.18.1.3/24");
    v6(&s, ha, ia, "2001:2:1::2/64");
    v6(&s, r, ir, "2001:2:1::1/64");
    v6(&s, g, ig, "2001:2:1::3/64");
    forwarding(&s, r);
    s.run_for(Duration::from_secs(3));
    let g_ll = s.host(g).addresses6()[0].1.addr;
    let r_ll = s.host(r).addresses6()[0].1.addr;
    assert!(g_ll.segments()[0] == 0xfe80);
    // Routers are known by their link-local addresses (RFC 4861 §8.1).
    via(&s, ha, "::/0", &r_ll.to_string());
    via(&s, r, "2001:2:9::/48", &g_ll.to_string());
    let k = s
        .host(ha)
        .udp_bind("[::]:0".parse::<SocketAddr>().unwrap())
        .unwrap();
    k.send_to(b"x", "[2001:2:9::1]:9".parse::<SocketAddr>().unwrap())
        .unwrap();
    s.run_for(Duration::from_millis(100));
    assert_eq!(s.host(r).stats().ip6.redirectsent, 1);
    assert_eq!(s.host(r).stats().ip6.forward, 1);
    assert_eq!(s.host(ha).stats().icmp6.inredirect, 1);
    // A now sends the next one to G directly: R forwards nothing more.
    k.send_to(b"y", "[2001:2:9::1]:9".parse::<SocketAddr>().unwrap())
        .unwrap();
    s.run_for(Duration::from_millis(100));
    assert_eq!(
        s.host(r).stats().ip6.forward,
        1,
        "the redirect was followed"
    );
    assert_eq!(s.host(g).stats().ip6.cantforward, 2, "G got both");
}

#[test]
fn flow_table_lets_go_of_a_withdrawn_next_hop() {
    let ft = route::FlowTableConfig {
        mode: route::FlowMode::FourTuple,
        ..route::FlowTableConfig::default()
    };
    let (mut s, ha, r, n) = fan_with(1, Some(ft));
    for g in ["198.18.2.11", "198.18.2.12", "198.18.2.13"] {
        via(&s, r, "198.19.0.0/16", g);
    }
    let socks: Vec<_> = (0..300)
        .map(|_| {
            s.host(ha)
                .udp_bind("0.0.0.0:0".parse::<SocketAddr>().unwrap())
                .unwrap()
        })
        .collect();
    let t = send_flows(&mut s, &socks);
    let before = flows_by_hop(&s, &t, &n);
    s.host(r)
        .delete_route(p("198.19.0.0/16"), Some(a("198.18.2.11")))
        .unwrap();
    let t = send_flows(&mut s, &socks);
    let after = flows_by_hop(&s, &t, &n);
    assert_eq!(after.len(), 300, "every flow still forwarded");
    for (port, hop) in &before {
        if *hop == 0 {
            assert_ne!(after[port], 0, "a flow stayed on the withdrawn next hop");
        } else {
            assert_eq!(after[port], *hop, "a flow on a surviving next hop moved");
        }
    }
    assert!(
        s.host(r).stats().flow.stale >= 50,
        "{:?}",
        s.host(r).stats().flow
    );
}

#[test]
fn tcp_connects_over_routes_added_with_add_route_via() {
    // The chain's hosts have only FIB routes (no set_default_gateway): a TCP
    // connection takes its source from the route's interface, both families.
    let mut c = chain(1);
    for dst in ["198.18.4.2:5001", "[2001:2:4::2]:5001"] {
        let to: SocketAddr = dst.parse().unwrap();
        let l = c.s.host(c.b).tcp_listen(to, 4).unwrap();
        l.set_nonblocking(true).unwrap();
        let _conn =
            c.s.host(c.a)
                .tcp_connect_nonblocking(to)
                .expect("a source address");
        c.s.run_for(Duration::from_millis(100));
        assert!(l.accept().is_ok(), "{dst}: connected across three routers");
    }
}

/// `ifconfig IF down` on the last router's interface towards B: what is forwarded
/// there is answered with host unreachable, what B sends to it is dropped and
/// counted, both ways for IPv6 too; `up` brings it back after duplicate address
/// detection, and each change is announced as RTM_IFINFO.
#[test]
fn an_interface_marked_down_takes_no_traffic_until_it_is_up_again() {
    for workers in [1, 2] {
        let mut c = chain(workers);
        let r3 = c.r[2];
        let (b4, r3b) = (Ipv4Addr::new(198, 18, 4, 2), Ipv4Addr::new(198, 18, 4, 1));
        let out =
            c.s.host(r3)
                .interfaces()
                .iter()
                .find(|i| i.has_addr(r3b))
                .unwrap()
                .index;
        let sub = c.s.host(r3).subscribe_routes(64);
        assert_eq!(ping_n(&mut c.s, c.a, b4, 5, 100), 5, "workers={workers}");
        let to6: SocketAddr = "[2001:2:4::2]:7".parse().unwrap();
        assert_eq!(udp_echo_n(&mut c.s, c.a, c.b, to6, 3, 100), 3);

        assert!(c.s.host(r3).set_up(out, false).unwrap());
        assert!(!c.s.host(r3).set_up(out, false).unwrap(), "already down");
        let before = c.s.host(r3).stats();
        let b_start = c.s.host(c.b).stats().ether.ipackets;
        c.s.take_trace();
        assert_eq!(ping_n(&mut c.s, c.a, b4, 3, 100), 0, "workers={workers}");
        let unreach: Vec<_> = icmp4_sent(&c.s.take_trace(), "r3")
            .into_iter()
            .map(|(t, code, src, _)| (t, code, src))
            .collect();
        assert!(!unreach.is_empty(), "no ICMP from r3");
        assert!(
            unreach
                .iter()
                .all(|x| *x == (3, 1, Ipv4Addr::new(198, 18, 3, 2))),
            "host unreachable from r3's address towards A: {unreach:?}"
        );
        assert_eq!(udp_echo_n(&mut c.s, c.a, c.b, to6, 2, 100), 0);
        // B's echo requests to r3 arrive on the down interface.
        assert_eq!(ping_n(&mut c.s, c.b, r3b, 2, 100), 0);
        let st = c.s.host(r3).stats();
        assert_eq!(st.ip.cantforward - before.ip.cantforward, 3, "{:?}", st.ip);
        assert_eq!(st.ip6.cantforward - before.ip6.cantforward, 2);
        assert!(st.ether.ifdown >= 2, "{:?}", st.ether);
        assert_eq!(st.ip.forward, before.ip.forward);
        assert_eq!(st.icmp.inecho, before.icmp.inecho);
        // Nothing went out of it: B saw no frame from r3 while it was down.
        let b_in = c.s.host(c.b).stats().ether.ipackets;
        assert_eq!(b_in, b_start, "r3 sent on a down interface");

        assert!(c.s.host(r3).set_up(out, true).unwrap());
        let ifp = c.s.host(r3).interfaces()[out.get()].clone();
        let a6 = ifp.addr6("2001:2:4::1".parse().unwrap()).unwrap();
        assert_eq!(a6.state(), net::iface::AddrState::Tentative, "DAD again");
        c.s.run_for(Duration::from_secs(3));
        let ifp = c.s.host(r3).interfaces()[out.get()].clone();
        assert!(ifp.addr6("2001:2:4::1".parse().unwrap()).unwrap().usable());
        assert!(
            c.s.host(c.b).stats().ether.ipackets > b_in,
            "r3 speaks again"
        );
        assert_eq!(ping_n(&mut c.s, c.a, b4, 5, 100), 5, "workers={workers}");
        assert_eq!(udp_echo_n(&mut c.s, c.a, c.b, to6, 3, 100), 3);
        assert_eq!(ping_n(&mut c.s, c.b, r3b, 2, 100), 2);

        let info: Vec<(u32, bool)> = sub
            .drain()
            .iter()
            .filter(|m| m.kind == RtmType::IfInfo)
            .map(|m| (m.ifindex, m.flags.contains(route::RtFlags::UP)))
            .collect();
        let i = u32::from(out.0);
        assert_eq!(info, vec![(i, false), (i, true)]);
    }
}
