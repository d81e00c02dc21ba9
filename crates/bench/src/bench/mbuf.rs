//! `mpstack bench mbuf`: the m_pulldown paper (Itojun, Freenix 2000) on our own input
//! path. Traffic mixes are fed, frame by frame, through a real `Stack` (Ethernet,
//! IPv4/IPv6 input, the extension-header chain, ICMP/ICMPv6, UDP, TCP) three times:
//! with headers made contiguous by `pulldown`, by `pullup` and by `pullup2`
//! (`StackConfig::hdr_access`). Every packet is laid out as NetBSD's `m_devget` lays
//! it out (one small buffer up to MHLEN, two up to MHLEN + MLEN, clusters beyond),
//! the layout the paper measured. The counters are the paper's Table 2 columns:
//! length checks, calls, buffer allocations, copies (and the bytes they moved), and
//! failures.
//!
//! The stack runs in this thread (no worker thread: `Stack::poll`), so the mbuf
//! counters, which are per thread, are exactly this input path's.

use super::progress;
use crate::BenchArgs;
use dev::{Device, DeviceInfo, Instant, Queue, QueueStats};
use mbuf::stats::{self, PullStats};
use mbuf::Mbuf;
use net::hdr::HdrAccess;
use net::{IfConfig, IfIndex, Stack, StackConfig};
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use wire::checksum;
use wire::IpProtocol;

const NODE_MAC: [u8; 6] = [0x02, 0x6d, 0x70, 0, 0, 2];
const PEER_MAC: [u8; 6] = [0x02, 0x6d, 0x70, 0, 0, 1];

fn node6() -> Ipv6Addr {
    "2001:2::2".parse().expect("address")
}
fn peer6() -> Ipv6Addr {
    "2001:2::1".parse().expect("address")
}
const NODE4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const PEER4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);

/// The paper's node B: the routing-header packet's destination. Configured on the
/// in-process bench stack only; nothing is ever sent on a network.
const PAPER_B: &str = "2001:240:0:200:a00:5aff:fe38:6f86/64";
fn paper_a() -> Ipv6Addr {
    "2001:240:0:200:260:97ff:fe07:69ea"
        .parse()
        .expect("address")
}

/// A traffic mix: IP packets (no link header), fed in turn.
pub struct Mix {
    pub name: &'static str,
    pub what: &'static str,
    pub packets: Vec<Vec<u8>>,
}

/// An upper-layer message with its checksum filled in (`at`: the checksum's offset;
/// `pseudo`: whether the pseudo-header is summed, i.e. not ICMPv4).
fn fill(mut msg: Vec<u8>, at: usize, pseudo: Option<(IpAddr, IpAddr, IpProtocol)>) -> Vec<u8> {
    msg[at..at + 2].copy_from_slice(&[0, 0]);
    let mut parts = vec![checksum::data(&msg)];
    if let Some((s, d, p)) = pseudo {
        parts.push(checksum::pseudo_header(&s, &d, p, msg.len() as u32));
    }
    let sum = !checksum::combine(&parts);
    msg[at..at + 2].copy_from_slice(&sum.to_be_bytes());
    msg
}

