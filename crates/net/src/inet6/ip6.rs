//! IPv6 input and output (`ip6_input`, `ip6_output`), RFC 8200.
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
//! ours, to deliver (the LAND attack). IPv6 to ourselves never leaves `ip6_send`.
//!
//! Output routes on the interfaces' prefixes and the default router, picks a source
//! (RFC 6724, reduced), builds the header and resolves the next hop through the
//! interface's neighbour table ([`crate::inet6::nd6`]).
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
use crate::link::iface::{is_link_local, Ifnet};
use crate::pfil::{Dir, PfilPoint};
use crate::stats::DropReason;
use mbuf::Mbuf;
use std::net::Ipv6Addr;
use std::sync::Arc;
use wire::{
    EtherType, EthernetAddress, Icmpv6ParamProblem, IpProtocol, Ipv6Option, Ipv6OptionFailureType,
    Ipv6Packet,
};

pub(crate) const IP6_HDR_LEN: usize = 40;
pub(crate) const DEFAULT_HLIM: u8 = 64;
/// Extension headers walked before a packet is refused (`ip6.toomanyhdr`): a chain
/// of thousands of empty options headers must not cost thousands of pulldowns.
pub(crate) const MAX_EXT_HDRS: usize = 16;

/// What `ip6_input` read of a fixed header, for forwarding and local delivery.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ip6Hdr {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub hlim: u8,
    /// The fixed header's Next Header.
    pub nxt: IpProtocol,
}

/// What upper layers need from the IPv6 header and the chain walk.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ip6Info {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub hlim: u8,
    /// Offset of the upper-layer header.
    pub off: usize,
    /// Sent to a multicast group.
    pub mcast: bool,
    /// Sent to a tentative address of ours: only neighbour discovery may use it.
    pub tentative: bool,
}

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
    cx: &mut Inet6Cx<'_>,
    ifp: &Ifnet,
    pkts: &mut Vec<Mbuf>,
    v: &mut Ip6InputVecs,
) {
    cx.stats.ip6.total += pkts.len() as u64;
    if !ifp.inet6() {
        for m in pkts.drain(..) {
            cx.drop_pkt(m, DropReason::EtherNoProto);
        }
        return;
    }
    for mut m in pkts.drain(..) {
        match ip6_check(cx.access, &mut m) {
            Ok(h) => v.checked.push((m, h)),
            Err(why) => cx.drop_pkt(m, why),
        }
    }
    let at = (ifp.index, Some(ifp.index));
    cx.pfil_vec(
        PfilPoint::Inet6,
        Dir::In,
        DropReason::PfilIp6In,
        &mut v.checked,
        &mut v.pf,
        |_| at,
    );
    let forwarding = ifp.forwarding.inet6();
    let hooks = cx.pfil_active_on(PfilPoint::Inet6, Dir::In, ifp.index);
    for (k, (mut m, h)) in v.checked.drain(..).enumerate() {
        // The header as the hooks left it: one that rewrote the destination (NAT)
        // sends the packet there, as FreeBSD's `ip6_input` re-reads `ip6_dst`.
        let mut h = if hooks {
            ip6_reread(cx.access, &mut m, h)
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
                cx.drop_pkt(m, DropReason::Ip6CantForward);
            }
            continue;
        }
        if h.dst.is_multicast() {
            // Interface-local multicast never arrives from a link (RFC 4291 §2.7).
            if h.dst.segments()[0] & 0x000f == 1 {
                cx.drop_pkt(m, DropReason::Ip6BadScope);
            } else if !ifp.in6_joined(h.dst) {
                cx.drop_pkt(m, DropReason::Ip6NotMember);
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
                cx.drop_pkt(m, DropReason::Ip6LocalSrc)
            }
            Some(usable) => v.local.push((m, h, !usable)),
            // Our own address as the source of a packet to forward: spoofed, or
            // ours looping back (as `ip_sort` for IPv4).
            None if forwarding && local6(cx, h.src).is_some() => {
                cx.drop_pkt(m, DropReason::Ip6LocalSrc)
            }
            None if forwarding => v.fwd.push((m, h)),
            None => cx.drop_pkt(m, DropReason::Ip6CantForward),
        }
    }
}

