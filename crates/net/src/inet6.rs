//! UDP and TCP over IPv6: headers read
//! through [`crate::hdr`], lengths and checksums checked (RFC 8200 §8.1: the checksum
//! is mandatory), then what RFC 768/RFC 9293 say a host with no listener does: ICMPv6
//! port unreachable for UDP (RFC 4443 §3.1 code 4), a reset for TCP (RFC 9293
//! §3.10.7.1). UDP sockets bound to IPv6 addresses receive and send here; TCP
//! connections over IPv6 are still to come.

use crate::hdr::hdr;
use crate::icmp6::{icmp6_error, Error6};
use crate::ip6::{Ip6Info, Ip6Out};
use crate::stats::DropReason;
use crate::worker::Cx;
use mbuf::Mbuf;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV6};
use wire::checksum;
use wire::{IpProtocol, TcpPacket, UdpPacket};

const UDP_HDR_LEN: usize = 8;
const TCP_HDR_LEN: usize = 20;

/// The one's complement sum of `len` bytes of `m` at `off` plus the IPv6
/// pseudo-header: 0xffff when the checksum in them is right.
fn sum6(m: &Mbuf, info: &Ip6Info, proto: IpProtocol, len: usize) -> u16 {
    checksum::combine(&[
        crate::icmp::mbuf_sum(m, info.off, len),
        checksum::pseudo_header(
            &IpAddr::V6(info.src),
            &IpAddr::V6(info.dst),
            proto,
            len as u32,
        ),
    ])
}

