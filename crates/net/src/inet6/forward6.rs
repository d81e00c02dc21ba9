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

use crate::inet6::cx::Inet6Cx;
use crate::inet6::icmp6::Error6;
use crate::inet6::ip6::{Ip6Hdr, IP6_HDR_LEN};
use crate::ip::{miss, ports, NO_NH};
use crate::link::ether::{self, ether_output, L2Out, ETHER_HDR_LEN};
use crate::link::iface::Ifnet;
use crate::pfil::{Dir, PfilPoint};
use crate::stats::DropReason;
use mbuf::Mbuf;
use route::NhKind;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Arc;
use wire::{EtherType, EthernetAddress, Icmpv6DstUnreachable, Icmpv6TimeExceeded, IpProtocol};

/// A forwarded IPv6 packet between `ip6_forward`'s decision and the link.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fwd6Out {
    rcvif: crate::link::iface::IfIndex,
    out: crate::link::iface::IfIndex,
    /// The next hop's index in the batch's FIB; none for a router learnt from
    /// neighbour discovery or the static default router.
    nh: Option<u32>,
    next: Ipv6Addr,
    mtu: u32,
}

/// `ip6_forward`'s vectors and scratch.
#[derive(Debug, Default)]
pub(crate) struct Ip6ForwardVecs {
    checked: Vec<(Mbuf, Ip6Hdr)>,
    nhs: Vec<u32>,
    /// The lookups' scratch: the destinations, and the routes' raw values.
    dsts: Vec<u128>,
    raw: Vec<Option<u32>>,
    out: Vec<(Mbuf, Fwd6Out)>,
    pf: crate::link::cx::PfilScratch<Fwd6Out>,
}

