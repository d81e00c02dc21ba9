//! Software segmentation (Linux's GSO; what a NIC's TSO does in hardware): a TCP
//! segment longer than the link's MTU, marked with the size of the segments it
//! stands for (`PktHdr::tso_segsz`: a TSO segment of ours, or a GSO packet the
//! kernel handed us whole through a TAP with the virtio-net header), cut into
//! ordinary segments for a link that cannot take it whole. A router forwards such a
//! packet this way rather than fragmenting it or, with Don't Fragment set, refusing
//! it with "fragmentation needed" for a size its sender never put on any wire.
//!
//! Each segment gets a copy of the IP and TCP headers, fixed up as RFC 9293 and the
//! NIC conventions have it (Linux's `tcp_gso_segment`): sequence number advanced by
//! the data before it; FIN and PSH on the last segment only, CWR on the first only;
//! IPv4 total length, identification (one more per segment) and header checksum; or
//! IPv6 payload length; and a full TCP checksum. The data are shared with the
//! original packet's buffers (`Mbuf::copym`), not copied.

use mbuf::Mbuf;
use std::net::IpAddr;
use wire::{IpProtocol, Ipv4Packet, Ipv6Packet, TcpPacket};

/// Why a packet could not be cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GsoError {
    /// Not an unfragmented TCP packet over IPv4, or over IPv6 without extension
    /// headers, with consistent lengths.
    NotTcp,
    /// No segment size, or no room for data in the MTU.
    NoSize,
    /// The packet pool had no buffer for a header.
    NoBufs,
}

