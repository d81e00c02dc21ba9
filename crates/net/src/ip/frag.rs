//! IP fragment reassembly for both families (RFC 791, RFC 815, RFC 8200 §4.5) and
//! IPv4 fragmentation on output.
//!
//! The table is here, shared by both families; IPv6's checks of a fragment and the
//! removal of its Fragment header are in `frag6`, the fragmenter in `output`.
//!
//! What it owns: one reassembly table per worker ([`Reass`]). RSS hashes fragments on
//! their addresses only (`dev::rss`), so every fragment of a datagram reaches the same
//! worker and the table needs no lock. It is sans-IO: `now` comes in, [`Reass::poll_at`]
//! goes out, and it never sends anything itself — a datagram that times out with its
//! first fragment hands that fragment back ([`Reass::pop_expired4`],
//! [`Reass::pop_expired6`]) for the caller's ICMP Time Exceeded.
//!
//! What it may call: `mbuf`, `wire`, the counters. Every fragment it frees is counted
//! once, under the [`DropReason`] of the event that freed it.
//!
//! Policies, each with its reason beside the code:
//! - an overlap discards the whole datagram and poisons its key until the datagram's
//!   time-out (RFC 5722, and the same for IPv4);
//! - an exact duplicate is dropped alone (RFC 5722 Errata 3089, as Linux);
//! - IPv6 atomic fragments (RFC 6946) never touch the table;
//! - every bound, when hit, evicts the oldest datagram (FreeBSD's policy).
//!
//! # IPv6: what the caller does
//!
//! The IPv6 input walks the extension header chain; when it meets a Fragment header it
//! trims the packet to `40 + Payload Length` and calls [`Reass::input6`] with a
//! [`Frag6Pos`]: where the Fragment header is, and which byte names it (6, the IPv6
//! header's Next Header, or byte 0 of the last unfragmentable extension header). On
//! [`Frag6::Done`] the Fragment header is gone, that byte and the Payload Length are
//! patched, and the walk continues at `off` with `next`. [`Frag6::ParamProblem`] says
//! which ICMPv6 Parameter Problem to send about the returned packet (RFC 8200 §4.5).

use crate::stats::{DropReason, Stats};
use dev::{Duration, Instant};
use mbuf::Mbuf;
use std::collections::hash_map::RandomState;
use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use wire::{IpProtocol, Ipv4Packet};

mod frag6;
mod output;

pub use frag6::{first_fragment_has_header_chain, Frag6, Frag6Pos};
pub use output::{fragment4, FragError, Fragments};

const IP_HDR_LEN: usize = wire::ipv4::HEADER_LEN;
const IP6_HDR_LEN: usize = wire::ipv6::HEADER_LEN;
const FRAG6_LEN: usize = wire::ipv6ext::FRAG_HEADER_LEN;
/// Largest IPv4 datagram (total length) and largest IPv6 payload.
const IP_MAXPACKET: usize = 65535;

/// Bounds and time-outs of a worker's reassembly table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FragParams {
    /// Datagrams in reassembly, both families (FreeBSD `net.inet.ip.maxfragpackets`).
    pub max_datagrams: usize,
    /// Bytes of buffers held by queued fragments ([`Mbuf::buf_bytes`], Linux's
    /// `truesize`): an 8-byte fragment in a 2 KiB cluster costs 2 KiB. Linux's
    /// `ipfrag_high_thresh` is 4 MiB.
    pub max_bytes: usize,
    /// Datagrams in reassembly from one source address, so one sender cannot take the
    /// whole table.
    pub max_per_source: usize,
    /// Fragments of one datagram (FreeBSD `net.inet6.ip6.maxfragsperpacket`, 64; the
    /// IPv4 one is 16, too few for a 64 KiB datagram over Ethernet, which needs 45).
    pub max_frags: usize,
    /// IPv4 time-out: FreeBSD's `net.inet.ip.fragttl` and Linux's `ipfrag_time` are 30 s.
    pub timeout4: Duration,
    /// IPv6 time-out. RFC 8200 §4.5: "within 60 seconds of the reception of the
    /// first-arriving fragment".
    pub timeout6: Duration,
}

