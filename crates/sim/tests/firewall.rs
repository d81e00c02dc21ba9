//! ipfw on a stack's pfil points (issue 6), in virtual time: what a stateful firewall
//! on a router lets through, and how refused packets are answered.

mod common;

use dev::mem::WireConfig;
use dev::{Duration, Queue};
use net::ipfw::Ipfw;
use sim::{HostId, Sim};
use std::net::{Ipv4Addr, SocketAddr};
use wire::EthernetAddress;

/// inside (198.18.1.2) — R — outside (198.18.2.2), R running `rules`.
fn lab(workers: usize, rules: &str) -> (Sim, HostId, HostId, HostId, std::sync::Arc<Ipfw>) {
    let (s, inside, r, outside) = sim::routed(21, workers);
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
    udp_exchange_from(s, from, Ipv4Addr::UNSPECIFIED, to_host, to)
}

/// [`udp_exchange`] from the source address `src` of `from`.
fn udp_exchange_from(
    s: &mut Sim,
    from: HostId,
    src: Ipv4Addr,
    to_host: HostId,
    to: SocketAddr,
) -> (bool, bool) {
    let srv = s.host(to_host).udp_bind(to).unwrap();
    srv.set_nonblocking(true).unwrap();
    let cli = s.host(from).udp_bind(SocketAddr::from((src, 0))).unwrap();
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
        let count = |rule: &str| rule_packets(&show, rule).unwrap_or(0);
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

// Queues of 300 KB (200 full-size packets): more than the 256 KB windows can fill
// (33 packets are in flight at 10 Mbit/s x 40 ms), so no loss; with 50 or 100
// slots slow start overflows the queue and the transfer spends its time in loss
// recovery. In bytes, since 200 slots are beyond FreeBSD's pipe_slot_limit (100)
// and 300 KB within its pipe_byte_limit (1 MB).
const SHAPED: &str = "
pipe 1 config bw 10Mbit/s delay 20ms queue 300KB
pipe 2 config bw 10Mbit/s delay 20ms queue 300KB
add 100 pipe 1 ip from 198.18.1.0/24 to any in
add 200 pipe 2 ip from any to 198.18.1.0/24 in
add 300 allow ip from any to any
";

#[test]
fn a_pipe_shapes_tcp_to_its_bandwidth_and_delays_pings_by_its_delay() {
    for workers in [1, 2] {
        pipe_case(workers);
    }
}

fn pipe_case(workers: usize) {
    let (mut s, inside, _r, outside, fw) = lab(workers, SHAPED);
    // ping: 20 ms each way plus the transmission of 98 bytes at 10 Mbit/s, twice.
    let p = s.host(inside).ping_socket(0).unwrap();
    p.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 256];
    // The first echo also resolves ARP on both links: measure a later one.
    for seq in 0..2u16 {
        p.send_echo(Ipv4Addr::new(198, 18, 2, 2), seq, &[7u8; 56])
            .unwrap();
        s.run_for(Duration::from_secs(1));
    }
    while p.recv_reply(&mut buf).is_ok() {}
    let t0 = s.now();
    p.send_echo(Ipv4Addr::new(198, 18, 2, 2), 9, &[7u8; 56])
        .unwrap();
    let mut rtt = None;
    for _ in 0..20_000 {
        s.run_for(Duration::from_micros(10));
        if p.recv_reply(&mut buf).is_ok() {
            rtt = Some(s.now().saturating_duration_since(t0));
            break;
        }
    }
    let rtt = rtt.expect("the echo came back");
    let want = Duration::from_millis(40) + Duration::from_nanos(2 * 98 * 8 * 100);
    let diff = rtt.abs_diff(want);
    assert!(
        diff < Duration::from_micros(100),
        "RTT {rtt:?}, expected {want:?} (two 20 ms pipes, 98-byte packets at 10 Mbit/s)"
    );
    // TCP: 3 MB inside -> outside; the rate over the last 2 MB is the pipe's.
    let l = s
        .host(outside)
        .tcp_listen("198.18.2.2:5001".parse::<SocketAddr>().unwrap(), 8)
        .unwrap();
    l.set_nonblocking(true).unwrap();
    let c = s
        .host(inside)
        .tcp_connect_nonblocking("198.18.2.2:5001".parse::<SocketAddr>().unwrap())
        .unwrap();
    c.set_nonblocking(true).unwrap();
    s.run_for(Duration::from_millis(200));
    let (srv, _) = l.accept().expect("connected through the pipes");
    srv.set_nonblocking(true).unwrap();
    use std::io::{Read, Write};
    let total = 3_000_000usize;
    let chunk = vec![0x5au8; 65536];
    let (mut sent, mut got) = (0usize, 0usize);
    let mut rbuf = vec![0u8; 65536];
    let mut mark = None;
    let mut end = None;
    let start = s.now();
    while got < total {
        while sent < total {
            match (&c).write(&chunk[..(total - sent).min(chunk.len())]) {
                Ok(n) => sent += n,
                Err(_) => break,
            }
        }
        s.run_for(Duration::from_millis(1));
        while let Ok(n) = (&srv).read(&mut rbuf) {
            if n == 0 {
                break;
            }
            got += n;
        }
        if mark.is_none() && got >= 1_000_000 {
            mark = Some((s.now(), got, out_bytes(&fw)));
        }
        // Stop measuring before the last window drains the pipe.
        if end.is_none() && got >= 2_500_000 {
            end = Some((s.now(), got, out_bytes(&fw)));
        }
        assert!(
            s.now().saturating_duration_since(start) < Duration::from_secs(30),
            "transfer stalled at {got}"
        );
    }
    let (t1, g1, b1) = mark.unwrap();
    let (t2, g2, b2) = end.unwrap();
    let secs = t2.saturating_duration_since(t1).as_secs_f64();
    let goodput = (g2 - g1) as f64 * 8.0 / secs / 1e6;
    // What left pipe 1 (IP packets) in the same time: the pipe's own rate.
    let wire = (b2 - b1) as f64 * 8.0 / secs / 1e6;
    assert!(
        (wire - 10.0).abs() / 10.0 < 0.02,
        "pipe 1 carried {wire:.3} Mbit/s, expected 10 within 2%"
    );
    // On the wire each 1,448-byte segment is a 1,500-byte IP packet (12 bytes of
    // timestamps), so 10 Mbit/s carries 9.653 Mbit/s of data.
    let expect = 10.0 * 1448.0 / 1500.0;
    assert!(
        (goodput - expect).abs() / expect < 0.02,
        "goodput {goodput:.3} Mbit/s, expected {expect:.3} (10 Mbit/s of 1500-byte packets) within 2%"
    );
    let pipes = fw.pipes();
    assert_eq!(pipes.len(), 2);
    eprintln!("goodput {goodput:.3} Mbit/s, RTT {rtt:?}, pipes {pipes:?}");
}

