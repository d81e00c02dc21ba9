//! One shard's states: the open-addressing table of one-line entries, and
//! [`StateTable`], a shard with its own `limit` parents.

use super::flow::Key;
use super::limits::{Limits, ParentKey, Parents};
use super::*;

/// `Entry::bits`.
const LIVE: u8 = 1;
/// The creating packet went the reverse of the canonical order.
const SWAPPED: u8 = 2;
/// The state is a `limit` child; `Entry::mask` says its parent's key.
const LIMITED: u8 = 4;

/// One state: one cache line.
#[derive(Clone, Copy, Debug, Default)]
#[repr(align(64))]
pub(super) struct Entry {
    pub(super) key: Key,
    pub(super) expires: u64,
    pub(super) rule: u32,
    pub(super) rule_id: u32,
    /// The low half of the key's hash: where its probe starts.
    pub(super) hash_lo: u32,
    /// TCP flags seen (SYN, FIN, RST), forward in the low byte.
    pub(super) tcp: u16,
    pub(super) bits: u8,
    pub(super) mask: u8,
}

impl Entry {
    pub(super) fn live(&self) -> bool {
        self.bits & LIVE != 0
    }

    /// The key in the creating packet's order.
    pub(super) fn creator_key(&self) -> Key {
        if self.bits & SWAPPED != 0 {
            self.key.swapped()
        } else {
            self.key
        }
    }

    pub(super) fn parent_key(&self) -> ParentKey {
        ParentKey {
            rule_id: self.rule_id,
            key: self.creator_key().masked(LimitMask::from_bits(self.mask)),
        }
    }
}

/// The states of one shard, without their `limit` parents (the caller's).
pub(super) struct Table {
    pub(super) life: Lifetimes,
    pub(super) seed: u64,
    /// The entries in their open-addressing slots (linear probing from the hash's
    /// low bits, a power of two, at most two-thirds full): a lookup reads the
    /// entry's own line, with no index to go through first.
    pub(super) slots: Vec<Entry>,
    pub(super) mask: usize,
    /// States held at most.
    pub(super) cap: usize,
    pub(super) live: usize,
    /// The next slot the sweep looks at.
    pub(super) cursor: usize,
    pub(super) stats: StateStats,
}

impl fmt::Debug for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Table")
            .field("capacity", &self.cap)
            .field("live", &self.live)
            .field("slots", &self.slots.len())
            .field("stats", &self.stats)
            .finish()
    }
}

/// Packets whose memory reads [`StateTable::lookup_batch`] overlaps.
pub const BATCH: usize = 16;

/// Slots are found from a `u32` hash half, and are up to three per state.
const MAX_CAPACITY: usize = 1 << 30;

impl Table {
    pub(super) fn new(cfg: &StateConfig) -> Self {
        let cap = cfg.max_states.min(MAX_CAPACITY);
        // At most two-thirds full: a probe is short, and always finds an empty slot.
        let nb = (cap + cap / 2 + 1).max(2).next_power_of_two();
        Table {
            life: Lifetimes::of(cfg),
            seed: cfg.seed,
            slots: vec![Entry::default(); nb],
            mask: nb - 1,
            cap,
            live: 0,
            cursor: 0,
            stats: StateStats::default(),
        }
    }

    /// The slot of `key` (canonical) with hash `h`.
    #[inline]
    pub(super) fn find(&self, key: &Key, h: u64) -> Option<usize> {
        let mut pos = h as usize & self.mask;
        loop {
            let e = &self.slots[pos];
            if !e.live() {
                return None;
            }
            if e.hash_lo == h as u32 && e.key == *key {
                return Some(pos);
            }
            pos = (pos + 1) & self.mask;
        }
    }

    /// Drops the entry in slot `pos`: its parent's count, and the slot by backward
    /// shift (each later entry of the run moves into the hole unless its probe
    /// starts after the hole), so there are no tombstones.
    pub(super) fn remove_at(&mut self, pos: usize, parents: &mut impl Limits) {
        let e = &self.slots[pos];
        if e.bits & LIMITED != 0 {
            parents.release(&e.parent_key());
        }
        let m = self.mask;
        let mut hole = pos;
        let mut j = pos;
        loop {
            j = (j + 1) & m;
            let e = &self.slots[j];
            if !e.live() {
                break;
            }
            let home = e.hash_lo as usize & m;
            if (j.wrapping_sub(home) & m) >= (j.wrapping_sub(hole) & m) {
                self.slots[hole] = self.slots[j];
                hole = j;
            }
        }
        self.slots[hole].bits = 0;
        self.live -= 1;
    }

