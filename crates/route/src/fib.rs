//! The routing table: [`Rib`], the control plane's table of prefix routes, and
//! [`Fib`], the immutable lookup structure it compiles for the data path.
//!
//! The split follows the PRESTO 2009 paper and FreeBSD 13: the table holds prefix
//! routes only (connected, static, default, blackhole, reject), each pointing at one
//! next hop or at a multipath group of them; neighbour entries live in the
//! interfaces' own tables and reach the data path through the next hops' L2
//! rewrite. Workers never lock: the control plane changes the [`Rib`] (under its
//! owner's lock), compiles a new [`Fib`] (one lookup structure per family, chosen by
//! [`FibAlgo`] like FreeBSD's `fib_algo`), and publishes it; several changes may be
//! batched into one compilation. Next-hop objects outlive compilations, so their
//! indices and L2 rewrites stay valid across them.

use crate::nexthop::{NextHop, NhKey, NhKind, RtFlags};
use crate::rtmsg::{RtBus, RtmType};
use crate::{
    Addr, Bsearch, Dir248, EcmpGroup, IpPrefix, Lookup, Poptrie4, Poptrie6, Prefix4, Prefix6, Radix,
};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

/// A lookup value with this bit names a multipath group, else a next hop.
const GROUP: u32 = 0x4000_0000;

/// The most next hops (and groups) a table holds.
pub const MAX_NEXTHOPS: usize = (GROUP - 1) as usize;

/// Buckets of a multipath group.
pub const GROUP_BUCKETS: usize = EcmpGroup::DEFAULT_BUCKETS;

/// The lookup algorithm of a table (chosen per family, as FreeBSD's `fib_algo`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FibAlgo {
    /// Per family, binary search over ranges while the table is small (at most
    /// [`AUTO_BSEARCH_MAX`] routes), Poptrie beyond: a small table does not pay
    /// Poptrie's 1 MiB direct array, and its search is a few compares where the
    /// radix tree walks a chain of nodes.
    #[default]
    Auto,
    Radix,
    /// Binary search over the table's ranges ([`crate::Bsearch`], FreeBSD's
    /// `bsearch4`), for both families.
    Bsearch,
    Poptrie,
    /// DIR-24-8 for IPv4 (the baseline; 64 MiB and more); IPv6 gets Poptrie.
    Dir248,
}

/// The largest table (of one family) [`FibAlgo::Auto`] searches as ranges
/// ([`FibAlgo::Bsearch`]).
pub const AUTO_BSEARCH_MAX: usize = 64;

impl std::str::FromStr for FibAlgo {
    type Err = String;
    fn from_str(s: &str) -> Result<FibAlgo, String> {
        match s {
            "auto" => Ok(FibAlgo::Auto),
            "radix" => Ok(FibAlgo::Radix),
            "bsearch" => Ok(FibAlgo::Bsearch),
            "poptrie" => Ok(FibAlgo::Poptrie),
            "dir248" | "dir-24-8" => Ok(FibAlgo::Dir248),
            _ => Err(format!(
                "unknown FIB algorithm '{s}' (known: auto, radix, bsearch, poptrie, dir248)"
            )),
        }
    }
}

/// What a route is made of when it is added.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouteSpec {
    pub dst: IpPrefix,
    /// `None`: the destination is on the interface's link (a connected route), or
    /// the route is a blackhole/reject one.
    pub gateway: Option<IpAddr>,
    pub ifindex: u32,
    pub kind: NhKind,
    /// A route MTU below the interface's; 0 for none.
    pub mtu: u32,
    /// Flags kept with the route (`STATIC`, `CONNECTED`, `DYNAMIC`, …); `UP`,
    /// `GATEWAY`, `HOST`, `REJECT` and `BLACKHOLE` follow from the rest.
    pub flags: RtFlags,
}

impl RouteSpec {
    /// A static route to `dst` through `gateway` on interface `ifindex`.
    pub fn via(dst: IpPrefix, gateway: IpAddr, ifindex: u32) -> RouteSpec {
        RouteSpec {
            dst,
            gateway: Some(gateway),
            ifindex,
            kind: NhKind::Forward,
            mtu: 0,
            flags: RtFlags::STATIC,
        }
    }

    /// The connected route of an interface address's network.
    pub fn connected(dst: IpPrefix, ifindex: u32) -> RouteSpec {
        RouteSpec {
            dst,
            gateway: None,
            ifindex,
            kind: NhKind::Forward,
            mtu: 0,
            flags: RtFlags::CONNECTED,
        }
    }

    /// A static blackhole, reject or prohibit route.
    pub fn discard(dst: IpPrefix, kind: NhKind) -> RouteSpec {
        RouteSpec {
            dst,
            gateway: None,
            ifindex: 0,
            kind,
            mtu: 0,
            flags: RtFlags::STATIC,
        }
    }

    fn key(&self) -> NhKey {
        NhKey {
            kind: self.kind,
            ifindex: if self.kind == NhKind::Forward {
                self.ifindex
            } else {
                0
            },
            gateway: self.gateway,
            mtu: self.mtu,
        }
    }
}