/// The packet count `ipfw show` gives the rule numbered `rule` (as `show` prints
/// it, `00100`), if that rule is listed.
fn rule_packets(show: &str, rule: &str) -> Option<u64> {
    show.lines()
        .find(|l| l.starts_with(rule))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
}

/// Bytes pipe 1 has let out so far.
fn out_bytes(fw: &Ipfw) -> u64 {
    fw.pipes()
        .iter()
        .find(|p| p.0 == 1)
        .map_or(0, |p| p.2.out_bytes)
}

#[test]
fn limit_caps_the_connections_a_source_may_open() {
    let rules = "
add 100 check-state
add 200 allow tcp from 198.18.1.0/24 to any 80 setup limit src-addr 2
add 300 allow ip from any to any
";
    let (mut s, inside, _r, outside, fw) = lab(1, rules);
    let l = s
        .host(outside)
        .tcp_listen("198.18.2.2:80".parse::<SocketAddr>().unwrap(), 8)
        .unwrap();
    l.set_nonblocking(true).unwrap();
    let conns: Vec<_> = (0..3)
        .map(|_| {
            let c = s
                .host(inside)
                .tcp_connect_nonblocking("198.18.2.2:80".parse::<SocketAddr>().unwrap())
                .unwrap();
            s.run_for(Duration::from_millis(50));
            c
        })
        .collect();
    s.run_for(Duration::from_secs(2));
    let mut accepted = 0;
    while l.accept().is_ok() {
        accepted += 1;
    }
    assert_eq!(
        accepted, 2,
        "the third SYN (and its retransmissions) dropped"
    );
    assert_eq!(fw.states(), 2);
    drop(conns);
}

#[test]
fn a_forwarded_packet_going_out_matches_recv_and_xmit_together() {
    for workers in [1, 2] {
        let (mut s, inside, r, outside, fw) = lab(workers, "add 1000 allow ip from any to any\n");
        let names: Vec<String> = s
            .host(r)
            .interfaces()
            .iter()
            .map(|i| i.name.clone())
            .collect();
        let (from_inside, to_outside) = (&names[0], &names[1]);
        // Through the command interface, as `ipfw add` on a running node.
        fw.command(&format!(
            "add 100 deny udp from any to any out recv {from_inside} xmit {to_outside}"
        ))
        .unwrap();
        let to_out = SocketAddr::from(([198, 18, 2, 2], 7001));
        let to_in = SocketAddr::from(([198, 18, 1, 2], 7002));
        assert_eq!(
            udp_exchange(&mut s, inside, outside, to_out),
            (false, false),
            "{workers} workers: inside to outside is denied on the way out"
        );
        assert_eq!(
            udp_exchange(&mut s, outside, inside, to_in),
            (true, false),
            "{workers} workers: outside to inside passes; its answer does not"
        );
        let show = fw.show();
        assert_eq!(rule_packets(&show, "00100"), Some(2), "{show}");
    }
}

