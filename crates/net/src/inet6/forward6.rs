//! IPv6 forwarding: `ip6_forward` (RFC 8200, RFC 4861 §8.2), the shape of
//! `ip_forward` (`inet::forward`): a vector stage whose lookups go back to back,
//! router errors as ICMPv6 (time exceeded, unreachable, packet too big — routers do
//! not fragment), and redirects towards a neighbour of the source.
//!
//! # Stage contract (`ip6_forward`)
//! - **Uses**: each packet's `Ip6Hdr` (`dst` as the lookup's key, `src` for
//!   scope, hop limit); the batch's FIB, flow table, interfaces, the neighbour
//!   tables' snapshots, ND's routers; the pfil hooks (`Inet6`, out; `Ether`, out).
//! - **Sets**: hop limit - 1; the link header when the next hop's address is known.
//! - **Next**: as `ip_forward`'s (no fragmentation: Packet Too Big); drops
//!   counted (`ip6.*`).

use crate::ifindex::IfIndex;
use crate::inet6::cx::Inet6Cx;
use crate::inet6::icmp6::Error6;
use crate::inet6::ip6::{Ip6Hdr, IP6_HDR_LEN};
use crate::ip::forward::{FwdFamily, FwdVecs};
use crate::ip::{miss, ports, NO_NH};
use crate::link::ether::L2Out;
use crate::link::iface::Ifnet;
use crate::link::LinkCx;
use crate::pfil::PfilPoint;
use crate::stats::{DropReason, Stats};
use mbuf::Mbuf;
use route::NhKind;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Arc;
use wire::{EtherType, EthernetAddress, Icmpv6DstUnreachable, Icmpv6TimeExceeded, IpProtocol};

/// A forwarded IPv6 packet between `ip6_forward`'s decision and the link (its
/// next hop [`NO_NH`] for a router learnt from neighbour discovery or the static
/// default router; never a broadcast).
pub(crate) type Fwd6Out = crate::ip::forward::FwdOut<Ipv6Addr>;

/// `ip6_forward`'s vectors and scratch.
pub(crate) type Ip6ForwardVecs = FwdVecs<V6>;

/// IPv6 as the forwarding body (`crate::ip::forward`) takes it.
#[derive(Debug, Default)]
pub(crate) struct V6;

impl FwdFamily for V6 {
    type Cx<'b, 'a: 'b> = Inet6Cx<'b, 'a>;
    type Info = Ip6Hdr;
    type Addr = Ipv6Addr;
    type Key = u128;
    const PFIL: PfilPoint = PfilPoint::Inet6;
    const PFIL_DROP: DropReason = DropReason::PfilIp6Out;
    const NO_ROUTE: DropReason = DropReason::Ip6NoRoute;
    const NEEDS_NH: bool = false;
    const ETHER: EtherType = EtherType::Ipv6;

    #[inline(always)]
    fn fib<'a>(cx: &Self::Cx<'_, 'a>) -> &'a route::Fib {
        cx.ip.fib
    }

    /// Never multicast (no multicast routing here), from the unspecified address,
    /// to or (answered) from a link-local one; nor a packet whose hop limit runs
    /// out here.
    #[inline(always)]
    fn check(cx: &mut Inet6Cx<'_, '_>, m: Mbuf, h: &Ip6Hdr) -> Option<Mbuf> {
        let ll = crate::link::iface::is_link_local;
        if h.dst.is_multicast() || h.src.is_unspecified() || ll(h.dst) {
            cx.link.drop_pkt(m, DropReason::Ip6CantForward);
        } else if ll(h.src) {
            // RFC 4443 §3.1 code 2: the destination is beyond the source's scope.
            cx.link.stats.ip6.cantforward += 1;
            let e = Error6::Unreach(Icmpv6DstUnreachable::BeyondScope);
            crate::inet6::icmp6::icmp6_error(cx, m, e);
        } else if h.hlim <= 1 {
            cx.link.stats.ip6.timeexceed += 1;
            let e = Error6::TimeExceeded(Icmpv6TimeExceeded::HopLimitExceeded);
            crate::inet6::icmp6::icmp6_error(cx, m, e);
        } else {
            return Some(m);
        }
        None
    }