/// Cuts `m` (starting with its IPv4 or IPv6 header) into TCP segments of at most
/// `m.hdr.tso_segsz` data bytes that fit in `mtu`, appended to `out` in order.
/// On error nothing is appended.
pub fn tcp_segment(m: &Mbuf, mtu: usize, out: &mut Vec<Mbuf>) -> Result<(), GsoError> {
    let mut h = [0u8; 40 + 60];
    let got = m.len().min(h.len());
    m.copydata(0, &mut h[..got]).map_err(|_| GsoError::NotTcp)?;
    // Views of the whole (zero-padded) buffer, so that no field read is out of
    // bounds; what the packet really holds (`got`) is checked below.
    let (l3, src, dst, id) = match h[0] >> 4 {
        4 => {
            let ip = Ipv4Packet::new_unchecked(&h[..]);
            let hl = usize::from(ip.header_len());
            if hl < 20
                || ip.next_header() != IpProtocol::Tcp
                || ip.is_fragment()
                || crate::hdr::length_field(ip.total_len(), m, 0) != m.len()
            {
                return Err(GsoError::NotTcp);
            }
            let (s, d) = (ip.src_addr(), ip.dst_addr());
            (hl, IpAddr::V4(s), IpAddr::V4(d), ip.ident())
        }
        6 => {
            let ip = Ipv6Packet::new_unchecked(&h[..]);
            if ip.next_header() != IpProtocol::Tcp
                || 40 + crate::hdr::length_field(ip.payload_len(), m, 40) != m.len()
            {
                return Err(GsoError::NotTcp);
            }
            (40, IpAddr::V6(ip.src_addr()), IpAddr::V6(ip.dst_addr()), 0)
        }
        _ => return Err(GsoError::NotTcp),
    };
    if got < l3 + 20 {
        return Err(GsoError::NotTcp);
    }
    let doff = usize::from(TcpPacket::new_unchecked(&h[l3..]).header_len());
    let hlen = l3 + doff;
    if doff < 20 || hlen > got {
        return Err(GsoError::NotTcp);
    }
    let segsz = usize::from(m.hdr.tso_segsz).min(mtu.saturating_sub(hlen));
    if segsz == 0 {
        return Err(GsoError::NoSize);
    }
    let data = m.len() - hlen;
    let seq = TcpPacket::new_unchecked(&h[l3..]).seq_number();
    let flags = h[l3 + 13];
    // Every segment's headers are the original's with a few fields changed: the
    // template has them zero, and both checksums are its sums plus those fields'
    // values (RFC 1624's arithmetic), so no header is read back right after it
    // was written (a load from the stores just made waits for them: the IPv4
    // header's sum over its fresh fields was 3% of the mpstack-polled row).
    let mut tmpl = [0u8; 40 + 60];
    tmpl[..hlen].copy_from_slice(&h[..hlen]);
    if l3 == 20 {
        tmpl[2..6].fill(0); // total length, identification
        tmpl[10..12].fill(0); // header checksum
    } else {
        tmpl[4..6].fill(0); // payload length
    }
    let t = l3;
    tmpl[t + 4..t + 8].fill(0); // sequence number
    tmpl[t + 13] = 0; // flags
    tmpl[t + 16..t + 18].fill(0); // checksum
    let ip_sum = wire::checksum::data(&tmpl[..l3]);
    let tcp_sum = wire::checksum::data(&tmpl[l3..hlen]);
    let pseudo =
        |n: usize| wire::checksum::pseudo_header(&src, &dst, IpProtocol::Tcp, (doff + n) as u32);
    let full = pseudo(segsz);
    let first = out.len();
    let mut off = 0;
    let mut k: u16 = 0;
    while off < data || (data == 0 && k == 0) {
        let n = segsz.min(data - off);
        let last = off + n == data;
        let mut f = flags;
        if !last {
            f &= !(0x01 | 0x08); // FIN, PSH
        }
        if k > 0 {
            f &= !0x80; // CWR
        }
        let sq = (seq + off).0;
        let sum = wire::checksum::combine(&[
            if n == segsz { full } else { pseudo(n) },
            tcp_sum,
            (sq >> 16) as u16,
            sq as u16,
            u16::from(f),
            crate::hdr::mbuf_sum(m, hlen + off, n),
        ]);
        // The headers in a small buffer of their own, the data shared (no packet
        // made and dropped between, as `copym` and `cat` would).
        let seg = Mbuf::with_headers(&tmpl[..hlen]).and_then(|mut p| {
            let b = p.try_first_mut()?;
            if l3 == 40 {
                b[4..6].copy_from_slice(&((doff + n) as u16).to_be_bytes());
            } else {
                let (len, id) = ((hlen + n) as u16, id.wrapping_add(k));
                b[2..4].copy_from_slice(&len.to_be_bytes());
                b[4..6].copy_from_slice(&id.to_be_bytes());
                let c = !wire::checksum::combine(&[ip_sum, len, id]);
                b[10..12].copy_from_slice(&c.to_be_bytes());
            }
            b[t + 4..t + 8].copy_from_slice(&sq.to_be_bytes());
            b[t + 13] = f;
            b[t + 16..t + 18].copy_from_slice(&(!sum).to_be_bytes());
            p.append_shared(m, hlen + off, n)?;
            Ok(p)
        });
        let Ok(mut p) = seg else {
            out.truncate(first);
            return Err(GsoError::NoBufs);
        };
        p.hdr = m.hdr;
        p.hdr.csum_flags &= !mbuf::CSUM_L4_NEEDED;
        p.hdr.tso_segsz = 0;
        out.push(p);
        off += n;
        k = k.wrapping_add(1);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::{Ipv4Packet, Ipv6Packet, TcpPacket};

    /// An IPv4 or IPv6 TCP packet with `data` and the given flags, its checksum
    /// left as a TSO segment of ours leaves it (the pseudo-header sum).
    fn tcp_pkt(v6: bool, data: &[u8], flags: u8, segsz: u16) -> Mbuf {
        let doff = 32; // with a timestamp option's worth of room
        let mut t = vec![0u8; doff];
        t[0..2].copy_from_slice(&40000u16.to_be_bytes());
        t[2..4].copy_from_slice(&80u16.to_be_bytes());
        t[4..8].copy_from_slice(&0xffff_ff00u32.to_be_bytes()); // wraps
        t[8..12].copy_from_slice(&7u32.to_be_bytes());
        t[12] = (doff as u8 / 4) << 4;
        t[13] = flags;
        t[14..16].copy_from_slice(&512u16.to_be_bytes());
        t[20..32].copy_from_slice(&[1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 3]);
        let mut ip = if v6 {
            let mut h = vec![0u8; 40];
            h[0] = 0x60;
            // Past 65,535: 0, as a large segment (BIG TCP) has it.
            let plen = u16::try_from(doff + data.len()).unwrap_or(0);
            h[4..6].copy_from_slice(&plen.to_be_bytes());
            h[6] = 6;
            h[7] = 64;
            h[8..10].copy_from_slice(&[0x20, 0x01]);
            h[10..12].copy_from_slice(&[0, 2]);
            h[23] = 1;
            h[24..26].copy_from_slice(&[0x20, 0x01]);
            h[26..28].copy_from_slice(&[0, 2]);
            h[39] = 2;
            h
        } else {
            let mut h = vec![0u8; 20];
            h[0] = 0x45;
            let total = u16::try_from(20 + doff + data.len()).unwrap_or(0);
            h[2..4].copy_from_slice(&total.to_be_bytes());
            h[4..6].copy_from_slice(&0xfffeu16.to_be_bytes());
            h[6] = 0x40; // DF
            h[8] = 64;
            h[9] = 6;
            h[12..16].copy_from_slice(&[198, 18, 0, 1]);
            h[16..20].copy_from_slice(&[198, 18, 0, 2]);
            h
        };
        ip.extend_from_slice(&t);
        // The data in a buffer of its own, as a segment sharing the send buffer has it.
        let mut m = Mbuf::from_slice(&ip).unwrap();
        m.cat(Mbuf::from_slice(data).unwrap());
        m.hdr.tso_segsz = segsz;
        m.hdr.csum_flags = mbuf::CSUM_L4_NEEDED;
        m
    }

    fn check(v6: bool, n: u32) {
        let data: Vec<u8> = (0..n).map(|i| (i * 7 + i / 251) as u8).collect();
        // FIN, PSH, ACK and CWR on the original.
        let m = tcp_pkt(v6, &data, 0x01 | 0x08 | 0x10 | 0x80, 1448);
        let mut out = Vec::new();
        tcp_segment(&m, 1500, &mut out).unwrap();
        // 1448 bytes a segment, or what the MTU leaves beside IPv6's larger header.
        let segsz = 1448.min(1500 - if v6 { 40 + 32 } else { 20 + 32 });
        assert_eq!(out.len(), data.len().div_ceil(segsz));
        let mut got = Vec::new();
        for (k, p) in out.iter().enumerate() {
            let bytes = p.to_vec();
            assert!(bytes.len() <= 1500);
            let (src, dst, tcp) = if v6 {
                let ip = Ipv6Packet::new_checked(&bytes[..]).unwrap();
                assert_eq!(usize::from(ip.payload_len()) + 40, bytes.len());
                (
                    IpAddr::V6(ip.src_addr()),
                    IpAddr::V6(ip.dst_addr()),
                    bytes[40..].to_vec(),
                )
            } else {
                let ip = Ipv4Packet::new_checked(&bytes[..]).unwrap();
                assert!(ip.verify_checksum(), "segment {k}: IPv4 header checksum");
                assert_eq!(usize::from(ip.total_len()), bytes.len());
                assert_eq!(ip.ident(), 0xfffeu16.wrapping_add(k as u16));
                assert!(ip.dont_frag());
                (
                    IpAddr::V4(ip.src_addr()),
                    IpAddr::V4(ip.dst_addr()),
                    bytes[20..].to_vec(),
                )
            };
            let t = TcpPacket::new_checked(&tcp[..]).unwrap();
            assert!(t.verify_checksum(&src, &dst), "segment {k}: TCP checksum");
            assert_eq!(
                t.seq_number().0,
                0xffff_ff00u32.wrapping_add((k * segsz) as u32)
            );
            let last = k + 1 == out.len();
            assert_eq!(t.fin(), last, "segment {k}");
            assert_eq!(t.psh(), last, "segment {k}");
            assert_eq!(t.cwr(), k == 0, "segment {k}");
            assert!(t.ack());
            assert_eq!(t.options(), &[1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 3]);
            assert_eq!(p.hdr.tso_segsz, 0);
            assert_eq!(p.hdr.csum_flags & mbuf::CSUM_L4_NEEDED, 0);
            got.extend_from_slice(t.payload());
        }
        assert_eq!(got, data, "the data, in order");
        // A smaller MTU than the segment size wins.
        out.clear();
        tcp_segment(&m, 1000, &mut out).unwrap();
        assert!(out.iter().all(|p| p.len() <= 1000));
    }

    #[test]
    fn cuts_ipv4_and_ipv6_segments_with_headers_fixed_up() {
        check(false, 10_000);
        check(true, 10_000);
    }

    #[test]
    fn cuts_segments_past_64_kib_whose_length_field_is_0() {
        check(false, 200_000);
        check(true, 200_000);
        // Length 0 in a packet that is not past 64 KiB, or not a large segment, is
        // a length that disagrees with the packet.
        let mut out = Vec::new();
        for v6 in [false, true] {
            let mut m = tcp_pkt(v6, &[5u8; 3000], 0x10, 1448);
            m.copyback(if v6 { 4 } else { 2 }, &[0, 0]).unwrap();
            assert_eq!(tcp_segment(&m, 1500, &mut out), Err(GsoError::NotTcp));
            let mut m = tcp_pkt(v6, &[5u8; 100_000], 0x10, 1448);
            m.hdr.tso_segsz = 0;
            assert_eq!(tcp_segment(&m, 1500, &mut out), Err(GsoError::NotTcp));
        }
        assert!(out.is_empty());
    }

    #[test]
    fn refuses_what_it_cannot_cut() {
        let data = [5u8; 3000];
        let mut out = Vec::new();
        // No segment size.
        let m = tcp_pkt(false, &data, 0x10, 0);
        assert_eq!(tcp_segment(&m, 1500, &mut out), Err(GsoError::NoSize));
        // Not TCP.
        let mut m = tcp_pkt(false, &data, 0x10, 1448);
        m.copyback(9, &[17]).unwrap();
        assert_eq!(tcp_segment(&m, 1500, &mut out), Err(GsoError::NotTcp));
        // A length that disagrees with the packet.
        let mut m = tcp_pkt(false, &data, 0x10, 1448);
        m.truncate(m.len() - 1);
        assert_eq!(tcp_segment(&m, 1500, &mut out), Err(GsoError::NotTcp));
        // A fragment.
        let mut m = tcp_pkt(false, &data, 0x10, 1448);
        m.copyback(6, &[0x20, 0]).unwrap();
        assert_eq!(tcp_segment(&m, 1500, &mut out), Err(GsoError::NotTcp));
        // Too short for its headers.
        let m = Mbuf::from_slice(&[0x45, 0, 0, 10, 0, 0, 0, 0, 64, 6]).unwrap();
        assert_eq!(tcp_segment(&m, 1500, &mut out), Err(GsoError::NotTcp));
        assert!(out.is_empty());
    }
}