#[test]
fn a_tag_set_on_the_way_in_is_seen_on_the_way_out() {
    // Tags ride in the packet's header from the router's in pass to its out pass,
    // as FreeBSD's mbuf tags do; the out rules see no source interface or address
    // test, only the tag.
    let rules = "
add 100 count udp from 198.18.1.0/24 to any in tag 7
add 200 deny udp from any to any out tagged 7
add 300 allow ip from any to any
";
    for workers in [1, 2] {
        let (mut s, inside, _r, outside, fw) = lab(workers, rules);
        assert_eq!(
            udp_exchange(
                &mut s,
                inside,
                outside,
                SocketAddr::from(([198, 18, 2, 2], 7001))
            ),
            (false, false),
            "{workers} workers: tagged coming in from inside, denied going out"
        );
        assert_eq!(
            udp_exchange(
                &mut s,
                outside,
                inside,
                SocketAddr::from(([198, 18, 1, 2], 7002))
            ),
            (true, false),
            "{workers} workers: the answer from inside is tagged and denied"
        );
        assert_eq!(fw.tags_lost(), 0);
    }
}

#[test]
fn verrevpath_follows_the_routes_back_to_the_source() {
    let rules = "
add 100 deny ip from any to any in not verrevpath
add 200 allow ip from any to any
";
    for workers in [1, 2] {
        let (mut s, inside, r, outside, fw) = lab(workers, rules);
        // outside also speaks from 198.18.3.2, on a network the router knows no
        // route to at first.
        let oif = s.host(outside).interfaces()[0].index;
        let alias = Ipv4Addr::new(198, 18, 3, 2);
        s.host(outside)
            .add_address(
                oif,
                net::InetAddr {
                    addr: alias,
                    prefix_len: 24,
                },
            )
            .unwrap();
        let to = |p: u16| SocketAddr::from(([198, 18, 1, 2], p));
        let net3: route::IpPrefix = "198.18.3.0/24".parse().unwrap();
        // A source on a connected network, arriving by that network's interface.
        assert_eq!(
            udp_exchange(&mut s, outside, inside, to(7001)),
            (true, true)
        );
        // No route back: refused.
        assert!(!udp_exchange_from(&mut s, outside, alias, inside, to(7002)).0);
        // The route back leaves by the interface it came in on: let through.
        s.host(r)
            .add_route_via(net3, Ipv4Addr::new(198, 18, 2, 2).into())
            .unwrap();
        s.run_for(Duration::from_millis(10));
        assert_eq!(
            udp_exchange_from(&mut s, outside, alias, inside, to(7003)),
            (true, true)
        );
        // The route back leaves by the other interface: refused.
        s.host(r).delete_route(net3, None).unwrap();
        s.host(r)
            .add_route_via(net3, Ipv4Addr::new(198, 18, 1, 2).into())
            .unwrap();
        s.run_for(Duration::from_millis(10));
        assert!(!udp_exchange_from(&mut s, outside, alias, inside, to(7004)).0);
        let show = fw.show();
        assert_eq!(
            rule_packets(&show, "00100"),
            Some(2),
            "{workers} workers: {show}"
        );
    }
}

#[test]
fn wf2q_queues_share_a_pipe_by_their_weights() {
    // Two UDP flows, each offering 16 Mbit/s, through queues of weight 1 and 3 on
    // a 10 Mbit/s WF2Q+ pipe: both stay backlogged, so they get a quarter and
    // three quarters of the pipe.
    let rules = "
pipe 1 config bw 10Mbit/s type wf2q+
queue 1 config pipe 1 weight 1 queue 30
queue 2 config pipe 1 weight 3 queue 30
add 100 queue 1 udp from any to any 9001 in
add 200 queue 2 udp from any to any 9002 in
add 300 allow ip from any to any
";
    for workers in [1, 2] {
        let (mut s, inside, _r, outside, fw) = lab(workers, rules);
        let srv: Vec<_> = [9001u16, 9002]
            .iter()
            .map(|&p| {
                let u = s
                    .host(outside)
                    .udp_bind(SocketAddr::from(([198, 18, 2, 2], p)))
                    .unwrap();
                u.set_nonblocking(true).unwrap();
                u
            })
            .collect();
        let cli = s
            .host(inside)
            .udp_bind("0.0.0.0:0".parse::<SocketAddr>().unwrap())
            .unwrap();
        let payload = [0x5au8; 972]; // 1,000-byte IPv4 packets
        let mut got = [0u64; 2];
        let mut buf = [0u8; 2048];
        // 2 s: a datagram of each flow every 500 us; count the second second only.
        for i in 0..4000u32 {
            for port in [9001u16, 9002] {
                cli.send_to(&payload, SocketAddr::from(([198, 18, 2, 2], port)))
                    .unwrap();
            }
            s.run_for(Duration::from_micros(500));
            for (k, u) in srv.iter().enumerate() {
                while u.recv_from(&mut buf).is_ok() {
                    if i >= 2000 {
                        got[k] += 1;
                    }
                }
            }
        }
        let total = got[0] + got[1];
        // 10 Mbit/s of 1,000-byte packets (plus 14 bytes of Ethernet, not charged
        // by the pipe): 1,250 per second.
        assert!(
            (1200..=1260).contains(&total),
            "{workers} workers: {got:?} delivered in 1 s"
        );
        let ratio = got[1] as f64 / got[0] as f64;
        assert!(
            (2.8..=3.2).contains(&ratio),
            "{workers} workers: weight 3 against 1 got {got:?} ({ratio:.2})"
        );
        assert!(fw.dummynet_drops() > 0, "the queues overflowed, as offered");
    }
}

