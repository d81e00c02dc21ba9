//! A bridge's address table (FreeBSD's `bridge_rtnode` table in `if_bridge.c`):
//! which member a (VLAN, MAC address) was last seen on, read by every worker without
//! a lock.
//!
//! The table is open addressing over a fixed array of slots, each two atomic words:
//! the key (address, VLAN, a live bit and a 3-bit generation) and the value (member,
//! flags, expiry in seconds, the same generation). Readers ([`BridgeRtable::lookup`])
//! take no lock and write nothing: they read the key, the value, then the key again,
//! and take the value only if the key did not change and the generations agree, so
//! a value is never paired with another address's key. A slot being rewritten while
//! a reader probes can make that reader miss an address; the bridge then floods the
//! frame, as it does for any unknown address, and the next frame finds it.
//!
//! Writers take one lock. Learning is batched ([`BridgeRtable::learn`]): a worker
//! asks [`BridgeRtable::needs_learning`] per frame (a read), collects the addresses
//! that are new, moved or due for a refresh, and hands them over once per vector, so
//! a known host costs no write at all and an active one a write a second. Entries
//! expire `ageing` seconds after their last refresh (300 s by default, FreeBSD's
//! `net.link.bridge` and bridge(4)'s `timeout`); an expired entry is a miss at once
//! and its slot is reclaimed by [`BridgeRtable::age`] or by a learn that needs room.
//!
//! The table is bounded ([`BridgeRtable::new`]'s `max`, bridge(4)'s `maxaddr`, 2000
//! by default): when it is full a learn first reclaims expired entries near the new
//! address's slot, then evicts the dynamic entry there that was refreshed least
//! recently, but only one idle for [`EVICT_IDLE_FLOOR`] seconds at least (counted in
//! [`RtStats::evicted`]); with none, the new address is refused
//! ([`RtStats::refused`], FreeBSD's `brtexceeded`) and its frames are flooded as any
//! unknown address's. Static entries are never evicted. Why the floor: evicting the
//! stalest of a window let a MAC flood (60 k/s from one port) evict hosts that were
//! talking, whose unicast then flooded to the flooder (23% of it); FreeBSD refuses
//! every new address once full, which keeps active hosts too but leaves a host that
//! arrives after a flood unlearned for the whole ageing time (300 s). With the floor
//! an active host (a frame a minute) is never evicted, and the table is open to new
//! hosts again a minute after a flood.
//!
//! During a spanning-tree topology change the ageing time is the forward delay
//! (802.1D §8.3.5, [`BridgeRtable::set_short_ageing`]): entries not refreshed within
//! it are misses, active hosts stay learned.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use wire::EthernetAddress;

/// bridge(4)'s default `maxaddr`.
pub const DEFAULT_MAX: usize = 2000;
/// bridge(4)'s default `timeout`, in seconds.
pub const DEFAULT_AGEING: u32 = 300;
/// An entry is refreshed (written) at most this often, in seconds, however many
/// frames its address sends.
const REFRESH: u32 = 1;
/// Entries a full table's learn looks at for one to reclaim or evict.
const EVICT_WINDOW: usize = 16;
/// Seconds an entry must have been idle (not refreshed) before a full table may
/// evict it for a new address (see the module).
pub const EVICT_IDLE_FLOOR: u32 = 60;
/// The largest table (`max`): 2^26 addresses.
const MAX_ENTRIES: usize = 1 << 26;

const LIVE: u64 = 1 << 63;
const GEN_SHIFT: u32 = 60;
const GEN_MASK: u64 = 0b111;
const VLAN_SHIFT: u32 = 48;
const MAC_MASK: u64 = (1 << 48) - 1;
/// The value's generation bits (the key's, copied).
const VGEN_SHIFT: u32 = 29;

/// What a member's entry says: the member (the bridge's port index) and its flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtEntry {
    pub member: u16,
    pub flags: RtFlags,
}

/// An entry's flags (bridge(4)'s `static` and `sticky`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RtFlags {
    /// Added by hand (`static`): never expires, never moves, never evicted.
    pub is_static: bool,
    /// Learned on a sticky member: never moves to another member (it still ages).
    pub sticky: bool,
}

impl RtFlags {
    fn bits(self) -> u64 {
        u64::from(self.is_static) | u64::from(self.sticky) << 1
    }
    fn of(bits: u64) -> RtFlags {
        RtFlags {
            is_static: bits & 1 != 0,
            sticky: bits & 2 != 0,
        }
    }
}

