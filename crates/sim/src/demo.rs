//! The demo networks that `mpstack demo` runs, deterministic for a given seed: here
//! `lan`, three hosts on one segment (ARP, ping, UDP echo, an unanswered port); in
//! [`router`], two LANs joined by a router with a firewall and a pipe.

pub mod router;

use crate::{describe, Sim};
use dev::mem::WireConfig;
use dev::Duration;
use net::Stats;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddrV4};

/// Demo settings.
#[derive(Clone, Debug)]
pub struct DemoConfig {
    pub seed: u64,
    pub workers: usize,
    pub pings: u16,
    pub ping_size: usize,
    /// Frames lost on the hub, as a probability (0 by default).
    pub loss: f64,
}

impl Default for DemoConfig {
    fn default() -> Self {
        DemoConfig {
            seed: 1,
            workers: 1,
            pings: 3,
            ping_size: 56,
            loss: 0.0,
        }
    }
}

/// What happened in a demo run.
#[derive(Clone, Debug, Default)]
pub struct DemoReport {
    /// One line per frame on the wire: time, sender, description.
    pub trace: Vec<String>,
    pub pings_sent: u32,
    pub pings_received: u32,
    pub udp_echoed: bool,
    pub port_unreachable_seen: bool,
    pub hosts: Vec<(String, String, Stats)>,
    pub arp: Vec<(String, Vec<net::arp::ArpEntry>)>,
    /// Raw frames, for a pcap file.
    pub frames: Vec<(dev::Instant, Vec<u8>)>,
}

impl DemoReport {
    pub fn ok(&self) -> bool {
        self.pings_sent > 0
            && self.pings_received == self.pings_sent
            && self.udp_echoed
            && self.port_unreachable_seen
    }
}

pub const NET: &str = "198.18.0.0/24";

/// Runs the demo.
pub fn run(cfg: &DemoConfig) -> DemoReport {
    let mut sim = Sim::new(cfg.seed);
    sim.enable_trace();
    let hub = sim.add_hub(WireConfig {
        impair: dev::impair::Impairments {
            delay: Duration::from_micros(50),
            loss: cfg.loss,
            ..Default::default()
        },
        ..WireConfig::default()
    });
    let names = ["alpha", "bravo", "charlie"];
    let hosts: Vec<_> = names.iter().map(|n| sim.add_host(n, cfg.workers)).collect();
    for (i, h) in hosts.iter().enumerate() {
        sim.connect(*h, hub, &format!("198.18.0.{}/24", i + 1));
    }
    let addr = |i: usize| Ipv4Addr::new(198, 18, 0, i as u8 + 1);
    let mut rep = DemoReport::default();

    // charlie: a UDP echo service on port 7.
    let echo = sim
        .host(hosts[2])
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7))
        .expect("bind echo");
    echo.set_nonblocking(true).expect("nonblocking");

    // alpha pings bravo and charlie.
    let ping = sim.host(hosts[0]).ping_socket(0x4d50).expect("ping socket");
    ping.set_nonblocking(true).expect("nonblocking");
    let data: Vec<u8> = (0..cfg.ping_size).map(|i| i as u8).collect();
    let mut buf = vec![0u8; 65536];
    for seq in 1..=cfg.pings {
        for target in [1usize, 2] {
            if ping.send_echo(addr(target), seq, &data).is_ok() {
                rep.pings_sent += 1;
            }
        }
        sim.run_for(Duration::from_millis(100));
        while let Ok(r) = ping.recv_reply(&mut buf) {
            if r.len == data.len() && buf[..r.len] == data[..] {
                rep.pings_received += 1;
            }
        }
    }
    // Replies still in flight after the last round.
    sim.run_for(Duration::from_millis(500));
    while let Ok(r) = ping.recv_reply(&mut buf) {
        if r.len == data.len() && buf[..r.len] == data[..] {
            rep.pings_received += 1;
        }
    }

    // alpha sends a datagram to charlie's echo service and waits for it back.
    let client = sim
        .host(hosts[0])
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))
        .expect("bind client");
    client.set_nonblocking(true).expect("nonblocking");
    let msg = b"hello from alpha";
    let _ = client.send_to(msg, SocketAddrV4::new(addr(2), 7));
    let done = sim.run_until(Duration::from_secs(5), |_| {
        while let Ok((n, from)) = echo.recv_from(&mut buf) {
            let _ = echo.send_to(&buf[..n], from);
        }
        let mut b = [0u8; 64];
        matches!(client.recv_from(&mut b), Ok((n, _)) if &b[..n] == msg)
    });
    rep.udp_echoed = done;

    // bravo sends to a port nobody listens on: charlie answers port unreachable.
    let lone = sim
        .host(hosts[1])
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))
        .expect("bind");
    let _ = lone.send_to(b"anyone?", SocketAddrV4::new(addr(2), 9999));
    sim.run_for(Duration::from_millis(100));
    rep.port_unreachable_seen = sim.host(hosts[2]).stats().icmp.outunreach > 0
        && sim.host(hosts[1]).stats().icmp.inunreach > 0;

    for r in sim.take_trace() {
        let mut line = String::new();
        let _ = write!(
            line,
            "{:>10} {:<8} {}",
            format!("{}", r.time),
            r.host,
            describe(&r.frame)
        );
        rep.trace.push(line);
        rep.frames.push((r.time, r.frame));
    }
    for (i, h) in hosts.iter().enumerate() {
        let s = sim.host(*h);
        rep.hosts
            .push((s.name().to_string(), format!("{}/24", addr(i)), s.stats()));
        let arp = s
            .interfaces()
            .iter()
            .flat_map(|i| i.arp.entries())
            .collect();
        rep.arp.push((s.name().to_string(), arp));
    }
    rep
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_succeeds_with_one_and_two_workers() {
        for workers in [1, 2] {
            let r = run(&DemoConfig {
                workers,
                ..DemoConfig::default()
            });
            assert!(r.ok(), "workers={workers}: {r:#?}");
            assert_eq!(r.pings_received, 6);
            assert!(r
                .trace
                .iter()
                .any(|l| l.contains("ARP, Request who-has 198.18.0.2")));
        }
    }

    #[test]
    fn demo_is_deterministic() {
        let a = run(&DemoConfig::default());
        let b = run(&DemoConfig::default());
        assert_eq!(a.trace, b.trace);
    }
}
