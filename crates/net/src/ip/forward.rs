//! The forwarding stage both families run: `ip_forward` (`inet::forward`) and
//! `ip6_forward` (`inet6::forward6`) are this one body, monomorphised per family
//! over [`FwdFamily`] (as VPP builds its `ip4-` and `ip6-` nodes from one inline
//! body): no branch on the family per packet.
//!
//! The body is the vector loop (each packet's checks, the lookups of the vector
//! back to back, then each packet on its way), the fast path (a forward route
//! whose next hop's link address is known, no hook on the way out: the hop count
//! down, the link header written, onto the transmit vector), the output hooks over
//! the vector, and the hand-off to the link. What differs is the family's: the
//! checks before the lookup (martians, TTL or hop limit), the lookup of a vector,
//! a route's kinds, redirects, what a packet too long for its link meets
//! (fragmentation, or Packet Too Big), the neighbour table (ARP, or neighbour
//! discovery), the EtherType, the counters and the pfil point.

use crate::ifindex::IfIndex;
use crate::link::ether::{
    ether_output, ether_output_known, ether_output_now, L2Out, ETHER_HDR_LEN,
};
use crate::link::iface::Ifnet;
use crate::link::{AsLink, LinkCx};
use crate::pfil::{Dir, PfilPoint};
use crate::stats::{DropReason, Stats};
use mbuf::Mbuf;
use route::{NextHop, NhKind};
use std::sync::Arc;
use wire::{EtherType, EthernetAddress};

pub(crate) use super::NO_NH;

/// What a family gives the forwarding body. Implemented by a zero-sized type in
/// each family (`inet::forward::V4`, `inet6::forward6::V6`); every method is
/// inlined into the body, which is built once per family.
pub(crate) trait FwdFamily: Sized {
    /// The family's batch context.
    type Cx<'b, 'a: 'b>: AsLink<'a>;
    /// What the family's input left of each packet's header.
    type Info: Copy + std::fmt::Debug;
    /// An address of the family.
    type Addr: Copy + std::fmt::Debug;
    /// A destination as the FIB's vector lookup takes it.
    type Key: Copy + std::fmt::Debug;
    /// The pfil point of the family's output hooks.
    const PFIL: PfilPoint;
    /// What a packet those hooks drop is counted as.
    const PFIL_DROP: DropReason;
    /// What a packet whose interface or next hop has gone is counted as.
    const NO_ROUTE: DropReason;
    /// A forwarded packet always has a next hop of the FIB (IPv4); else it may
    /// have come by a router the FIB does not hold (IPv6's from neighbour
    /// discovery).
    const NEEDS_NH: bool;
    const ETHER: EtherType;

    /// The batch's FIB.
    fn fib<'a>(cx: &Self::Cx<'_, 'a>) -> &'a route::Fib;
    /// The checks before the lookup: the packet back when it goes on, else
    /// dropped or answered (counted).
    fn check(cx: &mut Self::Cx<'_, '_>, m: Mbuf, info: &Self::Info) -> Option<Mbuf>;
    /// The next hops of the vector (their indices in the FIB, or [`NO_NH`]).
    fn lookup_vec(
        cx: &mut Self::Cx<'_, '_>,
        fib: &route::Fib,
        pkts: &mut [(Mbuf, Self::Info)],
        nhs: &mut Vec<u32>,
        scratch: (&mut Vec<Self::Key>, &mut Vec<Option<u32>>),
    );
    /// The packet's destination.
    fn dst(info: &Self::Info) -> Self::Addr;
    /// The hop count (TTL, hop limit) down by one in the header at the front of
    /// `m`; false when the header is not there whole or cannot be written.
    fn hop_decrement(m: &mut Mbuf, info: &Self::Info) -> bool;
    /// The neighbour table's link address for `a` on interface `i` (its snapshot).
    fn neighbour(link: &mut LinkCx<'_>, i: IfIndex, a: Self::Addr) -> Option<EthernetAddress>;
    /// One packet after its lookup, off the fast path: the route's kind, the MTU,
    /// a redirect, the hop count down; where it goes, or answered (counted).
    fn one(
        cx: &mut Self::Cx<'_, '_>,
        ifp: &Ifnet,
        m: Mbuf,
        info: Self::Info,
        nh: Option<&Arc<NextHop>>,
    ) -> Option<(Mbuf, FwdOut<Self::Addr>)>;
    /// A packet to `next` on `out` whose link address is not at hand: ARP's or
    /// neighbour discovery's resolution (`bcast`: to the link's broadcast).
    fn resolve(cx: &mut Self::Cx<'_, '_>, out: &Arc<Ifnet>, m: Mbuf, next: Self::Addr, bcast: bool);
    /// A packet longer than `out`'s MTU that nothing cuts: fragmented, or
    /// answered with Packet Too Big.
    fn too_long(
        cx: &mut Self::Cx<'_, '_>,
        out: &Arc<Ifnet>,
        m: Mbuf,
        next: Self::Addr,
        bcast: bool,
        mtu: usize,
    );
    /// The family's count of forwarded packets.
    fn forwarded(stats: &mut Stats) -> &mut u64;
}

/// A forwarded packet between the forwarding decision and the link: where it goes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FwdOut<A> {
    /// The interface it arrived on.
    pub rcvif: IfIndex,
    /// The interface it leaves by.
    pub out: IfIndex,
    /// The next hop's index in the batch's FIB; [`NO_NH`] for a router the FIB
    /// does not hold (IPv6's from neighbour discovery, the static default router).
    pub nh: u32,
    /// The address it goes to on that link (gateway, or the destination).
    pub next: A,
    pub mtu: u32,
    /// A directed broadcast let through: it leaves as a link broadcast (IPv4).
    pub bcast: bool,
}

