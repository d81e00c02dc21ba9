//! ICMPv6 (RFC 4443): input, echo, and rate-limited error generation; neighbour
//! discovery messages go to [`crate::inet6::nd6`].

use crate::inet6::cx::Inet6Cx;
use crate::inet6::ip6::icmp6_send;
use crate::inet6::ip6::{Ip6Info, Ip6Out, IP6_HDR_LEN};
use crate::ip::{quoted_tcp6, CtlInput, HardError, TcpCtl};
use crate::link::iface::Ifnet;
use crate::stats::DropReason;
use mbuf::Mbuf;
use std::net::Ipv6Addr;
use std::sync::Arc;
use wire::{
    Icmpv6DstUnreachable, Icmpv6Message, Icmpv6Packet, Icmpv6ParamProblem, Icmpv6Repr,
    Icmpv6TimeExceeded, IpProtocol, Ipv6Packet, NdiscRepr,
};

/// RFC 4443 §2.4(c): an error carries as much of the invoking packet as fits in the
/// minimum IPv6 MTU.
const MIN_MTU: usize = 1280;
const ICMP6_HDR_LEN: usize = 8;

/// An error to send about a received packet.
#[derive(Clone, Copy, Debug)]
// Packet too big comes with forwarding.
#[allow(dead_code)]
pub(crate) enum Error6 {
    Unreach(Icmpv6DstUnreachable),
    /// Code, pointer, and whether to send even if the packet went to a multicast group
    /// (RFC 4443 §2.4(e.3): option action bits 10).
    Param(Icmpv6ParamProblem, u32, bool),
    TimeExceeded(Icmpv6TimeExceeded),
    PktTooBig(u32),
}

/// An ICMPv6 hard error (FreeBSD's `PRC_UNREACH_PORT`, `_ADMIN_PROHIB`,
/// `_PROTOCOL` and `PRC_TIMXCEED_INTRANS`) quoting one of our TCP segments, for
/// its connection to judge (`tcp6_ctlinput`); the quoted packet is borrowed from
/// the message, so this waits on the ICMPv6 buffer only as long as the parse.
fn hard_error6(cx: &mut Inet6Cx<'_, '_>, quoted: &[u8], error: HardError) {
    cx.ip
        .ctlinput
        .extend(CtlInput::tcp(quoted_tcp6(quoted), |seq| {
            TcpCtl::HardError { seq, error }
        }));
}

