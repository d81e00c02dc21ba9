//! Generic Routing Encapsulation: RFC 2784 with the key and sequence number
//! extensions of RFC 2890.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |C| |K|S| Reserved0       | Ver |         Protocol Type         |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |      Checksum (optional)      |       Reserved1 (Optional)    |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                         Key (optional)                        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                 Sequence Number (Optional)                    |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! A receiver "MUST discard a packet where any of bits 1-5 are non-zero, unless that
//! receiver implements RFC 1701" (RFC 2784 §2.3); bits 2 and 3 are RFC 2890's key
//! and sequence number, which this crate represents, so only bits 1 (RFC 1701's
//! routing present), 4 (strict source route) and 5 are refused. Bits 6-12 are
//! ignored on receipt and sent as zero. The version must be 0 (§2.3.1).
//!
//! The checksum covers the GRE header and the payload (§2.5), which a stack may
//! hold in pieces: [`GreRepr::parse`] does not verify it; [`GrePacket::verify_checksum`]
//! does when the view holds the whole packet, and a caller with the payload elsewhere
//! sums it itself (the header's field included; the sum is `0xffff` when it verifies).

use crate::ethernet::EtherType;
use crate::{checksum, read_u16, read_u32, write_u16, write_u32, Error, Result};
use core::fmt;

mod field {
    pub const FLAGS: core::ops::Range<usize> = 0..2;
    pub const PROTOCOL: core::ops::Range<usize> = 2..4;
}

/// Checksum present (bit 0).
const FLAG_C: u16 = 0x8000;
/// RFC 1701's routing present (bit 1): refused.
const FLAG_R: u16 = 0x4000;
/// Key present (bit 2, RFC 2890).
const FLAG_K: u16 = 0x2000;
/// Sequence number present (bit 3, RFC 2890).
const FLAG_S: u16 = 0x1000;
/// RFC 1701's strict source route (bit 4) and bit 5: refused.
const FLAGS_REFUSED: u16 = FLAG_R | 0x0800 | 0x0400;
/// The version (bits 13-15).
const VERSION_MASK: u16 = 0x0007;

/// The fixed part of the header: flags, version and protocol type.
pub const HEADER_LEN: usize = 4;

/// A view of a GRE header and what follows it.
#[derive(Debug, Clone)]
pub struct GrePacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> GrePacket<T> {
    /// A view without checks (see the crate's no-panic contract).
    pub const fn new_unchecked(buffer: T) -> GrePacket<T> {
        GrePacket { buffer }
    }

