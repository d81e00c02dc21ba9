//! IPv6's batch context and published state: [`Inet6Config`] (the static default
//! router, and what neighbour discovery learnt, [`NdState`]: routers, prefixes,
//! redirects, path MTUs, its own timers' state), [`Inet6Ctl`] with the stack-wide
//! rate limit of DAD's warnings ([`DadLog`]), [`Inet6`], the state IPv6 owns on a
//! worker, and [`Inet6Cx`], what an IPv6 stage is given: the link's context, what
//! both families share (`crate::ip::IpCx`) and IPv6's own state, side by side. The
//! types are here, below every IPv6 module; neighbour discovery (`nd6`), which
//! fills them, keeps their methods and re-exports them.

use crate::ifindex::IfIndex;
use crate::ip::{IpCx, TokenBucket};
use crate::link::iface::{In6Ifaddr, Inet6Addr};
use crate::link::LinkCx;
use crate::loglimit::{LogCheck, LogLimit};
use dev::{Duration, Instant};
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
    fn dad_log(&self) -> &DadLog;
}

/// IPv6's own state on a worker for a batch: its part of the published
/// configuration and its switches, ICMPv6's rate limit (its own, as FreeBSD's
/// `icmp6errppslim` is), the counter fragment ids are drawn from, and how it
/// changes what is published. IPv4's is [`crate::inet::cx::Inet4`], beside it.
pub(crate) struct Inet6<'a> {
    pub inet6: &'a Inet6Config,
    pub ctl6: &'a dyn Inet6Ctl,
    /// Duplicate address detection's probes per address (0: off).
    pub dad_transmits: u8,
    /// Take routers and prefixes from advertisements (`accept_rtadv`).
    pub accept_rtadv: bool,
    /// Form addresses from advertised prefixes.
    pub slaac: bool,
    pub icmp_bucket: &'a mut TokenBucket,
    /// Counts the fragment headers this worker sent (their ids are this, keyed).
    pub frag_count: &'a mut u32,
}

/// What an IPv6 stage is given for one batch: the link's context, what both IP
/// families share, and IPv6's own state, side by side (separate borrows of the
/// worker's parts; nothing of IPv4's).
pub(crate) struct Inet6Cx<'b, 'a> {
    pub link: &'b mut LinkCx<'a>,
    pub ip: &'b mut IpCx<'a>,
    pub v6: &'b mut Inet6<'a>,
}

impl<'a> crate::link::AsLink<'a> for Inet6Cx<'_, 'a> {
    #[inline(always)]
    fn link(&mut self) -> &mut LinkCx<'a> {
        self.link
    }
}

/// Routers, prefixes and redirects from neighbour discovery, in the published
/// configuration (read lock-free by `ip6_route`, replaced by the rare message that
/// changes them). Each list is bounded; an expired entry is ignored by lookups and
/// replaced first.
#[derive(Clone, Debug, Default)]
pub struct NdState {
    pub routers: Vec<Router6>,
    pub prefixes: Vec<Prefix6>,
    pub redirects: Vec<Redirect6>,
    /// Router solicitation per interface: (interface, sent, next due; nanoseconds).
    pub(crate) rtsol: Vec<(IfIndex, u8, u64)>,
    /// MLD state per interface and group: (interface, group, reports sent, next
    /// due; nanoseconds). Bounded by the interfaces' addresses.
    pub(crate) mld: Vec<(IfIndex, Ipv6Addr, u8, u64)>,
    /// Path MTUs learnt from Packet Too Big (RFC 8201): destination, MTU, expiry,
    /// and whether a connection vouched for it (`inet::cx::pmtu_upsert`).
    pub pmtu: Vec<(Ipv6Addr, u32, Instant, bool)>,
    /// Router advertisements sent per interface (a router with them on):
    /// (interface, sent, next due, last sent; nanoseconds).
    pub(crate) rtadv: Vec<(IfIndex, u32, u64, u64)>,
}

/// A default router learnt from an advertisement (RFC 4861 §6.3.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Router6 {
    pub addr: Ipv6Addr,
    pub ifindex: IfIndex,
    pub expires: Instant,
}

/// An on-link prefix learnt from an advertisement (the L flag, RFC 4861 §6.3.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix6 {
    pub prefix: crate::link::iface::Inet6Addr,
    pub ifindex: IfIndex,
    pub expires: Instant,
}

/// A redirect received (RFC 4861 §8.3): traffic to `dst` goes to `target` instead
/// (`target == dst`: the destination is on-link).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Redirect6 {
    pub dst: Ipv6Addr,
    pub target: Ipv6Addr,
    pub ifindex: IfIndex,
    pub expires: Instant,
}

/// DAD warnings logged per [`DAD_LOG_WINDOW`], stack-wide ([`DadLog`]).
pub const DAD_LOG_LINES: u32 = 10;
/// See [`DAD_LOG_LINES`].
pub const DAD_LOG_WINDOW: Duration = Duration::from_secs(60);

/// Says how many DAD warnings were held back.
pub(crate) fn dad_suppressed(n: u64) {
    tracing::warn!(
        target: "nd6",
        "suppressed {n} DAD duplicate address message(s) (at most {DAD_LOG_LINES} every {}s)",
        DAD_LOG_WINDOW.as_secs()
    );
}

/// The rate limit of DAD's "duplicate address" warning, one for the stack: a host
/// on a link answers every probe, and with rogue prefixes makes addresses to
/// probe at will. Taken only when an address turns out duplicated, and by worker
/// 0's timers while lines are held back.
#[derive(Debug)]
pub(crate) struct DadLog {
    limit: std::sync::Mutex<LogLimit>,
    /// Some lines are held back (worker 0's timer then looks at the lock).
    held: std::sync::atomic::AtomicBool,
}

impl Default for DadLog {
    fn default() -> Self {
        DadLog {
            limit: std::sync::Mutex::new(LogLimit::new(DAD_LOG_LINES, DAD_LOG_WINDOW)),
            held: Default::default(),
        }
    }
}

impl DadLog {
    pub(crate) fn check(&self, now: Instant) -> LogCheck {
        let mut l = self.limit.lock().unwrap_or_else(|e| e.into_inner());
        let c = l.check(now);
        self.held
            .store(l.lifts_at().is_some(), std::sync::atomic::Ordering::Relaxed);
        c
    }

    /// Says the count of lines held back once their window is over; returns when
    /// that is, while some are.
    pub(crate) fn timer(&self, now: Instant) -> Option<Instant> {
        if !self.held.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let mut l = self.limit.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = l.lifted(now) {
            dad_suppressed(n);
        }
        let at = l.lifts_at();
        self.held
            .store(at.is_some(), std::sync::atomic::Ordering::Relaxed);
        at
    }
}
