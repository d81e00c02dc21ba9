//! IP tunnels: `gif(4)` (IPv4 or IPv6 in IPv4 or IPv6: RFC 2003, RFC 4213, RFC
//! 2473) and `gre(4)` (RFC 2784, with RFC 2890's key), as routed point-to-point
//! interfaces.
//!
//! A tunnel's interface has no link layer and no device. What the stack sends on it
//! (an IPv4 or IPv6 packet, by a route through it or a connected prefix on it) is
//! queued as it is, its IP header first: the link layer's output notices the
//! interface has no link header (`IFF_POINTOPOINT`) and skips neighbour resolution.
//! The worker's flush hands the tunnel's queue to [`tunnel_output`] before the
//! devices' bursts: each packet gets the outer header (and GRE's), then leaves by
//! the outer destination's route, through the output hooks, like any packet of the
//! host. An outer route through a tunnel is refused (`tunnel.looped`), as FreeBSD
//! refuses nesting by default.
//!
//! Inbound, the protocol switch offers IP protocols 4 and 41 (gif) and 47 (GRE) of
//! packets for this host to [`tunnel_input4`] / [`tunnel_input6`]: the tunnel whose
//! endpoints are the packet's destination and source (and key, for GRE) takes it,
//! strips the outer headers and queues the inner packet on the worker's loopback
//! queue with the tunnel's interface as the one it arrived on; it then goes through
//! that interface's input (hooks, local delivery or forwarding) after the batch. A
//! packet no tunnel claims is answered as an unknown protocol would be.
//!
//! The inner packet is complete before it is wrapped: the tunnel's interface offers
//! no offloads, so `fit_link` fills checksums and cuts large segments to the
//! tunnel's MTU. The outer IPv4 header never sets Don't Fragment: an outer packet
//! too long for the path is fragmented (RFC 2003 §5.1 lets the encapsulator choose);
//! the tunnel's own MTU (1280 for gif, 1476 for GRE, FreeBSD's defaults) keeps that
//! rare. The outer header carries the inner one's DSCP and no ECN codepoint (RFC
//! 6040's compatibility mode, FreeBSD's default), so decapsulation leaves the
//! inner header as it came; the flow label is 0. ICMP errors about outer packets
//! are not relayed to the inner packets' sources.
//!
//! What it may call: `link`, `inet`, `inet6` and the shared modules.

use crate::hdr::mbuf_sum;
use crate::inet::ip::{IpInfo, IpOut};
use crate::inet6::ip6::{Ip6Info, Ip6Out};
use crate::ip46::Ip46Cx;
use crate::link::iface::IfIndex;
use crate::stats::DropReason;
use mbuf::Mbuf;
use std::net::IpAddr;
use wire::{EtherType, GrePacket, GreRepr, IpProtocol};

/// `gif(4)`'s default MTU (FreeBSD's `GIF_MTU`).
pub const GIF_MTU: usize = 1280;
/// `gre(4)`'s default MTU (FreeBSD's `GREMTU`: 1500 less an IPv4 and a GRE header).
pub const GRE_MTU: usize = 1476;
/// The outer header's TTL or hop limit (FreeBSD's `GIF_TTL` and `GRE_TTL`).
pub const TUNNEL_TTL: u8 = 30;

/// What a tunnel wraps its packets in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TunnelKind {
    /// `gif(4)`: the inner packet right after the outer header (IP protocol 4 for an
    /// IPv4 packet, 41 for an IPv6 one), as Linux's `ipip`, `sit` and `ip6tnl`.
    Gif,
    /// `gre(4)`: a GRE header between them (IP protocol 47), with a key if given;
    /// as Linux's `gre` and `ip6gre`.
    Gre { key: Option<u32> },
}

impl TunnelKind {
    fn matches(self, proto: IpProtocol) -> bool {
        match self {
            TunnelKind::Gif => matches!(proto, IpProtocol::IpIp | IpProtocol::Ipv6),
            TunnelKind::Gre { .. } => proto == IpProtocol::Gre,
        }
    }
}

impl std::fmt::Display for TunnelKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TunnelKind::Gif => f.write_str("gif"),
            TunnelKind::Gre { key: None } => f.write_str("gre"),
            TunnelKind::Gre { key: Some(k) } => write!(f, "gre key {k}"),
        }
    }
}

/// What `Stack::add_tunnel` is given: `ifconfig gif0 create tunnel SRC DST`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TunnelParams {
    pub kind: TunnelKind,
    /// The outer source: an address of this host.
    pub src: IpAddr,
    /// The outer destination: the far end, of the same family as `src`.
    pub dst: IpAddr,
    /// The interface's MTU; [`GIF_MTU`] or [`GRE_MTU`] when `None`.
    pub mtu: Option<usize>,
}

