//! IPv4 input (`ip_input`), RFC 791 and RFC 1122 §3.2.1.
//!
//! Input validates the header in FreeBSD's order, one named counter per failure,
//! walks the options (`ip_dooptions`: malformed ones answered with a parameter
//! problem, source routes dropped unless `net.inet.ip.sourceroute` or
//! `accept_sourceroute` says otherwise), reassembles fragments (`frag`), then delivers
//! locally. A packet from a link (not looped back by `ip_send`, which marks what we
//! send ourselves `M_LOOP`) whose source is one of our addresses is dropped and
//! counted in `ip.localsrc`, whether for us (the LAND attack, a broadcast of ours come
//! back) or to forward. Packets for other addresses go to `ip_forward` (`forward.rs`)
//! when the arrival interface forwards, else are counted (`ip.cantforward`) and
//! dropped.
//!
//! # Stage contract (`ip_input`)
//! - **Uses**: the packet from its IPv4 header; `m.hdr.rcvif`, `m.hdr.flags`
//!   (`M_LOOP`); the batch's `InetConfig` (local and broadcast addresses), the
//!   interface's forwarding switch; the pfil hooks (`Inet`, in).
//! - **Sets**: an `IpInfo` beside each packet (addresses, protocol, header length,
//!   TTL, DF, fragment fields, broadcast), read again after the hooks when they
//!   ran, so a hook that rewrote the header sends the packet where it now says;
//!   an `ipfw fwd` next hop replaces `dst` as forwarding's key. Link padding
//!   trimmed.
//! - **Next**: `IpInputVecs::local` to reassembly and the protocol switch
//!   (`ip_protox`), `fwd` to `ip_forward`; every other packet dropped and counted
//!   (`ip.*`).

use crate::hdr::{fixed, length_field};
use crate::inet::cx::InetCx;
use crate::inet::ip::{ip_route, IpInfo, IP_HDR_LEN};
use crate::link::iface::Ifnet;
use crate::pfil::{Dir, PfilPoint};
use crate::stats::DropReason;
use mbuf::Mbuf;
use std::net::Ipv4Addr;
use wire::{Icmpv4Message, Ipv4Packet};

/// `ip_input`'s header checks, in FreeBSD's order, one named counter per failure:
/// the fields the rest of the path needs, link padding trimmed.
#[inline]
pub(crate) fn ip_check(
    access: crate::hdr::HdrAccess,
    inet: &crate::inet::cx::InetConfig,
    ifp: &Ifnet,
    m: &mut Mbuf,
) -> Result<IpInfo, DropReason> {
    let len = m.len();
    if len < IP_HDR_LEN {
        return Err(DropReason::IpTooSmall);
    }
    // The fixed header, read once: its fields, and its checksum when it is the
    // whole header (options are summed below).
    let (hlen, total_len, info, sum_ok) = {
        let h = crate::hdr::hdr(access, m, 0, IP_HDR_LEN).map_err(|_| DropReason::IpTooSmall)?;
        // A view over exactly the fixed header: one length check, none per field.
        let fh = fixed::<IP_HDR_LEN>(h);
        let p = Ipv4Packet::new_unchecked(fh);
        if p.version() != 4 {
            return Err(DropReason::IpBadVers);
        }
        let hlen = p.header_len() as usize;
        if hlen < IP_HDR_LEN {
            return Err(DropReason::IpBadHlen);
        }
        // RFC 1122 §3.2.1.2: a datagram with a bad checksum MUST be silently discarded.
        let sum_ok = hlen == IP_HDR_LEN && wire::checksum::data(fh) == 0xffff;
        let src = p.src_addr();
        let dst = p.dst_addr();
        let info = IpInfo {
            src,
            dst,
            hlen,
            proto: p.next_header(),
            bcast: dst.is_broadcast() || dst.is_multicast() || inet.is_bcast_on(dst, ifp.index),
            ttl: p.hop_limit(),
            df: p.dont_frag(),
            frag: p.more_frags() || p.frag_offset() != 0,
            frag_off: p.frag_offset(),
        };
        (hlen, p.total_len(), info, sum_ok)
    };
    let total_len = length_field(total_len, m, 0);
    if hlen > len {
        return Err(DropReason::IpBadHlen);
    }
    if !sum_ok {
        let h = crate::hdr::hdr(access, m, 0, hlen).map_err(|_| DropReason::IpBadHlen)?;
        if hlen == IP_HDR_LEN || wire::checksum::data(&h[..hlen]) != 0xffff {
            return Err(DropReason::IpBadSum);
        }
    }
    if total_len < hlen {
        return Err(DropReason::IpBadLen);
    }
    if total_len > len {
        return Err(DropReason::IpTooShort);
    }
    // RFC 1122 §3.2.1.3: a source that is broadcast or multicast is invalid.
    let src = info.src;
    if src.is_broadcast() || src.is_multicast() || inet.is_bcast_on(src, ifp.index) {
        return Err(DropReason::IpBadAddr);
    }
    if total_len < len {
        // Link padding (Ethernet minimum frame) beyond the datagram.
        m.adj(-((len - total_len) as isize));
    }
    Ok(info)
}

