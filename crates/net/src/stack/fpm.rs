//! Routes from a routing daemon: FRR's zebra feeding the FIB through its Forwarding
//! Plane Manager (`dplane_fpm_nl`, netlink route messages over TCP; the framing is
//! [`route::fpm`]'s).
//!
//! [`FpmFeed`] applies what one connection sends to a [`Stack`]: `RTM_NEWROUTE`
//! adds a route or replaces the daemon's route to the same destination (every next
//! hop at once, multipath as ECMP), `RTM_DELROUTE` withdraws it. Next hops are
//! resolved against the stack's own interfaces: the connected network holding the
//! gateway, or, for an IPv6 link-local gateway (what BGP over IPv6 sends), the
//! interface the daemon names (`RTA_OIF`, its kernel's index, taken to our
//! interface of the same name: a TAP or an AF_PACKET link is the kernel's
//! interface too). A route none of whose next hops can be placed is held (bounded)
//! and tried again whenever the stack's interfaces or addresses change, so an
//! address that comes up after the route arrived (DAD, `ifconfig`) brings it in
//! without zebra sending it again. Routes the daemon sends are marked [`route::RtFlags::PROTO2`]: it replaces
//! and withdraws only those, never a connected route or one added by hand (a route
//! it sends for such a destination is counted as shadowed and not installed).
//!
//! **Updates are batched, rebuilds bounded.** The compiled FIB (Poptrie) has no
//! incremental update; changes go into the table at once and reach the data path
//! with the next compilation, which runs when the changes have waited at least
//! [`FpmFeed::REBUILD_RATIO`] times the last compilation's cost (so compiling takes
//! at most a fifth of the feed's time, whatever the rate of updates) and at once
//! when the daemon goes quiet.
//!
//! **Resynchronisation.** When zebra connects again (it was restarted, or the
//! connection broke), it sends its whole table again. The daemon's routes present
//! at that moment are marked stale; those it has not sent again once it has been
//! quiet for [`FpmFeed::resync_quiet`] are withdrawn. When it disconnects its
//! routes stay (packets keep flowing while the daemon restarts).
//!
//! **Bounded.** At most [`FpmPolicy::max_routes`] of the daemon's routes are
//! installed (and as many unresolved ones held); beyond, a route is refused and
//! counted (`full`). The stream's buffer holds a partial frame and one read
//! (at most some 192 KiB).
//!
//! **Who may feed it.** [`serve`] is the TCP side (zebra's `fpm address A port P`):
//! a peer outside [`FpmPolicy::allow`] (loopback only by default) is closed at once
//! and counted (`refused`), and so is a peer on this host whose socket is owned by
//! a user not in [`FpmPolicy::local_uids`] (read from `/proc/net/tcp`: an
//! unprivileged process on the host is not zebra). One session at a time: a second
//! connection while the first lives is closed at once and counted (`busy`) — zebra
//! connects again after a drop and its resynchronisation handles the gap, while a
//! newer connection replacing the older would let any peer push zebra off.

use crate::stack::Stack;
use route::fpm::{FpmMsg, FpmRoute, FpmStream};
use route::{IpPrefix, NhKind, RouteSpec, RtError, RtFlags};
use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The main routing table's number, as zebra sends it for the default VRF.
const RT_TABLE_MAIN: u32 = 254;
/// `rtm_protocol` of routes the kernel made (connected networks): not the
/// daemon's to install.
const RTPROT_KERNEL: u8 = 2;

/// What a feed has done (`netstat -s`, the metrics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FpmStats {
    /// Connections accepted.
    pub sessions: u64,
    /// Connections closed at once: a peer not allowed (address or socket owner).
    pub refused: u64,
    /// Connections closed at once: a session was live.
    pub busy: u64,
    /// Whether a daemon is connected now.
    pub connected: bool,
    pub frames: u64,
    pub bytes: u64,
    /// `RTM_NEWROUTE` installed (new destinations and replacements).
    pub adds: u64,
    /// Of those, replacements of a route the daemon had sent before.
    pub replaced: u64,
    /// `RTM_DELROUTE` applied.
    pub deletes: u64,
    /// Withdrawals of routes not installed.
    pub not_found: u64,
    /// Routes with no next hop on a network of ours when they came (held, not
    /// installed).
    pub unresolved: u64,
    /// Held routes installed later, when an address or interface came.
    pub retried: u64,
    /// Unresolved routes held now (a gauge).
    pub held: u64,
    /// Routes not installed because a connected or static route holds the
    /// destination.
    pub shadowed: u64,
    /// Routes refused because [`FpmPolicy::max_routes`] (or the table's own
    /// bound) was reached.
    pub full: u64,
    /// Messages not acted on: other message types, other tables, kernel routes,
    /// link-local and multicast destinations.
    pub ignored: u64,
    /// Malformed frames or messages (the connection is closed on a bad header).
    pub errors: u64,
    /// Compilations of the FIB, and their total and last cost.
    pub commits: u64,
    pub commit_ns: u64,
    pub last_commit_ns: u64,
    /// Stale routes withdrawn after a resynchronisation.
    pub stale_swept: u64,
    /// The daemon's routes in the table now.
    pub routes: u64,
    /// Whether changes wait for the next compilation (they are in the table, not
    /// yet on the data path).
    pub pending: bool,
}

