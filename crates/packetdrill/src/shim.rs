//! The stack under test behind packetdrill's calls: one simulated host, a raw
//! port for packetdrill's side of the wire, and a table of file descriptors.
//!
//! Here: the state (the simulation, the descriptors, the socket options kept) and
//! the virtual clock's running. The system calls themselves are in `shim/host.rs`,
//! the backtick lines' commands (`sysctl`, `sockstat`, `tcpdrop`) in
//! `shim/commands.rs`.

use dev::packetdrill::{EpollEvent, Errno, Host, PollFd};
use dev::{Duration, Instant, Queue};
use net::tcp::{ConnInfo, TcpDrop};
use net::{ConnQuery, Stack, TcpBound, TcpBuffers, TcpListener, TcpStream};
use std::collections::{BTreeMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use wire::EthernetAddress;

mod commands;
mod host;

/// The link address packetdrill's side answers with.
const REMOTE_MAC: EthernetAddress = EthernetAddress([0x02, 0x70, 0x64, 0x00, 0x00, 0x02]);
/// The virtual clock's value at the start, in microseconds (packetdrill only
/// looks at differences, but a zero clock is unlike any host's).
const EPOCH_US: i64 = 1_000_000_000_000;
/// How far `netdev_receive` runs the simulation waiting for a packet.
const RECEIVE_LIMIT: Duration = Duration::from_secs(600);
/// Largest listen backlog taken.
const MAX_BACKLOG: usize = 1024;

/// What `--so_flags` set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flags {
    pub local: IpAddr,
    pub remote: IpAddr,
    pub prefix: u8,
    pub mtu: usize,
    pub sysctl: Option<String>,
}

impl Flags {
    /// Reads `key=value` words; unknown keys and bad values are reported on
    /// standard error (packetdrill shows it) and left at their defaults.
    pub fn parse(s: &str) -> Flags {
        let mut local: Option<IpAddr> = None;
        let mut remote: Option<IpAddr> = None;
        let mut prefix = None;
        let mut mtu = 1500;
        let mut sysctl = None;
        for w in s.split_whitespace() {
            let (k, v) = w.split_once('=').unwrap_or((w, ""));
            let ok = match k {
                "local" => v.parse().map(|a| local = Some(a)).is_ok(),
                "remote" => v.parse().map(|a| remote = Some(a)).is_ok(),
                "prefix" => v.parse().map(|p| prefix = Some(p)).is_ok(),
                "mtu" => v.parse().map(|m| mtu = m).is_ok(),
                "sysctl" => {
                    sysctl = Some(v.to_string());
                    true
                }
                _ => false,
            };
            if !ok {
                eprintln!("mpstack-packetdrill: --so_flags: ignoring '{w}'");
            }
        }
        let v6 = local.or(remote).is_some_and(|a| a.is_ipv6());
        let (dl, dr): (IpAddr, IpAddr) = if v6 {
            (
                Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1).into(),
                Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2).into(),
            )
        } else {
            (
                Ipv4Addr::new(198, 18, 0, 1).into(),
                Ipv4Addr::new(198, 18, 0, 2).into(),
            )
        };
        Flags {
            local: local.unwrap_or(dl),
            remote: remote.unwrap_or(dr),
            prefix: prefix.unwrap_or(if v6 { 64 } else { 24 }),
            mtu,
            sysctl,
        }
    }
}

/// Options set on a socket before it connects or listens.
#[derive(Clone, Copy, Debug, Default)]
struct Opts {
    sndbuf: Option<usize>,
    rcvbuf: Option<usize>,
    nodelay: bool,
    reuseaddr: bool,
    keepalive: bool,
    /// `TCP_KEEPINIT` and `TCP_KEEPIDLE`, in seconds, where the socket set them
    /// (else the stack's `net.inet.tcp.keepinit`, `keepidle`).
    keepinit: Option<u32>,
    keepidle: Option<u32>,
    /// `TCP_NOOPT`.
    noopt: bool,
    /// `TCP_MAXSEG`, where set.
    maxseg: Option<u32>,
    /// `TCP_FASTOPEN`: on a client, `sendto` opens the connection with its data
    /// (RFC 7413); on a listener, the Fast Open queue length.
    fastopen: i32,
    /// `IP_TTL` / `IPV6_UNICAST_HOPS` and `IP_TOS` / `IPV6_TCLASS`, where set.
    ttl: Option<u8>,
    tos: Option<u8>,
}