/// `icmp6_input`: `m` is the whole packet, the ICMPv6 message at `info.off`.
pub(crate) fn icmp6_input(cx: &mut Inet6Cx<'_, '_>, ifp: &Arc<Ifnet>, mut m: Mbuf, info: Ip6Info) {
    let len = m.len() - info.off;
    if len < 4 {
        return cx.link.drop_pkt(m, DropReason::Icmp6TooShort);
    }
    // The checksum over the chain as it lies: no byte of the message is moved for it.
    if crate::inet6::ip6::upper_sum(&m, &info, IpProtocol::Icmpv6, len) != 0xffff {
        return cx.link.drop_pkt(m, DropReason::Icmp6Checksum);
    }
    let ty = match crate::hdr::hdr(cx.link.access, &mut m, info.off, 4) {
        Ok(h) => (Icmpv6Message::from(h[0]), h[1]),
        Err(_) => return cx.link.drop_pkt(m, DropReason::Icmp6TooShort),
    };
    if ty == (Icmpv6Message::EchoRequest, 0) {
        if len < 8 {
            return cx.link.drop_pkt(m, DropReason::Icmp6BadLen);
        }
        return echo_reflect(cx, ifp, m, info, len);
    }
    // Everything else is small (neighbour discovery, MLD) or rare (errors): the whole
    // message contiguous, parsed as one.
    let Ok(b) = crate::hdr::hdr(cx.link.access, &mut m, info.off, len) else {
        return cx.link.drop_pkt(m, DropReason::Icmp6TooShort);
    };
    let p = Icmpv6Packet::new_unchecked(b);
    let repr = match Icmpv6Repr::parse(&p, &info.src, &info.dst, false) {
        Ok(r) => r,
        Err(wire::Error::Truncated) => return cx.link.drop_pkt(m, DropReason::Icmp6TooShort),
        Err(wire::Error::Unsupported) => {
            // Unknown informational types are silently discarded (§2.4(b)); MLDv1.
            return cx.link.drop_pkt(m, DropReason::Icmp6Other);
        }
        Err(_) => return cx.link.drop_pkt(m, DropReason::Icmp6BadLen),
    };
    if info.tentative && !matches!(repr, Icmpv6Repr::Ndisc(_)) {
        return cx.link.drop_pkt(m, DropReason::Ip6CantForward);
    }
    match repr {
        // Answered above.
        Icmpv6Repr::EchoRequest { .. } => drop(m),
        Icmpv6Repr::EchoReply { .. } => cx.link.stats.icmp6.inechoreply += 1,
        Icmpv6Repr::DstUnreachable { reason, data } => {
            cx.link.stats.icmp6.indstunreach += 1;
            use wire::Icmpv6DstUnreachable as U;
            if matches!(reason, U::AdminProhibit | U::PortUnreachable) {
                hard_error6(cx, data, HardError::Refused);
            }
        }
        Icmpv6Repr::PktTooBig { mtu, data } => {
            cx.link.stats.icmp6.inpkttoobig += 1;
            let data = data.to_vec();
            drop(m);
            crate::inet6::nd6::pmtu6_input(cx, mtu, &data);
        }
        Icmpv6Repr::TimeExceeded { reason, data } => {
            cx.link.stats.icmp6.intimxceed += 1;
            if reason == wire::Icmpv6TimeExceeded::HopLimitExceeded {
                hard_error6(cx, data, HardError::HostUnreachable);
            }
        }
        Icmpv6Repr::ParamProblem { reason, data, .. } => {
            cx.link.stats.icmp6.inparamprob += 1;
            // FreeBSD's PRC_UNREACH_PROTOCOL.
            if reason == wire::Icmpv6ParamProblem::UnrecognizedNxtHdr {
                hard_error6(cx, data, HardError::Refused);
            }
        }
        Icmpv6Repr::Mld(wire::MldRepr::Query { mcast_addr, .. }) => {
            cx.link.stats.icmp6.inmld += 1;
            drop(m);
            crate::inet6::nd6::mld_query_input(cx, ifp, info, mcast_addr);
        }
        Icmpv6Repr::Mld(_) => cx.link.stats.icmp6.inmld += 1,
        Icmpv6Repr::Ndisc(nd) => {
            // RFC 4861 §6.1, §7.1: every ND message arrives with hop limit 255 and
            // code 0, or it did not come from the link.
            if info.hlim != 255 || p.msg_code() != 0 {
                let why = match nd {
                    NdiscRepr::NeighborSolicit { .. } => DropReason::Icmp6BadNs,
                    NdiscRepr::NeighborAdvert { .. } => DropReason::Icmp6BadNa,
                    NdiscRepr::RouterSolicit { .. } => DropReason::Icmp6BadRs,
                    NdiscRepr::RouterAdvert { .. } => DropReason::Icmp6BadRa,
                    NdiscRepr::Redirect { .. } => DropReason::Icmp6BadRedirect,
                };
                return cx.link.drop_pkt(m, why);
            }
            match nd {
                NdiscRepr::NeighborSolicit {
                    target_addr,
                    lladdr,
                } => {
                    cx.link.stats.icmp6.inneighborsolicit += 1;
                    drop(m);
                    crate::inet6::nd6::nd6_ns_input(cx, ifp, info, target_addr, lladdr);
                }
                NdiscRepr::NeighborAdvert {
                    flags,
                    target_addr,
                    lladdr,
                } => {
                    cx.link.stats.icmp6.inneighboradvert += 1;
                    drop(m);
                    crate::inet6::nd6::nd6_na_input(cx, ifp, info, flags, target_addr, lladdr);
                }
                // A host ignores solicitations for routers (RFC 4861 §6.2.6); an
                // interface sending advertisements answers them.
                NdiscRepr::RouterSolicit { .. } => {
                    cx.link.stats.icmp6.inroutersolicit += 1;
                    drop(m);
                    crate::inet6::nd6::nd6_rs_input(cx, ifp);
                }
                NdiscRepr::RouterAdvert {
                    router_lifetime,
                    options,
                    ..
                } => {
                    cx.link.stats.icmp6.inrouteradvert += 1;
                    let options = options.to_vec();
                    drop(m);
                    crate::inet6::nd6::nd6_ra_input(cx, ifp, info, router_lifetime, &options);
                }
                NdiscRepr::Redirect {
                    target_addr,
                    dest_addr,
                    lladdr,
                    ..
                } => {
                    cx.link.stats.icmp6.inredirect += 1;
                    drop(m);
                    crate::inet6::nd6::nd6_redirect_input(
                        cx,
                        ifp,
                        info,
                        target_addr,
                        dest_addr,
                        lladdr,
                    );
                }
            }
        }
    }
}

