//! IPv4 header (RFC 791).
//!
//! `check_len` enforces the RFC 1122 §3.2.1.1–§3.2.1.2 length sanity checks a receiver must
//! make (IHL ≥ 5, total length ≥ IHL·4, total length ≤ what arrived), so that `payload()`
//! is always the datagram without link-layer padding.

use crate::{checksum, read_ipv4, read_u16, write_u16, Error, IpProtocol, Result};
use core::fmt;
use std::net::Ipv4Addr;

mod field {
    use core::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLG_OFF: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC_ADDR: Range<usize> = 12..16;
    pub const DST_ADDR: Range<usize> = 16..20;
}

/// Length of an IPv4 header without options.
pub const HEADER_LEN: usize = field::DST_ADDR.end;

/// "Don't fragment" bit of the flags/offset word.
const FLAG_DF: u16 = 0x4000;
/// "More fragments" bit.
const FLAG_MF: u16 = 0x2000;
/// Fragment offset, in 8-octet units.
const OFFSET_MASK: u16 = 0x1fff;

/// A read/write view of an IPv4 packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wrap a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Ipv4Packet<T> {
        Ipv4Packet { buffer }
    }

    /// Wrap a buffer and check that every getter is in bounds.
    pub fn new_checked(buffer: T) -> Result<Ipv4Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Check, in order: buffer ≥ 20 bytes (`Truncated`), IHL ≥ 5 (`Malformed`), buffer ≥
    /// header length (`Truncated`), header length ≤ total length (`Malformed`), total length
    /// ≤ buffer (`Truncated`). Bytes beyond the total length (Ethernet padding) are allowed.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let header_len = usize::from(self.header_len());
        if header_len < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if len < header_len {
            return Err(Error::Truncated);
        }
        let total_len = usize::from(self.total_len());
        if total_len < header_len {
            return Err(Error::Malformed);
        }
        if len < total_len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Version (4 for a valid packet; `check_len` does not look at it, `Ipv4Repr::parse`
    /// does).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL · 4), options included.
    pub fn header_len(&self) -> u8 {
        (self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// Differentiated services code point (RFC 2474).
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    /// Explicit congestion notification (RFC 3168).
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 0x03
    }

    /// Total length: header and payload, in bytes.
    pub fn total_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::IDENT)
    }

    fn flags_offset(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::FLG_OFF)
    }

    /// Don't fragment.
    pub fn dont_frag(&self) -> bool {
        self.flags_offset() & FLAG_DF != 0
    }

    /// More fragments.
    pub fn more_frags(&self) -> bool {
        self.flags_offset() & FLAG_MF != 0
    }

    /// Fragment offset, in bytes.
    pub fn frag_offset(&self) -> u16 {
        (self.flags_offset() & OFFSET_MASK) << 3
    }

    /// Time to live.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Protocol of the payload.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::PROTOCOL])
    }

    /// Header checksum.
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        read_ipv4(self.buffer.as_ref(), field::SRC_ADDR.start)
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        read_ipv4(self.buffer.as_ref(), field::DST_ADDR.start)
    }

    /// True if the header checksum verifies.
    pub fn verify_checksum(&self) -> bool {
        let header_len = usize::from(self.header_len());
        checksum::data(&self.buffer.as_ref()[..header_len]) == !0
    }

    /// True if this is a fragment (offset non-zero or more fragments follow).
    pub fn is_fragment(&self) -> bool {
        self.flags_offset() & (FLAG_MF | OFFSET_MASK) != 0
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Ipv4Packet<&'a T> {
    /// The options between the fixed header and the payload (empty without options).
    pub fn options(&self) -> &'a [u8] {
        let header_len = usize::from(self.header_len());
        &self.buffer.as_ref()[HEADER_LEN..header_len]
    }

    /// The payload, bounded by the total length (not by the buffer, which may carry
    /// link-layer padding).
    pub fn payload(&self) -> &'a [u8] {
        let header_len = usize::from(self.header_len());
        let total_len = usize::from(self.total_len());
        &self.buffer.as_ref()[header_len..total_len]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Set the version.
    pub fn set_version(&mut self, value: u8) {
        let data = self.buffer.as_mut();
        data[field::VER_IHL] = (data[field::VER_IHL] & 0x0f) | (value << 4);
    }

    /// Set the header length, in bytes (a multiple of 4, at most 60).
    pub fn set_header_len(&mut self, value: u8) {
        let data = self.buffer.as_mut();
        data[field::VER_IHL] = (data[field::VER_IHL] & 0xf0) | ((value / 4) & 0x0f);
    }

    /// Set the DSCP.
    pub fn set_dscp(&mut self, value: u8) {
        let data = self.buffer.as_mut();
        data[field::DSCP_ECN] = (data[field::DSCP_ECN] & 0x03) | (value << 2);
    }

    /// Set the ECN bits.
    pub fn set_ecn(&mut self, value: u8) {
        let data = self.buffer.as_mut();
        data[field::DSCP_ECN] = (data[field::DSCP_ECN] & !0x03) | (value & 0x03);
    }

    /// Set the total length.
    pub fn set_total_len(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::LENGTH, value)
    }

    /// Set the identification.
    pub fn set_ident(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::IDENT, value)
    }

    fn set_flags_offset(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::FLG_OFF, value)
    }

    /// Clear the flags and the offset (the reserved bit included).
    pub fn clear_flags(&mut self) {
        let value = self.flags_offset() & OFFSET_MASK;
        self.set_flags_offset(value)
    }

    /// Set or clear "don't fragment".
    pub fn set_dont_frag(&mut self, value: bool) {
        let raw = self.flags_offset();
        self.set_flags_offset(if value { raw | FLAG_DF } else { raw & !FLAG_DF })
    }

    /// Set or clear "more fragments".
    pub fn set_more_frags(&mut self, value: bool) {
        let raw = self.flags_offset();
        self.set_flags_offset(if value { raw | FLAG_MF } else { raw & !FLAG_MF })
    }

    /// Set the fragment offset, in bytes (a multiple of 8).
    pub fn set_frag_offset(&mut self, value: u16) {
        let raw = self.flags_offset();
        self.set_flags_offset((raw & !OFFSET_MASK) | ((value >> 3) & OFFSET_MASK))
    }

    /// Set the time to live.
    pub fn set_hop_limit(&mut self, value: u8) {
        self.buffer.as_mut()[field::TTL] = value
    }

    /// Set the protocol.
    pub fn set_next_header(&mut self, value: IpProtocol) {
        self.buffer.as_mut()[field::PROTOCOL] = value.into()
    }

    /// Set the header checksum.
    pub fn set_checksum(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, value)
    }

    /// Set the source address.
    pub fn set_src_addr(&mut self, value: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&value.octets())
    }

    /// Set the destination address.
    pub fn set_dst_addr(&mut self, value: Ipv4Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&value.octets())
    }

    /// Compute the header checksum over `header_len()` bytes and store it.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let header_len = usize::from(self.header_len());
        let sum = checksum::data(&self.buffer.as_ref()[..header_len]);
        self.set_checksum(!sum)
    }

    /// Decrement the TTL and patch the checksum incrementally (RFC 1624), as a router
    /// forwarding the packet does (RFC 1812 §5.3.1). Returns the new TTL. The caller checks
    /// for TTL ≤ 1 before calling (RFC 1812 §5.2.7.1 Time Exceeded).
    #[inline]
    pub fn decrement_hop_limit(&mut self) -> u8 {
        let data = self.buffer.as_ref();
        let old_word = read_u16(data, field::TTL);
        let ttl = data[field::TTL].wrapping_sub(1);
        let new_word = (u16::from(ttl) << 8) | (old_word & 0x00ff);
        let csum = checksum::update(self.checksum(), old_word, new_word);
        self.set_hop_limit(ttl);
        self.set_checksum(csum);
        ttl
    }

    /// The options, writable.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let header_len = usize::from(self.header_len());
        &mut self.buffer.as_mut()[HEADER_LEN..header_len]
    }

    /// The payload, writable, bounded by the total length.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let header_len = usize::from(self.header_len());
        let total_len = usize::from(self.total_len());
        &mut self.buffer.as_mut()[header_len..total_len]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Ipv4Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// A parsed IPv4 header. Options are not represented: `parse` skips them, `emit` writes a
