//! Software large receive offload (FreeBSD's `tcp_lro`, Linux's GRO): within one
//! receive burst, consecutive in-order TCP segments of one connection addressed to
//! this interface go up the stack as one packet, so that Ethernet, IP and TCP input
//! run once for several frames rather than once for each. The merged packet looks
//! like what a device with large receive offload hands over: the first frame's
//! headers with the lengths of the whole, the data of every frame after them (the
//! buffers themselves, not copied), `tso_segsz` set to the first frame's data
//! length, and the TCP checksum marked checked (each frame's was, here).
//!
//! What merges (Linux's `inet_gro_receive` and `tcp_gro_receive` rules):
//! - Only frames the device did not merge itself, from an interface without
//!   segmentation offload, to this interface's MAC address and to one of its own
//!   IP addresses: a router forwards frames as they came (FreeBSD advises LRO off
//!   on routers, since the merged packet must be cut again on the way out).
//! - IPv4 without options and not a fragment, or IPv6 with TCP as the next header;
//!   the IP header checksum and the TCP checksum correct; all headers in the
//!   frame's first buffer.
//! - TCP with ACK, and PSH at most: no SYN, FIN, RST, URG, ECE or CWR; data.
//! - The frame after the held one: the same link header; the same IP header but
//!   for lengths, identification and checksum; the same ports, acknowledgment,
//!   data offset, flags (but PSH), window and options (timestamps included); its
//!   sequence number where the held data ends; no more data than the first frame
//!   carried; the whole at most 65,535 bytes of IP and [`MAX_BUFS`] buffers.
//!
//! A PSH, or a frame shorter than the first, ends the packet after it. Anything
//! else passes on unchanged, after the held packet, so the order of frames is kept.
//!
//! What it owns: the held packet of one burst. What it may call: `mbuf` and
//! `wire`'s checksums; its caller delivers what it returns.

use mbuf::Mbuf;
use std::net::IpAddr;
use wire::{EtherType, EthernetFrame, IpProtocol, Ipv4Packet, Ipv6Packet, TcpPacket};

const ETH: usize = 14;
const TCP_ACK: u8 = 0x10;
const TCP_PSH: u8 = 0x08;
/// Longest header run kept for comparison: Ethernet, IPv6, TCP with options.
const HDR_MAX: usize = ETH + 40 + 60;

/// Most buffers in one merged packet: what TCP input takes without a copy (its
/// `PAYLOAD_PIECES` is this).
pub const MAX_BUFS: usize = 16;

/// What one frame is, when it may merge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Frame {
    v6: bool,
    /// Where TCP starts, and where its data starts.
    l4: usize,
    hlen: usize,
    /// End of the IP packet in the frame (Ethernet padding after it is dropped).
    end: usize,
    seq: u32,
    psh: bool,
    dst: IpAddr,
}

impl Frame {
    fn data_len(&self) -> usize {
        self.end - self.hlen
    }
}

/// The packet being built.
struct Held {
    m: Mbuf,
    f: Frame,
    /// The first frame's headers, to compare the next ones with.
    hdr: [u8; HDR_MAX],
    next_seq: u32,
    /// IP total length (IPv4) or payload length (IPv6) of the whole.
    ip_len: usize,
    frames: u32,
    psh: bool,
    /// A PSH or a short frame came: nothing more joins.
    closed: bool,
}

/// What merging did, for the caller's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LroStats {
    /// Frames that joined the packet before them (`tcp.lroqueued`).
    pub queued: u64,
    /// Merged packets handed on, each of two frames or more (`tcp.lroflushed`).
    pub flushed: u64,
}

/// The merging state of one receive burst of one interface.
#[derive(Default)]
pub struct Lro {
    held: Option<Held>,
    pub stats: LroStats,
}

/// Whether a received frame might merge at all (TCP over IPv4 or IPv6, by its
/// first bytes): the burst's cheap look, so a router's forwarded traffic, or UDP,
/// costs LRO two compares a frame and no parse.
#[inline]
pub fn candidate(m: &Mbuf) -> bool {
    let b = m.first();
    b.len() >= ETH + 40
        && match (b[12], b[13]) {
            (0x08, 0x00) => b[ETH + 9] == 6,
            (0x86, 0xdd) => b[ETH + 6] == 6,
            _ => false,
        }
}

