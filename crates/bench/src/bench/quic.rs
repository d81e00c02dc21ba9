//! `mpstack bench quic`: QUIC bulk throughput of quinn 0.11 on mpstack beside quinn on
//! the Linux kernel's UDP, measured in the same run with the same workload, transport
//! settings and TLS (rustls, ring provider, a self-signed certificate):
//!
//! - `mpstack`: two mpstack stacks in this process joined by a memory wire (MTU 1500),
//!   `--workers` worker threads each, quinn's socket on each stack's UDP socket
//!   (`mpstack_quic`);
//! - `linux-loopback`: two quinn endpoints on tokio's kernel UDP sockets over
//!   127.0.0.1 (quinn-udp's GSO and GRO, MTU 65536).
//!
//! Each moves `--mbytes` MiB from client to server over one stream, and again split
//! over 4 streams (`mpstack-4s`, `linux-loopback-4s`), timed from the established
//! connection until the server has checked every byte against the transfer's pattern
//! (`mpstack_quic::xfer`: a mismatch or a short stream fails the bench). The client
//! and server tasks run on one tokio runtime of 2 threads. Best of `--rounds`, each
//! measurement with fresh stacks, endpoints and runtime; the rows interleave.

use crate::BenchArgs;
use mpstack_quic::{lab, xfer};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Streams of the multi-stream rows.
const STREAMS: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    Mpstack,
    LinuxLoopback,
}

#[derive(Clone, Copy, Debug)]
struct Row {
    name: &'static str,
    path: Path,
    streams: usize,
}

const ROWS: [Row; 4] = [
    Row {
        name: "mpstack",
        path: Path::Mpstack,
        streams: 1,
    },
    Row {
        name: "linux-loopback",
        path: Path::LinuxLoopback,
        streams: 1,
    },
    Row {
        name: "mpstack-4s",
        path: Path::Mpstack,
        streams: STREAMS,
    },
    Row {
        name: "linux-loopback-4s",
        path: Path::LinuxLoopback,
        streams: STREAMS,
    },
];

struct Result1 {
    row: Row,
    bytes: u64,
    secs: f64,
}

impl Result1 {
    fn gbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.secs / 1e9
    }
}

fn progress(a: &BenchArgs, msg: &str) {
    if !a.json {
        eprintln!("bench: {msg}");
    }
}

/// One measurement of `row`: `bytes` client to server, fresh everything.
fn measure(a: &BenchArgs, row: Row, bytes: u64) -> Result<f64, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    // Kept until the runtime is gone: the endpoints' sockets live on them.
    let stacks = match row.path {
        Path::Mpstack => Some(lab::stacks(a.workers as usize)?),
        Path::LinuxLoopback => None,
    };
    let got = Arc::new(AtomicU64::new(0));
    let r = rt.block_on(async {
        let (client, server, to) = match &stacks {
            Some((cs, ss)) => {
                let (c, s) = lab::endpoints(cs, ss)?;
                (c, s, SocketAddr::V4(lab::SERVER))
            }
            None => lab::loopback_endpoints()?,
        };
        // Progress on long runs: a line every 5 s with the bytes checked so far.
        let ticker = (!a.json).then(|| {
            let got = got.clone();
            let name = row.name;
            tokio::spawn(async move {
                let t0 = Instant::now();
                loop {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    let n = got.load(Ordering::Relaxed);
                    eprintln!(
                        "bench:   {name}: {} of {} MiB checked after {:.0} s",
                        n >> 20,
                        bytes >> 20,
                        t0.elapsed().as_secs_f64()
                    );
                }
            })
        });
        let job = xfer::Transfer {
            up: bytes,
            down: 0,
            streams: row.streams,
            progress: Some(got.clone()),
        };
        // A stuck transfer ends the bench with an error rather than hanging it:
        // allow 50 MiB/s at the least.
        let limit = Duration::from_secs(60 + bytes / (50 << 20));
        let r = tokio::time::timeout(limit, xfer::between(&server, &client, to, "localhost", job))
            .await
            .map_err(|_| format!("{}: not done after {limit:?}", row.name))
            .and_then(|r| r.map_err(|e| format!("{}: {e}", row.name)));
        if let Some(t) = ticker {
            t.abort();
        }
        client.wait_idle().await;
        r
    });
    drop(rt);
    drop(stacks);
    let secs = r?.as_secs_f64();
    let n = got.load(Ordering::Relaxed);
    if n != bytes {
        return Err(format!(
            "{}: the server checked {n} of {bytes} bytes",
            row.name
        ));
    }
    Ok(secs)
}