/// 20-byte header. Fragmentation fields other than DF live on the view only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Protocol of the payload.
    pub next_header: IpProtocol,
    /// Payload length in bytes (total length minus header length).
    pub payload_len: usize,
    /// Time to live.
    pub hop_limit: u8,
    /// DSCP (0..=63).
    pub dscp: u8,
    /// Identification.
    pub ident: u16,
    /// Don't fragment.
    pub dont_frag: bool,
}

impl Ipv4Repr {
    /// Read a header: lengths (`check_len`), version 4 (`Malformed`), and the checksum if
    /// `verify_checksum` (`Checksum`; pass `false` when the NIC verified it).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Ipv4Packet<&T>,
        verify_checksum: bool,
    ) -> Result<Ipv4Repr> {
        packet.check_len()?;
        if packet.version() != 4 {
            return Err(Error::Malformed);
        }
        if verify_checksum && !packet.verify_checksum() {
            return Err(Error::Checksum);
        }
        Ok(Ipv4Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.total_len() - u16::from(packet.header_len())),
            hop_limit: packet.hop_limit(),
            dscp: packet.dscp(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
        })
    }

    /// 20: `emit` writes no options.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write a 20-byte header with ECN 0 and no fragmentation, and fill the checksum. The
    /// payload is the caller's: write it through `packet.payload_mut()` afterwards.
    /// `payload_len` must be at most 65515 (the total length field wraps otherwise).
    ///
    /// # Panics
    /// If the buffer is shorter than [`buffer_len`](Self::buffer_len) plus `payload_len`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv4Packet<T>) {
        packet.set_version(4);
        packet.set_header_len(HEADER_LEN as u8);
        packet.set_dscp(self.dscp);
        packet.set_ecn(0);
        packet.set_total_len((HEADER_LEN + self.payload_len) as u16);
        packet.set_ident(self.ident);
        packet.set_flags_offset(if self.dont_frag { FLAG_DF } else { 0 });
        packet.set_hop_limit(self.hop_limit);
        packet.set_next_header(self.next_header);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        packet.fill_checksum();
    }
}