/// RFC 4443 §4.2: the reply goes to the request's source; to a request sent to a
/// multicast group, from one of our unicast addresses. The request becomes the reply
/// in place, as ICMPv4's does: its IPv6 header and chain are trimmed, the type
/// changed, the checksum updated (RFC 1624; recomputed when the source changes).
fn echo_reflect(
    cx: &mut Inet6Cx<'_, '_>,
    ifp: &Arc<Ifnet>,
    mut m: Mbuf,
    info: Ip6Info,
    len: usize,
) {
    cx.link.stats.icmp6.inecho += 1;
    if info.tentative {
        return cx.link.drop_pkt(m, DropReason::Ip6CantForward);
    }
    if info.src.is_unspecified() {
        return cx.link.drop_pkt(m, DropReason::Icmp6Other);
    }
    let src = if info.mcast {
        match crate::inet6::ip6::ip6_route(cx, info.src, Some(ifp.index))
            .and_then(|(i, _)| i.source6_for(info.src))
        {
            Some(a) => a,
            None => return cx.link.drop_pkt(m, DropReason::Ip6NoRoute),
        }
    } else {
        info.dst
    };
    // The 8-byte header contiguous, then at the front once the chain is trimmed.
    if crate::hdr::hdr(cx.link.access, &mut m, info.off, 8).is_err() {
        return cx.link.drop_pkt(m, DropReason::Icmp6TooShort);
    }
    m.adj(info.off as isize);
    if info.mcast {
        // A new source: the pseudo-header changed, so the sum is made afresh.
        let Some(h) = m.head_mut::<4>() else {
            return cx.link.drop_pkt(m, DropReason::Icmp6TooShort);
        };
        h[0] = Icmpv6Message::EchoReply.into();
        h[2..4].copy_from_slice(&[0, 0]);
        let sum = !wire::checksum::combine(&[
            crate::hdr::mbuf_sum(&m, 0, len),
            wire::checksum::pseudo_header(
                &std::net::IpAddr::V6(src),
                &std::net::IpAddr::V6(info.src),
                IpProtocol::Icmpv6,
                len as u32,
            ),
        ]);
        let Some(h) = m.head_mut::<4>() else {
            return cx.link.drop_pkt(m, DropReason::Icmp6TooShort);
        };
        h[2..4].copy_from_slice(&sum.to_be_bytes());
    } else {
        // Source and destination swap (the pseudo-header sums the same); only the
        // type word changes, 128/0 to 129/0.
        let Some(h) = m.head_mut::<4>() else {
            return cx.link.drop_pkt(m, DropReason::Icmp6TooShort);
        };
        let old = u16::from_be_bytes([h[2], h[3]]);
        h[0] = Icmpv6Message::EchoReply.into();
        let sum = wire::checksum::update(old, 0x8000, 0x8100);
        h[2..4].copy_from_slice(&sum.to_be_bytes());
    }
    cx.link.stats.icmp6.outechoreply += 1;
    crate::inet6::ip6::ip6_output(
        cx,
        m,
        Ip6Out {
            src,
            dst: info.src,
            proto: IpProtocol::Icmpv6,
            hlim: crate::inet6::ip6::DEFAULT_HLIM,
            keep_unspec: false,
            ifindex: Some(ifp.index),
        },
    );
}

