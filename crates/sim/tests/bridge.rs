//! Scenario tests of the learning bridge, in the spirit of NetBSD's ATF suite for
//! bridge(4): learning, flooding, ageing, moves, members leaving, static entries,
//! overflow, layer-2 filtering, the spanning tree, and a hostile host on a member
//! (rogue BPDUs, BPDU and root guard, a MAC flood). Deterministic, in virtual time;
//! every scenario of the data path runs with 1 and with 2 workers.

use dev::mem::WireConfig;
use dev::{Duration, Queue};
use mbuf::Mbuf;
use net::ipfw::Ipfw;
use net::link::bridge::{BridgeParams, MemberFlags, PortState, StpParams, StpTimes};
use net::IfIndex;
use sim::{HostId, HubId, Sim};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use wire::stp::{BRIDGE_GROUP_ADDRESS, LLC_STP};
use wire::{BridgeId, EthernetAddress, StpBpdu, StpConfig, StpFlags, StpRepr};

mod common;
use common::ping_n;

fn ip(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 0, n)
}

/// A bridge host `br` with `n` members, each a hub with one host on it
/// (198.18.0.1, .2, …).
struct Lan {
    s: Sim,
    br: HostId,
    bridge: IfIndex,
    members: Vec<IfIndex>,
    hubs: Vec<HubId>,
    hosts: Vec<HostId>,
}

fn lan(workers: usize, n: usize, p: BridgeParams) -> Lan {
    let mut s = Sim::new(workers as u64 * 100 + n as u64);
    let br = s.add_host("br", workers);
    let mut members = Vec::new();
    let mut hubs = Vec::new();
    let mut hosts = Vec::new();
    for k in 0..n {
        let hub = s.add_hub(WireConfig::default());
        members.push(s.connect_named(br, hub, "", &format!("em{k}")));
        let h = s.add_host(&format!("h{}", k + 1), workers);
        s.connect(h, hub, &format!("198.18.0.{}/24", k + 1));
        hubs.push(hub);
        hosts.push(h);
    }
    let bridge = s.host(br).add_bridge("bridge0", p).unwrap();
    for &m in &members {
        s.host(br)
            .bridge_add_member(bridge, m, MemberFlags::default())
            .unwrap();
    }
    Lan {
        s,
        br,
        bridge,
        members,
        hubs,
        hosts,
    }
}

#[test]
fn hosts_on_three_members_ping_each_other() {
    for workers in [1, 2] {
        let mut l = lan(workers, 3, BridgeParams::default());
        for (a, b) in [(0, 1), (1, 2), (2, 0)] {
            let got = ping_n(&mut l.s, l.hosts[a], ip(b as u8 + 1), 10, 100);
            assert_eq!(got, 10, "workers={workers} h{} -> h{}", a + 1, b + 1);
        }
        let st = l.s.host(l.br).stats();
        assert_eq!(st.total_drops(), 0, "workers={workers} {:#?}", st.bridge);
        assert!(st.bridge.forwarded >= 60, "{:#?}", st.bridge);
    }
}

/// The bridge's table time at the simulation's now (seconds).
fn secs(s: &Sim) -> u32 {
    (s.now().as_nanos() / 1_000_000_000) as u32
}

fn mac_of(s: &Sim, h: HostId) -> EthernetAddress {
    s.host(h).interfaces()[0].mac
}

/// The member the bridge has `mac` on, if it has it.
fn learned_on(l: &Lan, mac: EthernetAddress) -> Option<IfIndex> {
    let bc = l.s.host(l.br).bridge(l.bridge).unwrap();
    bc.br
        .rt
        .entries(secs(&l.s))
        .into_iter()
        .find(|e| e.1 == mac)
        .map(|e| IfIndex(e.2.member))
}

/// An Ethernet frame of `len` bytes from `src` to `dst` with type `ty`.
fn frame(dst: EthernetAddress, src: EthernetAddress, ty: u16, len: usize) -> Mbuf {
    let mut f = vec![0u8; len.max(14)];
    f[..6].copy_from_slice(&dst.0);
    f[6..12].copy_from_slice(&src.0);
    f[12..14].copy_from_slice(&ty.to_be_bytes());
    for (i, b) in f[14..].iter_mut().enumerate() {
        *b = i as u8;
    }
    Mbuf::from_slice(&f).unwrap()
}

/// Sends `frames` from a raw port and lets the network settle.
fn inject(s: &mut Sim, port: &mut Box<dyn Queue>, frames: Vec<Mbuf>) {
    let mut v = frames;
    let now = s.now();
    port.tx_burst(now, &mut v);
    s.run_for(Duration::from_millis(5));
}

/// What a raw port received since it was last asked, as byte vectors.
fn sniff(s: &Sim, port: &mut Box<dyn Queue>) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    while port.rx_burst(s.now(), &mut v, 256) > 0 {}
    v.iter().map(|m| m.to_vec()).collect()
}

/// Frames in `got` from `src`.
fn from(got: &[Vec<u8>], src: EthernetAddress) -> usize {
    got.iter().filter(|f| f[6..12] == src.0).count()
}

const X: EthernetAddress = EthernetAddress([0x02, 0xaa, 0, 0, 0, 1]);
const Y: EthernetAddress = EthernetAddress([0x02, 0xaa, 0, 0, 0, 2]);

/// A `lan` with a raw port on every member's hub (attached after the hosts).
fn lan_raw(workers: usize, n: usize, p: BridgeParams) -> (Lan, Vec<Box<dyn Queue>>) {
    let mut l = lan(workers, n, p);
    let ports = l
        .hubs
        .clone()
        .into_iter()
        .map(|h| l.s.attach_raw(h))
        .collect();
    (l, ports)
}

#[test]
fn the_bridge_learns_where_each_host_is() {
    for workers in [1, 2] {
        let mut l = lan(workers, 3, BridgeParams::default());
        assert_eq!(ping_n(&mut l.s, l.hosts[0], ip(2), 3, 56), 3);
        let (m1, m2) = (mac_of(&l.s, l.hosts[0]), mac_of(&l.s, l.hosts[1]));
        assert_eq!(learned_on(&l, m1), Some(l.members[0]), "workers={workers}");
        assert_eq!(learned_on(&l, m2), Some(l.members[1]), "workers={workers}");
        let m3 = mac_of(&l.s, l.hosts[2]);
        assert_eq!(learned_on(&l, m3), None, "h3 said nothing");
        let rs = l.s.host(l.br).bridge(l.bridge).unwrap().br.rt.stats();
        assert_eq!(rs.learned, 2, "workers={workers}");
    }
}

