//! Ethernet input and output, and ARP input (`ether_input`, `ether_demux`,
//! `ether_output`, `in_arpinput`).
//!
//! A priority-tagged frame (802.1Q tag with VLAN id 0) is taken as untagged, its
//! tag control information (the priority) kept in `m.hdr.vlan_tci`, as Linux and
//! FreeBSD take it; a frame tagged for a VLAN the interface has no VLAN interface
//! for is dropped (`ether.vlandrop`).
//!
//! # Stage contract (`ether_input`)
//! - **Uses**: the frame from its first byte; the arrival interface (its MAC,
//!   promiscuity, VLAN interfaces); the link's pfil hooks (`Ether`, in).
//! - **Sets**: `m.hdr.rcvif`, `m.hdr.vlan_tci` for a priority tag; the link
//!   header is stripped (the packet starts at the network header).
//! - **Next**: `EtherInputVecs::ip4` to `ip_input`, `ip6` to `ip6_input`, `arp`
//!   to `in_arpinput`; anything else dropped and counted (`ether.*`).

use crate::link::arp::{ArpOutput, Resolve};
use crate::link::iface::Ifnet;
use crate::link::LinkCx;
use crate::pfil::{Dir, PfilPoint};
use crate::stats::DropReason;
use mbuf::Mbuf;
use std::net::Ipv4Addr;
use std::sync::Arc;
use wire::{ArpOperation, ArpPacket, ArpRepr, EtherType, EthernetAddress, EthernetFrame};

pub(crate) const ETHER_HDR_LEN: usize = 14;

/// What `ether_input` sorted a burst into, by type, link headers stripped.
#[derive(Debug, Default)]
pub(crate) struct EtherInputVecs {
    pub ip4: Vec<Mbuf>,
    pub ip6: Vec<Mbuf>,
    pub arp: Vec<Mbuf>,
    checked: Vec<(Mbuf, EtherType)>,
    pf: crate::link::cx::PfilScratch<EtherType>,
}

/// A frame's link header checks: its type, with `M_BCAST`/`M_MCAST` set.
#[inline]
fn ether_check(
    access: crate::hdr::HdrAccess,
    ifp: &Ifnet,
    m: &mut Mbuf,
) -> Result<EtherType, DropReason> {
    let (dst, src, ethertype) = {
        let h =
            crate::hdr::hdr(access, m, 0, ETHER_HDR_LEN).map_err(|_| DropReason::EtherTooShort)?;
        let f = EthernetFrame::new_unchecked(crate::hdr::fixed::<ETHER_HDR_LEN>(h));
        (f.dst_addr(), f.src_addr(), f.ethertype())
    };
    // A frame from a multicast source is invalid (IEEE 802.3); one from ourselves is
    // our own echo on a shared medium.
    if src.is_multicast() || src == ifp.mac {
        return Err(DropReason::EtherBadAddr);
    }
    if dst.is_broadcast() {
        m.hdr.flags |= mbuf::M_BCAST;
    } else if dst.is_multicast() {
        m.hdr.flags |= mbuf::M_MCAST;
    } else if dst != ifp.mac {
        return Err(DropReason::EtherNotOurs);
    }
    Ok(ethertype)
}

/// `ether_input` over a burst received on `ifp` (a vector stage): each frame's link
/// header checked, the layer-2 hooks over the vector (unless `filtered`: a bridge
/// ran them on its member already), then each sorted by type (`ether_demux`) into
/// `v`, its link header stripped; every drop counted.
pub(crate) fn ether_input(
    cx: &mut LinkCx<'_>,
    ifp: &Ifnet,
    pkts: &mut Vec<Mbuf>,
    v: &mut EtherInputVecs,
    filtered: bool,
) {
    cx.stats.ether.ipackets += pkts.len() as u64;
    let rcvif = ifp.index.0;
    let hooks = !filtered && cx.pfil_active_on(PfilPoint::Ether, Dir::In, ifp.index);
    for mut m in pkts.drain(..) {
        m.hdr.rcvif = rcvif;
        match ether_check(cx.access, ifp, &mut m) {
            Ok(ty) if hooks => v.checked.push((m, ty)),
            Ok(ty) => ether_demux(cx, m, ty, v),
            Err(why) => cx.drop_pkt(m, why),
        }
    }
    if !hooks {
        return;
    }
    let at = (ifp.index, Some(ifp.index));
    let mut checked = std::mem::take(&mut v.checked);
    cx.pfil_vec(
        PfilPoint::Ether,
        Dir::In,
        DropReason::PfilEtherIn,
        &mut checked,
        &mut v.pf,
        |_| at,
    );
    for (m, ty) in checked.drain(..) {
        ether_demux(cx, m, ty, v);
    }
    v.checked = checked;
}

