//! Fragmentation and reassembly between two stacks over a 1500-byte memory wire, in
//! virtual time: datagrams larger than the MTU leave in fragments and arrive whole and
//! byte-exact (also reordered and duplicated), a lost fragment ends in ICMP Time
//! Exceeded after 30 s, and a flood of fragments that never complete stays bounded.

mod common;

use dev::impair::Impairments;
use dev::mem::WireConfig;
use dev::Duration;
use mbuf::Mbuf;
use net::pfil::{Dir, PfilCtx, PfilHook, PfilPoint, Verdict};
use net::{Stack, StackConfig, UdpSocket};
use sim::{HostId, Sim};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;

const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

/// Two hosts joined by a wire with a 1500-byte MTU.
fn wire(workers: usize, seed: u64, impair: Impairments) -> (Sim, HostId, HostId) {
    let mut s = Sim::new(seed);
    s.enable_trace();
    let a = s.add_host("a", workers);
    let b = s.add_host("b", workers);
    s.link(
        a,
        "198.18.0.1/24",
        b,
        "198.18.0.2/24",
        WireConfig {
            impair,
            mtu: 1500,
            ..WireConfig::default()
        },
    );
    (s, a, b)
}

fn bind(st: &Stack, port: u16) -> UdpSocket {
    let u = st
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))
        .unwrap();
    u.set_nonblocking(true).unwrap();
    u
}

/// A datagram that says which one it is in its first bytes.
fn payload(n: usize, tag: u32) -> Vec<u8> {
    let mut v: Vec<u8> = (0..n).map(|i| (i * 7 + tag as usize) as u8).collect();
    v[..4].copy_from_slice(&tag.to_be_bytes());
    v
}

fn recv_all(u: &UdpSocket) -> Vec<Vec<u8>> {
    let mut buf = vec![0u8; 70_000];
    let mut out = Vec::new();
    while let Ok((n, _)) = u.recv_from(&mut buf) {
        out.push(buf[..n].to_vec());
    }
    out
}

/// Sends one small datagram first so that ARP is resolved: the neighbour table holds
/// only 16 packets while it asks (FreeBSD's `arp_maxhold`), fewer than the 41
/// fragments of a 60000-byte datagram.
fn resolve(s: &mut Sim, tx: &UdpSocket, rx: &UdpSocket) {
    tx.send_to(b"hello", SocketAddrV4::new(B, 9)).unwrap();
    s.run_for(Duration::from_millis(10));
    assert_eq!(recv_all(rx), vec![b"hello".to_vec()]);
}

/// IPv4 fragment offset (bytes) and MF of an Ethernet frame, if it carries IPv4.
fn frag_fields(frame: &[u8]) -> Option<(usize, bool)> {
    if frame.get(12..14)? != [0x08, 0x00] {
        return None;
    }
    let w = u16::from_be_bytes([*frame.get(20)?, *frame.get(21)?]);
    Some((usize::from(w & 0x1fff) * 8, w & 0x2000 != 0))
}

#[test]
fn udp_3000_and_60000_byte_datagrams_leave_fragmented_and_arrive_byte_exact() {
    for workers in [1, 2] {
        let (mut s, a, b) = wire(workers, 1, Impairments::default());
        let tx = bind(s.host(a), 0);
        let rx = bind(s.host(b), 9);
        resolve(&mut s, &tx, &rx);
        s.take_trace();
        let small = payload(3000, 1);
        let big = payload(60_000, 2);
        tx.send_to(&small, SocketAddrV4::new(B, 9)).unwrap();
        tx.send_to(&big, SocketAddrV4::new(B, 9)).unwrap();
        s.run_for(Duration::from_millis(50));
        assert_eq!(recv_all(&rx), vec![small, big], "workers={workers}");
        let frames: Vec<_> = s
            .take_trace()
            .into_iter()
            .filter(|r| r.host == "a")
            .map(|r| r.frame)
            .collect();
        assert!(frames.iter().all(|f| f.len() <= 1514), "fit the MTU");
        let frags = frames
            .iter()
            .filter_map(|f| frag_fields(f))
            .filter(|&(off, more)| off != 0 || more)
            .count();
        // 3000 + 8 bytes: 3 fragments; 60000 + 8: 41 (1480 data bytes each).
        assert_eq!(frags, 3 + 41, "workers={workers}");
        let sa = s.host(a).stats();
        let sb = s.host(b).stats();
        assert_eq!((sa.ip.fragmented, sa.ip.ofragments), (2, 44));
        assert_eq!((sb.ip.fragments, sb.ip.reassembled), (44, 2));
        assert_eq!(sb.ip.fragq, 0);
        assert_eq!(sb.total_drops(), 0, "{sb:#?}");
    }
}

