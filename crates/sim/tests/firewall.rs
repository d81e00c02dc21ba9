//! ipfw on a stack's pfil points (issue 6), in virtual time: what a stateful firewall
//! on a router lets through, and how refused packets are answered.

use dev::mem::WireConfig;
use dev::Duration;
use net::ipfw::Ipfw;
use sim::{HostId, Sim};
use std::net::{Ipv4Addr, SocketAddr};

/// inside (198.18.1.2) — R — outside (198.18.2.2), R running `rules`.
fn lab(workers: usize, rules: &str) -> (Sim, HostId, HostId, HostId, std::sync::Arc<Ipfw>) {
    let mut s = Sim::new(21);
    let inside = s.add_host("inside", workers);
    let r = s.add_host("r", workers);
    let outside = s.add_host("outside", workers);
    s.link(
        inside,
        "198.18.1.2/24",
        r,
        "198.18.1.1/24",
        WireConfig::default(),
    );
    s.link(
        r,
        "198.18.2.1/24",
        outside,
        "198.18.2.2/24",
        WireConfig::default(),
    );
    for i in s.host(r).interfaces() {
        s.host(r).set_forwarding(i.index, true, true).unwrap();
    }
    s.host(inside)
        .set_default_gateway(Some(Ipv4Addr::new(198, 18, 1, 1)));
    s.host(outside)
        .set_default_gateway(Some(Ipv4Addr::new(198, 18, 2, 1)));
    let fw = Ipfw::new(fw::RulesetConfig::default(), workers).unwrap();
    fw.load(rules).unwrap_or_else(|e| panic!("{e}"));
    fw.attach(s.host(r));
    (s, inside, r, outside, fw)
}

const STATEFUL: &str = "
# Inside may open anything; replies come back through the states; nothing else does.
add 100 check-state
add 200 allow tcp from 198.18.1.0/24 to any setup keep-state
add 300 allow udp from 198.18.1.0/24 to any keep-state
add 400 allow icmp from 198.18.1.0/24 to any keep-state
add 500 reset tcp from any to 198.18.1.0/24 80
add 600 unreach port udp from any to 198.18.1.0/24 53
add 700 deny ip from any to any
";

/// One datagram from `from` to `to`; whether it arrived (and its echo came back).
fn udp_exchange(s: &mut Sim, from: HostId, to_host: HostId, to: SocketAddr) -> (bool, bool) {
    let srv = s.host(to_host).udp_bind(to).unwrap();
    srv.set_nonblocking(true).unwrap();
    let cli = s
        .host(from)
        .udp_bind("0.0.0.0:0".parse::<SocketAddr>().unwrap())
        .unwrap();
    cli.set_nonblocking(true).unwrap();
    cli.send_to(b"hello", to).unwrap();
    s.run_for(Duration::from_millis(50));
    let mut buf = [0u8; 64];
    let arrived = match srv.recv_from(&mut buf) {
        Ok((n, peer)) => {
            srv.send_to(&buf[..n], peer).unwrap();
            true
        }
        Err(_) => false,
    };
    s.run_for(Duration::from_millis(50));
    (arrived, cli.recv_from(&mut buf).is_ok())
}

#[test]
fn stateful_firewall_lets_replies_of_allowed_connections_in_and_nothing_else() {
    for workers in [1, 2] {
        let (mut s, inside, r, outside, fw) = lab(workers, STATEFUL);
        // UDP out and its reply back in.
        assert_eq!(
            udp_exchange(&mut s, inside, outside, "198.18.2.2:7".parse().unwrap()),
            (true, true),
            "workers={workers}"
        );
        // UDP from outside: dropped at the router.
        assert_eq!(
            udp_exchange(&mut s, outside, inside, "198.18.1.2:9".parse().unwrap()),
            (false, false)
        );
        // TCP from inside: connects, and data flows both ways.
        let l = s
            .host(outside)
            .tcp_listen("198.18.2.2:80".parse::<SocketAddr>().unwrap(), 8)
            .unwrap();
        l.set_nonblocking(true).unwrap();
        let c = s
            .host(inside)
            .tcp_connect_nonblocking("198.18.2.2:80".parse::<SocketAddr>().unwrap())
            .unwrap();
        s.run_for(Duration::from_millis(100));
        let (srv, _) = l.accept().expect("connection through the firewall");
        srv.set_nonblocking(true).unwrap();
        use std::io::{Read, Write};
        (&c).write_all(b"GET").unwrap();
        s.run_for(Duration::from_millis(50));
        let mut buf = [0u8; 16];
        assert_eq!((&srv).read(&mut buf).unwrap(), 3);
        (&srv).write_all(b"200 OK").unwrap();
        s.run_for(Duration::from_millis(50));
        assert_eq!((&c).read(&mut buf).unwrap(), 6);
        // TCP from outside to a port behind the firewall: refused with a reset.
        let l2 = s
            .host(inside)
            .tcp_listen("198.18.1.2:80".parse::<SocketAddr>().unwrap(), 8)
            .unwrap();
        l2.set_nonblocking(true).unwrap();
        let c2 = s
            .host(outside)
            .tcp_connect_nonblocking("198.18.1.2:80".parse::<SocketAddr>().unwrap())
            .unwrap();
        s.run_for(Duration::from_millis(100));
        assert!(l2.accept().is_err(), "nothing reached the inside host");
        assert_eq!(
            c2.take_error().unwrap().map(|e| e.kind()),
            Some(std::io::ErrorKind::ConnectionRefused),
            "the firewall's reset refused the connection"
        );
        // UDP to port 53 inside: ICMP port unreachable from the firewall.
        let before = s.host(outside).stats().icmp.inunreach;
        let _ = udp_exchange(&mut s, outside, inside, "198.18.1.2:53".parse().unwrap());
        assert_eq!(s.host(outside).stats().icmp.inunreach, before + 1);
        let st = s.host(r).stats();
        assert!(st.pfil.rejected >= 2, "{:?}", st.pfil);
        assert!(fw.states() >= 2, "UDP and TCP states");
        let show = fw.show();
        let count = |rule: &str| -> u64 {
            show.lines()
                .find(|l| l.starts_with(rule))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        // A state's packets, both ways, count on the rule that made it (as FreeBSD).
        assert!(
            count("00200") >= 8,
            "TCP both ways through its state: {show}"
        );
        assert!(count("00300") >= 2, "UDP and its reply: {show}");
        assert_eq!(count("00500"), 1, "{show}");
        assert_eq!(count("00600"), 1, "{show}");
        assert!(count("00700") >= 1, "the unsolicited UDP: {show}");
    }
}