impl Default for FragParams {
    fn default() -> Self {
        FragParams {
            max_datagrams: 1024,
            max_bytes: 4 << 20,
            max_per_source: 64,
            max_frags: 64,
            timeout4: Duration::from_secs(30),
            timeout6: Duration::from_secs(60),
        }
    }
}

/// A datagram's identity. RFC 791: "source, destination, protocol, and identification";
/// RFC 8200 §4.5: "Source Address, Destination Address, and Fragment Identification".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Key {
    V4 {
        src: Ipv4Addr,
        dst: Ipv4Addr,
        id: u16,
        proto: u8,
    },
    V6 {
        src: Ipv6Addr,
        dst: Ipv6Addr,
        id: u32,
    },
}

impl Key {
    fn fam(&self) -> usize {
        match self {
            Key::V4 { .. } => V4,
            Key::V6 { .. } => V6,
        }
    }
    fn src(&self) -> IpAddr {
        match *self {
            Key::V4 { src, .. } => IpAddr::V4(src),
            Key::V6 { src, .. } => IpAddr::V6(src),
        }
    }
}

const V4: usize = 0;
const V6: usize = 1;

/// Why fragments were freed; mapped onto one counter per family by [`why`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cause {
    /// A duplicate, or a fragment of a poisoned datagram.
    Dropped,
    Timeout,
    Overlap,
    Overflow,
    TooMany,
    Bad,
    Tiny,
    TooLong,
}

fn why(fam: usize, c: Cause) -> DropReason {
    use DropReason::*;
    match (fam, c) {
        (V4, Cause::Dropped) => IpFragDropped,
        (V4, Cause::Timeout) => IpFragTimeout,
        (V4, Cause::Overlap) => IpFragOverlap,
        (V4, Cause::Overflow) => IpFragOverflow,
        (V4, Cause::TooMany) => IpFragTooMany,
        (V4, Cause::Bad) => IpBadFrags,
        (V4, Cause::Tiny) => IpFragTiny,
        (V4, Cause::TooLong) => IpTooLong,
        (_, Cause::Dropped) => Ip6FragDropped,
        (_, Cause::Timeout) => Ip6FragTimeout,
        (_, Cause::Overlap) => Ip6FragOverlap,
        (_, Cause::Overflow) => Ip6FragOverflow,
        (_, Cause::TooMany) => Ip6FragTooMany,
        (_, Cause::Bad) => Ip6BadFrags,
        (_, Cause::Tiny) => Ip6FragTiny,
        (_, Cause::TooLong) => Ip6FragTooLong,
    }
}

/// Layout of the offset-0 fragment, kept to rebuild the datagram's header.
#[derive(Clone, Copy, Debug)]
struct First {
    /// Where the data starts: the IPv4 header length, or the Fragment header's offset
    /// plus 8.
    data_off: usize,
    /// IPv6 only: the caller's [`Frag6Pos`] and the Fragment header's Next Header.
    pos: Frag6Pos,
    next: IpProtocol,
}

/// One queued fragment: data bytes `[off, end)` of the datagram. The offset-0 fragment
/// keeps its headers, untouched, for the ICMP error a time-out sends; the others hold
/// their data only.
#[derive(Debug)]
struct Frag {
    off: u32,
    end: u32,
    m: Mbuf,
}

/// A fragment on its way into the table.
struct FragIn {
    off: u32,
    end: u32,
    more: bool,
    m: Mbuf,
    first: Option<First>,
}

