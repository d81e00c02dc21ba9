//! Dynamic states: what `keep-state`, `check-state` and `limit` remember, after
//! FreeBSD's `sys/netpfil/ipfw/ip_fw_dynamic.c`.
//!
//! What it owns: the states of one shard ([`StateTable`], `&mut self`, one per worker
//! or behind a lock) or of all shards ([`StateShards`]: read by every worker without a
//! lock, written under a lock per shard), the `limit` parents and the counters. What it
//! may call: `std` only. The rule evaluator decides when to look up (`check-state`, and
//! implicitly the first `keep-state` or `limit` rule) and when to install; this module
//! never sees a packet, only its [`FlowId`] and its TCP flags.
//!
//! FreeBSD semantics followed:
//! - A state matches its flow both ways: [`Dir::Forward`] for packets going the way of
//!   the one that created it, [`Dir::Reverse`] for the answers.
//! - Lifetimes are `net.inet.ip.fw.dyn_*` ([`StateConfig::default`]); each packet that
//!   matches a state restarts its lifetime, chosen as `dyn_update_tcp_state` does from
//!   the TCP flags seen so far each way: SYN one way only, `dyn_syn_lifetime`; SYN both
//!   ways (and at most one FIN) and then an ACK each way, `dyn_ack_lifetime` (an ACK
//!   counts only once both SYNs are seen, as FreeBSD's `ACK_FWD`/`ACK_REV`); SYN both
//!   ways without those ACKs, the expiry the state has (FreeBSD leaves `expire`
//!   alone until `ACK_BOTH`), so that two SYNs crossing without a handshake get no
//!   more than the SYN lifetime; SYN and FIN both ways, `dyn_fin_lifetime`;
//!   anything else (an RST either way, a state created by a packet without SYN, "or
//!   if we use keep-state the wrong way"), `dyn_rst_lifetime`. FreeBSD also checks
//!   that each ACK number moved forward; we are not given ACK numbers. UDP and
//!   UDP-Lite: `dyn_udp_lifetime`; other protocols (ICMP...): `dyn_short_lifetime`.
//!   A hit writes the new lifetime only
//!   when it moves the expiry by 100 ms or more (an eighth of the lifetime, if less) or
//!   the flags change, as FreeBSD stores `expire` only when it changes, to the second:
//!   a flow's packets mostly read its state and write nothing. Expiries are kept to the
//!   millisecond (rounded up).
//! - ICMP and ICMPv6 ([`IcmpKind`], [`FlowId::icmp`]), as pf keys them rather than
//!   as FreeBSD does (on the address pair, so that one ping lets any ICMP type
//!   through for as long as it goes on): a query's state (echo, timestamp,
//!   information, address mask) is keyed on its identifier and the query's type,
//!   and lets through the query its way and only the matching reply the other (a
//!   flag test on the hit: [`ICMP_QUERY`], [`ICMP_REPLY`]); an error makes no state
//!   and is looked up as the flow it quotes ([`StateTable::peek`], which leaves the
//!   state as it is, so that errors do not keep it alive); other types keep a
//!   state of the address pair.
//! - A state is expired when `now >= expires`; an expired state is a miss, and is
//!   dropped by an insert of its flow, by the incremental sweep
//!   ([`StateTable::expire`], FreeBSD's `dyn_tick`), or by a [`StateTable`]'s lookup;
//!   [`StateShards`]' lookups, which write no table, leave it to the first two, as
//!   FreeBSD 12's lockless lookups leave it to `dyn_tick`.
//! - `limit {src-addr|src-port|dst-addr|dst-port} N`: a parent per (rule, masked key of
//!   the creating packet) counts its live children; a new child is refused
//!   ([`StateError::LimitReached`]) when the count is `N`. A child releases its parent
//!   when it is dropped (so an expired child still counts until it is dropped, as in
//!   FreeBSD, where the periodic `dyn_tick` frees children); a parent with no children
//!   is dropped at once.
//! - A full table refuses new states ([`StateError::Full`], counted), as FreeBSD does
//!   when `dyn_count >= dyn_max`: no eviction of live states.
//!
//! Bounds and layout: the entries (one 64-byte line each) sit in the slots of an
//! open-addressing hash allocated at construction (linear probing from the hash's low
//! bits, a power of two of slots, at most two-thirds full at `max_states`, deletions by
//! backward shift, so no tombstones). The key is the flow in a canonical order, so both
//! directions hash to the same slot. A lookup reads the entry's own line (and the next
//! ones of its run, on a collision): no index to go through first, so one dependent
//! cache miss, not two, on a table larger than the caches; [`StateTable::lookup_batch`]
//! prefetches those lines for a vector of packets before it reads them, so that the misses
//! overlap. Lookups, inserts, sweeps, `remove_rule` and `flush` never allocate. How a
//! lookup reads a slot that a writer may be changing, and proves a miss while states
//! move (FreeBSD 12's lockless states, in an open-addressing table), is in `table` and
//! `slot`. Only `limit` parents live in a `HashMap` (sized for 1,024 parents up front;
//! it grows, on `insert_limited` only, up to one parent per live state, its natural
//! bound). Memory: 1.5 to 3 slots of 64 bytes per state of `max_states` (the slots are
//! a power of two): 128 MiB for the 1,251,024 of `mpstack bench fw`, about 107 bytes a
//! state.
//!
//! [`StateShards`] splits `max_states` evenly over its shards (a shard is full at its
//! share); a flow's shard is chosen by [`symmetric_hash`], so both directions meet in
//! one shard. Its lookups take no lock, allocate nothing and write no line another
//! worker reads (hits are counted per thread); its writers take their shard's lock.
//! `limit` parents are shared by all shards in one `Mutex<HashMap>`, since a key's
//! children are spread over the shards by their flows; only `limit` children take that
//! lock (after their shard's, never the other way round).
//!
//! Time is a `u64` of nanoseconds from any origin, the caller's clock; it must not go
//! backwards for one table (expiries past 2^39 ms, 17 years, saturate there).
//!
//! The files: this one has the semantics (the public types and the lifetimes); `flow`
//! the key and its hashes; `slot` a state's line and its sequence; `table` one shard's
//! slots, the lock-free lookup, the writers and [`StateTable`]; `shards`
//! [`StateShards`]; `limits` the `limit` parents.

