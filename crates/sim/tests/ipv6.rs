//! IPv6 scenarios in virtual time: duplicate address detection, neighbour discovery
//! (resolution, NUD to stale and back through delay and probe), echo, and the
//! extension-header rules of RFC 8200 with their Parameter Problems. A raw port on the
//! hub plays the other node, so every frame on the wire is checked byte by byte.

mod common;
use common::hub;

use dev::mem::WireConfig;
use dev::{Duration, Queue};
use net::iface::{AddrState, IfIndex};
use net::lle::LleState;
use net::pfil::{Dir, PfilCtx, PfilHook, PfilPoint, Verdict};
use sim::{HostId, Sim};
use std::net::Ipv6Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use wire::{
    EtherType, EthernetAddress, EthernetFrame, Icmpv6Packet, Icmpv6Repr, IpProtocol, Ipv6Packet,
    Ipv6Repr, NdiscNeighborFlags, NdiscRepr,
};

const PEER_MAC: EthernetAddress = EthernetAddress([0x02, 0xee, 0, 0, 0, 0x99]);

fn a6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

fn peer() -> Ipv6Addr {
    a6("2001:2::99")
}

/// Host b on a hub with 2001:2::2/64, and a raw port as the peer 2001:2::99.
fn setup(workers: usize) -> (Sim, HostId, Box<dyn Queue>) {
    let mut s = Sim::new(11);
    let hub = s.add_hub(WireConfig::default());
    let b = s.add_host("b", workers);
    s.connect(b, hub, "198.18.0.2/24");
    let raw = s.attach_raw(hub);
    s.host(b)
        .add_address6(IfIndex(0), "2001:2::2/64".parse().unwrap())
        .unwrap();
    (s, b, raw)
}

/// One IPv6 frame seen on the wire.
#[derive(Debug)]
struct Seen {
    dst_mac: EthernetAddress,
    ip: Ipv6Repr,
    /// The bytes after the IPv6 header.
    payload: Vec<u8>,
}

impl Seen {
    fn icmp(&self) -> Icmpv6Repr<'_> {
        let p = Icmpv6Packet::new_checked(&self.payload[..]).unwrap();
        Icmpv6Repr::parse(&p, &self.ip.src_addr, &self.ip.dst_addr, true).expect("valid ICMPv6")
    }
}

/// What b sent, MLD reports (the only packets it sends behind a hop-by-hop header)
/// left out; [`recv_all`] keeps them.
fn recv(s: &mut Sim, raw: &mut Box<dyn Queue>) -> Vec<Seen> {
    recv_all(s, raw)
        .into_iter()
        .filter(|f| f.ip.next_header != IpProtocol::HopByHop)
        .collect()
}

fn recv_all(s: &mut Sim, raw: &mut Box<dyn Queue>) -> Vec<Seen> {
    let mut got = Vec::new();
    let mut out = Vec::new();
    raw.rx_burst(s.now(), &mut got, 1024);
    for m in got {
        let v = m.to_vec();
        let f = EthernetFrame::new_checked(&v[..]).unwrap();
        if f.ethertype() != EtherType::Ipv6 {
            continue;
        }
        let p = Ipv6Packet::new_checked(f.payload()).unwrap();
        let ip = Ipv6Repr::parse(&p).unwrap();
        out.push(Seen {
            dst_mac: f.dst_addr(),
            ip,
            payload: p.payload()[..ip.payload_len].to_vec(),
        });
    }
    out
}

/// An IPv6 frame from the peer: `ext` is the raw extension-header chain (first header
/// `first`), then an ICMPv6 message.
fn frame(
    dst_mac: EthernetAddress,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hlim: u8,
    first: IpProtocol,
    ext: &[u8],
    icmp: &Icmpv6Repr<'_>,
) -> mbuf::Mbuf {
    hub::icmp6_frame(dst_mac, PEER_MAC, src, dst, hlim, first, ext, icmp)
}

fn send(s: &mut Sim, raw: &mut Box<dyn Queue>, m: mbuf::Mbuf) {
    let now = s.now();
    raw.tx_burst(now, &mut vec![m]);
    s.run_for(Duration::from_millis(1));
}

fn solicited(a: Ipv6Addr) -> Ipv6Addr {
    net::iface::solicited_node(a)
}

fn b_mac(s: &Sim, b: HostId) -> EthernetAddress {
    s.host(b).interfaces()[0].mac
}

fn echo(seq: u16) -> Icmpv6Repr<'static> {
    Icmpv6Repr::EchoRequest {
        ident: 0x77,
        seq_no: seq,
        data: b"mpstack ipv6 echo",
    }
}

/// The peer's neighbour advertisement for itself, solicited.
fn na_from_peer(b: EthernetAddress, to: Ipv6Addr, solicited: bool) -> mbuf::Mbuf {
    let mut flags = NdiscNeighborFlags::OVERRIDE;
    if solicited {
        flags = flags | NdiscNeighborFlags::SOLICITED;
    }
    frame(
        b,
        peer(),
        to,
        255,
        IpProtocol::Icmpv6,
        &[],
        &Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert {
            flags,
            target_addr: peer(),
            lladdr: Some(PEER_MAC),
        }),
    )
}

/// The peer defends `target`, its address too (RFC 4862 §5.4.4): an unsolicited
/// advertisement to all nodes, sent from `target`, as a node that holds it does.
fn defending_na(target: Ipv6Addr) -> mbuf::Mbuf {
    frame(
        EthernetAddress([0x33, 0x33, 0, 0, 0, 1]),
        target,
        a6("ff02::1"),
        255,
        IpProtocol::Icmpv6,
        &[],
        &Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert {
            flags: NdiscNeighborFlags::OVERRIDE,
            target_addr: target,
            lladdr: Some(PEER_MAC),
        }),
    )
}

/// Runs DAD to completion and checks what went on the wire.
fn dad_completes(s: &mut Sim, b: HostId, raw: &mut Box<dyn Queue>) {
    s.run_for(Duration::from_millis(10));
    let probes = recv(s, raw);
    let targets: Vec<Ipv6Addr> = probes
        .iter()
        .filter_map(|f| match f.icmp() {
            Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
                target_addr,
                lladdr: None,
            }) if f.ip.src_addr.is_unspecified()
                && f.ip.dst_addr == solicited(target_addr)
                && f.ip.hop_limit == 255 =>
            {
                Some(target_addr)
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        targets.len(),
        2,
        "one DAD probe each, link-local and global: {probes:?}"
    );
    assert!(targets.contains(&a6("2001:2::2")));
    assert!(s
        .host(b)
        .addresses6()
        .iter()
        .all(|(_, _, st)| *st == AddrState::Tentative));
    s.run_for(Duration::from_millis(1100));
    let st = s.host(b).addresses6();
    assert!(
        st.iter().all(|(_, _, st)| *st == AddrState::Preferred),
        "{st:?}"
    );
    assert_eq!(s.host(b).stats().nd6.dadok, 2);
}

#[test]
fn ndp_dad_then_resolution_and_echo() {
    for workers in [1, 2] {
        let (mut s, b, mut raw) = setup(workers);
        dad_completes(&mut s, b, &mut raw);
        let bm = b_mac(&s, b);
        // An echo request from the peer: b must resolve the peer first.
        send(
            &mut s,
            &mut raw,
            frame(
                bm,
                peer(),
                a6("2001:2::2"),
                64,
                IpProtocol::Icmpv6,
                &[],
                &echo(1),
            ),
        );
        let out = recv(&mut s, &mut raw);
        let ns = out
            .iter()
            .find(|f| {
                matches!(
                    f.icmp(),
                    Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { .. })
                )
            })
            .expect("b solicits the peer");
        assert_eq!(ns.ip.dst_addr, solicited(peer()));
        assert_eq!(ns.dst_mac, EthernetAddress([0x33, 0x33, 0xff, 0, 0, 0x99]));
        assert!(matches!(
            ns.icmp(),
            Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target_addr, lladdr: Some(m) }) if target_addr == peer() && m == bm
        ));
        send(&mut s, &mut raw, na_from_peer(bm, ns.ip.src_addr, true));
        let out = recv(&mut s, &mut raw);
        let reply = out
            .iter()
            .find(|f| matches!(f.icmp(), Icmpv6Repr::EchoReply { .. }))
            .unwrap_or_else(|| panic!("echo reply released from the hold queue: {out:?}"));
        assert_eq!(reply.dst_mac, PEER_MAC);
        assert_eq!(
            (reply.ip.src_addr, reply.ip.dst_addr),
            (a6("2001:2::2"), peer())
        );
        assert!(matches!(
            reply.icmp(),
            Icmpv6Repr::EchoReply { ident: 0x77, seq_no: 1, data } if data == b"mpstack ipv6 echo"
        ));
        let nd = s.host(b).interfaces()[0].nd6.entries();
        assert_eq!((nd[0].ip, nd[0].state), (peer(), LleState::Reachable));
        // An echo to the all-nodes group is answered from our unicast address.
        send(
            &mut s,
            &mut raw,
            frame(
                EthernetAddress([0x33, 0x33, 0, 0, 0, 1]),
                peer(),
                a6("ff02::1"),
                64,
                IpProtocol::Icmpv6,
                &[],
                &echo(2),
            ),
        );
        let out = recv(&mut s, &mut raw);
        assert!(out.iter().any(
            |f| matches!(f.icmp(), Icmpv6Repr::EchoReply { seq_no: 2, .. })
                && !f.ip.src_addr.is_multicast()
        ));
        let st = s.host(b).stats();
        assert_eq!(
            (st.icmp6.inecho, st.icmp6.outechoreply),
            (2, 2),
            "workers={workers}"
        );
    }
}

