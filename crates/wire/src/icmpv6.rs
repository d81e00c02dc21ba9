//! ICMP for IPv6 (RFC 4443), with the neighbour discovery messages of RFC 4861 (bodies and
//! options in [`ndp`](crate::ndp)) and the MLDv2 messages of RFC 3810 (minimal: query and
//! report, address records readable one by one).
//!
//! The checksum covers the IPv6 pseudo-header (RFC 8200 §8.1); with a routing header the
//! destination in it is the *final* destination.

use crate::ndp::NdiscRepr;
use crate::{checksum, read_ipv6, read_u16, read_u32, write_u16, write_u32, Error};
use crate::{IpProtocol, Result};
use core::fmt;
use std::net::{IpAddr, Ipv6Addr};

enum_with_unknown! {
    /// ICMPv6 message type.
    pub enum Icmpv6Message(u8) {
        /// Destination unreachable.
        DstUnreachable = 1,
        /// Packet too big.
        PktTooBig = 2,
        /// Time exceeded.
        TimeExceeded = 3,
        /// Parameter problem.
        ParamProblem = 4,
        /// Echo request.
        EchoRequest = 128,
        /// Echo reply.
        EchoReply = 129,
        /// Multicast listener query (RFC 2710 / RFC 3810).
        MldQuery = 130,
        /// MLDv1 report (RFC 2710).
        MldReport = 131,
        /// MLDv1 done (RFC 2710).
        MldDone = 132,
        /// Router solicitation.
        RouterSolicit = 133,
        /// Router advertisement.
        RouterAdvert = 134,
        /// Neighbor solicitation.
        NeighborSolicit = 135,
        /// Neighbor advertisement.
        NeighborAdvert = 136,
        /// Redirect.
        Redirect = 137,
        /// MLDv2 report (RFC 3810 §5.2).
        MldV2Report = 143,
    }
}

impl Icmpv6Message {
    /// True for error messages (type < 128, RFC 4443 §2.1).
    pub fn is_error(&self) -> bool {
        u8::from(*self) < 128
    }
}

enum_with_unknown! {
    /// Codes of Destination Unreachable (RFC 4443 §3.1).
    pub enum Icmpv6DstUnreachable(u8) {
        /// No route to destination.
        NoRoute = 0,
        /// Communication administratively prohibited.
        AdminProhibit = 1,
        /// Beyond scope of source address.
        BeyondScope = 2,
        /// Address unreachable.
        AddrUnreachable = 3,
        /// Port unreachable.
        PortUnreachable = 4,
        /// Source address failed ingress/egress policy.
        FailedPolicy = 5,
        /// Reject route to destination.
        RejectRoute = 6,
    }
}

enum_with_unknown! {
    /// Codes of Time Exceeded (RFC 4443 §3.3).
    pub enum Icmpv6TimeExceeded(u8) {
        /// Hop limit exceeded in transit.
        HopLimitExceeded = 0,
        /// Fragment reassembly time exceeded.
        FragReassemExceeded = 1,
    }
}

enum_with_unknown! {
    /// Codes of Parameter Problem (RFC 4443 §3.4, RFC 7112).
    pub enum Icmpv6ParamProblem(u8) {
        /// Erroneous header field encountered.
        ErroneousHdrField = 0,
        /// Unrecognized next header type encountered.
        UnrecognizedNxtHdr = 1,
        /// Unrecognized IPv6 option encountered.
        UnrecognizedOption = 2,
        /// First fragment has an incomplete header chain (RFC 7112).
        IncompleteChain = 3,
    }
}

mod field {
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    pub const ECHO_IDENT: usize = 4;
    pub const ECHO_SEQNO: usize = 6;
    pub const MTU: usize = 4;
    pub const POINTER: usize = 4;
    pub const UNUSED: core::ops::Range<usize> = 4..8;
    pub const HEADER_END: usize = 8;

    // RFC 4861 §4.2 router advertisement.
    pub const CUR_HOP_LIMIT: usize = 4;
    pub const ROUTER_FLAGS: usize = 5;
    pub const ROUTER_LT: usize = 6;
    pub const REACHABLE_TM: usize = 8;
    pub const RETRANS_TM: usize = 12;
    // RFC 4861 §4.3–§4.5 neighbor solicitation/advertisement, redirect.
    pub const NEIGH_FLAGS: usize = 4;
    pub const TARGET_ADDR: usize = 8;
    pub const DEST_ADDR: usize = 24;

    // RFC 3810 §5.1 query, §5.2 report.
    pub const MAX_RESP_CODE: usize = 4;
    pub const QUERY_MCAST_ADDR: usize = 8;
    pub const SQRV: usize = 24;
    pub const QQIC: usize = 25;
    pub const QUERY_NUM_SRCS: usize = 26;
    pub const QUERY_SOURCES: usize = 28;
    pub const NR_MCAST_RCRDS: usize = 6;
}

/// Length of the common ICMPv6 header (type, code, checksum, four message bytes).
pub const HEADER_LEN: usize = field::HEADER_END;

