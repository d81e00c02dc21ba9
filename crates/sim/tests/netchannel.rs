//! Netchannels (issue 27): a classifier takes one flow's packets raw while other
//! flows reach their sockets; a full queue counts its drops; raw packets sent
//! through the stack cross a router (routed, checksummed, fragmented, resolved);
//! the firewall runs before a netchannel. Virtual time, one and two workers.

use dev::mem::WireConfig;
use dev::Duration;
use net::ipfw::Ipfw;
use net::netchan::Classifier;
use net::{NetChannel, Packet};
use sim::{HostId, Sim};
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};

fn ip(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 0, n)
}

/// `a` (198.18.0.1, 2001:2::1) and `b` (198.18.0.2, 2001:2::2) on one hub.
fn pair(workers: usize, seed: u64) -> (Sim, HostId, HostId) {
    let mut s = Sim::new(seed);
    let hub = s.add_hub(WireConfig::default());
    let a = s.add_host("a", workers);
    let b = s.add_host("b", workers);
    let ia = s.connect(a, hub, "198.18.0.1/24");
    let ib = s.connect(b, hub, "198.18.0.2/24");
    s.host(a)
        .add_address6(ia, "2001:2::1/64".parse().unwrap())
        .unwrap();
    s.host(b)
        .add_address6(ib, "2001:2::2/64".parse().unwrap())
        .unwrap();
    // Duplicate address detection first.
    s.run_for(Duration::from_secs(2));
    (s, a, b)
}

fn drain(ch: &NetChannel) -> Vec<Packet> {
    let mut v = Vec::new();
    while let Some(p) = ch.try_recv() {
        v.push(p);
    }
    v
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[test]
fn a_classifier_takes_one_udp_and_one_tcp_flow_while_others_reach_their_sockets() {
    for workers in [1, 2] {
        let (mut s, a, b) = pair(workers, 3);
        let udp_ch = s
            .host(b)
            .netchannel("udp from any to me 5001".parse().unwrap())
            .unwrap();
        let tcp_ch = s
            .host(b)
            .netchannel(Classifier::tcp().local_port(7000))
            .unwrap();
        // Sockets on the same ports: the netchannels come first.
        let udp_same = s.host(b).udp_bind(SocketAddr::from((ip(2), 5001))).unwrap();
        udp_same.set_nonblocking(true).unwrap();
        let udp_other = s.host(b).udp_bind(SocketAddr::from((ip(2), 5002))).unwrap();
        udp_other.set_nonblocking(true).unwrap();
        let l7000 = s
            .host(b)
            .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7000), 8)
            .unwrap();
        l7000.set_nonblocking(true).unwrap();
        let l80 = s
            .host(b)
            .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 8)
            .unwrap();
        l80.set_nonblocking(true).unwrap();

        let u = s.host(a).udp_bind(SocketAddr::from((ip(1), 4000))).unwrap();
        for i in 0..5u8 {
            u.send_to(&[i; 100], SocketAddr::from((ip(2), 5001)))
                .unwrap();
            u.send_to(&[i; 50], SocketAddr::from((ip(2), 5002)))
                .unwrap();
        }
        let c7000 = s
            .host(a)
            .tcp_connect_nonblocking(SocketAddrV4::new(ip(2), 7000))
            .unwrap();
        let c80 = s
            .host(a)
            .tcp_connect_nonblocking(SocketAddrV4::new(ip(2), 80))
            .unwrap();
        s.run_for(Duration::from_millis(200));

        // UDP to 5001: five raw packets, IPv4 header first, as they arrived.
        let got = drain(&udp_ch);
        assert_eq!(got.len(), 5, "workers {workers}");
        for (i, p) in got.iter().enumerate() {
            let b = p.to_vec();
            assert_eq!(b.len(), 20 + 8 + 100);
            assert_eq!(b[0], 0x45);
            assert_eq!(b[9], 17);
            assert_eq!(&b[12..16], &ip(1).octets());
            assert_eq!(&b[16..20], &ip(2).octets());
            assert_eq!((be16(&b, 20), be16(&b, 22)), (4000, 5001));
            assert!(b[28..].iter().all(|&x| x == i as u8));
            assert_eq!(p.remote(), SocketAddr::from((ip(1), 4000)));
            assert_eq!(p.as_slice().map(<[u8]>::len), Some(128));
        }
        let mut buf = [0u8; 200];
        assert_eq!(
            udp_same.recv_from(&mut buf).unwrap_err().kind(),
            ErrorKind::WouldBlock,
            "the socket on the netchannel's port got nothing"
        );
        // UDP to 5002: its socket, all five.
        for i in 0..5u8 {
            let (n, from) = udp_other.recv_from(&mut buf).unwrap();
            assert_eq!((n, from), (50, SocketAddr::from((ip(1), 4000))));
            assert!(buf[..n].iter().all(|&x| x == i));
        }

        // TCP to 7000: the SYN and its retransmissions, raw; the listener saw none.
        let syns = drain(&tcp_ch);
        assert!(!syns.is_empty());
        for p in &syns {
            let b = p.to_vec();
            assert_eq!(b[9], 6);
            assert_eq!(be16(&b, 22), 7000);
            assert_eq!(b[20 + 13] & 0x02, 0x02, "a SYN");
        }
        assert!(!c7000.is_connected());
        assert_eq!(l7000.accept().unwrap_err().kind(), ErrorKind::WouldBlock);
        assert_eq!(
            s.host(b).stats().tcp.noport,
            0,
            "no reset: TCP never saw it"
        );

        // TCP to 80: connects and carries bytes.
        let (srv, _) = l80.accept().unwrap();
        srv.set_nonblocking(true).unwrap();
        assert!(c80.is_connected());
        (&c80).write_all(b"through the stack").unwrap();
        s.run_for(Duration::from_millis(50));
        let mut got = [0u8; 64];
        let n = (&srv).read(&mut got).unwrap();
        assert_eq!(&got[..n], b"through the stack");

        let st = s.host(b).stats();
        assert_eq!(st.netchan.delivered, 5 + syns.len() as u64);
        assert_eq!(udp_ch.delivered(), 5);
        assert_eq!(st.netchan.full, 0);
    }
}

