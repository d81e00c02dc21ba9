//! Scenario tests of 802.1Q VLAN interfaces (vlan(4)): hosts talking over VLANs of
//! one segment, kept apart from each other and from the untagged traffic; a router on
//! a stick; access ports and trunks through a bridge. Deterministic, in virtual time,
//! with 1 and 2 workers.

use dev::mem::WireConfig;
use dev::{Duration, Queue};
use mbuf::Mbuf;
use net::link::bridge::{BridgeParams, MemberFlags};
use net::IfIndex;
use sim::{HostId, Sim};
use std::net::Ipv4Addr;
use wire::EthernetAddress;

mod common;
use common::ping_n;

fn a4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

/// A VLAN `vid` over `h`'s first interface, with address `addr`.
fn vlan(s: &mut Sim, h: HostId, vid: u16, addr: &str) -> IfIndex {
    let st = s.host(h);
    let parent = st.interfaces()[0].index;
    let v = st.add_vlan(&format!("vlan{vid}"), parent, vid).unwrap();
    st.add_address(v, addr.parse().unwrap()).unwrap();
    v
}

#[test]
fn hosts_talk_over_two_vlans_of_one_segment_kept_apart() {
    for workers in [1, 2] {
        let mut s = Sim::new(11);
        let hub = s.add_hub(WireConfig::default());
        let hs: Vec<HostId> = (0..3)
            .map(|k| s.add_host(&format!("h{k}"), workers))
            .collect();
        for (k, &h) in hs.iter().enumerate() {
            s.connect(h, hub, &format!("198.18.0.{}/24", k + 1));
        }
        // h0 and h1 on VLAN 10, h0 and h2 on VLAN 20, with the same subnet on both:
        // only the tags keep them apart.
        vlan(&mut s, hs[0], 10, "198.18.10.1/24");
        vlan(&mut s, hs[1], 10, "198.18.10.2/24");
        vlan(&mut s, hs[0], 20, "198.18.20.1/24");
        vlan(&mut s, hs[2], 20, "198.18.20.3/24");
        assert_eq!(
            ping_n(&mut s, hs[0], a4("198.18.10.2"), 5, 1000),
            5,
            "workers={workers}"
        );
        assert_eq!(
            ping_n(&mut s, hs[2], a4("198.18.20.1"), 5, 56),
            5,
            "workers={workers}"
        );
        // Untagged traffic on the parents still works.
        assert_eq!(ping_n(&mut s, hs[1], a4("198.18.0.3"), 3, 56), 3);
        let st = s.host(hs[0]).stats();
        assert!(
            st.vlan.ipackets >= 10 && st.vlan.opackets >= 10,
            "{:?}",
            st.vlan
        );
        // h2 has no VLAN 10: the tagged frames it sees are counted and dropped.
        assert!(s.host(hs[2]).stats().ether.vlandrop > 0);
        // Nothing else is dropped (but the hub's frames for others).
        let st1 = s.host(hs[1]).stats();
        assert_eq!(st1.total_drops(), st1.ether.vlandrop + st1.ether.notours);
    }
}

#[test]
fn a_router_on_a_stick_routes_between_vlans() {
    for workers in [1, 2] {
        let mut s = Sim::new(12);
        let hub = s.add_hub(WireConfig::default());
        let r = s.add_host("r", workers);
        let a = s.add_host("a", workers);
        let b = s.add_host("b", workers);
        for h in [r, a, b] {
            s.connect(h, hub, "");
        }
        let r10 = vlan(&mut s, r, 10, "198.18.10.1/24");
        let r20 = vlan(&mut s, r, 20, "198.18.20.1/24");
        for i in [r10, r20] {
            s.host(r).set_forwarding(i, true, true).unwrap();
        }
        vlan(&mut s, a, 10, "198.18.10.2/24");
        vlan(&mut s, b, 20, "198.18.20.2/24");
        s.host(a).set_default_gateway(Some(a4("198.18.10.1")));
        s.host(b).set_default_gateway(Some(a4("198.18.20.1")));
        assert_eq!(
            ping_n(&mut s, a, a4("198.18.20.2"), 5, 500),
            5,
            "workers={workers}"
        );
        let st = s.host(r).stats();
        assert!(st.ip.forward >= 10, "{:?}", st.ip);
    }
}

