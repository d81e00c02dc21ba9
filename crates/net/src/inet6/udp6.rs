//! UDP and TCP over IPv6: headers read
//! through [`crate::hdr`], lengths and checksums checked (RFC 8200 §8.1: the checksum
//! is mandatory), then what RFC 768/RFC 9293 say a host with no listener does: ICMPv6
//! port unreachable for UDP (RFC 4443 §3.1 code 4), a reset for TCP (RFC 9293
//! §3.10.7.1). UDP sockets bound to IPv6 addresses receive and send here; TCP
//! segments go on to the TCP layer, which serves both families.

use crate::hdr::hdr;
use crate::inet6::cx::Inet6Cx;
use crate::inet6::icmp6::{icmp6_error, Error6};
use crate::inet6::ip6::{Ip6Info, Ip6Out};
use crate::ip::udp::{udp_deliver, udp_prepend, udp_sock, UDP_HDR_LEN};
use crate::stats::DropReason;
use mbuf::Mbuf;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV6};
use wire::{IpProtocol, UdpPacket};

/// `udp6_input`.
pub(crate) fn udp6_input<'a>(
    cx: &mut Inet6Cx<'_, 'a>,
    _ifp: &std::sync::Arc<crate::link::iface::Ifnet>,
    mut m: Mbuf,
    info: Ip6Info,
) {
    cx.link.stats.udp.ipackets += 1;
    let plen = m.len() - info.off;
    let (sport, dport, ulen, csum) = {
        let Ok(h) = hdr(cx.link.access, &mut m, info.off, UDP_HDR_LEN) else {
            return cx.link.drop_pkt(m, DropReason::UdpHdrops);
        };
        let p = UdpPacket::new_unchecked(h);
        (
            p.src_port(),
            p.dst_port(),
            usize::from(p.len()),
            p.checksum(),
        )
    };
    // RFC 8200 §8.1 (with RFC 2675's jumbograms left out): the UDP length matches.
    if ulen < UDP_HDR_LEN || ulen != plen {
        return cx.link.drop_pkt(m, DropReason::UdpBadLen);
    }
    // RFC 8200 §8.1: "IPv6 receivers must discard UDP packets containing a zero
    // checksum".
    if csum == 0 || crate::inet6::ip6::upper_sum(&m, &info, IpProtocol::Udp, ulen) != 0xffff {
        return cx.link.drop_pkt(m, DropReason::UdpBadSum);
    }
    // An IPv6 socket bound to this address, else to [::].
    let udp: &'a crate::ip::UdpPorts = cx.ip.udp;
    let Some(s) = udp_sock(udp, dport, IpAddr::V6(info.dst)) else {
        if info.mcast {
            return cx.link.drop_pkt(m, DropReason::UdpNoPortBcast);
        }
        DropReason::UdpNoPort.count(cx.link.stats);
        return icmp6_error(
            cx,
            m,
            Error6::Unreach(wire::Icmpv6DstUnreachable::PortUnreachable),
        );
    };
    let from = SocketAddr::V6(SocketAddrV6::new(info.src, sport, 0, 0));
    udp_deliver(cx.link, cx.ip, s, m, info.off, from);
}

/// `udp6_output`: one datagram from an IPv6 socket's send queue; the source is the
/// socket's address, else the one source selection picks towards `to`.
pub(crate) fn udp6_output(
    cx: &mut Inet6Cx<'_, '_>,
    s: &crate::sockbuf::SockShared,
    mut m: Mbuf,
    local: Ipv6Addr,
    to: SocketAddrV6,
) {
    let dst = *to.ip();
    let src = if local.is_unspecified() {
        let scope = (to.scope_id() != 0).then(|| crate::link::iface::IfIndex(to.scope_id() as u16));
        match crate::inet6::ip6::ip6_route(cx, dst, scope).and_then(|(ifp, _)| ifp.source6_for(dst))
        {
            Some(a) => a,
            None => return cx.link.drop_pkt(m, DropReason::Ip6NoRoute),
        }
    } else {
        local
    };
    let ulen = m.len() + UDP_HDR_LEN;
    if ulen > 65535 {
        return cx.link.drop_pkt(m, DropReason::Ip6TooLong);
    }
    let ports = (s.local.port(), to.port());
    if !udp_prepend(&mut m, ports, IpAddr::V6(src), IpAddr::V6(dst)) {
        return cx.link.drop_pkt(m, DropReason::Ip6OutDropped);
    }
    cx.link.stats.udp.opackets += 1;
    crate::inet6::ip6::ip6_output(
        cx,
        m,
        Ip6Out {
            src,
            dst,
            proto: IpProtocol::Udp,
            hlim: s.ttl_or_default(),
            keep_unspec: false,
            ifindex: (to.scope_id() != 0)
                .then(|| crate::link::iface::IfIndex(to.scope_id() as u16)),
        },
    );
}