/// Where `ip_input` sends the packets of a vector, and its scratch.
#[derive(Debug, Default)]
pub(crate) struct IpInputVecs {
    /// For this host: to `ip_deliver`.
    pub local: Vec<(Mbuf, IpInfo)>,
    /// For other hosts, arrived on an interface that forwards: to `ip_forward`.
    pub fwd: Vec<(Mbuf, IpInfo)>,
    checked: Vec<(Mbuf, IpInfo)>,
    pf: crate::link::cx::PfilScratch<IpInfo>,
}

/// `ip_input` over the IPv4 packets of one burst from `ifp` (a vector stage):
/// header checks, the input hooks over the whole vector, then each packet sorted:
/// for this host into `v.local`, for another into `v.fwd` when the interface
/// forwards; every drop counted. Nothing here calls a transport: the worker
/// delivers `v.local` through the protocol switch.
pub(crate) fn ip_input(
    cx: &mut InetCx<'_, '_>,
    ifp: &Ifnet,
    pkts: &mut Vec<Mbuf>,
    v: &mut IpInputVecs,
) {
    cx.link.stats.ip.total += pkts.len() as u64;
    let hooks = cx.link.pfil_active_on(PfilPoint::Inet, Dir::In, ifp.index);
    let forwarding = ifp.forwarding.inet();
    for mut m in pkts.drain(..) {
        match ip_check(cx.link.access, cx.v4.inet, ifp, &mut m) {
            Ok(info) if hooks => v.checked.push((m, info)),
            Ok(info) => ip_sort(cx, ifp, forwarding, m, info, v),
            Err(why) => cx.link.drop_pkt(m, why),
        }
    }
    if !hooks {
        return;
    }
    let at = (ifp.index, Some(ifp.index));
    let mut checked = std::mem::take(&mut v.checked);
    cx.link.pfil_vec(
        PfilPoint::Inet,
        Dir::In,
        DropReason::PfilIpIn,
        &mut checked,
        &mut v.pf,
        |_| at,
    );
    for (k, (mut m, info)) in checked.drain(..).enumerate() {
        let info = ip_reread(cx, ifp, &mut m, info);
        match v.pf.take_nexthop(k) {
            Some(std::net::IpAddr::V4(nh)) => ip_fwd_sort(cx, forwarding, m, info, nh, v),
            _ => ip_sort(cx, ifp, forwarding, m, info, v),
        }
    }
    v.checked = checked;
}

/// The header fields that decide where a packet goes, read again after the input
/// hooks (FreeBSD's `ip_input` compares `ip_dst` with `odst`, "dchg"): a hook that
/// rewrote the addresses or the protocol (NAT) sends the packet where the header
/// now says. Only after hooks ran; the broadcast test is redone only for a
/// changed destination.
#[inline]
fn ip_reread(cx: &InetCx<'_, '_>, ifp: &Ifnet, m: &mut Mbuf, mut info: IpInfo) -> IpInfo {
    let Ok(h) = crate::hdr::hdr(cx.link.access, m, 0, IP_HDR_LEN) else {
        return info;
    };
    let p = Ipv4Packet::new_unchecked(fixed::<IP_HDR_LEN>(h));
    let (src, dst, proto) = (p.src_addr(), p.dst_addr(), p.next_header());
    if dst != info.dst {
        info.bcast =
            dst.is_broadcast() || dst.is_multicast() || cx.v4.inet.is_bcast_on(dst, ifp.index);
        info.dst = dst;
    }
    info.src = src;
    info.proto = proto;
    info
}

