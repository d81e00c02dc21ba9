//! The per-interface neighbour table (FreeBSD's `lltable`), one per address family:
//! ARP's for IPv4 ([`crate::link::arp`]) and neighbour discovery's for IPv6 ([`crate::inet6::nd6`]).
//!
//! The table has two faces. The control face, behind a mutex, holds every entry with
//! its state (incomplete, reachable, stale, delay, probe — the RFC 4861 NUD machine,
//! which FreeBSD's ARP follows too), timers, and a small hold queue of packets awaiting
//! resolution. The data-path face is an immutable snapshot (ip → mac, valid-until)
//! published through RCU (`ArcSwap`): a worker reads it lock-free and only takes the
//! mutex on a miss or when an entry's reachability has run out — the slow path.
//!
//! The table is bounded (`max_entries`); when full, a new entry evicts the least
//! recently used stale or incomplete one. Entries are created only for addresses we
//! want to reach and for hosts that ask us (RFC 826's merge rule, RFC 4861 §7.2.3),
//! never for every sender on the wire.
//!
//! The family ([`LleFamily`]) supplies the address type and the counters; the state
//! machine is the same for both.

use crate::stats::{DropReason, Stats};
use arc_swap::ArcSwap;
use dev::{Duration, Instant};
use mbuf::Mbuf;
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::marker::PhantomData;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use wire::EthernetAddress;

/// What an address family brings to a neighbour table: its address type and the
/// counters the state machine bumps.
pub trait LleFamily: std::fmt::Debug + Send + Sync + 'static {
    type Addr: Copy + Eq + Hash + Ord + std::fmt::Debug + Send + Sync + Into<IpAddr> + 'static;
    /// `a` as this family's address, if it is one.
    fn from_ip(a: IpAddr) -> Option<Self::Addr>;
    fn count_created(s: &mut Stats);
    fn count_evicted(s: &mut Stats);
    fn count_timeout(s: &mut Stats);
    /// A request (ARP request, neighbour solicitation) queued for sending.
    fn count_request(s: &mut Stats);
    /// Packets dropped from a hold queue.
    const HOLD_DROPPED: DropReason;
}

/// IPv6: neighbour discovery's counters.
#[derive(Debug)]
pub struct Inet6;

impl LleFamily for Inet6 {
    type Addr = Ipv6Addr;
    fn from_ip(a: IpAddr) -> Option<Ipv6Addr> {
        match a {
            IpAddr::V6(a) => Some(a),
            IpAddr::V4(_) => None,
        }
    }
    fn count_created(s: &mut Stats) {
        s.nd6.entries_created += 1;
    }
    fn count_evicted(s: &mut Stats) {
        s.nd6.evicted += 1;
    }
    fn count_timeout(s: &mut Stats) {
        s.nd6.timeouts += 1;
    }
    fn count_request(s: &mut Stats) {
        s.nd6.txsolicit += 1;
    }
    const HOLD_DROPPED: DropReason = DropReason::Nd6HoldDropped;
}

/// The IPv6 neighbour table of one interface.
pub type Nd6Table = LlTable<Inet6>;
/// One entry as `ndp -a` shows it.
pub type Nd6Entry = LleEntry<Ipv6Addr>;
/// IPv4: ARP's counters.
#[derive(Debug)]
pub struct Inet;

impl LleFamily for Inet {
    type Addr = Ipv4Addr;
    fn from_ip(a: IpAddr) -> Option<Ipv4Addr> {
        match a {
            IpAddr::V4(a) => Some(a),
            IpAddr::V6(_) => None,
        }
    }
    fn count_created(s: &mut Stats) {
        s.arp.entries_created += 1;
    }
    fn count_evicted(s: &mut Stats) {
        s.arp.evicted += 1;
    }
    fn count_timeout(s: &mut Stats) {
        s.arp.timeouts += 1;
    }
    fn count_request(s: &mut Stats) {
        s.arp.txrequests += 1;
    }
    const HOLD_DROPPED: DropReason = DropReason::ArpHoldDropped;
}

