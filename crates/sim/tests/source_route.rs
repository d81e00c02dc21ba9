//! Source routing turned on (`net.inet.ip.sourceroute=1`, issue 29), as FreeBSD's
//! `ip_dooptions` follows a route: at the hop the route names, the next address
//! becomes the destination and the router's outgoing address is recorded in its
//! place, the pointer moved on and the header checksum made again; a strict route
//! to a next hop that is not a neighbour, or a loose one without a route, is
//! answered with "source route failed"; a route that ends at the router is
//! delivered only with `accept_sourceroute=1`. (With both off, the default, every
//! source-routed packet is dropped: `hostile_inet.rs`.)
//!
//! Frames are written by hand on a raw port X on one side of router R, and what R
//! forwards is read on a raw port Y on the other.

mod common;
use dev::mem::WireConfig;
use dev::{Duration, Queue};
use mbuf::Mbuf;
use net::SourceRouting;
use sim::{HostId, Sim};
use std::net::Ipv4Addr;
use wire::EthernetAddress;

const X: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xaa]);
const Y: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xbb]);
const X4: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 2);
const Y4: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 2);
/// R's addresses on X's network and on Y's.
const R1: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 1);
const R2: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 1);
/// Beyond Y: R routes 198.18.9.0/24 through it.
const FAR: Ipv4Addr = Ipv4Addr::new(198, 18, 9, 9);
/// Nowhere R has a route to.
const NOWHERE: Ipv4Addr = Ipv4Addr::new(198, 19, 77, 7);

struct Rig {
    s: Sim,
    x: Box<dyn Queue>,
    y: Box<dyn Queue>,
    r: HostId,
    r_mac: EthernetAddress,
}

/// X — R (198.18.1.0/24) and R — Y (198.18.2.0/24) on two hubs, R forwarding and
/// knowing both raw ports' link addresses, with a route to 198.18.9.0/24 via Y;
/// source routing as `sr`.
fn rig(sr: SourceRouting) -> Rig {
    let mut s = Sim::new(29);
    let hub1 = s.add_hub(WireConfig::default());
    let hub2 = s.add_hub(WireConfig::default());
    let r = s.add_host("r", 1);
    let i1 = s.connect(r, hub1, "198.18.1.1/24");
    let i2 = s.connect(r, hub2, "198.18.2.1/24");
    for i in s.host(r).interfaces() {
        s.host(r).set_forwarding(i.index, true, true).unwrap();
    }
    let far: route::IpPrefix = "198.18.9.0/24".parse().unwrap();
    s.host(r).add_route_via(far, Y4.into()).unwrap();
    let x = s.attach_raw(hub1);
    let y = s.attach_raw(hub2);
    let cfg = s.host(r).config();
    cfg.ifaces[i1.get()].arp.insert_static(X4, X);
    cfg.ifaces[i2.get()].arp.insert_static(Y4, Y);
    let r_mac = cfg.ifaces[i1.get()].mac;
    s.host(r).set_source_routing(sr);
    s.run_for(Duration::from_millis(100));
    let mut rig = Rig { s, x, y, r, r_mac };
    sniff(&mut rig.s, &mut rig.x);
    sniff(&mut rig.s, &mut rig.y);
    rig
}

const ON: SourceRouting = SourceRouting {
    forward: true,
    accept: false,
};

/// An IPv4 UDP datagram (to port 9) from X to `dst` with `opts` (a multiple of 4
/// bytes) after the fixed header, TTL 64, its header checksum right, in a frame
/// to R.
fn frame(r: &Rig, dst: Ipv4Addr, opts: &[u8]) -> Vec<u8> {
    let p = common::ip4_udp_with_options(X4, dst, opts);
    let mut f = r.r_mac.0.to_vec();
    f.extend_from_slice(&X.0);
    f.extend_from_slice(&[8, 0]);
    f.extend_from_slice(&p);
    f
}

fn send(r: &mut Rig, dst: Ipv4Addr, opts: &[u8]) {
    let f = frame(r, dst, opts);
    let now = r.s.now();
    r.x.tx_burst(now, &mut vec![Mbuf::from_slice(&f).unwrap()]);
    r.s.run_for(Duration::from_millis(20));
}

/// Frames a raw port received since last asked.
fn sniff(s: &mut Sim, port: &mut Box<dyn Queue>) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    while port.rx_burst(s.now(), &mut v, 256) > 0 {}
    v.iter().map(|m| m.to_vec()).collect()
}

/// The IPv4 packets (from the IP header on) R sent to Y's link address.
fn at_y(r: &mut Rig) -> Vec<Vec<u8>> {
    sniff(&mut r.s, &mut r.y)
        .into_iter()
        .filter(|f| f.len() > 34 && f[..6] == Y.0 && f[12..14] == [8, 0])
        .map(|f| f[14..].to_vec())
        .collect()
}