/// A read/write view of an ICMPv6 message.
///
/// Getters of message-specific fields (NDP, MLD) read zeros when the message is too short
/// to hold them, so no getter of a checked view panics whatever the type byte says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    /// Wrap a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Icmpv6Packet<T> {
        Icmpv6Packet { buffer }
    }

    /// Wrap a buffer and check that every getter is in bounds.
    pub fn new_checked(buffer: T) -> Result<Icmpv6Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// `Err(Truncated)` if the buffer is shorter than 8 bytes or than the fixed part of its
    /// message type ([`header_len`](Self::header_len)).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || len < self.header_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Length of the fixed part of this message type: 16 for a router advertisement, 24 for
    /// neighbor solicitation/advertisement and MLD query, 40 for redirect, 8 otherwise.
    /// NDP options start here.
    pub fn header_len(&self) -> usize {
        match self.msg_type() {
            Icmpv6Message::RouterAdvert => 16,
            Icmpv6Message::NeighborSolicit
            | Icmpv6Message::NeighborAdvert
            | Icmpv6Message::MldQuery
            | Icmpv6Message::MldReport
            | Icmpv6Message::MldDone => 24,
            Icmpv6Message::Redirect => 40,
            _ => HEADER_LEN,
        }
    }

    fn get<const N: usize>(&self, at: usize) -> [u8; N] {
        let mut out = [0u8; N];
        if let Some(bytes) = self.buffer.as_ref().get(at..at + N) {
            out.copy_from_slice(bytes);
        }
        out
    }

    /// Message type.
    pub fn msg_type(&self) -> Icmpv6Message {
        Icmpv6Message::from(self.buffer.as_ref()[field::TYPE])
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

    /// MTU of a packet too big message.
    pub fn pkt_too_big_mtu(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::MTU)
    }

    /// Pointer of a parameter problem message.
    pub fn param_problem_ptr(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::POINTER)
    }

    /// Router advertisement: current hop limit.
    pub fn current_hop_limit(&self) -> u8 {
        self.get::<1>(field::CUR_HOP_LIMIT)[0]
    }

    /// Router advertisement: M and O flags.
    pub fn router_flags(&self) -> crate::ndp::NdiscRouterFlags {
        crate::ndp::NdiscRouterFlags::from_bits_truncate(self.get::<1>(field::ROUTER_FLAGS)[0])
    }

    /// Router advertisement: router lifetime in seconds.
    pub fn router_lifetime(&self) -> u16 {
        u16::from_be_bytes(self.get(field::ROUTER_LT))
    }

    /// Router advertisement: reachable time in milliseconds.
    pub fn reachable_time(&self) -> u32 {
        u32::from_be_bytes(self.get(field::REACHABLE_TM))
    }

    /// Router advertisement: retransmission timer in milliseconds.
    pub fn retrans_time(&self) -> u32 {
        u32::from_be_bytes(self.get(field::RETRANS_TM))
    }

    /// Neighbor advertisement: R, S and O flags.
    pub fn neighbor_flags(&self) -> crate::ndp::NdiscNeighborFlags {
        crate::ndp::NdiscNeighborFlags::from_bits_truncate(self.get::<1>(field::NEIGH_FLAGS)[0])
    }

    /// Neighbor solicitation/advertisement and redirect: target address.
    pub fn target_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.get::<16>(field::TARGET_ADDR))
    }

    /// Redirect: destination address.
    pub fn dest_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.get::<16>(field::DEST_ADDR))
    }

    /// MLD query: maximum response code.
    pub fn max_resp_code(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::MAX_RESP_CODE)
    }

    /// MLD query: multicast address (unspecified for a general query).
    pub fn mcast_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.get::<16>(field::QUERY_MCAST_ADDR))
    }

    /// MLDv2 query: suppress router-side processing flag.
    pub fn s_flag(&self) -> bool {
        self.get::<1>(field::SQRV)[0] & 0x08 != 0
    }

    /// MLDv2 query: querier's robustness variable.
    pub fn qrv(&self) -> u8 {
        self.get::<1>(field::SQRV)[0] & 0x07
    }

    /// MLDv2 query: querier's query interval code.
    pub fn qqic(&self) -> u8 {
        self.get::<1>(field::QQIC)[0]
    }

    /// MLDv2 query: number of sources.
    pub fn num_srcs(&self) -> u16 {
        u16::from_be_bytes(self.get(field::QUERY_NUM_SRCS))
    }

    /// MLDv2 report: number of multicast address records.
    pub fn nr_mcast_addr_rcrds(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::NR_MCAST_RCRDS)
    }

    /// True if the checksum verifies over the pseudo-header and the whole buffer. The
    /// buffer must be exactly the ICMPv6 message; `dst_addr` is the final destination.
    pub fn verify_checksum(&self, src_addr: &Ipv6Addr, dst_addr: &Ipv6Addr) -> bool {
        let data = self.buffer.as_ref();
        checksum::combine(&[
            checksum::pseudo_header(
                &IpAddr::V6(*src_addr),
                &IpAddr::V6(*dst_addr),
                IpProtocol::Icmpv6,
                data.len() as u32,
            ),
            checksum::data(data),
        ]) == !0
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Icmpv6Packet<&'a T> {
    /// Everything after the common 8-byte header: echo data, the quoted packet of an
    /// error, the body of an NDP or MLD message.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    /// NDP options: everything after [`header_len`](Icmpv6Packet::header_len).
    pub fn options(&self) -> &'a [u8] {
        self.buffer.as_ref().get(self.header_len()..).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    /// Set the type.
    pub fn set_msg_type(&mut self, value: Icmpv6Message) {
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

    /// Set the packet too big MTU.
    pub fn set_pkt_too_big_mtu(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), field::MTU, value)
    }

    /// Set the parameter problem pointer.
    pub fn set_param_problem_ptr(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), field::POINTER, value)
    }

    /// Zero the four message-specific bytes after the checksum.
    pub fn clear_reserved(&mut self) {
        self.buffer.as_mut()[field::UNUSED].fill(0)
    }

    /// Set the router advertisement hop limit.
    pub fn set_current_hop_limit(&mut self, value: u8) {
        self.buffer.as_mut()[field::CUR_HOP_LIMIT] = value
    }

    /// Set the router advertisement flags.
    pub fn set_router_flags(&mut self, value: crate::ndp::NdiscRouterFlags) {
        self.buffer.as_mut()[field::ROUTER_FLAGS] = value.bits()
    }

    /// Set the router lifetime (seconds).
    pub fn set_router_lifetime(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::ROUTER_LT, value)
    }

    /// Set the reachable time (milliseconds).
    pub fn set_reachable_time(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), field::REACHABLE_TM, value)
    }

    /// Set the retransmission timer (milliseconds).
    pub fn set_retrans_time(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), field::RETRANS_TM, value)
    }

    /// Set the neighbor advertisement flags (and zero the reserved bytes after them).
    pub fn set_neighbor_flags(&mut self, value: crate::ndp::NdiscNeighborFlags) {
        let data = self.buffer.as_mut();
        data[field::UNUSED].fill(0);
        data[field::NEIGH_FLAGS] = value.bits();
    }

    /// Set the target address.
    pub fn set_target_addr(&mut self, value: Ipv6Addr) {
        let at = field::TARGET_ADDR;
        self.buffer.as_mut()[at..at + 16].copy_from_slice(&value.octets())
    }

    /// Set the redirect destination address.
    pub fn set_dest_addr(&mut self, value: Ipv6Addr) {
        let at = field::DEST_ADDR;
        self.buffer.as_mut()[at..at + 16].copy_from_slice(&value.octets())
    }

    /// Set the MLD maximum response code.
    pub fn set_max_resp_code(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::MAX_RESP_CODE, value)
    }

    /// Set the MLD query multicast address.
    pub fn set_mcast_addr(&mut self, value: Ipv6Addr) {
        let at = field::QUERY_MCAST_ADDR;
        self.buffer.as_mut()[at..at + 16].copy_from_slice(&value.octets())
    }

    /// Set the MLDv2 report record count.
    pub fn set_nr_mcast_addr_rcrds(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::NR_MCAST_RCRDS, value)
    }

    /// Everything after the common 8-byte header, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }

    /// NDP options, writable.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let at = self.header_len();
        &mut self.buffer.as_mut()[at..]
    }

    /// Compute the checksum over the pseudo-header and the whole buffer and store it.
    pub fn fill_checksum(&mut self, src_addr: &Ipv6Addr, dst_addr: &Ipv6Addr) {
        self.set_checksum(0);
        let data = self.buffer.as_ref();
        let sum = checksum::combine(&[
            checksum::pseudo_header(
                &IpAddr::V6(*src_addr),
                &IpAddr::V6(*dst_addr),
                IpProtocol::Icmpv6,
                data.len() as u32,
            ),
            checksum::data(data),
        ]);
        self.set_checksum(!sum)
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Icmpv6Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

enum_with_unknown! {
    /// MLDv2 multicast address record type (RFC 3810 §5.2.12).
    pub enum MldRecordType(u8) {
        /// Current state: include these sources.
        ModeIsInclude = 1,
        /// Current state: exclude these sources.
        ModeIsExclude = 2,
        /// Filter mode change to include.
        ChangeToInclude = 3,
        /// Filter mode change to exclude.
        ChangeToExclude = 4,
        /// Allow new sources.
        AllowNewSources = 5,
        /// Block old sources.
        BlockOldSources = 6,
    }
}

/// One MLDv2 multicast address record (RFC 3810 §5.2.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MldAddressRecordRepr<'a> {
    /// Record type.
    pub record_type: MldRecordType,
    /// Multicast address.
    pub mcast_addr: Ipv6Addr,
    /// Source addresses, 16 bytes each (iterate with
    /// [`Ipv6AddressIter`](crate::ipv6ext::Ipv6AddressIter)).
    pub sources: &'a [u8],
    /// Auxiliary data (a multiple of 4 bytes).
    pub aux_data: &'a [u8],
}

