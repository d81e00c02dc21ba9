//! IPv4 output (`ip_output`), RFC 791 and RFC 1122 §3.2.1, and what IPv4's input
//! and output share (the header's length, [`IpInfo`]).
//!
//! Output picks the interface and next hop from the FIB (connected, static and
//! default routes), runs the output hooks, fragments what the interface's MTU
//! cannot carry, and resolves the link address. Input is `input`'s; it calls down
//! to ICMP for its errors, and ICMP down to here for its output.

use crate::inet::cx::InetCx;
use crate::ip::frag::{self, FragError};
use crate::link::ether;
use crate::link::iface::Ifnet;
use crate::link::output::fit_link;
use crate::pfil::{Dir, PfilPoint};
use crate::stats::DropReason;
use mbuf::Mbuf;
use std::net::Ipv4Addr;
use std::sync::Arc;
use wire::{IpProtocol, Ipv4Packet};

pub(crate) const IP_HDR_LEN: usize = 20;
pub(crate) use crate::sockbuf::DEFAULT_TTL;

/// The fields of a received header that forwarding and upper layers need, read
/// once by `ip_input` while the header is at hand.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IpInfo {
    pub src: Ipv4Addr,
    /// The header's destination; for a packet to forward with an `ipfw fwd` next
    /// hop, that next hop (what the route is looked up for).
    pub dst: Ipv4Addr,
    pub hlen: usize,
    pub proto: IpProtocol,
    /// Sent to a broadcast or multicast address.
    pub bcast: bool,
    pub ttl: u8,
    /// Don't Fragment.
    pub df: bool,
    /// A fragment (more fragments, or an offset).
    pub frag: bool,
    /// The fragment offset (non-zero: not the first fragment, so no ports).
    pub frag_off: u16,
}

/// The route to `dst`: interface, next hop, and whether it is a broadcast. The
/// interface is borrowed from the batch's configuration: no reference count is
/// touched per packet.
pub(crate) fn ip_route<'a>(
    cx: &InetCx<'_, 'a>,
    dst: Ipv4Addr,
) -> Option<(&'a Arc<Ifnet>, Ipv4Addr, bool)> {
    let ifs: &'a [Arc<Ifnet>] = cx.link.ifaces;
    if dst.is_broadcast() || dst.is_multicast() {
        return ifs
            .iter()
            .find(|i| !i.addrs.is_empty())
            .map(|i| (i, dst, dst.is_broadcast()));
    }
    // The FIB: connected networks, static and default routes; a subnet's network
    // and broadcast addresses are entries of their own, sent to as link
    // broadcasts. Our own datagrams to a multipath route spread by destination.
    let fib: &'a route::Fib = cx.ip.fib;
    let hash = || route::flow_hash4(0, u32::from(dst), 0, 0, 0, cx.ip.isn_secret);
    if let Some(nh) = fib.lookup4(dst, hash) {
        let bcast = match nh.kind {
            route::NhKind::Forward => false,
            route::NhKind::Broadcast => true,
            _ => return None,
        };
        let out = ifs.get(nh.ifindex as usize)?;
        let next = match nh.gateway {
            Some(std::net::IpAddr::V4(g)) => g,
            _ => dst,
        };
        return Some((out, next, bcast));
    }
    // A default gateway set before its network was configured. (Connected networks
    // are routes of the FIB: every address added installs one.)
    let gw = cx.v4.inet.default_gw?;
    ifs.iter()
        .find(|i| i.addrs.iter().any(|a| a.contains(gw)))
        .map(|i| (i, gw, false))
}

/// Parameters of a header `ip_output` builds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IpOut {
    /// Unspecified: pick the outgoing interface's address.
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub proto: IpProtocol,
    pub ttl: u8,
    /// Don't Fragment: a datagram longer than the MTU is dropped (`ip.cantfrag`)
    /// rather than fragmented (FreeBSD's `IP_DONTFRAG`).
    pub df: bool,
}

/// `ip_output` for a payload without an IPv4 header: routes, builds the header, sends.
/// Returns the source address used (for transport checksums computed before).
pub(crate) fn ip_output(cx: &mut InetCx<'_, '_>, m: Mbuf, o: IpOut) {
    ip_output_tos(cx, m, o, 0)
}

/// [`ip_output`] with `tos` as the header's type-of-service byte (DSCP and ECN:
/// TCP's ECN-capable segments).
pub(crate) fn ip_output_tos(cx: &mut InetCx<'_, '_>, m: Mbuf, o: IpOut, tos: u8) {
    match ip_route(cx, o.dst) {
        Some(route) => ip_output_on(cx, m, o, tos, route),
        None => cx.link.drop_pkt(m, DropReason::IpNoRoute),
    }
}