/// Tunables, FreeBSD's `net.link.ether.inet.*` with RFC 4861 timings.
#[derive(Clone, Copy, Debug)]
pub struct LleParams {
    /// Hard bound on entries in one table.
    pub max_entries: usize,
    /// Packets held per incomplete entry (`arp_maxhold`).
    pub max_hold: usize,
    /// Requests sent before an incomplete entry is given up (`arp_maxtries`).
    pub max_tries: u8,
    /// Interval between requests while incomplete or probing.
    pub retrans: Duration,
    /// How long an answer keeps an entry reachable.
    pub reachable: Duration,
    /// Time in DELAY before probing (RFC 4861 DELAY_FIRST_PROBE_TIME).
    pub delay_first_probe: Duration,
    /// Unicast probes before a probing entry is deleted.
    pub max_probes: u8,
    /// A stale entry unused for this long is deleted (`max_age`).
    pub stale_gc: Duration,
}

impl Default for LleParams {
    fn default() -> Self {
        LleParams {
            max_entries: 1024,
            max_hold: 16,
            max_tries: 5,
            retrans: Duration::from_secs(1),
            reachable: Duration::from_secs(30),
            delay_first_probe: Duration::from_secs(5),
            max_probes: 3,
            stale_gc: Duration::from_secs(1200),
        }
    }
}

/// Neighbour state (RFC 4861 §7.3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LleState {
    Incomplete,
    Reachable,
    Stale,
    Delay,
    Probe,
}

impl std::fmt::Display for LleState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LleState::Incomplete => "incomplete",
            LleState::Reachable => "reachable",
            LleState::Stale => "stale",
            LleState::Delay => "delay",
            LleState::Probe => "probe",
        })
    }
}

#[derive(Debug)]
struct Lle {
    state: LleState,
    mac: Option<EthernetAddress>,
    hold: VecDeque<Mbuf>,
    /// Requests/probes sent in the current state.
    asked: u8,
    /// When the current state's timer fires.
    timer: Instant,
    last_used: Instant,
}

/// One entry as `arp -a` / `ndp -a` show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LleEntry<A> {
    pub ip: A,
    pub mac: Option<EthernetAddress>,
    pub state: LleState,
    pub held: usize,
}

/// What the data path reads: resolved addresses and until when they need no check.
#[derive(Debug)]
pub struct LleSnapshot<A> {
    map: HashMap<A, (EthernetAddress, Instant), crate::FxBuild>,
}

impl<A> Default for LleSnapshot<A> {
    fn default() -> Self {
        LleSnapshot {
            map: HashMap::default(),
        }
    }
}

impl<A: Eq + Hash> LleSnapshot<A> {
    /// The MAC for `ip` if it is known and still reachable at `now`.
    #[inline]
    pub fn lookup(&self, ip: A, now: Instant) -> Option<EthernetAddress> {
        match self.map.get(&ip) {
            Some(&(mac, until)) if now < until => Some(mac),
            _ => None,
        }
    }
}

/// A frame the table wants sent: a request (ARP request, neighbour solicitation), or
/// a held packet now resolved.
#[derive(Debug)]
pub enum LleOutput<A> {
    /// Ask for `target` (broadcast or multicast when `unicast` is `None`).
    Request {
        target: A,
        unicast: Option<EthernetAddress>,
    },
    /// Send this packet (no link header yet) to `mac`.
    Packet { m: Mbuf, mac: EthernetAddress },
}

/// The outcome of the slow path of resolution.
#[derive(Debug)]
pub enum Resolve {
    /// Send now to this address.
    Now(Mbuf, EthernetAddress),
    /// Held until the answer comes (or dropped and counted).
    Held,
}

#[derive(Debug)]
struct Inner<A> {
    entries: HashMap<A, Lle>,
}

/// Who hears about the table's changes: the next hops whose gateway is on this
/// interface (their L2 rewrite is written in place at each publication), and the
/// routing-message bus (`RTM_ADD`/`RTM_DELETE`/`RTM_CHANGE` flagged `RTF_LLINFO`).
#[derive(Debug, Default)]
struct Watch {
    ifindex: u32,
    bus: Option<Arc<route::RtBus>>,
    nexthops: Vec<Arc<route::NextHop>>,
}

