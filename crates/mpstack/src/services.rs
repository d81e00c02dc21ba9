//! The small TCP services of `mpstack run --serve` (inetd's internal services):
//! echo (RFC 862, port 7), discard (RFC 863, port 9) and chargen (RFC 864, port 19);
//! and an HTTP/1.1 server (hyper) for the static files of a directory (port 80: GET
//! and HEAD, keep-alive, `Content-Length`; no ranges).
//!
//! Every connection is a task on one small tokio runtime, over the stack's own
//! sockets (net's `tokio` feature): no thread per connection and no reactor — the
//! stack's workers wake the tasks. What an idle crowd costs is therefore a task and a
//! connection, not a thread, and three bounds set by the operator ([`Limits`]) keep
//! a silent crowd (a slowloris) from shutting out new clients: an idle timeout (no
//! byte either way for that long closes the connection), a header timeout for HTTP
//! (the request head must arrive within it), and a limit on connections served at
//! once, beyond which a new connection is refused with a reset and counted.

use net::{Stack, TcpListener, TcpStream};
use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

/// Each listener's backlog: connections half open or established and not yet taken
/// by the accept task. Linux's `somaxconn` (4096): a burst of thousands of
/// connections waits here for the accept task instead of being refused (at 128, a
/// burst of 10,000 lost hundreds to resets), and the queue costs 32 KiB a listener.
pub const LISTEN_BACKLOG: usize = 4096;

/// The operator's bounds on the services (`mpstack run --serve-*`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// Connections served at once, over all services; beyond it a new connection is
    /// refused with a reset and counted in [`Counters::refused`].
    pub max_conns: usize,
    /// A connection that moves no byte either way for this long is closed.
    pub idle_timeout: Duration,
    /// HTTP: a request head must arrive whole within this long of the connection
    /// (or of the end of the previous response, on a kept-alive one).
    pub header_timeout: Duration,
}

impl Limits {
    /// One worker's TCP connection table holds 65,536 connections
    /// (`StackConfig::tcp_max_conns`); the services may serve as many.
    pub const DEFAULT_MAX_CONNS: usize = 65_536;
    pub const DEFAULT_IDLE_SECS: f64 = 120.0;
    pub const DEFAULT_HEADER_SECS: f64 = 20.0;
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_conns: Limits::DEFAULT_MAX_CONNS,
            idle_timeout: Duration::from_secs_f64(Limits::DEFAULT_IDLE_SECS),
            header_timeout: Duration::from_secs_f64(Limits::DEFAULT_HEADER_SECS),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Service {
    Echo,
    Discard,
    Chargen,
    /// Static files from this directory.
    Http(std::path::PathBuf),
}

impl Service {
    pub fn port(&self) -> u16 {
        match self {
            Service::Echo => 7,
            Service::Discard => 9,
            Service::Chargen => 19,
            Service::Http(_) => 80,
        }
    }
    pub fn name(&self) -> &'static str {
        match self {
            Service::Echo => "echo",
            Service::Discard => "discard",
            Service::Chargen => "chargen",
            Service::Http(_) => "http",
        }
    }
}

/// Parses `echo,discard,chargen` (or `none`).
pub fn parse_list(s: &str) -> Result<Vec<Service>, String> {
    let mut v = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let svc = match part {
            "echo" => Service::Echo,
            "discard" => Service::Discard,
            "chargen" => Service::Chargen,
            "none" => continue,
            http if http.starts_with("http=") => {
                let dir = std::path::PathBuf::from(&http[5..]);
                if !dir.is_dir() {
                    return Err(format!("--serve: http={}: not a directory", dir.display()));
                }
                Service::Http(dir)
            }
            other => {
                return Err(format!(
                    "--serve: unknown service '{other}' (known: echo, discard, chargen, http=DIR, none)"
                ))
            }
        };
        if !v.contains(&svc) {
            v.push(svc);
        }
    }
    Ok(v)
}