/// TCP: a segment with the timestamp option (12 bytes) and `data` bytes, to a
/// closed port (the node answers with a reset).
fn tcp(data: usize) -> Vec<u8> {
    let mut t = vec![0u8; 32 + data];
    t[0..2].copy_from_slice(&40000u16.to_be_bytes());
    t[2..4].copy_from_slice(&5001u16.to_be_bytes());
    t[4..8].copy_from_slice(&1000u32.to_be_bytes());
    t[8..12].copy_from_slice(&2000u32.to_be_bytes());
    t[12] = 8 << 4;
    t[13] = 0x10; // ACK
    t[14..16].copy_from_slice(&65535u16.to_be_bytes());
    t[20..32].copy_from_slice(&[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
    for (i, b) in t[32..].iter_mut().enumerate() {
        *b = i as u8;
    }
    t
}

/// UDP with `data` bytes, to a closed port.
fn udp(data: usize) -> Vec<u8> {
    let mut u = vec![0u8; 8 + data];
    u[0..2].copy_from_slice(&40000u16.to_be_bytes());
    u[2..4].copy_from_slice(&9999u16.to_be_bytes());
    u[4..6].copy_from_slice(&((8 + data) as u16).to_be_bytes());
    u
}

/// An ICMP or ICMPv6 echo request with `data` bytes.
fn echo(v6: bool, data: usize) -> Vec<u8> {
    let mut e = vec![0u8; 8 + data];
    e[0] = if v6 { 128 } else { 8 };
    e[4..8].copy_from_slice(&[0, 7, 0, 1]);
    e
}

/// An IPv6 packet: header, the extension headers `ext` (first header `first`, the
/// last naming `proto`), then `upper` with its checksum filled.
fn ip6(proto: IpProtocol, ext: &[u8], first: u8, upper: Vec<u8>) -> Vec<u8> {
    let at = match proto {
        IpProtocol::Tcp => 16,
        IpProtocol::Udp => 6,
        _ => 2,
    };
    let upper = fill(
        upper,
        at,
        Some((IpAddr::V6(peer6()), IpAddr::V6(node6()), proto)),
    );
    let mut p = vec![0u8; 40];
    p[0] = 0x60;
    p[4..6].copy_from_slice(&((ext.len() + upper.len()) as u16).to_be_bytes());
    p[6] = if ext.is_empty() {
        u8::from(proto)
    } else {
        first
    };
    p[7] = 64;
    p[8..24].copy_from_slice(&peer6().octets());
    p[24..40].copy_from_slice(&node6().octets());
    p.extend_from_slice(ext);
    p.extend_from_slice(&upper);
    p
}

/// An IPv4 packet with `upper` (checksum filled).
fn ip4(proto: IpProtocol, upper: Vec<u8>) -> Vec<u8> {
    let (at, pseudo) = match proto {
        IpProtocol::Tcp => (16, true),
        IpProtocol::Udp => (6, true),
        _ => (2, false),
    };
    let upper = fill(
        upper,
        at,
        pseudo.then_some((IpAddr::V4(PEER4), IpAddr::V4(NODE4), proto)),
    );
    let mut p = vec![0u8; 20];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&((20 + upper.len()) as u16).to_be_bytes());
    p[8] = 64;
    p[9] = u8::from(proto);
    p[12..16].copy_from_slice(&PEER4.octets());
    p[16..20].copy_from_slice(&NODE4.octets());
    let s = !checksum::data(&p);
    p[10..12].copy_from_slice(&s.to_be_bytes());
    p.extend_from_slice(&upper);
    p
}

/// Hop-by-hop (8 bytes: PadN) then destination options (24 bytes: PadN), the last
/// naming `proto`: 32 bytes of extension headers, a common layout with options.
fn ext_chain(proto: IpProtocol) -> Vec<u8> {
    let mut e = vec![60, 0, 1, 4, 0, 0, 0, 0];
    e.extend_from_slice(&[u8::from(proto), 2, 1, 20]);
    e.extend_from_slice(&[0u8; 20]);
    e
}

/// The mixes, each with packets of three sizes: one small buffer, two small buffers,
/// clusters (m_devget's three layouts).
pub fn mixes() -> Vec<Mix> {
    let hbh = u8::from(IpProtocol::HopByHop);
    let v6 = |p: IpProtocol, ext: bool, up: Vec<u8>| {
        let e = if ext { ext_chain(p) } else { Vec::new() };
        ip6(p, &e, hbh, up)
    };
    let mut rthdr0_left0 = wire::sample::rthdr0_icmp6_echo();
    rthdr0_left0[43] = 0;
    vec![
        Mix {
            name: "tcp6",
            what: "TCP/IPv6, timestamps, 0/96/1408 bytes of data",
            packets: vec![v6(IpProtocol::Tcp, false, tcp(0)), v6(IpProtocol::Tcp, false, tcp(96)), v6(IpProtocol::Tcp, false, tcp(1408))],
        },
        Mix {
            name: "tcp6+ext",
            what: "the same behind hop-by-hop and destination options (32 bytes)",
            packets: vec![v6(IpProtocol::Tcp, true, tcp(0)), v6(IpProtocol::Tcp, true, tcp(96)), v6(IpProtocol::Tcp, true, tcp(1376))],
        },
        Mix {
            name: "udp6",
            what: "UDP/IPv6, 8/120/1200 bytes of data",
            packets: vec![v6(IpProtocol::Udp, false, udp(8)), v6(IpProtocol::Udp, false, udp(120)), v6(IpProtocol::Udp, false, udp(1200))],
        },
        Mix {
            name: "udp6+ext",
            what: "the same behind hop-by-hop and destination options",
            packets: vec![v6(IpProtocol::Udp, true, udp(8)), v6(IpProtocol::Udp, true, udp(120)), v6(IpProtocol::Udp, true, udp(1200))],
        },
        Mix {
            name: "icmp6",
            what: "ICMPv6 echo requests, 16/120/1200 bytes of data",
            packets: vec![v6(IpProtocol::Icmpv6, false, echo(true, 16)), v6(IpProtocol::Icmpv6, false, echo(true, 120)), v6(IpProtocol::Icmpv6, false, echo(true, 1200))],
        },
        Mix {
            name: "icmp6+ext",
            what: "the same behind hop-by-hop and destination options",
            packets: vec![v6(IpProtocol::Icmpv6, true, echo(true, 16)), v6(IpProtocol::Icmpv6, true, echo(true, 120)), v6(IpProtocol::Icmpv6, true, echo(true, 1200))],
        },
        Mix {
            name: "rthdr0",
            what: "the paper's packet: routing header type 0, 4 addresses, segments left 4 (128 bytes, two buffers)",
            packets: vec![wire::sample::rthdr0_icmp6_echo()],
        },
        Mix {
            name: "rthdr0-left0",
            what: "the same with segments left 0: the header is skipped, the echo answered",
            packets: vec![rthdr0_left0],
        },
        Mix {
            name: "tcp4",
            what: "TCP/IPv4, timestamps, 0/96/1408 bytes of data",
            packets: vec![ip4(IpProtocol::Tcp, tcp(0)), ip4(IpProtocol::Tcp, tcp(96)), ip4(IpProtocol::Tcp, tcp(1408))],
        },
        Mix {
            name: "udp4",
            what: "UDP/IPv4, 8/120/1200 bytes of data",
            packets: vec![ip4(IpProtocol::Udp, udp(8)), ip4(IpProtocol::Udp, udp(120)), ip4(IpProtocol::Udp, udp(1200))],
        },
        Mix {
            name: "icmp4",
            what: "ICMP echo requests, 16/120/1200 bytes of data",
            packets: vec![ip4(IpProtocol::Icmp, echo(false, 16)), ip4(IpProtocol::Icmp, echo(false, 120)), ip4(IpProtocol::Icmp, echo(false, 1200))],
        },
    ]
}

/// A device whose receive queue replays the frames put into `rx`, and whose
/// transmit side counts and drops.
struct Replay {
    rx: Arc<Mutex<VecDeque<Mbuf>>>,
}

struct ReplayQueue {
    rx: Arc<Mutex<VecDeque<Mbuf>>>,
    stats: QueueStats,
}

impl Device for Replay {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            name: "replay0".into(),
            mtu: 1500,
            num_queues: 1,
            hw_addr: Some(NODE_MAC),
            offload: dev::Offloads::default(),
        }
    }
    fn into_queues(self: Box<Self>) -> Vec<Box<dyn Queue>> {
        vec![Box::new(ReplayQueue {
            rx: self.rx,
            stats: QueueStats::default(),
        })]
    }
}