#[test]
fn known_unicast_goes_to_one_member_only() {
    for workers in [1, 2] {
        let (mut l, mut ports) = lan_raw(workers, 3, BridgeParams::default());
        assert_eq!(ping_n(&mut l.s, l.hosts[0], ip(2), 1, 56), 1);
        sniff(&l.s, &mut ports[2]);
        let before = l.s.host(l.br).stats().bridge;
        assert_eq!(ping_n(&mut l.s, l.hosts[0], ip(2), 20, 56), 20);
        let after = l.s.host(l.br).stats().bridge;
        assert_eq!(
            after.flooded, before.flooded,
            "workers={workers}: nothing flooded"
        );
        assert_eq!(after.forwarded - before.forwarded, 40);
        let got = sniff(&l.s, &mut ports[2]);
        assert!(
            got.is_empty(),
            "workers={workers}: h3's segment saw {}",
            got.len()
        );
    }
}

#[test]
fn broadcast_and_unknown_unicast_are_flooded_to_every_other_member() {
    for workers in [1, 2] {
        let (mut l, mut ports) = lan_raw(workers, 4, BridgeParams::default());
        inject(
            &mut l.s,
            &mut ports[0],
            vec![
                frame(EthernetAddress::BROADCAST, X, 0x88b5, 60),
                frame(Y, X, 0x88b5, 60),
                frame(EthernetAddress([0x33, 0x33, 0, 0, 0, 9]), X, 0x88b5, 60),
            ],
        );
        for (k, p) in ports.iter_mut().enumerate().skip(1) {
            let got = sniff(&l.s, p);
            assert_eq!(from(&got, X), 3, "workers={workers} member {k}");
        }
        let st = l.s.host(l.br).stats().bridge;
        assert_eq!(st.flooded, 3);
        // The broadcast and the multicast also reached the bridge itself.
        assert_eq!(st.local, 2);
        assert_eq!(learned_on(&l, X), Some(l.members[0]));
    }
}

#[test]
fn a_flooded_frame_reaches_every_member_intact() {
    let (mut l, mut ports) = lan_raw(1, 4, BridgeParams::default());
    let f = frame(Y, X, 0x88b5, 1000);
    let bytes = f.to_vec();
    inject(&mut l.s, &mut ports[0], vec![f]);
    for p in ports.iter_mut().skip(1) {
        let got = sniff(&l.s, p);
        assert_eq!(got, vec![bytes.clone()]);
    }
    assert_eq!(l.s.host(l.br).stats().bridge.noclone, 0);
}

#[test]
fn a_learned_address_ages_out_and_is_flooded_again() {
    for workers in [1, 2] {
        let p = BridgeParams {
            ageing: 20,
            ..BridgeParams::default()
        };
        let (mut l, mut ports) = lan_raw(workers, 3, p);
        inject(&mut l.s, &mut ports[1], vec![frame(X, Y, 0x88b5, 60)]);
        assert_eq!(learned_on(&l, Y), Some(l.members[1]));
        l.s.run_for(Duration::from_secs(10));
        assert_eq!(learned_on(&l, Y), Some(l.members[1]), "not yet");
        l.s.run_for(Duration::from_secs(11));
        assert_eq!(learned_on(&l, Y), None, "workers={workers}: aged");
        sniff(&l.s, &mut ports[2]);
        inject(&mut l.s, &mut ports[0], vec![frame(Y, X, 0x88b5, 60)]);
        assert_eq!(from(&sniff(&l.s, &mut ports[2]), X), 1, "flooded again");
        let rs = l.s.host(l.br).bridge(l.bridge).unwrap().br.rt.stats();
        assert!(rs.expired >= 1, "{rs:?}");
    }
}

#[test]
fn the_default_ageing_time_is_300_seconds() {
    let (mut l, mut ports) = lan_raw(1, 2, BridgeParams::default());
    inject(&mut l.s, &mut ports[1], vec![frame(X, Y, 0x88b5, 60)]);
    l.s.run_for(Duration::from_secs(295));
    assert_eq!(learned_on(&l, Y), Some(l.members[1]));
    l.s.run_for(Duration::from_secs(10));
    assert_eq!(learned_on(&l, Y), None);
}

#[test]
fn a_host_that_moves_is_followed_to_its_new_member() {
    for workers in [1, 2] {
        let (mut l, mut ports) = lan_raw(workers, 3, BridgeParams::default());
        inject(&mut l.s, &mut ports[1], vec![frame(X, Y, 0x88b5, 60)]);
        assert_eq!(learned_on(&l, Y), Some(l.members[1]));
        // Y shows up behind member 3.
        inject(&mut l.s, &mut ports[2], vec![frame(X, Y, 0x88b5, 60)]);
        assert_eq!(learned_on(&l, Y), Some(l.members[2]), "workers={workers}");
        sniff(&l.s, &mut ports[1]);
        sniff(&l.s, &mut ports[2]);
        inject(&mut l.s, &mut ports[0], vec![frame(Y, X, 0x88b5, 60)]);
        assert_eq!(from(&sniff(&l.s, &mut ports[2]), X), 1);
        assert_eq!(
            from(&sniff(&l.s, &mut ports[1]), X),
            0,
            "not to the old member"
        );
        let rs = l.s.host(l.br).bridge(l.bridge).unwrap().br.rt.stats();
        assert_eq!(rs.moved, 1);
    }
}

#[test]
fn a_sticky_member_keeps_its_addresses() {
    for workers in [1, 2] {
        let (mut l, mut ports) = lan_raw(workers, 3, BridgeParams::default());
        let sticky = MemberFlags {
            sticky: true,
            ..MemberFlags::default()
        };
        l.s.host(l.br)
            .bridge_set_member_flags(l.bridge, l.members[1], sticky)
            .unwrap();
        inject(&mut l.s, &mut ports[1], vec![frame(X, Y, 0x88b5, 60)]);
        inject(&mut l.s, &mut ports[2], vec![frame(X, Y, 0x88b5, 60)]);
        assert_eq!(learned_on(&l, Y), Some(l.members[1]), "workers={workers}");
    }
}

