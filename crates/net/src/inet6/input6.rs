//! IPv6 input (`ip6_input`, `ip6_deliver`), RFC 8200.
//!
//! Input checks the fixed header, then walks the extension-header chain one header
//! at a time through `pulldown` (the KAME lesson: only the header at hand is made
//! contiguous, no earlier header is copied again), processing hop-by-hop and
//! destination options with their unknown-option action bits (§4.2), the routing
//! header (type 0 refused per RFC 5095, any unknown type per §4.4), the fragment
//! header (atomic fragments, RFC 6946, go on at once), and counting AH and ESP. A
//! Parameter Problem points at the offending byte where §4 asks for one. Then the
//! upper layer: ICMPv6 ([`crate::inet6::icmp6`]), UDP ([`crate::inet6::udp6`]) and TCP
//! (the one TCP layer both families share) to their sockets; a datagram or segment
//! no socket takes is answered with a port unreachable or a reset.
//!
//! A packet from a link whose source is one of our (preferred) addresses is dropped
//! and counted in `ip6.localsrc`: to forward, or, sent to a unicast address of
//! ours, to deliver (the LAND attack).
//!
//! # Stage contract (`ip6_input`)
//! - **Uses**: the packet from its IPv6 header; `m.hdr.rcvif`, `m.hdr.flags`;
//!   the batch's addresses and groups, the interface's forwarding switch; the pfil
//!   hooks (`Inet6`, in).
//! - **Sets**: an `Ip6Hdr` beside each packet, read again after the hooks when
//!   they ran; an `ipfw fwd` next hop replaces `dst` as forwarding's key.
//! - **Next**: `Ip6InputVecs::local` to the extension-header walk and the upper
//!   layers, `fwd` to `ip6_forward`; drops counted (`ip6.*`).

use crate::hdr::{hdr, HdrAccess};
use crate::inet6::cx::Inet6Cx;
use crate::inet6::icmp6::{icmp6_error, Error6};
use crate::inet6::ip6::{local6, Ip6Hdr, Ip6Info, IP6_HDR_LEN, MAX_EXT_HDRS};
use crate::link::iface::Ifnet;
use crate::pfil::{Dir, PfilPoint};
use crate::stats::DropReason;
use mbuf::Mbuf;
use wire::{Icmpv6ParamProblem, IpProtocol, Ipv6Option, Ipv6OptionFailureType, Ipv6Packet};

/// `ip6_input`'s checks of the fixed header (`m` starts with it): its fields,
/// link padding trimmed.
#[inline]
fn ip6_check(access: HdrAccess, m: &mut Mbuf) -> Result<Ip6Hdr, DropReason> {
    let len = m.len();
    if len < IP6_HDR_LEN {
        return Err(DropReason::Ip6TooSmall);
    }
    let (h, plen) = {
        let b = hdr(access, m, 0, IP6_HDR_LEN).map_err(|_| DropReason::Ip6TooSmall)?;
        // A view over exactly the fixed header: one length check, none per field.
        let p = Ipv6Packet::new_unchecked(crate::hdr::fixed::<IP6_HDR_LEN>(b));
        if p.version() != 6 {
            return Err(DropReason::Ip6BadVers);
        }
        let h = Ip6Hdr {
            src: p.src_addr(),
            dst: p.dst_addr(),
            hlim: p.hop_limit(),
            nxt: p.next_header(),
        };
        (h, p.payload_len())
    };
    let plen = crate::hdr::length_field(plen, m, IP6_HDR_LEN);
    // RFC 8200 §3 with RFC 2675 left out: no jumbograms, so payload length 0 with a
    // non-empty packet is just short (but for a large segment, above).
    if IP6_HDR_LEN + plen > len {
        return Err(DropReason::Ip6TooShort);
    }
    if IP6_HDR_LEN + plen < len {
        m.adj(-((len - IP6_HDR_LEN - plen) as isize));
    }
    // RFC 4291 §2.7: a multicast source is invalid; §2.5.3: the loopback address never
    // appears on a link, as source or destination; RFC 4291 §2.5.2: the unspecified
    // address is never a destination.
    let (src, dst) = (h.src, h.dst);
    if src.is_multicast() || src.is_loopback() || dst.is_loopback() || dst.is_unspecified() {
        return Err(DropReason::Ip6BadScope);
    }
    Ok(h)
}

/// The fixed header's addresses and next header read again after the input hooks.
#[inline]
fn ip6_reread(access: HdrAccess, m: &mut Mbuf, mut h: Ip6Hdr) -> Ip6Hdr {
    if let Ok(b) = hdr(access, m, 0, IP6_HDR_LEN) {
        let p = Ipv6Packet::new_unchecked(crate::hdr::fixed::<IP6_HDR_LEN>(b));
        h.src = p.src_addr();
        h.dst = p.dst_addr();
        h.nxt = p.next_header();
    }
    h
}

