//! IPv4 forwarding: `ip_forward` (RFC 1812); `ip6_forward` (`inet6::forward6`) has
//! the same shape.
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
//! route is announced as `RTM_MISS` to routing sockets. A directed broadcast (the
//! broadcast or network address of a connected subnet; a /31 has neither, RFC
//! 3021) is not forwarded (RFC 2644): dropped, `ip.bcastfwd`, unless
//! `net.inet.ip.directed-broadcast` is on: then it leaves as a link broadcast. The
//! lookup decides it, as every other case: those addresses are FIB entries of
//! their own ([`NhKind::Broadcast`]), installed with the address's connected
//! route, so no packet scans an interface's addresses. Connected destinations take
//! the fast path as gateways do, their link address from the neighbour table's
//! snapshot.
//!
//! # Stage contract (`ip_forward`)
//! - **Uses**: each packet's `IpInfo` (`dst` as the lookup's key, `src`, TTL, DF,
//!   header length, ports for a multipath hash); the batch's FIB, flow table and
//!   interfaces; the neighbour tables' snapshots; the pfil hooks (`Inet`, out;
//!   `Ether`, out).
//! - **Sets**: TTL - 1 and the header checksum; the link header when the next
//!   hop's address is known.
//! - **Next**: the out-interface's transmit vector (fast path), `L2Out` to
//!   `ether_output`'s hooks, ARP's hold queue, fragmentation, or an ICMP error;
//!   drops counted (`ip.*`).

use crate::ifindex::IfIndex;
use crate::inet::cx::InetCx;
use crate::inet::ip::{IpInfo, IP_HDR_LEN};
use crate::ip::forward::{FwdFamily, FwdVecs};
pub(crate) use crate::ip::{miss, ports, NO_NH};
use crate::link::ether::{self, L2Out};
use crate::link::iface::Ifnet;
use crate::link::LinkCx;
use crate::pfil::PfilPoint;
use crate::stats::{DropReason, Stats};
use mbuf::Mbuf;
use route::NhKind;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use wire::{EtherType, EthernetAddress, Icmpv4Message};

/// RFC 1624 incremental update of a header checksum for a 16-bit word changing from
/// `old` to `new`.
fn sum_update(sum: u16, old: u16, new: u16) -> u16 {
    let s = u32::from(!sum) + u32::from(!old) + u32::from(new);
    let s = (s & 0xffff) + (s >> 16);
    let s = (s & 0xffff) + (s >> 16);
    !(s as u16)
}

/// TTL - 1 in the header at the front of `m` (which holds `ttl`), its checksum
/// updated incrementally (RFC 1624); a shared first buffer is copied first. False
/// when the header is not there whole or the copy found no buffer.
#[inline(always)]
fn ttl_decrement(m: &mut Mbuf, ttl: u8) -> bool {
    let Ok(Some(h)) = m.try_first_mut().map(|h| h.first_chunk_mut::<IP_HDR_LEN>()) else {
        return false;
    };
    let old = u16::from_be_bytes([h[8], h[9]]);
    h[8] = ttl - 1;
    let new = u16::from_be_bytes([h[8], h[9]]);
    let sum = sum_update(u16::from_be_bytes([h[10], h[11]]), old, new);
    h[10..12].copy_from_slice(&sum.to_be_bytes());
    true
}

/// A forwarded IPv4 packet between `ip_forward`'s decision and the link.
pub(crate) type FwdOut = crate::ip::forward::FwdOut<Ipv4Addr>;

/// `ip_forward`'s vectors and scratch.
pub(crate) type IpForwardVecs = FwdVecs<V4>;

/// IPv4 as the forwarding body (`crate::ip::forward`) takes it.
#[derive(Debug, Default)]
pub(crate) struct V4;

