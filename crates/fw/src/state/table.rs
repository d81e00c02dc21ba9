//! One shard's states: the open-addressing table of [`Slot`]s, which readers search
//! without a lock while its one writer (the holder of the shard's lock, or of a
//! [`StateTable`]) changes it, and [`StateTable`], a shard with its own `limit`
//! parents.
//!
//! A lookup takes no lock and writes nothing but, sometimes, its own state's `meta`
//! (FreeBSD 12's lockless dynamic states, in an open-addressing table where
//! FreeBSD has lists freed after a grace period):
//! - a hit is a slot read whole under its sequence ([`super::slot`]): a reader never
//!   takes a half-written key, or another flow's state, for its own;
//! - a miss is proved: the probe's slots are read again after it, and if a sequence
//!   moved (an insert, a removal, a backward shift passing by) or was odd, the
//!   lookup starts over. A shift may move a state from ahead of a reader to behind
//!   it; FreeBSD's lookups restart in the same way when their bucket's "del"
//!   version moves;
//! - the hit's update (the flags seen, the lifetime restarted) is one
//!   compare-and-swap of `meta`, made only when the flags change or the expiry
//!   gains [`REFRESH`] (an eighth of the lifetime, if that is less): between those,
//!   a flow's packets read its line and leave it clean. FreeBSD stores `expire`
//!   only when it changes, to the second, for the same reason. A swap that finds the
//!   sequence moved (the state moved or went) looks the flow up again.
//!
//! Writers change slots as a seqlock's writers do, and carry a moved state's flags
//! and expiry as the last reader left them ([`Slot::begin`] reads them in the same
//! atomic step that locks readers' swaps out). A state is dropped for its age only
//! if it is still expired at that step: a reader that refreshed it just before wins.

use super::flow::{Key, KW_KEY};
use super::limits::{Limits, ParentKey, Parents};
use super::slot::*;
use super::*;
use std::sync::atomic::{fence, Ordering};

/// How much a hit must move a state's expiry before it is written: 100 ms (in
/// [`EXP_UNIT`]s), or an eighth of the state's lifetime if that is less, so that a
/// state lives at least seven eighths of its lifetime after its last packet.
const REFRESH: u64 = 100;

/// Packets whose memory reads [`StateTable::lookup_batch`] overlaps. 16, 32 and 64
/// measured the same within noise on `mpstack bench fw`'s keep-state case at 1M
/// states (32 a little ahead) when they were loads, which had to be issued in a loop
/// of their own; prefetches, which hold no place in the core's window, go out as
/// each hash is known (252 → 215 cycles a lookup there on a quiet machine, level
/// with the loads when other work contends for memory).
pub const BATCH: usize = 32;

/// A table of more slots is not needed (three per state at most) and keeps the
/// index arithmetic in `usize` on every target.
const MAX_CAPACITY: usize = 1 << 30;

/// The states of one shard, as readers see them: the slots and how to find a key
/// in them. Its writer methods take the table's [`Books`], which only its one
/// writer holds.
pub(super) struct Table {
    life: Lifetimes,
    pub(super) seed: u64,
    /// The states in their open-addressing slots (linear probing from the hash's
    /// low bits, a power of two, at most two-thirds full): a lookup reads the
    /// state's own line, with no index to go through first.
    pub(super) slots: mbuf::mem::HugeSlice<Slot>,
    mask: usize,
    /// States held at most.
    pub(super) cap: usize,
}

impl fmt::Debug for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Table")
            .field("capacity", &self.cap)
            .field("slots", &self.slots.len())
            .finish()
    }
}

/// What only a table's writer touches: how many states it holds, where the sweep
/// is, and the counters (but hits, which readers count where they may write).
#[derive(Debug, Default)]
pub(super) struct Books {
    pub(super) live: usize,
    /// The next slot the sweep looks at.
    cursor: usize,
    pub(super) stats: StateStats,
}