/// A packet past the input hooks: one an `ipfw fwd` rule tagged with a next hop
/// (`PACKET_TAG_IPFORWARD`) is delivered here when the next hop is one of our
/// addresses (a transparent proxy's socket gets it, as in FreeBSD), else forwarded
/// with the next hop as its route lookup's key (FreeBSD's `ip_fastfwd` looks the
/// route up for the tag's address) and the header as it is; any other to
/// [`ip_sort`] (the caller's choice).
#[inline]
fn ip_fwd_sort(
    cx: &mut InetCx<'_, '_>,
    forwarding: bool,
    m: Mbuf,
    mut info: IpInfo,
    nh: Ipv4Addr,
    v: &mut IpInputVecs,
) {
    if cx.v4.inet.is_local(nh) {
        return v.local.push((m, info));
    }
    if !forwarding {
        return cx.link.drop_pkt(m, DropReason::IpCantForward);
    }
    // Forwarding reads `dst` only as the lookup's key and the link's next address.
    info.dst = nh;
    info.bcast = false;
    v.fwd.push((m, info));
}

/// A checked packet (past the input hooks) to local delivery or forwarding.
#[inline(always)]
fn ip_sort(
    cx: &mut InetCx<'_, '_>,
    ifp: &Ifnet,
    forwarding: bool,
    m: Mbuf,
    info: IpInfo,
    v: &mut IpInputVecs,
) {
    // Strong end system model would insist on the arrival interface; like FreeBSD we
    // accept any of our addresses (weak host model, RFC 1122 §3.3.4.2).
    // Options are walked before the "ours" test, for both ways on, as FreeBSD's
    // `ip_dooptions` is; a source route it followed sends the packet on to its
    // next address whatever that is.
    let mut info = info;
    let Some((m, opts)) = ip_dooptions(cx, forwarding, m, &mut info) else {
        return;
    };
    let routed = opts.routed;
    let ours = if routed {
        false
    } else if info.bcast {
        info.dst.is_broadcast()
            || cx.v4.inet.is_bcast_on(info.dst, ifp.index)
            || is_joined(info.dst)
    } else {
        cx.v4.inet.is_local(info.dst)
    };
    if ours {
        if m.hdr.flags & mbuf::M_LOOP == 0 && cx.v4.inet.is_local(info.src) {
            // Our own address as the source of a packet from a link (a device or a
            // tunnel), to us: spoofed, as the LAND attack's SYN from our address and
            // port to themselves is, or our own broadcast come back by another
            // interface. Linux drops it as a "martian source" (`fib_validate_source`);
            // FreeBSD's `tcp_input` drops the LAND SYN. What we send to ourselves
            // comes back through the loopback queue, marked `M_LOOP`.
            cx.link.drop_pkt(m, DropReason::IpLocalSrc);
        } else {
            v.local.push((m, info));
        }
    } else if !forwarding {
        cx.link.drop_pkt(m, DropReason::IpCantForward);
    } else if cx.v4.inet.is_local(info.src) {
        // Our own address as the source of a packet from the wire, to be forwarded:
        // spoofed, or our own packet looping back (Linux drops it as a "martian
        // source"). What we send ourselves to ourselves is for us, not forwarded.
        cx.link.drop_pkt(m, DropReason::IpLocalSrc);
    } else if let Some(rr) = opts.record_route {
        if let Some(m) = ip_record_route(cx, m, &info, IP_HDR_LEN + rr) {
            v.fwd.push((m, info));
        }
    } else {
        v.fwd.push((m, info));
    }
}