#[test]
fn a_member_that_does_not_learn_is_flooded_to() {
    for workers in [1, 2] {
        let (mut l, mut ports) = lan_raw(workers, 3, BridgeParams::default());
        let nolearn = MemberFlags {
            learning: false,
            ..MemberFlags::default()
        };
        l.s.host(l.br)
            .bridge_set_member_flags(l.bridge, l.members[1], nolearn)
            .unwrap();
        inject(&mut l.s, &mut ports[1], vec![frame(X, Y, 0x88b5, 60)]);
        assert_eq!(learned_on(&l, Y), None, "workers={workers}");
        sniff(&l.s, &mut ports[2]);
        inject(&mut l.s, &mut ports[0], vec![frame(Y, X, 0x88b5, 60)]);
        assert_eq!(from(&sniff(&l.s, &mut ports[2]), X), 1, "unknown: flooded");
    }
}

#[test]
fn unknown_unicast_skips_members_that_do_not_discover() {
    for workers in [1, 2] {
        let (mut l, mut ports) = lan_raw(workers, 3, BridgeParams::default());
        let quiet = MemberFlags {
            discover: false,
            ..MemberFlags::default()
        };
        l.s.host(l.br)
            .bridge_set_member_flags(l.bridge, l.members[2], quiet)
            .unwrap();
        inject(
            &mut l.s,
            &mut ports[0],
            vec![
                frame(Y, X, 0x88b5, 60),
                frame(EthernetAddress::BROADCAST, X, 0x88b5, 60),
            ],
        );
        assert_eq!(from(&sniff(&l.s, &mut ports[1]), X), 2, "workers={workers}");
        let got = sniff(&l.s, &mut ports[2]);
        assert_eq!(from(&got, X), 1, "only the broadcast");
        assert_eq!(
            got.iter().find(|f| f[6..12] == X.0).unwrap()[..6],
            [0xff; 6]
        );
    }
}

#[test]
fn a_frame_for_its_own_segment_is_not_forwarded() {
    for workers in [1, 2] {
        let (mut l, mut ports) = lan_raw(workers, 3, BridgeParams::default());
        inject(&mut l.s, &mut ports[0], vec![frame(X, Y, 0x88b5, 60)]);
        assert_eq!(learned_on(&l, Y), Some(l.members[0]));
        sniff(&l.s, &mut ports[1]);
        inject(&mut l.s, &mut ports[0], vec![frame(Y, X, 0x88b5, 60)]);
        assert!(sniff(&l.s, &mut ports[1]).is_empty(), "workers={workers}");
        assert_eq!(l.s.host(l.br).stats().bridge.filtered, 1);
    }
}

#[test]
fn static_entries_hold_against_learning_and_ageing() {
    for workers in [1, 2] {
        let p = BridgeParams {
            ageing: 10,
            ..BridgeParams::default()
        };
        let (mut l, mut ports) = lan_raw(workers, 3, p);
        l.s.host(l.br)
            .bridge_add_static(l.bridge, l.members[1], Y, 0)
            .unwrap();
        // Unknown to learning, yet sent to member 2 only.
        inject(&mut l.s, &mut ports[0], vec![frame(Y, X, 0x88b5, 60)]);
        assert_eq!(from(&sniff(&l.s, &mut ports[1]), X), 1);
        assert_eq!(from(&sniff(&l.s, &mut ports[2]), X), 0, "workers={workers}");
        // Y speaking from member 3 does not move it; time does not age it.
        inject(&mut l.s, &mut ports[2], vec![frame(X, Y, 0x88b5, 60)]);
        l.s.run_for(Duration::from_secs(30));
        assert_eq!(learned_on(&l, Y), Some(l.members[1]));
        let e =
            l.s.host(l.br)
                .bridge(l.bridge)
                .unwrap()
                .br
                .rt
                .entries(secs(&l.s));
        assert!(e.iter().any(|e| e.1 == Y && e.2.flags.is_static));
        assert!(l
            .s
            .host(l.br)
            .bridge_add_static(l.bridge, l.members[1], EthernetAddress::BROADCAST, 0)
            .is_err());
    }
}

/// A MAC flood (1,000 new source addresses into a table of 100) leaves the
/// hosts that were talking learned: their unicast still goes to one member, none
/// reaches the flooder; the new addresses are refused, counted as `netstat -s`
/// reads them (`bridge.refused`), and the table stays bounded.
#[test]
fn a_mac_flood_leaves_active_hosts_learned_and_counts_refusals() {
    for workers in [1, 2] {
        let p = BridgeParams {
            max_addrs: 100,
            ..BridgeParams::default()
        };
        let (mut l, mut ports) = lan_raw(workers, 3, p);
        let talk = |l: &mut Lan, ports: &mut Vec<Box<dyn Queue>>| {
            inject(&mut l.s, &mut ports[0], vec![frame(Y, X, 0x88b5, 60)]);
            inject(&mut l.s, &mut ports[1], vec![frame(X, Y, 0x88b5, 60)]);
        };
        talk(&mut l, &mut ports);
        sniff(&l.s, &mut ports[2]);
        for burst in 0..10u8 {
            let frames = (0..100u8)
                .map(|k| frame(X, EthernetAddress([2, 0xbb, 0, 0, burst, k]), 0x88b5, 60))
                .collect();
            inject(&mut l.s, &mut ports[2], frames);
            talk(&mut l, &mut ports);
        }
        let got = sniff(&l.s, &mut ports[2]);
        assert_eq!(
            from(&got, X) + from(&got, Y),
            0,
            "workers={workers}: the talking hosts' unicast reached the flooder"
        );
        let rs = l.s.host(l.br).bridge(l.bridge).unwrap().br.rt.stats();
        assert!(rs.entries <= 100, "workers={workers} {rs:?}");
        assert_eq!(rs.evicted, 0, "{rs:?}");
        let st = l.s.host(l.br).stats();
        assert!(st.get("bridge.refused").unwrap() >= 900, "{:#?}", st.bridge);
        assert_eq!(st.bridge.learned, rs.learned);
        // The bridge still works for hosts it cannot learn: pings, flooded.
        assert_eq!(ping_n(&mut l.s, l.hosts[0], ip(2), 5, 56), 5);
    }
}