#[derive(Debug)]
struct Entry {
    key: Key,
    created: Instant,
    /// An overlap (or too many fragments) was seen: every fragment of this key is
    /// dropped until the time-out frees the entry.
    poisoned: bool,
    /// Sorted by offset; never overlapping.
    frags: Vec<Frag>,
    /// The data length, once the fragment with MF clear came.
    total: Option<u32>,
    /// Data bytes queued: the datagram is complete when this equals `total`, as the
    /// fragments never overlap and never end past `total`.
    have: u32,
    /// Buffer bytes charged to the table.
    bytes: usize,
    first: Option<First>,
}

const NIL: u32 = u32::MAX;

/// Links of an entry in one of its two lists (index 0: its family's, by age; index 1:
/// its source's, by age).
#[derive(Clone, Copy, Debug)]
struct Link {
    prev: u32,
    next: u32,
}

const UNLINKED: Link = Link {
    prev: NIL,
    next: NIL,
};

/// An intrusive list of slot indices, oldest first.
#[derive(Clone, Copy, Debug)]
struct List {
    head: u32,
    tail: u32,
    len: u32,
}

const EMPTY: List = List {
    head: NIL,
    tail: NIL,
    len: 0,
};

const BY_AGE: usize = 0;
const BY_SRC: usize = 1;

fn push_back(links: &mut [[Link; 2]], list: &mut List, i: u32, k: usize) {
    links[i as usize][k] = Link {
        prev: list.tail,
        next: NIL,
    };
    if list.tail == NIL {
        list.head = i;
    } else {
        links[list.tail as usize][k].next = i;
    }
    list.tail = i;
    list.len += 1;
}

fn unlink(links: &mut [[Link; 2]], list: &mut List, i: u32, k: usize) {
    let Link { prev, next } = links[i as usize][k];
    if prev == NIL {
        list.head = next;
    } else {
        links[prev as usize][k].next = next;
    }
    if next == NIL {
        list.tail = prev;
    } else {
        links[next as usize][k].prev = prev;
    }
    links[i as usize][k] = UNLINKED;
    list.len -= 1;
}

/// A worker's reassembly table (FreeBSD's `ipq` and `ip6q` in one).
///
/// Call order: [`Reass::input4`] / [`Reass::input6`] for each fragment; when
/// [`Reass::poll_at`] is due, [`Reass::timer`], then drain [`Reass::pop_expired4`] and
/// [`Reass::pop_expired6`] into ICMP Time Exceeded (code 1) errors.
///
/// Every lookup is O(1): a hash map finds a datagram's slot, and two intrusive lists
/// per slot (its family's and its source's, both oldest first) give the next time-out
/// and the entry to evict without a scan. The map hashes with a random key: the keys
/// are chosen by whoever sends the fragments.
#[derive(Debug)]
pub struct Reass {
    p: FragParams,
    slots: Vec<Option<Entry>>,
    links: Vec<[Link; 2]>,
    free: Vec<u32>,
    index: HashMap<Key, u32, RandomState>,
    sources: HashMap<IpAddr, List, RandomState>,
    /// Per family, oldest first: with one time-out per family, also by deadline.
    by_age: [List; 2],
    bytes: usize,
    expired: [VecDeque<Mbuf>; 2],
}

impl Reass {
    pub fn new(p: FragParams) -> Reass {
        let p = FragParams {
            max_datagrams: p.max_datagrams.max(1),
            max_per_source: p.max_per_source.max(1),
            max_frags: p.max_frags.max(1),
            ..p
        };
        Reass {
            p,
            slots: Vec::new(),
            links: Vec::new(),
            free: Vec::new(),
            index: HashMap::default(),
            sources: HashMap::default(),
            by_age: [EMPTY; 2],
            bytes: 0,
            expired: [VecDeque::new(), VecDeque::new()],
        }
    }

    pub fn params(&self) -> &FragParams {
        &self.p
    }