/// `ether_demux`: a checked frame, its link header stripped, to the vector of its
/// type.
#[inline(always)]
fn ether_demux(cx: &mut LinkCx<'_>, mut m: Mbuf, ty: EtherType, v: &mut EtherInputVecs) {
    let to = match ty {
        EtherType::Ipv4 => &mut v.ip4,
        EtherType::Ipv6 => &mut v.ip6,
        EtherType::Arp => &mut v.arp,
        EtherType::Vlan => return ether_demux_prio(cx, m, v),
        // Tagged for a VLAN this interface has no interface for (`vlan_input` took
        // those it has): not ours.
        EtherType::QinQ => return cx.drop_pkt(m, DropReason::EtherVlan),
        _ => return cx.drop_pkt(m, DropReason::EtherNoProto),
    };
    m.adj(ETHER_HDR_LEN as isize);
    to.push(m);
}

/// An 802.1Q-tagged frame that `vlan_input` left to the interface: one with VLAN
/// id 0 is priority-tagged, to be taken as untagged ("the frame is treated as
/// untagged … its priority is carried", IEEE 802.1Q-2018 §9.6; Linux's
/// `vlan_do_receive`, FreeBSD's `ether_demux` do so), its tag control
/// information kept in `vlan_tci`; another VLAN id is not ours.
#[cold]
fn ether_demux_prio(cx: &mut LinkCx<'_>, mut m: Mbuf, v: &mut EtherInputVecs) {
    let (tci, ty) = match crate::hdr::hdr(cx.access, &mut m, ETHER_HDR_LEN, 4) {
        Ok(h) => (
            u16::from_be_bytes([h[0], h[1]]),
            EtherType::from(u16::from_be_bytes([h[2], h[3]])),
        ),
        Err(_) => return cx.drop_pkt(m, DropReason::EtherTooShort),
    };
    let to = match ty {
        _ if tci & 0x0fff != 0 => return cx.drop_pkt(m, DropReason::EtherVlan),
        EtherType::Ipv4 => &mut v.ip4,
        EtherType::Ipv6 => &mut v.ip6,
        EtherType::Arp => &mut v.arp,
        // A tag in the tag: not taken apart further.
        EtherType::Vlan | EtherType::QinQ => return cx.drop_pkt(m, DropReason::EtherVlan),
        _ => return cx.drop_pkt(m, DropReason::EtherNoProto),
    };
    m.hdr.vlan_tci = Some(tci);
    m.adj(ETHER_HDR_LEN as isize + 4);
    to.push(m);
}

/// A link-layer header to write, then the transmit vector (`ether_output` over a
/// vector).
#[derive(Debug)]
pub(crate) struct L2Out {
    pub m: Mbuf,
    pub ifindex: crate::link::iface::IfIndex,
    pub dst: EthernetAddress,
    pub ty: EtherType,
}

/// `ether_output`'s scratch for a vector.
#[derive(Debug, Default)]
pub(crate) struct EtherOutputVecs {
    out: Vec<(Mbuf, crate::link::iface::IfIndex)>,
    pf: crate::link::cx::PfilScratch<crate::link::iface::IfIndex>,
}

