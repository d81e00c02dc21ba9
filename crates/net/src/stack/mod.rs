//! `Stack`: one virtual host (FreeBSD's VNET) — its interfaces, neighbour tables,
//! sockets, packet filter hooks, workers and counters.
//!
//! The configuration the data path reads ([`NetConfig`]) is published read-mostly:
//! writers serialize on `writer`, clone the current version, change it, and publish
//! it with one atomic pointer swap; workers load it once per batch without locks, and
//! the old version is freed when the last worker lets go of it (the grace period).

#[cfg(feature = "tokio")]
pub mod async_io;
pub(crate) mod batch;
mod bridge;
pub use bridge::BridgeOp;
mod config;
pub use config::NetConfig;
mod conns;
pub use conns::ConnQuery;
pub mod fpm;
mod hooks;
mod iface;
mod ifconfig;
mod snapshot;
pub use snapshot::ConfigSnapshot;
pub mod netchannel;
pub(crate) mod reject;
mod routes;
pub mod socket;
mod sockets;
mod stats;
pub mod tcp_socket;
mod tunnel;
pub(crate) mod worker;

use crate::link::arp::ArpParams;
use crate::link::iface::{IfIndex, In6Ifaddr, Inet6Addr};
use crate::stack::worker::Worker;
use crate::stats::{Stats, StatsSlot};
use crate::tcp::layer::TcpMsg;
use arc_swap::ArcSwap;
use crossbeam_queue::ArrayQueue;
use dev::poll::Notifier;
use dev::time::{Clock, MonotonicClock};
use dev::Instant;
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use wire::EthernetAddress;

/// Tunables of a stack.
#[derive(Clone, Debug)]
pub struct StackConfig {
    /// Name used in logs and derived MAC addresses.
    pub name: String,
    /// Worker threads (or, in `sim`, step functions). At least 1.
    pub workers: usize,
    pub arp: ArpParams,
    /// Datagrams a socket queues in each direction.
    pub socket_queue: usize,
    /// Frames received per burst.
    pub burst: usize,
    /// ICMP errors per second per worker (FreeBSD `net.inet.icmp.icmplim`), and as
    /// many ICMPv6 errors, counted apart (as FreeBSD's `icmp6errppslim` is).
    pub icmp_limit: u32,
    /// Frames waiting to be handed to the worker that owns an interface's queue.
    pub handoff_queue: usize,
    /// Settings of every TCP connection.
    pub tcp: crate::tcp::TcpConfig,
    /// TCP connections per worker (a hard bound; SYNs beyond it are dropped and counted).
    pub tcp_max_conns: usize,
    /// TCP messages (segments, connects, wake-ups) a worker's inbox holds.
    pub tcp_inbox: usize,
    /// Secret of the initial sequence numbers (RFC 6528). `None`: drawn from the
    /// operating system's randomness; simulations pass one for reproducible runs.
    pub isn_secret: Option<u64>,
    /// How long a worker thread keeps polling (yielding the CPU between polls) after
    /// its last work before it sleeps in `poll(2)`, as Linux's `net.core.busy_poll`:
    /// an answer that comes within this time costs no wake-up through the kernel.
    /// Zero sleeps at once (least CPU when idle, slowest request-response).
    pub busy_poll: std::time::Duration,
    /// Bounds and time-outs of each worker's fragment reassembly table.
    pub frag: crate::ip::frag::FragParams,
    /// Neighbour solicitations sent by duplicate address detection before an IPv6
    /// address is used (RFC 4862 `DupAddrDetectTransmits`, FreeBSD's
    /// `net.inet6.ip6.dad_count`), one a second; 0 turns DAD off.
    pub dad_transmits: u8,
    /// How the input path makes headers contiguous: `pulldown` (the default), or the
    /// `pullup`/`pullup2` of the m_pulldown paper's comparison (`mpstack bench mbuf`).
    pub hdr_access: crate::hdr::HdrAccess,
    /// Take default routers and on-link prefixes from router advertisements (Linux's
    /// `accept_ra`; on, as for a host).
    pub accept_rtadv: bool,
    /// Form addresses from advertised prefixes (SLAAC, RFC 4862) and solicit routers
    /// when IPv6 comes up (`mpstack run --slaac`).
    pub slaac: bool,
    /// The FIB's lookup algorithm (`Auto`: binary search over ranges while a family's
    /// table is small, Poptrie beyond).
    pub fib_algo: route::FibAlgo,
    /// The most routes the table holds (both families; redirects and routing
    /// daemons feed it).
    pub max_routes: usize,
    /// Send ICMP redirects when forwarding a packet back out of the interface it
    /// came in on (FreeBSD's `net.inet.ip.redirect`).
    pub send_redirects: bool,
    /// A per-worker flow table for forwarded packets (PRESTO 2009's flowtable): a
    /// flow keeps the next hop it was first given for as long as that next hop
    /// lives and the flow is not idle (30 s by default) — stateful ECMP, as a load
    /// balancer needs. `None` (the default): every packet is looked up in the FIB.
    /// The seed is mixed with the stack's secret.
    pub flow_table: Option<route::FlowTableConfig>,
}