/// `icmp6_error`: answers `m` (a received IPv6 packet) with an error, under the rules
/// of RFC 4443 §2.4(e) and the shared error rate limit (§2.4(f)).
pub(crate) fn icmp6_error(cx: &mut Inet6Cx<'_, '_>, mut m: Mbuf, e: Error6) {
    cx.link.stats.icmp6.error += 1;
    let (src, dst, next) = {
        let Ok(h) = crate::hdr::hdr(cx.link.access, &mut m, 0, IP6_HDR_LEN) else {
            return cx.link.drop_pkt(m, DropReason::Icmp6NoError);
        };
        let p = Ipv6Packet::new_unchecked(h);
        (p.src_addr(), p.dst_addr(), p.next_header())
    };
    // §2.4(e): never about an ICMPv6 error message (the first header only: a chain in
    // front of it is rare, and the rule is a SHOULD against loops).
    if next == IpProtocol::Icmpv6 {
        if let Ok(t) = crate::hdr::hdr(cx.link.access, &mut m, IP6_HDR_LEN, 1) {
            if Icmpv6Message::from(t[0]).is_error() {
                return cx.link.drop_pkt(m, DropReason::Icmp6NoError);
            }
        }
    }
    // Never to a multicast or unspecified source; to a multicast destination only a
    // Packet Too Big or a Parameter Problem for an option with action bits 10.
    let mcast_ok = matches!(e, Error6::PktTooBig(_) | Error6::Param(_, _, true));
    if src.is_unspecified() || src.is_multicast() || (dst.is_multicast() && !mcast_ok) {
        return cx.link.drop_pkt(m, DropReason::Icmp6NoError);
    }
    if !cx.v6.icmp_bucket.take(cx.link.now) {
        return cx.link.drop_pkt(m, DropReason::Icmp6RateLim);
    }
    let keep = m.len().min(MIN_MTU - IP6_HDR_LEN - ICMP6_HDR_LEN);
    let mut data = vec![0u8; keep];
    if m.copydata(0, &mut data).is_err() {
        return cx.link.drop_pkt(m, DropReason::Icmp6NoError);
    }
    drop(m);
    let repr = match e {
        Error6::Unreach(reason) => {
            cx.link.stats.icmp6.outdstunreach += 1;
            Icmpv6Repr::DstUnreachable {
                reason,
                data: &data,
            }
        }
        Error6::Param(reason, pointer, _) => {
            cx.link.stats.icmp6.outparamprob += 1;
            Icmpv6Repr::ParamProblem {
                reason,
                pointer,
                data: &data,
            }
        }
        Error6::TimeExceeded(reason) => {
            cx.link.stats.icmp6.outtimxceed += 1;
            Icmpv6Repr::TimeExceeded {
                reason,
                data: &data,
            }
        }
        Error6::PktTooBig(mtu) => {
            cx.link.stats.icmp6.outpkttoobig += 1;
            Icmpv6Repr::PktTooBig { mtu, data: &data }
        }
    };
    // From the address the packet was sent to when it is ours and unicast.
    // (A router answering about a packet in transit speaks from its own address.)
    let ours = cx.link.ifaces.iter().any(|i| i.addr6(dst).is_some());
    let from = if dst.is_multicast() || !ours {
        Ipv6Addr::UNSPECIFIED
    } else {
        dst
    };
    icmp6_send(
        cx,
        &repr,
        Ip6Out {
            src: from,
            dst: src,
            proto: IpProtocol::Icmpv6,
            hlim: crate::inet6::ip6::DEFAULT_HLIM,
            keep_unspec: false,
            ifindex: None,
        },
    );
}