impl FpmStats {
    /// Every counter by name (`connected` as 0 or 1, `routes` a gauge).
    pub fn fields(&self) -> [(&'static str, u64); 23] {
        [
            ("sessions", self.sessions),
            ("refused", self.refused),
            ("busy", self.busy),
            ("connected", u64::from(self.connected)),
            ("frames", self.frames),
            ("bytes", self.bytes),
            ("adds", self.adds),
            ("replaced", self.replaced),
            ("deletes", self.deletes),
            ("not_found", self.not_found),
            ("unresolved", self.unresolved),
            ("retried", self.retried),
            ("held", self.held),
            ("shadowed", self.shadowed),
            ("full", self.full),
            ("ignored", self.ignored),
            ("errors", self.errors),
            ("commits", self.commits),
            ("commit_ns", self.commit_ns),
            ("last_commit_ns", self.last_commit_ns),
            ("stale_swept", self.stale_swept),
            ("routes", self.routes),
            ("pending", u64::from(self.pending)),
        ]
    }
}

/// The name of the daemon's kernel's interface of index `i`, if it has one.
pub type KernelIfname = fn(u32) -> Option<String>;

/// Who may feed the FIB and how much (`mpstack run --fpm-allow`, `--fpm-user`,
/// `--fpm-max-routes`).
#[derive(Clone, Debug)]
pub struct FpmPolicy {
    /// Peers allowed; empty: loopback only.
    pub allow: Vec<IpPrefix>,
    /// The users whose sockets on this host may feed it (zebra runs as `frr`);
    /// `None`: any. A peer on this host whose socket's owner cannot be found is
    /// refused.
    pub local_uids: Option<Vec<u32>>,
    /// The daemon's routes installed at most (and unresolved ones held at most).
    pub max_routes: usize,
    /// Maps the daemon's `RTA_OIF` to an interface name ([`kernel_ifname`]).
    pub kernel_ifname: KernelIfname,
}

impl FpmPolicy {
    /// A full IPv4 table (past a million routes) and a full IPv6 one (a quarter
    /// of that) with room to grow; at some 350 bytes a route (60,000 routes took
    /// 21 MB) about 525 MB, where the table's own bound (2 M routes) is 700.
    pub const DEFAULT_MAX_ROUTES: usize = 1_500_000;

    /// Whether `peer`, connected to our `local`, may feed the FIB: `Err` says why not.
    pub fn admits(&self, local: SocketAddr, peer: SocketAddr) -> Result<(), String> {
        let ip = canonical(peer.ip());
        let allowed = if self.allow.is_empty() {
            ip.is_loopback()
        } else {
            self.allow.iter().any(|p| p.contains(ip))
        };
        if !allowed {
            return Err(if self.allow.is_empty() {
                format!("{peer} is not on loopback (--fpm-allow admits others)")
            } else {
                format!("{peer} is outside --fpm-allow")
            });
        }
        let Some(uids) = &self.local_uids else {
            return Ok(());
        };
        match socket_owner(peer, local) {
            Some(uid) if uids.contains(&uid) => Ok(()),
            Some(uid) => Err(format!(
                "{peer}: its socket belongs to uid {uid}, not a user allowed (--fpm-user)"
            )),
            // Not a socket of this host's (of this network namespace's): a remote
            // peer, admitted by its address.
            None if !ip.is_loopback() => Ok(()),
            None => Err(format!("{peer}: the owner of its socket is unknown")),
        }
    }
}

impl Default for FpmPolicy {
    fn default() -> FpmPolicy {
        FpmPolicy {
            allow: Vec::new(),
            local_uids: None,
            max_routes: FpmPolicy::DEFAULT_MAX_ROUTES,
            kernel_ifname,
        }
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn canonical(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(a, IpAddr::V4),
        v4 => v4,
    }
}

/// The name of this host's interface of index `i` (`/sys/class/net/*/ifindex`, of
/// the network namespace the process runs in: zebra's, beside it).
pub fn kernel_ifname(i: u32) -> Option<String> {
    std::fs::read_dir("/sys/class/net")
        .ok()?
        .flatten()
        .find_map(|e| {
            let idx = std::fs::read_to_string(e.path().join("ifindex")).ok()?;
            (idx.trim().parse::<u32>().ok()? == i)
                .then(|| e.file_name().to_string_lossy().into_owned())
        })
}

/// The owner (uid) of this host's TCP socket bound to `sock` and connected to
/// `peer`, from `/proc/net/tcp` and `tcp6` (as `ss -e` reads it; Linux has no
/// SO_PEERCRED for TCP).
pub fn socket_owner(sock: SocketAddr, peer: SocketAddr) -> Option<u32> {
    let hex = |a: IpAddr, port: u16| -> String {
        // The kernel prints each 32-bit word of the address in host order.
        let words: Vec<u32> = match a {
            IpAddr::V4(v4) => vec![u32::from_ne_bytes(v4.octets())],
            IpAddr::V6(v6) => v6
                .octets()
                .chunks_exact(4)
                .map(|w| u32::from_ne_bytes([w[0], w[1], w[2], w[3]]))
                .collect(),
        };
        let mut s: String = words.iter().map(|w| format!("{w:08X}")).collect();
        s += &format!(":{port:04X}");
        s
    };
    let mapped = |a: IpAddr| match a {
        IpAddr::V4(v4) => IpAddr::V6(v4.to_ipv6_mapped()),
        v6 => v6,
    };
    let (sip, pip) = (canonical(sock.ip()), canonical(peer.ip()));
    let wants = [
        (
            "/proc/net/tcp",
            hex(sip, sock.port()),
            hex(pip, peer.port()),
        ),
        (
            "/proc/net/tcp6",
            hex(mapped(sip), sock.port()),
            hex(mapped(pip), peer.port()),
        ),
    ];
    for (file, local, remote) in wants {
        if matches!(sip, IpAddr::V6(_)) && file.ends_with("tcp") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for l in text.lines().skip(1) {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() > 7 && f[1] == local && f[2] == remote {
                return f[7].parse().ok();
            }
        }
    }
    None
}

/// Applies one daemon's route messages to a stack (see the module's text).
#[derive(Debug)]
pub struct FpmFeed {
    stream: FpmStream,
    stats: FpmStats,
    /// The daemon's routes from before its current connection, not yet sent again.
    stale: Option<HashSet<IpPrefix>>,
    /// Since when changes in the table wait for a compilation (none wait: `None`).
    dirty_since: Option<Instant>,
    last_cost: Duration,
    last_msg: Instant,
    resync_quiet: Duration,
    max_routes: usize,
    kernel_ifname: KernelIfname,
    /// Routes none of whose next hops could be placed, to try again.
    held: HashMap<IpPrefix, FpmRoute>,
    /// The interfaces the held routes were last tried against.
    held_cfg: Option<Arc<crate::stack::NetConfig>>,
}

impl Default for FpmFeed {
    fn default() -> FpmFeed {
        FpmFeed::new()
    }
}

impl FpmFeed {
    /// Changes wait at least this many times the last compilation's cost before
    /// the next one: compiling takes at most 1/(1+4) of the time.
    pub const REBUILD_RATIO: u32 = 4;

