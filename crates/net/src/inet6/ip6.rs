//! IPv6 output (`ip6_output`), RFC 8200, and what IPv6's input and output share
//! (the header's length, [`Ip6Hdr`], [`Ip6Info`], the upper-layer checksum).
//!
//! Output routes on the interfaces' prefixes and the default router, picks a source
//! (RFC 6724, reduced), builds the header and resolves the next hop through the
//! interface's neighbour table: the published snapshot, else the table's slow
//! path, which may hold the packet and ask for a solicitation. Those solicitations
//! and the packets the table releases are sent here too (`nd6_resolve_output`,
//! `nd6_flush`, `nd6_ns_output`, and `icmp6_send` under them), so that output
//! needs nothing above it; the rest of neighbour discovery (its input, DAD, its
//! timers, [`crate::inet6::nd6`]) sends through these. IPv6 to ourselves never
//! leaves `ip6_send`. Input is `input6`'s.

use crate::inet6::cx::Inet6Cx;
use crate::link::iface::{is_link_local, solicited_node, Ifnet};
use crate::link::lle::{LleOutput, Resolve};
use crate::pfil::{Dir, PfilPoint};
use crate::stats::DropReason;
use mbuf::Mbuf;
use std::net::Ipv6Addr;
use std::sync::Arc;
use wire::{
    EtherType, EthernetAddress, Icmpv6Packet, Icmpv6Repr, IpProtocol, Ipv6Packet, NdiscRepr,
};

pub(crate) const IP6_HDR_LEN: usize = 40;
pub(crate) const DEFAULT_HLIM: u8 = 64;
/// Extension headers walked before a packet is refused (`ip6.toomanyhdr`): a chain
/// of thousands of empty options headers must not cost thousands of pulldowns.
pub(crate) const MAX_EXT_HDRS: usize = 16;

/// What `ip6_input` read of a fixed header, for forwarding and local delivery.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ip6Hdr {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub hlim: u8,
    /// The fixed header's Next Header.
    pub nxt: IpProtocol,
}

/// What upper layers need from the IPv6 header and the chain walk.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ip6Info {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub hlim: u8,
    /// Offset of the upper-layer header.
    pub off: usize,
    /// Sent to a multicast group.
    pub mcast: bool,
    /// Sent to a tentative address of ours: only neighbour discovery may use it.
    pub tentative: bool,
}

/// The one's complement sum of the upper-layer message (`len` bytes at `info.off`,
/// summed over the chain as it lies) and its IPv6 pseudo-header (RFC 8200 §8.1):
/// 0xffff when the checksum in it is right.
pub(crate) fn upper_sum(m: &Mbuf, info: &Ip6Info, proto: IpProtocol, len: usize) -> u16 {
    wire::checksum::combine(&[
        crate::hdr::mbuf_sum(m, info.off, len),
        wire::checksum::pseudo_header(
            &std::net::IpAddr::V6(info.src),
            &std::net::IpAddr::V6(info.dst),
            proto,
            len as u32,
        ),
    ])
}

/// Whether `a` is one of our addresses, and if so whether it is usable (neither
/// tentative nor duplicated; a deprecated one still takes traffic, RFC 4862 §5.5.4).
pub(crate) fn local6(cx: &Inet6Cx<'_, '_>, a: Ipv6Addr) -> Option<bool> {
    cx.v6.inet6.local6(a).map(|x| x.usable())
}

/// RFC 2464 §7: an IPv6 multicast group maps onto 33:33 and its low 32 bits.
pub(crate) fn multicast_mac6(a: Ipv6Addr) -> EthernetAddress {
    let o = a.octets();
    EthernetAddress([0x33, 0x33, o[12], o[13], o[14], o[15]])
}

/// Parameters of a header `ip6_output` builds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ip6Out {
    /// Unspecified: picked by source address selection (unless `keep_unspec`).
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub proto: IpProtocol,
    pub hlim: u8,
    /// Send with the unspecified source (duplicate address detection probes).
    pub keep_unspec: bool,
    /// The interface for link-local and multicast destinations (their scope), when
    /// the caller knows it.
    pub ifindex: Option<crate::link::iface::IfIndex>,
}