/// The neighbour table of one interface for one address family.
#[derive(Debug)]
pub struct LlTable<F: LleFamily> {
    params: LleParams,
    watch: Mutex<Watch>,
    inner: Mutex<Inner<F::Addr>>,
    snap: Arc<ArcSwap<LleSnapshot<F::Addr>>>,
    /// Earliest timer in the table, in nanoseconds; `u64::MAX` when none.
    next_timer: AtomicU64,
    family: PhantomData<F>,
}

impl<F: LleFamily> LlTable<F> {
    pub fn new(params: LleParams) -> Self {
        LlTable {
            params,
            watch: Mutex::new(Watch::default()),
            inner: Mutex::new(Inner {
                entries: HashMap::new(),
            }),
            snap: Arc::new(ArcSwap::from_pointee(LleSnapshot::default())),
            next_timer: AtomicU64::new(u64::MAX),
            family: PhantomData,
        }
    }

    pub fn params(&self) -> &LleParams {
        &self.params
    }

    /// The published snapshot (data path).
    pub fn snapshot(&self) -> &ArcSwap<LleSnapshot<F::Addr>> {
        &self.snap
    }

    /// A handle on the published snapshot, for a worker's `arc_swap::Cache`.
    pub fn snapshot_handle(&self) -> Arc<ArcSwap<LleSnapshot<F::Addr>>> {
        self.snap.clone()
    }

    fn lock(&self) -> MutexGuard<'_, Inner<F::Addr>> {
        // A panic while holding the lock cannot leave the table inconsistent in a way
        // that matters more than losing the data path, so recover the guard.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// When `timer` must next be called, if ever.
    pub fn poll_at(&self) -> Option<Instant> {
        match self.next_timer.load(Ordering::Relaxed) {
            u64::MAX => None,
            t => Some(Instant::from_nanos(t)),
        }
    }

    /// Entries for `arp -a` / `ndp -a`.
    pub fn entries(&self) -> Vec<LleEntry<F::Addr>> {
        let g = self.lock();
        let mut v: Vec<LleEntry<F::Addr>> = g
            .entries
            .iter()
            .map(|(ip, e)| LleEntry {
                ip: *ip,
                mac: e.mac,
                state: e.state,
                held: e.hold.len(),
            })
            .collect();
        v.sort_by_key(|e| e.ip);
        v
    }

    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds a permanent-looking entry (`arp -s`): reachable for a very long time.
    pub fn insert_static(&self, ip: F::Addr, mac: EthernetAddress) {
        let mut g = self.lock();
        g.entries.insert(
            ip,
            Lle {
                state: LleState::Reachable,
                mac: Some(mac),
                hold: VecDeque::new(),
                asked: 0,
                timer: Instant::MAX,
                last_used: Instant::ZERO,
            },
        );
        self.publish(&g);
    }

    /// Removes an entry (`arp -d`); held packets are dropped and counted.
    pub fn remove(&self, ip: F::Addr, stats: &mut Stats) -> bool {
        let mut g = self.lock();
        let found = g.entries.remove(&ip);
        if let Some(e) = &found {
            drop_held::<F>(e, stats);
            self.publish(&g);
        }
        found.is_some()
    }

    fn publish(&self, g: &Inner<F::Addr>) {
        let mut map = HashMap::with_capacity_and_hasher(g.entries.len(), crate::FxBuild::default());
        let mut next = u64::MAX;
        for (ip, e) in &g.entries {
            if let (Some(mac), LleState::Reachable) = (e.mac, e.state) {
                map.insert(*ip, (mac, e.timer));
            }
            if e.timer != Instant::MAX {
                next = next.min(e.timer.as_nanos());
            }
        }
        let w = self.watch.lock().unwrap_or_else(|e| e.into_inner());
        for nh in &w.nexthops {
            Self::rewrite(nh, &map);
        }
        let old = self.snap.swap(Arc::new(LleSnapshot { map }));
        self.next_timer.store(next, Ordering::Relaxed);
        if let Some(bus) = w.bus.as_ref().filter(|b| b.has_subscribers()) {
            Self::announce(bus, w.ifindex, &old.map, &self.snap.load().map);
        }
    }

