//! `mpstack demo`: the scenarios of `sim::demo`, printed for a reader: `router` (the
//! default) and `lan`. The router's tables are printed by the control commands
//! (`netstat -rn`, `ipfw show`, `netstat -s`), as a running node prints them.

use crate::DemoArgs;
use mpstack::control::{cmds, Conn};
use sim::demo::router;
use std::process::ExitCode;

/// The scenarios: name and what it shows.
const SCENARIOS: [(&str, &str); 2] = [
    (
        "router",
        "two LANs joined by a router with ipfw and dummynet pipes: ARP, ND, ping, \
         traceroute, a firewall reset, a TCP transfer; the router's tables (default)",
    ),
    (
        "lan",
        "three hosts on one segment: ARP, ping, UDP echo, a closed port",
    ),
];

pub fn main(a: DemoArgs) -> Result<ExitCode, String> {
    if a.list {
        for (name, what) in SCENARIOS {
            println!("{name:<8} {what}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    match a.scenario.as_deref().unwrap_or("router") {
        "router" => router_main(&a),
        "lan" => lan_main(a),
        other => Err(format!(
            "no scenario '{other}'; there are: {}",
            SCENARIOS.map(|s| s.0).join(", ")
        )),
    }
}

fn router_main(a: &DemoArgs) -> Result<ExitCode, String> {
    let cfg = router::RouterConfig {
        seed: a.seed,
        workers: usize::from(a.workers),
        transfer_bytes: usize::try_from(a.bytes).map_err(|e| e.to_string())?,
    };
    println!(
        "mpstack demo router: two LANs joined by a router, in virtual time (seed {}, {} worker(s) per host)\n",
        cfg.seed, cfg.workers
    );
    println!(
        "  lan1 198.18.1.0/24 2001:2:1::/64                       lan2 198.18.2.0/24 2001:2:2::/64"
    );
    println!("  alpha .1.10 ::10 --+                                 +-- charlie .2.10 ::10");
    println!("  bravo .1.11 ::11 --+-- em0 .1.1 [router] em1 .2.1 --+");
    println!("\n  The router forwards IPv4 and IPv6 and runs this ipfw ruleset:");
    for l in router::RULES.lines() {
        println!("    {l}");
    }
    println!();
    let rep = router::run(&cfg)?;
    router_frames(a, &rep)?;
    router_results(&rep);
    router_tables(a, &rep);
    if rep.ok() {
        println!("\ndemo: OK");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("\ndemo: FAILED");
        Ok(ExitCode::from(1))
    }
}

/// The router demo's ARP and ND frames, the first of them shown; with `--pcap`,
/// every frame written, a file per link.
fn router_frames(a: &DemoArgs, rep: &router::RouterReport) -> Result<(), String> {
    // Address resolution on the wire: duplicate address detection at start, then
    // ARP and ND as the first packets cross each LAN (the rest is in the pcaps).
    const SHOWN: usize = 24;
    println!(
        "ARP and ND frames: duplicate address detection, then address resolution\n  (virtual time, link, sender, what):"
    );
    let lines: Vec<String> = rep
        .frames
        .iter()
        .map(|(link, r)| router::frame_line(link, r))
        .filter(|l| l.contains(" ARP, ") || l.contains("neighbor "))
        .collect();
    for l in lines.iter().take(SHOWN) {
        println!("  {l}");
    }
    if lines.len() > SHOWN {
        println!("  ... {} more", lines.len() - SHOWN);
    }
    println!(
        "  ({} frames in all{})",
        rep.frames.len(),
        if a.pcap.is_some() {
            ""
        } else {
            "; --pcap FILE writes them, one file per link"
        }
    );
    if let Some(path) = &a.pcap {
        for link in ["lan1", "lan2"] {
            let p = link_path(path, link);
            let frames: Vec<_> = rep
                .frames
                .iter()
                .filter(|(l, _)| *l == link)
                .map(|(_, r)| (r.time, r.frame.clone()))
                .collect();
            write_pcap(&p, &frames).map_err(|e| format!("{}: {e}", p.display()))?;
            println!(
                "  {} frames of {link} written to {}",
                frames.len(),
                p.display()
            );
        }
    }
    Ok(())
}

/// The router demo's results: ping, UDP over IPv6, traceroute, the firewall's
/// reset, the TCP transfer through a pipe.
fn router_results(rep: &router::RouterReport) {
    let ms = |d: Option<dev::Duration>| {
        d.map_or("no reply".to_string(), |d| {
            format!("{:.3} ms", d.as_secs_f64() * 1e3)
        })
    };
    println!("\nping from alpha (56 bytes of data, 98-byte IP packets):");
    println!("  198.18.1.1  (the router)     rtt {}", ms(rep.rtt_router));
    println!("  198.18.2.10 (charlie)        rtt {}", ms(rep.rtt_far));
    if let Some(d) = rep.pipe_delay() {
        let ser = 98.0 * 8.0 / (router::PIPE_BW_MBIT as f64 * 1e6);
        println!(
            "  the pipes add {:.3} ms: {:.3} ms each way; set: delay {} ms + {:.1} us to send 98 bytes at {} Mbit/s",
            2.0 * d.as_secs_f64() * 1e3,
            d.as_secs_f64() * 1e3,
            router::PIPE_DELAY_MS,
            ser * 1e6,
            router::PIPE_BW_MBIT
        );
    }
    println!(
        "\nUDP over IPv6: alpha -> [2001:2:2::10]:7 (charlie's echo): {}",
        if rep.udp6_echoed {
            "came back intact"
        } else {
            "FAILED"
        }
    );
    println!(
        "\ntraceroute to 198.18.2.10 from alpha (one UDP probe per TTL, to ports 33434 and up):"
    );
    for h in &rep.traceroute {
        let what = match h.icmp {
            (11, 0) => "time exceeded",
            (3, 3) => "port unreachable: arrived",
            _ => "?",
        };
        println!(
            "  {:>2}  {:<12} {:>8.3} ms  ({what})",
            h.ttl,
            h.from.to_string(),
            h.rtt.as_secs_f64() * 1e3
        );
    }
    if !rep.traceroute_ok() {
        println!("  FAILED: expected the router, then charlie");
    }
    println!(
        "\nfirewall: bravo -> charlie:23 (charlie listens): {}",
        match rep.telnet {
            Some(std::io::ErrorKind::ConnectionRefused) => {
                "connection refused, reset by rule 100".to_string()
            }
            Some(k) => format!("FAILED ({k:?})"),
            None => "FAILED (no answer)".to_string(),
        }
    );
    println!(
        "\nTCP: alpha -> charlie:5001, {} bytes in {:.3} s = {:.2} Mbit/s through pipe 1 ({} Mbit/s): {}",
        rep.received,
        rep.transfer_time.as_secs_f64(),
        rep.goodput_mbit(),
        router::PIPE_BW_MBIT,
        if rep.intact {
            "byte for byte as sent".to_string()
        } else {
            format!("FAILED ({} of {} bytes, or wrong bytes)", rep.received, rep.transfer_bytes)
        }
    );
}

/// The router's tables and counters, as its control commands print them.
fn router_tables(a: &DemoArgs, rep: &router::RouterReport) {
    let fw = cmds::Firewall::running(rep.fw.clone(), false, false);
    let node = cmds::Node {
        stack: rep.sim.host(rep.router),
        fw: &fw,
        sysctl: std::sync::Mutex::new(()),
        fpm: None,
        packet: None,
        clock: None,
    };
    let mut sections = vec![
        (
            "The router's routing table (netstat -rn)",
            vec!["netstat", "-rn"],
        ),
        ("The router's neighbours (arp -an)", vec!["arp", "-an"]),
        ("The router's neighbours (ndp -an)", vec!["ndp", "-an"]),
        ("The router's firewall (ipfw show)", vec!["ipfw", "show"]),
    ];
    sections.insert(4, ("The router's pipes", vec![]));
    sections.push(if a.all_counters {
        (
            "The router's counters (netstat -s)",
            vec!["netstat", "-s", "-a"],
        )
    } else {
        (
            "The router's counters (netstat -s, non-zero)",
            vec!["netstat", "-s"],
        )
    });
    for (title, words) in sections {
        println!("\n{title}:");
        if words.is_empty() {
            for (n, c, st) in rep.fw.pipes() {
                println!(
                    "  pipe {n}: {} bit/s, delay {} ms; in {} packets {} bytes, out {} packets {} bytes, dropped {}, queued {}",
                    c.bandwidth,
                    c.delay.as_millis(),
                    st.in_pkts,
                    st.in_bytes,
                    st.out_pkts,
                    st.out_bytes,
                    st.drop_loss_pkts + st.drop_full_pkts + st.drop_flows_pkts,
                    st.queued_pkts
                );
            }
            continue;
        }
        let words: Vec<String> = words.into_iter().map(String::from).collect();
        let mut out = Conn::buffer();
        let stop = std::sync::atomic::AtomicBool::new(false);
        match cmds::execute(&node, &words, &mut out, &stop) {
            Ok(()) => {
                for l in out.into_output().lines() {
                    println!("  {l}");
                }
            }
            Err(f) => println!("  ({})", f.msg.trim_end()),
        }
    }
}

/// `FILE` with `-LINK` before its extension: demo.pcap, lan1 -> demo-lan1.pcap.
fn link_path(path: &std::path::Path, link: &str) -> std::path::PathBuf {
    let stem = path
        .file_stem()
        .map_or_else(|| "demo".into(), |s| s.to_string_lossy().into_owned());
    let name = match path.extension() {
        Some(e) => format!("{stem}-{link}.{}", e.to_string_lossy()),
        None => format!("{stem}-{link}"),
    };
    path.with_file_name(name)
}

fn lan_main(a: DemoArgs) -> Result<ExitCode, String> {
    let cfg = sim::demo::DemoConfig {
        seed: a.seed,
        workers: a.workers as usize,
        pings: a.pings,
        ping_size: a.size as usize,
        ..Default::default()
    };
    println!(
        "mpstack demo: hosts alpha, bravo, charlie on {} ({} worker(s) each, seed {})",
        sim::demo::NET,
        cfg.workers,
        cfg.seed
    );
    println!(
        "  alpha pings bravo and charlie; alpha sends a datagram to charlie's UDP echo (port 7);"
    );
    println!("  bravo sends to a closed port on charlie.\n");
    let rep = sim::demo::run(&cfg);
    println!("Frames on the segment (virtual time, sender, what):");
    for l in &rep.trace {
        println!("  {l}");
    }
    if let Some(path) = &a.pcap {
        write_pcap(path, &rep.frames).map_err(|e| format!("{}: {e}", path.display()))?;
        println!(
            "\n{} frames written to {}",
            rep.frames.len(),
            path.display()
        );
    }
    println!("\nResults:");
    println!(
        "  ping: {} sent, {} received, {:.0}% loss",
        rep.pings_sent,
        rep.pings_received,
        if rep.pings_sent == 0 {
            0.0
        } else {
            100.0 * (rep.pings_sent - rep.pings_received) as f64 / rep.pings_sent as f64
        }
    );
    println!(
        "  udp echo: {}",
        if rep.udp_echoed {
            "datagram came back intact"
        } else {
            "FAILED"
        }
    );
    println!(
        "  closed port: {}",
        if rep.port_unreachable_seen {
            "ICMP port unreachable received"
        } else {
            "FAILED"
        }
    );
    println!("\nNeighbour tables (arp -a):");
    for (host, entries) in &rep.arp {
        for e in entries {
            let mac = e
                .mac
                .map(|m| m.to_string())
                .unwrap_or_else(|| "(incomplete)".into());
            println!("  {host:<8} {} at {mac} [{}]", e.ip, e.state);
        }
    }
    println!("\nCounters (netstat -s, non-zero):");
    for (host, addr, stats) in &rep.hosts {
        println!("  {host} ({addr}):");
        let mut s = String::new();
        let _ = stats.write_netstat(&mut s, a.all_counters);
        for l in s.lines() {
            println!("    {l}");
        }
    }
    if rep.ok() {
        println!("\ndemo: OK");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("\ndemo: FAILED");
        Ok(ExitCode::from(1))
    }
}

fn write_pcap(path: &std::path::Path, frames: &[(dev::Instant, Vec<u8>)]) -> std::io::Result<()> {
    let mut w = dev::pcap::PcapWriter::create(path)?;
    for (t, f) in frames {
        w.write_frame(*t, f)?;
    }
    w.flush()
}
