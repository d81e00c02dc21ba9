//! Scenario tests: virtual networks that prove one behaviour each, in virtual time.
//! Every scenario that involves the data path runs with 1 and with 2 workers.

use dev::mem::WireConfig;
use dev::Duration;
use net::arp::LleState;
use sim::Sim;
use std::net::{Ipv4Addr, SocketAddrV4};
use wire::EthernetAddress;

mod common;
use common::hub::pair;
use common::ping_n;

fn ip(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 0, n)
}

#[test]
fn ping_100_echoes_with_1472_byte_payloads_none_lost() {
    for workers in [1, 2] {
        let (mut s, a, b, _) = pair(workers, 7);
        assert_eq!(
            ping_n(&mut s, a, ip(2), 100, 1472),
            100,
            "workers={workers}"
        );
        assert_eq!(ping_n(&mut s, b, ip(1), 100, 56), 100, "workers={workers}");
        let st = s.host(b).stats();
        assert_eq!(st.icmp.inecho, 100);
        assert_eq!(st.icmp.outechoreply, 100);
        assert_eq!(st.total_drops(), 0, "{st:#?}");
    }
}

#[test]
fn arp_resolution_and_nud_states() {
    let (mut s, a, b, _) = pair(1, 1);
    assert_eq!(ping_n(&mut s, a, ip(2), 1, 8), 1);
    let ea = s.host(a).interfaces()[0].arp.entries();
    assert_eq!(ea.len(), 1);
    assert_eq!(ea[0].ip, ip(2));
    assert_eq!(ea[0].state, LleState::Reachable);
    assert_eq!(ea[0].mac, Some(s.host(b).interfaces()[0].mac));
    // b learnt a from a's request (RFC 826 merge: the target was b).
    assert_eq!(s.host(b).interfaces()[0].arp.entries()[0].ip, ip(1));
    assert_eq!(s.host(a).stats().arp.txrequests, 1);
    assert_eq!(s.host(b).stats().arp.txreplies, 1);
    // Past the reachable time the entry goes stale...
    s.run_for(Duration::from_secs(31));
    assert_eq!(
        s.host(a).interfaces()[0].arp.entries()[0].state,
        LleState::Stale
    );
    // ...and using it again sends at once, then confirms by a unicast probe.
    assert_eq!(ping_n(&mut s, a, ip(2), 1, 8), 1);
    s.run_for(Duration::from_secs(7));
    assert_eq!(
        s.host(a).interfaces()[0].arp.entries()[0].state,
        LleState::Reachable
    );
    assert!(s.host(a).stats().arp.txrequests >= 2);
}

#[test]
fn arp_gives_up_on_a_silent_address_and_counts_held_packets() {
    let (mut s, a, _, _) = pair(1, 1);
    let u = s
        .host(a)
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))
        .unwrap();
    for _ in 0..3 {
        u.send_to(b"x", SocketAddrV4::new(ip(99), 9)).unwrap();
    }
    s.run_for(Duration::from_secs(10));
    let st = s.host(a).stats();
    assert_eq!(st.arp.txrequests, 5);
    assert_eq!(st.arp.timeouts, 1);
    assert_eq!(st.arp.dropped, 3);
    assert!(s.host(a).interfaces()[0].arp.entries().is_empty());
}

#[test]
fn udp_echo_round_trip() {
    for workers in [1, 2] {
        let (mut s, a, b, _) = pair(workers, 3);
        let server = s
            .host(b)
            .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7))
            .unwrap();
        server.set_nonblocking(true).unwrap();
        let client = s.host(a).udp_bind(SocketAddrV4::new(ip(1), 0)).unwrap();
        client.set_nonblocking(true).unwrap();
        client.connect(SocketAddrV4::new(ip(2), 7)).unwrap();
        let mut buf = [0u8; 2048];
        for i in 0..50u32 {
            let msg = format!("datagram {i}").repeat(1 + (i as usize % 40));
            client.send(msg.as_bytes()).unwrap();
            let ok = s.run_until(Duration::from_secs(1), |_| {
                while let Ok((n, from)) = server.recv_from(&mut buf) {
                    server.send_to(&buf[..n], from).unwrap();
                }
                false
            });
            assert!(!ok);
            let n = client.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], msg.as_bytes(), "workers={workers} i={i}");
        }
        assert_eq!(s.host(b).stats().udp.delivered, 50);
        assert_eq!(s.host(a).stats().udp.delivered, 50);
    }
}

#[test]
fn udp_to_closed_port_gets_port_unreachable() {
    let (mut s, a, b, _) = pair(1, 3);
    let c = s
        .host(a)
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))
        .unwrap();
    c.send_to(b"hello", SocketAddrV4::new(ip(2), 9)).unwrap();
    s.run_for(Duration::from_millis(10));
    assert_eq!(s.host(b).stats().udp.noport, 1);
    assert_eq!(s.host(b).stats().icmp.outunreach, 1);
    assert_eq!(s.host(a).stats().icmp.inunreach, 1);
}