impl FwdFamily for V4 {
    type Cx<'b, 'a: 'b> = InetCx<'b, 'a>;
    type Info = IpInfo;
    type Addr = Ipv4Addr;
    type Key = u32;
    const PFIL: PfilPoint = PfilPoint::Inet;
    const PFIL_DROP: DropReason = DropReason::PfilIpOut;
    const NO_ROUTE: DropReason = DropReason::IpNoRoute;
    const NEEDS_NH: bool = true;
    const ETHER: EtherType = EtherType::Ipv4;

    #[inline(always)]
    fn fib<'a>(cx: &Self::Cx<'_, 'a>) -> &'a route::Fib {
        cx.ip.fib
    }

    /// RFC 1812 §4.2.2.11, §5.3.7; RFC 3927 §7: never forward broadcast,
    /// multicast (no multicast routing here), loopback, "this network", link-local
    /// or class E; nor a packet whose TTL runs out here.
    #[inline(always)]
    fn check(cx: &mut InetCx<'_, '_>, m: Mbuf, info: &IpInfo) -> Option<Mbuf> {
        let martian = |a: Ipv4Addr| {
            a.is_loopback() || a.octets()[0] == 0 || a.is_link_local() || a.octets()[0] >= 240
        };
        if info.bcast || martian(info.dst) || martian(info.src) {
            cx.link.drop_pkt(m, DropReason::IpCantForward);
        } else if info.ttl <= 1 {
            cx.link.stats.ip.timeexceed += 1;
            crate::inet::icmp::icmp_error(cx, m, Icmpv4Message::TimeExceeded, 0, 0);
        } else {
            return Some(m);
        }
        None
    }

    #[inline(always)]
    fn lookup_vec(
        cx: &mut InetCx<'_, '_>,
        fib: &route::Fib,
        pkts: &mut [(Mbuf, IpInfo)],
        nhs: &mut Vec<u32>,
        scratch: (&mut Vec<u32>, &mut Vec<Option<u32>>),
    ) {
        lookup4_vec(cx, fib, pkts, nhs, scratch)
    }

    #[inline(always)]
    fn dst(info: &IpInfo) -> Ipv4Addr {
        info.dst
    }

    #[inline(always)]
    fn hop_decrement(m: &mut Mbuf, info: &IpInfo) -> bool {
        ttl_decrement(m, info.ttl)
    }

    #[inline(always)]
    fn neighbour(link: &mut LinkCx<'_>, i: IfIndex, a: Ipv4Addr) -> Option<EthernetAddress> {
        link.arp_lookup(i, a)
    }

    #[inline(always)]
    fn one(
        cx: &mut InetCx<'_, '_>,
        ifp: &Ifnet,
        m: Mbuf,
        info: IpInfo,
        nh: Option<&Arc<route::NextHop>>,
    ) -> Option<(Mbuf, FwdOut)> {
        forward4_one(cx, ifp, m, info, nh)
    }

    #[inline(always)]
    fn resolve(cx: &mut InetCx<'_, '_>, out: &Arc<Ifnet>, m: Mbuf, next: Ipv4Addr, bcast: bool) {
        ether::arp_resolve_output(cx.link, out, m, next, bcast);
    }

    #[inline(always)]
    fn too_long(
        cx: &mut InetCx<'_, '_>,
        out: &Arc<Ifnet>,
        m: Mbuf,
        next: Ipv4Addr,
        bcast: bool,
        mtu: usize,
    ) {
        crate::inet::ip::ip_fragment(cx, out, m, next, bcast, mtu);
    }

    #[inline(always)]
    fn forwarded(stats: &mut Stats) -> &mut u64 {
        &mut stats.ip.forward
    }
}

/// `ip_forward` over the packets of one burst from `ifp` that are for other hosts
/// (their headers validated by `ip_input`), as a vector stage: the checks of each,
/// then the lookups of a chunk of them back to back so their cache misses overlap,
/// then each packet's TTL and next hop; the output hooks over the vector; then
/// those whose next hop's link address is known go to `l2` for `ether_output`,
/// the others through the neighbour table. Errors answer as a router does. The
/// body is `crate::ip::forward`'s, IPv6's too.
pub(crate) fn ip_forward(
    cx: &mut InetCx<'_, '_>,
    ifp: &Ifnet,
    pkts: &mut Vec<(Mbuf, IpInfo)>,
    v: &mut IpForwardVecs,
    l2: &mut Vec<L2Out>,
) {
    crate::ip::forward::forward::<V4>(cx, ifp, pkts, v, l2)
}