/// Where `ip6_input` sends the packets of a vector, and its scratch.
#[derive(Debug, Default)]
pub(crate) struct Ip6InputVecs {
    /// For this host (an address of ours, or a group the interface joined): to
    /// `ip6_deliver`, with whether the address is still tentative.
    pub local: Vec<(Mbuf, Ip6Hdr, bool)>,
    /// For other hosts, arrived on an interface that forwards: to `ip6_forward`.
    pub fwd: Vec<(Mbuf, Ip6Hdr)>,
    checked: Vec<(Mbuf, Ip6Hdr)>,
    pf: crate::link::cx::PfilScratch<Ip6Hdr>,
}

/// `ip6_input` over the IPv6 packets of one burst from `ifp` (a vector stage): the
/// fixed header's checks, the input hooks over the vector, then each packet sorted
/// into `v.local` or `v.fwd`, or dropped and counted. The extension headers of
/// local packets are walked by [`ip6_deliver`].
pub(crate) fn ip6_input(
    cx: &mut Inet6Cx<'_, '_>,
    ifp: &Ifnet,
    pkts: &mut Vec<Mbuf>,
    v: &mut Ip6InputVecs,
) {
    cx.link.stats.ip6.total += pkts.len() as u64;
    if !ifp.inet6() {
        for m in pkts.drain(..) {
            cx.link.drop_pkt(m, DropReason::EtherNoProto);
        }
        return;
    }
    for mut m in pkts.drain(..) {
        match ip6_check(cx.link.access, &mut m) {
            Ok(h) => v.checked.push((m, h)),
            Err(why) => cx.link.drop_pkt(m, why),
        }
    }
    let at = (ifp.index, Some(ifp.index));
    cx.link.pfil_vec(
        PfilPoint::Inet6,
        Dir::In,
        DropReason::PfilIp6In,
        &mut v.checked,
        &mut v.pf,
        |_| at,
    );
    let forwarding = ifp.forwarding.inet6();
    let hooks = cx.link.pfil_active_on(PfilPoint::Inet6, Dir::In, ifp.index);
    for (k, (mut m, h)) in v.checked.drain(..).enumerate() {
        // The header as the hooks left it: one that rewrote the destination (NAT)
        // sends the packet there, as FreeBSD's `ip6_input` re-reads `ip6_dst`.
        let mut h = if hooks {
            ip6_reread(cx.link.access, &mut m, h)
        } else {
            h
        };
        if let Some(std::net::IpAddr::V6(nh)) = v.pf.take_nexthop(k) {
            // `ipfw fwd` (`PACKET_TAG_IPFORWARD`): delivered here when the next hop
            // is ours, else forwarded with it as the route's key, the header as it is.
            if local6(cx, nh).is_some() {
                v.local.push((m, h, false));
            } else if forwarding {
                h.dst = nh;
                v.fwd.push((m, h));
            } else {
                cx.link.drop_pkt(m, DropReason::Ip6CantForward);
            }
            continue;
        }
        if h.dst.is_multicast() {
            // Interface-local multicast never arrives from a link (RFC 4291 §2.7).
            if h.dst.segments()[0] & 0x000f == 1 {
                cx.link.drop_pkt(m, DropReason::Ip6BadScope);
            } else if !ifp.in6_joined(h.dst) {
                cx.link.drop_pkt(m, DropReason::Ip6NotMember);
            } else {
                v.local.push((m, h, false));
            }
            continue;
        }
        // Weak host model, as for IPv4: any of our addresses on any interface.
        match local6(cx, h.dst) {
            // Our own address as the source of a unicast packet from a link, to us:
            // spoofed (the LAND attack), as `ip_sort` has it for IPv4. IPv6 to
            // ourselves never goes out (`ip6_send`); a tunnel's inner packet looped
            // from our own outer one is marked `M_LOOP`. Only an address that has
            // passed duplicate address detection: one still tentative may be a
            // neighbour's (RFC 4862 §5.4). Multicast is left to neighbour discovery.
            Some(_) if m.hdr.flags & mbuf::M_LOOP == 0 && local6(cx, h.src) == Some(true) => {
                cx.link.drop_pkt(m, DropReason::Ip6LocalSrc)
            }
            Some(usable) => v.local.push((m, h, !usable)),
            // Our own address as the source of a packet to forward: spoofed, or
            // ours looping back (as `ip_sort` for IPv4).
            None if forwarding && local6(cx, h.src).is_some() => {
                cx.link.drop_pkt(m, DropReason::Ip6LocalSrc)
            }
            None if forwarding => v.fwd.push((m, h)),
            None => cx.link.drop_pkt(m, DropReason::Ip6CantForward),
        }
    }
}

