//! [`StateShards`]: the states of all workers, sharded by the symmetric flow hash,
//! read without a lock and written under one lock per shard.

use super::flow::Key;
use super::limits::{lock, Parents, SharedParents};
use super::table::{Books, Found, Table, BATCH};
use super::*;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// A value on lines of its own, so that what is written there (a lock, a thread's
/// counter) shares no line with what other threads read.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(super) struct Padded<T>(pub(super) T);

/// One shard: its slots, which every worker reads, and its writer's books behind
/// the shard's lock, on another line (a writer's lock and unlock do not disturb the
/// readers' copy of the table's header).
#[derive(Debug)]
pub(super) struct Shard {
    pub(super) table: Table,
    pub(super) books: Padded<Mutex<Books>>,
}

/// Hit counters per thread (64 of them, taken in turn by the threads that look
/// up): each is written by its thread only, with a plain load and store, and
/// summed when read — per-worker statistics, as everywhere on the fast path. Exact
/// while no two threads that look up at once share one (a 65th thread does).
struct Hits([Padded<AtomicU64>; HIT_LINES]);

const HIT_LINES: usize = 64;

static NEXT_HIT_LINE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static HIT_LINE: Cell<usize> = const { Cell::new(usize::MAX) };
}

impl Hits {
    fn new() -> Self {
        Hits(std::array::from_fn(|_| Padded::default()))
    }

    #[inline]
    fn add(&self, n: u64) {
        let line = HIT_LINE.with(|l| {
            if l.get() == usize::MAX {
                l.set(NEXT_HIT_LINE.fetch_add(1, Ordering::Relaxed) % HIT_LINES);
            }
            l.get()
        });
        let c = &self.0[line].0;
        c.store(c.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }

    fn sum(&self) -> u64 {
        self.0.iter().map(|c| c.0.load(Ordering::Relaxed)).sum()
    }
}

impl fmt::Debug for Hits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Hits").field(&self.sum()).finish()
    }
}

/// States sharded by [`symmetric_hash`] over `n` shards: workers share them, as the
/// two directions of a routed flow may be processed by different workers. Both
/// directions of a flow land in the same shard.
///
/// Lookups ([`lookup`](Self::lookup), [`lookup_batch`](Self::lookup_batch)) take
/// no lock, allocate nothing and write no line another worker reads (see the
/// `table` module: a hit writes its own state's line at most, and rarely); an
/// expired state they find is a miss, left for the sweep or for an insert of its
/// flow to drop, as FreeBSD 12 leaves it for `dyn_tick`. Writers (`insert`,
/// `insert_limited`, `expire`, `remove_rule`, `flush`) take their shard's lock.
///
/// `limit` parents are global, in one `Mutex<HashMap>` (a `limit` key's children
/// are spread over the shards by their flows): a `limit` child takes that lock when
/// it is created and when it is dropped; other states never do. Lock order: a
/// shard, then the parents.
#[derive(Debug)]
pub struct StateShards {
    pub(super) shards: Box<[Shard]>,
    pub(super) parents: Mutex<Parents>,
    seed: u64,
    hits: Hits,
}

impl StateShards {
    /// `shards` shards (at least 1) sharing `cfg.max_states` evenly (a shard is full
    /// at its share, so the whole may refuse a state a little before `max_states`).
    pub fn new(shards: usize, cfg: StateConfig) -> Self {
        let n = shards.max(1);
        let shards = (0..n)
            .map(|i| {
                let share = cfg.max_states / n + usize::from(i < cfg.max_states % n);
                // One hash picks the shard and the slot: the shard by its high
                // half, the slot by its low bits (below bit 32: a shard has at most
                // 2^31 slots), which the sharding leaves as mixed as ever. One hash a
                // lookup, not two.
                Shard {
                    table: Table::new(&StateConfig {
                        max_states: share,
                        ..cfg
                    }),
                    books: Padded(Mutex::new(Books::default())),
                }
            })
            .collect();
        StateShards {
            shards,
            parents: Mutex::new(Parents::new(cfg.max_states)),
            seed: cfg.seed,
            hits: Hits::new(),
        }
    }