/// The interface and next hop towards `dst`.
pub(crate) fn ip6_route<'a>(
    cx: &Inet6Cx<'_, 'a>,
    dst: Ipv6Addr,
    scope_if: Option<crate::link::iface::IfIndex>,
) -> Option<(&'a Arc<Ifnet>, Ipv6Addr)> {
    let ifs: &'a [Arc<Ifnet>] = cx.link.ifaces;
    let cfg: &'a crate::inet6::cx::Inet6Config = cx.v6.inet6;
    if dst.is_multicast() || is_link_local(dst) {
        let by_index = scope_if
            .and_then(|i| ifs.get(i.get()))
            .filter(|i| i.inet6());
        return by_index
            .or_else(|| ifs.iter().find(|i| i.inet6()))
            .map(|i| (i, dst));
    }
    // A redirect for this destination first (RFC 4861 §8.3), then the on-link
    // prefixes of our addresses and of advertisements, then the static default
    // router, then a learnt one.
    let by = |(nh, i): (Ipv6Addr, crate::link::iface::IfIndex)| {
        ifs.get(i.get()).filter(|i| i.inet6()).map(|i| (i, nh))
    };
    if let Some(r) = cfg
        .nd6
        .redirects
        .iter()
        .find(|r| r.dst == dst && r.expires > cx.link.now)
    {
        return by((r.target, r.ifindex));
    }
    for i in ifs.iter().filter(|i| i.inet6()) {
        if i.addrs6
            .iter()
            .any(|a| !is_link_local(a.addr.addr) && a.addr.contains(dst))
        {
            return Some((i, dst));
        }
    }
    // The FIB: static routes (connected ones were found above).
    let fib: &'a route::Fib = cx.ip.fib;
    let hash = || route::flow_hash6(0, u128::from(dst), 0, 0, 0, cx.ip.isn_secret);
    if let Some(nh) = fib.lookup6(dst, hash) {
        if nh.kind != route::NhKind::Forward {
            return None;
        }
        let next = match nh.gateway {
            Some(std::net::IpAddr::V6(g)) => g,
            _ => dst,
        };
        return ifs.get(nh.ifindex as usize).map(|i| (i, next));
    }
    if let Some(hop) = cfg.nd6.next_hop(dst, cx.link.now, true) {
        return by(hop);
    }
    if let Some(hop) = cfg.default_gw6 {
        return by(hop);
    }
    cfg.nd6.next_hop(dst, cx.link.now, false).and_then(by)
}

/// `ip6_output` for a payload without an IPv6 header (`m` starts with the upper
/// layer or the first extension header): routes, builds the header, sends.
pub(crate) fn ip6_output(cx: &mut Inet6Cx<'_, '_>, m: Mbuf, o: Ip6Out) {
    ip6_output_tclass(cx, m, o, 0)
}

/// [`ip6_output`] with traffic class `tclass` (DSCP and ECN: TCP's ECN-capable
/// segments).
pub(crate) fn ip6_output_tclass(cx: &mut Inet6Cx<'_, '_>, m: Mbuf, o: Ip6Out, tclass: u8) {
    match ip6_route(cx, o.dst, o.ifindex) {
        Some(route) => ip6_output_on(cx, m, o, tclass, route),
        None => cx.link.drop_pkt(m, DropReason::Ip6NoRoute),
    }
}

/// [`ip6_output`] by a route already looked up (`ifp`, the next hop), with traffic
/// class `tclass` (a tunnel copies its inner packet's DSCP).
pub(crate) fn ip6_output_on(
    cx: &mut Inet6Cx<'_, '_>,
    mut m: Mbuf,
    o: Ip6Out,
    tclass: u8,
    (ifp, nexthop): (&Arc<Ifnet>, Ipv6Addr),
) {
    let src = if o.src.is_unspecified() && !o.keep_unspec {
        match ifp.source6_for(o.dst) {
            Some(s) => s,
            None => return cx.link.drop_pkt(m, DropReason::Ip6NoRoute),
        }
    } else {
        o.src
    };
    let plen = m.len();
    if crate::ip::too_long(&m, plen, IP6_HDR_LEN + plen, ifp) {
        return cx.link.drop_pkt(m, DropReason::Ip6TooLong);
    }
    match m.prepend(IP6_HDR_LEN) {
        Ok(h) => {
            let mut p = Ipv6Packet::new_unchecked(h);
            p.set_version(6);
            p.set_traffic_class(tclass);
            p.set_flow_label(0);
            p.set_payload_len(u16::try_from(plen).unwrap_or(0));
            p.set_next_header(o.proto);
            p.set_hop_limit(o.hlim);
            p.set_src_addr(src);
            p.set_dst_addr(o.dst);
        }
        Err(_) => return cx.link.drop_pkt(m, DropReason::Ip6OutDropped),
    }
    cx.link.stats.ip6.localout += 1;
    ip6_send(cx, ifp, m, o.dst, nexthop);
}