#[test]
fn bind_conflicts_are_reported() {
    let (s, a, _, _) = pair(1, 3);
    let _x = s
        .host(a)
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7))
        .unwrap();
    assert!(matches!(
        s.host(a)
            .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7)),
        Err(net::BindError::AddrInUse(_))
    ));
    assert!(matches!(
        s.host(a).udp_bind(SocketAddrV4::new(ip(77), 8)),
        Err(net::BindError::AddrNotAvailable(_))
    ));
    drop(_x);
    assert!(s
        .host(a)
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7))
        .is_ok());
}

#[test]
fn malformed_frames_are_dropped_and_counted_then_ping_works() {
    for workers in [1, 2] {
        let (mut s, a, b, hub) = pair(workers, 11);
        // Resolve first so the attacker's frames are the only anomaly.
        assert_eq!(ping_n(&mut s, a, ip(2), 1, 8), 1);
        let before = s.host(b).stats();
        let b_mac = s.host(b).interfaces()[0].mac;
        let attacker_mac = EthernetAddress([0x02, 0xbe, 0xef, 0, 0, 1]);
        let bad = sim::malformed::frames(10_000, (b_mac, ip(2)), (attacker_mac, ip(66)), 5);
        let mut port = s.attach_raw(hub);
        let now = s.now();
        for chunk in bad.chunks(500) {
            let mut batch: Vec<mbuf::Mbuf> = chunk
                .iter()
                .map(|f| mbuf::Mbuf::from_slice(&f.frame).unwrap())
                .collect();
            port.tx_burst(now, &mut batch);
            s.run_for(Duration::from_millis(1));
        }
        s.run_for(Duration::from_millis(10));
        let after = s.host(b).stats();
        for (counter, n) in sim::malformed::expected_counts(&bad) {
            let got = after.get(counter).unwrap() - before.get(counter).unwrap();
            assert_eq!(got, n, "workers={workers}: {counter}");
        }
        assert_eq!(
            after.total_drops() - before.total_drops(),
            10_000,
            "every frame accounted for once"
        );
        assert_eq!(ping_n(&mut s, a, ip(2), 10, 56), 10);
    }
}

#[test]
fn arp_table_is_bounded_under_a_flood_of_requests() {
    let (mut s, _a, b, hub) = pair(1, 5);
    let mut port = s.attach_raw(hub);
    let max = s.host(b).interfaces()[0].arp.params().max_entries;
    for i in 0..(max as u32 * 3) {
        let sender = Ipv4Addr::from(0xc612_0000u32 | (i % 65000 + 3));
        let mut a = vec![
            0,
            1,
            8,
            0,
            6,
            4,
            0,
            1,
            0x02,
            0xaa,
            0,
            0,
            (i >> 8) as u8,
            i as u8,
        ];
        a.extend_from_slice(&sender.octets());
        a.extend_from_slice(&[0; 6]);
        a.extend_from_slice(&ip(2).octets());
        let mut f = EthernetAddress::BROADCAST.0.to_vec();
        f.extend_from_slice(&[0x02, 0xaa, 0, 0, (i >> 8) as u8, i as u8]);
        f.extend_from_slice(&[0x08, 0x06]);
        f.extend_from_slice(&a);
        let now = s.now();
        port.tx_burst(now, &mut vec![mbuf::Mbuf::from_slice(&f).unwrap()]);
        if i % 64 == 0 {
            s.run_for(Duration::from_micros(10));
        }
    }
    s.run_for(Duration::from_millis(10));
    let n = s.host(b).interfaces()[0].arp.len();
    assert!(n <= max, "{n} entries > bound {max}");
    let st = s.host(b).stats();
    // One sender is 198.18.0.255, the subnet's broadcast address: refused before
    // it is counted as a request.
    assert_eq!(st.arp.badspa, 1);
    assert_eq!(st.arp.rxrequests + st.arp.badspa, max as u64 * 3);
    assert!(st.arp.evicted >= max as u64 * 2 - 1, "{}", st.arp.evicted);
}

#[test]
fn lossy_segment_still_resolves_and_pings_with_retries() {
    let mut s = Sim::new(21);
    let hub = s.add_hub(WireConfig {
        impair: dev::impair::Impairments {
            loss: 0.2,
            delay: Duration::from_millis(5),
            ..Default::default()
        },
        ..WireConfig::default()
    });
    let a = s.add_host("a", 2);
    let b = s.add_host("b", 2);
    s.connect(a, hub, "198.18.0.1/24");
    s.connect(b, hub, "198.18.0.2/24");
    let p = s.host(a).ping_socket(0).unwrap();
    p.set_nonblocking(true).unwrap();
    let mut got = 0;
    let mut buf = [0u8; 128];
    for seq in 0..200 {
        p.send_echo(ip(2), seq, b"abc").unwrap();
        s.run_for(Duration::from_millis(50));
        while p.recv_reply(&mut buf).is_ok() {
            got += 1;
        }
    }
    // Each echo crosses the lossy hub twice: about 64% come back.
    assert!((100..=160).contains(&got), "{got}");
}