impl Queue for ReplayQueue {
    fn rx_burst(&mut self, _now: Instant, out: &mut Vec<Mbuf>, max: usize) -> usize {
        let mut q = self.rx.lock().unwrap_or_else(|e| e.into_inner());
        let n = max.min(q.len());
        out.extend(q.drain(..n));
        self.stats.ipackets += n as u64;
        n
    }
    fn tx_burst(&mut self, _now: Instant, pkts: &mut Vec<Mbuf>) -> usize {
        let n = pkts.len();
        self.stats.opackets += n as u64;
        pkts.clear();
        n
    }
    fn stats(&self) -> QueueStats {
        self.stats
    }
}

/// One mix through one strategy.
#[derive(Clone, Debug)]
pub struct Row {
    pub mix: &'static str,
    pub access: HdrAccess,
    pub packets: u64,
    pub stats: PullStats,
    /// Packets the IP layers delivered to a protocol (ip.delivered + ip6.delivered).
    pub delivered: u64,
    /// Frames the node sent back: every packet of every mix asks for an answer (an
    /// echo reply, a reset, a port unreachable, a parameter problem), so this counts
    /// the packets the input path got all the way through.
    pub answered: u64,
    /// Nanoseconds per packet: its m_devget layout made, the input path, the answer.
    pub ns_per_packet: f64,
}

fn access_name(a: HdrAccess) -> &'static str {
    match a {
        HdrAccess::Pulldown => "pulldown",
        HdrAccess::Pullup => "pullup",
        HdrAccess::Pullup2 => "pullup2",
    }
}

fn pick(s: &mbuf::MbufStats, a: HdrAccess) -> PullStats {
    match a {
        HdrAccess::Pulldown => s.pulldown,
        HdrAccess::Pullup => s.pullup,
        HdrAccess::Pullup2 => s.pullup2,
    }
}

