//! The `router` demo: two LANs joined by a router running ipfw with dummynet pipes.
//!
//! ```text
//!   lan1 198.18.1.0/24 2001:2:1::/64          lan2 198.18.2.0/24 2001:2:2::/64
//!   alpha .10 ::10 ─┐                      ┌─ charlie .10 ::10
//!   bravo .11 ::11 ─┴─ em0 .1 [router] em1 .1 ─┘
//! ```
//!
//! The router's ruleset resets TCP to port 23 on lan2 and sends everything between
//! the LANs through two pipes (one each way) of `PIPE_BW_MBIT` and `PIPE_DELAY_MS`.
//! In virtual time, alpha pings (the pipes' delay shows in the RTT), sends a UDP
//! datagram over IPv6, traceroutes charlie, and sends it `transfer_bytes` over TCP;
//! bravo's telnet to charlie is reset by the firewall. Deterministic for a seed.

use crate::{describe, HostId, Sim, TraceRecord};
use dev::mem::WireConfig;
use dev::{Duration, Instant};
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// The pipes' bandwidth and delay, as the ruleset sets them.
pub const PIPE_BW_MBIT: u64 = 10;
pub const PIPE_DELAY_MS: u64 = 20;
/// Each LAN's own one-way delay.
pub const LAN_DELAY: Duration = Duration::from_micros(50);

/// The router's ruleset: what `ipfw show` lists after the run. Queues of 300 KB,
/// more than the transfer's window fills (in bytes: 200 slots would be beyond
/// FreeBSD's pipe_slot_limit of 100).
pub const RULES: &str = "\
pipe 1 config bw 10Mbit/s delay 20ms queue 300KB
pipe 2 config bw 10Mbit/s delay 20ms queue 300KB
add 100 reset tcp from any to 198.18.2.0/24 23 in
add 200 pipe 1 ip from any to any out xmit em1
add 300 pipe 2 ip from any to any in recv em1
add 400 allow ip from any to any
";

/// Demo settings.
#[derive(Clone, Debug)]
pub struct RouterConfig {
    pub seed: u64,
    pub workers: usize,
    /// Bytes alpha sends charlie over TCP.
    pub transfer_bytes: usize,
}

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig {
            seed: 1,
            workers: 1,
            transfer_bytes: 2_000_000,
        }
    }
}

/// One traceroute hop: who answered the probe of this TTL, how, and when.
#[derive(Clone, Debug, PartialEq)]
pub struct Hop {
    pub ttl: u8,
    pub from: Ipv4Addr,
    /// ICMP type and code: (11, 0) time exceeded, (3, 3) port unreachable.
    pub icmp: (u8, u8),
    /// From the probe leaving alpha to the answer reaching it.
    pub rtt: Duration,
}

/// What happened in a run; the network itself is kept for its tables.
pub struct RouterReport {
    pub sim: Sim,
    pub router: HostId,
    pub fw: Arc<net::ipfw::Ipfw>,
    /// Every frame, with the link it was sent on (`lan1`, `lan2`).
    pub frames: Vec<(&'static str, TraceRecord)>,
    /// alpha's echo RTT to the router's near address and to charlie (through the pipes).
    pub rtt_router: Option<Duration>,
    pub rtt_far: Option<Duration>,
    /// The UDP datagram alpha sent charlie over IPv6 came back intact.
    pub udp6_echoed: bool,
    pub traceroute: Vec<Hop>,
    /// What bravo's connect to charlie:23 ended with.
    pub telnet: Option<std::io::ErrorKind>,
    /// TCP transfer: bytes received, whether they were the bytes sent, and how long
    /// (from connect to the last byte).
    pub received: usize,
    pub intact: bool,
    pub transfer_time: Duration,
    pub transfer_bytes: usize,
}

impl std::fmt::Debug for RouterReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouterReport")
            .field("frames", &self.frames.len())
            .field("rtt_router", &self.rtt_router)
            .field("rtt_far", &self.rtt_far)
            .field("udp6_echoed", &self.udp6_echoed)
            .field("traceroute", &self.traceroute)
            .field("telnet", &self.telnet)
            .field("received", &self.received)
            .field("intact", &self.intact)
            .field("transfer_time", &self.transfer_time)
            .finish()
    }
}

