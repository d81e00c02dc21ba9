//! The packet description ipfw's rules read: an IPv4 or IPv6 packet, or an Ethernet
//! frame at the layer-2 point, written into an `fw::PacketVec` entry — addresses,
//! ports, TCP flags and options, ICMP types and the flow an ICMP error quotes, the
//! upper layer past IPv6 extension headers — headers read through `hdr()`, never by
//! indexing raw bytes past what was pulled up. A fast path reads the common IPv4
//! packet straight from its first buffer.
//!
//! What it may call: `mbuf`, `crate::hdr`, `fw`'s packet vector.

use super::tags_of;
use crate::ifindex::IfIndex;
use crate::pfil::{Dir, PfilPoint};
use fw::{Direction, IfRef};
use mbuf::Mbuf;
use std::net::IpAddr;

/// TCP option kinds as `tcpoptions` names them.
fn tcp_options(opts: &[u8]) -> u8 {
    let mut bits = 0;
    let mut i = 0;
    while i < opts.len() {
        let kind = opts[i];
        match kind {
            0 => break,
            1 => {
                i += 1;
                continue;
            }
            2 => bits |= fw::program::tcpopt::MSS,
            3 => bits |= fw::program::tcpopt::WINDOW,
            4 | 5 => bits |= fw::program::tcpopt::SACK,
            8 => bits |= fw::program::tcpopt::TS,
            _ => {}
        }
        match opts.get(i + 1) {
            Some(&l) if l >= 2 => i += usize::from(l),
            _ => break,
        }
    }
    bits
}

/// Reads the upper-layer header of protocol `proto` at `off` into packet `k` of `v`
/// (ports, TCP flags, window and payload length, and its options if the rules read
/// them; ICMP type, a query's identifier, and the flow an error quotes, which the
/// states key them on).
fn upper(
    a: crate::hdr::HdrAccess,
    m: &mut Mbuf,
    off: usize,
    proto: u8,
    v: &mut fw::PacketVec,
    k: usize,
    needs: fw::Needs,
) {
    let left = m.len().saturating_sub(off);
    match proto {
        6 if left >= 20 => {
            let Ok(h) = crate::hdr::hdr(a, m, off, 20) else {
                return;
            };
            let h = crate::hdr::fixed::<20>(h);
            v.set_ports(
                k,
                u16::from_be_bytes([h[0], h[1]]),
                u16::from_be_bytes([h[2], h[3]]),
            );
            let doff = usize::from(h[12] >> 4) * 4;
            let win = u16::from_be_bytes([h[14], h[15]]);
            v.set_tcp(k, h[13], win, left.saturating_sub(doff) as u16);
            if needs.tcp_options && doff > 20 && doff <= left {
                if let Ok(h) = crate::hdr::hdr(a, m, off, doff) {
                    v.set_tcp_options(k, tcp_options(&h[20..]));
                }
            }
        }
        17 if left >= 4 => {
            if let Ok(h) = crate::hdr::hdr(a, m, off, 4) {
                let h = crate::hdr::fixed::<4>(h);
                v.set_ports(
                    k,
                    u16::from_be_bytes([h[0], h[1]]),
                    u16::from_be_bytes([h[2], h[3]]),
                );
            }
        }
        1 | 58 if left >= 1 => {
            let Ok(h) = crate::hdr::hdr(a, m, off, left.min(8)) else {
                return;
            };
            let t = h[0];
            v.set_icmp_type(k, t);
            match fw::state::icmp_kind(proto, t) {
                Some(fw::state::IcmpKind::Query { .. }) if h.len() >= 8 => {
                    v.set_icmp_id(k, u16::from_be_bytes([h[4], h[5]]));
                }
                Some(fw::state::IcmpKind::Error) if h.len() >= 8 => {
                    if let Some(q) = quoted(a, m, off + 8, proto) {
                        v.set_icmp_quote(k, q);
                    }
                }
                _ => {}
            }
        }
        _ => {}
    }
}