/// Why a change was refused (the `errno` of `route(8)`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RtError {
    /// `EEXIST`: the route (or this path of it) is already there.
    Exists(IpPrefix),
    /// `ESRCH`: no such route (or path).
    NotFound(IpPrefix),
    /// `ENOBUFS`: the table is full.
    Full,
    /// `EINVAL`: a gateway of the other family, or a multipath route mixing a
    /// discard route with forwarding paths.
    Invalid(String),
}

impl fmt::Display for RtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RtError::Exists(p) => write!(f, "route {p}: already in table"),
            RtError::NotFound(p) => write!(f, "route {p}: not in table"),
            RtError::Full => write!(f, "routing table full"),
            RtError::Invalid(s) => write!(f, "invalid route: {s}"),
        }
    }
}

impl std::error::Error for RtError {}

#[derive(Clone, Debug)]
struct RouteEnt {
    flags: RtFlags,
    /// Next-hop indices; more than one: multipath.
    paths: Vec<u32>,
    group: Option<EcmpGroup>,
    /// A connected IPv4 route shorter than /31: the next hop of its network and
    /// broadcast addresses (an [`NhKind::Broadcast`] one on its interface), which
    /// the compiled FIB holds as host entries beside it.
    bcast: Option<u32>,
}

/// One path of a route, as `netstat -r` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathInfo {
    pub nexthop: u32,
    pub gateway: Option<IpAddr>,
    pub ifindex: u32,
    pub kind: NhKind,
    pub mtu: u32,
}

/// A route as the control plane reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteInfo {
    pub dst: IpPrefix,
    pub flags: RtFlags,
    pub paths: Vec<PathInfo>,
}

/// The control plane's routing table (both families).
#[derive(Debug)]
pub struct Rib {
    v4: BTreeMap<Prefix4, RouteEnt>,
    v6: BTreeMap<Prefix6, RouteEnt>,
    radix4: Radix<u32>,
    radix6: Radix<u128>,
    nhs: Vec<Option<Arc<NextHop>>>,
    nh_refs: Vec<u32>,
    nh_by_key: HashMap<NhKey, u32>,
    nh_free: Vec<u32>,
    bus: Arc<RtBus>,
    algo: FibAlgo,
    max_routes: usize,
    generation: u64,
}

impl Rib {
    /// An empty table announcing its changes on `bus`, holding at most `max_routes`
    /// routes of both families together.
    pub fn new(bus: Arc<RtBus>, algo: FibAlgo, max_routes: usize) -> Rib {
        Rib {
            v4: BTreeMap::new(),
            v6: BTreeMap::new(),
            radix4: Radix::new(),
            radix6: Radix::new(),
            nhs: Vec::new(),
            nh_refs: Vec::new(),
            nh_by_key: HashMap::new(),
            nh_free: Vec::new(),
            bus,
            algo,
            max_routes,
            generation: 0,
        }
    }

    /// The bus this table announces on.
    pub fn bus(&self) -> &Arc<RtBus> {
        &self.bus
    }

    /// Routes per family: (IPv4, IPv6).
    pub fn counts(&self) -> (usize, usize) {
        (self.v4.len(), self.v6.len())
    }