impl RouterReport {
    /// The pipes' delay as measured: half of what they add to the RTT.
    pub fn pipe_delay(&self) -> Option<Duration> {
        let (near, far) = (self.rtt_router?, self.rtt_far?);
        Some(far.saturating_sub(near) / 2)
    }

    /// TCP goodput, in Mbit/s.
    pub fn goodput_mbit(&self) -> f64 {
        let s = self.transfer_time.as_secs_f64();
        if s > 0.0 {
            self.received as f64 * 8.0 / s / 1e6
        } else {
            0.0
        }
    }

    /// The traceroute as expected: the router, then charlie.
    pub fn traceroute_ok(&self) -> bool {
        self.traceroute
            .iter()
            .map(|h| (h.ttl, h.from, h.icmp))
            .eq([(1, ROUTER_LAN1, (11, 0)), (2, CHARLIE, (3, 3))])
    }

    pub fn ok(&self) -> bool {
        let delay_ok = self.pipe_delay().is_some_and(|d| {
            let want = PIPE_DELAY_MS as f64 / 1e3;
            (d.as_secs_f64() - want).abs() / want < 0.05
        });
        self.intact
            && self.received == self.transfer_bytes
            && self.telnet == Some(std::io::ErrorKind::ConnectionRefused)
            && self.udp6_echoed
            && self.traceroute_ok()
            && delay_ok
    }
}

pub const ALPHA: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 10);
pub const ROUTER_LAN1: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 1);
pub const CHARLIE: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 10);
pub const CHARLIE6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 2, 0, 0, 0, 0, 0x10);

/// The hosts: name, LAN, IPv4 and IPv6 addresses.
pub const HOSTS: [(&str, &str, &str, &str); 5] = [
    ("alpha", "lan1", "198.18.1.10/24", "2001:2:1::10/64"),
    ("bravo", "lan1", "198.18.1.11/24", "2001:2:1::11/64"),
    ("router", "lan1", "198.18.1.1/24", "2001:2:1::1/64"),
    ("router", "lan2", "198.18.2.1/24", "2001:2:2::1/64"),
    ("charlie", "lan2", "198.18.2.10/24", "2001:2:2::10/64"),
];

/// The demo's four hosts.
#[derive(Clone, Copy)]
struct Hosts {
    alpha: HostId,
    bravo: HostId,
    router: HostId,
    charlie: HostId,
}