/// The flow of the packet an ICMP (`proto` 1) or ICMPv6 (58) error quotes at
/// `off`: its IP header (of the error's family; IPv6 without extension headers)
/// and the first 8 bytes past it, which RFC 792 and RFC 4443 §2.4 require an
/// error to carry — ports, or a quoted ICMP message's type and identifier. `None`
/// if the quote is cut short, a later fragment, or itself an ICMP error.
fn quoted(
    a: crate::hdr::HdrAccess,
    m: &mut Mbuf,
    off: usize,
    proto: u8,
) -> Option<fw::state::FlowId> {
    let (src, dst, qproto, at) = if proto == 1 {
        let h = crate::hdr::fixed::<20>(crate::hdr::hdr(a, m, off, 20).ok()?);
        let hlen = usize::from(h[0] & 0x0f) * 4;
        if h[0] >> 4 != 4 || hlen < 20 || u16::from_be_bytes([h[6], h[7]]) & 0x1fff != 0 {
            return None;
        }
        let src = IpAddr::from([h[12], h[13], h[14], h[15]]);
        let dst = IpAddr::from([h[16], h[17], h[18], h[19]]);
        (src, dst, h[9], off + hlen)
    } else {
        let h = crate::hdr::fixed::<40>(crate::hdr::hdr(a, m, off, 40).ok()?);
        if h[0] >> 4 != 6 {
            return None;
        }
        let mut s = [0u8; 16];
        let mut d = [0u8; 16];
        s.copy_from_slice(&h[8..24]);
        d.copy_from_slice(&h[24..40]);
        (IpAddr::from(s), IpAddr::from(d), h[6], off + 40)
    };
    let flow = |sport, dport| fw::state::FlowId {
        proto: qproto,
        src,
        dst,
        sport,
        dport,
    };
    match qproto {
        6 | 17 | 132 | 136 => {
            let h = crate::hdr::fixed::<4>(crate::hdr::hdr(a, m, at, 4).ok()?);
            Some(flow(
                u16::from_be_bytes([h[0], h[1]]),
                u16::from_be_bytes([h[2], h[3]]),
            ))
        }
        1 | 58 => {
            let h = crate::hdr::fixed::<8>(crate::hdr::hdr(a, m, at, 8).ok()?);
            let id = u16::from_be_bytes([h[4], h[5]]);
            fw::state::FlowId::icmp(src, dst, qproto, h[0], id).map(|(f, _)| f)
        }
        _ => Some(flow(0, 0)),
    }
}

/// The common IPv4 packet, described straight from its first buffer: a 20-byte
/// header (no options), not a fragment, a length field that is the length, and
/// the upper-layer bytes the rules read already in that buffer (a TCP header
/// whole, UDP's ports, ICMP's first 8 bytes: its type and a query's identifier;
/// not an ICMP error). `None` for anything else, which [`inet`]
/// describes the general way; what this writes is what `inet` would.
#[inline(always)]
pub(super) fn inet_fast(m: &Mbuf, v: &mut fw::PacketVec, needs: fw::Needs) -> Option<usize> {
    let b = m.first();
    let h = b.first_chunk::<24>()?;
    let (proto, field) = (h[9], u16::from_be_bytes([h[2], h[3]]));
    // ICMP: the type and a query's identifier (an error goes the general way,
    // which reads the packet it quotes).
    let up = match proto {
        6 => 20,
        17 => 4,
        1 => 8,
        _ => 0,
    };
    if h[0] != 0x45
        || (proto == 1
            && matches!(
                fw::state::icmp_kind(1, h[20]),
                Some(fw::state::IcmpKind::Error)
            ))
        || u16::from_be_bytes([h[6], h[7]]) & 0x1fff != 0
        || field < 20 + up
        || b.len() < 20 + usize::from(up)
        || (proto == 6 && needs.tcp_options)
    {
        return None;
    }
    let src = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
    let dst = u32::from_be_bytes([h[16], h[17], h[18], h[19]]);
    let len = m.len() as u32;
    let k = v.push_new4(src, dst, proto, len);
    v.set_ip(k, field, h[8], h[1]);
    match proto {
        6 => {
            let t = crate::hdr::fixed::<20>(&b[20..]);
            v.set_ports(
                k,
                u16::from_be_bytes([t[0], t[1]]),
                u16::from_be_bytes([t[2], t[3]]),
            );
            let doff = usize::from(t[12] >> 4) * 4;
            let win = u16::from_be_bytes([t[14], t[15]]);
            let left = m.len().saturating_sub(20);
            v.set_tcp(k, t[13], win, left.saturating_sub(doff) as u16);
        }
        17 => v.set_ports(
            k,
            u16::from_be_bytes([h[20], h[21]]),
            u16::from_be_bytes([h[22], h[23]]),
        ),
        1 => {
            v.set_icmp_type(k, h[20]);
            if let Some(fw::state::IcmpKind::Query { .. }) = fw::state::icmp_kind(1, h[20]) {
                v.set_icmp_id(k, u16::from_be_bytes([b[24], b[25]]));
            }
        }
        _ => {}
    }
    Some(k)
}

