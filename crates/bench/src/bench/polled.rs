//! The `mpstack-polled` row of `mpstack bench tcp`: the same workload as the `mpstack`
//! row, but with both stacks and both applications in one thread, the way the smoltcp
//! row runs. No worker thread is started: the loop writes what the client's send
//! buffer takes, polls stack A, polls stack B, and reads what the server's receive
//! buffer holds, through non-blocking `TcpStream`s. This is mpstack's run-to-completion
//! mode (an application that owns its stack and calls `Stack::poll`), and it is the
//! comparison with smoltcp that holds everything else equal: one core, no hand-off
//! between threads, no wake-up.

use super::{Api, Measurement};
use dev::mem::{wire, WireConfig};
use dev::time::{Clock, MonotonicClock};
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

const CHUNK: usize = 256 * 1024;

/// Socket buffers of the rows: the stack's default, 256 KiB each way, as smoltcp's.
pub const BUFFERS: usize = 256 * 1024;
/// Socket buffers of `mpstack-polled-big`: two of its 512 KiB segments, which moved
/// more than four (139.5-140.4 Gbit/s against 135.8-137.9 over 256 MiB, 145.1-145.7
/// against 140.7-143.9 over 2 GiB, alternated). smoltcp-64k is no faster with larger
/// ones: 54.3-54.7 Gbit/s with 1 MiB against 52.5-57.4 with 256 KiB; 53.1-54.9 with
/// 2 MiB against 56.3-57.9, five runs each, alternated.
pub const BIG_BUFFERS: usize = 1024 * 1024;

/// Sends `bytes` from one stack to the other over a memory wire with `offload`,
/// socket buffers of `buffers` bytes each way, the applications making `api`'s calls.
pub(crate) fn transfer(
    bytes: u64,
    offload: dev::Offloads,
    buffers: usize,
    api: Api,
) -> Result<Measurement, String> {
    let (da, db) = wire(WireConfig {
        num_queues: 1,
        queue_limit: 4096,
        offload,
        ..WireConfig::default()
    });
    let host = |name: &str, dev, addr: &str| {
        let mut cfg = net::StackConfig {
            name: name.into(),
            workers: 1,
            ..net::StackConfig::default()
        };
        cfg.tcp.sndbuf = buffers;
        cfg.tcp.rcvbuf = buffers;
        sim::standalone_host_with(cfg, Box::new(dev), addr)
    };
    let mut a = host("bench-a", da, "198.18.0.1/24")?;
    let mut b = host("bench-b", db, "198.18.0.2/24")?;
    let l = b
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 5001), 4)
        .map_err(|e| e.to_string())?;
    l.set_nonblocking(true).map_err(|e| e.to_string())?;
    let c = a
        .tcp_connect_nonblocking(SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 5001))
        .map_err(|e| format!("connect: {e}"))?;
    c.set_nonblocking(true).map_err(|e| e.to_string())?;
    let chunk = vec![0x5au8; CHUNK];
    let mut sink = vec![0u8; CHUNK];
    let (mut sent, mut got) = (0u64, 0u64);
    let mut server = None;
    let mut shut = false;
    let mut t0: Option<Instant> = None;
    let started = Instant::now();
    let limit = Duration::from_secs(30 + bytes / (10 << 20));
    let err = |what: &str, e: std::io::Error| format!("mpstack-polled {what}: {e}");
    let clock = MonotonicClock::new();
    loop {
        let now = clock.now();
        a.poll(now);
        b.poll(now);
        if server.is_none() {
            match l.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(true).map_err(|e| e.to_string())?;
                    server = Some(s);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(err("accept", e)),
            }
        }
        if c.is_connected() {
            while sent < bytes {
                let n = ((bytes - sent) as usize).min(CHUNK);
                let wrote = match api {
                    Api::Copy => (&c).write(&chunk[..n]),
                    Api::ZeroCopy => c.write_with(n, super::produce),
                };
                match wrote {
                    Ok(0) => break,
                    Ok(w) => {
                        t0.get_or_insert_with(Instant::now);
                        sent += w as u64;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => return Err(err("write", e)),
                }
            }
            if sent == bytes && !shut {
                c.shutdown(std::net::Shutdown::Write)
                    .map_err(|e| err("shutdown", e))?;
                shut = true;
            }
        }
        if let Some(s) = &server {
            loop {
                let read = match api {
                    Api::Copy => (&*s).read(&mut sink),
                    Api::ZeroCopy => s.read_with(usize::MAX, |piece| piece.len()),
                };
                match read {
                    Ok(0) => {
                        let secs = t0.map_or(0.0, |t| t.elapsed().as_secs_f64());
                        if got != bytes {
                            return Err(format!("mpstack-polled delivered {got} of {bytes} bytes"));
                        }

                        return Ok(Measurement {
                            name: "mpstack-polled",
                            bytes,
                            secs,
                        });
                    }
                    Ok(n) => got += n as u64,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => return Err(err("read", e)),
                }
            }
        }
        if started.elapsed() > limit {
            return Err(format!(
                "mpstack-polled: {got} of {bytes} bytes after {} s",
                limit.as_secs()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Api;

    #[test]
    fn polled_transfer_delivers_every_byte() {
        // Its buffers come and go: not while the idle test counts the heap.
        let _quiet = crate::bench::heap_quiet();
        for (offload, buffers, api) in [
            (dev::Offloads::default(), super::BUFFERS, Api::Copy),
            (dev::Offloads::ALL, super::BUFFERS, Api::Copy),
            (dev::Offloads::BIG, super::BIG_BUFFERS, Api::Copy),
            (dev::Offloads::BIG, super::BIG_BUFFERS, Api::ZeroCopy),
        ] {
            let m = super::transfer(4 << 20, offload, buffers, api).unwrap();
            assert_eq!(m.bytes, 4 << 20);
            assert!(m.secs > 0.0);
        }
    }
}