/// (host, interface name) -> link, for sorting frames by link.
type Links = Vec<(String, String, &'static str)>;

/// Runs the demo.
pub fn run(cfg: &RouterConfig) -> Result<RouterReport, String> {
    let mut sim = Sim::new(cfg.seed);
    sim.enable_trace();
    let (h, links) = topology(&mut sim, cfg)?;
    let fw = net::ipfw::Ipfw::new(fw::RulesetConfig::default(), cfg.workers)?;
    fw.load(RULES)?;
    sim.host(h.router).attach_ipfw(&fw);

    let mut frames: Vec<TraceRecord> = Vec::new();
    // Duplicate address detection: the IPv6 addresses are usable once it is done.
    sim.run_for(Duration::from_secs(2));
    let (rtt_router, rtt_far) = pings(&mut sim, h)?;
    let udp6_echoed = udp6_echo(&mut sim, h)?;
    frames.extend(sim.take_trace());
    let traceroute = traceroute(&mut sim, h, &mut frames)?;
    let telnet = telnet(&mut sim, h)?;
    let (received, intact, transfer_time) = transfer(&mut sim, h, cfg)?;
    frames.extend(sim.take_trace());

    let frames = frames
        .into_iter()
        .map(|r| {
            let link = links
                .iter()
                .find(|l| l.0 == r.host && l.1 == r.ifname)
                .map_or("?", |l| l.2);
            (link, r)
        })
        .collect();
    Ok(RouterReport {
        sim,
        router: h.router,
        fw,
        frames,
        rtt_router,
        rtt_far,
        udp6_echoed,
        traceroute,
        telnet,
        received,
        intact,
        transfer_time,
        transfer_bytes: cfg.transfer_bytes,
    })
}

/// The LANs and hosts, their addresses, the router's forwarding and the others'
/// default routes through it.
fn topology(sim: &mut Sim, cfg: &RouterConfig) -> Result<(Hosts, Links), String> {
    let lan = || WireConfig {
        impair: dev::impair::Impairments {
            delay: LAN_DELAY,
            ..Default::default()
        },
        ..WireConfig::default()
    };
    let lans = [("lan1", sim.add_hub(lan())), ("lan2", sim.add_hub(lan()))];
    let h = Hosts {
        alpha: sim.add_host("alpha", cfg.workers),
        bravo: sim.add_host("bravo", cfg.workers),
        router: sim.add_host("router", cfg.workers),
        charlie: sim.add_host("charlie", cfg.workers),
    };
    let by_name = |n: &str| match n {
        "alpha" => h.alpha,
        "bravo" => h.bravo,
        "router" => h.router,
        _ => h.charlie,
    };
    let mut links: Links = Vec::new();
    for (host, lan_name, v4, v6) in HOSTS {
        let hid = by_name(host);
        let hub = lans
            .iter()
            .find(|l| l.0 == lan_name)
            .map_or(lans[0].1, |l| l.1);
        let ifname = if host == "router" && lan_name == "lan2" {
            "em1"
        } else {
            "em0"
        };
        let i = sim.connect_named(hid, hub, v4, ifname);
        let a6 = v6.parse().map_err(|e| format!("{v6}: {e}"))?;
        sim.host(hid)
            .add_address6(i, a6)
            .map_err(|e| format!("{host} {v6}: {e}"))?;
        links.push((host.to_string(), ifname.to_string(), lan_name));
    }
    for i in sim.host(h.router).interfaces() {
        sim.host(h.router)
            .set_forwarding(i.index, true, true)
            .map_err(|e| e.to_string())?;
    }
    let via = |s: &Sim, h: HostId, dst: &str, gw: &str| -> Result<(), String> {
        let d: route::IpPrefix = dst.parse().map_err(|e| format!("{dst}: {e:?}"))?;
        let g: IpAddr = gw.parse().map_err(|e| format!("{gw}: {e}"))?;
        s.host(h)
            .add_route_via(d, g)
            .map_err(|e| format!("{dst} via {gw}: {e}"))
    };
    for (host, gw4, gw6) in [
        (h.alpha, "198.18.1.1", "2001:2:1::1"),
        (h.bravo, "198.18.1.1", "2001:2:1::1"),
        (h.charlie, "198.18.2.1", "2001:2:2::1"),
    ] {
        via(sim, host, "0.0.0.0/0", gw4)?;
        via(sim, host, "::/0", gw6)?;
    }
    Ok((h, links))
}

/// Ping: the router's near address, then charlie through both pipes. The first
/// echo of each resolves the neighbours; the second is the one measured.
fn pings(sim: &mut Sim, h: Hosts) -> Result<(Option<Duration>, Option<Duration>), String> {
    let ping = sim
        .host(h.alpha)
        .ping_socket(0x4d50)
        .map_err(|e| e.to_string())?;
    ping.set_nonblocking(true).map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 65536];
    let mut rtt = |sim: &mut Sim, to: Ipv4Addr, seq: u16| -> Option<Duration> {
        while ping.recv_reply(&mut buf).is_ok() {}
        let t0 = sim.now();
        ping.send_echo(to, seq, &[0x5a; 56]).ok()?;
        let mut got = false;
        sim.run_until(Duration::from_secs(1), |_| {
            got |= ping.recv_reply(&mut buf).is_ok_and(|r| r.seq == seq);
            got
        });
        let rtt = got.then(|| sim.now().saturating_duration_since(t0));
        sim.run_for(Duration::from_millis(100));
        rtt
    };
    rtt(sim, ROUTER_LAN1, 1);
    rtt(sim, CHARLIE, 2);
    let rtt_router = rtt(sim, ROUTER_LAN1, 3);
    let rtt_far = rtt(sim, CHARLIE, 4);
    Ok((rtt_router, rtt_far))
}