/// An address a worker saw as a source, for [`BridgeRtable::learn`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Learn {
    pub vlan: u16,
    pub mac: EthernetAddress,
    pub member: u16,
    /// The member is sticky: the entry, once made, stays on it.
    pub sticky: bool,
}

/// The table's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RtStats {
    /// Entries held (expired ones not yet reclaimed included).
    pub entries: usize,
    /// Entries made by learning.
    pub learned: u64,
    /// Learned entries that moved to another member (a host that moved).
    pub moved: u64,
    /// Dynamic entries evicted to make room in a full table (idle for
    /// [`EVICT_IDLE_FLOOR`] at least).
    pub evicted: u64,
    /// New addresses refused: the table was full, and no entry near the address
    /// expired or idle long enough to be evicted.
    pub refused: u64,
    /// Expired entries reclaimed.
    pub expired: u64,
}

impl RtStats {
    /// Adds the table's counts into the stack's (`bridge.learned`, `moved`,
    /// `evicted`, `refused`, `expired`), when those are read.
    pub fn add_into(&self, s: &mut crate::stats::Stats) {
        s.bridge.learned += self.learned;
        s.bridge.moved += self.moved;
        s.bridge.evicted += self.evicted;
        s.bridge.refused += self.refused;
        s.bridge.expired += self.expired;
    }
}

/// Why an entry could not be added.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtError {
    /// The table holds `max` entries and none near the address could be evicted.
    Full,
    /// A VLAN id above 4095.
    BadVlan,
}

impl std::fmt::Display for RtError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RtError::Full => f.write_str("bridge address table full"),
            RtError::BadVlan => f.write_str("VLAN id out of range (0-4095)"),
        }
    }
}

impl std::error::Error for RtError {}

#[derive(Debug, Default)]
struct Slot {
    key: AtomicU64,
    val: AtomicU64,
}

/// What only the writer touches.
#[derive(Debug, Default)]
struct Books {
    count: usize,
    /// Where the next [`BridgeRtable::age`] call carries on.
    cursor: usize,
    stats: RtStats,
}

/// A bridge's address table (see the module).
#[derive(Debug)]
pub struct BridgeRtable {
    slots: Box<[Slot]>,
    mask: usize,
    max: usize,
    ageing: u32,
    seed: u64,
    /// Seconds taken off every dynamic entry's life (`ageing` less the short
    /// ageing time) while a topology change lasts; 0 otherwise.
    shorten: AtomicU32,
    books: Mutex<Books>,
}

fn key_of(vlan: u16, mac: EthernetAddress) -> u64 {
    let mut m = [0u8; 8];
    m[2..].copy_from_slice(&mac.0);
    (u64::from(vlan & 0xfff) << VLAN_SHIFT) | (u64::from_be_bytes(m) & MAC_MASK)
}

fn mac_of(key: u64) -> EthernetAddress {
    let b = (key & MAC_MASK).to_be_bytes();
    EthernetAddress([b[2], b[3], b[4], b[5], b[6], b[7]])
}

fn gen_of_key(k: u64) -> u64 {
    (k >> GEN_SHIFT) & GEN_MASK
}

/// The key without its live bit and generation (address and VLAN).
fn ident(k: u64) -> u64 {
    k & !(LIVE | GEN_MASK << GEN_SHIFT)
}

fn val_of(member: u16, flags: RtFlags, expire: u32, gen: u64) -> u64 {
    u64::from(member) | flags.bits() << 16 | gen << VGEN_SHIFT | u64::from(expire) << 32
}

fn expire_of(v: u64) -> u32 {
    (v >> 32) as u32
}

fn entry_of(v: u64) -> RtEntry {
    RtEntry {
        member: v as u16,
        flags: RtFlags::of((v >> 16) & 0xff),
    }
}

impl BridgeRtable {
    /// A table for at most `max` addresses (at least 1, at most 2^26), whose learned
    /// entries live `ageing` seconds after their last refresh; `seed` keys the
    /// hash (so that an attacker cannot aim addresses at one slot).
    pub fn new(max: usize, ageing: u32, seed: u64) -> BridgeRtable {
        let max = max.clamp(1, MAX_ENTRIES);
        // At most two-thirds full: probes stay short and always end at an empty slot.
        let n = (max + max / 2 + 1).max(8).next_power_of_two();
        BridgeRtable {
            slots: std::iter::repeat_with(Slot::default).take(n).collect(),
            mask: n - 1,
            max,
            ageing,
            seed,
            shorten: AtomicU32::new(0),
            books: Mutex::new(Books::default()),
        }
    }