#[test]
fn expired_states_are_swept_and_give_back_their_limit() {
    // UDP states live 10 s (dyn_udp_lifetime). Two flows take the source's limit;
    // a third is refused. Once the two have been quiet past their lifetime, the
    // router's sweep drops them, with no packet of theirs to look them up, and the
    // source may open new flows again.
    let rules = "
add 100 check-state
add 200 allow udp from 198.18.1.0/24 to any limit src-addr 2
add 300 deny ip from any to any
";
    for workers in [1, 2] {
        let (mut s, inside, _r, outside, fw) = lab(workers, rules);
        let to = |p: u16| SocketAddr::from(([198, 18, 2, 2], p));
        assert_eq!(
            udp_exchange(&mut s, inside, outside, to(7001)),
            (true, true)
        );
        assert_eq!(
            udp_exchange(&mut s, inside, outside, to(7002)),
            (true, true)
        );
        assert_eq!(
            udp_exchange(&mut s, inside, outside, to(7003)),
            (false, false),
            "{workers} workers: the limit holds"
        );
        assert_eq!(fw.states(), 2);
        assert_eq!(fw.expired_states(), 0);
        s.run_for(Duration::from_secs(12));
        assert_eq!(fw.states(), 0, "{workers} workers: swept while idle");
        assert_eq!(fw.expired_states(), 2);
        assert_eq!(
            udp_exchange(&mut s, inside, outside, to(7004)),
            (true, true),
            "{workers} workers: the limit is free again"
        );
        assert_eq!(fw.states(), 1);
    }
}

#[test]
fn a_small_state_table_keeps_serving_flows_that_come_and_go() {
    // 32 states in one shard: a flow every second, each living 10 s,
    // so about ten are alive at a time. Without the sweep the table would fill
    // after a few dozen and refuse every new flow.
    let cfg = fw::RulesetConfig {
        states: fw::state::StateConfig {
            max_states: 32,
            ..Default::default()
        },
        state_shards: 1,
        ..Default::default()
    };
    let mut s = Sim::new(22);
    let inside = s.add_host("inside", 1);
    let outside = s.add_host("outside", 1);
    s.link(
        inside,
        "198.18.1.2/24",
        outside,
        "198.18.1.1/24",
        WireConfig::default(),
    );
    let fw = Ipfw::new(cfg, 1).unwrap();
    fw.load(
        "add 100 allow udp from any to me 9 keep-state
add 200 deny ip from any to any
",
    )
    .unwrap();
    fw.attach(s.host(outside));
    let dst = SocketAddr::from(([198, 18, 1, 1], 9));
    let mut refused = 0;
    for i in 0..100u16 {
        let (arrived, _) = udp_exchange(&mut s, inside, outside, dst);
        if !arrived {
            refused += 1;
        }
        assert!(fw.states() <= 32, "flow {i}");
        s.run_for(Duration::from_millis(900));
    }
    assert_eq!(refused, 0);
    assert!(fw.expired_states() >= 80, "{}", fw.expired_states());
}

/// Datagrams that reach `outside` of `n` sent by `inside` through the router.
fn delivered(s: &mut Sim, inside: HostId, outside: HostId, n: usize) -> usize {
    let srv = s
        .host(outside)
        .udp_bind("198.18.2.2:9".parse::<SocketAddr>().unwrap())
        .unwrap();
    srv.set_nonblocking(true).unwrap();
    let cli = s
        .host(inside)
        .udp_bind("0.0.0.0:0".parse::<SocketAddr>().unwrap())
        .unwrap();
    let mut got = 0;
    let mut buf = [0u8; 64];
    for _ in 0..n {
        cli.send_to(b"x", "198.18.2.2:9".parse::<SocketAddr>().unwrap())
            .unwrap();
        s.run_for(Duration::from_micros(200));
        while srv.recv_from(&mut buf).is_ok() {
            got += 1;
        }
    }
    s.run_for(Duration::from_millis(10));
    while srv.recv_from(&mut buf).is_ok() {
        got += 1;
    }
    got
}

