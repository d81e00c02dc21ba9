//! IPv6 reassembly (`frag6_input`, RFC 8200 §4.5): the checks RFC 8200 asks of each
//! fragment, the atomic fragments of RFC 6946, and the removal of the Fragment header
//! from the reassembled packet. The table itself (queueing, overlaps, bounds,
//! time-outs) is the parent module's, shared with IPv4.
//!
//! What it may call: `mbuf`, `wire`, the counters, the parent's table.

use super::{
    why, Cause, Entry, First, FragIn, Key, Reass, FRAG6_LEN, IP6_HDR_LEN, IP_MAXPACKET, V6,
};
use crate::stats::Stats;
use dev::Instant;
use mbuf::Mbuf;
use wire::{AhHeader, IpProtocol, Ipv6ExtHeader, Ipv6FragHeader, Ipv6Packet};

/// Where the caller found an IPv6 Fragment header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frag6Pos {
    /// Offset of the Fragment header: the IPv6 header and the unfragmentable extension
    /// headers before it (40 when it follows the IPv6 header).
    pub hdr_off: usize,
    /// Offset of the Next Header byte that holds 44 (Fragment): 6 when the Fragment
    /// header follows the IPv6 header, else byte 0 of the extension header before it.
    pub nxt_off: usize,
}

impl Frag6Pos {
    /// A Fragment header right after the IPv6 header.
    pub const DIRECT: Frag6Pos = Frag6Pos {
        hdr_off: IP6_HDR_LEN,
        nxt_off: 6,
    };
}

/// What [`Reass::input6`] did with a fragment.
#[derive(Debug)]
#[must_use]
pub enum Frag6 {
    /// A whole packet (an atomic fragment, or the fragment that completed a datagram):
    /// the Fragment header removed, the Next Header byte that named it and the Payload
    /// Length patched. The chain walk goes on at `off` with `next`.
    Done {
        m: Mbuf,
        off: usize,
        next: IpProtocol,
    },
    /// Queued, or dropped and counted: nothing for the caller to do.
    Consumed,
    /// RFC 8200 §4.5: the fragment was discarded (and counted); send an ICMPv6 Parameter
    /// Problem with `code` and `pointer` about `m`, the fragment as received.
    ParamProblem { m: Mbuf, code: u8, pointer: u32 },
}

/// RFC 8200 §4.5: "If the first fragment does not include all headers through an
/// Upper-Layer header, then that fragment should be discarded and an ICMP Parameter
/// Problem, Code 3, message should be sent" (RFC 7112 §5). True if the first fragment
/// `m`, whose Fragment header is at `hdr_off`, holds the whole chain after it and the
/// fixed part of the upper-layer header (TCP 20 bytes, UDP 8, ICMPv6 4, ESP 8; nothing
/// for No Next Header or a protocol whose layout we do not know).
pub fn first_fragment_has_header_chain(m: &mut Mbuf, hdr_off: usize) -> bool {
    let Ok(h) = m.pulldown(hdr_off, FRAG6_LEN) else {
        return false;
    };
    let mut proto = Ipv6FragHeader::new_unchecked(&h[..]).next_header();
    let mut off = hdr_off + FRAG6_LEN;
    // Each header is at least 8 bytes, so the walk ends within the packet.
    while wire::ipv6ext::is_ext_header(proto) {
        let Ok(b) = m.pulldown(off, 2) else {
            return false;
        };
        let len = match proto {
            IpProtocol::Ipv6Frag => FRAG6_LEN,
            IpProtocol::Ah => AhHeader::new_unchecked(&b[..]).header_len(),
            _ => Ipv6ExtHeader::new_unchecked(&b[..]).header_len(),
        };
        proto = Ipv6ExtHeader::new_unchecked(&b[..]).next_header();
        off += len;
        if off > m.len() {
            return false;
        }
    }
    let need = match proto {
        IpProtocol::Tcp => 20,
        IpProtocol::Udp | IpProtocol::Esp => 8,
        IpProtocol::Icmpv6 => 4,
        _ => 0,
    };
    off + need <= m.len()
}