    /// The most addresses the table holds.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Seconds a learned entry lives after its last refresh.
    pub fn ageing(&self) -> u32 {
        self.ageing
    }

    /// Ages learned entries after `secs` without a refresh instead of the ageing
    /// time (`Some`: a topology change, 802.1D §8.3.5's short ageing with the
    /// forward delay), or after the ageing time again (`None`). Entries refreshed
    /// within `secs` stay; the others are misses at once and reclaimed by
    /// [`BridgeRtable::age`].
    pub fn set_short_ageing(&self, secs: Option<u32>) {
        let cut = secs.map_or(0, |s| self.ageing.saturating_sub(s));
        if self.shorten.load(Ordering::Relaxed) != cut {
            self.shorten.store(cut, Ordering::Relaxed);
        }
    }

    /// The ageing time in force: the short one during a topology change.
    pub fn ageing_now(&self) -> u32 {
        self.ageing - self.shorten.load(Ordering::Relaxed)
    }

    /// Whether a dynamic entry expiring at `exp` is dead at `now`, with the ageing
    /// in force (`cut`: [`BridgeRtable::shorten`]'s value); static entries
    /// (`u32::MAX`) never are.
    #[inline]
    fn dead(exp: u32, now: u32, cut: u32) -> bool {
        exp != u32::MAX && exp <= now.saturating_add(cut)
    }

    fn books(&self) -> std::sync::MutexGuard<'_, Books> {
        self.books.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[inline]
    fn home(&self, id: u64) -> usize {
        route::mix64(id ^ self.seed) as usize & self.mask
    }

    /// Whether the table is too big to stay in a core's caches (more than 64k
    /// slots, 1 MiB): worth [`BridgeRtable::touch`]ing a vector's addresses first.
    #[inline]
    pub fn is_large(&self) -> bool {
        self.mask >= 1 << 16
    }

    /// Loads the home slot of `mac` on `vlan` and returns its key word, to be
    /// thrown away (`std::hint::black_box`): a vector's loads made back to back,
    /// before its lookups, overlap their cache and TLB misses (VPP's prefetching,
    /// with plain loads).
    #[inline]
    pub fn touch(&self, vlan: u16, mac: EthernetAddress) -> u64 {
        self.slots[self.home(key_of(vlan, mac))]
            .key
            .load(Ordering::Relaxed)
    }

    /// The live entry for `mac` on `vlan` at `now` (seconds of the stack's clock),
    /// without a lock. `None` for an unknown or expired address.
    #[inline]
    pub fn lookup(&self, vlan: u16, mac: EthernetAddress, now: u32) -> Option<RtEntry> {
        self.read(key_of(vlan, mac), now).map(|(e, _)| e)
    }

    /// The entry and its expiry, as a reader sees them.
    #[inline]
    fn read(&self, id: u64, now: u32) -> Option<(RtEntry, u32)> {
        let cut = self.shorten.load(Ordering::Relaxed);
        let mut pos = self.home(id);
        for _ in 0..=self.mask {
            let s = &self.slots[pos];
            let k1 = s.key.load(Ordering::Acquire);
            if k1 & LIVE == 0 {
                return None;
            }
            if ident(k1) == id {
                let v = s.val.load(Ordering::Acquire);
                let k2 = s.key.load(Ordering::Acquire);
                if k1 != k2 || (v >> VGEN_SHIFT) & GEN_MASK != gen_of_key(k1) {
                    // Rewritten under us: a miss (the frame is flooded).
                    return None;
                }
                let exp = expire_of(v);
                if Self::dead(exp, now, cut) {
                    return None;
                }
                return Some((entry_of(v), exp));
            }
            pos = (pos + 1) & self.mask;
        }
        None
    }

    /// Whether a frame from `mac` on `vlan` arriving on `member` has something to
    /// teach the table: the address is unknown, expired, on another member (and
    /// may move), or due for a refresh (at most once a second). A read
    /// only; the worker hands what it says yes to to [`BridgeRtable::learn`].
    #[inline]
    pub fn needs_learning(&self, vlan: u16, mac: EthernetAddress, member: u16, now: u32) -> bool {
        match self.read(key_of(vlan, mac), now) {
            None => true,
            Some((e, exp)) => {
                if e.flags.is_static {
                    false
                } else if e.member != member {
                    !e.flags.sticky
                } else {
                    exp < now.saturating_add(self.ageing).saturating_sub(REFRESH)
                }
            }
        }
    }

