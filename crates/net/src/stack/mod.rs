//! `Stack`: one virtual host (FreeBSD's VNET) — its interfaces, neighbour tables,
//! sockets, packet filter hooks, workers and counters.
//!
//! The configuration the data path reads ([`NetConfig`]) is published read-mostly:
//! writers serialize on `writer`, clone the current version, change it, and publish
//! it with one atomic pointer swap; workers load it once per batch without locks, and
//! the old version is freed when the last worker lets go of it (the grace period).

#[cfg(feature = "tokio")]
pub mod async_io;
mod bridge;
pub use bridge::BridgeOp;
pub mod fpm;
mod hooks;
mod ifconfig;
mod snapshot;
pub use snapshot::ConfigSnapshot;
pub mod netchannel;
pub(crate) mod reject;
pub mod socket;
pub mod tcp_socket;
mod tunnel;
pub(crate) mod worker;

use crate::link::arp::{ArpParams, ArpTable};
use crate::link::iface::{
    flags, AddrState, IfConfig, IfIndex, Ifnet, In6Ifaddr, Inet6Addr, InetAddr,
};
use crate::pfil::PfilHeads;
use crate::stack::socket::{BindError, PingSocket, SockKind, SockShared, UdpSocket};
use crate::stack::tcp_socket::{TcpBound, TcpBuffers, TcpListener, TcpStream};
use crate::stack::worker::Worker;
use crate::stats::{Stats, StatsSlot};
use crate::tcp::chan::ListenShared;
use crate::tcp::layer::TcpMsg;
use crate::FxBuild;
use arc_swap::ArcSwap;
use crossbeam_queue::ArrayQueue;
use dev::poll::Notifier;
use dev::time::{Clock, MonotonicClock};
use dev::{Device, Instant};
use mbuf::Mbuf;
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
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
    /// ICMP errors per second per worker (FreeBSD `net.inet.icmp.icmplim`).
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
    pub frag: crate::inet::frag::FragParams,
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
            frag: crate::inet::frag::FragParams::default(),
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

/// The configuration the data path reads, published as a whole.
#[derive(Clone, Debug, Default)]
pub struct NetConfig {
    pub generation: u64,
    pub ifaces: Vec<Arc<Ifnet>>,
    /// IPv4's part: the default gateway, path MTUs, the stack's addresses, the UDP
    /// and echo sockets.
    pub inet: crate::inet::cx::InetConfig,
    /// IPv6's part: the static default router and what neighbour discovery learnt.
    pub inet6: crate::inet6::cx::Inet6Config,
    pub pfil: PfilHeads,
    /// Sockets by home worker, so each worker drains only its own send queues.
    pub(crate) by_worker: Vec<Vec<Arc<SockShared>>>,
    /// The netchannels, in the order they were opened (the first that matches a
    /// packet takes it).
    pub(crate) netchannels: Vec<Arc<crate::netchan::NetchanShared>>,
    /// Frames for an interface from workers that own none of its queues.
    pub(crate) handoff: Vec<Arc<ArrayQueue<Mbuf>>>,
    /// TCP listeners by port.
    pub(crate) tcp_listen: HashMap<u16, Vec<Arc<ListenShared>>, FxBuild>,
    /// The bridges and their member lists.
    pub bridges: crate::link::bridge::Bridges,
    /// The IP tunnels (`gif`, `gre`).
    pub tunnels: Vec<crate::tunnel::TunnelConf>,
    /// The settings new TCP connections take (`StackConfig::tcp` until
    /// [`Stack::set_tcp_config`] changes them at run time).
    pub tcp: crate::tcp::TcpConfig,
}

impl NetConfig {
    /// True if `a` is one of the stack's addresses.
    #[inline]
    pub fn is_local(&self, a: Ipv4Addr) -> bool {
        self.inet.is_local(a)
    }

    /// Remakes what is derived from the interfaces (before a publication).
    fn reindex(&mut self) {
        let local4 = self
            .ifaces
            .iter()
            .flat_map(|i| i.addrs.iter().map(|a| a.addr))
            .collect();
        let bcast4 = self
            .ifaces
            .iter()
            .flat_map(|i| {
                i.addrs
                    .iter()
                    .filter_map(|a| Some((a.broadcast()?, i.index)))
            })
            .collect();
        let net4 = self
            .ifaces
            .iter()
            .flat_map(|i| i.addrs.iter())
            .filter(|a| a.prefix_len < 31)
            .map(|a| a.network())
            .collect();
        self.inet.set_local4(local4, bcast4, net4);
        let local6 = self
            .ifaces
            .iter()
            .flat_map(|i| i.addrs6.iter().cloned())
            .collect();
        self.inet6.set_local6(local6);
        self.bridges.reindex(self.ifaces.len());
        self.pfil.resolve(self.ifaces.len());
    }

    /// The path MTU towards `dst` if a "fragmentation needed" taught one that has not
    /// aged.
    pub fn path_mtu4(&self, dst: Ipv4Addr, now: dev::Instant) -> Option<u32> {
        self.inet.path_mtu4(dst, now)
    }

    /// The interface whose connected network (an address's prefix) holds `a`.
    pub fn connected(&self, a: IpAddr) -> Option<&Arc<Ifnet>> {
        self.ifaces.iter().find(|i| match a {
            IpAddr::V4(a) => i.addrs.iter().any(|x| x.contains(a)),
            IpAddr::V6(a) => i.addrs6.iter().any(|x| x.addr.contains(a)),
        })
    }

    /// True if `a`, of either family, is one of the stack's addresses.
    pub fn is_local_ip(&self, a: IpAddr) -> bool {
        match a {
            IpAddr::V4(a) => self.is_local(a),
            IpAddr::V6(a) => self.ifaces.iter().any(|i| i.addr6(a).is_some()),
        }
    }
}