/// The next hops of a vector of packets (their indices, or [`NO_NH`]), looked up
/// back to back. With a flow table a flow keeps the next hop it was first given
/// while that lives.
#[inline]
fn lookup4_vec(
    cx: &mut InetCx<'_, '_>,
    fib: &route::Fib,
    pkts: &mut [(Mbuf, IpInfo)],
    nhs: &mut Vec<u32>,
    (dsts, raw): (&mut Vec<u32>, &mut Vec<Option<u32>>),
) {
    nhs.clear();
    let seed = cx.ip.isn_secret;
    let access = cx.link.access;
    let now = cx.link.now.as_nanos();
    match cx.ip.flows.as_deref_mut() {
        // Stateful: the flow keeps the next hop it was given while that lives.
        Some(ft) => {
            for (m, info) in pkts.iter_mut() {
                let (s32, d32) = (u32::from(info.src), u32::from(info.dst));
                let proto = u8::from(info.proto);
                let p = if info.frag_off == 0 {
                    ports(access, m, info.hlen, info.proto)
                } else {
                    0
                };
                let (sp, dp) = ((p >> 16) as u16, p as u16);
                let key = route::FlowKey::v4(s32, d32, proto, sp, dp);
                let dst = info.dst;
                let hash = || route::flow_hash4(s32, d32, proto, sp, dp, seed);
                let nh = ft.lookup_or_insert_with(
                    &key,
                    now,
                    |&(i, g)| fib.nexthop(i).is_some_and(|n| n.is_valid(g)),
                    || fib.lookup4(dst, hash).map(|n| (n.index, n.generation())),
                );
                nhs.push(nh.map_or(NO_NH, |(i, _)| i));
            }
        }
        None => {
            dsts.clear();
            dsts.extend(pkts.iter().map(|(_, info)| u32::from(info.dst)));
            raw.clear();
            raw.resize(dsts.len(), None);
            fib.lookup4_raw(dsts, raw);
            for ((m, info), r) in pkts.iter_mut().zip(raw.iter()) {
                let Some(r) = *r else {
                    nhs.push(NO_NH);
                    continue;
                };
                let info = *info;
                // The flow's hash, asked for only by a multipath route.
                let hash = || {
                    let p = if info.frag_off == 0 {
                        ports(access, m, info.hlen, info.proto)
                    } else {
                        0
                    };
                    let (s, d) = (u32::from(info.src), u32::from(info.dst));
                    route::flow_hash4(s, d, u8::from(info.proto), (p >> 16) as u16, p as u16, seed)
                };
                nhs.push(fib.resolve_index(r, hash).unwrap_or(NO_NH));
            }
        }
    }
}