    /// Routes of both families.
    pub fn len(&self) -> usize {
        self.v4.len() + self.v6.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn set_algo(&mut self, algo: FibAlgo) {
        self.algo = algo;
    }

    fn nh_ref(&mut self, key: NhKey) -> Result<u32, RtError> {
        if let Some(&i) = self.nh_by_key.get(&key) {
            self.nh_refs[i as usize] += 1;
            return Ok(i);
        }
        let i = match self.nh_free.pop() {
            Some(i) => i,
            None => {
                if self.nhs.len() >= MAX_NEXTHOPS {
                    return Err(RtError::Full);
                }
                self.nhs.push(None);
                self.nh_refs.push(0);
                (self.nhs.len() - 1) as u32
            }
        };
        self.nhs[i as usize] = Some(Arc::new(NextHop::new(i, key)));
        self.nh_refs[i as usize] = 1;
        self.nh_by_key.insert(key, i);
        Ok(i)
    }

    fn nh_unref(&mut self, i: u32) {
        let r = &mut self.nh_refs[i as usize];
        *r -= 1;
        if *r == 0 {
            if let Some(nh) = self.nhs[i as usize].take() {
                nh.withdraw();
                self.nh_by_key.remove(&nh.key());
            }
            self.nh_free.push(i);
        }
    }

    fn ent_mut(&mut self, dst: IpPrefix) -> Option<&mut RouteEnt> {
        match dst {
            IpPrefix::V4(p) => self.v4.get_mut(&p),
            IpPrefix::V6(p) => self.v6.get_mut(&p),
        }
    }

    fn flags_of(&self, spec_flags: RtFlags, dst: IpPrefix, paths: &[u32]) -> RtFlags {
        let mut f =
            spec_flags.without(RtFlags::UP | RtFlags::GATEWAY | RtFlags::HOST | RtFlags::REJECT);
        f = f.without(RtFlags::BLACKHOLE | RtFlags::PROHIBIT);
        if dst.is_host() {
            f = f | RtFlags::HOST;
        }
        if let Some(nh) = paths.first().and_then(|&i| self.nhs[i as usize].as_ref()) {
            f = f | nh.flags();
        }
        f
    }

    /// `RTM_ADD`: adds a route, or another path to a route that has forwarding
    /// paths (multipath, ECMP). The same path twice is [`RtError::Exists`].
    pub fn add(&mut self, spec: RouteSpec) -> Result<(), RtError> {
        if let Some(g) = spec.gateway {
            if g.is_ipv6() != spec.dst.is_ipv6() {
                return Err(RtError::Invalid(format!(
                    "gateway {g} is not of the family of {}",
                    spec.dst
                )));
            }
        }
        let key = spec.key();
        if let Some(ent) = self.ent_mut(spec.dst) {
            let paths = ent.paths.clone();
            if paths.iter().any(|&i| self.nh_by_key.get(&key) == Some(&i)) {
                return Err(RtError::Exists(spec.dst));
            }
            let first_kind = self.nhs[paths[0] as usize].as_ref().map(|n| n.kind);
            if spec.kind != NhKind::Forward || first_kind != Some(NhKind::Forward) {
                return Err(RtError::Exists(spec.dst));
            }
            let i = self.nh_ref(key)?;
            let ent = self.ent_mut(spec.dst).expect("present");
            ent.paths.push(i);
            let added = match &mut ent.group {
                Some(g) => g.add_member(i, 1),
                None => EcmpGroup::with_nexthops(GROUP_BUCKETS, &ent.paths).map(|g| {
                    ent.group = Some(g);
                }),
            };
            if let Err(e) = added {
                // More paths than buckets: refuse the path, keep the route as it was.
                ent.paths.pop();
                self.nh_unref(i);
                return Err(RtError::Invalid(e.to_string()));
            }
            let flags = ent.flags;
            self.generation += 1;
            self.bus
                .send(RtmType::Add, spec.dst, spec.gateway, spec.ifindex, flags);
            return Ok(());
        }
        if self.len() >= self.max_routes {
            return Err(RtError::Full);
        }
        let i = self.nh_ref(key)?;
        let bcast = match spec.dst {
            IpPrefix::V4(p)
                if p.len <= 30
                    && spec.kind == NhKind::Forward
                    && spec.gateway.is_none()
                    && spec.flags.contains(RtFlags::CONNECTED) =>
            {
                let key = NhKey {
                    kind: NhKind::Broadcast,
                    ifindex: spec.ifindex,
                    gateway: None,
                    mtu: 0,
                };
                match self.nh_ref(key) {
                    Ok(b) => Some(b),
                    Err(e) => {
                        self.nh_unref(i);
                        return Err(e);
                    }
                }
            }
            _ => None,
        };
        let flags = self.flags_of(spec.flags, spec.dst, &[i]);
        let ent = RouteEnt {
            flags,
            paths: vec![i],
            group: None,
            bcast,
        };
        match spec.dst {
            IpPrefix::V4(p) => {
                self.v4.insert(p, ent);
                self.radix4.insert(p, 0);
            }
            IpPrefix::V6(p) => {
                self.v6.insert(p, ent);
                self.radix6.insert(p, 0);
            }
        }
        self.generation += 1;
        self.bus
            .send(RtmType::Add, spec.dst, spec.gateway, spec.ifindex, flags);
        Ok(())
    }

    /// `RTM_DELETE`: removes a route, or with `gateway`, only that path of it.
    pub fn delete(&mut self, dst: IpPrefix, gateway: Option<IpAddr>) -> Result<(), RtError> {
        let nhs = &self.nhs;
        let ent = match dst {
            IpPrefix::V4(p) => self.v4.get_mut(&p),
            IpPrefix::V6(p) => self.v6.get_mut(&p),
        }
        .ok_or(RtError::NotFound(dst))?;
        let flags = ent.flags;
        let gone: Vec<u32> = match gateway {
            None => std::mem::take(&mut ent.paths),
            Some(g) => {
                let pos = ent
                    .paths
                    .iter()
                    .position(|&i| nhs[i as usize].as_ref().and_then(|n| n.gateway) == Some(g))
                    .ok_or(RtError::NotFound(dst))?;
                let i = ent.paths.remove(pos);
                if let Some(grp) = &mut ent.group {
                    grp.remove_member(i);
                }
                if ent.paths.len() == 1 {
                    ent.group = None;
                }
                vec![i]
            }
        };
        let empty = ent.paths.is_empty();
        let bcast = if empty { ent.bcast.take() } else { None };
        if let Some(b) = bcast {
            self.nh_unref(b);
        }
        for &i in &gone {
            let (gw, ifi) = self.nhs[i as usize]
                .as_ref()
                .map_or((None, 0), |n| (n.gateway, n.ifindex));
            self.bus.send(RtmType::Delete, dst, gw, ifi, flags);
            self.nh_unref(i);
        }
        if empty {
            match dst {
                IpPrefix::V4(p) => {
                    self.v4.remove(&p);
                    self.radix4.delete(p);
                }
                IpPrefix::V6(p) => {
                    self.v6.remove(&p);
                    self.radix6.delete(p);
                }
            }
        }
        self.generation += 1;
        Ok(())
    }

    /// `RTM_CHANGE`: replaces a route's paths by one new path.
    pub fn change(&mut self, spec: RouteSpec) -> Result<(), RtError> {
        let old = self
            .ent_mut(spec.dst)
            .map(|e| std::mem::take(&mut e.paths))
            .ok_or(RtError::NotFound(spec.dst))?;
        let i = match self.nh_ref(spec.key()) {
            Ok(i) => i,
            Err(e) => {
                self.ent_mut(spec.dst).expect("present").paths = old;
                return Err(e);
            }
        };
        for o in old {
            self.nh_unref(o);
        }
        let flags = self.flags_of(spec.flags, spec.dst, &[i]);
        let ent = self.ent_mut(spec.dst).expect("present");
        ent.paths = vec![i];
        ent.group = None;
        ent.flags = flags;
        self.generation += 1;
        self.bus
            .send(RtmType::Change, spec.dst, spec.gateway, spec.ifindex, flags);
        Ok(())
    }

    fn info(&self, dst: IpPrefix, e: &RouteEnt) -> RouteInfo {
        RouteInfo {
            dst,
            flags: e.flags,
            paths: e
                .paths
                .iter()
                .filter_map(|&i| self.nhs[i as usize].as_ref())
                .map(|n| PathInfo {
                    nexthop: n.index,
                    gateway: n.gateway,
                    ifindex: n.ifindex,
                    kind: n.kind,
                    mtu: n.mtu,
                })
                .collect(),
        }
    }

    /// The route for exactly `dst`.
    pub fn route(&self, dst: IpPrefix) -> Option<RouteInfo> {
        match dst {
            IpPrefix::V4(p) => self.v4.get(&p).map(|e| self.info(dst, e)),
            IpPrefix::V6(p) => self.v6.get(&p).map(|e| self.info(dst, e)),
        }
    }

    /// `RTM_GET`: the longest-matching route for `addr` (announced on the bus).
    pub fn get(&self, addr: IpAddr) -> Option<RouteInfo> {
        let dst = match addr {
            IpAddr::V4(a) => IpPrefix::V4(self.radix4.lookup_prefix(u32::from(a))?.0),
            IpAddr::V6(a) => IpPrefix::V6(self.radix6.lookup_prefix(u128::from(a))?.0),
        };
        let info = self.route(dst)?;
        let first = info.paths.first();
        self.bus.send(
            RtmType::Get,
            dst,
            first.and_then(|p| p.gateway),
            first.map_or(0, |p| p.ifindex),
            info.flags,
        );
        Some(info)
    }

    /// The flags of the route for exactly `dst`, if there is one.
    pub fn flags(&self, dst: IpPrefix) -> Option<RtFlags> {
        match dst {
            IpPrefix::V4(p) => self.v4.get(&p).map(|e| e.flags),
            IpPrefix::V6(p) => self.v6.get(&p).map(|e| e.flags),
        }
    }

    /// The destinations of the routes that have every flag of `flags`.
    pub fn destinations_with(&self, flags: RtFlags) -> Vec<IpPrefix> {
        let v4 = self
            .v4
            .iter()
            .filter(|(_, e)| e.flags.contains(flags))
            .map(|(p, _)| IpPrefix::V4(*p));
        let v6 = self
            .v6
            .iter()
            .filter(|(_, e)| e.flags.contains(flags))
            .map(|(p, _)| IpPrefix::V6(*p));
        v4.chain(v6).collect()
    }

    /// Every route, IPv4 first, each family in prefix order.
    pub fn routes(&self) -> Vec<RouteInfo> {
        let v4 = self.v4.iter().map(|(p, e)| self.info(IpPrefix::V4(*p), e));
        let v6 = self.v6.iter().map(|(p, e)| self.info(IpPrefix::V6(*p), e));
        v4.chain(v6).collect()
    }

    /// Removes every route leaving by interface `ifindex` with `flags` (e.g. the
    /// connected routes of an address being removed).
    pub fn delete_matching(&mut self, f: impl Fn(&RouteInfo) -> bool) -> usize {
        let doomed: Vec<IpPrefix> = self
            .routes()
            .into_iter()
            .filter(|r| f(r))
            .map(|r| r.dst)
            .collect();
        for d in &doomed {
            let _ = self.delete(*d, None);
        }
        doomed.len()
    }

    /// Bumped by every change.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The host entries the FIB holds beside the connected IPv4 routes: each
    /// subnet's network and broadcast address to its interface's
    /// [`NhKind::Broadcast`] next hop (a /31 or /32 has neither, RFC 3021), as VPP
    /// installs them with an interface address, so that forwarding's lookup tells a
    /// directed broadcast from a host. A route of anyone's to exactly such an
    /// address is left to win; two subnets sharing an address give it once.
    fn subnet_broadcasts(&self) -> Vec<(Prefix4, u32)> {
        let mut out: Vec<(Prefix4, u32)> = Vec::new();
        for (p, e) in &self.v4 {
            let Some(b) = e.bcast else { continue };
            for a in [p.addr, p.addr.last(p.len)] {
                let host = Prefix4::new(a, 32);
                if !self.v4.contains_key(&host) && !out.iter().any(|(q, _)| *q == host) {
                    out.push((host, b));
                }
            }
        }
        out
    }

    /// Compiles the table into a [`Fib`] for the data path.
    pub fn compile(&self) -> Fib {
        let mut groups = Vec::new();
        let mut value = |e: &RouteEnt| -> u32 {
            match &e.group {
                Some(g) if e.paths.len() > 1 => {
                    groups.push(Arc::new(g.clone()));
                    GROUP | (groups.len() - 1) as u32
                }
                _ => e.paths[0],
            }
        };
        let mut r4: Vec<(Prefix4, u32)> = self.v4.iter().map(|(p, e)| (*p, value(e))).collect();
        r4.extend(self.subnet_broadcasts());
        let r6: Vec<(Prefix6, u32)> = self.v6.iter().map(|(p, e)| (*p, value(e))).collect();
        let pick = |n: usize| match self.algo {
            FibAlgo::Auto if n <= AUTO_BSEARCH_MAX => FibAlgo::Bsearch,
            FibAlgo::Auto => FibAlgo::Poptrie,
            a => a,
        };
        let v4 = match pick(r4.len()) {
            FibAlgo::Poptrie => Fib4::Poptrie(Poptrie4::build(&r4)),
            FibAlgo::Dir248 => Fib4::Dir248(Dir248::build(&r4)),
            FibAlgo::Bsearch => Fib4::Bsearch(Bsearch::build(&r4)),
            _ => Fib4::Radix(Radix::build(&r4)),
        };
        let v6 = match pick(r6.len()) {
            FibAlgo::Radix => Fib6::Radix(Radix::build(&r6)),
            FibAlgo::Bsearch => Fib6::Bsearch(Bsearch::build(&r6)),
            _ => Fib6::Poptrie(Poptrie6::build(&r6)),
        };
        Fib {
            generation: self.generation,
            v4,
            v6,
            nexthops: self.nhs.clone(),
            groups,
        }
    }
}

#[derive(Debug)]
enum Fib4 {
    Radix(Radix<u32>),
    Bsearch(Bsearch<u32>),
    Poptrie(Poptrie4),
    Dir248(Dir248),
}

#[derive(Debug)]
enum Fib6 {
    Radix(Radix<u128>),
    Bsearch(Bsearch<u128>),
    Poptrie(Poptrie6),
}

/// The data path's routing table: immutable, shared by every worker.
#[derive(Debug)]
pub struct Fib {
    generation: u64,
    v4: Fib4,
    v6: Fib6,
    nexthops: Vec<Option<Arc<NextHop>>>,
    groups: Vec<Arc<EcmpGroup>>,
}

impl Default for Fib {
    fn default() -> Fib {
        Fib {
            generation: 0,
            v4: Fib4::Radix(Radix::new()),
            v6: Fib6::Radix(Radix::new()),
            nexthops: Vec::new(),
            groups: Vec::new(),
        }
    }
}

impl Fib {
    /// The [`Rib::generation`] it was compiled from.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The next hop a route's raw value (from [`Fib::lookup4_raw`] or
    /// [`Fib::lookup6_raw`]) names; `hash` (the flow's, called only for a multipath
    /// route) picks a member of a group.
    #[inline]
    pub fn resolve(&self, v: u32, hash: impl FnOnce() -> u32) -> Option<&Arc<NextHop>> {
        let i = if v & GROUP != 0 {
            self.groups.get((v & !GROUP) as usize)?.select(hash())?
        } else {
            v
        };
        self.nexthops.get(i as usize)?.as_ref()
    }

