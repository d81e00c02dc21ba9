//! IPv4 fragmentation on output (RFC 791 §3.2): [`fragment4`] cuts a datagram for an
//! MTU into [`Fragments`], made one at a time as the caller sends them, sharing the
//! original's buffers.
//!
//! What it may call: `mbuf`, `wire`. It counts nothing itself: a [`FragError`] says
//! which counter the caller moves.

use super::IP_HDR_LEN;
use mbuf::Mbuf;
use wire::Ipv4Packet;

/// Why a datagram cannot be fragmented.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FragError {
    /// Don't Fragment is set (`ip.cantfrag`).
    DontFrag,
    /// The MTU cannot carry a header and 8 bytes of data (`ip.cantfrag`).
    MtuTooSmall,
    /// The header could not be read or written (`ip.odropped`).
    Malformed,
}

/// The fragments of one IPv4 datagram, made on demand by [`fragment4`].
#[derive(Debug)]
pub struct Fragments {
    first: Option<Mbuf>,
    rest: Mbuf,
    /// The header of the fragments after the first: the original's 20 bytes and the
    /// options with the copy bit.
    hdr: [u8; 60],
    hlen: usize,
    /// Data bytes per fragment after the first (a multiple of 8).
    chunk: usize,
    /// Offset of the next fragment's data in the original datagram, in bytes.
    off: usize,
    /// The original was itself a non-final fragment: its last piece keeps MF.
    more: bool,
}

/// Fragments an IPv4 datagram `m` (header included) for `mtu` (RFC 791 §3.2,
/// "Fragmentation"). The fragments share the original's buffers: the first keeps the
/// original header, patched in place; each other gets a fresh header in a buffer of
/// its own, prepended to a window of the original data.
pub fn fragment4(mut m: Mbuf, mtu: usize) -> Result<Fragments, (Mbuf, FragError)> {
    let (hlen, df, more, off) = match m.pulldown(0, IP_HDR_LEN) {
        Ok(h) => {
            let p = Ipv4Packet::new_unchecked(&h[..]);
            (
                usize::from(p.header_len()),
                p.dont_frag(),
                p.more_frags(),
                usize::from(p.frag_offset()),
            )
        }
        Err(_) => return Err((m, FragError::Malformed)),
    };
    if df {
        return Err((m, FragError::DontFrag));
    }
    if hlen < IP_HDR_LEN || hlen > m.len() {
        return Err((m, FragError::Malformed));
    }
    let mut hdr = [0u8; 60];
    match m.pulldown(0, hlen) {
        Ok(h) => hdr[..hlen].copy_from_slice(h),
        Err(_) => return Err((m, FragError::Malformed)),
    }
    // RFC 791 §3.1, Options: "The copied flag indicates that this option is copied
    // into all fragments on fragmentation." The rest stay in the first fragment only.
    let mut nhlen = IP_HDR_LEN;
    let mut i = IP_HDR_LEN;
    while i < hlen {
        let ty = hdr[i];
        if ty == 0 {
            break; // End of Option List.
        }
        if ty == 1 {
            i += 1; // No Operation: copy bit clear.
            continue;
        }
        let Some(&l) = hdr.get(i + 1) else { break };
        let l = usize::from(l);
        if l < 2 || i + l > hlen {
            break;
        }
        if ty & 0x80 != 0 {
            hdr.copy_within(i..i + l, nhlen);
            nhlen += l;
        }
        i += l;
    }
    // Pad with End of Option List to a whole number of 32-bit words.
    while !nhlen.is_multiple_of(4) {
        hdr[nhlen] = 0;
        nhlen += 1;
    }
    hdr[0] = (hdr[0] & 0xf0) | (nhlen / 4) as u8;
    // RFC 791: "the fragment offset is measured in units of 8 octets", so every
    // fragment but the last carries a multiple of 8 data bytes.
    let first_len = mtu.saturating_sub(hlen) & !7;
    let chunk = mtu.saturating_sub(nhlen) & !7;
    if first_len == 0 || chunk == 0 {
        return Err((m, FragError::MtuTooSmall));
    }
    let data = m.len() - hlen;
    if data <= first_len {
        // Fits after all: one "fragment", the datagram itself.
        let rest = match m.split(m.len()) {
            Ok(r) => r,
            Err(_) => return Err((m, FragError::Malformed)),
        };
        return Ok(Fragments {
            first: Some(m),
            rest,
            hdr,
            hlen: nhlen,
            chunk,
            off,
            more,
        });
    }
    match m.pulldown(0, hlen) {
        Ok(h) => {
            // Patched before the split, while the buffer is the datagram's own.
            let mut p = Ipv4Packet::new_unchecked(&mut h[..]);
            p.set_total_len((hlen + first_len) as u16);
            p.set_more_frags(true);
            p.fill_checksum();
        }
        Err(_) => return Err((m, FragError::Malformed)),
    }
    let rest = match m.split(hlen + first_len) {
        Ok(r) => r,
        Err(_) => return Err((m, FragError::Malformed)),
    };
    Ok(Fragments {
        first: Some(m),
        rest,
        hdr,
        hlen: nhlen,
        chunk,
        off: off + first_len,
        more,
    })
}

impl Iterator for Fragments {
    /// A fragment, or `Err` when no buffer was left for its header.
    type Item = Result<Mbuf, mbuf::NoBufs>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(m) = self.first.take() {
            return Some(Ok(m));
        }
        if self.rest.is_empty() {
            return None;
        }
        let n = self.chunk.min(self.rest.len());
        let tail = match self.rest.split(n) {
            Ok(t) => t,
            Err(e) => {
                self.rest.truncate(0);
                return Some(Err(e));
            }
        };
        let mut m = std::mem::replace(&mut self.rest, tail);
        let last = self.rest.is_empty();
        let off = self.off;
        self.off += n;
        let h = match m.prepend(self.hlen) {
            Ok(h) => h,
            Err(e) => return Some(Err(e)),
        };
        h.copy_from_slice(&self.hdr[..self.hlen]);
        let mut p = Ipv4Packet::new_unchecked(h);
        p.set_total_len((self.hlen + n) as u16);
        p.set_frag_offset(off as u16);
        p.set_more_frags(!last || self.more);
        p.fill_checksum();
        Some(Ok(m))
    }
}