#[test]
fn a_member_removed_under_traffic_stops_receiving_at_once() {
    for workers in [1, 2] {
        let mut l = lan(workers, 3, BridgeParams::default());
        let rx = l.s.host(l.hosts[1]).udp_bind((ip(2), 9000)).unwrap();
        rx.set_nonblocking(true).unwrap();
        let tx = l.s.host(l.hosts[0]).udp_bind((ip(1), 0)).unwrap();
        let mut buf = [0u8; 2048];
        let mut got = 0;
        for k in 0..200u32 {
            tx.send_to(&k.to_be_bytes(), (ip(2), 9000)).unwrap();
            l.s.run_for(Duration::from_millis(1));
            if k == 100 {
                l.s.host(l.br)
                    .bridge_delete_member(l.bridge, l.members[1])
                    .unwrap();
            }
            while rx.recv_from(&mut buf).is_ok() {
                got += 1;
            }
        }
        assert!(
            (95..=101).contains(&got),
            "workers={workers}: {got} datagrams"
        );
        assert_eq!(learned_on(&l, mac_of(&l.s, l.hosts[1])), None);
        let bc = l.s.host(l.br).bridge(l.bridge).unwrap();
        assert_eq!(bc.members.len(), 2);
        // The others still talk.
        assert_eq!(ping_n(&mut l.s, l.hosts[0], ip(3), 3, 56), 3);
        // And the member can come back.
        l.s.host(l.br)
            .bridge_add_member(l.bridge, l.members[1], MemberFlags::default())
            .unwrap();
        assert_eq!(ping_n(&mut l.s, l.hosts[0], ip(2), 3, 56), 3);
    }
}

#[test]
fn membership_errors_are_clear() {
    let l = lan(1, 2, BridgeParams::default());
    let h = l.s.host(l.br);
    let e = h
        .bridge_add_member(l.bridge, l.members[0], MemberFlags::default())
        .unwrap_err();
    assert!(e.to_string().contains("member of bridge0 already"), "{e}");
    let e = h
        .bridge_add_member(l.members[0], l.members[1], MemberFlags::default())
        .unwrap_err();
    assert!(e.to_string().contains("is not a bridge"), "{e}");
    let b2 = h.add_bridge("bridge1", BridgeParams::default()).unwrap();
    let e = h
        .bridge_add_member(b2, l.bridge, MemberFlags::default())
        .unwrap_err();
    assert!(e.to_string().contains("is a bridge"), "{e}");
    assert!(h.add_bridge("bridge1", BridgeParams::default()).is_err());
    assert!(h
        .bridge_add_member(b2, IfIndex(99), MemberFlags::default())
        .is_err());
    assert!(h.bridge_delete_member(b2, l.members[0]).is_err());
    // A member holds no address: the bridge's interface does.
    h.bridge_delete_member(l.bridge, l.members[1]).unwrap();
    h.add_address(l.members[1], "198.18.9.1/24".parse().unwrap())
        .unwrap();
    let e = h
        .bridge_add_member(l.bridge, l.members[1], MemberFlags::default())
        .unwrap_err();
    assert!(e.to_string().contains("has addresses"), "{e}");
}

#[test]
fn the_bridge_itself_is_a_host_on_the_segment() {
    for workers in [1, 2] {
        let mut l = lan(workers, 3, BridgeParams::default());
        l.s.host(l.br)
            .add_address(l.bridge, "198.18.0.254/24".parse().unwrap())
            .unwrap();
        for k in 0..3 {
            assert_eq!(ping_n(&mut l.s, l.hosts[k], ip(254), 5, 56), 5, "h{k}");
        }
        assert_eq!(
            ping_n(&mut l.s, l.br, ip(3), 5, 1000),
            5,
            "workers={workers}"
        );
        let st = l.s.host(l.br).stats();
        assert!(
            st.bridge.hostout > 0 && st.bridge.local > 0,
            "{:#?}",
            st.bridge
        );
        assert_eq!(st.total_drops(), 0, "{st:#?}");
    }
}

#[test]
fn tcp_crosses_the_bridge_byte_exact() {
    for workers in [1, 2] {
        let mut l = lan(workers, 3, BridgeParams::default());
        let lis =
            l.s.host(l.hosts[2])
                .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 5001), 4)
                .unwrap();
        lis.set_nonblocking(true).unwrap();
        let c =
            l.s.host(l.hosts[0])
                .tcp_connect_nonblocking(SocketAddrV4::new(ip(3), 5001))
                .unwrap();
        l.s.run_for(Duration::from_millis(50));
        let (srv, _) = lis.accept().unwrap();
        srv.set_nonblocking(true).unwrap();
        c.set_nonblocking(true).unwrap();
        let data: Vec<u8> = (0..(1u32 << 20)).map(|i| (i % 251) as u8).collect();
        let mut sent = 0;
        let mut got = Vec::new();
        let mut buf = vec![0u8; 65536];
        l.s.run_until(Duration::from_secs(60), |_| {
            while sent < data.len() {
                match (&c).write(&data[sent..]) {
                    Ok(n) => sent += n,
                    Err(_) => break,
                }
            }
            while let Ok(n) = (&srv).read(&mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            got.len() == data.len()
        });
        assert!(
            got == data,
            "workers={workers}: {} of {}",
            got.len(),
            data.len()
        );
        let st = l.s.host(l.br).stats();
        assert_eq!(st.total_drops(), 0, "{st:#?}");
    }
}

#[test]
fn ipv6_neighbour_discovery_and_ping_cross_the_bridge() {
    for workers in [1, 2] {
        let mut l = lan(workers, 2, BridgeParams::default());
        for (k, &h) in l.hosts.iter().enumerate() {
            let idx = l.s.host(h).interfaces()[0].index;
            let a = format!("2001:2::{}/64", k + 1).parse().unwrap();
            l.s.host(h).add_address6(idx, a).unwrap();
        }
        // Past duplicate address detection.
        l.s.run_for(Duration::from_secs(3));
        let rx =
            l.s.host(l.hosts[1])
                .udp_bind("[2001:2::2]:9000".parse::<std::net::SocketAddr>().unwrap())
                .unwrap();
        rx.set_nonblocking(true).unwrap();
        let tx =
            l.s.host(l.hosts[0])
                .udp_bind("[2001:2::1]:0".parse::<std::net::SocketAddr>().unwrap())
                .unwrap();
        let mut got = 0;
        let mut buf = [0u8; 64];
        for k in 0..5u8 {
            tx.send_to(
                &[k; 32],
                "[2001:2::2]:9000".parse::<std::net::SocketAddr>().unwrap(),
            )
            .unwrap();
            l.s.run_for(Duration::from_millis(20));
            while rx.recv_from(&mut buf).is_ok() {
                got += 1;
            }
        }
        assert_eq!(got, 5, "workers={workers}");
        // Neighbour discovery is multicast: the solicitation was flooded.
        let st = l.s.host(l.br).stats().bridge;
        assert!(st.flooded > 0, "workers={workers} {st:#?}");
    }
}

