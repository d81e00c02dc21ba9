//! Ethernet II frames (IEEE 802.3 clause 3.2.6 with an EtherType) and 802.1Q VLAN tags.
//!
//! A tagged frame is read as an [`EthernetFrame`] whose `ethertype()` is
//! [`EtherType::Vlan`] (or [`EtherType::QinQ`] for an 802.1ad outer tag), followed by a
//! [`VlanHeader`] over `payload()` whose own `ethertype()` says what comes next.

use crate::{read_u16, write_u16, Error, Result};
use core::fmt;
use core::str::FromStr;
use std::net::{Ipv4Addr, Ipv6Addr};

enum_with_unknown! {
    /// EtherType values (IEEE registry).
    pub enum EtherType(u16) {
        /// IPv4 (RFC 894).
        Ipv4 = 0x0800,
        /// ARP (RFC 826).
        Arp = 0x0806,
        /// IPv6 (RFC 2464).
        Ipv6 = 0x86dd,
        /// IEEE 802.1Q customer VLAN tag.
        Vlan = 0x8100,
        /// IEEE 802.1ad service VLAN tag (Q-in-Q outer tag).
        QinQ = 0x88a8,
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EtherType::Ipv4 => f.write_str("IPv4"),
            EtherType::Arp => f.write_str("ARP"),
            EtherType::Ipv6 => f.write_str("IPv6"),
            EtherType::Vlan => f.write_str("802.1Q"),
            EtherType::QinQ => f.write_str("802.1ad"),
            EtherType::Unknown(t) => write!(f, "0x{t:04x}"),
        }
    }
}

/// A 48-bit IEEE MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);
    /// 00:00:00:00:00:00 (ARP requests put it in the target hardware address).
    pub const UNSPECIFIED: EthernetAddress = EthernetAddress([0; 6]);

    /// Make an address from a six-byte slice.
    ///
    /// # Panics
    /// If `data` is not exactly six bytes long (as in smoltcp; views hand out slices of the
    /// right length, so this only fires on programming errors).
    pub fn from_bytes(data: &[u8]) -> EthernetAddress {
        let mut bytes = [0u8; 6];
        bytes.copy_from_slice(data);
        EthernetAddress(bytes)
    }

    /// The six bytes.
    pub const fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// ff:ff:ff:ff:ff:ff.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// The I/G bit is set (broadcast included).
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// Not multicast (and so not broadcast).
    pub const fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// The U/L bit is set: a locally administered address.
    pub const fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }

    /// The multicast MAC an IPv4 multicast group maps onto (RFC 1112 §6.4: 01:00:5e and the
    /// low 23 bits of the group).
    pub const fn from_ipv4_multicast(group: Ipv4Addr) -> EthernetAddress {
        let o = group.octets();
        EthernetAddress([0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]])
    }

    /// The multicast MAC an IPv6 multicast group maps onto (RFC 2464 §7: 33:33 and the low
    /// 32 bits of the group).
    pub const fn from_ipv6_multicast(group: Ipv6Addr) -> EthernetAddress {
        let o = group.octets();
        EthernetAddress([0x33, 0x33, o[12], o[13], o[14], o[15]])
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl FromStr for EthernetAddress {
    type Err = Error;

    /// Parse `aa:bb:cc:dd:ee:ff` (also with `-` separators, as Windows prints them).
    fn from_str(s: &str) -> Result<Self> {
        let mut bytes = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for byte in &mut bytes {
            let part = parts.next().ok_or(Error::Malformed)?;
            if part.is_empty() || part.len() > 2 {
                return Err(Error::Malformed);
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| Error::Malformed)?;
        }
        if parts.next().is_some() {
            return Err(Error::Malformed);
        }
        Ok(EthernetAddress(bytes))
    }
}

mod field {
    use core::ops::{Range, RangeFrom};
    pub const DESTINATION: Range<usize> = 0..6;
    pub const SOURCE: Range<usize> = 6..12;
    pub const ETHERTYPE: usize = 12;
    pub const PAYLOAD: RangeFrom<usize> = 14..;
}

/// Length of an Ethernet II header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// A read/write view of an Ethernet II frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wrap a buffer without checking it (see the crate's no-panic contract).
    pub const fn new_unchecked(buffer: T) -> EthernetFrame<T> {
        EthernetFrame { buffer }
    }

    /// Wrap a buffer and check that every getter is in bounds.
    pub fn new_checked(buffer: T) -> Result<EthernetFrame<T>> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    /// `Err(Truncated)` if the buffer is shorter than the 14-byte header.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// 14.
    pub const fn header_len() -> usize {
        HEADER_LEN
    }

    /// Header plus `payload_len`.
    pub const fn buffer_len(payload_len: usize) -> usize {
        HEADER_LEN + payload_len
    }

    /// Destination MAC.
    pub fn dst_addr(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(&self.buffer.as_ref()[field::DESTINATION])
    }

    /// Source MAC.
    pub fn src_addr(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(&self.buffer.as_ref()[field::SOURCE])
    }

    /// EtherType.
    pub fn ethertype(&self) -> EtherType {
        EtherType::from(read_u16(self.buffer.as_ref(), field::ETHERTYPE))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> EthernetFrame<&'a T> {
    /// Everything after the header, with the lifetime of the buffer.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Set the destination MAC.
    pub fn set_dst_addr(&mut self, value: EthernetAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&value.0)
    }

    /// Set the source MAC.
    pub fn set_src_addr(&mut self, value: EthernetAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&value.0)
    }

    /// Set the EtherType.
    pub fn set_ethertype(&mut self, value: EtherType) {
        write_u16(self.buffer.as_mut(), field::ETHERTYPE, value.into())
    }

    /// Everything after the header, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for EthernetFrame<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

