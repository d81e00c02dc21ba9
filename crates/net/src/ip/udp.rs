//! What UDP does alike over both families, for IPv4's `inet::udp` and IPv6's
//! `inet6::udp6`: the socket a datagram goes to ([`udp_sock`]), its delivery
//! ([`udp_deliver`]), and the header an output datagram gets ([`udp_prepend`]).
//! Each takes the family's addresses as they are, so an inlined call tests no
//! family per packet that the caller had not already fixed.

use crate::hdr::mbuf_sum;
use crate::ip::IpCx;
use crate::link::LinkCx;
use crate::sockbuf::{RxDatagram, SockShared};
use crate::stats::DropReason;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use wire::{IpProtocol, UdpPacket};

pub(crate) const UDP_HDR_LEN: usize = 8;

pub(crate) fn pseudo_sum(src: IpAddr, dst: IpAddr, len: usize) -> u16 {
    wire::checksum::pseudo_header(&src, &dst, IpProtocol::Udp, len as u32)
}

pub(crate) fn add(a: u16, b: u16) -> u16 {
    let s = a as u32 + b as u32;
    ((s & 0xffff) + (s >> 16)) as u16
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
    link: &mut LinkCx<'_>,
    ip: &mut IpCx<'_>,
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