#[test]
fn layer2_ipfw_filters_bridged_frames() {
    for workers in [1, 2] {
        let mut l = lan(workers, 3, BridgeParams::default());
        let m1 = mac_of(&l.s, l.hosts[0]);
        let fw = Ipfw::new(fw::RulesetConfig::default(), workers).unwrap();
        fw.load(&format!(
            "add 100 deny ip from any to any mac any {m1} layer2\nadd 200 allow ip from any to any\n"
        ))
        .unwrap();
        fw.attach_layer2(l.s.host(l.br));
        assert_eq!(
            ping_n(&mut l.s, l.hosts[0], ip(2), 3, 56),
            0,
            "workers={workers}"
        );
        assert_eq!(ping_n(&mut l.s, l.hosts[1], ip(3), 3, 56), 3, "others pass");
        assert!(l.s.host(l.br).stats().pfil.ether_in_drop > 0);
    }
}

#[test]
fn layer2_ipfw_sees_the_outgoing_member() {
    for workers in [1, 2] {
        let mut l = lan(workers, 3, BridgeParams::default());
        let out = l.s.host(l.br).interfaces()[l.members[2].get()].name.clone();
        let fw = Ipfw::new(fw::RulesetConfig::default(), workers).unwrap();
        fw.load(&format!(
            "add 100 deny ip from any to any out via {out} layer2\nadd 200 allow ip from any to any\n"
        ))
        .unwrap();
        fw.attach_layer2(l.s.host(l.br));
        assert_eq!(
            ping_n(&mut l.s, l.hosts[0], ip(3), 3, 56),
            0,
            "workers={workers}"
        );
        assert_eq!(
            ping_n(&mut l.s, l.hosts[0], ip(2), 3, 56),
            3,
            "workers={workers}"
        );
        assert!(l.s.host(l.br).stats().pfil.ether_out_drop > 0);
    }
}

#[test]
fn bad_frames_and_reserved_addresses_are_counted_drops() {
    for workers in [1, 2] {
        let (mut l, mut ports) = lan_raw(workers, 2, BridgeParams::default());
        let mut short = frame(Y, X, 0x88b5, 14);
        short.truncate(10);
        let lldp = EthernetAddress([0x01, 0x80, 0xc2, 0, 0, 0x0e]);
        let bpdu = EthernetAddress([0x01, 0x80, 0xc2, 0, 0, 0]);
        inject(
            &mut l.s,
            &mut ports[0],
            vec![
                short,
                frame(Y, EthernetAddress([0x03, 0, 0, 0, 0, 1]), 0x88b5, 60),
                frame(lldp, X, 0x88cc, 60),
                frame(bpdu, X, 38, 60),
            ],
        );
        assert!(sniff(&l.s, &mut ports[1]).is_empty(), "workers={workers}");
        let st = l.s.host(l.br).stats();
        assert_eq!(st.ether.tooshort, 1);
        assert_eq!(st.ether.badaddr, 1);
        assert_eq!(st.bridge.reserved, 1);
        assert_eq!(
            st.bridge.bpdunostp, 1,
            "no spanning tree: BPDUs are dropped"
        );
        assert_eq!(st.total_drops(), 4);
    }
}

#[test]
fn two_bridges_in_one_stack_are_separate_segments() {
    for workers in [1, 2] {
        let mut l = lan(workers, 4, BridgeParams::default());
        let h = l.s.host(l.br);
        for &m in &l.members[2..] {
            h.bridge_delete_member(l.bridge, m).unwrap();
        }
        let b2 = h.add_bridge("bridge1", BridgeParams::default()).unwrap();
        for &m in &l.members[2..] {
            h.bridge_add_member(b2, m, MemberFlags::default()).unwrap();
        }
        assert_eq!(ping_n(&mut l.s, l.hosts[0], ip(2), 2, 56), 2);
        assert_eq!(ping_n(&mut l.s, l.hosts[2], ip(4), 2, 56), 2);
        assert_eq!(
            ping_n(&mut l.s, l.hosts[0], ip(3), 2, 56),
            0,
            "workers={workers}"
        );
    }
}

/// Fast spanning-tree timers (802.1D's minimums but hello): the tree settles in
/// seconds of virtual time.
fn fast_stp(priority: u16) -> BridgeParams {
    BridgeParams {
        stp: Some(StpParams {
            priority,
            times: StpTimes {
                max_age: 6 * 256,
                hello_time: 256,
                forward_delay: 4 * 256,
            },
            ..StpParams::default()
        }),
        ..BridgeParams::default()
    }
}

/// Three bridges in a loop (a–b, b–c, c–a), each with a third member: hosts
/// 198.18.0.1 behind a, .3 behind c, none behind b. `a` has the best priority and is root.
struct Ring {
    s: Sim,
    br: [HostId; 3],
    bridge: [IfIndex; 3],
    /// Each bridge's members: towards the next bridge, the previous, its host.
    members: [[IfIndex; 3]; 3],
    hosts: [HostId; 2],
}

fn ring(workers: usize) -> Ring {
    let mut s = Sim::new(7 + workers as u64);
    let br = [0, 1, 2].map(|k| s.add_host(&format!("sw{k}"), workers));
    let mut members = [[IfIndex(0); 3]; 3];
    for k in 0..3 {
        let n = (k + 1) % 3;
        let hub = s.add_hub(WireConfig::default());
        members[k][0] = s.connect_named(br[k], hub, "", &format!("to{n}"));
        members[n][1] = s.connect_named(br[n], hub, "", &format!("to{k}"));
    }
    let mut hosts = Vec::new();
    for k in 0..3 {
        let hub = s.add_hub(WireConfig::default());
        members[k][2] = s.connect_named(br[k], hub, "", "host");
        // Hosts behind a and c; b's third segment is empty.
        if k != 1 {
            let h = s.add_host(&format!("h{k}"), workers);
            s.connect(h, hub, &format!("198.18.0.{}/24", k + 1));
            hosts.push(h);
        }
    }
    let mut bridge = [IfIndex(0); 3];
    for k in 0..3 {
        let prio = [0x1000, 0x8000, 0x9000][k];
        bridge[k] = s.host(br[k]).add_bridge("bridge0", fast_stp(prio)).unwrap();
        for m in members[k] {
            s.host(br[k])
                .bridge_add_member(bridge[k], m, MemberFlags::default())
                .unwrap();
        }
    }
    Ring {
        s,
        br,
        bridge,
        members,
        hosts: [hosts[0], hosts[1]],
    }
}

