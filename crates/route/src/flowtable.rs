//! The per-worker flow table (Macy and Li's flowtable, PRESTO 2009, §4): a bounded
//! cache from a flow to what the forwarding path decided for it, for stateful ECMP (a
//! load balancer must not move an established connection when its next hops change)
//! and to skip the route lookup for recently seen flows.
//!
//! Unlike the paper's flentry, which held references (and so refcounts) on the rtentry
//! and the LLE, an entry here holds a plain `Copy` value, typically a next-hop index and
//! that next hop's generation number; the caller's `valid` check at lookup compares the
//! generation with the next hop's current one, so a changed or deleted next hop makes
//! its entries misses without any reference count (the paper's "future work", §6).
//!
//! Layout: `capacity` entries in sets of [`WAYS`], chosen by the seeded flow hash; a
//! set's tags sit together in half a cache line, so a lookup reads one tag line and,
//! on a tag match, one entry. Eight ways rather than four: with four, a set that draws
//! five busy flows (about 0.4% of the sets at a quarter load) thrashes under LRU, which
//! the forwarding bench showed as a steady 0.6% of misses. When a set is full, an idle entry or else the least
//! recently used one is replaced. All memory is allocated at construction: lookups,
//! inserts and sweeps never allocate.
//!
//! Time is a plain `u64` of nanoseconds from any origin (the caller's clock, real or
//! virtual); it must not go backwards for one table.
//!
//! What it owns: its entries and counters. What it may call: `std` and the flow hash.

use crate::{flow_hash4, flow_hash6};
use std::fmt;
use std::time::Duration;

/// Entries in a set.
pub const WAYS: usize = 8;

/// A tag for an empty way. Tags of entries have bit 0 set, so they are never 0.
const FREE: u32 = 0;

/// What part of a packet's flow identifies an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlowMode {
    /// The destination address only (the paper's mode for plain forwarding: one
    /// entry per destination, whatever the flows to it).
    Destination,
    /// Source and destination address and port, and the protocol (the paper's
    /// "4-tuple" mode, for stateful ECMP: one entry per connection).
    FourTuple,
}

/// A flow, IPv4 or IPv6. Build one with [`FlowKey::v4`] or [`FlowKey::v6`] from the
/// packet's full 5-tuple; a table in [`FlowMode::Destination`] ignores all but the
/// destination. Addresses are in host order; ports are 0 for protocols without them.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FlowKey {
    /// IPv4: `[0, addr]`; IPv6: the high and the low 64 bits.
    src: [u64; 2],
    dst: [u64; 2],
    sport: u16,
    dport: u16,
    proto: u8,
    v6: bool,
}

impl fmt::Debug for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.v6 {
            let a = |x: [u64; 2]| std::net::Ipv6Addr::from((x[0] as u128) << 64 | x[1] as u128);
            write!(
                f,
                "[{}]:{} > [{}]:{}",
                a(self.src),
                self.sport,
                a(self.dst),
                self.dport
            )?;
        } else {
            let a = |x: [u64; 2]| std::net::Ipv4Addr::from(x[1] as u32);
            write!(
                f,
                "{}:{} > {}:{}",
                a(self.src),
                self.sport,
                a(self.dst),
                self.dport
            )?;
        }
        write!(f, " proto {}", self.proto)
    }
}

impl FlowKey {
    /// An IPv4 flow.
    pub fn v4(src: u32, dst: u32, proto: u8, sport: u16, dport: u16) -> Self {
        FlowKey {
            src: [0, src as u64],
            dst: [0, dst as u64],
            sport,
            dport,
            proto,
            v6: false,
        }
    }

    /// An IPv6 flow.
    pub fn v6(src: u128, dst: u128, proto: u8, sport: u16, dport: u16) -> Self {
        FlowKey {
            src: [(src >> 64) as u64, src as u64],
            dst: [(dst >> 64) as u64, dst as u64],
            sport,
            dport,
            proto,
            v6: true,
        }
    }

    pub fn is_v6(&self) -> bool {
        self.v6
    }

    /// The part of the key `mode` uses (the destination alone, or all of it).
    #[inline]
    pub fn masked(&self, mode: FlowMode) -> Self {
        match mode {
            FlowMode::FourTuple => *self,
            FlowMode::Destination => FlowKey {
                dst: self.dst,
                v6: self.v6,
                ..FlowKey::default()
            },
        }
    }