/// The ICMPv4 messages R sent to X: (type, code).
fn icmp_to_x(r: &mut Rig) -> Vec<(u8, u8)> {
    sniff(&mut r.s, &mut r.x)
        .into_iter()
        .filter(|f| f.len() > 14 + 28 && f[12..14] == [8, 0] && f[14 + 9] == 1)
        .map(|f| {
            let hl = usize::from(f[14] & 15) * 4;
            (f[14 + hl], f[14 + hl + 1])
        })
        .collect()
}

fn addr(b: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(b[0], b[1], b[2], b[3])
}

#[test]
fn loose_source_route_through_the_router_records_its_address_and_moves_on() {
    let mut r = rig(ON);
    // X → R, then Y, then FAR: addressed to R, Y next in the option.
    let opts = [131, 11, 4, 198, 18, 2, 2, 198, 18, 9, 9, 1];
    send(&mut r, R1, &opts);
    let got = at_y(&mut r);
    assert_eq!(
        got.len(),
        1,
        "forwarded to Y: {:?}",
        r.s.host(r.r).stats().ip
    );
    let p = &got[0];
    assert_eq!(p[0], 0x48, "the options kept");
    assert_eq!(addr(&p[12..16]), X4, "the source unchanged");
    assert_eq!(addr(&p[16..20]), Y4, "the next address is the destination");
    assert_eq!(p[8], 63, "TTL decremented as any forward");
    assert_eq!(&p[20..23], &[131, 11, 8], "the pointer moved on by 4");
    assert_eq!(addr(&p[23..27]), R2, "R's outgoing address recorded");
    assert_eq!(addr(&p[27..31]), FAR, "the rest of the route as it was");
    assert_eq!(
        wire::checksum::data(&p[..32]),
        0xffff,
        "header checksum right"
    );
    // The last hop of a route through a gateway: out by Y's network, to FAR.
    send(&mut r, R1, &[131, 7, 4, 198, 18, 9, 9, 0]);
    let got = at_y(&mut r);
    assert_eq!(got.len(), 1);
    let p = &got[0];
    assert_eq!(addr(&p[16..20]), FAR);
    assert_eq!(&p[20..23], &[131, 7, 8]);
    assert_eq!(addr(&p[23..27]), R2);
    assert_eq!(wire::checksum::data(&p[..28]), 0xffff);
    let st = r.s.host(r.r).stats();
    assert_eq!((st.ip.forward, st.ip.srcroute), (2, 0), "{:?}", st.ip);
}

#[test]
fn strict_source_route_to_a_next_hop_not_on_link_fails_with_code_5() {
    let mut r = rig(ON);
    // Y is R's neighbour: followed.
    send(&mut r, R1, &[137, 7, 4, 198, 18, 2, 2, 0]);
    let got = at_y(&mut r);
    assert_eq!(got.len(), 1);
    assert_eq!(addr(&got[0][16..20]), Y4);
    assert_eq!(addr(&got[0][23..27]), R2);
    // FAR is routed through Y, but not on a network of R's: a strict route fails.
    send(&mut r, R1, &[137, 7, 4, 198, 18, 9, 9, 0]);
    // A loose route to where R has no route fails too (as FreeBSD's).
    let [a, b, c, d] = NOWHERE.octets();
    send(&mut r, R1, &[131, 7, 4, a, b, c, d, 0]);
    // A strict route not addressed to R reached a router it does not name.
    send(&mut r, Y4, &[137, 7, 4, 198, 18, 9, 9, 0]);
    assert_eq!(icmp_to_x(&mut r), vec![(3, 5), (3, 5), (3, 5)]);
    assert!(at_y(&mut r).is_empty(), "none of them forwarded");
    let st = r.s.host(r.r).stats();
    assert_eq!((st.ip.forward, st.ip.srcroute), (1, 3), "{:?}", st.ip);
}

#[test]
fn a_loose_route_in_transit_is_forwarded_by_its_destination() {
    let mut r = rig(ON);
    // Addressed to Y, FAR next in the option: R is not a hop it names.
    send(&mut r, Y4, &[131, 7, 4, 198, 18, 9, 9, 0]);
    let got = at_y(&mut r);
    assert_eq!(got.len(), 1);
    let p = &got[0];
    assert_eq!(addr(&p[16..20]), Y4);
    assert_eq!(&p[20..23], &[131, 7, 4], "the option untouched");
    assert_eq!(addr(&p[23..27]), FAR);
    assert_eq!(p[8], 63);
    assert_eq!(wire::checksum::data(&p[..28]), 0xffff);
}