    /// Learns a batch of source addresses seen at `now`, under the writer lock
    /// taken once: new addresses are added (evicting when full, see the module),
    /// known ones refreshed, moved ones moved unless static or sticky. Multicast and
    /// broadcast sources and VLAN ids above 4095 are ignored.
    pub fn learn(&self, items: &[Learn], now: u32) {
        if items.is_empty() {
            return;
        }
        let b = self.books();
        self.learn_locked(b, items, now);
    }

    /// [`BridgeRtable::learn`] if the writer's lock is free at once; false (and
    /// nothing learned) if another writer holds it. What the data path calls: a
    /// worker never waits for the control side (a listing of a big table holds the
    /// lock for milliseconds), and what it could not learn it sees again on the
    /// address's next frame.
    pub fn try_learn(&self, items: &[Learn], now: u32) -> bool {
        if items.is_empty() {
            return true;
        }
        let b = match self.books.try_lock() {
            Ok(b) => b,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return false,
        };
        self.learn_locked(b, items, now);
        true
    }

    fn learn_locked(&self, mut b: std::sync::MutexGuard<'_, Books>, items: &[Learn], now: u32) {
        let expire = now.saturating_add(self.ageing);
        for l in items {
            if l.mac.is_multicast() || l.mac.is_broadcast() || l.vlan > 0xfff {
                continue;
            }
            let id = key_of(l.vlan, l.mac);
            if let Some(pos) = self.find(id) {
                let s = &self.slots[pos];
                let k = s.key.load(Ordering::Relaxed);
                let v = s.val.load(Ordering::Relaxed);
                let e = entry_of(v);
                if e.flags.is_static {
                    continue;
                }
                let live = expire_of(v) > now;
                let member = if e.member != l.member && !(e.flags.sticky && live) {
                    if live {
                        b.stats.moved += 1;
                    }
                    l.member
                } else {
                    e.member
                };
                let flags = if member == e.member && live {
                    e.flags
                } else {
                    RtFlags {
                        is_static: false,
                        sticky: l.sticky,
                    }
                };
                s.val.store(
                    val_of(member, flags, expire, gen_of_key(k)),
                    Ordering::Release,
                );
                continue;
            }
            let flags = RtFlags {
                is_static: false,
                sticky: l.sticky,
            };
            if self
                .insert(&mut b, id, l.member, flags, expire, now)
                .is_ok()
            {
                b.stats.learned += 1;
            } else {
                b.stats.refused += 1;
            }
        }
    }

    /// Adds (or replaces) a static entry: `mac` on `vlan` is on `member`, for good
    /// (bridge(4)'s `static`).
    pub fn add_static(
        &self,
        vlan: u16,
        mac: EthernetAddress,
        member: u16,
        now: u32,
    ) -> Result<(), RtError> {
        if vlan > 0xfff {
            return Err(RtError::BadVlan);
        }
        let mut b = self.books();
        let id = key_of(vlan, mac);
        let flags = RtFlags {
            is_static: true,
            sticky: false,
        };
        if let Some(pos) = self.find(id) {
            let s = &self.slots[pos];
            let g = gen_of_key(s.key.load(Ordering::Relaxed));
            s.val
                .store(val_of(member, flags, u32::MAX, g), Ordering::Release);
            return Ok(());
        }
        self.insert(&mut b, id, member, flags, u32::MAX, now)
    }

    /// Removes the entry for `mac` on `vlan`; whether there was one (bridge(4)'s
    /// `deladdr`).
    pub fn delete(&self, vlan: u16, mac: EthernetAddress) -> bool {
        let mut b = self.books();
        match self.find(key_of(vlan, mac)) {
            Some(pos) => {
                self.remove_at(&mut b, pos);
                true
            }
            None => false,
        }
    }

    /// Removes the entries of `member` (a member leaving the bridge), the static ones
    /// too when `statics`; how many went.
    pub fn delete_member(&self, member: u16, statics: bool) -> usize {
        self.remove_where(|e, _| e.member == member && (statics || !e.flags.is_static))
    }

    /// Removes every dynamic entry, and the static ones too when `statics`
    /// (bridge(4)'s `flush` and `flushall`); how many went.
    pub fn flush(&self, statics: bool) -> usize {
        self.remove_where(|e, _| statics || !e.flags.is_static)
    }

    fn remove_where(&self, pred: impl Fn(RtEntry, u32) -> bool) -> usize {
        let mut b = self.books();
        let mut n = 0;
        let mut pos = 0;
        // Removing shifts later entries back, possibly into `pos`: look again there.
        while pos <= self.mask {
            let s = &self.slots[pos];
            let k = s.key.load(Ordering::Relaxed);
            let v = s.val.load(Ordering::Relaxed);
            if k & LIVE != 0 && pred(entry_of(v), expire_of(v)) {
                self.remove_at(&mut b, pos);
                n += 1;
            } else {
                pos += 1;
            }
        }
        n
    }