/// Local delivery of one IPv6 packet (`ip6_input`'s tail): the extension-header
/// chain, fragments reassembled; the upper-layer protocol and where it starts for
/// the worker's protocol switch, or `None` when the packet was answered, dropped or
/// kept for reassembly.
pub(crate) fn ip6_deliver(
    cx: &mut Inet6Cx<'_, '_>,
    mut m: Mbuf,
    h: Ip6Hdr,
    tentative: bool,
) -> Option<(Mbuf, Ip6Info, IpProtocol, usize)> {
    let Ip6Hdr {
        src,
        dst,
        hlim,
        nxt: first,
    } = h;
    let mcast = dst.is_multicast();
    // The extension-header chain (RFC 8200 §4.1).
    let mut proto = first;
    let mut off = IP6_HDR_LEN;
    // Offset of the Next Header field that named `proto`, for Parameter Problems.
    let mut nh_at = 6usize;
    let mut walked = 0usize;
    loop {
        match proto {
            IpProtocol::HopByHop | IpProtocol::Ipv6Opts => {
                // §4.1: hop-by-hop only directly after the IPv6 header.
                if proto == IpProtocol::HopByHop && off != IP6_HDR_LEN {
                    param_problem(cx, m, Icmpv6ParamProblem::UnrecognizedNxtHdr, nh_at);
                    return None;
                }
                let (kept, next, hlen) = ip6_opts_input(cx, m, off, mcast)?;
                m = kept;
                nh_at = off;
                off += hlen;
                proto = next;
            }
            IpProtocol::Ipv6Route => {
                let Some((next, hlen)) = ext_len(cx.link.access, &mut m, off) else {
                    cx.link.drop_pkt(m, DropReason::Ip6TooShort);
                    return None;
                };
                let (rtype, segleft) = match hdr(cx.link.access, &mut m, off, 4) {
                    Ok(h) => (h[2], h[3]),
                    Err(_) => {
                        cx.link.drop_pkt(m, DropReason::Ip6TooShort);
                        return None;
                    }
                };
                if rtype == 0 {
                    cx.link.stats.ip6.rthdr0 += 1;
                }
                // RFC 5095 §3: type 0 is processed as an unrecognised routing type.
                // RFC 8200 §4.4: an unrecognised type with Segments Left 0 is ignored;
                // otherwise the packet is discarded with a Parameter Problem, code 0,
                // pointing at the Routing Type field. (We are a host; type 2, mobile
                // IPv6's, is not ours either.)
                if segleft != 0 {
                    param_problem(cx, m, Icmpv6ParamProblem::ErroneousHdrField, off + 2);
                    return None;
                }
                nh_at = off;
                off += hlen;
                proto = next;
            }
            IpProtocol::Ipv6Frag => {
                // RFC 8200 §4.5 with RFC 5722 and RFC 7112 (frag.rs): an atomic
                // fragment (RFC 6946) comes back at once; the fragment that completes
                // a datagram brings it back whole, its Fragment header gone and the
                // Next Header byte at `nh_at` naming what followed it.
                let pos = crate::ip::frag::Frag6Pos {
                    hdr_off: off,
                    nxt_off: nh_at,
                };
                match cx.ip.frag.input6(cx.link.now, m, pos, cx.link.stats) {
                    crate::ip::frag::Frag6::Done {
                        m: whole,
                        off: o,
                        next,
                    } => {
                        m = whole;
                        off = o;
                        proto = next;
                    }
                    crate::ip::frag::Frag6::Consumed => return None,
                    crate::ip::frag::Frag6::ParamProblem { m, code, pointer } => {
                        param_problem(cx, m, Icmpv6ParamProblem::from(code), pointer as usize);
                        return None;
                    }
                }
            }
            IpProtocol::Ah => {
                // No IPsec: recognised, counted, and not something we can check.
                cx.link.drop_pkt(m, DropReason::Ip6Ah);
                return None;
            }
            IpProtocol::Esp => {
                cx.link.drop_pkt(m, DropReason::Ip6Esp);
                return None;
            }
            IpProtocol::Ipv6NoNxt => {
                // RFC 8200 §4.7: nothing follows; whatever does is ignored.
                cx.link.stats.ip6.delivered += 1;
                return None;
            }
            _ => break,
        }
        walked += 1;
        if walked > MAX_EXT_HDRS {
            cx.link.drop_pkt(m, DropReason::Ip6TooManyHdr);
            return None;
        }
    }
    let info = Ip6Info {
        src,
        dst,
        hlim,
        off,
        mcast,
        tentative,
    };
    if tentative && proto != IpProtocol::Icmpv6 {
        // RFC 4862 §5.4: "... packets addressed to a tentative address ... should be
        // silently discarded" (neighbour discovery aside).
        cx.link.drop_pkt(m, DropReason::Ip6CantForward);
        return None;
    }
    cx.link.stats.ip6.delivered += 1;
    Some((m, info, proto, nh_at))
}