#[test]
fn prob_and_plr_drop_within_statistical_bounds_and_repeat_for_a_seed() {
    let n = 2000;
    // prob 0.3 deny: 70% pass; sd = sqrt(2000 * 0.3 * 0.7) = 20.5, bounds at 4 sd.
    // (`in`: the rules see a routed packet twice, arriving and leaving.)
    let prob = "add 100 prob 0.3 deny udp from any to any in\nadd 200 allow ip from any to any\n";
    // plr 0.1: 90% pass; sd = 13.4.
    let plr = "pipe 1 config plr 0.1\nadd 100 pipe 1 udp from any to any in\nadd 200 allow ip from any to any\n";
    for (rules, mean, sd) in [(prob, 1400.0, 20.5), (plr, 1800.0, 13.4)] {
        let mut runs = Vec::new();
        for _ in 0..2 {
            let (mut s, inside, _r, outside, _fw) = lab(1, rules);
            // Resolve ARP first, with a datagram the rules may drop: not counted.
            let _ = delivered(&mut s, inside, outside, 20);
            runs.push(delivered(&mut s, inside, outside, n));
        }
        let got = runs[0] as f64;
        assert!(
            (got - mean).abs() < 4.0 * sd,
            "{rules}: {got} of {n} delivered, expected {mean} +- {}",
            4.0 * sd
        );
        assert_eq!(runs[0], runs[1], "the same seed gives the same drops");
    }
}

/// The rules between "```sh" after `marker` in `doc` and the block's end, loaded.
fn doc_rules(doc: &str, marker: &str) -> std::sync::Arc<Ipfw> {
    let start = doc.find(marker).expect("the documented example");
    let end = start + doc[start..].find("```").expect("its end");
    let fw = Ipfw::new(fw::RulesetConfig::default(), 1).unwrap();
    fw.load(&doc[start..end]).unwrap_or_else(|e| panic!("{e}"));
    fw
}

#[test]
fn the_documented_rules_files_load() {
    let fw = doc_rules(
        include_str!("../../../docs/firewall.md"),
        "# a router's stateful firewall",
    );
    assert_eq!(fw.pipes().len(), 1);
    assert!(fw.show().contains("00800"), "{}", fw.show());
    let fw = doc_rules(
        include_str!("../../../README.md"),
        "# the inside, 198.18.1.0/24",
    );
    assert_eq!(fw.pipes().len(), 1);
    assert!(fw.show().contains("00700"), "{}", fw.show());
}

#[test]
fn layer2_rules_see_frames_only_when_the_layer2_pass_is_on() {
    for layer2 in [false, true] {
        let (mut s, inside, r, outside, _) = lab(1, "add 1 allow ip from any to any");
        let mac = s.host(inside).interfaces()[0].mac;
        let fw = Ipfw::new(fw::RulesetConfig::default(), 1).unwrap();
        fw.load(&format!(
            "add 50 allow ip from any to any mac-type arp layer2
add 100 deny ip from any to any mac any {mac} layer2
add 200 allow ip from any to any
"
        ))
        .unwrap();
        // A second firewall on the router: the lab's allows everything.
        if layer2 {
            fw.attach_layer2(s.host(r));
        }
        fw.attach(s.host(r));
        let got = udp_exchange(&mut s, inside, outside, "198.18.2.2:7".parse().unwrap());
        let show = fw.show();
        if layer2 {
            assert_eq!(got, (false, false), "frames from {mac} dropped at layer 2");
            assert!(!show.contains("00100          0 "), "{show}");
        } else {
            assert_eq!(got, (true, true), "mac rules never match at layer 3");
            assert!(show.contains("00100          0 "), "{show}");
        }
    }
}

/// A packet an outbound pipe holds has been forwarded (FreeBSD's ip_forward counts
/// it when ip_output takes it): `ip.forward` counts it once, whether a pipe held
/// it at the router's output, at its input, or nothing did.
#[test]
fn packets_through_a_pipe_are_counted_forwarded_once() {
    for rules in [
        "add 100 allow ip from any to any\n",
        "pipe 1 config delay 5ms\nadd 100 pipe 1 ip from any to any out\nadd 200 allow ip from any to any\n",
        "pipe 1 config delay 5ms\nadd 100 pipe 1 ip from any to any in\nadd 200 allow ip from any to any\n",
    ] {
        let (mut s, inside, r, outside, _fw) = lab(1, rules);
        for (from, to) in [(inside, "198.18.2.2:7"), (outside, "198.18.1.2:7")] {
            let to: SocketAddr = to.parse().unwrap();
            let to_host = if from == inside { outside } else { inside };
            assert_eq!(udp_exchange(&mut s, from, to_host, to), (true, true), "{rules}");
        }
        let st = s.host(r).stats();
        // Two exchanges, each a datagram and its echo.
        assert_eq!((st.ip.forward, st.ip.cantforward), (4, 0), "{rules}");
    }
}