    /// Reclaims expired entries, looking at no more than `budget` slots from where
    /// the last call stopped (the ageing sweep: `bridge_rtage`); how many went.
    pub fn age(&self, now: u32, budget: usize) -> usize {
        let mut b = self.books();
        let cut = self.shorten.load(Ordering::Relaxed);
        let mut n = 0;
        let mut pos = b.cursor & self.mask;
        let mut looked = 0;
        while looked < budget.min(self.mask + 1) {
            let s = &self.slots[pos];
            let k = s.key.load(Ordering::Relaxed);
            if k & LIVE != 0 && Self::dead(expire_of(s.val.load(Ordering::Relaxed)), now, cut) {
                self.remove_at(&mut b, pos);
                b.stats.expired += 1;
                n += 1;
                // An entry may have shifted back into `pos`: look at it next (the
                // removals end: each leaves one entry fewer).
                continue;
            }
            pos = (pos + 1) & self.mask;
            looked += 1;
        }
        b.cursor = pos;
        n
    }

    /// Every live entry at `now`: VLAN, address, entry, expiry with the ageing in
    /// force (`u32::MAX` for a static one), in slot order.
    pub fn entries(&self, now: u32) -> Vec<(u16, EthernetAddress, RtEntry, u32)> {
        let _b = self.books();
        let cut = self.shorten.load(Ordering::Relaxed);
        self.slots
            .iter()
            .filter_map(|s| {
                let k = s.key.load(Ordering::Relaxed);
                let v = s.val.load(Ordering::Relaxed);
                let exp = expire_of(v);
                (k & LIVE != 0 && !Self::dead(exp, now, cut)).then(|| {
                    (
                        ((k >> VLAN_SHIFT) & 0xfff) as u16,
                        mac_of(k),
                        entry_of(v),
                        if exp == u32::MAX { exp } else { exp - cut },
                    )
                })
            })
            .collect()
    }

    pub fn stats(&self) -> RtStats {
        let b = self.books();
        RtStats {
            entries: b.count,
            ..b.stats
        }
    }

    // ---- the writer's side (under `books`) ----------------------------------------

    /// The slot holding `id`, live or expired.
    fn find(&self, id: u64) -> Option<usize> {
        let mut pos = self.home(id);
        for _ in 0..=self.mask {
            let k = self.slots[pos].key.load(Ordering::Relaxed);
            if k & LIVE == 0 {
                return None;
            }
            if ident(k) == id {
                return Some(pos);
            }
            pos = (pos + 1) & self.mask;
        }
        None
    }

    fn insert(
        &self,
        b: &mut Books,
        id: u64,
        member: u16,
        flags: RtFlags,
        expire: u32,
        now: u32,
    ) -> Result<(), RtError> {
        if b.count >= self.max && !self.make_room(b, id, now) {
            return Err(RtError::Full);
        }
        let mut pos = self.home(id);
        while self.slots[pos].key.load(Ordering::Relaxed) & LIVE != 0 {
            pos = (pos + 1) & self.mask;
        }
        let s = &self.slots[pos];
        let g = (gen_of_key(s.key.load(Ordering::Relaxed)) + 1) & GEN_MASK;
        // The value first: a reader that sees the key sees this value's generation.
        s.val
            .store(val_of(member, flags, expire, g), Ordering::Release);
        s.key.store(id | LIVE | g << GEN_SHIFT, Ordering::Release);
        b.count += 1;
        Ok(())
    }