    /// A view whose getters are all in bounds: the buffer holds the header with
    /// every optional field its flags announce.
    pub fn new_checked(buffer: T) -> Result<GrePacket<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Err(Truncated)` if the buffer is shorter than the header its flags describe.
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < HEADER_LEN || b.len() < self.header_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    fn flags_word(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::FLAGS.start)
    }

    /// The checksum field is present.
    pub fn checksum_present(&self) -> bool {
        self.flags_word() & FLAG_C != 0
    }

    /// The key field is present.
    pub fn key_present(&self) -> bool {
        self.flags_word() & FLAG_K != 0
    }

    /// The sequence number field is present.
    pub fn seq_present(&self) -> bool {
        self.flags_word() & FLAG_S != 0
    }

    /// The version field.
    pub fn version(&self) -> u8 {
        (self.flags_word() & VERSION_MASK) as u8
    }

    /// The protocol type: an EtherType (RFC 2784 §2.4).
    pub fn protocol(&self) -> EtherType {
        EtherType::from(read_u16(self.buffer.as_ref(), field::PROTOCOL.start))
    }

    /// The header's length: the fixed part and the optional fields its flags announce.
    pub fn header_len(&self) -> usize {
        let f = self.flags_word();
        let opt = |flag: u16| if f & flag != 0 { 4 } else { 0 };
        HEADER_LEN + opt(FLAG_C) + opt(FLAG_K) + opt(FLAG_S)
    }

    /// The checksum field, if present.
    pub fn checksum(&self) -> Option<u16> {
        self.checksum_present()
            .then(|| read_u16(self.buffer.as_ref(), HEADER_LEN))
    }

    /// The key, if present.
    pub fn key(&self) -> Option<u32> {
        let at = HEADER_LEN + if self.checksum_present() { 4 } else { 0 };
        self.key_present()
            .then(|| read_u32(self.buffer.as_ref(), at))
    }

    /// The sequence number, if present.
    pub fn seq(&self) -> Option<u32> {
        let f = self.flags_word();
        let at =
            HEADER_LEN + if f & FLAG_C != 0 { 4 } else { 0 } + if f & FLAG_K != 0 { 4 } else { 0 };
        self.seq_present()
            .then(|| read_u32(self.buffer.as_ref(), at))
    }

    /// What follows the header.
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        b.get(self.header_len()..).unwrap_or(&[])
    }

    /// True if there is no checksum, or it verifies over the whole buffer (header and
    /// payload: the view must hold the packet to its end).
    pub fn verify_checksum(&self) -> bool {
        !self.checksum_present() || checksum::data(self.buffer.as_ref()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> GrePacket<T> {
    /// Fills the checksum field (present per the flags) over the whole buffer.
    pub fn fill_checksum(&mut self) {
        if !self.checksum_present() {
            return;
        }
        let b = self.buffer.as_mut();
        write_u16(b, HEADER_LEN, 0);
        let sum = !checksum::data(b);
        write_u16(b, HEADER_LEN, sum);
    }
}

/// A GRE header's meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GreRepr {
    /// What the payload is (an EtherType: IPv4, IPv6, …).
    pub protocol: EtherType,
    /// The checksum field is present (its value is the caller's to check or fill).
    pub checksum: bool,
    /// RFC 2890's key, identifying a flow or a tunnel.
    pub key: Option<u32>,
    /// RFC 2890's sequence number.
    pub seq: Option<u32>,
}

impl GreRepr {
    /// The header of a checked view, refused (`Malformed`) if it uses RFC 1701's
    /// routing or strict source route, bit 5, or a version other than 0.
    pub fn parse<T: AsRef<[u8]>>(p: &GrePacket<T>) -> Result<GreRepr> {
        p.check_len()?;
        let f = p.flags_word();
        if f & FLAGS_REFUSED != 0 || f & VERSION_MASK != 0 {
            return Err(Error::Malformed);
        }
        Ok(GreRepr {
            protocol: p.protocol(),
            checksum: p.checksum_present(),
            key: p.key(),
            seq: p.seq(),
        })
    }

    /// The header's length on the wire.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
            + if self.checksum { 4 } else { 0 }
            + if self.key.is_some() { 4 } else { 0 }
            + if self.seq.is_some() { 4 } else { 0 }
    }

    /// Writes the header at the start of `p`'s buffer, the checksum field zero (fill
    /// it with [`GrePacket::fill_checksum`] once the payload is in place, or sum the
    /// pieces). Panics if the buffer is shorter than [`GreRepr::buffer_len`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut GrePacket<T>) {
        let b = p.buffer.as_mut();
        let mut f = 0u16;
        if self.checksum {
            f |= FLAG_C;
        }
        if self.key.is_some() {
            f |= FLAG_K;
        }
        if self.seq.is_some() {
            f |= FLAG_S;
        }
        write_u16(b, field::FLAGS.start, f);
        write_u16(b, field::PROTOCOL.start, self.protocol.into());
        let mut at = HEADER_LEN;
        if self.checksum {
            write_u32(b, at, 0);
            at += 4;
        }
        if let Some(k) = self.key {
            write_u32(b, at, k);
            at += 4;
        }
        if let Some(s) = self.seq {
            write_u32(b, at, s);
        }
    }
}

impl fmt::Display for GreRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GRE proto={}", self.protocol)?;
        if self.checksum {
            f.write_str(" csum")?;
        }
        if let Some(k) = self.key {
            write!(f, " key={k}")?;
        }
        if let Some(s) = self.seq {
            write!(f, " seq={s}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A GRE packet Linux sends for an IPv4 payload with no options.
    const PLAIN: [u8; 4] = [0x00, 0x00, 0x08, 0x00];

    #[test]
    fn plain_header() {
        let p = GrePacket::new_checked(&PLAIN[..]).unwrap();
        let r = GreRepr::parse(&p).unwrap();
        assert_eq!(
            r,
            GreRepr {
                protocol: EtherType::Ipv4,
                checksum: false,
                key: None,
                seq: None
            }
        );
        assert_eq!(p.header_len(), 4);
        assert!(p.verify_checksum());
    }

    #[test]
    fn all_options_round_trip_with_checksum() {
        let r = GreRepr {
            protocol: EtherType::Ipv6,
            checksum: true,
            key: Some(0xdead_beef),
            seq: Some(7),
        };
        let payload = [0x60, 1, 2, 3, 4, 5, 6];
        let mut buf = vec![0u8; r.buffer_len() + payload.len()];
        buf[r.buffer_len()..].copy_from_slice(&payload);
        let mut p = GrePacket::new_unchecked(&mut buf[..]);
        r.emit(&mut p);
        p.fill_checksum();
        let p = GrePacket::new_checked(&buf[..]).unwrap();
        assert_eq!(p.header_len(), 16);
        assert!(p.verify_checksum());
        assert_eq!(GreRepr::parse(&p), Ok(r));
        assert_eq!(p.payload(), &payload);
        let mut bad = buf.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert!(!GrePacket::new_checked(&bad[..]).unwrap().verify_checksum());
    }

    #[test]
    fn refused_headers() {
        // Routing present (RFC 1701), a version other than 0, truncated options.
        for h in [
            [0x40, 0x00, 0x08, 0x00],
            [0x00, 0x01, 0x08, 0x00],
            [0x08, 0x00, 0x08, 0x00],
        ] {
            let p = GrePacket::new_checked(&h[..]).unwrap();
            assert_eq!(GreRepr::parse(&p), Err(Error::Malformed), "{h:?}");
        }
        assert_eq!(
            GrePacket::new_checked(&[0x20, 0x00, 0x08, 0x00, 0, 0][..]).err(),
            Some(Error::Truncated)
        );
        assert_eq!(
            GrePacket::new_checked(&[0x00, 0x00][..]).err(),
            Some(Error::Truncated)
        );
        // Bits 6-12 are ignored on receipt.
        let p = GrePacket::new_checked(&[0x03, 0xf8, 0x08, 0x00][..]).unwrap();
        assert!(GreRepr::parse(&p).is_ok());
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..32)) {
            if let Ok(p) = GrePacket::new_checked(&bytes[..]) {
                let _ = (p.checksum(), p.key(), p.seq(), p.payload(), p.verify_checksum());
                if let Ok(r) = GreRepr::parse(&p) {
                    let mut out = vec![0u8; r.buffer_len()];
                    r.emit(&mut GrePacket::new_unchecked(&mut out[..]));
                    let again = GreRepr::parse(&GrePacket::new_checked(&out[..]).unwrap());
                    prop_assert_eq!(again, Ok(r));
                }
            }
        }
    }
}
