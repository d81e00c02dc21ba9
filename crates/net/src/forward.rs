//! Forwarding: `ip_forward` (RFC 1812) and `ip6_forward` (RFC 8200, RFC 4861 §8.2).
//!
//! A packet that arrives on an interface with forwarding on and is not for us is
//! looked up in the FIB: one longest-prefix match gives a next-hop object (a member
//! of a multipath group chosen by a seeded flow hash), whose resolved L2 rewrite is
//! used directly when the neighbour table has written one; otherwise the neighbour
//! table resolves (and then writes it). No lock and no reference count per packet.
//! With a flow table (`StackConfig::flow_table`), a flow's first packet is looked
//! up and the next hop's index and generation are kept for the flow; later packets
//! skip the lookup while that next hop lives (stateful ECMP: adding a path moves no
//! existing flow).
//!
//! Errors answer as a router does: time exceeded when the TTL or hop limit runs out,
//! unreachable (net for no route, host for a reject route, administratively
//! prohibited for a prohibit route; silence for a blackhole), fragmentation needed /
//! packet too big with the next hop's MTU, and a redirect when a packet leaves by
//! the interface it came in on towards a neighbour of its source. Every drop is
//! counted (`ip.cantforward`, `ip.noroute`, `ip.blackhole`, `ip.reject`,
//! `ip.timeexceed`, `ip.toobig`, and the `ip6` twins), and a lookup that finds no
//! route is announced as `RTM_MISS` to routing sockets.

use crate::ether::{self, ether_output};
use crate::icmp6::Error6;
use crate::iface::Ifnet;
use crate::ip::{IpInfo, IP_HDR_LEN};
use crate::ip6::IP6_HDR_LEN;
use crate::pfil::PfilPoint;
use crate::stats::DropReason;
use crate::worker::Cx;
use mbuf::Mbuf;
use route::{IpPrefix, NhKind, RtFlags, RtmType};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use wire::{
    EtherType, EthernetAddress, Icmpv4Message, Icmpv6DstUnreachable, Icmpv6TimeExceeded, IpProtocol,
};

/// The ports of a TCP/UDP header at `off`, or 0.
fn ports(cx_access: crate::hdr::HdrAccess, m: &mut Mbuf, off: usize, proto: IpProtocol) -> u32 {
    if !matches!(proto, IpProtocol::Tcp | IpProtocol::Udp) {
        return 0;
    }
    crate::hdr::hdr(cx_access, m, off, 4)
        .map(|p| u32::from_be_bytes([p[0], p[1], p[2], p[3]]))
        .unwrap_or(0)
}

/// `RTM_MISS` for a destination without a route (only built when someone listens).
fn miss(cx: &Cx<'_>, dst: IpAddr, ifp: &Ifnet) {
    let bus = &cx.shared.rtbus;
    if bus.has_subscribers() {
        bus.send(
            RtmType::Miss,
            IpPrefix::host(dst),
            None,
            u32::from(ifp.index.0),
            RtFlags::default(),
        );
    }
}

/// RFC 1624 incremental update of a header checksum for a 16-bit word changing from
/// `old` to `new`.
fn sum_update(sum: u16, old: u16, new: u16) -> u16 {
    let s = u32::from(!sum) + u32::from(!old) + u32::from(new);
    let s = (s & 0xffff) + (s >> 16);
    let s = (s & 0xffff) + (s >> 16);
    !(s as u16)
}