impl Default for StackConfig {
    fn default() -> Self {
        StackConfig {
            name: "mpstack".into(),
            workers: 1,
            arp: ArpParams::default(),
            socket_queue: 256,
            burst: 64,
            icmp_limit: 200,
            handoff_queue: 1024,
            tcp: crate::tcp::TcpConfig::default(),
            tcp_max_conns: 65_536,
            tcp_inbox: 4096,
            isn_secret: None,
            busy_poll: std::time::Duration::from_micros(200),
            frag: crate::ip::frag::FragParams::default(),
            dad_transmits: crate::inet6::nd6::DAD_TRANSMITS,
            hdr_access: crate::hdr::HdrAccess::Pulldown,
            accept_rtadv: true,
            slaac: false,
            fib_algo: route::FibAlgo::Auto,
            max_routes: 2_000_000,
            send_redirects: true,
            flow_table: None,
        }
    }
}

/// What the pfil hooks may ask of the stack during a batch: the configuration and
/// routes the batch runs with.
pub(crate) struct StackEnv<'a> {
    pub cfg: &'a NetConfig,
    pub fib: &'a route::Fib,
}

impl crate::pfil::PfilEnv for StackEnv<'_> {
    fn ifname(&self, i: IfIndex) -> Option<&str> {
        self.cfg.ifaces.get(i.get()).map(|i| i.name.as_str())
    }
    fn ifcount(&self) -> usize {
        self.cfg.ifaces.len()
    }
    fn generation(&self) -> u64 {
        self.cfg.generation
    }
    fn is_local(&self, a: IpAddr) -> bool {
        self.cfg.is_local_ip(a)
    }
    /// The route back to `src` leaves by `rcvif` (on any of its paths, if it has
    /// several); no route, or a discard route, fails.
    fn verrevpath(&self, src: IpAddr, rcvif: u32) -> bool {
        self.fib.reverse_path(src, rcvif)
    }
    /// Not one of our addresses, nor an address of a network connected through
    /// another interface.
    fn antispoof(&self, src: IpAddr, rcvif: u32) -> bool {
        !self.is_local(src)
            && self
                .cfg
                .connected(src)
                .is_none_or(|i| u32::from(i.index.0) == rcvif)
    }
}

/// IPv4's changes from the data path (a learnt path MTU), published as any other.
impl crate::inet::cx::InetCtl for Shared {
    fn update_inet(&self, f: &mut dyn FnMut(&mut crate::inet::cx::InetConfig)) {
        self.update(|c| f(&mut c.inet));
    }
}

/// Neighbour discovery's changes from the data path, published as any other.
impl crate::inet6::cx::Inet6Ctl for Shared {
    fn update_nd6(&self, f: &mut dyn FnMut(&mut crate::inet6::nd6::NdState)) {
        self.update(|c| f(&mut c.inet6.nd6));
    }
    fn add_autoconf6(
        &self,
        ifindex: IfIndex,
        a: Inet6Addr,
        preferred: Option<dev::Instant>,
        valid: Option<dev::Instant>,
    ) -> Result<(), ()> {
        self.add_ifaddr6(ifindex, a, |s| In6Ifaddr::autoconf(a, s, preferred, valid))
            .map_err(|_| ())
    }
    fn delete_address6(&self, ifindex: IfIndex, a: std::net::Ipv6Addr) {
        let _ = Shared::delete_address(self, ifindex, a.into());
    }
    fn notify_worker(&self, w: usize) {
        Shared::notify_worker(self, w);
    }
    fn dad_log(&self) -> &crate::inet6::nd6::DadLog {
        &self.dad_log
    }
}

/// How a worker is woken from its sleep in `poll(2)`.
#[derive(Debug, Default)]
pub(crate) struct WorkerWake {
    pub sleeping: AtomicBool,
    pub notifier: std::sync::OnceLock<Notifier>,
}

