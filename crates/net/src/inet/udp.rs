//! UDP (RFC 768, RFC 1122 §4.1): input demultiplexing to sockets, output from them.

use crate::hdr::mbuf_sum;
use crate::inet::cx::InetCx;
use crate::inet::ip::{self, IpInfo, IpOut};
use crate::link::iface::Ifnet;
use crate::sockbuf::{RxDatagram, SockShared, TxDatagram};
use crate::stats::DropReason;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use wire::{IpProtocol, UdpPacket};

pub(crate) const UDP_HDR_LEN: usize = 8;

fn pseudo_sum(src: Ipv4Addr, dst: Ipv4Addr, len: usize) -> u16 {
    wire::checksum::pseudo_header(
        &IpAddr::V4(src),
        &IpAddr::V4(dst),
        IpProtocol::Udp,
        len as u32,
    )
}

fn add(a: u16, b: u16) -> u16 {
    let s = a as u32 + b as u32;
    ((s & 0xffff) + (s >> 16)) as u16
}

/// `udp_input`.
pub(crate) fn udp_input<'a>(
    cx: &mut InetCx<'a>,
    _ifp: &Arc<Ifnet>,
    mut m: mbuf::Mbuf,
    info: IpInfo,
) {
    cx.stats.udp.ipackets += 1;
    let iplen = m.len() - info.hlen;
    let (sport, dport, ulen, csum) = {
        let Ok(h) = crate::hdr::hdr(cx.access, &mut m, info.hlen, UDP_HDR_LEN) else {
            return cx.drop_pkt(m, DropReason::UdpHdrops);
        };
        let p = UdpPacket::new_unchecked(h);
        (p.src_port(), p.dst_port(), p.len() as usize, p.checksum())
    };
    if ulen < UDP_HDR_LEN || ulen > iplen {
        return cx.drop_pkt(m, DropReason::UdpBadLen);
    }
    if ulen < iplen {
        m.adj(-((iplen - ulen) as isize));
    }
    if csum != 0 {
        let s = add(
            mbuf_sum(&m, info.hlen, ulen),
            pseudo_sum(info.src, info.dst, ulen),
        );
        if s != 0xffff {
            return cx.drop_pkt(m, DropReason::UdpBadSum);
        }
    } else {
        cx.stats.udp.nosum += 1;
    }
    // Borrowed from the batch's configuration, not from `cx`: no reference count is
    // touched per datagram.
    let cfg: &'a crate::inet::cx::InetConfig = cx.inet;
    let sock = cfg.udp.get(&dport).and_then(|v| {
        v.iter()
            .find(|s| s.local.ip() == IpAddr::V4(info.dst))
            .or_else(|| {
                v.iter()
                    .find(|s| s.local.is_ipv4() && s.local.ip().is_unspecified())
            })
    });
    let Some(s) = sock else {
        if info.bcast {
            return cx.drop_pkt(m, DropReason::UdpNoPortBcast);
        }
        DropReason::UdpNoPort.count(cx.stats);
        return crate::inet::icmp::icmp_error(cx, m, wire::Icmpv4Message::DstUnreachable, 3, 0);
    };
    m.adj((info.hlen + UDP_HDR_LEN) as isize);
    let d = RxDatagram {
        m,
        from: SocketAddr::V4(SocketAddrV4::new(info.src, sport)),
        seq: 0,
    };
    match s.rxq.push(d) {
        Ok(()) => {
            cx.stats.udp.delivered += 1;
            cx.wake_socket(s);
        }
        Err(d) => {
            drop(d);
            DropReason::UdpFullSock.count(cx.stats);
        }
    }
}

/// `udp_output`: one datagram from an IPv4 socket's send queue (an IPv6 socket's
/// go to `udp6_output`).
pub(crate) fn udp_output(cx: &mut InetCx<'_>, s: &SockShared, d: TxDatagram) {
    let TxDatagram { mut m, to, .. } = d;
    let (dst, local) = match (to, s.local) {
        (SocketAddr::V4(to), SocketAddr::V4(l)) => (*to.ip(), *l.ip()),
        // The socket layer refuses the other family.
        _ => return cx.drop_pkt(m, DropReason::IpNoRoute),
    };
    let src = if local.is_unspecified() {
        match ip::ip_route(cx, dst).and_then(|(ifp, _, _)| ifp.source_for(dst)) {
            Some(a) => a,
            None => return cx.drop_pkt(m, DropReason::IpNoRoute),
        }
    } else {
        local
    };
    let ulen = m.len() + UDP_HDR_LEN;
    if ulen > 65535 - ip::IP_HDR_LEN {
        return cx.drop_pkt(m, DropReason::IpTooLong);
    }
    let Ok(h) = m.prepend(UDP_HDR_LEN) else {
        return cx.drop_pkt(m, DropReason::IpOutDropped);
    };
    {
        let mut p = UdpPacket::new_unchecked(&mut h[..]);
        p.set_src_port(s.local.port());
        p.set_dst_port(to.port());
        p.set_len(ulen as u16);
        p.set_checksum(0);
    }
    let sum = !add(mbuf_sum(&m, 0, ulen), pseudo_sum(src, dst, ulen));
    // RFC 768: a computed zero is sent as all ones.
    let sum = if sum == 0 { 0xffff } else { sum };
    let Some(h) = m.head_mut::<8>() else {
        return cx.drop_pkt(m, DropReason::IpOutDropped);
    };
    h[6..8].copy_from_slice(&sum.to_be_bytes());
    cx.stats.udp.opackets += 1;
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