/// [`ip_output`] by a route already looked up (`ifp`, the next hop, broadcast),
/// with `tos` in the header (a tunnel copies its inner packet's DSCP).
pub(crate) fn ip_output_on(
    cx: &mut InetCx<'_, '_>,
    mut m: Mbuf,
    o: IpOut,
    tos: u8,
    (ifp, nexthop, bcast): (&Arc<Ifnet>, Ipv4Addr, bool),
) {
    let src = if o.src.is_unspecified() {
        match ifp.source_for(o.dst) {
            Some(s) => s,
            None => return cx.link.drop_pkt(m, DropReason::IpNoRoute),
        }
    } else {
        o.src
    };
    let total = m.len() + IP_HDR_LEN;
    if crate::ip::too_long(&m, total, total, ifp) {
        return cx.link.drop_pkt(m, DropReason::IpTooLong);
    }
    let id = cx.v4.next_ip_id();
    match m.prepend(IP_HDR_LEN) {
        Ok(h) => {
            let mut p = Ipv4Packet::new_unchecked(h);
            p.set_version(4);
            p.set_header_len(IP_HDR_LEN as u8);
            p.set_dscp(tos >> 2);
            p.set_ecn(tos & 3);
            p.set_total_len(u16::try_from(total).unwrap_or(0));
            p.set_ident(id);
            p.set_dont_frag(o.df);
            p.set_more_frags(false);
            p.set_frag_offset(0);
            p.set_hop_limit(o.ttl);
            p.set_next_header(o.proto);
            p.set_src_addr(src);
            p.set_dst_addr(o.dst);
            p.fill_checksum();
        }
        Err(_) => return cx.link.drop_pkt(m, DropReason::IpOutDropped),
    }
    cx.link.stats.ip.localout += 1;
    ip_send(cx, ifp, m, o.dst, nexthop, bcast);
}

pub(crate) fn ip_send(
    cx: &mut InetCx<'_, '_>,
    ifp: &Arc<Ifnet>,
    m: Mbuf,
    dst: Ipv4Addr,
    nexthop: Ipv4Addr,
    bcast: bool,
) {
    let Some(mut m) = cx.link.pfil(
        PfilPoint::Inet,
        Dir::Out,
        ifp.index,
        m,
        DropReason::PfilIpOut,
    ) else {
        return;
    };
    if cx.v4.inet.is_local(dst) {
        // To ourselves: loop back without touching the wire, marked so that input
        // knows our own address as its source is no spoof.
        m.hdr.flags |= mbuf::M_LOOP;
        cx.ip.loopq.push((ifp.index, m));
        return;
    }
    // The link's MTU, or a smaller one a "fragmentation needed" taught for this path.
    let mtu = cx
        .v4
        .inet
        .path_mtu4(dst, cx.link.now)
        .map_or(ifp.mtu, |p| (p as usize).min(ifp.mtu));
    // The link address looked up once for all the pieces a segment is cut into.
    let dst_mac = ip_link_dst(cx, ifp, nexthop, bcast);
    let out = |cx: &mut InetCx<'_, '_>, m| match dst_mac {
        Some(mac) => ether::ether_output(cx.link, ifp, m, mac, wire::EtherType::Ipv4),
        None => ether::arp_resolve_output(cx.link, ifp, m, nexthop, bcast),
    };
    if let Some(m) = fit_link(cx, ifp, m, mtu, out) {
        ip_fragment(cx, ifp, m, nexthop, bcast, mtu);
    }
}

/// The link address of `nexthop` on `ifp` when it is known without asking: the
/// broadcast address, a multicast group's, or a fresh neighbour entry
/// (`arp_resolve_output`'s fast path, for a caller sending several packets).
fn ip_link_dst(
    cx: &mut InetCx<'_, '_>,
    ifp: &Ifnet,
    nexthop: Ipv4Addr,
    bcast: bool,
) -> Option<wire::EthernetAddress> {
    if bcast {
        Some(wire::EthernetAddress::BROADCAST)
    } else if nexthop.is_multicast() {
        Some(ether::multicast_mac(nexthop))
    } else {
        cx.link.arp_lookup(ifp.index, nexthop)
    }
}

/// `ip_fragment`: sends a datagram longer than the interface's MTU as fragments
/// (RFC 791 §3.2), after the output hooks saw it whole, as FreeBSD does. With Don't
/// Fragment set it is dropped and counted in `ip.cantfrag` (FreeBSD's `ip_output`
/// answers EMSGSIZE; our sockets send asynchronously, so the counter is the answer).
pub(crate) fn ip_fragment(
    cx: &mut InetCx<'_, '_>,
    ifp: &Arc<Ifnet>,
    m: Mbuf,
    nexthop: Ipv4Addr,
    bcast: bool,
    mtu: usize,
) {
    match frag::fragment4(m, mtu) {
        Ok(frags) => {
            cx.link.stats.ip.fragmented += 1;
            for f in frags {
                match f {
                    Ok(f) => {
                        cx.link.stats.ip.ofragments += 1;
                        ether::arp_resolve_output(cx.link, ifp, f, nexthop, bcast);
                    }
                    Err(_) => DropReason::IpOutDropped.count(cx.link.stats),
                }
            }
        }
        Err((m, FragError::Malformed)) => cx.link.drop_pkt(m, DropReason::IpOutDropped),
        Err((m, FragError::DontFrag | FragError::MtuTooSmall)) => {
            cx.link.drop_pkt(m, DropReason::IpCantFrag)
        }
    }
}
