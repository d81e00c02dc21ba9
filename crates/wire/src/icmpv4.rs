//! ICMP for IPv4 (RFC 792, RFC 1191 for the next-hop MTU, RFC 1812 §4.3 for routers).
//!
//! Error messages keep the offending datagram as raw bytes (`data`): the stack quotes it
//! (RFC 1812 §4.3.2.3: as much as fits in 576 bytes) and matches it against its sockets by
//! reading it through an [`Ipv4Packet`](crate::Ipv4Packet) view — lossless, and no partial
//! parse of someone else's header can fail here.

use crate::{checksum, read_ipv4, read_u16, write_u16, Error, Result};
use core::fmt;
use std::net::Ipv4Addr;

enum_with_unknown! {
    /// ICMPv4 message type.
    pub enum Icmpv4Message(u8) {
        /// Echo reply.
        EchoReply = 0,
        /// Destination unreachable.
        DstUnreachable = 3,
        /// Redirect.
        Redirect = 5,
        /// Echo request.
        EchoRequest = 8,
        /// Time exceeded.
        TimeExceeded = 11,
        /// Parameter problem.
        ParamProblem = 12,
    }
}

enum_with_unknown! {
    /// Codes of Destination Unreachable (RFC 792, RFC 1122 §3.2.2.1, RFC 1812 §5.2.7.1).
    pub enum Icmpv4DstUnreachable(u8) {
        /// Net unreachable.
        NetUnreachable = 0,
        /// Host unreachable.
        HostUnreachable = 1,
        /// Protocol unreachable.
        ProtoUnreachable = 2,
        /// Port unreachable.
        PortUnreachable = 3,
        /// Fragmentation needed and DF set; the next-hop MTU is in the `mtu` field (RFC 1191).
        FragRequired = 4,
        /// Source route failed.
        SrcRouteFailed = 5,
        /// Destination network unknown.
        DstNetUnknown = 6,
        /// Destination host unknown.
        DstHostUnknown = 7,
        /// Source host isolated.
        SrcHostIsolated = 8,
        /// Network administratively prohibited.
        NetProhibited = 9,
        /// Host administratively prohibited.
        HostProhibited = 10,
        /// Network unreachable for ToS.
        NetUnreachToS = 11,
        /// Host unreachable for ToS.
        HostUnreachToS = 12,
        /// Communication administratively prohibited (RFC 1812), what a firewall `unreach`
        /// action sends.
        AdminProhibited = 13,
        /// Host precedence violation.
        HostPrecedViol = 14,
        /// Precedence cutoff in effect.
        PrecedCutoff = 15,
    }
}

enum_with_unknown! {
    /// Codes of Time Exceeded.
    pub enum Icmpv4TimeExceeded(u8) {
        /// TTL expired in transit.
        TtlExpired = 0,
        /// Fragment reassembly time exceeded.
        FragExpired = 1,
    }
}

enum_with_unknown! {
    /// Codes of Redirect.
    pub enum Icmpv4Redirect(u8) {
        /// Redirect datagrams for the network.
        Net = 0,
        /// Redirect datagrams for the host.
        Host = 1,
        /// Redirect for the type of service and network.
        NetTos = 2,
        /// Redirect for the type of service and host.
        HostTos = 3,
    }
}

enum_with_unknown! {
    /// Codes of Parameter Problem (RFC 792, RFC 1108).
    pub enum Icmpv4ParamProblem(u8) {
        /// The pointer indicates the error.
        AtPointer = 0,
        /// A required option is missing.
        MissingOption = 1,
        /// Bad length.
        BadLength = 2,
    }
}

mod field {
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    pub const ECHO_IDENT: usize = 4;
    pub const ECHO_SEQNO: usize = 6;
    pub const UNUSED: core::ops::Range<usize> = 4..8;
    pub const POINTER: usize = 4;
    pub const GATEWAY: usize = 4;
    pub const MTU: usize = 6;
    pub const DATA: usize = 8;
}

/// Length of the ICMPv4 header (type, code, checksum and the four message-specific bytes).
pub const HEADER_LEN: usize = field::DATA;