/// The IP options of the socket-option numbers: `IP_TTL`/`IPV6_UNICAST_HOPS`
/// (`true`: a TTL) or `IP_TOS`/`IPV6_TCLASS` (`false`), each for its family
/// only; `None` for any other.
fn ip_opt(level: i32, name: i32, v6: bool) -> Option<bool> {
    match (level, name, v6) {
        (libc::IPPROTO_IP, libc::IP_TTL, false) => Some(true),
        (libc::IPPROTO_IP, libc::IP_TOS, false) => Some(false),
        (libc::IPPROTO_IPV6, libc::IPV6_UNICAST_HOPS, true) => Some(true),
        (libc::IPPROTO_IPV6, libc::IPV6_TCLASS, true) => Some(false),
        _ => None,
    }
}

/// What a socket's IP option handle does, whichever it is.
trait IpOptions {
    fn set_ttl(&self, ttl: u32) -> io::Result<()>;
    fn set_tos(&self, tos: u32) -> io::Result<()>;
}

macro_rules! ip_options {
    ($($t:ty),*) => {$(
        impl IpOptions for $t {
            fn set_ttl(&self, ttl: u32) -> io::Result<()> {
                <$t>::set_ttl(self, ttl)
            }
            fn set_tos(&self, tos: u32) -> io::Result<()> {
                <$t>::set_tos(self, tos)
            }
        }
    )*};
}
ip_options!(TcpStream, TcpListener, TcpBound);

/// FreeBSD's `TCP_KEEPINIT` and `TCP_NOOPT`, which Linux (and so packetdrill's
/// symbol table) lacks: `scripts/packetdrill.sh` writes the numbers in their
/// place. (Linux's 8 is `TCP_LINGER2`, which no script of the suite sets.)
const TCP_KEEPINIT: i32 = 128;
const TCP_NOOPT: i32 = 8;

impl Opts {
    /// The IP options set, applied to a socket that now exists.
    fn apply_ip(&self, s: &dyn IpOptions) {
        if let Some(t) = self.ttl {
            let _ = s.set_ttl(t.into());
        }
        if let Some(t) = self.tos {
            let _ = s.set_tos(t.into());
        }
    }

    /// The options that take effect on a connection, applied to a new one.
    fn apply(&self, s: &TcpStream, cfg: &net::tcp::TcpConfig) {
        self.apply_ip(s);
        if self.nodelay {
            let _ = s.set_nodelay(true);
        }
        if self.keepalive {
            let _ = s.set_keepalive(Some(self.idle(cfg)));
        }
        if let Some(k) = self.keepinit {
            let _ = s.set_keepinit(Duration::from_secs(k.into()));
        }
        if self.noopt {
            let _ = s.set_noopt(true);
        }
        if let Some(m) = self.maxseg {
            let _ = s.set_mss(m);
        }
    }

    fn idle(&self, cfg: &net::tcp::TcpConfig) -> Duration {
        self.keepidle
            .map_or(cfg.keep_idle, |k| Duration::from_secs(k.into()))
    }
}

#[derive(Debug)]
enum Sock {
    /// `socket()`, perhaps `bind()`, not yet listening or connected.
    Fresh {
        bound: Option<SocketAddr>,
        /// The stack's bound socket, which holds the address and whose resets
        /// carry the IP options (none where the stack refused it: a listener
        /// holds the address, which FreeBSD's SO_REUSEADDR would allow).
        held: Option<TcpBound>,
    },
    Listener(TcpListener),
    Stream(TcpStream),
    /// One end of a pipe (`pipe()`), its bytes in `State::pipes[id]`.
    Pipe {
        id: usize,
        write: bool,
    },
    /// An epoll instance: the descriptors it watches.
    Epoll(BTreeMap<i32, Watch>),
}