    /// The seeded flow hash of the whole key ([`flow_hash4`] or [`flow_hash6`]).
    #[inline]
    pub fn hash(&self, seed: u64) -> u32 {
        if self.v6 {
            let a = |x: [u64; 2]| (x[0] as u128) << 64 | x[1] as u128;
            flow_hash6(
                a(self.src),
                a(self.dst),
                self.proto,
                self.sport,
                self.dport,
                seed,
            )
        } else {
            flow_hash4(
                self.src[1] as u32,
                self.dst[1] as u32,
                self.proto,
                self.sport,
                self.dport,
                seed,
            )
        }
    }
}

/// How a [`FlowTable`] is built.
#[derive(Clone, Copy, Debug)]
pub struct FlowTableConfig {
    pub mode: FlowMode,
    /// Entries, rounded up to a power of two of at least [`WAYS`].
    pub capacity: usize,
    /// An entry unused for longer than this is dropped (the paper's default: 30 s).
    pub idle: Duration,
    /// The flow hash's seed; pick it at random so that the sets cannot be aimed at.
    pub seed: u64,
}

impl Default for FlowTableConfig {
    fn default() -> Self {
        FlowTableConfig {
            mode: FlowMode::Destination,
            capacity: 64 * 1024,
            idle: Duration::from_secs(30),
            seed: 0x6d70_7374_6163_6b21,
        }
    }
}

/// A flow table's counters. `misses` counts every lookup that returned nothing,
/// including those that found an entry `stale` (refused by the caller's check) or
/// `expired` (idle too long); `evictions` counts live entries replaced by an insert
/// into a full set; `expired` also counts idle entries dropped by an insert or a sweep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowStats {
    pub hits: u64,
    pub misses: u64,
    pub stale: u64,
    pub expired: u64,
    pub inserts: u64,
    pub evictions: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct Entry<V> {
    key: FlowKey,
    value: V,
    /// When the entry was last used (looked up with success, or inserted).
    used: u64,
}

/// A bounded, set-associative flow table for one worker (it is `&mut self` all
/// through: one table per worker, never shared).
pub struct FlowTable<V = (u32, u32)> {
    mode: FlowMode,
    seed: u64,
    idle: u64,
    set_mask: usize,
    /// Each set's tags: the flow hash with bit 0 set, or [`FREE`].
    tags: Vec<[u32; WAYS]>,
    entries: Vec<Entry<V>>,
    /// The next set [`FlowTable::expire_some`] looks at.
    cursor: usize,
    live: usize,
    stats: FlowStats,
}

impl<V> fmt::Debug for FlowTable<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FlowTable")
            .field("mode", &self.mode)
            .field("capacity", &self.entries.len())
            .field("live", &self.live)
            .field("stats", &self.stats)
            .finish()
    }
}

impl<V: Copy + Default> FlowTable<V> {
    /// An empty table; all its memory is allocated here.
    pub fn new(cfg: FlowTableConfig) -> Self {
        let cap = cfg.capacity.max(WAYS).next_power_of_two();
        let sets = cap / WAYS;
        FlowTable {
            mode: cfg.mode,
            seed: cfg.seed,
            idle: u64::try_from(cfg.idle.as_nanos()).unwrap_or(u64::MAX),
            set_mask: sets - 1,
            tags: vec![[FREE; WAYS]; sets],
            entries: vec![Entry::default(); cap],
            cursor: 0,
            live: 0,
            stats: FlowStats::default(),
        }
    }
}

impl<V: Copy> FlowTable<V> {
    pub fn mode(&self) -> FlowMode {
        self.mode
    }

    /// Entries the table can hold.
    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// Entries held (some may be idle past the timeout until a lookup, an insert or a
    /// sweep finds them).
    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    pub fn stats(&self) -> FlowStats {
        self.stats
    }

    /// The set and tag of `key` (already masked by the mode).
    #[inline]
    fn locate(&self, key: &FlowKey) -> (usize, u32) {
        let h = key.hash(self.seed);
        // The set from the top bits, so a table and an ECMP group sharing a seed still
        // use different bits; bit 0 of the tag marks it used.
        let set = (h.rotate_left(16) as usize) & self.set_mask;
        (set, h | 1)
    }