    /// Writes a next hop's L2 rewrite from a snapshot's map.
    fn rewrite(
        nh: &route::NextHop,
        map: &HashMap<F::Addr, (EthernetAddress, Instant), crate::FxBuild>,
    ) {
        match nh.gateway.and_then(F::from_ip).and_then(|g| map.get(&g)) {
            Some((mac, until)) => nh.set_l2(mac.0, until.as_nanos()),
            None => nh.clear_l2(),
        }
    }

    /// Neighbour change messages: what appeared, went or moved between two
    /// publications (only computed when someone listens).
    fn announce(
        bus: &route::RtBus,
        ifindex: u32,
        old: &HashMap<F::Addr, (EthernetAddress, Instant), crate::FxBuild>,
        new: &HashMap<F::Addr, (EthernetAddress, Instant), crate::FxBuild>,
    ) {
        use route::{IpPrefix, RtFlags, RtmType};
        let flags = RtFlags::UP | RtFlags::HOST | RtFlags::LLINFO;
        for (ip, (mac, _)) in new {
            let kind = match old.get(ip) {
                None => RtmType::Add,
                Some((m, _)) if m != mac => RtmType::Change,
                Some(_) => continue,
            };
            let dst = IpPrefix::host((*ip).into());
            bus.send_ll(kind, dst, None, Some(mac.0), ifindex, flags);
        }
        for (ip, (mac, _)) in old {
            if !new.contains_key(ip) {
                let dst = IpPrefix::host((*ip).into());
                bus.send_ll(RtmType::Delete, dst, None, Some(mac.0), ifindex, flags);
            }
        }
    }

    /// Names the interface and bus for change messages (once, when the interface
    /// is made).
    pub fn set_watch(&self, ifindex: u32, bus: Arc<route::RtBus>) {
        let mut w = self.watch.lock().unwrap_or_else(|e| e.into_inner());
        w.ifindex = ifindex;
        w.bus = Some(bus);
    }

    /// The next hops whose gateway is on this interface (after each FIB
    /// publication); their rewrites are written now from the current snapshot.
    pub fn set_nexthops(&self, nexthops: Vec<Arc<route::NextHop>>) {
        let mut w = self.watch.lock().unwrap_or_else(|e| e.into_inner());
        let snap = self.snap.load();
        for nh in &nexthops {
            Self::rewrite(nh, &snap.map);
        }
        w.nexthops = nexthops;
    }

    /// Makes room for one entry if the table is full, evicting the least recently used
    /// entry that is not reachable (else the least recently used of all).
    fn make_room(&self, g: &mut Inner<F::Addr>, stats: &mut Stats) {
        if g.entries.len() < self.params.max_entries {
            return;
        }
        let victim = g
            .entries
            .iter()
            .min_by_key(|(_, e)| (e.state == LleState::Reachable, e.last_used))
            .map(|(ip, _)| *ip);
        if let Some(ip) = victim {
            if let Some(e) = g.entries.remove(&ip) {
                F::count_evicted(stats);
                drop_held::<F>(&e, stats);
            }
        }
    }

    /// Slow path of `arpresolve`: the snapshot had no fresh entry for `ip`.
    /// Returns what to do with `m`, and pushes any request to send into `out`.
    pub fn resolve_slow(
        &self,
        now: Instant,
        ip: F::Addr,
        m: Mbuf,
        stats: &mut Stats,
        out: &mut Vec<LleOutput<F::Addr>>,
    ) -> Resolve {
        let p = self.params;
        let mut g = self.lock();
        if !g.entries.contains_key(&ip) {
            self.make_room(&mut g, stats);
            F::count_created(stats);
            g.entries.insert(
                ip,
                Lle {
                    state: LleState::Incomplete,
                    mac: None,
                    hold: VecDeque::with_capacity(p.max_hold.min(4)),
                    asked: 1,
                    timer: now + p.retrans,
                    last_used: now,
                },
            );
            out.push(LleOutput::Request {
                target: ip,
                unicast: None,
            });
            F::count_request(stats);
        }
        let e = g
            .entries
            .get_mut(&ip)
            .expect("entry exists: inserted above");
        e.last_used = now;
        let result = match e.state {
            LleState::Incomplete => {
                if e.hold.len() >= p.max_hold {
                    // FreeBSD drops the oldest held packet to make room for the newest.
                    e.hold.pop_front();
                    F::HOLD_DROPPED.count(stats);
                }
                e.hold.push_back(m);
                Resolve::Held
            }
            LleState::Reachable if now < e.timer => {
                Resolve::Now(m, e.mac.expect("reachable entries have a MAC"))
            }
            LleState::Reachable | LleState::Stale => {
                // RFC 4861 §7.3.3: sending to a STALE entry moves it to DELAY.
                e.state = LleState::Delay;
                e.timer = now + p.delay_first_probe;
                e.asked = 0;
                Resolve::Now(m, e.mac.expect("resolved entries have a MAC"))
            }
            LleState::Delay | LleState::Probe => {
                Resolve::Now(m, e.mac.expect("resolved entries have a MAC"))
            }
        };
        self.publish(&g);
        result
    }

