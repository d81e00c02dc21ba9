//! IPv6 neighbour discovery (RFC 4861) and duplicate address detection (RFC 4862).
//!
//! Each interface has its own neighbour table, the IPv6 instance of [`crate::link::lle`]
//! (the split L2/L3 design: no neighbour entry in any route). This module sends and
//! receives neighbour solicitations and advertisements, resolves next hops for
//! `ip6::ip6_send`, and runs DAD for every address an interface gets:
//! the address stays tentative (it takes no traffic) until `DupAddrDetectTransmits`
//! solicitations from the unspecified address went unanswered for `RetransTimer`;
//! an advertisement for it, or another node's probe for it, marks it duplicated.
//! It also runs router discovery and stateless autoconfiguration (RFC 4862 §5.5):
//! default routers, on-link prefixes and redirects learnt for their lifetimes and
//! pruned when those end; addresses formed from autonomous prefixes, deprecated
//! when their preferred lifetime ends, removed when their valid lifetime does
//! (the two-hour rule bounding what an advertisement may cut), and within the
//! interface's bound of addresses; MLDv2 reports; and, on a router, advertisements.

use crate::inet6::cx::Inet6Cx;
use crate::inet6::ip6::{Ip6Info, Ip6Out};
use crate::link::iface::{solicited_node, AddrState, IfIndex, Ifnet, In6Ifaddr, ALL_NODES};
use crate::link::lle::{LleOutput, Resolve};
use crate::loglimit::{LogCheck, LogLimit};
use crate::stats::DropReason;
use dev::{Duration, Instant};
use mbuf::Mbuf;
use std::net::Ipv6Addr;
use std::sync::Arc;
use wire::{
    EtherType, EthernetAddress, Icmpv6Packet, Icmpv6Repr, IpProtocol, NdiscNeighborFlags, NdiscRepr,
};

pub use crate::link::lle::{Inet6, Nd6Entry, Nd6Table};
type Nd6Output = LleOutput<Ipv6Addr>;

/// RFC 4861 §6.1.2 / §7.1: ND messages travel with hop limit 255, so that a receiver
/// knows they come from the link.
const ND_HLIM: u8 = 255;
/// RFC 4862 §5.1: `DupAddrDetectTransmits`, default 1 (`StackConfig::dad_transmits`).
pub const DAD_TRANSMITS: u8 = 1;
/// RFC 4861 §10: `RETRANS_TIMER`, 1 s.
pub const RETRANS_TIMER: Duration = Duration::from_secs(1);

/// Sends what the neighbour table asked for: solicitations and released packets.
pub(crate) fn nd6_flush(cx: &mut Inet6Cx<'_>, ifp: &Arc<Ifnet>, out: &mut Vec<Nd6Output>) {
    for o in out.drain(..) {
        match o {
            LleOutput::Packet { m, mac } => {
                crate::link::ether::ether_output(cx, ifp, m, mac, EtherType::Ipv6)
            }
            LleOutput::Request { target, unicast } => {
                nd6_ns_output(cx, ifp, target, unicast, false)
            }
        }
    }
}

/// `nd6_resolve`: sends an IPv6 packet (header built) to `nexthop` on `ifp`, through
/// the published snapshot when the neighbour is reachable, else through the table's
/// slow path, which may hold the packet and solicit.
pub(crate) fn nd6_resolve_output(
    cx: &mut Inet6Cx<'_>,
    ifp: &Arc<Ifnet>,
    m: Mbuf,
    nexthop: Ipv6Addr,
) {
    if ifp.no_link_header() {
        return crate::link::ether::p2p_output(cx, ifp, m);
    }
    let mac = cx.nd6_lookup(ifp.index, nexthop);
    if let Some(mac) = mac {
        return crate::link::ether::ether_output(cx, ifp, m, mac, EtherType::Ipv6);
    }
    let mut out = Vec::new();
    if let Resolve::Now(m, mac) = ifp.nd6.resolve_slow(cx.now, nexthop, m, cx.stats, &mut out) {
        crate::link::ether::ether_output(cx, ifp, m, mac, EtherType::Ipv6);
    }
    nd6_flush(cx, ifp, &mut out);
}

/// Builds an ICMPv6 message and sends it with `ip6_output`. `src` unspecified picks
/// one (unless `keep_unspec`, for DAD probes).
pub(crate) fn icmp6_send(cx: &mut Inet6Cx<'_>, repr: &Icmpv6Repr<'_>, o: Ip6Out) {
    let Some((ifp, _)) = crate::inet6::ip6::ip6_route(cx, o.dst, o.ifindex) else {
        return DropReason::Ip6NoRoute.count(cx.stats);
    };
    let src = if o.src.is_unspecified() && !o.keep_unspec {
        match ifp.source6_for(o.dst) {
            Some(s) => s,
            None => return DropReason::Ip6NoRoute.count(cx.stats),
        }
    } else {
        o.src
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), &src, &o.dst);
    let Ok(m) = Mbuf::from_slice(&buf) else {
        return DropReason::Ip6OutDropped.count(cx.stats);
    };
    crate::inet6::ip6::ip6_output(cx, m, Ip6Out { src, ..o });
}

/// `nd6_ns_output`: a neighbour solicitation for `target`: to its solicited-node
/// group, or unicast to `unicast` when probing reachability; from the unspecified
/// address without a source link-layer option for a DAD probe (RFC 4862 §5.4.2).
pub(crate) fn nd6_ns_output(
    cx: &mut Inet6Cx<'_>,
    ifp: &Arc<Ifnet>,
    target: Ipv6Addr,
    unicast: Option<EthernetAddress>,
    dad: bool,
) {
    let dst = if unicast.is_some() {
        target
    } else {
        solicited_node(target)
    };
    let repr = Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
        target_addr: target,
        lladdr: (!dad).then_some(ifp.mac),
    });
    cx.stats.icmp6.outneighborsolicit += 1;
    if dad {
        cx.stats.nd6.dadsent += 1;
    }
    icmp6_send(
        cx,
        &repr,
        Ip6Out {
            src: Ipv6Addr::UNSPECIFIED,
            dst,
            proto: IpProtocol::Icmpv6,
            hlim: ND_HLIM,
            keep_unspec: dad,
            ifindex: Some(ifp.index),
        },
    );
}