/// inside hub (a at 198.18.1.2, and a raw port) — R — outside hub (b at
/// 198.18.2.2, and a raw port), R running `rules` on `workers` workers: a
/// keep-state router with a hostile host outside, which writes its frames by hand
/// (as 198.18.2.66, or as b), and an inside port to play an inside host that a
/// real stack would not be (198.18.1.77).
struct Hostile {
    s: Sim,
    inside: HostId,
    r: HostId,
    fw: std::sync::Arc<Ipfw>,
    in_port: Box<dyn Queue>,
    out_port: Box<dyn Queue>,
    r_in: EthernetAddress,
    r_out: EthernetAddress,
}

const EVIL_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x66]);
const EVIL: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 66);
const INSIDE: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 2);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 2);
const ACCOMPLICE: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 77);

fn hostile(workers: usize, cfg: fw::RulesetConfig, rules: &str) -> Hostile {
    let mut s = Sim::new(45);
    let inside = s.add_host("a", workers);
    let r = s.add_host("r", workers);
    let outside = s.add_host("b", workers);
    let hin = s.add_hub(WireConfig::default());
    let hout = s.add_hub(WireConfig::default());
    s.connect(inside, hin, "198.18.1.2/24");
    let i_in = s.connect(r, hin, "198.18.1.1/24");
    let i_out = s.connect(r, hout, "198.18.2.1/24");
    s.connect(outside, hout, "198.18.2.2/24");
    for i in s.host(r).interfaces() {
        s.host(r).set_forwarding(i.index, true, true).unwrap();
    }
    s.host(inside)
        .set_default_gateway(Some(Ipv4Addr::new(198, 18, 1, 1)));
    s.host(outside)
        .set_default_gateway(Some(Ipv4Addr::new(198, 18, 2, 1)));
    let in_port = s.attach_raw(hin);
    let out_port = s.attach_raw(hout);
    let mac = |s: &Sim, i: net::IfIndex| {
        s.host(r)
            .interfaces()
            .iter()
            .find(|x| x.index == i)
            .unwrap()
            .mac
    };
    let (r_in, r_out) = (mac(&s, i_in), mac(&s, i_out));
    let fw = Ipfw::new(cfg, workers).unwrap();
    fw.load(rules).unwrap_or_else(|e| panic!("{e}"));
    fw.attach(s.host(r));
    Hostile {
        s,
        inside,
        r,
        fw,
        in_port,
        out_port,
        r_in,
        r_out,
    }
}

impl Hostile {
    /// A packet written outside, to R; then 20 ms.
    fn send_outside(&mut self, src: Ipv4Addr, dst: Ipv4Addr, proto: u8, payload: &[u8]) {
        let m = common::ip4_frame(self.r_out, EVIL_MAC, src, dst, proto, payload);
        let now = self.s.now();
        self.out_port.tx_burst(now, &mut vec![m]);
        self.s.run_for(Duration::from_millis(20));
    }

    /// A packet written inside, to R; then 20 ms.
    fn send_inside(&mut self, src: Ipv4Addr, dst: Ipv4Addr, proto: u8, payload: &[u8]) {
        let m = common::ip4_frame(self.r_in, EVIL_MAC, src, dst, proto, payload);
        let now = self.s.now();
        self.in_port.tx_burst(now, &mut vec![m]);
        self.s.run_for(Duration::from_millis(20));
    }

    /// IP packets the inside host has received.
    fn inside_got(&self) -> u64 {
        self.s.host(self.inside).stats().ip.total
    }

    /// Packets the ruleset's `deny` (rule 700) dropped.
    fn denied(&self) -> u64 {
        rule_packets(&self.fw.show(), "00700").unwrap_or(0)
    }
}

/// An ICMP message of `ty` and identifier `id` (sequence 1, no data).
fn icmp_msg(ty: u8, id: u16) -> Vec<u8> {
    let mut m = vec![ty, 0, 0, 0];
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&[0, 1]);
    m
}

/// An ICMP error of `ty`/`code` quoting `quote`.
fn icmp_err(ty: u8, code: u8, quote: &[u8]) -> Vec<u8> {
    let mut m = vec![ty, code, 0, 0, 0, 0, 0, 0];
    m.extend_from_slice(quote);
    m
}

/// A TCP header from `sport` to `dport` with `flags`, no options.
fn tcp_hdr(sport: u16, dport: u16, flags: u8) -> Vec<u8> {
    let mut h = vec![0u8; 20];
    h[0..2].copy_from_slice(&sport.to_be_bytes());
    h[2..4].copy_from_slice(&dport.to_be_bytes());
    h[4..8].copy_from_slice(&1000u32.to_be_bytes());
    if flags & 0x10 != 0 {
        h[8..12].copy_from_slice(&2001u32.to_be_bytes());
    }
    h[12] = 5 << 4;
    h[13] = flags;
    h[14..16].copy_from_slice(&65535u16.to_be_bytes());
    h
}