/// The IPv6 source for a connection to `dst`: source selection on the interface the
/// route to `dst` leaves by (on-link prefixes, then the default router's interface).
fn source_address6(cfg: &NetConfig, dst: std::net::Ipv6Addr) -> Option<std::net::Ipv6Addr> {
    if cfg.ifaces.iter().any(|i| i.addr6(dst).is_some()) {
        return Some(dst);
    }
    let on_link = cfg.ifaces.iter().find(|i| {
        i.addrs6
            .iter()
            .any(|a| !crate::link::iface::is_link_local(a.addr.addr) && a.addr.contains(dst))
    });
    let by_router = || {
        let gw = cfg
            .inet6
            .default_gw6
            .map(|g| g.1)
            .or_else(|| cfg.inet6.nd6.routers.first().map(|r| r.ifindex))?;
        cfg.ifaces.get(gw.get())
    };
    let by_prefix = || {
        cfg.inet6
            .nd6
            .prefixes
            .iter()
            .find(|p| p.prefix.contains(dst))
            .and_then(|p| cfg.ifaces.get(p.ifindex.get()))
    };
    let first = || cfg.ifaces.iter().find(|i| i.inet6());
    on_link
        .or_else(by_prefix)
        .or_else(by_router)
        .or_else(first)
        .and_then(|i| i.source6_for(dst))
}