/// The frame, if it may merge: its headers are in its first buffer and well formed,
/// it is TCP with data and no flag but ACK and PSH, and (unless the device says
/// so) both checksums are right. Nothing else is checked here: what does not merge
/// goes up the stack, whose input checks and counts everything.
fn parse(m: &Mbuf) -> Option<Frame> {
    if m.hdr.tso_segsz != 0 {
        return None;
    }
    let b = m.first();
    if b.len() < ETH + 20 + 20 {
        return None;
    }
    let (v6, l4, end, src, dst) = match EthernetFrame::new_unchecked(b).ethertype() {
        EtherType::Ipv4 => {
            let ip = Ipv4Packet::new_unchecked(&b[ETH..]);
            let total = usize::from(ip.total_len());
            if ip.version() != 4
                || ip.header_len() != 20
                || total < 40
                || ETH + total > m.len()
                || ip.is_fragment()
                || ip.next_header() != IpProtocol::Tcp
                || !ip.verify_checksum()
            {
                return None;
            }
            let (src, dst) = (ip.src_addr().into(), ip.dst_addr().into());
            (false, ETH + 20, ETH + total, src, dst)
        }
        EtherType::Ipv6 if b.len() >= ETH + 40 + 20 => {
            let ip = Ipv6Packet::new_unchecked(&b[ETH..]);
            let end = ETH + ip.total_len();
            if ip.version() != 6 || ip.next_header() != IpProtocol::Tcp || end > m.len() {
                return None;
            }
            let (src, dst) = (ip.src_addr().into(), ip.dst_addr().into());
            (true, ETH + 40, end, src, dst)
        }
        _ => return None,
    };
    let tcp = TcpPacket::new_unchecked(&b[l4..]);
    let hlen = l4 + usize::from(tcp.header_len());
    // The flags byte (NS, the ninth flag, is left to `continues`' comparison).
    let flags = tcp.flags().bits() as u8;
    if hlen < l4 + 20 || hlen > b.len() || hlen >= end || flags & !TCP_PSH != TCP_ACK {
        return None;
    }
    let checked = m.hdr.csum_flags & (mbuf::CSUM_L4_VALID | mbuf::CSUM_L4_NEEDED) != 0;
    if !checked {
        let len = end - l4;
        let sum = wire::checksum::combine(&[
            wire::checksum::pseudo_header(&src, &dst, IpProtocol::Tcp, len as u32),
            crate::hdr::mbuf_sum(m, l4, len),
        ]);
        if sum != !0 {
            return None;
        }
    }
    Some(Frame {
        v6,
        l4,
        hlen,
        end,
        seq: tcp.seq_number().0,
        psh: flags & TCP_PSH != 0,
        dst,
    })
}

/// Which header bytes must be the same in every frame of a merged packet (0xff)
/// and which may differ (0, or the bits that may): the link header; the IP
/// header but for lengths, identification and checksum; TCP's ports,
/// acknowledgment, data offset, flags but PSH, window and options (not the
/// sequence number, checksum or urgent pointer). For IPv4 without options
/// (`v6` false) or IPv6 (true), TCP at `ETH + 20` or `ETH + 40`.
const fn same_mask(v6: bool) -> [u8; HDR_MAX] {
    let mut m = [0xff; HDR_MAX];
    let l4 = if v6 {
        m[ETH + 4] = 0;
        m[ETH + 5] = 0;
        ETH + 40
    } else {
        let mut i = ETH + 2;
        while i < ETH + 6 {
            m[i] = 0;
            i += 1;
        }
        m[ETH + 10] = 0;
        m[ETH + 11] = 0;
        ETH + 20
    };
    let mut i = l4 + 4;
    while i < l4 + 8 {
        m[i] = 0;
        i += 1;
    }
    m[l4 + 13] = !TCP_PSH;
    let mut i = l4 + 16;
    while i < l4 + 20 {
        m[i] = 0;
        i += 1;
    }
    m
}

const SAME4: [u8; HDR_MAX] = same_mask(false);
const SAME6: [u8; HDR_MAX] = same_mask(true);

/// Whether `a` and `b` agree on their first `n` bytes (at most [`HDR_MAX`], within
/// both) wherever `mask` says they must: eight bytes a step, one branch at the end,
/// where a compare a field was a call to `memcmp` each (seven a frame).
#[inline]
fn same_under(a: &[u8], b: &[u8], mask: &[u8; HDR_MAX], n: usize) -> bool {
    let (a, b, mask) = (&a[..n], &b[..n], &mask[..n]);
    let word = |s: &[u8]| u64::from_ne_bytes(s.try_into().unwrap_or([0; 8]));
    let mut diff = 0u64;
    let (ca, cb, cm) = (a.chunks_exact(8), b.chunks_exact(8), mask.chunks_exact(8));
    let (ra, rb, rm) = (ca.remainder(), cb.remainder(), cm.remainder());
    for ((x, y), k) in ca.zip(cb).zip(cm) {
        diff |= (word(x) ^ word(y)) & word(k);
    }
    for ((x, y), k) in ra.iter().zip(rb).zip(rm) {
        diff |= u64::from((x ^ y) & k);
    }
    diff == 0
}