#[test]
fn an_inside_pings_state_admits_its_echo_reply_and_no_other_icmp() {
    for workers in [1, 2] {
        let mut h = hostile(workers, fw::RulesetConfig::default(), STATEFUL);
        let p = h.s.host(h.inside).ping_socket(0x4242).unwrap();
        p.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 64];
        p.send_echo(B, 1, b"ping").unwrap();
        h.s.run_for(Duration::from_millis(100));
        assert!(p.recv_reply(&mut buf).is_ok(), "the ping's reply came back");
        // While the inside pings B, B's address (or anyone's) sends other ICMP in:
        // a timestamp request, an address mask request, echo requests of this id
        // and another, a reply to another id. None reaches the inside host.
        for (ty, id, what) in [
            (13, 0x4242, "timestamp request"),
            (17, 0x4242, "address mask request"),
            (8, 0x4242, "echo request, the ping's id"),
            (8, 0x4243, "echo request, another id"),
            (0, 0x4243, "echo reply to another id"),
        ] {
            let (got, denied) = (h.inside_got(), h.denied());
            h.send_outside(B, INSIDE, 1, &icmp_msg(ty, id));
            assert_eq!(h.inside_got(), got, "{workers} workers: {what} let in");
            assert_eq!(h.denied(), denied + 1, "{workers} workers: {what} denied");
        }
        // The reply of the ping's id does come in (to the ping socket).
        let got = h.inside_got();
        h.send_outside(B, INSIDE, 1, &icmp_msg(0, 0x4242));
        assert_eq!(h.inside_got(), got + 1, "{workers} workers: the echo reply");
        assert!(p.recv_reply(&mut buf).is_ok());
        let states = h.fw.list_states(h.s.now(), 10);
        assert!(
            states
                .iter()
                .any(|l| l.contains("STATE icmp 198.18.1.2 16962 <-> 198.18.2.2 16962")),
            "{states:?}"
        );
    }
}

#[test]
fn an_icmp_error_passes_only_when_it_quotes_a_live_states_packet() {
    for workers in [1, 2] {
        let mut h = hostile(workers, fw::RulesetConfig::default(), STATEFUL);
        // UDP to a port B has no socket on: B's port unreachable quotes the
        // datagram, whose state lets it in (there is no ICMP state to match).
        let cli =
            h.s.host(h.inside)
                .udp_bind("0.0.0.0:0".parse::<SocketAddr>().unwrap())
                .unwrap();
        cli.set_nonblocking(true).unwrap();
        let unreach = h.s.host(h.inside).stats().icmp.inunreach;
        cli.send_to(b"hi", SocketAddr::from((B, 7))).unwrap();
        h.s.run_for(Duration::from_millis(100));
        assert_eq!(
            h.s.host(h.inside).stats().icmp.inunreach,
            unreach + 1,
            "{workers} workers: B's port unreachable came in"
        );
        let sport = cli.local_addr().unwrap().port();
        let udp = |sport: u16, dport: u16| {
            let mut u = [0u8; 8];
            u[0..2].copy_from_slice(&sport.to_be_bytes());
            u[2..4].copy_from_slice(&dport.to_be_bytes());
            u[4..6].copy_from_slice(&10u16.to_be_bytes());
            u
        };
        // A router's time exceeded about the same datagram passes too...
        let quote = common::ip4_quote(INSIDE, B, 17, udp(sport, 7));
        let got = h.inside_got();
        h.send_outside(EVIL, INSIDE, 1, &icmp_err(11, 0, &quote));
        assert_eq!(h.inside_got(), got + 1, "{workers} workers: time exceeded");
        // ...but not one about a flow with no state, even while the inside pings B
        // (whose ICMP state is the ping's, not the address pair's), nor one sent
        // to another host than the quoted packet's source, nor one quoting
        // nothing.
        let p = h.s.host(h.inside).ping_socket(0x77).unwrap();
        p.send_echo(B, 1, b"ping").unwrap();
        h.s.run_for(Duration::from_millis(100));
        let no_state = common::ip4_quote(INSIDE, B, 17, udp(5555, 7));
        let other_dst = common::ip4_quote(Ipv4Addr::new(198, 18, 1, 3), B, 17, udp(sport, 7));
        for (src, quote, what) in [
            (B, no_state.clone(), "from B, about no state"),
            (EVIL, no_state, "from a router, about no state"),
            (EVIL, other_dst, "about another host's packet"),
            (EVIL, Vec::new(), "quoting nothing"),
        ] {
            let (got, denied) = (h.inside_got(), h.denied());
            h.send_outside(src, INSIDE, 1, &icmp_err(3, 1, &quote));
            assert_eq!(h.inside_got(), got, "{workers} workers: {what}");
            assert_eq!(h.denied(), denied + 1, "{workers} workers: {what}");
        }
        assert_eq!(h.fw.states(), 2, "UDP and the ping: no error made one");
    }
}