/// `ip_forward`: `m` (its header validated by `ip_input`) is for another host.
pub(crate) fn ip_forward(cx: &mut Cx<'_>, ifp: &Arc<Ifnet>, mut m: Mbuf, info: IpInfo) {
    let (src, dst) = (info.src, info.dst);
    // RFC 1812 §4.2.2.11, §5.3.7; RFC 3927 §7: never forward broadcast, multicast
    // (no multicast routing here), loopback, "this network", link-local or class E.
    let martian = |a: Ipv4Addr| {
        a.is_loopback() || a.octets()[0] == 0 || a.is_link_local() || a.octets()[0] >= 240
    };
    if info.bcast || martian(dst) || martian(src) {
        return cx.drop_pkt(m, DropReason::IpCantForward);
    }
    let (ttl, df, frag_off) = {
        let Ok(h) = crate::hdr::hdr(cx.access, &mut m, 0, IP_HDR_LEN) else {
            return cx.drop_pkt(m, DropReason::IpTooSmall);
        };
        let p = wire::Ipv4Packet::new_unchecked(h);
        (p.hop_limit(), p.dont_frag(), p.frag_offset())
    };
    if ttl <= 1 {
        cx.stats.ip.timeexceed += 1;
        return crate::icmp::icmp_error(cx, m, Icmpv4Message::TimeExceeded, 0, 0);
    }
    let fib: &route::Fib = cx.fib;
    let seed = cx.isn_secret;
    let (s32, d32, proto) = (u32::from(src), u32::from(dst), u8::from(info.proto));
    let nh = match cx.flows.as_deref_mut() {
        // Stateful: the flow keeps the next hop it was given while that lives.
        Some(ft) => {
            let p = if frag_off == 0 {
                ports(cx.access, &mut m, info.hlen, info.proto)
            } else {
                0
            };
            let (sp, dp) = ((p >> 16) as u16, p as u16);
            let key = route::FlowKey::v4(s32, d32, proto, sp, dp);
            let hash = || route::flow_hash4(s32, d32, proto, sp, dp, seed);
            ft.lookup_or_insert_with(
                &key,
                cx.now.as_nanos(),
                |&(i, g)| fib.nexthop(i).is_some_and(|n| n.is_valid(g)),
                || fib.lookup4(dst, hash).map(|n| (n.index, n.generation())),
            )
            .and_then(|(i, _)| fib.nexthop(i))
        }
        None => {
            let access = cx.access;
            let hash = || {
                let p = if frag_off == 0 {
                    ports(access, &mut m, info.hlen, info.proto)
                } else {
                    0
                };
                route::flow_hash4(s32, d32, proto, (p >> 16) as u16, p as u16, seed)
            };
            fib.lookup4(dst, hash)
        }
    };
    let Some(nh) = nh else {
        miss(cx, dst.into(), ifp);
        cx.stats.ip.noroute += 1;
        return crate::icmp::icmp_error(cx, m, Icmpv4Message::DstUnreachable, 0, 0);
    };
    match nh.kind {
        NhKind::Forward => {}
        NhKind::Blackhole => return cx.drop_pkt(m, DropReason::IpBlackhole),
        NhKind::Reject => {
            cx.stats.ip.reject += 1;
            return crate::icmp::icmp_error(cx, m, Icmpv4Message::DstUnreachable, 1, 0);
        }
        NhKind::Prohibit => {
            cx.stats.ip.reject += 1;
            return crate::icmp::icmp_error(cx, m, Icmpv4Message::DstUnreachable, 13, 0);
        }
    }
    let cfg: &crate::stack::NetConfig = cx.cfg;
    let Some(out) = cfg.ifaces.get(nh.ifindex as usize) else {
        return cx.drop_pkt(m, DropReason::IpNoRoute);
    };
    let next = match nh.gateway {
        Some(IpAddr::V4(g)) => g,
        _ => dst,
    };
    let mtu = if nh.mtu != 0 {
        (nh.mtu as usize).min(out.mtu)
    } else {
        out.mtu
    };
    // A segment that stands for smaller ones is cut to fit below, whatever its DF.
    if m.len() > mtu && df && m.hdr.tso_segsz == 0 {
        // RFC 1191: fragmentation needed, with the next hop's MTU.
        cx.stats.ip.toobig += 1;
        let mtu = mtu.min(65535) as u16;
        return crate::icmp::icmp_error(cx, m, Icmpv4Message::DstUnreachable, 4, mtu);
    }
    // RFC 1812 §5.2.7.2: back out of the interface it came in on, towards a
    // neighbour of the source that the source could have used itself: say so (and
    // forward it anyway). Not for source-routed (here: any option-carrying) packets.
    if out.index == ifp.index
        && cx.shared.params.send_redirects
        && info.hlen == IP_HDR_LEN
        && ifp
            .addrs
            .iter()
            .any(|a| a.contains(src) && a.contains(next))
    {
        redirect4(cx, &m, next);
    }
    // TTL - 1, checksum updated incrementally (RFC 1624).
    {
        if crate::hdr::hdr(cx.access, &mut m, 0, IP_HDR_LEN).is_err() {
            return cx.drop_pkt(m, DropReason::IpTooSmall);
        }
        let h = m.first_mut();
        let old = u16::from_be_bytes([h[8], h[9]]);
        h[8] = ttl - 1;
        let new = u16::from_be_bytes([h[8], h[9]]);
        let sum = sum_update(u16::from_be_bytes([h[10], h[11]]), old, new);
        h[10..12].copy_from_slice(&sum.to_be_bytes());
    }
    let Some(m) = cx.pfil_forwarded(
        PfilPoint::Inet,
        ifp.index,
        out.index,
        m,
        DropReason::PfilIpOut,
    ) else {
        return;
    };
    cx.stats.ip.forward += 1;
    // A segment from a link with offloads may be larger than this one takes, or
    // still lack its checksum.
    let l2 = |cx: &mut Cx<'_>, m| l2_output4(cx, out, m, nh, next);
    if let Some(m) = crate::ip::fit_link(cx, out, m, mtu, l2) {
        crate::ip::ip_fragment(cx, out, m, next, false, mtu);
    }
}