/// Feeds `n` packets of `mix` (in turn) through a stack reading headers with `a`.
pub fn run(mix: &Mix, a: HdrAccess, n: u64) -> Result<Row, String> {
    let rx = Arc::new(Mutex::new(VecDeque::new()));
    let mut stack = Stack::new(StackConfig {
        name: "bench-mbuf".into(),
        workers: 1,
        hdr_access: a,
        dad_transmits: 0,
        // Errors are answered at most this often: high, so each one runs its path.
        icmp_limit: u32::MAX,
        ..StackConfig::default()
    });
    let ifi = stack
        .add_interface(
            Box::new(Replay { rx: rx.clone() }),
            IfConfig {
                addrs: vec!["198.18.0.2/24".parse().map_err(|e| format!("{e:?}"))?],
                ..IfConfig::default()
            },
        )
        .map_err(|e| e.to_string())?;
    for a6 in ["2001:2::2/64", PAPER_B] {
        stack
            .add_address6(ifi, a6.parse().map_err(|e| format!("{e:?}"))?)
            .map_err(|e| e.to_string())?;
    }
    stack.set_default_gateway6(Some((peer6(), IfIndex(0))));
    {
        let ifp = &stack.interfaces()[0];
        let mac = wire::EthernetAddress(PEER_MAC);
        ifp.arp.insert_static(PEER4, mac);
        ifp.nd6.insert_static(peer6(), mac);
        ifp.nd6.insert_static(paper_a(), mac);
    }
    // Duplicate address detection is off: one poll makes the addresses usable.
    let mut now = Instant::from_secs(1);
    stack.poll(now);
    let frames: Vec<Vec<u8>> = mix.packets.clone();
    const BATCH: u64 = 256;
    let feed = |stack: &mut Stack, now: &mut Instant, from: u64, k: u64| -> Result<(), String> {
        let mut batch = VecDeque::with_capacity(k as usize);
        for i in 0..k {
            let p = &frames[((from + i) % frames.len() as u64) as usize];
            // m_devget's layout for the IP packet; the link header in front of it
            // goes in a buffer of its own, which ether_input's trim removes whole.
            let mut m = Mbuf::devget(p).map_err(|e| e.to_string())?;
            let h = m.prepend(14).map_err(|e| e.to_string())?;
            h[..6].copy_from_slice(&NODE_MAC);
            h[6..12].copy_from_slice(&PEER_MAC);
            let ty: u16 = if p[0] >> 4 == 6 { 0x86dd } else { 0x0800 };
            h[12..14].copy_from_slice(&ty.to_be_bytes());
            batch.push_back(m);
        }
        *rx.lock().unwrap_or_else(|e| e.into_inner()) = batch;
        while !rx.lock().unwrap_or_else(|e| e.into_inner()).is_empty() {
            *now += dev::Duration::from_micros(1);
            stack.poll(*now);
        }
        stack.poll(*now);
        Ok(())
    };
    // A warm-up round grows the buffer pool and the tables, so that the measured
    // rounds find them at their working size.
    feed(&mut stack, &mut now, 0, n.min(BATCH))?;
    let before = stack.stats();
    let sent_before: u64 = stack.queue_stats().iter().map(|q| q.2.opackets).sum();
    stats::reset();
    let mut fed = 0u64;
    let mut elapsed = std::time::Duration::ZERO;
    while fed < n {
        let k = BATCH.min(n - fed);
        // Timed with the making of the m_devget layouts, the same work for the
        // three strategies.
        let t = std::time::Instant::now();
        feed(&mut stack, &mut now, fed, k)?;
        elapsed += t.elapsed();
        fed += k;
    }
    let after = stack.stats();
    let answered = stack
        .queue_stats()
        .iter()
        .map(|q| q.2.opackets)
        .sum::<u64>()
        - sent_before;
    let s = pick(&stats::snapshot(), a);
    let delivered = (after.ip.delivered + after.ip6.delivered)
        .saturating_sub(before.ip.delivered + before.ip6.delivered);
    Ok(Row {
        mix: mix.name,
        access: a,
        packets: n,
        stats: s,
        delivered,
        answered,
        ns_per_packet: elapsed.as_nanos() as f64 / n.max(1) as f64,
    })
}

