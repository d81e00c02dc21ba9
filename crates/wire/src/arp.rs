//! ARP (RFC 826).
//!
//! The view handles any hardware/protocol address lengths (the addresses are `&[u8]`
//! slices); the `Repr` only Ethernet/IPv4, which is all the stack speaks.

use crate::ethernet::{EtherType, EthernetAddress};
use crate::{read_ipv4, read_u16, write_u16, Error, Result};
use core::fmt;
use std::net::Ipv4Addr;

enum_with_unknown! {
    /// ARP hardware type (IANA "Hardware Types").
    pub enum ArpHardware(u16) {
        /// Ethernet (10Mb), used for every IEEE 802 MAC.
        Ethernet = 1,
    }
}

enum_with_unknown! {
    /// ARP opcode.
    pub enum ArpOperation(u16) {
        /// Who has `target_protocol_addr`?
        Request = 1,
        /// `source_protocol_addr` is at `source_hardware_addr`.
        Reply = 2,
    }
}

mod field {
    #![allow(non_snake_case)]
    use core::ops::Range;

    pub const HTYPE: usize = 0;
    pub const PTYPE: usize = 2;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: usize = 6;
    pub const ADDRESSES: usize = 8;

    pub const fn SHA(hlen: usize, _plen: usize) -> Range<usize> {
        ADDRESSES..ADDRESSES + hlen
    }
    pub const fn SPA(hlen: usize, plen: usize) -> Range<usize> {
        let start = ADDRESSES + hlen;
        start..start + plen
    }
    pub const fn THA(hlen: usize, plen: usize) -> Range<usize> {
        let start = ADDRESSES + hlen + plen;
        start..start + hlen
    }
    pub const fn TPA(hlen: usize, plen: usize) -> Range<usize> {
        let start = ADDRESSES + 2 * hlen + plen;
        start..start + plen
    }
}

/// Length of an Ethernet/IPv4 ARP packet.
pub const ETHERNET_IPV4_LEN: usize = 28;

/// A read/write view of an ARP packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wrap a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> ArpPacket<T> {
        ArpPacket { buffer }
    }

    /// Wrap a buffer and check that every getter is in bounds.
    pub fn new_checked(buffer: T) -> Result<ArpPacket<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// `Err(Truncated)` unless the buffer holds the fixed part and all four addresses at the
    /// lengths the packet announces.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < field::ADDRESSES {
            return Err(Error::Truncated);
        }
        let hlen = usize::from(self.hardware_len());
        let plen = usize::from(self.protocol_len());
        if len < field::TPA(hlen, plen).end {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Hardware type.
    pub fn hardware_type(&self) -> ArpHardware {
        ArpHardware::from(read_u16(self.buffer.as_ref(), field::HTYPE))
    }

    /// Protocol type (an EtherType).
    pub fn protocol_type(&self) -> EtherType {
        EtherType::from(read_u16(self.buffer.as_ref(), field::PTYPE))
    }

    /// Hardware address length.
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }

    /// Protocol address length.
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }

    /// Opcode.
    pub fn operation(&self) -> ArpOperation {
        ArpOperation::from(read_u16(self.buffer.as_ref(), field::OPER))
    }

    fn lens(&self) -> (usize, usize) {
        (
            usize::from(self.hardware_len()),
            usize::from(self.protocol_len()),
        )
    }

    /// Sender hardware address.
    pub fn source_hardware_addr(&self) -> &[u8] {
        let (h, p) = self.lens();
        &self.buffer.as_ref()[field::SHA(h, p)]
    }

    /// Sender protocol address.
    pub fn source_protocol_addr(&self) -> &[u8] {
        let (h, p) = self.lens();
        &self.buffer.as_ref()[field::SPA(h, p)]
    }

    /// Target hardware address.
    pub fn target_hardware_addr(&self) -> &[u8] {
        let (h, p) = self.lens();
        &self.buffer.as_ref()[field::THA(h, p)]
    }

    /// Target protocol address.
    pub fn target_protocol_addr(&self) -> &[u8] {
        let (h, p) = self.lens();
        &self.buffer.as_ref()[field::TPA(h, p)]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Set the hardware type.
    pub fn set_hardware_type(&mut self, value: ArpHardware) {
        write_u16(self.buffer.as_mut(), field::HTYPE, value.into())
    }

    /// Set the protocol type.
    pub fn set_protocol_type(&mut self, value: EtherType) {
        write_u16(self.buffer.as_mut(), field::PTYPE, value.into())
    }

    /// Set the hardware address length.
    pub fn set_hardware_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::HLEN] = value
    }

    /// Set the protocol address length.
    pub fn set_protocol_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::PLEN] = value
    }

    /// Set the opcode.
    pub fn set_operation(&mut self, value: ArpOperation) {
        write_u16(self.buffer.as_mut(), field::OPER, value.into())
    }

    /// Set the sender hardware address (`value.len()` must equal `hardware_len()`).
    pub fn set_source_hardware_addr(&mut self, value: &[u8]) {
        let (h, p) = self.lens();
        self.buffer.as_mut()[field::SHA(h, p)].copy_from_slice(value)
    }

    /// Set the sender protocol address (`value.len()` must equal `protocol_len()`).
    pub fn set_source_protocol_addr(&mut self, value: &[u8]) {
        let (h, p) = self.lens();
        self.buffer.as_mut()[field::SPA(h, p)].copy_from_slice(value)
    }

    /// Set the target hardware address.
    pub fn set_target_hardware_addr(&mut self, value: &[u8]) {
        let (h, p) = self.lens();
        self.buffer.as_mut()[field::THA(h, p)].copy_from_slice(value)
    }

    /// Set the target protocol address.
    pub fn set_target_protocol_addr(&mut self, value: &[u8]) {
        let (h, p) = self.lens();
        self.buffer.as_mut()[field::TPA(h, p)].copy_from_slice(value)
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for ArpPacket<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// A parsed ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArpRepr {
    /// ARP for IPv4 over Ethernet, the only kind in use.
    EthernetIpv4 {
        /// Request or reply (or another opcode, kept raw).
        operation: ArpOperation,
        /// Sender MAC.
        source_hardware_addr: EthernetAddress,
        /// Sender IPv4 address.
        source_protocol_addr: Ipv4Addr,
        /// Target MAC (zero in a request).
        target_hardware_addr: EthernetAddress,
        /// Target IPv4 address.
        target_protocol_addr: Ipv4Addr,
    },
}