    /// The index of the next hop a raw route value stands for (what
    /// [`Fib::nexthop`] takes), the member of a group picked by `hash`; without
    /// reading the next hop itself, which the caller reads once, later. `None` for
    /// an empty group; an index [`Fib::nexthop`] does not know is possible only for a
    /// value that did not come from this FIB.
    #[inline(always)]
    pub fn resolve_index(&self, v: u32, hash: impl FnOnce() -> u32) -> Option<u32> {
        if v & GROUP != 0 {
            self.groups.get((v & !GROUP) as usize)?.select(hash())
        } else {
            Some(v)
        }
    }

    /// The next hop for `dst`; `hash` (the flow's, called only for a multipath
    /// route) picks a member of a group.
    #[inline]
    pub fn lookup4(&self, dst: Ipv4Addr, hash: impl FnOnce() -> u32) -> Option<&Arc<NextHop>> {
        let a = u32::from(dst);
        let v = match &self.v4 {
            Fib4::Poptrie(p) => p.lookup(a),
            Fib4::Radix(r) => r.lookup(a),
            Fib4::Bsearch(b) => b.lookup(a),
            Fib4::Dir248(d) => d.lookup(a),
        }?;
        self.resolve(v, hash)
    }

    /// The raw route values of `dsts` (IPv4, host order) into `out`, of the same
    /// length: looked up together so that their cache misses overlap (VPP's
    /// `ip4-lookup` over a vector). [`Fib::resolve`] makes each a next hop.
    #[inline]
    pub fn lookup4_raw(&self, dsts: &[u32], out: &mut [Option<u32>]) {
        match &self.v4 {
            Fib4::Poptrie(p) => p.lookup_batch(dsts, out),
            Fib4::Radix(r) => r.lookup_batch(dsts, out),
            Fib4::Bsearch(b) => b.lookup_batch(dsts, out),
            Fib4::Dir248(d) => d.lookup_batch(dsts, out),
        }
    }