    #[inline]
    fn shard_of(&self, f: &FlowId) -> &Shard {
        &self.shards[self.shard_of_hash(Key::canonical(f).0.hash(self.seed))]
    }

    /// The shard of a canonical key's hash with `self.seed` ([`symmetric_hash`] is
    /// its high half).
    #[inline]
    fn shard_of_hash(&self, h: u64) -> usize {
        (((h >> 32) * self.shards.len() as u64) >> 32) as usize
    }

    /// [`StateTable::lookup`] in the flow's shard, without a lock; an expired state
    /// is a miss, but stays until the sweep or an insert of its flow drops it.
    #[inline]
    pub fn lookup(&self, f: &FlowId, tcp_flags: u8, now: u64) -> Option<StateHit> {
        // The canonical key once, for the shard's hash and the table's.
        let (key, swapped) = Key::canonical(f);
        let h = key.hash(self.seed);
        let t = &self.shards[self.shard_of_hash(h)].table;
        debug_assert_eq!(t.seed, self.seed);
        match t.lookup_hashed(&key, swapped, h, tcp_flags, now) {
            Found::Hit(hit) => {
                self.hits.add(1);
                Some(hit)
            }
            Found::Miss | Found::Expired(_) => None,
        }
    }

    /// [`StateTable::peek`] in the flow's shard, without a lock: an ICMP error's
    /// lookup of the flow it quotes, which changes nothing.
    #[inline]
    pub fn peek(&self, f: &FlowId, now: u64) -> Option<StateHit> {
        let (key, swapped) = Key::canonical(f);
        let h = key.hash(self.seed);
        let hit = self.shards[self.shard_of_hash(h)]
            .table
            .peek_hashed(&key, swapped, h, now);
        if hit.is_some() {
            self.hits.add(1);
        }
        hit
    }

    /// [`lookup`](Self::lookup) of each of `flows` in turn, as
    /// [`StateTable::lookup_batch`] makes them: in groups of [`BATCH`], every
    /// packet's shard, hash and home slot first, then the lookups, so that the
    /// group's cache misses overlap (no lock in between to serialize them). The
    /// results and effects are those of `lookup` of each packet in turn; the hits
    /// are counted once per call.
    pub fn lookup_batch(
        &self,
        flows: &[FlowId],
        tcp_flags: &[u8],
        now: u64,
        out: &mut [Option<StateHit>],
    ) {
        let n = flows.len().min(tcp_flags.len()).min(out.len());
        self.lookup_keys(
            n,
            |j| Key::canonical(&flows[j]),
            |j| tcp_flags[j],
            now,
            |j, h| out[j] = h,
        );
    }

    /// [`lookup_batch`](Self::lookup_batch) of `n` IPv4 flows given by `flow(j)`
    /// as (source, destination, source port, destination port, protocol), the
    /// addresses as words in host order, with TCP flags `tcp_flags(j)`; each result
    /// goes to `put(j, …)`. The same lookups, without building a [`FlowId`] of each
    /// (a vector evaluator reads the flows from its columns).
    #[inline]
    pub fn lookup_batch_v4(
        &self,
        n: usize,
        flow: impl Fn(usize) -> (u32, u32, u16, u16, u8),
        tcp_flags: impl Fn(usize) -> u8,
        now: u64,
        put: impl FnMut(usize, Option<StateHit>),
    ) {
        self.lookup_keys(
            n,
            |j| {
                let (s, d, sp, dp, proto) = flow(j);
                Key::canonical_v4(s, d, sp, dp, proto)
            },
            tcp_flags,
            now,
            put,
        );
    }

