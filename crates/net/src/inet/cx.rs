//! IPv4's batch context and published state.
//!
//! [`InetConfig`] is IPv4's part of the stack's published configuration (the
//! default gateway, learnt path MTUs, the stack's own addresses, the ICMP echo
//! sockets by identifier). [`Inet4`] is the state IPv4 owns on a worker (the ICMP rate
//! limit, the IP id); [`InetCx`] is what an IPv4 stage is given for a batch: the
//! link's context, what both families share (`crate::ip::IpCx`: the FIB,
//! reassembly, the flow table) and IPv4's own state, as separate borrows. What
//! IPv4 learns for the layers above it (an ICMP error about a TCP segment) it
//! leaves in `IpCx::ctlinput` for the worker to hand up: IPv4 never names a
//! transport above it.

use crate::ifindex::IfIndex;
pub(crate) use crate::ip::{
    pmtu_upsert, quoted_l4, quoted_tcp4, CtlInput, HardError, IpCx, TcpCtl, TokenBucket,
};
use crate::link::LinkCx;
use crate::sockbuf::SockShared;
use crate::FxBuild;
use dev::Instant;
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::Arc;

/// IPv4's part of the published configuration.
#[derive(Clone, Debug, Default)]
pub struct InetConfig {
    /// A default gateway set before its network was configured (the FIB holds the
    /// default route once it is).
    pub default_gw: Option<Ipv4Addr>,
    /// IPv4 path MTUs learnt from "fragmentation needed" (RFC 1191): destination,
    /// MTU, expiry, and whether a connection vouched for it ([`pmtu_upsert`]);
    /// bounded, aged as IPv6's.
    pub pmtu4: Vec<(Ipv4Addr, u32, Instant, bool)>,
    /// Every IPv4 address of the stack, in one array: the per-packet "is it ours"
    /// test reads it, not every interface's list. Made again at each publication.
    pub(crate) local4: Vec<Ipv4Addr>,
    /// A bit per address of `local4` (a one-word Bloom filter): most packets a
    /// router sees are not its own, and this answers "not ours" in two instructions.
    pub(crate) local4_bits: u64,
    /// Every subnet broadcast address of the stack's interfaces, with its interface;
    /// and their one-word Bloom filter, as `local4`'s.
    pub(crate) bcast4: Vec<(Ipv4Addr, IfIndex)>,
    pub(crate) bcast4_bits: u64,
    /// Every subnet network address of the stack's interfaces (subnets shorter
    /// than /31), with their one-word Bloom filter: with `bcast4`, what
    /// [`InetConfig::is_subnet_bcast`] asks.
    pub(crate) net4: Vec<Ipv4Addr>,
    pub(crate) net4_bits: u64,
    /// ICMP echo sockets by identifier.
    pub(crate) echo: HashMap<u16, Arc<SockShared>, FxBuild>,
    /// What `ip_input` does with source-routed packets (`net.inet.ip.sourceroute`,
    /// `net.inet.ip.accept_sourceroute`).
    pub srcroute: SourceRouting,
    /// Forward directed broadcasts (`net.inet.ip.directed-broadcast`): off, as
    /// RFC 2644 wants by default, `ip_forward` drops them (`ip.bcastfwd`); on, they
    /// leave as link-layer broadcasts, as FreeBSD's `ip_output` sends them.
    pub directed_broadcast: bool,
}

/// Source routing (LSRR, SSRR; RFC 791 §3.1), as FreeBSD's two switches have it.
/// Both off (the default, as FreeBSD's and Linux's): every source-routed packet is
/// dropped and counted in `ip.srcroute`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceRouting {
    /// Forward source-routed packets: at the hop the route names, its next address
    /// becomes the destination and ours is recorded (`net.inet.ip.sourceroute`,
    /// FreeBSD's `ip_dosourceroute`). Needs forwarding on the arrival interface.
    pub forward: bool,
    /// Deliver to ourselves a packet whose source route ends here
    /// (`net.inet.ip.accept_sourceroute`). Read only when `forward` is on: with it
    /// off every source-routed packet is dropped.
    pub accept: bool,
}

impl InetConfig {
    /// True if `a` is one of the stack's IPv4 addresses.
    #[inline]
    pub fn is_local(&self, a: Ipv4Addr) -> bool {
        self.local4_bits & local_bit(a) != 0 && self.local4.contains(&a)
    }

    /// True if `a` is a subnet broadcast address of interface `ifindex`
    /// ([`crate::link::iface::Ifnet::is_broadcast`] without the limited broadcast,
    /// in a few instructions for the addresses that are not).
    #[inline]
    pub fn is_bcast_on(&self, a: Ipv4Addr, ifindex: IfIndex) -> bool {
        self.bcast4_bits & local_bit(a) != 0 && self.bcast4.contains(&(a, ifindex))
    }

    /// True if `a` is the broadcast or network address of a subnet of any of the
    /// stack's interfaces (a /31 or /32 has neither, RFC 3021): a directed
    /// broadcast to one of our subnets, not a single host. No ICMP error is sent
    /// about a datagram to one (RFC 1122 §3.2.2, RFC 1812 §4.3.2.7).
    #[inline]
    pub fn is_subnet_bcast(&self, a: Ipv4Addr) -> bool {
        let bit = local_bit(a);
        (self.bcast4_bits & bit != 0 && self.bcast4.iter().any(|&(b, _)| b == a))
            || (self.net4_bits & bit != 0 && self.net4.contains(&a))
    }