#[test]
fn ipv6_packets_reach_a_netchannel_and_raw_ipv6_goes_out() {
    let (mut s, a, b) = pair(1, 4);
    let ch = s
        .host(b)
        .netchannel("udp from 2001:2::/64 to me 6000".parse().unwrap())
        .unwrap();
    let u = s
        .host(a)
        .udp_bind("[2001:2::1]:6001".parse::<SocketAddr>().unwrap())
        .unwrap();
    u.set_nonblocking(true).unwrap();
    u.send_to(b"six", "[2001:2::2]:6000".parse::<SocketAddr>().unwrap())
        .unwrap();
    s.run_for(Duration::from_millis(50));
    let p = ch.try_recv().expect("the IPv6 datagram");
    let pkt = p.to_vec();
    assert_eq!(pkt[0] >> 4, 6);
    assert_eq!(pkt[6], 17);
    assert_eq!(&pkt[48..], b"six");

    // Back, raw: the payload length, the source and the UDP checksum left to the
    // stack; a's socket takes it (its checksum verified).
    let mut raw = pkt.clone();
    raw[4..6].copy_from_slice(&[0, 0]);
    raw[8..24].copy_from_slice(&[0; 16]);
    raw[24..40].copy_from_slice(&"2001:2::1".parse::<std::net::Ipv6Addr>().unwrap().octets());
    raw[40..44].copy_from_slice(&[0x17, 0x70, 0x17, 0x71]); // 6000 -> 6001
    raw[46..48].copy_from_slice(&[0, 0]);
    ch.send(&raw).unwrap();
    s.run_for(Duration::from_millis(50));
    let mut buf = [0u8; 16];
    let (n, from) = u.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"six");
    assert_eq!(from, "[2001:2::2]:6000".parse::<SocketAddr>().unwrap());
    assert_eq!(s.host(b).stats().netchan.sent, 1);
}

#[test]
fn a_full_netchannel_drops_and_counts_what_it_cannot_hold() {
    let (mut s, a, b) = pair(1, 5);
    let ch = s.host(b).netchannel_with(Classifier::udp(), 4).unwrap();
    let u = s.host(a).udp_bind(SocketAddr::from((ip(1), 0))).unwrap();
    for i in 0..10u8 {
        u.send_to(&[i], SocketAddr::from((ip(2), 9))).unwrap();
    }
    s.run_for(Duration::from_millis(50));
    assert_eq!(ch.pending(), 4);
    assert_eq!(ch.overflows(), 6);
    assert_eq!(s.host(b).stats().netchan.full, 6);
    assert_eq!(s.host(b).stats().get("netchan.full"), Some(6));
    let mut v = Vec::new();
    ch.set_nonblocking(true).unwrap();
    assert_eq!(ch.recv_batch(&mut v, 16).unwrap(), 4);
    // The first four, in order.
    let firsts: Vec<u8> = v.iter().map(|p| *p.to_vec().last().unwrap()).collect();
    assert_eq!(firsts, [0, 1, 2, 3]);
    assert_eq!(ch.recv().unwrap_err().kind(), ErrorKind::WouldBlock);
    // Closed: the next datagram finds no port (an ICMP unreachable, counted).
    drop(ch);
    u.send_to(b"x", SocketAddr::from((ip(2), 9))).unwrap();
    s.run_for(Duration::from_millis(50));
    assert_eq!(s.host(b).stats().udp.noport, 1);
    assert!(s.host(b).netchannel_with(Classifier::udp(), 0).is_err());
    assert!(s
        .host(b)
        .netchannel(Classifier::any().proto(1).local_port(3))
        .is_err());
}