impl Books {
    pub(super) fn stats(&self) -> StateStats {
        StateStats {
            states: self.live as u64,
            ..self.stats
        }
    }
}

/// What a lookup found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Found {
    Hit(StateHit),
    Miss,
    /// The flow's state, expired, in this slot (a miss; whoever may write drops it).
    Expired(usize),
}

/// One probe's outcome.
enum Probe {
    /// The key's slot, its `kw` and `rule`, and its `meta` when read.
    Hit(usize, u64, u64, u64),
    Miss,
    /// A writer got in the way: probe again.
    Again,
}

/// The 8-bit form of a packet's TCP flags in `meta`, for direction `dir` (FIN,
/// SYN, RST and ACK, forward in the low nibble, reverse in the high one).
#[inline]
fn tcp_bits(proto: u8, tcp_flags: u8, dir: Dir) -> u64 {
    if proto != IPPROTO_TCP {
        return 0;
    }
    let f = (tcp_flags & (TH_FIN | TH_SYN | TH_RST)) as u64
        | if tcp_flags & TH_ACK != 0 { TCP_ACK } else { 0 };
    match dir {
        Dir::Forward => f,
        Dir::Reverse => f << 4,
    }
}

/// The flags seen after `tcp` (`meta`'s form): an ACK counts only once both SYNs
/// are seen (FreeBSD records `ACK_FWD`/`ACK_REV` in its `BOTH_SYN` cases only), so
/// that a handshake is SYN both ways, then an ACK each way.
#[inline]
fn tcp_fold(tcp: u64) -> u64 {
    const SYNS: u64 = (TH_SYN as u64) << 4 | TH_SYN as u64;
    if tcp & SYNS == SYNS {
        tcp
    } else {
        tcp & !(TCP_ACK << 4 | TCP_ACK)
    }
}

/// The key in the creating packet's order, and the `limit` parent, of a slot's
/// fields.
fn creator_key(f: &Fields) -> Key {
    let k = f.key();
    if f.kw & KW_SWAPPED != 0 {
        k.swapped()
    } else {
        k
    }
}

pub(super) fn parent_key(f: &Fields) -> ParentKey {
    ParentKey {
        rule_id: f.rule_id(),
        key: creator_key(f).masked(LimitMask::from_bits((f.kw >> KW_MASK_SHIFT) as u8)),
    }
}

impl Table {
    pub(super) fn new(cfg: &StateConfig) -> Self {
        let cap = cfg.max_states.min(MAX_CAPACITY);
        // At most two-thirds full: a probe is short, and always finds an empty slot.
        let nb = (cap + cap / 2 + 1).max(2).next_power_of_two();
        Table {
            life: Lifetimes::of(cfg),
            seed: cfg.seed,
            // Huge pages: a lookup's slot is a cache miss anyway; it need not be a
            // TLB miss as well (mbuf::mem).
            slots: mbuf::mem::HugeSlice::new(nb, |_| Slot::default()),
            mask: nb - 1,
            cap,
        }
    }

    /// The flags and expiry (`meta`'s content) after a packet at `now` that leaves
    /// the state's flags at `tcp`, or `None` when `cur`'s are as good: the same
    /// flags, and an expiry that would gain less than the refresh step.
    #[inline]
    fn after(&self, cur: u64, tcp: u64, proto: u8, now: u64) -> Option<u64> {
        let same = tcp == (cur >> TCP_SHIFT) & TCP_BITS;
        let Some(life) = self.life.after(proto, tcp_seen(tcp << TCP_SHIFT)) else {
            // A handshake half done keeps its expiry: packets then restart nothing.
            return (!same).then_some(tcp << TCP_SHIFT | cur & EXP_MAX);
        };
        let exp = exp_units(now.saturating_add(life));
        let step = (life / EXP_UNIT / 8).clamp(1, REFRESH);
        if same && exp < (cur & EXP_MAX) + step {
            return None;
        }
        Some(tcp << TCP_SHIFT | exp)
    }