    /// Room for one more in a full table: an expired entry near `id`'s home slot
    /// reclaimed, else, of the [`EVICT_WINDOW`] entries that follow it, the dynamic
    /// one refreshed least recently evicted if it has been idle for
    /// [`EVICT_IDLE_FLOOR`] (empty slots are passed over). False: none may go.
    fn make_room(&self, b: &mut Books, id: u64, now: u32) -> bool {
        let cut = self.shorten.load(Ordering::Relaxed);
        // Refreshed `EVICT_IDLE_FLOOR` ago or earlier: expiring by then.
        let idle_by = now
            .saturating_add(self.ageing)
            .saturating_sub(EVICT_IDLE_FLOOR);
        let mut pos = self.home(id);
        let mut oldest: Option<(u32, usize)> = None;
        let mut seen = 0;
        for _ in 0..=self.mask {
            if seen == EVICT_WINDOW {
                break;
            }
            let s = &self.slots[pos];
            if s.key.load(Ordering::Relaxed) & LIVE != 0 {
                seen += 1;
                let v = s.val.load(Ordering::Relaxed);
                let exp = expire_of(v);
                if Self::dead(exp, now, cut) {
                    self.remove_at(b, pos);
                    b.stats.expired += 1;
                    return true;
                }
                if !entry_of(v).flags.is_static
                    && exp <= idle_by
                    && oldest.is_none_or(|(e, _)| exp < e)
                {
                    oldest = Some((exp, pos));
                }
            }
            pos = (pos + 1) & self.mask;
        }
        match oldest {
            Some((_, pos)) => {
                self.remove_at(b, pos);
                b.stats.evicted += 1;
                true
            }
            None => false,
        }
    }

