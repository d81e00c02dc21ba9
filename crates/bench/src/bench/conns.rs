//! The connection figures of `bench tcp`:
//!
//! - connections per second: client threads loop over open, one 64-byte request, a
//!   64-byte answer, close; the server closes first (so TIME_WAIT stays on the server
//!   and the client's ports come back at once) and the client closes when it reads the
//!   end of stream. mpstack (two stacks over a memory wire) and, as the baseline, the
//!   Linux kernel over loopback through `std::net`, with the same threads and ports;
//! - heap per idle established connection: N connections opened between two mpstack
//!   stacks and kept open, every `TcpStream` alive on both sides, the growth of the
//!   heap (a counting global allocator) and of VmRSS divided by N.

use dev::mem::{wire, WireConfig};
use net::{Stack, StackConfig, TcpListener, TcpStream};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Bytes of the request and of the answer.
pub const MSG: usize = 64;
/// Client threads of the connection-rate workload.
pub const CLIENTS: usize = 4;
/// Listening ports (and server threads) of the connection-rate workload: 16384
/// client ports times 16 server ports is 262,144 4-tuples before one comes back.
pub const RATE_PORTS: u16 = 16;
/// First listening port.
const BASE_PORT: u16 = 5001;
/// Ephemeral ports mpstack's client side cycles through (49152-65535).
const EPHEMERAL: u64 = 16384;
const SERVER_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// Connections opened at a time before waiting for their handshakes (idle workload).
const BATCH: usize = 1024;

/// One connection-rate measurement.
#[derive(Debug)]
pub struct ConnRate {
    pub name: &'static str,
    /// Connections that completed open, request, answer and close.
    pub conns: u64,
    /// Connections that failed (refused, reset, timed out).
    pub failed: u64,
    pub secs: f64,
    pub first_error: Option<String>,
    /// Slowest handshake and slowest request-answer-close (seconds).
    pub max_connect: f64,
    pub max_exchange: f64,
    /// Connections that took 100 ms or more.
    pub slow: u64,
}

impl ConnRate {
    pub fn per_s(&self) -> f64 {
        self.conns as f64 / self.secs.max(1e-9)
    }
}

/// The idle-connection memory measurement.
#[derive(Debug)]
pub struct IdleMem {
    pub requested: usize,
    /// Connections established on the client and accepted on the server.
    pub conns: usize,
    /// Growth of the heap in use (requested sizes) with every connection open.
    pub heap_bytes: u64,
    /// Growth of VmRSS (bytes; 0 where /proc is missing).
    pub rss_bytes: u64,
    /// Seconds taken to open (and accept) the connections.
    pub open_secs: f64,
    pub server_ports: u16,
    /// Why fewer than `requested` connections were reached.
    pub short: Option<String>,
}

impl IdleMem {
    pub fn heap_per_pair(&self) -> f64 {
        self.heap_bytes as f64 / self.conns.max(1) as f64
    }
    pub fn rss_per_pair(&self) -> f64 {
        self.rss_bytes as f64 / self.conns.max(1) as f64
    }
}

fn stack(
    name: &str,
    workers: usize,
    max_conns: usize,
    dev: dev::mem::MemDevice,
    addr: &str,
) -> Result<Stack, String> {
    sim::standalone_host_with(
        StackConfig {
            name: name.into(),
            workers,
            tcp_max_conns: max_conns,
            ..StackConfig::default()
        },
        Box::new(dev),
        addr,
    )
}

/// Two stacks (client 198.18.0.1, server 198.18.0.2) on a memory wire, not started.
fn pair(workers: usize, max_conns: usize) -> Result<(Stack, Stack), String> {
    let (da, db) = wire(WireConfig {
        num_queues: workers,
        queue_limit: 4096,
        ..WireConfig::default()
    });
    let a = stack("conns-a", workers, max_conns, da, "198.18.0.1/24")?;
    let b = stack("conns-b", workers, max_conns, db, "198.18.0.2/24")?;
    Ok((a, b))
}

fn listen_all(b: &Stack, ports: u16, backlog: usize) -> Result<Vec<TcpListener>, String> {
    (0..ports)
        .map(|i| {
            b.tcp_listen(
                SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, BASE_PORT + i),
                backlog,
            )
            .map_err(|e| format!("listen on port {}: {e}", BASE_PORT + i))
        })
        .collect()
}

