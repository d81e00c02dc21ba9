//! ICMPv4 (RFC 792, RFC 1122 §3.2.2): echo, errors, and ping sockets.

use crate::hdr::mbuf_sum;
use crate::inet::cx::{pmtu_upsert, quoted_l4, quoted_tcp4, CtlInput, HardError, InetCx, TcpCtl};
use crate::inet::ip::{self, IpInfo, IpOut, DEFAULT_TTL};
use crate::link::iface::Ifnet;
use crate::sockbuf::{RxDatagram, SockShared, TxDatagram};
use crate::stats::DropReason;
use mbuf::Mbuf;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use wire::{Icmpv4Message, Icmpv4Packet, IpProtocol, Ipv4Packet};

pub(crate) const ICMP_HDR_LEN: usize = 8;
/// RFC 1812 §4.3.2.3: an error carries as much of the original as fits in 576 bytes.
const ICMP_ERR_MAX: usize = 576;

/// `icmp_input`.
pub(crate) fn icmp_input<'a>(
    cx: &mut InetCx<'_, 'a>,
    _ifp: &Arc<Ifnet>,
    mut m: Mbuf,
    info: IpInfo,
) {
    let icmplen = m.len() - info.hlen;
    if icmplen < ICMP_HDR_LEN {
        return cx.link.drop_pkt(m, DropReason::IcmpTooShort);
    }
    if mbuf_sum(&m, info.hlen, icmplen) != 0xffff {
        return cx.link.drop_pkt(m, DropReason::IcmpChecksum);
    }
    let (ty, ident, seq) = {
        let Ok(h) = crate::hdr::hdr(cx.link.access, &mut m, info.hlen, ICMP_HDR_LEN) else {
            return cx.link.drop_pkt(m, DropReason::IcmpTooShort);
        };
        let p = Icmpv4Packet::new_unchecked(h);
        (p.msg_type(), p.echo_ident(), p.echo_seq_no())
    };
    match ty {
        Icmpv4Message::EchoRequest => {
            cx.link.stats.icmp.inecho += 1;
            // RFC 1122 §3.2.2.6 allows silence for broadcast echo; FreeBSD's default.
            if info.bcast {
                return cx.link.drop_pkt(m, DropReason::IcmpBmcastEcho);
            }
            // Reflect in place: drop the old IP header (and its options), turn the
            // request into a reply with an incremental checksum update (RFC 1624),
            // and let ip_output build a fresh header from the same buffer.
            m.adj(info.hlen as isize);
            {
                let Some(h) = m.head_mut::<ICMP_HDR_LEN>() else {
                    return cx.link.drop_pkt(m, DropReason::IcmpTooShort);
                };
                let mut p = Icmpv4Packet::new_unchecked(h);
                let old = p.checksum();
                p.set_msg_type(Icmpv4Message::EchoReply);
                p.set_checksum(wire::checksum::update(old, 0x0800, 0x0000));
            }
            cx.link.stats.icmp.reflect += 1;
            cx.link.stats.icmp.outechoreply += 1;
            ip::ip_output(
                cx,
                m,
                IpOut {
                    src: info.dst,
                    dst: info.src,
                    proto: IpProtocol::Icmp,
                    ttl: DEFAULT_TTL,
                    df: false,
                },
            );
        }
        Icmpv4Message::EchoReply => {
            cx.link.stats.icmp.inechoreply += 1;
            // Borrowed from the batch's configuration: no reference count per reply.
            let cfg: &'a crate::inet::cx::InetConfig = cx.v4.inet;
            let Some(s) = cfg.echo.get(&ident) else {
                return cx.link.drop_pkt(m, DropReason::IcmpNoPort);
            };
            m.adj((info.hlen + ICMP_HDR_LEN) as isize);
            let d = RxDatagram {
                m,
                from: std::net::SocketAddr::V4(SocketAddrV4::new(info.src, 0)),
                seq,
            };
            if let Err(d) = s.rxq.push(d) {
                drop(d);
                DropReason::UdpFullSock.count(cx.link.stats);
            } else {
                cx.ip.wake_socket(s);
            }
        }
        Icmpv4Message::DstUnreachable | Icmpv4Message::TimeExceeded => {
            let unreach = ty == Icmpv4Message::DstUnreachable;
            if unreach {
                cx.link.stats.icmp.inunreach += 1;
            } else {
                cx.link.stats.icmp.intimxceed += 1;
            }
            // The code, for "fragmentation needed" (RFC 1191) the next-hop MTU in
            // bytes 6-8, then the quoted header (with its options) and 8 bytes more.
            let Ok((code, mtu)) = crate::hdr::hdr(cx.link.access, &mut m, info.hlen, ICMP_HDR_LEN)
                .map(|h| (h[1], u16::from_be_bytes([h[6], h[7]])))
            else {
                return cx.link.drop_pkt(m, DropReason::IcmpTooShort);
            };
            let n = (icmplen - ICMP_HDR_LEN).min(68);
            let mut quoted = [0u8; 68];
            if m.copydata(info.hlen + ICMP_HDR_LEN, &mut quoted[..n])
                .is_err()
            {
                return cx.link.drop_pkt(m, DropReason::IcmpBadLen);
            }
            drop(m);
            let quoted = &quoted[..n];
            match (unreach, code) {
                (true, 4) => pmtu4_input(cx, u32::from(mtu), quoted),
                // Protocol or port unreachable; communication with the network or
                // host administratively prohibited; filtered (RFC 1812).
                (true, 2 | 3 | 9 | 10 | 13) => hard_error4(cx, quoted, HardError::Refused),
                // TTL exceeded in transit.
                (false, 0) => hard_error4(cx, quoted, HardError::HostUnreachable),
                _ => {}
            }
        }
        _ => cx.link.drop_pkt(m, DropReason::IcmpOther),
    }
}