/// `ether_output` over a vector of packets whose next hops' link addresses are
/// known (forwarded ones): link headers written into their headroom, the layer-2
/// output hooks over the vector, then each onto its interface's transmit vector.
pub(crate) fn ether_output_vec(
    cx: &mut LinkCx<'_>,
    pkts: &mut Vec<L2Out>,
    v: &mut EtherOutputVecs,
) {
    let ifaces = cx.ifaces;
    let hooks = cx.pfil_active(PfilPoint::Ether, Dir::Out);
    for o in pkts.drain(..) {
        let mut m = o.m;
        let Some(ifp) = ifaces.get(o.ifindex.get()) else {
            cx.drop_pkt(m, DropReason::EtherOutDropped);
            continue;
        };
        // Straight out where this interface's arc is empty (its packets keep their
        // order: all of them go one way), through the hooks after the loop else.
        if !hooks || ifp.no_link_header() || cx.ether_direct(ifp.index) {
            ether_output_now(cx, ifp, m, o.dst, o.ty);
            continue;
        }
        if !ether_header(&mut m, ifp, o.dst, o.ty) {
            cx.drop_pkt(m, DropReason::EtherOutDropped);
            continue;
        }
        v.out.push((m, o.ifindex));
    }
    if !hooks {
        return;
    }
    cx.pfil_vec(
        PfilPoint::Ether,
        Dir::Out,
        DropReason::PfilEtherOut,
        &mut v.out,
        &mut v.pf,
        |&i| (i, None),
    );
    cx.stats.ether.opackets += v.out.len() as u64;
    for (m, i) in v.out.drain(..) {
        match cx.tx.get_mut(i.get()) {
            Some(q) => q.push(m),
            None => DropReason::EtherOutDropped.count(cx.stats),
        }
    }
}

/// Writes the link header into `m`'s headroom (a buffer of its own if it has
/// none); false if no buffer was to be had.
#[inline(always)]
fn ether_header(m: &mut Mbuf, ifp: &Ifnet, dst: EthernetAddress, ty: EtherType) -> bool {
    match m
        .prepend(ETHER_HDR_LEN)
        .map(|h| h.first_chunk_mut::<ETHER_HDR_LEN>())
    {
        Ok(Some(h)) => {
            let mut f = EthernetFrame::new_unchecked(h);
            f.set_dst_addr(dst);
            f.set_src_addr(ifp.mac);
            f.set_ethertype(ty);
            true
        }
        _ => false,
    }
}

/// `ether_output_vec` for one packet whose link destination is known, at once, when
/// no hook is at the link's output point (the caller checked
/// `cx.pfil_active(PfilPoint::Ether, Dir::Out)`): the link header written, onto
/// `ifp`'s transmit vector. What forwarding past the IP output hooks uses, so a
/// forwarded packet is not moved through one more vector (`ether_output`'s).
#[inline(always)]
pub(crate) fn ether_output_now(
    cx: &mut LinkCx<'_>,
    ifp: &Ifnet,
    mut m: Mbuf,
    dst: EthernetAddress,
    ty: EtherType,
) {
    if ifp.no_link_header() {
        return p2p_output(cx, ifp, m);
    }
    if !ether_header(&mut m, ifp, dst, ty) {
        return cx.drop_pkt(m, DropReason::EtherOutDropped);
    }
    cx.stats.ether.opackets += 1;
    match cx.tx.get_mut(ifp.index.get()) {
        Some(q) => q.push(m),
        None => DropReason::EtherOutDropped.count(cx.stats),
    }
}

/// A packet whose link destination is known: at once ([`ether_output_now`]) when
/// `direct` (no hook at the link's output), else onto `l2` for
/// [`ether_output_vec`] and its hooks.
#[inline(always)]
pub(crate) fn ether_output_known(
    cx: &mut LinkCx<'_>,
    ifp: &Ifnet,
    m: Mbuf,
    dst: EthernetAddress,
    ty: EtherType,
    l2: &mut Vec<L2Out>,
    direct: bool,
) {
    if direct {
        return ether_output_now(cx, ifp, m, dst, ty);
    }
    l2.push(L2Out {
        m,
        ifindex: ifp.index,
        dst,
        ty,
    });
}