/// What the stack's handles share with its workers.
#[derive(Debug)]
pub(crate) struct Shared {
    pub cfg: ArcSwap<NetConfig>,
    pub params: StackConfig,
    writer: Mutex<()>,
    pub stats: Vec<StatsSlot>,
    /// Per worker: the stages' runtime counters as of its last poll.
    pub runtime: Vec<crate::runtime::RuntimeSlot>,
    /// Each worker's device queues' counters, as it last published them.
    pub qstats: Vec<Mutex<Vec<(usize, IfIndex, dev::QueueStats)>>>,
    pub wake: Vec<WorkerWake>,
    pub(crate) next_sock_id: AtomicU64,
    pub(crate) next_port: AtomicU16,
    /// Stats of control-plane actions (not per worker).
    pub ctl_stats: Mutex<Stats>,
    /// Per worker: TCP work from applications and other workers.
    pub tcp_inbox: Vec<ArrayQueue<TcpMsg>>,
    /// Per worker: streams whose wake-up did not fit in the inbox (a burst of closes
    /// from an application dropping thousands of streams at once). Rare, so a lock;
    /// a wake-up is never lost, or a dropped stream would never close.
    pub tcp_overflow: Vec<crate::tcp::chan::Overflow>,
    /// The RFC 6528 secret of this stack's initial sequence numbers.
    pub isn_secret: u64,
    /// TCP Fast Open's cookie key (derived from `isn_secret`) and client cache.
    pub tfo: crate::tcp::fastopen::TfoState,
    /// The bound on TCP buffer memory (`tcp::mem`): the workers' sums, the state.
    pub tcp_mem: Arc<crate::tcp::mem::TcpMem>,
    /// The control plane's routing table; changes are compiled into `fib`.
    pub rib: Mutex<route::Rib>,
    /// The data path's routing table (published, read lock-free by workers).
    pub fib: ArcSwap<route::Fib>,
    /// Routing messages (route changes, addresses, neighbours, misses).
    pub rtbus: Arc<route::RtBus>,
    /// Batches under way ([`Stack::fib_batch`]): while any is, changes to the
    /// table are not compiled; the last to end compiles and publishes once.
    fib_hold: std::sync::atomic::AtomicUsize,
    /// DAD's warnings, rate-limited.
    dad_log: crate::inet6::nd6::DadLog,
    /// Changes made of many (a reload, a batch) against the others ([`Stack::changes_alone`]).
    changes: std::sync::RwLock<()>,
}

impl Shared {
    /// Publishes a changed configuration (RCU update).
    pub fn update<R>(&self, f: impl FnOnce(&mut NetConfig) -> R) -> R {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = NetConfig::clone(&self.cfg.load());
        let r = f(&mut next);
        next.reindex();
        next.generation += 1;
        self.cfg.store(Arc::new(next));
        r
    }

    /// Wakes worker `w` if it sleeps.
    pub fn notify_worker(&self, w: usize) {
        if let Some(k) = self.wake.get(w) {
            if k.sleeping.swap(false, Ordering::SeqCst) {
                if let Some(n) = k.notifier.get() {
                    n.notify();
                }
            }
        }
    }
}

/// Error attaching an interface.
#[derive(Debug)]
pub enum StackError {
    /// Interfaces can only be attached before the workers start.
    Running,
    /// An address is already configured on another interface.
    DuplicateAddress(Ipv4Addr),
    /// An IPv6 address is already configured.
    DuplicateAddress6(std::net::Ipv6Addr),
    /// The interface holds `iface::MAX_ADDRS6` IPv6 addresses already.
    TooManyAddresses,
    /// The routing table refused a change.
    Route(route::RtError),
    /// No connected network holds the gateway (`ENETUNREACH`).
    GatewayUnreachable(std::net::IpAddr),
    /// No interface has this index.
    NoInterface(IfIndex),
    /// A bridge refused a change (not a bridge, already a member, …).
    Bridge(String),
    /// A tunnel could not be made (endpoints of two families, a duplicate, …).
    Tunnel(String),
    /// The interface has no such address (`EADDRNOTAVAIL`).
    NoSuchAddress(std::net::IpAddr),
    /// A value out of range (`EINVAL`).
    Invalid(String),
    Io(io::Error),
}