#[test]
fn ndp_answers_a_solicitation_and_learns_the_sender() {
    let (mut s, b, mut raw) = setup(1);
    dad_completes(&mut s, b, &mut raw);
    let ns = Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
        target_addr: a6("2001:2::2"),
        lladdr: Some(PEER_MAC),
    });
    let sn = solicited(a6("2001:2::2"));
    send(
        &mut s,
        &mut raw,
        frame(
            EthernetAddress([0x33, 0x33, 0xff, 0, 0, 2]),
            peer(),
            sn,
            255,
            IpProtocol::Icmpv6,
            &[],
            &ns,
        ),
    );
    let out = recv(&mut s, &mut raw);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(
        out[0].dst_mac, PEER_MAC,
        "answered without asking: the NS taught b"
    );
    match out[0].icmp() {
        Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert {
            flags,
            target_addr,
            lladdr,
        }) => {
            assert_eq!(target_addr, a6("2001:2::2"));
            assert_eq!(lladdr, Some(b_mac(&s, b)));
            assert!(flags.contains(NdiscNeighborFlags::SOLICITED | NdiscNeighborFlags::OVERRIDE));
        }
        other => panic!("{other:?}"),
    }
    // Learnt STALE from the solicitation (RFC 4861 §7.2.3), then the advertisement
    // sent to it moved it to DELAY (§7.3.3).
    assert_eq!(
        s.host(b).interfaces()[0].nd6.entries()[0].state,
        LleState::Delay
    );
    // The same with a hop limit of 254 did not come from the link: dropped, counted.
    send(
        &mut s,
        &mut raw,
        frame(
            EthernetAddress([0x33, 0x33, 0xff, 0, 0, 2]),
            peer(),
            sn,
            254,
            IpProtocol::Icmpv6,
            &[],
            &ns,
        ),
    );
    assert!(recv(&mut s, &mut raw).is_empty());
    assert_eq!(s.host(b).stats().icmp6.badns, 1);
}

#[test]
fn ndp_dad_detects_a_duplicate() {
    let (mut s, b, mut raw) = setup(1);
    s.run_for(Duration::from_millis(10));
    let probes = recv(&mut s, &mut raw);
    assert!(!probes.is_empty());
    // The peer already holds 2001:2::2 and defends it (RFC 4862 §5.4.4).
    let bm = b_mac(&s, b);
    send(&mut s, &mut raw, defending_na(a6("2001:2::2")));
    s.run_for(Duration::from_secs(2));
    let addrs = s.host(b).addresses6();
    let global = addrs
        .iter()
        .find(|(_, a, _)| a.addr == a6("2001:2::2"))
        .unwrap();
    assert_eq!(global.2, AddrState::Duplicated);
    let ll = addrs
        .iter()
        .find(|(_, a, _)| a.addr != a6("2001:2::2"))
        .unwrap();
    assert_eq!(
        ll.2,
        AddrState::Preferred,
        "the link-local address is unique"
    );
    assert_eq!(s.host(b).stats().nd6.dadcollision, 1);
    // A duplicated address takes no traffic.
    recv(&mut s, &mut raw);
    send(
        &mut s,
        &mut raw,
        frame(
            bm,
            peer(),
            a6("2001:2::2"),
            64,
            IpProtocol::Icmpv6,
            &[],
            &echo(9),
        ),
    );
    s.run_for(Duration::from_millis(10));
    assert!(recv(&mut s, &mut raw)
        .iter()
        .all(|f| !matches!(f.icmp(), Icmpv6Repr::EchoReply { .. })));
}

/// The `nd6` warnings logged on this thread (the simulation runs its workers
/// here).
#[derive(Default)]
struct Warnings(std::sync::Mutex<Vec<String>>);

impl tracing::Subscriber for Warnings {
    fn enabled(&self, m: &tracing::Metadata<'_>) -> bool {
        m.target() == "nd6"
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, e: &tracing::Event<'_>) {
        struct Msg(String);
        impl tracing::field::Visit for Msg {
            fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                if f.name() == "message" {
                    self.0 = format!("{v:?}");
                }
            }
        }
        let mut m = Msg(String::new());
        e.record(&mut m);
        self.0.lock().unwrap().push(m.0);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[test]
fn dad_warnings_are_rate_limited_with_a_count_of_those_held_back() {
    let w = std::sync::Arc::new(Warnings::default());
    let lines = || w.0.lock().unwrap().clone();
    tracing::subscriber::with_default(w.clone(), || {
        let (mut s, b, mut raw) = setup(1);
        // 15 global addresses, the interface's bound with its link-local one, every
        // one defended by the peer while tentative: 15 duplicates.
        for i in 3..=16u16 {
            s.host(b)
                .add_address6(IfIndex(0), format!("2001:2::{i:x}/64").parse().unwrap())
                .unwrap();
        }
        for i in 2..=16u16 {
            let na = defending_na(a6(&format!("2001:2::{i:x}")));
            send(&mut s, &mut raw, na);
        }
        assert_eq!(s.host(b).stats().nd6.dadcollision, 15, "every one counted");
        let dup = |l: &[String]| l.iter().filter(|l| l.contains("DAD detected")).count();
        assert_eq!(
            dup(&lines()),
            net::nd6::DAD_LOG_LINES as usize,
            "{:?}",
            lines()
        );
        assert!(!lines().iter().any(|l| l.contains("suppressed")));
        // Once the window is over, the count of those held back, once.
        s.run_for(net::nd6::DAD_LOG_WINDOW + Duration::from_secs(1));
        let l = lines();
        let said: Vec<_> = l.iter().filter(|l| l.contains("suppressed")).collect();
        assert_eq!(said.len(), 1, "{l:?}");
        assert!(said[0].contains("suppressed 5 DAD"), "{}", said[0]);
    });
}

#[test]
fn nud_goes_stale_then_delay_probe_and_back_to_reachable() {
    let (mut s, b, mut raw) = setup(1);
    dad_completes(&mut s, b, &mut raw);
    let bm = b_mac(&s, b);
    send(
        &mut s,
        &mut raw,
        frame(
            bm,
            peer(),
            a6("2001:2::2"),
            64,
            IpProtocol::Icmpv6,
            &[],
            &echo(1),
        ),
    );
    recv(&mut s, &mut raw);
    send(&mut s, &mut raw, na_from_peer(bm, a6("2001:2::2"), true));
    recv(&mut s, &mut raw);
    let state = |s: &Sim| s.host(b).interfaces()[0].nd6.entries()[0].state;
    assert_eq!(state(&s), LleState::Reachable);
    s.run_for(Duration::from_secs(31));
    assert_eq!(state(&s), LleState::Stale, "REACHABLE_TIME passed");
    // Traffic to a stale neighbour goes out at once and starts DELAY.
    send(
        &mut s,
        &mut raw,
        frame(
            bm,
            peer(),
            a6("2001:2::2"),
            64,
            IpProtocol::Icmpv6,
            &[],
            &echo(2),
        ),
    );
    let out = recv(&mut s, &mut raw);
    assert!(out
        .iter()
        .any(|f| matches!(f.icmp(), Icmpv6Repr::EchoReply { seq_no: 2, .. })));
    assert_eq!(state(&s), LleState::Delay);
    s.run_for(Duration::from_secs(5));
    assert_eq!(state(&s), LleState::Probe);
    let out = recv(&mut s, &mut raw);
    let probe = out
        .iter()
        .find(|f| {
            matches!(
                f.icmp(),
                Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { .. })
            )
        })
        .expect("a unicast probe");
    assert_eq!((probe.ip.dst_addr, probe.dst_mac), (peer(), PEER_MAC));
    send(&mut s, &mut raw, na_from_peer(bm, a6("2001:2::2"), true));
    assert_eq!(state(&s), LleState::Reachable);
}

/// The echo request behind `ext` (first header `first`) and what b sends back.
fn with_ext(
    s: &mut Sim,
    b: HostId,
    raw: &mut Box<dyn Queue>,
    first: IpProtocol,
    ext: &[u8],
) -> Vec<Seen> {
    let bm = b_mac(s, b);
    send(
        s,
        raw,
        frame(bm, peer(), a6("2001:2::2"), 64, first, ext, &echo(5)),
    );
    s.run_for(Duration::from_millis(5));
    recv(s, raw)
}

fn param_problem(out: &[Seen]) -> Option<(u8, u32)> {
    out.iter().find_map(|f| match f.icmp() {
        Icmpv6Repr::ParamProblem {
            reason, pointer, ..
        } => Some((u8::from(reason), pointer)),
        _ => None,
    })
}