impl<'a> MldAddressRecordRepr<'a> {
    /// Read one record from the front of `buffer`; return the rest and the record.
    pub fn parse(buffer: &'a [u8]) -> Result<(&'a [u8], MldAddressRecordRepr<'a>)> {
        if buffer.len() < 20 {
            return Err(Error::Truncated);
        }
        let aux_len = usize::from(buffer[1]) * 4;
        let sources_len = usize::from(read_u16(buffer, 2)) * 16;
        let len = 20 + sources_len + aux_len;
        if buffer.len() < len {
            return Err(Error::Truncated);
        }
        let record = MldAddressRecordRepr {
            record_type: MldRecordType::from(buffer[0]),
            mcast_addr: read_ipv6(buffer, 4),
            sources: &buffer[20..20 + sources_len],
            aux_data: &buffer[20 + sources_len..len],
        };
        Ok((&buffer[len..], record))
    }

    /// Bytes the record takes.
    pub const fn buffer_len(&self) -> usize {
        20 + self.sources.len() + self.aux_data.len()
    }

    /// Write the record at the front of `buffer`; return the rest.
    ///
    /// # Panics
    /// If `buffer` is shorter than [`buffer_len`](Self::buffer_len), or `sources` is not a
    /// multiple of 16 bytes, or `aux_data` not a multiple of 4 (up to 1020).
    pub fn emit<'b>(&self, buffer: &'b mut [u8]) -> &'b mut [u8] {
        assert!(self.sources.len().is_multiple_of(16) && self.aux_data.len().is_multiple_of(4));
        let (out, rest) = buffer.split_at_mut(self.buffer_len());
        out[0] = self.record_type.into();
        out[1] = u8::try_from(self.aux_data.len() / 4).expect("aux data too long");
        write_u16(out, 2, (self.sources.len() / 16) as u16);
        out[4..20].copy_from_slice(&self.mcast_addr.octets());
        out[20..20 + self.sources.len()].copy_from_slice(self.sources);
        out[20 + self.sources.len()..].copy_from_slice(self.aux_data);
        rest
    }
}