/// The forwarding stage's vectors and scratch.
#[derive(Debug)]
pub(crate) struct FwdVecs<F: FwdFamily> {
    checked: Vec<(Mbuf, F::Info)>,
    /// The next hop of each checked packet (its index in the batch's FIB).
    nhs: Vec<u32>,
    /// The lookups' scratch: the destinations, and the routes' raw values.
    dsts: Vec<F::Key>,
    raw: Vec<Option<u32>>,
    out: Vec<(Mbuf, FwdOut<F::Addr>)>,
    pf: crate::link::cx::PfilScratch<FwdOut<F::Addr>>,
}

impl<F: FwdFamily> Default for FwdVecs<F> {
    fn default() -> Self {
        FwdVecs {
            checked: Vec::new(),
            nhs: Vec::new(),
            dsts: Vec::new(),
            raw: Vec::new(),
            out: Vec::new(),
            pf: Default::default(),
        }
    }
}

/// The forwarding stage over the packets of one burst from `ifp` that are for
/// other hosts (their headers validated by the family's input), as a vector
/// stage: the checks of each, then the lookups of them back to back so their
/// cache misses overlap (VPP's `ip4-lookup`), then each packet's hop count and
/// next hop; the output hooks over the vector; then those whose next hop's link
/// address is known go to `l2` for `ether_output`, the others through the
/// neighbour table. Errors answer as a router does.
#[inline(always)]
pub(crate) fn forward<'a, F: FwdFamily>(
    cx: &mut F::Cx<'_, 'a>,
    ifp: &Ifnet,
    pkts: &mut Vec<(Mbuf, F::Info)>,
    v: &mut FwdVecs<F>,
    l2: &mut Vec<L2Out>,
) {
    for (m, info) in pkts.drain(..) {
        if let Some(m) = F::check(cx, m, &info) {
            v.checked.push((m, info));
        }
    }
    let fib = F::fib(cx);
    F::lookup_vec(
        cx,
        fib,
        &mut v.checked,
        &mut v.nhs,
        (&mut v.dsts, &mut v.raw),
    );
    let hooks = cx.link().pfil_active(F::PFIL, Dir::Out);
    // No hook on any interface's way out: every packet may take the fast path,
    // its link header written as soon as its next hop is known; else each packet's
    // out interface says (`out_clear`, `ether_direct`).
    let fast = !hooks && !cx.link().pfil_active(PfilPoint::Ether, Dir::Out);
    let now = cx.link().now.as_nanos();
    for ((m, info), &nh) in v.checked.drain(..).zip(&v.nhs) {
        let nh = if nh == NO_NH { None } else { fib.nexthop(nh) };
        let m = match nh {
            Some(nh) if fast || cx.link().out_clear(F::PFIL, nh.ifindex) => {
                match forward_fast::<F>(cx.link(), ifp, m, &info, nh, now) {
                    Ok(()) => continue,
                    Err(m) => m,
                }
            }
            _ => m,
        };
        match F::one(cx, ifp, m, info, nh) {
            Some(p) if hooks && cx.link().pfil_active_on(F::PFIL, Dir::Out, p.1.out) => {
                v.out.push(p)
            }
            Some((m, o)) => {
                let direct = cx.link().ether_direct(o.out);
                forward_out::<F>(cx, fib, m, o, l2, direct)
            }
            None => {}
        }
    }
    if !hooks {
        return;
    }
    // A packet a hook keeps (a dummynet pipe) has been forwarded as far as this
    // stage goes: it is counted now, as FreeBSD's ip_forward counts a packet whose
    // ip_output took it, since its release goes straight to the link's output.
    let link = cx.link();
    let kept = link.stats.pfil.consumed;
    let ifs = |o: &FwdOut<F::Addr>| (o.out, Some(o.rcvif));
    link.pfil_vec(F::PFIL, Dir::Out, F::PFIL_DROP, &mut v.out, &mut v.pf, ifs);
    let consumed = link.stats.pfil.consumed - kept;
    *F::forwarded(link.stats) += consumed;
    for (m, o) in v.out.drain(..) {
        let direct = cx.link().ether_direct(o.out);
        forward_out::<F>(cx, fib, m, o, l2, direct);
    }
}