#[test]
fn reordered_and_duplicated_fragments_still_reassemble() {
    let impair = Impairments {
        delay: Duration::from_millis(2),
        jitter: Duration::from_millis(1),
        reorder: 0.25,
        duplicate: 0.2,
        ..Impairments::default()
    };
    for workers in [1, 2] {
        let (mut s, a, b) = wire(workers, 7, impair);
        let tx = bind(s.host(a), 0);
        let rx = bind(s.host(b), 9);
        tx.send_to(b"hello", SocketAddrV4::new(B, 9)).unwrap();
        s.run_for(Duration::from_millis(50));
        let _ = recv_all(&rx);
        let sent: Vec<Vec<u8>> = (0..20)
            .map(|i| payload(if i % 4 == 0 { 20_000 } else { 3000 }, i))
            .collect();
        for d in &sent {
            tx.send_to(d, SocketAddrV4::new(B, 9)).unwrap();
            s.run_for(Duration::from_millis(3));
        }
        s.run_for(Duration::from_millis(100));
        let got = recv_all(&rx);
        for d in &sent {
            assert!(
                got.contains(d),
                "workers={workers}: datagram lost or damaged"
            );
        }
        // A datagram arrives twice only if the wire duplicated every fragment of it.
        assert!(got.iter().all(|g| sent.contains(g)));
        let sb = s.host(b).stats();
        assert!(sb.ip.reassembled >= 20);
        assert_eq!(sb.ip.fragoverlap, 0, "a duplicate is not an overlap");
        // Copies that came after their datagram was complete wait for the time-out.
        s.run_for(Duration::from_secs(31));
        assert_eq!(s.host(b).stats().ip.fragq, 0);
    }
}

/// Drops the IPv4 fragment at one offset (a lossy link that always loses the same
/// piece).
#[derive(Debug)]
struct LoseFragment(usize);

impl PfilHook for LoseFragment {
    fn name(&self) -> &str {
        "lose-fragment"
    }
    fn filter(&self, m: Mbuf, _cx: &PfilCtx<'_>) -> Verdict {
        let mut head = [0u8; 22];
        if m.copydata(0, &mut head).is_ok() && frag_fields(&head) == Some((self.0, true)) {
            return Verdict::Dropped;
        }
        Verdict::Pass(m)
    }
}

#[test]
fn a_lost_fragment_ends_in_time_exceeded_after_30_seconds() {
    for workers in [1, 2] {
        let (mut s, a, b) = wire(workers, 3, Impairments::default());
        let tx = bind(s.host(a), 0);
        let rx = bind(s.host(b), 9);
        resolve(&mut s, &tx, &rx);
        s.host(b)
            .add_pfil_hook(PfilPoint::Ether, Dir::In, Arc::new(LoseFragment(1480)));
        let t0 = s.now();
        tx.send_to(&payload(4000, 5), SocketAddrV4::new(B, 9))
            .unwrap();
        s.run_for(Duration::from_secs(29));
        assert!(recv_all(&rx).is_empty());
        assert_eq!(s.host(b).stats().ip.fragq, 1);
        assert_eq!(s.host(a).stats().icmp.intimxceed, 0, "not before 30 s");
        assert!(s.run_until(Duration::from_secs(2), |s| {
            s.host(a).stats().icmp.intimxceed == 1
        }));
        let elapsed = s.now().saturating_duration_since(t0);
        assert!(
            elapsed >= Duration::from_secs(30) && elapsed < Duration::from_millis(30_100),
            "{elapsed:?}"
        );
        let sb = s.host(b).stats();
        assert_eq!(sb.pfil.ether_in_drop, 1);
        assert_eq!((sb.ip.fragtimeout, sb.icmp.outtimxceed), (2, 1));
        assert_eq!(sb.ip.fragq, 0, "the table is empty after the time-out");
        assert_eq!(s.host(a).stats().icmp.intimxceed, 1);
    }
}