impl Reass {
    /// `frag6_input`: one IPv6 packet with a Fragment header at `pos`, trimmed to
    /// `40 + Payload Length`. See the module documentation for the caller's side.
    pub fn input6(&mut self, now: Instant, mut m: Mbuf, pos: Frag6Pos, stats: &mut Stats) -> Frag6 {
        stats.ip6.fragments += 1;
        let discard = |stats: &mut Stats, c: Cause| {
            why(V6, c).count(stats);
            Frag6::Consumed
        };
        // The caller's layout, checked: nothing here trusts a length it did not see.
        if pos.hdr_off < IP6_HDR_LEN
            || pos.nxt_off >= pos.hdr_off
            || pos.hdr_off + FRAG6_LEN > m.len()
            || m.pulldown(pos.nxt_off, 1).map(|b| b[0]) != Ok(u8::from(IpProtocol::Ipv6Frag))
        {
            return discard(stats, Cause::Bad);
        }
        let Ok(h) = m.pulldown(0, IP6_HDR_LEN) else {
            return discard(stats, Cause::Bad);
        };
        let p = Ipv6Packet::new_unchecked(&h[..]);
        let (src, dst) = (p.src_addr(), p.dst_addr());
        let Ok(h) = m.pulldown(pos.hdr_off, FRAG6_LEN) else {
            return discard(stats, Cause::Bad);
        };
        let fh = Ipv6FragHeader::new_unchecked(&h[..]);
        let (next, off, more, id) = (
            fh.next_header(),
            usize::from(fh.frag_offset()),
            fh.more_frags(),
            fh.ident(),
        );
        let data_off = pos.hdr_off + FRAG6_LEN;
        let len = m.len() - data_off;
        if off == 0 && !more {
            // RFC 6946 §4: "A host that receives an IPv6 packet that includes a Fragment
            // Header with the "Fragment Offset" equal to 0 and the "M" flag equal to 0
            // MUST process such packet in isolation from any other packets/fragments,
            // even if such packets/fragments contain the same set {IPv6 Source Address,
            // IPv6 Destination Address, Fragment Identification}."
            stats.ip6.atomicfrags += 1;
            let first = First {
                data_off,
                pos,
                next,
            };
            let plen = m.len() - IP6_HDR_LEN - FRAG6_LEN;
            return match strip6(m, first, plen) {
                Some(m) => Frag6::Done {
                    m,
                    off: pos.hdr_off,
                    next,
                },
                None => discard(stats, Cause::Dropped),
            };
        }
        // RFC 8200 §4.5: "If the length of a fragment, as derived from the fragment
        // packet's Payload Length field, is not a multiple of 8 octets and the M flag
        // of that fragment is 1, then that fragment must be discarded and an ICMP
        // Parameter Problem, Code 0, message should be sent to the source of the
        // fragment, pointing to the Payload Length field of the fragment packet."
        if more && !len.is_multiple_of(8) {
            why(V6, Cause::Bad).count(stats);
            return Frag6::ParamProblem {
                m,
                code: 0,
                pointer: 4,
            };
        }
        if len == 0 {
            return discard(stats, Cause::Bad);
        }
        // RFC 8200 §4.5: "If the length and offset of a fragment are such that the
        // Payload Length of the packet reassembled from that fragment would exceed
        // 65,535 octets, then that fragment must be discarded and an ICMP Parameter
        // Problem, Code 0, message should be sent to the source of the fragment,
        // pointing to the Fragment Offset field of the fragment packet."
        if pos.hdr_off - IP6_HDR_LEN + off + len > IP_MAXPACKET {
            why(V6, Cause::TooLong).count(stats);
            return Frag6::ParamProblem {
                m,
                code: 0,
                pointer: (pos.hdr_off + 2) as u32,
            };
        }
        let first = if off == 0 {
            // RFC 8200 §4.5 (RFC 7112): the first fragment carries the whole chain.
            if !first_fragment_has_header_chain(&mut m, pos.hdr_off) {
                why(V6, Cause::Tiny).count(stats);
                return Frag6::ParamProblem {
                    m,
                    code: 3,
                    pointer: 0,
                };
            }
            Some(First {
                data_off,
                pos,
                next,
            })
        } else {
            m.adj(data_off as isize);
            None
        };
        let f = FragIn {
            off: off as u32,
            end: (off + len) as u32,
            more,
            m,
            first,
        };
        let key = Key::V6 { src, dst, id };
        let out = match self.insert(now, key, f, stats) {
            Some(e) => self.assemble6(e, stats),
            None => Frag6::Consumed,
        };
        self.gauges(stats);
        out
    }

    fn assemble6(&mut self, e: Entry, stats: &mut Stats) -> Frag6 {
        let n = e.frags.len() as u64;
        let (Some(first), Some(total)) = (e.first, e.total) else {
            why(V6, Cause::Dropped).count_n(stats, n);
            return Frag6::Consumed;
        };
        // Only the first fragment's unfragmentable part counts (RFC 8200 §4.5), and it
        // may be longer than the one each fragment was checked with.
        let plen = first.pos.hdr_off - IP6_HDR_LEN + total as usize;
        if plen > IP_MAXPACKET {
            why(V6, Cause::TooLong).count_n(stats, n);
            return Frag6::Consumed;
        }
        let mut frags = e.frags.into_iter();
        let Some(head) = frags.next() else {
            return Frag6::Consumed;
        };
        let Some(mut m) = strip6(head.m, first, plen) else {
            why(V6, Cause::Dropped).count_n(stats, n);
            return Frag6::Consumed;
        };
        for f in frags {
            m.cat(f.m);
        }
        stats.ip6.reassembled += 1;
        Frag6::Done {
            m,
            off: first.pos.hdr_off,
            next: first.next,
        }
    }
}

/// Removes the Fragment header from a first (or atomic) fragment: patches the Next
/// Header byte that named it and the Payload Length while the buffers are still the
/// packet's own, then cuts the 8 bytes out (split and cat: nothing else is copied).
pub(super) fn strip6(mut m: Mbuf, first: First, plen: usize) -> Option<Mbuf> {
    let Frag6Pos { hdr_off, nxt_off } = first.pos;
    m.pulldown(nxt_off, 1).ok()?[0] = first.next.into();
    let h = m.pulldown(0, IP6_HDR_LEN).ok()?;
    Ipv6Packet::new_unchecked(&mut h[..]).set_payload_len(plen as u16);
    let mut rest = m.split(hdr_off).ok()?;
    rest.adj(FRAG6_LEN as isize);
    m.cat(rest);
    Some(m)
}