    /// Datagrams in reassembly (poisoned keys included), both families.
    pub fn len(&self) -> usize {
        (self.by_age[V4].len + self.by_age[V6].len) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Buffer bytes held by queued fragments.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Panics if the table's bookkeeping disagrees with its contents or a bound is
    /// exceeded (tests and fuzz targets).
    #[doc(hidden)]
    pub fn assert_consistent(&self) {
        let live: Vec<(u32, &Entry)> = (0..self.slots.len() as u32)
            .filter_map(|i| self.slots[i as usize].as_ref().map(|e| (i, e)))
            .collect();
        assert_eq!(live.len(), self.len());
        assert_eq!(self.index.len(), self.len());
        assert!(self.len() <= self.p.max_datagrams);
        assert!(self.bytes <= self.p.max_bytes);
        let srcs: u32 = self.sources.values().map(|l| l.len).sum();
        assert_eq!(srcs as usize, self.len());
        assert!(self
            .sources
            .values()
            .all(|l| l.len as usize <= self.p.max_per_source));
        let mut bytes = 0;
        for (i, e) in live {
            assert_eq!(self.index.get(&e.key), Some(&i));
            assert!(e.frags.len() <= self.p.max_frags);
            let held: usize = e.frags.iter().map(|f| f.m.buf_bytes()).sum();
            assert_eq!(held, e.bytes);
            bytes += e.bytes;
            assert!(e.frags.windows(2).all(|w| w[0].end <= w[1].off));
            let have: u32 = e.frags.iter().map(|f| f.end - f.off).sum();
            assert_eq!(have, e.have);
            if let (Some(t), Some(l)) = (e.total, e.frags.last()) {
                assert!(l.end <= t && e.have < t);
            }
            assert!(!e.poisoned || e.frags.is_empty());
        }
        assert_eq!(bytes, self.bytes);
    }

    fn timeout(&self, fam: usize) -> Duration {
        if fam == V4 {
            self.p.timeout4
        } else {
            self.p.timeout6
        }
    }

    /// When [`Reass::timer`] must run next: the oldest datagram's time-out.
    pub fn poll_at(&self) -> Option<Instant> {
        (0..2)
            .filter_map(|f| {
                let h = self.by_age[f].head;
                let e = self.slots.get(h as usize)?.as_ref()?;
                Some(e.created + self.timeout(f))
            })
            .min()
    }

    /// Expires the datagrams whose time is up: their fragments are counted
    /// (`ip.fragtimeout`, `ip6.fragtimeout`) and freed, and the offset-0 fragment, if
    /// it came, is kept for [`Reass::pop_expired4`] / [`Reass::pop_expired6`].
    pub fn timer(&mut self, now: Instant, stats: &mut Stats) {
        for fam in [V4, V6] {
            let t = self.timeout(fam);
            loop {
                let h = self.by_age[fam].head;
                let Some(e) = self.slots.get(h as usize).and_then(Option::as_ref) else {
                    break;
                };
                if e.created + t > now {
                    break;
                }
                let Some(e) = self.remove(h) else { break };
                why(fam, Cause::Timeout).count_n(stats, e.frags.len() as u64);
                // RFC 8200 §4.5: "If the first fragment (i.e., the one with a Fragment
                // Offset of zero) has been received, an ICMP Time Exceeded -- Fragment
                // Reassembly Time Exceeded message should be sent to the source of that
                // fragment." RFC 1122 §3.3.2: the same for IPv4 ("if fragment zero has
                // been received"). Bounded: at most one per entry the table held.
                if let Some(f) = e.frags.into_iter().next().filter(|f| f.off == 0) {
                    if self.expired[fam].len() < self.p.max_datagrams {
                        self.expired[fam].push_back(f.m);
                    }
                }
            }
        }
        self.gauges(stats);
    }

    /// The offset-0 fragment (IP header included, as received) of an IPv4 datagram
    /// that timed out: send ICMP Time Exceeded, code 1, about it.
    pub fn pop_expired4(&mut self) -> Option<Mbuf> {
        self.expired[V4].pop_front()
    }

    /// The first fragment (the whole packet as received, Fragment header included) of
    /// an IPv6 datagram that timed out: send ICMPv6 Time Exceeded, code 1, about it.
    pub fn pop_expired6(&mut self) -> Option<Mbuf> {
        self.expired[V6].pop_front()
    }

    fn gauges(&self, stats: &mut Stats) {
        stats.ip.fragq = u64::from(self.by_age[V4].len);
        stats.ip6.fragq = u64::from(self.by_age[V6].len);
    }

    /// `ip_reass`: one IPv4 fragment (MF set or offset non-zero), its header validated
    /// and the packet trimmed to its total length. Returns the whole datagram when this
    /// fragment completes it: one chain of the fragments' buffers (nothing copied), the
    /// first fragment's header with the total length set, MF and offset cleared and the
    /// checksum recomputed.
    pub fn input4(&mut self, now: Instant, mut m: Mbuf, stats: &mut Stats) -> Option<Mbuf> {
        let discard = |stats: &mut Stats, c: Cause| {
            why(V4, c).count(stats);
            None
        };
        let (hlen, key, off, more) = {
            let Ok(h) = m.pulldown(0, IP_HDR_LEN) else {
                return discard(stats, Cause::Bad);
            };
            let p = Ipv4Packet::new_unchecked(&h[..]);
            let key = Key::V4 {
                src: p.src_addr(),
                dst: p.dst_addr(),
                id: p.ident(),
                proto: p.next_header().into(),
            };
            (
                usize::from(p.header_len()),
                key,
                usize::from(p.frag_offset()),
                p.more_frags(),
            )
        };
        if off == 0 && !more {
            return Some(m);
        }
        stats.ip.fragments += 1;
        if hlen < IP_HDR_LEN || hlen > m.len() {
            return discard(stats, Cause::Bad);
        }
        // RFC 1858 §3.2: "if FO=1 then drop packet" — a fragment at offset 8 exists only
        // to overwrite the transport header of the first (the tiny fragment attack).
        // RFC 1858 asks it for TCP; we ask it of every protocol, as the same trick
        // hides UDP ports from a filter, and no sender makes 8-byte first fragments.
        if off == 8 {
            return discard(stats, Cause::Tiny);
        }
        let len = m.len() - hlen;
        // RFC 791: every fragment but the last carries a multiple of 8 data bytes; an
        // empty fragment adds nothing but a way to confuse the bookkeeping.
        if len == 0 || (more && !len.is_multiple_of(8)) {
            return discard(stats, Cause::Bad);
        }
        // The "ping of death": a fragment that would end past 65535 bytes.
        if IP_HDR_LEN + off + len > IP_MAXPACKET {
            return discard(stats, Cause::TooLong);
        }
        let first = if off == 0 {
            Some(First {
                data_off: hlen,
                pos: Frag6Pos::DIRECT,
                next: IpProtocol::Unknown(0),
            })
        } else {
            m.adj(hlen as isize);
            None
        };
        let f = FragIn {
            off: off as u32,
            end: (off + len) as u32,
            more,
            m,
            first,
        };
        let done = self.insert(now, key, f, stats);
        let out = done.and_then(|e| self.assemble4(e, stats));
        self.gauges(stats);
        out
    }

    fn assemble4(&mut self, e: Entry, stats: &mut Stats) -> Option<Mbuf> {
        let n = e.frags.len() as u64;
        let (Some(first), Some(total)) = (e.first, e.total) else {
            why(V4, Cause::Dropped).count_n(stats, n);
            return None;
        };
        let hlen = first.data_off;
        let total_len = hlen + total as usize;
        // The first fragment's options may make the whole longer than the check on
        // each fragment (which assumed a 20-byte header) could see.
        if total_len > IP_MAXPACKET {
            why(V4, Cause::TooLong).count_n(stats, n);
            return None;
        }
        let mut frags = e.frags.into_iter();
        let mut m = frags.next()?.m;
        {
            // Written while the first fragment's buffers are its own: no copy.
            let Ok(h) = m.pulldown(0, hlen) else {
                why(V4, Cause::Dropped).count_n(stats, n);
                return None;
            };
            let mut p = Ipv4Packet::new_unchecked(&mut h[..]);
            p.set_total_len(total_len as u16);
            p.set_more_frags(false);
            p.set_frag_offset(0);
            p.fill_checksum();
        }
        for f in frags {
            m.cat(f.m);
        }
        stats.ip.reassembled += 1;
        Some(m)
    }

    /// Queues one fragment; returns the datagram's entry, out of the table, when it is
    /// complete. Every fragment not kept is counted.
    fn insert(&mut self, now: Instant, key: Key, f: FragIn, stats: &mut Stats) -> Option<Entry> {
        let fam = key.fam();
        let i = match self.index.get(&key) {
            Some(&i) => i,
            None => self.create(now, key, stats),
        };
        let Some(e) = self.slots.get_mut(i as usize).and_then(Option::as_mut) else {
            why(fam, Cause::Dropped).count(stats);
            return None;
        };
        if e.poisoned {
            why(fam, Cause::Dropped).count(stats);
            return None;
        }
        // A fragment that moves the end of the datagram conflicts with what came
        // before as surely as an overlap does (Linux discards the queue alike).
        let conflict = match e.total {
            Some(t) => f.end > t || (f.more && f.end >= t) || (!f.more && f.end != t),
            None => !f.more && e.frags.last().is_some_and(|g| g.end > f.end),
        };
        let at = e.frags.partition_point(|g| g.end <= f.off);
        let hit = e.frags.get(at).filter(|g| g.off < f.end);
        if let Some(g) = hit {
            // RFC 5722 §4, amended by Errata 3089: "Duplicates, however, should be
            // ignored". An exact copy (same range, same MF) is dropped alone and the
            // datagram kept: networks duplicate packets (ours do, on purpose, in the
            // tests), and an attacker who can inject a copy can as well inject an
            // overlap. Which copy is kept does not matter to an honest sender.
            let dup = g.off == f.off && g.end == f.end && f.more == (e.total != Some(f.end));
            if dup && !conflict {
                why(fam, Cause::Dropped).count(stats);
                return None;
            }
        }
        if conflict || hit.is_some() {
            // RFC 5722 §4 (RFC 8200 §4.5): "if one or more of its constituent fragments
            // is determined to be an overlapping fragment, the entire datagram (and any
            // constituent fragments, including those not yet received) MUST be silently
            // discarded." The same for IPv4: overlapping fragments are how a firewall's
            // view and a host's view of a datagram are made to differ (RFC 1858 §4),
            // and no honest sender makes them.
            self.poison(i, Cause::Overlap, stats);
            why(fam, Cause::Overlap).count(stats);
            return None;
        }
        if e.frags.len() >= self.p.max_frags {
            // FreeBSD discards the datagram at `maxfragsperpacket`; we also poison the
            // key, or its remaining fragments would start a new entry that can never
            // complete either.
            self.poison(i, Cause::TooMany, stats);
            why(fam, Cause::TooMany).count(stats);
            return None;
        }
        let charge = f.m.buf_bytes();
        while self.bytes + charge > self.p.max_bytes {
            match self.oldest_except(i) {
                Some(o) => self.evict(o, stats),
                None => {
                    // This datagram alone holds what the table may: it can never
                    // complete within the bound.
                    if let Some(e) = self.remove(i) {
                        why(fam, Cause::Overflow).count_n(stats, e.frags.len() as u64);
                    }
                    why(fam, Cause::Overflow).count(stats);
                    return None;
                }
            }
        }
        let e = self.slots.get_mut(i as usize).and_then(Option::as_mut)?;
        e.have += f.end - f.off;
        e.bytes += charge;
        if !f.more {
            e.total = Some(f.end);
        }
        if f.first.is_some() {
            e.first = f.first;
        }
        e.frags.insert(
            at,
            Frag {
                off: f.off,
                end: f.end,
                m: f.m,
            },
        );
        self.bytes += charge;
        if e.total == Some(e.have) {
            return self.remove(i);
        }
        None
    }

    /// A new, empty entry for `key`, after making room for it.
    fn create(&mut self, now: Instant, key: Key, stats: &mut Stats) -> u32 {
        let src = key.src();
        // Every bound evicts the oldest datagram rather than refusing the new one, as
        // FreeBSD does: an honest datagram's fragments come back to back, so the
        // oldest entry is the one least likely ever to complete, and a flood of
        // fragments that never complete cannot shut new datagrams out for a whole
        // time-out. The per-source bound evicts the source's own oldest: a sender
        // that floods mostly hurts itself.
        if let Some(l) = self.sources.get(&src) {
            if l.len as usize >= self.p.max_per_source {
                let o = l.head;
                self.evict(o, stats);
            }
        }
        while self.len() >= self.p.max_datagrams {
            let Some(o) = self.oldest_except(NIL) else {
                break;
            };
            self.evict(o, stats);
        }
        let e = Entry {
            key,
            created: now,
            poisoned: false,
            frags: Vec::new(),
            total: None,
            have: 0,
            bytes: 0,
            first: None,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(e);
                i
            }
            None => {
                self.slots.push(Some(e));
                self.links.push([UNLINKED; 2]);
                (self.slots.len() - 1) as u32
            }
        };
        self.index.insert(key, i);
        push_back(&mut self.links, &mut self.by_age[key.fam()], i, BY_AGE);
        let l = self.sources.entry(src).or_insert(EMPTY);
        push_back(&mut self.links, l, i, BY_SRC);
        i
    }