impl std::fmt::Display for StackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StackError::Running => {
                f.write_str("the stack is running: attach interfaces before start")
            }
            StackError::DuplicateAddress(a) => write!(f, "address {a} is already configured"),
            StackError::DuplicateAddress6(a) => write!(f, "address {a} is already configured"),
            StackError::TooManyAddresses => write!(
                f,
                "the interface has {} IPv6 addresses already",
                crate::link::iface::MAX_ADDRS6
            ),
            StackError::Route(e) => write!(f, "{e}"),
            StackError::GatewayUnreachable(g) => {
                write!(f, "gateway {g} is not on any connected network")
            }
            StackError::NoInterface(i) => write!(f, "no interface with index {}", i.0),
            StackError::Bridge(e) | StackError::Tunnel(e) | StackError::Invalid(e) => {
                f.write_str(e)
            }
            StackError::NoSuchAddress(a) => {
                write!(
                    f,
                    "{a}: can't assign requested address (not on the interface)"
                )
            }
            StackError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for StackError {}

/// One virtual host or router: interfaces, tables, sockets and the workers that run it.
///
/// Two ways to run it: call [`Stack::poll`] with the time (simulations and single-
/// threaded embedding), or [`Stack::start`] worker threads on the real clock.
#[derive(Debug)]
pub struct Stack {
    shared: Arc<Shared>,
    /// The workers while no thread runs them (behind a lock only so that a `&Stack`
    /// can be shared between threads; `&mut self` reaches them without locking).
    workers: Mutex<Vec<Worker>>,
    threads: Vec<JoinHandle<Worker>>,
    stop: Arc<AtomicBool>,
    mac_seed: u32,
}

/// A locally administered link address for interface `index` of the stack whose
/// seed is `seed`: `kind` tells a device's (0), a bridge's and a tunnel's apart.
fn local_mac(seed: u32, kind: u8, index: IfIndex) -> EthernetAddress {
    let s = seed.to_be_bytes();
    EthernetAddress([0x02, s[0] ^ kind, s[1], s[2], s[3], index.0 as u8])
}

impl Stack {
    pub fn new(mut cfg: StackConfig) -> Stack {
        cfg.workers = cfg.workers.max(1);
        cfg.burst = cfg.burst.clamp(1, 1024);
        let n = cfg.workers;
        let net = NetConfig {
            by_worker: vec![Vec::new(); n],
            tcp: cfg.tcp,
            ..NetConfig::default()
        };
        let mac_seed = cfg.name.bytes().fold(0x811c_9dc5u32, |h, b| {
            (h ^ b as u32).wrapping_mul(0x0100_0193)
        });
        let rtbus = Arc::new(route::RtBus::new());
        let isn_secret = cfg.isn_secret.unwrap_or_else(|| {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(0x6528);
            h.finish()
        });
        let shared = Arc::new(Shared {
            cfg: ArcSwap::from_pointee(net),
            writer: Mutex::new(()),
            stats: (0..n).map(|_| StatsSlot::default()).collect(),
            runtime: (0..n).map(|_| Default::default()).collect(),
            qstats: (0..n).map(|_| Mutex::new(Vec::new())).collect(),
            wake: (0..n).map(|_| WorkerWake::default()).collect(),
            next_sock_id: AtomicU64::new(1),
            next_port: AtomicU16::new((mac_seed % 16384) as u16),
            ctl_stats: Mutex::new(Stats::default()),
            tcp_inbox: (0..n)
                .map(|_| ArrayQueue::new(cfg.tcp_inbox.max(16)))
                .collect(),
            tcp_overflow: (0..n)
                .map(|_| crate::tcp::chan::Overflow::default())
                .collect(),
            rib: Mutex::new(route::Rib::new(rtbus.clone(), cfg.fib_algo, cfg.max_routes)),
            fib: ArcSwap::from_pointee(route::Fib::default()),
            rtbus,
            fib_hold: Default::default(),
            dad_log: Default::default(),
            changes: Default::default(),
            isn_secret,
            tfo: crate::tcp::fastopen::TfoState::new(isn_secret),
            tcp_mem: Arc::new(crate::tcp::mem::TcpMem::new(n)),
            params: cfg,
        });
        let workers = (0..n).map(|i| Worker::new(i, shared.clone())).collect();
        Stack {
            shared,
            workers: Mutex::new(workers),
            threads: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            mac_seed,
        }
    }

    pub fn name(&self) -> &str {
        &self.shared.params.name
    }

    pub fn num_workers(&self) -> usize {
        self.shared.wake.len()
    }

    /// The settings new TCP connections take now.
    pub fn tcp_config(&self) -> crate::tcp::TcpConfig {
        self.shared.cfg.load().tcp
    }