/// UDP over IPv6: alpha to charlie's echo port, and back.
fn udp6_echo(sim: &mut Sim, h: Hosts) -> Result<bool, String> {
    let echo = sim
        .host(h.charlie)
        .udp_bind(SocketAddr::from((Ipv6Addr::UNSPECIFIED, 7)))
        .map_err(|e| e.to_string())?;
    echo.set_nonblocking(true).map_err(|e| e.to_string())?;
    let c6 = sim
        .host(h.alpha)
        .udp_bind(SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)))
        .map_err(|e| e.to_string())?;
    c6.set_nonblocking(true).map_err(|e| e.to_string())?;
    let msg = b"hello over IPv6";
    let _ = c6.send_to(msg, SocketAddr::from((CHARLIE6, 7)));
    Ok(sim.run_until(Duration::from_secs(2), |_| {
        let mut b = [0u8; 64];
        while let Ok((n, from)) = echo.recv_from(&mut b) {
            let _ = echo.send_to(&b[..n], from);
        }
        matches!(c6.recv_from(&mut b), Ok((n, _)) if &b[..n] == msg)
    }))
}

/// traceroute: one UDP probe per TTL to an unused port, until one reaches it.
fn traceroute(sim: &mut Sim, h: Hosts, frames: &mut Vec<TraceRecord>) -> Result<Vec<Hop>, String> {
    let probe = sim
        .host(h.alpha)
        .udp_bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)))
        .map_err(|e| e.to_string())?;
    let mut traceroute = Vec::new();
    for ttl in 1..=4u8 {
        let port = 33433 + u16::from(ttl);
        probe.set_ttl(u32::from(ttl)).map_err(|e| e.to_string())?;
        let sent = sim.now();
        let _ = probe.send_to(b"traceroute probe", SocketAddr::from((CHARLIE, port)));
        sim.run_for(Duration::from_millis(200));
        let t = sim.take_trace();
        let hop = t
            .iter()
            .find_map(|r| icmp_answer(r, port))
            .map(|(at, from, icmp)| Hop {
                ttl,
                from,
                icmp,
                rtt: (at + LAN_DELAY).saturating_duration_since(sent),
            });
        frames.extend(t);
        let last = hop.as_ref().is_none_or(|h| h.icmp != (11, 0));
        traceroute.extend(hop);
        if last {
            break;
        }
    }
    Ok(traceroute)
}

/// The firewall: bravo's telnet to charlie (who listens) is reset by rule 100.
fn telnet(sim: &mut Sim, h: Hosts) -> Result<Option<std::io::ErrorKind>, String> {
    let telnet_srv = sim
        .host(h.charlie)
        .tcp_listen(SocketAddr::from((CHARLIE, 23)), 8)
        .map_err(|e| e.to_string())?;
    telnet_srv
        .set_nonblocking(true)
        .map_err(|e| e.to_string())?;
    let telnet_cli = sim
        .host(h.bravo)
        .tcp_connect_nonblocking(SocketAddr::from((CHARLIE, 23)))
        .map_err(|e| e.to_string())?;
    let mut telnet = None;
    sim.run_until(Duration::from_secs(2), |_| {
        telnet = telnet_cli.take_error().ok().flatten().map(|e| e.kind());
        telnet.is_some()
    });
    Ok(telnet)
}