    /// A reader's lookup of `key` (canonical; `swapped` if the packet goes the
    /// other way) with hash `h`: a hit folds the packet's flags into the state and
    /// restarts its lifetime (see the module doc for when that writes).
    #[inline]
    pub(super) fn lookup_hashed(
        &self,
        key: &Key,
        swapped: bool,
        h: u64,
        tcp_flags: u8,
        now: u64,
    ) -> Found {
        let want = key.word() | KW_LIVE;
        let addr = key.addrs();
        // A hit whose update found its slot changed: the state existed when it was
        // read, so it is still the answer if it is gone when looked for again.
        let mut seen = None;
        loop {
            match self.probe(h, want, &addr) {
                Probe::Hit(pos, kw, rule, meta) => {
                    if now >= expires(meta) {
                        return seen.map_or(Found::Expired(pos), Found::Hit);
                    }
                    let dir = if swapped == (kw & KW_SWAPPED != 0) {
                        Dir::Forward
                    } else {
                        Dir::Reverse
                    };
                    // An ICMP query's state lets the query through its way and
                    // the reply the other: not a query the other way whose
                    // identifier happens to equal the query's type.
                    if tcp_flags & ICMP_QUERY != 0
                        && matches!(key.proto, IPPROTO_ICMP | IPPROTO_ICMPV6)
                        && (tcp_flags & ICMP_REPLY != 0) != (dir == Dir::Reverse)
                    {
                        return Found::Miss;
                    }
                    let hit = StateHit {
                        rule: rule as u32,
                        rule_id: (rule >> 32) as u32,
                        dir,
                    };
                    let add = tcp_bits(key.proto, tcp_flags, dir);
                    if self.refresh(&self.slots[pos], meta, add, key.proto, now) {
                        return Found::Hit(hit);
                    }
                    seen = Some(hit);
                }
                Probe::Miss => return seen.map_or(Found::Miss, Found::Hit),
                Probe::Again => std::hint::spin_loop(),
            }
        }
    }

    /// A reader's look at the state of `key` (canonical; `swapped` if the flow
    /// is the other way) with hash `h`, changing nothing: an ICMP error's lookup of
    /// the flow it quotes, which must not keep that state alive.
    #[inline]
    pub(super) fn peek_hashed(
        &self,
        key: &Key,
        swapped: bool,
        h: u64,
        now: u64,
    ) -> Option<StateHit> {
        let want = key.word() | KW_LIVE;
        let addr = key.addrs();
        loop {
            match self.probe(h, want, &addr) {
                Probe::Hit(_, kw, rule, meta) => {
                    if now >= expires(meta) {
                        return None;
                    }
                    return Some(StateHit {
                        rule: rule as u32,
                        rule_id: (rule >> 32) as u32,
                        dir: if swapped == (kw & KW_SWAPPED != 0) {
                            Dir::Forward
                        } else {
                            Dir::Reverse
                        },
                    });
                }
                Probe::Miss => return None,
                Probe::Again => std::hint::spin_loop(),
            }
        }
    }