    /// Empties slot `pos`, moving later entries of its probe run back so that no
    /// lookup stops short of them (Knuth's deletion for linear probing).
    fn remove_at(&self, b: &mut Books, pos: usize) {
        let mut hole = pos;
        let mut j = pos;
        loop {
            j = (j + 1) & self.mask;
            let k = self.slots[j].key.load(Ordering::Relaxed);
            if k & LIVE == 0 {
                break;
            }
            let home = self.home(ident(k));
            // Whether `home` lies cyclically in (hole, j]: then the entry stays.
            let stays = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if stays {
                continue;
            }
            // Move it into the hole: a new generation there, the value first.
            let v = self.slots[j].val.load(Ordering::Relaxed);
            let h = &self.slots[hole];
            let g = (gen_of_key(h.key.load(Ordering::Relaxed)) + 1) & GEN_MASK;
            h.val.store(
                (v & !(GEN_MASK << VGEN_SHIFT)) | g << VGEN_SHIFT,
                Ordering::Release,
            );
            h.key
                .store(ident(k) | LIVE | g << GEN_SHIFT, Ordering::Release);
            hole = j;
        }
        let h = &self.slots[hole];
        let k = h.key.load(Ordering::Relaxed);
        // Empty, keeping the generation so that the slot's next key gets a new one.
        h.key.store(k & (GEN_MASK << GEN_SHIFT), Ordering::Release);
        b.count -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn mac(i: u32) -> EthernetAddress {
        let b = i.to_be_bytes();
        EthernetAddress([0x02, 0, b[0], b[1], b[2], b[3]])
    }

    fn learn(m: u32, member: u16) -> Learn {
        Learn {
            vlan: 0,
            mac: mac(m),
            member,
            sticky: false,
        }
    }

    #[test]
    fn learns_refreshes_moves_and_ages() {
        let t = BridgeRtable::new(100, 300, 7);
        assert!(t.needs_learning(0, mac(1), 3, 10));
        t.learn(&[learn(1, 3)], 10);
        assert_eq!(t.lookup(0, mac(1), 10).map(|e| e.member), Some(3));
        // The same VLAN only.
        assert_eq!(t.lookup(5, mac(1), 10), None);
        // Known, fresh, same member: nothing to learn, until a second has passed.
        assert!(!t.needs_learning(0, mac(1), 3, 10));
        assert!(t.needs_learning(0, mac(1), 3, 12));
        // Seen on another member: moves.
        assert!(t.needs_learning(0, mac(1), 4, 12));
        t.learn(&[learn(1, 4)], 12);
        assert_eq!(t.lookup(0, mac(1), 12).map(|e| e.member), Some(4));
        assert_eq!(t.stats().moved, 1);
        // 300 s after the last refresh it is gone for readers, then reclaimed.
        assert!(t.lookup(0, mac(1), 311).is_some());
        assert_eq!(t.lookup(0, mac(1), 312), None);
        assert_eq!(t.age(312, usize::MAX), 1);
        assert_eq!(t.stats().entries, 0);
        assert_eq!(t.stats().expired, 1);
        // Multicast and broadcast sources are never learned.
        t.learn(
            &[
                Learn {
                    mac: EthernetAddress([0x01, 0, 0x5e, 0, 0, 1]),
                    ..learn(0, 1)
                },
                Learn {
                    mac: EthernetAddress::BROADCAST,
                    ..learn(0, 1)
                },
            ],
            20,
        );
        assert_eq!(t.stats().entries, 0);
    }

    #[test]
    fn static_entries_stay_and_sticky_ones_do_not_move() {
        let t = BridgeRtable::new(100, 300, 1);
        t.add_static(0, mac(9), 2, 0).unwrap();
        t.learn(&[learn(9, 5)], 1);
        assert!(!t.needs_learning(0, mac(9), 5, 1));
        let e = t.lookup(0, mac(9), 1_000_000).unwrap();
        assert_eq!((e.member, e.flags.is_static), (2, true));
        assert_eq!(t.flush(false), 0);
        assert_eq!(t.delete_member(2, false), 0);
        t.learn(
            &[Learn {
                sticky: true,
                ..learn(8, 1)
            }],
            1,
        );
        assert!(!t.needs_learning(0, mac(8), 6, 1));
        t.learn(&[learn(8, 6)], 2);
        assert_eq!(t.lookup(0, mac(8), 2).map(|e| e.member), Some(1));
        // Once it has aged, the address may be learned elsewhere.
        t.learn(&[learn(8, 6)], 400);
        assert_eq!(t.lookup(0, mac(8), 400).map(|e| e.member), Some(6));
        assert_eq!(t.flush(true), 2);
        assert_eq!(t.stats().entries, 0);
        assert_eq!(t.add_static(4096, mac(1), 1, 0), Err(RtError::BadVlan));
    }

    #[test]
    fn a_full_table_refuses_new_addresses_while_its_entries_are_fresh() {
        let t = BridgeRtable::new(64, 300, 3);
        for i in 0..64 {
            t.learn(&[learn(i, 1)], 10);
        }
        // A flood of new addresses 59 s later: every entry is younger than the
        // floor, so none is evicted, every new one refused.
        for i in 1000..1500 {
            t.learn(&[learn(i, 2)], 10 + EVICT_IDLE_FLOOR - 1);
        }
        let s = t.stats();
        assert_eq!((s.entries, s.evicted, s.refused), (64, 0, 500), "{s:?}");
        for i in 0..64 {
            assert_eq!(t.lookup(0, mac(i), 69).map(|e| e.member), Some(1), "{i}");
        }
        assert_eq!(t.lookup(0, mac(1000), 69), None);
        // Refreshed hosts stay; idle ones may go once idle for the floor.
        for i in 0..32 {
            t.learn(&[learn(i, 1)], 69);
        }
        for i in 2000..2200 {
            t.learn(&[learn(i, 2)], 10 + EVICT_IDLE_FLOOR);
        }
        let s = t.stats();
        assert!(s.evicted > 0 && s.evicted <= 32, "{s:?}");
        for i in 0..32 {
            assert!(t.lookup(0, mac(i), 70).is_some(), "active host {i} evicted");
        }
    }

    #[test]
    fn a_full_table_evicts_the_stalest_idle_dynamic_entry_and_never_a_static_one() {
        let t = BridgeRtable::new(64, 300, 3);
        for i in 0..64 {
            t.learn(&[learn(i, 1)], i);
        }
        assert_eq!(t.stats().entries, 64);
        t.learn(&[learn(1000, 2)], 200);
        let s = t.stats();
        assert_eq!((s.entries, s.evicted), (64, 1));
        assert_eq!(t.lookup(0, mac(1000), 200).map(|e| e.member), Some(2));
        // A table of static entries refuses more, and counts the refusal.
        let t = BridgeRtable::new(8, 300, 3);
        for i in 0..8 {
            t.add_static(0, mac(i), 1, 0).unwrap();
        }
        assert_eq!(t.add_static(0, mac(99), 1, 0), Err(RtError::Full));
        t.learn(&[learn(100, 1)], 1000);
        assert_eq!(t.stats().refused, 1);
        assert_eq!(t.lookup(0, mac(100), 1000), None);
        // Expired entries make room first.
        let t = BridgeRtable::new(8, 10, 3);
        for i in 0..8 {
            t.learn(&[learn(i, 1)], 0);
        }
        t.learn(&[learn(50, 1)], 20);
        let s = t.stats();
        assert_eq!((s.entries, s.evicted), (8, 0));
        assert!(s.expired >= 1);
    }

    #[test]
    fn short_ageing_ages_idle_entries_and_keeps_active_ones() {
        let t = BridgeRtable::new(100, 300, 9);
        t.learn(&[learn(1, 1), learn(2, 2)], 100);
        t.add_static(0, mac(3), 3, 100).unwrap();
        // 802.1D §8.3.5: during a topology change, the forward delay (15 s).
        t.set_short_ageing(Some(15));
        assert_eq!(t.ageing_now(), 15);
        t.learn(&[learn(1, 1)], 110);
        assert!(t.lookup(0, mac(1), 115).is_some());
        assert!(t.lookup(0, mac(2), 114).is_some());
        assert_eq!(t.lookup(0, mac(2), 115), None, "idle 15 s");
        assert!(t.needs_learning(0, mac(2), 2, 115));
        assert!(t.lookup(0, mac(3), 1000).is_some(), "static entries stay");
        assert_eq!(t.age(116, usize::MAX), 1);
        let left = t.entries(116);
        let e1 = left.iter().find(|e| e.1 == mac(1)).unwrap();
        assert_eq!(e1.3, 125, "expiry listed with the short ageing");
        t.set_short_ageing(None);
        assert_eq!(t.lookup(0, mac(1), 300).map(|e| e.member), Some(1));
    }

    #[derive(Clone, Debug)]
    enum Op {
        Learn(u32, u16, u32),
        Static(u32, u16),
        Delete(u32),
        DeleteMember(u16),
        Age(u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u32..40, 0u16..4, 0u32..5).prop_map(|(m, p, dt)| Op::Learn(m, p, dt)),
            1 => (0u32..40, 0u16..4).prop_map(|(m, p)| Op::Static(m, p)),
            2 => (0u32..40).prop_map(Op::Delete),
            1 => (0u16..4).prop_map(Op::DeleteMember),
            1 => (0u32..30).prop_map(Op::Age),
        ]
    }