/// `nd6_na_output`: advertises our `target` to `dst`.
fn nd6_na_output(
    cx: &mut Inet6Cx<'_>,
    ifp: &Arc<Ifnet>,
    target: Ipv6Addr,
    dst: Ipv6Addr,
    solicited: bool,
) {
    let mut flags = NdiscNeighborFlags::OVERRIDE;
    if solicited {
        flags = flags | NdiscNeighborFlags::SOLICITED;
    }
    let repr = Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert {
        flags,
        target_addr: target,
        lladdr: Some(ifp.mac),
    });
    cx.stats.icmp6.outneighboradvert += 1;
    icmp6_send(
        cx,
        &repr,
        Ip6Out {
            src: target,
            dst,
            proto: IpProtocol::Icmpv6,
            hlim: ND_HLIM,
            keep_unspec: false,
            ifindex: Some(ifp.index),
        },
    );
}

/// `nd6_ns_input`: RFC 4861 §7.1.1 validity checks, §7.2.3 processing; RFC 4862
/// §5.4.3 for a target that is tentative here.
pub(crate) fn nd6_ns_input(
    cx: &mut Inet6Cx<'_>,
    ifp: &Arc<Ifnet>,
    info: Ip6Info,
    target: Ipv6Addr,
    lladdr: Option<EthernetAddress>,
) {
    let from_unspec = info.src.is_unspecified();
    // §7.1.1: hop limit 255 (checked by the caller), target not multicast; from the
    // unspecified address only to a solicited-node group and without a source
    // link-layer option.
    if target.is_multicast()
        || (from_unspec && (info.dst != solicited_node(target) || lladdr.is_some()))
    {
        return DropReason::Icmp6BadNs.count(cx.stats);
    }
    let Some(ours) = ifp.addr6(target).cloned() else {
        // Not for us (we are no proxy): nothing to answer.
        return;
    };
    match ours.state() {
        AddrState::Tentative => {
            if from_unspec {
                // RFC 4862 §5.4.3: another node is probing the same address: ours is
                // a duplicate too.
                dad_duplicate(cx, ifp, &ours);
            }
            // From a real address: "the solicitation is processed ... as for any
            // other" is for non-tentative targets; for a tentative one it is ignored.
            return;
        }
        AddrState::Duplicated => return,
        AddrState::Preferred | AddrState::Deprecated => {}
    }
    if let (false, Some(mac)) = (from_unspec, lladdr) {
        let mut out = Vec::new();
        ifp.nd6.nd_learn(cx.now, info.src, mac, cx.stats, &mut out);
        nd6_flush(cx, ifp, &mut out);
    }
    if from_unspec {
        // §7.2.4: to all-nodes, Solicited clear.
        nd6_na_output(cx, ifp, target, ALL_NODES, false);
    } else {
        nd6_na_output(cx, ifp, target, info.src, true);
    }
}

/// `nd6_na_input`: RFC 4861 §7.1.2 validity checks, §7.2.5 processing; an
/// advertisement for one of our addresses means another node holds it.
pub(crate) fn nd6_na_input(
    cx: &mut Inet6Cx<'_>,
    ifp: &Arc<Ifnet>,
    info: Ip6Info,
    flags: NdiscNeighborFlags,
    target: Ipv6Addr,
    lladdr: Option<EthernetAddress>,
) {
    let solicited = flags.contains(NdiscNeighborFlags::SOLICITED);
    // §7.1.2: target not multicast; Solicited clear when sent to a multicast group.
    if target.is_multicast() || (info.mcast && solicited) {
        return DropReason::Icmp6BadNa.count(cx.stats);
    }
    if let Some(ours) = ifp.addr6(target).cloned() {
        match ours.state() {
            // RFC 4862 §5.4.4: "If the target address is tentative, the tentative
            // address is not unique."
            AddrState::Tentative => dad_duplicate(cx, ifp, &ours),
            // Someone claims an address we hold (FreeBSD logs "duplicate address").
            AddrState::Preferred | AddrState::Deprecated | AddrState::Duplicated => {
                cx.stats.nd6.dadcollision += 1
            }
        }
        return;
    }
    let mut out = Vec::new();
    ifp.nd6.nd_advert(
        cx.now,
        target,
        lladdr,
        solicited,
        flags.contains(NdiscNeighborFlags::OVERRIDE),
        cx.stats,
        &mut out,
    );
    nd6_flush(cx, ifp, &mut out);
}

fn dad_duplicate(cx: &mut Inet6Cx<'_>, ifp: &Ifnet, a: &crate::link::iface::In6Ifaddr) {
    if a.state() != AddrState::Duplicated {
        a.set_state(AddrState::Duplicated);
        cx.stats.nd6.dadcollision += 1;
        // Anyone on the link can answer every probe: the warning is rate-limited
        // (at most DAD_LOG_LINES a DAD_LOG_WINDOW, stack-wide), the rest counted and
        // the count said once the window is over.
        match cx.ctl6.dad_log().check(cx.now) {
            LogCheck::Hold => return,
            LogCheck::Log { held } if held > 0 => dad_suppressed(held),
            LogCheck::Log { .. } => {}
        }
        tracing::warn!(
            target: "nd6",
            "{}: DAD detected duplicate IPv6 address {}: tentative address not used",
            ifp.name,
            a.addr
        );
    }
}

/// DAD warnings logged per [`DAD_LOG_WINDOW`], stack-wide ([`DadLog`]).
pub const DAD_LOG_LINES: u32 = 10;
/// See [`DAD_LOG_LINES`].
pub const DAD_LOG_WINDOW: Duration = Duration::from_secs(60);