    #[inline]
    fn find(&self, set: usize, tag: u32, key: &FlowKey) -> Option<usize> {
        let tags = &self.tags[set];
        (0..WAYS)
            .find(|&w| tags[w] == tag && self.entries[set * WAYS + w].key == *key)
            .map(|w| set * WAYS + w)
    }

    #[inline]
    fn idle_at(&self, i: usize, now: u64) -> bool {
        now.saturating_sub(self.entries[i].used) > self.idle
    }

    fn drop_entry(&mut self, i: usize) {
        self.tags[i / WAYS][i % WAYS] = FREE;
        self.live -= 1;
    }

    /// The value of `key`'s flow, if it has a live entry that `valid` accepts (given
    /// the value, typically: is its generation still the next hop's?). An entry idle
    /// past the timeout, or refused by `valid`, is dropped and the lookup is a miss.
    #[inline]
    pub fn lookup(&mut self, key: &FlowKey, now: u64, valid: impl FnOnce(&V) -> bool) -> Option<V> {
        let key = key.masked(self.mode);
        let (set, tag) = self.locate(&key);
        self.lookup_at(set, tag, &key, now, valid)
    }

    #[inline]
    fn lookup_at(
        &mut self,
        set: usize,
        tag: u32,
        key: &FlowKey,
        now: u64,
        valid: impl FnOnce(&V) -> bool,
    ) -> Option<V> {
        let Some(i) = self.find(set, tag, key) else {
            self.stats.misses += 1;
            return None;
        };
        if self.idle_at(i, now) {
            self.stats.expired += 1;
        } else if !valid(&self.entries[i].value) {
            self.stats.stale += 1;
        } else {
            self.stats.hits += 1;
            self.entries[i].used = now;
            return Some(self.entries[i].value);
        }
        self.drop_entry(i);
        self.stats.misses += 1;
        None
    }

    /// Records `value` for `key`'s flow (replacing its entry if it has one). In a full
    /// set, an idle entry is replaced first, else the least recently used one.
    pub fn insert(&mut self, key: &FlowKey, value: V, now: u64) {
        let key = key.masked(self.mode);
        let (set, tag) = self.locate(&key);
        self.insert_at(set, tag, &key, value, now);
    }

    fn insert_at(&mut self, set: usize, tag: u32, key: &FlowKey, value: V, now: u64) {
        self.stats.inserts += 1;
        let i = match self.find(set, tag, key) {
            Some(i) => i,
            None => {
                let base = set * WAYS;
                let tags = self.tags[set];
                let i = match (0..WAYS).find(|&w| tags[w] == FREE) {
                    Some(w) => {
                        self.live += 1;
                        base + w
                    }
                    None => {
                        let i = (base..base + WAYS)
                            .min_by_key(|&i| self.entries[i].used)
                            .expect("a set has ways");
                        if self.idle_at(i, now) {
                            self.stats.expired += 1;
                        } else {
                            self.stats.evictions += 1;
                        }
                        i
                    }
                };
                self.tags[set][i - base] = tag;
                self.entries[i].key = *key;
                i
            }
        };
        self.entries[i].value = value;
        self.entries[i].used = now;
    }

    /// [`lookup`](Self::lookup), and on a miss, `make()`'s value inserted (if it gives
    /// one) and returned: the forwarding path's one call, hashing the key once.
    #[inline]
    pub fn lookup_or_insert_with(
        &mut self,
        key: &FlowKey,
        now: u64,
        valid: impl FnOnce(&V) -> bool,
        make: impl FnOnce() -> Option<V>,
    ) -> Option<V> {
        let key = key.masked(self.mode);
        let (set, tag) = self.locate(&key);
        if let Some(v) = self.lookup_at(set, tag, &key, now, valid) {
            return Some(v);
        }
        let v = make()?;
        self.insert_at(set, tag, &key, v, now);
        Some(v)
    }

    /// Drops `key`'s entry; returns its value.
    pub fn remove(&mut self, key: &FlowKey) -> Option<V> {
        let key = key.masked(self.mode);
        let (set, tag) = self.locate(&key);
        let i = self.find(set, tag, &key)?;
        self.drop_entry(i);
        Some(self.entries[i].value)
    }

    /// Drops every entry idle past the timeout; returns how many.
    pub fn expire(&mut self, now: u64) -> usize {
        self.cursor = 0;
        self.expire_some(now, self.tags.len())
    }

