//! IPv6 neighbour discovery (RFC 4861) and duplicate address detection (RFC 4862).
//!
//! Each interface has its own neighbour table, the IPv6 instance of [`crate::link::lle`]
//! (the split L2/L3 design: no neighbour entry in any route). This module receives
//! neighbour solicitations and advertisements and answers them, and runs DAD for
//! every address an interface gets. Resolving a next hop is IPv6 output's
//! (`ip6::nd6_resolve_output`, which also sends the solicitations the table asks
//! for, `nd6_ns_output`, and re-exported here), so output needs nothing above it.
//! DAD:
//! the address stays tentative (it takes no traffic) until `DupAddrDetectTransmits`
//! solicitations from the unspecified address went unanswered for `RetransTimer`;
//! an advertisement for it, or another node's probe for it, marks it duplicated.
//! It also runs router discovery and stateless autoconfiguration (RFC 4862 §5.5):
//! default routers, on-link prefixes and redirects learnt for their lifetimes and
//! pruned when those end; addresses formed from autonomous prefixes, deprecated
//! when their preferred lifetime ends, removed when their valid lifetime does
//! (the two-hour rule bounding what an advertisement may cut), and within the
//! interface's bound of addresses; MLDv2 reports; and, on a router, advertisements.
//! Those three are modules of their own, as FreeBSD's `nd6_rtr.c` and `mld6.c` are:
//! `rtr` (router discovery, SLAAC, redirects), `mld` and `rtadv` (advertisements
//! sent).

use crate::inet6::cx::Inet6Cx;
use crate::inet6::ip6::{Ip6Info, Ip6Out};
use crate::link::iface::{solicited_node, AddrState, IfIndex, Ifnet, In6Ifaddr, ALL_NODES};
use crate::loglimit::LogCheck;
use crate::stats::DropReason;
use dev::{Duration, Instant};
use mbuf::Mbuf;
use std::net::Ipv6Addr;
use std::sync::Arc;
use wire::{EthernetAddress, Icmpv6Packet, Icmpv6Repr, IpProtocol, NdiscNeighborFlags, NdiscRepr};

mod mld;
mod rtadv;
mod rtr;

pub(crate) use crate::inet6::cx::{dad_suppressed, DadLog};
pub use crate::inet6::cx::{NdState, Prefix6, Redirect6, Router6, DAD_LOG_LINES, DAD_LOG_WINDOW};
pub(crate) use crate::inet6::ip6::{
    icmp6_send, nd6_flush, nd6_ns_output, nd6_resolve_output, ND_HLIM,
};
pub(crate) use mld::{mld_query_input, mld_timer};
pub(crate) use rtadv::{nd6_rs_input, nd6_rtadv_timer};
use rtr::{nd6_prune, slaac_timer};
pub(crate) use rtr::{nd6_ra_input, nd6_redirect_input, nd6_rtsol_timer};
pub use rtr::{MAX_PREFIXES, MAX_REDIRECTS, MAX_ROUTERS};

pub use crate::link::lle::{Inet6, Nd6Entry, Nd6Table};

/// RFC 4862 §5.1: `DupAddrDetectTransmits`, default 1 (`StackConfig::dad_transmits`).
pub const DAD_TRANSMITS: u8 = 1;
/// RFC 4861 §10: `RETRANS_TIMER`, 1 s.
pub const RETRANS_TIMER: Duration = Duration::from_secs(1);

/// `nd6_na_output`: advertises our `target` to `dst`.
fn nd6_na_output(
    cx: &mut Inet6Cx<'_, '_>,
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
    cx.link.stats.icmp6.outneighboradvert += 1;
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
    cx: &mut Inet6Cx<'_, '_>,
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
        return DropReason::Icmp6BadNs.count(cx.link.stats);
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
        ifp.nd6
            .nd_learn(cx.link.now, info.src, mac, cx.link.stats, &mut out);
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
    cx: &mut Inet6Cx<'_, '_>,
    ifp: &Arc<Ifnet>,
    info: Ip6Info,
    flags: NdiscNeighborFlags,
    target: Ipv6Addr,
    lladdr: Option<EthernetAddress>,
) {
    let solicited = flags.contains(NdiscNeighborFlags::SOLICITED);
    // §7.1.2: target not multicast; Solicited clear when sent to a multicast group.
    if target.is_multicast() || (info.mcast && solicited) {
        return DropReason::Icmp6BadNa.count(cx.link.stats);
    }
    if let Some(ours) = ifp.addr6(target).cloned() {
        match ours.state() {
            // RFC 4862 §5.4.4: "If the target address is tentative, the tentative
            // address is not unique."
            AddrState::Tentative => dad_duplicate(cx, ifp, &ours),
            // Someone claims an address we hold (FreeBSD logs "duplicate address").
            AddrState::Preferred | AddrState::Deprecated | AddrState::Duplicated => {
                cx.link.stats.nd6.dadcollision += 1
            }
        }
        return;
    }
    let mut out = Vec::new();
    ifp.nd6.nd_advert(
        cx.link.now,
        target,
        lladdr,
        solicited,
        flags.contains(NdiscNeighborFlags::OVERRIDE),
        cx.link.stats,
        &mut out,
    );
    nd6_flush(cx, ifp, &mut out);
}