    pub fn new() -> FpmFeed {
        FpmFeed {
            stream: FpmStream::new(),
            stats: FpmStats::default(),
            stale: None,
            dirty_since: None,
            last_cost: Duration::ZERO,
            last_msg: Instant::now(),
            resync_quiet: Duration::from_secs(3),
            max_routes: FpmPolicy::DEFAULT_MAX_ROUTES,
            kernel_ifname,
            held: HashMap::new(),
            held_cfg: None,
        }
    }

    /// The bound and the interface names of `p`.
    pub fn policy(mut self, p: &FpmPolicy) -> FpmFeed {
        self.max_routes = p.max_routes;
        self.kernel_ifname = p.kernel_ifname;
        self
    }

    /// How long the daemon must be quiet after connecting before its routes not
    /// sent again are withdrawn (3 s by default).
    pub fn resync_quiet(mut self, d: Duration) -> FpmFeed {
        self.resync_quiet = d;
        self
    }

    pub fn stats(&self) -> FpmStats {
        FpmStats {
            pending: self.dirty_since.is_some(),
            held: self.held.len() as u64,
            ..self.stats
        }
    }

    /// A daemon connected: a new stream, and the routes it sent before are stale
    /// until it sends them again.
    pub fn session_start(&mut self, stack: &Stack, now: Instant) {
        self.stream = FpmStream::new();
        self.stats.sessions += 1;
        self.stats.connected = true;
        self.last_msg = now;
        let old = stack.route_batch_deferred(|rib| rib.destinations_with(RtFlags::PROTO2));
        self.stats.routes = old.len() as u64;
        self.stale = (!old.is_empty()).then(|| old.into_iter().collect());
        // It sends them all again.
        self.held.clear();
    }

    /// The daemon went away: what it sent is compiled; its routes stay.
    pub fn session_end(&mut self, stack: &Stack) {
        self.stats.connected = false;
        self.stream = FpmStream::new();
        self.commit(stack);
    }

    /// Takes bytes from the connection and applies the whole messages among them
    /// to the table (not yet compiled: see [`FpmFeed::poll`]). An error means the
    /// stream cannot be followed (a bad frame header): close the connection.
    pub fn feed(
        &mut self,
        stack: &Stack,
        bytes: &[u8],
        now: Instant,
    ) -> Result<(), route::fpm::FpmError> {
        self.stats.bytes += bytes.len() as u64;
        self.stream.push(bytes);
        let mut msgs = Vec::new();
        loop {
            match self.stream.next_frame() {
                None => break,
                Some(Err(e)) => {
                    self.stats.errors += 1;
                    self.apply(stack, msgs, now);
                    return Err(e);
                }
                Some(Ok(frame)) => {
                    self.stats.frames += 1;
                    match route::fpm::parse_frame(frame) {
                        Ok(m) => msgs.extend(m),
                        Err(_) => self.stats.errors += 1,
                    }
                }
            }
        }
        self.apply(stack, msgs, now);
        Ok(())
    }

    /// Compiles the table if changes have waited long enough (see the module's
    /// text), and withdraws the stale routes once a reconnected daemon has been
    /// quiet long enough. Call it after every read and when reads time out.
    pub fn poll(&mut self, stack: &Stack, now: Instant) {
        self.retry(stack, now);
        if self.stats.connected && now.saturating_duration_since(self.last_msg) >= self.resync_quiet
        {
            if let Some(stale) = self.stale.take() {
                let gone = stack.route_batch_deferred(|rib| {
                    let mut n = 0u64;
                    for d in stale {
                        if rib.flags(d).is_some_and(|f| f.contains(RtFlags::PROTO2))
                            && rib.delete(d, None).is_ok()
                        {
                            n += 1;
                        }
                    }
                    n
                });
                self.stats.stale_swept += gone;
                self.stats.routes = self.stats.routes.saturating_sub(gone);
                if gone > 0 {
                    self.dirty_since.get_or_insert(now);
                    self.commit(stack);
                }
            }
        }
        if self.dirty_since.is_some_and(|since| {
            now.saturating_duration_since(since) >= self.last_cost * Self::REBUILD_RATIO
        }) {
            self.commit(stack);
        }
    }

    /// Compiles the table now if it changed.
    pub fn commit(&mut self, stack: &Stack) {
        if self.dirty_since.take().is_none() {
            return;
        }
        let t = Instant::now();
        if stack.route_commit() {
            self.last_cost = t.elapsed();
            self.stats.commits += 1;
            self.stats.commit_ns += self.last_cost.as_nanos() as u64;
            self.stats.last_commit_ns = self.last_cost.as_nanos() as u64;
        }
    }