/// The server's side of one connection: read the request, answer, close (by the drop).
fn answer<S: Read + Write>(mut s: S) -> io::Result<()> {
    let mut buf = [0u8; MSG];
    s.read_exact(&mut buf)?;
    s.write_all(&buf)
}

/// The client's side: request, answer, then the server's end of stream.
fn request<S: Read + Write>(mut s: S) -> io::Result<()> {
    s.write_all(&[0x5a; MSG])?;
    let mut buf = [0u8; MSG];
    s.read_exact(&mut buf)?;
    match s.read(&mut buf[..1])? {
        0 => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "data after the answer",
        )),
    }
}

#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    /// Slowest handshake and slowest request-answer-close, in microseconds.
    max_connect_us: AtomicU64,
    max_exchange_us: AtomicU64,
    /// Connections that took 100 ms or more.
    slow: AtomicU64,
    failed: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl Tally {
    /// The figures of a run that lasted `secs`.
    fn rate(&self, name: &'static str, secs: f64) -> ConnRate {
        ConnRate {
            name,
            conns: self.ok.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            secs,
            max_connect: self.max_connect_us.load(Ordering::Relaxed) as f64 / 1e6,
            max_exchange: self.max_exchange_us.load(Ordering::Relaxed) as f64 / 1e6,
            slow: self.slow.load(Ordering::Relaxed),
            first_error: self.first(),
        }
    }

    fn first(&self) -> Option<String> {
        self.first_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn fail(&self, what: &str, e: &dyn std::fmt::Display) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        let mut f = self.first_error.lock().unwrap_or_else(|p| p.into_inner());
        if f.is_none() {
            *f = Some(format!("{what}: {e}"));
        }
    }
}

/// A server thread: answers connections one after the other until `stop` (checked
/// after each accept; the caller wakes it with one more connection).
fn serve<S: Read + Write>(accept: impl Fn() -> io::Result<S>, stop: &AtomicBool, tally: &Tally) {
    loop {
        let s = match accept() {
            Ok(s) => s,
            Err(e) => {
                tally.fail("accept", &e);
                return;
            }
        };
        if stop.load(Ordering::Acquire) {
            return;
        }
        if let Err(e) = answer(s) {
            tally.fail("server", &e);
        }
    }
}