#[test]
fn extension_headers_follow_rfc_8200() {
    let (mut s, b, mut raw) = setup(1);
    dad_completes(&mut s, b, &mut raw);
    let bm = b_mac(&s, b);
    // Teach b the peer, so answers need no resolution.
    send(
        &mut s,
        &mut raw,
        frame(
            bm,
            peer(),
            a6("2001:2::2"),
            64,
            IpProtocol::Icmpv6,
            &[],
            &echo(0),
        ),
    );
    send(&mut s, &mut raw, na_from_peer(bm, a6("2001:2::2"), true));
    recv(&mut s, &mut raw);
    let icmp6 = 58u8;
    let is_reply = |out: &[Seen]| {
        out.iter()
            .any(|f| matches!(f.icmp(), Icmpv6Repr::EchoReply { .. }))
    };

    // Hop-by-hop with PadN and a router alert: processed, answered.
    let hbh = [icmp6, 0, 5, 2, 0, 0, 1, 0];
    assert!(is_reply(&with_ext(
        &mut s,
        b,
        &mut raw,
        IpProtocol::HopByHop,
        &hbh
    )));
    // Unknown option, action bits 00: skipped.
    let skip = [icmp6, 0, 0x1e, 4, 0, 0, 0, 0];
    assert!(is_reply(&with_ext(
        &mut s,
        b,
        &mut raw,
        IpProtocol::Ipv6Opts,
        &skip
    )));
    // Action bits 01: discarded silently.
    let discard = [icmp6, 0, 0x5e, 4, 0, 0, 0, 0];
    let out = with_ext(&mut s, b, &mut raw, IpProtocol::Ipv6Opts, &discard);
    assert!(out.is_empty(), "{out:?}");
    // Action bits 10: Parameter Problem code 2 pointing at the option type (40 + 2).
    let send_all = [icmp6, 0, 0x9e, 4, 0, 0, 0, 0];
    let out = with_ext(&mut s, b, &mut raw, IpProtocol::Ipv6Opts, &send_all);
    assert_eq!(param_problem(&out), Some((2, 42)), "{out:?}");
    // Action bits 11, unicast destination: the same.
    let send_uni = [icmp6, 0, 0xde, 4, 0, 0, 0, 0];
    assert_eq!(
        param_problem(&with_ext(
            &mut s,
            b,
            &mut raw,
            IpProtocol::Ipv6Opts,
            &send_uni
        )),
        Some((2, 42))
    );
    // Routing header type 0 with segments left: RFC 5095, code 0 at the type (40 + 2).
    let mut rh0 = vec![icmp6, 2, 0, 1, 0, 0, 0, 0];
    rh0.extend_from_slice(&a6("2001:2::77").octets());
    let out = with_ext(&mut s, b, &mut raw, IpProtocol::Ipv6Route, &rh0);
    assert_eq!(param_problem(&out), Some((0, 42)), "{out:?}");
    // Type 0 with segments left 0: the header is ignored.
    rh0[3] = 0;
    assert!(is_reply(&with_ext(
        &mut s,
        b,
        &mut raw,
        IpProtocol::Ipv6Route,
        &rh0
    )));
    // Hop-by-hop anywhere but first: code 1, pointing at the Next Header that named it.
    let dst_then_hbh = [0u8, 0, 1, 4, 0, 0, 0, 0, icmp6, 0, 1, 4, 0, 0, 0, 0];
    let out = with_ext(&mut s, b, &mut raw, IpProtocol::Ipv6Opts, &dst_then_hbh);
    assert_eq!(param_problem(&out), Some((1, 40)), "{out:?}");
    // An unknown next header: code 1 at the byte that names it (the fixed header's).
    let out = with_ext(
        &mut s,
        b,
        &mut raw,
        IpProtocol::from(253),
        &[icmp6, 0, 1, 4, 0, 0, 0, 0],
    );
    assert_eq!(param_problem(&out), Some((1, 6)), "{out:?}");
    // An atomic fragment (offset 0, M clear; RFC 6946): processed at once.
    let atomic = [icmp6, 0, 0, 0, 0, 0, 0x12, 0x34];
    assert!(is_reply(&with_ext(
        &mut s,
        b,
        &mut raw,
        IpProtocol::Ipv6Frag,
        &atomic
    )));
    // ESP: recognised and counted, nothing to answer.
    assert!(with_ext(&mut s, b, &mut raw, IpProtocol::Esp, &[0u8; 16]).is_empty());
    // A chain of 40 empty destination-options headers: refused, bounded work.
    let mut long = Vec::new();
    for _ in 0..39 {
        long.extend_from_slice(&[60, 0, 1, 4, 0, 0, 0, 0]);
    }
    long.extend_from_slice(&[icmp6, 0, 1, 4, 0, 0, 0, 0]);
    assert!(with_ext(&mut s, b, &mut raw, IpProtocol::Ipv6Opts, &long).is_empty());
    let st = s.host(b).stats();
    assert_eq!(st.ip6.rthdr0, 2);
    assert_eq!(st.ip6.esp, 1);
    assert_eq!(st.ip6.toomanyhdr, 1);
    assert_eq!(st.icmp6.outparamprob, 5);
    // Still answering.
    assert!(is_reply(&with_ext(
        &mut s,
        b,
        &mut raw,
        IpProtocol::Icmpv6,
        &[]
    )));
}

/// An IPv6 frame from the peer to b carrying `payload` as protocol `next`.
fn frame_raw(dst_mac: EthernetAddress, next: IpProtocol, payload: &[u8]) -> mbuf::Mbuf {
    let mut v = vec![0u8; 14 + 40];
    {
        let mut f = EthernetFrame::new_unchecked(&mut v[..]);
        f.set_dst_addr(dst_mac);
        f.set_src_addr(PEER_MAC);
        f.set_ethertype(EtherType::Ipv6);
    }
    Ipv6Repr {
        src_addr: peer(),
        dst_addr: a6("2001:2::2"),
        next_header: next,
        payload_len: payload.len(),
        hop_limit: 64,
    }
    .emit(&mut Ipv6Packet::new_unchecked(&mut v[14..]));
    v.extend_from_slice(payload);
    mbuf::Mbuf::from_slice(&v).unwrap()
}

/// Fills the checksum at `at` of an upper-layer message from the peer to b.
fn fill_sum(msg: &mut [u8], next: IpProtocol, at: usize) {
    msg[at..at + 2].copy_from_slice(&[0, 0]);
    let s = !wire::checksum::combine(&[
        wire::checksum::data(msg),
        wire::checksum::pseudo_header(
            &std::net::IpAddr::V6(peer()),
            &std::net::IpAddr::V6(a6("2001:2::2")),
            next,
            msg.len() as u32,
        ),
    ]);
    msg[at..at + 2].copy_from_slice(&s.to_be_bytes());
}

#[test]
fn udp_and_tcp_over_ipv6_to_closed_ports_get_unreachable_and_reset() {
    let (mut s, b, mut raw) = setup(1);
    dad_completes(&mut s, b, &mut raw);
    let bm = b_mac(&s, b);
    send(
        &mut s,
        &mut raw,
        frame(
            bm,
            peer(),
            a6("2001:2::2"),
            64,
            IpProtocol::Icmpv6,
            &[],
            &echo(0),
        ),
    );
    send(&mut s, &mut raw, na_from_peer(bm, a6("2001:2::2"), true));
    recv(&mut s, &mut raw);

    // UDP to port 9999: port unreachable quoting the datagram.
    let mut udp = vec![0x30, 0x39, 0x27, 0x0f, 0, 12, 0, 0, b'p', b'i', b'n', b'g'];
    fill_sum(&mut udp, IpProtocol::Udp, 6);
    send(&mut s, &mut raw, frame_raw(bm, IpProtocol::Udp, &udp));
    let out = recv(&mut s, &mut raw);
    let unreach = out.iter().find_map(|f| match f.icmp() {
        Icmpv6Repr::DstUnreachable { reason, data } => Some((u8::from(reason), data.len())),
        _ => None,
    });
    assert_eq!(unreach, Some((4, 40 + 12)), "{out:?}");
    // A zero checksum is not allowed over IPv6 (RFC 8200 §8.1): dropped silently.
    udp[6..8].copy_from_slice(&[0, 0]);
    send(&mut s, &mut raw, frame_raw(bm, IpProtocol::Udp, &udp));
    assert!(recv(&mut s, &mut raw).is_empty());

    // TCP SYN to port 80 with an MSS option: a reset, ACK = SEQ + 1.
    let mut syn = vec![0u8; 24];
    syn[0..2].copy_from_slice(&40000u16.to_be_bytes());
    syn[2..4].copy_from_slice(&80u16.to_be_bytes());
    syn[4..8].copy_from_slice(&1000u32.to_be_bytes());
    syn[12] = 6 << 4;
    syn[13] = 0x02;
    syn[14..16].copy_from_slice(&65535u16.to_be_bytes());
    syn[20..24].copy_from_slice(&[2, 4, 0x05, 0xa0]);
    fill_sum(&mut syn, IpProtocol::Tcp, 16);
    send(&mut s, &mut raw, frame_raw(bm, IpProtocol::Tcp, &syn));
    let out = recv(&mut s, &mut raw);
    assert_eq!(out.len(), 1, "{out:?}");
    let r = &out[0];
    assert_eq!(
        (r.ip.next_header, r.ip.src_addr, r.ip.dst_addr),
        (IpProtocol::Tcp, a6("2001:2::2"), peer())
    );
    let t = wire::TcpPacket::new_checked(&r.payload[..]).unwrap();
    assert!(t.verify_checksum(
        &std::net::IpAddr::V6(r.ip.src_addr),
        &std::net::IpAddr::V6(r.ip.dst_addr)
    ));
    assert!(t.rst() && t.ack() && !t.syn());
    assert_eq!((t.src_port(), t.dst_port()), (80, 40000));
    assert_eq!((t.seq_number().0, t.ack_number().0), (0, 1001));
    // A bad checksum: dropped, counted, no answer.
    syn[16] ^= 0xff;
    send(&mut s, &mut raw, frame_raw(bm, IpProtocol::Tcp, &syn));
    assert!(recv(&mut s, &mut raw).is_empty());
    let st = s.host(b).stats();
    assert_eq!((st.udp.badsum, st.tcp.rcvbadsum, st.tcp.sndrst), (1, 1, 1));
}

