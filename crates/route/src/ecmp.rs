//! ECMP groups as resilient bucket tables, and the seeded flow hash that indexes them.
//!
//! A group is a table of 2^k buckets (256-4096), each holding the next-hop index of one
//! member; a flow's hash picks a bucket, so a flow stays on its next hop for as long as
//! its bucket does. Membership changes move the fewest buckets they can (the "resilient
//! hashing" of switch ASICs, RFC 2992's critique of modulo-N answered): a removed
//! member's buckets are spread over the others and no other bucket moves; an added
//! member takes its share from the others and no bucket moves between two old members.
//! Without a flow table, only the flows of the moved buckets change next hop; with one
//! (see [`crate::FlowTable`]), none does.
//!
//! What it owns: the bucket table and the member list. What it may call: `std` only.

use crate::check_nexthop;
use std::fmt;

/// A bucket with no member (only in an empty group).
const EMPTY: u32 = u32::MAX;

/// One member of a group: a next-hop index and its integer weight (its share of the
/// buckets is proportional to it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Member {
    pub nexthop: u32,
    pub weight: u32,
}

/// Why a membership change was refused (the group is left as it was).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EcmpError {
    /// The bucket count is not a power of two in
    /// [`EcmpGroup::MIN_BUCKETS`]..=[`EcmpGroup::MAX_BUCKETS`].
    BadBucketCount(usize),
    /// A member of weight 0 (remove it instead).
    ZeroWeight(u32),
    /// The same next hop listed twice.
    Duplicate(u32),
    /// More members than buckets.
    TooManyMembers(usize),
    /// The weights sum past `u32::MAX`.
    WeightOverflow,
}

impl fmt::Display for EcmpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EcmpError::BadBucketCount(n) => write!(
                f,
                "{n} buckets: expected a power of two from {} to {}",
                EcmpGroup::MIN_BUCKETS,
                EcmpGroup::MAX_BUCKETS
            ),
            EcmpError::ZeroWeight(nh) => write!(f, "next hop {nh} has weight 0"),
            EcmpError::Duplicate(nh) => write!(f, "next hop {nh} listed twice"),
            EcmpError::TooManyMembers(n) => write!(f, "{n} members: more than the buckets"),
            EcmpError::WeightOverflow => write!(f, "weights sum past 2^32 - 1"),
        }
    }
}

impl std::error::Error for EcmpError {}

/// A resilient ECMP group: `select(hash)` is one shift and one load.
///
/// Deterministic: the same sequence of membership changes gives the same table.
#[derive(Clone, PartialEq, Eq)]
pub struct EcmpGroup {
    /// The next hop of each bucket ([`EMPTY`] only when there are no members).
    buckets: Vec<u32>,
    /// `32 - log2(buckets)`: a bucket is picked by the hash's top bits.
    shift: u32,
    members: Vec<Member>,
}

impl fmt::Debug for EcmpGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EcmpGroup")
            .field("buckets", &self.buckets.len())
            .field("members", &self.members)
            .finish()
    }
}

impl Default for EcmpGroup {
    fn default() -> Self {
        Self::new(Self::DEFAULT_BUCKETS).expect("the default bucket count is valid")
    }
}

impl EcmpGroup {
    pub const MIN_BUCKETS: usize = 256;
    pub const MAX_BUCKETS: usize = 4096;
    /// Enough that 16 equal members are balanced within 1/32 of a share.
    pub const DEFAULT_BUCKETS: usize = 512;

    /// An empty group of `buckets` buckets.
    pub fn new(buckets: usize) -> Result<Self, EcmpError> {
        if !buckets.is_power_of_two() || !(Self::MIN_BUCKETS..=Self::MAX_BUCKETS).contains(&buckets)
        {
            return Err(EcmpError::BadBucketCount(buckets));
        }
        Ok(EcmpGroup {
            buckets: vec![EMPTY; buckets],
            shift: 32 - buckets.trailing_zeros(),
            members: Vec::new(),
        })
    }

    /// A group of `buckets` buckets over `nexthops`, each of weight 1.
    pub fn with_nexthops(buckets: usize, nexthops: &[u32]) -> Result<Self, EcmpError> {
        let mut g = Self::new(buckets)?;
        let members: Vec<Member> = nexthops
            .iter()
            .map(|&nexthop| Member { nexthop, weight: 1 })
            .collect();
        g.set_members(&members)?;
        Ok(g)
    }