/// A read/write view of an ICMPv4 message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    /// Wrap a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Icmpv4Packet<T> {
        Icmpv4Packet { buffer }
    }

    /// Wrap a buffer and check that every getter is in bounds.
    pub fn new_checked(buffer: T) -> Result<Icmpv4Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// `Err(Truncated)` if the buffer is shorter than the 8-byte header.
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

    /// Message type.
    pub fn msg_type(&self) -> Icmpv4Message {
        Icmpv4Message::from(self.buffer.as_ref()[field::TYPE])
    }

    /// Message code.
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Checksum.
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Echo identifier.
    pub fn echo_ident(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::ECHO_IDENT)
    }

    /// Echo sequence number.
    pub fn echo_seq_no(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::ECHO_SEQNO)
    }

    /// Next-hop MTU of a "fragmentation needed" message (RFC 1191 §4).
    pub fn next_hop_mtu(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::MTU)
    }

    /// Pointer of a parameter problem message.
    pub fn pointer(&self) -> u8 {
        self.buffer.as_ref()[field::POINTER]
    }

    /// Gateway of a redirect message.
    pub fn gateway(&self) -> Ipv4Addr {
        read_ipv4(self.buffer.as_ref(), field::GATEWAY)
    }

    /// True if the checksum over the whole buffer verifies. The buffer must be exactly the
    /// ICMP message (the IP payload).
    pub fn verify_checksum(&self) -> bool {
        checksum::data(self.buffer.as_ref()) == !0
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Icmpv4Packet<&'a T> {
    /// Everything after the 8-byte header: echo data, or the quoted datagram of an error.
    pub fn data(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::DATA..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    /// Set the type.
    pub fn set_msg_type(&mut self, value: Icmpv4Message) {
        self.buffer.as_mut()[field::TYPE] = value.into()
    }

    /// Set the code.
    pub fn set_msg_code(&mut self, value: u8) {
        self.buffer.as_mut()[field::CODE] = value
    }

    /// Set the checksum.
    pub fn set_checksum(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, value)
    }

    /// Set the echo identifier.
    pub fn set_echo_ident(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::ECHO_IDENT, value)
    }

    /// Set the echo sequence number.
    pub fn set_echo_seq_no(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::ECHO_SEQNO, value)
    }

    /// Set the next-hop MTU (and zero the unused half before it).
    pub fn set_next_hop_mtu(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::UNUSED.start, 0);
        write_u16(self.buffer.as_mut(), field::MTU, value)
    }

    /// Set the parameter problem pointer (and zero the three unused bytes after it).
    pub fn set_pointer(&mut self, value: u8) {
        let data = self.buffer.as_mut();
        data[field::UNUSED].fill(0);
        data[field::POINTER] = value;
    }

    /// Set the redirect gateway.
    pub fn set_gateway(&mut self, value: Ipv4Addr) {
        self.buffer.as_mut()[field::UNUSED].copy_from_slice(&value.octets())
    }

    /// Zero the four message-specific bytes.
    pub fn clear_reserved(&mut self) {
        self.buffer.as_mut()[field::UNUSED].fill(0)
    }

    /// Everything after the header, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA..]
    }

    /// Compute the checksum over the whole buffer and store it.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let sum = checksum::data(self.buffer.as_ref());
        self.set_checksum(!sum)
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Icmpv4Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// A parsed ICMPv4 message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmpv4Repr<'a> {
    /// Echo request.
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Echo data.
        data: &'a [u8],
    },
    /// Echo reply.
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Echo data.
        data: &'a [u8],
    },
    /// Destination unreachable.
    DstUnreachable {
        /// Code.
        reason: Icmpv4DstUnreachable,
        /// Next-hop MTU for [`Icmpv4DstUnreachable::FragRequired`] (RFC 1191), 0 otherwise.
        mtu: u16,
        /// The offending datagram: IP header and leading payload bytes.
        data: &'a [u8],
    },
    /// Time exceeded.
    TimeExceeded {
        /// Code.
        reason: Icmpv4TimeExceeded,
        /// The offending datagram.
        data: &'a [u8],
    },
    /// Parameter problem.
    ParamProblem {
        /// Code.
        reason: Icmpv4ParamProblem,
        /// Byte offset of the problem within the offending datagram.
        pointer: u8,
        /// The offending datagram.
        data: &'a [u8],
    },
    /// Redirect.
    Redirect {
        /// Code.
        code: Icmpv4Redirect,
        /// The better first hop.
        gateway: Ipv4Addr,
        /// The datagram that caused the redirect.
        data: &'a [u8],
    },
}