    /// Drops the idle entries of the next `sets` sets, continuing where the previous
    /// call stopped and wrapping around (an incremental sweep, to bound the work of
    /// one call); returns how many it dropped.
    pub fn expire_some(&mut self, now: u64, sets: usize) -> usize {
        let mut dropped = 0;
        for _ in 0..sets.min(self.tags.len()) {
            let set = self.cursor;
            self.cursor = (self.cursor + 1) & self.set_mask;
            for w in 0..WAYS {
                let i = set * WAYS + w;
                if self.tags[set][w] != FREE && self.idle_at(i, now) {
                    self.drop_entry(i);
                    dropped += 1;
                }
            }
        }
        self.stats.expired += dropped as u64;
        dropped
    }

    /// Drops every entry (when, say, the whole FIB is replaced).
    pub fn clear(&mut self) {
        for t in &mut self.tags {
            *t = [FREE; WAYS];
        }
        self.live = 0;
    }

    /// Heap bytes the table holds (all of it from construction).
    pub fn memory(&self) -> usize {
        self.tags.capacity() * std::mem::size_of::<[u32; WAYS]>()
            + self.entries.capacity() * std::mem::size_of::<Entry<V>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    fn table(mode: FlowMode, capacity: usize) -> FlowTable<(u32, u32)> {
        FlowTable::new(FlowTableConfig {
            mode,
            capacity,
            ..FlowTableConfig::default()
        })
    }

    fn flow(i: u32) -> FlowKey {
        FlowKey::v4(0x0a00_0001, 0xc000_0000 + i, 6, i as u16, 80)
    }

    #[test]
    fn hit_after_insert_and_miss_before() {
        let mut t = table(FlowMode::FourTuple, 64);
        assert_eq!(t.lookup(&flow(1), 0, |_| true), None);
        t.insert(&flow(1), (5, 1), 0);
        assert_eq!(t.lookup(&flow(1), SEC, |_| true), Some((5, 1)));
        assert_eq!(t.lookup(&flow(2), SEC, |_| true), None);
        let s = t.stats();
        assert_eq!((s.hits, s.misses, s.inserts), (1, 2, 1));
        assert_eq!(t.len(), 1);
        assert_eq!(t.remove(&flow(1)), Some((5, 1)));
        assert!(t.is_empty());
    }

    #[test]
    fn destination_mode_ignores_all_but_the_destination() {
        let mut t = table(FlowMode::Destination, 64);
        let a = FlowKey::v4(1, 0xc000_0201, 6, 1000, 80);
        let b = FlowKey::v4(2, 0xc000_0201, 17, 53, 53);
        t.insert(&a, (3, 0), 0);
        assert_eq!(t.lookup(&b, 0, |_| true), Some((3, 0)));
        // The same bits as an IPv6 destination are another flow.
        let c = FlowKey::v6(1, 0xc000_0201, 6, 1000, 80);
        assert_eq!(t.lookup(&c, 0, |_| true), None);
        let mut t = table(FlowMode::FourTuple, 64);
        t.insert(&a, (3, 0), 0);
        assert_eq!(t.lookup(&b, 0, |_| true), None);
    }

    #[test]
    fn ipv6_flows() {
        let mut t = table(FlowMode::FourTuple, 64);
        let d = 0x2001_0db8_0000_0000_0000_0000_0000_0001u128;
        let k = FlowKey::v6(d + 1, d, 6, 1, 2);
        t.insert(&k, (9, 9), 0);
        assert_eq!(t.lookup(&k, 0, |_| true), Some((9, 9)));
        assert_eq!(t.lookup(&FlowKey::v6(d + 2, d, 6, 1, 2), 0, |_| true), None);
        assert_eq!(
            format!("{k:?}"),
            "[2001:db8::2]:1 > [2001:db8::1]:2 proto 6"
        );
    }

    #[test]
    fn an_entry_expires_after_30_idle_seconds() {
        let mut t = table(FlowMode::Destination, 64);
        t.insert(&flow(1), (1, 0), 0);
        // Each hit restarts the idle time.
        assert!(t.lookup(&flow(1), 20 * SEC, |_| true).is_some());
        assert!(t.lookup(&flow(1), 50 * SEC, |_| true).is_some());
        assert_eq!(t.lookup(&flow(1), 80 * SEC + 1, |_| true), None);
        assert_eq!(t.stats().expired, 1);
        assert!(t.is_empty());
    }

    #[test]
    fn a_sweep_drops_idle_entries_incrementally() {
        let mut t = table(FlowMode::FourTuple, 1024);
        for i in 0..100 {
            t.insert(&flow(i), (i, 0), if i < 60 { 0 } else { 20 * SEC });
        }
        assert_eq!(t.len(), 100);
        assert_eq!(t.expire(31 * SEC), 60);
        assert_eq!(t.len(), 40);
        // Incremental: a sweep of every set, a few at a time, finds the rest.
        let sets = t.capacity() / WAYS;
        let mut n = 0;
        for _ in 0..sets / 16 {
            n += t.expire_some(51 * SEC, 16);
        }
        assert_eq!(t.len(), 0);
        assert_eq!(n, 40);
    }

    #[test]
    fn a_stale_generation_is_a_miss_and_drops_the_entry() {
        let mut t = table(FlowMode::Destination, 64);
        let generation = 7;
        t.insert(&flow(1), (4, generation), 0);
        assert!(t.lookup(&flow(1), 0, |&(_, g)| g == generation).is_some());
        // The next hop changed: its generation moved on.
        assert_eq!(t.lookup(&flow(1), 0, |&(_, g)| g == generation + 1), None);
        assert_eq!(t.stats().stale, 1);
        assert_eq!(t.lookup(&flow(1), 0, |_| true), None);
        // The forwarding path's one call: a miss recomputes and caches.
        let v = t.lookup_or_insert_with(&flow(1), 0, |_| true, || Some((5, 8)));
        assert_eq!(v, Some((5, 8)));
        let v = t.lookup_or_insert_with(&flow(1), 0, |_| true, || unreachable!());
        assert_eq!(v, Some((5, 8)));
        assert_eq!(
            t.lookup_or_insert_with(&flow(2), 0, |_| true, || None),
            None
        );
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn a_flood_of_new_flows_stays_within_the_bound_and_evicts_the_oldest() {
        let mut t = table(FlowMode::FourTuple, 1000);
        assert_eq!(t.capacity(), 1024);
        let (tags, entries) = (t.tags.as_ptr(), t.entries.as_ptr());
        let mem = t.memory();
        for i in 0..100_000 {
            let k = flow(i);
            let now = i as u64 * 1000;
            if t.lookup(&k, now, |_| true).is_none() {
                t.insert(&k, (i, 0), now);
            }
            assert!(t.len() <= 1024);
        }
        let s = t.stats();
        assert_eq!(s.misses, 100_000);
        assert_eq!(s.evictions, 100_000 - t.len() as u64);
        assert!(t.len() > 1000, "{}", t.len());
        // The most recent flows are the ones kept (LRU within a set).
        let recent = (99_900..100_000)
            .filter(|&i| t.lookup(&flow(i), 100 * SEC / 1000, |_| true).is_some())
            .count();
        assert!(recent > 95, "{recent}");
        // Not one allocation: the same buffers, the same size.
        assert_eq!((t.tags.as_ptr(), t.entries.as_ptr()), (tags, entries));
        assert_eq!(t.memory(), mem);
    }

    #[test]
    fn an_insert_into_a_full_set_prefers_an_idle_entry_to_a_live_one() {
        let mut t = table(FlowMode::FourTuple, WAYS);
        for i in 0..WAYS as u32 {
            t.insert(&flow(i), (i, 0), if i == 2 { 0 } else { 40 * SEC });
        }
        // Flow 2 is idle (and the oldest): replaced, counted as expired.
        t.insert(&flow(10), (10, 0), 45 * SEC);
        assert_eq!(t.stats().expired, 1);
        assert_eq!(t.stats().evictions, 0);
        assert_eq!(t.lookup(&flow(2), 45 * SEC, |_| true), None);
        // Now the least recently used live one goes.
        assert!(t.lookup(&flow(0), 46 * SEC, |_| true).is_some());
        t.insert(&flow(11), (11, 0), 47 * SEC);
        assert_eq!(t.stats().evictions, 1);
        assert!(t.lookup(&flow(0), 47 * SEC, |_| true).is_some());
        assert_eq!(t.lookup(&flow(1), 47 * SEC, |_| true), None);
        t.clear();
        assert!(t.is_empty());
    }
}