/// Prepends the link header and queues the frame for transmission (`ether_output`
/// once the destination is resolved).
pub(crate) fn ether_output(
    cx: &mut LinkCx<'_>,
    ifp: &Ifnet,
    mut m: Mbuf,
    dst: EthernetAddress,
    ty: EtherType,
) {
    if ifp.no_link_header() {
        return p2p_output(cx, ifp, m);
    }
    match m.prepend(ETHER_HDR_LEN) {
        Ok(h) => {
            let mut f = EthernetFrame::new_unchecked(h);
            f.set_dst_addr(dst);
            f.set_src_addr(ifp.mac);
            f.set_ethertype(ty);
        }
        Err(_) => return cx.drop_pkt(m, DropReason::EtherOutDropped),
    }
    let Some(m) = cx.pfil(
        PfilPoint::Ether,
        Dir::Out,
        ifp.index,
        m,
        DropReason::PfilEtherOut,
    ) else {
        return;
    };
    cx.stats.ether.opackets += 1;
    cx.tx[ifp.index.get()].push(m);
}

/// A packet for an interface with no link layer (a tunnel's): onto its transmit
/// vector as it is, its IP header first, for the worker's flush to encapsulate
/// (`tunnel::tunnel_output`). No neighbour to resolve, no layer-2 hook to pass.
#[cold]
pub(crate) fn p2p_output(cx: &mut LinkCx<'_>, ifp: &Ifnet, m: Mbuf) {
    match cx.tx.get_mut(ifp.index.get()) {
        Some(q) => q.push(m),
        None => DropReason::EtherOutDropped.count(cx.stats),
    }
}

/// RFC 1112 §6.4: an IPv4 multicast group maps onto 01:00:5e and its low 23 bits.
pub(crate) fn multicast_mac(ip: Ipv4Addr) -> EthernetAddress {
    let o = ip.octets();
    EthernetAddress([0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]])
}

/// Resolves the next hop of an IPv4 packet (no link header yet) and sends it:
/// lock-free through the published neighbour snapshot, else through the table's slow
/// path (`arpresolve`), which may hold the packet and ask.
pub(crate) fn arp_resolve_output(
    cx: &mut LinkCx<'_>,
    ifp: &Arc<Ifnet>,
    m: Mbuf,
    nexthop: Ipv4Addr,
    bcast: bool,
) {
    if ifp.no_link_header() {
        return p2p_output(cx, ifp, m);
    }
    if bcast {
        return ether_output(cx, ifp, m, EthernetAddress::BROADCAST, EtherType::Ipv4);
    }
    if nexthop.is_multicast() {
        return ether_output(cx, ifp, m, multicast_mac(nexthop), EtherType::Ipv4);
    }
    if let Some(mac) = cx.arp_lookup(ifp.index, nexthop) {
        return ether_output(cx, ifp, m, mac, EtherType::Ipv4);
    }
    let mut out = std::mem::take(cx.arp_out);
    if let Resolve::Now(m, mac) = ifp.arp.resolve_slow(cx.now, nexthop, m, cx.stats, &mut out) {
        ether_output(cx, ifp, m, mac, EtherType::Ipv4);
    }
    arp_flush(cx, ifp, &mut out);
    *cx.arp_out = out;
}

/// Sends what the neighbour table asked for: requests and released packets.
pub(crate) fn arp_flush(cx: &mut LinkCx<'_>, ifp: &Ifnet, out: &mut Vec<ArpOutput>) {
    for o in out.drain(..) {
        match o {
            ArpOutput::Packet { m, mac } => ether_output(cx, ifp, m, mac, EtherType::Ipv4),
            ArpOutput::Request { target, unicast } => arp_request(cx, ifp, target, unicast),
        }
    }
}