/// A UDP datagram as an application would write it for a netchannel: source,
/// lengths, identification and both checksums left at zero for the stack.
fn raw_udp(dst: Ipv4Addr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 28];
    p[0] = 0x45;
    p[8] = 64;
    p[9] = 17;
    p[16..20].copy_from_slice(&dst.octets());
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&dport.to_be_bytes());
    p[24..26].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    p.extend_from_slice(payload);
    p
}

#[test]
fn raw_packets_cross_a_router_routed_checksummed_fragmented_and_resolved() {
    for workers in [1, 2] {
        let (mut s, a, r, c) = sim::routed(9, workers);
        let ch = s
            .host(a)
            .netchannel(Classifier::udp().local_port(4444))
            .unwrap();
        let sink = s
            .host(c)
            .udp_bind(SocketAddr::from(([198, 18, 2, 2], 5000)))
            .unwrap();
        sink.set_nonblocking(true).unwrap();
        let small: Vec<u8> = (0..100u32).map(|i| i as u8).collect();
        let big: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
        // Before any ARP: the first waits for its neighbour.
        ch.send(&raw_udp(Ipv4Addr::new(198, 18, 2, 2), 4444, 5000, &small))
            .unwrap();
        ch.send_packet(
            Packet::from_slice(&raw_udp(Ipv4Addr::new(198, 18, 2, 2), 4444, 5000, &big)).unwrap(),
        )
        .unwrap();
        s.run_for(Duration::from_millis(200));
        let mut buf = vec![0u8; 4000];
        let (n, from) = sink.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], &small[..], "workers {workers}");
        assert_eq!(from, SocketAddr::from(([198, 18, 1, 2], 4444)));
        let (n, _) = sink.recv_from(&mut buf).unwrap();
        assert_eq!(
            &buf[..n],
            &big[..],
            "cut into fragments and put back together"
        );
        assert!(s.host(a).stats().ip.fragmented >= 1);
        assert!(s.host(r).stats().ip.forward >= 3);
        // The answer comes back to the netchannel, raw.
        sink.send_to(b"back", SocketAddr::from(([198, 18, 1, 2], 4444)))
            .unwrap();
        s.run_for(Duration::from_millis(50));
        let p = ch.try_recv().expect("the answer");
        assert_eq!(&p.to_vec()[28..], b"back");
        assert_eq!(p.to_vec()[8], 63, "one hop: TTL 63");

        // Not a packet: dropped, counted; no route: counted as such.
        ch.send(&[0x55; 30]).unwrap();
        ch.send(&raw_udp(Ipv4Addr::new(198, 19, 9, 9), 1, 2, b"x"))
            .unwrap();
        let before = s.host(a).stats().ip.noroute;
        s.host(a).set_default_gateway(None);
        s.run_for(Duration::from_millis(50));
        let st = s.host(a).stats();
        assert_eq!(st.netchan.badpkt, 1);
        assert_eq!(st.ip.noroute, before + 1);
        assert_eq!(st.netchan.sent, 2);
    }
}

#[test]
fn the_firewall_runs_before_a_netchannel() {
    let (mut s, a, b) = pair(1, 6);
    let ch = s.host(b).netchannel(Classifier::udp()).unwrap();
    let fw = Ipfw::new(fw::RulesetConfig::default(), 1).unwrap();
    fw.load("add 100 deny udp from any to any 53\nadd 200 allow ip from any to any")
        .unwrap();
    fw.attach(s.host(b));
    let u = s.host(a).udp_bind(SocketAddr::from((ip(1), 0))).unwrap();
    u.send_to(b"dns", SocketAddr::from((ip(2), 53))).unwrap();
    u.send_to(b"other", SocketAddr::from((ip(2), 54))).unwrap();
    s.run_for(Duration::from_millis(50));
    let got = drain(&ch);
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0].to_vec()[28..], b"other");
    assert_eq!(s.host(b).stats().pfil.ip_in_drop, 1);
    let _: IpAddr = ip(1).into();
}