/// `icmp_error`: answers the datagram in `m` (which still carries its IP header)
/// with an ICMP error of `ty`/`code`. RFC 1122 §3.2.2: never about an ICMP error,
/// a datagram to a broadcast (a directed broadcast of any of our subnets too) or
/// multicast address or from one that names no single host, or a non-initial
/// fragment; rate limited.
pub(crate) fn icmp_error(cx: &mut InetCx<'_, '_>, m: Mbuf, ty: Icmpv4Message, code: u8, mtu: u16) {
    let [a, b] = mtu.to_be_bytes();
    icmp_error_word(cx, m, ty, code, [0, 0, a, b]);
}

/// [`icmp_error`] with the message's second word given: a redirect's gateway, or
/// the next-hop MTU of "fragmentation needed" (RFC 1191) in its low half.
pub(crate) fn icmp_error_word(
    cx: &mut InetCx<'_, '_>,
    mut m: Mbuf,
    ty: Icmpv4Message,
    code: u8,
    word: [u8; 4],
) {
    cx.link.stats.icmp.error += 1;
    let (src, dst, hlen, proto, frag_off) = {
        let Ok(h) = crate::hdr::hdr(cx.link.access, &mut m, 0, ip::IP_HDR_LEN) else {
            cx.link.stats.icmp.oldshort += 1;
            return;
        };
        let p = Ipv4Packet::new_unchecked(h);
        (
            p.src_addr(),
            p.dst_addr(),
            p.header_len() as usize,
            p.next_header(),
            p.frag_offset(),
        )
    };
    // RFC 1122 §3.2.2, RFC 1812 §4.3.2.7: none about a datagram sent to a
    // broadcast (limited, or directed to any of our subnets, its broadcast or
    // network address) or multicast address, nor one whose source does not name a
    // single host (unspecified, loopback, broadcast, multicast, class E).
    let not_one_host = |a: Ipv4Addr| {
        a.is_broadcast()
            || a.is_multicast()
            || a.is_unspecified()
            || a.is_loopback()
            || a.octets()[0] >= 240
            || cx.v4.inet.is_subnet_bcast(a)
    };
    if frag_off != 0
        || not_one_host(src)
        || dst.is_multicast()
        || dst.is_broadcast()
        || cx.v4.inet.is_subnet_bcast(dst)
    {
        return;
    }
    if proto == IpProtocol::Icmp {
        let inner_type = crate::hdr::hdr(cx.link.access, &mut m, hlen, 1)
            .map(|b| b[0])
            .unwrap_or(0);
        // Errors (not queries) are never answered with errors.
        if !matches!(inner_type, 0 | 8 | 13 | 14 | 15 | 16 | 17 | 18) {
            cx.link.stats.icmp.oldicmp += 1;
            return;
        }
    }
    if !cx.v4.icmp_bucket.take(cx.link.now) {
        cx.link.stats.icmp.ratelim += 1;
        return;
    }
    m.truncate(m.len().min(ICMP_ERR_MAX - ip::IP_HDR_LEN - ICMP_HDR_LEN));
    let Ok(h) = m.prepend(ICMP_HDR_LEN) else {
        return;
    };
    {
        let mut p = Icmpv4Packet::new_unchecked(&mut h[..]);
        p.set_msg_type(ty);
        p.set_msg_code(code);
        p.set_checksum(0);
    }
    // Bytes 4..8: unused, the next-hop MTU for fragmentation needed (RFC 1191), or
    // a redirect's gateway.
    h[4..8].copy_from_slice(&word);
    let sum = !mbuf_sum(&m, 0, m.len());
    let Some(h) = m.head_mut::<4>() else {
        return DropReason::IpOutDropped.count(cx.link.stats);
    };
    h[2..4].copy_from_slice(&sum.to_be_bytes());
    match ty {
        Icmpv4Message::DstUnreachable => cx.link.stats.icmp.outunreach += 1,
        Icmpv4Message::TimeExceeded => cx.link.stats.icmp.outtimxceed += 1,
        Icmpv4Message::ParamProblem => cx.link.stats.icmp.outparamprob += 1,
        _ => {}
    }
    // From the address the datagram was sent to when it is ours; a router answering
    // about a datagram in transit speaks from its interface towards the source
    // (RFC 1812 §4.3.2.4).
    let from = if cx.v4.inet.is_local(dst) {
        dst
    } else {
        Ipv4Addr::UNSPECIFIED
    };
    ip::ip_output(
        cx,
        m,
        IpOut {
            src: from,
            dst: src,
            proto: IpProtocol::Icmp,
            ttl: DEFAULT_TTL,
            df: false,
        },
    );
}

