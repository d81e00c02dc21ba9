//! Dynamic states: what `keep-state`, `check-state` and `limit` remember, after
//! FreeBSD's `sys/netpfil/ipfw/ip_fw_dynamic.c`.
//!
//! What it owns: the states of one shard ([`StateTable`], `&mut self`, one per worker
//! or behind a lock) or of all shards ([`StateShards`], a `Mutex` per shard), the
//! `limit` parents and the counters. What it may call: `std` only. The rule evaluator
//! decides when to look up (`check-state`, and implicitly the first `keep-state` or
//! `limit` rule) and when to install; this module never sees a packet, only its
//! [`FlowId`] and its TCP flags.
//!
//! FreeBSD semantics followed:
//! - A state matches its flow both ways: [`Dir::Forward`] for packets going the way
//!   of the one that created it, [`Dir::Reverse`] for the answers.
//! - Lifetimes are `net.inet.ip.fw.dyn_*` ([`StateConfig::default`]); each packet that
//!   matches a state restarts its lifetime, chosen as `dyn_update_tcp_state` does from
//!   the TCP flags seen so far each way: SYN one way only, `dyn_syn_lifetime`; SYN
//!   both ways (and at most one FIN), `dyn_ack_lifetime`; SYN and FIN both ways,
//!   `dyn_fin_lifetime`; anything else (an RST either way, a state created by a
//!   packet without SYN, "or if we use keep-state the wrong way"),
//!   `dyn_rst_lifetime`. UDP and UDP-Lite: `dyn_udp_lifetime`; other protocols
//!   (ICMP...): `dyn_short_lifetime`. Today's FreeBSD also waits for an ACK each way
//!   (`ACK_FWD | ACK_REV`) before it gives the established lifetime; we are not
//!   given ACK numbers, so the second SYN does it, as ipfw did before it tracked
//!   them.
//! - A state is expired when `now >= expires`; an expired state is a miss, and is
//!   dropped by the lookup that finds it, by an insert of its flow, or by the
//!   incremental sweep ([`StateTable::expire`]), FreeBSD's `dyn_tick`.
//! - `limit {src-addr|src-port|dst-addr|dst-port} N`: a parent per (rule, masked key
//!   of the creating packet) counts its live children; a new child is refused
//!   ([`StateError::LimitReached`]) when the count is `N`. A child releases its
//!   parent when it is dropped (so an expired child still counts until a lookup or
//!   a sweep drops it, as in FreeBSD, where the periodic `dyn_tick` frees
//!   children); a parent with no children is dropped at once.
//! - A full table refuses new states ([`StateError::Full`], counted), as FreeBSD does
//!   when `dyn_count >= dyn_max`: no eviction of live states.
//!
//! Bounds and layout: the entries (one 64-byte line each) sit in the slots of an
//! open-addressing hash allocated at construction (linear probing from the hash's
//! low bits, a power of two of slots, at most two-thirds full at `max_states`,
//! deletions by backward shift, so no tombstones). The key is the flow in a
//! canonical order, so both directions hash to the same slot. A lookup reads the
//! entry's own line (and the next ones of its run, on a collision): no index to go
//! through first, so one dependent cache miss, not two, on a table larger than the
//! caches; [`StateTable::lookup_batch`] issues those reads for a vector of packets
//! before it uses them, so that the misses overlap. Lookups, inserts, sweeps,
//! `remove_rule` and `flush` never allocate. Only `limit` parents live in a
//! `HashMap` (sized for 1,024 parents up front; it grows, on `insert_limited` only,
//! up to one parent per live state, its natural bound). Memory: 1.5 to 3 slots of
//! 64 bytes per state of `max_states` (the slots are a power of two): 128 MiB for
//! the 1,251,024 of `mpstack bench fw`, about 107 bytes a state.
//!
//! [`StateShards`] splits `max_states` evenly over its shards (a shard is full at
//! its share); a flow's shard is chosen by [`symmetric_hash`], so both directions
//! meet in one shard. `limit` parents are shared by all shards in one
//! `Mutex<HashMap>`, since a key's children are spread over the shards by their
//! flows; only `limit` children take that lock (after their shard's, never the
//! other way round).
//!
//! Time is a `u64` of nanoseconds from any origin, the caller's clock; it must not go
//! backwards for one table.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

const TH_FIN: u8 = 0x01;
const TH_SYN: u8 = 0x02;
const TH_RST: u8 = 0x04;

/// TCP flags seen, forward in the low byte and reverse in the high byte (FreeBSD's
/// `state |= dir == MATCH_FORWARD ? flags : flags << 8`).
const SYN_FWD: u16 = TH_SYN as u16;
const FIN_FWD: u16 = TH_FIN as u16;
const FIN_REV: u16 = FIN_FWD << 8;
const BOTH_SYN: u16 = SYN_FWD | SYN_FWD << 8;
const BOTH_FIN: u16 = FIN_FWD | FIN_REV;

const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
const IPPROTO_UDPLITE: u8 = 136;

/// A packet's flow as the rules see it. Ports are 0 for protocols without them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowId {
    pub proto: u8,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
}

impl FlowId {
    /// The same flow, the other way.
    pub fn reversed(&self) -> FlowId {
        FlowId {
            proto: self.proto,
            src: self.dst,
            dst: self.src,
            sport: self.dport,
            dport: self.sport,
        }
    }
}

/// Which way a packet goes through a state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    /// The way of the packet that created the state.
    Forward,
    /// The other way (the answers).
    Reverse,
}

/// A lookup's match: the rule that created the state (whose action ipfw then
/// takes, as `check-state` does) and the packet's direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateHit {
    /// The creating rule's number, e.g. 100.
    pub rule: u32,
    /// The creating rule's stable id (rule numbers may be shared).
    pub rule_id: u32,
    pub dir: Dir,
}

/// Which parts of the creating packet's flow a `limit` counts by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LimitMask {
    pub src_addr: bool,
    pub src_port: bool,
    pub dst_addr: bool,
    pub dst_port: bool,
}

impl LimitMask {
    fn bits(self) -> u8 {
        self.src_addr as u8
            | (self.src_port as u8) << 1
            | (self.dst_addr as u8) << 2
            | (self.dst_port as u8) << 3
    }

    fn from_bits(b: u8) -> Self {
        LimitMask {
            src_addr: b & 1 != 0,
            src_port: b & 2 != 0,
            dst_addr: b & 4 != 0,
            dst_port: b & 8 != 0,
        }
    }
}

/// How a [`StateTable`] or [`StateShards`] is built; the default is FreeBSD's
/// `net.inet.ip.fw.dyn_*` sysctls.
#[derive(Clone, Copy, Debug)]
pub struct StateConfig {
    /// States held at most (`dyn_max`, 16384); all their memory is allocated up front.
    pub max_states: usize,
    /// SYN seen one way only (`dyn_syn_lifetime`, 20 s).
    pub syn_lifetime: Duration,
    /// SYN seen both ways: established (`dyn_ack_lifetime`, 300 s).
    pub ack_lifetime: Duration,
    /// SYN and FIN seen both ways (`dyn_fin_lifetime`, 2 s).
    pub fin_lifetime: Duration,
    /// An RST, or any other combination (`dyn_rst_lifetime`, 1 s).
    pub rst_lifetime: Duration,
    /// UDP (`dyn_udp_lifetime`, 10 s).
    pub udp_lifetime: Duration,
    /// Other protocols (`dyn_short_lifetime`, 5 s).
    pub short_lifetime: Duration,
    /// The flow hash's seed; pick it at random so that slots cannot be aimed at.
    pub seed: u64,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig {
            max_states: 16384,
            syn_lifetime: Duration::from_secs(20),
            ack_lifetime: Duration::from_secs(300),
            fin_lifetime: Duration::from_secs(2),
            rst_lifetime: Duration::from_secs(1),
            udp_lifetime: Duration::from_secs(10),
            short_lifetime: Duration::from_secs(5),
            seed: 0x6970_6677_5f64_796e,
        }
    }
}

