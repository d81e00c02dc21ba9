//! What TCP does with hostile input from a host on the link (issue 46): ICMP
//! errors that quote no segment a connection has outstanding change nothing (no
//! path MTU learnt, counted in `tcp.outofwindowicmps` or `icmp.noport`), both
//! families; challenge ACKs and resets for unknown connections are rate limited.
//! Frames are written by hand on a raw port, as an attacker would.

mod common;
use common::hub;

use dev::mem::WireConfig;
use dev::{Duration, Queue};
use sim::{HostId, Sim};
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use wire::{EthernetAddress, Icmpv6Repr, IpProtocol};

/// The MAC the raw port's frames come from.
const RAW_MAC: EthernetAddress = EthernetAddress([2, 0xee, 0, 0, 0, 0xfe]);

/// Hosts a (198.18.0.1, 2001:2::1) and b (…2) on a hub, and a raw port on it.
fn pair(workers: usize, seed: u64) -> (Sim, HostId, HostId, Box<dyn Queue>) {
    let (mut s, a, b, hub) = hub::pair(workers, seed);
    hub::add_addresses6(&mut s, a, b);
    let raw = s.attach_raw(hub);
    // Duplicate address detection.
    s.run_for(Duration::from_millis(1500));
    (s, a, b, raw)
}

/// A Packet Too Big from 2001:2::fe to a (whose MAC is `to`) quoting `quoted`.
fn ptb6(to: EthernetAddress, mtu: u32, quoted: &[u8]) -> mbuf::Mbuf {
    hub::icmp6_frame(
        to,
        RAW_MAC,
        "2001:2::fe".parse().unwrap(),
        "2001:2::1".parse().unwrap(),
        64,
        IpProtocol::Icmpv6,
        &[],
        &Icmpv6Repr::PktTooBig { mtu, data: quoted },
    )
}

/// The path MTU host `h` believes towards b.
fn pmtu(s: &Sim, h: HostId, v6: bool) -> Option<u32> {
    let cfg = s.host(h).config();
    let now = s.now();
    if v6 {
        cfg.inet6.nd6.path_mtu("2001:2::2".parse().unwrap(), now)
    } else {
        cfg.inet.path_mtu4("198.18.0.2".parse().unwrap(), now)
    }
}