    /// [`Fib::lookup4_raw`] for IPv6.
    #[inline]
    pub fn lookup6_raw(&self, dsts: &[u128], out: &mut [Option<u32>]) {
        match &self.v6 {
            Fib6::Poptrie(p) => p.lookup_batch(dsts, out),
            Fib6::Radix(r) => r.lookup_batch(dsts, out),
            Fib6::Bsearch(b) => b.lookup_batch(dsts, out),
        }
    }

    /// The next hop for `dst` (IPv6).
    #[inline]
    pub fn lookup6(&self, dst: Ipv6Addr, hash: impl FnOnce() -> u32) -> Option<&Arc<NextHop>> {
        let a = u128::from(dst);
        let v = match &self.v6 {
            Fib6::Poptrie(p) => p.lookup(a),
            Fib6::Radix(r) => r.lookup(a),
            Fib6::Bsearch(b) => b.lookup(a),
        }?;
        self.resolve(v, hash)
    }

    /// The reverse-path check (uRPF, ipfw's `verrevpath`): whether the route to
    /// `src` leaves by interface `ifindex`, on any path of a multipath route as
    /// FreeBSD's `fib4_check_urpf` allows; false with no route, or a discard route.
    pub fn reverse_path(&self, src: IpAddr, ifindex: u32) -> bool {
        let v = match src {
            IpAddr::V4(a) => match &self.v4 {
                Fib4::Poptrie(p) => p.lookup(u32::from(a)),
                Fib4::Radix(r) => r.lookup(u32::from(a)),
                Fib4::Bsearch(b) => b.lookup(u32::from(a)),
                Fib4::Dir248(d) => d.lookup(u32::from(a)),
            },
            IpAddr::V6(a) => match &self.v6 {
                Fib6::Poptrie(p) => p.lookup(u128::from(a)),
                Fib6::Radix(r) => r.lookup(u128::from(a)),
                Fib6::Bsearch(b) => b.lookup(u128::from(a)),
            },
        };
        let via = |i: u32| {
            self.nexthops
                .get(i as usize)
                .and_then(|n| n.as_ref())
                .is_some_and(|n| n.kind == NhKind::Forward && n.ifindex == ifindex)
        };
        match v {
            None => false,
            Some(v) if v & GROUP != 0 => self
                .groups
                .get((v & !GROUP) as usize)
                .is_some_and(|g| g.members().iter().any(|m| via(m.nexthop))),
            Some(v) => via(v),
        }
    }