    /// The packet's flags into the state's, and the lifetime restarted.
    #[inline]
    pub(super) fn refresh(&mut self, pos: usize, dir: Dir, tcp_flags: u8, now: u64) {
        let e = &mut self.slots[pos];
        if e.key.proto == IPPROTO_TCP {
            let f = (tcp_flags & (TH_FIN | TH_SYN | TH_RST)) as u16;
            e.tcp |= match dir {
                Dir::Forward => f,
                Dir::Reverse => f << 8,
            };
        }
        e.expires = now.saturating_add(self.life.after(e.key.proto, e.tcp));
    }

    #[inline]
    pub(super) fn lookup(
        &mut self,
        f: &FlowId,
        tcp_flags: u8,
        now: u64,
        parents: &mut impl Limits,
    ) -> Option<StateHit> {
        let (key, swapped) = Key::canonical(f);
        let h = key.hash(self.seed);
        self.lookup_hashed(&key, swapped, h, tcp_flags, now, parents)
    }

    #[inline]
    pub(super) fn lookup_hashed(
        &mut self,
        key: &Key,
        swapped: bool,
        h: u64,
        tcp_flags: u8,
        now: u64,
        parents: &mut impl Limits,
    ) -> Option<StateHit> {
        let pos = self.find(key, h)?;
        let e = &self.slots[pos];
        if now >= e.expires {
            self.remove_at(pos, parents);
            self.stats.expired += 1;
            return None;
        }
        let dir = if swapped == (e.bits & SWAPPED != 0) {
            Dir::Forward
        } else {
            Dir::Reverse
        };
        let hit = StateHit {
            rule: e.rule,
            rule_id: e.rule_id,
            dir,
        };
        self.refresh(pos, dir, tcp_flags, now);
        self.stats.hits += 1;
        Some(hit)
    }

    /// The line a lookup of hash `h` reads first, read (its `expires`), so that a
    /// batch's reads are issued together and their cache misses overlap.
    #[inline]
    pub(super) fn touch(&self, h: u64) -> u64 {
        self.slots[h as usize & self.mask].expires
    }

