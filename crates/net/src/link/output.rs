//! Interface output's offload step (Linux's `validate_xmit_skb`): what a packet
//! of either family needs before a link of some MTU carries it — a large TCP
//! segment cut in software for a device that will not cut it (GSO), a TCP checksum
//! a device will not fill filled here, or the packet handed back to be fragmented
//! (IPv4) or refused (IPv6) when nothing can make it fit.
//!
//! What it may call: `link::gso` and the shared modules.

use crate::hdr::mbuf_sum;
use crate::link::iface::Ifnet;
use crate::link::{AsLink, LinkCx};
use crate::stats::{DropReason, Stats};
use mbuf::Mbuf;
use wire::{IpProtocol, Ipv4Packet, TcpPacket};

const IP_HDR_LEN: usize = 20;
const IP6_HDR_LEN: usize = 40;

/// The offload counters of a packet's family (`ip.*` or `ip6.*`).
struct FamilyOffload<'s> {
    swgso: &'s mut u64,
    swcsum: &'s mut u64,
    tso: &'s mut u64,
}

fn family_offload(stats: &mut Stats, v6: bool) -> FamilyOffload<'_> {
    // The two groups name these counters alike.
    macro_rules! of {
        ($group:expr) => {
            FamilyOffload {
                swgso: &mut $group.swgso,
                swcsum: &mut $group.swcsum,
                tso: &mut $group.tso,
            }
        };
    }
    if v6 {
        of!(stats.ip6)
    } else {
        of!(stats.ip)
    }
}

/// The drop reason of a packet of the family the output path could not send.
fn out_dropped(v6: bool) -> DropReason {
    if v6 {
        DropReason::Ip6OutDropped
    } else {
        DropReason::IpOutDropped
    }
}

/// The output path's offload step, shared by sending and forwarding over both
/// families, before the link with `mtu` on `ifp` carries a packet (IPv4 or IPv6):
/// - a segment standing for smaller ones (`tso_segsz`) that the device will not
///   cut is cut in software (`ip.swgso` / `ip6.swgso`), each piece to `out`: one
///   longer than the MTU, and one within it whose data exceed its segment size
///   too, since that size is the peer's MSS (RFC 9293 §3.7.1: a sender MUST NOT
///   exceed it), which may be smaller than the link's (a peer behind PPPoE or a
///   tunnel); a device cuts only beyond the MTU;
/// - a TCP checksum left to a device that will not fill it is filled
///   ([`csum_finish`]);
/// - what fits the MTU, or a segment the device cuts (`ip.tso` / `ip6.tso`), goes
///   to `out` whole.
///
/// Returns the packet when it is longer than the MTU and nothing cuts it: the
/// caller fragments it or answers its sender. Dropped packets are counted.
pub(crate) fn fit_link<'a, C: AsLink<'a>>(
    cx: &mut C,
    ifp: &Ifnet,
    m: Mbuf,
    mtu: usize,
    mut out: impl FnMut(&mut C, Mbuf),
) -> Option<Mbuf> {
    let v6 = m.first().first().is_some_and(|b| b >> 4 == 6);
    // Decided once: neither the cut nor the checksum changes what it looks at.
    let whole = m.len() > mtu && tso_takes(ifp, &m, mtu);
    if m.hdr.tso_segsz != 0 && !whole && (m.len() > mtu || stands_for_more(&m)) {
        // The pieces go into the worker's reused list, then out in order.
        let mut segs = std::mem::take(cx.link().gso_segs);
        match crate::link::gso::tcp_segment(&m, mtu, &mut segs) {
            Ok(()) => {
                *family_offload(cx.link().stats, v6).swgso += 1;
                for seg in segs.drain(..) {
                    out(cx, seg);
                }
            }
            Err(_) => {
                cx.link().drop_pkt(m, out_dropped(v6));
            }
        }
        *cx.link().gso_segs = segs;
        return None;
    }
    // The device fills in the checksum of what it takes whole and fits its link.
    let device_sums = ifp.offload.csum && (m.len() <= mtu || whole);
    let m = csum_finish(cx.link(), m, device_sums)?;
    if m.len() > mtu {
        if !whole {
            return Some(m);
        }
        *family_offload(cx.link().stats, v6).tso += 1;
    }
    out(cx, m);
    None
}