/// A bridge with an access port (untagged, `em0`) and a trunk (`em1`) whose VLAN 10
/// is bridged with it: the access host and the trunk host's VLAN 10 are one segment;
/// the trunk host's VLAN 20 is not on it.
#[test]
fn an_access_port_is_bridged_with_a_trunks_vlan() {
    for workers in [1, 2] {
        let mut s = Sim::new(13);
        let sw = s.add_host("sw", workers);
        let access = s.add_hub(WireConfig::default());
        let trunk = s.add_hub(WireConfig::default());
        let em0 = s.connect_named(sw, access, "", "em0");
        let em1 = s.connect_named(sw, trunk, "", "em1");
        let st = s.host(sw);
        let v10 = st.add_vlan("vlan10", em1, 10).unwrap();
        let b = st.add_bridge("bridge0", BridgeParams::default()).unwrap();
        for m in [em0, v10] {
            st.bridge_add_member(b, m, MemberFlags::default()).unwrap();
        }
        let h_access = s.add_host("access", workers);
        s.connect(h_access, access, "198.18.10.5/24");
        let h_trunk = s.add_host("trunk", workers);
        s.connect(h_trunk, trunk, "");
        vlan(&mut s, h_trunk, 10, "198.18.10.6/24");
        // Another host on the trunk, in VLAN 20 only, with an address of the same
        // subnet: the tags alone keep it off the bridged segment.
        let h_other = s.add_host("other", workers);
        s.connect(h_other, trunk, "");
        vlan(&mut s, h_other, 20, "198.18.10.7/24");
        let got = ping_n(&mut s, h_access, a4("198.18.10.6"), 5, 1000);
        if got != 5 {
            let mut t = String::new();
            for h in [sw, h_access, h_trunk] {
                s.host(h).stats().write_netstat(&mut t, false).unwrap();
                t.push_str("----\n");
            }
            panic!("workers={workers}: {got}\n{t}");
        }
        assert_eq!(
            ping_n(&mut s, h_access, a4("198.18.10.7"), 2, 56),
            0,
            "VLAN 20 is apart"
        );
        let st = s.host(sw).stats();
        assert!(
            st.vlan.ipackets >= 5 && st.vlan.opackets >= 5,
            "{:?}",
            st.vlan
        );
        assert!(st.bridge.forwarded >= 10, "{:?}", st.bridge);
        // The trunk's VLAN 20 frames reach no bridge member: counted, dropped.
        assert_eq!(ping_n(&mut s, h_other, a4("198.18.10.5"), 2, 56), 0);
        assert!(s.host(sw).stats().ether.vlandrop > 0);
    }
}

/// Tagged frames bridged as they are between two trunks: learned per VLAN, so one
/// address may sit on different members in different VLANs.
#[test]
fn trunks_bridge_tagged_frames_and_learn_per_vlan() {
    for workers in [1, 2] {
        let mut s = Sim::new(14);
        let sw = s.add_host("sw", workers);
        let hubs: Vec<_> = (0..2).map(|_| s.add_hub(WireConfig::default())).collect();
        let ms: Vec<_> = hubs
            .iter()
            .enumerate()
            .map(|(k, &h)| s.connect_named(sw, h, "", &format!("em{k}")))
            .collect();
        let st = s.host(sw);
        let b = st.add_bridge("bridge0", BridgeParams::default()).unwrap();
        for &m in &ms {
            st.bridge_add_member(b, m, MemberFlags::default()).unwrap();
        }
        let mut ports: Vec<Box<dyn Queue>> = hubs.iter().map(|&h| s.attach_raw(h)).collect();
        let x = EthernetAddress([2, 0xaa, 0, 0, 0, 1]);
        let y = EthernetAddress([2, 0xaa, 0, 0, 0, 2]);
        let tagged = |dst: EthernetAddress, src: EthernetAddress, vid: u16| {
            let mut f = vec![0u8; 64];
            f[..6].copy_from_slice(&dst.0);
            f[6..12].copy_from_slice(&src.0);
            f[12..14].copy_from_slice(&[0x81, 0x00]);
            f[14..16].copy_from_slice(&vid.to_be_bytes());
            f[16..18].copy_from_slice(&[0x88, 0xb5]);
            Mbuf::from_slice(&f).unwrap()
        };
        // X speaks on VLAN 10 from em0 and on VLAN 20 from em1.
        let now = s.now();
        ports[0].tx_burst(now, &mut vec![tagged(y, x, 10)]);
        ports[1].tx_burst(now, &mut vec![tagged(y, x, 20)]);
        s.run_for(Duration::from_millis(5));
        let mut v = Vec::new();
        ports[1].rx_burst(s.now(), &mut v, 64);
        assert!(
            v.iter().any(|m| m.to_vec()[14..16] == [0, 10]),
            "flooded tagged, as it came"
        );
        let bc = s.host(sw).bridge(b).unwrap();
        let e = bc
            .br
            .rt
            .entries((s.now().as_nanos() / 1_000_000_000) as u32);
        let on = |vid: u16| {
            e.iter()
                .find(|e| e.0 == vid && e.1 == x)
                .map(|e| e.2.member)
        };
        assert_eq!(on(10), Some(ms[0].0), "workers={workers}");
        assert_eq!(on(20), Some(ms[1].0), "workers={workers}");
        // Y answers on VLAN 10 from em1: it goes to em0 only (where X is in VLAN 10).
        v.clear();
        ports[0].rx_burst(s.now(), &mut v, 64);
        let now = s.now();
        ports[1].tx_burst(now, &mut vec![tagged(x, y, 10)]);
        s.run_for(Duration::from_millis(5));
        v.clear();
        ports[0].rx_burst(s.now(), &mut v, 64);
        assert_eq!(v.len(), 1, "workers={workers}");
        assert_eq!(s.host(sw).stats().bridge.forwarded, 1);
    }
}