#[test]
fn a_route_that_ends_at_the_router_is_delivered_only_when_accepted() {
    // The pointer past the option: R was the last hop.
    let done = [131, 7, 8, 198, 18, 1, 1, 0];
    let mut r = rig(ON);
    send(&mut r, R1, &done);
    let st = r.s.host(r.r).stats();
    assert_eq!((st.ip.srcroute, st.ip.delivered), (1, 0), "{:?}", st.ip);
    assert!(icmp_to_x(&mut r).is_empty(), "dropped silently");
    // Accepted: delivered (to a port nobody listens on: port unreachable).
    r.s.host(r.r).set_source_routing(SourceRouting {
        forward: true,
        accept: true,
    });
    send(&mut r, R1, &done);
    let st = r.s.host(r.r).stats();
    assert_eq!((st.ip.srcroute, st.ip.delivered), (1, 1), "{:?}", st.ip);
    assert_eq!(icmp_to_x(&mut r), vec![(3, 3)]);
    // As FreeBSD's, accepting does not need forwarding on.
    r.s.host(r.r).set_source_routing(SourceRouting {
        forward: false,
        accept: true,
    });
    send(&mut r, R1, &done);
    assert_eq!(r.s.host(r.r).stats().ip.delivered, 2);
    // A route naming R for its remaining hops ends at R too.
    send(&mut r, R1, &[131, 11, 4, 198, 18, 2, 1, 198, 18, 1, 1, 0]);
    assert_eq!(
        r.s.host(r.r).stats().ip.srcroute,
        2,
        "refused: forward is off"
    );
    r.s.host(r.r).set_source_routing(SourceRouting {
        forward: true,
        accept: true,
    });
    send(&mut r, R1, &[131, 11, 4, 198, 18, 2, 1, 198, 18, 1, 1, 0]);
    let st = r.s.host(r.r).stats();
    assert_eq!((st.ip.srcroute, st.ip.delivered), (2, 3), "{:?}", st.ip);
}

#[test]
fn with_source_routing_off_nothing_is_followed() {
    let mut r = rig(SourceRouting::default());
    send(&mut r, R1, &[131, 7, 4, 198, 18, 2, 2, 0]);
    send(&mut r, Y4, &[131, 7, 4, 198, 18, 9, 9, 0]);
    send(&mut r, R1, &[137, 7, 4, 198, 18, 9, 9, 0]);
    send(&mut r, R1, &[131, 7, 8, 198, 18, 1, 1, 0]);
    assert!(at_y(&mut r).is_empty());
    assert!(icmp_to_x(&mut r).is_empty(), "dropped silently");
    let st = r.s.host(r.r).stats();
    assert_eq!((st.ip.srcroute, st.ip.forward), (4, 0), "{:?}", st.ip);
}

#[test]
fn following_a_route_needs_forwarding_on_the_arrival_interface() {
    let mut r = rig(ON);
    for i in r.s.host(r.r).interfaces() {
        r.s.host(r.r).set_forwarding(i.index, false, false).unwrap();
    }
    send(&mut r, R1, &[131, 7, 4, 198, 18, 2, 2, 0]);
    assert!(at_y(&mut r).is_empty());
    let st = r.s.host(r.r).stats();
    assert_eq!((st.ip.cantforward, st.ip.forward), (1, 0), "{:?}", st.ip);
}

#[test]
fn record_route_on_a_forwarded_packet_gets_the_outgoing_address() {
    // Source routing off: Record Route does not depend on it.
    let mut r = rig(SourceRouting::default());
    // NOP, Record Route with room for two addresses.
    send(&mut r, FAR, &[1, 7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0]);
    // Full: passed as it is.
    send(&mut r, FAR, &[7, 7, 8, 1, 2, 3, 4, 0]);
    let got = at_y(&mut r);
    assert_eq!(got.len(), 2);
    let p = &got[0];
    assert_eq!(&p[21..24], &[7, 11, 8], "the pointer moved on by 4");
    assert_eq!(addr(&p[24..28]), R2, "R's outgoing address recorded");
    assert_eq!(&p[28..32], &[0; 4], "the next slot still free");
    assert_eq!(p[8], 63);
    assert_eq!(
        wire::checksum::data(&p[..32]),
        0xffff,
        "header checksum right"
    );
    let p = &got[1];
    assert_eq!(
        &p[20..28],
        &[7, 7, 8, 1, 2, 3, 4, 0],
        "a full one untouched"
    );
    assert_eq!(wire::checksum::data(&p[..28]), 0xffff);
    // Behind a source route that R follows, R records its address in both.
    r.s.host(r.r).set_source_routing(ON);
    send(
        &mut r,
        R1,
        &[131, 7, 4, 198, 18, 9, 9, 7, 7, 4, 0, 0, 0, 0, 0, 0],
    );
    let got = at_y(&mut r);
    assert_eq!(got.len(), 1);
    let p = &got[0];
    assert_eq!(addr(&p[16..20]), FAR);
    assert_eq!(&p[20..23], &[131, 7, 8]);
    assert_eq!(addr(&p[23..27]), R2);
    assert_eq!(&p[27..30], &[7, 7, 8]);
    assert_eq!(addr(&p[30..34]), R2);
    assert_eq!(wire::checksum::data(&p[..36]), 0xffff);
}