    /// A next hop by index (a flow table's cached one).
    #[inline]
    pub fn nexthop(&self, index: u32) -> Option<&Arc<NextHop>> {
        self.nexthops.get(index as usize)?.as_ref()
    }

    /// Every live next hop.
    pub fn nexthops(&self) -> impl Iterator<Item = &Arc<NextHop>> {
        self.nexthops.iter().flatten()
    }

    /// The IPv4 algorithm in use (`netstat -r`'s header, the benches).
    pub fn algo4(&self) -> &'static str {
        match self.v4 {
            Fib4::Radix(_) => "radix",
            Fib4::Bsearch(_) => "bsearch",
            Fib4::Poptrie(_) => "poptrie",
            Fib4::Dir248(_) => "dir248",
        }
    }

    /// The IPv6 algorithm in use.
    pub fn algo6(&self) -> &'static str {
        match self.v6 {
            Fib6::Radix(_) => "radix",
            Fib6::Bsearch(_) => "bsearch",
            Fib6::Poptrie(_) => "poptrie",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rtmsg::RtMsg;

    fn p(s: &str) -> IpPrefix {
        s.parse().unwrap()
    }
    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }
    fn rib() -> Rib {
        Rib::new(Arc::new(RtBus::new()), FibAlgo::Auto, 1000)
    }

    #[test]
    fn longest_match_and_flags() {
        let mut r = rib();
        r.add(RouteSpec::connected(p("198.18.0.0/24"), 1)).unwrap();
        r.add(RouteSpec::via(p("0.0.0.0/0"), ip("198.18.0.1"), 1))
            .unwrap();
        r.add(RouteSpec::via(p("198.19.7.7/32"), ip("198.18.0.2"), 1))
            .unwrap();
        r.add(RouteSpec::discard(p("198.19.9.0/24"), NhKind::Blackhole))
            .unwrap();
        r.add(RouteSpec::discard(p("198.19.10.0/24"), NhKind::Reject))
            .unwrap();
        let f = r.compile();
        let nh = |a: &str| {
            f.lookup4(a.parse().unwrap(), || 0)
                .map(|n| (n.kind, n.gateway))
        };
        assert_eq!(nh("198.18.0.9"), Some((NhKind::Forward, None)));
        assert_eq!(
            nh("198.19.7.7"),
            Some((NhKind::Forward, Some(ip("198.18.0.2"))))
        );
        assert_eq!(
            nh("198.19.7.8"),
            Some((NhKind::Forward, Some(ip("198.18.0.1"))))
        );
        assert_eq!(nh("198.19.9.1").unwrap().0, NhKind::Blackhole);
        assert_eq!(nh("198.19.10.1").unwrap().0, NhKind::Reject);
        let flags = |d: &str| r.route(p(d)).unwrap().flags.to_string();
        assert_eq!(flags("198.18.0.0/24"), "UC");
        assert_eq!(flags("0.0.0.0/0"), "UGS");
        assert_eq!(flags("198.19.7.7/32"), "UGHS");
        assert_eq!(flags("198.19.9.0/24"), "USB");
        assert_eq!(flags("198.19.10.0/24"), "URS");
        assert_eq!(r.get(ip("198.19.7.1")).unwrap().dst, p("0.0.0.0/0"));
    }