impl<'a> Icmpv4Repr<'a> {
    /// Read a message. The buffer must be exactly the ICMP message (the IP payload).
    /// `Err(Checksum)` if `verify_checksum` and it does not verify; `Err(Unsupported)` for
    /// types not represented here.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Icmpv4Packet<&'a T>,
        verify_checksum: bool,
    ) -> Result<Icmpv4Repr<'a>> {
        packet.check_len()?;
        if verify_checksum && !packet.verify_checksum() {
            return Err(Error::Checksum);
        }
        let code = packet.msg_code();
        let data = packet.data();
        match packet.msg_type() {
            Icmpv4Message::EchoRequest if code == 0 => Ok(Icmpv4Repr::EchoRequest {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data,
            }),
            Icmpv4Message::EchoReply if code == 0 => Ok(Icmpv4Repr::EchoReply {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data,
            }),
            Icmpv4Message::DstUnreachable => Ok(Icmpv4Repr::DstUnreachable {
                reason: Icmpv4DstUnreachable::from(code),
                mtu: packet.next_hop_mtu(),
                data,
            }),
            Icmpv4Message::TimeExceeded => Ok(Icmpv4Repr::TimeExceeded {
                reason: Icmpv4TimeExceeded::from(code),
                data,
            }),
            Icmpv4Message::ParamProblem => Ok(Icmpv4Repr::ParamProblem {
                reason: Icmpv4ParamProblem::from(code),
                pointer: packet.pointer(),
                data,
            }),
            Icmpv4Message::Redirect => Ok(Icmpv4Repr::Redirect {
                code: Icmpv4Redirect::from(code),
                gateway: packet.gateway(),
                data,
            }),
            Icmpv4Message::EchoRequest | Icmpv4Message::EchoReply => Err(Error::Malformed),
            Icmpv4Message::Unknown(_) => Err(Error::Unsupported),
        }
    }

    /// The data carried after the header.
    pub const fn data(&self) -> &'a [u8] {
        match *self {
            Icmpv4Repr::EchoRequest { data, .. }
            | Icmpv4Repr::EchoReply { data, .. }
            | Icmpv4Repr::DstUnreachable { data, .. }
            | Icmpv4Repr::TimeExceeded { data, .. }
            | Icmpv4Repr::ParamProblem { data, .. }
            | Icmpv4Repr::Redirect { data, .. } => data,
        }
    }

    /// Header plus data.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.data().len()
    }

    /// Write the message and fill the checksum.
    ///
    /// # Panics
    /// If the buffer is shorter than [`buffer_len`](Self::buffer_len). The checksum covers
    /// the whole buffer, so pass a buffer of exactly `buffer_len()` bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Icmpv4Packet<T>) {
        match *self {
            Icmpv4Repr::EchoRequest { ident, seq_no, .. } => {
                packet.set_msg_type(Icmpv4Message::EchoRequest);
                packet.set_msg_code(0);
                packet.set_echo_ident(ident);
                packet.set_echo_seq_no(seq_no);
            }
            Icmpv4Repr::EchoReply { ident, seq_no, .. } => {
                packet.set_msg_type(Icmpv4Message::EchoReply);
                packet.set_msg_code(0);
                packet.set_echo_ident(ident);
                packet.set_echo_seq_no(seq_no);
            }
            Icmpv4Repr::DstUnreachable { reason, mtu, .. } => {
                packet.set_msg_type(Icmpv4Message::DstUnreachable);
                packet.set_msg_code(reason.into());
                packet.set_next_hop_mtu(mtu);
            }
            Icmpv4Repr::TimeExceeded { reason, .. } => {
                packet.set_msg_type(Icmpv4Message::TimeExceeded);
                packet.set_msg_code(reason.into());
                packet.clear_reserved();
            }
            Icmpv4Repr::ParamProblem {
                reason, pointer, ..
            } => {
                packet.set_msg_type(Icmpv4Message::ParamProblem);
                packet.set_msg_code(reason.into());
                packet.set_pointer(pointer);
            }
            Icmpv4Repr::Redirect { code, gateway, .. } => {
                packet.set_msg_type(Icmpv4Message::Redirect);
                packet.set_msg_code(code.into());
                packet.set_gateway(gateway);
            }
        }
        let data = self.data();
        packet.data_mut()[..data.len()].copy_from_slice(data);
        packet.fill_checksum();
    }
}

