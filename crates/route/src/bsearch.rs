//! Binary search over address ranges, for small tables (FreeBSD's `bsearch4` fib
//! algorithm): the prefixes are flattened into the sorted starts of the ranges over
//! which the longest match does not change, each with its next hop; a lookup is a
//! binary search for the last start at or below the address. A table of `n` routes
//! holds at most `2n + 1` ranges, so a lookup in the few routes of a host or a small
//! router is a handful of compares in one or two cache lines, where the radix tree
//! walks a chain of nodes, and Poptrie would want its 1 MiB direct array.

use crate::{check_nexthop, Addr, Lookup, Prefix, Radix};
use std::mem::size_of;

/// No route over a range.
const NONE: u32 = u32::MAX;

/// Sorted ranges with their next hops; built once.
#[derive(Clone, Debug)]
pub struct Bsearch<A> {
    /// The first address of each range, ascending; the first is always zero.
    starts: Vec<A>,
    /// The next hop over each range, or [`NONE`].
    hops: Vec<u32>,
}

impl<A: Addr> Lookup for Bsearch<A> {
    type Addr = A;

    fn build(routes: &[(Prefix<A>, u32)]) -> Self {
        for &(_, nh) in routes {
            check_nexthop(nh);
        }
        let radix = Radix::build(routes);
        // The longest match changes only where a prefix starts or just past where
        // one ends.
        let mut points = vec![A::ZERO];
        for &(p, _) in routes {
            let p = Prefix::new(p.addr, p.len);
            points.push(p.addr);
            points.extend(p.addr.last(p.len).checked_succ());
        }
        points.sort_unstable();
        points.dedup();
        let mut starts = Vec::with_capacity(points.len());
        let mut hops: Vec<u32> = Vec::with_capacity(points.len());
        for a in points {
            let nh = radix.lookup(a).unwrap_or(NONE);
            if hops.last() != Some(&nh) {
                starts.push(a);
                hops.push(nh);
            }
        }
        starts.shrink_to_fit();
        hops.shrink_to_fit();
        Bsearch { starts, hops }
    }

    #[inline]
    fn lookup(&self, addr: A) -> Option<u32> {
        // The last start at or below `addr`, halving a window whose first entry is
        // at or below it (the first start is zero); the compare picks the half
        // without a branch to mispredict.
        let mut base = 0;
        let mut n = self.starts.len();
        while n > 1 {
            let half = n / 2;
            // `select_unpredictable`: written as an `if` or as arithmetic, LLVM's
            // x86 cmov conversion made it a branch in this loop, mispredicted half
            // the time on mixed destinations (perf: a fifth of the forwarding stage
            // with 4 routes). The hint is why the workspace needs Rust 1.88.
            base = std::hint::select_unpredictable(
                self.starts[base + half] <= addr,
                base + half,
                base,
            );
            n -= half;
        }
        let nh = *self.hops.get(base)?;
        (nh != NONE).then_some(nh)
    }

    fn memory(&self) -> usize {
        self.starts.capacity() * size_of::<A>() + self.hops.capacity() * size_of::<u32>()
    }
}

impl<A: Addr> Bsearch<A> {
    /// The number of ranges.
    pub fn ranges(&self) -> usize {
        self.starts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Prefix4, Prefix6};

    #[test]
    fn ranges_of_nested_prefixes() {
        let routes = [
            (Prefix4::new(0x0a00_0000, 8), 1),
            (Prefix4::new(0x0a01_0000, 16), 2),
            (Prefix4::new(0x0a01_0100, 24), 3),
            (Prefix4::new(0xffff_ffff, 32), 4),
        ];
        let t = Bsearch::build(&routes);
        assert_eq!(t.lookup(0), None);
        assert_eq!(t.lookup(0x09ff_ffff), None);
        assert_eq!(t.lookup(0x0a00_0000), Some(1));
        assert_eq!(t.lookup(0x0a01_0000), Some(2));
        assert_eq!(t.lookup(0x0a01_0101), Some(3));
        assert_eq!(t.lookup(0x0a01_0200), Some(2));
        assert_eq!(t.lookup(0x0a02_0000), Some(1));
        assert_eq!(t.lookup(0x0b00_0000), None);
        assert_eq!(t.lookup(0xffff_fffe), None);
        assert_eq!(t.lookup(0xffff_ffff), Some(4));
        // 0, 10/8, 10.1/16, 10.1.1/24, back to /16, back to /8, none, the /32.
        assert_eq!(t.ranges(), 8);
    }

    #[test]
    fn empty_default_and_ipv6() {
        assert_eq!(Bsearch::<u32>::build(&[]).lookup(7), None);
        let t = Bsearch::build(&[(Prefix4::new(0, 0), 9)]);
        assert_eq!(t.lookup(0), Some(9));
        assert_eq!(t.lookup(u32::MAX), Some(9));
        assert_eq!(t.ranges(), 1);
        let p = Prefix6::new(0x2001_0002 << 96, 32);
        let t = Bsearch::build(&[(p, 1), (Prefix6::new(u128::MAX, 128), 2)]);
        assert_eq!(t.lookup(p.addr | 5), Some(1));
        assert_eq!(t.lookup(p.addr - 1), None);
        assert_eq!(t.lookup(u128::MAX), Some(2));
    }
}