#[test]
fn without_the_first_fragment_the_time_out_is_silent() {
    let (mut s, a, b) = wire(1, 4, Impairments::default());
    let tx = bind(s.host(a), 0);
    let rx = bind(s.host(b), 9);
    resolve(&mut s, &tx, &rx);
    s.host(b)
        .add_pfil_hook(PfilPoint::Ether, Dir::In, Arc::new(LoseFragment(0)));
    tx.send_to(&payload(4000, 6), SocketAddrV4::new(B, 9))
        .unwrap();
    s.run_for(Duration::from_secs(31));
    let sb = s.host(b).stats();
    assert_eq!((sb.ip.fragtimeout, sb.ip.fragq), (2, 0));
    assert_eq!(sb.icmp.outtimxceed, 0);
    assert_eq!(s.host(a).stats().icmp.intimxceed, 0);
}

#[test]
fn ping_with_3000_bytes_is_reassembled_and_answered_in_fragments() {
    let (mut s, a, b) = wire(2, 5, Impairments::default());
    let p = s.host(a).ping_socket(0).unwrap();
    p.set_nonblocking(true).unwrap();
    let data = payload(3000, 9);
    p.send_echo(B, 1, b"arp").unwrap();
    s.run_for(Duration::from_millis(10));
    let mut buf = vec![0u8; 4000];
    assert!(p.recv_reply(&mut buf).is_ok());
    p.send_echo(B, 2, &data).unwrap();
    s.run_for(Duration::from_millis(10));
    let r = p.recv_reply(&mut buf).expect("echo reply");
    assert_eq!(&buf[..r.len], &data[..]);
    let (sa, sb) = (s.host(a).stats(), s.host(b).stats());
    assert_eq!((sb.ip.reassembled, sb.ip.fragmented), (1, 1));
    assert_eq!((sa.ip.reassembled, sa.ip.fragmented), (1, 1));
}

#[test]
fn dont_fragment_refuses_a_datagram_larger_than_the_mtu() {
    let (mut s, a, b) = wire(1, 6, Impairments::default());
    let tx = bind(s.host(a), 0);
    let rx = bind(s.host(b), 9);
    resolve(&mut s, &tx, &rx);
    tx.set_dont_fragment(true);
    assert!(tx.dont_fragment());
    tx.send_to(&payload(3000, 1), SocketAddrV4::new(B, 9))
        .unwrap();
    tx.send_to(&payload(1000, 2), SocketAddrV4::new(B, 9))
        .unwrap();
    s.run_for(Duration::from_millis(10));
    assert_eq!(recv_all(&rx), vec![payload(1000, 2)]);
    let sa = s.host(a).stats();
    assert_eq!((sa.ip.cantfrag, sa.ip.fragmented), (1, 0));
    assert_eq!(s.host(b).stats().ip.fragments, 0);
}

/// An Ethernet frame with an IPv4 fragment from `src`: `len` data bytes at `off`.
fn fragment_frame(
    dmac: wire::EthernetAddress,
    src: Ipv4Addr,
    id: u16,
    off: usize,
    len: usize,
) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + len];
    f[..6].copy_from_slice(&dmac.0);
    f[6..12].copy_from_slice(&[0x02, 0xbe, 0xef, 0, 0, 2]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let mut p = wire::Ipv4Packet::new_unchecked(&mut f[14..]);
    p.set_version(4);
    p.set_header_len(20);
    p.set_total_len((20 + len) as u16);
    p.set_ident(id);
    p.set_more_frags(true);
    p.set_frag_offset(off as u16);
    p.set_hop_limit(64);
    p.set_next_header(wire::IpProtocol::Udp);
    p.set_src_addr(src);
    p.set_dst_addr(B);
    p.fill_checksum();
    f
}