    /// The member next hop for a flow of hash `hash` (from [`flow_hash4`] or
    /// [`flow_hash6`]); `None` if the group has no members.
    #[inline]
    pub fn select(&self, hash: u32) -> Option<u32> {
        // The top bits: the low ones are left to RSS, which picks the worker.
        let nh = self.buckets[(hash >> self.shift) as usize];
        (nh != EMPTY).then_some(nh)
    }

    /// The members, in the order they were added.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// The next hop of each bucket (`u32::MAX` in an empty group).
    pub fn buckets(&self) -> &[u32] {
        &self.buckets
    }

    /// Buckets held by `nexthop`.
    pub fn share(&self, nexthop: u32) -> usize {
        self.buckets.iter().filter(|&&b| b == nexthop).count()
    }

    /// Adds `nexthop` with `weight`, or changes its weight if it is a member: it takes
    /// its share of buckets from the others, and no other bucket moves.
    pub fn add_member(&mut self, nexthop: u32, weight: u32) -> Result<(), EcmpError> {
        let mut m = self.members.clone();
        match m.iter_mut().find(|x| x.nexthop == nexthop) {
            Some(x) => x.weight = weight,
            None => m.push(Member { nexthop, weight }),
        }
        self.set_members(&m)
    }

    /// Removes `nexthop`; its buckets are spread over the others and no other bucket
    /// moves. Returns whether it was a member.
    pub fn remove_member(&mut self, nexthop: u32) -> bool {
        let Some(i) = self.members.iter().position(|x| x.nexthop == nexthop) else {
            return false;
        };
        let mut m = self.members.clone();
        m.remove(i);
        self.set_members(&m)
            .expect("a subset of a valid member list is valid");
        true
    }

    /// Makes `members` the group's members, moving the fewest buckets: every member
    /// ends with its weighted share (rounded, largest remainders first, then the
    /// members already holding more, so that a balanced table stays put), and a bucket
    /// moves only away from a removed member or one above its share, to one below its
    /// share. Adding a member to a balanced group of equal weights therefore moves only
    /// buckets to the new member; removing one moves only its buckets.
    pub fn set_members(&mut self, members: &[Member]) -> Result<(), EcmpError> {
        let n = self.buckets.len();
        if members.len() > n {
            return Err(EcmpError::TooManyMembers(members.len()));
        }
        let mut total = 0u32;
        for (i, m) in members.iter().enumerate() {
            check_nexthop(m.nexthop);
            if m.weight == 0 {
                return Err(EcmpError::ZeroWeight(m.nexthop));
            }
            if members[..i].iter().any(|x| x.nexthop == m.nexthop) {
                return Err(EcmpError::Duplicate(m.nexthop));
            }
            total = total
                .checked_add(m.weight)
                .ok_or(EcmpError::WeightOverflow)?;
        }
        self.members = members.to_vec();
        if members.is_empty() {
            self.buckets.fill(EMPTY);
            return Ok(());
        }
        let current: Vec<usize> = members.iter().map(|m| self.share(m.nexthop)).collect();
        let target = shares(n, members, total as u64, &current);
        // Free: buckets of removed members, then each member's excess, taken from its
        // highest buckets; both in bucket order, so the result is deterministic.
        let mut held = current.clone();
        let mut free = Vec::new();
        for b in (0..n).rev() {
            let nh = self.buckets[b];
            match members.iter().position(|m| m.nexthop == nh) {
                Some(i) if held[i] > target[i] => {
                    held[i] -= 1;
                    free.push(b);
                }
                Some(_) => {}
                None => free.push(b),
            }
        }
        free.reverse();
        // Deal the free buckets round-robin among the members below their share, so a
        // removed member's flows are spread over all the others.
        let mut i = 0;
        for b in free {
            while held[i] >= target[i] {
                i = (i + 1) % members.len();
            }
            self.buckets[b] = members[i].nexthop;
            held[i] += 1;
            i = (i + 1) % members.len();
        }
        debug_assert_eq!(held, target);
        Ok(())
    }
}

/// Each member's bucket count: `n * weight / total` rounded down, and the remaining
/// buckets to the largest remainders, ties to the member holding more now, then to
/// the earlier member.
fn shares(n: usize, members: &[Member], total: u64, current: &[usize]) -> Vec<usize> {
    let exact: Vec<(usize, u64)> = members
        .iter()
        .map(|m| {
            let num = n as u64 * m.weight as u64;
            ((num / total) as usize, num % total)
        })
        .collect();
    let mut target: Vec<usize> = exact.iter().map(|&(q, _)| q).collect();
    let left = n - target.iter().sum::<usize>();
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by(|&a, &b| {
        exact[b]
            .1
            .cmp(&exact[a].1)
            .then(current[b].cmp(&current[a]))
            .then(a.cmp(&b))
    });
    for &i in order.iter().take(left) {
        target[i] += 1;
    }
    target
}