/// What the services did, for the exit report.
#[derive(Debug, Default)]
pub struct Counters {
    /// Connections taken and served.
    pub connections: AtomicU64,
    /// Connections refused with a reset: the limit was reached.
    pub refused: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    /// Connections closed for moving no byte for the idle timeout.
    pub idle_timeouts: AtomicU64,
    /// HTTP connections closed for not sending a request head within the header
    /// timeout.
    pub header_timeouts: AtomicU64,
    /// Connections being served now.
    pub active: AtomicUsize,
}

/// The running services: [`Services::join`] waits for them to end once the stop flag
/// is up.
#[derive(Debug)]
pub struct Services {
    thread: JoinHandle<()>,
}

impl Services {
    pub fn join(self) {
        let _ = self.thread.join();
    }
}

/// Listens for each service and family (IPv4 always, IPv6 on `[::]` with `inet6`)
/// and serves on a runtime of `threads` threads until `stop` is raised; then every
/// connection is closed.
pub fn start(
    stack: &Stack,
    services: &[Service],
    inet6: bool,
    threads: usize,
    limits: Limits,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
) -> Result<Services, String> {
    let mut listens: Vec<(Service, SocketAddr)> = Vec::new();
    for svc in services {
        listens.push((
            svc.clone(),
            SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, svc.port()).into(),
        ));
        if inet6 {
            listens.push((
                svc.clone(),
                SocketAddr::new(std::net::Ipv6Addr::UNSPECIFIED.into(), svc.port()),
            ));
        }
    }
    let mut listeners = Vec::new();
    for (svc, at) in listens {
        let l = stack
            .tcp_listen(at, LISTEN_BACKLOG)
            .map_err(|e| format!("{} service (TCP {at}): {e}", svc.name()))?;
        listeners.push((svc, l));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .thread_name("svc")
        .enable_time()
        .build()
        .map_err(|e| format!("services runtime: {e}"))?;
    let thread = std::thread::Builder::new()
        .name("services".into())
        .spawn(move || {
            rt.block_on(async {
                for (svc, l) in listeners {
                    tokio::spawn(accept_loop(svc, l, limits, counters.clone()));
                }
                tokio::spawn(give_back_memory(counters.clone()));
                while !stop.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            });
            // Dropping the tasks drops their connections: each is closed (a FIN).
            rt.shutdown_timeout(Duration::from_secs(1));
        })
        .map_err(|e| e.to_string())?;
    Ok(Services { thread })
}

/// Takes one listener's connections; each is served by a task of its own.
async fn accept_loop(svc: Service, l: TcpListener, limits: Limits, counters: Arc<Counters>) {
    let svc = Arc::new(svc);
    loop {
        let c = match l.accept_async().await {
            Ok((c, _)) => c,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if counters.active.fetch_add(1, Ordering::AcqRel) >= limits.max_conns {
            counters.active.fetch_sub(1, Ordering::AcqRel);
            counters.refused.fetch_add(1, Ordering::Relaxed);
            // A reset: the client learns at once, and no TIME_WAIT is kept.
            c.abort();
            continue;
        }
        counters.connections.fetch_add(1, Ordering::Relaxed);
        let (svc, counters) = (svc.clone(), counters.clone());
        tokio::spawn(async move {
            serve(&svc, c, limits, &counters).await;
            counters.active.fetch_sub(1, Ordering::AcqRel);
        });
    }
}

/// Connections that must have ended since the most served at once before the heap
/// is trimmed: at some 8 KiB each (task, HTTP buffers, the stack's control block and
/// channels), a thousand are megabytes.
const TRIM_AFTER: usize = 1024;

/// Once a crowd has gone (a thousand connections fewer than at the peak), gives the
/// memory it held back to the system, so the node's footprint follows its load down
/// as well as up (`dev::heap::trim`). Checked every second.
async fn give_back_memory(counters: Arc<Counters>) {
    let mut peak = 0;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = counters.active.load(Ordering::Relaxed);
        peak = peak.max(now);
        if peak >= now + TRIM_AFTER {
            dev::heap::trim();
            peak = now;
        }
    }
}