/// `ip6_forward` over the packets of one burst from `ifp` that are for other hosts
/// (their fixed headers validated by `ip6_input`), as `ip_forward` does it: checks,
/// lookups of a chunk back to back, each packet's hop limit and next hop, the
/// output hooks over the vector, then `l2` or neighbour discovery.
pub(crate) fn ip6_forward(
    cx: &mut Inet6Cx<'_, '_>,
    ifp: &Ifnet,
    pkts: &mut Vec<(Mbuf, Ip6Hdr)>,
    v: &mut Ip6ForwardVecs,
    l2: &mut Vec<L2Out>,
) {
    let ll = crate::link::iface::is_link_local;
    for (m, h) in pkts.drain(..) {
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
            v.checked.push((m, h));
        }
    }
    let fib: &route::Fib = cx.ip.fib;
    lookup6_vec(
        cx,
        fib,
        &mut v.checked,
        &mut v.nhs,
        (&mut v.dsts, &mut v.raw),
    );
    let hooks = cx.link.pfil_active(PfilPoint::Inet6, Dir::Out);
    // As in `ip_forward`: no hook on any way out, every packet the fast path.
    let fast = !hooks && !cx.link.pfil_active(PfilPoint::Ether, Dir::Out);
    let now = cx.link.now.as_nanos();
    for ((m, h), &nh) in v.checked.drain(..).zip(&v.nhs) {
        let nh = if nh == NO_NH { None } else { fib.nexthop(nh) };
        let m = match nh {
            Some(nh) if fast || cx.link.out_clear(PfilPoint::Inet6, nh.ifindex) => {
                match forward6_fast(cx, ifp, m, &h, nh, now) {
                    Ok(()) => continue,
                    Err(m) => m,
                }
            }
            _ => m,
        };
        match forward6_one(cx, ifp, m, h, nh) {
            Some(p) if hooks && cx.link.pfil_active_on(PfilPoint::Inet6, Dir::Out, p.1.out) => {
                v.out.push(p)
            }
            Some((m, o)) => {
                let direct = cx.link.ether_direct(o.out);
                forward6_out(cx, fib, m, o, l2, direct)
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
    let kept = cx.link.stats.pfil.consumed;
    cx.link.pfil_vec(
        PfilPoint::Inet6,
        Dir::Out,
        DropReason::PfilIp6Out,
        &mut v.out,
        &mut v.pf,
        |o| (o.out, Some(o.rcvif)),
    );
    cx.link.stats.ip6.forward += cx.link.stats.pfil.consumed - kept;
    for (m, o) in v.out.drain(..) {
        let direct = cx.link.ether_direct(o.out);
        forward6_out(cx, fib, m, o, l2, direct);
    }
}

/// The common case of one forwarded IPv6 packet, done at once (as `forward4_fast`,
/// gateways and connected destinations alike): hop limit - 1, the link header
/// written, onto the transmit vector; anything else comes back, untouched, for the
/// general path.
#[inline]
fn forward6_fast(
    cx: &mut Inet6Cx<'_, '_>,
    ifp: &Ifnet,
    mut m: Mbuf,
    h: &Ip6Hdr,
    nh: &route::NextHop,
    now: u64,
) -> Result<(), Mbuf> {
    if nh.kind != NhKind::Forward {
        return Err(m);
    }
    let ifaces = cx.link.ifaces;
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
    // A gateway's link address is in its next hop; a connected destination's in
    // the link's neighbour table (its snapshot, lock-free).
    let mac = match nh.gateway {
        Some(_) => nh.l2(now),
        None => cx.link.nd6_lookup(out.index, h.dst).map(|a| a.0),
    };
    let Some(mac) = mac else {
        return Err(m);
    };
    match m
        .try_first_mut()
        .map(|b| b.first_chunk_mut::<IP6_HDR_LEN>())
    {
        Ok(Some(b)) => b[7] = h.hlim - 1,
        _ => return Err(m),
    }
    cx.link.stats.ip6.forward += 1;
    let dst = EthernetAddress(mac);
    crate::link::ether::ether_output_now(cx.link, out, m, dst, EtherType::Ipv6);
    Ok(())
}

/// A forwarded IPv6 packet past the output hooks to its link (as `forward4_out`).
#[inline]
fn forward6_out(
    cx: &mut Inet6Cx<'_, '_>,
    fib: &route::Fib,
    m: Mbuf,
    o: Fwd6Out,
    l2: &mut Vec<L2Out>,
    direct: bool,
) {
    cx.link.stats.ip6.forward += 1;
    let ifaces = cx.link.ifaces;
    let Some(out) = ifaces.get(o.out.get()) else {
        return cx.link.drop_pkt(m, DropReason::Ip6NoRoute);
    };
    let nh = o.nh.and_then(|i| fib.nexthop(i));
    let mtu = o.mtu as usize;
    if m.len() <= mtu && m.hdr.csum_flags & mbuf::CSUM_L4_NEEDED == 0 {
        let now = cx.link.now.as_nanos();
        let mac = match nh {
            Some(n) if n.gateway.is_some() => n.l2(now).map(EthernetAddress),
            Some(_) => cx.link.nd6_lookup(out.index, o.next),
            None => None,
        };
        if let Some(dst) = mac {
            let ty = EtherType::Ipv6;
            return ether::ether_output_known(cx.link, out, m, dst, ty, l2, direct);
        }
    }
    // A segment from a link with offloads may be larger than this one takes, or
    // still lack its checksum.
    let next = o.next;
    let l2out = |cx: &mut Inet6Cx<'_, '_>, m| l2_output6(cx, out, m, nh, next);
    if let Some(m) = crate::link::output::fit_link(cx, out, m, mtu, l2out) {
        // Routers do not fragment (`forward6_one` answered those without a
        // segment size): Packet Too Big, as there.
        cx.link.stats.ip6.toobig += 1;
        crate::inet6::icmp6::icmp6_error(cx, m, Error6::PktTooBig(mtu as u32));
    }
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
    match m.try_first_mut() {
        Ok(b) if b.len() >= IP6_HDR_LEN => b[7] = h.hlim - 1,
        _ => {
            cx.link.drop_pkt(m, DropReason::Ip6OutDropped);
            return None;
        }
    }
    Some((
        m,
        Fwd6Out {
            rcvif: ifp.index,
            out: outif.index,
            nh: nh.map(|n| n.index),
            next,
            mtu: mtu as u32,
        },
    ))
}

/// A forwarded IPv6 packet to its next hop's link-layer address: the route's cached
/// one for a gateway, else through neighbour discovery.
fn l2_output6(
    cx: &mut Inet6Cx<'_, '_>,
    out: &Arc<Ifnet>,
    m: Mbuf,
    nh: Option<&Arc<route::NextHop>>,
    next: Ipv6Addr,
) {
    if let Some(nh) = nh.filter(|n| n.gateway.is_some()) {
        if let Some(mac) = nh.l2(cx.link.now.as_nanos()) {
            return ether_output(cx.link, out, m, EthernetAddress(mac), EtherType::Ipv6);
        }
    }
    crate::inet6::nd6::nd6_resolve_output(cx, out, m, next);
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