/// One packet's forwarding after its lookup: the route's kind, the MTU, a redirect,
/// TTL - 1; on to `out` for the output hooks, or answered with an ICMP error.
#[inline]
fn forward4_one(
    cx: &mut InetCx<'_, '_>,
    ifp: &Ifnet,
    mut m: Mbuf,
    info: IpInfo,
    nh: Option<&Arc<route::NextHop>>,
) -> Option<(Mbuf, FwdOut)> {
    let (src, dst) = (info.src, info.dst);
    let Some(nh) = nh else {
        miss(cx.ip, dst.into(), ifp);
        cx.link.stats.ip.noroute += 1;
        crate::inet::icmp::icmp_error(cx, m, Icmpv4Message::DstUnreachable, 0, 0);
        return None;
    };
    let bcast = match nh.kind {
        NhKind::Forward => false,
        // RFC 2644, RFC 1812 §5.3.5.2: a router must not forward a directed
        // broadcast by default: the broadcast (or, shorter than /31, the network)
        // address of a subnet on the link is refused, as FreeBSD's `ip_output`
        // does with `directed-broadcast` 0 and Linux without `bc_forwarding`. The
        // lookup tells: such addresses are FIB entries of their own.
        NhKind::Broadcast if !cx.v4.inet.directed_broadcast => {
            cx.link.drop_pkt(m, DropReason::IpBcastFwd);
            return None;
        }
        NhKind::Broadcast => true,
        NhKind::Blackhole => {
            cx.link.drop_pkt(m, DropReason::IpBlackhole);
            return None;
        }
        NhKind::Reject => {
            cx.link.stats.ip.reject += 1;
            crate::inet::icmp::icmp_error(cx, m, Icmpv4Message::DstUnreachable, 1, 0);
            return None;
        }
        NhKind::Prohibit => {
            cx.link.stats.ip.reject += 1;
            crate::inet::icmp::icmp_error(cx, m, Icmpv4Message::DstUnreachable, 13, 0);
            return None;
        }
    };
    let ifaces = cx.link.ifaces;
    let Some(outif) = ifaces.get(nh.ifindex as usize) else {
        cx.link.drop_pkt(m, DropReason::IpNoRoute);
        return None;
    };
    if !outif.is_up() {
        // FreeBSD's ip_forward answers ENETDOWN so.
        cx.link.stats.ip.cantforward += 1;
        crate::inet::icmp::icmp_error(cx, m, Icmpv4Message::DstUnreachable, 1, 0);
        return None;
    }
    let next = match nh.gateway {
        Some(IpAddr::V4(g)) => g,
        _ => dst,
    };
    let mtu = if nh.mtu != 0 {
        (nh.mtu as usize).min(outif.mtu)
    } else {
        outif.mtu
    };
    // A segment that stands for smaller ones is cut to fit later, whatever its DF.
    if m.len() > mtu && info.df && m.hdr.tso_segsz == 0 {
        // RFC 1191: fragmentation needed, with the next hop's MTU.
        cx.link.stats.ip.toobig += 1;
        let mtu = mtu.min(65535) as u16;
        crate::inet::icmp::icmp_error(cx, m, Icmpv4Message::DstUnreachable, 4, mtu);
        return None;
    }
    // RFC 1812 §5.2.7.2: back out of the interface it came in on, towards a
    // neighbour of the source that the source could have used itself: say so (and
    // forward it anyway). Not for source-routed (here: any option-carrying) packets.
    if outif.index == ifp.index
        && cx.ip.send_redirects
        && info.hlen == IP_HDR_LEN
        && ifp
            .addrs
            .iter()
            .any(|a| a.contains(src) && a.contains(next))
    {
        redirect4(cx, &m, next);
    }
    // TTL - 1, checksum updated incrementally (RFC 1624). `ip_input` left the
    // header in the first buffer; a shared one is copied first.
    if !ttl_decrement(&mut m, info.ttl) {
        cx.link.drop_pkt(m, DropReason::IpOutDropped);
        return None;
    }
    Some((
        m,
        FwdOut {
            rcvif: ifp.index,
            out: outif.index,
            nh: nh.index,
            next,
            mtu: mtu as u32,
            bcast,
        },
    ))
}

/// An ICMP host redirect about the packet in `m` (which is still forwarded): a copy
/// of its header and first 8 data bytes goes back to the source.
fn redirect4(cx: &mut InetCx<'_, '_>, m: &Mbuf, gateway: Ipv4Addr) {
    let n = m.len().min(IP_HDR_LEN + 8);
    let mut quote = [0u8; IP_HDR_LEN + 8];
    if m.copydata(0, &mut quote[..n]).is_err() {
        return;
    }
    let Ok(copy) = Mbuf::from_slice(&quote[..n]) else {
        return;
    };
    cx.link.stats.ip.redirectsent += 1;
    crate::inet::icmp::icmp_error_word(cx, copy, Icmpv4Message::Redirect, 1, gateway.octets());
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
