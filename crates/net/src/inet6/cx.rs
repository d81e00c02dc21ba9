//! IPv6's batch context and published state: [`Inet6Config`] (the static default
//! router, and what neighbour discovery learnt: routers, prefixes, redirects, path
//! MTUs, its own timers' state), and [`Inet6Cx`], the IPv4 context below it
//! (reached through `Deref`) with IPv6's configuration and switches.

use crate::ifindex::IfIndex;
use crate::inet::cx::InetCx;
use crate::inet6::nd6::NdState;
use crate::link::iface::{In6Ifaddr, Inet6Addr};
use std::net::Ipv6Addr;
use std::sync::Arc;

/// IPv6's part of the published configuration.
#[derive(Clone, Debug, Default)]
pub struct Inet6Config {
    /// The IPv6 default router and the interface it is on (static; it wins over the
    /// routers learnt from advertisements).
    pub default_gw6: Option<(Ipv6Addr, IfIndex)>,
    /// IPv6 routers, on-link prefixes and redirects learnt from neighbour discovery.
    pub nd6: NdState,
    /// Every IPv6 address of the stack, in one list, and a bit per address (as
    /// `InetConfig`'s): the per-packet "is it ours" test reads these, not every
    /// interface's list. Made again at each publication.
    pub(crate) local6: Vec<Arc<In6Ifaddr>>,
    pub(crate) local6_bits: u64,
}

impl Inet6Config {
    /// The address `a` if it is one of the stack's (in any state).
    #[inline]
    pub fn local6(&self, a: Ipv6Addr) -> Option<&Arc<In6Ifaddr>> {
        if self.local6_bits & local6_bit(a) == 0 {
            return None;
        }
        self.local6.iter().find(|x| x.addr.addr == a)
    }

    /// Sets the stack's IPv6 addresses (at each publication).
    pub(crate) fn set_local6(&mut self, addrs: Vec<Arc<In6Ifaddr>>) {
        self.local6_bits = addrs.iter().fold(0, |b, x| b | local6_bit(x.addr.addr));
        self.local6 = addrs;
    }
}

/// An address's bit in [`Inet6Config::local6_bits`] (Fibonacci hashing of its low
/// 64 bits, where hosts differ).
#[inline(always)]
fn local6_bit(a: Ipv6Addr) -> u64 {
    1 << ((u128::from(a) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58)
}

/// How neighbour discovery changes the published state from the data path: what
/// advertisements taught, its timers' state, and addresses SLAAC forms.
pub(crate) trait Inet6Ctl {
    fn update_nd6(&self, f: &mut dyn FnMut(&mut NdState));
    /// Adds an autoconfigured address (tentative) to an interface, preferred until
    /// `preferred` and valid until `valid` (`None`: infinity); `Err` when the
    /// interface holds all it may.
    fn add_autoconf6(
        &self,
        ifindex: IfIndex,
        a: Inet6Addr,
        preferred: Option<dev::Instant>,
        valid: Option<dev::Instant>,
    ) -> Result<(), ()>;
    /// Removes an address and, unless another address shares it, its network's
    /// connected route (its valid lifetime ended, or its slot is reclaimed).
    fn delete_address6(&self, ifindex: IfIndex, a: Ipv6Addr);
    /// Wakes worker `w` (worker 0 runs neighbour discovery's timers).
    fn notify_worker(&self, w: usize);
    /// The rate limit of DAD's warnings.
    fn dad_log(&self) -> &crate::inet6::nd6::DadLog;
}

/// What an IPv6 stage may touch while processing one batch.
pub(crate) struct Inet6Cx<'a> {
    /// IPv4's context, below this one.
    pub ip4: InetCx<'a>,
    pub inet6: &'a Inet6Config,
    pub ctl6: &'a dyn Inet6Ctl,
    /// Duplicate address detection's probes per address (0: off).
    pub dad_transmits: u8,
    /// Take routers and prefixes from advertisements (`accept_rtadv`).
    pub accept_rtadv: bool,
    /// Form addresses from advertised prefixes.
    pub slaac: bool,
}

impl<'a> std::ops::Deref for Inet6Cx<'a> {
    type Target = InetCx<'a>;
    #[inline(always)]
    fn deref(&self) -> &InetCx<'a> {
        &self.ip4
    }
}

impl<'a> std::ops::DerefMut for Inet6Cx<'a> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut InetCx<'a> {
        &mut self.ip4
    }
}

impl<'a> crate::link::AsLink<'a> for Inet6Cx<'a> {
    #[inline(always)]
    fn link(&mut self) -> &mut crate::link::LinkCx<'a> {
        &mut self.ip4.link
    }
}