/// Why a state was not created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateError {
    /// `max_states` states are held (FreeBSD: "Too many dynamic rules").
    Full,
    /// The `limit` of the rule's masked key is reached.
    LimitReached,
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StateError::Full => "too many dynamic states",
            StateError::LimitReached => "limit of states reached",
        })
    }
}

impl std::error::Error for StateError {}

/// Counters. `states` is a gauge (held now, expired ones not yet dropped included);
/// `expired` counts states dropped for their age (by a lookup, an insert or a sweep),
/// not those of a removed rule or a flush; `full` and `limited` count refused inserts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StateStats {
    pub states: u64,
    pub created: u64,
    pub expired: u64,
    pub full: u64,
    pub limited: u64,
    pub hits: u64,
}

impl StateStats {
    fn add(&mut self, o: &StateStats) {
        self.states += o.states;
        self.created += o.created;
        self.expired += o.expired;
        self.full += o.full;
        self.limited += o.limited;
        self.hits += o.hits;
    }
}

/// A flow in a fixed-size form: addresses as two `u64` (IPv4 in the low word), so
/// that keys compare and hash as plain words.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
struct Key {
    a: [u64; 2],
    b: [u64; 2],
    ap: u16,
    bp: u16,
    proto: u8,
    v6: bool,
}

fn addr_words(a: IpAddr, v6: bool) -> [u64; 2] {
    match a {
        IpAddr::V4(a) if !v6 => [0, u32::from(a) as u64],
        // A flow mixing families does not happen; if it did, the IPv4 side is taken
        // as its IPv4-mapped IPv6 address.
        IpAddr::V4(a) => split(u128::from(a.to_ipv6_mapped())),
        IpAddr::V6(a) => split(u128::from(a)),
    }
}

fn split(x: u128) -> [u64; 2] {
    [(x >> 64) as u64, x as u64]
}

fn join(w: [u64; 2]) -> u128 {
    (w[0] as u128) << 64 | w[1] as u128
}

impl Key {
    /// The flow as given (source first).
    fn of(f: &FlowId) -> Key {
        let v6 = f.src.is_ipv6() || f.dst.is_ipv6();
        Key {
            a: addr_words(f.src, v6),
            b: addr_words(f.dst, v6),
            ap: f.sport,
            bp: f.dport,
            proto: f.proto,
            v6,
        }
    }

    /// The flow in canonical order (the lesser endpoint first), and whether that is
    /// the reverse of `f`'s order. Both directions of a flow give the same key.
    #[inline]
    fn canonical(f: &FlowId) -> (Key, bool) {
        let k = Key::of(f);
        if (k.a, k.ap) > (k.b, k.bp) {
            (k.swapped(), true)
        } else {
            (k, false)
        }
    }

    fn swapped(&self) -> Key {
        Key {
            a: self.b,
            b: self.a,
            ap: self.bp,
            bp: self.ap,
            ..*self
        }
    }

    fn flow(&self) -> FlowId {
        let ip = |w: [u64; 2]| {
            if self.v6 {
                IpAddr::V6(Ipv6Addr::from(join(w)))
            } else {
                IpAddr::V4(Ipv4Addr::from(w[1] as u32))
            }
        };
        FlowId {
            proto: self.proto,
            src: ip(self.a),
            dst: ip(self.b),
            sport: self.ap,
            dport: self.bp,
        }
    }

    /// The parts `mask` keeps (the key is in the creating packet's order).
    fn masked(&self, mask: LimitMask) -> Key {
        Key {
            a: if mask.src_addr { self.a } else { [0; 2] },
            b: if mask.dst_addr { self.b } else { [0; 2] },
            ap: if mask.src_port { self.ap } else { 0 },
            bp: if mask.dst_port { self.bp } else { 0 },
            proto: self.proto,
            v6: self.v6,
        }
    }

    /// A seeded 64-bit hash (Murmur3's finalizer over the words; two rounds for IPv4,
    /// five for IPv6).
    #[inline]
    fn hash(&self, seed: u64) -> u64 {
        let ports = (self.ap as u64) << 32 | (self.bp as u64) << 16 | (self.proto as u64) << 8;
        if self.v6 {
            let mut h = mix64(seed ^ ports ^ 1);
            for w in [self.a[0], self.a[1], self.b[0], self.b[1]] {
                h = mix64(h.wrapping_add(K1) ^ w);
            }
            h
        } else {
            let h = mix64(seed ^ (self.a[1] << 32 | self.b[1]));
            mix64(h.wrapping_add(K1) ^ ports)
        }
    }
}

const K1: u64 = 0x9e37_79b9_7f4a_7c15;

#[inline]
fn mix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// Symmetric flow hash: the same for both directions of a flow (seeded). Used to
/// shard states over workers.
#[inline]
pub fn symmetric_hash(f: &FlowId, seed: u64) -> u32 {
    (Key::canonical(f).0.hash(seed) >> 32) as u32
}

/// `Entry::bits`.
const LIVE: u8 = 1;
/// The creating packet went the reverse of the canonical order.
const SWAPPED: u8 = 2;
/// The state is a `limit` child; `Entry::mask` says its parent's key.
const LIMITED: u8 = 4;

/// One state: one cache line.
#[derive(Clone, Copy, Debug, Default)]
#[repr(align(64))]
struct Entry {
    key: Key,
    expires: u64,
    rule: u32,
    rule_id: u32,
    /// The low half of the key's hash: where its probe starts.
    hash_lo: u32,
    /// TCP flags seen (SYN, FIN, RST), forward in the low byte.
    tcp: u16,
    bits: u8,
    mask: u8,
}

impl Entry {
    fn live(&self) -> bool {
        self.bits & LIVE != 0
    }

    /// The key in the creating packet's order.
    fn creator_key(&self) -> Key {
        if self.bits & SWAPPED != 0 {
            self.key.swapped()
        } else {
            self.key
        }
    }

    fn parent_key(&self) -> ParentKey {
        ParentKey {
            rule_id: self.rule_id,
            key: self.creator_key().masked(LimitMask::from_bits(self.mask)),
        }
    }
}

/// Lifetimes in nanoseconds.
#[derive(Clone, Copy, Debug)]
struct Lifetimes {
    syn: u64,
    ack: u64,
    fin: u64,
    rst: u64,
    udp: u64,
    short: u64,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Lifetimes {
    fn of(cfg: &StateConfig) -> Self {
        Lifetimes {
            syn: nanos(cfg.syn_lifetime),
            ack: nanos(cfg.ack_lifetime),
            fin: nanos(cfg.fin_lifetime),
            rst: nanos(cfg.rst_lifetime),
            udp: nanos(cfg.udp_lifetime),
            short: nanos(cfg.short_lifetime),
        }
    }

    /// ip_fw_dynamic.c, `dyn_update_tcp_state` and `dyn_update_proto_state`: the
    /// lifetime after a packet, from the TCP flags seen so far (`tcp`).
    #[inline]
    fn after(&self, proto: u8, tcp: u16) -> u64 {
        match proto {
            IPPROTO_TCP => match tcp {
                SYN_FWD => self.syn,
                BOTH_SYN => self.ack,
                t if t == BOTH_SYN | FIN_FWD || t == BOTH_SYN | FIN_REV => self.ack,
                t if t == BOTH_SYN | BOTH_FIN => self.fin,
                _ => self.rst,
            },
            IPPROTO_UDP | IPPROTO_UDPLITE => self.udp,
            _ => self.short,
        }
    }
}

/// A `limit` parent's key: the creating rule and the masked flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ParentKey {
    rule_id: u32,
    key: Key,
}

/// Parents sized up front for this many; beyond, the map grows (inserts only).
const PARENTS_UP_FRONT: usize = 1024;