mod flow;
mod limits;
mod shards;
mod slot;
mod table;
#[cfg(test)]
mod tests;

pub use flow::symmetric_hash;
pub use shards::StateShards;
pub use table::{StateTable, BATCH};

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

const TH_FIN: u8 = 0x01;
const TH_SYN: u8 = 0x02;
const TH_RST: u8 = 0x04;
const TH_ACK: u8 = 0x10;

/// TCP flags seen, forward in the low byte and reverse in the high byte (FreeBSD's
/// `state |= dir == MATCH_FORWARD ? flags : flags << 8`; its `ACK_FWD`/`ACK_REV`
/// are the ACK bits here).
const SYN_FWD: u16 = TH_SYN as u16;
const FIN_FWD: u16 = TH_FIN as u16;
const FIN_REV: u16 = FIN_FWD << 8;
const BOTH_SYN: u16 = SYN_FWD | SYN_FWD << 8;
const BOTH_FIN: u16 = FIN_FWD | FIN_REV;
const BOTH_ACK: u16 = TH_ACK as u16 | (TH_ACK as u16) << 8;

const IPPROTO_ICMP: u8 = 1;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
const IPPROTO_UDPLITE: u8 = 136;
const IPPROTO_ICMPV6: u8 = 58;

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
    /// The flow a state of an ICMP or ICMPv6 message from `src` to `dst` has, and
    /// the lookup's flags: for a query, the identifier and the query's type as its
    /// source and destination ports, for the reply the other way round (pf's
    /// virtual ports), with [`ICMP_QUERY`] (and [`ICMP_REPLY`]); otherwise ports 0
    /// (the address pair) and no flags. `None` for an error or another protocol:
    /// an error's state is that of the packet it quotes.
    #[inline]
    pub fn icmp(
        src: IpAddr,
        dst: IpAddr,
        proto: u8,
        icmp_type: u8,
        id: u16,
    ) -> Option<(FlowId, u8)> {
        let (sport, dport, flags) = icmp_ports(proto, icmp_type, id)?;
        let f = FlowId {
            proto,
            src,
            dst,
            sport,
            dport,
        };
        Some((f, flags))
    }

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