/// What `ip_dooptions` found that the rest of input acts on.
#[derive(Clone, Copy, Debug, Default)]
struct OptsSeen {
    /// A source route sent the packet on to the next address it names.
    routed: bool,
    /// A Record Route option's offset in the header (to record our address in if
    /// forwarded).
    record_route: Option<usize>,
}

/// `ip_dooptions`: the walk over a header's options (`wire::ipv4_options_check`).
/// A malformed option is answered with a parameter problem pointing at its
/// offending octet (RFC 1122 §3.2.2.5) and counted in `ip.badoptions`; a source
/// route (LSRR, SSRR) goes to [`ip_srcroute`]. Record Route is recorded in when
/// the packet is forwarded ([`ip_record_route`]); Timestamp passes as it is: a
/// router that forwards it does not stamp its time. The packet, with what was
/// found: whether a source route sent it on to the next address its route names
/// (to forward, its header and `info` rewritten), and whether it carries Record
/// Route; or `None` when it was dropped or answered.
#[inline]
fn ip_dooptions(
    cx: &mut InetCx<'_, '_>,
    forwarding: bool,
    mut m: Mbuf,
    info: &mut IpInfo,
) -> Option<(Mbuf, OptsSeen)> {
    if info.hlen <= IP_HDR_LEN {
        return Some((m, OptsSeen::default()));
    }
    let walked = match crate::hdr::hdr(cx.link.access, &mut m, 0, info.hlen) {
        Ok(h) => wire::ipv4_options_check(&h[IP_HDR_LEN..info.hlen]),
        Err(_) => {
            cx.link.drop_pkt(m, DropReason::IpBadHlen);
            return None;
        }
    };
    match walked {
        Ok(o) => {
            let routed = match o.source_route {
                Some((ty, at)) => {
                    let (m2, routed) = ip_srcroute(cx, forwarding, m, info, ty, IP_HDR_LEN + at)?;
                    m = m2;
                    routed
                }
                None => false,
            };
            let record_route = o.record_route;
            Some((
                m,
                OptsSeen {
                    routed,
                    record_route,
                },
            ))
        }
        Err(e) => {
            cx.link.stats.ip.badoptions += 1;
            // RFC 792: the pointer identifies the octet where an error was detected.
            let ptr = u8::try_from(IP_HDR_LEN + e.offset).unwrap_or(u8::MAX);
            let word = [ptr, 0, 0, 0];
            crate::inet::icmp::icmp_error_word(cx, m, Icmpv4Message::ParamProblem, 0, word);
            None
        }
    }
}