/// Iterator over the address records of an MLDv2 report. Yields `Err` once and stops if a
/// record runs past the end.
#[derive(Debug, Clone)]
pub struct MldRecordsIter<'a> {
    rest: &'a [u8],
    left: u16,
}

impl<'a> MldRecordsIter<'a> {
    /// Iterate over `count` records in `records`.
    pub const fn new(records: &'a [u8], count: u16) -> MldRecordsIter<'a> {
        MldRecordsIter {
            rest: records,
            left: count,
        }
    }
}

impl<'a> Iterator for MldRecordsIter<'a> {
    type Item = Result<MldAddressRecordRepr<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        match MldAddressRecordRepr::parse(self.rest) {
            Ok((rest, record)) => {
                self.rest = rest;
                self.left -= 1;
                Some(Ok(record))
            }
            Err(e) => {
                self.left = 0;
                Some(Err(e))
            }
        }
    }
}

/// A parsed MLD message (RFC 3810).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MldRepr<'a> {
    /// Multicast listener query. An MLDv1 query (24 bytes) parses with the MLDv2 fields
    /// zero; `emit` always writes the MLDv2 format.
    Query {
        /// Maximum response code.
        max_resp_code: u16,
        /// Multicast address (unspecified for a general query).
        mcast_addr: Ipv6Addr,
        /// Suppress router-side processing.
        s_flag: bool,
        /// Querier's robustness variable.
        qrv: u8,
        /// Querier's query interval code.
        qqic: u8,
        /// Number of sources.
        num_srcs: u16,
        /// The sources, 16 bytes each.
        data: &'a [u8],
    },
    /// MLDv2 report.
    Report {
        /// Number of address records.
        nr_mcast_addr_rcrds: u16,
        /// The records (iterate with [`MldRecordsIter`]).
        data: &'a [u8],
    },
}

impl<'a> MldRepr<'a> {
    /// Read an MLD query or MLDv2 report body.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Icmpv6Packet<&'a T>) -> Result<MldRepr<'a>> {
        packet.check_len()?;
        let bytes: &'a [u8] = packet.buffer.as_ref();
        match packet.msg_type() {
            Icmpv6Message::MldQuery => {
                if bytes.len() < field::QUERY_SOURCES {
                    return Ok(MldRepr::Query {
                        max_resp_code: packet.max_resp_code(),
                        mcast_addr: packet.mcast_addr(),
                        s_flag: false,
                        qrv: 0,
                        qqic: 0,
                        num_srcs: 0,
                        data: &[],
                    });
                }
                let num_srcs = packet.num_srcs();
                let end = field::QUERY_SOURCES + 16 * usize::from(num_srcs);
                let data = bytes
                    .get(field::QUERY_SOURCES..end)
                    .ok_or(Error::Truncated)?;
                Ok(MldRepr::Query {
                    max_resp_code: packet.max_resp_code(),
                    mcast_addr: packet.mcast_addr(),
                    s_flag: packet.s_flag(),
                    qrv: packet.qrv(),
                    qqic: packet.qqic(),
                    num_srcs,
                    data,
                })
            }
            Icmpv6Message::MldV2Report => Ok(MldRepr::Report {
                nr_mcast_addr_rcrds: packet.nr_mcast_addr_rcrds(),
                data: &bytes[HEADER_LEN..],
            }),
            _ => Err(Error::Unsupported),
        }
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        match self {
            MldRepr::Query { data, .. } => field::QUERY_SOURCES + data.len(),
            MldRepr::Report { data, .. } => HEADER_LEN + data.len(),
        }
    }

    /// Write the body (not the checksum).
    ///
    /// # Panics
    /// If the buffer is shorter than [`buffer_len`](Self::buffer_len).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Icmpv6Packet<T>) {
        match *self {
            MldRepr::Query {
                max_resp_code,
                mcast_addr,
                s_flag,
                qrv,
                qqic,
                num_srcs,
                data,
            } => {
                packet.set_msg_type(Icmpv6Message::MldQuery);
                packet.set_msg_code(0);
                packet.clear_reserved();
                packet.set_max_resp_code(max_resp_code);
                packet.set_mcast_addr(mcast_addr);
                let bytes = packet.buffer.as_mut();
                bytes[field::SQRV] = (if s_flag { 0x08 } else { 0 }) | (qrv & 0x07);
                bytes[field::QQIC] = qqic;
                write_u16(bytes, field::QUERY_NUM_SRCS, num_srcs);
                bytes[field::QUERY_SOURCES..field::QUERY_SOURCES + data.len()]
                    .copy_from_slice(data);
            }
            MldRepr::Report {
                nr_mcast_addr_rcrds,
                data,
            } => {
                packet.set_msg_type(Icmpv6Message::MldV2Report);
                packet.set_msg_code(0);
                packet.clear_reserved();
                packet.set_nr_mcast_addr_rcrds(nr_mcast_addr_rcrds);
                packet.payload_mut()[..data.len()].copy_from_slice(data);
            }
        }
    }
}

