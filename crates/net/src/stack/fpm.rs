//! Routes from a routing daemon: FRR's zebra feeding the FIB through its Forwarding
//! Plane Manager (`dplane_fpm_nl`, netlink route messages over TCP; the framing is
//! [`route::fpm`]'s).
//!
//! [`FpmFeed`] applies what one connection sends to a [`Stack`]: `RTM_NEWROUTE`
//! adds a route or replaces the daemon's route to the same destination (every next
//! hop at once, multipath as ECMP), `RTM_DELROUTE` withdraws it. Next hops are
//! resolved against the stack's own interfaces (the connected network holding the
//! gateway); the daemon's interface indexes are its kernel's, not ours, and are not
//! used. Routes the daemon sends are marked [`route::RtFlags::PROTO2`]: it replaces
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
//! [`serve`] is the TCP side: one connection at a time on a listener of the host's
//! (zebra's `fpm address A port P`); a newer connection replaces the older one.

use crate::stack::Stack;
use route::fpm::{FpmMsg, FpmRoute, FpmStream};
use route::{IpPrefix, NhKind, RouteSpec, RtError, RtFlags};
use std::collections::HashSet;
use std::io::Read;
use std::net::{IpAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
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
    /// Routes with no next hop on a network of ours (not installed).
    pub unresolved: u64,
    /// Routes not installed because a connected or static route holds the
    /// destination.
    pub shadowed: u64,
    /// Routes refused because the table is full (`max_routes`).
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
    pub fn fields(&self) -> [(&'static str, u64); 19] {
        [
            ("sessions", self.sessions),
            ("connected", u64::from(self.connected)),
            ("frames", self.frames),
            ("bytes", self.bytes),
            ("adds", self.adds),
            ("replaced", self.replaced),
            ("deletes", self.deletes),
            ("not_found", self.not_found),
            ("unresolved", self.unresolved),
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

/// Applies one daemon's route messages to a stack (see the module's text).
#[derive(Debug)]
pub struct FpmFeed {
    stream: FpmStream,
    stats: FpmStats,
    /// The daemon's routes from before this session not yet sent again.
    stale: Option<HashSet<IpPrefix>>,
    /// Since when changes in the table wait for a compilation (none wait: `None`).
    dirty_since: Option<Instant>,
    last_cost: Duration,
    last_msg: Instant,
    resync_quiet: Duration,
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
        }
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
                FpmMsg::Delete(r) => todo.push((r.dst, None)),
                FpmMsg::Add(r) => {
                    let specs = resolve(&cfg, &r);
                    if specs.is_empty() {
                        self.stats.unresolved += 1;
                    }
                    todo.push((r.dst, Some(specs)));
                }
            }
        }
        if let Some(stale) = &mut self.stale {
            for (d, _) in &todo {
                stale.remove(d);
            }
        }
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
/// next hop through the interface whose network holds its gateway. Next hops
/// without a gateway (an interface route of the daemon's kernel) or with an IPv6
/// link-local one cannot be placed and are left out.
fn resolve(cfg: &crate::stack::NetConfig, r: &FpmRoute) -> Vec<RouteSpec> {
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
        if let IpAddr::V6(a) = gw {
            if (a.segments()[0] & 0xffc0) == 0xfe80 {
                continue;
            }
        }
        let Some(ifp) = cfg.connected(gw) else {
            continue;
        };
        let mut s = RouteSpec::via(r.dst, gw, u32::from(ifp.index.0));
        s.flags = flags;
        if !out.iter().any(|o| o.gateway == s.gateway) {
            out.push(s);
        }
    }
    out
}

/// Serves the daemon's connections on `listener` until `stop`: one at a time, a
/// newer one replacing the older; `stats` is updated as the feed goes.
pub fn serve(stack: &Stack, listener: &TcpListener, stop: &AtomicBool, stats: &Mutex<FpmStats>) {
    if let Err(e) = listener.set_nonblocking(true) {
        tracing::error!(target: "fpm", "listener: {e}");
        return;
    }
    let mut feed = FpmFeed::new();
    let mut conn: Option<TcpStream> = None;
    let mut buf = vec![0u8; 1 << 16];
    let publish = |f: &FpmFeed| *stats.lock().unwrap_or_else(|e| e.into_inner()) = f.stats();
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((s, peer)) => {
                if conn.take().is_some() {
                    feed.session_end(stack);
                    tracing::info!(target: "fpm", "a newer connection replaces the daemon's");
                }
                if s.set_nonblocking(false).is_ok()
                    && s.set_read_timeout(Some(Duration::from_millis(20))).is_ok()
                {
                    tracing::info!(target: "fpm", "routing daemon connected from {peer}");
                    feed.session_start(stack, Instant::now());
                    conn = Some(s);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => tracing::warn!(target: "fpm", "accept: {e}"),
        }
        let Some(s) = conn.as_mut() else {
            feed.poll(stack, Instant::now());
            publish(&feed);
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        let end = match s.read(&mut buf) {
            Ok(0) => Some("closed the connection".to_string()),
            Ok(n) => match feed.feed(stack, &buf[..n], Instant::now()) {
                Ok(()) => None,
                Err(e) => Some(format!("sent a bad frame ({e})")),
            },
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
            feed.session_end(stack);
        }
        feed.poll(stack, Instant::now());
        publish(&feed);
    }
    feed.commit(stack);
    publish(&feed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{IfConfig, StackConfig};
    use dev::mem::{wire, WireConfig};
    use route::fpm::{encode_route, FpmNexthop};
    use std::net::Ipv4Addr;

    /// A stack with two interfaces, 198.18.1.1/24 and 198.18.2.1/24.
    fn stack() -> (Stack, Vec<dev::mem::MemDevice>) {
        let mut s = Stack::new(StackConfig {
            name: "r".into(),
            workers: 1,
            ..StackConfig::default()
        });
        let mut far = Vec::new();
        for a in ["198.18.1.1/24", "198.18.2.1/24"] {
            let (d, e) = wire(WireConfig::default());
            far.push(e);
            let addrs = vec![a.parse().unwrap()];
            s.add_interface(
                Box::new(d),
                IfConfig {
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
}