    /// One probe for the key whose `kw` is `want` and whose addresses are `addr`,
    /// from `h`'s home slot, as a seqlock reader.
    #[inline]
    fn probe(&self, h: u64, want: u64, addr: &[u64; 4]) -> Probe {
        let home = h as usize & self.mask;
        let mut pos = home;
        // The sequences of the slots passed, summed: they only grow, so an equal sum
        // when read again means none moved.
        let mut seqs = 0u64;
        let mut odd = false;
        let mut n = 0;
        loop {
            let s = &self.slots[pos];
            let m1 = s.meta.load(Ordering::Acquire);
            seqs = seqs.wrapping_add(seq(m1));
            n += 1;
            if m1 & SEQ_ONE != 0 {
                // Being written: not to be read, nor taken as the probe's end.
                odd = true;
            } else {
                let kw = s.kw.load(Ordering::Relaxed);
                if kw & KW_LIVE == 0 {
                    break;
                }
                if s.hash.load(Ordering::Relaxed) == h
                    && kw & (KW_KEY | KW_LIVE) == want
                    && s.addr[0].load(Ordering::Relaxed) == addr[0]
                    && s.addr[1].load(Ordering::Relaxed) == addr[1]
                    && s.addr[2].load(Ordering::Relaxed) == addr[2]
                    && s.addr[3].load(Ordering::Relaxed) == addr[3]
                {
                    let rule = s.rule.load(Ordering::Relaxed);
                    fence(Ordering::Acquire);
                    let m2 = s.meta.load(Ordering::Relaxed);
                    if seq(m1) != seq(m2) {
                        return Probe::Again;
                    }
                    return Probe::Hit(pos, kw, rule, m2);
                }
            }
            if n > self.mask {
                // Every slot passed: only while writers race by (a table always has
                // an empty slot).
                return Probe::Again;
            }
            pos = (pos + 1) & self.mask;
        }
        if odd {
            return Probe::Again;
        }
        fence(Ordering::Acquire);
        let mut again = 0u64;
        let mut p = home;
        for _ in 0..n {
            again = again.wrapping_add(seq(self.slots[p].meta.load(Ordering::Relaxed)));
            p = (p + 1) & self.mask;
        }
        if again == seqs {
            Probe::Miss
        } else {
            Probe::Again
        }
    }