    proptest! {
        /// Against a map (a table large enough never to evict): every lookup agrees,
        /// whatever deletions shifted entries around.
        #[test]
        fn the_table_is_a_map(ops in proptest::collection::vec(op(), 1..300), seed in any::<u64>()) {
            let t = BridgeRtable::new(64, 20, seed);
            let mut model: HashMap<u32, (u16, bool, u32)> = HashMap::new();
            let mut now = 0u32;
            for o in ops {
                match o {
                    Op::Learn(m, p, dt) => {
                        now += dt;
                        t.learn(&[learn(m, p)], now);
                        match model.get_mut(&m) {
                            Some((_, true, _)) => {}
                            Some(e) if e.2 > now => *e = (p, false, now + 20),
                            _ => { model.insert(m, (p, false, now + 20)); }
                        }
                    }
                    Op::Static(m, p) => {
                        t.add_static(0, mac(m), p, now).unwrap();
                        model.insert(m, (p, true, u32::MAX));
                    }
                    Op::Delete(m) => {
                        prop_assert_eq!(t.delete(0, mac(m)), model.remove(&m).is_some());
                    }
                    Op::DeleteMember(p) => {
                        let n = t.delete_member(p, false);
                        let before = model.len();
                        model.retain(|_, e| e.0 != p || e.1);
                        prop_assert_eq!(n, before - model.len());
                    }
                    Op::Age(dt) => {
                        now += dt;
                        t.age(now, usize::MAX);
                        model.retain(|_, e| e.2 > now);
                    }
                }
                for m in 0..40 {
                    let want = model.get(&m).filter(|e| e.2 > now).map(|e| e.0);
                    prop_assert_eq!(t.lookup(0, mac(m), now).map(|e| e.member), want, "mac {}", m);
                }
            }
        }
    }

    /// Readers racing a writer that moves, deletes and re-adds addresses never see
    /// an address on a member it was never put on.
    #[test]
    fn readers_never_see_a_value_of_another_address() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        let t = Arc::new(BridgeRtable::new(32, 300, 5));
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(AtomicU64::new(0));
        // Address i is only ever put on member i % 8 or i % 8 + 8.
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (t, stop, seen) = (t.clone(), stop.clone(), seen.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        for i in 0..48u32 {
                            if let Some(e) = t.lookup(0, mac(i), 1) {
                                assert_eq!(e.member % 8, (i % 8) as u16, "mac {i}");
                                seen.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                })
            })
            .collect();
        // Write until the readers have read a good deal meanwhile (they may start
        // late on a busy machine), and at least 20,000 times.
        let mut round = 0u32;
        while round < 20_000 || (seen.load(Ordering::Relaxed) < 100_000 && round < 50_000_000) {
            let i = round.wrapping_mul(2_654_435_761) % 48;
            let member = (i % 8) as u16 + if round.is_multiple_of(2) { 0 } else { 8 };
            match round % 3 {
                0 => {
                    t.delete(0, mac(i));
                }
                _ => t.learn(&[learn(i, member)], 1),
            }
            round += 1;
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().unwrap();
        }
        assert!(seen.load(Ordering::Relaxed) > 0);
    }
}