#[test]
fn syns_crossing_without_a_handshake_get_the_syn_lifetime_and_a_handshake_the_long_one() {
    for workers in [1, 2] {
        let mut h = hostile(workers, fw::RulesetConfig::default(), STATEFUL);
        // An inside SYN out, and an outside SYN back to its ports: no ACK either way.
        h.send_inside(ACCOMPLICE, EVIL, 6, &tcp_hdr(40000, 443, 0x02));
        let got = h.s.host(h.r).stats().pfil.ip_in_drop;
        h.send_outside(EVIL, ACCOMPLICE, 6, &tcp_hdr(443, 40000, 0x02));
        assert_eq!(
            h.s.host(h.r).stats().pfil.ip_in_drop,
            got,
            "the SYN matched the state"
        );
        let life = |h: &Hostile| {
            let l = h.fw.list_states(h.s.now(), 10);
            l.iter()
                .find(|l| l.contains("STATE tcp 198.18.1.77 40000"))
                .map(|l| l.split(['(', 's']).nth(1).unwrap().parse::<u64>().unwrap())
        };
        assert!(
            life(&h).unwrap() <= 20,
            "{workers} workers: {:?}",
            h.fw.list_states(h.s.now(), 10)
        );
        // More SYNs from outside do not restart it, and at 20 s it is gone: the
        // outside's next packet is refused.
        h.s.run_for(Duration::from_secs(10));
        h.send_outside(EVIL, ACCOMPLICE, 6, &tcp_hdr(443, 40000, 0x02));
        h.s.run_for(Duration::from_secs(11));
        assert_eq!(
            life(&h),
            None,
            "{workers} workers: the half-open state is gone"
        );
        let denied = h.denied();
        h.send_outside(EVIL, ACCOMPLICE, 6, &tcp_hdr(443, 40000, 0x10));
        assert_eq!(h.denied(), denied + 1, "{workers} workers: no pinhole left");

        // A handshake completed both ways: SYN, SYN-ACK, ACK. 300 s.
        h.send_inside(ACCOMPLICE, EVIL, 6, &tcp_hdr(40001, 443, 0x02));
        h.send_outside(EVIL, ACCOMPLICE, 6, &tcp_hdr(443, 40001, 0x12));
        h.send_inside(ACCOMPLICE, EVIL, 6, &tcp_hdr(40001, 443, 0x10));
        let l = h.fw.list_states(h.s.now(), 10);
        let line = l.iter().find(|l| l.contains("40001")).unwrap();
        let left: u64 = line.split(['(', 's']).nth(1).unwrap().parse().unwrap();
        assert!(left > 290, "{workers} workers: {line}");
        h.s.run_for(Duration::from_secs(30));
        let denied = h.denied();
        h.send_outside(EVIL, ACCOMPLICE, 6, &tcp_hdr(443, 40001, 0x10));
        assert_eq!(
            h.denied(),
            denied,
            "{workers} workers: established, still open at 30 s"
        );
    }
}

#[test]
fn a_full_state_table_counts_its_refusals_and_shows_its_count() {
    let mut cfg = fw::RulesetConfig::default();
    cfg.states.max_states = 2;
    cfg.state_shards = 1;
    let (mut s, inside, r, outside) = sim::routed(21, 1);
    let fw = Ipfw::new(cfg, 1).unwrap();
    fw.load(STATEFUL).unwrap();
    fw.attach(s.host(r));
    let to = |p: u16| SocketAddr::from(([198, 18, 2, 2], p));
    assert_eq!(
        udp_exchange(&mut s, inside, outside, to(7001)),
        (true, true)
    );
    assert_eq!(
        udp_exchange(&mut s, inside, outside, to(7002)),
        (true, true)
    );
    assert_eq!(
        udp_exchange(&mut s, inside, outside, to(7003)),
        (false, false),
        "the third flow refused"
    );
    let st = s.host(r).stats();
    assert_eq!((st.fw.dyn_count, st.fw.dyn_full), (2, 1), "{:?}", st.fw);
    assert_eq!(st.get("fw.dyn_full"), Some(1));
    let mut text = String::new();
    st.write_netstat(&mut text, false).unwrap();
    assert!(text.contains("fw.dyn_count"), "{text}");
    // A second refusal of the same flow counts again; the count stays the bound.
    assert!(!udp_exchange(&mut s, inside, outside, to(7003)).0);
    let st = s.host(r).stats();
    assert_eq!((st.fw.dyn_count, st.fw.dyn_full), (2, 2));
}