    /// Sets the stack's IPv4 addresses, its interfaces' broadcast addresses and
    /// their subnets' network addresses (at each publication).
    pub(crate) fn set_local4(
        &mut self,
        addrs: Vec<Ipv4Addr>,
        bcasts: Vec<(Ipv4Addr, IfIndex)>,
        nets: Vec<Ipv4Addr>,
    ) {
        self.local4_bits = addrs.iter().fold(0, |b, &a| b | local_bit(a));
        self.local4 = addrs;
        self.bcast4_bits = bcasts.iter().fold(0, |b, &(a, _)| b | local_bit(a));
        self.bcast4 = bcasts;
        self.net4_bits = nets.iter().fold(0, |b, &a| b | local_bit(a));
        self.net4 = nets;
    }

    /// The path MTU towards `dst` if a "fragmentation needed" taught one that has not
    /// aged.
    pub fn path_mtu4(&self, dst: Ipv4Addr, now: Instant) -> Option<u32> {
        self.pmtu4
            .iter()
            .find(|p| p.0 == dst && p.2 > now)
            .map(|p| p.1)
    }
}

/// An address's bit in [`InetConfig::local4_bits`] (Fibonacci hashing).
#[inline(always)]
fn local_bit(a: Ipv4Addr) -> u64 {
    1 << (u32::from(a).wrapping_mul(0x9e37_79b1) >> 26)
}

/// How IPv4 changes its published state from the data path (a path MTU learnt):
/// the stack publishes the change as any other.
pub(crate) trait InetCtl {
    fn update_inet(&self, f: &mut dyn FnMut(&mut InetConfig));
}

/// IPv4's own state on a worker for a batch: its part of the published
/// configuration, the IP id counter, ICMP's rate limit, and how it changes what is
/// published. IPv6 has its own ([`crate::inet6::cx::Inet6`]), beside this one.
pub(crate) struct Inet4<'a> {
    pub inet: &'a InetConfig,
    pub icmp_bucket: &'a mut TokenBucket,
    pub ip_id: &'a mut u16,
    pub ctl4: &'a dyn InetCtl,
}

impl Inet4<'_> {
    pub fn next_ip_id(&mut self) -> u16 {
        *self.ip_id = self.ip_id.wrapping_add(1);
        *self.ip_id
    }
}

/// What an IPv4 stage is given for one batch: the link's context, what both IP
/// families share, and IPv4's own state, side by side (separate borrows of the
/// worker's parts; nothing of IPv6's).
pub(crate) struct InetCx<'b, 'a> {
    pub link: &'b mut LinkCx<'a>,
    pub ip: &'b mut IpCx<'a>,
    pub v4: &'b mut Inet4<'a>,
}

impl<'a> crate::link::AsLink<'a> for InetCx<'_, 'a> {
    #[inline(always)]
    fn link(&mut self) -> &mut LinkCx<'a> {
        self.link
    }
}

#[cfg(test)]
mod tests {
    use super::pmtu_upsert;
    use dev::{Duration, Instant};

    /// A full list: unheld messages (a UDP port anyone can quote) replace only
    /// expired or unheld entries, never a path a connection vouched for; a held one
    /// takes an expired entry first, then an unheld one, then the held one expiring
    /// first.
    #[test]
    fn unheld_entries_never_evict_held_ones() {
        let t0 = Instant::ZERO + Duration::from_secs(1000);
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut list = Vec::new();
        for d in 0..4u32 {
            assert!(pmtu_upsert(
                &mut list,
                (d, 1400, at(600 + u64::from(d)), true),
                t0,
                4
            ));
        }
        // A flood of unheld destinations changes nothing.
        for d in 100..200u32 {
            assert!(!pmtu_upsert(&mut list, (d, 1300, at(700), false), t0, 4));
        }
        assert_eq!(list.iter().map(|p| p.0).collect::<Vec<_>>(), [0, 1, 2, 3]);
        // Refreshing an existing destination keeps it held.
        assert!(pmtu_upsert(&mut list, (2, 1300, at(650), false), t0, 4));
        assert_eq!(list[2], (2, 1300, at(650), true));
        // Once an entry has expired an unheld one may take its place ...
        let later = at(600);
        assert!(pmtu_upsert(
            &mut list,
            (100, 1300, at(1300), false),
            later,
            4
        ));
        assert_eq!(list[0], (100, 1300, at(1300), false));
        // ... and unheld entries replace each other, the one expiring first.
        assert!(pmtu_upsert(
            &mut list,
            (101, 1300, at(1301), false),
            later,
            4
        ));
        assert_eq!(list[0].0, 101);
        // A held newcomer takes the unheld entry before any held one ...
        assert!(pmtu_upsert(&mut list, (5, 1300, at(1400), true), later, 4));
        assert_eq!(list[0], (5, 1300, at(1400), true));
        // ... and with none left, the held one expiring first (1, at 601).
        assert!(pmtu_upsert(&mut list, (6, 1300, at(1401), true), later, 4));
        assert_eq!(list.iter().map(|p| p.0).collect::<Vec<_>>(), [5, 6, 2, 3]);
    }
}