pub fn main(a: &BenchArgs) -> Result<ExitCode, String> {
    let n = a.packets;
    let mut rows = Vec::new();
    let all = mixes();
    for (i, mix) in all.iter().enumerate() {
        progress(
            a,
            &format!(
                "mbuf: mix {}/{}: {} ({n} packets x 3 strategies)",
                i + 1,
                all.len(),
                mix.name
            ),
        );
        for acc in [HdrAccess::Pulldown, HdrAccess::Pullup, HdrAccess::Pullup2] {
            rows.push(run(mix, acc, n)?);
        }
    }
    if a.json {
        for r in &rows {
            let s = r.stats;
            println!(
                "{{\"bench\":\"mbuf\",\"mix\":\"{}\",\"access\":\"{}\",\"packets\":{},\"len_checks\":{},\"calls\":{},\"allocs\":{},\"copies\":{},\"bytes_copied\":{},\"fails\":{},\"delivered\":{},\"answered\":{},\"ns_per_packet\":{:.1}}}",
                r.mix,
                access_name(r.access),
                r.packets,
                s.len_checks,
                s.calls,
                s.allocs,
                s.copies,
                s.bytes_copied,
                s.fails,
                r.delivered,
                r.answered,
                r.ns_per_packet
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    println!("Table 2 of the m_pulldown paper on mpstack's input path ({n} packets per mix, m_devget layouts)\n");
    println!(
        "{:<13} {:>7} | {:>6} {:>6} {:>6} {:>8} {:>5} | {:>6} {:>6} {:>6} {:>6} | {:>6} {:>6} {:>8} | {:>6} {:>6} {:>6}",
        "mix", "checks", "pd call", "alloc", "copy", "bytes", "ns", "pu alloc", "copy", "fail", "ns",
        "pu2 alc", "copy", "bytes", "ns", "answrd", "pu ans"
    );
    for chunk in rows.chunks(3) {
        let (pd, pu, pu2) = (&chunk[0], &chunk[1], &chunk[2]);
        println!(
            "{:<13} {:>7} | {:>7} {:>6} {:>6} {:>8} {:>5.0} | {:>8} {:>6} {:>6} {:>6.0} | {:>7} {:>6} {:>8} | {:>6.0} {:>6} {:>6}",
            pd.mix,
            pd.stats.len_checks,
            pd.stats.calls,
            pd.stats.allocs,
            pd.stats.copies,
            pd.stats.bytes_copied,
            pd.ns_per_packet,
            pu.stats.allocs,
            pu.stats.copies,
            pu.stats.fails,
            pu.ns_per_packet,
            pu2.stats.allocs,
            pu2.stats.copies,
            pu2.stats.bytes_copied,
            pu2.ns_per_packet,
            pd.answered,
            pu.answered,
        );
    }
    println!("\n(checks: length checks on pulldown's run; pd/pu/pu2: pulldown, pullup, pullup2; ns: per packet, making its m_devget layout, the input path and the answer; answrd: packets answered (every packet asks for an answer) with pulldown, pu ans: with pullup, whose failures drop packets)");
    for m in &all {
        println!("  {:<13} {}", m.name, m.what);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_findings_hold_on_our_path() {
        let _quiet = crate::bench::heap_quiet();
        let all = mixes();
        let get = |name: &str, a: HdrAccess| {
            let m = all.iter().find(|m| m.name == name).unwrap();
            run(m, a, 30).unwrap()
        };
        for name in ["tcp6", "tcp6+ext", "udp6+ext", "icmp6+ext", "rthdr0-left0"] {
            let pd = get(name, HdrAccess::Pulldown);
            let pu2 = get(name, HdrAccess::Pullup2);
            assert!(
                pd.stats.copies <= pu2.stats.copies,
                "{name}: {pd:?} {pu2:?}"
            );
            assert!(pd.stats.bytes_copied <= pu2.stats.bytes_copied, "{name}");
            assert_eq!(
                pd.answered, 30,
                "{name}: every packet answered with pulldown"
            );
        }
        // pullup fails on IPv6 headers that end past MHLEN (96 bytes).
        let pu = get("tcp6+ext", HdrAccess::Pullup);
        assert!(pu.stats.fails > 0, "{pu:?}");
        // TCP over IPv6: at least three length checks a packet (IPv6 header, TCP
        // header, TCP header with options), as the paper counted.
        let pd = get("tcp6", HdrAccess::Pulldown);
        assert!(pd.stats.len_checks >= 3 * 30, "{pd:?}");
        // The routing-header packet in two buffers, segments left 0: pulldown copies
        // nothing (the echo lies in the second buffer), pullup2 copies.
        let pd = get("rthdr0-left0", HdrAccess::Pulldown);
        let pu2 = get("rthdr0-left0", HdrAccess::Pullup2);
        assert_eq!(pd.stats.copies, 0, "{pd:?}");
        assert!(pu2.stats.copies >= 30, "{pu2:?}");
    }
}
