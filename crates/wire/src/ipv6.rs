//! IPv6 fixed header (RFC 8200 §3).
//!
//! Extension headers are in [`ipv6ext`](crate::ipv6ext); `payload()` here is everything
//! after the fixed header up to the payload length, extension headers included.

use crate::{read_ipv6, read_u16, write_u16, Error, IpProtocol, Result};
use core::fmt;
use std::net::Ipv6Addr;

mod field {
    use core::ops::Range;
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    pub const LENGTH: usize = 4;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Range<usize> = 8..24;
    pub const DST_ADDR: Range<usize> = 24..40;
}

/// Length of the IPv6 fixed header.
pub const HEADER_LEN: usize = field::DST_ADDR.end;

/// RFC 8200 §5: every link must carry 1280-byte packets.
pub const MIN_MTU: usize = 1280;

/// A read/write view of an IPv6 packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wrap a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Ipv6Packet<T> {
        Ipv6Packet { buffer }
    }

    /// Wrap a buffer and check that every getter is in bounds.
    pub fn new_checked(buffer: T) -> Result<Ipv6Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// `Err(Truncated)` if the buffer is shorter than 40 bytes plus the payload length.
    /// Bytes beyond that (link-layer padding) are allowed. Jumbograms (payload length 0
    /// with a jumbo option, RFC 2675) read as an empty payload.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || len < HEADER_LEN + usize::from(self.payload_len()) {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// 40.
    pub const fn header_len() -> usize {
        HEADER_LEN
    }

    fn ver_tc_flow(&self) -> u32 {
        let data = self.buffer.as_ref();
        u32::from_be_bytes([data[0], data[1], data[2], data[3]])
    }

    /// Version (6 for a valid packet; `Ipv6Repr::parse` checks it).
    pub fn version(&self) -> u8 {
        (self.ver_tc_flow() >> 28) as u8
    }

    /// Traffic class (DSCP and ECN).
    pub fn traffic_class(&self) -> u8 {
        (self.ver_tc_flow() >> 20) as u8
    }

    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        self.ver_tc_flow() & 0x000f_ffff
    }

    /// Payload length: everything after the fixed header.
    pub fn payload_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Header plus payload length.
    pub fn total_len(&self) -> usize {
        HEADER_LEN + usize::from(self.payload_len())
    }

    /// The header that follows.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::NXT_HDR])
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        read_ipv6(self.buffer.as_ref(), field::SRC_ADDR.start)
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        read_ipv6(self.buffer.as_ref(), field::DST_ADDR.start)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Ipv6Packet<&'a T> {
    /// The payload (extension headers included), bounded by the payload length.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.total_len()]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    fn set_ver_tc_flow(&mut self, value: u32) {
        self.buffer.as_mut()[field::VER_TC_FLOW].copy_from_slice(&value.to_be_bytes())
    }

    /// Set the version.
    pub fn set_version(&mut self, value: u8) {
        let raw = (self.ver_tc_flow() & 0x0fff_ffff) | (u32::from(value) << 28);
        self.set_ver_tc_flow(raw)
    }

    /// Set the traffic class.
    pub fn set_traffic_class(&mut self, value: u8) {
        let raw = (self.ver_tc_flow() & 0xf00f_ffff) | (u32::from(value) << 20);
        self.set_ver_tc_flow(raw)
    }

    /// Set the flow label (low 20 bits of `value`).
    pub fn set_flow_label(&mut self, value: u32) {
        let raw = (self.ver_tc_flow() & 0xfff0_0000) | (value & 0x000f_ffff);
        self.set_ver_tc_flow(raw)
    }

    /// Set the payload length.
    pub fn set_payload_len(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::LENGTH, value)
    }

    /// Set the next header.
    pub fn set_next_header(&mut self, value: IpProtocol) {
        self.buffer.as_mut()[field::NXT_HDR] = value.into()
    }

    /// Set the hop limit.
    pub fn set_hop_limit(&mut self, value: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = value
    }

    /// Set the source address.
    pub fn set_src_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&value.octets())
    }

    /// Set the destination address.
    pub fn set_dst_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&value.octets())
    }

    /// The payload, writable, bounded by the payload length.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = self.total_len();
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Ipv6Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// A parsed IPv6 fixed header (smoltcp's fields). Traffic class and flow label live on the
/// view; `emit` writes them as 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// The header that follows.
    pub next_header: IpProtocol,
    /// Payload length in bytes (extension headers included).
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
}

