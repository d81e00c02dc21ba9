//! `mpstack demo`.

use crate::DemoArgs;
use std::process::ExitCode;

pub fn main(a: DemoArgs) -> Result<ExitCode, String> {
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
