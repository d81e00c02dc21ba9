//! A connected subnet in the FIB (issue 47): its hosts are forwarded to by the
//! fast path once their neighbour entry is resolved, its network and broadcast
//! addresses are FIB entries of their own (a host's own datagram to the subnet's
//! broadcast address leaves as a link broadcast, found by the lookup), and a
//! connected route's removal takes them away. Virtual time.

use dev::Duration;
use sim::Sim;
use std::net::{Ipv4Addr, SocketAddr};

fn sa(a: &str, port: u16) -> SocketAddr {
    SocketAddr::new(a.parse().unwrap(), port)
}

#[test]
fn forwarding_to_a_connected_host_delivers_every_datagram_before_and_after_arp() {
    // a 198.18.1.2 — r — 198.18.2.2 b, b on r's connected 198.18.2.0/24.
    let (mut s, a, r, b): (Sim, _, _, _) = sim::routed(471, 1);
    s.run_for(Duration::from_secs(1));
    let rx = s.host(b).udp_bind(sa("0.0.0.0", 4000)).unwrap();
    rx.set_nonblocking(true).unwrap();
    let tx = s.host(a).udp_bind(sa("0.0.0.0", 0)).unwrap();
    let before = s.host(r).stats().ip.forward;
    // The first goes through ARP on r (held, then sent); the rest by the fast
    // path with the neighbour snapshot's address.
    for k in 0..20u8 {
        tx.send_to(&[k], sa("198.18.2.2", 4000)).unwrap();
        s.run_for(Duration::from_millis(20));
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 16];
    while let Ok((n, _)) = rx.recv_from(&mut buf) {
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, (0..20u8).collect::<Vec<_>>());
    let st = s.host(r).stats();
    assert_eq!(st.ip.forward, before + 20, "{:?}", st.ip);
    assert_eq!(st.ip.bcastfwd, 0);
}

#[test]
fn a_hosts_own_datagram_to_its_subnets_broadcast_leaves_as_a_link_broadcast() {
    let (mut s, a, r, _b): (Sim, _, _, _) = sim::routed(472, 1);
    s.run_for(Duration::from_secs(1));
    // r listens on its 198.18.1.1; a sends to 198.18.1.255, which r has no ARP
    // entry for and never answers ARP for: only a link broadcast reaches it.
    let rx = s.host(r).udp_bind(sa("0.0.0.0", 4001)).unwrap();
    rx.set_nonblocking(true).unwrap();
    let tx = s.host(a).udp_bind(sa("0.0.0.0", 0)).unwrap();
    tx.send_to(b"all", sa("198.18.1.255", 4001)).unwrap();
    s.run_for(Duration::from_millis(50));
    let mut buf = [0u8; 16];
    let (n, from) = rx.recv_from(&mut buf).expect("r got the broadcast");
    assert_eq!(&buf[..n], b"all");
    assert_eq!(
        from.ip(),
        std::net::IpAddr::V4(Ipv4Addr::new(198, 18, 1, 2))
    );
    // Not forwarded on to the other link, as a directed broadcast is not.
    assert_eq!(s.host(r).stats().ip.forward, 0);
}