/// A forwarded IPv4 packet to its next hop's link-layer address: the route's cached
/// one for a gateway, else through ARP.
fn l2_output4(cx: &mut Cx<'_>, out: &Arc<Ifnet>, m: Mbuf, nh: &route::NextHop, next: Ipv4Addr) {
    if nh.gateway.is_some() {
        if let Some(mac) = nh.l2(cx.now.as_nanos()) {
            return ether_output(cx, out, m, EthernetAddress(mac), EtherType::Ipv4);
        }
    }
    ether::arp_resolve_output(cx, out, m, next, false);
}

/// An ICMP host redirect about the packet in `m` (which is still forwarded): a copy
/// of its header and first 8 data bytes goes back to the source.
fn redirect4(cx: &mut Cx<'_>, m: &Mbuf, gateway: Ipv4Addr) {
    let n = m.len().min(IP_HDR_LEN + 8);
    let mut quote = [0u8; IP_HDR_LEN + 8];
    if m.copydata(0, &mut quote[..n]).is_err() {
        return;
    }
    let Ok(copy) = Mbuf::from_slice(&quote[..n]) else {
        return;
    };
    cx.stats.ip.redirectsent += 1;
    crate::icmp::icmp_error_word(cx, copy, Icmpv4Message::Redirect, 1, gateway.octets());
}

