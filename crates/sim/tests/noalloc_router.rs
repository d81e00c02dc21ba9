//! A router forwards without heap allocation per packet: 64-byte IPv4 and IPv6 frames
//! through a `net::Stack` polled in one thread (`Stack::poll`), from a `dev::gen`
//! generator on `in0` out through four sinks over four routes (ether input, IP input,
//! the FIB, the next hop's L2 rewrite, ether output: every stage of a routed packet),
//! counted after a warm-up, for each family:
//!
//! - with no firewall;
//! - with ipfw on the IP points in and out (a routed packet meets it twice): ten
//!   rules that match none of the frames before an `allow`;
//! - with ipfw's `check-state` and `allow ... keep-state` over 4,096 flows, each
//!   flow's state made during the warm-up, so that every counted packet is a state
//!   hit, in and out.
//!
//! The sinks hand their buffers back to the generator, as a driver refills its
//! receive ring, so the devices allocate nothing once warm: an allocation in the
//! counted window is the stack's (or the firewall's).
//!
//! No test harness (`harness = false`), for the reason `noalloc.rs` gives. The counting
//! allocator (`dev::alloc_count`) keeps a backtrace of the first allocation it counts,
//! so that a failure names the path that allocated instead of only a number.

use dev::gen::PktGen;
use net::iface::{IfConfig, Inet6Addr, InetAddr};
use net::{Stack, StackConfig};
use route::{IpPrefix, RouteSpec};
use std::backtrace::Backtrace;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use wire::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpProtocol};

#[global_allocator]
static A: dev::alloc_count::CountingAlloc = dev::alloc_count::CountingAlloc;

fn start_counting() {
    dev::alloc_count::start_culprit();
}

/// Stops counting: (allocations, bytes, the first one's backtrace).
fn stop_counting() -> (u64, u64, Option<Backtrace>) {
    dev::alloc_count::stop_culprit()
}

/// Sink interfaces `out1..=out4`; the generator is `in0`.
const OUT_IFACES: u8 = 4;
/// Bytes in a frame (without the FCS).
const FRAME: usize = 64;
/// Flows of the keep-state cases (one state each).
const STATE_FLOWS: usize = 4096;
/// Flows of the other cases.
const FLOWS: usize = 256;
/// Frames forwarded before counting: every flow's state made, every queue, table and
/// recycling list at its working size.
const WARM_PACKETS: u64 = 3 * STATE_FLOWS as u64;
/// Frames forwarded while counting.
const COUNTED_PACKETS: u64 = 32_768;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    V4,
    V6,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Firewall {
    None,
    /// Ten rules no frame matches, then `allow ip from any to any`.
    TenMissesThenAllow,
    /// `check-state`, then `allow ip from any to any keep-state`.
    KeepState,
}

const GEN_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0xee, 0x01]);

/// The router's MAC on interface `i`.
fn if_mac(i: u8) -> EthernetAddress {
    EthernetAddress([0x02, 0, 0, 0, 0, 0x10 + i])
}
/// The gateway's MAC on out interface `i`.
fn gw_mac(i: u8) -> EthernetAddress {
    EthernetAddress([0x02, 0, 0x5e, 0, i, 0x02])
}
fn gw4(i: u8) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, i, 2)
}
fn gw6(i: u8) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 2, u16::from(i), 0, 0, 0, 0, 2)
}
/// Route `i` (1..=4): 10.i.0.0/16 and 2a00:i::/32, through out interface `i`.
fn route4(i: u8) -> IpPrefix {
    IpPrefix::new(Ipv4Addr::new(10, i, 0, 0).into(), 16)
}
fn route6(i: u8) -> IpPrefix {
    IpPrefix::new(
        Ipv6Addr::new(0x2a00, u16::from(i), 0, 0, 0, 0, 0, 0).into(),
        32,
    )
}

/// Flow `n`: a source on `in0`'s link, a destination under route `1 + n % 4`, UDP
/// ports from `n`.
fn flow_addrs(fam: Family, n: usize) -> (IpAddr, IpAddr, u16, u16) {
    let r = 1 + (n % usize::from(OUT_IFACES)) as u8;
    let host = (n / usize::from(OUT_IFACES)) as u16;
    let sport = 1024 + (n % 60_000) as u16;
    let dport = [53, 123, 443, 4789][n % 4];
    match fam {
        Family::V4 => (
            Ipv4Addr::new(198, 18, 0, 2 + (n % 250) as u8).into(),
            Ipv4Addr::new(10, r, (host >> 8) as u8, host as u8).into(),
            sport,
            dport,
        ),
        Family::V6 => (
            Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2 + (n % 250) as u16).into(),
            Ipv6Addr::new(0x2a00, u16::from(r), 0, 0, 0, 0, 0, host + 1).into(),
            sport,
            dport,
        ),
    }
}