    /// The packet's flags (`add`, in `meta`'s form) into the state's and its
    /// lifetime restarted, when that is worth a write; false if the slot changed
    /// (the state moved or went) since its `meta` was `meta`.
    #[inline]
    fn refresh(&self, s: &Slot, meta: u64, add: u64, proto: u8, now: u64) -> bool {
        let mut cur = meta;
        loop {
            let tcp = tcp_fold((cur >> TCP_SHIFT) & TCP_BITS | add);
            let Some(content) = self.after(cur, tcp, proto, now) else {
                return true;
            };
            let next = (cur & !CONTENT) | content;
            match s
                .meta
                .compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return true,
                // Another reader's update of the same state: fold ours into it.
                Err(m) if seq(m) == seq(cur) => cur = m,
                Err(_) => return false,
            }
        }
    }

    /// The line a lookup of hash `h` reads first, prefetched, so that a batch's
    /// cache misses are all in flight together (a prefetch, unlike a load, leaves
    /// the core's window free while the line comes).
    #[inline(always)]
    pub(super) fn prefetch(&self, h: u64) {
        mbuf::mem::prefetch(&self.slots[h as usize & self.mask]);
    }

    // ---- the writer's side: `&mut Books` is the writer's token -------------------

    /// The slot of `key` (canonical) with hash `h`, for the writer.
    fn find(&self, key: &Key, h: u64) -> Option<usize> {
        let want = key.word() | KW_LIVE;
        let addr = key.addrs();
        let mut pos = h as usize & self.mask;
        loop {
            let f = self.slots[pos].fields();
            if !f.live() {
                return None;
            }
            if f.hash == h && f.kw & (KW_KEY | KW_LIVE) == want && f.addr == addr {
                return Some(pos);
            }
            pos = (pos + 1) & self.mask;
        }
    }

    /// Drops the state in slot `pos`: its parent's count, and the slot by backward
    /// shift (each later state of the run moves into the hole unless its probe
    /// starts after the hole), so there are no tombstones. With `aged_at`, only if
    /// the state is expired at that time when readers are locked out of it (else it
    /// stays, and this returns false).
    pub(super) fn remove_at(
        &self,
        b: &mut Books,
        pos: usize,
        parents: &mut impl Limits,
        aged_at: Option<u64>,
    ) -> bool {
        let s = &self.slots[pos];
        let was = s.begin();
        if aged_at.is_some_and(|now| now < expires(was)) {
            s.publish(was, was);
            return false;
        }
        let f = s.fields();
        if f.kw & KW_LIMITED != 0 {
            parents.release(&parent_key(&f));
        }
        let m = self.mask;
        // The hole is odd (being written) until a state moves into it or it ends
        // empty: readers pass over it without taking it for the end of a run.
        let (mut hole, mut hole_was) = (pos, was);
        let mut j = pos;
        loop {
            j = (j + 1) & m;
            let e = &self.slots[j];
            let f = e.fields();
            if !f.live() {
                break;
            }
            let home = f.hash as usize & m;
            if (j.wrapping_sub(home) & m) >= (j.wrapping_sub(hole) & m) {
                let moved = e.begin();
                let d = &self.slots[hole];
                d.store(&f);
                d.publish(hole_was, moved);
                (hole, hole_was) = (j, moved);
            }
        }
        let d = &self.slots[hole];
        d.kw.store(0, Ordering::Relaxed);
        d.publish(hole_was, 0);
        b.live -= 1;
        true
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn insert(
        &self,
        b: &mut Books,
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
            let meta = self.slots[pos].meta.load(Ordering::Relaxed);
            if now < expires(meta) || !self.remove_at(b, pos, parents, Some(now)) {
                return Ok(());
            }
            b.stats.expired += 1;
        }
        if b.live >= self.cap {
            b.stats.full += 1;
            return Err(StateError::Full);
        }
        let mut kw = key.word() | KW_LIVE | if swapped { KW_SWAPPED } else { 0 };
        if let Some((m, n)) = limit {
            let pk = ParentKey {
                rule_id,
                key: Key::of(f).masked(m),
            };
            if !parents.acquire(&pk, n) {
                b.stats.limited += 1;
                return Err(StateError::LimitReached);
            }
            kw |= KW_LIMITED | (m.bits() as u64) << KW_MASK_SHIFT;
        }
        let mut pos = h as usize & self.mask;
        while self.slots[pos].fields().live() {
            pos = (pos + 1) & self.mask;
        }
        let s = &self.slots[pos];
        let was = s.begin();
        s.store(&Fields {
            addr: key.addrs(),
            kw,
            rule: rule as u64 | (rule_id as u64) << 32,
            hash: h,
        });
        let tcp = tcp_fold(tcp_bits(key.proto, tcp_flags, Dir::Forward));
        let life = self.life.after(key.proto, tcp_seen(tcp << TCP_SHIFT));
        // One direction's flags cannot make half a handshake.
        let life = life.unwrap_or(self.life.syn);
        s.publish(was, tcp << TCP_SHIFT | exp_units(now.saturating_add(life)));
        b.live += 1;
        b.stats.created += 1;
        Ok(())
    }

    /// Looks at the next `max_work` states' worth of slots (the slots scaled by
    /// capacity, so `max_work >= cap` is every slot).
    pub(super) fn expire(
        &self,
        b: &mut Books,
        now: u64,
        max_work: usize,
        parents: &mut impl Limits,
    ) -> usize {
        let n = self.slots.len();
        let mut work = (max_work as u128 * n as u128)
            .div_ceil(self.cap.max(1) as u128)
            .min(n as u128) as usize;
        let mut dropped = 0;
        while work > 0 {
            let i = b.cursor;
            let s = &self.slots[i];
            if s.fields().live()
                && now >= expires(s.meta.load(Ordering::Relaxed))
                && self.remove_at(b, i, parents, Some(now))
            {
                // The backward shift may move a later state into slot `i`: look again.
                dropped += 1;
                continue;
            }
            b.cursor = if i + 1 == n { 0 } else { i + 1 };
            work -= 1;
        }
        b.stats.expired += dropped as u64;
        dropped
    }

    pub(super) fn remove_rule(
        &self,
        b: &mut Books,
        rule_id: u32,
        parents: &mut impl Limits,
    ) -> usize {
        let mut n = 0;
        let mut i = 0;
        while i < self.slots.len() {
            let f = self.slots[i].fields();
            if f.live() && f.rule_id() == rule_id {
                // As in `expire`: slot `i` may hold a later state now.
                self.remove_at(b, i, parents, None);
                n += 1;
                continue;
            }
            i += 1;
        }
        n
    }

    /// Empties every slot in turn. A lookup meanwhile may miss a state of a run
    /// whose start is already empty: the state is being flushed.
    pub(super) fn flush(&self, b: &mut Books, parents: &mut impl Limits) {
        for s in self.slots.iter() {
            let f = s.fields();
            if f.live() {
                if f.kw & KW_LIMITED != 0 {
                    parents.release(&parent_key(&f));
                }
                s.clear();
            }
        }
        b.live = 0;
    }

    /// Every live state is found from its home slot, no slot is being written, and
    /// the count is right.
    #[cfg(test)]
    pub(super) fn check(&self, b: &Books) {
        let used = self.slots.iter().filter(|s| s.fields().live()).count();
        assert_eq!(used, b.live);
        assert!(b.live <= self.cap);
        for (i, s) in self.slots.iter().enumerate() {
            assert_eq!(s.meta.load(Ordering::Relaxed) & SEQ_ONE, 0);
            let f = s.fields();
            if f.live() {
                let h = f.key().hash(self.seed);
                assert_eq!(h, f.hash);
                assert_eq!(self.find(&f.key(), h), Some(i));
            }
        }
    }

    /// The live states' fields.
    #[cfg(test)]
    pub(super) fn live_fields(&self) -> impl Iterator<Item = Fields> + '_ {
        self.slots.iter().map(|s| s.fields()).filter(|f| f.live())
    }

    /// Every state, for the writer: `ipfw -d list`.
    pub(super) fn states_into(&self, out: &mut Vec<(FlowId, StateHit, u64)>) {
        for s in self.slots.iter() {
            let f = s.fields();
            if f.live() {
                let hit = StateHit {
                    rule: f.rule as u32,
                    rule_id: f.rule_id(),
                    dir: Dir::Forward,
                };
                let meta = s.meta.load(Ordering::Relaxed);
                out.push((creator_key(&f).flow(), hit, expires(meta)));
            }
        }
    }
}

