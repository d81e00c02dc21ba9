//! UDP (RFC 768, RFC 1122 §4.1): input demultiplexing to sockets, output from them.
//!
//! What UDP does alike over both families is in `crate::ip::udp`, beside
//! `inet6::udp6`'s own: the socket a datagram goes to ([`udp_sock`]), its delivery ([`udp_deliver`]),
//! and the header an output datagram gets ([`udp_prepend`]). Each takes the
//! family's addresses as they are, so an inlined call tests no family per packet
//! that the caller had not already fixed.

use crate::hdr::mbuf_sum;
use crate::inet::cx::InetCx;
use crate::inet::ip::{self, IpInfo, IpOut};
use crate::ip::udp::{add, pseudo_sum};
pub(crate) use crate::ip::udp::{udp_deliver, udp_prepend, udp_sock, UDP_HDR_LEN};
use crate::link::iface::Ifnet;
use crate::sockbuf::{SockShared, TxDatagram};
use crate::stats::DropReason;
use std::net::{IpAddr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use wire::{IpProtocol, UdpPacket};

/// `udp_input`.
pub(crate) fn udp_input<'a>(
    cx: &mut InetCx<'_, 'a>,
    _ifp: &Arc<Ifnet>,
    mut m: mbuf::Mbuf,
    info: IpInfo,
) {
    cx.link.stats.udp.ipackets += 1;
    let iplen = m.len() - info.hlen;
    let (sport, dport, ulen, csum) = {
        let Ok(h) = crate::hdr::hdr(cx.link.access, &mut m, info.hlen, UDP_HDR_LEN) else {
            return cx.link.drop_pkt(m, DropReason::UdpHdrops);
        };
        let p = UdpPacket::new_unchecked(h);
        (p.src_port(), p.dst_port(), p.len() as usize, p.checksum())
    };
    if ulen < UDP_HDR_LEN || ulen > iplen {
        return cx.link.drop_pkt(m, DropReason::UdpBadLen);
    }
    if ulen < iplen {
        m.adj(-((iplen - ulen) as isize));
    }
    if csum != 0 {
        let s = add(
            mbuf_sum(&m, info.hlen, ulen),
            pseudo_sum(IpAddr::V4(info.src), IpAddr::V4(info.dst), ulen),
        );
        if s != 0xffff {
            return cx.link.drop_pkt(m, DropReason::UdpBadSum);
        }
    } else {
        cx.link.stats.udp.nosum += 1;
    }
    let udp: &'a crate::ip::UdpPorts = cx.ip.udp;
    let Some(s) = udp_sock(udp, dport, IpAddr::V4(info.dst)) else {
        if info.bcast {
            return cx.link.drop_pkt(m, DropReason::UdpNoPortBcast);
        }
        DropReason::UdpNoPort.count(cx.link.stats);
        return crate::inet::icmp::icmp_error(cx, m, wire::Icmpv4Message::DstUnreachable, 3, 0);
    };
    let from = SocketAddr::V4(SocketAddrV4::new(info.src, sport));
    udp_deliver(cx.link, cx.ip, s, m, info.hlen, from);
}

/// `udp_output`: one datagram from an IPv4 socket's send queue (an IPv6 socket's
/// go to `udp6_output`).
pub(crate) fn udp_output(cx: &mut InetCx<'_, '_>, s: &SockShared, d: TxDatagram) {
    let TxDatagram { mut m, to, .. } = d;
    let (dst, local) = match (to, s.local) {
        (SocketAddr::V4(to), SocketAddr::V4(l)) => (*to.ip(), *l.ip()),
        // The socket layer refuses the other family.
        _ => return cx.link.drop_pkt(m, DropReason::IpNoRoute),
    };
    let src = if local.is_unspecified() {
        match ip::ip_route(cx, dst).and_then(|(ifp, _, _)| ifp.source_for(dst)) {
            Some(a) => a,
            None => return cx.link.drop_pkt(m, DropReason::IpNoRoute),
        }
    } else {
        local
    };
    let ulen = m.len() + UDP_HDR_LEN;
    if ulen > 65535 - ip::IP_HDR_LEN {
        return cx.link.drop_pkt(m, DropReason::IpTooLong);
    }
    let ports = (s.local.port(), to.port());
    if !udp_prepend(&mut m, ports, IpAddr::V4(src), IpAddr::V4(dst)) {
        return cx.link.drop_pkt(m, DropReason::IpOutDropped);
    }
    cx.link.stats.udp.opackets += 1;
    ip::ip_output(
        cx,
        m,
        IpOut {
            src,
            dst,
            proto: IpProtocol::Udp,
            ttl: s.ttl_or_default(),
            df: s.dontfrag.load(std::sync::atomic::Ordering::Relaxed),
        },
    );
}