/// TCP: alpha sends charlie a seeded pattern through pipe 1: the bytes received,
/// whether they are those sent, all of them, and the time they took.
fn transfer(
    sim: &mut Sim,
    h: Hosts,
    cfg: &RouterConfig,
) -> Result<(usize, bool, Duration), String> {
    let mut rng = dev::rng::Rng::new(cfg.seed ^ 0x7472_616e_7366_6572);
    let data: Vec<u8> = (0..cfg.transfer_bytes)
        .map(|_| rng.next_u32() as u8)
        .collect();
    let l = sim
        .host(h.charlie)
        .tcp_listen(SocketAddr::from((CHARLIE, 5001)), 8)
        .map_err(|e| e.to_string())?;
    l.set_nonblocking(true).map_err(|e| e.to_string())?;
    let start = sim.now();
    let c = sim
        .host(h.alpha)
        .tcp_connect_nonblocking(SocketAddr::from((CHARLIE, 5001)))
        .map_err(|e| e.to_string())?;
    c.set_nonblocking(true).map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 65536];
    let (mut sent, mut received, mut intact) = (0usize, 0usize, true);
    let mut srv = None;
    let mut end = start;
    // Twice the time the pipe needs, and some: a stalled transfer ends, and fails.
    let limit = start
        + Duration::from_secs(10)
        + Duration::from_secs_f64(
            2.0 * cfg.transfer_bytes as f64 * 8.0 / (PIPE_BW_MBIT as f64 * 1e6),
        );
    while received < data.len() && sim.now() < limit {
        while sent < data.len() {
            match (&c).write(&data[sent..]) {
                Ok(n) if n > 0 => sent += n,
                _ => break,
            }
        }
        sim.run_for(Duration::from_millis(1));
        if srv.is_none() {
            srv = l.accept().ok().map(|(s, _)| s);
            if let Some(s) = &srv {
                s.set_nonblocking(true).map_err(|e| e.to_string())?;
            }
        }
        if let Some(mut s) = srv.as_ref() {
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    break;
                }
                intact &= data.get(received..received + n) == Some(&buf[..n]);
                received += n;
                end = sim.now();
            }
        }
    }
    let _ = c.shutdown(std::net::Shutdown::Both);
    sim.run_for(Duration::from_millis(500));
    Ok((
        received,
        intact && received == data.len(),
        end.saturating_duration_since(start),
    ))
}

/// A frame the router sends alpha on lan1 answering the probe to `port`: when it
/// left, from whom, and its ICMP type and code.
fn icmp_answer(r: &TraceRecord, port: u16) -> Option<(Instant, Ipv4Addr, (u8, u8))> {
    if r.host != "router" || r.ifname != "em0" {
        return None;
    }
    let f = &r.frame;
    let ip = f.get(14..).filter(|_| f.get(12..14) == Some(&[8, 0]))?;
    let hl = usize::from(ip.first()? & 15) * 4;
    let dst = Ipv4Addr::new(*ip.get(16)?, *ip.get(17)?, *ip.get(18)?, *ip.get(19)?);
    if *ip.get(9)? != 1 || dst != ALPHA {
        return None;
    }
    let icmp = ip.get(hl..)?;
    let (ty, code) = (*icmp.first()?, *icmp.get(1)?);
    // The quoted datagram: its IP header, then the probe's UDP ports.
    let quoted = icmp.get(8..)?;
    let qhl = usize::from(quoted.first()? & 15) * 4;
    let qport = u16::from_be_bytes([*quoted.get(qhl + 2)?, *quoted.get(qhl + 3)?]);
    let from = Ipv4Addr::new(*ip.get(12)?, *ip.get(13)?, *ip.get(14)?, *ip.get(15)?);
    (qport == port && matches!((ty, code), (11, 0) | (3, 3))).then_some((r.time, from, (ty, code)))
}

/// A frame as one line: time, link, sender, what.
pub fn frame_line(link: &str, r: &TraceRecord) -> String {
    format!(
        "{:>10} {link:<5} {:<8} {}",
        r.time.to_string(),
        r.host,
        describe(&r.frame)
    )
}