/// The last time a connection moved a byte, in nanoseconds from `base`.
#[derive(Debug)]
struct Activity {
    base: Instant,
    last: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Activity {
            base: Instant::now(),
            last: AtomicU64::new(0),
        }
    }
    fn touch(&self) {
        let now = self.base.elapsed().as_nanos() as u64;
        self.last.store(now, Ordering::Relaxed);
    }
    fn idle_for(&self) -> Duration {
        let last = Duration::from_nanos(self.last.load(Ordering::Relaxed));
        self.base.elapsed().saturating_sub(last)
    }

    /// Ready once the connection has been idle for `limit`.
    async fn idle(&self, limit: Duration) {
        loop {
            let idle = self.idle_for();
            if idle >= limit {
                return;
            }
            tokio::time::sleep(limit - idle).await;
        }
    }
}

/// A connection that counts its bytes and notes when it last moved one.
struct Metered<'a> {
    c: &'a TcpStream,
    act: &'a Activity,
    counters: &'a Counters,
}

impl AsyncRead for Metered<'_> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let mut c = self.c;
        let r = Pin::new(&mut c).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        if n > 0 {
            self.act.touch();
            self.counters
                .bytes_in
                .fetch_add(n as u64, Ordering::Relaxed);
        }
        r
    }
}

impl AsyncWrite for Metered<'_> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut c = self.c;
        let r = Pin::new(&mut c).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            if n > 0 {
                self.act.touch();
                self.counters
                    .bytes_out
                    .fetch_add(n as u64, Ordering::Relaxed);
            }
        }
        r
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.c.shutdown(std::net::Shutdown::Write))
    }
}

/// Serves one connection until it ends, errs or idles out; then it is closed.
async fn serve(svc: &Service, c: TcpStream, limits: Limits, counters: &Counters) {
    let act = Activity::new();
    let io = Metered {
        c: &c,
        act: &act,
        counters,
    };
    let work: Pin<Box<dyn Future<Output = ()> + Send + '_>> = match svc {
        Service::Echo => Box::pin(echo(io, true)),
        Service::Discard => Box::pin(echo(io, false)),
        Service::Chargen => Box::pin(chargen(io)),
        Service::Http(root) => Box::pin(async move {
            if let Err(e) = http::serve(root, io, limits.header_timeout).await {
                if e.is_timeout() {
                    counters.header_timeouts.fetch_add(1, Ordering::Relaxed);
                }
            }
        }),
    };
    tokio::select! {
        () = work => {}
        () = act.idle(limits.idle_timeout) => {
            counters.idle_timeouts.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Echo (or, without `echo`, discard) until the client's FIN, then a FIN back.
/// An idle connection holds no buffer but a small one in its task: a big one is taken
/// while bytes flow in fast and given back when they slow.
async fn echo(mut io: Metered<'_>, echo: bool) {
    const BIG: usize = 64 * 1024;
    let mut small = [0u8; 512];
    let mut big: Vec<u8> = Vec::new();
    loop {
        let buf: &mut [u8] = if big.is_empty() { &mut small } else { &mut big };
        let n = match io.read(buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let full = n == buf.len();
        if echo && io.write_all(&buf[..n]).await.is_err() {
            return;
        }
        if big.is_empty() && full {
            big = vec![0; BIG];
        } else if !big.is_empty() && n < BIG / 8 {
            big = Vec::new();
        }
    }
    let _ = io.shutdown().await;
}

/// RFC 864: lines of 72 characters from the rotating printable set, until the client
/// goes away.
async fn chargen(mut io: Metered<'_>) {
    let mut buf = vec![0u8; 74 * 220];
    let mut line = 0usize;
    loop {
        for row in buf.chunks_exact_mut(74) {
            for (k, b) in row[..72].iter_mut().enumerate() {
                *b = b' ' + ((line + k) % 95) as u8;
            }
            row[72] = b'\r';
            row[73] = b'\n';
            line += 1;
        }
        if io.write_all(&buf).await.is_err() {
            return;
        }
    }
}

mod http;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_lists_parse() {
        assert_eq!(parse_list("echo").unwrap(), vec![Service::Echo]);
        assert_eq!(
            parse_list("echo, discard,chargen,echo").unwrap(),
            vec![Service::Echo, Service::Discard, Service::Chargen]
        );
        assert!(parse_list("none").unwrap().is_empty());
        assert!(parse_list("http")
            .unwrap_err()
            .contains("unknown service 'http'"));
    }
}