impl Ring {
    fn state(&self, k: usize, m: usize) -> PortState {
        let bc = self.s.host(self.br[k]).bridge(self.bridge[k]).unwrap();
        let mb = bc.member(self.members[k][m]).unwrap();
        bc.br.port_state(mb.slot as usize)
    }

    /// Every loop port's state: `[bridge][next, previous]`.
    fn loop_states(&self) -> Vec<PortState> {
        (0..3)
            .flat_map(|k| [self.state(k, 0), self.state(k, 1)])
            .collect()
    }
}

#[test]
fn spanning_tree_blocks_one_port_of_a_loop_and_elects_the_root() {
    for workers in [1, 2] {
        let mut r = ring(workers);
        r.s.run_for(Duration::from_secs(12));
        let states = r.loop_states();
        let blocking = states.iter().filter(|s| **s == PortState::Blocking).count();
        let fwd = states
            .iter()
            .filter(|s| **s == PortState::Forwarding)
            .count();
        assert_eq!((blocking, fwd), (1, 5), "workers={workers}: {states:?}");
        // The blocked port is on the bridge farthest from the root: b or c's port
        // towards each other (b's next, c's previous), the one of the worse bridge.
        assert_eq!(r.state(2, 1), PortState::Blocking, "{states:?}");
        let st = r.s.host(r.br[0]).bridge(r.bridge[0]).unwrap();
        let status = st.br.stp_status().unwrap();
        assert_eq!(status.root, status.bridge_id, "a is root");
        assert_eq!(status.root_port, None);
        for k in 1..3 {
            let s = r.s.host(r.br[k]).bridge(r.bridge[k]).unwrap();
            let s = s.br.stp_status().unwrap();
            assert_eq!(s.root, status.root, "sw{k} agrees on the root");
        }
        // The hosts reach each other, and a broadcast does not circle.
        assert_eq!(ping_n(&mut r.s, r.hosts[0], ip(3), 10, 56), 10);
        let before: u64 = (0..3)
            .map(|k| r.s.host(r.br[k]).stats().bridge.ipackets)
            .sum();
        r.s.run_for(Duration::from_secs(2));
        let after: u64 = (0..3)
            .map(|k| r.s.host(r.br[k]).stats().bridge.ipackets)
            .sum();
        // Two idle seconds: the BPDUs only (a hello a second on each designated
        // port), no storm.
        assert!(
            after - before < 40,
            "workers={workers}: {} frames",
            after - before
        );
    }
}

#[test]
fn no_frame_crosses_a_port_before_the_tree_lets_it() {
    let mut r = ring(1);
    // Listening then learning: 2 × 4 s of forward delay before any port forwards.
    r.s.run_for(Duration::from_secs(3));
    assert!(
        r.loop_states().iter().all(|s| !s.forwards()),
        "{:?}",
        r.loop_states()
    );
    assert_eq!(ping_n(&mut r.s, r.hosts[0], ip(3), 1, 56), 0);
    let st = r.s.host(r.br[0]).stats().bridge;
    assert!(st.blocked > 0, "{st:#?}");
    r.s.run_for(Duration::from_secs(10));
    assert_eq!(ping_n(&mut r.s, r.hosts[0], ip(3), 3, 56), 3);
}

#[test]
fn pulling_a_link_of_the_loop_reconverges() {
    for workers in [1, 2] {
        let mut r = ring(workers);
        r.s.run_for(Duration::from_secs(12));
        assert_eq!(ping_n(&mut r.s, r.hosts[0], ip(3), 3, 56), 3);
        // The a–c link carries the traffic (c's blocked port is towards b): pull it.
        r.s.host(r.br[0])
            .bridge_delete_member(r.bridge[0], r.members[0][1])
            .unwrap();
        r.s.host(r.br[2])
            .bridge_delete_member(r.bridge[2], r.members[2][0])
            .unwrap();
        // c loses its root port and takes the way through b after max age and two
        // forward delays at most.
        r.s.run_for(Duration::from_secs(16));
        assert_eq!(r.state(2, 1), PortState::Forwarding, "workers={workers}");
        assert_eq!(
            ping_n(&mut r.s, r.hosts[0], ip(3), 5, 56),
            5,
            "workers={workers}"
        );
        let s = r.s.host(r.br[2]).bridge(r.bridge[2]).unwrap();
        let s = s.br.stp_status().unwrap();
        assert_eq!(s.root_path_cost, 200, "two hops to the root now");
    }
}

#[test]
fn malformed_bpdus_are_counted_and_change_nothing() {
    let mut r = ring(1);
    r.s.run_for(Duration::from_secs(12));
    let before = r.loop_states();
    // A frame to the group address with a bad LLC header, and one with a truncated
    // BPDU, on c's host port.
    let hub_port = {
        // The host hub of c is the last hub made.
        r.s.attach_raw(HubId(5))
    };
    let mut port = hub_port;
    let g = EthernetAddress([0x01, 0x80, 0xc2, 0, 0, 0]);
    let mut bad_llc = frame(g, X, 38, 60).to_vec();
    bad_llc[14..17].copy_from_slice(&[0xaa, 0xaa, 0x03]);
    let mut short = frame(g, X, 7, 60).to_vec();
    short[14..17].copy_from_slice(&[0x42, 0x42, 0x03]);
    inject(
        &mut r.s,
        &mut port,
        vec![
            Mbuf::from_slice(&bad_llc).unwrap(),
            Mbuf::from_slice(&short).unwrap(),
        ],
    );
    assert_eq!(r.s.host(r.br[2]).stats().bridge.bpdubad, 2);
    r.s.run_for(Duration::from_secs(5));
    assert_eq!(r.loop_states(), before);
}