impl<T: AsRef<[u8]>> fmt::Display for EthernetFrame<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.check_len().is_err() {
            return f.write_str("EthernetII (truncated)");
        }
        write!(
            f,
            "EthernetII src={} dst={} type={}",
            self.src_addr(),
            self.dst_addr(),
            self.ethertype()
        )
    }
}

/// The parsed Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Source MAC.
    pub src_addr: EthernetAddress,
    /// Destination MAC.
    pub dst_addr: EthernetAddress,
    /// What the payload is.
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// Read the header of a frame.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(frame: &EthernetFrame<&T>) -> Result<EthernetRepr> {
        frame.check_len()?;
        Ok(EthernetRepr {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            ethertype: frame.ethertype(),
        })
    }

    /// 14.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the header into `frame`.
    ///
    /// # Panics
    /// If the buffer is shorter than [`buffer_len`](Self::buffer_len).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) {
        frame.set_src_addr(self.src_addr);
        frame.set_dst_addr(self.dst_addr);
        frame.set_ethertype(self.ethertype);
    }
}

mod vlan_field {
    pub const TCI: usize = 0;
    pub const ETHERTYPE: usize = 2;
    pub const PAYLOAD: usize = 4;
}

/// Length of an 802.1Q tag as it follows the outer EtherType.
pub const VLAN_HEADER_LEN: usize = vlan_field::PAYLOAD;