#[test]
fn vlan_errors_are_clear() {
    let mut s = Sim::new(15);
    let hub = s.add_hub(WireConfig::default());
    let h = s.add_host("h", 1);
    let em0 = s.connect(h, hub, "");
    let st = s.host(h);
    assert!(st
        .add_vlan("v0", em0, 0)
        .unwrap_err()
        .to_string()
        .contains("out of range"));
    assert!(st.add_vlan("v4095", em0, 4095).is_err());
    let v = st.add_vlan("vlan10", em0, 10).unwrap();
    let e = st.add_vlan("vlan10b", em0, 10).unwrap_err().to_string();
    assert!(e.contains("has VLAN 10 already (vlan10)"), "{e}");
    let e = st.add_vlan("qinq", v, 20).unwrap_err().to_string();
    assert!(e.contains("must be a device's interface"), "{e}");
    assert!(st.add_vlan("x", IfIndex(40), 5).is_err());
    assert!(st.add_vlan("vlan10", em0, 11).is_err(), "the name is taken");
}

/// `frame` (destination, source, type, payload) in an 802.1Q tag of priority
/// `pcp` and VLAN id `vid`.
fn tagged(
    dst: EthernetAddress,
    src: EthernetAddress,
    pcp: u8,
    vid: u16,
    ty: u16,
    p: &[u8],
) -> Mbuf {
    let mut f = Vec::new();
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&[0x81, 0x00]);
    f.extend_from_slice(&(u16::from(pcp) << 13 | vid).to_be_bytes());
    f.extend_from_slice(&ty.to_be_bytes());
    f.extend_from_slice(p);
    f.resize(f.len().max(64), 0);
    Mbuf::from_slice(&f).unwrap()
}

/// Priority-tagged frames (VLAN id 0, priority 5) are the interface's own, as
/// untagged ones (IEEE 802.1Q §9.6; Linux and FreeBSD take them so): an ARP
/// request and an echo request in one get their answers. A frame tagged for a
/// VLAN the host has not stays a counted drop.
#[test]
fn priority_tagged_frames_are_taken_as_untagged() {
    for workers in [1, 2] {
        let mut s = Sim::new(31 + workers as u64);
        let hub = s.add_hub(WireConfig::default());
        let h = s.add_host("h", workers);
        s.connect(h, hub, "198.18.0.1/24");
        let mut port = s.attach_raw(hub);
        let hmac = s.host(h).interfaces()[0].mac;
        let me = EthernetAddress([0x02, 0xcc, 0, 0, 0, 9]);
        let (mine, theirs) = (a4("198.18.0.9"), a4("198.18.0.1"));
        let mut arp = vec![0, 1, 8, 0, 6, 4, 0, 1];
        arp.extend_from_slice(&me.0);
        arp.extend_from_slice(&mine.octets());
        arp.extend_from_slice(&[0; 6]);
        arp.extend_from_slice(&theirs.octets());
        let mut icmp = vec![8, 0, 0, 0, 0x4d, 0x50, 0, 1];
        icmp.extend_from_slice(b"priority tagged");
        let sum = !wire::checksum::data(&icmp);
        icmp[2..4].copy_from_slice(&sum.to_be_bytes());
        let mut ip = vec![0x45, 0, 0, 0, 0, 1, 0, 0, 64, 1, 0, 0];
        ip[2..4].copy_from_slice(&((20 + icmp.len()) as u16).to_be_bytes());
        ip.extend_from_slice(&mine.octets());
        ip.extend_from_slice(&theirs.octets());
        let sum = !wire::checksum::data(&ip);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        ip.extend_from_slice(&icmp);
        let mut v = vec![
            tagged(EthernetAddress::BROADCAST, me, 5, 0, 0x0806, &arp),
            tagged(hmac, me, 5, 0, 0x0800, &ip),
            tagged(hmac, me, 5, 7, 0x0800, &ip),
        ];
        let now = s.now();
        port.tx_burst(now, &mut v);
        s.run_for(Duration::from_millis(50));
        let mut got = Vec::new();
        while port.rx_burst(s.now(), &mut got, 64) > 0 {}
        let got: Vec<Vec<u8>> = got.iter().map(|m| m.to_vec()).collect();
        let to_me: Vec<&Vec<u8>> = got.iter().filter(|f| f[..6] == me.0).collect();
        assert!(
            to_me
                .iter()
                .any(|f| f[12..14] == [8, 6] && f[20..22] == [0, 2]),
            "workers={workers}: no ARP reply: {to_me:?}"
        );
        let replies = to_me
            .iter()
            .filter(|f| f[12..14] == [8, 0] && f[14 + 20] == 0 && f.ends_with(b"priority tagged"))
            .count();
        assert_eq!(replies, 1, "workers={workers}: one echo reply: {to_me:?}");
        let st = s.host(h).stats();
        assert_eq!(st.ether.vlandrop, 1, "VLAN 7 is not h's");
    }
}