/// Local delivery of one IPv6 packet (`ip6_input`'s tail): the extension-header
/// chain, fragments reassembled; the upper-layer protocol and where it starts for
/// the worker's protocol switch, or `None` when the packet was answered, dropped or
/// kept for reassembly.
pub(crate) fn ip6_deliver(
    cx: &mut Inet6Cx<'_>,
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
                let Some((next, hlen)) = ext_len(cx.access, &mut m, off) else {
                    cx.drop_pkt(m, DropReason::Ip6TooShort);
                    return None;
                };
                let (rtype, segleft) = match hdr(cx.access, &mut m, off, 4) {
                    Ok(h) => (h[2], h[3]),
                    Err(_) => {
                        cx.drop_pkt(m, DropReason::Ip6TooShort);
                        return None;
                    }
                };
                if rtype == 0 {
                    cx.stats.ip6.rthdr0 += 1;
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
                let pos = crate::inet::frag::Frag6Pos {
                    hdr_off: off,
                    nxt_off: nh_at,
                };
                match cx
                    .ip4
                    .frag
                    .input6(cx.ip4.link.now, m, pos, cx.ip4.link.stats)
                {
                    crate::inet::frag::Frag6::Done {
                        m: whole,
                        off: o,
                        next,
                    } => {
                        m = whole;
                        off = o;
                        proto = next;
                    }
                    crate::inet::frag::Frag6::Consumed => return None,
                    crate::inet::frag::Frag6::ParamProblem { m, code, pointer } => {
                        param_problem(cx, m, Icmpv6ParamProblem::from(code), pointer as usize);
                        return None;
                    }
                }
            }
            IpProtocol::Ah => {
                // No IPsec: recognised, counted, and not something we can check.
                cx.drop_pkt(m, DropReason::Ip6Ah);
                return None;
            }
            IpProtocol::Esp => {
                cx.drop_pkt(m, DropReason::Ip6Esp);
                return None;
            }
            IpProtocol::Ipv6NoNxt => {
                // RFC 8200 §4.7: nothing follows; whatever does is ignored.
                cx.stats.ip6.delivered += 1;
                return None;
            }
            _ => break,
        }
        walked += 1;
        if walked > MAX_EXT_HDRS {
            cx.drop_pkt(m, DropReason::Ip6TooManyHdr);
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
        cx.drop_pkt(m, DropReason::Ip6CantForward);
        return None;
    }
    cx.stats.ip6.delivered += 1;
    Some((m, info, proto, nh_at))
}

/// A Hop-by-Hop or Destination Options header at `off` (RFC 8200 §4.3, §4.6), its
/// options processed for `ip6_deliver`: the packet back with the header's Next
/// Header and length, or `None` when it was dropped or answered with a Parameter
/// Problem.
fn ip6_opts_input(
    cx: &mut Inet6Cx<'_>,
    mut m: Mbuf,
    off: usize,
    mcast: bool,
) -> Option<(Mbuf, IpProtocol, usize)> {
    let Some((next, hlen)) = ext_len(cx.access, &mut m, off) else {
        cx.drop_pkt(m, DropReason::Ip6TooShort);
        return None;
    };
    match options(cx.access, &mut m, off, hlen) {
        Opts::Ok => {}
        Opts::Drop => {
            cx.drop_pkt(m, DropReason::Ip6BadOptions);
            return None;
        }
        Opts::Problem(at) => {
            cx.stats.ip6.badoptions += 1;
            param_problem_mcast(cx, m, Icmpv6ParamProblem::UnrecognizedOption, at);
            return None;
        }
        Opts::Malformed(at) => {
            cx.stats.ip6.badoptions += 1;
            param_problem(cx, m, Icmpv6ParamProblem::ErroneousHdrField, at);
            return None;
        }
        Opts::ProblemUnicast(at) => {
            cx.stats.ip6.badoptions += 1;
            if mcast {
                cx.drop_pkt(m, DropReason::Ip6BadOptions);
                return None;
            }
            param_problem(cx, m, Icmpv6ParamProblem::UnrecognizedOption, at);
            return None;
        }
    }
    Some((m, next, hlen))
}