    /// The oldest entry of either family, other than `except`.
    fn oldest_except(&self, except: u32) -> Option<u32> {
        (0..2)
            .filter_map(|f| {
                let mut h = self.by_age[f].head;
                if h == except && h != NIL {
                    h = self.links[h as usize][BY_AGE].next;
                }
                let e = self.slots.get(h as usize)?.as_ref()?;
                Some((e.created, h))
            })
            .min()
            .map(|(_, h)| h)
    }

    /// Frees an entry to make room: its fragments count as `fragoverflow`.
    fn evict(&mut self, i: u32, stats: &mut Stats) {
        if let Some(e) = self.remove(i) {
            why(e.key.fam(), Cause::Overflow).count_n(stats, e.frags.len() as u64);
        }
    }

    /// Discards an entry's fragments (counted as `c`) and keeps its key, poisoned,
    /// until its time-out.
    fn poison(&mut self, i: u32, c: Cause, stats: &mut Stats) {
        if let Some(e) = self.slots.get_mut(i as usize).and_then(Option::as_mut) {
            why(e.key.fam(), c).count_n(stats, e.frags.len() as u64);
            e.frags.clear();
            self.bytes -= e.bytes;
            e.bytes = 0;
            e.poisoned = true;
            e.total = None;
            e.have = 0;
            e.first = None;
        }
    }

    /// Takes an entry out of the table and its lists.
    fn remove(&mut self, i: u32) -> Option<Entry> {
        let e = self.slots.get_mut(i as usize)?.take()?;
        unlink(&mut self.links, &mut self.by_age[e.key.fam()], i, BY_AGE);
        let src = e.key.src();
        if let Some(l) = self.sources.get_mut(&src) {
            unlink(&mut self.links, l, i, BY_SRC);
            if l.len == 0 {
                self.sources.remove(&src);
            }
        }
        self.index.remove(&e.key);
        self.bytes -= e.bytes;
        self.free.push(i);
        Some(e)
    }
}

#[cfg(test)]
mod tests;