fn router_ll() -> Ipv6Addr {
    a6("fe80::99")
}

/// Raw NDP options.
fn opts(list: &[wire::NdiscOptionRepr<'_>]) -> Vec<u8> {
    let len: usize = list.iter().map(|o| o.buffer_len()).sum();
    let mut v = vec![0u8; len];
    let mut rest = &mut v[..];
    for o in list {
        rest = o.emit(rest);
    }
    v
}

fn ra(lifetime: u16, prefix: &str, flags: u8) -> mbuf::Mbuf {
    ra_with(lifetime, prefix, flags, 86400, 14400)
}

/// An advertisement from the router with one /64 prefix of these lifetimes
/// (seconds: valid, preferred).
fn ra_with(lifetime: u16, prefix: &str, flags: u8, valid: u32, preferred: u32) -> mbuf::Mbuf {
    let o = opts(&[
        wire::NdiscOptionRepr::SourceLinkLayerAddr(PEER_MAC),
        wire::NdiscOptionRepr::PrefixInformation(wire::NdiscPrefixInformation {
            prefix_len: 64,
            flags: wire::NdiscPrefixFlags::from_bits_truncate(flags),
            valid_lifetime: valid,
            preferred_lifetime: preferred,
            prefix: a6(prefix),
        }),
    ]);
    frame(
        EthernetAddress([0x33, 0x33, 0, 0, 0, 1]),
        router_ll(),
        a6("ff02::1"),
        255,
        IpProtocol::Icmpv6,
        &[],
        &Icmpv6Repr::Ndisc(NdiscRepr::RouterAdvert {
            hop_limit: 64,
            flags: wire::NdiscRouterFlags::EMPTY,
            router_lifetime: lifetime,
            reachable_time: 0,
            retrans_time: 0,
            options: &o,
        }),
    )
}

/// An echo request to b's address `to` from the off-link host 2001:2:ffff::5, which
/// the router delivers.
fn echo_from_far(bm: EthernetAddress, to: Ipv6Addr, seq: u16) -> mbuf::Mbuf {
    frame(
        bm,
        a6("2001:2:ffff::5"),
        to,
        63,
        IpProtocol::Icmpv6,
        &[],
        &echo(seq),
    )
}

#[test]
fn router_discovery_slaac_default_router_and_redirect() {
    let mut s = Sim::new(12);
    let hub = s.add_hub(WireConfig::default());
    let b = s.add_host_with(net::StackConfig {
        name: "b".into(),
        slaac: true,
        ..net::StackConfig::default()
    });
    s.connect(b, hub, "198.18.0.2/24");
    let mut raw = s.attach_raw(hub);
    s.host(b)
        .add_address6(IfIndex(0), "2001:2::2/64".parse().unwrap())
        .unwrap();
    let bm = b_mac(&s, b);
    // DAD (1 s), then a router solicitation within a second, from the link-local
    // address with its link-layer address, to all-routers.
    s.run_for(Duration::from_millis(2100));
    let out = recv(&mut s, &mut raw);
    let rs: Vec<&Seen> = out
        .iter()
        .filter(|f| matches!(f.icmp(), Icmpv6Repr::Ndisc(NdiscRepr::RouterSolicit { lladdr: Some(m) }) if m == bm))
        .collect();
    assert_eq!(rs.len(), 1, "{out:?}");
    assert_eq!(rs[0].ip.dst_addr, a6("ff02::2"));
    assert!(net::iface::is_link_local(rs[0].ip.src_addr));
    // The router answers: default router for 30 minutes, 2001:2:0:1::/64 on-link and
    // autonomous.
    send(&mut s, &mut raw, ra(1800, "2001:2:0:1::", 0xc0));
    s.run_for(Duration::from_millis(1100));
    let mine = a6("2001:2:0:1::");
    let addrs = s.host(b).addresses6();
    let slaac = addrs
        .iter()
        .find(|(_, a, _)| a.addr.segments()[..4] == mine.segments()[..4])
        .expect("an address formed from the prefix");
    assert_eq!(slaac.2, AddrState::Preferred, "{addrs:?}");
    assert_eq!(s.host(b).stats().nd6.autoconf, 1);
    // No more solicitations once a router answered.
    s.run_for(Duration::from_secs(10));
    let out = recv(&mut s, &mut raw);
    assert!(!out
        .iter()
        .any(|f| matches!(f.icmp(), Icmpv6Repr::Ndisc(NdiscRepr::RouterSolicit { .. }))));
    // Off-link traffic goes to the router.
    send(&mut s, &mut raw, echo_from_far(bm, slaac.1.addr, 1));
    let out = recv(&mut s, &mut raw);
    let reply = out
        .iter()
        .find(|f| matches!(f.icmp(), Icmpv6Repr::EchoReply { .. }))
        .unwrap_or_else(|| panic!("{out:?}"));
    assert_eq!(
        (reply.dst_mac, reply.ip.dst_addr),
        (PEER_MAC, a6("2001:2:ffff::5"))
    );
    assert_eq!(reply.ip.src_addr, slaac.1.addr);
    // The router redirects that destination to a better first hop, fe80::77.
    let better = EthernetAddress([0x02, 0xee, 0, 0, 0, 0x77]);
    let redirect = |src: Ipv6Addr| {
        frame(
            bm,
            src,
            slaac.1.addr,
            255,
            IpProtocol::Icmpv6,
            &[],
            &Icmpv6Repr::Ndisc(NdiscRepr::Redirect {
                target_addr: a6("fe80::77"),
                dest_addr: a6("2001:2:ffff::5"),
                lladdr: Some(better),
                redirected_hdr: None,
            }),
        )
    };
    // From a node that is not the current first hop: ignored.
    send(&mut s, &mut raw, redirect(a6("fe80::66")));
    assert_eq!(s.host(b).stats().icmp6.badredirect, 1);
    send(&mut s, &mut raw, redirect(router_ll()));
    send(&mut s, &mut raw, echo_from_far(bm, slaac.1.addr, 2));
    let out = recv(&mut s, &mut raw);
    let reply = out
        .iter()
        .find(|f| matches!(f.icmp(), Icmpv6Repr::EchoReply { seq_no: 2, .. }))
        .unwrap_or_else(|| panic!("{out:?}"));
    assert_eq!(reply.dst_mac, better, "redirected");
    // Router lifetime 0: no longer a default router; the redirect still holds for
    // its destination, anything else off-link has no route.
    send(&mut s, &mut raw, ra(0, "2001:2:0:1::", 0xc0));
    let st = s.host(b).stats();
    send(
        &mut s,
        &mut raw,
        frame(
            bm,
            a6("2001:2:eeee::9"),
            slaac.1.addr,
            63,
            IpProtocol::Icmpv6,
            &[],
            &echo(3),
        ),
    );
    let out = recv(&mut s, &mut raw);
    assert!(!out
        .iter()
        .any(|f| matches!(f.icmp(), Icmpv6Repr::EchoReply { seq_no: 3, .. })));
    assert_eq!(s.host(b).stats().ip6.noroute, st.ip6.noroute + 1);
}

#[test]
fn mld_reports_the_solicited_node_groups_and_answers_queries() {
    let (mut s, b, mut raw) = setup(1);
    s.run_for(Duration::from_millis(10));
    let ll = s
        .host(b)
        .addresses6()
        .iter()
        .map(|x| x.1.addr)
        .find(|a| net::iface::is_link_local(*a))
        .unwrap();
    let want = {
        let mut g = vec![solicited(a6("2001:2::2")), solicited(ll)];
        g.sort();
        g
    };
    // Parses a report: (source, destination, hop limit, record types, groups).
    let report = |f: &Seen| -> Option<(Ipv6Addr, u8, Vec<u8>, Vec<Ipv6Addr>)> {
        if f.ip.next_header != IpProtocol::HopByHop || f.payload[..8] != [58, 0, 5, 2, 0, 0, 1, 0] {
            return None;
        }
        let p = Icmpv6Packet::new_checked(&f.payload[8..]).ok()?;
        match Icmpv6Repr::parse(&p, &f.ip.src_addr, &f.ip.dst_addr, true).ok()? {
            Icmpv6Repr::Mld(wire::MldRepr::Report {
                nr_mcast_addr_rcrds,
                data,
            }) => {
                let recs: Vec<_> = wire::MldRecordsIter::new(data, nr_mcast_addr_rcrds)
                    .map(|r| r.unwrap())
                    .collect();
                let mut groups: Vec<Ipv6Addr> = recs.iter().map(|r| r.mcast_addr).collect();
                groups.sort();
                Some((
                    f.ip.src_addr,
                    f.ip.hop_limit,
                    recs.iter().map(|r| u8::from(r.record_type)).collect(),
                    groups,
                ))
            }
            _ => None,
        }
    };
    let first: Vec<_> = recv_all(&mut s, &mut raw)
        .iter()
        .filter_map(report)
        .collect();
    assert_eq!(first.len(), 1, "{first:?}");
    // While the addresses are tentative, from the unspecified address (RFC 3590).
    assert_eq!(
        first[0],
        (Ipv6Addr::UNSPECIFIED, 1, vec![4, 4], want.clone())
    );
    // Reported again a second later (robustness 2), then no more.
    s.run_for(Duration::from_millis(1100));
    let again: Vec<_> = recv_all(&mut s, &mut raw)
        .iter()
        .filter_map(report)
        .collect();
    assert_eq!(again.len(), 1, "{again:?}");
    s.run_for(Duration::from_secs(5));
    assert!(recv_all(&mut s, &mut raw)
        .iter()
        .filter_map(report)
        .next()
        .is_none());
    // A general query from a router is answered with the current state.
    let query = Icmpv6Repr::Mld(wire::MldRepr::Query {
        max_resp_code: 1000,
        mcast_addr: Ipv6Addr::UNSPECIFIED,
        s_flag: false,
        qrv: 2,
        qqic: 125,
        num_srcs: 0,
        data: &[],
    });
    let hbh = [58u8, 0, 5, 2, 0, 0, 1, 0];
    send(
        &mut s,
        &mut raw,
        frame(
            EthernetAddress([0x33, 0x33, 0, 0, 0, 1]),
            a6("fe80::1"),
            a6("ff02::1"),
            1,
            IpProtocol::HopByHop,
            &hbh,
            &query,
        ),
    );
    let answer: Vec<_> = recv_all(&mut s, &mut raw)
        .iter()
        .filter_map(report)
        .collect();
    assert_eq!(answer.len(), 1, "{answer:?}");
    assert_eq!(answer[0], (ll, 1, vec![2, 2], want));
    assert_eq!(s.host(b).stats().icmp6.outmldreport, 3);
}

/// The fragments (each an IPv6 packet's payload after the fixed header, i.e. a
/// Fragment header and data) of an ICMPv6 echo request with `n` data bytes.
fn echo_fragments(n: usize, id: u32, per: usize) -> Vec<Vec<u8>> {
    let data = vec![0xabu8; n];
    let e = Icmpv6Repr::EchoRequest {
        ident: 0x77,
        seq_no: 9,
        data: &data,
    };
    let mut body = vec![0u8; e.buffer_len()];
    e.emit(
        &mut Icmpv6Packet::new_unchecked(&mut body[..]),
        &peer(),
        &a6("2001:2::2"),
    );
    let mut out = Vec::new();
    let mut off = 0;
    while off < body.len() {
        let k = per.min(body.len() - off);
        let more = off + k < body.len();
        let mut f = vec![58u8, 0];
        f.extend_from_slice(&((off as u16) | u16::from(more)).to_be_bytes());
        f.extend_from_slice(&id.to_be_bytes());
        f.extend_from_slice(&body[off..off + k]);
        out.push(f);
        off += k;
    }
    out
}

#[test]
fn fragmented_echo_is_reassembled_answered_in_fragments_and_a_lost_piece_times_out() {
    let (mut s, b, mut raw) = setup(1);
    dad_completes(&mut s, b, &mut raw);
    let bm = b_mac(&s, b);
    send(
        &mut s,
        &mut raw,
        frame(
            bm,
            peer(),
            a6("2001:2::2"),
            64,
            IpProtocol::Icmpv6,
            &[],
            &echo(0),
        ),
    );
    send(&mut s, &mut raw, na_from_peer(bm, a6("2001:2::2"), true));
    recv(&mut s, &mut raw);
    // 3000 bytes of echo data in 1232-byte pieces, the last one first.
    let mut frags = echo_fragments(3000, 0x1234, 1232);
    frags.reverse();
    for f in &frags {
        send(&mut s, &mut raw, frame_raw(bm, IpProtocol::Ipv6Frag, f));
    }
    let out = recv(&mut s, &mut raw);
    // The reply: fragments of at most 1500 bytes, offsets contiguous, one id, the
    // last with M clear; put together it is the echo reply with the same data.
    let mut pieces: Vec<(u16, bool, u32, Vec<u8>)> = out
        .iter()
        .filter(|f| f.ip.next_header == IpProtocol::Ipv6Frag)
        .map(|f| {
            let p = &f.payload;
            let om = u16::from_be_bytes([p[2], p[3]]);
            (
                om & !7,
                om & 1 == 1,
                u32::from_be_bytes([p[4], p[5], p[6], p[7]]),
                p[8..].to_vec(),
            )
        })
        .collect();
    assert_eq!(pieces.len(), 3, "{out:?}");
    pieces.sort_by_key(|p| p.0);
    assert!(pieces
        .iter()
        .all(|p| p.2 == pieces[0].2 && 40 + 8 + p.3.len() <= 1500));
    let mut whole = Vec::new();
    for (i, (off, more, _, d)) in pieces.iter().enumerate() {
        assert_eq!(usize::from(*off), whole.len());
        assert_eq!(*more, i + 1 < pieces.len());
        whole.extend_from_slice(d);
    }
    let p = Icmpv6Packet::new_checked(&whole[..]).unwrap();
    match Icmpv6Repr::parse(&p, &a6("2001:2::2"), &peer(), true).unwrap() {
        Icmpv6Repr::EchoReply {
            seq_no: 9, data, ..
        } => assert_eq!(data, &[0xab; 3000][..]),
        other => panic!("{other:?}"),
    }
    // A datagram whose middle piece never comes: after 60 s, Time Exceeded code 1
    // about the first fragment, and the table is empty.
    let frags = echo_fragments(3000, 0x5678, 1232);
    send(
        &mut s,
        &mut raw,
        frame_raw(bm, IpProtocol::Ipv6Frag, &frags[0]),
    );
    send(
        &mut s,
        &mut raw,
        frame_raw(bm, IpProtocol::Ipv6Frag, &frags[2]),
    );
    s.run_for(Duration::from_secs(59));
    assert!(recv(&mut s, &mut raw)
        .iter()
        .all(|f| !matches!(f.icmp(), Icmpv6Repr::TimeExceeded { .. })));
    s.run_for(Duration::from_secs(2));
    let out = recv(&mut s, &mut raw);
    let te: Vec<_> = out
        .iter()
        .filter_map(|f| match f.icmp() {
            Icmpv6Repr::TimeExceeded { reason, data } => Some((u8::from(reason), data.len())),
            _ => None,
        })
        .collect();
    assert_eq!(te.len(), 1, "{out:?}");
    assert_eq!(te[0].0, 1);
    let st = s.host(b).stats();
    // fragtimeout counts the fragments thrown away, as FreeBSD's ip6s_fragtimeout.
    assert_eq!(
        (st.ip6.reassembled, st.ip6.fragtimeout, st.ip6.fragq),
        (1, 2, 0)
    );
}

#[test]
fn udp_over_ipv6_between_two_stacks_small_and_fragmented() {
    for workers in [1, 2] {
        let mut s = Sim::new(21);
        let hub = s.add_hub(WireConfig::default());
        let a = s.add_host("a", workers);
        let b = s.add_host("b", workers);
        s.connect(a, hub, "198.18.0.1/24");
        s.connect(b, hub, "198.18.0.2/24");
        hub::add_addresses6(&mut s, a, b);
        s.run_for(Duration::from_millis(1500));
        let server = s
            .host(b)
            .udp_bind("[::]:7".parse::<std::net::SocketAddr>().unwrap())
            .unwrap();
        server.set_nonblocking(true).unwrap();
        // An IPv4 socket on the same port: the families do not share datagrams.
        let v4 = s
            .host(b)
            .udp_bind("0.0.0.0:7".parse::<std::net::SocketAddr>().unwrap())
            .unwrap();
        v4.set_nonblocking(true).unwrap();
        let client = s
            .host(a)
            .udp_bind("[::]:0".parse::<std::net::SocketAddr>().unwrap())
            .unwrap();
        client.set_nonblocking(true).unwrap();
        assert!(client
            .send_to(
                b"v4?",
                "198.18.0.2:7".parse::<std::net::SocketAddr>().unwrap()
            )
            .is_err());
        let to: std::net::SocketAddr = "[2001:2::2]:7".parse().unwrap();
        let mut buf = vec![0u8; 70_000];
        for size in [5usize, 1452, 3000, 60_000] {
            let data: Vec<u8> = (0..size).map(|i| (i * 13 + size) as u8).collect();
            client.send_to(&data, to).unwrap();
            s.run_for(Duration::from_millis(20));
            let (n, from) = server
                .recv_from(&mut buf)
                .unwrap_or_else(|e| panic!("{size}: {e}"));
            assert_eq!(&buf[..n], &data[..], "workers={workers} size={size}");
            assert_eq!(from.ip(), "2001:2::1".parse::<std::net::IpAddr>().unwrap());
            server.send_to(&buf[..n], from).unwrap();
            s.run_for(Duration::from_millis(20));
            let (n, back) = client.recv_from(&mut buf).unwrap();
            assert_eq!((&buf[..n], back), (&data[..], to));
        }
        assert!(
            v4.recv_from(&mut buf).is_err(),
            "nothing for the IPv4 socket"
        );
        let st = s.host(b).stats();
        assert!(
            st.ip6.reassembled >= 2 && st.ip6.fragmented >= 2,
            "{:?}",
            st.ip6
        );
    }
}

#[test]
fn tcp_over_ipv6_between_two_stacks_with_loss() {
    use std::io::{Read, Write};
    // Each with a plain wire, and with one whose devices fill in checksums and cut
    // large segments (TCP over IPv6 then leaves both to them, as over IPv4).
    for (workers, offload) in [
        (1, dev::Offloads::default()),
        (2, dev::Offloads::default()),
        (1, dev::Offloads::ALL),
        (2, dev::Offloads::ALL),
    ] {
        let mut s = Sim::new(31);
        let hub = s.add_hub(WireConfig {
            impair: dev::impair::Impairments {
                loss: 0.02,
                ..Default::default()
            },
            seed: 5,
            offload,
            ..WireConfig::default()
        });
        let a = s.add_host("a", workers);
        let b = s.add_host("b", workers);
        s.connect(a, hub, "198.18.0.1/24");
        s.connect(b, hub, "198.18.0.2/24");
        hub::add_addresses6(&mut s, a, b);
        // DAD probes may be lost too: that only makes DAD succeed.
        s.run_for(Duration::from_millis(1500));
        let l = s
            .host(b)
            .tcp_listen("[::]:7".parse::<std::net::SocketAddr>().unwrap(), 8)
            .unwrap();
        l.set_nonblocking(true).unwrap();
        let to: std::net::SocketAddr = "[2001:2::2]:7".parse().unwrap();
        let mut c = s.host(a).tcp_connect_nonblocking(to).unwrap();
        c.set_nonblocking(true).unwrap();
        let total = 1 << 20;
        let data: Vec<u8> = (0..total).map(|i| (i * 31 + i / 977) as u8).collect();
        let (mut sent, mut got) = (0usize, Vec::with_capacity(total));
        let mut server: Option<net::TcpStream> = None;
        let mut buf = vec![0u8; 65536];
        let done = s.run_until(Duration::from_secs(300), |_| {
            if server.is_none() {
                if let Ok((srv, from)) = l.accept() {
                    assert_eq!(from.ip(), "2001:2::1".parse::<std::net::IpAddr>().unwrap());
                    srv.set_nonblocking(true).unwrap();
                    server = Some(srv);
                }
            }
            if c.is_connected() && sent < total {
                if let Ok(n) = c.write(&data[sent..]) {
                    sent += n;
                }
                if sent == total {
                    c.shutdown(std::net::Shutdown::Write).unwrap();
                }
            }
            if let Some(srv) = server.as_mut() {
                loop {
                    match srv.read(&mut buf) {
                        Ok(0) => return true,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                        Err(_) => break,
                    }
                }
            }
            false
        });
        assert!(done, "workers={workers}: {} of {total} bytes", got.len());
        assert!(got == data, "workers={workers}: the bytes differ");
        assert_eq!(
            c.local_addr().unwrap().ip(),
            "2001:2::1".parse::<std::net::IpAddr>().unwrap()
        );
        let st = s.host(a).stats();
        assert_eq!(s.host(b).stats().tcp.rcvbadsum, 0);
        if offload.tso == 0 {
            // Some 700 frames: 2% loss takes some of them, sent again. (With TSO the
            // megabyte is some 30 frames, which 2% may all spare: the bytes above
            // are the check there.)
            assert!(st.tcp.sndrexmitpack > 0, "2% loss made retransmissions");
            // TCP's segments of up to 64 KiB were cut in software (GSO) into
            // segments of 1440 bytes of data (1500 - 40 - 20, timestamps aside),
            // so none was fragmented; retransmissions went an MSS at a time, their
            // checksums filled in software.
            assert!(st.ip6.swgso > 0, "workers={workers}: {:?}", st.ip6);
            assert_eq!(st.ip6.fragmented, 0);
            assert!(st.ip6.swcsum > 0, "checksums filled in software");
        } else {
            assert!(
                st.tcp.sndbyte / st.tcp.sndpack.max(1) > 8 * 1440,
                "workers={workers}: {} bytes in {} segments",
                st.tcp.sndbyte,
                st.tcp.sndpack
            );
            assert!(
                st.ip6.tso > 0,
                "segments larger than the MTU went out whole"
            );
            assert_eq!(st.ip6.swcsum, 0, "no checksum computed in software");
        }
    }
}

/// Over a wire that takes 512 KiB segments whole, TCP over IPv6 sends them with
/// Payload Length 0 (BIG TCP), and they arrive byte-exact.
#[test]
fn tcp_over_ipv6_in_segments_past_64_kib() {
    use std::io::{Read, Write};
    let mut s = Sim::new(32);
    let hub = s.add_hub(WireConfig {
        offload: dev::Offloads::BIG,
        ..WireConfig::default()
    });
    let a = s.add_host("a", 1);
    let b = s.add_host("b", 1);
    s.connect(a, hub, "198.18.0.1/24");
    s.connect(b, hub, "198.18.0.2/24");
    hub::add_addresses6(&mut s, a, b);
    s.run_for(Duration::from_millis(1500));
    let bufs = net::TcpBuffers {
        send: 1 << 20,
        recv: 1 << 20,
    };
    let any: std::net::SocketAddr = "[::]:7".parse().unwrap();
    let l = s.host(b).tcp_listen_with(any, 4, bufs).unwrap();
    l.set_nonblocking(true).unwrap();
    let to: std::net::SocketAddr = "[2001:2::2]:7".parse().unwrap();
    let mut c = s.host(a).tcp_connect_with(to, None, bufs).unwrap();
    c.set_nonblocking(true).unwrap();
    s.run_for(Duration::from_millis(20));
    let (mut srv, _) = l.accept().unwrap();
    srv.set_nonblocking(true).unwrap();
    let data: Vec<u8> = (0..8usize << 20)
        .map(|i| (i * 31 + i / 977) as u8)
        .collect();
    let (mut sent, mut got) = (0usize, Vec::with_capacity(data.len()));
    let mut buf = vec![0u8; 65536];
    let done = s.run_until(Duration::from_secs(60), |_| {
        if let Ok(n) = c.write(&data[sent..]) {
            sent += n;
        }
        while let Ok(n) = srv.read(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        got.len() == data.len()
    });
    assert!(done && got == data, "{} of {} bytes", got.len(), data.len());
    let (sa, sb) = (s.host(a).stats(), s.host(b).stats());
    assert!(
        sa.tcp.sndbyte / sa.tcp.sndpack > 65_535,
        "{} bytes in {} segments",
        sa.tcp.sndbyte,
        sa.tcp.sndpack
    );
    assert_eq!((sa.ip6.toolong, sb.ip6.tooshort), (0, 0));
    assert_eq!(sb.tcp.rcvbadsum, 0);
}

/// Once on, drops the IPv6 packets over 1280 bytes (a narrow link behind the
/// router that answers them with Packet Too Big).
#[derive(Debug)]
struct Narrow(AtomicBool);

impl PfilHook for Narrow {
    fn name(&self) -> &str {
        "narrow"
    }
    fn filter(&self, m: mbuf::Mbuf, _cx: &PfilCtx<'_>) -> Verdict {
        let mut head = [0u8; 14];
        let v6 = m.copydata(0, &mut head).is_ok() && head[12..14] == [0x86, 0xdd];
        if self.0.load(Ordering::Relaxed) && v6 && m.len() - 14 > 1280 {
            return Verdict::Dropped;
        }
        Verdict::Pass(m)
    }
}

#[test]
fn packet_too_big_shrinks_a_tcp_connection_and_the_path_mtu() {
    use std::io::{Read, Write};
    let mut s = Sim::new(41);
    // 1 ms each way, so that the transfer spans time and a Packet Too Big lands
    // while it runs.
    let hub = s.add_hub(WireConfig {
        impair: dev::impair::Impairments {
            delay: Duration::from_millis(1),
            ..Default::default()
        },
        ..WireConfig::default()
    });
    let a = s.add_host("a", 1);
    // b merges no segments (LRO) before the narrow path's filter sees them.
    let b = s.add_host_tcp(
        "b",
        1,
        net::tcp::TcpConfig {
            lro: false,
            ..net::tcp::TcpConfig::default()
        },
    );
    s.connect(a, hub, "198.18.0.1/24");
    s.connect(b, hub, "198.18.0.2/24");
    let mut raw = s.attach_raw(hub);
    hub::add_addresses6(&mut s, a, b);
    s.run_for(Duration::from_millis(1500));
    let am = s.host(a).interfaces()[0].mac;
    let narrow = Arc::new(Narrow(AtomicBool::new(false)));
    s.host(b)
        .add_pfil_hook(PfilPoint::Ether, Dir::In, narrow.clone());
    let l = s
        .host(b)
        .tcp_listen("[::]:9".parse::<std::net::SocketAddr>().unwrap(), 8)
        .unwrap();
    l.set_nonblocking(true).unwrap();
    let mut c = s
        .host(a)
        .tcp_connect_nonblocking("[2001:2::2]:9".parse::<std::net::SocketAddr>().unwrap())
        .unwrap();
    c.set_nonblocking(true).unwrap();
    let total = 2_000_000;
    let data: Vec<u8> = (0..total).map(|i| (i * 7 + i / 1001) as u8).collect();
    let (mut sent, mut got) = (0usize, Vec::new());
    let mut server: Option<net::TcpStream> = None;
    let mut buf = vec![0u8; 65536];
    let mut ptb_sent = false;
    let mut ptb_at = dev::Instant::ZERO;
    let mut big_after = 0usize;
    let mut seen_after = 0usize;
    let done = s.run_until(Duration::from_secs(120), |s| {
        if server.is_none() {
            if let Ok((srv, _)) = l.accept() {
                srv.set_nonblocking(true).unwrap();
                server = Some(srv);
            }
        }
        if c.is_connected() && sent < total {
            if let Ok(n) = c.write(&data[sent..]) {
                sent += n;
            }
            if sent == total {
                c.shutdown(std::net::Shutdown::Write).unwrap();
            }
        }
        if let Some(srv) = server.as_mut() {
            loop {
                match srv.read(&mut buf) {
                    Ok(0) => return true,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(_) => break,
                }
            }
        }
        // Watch a's data segments; once 50 KB are through, a router says 1280.
        let mut frames = Vec::new();
        raw.rx_burst(s.now(), &mut frames, 4096);
        for f in frames {
            let v = f.to_vec();
            if v.len() < 14 + 40 || v[12..14] != [0x86, 0xdd] || v[6..12] != am.0 || v[14 + 6] != 6
            {
                continue;
            }
            let ip_len = 40 + usize::from(u16::from_be_bytes([v[18], v[19]]));
            // Counted from a round trip after the Packet Too Big (it takes 1 ms to
            // reach a; frames a sent before that arrive up to 1 ms later).
            if ptb_sent && s.now() >= ptb_at + Duration::from_millis(2) {
                seen_after += 1;
                if ip_len > 1280 {
                    big_after += 1;
                }
            } else if !ptb_sent && got.len() > 50_000 && !narrow.0.load(Ordering::Relaxed) {
                // From now on the path is narrow: the segment the router answers
                // never reaches b, and stays outstanding, as RFC 5927 §4.1 has a
                // connection check before it believes the message.
                narrow.0.store(true, Ordering::Relaxed);
            } else if !ptb_sent && narrow.0.load(Ordering::Relaxed) && ip_len > 1280 {
                ptb_sent = true;
                ptb_at = s.now();
                let quoted = &v[14..14 + ip_len.min(1232)];
                let ptb = frame(
                    am,
                    a6("2001:2::fe"),
                    a6("2001:2::1"),
                    64,
                    IpProtocol::Icmpv6,
                    &[],
                    &Icmpv6Repr::PktTooBig {
                        mtu: 1280,
                        data: quoted,
                    },
                );
                let now = s.now();
                raw.tx_burst(now, &mut vec![ptb]);
            }
        }
        false
    });
    assert!(done && got == data, "{} of {total} bytes", got.len());
    assert!(ptb_sent);
    let st = s.host(a).stats();
    assert_eq!((st.icmp6.inpkttoobig, st.tcp.mturesent), (1, 1));
    assert!(seen_after > 100, "{seen_after}");
    assert_eq!(
        big_after, 0,
        "{big_after} of {seen_after} segments still over 1280 bytes"
    );
    let cfg = s.host(a).config();
    assert_eq!(cfg.inet6.nd6.pmtu.len(), 1);
    assert_eq!(
        (cfg.inet6.nd6.pmtu[0].0, cfg.inet6.nd6.pmtu[0].1),
        (a6("2001:2::2"), 1280)
    );
}

#[test]
fn icmpv6_errors_are_rate_limited() {
    let (mut s, b, mut raw) = setup(1);
    dad_completes(&mut s, b, &mut raw);
    let bm = b_mac(&s, b);
    send(
        &mut s,
        &mut raw,
        frame(
            bm,
            peer(),
            a6("2001:2::2"),
            64,
            IpProtocol::Icmpv6,
            &[],
            &echo(0),
        ),
    );
    send(&mut s, &mut raw, na_from_peer(bm, a6("2001:2::2"), true));
    recv(&mut s, &mut raw);
    let limit = u64::from(net::StackConfig::default().icmp_limit);
    // Three hundred datagrams to a closed port within a second of virtual time.
    let mut udp = vec![0x30, 0x39, 0x27, 0x0f, 0, 12, 0, 0, b'r', b'a', b't', b'e'];
    fill_sum(&mut udp, IpProtocol::Udp, 6);
    let now = s.now();
    let mut batch: Vec<mbuf::Mbuf> = (0..300)
        .map(|_| frame_raw(bm, IpProtocol::Udp, &udp))
        .collect();
    raw.tx_burst(now, &mut batch);
    s.run_for(Duration::from_millis(500));
    let errors = recv(&mut s, &mut raw)
        .iter()
        .filter(|f| matches!(f.icmp(), Icmpv6Repr::DstUnreachable { .. }))
        .count() as u64;
    let st = s.host(b).stats();
    assert_eq!(errors, limit, "at most icmp_limit errors a second");
    assert_eq!(st.icmp6.ratelim, 300 - limit);
    // A second later the bucket is full again.
    s.run_for(Duration::from_secs(1));
    send(&mut s, &mut raw, frame_raw(bm, IpProtocol::Udp, &udp));
    assert!(recv(&mut s, &mut raw)
        .iter()
        .any(|f| matches!(f.icmp(), Icmpv6Repr::DstUnreachable { .. })));
}

#[test]
fn advertised_prefixes_cannot_grow_the_address_list_without_bound() {
    let mut s = Sim::new(13);
    let hub = s.add_hub(WireConfig::default());
    let b = s.add_host_with(net::StackConfig {
        name: "b".into(),
        slaac: true,
        dad_transmits: 0,
        ..net::StackConfig::default()
    });
    s.connect(b, hub, "198.18.0.2/24");
    let mut raw = s.attach_raw(hub);
    s.host(b)
        .add_address6(IfIndex(0), "2001:2::2/64".parse().unwrap())
        .unwrap();
    s.run_for(Duration::from_millis(10));
    for i in 0..40u16 {
        send(
            &mut s,
            &mut raw,
            ra(1800, &format!("2001:2:0:{:x}::", 0x100 + i), 0xc0),
        );
    }
    let n = s.host(b).addresses6().len();
    assert_eq!(n, net::iface::MAX_ADDRS6);
    let st = s.host(b).stats().nd6;
    assert_eq!(st.autoconf, (net::iface::MAX_ADDRS6 - 2) as u64);
    assert_eq!(st.autoconffull, 40 - st.autoconf);
}

/// A host with SLAAC on, DAD off (addresses are usable at once), 2001:2::2/64
/// configured by hand, and the raw port as its router.
fn slaac_host(seed: u64) -> (Sim, HostId, Box<dyn Queue>) {
    let mut s = Sim::new(seed);
    let hub = s.add_hub(WireConfig::default());
    let b = s.add_host_with(net::StackConfig {
        name: "b".into(),
        slaac: true,
        dad_transmits: 0,
        ..net::StackConfig::default()
    });
    s.connect(b, hub, "198.18.0.2/24");
    let raw = s.attach_raw(hub);
    s.host(b)
        .add_address6(IfIndex(0), "2001:2::2/64".parse().unwrap())
        .unwrap();
    s.run_for(Duration::from_millis(10));
    (s, b, raw)
}

/// b's address formed from the /64 `prefix`, with its state, if it has one.
fn slaac_of(s: &Sim, b: HostId, prefix: &str) -> Option<(Ipv6Addr, AddrState)> {
    let p = a6(prefix);
    s.host(b)
        .addresses6()
        .into_iter()
        .find(|(_, a, _)| a.addr.segments()[..4] == p.segments()[..4])
        .map(|(_, a, st)| (a.addr, st))
}

/// When b's address `a` stops being valid, as b holds it (`None`: never).
fn valid_until(s: &Sim, b: HostId, a: Ipv6Addr) -> Option<dev::Instant> {
    let cfg = s.host(b).config();
    cfg.ifaces[0].addr6(a).expect("b has it").valid_until()
}

/// b's address `a` is valid for `d` from when an advertisement sent at `sent`
/// arrived (within the millisecond `send` runs).
fn ends_in(s: &Sim, b: HostId, a: Ipv6Addr, sent: dev::Instant, d: Duration) {
    let end = valid_until(s, b, a).expect("finite");
    assert!(
        end >= sent + d && end <= s.now() + d,
        "{end:?} is not {d:?} after {sent:?}"
    );
}

/// Whether b holds any route (its connected one, or an advertised on-link prefix)
/// to the /64 `prefix`.
fn routes_to(s: &Sim, b: HostId, prefix: &str) -> bool {
    let p = a6(prefix);
    let inside = Ipv6Addr::from(u128::from(p) | 0x42);
    let cfg = s.host(b).config();
    let now = s.now();
    let onlink = cfg
        .inet6
        .nd6
        .prefixes
        .iter()
        .any(|x| x.prefix.contains(inside));
    let connected = s
        .host(b)
        .route_get(inside.into())
        .is_some_and(|r| r.dst.len() == 64);
    onlink || connected || cfg.inet6.nd6.next_hop(inside, now, true).is_some()
}

/// Fourteen advertisements of rogue /64s with 30 s lifetimes fill the sixteen
/// addresses (a link-local and a configured one besides) and refuse a real prefix;
/// 30 s later every rogue address and on-link route is gone (RFC 4862 §5.5.3,
/// RFC 4861 §6.3.4) and the real prefix gets its address. Before, they stayed
/// until restart and every later prefix was refused (`nd6.autoconffull`).
#[test]
fn rogue_prefixes_expire_with_their_lifetimes_and_a_real_one_then_gets_its_address() {
    let (mut s, b, mut raw) = slaac_host(14);
    let rogue: Vec<String> = (0..14)
        .map(|i| format!("2001:2:0:{:x}::", 0x100 + i))
        .collect();
    for p in &rogue {
        send(&mut s, &mut raw, ra_with(1800, p, 0xc0, 30, 30));
    }
    assert_eq!(s.host(b).addresses6().len(), net::iface::MAX_ADDRS6);
    assert!(rogue.iter().all(|p| routes_to(&s, b, p)));
    send(&mut s, &mut raw, ra(1800, "2001:2:0:1::", 0xc0));
    assert_eq!(
        slaac_of(&s, b, "2001:2:0:1::"),
        None,
        "full, none deprecated"
    );
    assert_eq!(s.host(b).stats().nd6.autoconffull, 1);
    s.run_for(Duration::from_secs(30));
    let st = s.host(b).stats().nd6;
    assert_eq!((st.autoconf, st.autoconfexpired), (14, 14), "{st:?}");
    let left = s.host(b).addresses6();
    assert_eq!(
        left.len(),
        2,
        "the link-local and 2001:2::2 alone: {left:?}"
    );
    for p in &rogue {
        assert!(!routes_to(&s, b, p), "{p} still on-link");
    }
    // The real router's prefix: formed, preferred, on-link.
    send(&mut s, &mut raw, ra(1800, "2001:2:0:1::", 0xc0));
    s.run_for(Duration::from_millis(10));
    let (_, state) = slaac_of(&s, b, "2001:2:0:1::").expect("formed");
    assert_eq!(state, AddrState::Preferred);
    assert!(routes_to(&s, b, "2001:2:0:1::"));
    assert_eq!(s.host(b).stats().nd6.autoconf, 15);
}

/// An unauthenticated advertisement lowers a valid lifetime to no less than two
/// hours (RFC 4862 §5.5.3 (e)): a valid lifetime of 0 deprecates the address at
/// once (its preferred lifetime is 0 too) and ends it two hours on; once two hours
/// or less remain, a 0 (or any shorter lifetime) is ignored; a longer one is taken.
#[test]
fn a_valid_lifetime_of_zero_is_obeyed_within_the_two_hour_rule() {
    let (mut s, b, mut raw) = slaac_host(15);
    let two_hours = Duration::from_secs(7200);
    send(&mut s, &mut raw, ra(1800, "2001:2:0:1::", 0xc0));
    let (a, state) = slaac_of(&s, b, "2001:2:0:1::").expect("formed");
    assert_eq!(state, AddrState::Preferred);
    // A shorter lifetime, more than two hours left: two hours.
    let t1 = s.now();
    send(
        &mut s,
        &mut raw,
        ra_with(1800, "2001:2:0:1::", 0xc0, 600, 600),
    );
    ends_in(&s, b, a, t1, two_hours);
    // A longer one is taken as it is.
    let t2 = s.now();
    send(&mut s, &mut raw, ra(1800, "2001:2:0:1::", 0xc0));
    ends_in(&s, b, a, t2, Duration::from_secs(86400));
    // Lifetime 0: deprecated now, valid for two hours more.
    let t3 = s.now();
    send(&mut s, &mut raw, ra_with(1800, "2001:2:0:1::", 0xc0, 0, 0));
    assert_eq!(
        slaac_of(&s, b, "2001:2:0:1::"),
        Some((a, AddrState::Deprecated))
    );
    ends_in(&s, b, a, t3, two_hours);
    let end = valid_until(&s, b, a).unwrap();
    // An hour later, with an hour left: a 0 again changes nothing.
    s.run_for(Duration::from_secs(3600));
    send(&mut s, &mut raw, ra_with(1800, "2001:2:0:1::", 0xc0, 0, 0));
    assert_eq!(valid_until(&s, b, a), Some(end));
    assert_eq!(
        slaac_of(&s, b, "2001:2:0:1::"),
        Some((a, AddrState::Deprecated))
    );
    // Gone at the end of the two hours, with its route.
    s.run_for(end - s.now() - Duration::from_millis(1));
    assert_eq!(
        slaac_of(&s, b, "2001:2:0:1::"),
        Some((a, AddrState::Deprecated))
    );
    s.run_for(Duration::from_millis(2));
    assert_eq!(slaac_of(&s, b, "2001:2:0:1::"), None);
    assert_eq!(s.host(b).stats().nd6.autoconfexpired, 1);
    assert!(!routes_to(&s, b, "2001:2:0:1::"));
}

/// A deprecated address (its preferred lifetime over) still takes traffic, and
/// answers from itself, but a new connection takes its source from a preferred
/// address (RFC 4862 §5.5.4, RFC 6724 rule 3). Before, the first address was used.
#[test]
fn a_deprecated_address_is_not_chosen_as_the_source_of_new_connections() {
    let (mut s, b, mut raw) = slaac_host(16);
    // Only the link-local address and what SLAAC forms.
    s.host(b)
        .delete_address(IfIndex(0), a6("2001:2::2").into())
        .unwrap();
    let bm = b_mac(&s, b);
    // 2001:2:0:1::/64 with a preferred lifetime of 10 s, then 2001:2:0:2::/64.
    send(
        &mut s,
        &mut raw,
        ra_with(1800, "2001:2:0:1::", 0xc0, 86400, 10),
    );
    send(&mut s, &mut raw, ra(1800, "2001:2:0:2::", 0xc0));
    let (old, _) = slaac_of(&s, b, "2001:2:0:1::").expect("formed");
    let (new, _) = slaac_of(&s, b, "2001:2:0:2::").expect("formed");
    s.run_for(Duration::from_secs(11));
    assert_eq!(
        slaac_of(&s, b, "2001:2:0:1::"),
        Some((old, AddrState::Deprecated))
    );
    recv(&mut s, &mut raw);
    // Traffic to the deprecated address is answered from it.
    send(&mut s, &mut raw, echo_from_far(bm, old, 1));
    let out = recv(&mut s, &mut raw);
    let reply = out
        .iter()
        .find(|f| matches!(f.icmp(), Icmpv6Repr::EchoReply { .. }))
        .unwrap_or_else(|| panic!("{out:?}"));
    assert_eq!(reply.ip.src_addr, old);
    // A new connection off-link starts from the preferred address.
    let far = a6("2001:2:ffff::5");
    let c = s
        .host(b)
        .tcp_connect_nonblocking(std::net::SocketAddrV6::new(far, 80, 0, 0))
        .unwrap();
    s.run_for(Duration::from_millis(10));
    let syn = recv(&mut s, &mut raw)
        .into_iter()
        .find(|f| f.ip.next_header == IpProtocol::Tcp)
        .expect("a SYN");
    assert_eq!(syn.ip.src_addr, new, "not {old}");
    drop(c);
}

/// With every slot taken, a new prefix takes the place of the address deprecated
/// longest ago (which serves only the connections that still use it), one each
/// time; with none deprecated it is refused
/// (`advertised_prefixes_cannot_grow_the_address_list_without_bound`).
#[test]
fn the_oldest_deprecated_address_gives_way_to_a_new_prefix_when_the_table_is_full() {
    let (mut s, b, mut raw) = slaac_host(17);
    // Fourteen prefixes valid for a day, preferred for 10, 12, ... 36 s.
    let old: Vec<String> = (0..14)
        .map(|i| format!("2001:2:0:{:x}::", 0x100 + i))
        .collect();
    for (i, p) in old.iter().enumerate() {
        send(
            &mut s,
            &mut raw,
            ra_with(1800, p, 0xc0, 86400, 10 + 2 * i as u32),
        );
    }
    assert_eq!(s.host(b).addresses6().len(), net::iface::MAX_ADDRS6);
    s.run_for(Duration::from_secs(12));
    // Two are deprecated: the first new prefix takes the first one's place.
    send(&mut s, &mut raw, ra(1800, "2001:2:0:1::", 0xc0));
    assert!(slaac_of(&s, b, "2001:2:0:1::").is_some());
    assert_eq!(slaac_of(&s, b, &old[0]), None);
    assert!(slaac_of(&s, b, &old[1]).is_some());
    send(&mut s, &mut raw, ra(1800, "2001:2:0:2::", 0xc0));
    assert!(slaac_of(&s, b, "2001:2:0:2::").is_some());
    assert_eq!(slaac_of(&s, b, &old[1]), None);
    // None deprecated is left: the next is refused.
    send(&mut s, &mut raw, ra(1800, "2001:2:0:3::", 0xc0));
    assert_eq!(slaac_of(&s, b, "2001:2:0:3::"), None);
    let st = s.host(b).stats().nd6;
    assert_eq!((st.autoconfreclaimed, st.autoconffull), (2, 1), "{st:?}");
    assert_eq!(s.host(b).addresses6().len(), net::iface::MAX_ADDRS6);
    assert!(!routes_to(&s, b, &old[0]), "its route went with it");
}