/// A source route (LSRR or SSRR, type `ty`, its option at `off` in the header, the
/// walk having checked its length and pointer), as FreeBSD's `ip_dooptions`
/// follows one, under the two switches of [`crate::inet::cx::SourceRouting`]:
///
/// - Addressed to us with the route used up (no whole address left at the
///   pointer): ours, delivered when `accept` is on (whatever `forward` says, as
///   FreeBSD's `ip_acceptsourceroute`).
/// - Addressed to us with addresses left, `forward` on and the arrival interface
///   forwarding: the next address (past any that are ours too) becomes the
///   destination, and ours is recorded in its place: for SSRR the address on the
///   directly connected network that holds it, for LSRR that of the interface the
///   route to it leaves by; the pointer moves on by 4, the header checksum is made
///   again, and the packet goes to `ip_forward` (TTL, hooks and all). No such
///   network or route, or a broadcast or multicast next address: ICMP unreachable,
///   source route failed (code 5).
/// - Not addressed to us (in transit): with `forward` on, LSRR is forwarded by its
///   destination (the option acts only at the hops it names), and SSRR is answered
///   with source route failed: a strict route's hops are neighbours, so it reached
///   a router it does not name.
///
/// Everything else is dropped and counted in `ip.srcroute` (and the failures
/// above too). Where FreeBSD, forwarding with `sourceroute` off, answers a source
/// route with source route failed, this drops it silently, as Linux does and RFC
/// 7126 §4.3, §4.4 advise: an answer would go to a source that is likely spoofed.
/// Unlike FreeBSD, an accepted route is not kept for replies to reverse
/// (`save_rte`).
fn ip_srcroute(
    cx: &mut InetCx<'_, '_>,
    forwarding: bool,
    mut m: Mbuf,
    info: &mut IpInfo,
    ty: u8,
    off: usize,
) -> Option<(Mbuf, bool)> {
    let sr = cx.v4.inet.srcroute;
    let fail = |cx: &mut InetCx<'_, '_>, m| {
        cx.link.stats.ip.srcroute += 1;
        crate::inet::icmp::icmp_error(cx, m, Icmpv4Message::DstUnreachable, 5, 0);
        None
    };
    if !cx.v4.inet.is_local(info.dst) {
        return match (sr.forward, ty) {
            (true, wire::ipv4opt::IPOPT_LSRR) => Some((m, false)),
            // No error about a packet sent to a broadcast address (RFC 1122 §3.2.2).
            (true, _) if !info.bcast => fail(cx, m),
            _ => {
                cx.link.drop_pkt(m, DropReason::IpSrcRoute);
                None
            }
        };
    }
    let hlen = info.hlen;
    let h = match crate::hdr::hdr(cx.link.access, &mut m, 0, hlen) {
        Ok(h) => h,
        Err(_) => {
            cx.link.drop_pkt(m, DropReason::IpBadHlen);
            return None;
        }
    };
    // The walk checked that the pointer (1-origin) is at least 4 and the option
    // within the header. The route is used up when no whole address is left at
    // the pointer (FreeBSD's `off > optlen - 4`).
    let len = usize::from(h[off + 1]);
    let mut ptr = usize::from(h[off + 2]);
    let used_up = |ptr: usize| ptr + 3 > len;
    if used_up(ptr) {
        // The route ends here: ours.
        if sr.accept {
            return Some((m, false));
        }
        cx.link.drop_pkt(m, DropReason::IpSrcRoute);
        return None;
    }
    if !sr.forward {
        cx.link.drop_pkt(m, DropReason::IpSrcRoute);
        return None;
    }
    if !forwarding {
        // FreeBSD would follow the route, then find the packet not ours.
        cx.link.drop_pkt(m, DropReason::IpCantForward);
        return None;
    }
    // The next address that is not ours: one of ours is a hop already made (and
    // already recorded, as itself).
    let addr = |at: usize| Ipv4Addr::new(h[at], h[at + 1], h[at + 2], h[at + 3]);
    let mut next = None;
    while !used_up(ptr) {
        let a = addr(off + ptr - 1);
        if !cx.v4.inet.is_local(a) {
            next = Some(a);
            break;
        }
        ptr += 4;
    }
    let Some(next) = next else {
        // Every address left was ours: the route ends here after all.
        if !sr.accept {
            cx.link.drop_pkt(m, DropReason::IpSrcRoute);
            return None;
        }
        return rewrite_srcroute(cx, m, info, off, ptr, None).map(|m| (m, false));
    };
    let bcast = next.is_broadcast()
        || next.is_multicast()
        || next.is_unspecified()
        || cx.v4.inet.bcast4.iter().any(|&(b, _)| b == next);
    let ifaces = cx.link.ifaces;
    let recorded = if bcast {
        None
    } else if ty == wire::ipv4opt::IPOPT_SSRR {
        // Strict: a neighbour, on one of our connected networks.
        ifaces
            .iter()
            .flat_map(|i| i.addrs.iter())
            .find(|a| a.contains(next))
            .map(|a| a.addr)
    } else {
        ip_route(cx, next).and_then(|(out, _, _)| out.source_for(next))
    };
    let Some(recorded) = recorded else {
        return fail(cx, m);
    };
    let m = rewrite_srcroute(cx, m, info, off, ptr, Some((recorded, next)))?;
    Some((m, true))
}