/// A parsed ICMPv6 message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmpv6Repr<'a> {
    /// Destination unreachable.
    DstUnreachable {
        /// Code.
        reason: Icmpv6DstUnreachable,
        /// As much of the invoking packet as fits (RFC 4443 §2.4(c): the whole error within
        /// the 1280-byte minimum MTU).
        data: &'a [u8],
    },
    /// Packet too big.
    PktTooBig {
        /// MTU of the next-hop link.
        mtu: u32,
        /// The invoking packet.
        data: &'a [u8],
    },
    /// Time exceeded.
    TimeExceeded {
        /// Code.
        reason: Icmpv6TimeExceeded,
        /// The invoking packet.
        data: &'a [u8],
    },
    /// Parameter problem.
    ParamProblem {
        /// Code.
        reason: Icmpv6ParamProblem,
        /// Offset of the error within the invoking packet.
        pointer: u32,
        /// The invoking packet.
        data: &'a [u8],
    },
    /// Echo request.
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data.
        data: &'a [u8],
    },
    /// Echo reply.
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data.
        data: &'a [u8],
    },
    /// Neighbour discovery (RFC 4861).
    Ndisc(NdiscRepr<'a>),
    /// Multicast listener discovery (RFC 3810).
    Mld(MldRepr<'a>),
}

impl<'a> Icmpv6Repr<'a> {
    /// Read a message. The buffer must be exactly the ICMPv6 message; `dst_addr` is the
    /// final destination. `Err(Checksum)` if `verify_checksum` and it fails;
    /// `Err(Unsupported)` for types not represented (MLDv1 report/done, unknown types).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Icmpv6Packet<&'a T>,
        src_addr: &Ipv6Addr,
        dst_addr: &Ipv6Addr,
        verify_checksum: bool,
    ) -> Result<Icmpv6Repr<'a>> {
        packet.check_len()?;
        if verify_checksum && !packet.verify_checksum(src_addr, dst_addr) {
            return Err(Error::Checksum);
        }
        let code = packet.msg_code();
        let data = packet.payload();
        match packet.msg_type() {
            Icmpv6Message::DstUnreachable => Ok(Icmpv6Repr::DstUnreachable {
                reason: Icmpv6DstUnreachable::from(code),
                data,
            }),
            Icmpv6Message::PktTooBig if code == 0 => Ok(Icmpv6Repr::PktTooBig {
                mtu: packet.pkt_too_big_mtu(),
                data,
            }),
            Icmpv6Message::TimeExceeded => Ok(Icmpv6Repr::TimeExceeded {
                reason: Icmpv6TimeExceeded::from(code),
                data,
            }),
            Icmpv6Message::ParamProblem => Ok(Icmpv6Repr::ParamProblem {
                reason: Icmpv6ParamProblem::from(code),
                pointer: packet.param_problem_ptr(),
                data,
            }),
            Icmpv6Message::EchoRequest if code == 0 => Ok(Icmpv6Repr::EchoRequest {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data,
            }),
            Icmpv6Message::EchoReply if code == 0 => Ok(Icmpv6Repr::EchoReply {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data,
            }),
            Icmpv6Message::PktTooBig | Icmpv6Message::EchoRequest | Icmpv6Message::EchoReply => {
                Err(Error::Malformed)
            }
            Icmpv6Message::RouterSolicit
            | Icmpv6Message::RouterAdvert
            | Icmpv6Message::NeighborSolicit
            | Icmpv6Message::NeighborAdvert
            | Icmpv6Message::Redirect => NdiscRepr::parse(packet).map(Icmpv6Repr::Ndisc),
            Icmpv6Message::MldQuery | Icmpv6Message::MldV2Report => {
                MldRepr::parse(packet).map(Icmpv6Repr::Mld)
            }
            Icmpv6Message::MldReport | Icmpv6Message::MldDone | Icmpv6Message::Unknown(_) => {
                Err(Error::Unsupported)
            }
        }
    }

    /// Bytes `emit` writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            Icmpv6Repr::DstUnreachable { data, .. }
            | Icmpv6Repr::PktTooBig { data, .. }
            | Icmpv6Repr::TimeExceeded { data, .. }
            | Icmpv6Repr::ParamProblem { data, .. }
            | Icmpv6Repr::EchoRequest { data, .. }
            | Icmpv6Repr::EchoReply { data, .. } => HEADER_LEN + data.len(),
            Icmpv6Repr::Ndisc(ndisc) => ndisc.buffer_len(),
            Icmpv6Repr::Mld(mld) => mld.buffer_len(),
        }
    }

    /// Write the message and fill the checksum over the pseudo-header (`dst_addr`: the
    /// final destination).
    ///
    /// # Panics
    /// If the buffer is shorter than [`buffer_len`](Self::buffer_len). The checksum covers
    /// the whole buffer, so pass exactly `buffer_len()` bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Icmpv6Packet<T>,
        src_addr: &Ipv6Addr,
        dst_addr: &Ipv6Addr,
    ) {
        fn emit_data<T: AsRef<[u8]> + AsMut<[u8]>>(packet: &mut Icmpv6Packet<T>, data: &[u8]) {
            packet.payload_mut()[..data.len()].copy_from_slice(data)
        }
        match *self {
            Icmpv6Repr::DstUnreachable { reason, data } => {
                packet.set_msg_type(Icmpv6Message::DstUnreachable);
                packet.set_msg_code(reason.into());
                packet.clear_reserved();
                emit_data(packet, data);
            }
            Icmpv6Repr::PktTooBig { mtu, data } => {
                packet.set_msg_type(Icmpv6Message::PktTooBig);
                packet.set_msg_code(0);
                packet.set_pkt_too_big_mtu(mtu);
                emit_data(packet, data);
            }
            Icmpv6Repr::TimeExceeded { reason, data } => {
                packet.set_msg_type(Icmpv6Message::TimeExceeded);
                packet.set_msg_code(reason.into());
                packet.clear_reserved();
                emit_data(packet, data);
            }
            Icmpv6Repr::ParamProblem {
                reason,
                pointer,
                data,
            } => {
                packet.set_msg_type(Icmpv6Message::ParamProblem);
                packet.set_msg_code(reason.into());
                packet.set_param_problem_ptr(pointer);
                emit_data(packet, data);
            }
            Icmpv6Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => {
                packet.set_msg_type(Icmpv6Message::EchoRequest);
                packet.set_msg_code(0);
                packet.set_echo_ident(ident);
                packet.set_echo_seq_no(seq_no);
                emit_data(packet, data);
            }
            Icmpv6Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                packet.set_msg_type(Icmpv6Message::EchoReply);
                packet.set_msg_code(0);
                packet.set_echo_ident(ident);
                packet.set_echo_seq_no(seq_no);
                emit_data(packet, data);
            }
            Icmpv6Repr::Ndisc(ndisc) => ndisc.emit(packet),
            Icmpv6Repr::Mld(mld) => mld.emit(packet),
        }
        packet.fill_checksum(src_addr, dst_addr)
    }
}