#[test]
fn same_seed_same_run() {
    let run = |seed| {
        let mut s = Sim::new(seed);
        s.enable_trace();
        let hub = s.add_hub(WireConfig {
            impair: dev::impair::Impairments {
                loss: 0.3,
                jitter: Duration::from_millis(3),
                ..Default::default()
            },
            ..WireConfig::default()
        });
        let a = s.add_host("a", 2);
        let b = s.add_host("b", 1);
        s.connect(a, hub, "198.18.0.1/24");
        s.connect(b, hub, "198.18.0.2/24");
        let got = ping_n(&mut s, a, ip(2), 30, 100);
        (
            got,
            s.take_trace()
                .into_iter()
                .map(|r| (r.time, r.frame))
                .collect::<Vec<_>>(),
        )
    };
    assert_eq!(run(9), run(9));
    assert_ne!(run(9).1, run(10).1);
}

/// A test hook: counts what it sees and passes, drops, or keeps packets as told.
#[derive(Debug, Default)]
struct Probe {
    seen: std::sync::atomic::AtomicU64,
    mode: std::sync::atomic::AtomicU8, // 0 pass, 1 drop, 2 consume
    kept: std::sync::Mutex<Vec<mbuf::Mbuf>>,
}

impl net::PfilHook for Probe {
    fn name(&self) -> &str {
        "probe"
    }
    fn filter(&self, m: mbuf::Mbuf, _cx: &net::PfilCtx<'_>) -> net::Verdict {
        use std::sync::atomic::Ordering::Relaxed;
        self.seen.fetch_add(1, Relaxed);
        match self.mode.load(Relaxed) {
            0 => net::Verdict::Pass(m),
            1 => {
                drop(m);
                net::Verdict::Dropped
            }
            _ => {
                self.kept.lock().unwrap().push(m);
                net::Verdict::Consumed
            }
        }
    }
}

#[test]
fn pfil_hooks_see_pass_drop_and_keep_packets_at_every_point() {
    use net::{Dir, PfilPoint};
    use std::sync::atomic::Ordering::Relaxed;
    use std::sync::Arc;
    for workers in [1, 2] {
        let (mut s, a, b, _) = pair(workers, 21);
        let points = [
            (PfilPoint::Ether, Dir::In),
            (PfilPoint::Ether, Dir::Out),
            (PfilPoint::Inet, Dir::In),
            (PfilPoint::Inet, Dir::Out),
        ];
        let probes: Vec<Arc<Probe>> = points.iter().map(|_| Arc::new(Probe::default())).collect();
        for ((p, d), probe) in points.iter().zip(&probes) {
            s.host(b).add_pfil_hook(*p, *d, probe.clone());
        }
        assert_eq!(
            ping_n(&mut s, a, ip(2), 5, 32),
            5,
            "workers={workers}: all hooks pass"
        );
        for ((p, d), probe) in points.iter().zip(&probes) {
            assert!(
                probe.seen.load(Relaxed) >= 5,
                "workers={workers}: {p:?} {d:?} saw too little"
            );
        }

        // Dropped at IP input: no replies, each drop counted by name.
        probes[2].mode.store(1, Relaxed);
        let before = s.host(b).stats();
        assert_eq!(ping_n(&mut s, a, ip(2), 3, 32), 0);
        let after = s.host(b).stats();
        assert_eq!(
            after.pfil.ip_in_drop - before.pfil.ip_in_drop,
            3,
            "workers={workers}"
        );
        probes[2].mode.store(0, Relaxed);

        // Kept at Ethernet output: the replies go to the hook instead of the wire.
        probes[1].mode.store(2, Relaxed);
        let before = s.host(b).stats();
        assert_eq!(ping_n(&mut s, a, ip(2), 3, 32), 0);
        let after = s.host(b).stats();
        assert_eq!(
            after.pfil.consumed - before.pfil.consumed,
            3,
            "workers={workers}"
        );
        assert_eq!(probes[1].kept.lock().unwrap().len(), 3);
        probes[1].mode.store(0, Relaxed);
        assert_eq!(
            ping_n(&mut s, a, ip(2), 2, 32),
            2,
            "workers={workers}: passing again"
        );
    }
}

#[test]
fn closing_a_socket_still_sends_what_it_queued_and_frees_the_port() {
    for workers in [1, 2] {
        let (mut s, a, b, _) = pair(workers, 23);
        let server = s
            .host(b)
            .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 9))
            .unwrap();
        server.set_nonblocking(true).unwrap();
        let client = s
            .host(a)
            .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 4000))
            .unwrap();
        for i in 0..5u8 {
            client
                .send_to(&[i; 20], SocketAddrV4::new(ip(2), 9))
                .unwrap();
        }
        drop(client);
        s.run_for(Duration::from_millis(100));
        let mut buf = [0u8; 64];
        let mut got = 0;
        while let Ok((n, from)) = server.recv_from(&mut buf) {
            assert_eq!((n, from.port()), (20, 4000));
            got += 1;
        }
        assert_eq!(
            got, 5,
            "workers={workers}: datagrams queued before close are sent"
        );
        assert!(
            s.host(a)
                .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 4000))
                .is_ok(),
            "port free again"
        );
    }
}