/// A descriptor an epoll instance watches.
#[derive(Clone, Copy, Debug)]
struct Watch {
    ev: EpollEvent,
    /// `EPOLLONESHOT`: reported once, then off until `EPOLL_CTL_MOD`.
    armed: bool,
    /// `EPOLLET`: what was ready when last reported (and the bytes waiting
    /// then), so only news is reported again.
    seen: u32,
    seen_avail: usize,
}

/// A pipe's bytes and how many of each end are open.
#[derive(Debug, Default)]
struct PipeBuf {
    data: VecDeque<u8>,
    readers: usize,
    writers: usize,
}

/// What a pipe holds at most (Linux's default, 16 pages).
const PIPE_BUF_MAX: usize = 65_536;

/// The first number an epoll instance or a pipe end gets.
const FIRST_NONSOCKET_FD: i32 = 100_000;

const EPOLLET: u32 = 1 << 31;
const EPOLLONESHOT: u32 = 1 << 30;

#[derive(Debug)]
struct Fd {
    sock: Sock,
    v6: bool,
    nonblock: bool,
    opts: Opts,
    /// A connect that returned `EINPROGRESS` (a second one says `EALREADY`).
    connecting: bool,
}

/// Everything behind the lock.
pub struct State {
    sim: sim::Sim,
    host: sim::HostId,
    raw: Box<dyn Queue>,
    mac: EthernetAddress,
    out: VecDeque<(Vec<u8>, i64)>,
    fds: BTreeMap<i32, Fd>,
    rx: Vec<mbuf::Mbuf>,
    /// The pipes (`pipe()`), by id.
    pipes: BTreeMap<usize, PipeBuf>,
    /// Calls of packetdrill's syscall thread parked in [`Inner::blocking`].
    blocked: usize,
    /// How many of them looked again since the clock last asked ([`Inner::run`]).
    rechecked: usize,
    /// A parked call that completed, whose thread has yet to read the clock: the
    /// clock waits for it, so that the call returns at the instant it could.
    returning: Option<std::thread::ThreadId>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("now", &self.sim.now())
            .field("fds", &self.fds.len())
            .finish_non_exhaustive()
    }
}

/// The state and the condition variable blocking calls wait on (shared with the
/// `sysctl` channel's thread).
#[derive(Debug)]
pub struct Inner {
    st: Mutex<State>,
    /// Signalled after every step of the simulation.
    cv: Condvar,
}

/// The stack under test.
#[derive(Debug)]
pub struct Shim {
    inner: Arc<Inner>,
    pub flags: Flags,
    stop: Arc<AtomicBool>,
    sysctl: Option<std::thread::JoinHandle<()>>,
}

impl std::ops::Deref for Shim {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.inner
    }
}