/// `arprequest`: who has `target`? tell us.
pub(crate) fn arp_request(
    cx: &mut LinkCx<'_>,
    ifp: &Ifnet,
    target: Ipv4Addr,
    unicast: Option<EthernetAddress>,
) {
    let Some(src) = ifp.source_for(target) else {
        return;
    };
    let repr = ArpRepr::EthernetIpv4 {
        operation: ArpOperation::Request,
        source_hardware_addr: ifp.mac,
        source_protocol_addr: src,
        target_hardware_addr: EthernetAddress([0; 6]),
        target_protocol_addr: target,
    };
    let Ok(mut m) = Mbuf::new() else {
        return DropReason::EtherOutDropped.count(cx.stats);
    };
    if m.append(&[0u8; 28]).is_err() {
        return DropReason::EtherOutDropped.count(cx.stats);
    }
    let Some(h) = m.head_mut::<28>() else {
        return cx.drop_pkt(m, DropReason::EtherOutDropped);
    };
    repr.emit(&mut ArpPacket::new_unchecked(h));
    ether_output(
        cx,
        ifp,
        m,
        unicast.unwrap_or(EthernetAddress::BROADCAST),
        EtherType::Arp,
    );
}

/// `in_arpinput`: RFC 826 with the merge rule, answering requests for our addresses
/// in place (the request buffer becomes the reply).
pub(crate) fn arp_input(cx: &mut LinkCx<'_>, ifp: &Ifnet, mut m: Mbuf) {
    cx.stats.arp.received += 1;
    let repr = {
        let Ok(h) = crate::hdr::hdr(cx.access, &mut m, 0, 28) else {
            return cx.drop_pkt(m, DropReason::ArpBadLen);
        };
        let p = ArpPacket::new_unchecked(h);
        match ArpRepr::parse(&p) {
            Ok(r) => r,
            Err(wire::Error::Truncated) => return cx.drop_pkt(m, DropReason::ArpBadLen),
            Err(_) => return cx.drop_pkt(m, DropReason::ArpBadProto),
        }
    };
    let ArpRepr::EthernetIpv4 {
        operation,
        source_hardware_addr: sha,
        source_protocol_addr: spa,
        target_protocol_addr: tpa,
        ..
    } = repr;
    if sha.is_multicast() || sha == ifp.mac {
        return cx.drop_pkt(m, DropReason::ArpBadAddr);
    }
    if ifp.has_addr(spa) {
        // Someone else claims one of our addresses (FreeBSD logs "duplicate IP").
        return cx.drop_pkt(m, DropReason::ArpDupIp);
    }
    if ifp.addrs.iter().any(|a| a.is_net_or_bcast(spa)) {
        // A sender claiming a subnet's network or broadcast address: no neighbour
        // has it, and an entry for it would turn our broadcasts into unicasts to
        // the claimant (FreeBSD's in_arpinput drops it too).
        return cx.drop_pkt(m, DropReason::ArpBadSpa);
    }
    let for_us = ifp.has_addr(tpa);
    match operation {
        ArpOperation::Request => cx.stats.arp.rxrequests += 1,
        ArpOperation::Reply => cx.stats.arp.rxreplies += 1,
        ArpOperation::Unknown(_) => return cx.drop_pkt(m, DropReason::ArpBadProto),
    }
    // RFC 5227 probes come from 0.0.0.0: answer, but learn nothing.
    if !spa.is_unspecified() && !spa.is_broadcast() {
        let mut out = std::mem::take(cx.arp_out);
        ifp.arp.input(cx.now, spa, sha, for_us, cx.stats, &mut out);
        arp_flush(cx, ifp, &mut out);
        *cx.arp_out = out;
    }
    if operation == ArpOperation::Request && for_us {
        let reply = ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Reply,
            source_hardware_addr: ifp.mac,
            source_protocol_addr: tpa,
            target_hardware_addr: sha,
            target_protocol_addr: spa,
        };
        m.truncate(28);
        let Some(h) = m.head_mut::<28>() else {
            return cx.drop_pkt(m, DropReason::EtherOutDropped);
        };
        reply.emit(&mut ArpPacket::new_unchecked(h));
        cx.stats.arp.txreplies += 1;
        ether_output(cx, ifp, m, sha, EtherType::Arp);
    }
}