    #[inline(always)]
    fn lookup_vec(
        cx: &mut Inet6Cx<'_, '_>,
        fib: &route::Fib,
        pkts: &mut [(Mbuf, Ip6Hdr)],
        nhs: &mut Vec<u32>,
        scratch: (&mut Vec<u128>, &mut Vec<Option<u32>>),
    ) {
        lookup6_vec(cx, fib, pkts, nhs, scratch)
    }

    #[inline(always)]
    fn dst(h: &Ip6Hdr) -> Ipv6Addr {
        h.dst
    }

    #[inline(always)]
    fn hop_decrement(m: &mut Mbuf, h: &Ip6Hdr) -> bool {
        match m
            .try_first_mut()
            .map(|b| b.first_chunk_mut::<IP6_HDR_LEN>())
        {
            Ok(Some(b)) => {
                b[7] = h.hlim - 1;
                true
            }
            _ => false,
        }
    }

    #[inline(always)]
    fn neighbour(link: &mut LinkCx<'_>, i: IfIndex, a: Ipv6Addr) -> Option<EthernetAddress> {
        link.nd6_lookup(i, a)
    }

    #[inline(always)]
    fn one(
        cx: &mut Inet6Cx<'_, '_>,
        ifp: &Ifnet,
        m: Mbuf,
        h: Ip6Hdr,
        nh: Option<&Arc<route::NextHop>>,
    ) -> Option<(Mbuf, Fwd6Out)> {
        forward6_one(cx, ifp, m, h, nh)
    }

    #[inline(always)]
    fn resolve(cx: &mut Inet6Cx<'_, '_>, out: &Arc<Ifnet>, m: Mbuf, next: Ipv6Addr, _: bool) {
        crate::inet6::nd6::nd6_resolve_output(cx, out, m, next);
    }

    /// Routers do not fragment (`forward6_one` answered those without a segment
    /// size): Packet Too Big, as there.
    #[inline(always)]
    fn too_long(
        cx: &mut Inet6Cx<'_, '_>,
        _: &Arc<Ifnet>,
        m: Mbuf,
        _: Ipv6Addr,
        _: bool,
        mtu: usize,
    ) {
        cx.link.stats.ip6.toobig += 1;
        crate::inet6::icmp6::icmp6_error(cx, m, Error6::PktTooBig(mtu as u32));
    }

    #[inline(always)]
    fn forwarded(stats: &mut Stats) -> &mut u64 {
        &mut stats.ip6.forward
    }
}

/// `ip6_forward` over the packets of one burst from `ifp` that are for other hosts
/// (their fixed headers validated by `ip6_input`), as `ip_forward` does it (the
/// same body, `crate::ip::forward`'s): checks, lookups of the vector back to back,
/// each packet's hop limit and next hop, the output hooks over the vector, then
/// `l2` or neighbour discovery.
pub(crate) fn ip6_forward(
    cx: &mut Inet6Cx<'_, '_>,
    ifp: &Ifnet,
    pkts: &mut Vec<(Mbuf, Ip6Hdr)>,
    v: &mut Ip6ForwardVecs,
    l2: &mut Vec<L2Out>,
) {
    crate::ip::forward::forward::<V6>(cx, ifp, pkts, v, l2)
}