pub fn main(a: &BenchArgs) -> Result<ExitCode, String> {
    let bytes = a.mbytes << 20;
    let rows: Vec<Row> = ROWS
        .iter()
        .copied()
        .filter(|r| !a.skip.iter().any(|s| s == r.name))
        .collect();
    if let Some(bad) = a
        .skip
        .iter()
        .find(|s| !ROWS.iter().any(|r| r.name == s.as_str()))
    {
        return Err(format!(
            "bench quic: unknown row '{bad}' in --skip (rows: mpstack, linux-loopback, mpstack-4s, linux-loopback-4s)"
        ));
    }
    // An untimed transfer first: the packet pools, the heap and the CPU's clocks
    // settle before the first timed row.
    if let Some(r) = rows.first() {
        progress(a, "warm-up: 16 MiB, untimed");
        measure(a, *r, bytes.min(16 << 20))?;
    }
    let mut results: Vec<Result1> = Vec::new();
    for round in 1..=a.rounds {
        for &row in &rows {
            let what = match row.path {
                Path::Mpstack => format!(
                    "quinn on mpstack, two stacks on a memory wire, {} worker(s) each",
                    a.workers
                ),
                Path::LinuxLoopback => "quinn on Linux kernel UDP over 127.0.0.1".into(),
            };
            progress(
                a,
                &format!(
                    "round {round}/{}: {}: {what}, {} stream(s), {} MiB",
                    a.rounds, row.name, row.streams, a.mbytes
                ),
            );
            let secs = measure(a, row, bytes)?;
            results.push(Result1 { row, bytes, secs });
        }
    }
    report(a, &rows, &results);
    Ok(ExitCode::SUCCESS)
}

fn report(a: &BenchArgs, rows: &[Row], results: &[Result1]) {
    let best = |name: &str| {
        results
            .iter()
            .filter(|r| r.row.name == name)
            .max_by(|x, y| x.gbps().total_cmp(&y.gbps()))
    };
    let ratios: Vec<(&str, &str, f64, f64)> = [
        ("mpstack", "linux-loopback"),
        ("mpstack-4s", "linux-loopback-4s"),
    ]
    .into_iter()
    .filter_map(|(us, them)| Some((us, them, best(us)?.gbps(), best(them)?.gbps())))
    .collect();
    if a.json {
        for r in rows.iter().filter_map(|r| best(r.name)) {
            println!(
                "{{\"bench\":\"quic\",\"impl\":\"{}\",\"streams\":{},\"bytes\":{},\"seconds\":{:.6},\"gbit_per_s\":{:.4},\"rounds\":{}}}",
                r.row.name,
                r.row.streams,
                r.bytes,
                r.secs,
                r.gbps(),
                a.rounds
            );
        }
        for (us, them, o, b) in ratios {
            let (us, them) = (us.replace('-', "_"), them.replace('-', "_"));
            println!(
                "{{\"bench\":\"quic\",\"ratio_{us}_to_{them}\":{:.4},\"{us}_gbit_per_s\":{o:.4},\"{them}_gbit_per_s\":{b:.4}}}",
                o / b.max(1e-9)
            );
        }
        return;
    }
    println!(
        "quinn 0.11 bulk transfer, client -> server, best of {} round(s), {} MiB each, every byte checked",
        a.rounds, a.mbytes
    );
    println!(
        "{:<20} {:>8} {:>8} {:>10} {:>10} {:>10}",
        "implementation", "streams", "MiB", "seconds", "Gbit/s", "MB/s"
    );
    for r in rows.iter().filter_map(|r| best(r.name)) {
        println!(
            "{:<20} {:>8} {:>8} {:>10.3} {:>10.3} {:>10.1}",
            r.row.name,
            r.row.streams,
            r.bytes >> 20,
            r.secs,
            r.gbps(),
            r.bytes as f64 / r.secs / 1e6
        );
    }
    if !ratios.is_empty() {
        println!();
    }
    for (us, them, o, b) in ratios {
        println!("{us} / {them}: {:.2}x", o / b.max(1e-9));
    }
}