/// A 64-bit mixer (the finaliser of Stafford's "Mix13" variant of SplitMix64): every
/// input bit affects every output bit with probability close to 1/2.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

const K1: u64 = 0x9e37_79b9_7f4a_7c15;

/// The flow hash of an IPv4 flow: addresses and ports in host order, `proto` the IP
/// protocol; `seed` makes the hash unpredictable from outside (pick it at random at
/// start-up, so an attacker cannot aim flows at one next hop).
///
/// Two rounds of a 64-bit mixer over two words. **Not symmetric**: the
/// two directions of a connection hash differently; hash `(min, max)` of the endpoints
/// if both must go the same way. Use all 32 bits: [`EcmpGroup::select`] takes the top
/// ones, and RSS-like worker selection may take the bottom ones.
#[inline]
pub fn flow_hash4(src: u32, dst: u32, proto: u8, sport: u16, dport: u16, seed: u64) -> u32 {
    let a = (src as u64) << 32 | dst as u64;
    let b = (sport as u64) << 32 | (dport as u64) << 16 | proto as u64;
    let h = mix64(a ^ seed);
    (mix64(h ^ b ^ seed.rotate_left(32).wrapping_add(K1)) >> 32) as u32
}

/// The flow hash of an IPv6 flow (addresses as `u128` in host order); the same
/// properties as [`flow_hash4`] (seeded, not symmetric), four mixer rounds.
#[inline]
pub fn flow_hash6(src: u128, dst: u128, proto: u8, sport: u16, dport: u16, seed: u64) -> u32 {
    let b = (sport as u64) << 32 | (dport as u64) << 16 | proto as u64;
    let mut h = seed;
    for w in [
        (src >> 64) as u64,
        src as u64,
        (dst >> 64) as u64,
        dst as u64 ^ b.rotate_left(40),
    ] {
        h = mix64(h.wrapping_add(K1) ^ w);
    }
    (mix64(h ^ b) >> 32) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn equal(nhs: &[u32]) -> Vec<Member> {
        nhs.iter()
            .map(|&nexthop| Member { nexthop, weight: 1 })
            .collect()
    }

    /// Buckets whose next hop differs between `a` and `b`, as (before, after).
    fn moved(a: &EcmpGroup, b: &EcmpGroup) -> Vec<(u32, u32)> {
        a.buckets()
            .iter()
            .zip(b.buckets())
            .filter(|(x, y)| x != y)
            .map(|(&x, &y)| (x, y))
            .collect()
    }

    #[test]
    fn bucket_counts_are_checked() {
        assert!(EcmpGroup::new(512).is_ok());
        assert_eq!(EcmpGroup::new(300), Err(EcmpError::BadBucketCount(300)));
        assert_eq!(EcmpGroup::new(128), Err(EcmpError::BadBucketCount(128)));
        assert_eq!(EcmpGroup::new(8192), Err(EcmpError::BadBucketCount(8192)));
        assert_eq!(EcmpGroup::default().buckets().len(), 512);
    }

    #[test]
    fn empty_group_selects_nothing() {
        let mut g = EcmpGroup::default();
        assert_eq!(g.select(0x1234_5678), None);
        g.add_member(7, 1).unwrap();
        assert!((0..1000u32).all(|h| g.select(h.wrapping_mul(0x0101_0101)) == Some(7)));
        assert!(g.remove_member(7));
        assert!(!g.remove_member(7));
        assert_eq!(g.select(0), None);
    }

    #[test]
    fn bad_member_lists_leave_the_group_unchanged() {
        let mut g = EcmpGroup::with_nexthops(256, &[1, 2]).unwrap();
        let before = g.clone();
        assert_eq!(g.set_members(&equal(&[3, 3])), Err(EcmpError::Duplicate(3)));
        assert_eq!(g.add_member(4, 0), Err(EcmpError::ZeroWeight(4)));
        let many: Vec<u32> = (0..257).collect();
        assert_eq!(
            g.set_members(&equal(&many)),
            Err(EcmpError::TooManyMembers(257))
        );
        let heavy = [
            Member {
                nexthop: 1,
                weight: u32::MAX,
            },
            Member {
                nexthop: 2,
                weight: 1,
            },
        ];
        assert_eq!(g.set_members(&heavy), Err(EcmpError::WeightOverflow));
        assert_eq!(g, before);
    }

    #[test]
    fn weights_give_proportional_shares() {
        let mut g = EcmpGroup::new(1024).unwrap();
        g.add_member(10, 1).unwrap();
        g.add_member(11, 3).unwrap();
        assert_eq!((g.share(10), g.share(11)), (256, 768));
        // Raising a weight moves buckets only to that member.
        let before = g.clone();
        g.add_member(10, 3).unwrap();
        assert_eq!((g.share(10), g.share(11)), (512, 512));
        assert!(moved(&before, &g).iter().all(|&(a, b)| (a, b) == (11, 10)));
    }

    #[test]
    fn removal_spreads_the_buckets_over_the_others() {
        let g = EcmpGroup::with_nexthops(512, &[1, 2, 3, 4, 5]).unwrap();
        let mut h = g.clone();
        h.remove_member(3);
        let m = moved(&g, &h);
        assert_eq!(m.len(), g.share(3));
        for nh in [1, 2, 4, 5] {
            let got = m.iter().filter(|&&(_, b)| b == nh).count();
            assert!((25..=26).contains(&got), "{nh}: {got}");
        }
    }

    #[test]
    fn the_layout_is_deterministic() {
        let a = EcmpGroup::with_nexthops(4096, &[9, 8, 7]).unwrap();
        let b = EcmpGroup::with_nexthops(4096, &[9, 8, 7]).unwrap();
        assert_eq!(a, b);
        assert_eq!(&a.buckets()[..6], &[9, 8, 7, 9, 8, 7]);
    }

    #[test]
    fn flow_hashes_depend_on_every_field_and_the_seed() {
        let base = flow_hash4(0x0a00_0001, 0x0a00_0002, 6, 1234, 80, 1);
        for other in [
            flow_hash4(0x0a00_0003, 0x0a00_0002, 6, 1234, 80, 1),
            flow_hash4(0x0a00_0001, 0x0a00_0003, 6, 1234, 80, 1),
            flow_hash4(0x0a00_0001, 0x0a00_0002, 17, 1234, 80, 1),
            flow_hash4(0x0a00_0001, 0x0a00_0002, 6, 1235, 80, 1),
            flow_hash4(0x0a00_0001, 0x0a00_0002, 6, 1234, 81, 1),
            flow_hash4(0x0a00_0001, 0x0a00_0002, 6, 1234, 80, 2),
            // Not symmetric.
            flow_hash4(0x0a00_0002, 0x0a00_0001, 6, 80, 1234, 1),
        ] {
            assert_ne!(base, other);
        }
        let s6 = 0x2001_0db8u128 << 96;
        let base6 = flow_hash6(s6 | 1, s6 | 2, 6, 1234, 80, 1);
        assert_ne!(base6, flow_hash6(s6 | 1, s6 | 2, 6, 1234, 80, 2));
        assert_ne!(base6, flow_hash6(s6 | 1 | 1 << 80, s6 | 2, 6, 1234, 80, 1));
        assert_ne!(base6, flow_hash6(s6 | 1, s6 | 2 | 1 << 90, 6, 1234, 80, 1));
        assert_ne!(base6, flow_hash6(s6 | 1, s6 | 2, 6, 1234, 81, 1));
    }

    /// Sequential flows (one source, consecutive ports or destinations, the worst
    /// case for a weak hash) spread evenly over the buckets and over 2 and 4 workers.
    #[test]
    fn flow_hashes_spread_sequential_flows() {
        let n = 1 << 16;
        let mut hashes: Vec<u32> = (0..n)
            .map(|i| flow_hash4(0x0a00_0001, 0xc0a8_0000 + i, 17, 5000, 53, 42))
            .collect();
        hashes.extend((0..n).map(|i| flow_hash4(0x0a00_0001, 0xc0a8_0001, 6, i as u16, 443, 42)));
        hashes
            .extend((0..n).map(|i| flow_hash6(1 << 120, (2 << 120) + i as u128, 17, 5000, 53, 42)));
        for h in hashes.chunks(n as usize) {
            let mut hi = [0u32; 512];
            let mut lo = [0u32; 4];
            for &x in h {
                hi[(x >> 23) as usize] += 1;
                lo[(x & 3) as usize] += 1;
            }
            // 128 expected a bucket; 8 standard deviations is ~90.
            let (min, max) = (hi.iter().min().unwrap(), hi.iter().max().unwrap());
            assert!(*min > 128 - 60 && *max < 128 + 60, "{min}..{max}");
            assert!(lo.iter().all(|&c| c.abs_diff(n / 4) < 800), "{lo:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Equal weights: every member holds floor or ceil of its share, and selection
        /// by random hashes follows the buckets.
        #[test]
        fn equal_members_are_balanced(k in 8u32..=12, n in 1usize..=40, seed in any::<u64>()) {
            let buckets = 1usize << k;
            let nhs: Vec<u32> = (0..n as u32).map(|i| i * 3 + 1).collect();
            let g = EcmpGroup::with_nexthops(buckets, &nhs).unwrap();
            let fair = buckets / n;
            for &nh in &nhs {
                let s = g.share(nh);
                prop_assert!(s == fair || s == fair + 1, "{} of {}", s, fair);
            }
            let mut count = vec![0usize; n];
            for i in 0..20_000u32 {
                let h = flow_hash4(i, !i, 6, 1, 2, seed);
                let nh = g.select(h).unwrap();
                count[((nh - 1) / 3) as usize] += 1;
            }
            let expect = 20_000.0 / n as f64;
            for c in count {
                // Bucket rounding (at most 1/fair) plus sampling noise.
                prop_assert!((c as f64 - expect).abs() < expect * 0.25 + 5.0 * expect.sqrt(),
                    "{} vs {}", c, expect);
            }
        }

        /// Removing a member moves its buckets and no other; the survivors stay
        /// balanced. Then adding a member moves only ~1/(n+1) of the buckets, all to
        /// the new member.
        #[test]
        fn changes_move_the_minimum(
            k in 8u32..=12,
            n in 2usize..=24,
            victim in any::<prop::sample::Index>(),
            history in prop::collection::vec(any::<bool>(), 0..6),
        ) {
            let buckets = 1usize << k;
            let mut nhs: Vec<u32> = (100..100 + n as u32).collect();
            let mut g = EcmpGroup::with_nexthops(buckets, &nhs).unwrap();
            // A little history first: members come and go.
            let mut next = 1000;
            for add in history {
                if add || nhs.len() <= 2 {
                    g.add_member(next, 1).unwrap();
                    nhs.push(next);
                    next += 1;
                } else {
                    let v = nhs.remove(0);
                    g.remove_member(v);
                }
            }
            let v = nhs[victim.index(nhs.len())];
            let before = g.clone();
            prop_assert!(g.remove_member(v));
            let m = moved(&before, &g);
            prop_assert_eq!(m.len(), before.share(v));
            prop_assert!(m.iter().all(|&(a, b)| a == v && b != v));
            nhs.retain(|&x| x != v);
            let fair = buckets / nhs.len();
            for &nh in &nhs {
                let s = g.share(nh);
                prop_assert!(s == fair || s == fair + 1);
            }

            let before = g.clone();
            g.add_member(7, 1).unwrap();
            let m = moved(&before, &g);
            prop_assert!(m.iter().all(|&(_, b)| b == 7));
            let want = buckets / (nhs.len() + 1);
            prop_assert!(m.len() == want || m.len() == want + 1, "{} vs {}", m.len(), want);
        }

        /// Weighted shares are within one bucket of exact, and any change moves
        /// buckets only from members that lost share to members that gained it.
        #[test]
        fn weighted_changes_move_only_between_losers_and_gainers(
            a in prop::collection::vec((0u32..12, 1u32..8), 1..10),
            b in prop::collection::vec((0u32..12, 1u32..8), 1..10),
        ) {
            let dedup = |v: Vec<(u32, u32)>| {
                let mut out: Vec<Member> = Vec::new();
                for (nexthop, weight) in v {
                    if !out.iter().any(|m| m.nexthop == nexthop) {
                        out.push(Member { nexthop, weight });
                    }
                }
                out
            };
            let (a, b) = (dedup(a), dedup(b));
            let mut g = EcmpGroup::new(512).unwrap();
            g.set_members(&a).unwrap();
            let before = g.clone();
            g.set_members(&b).unwrap();
            let total: u32 = b.iter().map(|m| m.weight).sum();
            for m in &b {
                let exact = 512.0 * m.weight as f64 / total as f64;
                prop_assert!((g.share(m.nexthop) as f64 - exact).abs() < 1.0);
            }
            for (from, to) in moved(&before, &g) {
                prop_assert!(g.share(from) < before.share(from));
                prop_assert!(g.share(to) > before.share(to));
            }
        }
    }
}
