//! UDP (RFC 768), over IPv4 and IPv6 (RFC 8200 §8.1).

use crate::{checksum, read_u16, write_u16, Error, IpProtocol, Result};
use core::fmt;
use std::net::IpAddr;

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const CHECKSUM: usize = 6;
    pub const PAYLOAD: usize = 8;
}

/// Length of the UDP header.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// A read/write view of a UDP datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

#[allow(clippy::len_without_is_empty)]
impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wrap a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> UdpPacket<T> {
        UdpPacket { buffer }
    }

    /// Wrap a buffer and check that every getter is in bounds.
    pub fn new_checked(buffer: T) -> Result<UdpPacket<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// `Err(Truncated)` if the buffer is shorter than 8 bytes or than the length field;
    /// `Err(Malformed)` if the length field is below 8.
    pub fn check_len(&self) -> Result<()> {
        let buffer_len = self.buffer.as_ref().len();
        if buffer_len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let len = usize::from(self.len());
        if len < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if buffer_len < len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Length field: header plus payload.
    pub fn len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Checksum (0 = none, IPv4 only).
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// True if the checksum verifies over the pseudo-header and `len()` bytes.
    ///
    /// RFC 768: a zero checksum over IPv4 means "not computed" and verifies. RFC 8200 §8.1:
    /// over IPv6 it is mandatory, so zero fails.
    pub fn verify_checksum(&self, src_addr: &IpAddr, dst_addr: &IpAddr) -> bool {
        if self.checksum() == 0 {
            return matches!((src_addr, dst_addr), (IpAddr::V4(_), IpAddr::V4(_)));
        }
        let len = self.len();
        let data = &self.buffer.as_ref()[..usize::from(len)];
        checksum::combine(&[
            checksum::pseudo_header(src_addr, dst_addr, IpProtocol::Udp, u32::from(len)),
            checksum::data(data),
        ]) == !0
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> UdpPacket<&'a T> {
    /// The payload, bounded by the length field.
    pub fn payload(&self) -> &'a [u8] {
        let len = usize::from(self.len());
        &self.buffer.as_ref()[HEADER_LEN..len]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Set the source port.
    pub fn set_src_port(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::SRC_PORT, value)
    }

    /// Set the destination port.
    pub fn set_dst_port(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::DST_PORT, value)
    }

    /// Set the length field.
    pub fn set_len(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::LENGTH, value)
    }

    /// Set the checksum.
    pub fn set_checksum(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, value)
    }

    /// Compute the checksum over the pseudo-header and `len()` bytes and store it.
    pub fn fill_checksum(&mut self, src_addr: &IpAddr, dst_addr: &IpAddr) {
        self.set_checksum(0);
        let len = self.len();
        let sum = checksum::combine(&[
            checksum::pseudo_header(src_addr, dst_addr, IpProtocol::Udp, u32::from(len)),
            checksum::data(&self.buffer.as_ref()[..usize::from(len)]),
        ]);
        // RFC 768: "If the computed checksum is zero, it is transmitted as all ones".
        let csum = !sum;
        self.set_checksum(if csum == 0 { 0xffff } else { csum })
    }

    /// The payload, writable, bounded by the length field.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..len]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for UdpPacket<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// A parsed UDP header. The payload stays in the packet (`packet.payload()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
}