/// RFC 5927 §4.1: a "fragmentation needed" (or Packet Too Big) quoting a's
/// connection with a sequence number outside what it has outstanding, or quoting
/// a connection or UDP port that does not exist, changes no path MTU and shrinks
/// no segment, and is counted; one quoting a segment in flight does both. Before,
/// any message quoting one of a's addresses lowered the host-wide path MTU.
#[test]
fn forged_fragmentation_needed_changes_no_path_mtu() {
    for v6 in [false, true] {
        for workers in [1, 2] {
            let case = format!("v6 {v6} workers {workers}");
            let (mut s, a, b, mut raw) = pair(workers, 46);
            let am = s.host(a).interfaces()[0].mac;
            let (to, any): (SocketAddr, SocketAddr) = if v6 {
                ("[2001:2::2]:9".parse().unwrap(), "[::]:9".parse().unwrap())
            } else {
                (
                    "198.18.0.2:9".parse().unwrap(),
                    "0.0.0.0:9".parse().unwrap(),
                )
            };
            let l = s.host(b).tcp_listen(any, 4).unwrap();
            let mut c = s.host(a).tcp_connect_nonblocking(to).unwrap();
            s.run_for(Duration::from_millis(20));
            let _srv = l.accept().unwrap();
            // b stops hearing a's data, which so stays outstanding.
            let fw = net::ipfw::Ipfw::new(fw::RulesetConfig::default(), workers).unwrap();
            fw.command("add 100 deny tcp from any to any 9").unwrap();
            fw.attach(s.host(b));
            let mut got = Vec::new();
            raw.rx_burst(s.now(), &mut got, 4096);
            c.write_all(&[7u8; 2800]).unwrap();
            s.run_for(Duration::from_millis(5));
            got.clear();
            raw.rx_burst(s.now(), &mut got, 4096);
            let (ety, ip_len, l4) = if v6 {
                ([0x86, 0xdd], 40, 14 + 40)
            } else {
                ([8, 0], 20, 14 + 20)
            };
            let seg = got
                .iter()
                .map(mbuf::Mbuf::to_vec)
                .find(|v| v[6..12] == am.0 && v[12..14] == ety && v.len() > l4 + 40)
                .unwrap_or_else(|| panic!("a's data segment, {case}"));
            let mut quoted = seg[14..14 + ip_len + 8].to_vec();
            let seq = u32::from_be_bytes(quoted[ip_len + 4..ip_len + 8].try_into().unwrap());
            let mtu = if v6 { 1280 } else { 1200 };
            let send = |s: &mut Sim, raw: &mut Box<dyn Queue>, quoted: &[u8]| {
                let f = if v6 {
                    ptb6(am, mtu, quoted)
                } else {
                    let [hi, lo] = (mtu as u16).to_be_bytes();
                    common::icmp4_error_frame(am, 3, 4, [0, 0, hi, lo], quoted)
                };
                let now = s.now();
                raw.tx_burst(now, &mut vec![f]);
                s.run_for(Duration::from_millis(2));
            };
            // Below SND.UNA and far beyond SND.MAX.
            for bad in [seq.wrapping_sub(100_000), seq.wrapping_add(3_000_000)] {
                quoted[ip_len + 4..ip_len + 8].copy_from_slice(&bad.to_be_bytes());
                send(&mut s, &mut raw, &quoted);
            }
            quoted[ip_len + 4..ip_len + 8].copy_from_slice(&seq.to_be_bytes());
            // Another connection (our port changed) and a UDP port nobody bound.
            let mut other = quoted.clone();
            other[ip_len] ^= 0x55;
            send(&mut s, &mut raw, &other);
            let mut udp = quoted.clone();
            udp[if v6 { 6 } else { 9 }] = 17;
            send(&mut s, &mut raw, &udp);
            let st = s.host(a).stats();
            assert_eq!(pmtu(&s, a, v6), None, "{case}");
            assert_eq!(st.tcp.outofwindowicmps, 2, "{case}");
            assert_eq!(st.tcp.mturesent, 0, "{case}");
            let noport = if v6 { st.icmp6.noport } else { st.icmp.noport };
            assert_eq!(noport, 2, "{case}");
            // The segment in flight: believed.
            send(&mut s, &mut raw, &quoted);
            assert_eq!(pmtu(&s, a, v6), Some(mtu), "{case}");
            let st = s.host(a).stats();
            assert_eq!(
                (st.tcp.outofwindowicmps, st.tcp.mturesent),
                (2, 1),
                "{case}"
            );
            let held = if v6 {
                s.host(a).config().inet6.nd6.pmtu.iter().all(|p| p.3)
            } else {
                s.host(a).config().inet.pmtu4.iter().all(|p| p.3)
            };
            assert!(held, "a connection's entry is held, {case}");
            // And the retransmission fits the path.
            s.run_for(Duration::from_millis(1500));
            got.clear();
            raw.rx_burst(s.now(), &mut got, 4096);
            let sizes: Vec<usize> = got
                .iter()
                .map(mbuf::Mbuf::to_vec)
                .filter(|v| v[6..12] == am.0 && v[12..14] == ety)
                .map(|v| v.len() - 14)
                .collect();
            assert!(
                !sizes.is_empty() && sizes.iter().all(|&n| n <= mtu as usize),
                "{sizes:?} {case}"
            );
        }
    }
}