/// The one's complement sum of the upper-layer message (`len` bytes at `info.off`,
/// summed over the chain as it lies) and its IPv6 pseudo-header (RFC 8200 §8.1):
/// 0xffff when the checksum in it is right.
pub(crate) fn upper_sum(m: &Mbuf, info: &Ip6Info, proto: IpProtocol, len: usize) -> u16 {
    wire::checksum::combine(&[
        crate::hdr::mbuf_sum(m, info.off, len),
        wire::checksum::pseudo_header(
            &std::net::IpAddr::V6(info.src),
            &std::net::IpAddr::V6(info.dst),
            proto,
            len as u32,
        ),
    ])
}

/// Whether `a` is one of our addresses, and if so whether it is usable (neither
/// tentative nor duplicated; a deprecated one still takes traffic, RFC 4862 §5.5.4).
fn local6(cx: &Inet6Cx<'_>, a: Ipv6Addr) -> Option<bool> {
    cx.inet6.local6(a).map(|x| x.usable())
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

pub(crate) fn param_problem(cx: &mut Inet6Cx<'_>, m: Mbuf, code: Icmpv6ParamProblem, at: usize) {
    crate::inet6::icmp6::icmp6_error(
        cx,
        m,
        crate::inet6::icmp6::Error6::Param(code, at as u32, false),
    );
}

/// A Parameter Problem sent even if the packet went to a multicast group (option
/// action bits 10).
fn param_problem_mcast(cx: &mut Inet6Cx<'_>, m: Mbuf, code: Icmpv6ParamProblem, at: usize) {
    crate::inet6::icmp6::icmp6_error(
        cx,
        m,
        crate::inet6::icmp6::Error6::Param(code, at as u32, true),
    );
}

/// RFC 2464 §7: an IPv6 multicast group maps onto 33:33 and its low 32 bits.
pub(crate) fn multicast_mac6(a: Ipv6Addr) -> EthernetAddress {
    let o = a.octets();
    EthernetAddress([0x33, 0x33, o[12], o[13], o[14], o[15]])
}

/// Parameters of a header `ip6_output` builds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ip6Out {
    /// Unspecified: picked by source address selection (unless `keep_unspec`).
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub proto: IpProtocol,
    pub hlim: u8,
    /// Send with the unspecified source (duplicate address detection probes).
    pub keep_unspec: bool,
    /// The interface for link-local and multicast destinations (their scope), when
    /// the caller knows it.
    pub ifindex: Option<crate::link::iface::IfIndex>,
}

/// The interface and next hop towards `dst`.
pub(crate) fn ip6_route<'a>(
    cx: &Inet6Cx<'a>,
    dst: Ipv6Addr,
    scope_if: Option<crate::link::iface::IfIndex>,
) -> Option<(&'a Arc<Ifnet>, Ipv6Addr)> {
    let ifs: &'a [Arc<Ifnet>] = cx.ifaces;
    let cfg: &'a crate::inet6::cx::Inet6Config = cx.inet6;
    if dst.is_multicast() || is_link_local(dst) {
        let by_index = scope_if
            .and_then(|i| ifs.get(i.get()))
            .filter(|i| i.inet6());
        return by_index
            .or_else(|| ifs.iter().find(|i| i.inet6()))
            .map(|i| (i, dst));
    }
    // A redirect for this destination first (RFC 4861 §8.3), then the on-link
    // prefixes of our addresses and of advertisements, then the static default
    // router, then a learnt one.
    let by = |(nh, i): (Ipv6Addr, crate::link::iface::IfIndex)| {
        ifs.get(i.get()).filter(|i| i.inet6()).map(|i| (i, nh))
    };
    if let Some(r) = cfg
        .nd6
        .redirects
        .iter()
        .find(|r| r.dst == dst && r.expires > cx.now)
    {
        return by((r.target, r.ifindex));
    }
    for i in ifs.iter().filter(|i| i.inet6()) {
        if i.addrs6
            .iter()
            .any(|a| !is_link_local(a.addr.addr) && a.addr.contains(dst))
        {
            return Some((i, dst));
        }
    }
    // The FIB: static routes (connected ones were found above).
    let fib: &'a route::Fib = cx.fib;
    let hash = || route::flow_hash6(0, u128::from(dst), 0, 0, 0, cx.isn_secret);
    if let Some(nh) = fib.lookup6(dst, hash) {
        if nh.kind != route::NhKind::Forward {
            return None;
        }
        let next = match nh.gateway {
            Some(std::net::IpAddr::V6(g)) => g,
            _ => dst,
        };
        return ifs.get(nh.ifindex as usize).map(|i| (i, next));
    }
    if let Some(hop) = cfg.nd6.next_hop(dst, cx.now, true) {
        return by(hop);
    }
    if let Some(hop) = cfg.default_gw6 {
        return by(hop);
    }
    cfg.nd6.next_hop(dst, cx.now, false).and_then(by)
}