    /// An ARP packet from `sender_ip`/`sender_mac` arrived. `for_us` says its target
    /// is one of our addresses (RFC 826: only then may a new entry be created).
    /// Released held packets are pushed into `out`.
    pub fn input(
        &self,
        now: Instant,
        sender_ip: F::Addr,
        sender_mac: EthernetAddress,
        for_us: bool,
        stats: &mut Stats,
        out: &mut Vec<LleOutput<F::Addr>>,
    ) {
        let p = self.params;
        let mut g = self.lock();
        if !g.entries.contains_key(&sender_ip) {
            if !for_us {
                return;
            }
            self.make_room(&mut g, stats);
            F::count_created(stats);
            g.entries.insert(
                sender_ip,
                Lle {
                    state: LleState::Stale,
                    mac: None,
                    hold: VecDeque::new(),
                    asked: 0,
                    timer: Instant::MAX,
                    last_used: now,
                },
            );
        }
        let e = g
            .entries
            .get_mut(&sender_ip)
            .expect("entry exists: inserted above");
        if e.timer == Instant::MAX && e.state == LleState::Reachable && e.mac.is_some() {
            // Static entry (arp -s): never overwritten by the wire.
            return;
        }
        let changed = e.mac != Some(sender_mac);
        e.mac = Some(sender_mac);
        e.asked = 0;
        if e.state == LleState::Incomplete || for_us {
            e.state = LleState::Reachable;
            e.timer = now + p.reachable;
        } else if changed {
            // RFC 4861 §7.2.5: a different address from an unsolicited message: STALE.
            e.state = LleState::Stale;
            e.timer = now + p.stale_gc;
        }
        while let Some(m) = e.hold.pop_front() {
            out.push(LleOutput::Packet { m, mac: sender_mac });
        }
        self.publish(&g);
    }

    /// RFC 4861 §7.2.3 (and §6.2.6, §8.3): a solicitation, router solicitation or
    /// redirect from `ip` carried its link-layer address. A new entry is created
    /// STALE; an existing one whose address changes becomes STALE; an incomplete one
    /// gets the address, becomes STALE and releases what it held.
    pub fn nd_learn(
        &self,
        now: Instant,
        ip: F::Addr,
        mac: EthernetAddress,
        stats: &mut Stats,
        out: &mut Vec<LleOutput<F::Addr>>,
    ) {
        let p = self.params;
        let mut g = self.lock();
        if !g.entries.contains_key(&ip) {
            self.make_room(&mut g, stats);
            F::count_created(stats);
            g.entries.insert(
                ip,
                Lle {
                    state: LleState::Stale,
                    mac: Some(mac),
                    hold: VecDeque::new(),
                    asked: 0,
                    timer: now + p.stale_gc,
                    last_used: now,
                },
            );
            self.publish(&g);
            return;
        }
        let e = g.entries.get_mut(&ip).expect("entry exists: checked above");
        if e.timer == Instant::MAX && e.state == LleState::Reachable {
            return; // static
        }
        if e.state == LleState::Incomplete || e.mac != Some(mac) {
            e.mac = Some(mac);
            e.state = LleState::Stale;
            e.asked = 0;
            e.timer = now + p.stale_gc;
            while let Some(m) = e.hold.pop_front() {
                out.push(LleOutput::Packet { m, mac });
            }
        }
        self.publish(&g);
    }