/// A Hop-by-Hop or Destination Options header at `off` (RFC 8200 §4.3, §4.6), its
/// options processed for `ip6_deliver`: the packet back with the header's Next
/// Header and length, or `None` when it was dropped or answered with a Parameter
/// Problem.
fn ip6_opts_input(
    cx: &mut Inet6Cx<'_, '_>,
    mut m: Mbuf,
    off: usize,
    mcast: bool,
) -> Option<(Mbuf, IpProtocol, usize)> {
    let Some((next, hlen)) = ext_len(cx.link.access, &mut m, off) else {
        cx.link.drop_pkt(m, DropReason::Ip6TooShort);
        return None;
    };
    match options(cx.link.access, &mut m, off, hlen) {
        Opts::Ok => {}
        Opts::Drop => {
            cx.link.drop_pkt(m, DropReason::Ip6BadOptions);
            return None;
        }
        Opts::Problem(at) => {
            cx.link.stats.ip6.badoptions += 1;
            param_problem_mcast(cx, m, Icmpv6ParamProblem::UnrecognizedOption, at);
            return None;
        }
        Opts::Malformed(at) => {
            cx.link.stats.ip6.badoptions += 1;
            param_problem(cx, m, Icmpv6ParamProblem::ErroneousHdrField, at);
            return None;
        }
        Opts::ProblemUnicast(at) => {
            cx.link.stats.ip6.badoptions += 1;
            if mcast {
                cx.link.drop_pkt(m, DropReason::Ip6BadOptions);
                return None;
            }
            param_problem(cx, m, Icmpv6ParamProblem::UnrecognizedOption, at);
            return None;
        }
    }
    Some((m, next, hlen))
}

/// Length and next header of the options or routing header at `off`.
fn ext_len(a: HdrAccess, m: &mut Mbuf, off: usize) -> Option<(IpProtocol, usize)> {
    let h = hdr(a, m, off, 2).ok()?;
    let (next, len_byte) = (IpProtocol::from(h[0]), h[1]);
    let hlen = (usize::from(len_byte) + 1) * 8;
    if off + hlen > m.len() {
        return None;
    }
    Some((next, hlen))
}

enum Opts {
    Ok,
    /// Action bits 01: discard silently.
    Drop,
    /// Action bits 10: discard and send a Parameter Problem code 2 pointing here.
    Problem(usize),
    /// Action bits 11: the same, unless the destination was multicast.
    ProblemUnicast(usize),
    /// An option runs past its header: Parameter Problem code 0 (erroneous header
    /// field) at its length byte.
    Malformed(usize),
}

/// RFC 8200 §4.2: the options of a hop-by-hop or destination options header of
/// `hlen` bytes at `off`. We know Pad1, PadN and router alert (RFC 2711).
fn options(a: HdrAccess, m: &mut Mbuf, off: usize, hlen: usize) -> Opts {
    let Ok(h) = hdr(a, m, off, hlen) else {
        return Opts::Drop;
    };
    let mut rest = &h[2..hlen];
    let mut at = off + 2;
    while !rest.is_empty() {
        let Ok((next, opt)) = Ipv6Option::parse(rest) else {
            // An option running past the header: the header is malformed.
            return Opts::Malformed(at + 1);
        };
        if let Ipv6Option::Unknown { .. } = opt {
            match opt.failure_type() {
                Ipv6OptionFailureType::Skip => {}
                Ipv6OptionFailureType::Discard => return Opts::Drop,
                Ipv6OptionFailureType::DiscardSendAll => return Opts::Problem(at),
                Ipv6OptionFailureType::DiscardSendUnicast => return Opts::ProblemUnicast(at),
                Ipv6OptionFailureType::Unknown(_) => return Opts::Drop,
            }
        }
        at += rest.len() - next.len();
        rest = next;
    }
    Opts::Ok
}

pub(crate) fn param_problem(
    cx: &mut Inet6Cx<'_, '_>,
    m: Mbuf,
    code: Icmpv6ParamProblem,
    at: usize,
) {
    icmp6_error(cx, m, Error6::Param(code, at as u32, false));
}

/// A Parameter Problem sent even if the packet went to a multicast group (option
/// action bits 10).
fn param_problem_mcast(cx: &mut Inet6Cx<'_, '_>, m: Mbuf, code: Icmpv6ParamProblem, at: usize) {
    icmp6_error(cx, m, Error6::Param(code, at as u32, true));
}