/// Sends an IPv6 packet (header built) towards `nexthop` on `ifp`.
pub(crate) fn ip6_send(
    cx: &mut Inet6Cx<'_, '_>,
    ifp: &Arc<Ifnet>,
    m: Mbuf,
    dst: Ipv6Addr,
    nexthop: Ipv6Addr,
) {
    if !dst.is_multicast() && local6(cx, dst).is_some() {
        // To ourselves: IPv6 is not looped back (the loopback queue carries only
        // what tunnels take off in that family); drop, counted.
        return cx.link.drop_pkt(m, DropReason::Ip6OutDropped);
    }
    let Some(m) = cx.link.pfil(
        PfilPoint::Inet6,
        Dir::Out,
        ifp.index,
        m,
        DropReason::PfilIp6Out,
    ) else {
        return;
    };
    // The link's MTU, or a smaller one a Packet Too Big taught for this path.
    let mtu = cx
        .v6
        .inet6
        .nd6
        .path_mtu(dst, cx.link.now)
        .map_or(ifp.mtu, |p| (p as usize).min(ifp.mtu));
    let out = |cx: &mut Inet6Cx<'_, '_>, m| ip6_link_output(cx, ifp, m, dst, nexthop);
    if let Some(m) = crate::link::output::fit_link(cx, ifp, m, mtu, out) {
        ip6_fragment(cx, ifp, m, dst, nexthop, mtu);
    }
}

fn ip6_link_output(
    cx: &mut Inet6Cx<'_, '_>,
    ifp: &Arc<Ifnet>,
    m: Mbuf,
    dst: Ipv6Addr,
    nexthop: Ipv6Addr,
) {
    if dst.is_multicast() {
        return crate::link::ether::ether_output(
            cx.link,
            ifp,
            m,
            multicast_mac6(dst),
            EtherType::Ipv6,
        );
    }
    nd6_resolve_output(cx, ifp, m, nexthop);
}

/// What the neighbour table asks to send (`nd6`'s slow path and timers).
pub(crate) type Nd6Output = LleOutput<Ipv6Addr>;