/// The next hops of a vector of IPv6 packets, looked up back to back.
#[inline]
fn lookup6_vec(
    cx: &mut Inet6Cx<'_, '_>,
    fib: &route::Fib,
    pkts: &mut [(Mbuf, Ip6Hdr)],
    nhs: &mut Vec<u32>,
    (dsts, raw): (&mut Vec<u128>, &mut Vec<Option<u32>>),
) {
    nhs.clear();
    let seed = cx.ip.isn_secret;
    let access = cx.link.access;
    let now = cx.link.now.as_nanos();
    match cx.ip.flows.as_deref_mut() {
        Some(ft) => {
            for (m, h) in pkts.iter_mut() {
                let (s128, d128, nxt) = (u128::from(h.src), u128::from(h.dst), u8::from(h.nxt));
                let p = ports(access, m, IP6_HDR_LEN, h.nxt);
                let (sp, dp) = ((p >> 16) as u16, p as u16);
                let key = route::FlowKey::v6(s128, d128, nxt, sp, dp);
                let dst = h.dst;
                let hash = || route::flow_hash6(s128, d128, nxt, sp, dp, seed);
                let nh = ft.lookup_or_insert_with(
                    &key,
                    now,
                    |&(i, g)| fib.nexthop(i).is_some_and(|n| n.is_valid(g)),
                    || fib.lookup6(dst, hash).map(|n| (n.index, n.generation())),
                );
                nhs.push(nh.map_or(NO_NH, |(i, _)| i));
            }
        }
        None => {
            dsts.clear();
            dsts.extend(pkts.iter().map(|(_, h)| u128::from(h.dst)));
            raw.clear();
            raw.resize(dsts.len(), None);
            fib.lookup6_raw(dsts, raw);
            for ((m, h), r) in pkts.iter_mut().zip(raw.iter()) {
                let Some(r) = *r else {
                    nhs.push(NO_NH);
                    continue;
                };
                let h = *h;
                let hash = || {
                    let p = ports(access, m, IP6_HDR_LEN, h.nxt);
                    let (s, d) = (u128::from(h.src), u128::from(h.dst));
                    route::flow_hash6(s, d, u8::from(h.nxt), (p >> 16) as u16, p as u16, seed)
                };
                nhs.push(fib.resolve_index(r, hash).unwrap_or(NO_NH));
            }
        }
    }
}

/// One IPv6 packet's forwarding after its lookup (as `forward4_one`).
#[inline]
fn forward6_one(
    cx: &mut Inet6Cx<'_, '_>,
    ifp: &Ifnet,
    mut m: Mbuf,
    h: Ip6Hdr,
    found: Option<&Arc<route::NextHop>>,
) -> Option<(Mbuf, Fwd6Out)> {
    let (src, dst) = (h.src, h.dst);
    let ll = crate::link::iface::is_link_local;
    let (outif, next, nh) = match found {
        Some(nh) => {
            match nh.kind {
                NhKind::Forward => {}
                NhKind::Blackhole => {
                    cx.link.drop_pkt(m, DropReason::Ip6Blackhole);
                    return None;
                }
                // IPv6 has no broadcast; no such entry is made for it.
                NhKind::Broadcast => {
                    cx.link.drop_pkt(m, DropReason::Ip6NoRoute);
                    return None;
                }
                NhKind::Reject | NhKind::Prohibit => {
                    cx.link.stats.ip6.reject += 1;
                    let code = if nh.kind == NhKind::Reject {
                        Icmpv6DstUnreachable::RejectRoute
                    } else {
                        Icmpv6DstUnreachable::AdminProhibit
                    };
                    crate::inet6::icmp6::icmp6_error(cx, m, Error6::Unreach(code));
                    return None;
                }
            }
            let ifaces = cx.link.ifaces;
            let Some(outif) = ifaces.get(nh.ifindex as usize) else {
                cx.link.drop_pkt(m, DropReason::Ip6NoRoute);
                return None;
            };
            let next = match nh.gateway {
                Some(IpAddr::V6(g)) => g,
                _ => dst,
            };
            (outif, next, Some(nh))
        }
        // Routers learnt from advertisements and the static default router.
        None => match crate::inet6::ip6::ip6_route(cx, dst, None) {
            Some((outif, next)) => (outif, next, None),
            None => {
                miss(cx.ip, dst.into(), ifp);
                cx.link.stats.ip6.noroute += 1;
                let e = Error6::Unreach(Icmpv6DstUnreachable::NoRoute);
                crate::inet6::icmp6::icmp6_error(cx, m, e);
                return None;
            }
        },
    };
    if !outif.is_up() {
        // As FreeBSD's ip6_forward answers an output error.
        cx.link.stats.ip6.cantforward += 1;
        let e = Error6::Unreach(Icmpv6DstUnreachable::AddrUnreachable);
        crate::inet6::icmp6::icmp6_error(cx, m, e);
        return None;
    }
    let mtu = match nh {
        Some(nh) if nh.mtu != 0 => (nh.mtu as usize).min(outif.mtu),
        _ => outif.mtu,
    };
    if m.len() > mtu && m.hdr.tso_segsz == 0 {
        // RFC 8200 §5: routers do not fragment; Packet Too Big with the MTU. (A
        // segment that stands for smaller ones is cut to fit later.)
        cx.link.stats.ip6.toobig += 1;
        let e = Error6::PktTooBig(mtu as u32);
        crate::inet6::icmp6::icmp6_error(cx, m, e);
        return None;
    }
    // RFC 4861 §8.2: back out of the arrival interface towards a neighbour of the
    // source. The target must be the router's link-local address, or the destination
    // itself when it is on the link.
    if outif.index == ifp.index
        && cx.ip.send_redirects
        && (next == dst || ll(next))
        && ifp.addrs6.iter().any(|a| a.addr.contains(src))
    {
        redirect6(cx, ifp, &m, src, dst, next);
    }
    if !V6::hop_decrement(&mut m, &h) {
        cx.link.drop_pkt(m, DropReason::Ip6OutDropped);
        return None;
    }
    Some((
        m,
        Fwd6Out {
            rcvif: ifp.index,
            out: outif.index,
            nh: nh.map_or(NO_NH, |n| n.index),
            next,
            mtu: mtu as u32,
            bcast: false,
        },
    ))
}

