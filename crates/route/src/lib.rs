//! The FIB's longest-prefix-match algorithms, behind one trait ([`Lookup`]), in the
//! spirit of FreeBSD's `fib_algo` modules:
//!
//! - [`Radix`]: a BSD-style binary radix (Patricia) tree for IPv4 and IPv6, with insert
//!   and delete. Correctness over speed: it is the reference and the test oracle.
//! - [`Dir248`]: DIR-24-8 for IPv4 (Gupta, Lin, McKeown 1998), the baseline.
//! - [`Poptrie`]: Poptrie (Asai, Ohara, SIGCOMM 2015): a direct table indexed by the
//!   address's top bits, then 6-bit stride nodes whose children and leaves are
//!   compressed by popcount. [`Poptrie4`] for IPv4, [`Poptrie6`] for IPv6.
//! - [`Bsearch`]: the table flattened into sorted address ranges, binary searched
//!   (FreeBSD's `bsearch4`): the choice for small tables.
//!
//! On top of them, the routing table itself ([`fib`]): the control plane's [`Rib`] of
//! prefix routes with BSD flags ([`RtFlags`]), next-hop objects carrying the resolved
//! L2 rewrite ([`NextHop`]), multipath groups as resilient bucket tables
//! ([`EcmpGroup`]), the compiled, immutable [`Fib`] workers read, and the routing
//! message stream ([`rtmsg`]).
//!
//! Beside them, for the forwarding path after the lookup:
//!
//! - [`EcmpGroup`]: an ECMP group as a resilient bucket table, indexed by the seeded
//!   flow hash ([`flow_hash4`], [`flow_hash6`]); membership changes move the fewest
//!   flows they can.
//! - [`FlowTable`]: the per-worker flow table of the PRESTO 2009 paper (destination or
//!   4-tuple mode, bounded, idle expiry, entries validated by generation numbers), for
//!   stateful ECMP and to skip the lookup for recent flows.
//!
//! What it owns: prefixes ([`Prefix4`], [`Prefix6`]) and the lookup structures. The
//! fast structures are built once from a list of routes and never changed: the FIB
//! compiles a new one and publishes it (RCU-style), so readers never lock.
//!
//! [`table`] reads route tables as text (the bench's and the tests' full BGP table).
//!
//! What it may call: `std` only. No `unsafe`.
//!
//! A next hop is an index (`u32`) into the FIB's next-hop table; the fast structures
//! keep one bit of it for their own use, so an index is at most [`MAX_NEXTHOP`].

#![forbid(unsafe_code)]

mod bsearch;
mod dir248;
mod ecmp;
pub mod fib;
mod flowtable;
pub mod fpm;
mod ipprefix;
pub mod nexthop;
mod poptrie;
mod prefix;
mod radix;
pub mod rtmsg;
pub mod table;

pub use bsearch::Bsearch;
pub use dir248::Dir248;
pub use ecmp::{flow_hash4, flow_hash6, mix64, EcmpError, EcmpGroup, Member};
pub use fib::{Fib, FibAlgo, PathInfo, Rib, RouteInfo, RouteSpec, RtError};
pub use flowtable::{FlowKey, FlowMode, FlowStats, FlowTable, FlowTableConfig, WAYS as FLOW_WAYS};
pub use ipprefix::IpPrefix;
pub use nexthop::{NextHop, NhKey, NhKind, RtFlags};
pub use poptrie::{Poptrie, Poptrie4, Poptrie6};
pub use prefix::{Addr, Prefix, Prefix4, Prefix6};
pub use radix::Radix;
pub use rtmsg::{RtBus, RtMsg, RtSubscriber, RtmType};

/// The largest next-hop index the fast structures can hold (`2^31 - 2`).
pub const MAX_NEXTHOP: u32 = 0x7fff_fffe;

/// A longest-prefix-match structure built from a list of routes.
pub trait Lookup: Sized {
    /// The address family: `u32` for IPv4, `u128` for IPv6.
    type Addr: Addr;

    /// Builds the structure from `(prefix, next-hop index)` pairs. A prefix listed
    /// twice keeps its last next hop. Panics if a next hop exceeds [`MAX_NEXTHOP`].
    fn build(routes: &[(Prefix<Self::Addr>, u32)]) -> Self;

    /// The next hop of the longest prefix holding `addr`, if any.
    fn lookup(&self, addr: Self::Addr) -> Option<u32>;

    /// The next hop of each of `addrs` into `out` (of the same length; panics if it
    /// is not), as [`Lookup::lookup`] would give them. A structure may interleave the
    /// lookups so that their memory reads overlap; the default looks up one at a time.
    fn lookup_batch(&self, addrs: &[Self::Addr], out: &mut [Option<u32>]) {
        assert_eq!(addrs.len(), out.len(), "lookup_batch: lengths differ");
        for (&a, o) in addrs.iter().zip(out.iter_mut()) {
            *o = self.lookup(a);
        }
    }

    /// Heap bytes the structure holds (what a lookup may touch).
    fn memory(&self) -> usize;
}

pub(crate) fn check_nexthop(nh: u32) {
    assert!(nh <= MAX_NEXTHOP, "next-hop index {nh} exceeds MAX_NEXTHOP");
}

#[cfg(test)]
mod prop_tests;