#[test]
fn a_route_with_room_for_less_than_an_address_after_ours_ends_at_the_router() {
    let mut r = rig(SourceRouting {
        forward: true,
        accept: true,
    });
    // Three NOPs, then LSRR of length 9 ending the header: R's address, then two
    // stray bytes, not an address: the route ends at R (FreeBSD's test, `off >
    // optlen - 4`).
    send(&mut r, R1, &[1, 1, 1, 131, 9, 4, 198, 18, 2, 1, 7, 7]);
    assert!(at_y(&mut r).is_empty());
    let st = r.s.host(r.r).stats();
    assert_eq!((st.ip.delivered, st.ip.forward), (1, 0), "{:?}", st.ip);
}

#[test]
fn arbitrary_routes_are_followed_answered_or_dropped_never_a_panic() {
    let mut r = rig(SourceRouting {
        forward: true,
        accept: true,
    });
    // Options that are mostly a source route and a Record Route of every length
    // and pointer, their addresses R's, its neighbours', or anything.
    let addrs = [R1, R2, R1, R2, X4, Y4, FAR, NOWHERE, Ipv4Addr::BROADCAST];
    let mut seed = 0x2929_2929_u64;
    let mut rnd = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for _ in 0..50 {
        let mut burst = Vec::new();
        for _ in 0..100 {
            let mut o = Vec::new();
            while o.len() < 40 && rnd(3) != 0 {
                let ty = [131, 137, 7, 1, 68][rnd(5) as usize];
                if ty == 1 {
                    o.push(1);
                    continue;
                }
                let n = 1 + rnd(4) as usize;
                let mut opt = vec![ty, 0, [4, 8, 12, 5, 3][rnd(5) as usize]];
                for _ in 0..n {
                    opt.extend_from_slice(&addrs[rnd(addrs.len() as u64) as usize].octets());
                }
                opt.truncate(opt.len() - rnd(3) as usize);
                opt[1] = (opt.len() as u8).wrapping_add(rnd(3) as u8).wrapping_sub(1);
                o.extend_from_slice(&opt);
            }
            o.truncate(40);
            // Padded at the end, or with NOPs in front so that the last option
            // ends the header.
            let pad = (4 - o.len() % 4) % 4;
            if rnd(2) == 0 {
                o.splice(0..0, std::iter::repeat_n(1, pad));
            } else {
                o.extend(std::iter::repeat_n(0, pad));
            }
            o.truncate(40);
            let dst = addrs[rnd(addrs.len() as u64) as usize];
            burst.push(Mbuf::from_slice(&frame(&r, dst, &o)).unwrap());
        }
        let now = r.s.now();
        r.x.tx_burst(now, &mut burst);
        r.s.run_for(Duration::from_millis(20));
        sniff(&mut r.s, &mut r.x);
        sniff(&mut r.s, &mut r.y);
    }
    let st = r.s.host(r.r).stats();
    assert!(st.ip.total >= 5000, "{:?}", st.ip);
    assert!(st.ip.forward > 0 && st.ip.srcroute > 0 && st.ip.badoptions > 0);
}

#[test]
fn a_followed_route_goes_through_the_firewall_by_its_new_destination() {
    let mut r = rig(ON);
    // Out towards Y refused; in, anything to R allowed.
    let fw = net::ipfw::Ipfw::new(fw::RulesetConfig::default(), 1).unwrap();
    fw.load("add 100 deny ip from any to 198.18.2.2 out\nadd 200 allow ip from any to any\n")
        .unwrap();
    fw.attach(r.s.host(r.r));
    // Addressed to R, which the input hooks let in; sent on to Y, which the
    // output hooks refuse.
    send(&mut r, R1, &[131, 7, 4, 198, 18, 2, 2, 0]);
    assert!(at_y(&mut r).is_empty(), "refused on the way out");
    // Towards FAR (the same way out, another destination): let through.
    send(&mut r, R1, &[131, 7, 4, 198, 18, 9, 9, 0]);
    assert_eq!(at_y(&mut r).len(), 1);
}