    /// Changes the settings of TCP connections from now on (`sysctl
    /// net.inet.tcp.*=…` on a running node): connections opened or accepted after
    /// this take them; open ones keep theirs.
    pub fn set_tcp_config(&self, tcp: crate::tcp::TcpConfig) {
        let was = self.shared.update(|c| std::mem::replace(&mut c.tcp, tcp));
        // Fast Open's client turned off forgets the servers' cookies, as FreeBSD's
        // net.inet.tcp.fastopen.client_enable destroys its cache.
        if was.fastopen_client && !tcp.fastopen_client {
            self.shared.tfo.client_flush();
        }
    }

    /// What IPv4 input does with source-routed packets
    /// (`net.inet.ip.sourceroute`, `net.inet.ip.accept_sourceroute`).
    pub fn source_routing(&self) -> crate::inet::cx::SourceRouting {
        self.shared.cfg.load().inet.srcroute
    }

    /// Changes what IPv4 input does with source-routed packets, from the next batch
    /// on (`sysctl net.inet.ip.sourceroute=1` on a running node).
    pub fn set_source_routing(&self, sr: crate::inet::cx::SourceRouting) {
        self.shared.update(|c| c.inet.srcroute = sr);
    }

    /// Whether directed broadcasts are forwarded (`net.inet.ip.directed-broadcast`).
    pub fn directed_broadcast(&self) -> bool {
        self.shared.cfg.load().inet.directed_broadcast
    }

    /// Forwards directed broadcasts (as link broadcasts), or drops them
    /// (`ip.bcastfwd`, the default: RFC 2644), from the next batch on.
    pub fn set_directed_broadcast(&self, on: bool) {
        self.shared.update(|c| c.inet.directed_broadcast = on);
    }

    /// The configuration as workers see it now.
    pub fn config(&self) -> Arc<NetConfig> {
        self.shared.cfg.load_full()
    }

    /// Runs every worker once at `now` (no threads). Returns when the stack next wants
    /// to run: at once (`<= now`) if work remains, at a timer, or `None` if idle.
    pub fn poll(&mut self, now: Instant) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let workers = self.workers.get_mut().unwrap_or_else(|e| e.into_inner());
        for w in workers.iter_mut() {
            if let Some(t) = w.poll(now) {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        }
        next
    }

    /// Starts one thread per worker on the real monotonic clock.
    pub fn start(&mut self) -> io::Result<()> {
        self.start_with_clock(Arc::new(MonotonicClock::new()))
    }

    pub fn start_with_clock(&mut self, clock: Arc<dyn Clock>) -> io::Result<()> {
        if !self.threads.is_empty() {
            return Ok(());
        }
        for w in &self.shared.wake {
            if w.notifier.get().is_none() {
                let _ = w.notifier.set(Notifier::new()?);
            }
        }
        self.stop.store(false, Ordering::SeqCst);
        let workers = std::mem::take(self.workers.get_mut().unwrap_or_else(|e| e.into_inner()));
        for mut w in workers {
            let stop = self.stop.clone();
            let clock = clock.clone();
            let name = format!("{}-w{}", self.shared.params.name, w.id());
            let h = std::thread::Builder::new().name(name).spawn(move || {
                w.run(&*clock, &stop);
                w
            })?;
            self.threads.push(h);
        }
        Ok(())
    }

    /// Stops the worker threads and waits for them.
    pub fn stop(&mut self) {
        if self.threads.is_empty() {
            return;
        }
        self.stop.store(true, Ordering::SeqCst);
        for i in 0..self.shared.wake.len() {
            if let Some(n) = self.shared.wake[i].notifier.get() {
                n.notify();
            }
        }
        let mut ws: Vec<Worker> = Vec::new();
        for h in self.threads.drain(..) {
            match h.join() {
                Ok(w) => ws.push(w),
                Err(_) => tracing::error!(target: "stack", "a worker thread panicked"),
            }
        }
        ws.sort_by_key(|w| w.id());
        *self.workers.get_mut().unwrap_or_else(|e| e.into_inner()) = ws;
    }

    pub fn is_running(&self) -> bool {
        !self.threads.is_empty()
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        self.stop();
    }
}

impl crate::pfil::ipfw::Ipfw {
    /// Puts the firewall on the stack's IPv4 and IPv6 points, in and out.
    pub fn attach(self: &Arc<Self>, stack: &Stack) {
        stack.attach_ipfw(self);
    }

    /// Also runs the rules on whole Ethernet frames, arriving and leaving (FreeBSD's
    /// `net.link.ether.ipfw=1`): the pass where `layer2`, `mac` and `mac-type` match.
    pub fn attach_layer2(self: &Arc<Self>, stack: &Stack) {
        stack.attach_ipfw_layer2(self);
    }
}