/// A tunnel as the workers see it (part of the published configuration).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TunnelConf {
    /// The tunnel's interface.
    pub ifindex: IfIndex,
    pub kind: TunnelKind,
    pub src: IpAddr,
    pub dst: IpAddr,
}

/// Encapsulates what the host sent on tunnel `tc` (IP packets, `out`, drained) and
/// sends each by the outer destination's route, looked up once for the vector: the
/// outer header (the inner packet's DSCP, ECN not-ECT, Don't Fragment clear) is IP
/// output's, on that route unless it is a tunnel's.
pub(crate) fn tunnel_output(cx: &mut Ip46Cx<'_, '_>, tc: &TunnelConf, out: &mut Vec<Mbuf>) {
    let ttl = TUNNEL_TTL;
    match (tc.src, tc.dst) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => {
            let route =
                crate::inet::ip::ip_route(&cx.inet(), dst).map(|r| (r.0.no_link_header(), r));
            let send = |cx: &mut Ip46Cx<'_, '_>, m, proto, tos, r| {
                let o = IpOut {
                    src,
                    dst,
                    proto,
                    ttl,
                    df: false,
                };
                crate::inet::ip::ip_output_on(&mut cx.inet(), m, o, tos, r);
            };
            encap_out(cx, tc, out, route, DropReason::IpNoRoute, send);
        }
        (IpAddr::V6(src), IpAddr::V6(dst)) => {
            let route = crate::inet6::ip6::ip6_route(&cx.inet6(), dst, None);
            let route = route.map(|r| (r.0.no_link_header(), r));
            let send = |cx: &mut Ip46Cx<'_, '_>, m, proto, tos, r| {
                let o = Ip6Out {
                    src,
                    dst,
                    proto,
                    hlim: ttl,
                    keep_unspec: false,
                    ifindex: None,
                };
                crate::inet6::ip6::ip6_output_on(&mut cx.inet6(), m, o, tos, r);
            };
            encap_out(cx, tc, out, route, DropReason::Ip6NoRoute, send);
        }
        // `Stack::add_tunnel` makes no tunnel of two families.
        _ => DropReason::TunnelOutDropped.count_n(cx.link.stats, out.drain(..).count() as u64),
    }
}

/// [`tunnel_output`]'s body, one for both outer families (each caller's copy is
/// its own, monomorphised): each packet wrapped, then sent by `send` on the outer
/// destination's route (the inner DSCP as the outer TOS or traffic class), or
/// dropped when there is none (`no_route`) or it leads into a tunnel (the flag
/// beside it).
#[inline(always)]
fn encap_out<R: Copy>(
    cx: &mut Ip46Cx<'_, '_>,
    tc: &TunnelConf,
    out: &mut Vec<Mbuf>,
    route: Option<(bool, R)>,
    no_route: DropReason,
    mut send: impl FnMut(&mut Ip46Cx<'_, '_>, Mbuf, IpProtocol, u8, R),
) {
    for m in out.drain(..) {
        let Some((m, proto, dscp)) = wrap(cx, tc, m) else {
            continue;
        };
        match route {
            Some((true, _)) => cx.link.drop_pkt(m, DropReason::TunnelLoop),
            Some((false, r)) => send(cx, m, proto, dscp << 2, r),
            None => cx.link.drop_pkt(m, no_route),
        }
    }
}

/// An inner packet made ready for its outer header: its offload state cleared (it
/// is final: checksums filled, cut to the tunnel's MTU), GRE's header in front for
/// a GRE tunnel; with the outer header's protocol and the inner DSCP. `None` if it
/// was dropped (counted).
fn wrap(cx: &mut Ip46Cx<'_, '_>, tc: &TunnelConf, mut m: Mbuf) -> Option<(Mbuf, IpProtocol, u8)> {
    m.hdr.csum_flags = 0;
    m.hdr.tso_segsz = 0;
    m.hdr.vlan_tci = None;
    // The inner header is in the first buffer (IP output built it there).
    let (v6, dscp) = match m.first() {
        [b0, b1, ..] if b0 >> 4 == 4 => (false, b1 >> 2),
        [b0, b1, ..] if b0 >> 4 == 6 => (true, ((b0 & 0x0f) << 2) | (b1 >> 6)),
        _ => {
            cx.link.drop_pkt(m, DropReason::TunnelOutDropped);
            return None;
        }
    };
    let proto = match tc.kind {
        TunnelKind::Gif if v6 => IpProtocol::Ipv6,
        TunnelKind::Gif => IpProtocol::IpIp,
        TunnelKind::Gre { key } => {
            let g = GreRepr {
                protocol: if v6 { EtherType::Ipv6 } else { EtherType::Ipv4 },
                checksum: false,
                key,
                seq: None,
            };
            match m.prepend(g.buffer_len()) {
                Ok(h) => g.emit(&mut GrePacket::new_unchecked(h)),
                Err(_) => {
                    cx.link.drop_pkt(m, DropReason::TunnelOutDropped);
                    return None;
                }
            }
            IpProtocol::Gre
        }
    };
    cx.link.stats.tunnel.opackets += 1;
    Some((m, proto, dscp))
}