/// The dynamic states of one shard, with its own `limit` parents: `&mut self`, one
/// per worker (or behind the caller's lock). See the module doc for the semantics;
/// owning its table, it also drops the expired states its lookups find.
#[derive(Debug)]
pub struct StateTable {
    pub(super) table: Table,
    pub(super) books: Books,
    pub(super) parents: Parents,
}

impl StateTable {
    /// An empty table for `cfg.max_states` states, all allocated here.
    pub fn new(cfg: StateConfig) -> Self {
        StateTable {
            table: Table::new(&cfg),
            books: Books::default(),
            parents: Parents::new(cfg.max_states),
        }
    }

    /// The state of `f`'s flow, either way, as `check-state` asks; a hit folds the
    /// packet's TCP flags into the state and restarts its lifetime. An expired state
    /// is a miss, and is dropped. For an ICMP query or reply, `f` and `tcp_flags`
    /// are [`FlowId::icmp`]'s: a query the other way, or a reply the query's way,
    /// is a miss.
    #[inline]
    pub fn lookup(&mut self, f: &FlowId, tcp_flags: u8, now: u64) -> Option<StateHit> {
        let (key, swapped) = Key::canonical(f);
        let h = key.hash(self.table.seed);
        self.lookup_hashed(&key, swapped, h, tcp_flags, now)
    }

    #[inline]
    fn lookup_hashed(
        &mut self,
        key: &Key,
        swapped: bool,
        h: u64,
        tcp_flags: u8,
        now: u64,
    ) -> Option<StateHit> {
        match self.table.lookup_hashed(key, swapped, h, tcp_flags, now) {
            Found::Hit(hit) => {
                self.books.stats.hits += 1;
                Some(hit)
            }
            Found::Expired(pos) => {
                let (t, b) = (&self.table, &mut self.books);
                t.remove_at(b, pos, &mut self.parents, None);
                b.stats.expired += 1;
                None
            }
            Found::Miss => None,
        }
    }

