//! `mpstack bench tcp`: single-flow TCP throughput between two mpstack stacks in one
//! process (worker threads, a memory wire, the real clock), beside the Linux kernel's
//! TCP over loopback measured in the same run with the same workload.

use crate::BenchArgs;
use dev::mem::{wire, WireConfig};
use net::Stack;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::ExitCode;
use std::time::{Duration, Instant};

struct Measurement {
    name: &'static str,
    bytes: u64,
    secs: f64,
}

impl Measurement {
    fn gbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.secs / 1e9
    }
}

pub fn main(a: BenchArgs) -> Result<ExitCode, String> {
    match a.what.as_str() {
        "tcp" => tcp(&a),
        other => Err(format!("bench: unknown benchmark '{other}' (known: tcp)")),
    }
}

fn progress(a: &BenchArgs, msg: &str) {
    if !a.json {
        eprintln!("bench: {msg}");
    }
}

fn tcp(a: &BenchArgs) -> Result<ExitCode, String> {
    let bytes = a.mbytes * 1024 * 1024;
    let mut results = Vec::new();
    for round in 0..a.rounds {
        progress(
            a,
            &format!(
                "round {}/{}: mpstack, {} worker(s) per stack, {} MiB",
                round + 1,
                a.rounds,
                a.workers,
                a.mbytes
            ),
        );
        results.push(ours(bytes, a.workers as usize)?);
        progress(
            a,
            &format!(
                "round {}/{}: Linux kernel TCP over loopback, {} MiB",
                round + 1,
                a.rounds,
                a.mbytes
            ),
        );
        results.push(kernel(bytes)?);
    }
    let best = |name: &str| {
        results
            .iter()
            .filter(|r| r.name == name)
            .map(Measurement::gbps)
            .fold(0.0f64, f64::max)
    };
    let (o, k) = (best("mpstack"), best("linux-loopback"));
    if a.json {
        for r in &results {
            println!(
                "{{\"bench\":\"tcp\",\"impl\":\"{}\",\"bytes\":{},\"seconds\":{:.6},\"gbit_per_s\":{:.4}}}",
                r.name,
                r.bytes,
                r.secs,
                r.gbps()
            );
        }
        println!(
            "{{\"bench\":\"tcp\",\"ratio_mpstack_to_linux_loopback\":{:.4}}}",
            o / k.max(1e-9)
        );
    } else {
        println!(
            "{:<16} {:>10} {:>10} {:>12}",
            "implementation", "MiB", "seconds", "Gbit/s"
        );
        for r in &results {
            println!(
                "{:<16} {:>10} {:>10.3} {:>12.3}",
                r.name,
                r.bytes / (1024 * 1024),
                r.secs,
                r.gbps()
            );
        }
        println!(
            "\nbest of {}: mpstack {o:.3} Gbit/s, Linux loopback {k:.3} Gbit/s, ratio {:.2}",
            a.rounds,
            o / k.max(1e-9)
        );
        println!("(mpstack: two stacks, {} worker thread(s) each, MTU 1500 memory wire; Linux: 127.0.0.1, MTU 65536)", a.workers);
    }
    Ok(ExitCode::SUCCESS)
}

fn host(name: &str, workers: usize, dev: dev::mem::MemDevice, addr: &str) -> Result<Stack, String> {
    sim::standalone_host(name, workers, Box::new(dev), addr)
}

/// Reads until end of stream; returns the byte count.
fn drain(mut r: impl Read) -> std::io::Result<u64> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut got = 0u64;
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            return Ok(got);
        }
        got += n as u64;
    }
}

/// Writes `bytes` bytes in 256 KiB writes.
fn pump(mut w: impl Write, bytes: u64) -> std::io::Result<()> {
    let chunk = vec![0x5au8; 256 * 1024];
    let mut sent = 0u64;
    while sent < bytes {
        let n = ((bytes - sent) as usize).min(chunk.len());
        w.write_all(&chunk[..n])?;
        sent += n as u64;
    }
    Ok(())
}

fn ours(bytes: u64, workers: usize) -> Result<Measurement, String> {
    let (da, db) = wire(WireConfig {
        num_queues: workers,
        queue_limit: 4096,
        ..WireConfig::default()
    });
    let mut a = host("bench-a", workers, da, "198.18.0.1/24")?;
    let mut b = host("bench-b", workers, db, "198.18.0.2/24")?;
    let l = b
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 5001), 4)
        .map_err(|e| e.to_string())?;
    a.start().map_err(|e| e.to_string())?;
    b.start().map_err(|e| e.to_string())?;
    let sink = std::thread::spawn(move || -> std::io::Result<u64> {
        let (c, _) = l.accept()?;
        c.set_read_timeout(Some(Duration::from_secs(30)))?;
        drain(c)
    });
    let c = a
        .tcp_connect(
            SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 5001),
            Some(Duration::from_secs(10)),
        )
        .map_err(|e| format!("connect: {e}"))?;
    c.set_write_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    pump(&c, bytes).map_err(|e| format!("write: {e}"))?;
    c.shutdown(std::net::Shutdown::Write)
        .map_err(|e| e.to_string())?;
    let got = sink
        .join()
        .map_err(|_| "sink panicked".to_string())?
        .map_err(|e| format!("read: {e}"))?;
    let secs = t0.elapsed().as_secs_f64();
    drop(c);
    a.stop();
    b.stop();
    if got != bytes {
        return Err(format!("mpstack delivered {got} of {bytes} bytes"));
    }
    Ok(Measurement {
        name: "mpstack",
        bytes,
        secs,
    })
}

fn kernel(bytes: u64) -> Result<Measurement, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let addr = l.local_addr().map_err(|e| e.to_string())?;
    let sink = std::thread::spawn(move || -> std::io::Result<u64> { drain(l.accept()?.0) });
    let c = std::net::TcpStream::connect(addr).map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    pump(&c, bytes).map_err(|e| e.to_string())?;
    c.shutdown(std::net::Shutdown::Write)
        .map_err(|e| e.to_string())?;
    let got = sink
        .join()
        .map_err(|_| "sink panicked".to_string())?
        .map_err(|e| e.to_string())?;
    let secs = t0.elapsed().as_secs_f64();
    if got != bytes {
        return Err(format!("kernel delivered {got} of {bytes} bytes"));
    }
    Ok(Measurement {
        name: "linux-loopback",
        bytes,
        secs,
    })
}