/// Sends an echo request from a ping socket.
pub(crate) fn echo_output(cx: &mut InetCx<'_, '_>, s: &SockShared, d: TxDatagram) {
    let TxDatagram { mut m, to, seq } = d;
    let std::net::IpAddr::V4(dst) = to.ip() else {
        return cx.link.drop_pkt(m, DropReason::IpNoRoute);
    };
    let Ok(h) = m.prepend(ICMP_HDR_LEN) else {
        return cx.link.drop_pkt(m, DropReason::IpOutDropped);
    };
    {
        let mut p = Icmpv4Packet::new_unchecked(&mut h[..]);
        p.set_msg_type(Icmpv4Message::EchoRequest);
        p.set_msg_code(0);
        p.set_checksum(0);
        p.set_echo_ident(s.local.port());
        p.set_echo_seq_no(seq);
    }
    let sum = !mbuf_sum(&m, 0, m.len());
    let Some(h) = m.head_mut::<4>() else {
        return cx.link.drop_pkt(m, DropReason::IpOutDropped);
    };
    h[2..4].copy_from_slice(&sum.to_be_bytes());
    cx.link.stats.icmp.outecho += 1;
    ip::ip_output(
        cx,
        m,
        IpOut {
            src: Ipv4Addr::UNSPECIFIED,
            dst,
            proto: IpProtocol::Icmp,
            ttl: s.ttl_or_default(),
            df: false,
        },
    );
}

/// Bound of the IPv4 path MTU list, and how long an estimate holds (RFC 1191 §6.3:
/// "a PMTU value ... should be aged out", 10 minutes as for IPv6).
const MAX_PMTU4: usize = 64;
const PMTU4_LIFETIME: dev::Duration = dev::Duration::from_secs(600);
/// The smallest path MTU believed: Linux's `min_pmtu` (552), so that forged
/// messages cannot shrink a path to a crawl.
const MIN_PMTU4: u32 = 552;
/// RFC 1191 §7's plateau table, for a router that does not give the next-hop MTU.
const PLATEAUS: [u32; 8] = [32000, 17914, 8166, 4352, 2002, 1492, 1006, 508];