/// The common case of one forwarded packet, done at once (VPP's `ip4-rewrite`
/// behind `ip4-lookup`): a forward route through a gateway whose link address the
/// next hop holds, or to a connected destination the link's neighbour table has
/// resolved (its snapshot, lock-free); a packet that fits the link and leaves
/// nothing for a device to finish, not going back out of the interface it came in
/// on, and no hook at the IP or link output points (the caller checked): the hop
/// count down (IPv4's checksum updated), the link header written into the
/// headroom, onto the interface's transmit vector. Anything else comes back for
/// the general path, untouched. (A subnet's network and broadcast addresses are
/// FIB entries of their own, [`NhKind::Broadcast`]: a connected route's next hop
/// here is a host.)
#[inline(always)]
fn forward_fast<F: FwdFamily>(
    link: &mut LinkCx<'_>,
    ifp: &Ifnet,
    mut m: Mbuf,
    info: &F::Info,
    nh: &NextHop,
    now: u64,
) -> Result<(), Mbuf> {
    if nh.kind != NhKind::Forward {
        return Err(m);
    }
    let ifaces = link.ifaces;
    let Some(out) = ifaces.get(nh.ifindex as usize) else {
        return Err(m);
    };
    let mtu = if nh.mtu != 0 {
        (nh.mtu as usize).min(out.mtu)
    } else {
        out.mtu
    };
    if out.index == ifp.index
        || !out.is_up()
        || m.len() > mtu
        || m.hdr.csum_flags & mbuf::CSUM_L4_NEEDED != 0
        || m.headroom() < ETHER_HDR_LEN
    {
        return Err(m);
    }
    let mac = match nh.gateway {
        Some(_) => nh.l2(now).map(EthernetAddress),
        None => F::neighbour(link, out.index, F::dst(info)),
    };
    let Some(mac) = mac else {
        return Err(m);
    };
    if !F::hop_decrement(&mut m, info) {
        return Err(m);
    }
    *F::forwarded(link.stats) += 1;
    ether_output_now(link, out, m, mac, F::ETHER);
    Ok(())
}

/// A forwarded packet past the output hooks to its link when its next hop's link
/// address is known and nothing is left to do to it: at once when `direct` (no
/// hook at the link's output), else by way of `l2` and `ether_output`'s hooks; the
/// others through the offload step and the neighbour table, and what is too long
/// for the link to the family (fragmentation, or Packet Too Big). Out of line:
/// the body calls it from two places, neither the fast path.
#[inline]
fn forward_out<'a, F: FwdFamily>(
    cx: &mut F::Cx<'_, 'a>,
    fib: &'a route::Fib,
    m: Mbuf,
    o: FwdOut<F::Addr>,
    l2: &mut Vec<L2Out>,
    direct: bool,
) {
    let link = cx.link();
    *F::forwarded(link.stats) += 1;
    let ifaces = link.ifaces;
    let nh = fib.nexthop(o.nh);
    let Some(out) = ifaces
        .get(o.out.get())
        .filter(|_| !F::NEEDS_NH || nh.is_some())
    else {
        return link.drop_pkt(m, F::NO_ROUTE);
    };
    let mtu = o.mtu as usize;
    // The common case: it fits, nothing is left to a device, and the route's
    // gateway has its link address written in the next hop (or the neighbour
    // table the connected destination's).
    if m.len() <= mtu && m.hdr.csum_flags & mbuf::CSUM_L4_NEEDED == 0 && !o.bcast {
        let mac = match nh {
            Some(n) if n.gateway.is_some() => n.l2(link.now.as_nanos()).map(EthernetAddress),
            Some(_) => F::neighbour(link, out.index, o.next),
            None => None,
        };
        if let Some(dst) = mac {
            return ether_output_known(link, out, m, dst, F::ETHER, l2, direct);
        }
    }
    // A segment from a link with offloads may be larger than this one takes, or
    // still lack its checksum; an unresolved next hop goes through the neighbour
    // table. A directed broadcast let through (`net.inet.ip.directed-broadcast`)
    // goes to the link's broadcast address, as FreeBSD's `ip_output` sends one
    // (M_BCAST).
    let (next, bcast) = (o.next, o.bcast);
    let l2out = |cx: &mut F::Cx<'_, 'a>, m| l2_output::<F>(cx, out, m, nh, next, bcast);
    if let Some(m) = crate::link::output::fit_link(cx, out, m, mtu, l2out) {
        F::too_long(cx, out, m, next, bcast, mtu);
    }
}

/// A forwarded packet to its next hop's link-layer address: the route's cached one
/// for a gateway, else through the neighbour table's resolution.
fn l2_output<F: FwdFamily>(
    cx: &mut F::Cx<'_, '_>,
    out: &Arc<Ifnet>,
    m: Mbuf,
    nh: Option<&Arc<NextHop>>,
    next: F::Addr,
    bcast: bool,
) {
    if let Some(nh) = nh.filter(|n| n.gateway.is_some()) {
        let link = cx.link();
        if let Some(mac) = nh.l2(link.now.as_nanos()) {
            return ether_output(link, out, m, EthernetAddress(mac), F::ETHER);
        }
    }
    F::resolve(cx, out, m, next, bcast);
}
