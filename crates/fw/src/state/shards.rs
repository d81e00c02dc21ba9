//! [`StateShards`]: the states of all workers, sharded by the symmetric flow hash.

use super::flow::{mix64, Key, K1};
use super::limits::{lock, Parents, SharedParents};
use super::table::{Table, BATCH};
use super::*;
use std::sync::{Mutex, MutexGuard};

/// A shard's lock on a line of its own, so workers taking two shards do not share it.
#[derive(Debug)]
#[repr(align(128))]
pub(super) struct Shard(pub(super) Mutex<Table>);

/// States sharded by [`symmetric_hash`] over `n` shards, each behind its own `Mutex`:
/// workers share them, as the two directions of a routed flow may be processed by
/// different workers. Both directions of a flow land in the same shard.
///
/// `limit` parents are global, in one `Mutex<HashMap>` (a `limit` key's children
/// are spread over the shards by their flows): a `limit` child takes that lock when
/// it is created and when it is dropped; other states never do. Lock order: shards
/// (several only in ascending index order, in `lookup_batch`), then the parents.
#[derive(Debug)]
pub struct StateShards {
    pub(super) shards: Box<[Shard]>,
    pub(super) parents: Mutex<Parents>,
    pub(super) seed: u64,
}

impl StateShards {
    /// `shards` shards (at least 1) sharing `cfg.max_states` evenly (a shard is full
    /// at its share, so the whole may refuse a state a little before `max_states`).
    pub fn new(shards: usize, cfg: StateConfig) -> Self {
        let n = shards.max(1);
        let shards = (0..n)
            .map(|i| {
                let share = cfg.max_states / n + usize::from(i < cfg.max_states % n);
                // Each shard's index hash with its own seed: its flows all share the
                // shard-selecting bits of the sharding hash.
                Shard(Mutex::new(Table::new(&StateConfig {
                    max_states: share,
                    seed: mix64(cfg.seed ^ (i as u64 + 1).wrapping_mul(K1)),
                    ..cfg
                })))
            })
            .collect();
        StateShards {
            shards,
            parents: Mutex::new(Parents::new(cfg.max_states)),
            seed: cfg.seed,
        }
    }

    #[inline]
    fn shard_of(&self, f: &FlowId) -> usize {
        self.shard_of_hash(Key::canonical(f).0.hash(self.seed))
    }

    /// The shard of a canonical key's hash with `self.seed` ([`symmetric_hash`] is
    /// its high half).
    #[inline]
    fn shard_of_hash(&self, h: u64) -> usize {
        (((h >> 32) * self.shards.len() as u64) >> 32) as usize
    }