impl fmt::Display for Icmpv6Repr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Icmpv6Repr::DstUnreachable { reason, .. } => {
                write!(f, "ICMPv6 destination unreachable {reason:?}")
            }
            Icmpv6Repr::PktTooBig { mtu, .. } => write!(f, "ICMPv6 packet too big mtu={mtu}"),
            Icmpv6Repr::TimeExceeded { reason, .. } => {
                write!(f, "ICMPv6 time exceeded {reason:?}")
            }
            Icmpv6Repr::ParamProblem {
                reason, pointer, ..
            } => write!(f, "ICMPv6 parameter problem {reason:?} pointer={pointer}"),
            Icmpv6Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => write!(
                f,
                "ICMPv6 echo request id={ident} seq={seq_no} len={}",
                data.len()
            ),
            Icmpv6Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => write!(
                f,
                "ICMPv6 echo reply id={ident} seq={seq_no} len={}",
                data.len()
            ),
            Icmpv6Repr::Ndisc(ndisc) => write!(f, "ICMPv6 {ndisc:?}"),
            Icmpv6Repr::Mld(MldRepr::Query { mcast_addr, .. }) => {
                write!(f, "ICMPv6 MLD query {mcast_addr}")
            }
            Icmpv6Repr::Mld(MldRepr::Report {
                nr_mcast_addr_rcrds,
                ..
            }) => write!(f, "ICMPv6 MLDv2 report, {nr_mcast_addr_rcrds} records"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ll(last: u16) -> Ipv6Addr {
        Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, last)
    }

    // Captured on a Linux veth link (tests/data/linux-veth.txt), IPv6 header removed: echo
    // request fd00::1 -> fd00::2 ...
    static ECHO_REQUEST: [u8; 40] = [
        0x80, 0x00, 0x50, 0x74, 0x43, 0x21, 0x00, 0x01, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16,
        0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25,
        0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f,
    ];

    // ... the kernel's reply ...
    static ECHO_REPLY: [u8; 40] = [
        0x81, 0x00, 0x4f, 0x74, 0x43, 0x21, 0x00, 0x01, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16,
        0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25,
        0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f,
    ];

    // ... its port unreachable for UDP fd00::1 -> fd00::2:33434 ...
    static PORT_UNREACH: [u8; 65] = [
        0x01, 0x04, 0xd5, 0x8c, 0x00, 0x00, 0x00, 0x00, 0x60, 0x02, 0xbd, 0xbd, 0x00, 0x11, 0x11,
        0x40, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x01, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x02, 0x96, 0x0e, 0x82, 0x9a, 0x00, 0x11, 0x28, 0xf6, 0x68, 0x65, 0x6c, 0x6c,
        0x6f, 0x20, 0x76, 0x36, 0x0a,
    ];

    // ... and an MLDv2 report (after its hop-by-hop header) that host B sent from :: as its
    // link came up, before it had a link-local address (RFC 3810 §5.2.13 allows that):
    // change to exclude {} for ff02::1:ff00:2, its solicited-node group.
    static MLD_REPORT: [u8; 28] = [
        0x8f, 0x00, 0x6f, 0x88, 0x00, 0x00, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00, 0xff, 0x02, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xff, 0x00, 0x00, 0x02,
    ];

    fn addr(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    fn round_trip<'a>(bytes: &'a [u8], src: &Ipv6Addr, dst: &Ipv6Addr) -> Icmpv6Repr<'a> {
        let packet = Icmpv6Packet::new_checked(bytes).unwrap();
        assert!(packet.verify_checksum(src, dst));
        let repr = Icmpv6Repr::parse(&packet, src, dst, true).unwrap();
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Icmpv6Packet::new_unchecked(&mut out[..]), src, dst);
        assert_eq!(out, bytes, "{repr}");
        repr
    }

    #[test]
    fn linux_echo_request_and_reply() {
        let (a, b) = (addr("fd00::1"), addr("fd00::2"));
        let request = round_trip(&ECHO_REQUEST, &a, &b);
        assert_eq!(
            request,
            Icmpv6Repr::EchoRequest {
                ident: 0x4321,
                seq_no: 1,
                data: &ECHO_REQUEST[8..]
            }
        );
        let reply = round_trip(&ECHO_REPLY, &b, &a);
        assert!(matches!(
            reply,
            Icmpv6Repr::EchoReply {
                ident: 0x4321,
                seq_no: 1,
                ..
            }
        ));
    }

    #[test]
    fn linux_port_unreachable_quotes_the_datagram() {
        let (a, b) = (addr("fd00::1"), addr("fd00::2"));
        let repr = round_trip(&PORT_UNREACH, &b, &a);
        let Icmpv6Repr::DstUnreachable { reason, data } = repr else {
            panic!("{repr:?}");
        };
        assert_eq!(reason, Icmpv6DstUnreachable::PortUnreachable);
        let quoted = crate::Ipv6Packet::new_checked(data).unwrap();
        assert_eq!(quoted.dst_addr(), b);
        let udp = crate::UdpPacket::new_checked(quoted.payload()).unwrap();
        assert_eq!(udp.dst_port(), 33434);
        assert_eq!(udp.payload(), b"hello v6\n");
    }

    #[test]
    fn linux_mldv2_report() {
        let src = Ipv6Addr::UNSPECIFIED;
        let dst = addr("ff02::16");
        let repr = round_trip(&MLD_REPORT, &src, &dst);
        let Icmpv6Repr::Mld(MldRepr::Report {
            nr_mcast_addr_rcrds,
            data,
        }) = repr
        else {
            panic!("{repr:?}");
        };
        let records: Vec<_> = MldRecordsIter::new(data, nr_mcast_addr_rcrds)
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(
            records,
            [MldAddressRecordRepr {
                record_type: MldRecordType::ChangeToExclude,
                mcast_addr: addr("ff02::1:ff00:2"),
                sources: &[],
                aux_data: &[],
            }]
        );
        let mut out = [0u8; 20];
        records[0].emit(&mut out);
        assert_eq!(out, MLD_REPORT[8..]);
    }

    #[test]
    fn mld_query_v1_and_v2() {
        // MLDv1 general query (RFC 2710): 24 bytes, max response delay 10000 ms.
        let mut v1 = [0u8; 24];
        v1[0] = 130;
        v1[4..6].copy_from_slice(&10000u16.to_be_bytes());
        let (src, dst) = (addr("fe80::1"), addr("ff02::1"));
        Icmpv6Packet::new_unchecked(&mut v1[..]).fill_checksum(&src, &dst);
        let packet = Icmpv6Packet::new_checked(&v1[..]).unwrap();
        let repr = Icmpv6Repr::parse(&packet, &src, &dst, true).unwrap();
        assert_eq!(
            repr,
            Icmpv6Repr::Mld(MldRepr::Query {
                max_resp_code: 10000,
                mcast_addr: Ipv6Addr::UNSPECIFIED,
                s_flag: false,
                qrv: 0,
                qqic: 0,
                num_srcs: 0,
                data: &[],
            })
        );
        // MLDv2 query with one source; and one whose source count overruns the buffer.
        let source = addr("2001:db8::1").octets();
        let query = Icmpv6Repr::Mld(MldRepr::Query {
            max_resp_code: 1000,
            mcast_addr: addr("ff0e::1"),
            s_flag: true,
            qrv: 2,
            qqic: 125,
            num_srcs: 1,
            data: &source,
        });
        let mut out = vec![0u8; query.buffer_len()];
        query.emit(&mut Icmpv6Packet::new_unchecked(&mut out[..]), &src, &dst);
        let packet = Icmpv6Packet::new_checked(&out[..]).unwrap();
        assert_eq!(Icmpv6Repr::parse(&packet, &src, &dst, true), Ok(query));
        out[27] = 2;
        let packet = Icmpv6Packet::new_checked(&out[..]).unwrap();
        assert_eq!(
            Icmpv6Repr::parse(&packet, &src, &dst, false),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn echo_request_round_trip() {
        let repr = Icmpv6Repr::EchoRequest {
            ident: 0x1234,
            seq_no: 7,
            data: b"abcdefgh",
        };
        let (src, dst) = (ll(1), ll(2));
        let mut bytes = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Icmpv6Packet::new_unchecked(&mut bytes[..]), &src, &dst);
        let packet = Icmpv6Packet::new_checked(&bytes[..]).unwrap();
        assert!(packet.verify_checksum(&src, &dst));
        assert!(!packet.verify_checksum(&src, &ll(3)));
        assert_eq!(Icmpv6Repr::parse(&packet, &src, &dst, true), Ok(repr));
        assert_eq!(
            Icmpv6Repr::parse(&packet, &src, &ll(3), true),
            Err(Error::Checksum)
        );
    }

    #[test]
    fn short_ndp_messages_are_truncated_and_getters_never_panic() {
        // A neighbor solicitation cut to 8 bytes: check_len refuses it.
        let bytes = [135, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            Icmpv6Packet::new_checked(&bytes[..]).unwrap_err(),
            Error::Truncated
        );
        // An echo request read with NDP getters: zeros, not a panic.
        let bytes = [128, 0, 0, 0, 0, 0, 0, 0];
        let packet = Icmpv6Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.target_addr(), Ipv6Addr::UNSPECIFIED);
        assert_eq!(packet.dest_addr(), Ipv6Addr::UNSPECIFIED);
        assert_eq!(packet.retrans_time(), 0);
        assert_eq!(packet.num_srcs(), 0);
    }

    proptest! {
        #[test]
        fn echo_round_trip(
            request in any::<bool>(), ident in any::<u16>(), seq_no in any::<u16>(),
            data in proptest::collection::vec(any::<u8>(), 0..100),
            src in any::<[u8; 16]>(), dst in any::<[u8; 16]>(),
        ) {
            let repr = if request {
                Icmpv6Repr::EchoRequest { ident, seq_no, data: &data }
            } else {
                Icmpv6Repr::EchoReply { ident, seq_no, data: &data }
            };
            let (src, dst) = (Ipv6Addr::from(src), Ipv6Addr::from(dst));
            let mut bytes = vec![0u8; repr.buffer_len()];
            repr.emit(&mut Icmpv6Packet::new_unchecked(&mut bytes[..]), &src, &dst);
            let packet = Icmpv6Packet::new_checked(&bytes[..]).unwrap();
            prop_assert_eq!(Icmpv6Repr::parse(&packet, &src, &dst, true), Ok(repr));
        }

        #[test]
        fn errors_round_trip(
            kind in 0u8..4, code in any::<u8>(), word in any::<u32>(),
            data in proptest::collection::vec(any::<u8>(), 0..100),
        ) {
            let repr = match kind {
                0 => Icmpv6Repr::DstUnreachable { reason: code.into(), data: &data },
                1 => Icmpv6Repr::PktTooBig { mtu: word, data: &data },
                2 => Icmpv6Repr::TimeExceeded { reason: code.into(), data: &data },
                _ => Icmpv6Repr::ParamProblem { reason: code.into(), pointer: word, data: &data },
            };
            let (src, dst) = (ll(1), ll(2));
            let mut bytes = vec![0u8; repr.buffer_len()];
            repr.emit(&mut Icmpv6Packet::new_unchecked(&mut bytes[..]), &src, &dst);
            let packet = Icmpv6Packet::new_checked(&bytes[..]).unwrap();
            prop_assert_eq!(Icmpv6Repr::parse(&packet, &src, &dst, true), Ok(repr));
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..120), ty in any::<u8>()) {
            let mut bytes = bytes;
            if let Some(first) = bytes.first_mut() {
                // Bias toward the interesting types.
                *first = [1, 2, 3, 4, 128, 129, 130, 133, 134, 135, 136, 137, 143, ty][usize::from(ty) % 14];
            }
            let (src, dst) = (ll(1), ll(2));
            if let Ok(packet) = Icmpv6Packet::new_checked(&bytes[..]) {
                let _ = (packet.target_addr(), packet.dest_addr(), packet.options(), packet.payload());
                let _ = (packet.router_flags(), packet.neighbor_flags(), packet.qrv(), packet.num_srcs());
                if let Ok(repr) = Icmpv6Repr::parse(&packet, &src, &dst, false) {
                    let _ = repr.to_string();
                    let mut out = vec![0u8; repr.buffer_len()];
                    repr.emit(&mut Icmpv6Packet::new_unchecked(&mut out[..]), &src, &dst);
                    let reparsed = Icmpv6Packet::new_checked(&out[..]).unwrap();
                    prop_assert!(Icmpv6Repr::parse(&reparsed, &src, &dst, true).is_ok());
                }
                if let Ok(MldRepr::Report { nr_mcast_addr_rcrds, data }) = MldRepr::parse(&packet) {
                    for record in MldRecordsIter::new(data, nr_mcast_addr_rcrds) {
                        let _ = record;
                    }
                }
            }
        }
    }
}