#[test]
fn a_flood_of_fragments_that_never_complete_stays_bounded() {
    let mut s = Sim::new(9);
    let hub = s.add_hub(WireConfig::default());
    let a = s.add_host("a", 1);
    let b = s.add_host_with(StackConfig {
        name: "b".into(),
        workers: 2,
        ..StackConfig::default()
    });
    s.connect(a, hub, "198.18.0.1/24");
    s.connect(b, hub, "198.18.0.2/24");
    let tx = bind(s.host(a), 0);
    let rx = bind(s.host(b), 9);
    resolve(&mut s, &tx, &rx);
    let params = net::FragParams::default();
    let b_mac = s.host(b).interfaces()[0].mac;
    let mut port = s.attach_raw(hub);
    let mut max_q = 0;
    // 40,000 first fragments from 4,000 off-link sources, 10 identifications each:
    // none ever completes.
    for burst in 0..80u32 {
        let now = s.now();
        let mut batch: Vec<Mbuf> = (0..500u32)
            .map(|k| {
                let n = burst * 500 + k;
                let src = Ipv4Addr::from(0xc613_0000 | (n % 4000));
                let f = fragment_frame(b_mac, src, (n / 4000) as u16, 0, 1024);
                Mbuf::from_slice(&f).unwrap()
            })
            .collect();
        port.tx_burst(now, &mut batch);
        s.run_for(Duration::from_millis(1));
        let q = s.host(b).stats().ip.fragq;
        max_q = max_q.max(q);
        // Each worker bounds its own table.
        for w in 0..2 {
            let ws = s.host(b).worker_stats(w).unwrap();
            assert!(
                ws.ip.fragq <= params.max_datagrams as u64,
                "{}",
                ws.ip.fragq
            );
        }
    }
    let sb = s.host(b).stats();
    assert_eq!(sb.ip.fragments, 40_000);
    assert!(sb.ip.fragoverflow > 30_000, "{}", sb.ip.fragoverflow);
    assert!(max_q <= 2 * params.max_datagrams as u64);
    assert_eq!(sb.ip.fragments, sb.ip.fragoverflow + sb.ip.fragq);
    // Oldest-first eviction: an honest datagram still gets through during the flood.
    let d = payload(3000, 42);
    tx.send_to(&d, SocketAddrV4::new(B, 9)).unwrap();
    s.run_for(Duration::from_millis(10));
    assert_eq!(recv_all(&rx), vec![d]);
    // And the time-out empties the table.
    s.run_for(Duration::from_secs(31));
    let sb = s.host(b).stats();
    assert_eq!(sb.ip.fragq, 0);
    assert_eq!(sb.ip.fragments, sb.ip.fragoverflow + sb.ip.fragtimeout + 3);
}

#[test]
fn fragmentation_needed_lowers_the_path_mtu() {
    let mut s = Sim::new(9);
    let hub = s.add_hub(WireConfig::default());
    let a = s.add_host("a", 1);
    let b = s.add_host("b", 1);
    s.connect(a, hub, "198.18.0.1/24");
    s.connect(b, hub, "198.18.0.2/24");
    let mut raw = s.attach_raw(hub);
    let tx = bind(s.host(a), 4000);
    let rx = bind(s.host(b), 9);
    resolve(&mut s, &tx, &rx);
    let am = s.host(a).interfaces()[0].mac;
    let frames = |s: &mut Sim, raw: &mut Box<dyn dev::Queue>| -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        raw.rx_burst(s.now(), &mut got, 1024);
        got.iter()
            .map(Mbuf::to_vec)
            .filter(|v| v[6..12] == am.0 && v[12..14] == [0x08, 0x00])
            .collect()
    };
    frames(&mut s, &mut raw);
    // A 1400-byte datagram with Don't Fragment set goes out whole.
    tx.set_dont_fragment(true);
    tx.send_to(&payload(1400, 1), SocketAddrV4::new(B, 9))
        .unwrap();
    s.run_for(Duration::from_millis(5));
    let out = frames(&mut s, &mut raw);
    assert_eq!(out.len(), 1);
    assert_eq!(recv_all(&rx).len(), 1);
    // A router on the path answers "fragmentation needed, next-hop MTU 1200".
    let quoted = &out[0][14..14 + 28];
    let [hi, lo] = 1200u16.to_be_bytes();
    let f = common::icmp4_error_frame(am, 3, 4, [0, 0, hi, lo], quoted);
    let now = s.now();
    raw.tx_burst(now, &mut vec![f]);
    s.run_for(Duration::from_millis(5));
    let cfg = s.host(a).config();
    assert_eq!(cfg.inet.pmtu4.len(), 1);
    assert_eq!((cfg.inet.pmtu4[0].0, cfg.inet.pmtu4[0].1), (B, 1200));
    // With Don't Fragment the next one is refused and counted ...
    let before = s.host(a).stats().ip.cantfrag;
    tx.send_to(&payload(1400, 2), SocketAddrV4::new(B, 9))
        .unwrap();
    s.run_for(Duration::from_millis(5));
    assert!(frames(&mut s, &mut raw).is_empty());
    assert_eq!(s.host(a).stats().ip.cantfrag, before + 1);
    // ... without, it leaves in fragments that fit the path, and arrives whole.
    tx.set_dont_fragment(false);
    tx.send_to(&payload(1400, 3), SocketAddrV4::new(B, 9))
        .unwrap();
    s.run_for(Duration::from_millis(5));
    let out = frames(&mut s, &mut raw);
    assert_eq!(out.len(), 2, "two fragments");
    assert!(out.iter().all(|f| f.len() - 14 <= 1200));
    assert_eq!(recv_all(&rx), vec![payload(1400, 3)]);
}