    /// RFC 4861 §7.2.5: a neighbour advertisement for `ip`, with its target
    /// link-layer address if it carried one and its Solicited and Override flags.
    /// Returns false when it was ignored (no entry: "the advertisement SHOULD be
    /// silently discarded").
    #[allow(clippy::too_many_arguments)]
    pub fn nd_advert(
        &self,
        now: Instant,
        ip: F::Addr,
        mac: Option<EthernetAddress>,
        solicited: bool,
        override_: bool,
        stats: &mut Stats,
        out: &mut Vec<LleOutput<F::Addr>>,
    ) -> bool {
        let _ = stats;
        let p = self.params;
        let mut g = self.lock();
        let Some(e) = g.entries.get_mut(&ip) else {
            return false;
        };
        if e.timer == Instant::MAX && e.state == LleState::Reachable {
            return true; // static
        }
        if e.state == LleState::Incomplete {
            // "If no Target Link-Layer Address option is included, the receiving node
            // SHOULD silently discard the received advertisement."
            let Some(mac) = mac else {
                return false;
            };
            e.mac = Some(mac);
            e.asked = 0;
            if solicited {
                e.state = LleState::Reachable;
                e.timer = now + p.reachable;
            } else {
                e.state = LleState::Stale;
                e.timer = now + p.stale_gc;
            }
            while let Some(m) = e.hold.pop_front() {
                out.push(LleOutput::Packet { m, mac });
            }
            self.publish(&g);
            return true;
        }
        let differs = mac.is_some_and(|m| e.mac != Some(m));
        if !override_ && differs {
            // "If the Override flag is clear and the supplied link-layer address
            // differs from that in the cache, then ... if the state of the entry is
            // REACHABLE, set it to STALE ... Otherwise, the received advertisement
            // should be ignored."
            if e.state == LleState::Reachable {
                e.state = LleState::Stale;
                e.timer = now + p.stale_gc;
                self.publish(&g);
            }
            return true;
        }
        if differs {
            e.mac = mac;
        }
        if solicited {
            e.state = LleState::Reachable;
            e.asked = 0;
            e.timer = now + p.reachable;
        } else if differs {
            e.state = LleState::Stale;
            e.timer = now + p.stale_gc;
        }
        self.publish(&g);
        true
    }

    /// Runs the state machine's timers due at `now`; requests to send go into `out`.
    pub fn timer(&self, now: Instant, stats: &mut Stats, out: &mut Vec<LleOutput<F::Addr>>) {
        let p = self.params;
        let mut g = self.lock();
        let mut dead: Vec<F::Addr> = Vec::new();
        for (ip, e) in g.entries.iter_mut() {
            if e.timer > now {
                continue;
            }
            match e.state {
                LleState::Incomplete => {
                    if e.asked >= p.max_tries {
                        F::count_timeout(stats);
                        dead.push(*ip);
                    } else {
                        e.asked += 1;
                        e.timer = now + p.retrans;
                        F::count_request(stats);
                        out.push(LleOutput::Request {
                            target: *ip,
                            unicast: None,
                        });
                    }
                }
                LleState::Reachable => {
                    e.state = LleState::Stale;
                    e.timer = now + p.stale_gc;
                }
                LleState::Stale => dead.push(*ip),
                LleState::Delay => {
                    e.state = LleState::Probe;
                    e.asked = 1;
                    e.timer = now + p.retrans;
                    F::count_request(stats);
                    out.push(LleOutput::Request {
                        target: *ip,
                        unicast: e.mac,
                    });
                }
                LleState::Probe => {
                    if e.asked >= p.max_probes {
                        F::count_timeout(stats);
                        dead.push(*ip);
                    } else {
                        e.asked += 1;
                        e.timer = now + p.retrans;
                        F::count_request(stats);
                        out.push(LleOutput::Request {
                            target: *ip,
                            unicast: e.mac,
                        });
                    }
                }
            }
        }
        for ip in dead {
            if let Some(e) = g.entries.remove(&ip) {
                drop_held::<F>(&e, stats);
            }
        }
        self.publish(&g);
    }
}

/// Counts the packets an entry still held as dropped (they go with the entry).
fn drop_held<F: LleFamily>(e: &Lle, stats: &mut Stats) {
    F::HOLD_DROPPED.count_n(stats, e.hold.len() as u64);
}