    /// Whether changes wait for a compilation.
    pub fn pending(&self) -> bool {
        self.dirty_since.is_some()
    }

    /// Tries the held routes again if the interfaces or their addresses changed
    /// since they were last tried (one pointer comparison when nothing did).
    fn retry(&mut self, stack: &Stack, now: Instant) {
        if self.held.is_empty() {
            return;
        }
        let cfg = stack.config();
        if self.held_cfg.as_ref().is_some_and(|c| Arc::ptr_eq(c, &cfg)) {
            return;
        }
        let mut ready = Vec::new();
        for (dst, r) in &self.held {
            let specs = resolve(&cfg, r, self.kernel_ifname);
            if !specs.is_empty() {
                ready.push((*dst, Some(specs)));
            }
        }
        self.held_cfg = Some(cfg);
        for (d, _) in &ready {
            self.held.remove(d);
        }
        let before = self.stats.adds;
        self.install(stack, ready, now);
        self.stats.retried += self.stats.adds - before;
    }

    fn apply(&mut self, stack: &Stack, msgs: Vec<FpmMsg>, now: Instant) {
        if msgs.is_empty() {
            return;
        }
        self.last_msg = now;
        let cfg = stack.config();
        // Resolved outside the table's lock: (destination, paths or None to
        // withdraw).
        let mut todo: Vec<(IpPrefix, Option<Vec<RouteSpec>>)> = Vec::with_capacity(msgs.len());
        for m in msgs {
            match m {
                FpmMsg::Other(_) => self.stats.ignored += 1,
                FpmMsg::Add(r) if !wanted(&r) => self.stats.ignored += 1,
                FpmMsg::Delete(r) if !wanted(&r) => self.stats.ignored += 1,
                FpmMsg::Delete(r) => {
                    self.held.remove(&r.dst);
                    todo.push((r.dst, None));
                }
                FpmMsg::Add(r) => {
                    let specs = resolve(&cfg, &r, self.kernel_ifname);
                    if specs.is_empty() {
                        self.stats.unresolved += 1;
                        let dst = r.dst;
                        if self.held.len() < self.max_routes || self.held.contains_key(&dst) {
                            self.held.insert(dst, r);
                            self.held_cfg = Some(cfg.clone());
                        } else {
                            self.stats.full += 1;
                        }
                        todo.push((dst, Some(specs)));
                    } else {
                        self.held.remove(&r.dst);
                        todo.push((r.dst, Some(specs)));
                    }
                }
            }
        }
        if let Some(stale) = &mut self.stale {
            for (d, _) in &todo {
                stale.remove(d);
            }
        }
        self.install(stack, todo, now);
    }