/// An IPv4 TCP segment without options or data from the raw port, to `to`.
fn tcp4(
    to: EthernetAddress,
    (src, sport): (Ipv4Addr, u16),
    (dst, dport): (Ipv4Addr, u16),
    (seq, ack, flags): (u32, u32, u8),
) -> mbuf::Mbuf {
    let mut t = Vec::new();
    t.extend_from_slice(&sport.to_be_bytes());
    t.extend_from_slice(&dport.to_be_bytes());
    t.extend_from_slice(&seq.to_be_bytes());
    t.extend_from_slice(&ack.to_be_bytes());
    t.extend_from_slice(&[0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    common::ip4_frame(to, RAW_MAC, src, dst, 6, &t)
}

const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const ACK: u8 = 0x10;

/// a's IPv4 TCP frames in what the raw port saw: (flags, destination port).
fn tcp_from(got: &[mbuf::Mbuf], mac: EthernetAddress) -> Vec<(u8, u16)> {
    got.iter()
        .map(mbuf::Mbuf::to_vec)
        .filter(|v| v[6..12] == mac.0 && v[12..14] == [8, 0] && v[14 + 9] == 6)
        .map(|v| {
            (
                v[14 + 20 + 13],
                u16::from_be_bytes([v[14 + 22], v[14 + 23]]),
            )
        })
        .collect()
}

/// How many of a's IPv4 TCP frames in `got` are resets.
fn resets(got: &[mbuf::Mbuf], mac: EthernetAddress) -> usize {
    tcp_from(got, mac)
        .iter()
        .filter(|&&(f, _)| f & RST != 0)
        .count()
}

/// Sends `n` copies of `f` from the raw port, `per_sec` a second in bursts every
/// 10 ms, and returns what the raw port saw meanwhile.
fn flood(
    s: &mut Sim,
    raw: &mut Box<dyn Queue>,
    f: &mbuf::Mbuf,
    n: usize,
    per_sec: usize,
) -> Vec<mbuf::Mbuf> {
    let per_burst = per_sec / 100;
    let mut seen = Vec::new();
    let mut sent = 0;
    while sent < n {
        let k = per_burst.min(n - sent);
        let mut b: Vec<mbuf::Mbuf> = (0..k)
            .map(|_| mbuf::Mbuf::from_slice(&f.to_vec()).unwrap())
            .collect();
        let now = s.now();
        raw.tx_burst(now, &mut b);
        sent += k;
        s.run_for(Duration::from_millis(10));
        raw.rx_burst(s.now(), &mut seen, 1 << 20);
    }
    s.run_for(Duration::from_millis(10));
    raw.rx_burst(s.now(), &mut seen, 1 << 20);
    seen
}

/// a connected to b's port 9 over a hub, both with `tcp`, and a raw port on the
/// hub: the simulation, the hosts, their MACs, the raw port, the two ends (a's,
/// b's), and what the raw port saw of the handshake.
struct Watched {
    s: Sim,
    a: HostId,
    am: EthernetAddress,
    bm: EthernetAddress,
    raw: Box<dyn Queue>,
    client: net::TcpStream,
    server: net::TcpStream,
    handshake: Vec<mbuf::Mbuf>,
}

fn watched_connection(seed: u64, tcp: net::tcp::TcpConfig) -> Watched {
    let (mut s, a, b, hub) = hub::pair_on_hub(1, seed, WireConfig::default(), tcp);
    let mut raw = s.attach_raw(hub);
    let (am, bm) = (s.host(a).interfaces()[0].mac, s.host(b).interfaces()[0].mac);
    let l = s
        .host(b)
        .tcp_listen("0.0.0.0:9".parse::<SocketAddr>().unwrap(), 4)
        .unwrap();
    let client = s
        .host(a)
        .tcp_connect_nonblocking("198.18.0.2:9".parse::<SocketAddr>().unwrap())
        .unwrap();
    s.run_for(Duration::from_millis(20));
    let (server, _) = l.accept().unwrap();
    let mut handshake = Vec::new();
    raw.rx_burst(s.now(), &mut handshake, 4096);
    Watched {
        s,
        a,
        am,
        bm,
        raw,
        client,
        server,
        handshake,
    }
}

/// The ACKs without SYN or RST that `mac` sent to port 9.
fn plain_acks_to_9(got: &[mbuf::Mbuf], mac: EthernetAddress) -> usize {
    tcp_from(got, mac)
        .iter()
        .filter(|&&(f, p)| p == 9 && f & ACK != 0 && f & (SYN | RST) == 0)
        .count()
}

/// RFC 5961 §7: 80,000 in-window SYNs, forged as the peer's over eight seconds,
/// draw at most five challenge ACKs a second from the connection (FreeBSD's
/// `ack_war_cnt`), and with that off, at most the node's `challenge_ack_limit` a
/// second; the connection lives on and still carries data. Before, 80,000 SYNs
/// drew 80,000 ACKs.
#[test]
fn an_in_window_syn_flood_draws_limited_challenge_acks() {
    for (per_conn, node_limit, most) in [(5, 1000, 5 * 9), (0, 100, 100 * 9)] {
        let tcp = net::tcp::TcpConfig {
            ack_war_cnt: per_conn,
            challenge_ack_limit: node_limit,
            ..net::tcp::TcpConfig::default()
        };
        let Watched {
            mut s,
            a,
            am,
            bm,
            mut raw,
            client: c,
            server: mut srv,
            handshake: got,
        } = watched_connection(47, tcp);
        // b's SYN-ACK: its initial sequence number, and a's port.
        let synack = got
            .iter()
            .map(mbuf::Mbuf::to_vec)
            .find(|v| v[6..12] == bm.0 && v[12..14] == [8, 0] && v[14 + 33] == SYN | ACK)
            .expect("b's SYN-ACK");
        let iss = u32::from_be_bytes(synack[14 + 24..14 + 28].try_into().unwrap());
        let port = u16::from_be_bytes([synack[14 + 22], synack[14 + 23]]);
        let (a4, b4) = (Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2));
        let syn = tcp4(am, (b4, 9), (a4, port), (iss.wrapping_add(1000), 0, SYN));
        let seen = flood(&mut s, &mut raw, &syn, 80_000, 10_000);
        let acks = plain_acks_to_9(&seen, am);
        let st = s.host(a).stats();
        let case = format!("ack_war_cnt {per_conn} challenge_ack_limit {node_limit}: {acks} ACKs");

        assert!(acks <= most, "{case}");
        assert!(acks >= most / 4, "{case}");
        assert_eq!(st.tcp.challengeack, acks as u64, "{case}");
        assert_eq!(
            st.tcp.challengeack + st.tcp.challengeack_ratelim,
            80_000,
            "{case}"
        );
        // The connection is whole.
        srv.write_all(b"still here").unwrap();
        s.run_for(Duration::from_millis(10));
        let mut buf = [0u8; 16];
        let mut c = c;
        let n = std::io::Read::read(&mut c, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"still here", "{case}");
    }
}

/// FreeBSD's `badport_bandlim`: a flood of stray ACKs, to a closed port and to a
/// listener's port with no connection, draws at most `rst_limit` (200) resets a
/// second, the first ones answered; the rest are counted in `tcp.rst_ratelim`.
/// Before, 599,950 stray ACKs drew 599,033 resets.
#[test]
fn a_stray_ack_flood_draws_at_most_the_reset_limit() {
    for workers in [1, 2] {
        let (mut s, a, _b, mut raw) = pair(workers, 48);
        let am = s.host(a).interfaces()[0].mac;
        let _l = s
            .host(a)
            .tcp_listen("0.0.0.0:80".parse::<SocketAddr>().unwrap(), 4)
            .unwrap();
        let (x, a4) = (Ipv4Addr::new(198, 18, 0, 99), Ipv4Addr::new(198, 18, 0, 1));
        s.host(a).config().ifaces[0].arp.insert_static(x, RAW_MAC);
        for dport in [7777, 80] {
            let before = s.host(a).stats().tcp;
            let ack = tcp4(am, (x, 40000), (a4, dport), (1, 12345, ACK));
            let seen = flood(&mut s, &mut raw, &ack, 30_000, 10_000);
            let rsts = resets(&seen, am);
            let st = s.host(a).stats().tcp;
            let case = format!("workers {workers} port {dport}: {rsts} resets");
            // Three seconds of flood.

            assert!((200..=200 * 4).contains(&rsts), "{case}");
            assert_eq!(st.sndrst - before.sndrst, rsts as u64, "{case}");
            assert_eq!(
                (st.sndrst - before.sndrst) + (st.rst_ratelim - before.rst_ratelim),
                30_000,
                "{case}"
            );
            // A second later the limit has room again.
            s.run_for(Duration::from_secs(1));
            let seen = flood(&mut s, &mut raw, &ack, 1, 100);
            assert_eq!(resets(&seen, am), 1, "{case}");
        }
    }
}

/// A connection in TIME_WAIT (its application gone: only the remnant is left)
/// answers any segment with an ACK but a pure duplicate ACK: 30,000 such
/// segments over three seconds, forged as the peer's, draw at most the node's
/// `challenge_ack_limit` (100 here) a second; the rest are counted in
/// `tcp.challengeack_ratelim`. Before, every one drew an ACK.
#[test]
fn a_flood_on_a_time_wait_draws_at_most_the_challenge_ack_limit() {
    let tcp = net::tcp::TcpConfig {
        challenge_ack_limit: 100,
        ..net::tcp::TcpConfig::default()
    };
    let Watched {
        mut s,
        a,
        am,
        mut raw,
        client: c,
        server: srv,
        handshake: mut got,
        ..
    } = watched_connection(49, tcp);
    let port = got
        .iter()
        .map(mbuf::Mbuf::to_vec)
        .find(|v| v[6..12] == am.0 && v[12..14] == [8, 0] && v[14 + 9] == 6)
        .map(|v| u16::from_be_bytes([v[14 + 20], v[14 + 21]]))
        .expect("a's SYN");
    // a closes first, so a waits in TIME_WAIT.
    drop(c);
    s.run_for(Duration::from_millis(10));
    drop(srv);
    s.run_for(Duration::from_millis(20));
    let q = s.host(a).tcp_connections_ask().unwrap();
    s.run_for(Duration::from_millis(1));
    let conns: Vec<_> = q.into_list().iter().map(|c| c.state).collect();
    assert_eq!(conns, ["TIME_WAIT"]);
    got.clear();
    raw.rx_burst(s.now(), &mut got, 4096);
    let (a4, b4) = (Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2));
    let seg = tcp4(am, (b4, 9), (a4, port), (12_345, 678, ACK));
    let before = s.host(a).stats().tcp;
    let seen = flood(&mut s, &mut raw, &seg, 30_000, 10_000);
    let acks = plain_acks_to_9(&seen, am);
    let st = s.host(a).stats().tcp;
    let case = format!("{acks} ACKs");
    assert!((150..=400).contains(&acks), "{case}");
    assert_eq!(st.sndacks - before.sndacks, acks as u64, "{case}");
    assert_eq!(
        acks as u64 + (st.challengeack_ratelim - before.challengeack_ratelim),
        30_000,
        "{case}"
    );
    assert_eq!(st.pcbcount, 1, "still waiting");
}