impl fmt::Display for Ipv4Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IPv4 src={} dst={} proto={} len={} ttl={}",
            self.src_addr, self.dst_addr, self.next_header, self.payload_len, self.hop_limit
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // Captured on a Linux veth link (tests/data/linux-veth.txt): ICMP echo request
    // 10.0.0.1 -> 10.0.0.2, DF, TTL 64, id 0x2256, 32 bytes of echo data.
    static PACKET: [u8; 60] = [
        0x45, 0x00, 0x00, 0x3c, 0x22, 0x56, 0x40, 0x00, 0x40, 0x01, 0x04, 0x69, 0x0a, 0x00, 0x00,
        0x01, 0x0a, 0x00, 0x00, 0x02, 0x08, 0x00, 0xf3, 0xc8, 0x12, 0x34, 0x00, 0x01, 0x10, 0x11,
        0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20,
        0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f,
    ];

    // Linux's port unreachable in answer to a UDP datagram: TOS 0xc0 (DSCP CS6), no DF.
    static UNREACH: [u8; 70] = [
        0x45, 0xc0, 0x00, 0x46, 0xd7, 0x40, 0x00, 0x00, 0x40, 0x01, 0x8e, 0xb4, 0x0a, 0x00, 0x00,
        0x02, 0x0a, 0x00, 0x00, 0x01, 0x03, 0x03, 0x11, 0x27, 0x00, 0x00, 0x00, 0x00, 0x45, 0x00,
        0x00, 0x2a, 0xab, 0xd9, 0x40, 0x00, 0x40, 0x11, 0x7a, 0xe7, 0x0a, 0x00, 0x00, 0x01, 0x0a,
        0x00, 0x00, 0x02, 0x9c, 0x40, 0x82, 0x9a, 0x00, 0x16, 0xdb, 0x9f, 0x68, 0x65, 0x6c, 0x6c,
        0x6f, 0x20, 0x6d, 0x70, 0x73, 0x74, 0x61, 0x63, 0x6b, 0x0a,
    ];

    fn repr() -> Ipv4Repr {
        Ipv4Repr {
            src_addr: Ipv4Addr::new(10, 0, 0, 1),
            dst_addr: Ipv4Addr::new(10, 0, 0, 2),
            next_header: IpProtocol::Icmp,
            payload_len: 40,
            hop_limit: 64,
            dscp: 0,
            ident: 0x2256,
            dont_frag: true,
        }
    }

    #[test]
    fn parse_real_header() {
        let packet = Ipv4Packet::new_checked(&PACKET[..]).unwrap();
        assert_eq!(packet.version(), 4);
        assert_eq!(packet.header_len(), 20);
        assert_eq!(packet.total_len(), 60);
        assert_eq!(packet.ident(), 0x2256);
        assert!(packet.dont_frag() && !packet.more_frags() && !packet.is_fragment());
        assert_eq!(packet.frag_offset(), 0);
        assert_eq!(packet.hop_limit(), 64);
        assert_eq!(packet.next_header(), IpProtocol::Icmp);
        assert_eq!(packet.checksum(), 0x0469);
        assert!(packet.verify_checksum());
        assert!(packet.options().is_empty());
        assert_eq!(packet.payload(), &PACKET[20..]);
        assert_eq!(Ipv4Repr::parse(&packet, true), Ok(repr()));
    }

    #[test]
    fn emit_equals_capture() {
        let mut bytes = [0u8; 60];
        let mut packet = Ipv4Packet::new_unchecked(&mut bytes[..]);
        repr().emit(&mut packet);
        packet.payload_mut().copy_from_slice(&PACKET[20..]);
        assert_eq!(bytes, PACKET);
    }

    #[test]
    fn tos_and_no_df() {
        let packet = Ipv4Packet::new_checked(&UNREACH[..]).unwrap();
        assert_eq!(packet.dscp(), 48);
        assert_eq!(packet.ecn(), 0);
        assert!(!packet.dont_frag());
        let repr = Ipv4Repr::parse(&packet, true).unwrap();
        assert_eq!(repr.dscp, 48);
        assert_eq!(repr.payload_len, 50);
        let mut bytes = [0u8; 70];
        let mut out = Ipv4Packet::new_unchecked(&mut bytes[..]);
        repr.emit(&mut out);
        out.payload_mut().copy_from_slice(packet.payload());
        assert_eq!(bytes, UNREACH);
    }

    #[test]
    fn payload_excludes_ethernet_padding() {
        let mut bytes = PACKET.to_vec();
        bytes.extend_from_slice(&[0; 18]);
        let packet = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.payload().len(), 40);
    }

    #[test]
    fn check_len_order() {
        assert_eq!(
            Ipv4Packet::new_checked(&PACKET[..19]).unwrap_err(),
            Error::Truncated
        );
        let mut bytes = PACKET;
        bytes[0] = 0x44; // IHL 4
        assert_eq!(
            Ipv4Packet::new_checked(&bytes[..]).unwrap_err(),
            Error::Malformed
        );
        bytes[0] = 0x4f; // IHL 15 = 60 bytes > a 40-byte buffer
        assert_eq!(
            Ipv4Packet::new_checked(&bytes[..40]).unwrap_err(),
            Error::Truncated
        );
        let mut bytes = PACKET;
        bytes[3] = 19; // total length below header length
        assert_eq!(
            Ipv4Packet::new_checked(&bytes[..]).unwrap_err(),
            Error::Malformed
        );
        bytes[3] = 61; // total length beyond the buffer
        assert_eq!(
            Ipv4Packet::new_checked(&bytes[..]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn parse_rejects_bad_version_and_checksum() {
        let mut bytes = PACKET;
        bytes[0] = 0x65;
        let packet = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&packet, true), Err(Error::Malformed));
        let mut bytes = PACKET;
        bytes[11] ^= 1;
        let packet = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&packet, true), Err(Error::Checksum));
        assert!(Ipv4Repr::parse(&packet, false).is_ok());
    }

    #[test]
    fn header_with_options() {
        // Router alert option (RFC 2113), as IGMPv3 reports carry it: IHL 6.
        let bytes = [
            0x46, 0xc0, 0x00, 0x28, 0x00, 0x00, 0x40, 0x00, 0x01, 0x02, 0x00, 0x00, 0xc0, 0xa8,
            0x01, 0x64, 0xe0, 0x00, 0x00, 0x16, 0x94, 0x04, 0x00, 0x00, 0x22, 0x00, 0xf9, 0x02,
            0x00, 0x00, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00, 0xef, 0xff, 0xff, 0xfa,
        ];
        let mut bytes = bytes;
        let mut packet = Ipv4Packet::new_unchecked(&mut bytes[..]);
        packet.fill_checksum();
        let packet = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.header_len(), 24);
        assert_eq!(packet.options(), &[0x94, 0x04, 0x00, 0x00]);
        assert_eq!(packet.dscp(), 48);
        assert_eq!(packet.payload().len(), 16);
        let repr = Ipv4Repr::parse(&packet, true).unwrap();
        assert_eq!(repr.payload_len, 16);
        assert_eq!(repr.next_header, IpProtocol::Igmp);
    }

    #[test]
    fn fragment_fields() {
        let mut bytes = PACKET;
        let mut packet = Ipv4Packet::new_unchecked(&mut bytes[..]);
        packet.set_dont_frag(false);
        packet.set_more_frags(true);
        packet.set_frag_offset(1480);
        assert!(packet.more_frags() && !packet.dont_frag() && packet.is_fragment());
        assert_eq!(packet.frag_offset(), 1480);
        packet.set_more_frags(false);
        assert_eq!(packet.frag_offset(), 1480);
        assert!(!packet.more_frags());
    }

    #[test]
    fn decrement_hop_limit_keeps_checksum_valid() {
        let mut bytes = PACKET;
        let mut packet = Ipv4Packet::new_unchecked(&mut bytes[..]);
        for expected in (0..64).rev() {
            assert_eq!(packet.decrement_hop_limit(), expected);
            assert!(packet.verify_checksum());
        }
    }

    fn repr_strategy() -> impl Strategy<Value = Ipv4Repr> {
        (
            any::<[u8; 4]>(),
            any::<[u8; 4]>(),
            any::<u8>(),
            0usize..1500,
            any::<u8>(),
            0u8..64,
            any::<u16>(),
            any::<bool>(),
        )
            .prop_map(|(s, d, p, len, ttl, dscp, ident, df)| Ipv4Repr {
                src_addr: Ipv4Addr::from(s),
                dst_addr: Ipv4Addr::from(d),
                next_header: IpProtocol::from(p),
                payload_len: len,
                hop_limit: ttl,
                dscp,
                ident,
                dont_frag: df,
            })
    }

    proptest! {
        #[test]
        fn repr_round_trip(repr in repr_strategy()) {
            let mut bytes = vec![0u8; repr.buffer_len() + repr.payload_len];
            repr.emit(&mut Ipv4Packet::new_unchecked(&mut bytes[..]));
            let packet = Ipv4Packet::new_checked(&bytes[..]).unwrap();
            prop_assert_eq!(Ipv4Repr::parse(&packet, true), Ok(repr));
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            if let Ok(packet) = Ipv4Packet::new_checked(&bytes[..]) {
                let _ = (packet.options(), packet.payload(), packet.verify_checksum());
                let _ = (packet.frag_offset(), packet.src_addr(), packet.dst_addr());
                if let Ok(repr) = Ipv4Repr::parse(&packet, false) {
                    let _ = repr.to_string();
                }
            }
        }
    }
}