/// An IPv4 packet for this host (not a broadcast: the caller sees to that) of
/// protocol 4, 41 or 47 (`info.proto`): to the tunnel it belongs to. Handed back when
/// no tunnel claims it (the caller answers as for an unknown protocol).
pub(crate) fn tunnel_input4(
    cx: &mut Ip46Cx<'_, '_>,
    tunnels: &[TunnelConf],
    m: Mbuf,
    info: &IpInfo,
) -> Option<Mbuf> {
    let (src, dst) = (IpAddr::V4(info.src), IpAddr::V4(info.dst));
    decap(cx, tunnels, m, info.proto, src, dst, info.hlen)
}

/// An IPv6 packet for this host whose upper layer (at `info.off`) is protocol 4,
/// 41 or 47: as [`tunnel_input4`].
pub(crate) fn tunnel_input6(
    cx: &mut Ip46Cx<'_, '_>,
    tunnels: &[TunnelConf],
    m: Mbuf,
    info: &Ip6Info,
    proto: IpProtocol,
) -> Option<Mbuf> {
    if info.mcast {
        return Some(m);
    }
    let (src, dst) = (IpAddr::V6(info.src), IpAddr::V6(info.dst));
    decap(cx, tunnels, m, proto, src, dst, info.off)
}

/// The tunnel with these endpoints takes the packet: the outer headers (`off`
/// bytes, and GRE's) stripped, the inner one queued as arrived on its interface.
fn decap(
    cx: &mut Ip46Cx<'_, '_>,
    tunnels: &[TunnelConf],
    mut m: Mbuf,
    proto: IpProtocol,
    src: IpAddr,
    dst: IpAddr,
    off: usize,
) -> Option<Mbuf> {
    let mut candidates = tunnels
        .iter()
        .filter(|t| t.src == dst && t.dst == src && t.kind.matches(proto));
    let Some(first) = candidates.next() else {
        return Some(m);
    };
    let (tc, inner_at, inner_v6) = if proto == IpProtocol::Gre {
        // The GRE header: its flags say how long it is.
        let Ok(h) = crate::hdr::hdr(cx.link.access, &mut m, off, wire::gre::HEADER_LEN) else {
            cx.link.drop_pkt(m, DropReason::TunnelBadHdr);
            return None;
        };
        let need = GrePacket::new_unchecked(h).header_len();
        let Ok(h) = crate::hdr::hdr(cx.link.access, &mut m, off, need) else {
            cx.link.drop_pkt(m, DropReason::TunnelBadHdr);
            return None;
        };
        let Ok(g) = GrePacket::new_checked(h).and_then(|p| GreRepr::parse(&p)) else {
            cx.link.drop_pkt(m, DropReason::TunnelBadHdr);
            return None;
        };
        let Some(tc) = std::iter::once(first)
            .chain(candidates)
            .find(|t| t.kind == TunnelKind::Gre { key: g.key })
        else {
            // The endpoints are a tunnel's but not the key: not ours.
            cx.link.drop_pkt(m, DropReason::TunnelNoMatch);
            return None;
        };
        if g.checksum && mbuf_sum(&m, off, m.len() - off) != 0xffff {
            cx.link.drop_pkt(m, DropReason::TunnelBadHdr);
            return None;
        }
        let v6 = match g.protocol {
            EtherType::Ipv4 => false,
            EtherType::Ipv6 => true,
            _ => {
                cx.link.drop_pkt(m, DropReason::TunnelNoProto);
                return None;
            }
        };
        (tc, off + need, v6)
    } else {
        (first, off, proto == IpProtocol::Ipv6)
    };
    // The inner packet's version must be what the outer header said.
    let version = crate::hdr::hdr(cx.link.access, &mut m, inner_at, 1)
        .ok()
        .map(|h| h[0] >> 4);
    if version != Some(if inner_v6 { 6 } else { 4 }) {
        cx.link.drop_pkt(m, DropReason::TunnelBadHdr);
        return None;
    }
    m.adj(inner_at as isize);
    // What the outer device checked says nothing of the inner packet.
    m.hdr.csum_flags = 0;
    m.hdr.tso_segsz = 0;
    m.hdr.vlan_tci = None;
    m.hdr.flags &= !(mbuf::M_BCAST | mbuf::M_MCAST);
    m.hdr.rcvif = tc.ifindex.0;
    cx.link.stats.tunnel.ipackets += 1;
    cx.ip.loopq.push((tc.ifindex, m));
    None
}