#[test]
fn the_bridge_interface_routes_to_another_link() {
    for workers in [1, 2] {
        let mut l = lan(workers, 2, BridgeParams::default());
        let far = l.s.add_host("far", workers);
        let (r_if, _) = l.s.link(
            l.br,
            "198.18.1.1/24",
            far,
            "198.18.1.2/24",
            WireConfig::default(),
        );
        let st = l.s.host(l.br);
        st.add_address(l.bridge, "198.18.0.254/24".parse().unwrap())
            .unwrap();
        for i in [l.bridge, r_if] {
            st.set_forwarding(i, true, true).unwrap();
        }
        for &h in &l.hosts {
            l.s.host(h)
                .set_default_gateway(Some(Ipv4Addr::new(198, 18, 0, 254)));
        }
        l.s.host(far)
            .set_default_gateway(Some(Ipv4Addr::new(198, 18, 1, 1)));
        for &h in &l.hosts {
            let got = ping_n(&mut l.s, h, Ipv4Addr::new(198, 18, 1, 2), 5, 500);
            assert_eq!(got, 5, "workers={workers}");
        }
        let st = l.s.host(l.br).stats();
        assert!(st.ip.forward >= 20, "{:?}", st.ip);
        assert_eq!(st.total_drops(), 0, "{st:#?}");
    }
}

/// A configuration BPDU from `src` in its frame (802.3 length, LLC), padded to
/// the Ethernet minimum.
fn bpdu(src: EthernetAddress, c: StpConfig) -> Mbuf {
    let r = StpRepr::Config(c);
    let blen = r.buffer_len();
    let mut f = vec![0u8; (14 + 3 + blen).max(60)];
    f[..6].copy_from_slice(&BRIDGE_GROUP_ADDRESS.0);
    f[6..12].copy_from_slice(&src.0);
    f[12..14].copy_from_slice(&((3 + blen) as u16).to_be_bytes());
    f[14..17].copy_from_slice(&LLC_STP);
    r.emit(&mut StpBpdu::new_unchecked(&mut f[17..17 + blen]));
    Mbuf::from_slice(&f).unwrap()
}

/// A rogue host's claim to be the root (priority 0), with fast_stp's times.
fn rogue(src: EthernetAddress) -> StpConfig {
    let id = BridgeId::new(0, src);
    StpConfig {
        flags: StpFlags::EMPTY,
        root_id: id,
        root_path_cost: 0,
        bridge_id: id,
        port_id: 0x8001,
        message_age: 0,
        max_age: 6 * 256,
        hello_time: 256,
        forward_delay: 4 * 256,
    }
}

fn is_bpdu(f: &[u8]) -> bool {
    f[..6] == BRIDGE_GROUP_ADDRESS.0
}

fn member_state(l: &Lan, m: usize) -> PortState {
    let bc = l.s.host(l.br).bridge(l.bridge).unwrap();
    bc.br
        .port_state(bc.member(l.members[m]).unwrap().slot as usize)
}

/// Three BPDUs claiming a max age of 255 s (802.1D's range ends at 40 s) from a
/// host on one member: the bridge takes the claimed root for 40 s at most, and
/// its BPDUs keep leaving on its other member at hello time throughout. Armed
/// with the raw 255 s, the information outlived the 40 s after which the bridge
/// refuses to relay it, and the bridge sent nothing for 215 s.
#[test]
fn bpdus_claiming_a_max_age_of_255_do_not_silence_the_tree() {
    let p = BridgeParams {
        stp: Some(StpParams::default()),
        ..BridgeParams::default()
    };
    let (mut l, mut ports) = lan_raw(1, 2, p);
    l.s.run_for(Duration::from_secs(31));
    assert_eq!(member_state(&l, 1), PortState::Forwarding);
    let claim = StpConfig {
        max_age: 255 * 256,
        hello_time: 2 * 256,
        forward_delay: 15 * 256,
        ..rogue(X)
    };
    for _ in 0..3 {
        inject(&mut l.s, &mut ports[0], vec![bpdu(X, claim)]);
        l.s.run_for(Duration::from_secs(1));
    }
    let bc = l.s.host(l.br).bridge(l.bridge).unwrap();
    assert_eq!(bc.br.stp_status().unwrap().root, claim.root_id);
    sniff(&l.s, &mut ports[1]);
    let (mut last, mut worst) = (l.s.now(), Duration::ZERO);
    for _ in 0..3000 {
        l.s.run_for(Duration::from_millis(100));
        if sniff(&l.s, &mut ports[1]).iter().any(|f| is_bpdu(f)) {
            worst = worst.max(l.s.now() - last);
            last = l.s.now();
        }
    }
    worst = worst.max(l.s.now() - last);
    assert!(
        worst <= Duration::from_millis(2500),
        "no BPDU left for {worst:?} (hello time 2 s)"
    );
    let st = bc.br.stp_status().unwrap();
    assert_eq!(st.root, st.bridge_id, "the claim aged out: root again");
}

/// BPDU guard, with and without the spanning tree: a BPDU on the guarded member
/// disables it (its hosts unreachable, counted, the tree untouched) and keeps it
/// disabled whatever follows, until the operator sets its flags again.
#[test]
fn a_bpdu_on_a_guarded_member_disables_it_until_its_flags_are_set_again() {
    for stp in [false, true] {
        let p = if stp {
            fast_stp(0x8000)
        } else {
            BridgeParams::default()
        };
        let (mut l, mut ports) = lan_raw(1, 3, p);
        let guard = MemberFlags {
            bpduguard: true,
            ..MemberFlags::default()
        };
        l.s.host(l.br)
            .bridge_set_member_flags(l.bridge, l.members[2], guard)
            .unwrap();
        l.s.run_for(Duration::from_secs(10));
        assert_eq!(ping_n(&mut l.s, l.hosts[0], ip(3), 3, 56), 3, "stp={stp}");
        for _ in 0..3 {
            inject(&mut l.s, &mut ports[2], vec![bpdu(X, rogue(X))]);
        }
        let bc = l.s.host(l.br).bridge(l.bridge).unwrap();
        let slot = bc.member(l.members[2]).unwrap().slot as usize;
        assert_eq!(member_state(&l, 2), PortState::Disabled, "stp={stp}");
        assert!(bc.br.guard_disabled(slot));
        assert_eq!(l.s.host(l.br).stats().bridge.bpduguard, 3, "stp={stp}");
        if let Some(st) = bc.br.stp_status() {
            assert_eq!(st.root, st.bridge_id, "the BPDU reached no tree");
        }
        l.s.run_for(Duration::from_secs(20));
        assert_eq!(member_state(&l, 2), PortState::Disabled, "stp={stp}");
        assert_eq!(ping_n(&mut l.s, l.hosts[0], ip(3), 3, 56), 0, "stp={stp}");
        assert_eq!(ping_n(&mut l.s, l.hosts[0], ip(2), 3, 56), 3, "stp={stp}");
        // The operator's word: the member forwards again (after the tree's
        // listening and learning, when it runs).
        l.s.host(l.br)
            .bridge_set_member_flags(l.bridge, l.members[2], guard)
            .unwrap();
        l.s.run_for(Duration::from_secs(10));
        assert!(!bc.br.guard_disabled(slot));
        assert_eq!(member_state(&l, 2), PortState::Forwarding, "stp={stp}");
        assert_eq!(ping_n(&mut l.s, l.hosts[0], ip(3), 3, 56), 3, "stp={stp}");
    }
}