impl Drop for Shim {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.sysctl.take() {
            // Wakes the server's accept; it sees `stop` and ends.
            if let Some(p) = &self.flags.sysctl {
                let _ = std::os::unix::net::UnixStream::connect(p);
            }
            let _ = t.join();
        }
        if let Some(p) = &self.flags.sysctl {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// What `TCP_INFO` describes: a connection (its control block, `None` when it
/// is gone), or a listener.
enum InfoOf {
    Conn(Option<net::tcp::TcpInfo>),
    Listener,
}

/// Linux's `TCP_INFINITE_SSTHRESH`: the slow-start threshold before any loss.
const TCP_INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// `TCP_INFO` as Linux lays out `struct tcp_info` (packetdrill, built on Linux,
/// reads it so), in Linux's units (segments where Linux counts segments,
/// microseconds, milliseconds for the `last_` times): the fields mpstack keeps,
/// the rest of `out` (as long as the caller's struct) zero; a connection that is
/// gone reads as CLOSE, a listener as LISTEN. `now` is the stack's clock, `v6`
/// the connection's family (for the path MTU). `last_data_recv` and
/// `last_ack_recv` are both when the peer was last heard from. Not kept, so
/// zero: `ato`, `retrans` (retransmitted segments in flight), `fackets`,
/// `last_ack_sent` (Linux keeps none either), `rcv_ssthresh`, `rcv_rtt`,
/// `rcv_space`, the pacing rates, `segs_out`, `segs_in`, `notsent_bytes`,
/// `min_rtt`, `data_segs_in`, `data_segs_out`, `delivery_rate`, `busy_time`,
/// `rwnd_limited`, `sndbuf_limited`, `delivered_ce`, `bytes_sent`,
/// `dsack_dups`, `reord_seen`, `rcv_ooopack`. The length written.
fn linux_tcp_info(what: InfoOf, now: Instant, v6: bool, out: &mut [u8]) -> usize {
    use net::tcp::CaState as C;
    use net::tcp::State as S;
    let mut b = [0u8; 232];
    out.fill(0);
    let i = match what {
        InfoOf::Listener => {
            b[0] = 10;
            None
        }
        InfoOf::Conn(None) => {
            b[0] = 7;
            None
        }
        InfoOf::Conn(Some(i)) => Some(i),
    };
    if let Some(i) = i {
        b[0] = match i.state {
            S::Established => 1,
            S::SynSent => 2,
            S::SynReceived => 3,
            S::FinWait1 => 4,
            S::FinWait2 => 5,
            S::TimeWait => 6,
            S::Closed => 7,
            S::CloseWait => 8,
            S::LastAck => 9,
            S::Closing => 11,
        };
        b[1] = match i.ca_state {
            C::Open => 0,
            C::Disorder => 1,
            C::Cwr => 2,
            C::Recovery => 3,
            C::Loss => 4,
        };
        b[2] = i.backoff.min(255) as u8;
        b[3] = i.probes.min(255) as u8;
        b[4] = i.backoff.min(255) as u8;
        // TCPI_OPT_TIMESTAMPS, _SACK, _WSCALE, _ECN.
        b[5] = u8::from(i.timestamps)
            | u8::from(i.sack) << 1
            | u8::from(i.wscale.is_some()) << 2
            | u8::from(i.ecn) << 3;
        if let Some((ours, peers)) = i.wscale {
            b[6] = (peers & 0xf) | (ours & 0xf) << 4;
        }
        let mss = i.snd_mss.max(1);
        let segs = |bytes: u32| bytes.div_ceil(mss);
        b[120..128].copy_from_slice(&i.bytes_acked.to_ne_bytes());
        b[128..136].copy_from_slice(&i.bytes_received.to_ne_bytes());
        b[208..216].copy_from_slice(&i.bytes_retrans.to_ne_bytes());
        let mut put = |at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        let us = |d: Duration| d.as_micros().min(u128::from(u32::MAX)) as u32;
        let ago = |t: Instant| {
            let ms = now.saturating_duration_since(t).as_millis();
            ms.min(u128::from(u32::MAX)) as u32
        };
        put(8, us(i.rto));
        put(16, i.snd_mss);
        put(20, i.rcv_mss);
        put(24, segs(i.flight));
        put(28, segs(i.sacked));
        put(32, segs(i.lost));
        if let Some(t) = i.last_data_sent {
            put(44, ago(t));
        }
        if let Some(t) = i.last_heard {
            put(52, ago(t));
            put(56, ago(t));
        }
        // The MTU: the largest segment the path takes and the fixed headers.
        put(60, i.path_mss + if v6 { 60 } else { 40 });
        put(68, i.rtt.map_or(0, us));
        put(72, us(i.rttvar));
        // In segments, as cwnd; never set, Linux's "infinite".
        put(
            76,
            if i.snd_ssthresh >= TCP_INFINITE_SSTHRESH {
                TCP_INFINITE_SSTHRESH
            } else {
                i.snd_ssthresh / mss
            },
        );
        put(80, i.snd_cwnd / mss);
        put(84, i.rcv_mss);
        // Linux's default reordering degree, more once reordering was seen.
        put(88, if i.reordering_seen { 4 } else { 3 });
        put(100, i.total_retrans);
        put(
            192,
            (i.delivered / u64::from(mss)).min(u64::from(u32::MAX)) as u32,
        );
        put(228, i.snd_wnd);
    }
    let n = out.len().min(b.len());
    out[..n].copy_from_slice(&b[..n]);
    out.len()
}

fn errno_of(e: &io::Error) -> Errno {
    if let Some(n) = e.raw_os_error() {
        return n;
    }
    use io::ErrorKind as K;
    match e.kind() {
        K::WouldBlock => libc::EAGAIN,
        K::ConnectionRefused => libc::ECONNREFUSED,
        K::ConnectionReset => libc::ECONNRESET,
        K::ConnectionAborted => libc::ECONNABORTED,
        K::NotConnected => libc::ENOTCONN,
        K::BrokenPipe => libc::EPIPE,
        K::TimedOut => libc::ETIMEDOUT,
        K::AddrInUse => libc::EADDRINUSE,
        K::AddrNotAvailable => libc::EADDRNOTAVAIL,
        K::InvalidInput => libc::EINVAL,
        K::HostUnreachable => libc::EHOSTUNREACH,
        K::NetworkUnreachable => libc::ENETUNREACH,
        K::PermissionDenied => libc::EACCES,
        _ => libc::EIO,
    }
}

fn bind_errno(e: net::BindError) -> Errno {
    match e {
        net::BindError::AddrInUse(_) => libc::EADDRINUSE,
        net::BindError::AddrNotAvailable(_) => libc::EADDRNOTAVAIL,
        net::BindError::NoPorts => libc::EAGAIN,
    }
}

impl State {
    fn stack(&self) -> &Stack {
        self.sim.host(self.host)
    }

    fn now_us(&self) -> i64 {
        EPOCH_US + (self.sim.now().as_nanos() / 1000) as i64
    }

    /// Takes what reached packetdrill's port: IP packets queued for
    /// `netdev_receive`, neighbour discovery and multicast housekeeping dropped.
    fn drain(&mut self) {
        let now = self.sim.now();
        let t = self.now_us();
        loop {
            self.raw.rx_burst(now, &mut self.rx, 64);
            if self.rx.is_empty() {
                break;
            }
            for m in self.rx.drain(..) {
                let f = m.to_vec();
                if f.len() < 14 {
                    continue;
                }
                let ip = &f[14..];
                let keep = match u16::from_be_bytes([f[12], f[13]]) {
                    // IGMP is not packetdrill's to see.
                    0x0800 => ip.len() > 9 && ip[9] != 2,
                    // Neither are MLD and neighbour discovery (ICMPv6 130-143).
                    0x86dd => !(ip.len() > 40 && ip[6] == 58 && (130..=143).contains(&ip[40])),
                    _ => false,
                };
                if keep {
                    self.out.push_back((ip.to_vec(), t));
                }
            }
        }
    }

    /// Runs the simulation to `end`, instant by instant, taking what leaves the
    /// stack at each; with `until_output`, stops at the first instant something
    /// did.
    fn advance(&mut self, end: Instant, until_output: bool) {
        loop {
            let next = self.sim.step();
            self.drain();
            let now = self.sim.now();
            if now >= end || (until_output && !self.out.is_empty()) {
                return;
            }
            let t = next
                .map_or(end, |t| t.min(end))
                .max(now + Duration::from_nanos(1));
            self.sim.run_for(t.saturating_duration_since(now));
        }
    }

    /// [`State::advance`] to `end`.
    fn advance_to(&mut self, end: Instant) {
        self.advance(end, false);
    }

    fn fd(&mut self, fd: i32) -> Result<&mut Fd, Errno> {
        self.fds.get_mut(&fd).ok_or(libc::EBADF)
    }

    fn new_fd(&mut self, f: Fd) -> i32 {
        // Epoll instances and pipes are numbered apart from the sockets, above
        // the real descriptors of packetdrill's process: packetdrill closes them
        // with the real close(2) at the end of a script (they are not sockets
        // to it), which must not hit a descriptor of its own or of this object.
        let from = match f.sock {
            Sock::Epoll(_) | Sock::Pipe { .. } => FIRST_NONSOCKET_FD,
            _ => 3,
        };
        let n = (from..).find(|n| !self.fds.contains_key(n)).unwrap_or(from);
        self.fds.insert(n, f);
        n
    }

    /// Runs the stack until every worker answered `q` (a list or a drop).
    fn answer(&mut self, q: Option<ConnQuery>) -> Result<Vec<ConnInfo>, String> {
        let q = q.ok_or("the stack's worker is busy")?;
        for _ in 0..16 {
            if q.ready() {
                break;
            }
            let now = self.sim.now();
            self.advance_to(now);
        }
        if q.ready() {
            Ok(q.into_list())
        } else {
            Err("no answer from the stack".into())
        }
    }

    fn buffers(&self, o: &Opts) -> TcpBuffers {
        let c = self.stack().tcp_config();
        TcpBuffers {
            send: o.sndbuf.unwrap_or(c.sndbuf),
            recv: o.rcvbuf.unwrap_or(c.rcvbuf),
        }
    }
}

impl Shim {
    /// The stack, its one interface at `local`, packetdrill's side at `remote`.
    pub fn from_flags(s: &str) -> Shim {
        let flags = Flags::parse(s);
        let mut sim = sim::Sim::new(1);
        let host = sim.add_host("mpstack", 1);
        // The wire carries whatever packetdrill injects, as a tun device does (a
        // script may send a segment larger than the MTU); the interface's MTU,
        // set below, bounds what the stack sends. An MTU below what `ifconfig`
        // takes (the snd-syn scripts try 72) is the wire's, as the interface
        // inherits it.
        let small = flags.mtu < if flags.local.is_ipv4() { 576 } else { 1280 };
        let hub = sim.add_hub(dev::mem::WireConfig {
            mtu: if small { flags.mtu } else { 65_535 },
            ..dev::mem::WireConfig::default()
        });
        let ifindex = match flags.local {
            IpAddr::V4(a) => sim.connect(host, hub, &format!("{a}/{}", flags.prefix)),
            IpAddr::V6(a) => {
                let i = sim.connect(host, hub, "");
                let a6: net::Inet6Addr = format!("{a}/{}", flags.prefix)
                    .parse()
                    .expect("an IPv6 address and prefix");
                sim.host(host)
                    .add_address6(i, a6)
                    .expect("the stack's IPv6 address");
                i
            }
        };
        if !small {
            sim.host(host)
                .set_mtu(ifindex, flags.mtu)
                .expect("an MTU the stack takes");
        }
        let raw = sim.attach_raw(hub);
        let ifp = sim.host(host).interfaces()[ifindex.get()].clone();
        match flags.remote {
            IpAddr::V4(r) => ifp.arp.insert_static(r, REMOTE_MAC),
            IpAddr::V6(r) => ifp.nd6.insert_static(r, REMOTE_MAC),
        }
        let mut st = State {
            sim,
            host,
            raw,
            mac: ifp.mac,
            out: VecDeque::new(),
            fds: BTreeMap::new(),
            rx: Vec::new(),
            pipes: BTreeMap::new(),
            blocked: 0,
            rechecked: 0,
            returning: None,
        };
        // Duplicate address detection and the first reports, before the script.
        let end = st.sim.now() + Duration::from_secs(3);
        st.advance_to(end);
        st.out.clear();
        let inner = Arc::new(Inner {
            st: Mutex::new(st),
            cv: Condvar::new(),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let sysctl = flags.sysctl.as_ref().and_then(|path| {
            let _ = std::fs::remove_file(path);
            let l = match std::os::unix::net::UnixListener::bind(path) {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("mpstack-packetdrill: sysctl socket {path}: {e}");
                    return None;
                }
            };
            let (inner, stop) = (inner.clone(), stop.clone());
            std::thread::Builder::new()
                .name("sysctl".into())
                .spawn(move || crate::sysctl::serve(l, stop, |a| inner.command(a)))
                .ok()
        });
        Shim {
            inner,
            flags,
            stop,
            sysctl,
        }
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for the simulation to move (a blocking call's sleep).
    fn wait<'a>(&self, g: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        match self
            .cv
            .wait_timeout(g, std::time::Duration::from_millis(200))
        {
            Ok((g, _)) => g,
            Err(e) => e.into_inner().0,
        }
    }

    /// [`State::advance`] for the calls that move the clock (packetdrill's sleeps,
    /// clock reads and waits for a packet), in step with the calls its syscall
    /// thread has parked: after every instant the simulation takes, each parked
    /// call looks again before the clock moves on, and one that completes reads
    /// the clock first. A blocking call then returns at the instant it could (a
    /// connect that TCP_KEEPINIT ends at 6 s, while the script sleeps to 7 s).
    fn run<'a>(
        &'a self,
        mut g: MutexGuard<'a, State>,
        end: Instant,
        until_output: bool,
    ) -> MutexGuard<'a, State> {
        loop {
            g = self.settle(g);
            let next = g.sim.step();
            g.drain();
            if g.blocked > 0 {
                let want = g.blocked;
                g.rechecked = 0;
                self.cv.notify_all();
                let give_up = std::time::Instant::now() + std::time::Duration::from_secs(2);
                while g.rechecked < want && std::time::Instant::now() < give_up {
                    g = self.wait(g);
                }
                g = self.settle(g);
            }
            let now = g.sim.now();
            if now >= end || (until_output && !g.out.is_empty()) {
                return g;
            }
            let t = next
                .map_or(end, |t| t.min(end))
                .max(now + Duration::from_nanos(1));
            g.sim.run_for(t.saturating_duration_since(now));
        }
    }

    /// Waits (a little, in real time) for a completed blocking call's thread to
    /// read the clock.
    fn settle<'a>(&'a self, mut g: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while g.returning.is_some() && std::time::Instant::now() < give_up {
            g = self.wait(g);
        }
        g.returning = None;
        g
    }

    /// Runs `op` until it stops saying `EAGAIN`, sleeping between tries when the
    /// descriptor blocks; `EAGAIN` at once when it does not, or with `dontwait`.
    fn blocking<T>(
        &self,
        fd: i32,
        dontwait: bool,
        mut op: impl FnMut(&mut State, &mut Fd) -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        let mut g = self.lock();
        let mut waited = false;
        loop {
            let mut f = g.fds.remove(&fd).ok_or(libc::EBADF)?;
            let r = op(&mut g, &mut f);
            let nonblock = f.nonblock || dontwait;
            g.fds.insert(fd, f);
            match r {
                Err(e) if e == libc::EAGAIN && !nonblock => {
                    waited = true;
                    g.blocked += 1;
                    g = self.wait(g);
                    g.blocked -= 1;
                    g.rechecked += 1;
                    self.cv.notify_all();
                }
                r => {
                    if waited {
                        g.returning = Some(std::thread::current().id());
                    }
                    return r;
                }
            }
        }
    }

    /// What an entry of `poll` reports now.
    fn revents(st: &mut State, p: &PollFd) -> i16 {
        match Inner::ready(st, p.fd) {
            None => libc::POLLNVAL,
            Some((r, _)) => r & (p.events | libc::POLLERR | libc::POLLHUP | libc::POLLNVAL),
        }
    }

    /// What descriptor `fd` is ready for now (`POLL*` bits, which epoll's
    /// share), and the bytes waiting to be read; `None` when there is no such
    /// descriptor.
    fn ready(st: &State, fd: i32) -> Option<(i16, usize)> {
        let f = st.fds.get(&fd)?;
        let mut r = 0i16;
        let mut avail = 0;
        match &f.sock {
            Sock::Pipe { id, write } => {
                let p = st.pipes.get(id)?;
                if *write {
                    if p.data.len() < PIPE_BUF_MAX {
                        r |= libc::POLLOUT;
                    }
                    if p.readers == 0 {
                        r |= libc::POLLERR;
                    }
                } else {
                    avail = p.data.len();
                    if avail > 0 {
                        r |= libc::POLLIN;
                    }
                    if p.writers == 0 {
                        r |= libc::POLLHUP;
                    }
                }
            }
            Sock::Epoll(_) => {}
            Sock::Fresh { .. } => r |= libc::POLLOUT | libc::POLLHUP,
            Sock::Listener(l) => {
                if l.pending() > 0 {
                    r |= libc::POLLIN;
                }
            }
            Sock::Stream(s) => {
                // POLLERR while a read or write has yet to report the error;
                // POLLHUP once the connection failed (Linux's sk_err and
                // SHUTDOWN_MASK).
                let failed = matches!(s.take_error(), Ok(Some(_)));
                avail = s.available();
                if avail > 0 || failed || s.at_end() {
                    r |= libc::POLLIN;
                }
                if s.is_connected() {
                    r |= libc::POLLOUT;
                }
                if s.pending_error().is_some() {
                    r |= libc::POLLERR;
                }
                if failed {
                    r |= libc::POLLHUP;
                }
            }
        }
        Some((r, avail))
    }
}

impl Shim {
    /// `sendto` on a socket not yet connected that has `TCP_FASTOPEN` (FreeBSD's
    /// client side of RFC 7413): the connection opens with `buf` queued, for the
    /// SYN to carry when the stack has the server's cookie. `None` for any other
    /// socket (an ordinary send).
    fn sendto_fastopen(
        &self,
        fd: i32,
        buf: &[u8],
        addr: SocketAddr,
    ) -> Option<Result<usize, Errno>> {
        let mut g = self.lock();
        let f = g.fds.get(&fd)?;
        let Sock::Fresh { bound, .. } = f.sock else {
            return None;
        };
        if f.opts.fastopen == 0 {
            return None;
        }
        if addr.is_ipv6() != f.v6 {
            return Some(Err(libc::EAFNOSUPPORT));
        }
        let opts = f.opts;
        let b = g.buffers(&opts);
        let port = bound.map(|a| a.port()).filter(|p| *p != 0);
        // The bound socket gives way to the connection.
        if let Some(Fd {
            sock: Sock::Fresh { held, .. },
            ..
        }) = g.fds.get_mut(&fd)
        {
            *held = None;
        }
        let (s, n) = match g.stack().tcp_connect_fastopen(addr, port, Some(b), buf) {
            Ok(r) => r,
            Err(e) => return Some(Err(errno_of(&e))),
        };
        let _ = s.set_nonblocking(true);
        opts.apply(&s, &g.stack().tcp_config());
        if let Some(f) = g.fds.get_mut(&fd) {
            f.sock = Sock::Stream(s);
            f.connecting = true;
        }
        // The SYN goes out now.
        let now = g.sim.now();
        g.advance_to(now);
        self.cv.notify_all();
        Some(Ok(n))
    }
}

impl Inner {
    /// Lets the simulation take what a socket call queued (data written, a
    /// window opened by a read), at the same instant.
    fn kick(&self) {
        let mut g = self.lock();
        let now = g.sim.now();
        g.advance_to(now);
        drop(g);
        self.cv.notify_all();
    }
}