impl ArpRepr {
    /// Read an ARP packet. `Err(Unsupported)` for anything but Ethernet/IPv4 with address
    /// lengths 6 and 4.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &ArpPacket<&T>) -> Result<ArpRepr> {
        packet.check_len()?;
        match (
            packet.hardware_type(),
            packet.protocol_type(),
            packet.hardware_len(),
            packet.protocol_len(),
        ) {
            (ArpHardware::Ethernet, EtherType::Ipv4, 6, 4) => Ok(ArpRepr::EthernetIpv4 {
                operation: packet.operation(),
                source_hardware_addr: EthernetAddress::from_bytes(packet.source_hardware_addr()),
                source_protocol_addr: read_ipv4(packet.source_protocol_addr(), 0),
                target_hardware_addr: EthernetAddress::from_bytes(packet.target_hardware_addr()),
                target_protocol_addr: read_ipv4(packet.target_protocol_addr(), 0),
            }),
            _ => Err(Error::Unsupported),
        }
    }

    /// 28.
    pub const fn buffer_len(&self) -> usize {
        match self {
            ArpRepr::EthernetIpv4 { .. } => ETHERNET_IPV4_LEN,
        }
    }

    /// Write the packet.
    ///
    /// # Panics
    /// If the buffer is shorter than [`buffer_len`](Self::buffer_len).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut ArpPacket<T>) {
        match *self {
            ArpRepr::EthernetIpv4 {
                operation,
                source_hardware_addr,
                source_protocol_addr,
                target_hardware_addr,
                target_protocol_addr,
            } => {
                packet.set_hardware_type(ArpHardware::Ethernet);
                packet.set_protocol_type(EtherType::Ipv4);
                packet.set_hardware_len(6);
                packet.set_protocol_len(4);
                packet.set_operation(operation);
                packet.set_source_hardware_addr(&source_hardware_addr.0);
                packet.set_source_protocol_addr(&source_protocol_addr.octets());
                packet.set_target_hardware_addr(&target_hardware_addr.0);
                packet.set_target_protocol_addr(&target_protocol_addr.octets());
            }
        }
    }
}