/// Runs `CLIENTS` client threads for `secs` seconds; `connect(i)` opens connection
/// number `i` (which also chooses its server port).
fn drive<S: Read + Write>(
    secs: f64,
    connect: impl Fn(u64) -> io::Result<S> + Sync,
    tally: &Tally,
) -> f64 {
    let next = AtomicU64::new(0);
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs_f64(secs);
    thread::scope(|sc| {
        for _ in 0..CLIENTS {
            sc.spawn(|| {
                while Instant::now() < deadline {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let t = Instant::now();
                    let r = connect(i).and_then(|s| {
                        let c = t.elapsed();
                        tally
                            .max_connect_us
                            .fetch_max(c.as_micros() as u64, Ordering::Relaxed);
                        request(s)?;
                        let x = t.elapsed() - c;
                        tally
                            .max_exchange_us
                            .fetch_max(x.as_micros() as u64, Ordering::Relaxed);
                        Ok(())
                    });
                    if t.elapsed() >= Duration::from_millis(100) {
                        tally.slow.fetch_add(1, Ordering::Relaxed);
                    }
                    match r {
                        Ok(()) => {
                            tally.ok.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => tally.fail("client", &e),
                    }
                }
            });
        }
    });
    t0.elapsed().as_secs_f64()
}

/// Connections per second between two mpstack stacks.
pub fn rate_mpstack(secs: f64, workers: usize) -> Result<ConnRate, String> {
    // TIME_WAIT connections (60 s, on the server) count against the per-worker bound.
    let (mut a, mut b) = pair(workers, 1 << 20)?;
    let listeners = listen_all(&b, RATE_PORTS, 4096)?;
    a.start().map_err(|e| e.to_string())?;
    b.start().map_err(|e| e.to_string())?;
    // A `Stack` is not `Sync`; the lock covers only the start of a connect (a message
    // to a worker), the handshake is awaited outside it. Under the lock, connection
    // `n` takes client port 49152 + n % 16384 (the stack's cursor, which nothing else
    // on this stack moves) and server port BASE_PORT + (n / 16384) % RATE_PORTS, so a
    // 4-tuple comes back only after 16384 * RATE_PORTS connections: mpstack does not
    // reliably reuse a 4-tuple that the server holds in TIME_WAIT.
    let a = Mutex::new((a, 0u64));
    let connect = |timeout: Option<Duration>| -> io::Result<TcpStream> {
        let s = {
            let mut g = a.lock().unwrap_or_else(|p| p.into_inner());
            let port = BASE_PORT + ((g.1 / EPHEMERAL) % u64::from(RATE_PORTS)) as u16;
            g.1 += 1;
            g.0.tcp_connect_nonblocking(SocketAddrV4::new(SERVER_IP, port))?
        };
        s.wait_connected(timeout)?;
        Ok(s)
    };
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let timeout = Some(Duration::from_secs(5));
    // The server threads are left parked in `accept` when the run ends (until the
    // process exits): mpstack's accept has no timeout, and a last connection to wake
    // each one would have to reuse a 4-tuple the server holds in TIME_WAIT.
    for l in listeners {
        let (stop, tally) = (stop.clone(), tally.clone());
        thread::spawn(move || {
            let accept = || {
                let (s, _) = l.accept()?;
                s.set_nodelay(true)?;
                s.set_read_timeout(timeout)?;
                s.set_write_timeout(timeout)?;
                Ok(s)
            };
            serve(accept, &stop, &tally)
        });
    }
    let secs = drive(
        secs,
        |_| {
            let s = connect(timeout)?;
            s.set_nodelay(true)?;
            s.set_read_timeout(timeout)?;
            s.set_write_timeout(timeout)?;
            Ok(s)
        },
        &tally,
    );
    stop.store(true, Ordering::Release);
    a.into_inner().unwrap_or_else(|p| p.into_inner()).0.stop();
    b.stop();
    Ok(tally.rate("mpstack", secs))
}

/// The same workload through the Linux kernel over 127.0.0.1 (`std::net`).
pub fn rate_kernel(secs: f64) -> Result<ConnRate, String> {
    let listeners: Vec<std::net::TcpListener> = (0..RATE_PORTS)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<io::Result<_>>()
        .map_err(|e| format!("listen: {e}"))?;
    let addrs: Vec<std::net::SocketAddr> = listeners
        .iter()
        .map(std::net::TcpListener::local_addr)
        .collect::<io::Result<_>>()
        .map_err(|e| e.to_string())?;
    let stop = AtomicBool::new(false);
    let tally = Tally::default();
    let timeout = Duration::from_secs(5);
    let secs = thread::scope(|sc| {
        for l in &listeners {
            let (stop, tally) = (&stop, &tally);
            sc.spawn(move || {
                let accept = || {
                    let (s, _) = l.accept()?;
                    s.set_nodelay(true)?;
                    s.set_read_timeout(Some(timeout))?;
                    s.set_write_timeout(Some(timeout))?;
                    Ok(s)
                };
                serve(accept, stop, tally)
            });
        }
        let secs = drive(
            secs,
            |i| {
                let to = addrs[((i / EPHEMERAL) % u64::from(RATE_PORTS)) as usize];
                let s = std::net::TcpStream::connect_timeout(&to, timeout)?;
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(timeout))?;
                s.set_write_timeout(Some(timeout))?;
                Ok(s)
            },
            &tally,
        );
        stop.store(true, Ordering::Release);
        for to in &addrs {
            if let Err(e) = std::net::TcpStream::connect_timeout(to, timeout) {
                eprintln!("bench: cannot wake the server thread of {to}: {e}; aborting");
                std::process::exit(2);
            }
        }
        secs
    });
    Ok(tally.rate("linux-loopback", secs))
}