fn dad_suppressed(n: u64) {
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
    fn check(&self, now: Instant) -> LogCheck {
        let mut l = self.limit.lock().unwrap_or_else(|e| e.into_inner());
        let c = l.check(now);
        self.held
            .store(l.lifts_at().is_some(), std::sync::atomic::Ordering::Relaxed);
        c
    }

    /// Says the count of lines held back once their window is over; returns when
    /// that is, while some are.
    fn timer(&self, now: Instant) -> Option<Instant> {
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

/// Worker 0's neighbour-discovery timers for one interface: the table's state
/// machine, and duplicate address detection. Returns the next deadline.
pub(crate) fn nd6_timer(cx: &mut Inet6Cx<'_>, ifp: &Arc<Ifnet>) -> Option<Instant> {
    if !ifp.inet6() {
        return None;
    }
    if ifp.nd6.poll_at().is_some_and(|t| t <= cx.now) {
        let mut out = Vec::new();
        ifp.nd6.timer(cx.now, cx.stats, &mut out);
        nd6_flush(cx, ifp, &mut out);
    }
    let mut next = ifp.nd6.poll_at();
    for a in &ifp.addrs6 {
        if a.state() != AddrState::Tentative {
            continue;
        }
        let due = match a.dad_next() {
            None => {
                // RFC 4862 §5.4.2 asks for a random delay before the first probe only
                // when it is the interface's first message; a stack that starts with
                // its addresses configured sends it at once.
                true
            }
            Some(t) => t <= cx.now,
        };
        if due {
            if a.dad_sent() >= cx.dad_transmits {
                // §5.4.5: no answer within RetransTimer of the last probe: unique.
                a.set_state(AddrState::Preferred);
                cx.stats.nd6.dadok += 1;
                continue;
            }
            a.dad_probe(cx.now + RETRANS_TIMER);
            nd6_ns_output(cx, ifp, a.addr.addr, None, true);
        }
        if let Some(t) = a.dad_next() {
            next = Some(next.map_or(t, |n| n.min(t)));
        }
    }
    if let Some(t) = slaac_timer(cx, ifp) {
        next = Some(next.map_or(t, |n| n.min(t)));
    }
    if let Some(t) = nd6_prune(cx, ifp) {
        next = Some(next.map_or(t, |n| n.min(t)));
    }
    if let Some(t) = cx.ctl6.dad_log().timer(cx.now) {
        next = Some(next.map_or(t, |n| n.min(t)));
    }
    next
}

/// An autoconfigured address is deprecated from the end of its preferred lifetime
/// until an advertisement extends it (RFC 4862 §5.5.4; a tentative or duplicated
/// one keeps its state).
fn slaac_state(a: &In6Ifaddr, now: Instant) {
    let deprecated = a.preferred_until().is_some_and(|t| t <= now);
    match (a.state(), deprecated) {
        (AddrState::Preferred, true) => a.set_state(AddrState::Deprecated),
        (AddrState::Deprecated, false) => a.set_state(AddrState::Preferred),
        _ => {}
    }
}

/// The lifetimes of the interface's autoconfigured addresses (RFC 4862 §5.5.4): one
/// whose preferred lifetime ended is deprecated, one whose valid lifetime ended is
/// removed with its network's connected route (`nd6.autoconfexpired`), as FreeBSD's
/// `nd6_timer` does with `ia6_lifetime`. Returns the next end.
fn slaac_timer(cx: &mut Inet6Cx<'_>, ifp: &Arc<Ifnet>) -> Option<Instant> {
    let now = cx.now;
    let mut next: Option<Instant> = None;
    for a in ifp.addrs6.iter().filter(|a| a.is_autoconf()) {
        if a.valid_until().is_some_and(|t| t <= now) {
            // Worker 0 alone runs this, so the address is removed once; this
            // batch's snapshot still lists it.
            cx.ctl6.delete_address6(ifp.index, a.addr.addr);
            cx.stats.nd6.autoconfexpired += 1;
            continue;
        }
        slaac_state(a, now);
        let ends = [a.preferred_until().filter(|&t| t > now), a.valid_until()];
        for t in ends.into_iter().flatten() {
            next = Some(next.map_or(t, |n| n.min(t)));
        }
    }
    next
}

/// Routers, prefixes and redirects learnt on the interface whose lifetimes ended
/// leave the published lists (RFC 4861 §6.3.4, §6.3.5: "timed out"); lookups
/// already ignored them. Returns the next end.
fn nd6_prune(cx: &mut Inet6Cx<'_>, ifp: &Arc<Ifnet>) -> Option<Instant> {
    let (now, idx) = (cx.now, ifp.index);
    let nd = &cx.inet6.nd6;
    let ends = nd
        .routers
        .iter()
        .filter(|r| r.ifindex == idx)
        .map(|r| r.expires)
        .chain(
            nd.prefixes
                .iter()
                .filter(|p| p.ifindex == idx)
                .map(|p| p.expires),
        )
        .chain(
            nd.redirects
                .iter()
                .filter(|r| r.ifindex == idx)
                .map(|r| r.expires),
        );
    let (mut due, mut next) = (false, None::<Instant>);
    for t in ends {
        if t <= now {
            due = true;
        } else {
            next = Some(next.map_or(t, |n| n.min(t)));
        }
    }
    if due {
        let live = |i: IfIndex, t: Instant| i != idx || t > now;
        cx.ctl6.update_nd6(&mut |c| {
            c.routers.retain(|r| live(r.ifindex, r.expires));
            c.prefixes.retain(|p| live(p.ifindex, p.expires));
            c.redirects.retain(|r| live(r.ifindex, r.expires));
        });
    }
    next
}

/// The neighbour table's entries of every interface, for `ndp -a`.
pub fn entries(ifs: &[Arc<Ifnet>]) -> Vec<(IfIndex, Nd6Entry)> {
    ifs.iter()
        .flat_map(|i| i.nd6.entries().into_iter().map(move |e| (i.index, e)))
        .collect()
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

/// Bound of the path MTU list; RFC 8201 §5.3's aging: an estimate is forgotten after
/// ten minutes, so that a path that grew is found again.
pub const MAX_PMTU: usize = 64;
const PMTU_LIFETIME: Duration = Duration::from_secs(600);
/// RFC 8200 §5: every IPv6 link carries 1280 bytes.
pub const MIN_MTU6: u32 = 1280;

impl NdState {
    /// The path MTU towards `dst` if a Packet Too Big taught one that has not aged.
    pub fn path_mtu(&self, dst: Ipv6Addr, now: Instant) -> Option<u32> {
        self.pmtu
            .iter()
            .find(|p| p.0 == dst && p.2 > now)
            .map(|p| p.1)
    }
}

/// `icmp6_mtudisc_update`: a Packet Too Big (RFC 4443 §3.2) quoting `quoted`, the
/// start of a packet we sent (its source one of our addresses, else counted in
/// `icmp6.badpkttoobig`). Believed only for what one of our sockets sent (RFC
/// 5927 §4.1, as [`crate::inet::icmp`]'s "fragmentation needed"): a TCP segment
/// goes to its connection, which checks the quoted sequence number before it
/// shrinks its segments and lowers the path MTU towards the destination (RFC
/// 8201, never below 1280, §4) through [`pmtu6_learn`]; a UDP datagram from a
/// bound port lowers it at once; anything else is counted in `icmp6.noport`.
pub(crate) fn pmtu6_input(cx: &mut Inet6Cx<'_>, mtu: u32, quoted: &[u8]) {
    if quoted.len() < 40 || quoted[0] >> 4 != 6 {
        return DropReason::Icmp6BadLen.count(cx.stats);
    }
    let o = |at: usize| {
        let mut b = [0u8; 16];
        b.copy_from_slice(&quoted[at..at + 16]);
        Ipv6Addr::from(b)
    };
    let (src, dst) = (o(8), o(24));
    if !cx.ifaces.iter().any(|i| i.addr6(src).is_some()) || dst.is_multicast() {
        cx.stats.icmp6.badpkttoobig += 1;
        return;
    }
    let mtu = mtu.max(MIN_MTU6);
    use crate::inet::cx::{quoted_l4_6, quoted_tcp6, CtlInput, TcpCtl};
    if let Some(c) = CtlInput::tcp(quoted_tcp6(quoted), |seq| TcpCtl::PathMtu { seq, mtu }) {
        // For TCP, through the worker (`pr_ctlinput`).
        cx.ctlinput.push(c);
    } else if quoted_l4_6(quoted, 17).is_some_and(|(local, _, _)| cx.inet.udp_bound(local)) {
        pmtu6_learn(cx, src, dst, mtu, false);
    } else {
        cx.stats.icmp6.noport += 1;
    }
}

/// Lowers the path MTU from `src` (ours) towards `dst` to `mtu`, if that is below
/// what the list or the link says; `held`: a live connection vouched for it
/// ([`crate::inet::cx::pmtu_upsert`]).
pub(crate) fn pmtu6_learn(
    cx: &mut Inet6Cx<'_>,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    mtu: u32,
    held: bool,
) {
    let link = cx
        .ifaces
        .iter()
        .find(|i| i.addr6(src).is_some())
        .map_or(1500, |i| i.mtu as u32);
    let now = cx.now;
    let known = cx.inet6.nd6.path_mtu(dst, now).unwrap_or(link);
    if mtu >= known {
        return;
    }
    let expires = now + PMTU_LIFETIME;
    cx.ctl6.update_nd6(&mut |c| {
        crate::inet::cx::pmtu_upsert(&mut c.pmtu, (dst, mtu, expires, held), now, MAX_PMTU);
    });
}

/// Bounds of the lists in [`NdState`].
pub const MAX_ROUTERS: usize = 8;
pub const MAX_PREFIXES: usize = 16;
pub const MAX_REDIRECTS: usize = 64;
/// RFC 4861 §10: MAX_RTR_SOLICITATIONS and RTR_SOLICITATION_INTERVAL.
const MAX_RTR_SOLICITATIONS: u8 = 3;
const RTR_SOLICITATION_INTERVAL: Duration = Duration::from_secs(4);
/// How long a redirect is kept (FreeBSD expires redirect routes after 10 minutes).
const REDIRECT_LIFETIME: Duration = Duration::from_secs(600);

/// Inserts or refreshes `v` (matched by `same`), replacing an expired entry, else the
/// one expiring first, when the list is at its bound.
fn upsert<T: Copy>(
    list: &mut Vec<T>,
    v: T,
    same: impl Fn(&T) -> bool,
    expires: impl Fn(&T) -> Instant,
    max: usize,
) {
    if let Some(e) = list.iter_mut().find(|e| same(e)) {
        *e = v;
    } else if list.len() < max {
        list.push(v);
    } else if let Some(e) = list.iter_mut().min_by_key(|e| expires(e)) {
        *e = v;
    }
}

impl NdState {
    /// The next hop towards `dst`, from a redirect, an advertised on-link prefix or a
    /// learnt default router, at `now`.
    pub fn next_hop(
        &self,
        dst: Ipv6Addr,
        now: Instant,
        onlink_only: bool,
    ) -> Option<(Ipv6Addr, IfIndex)> {
        if let Some(r) = self
            .redirects
            .iter()
            .find(|r| r.dst == dst && r.expires > now)
        {
            return Some((r.target, r.ifindex));
        }
        if let Some(p) = self
            .prefixes
            .iter()
            .find(|p| p.expires > now && p.prefix.contains(dst))
        {
            return Some((dst, p.ifindex));
        }
        if onlink_only {
            return None;
        }
        self.routers
            .iter()
            .find(|r| r.expires > now)
            .map(|r| (r.addr, r.ifindex))
    }
}

/// The SLAAC address of `prefix` on an interface with `mac` (RFC 4862 §5.5.3, the
/// modified EUI-64 interface identifier of RFC 4291 appendix A).
fn slaac_addr(prefix: Ipv6Addr, mac: EthernetAddress) -> Ipv6Addr {
    let ll = crate::link::iface::Inet6Addr::link_local(mac).addr.octets();
    let mut o = prefix.octets();
    o[8..].copy_from_slice(&ll[8..]);
    Ipv6Addr::from(o)
}

/// `nd6_ra_input`: RFC 4861 §6.1.2 validity checks (hop limit 255 and code 0 were
/// checked by the caller), §6.3.4 processing.
pub(crate) fn nd6_ra_input(
    cx: &mut Inet6Cx<'_>,
    ifp: &Arc<Ifnet>,
    info: Ip6Info,
    router_lifetime: u16,
    options: &[u8],
) {
    // "IP Source Address is a link-local address."
    if !crate::link::iface::is_link_local(info.src) {
        return DropReason::Icmp6BadRa.count(cx.stats);
    }
    let mut lladdr = None;
    let mut prefixes = Vec::new();
    for o in wire::NdiscOptionsIter::new(options) {
        match o {
            Ok(wire::NdiscOptionRepr::SourceLinkLayerAddr(m)) => lladdr = Some(m),
            Ok(wire::NdiscOptionRepr::PrefixInformation(p)) => prefixes.push(p),
            Ok(_) => {}
            // "All included options have a length that is greater than zero."
            Err(_) => return DropReason::Icmp6BadRa.count(cx.stats),
        }
    }
    if let Some(mac) = lladdr {
        let mut out = Vec::new();
        ifp.nd6.nd_learn(cx.now, info.src, mac, cx.stats, &mut out);
        nd6_flush(cx, ifp, &mut out);
    }
    if !cx.accept_rtadv {
        return;
    }
    let slaac_on = cx.slaac;
    let now = cx.now;
    let mut slaac = Vec::new();
    cx.ctl6.update_nd6(&mut |c| {
        let st = &mut *c;
        st.rtsol.retain(|r| r.0 != ifp.index);
        let r = Router6 {
            addr: info.src,
            ifindex: ifp.index,
            expires: now + Duration::from_secs(u64::from(router_lifetime)),
        };
        if router_lifetime == 0 {
            // "If the address is already present in the host's Default Router List
            // and the received Router Lifetime value is zero, immediately time-out
            // the entry."
            st.routers
                .retain(|x| !(x.addr == r.addr && x.ifindex == r.ifindex));
        } else {
            upsert(
                &mut st.routers,
                r,
                |x| x.addr == r.addr && x.ifindex == r.ifindex,
                |x| x.expires,
                MAX_ROUTERS,
            );
        }
        for p in &prefixes {
            // §6.3.4: the link-local prefix is ignored.
            if crate::link::iface::is_link_local(p.prefix) || p.prefix_len > 128 {
                continue;
            }
            let prefix = crate::link::iface::Inet6Addr::new(p.prefix, p.prefix_len);
            if p.flags.contains(wire::NdiscPrefixFlags::ON_LINK) {
                let e = Prefix6 {
                    prefix,
                    ifindex: ifp.index,
                    expires: now + Duration::from_secs(u64::from(p.valid_lifetime)),
                };
                if p.valid_lifetime == 0 {
                    st.prefixes.retain(|x| x.prefix != prefix);
                } else {
                    upsert(
                        &mut st.prefixes,
                        e,
                        |x| x.prefix == prefix,
                        |x| x.expires,
                        MAX_PREFIXES,
                    );
                }
            }
            // RFC 4862 §5.5.3 (a)-(c): autonomous flag, preferred <= valid ("If
            // the preferred lifetime is greater than the valid lifetime, silently
            // ignore the Prefix Information option"), a /64 for an Ethernet
            // interface identifier.
            if slaac_on
                && p.flags.contains(wire::NdiscPrefixFlags::ADDRCONF)
                && p.preferred_lifetime <= p.valid_lifetime
                && p.prefix_len == 64
            {
                let a = crate::link::iface::Inet6Addr::new(slaac_addr(p.prefix, ifp.mac), 64);
                slaac.push((a, p.preferred_lifetime, p.valid_lifetime));
            }
        }
    });
    for (a, preferred, valid) in slaac {
        slaac_prefix_input(cx, ifp, a, preferred, valid);
    }
}

/// RFC 4862 §5.5.3 (e): "2 hours".
const TWO_HOURS: Duration = Duration::from_secs(7200);

/// The end of a lifetime of `secs` seconds from `now`; `None` for infinity (all
/// one bits, RFC 4861 §4.6.2).
fn lifetime_end(now: Instant, secs: u32) -> Option<Instant> {
    (secs != u32::MAX).then(|| now + Duration::from_secs(u64::from(secs)))
}

/// An autonomous prefix advertised on `ifp` (RFC 4862 §5.5.3 (d), (e)): its address
/// `a` formed, or, if it was formed before, its lifetimes updated by the two-hour
/// rule. Lifetimes in seconds, as advertised.
fn slaac_prefix_input(
    cx: &mut Inet6Cx<'_>,
    ifp: &Arc<Ifnet>,
    a: crate::link::iface::Inet6Addr,
    preferred: u32,
    valid: u32,
) {
    let now = cx.now;
    let pref_end = lifetime_end(now, preferred);
    if let Some(have) = ifp.addr6(a.addr) {
        // An operator's own address keeps the lifetimes the operator gave it.
        if !have.is_autoconf() {
            return;
        }
        // (e): "1. If the received Valid Lifetime is greater than 2 hours or
        // greater than RemainingLifetime, set the valid lifetime of the
        // corresponding address to the advertised Valid Lifetime. 2. If
        // RemainingLifetime is less than or equal to 2 hours, ignore the Prefix
        // Information option with regards to the valid lifetime, unless the Router
        // Advertisement from which this option was obtained has been
        // authenticated ... 3. Otherwise, reset the valid lifetime of the
        // corresponding address to 2 hours." We authenticate none (no SEND), so a
        // forged advertisement can shorten an address's life to two hours at the
        // least; a valid lifetime of 0 is obeyed within that rule.
        let remaining = have.valid_until().map(|t| t.saturating_duration_since(now));
        let received = Duration::from_secs(u64::from(valid));
        let valid_end =
            if valid == u32::MAX || received > TWO_HOURS || remaining.is_some_and(|r| received > r)
            {
                lifetime_end(now, valid)
            } else if remaining.is_some_and(|r| r <= TWO_HOURS) {
                have.valid_until()
            } else {
                Some(now + TWO_HOURS)
            };
        // "The preferred lifetime of the address [is reset] to the Preferred
        // Lifetime in the received advertisement", within the valid one.
        let pref_end = match (pref_end, valid_end) {
            (Some(p), Some(v)) => Some(p.min(v)),
            (None, v) => v,
            (p, None) => p,
        };
        have.set_lifetimes(pref_end, valid_end);
        slaac_state(have, now);
        // Worker 0's timers end lifetimes: it learns the new ends.
        cx.ctl6.notify_worker(0);
        return;
    }
    // (d): "If the prefix advertised is not equal to the prefix of an address
    // configured by stateless autoconfiguration already in the list of addresses
    // associated with the interface (where "equal" means the two prefix lengths
    // are the same and the first prefix-length bits of the prefixes are
    // identical), and if the Valid Lifetime is not 0, form an address".
    if valid == 0 || cx.ifaces.iter().any(|i| i.addr6(a.addr).is_some()) {
        return;
    }
    let valid_end = lifetime_end(now, valid);
    if cx
        .ctl6
        .add_autoconf6(ifp.index, a, pref_end, valid_end)
        .is_ok()
    {
        cx.stats.nd6.autoconf += 1;
        return;
    }
    // The interface holds all it may: the address deprecated longest ago gives way
    // (it serves old connections only), else the new prefix is refused, so a
    // flood of advertised prefixes cannot take a renumbered network's address.
    let oldest = ifp
        .addrs6
        .iter()
        .filter(|x| x.is_autoconf() && x.preferred_until().is_some_and(|t| t <= now))
        .filter(|x| x.state() != AddrState::Tentative)
        .min_by_key(|x| x.preferred_until());
    if let Some(old) = oldest {
        cx.ctl6.delete_address6(ifp.index, old.addr.addr);
        cx.stats.nd6.autoconfreclaimed += 1;
        if cx
            .ctl6
            .add_autoconf6(ifp.index, a, pref_end, valid_end)
            .is_ok()
        {
            cx.stats.nd6.autoconf += 1;
            return;
        }
    }
    DropReason::Nd6AutoconfFull.count(cx.stats);
}

/// `icmp6_redirect_input`: RFC 4861 §8.1 validity checks, §8.3 processing.
pub(crate) fn nd6_redirect_input(
    cx: &mut Inet6Cx<'_>,
    ifp: &Arc<Ifnet>,
    info: Ip6Info,
    target: Ipv6Addr,
    dst: Ipv6Addr,
    lladdr: Option<EthernetAddress>,
) {
    // "IP Source Address is a link-local address"; "the Destination Address field
    // ... is not a multicast address"; "the Target Address is either a link-local
    // address (when redirected to a router) or the same as the ICMP Destination
    // Address (when redirected to the on-link destination)"; "the IP source address
    // of the Redirect is the same as the current first-hop router for the specified
    // ICMP Destination Address."
    let current = crate::inet6::ip6::ip6_route(cx, dst, None).map(|(_, nh)| nh);
    if !crate::link::iface::is_link_local(info.src)
        || dst.is_multicast()
        || !(crate::link::iface::is_link_local(target) || target == dst)
        || current != Some(info.src)
    {
        return DropReason::Icmp6BadRedirect.count(cx.stats);
    }
    if let Some(mac) = lladdr {
        let mut out = Vec::new();
        ifp.nd6.nd_learn(cx.now, target, mac, cx.stats, &mut out);
        nd6_flush(cx, ifp, &mut out);
    }
    let e = Redirect6 {
        dst,
        target,
        ifindex: ifp.index,
        expires: cx.now + REDIRECT_LIFETIME,
    };
    cx.ctl6.update_nd6(&mut |c| {
        upsert(
            &mut c.redirects,
            e,
            |x| x.dst == dst,
            |x| x.expires,
            MAX_REDIRECTS,
        )
    });
}

/// Router solicitation (RFC 4861 §6.3.7), with SLAAC on: up to three, four seconds
/// apart, from the link-local address once it is usable, until an advertisement
/// comes. Worker 0's timers; returns the next deadline.
pub(crate) fn nd6_rtsol_timer(cx: &mut Inet6Cx<'_>, ifp: &Arc<Ifnet>) -> Option<Instant> {
    if !cx.slaac {
        return None;
    }
    let ll = ifp
        .addrs6
        .iter()
        .find(|a| crate::link::iface::is_link_local(a.addr.addr))?;
    if !ll.usable() {
        return None;
    }
    let now = cx.now.as_nanos();
    let st = cx
        .inet6
        .nd6
        .rtsol
        .iter()
        .find(|r| r.0 == ifp.index)
        .copied();
    let (sent, due) = match st {
        // Not yet started: a delay in [0, 1 s) from the MAC, so that hosts brought up
        // together do not all ask at once (§6.3.7's random delay, reproducible).
        None if !cx.inet6.nd6.routers.iter().any(|r| r.ifindex == ifp.index) => {
            let delay = u64::from(ifp.mac.0[5]) * 1_000_000_000 / 256;
            let at = now + delay;
            cx.ctl6
                .update_nd6(&mut |c| c.rtsol.push((ifp.index, 0, at)));
            return Some(Instant::from_nanos(at));
        }
        None => return None,
        Some(r) => (r.1, r.2),
    };
    if sent >= MAX_RTR_SOLICITATIONS {
        return None;
    }
    if due > now {
        return Some(Instant::from_nanos(due));
    }
    let next = now + RTR_SOLICITATION_INTERVAL.as_nanos() as u64;
    cx.ctl6.update_nd6(&mut |c| {
        if let Some(r) = c.rtsol.iter_mut().find(|r| r.0 == ifp.index) {
            r.1 += 1;
            r.2 = next;
        }
    });
    cx.stats.icmp6.outroutersolicit += 1;
    icmp6_send(
        cx,
        &Icmpv6Repr::Ndisc(NdiscRepr::RouterSolicit {
            lladdr: Some(ifp.mac),
        }),
        Ip6Out {
            src: ll.addr.addr,
            dst: crate::link::iface::ALL_ROUTERS,
            proto: IpProtocol::Icmpv6,
            hlim: ND_HLIM,
            keep_unspec: false,
            ifindex: Some(ifp.index),
        },
    );
    (sent + 1 < MAX_RTR_SOLICITATIONS).then_some(Instant::from_nanos(next))
}

/// RFC 3810 §9.1 Robustness Variable: each state change is reported this often.
const MLD_ROBUSTNESS: u8 = 2;
/// RFC 3810 §9.11 Unsolicited Report Interval: 1 s.
const MLD_UNSOLICITED_INTERVAL: Duration = Duration::from_secs(1);
/// All MLDv2-capable routers (RFC 3810 §5.2.14).
const ALL_MLDV2_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0x16);

/// The groups an interface listens to and reports: the solicited-node group of each
/// of its addresses (RFC 4861 §7.2.1). All-nodes is never reported (RFC 3810 §6).
fn mld_groups(ifp: &Ifnet) -> Vec<Ipv6Addr> {
    let mut g: Vec<Ipv6Addr> = ifp
        .addrs6
        .iter()
        .filter(|a| a.state() != AddrState::Duplicated)
        .map(|a| solicited_node(a.addr.addr))
        .collect();
    // A router is in all-routers too (all-nodes is never reported, RFC 3810 §6).
    if ifp.forwarding.inet6() {
        g.push(crate::link::iface::ALL_ROUTERS);
    }
    g.sort_unstable();
    g.dedup();
    g
}

/// Sends an MLDv2 report of `groups` with record type `ty` (RFC 3810 §5.2): to
/// all-MLDv2-routers, hop limit 1, with a router alert in a hop-by-hop header; from
/// the link-local address, or the unspecified one while it is tentative (RFC 3590 §4).
pub(crate) fn mld_report(
    cx: &mut Inet6Cx<'_>,
    ifp: &Arc<Ifnet>,
    groups: &[Ipv6Addr],
    ty: wire::MldRecordType,
) {
    if groups.is_empty() {
        return;
    }
    let src = ifp
        .addrs6
        .iter()
        .find(|a| crate::link::iface::is_link_local(a.addr.addr) && a.usable())
        .map_or(Ipv6Addr::UNSPECIFIED, |a| a.addr.addr);
    let mut records = vec![0u8; 20 * groups.len()];
    let mut rest = &mut records[..];
    for g in groups {
        rest = wire::MldAddressRecordRepr {
            record_type: ty,
            mcast_addr: *g,
            sources: &[],
            aux_data: &[],
        }
        .emit(rest);
    }
    let repr = Icmpv6Repr::Mld(wire::MldRepr::Report {
        nr_mcast_addr_rcrds: groups.len() as u16,
        data: &records,
    });
    let mut msg = vec![0u8; repr.buffer_len()];
    repr.emit(
        &mut Icmpv6Packet::new_unchecked(&mut msg[..]),
        &src,
        &ALL_MLDV2_ROUTERS,
    );
    // Hop-by-hop: next header ICMPv6, router alert (RFC 2711, value 0: MLD), PadN.
    let mut pkt = vec![u8::from(IpProtocol::Icmpv6), 0, 5, 2, 0, 0, 1, 0];
    pkt.extend_from_slice(&msg);
    let Ok(m) = Mbuf::from_slice(&pkt) else {
        return DropReason::Ip6OutDropped.count(cx.stats);
    };
    cx.stats.icmp6.outmldreport += 1;
    crate::inet6::ip6::ip6_output(
        cx,
        m,
        Ip6Out {
            src,
            dst: ALL_MLDV2_ROUTERS,
            proto: IpProtocol::HopByHop,
            hlim: 1,
            keep_unspec: true,
            ifindex: Some(ifp.index),
        },
    );
}

/// Worker 0's MLD timer for one interface: a newly joined group is reported
/// `MLD_ROBUSTNESS` times, a second apart (RFC 3810 §6.1). Returns the next deadline.
pub(crate) fn mld_timer(cx: &mut Inet6Cx<'_>, ifp: &Arc<Ifnet>) -> Option<Instant> {
    if !ifp.inet6() {
        return None;
    }
    let now = cx.now.as_nanos();
    // Worker 0 runs this every poll: the common case (every group reported
    // `MLD_ROBUSTNESS` times) is answered without building a list.
    let settled = ifp
        .addrs6
        .iter()
        .filter(|a| a.state() != AddrState::Duplicated)
        .all(|a| {
            let g = solicited_node(a.addr.addr);
            cx.inet6
                .nd6
                .mld
                .iter()
                .any(|m| m.0 == ifp.index && m.1 == g && m.2 >= MLD_ROBUSTNESS)
        });
    if settled {
        return None;
    }
    let groups = mld_groups(ifp);
    let known: Vec<(Ipv6Addr, u8, u64)> = cx
        .inet6
        .nd6
        .mld
        .iter()
        .filter(|m| m.0 == ifp.index)
        .map(|m| (m.1, m.2, m.3))
        .collect();
    let due: Vec<Ipv6Addr> = groups
        .iter()
        .copied()
        .filter(|g| match known.iter().find(|k| k.0 == *g) {
            None => true,
            Some(k) => k.1 < MLD_ROBUSTNESS && k.2 <= now,
        })
        .collect();
    let next_at = now + MLD_UNSOLICITED_INTERVAL.as_nanos() as u64;
    if !due.is_empty() {
        mld_report(cx, ifp, &due, wire::MldRecordType::ChangeToExclude);
        let idx = ifp.index;
        cx.ctl6.update_nd6(&mut |c| {
            let mld = &mut c.mld;
            // Groups the interface left are forgotten (their addresses went).
            mld.retain(|m| m.0 != idx || groups.contains(&m.1));
            for g in &due {
                match mld.iter_mut().find(|m| m.0 == idx && m.1 == *g) {
                    Some(m) => {
                        m.2 += 1;
                        m.3 = next_at;
                    }
                    None => mld.push((idx, *g, 1, next_at)),
                }
            }
        });
    }
    let pending = groups.iter().any(|g| {
        let sent = due.contains(g) as u8 + known.iter().find(|k| k.0 == *g).map_or(0, |k| k.1);
        sent < MLD_ROBUSTNESS
    });
    pending.then_some(Instant::from_nanos(if due.is_empty() {
        known
            .iter()
            .filter(|k| k.1 < MLD_ROBUSTNESS)
            .map(|k| k.2)
            .min()
            .unwrap_or(next_at)
    } else {
        next_at
    }))
}

/// A multicast listener query (RFC 3810 §6.2): answered with the current state of
/// every group queried (all of ours for a general query). The answer goes at once,
/// the low end of the random delay the RFC allows.
pub(crate) fn mld_query_input(
    cx: &mut Inet6Cx<'_>,
    ifp: &Arc<Ifnet>,
    info: Ip6Info,
    group: Ipv6Addr,
) {
    // §5.1.14: a query from a non-link-local source, or with a hop limit other than
    // 1, is ignored.
    if !crate::link::iface::is_link_local(info.src) || info.hlim != 1 {
        return DropReason::Icmp6Other.count(cx.stats);
    }
    let mut groups = mld_groups(ifp);
    if !group.is_unspecified() {
        groups.retain(|g| *g == group);
    }
    mld_report(cx, ifp, &groups, wire::MldRecordType::ModeIsExclude);
}

/// RFC 4861 §6.2.1 defaults: MaxRtrAdvInterval 600 s, MinRtrAdvInterval a third of
/// it, AdvDefaultLifetime three times it; §10: the first three unsolicited
/// advertisements at most 16 s apart, and at least 3 s between two multicast ones.
const MAX_RTR_ADV_INTERVAL: u64 = 600_000_000_000;
const MIN_RTR_ADV_INTERVAL: u64 = 200_000_000_000;
const ADV_DEFAULT_LIFETIME: u16 = 1800;
const MAX_INITIAL_RTR_ADVERTISEMENTS: u32 = 3;
const MAX_INITIAL_RTR_ADVERT_INTERVAL: u64 = 16_000_000_000;
const MIN_DELAY_BETWEEN_RAS: u64 = 3_000_000_000;
/// §6.2.6: an answer to a solicitation waits a random 0 to 500 ms.
const MAX_RA_DELAY_TIME: u64 = 500_000_000;

/// A pseudo-random fraction in [0, 1) from the interface's MAC and a count, so that
/// routers' timers do not beat together yet runs are reproducible.
fn jitter(ifp: &Ifnet, n: u32) -> f64 {
    let m = ifp.mac.0;
    let x = u64::from_be_bytes([0, 0, m[0], m[1], m[2], m[3], m[4], m[5]]) ^ u64::from(n);
    let x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// Router advertisements (RFC 4861 §6.2) on an interface that sends them: three
/// quick ones when it comes up, then one every 200 to 600 s, and one soon after a
/// solicitation. Each names this router (lifetime 1800 s while it forwards IPv6),
/// the link MTU, its link-layer address, and the interface's prefixes (on-link;
/// autonomous for /64s, so hosts form addresses). Worker 0's timers.
pub(crate) fn nd6_rtadv_timer(cx: &mut Inet6Cx<'_>, ifp: &Arc<Ifnet>) -> Option<Instant> {
    if !ifp.forwarding.rtadv() {
        return None;
    }
    let ll = ifp
        .addrs6
        .iter()
        .find(|a| crate::link::iface::is_link_local(a.addr.addr))?;
    if !ll.usable() {
        return None;
    }
    let now = cx.now.as_nanos();
    let (sent, due) = match cx.inet6.nd6.rtadv.iter().find(|r| r.0 == ifp.index) {
        Some(r) => (r.1, r.2),
        None => (0, now),
    };
    if due > now {
        return Some(Instant::from_nanos(due));
    }
    let wait = if sent + 1 < MAX_INITIAL_RTR_ADVERTISEMENTS {
        MAX_INITIAL_RTR_ADVERT_INTERVAL
    } else {
        let span = (MAX_RTR_ADV_INTERVAL - MIN_RTR_ADV_INTERVAL) as f64;
        MIN_RTR_ADV_INTERVAL + (span * jitter(ifp, sent)) as u64
    };
    let next = now + wait;
    cx.ctl6.update_nd6(&mut |c| {
        c.rtadv.retain(|r| r.0 != ifp.index);
        c.rtadv.push((ifp.index, sent + 1, next, now));
    });
    nd6_ra_output(cx, ifp, ll.addr.addr);
    Some(Instant::from_nanos(next))
}

/// A router solicitation arrived on `ifp`: answer with the next advertisement soon
/// (after a random delay, and never sooner than 3 s after the last).
pub(crate) fn nd6_rs_input(cx: &mut Inet6Cx<'_>, ifp: &Arc<Ifnet>) {
    if !ifp.forwarding.rtadv() {
        return;
    }
    let now = cx.now.as_nanos();
    let n = cx.stats.icmp6.inroutersolicit as u32;
    let soon = now + (MAX_RA_DELAY_TIME as f64 * jitter(ifp, n)) as u64;
    let Some(&(_, sent, due, last)) = cx.inet6.nd6.rtadv.iter().find(|r| r.0 == ifp.index) else {
        // None sent yet: the first goes out at once anyway.
        return;
    };
    let at = soon.max(last + MIN_DELAY_BETWEEN_RAS);
    if at < due {
        cx.ctl6.update_nd6(&mut |c| {
            if let Some(r) = c.rtadv.iter_mut().find(|r| r.0 == ifp.index) {
                *r = (ifp.index, sent, at, last);
            }
        });
        cx.ctl6.notify_worker(0);
    }
}

/// One advertisement to all-nodes from the link-local address `src`.
fn nd6_ra_output(cx: &mut Inet6Cx<'_>, ifp: &Arc<Ifnet>, src: Ipv6Addr) {
    let mut opts = Vec::with_capacity(64);
    // Source link-layer address (§4.6.1).
    opts.extend_from_slice(&[1, 1]);
    opts.extend_from_slice(&ifp.mac.0);
    // MTU (§4.6.4).
    opts.extend_from_slice(&[5, 1, 0, 0]);
    opts.extend_from_slice(&(ifp.mtu as u32).to_be_bytes());
    // Prefix information (§4.6.2) for each prefix of the interface's addresses.
    let mut seen = Vec::new();
    for a in ifp
        .addrs6
        .iter()
        .filter(|a| !crate::link::iface::is_link_local(a.addr.addr))
    {
        let len = a.addr.prefix_len;
        let net = route::IpPrefix::new(a.addr.addr.into(), len);
        if seen.contains(&net) || len > 127 {
            continue;
        }
        seen.push(net);
        let flags = if len == 64 { 0xc0 } else { 0x80 };
        opts.extend_from_slice(&[3, 4, len, flags]);
        opts.extend_from_slice(&2_592_000u32.to_be_bytes());
        opts.extend_from_slice(&604_800u32.to_be_bytes());
        opts.extend_from_slice(&[0; 4]);
        if let std::net::IpAddr::V6(p) = net.addr() {
            opts.extend_from_slice(&p.octets());
        }
    }
    let lifetime = if ifp.forwarding.inet6() {
        ADV_DEFAULT_LIFETIME
    } else {
        0
    };
    cx.stats.icmp6.outrouteradvert += 1;
    icmp6_send(
        cx,
        &Icmpv6Repr::Ndisc(NdiscRepr::RouterAdvert {
            hop_limit: crate::inet6::ip6::DEFAULT_HLIM,
            flags: wire::NdiscRouterFlags::from_bits_truncate(0),
            router_lifetime: lifetime,
            reachable_time: 0,
            retrans_time: 0,
            options: &opts,
        }),
        Ip6Out {
            src,
            dst: ALL_NODES,
            proto: IpProtocol::Icmpv6,
            hlim: ND_HLIM,
            keep_unspec: false,
            ifindex: Some(ifp.index),
        },
    );
}