impl UdpRepr {
    /// Read a header. `Err(Malformed)` for destination port 0 (RFC 768 reserves it);
    /// `Err(Checksum)` if `verify_checksum` and the checksum does not verify (see
    /// [`UdpPacket::verify_checksum`] for the zero checksum).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &UdpPacket<&T>,
        src_addr: &IpAddr,
        dst_addr: &IpAddr,
        verify_checksum: bool,
    ) -> Result<UdpRepr> {
        packet.check_len()?;
        if packet.dst_port() == 0 {
            return Err(Error::Malformed);
        }
        if verify_checksum && !packet.verify_checksum(src_addr, dst_addr) {
            return Err(Error::Checksum);
        }
        Ok(UdpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
        })
    }

    /// 8.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus `payload_len`.
    pub const fn buffer_len(&self, payload_len: usize) -> usize {
        HEADER_LEN + payload_len
    }

    /// Write the header, let `emit_payload` write the `payload_len` bytes of payload, then
    /// fill the checksum if `fill_checksum` (else write 0, for a NIC to fill).
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len(payload_len)`, or `payload_len` > 65527.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut UdpPacket<T>,
        src_addr: &IpAddr,
        dst_addr: &IpAddr,
        payload_len: usize,
        emit_payload: impl FnOnce(&mut [u8]),
        fill_checksum: bool,
    ) {
        let len = u16::try_from(HEADER_LEN + payload_len).expect("UDP payload too long");
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len(len);
        emit_payload(packet.payload_mut());
        if fill_checksum {
            packet.fill_checksum(src_addr, dst_addr)
        } else {
            packet.set_checksum(0)
        }
    }
}

impl fmt::Display for UdpRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "UDP src={} dst={}", self.src_port, self.dst_port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    const SRC: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    const DST: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

    // Captured on a Linux veth link (tests/data/linux-veth.txt), IP header removed: a DNS
    // query for example.com, 10.0.0.1:40000 -> 10.0.0.2:53, checksum 0x6d8a.
    static DNS_QUERY: [u8; 37] = [
        0x9c, 0x40, 0x00, 0x35, 0x00, 0x25, 0x6d, 0x8a, 0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x03, 0x63,
        0x6f, 0x6d, 0x00, 0x00, 0x01, 0x00, 0x01,
    ];

    #[test]
    fn parse_dns_query() {
        let bytes = DNS_QUERY;
        let packet = UdpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.checksum(), 0x6d8a);
        assert_eq!(packet.src_port(), 40000);
        assert_eq!(packet.dst_port(), 53);
        assert_eq!(packet.len(), 37);
        assert_eq!(packet.payload(), &DNS_QUERY[8..]);
        assert!(packet.verify_checksum(&SRC, &DST));
        assert!(!packet.verify_checksum(&DST, &IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3))));
        let repr = UdpRepr::parse(&packet, &SRC, &DST, true).unwrap();
        assert_eq!(
            repr,
            UdpRepr {
                src_port: 40000,
                dst_port: 53
            }
        );

        let mut out = vec![0u8; repr.buffer_len(packet.payload().len())];
        let payload = packet.payload();
        repr.emit(
            &mut UdpPacket::new_unchecked(&mut out[..]),
            &SRC,
            &DST,
            payload.len(),
            |buf| buf.copy_from_slice(payload),
            true,
        );
        assert_eq!(out, bytes);
    }

    #[test]
    fn zero_checksum_means_none_on_ipv4_only() {
        let mut bytes = DNS_QUERY;
        bytes[6..8].fill(0);
        let packet = UdpPacket::new_checked(&bytes[..]).unwrap();
        assert!(packet.verify_checksum(&SRC, &DST));
        let s6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
        assert!(!packet.verify_checksum(&s6, &s6));
        assert_eq!(
            UdpRepr::parse(&packet, &s6, &s6, true),
            Err(Error::Checksum)
        );
    }

    #[test]
    fn length_field_is_checked() {
        let mut bytes = DNS_QUERY.to_vec();
        bytes.push(0); // trailing byte beyond the length field: allowed, not payload
        assert_eq!(
            UdpPacket::new_checked(&bytes[..]).unwrap().payload().len(),
            29
        );
        assert_eq!(
            UdpPacket::new_checked(&bytes[..36]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            UdpPacket::new_checked(&bytes[..7]).unwrap_err(),
            Error::Truncated
        );
        bytes[5] = 7;
        assert_eq!(
            UdpPacket::new_checked(&bytes[..]).unwrap_err(),
            Error::Malformed
        );
    }

    #[test]
    fn zero_destination_port_is_malformed() {
        let mut bytes = DNS_QUERY.to_vec();
        bytes[2] = 0;
        bytes[3] = 0;
        let packet = UdpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(
            UdpRepr::parse(&packet, &SRC, &DST, false),
            Err(Error::Malformed)
        );
    }

    fn ip_pair() -> impl Strategy<Value = (IpAddr, IpAddr)> {
        prop_oneof![
            (any::<[u8; 4]>(), any::<[u8; 4]>())
                .prop_map(|(s, d)| (IpAddr::from(s), IpAddr::from(d))),
            (any::<[u8; 16]>(), any::<[u8; 16]>())
                .prop_map(|(s, d)| (IpAddr::from(s), IpAddr::from(d))),
        ]
    }

    proptest! {
        #[test]
        fn repr_round_trip(
            src_port in any::<u16>(), dst_port in 1u16.., (src, dst) in ip_pair(),
            payload in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let repr = UdpRepr { src_port, dst_port };
            let mut bytes = vec![0u8; repr.buffer_len(payload.len())];
            repr.emit(
                &mut UdpPacket::new_unchecked(&mut bytes[..]),
                &src, &dst, payload.len(), |b| b.copy_from_slice(&payload), true,
            );
            let packet = UdpPacket::new_checked(&bytes[..]).unwrap();
            prop_assert_eq!(UdpRepr::parse(&packet, &src, &dst, true), Ok(repr));
            prop_assert_eq!(packet.payload(), &payload[..]);
        }

        #[test]
        fn parse_never_panics(
            bytes in proptest::collection::vec(any::<u8>(), 0..64), (src, dst) in ip_pair(),
        ) {
            if let Ok(packet) = UdpPacket::new_checked(&bytes[..]) {
                let _ = packet.payload();
                let _ = UdpRepr::parse(&packet, &src, &dst, true);
            }
        }
    }
}
