//! ARP (RFC 826) and the per-interface IPv4 neighbour table (FreeBSD's `lltable`).
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
//! want to reach and for hosts that ask us (RFC 826's merge rule), never for every
//! sender on the wire.

use crate::stats::{DropReason, Stats};
use arc_swap::ArcSwap;
use dev::{Duration, Instant};
use mbuf::Mbuf;
use std::collections::{HashMap, VecDeque};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use wire::EthernetAddress;

/// Tunables, FreeBSD's `net.link.ether.inet.*` with RFC 4861 timings.
#[derive(Clone, Copy, Debug)]
pub struct ArpParams {
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

impl Default for ArpParams {
    fn default() -> Self {
        ArpParams {
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

/// One entry as `arp -a` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArpEntry {
    pub ip: Ipv4Addr,
    pub mac: Option<EthernetAddress>,
    pub state: LleState,
    pub held: usize,
}

/// What the data path reads: resolved addresses and until when they need no check.
#[derive(Debug, Default)]
pub struct ArpSnapshot {
    map: HashMap<Ipv4Addr, (EthernetAddress, Instant), crate::FxBuild>,
}

impl ArpSnapshot {
    /// The MAC for `ip` if it is known and still reachable at `now`.
    #[inline]
    pub fn lookup(&self, ip: Ipv4Addr, now: Instant) -> Option<EthernetAddress> {
        match self.map.get(&ip) {
            Some(&(mac, until)) if now < until => Some(mac),
            _ => None,
        }
    }
}

/// A frame the table wants sent: an ARP request, or a held packet now resolved.
#[derive(Debug)]
pub enum ArpOutput {
    /// Send an ARP request for `target` (broadcast when `unicast` is `None`).
    Request {
        target: Ipv4Addr,
        unicast: Option<EthernetAddress>,
    },
    /// Send this IPv4 packet (no link header yet) to `mac`.
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
struct Inner {
    entries: HashMap<Ipv4Addr, Lle>,
}

/// The IPv4 neighbour table of one interface.
#[derive(Debug)]
pub struct ArpTable {
    params: ArpParams,
    inner: Mutex<Inner>,
    snap: Arc<ArcSwap<ArpSnapshot>>,
    /// Earliest timer in the table, in nanoseconds; `u64::MAX` when none.
    next_timer: AtomicU64,
}

impl ArpTable {
    pub fn new(params: ArpParams) -> Self {
        ArpTable {
            params,
            inner: Mutex::new(Inner {
                entries: HashMap::new(),
            }),
            snap: Arc::new(ArcSwap::from_pointee(ArpSnapshot::default())),
            next_timer: AtomicU64::new(u64::MAX),
        }
    }

    pub fn params(&self) -> &ArpParams {
        &self.params
    }

    /// The published snapshot (data path).
    pub fn snapshot(&self) -> &ArcSwap<ArpSnapshot> {
        &self.snap
    }

    /// A handle on the published snapshot, for a worker's `arc_swap::Cache`.
    pub fn snapshot_handle(&self) -> Arc<ArcSwap<ArpSnapshot>> {
        self.snap.clone()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
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

    /// Entries for `arp -a`.
    pub fn entries(&self) -> Vec<ArpEntry> {
        let g = self.lock();
        let mut v: Vec<ArpEntry> = g
            .entries
            .iter()
            .map(|(ip, e)| ArpEntry {
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
    pub fn insert_static(&self, ip: Ipv4Addr, mac: EthernetAddress) {
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
    pub fn remove(&self, ip: Ipv4Addr, stats: &mut Stats) -> bool {
        let mut g = self.lock();
        let found = g.entries.remove(&ip);
        if let Some(e) = &found {
            drop_held(e, stats);
            self.publish(&g);
        }
        found.is_some()
    }

    fn publish(&self, g: &Inner) {
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
        self.snap.store(Arc::new(ArpSnapshot { map }));
        self.next_timer.store(next, Ordering::Relaxed);
    }

    /// Makes room for one entry if the table is full, evicting the least recently used
    /// entry that is not reachable (else the least recently used of all).
    fn make_room(&self, g: &mut Inner, stats: &mut Stats) {
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
                stats.arp.evicted += 1;
                drop_held(&e, stats);
            }
        }
    }

    /// Slow path of `arpresolve`: the snapshot had no fresh entry for `ip`.
    /// Returns what to do with `m`, and pushes any request to send into `out`.
    pub fn resolve_slow(
        &self,
        now: Instant,
        ip: Ipv4Addr,
        m: Mbuf,
        stats: &mut Stats,
        out: &mut Vec<ArpOutput>,
    ) -> Resolve {
        let p = self.params;
        let mut g = self.lock();
        if !g.entries.contains_key(&ip) {
            self.make_room(&mut g, stats);
            stats.arp.entries_created += 1;
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
            out.push(ArpOutput::Request {
                target: ip,
                unicast: None,
            });
            stats.arp.txrequests += 1;
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
                    DropReason::ArpHoldDropped.count(stats);
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
        sender_ip: Ipv4Addr,
        sender_mac: EthernetAddress,
        for_us: bool,
        stats: &mut Stats,
        out: &mut Vec<ArpOutput>,
    ) {
        let p = self.params;
        let mut g = self.lock();
        if !g.entries.contains_key(&sender_ip) {
            if !for_us {
                return;
            }
            self.make_room(&mut g, stats);
            stats.arp.entries_created += 1;
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
            out.push(ArpOutput::Packet { m, mac: sender_mac });
        }
        self.publish(&g);
    }

    /// Runs the state machine's timers due at `now`; requests to send go into `out`.
    pub fn timer(&self, now: Instant, stats: &mut Stats, out: &mut Vec<ArpOutput>) {
        let p = self.params;
        let mut g = self.lock();
        let mut dead: Vec<Ipv4Addr> = Vec::new();
        for (ip, e) in g.entries.iter_mut() {
            if e.timer > now {
                continue;
            }
            match e.state {
                LleState::Incomplete => {
                    if e.asked >= p.max_tries {
                        stats.arp.timeouts += 1;
                        dead.push(*ip);
                    } else {
                        e.asked += 1;
                        e.timer = now + p.retrans;
                        stats.arp.txrequests += 1;
                        out.push(ArpOutput::Request {
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
                    stats.arp.txrequests += 1;
                    out.push(ArpOutput::Request {
                        target: *ip,
                        unicast: e.mac,
                    });
                }
                LleState::Probe => {
                    if e.asked >= p.max_probes {
                        stats.arp.timeouts += 1;
                        dead.push(*ip);
                    } else {
                        e.asked += 1;
                        e.timer = now + p.retrans;
                        stats.arp.txrequests += 1;
                        out.push(ArpOutput::Request {
                            target: *ip,
                            unicast: e.mac,
                        });
                    }
                }
            }
        }
        for ip in dead {
            if let Some(e) = g.entries.remove(&ip) {
                drop_held(&e, stats);
            }
        }
        self.publish(&g);
    }
}

/// Counts the packets an entry still held as dropped (they go with the entry).
fn drop_held(e: &Lle, stats: &mut Stats) {
    DropReason::ArpHoldDropped.count_n(stats, e.hold.len() as u64);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u8) -> Ipv4Addr {
        Ipv4Addr::new(198, 18, 0, n)
    }
    const MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 9]);

    fn pkt() -> Mbuf {
        Mbuf::from_slice(&[0u8; 60]).unwrap()
    }

    #[test]
    fn miss_holds_then_answer_releases() {
        let t = ArpTable::new(ArpParams::default());
        let mut s = Stats::default();
        let mut out = Vec::new();
        let now = Instant::from_secs(1);
        assert!(t.snapshot().load().lookup(ip(2), now).is_none());
        assert!(matches!(
            t.resolve_slow(now, ip(2), pkt(), &mut s, &mut out),
            Resolve::Held
        ));
        assert!(matches!(
            t.resolve_slow(now, ip(2), pkt(), &mut s, &mut out),
            Resolve::Held
        ));
        assert_eq!(out.len(), 1, "one request for two packets");
        out.clear();
        t.input(now, ip(2), MAC, true, &mut s, &mut out);
        assert_eq!(
            out.iter()
                .filter(|o| matches!(o, ArpOutput::Packet { .. }))
                .count(),
            2
        );
        assert_eq!(t.snapshot().load().lookup(ip(2), now), Some(MAC));
        // After the reachable time the data path no longer trusts the snapshot.
        let later = now + Duration::from_secs(31);
        assert_eq!(t.snapshot().load().lookup(ip(2), later), None);
    }

    #[test]
    fn incomplete_gives_up_after_max_tries_and_counts_held() {
        let t = ArpTable::new(ArpParams::default());
        let mut s = Stats::default();
        let mut out = Vec::new();
        let mut now = Instant::from_secs(1);
        let _ = t.resolve_slow(now, ip(3), pkt(), &mut s, &mut out);
        for _ in 0..10 {
            now += Duration::from_secs(1);
            t.timer(now, &mut s, &mut out);
        }
        assert_eq!(s.arp.txrequests, 5);
        assert_eq!(s.arp.timeouts, 1);
        assert_eq!(s.arp.dropped, 1);
        assert!(t.is_empty());
        assert_eq!(t.poll_at(), None);
    }

    #[test]
    fn nud_reachable_stale_delay_probe() {
        let t = ArpTable::new(ArpParams::default());
        let mut s = Stats::default();
        let mut out = Vec::new();
        let mut now = Instant::from_secs(1);
        t.input(now, ip(4), MAC, true, &mut s, &mut out);
        now += Duration::from_secs(31);
        t.timer(now, &mut s, &mut out);
        assert_eq!(t.entries()[0].state, LleState::Stale);
        // Use moves it to DELAY and sends at once.
        assert!(
            matches!(t.resolve_slow(now, ip(4), pkt(), &mut s, &mut out), Resolve::Now(_, m) if m == MAC)
        );
        assert_eq!(t.entries()[0].state, LleState::Delay);
        now += Duration::from_secs(5);
        t.timer(now, &mut s, &mut out);
        assert_eq!(t.entries()[0].state, LleState::Probe);
        assert!(matches!(
            out.last(),
            Some(ArpOutput::Request {
                unicast: Some(_),
                ..
            })
        ));
        // An answer confirms it.
        t.input(now, ip(4), MAC, true, &mut s, &mut out);
        assert_eq!(t.entries()[0].state, LleState::Reachable);
    }

    #[test]
    fn bounded_with_eviction() {
        let p = ArpParams {
            max_entries: 8,
            ..ArpParams::default()
        };
        let t = ArpTable::new(p);
        let mut s = Stats::default();
        let mut out = Vec::new();
        for i in 0..100u8 {
            let _ = t.resolve_slow(Instant::from_secs(i as u64), ip(i), pkt(), &mut s, &mut out);
        }
        assert_eq!(t.len(), 8);
        assert_eq!(s.arp.evicted, 92);
        assert_eq!(s.arp.dropped, 92);
    }

    #[test]
    fn unsolicited_sender_creates_nothing() {
        let t = ArpTable::new(ArpParams::default());
        let mut s = Stats::default();
        let mut out = Vec::new();
        t.input(Instant::ZERO, ip(9), MAC, false, &mut s, &mut out);
        assert!(t.is_empty());
    }
}