/// `ip6_output` for a payload without an IPv6 header (`m` starts with the upper
/// layer or the first extension header): routes, builds the header, sends.
pub(crate) fn ip6_output(cx: &mut Inet6Cx<'_>, m: Mbuf, o: Ip6Out) {
    ip6_output_tclass(cx, m, o, 0)
}

/// [`ip6_output`] with traffic class `tclass` (DSCP and ECN: TCP's ECN-capable
/// segments).
pub(crate) fn ip6_output_tclass(cx: &mut Inet6Cx<'_>, m: Mbuf, o: Ip6Out, tclass: u8) {
    match ip6_route(cx, o.dst, o.ifindex) {
        Some(route) => ip6_output_on(cx, m, o, tclass, route),
        None => cx.drop_pkt(m, DropReason::Ip6NoRoute),
    }
}

/// [`ip6_output`] by a route already looked up (`ifp`, the next hop), with traffic
/// class `tclass` (a tunnel copies its inner packet's DSCP).
pub(crate) fn ip6_output_on(
    cx: &mut Inet6Cx<'_>,
    mut m: Mbuf,
    o: Ip6Out,
    tclass: u8,
    (ifp, nexthop): (&Arc<Ifnet>, Ipv6Addr),
) {
    let src = if o.src.is_unspecified() && !o.keep_unspec {
        match ifp.source6_for(o.dst) {
            Some(s) => s,
            None => return cx.drop_pkt(m, DropReason::Ip6NoRoute),
        }
    } else {
        o.src
    };
    let plen = m.len();
    if crate::inet::ip::too_long(&m, plen, IP6_HDR_LEN + plen, ifp) {
        return cx.drop_pkt(m, DropReason::Ip6TooLong);
    }
    match m.prepend(IP6_HDR_LEN) {
        Ok(h) => {
            let mut p = Ipv6Packet::new_unchecked(h);
            p.set_version(6);
            p.set_traffic_class(tclass);
            p.set_flow_label(0);
            p.set_payload_len(u16::try_from(plen).unwrap_or(0));
            p.set_next_header(o.proto);
            p.set_hop_limit(o.hlim);
            p.set_src_addr(src);
            p.set_dst_addr(o.dst);
        }
        Err(_) => return cx.drop_pkt(m, DropReason::Ip6OutDropped),
    }
    cx.stats.ip6.localout += 1;
    ip6_send(cx, ifp, m, o.dst, nexthop);
}

/// Sends an IPv6 packet (header built) towards `nexthop` on `ifp`.
pub(crate) fn ip6_send(
    cx: &mut Inet6Cx<'_>,
    ifp: &Arc<Ifnet>,
    m: Mbuf,
    dst: Ipv6Addr,
    nexthop: Ipv6Addr,
) {
    if !dst.is_multicast() && local6(cx, dst).is_some() {
        // To ourselves: IPv6 is not looped back (the loopback queue carries only
        // what tunnels take off in that family); drop, counted.
        return cx.drop_pkt(m, DropReason::Ip6OutDropped);
    }
    let Some(m) = cx.pfil(
        PfilPoint::Inet6,
        Dir::Out,
        ifp.index,
        m,
        DropReason::PfilIp6Out,
    ) else {
        return;
    };
    // The link's MTU, or a smaller one a Packet Too Big taught for this path.
    let mtu = cx
        .inet6
        .nd6
        .path_mtu(dst, cx.now)
        .map_or(ifp.mtu, |p| (p as usize).min(ifp.mtu));
    let out = |cx: &mut Inet6Cx<'_>, m| ip6_link_output(cx, ifp, m, dst, nexthop);
    if let Some(m) = crate::link::output::fit_link(cx, ifp, m, mtu, out) {
        ip6_fragment(cx, ifp, m, dst, nexthop, mtu);
    }
}