    #[test]
    fn next_hops_are_shared_and_withdrawn_with_their_last_route() {
        let mut r = rib();
        let gw = ip("2001:2::1");
        r.add(RouteSpec::via(p("2001:2:1::/48"), gw, 1)).unwrap();
        r.add(RouteSpec::via(p("2001:2:2::/48"), gw, 1)).unwrap();
        let f = r.compile();
        let a = f
            .lookup6("2001:2:1::5".parse().unwrap(), || 0)
            .unwrap()
            .clone();
        let b = f
            .lookup6("2001:2:2::5".parse().unwrap(), || 0)
            .unwrap()
            .clone();
        assert!(Arc::ptr_eq(&a, &b));
        let g = a.generation();
        r.delete(p("2001:2:1::/48"), None).unwrap();
        assert!(a.is_valid(g));
        r.delete(p("2001:2:2::/48"), None).unwrap();
        assert!(!a.is_valid(g), "a cached entry sees the withdrawal");
        assert!(r
            .compile()
            .lookup6("2001:2:2::5".parse().unwrap(), || 0)
            .is_none());
        assert_eq!(
            r.delete(p("2001:2:2::/48"), None),
            Err(RtError::NotFound(p("2001:2:2::/48")))
        );
    }

    #[test]
    fn a_connected_subnets_network_and_broadcast_are_fib_entries() {
        let mut r = rib();
        r.add(RouteSpec::connected(p("198.18.1.0/24"), 2)).unwrap();
        r.add(RouteSpec::connected(p("198.18.4.0/31"), 3)).unwrap();
        r.add(RouteSpec::via(p("198.19.0.0/16"), ip("198.18.1.1"), 2))
            .unwrap();
        // A static route to a host that happens to be a subnet's broadcast wins.
        r.add(RouteSpec::via(p("198.19.0.255/32"), ip("198.18.1.1"), 2))
            .unwrap();
        let f = r.compile();
        let kind = |a: &str| {
            f.lookup4(a.parse().unwrap(), || 0)
                .map(|n| (n.kind, n.ifindex))
        };
        assert_eq!(kind("198.18.1.0"), Some((NhKind::Broadcast, 2)));
        assert_eq!(kind("198.18.1.255"), Some((NhKind::Broadcast, 2)));
        assert_eq!(kind("198.18.1.7"), Some((NhKind::Forward, 2)));
        assert_eq!(kind("198.18.1.254"), Some((NhKind::Forward, 2)));
        // RFC 3021: a /31 has neither.
        assert_eq!(kind("198.18.4.0"), Some((NhKind::Forward, 3)));
        assert_eq!(kind("198.18.4.1"), Some((NhKind::Forward, 3)));
        // Only connected routes; not shown as routes.
        assert_eq!(kind("198.19.0.0"), Some((NhKind::Forward, 2)));
        assert_eq!(kind("198.19.0.255"), Some((NhKind::Forward, 2)));
        assert_eq!(r.counts(), (4, 0));
        assert!(r.route(p("198.18.1.255/32")).is_none());
        // They go with the route, and so does their next hop.
        r.delete(p("198.18.1.0/24"), None).unwrap();
        let f = r.compile();
        assert!(f.nexthops().all(|n| n.kind != NhKind::Broadcast));
        assert_eq!(
            f.lookup4("198.18.1.255".parse().unwrap(), || 0)
                .map(|n| n.kind),
            None
        );
    }

    #[test]
    fn reverse_path_takes_any_path_and_refuses_no_route_and_discards() {
        let mut r = rib();
        r.add(RouteSpec::connected(p("198.18.0.0/24"), 1)).unwrap();
        r.add(RouteSpec::connected(p("198.18.1.0/24"), 2)).unwrap();
        r.add(RouteSpec::connected(p("2001:2::/64"), 2)).unwrap();
        let d = p("198.19.0.0/16");
        r.add(RouteSpec::via(d, ip("198.18.0.1"), 1)).unwrap();
        r.add(RouteSpec::via(d, ip("198.18.1.1"), 2)).unwrap();
        r.add(RouteSpec::discard(p("198.19.9.0/24"), NhKind::Blackhole))
            .unwrap();
        let f = r.compile();
        let rp = |a: &str, i: u32| f.reverse_path(ip(a), i);
        assert!(rp("198.18.0.7", 1) && !rp("198.18.0.7", 2));
        assert!(rp("198.18.1.7", 2) && !rp("198.18.1.7", 1));
        // Multipath: either path's interface.
        assert!(rp("198.19.1.1", 1) && rp("198.19.1.1", 2) && !rp("198.19.1.1", 3));
        assert!(!rp("198.19.9.1", 1), "a blackhole route is no way back");
        assert!(!rp("198.18.5.1", 1), "no route");
        assert!(rp("2001:2::9", 2) && !rp("2001:2::9", 1));
        assert!(!rp("2001:2:0:1::9", 2));
    }