/// Ethernet + IP + UDP of flow `n`, 64 bytes, every checksum valid, TTL/hop limit 64,
/// to the router's MAC on `in0`.
fn frame(fam: Family, n: usize) -> Vec<u8> {
    let (src, dst, src_port, dst_port) = flow_addrs(fam, n);
    let udp = wire::UdpRepr { src_port, dst_port };
    let mut out = vec![0u8; FRAME];
    let mut fr = EthernetFrame::new_unchecked(&mut out[..]);
    EthernetRepr {
        src_addr: GEN_MAC,
        dst_addr: if_mac(0),
        ethertype: match fam {
            Family::V4 => EtherType::Ipv4,
            Family::V6 => EtherType::Ipv6,
        },
    }
    .emit(&mut fr);
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let payload = FRAME - 14 - 20 - 8;
            let ip = wire::Ipv4Repr {
                src_addr: s,
                dst_addr: d,
                next_header: IpProtocol::Udp,
                payload_len: udp.buffer_len(payload),
                hop_limit: 64,
                dscp: 0,
                ident: n as u16,
                dont_frag: true,
            };
            let mut p = wire::Ipv4Packet::new_unchecked(fr.payload_mut());
            ip.emit(&mut p);
            udp.emit(
                &mut wire::UdpPacket::new_unchecked(p.payload_mut()),
                &s.into(),
                &d.into(),
                payload,
                |b| b.fill(0x5a),
                true,
            );
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let payload = FRAME - 14 - 40 - 8;
            let ip = fr.payload_mut();
            ip[0] = 0x60;
            ip[4..6].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
            ip[6] = 17;
            ip[7] = 64;
            ip[8..24].copy_from_slice(&s.octets());
            ip[24..40].copy_from_slice(&d.octets());
            udp.emit(
                &mut wire::UdpPacket::new_unchecked(&mut ip[40..]),
                &s.into(),
                &d.into(),
                payload,
                |b| b.fill(0x5a),
                true,
            );
        }
        _ => unreachable!("flow_addrs gives one family"),
    }
    out
}

/// A one-worker router: `in0` on the generator, `out1..=out4` on sinks, a route of
/// each family to a gateway on each out interface, the gateways' MACs static.
fn router(gen: &PktGen, frames: &[Vec<u8>]) -> Stack {
    let mut stack = Stack::new(StackConfig {
        name: "noalloc-rtr".into(),
        workers: 1,
        isn_secret: Some(1),
        dad_transmits: 0,
        send_redirects: false,
        ..StackConfig::default()
    });
    for i in 0..=OUT_IFACES {
        let dev: Box<dyn dev::Device> = if i == 0 {
            Box::new(gen.generator("gen", frames))
        } else {
            Box::new(gen.sink(&format!("sink{i}")))
        };
        let idx = stack
            .add_interface(
                dev,
                IfConfig {
                    name: Some(if i == 0 {
                        "in0".into()
                    } else {
                        format!("out{i}")
                    }),
                    mac: Some(if_mac(i)),
                    addrs: vec![InetAddr::new(Ipv4Addr::new(198, 18, i, 1), 24)],
                    mtu: None,
                },
            )
            .expect("interface");
        let a6 = Ipv6Addr::new(0x2001, 2, u16::from(i), 0, 0, 0, 0, 1);
        stack
            .add_address6(idx, Inet6Addr::new(a6, 64))
            .expect("IPv6 address");
        stack.set_forwarding(idx, true, true).expect("forwarding");
    }
    let cfg = stack.config();
    for i in 1..=OUT_IFACES {
        let ifp = &cfg.ifaces[usize::from(i)];
        ifp.arp.insert_static(gw4(i), gw_mac(i));
        ifp.nd6.insert_static(gw6(i), gw_mac(i));
        stack
            .add_route(RouteSpec::via(route4(i), gw4(i).into(), u32::from(i)))
            .expect("IPv4 route");
        stack
            .add_route(RouteSpec::via(route6(i), gw6(i).into(), u32::from(i)))
            .expect("IPv6 route");
    }
    stack
}

fn firewall(stack: &Stack, fw: Firewall) -> Option<std::sync::Arc<net::ipfw::Ipfw>> {
    let rules = match fw {
        Firewall::None => return None,
        // Each misses every frame here (UDP from in0's link to 10/8 and 2a00::/16,
        // ports 1024.. to 53, 123, 443, 4789), each in its own way.
        Firewall::TenMissesThenAllow => "add 100 deny ip from 192.0.2.0/24 to any
add 110 deny ip from 2001:db8::/32 to any
add 120 deny ip from any to 203.0.113.0/24
add 130 deny ip from any to 2001:db8:1::/48
add 140 deny tcp from any to any
add 150 deny udp from any to any 22
add 160 deny udp from any 7 to any
add 170 deny icmp from any to any
add 180 deny ipv6-icmp from any to any
add 190 deny udp from any to any 9-19
add 60000 allow ip from any to any"
            .to_string(),
        Firewall::KeepState => {
            "add 100 check-state\nadd 200 allow ip from any to any keep-state".to_string()
        }
    };
    let mut cfg = fw::RulesetConfig::default();
    cfg.states.max_states = 4 * STATE_FLOWS;
    let f = net::ipfw::Ipfw::new(cfg, 1).expect("ipfw");
    f.load(&rules).expect("rules");
    f.attach(stack);
    Some(f)
}