    /// The batched lookups of `n` canonical keys (see `lookup_batch`).
    #[inline(always)]
    fn lookup_keys(
        &self,
        n: usize,
        key_of: impl Fn(usize) -> (Key, bool),
        tcp_flags: impl Fn(usize) -> u8,
        now: u64,
        mut put: impl FnMut(usize, Option<StateHit>),
    ) {
        let mut hits = 0;
        let mut start = 0;
        while start < n {
            let m = (n - start).min(BATCH);
            let mut keys = [(Key::default(), false, 0u64, 0usize); BATCH];
            // Each home slot prefetched as soon as its hash is known: the misses
            // of the group in flight together while the rest is hashed (a load
            // here would hold the core's window until its line came).
            for (j, k) in keys[..m].iter_mut().enumerate() {
                let (key, s) = key_of(start + j);
                let h = key.hash(self.seed);
                let sh = self.shard_of_hash(h);
                self.shards[sh].table.prefetch(h);
                *k = (key, s, h, sh);
            }
            for (j, &(k, s, h, sh)) in keys[..m].iter().enumerate() {
                let t = &self.shards[sh].table;
                let got = match t.lookup_hashed(&k, s, h, tcp_flags(start + j), now) {
                    Found::Hit(hit) => {
                        hits += 1;
                        Some(hit)
                    }
                    Found::Miss | Found::Expired(_) => None,
                };
                put(start + j, got);
            }
            start += m;
        }
        if hits > 0 {
            self.hits.add(hits);
        }
    }

    /// [`StateTable::insert`] in the flow's shard, under its lock.
    pub fn insert(
        &self,
        f: &FlowId,
        rule: u32,
        rule_id: u32,
        tcp_flags: u8,
        now: u64,
    ) -> Result<(), StateError> {
        let mut p = SharedParents(&self.parents);
        let sh = self.shard_of(f);
        let mut b = lock(&sh.books.0);
        sh.table
            .insert(&mut b, f, rule, rule_id, tcp_flags, None, now, &mut p)
    }

    /// [`StateTable::insert_limited`]; the limit counts the children in all shards.
    #[allow(clippy::too_many_arguments)]
    pub fn insert_limited(
        &self,
        f: &FlowId,
        rule: u32,
        rule_id: u32,
        tcp_flags: u8,
        mask: LimitMask,
        limit: u32,
        now: u64,
    ) -> Result<(), StateError> {
        let mut p = SharedParents(&self.parents);
        let lim = Some((mask, limit));
        let sh = self.shard_of(f);
        let mut b = lock(&sh.books.0);
        sh.table
            .insert(&mut b, f, rule, rule_id, tcp_flags, lim, now, &mut p)
    }

    /// How many shards the states are spread over.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// [`StateTable::expire`] in each shard in turn, each under its lock; returns
    /// how many it dropped. A shard that holds no state is passed over: its sweep
    /// would read `max_work_per_shard` states' worth of empty slots (cache misses
    /// for nothing, a stateless ruleset's whole table every few sweeps).
    pub fn expire(&self, now: u64, max_work_per_shard: usize) -> usize {
        let mut p = SharedParents(&self.parents);
        self.shards
            .iter()
            .map(|s| {
                let mut b = lock(&s.books.0);
                if b.live == 0 {
                    return 0;
                }
                s.table.expire(&mut b, now, max_work_per_shard, &mut p)
            })
            .sum()
    }

    pub fn remove_rule(&self, rule_id: u32) -> usize {
        let mut p = SharedParents(&self.parents);
        self.shards
            .iter()
            .map(|s| s.table.remove_rule(&mut lock(&s.books.0), rule_id, &mut p))
            .sum()
    }

    /// Drops every state, shard by shard (a state created meanwhile in a shard
    /// already flushed stays, with its parent).
    pub fn flush(&self) {
        let mut p = SharedParents(&self.parents);
        for s in self.shards.iter() {
            s.table.flush(&mut lock(&s.books.0), &mut p);
        }
    }

    /// States held, expired ones not yet dropped included.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(&s.books.0).live).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// States the shards can hold together (`max_states`).
    pub fn capacity(&self) -> usize {
        self.shards.iter().map(|s| s.table.cap).sum()
    }

    /// The shards' counters summed, and the hits of every thread.
    pub fn stats(&self) -> StateStats {
        let mut t = StateStats::default();
        for s in self.shards.iter() {
            t.add(&lock(&s.books.0).stats());
        }
        t.hits = self.hits.sum();
        t
    }

    /// Every state held, shard by shard (each under its lock): `ipfw -d list`.
    pub fn states(&self) -> Vec<(FlowId, StateHit, u64)> {
        let mut v = Vec::new();
        for s in self.shards.iter() {
            let _b = lock(&s.books.0);
            s.table.states_into(&mut v);
        }
        v
    }
}