/// Whether the frame `m` (parsed: `f`) continues the held packet.
fn continues(h: &Held, f: &Frame, m: &Mbuf) -> bool {
    let (hf, hb, b) = (&h.f, &h.hdr, m.first());
    if h.closed
        || f.v6 != hf.v6
        || f.hlen != hf.hlen
        || f.seq != h.next_seq
        || f.data_len() > hf.data_len()
        || h.ip_len + f.data_len() > 65_535
    {
        return false;
    }
    let mask = if f.v6 { &SAME6 } else { &SAME4 };
    same_under(b, hb, mask, f.hlen)
        // Its data buffers join the held packet's (the first may continue the held
        // packet's last, in the same buffer, and join it: `Mbuf::cat`).
        && h.m.nsegs() + data_bufs(m, f.hlen, f.end) - usize::from(h.m.joins(m, f.hlen))
            <= MAX_BUFS
}

impl std::fmt::Debug for Lro {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lro")
            .field("held_frames", &self.held.as_ref().map_or(0, |h| h.frames))
            .field("stats", &self.stats)
            .finish()
    }
}

impl Lro {
    /// Takes one frame received by the interface whose MAC address is `mac` and
    /// whose own addresses `local` tells; hands to `out` what is ready, in order.
    pub fn input(
        &mut self,
        mac: [u8; 6],
        local: impl Fn(&IpAddr) -> bool,
        mut m: Mbuf,
        out: &mut impl FnMut(Mbuf),
    ) {
        let Some(f) = parse(&m) else {
            self.flush(out);
            return out(m);
        };
        if let Some(h) = &mut self.held {
            // Its link header and addresses are the held packet's (`continues`
            // compares them): to this interface, then.
            if continues(h, &f, &m) {
                // Its data join the held packet's by reference (the first buffer
                // joining the held packet's last when it continues it); the frame
                // and its headers go.
                if h.m.append_shared(&m, f.hlen, f.data_len()).is_err() {
                    self.flush(out);
                    return out(m);
                }
                drop(m);
                h.next_seq = f.seq.wrapping_add(f.data_len() as u32);
                h.ip_len += f.data_len();
                h.frames += 1;
                h.psh |= f.psh;
                h.closed = f.psh || f.data_len() < h.f.data_len();
                self.stats.queued += 1;
                return;
            }
        }
        self.flush(out);
        // A packet starts with a frame to this interface's MAC and one of its
        // addresses. Its headers are rewritten when another frame joins: they must
        // be its own.
        if f.psh
            || m.first()[..6] != mac
            || !local(&f.dst)
            || m.try_first_mut().map_or(true, |b| b.len() < f.hlen)
        {
            return out(m);
        }
        m.truncate(f.end);
        let mut hdr = [0u8; HDR_MAX];
        hdr[..f.hlen].copy_from_slice(&m.first()[..f.hlen]);
        let ip_len = if f.v6 { f.end - f.l4 } else { f.end - ETH };
        self.held = Some(Held {
            m,
            f,
            hdr,
            next_seq: f.seq.wrapping_add(f.data_len() as u32),
            ip_len,
            frames: 1,
            psh: false,
            closed: false,
        });
    }

    /// Hands on the held packet, if any: the end of a burst, or of a run.
    pub fn flush(&mut self, out: &mut impl FnMut(Mbuf)) {
        let Some(mut h) = self.held.take() else {
            return;
        };
        // Its first buffer was made its own when it was held, so it is writable
        // and holds the headers; should it not, the packet goes up with the first
        // frame's lengths, and IP input takes the rest for padding.
        if let Some(b) = (h.frames > 1)
            .then(|| h.m.try_first_mut().ok()?.get_mut(..h.f.hlen))
            .flatten()
        {
            let f = h.f;
            let (ip, tcp) = b.split_at_mut(f.l4);
            if f.v6 {
                Ipv6Packet::new_unchecked(&mut ip[ETH..]).set_payload_len(h.ip_len as u16);
            } else {
                let mut ip = Ipv4Packet::new_unchecked(&mut ip[ETH..]);
                ip.set_total_len(h.ip_len as u16);
                ip.fill_checksum();
            }
            if h.psh {
                TcpPacket::new_unchecked(tcp).set_psh(true);
            }
            h.m.hdr.tso_segsz = f.data_len() as u16;
            self.stats.flushed += 1;
        }
        // Checked in `parse` (or by the device, or never filled in on this machine).
        if h.m.hdr.csum_flags & mbuf::CSUM_L4_NEEDED == 0 {
            h.m.hdr.csum_flags |= mbuf::CSUM_L4_VALID;
        }
        out(h.m);
    }
}

/// Buffers holding `[from, to)` of `m`.
fn data_bufs(m: &Mbuf, from: usize, to: usize) -> usize {
    let mut pos = 0;
    let mut n = 0;
    for s in m.segments() {
        let (a, b) = (pos, pos + s.len());
        pos = b;
        if b > from && a < to {
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests;