/// An IPv4 packet at `off`, of `len` bytes in all, appended to `v`: its index.
pub(super) fn inet(
    a: crate::hdr::HdrAccess,
    m: &mut Mbuf,
    off: usize,
    len: u32,
    v: &mut fw::PacketVec,
    needs: fw::Needs,
) -> Option<usize> {
    let h = crate::hdr::fixed::<20>(crate::hdr::hdr(a, m, off, 20).ok()?);
    let hlen = usize::from(h[0] & 0x0f) * 4;
    let src = IpAddr::from([h[12], h[13], h[14], h[15]]);
    let dst = IpAddr::from([h[16], h[17], h[18], h[19]]);
    let (proto, tos, ttl) = (h[9], h[1], h[8]);
    let field = u16::from_be_bytes([h[2], h[3]]);
    let frag = u16::from_be_bytes([h[6], h[7]]) & 0x1fff != 0;
    let k = v.push_new(src, dst, proto, len);
    // A large segment's length (Total Length 0) reads as the largest there is.
    let ip_len = u16::try_from(crate::hdr::length_field(field, m, off)).unwrap_or(u16::MAX);
    v.set_ip(k, ip_len, ttl, tos);
    if frag {
        v.set_frag(k);
    } else {
        upper(a, m, off + hlen, proto, v, k, needs);
    }
    Some(k)
}

/// An IPv6 packet at `off`, of `len` bytes in all, appended to `v`: its index.
pub(super) fn inet6(
    a: crate::hdr::HdrAccess,
    m: &mut Mbuf,
    off: usize,
    len: u32,
    v: &mut fw::PacketVec,
    needs: fw::Needs,
) -> Option<usize> {
    let h = crate::hdr::fixed::<40>(crate::hdr::hdr(a, m, off, 40).ok()?);
    let mut s = [0u8; 16];
    let mut d = [0u8; 16];
    s.copy_from_slice(&h[8..24]);
    d.copy_from_slice(&h[24..40]);
    let field = u16::from_be_bytes([h[4], h[5]]);
    let tos = (h[0] << 4) | (h[1] >> 4);
    let (mut proto, ttl) = (h[6], h[7]);
    let plen = crate::hdr::length_field(field, m, off + 40);
    let ip_len = u16::try_from(40 + plen).unwrap_or(u16::MAX);
    // Past the extension headers to the upper layer, as ipfw's ipv6 walk does: the
    // rules' protocol is the upper layer's, and a fragment other than the first is
    // `frag` and has no ports. ESP, No Next Header and unknown headers end the walk
    // (their number is the protocol); so does a header cut short.
    let mut at = off + 40;
    let mut frag = false;
    let mut upper_at = None;
    'walk: {
        for _ in 0..MAX_EXT_HEADERS {
            let elen = match proto {
                // Hop-by-hop, routing, destination options: 8-byte units past the first 8.
                0 | 43 | 60 => {
                    let Ok(e) = crate::hdr::hdr(a, m, at, 2) else {
                        break 'walk;
                    };
                    proto = e[0];
                    (usize::from(e[1]) + 1) * 8
                }
                44 => {
                    let Ok(e) = crate::hdr::hdr(a, m, at, 8) else {
                        break 'walk;
                    };
                    proto = e[0];
                    if u16::from_be_bytes([e[2], e[3]]) & 0xfff8 != 0 {
                        frag = true;
                        break 'walk;
                    }
                    8
                }
                // Authentication header: 4-byte units past the first 8 (RFC 4302).
                51 => {
                    let Ok(e) = crate::hdr::hdr(a, m, at, 2) else {
                        break 'walk;
                    };
                    proto = e[0];
                    (usize::from(e[1]) + 2) * 4
                }
                _ => break,
            };
            at += elen;
        }
        upper_at = Some(at);
    }
    let k = v.push_new(IpAddr::from(s), IpAddr::from(d), proto, len);
    v.set_ip(k, ip_len, ttl, tos);
    if frag {
        v.set_frag(k);
    }
    if let Some(at) = upper_at {
        upper(a, m, at, proto, v, k, needs);
    }
    Some(k)
}