/// A source route's header rewritten: the pointer of the option at `off` set to
/// `ptr`, and, with `hop`, `hop.0` recorded at `ptr` (the pointer then moved past
/// it) and `hop.1` made the destination; the header checksum made again. `None`
/// when the header could not be written (counted).
fn rewrite_srcroute(
    cx: &mut InetCx<'_, '_>,
    mut m: Mbuf,
    info: &mut IpInfo,
    off: usize,
    mut ptr: usize,
    hop: Option<(Ipv4Addr, Ipv4Addr)>,
) -> Option<Mbuf> {
    let hlen = info.hlen;
    let Some(h) = header_mut(&mut m, hlen) else {
        cx.link.drop_pkt(m, DropReason::IpOutDropped);
        return None;
    };
    if let Some((recorded, next)) = hop {
        let at = off + ptr - 1;
        h[at..at + 4].copy_from_slice(&recorded.octets());
        ptr += 4;
        h[16..20].copy_from_slice(&next.octets());
        info.dst = next;
        info.bcast = false;
    }
    // At most 40 + 4: the option is within the header's 40 bytes of options.
    h[off + 2] = u8::try_from(ptr).unwrap_or(u8::MAX);
    header_sum(h);
    Some(m)
}

/// The IPv4 header, `hlen` bytes, writable in the packet's first buffer (`None`
/// when it is not there whole or cannot be written).
fn header_mut(m: &mut Mbuf, hlen: usize) -> Option<&mut [u8]> {
    match m.try_first_mut() {
        Ok(h) if h.len() >= hlen => Some(&mut h[..hlen]),
        _ => None,
    }
}

/// The header checksum made again after a change.
fn header_sum(h: &mut [u8]) {
    Ipv4Packet::new_unchecked(h).fill_checksum();
}

/// Record Route (RFC 791 §3.1) on a packet about to be forwarded, as FreeBSD's
/// `ip_dooptions` and Linux's `ip_forward_options` record it: while the option has
/// room, the address of the interface the route to its destination leaves by goes
/// at the pointer, the pointer moves on by 4 and the header checksum is made again.
/// A full option, or no route (`ip_forward` answers that), leaves the packet as it
/// is. `None` when the header could not be written (counted).
fn ip_record_route(cx: &mut InetCx<'_, '_>, mut m: Mbuf, info: &IpInfo, at: usize) -> Option<Mbuf> {
    let Some(ours) = ip_route(cx, info.dst).and_then(|(out, _, _)| out.source_for(info.dst)) else {
        return Some(m);
    };
    let Some(h) = header_mut(&mut m, info.hlen) else {
        cx.link.drop_pkt(m, DropReason::IpOutDropped);
        return None;
    };
    // The walk checked the option's length, and that while it has room (its
    // pointer not past its length) a whole address fits at its pointer.
    let (len, ptr) = (usize::from(h[at + 1]), usize::from(h[at + 2]));
    if ptr <= len {
        let slot = at + ptr - 1;
        h[slot..slot + 4].copy_from_slice(&ours.octets());
        h[at + 2] += 4;
        header_sum(h);
    }
    Some(m)
}

/// The start of local delivery (`ip_input`'s tail): fragments are reassembled here,
/// after each passed the hooks and the "ours" test, as FreeBSD orders it (RFC 1122
/// §3.3.2: a host MUST reassemble). The whole datagram, or `None` while it is not.
pub(crate) fn ip_reass(
    cx: &mut InetCx<'_, '_>,
    m: Mbuf,
    mut info: IpInfo,
) -> Option<(Mbuf, IpInfo)> {
    if !info.frag {
        cx.link.stats.ip.delivered += 1;
        return Some((m, info));
    }
    let mut m = cx.ip.frag.input4(cx.link.now, m, cx.link.stats)?;
    // The datagram carries the first fragment's header, options and all.
    match crate::hdr::hdr(cx.link.access, &mut m, 0, IP_HDR_LEN) {
        Ok(h) => info.hlen = usize::from(Ipv4Packet::new_unchecked(h).header_len()),
        Err(_) => {
            cx.link.drop_pkt(m, DropReason::IpTooSmall);
            return None;
        }
    }
    info.frag = false;
    info.frag_off = 0;
    cx.link.stats.ip.delivered += 1;
    Some((m, info))
}

/// Multicast groups a host is in without asking: all-hosts (RFC 1112).
fn is_joined(a: Ipv4Addr) -> bool {
    a == Ipv4Addr::new(224, 0, 0, 1)
}