fn ip6_link_output(
    cx: &mut Inet6Cx<'_>,
    ifp: &Arc<Ifnet>,
    m: Mbuf,
    dst: Ipv6Addr,
    nexthop: Ipv6Addr,
) {
    if dst.is_multicast() {
        return crate::link::ether::ether_output(cx, ifp, m, multicast_mac6(dst), EtherType::Ipv6);
    }
    crate::inet6::nd6::nd6_resolve_output(cx, ifp, m, nexthop);
}

/// RFC 8200 §4.5: a packet of ours too big for the link goes out in fragments. The
/// unfragmentable part is the IPv6 header (our own packets carry no hop-by-hop or
/// routing header beyond a small MLD report); each fragment carries as many 8-byte
/// units as fit in the MTU, and shares the original's payload buffers (no copy).
/// The identification is unpredictable (RFC 7739): a keyed mix of a per-worker count.
fn ip6_fragment(
    cx: &mut Inet6Cx<'_>,
    ifp: &Arc<Ifnet>,
    mut m: Mbuf,
    dst: Ipv6Addr,
    nexthop: Ipv6Addr,
    mtu: usize,
) {
    let mut hdr = [0u8; IP6_HDR_LEN];
    if m.copydata(0, &mut hdr).is_err() || mtu < 1280 {
        cx.stats.ip6.cantfrag += 1;
        return cx.drop_pkt(m, DropReason::Ip6TooLong);
    }
    let next = hdr[6];
    if next == u8::from(IpProtocol::HopByHop) || next == u8::from(IpProtocol::Ipv6Route) {
        cx.stats.ip6.cantfrag += 1;
        return cx.drop_pkt(m, DropReason::Ip6TooLong);
    }
    let Ok(mut rest) = m.split(IP6_HDR_LEN) else {
        return cx.drop_pkt(m, DropReason::Ip6OutDropped);
    };
    drop(m);
    let per = (mtu - IP6_HDR_LEN - 8) / 8 * 8;
    let count = (u64::from(cx.next_ip_id()) << 16) | u64::from(cx.next_ip_id());
    let id = splitmix64(cx.isn_secret ^ count ^ u64::from(cx.worker as u32) << 48) as u32;
    let total = rest.len();
    let mut off = 0;
    cx.stats.ip6.fragmented += 1;
    while off < total {
        let n = per.min(total - off);
        let Ok(tail) = rest.split(n) else {
            return DropReason::Ip6OutDropped.count(cx.stats);
        };
        let mut piece = std::mem::replace(&mut rest, tail);
        let more = off + n < total;
        match piece.prepend(IP6_HDR_LEN + 8) {
            Ok(h) => {
                h[..IP6_HDR_LEN].copy_from_slice(&hdr);
                h[4..6].copy_from_slice(&((8 + n) as u16).to_be_bytes());
                h[6] = u8::from(IpProtocol::Ipv6Frag);
                let f = &mut h[IP6_HDR_LEN..];
                f[0] = next;
                f[1] = 0;
                let offm = (off as u16) | u16::from(more);
                f[2..4].copy_from_slice(&offm.to_be_bytes());
                f[4..8].copy_from_slice(&id.to_be_bytes());
            }
            Err(_) => return cx.drop_pkt(piece, DropReason::Ip6OutDropped),
        }
        cx.stats.ip6.ofragments += 1;
        ip6_link_output(cx, ifp, piece, dst, nexthop);
        off += n;
    }
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