    /// Puts resolved routes in the table (`Some(paths)`; no paths: the daemon's
    /// route there is withdrawn and none installed) and withdraws others (`None`).
    fn install(
        &mut self,
        stack: &Stack,
        todo: Vec<(IpPrefix, Option<Vec<RouteSpec>>)>,
        now: Instant,
    ) {
        if todo.is_empty() {
            return;
        }
        let max = self.max_routes as u64;
        let st = &mut self.stats;
        let changed = stack.route_batch_deferred(|rib| {
            let mut changed = false;
            for (dst, specs) in todo {
                let had = match rib.flags(dst) {
                    None => false,
                    Some(f) if f.contains(RtFlags::PROTO2) => true,
                    Some(_) => {
                        // A connected or static route: not the daemon's.
                        if specs.as_ref().is_some_and(|s| !s.is_empty()) {
                            st.shadowed += 1;
                        } else if specs.is_none() {
                            st.not_found += 1;
                        }
                        continue;
                    }
                };
                if had {
                    let _ = rib.delete(dst, None);
                    st.routes = st.routes.saturating_sub(1);
                    changed = true;
                }
                let Some(specs) = specs else {
                    if had {
                        st.deletes += 1;
                    } else {
                        st.not_found += 1;
                    }
                    continue;
                };
                if specs.is_empty() {
                    continue;
                }
                if st.routes >= max {
                    st.full += 1;
                    continue;
                }
                let mut installed = false;
                for s in specs {
                    match rib.add(s) {
                        Ok(()) => installed = true,
                        Err(RtError::Full) => st.full += 1,
                        // The same path twice, or more paths than a group holds.
                        Err(_) => st.errors += 1,
                    }
                }
                if installed {
                    st.adds += 1;
                    st.replaced += u64::from(had);
                    st.routes += 1;
                    changed = true;
                }
            }
            changed
        });
        if changed {
            self.dirty_since.get_or_insert(now);
        }
    }
}

/// Whether a route is one to install: the main table, not the kernel's own, to a
/// destination that is routed (not link-local, not multicast).
fn wanted(r: &FpmRoute) -> bool {
    if !(r.table == RT_TABLE_MAIN || r.table == 0) || r.protocol == RTPROT_KERNEL {
        return false;
    }
    match r.dst.addr() {
        IpAddr::V4(a) => !a.is_multicast() && !a.is_link_local(),
        IpAddr::V6(a) => !a.is_multicast() && (a.segments()[0] & 0xffc0) != 0xfe80,
    }
}

/// The route's paths on our interfaces: a discard route as such; each forwarding
/// next hop through the interface whose network holds its gateway, or, for an IPv6
/// link-local gateway, through the interface of the name the daemon's kernel gives
/// its `RTA_OIF` (RFC 4291 §2.5.6: a link-local address means something only with
/// its link), if that interface runs IPv6 here. Next hops without a gateway (an
/// interface route of the daemon's kernel) cannot be placed and are left out.
fn resolve(
    cfg: &crate::stack::NetConfig,
    r: &FpmRoute,
    kernel_ifname: KernelIfname,
) -> Vec<RouteSpec> {
    let flags = RtFlags::PROTO2;
    if r.kind != NhKind::Forward {
        let mut s = RouteSpec::discard(r.dst, r.kind);
        s.flags = flags;
        return vec![s];
    }
    let mut out: Vec<RouteSpec> = Vec::with_capacity(r.nexthops.len());
    for nh in &r.nexthops {
        let Some(gw) = nh.gateway else { continue };
        if gw.is_ipv6() != r.dst.is_ipv6() {
            continue;
        }
        let ifp = match gw {
            IpAddr::V6(a) if (a.segments()[0] & 0xffc0) == 0xfe80 => {
                let Some(name) = (nh.oif != 0).then(|| kernel_ifname(nh.oif)).flatten() else {
                    continue;
                };
                cfg.ifaces
                    .iter()
                    .find(|i| i.name == name && !i.addrs6.is_empty())
            }
            _ => cfg.connected(gw),
        };
        let Some(ifp) = ifp else {
            continue;
        };
        let mut s = RouteSpec::via(r.dst, gw, u32::from(ifp.index.0));
        s.flags = flags;
        if !out
            .iter()
            .any(|o| o.gateway == s.gateway && o.ifindex == s.ifindex)
        {
            out.push(s);
        }
    }
    out
}

/// Serves the daemon's connections on `listener` until `stop`, one at a time, to
/// the peers `policy` admits (see the module's text); `stats` is updated as the
/// feed goes.
pub fn serve(
    stack: &Stack,
    listener: &TcpListener,
    stop: &AtomicBool,
    stats: &Mutex<FpmStats>,
    policy: &FpmPolicy,
) {
    if let Err(e) = listener.set_nonblocking(true) {
        tracing::error!(target: "fpm", "listener: {e}");
        return;
    }
    let mut feed = FpmFeed::new().policy(policy);
    let mut conn: Option<TcpStream> = None;
    let mut buf = vec![0u8; 1 << 16];
    let publish = |f: &FpmFeed| *stats.lock().unwrap_or_else(|e| e.into_inner()) = f.stats();
    while !stop.load(Ordering::Relaxed) {
        // Every connection waiting is taken, so that one refused is closed at once.
        let mut taken = false;
        loop {
            let (s, peer) = match listener.accept() {
                Ok(x) => {
                    taken = true;
                    x
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    tracing::warn!(target: "fpm", "accept: {e}");
                    break;
                }
            };
            let local = s.local_addr().ok();
            if let Err(why) =
                local.map_or(Err("no local address".into()), |l| policy.admits(l, peer))
            {
                feed.stats.refused += 1;
                tracing::warn!(target: "fpm", "connection refused: {why}");
                let _ = s.shutdown(std::net::Shutdown::Both);
                continue;
            }
            if conn.is_some() {
                feed.stats.busy += 1;
                tracing::warn!(
                    target: "fpm",
                    "connection from {peer} refused: a routing daemon's session is live"
                );
                let _ = s.shutdown(std::net::Shutdown::Both);
                continue;
            }
            if s.set_nonblocking(false).is_ok()
                && s.set_read_timeout(Some(Duration::from_millis(20))).is_ok()
            {
                tracing::info!(target: "fpm", "routing daemon connected from {peer}");
                // Every change to the node waits for a reload or batch under way
                // (`Stack::changes_alone`), so that putting the node back after a
                // refused one does not take zebra's routes back with it.
                let _c = stack.changes_shared();
                feed.session_start(stack, Instant::now());
                conn = Some(s);
            }
        }
        if taken {
            // A refusal is seen in the counters by the time its peer sees the close.
            publish(&feed);
        }
        let Some(s) = conn.as_mut() else {
            stack_poll(&mut feed, stack);
            publish(&feed);
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        let end = match s.read(&mut buf) {
            Ok(0) => Some("closed the connection".to_string()),
            Ok(n) => {
                let fed = {
                    let _c = stack.changes_shared();
                    feed.feed(stack, &buf[..n], Instant::now())
                };
                fed.err().map(|e| format!("sent a bad frame ({e})"))
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                None
            }
            Err(e) => Some(e.to_string()),
        };
        if let Some(why) = end {
            tracing::info!(target: "fpm", "routing daemon {why}; its routes stay");
            conn = None;
            let _c = stack.changes_shared();
            feed.session_end(stack);
        }
        stack_poll(&mut feed, stack);
        publish(&feed);
    }
    {
        let _c = stack.changes_shared();
        feed.commit(stack);
    }
    publish(&feed);
}

/// The feed's timers (retries, the resync's sweep, batched commits), as a
/// change of the node's ([`Stack::changes_shared`]).
fn stack_poll(feed: &mut FpmFeed, stack: &Stack) {
    let _c = stack.changes_shared();
    feed.poll(stack, Instant::now());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{IfConfig, StackConfig};
    use dev::mem::{wire, WireConfig};
    use route::fpm::{encode_route, FpmNexthop};
    use std::net::Ipv4Addr;

    /// A stack with two interfaces, if0 198.18.1.1/24 and if1 198.18.2.1/24.
    fn stack() -> (Stack, Vec<dev::mem::MemDevice>) {
        let mut s = Stack::new(StackConfig {
            name: "r".into(),
            workers: 1,
            ..StackConfig::default()
        });
        let mut far = Vec::new();
        for (k, a) in ["198.18.1.1/24", "198.18.2.1/24"].iter().enumerate() {
            let (d, e) = wire(WireConfig::default());
            far.push(e);
            let addrs = vec![a.parse().unwrap()];
            s.add_interface(
                Box::new(d),
                IfConfig {
                    name: Some(format!("if{k}")),
                    addrs,
                    ..IfConfig::default()
                },
            )
            .unwrap();
        }
        (s, far)
    }

    fn route(dst: &str, gws: &[&str]) -> FpmRoute {
        FpmRoute {
            dst: dst.parse().unwrap(),
            kind: NhKind::Forward,
            protocol: 186,
            table: 254,
            metric: 20,
            nexthops: gws
                .iter()
                .map(|g| FpmNexthop {
                    gateway: Some(g.parse().unwrap()),
                    oif: 77,
                    weight: 1,
                })
                .collect(),
        }
    }

    fn via(s: &Stack, a: [u8; 4]) -> Option<Option<IpAddr>> {
        s.fib().lookup4(Ipv4Addr::from(a), || 0).map(|n| n.gateway)
    }

    #[test]
    fn adds_replaces_withdraws_and_leaves_others_alone() {
        let (s, _far) = stack();
        let mut f = FpmFeed::new();
        let t = Instant::now();
        f.session_start(&s, t);
        let mut bytes = encode_route(true, &route("198.19.0.0/16", &["198.18.2.2"]));
        bytes.extend(encode_route(true, &route("198.20.0.0/16", &["198.18.9.9"])));
        // A connected network: not the daemon's to replace.
        bytes.extend(encode_route(true, &route("198.18.1.0/24", &["198.18.2.2"])));
        let mut kernel = route("198.21.0.0/16", &["198.18.2.2"]);
        kernel.protocol = 2;
        bytes.extend(encode_route(true, &kernel));
        // Split anywhere: the stream reassembles frames.
        let (a, b) = bytes.split_at(7);
        f.feed(&s, a, t).unwrap();
        f.feed(&s, b, t).unwrap();
        assert!(f.pending());
        assert_eq!(via(&s, [198, 19, 3, 4]), None, "not compiled yet");
        f.poll(&s, t + Duration::from_secs(1));
        assert!(!f.pending());
        let gw2: IpAddr = "198.18.2.2".parse().unwrap();
        assert_eq!(via(&s, [198, 19, 3, 4]), Some(Some(gw2)));
        assert_eq!(via(&s, [198, 20, 3, 4]), None);
        assert_eq!(via(&s, [198, 18, 1, 9]), Some(None), "connected route kept");
        let st = f.stats();
        assert_eq!(
            (st.adds, st.unresolved, st.shadowed, st.ignored, st.routes),
            (1, 1, 1, 1, 1)
        );
        let info = s.route_get("198.19.0.1".parse().unwrap()).unwrap();
        assert!(info.flags.contains(RtFlags::PROTO2));
        assert_eq!(info.flags.to_string(), "UG2");

        // Replaced by two paths (ECMP), then withdrawn.
        let t2 = t + Duration::from_secs(2);
        let two = route("198.19.0.0/16", &["198.18.2.2", "198.18.1.2"]);
        f.feed(&s, &encode_route(true, &two), t2).unwrap();
        f.commit(&s);
        assert_eq!(
            s.route_get("198.19.0.1".parse().unwrap())
                .unwrap()
                .paths
                .len(),
            2
        );
        assert_eq!(f.stats().replaced, 1);
        f.feed(&s, &encode_route(false, &two), t2).unwrap();
        // A withdrawal of the connected network does nothing.
        f.feed(&s, &encode_route(false, &route("198.18.1.0/24", &[])), t2)
            .unwrap();
        f.commit(&s);
        assert_eq!(via(&s, [198, 19, 3, 4]), None);
        assert_eq!(via(&s, [198, 18, 1, 9]), Some(None));
        let st = f.stats();
        assert_eq!((st.deletes, st.not_found, st.routes), (1, 1, 0));
    }

    #[test]
    fn discard_routes_and_a_bad_header() {
        let (s, _far) = stack();
        let mut f = FpmFeed::new();
        let t = Instant::now();
        f.session_start(&s, t);
        let mut r = route("198.19.0.0/16", &[]);
        r.kind = NhKind::Blackhole;
        f.feed(&s, &encode_route(true, &r), t).unwrap();
        f.commit(&s);
        let info = s.route_get("198.19.0.1".parse().unwrap()).unwrap();
        assert_eq!(info.paths[0].kind, NhKind::Blackhole);
        assert!(f.feed(&s, &[2, 1, 0, 8, 0, 0, 0, 0], t).is_err());
        assert_eq!(f.stats().errors, 1);
    }

    #[test]
    fn a_reconnecting_daemon_resynchronises() {
        let (s, _far) = stack();
        let mut f = FpmFeed::new().resync_quiet(Duration::from_secs(3));
        let t = Instant::now();
        f.session_start(&s, t);
        for d in ["198.19.0.0/16", "198.20.0.0/16", "198.21.0.0/16"] {
            f.feed(&s, &encode_route(true, &route(d, &["198.18.2.2"])), t)
                .unwrap();
        }
        f.session_end(&s);
        assert_eq!(f.stats().routes, 3);
        assert_eq!(
            via(&s, [198, 20, 0, 1]),
            Some(Some("198.18.2.2".parse().unwrap()))
        );
        // Back: two of the three sent again, one of them elsewhere.
        let t2 = t + Duration::from_secs(10);
        f.session_start(&s, t2);
        f.feed(
            &s,
            &encode_route(true, &route("198.19.0.0/16", &["198.18.2.2"])),
            t2,
        )
        .unwrap();
        f.feed(
            &s,
            &encode_route(true, &route("198.21.0.0/16", &["198.18.1.2"])),
            t2,
        )
        .unwrap();
        f.poll(&s, t2 + Duration::from_secs(1));
        assert_eq!(
            via(&s, [198, 20, 0, 1]),
            Some(Some("198.18.2.2".parse().unwrap())),
            "not yet swept"
        );
        f.poll(&s, t2 + Duration::from_secs(4));
        assert_eq!(via(&s, [198, 20, 0, 1]), None);
        assert_eq!(
            via(&s, [198, 21, 0, 1]),
            Some(Some("198.18.1.2".parse().unwrap()))
        );
        let st = f.stats();
        assert_eq!((st.stale_swept, st.routes, st.sessions), (1, 2, 2));
    }

    /// The daemon's kernel calls our if1 77 (the index the tests' routes carry).
    fn kernel_names(i: u32) -> Option<String> {
        (i == 77).then(|| "if1".to_string())
    }

    #[test]
    fn the_route_bound_is_held_and_counted() {
        let (s, _far) = stack();
        let policy = FpmPolicy {
            max_routes: 2,
            ..FpmPolicy::default()
        };
        let mut f = FpmFeed::new().policy(&policy);
        let t = Instant::now();
        f.session_start(&s, t);
        for d in ["198.19.0.0/16", "198.20.0.0/16", "198.21.0.0/16"] {
            f.feed(&s, &encode_route(true, &route(d, &["198.18.2.2"])), t)
                .unwrap();
        }
        // A replacement of one it holds is no new route; an unresolved one over
        // the bound is not held either.
        f.feed(
            &s,
            &encode_route(true, &route("198.19.0.0/16", &["198.18.1.2"])),
            t,
        )
        .unwrap();
        f.commit(&s);
        assert_eq!(via(&s, [198, 21, 0, 1]), None);
        assert_eq!(
            via(&s, [198, 19, 0, 1]),
            Some(Some("198.18.1.2".parse().unwrap()))
        );
        let st = f.stats();
        assert_eq!((st.routes, st.full, st.adds, st.replaced), (2, 1, 3, 1));
        // Room again once the daemon withdraws one.
        f.feed(&s, &encode_route(false, &route("198.20.0.0/16", &[])), t)
            .unwrap();
        f.feed(
            &s,
            &encode_route(true, &route("198.21.0.0/16", &["198.18.2.2"])),
            t,
        )
        .unwrap();
        f.commit(&s);
        assert!(via(&s, [198, 21, 0, 1]).is_some());
        assert_eq!((f.stats().routes, f.stats().full), (2, 1));
    }

    /// BGP over IPv6 gives a link-local next hop with the interface it is on: the
    /// route goes out of our interface of that name, and only if it runs IPv6.
    #[test]
    fn link_local_next_hops_resolve_on_their_interface() {
        let (s, _far) = stack();
        let policy = FpmPolicy {
            kernel_ifname: kernel_names,
            ..FpmPolicy::default()
        };
        let mut f = FpmFeed::new().policy(&policy);
        let t = Instant::now();
        f.session_start(&s, t);
        let r = route("2001:2:9::/48", &["fe80::2"]);
        f.feed(&s, &encode_route(true, &r), t).unwrap();
        f.commit(&s);
        assert!(s.route_get("2001:2:9::1".parse().unwrap()).is_none());
        assert_eq!((f.stats().unresolved, f.stats().held), (1, 1));
        // IPv6 comes up on if1 (its link-local address with it): the held route
        // is tried again and installed, with no word from the daemon.
        s.add_address6(net_if(&s, "if1"), "2001:2:2::1/64".parse().unwrap())
            .unwrap();
        f.poll(&s, t + Duration::from_millis(10));
        f.commit(&s);
        let info = s
            .route_get("2001:2:9::1".parse().unwrap())
            .expect("installed");
        assert_eq!(info.paths[0].gateway, Some("fe80::2".parse().unwrap()));
        assert_eq!(info.paths[0].ifindex, u32::from(net_if(&s, "if1").0));
        let st = f.stats();
        assert_eq!((st.retried, st.held, st.routes), (1, 0, 1));
        // An index the daemon's kernel has no name for is not placed.
        let mut other = route("2001:2:8::/48", &["fe80::2"]);
        other.nexthops[0].oif = 5;
        f.feed(&s, &encode_route(true, &other), t).unwrap();
        f.commit(&s);
        assert!(s.route_get("2001:2:8::1".parse().unwrap()).is_none());
    }

    /// A route whose gateway is on no network of ours comes in when that network
    /// does (an address added), and a withdrawal meanwhile forgets it.
    #[test]
    fn an_unresolved_route_comes_in_when_its_network_does() {
        let (s, _far) = stack();
        let mut f = FpmFeed::new();
        let t = Instant::now();
        f.session_start(&s, t);
        for d in ["198.19.0.0/16", "198.20.0.0/16"] {
            f.feed(&s, &encode_route(true, &route(d, &["198.18.9.9"])), t)
                .unwrap();
        }
        f.feed(&s, &encode_route(false, &route("198.20.0.0/16", &[])), t)
            .unwrap();
        f.poll(&s, t + Duration::from_millis(10));
        assert_eq!(via(&s, [198, 19, 0, 1]), None);
        assert_eq!(f.stats().held, 1);
        s.add_address(net_if(&s, "if0"), "198.18.9.1/24".parse().unwrap())
            .unwrap();
        f.poll(&s, t + Duration::from_millis(20));
        f.commit(&s);
        assert_eq!(
            via(&s, [198, 19, 0, 1]),
            Some(Some("198.18.9.9".parse().unwrap()))
        );
        assert_eq!(via(&s, [198, 20, 0, 1]), None);
        let st = f.stats();
        assert_eq!(
            (st.unresolved, st.retried, st.held, st.routes),
            (2, 1, 0, 1)
        );
    }

    fn net_if(s: &Stack, name: &str) -> crate::IfIndex {
        s.interfaces()
            .iter()
            .find(|i| i.name == name)
            .expect("the interface")
            .index
    }

    /// `serve` on a loopback port of the host, for the test's connections.
    struct Served<'a> {
        stop: &'a AtomicBool,
        stats: &'a Mutex<FpmStats>,
        at: SocketAddr,
    }

    impl Served<'_> {
        fn stats(&self) -> FpmStats {
            *self.stats.lock().unwrap()
        }
        /// Waits up to 5 s for `f` to hold of the stats.
        fn until(&self, f: impl Fn(&FpmStats) -> bool) -> FpmStats {
            let end = Instant::now() + Duration::from_secs(5);
            while !f(&self.stats()) && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(10));
            }
            self.stats()
        }
    }

    fn with_serve(policy: FpmPolicy, body: impl FnOnce(&Stack, &Served<'_>)) {
        let (s, _far) = stack();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let at = listener.local_addr().unwrap();
        let stop = AtomicBool::new(false);
        let stats = Mutex::new(FpmStats::default());
        std::thread::scope(|sc| {
            sc.spawn(|| serve(&s, &listener, &stop, &stats, &policy));
            let served = Served {
                stop: &stop,
                stats: &stats,
                at,
            };
            body(&s, &served);
        });
    }

    impl Drop for Served<'_> {
        // Also when the body panics: else the scope would wait for serve for ever.
        fn drop(&mut self) {
            self.stop.store(true, Ordering::Relaxed);
        }
    }

    /// True once the node has closed `c` (a read ends), within 5 s.
    fn closed(c: &mut TcpStream) -> bool {
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut b = [0u8; 16];
        match c.read(&mut b) {
            Ok(n) => n == 0,
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
        }
    }

    fn inject(c: &mut TcpStream, dst: &str) {
        use std::io::Write;
        let _ = c.write_all(&encode_route(true, &route(dst, &["198.18.2.2"])));
    }

    #[test]
    fn a_peer_outside_the_allowed_prefixes_is_refused() {
        let policy = FpmPolicy {
            allow: vec!["198.18.0.0/15".parse().unwrap()],
            ..FpmPolicy::default()
        };
        with_serve(policy, |s, sv| {
            let mut c = TcpStream::connect(sv.at).unwrap();
            inject(&mut c, "198.18.7.7/32");
            assert!(closed(&mut c), "the node kept the connection");
            let st = sv.until(|st| st.refused == 1);
            assert_eq!((st.refused, st.sessions, st.frames), (1, 0, 0));
            assert!(s.route_get("198.18.7.7".parse().unwrap()).is_none());
        });
    }

    /// A peer on this host whose socket is owned by a user not allowed (the test
    /// allows only a uid that is not its own) is refused: an unprivileged process
    /// reaching 127.0.0.1 is not zebra.
    #[test]
    fn a_local_peer_of_another_user_is_refused() {
        let mine = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|t| {
                let l = t.lines().find(|l| l.starts_with("Uid:"))?;
                l.split_whitespace().nth(2)?.parse::<u32>().ok()
            })
            .expect("our uid");
        let policy = FpmPolicy {
            local_uids: Some(vec![mine.wrapping_add(1)]),
            ..FpmPolicy::default()
        };
        with_serve(policy, |s, sv| {
            let mut c = TcpStream::connect(sv.at).unwrap();
            let local = c.local_addr().unwrap();
            assert_eq!(socket_owner(local, sv.at), Some(mine));
            inject(&mut c, "198.19.0.0/16");
            assert!(closed(&mut c), "the node kept the connection");
            assert_eq!(sv.until(|st| st.refused == 1).refused, 1);
            assert!(s.route_get("198.19.0.1".parse().unwrap()).is_none());
        });
        // Its own uid allowed: served.
        let policy = FpmPolicy {
            local_uids: Some(vec![mine]),
            ..FpmPolicy::default()
        };
        with_serve(policy, |s, sv| {
            let mut c = TcpStream::connect(sv.at).unwrap();
            inject(&mut c, "198.19.0.0/16");
            let st = sv.until(|st| st.adds == 1 && !st.pending);
            assert_eq!((st.refused, st.adds), (0, 1));
            assert!(s.route_get("198.19.0.1".parse().unwrap()).is_some());
        });
    }

    /// A second connection while zebra's lives is closed at once and counted, and
    /// sends nothing that counts; zebra's session goes on, and once it has ended a
    /// new one is taken.
    #[test]
    fn a_second_connection_is_refused_while_the_first_lives() {
        with_serve(FpmPolicy::default(), |s, sv| {
            let mut zebra = TcpStream::connect(sv.at).unwrap();
            inject(&mut zebra, "198.19.0.0/16");
            sv.until(|st| st.adds == 1);
            let mut other = TcpStream::connect(sv.at).unwrap();
            inject(&mut other, "198.20.0.0/16");
            assert!(closed(&mut other), "the node kept the second connection");
            let st = sv.until(|st| st.busy == 1);
            assert_eq!((st.busy, st.sessions, st.connected), (1, 1, true));
            inject(&mut zebra, "198.21.0.0/16");
            let st = sv.until(|st| st.adds == 2 && !st.pending);
            assert_eq!(st.adds, 2);
            assert!(s.route_get("198.20.0.1".parse().unwrap()).is_none());
            assert!(s.route_get("198.21.0.1".parse().unwrap()).is_some());
            drop(zebra);
            sv.until(|st| !st.connected);
            let mut again = TcpStream::connect(sv.at).unwrap();
            inject(&mut again, "198.20.0.0/16");
            let st = sv.until(|st| st.sessions == 2 && st.adds == 3);
            assert_eq!((st.sessions, st.busy, st.adds), (2, 1, 3));
        });
    }
}