    /// Lookups in groups of [`BATCH`]: first every packet's hash and home slot, then
    /// the lookups proper. The first pass only reads, and its reads do not depend on
    /// one another, so a large table's cache and TLB misses overlap (VPP's
    /// prefetching, with plain loads: no `unsafe` here); the second pass finds them
    /// cached, and is exactly [`lookup`](Self::lookup) of each packet in turn.
    pub(super) fn lookup_batch(
        &mut self,
        flows: &[FlowId],
        tcp_flags: &[u8],
        now: u64,
        out: &mut [Option<StateHit>],
        parents: &mut impl Limits,
    ) {
        let n = flows.len().min(tcp_flags.len()).min(out.len());
        let mut start = 0;
        while start < n {
            let m = (n - start).min(BATCH);
            let mut keys = [(Key::default(), false, 0u64); BATCH];
            let mut touched = 0u64;
            for (j, k) in keys[..m].iter_mut().enumerate() {
                let (key, s) = Key::canonical(&flows[start + j]);
                let h = key.hash(self.seed);
                touched ^= self.touch(h);
                *k = (key, s, h);
            }
            std::hint::black_box(touched);
            for (j, &(k, s, h)) in keys[..m].iter().enumerate() {
                out[start + j] = self.lookup_hashed(&k, s, h, tcp_flags[start + j], now, parents);
            }
            start += m;
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn insert(
        &mut self,
        f: &FlowId,
        rule: u32,
        rule_id: u32,
        tcp_flags: u8,
        limit: Option<(LimitMask, u32)>,
        now: u64,
        parents: &mut impl Limits,
    ) -> Result<(), StateError> {
        let (key, swapped) = Key::canonical(f);
        let h = key.hash(self.seed);
        if let Some(pos) = self.find(&key, h) {
            if now < self.slots[pos].expires {
                return Ok(());
            }
            self.remove_at(pos, parents);
            self.stats.expired += 1;
        }
        if self.live >= self.cap {
            self.stats.full += 1;
            return Err(StateError::Full);
        }
        let mut bits = LIVE | if swapped { SWAPPED } else { 0 };
        let mut mask = 0;
        if let Some((m, n)) = limit {
            let pk = ParentKey {
                rule_id,
                key: Key::of(f).masked(m),
            };
            if !parents.acquire(&pk, n) {
                self.stats.limited += 1;
                return Err(StateError::LimitReached);
            }
            bits |= LIMITED;
            mask = m.bits();
        }
        let mut pos = h as usize & self.mask;
        while self.slots[pos].live() {
            pos = (pos + 1) & self.mask;
        }
        self.slots[pos] = Entry {
            key,
            expires: 0,
            rule,
            rule_id,
            hash_lo: h as u32,
            tcp: 0,
            bits,
            mask,
        };
        self.refresh(pos, Dir::Forward, tcp_flags, now);
        self.live += 1;
        self.stats.created += 1;
        Ok(())
    }

    /// Looks at the next `max_work` states' worth of slots (the slots scaled by
    /// capacity, so `max_work >= cap` is every slot).
    pub(super) fn expire(&mut self, now: u64, max_work: usize, parents: &mut impl Limits) -> usize {
        let n = self.slots.len();
        let mut work = (max_work as u128 * n as u128)
            .div_ceil(self.cap.max(1) as u128)
            .min(n as u128) as usize;
        let mut dropped = 0;
        while work > 0 {
            let i = self.cursor;
            let e = &self.slots[i];
            if e.live() && now >= e.expires {
                // The backward shift may move a later entry into slot `i`: look again.
                self.remove_at(i, parents);
                dropped += 1;
                continue;
            }
            self.cursor = if i + 1 == n { 0 } else { i + 1 };
            work -= 1;
        }
        self.stats.expired += dropped as u64;
        dropped
    }

    pub(super) fn remove_rule(&mut self, rule_id: u32, parents: &mut impl Limits) -> usize {
        let mut n = 0;
        let mut i = 0;
        while i < self.slots.len() {
            let e = &self.slots[i];
            if e.live() && e.rule_id == rule_id {
                // As in `expire`: slot `i` may hold a later entry now.
                self.remove_at(i, parents);
                n += 1;
                continue;
            }
            i += 1;
        }
        n
    }

    pub(super) fn flush(&mut self, parents: &mut impl Limits) {
        for e in &mut self.slots {
            if e.live() && e.bits & LIMITED != 0 {
                parents.release(&e.parent_key());
            }
            e.bits = 0;
        }
        self.live = 0;
    }

    /// Every live entry is found from its home slot, and the count is right.
    #[cfg(test)]
    pub(super) fn check(&self) {
        let used = self.slots.iter().filter(|e| e.live()).count();
        assert_eq!(used, self.live);
        assert!(self.live <= self.cap);
        for (i, e) in self.slots.iter().enumerate() {
            if e.live() {
                let h = e.key.hash(self.seed);
                assert_eq!(h as u32, e.hash_lo);
                assert_eq!(self.find(&e.key, h), Some(i));
            }
        }
    }

    pub(super) fn stats(&self) -> StateStats {
        StateStats {
            states: self.live as u64,
            ..self.stats
        }
    }

    pub(super) fn states_into(&self, out: &mut Vec<(FlowId, StateHit, u64)>) {
        out.extend(self.slots.iter().filter(|e| e.live()).map(|e| {
            let hit = StateHit {
                rule: e.rule,
                rule_id: e.rule_id,
                dir: Dir::Forward,
            };
            (e.creator_key().flow(), hit, e.expires)
        }));
    }
}

/// The dynamic states of one shard, with its own `limit` parents: `&mut self`, one
/// per worker (or behind the caller's lock). See the module doc for the semantics.
#[derive(Debug)]
pub struct StateTable {
    pub(super) table: Table,
    pub(super) parents: Parents,
}

impl StateTable {
    /// An empty table for `cfg.max_states` states, all allocated here.
    pub fn new(cfg: StateConfig) -> Self {
        StateTable {
            table: Table::new(&cfg),
            parents: Parents::new(cfg.max_states),
        }
    }

    /// The state of `f`'s flow, either way, as `check-state` asks; a hit folds the
    /// packet's TCP flags into the state and restarts its lifetime. An expired state
    /// is a miss, and is dropped.
    #[inline]
    pub fn lookup(&mut self, f: &FlowId, tcp_flags: u8, now: u64) -> Option<StateHit> {
        self.table.lookup(f, tcp_flags, now, &mut self.parents)
    }

    /// [`lookup`](Self::lookup) of each of `flows` in turn (with the TCP flags of the
    /// same index), results into `out`, up to the shortest of the three slices: the
    /// same results and effects, faster on a large table, whose cache misses the
    /// batch overlaps (see the module doc). A vector of packets in, a vector of
    /// verdicts out, as the rest of the fast path.
    pub fn lookup_batch(
        &mut self,
        flows: &[FlowId],
        tcp_flags: &[u8],
        now: u64,
        out: &mut [Option<StateHit>],
    ) {
        self.table
            .lookup_batch(flows, tcp_flags, now, out, &mut self.parents)
    }

    /// `keep-state`: a state for `f`'s flow, created by the packet `f` (its direction
    /// is [`Dir::Forward`]) of rule `rule`. A no-op if the flow has a live state
    /// either way.
    pub fn insert(
        &mut self,
        f: &FlowId,
        rule: u32,
        rule_id: u32,
        tcp_flags: u8,
        now: u64,
    ) -> Result<(), StateError> {
        self.table
            .insert(f, rule, rule_id, tcp_flags, None, now, &mut self.parents)
    }

    /// `limit`: as [`insert`](Self::insert), refused with
    /// [`StateError::LimitReached`] when `limit` states of rule `rule_id` share `f`'s
    /// key under `mask`.
    #[allow(clippy::too_many_arguments)]
    pub fn insert_limited(
        &mut self,
        f: &FlowId,
        rule: u32,
        rule_id: u32,
        tcp_flags: u8,
        mask: LimitMask,
        limit: u32,
        now: u64,
    ) -> Result<(), StateError> {
        let lim = Some((mask, limit));
        self.table
            .insert(f, rule, rule_id, tcp_flags, lim, now, &mut self.parents)
    }

    /// The incremental sweep: looks at the next `max_work` states' worth of slots
    /// (`max_work` times slots per state of capacity, continuing where the last
    /// call stopped, wrapping around) and drops the expired states; returns how
    /// many. `max_work >= capacity()` sweeps the whole table. A state that a
    /// deletion moves back past the sweep's position waits for its next round.
    pub fn expire(&mut self, now: u64, max_work: usize) -> usize {
        self.table.expire(now, max_work, &mut self.parents)
    }

    /// Drops the states rule `rule_id` created (the rule is deleted); returns how
    /// many. Walks every slot.
    pub fn remove_rule(&mut self, rule_id: u32) -> usize {
        self.table.remove_rule(rule_id, &mut self.parents)
    }

    /// Drops every state (`ipfw flush`).
    pub fn flush(&mut self) {
        self.table.flush(&mut self.parents);
        self.parents.count.clear();
    }

    /// States held, expired ones not yet dropped included.
    pub fn len(&self) -> usize {
        self.table.live
    }

    pub fn is_empty(&self) -> bool {
        self.table.live == 0
    }

    /// States the table can hold (`max_states`).
    pub fn capacity(&self) -> usize {
        self.table.cap
    }

    pub fn stats(&self) -> StateStats {
        self.table.stats()
    }

    /// Every state held, as its creator's flow, its rule (direction
    /// [`Dir::Forward`]) and when it expires: `ipfw -d list`.
    pub fn states(&self) -> Vec<(FlowId, StateHit, u64)> {
        let mut v = Vec::with_capacity(self.len());
        self.table.states_into(&mut v);
        v
    }
}