impl fmt::Display for ArpRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArpRepr::EthernetIpv4 {
                operation,
                source_hardware_addr,
                source_protocol_addr,
                target_hardware_addr,
                target_protocol_addr,
            } => match operation {
                ArpOperation::Request => write!(
                    f,
                    "ARP who-has {target_protocol_addr} tell {source_protocol_addr} \
                     ({source_hardware_addr})"
                ),
                ArpOperation::Reply => write!(
                    f,
                    "ARP reply {source_protocol_addr} is-at {source_hardware_addr} \
                     to {target_protocol_addr} ({target_hardware_addr})"
                ),
                ArpOperation::Unknown(op) => write!(
                    f,
                    "ARP op={op} {source_protocol_addr}/{source_hardware_addr} -> \
                     {target_protocol_addr}/{target_hardware_addr}"
                ),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // Captured on a Linux veth link (tests/data/linux-veth.txt), Ethernet header removed:
    // who-has 10.0.0.2 tell 10.0.0.1 ...
    static REQUEST: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x0a,
        0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x02,
    ];

    // ... and the answer: 10.0.0.2 is-at 02:00:00:00:00:02.
    static REPLY: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x0a,
        0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x01,
    ];

    fn request_repr() -> ArpRepr {
        ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: EthernetAddress([0x02, 0, 0, 0, 0, 0x01]),
            source_protocol_addr: Ipv4Addr::new(10, 0, 0, 1),
            target_hardware_addr: EthernetAddress::UNSPECIFIED,
            target_protocol_addr: Ipv4Addr::new(10, 0, 0, 2),
        }
    }

    #[test]
    fn parse_request() {
        let packet = ArpPacket::new_checked(&REQUEST[..]).unwrap();
        assert_eq!(packet.hardware_type(), ArpHardware::Ethernet);
        assert_eq!(packet.protocol_type(), EtherType::Ipv4);
        assert_eq!(packet.hardware_len(), 6);
        assert_eq!(packet.protocol_len(), 4);
        assert_eq!(packet.operation(), ArpOperation::Request);
        assert_eq!(packet.target_protocol_addr(), &[10, 0, 0, 2]);
        assert_eq!(ArpRepr::parse(&packet), Ok(request_repr()));
        assert_eq!(
            request_repr().to_string(),
            "ARP who-has 10.0.0.2 tell 10.0.0.1 (02:00:00:00:00:01)"
        );
    }

    #[test]
    fn emit_request_and_reply() {
        let mut bytes = [0u8; 28];
        request_repr().emit(&mut ArpPacket::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, REQUEST);

        let reply = ArpRepr::parse(&ArpPacket::new_checked(&REPLY[..]).unwrap()).unwrap();
        assert_eq!(
            reply.to_string(),
            "ARP reply 10.0.0.2 is-at 02:00:00:00:00:02 to 10.0.0.1 (02:00:00:00:00:01)"
        );
        let mut bytes = [0u8; 28];
        reply.emit(&mut ArpPacket::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, REPLY);
    }

    #[test]
    fn rejects_short_and_foreign() {
        assert_eq!(
            ArpPacket::new_checked(&REQUEST[..27]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            ArpPacket::new_checked(&REQUEST[..7]).unwrap_err(),
            Error::Truncated
        );
        // ARP over IEEE 802 with IPv6-length protocol addresses: readable, not representable.
        let mut bytes = [0u8; 8 + 2 * (6 + 16)];
        bytes[..8].copy_from_slice(&[0x00, 0x06, 0x86, 0xdd, 6, 16, 0, 1]);
        let packet = ArpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.target_protocol_addr().len(), 16);
        assert_eq!(ArpRepr::parse(&packet), Err(Error::Unsupported));
    }

    proptest! {
        #[test]
        fn repr_round_trip(
            op in any::<u16>(),
            sha in any::<[u8; 6]>(), spa in any::<[u8; 4]>(),
            tha in any::<[u8; 6]>(), tpa in any::<[u8; 4]>(),
        ) {
            let repr = ArpRepr::EthernetIpv4 {
                operation: ArpOperation::from(op),
                source_hardware_addr: EthernetAddress(sha),
                source_protocol_addr: Ipv4Addr::from(spa),
                target_hardware_addr: EthernetAddress(tha),
                target_protocol_addr: Ipv4Addr::from(tpa),
            };
            let mut bytes = vec![0u8; repr.buffer_len()];
            repr.emit(&mut ArpPacket::new_unchecked(&mut bytes[..]));
            prop_assert_eq!(ArpRepr::parse(&ArpPacket::new_checked(&bytes[..]).unwrap()), Ok(repr));
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            if let Ok(packet) = ArpPacket::new_checked(&bytes[..]) {
                let _ = (packet.source_hardware_addr(), packet.source_protocol_addr());
                let _ = (packet.target_hardware_addr(), packet.target_protocol_addr());
                if let Ok(repr) = ArpRepr::parse(&packet) {
                    let _ = repr.to_string();
                }
            }
        }
    }
}