/// `udp6_input`.
pub(crate) fn udp6_input(cx: &mut Cx<'_>, mut m: Mbuf, info: Ip6Info) {
    cx.stats.udp.ipackets += 1;
    let plen = m.len() - info.off;
    let (sport, dport, ulen, csum) = {
        let Ok(h) = hdr(cx.access, &mut m, info.off, UDP_HDR_LEN) else {
            return cx.drop_pkt(m, DropReason::UdpHdrops);
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
        return cx.drop_pkt(m, DropReason::UdpBadLen);
    }
    // RFC 8200 §8.1: "IPv6 receivers must discard UDP packets containing a zero
    // checksum".
    if csum == 0 || sum6(&m, &info, IpProtocol::Udp, ulen) != 0xffff {
        return cx.drop_pkt(m, DropReason::UdpBadSum);
    }
    // An IPv6 socket bound to this address, else to [::].
    let cfg: &crate::stack::NetConfig = cx.cfg;
    let sock = cfg.udp.get(&dport).and_then(|v| {
        v.iter()
            .find(|s| s.local.ip() == IpAddr::V6(info.dst))
            .or_else(|| {
                v.iter()
                    .find(|s| s.local.is_ipv6() && s.local.ip().is_unspecified())
            })
            .cloned()
    });
    let Some(s) = sock else {
        if info.mcast {
            return cx.drop_pkt(m, DropReason::UdpNoPortBcast);
        }
        DropReason::UdpNoPort.count(cx.stats);
        return icmp6_error(
            cx,
            m,
            Error6::Unreach(wire::Icmpv6DstUnreachable::PortUnreachable),
        );
    };
    m.adj((info.off + UDP_HDR_LEN) as isize);
    let d = crate::socket::RxDatagram {
        m,
        from: SocketAddr::V6(SocketAddrV6::new(info.src, sport, 0, 0)),
        seq: 0,
    };
    match s.rxq.push(d) {
        Ok(()) => {
            cx.stats.udp.delivered += 1;
            cx.wake_socket(&s);
        }
        Err(d) => {
            drop(d);
            DropReason::UdpFullSock.count(cx.stats);
        }
    }
}

/// `udp6_output`: one datagram from an IPv6 socket's send queue; the source is the
/// socket's address, else the one source selection picks towards `to`.
pub(crate) fn udp6_output(
    cx: &mut Cx<'_>,
    s: &crate::socket::SockShared,
    mut m: Mbuf,
    local: Ipv6Addr,
    to: SocketAddrV6,
) {
    let dst = *to.ip();
    let src = if local.is_unspecified() {
        let scope = (to.scope_id() != 0).then(|| crate::iface::IfIndex(to.scope_id() as u16));
        match crate::ip6::ip6_route(cx, dst, scope).and_then(|(ifp, _)| ifp.source6_for(dst)) {
            Some(a) => a,
            None => return cx.drop_pkt(m, DropReason::Ip6NoRoute),
        }
    } else {
        local
    };
    let ulen = m.len() + UDP_HDR_LEN;
    if ulen > 65535 {
        return cx.drop_pkt(m, DropReason::Ip6TooLong);
    }
    let Ok(h) = m.prepend(UDP_HDR_LEN) else {
        return cx.drop_pkt(m, DropReason::Ip6OutDropped);
    };
    {
        let mut p = UdpPacket::new_unchecked(&mut h[..]);
        p.set_src_port(s.local.port());
        p.set_dst_port(to.port());
        p.set_len(ulen as u16);
        p.set_checksum(0);
    }
    let sum = !checksum::combine(&[
        crate::icmp::mbuf_sum(&m, 0, ulen),
        checksum::pseudo_header(
            &IpAddr::V6(src),
            &IpAddr::V6(dst),
            IpProtocol::Udp,
            ulen as u32,
        ),
    ]);
    // RFC 8200 §8.1: a computed zero is sent as all ones.
    let sum = if sum == 0 { 0xffff } else { sum };
    m.first_mut()[6..8].copy_from_slice(&sum.to_be_bytes());
    cx.stats.udp.opackets += 1;
    crate::ip6::ip6_output(
        cx,
        m,
        Ip6Out {
            src,
            dst,
            proto: IpProtocol::Udp,
            hlim: crate::ip6::DEFAULT_HLIM,
            keep_unspec: false,
            ifindex: (to.scope_id() != 0).then(|| crate::iface::IfIndex(to.scope_id() as u16)),
        },
    );
}

/// `tcp6_input`.
pub(crate) fn tcp6_input(cx: &mut Cx<'_>, mut m: Mbuf, info: Ip6Info) {
    cx.stats.tcp.rcvtotal += 1;
    let plen = m.len() - info.off;
    if plen < TCP_HDR_LEN {
        return cx.drop_pkt(m, DropReason::TcpShort);
    }
    let doff = {
        let Ok(h) = hdr(cx.access, &mut m, info.off, TCP_HDR_LEN) else {
            return cx.drop_pkt(m, DropReason::TcpShort);
        };
        usize::from(h[12] >> 4) * 4
    };
    if doff < TCP_HDR_LEN || doff > plen {
        return cx.drop_pkt(m, DropReason::TcpBadOff);
    }
    // The header with its options, contiguous (the paper's third length check).
    let (sport, dport, seq, ack, flags_ack, rst, syn, fin) = {
        let Ok(h) = hdr(cx.access, &mut m, info.off, doff) else {
            return cx.drop_pkt(m, DropReason::TcpBadOff);
        };
        let p = TcpPacket::new_unchecked(h);
        (
            p.src_port(),
            p.dst_port(),
            p.seq_number().0,
            p.ack_number().0,
            p.ack(),
            p.rst(),
            p.syn(),
            p.fin(),
        )
    };
    if sum6(&m, &info, IpProtocol::Tcp, plen) != 0xffff {
        return cx.drop_pkt(m, DropReason::TcpBadSum);
    }
    // No connection and no listener: RFC 9293 §3.10.7.1, CLOSED. "An incoming
    // segment containing a RST is discarded"; a reset is never sent to a multicast
    // destination's sender either (RFC 1122 §4.2.3.10).
    if rst || info.mcast {
        return cx.drop_pkt(m, DropReason::TcpNoPort);
    }
    DropReason::TcpNoPort.count(cx.stats);
    let seg_len = (plen - doff) as u32 + u32::from(syn) + u32::from(fin);
    drop(m);
    // "If the ACK bit is off, sequence number zero is used, <SEQ=0><ACK=SEG.SEQ+
    // SEG.LEN><CTL=RST,ACK>; if the ACK bit is on, <SEQ=SEG.ACK><CTL=RST>".
    let (rseq, rack, with_ack) = if flags_ack {
        (ack, 0, false)
    } else {
        (0, seq.wrapping_add(seg_len), true)
    };
    let mut h = [0u8; TCP_HDR_LEN];
    {
        let mut p = TcpPacket::new_unchecked(&mut h[..]);
        p.set_src_port(dport);
        p.set_dst_port(sport);
        p.set_seq_number(wire::TcpSeqNumber(rseq));
        p.set_ack_number(wire::TcpSeqNumber(rack));
        p.set_header_len(TCP_HDR_LEN as u8);
        p.clear_flags();
        p.set_rst(true);
        p.set_ack(with_ack);
        p.set_window_len(0);
        p.set_urgent_at(0);
        p.set_checksum(0);
    }
    let sum = !checksum::combine(&[
        checksum::data(&h),
        checksum::pseudo_header(
            &IpAddr::V6(info.dst),
            &IpAddr::V6(info.src),
            IpProtocol::Tcp,
            TCP_HDR_LEN as u32,
        ),
    ]);
    h[16..18].copy_from_slice(&sum.to_be_bytes());
    let Ok(m) = Mbuf::from_slice(&h) else {
        return DropReason::Ip6OutDropped.count(cx.stats);
    };
    cx.stats.tcp.sndrst += 1;
    crate::ip6::ip6_output(
        cx,
        m,
        Ip6Out {
            src: info.dst,
            dst: info.src,
            proto: IpProtocol::Tcp,
            hlim: crate::ip6::DEFAULT_HLIM,
            keep_unspec: false,
            ifindex: None,
        },
    );
}