impl Ipv6Repr {
    /// Read a fixed header. `Err(Malformed)` unless the version is 6.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Ipv6Packet<&T>) -> Result<Ipv6Repr> {
        packet.check_len()?;
        if packet.version() != 6 {
            return Err(Error::Malformed);
        }
        Ok(Ipv6Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
        })
    }

    /// 40.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the fixed header. `payload_len` must be at most 65535.
    ///
    /// # Panics
    /// If the buffer is shorter than [`buffer_len`](Self::buffer_len).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv6Packet<T>) {
        packet.set_ver_tc_flow(6 << 28);
        packet.set_payload_len(self.payload_len as u16);
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
    }
}

impl fmt::Display for Ipv6Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IPv6 src={} dst={} nxt={} len={} hlim={}",
            self.src_addr, self.dst_addr, self.next_header, self.payload_len, self.hop_limit
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // Captured on a Linux veth link (tests/data/linux-veth.txt), Ethernet header removed:
    // ICMPv6 echo request fd00::1 -> fd00::2, flow label 0x316d7, hop limit 64.
    static PACKET: [u8; 80] = [
        0x60, 0x03, 0x16, 0xd7, 0x00, 0x28, 0x3a, 0x40, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x80, 0x00, 0x50, 0x74, 0x43,
        0x21, 0x00, 0x01, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b,
        0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a,
        0x2b, 0x2c, 0x2d, 0x2e, 0x2f,
    ];

    #[test]
    fn parse_fixed_header() {
        let packet = Ipv6Packet::new_checked(&PACKET[..]).unwrap();
        assert_eq!(packet.version(), 6);
        assert_eq!(packet.traffic_class(), 0);
        assert_eq!(packet.flow_label(), 0x316d7);
        assert_eq!(packet.payload_len(), 40);
        assert_eq!(packet.next_header(), IpProtocol::Icmpv6);
        assert_eq!(packet.hop_limit(), 64);
        assert_eq!(packet.src_addr(), "fd00::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(packet.dst_addr(), "fd00::2".parse::<Ipv6Addr>().unwrap());
        assert_eq!(packet.payload(), &PACKET[40..]);
        let repr = Ipv6Repr::parse(&packet).unwrap();
        let mut bytes = PACKET;
        let mut out = Ipv6Packet::new_unchecked(&mut bytes[..]);
        repr.emit(&mut out);
        out.set_flow_label(0x316d7);
        assert_eq!(bytes, PACKET);
    }

    #[test]
    fn set_traffic_class_keeps_flow_label() {
        let mut bytes = PACKET;
        let mut packet = Ipv6Packet::new_unchecked(&mut bytes[..]);
        packet.set_traffic_class(0xb8);
        assert_eq!(packet.traffic_class(), 0xb8);
        assert_eq!(packet.flow_label(), 0x316d7);
        assert_eq!(packet.version(), 6);
    }

    #[test]
    fn rejects_short_and_wrong_version() {
        assert_eq!(
            Ipv6Packet::new_checked(&PACKET[..39]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Ipv6Packet::new_checked(&PACKET[..47]).unwrap_err(),
            Error::Truncated
        );
        let mut bytes = PACKET;
        bytes[0] = 0x40;
        let packet = Ipv6Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Ipv6Repr::parse(&packet), Err(Error::Malformed));
    }

    proptest! {
        #[test]
        fn repr_round_trip(
            src in any::<[u8; 16]>(), dst in any::<[u8; 16]>(), nh in any::<u8>(),
            payload_len in 0usize..300, hop_limit in any::<u8>(),
        ) {
            let repr = Ipv6Repr {
                src_addr: src.into(), dst_addr: dst.into(), next_header: nh.into(),
                payload_len, hop_limit,
            };
            let mut bytes = vec![0u8; repr.buffer_len() + payload_len];
            repr.emit(&mut Ipv6Packet::new_unchecked(&mut bytes[..]));
            let packet = Ipv6Packet::new_checked(&bytes[..]).unwrap();
            prop_assert_eq!(Ipv6Repr::parse(&packet), Ok(repr));
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(packet) = Ipv6Packet::new_checked(&bytes[..]) {
                let _ = (packet.payload(), packet.flow_label(), packet.traffic_class());
                let _ = Ipv6Repr::parse(&packet).map(|r| r.to_string());
            }
        }
    }
}
