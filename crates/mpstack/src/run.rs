//! `mpstack run`: a host on a TAP device.

use crate::RunArgs;
use net::{IfConfig, InetAddr, Stack, StackConfig};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub fn main(a: RunArgs) -> Result<ExitCode, String> {
    let inet: InetAddr = a.inet.parse().map_err(|e| format!("--inet: {e}"))?;
    let gw: Option<Ipv4Addr> = match &a.gw {
        Some(g) => Some(
            g.parse()
                .map_err(|_| format!("--gw: '{g}' is not an IPv4 address"))?,
        ),
        None => None,
    };
    if let Some(g) = gw {
        if !inet.contains(g) {
            return Err(format!(
                "--gw: {g} is not on the interface's subnet {}/{}",
                inet.network(),
                inet.prefix_len
            ));
        }
    }
    let inet6: Vec<net::Inet6Addr> = a
        .inet6
        .iter()
        .map(|x| x.parse().map_err(|e| format!("--inet6: {e}")))
        .collect::<Result<_, String>>()?;
    let gw6: Option<std::net::Ipv6Addr> = match &a.gw6 {
        Some(g) => Some(
            g.parse()
                .map_err(|_| format!("--gw6: '{g}' is not an IPv6 address"))?,
        ),
        None => None,
    };
    if gw6.is_some() && inet6.is_empty() {
        return Err("--gw6 needs an IPv6 address on the interface (--inet6)".into());
    }
    if a.slaac && inet6.is_empty() {
        return Err("--slaac needs IPv6 on the interface: give it an address with --inet6 (the link-local one comes with it)".into());
    }
    let mac = match &a.mac {
        Some(m) => Some(
            m.parse::<wire::EthernetAddress>()
                .map_err(|_| format!("--mac: '{m}' is not a MAC address"))?,
        ),
        None => None,
    };
    let services = crate::services::parse_list(&a.serve)?;
    let connect: Option<std::net::SocketAddr> = match &a.connect {
        Some(c) => Some(c.parse().map_err(|_| {
            format!("--connect: '{c}' is not ADDRESS:PORT (198.18.0.1:5001 or [2001:2::1]:5001)")
        })?),
        None => None,
    };
    let send = crate::client::parse_bytes(&a.send).map_err(|e| format!("--send: {e}"))?;
    let workers = a.workers as usize;
    let queues = a.queues.map(|q| q as usize).unwrap_or(workers).max(1);

    let tap =
        dev::tap::TapDevice::open(&a.tap, queues).map_err(|e| format!("TAP '{}': {e}", a.tap))?;
    let device: Box<dyn dev::Device> = match &a.pcap {
        Some(path) => {
            let w = dev::pcap::PcapWriter::create(path)
                .map_err(|e| format!("--pcap {}: {e}", path.display()))?;
            Box::new(dev::pcap::PcapDevice::new(Box::new(tap), w))
        }
        None => Box::new(tap),
    };

    let mut stack = Stack::new(StackConfig {
        name: format!("mpstack-{}", a.tap),
        workers,
        busy_poll: std::time::Duration::from_micros(a.busy_poll),
        dad_transmits: a.dad_transmits,
        slaac: a.slaac,
        ..StackConfig::default()
    });
    let ifindex = stack
        .add_interface(
            device,
            IfConfig {
                addrs: vec![inet],
                mac,
                ..IfConfig::default()
            },
        )
        .map_err(|e| e.to_string())?;
    stack.set_default_gateway(gw);
    for a6 in &inet6 {
        stack
            .add_address6(ifindex, *a6)
            .map_err(|e| format!("--inet6 {a6}: {e}"))?;
    }
    if let Some(g) = gw6 {
        stack.set_default_gateway6(Some((g, ifindex)));
    }
    let echo = stack
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7))
        .map_err(|e| format!("UDP echo service: {e}"))?;
    echo.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| e.to_string())?;
    stack
        .start()
        .map_err(|e| format!("starting workers: {e}"))?;

    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| format!("signal handler: {e}"))?;
    }
    let tcp_counters = Arc::new(crate::services::Counters::default());
    let tcp_threads = crate::services::start(
        &stack,
        &services,
        !inet6.is_empty(),
        stop.clone(),
        tcp_counters.clone(),
    )?;
    let svc_names: Vec<String> = services
        .iter()
        .map(|s| format!("{} (TCP {})", s.name(), s.port()))
        .collect();
    let ifp = &stack.interfaces()[ifindex.get()];
    let v6: String = inet6.iter().map(|x| format!(", {x}")).collect();
    println!(
        "mpstack: up on {} ({}, {}{}), {} worker(s), {} queue(s); UDP echo on port 7; services: {} (discard and chargen on UDP too); SIGINT or SIGTERM stops",
        a.tap,
        ifp.mac,
        inet,
        v6,
        workers,
        queues,
        if svc_names.is_empty() { "none".to_string() } else { svc_names.join(", ") }
    );

    // UDP: echo always; discard and chargen with their TCP namesakes.
    let mut udp = vec![(crate::services::Service::Echo, echo)];
    for svc in &services {
        if matches!(
            svc,
            crate::services::Service::Discard | crate::services::Service::Chargen
        ) {
            let sock = stack
                .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, svc.port()))
                .map_err(|e| format!("UDP {} service: {e}", svc.name()))?;
            sock.set_read_timeout(Some(Duration::from_millis(100)))
                .map_err(|e| e.to_string())?;
            udp.push((svc.clone(), sock));
        }
    }
    // With IPv6 on, each UDP service answers on [::] too (an IPv6 socket).
    if !inet6.is_empty() {
        let v6: Vec<crate::services::Service> = udp.iter().map(|(svc, _)| svc.clone()).collect();
        for svc in v6 {
            let sock = stack
                .udp_bind(std::net::SocketAddr::new(
                    std::net::Ipv6Addr::UNSPECIFIED.into(),
                    svc.port(),
                ))
                .map_err(|e| format!("UDP {} service over IPv6: {e}", svc.name()))?;
            sock.set_read_timeout(Some(Duration::from_millis(100)))
                .map_err(|e| e.to_string())?;
            udp.push((svc, sock));
        }
    }
    let mut udp_threads = Vec::new();
    for (svc, sock) in udp {
        let stop = stop.clone();
        let t = std::thread::Builder::new()
            .name(format!("udp-{}", svc.name()))
            .spawn(move || udp_service(&svc, &sock, &stop))
            .map_err(|e| e.to_string())?;
        udp_threads.push(t);
    }

    let started = std::time::Instant::now();
    let mut code = ExitCode::SUCCESS;
    if let Some(to) = connect {
        match crate::client::run(&stack, to, send, a.seed, &stop) {
            Ok(r) => println!(
                "mpstack: client: sent {} byte(s) sha256 {}, received {} byte(s) sha256 {}, in {:.3}s ({:.3} Gbit/s out)",
                r.sent,
                r.sent_sha256,
                r.received,
                r.received_sha256,
                r.secs,
                r.sent as f64 * 8.0 / r.secs.max(1e-9) / 1e9
            ),
            Err(e) => {
                eprintln!("mpstack: client: {e}");
                code = ExitCode::FAILURE;
            }
        }
        stop.store(true, Ordering::Relaxed);
    }
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        if a.duration
            .is_some_and(|d| started.elapsed().as_secs_f64() >= d)
        {
            stop.store(true, Ordering::Relaxed);
        }
    }
    let served: Vec<u64> = udp_threads
        .into_iter()
        .map(|t| t.join().unwrap_or(0))
        .collect();
    for t in tcp_threads {
        let _ = t.join();
    }
    stack.stop();
    println!(
        "mpstack: TCP services: {} connection(s), {} refused (over {}), {} byte(s) in, {} out",
        tcp_counters.connections.load(Ordering::Relaxed),
        tcp_counters.refused.load(Ordering::Relaxed),
        crate::services::MAX_CONNS,
        tcp_counters.bytes_in.load(Ordering::Relaxed),
        tcp_counters.bytes_out.load(Ordering::Relaxed),
    );

    println!(
        "mpstack: stopping after {:.1}s; UDP services answered {} datagram(s) (echo {})",
        started.elapsed().as_secs_f64(),
        served.iter().sum::<u64>(),
        served.first().copied().unwrap_or(0)
    );
    for (w, i, q) in stack.queue_stats() {
        println!(
            "queue w{w}/if{}: ipackets {} ibytes {} idrops {} opackets {} obytes {} odrops {}",
            i.0, q.ipackets, q.ibytes, q.idrops, q.opackets, q.obytes, q.odrops
        );
    }
    let mut s = String::new();
    let _ = stack.stats().write_netstat(&mut s, false);
    print!("{s}");
    for e in stack.interfaces().iter().flat_map(|i| i.arp.entries()) {
        let mac = e
            .mac
            .map(|m| m.to_string())
            .unwrap_or_else(|| "(incomplete)".into());
        println!("arp: {} at {mac} [{}]", e.ip, e.state);
    }
    Ok(code)
}

/// One UDP service (RFC 862 echo, RFC 863 discard, RFC 864 chargen: each datagram is
/// answered with 0 to 512 characters of the rotating pattern); returns the datagrams
/// handled.
fn udp_service(svc: &crate::services::Service, sock: &net::UdpSocket, stop: &AtomicBool) -> u64 {
    use crate::services::Service;
    let mut buf = vec![0u8; 65536];
    let mut out = vec![0u8; 512];
    let mut served = 0u64;
    let mut line = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        match svc {
            Service::Echo => {
                if sock.send_to(&buf[..n], from).is_ok() {
                    served += 1;
                }
            }
            Service::Chargen => {
                // A length that varies per request, as RFC 864 suggests.
                let len = (served as usize * 7919 + n) % 513;
                for (k, b) in out[..len].iter_mut().enumerate() {
                    *b = b' ' + ((line + k) % 95) as u8;
                }
                line = (line + 1) % 95;
                if sock.send_to(&out[..len], from).is_ok() {
                    served += 1;
                }
            }
            _ => served += 1,
        }
    }
    served
}