/// `limit` parents: live children per (rule, masked key). A parent exists only while
/// it has children, so there are never more parents than states.
struct Parents {
    count: HashMap<ParentKey, u32>,
}

impl fmt::Debug for Parents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Parents")
            .field("parents", &self.count.len())
            .finish()
    }
}

impl Parents {
    fn new(max_states: usize) -> Self {
        Parents {
            count: HashMap::with_capacity(max_states.min(PARENTS_UP_FRONT)),
        }
    }
}

/// Where a table finds its `limit` parents: its own, or shared by all shards.
trait Limits {
    /// Counts one more child of `k`, unless it has `limit` already.
    fn acquire(&mut self, k: &ParentKey, limit: u32) -> bool;
    /// Counts one child fewer.
    fn release(&mut self, k: &ParentKey);
}

impl Limits for Parents {
    fn acquire(&mut self, k: &ParentKey, limit: u32) -> bool {
        match self.count.get_mut(k) {
            Some(n) if *n >= limit => false,
            Some(n) => {
                *n += 1;
                true
            }
            None if limit == 0 => false,
            None => {
                self.count.insert(*k, 1);
                true
            }
        }
    }

    fn release(&mut self, k: &ParentKey) {
        if let Some(n) = self.count.get_mut(k) {
            *n -= 1;
            if *n == 0 {
                self.count.remove(k);
            }
        }
    }
}

/// The shards' parents, locked for each acquire or release (only `limit` children
/// take the lock). Lock order: a shard, then the parents.
struct SharedParents<'a>(&'a Mutex<Parents>);

impl Limits for SharedParents<'_> {
    fn acquire(&mut self, k: &ParentKey, limit: u32) -> bool {
        lock(self.0).acquire(k, limit)
    }

    fn release(&mut self, k: &ParentKey) {
        lock(self.0).release(k)
    }
}