/// RFC 4861 §6.1.2 / §7.1: ND messages travel with hop limit 255, so that a receiver
/// knows they come from the link.
pub(crate) const ND_HLIM: u8 = 255;
/// Sends what the neighbour table asked for: solicitations and released packets.
pub(crate) fn nd6_flush(cx: &mut Inet6Cx<'_, '_>, ifp: &Arc<Ifnet>, out: &mut Vec<Nd6Output>) {
    for o in out.drain(..) {
        match o {
            LleOutput::Packet { m, mac } => {
                crate::link::ether::ether_output(cx.link, ifp, m, mac, EtherType::Ipv6)
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
    cx: &mut Inet6Cx<'_, '_>,
    ifp: &Arc<Ifnet>,
    m: Mbuf,
    nexthop: Ipv6Addr,
) {
    if ifp.no_link_header() {
        return crate::link::ether::p2p_output(cx.link, ifp, m);
    }
    let mac = cx.link.nd6_lookup(ifp.index, nexthop);
    if let Some(mac) = mac {
        return crate::link::ether::ether_output(cx.link, ifp, m, mac, EtherType::Ipv6);
    }
    let mut out = Vec::new();
    if let Resolve::Now(m, mac) =
        ifp.nd6
            .resolve_slow(cx.link.now, nexthop, m, cx.link.stats, &mut out)
    {
        crate::link::ether::ether_output(cx.link, ifp, m, mac, EtherType::Ipv6);
    }
    nd6_flush(cx, ifp, &mut out);
}

/// Builds an ICMPv6 message and sends it with `ip6_output`. `src` unspecified picks
/// one (unless `keep_unspec`, for DAD probes).
pub(crate) fn icmp6_send(cx: &mut Inet6Cx<'_, '_>, repr: &Icmpv6Repr<'_>, o: Ip6Out) {
    let Some((ifp, _)) = ip6_route(cx, o.dst, o.ifindex) else {
        return DropReason::Ip6NoRoute.count(cx.link.stats);
    };
    let src = if o.src.is_unspecified() && !o.keep_unspec {
        match ifp.source6_for(o.dst) {
            Some(s) => s,
            None => return DropReason::Ip6NoRoute.count(cx.link.stats),
        }
    } else {
        o.src
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), &src, &o.dst);
    let Ok(m) = Mbuf::from_slice(&buf) else {
        return DropReason::Ip6OutDropped.count(cx.link.stats);
    };
    ip6_output(cx, m, Ip6Out { src, ..o });
}

/// `nd6_ns_output`: a neighbour solicitation for `target`: to its solicited-node
/// group, or unicast to `unicast` when probing reachability; from the unspecified
/// address without a source link-layer option for a DAD probe (RFC 4862 §5.4.2).
pub(crate) fn nd6_ns_output(
    cx: &mut Inet6Cx<'_, '_>,
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
    cx.link.stats.icmp6.outneighborsolicit += 1;
    if dad {
        cx.link.stats.nd6.dadsent += 1;
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

/// RFC 8200 §4.5: a packet of ours too big for the link goes out in fragments. The
/// unfragmentable part is the IPv6 header (our own packets carry no hop-by-hop or
/// routing header beyond a small MLD report); each fragment carries as many 8-byte
/// units as fit in the MTU, and shares the original's payload buffers (no copy).
/// The identification is unpredictable (RFC 7739): a keyed mix of a per-worker count.
fn ip6_fragment(
    cx: &mut Inet6Cx<'_, '_>,
    ifp: &Arc<Ifnet>,
    mut m: Mbuf,
    dst: Ipv6Addr,
    nexthop: Ipv6Addr,
    mtu: usize,
) {
    let mut hdr = [0u8; IP6_HDR_LEN];
    if m.copydata(0, &mut hdr).is_err() || mtu < 1280 {
        cx.link.stats.ip6.cantfrag += 1;
        return cx.link.drop_pkt(m, DropReason::Ip6TooLong);
    }
    let next = hdr[6];
    if next == u8::from(IpProtocol::HopByHop) || next == u8::from(IpProtocol::Ipv6Route) {
        cx.link.stats.ip6.cantfrag += 1;
        return cx.link.drop_pkt(m, DropReason::Ip6TooLong);
    }
    let Ok(mut rest) = m.split(IP6_HDR_LEN) else {
        return cx.link.drop_pkt(m, DropReason::Ip6OutDropped);
    };
    drop(m);
    let per = (mtu - IP6_HDR_LEN - 8) / 8 * 8;
    *cx.v6.frag_count = cx.v6.frag_count.wrapping_add(1);
    let count = u64::from(*cx.v6.frag_count);
    let id = splitmix64(cx.ip.isn_secret ^ count ^ u64::from(cx.link.worker as u32) << 48) as u32;
    let total = rest.len();
    let mut off = 0;
    cx.link.stats.ip6.fragmented += 1;
    while off < total {
        let n = per.min(total - off);
        let Ok(tail) = rest.split(n) else {
            return DropReason::Ip6OutDropped.count(cx.link.stats);
        };
        let mut piece = std::mem::replace(&mut rest, tail);
        let more = off + n < total;
        match piece.prepend(IP6_HDR_LEN + 8) {
            Ok(h) => {
                h[..IP6_HDR_LEN].copy_from_slice(&hdr);
                h[4..6].copy_from_slice(&((8 + n) as u16).to_be_bytes());
                h[6] = u8::from(IpProtocol::Ipv6Frag);
                let f = &mut h[IP6_HDR_LEN..];
                f[0] = next;
                f[1] = 0;
                let offm = (off as u16) | u16::from(more);
                f[2..4].copy_from_slice(&offm.to_be_bytes());
                f[4..8].copy_from_slice(&id.to_be_bytes());
            }
            Err(_) => return cx.link.drop_pkt(piece, DropReason::Ip6OutDropped),
        }
        cx.link.stats.ip6.ofragments += 1;
        ip6_link_output(cx, ifp, piece, dst, nexthop);
        off += n;
    }
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