    #[test]
    fn multipath_adds_paths_and_moves_only_the_new_members_buckets() {
        let mut r = rib();
        let d = p("198.19.0.0/16");
        r.add(RouteSpec::via(d, ip("198.18.0.1"), 1)).unwrap();
        r.add(RouteSpec::via(d, ip("198.18.0.2"), 1)).unwrap();
        assert_eq!(
            r.add(RouteSpec::via(d, ip("198.18.0.2"), 1)),
            Err(RtError::Exists(d))
        );
        // A group picks its bucket from the hash's top bits.
        let bucket = |b: u32| b << (32 - GROUP_BUCKETS.trailing_zeros());
        let before: Vec<u32> = (0..GROUP_BUCKETS as u32)
            .map(|h| {
                r.compile()
                    .lookup4("198.19.1.1".parse().unwrap(), || bucket(h))
                    .unwrap()
                    .index
            })
            .collect();
        r.add(RouteSpec::via(d, ip("198.18.0.3"), 1)).unwrap();
        let f = r.compile();
        let after: Vec<u32> = (0..GROUP_BUCKETS as u32)
            .map(|h| {
                f.lookup4("198.19.1.1".parse().unwrap(), || bucket(h))
                    .unwrap()
                    .index
            })
            .collect();
        let new = f
            .lookup4("198.19.1.1".parse().unwrap(), || 0)
            .map(|_| ())
            .is_some();
        assert!(new);
        let third = r.route(d).unwrap().paths[2].nexthop;
        let mut moved = 0;
        for (b, a) in before.iter().zip(&after) {
            if b != a {
                assert_eq!(*a, third, "a bucket moved between two old members");
                moved += 1;
            }
        }
        assert!((160..=180).contains(&moved), "moved {moved} of 512");
        // Removing a member moves only its buckets.
        r.delete(d, Some(ip("198.18.0.1"))).unwrap();
        let first = before[0];
        let f = r.compile();
        for (h, a) in after.iter().enumerate() {
            let now = f
                .lookup4("198.19.1.1".parse().unwrap(), || bucket(h as u32))
                .unwrap()
                .index;
            if *a != first {
                assert_eq!(now, *a);
            } else {
                assert_ne!(now, first);
            }
        }
        assert_eq!(r.route(d).unwrap().paths.len(), 2);
    }

    #[test]
    fn messages_announce_each_change() {
        let mut r = rib();
        let s = r.bus().subscribe(64);
        let d = p("198.19.0.0/16");
        r.add(RouteSpec::via(d, ip("198.18.0.1"), 1)).unwrap();
        r.change(RouteSpec::via(d, ip("198.18.0.2"), 1)).unwrap();
        r.get(ip("198.19.3.3")).unwrap();
        r.delete(d, None).unwrap();
        let got: Vec<(RtmType, Option<IpAddr>)> = s
            .drain()
            .into_iter()
            .map(|m: RtMsg| (m.kind, m.gateway))
            .collect();
        assert_eq!(
            got,
            vec![
                (RtmType::Add, Some(ip("198.18.0.1"))),
                (RtmType::Change, Some(ip("198.18.0.2"))),
                (RtmType::Get, Some(ip("198.18.0.2"))),
                (RtmType::Delete, Some(ip("198.18.0.2"))),
            ]
        );
    }

    #[test]
    fn table_is_bounded_and_families_checked() {
        let mut r = Rib::new(Arc::new(RtBus::new()), FibAlgo::Auto, 2);
        r.add(RouteSpec::connected(p("198.18.0.0/24"), 1)).unwrap();
        r.add(RouteSpec::connected(p("2001:2::/64"), 1)).unwrap();
        assert_eq!(
            r.add(RouteSpec::connected(p("198.18.1.0/24"), 1)),
            Err(RtError::Full)
        );
        assert!(matches!(
            r.add(RouteSpec::via(p("198.19.0.0/16"), ip("2001:2::1"), 1)),
            Err(RtError::Invalid(_))
        ));
    }

    #[test]
    fn every_algorithm_agrees() {
        let mut r = rib();
        for i in 0..200u32 {
            let a = Ipv4Addr::from(0xc612_0000 | (i << 8));
            r.add(RouteSpec::via(
                IpPrefix::new(a.into(), 24),
                ip("198.18.0.1"),
                1 + i % 3,
            ))
            .unwrap();
        }
        let mut fibs = Vec::new();
        for algo in [
            FibAlgo::Radix,
            FibAlgo::Poptrie,
            FibAlgo::Dir248,
            FibAlgo::Auto,
        ] {
            r.set_algo(algo);
            fibs.push(r.compile());
        }
        assert_eq!(fibs[3].algo4(), "poptrie");
        for k in (0..0x00ff_ffffu32).step_by(97) {
            let a = Ipv4Addr::from(0xc600_0000 | k);
            let want = fibs[0].lookup4(a, || 0).map(|n| n.index);
            for f in &fibs[1..] {
                assert_eq!(f.lookup4(a, || 0).map(|n| n.index), want, "{a}");
            }
        }
    }
}