    #[inline]
    fn shard(&self, f: &FlowId) -> MutexGuard<'_, Table> {
        lock(&self.shards[self.shard_of(f)].0)
    }

    /// [`StateTable::lookup`] in the flow's shard.
    #[inline]
    pub fn lookup(&self, f: &FlowId, tcp_flags: u8, now: u64) -> Option<StateHit> {
        // The canonical key once, for the shard's hash and the table's.
        let (key, swapped) = Key::canonical(f);
        let mut t = lock(&self.shards[self.shard_of_hash(key.hash(self.seed))].0);
        let h = key.hash(t.seed);
        t.lookup_hashed(
            &key,
            swapped,
            h,
            tcp_flags,
            now,
            &mut SharedParents(&self.parents),
        )
    }

    /// [`StateTable::lookup_batch`] over the shards. Each group of [`BATCH`] packets
    /// takes the locks of the shards it needs at once, in ascending order, and
    /// makes the table's two passes over the whole group: a lock is a full
    /// barrier on x86, so reads issued between two of them are all that overlap
    /// (a lock per packet serializes every packet's cache misses). The results and
    /// effects are those of [`lookup`](Self::lookup) of each packet in turn.
    pub fn lookup_batch(
        &self,
        flows: &[FlowId],
        tcp_flags: &[u8],
        now: u64,
        out: &mut [Option<StateHit>],
    ) {
        let n = flows.len().min(tcp_flags.len()).min(out.len());
        let mut p = SharedParents(&self.parents);
        let mut start = 0;
        while start < n {
            let m = (n - start).min(BATCH);
            // Each packet's canonical key, its shard, and the shards needed, sorted.
            let mut keys = [(Key::default(), false, 0u64); BATCH];
            let mut shard = [0usize; BATCH];
            let mut need = [0usize; BATCH];
            let mut nn = 0;
            for j in 0..m {
                let (k, s) = Key::canonical(&flows[start + j]);
                let sh = self.shard_of_hash(k.hash(self.seed));
                keys[j] = (k, s, 0);
                shard[j] = sh;
                let at = need[..nn].partition_point(|&x| x < sh);
                if at == nn || need[at] != sh {
                    need.copy_within(at..nn, at + 1);
                    need[at] = sh;
                    nn += 1;
                }
            }
            let mut guards: [Option<MutexGuard<'_, Table>>; BATCH] = Default::default();
            for (g, &sh) in guards.iter_mut().zip(&need[..nn]) {
                *g = Some(lock(&self.shards[sh].0));
            }
            let mut slot = [0usize; BATCH];
            for j in 0..m {
                slot[j] = need[..nn].partition_point(|&x| x < shard[j]);
            }
            // Pass 1: hashes, and each home slot read; its misses overlap.
            let mut touched = 0u64;
            for j in 0..m {
                if let Some(t) = &guards[slot[j]] {
                    let h = keys[j].0.hash(t.seed);
                    keys[j].2 = h;
                    touched ^= t.touch(h);
                }
            }
            std::hint::black_box(touched);
            // Pass 2: the lookups proper, in the packets' order.
            for j in 0..m {
                if let Some(t) = &mut guards[slot[j]] {
                    let (k, s, h) = keys[j];
                    out[start + j] = t.lookup_hashed(&k, s, h, tcp_flags[start + j], now, &mut p);
                }
            }
            start += m;
        }
    }

    /// [`StateTable::insert`] in the flow's shard.
    pub fn insert(
        &self,
        f: &FlowId,
        rule: u32,
        rule_id: u32,
        tcp_flags: u8,
        now: u64,
    ) -> Result<(), StateError> {
        let mut p = SharedParents(&self.parents);
        self.shard(f)
            .insert(f, rule, rule_id, tcp_flags, None, now, &mut p)
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
        self.shard(f)
            .insert(f, rule, rule_id, tcp_flags, lim, now, &mut p)
    }

    /// How many shards the states are spread over.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// [`StateTable::expire`] in each shard in turn; returns how many it dropped.
    pub fn expire(&self, now: u64, max_work_per_shard: usize) -> usize {
        let mut p = SharedParents(&self.parents);
        self.shards
            .iter()
            .map(|s| lock(&s.0).expire(now, max_work_per_shard, &mut p))
            .sum()
    }

    pub fn remove_rule(&self, rule_id: u32) -> usize {
        let mut p = SharedParents(&self.parents);
        self.shards
            .iter()
            .map(|s| lock(&s.0).remove_rule(rule_id, &mut p))
            .sum()
    }

    /// Drops every state, shard by shard (a state created meanwhile in a shard
    /// already flushed stays, with its parent).
    pub fn flush(&self) {
        let mut p = SharedParents(&self.parents);
        for s in self.shards.iter() {
            lock(&s.0).flush(&mut p);
        }
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(&s.0).live).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// States the shards can hold together (`max_states`).
    pub fn capacity(&self) -> usize {
        self.shards.iter().map(|s| lock(&s.0).cap).sum()
    }

    /// The shards' counters summed.
    pub fn stats(&self) -> StateStats {
        let mut t = StateStats::default();
        for s in self.shards.iter() {
            t.add(&lock(&s.0).stats());
        }
        t
    }

    /// Every state held, shard by shard: `ipfw -d list`.
    pub fn states(&self) -> Vec<(FlowId, StateHit, u64)> {
        let mut v = Vec::new();
        for s in self.shards.iter() {
            lock(&s.0).states_into(&mut v);
        }
        v
    }
}