/// `ip6_forward`: `m` (its fixed header validated by `ip6_input`) is for another
/// host.
pub(crate) fn ip6_forward(
    cx: &mut Cx<'_>,
    ifp: &Arc<Ifnet>,
    mut m: Mbuf,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hlim: u8,
) {
    let ll = crate::iface::is_link_local;
    if dst.is_multicast() || src.is_unspecified() || ll(dst) {
        return cx.drop_pkt(m, DropReason::Ip6CantForward);
    }
    if ll(src) {
        // RFC 4443 §3.1 code 2: the destination is beyond the source's scope.
        cx.stats.ip6.cantforward += 1;
        let e = Error6::Unreach(Icmpv6DstUnreachable::BeyondScope);
        return crate::icmp6::icmp6_error(cx, m, e);
    }
    if hlim <= 1 {
        cx.stats.ip6.timeexceed += 1;
        let e = Error6::TimeExceeded(Icmpv6TimeExceeded::HopLimitExceeded);
        return crate::icmp6::icmp6_error(cx, m, e);
    }
    let fib: &route::Fib = cx.fib;
    let seed = cx.isn_secret;
    let access = cx.access;
    let next_header = crate::hdr::hdr(access, &mut m, 6, 1).map_or(0, |b| b[0]);
    let (s128, d128) = (u128::from(src), u128::from(dst));
    let found = match cx.flows.as_deref_mut() {
        Some(ft) => {
            let p = ports(access, &mut m, IP6_HDR_LEN, IpProtocol::from(next_header));
            let (sp, dp) = ((p >> 16) as u16, p as u16);
            let key = route::FlowKey::v6(s128, d128, next_header, sp, dp);
            let hash = || route::flow_hash6(s128, d128, next_header, sp, dp, seed);
            ft.lookup_or_insert_with(
                &key,
                cx.now.as_nanos(),
                |&(i, g)| fib.nexthop(i).is_some_and(|n| n.is_valid(g)),
                || fib.lookup6(dst, hash).map(|n| (n.index, n.generation())),
            )
            .and_then(|(i, _)| fib.nexthop(i))
        }
        None => {
            let hash = || {
                let p = ports(access, &mut m, IP6_HDR_LEN, IpProtocol::from(next_header));
                route::flow_hash6(s128, d128, next_header, (p >> 16) as u16, p as u16, seed)
            };
            fib.lookup6(dst, hash)
        }
    };
    let (out, next, nh) = match found {
        Some(nh) => {
            match nh.kind {
                NhKind::Forward => {}
                NhKind::Blackhole => return cx.drop_pkt(m, DropReason::Ip6Blackhole),
                NhKind::Reject | NhKind::Prohibit => {
                    cx.stats.ip6.reject += 1;
                    let code = if nh.kind == NhKind::Reject {
                        Icmpv6DstUnreachable::RejectRoute
                    } else {
                        Icmpv6DstUnreachable::AdminProhibit
                    };
                    return crate::icmp6::icmp6_error(cx, m, Error6::Unreach(code));
                }
            }
            let cfg: &crate::stack::NetConfig = cx.cfg;
            let Some(out) = cfg.ifaces.get(nh.ifindex as usize) else {
                return cx.drop_pkt(m, DropReason::Ip6NoRoute);
            };
            let next = match nh.gateway {
                Some(IpAddr::V6(g)) => g,
                _ => dst,
            };
            (out, next, Some(nh))
        }
        // Routers learnt from advertisements and the static default router.
        None => match crate::ip6::ip6_route(cx, dst, None) {
            Some((out, next)) => (out, next, None),
            None => {
                miss(cx, dst.into(), ifp);
                cx.stats.ip6.noroute += 1;
                let e = Error6::Unreach(Icmpv6DstUnreachable::NoRoute);
                return crate::icmp6::icmp6_error(cx, m, e);
            }
        },
    };
    let mtu = match nh {
        Some(nh) if nh.mtu != 0 => (nh.mtu as usize).min(out.mtu),
        _ => out.mtu,
    };
    if m.len() > mtu && m.hdr.tso_segsz == 0 {
        // RFC 8200 §5: routers do not fragment; Packet Too Big with the MTU. (A
        // segment that stands for smaller ones is cut to fit below.)
        cx.stats.ip6.toobig += 1;
        let e = Error6::PktTooBig(mtu as u32);
        return crate::icmp6::icmp6_error(cx, m, e);
    }
    // RFC 4861 §8.2: back out of the arrival interface towards a neighbour of the
    // source. The target must be the router's link-local address, or the destination
    // itself when it is on the link.
    if out.index == ifp.index
        && cx.shared.params.send_redirects
        && (next == dst || ll(next))
        && ifp.addrs6.iter().any(|a| a.addr.contains(src))
    {
        redirect6(cx, ifp, &m, src, dst, next);
    }
    {
        if crate::hdr::hdr(cx.access, &mut m, 0, IP6_HDR_LEN).is_err() {
            return cx.drop_pkt(m, DropReason::Ip6TooSmall);
        }
        m.first_mut()[7] = hlim - 1;
    }
    let Some(m) = cx.pfil_forwarded(
        PfilPoint::Inet6,
        ifp.index,
        out.index,
        m,
        DropReason::PfilIp6Out,
    ) else {
        return;
    };
    cx.stats.ip6.forward += 1;
    // A segment from a link with offloads may be larger than this one takes, or
    // still lack its checksum.
    let l2 = |cx: &mut Cx<'_>, m| l2_output6(cx, out, m, nh, next);
    if let Some(m) = crate::ip::fit_link(cx, out, m, mtu, l2) {
        // Routers do not fragment (the check above answered those without a
        // segment size): Packet Too Big, as there.
        cx.stats.ip6.toobig += 1;
        crate::icmp6::icmp6_error(cx, m, Error6::PktTooBig(mtu as u32));
    }
}

