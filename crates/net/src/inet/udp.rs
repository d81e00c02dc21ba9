//! UDP (RFC 768, RFC 1122 §4.1): input demultiplexing to sockets, output from them.
//!
//! What UDP does alike over both families is here once, for `inet6::udp6` too:
//! the socket a datagram goes to ([`udp_sock`]), its delivery ([`udp_deliver`]),
//! and the header an output datagram gets ([`udp_prepend`]). Each takes the
//! family's addresses as they are, so an inlined call tests no family per packet
//! that the caller had not already fixed.

use crate::hdr::mbuf_sum;
use crate::inet::cx::InetCx;
use crate::inet::ip::{self, IpInfo, IpOut};
use crate::link::iface::Ifnet;
use crate::sockbuf::{RxDatagram, SockShared, TxDatagram};
use crate::stats::DropReason;
use std::net::{IpAddr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use wire::{IpProtocol, UdpPacket};

pub(crate) const UDP_HDR_LEN: usize = 8;

fn pseudo_sum(src: IpAddr, dst: IpAddr, len: usize) -> u16 {
    wire::checksum::pseudo_header(&src, &dst, IpProtocol::Udp, len as u32)
}

fn add(a: u16, b: u16) -> u16 {
    let s = a as u32 + b as u32;
    ((s & 0xffff) + (s >> 16)) as u16
}

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

/// The socket bound to `dst` (an address of ours) and `dport`, else the one bound
/// to the unspecified address of `dst`'s family. Borrowed from the batch's
/// configuration, not from `cx`: no reference count is touched per datagram.
#[inline(always)]
pub(crate) fn udp_sock(
    udp: &crate::ip::UdpPorts,
    dport: u16,
    dst: IpAddr,
) -> Option<&Arc<SockShared>> {
    let v = udp.get(&dport)?;
    v.iter().find(|s| s.local.ip() == dst).or_else(|| {
        v.iter()
            .find(|s| s.local.is_ipv4() == dst.is_ipv4() && s.local.ip().is_unspecified())
    })
}

/// A checked datagram (its UDP header at `off`) to socket `s`'s receive queue, as
/// from `from`; counted as delivered, or dropped when the queue is full.
#[inline(always)]
pub(crate) fn udp_deliver(
    link: &mut crate::link::LinkCx<'_>,
    ip: &mut crate::ip::IpCx<'_>,
    s: &Arc<SockShared>,
    mut m: mbuf::Mbuf,
    off: usize,
    from: SocketAddr,
) {
    m.adj((off + UDP_HDR_LEN) as isize);
    let d = RxDatagram { m, from, seq: 0 };
    match s.rxq.push(d) {
        Ok(()) => {
            link.stats.udp.delivered += 1;
            ip.wake_socket(s);
        }
        Err(d) => {
            drop(d);
            DropReason::UdpFullSock.count(link.stats);
        }
    }
}

/// The UDP header in front of a payload of `m`, with the checksum over it and the
/// pseudo-header of `src` and `dst` (RFC 768; RFC 8200 §8.1): a computed zero is
/// sent as all ones. False when there was no room for it (the caller drops).
#[inline(always)]
pub(crate) fn udp_prepend(
    m: &mut mbuf::Mbuf,
    (sport, dport): (u16, u16),
    src: IpAddr,
    dst: IpAddr,
) -> bool {
    let ulen = m.len() + UDP_HDR_LEN;
    let Ok(h) = m.prepend(UDP_HDR_LEN) else {
        return false;
    };
    {
        let mut p = UdpPacket::new_unchecked(&mut h[..]);
        p.set_src_port(sport);
        p.set_dst_port(dport);
        p.set_len(ulen as u16);
        p.set_checksum(0);
    }
    let sum = !add(mbuf_sum(m, 0, ulen), pseudo_sum(src, dst, ulen));
    let sum = if sum == 0 { 0xffff } else { sum };
    let Some(h) = m.head_mut::<8>() else {
        return false;
    };
    h[6..8].copy_from_slice(&sum.to_be_bytes());
    true
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