/// `icmp_mtudisc`: a "fragmentation needed" quoting `quoted` (our IPv4 header and
/// the first 8 bytes after it). Believed only for what one of our sockets sent
/// (RFC 5927 §4.1, as Linux's and FreeBSD's `pr_ctlinput`): a TCP segment goes to
/// its connection, which checks the quoted sequence number before it shrinks its
/// segments and lowers the path MTU towards the destination (RFC 1191 §6)
/// through [`pmtu4_learn`]; a UDP datagram from a bound port lowers it at once.
/// Anything else is counted in `icmp.noport` and changes nothing: a forged message
/// quoting one of our addresses, any protocol, port or sequence number, used to
/// lower the path MTU for ten minutes.
fn pmtu4_input(cx: &mut InetCx<'_, '_>, mtu: u32, quoted: &[u8]) {
    if quoted.len() < 20 || quoted[0] >> 4 != 4 {
        return DropReason::IcmpBadLen.count(cx.link.stats);
    }
    let src = Ipv4Addr::new(quoted[12], quoted[13], quoted[14], quoted[15]);
    let dst = Ipv4Addr::new(quoted[16], quoted[17], quoted[18], quoted[19]);
    if !cx.v4.inet.is_local(src) {
        cx.link.stats.icmp.noport += 1;
        return;
    }
    let total = u32::from(u16::from_be_bytes([quoted[2], quoted[3]]));
    let mtu = if mtu == 0 {
        PLATEAUS
            .iter()
            .copied()
            .find(|&p| p < total)
            .unwrap_or(MIN_PMTU4)
    } else {
        mtu
    }
    .max(MIN_PMTU4);
    if let Some(c) = CtlInput::tcp(quoted_tcp4(quoted), |seq| TcpCtl::PathMtu { seq, mtu }) {
        // For TCP, through the worker (`pr_ctlinput`).
        cx.ip.ctlinput.push(c);
    } else if quoted_l4(quoted, 17)
        .is_some_and(|(local, _, _)| crate::ip::udp_bound(cx.ip.udp, local))
    {
        pmtu4_learn(cx, src, dst, mtu, false);
    } else {
        cx.link.stats.icmp.noport += 1;
    }
}

/// Lowers the path MTU from `src` (ours) towards `dst` to `mtu`, if that is below
/// what the list or the link says; `held`: a live connection vouched for it
/// ([`pmtu_upsert`]).
pub(crate) fn pmtu4_learn(
    cx: &mut InetCx<'_, '_>,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    mtu: u32,
    held: bool,
) {
    let link = cx
        .link
        .ifaces
        .iter()
        .find(|i| i.has_addr(src))
        .map_or(1500, |i| i.mtu as u32);
    let now = cx.link.now;
    if mtu >= cx.v4.inet.path_mtu4(dst, now).unwrap_or(link) {
        return;
    }
    let expires = now + PMTU4_LIFETIME;
    cx.v4.ctl4.update_inet(&mut |c| {
        pmtu_upsert(&mut c.pmtu4, (dst, mtu, expires, held), now, MAX_PMTU4);
    });
}

/// An ICMP hard error (FreeBSD's `PRC_UNREACH_PORT`, `_PROTOCOL`, `_ADMIN_PROHIB`,
/// `PRC_TIMXCEED_INTRANS`) quoting one of our TCP segments, for its connection
/// to judge (`tcp_ctlinput`). Soft errors (net or host unreachable, source route
/// failed, …) say nothing a retransmission would not find out.
fn hard_error4(cx: &mut InetCx<'_, '_>, quoted: &[u8], error: HardError) {
    cx.ip
        .ctlinput
        .extend(CtlInput::tcp(quoted_tcp4(quoted), |seq| {
            TcpCtl::HardError { seq, error }
        }));
}