/// A redirect (RFC 4861 §4.5) telling `src` to reach `dst` through `target`, with
/// the target's link-layer address when known and as much of the packet as fits in
/// the minimum MTU.
fn redirect6(
    cx: &mut Inet6Cx<'_, '_>,
    ifp: &Ifnet,
    m: &Mbuf,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    target: Ipv6Addr,
) {
    let Some(from) = ifp.addrs6.first().map(|a| a.addr.addr) else {
        return;
    };
    let tlla = cx.link.nd6_lookup(ifp.index, target);
    // 40 IPv6 + 40 redirect + 8 TLLA + 8 option header: the rest of 1280 for data.
    let room = 1280 - IP6_HDR_LEN - 40 - 8 - 8;
    let n = m.len().min(room) / 8 * 8;
    let mut msg = vec![0u8; 40 + if tlla.is_some() { 8 } else { 0 } + 8 + n];
    msg[0] = 137;
    msg[8..24].copy_from_slice(&target.octets());
    msg[24..40].copy_from_slice(&dst.octets());
    let mut at = 40;
    if let Some(mac) = tlla {
        msg[at] = 2;
        msg[at + 1] = 1;
        msg[at + 2..at + 8].copy_from_slice(&mac.0);
        at += 8;
    }
    msg[at] = 4;
    msg[at + 1] = ((8 + n) / 8) as u8;
    if m.copydata(0, &mut msg[at + 8..at + 8 + n]).is_err() {
        return;
    }
    wire::Icmpv6Packet::new_unchecked(&mut msg[..]).fill_checksum(&from, &src);
    let Ok(r) = Mbuf::from_slice(&msg) else {
        return;
    };
    cx.link.stats.ip6.redirectsent += 1;
    cx.link.stats.icmp6.outredirect += 1;
    crate::inet6::ip6::ip6_output(
        cx,
        r,
        crate::inet6::ip6::Ip6Out {
            src: from,
            dst: src,
            proto: IpProtocol::Icmpv6,
            hlim: 255,
            keep_unspec: false,
            ifindex: Some(ifp.index),
        },
    );
}