/// FreeBSD's `badport_bandlim` for the reset that refuses a SYN cookie's ACK when
/// there is no room for its connection: a cookie stays valid for a minute or
/// more, and 30,000 copies of its ACK over three seconds draw at most
/// `rst_limit` (200) resets a second, the rest counted in `tcp.rst_ratelim`.
/// Before, every copy drew a reset.
#[test]
fn a_replayed_syn_cookie_ack_draws_at_most_the_reset_limit() {
    let mut s = Sim::new(50);
    let hub = s.add_hub(WireConfig::default());
    // No room for any connection: every SYN is answered with a cookie, every
    // cookie's ACK refused.
    let a = s.add_host_with(net::stack::StackConfig {
        name: "a".into(),
        workers: 1,
        tcp_max_conns: 0,
        ..net::stack::StackConfig::default()
    });
    s.connect(a, hub, "198.18.0.1/24");
    let mut raw = s.attach_raw(hub);
    let am = s.host(a).interfaces()[0].mac;
    let _l = s
        .host(a)
        .tcp_listen("0.0.0.0:80".parse::<SocketAddr>().unwrap(), 4)
        .unwrap();
    let (x, a4) = (Ipv4Addr::new(198, 18, 0, 99), Ipv4Addr::new(198, 18, 0, 1));
    s.host(a).config().ifaces[0].arp.insert_static(x, RAW_MAC);
    let syn = tcp4(am, (x, 40_000), (a4, 80), (1000, 0, SYN));
    let seen = flood(&mut s, &mut raw, &syn, 1, 100);
    let synack = seen
        .iter()
        .map(mbuf::Mbuf::to_vec)
        .find(|v| v[6..12] == am.0 && v[12..14] == [8, 0] && v[14 + 33] == SYN | ACK)
        .expect("a's SYN-ACK with a cookie");
    assert_eq!(s.host(a).stats().tcp.syncookiessent, 1);
    let cookie = u32::from_be_bytes(synack[14 + 24..14 + 28].try_into().unwrap());
    let ack = tcp4(
        am,
        (x, 40_000),
        (a4, 80),
        (1001, cookie.wrapping_add(1), ACK),
    );
    let before = s.host(a).stats().tcp;
    let seen = flood(&mut s, &mut raw, &ack, 30_000, 10_000);
    let rsts = resets(&seen, am);
    let st = s.host(a).stats().tcp;
    let case = format!("{rsts} resets");
    assert_eq!(
        st.syncookiesrecvd - before.syncookiesrecvd,
        30_000,
        "{case}"
    );
    assert!((200..=200 * 4).contains(&rsts), "{case}");
    assert_eq!(st.sndrst - before.sndrst, rsts as u64, "{case}");
    assert_eq!(
        rsts as u64 + (st.rst_ratelim - before.rst_ratelim),
        30_000,
        "{case}"
    );
}
