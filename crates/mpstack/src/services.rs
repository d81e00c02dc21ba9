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
//! once, beyond which a new connection is refused with a reset and counted. HTTP
//! also holds each source to [`Limits::max_conns_per_source`].
//!
//! The UDP namesakes ([`start_udp`]) answer a datagram only from a port of 1024 or
//! above (FreeBSD inetd's `check_loop`, OpenBSD's `dg_badinput`): a datagram forged
//! from another node's echo or chargen port would otherwise start two nodes
//! answering each other for ever. Each source is held to a few answers a second
//! ([`UdpLimits`], a bounded table), so a forged source cannot turn the node into
//! an amplifier of any size. Both are counted ([`UdpCounters`]). None of the
//! services runs unless asked for (`--serve` defaults to none).

use net::{Stack, TcpListener, TcpStream, UdpSocket};
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
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
    /// HTTP: connections one source address may hold at once; beyond, a new one
    /// is refused with a reset and counted in [`Counters::refused_source`].
    pub max_conns_per_source: usize,
}

impl Limits {
    /// One worker's TCP connection table holds 65,536 connections
    /// (`StackConfig::tcp_max_conns`); the services may serve as many.
    pub const DEFAULT_MAX_CONNS: usize = 65_536;
    pub const DEFAULT_IDLE_SECS: f64 = 120.0;
    pub const DEFAULT_HEADER_SECS: f64 = 20.0;
    /// As many as a browser opens to one server (six) several times over, for a
    /// few clients behind one NAT; far below what one source could hold of the
    /// whole limit.
    pub const DEFAULT_MAX_CONNS_PER_SOURCE: usize = 64;
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_conns: Limits::DEFAULT_MAX_CONNS,
            idle_timeout: Duration::from_secs_f64(Limits::DEFAULT_IDLE_SECS),
            header_timeout: Duration::from_secs_f64(Limits::DEFAULT_HEADER_SECS),
            max_conns_per_source: Limits::DEFAULT_MAX_CONNS_PER_SOURCE,
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

/// What `--serve` runs when not given: nothing. A host answers pings (ICMP echo)
/// as any host does; echo, discard and chargen are for tests and are asked for.
pub const DEFAULT_SERVE: &str = "none";

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

/// What listens, as the start-up line says it: each service with its protocols and
/// port, and the families (`none` when nothing does).
pub fn describe(services: &[Service], inet6: bool) -> String {
    if services.is_empty() {
        return "none".to_string();
    }
    let list: Vec<String> = services
        .iter()
        .map(|s| match s {
            Service::Http(dir) => format!("http (TCP 80, {})", dir.display()),
            s => format!("{} (TCP and UDP {})", s.name(), s.port()),
        })
        .collect();
    let fam = if inet6 { "IPv4 and IPv6" } else { "IPv4" };
    format!("{} on {fam}", list.join(", "))
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
    /// HTTP connections refused with a reset: their source held
    /// [`Limits::max_conns_per_source`] already.
    pub refused_source: AtomicU64,
}

/// What each source address holds now of the HTTP service (entries at zero are
/// removed, so the table holds at most as many entries as connections).
#[derive(Debug, Default)]
struct PerSource(std::sync::Mutex<HashMap<IpAddr, usize>>);

impl PerSource {
    /// Takes a slot for `ip` if it holds fewer than `max`.
    fn take(&self, ip: IpAddr, max: usize) -> bool {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.entry(ip).or_insert(0);
        if *n >= max {
            return false;
        }
        *n += 1;
        true
    }
    fn give(&self, ip: IpAddr) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = m.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                m.remove(&ip);
            }
        }
    }
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
        // An idle thread gives its buffer cache back when a reclaim asked for it
        // (give_back_memory below), so that its free buffers pin no slab.
        .on_thread_park(|| {
            mbuf::pool::reclaim_if_asked();
        })
        .enable_time()
        .build()
        .map_err(|e| format!("services runtime: {e}"))?;
    let mem = stack.tcp_mem_handle();
    let thread = std::thread::Builder::new()
        .name("services".into())
        .spawn(move || {
            rt.block_on(async {
                let sources = Arc::new(PerSource::default());
                for (svc, l) in listeners {
                    tokio::spawn(accept_loop(
                        svc,
                        l,
                        limits,
                        counters.clone(),
                        sources.clone(),
                        mem.clone(),
                    ));
                }
                tokio::spawn(give_back_memory(counters.clone(), mem));
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
async fn accept_loop(
    svc: Service,
    l: TcpListener,
    limits: Limits,
    counters: Arc<Counters>,
    sources: Arc<PerSource>,
    mem: Arc<net::tcp::TcpMem>,
) {
    let svc = Arc::new(svc);
    let per_source = matches!(*svc, Service::Http(_));
    loop {
        let (c, peer) = match l.accept_async().await {
            Ok(x) => x,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if per_source && !sources.take(peer.ip(), limits.max_conns_per_source) {
            counters.refused_source.fetch_add(1, Ordering::Relaxed);
            c.abort();
            continue;
        }
        if counters.active.fetch_add(1, Ordering::AcqRel) >= limits.max_conns {
            counters.active.fetch_sub(1, Ordering::AcqRel);
            counters.refused.fetch_add(1, Ordering::Relaxed);
            if per_source {
                sources.give(peer.ip());
            }
            // A reset: the client learns at once, and no TIME_WAIT is kept.
            c.abort();
            continue;
        }
        counters.connections.fetch_add(1, Ordering::Relaxed);
        let (svc, counters, sources) = (svc.clone(), counters.clone(), sources.clone());
        let mem = mem.clone();
        tokio::spawn(async move {
            serve(&svc, c, limits, &counters, mem).await;
            counters.active.fetch_sub(1, Ordering::AcqRel);
            if per_source {
                sources.give(peer.ip());
            }
        });
    }
}

/// Connections that must have ended since the most served at once before the heap
/// is trimmed: at some 8 KiB each (task, HTTP buffers, the stack's control block and
/// channels), a thousand are megabytes.
const TRIM_AFTER: usize = 1024;
/// Or bytes the stack's TCP buffers (`net.inet.tcp.mem`) must have given up since
/// their peak: connections end in every state, orphans and FIN_WAIT_1 long after
/// the service let them go, and their buffers are what was large.
const TRIM_AFTER_BYTES: usize = 16 << 20;

/// Once a crowd has gone (a thousand connections fewer than at the peak, or 16 MiB
/// less in the stack's TCP buffers), gives the memory it held back to the system,
/// so the node's footprint follows its load down as well as up: the buffer pool's
/// free slabs (`mbuf::pool::reclaim`; the stack's workers and the services' threads
/// give their caches back when next idle) and then the heap's free pages
/// (`dev::heap::trim`). Checked every second, so at most one trim a second. A
/// trim is followed by another the next second, and again for as long as the
/// crowd goes on shrinking: a crowd seen half gone is trimmed when all of it has
/// gone, and what the threads' caches gave back meanwhile is trimmed too.
async fn give_back_memory(counters: Arc<Counters>, mem: Arc<net::tcp::TcpMem>) {
    let (mut peak, mut peak_bytes) = (0, 0);
    // What the last trim left, while a follow-up is due.
    let mut due: Option<(usize, usize)> = None;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = counters.active.load(Ordering::Relaxed);
        let bytes = mem.total();
        peak = peak.max(now);
        peak_bytes = peak_bytes.max(bytes);
        let crowd_gone = peak >= now + TRIM_AFTER || peak_bytes >= bytes + TRIM_AFTER_BYTES;
        if crowd_gone || due.is_some() {
            mbuf::pool::reclaim();
            dev::heap::trim();
            let shrinking = due.is_some_and(|(n, b)| now < n || bytes < b);
            due = (crowd_gone || shrinking).then_some((now, bytes));
            (peak, peak_bytes) = (now, bytes);
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
async fn serve(
    svc: &Service,
    c: TcpStream,
    limits: Limits,
    counters: &Counters,
    mem: Arc<net::tcp::TcpMem>,
) {
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
            if let Err(e) = http::serve(root, io, limits.header_timeout, Some(mem)).await {
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

/// The UDP services' bound on what each source gets (`mpstack run
/// --serve-udp-rate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpLimits {
    /// Answers a second one source address may have, on average…
    pub per_source_rate: u32,
    /// …and at most this many in a burst.
    pub burst: u32,
    /// Source addresses each service tracks at once: a fixed table, whose slot
    /// a new source takes from an old one only once that one's burst is whole
    /// again (until then the two share it).
    pub sources: usize,
    /// Answers a second the service gives at most, over all sources (and in a
    /// burst): what forged sources spread over the whole table can get.
    pub total_rate: u32,
}

impl Default for UdpLimits {
    fn default() -> Self {
        UdpLimits {
            per_source_rate: 10,
            burst: 20,
            sources: 4096,
            total_rate: 1000,
        }
    }
}

/// What the UDP services did, for the exit report.
#[derive(Debug, Default)]
pub struct UdpCounters {
    /// Datagrams answered (echo and chargen), and of those by echo.
    pub answered: AtomicU64,
    pub echoed: AtomicU64,
    /// Datagrams discarded (discard, as its RFC says).
    pub discarded: AtomicU64,
    /// Datagrams not answered for their source: a port below 1024 (another
    /// node's service, perhaps its echo: inetd's loop), or no unicast address.
    pub loop_refused: AtomicU64,
    /// Datagrams not answered for their source's rate ([`UdpLimits`]).
    pub rate_limited: AtomicU64,
}

/// Whether a datagram from `from` may be answered. FreeBSD inetd's `check_loop`
/// refuses a datagram from the port of one of its own UDP services ("loop request
/// REFUSED"); OpenBSD's `dg_badinput` refuses any port below IPPORT_RESERVED
/// (1024), where every such service lives (echo 7, discard 9, daytime 13, qotd 17,
/// chargen 19, time 37) on the far node as well as here, and a source that is no
/// unicast address (unspecified, broadcast, multicast).
pub fn udp_source_ok(from: SocketAddr) -> bool {
    if from.port() < 1024 {
        return false;
    }
    match from.ip() {
        IpAddr::V4(a) => !(a.is_unspecified() || a.is_broadcast() || a.is_multicast()),
        IpAddr::V6(a) => !(a.is_unspecified() || a.is_multicast()),
    }
}

/// A token bucket per source address in a fixed table (see [`UdpLimits`]).
#[derive(Debug)]
pub struct SourceRate {
    limits: UdpLimits,
    hasher: std::collections::hash_map::RandomState,
    /// (source, thousandths of an answer in the bucket, when it was filled).
    slots: Vec<Option<(IpAddr, u64, Instant)>>,
}

impl SourceRate {
    pub fn new(limits: UdpLimits) -> SourceRate {
        SourceRate {
            limits,
            hasher: Default::default(),
            slots: vec![None; limits.sources.max(1)],
        }
    }

    /// Takes one answer from `ip`'s bucket at `now`: false if it is empty.
    pub fn allow(&mut self, ip: IpAddr, now: Instant) -> bool {
        use std::hash::BuildHasher;
        let full = u64::from(self.limits.burst) * 1000;
        let rate = u64::from(self.limits.per_source_rate);
        let i = (self.hasher.hash_one(ip) % self.slots.len() as u64) as usize;
        let refill = |tokens: u64, since: Instant| {
            let ms = now.saturating_duration_since(since).as_millis() as u64;
            tokens.saturating_add(ms.saturating_mul(rate)).min(full)
        };
        let slot = &mut self.slots[i];
        let (tokens, since) = match *slot {
            Some((who, t, at)) if who == ip || refill(t, at) < full => (refill(t, at), now),
            // Empty, or another source whose burst is whole again: ip's now.
            _ => (full, now),
        };
        let ok = tokens >= 1000;
        *slot = Some((ip, if ok { tokens - 1000 } else { tokens }, since));
        ok
    }
}

/// The UDP services' threads: [`UdpServices::join`] waits for them once the stop
/// flag is up.
#[derive(Debug)]
pub struct UdpServices {
    threads: Vec<JoinHandle<()>>,
}

impl UdpServices {
    pub fn join(self) {
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// Binds the UDP echo, discard and chargen of `services` (IPv4, and `[::]` with
/// `inet6`), a thread each, until `stop`.
pub fn start_udp(
    stack: &Stack,
    services: &[Service],
    inet6: bool,
    limits: UdpLimits,
    stop: Arc<AtomicBool>,
    counters: Arc<UdpCounters>,
) -> Result<UdpServices, String> {
    let mut socks = Vec::new();
    for svc in services {
        if matches!(svc, Service::Http(_)) {
            continue;
        }
        let mut ats: Vec<SocketAddr> =
            vec![SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, svc.port()).into()];
        if inet6 {
            ats.push(SocketAddr::new(
                std::net::Ipv6Addr::UNSPECIFIED.into(),
                svc.port(),
            ));
        }
        for at in ats {
            let sock = stack
                .udp_bind(at)
                .map_err(|e| format!("UDP {} service ({at}): {e}", svc.name()))?;
            sock.set_read_timeout(Some(Duration::from_millis(100)))
                .map_err(|e| e.to_string())?;
            socks.push((svc.clone(), sock));
        }
    }
    let mut threads = Vec::new();
    for (svc, sock) in socks {
        let (stop, counters) = (stop.clone(), counters.clone());
        let t = std::thread::Builder::new()
            .name(format!("udp-{}", svc.name()))
            .spawn(move || udp_serve(&svc, &sock, &stop, limits, &counters))
            .map_err(|e| e.to_string())?;
        threads.push(t);
    }
    Ok(UdpServices { threads })
}

/// One UDP service (RFC 862 echo, RFC 863 discard, RFC 864 chargen: each datagram is
/// answered with 0 to 512 characters of the rotating pattern), for sources
/// [`udp_source_ok`] admits, within their rate.
fn udp_serve(
    svc: &Service,
    sock: &UdpSocket,
    stop: &AtomicBool,
    limits: UdpLimits,
    counters: &UdpCounters,
) {
    let mut buf = vec![0u8; 65536];
    let mut out = vec![0u8; 512];
    let mut line = 0usize;
    let mut served = 0usize;
    let mut rate = SourceRate::new(limits);
    let mut total = SourceRate::new(UdpLimits {
        per_source_rate: limits.total_rate,
        burst: limits.total_rate,
        sources: 1,
        total_rate: limits.total_rate,
    });
    while !stop.load(Ordering::Relaxed) {
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        if *svc == Service::Discard {
            counters.discarded.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        if !udp_source_ok(from) {
            counters.loop_refused.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let now = Instant::now();
        if !rate.allow(from.ip(), now) || !total.allow(Ipv4Addr::UNSPECIFIED.into(), now) {
            counters.rate_limited.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let sent = match svc {
            Service::Echo => sock.send_to(&buf[..n], from),
            _ => {
                // A length that varies per request, as RFC 864 suggests.
                let len = (served * 7919 + n) % 513;
                for (k, b) in out[..len].iter_mut().enumerate() {
                    *b = b' ' + ((line + k) % 95) as u8;
                }
                line = (line + 1) % 95;
                sock.send_to(&out[..len], from)
            }
        };
        if sent.is_ok() {
            served += 1;
            counters.answered.fetch_add(1, Ordering::Relaxed);
            if *svc == Service::Echo {
                counters.echoed.fetch_add(1, Ordering::Relaxed);
            }
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

    /// The start-up line says what listens: nothing with `none` (no UDP echo
    /// either, which it once claimed), and each service's protocols otherwise.
    #[test]
    fn the_start_up_line_names_what_listens() {
        assert_eq!(describe(&parse_list(DEFAULT_SERVE).unwrap(), true), "none");
        assert_eq!(
            describe(&parse_list("echo,chargen").unwrap(), false),
            "echo (TCP and UDP 7), chargen (TCP and UDP 19) on IPv4"
        );
        let www = std::env::temp_dir();
        let list = parse_list(&format!("discard,http={}", www.display())).unwrap();
        assert_eq!(
            describe(&list, true),
            format!(
                "discard (TCP and UDP 9), http (TCP 80, {}) on IPv4 and IPv6",
                www.display()
            )
        );
    }

    #[test]
    fn udp_sources_below_1024_or_not_unicast_are_refused() {
        for bad in [
            "198.18.0.1:7",
            "198.18.0.1:19",
            "198.18.0.1:0",
            "198.18.0.1:1023",
            "0.0.0.0:40000",
            "255.255.255.255:40000",
            "224.0.0.1:40000",
            "[ff02::1]:40000",
            "[2001:2::1]:53",
        ] {
            assert!(!udp_source_ok(bad.parse().unwrap()), "{bad}");
        }
        for good in ["198.18.0.1:1024", "[2001:2::1]:40000"] {
            assert!(udp_source_ok(good.parse().unwrap()), "{good}");
        }
    }

    /// Each source has its own bucket: the burst, then the rate; a new source in
    /// a full table waits for an old one's burst to be whole again and shares its
    /// slot until then, so the table never grows.
    #[test]
    fn the_udp_rate_is_per_source_and_the_table_bounded() {
        let limits = UdpLimits {
            per_source_rate: 2,
            burst: 3,
            sources: 1,
            total_rate: 1000,
        };
        let mut r = SourceRate::new(limits);
        let t = Instant::now();
        let (a, b): (IpAddr, IpAddr) =
            ("198.18.0.1".parse().unwrap(), "198.18.0.3".parse().unwrap());
        let took = |r: &mut SourceRate, ip, at| (0..10).filter(|_| r.allow(ip, at)).count();
        assert_eq!(took(&mut r, a, t), 3, "the burst");
        // a's bucket is not whole: b shares it (and finds it empty).
        assert_eq!(took(&mut r, b, t), 0);
        // Half a second later: one answer refilled (2 a second).
        assert_eq!(took(&mut r, a, t + Duration::from_millis(500)), 1);
        // Once the slot's bucket is whole again, b takes the slot with a burst.
        assert_eq!(took(&mut r, b, t + Duration::from_secs(5)), 3);
        assert_eq!(r.slots.len(), 1);
        // With room in the table, two sources are apart (b picked so that its
        // slot is not a's: the table's hash is keyed at random).
        let mut r = SourceRate::new(UdpLimits {
            sources: 4096,
            ..limits
        });
        use std::hash::BuildHasher;
        let slot = |r: &SourceRate, ip: IpAddr| r.hasher.hash_one(ip) % 4096;
        let b = (3..=255u8)
            .map(|k| IpAddr::from([198, 18, 0, k]))
            .find(|&ip| slot(&r, ip) != slot(&r, a))
            .unwrap();
        assert_eq!(took(&mut r, a, t), 3);
        assert_eq!(took(&mut r, b, t), 3);
    }
}