    /// The state of `f`'s flow, either way, as an ICMP error quoting a packet of
    /// `f` asks: a hit changes nothing (the error does not keep the state alive).
    pub fn peek(&self, f: &FlowId, now: u64) -> Option<StateHit> {
        let (key, swapped) = Key::canonical(f);
        let h = key.hash(self.table.seed);
        self.table.peek_hashed(&key, swapped, h, now)
    }

    /// [`lookup`](Self::lookup) of each of `flows` in turn (with the TCP flags of the
    /// same index), results into `out`, up to the shortest of the three slices: the
    /// same results and effects, faster on a large table. Packets are taken in
    /// groups of [`BATCH`]: first every packet's hash and home slot, then the
    /// lookups proper. The first pass prefetches each home slot as soon as its hash
    /// is known, so a large table's cache and TLB misses overlap one another and
    /// the hashing (VPP's prefetching); the second pass finds them cached.
    pub fn lookup_batch(
        &mut self,
        flows: &[FlowId],
        tcp_flags: &[u8],
        now: u64,
        out: &mut [Option<StateHit>],
    ) {
        let n = flows.len().min(tcp_flags.len()).min(out.len());
        let mut start = 0;
        while start < n {
            let m = (n - start).min(BATCH);
            let mut keys = [(Key::default(), false, 0u64); BATCH];
            for (j, k) in keys[..m].iter_mut().enumerate() {
                let (key, s) = Key::canonical(&flows[start + j]);
                let h = key.hash(self.table.seed);
                self.table.prefetch(h);
                *k = (key, s, h);
            }
            for (j, &(k, s, h)) in keys[..m].iter().enumerate() {
                out[start + j] = self.lookup_hashed(&k, s, h, tcp_flags[start + j], now);
            }
            start += m;
        }
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
        let (t, b, p) = (&self.table, &mut self.books, &mut self.parents);
        t.insert(b, f, rule, rule_id, tcp_flags, None, now, p)
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
        let (t, b, p) = (&self.table, &mut self.books, &mut self.parents);
        t.insert(b, f, rule, rule_id, tcp_flags, Some((mask, limit)), now, p)
    }

    /// The incremental sweep: looks at the next `max_work` states' worth of slots
    /// (`max_work` times slots per state of capacity, continuing where the last
    /// call stopped, wrapping around) and drops the expired states; returns how
    /// many. `max_work >= capacity()` sweeps the whole table. A state that a
    /// deletion moves back past the sweep's position waits for its next round.
    pub fn expire(&mut self, now: u64, max_work: usize) -> usize {
        let (t, b, p) = (&self.table, &mut self.books, &mut self.parents);
        t.expire(b, now, max_work, p)
    }

    /// Drops the states rule `rule_id` created (the rule is deleted); returns how
    /// many. Walks every slot.
    pub fn remove_rule(&mut self, rule_id: u32) -> usize {
        let (t, b, p) = (&self.table, &mut self.books, &mut self.parents);
        t.remove_rule(b, rule_id, p)
    }

    /// Drops every state (`ipfw flush`).
    pub fn flush(&mut self) {
        let (t, b, p) = (&self.table, &mut self.books, &mut self.parents);
        t.flush(b, p);
        p.count.clear();
    }

    /// States held, expired ones not yet dropped included.
    pub fn len(&self) -> usize {
        self.books.live
    }

    pub fn is_empty(&self) -> bool {
        self.books.live == 0
    }

    /// States the table can hold (`max_states`).
    pub fn capacity(&self) -> usize {
        self.table.cap
    }

    pub fn stats(&self) -> StateStats {
        self.books.stats()
    }

    /// Every state held, as its creator's flow, its rule (direction
    /// [`Dir::Forward`]) and when it expires: `ipfw -d list`.
    pub fn states(&self) -> Vec<(FlowId, StateHit, u64)> {
        let mut v = Vec::with_capacity(self.len());
        self.table.states_into(&mut v);
        v
    }
}