/// The source address for a packet to `dst`: an address on the subnet that holds it,
/// else on the default gateway's.
fn source_address(cfg: &NetConfig, dst: Ipv4Addr) -> Option<Ipv4Addr> {
    if cfg.is_local(dst) {
        return Some(dst);
    }
    let on_link = |d: Ipv4Addr| {
        cfg.ifaces
            .iter()
            .find_map(|i| i.addrs.iter().find(|a| a.contains(d)).map(|a| a.addr))
    };
    on_link(dst).or_else(|| cfg.inet.default_gw.and_then(on_link))
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

    /// Changes the routing table and publishes the result: one compilation per call
    /// (so a batch of changes costs one), then each interface's neighbour tables
    /// learn which next hops' L2 rewrites they keep.
    pub(crate) fn route_update<R>(&self, f: impl FnOnce(&mut route::Rib) -> R) -> R {
        let mut rib = self.rib.lock().unwrap_or_else(|e| e.into_inner());
        let r = f(&mut rib);
        if self.fib_hold.load(Ordering::Acquire) == 0 {
            self.publish_fib(&rib);
        }
        r
    }

    /// Changes the table without compiling it: the changes reach the data path
    /// with the next [`Shared::publish_fib`] (this one's, or any other update's).
    pub(crate) fn route_update_deferred<R>(&self, f: impl FnOnce(&mut route::Rib) -> R) -> R {
        let mut rib = self.rib.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut rib)
    }

    /// Compiles the table and hands it to the workers, if it changed since the FIB
    /// they read was compiled. Whether it did.
    pub(crate) fn publish_fib(&self, rib: &route::Rib) -> bool {
        if rib.generation() != self.fib.load().generation() {
            let fib = Arc::new(rib.compile());
            let cfg = self.cfg.load();
            for ifp in &cfg.ifaces {
                let on = |v6: bool| -> Vec<Arc<route::NextHop>> {
                    fib.nexthops()
                        .filter(|n| {
                            n.kind == route::NhKind::Forward
                                && n.ifindex == u32::from(ifp.index.0)
                                && n.gateway.is_some_and(|g| g.is_ipv6() == v6)
                        })
                        .cloned()
                        .collect()
                };
                ifp.arp.set_nexthops(on(false));
                ifp.nd6.set_nexthops(on(true));
            }
            self.fib.store(fib);
            true
        } else {
            false
        }
    }

    /// An address came up: its network's connected route, and `RTM_NEWADDR`.
    pub(crate) fn address_added(&self, ifindex: IfIndex, addr: std::net::IpAddr, len: u8) {
        let net = route::IpPrefix::new(addr, len);
        let ifi = u32::from(ifindex.0);
        let link_local =
            matches!(addr, std::net::IpAddr::V6(a) if crate::link::iface::is_link_local(a));
        self.rtbus.send_ll(
            route::RtmType::NewAddr,
            net,
            Some(addr),
            None,
            ifi,
            route::RtFlags::UP,
        );
        if !link_local && !net.is_host() {
            // Two addresses in one network share its route.
            let _ = self.route_update(|r| r.add(route::RouteSpec::connected(net, ifi)));
        }
    }

    /// Adds an IPv6 address (tentative) to an interface, with the link-local one first
    /// if IPv6 was off there. Worker 0's timers run DAD.
    pub(crate) fn add_address6(&self, ifindex: IfIndex, a: Inet6Addr) -> Result<(), StackError> {
        self.add_ifaddr6(ifindex, a, |s| In6Ifaddr::new(a, s))
    }

    /// Adds address `a`, as `make` builds it in the state it starts in.
    fn add_ifaddr6(
        &self,
        ifindex: IfIndex,
        a: Inet6Addr,
        make: impl Fn(AddrState) -> In6Ifaddr,
    ) -> Result<(), StackError> {
        self.update(|c| self.add_address6_locked(c, ifindex, a, make))?;
        self.address_added(ifindex, a.addr.into(), a.prefix_len);
        Ok(())
    }

    fn add_address6_locked(
        &self,
        c: &mut NetConfig,
        ifindex: IfIndex,
        a: Inet6Addr,
        make: impl Fn(AddrState) -> In6Ifaddr,
    ) -> Result<(), StackError> {
        {
            if c.ifaces.iter().any(|i| i.addr6(a.addr).is_some()) {
                return Err(StackError::DuplicateAddress6(a.addr));
            }
            let Some(old) = c.ifaces.get(ifindex.get()) else {
                return Err(StackError::Io(io::Error::new(
                    io::ErrorKind::NotFound,
                    "no such interface",
                )));
            };
            // Bounded: advertisements from the network can add addresses (SLAAC).
            if old.addrs6.len() >= crate::link::iface::MAX_ADDRS6 {
                return Err(StackError::TooManyAddresses);
            }
            let mut addrs6 = old.addrs6.clone();
            // A link with no link layer (a tunnel) runs no duplicate address
            // detection: the addresses are in use at once (as Linux does on links
            // without ARP).
            let state = if old.no_link_header() {
                AddrState::Preferred
            } else {
                AddrState::Tentative
            };
            if addrs6.is_empty() {
                let ll = Inet6Addr::link_local(old.mac);
                if ll.addr != a.addr {
                    addrs6.push(Arc::new(In6Ifaddr::new(ll, state)));
                }
            }
            addrs6.push(Arc::new(make(state)));
            c.ifaces[ifindex.get()] = Arc::new(Ifnet {
                addrs6,
                ..Ifnet::clone(old)
            });
            Ok(())
        }
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

    pub(crate) fn unbind(&self, s: &Arc<SockShared>) {
        self.update(|c| {
            match s.kind {
                SockKind::Udp => {
                    if let Some(v) = c.inet.udp.get_mut(&s.local.port()) {
                        v.retain(|x| x.id != s.id);
                        if v.is_empty() {
                            c.inet.udp.remove(&s.local.port());
                        }
                    }
                }
                SockKind::IcmpEcho => {
                    c.inet.echo.remove(&s.local.port());
                }
                SockKind::Netchannel => c.netchannels.retain(|x| x.sock.id != s.id),
            }
            // Datagrams still queued go out first: the home worker drops the socket
            // from its list once the queue is empty (`forget_drained`).
            s.closed.store(true, Ordering::Release);
            if s.txq.is_empty() {
                if let Some(v) = c.by_worker.get_mut(s.home) {
                    v.retain(|x| x.id != s.id);
                }
            }
        });
        self.notify_worker(s.home);
    }

    /// Removes a listener from the configuration.
    pub(crate) fn tcp_unlisten(&self, l: &Arc<ListenShared>) {
        self.update(|c| {
            if let Some(v) = c.tcp_listen.get_mut(&l.local.port()) {
                v.retain(|x| x.id != l.id);
                if v.is_empty() {
                    c.tcp_listen.remove(&l.local.port());
                }
            }
        });
    }

    /// Removes closed sockets whose send queues have drained from worker `w`'s list.
    pub(crate) fn forget_drained(&self, w: usize) {
        self.update(|c| {
            if let Some(v) = c.by_worker.get_mut(w) {
                v.retain(|x| !(x.closed.load(Ordering::Acquire) && x.txq.is_empty()));
            }
        });
    }

    fn bind(&self, kind: SockKind, local: SocketAddr) -> Result<Arc<SockShared>, BindError> {
        let id = self.next_sock_id.fetch_add(1, Ordering::Relaxed);
        let nworkers = self.wake.len();
        self.update(|c| {
            let ours = match local.ip() {
                IpAddr::V4(a) => a.is_unspecified() || c.is_local(a),
                IpAddr::V6(a) => {
                    a.is_unspecified() || c.ifaces.iter().any(|i| i.addr6(a).is_some())
                }
            };
            if !ours {
                return Err(BindError::AddrNotAvailable(local.ip()));
            }
            let mut port = local.port();
            // A port is taken per family: an IPv4 and an IPv6 socket may share it.
            let in_use = |c: &NetConfig, p: u16| match kind {
                SockKind::Udp => c.inet.udp.get(&p).is_some_and(|v| {
                    v.iter().any(|s| {
                        s.local.is_ipv4() == local.is_ipv4()
                            && (s.local.ip().is_unspecified()
                                || local.ip().is_unspecified()
                                || s.local.ip() == local.ip())
                    })
                }),
                SockKind::IcmpEcho => c.inet.echo.contains_key(&p),
                SockKind::Netchannel => false,
            };
            if port == 0 {
                // Ephemeral range 49152-65535 (RFC 6335), scanned from a rolling cursor.
                let mut found = None;
                for _ in 0..16384 {
                    let p = 49152 + self.next_port.fetch_add(1, Ordering::Relaxed) % 16384;
                    if !in_use(c, p) {
                        found = Some(p);
                        break;
                    }
                }
                port = found.ok_or(BindError::NoPorts)?;
            } else if in_use(c, port) {
                return Err(BindError::AddrInUse(local));
            }
            let local = SocketAddr::new(local.ip(), port);
            let home = port as usize % nworkers;
            let s = Arc::new(SockShared::new(
                id,
                kind,
                local,
                home,
                self.params.socket_queue,
            ));
            match kind {
                SockKind::Udp => c.inet.udp.entry(port).or_default().push(s.clone()),
                SockKind::IcmpEcho => {
                    c.inet.echo.insert(port, s.clone());
                }
                SockKind::Netchannel => unreachable!("netchannels open by netchan_open"),
            }
            c.by_worker[home].push(s.clone());
            Ok(s)
        })
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

    /// Attaches a device as a new interface. Queue `q` of the device goes to worker
    /// `q % workers`; workers without a queue on this interface hand their frames to
    /// the owner of queue 0 through a lock-free queue.
    pub fn add_interface(
        &mut self,
        dev: Box<dyn Device>,
        ic: IfConfig,
    ) -> Result<IfIndex, StackError> {
        if !self.threads.is_empty() {
            return Err(StackError::Running);
        }
        let info = dev.info();
        let cur = self.shared.cfg.load();
        for a in &ic.addrs {
            if cur.is_local(a.addr) {
                return Err(StackError::DuplicateAddress(a.addr));
            }
        }
        let index = IfIndex(cur.ifaces.len() as u16);
        drop(cur);
        let mac = ic.mac.unwrap_or_else(|| match info.hw_addr {
            Some(m) => EthernetAddress(m),
            None => local_mac(self.mac_seed, 0, index),
        });
        let ifp = Arc::new(Ifnet {
            index,
            name: ic.name.clone().unwrap_or(info.name.clone()),
            mac,
            mtu: ic.mtu.unwrap_or(info.mtu),
            flags: flags::IFF_UP | flags::IFF_BROADCAST,
            addrs: ic.addrs.clone(),
            addrs6: Vec::new(),
            arp: Arc::new(ArpTable::new(self.shared.params.arp)),
            nd6: Arc::new(crate::inet6::nd6::Nd6Table::new(self.shared.params.arp)),
            num_queues: info.num_queues.max(1),
            forwarding: Arc::default(),
            offload: info.offload,
        });
        ifp.arp.set_watch(index.0 as u32, self.shared.rtbus.clone());
        ifp.nd6.set_watch(index.0 as u32, self.shared.rtbus.clone());
        let workers = self.workers.get_mut().unwrap_or_else(|e| e.into_inner());
        let nworkers = workers.len();
        let queues = dev.into_queues();
        for (q, queue) in queues.into_iter().enumerate() {
            workers[q % nworkers].attach_queue(index, queue);
        }
        let hq = self.shared.params.handoff_queue;
        self.shared.update(|c| {
            c.ifaces.push(ifp);
            c.handoff.push(Arc::new(ArrayQueue::new(hq.max(1))));
        });
        for a in &ic.addrs {
            self.shared
                .address_added(index, a.addr.into(), a.prefix_len);
        }
        Ok(index)
    }

    /// Adds an address to an interface.
    pub fn add_address(&self, ifindex: IfIndex, a: InetAddr) -> Result<(), StackError> {
        self.add_address_locked(ifindex, a)?;
        self.shared
            .address_added(ifindex, a.addr.into(), a.prefix_len);
        Ok(())
    }

    fn add_address_locked(&self, ifindex: IfIndex, a: InetAddr) -> Result<(), StackError> {
        self.shared.update(|c| {
            if c.is_local(a.addr) {
                return Err(StackError::DuplicateAddress(a.addr));
            }
            let Some(old) = c.ifaces.get(ifindex.get()) else {
                return Err(StackError::Io(io::Error::new(
                    io::ErrorKind::NotFound,
                    "no such interface",
                )));
            };
            let mut addrs = old.addrs.clone();
            addrs.push(a);
            c.ifaces[ifindex.get()] = Arc::new(Ifnet {
                addrs,
                ..Ifnet::clone(old)
            });
            Ok(())
        })
    }

    /// Adds an IPv6 address to an interface. The first one also turns IPv6 on there,
    /// with a link-local address from the interface's MAC (RFC 4862 §5.3). Each
    /// starts tentative: duplicate address detection (worker 0's timers) makes it
    /// preferred a second later, or duplicated if another node answers.
    pub fn add_address6(&self, ifindex: IfIndex, a: Inet6Addr) -> Result<(), StackError> {
        self.shared.add_address6(ifindex, a)?;
        // Worker 0 runs duplicate address detection.
        self.shared.notify_worker(0);
        Ok(())
    }

    /// Sets (or clears) the IPv6 default router, on interface `ifindex`.
    pub fn set_default_gateway6(&self, gw: Option<(std::net::Ipv6Addr, IfIndex)>) {
        self.shared.update(|c| c.inet6.default_gw6 = gw);
    }

    /// Every IPv6 address with its interface and state, as `ifconfig` lists them.
    pub fn addresses6(&self) -> Vec<(IfIndex, Inet6Addr, AddrState)> {
        self.shared
            .cfg
            .load()
            .ifaces
            .iter()
            .flat_map(|i| i.addrs6.iter().map(move |a| (i.index, a.addr, a.state())))
            .collect()
    }

    /// Sets (or clears) the IPv4 default gateway: the default route of the FIB
    /// when the gateway is on a connected network now; kept aside otherwise and used
    /// when no route matches (as before the FIB existed, for hosts configured in
    /// any order).
    pub fn set_default_gateway(&self, gw: Option<Ipv4Addr>) {
        self.shared.update(|c| c.inet.default_gw = gw);
        let dflt = route::IpPrefix::default_of(false);
        let _ = self.shared.route_update(|r| r.delete(dflt, None));
        if let Some(g) = gw {
            let _ = self.add_route_via(dflt, g.into());
        }
    }

    /// Adds a route (`route add`). A gateway route must name the interface; see
    /// [`Stack::add_route_via`] to find it from the gateway.
    pub fn add_route(&self, r: route::RouteSpec) -> Result<(), StackError> {
        self.shared
            .route_update(|rib| rib.add(r))
            .map_err(StackError::Route)
    }

    /// `route add DST GATEWAY`: a static route through a gateway on a connected
    /// network (`ENETUNREACH` otherwise); adding a second gateway to the same
    /// destination makes it multipath (ECMP).
    pub fn add_route_via(
        &self,
        dst: route::IpPrefix,
        gateway: std::net::IpAddr,
    ) -> Result<(), StackError> {
        let ifindex = self.connected_ifindex(gateway)?;
        self.add_route(route::RouteSpec::via(dst, gateway, ifindex))
    }

    /// The interface whose connected network holds `gw`.
    fn connected_ifindex(&self, gw: std::net::IpAddr) -> Result<u32, StackError> {
        self.shared
            .cfg
            .load()
            .connected(gw)
            .map(|i| u32::from(i.index.0))
            .ok_or(StackError::GatewayUnreachable(gw))
    }

    /// Deletes a route, or with `gateway` one path of a multipath route.
    pub fn delete_route(
        &self,
        dst: route::IpPrefix,
        gateway: Option<std::net::IpAddr>,
    ) -> Result<(), StackError> {
        self.shared
            .route_update(|rib| rib.delete(dst, gateway))
            .map_err(StackError::Route)
    }

    /// `route change`: gives a route one new path.
    pub fn change_route(&self, r: route::RouteSpec) -> Result<(), StackError> {
        self.shared
            .route_update(|rib| rib.change(r))
            .map_err(StackError::Route)
    }

    /// Several changes, compiled and published once (a routing daemon's batch).
    pub fn route_batch<R>(&self, f: impl FnOnce(&mut route::Rib) -> R) -> R {
        self.shared.route_update(f)
    }

    /// Several changes made to the table now and compiled later: they reach the
    /// data path at the next [`Stack::route_commit`] or the next compiled change
    /// (any of the other route calls). For a feed of many updates, where one
    /// compilation of a large table per batch would cost more than the changes.
    pub fn route_batch_deferred<R>(&self, f: impl FnOnce(&mut route::Rib) -> R) -> R {
        self.shared.route_update_deferred(f)
    }

    /// Held by a change made of many commands that puts the node back as it was
    /// if one of them fails (a config file's reload, a batch): no other change
    /// (a control command, a route from the routing daemon) runs meanwhile, so
    /// putting the saved state back undoes only what the batch did. Writers of
    /// single changes take [`Stack::changes_shared`] and wait for it.
    pub fn changes_alone(&self) -> std::sync::RwLockWriteGuard<'_, ()> {
        self.shared
            .changes
            .write()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Held by a single change (a control command, the routing daemon's feed)
    /// while it runs; see [`Stack::changes_alone`].
    pub fn changes_shared(&self) -> std::sync::RwLockReadGuard<'_, ()> {
        self.shared
            .changes
            .read()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` with the FIB's compilation held: every route change `f` makes
    /// (through any call, its own addresses' connected routes included) goes into
    /// the table at once and reaches the data path in one compilation when the
    /// last batch under way ends. A config file of 100,000 routes so costs one
    /// compilation, not one a line (which made loading it quadratic). The workers
    /// forward by the FIB as it was until then.
    pub fn fib_batch<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Hold<'a>(&'a Stack);
        impl Drop for Hold<'_> {
            fn drop(&mut self) {
                if self.0.shared.fib_hold.fetch_sub(1, Ordering::AcqRel) == 1 {
                    self.0.route_commit();
                }
            }
        }
        self.shared.fib_hold.fetch_add(1, Ordering::AcqRel);
        let _hold = Hold(self);
        f()
    }

    /// Compiles the table and publishes it to the workers if it changed since the
    /// FIB they read; whether it did.
    pub fn route_commit(&self) -> bool {
        let rib = self.shared.rib.lock().unwrap_or_else(|e| e.into_inner());
        self.shared.publish_fib(&rib)
    }

    /// `route get`: the route `addr` takes (also announced as `RTM_GET`).
    pub fn route_get(&self, addr: std::net::IpAddr) -> Option<route::RouteInfo> {
        self.shared
            .rib
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(addr)
    }

    /// Every TCP connection and listener (`netstat -an`): each worker lists its own
    /// connections when it next runs; this waits up to `wait` for them all. `None`
    /// if some worker did not answer in time (or the workers are not running).
    pub fn tcp_connections(&self, wait: std::time::Duration) -> Option<Vec<crate::tcp::ConnInfo>> {
        if !self.is_running() {
            return None;
        }
        Self::await_query(self.tcp_connections_ask()?, wait)
    }

    /// Waits up to `wait` for every worker to answer `q`.
    fn await_query(q: ConnQuery, wait: std::time::Duration) -> Option<Vec<crate::tcp::ConnInfo>> {
        let until = std::time::Instant::now() + wait;
        loop {
            if q.ready() {
                return Some(q.into_list());
            }
            if std::time::Instant::now() >= until {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Asks every worker for its connections without waiting for the answer: for a
    /// caller that runs the workers itself (a simulation, `Stack::poll`), which
    /// polls them until [`ConnQuery::ready`]. `None` if a worker's
    /// inbox is full.
    pub fn tcp_connections_ask(&self) -> Option<ConnQuery> {
        self.tcp_query(None)
    }

    /// tcpdrop(8): drops the connections `which` selects (a reset to each peer
    /// still in sync with us; TIME_WAIT just ends), on each worker when it next
    /// runs; this waits up to `wait` for them all and returns what was dropped.
    /// `None` as for [`Stack::tcp_connections`].
    pub fn tcp_drop(
        &self,
        which: crate::tcp::TcpDrop,
        wait: std::time::Duration,
    ) -> Option<Vec<crate::tcp::ConnInfo>> {
        if !self.is_running() {
            return None;
        }
        Self::await_query(self.tcp_drop_ask(which)?, wait)
    }

    /// [`Stack::tcp_drop`] without waiting, as [`Stack::tcp_connections_ask`]: the
    /// answer lists the connections dropped.
    pub fn tcp_drop_ask(&self, which: crate::tcp::TcpDrop) -> Option<ConnQuery> {
        self.tcp_query(Some(which))
    }

    fn tcp_query(&self, drop: Option<crate::tcp::TcpDrop>) -> Option<ConnQuery> {
        use crate::tcp::layer::{ConnList, TcpMsg};
        let mut listeners: Vec<crate::tcp::ConnInfo> = Vec::new();
        let cfg = self.shared.cfg.load();
        let mut ports: Vec<&u16> = cfg.tcp_listen.keys().collect();
        ports.sort();
        // Listeners are listed, never dropped.
        let ports = if drop.is_some() { Vec::new() } else { ports };
        for p in ports {
            for l in &cfg.tcp_listen[p] {
                listeners.push(crate::tcp::ConnInfo {
                    local: l.local,
                    remote: SocketAddr::new(
                        if l.local.is_ipv6() {
                            std::net::Ipv6Addr::UNSPECIFIED.into()
                        } else {
                            Ipv4Addr::UNSPECIFIED.into()
                        },
                        0,
                    ),
                    // netstat's name of a socket only bound.
                    state: if l.bound_only { "CLOSED" } else { "LISTEN" },
                    send_q: 0,
                    recv_q: l.accept_q.len(),
                    info: None,
                });
            }
        }
        let req = Arc::new(ConnList {
            drop,
            ..ConnList::default()
        });
        let n = self.shared.tcp_inbox.len();
        req.left.store(n, Ordering::Release);
        for (w, q) in self.shared.tcp_inbox.iter().enumerate() {
            if q.push(TcpMsg::List(req.clone())).is_err() {
                // A full inbox: that worker is not counted on.
                req.left.fetch_sub(1, Ordering::AcqRel);
                return None;
            }
            self.shared.notify_worker(w);
        }
        Some(ConnQuery { listeners, req })
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

    /// How many routes there are per family: (IPv4, IPv6).
    pub fn route_counts(&self) -> (usize, usize) {
        self.shared
            .rib
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .counts()
    }

    /// Every route (`netstat -r`).
    pub fn routes(&self) -> Vec<route::RouteInfo> {
        self.shared
            .rib
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .routes()
    }

    /// The FIB as workers read it now.
    pub fn fib(&self) -> Arc<route::Fib> {
        self.shared.fib.load_full()
    }

    /// A routing socket: every routing message from now on, in a queue of at most
    /// `capacity` (messages beyond are dropped and counted, never queued unbounded).
    pub fn subscribe_routes(&self, capacity: usize) -> route::RtSubscriber {
        self.shared.rtbus.subscribe(capacity)
    }

    /// Messages dropped because a routing socket's queue was full.
    pub fn route_messages_dropped(&self) -> u64 {
        self.shared.rtbus.dropped()
    }

    /// Turns router advertisements on or off on an interface (RFC 4861 §6.2: its
    /// prefixes, MTU and, while it forwards IPv6, this node as a default router).
    pub fn set_router_advertisements(&self, ifindex: IfIndex, on: bool) -> Result<(), StackError> {
        let cfg = self.shared.cfg.load();
        let ifp = cfg
            .ifaces
            .get(ifindex.get())
            .ok_or(StackError::NoInterface(ifindex))?;
        ifp.forwarding.rtadv.store(on, Ordering::Relaxed);
        self.shared.notify_worker(0);
        Ok(())
    }

    /// Turns forwarding on or off for packets arriving on an interface, per family.
    pub fn set_forwarding(
        &self,
        ifindex: IfIndex,
        inet: bool,
        inet6: bool,
    ) -> Result<(), StackError> {
        let cfg = self.shared.cfg.load();
        let ifp = cfg
            .ifaces
            .get(ifindex.get())
            .ok_or(StackError::NoInterface(ifindex))?;
        ifp.forwarding.inet.store(inet, Ordering::Relaxed);
        ifp.forwarding.inet6.store(inet6, Ordering::Relaxed);
        Ok(())
    }

    /// The configuration as workers see it now.
    pub fn config(&self) -> Arc<NetConfig> {
        self.shared.cfg.load_full()
    }

    pub fn interfaces(&self) -> Vec<Arc<Ifnet>> {
        self.shared.cfg.load().ifaces.clone()
    }

    /// Binds a UDP socket (port 0: an ephemeral port).
    /// A UDP socket on `addr`, IPv4 or IPv6 (port 0: an ephemeral port). An IPv6
    /// socket, even on `[::]`, takes IPv6 datagrams only.
    pub fn udp_bind(&self, addr: impl Into<SocketAddr>) -> Result<UdpSocket, BindError> {
        let s = self.shared.bind(SockKind::Udp, addr.into())?;
        Ok(UdpSocket::new(self.shared.clone(), s))
    }

    /// Listens for TCP connections on `addr` (port 0: an ephemeral port) with room for
    /// `backlog` connections that are half open or not yet accepted. A SYN that
    /// finds `backlog` connections waiting for `accept` is dropped unanswered (and
    /// counted in `tcp.listendrop`), for the client to send again.
    /// IPv4 or IPv6; a listener on `[::]` takes IPv6 connections only (FreeBSD's
    /// `v6only`), so a dual-stack server listens twice.
    pub fn tcp_listen(
        &self,
        addr: impl Into<SocketAddr>,
        backlog: usize,
    ) -> Result<TcpListener, BindError> {
        let p = self.shared.cfg.load().tcp;
        let b = TcpBuffers {
            send: p.sndbuf,
            recv: p.rcvbuf,
        };
        self.tcp_listen_with(addr, backlog, b)
    }

    /// Like [`Stack::tcp_listen`], with the buffer sizes of the accepted connections.
    pub fn tcp_listen_with(
        &self,
        addr: impl Into<SocketAddr>,
        backlog: usize,
        buffers: TcpBuffers,
    ) -> Result<TcpListener, BindError> {
        let l = Self::register_tcp(&self.shared, addr.into(), backlog, buffers, false)?;
        Ok(TcpListener::new(self.shared.clone(), l))
    }

    /// `bind(2)` of a TCP socket that is to listen (FreeBSD's socket in CLOSED):
    /// holds `addr` (port 0: an ephemeral port) without taking connections, and
    /// SYNs to it are answered with resets that carry the IP options set on it
    /// ([`TcpBound::set_ttl`], [`TcpBound::set_tos`]);
    /// [`TcpBound::listen`] then listens there, with them. Fails where a
    /// listener or another bound socket of the family holds the address.
    pub fn tcp_bind(&self, addr: impl Into<SocketAddr>) -> Result<TcpBound, BindError> {
        let p = self.shared.cfg.load().tcp;
        let b = TcpBuffers {
            send: p.sndbuf,
            recv: p.rcvbuf,
        };
        let l = Self::register_tcp(&self.shared, addr.into(), 1, b, true)?;
        Ok(TcpBound::new(self.shared.clone(), l))
    }

    /// Enters a listener (or, `bound_only`, a socket only bound) in the
    /// configuration: a listener conflicts with listeners, a bound socket with
    /// listeners and bound sockets alike.
    pub(crate) fn register_tcp(
        shared: &Arc<Shared>,
        addr: SocketAddr,
        backlog: usize,
        buffers: TcpBuffers,
        bound_only: bool,
    ) -> Result<Arc<ListenShared>, BindError> {
        let b = buffers.clamped();
        let id = shared.next_sock_id.fetch_add(1, Ordering::Relaxed);
        shared.update(|c| {
            if !addr.ip().is_unspecified() && !c.is_local_ip(addr.ip()) {
                return Err(BindError::AddrNotAvailable(addr.ip()));
            }
            // Per family, as for UDP.
            let in_use = |c: &NetConfig, p: u16| {
                c.tcp_listen.get(&p).is_some_and(|v| {
                    v.iter().any(|l| {
                        (bound_only || !l.bound_only)
                            && l.local.is_ipv4() == addr.is_ipv4()
                            && (l.local.ip().is_unspecified()
                                || addr.ip().is_unspecified()
                                || l.local.ip() == addr.ip())
                    })
                })
            };
            let mut port = addr.port();
            if port == 0 {
                port = (0..16384)
                    .map(|_| 49152 + shared.next_port.fetch_add(1, Ordering::Relaxed) % 16384)
                    .find(|p| !in_use(c, *p))
                    .ok_or(BindError::NoPorts)?;
            } else if in_use(c, port) {
                return Err(BindError::AddrInUse(addr));
            }
            let mut l = ListenShared::new(
                id,
                SocketAddr::new(addr.ip(), port),
                backlog,
                (b.send, b.recv),
            );
            l.bound_only = bound_only;
            let l = Arc::new(l);
            c.tcp_listen.entry(port).or_default().push(l.clone());
            Ok(l)
        })
    }

    /// Opens a TCP connection and waits for the handshake (at most `timeout`; `None`:
    /// until the SYN retries give up). Needs running workers (`start`); in a simulation
    /// use [`Stack::tcp_connect_nonblocking`].
    pub fn tcp_connect(
        &self,
        remote: impl Into<SocketAddr>,
        timeout: Option<std::time::Duration>,
    ) -> io::Result<TcpStream> {
        let s = self.tcp_connect_nonblocking(remote)?;
        s.wait_connected(timeout)?;
        Ok(s)
    }

    /// The source address for a connection to `remote`, or why there is none.
    fn tcp_source(&self, remote: SocketAddr) -> io::Result<IpAddr> {
        let cfg = self.shared.cfg.load();
        let fib = self.shared.fib.load();
        // The address of the interface the FIB's route leaves by, as ip_output
        // picks it; then the host's own rules (default gateway, ND's routers).
        let by_route = match remote.ip() {
            IpAddr::V4(d) => fib.lookup4(d, || 0),
            IpAddr::V6(d) => fib.lookup6(d, || 0),
        }
        .filter(|n| n.kind == route::NhKind::Forward)
        .and_then(|n| cfg.ifaces.get(n.ifindex as usize))
        .and_then(|i| match remote.ip() {
            IpAddr::V4(d) => i.source_for(d).map(IpAddr::V4),
            IpAddr::V6(d) => i.source6_for(d).map(IpAddr::V6),
        });
        let src = match remote.ip() {
            a if cfg.is_local_ip(a) => Some(a),
            _ if by_route.is_some() => by_route,
            IpAddr::V4(d) => source_address(&cfg, d).map(IpAddr::V4),
            IpAddr::V6(d) => source_address6(&cfg, d).map(IpAddr::V6),
        };
        src.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NetworkUnreachable,
                format!("no route to {}", remote.ip()),
            )
        })
    }

    /// Starts a TCP connection; the stream becomes writable and readable once
    /// [`TcpStream::is_connected`] (writes before that are queued).
    pub fn tcp_connect_nonblocking(&self, remote: impl Into<SocketAddr>) -> io::Result<TcpStream> {
        let remote = remote.into();
        let src = self.tcp_source(remote)?;
        let port = 49152 + self.shared.next_port.fetch_add(1, Ordering::Relaxed) % 16384;
        crate::stack::tcp_socket::connect(
            self.shared.clone(),
            SocketAddr::new(src, port),
            remote,
            None,
        )
    }

    /// Starts a TCP connection with its own buffer sizes (`SO_SNDBUF`/`SO_RCVBUF`
    /// before `connect`), from `local_port` if given (else an ephemeral port).
    pub fn tcp_connect_with(
        &self,
        remote: impl Into<SocketAddr>,
        local_port: Option<u16>,
        buffers: TcpBuffers,
    ) -> io::Result<TcpStream> {
        let remote = remote.into();
        let src = self.tcp_source(remote)?;
        let port = match local_port {
            Some(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "local port 0: pass None for an ephemeral port",
                ))
            }
            Some(p) => p,
            None => 49152 + self.shared.next_port.fetch_add(1, Ordering::Relaxed) % 16384,
        };
        crate::stack::tcp_socket::connect(
            self.shared.clone(),
            SocketAddr::new(src, port),
            remote,
            Some(buffers),
        )
    }

    /// Starts a TCP connection with Fast Open (RFC 7413; FreeBSD's `sendto` on an
    /// unconnected socket with `TCP_FASTOPEN`): `data` is queued first (the count
    /// taken is returned, up to the send buffer), and the SYN carries it when the
    /// stack holds a cookie from the server, else asks for one and the data goes
    /// after the handshake (as it does when the server turns the cookie down).
    /// Needs the stack's `fastopen_client` (on by default; off, a plain
    /// connection). From `local_port` if given, with `buffers` if given.
    pub fn tcp_connect_fastopen(
        &self,
        remote: impl Into<SocketAddr>,
        local_port: Option<u16>,
        buffers: Option<TcpBuffers>,
        data: &[u8],
    ) -> io::Result<(TcpStream, usize)> {
        let remote = remote.into();
        let src = self.tcp_source(remote)?;
        let port = match local_port {
            Some(0) | None => 49152 + self.shared.next_port.fetch_add(1, Ordering::Relaxed) % 16384,
            Some(p) => p,
        };
        crate::stack::tcp_socket::connect_fastopen(
            self.shared.clone(),
            SocketAddr::new(src, port),
            remote,
            buffers,
            Some(data),
        )
    }

    /// Like [`Stack::tcp_connect_nonblocking`], from a chosen local port (bind, then
    /// connect). A 4-tuple still in use is refused; one in TIME_WAIT at the peer is
    /// taken over when the peer's rules allow (RFC 6191).
    pub fn tcp_connect_from_nonblocking(
        &self,
        local_port: u16,
        remote: impl Into<SocketAddr>,
    ) -> io::Result<TcpStream> {
        let remote = remote.into();
        if local_port == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "local port 0: use tcp_connect_nonblocking for an ephemeral port",
            ));
        }
        let src = self.tcp_source(remote)?;
        crate::stack::tcp_socket::connect(
            self.shared.clone(),
            SocketAddr::new(src, local_port),
            remote,
            None,
        )
    }

    /// Opens an ICMP echo socket with identifier `ident` (0: any free one).
    pub fn ping_socket(&self, ident: u16) -> Result<PingSocket, BindError> {
        let s = self.shared.bind(
            SockKind::IcmpEcho,
            SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, ident)),
        )?;
        Ok(PingSocket::new(self.shared.clone(), s))
    }

    /// Counters summed over all workers, and the pfil hooks' own (`fw.*`).
    pub fn stats(&self) -> Stats {
        let mut s = *self
            .shared
            .ctl_stats
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for slot in &self.shared.stats {
            slot.add_into(&mut s);
        }
        for b in &self.shared.cfg.load().bridges.list {
            b.br.rt.stats().add_into(&mut s);
        }
        for h in self.config().pfil.hooks() {
            h.add_stats(&mut s);
        }
        s.tcp.memstate = self.shared.tcp_mem.state() as u64;
        s
    }

    /// The bound on TCP buffer memory (`net.inet.tcp.mem`): the bytes every
    /// connection's buffers hold, as the workers last published, and the state
    /// they put the stack in, to look at from elsewhere (a service sizing its own
    /// buffers by the state).
    pub fn tcp_mem_handle(&self) -> Arc<crate::tcp::TcpMem> {
        self.shared.tcp_mem.clone()
    }

    /// Counters of one worker.
    pub fn worker_stats(&self, w: usize) -> Option<Stats> {
        let slot = self.shared.stats.get(w)?;
        let mut s = Stats::default();
        slot.add_into(&mut s);
        Some(s)
    }

    /// The stages' runtime counters (VPP's `show runtime`), summed over the workers:
    /// per stage, its calls, vectors, packets and cycles.
    pub fn runtime(&self) -> crate::runtime::Runtime {
        let mut r = crate::runtime::Runtime::default();
        for slot in &self.shared.runtime {
            r += &slot.read();
        }
        r
    }

    /// The stages' runtime counters of one worker.
    pub fn worker_runtime(&self, w: usize) -> Option<crate::runtime::Runtime> {
        self.shared.runtime.get(w).map(|s| s.read())
    }

    /// Device queue counters, per worker, per owned queue: (worker, ifindex, stats).
    /// While the workers run, as they last published them (every 100 ms at most).
    pub fn queue_stats(&self) -> Vec<(usize, IfIndex, dev::QueueStats)> {
        if self.is_running() {
            return self
                .shared
                .qstats
                .iter()
                .flat_map(|q| q.lock().unwrap_or_else(|e| e.into_inner()).clone())
                .collect();
        }
        self.workers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .flat_map(|w| w.queue_stats())
            .collect()
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

/// A question to the workers for their connections ([`Stack::tcp_connections_ask`]).
#[derive(Debug)]
pub struct ConnQuery {
    listeners: Vec<crate::tcp::ConnInfo>,
    req: Arc<crate::tcp::layer::ConnList>,
}

impl ConnQuery {
    /// Every worker has answered.
    pub fn ready(&self) -> bool {
        self.req.left.load(Ordering::Acquire) == 0
    }

    /// The listeners, then every connection the workers listed (all of them once
    /// [`ConnQuery::ready`]).
    pub fn into_list(self) -> Vec<crate::tcp::ConnInfo> {
        let mut conns =
            std::mem::take(&mut *self.req.out.lock().unwrap_or_else(|e| e.into_inner()));
        conns.sort_by_key(|c| (c.local, c.remote));
        let mut out = self.listeners;
        out.extend(conns);
        out
    }
}