/// A poisoned lock still guards consistent data: every update here completes
/// before anything that may panic.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The states of one shard, without their `limit` parents (the caller's).
struct Table {
    life: Lifetimes,
    seed: u64,
    /// The entries in their open-addressing slots (linear probing from the hash's
    /// low bits, a power of two, at most two-thirds full): a lookup reads the
    /// entry's own line, with no index to go through first.
    slots: Vec<Entry>,
    mask: usize,
    /// States held at most.
    cap: usize,
    live: usize,
    /// The next slot the sweep looks at.
    cursor: usize,
    stats: StateStats,
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
    fn new(cfg: &StateConfig) -> Self {
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
    fn find(&self, key: &Key, h: u64) -> Option<usize> {
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
    fn remove_at(&mut self, pos: usize, parents: &mut impl Limits) {
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
    fn refresh(&mut self, pos: usize, dir: Dir, tcp_flags: u8, now: u64) {
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
    fn lookup(
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
    fn lookup_hashed(
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
    fn touch(&self, h: u64) -> u64 {
        self.slots[h as usize & self.mask].expires
    }

    /// Lookups in groups of [`BATCH`]: first every packet's hash and home slot, then
    /// the lookups proper. The first pass only reads, and its reads do not depend on
    /// one another, so a large table's cache and TLB misses overlap (VPP's
    /// prefetching, with plain loads: no `unsafe` here); the second pass finds them
    /// cached, and is exactly [`lookup`](Self::lookup) of each packet in turn.
    fn lookup_batch(
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
    fn insert(
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
    fn expire(&mut self, now: u64, max_work: usize, parents: &mut impl Limits) -> usize {
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

    fn remove_rule(&mut self, rule_id: u32, parents: &mut impl Limits) -> usize {
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

    fn flush(&mut self, parents: &mut impl Limits) {
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
    fn check(&self) {
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

    fn stats(&self) -> StateStats {
        StateStats {
            states: self.live as u64,
            ..self.stats
        }
    }

    fn states_into(&self, out: &mut Vec<(FlowId, StateHit, u64)>) {
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
    table: Table,
    parents: Parents,
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

/// A shard's lock on a line of its own, so workers taking two shards do not share it.
#[derive(Debug)]
#[repr(align(128))]
struct Shard(Mutex<Table>);

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
    shards: Box<[Shard]>,
    parents: Mutex<Parents>,
    seed: u64,
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SEC: u64 = 1_000_000_000;
    const SYN: u8 = TH_SYN;
    const ACK: u8 = 0x10;
    const SYN_ACK: u8 = TH_SYN | ACK;
    const FIN_ACK: u8 = TH_FIN | ACK;
    const RST: u8 = TH_RST;

    fn table(max_states: usize) -> StateTable {
        StateTable::new(StateConfig {
            max_states,
            ..StateConfig::default()
        })
    }

    fn v4(a: u32) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | a))
    }

    fn tcp(c: u32, s: u32, cport: u16) -> FlowId {
        FlowId {
            proto: IPPROTO_TCP,
            src: v4(c),
            dst: v4(s),
            sport: cport,
            dport: 80,
        }
    }

    fn udp(c: u32, s: u32, cport: u16) -> FlowId {
        FlowId {
            proto: IPPROTO_UDP,
            dport: 53,
            ..tcp(c, s, cport)
        }
    }

    fn hit(rule: u32, rule_id: u32, dir: Dir) -> Option<StateHit> {
        Some(StateHit { rule, rule_id, dir })
    }

    fn expires(t: &StateTable) -> u64 {
        assert_eq!(t.len(), 1);
        t.states()[0].2
    }

    #[test]
    fn a_state_matches_its_flow_both_ways() {
        let mut t = table(64);
        let f = tcp(1, 2, 40000);
        assert_eq!(t.lookup(&f, SYN, 0), None);
        t.insert(&f, 100, 7, SYN, 0).unwrap();
        assert_eq!(
            t.lookup(&f.reversed(), SYN_ACK, SEC),
            hit(100, 7, Dir::Reverse)
        );
        assert_eq!(t.lookup(&f, ACK, SEC), hit(100, 7, Dir::Forward));
        // Another port, another protocol, another host: other flows.
        assert_eq!(t.lookup(&tcp(1, 2, 40001), ACK, SEC), None);
        assert_eq!(t.lookup(&udp(1, 2, 40000), 0, SEC), None);
        assert_eq!(t.lookup(&tcp(3, 2, 40000), ACK, SEC), None);
        // Installing it again, either way, is a no-op.
        t.insert(&f.reversed(), 200, 8, ACK, SEC).unwrap();
        t.insert(&f, 200, 8, ACK, SEC).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t.lookup(&f.reversed(), ACK, SEC), hit(100, 7, Dir::Reverse));
        let s = t.stats();
        assert_eq!((s.states, s.created, s.hits), (1, 1, 3));
        // The listing shows the creator's direction.
        assert_eq!(t.states()[0].0, f);
        assert_eq!(
            t.states()[0].1,
            StateHit {
                rule: 100,
                rule_id: 7,
                dir: Dir::Forward
            }
        );
        // A state created by the server's side is Forward for the server's packets.
        let mut t = table(64);
        t.insert(&f.reversed(), 1, 1, SYN, 0).unwrap();
        assert_eq!(t.lookup(&f, 0, 0), hit(1, 1, Dir::Reverse));
        assert_eq!(t.states()[0].0, f.reversed());
    }

    #[test]
    fn a_syn_only_state_expires_after_20_seconds() {
        let mut t = table(64);
        let f = tcp(1, 2, 40000);
        t.insert(&f, 100, 1, SYN, 0).unwrap();
        assert_eq!(expires(&t), 20 * SEC);
        // Retransmitted SYNs restart it; still the SYN lifetime.
        assert!(t.lookup(&f, SYN, 10 * SEC).is_some());
        assert_eq!(expires(&t), 30 * SEC);
        assert!(t.lookup(&f, SYN, 30 * SEC - 1).is_some());
        assert_eq!(t.lookup(&f, SYN, 50 * SEC - 1 + 20 * SEC), None);
        assert!(t.is_empty());
        assert_eq!(t.stats().expired, 1);
    }

    #[test]
    fn an_established_state_lives_300_idle_seconds_and_traffic_refreshes_it() {
        let mut t = table(64);
        let f = tcp(1, 2, 40000);
        t.insert(&f, 100, 1, SYN, 0).unwrap();
        t.lookup(&f.reversed(), SYN_ACK, SEC).unwrap();
        assert_eq!(expires(&t), 301 * SEC);
        t.lookup(&f, ACK, 2 * SEC).unwrap();
        assert_eq!(expires(&t), 302 * SEC);
        // One FIN keeps it established.
        t.lookup(&f, FIN_ACK, 200 * SEC).unwrap();
        assert_eq!(expires(&t), 500 * SEC);
        t.lookup(&f.reversed(), ACK, 499 * SEC).unwrap();
        assert_eq!(expires(&t), 799 * SEC);
        assert_eq!(t.lookup(&f, ACK, 799 * SEC), None);
    }

    #[test]
    fn fin_both_ways_leaves_2_seconds_and_rst_1() {
        let mut t = table(64);
        let f = tcp(1, 2, 40000);
        t.insert(&f, 100, 1, SYN, 0).unwrap();
        t.lookup(&f.reversed(), SYN_ACK, 0).unwrap();
        t.lookup(&f, FIN_ACK, 10 * SEC).unwrap();
        t.lookup(&f.reversed(), FIN_ACK, 11 * SEC).unwrap();
        assert_eq!(expires(&t), 13 * SEC);
        t.lookup(&f, ACK, 12 * SEC).unwrap();
        assert_eq!(expires(&t), 14 * SEC);
        assert_eq!(t.lookup(&f, ACK, 14 * SEC), None);

        let g = tcp(1, 2, 40001);
        t.insert(&g, 100, 1, SYN, 0).unwrap();
        t.lookup(&g.reversed(), SYN_ACK, 0).unwrap();
        t.lookup(&g.reversed(), RST, 5 * SEC).unwrap();
        assert_eq!(expires(&t), 6 * SEC);
        // Once reset, always the RST lifetime.
        t.lookup(&g, ACK, 5 * SEC).unwrap();
        assert_eq!(expires(&t), 6 * SEC);
        assert_eq!(t.lookup(&g, ACK, 6 * SEC), None);

        // keep-state "the wrong way": created by a packet without SYN.
        t.insert(&g, 100, 1, ACK, 0).unwrap();
        assert_eq!(expires(&t), SEC);
    }

    #[test]
    fn udp_lives_10_seconds_and_other_protocols_5() {
        let mut t = table(64);
        let f = udp(1, 2, 5353);
        t.insert(&f, 100, 1, 0, 0).unwrap();
        assert_eq!(expires(&t), 10 * SEC);
        t.lookup(&f.reversed(), 0, 9 * SEC).unwrap();
        assert_eq!(expires(&t), 19 * SEC);
        assert_eq!(t.lookup(&f, 0, 19 * SEC), None);
        let icmp = FlowId {
            proto: 1,
            src: v4(1),
            dst: v4(2),
            sport: 0,
            dport: 0,
        };
        t.insert(&icmp, 100, 1, 0, 0).unwrap();
        assert_eq!(expires(&t), 5 * SEC);
        // Flags mean nothing outside TCP.
        t.lookup(&icmp.reversed(), SYN, 4 * SEC).unwrap();
        assert_eq!(expires(&t), 9 * SEC);
    }

    #[test]
    fn the_sweep_drops_expired_states_incrementally() {
        let mut t = table(1000);
        for i in 0..600 {
            t.insert(&udp(i, 2, 1), 1, 1, 0, if i < 400 { 0 } else { 5 * SEC })
                .unwrap();
        }
        assert_eq!(t.expire(10 * SEC, usize::MAX), 400);
        assert_eq!(t.len(), 200);
        let mut n = 0;
        for _ in 0..10 {
            n += t.expire(15 * SEC, 100);
        }
        assert_eq!(n, 200);
        assert!(t.is_empty());
        t.table.check();
        assert_eq!(t.stats().expired, 600);
        // The hash index is clean after all those deletions: flows come back.
        for i in 0..600 {
            t.insert(&udp(i, 2, 1), 1, 1, 0, 20 * SEC).unwrap();
        }
        assert!((0..600).all(|i| t.lookup(&udp(i, 2, 1), 0, 20 * SEC).is_some()));
    }

    #[test]
    fn a_flood_of_new_flows_stays_within_the_bound() {
        let mut t = table(1000);
        assert_eq!(t.capacity(), 1000);
        let ptrs = (t.table.slots.as_ptr(), t.table.slots.capacity());
        let mut refused = 0;
        for i in 0..100_000u32 {
            let f = tcp(i, 0x10000 | i, i as u16);
            let now = i as u64 * 1_000_000;
            if t.lookup(&f, SYN, now).is_none() && t.insert(&f, 1, 1, SYN, now).is_err() {
                refused += 1;
            }
            assert!(t.len() <= 1000);
            if i % 100 == 0 {
                t.expire(now, 50);
            }
        }
        let s = t.stats();
        assert_eq!(s.full, refused);
        assert!(s.full > 0 && s.expired > 0, "{s:?}");
        assert_eq!(s.created, 100_000 - s.full);
        assert_eq!(s.states, t.len() as u64);
        t.table.check();
        // The same buffers as at construction.
        let now = (t.table.slots.as_ptr(), t.table.slots.capacity());
        assert_eq!(ptrs, now);
    }

    /// A small LCG, for churn tests without a seed to manage.
    fn lcg(x: &mut u64) -> u32 {
        *x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (*x >> 33) as u32
    }

    #[test]
    fn the_index_survives_churn_near_full() {
        let mut t = table(200);
        let mut x = 1;
        let mut now = 0;
        for i in 0..50_000 {
            let f = udp(lcg(&mut x) % 400, 1, 1);
            match lcg(&mut x) % 4 {
                0 | 1 => {
                    let _ = t.insert(&f, 1, 1, 0, now);
                }
                2 => {
                    t.lookup(&f, 0, now);
                }
                _ => {
                    t.expire(now, 7);
                }
            }
            now += (lcg(&mut x) % 20) as u64 * 1_000_000;
            if i % 1000 == 0 {
                t.table.check();
            }
            assert!(t.len() <= 200);
        }
        t.table.check();
        let s = t.stats();
        assert!(s.full > 0 && s.expired > 1000 && s.hits > 1000, "{s:?}");
    }

    #[test]
    fn limits_stay_exact_under_workers_sharing_shards() {
        let s = StateShards::new(
            3,
            StateConfig {
                max_states: 300,
                ..StateConfig::default()
            },
        );
        let m = LimitMask {
            src_addr: true,
            ..LimitMask::default()
        };
        std::thread::scope(|sc| {
            for w in 0..2u64 {
                let s = &s;
                sc.spawn(move || {
                    let mut x = w + 1;
                    for i in 0..20_000u64 {
                        let f = tcp(lcg(&mut x) % 8, lcg(&mut x) % 64, 1);
                        let now = i * 5_000_000;
                        match lcg(&mut x) % 3 {
                            0 => {
                                let _ = s.insert_limited(&f, 1, 1, SYN, m, 5, now);
                            }
                            1 => {
                                s.lookup(&f.reversed(), RST, now);
                            }
                            _ => {
                                s.expire(now, 10);
                            }
                        }
                    }
                });
            }
        });
        // Every parent counts exactly its live children, and none is over its limit.
        let mut children: HashMap<ParentKey, u32> = HashMap::new();
        for sh in s.shards.iter() {
            let t = lock(&sh.0);
            t.check();
            for e in t.slots.iter().filter(|e| e.live()) {
                *children.entry(e.parent_key()).or_default() += 1;
            }
        }
        assert_eq!(children, lock(&s.parents).count);
        assert!(children.values().all(|&n| n <= 5));
        let st = s.stats();
        assert!(st.limited > 0 && st.expired > 0, "{st:?}");
    }

    #[test]
    fn a_full_table_refuses_until_states_expire() {
        let mut t = table(4);
        for i in 0..4 {
            t.insert(&udp(i, 9, 1), 1, 1, 0, 0).unwrap();
        }
        assert_eq!(t.insert(&udp(5, 9, 1), 1, 1, 0, 0), Err(StateError::Full));
        // An existing flow is still fine.
        assert_eq!(t.insert(&udp(0, 9, 1).reversed(), 1, 1, 0, 0), Ok(()));
        assert_eq!(t.stats().full, 1);
        assert_eq!(t.expire(10 * SEC, 100), 4);
        assert_eq!(t.insert(&udp(5, 9, 1), 1, 1, 0, 10 * SEC), Ok(()));
        assert_eq!(StateError::Full.to_string(), "too many dynamic states");
        let mut z = table(0);
        assert_eq!(z.insert(&udp(5, 9, 1), 1, 1, 0, 0), Err(StateError::Full));
        assert_eq!(z.expire(0, 10), 0);
    }

    #[test]
    fn limit_caps_states_per_masked_key_and_an_expired_one_frees_a_slot() {
        let mut t = table(64);
        let src = LimitMask {
            src_addr: true,
            ..LimitMask::default()
        };
        // limit src-addr 2: two connections per client, whatever the ports.
        t.insert_limited(&tcp(1, 2, 1000), 100, 5, SYN, src, 2, 0)
            .unwrap();
        t.insert_limited(&tcp(1, 3, 1001), 100, 5, SYN, src, 2, SEC)
            .unwrap();
        assert_eq!(
            t.insert_limited(&tcp(1, 4, 1002), 100, 5, SYN, src, 2, SEC),
            Err(StateError::LimitReached)
        );
        // An existing flow is no new state; other clients have their own count, and
        // so has another rule.
        assert_eq!(
            t.insert_limited(&tcp(1, 2, 1000), 100, 5, SYN, src, 2, SEC),
            Ok(())
        );
        assert_eq!(
            t.insert_limited(&tcp(2, 4, 1002), 100, 5, SYN, src, 2, SEC),
            Ok(())
        );
        assert_eq!(
            t.insert_limited(&tcp(1, 4, 1002), 200, 6, SYN, src, 1, SEC),
            Ok(())
        );
        assert_eq!(t.stats().limited, 1);
        assert_eq!(t.len(), 4);
        // The first SYN-only state expires at 20 s: dropped by a lookup, it frees its
        // slot; the second is dropped by the sweep.
        assert_eq!(t.lookup(&tcp(1, 2, 1000), ACK, 20 * SEC), None);
        t.insert_limited(&tcp(1, 5, 1003), 100, 5, SYN, src, 2, 20 * SEC)
            .unwrap();
        assert_eq!(
            t.insert_limited(&tcp(1, 6, 1004), 100, 5, SYN, src, 2, 21 * SEC),
            Err(StateError::LimitReached)
        );
        assert_eq!(t.expire(21 * SEC, usize::MAX), 3);
        t.insert_limited(&tcp(1, 6, 1004), 100, 5, SYN, src, 2, 21 * SEC)
            .unwrap();
        // Parents go with their last child.
        assert_eq!(t.parents.count.len(), 1);
        t.flush();
        assert!(t.is_empty() && t.parents.count.is_empty());
        // limit dst-port: the key is the creating packet's destination port.
        let dport = LimitMask {
            dst_port: true,
            ..LimitMask::default()
        };
        t.insert_limited(&tcp(1, 2, 1000), 1, 1, SYN, dport, 1, 0)
            .unwrap();
        assert_eq!(
            t.insert_limited(&tcp(3, 4, 1001), 1, 1, SYN, dport, 1, 0),
            Err(StateError::LimitReached)
        );
        assert_eq!(
            StateError::LimitReached.to_string(),
            "limit of states reached"
        );
    }

    #[test]
    fn removing_a_rule_drops_its_states_and_their_parents() {
        let mut t = table(64);
        let m = LimitMask {
            dst_addr: true,
            ..LimitMask::default()
        };
        for i in 0..10 {
            t.insert(&udp(i, 2, 1), 100, 1, 0, 0).unwrap();
            t.insert_limited(&tcp(i, 3, 1), 200, 2, SYN, m, 100, 0)
                .unwrap();
        }
        assert_eq!(t.remove_rule(2), 10);
        assert_eq!(t.remove_rule(2), 0);
        assert_eq!(t.len(), 10);
        assert!(t.parents.count.is_empty());
        assert_eq!(t.lookup(&tcp(0, 3, 1), ACK, 0), None);
        assert_eq!(t.lookup(&udp(0, 2, 1), 0, 0), hit(100, 1, Dir::Forward));
        assert_eq!(t.stats().expired, 0);
        t.flush();
        assert!(t.is_empty());
        assert_eq!(t.lookup(&udp(0, 2, 1), 0, 0), None);
    }

    #[test]
    fn the_symmetric_hash_is_equal_both_ways_and_differs_across_flows() {
        let f = tcp(1, 2, 40000);
        assert_eq!(symmetric_hash(&f, 1), symmetric_hash(&f.reversed(), 1));
        assert_ne!(symmetric_hash(&f, 1), symmetric_hash(&f, 2));
        let mut seen = std::collections::HashSet::new();
        for i in 0..10_000 {
            let g = udp(i, 7, 1 + i as u16);
            assert_eq!(symmetric_hash(&g, 9), symmetric_hash(&g.reversed(), 9));
            seen.insert(symmetric_hash(&g, 9));
        }
        assert!(seen.len() > 9_980, "{}", seen.len());
        // Swapping only the ports, or only the addresses, is another flow.
        let p = FlowId {
            sport: 80,
            dport: 40000,
            ..f
        };
        assert_ne!(symmetric_hash(&f, 1), symmetric_hash(&p, 1));
    }

    #[test]
    fn ipv6_flows() {
        let a: IpAddr = "2001:db8::1".parse().unwrap();
        let b: IpAddr = "2001:db8::2".parse().unwrap();
        let f = FlowId {
            proto: IPPROTO_TCP,
            src: b,
            dst: a,
            sport: 5000,
            dport: 443,
        };
        let mut t = table(64);
        t.insert(&f, 10, 3, SYN, 0).unwrap();
        assert_eq!(
            t.lookup(&f.reversed(), SYN_ACK, 0),
            hit(10, 3, Dir::Reverse)
        );
        assert_eq!(t.lookup(&f, ACK, 0), hit(10, 3, Dir::Forward));
        // The same low bits in IPv4 are another flow.
        let f4 = FlowId {
            src: v4(2),
            dst: v4(1),
            ..f
        };
        assert_eq!(t.lookup(&f4, ACK, 0), None);
        assert_eq!(t.states()[0].0, f);
        assert_eq!(expires(&t), 300 * SEC);
        assert_eq!(symmetric_hash(&f, 5), symmetric_hash(&f.reversed(), 5));
        let m = LimitMask {
            src_addr: true,
            ..LimitMask::default()
        };
        t.insert_limited(&FlowId { sport: 1, ..f }, 20, 4, SYN, m, 1, 0)
            .unwrap();
        assert_eq!(
            t.insert_limited(&FlowId { sport: 2, ..f }, 20, 4, SYN, m, 1, 0),
            Err(StateError::LimitReached)
        );
    }

    #[test]
    fn lookups_do_not_allocate() {
        // A counting global allocator needs `unsafe`, which this crate forbids (and
        // it would count the other tests' threads): the buffers must be the same
        // before and after, at the same capacities. (Releasing a `limit` parent
        // removes from a `HashMap`, which never allocates.)
        let mut t = table(4096);
        let m = LimitMask {
            src_port: true,
            ..LimitMask::default()
        };
        for i in 0..3000 {
            t.insert_limited(&tcp(i, 1, i as u16), 1, 1, SYN, m, 1, 0)
                .unwrap();
        }
        let before = (t.table.slots.as_ptr(), t.table.slots.capacity());
        for round in 0..30u64 {
            for i in 0..4000 {
                let f = tcp(i, 1, i as u16);
                let f = if i % 2 == 0 { f } else { f.reversed() };
                t.lookup(&f, ACK, round * SEC);
            }
        }
        // Expired in lookups and sweeps: removals do not allocate either.
        t.expire(100 * SEC, 100);
        for i in 0..3000 {
            t.lookup(&tcp(i, 1, i as u16), ACK, 100 * SEC);
        }
        assert!(t.is_empty());
        let after = (t.table.slots.as_ptr(), t.table.slots.capacity());
        assert_eq!(before, after);
        assert_eq!(std::mem::size_of::<Entry>(), 64);
    }

    #[test]
    fn a_batch_lookup_is_lookups_in_turn() {
        let (mut a, mut b) = (table(512), table(512));
        let flow = |j: u32| {
            if j % 3 == 0 {
                udp(j, 1, 1)
            } else {
                tcp(j, 1, 1)
            }
        };
        for j in 0..400 {
            let now = (j as u64 % 7) * SEC;
            a.insert(&flow(j), 1, j, SYN, now).unwrap();
            b.insert(&flow(j), 1, j, SYN, now).unwrap();
        }
        // Present flows both ways, absent ones, the same flow several times in a
        // batch, an uneven tail; at times when some states have expired.
        let flows: Vec<FlowId> = (0..1001)
            .map(|i| {
                let f = flow(i * 37 % 500);
                if i % 2 == 0 {
                    f
                } else {
                    f.reversed()
                }
            })
            .collect();
        let flags: Vec<u8> = (0..1001)
            .map(|i| [SYN, SYN_ACK, ACK, FIN_ACK][i % 4])
            .collect();
        for now in [5 * SEC, 12 * SEC, 30 * SEC] {
            let seq: Vec<_> = flows
                .iter()
                .zip(&flags)
                .map(|(f, &fl)| a.lookup(f, fl, now))
                .collect();
            let mut out = vec![None; flows.len()];
            b.lookup_batch(&flows, &flags, now, &mut out);
            assert_eq!(seq, out);
            assert_eq!(a.states(), b.states());
            assert_eq!(a.stats(), b.stats());
        }
        let s = b.stats();
        assert!(s.hits > 0 && s.expired > 0, "{s:?}");
    }

    #[test]
    fn a_batch_lookup_over_shards_is_lookups_in_turn() {
        let cfg = StateConfig {
            max_states: 600,
            ..StateConfig::default()
        };
        let (a, b) = (StateShards::new(3, cfg), StateShards::new(3, cfg));
        let m = LimitMask::default();
        for j in 0..250 {
            let now = (j as u64 % 7) * SEC;
            a.insert_limited(&udp(j, 1, 1), 1, 1, 0, m, 1000, now)
                .unwrap();
            b.insert_limited(&udp(j, 1, 1), 1, 1, 0, m, 1000, now)
                .unwrap();
        }
        let flows: Vec<FlowId> = (0..777)
            .map(|i| {
                let f = udp(i * 37 % 300, 1, 1);
                if i % 3 == 0 {
                    f.reversed()
                } else {
                    f
                }
            })
            .collect();
        let flags = vec![0; flows.len()];
        for now in [5 * SEC, 12 * SEC, 30 * SEC] {
            let seq: Vec<_> = flows.iter().map(|f| a.lookup(f, 0, now)).collect();
            let mut out = vec![None; flows.len()];
            b.lookup_batch(&flows, &flags, now, &mut out);
            assert_eq!(seq, out);
            assert_eq!(a.states(), b.states());
            assert_eq!(a.stats(), b.stats());
            assert_eq!(lock(&a.parents).count, lock(&b.parents).count);
        }
        assert_eq!(b.len(), 0);
        assert!(b.stats().hits > 0);
    }

    #[test]
    fn shards_keep_both_directions_together_and_limits_across_shards() {
        let s = StateShards::new(4, StateConfig::default());
        assert_eq!(s.capacity(), 16384);
        for i in 0..100 {
            s.insert(&tcp(i, 2, 1), 100, 1, SYN, 0).unwrap();
        }
        for i in 0..100 {
            assert_eq!(
                s.lookup(&tcp(i, 2, 1).reversed(), SYN_ACK, 0),
                hit(100, 1, Dir::Reverse)
            );
        }
        // Every shard has some.
        assert!(s.shards.iter().all(|sh| lock(&sh.0).live > 10));
        // limit dst-addr 10: flows spread over all shards, counted together.
        let m = LimitMask {
            dst_addr: true,
            ..LimitMask::default()
        };
        let mut ok = 0;
        for i in 0..50 {
            if s.insert_limited(&udp(i, 3, 1), 200, 2, 0, m, 10, 0).is_ok() {
                ok += 1;
            }
        }
        assert_eq!(ok, 10);
        assert_eq!(s.stats().limited, 40);
        assert_eq!(s.len(), 110);
        assert_eq!(s.states().len(), 110);
        // UDP expires at 10 s, the SYN states at 20 s.
        assert_eq!(s.expire(10 * SEC, usize::MAX), 10);
        assert!(lock(&s.parents).count.is_empty());
        assert_eq!(
            s.insert_limited(&udp(99, 3, 1), 200, 2, 0, m, 10, 10 * SEC),
            Ok(())
        );
        assert_eq!(s.remove_rule(1), 100);
        assert_eq!(s.len(), 1);
        s.flush();
        assert!(s.is_empty());
        assert!(lock(&s.parents).count.is_empty());
        let st = s.stats();
        assert_eq!((st.created, st.expired, st.hits), (111, 10, 100));
    }

    #[test]
    fn shards_split_the_bound() {
        let s = StateShards::new(
            3,
            StateConfig {
                max_states: 100,
                ..StateConfig::default()
            },
        );
        assert_eq!(s.capacity(), 100);
        for i in 0..1000 {
            let _ = s.insert(&udp(i, 1, 1), 1, 1, 0, 0);
        }
        assert_eq!(s.len(), 100);
        assert_eq!(s.stats().full, 900);
    }

    #[test]
    fn shards_are_shared_by_workers() {
        let s = StateShards::new(2, StateConfig::default());
        std::thread::scope(|sc| {
            for w in 0..2u32 {
                let s = &s;
                sc.spawn(move || {
                    for i in 0..2000 {
                        // Worker 0 opens, worker 1 sees the answers of the same flows.
                        let f = tcp(i, 7, 1);
                        if w == 0 {
                            s.insert(&f, 1, 1, SYN, 0).unwrap();
                        } else {
                            while s.lookup(&f.reversed(), SYN_ACK, 0).is_none() {
                                std::thread::yield_now();
                            }
                        }
                    }
                });
            }
        });
        assert_eq!(s.len(), 2000);
        assert_eq!(s.stats().hits, 2000);
    }

    /// The model: a list of states checked by brute force, with the lifetimes
    /// written out again from FreeBSD's switch.
    #[derive(Debug, Clone)]
    struct MState {
        f: FlowId,
        rule: u32,
        rule_id: u32,
        tcp: u16,
        expires: u64,
        parent: Option<(u32, FlowId)>,
    }

    #[derive(Debug, Default)]
    struct Model {
        states: Vec<MState>,
        parents: HashMap<(u32, FlowId), u32>,
        max: usize,
    }

    fn model_life(proto: u8, tcp: u16) -> u64 {
        let s = StateConfig::default();
        let d = match proto {
            6 => match tcp {
                0x0002 => s.syn_lifetime,
                0x0202 | 0x0203 | 0x0302 => s.ack_lifetime,
                0x0303 => s.fin_lifetime,
                _ => s.rst_lifetime,
            },
            17 => s.udp_lifetime,
            _ => s.short_lifetime,
        };
        d.as_nanos() as u64
    }

    fn masked(f: &FlowId, m: LimitMask) -> FlowId {
        let zero = if f.src.is_ipv6() {
            IpAddr::V6(Ipv6Addr::UNSPECIFIED)
        } else {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        };
        FlowId {
            proto: f.proto,
            src: if m.src_addr { f.src } else { zero },
            dst: if m.dst_addr { f.dst } else { zero },
            sport: if m.src_port { f.sport } else { 0 },
            dport: if m.dst_port { f.dport } else { 0 },
        }
    }

    impl Model {
        fn find(&self, f: &FlowId) -> Option<(usize, Dir)> {
            let r = f.reversed();
            self.states.iter().enumerate().find_map(|(i, s)| {
                if s.f == *f {
                    Some((i, Dir::Forward))
                } else if s.f == r {
                    Some((i, Dir::Reverse))
                } else {
                    None
                }
            })
        }

        fn drop_state(&mut self, i: usize) {
            let s = self.states.swap_remove(i);
            if let Some(p) = s.parent {
                let n = self.parents.get_mut(&p).unwrap();
                *n -= 1;
                if *n == 0 {
                    self.parents.remove(&p);
                }
            }
        }

        fn touch(&mut self, i: usize, dir: Dir, flags: u8, now: u64) {
            let s = &mut self.states[i];
            if s.f.proto == 6 {
                let fl = (flags & 7) as u16;
                s.tcp |= if dir == Dir::Forward { fl } else { fl << 8 };
            }
            s.expires = now + model_life(s.f.proto, s.tcp);
        }

        fn lookup(&mut self, f: &FlowId, flags: u8, now: u64) -> Option<StateHit> {
            let (i, dir) = self.find(f)?;
            if now >= self.states[i].expires {
                self.drop_state(i);
                return None;
            }
            self.touch(i, dir, flags, now);
            let s = &self.states[i];
            hit(s.rule, s.rule_id, dir)
        }

        #[allow(clippy::too_many_arguments)]
        fn insert(
            &mut self,
            f: &FlowId,
            rule: u32,
            rule_id: u32,
            flags: u8,
            limit: Option<(LimitMask, u32)>,
            now: u64,
        ) -> Result<(), StateError> {
            if let Some((i, _)) = self.find(f) {
                if now < self.states[i].expires {
                    return Ok(());
                }
                self.drop_state(i);
            }
            if self.states.len() >= self.max {
                return Err(StateError::Full);
            }
            let mut parent = None;
            if let Some((m, n)) = limit {
                let k = (rule_id, masked(f, m));
                let c = self.parents.entry(k).or_insert(0);
                if *c >= n {
                    if *c == 0 {
                        self.parents.remove(&k);
                    }
                    return Err(StateError::LimitReached);
                }
                *c += 1;
                parent = Some(k);
            }
            self.states.push(MState {
                f: *f,
                rule,
                rule_id,
                tcp: 0,
                expires: 0,
                parent,
            });
            let i = self.states.len() - 1;
            self.touch(i, Dir::Forward, flags, now);
            Ok(())
        }

        fn expire_all(&mut self, now: u64) -> usize {
            let before = self.states.len();
            let mut i = 0;
            while i < self.states.len() {
                if now >= self.states[i].expires {
                    self.drop_state(i);
                } else {
                    i += 1;
                }
            }
            before - self.states.len()
        }

        fn remove_rule(&mut self, rule_id: u32) -> usize {
            let before = self.states.len();
            let mut i = 0;
            while i < self.states.len() {
                if self.states[i].rule_id == rule_id {
                    self.drop_state(i);
                } else {
                    i += 1;
                }
            }
            before - self.states.len()
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(usize, bool, u32, u8),
        InsertLimited(usize, bool, u32, u8, u8, u32),
        Lookup(usize, bool, u8),
        Advance(u64),
        ExpireAll,
        RemoveRule(u32),
    }

    /// A small universe of flows, so that directions, collisions of limit keys and a
    /// full table all happen.
    fn universe() -> Vec<FlowId> {
        let mut v = Vec::new();
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        for proto in [6u8, 17, 1] {
            for a in 0..3 {
                for port in [1000u16, 1001] {
                    let ports = proto != 1;
                    v.push(FlowId {
                        proto,
                        src: v4(a),
                        dst: if a == 2 { v6 } else { v4(9) },
                        sport: if ports { port } else { 0 },
                        dport: if ports { 80 } else { 0 },
                    });
                }
            }
        }
        // IPv6 on both sides for the a == 2 flows.
        for f in &mut v {
            if f.dst.is_ipv6() {
                f.src = "2001:db8::2".parse().unwrap();
            }
        }
        v.dedup();
        v
    }

    fn op() -> impl Strategy<Value = Op> {
        let flags = prop_oneof![
            Just(SYN),
            Just(SYN_ACK),
            Just(ACK),
            Just(FIN_ACK),
            Just(RST)
        ];
        prop_oneof![
            4 => (0..18usize, any::<bool>(), 1..4u32, flags.clone()).prop_map(|(f, r, rule, fl)| Op::Insert(f, r, rule, fl)),
            // A rule has one mask and one limit: rule 1 `limit src-addr 1`, 2
            // `limit dst-addr dst-port 2`, 3 `limit src-port 1`; 4, a masked-off
            // key with a limit of 3 (every flow of the protocol shares it).
            4 => (0..18usize, any::<bool>(), 1..5u32, flags.clone())
                .prop_map(|(f, r, rule, fl)| {
                    let (m, n) = [(0b0001, 1), (0b1100, 2), (0b0010, 1), (0, 3)][rule as usize - 1];
                    Op::InsertLimited(f, r, rule, fl, m, n)
                }),
            6 => (0..18usize, any::<bool>(), flags).prop_map(|(f, r, fl)| Op::Lookup(f, r, fl)),
            3 => (0..25u64).prop_map(Op::Advance),
            1 => Just(Op::ExpireAll),
            1 => (1..4u32).prop_map(Op::RemoveRule),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn the_table_agrees_with_a_model(ops in proptest::collection::vec(op(), 1..200), max in 1..10usize) {
            let u = universe();
            let mut t = table(max);
            let mut m = Model { max, ..Model::default() };
            let mut now = 0u64;
            let pick = |i: usize, r: bool| if r { u[i % u.len()].reversed() } else { u[i % u.len()] };
            for op in ops {
                match op {
                    Op::Insert(i, r, rule, fl) => {
                        let f = pick(i, r);
                        prop_assert_eq!(t.insert(&f, rule * 100, rule, fl, now), m.insert(&f, rule * 100, rule, fl, None, now));
                    }
                    Op::InsertLimited(i, r, rule, fl, mask, n) => {
                        let f = pick(i, r);
                        let mask = LimitMask::from_bits(mask);
                        prop_assert_eq!(
                            t.insert_limited(&f, rule * 100, rule, fl, mask, n, now),
                            m.insert(&f, rule * 100, rule, fl, Some((mask, n)), now)
                        );
                    }
                    Op::Lookup(i, r, fl) => {
                        let f = pick(i, r);
                        prop_assert_eq!(t.lookup(&f, fl, now), m.lookup(&f, fl, now));
                    }
                    Op::Advance(s) => now += s * SEC / 2,
                    Op::ExpireAll => prop_assert_eq!(t.expire(now, usize::MAX), m.expire_all(now)),
                    Op::RemoveRule(r) => prop_assert_eq!(t.remove_rule(r), m.remove_rule(r)),
                }
                t.table.check();
                prop_assert!(t.len() <= max);
                prop_assert_eq!(t.len(), m.states.len());
                prop_assert_eq!(t.parents.count.len(), m.parents.len());
            }
            let mut a: Vec<_> = t.states().into_iter().map(|(f, h, e)| (f, h.rule, h.rule_id, e)).collect();
            let mut b: Vec<_> = m.states.iter().map(|s| (s.f, s.rule, s.rule_id, s.expires)).collect();
            let key = |x: &(FlowId, u32, u32, u64)| format!("{x:?}");
            a.sort_by_key(key);
            b.sort_by_key(key);
            prop_assert_eq!(a, b);
        }
    }

    /// `cargo test -p fw --release -- --ignored --nocapture state_bench`: lookup
    /// cost at 16,384 states (FreeBSD's default, cache-resident) and at 1,000,000,
    /// beside std's `HashMap` holding the same keys and the cost of reading two
    /// dependent random cache lines of an array that size (the memory floor).
    #[test]
    #[ignore]
    fn state_bench() {
        use std::time::Instant;
        let flow = |i: u32| FlowId {
            proto: IPPROTO_TCP,
            src: IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + (i >> 4))),
            dst: IpAddr::V4(Ipv4Addr::from(0xc000_0200 + (i & 15))),
            sport: 1024 + (i % 50_000) as u16,
            dport: 443,
        };
        for n in [16_384u32, 1_000_000] {
            let cfg = StateConfig {
                max_states: n as usize,
                ..StateConfig::default()
            };
            let mut t = StateTable::new(cfg);
            let t0 = Instant::now();
            for i in 0..n {
                t.insert(&flow(i), 100, 1, SYN, 0).unwrap();
            }
            let insert_ns = t0.elapsed().as_nanos() as f64 / n as f64;
            let s = StateShards::new(2, cfg);
            for i in 0..n {
                let _ = s.insert(&flow(i), 100, 1, SYN, 0);
            }
            let mut h: HashMap<Key, u32> = HashMap::with_capacity(n as usize);
            for i in 0..n {
                h.insert(Key::canonical(&flow(i)).0, i);
            }
            // Two dependent random lines (a bucket, then the entry it names) of an
            // array the size of the table's memory: the memory floor.
            let lines = n as usize * 80 / 64;
            let mem: Vec<u64> = (0..lines * 8)
                .map(|i| (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40)
                .collect();
            // A pseudo-random order, both directions: each lookup misses the caches
            // when the table does not fit. Passes of at least 1M lookups.
            let passes = (1_000_000 / n).max(1) as usize;
            let flows: Vec<FlowId> = (0..n)
                .map(|i| {
                    let i = (i as u64 * 2_654_435_761 % n as u64) as u32;
                    if i % 2 == 0 {
                        flow(i)
                    } else {
                        flow(i).reversed()
                    }
                })
                .collect();
            let misses: Vec<FlowId> = flows
                .iter()
                .map(|f| FlowId {
                    proto: IPPROTO_UDP,
                    ..*f
                })
                .collect();
            let flags = vec![ACK; n as usize];
            let mut out = vec![None; n as usize];
            let mut sink = 0u64;
            // The best of 5 rounds, interleaved across the variants (the machine is
            // shared: the minimum is the least disturbed).
            let mut best = [f64::MAX; 7];
            for _ in 0..5 {
                let mut time = |k: usize, f: &mut dyn FnMut() -> u64| {
                    let t0 = Instant::now();
                    for _ in 0..passes {
                        sink += f();
                    }
                    let ns = t0.elapsed().as_nanos() as f64 / (passes as f64 * n as f64);
                    best[k] = best[k].min(ns);
                };
                time(0, &mut || {
                    flows
                        .iter()
                        .filter(|f| t.lookup(f, ACK, SEC).is_some())
                        .count() as u64
                });
                time(1, &mut || {
                    misses
                        .iter()
                        .filter(|f| t.lookup(f, ACK, SEC).is_some())
                        .count() as u64
                });
                time(2, &mut || {
                    t.lookup_batch(&flows, &flags, SEC, &mut out);
                    out.iter().filter(|h| h.is_some()).count() as u64
                });
                time(3, &mut || {
                    flows
                        .iter()
                        .filter(|f| s.lookup(f, ACK, SEC).is_some())
                        .count() as u64
                });
                time(4, &mut || {
                    s.lookup_batch(&flows, &flags, SEC, &mut out);
                    out.iter().filter(|h| h.is_some()).count() as u64
                });
                time(5, &mut || {
                    flows
                        .iter()
                        .filter(|f| h.contains_key(&Key::canonical(f).0))
                        .count() as u64
                });
                time(6, &mut || {
                    let mut sum = 0;
                    for i in 0..n as usize {
                        let a = mem[(i.wrapping_mul(2_654_435_761) % lines) * 8];
                        sum += mem[(a as usize % lines) * 8];
                    }
                    sum
                });
            }
            assert_eq!(t.stats().states, n as u64);
            let [hit, miss, batch, shard, shard_batch, std, floor] = best;
            println!(
                "state_bench {n:>9} states ({} MB): insert {insert_ns:.0} ns; lookup hit {hit:.0} ns, miss {miss:.0} ns, \
                 batched hit {batch:.0} ns; StateShards(2) hit {shard:.0} ns, batched {shard_batch:.0} ns | \
                 std HashMap<Key> hit {std:.0} ns; two dependent random lines {floor:.0} ns [{}]",
                (n as usize * 80) >> 20,
                sink % 2
            );
            // The shared path as the stack runs it: 16 shards (the ruleset's
            // default), flows split over 2 pinned threads by the symmetric hash (as
            // RSS splits them), each thread looking up its own flows in vectors.
            let s16 = StateShards::new(16, cfg);
            for i in 0..n {
                let _ = s16.insert(&flow(i), 100, 1, SYN, 0);
            }
            let one = shared_mlookups(&s16, &flows, 1);
            let two = shared_mlookups(&s16, &flows, 2);
            println!(
                "state_bench {n:>9} states: StateShards(16) lookup_batch, flows split by hash: \
                 1 thread {one:.2} M/s, 2 threads {two:.2} M/s (x{:.2})",
                two / one
            );
        }
    }

    /// Lookups per second (millions) of `s` by `threads` threads pinned to distinct
    /// CPUs, thread `t` taking the flows whose symmetric hash is `t` modulo
    /// `threads`, in vectors of 64, for 0.5 s; the best of 3 runs.
    fn shared_mlookups(s: &StateShards, flows: &[FlowId], threads: usize) -> f64 {
        use std::time::{Duration, Instant};
        let cpus = dev::cpu::allowed_cpus().unwrap_or_default();
        let mut best = 0f64;
        for _ in 0..3 {
            let total: f64 = std::thread::scope(|sc| {
                let hs: Vec<_> = (0..threads)
                    .map(|t| {
                        let cpu = cpus.get(t).copied();
                        sc.spawn(move || {
                            if let Some(c) = cpu {
                                let _ = dev::cpu::pin_current_thread(c);
                            }
                            let mine: Vec<FlowId> = flows
                                .iter()
                                .filter(|f| symmetric_hash(f, 7) as usize % threads == t)
                                .copied()
                                .collect();
                            let flags = [ACK; 64];
                            let mut out = [None; 64];
                            let start = Instant::now();
                            let mut done = 0u64;
                            while start.elapsed() < Duration::from_millis(500) {
                                for ch in mine.chunks(64) {
                                    s.lookup_batch(ch, &flags[..ch.len()], SEC, &mut out);
                                }
                                done += mine.len() as u64;
                            }
                            done as f64 / start.elapsed().as_secs_f64() / 1e6
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).sum()
            });
            best = best.max(total);
        }
        best
    }
}