/// Polls until `packets` more frames have come out of the generator; the virtual
/// clock advances 10 µs a poll.
fn run(stack: &mut Stack, gen: &PktGen, now: &mut dev::Instant, packets: u64) {
    let target = gen.counts().generated + packets;
    while gen.counts().generated < target {
        stack.poll(*now);
        *now += dev::Duration::from_micros(10);
    }
}

/// One case: the allocations counted over [`COUNTED_PACKETS`] forwarded frames, with
/// the first one's backtrace; `Err` if the router did not forward them all.
fn case(fam: Family, fw: Firewall) -> Result<(u64, u64, Option<Backtrace>), String> {
    let flows = if fw == Firewall::KeepState {
        STATE_FLOWS
    } else {
        FLOWS
    };
    let frames: Vec<Vec<u8>> = (0..flows).map(|n| frame(fam, n)).collect();
    let gen = PktGen::new(1, 1500);
    let mut stack = router(&gen, &frames);
    let ipfw = firewall(&stack, fw);
    // Three seconds of virtual time first, in 100 ms steps: until an interface's
    // MLD reports have gone out twice, a second apart (RFC 3810's robustness
    // variable), `mld_timer` builds its lists on every poll; after, it answers from
    // the published table. A router that has been up for seconds is past this.
    let mut now = dev::Instant::ZERO;
    for _ in 0..30 {
        stack.poll(now);
        now += dev::Duration::from_millis(100);
    }
    run(&mut stack, &gen, &mut now, WARM_PACKETS);
    if let Some(f) = &ipfw {
        if fw == Firewall::KeepState && f.states() < STATE_FLOWS {
            return Err(format!(
                "{} states after the warm-up, not {STATE_FLOWS}",
                f.states()
            ));
        }
    }
    let before = (gen.counts(), stack.stats());
    let fw_before = ipfw.as_ref().map(|f| (f.states(), rule_packets(f, 60000)));

    start_counting();
    run(&mut stack, &gen, &mut now, COUNTED_PACKETS);
    let (allocs, bytes, first) = stop_counting();

    let (c, s) = (gen.counts(), stack.stats());
    let generated = c.generated - before.0.generated;
    let sunk = c.sunk - before.0.sunk;
    let forwarded = match fam {
        Family::V4 => s.ip.forward - before.1.ip.forward,
        Family::V6 => s.ip6.forward - before.1.ip6.forward,
    };
    let drops = s.total_drops() - before.1.total_drops();
    if sunk != generated || forwarded != generated || drops != 0 {
        let mut counters = String::new();
        let _ = s.write_netstat(&mut counters, false);
        return Err(format!(
            "{generated} frames in, {sunk} out, {forwarded} counted forwarded, {drops} dropped; counters:\n{counters}"
        ));
    }
    if let (Some(f), Some((states, allowed))) = (&ipfw, fw_before) {
        // The rules really ran: the allow took every frame twice (in and out), or
        // every frame found its flow's state and made none.
        match fw {
            Firewall::TenMissesThenAllow if rule_packets(f, 60000) - allowed != 2 * generated => {
                return Err(format!(
                    "rule 60000 counted {} packets for {generated} frames:\n{}",
                    rule_packets(f, 60000) - allowed,
                    f.show()
                ));
            }
            Firewall::KeepState if f.states() != states => {
                return Err(format!(
                    "{} states after the counted frames, {states} before",
                    f.states()
                ));
            }
            _ => {}
        }
    }
    Ok((allocs, bytes, first))
}

/// The packet count of rule `num` in `ipfw show` (`00100 <packets> <bytes> <rule>`);
/// 0 if the rule is not listed.
fn rule_packets(f: &net::ipfw::Ipfw, num: u32) -> u64 {
    f.show()
        .lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next()?.parse::<u32>().ok()? == num).then(|| w.next()?.parse().ok())?
        })
        .unwrap_or(0)
}

fn forwarding_allocates_nothing_per_packet() {
    let mut failures = Vec::new();
    for fw in [
        Firewall::None,
        Firewall::TenMissesThenAllow,
        Firewall::KeepState,
    ] {
        for fam in [Family::V4, Family::V6] {
            let name = format!("{fam:?}, firewall {fw:?}");
            match case(fam, fw) {
                Ok((0, _, _)) => {
                    println!("{name}: {COUNTED_PACKETS} frames forwarded, 0 heap allocations")
                }
                Ok((allocs, bytes, first)) => {
                    println!(
                        "{name}: {allocs} heap allocations ({bytes} bytes) over {COUNTED_PACKETS} forwarded frames; the first from:"
                    );
                    match first {
                        Some(bt) => println!("{bt}"),
                        None => println!("  (no backtrace captured)"),
                    }
                    failures.push(format!("{name}: {allocs} allocations"));
                }
                Err(e) => {
                    println!("{name}: {e}");
                    failures.push(format!("{name}: {e}"));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "forwarding allocated or lost frames:\n{}",
        failures.join("\n")
    );
}

fn main() {
    forwarding_allocates_nothing_per_packet();
    println!("forwarding_allocates_nothing_per_packet: ok");
}