/// Extension headers walked before giving up on the upper layer (a packet can
/// chain them without limit; a real one has a few).
const MAX_EXT_HEADERS: usize = 8;

/// Describes the packet in `m` into the next entry of `v` (its index; `None` if
/// it has no header to read): an IPv4 or IPv6 packet at the IP points, a whole
/// Ethernet frame at the layer-2 point; `ifindex` and `rcvif` as in
/// [`crate::pfil::PfilItems::ifs`], named from `ifrefs` (the worker's table). What the
/// program never reads (`needs`) is left out: TCP options, interfaces, the MAC
/// header, tags.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(super) fn describe(
    m: &mut Mbuf,
    point: PfilPoint,
    dir: Dir,
    ifindex: IfIndex,
    rcvif: Option<IfIndex>,
    ifrefs: &[IfRef],
    needs: fw::Needs,
    v: &mut fw::PacketVec,
) -> Option<usize> {
    let a = crate::hdr::HdrAccess::Pulldown;
    let len = m.len() as u32;
    let k = match point {
        PfilPoint::Inet => match inet_fast(m, v, needs) {
            Some(k) => k,
            None => inet(a, m, 0, len, v, needs)?,
        },
        PfilPoint::Inet6 => inet6(a, m, 0, len, v, needs)?,
        // The layer-2 pass: the Ethernet header, and the IP packet inside if any.
        PfilPoint::Ether => {
            let h = crate::hdr::fixed::<14>(crate::hdr::hdr(a, m, 0, 14).ok()?);
            let mut mac = fw::MacHdr::default();
            mac.dst.copy_from_slice(&h[0..6]);
            mac.src.copy_from_slice(&h[6..12]);
            mac.ethertype = u16::from_be_bytes([h[12], h[13]]);
            let inner = match mac.ethertype {
                0x0800 => inet(a, m, 14, len, v, needs),
                0x86dd => inet6(a, m, 14, len, v, needs),
                _ => None,
            };
            let unspec = IpAddr::from([0, 0, 0, 0]);
            let k = inner.unwrap_or_else(|| v.push_new(unspec, unspec, 0, len));
            if needs.mac {
                v.set_mac(k, mac);
            }
            v.set_layer2(k);
            k
        }
    };
    if dir == Dir::Out {
        v.set_dir(k, Direction::Out);
    }
    if needs.interfaces {
        let iface = |i: IfIndex| ifrefs.get(i.get()).copied();
        // A forwarded packet going out has both: `out recv X xmit Y` matches it.
        let xmitif = if dir == Dir::Out {
            iface(ifindex)
        } else {
            None
        };
        v.set_ifaces(k, rcvif.and_then(iface), xmitif);
    }
    if needs.tags {
        v.set_tags(k, tags_of(m.hdr.tag));
    }
    Some(k)
}