/// Root guard: superior BPDUs on the guarded member are refused (the bridge stays
/// root) and hold the member blocking while they come; max age after the last,
/// it listens, learns and forwards again.
#[test]
fn root_guard_blocks_a_member_that_hears_a_better_root_and_lets_it_go() {
    let (mut l, mut ports) = lan_raw(1, 3, fast_stp(0x8000));
    let guard = MemberFlags {
        rootguard: true,
        ..MemberFlags::default()
    };
    l.s.host(l.br)
        .bridge_set_member_flags(l.bridge, l.members[2], guard)
        .unwrap();
    l.s.run_for(Duration::from_secs(12));
    assert_eq!(member_state(&l, 2), PortState::Forwarding);
    for _ in 0..10 {
        inject(&mut l.s, &mut ports[2], vec![bpdu(X, rogue(X))]);
        l.s.run_for(Duration::from_secs(1));
        assert_eq!(member_state(&l, 2), PortState::Blocking);
    }
    let bc = l.s.host(l.br).bridge(l.bridge).unwrap();
    let st = bc.br.stp_status().unwrap();
    assert_eq!(st.root, st.bridge_id, "the better root was refused");
    assert_eq!(bc.br.stp_port(2), Some((false, true)), "root-inconsistent");
    assert_eq!(l.s.host(l.br).stats().bridge.rootguard, 10);
    assert_eq!(ping_n(&mut l.s, l.hosts[0], ip(3), 2, 56), 0);
    assert_eq!(ping_n(&mut l.s, l.hosts[0], ip(2), 2, 56), 2);
    // Quiet: max age (6 s) after the last, then 2 × 4 s of forward delay.
    l.s.run_for(Duration::from_secs(12));
    assert_eq!(member_state(&l, 2), PortState::Forwarding);
    assert_eq!(ping_n(&mut l.s, l.hosts[0], ip(3), 3, 56), 3);
}

/// A host on one member claims to be the root and flips the topology change flag
/// in every BPDU, 20 a second, while two hosts on the other members talk: their
/// unicast never reaches it. A topology change ages addresses with the forward
/// delay (802.1D §8.3.5) instead of flushing the table at each rising flag, so
/// hosts that talk stay learned.
#[test]
fn a_rogue_root_toggling_topology_change_does_not_flood_other_hosts_unicast() {
    for workers in [1, 2] {
        let (mut l, mut ports) = lan_raw(workers, 3, fast_stp(0x8000));
        l.s.run_for(Duration::from_secs(12));
        let talk = |l: &mut Lan, ports: &mut Vec<Box<dyn Queue>>| {
            inject(&mut l.s, &mut ports[0], vec![frame(Y, X, 0x88b5, 60)]);
            inject(&mut l.s, &mut ports[1], vec![frame(X, Y, 0x88b5, 60)]);
        };
        talk(&mut l, &mut ports);
        sniff(&l.s, &mut ports[2]);
        let z = EthernetAddress([0x02, 0xee, 0, 0, 0, 1]);
        let bc = l.s.host(l.br).bridge(l.bridge).unwrap();
        let mut short = 0;
        for k in 0..200 {
            let mut c = rogue(z);
            c.flags.set(StpFlags::TC, k % 2 == 0);
            inject(&mut l.s, &mut ports[2], vec![bpdu(z, c)]);
            // The forward delay while the flag is up.
            short += usize::from(bc.br.rt.ageing_now() == 4);
            talk(&mut l, &mut ports);
            l.s.run_for(Duration::from_millis(40));
        }
        assert_eq!(short, 100, "workers={workers}");
        let st = bc.br.stp_status().unwrap();
        assert_eq!(st.root, BridgeId::new(0, z), "the rogue is root");
        let got = sniff(&l.s, &mut ports[2]);
        let leaked = from(&got, X) + from(&got, Y);
        assert_eq!(
            leaked, 0,
            "workers={workers}: {leaked} of 400 frames leaked"
        );
    }
}

/// `-stp`: a member out of the tree forwards at once while the others listen and
/// learn, and drops the BPDUs it hears (counted), which reach no tree.
#[test]
fn a_member_out_of_the_tree_forwards_at_once_and_drops_bpdus() {
    let p = fast_stp(0x8000);
    let mut l = lan(1, 3, p);
    let nostp = MemberFlags {
        stp: false,
        ..MemberFlags::default()
    };
    l.s.host(l.br)
        .bridge_set_member_flags(l.bridge, l.members[2], nostp)
        .unwrap();
    l.s.run_for(Duration::from_secs(1));
    assert_eq!(member_state(&l, 2), PortState::Forwarding);
    assert_eq!(member_state(&l, 0), PortState::Listening);
    let mut port = l.s.attach_raw(l.hubs[2]);
    inject(&mut l.s, &mut port, vec![bpdu(X, rogue(X))]);
    assert_eq!(l.s.host(l.br).stats().bridge.bpdunostp, 1);
    let bc = l.s.host(l.br).bridge(l.bridge).unwrap();
    let st = bc.br.stp_status().unwrap();
    assert_eq!(st.root, st.bridge_id);
    l.s.run_for(Duration::from_secs(10));
    assert_eq!(ping_n(&mut l.s, l.hosts[0], ip(3), 3, 56), 3);
    assert_eq!(member_state(&l, 2), PortState::Forwarding);
}