fn dad_duplicate(cx: &mut Inet6Cx<'_, '_>, ifp: &Ifnet, a: &crate::link::iface::In6Ifaddr) {
    if a.state() != AddrState::Duplicated {
        a.set_state(AddrState::Duplicated);
        cx.link.stats.nd6.dadcollision += 1;
        // Anyone on the link can answer every probe: the warning is rate-limited
        // (at most DAD_LOG_LINES a DAD_LOG_WINDOW, stack-wide), the rest counted and
        // the count said once the window is over.
        match cx.v6.ctl6.dad_log().check(cx.link.now) {
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

/// Worker 0's neighbour-discovery timers for one interface: the table's state
/// machine, and duplicate address detection. Returns the next deadline.
pub(crate) fn nd6_timer(cx: &mut Inet6Cx<'_, '_>, ifp: &Arc<Ifnet>) -> Option<Instant> {
    if !ifp.inet6() {
        return None;
    }
    if ifp.nd6.poll_at().is_some_and(|t| t <= cx.link.now) {
        let mut out = Vec::new();
        ifp.nd6.timer(cx.link.now, cx.link.stats, &mut out);
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
            Some(t) => t <= cx.link.now,
        };
        if due {
            if a.dad_sent() >= cx.v6.dad_transmits {
                // §5.4.5: no answer within RetransTimer of the last probe: unique.
                a.set_state(AddrState::Preferred);
                cx.link.stats.nd6.dadok += 1;
                continue;
            }
            a.dad_probe(cx.link.now + RETRANS_TIMER);
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
    if let Some(t) = cx.v6.ctl6.dad_log().timer(cx.link.now) {
        next = Some(next.map_or(t, |n| n.min(t)));
    }
    next
}

/// The neighbour table's entries of every interface, for `ndp -a`.
pub fn entries(ifs: &[Arc<Ifnet>]) -> Vec<(IfIndex, Nd6Entry)> {
    ifs.iter()
        .flat_map(|i| i.nd6.entries().into_iter().map(move |e| (i.index, e)))
        .collect()
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
pub(crate) fn pmtu6_input(cx: &mut Inet6Cx<'_, '_>, mtu: u32, quoted: &[u8]) {
    if quoted.len() < 40 || quoted[0] >> 4 != 6 {
        return DropReason::Icmp6BadLen.count(cx.link.stats);
    }
    let o = |at: usize| {
        let mut b = [0u8; 16];
        b.copy_from_slice(&quoted[at..at + 16]);
        Ipv6Addr::from(b)
    };
    let (src, dst) = (o(8), o(24));
    if !cx.link.ifaces.iter().any(|i| i.addr6(src).is_some()) || dst.is_multicast() {
        cx.link.stats.icmp6.badpkttoobig += 1;
        return;
    }
    let mtu = mtu.max(MIN_MTU6);
    use crate::ip::{quoted_l4_6, quoted_tcp6, CtlInput, TcpCtl};
    if let Some(c) = CtlInput::tcp(quoted_tcp6(quoted), |seq| TcpCtl::PathMtu { seq, mtu }) {
        // For TCP, through the worker (`pr_ctlinput`).
        cx.ip.ctlinput.push(c);
    } else if quoted_l4_6(quoted, 17)
        .is_some_and(|(local, _, _)| crate::ip::udp_bound(cx.ip.udp, local))
    {
        pmtu6_learn(cx, src, dst, mtu, false);
    } else {
        cx.link.stats.icmp6.noport += 1;
    }
}

/// Lowers the path MTU from `src` (ours) towards `dst` to `mtu`, if that is below
/// what the list or the link says; `held`: a live connection vouched for it
/// ([`crate::ip::pmtu_upsert`]).
pub(crate) fn pmtu6_learn(
    cx: &mut Inet6Cx<'_, '_>,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    mtu: u32,
    held: bool,
) {
    let link = cx
        .link
        .ifaces
        .iter()
        .find(|i| i.addr6(src).is_some())
        .map_or(1500, |i| i.mtu as u32);
    let now = cx.link.now;
    let known = cx.v6.inet6.nd6.path_mtu(dst, now).unwrap_or(link);
    if mtu >= known {
        return;
    }
    let expires = now + PMTU_LIFETIME;
    cx.v6.ctl6.update_nd6(&mut |c| {
        crate::ip::pmtu_upsert(&mut c.pmtu, (dst, mtu, expires, held), now, MAX_PMTU);
    });
}