/// Whether `ifp` takes this packet longer than its MTU whole and cuts it into
/// segments itself: a TCP segment built for segmentation offload (its checksum
/// still to be filled, as every TCP segment of ours and every one a TAP hands us
/// whole) within the device's size, whose segments fit `mtu`. A segment that came
/// in whole on a link of a larger MTU stands for segments too long for this one:
/// the router cuts it itself (`gso::tcp_segment`) rather than have the device
/// put packets longer than the link's MTU on it.
pub(crate) fn tso_takes(ifp: &Ifnet, m: &Mbuf, mtu: usize) -> bool {
    // A segment without a segment size stands for itself: too long for the link,
    // it is the caller's to fragment or refuse, never the device's to cut.
    m.hdr.tso_segsz != 0
        && m.hdr.csum_flags & mbuf::CSUM_L4_NEEDED != 0
        && m.len() <= ifp.offload.tso
        && headers_len(m).is_some_and(|h| h + usize::from(m.hdr.tso_segsz) <= mtu)
}

/// Whether `m`, marked with a segment size, carries more data than one segment of
/// it.
fn stands_for_more(m: &Mbuf) -> bool {
    headers_len(m).is_some_and(|h| m.len() > h + usize::from(m.hdr.tso_segsz))
}

/// The IP and TCP headers' length at the front of `m` (IPv4, or IPv6 without
/// extension headers, then TCP), if they are in its first buffer.
fn headers_len(m: &Mbuf) -> Option<usize> {
    // The first buffer may hold the headers alone (our segments carry their data in
    // buffers of its own), so the views are not checked against the total length.
    let b = m.first();
    let ip = match b.first()? >> 4 {
        4 if b.len() >= IP_HDR_LEN => usize::from(Ipv4Packet::new_unchecked(b).header_len()),
        6 => IP6_HDR_LEN,
        _ => return None,
    };
    let tcp = b.get(ip..).filter(|t| t.len() >= 20)?;
    Some(ip + usize::from(TcpPacket::new_unchecked(tcp).header_len()))
}

/// Finishes a TCP checksum left to the device (`CSUM_L4_NEEDED`, the field holding
/// the pseudo-header sum) unless `device_sums`: the interface fills it in, having
/// checksum offload and seeing the packet whole (not fragmented). `m` starts with
/// its IPv4 or IPv6 header. Dropped and counted if the header cannot be read.
pub(crate) fn csum_finish(cx: &mut LinkCx<'_>, mut m: Mbuf, device_sums: bool) -> Option<Mbuf> {
    if m.hdr.csum_flags & mbuf::CSUM_L4_NEEDED == 0 || device_sums {
        return Some(m);
    }
    let Ok(h) = crate::hdr::hdr(cx.access, &mut m, 0, IP_HDR_LEN) else {
        cx.drop_pkt(m, DropReason::IpOutDropped);
        return None;
    };
    // Only TCP segments are left unfilled (ours, and those a TAP hands us with
    // `NEEDS_CSUM`), always of a whole datagram, over IPv4 or (without extension
    // headers) IPv6.
    let v6 = h[0] >> 4 == 6;
    let (hl, proto) = if v6 {
        (IP6_HDR_LEN, h[6])
    } else {
        (usize::from(h[0] & 0xf) * 4, h[9])
    };
    let drop = out_dropped(v6);
    let at = hl + 16;
    if proto != u8::from(IpProtocol::Tcp) || m.len() < hl + 20 {
        cx.drop_pkt(m, drop);
        return None;
    }
    let sum = !mbuf_sum(&m, hl, m.len() - hl);
    if m.copyback(at, &sum.to_be_bytes()).is_err() {
        cx.drop_pkt(m, drop);
        return None;
    }
    m.hdr.csum_flags &= !mbuf::CSUM_L4_NEEDED;
    *family_offload(cx.stats, v6).swcsum += 1;
    Some(m)
}