/// The lookup flags of an ICMP or ICMPv6 query or reply (the `tcp_flags` of a
/// lookup whose flow's protocol is 1 or 58; [`FlowId::icmp`] gives them).
pub const ICMP_QUERY: u8 = 0x40;
/// With [`ICMP_QUERY`]: the packet is the reply.
pub const ICMP_REPLY: u8 = 0x80;

/// What the states make of an ICMP or ICMPv6 message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IcmpKind {
    /// A query or its reply: echo, timestamp, information and address mask
    /// (RFC 792, RFC 950); ICMPv6 echo (RFC 4443). `query` is the request's type.
    /// Its state is keyed on the query's identifier and lets through, the other
    /// way, only the matching reply, as pf and Linux conntrack do (FreeBSD keys
    /// ICMP on the address pair alone, so that one ping lets any ICMP through).
    Query { query: u8, reply: bool },
    /// An error: unreachable, source quench, redirect, time exceeded, parameter
    /// problem; ICMPv6's unreachable, packet too big, time exceeded, parameter
    /// problem. It makes no state: the state of the packet it quotes, if any,
    /// decides (pf's `pf_icmp_state_lookup`).
    Error,
    /// Anything else (router and neighbour discovery, MLD, unknown types): a
    /// state of the address pair, as FreeBSD keys every ICMP state.
    Other,
}

/// The kind of an ICMP (`proto` 1) or ICMPv6 (58) message of type `icmp_type`;
/// `None` for other protocols.
#[inline]
pub fn icmp_kind(proto: u8, icmp_type: u8) -> Option<IcmpKind> {
    let q = |query, reply| Some(IcmpKind::Query { query, reply });
    match (proto, icmp_type) {
        (1, 8 | 13 | 15 | 17) => q(icmp_type, false),
        (1, 0) => q(8, true),
        (1, 14 | 16 | 18) => q(icmp_type - 1, true),
        (1, 3 | 4 | 5 | 11 | 12) => Some(IcmpKind::Error),
        (58, 128) => q(128, false),
        (58, 129) => q(128, true),
        (58, 1..=4) => Some(IcmpKind::Error),
        (1 | 58, _) => Some(IcmpKind::Other),
        _ => None,
    }
}

/// [`FlowId::icmp`]'s ports and flags.
#[inline]
pub(crate) fn icmp_ports(proto: u8, icmp_type: u8, id: u16) -> Option<(u16, u16, u8)> {
    Some(match icmp_kind(proto, icmp_type)? {
        IcmpKind::Query {
            query,
            reply: false,
        } => (id, query as u16, ICMP_QUERY),
        IcmpKind::Query { query, reply: true } => (query as u16, id, ICMP_QUERY | ICMP_REPLY),
        IcmpKind::Other => (0, 0, 0),
        IcmpKind::Error => return None,
    })
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
    /// SYN both ways, then an ACK each way: established (`dyn_ack_lifetime`, 300 s).
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
/// not those of a removed rule or a flush; `full` and `limited` count refused inserts;
/// `hits` counts lookups that matched (in [`StateShards`], per thread, exact while
/// at most 64 threads look up).
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

/// Lifetimes in nanoseconds.
#[derive(Clone, Copy, Debug)]
pub(super) struct Lifetimes {
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
    /// lifetime after a packet, from the TCP flags seen so far (`tcp`); `None` to
    /// keep the expiry the state has: both SYNs seen, not yet an ACK each way
    /// (FreeBSD leaves `expire` alone there until `ACK_BOTH`).
    #[inline]
    fn after(&self, proto: u8, tcp: u16) -> Option<u64> {
        Some(match proto {
            IPPROTO_TCP => match tcp & !BOTH_ACK {
                SYN_FWD => self.syn,
                t if t == BOTH_SYN || t == BOTH_SYN | FIN_FWD || t == BOTH_SYN | FIN_REV => {
                    if tcp & BOTH_ACK != BOTH_ACK {
                        return None;
                    }
                    self.ack
                }
                t if t == BOTH_SYN | BOTH_FIN => self.fin,
                _ => self.rst,
            },
            IPPROTO_UDP | IPPROTO_UDPLITE => self.udp,
            _ => self.short,
        })
    }
}