/// A view of an IEEE 802.1Q tag: the four bytes (TCI, inner EtherType) that follow an
/// outer EtherType of `0x8100` (or `0x88a8`), and the payload after them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VlanHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanHeader<T> {
    /// Wrap a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> VlanHeader<T> {
        VlanHeader { buffer }
    }

    /// Wrap a buffer and check that every getter is in bounds.
    pub fn new_checked(buffer: T) -> Result<VlanHeader<T>> {
        let header = Self::new_unchecked(buffer);
        header.check_len()?;
        Ok(header)
    }

    /// `Err(Truncated)` if the buffer is shorter than four bytes.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < VLAN_HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// 4.
    pub const fn header_len() -> usize {
        VLAN_HEADER_LEN
    }

    /// Tag control information: PCP (3 bits), DEI (1 bit), VID (12 bits).
    pub fn tci(&self) -> u16 {
        read_u16(self.buffer.as_ref(), vlan_field::TCI)
    }

    /// Priority code point (IEEE 802.1p class of service).
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop eligible indicator.
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN identifier (0 = priority tag only, 4095 reserved).
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }

    /// EtherType of what follows the tag.
    pub fn ethertype(&self) -> EtherType {
        EtherType::from(read_u16(self.buffer.as_ref(), vlan_field::ETHERTYPE))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> VlanHeader<&'a T> {
    /// Everything after the tag.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[vlan_field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanHeader<T> {
    /// Set the whole TCI.
    pub fn set_tci(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), vlan_field::TCI, value)
    }

    /// Set the priority code point (low three bits of `value`).
    pub fn set_pcp(&mut self, value: u8) {
        let tci = (self.tci() & 0x1fff) | (u16::from(value & 0x7) << 13);
        self.set_tci(tci)
    }

    /// Set the drop eligible indicator.
    pub fn set_dei(&mut self, value: bool) {
        let tci = (self.tci() & !0x1000) | if value { 0x1000 } else { 0 };
        self.set_tci(tci)
    }

    /// Set the VLAN identifier (low twelve bits of `value`).
    pub fn set_vid(&mut self, value: u16) {
        let tci = (self.tci() & 0xf000) | (value & 0x0fff);
        self.set_tci(tci)
    }

    /// Set the inner EtherType.
    pub fn set_ethertype(&mut self, value: EtherType) {
        write_u16(self.buffer.as_mut(), vlan_field::ETHERTYPE, value.into())
    }

    /// Everything after the tag, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[vlan_field::PAYLOAD..]
    }
}

/// A parsed 802.1Q tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanRepr {
    /// Priority code point, 0..=7.
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier, 0..=4095.
    pub vid: u16,
    /// EtherType of what follows.
    pub ethertype: EtherType,
}