/// VmRSS of this process in bytes (0 where /proc is missing).
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// The idle workload's accepting thread: takes the connections of every listener
/// until `stop` (taking is cheap), sleeping a millisecond when none waits so as not
/// to compete with the stacks; an accept error ends it, kept in `accept_error`.
fn accept_all(
    listeners: &[TcpListener],
    servers: &Mutex<Vec<TcpStream>>,
    accepted: &AtomicUsize,
    stop: &AtomicBool,
    accept_error: &Mutex<Option<String>>,
) {
    for l in listeners {
        l.set_nonblocking(true).ok();
    }
    while !stop.load(Ordering::Acquire) {
        let mut took = 0;
        for l in listeners {
            loop {
                match l.accept() {
                    Ok((s, _)) => {
                        servers.lock().unwrap_or_else(|p| p.into_inner()).push(s);
                        accepted.fetch_add(1, Ordering::Release);
                        took += 1;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => {
                        *accept_error.lock().unwrap_or_else(|p| p.into_inner()) =
                            Some(e.to_string());
                        return;
                    }
                }
            }
        }
        if took == 0 {
            thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Opens `n` connections between two mpstack stacks within `limit`, keeps them idle,
/// and measures the heap and RSS they take. `progress` gets a line every 10,000.
pub fn idle(
    n: usize,
    workers: usize,
    limit: Duration,
    progress: &dyn Fn(&str),
) -> Result<IdleMem, String> {
    // 16384 client ports per server port; one port to spare for refused 4-tuples.
    let requested = n;
    let ports = (n.div_ceil(EPHEMERAL as usize) + 1).clamp(2, 64) as u16;
    let n = n.min((usize::from(ports) - 1) * EPHEMERAL as usize);
    let (mut a, mut b) = pair(workers, n + 4096)?;
    let listeners = listen_all(&b, ports, 65_535)?;
    a.start().map_err(|e| e.to_string())?;
    b.start().map_err(|e| e.to_string())?;
    // Everything the measurement itself keeps is allocated before the baseline.
    let mut clients: Vec<TcpStream> = Vec::with_capacity(n);
    let servers: Mutex<Vec<TcpStream>> = Mutex::new(Vec::with_capacity(n + BATCH));
    let accepted = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let accept_error: Mutex<Option<String>> = Mutex::new(None);
    let mut short = None;
    let mut failed = 0usize;
    let mut first_error: Option<String> = None;
    let r = thread::scope(|sc| {
        // One thread takes the connections of every listener (taking is cheap); it
        // sleeps a millisecond when none waits, so as not to compete with the stacks.
        let (listeners, servers, accepted, stop, accept_error) =
            (&listeners, &servers, &accepted, &stop, &accept_error);
        sc.spawn(move || accept_all(listeners, servers, accepted, stop, accept_error));
        thread::sleep(Duration::from_millis(100));
        let heap0 = dev::alloc_count::live_bytes();
        let rss0 = rss_bytes();
        let t0 = Instant::now();
        let deadline = t0 + limit;
        let mut i = 0u64;
        let mut next_progress = 10_000;
        'open: while clients.len() < n {
            let start = clients.len();
            for _ in 0..(n - start).min(BATCH) {
                let port = BASE_PORT + ((i / EPHEMERAL) % u64::from(ports)) as u16;
                i += 1;
                loop {
                    match a.tcp_connect_nonblocking(SocketAddrV4::new(SERVER_IP, port)) {
                        Ok(s) => {
                            clients.push(s);
                            break;
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            if Instant::now() >= deadline {
                                break;
                            }
                            thread::sleep(Duration::from_micros(100));
                        }
                        Err(e) => {
                            short = Some(format!("connect: {e}"));
                            break 'open;
                        }
                    }
                }
            }
            let mut k = start;
            while k < clients.len() {
                let left = deadline.saturating_duration_since(Instant::now());
                match clients[k].wait_connected(Some(left.max(Duration::from_millis(1)))) {
                    Ok(()) => k += 1,
                    Err(e) => {
                        failed += 1;
                        first_error.get_or_insert_with(|| e.to_string());
                        clients.swap_remove(k);
                    }
                }
            }
            while clients.len() >= next_progress {
                progress(&format!(
                    "idle: {next_progress} connections open ({:.1} s)",
                    t0.elapsed().as_secs_f64()
                ));
                next_progress += 10_000;
            }
            if Instant::now() >= deadline {
                short = Some(format!("time limit of {} s reached", limit.as_secs_f64()));
                break;
            }
            if failed > n / 10 + 100 {
                short = Some(format!(
                    "{failed} connects failed (first: {})",
                    first_error.as_deref().unwrap_or("?")
                ));
                break;
            }
        }
        // The server's side catches up (accept threads poll).
        let wait_until = Instant::now() + Duration::from_secs(10);
        while accepted.load(Ordering::Acquire) < clients.len() && Instant::now() < wait_until {
            thread::sleep(Duration::from_millis(5));
        }
        let open_secs = t0.elapsed().as_secs_f64();
        // Let delayed ACKs and the like go out; then every connection is idle.
        thread::sleep(Duration::from_millis(300));
        let heap1 = dev::alloc_count::live_bytes();
        let rss1 = rss_bytes();
        stop.store(true, Ordering::Release);
        (
            heap1.saturating_sub(heap0),
            rss1.saturating_sub(rss0),
            open_secs,
        )
    });
    let (heap_bytes, rss_bytes, open_secs) = r;
    let got = accepted.load(Ordering::Acquire);
    let conns = clients.len().min(got);
    if short.is_none() && conns < requested {
        short = Some(
            match accept_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
                Some(e) => format!("accept: {e}"),
                None if got < clients.len() => {
                    format!("{} established, {got} accepted", clients.len())
                }
                None => format!(
                    "{failed} connects failed (first: {})",
                    first_error.as_deref().unwrap_or("?")
                ),
            },
        );
    }
    let t = Instant::now();
    drop(clients);
    drop(servers);
    drop(listeners);
    progress(&format!(
        "idle: closed in {:.1} s",
        t.elapsed().as_secs_f64()
    ));
    a.stop();
    b.stop();
    Ok(IdleMem {
        requested,
        conns,
        heap_bytes,
        rss_bytes,
        open_secs,
        server_ports: ports,
        short,
    })
}

/// Connections open at once in the polled workload.
pub const POLLED_INFLIGHT: usize = 64;

/// A connection of the polled workload, client side.
struct PolledClient {
    s: TcpStream,
    started: Instant,
    connected: bool,
    sent: usize,
    got: usize,
}

/// A connection of the polled workload, server side.
struct PolledServer {
    s: TcpStream,
    got: usize,
    sent: usize,
}

/// The polled workload's servers: each reads the request, answers, and is closed
/// (dropped) once it has.
fn serve_polled(
    servers: &mut Vec<PolledServer>,
    req: &[u8; MSG],
    buf: &mut [u8; MSG],
    tally: &Tally,
) {
    let would_block = |e: &io::Error| e.kind() == io::ErrorKind::WouldBlock;
    servers.retain_mut(|c| {
        while c.got < MSG {
            match (&c.s).read(&mut buf[..MSG - c.got]) {
                Ok(0) => {
                    tally.fail("server", &"end of stream before the request");
                    return false;
                }
                Ok(n) => c.got += n,
                Err(e) if would_block(&e) => return true,
                Err(e) => {
                    tally.fail("server", &e);
                    return false;
                }
            }
        }
        while c.sent < MSG {
            match (&c.s).write(&req[c.sent..]) {
                Ok(n) => c.sent += n,
                Err(e) if would_block(&e) => return true,
                Err(e) => {
                    tally.fail("server", &e);
                    return false;
                }
            }
        }
        false
    });
}

/// Connections per second with both stacks and every application in one thread
/// (`Stack::poll`, non-blocking streams), the way the smoltcp row runs: the same
/// exchange as [`rate_mpstack`] (open, 64 bytes each way, the server closes first,
/// the client closes on end of stream), [`POLLED_INFLIGHT`] connections in flight,
/// no worker thread and no wake-up.
pub fn rate_polled(secs: f64) -> Result<ConnRate, String> {
    use dev::time::{Clock, MonotonicClock};
    let (mut a, mut b) = pair(1, 1 << 20)?;
    let listeners = listen_all(&b, RATE_PORTS, 4096)?;
    for l in &listeners {
        l.set_nonblocking(true).map_err(|e| e.to_string())?;
    }
    let clock = MonotonicClock::new();
    let tally = Tally::default();
    let mut clients: Vec<PolledClient> = Vec::with_capacity(POLLED_INFLIGHT);
    let mut servers: Vec<PolledServer> = Vec::new();
    let mut opened = 0u64;
    // One connection until the first handshake is done, so that address resolution
    // (whose hold queue keeps a few packets, as FreeBSD's) does not drop the SYNs of
    // the first burst.
    let mut resolved = false;
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs_f64(secs);
    let req = [0x5au8; MSG];
    let mut buf = [0u8; MSG];
    let would_block = |e: &io::Error| e.kind() == io::ErrorKind::WouldBlock;
    loop {
        let now = Instant::now();
        let running = now < deadline;
        if !running && clients.is_empty() {
            break;
        }
        if now > deadline + Duration::from_secs(10) {
            tally.fail("client", &"connections still open 10 s after the run");
            break;
        }
        let inflight = if resolved { POLLED_INFLIGHT } else { 1 };
        while running && clients.len() < inflight {
            let port = BASE_PORT + ((opened / EPHEMERAL) % u64::from(RATE_PORTS)) as u16;
            opened += 1;
            match a.tcp_connect_nonblocking(SocketAddrV4::new(SERVER_IP, port)) {
                Ok(s) => {
                    s.set_nonblocking(true).map_err(|e| e.to_string())?;
                    s.set_nodelay(true).map_err(|e| e.to_string())?;
                    clients.push(PolledClient {
                        s,
                        started: Instant::now(),
                        connected: false,
                        sent: 0,
                        got: 0,
                    });
                }
                Err(e) => {
                    tally.fail("connect", &e);
                    break;
                }
            }
        }
        let t = clock.now();
        a.poll(t);
        b.poll(t);
        for l in &listeners {
            loop {
                match l.accept() {
                    Ok((s, _)) => {
                        s.set_nonblocking(true).map_err(|e| e.to_string())?;
                        s.set_nodelay(true).map_err(|e| e.to_string())?;
                        servers.push(PolledServer { s, got: 0, sent: 0 });
                    }
                    Err(e) if would_block(&e) => break,
                    Err(e) => {
                        tally.fail("accept", &e);
                        break;
                    }
                }
            }
        }
        // Server: read the request, answer, close (by dropping the stream).
        serve_polled(&mut servers, &req, &mut buf, &tally);
        // Client: once connected send the request, read the answer and the end of
        // stream, then close.
        clients.retain_mut(|c| {
            let fail = |e: &dyn std::fmt::Display| {
                tally.fail("client", e);
                false
            };
            if !c.connected {
                if !c.s.is_connected() {
                    return match c.s.take_error() {
                        Ok(Some(e)) | Err(e) => fail(&e),
                        Ok(None) => true,
                    };
                }
                c.connected = true;
                resolved = true;
                let us = c.started.elapsed().as_micros() as u64;
                tally.max_connect_us.fetch_max(us, Ordering::Relaxed);
            }
            while c.sent < MSG {
                match (&c.s).write(&req[c.sent..]) {
                    Ok(n) => c.sent += n,
                    Err(e) if would_block(&e) => return true,
                    Err(e) => return fail(&e),
                }
            }
            loop {
                match (&c.s).read(&mut buf) {
                    Ok(0) if c.got == MSG => {
                        let took = c.started.elapsed();
                        tally
                            .max_exchange_us
                            .fetch_max(took.as_micros() as u64, Ordering::Relaxed);
                        if took >= Duration::from_millis(100) {
                            tally.slow.fetch_add(1, Ordering::Relaxed);
                        }
                        tally.ok.fetch_add(1, Ordering::Relaxed);
                        return false;
                    }
                    Ok(0) => return fail(&"end of stream before the answer"),
                    Ok(n) if c.got + n > MSG => return fail(&"data after the answer"),
                    Ok(n) => c.got += n,
                    Err(e) if would_block(&e) => return true,
                    Err(e) => return fail(&e),
                }
            }
        });
    }
    let secs = t0.elapsed().as_secs_f64().min(secs.max(1e-9) + 10.0);
    Ok(tally.rate("mpstack-polled", secs.max(1e-9)))
}
