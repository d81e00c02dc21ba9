//! The client side of `mpstack run --connect`: connect to a TCP server, send N bytes
//! of a seeded pseudo-random stream, shut down the sending side, read until the peer
//! closes, and report both directions with their SHA-256 so a test can compare them
//! with what the peer saw (`nc -l … | sha256sum`).

use net::Stack;
use sha2::{Digest, Sha256};
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Parses a byte count: `1000`, `64K`, `100M`, `1G` (powers of 1024; `KB`, `MB`, `GB`
/// mean powers of 1000).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a byte count (examples: 1000, 64K, 100M, 1G)"))?;
    let mul: u64 = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KI" | "KIB" => 1 << 10,
        "M" | "MI" | "MIB" => 1 << 20,
        "G" | "GI" | "GIB" => 1 << 30,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        _ => {
            return Err(format!(
                "'{s}': unknown unit '{unit}' (K, M, G, KB, MB, GB)"
            ))
        }
    };
    n.checked_mul(mul)
        .ok_or_else(|| format!("'{s}' is too large"))
}

/// A seeded xorshift byte stream: cheap, reproducible, incompressible enough.
pub struct Pattern(u64);

impl Pattern {
    pub fn new(seed: u64) -> Self {
        Pattern(seed | 1)
    }
    pub fn fill(&mut self, buf: &mut [u8]) {
        for c in buf.chunks_mut(8) {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            c.copy_from_slice(&x.to_le_bytes()[..c.len()]);
        }
    }
}

/// What a client run moved.
#[derive(Debug)]
pub struct Report {
    pub sent: u64,
    pub sent_sha256: String,
    pub received: u64,
    pub received_sha256: String,
    pub secs: f64,
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Connects, sends `bytes`, half-closes, reads until the peer closes. A reader
/// thread drains the connection while the writer writes, so an echo server never
/// blocks on a full window. `stop` aborts with an error.
pub fn run(
    stack: &Stack,
    to: SocketAddr,
    bytes: u64,
    seed: u64,
    stop: &AtomicBool,
) -> Result<Report, String> {
    // A server that is not listening yet (refused), a network not up yet
    // (unreachable) or a path that lost every SYN of an attempt (timed out) is
    // tried again, for up to 30 seconds: the node may start before its peer.
    let give_up = Instant::now() + Duration::from_secs(30);
    let again = |k: ErrorKind| {
        matches!(
            k,
            ErrorKind::ConnectionRefused
                | ErrorKind::TimedOut
                | ErrorKind::HostUnreachable
                | ErrorKind::NetworkUnreachable
        )
    };
    let s = loop {
        match stack.tcp_connect(to, Some(Duration::from_secs(10))) {
            Ok(s) => break s,
            Err(e) if again(e.kind()) && Instant::now() < give_up => {
                if stop.load(Ordering::Relaxed) {
                    return Err("stopped".into());
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(format!("connect to {to}: {e}")),
        }
    };
    let t0 = Instant::now();
    let idle = Duration::from_secs(60);
    // Milliseconds since t0 of the last progress in either direction: a sender whose
    // peer never answers (`nc -l > file`) is not idle while its writes move.
    let progress = AtomicU64::new(0);
    let stalled = || {
        let last = Duration::from_millis(progress.load(Ordering::Relaxed));
        t0.elapsed().saturating_sub(last) > idle
    };
    let moved = || progress.store(t0.elapsed().as_millis() as u64, Ordering::Relaxed);
    // A timed-out read or write is a pause, unless the run is stopping or stalled;
    // any other error ends the run.
    let waited = |e: &std::io::Error, what: &str| -> Result<(), String> {
        if !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) {
            return Err(format!("{what}: {e}"));
        }
        if stop.load(Ordering::Relaxed) {
            return Err("stopped".into());
        }
        if stalled() {
            return Err(format!("no progress either way for {idle:?}"));
        }
        Ok(())
    };
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(Duration::from_millis(200)))
        .map_err(|e| e.to_string())?;
    std::thread::scope(|sc| {
        let reader = sc.spawn(|| -> Result<(u64, String), String> {
            let mut h = Sha256::new();
            let mut buf = vec![0u8; 256 * 1024];
            let mut got = 0u64;
            loop {
                match (&s).read(&mut buf) {
                    Ok(0) => return Ok((got, hex(&h.finalize()))),
                    Ok(n) => {
                        h.update(&buf[..n]);
                        got += n as u64;
                        moved();
                    }
                    Err(e) => waited(&e, "read")?,
                }
            }
        });
        let mut h = Sha256::new();
        let mut p = Pattern::new(seed);
        let mut buf = vec![0u8; 256 * 1024];
        let mut sent = 0u64;
        while sent < bytes {
            let n = ((bytes - sent) as usize).min(buf.len());
            p.fill(&mut buf[..n]);
            h.update(&buf[..n]);
            let mut off = 0;
            while off < n {
                match (&s).write(&buf[off..n]) {
                    Ok(k) => {
                        off += k;
                        moved();
                    }
                    Err(e) => waited(&e, &format!("write after {sent} bytes"))?,
                }
            }
            sent += n as u64;
        }
        s.shutdown(std::net::Shutdown::Write)
            .map_err(|e| format!("shutdown: {e}"))?;
        let sent_sha256 = hex(&h.finalize());
        let (received, received_sha256) = reader
            .join()
            .map_err(|_| "reader thread panicked".to_string())??;
        Ok(Report {
            sent,
            sent_sha256,
            received,
            received_sha256,
            secs: t0.elapsed().as_secs_f64(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_parse_with_units_and_reject_nonsense() {
        assert_eq!(parse_bytes("1000"), Ok(1000));
        assert_eq!(parse_bytes("64K"), Ok(65536));
        assert_eq!(parse_bytes("1G"), Ok(1 << 30));
        assert_eq!(parse_bytes("100MB"), Ok(100_000_000));
        assert!(parse_bytes("").is_err());
        assert!(parse_bytes("12Q").unwrap_err().contains("unknown unit"));
        assert!(parse_bytes("99999999999999G")
            .unwrap_err()
            .contains("too large"));
    }

    #[test]
    fn pattern_is_reproducible_and_covers_partial_words() {
        let (mut a, mut b) = (Pattern::new(5), Pattern::new(5));
        let mut x = [0u8; 13];
        let mut y = [0u8; 13];
        a.fill(&mut x);
        b.fill(&mut y);
        assert_eq!(x, y);
        assert!(x.iter().any(|&v| v != 0));
    }
}