impl fmt::Display for Icmpv4Repr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => {
                write!(
                    f,
                    "ICMPv4 echo request id={ident} seq={seq_no} len={}",
                    data.len()
                )
            }
            Icmpv4Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                write!(
                    f,
                    "ICMPv4 echo reply id={ident} seq={seq_no} len={}",
                    data.len()
                )
            }
            Icmpv4Repr::DstUnreachable { reason, mtu, .. } => {
                write!(f, "ICMPv4 destination unreachable {reason:?} mtu={mtu}")
            }
            Icmpv4Repr::TimeExceeded { reason, .. } => {
                write!(f, "ICMPv4 time exceeded {reason:?}")
            }
            Icmpv4Repr::ParamProblem {
                reason, pointer, ..
            } => write!(f, "ICMPv4 parameter problem {reason:?} pointer={pointer}"),
            Icmpv4Repr::Redirect { code, gateway, .. } => {
                write!(f, "ICMPv4 redirect {code:?} to {gateway}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // Captured on a Linux veth link (tests/data/linux-veth.txt), IP header removed: echo
    // request id 0x1234 seq 1 with 32 bytes of data ...
    static ECHO_REQUEST: [u8; 40] = [
        0x08, 0x00, 0xf3, 0xc8, 0x12, 0x34, 0x00, 0x01, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16,
        0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25,
        0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f,
    ];

    // ... the kernel's reply ...
    static ECHO_REPLY: [u8; 40] = [
        0x00, 0x00, 0xfb, 0xc8, 0x12, 0x34, 0x00, 0x01, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16,
        0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25,
        0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f,
    ];

    // ... and its port unreachable for UDP 10.0.0.1:40000 -> 10.0.0.2:33434, quoting the
    // whole datagram.
    static PORT_UNREACH: [u8; 50] = [
        0x03, 0x03, 0x11, 0x27, 0x00, 0x00, 0x00, 0x00, 0x45, 0x00, 0x00, 0x2a, 0xab, 0xd9, 0x40,
        0x00, 0x40, 0x11, 0x7a, 0xe7, 0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02, 0x9c, 0x40,
        0x82, 0x9a, 0x00, 0x16, 0xdb, 0x9f, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x20, 0x6d, 0x70, 0x73,
        0x74, 0x61, 0x63, 0x6b, 0x0a,
    ];

    #[test]
    fn parse_echo_request() {
        let packet = Icmpv4Packet::new_checked(&ECHO_REQUEST[..]).unwrap();
        assert_eq!(packet.msg_type(), Icmpv4Message::EchoRequest);
        assert_eq!(packet.msg_code(), 0);
        assert_eq!(packet.echo_ident(), 0x1234);
        assert_eq!(packet.echo_seq_no(), 1);
        assert!(packet.verify_checksum());
        let repr = Icmpv4Repr::parse(&packet, true).unwrap();
        assert_eq!(
            repr,
            Icmpv4Repr::EchoRequest {
                ident: 0x1234,
                seq_no: 1,
                data: &ECHO_REQUEST[8..]
            }
        );
        let mut bytes = [0u8; 40];
        repr.emit(&mut Icmpv4Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, ECHO_REQUEST);
    }

    #[test]
    fn echo_reply_round_trip() {
        let packet = Icmpv4Packet::new_checked(&ECHO_REPLY[..]).unwrap();
        let repr = Icmpv4Repr::parse(&packet, true).unwrap();
        assert_eq!(
            repr,
            Icmpv4Repr::EchoReply {
                ident: 0x1234,
                seq_no: 1,
                data: &ECHO_REQUEST[8..]
            }
        );
        let mut bytes = [0u8; 40];
        repr.emit(&mut Icmpv4Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, ECHO_REPLY);
    }

    #[test]
    fn port_unreachable_round_trip() {
        let bytes = PORT_UNREACH;
        let packet = Icmpv4Packet::new_checked(&bytes[..]).unwrap();
        let repr = Icmpv4Repr::parse(&packet, true).unwrap();
        assert_eq!(
            repr,
            Icmpv4Repr::DstUnreachable {
                reason: Icmpv4DstUnreachable::PortUnreachable,
                mtu: 0,
                data: &PORT_UNREACH[8..]
            }
        );
        let quoted = crate::Ipv4Packet::new_checked(repr.data()).unwrap();
        assert_eq!(quoted.dst_addr(), Ipv4Addr::new(10, 0, 0, 2));
        let udp = crate::UdpPacket::new_checked(quoted.payload()).unwrap();
        assert_eq!((udp.src_port(), udp.dst_port()), (40000, 33434));
        assert_eq!(udp.payload(), b"hello mpstack\n");
        let mut out = [0u8; 50];
        repr.emit(&mut Icmpv4Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes);
    }

    #[test]
    fn bad_checksum_and_unknown_type() {
        let mut bytes = ECHO_REQUEST;
        bytes[9] ^= 0xff;
        let packet = Icmpv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&packet, true), Err(Error::Checksum));
        let mut bytes = ECHO_REQUEST;
        bytes[0] = 13; // timestamp
        let packet = Icmpv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&packet, false), Err(Error::Unsupported));
        assert_eq!(
            Icmpv4Packet::new_checked(&bytes[..7]).unwrap_err(),
            Error::Truncated
        );
    }

    fn build(kind: u8, a: u16, b: u16, c: u8, g: [u8; 4], data: &[u8]) -> Icmpv4Repr<'_> {
        match kind % 6 {
            0 => Icmpv4Repr::EchoRequest {
                ident: a,
                seq_no: b,
                data,
            },
            1 => Icmpv4Repr::EchoReply {
                ident: a,
                seq_no: b,
                data,
            },
            2 => Icmpv4Repr::DstUnreachable {
                reason: c.into(),
                mtu: a,
                data,
            },
            3 => Icmpv4Repr::TimeExceeded {
                reason: c.into(),
                data,
            },
            4 => Icmpv4Repr::ParamProblem {
                reason: c.into(),
                pointer: g[0],
                data,
            },
            _ => Icmpv4Repr::Redirect {
                code: c.into(),
                gateway: g.into(),
                data,
            },
        }
    }

    proptest! {
        #[test]
        fn repr_round_trip(
            kind in any::<u8>(), a in any::<u16>(), b in any::<u16>(), c in any::<u8>(),
            g in any::<[u8; 4]>(), data in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let repr = build(kind, a, b, c, g, &data);
            let mut bytes = vec![0u8; repr.buffer_len()];
            repr.emit(&mut Icmpv4Packet::new_unchecked(&mut bytes[..]));
            let packet = Icmpv4Packet::new_checked(&bytes[..]).unwrap();
            prop_assert_eq!(Icmpv4Repr::parse(&packet, true), Ok(repr));
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(packet) = Icmpv4Packet::new_checked(&bytes[..]) {
                let _ = (packet.gateway(), packet.pointer(), packet.next_hop_mtu());
                if let Ok(repr) = Icmpv4Repr::parse(&packet, false) {
                    let _ = repr.to_string();
                    let mut out = vec![0u8; repr.buffer_len()];
                    repr.emit(&mut Icmpv4Packet::new_unchecked(&mut out[..]));
                }
            }
        }
    }
}
