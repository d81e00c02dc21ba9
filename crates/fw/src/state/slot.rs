//! One state's slot: a cache line of atomics that readers take without a lock, and
//! the sequence counter that tells them when a writer is changing it.
//!
//! The line holds the key (four address words and `kw`: ports, protocol, family,
//! the slot's bits and the `limit` mask), the creating rule, the key's hash, and
//! `meta`: a sequence number, the TCP flags seen and the expiry, in one word so
//! that one compare-and-swap updates the last two and proves the first unchanged.
//!
//! Writers (holding their shard's lock) change a slot as a seqlock's writer does:
//! [`Slot::begin`] makes the sequence odd, the fields are stored, and
//! [`Slot::publish`] stores the next even sequence with the new flags and expiry.
//! Readers read the sequence, the fields, then the sequence again: an odd or
//! changed sequence means the fields may be torn, and the reader tries again.
//! (Boehm, "Can seqlocks get along with programming language memory models?",
//! 2012: the reader's fields are atomics, an acquire fence before the second read.)

use super::flow::{Key, KW_KEY};
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// `kw` above [`KW_KEY`]: the slot holds a state.
pub(super) const KW_LIVE: u64 = KW_KEY + 1;
/// The creating packet went the reverse of the canonical order.
pub(super) const KW_SWAPPED: u64 = KW_LIVE << 1;
/// The state is a `limit` child; the mask at [`KW_MASK_SHIFT`] says its parent's key.
pub(super) const KW_LIMITED: u64 = KW_LIVE << 2;
pub(super) const KW_MASK_SHIFT: u32 = 48;

/// `meta`: the expiry in the low [`EXP_BITS`], in [`EXP_UNIT`]s (rounded up).
pub(super) const EXP_BITS: u32 = 39;
pub(super) const EXP_MAX: u64 = (1 << EXP_BITS) - 1;
/// The expiry's unit, 1 ms: 39 bits of it reach 17 years past the clock's origin
/// (later expiries saturate there), and the default lifetimes are whole seconds.
pub(super) const EXP_UNIT: u64 = 1_000_000;
/// `meta`: the TCP flags seen, FIN, SYN, RST and ACK forward in the low four bits
/// and reverse in the next four ([`TCP_ACK`]).
pub(super) const TCP_SHIFT: u32 = EXP_BITS;
pub(super) const TCP_BITS: u64 = 0xff;
/// The ACK bit of [`TCP_BITS`] (forward; `<< 4` reverse), set only once both SYNs
/// are seen, as FreeBSD sets `ACK_FWD`/`ACK_REV`.
pub(super) const TCP_ACK: u64 = 0x08;
/// `meta`: the sequence number in the top 17 bits; odd while a writer changes the
/// slot. 2^16 changes of one slot during one reader's few nanoseconds would be
/// needed to fool it.
pub(super) const SEQ_SHIFT: u32 = TCP_SHIFT + 8;
pub(super) const SEQ_ONE: u64 = 1 << SEQ_SHIFT;
/// `meta` without its sequence: what a state carries when it moves.
pub(super) const CONTENT: u64 = SEQ_ONE - 1;

/// The expiry word of `ns` nanoseconds: rounded up, saturated.
#[inline]
pub(super) fn exp_units(ns: u64) -> u64 {
    ns.div_ceil(EXP_UNIT).min(EXP_MAX)
}

/// When the state of `meta` expires, in nanoseconds.
#[inline]
pub(super) fn expires(meta: u64) -> u64 {
    (meta & EXP_MAX) * EXP_UNIT
}

/// `meta`'s TCP flags in the form the lifetimes take: forward in the low byte,
/// reverse in the high byte, each as the header's bits (FIN, SYN, RST, ACK).
#[inline]
pub(super) fn tcp_seen(meta: u64) -> u16 {
    let t = (meta >> TCP_SHIFT) & TCP_BITS;
    let one = |n: u64| (n & 7) as u16 | ((n & TCP_ACK) as u16) << 1;
    one(t) | one(t >> 4) << 8
}

/// The sequence part of `meta`, shifted down.
#[inline]
pub(super) fn seq(meta: u64) -> u64 {
    meta >> SEQ_SHIFT
}

/// One state: one cache line. All fields are atomics so that readers may read them
/// while a writer changes them; only `meta` is ever written by a reader (its flags
/// and expiry, by compare-and-swap).
#[derive(Debug, Default)]
#[repr(align(64))]
pub(super) struct Slot {
    /// The key's addresses: source words, then destination words (canonical order).
    pub(super) addr: [AtomicU64; 4],
    /// [`Key::word`], [`KW_LIVE`], [`KW_SWAPPED`], [`KW_LIMITED`] and the mask.
    pub(super) kw: AtomicU64,
    /// The creating rule's number (low half) and id (high half).
    pub(super) rule: AtomicU64,
    /// The key's hash with the table's seed: where its probe starts, and a reader's
    /// first test of a slot.
    pub(super) hash: AtomicU64,
    pub(super) meta: AtomicU64,
}

/// A slot's fields as one writer copies them (no `meta`).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Fields {
    pub(super) addr: [u64; 4],
    pub(super) kw: u64,
    pub(super) rule: u64,
    pub(super) hash: u64,
}

impl Fields {
    pub(super) fn key(&self) -> Key {
        Key::from_words(self.addr, self.kw)
    }

    pub(super) fn live(&self) -> bool {
        self.kw & KW_LIVE != 0
    }

    pub(super) fn rule_id(&self) -> u32 {
        (self.rule >> 32) as u32
    }
}

impl Slot {
    /// A writer's start of a change: the sequence made odd. Returns `meta` as it
    /// was, with the flags and expiry the last reader left (no reader can change
    /// them from here until [`publish`](Self::publish)).
    #[inline]
    pub(super) fn begin(&self) -> u64 {
        let m = self.meta.fetch_add(SEQ_ONE, Ordering::Relaxed);
        // The odd sequence before any of the stores that follow.
        fence(Ordering::Release);
        m
    }

    /// A writer's end of a change begun when `meta` was `was`: the next even
    /// sequence, with `content` (flags and expiry) — the slot's fields stored
    /// before it.
    #[inline]
    pub(super) fn publish(&self, was: u64, content: u64) {
        let next = (was & !CONTENT).wrapping_add(2 * SEQ_ONE);
        self.meta
            .store(next | (content & CONTENT), Ordering::Release);
    }

    /// The fields, as a writer reads them (only writers store them, and it holds
    /// the lock).
    #[inline]
    pub(super) fn fields(&self) -> Fields {
        Fields {
            addr: [0, 1, 2, 3].map(|k| self.addr[k].load(Ordering::Relaxed)),
            kw: self.kw.load(Ordering::Relaxed),
            rule: self.rule.load(Ordering::Relaxed),
            hash: self.hash.load(Ordering::Relaxed),
        }
    }

    /// Stores `f` (between [`begin`](Self::begin) and [`publish`](Self::publish)).
    #[inline]
    pub(super) fn store(&self, f: &Fields) {
        for (a, v) in self.addr.iter().zip(f.addr) {
            a.store(v, Ordering::Relaxed);
        }
        self.kw.store(f.kw, Ordering::Relaxed);
        self.rule.store(f.rule, Ordering::Relaxed);
        self.hash.store(f.hash, Ordering::Relaxed);
    }

    /// A writer's removal of the state: the slot empty.
    #[inline]
    pub(super) fn clear(&self) {
        let m = self.begin();
        self.kw.store(0, Ordering::Relaxed);
        self.publish(m, 0);
    }
}