impl VlanRepr {
    /// Read a tag.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(header: &VlanHeader<&T>) -> Result<VlanRepr> {
        header.check_len()?;
        Ok(VlanRepr {
            pcp: header.pcp(),
            dei: header.dei(),
            vid: header.vid(),
            ethertype: header.ethertype(),
        })
    }

    /// 4.
    pub const fn buffer_len(&self) -> usize {
        VLAN_HEADER_LEN
    }

    /// Write the tag. Out-of-range `pcp`/`vid` are masked to their field widths.
    ///
    /// # Panics
    /// If the buffer is shorter than four bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut VlanHeader<T>) {
        let tci = (u16::from(self.pcp & 0x7) << 13)
            | if self.dei { 0x1000 } else { 0 }
            | (self.vid & 0x0fff);
        header.set_tci(tci);
        header.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // Captured on a Linux veth link (see tests/data/linux-veth.txt): ARP who-has 10.0.0.2
    // tell 10.0.0.1, from 02:00:00:00:00:01 to broadcast.
    static ARP_FRAME: [u8; 42] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00,
        0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x0a, 0x00,
        0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x02,
    ];

    // The same request with an 802.1Q tag (VLAN 100, PCP 5) inserted after the source
    // address, as a Linux vlan device with egress-qos-map 0:5 sends it.
    static VLAN_FRAME: [u8; 46] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x81, 0x00, 0xa0,
        0x64, 0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00,
        0x00, 0x01, 0x0a, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00,
        0x02,
    ];

    #[test]
    fn parse_arp_frame() {
        let frame = EthernetFrame::new_checked(&ARP_FRAME[..]).unwrap();
        assert_eq!(frame.dst_addr(), EthernetAddress::BROADCAST);
        assert_eq!(frame.src_addr(), EthernetAddress([0x02, 0, 0, 0, 0, 0x01]));
        assert_eq!(frame.ethertype(), EtherType::Arp);
        assert_eq!(frame.payload().len(), 28);
        let repr = EthernetRepr::parse(&frame).unwrap();
        let mut bytes = ARP_FRAME;
        bytes[..14].fill(0);
        repr.emit(&mut EthernetFrame::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, ARP_FRAME);
    }

    #[test]
    fn parse_vlan_tag() {
        let frame = EthernetFrame::new_checked(&VLAN_FRAME[..]).unwrap();
        assert_eq!(frame.ethertype(), EtherType::Vlan);
        let tag = VlanHeader::new_checked(frame.payload()).unwrap();
        assert_eq!(tag.pcp(), 5);
        assert!(!tag.dei());
        assert_eq!(tag.vid(), 100);
        assert_eq!(tag.ethertype(), EtherType::Arp);
        assert_eq!(tag.payload(), &ARP_FRAME[14..]);
        let repr = VlanRepr::parse(&tag).unwrap();
        let mut bytes = [0u8; 4];
        repr.emit(&mut VlanHeader::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, VLAN_FRAME[14..18]);
    }

    #[test]
    fn truncated_frames_are_rejected() {
        assert_eq!(
            EthernetFrame::new_checked(&ARP_FRAME[..13]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            VlanHeader::new_checked(&[0u8; 3][..]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn address_text_and_classes() {
        let a: EthernetAddress = "02:00:5e:10:00:0a".parse().unwrap();
        assert_eq!(a, EthernetAddress([0x02, 0x00, 0x5e, 0x10, 0x00, 0x0a]));
        assert_eq!(a.to_string(), "02:00:5e:10:00:0a");
        assert!(a.is_unicast() && a.is_local() && !a.is_multicast());
        assert!(EthernetAddress::BROADCAST.is_broadcast());
        assert!(EthernetAddress::BROADCAST.is_multicast());
        assert_eq!(
            "0-1-2-3-4-5".parse::<EthernetAddress>().unwrap().0,
            [0, 1, 2, 3, 4, 5]
        );
        assert!("02:00:5e:10:00".parse::<EthernetAddress>().is_err());
        assert!("02:00:5e:10:00:0a:01".parse::<EthernetAddress>().is_err());
        assert!("02:00:5e:10:00:zz".parse::<EthernetAddress>().is_err());
        assert_eq!(
            EthernetAddress::from_ipv4_multicast(Ipv4Addr::new(224, 129, 2, 3)).to_string(),
            "01:00:5e:01:02:03"
        );
        assert_eq!(
            EthernetAddress::from_ipv6_multicast("ff02::1:ff00:1234".parse().unwrap()).to_string(),
            "33:33:ff:00:12:34"
        );
    }

    fn ethernet_address() -> impl Strategy<Value = EthernetAddress> {
        any::<[u8; 6]>().prop_map(EthernetAddress)
    }

    proptest! {
        #[test]
        fn repr_round_trip(src in ethernet_address(), dst in ethernet_address(), t in any::<u16>()) {
            let repr = EthernetRepr { src_addr: src, dst_addr: dst, ethertype: EtherType::from(t) };
            let mut bytes = vec![0u8; repr.buffer_len()];
            repr.emit(&mut EthernetFrame::new_unchecked(&mut bytes[..]));
            let parsed = EthernetRepr::parse(&EthernetFrame::new_checked(&bytes[..]).unwrap());
            prop_assert_eq!(parsed, Ok(repr));
        }

        #[test]
        fn vlan_round_trip(pcp in 0u8..8, dei in any::<bool>(), vid in 0u16..4096, t in any::<u16>()) {
            let repr = VlanRepr { pcp, dei, vid, ethertype: EtherType::from(t) };
            let mut bytes = [0u8; 4];
            repr.emit(&mut VlanHeader::new_unchecked(&mut bytes[..]));
            prop_assert_eq!(VlanRepr::parse(&VlanHeader::new_unchecked(&bytes[..])), Ok(repr));
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(frame) = EthernetFrame::new_checked(&bytes[..]) {
                let _ = EthernetRepr::parse(&frame);
                let _ = frame.to_string();
                if let Ok(tag) = VlanHeader::new_checked(frame.payload()) {
                    let _ = VlanRepr::parse(&tag);
                    let _ = tag.payload();
                }
            }
            let _ = core::str::from_utf8(&bytes).map(|s| s.parse::<EthernetAddress>());
        }
    }
}