/// A forwarded IPv6 packet to its next hop's link-layer address: the route's cached
/// one for a gateway, else through neighbour discovery.
fn l2_output6(
    cx: &mut Cx<'_>,
    out: &Arc<Ifnet>,
    m: Mbuf,
    nh: Option<&Arc<route::NextHop>>,
    next: Ipv6Addr,
) {
    if let Some(nh) = nh.filter(|n| n.gateway.is_some()) {
        if let Some(mac) = nh.l2(cx.now.as_nanos()) {
            return ether_output(cx, out, m, EthernetAddress(mac), EtherType::Ipv6);
        }
    }
    crate::nd6::nd6_resolve_output(cx, out, m, next);
}

/// A redirect (RFC 4861 §4.5) telling `src` to reach `dst` through `target`, with
/// the target's link-layer address when known and as much of the packet as fits in
/// the minimum MTU.
fn redirect6(
    cx: &mut Cx<'_>,
    ifp: &Arc<Ifnet>,
    m: &Mbuf,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    target: Ipv6Addr,
) {
    let Some(from) = ifp.addrs6.first().map(|a| a.addr.addr) else {
        return;
    };
    let tlla = cx.nd6_lookup(ifp.index, target);
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
    cx.stats.ip6.redirectsent += 1;
    cx.stats.icmp6.outredirect += 1;
    crate::ip6::ip6_output(
        cx,
        r,
        crate::ip6::Ip6Out {
            src: from,
            dst: src,
            proto: IpProtocol::Icmpv6,
            hlim: 255,
            keep_unspec: false,
            ifindex: Some(ifp.index),
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incremental_checksum_matches_a_full_one() {
        let mut h = [
            0x45, 0, 0, 0x54, 0x12, 0x34, 0x40, 0, 64, 1, 0, 0, 198, 18, 0, 1, 198, 19, 0, 1,
        ];
        let full = |h: &[u8]| {
            let mut c = h.to_vec();
            c[10] = 0;
            c[11] = 0;
            !wire::checksum::data(&c)
        };
        let s = full(&h);
        h[10..12].copy_from_slice(&s.to_be_bytes());
        for ttl in (1..=64u8).rev() {
            let old = u16::from_be_bytes([h[8], h[9]]);
            h[8] = ttl - 1;
            let new = u16::from_be_bytes([h[8], h[9]]);
            let s = sum_update(u16::from_be_bytes([h[10], h[11]]), old, new);
            h[10..12].copy_from_slice(&s.to_be_bytes());
            assert_eq!(s, full(&h), "ttl {ttl}");
        }
    }
}
