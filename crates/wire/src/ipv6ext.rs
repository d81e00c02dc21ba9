//! IPv6 extension headers (RFC 8200 §4): hop-by-hop and destination options (§4.3, §4.6),
//! routing (§4.4; type 0 of RFC 2460, deprecated by RFC 5095; type 2 of RFC 6275),
//! fragment (§4.5), and the IPsec headers AH (RFC 4302) and ESP (RFC 4303), recognised so
//! that a chain walk can step over AH and stop at ESP.
//!
//! The KAME lesson (Freenix 2000) applies: a receiver walks the chain with
//! [`ext_header_len`] one header at a time, pulling up only the bytes of the header at hand.

use crate::{read_ipv6, read_u16, read_u32, write_u16, write_u32, Error, IpProtocol, Result};
use std::net::Ipv6Addr;

/// True for the protocols that are IPv6 extension headers a chain walk steps over (ESP is
/// not: what follows it is encrypted).
pub fn is_ext_header(proto: IpProtocol) -> bool {
    matches!(
        proto,
        IpProtocol::HopByHop
            | IpProtocol::Ipv6Route
            | IpProtocol::Ipv6Frag
            | IpProtocol::Ipv6Opts
            | IpProtocol::Ah
    )
}

/// Length and next header of the one extension header `proto` at the front of `bytes`.
///
/// Hop-by-hop, routing and destination options: `(hdr_ext_len + 1) * 8` (RFC 8200 §4.3);
/// fragment: 8; AH: `(payload_len + 2) * 4` (RFC 4302 §2.2). `Err(Unsupported)` for ESP and
/// for anything that is not an extension header; `Err(Truncated)` if `bytes` is shorter than
/// the header.
pub fn ext_header_len(proto: IpProtocol, bytes: &[u8]) -> Result<(IpProtocol, usize)> {
    if bytes.len() < 2 {
        return Err(Error::Truncated);
    }
    let len = match proto {
        IpProtocol::HopByHop | IpProtocol::Ipv6Route | IpProtocol::Ipv6Opts => {
            (usize::from(bytes[1]) + 1) * 8
        }
        IpProtocol::Ipv6Frag => FRAG_HEADER_LEN,
        IpProtocol::Ah => (usize::from(bytes[1]) + 2) * 4,
        _ => return Err(Error::Unsupported),
    };
    if proto == IpProtocol::Ah && len < AH_MIN_LEN {
        return Err(Error::Malformed);
    }
    if bytes.len() < len {
        return Err(Error::Truncated);
    }
    Ok((IpProtocol::from(bytes[0]), len))
}

/// Walk the extension header chain that starts with `first` at the front of `bytes`; return
/// the first protocol that is not an extension header and its offset in `bytes`.
///
/// Stops early, returning `(Ipv6Frag, offset of the fragment header)`, at a fragment header
/// of a non-first fragment (offset ≠ 0): what follows it is data, not a header. RFC 8200
/// §4.1 only allows hop-by-hop first; this walk does not enforce the order (the stack
/// does, and sends the Parameter Problem).
pub fn upper_layer(first: IpProtocol, bytes: &[u8]) -> Result<(IpProtocol, usize)> {
    let mut proto = first;
    let mut offset = 0;
    while is_ext_header(proto) {
        let rest = &bytes[offset..];
        let (next, len) = ext_header_len(proto, rest)?;
        if proto == IpProtocol::Ipv6Frag && Ipv6FragHeader::new_unchecked(rest).frag_offset() != 0 {
            return Ok((proto, offset));
        }
        proto = next;
        offset += len;
    }
    Ok((proto, offset))
}

mod field {
    pub const NXT_HDR: usize = 0;
    pub const LENGTH: usize = 1;
    pub const OPTIONS: usize = 2;
}

/// Shortest hop-by-hop, destination options or routing header.
pub const MIN_HEADER_LEN: usize = 8;

/// A view of a hop-by-hop or destination options header (also readable for the first two
/// bytes of any header in the RFC 8200 §4 format, such as routing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6ExtHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6ExtHeader<T> {
    /// Wrap a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Ipv6ExtHeader<T> {
        Ipv6ExtHeader { buffer }
    }

    /// Wrap a buffer and check that every getter is in bounds.
    pub fn new_checked(buffer: T) -> Result<Ipv6ExtHeader<T>> {
        let header = Self::new_unchecked(buffer);
        header.check_len()?;
        Ok(header)
    }

    /// `Err(Truncated)` if the buffer is shorter than 8 bytes or than `header_len()`.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < MIN_HEADER_LEN || len < self.header_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The header that follows.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::NXT_HDR])
    }

    /// Raw "Hdr Ext Len": 8-octet units, not counting the first 8 octets.
    pub fn hdr_ext_len(&self) -> u8 {
        self.buffer.as_ref()[field::LENGTH]
    }

    /// Header length in bytes: `(hdr_ext_len + 1) * 8`.
    pub fn header_len(&self) -> usize {
        (usize::from(self.hdr_ext_len()) + 1) * 8
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Ipv6ExtHeader<&'a T> {
    /// The options area (after the two leading bytes).
    pub fn options(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::OPTIONS..self.header_len()]
    }

    /// The options, one by one.
    pub fn options_iter(&self) -> Ipv6OptionsIter<'a> {
        Ipv6OptionsIter::new(self.options())
    }

    /// What follows the header.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6ExtHeader<T> {
    /// Set the next header.
    pub fn set_next_header(&mut self, value: IpProtocol) {
        self.buffer.as_mut()[field::NXT_HDR] = value.into()
    }

    /// Set the raw "Hdr Ext Len".
    pub fn set_hdr_ext_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::LENGTH] = value
    }

    /// The options area, writable.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[field::OPTIONS..end]
    }
}

/// A parsed hop-by-hop or destination options header: the options stay raw (iterate them
/// with [`Ipv6OptionsIter`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6ExtHeaderRepr<'a> {
    /// The header that follows.
    pub next_header: IpProtocol,
    /// The options area, padding included.
    pub options: &'a [u8],
}

impl<'a> Ipv6ExtHeaderRepr<'a> {
    /// Read a header and check its options (`Err(Malformed)` on a bad option length).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        header: &Ipv6ExtHeader<&'a T>,
    ) -> Result<Ipv6ExtHeaderRepr<'a>> {
        header.check_len()?;
        for option in header.options_iter() {
            option?;
        }
        Ok(Ipv6ExtHeaderRepr {
            next_header: header.next_header(),
            options: header.options(),
        })
    }

    /// `2 + options.len()` rounded up to 8. At most 2048.
    pub const fn buffer_len(&self) -> usize {
        (field::OPTIONS + self.options.len()).div_ceil(8) * 8
    }

    /// Write the header; pad the options to a multiple of 8 bytes with Pad1/PadN.
    ///
    /// # Panics
    /// If the buffer is shorter than [`buffer_len`](Self::buffer_len), or the options are
    /// longer than 2046 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut Ipv6ExtHeader<T>) {
        let len = self.buffer_len();
        header.set_next_header(self.next_header);
        header.set_hdr_ext_len(u8::try_from(len / 8 - 1).expect("options too long"));
        let area = header.options_mut();
        area[..self.options.len()].copy_from_slice(self.options);
        let pad = &mut area[self.options.len()..];
        match pad.len() {
            0 => {}
            1 => Ipv6Option::Pad1.emit(pad),
            n => Ipv6Option::PadN((n - 2) as u8).emit(pad),
        }
    }
}

enum_with_unknown! {
    /// The two high bits of an option type: what a node that does not know the option does
    /// with the packet (RFC 8200 §4.2).
    pub enum Ipv6OptionFailureType(u8) {
        /// Skip the option.
        Skip = 0,
        /// Discard the packet.
        Discard = 1,
        /// Discard and send a Parameter Problem, even to a multicast destination.
        DiscardSendAll = 2,
        /// Discard and send a Parameter Problem unless the destination is multicast.
        DiscardSendUnicast = 3,
    }
}

/// Option types we name (RFC 8200 §4.2, RFC 2711, RFC 2675).
mod opt {
    pub const PAD1: u8 = 0x00;
    pub const PADN: u8 = 0x01;
    pub const ROUTER_ALERT: u8 = 0x05;
}

/// One hop-by-hop or destination option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ipv6Option<'a> {
    /// One byte of padding.
    Pad1,
    /// `n + 2` bytes of padding (`n` zero data bytes).
    PadN(u8),
    /// Router alert (RFC 2711); value 0 = MLD.
    RouterAlert(u16),
    /// Any other option.
    Unknown {
        /// Option type, action bits included.
        type_: u8,
        /// Option data.
        data: &'a [u8],
    },
}

impl<'a> Ipv6Option<'a> {
    /// Read one option from the front of `buffer`; return the rest and the option.
    /// `Err(Malformed)` if the length byte is missing or runs past the buffer, or a
    /// router alert is not 2 bytes.
    pub fn parse(buffer: &'a [u8]) -> Result<(&'a [u8], Ipv6Option<'a>)> {
        let (&type_, rest) = buffer.split_first().ok_or(Error::Truncated)?;
        if type_ == opt::PAD1 {
            return Ok((rest, Ipv6Option::Pad1));
        }
        let (&len, rest) = rest.split_first().ok_or(Error::Malformed)?;
        let len = usize::from(len);
        if rest.len() < len {
            return Err(Error::Malformed);
        }
        let (data, rest) = rest.split_at(len);
        let option = match type_ {
            opt::PADN => Ipv6Option::PadN(len as u8),
            opt::ROUTER_ALERT if len == 2 => Ipv6Option::RouterAlert(read_u16(data, 0)),
            opt::ROUTER_ALERT => return Err(Error::Malformed),
            type_ => Ipv6Option::Unknown { type_, data },
        };
        Ok((rest, option))
    }

    /// The option type byte.
    pub fn option_type(&self) -> u8 {
        match *self {
            Ipv6Option::Pad1 => opt::PAD1,
            Ipv6Option::PadN(_) => opt::PADN,
            Ipv6Option::RouterAlert(_) => opt::ROUTER_ALERT,
            Ipv6Option::Unknown { type_, .. } => type_,
        }
    }

    /// What to do with the packet if the option is not recognised (two high bits).
    pub fn failure_type(&self) -> Ipv6OptionFailureType {
        Ipv6OptionFailureType::from(self.option_type() >> 6)
    }

    /// True if the option data may change en route (third-highest bit).
    pub fn may_change(&self) -> bool {
        self.option_type() & 0x20 != 0
    }

    /// Bytes the option takes.
    pub fn buffer_len(&self) -> usize {
        match self {
            Ipv6Option::Pad1 => 1,
            Ipv6Option::PadN(n) => 2 + usize::from(*n),
            Ipv6Option::RouterAlert(_) => 4,
            Ipv6Option::Unknown { data, .. } => 2 + data.len(),
        }
    }

    /// Write the option at the front of `buffer`.
    ///
    /// # Panics
    /// If `buffer` is shorter than [`buffer_len`](Self::buffer_len), or `Unknown` data is
    /// longer than 255 bytes.
    pub fn emit(&self, buffer: &mut [u8]) {
        let out = &mut buffer[..self.buffer_len()];
        match *self {
            Ipv6Option::Pad1 => out[0] = opt::PAD1,
            Ipv6Option::PadN(n) => {
                out[0] = opt::PADN;
                out[1] = n;
                out[2..].fill(0);
            }
            Ipv6Option::RouterAlert(value) => {
                out[..2].copy_from_slice(&[opt::ROUTER_ALERT, 2]);
                write_u16(out, 2, value);
            }
            Ipv6Option::Unknown { type_, data } => {
                out[0] = type_;
                out[1] = u8::try_from(data.len()).expect("option too long");
                out[2..].copy_from_slice(data);
            }
        }
    }
}

/// Iterator over the options of a hop-by-hop or destination options header. Yields `Err`
/// once and stops on a malformed option.
#[derive(Debug, Clone)]
pub struct Ipv6OptionsIter<'a> {
    rest: &'a [u8],
}

impl<'a> Ipv6OptionsIter<'a> {
    /// Iterate over a raw options area.
    pub const fn new(options: &'a [u8]) -> Ipv6OptionsIter<'a> {
        Ipv6OptionsIter { rest: options }
    }
}

impl<'a> Iterator for Ipv6OptionsIter<'a> {
    type Item = Result<Ipv6Option<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        match Ipv6Option::parse(self.rest) {
            Ok((rest, option)) => {
                self.rest = rest;
                Some(Ok(option))
            }
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

enum_with_unknown! {
    /// Routing header types (IANA "IPv6 Routing Types").
    pub enum Ipv6RoutingType(u8) {
        /// Source route (RFC 2460), deprecated by RFC 5095.
        Type0 = 0,
        /// Nimrod, deprecated.
        Nimrod = 1,
        /// Mobile IPv6 home address (RFC 6275 §6.4).
        Type2 = 2,
        /// RPL source route (RFC 6554).
        Rpl = 3,
        /// Segment routing header (RFC 8754).
        Srh = 4,
    }
}

mod rt_field {
    pub const TYPE: usize = 2;
    pub const SEG_LEFT: usize = 3;
    /// Type 0 and type 2: four reserved bytes, then the addresses.
    pub const ADDRESSES: usize = 8;
    pub const DATA: usize = 4;
}

/// A view of a routing header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6RoutingHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6RoutingHeader<T> {
    /// Wrap a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Ipv6RoutingHeader<T> {
        Ipv6RoutingHeader { buffer }
    }

    /// Wrap a buffer and check that every getter is in bounds.
    pub fn new_checked(buffer: T) -> Result<Ipv6RoutingHeader<T>> {
        let header = Self::new_unchecked(buffer);
        header.check_len()?;
        Ok(header)
    }

    /// `Err(Truncated)` if the buffer is shorter than 8 bytes or than `header_len()`.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < MIN_HEADER_LEN || len < self.header_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The header that follows.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::NXT_HDR])
    }

    /// Header length in bytes.
    pub fn header_len(&self) -> usize {
        (usize::from(self.buffer.as_ref()[field::LENGTH]) + 1) * 8
    }

    /// Routing type.
    pub fn routing_type(&self) -> Ipv6RoutingType {
        Ipv6RoutingType::from(self.buffer.as_ref()[rt_field::TYPE])
    }

    /// Segments left: route segments still to visit.
    pub fn segments_left(&self) -> u8 {
        self.buffer.as_ref()[rt_field::SEG_LEFT]
    }

    /// Number of 16-byte addresses in a type 0 or type 2 header.
    pub fn address_count(&self) -> usize {
        (self.header_len() - rt_field::ADDRESSES) / 16
    }

    /// The `index`th address of a type 0 (or type 2) header, if it exists.
    pub fn address(&self, index: usize) -> Option<Ipv6Addr> {
        (index < self.address_count())
            .then(|| read_ipv6(self.buffer.as_ref(), rt_field::ADDRESSES + 16 * index))
    }

    /// The home address of a type 2 header (its one address).
    pub fn home_address(&self) -> Option<Ipv6Addr> {
        self.address(0)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Ipv6RoutingHeader<&'a T> {
    /// The addresses of a type 0 or type 2 header.
    pub fn addresses(&self) -> Ipv6AddressIter<'a> {
        Ipv6AddressIter {
            rest: &self.buffer.as_ref()[rt_field::ADDRESSES..self.header_len()],
        }
    }

    /// The type-specific data (after segments left).
    pub fn data(&self) -> &'a [u8] {
        &self.buffer.as_ref()[rt_field::DATA..self.header_len()]
    }

    /// What follows the header.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6RoutingHeader<T> {
    /// Set the next header.
    pub fn set_next_header(&mut self, value: IpProtocol) {
        self.buffer.as_mut()[field::NXT_HDR] = value.into()
    }

    /// Set the header length in bytes (a multiple of 8, 8..=2048).
    pub fn set_header_len(&mut self, value: usize) {
        self.buffer.as_mut()[field::LENGTH] = (value / 8).saturating_sub(1) as u8
    }

    /// Set the routing type.
    pub fn set_routing_type(&mut self, value: Ipv6RoutingType) {
        self.buffer.as_mut()[rt_field::TYPE] = value.into()
    }

    /// Set segments left.
    pub fn set_segments_left(&mut self, value: u8) {
        self.buffer.as_mut()[rt_field::SEG_LEFT] = value
    }

    /// Zero the four reserved bytes of a type 0 or type 2 header.
    pub fn clear_reserved(&mut self) {
        self.buffer.as_mut()[rt_field::DATA..rt_field::ADDRESSES].fill(0)
    }

    /// Set the `index`th address (type 0 or 2). Panics if out of range.
    pub fn set_address(&mut self, index: usize, value: Ipv6Addr) {
        let at = rt_field::ADDRESSES + 16 * index;
        self.buffer.as_mut()[at..at + 16].copy_from_slice(&value.octets())
    }

    /// The type-specific data, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[rt_field::DATA..end]
    }
}

/// Iterator over a list of 16-byte IPv6 addresses.
#[derive(Debug, Clone)]
pub struct Ipv6AddressIter<'a> {
    rest: &'a [u8],
}

impl<'a> Ipv6AddressIter<'a> {
    /// Iterate over raw bytes; a trailing partial address is ignored.
    pub const fn new(bytes: &'a [u8]) -> Ipv6AddressIter<'a> {
        Ipv6AddressIter { rest: bytes }
    }
}

impl Iterator for Ipv6AddressIter<'_> {
    type Item = Ipv6Addr;

    fn next(&mut self) -> Option<Ipv6Addr> {
        if self.rest.len() < 16 {
            return None;
        }
        let (addr, rest) = self.rest.split_at(16);
        self.rest = rest;
        Some(read_ipv6(addr, 0))
    }
}

/// A parsed routing header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ipv6RoutingRepr<'a> {
    /// Type 0 source route (RFC 2460 §4.4). RFC 5095 §3: a node must not process it; a
    /// packet with segments left ≠ 0 gets a Parameter Problem. Parsed so that it can be
    /// recognised and answered.
    Type0 {
        /// The header that follows.
        next_header: IpProtocol,
        /// Segments left.
        segments_left: u8,
        /// The addresses, 16 bytes each (iterate with [`Ipv6AddressIter`]).
        addresses: &'a [u8],
    },
    /// Type 2, Mobile IPv6 (RFC 6275 §6.4): exactly one address, segments left 1 or 0.
    Type2 {
        /// The header that follows.
        next_header: IpProtocol,
        /// Segments left.
        segments_left: u8,
        /// The mobile node's home address.
        home_address: Ipv6Addr,
    },
    /// Any other type, kept raw.
    Other {
        /// The header that follows.
        next_header: IpProtocol,
        /// Routing type.
        routing_type: Ipv6RoutingType,
        /// Segments left.
        segments_left: u8,
        /// Type-specific data (after segments left).
        data: &'a [u8],
    },
}

impl<'a> Ipv6RoutingRepr<'a> {
    /// Read a routing header. `Err(Malformed)` for a type 0 header whose segments left
    /// exceeds its address count (RFC 2460 §4.4) or a type 2 header that is not 24 bytes
    /// with segments left ≤ 1.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        header: &Ipv6RoutingHeader<&'a T>,
    ) -> Result<Ipv6RoutingRepr<'a>> {
        header.check_len()?;
        let next_header = header.next_header();
        let segments_left = header.segments_left();
        match header.routing_type() {
            Ipv6RoutingType::Type0 => {
                if header.header_len() % 16 != 8
                    || usize::from(segments_left) > header.address_count()
                {
                    return Err(Error::Malformed);
                }
                Ok(Ipv6RoutingRepr::Type0 {
                    next_header,
                    segments_left,
                    addresses: &header.data()[4..],
                })
            }
            Ipv6RoutingType::Type2 => match header.home_address() {
                Some(home_address) if header.header_len() == 24 && segments_left <= 1 => {
                    Ok(Ipv6RoutingRepr::Type2 {
                        next_header,
                        segments_left,
                        home_address,
                    })
                }
                _ => Err(Error::Malformed),
            },
            routing_type => Ok(Ipv6RoutingRepr::Other {
                next_header,
                routing_type,
                segments_left,
                data: header.data(),
            }),
        }
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        match self {
            Ipv6RoutingRepr::Type0 { addresses, .. } => rt_field::ADDRESSES + addresses.len(),
            Ipv6RoutingRepr::Type2 { .. } => 24,
            Ipv6RoutingRepr::Other { data, .. } => (rt_field::DATA + data.len()).div_ceil(8) * 8,
        }
    }

    /// Write the header (an `Other` header's data is zero-padded to 8 bytes).
    ///
    /// # Panics
    /// If the buffer is shorter than [`buffer_len`](Self::buffer_len), or the header would
    /// be longer than 2048 bytes; type 0 `addresses` must be a multiple of 16 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut Ipv6RoutingHeader<T>) {
        let len = self.buffer_len();
        assert!(len <= 2048, "routing header too long");
        header.set_header_len(len);
        match *self {
            Ipv6RoutingRepr::Type0 {
                next_header,
                segments_left,
                addresses,
            } => {
                header.set_next_header(next_header);
                header.set_routing_type(Ipv6RoutingType::Type0);
                header.set_segments_left(segments_left);
                header.clear_reserved();
                header.data_mut()[4..].copy_from_slice(addresses);
            }
            Ipv6RoutingRepr::Type2 {
                next_header,
                segments_left,
                home_address,
            } => {
                header.set_next_header(next_header);
                header.set_routing_type(Ipv6RoutingType::Type2);
                header.set_segments_left(segments_left);
                header.clear_reserved();
                header.set_address(0, home_address);
            }
            Ipv6RoutingRepr::Other {
                next_header,
                routing_type,
                segments_left,
                data,
            } => {
                header.set_next_header(next_header);
                header.set_routing_type(routing_type);
                header.set_segments_left(segments_left);
                let out = header.data_mut();
                out[..data.len()].copy_from_slice(data);
                out[data.len()..].fill(0);
            }
        }
    }
}

mod frag_field {
    pub const OFFSET_M: usize = 2;
    pub const IDENT: usize = 4;
}

/// Length of the fragment header.
pub const FRAG_HEADER_LEN: usize = 8;

/// A view of a fragment header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6FragHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6FragHeader<T> {
    /// Wrap a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Ipv6FragHeader<T> {
        Ipv6FragHeader { buffer }
    }

    /// Wrap a buffer and check that every getter is in bounds.
    pub fn new_checked(buffer: T) -> Result<Ipv6FragHeader<T>> {
        let header = Self::new_unchecked(buffer);
        header.check_len()?;
        Ok(header)
    }

    /// `Err(Truncated)` if the buffer is shorter than 8 bytes.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < FRAG_HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The header of the fragmentable part.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::NXT_HDR])
    }

    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        read_u16(self.buffer.as_ref(), frag_field::OFFSET_M) & !0x7
    }

    /// More fragments.
    pub fn more_frags(&self) -> bool {
        read_u16(self.buffer.as_ref(), frag_field::OFFSET_M) & 0x1 != 0
    }

    /// Identification.
    pub fn ident(&self) -> u32 {
        read_u32(self.buffer.as_ref(), frag_field::IDENT)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Ipv6FragHeader<&'a T> {
    /// The fragment data.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[FRAG_HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6FragHeader<T> {
    /// Set the next header (and zero the reserved byte).
    pub fn set_next_header(&mut self, value: IpProtocol) {
        let data = self.buffer.as_mut();
        data[field::NXT_HDR] = value.into();
        data[field::LENGTH] = 0;
    }

    /// Set the offset in bytes (a multiple of 8).
    pub fn set_frag_offset(&mut self, value: u16) {
        let data = self.buffer.as_mut();
        let m = read_u16(data, frag_field::OFFSET_M) & 0x1;
        write_u16(data, frag_field::OFFSET_M, (value & !0x7) | m)
    }

    /// Set or clear "more fragments".
    pub fn set_more_frags(&mut self, value: bool) {
        let data = self.buffer.as_mut();
        let offset = read_u16(data, frag_field::OFFSET_M) & !0x7;
        write_u16(data, frag_field::OFFSET_M, offset | u16::from(value))
    }

    /// Set the identification.
    pub fn set_ident(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), frag_field::IDENT, value)
    }
}

/// A parsed fragment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6FragRepr {
    /// The header of the fragmentable part.
    pub next_header: IpProtocol,
    /// Offset in bytes (a multiple of 8).
    pub frag_offset: u16,
    /// More fragments.
    pub more_frags: bool,
    /// Identification.
    pub ident: u32,
}

impl Ipv6FragRepr {
    /// Read a fragment header.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(header: &Ipv6FragHeader<&T>) -> Result<Ipv6FragRepr> {
        header.check_len()?;
        Ok(Ipv6FragRepr {
            next_header: header.next_header(),
            frag_offset: header.frag_offset(),
            more_frags: header.more_frags(),
            ident: header.ident(),
        })
    }

    /// 8.
    pub const fn buffer_len(&self) -> usize {
        FRAG_HEADER_LEN
    }

    /// Write the header.
    ///
    /// # Panics
    /// If the buffer is shorter than 8 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut Ipv6FragHeader<T>) {
        header.set_next_header(self.next_header);
        write_u16(header.buffer.as_mut(), frag_field::OFFSET_M, 0);
        header.set_frag_offset(self.frag_offset);
        header.set_more_frags(self.more_frags);
        header.set_ident(self.ident);
    }
}

/// Shortest AH: next header, length, reserved, SPI, sequence number (no ICV).
pub const AH_MIN_LEN: usize = 12;

/// A view of an IP authentication header (RFC 4302 §2), in IPv4 or IPv6.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AhHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> AhHeader<T> {
    /// Wrap a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> AhHeader<T> {
        AhHeader { buffer }
    }

    /// Wrap a buffer and check that every getter is in bounds.
    pub fn new_checked(buffer: T) -> Result<AhHeader<T>> {
        let header = Self::new_unchecked(buffer);
        header.check_len()?;
        Ok(header)
    }

    /// `Err(Truncated)` if the buffer is shorter than 12 bytes or `header_len()`;
    /// `Err(Malformed)` if the length field says less than 12 bytes.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < AH_MIN_LEN {
            return Err(Error::Truncated);
        }
        if self.header_len() < AH_MIN_LEN {
            return Err(Error::Malformed);
        }
        if len < self.header_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The header that follows.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[0])
    }

    /// Raw payload length field (32-bit words minus 2).
    pub fn payload_len(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// Header length in bytes: `(payload_len + 2) * 4`.
    pub fn header_len(&self) -> usize {
        (usize::from(self.payload_len()) + 2) * 4
    }

    /// Security parameters index.
    pub fn spi(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 4)
    }

    /// Sequence number.
    pub fn seq_number(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 8)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> AhHeader<&'a T> {
    /// Integrity check value.
    pub fn icv(&self) -> &'a [u8] {
        &self.buffer.as_ref()[AH_MIN_LEN..self.header_len()]
    }

    /// What follows the header.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

/// Shortest ESP header: SPI and sequence number.
pub const ESP_HEADER_LEN: usize = 8;

/// A view of an ESP header (RFC 4303 §2): only SPI and sequence number are in the clear.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EspHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EspHeader<T> {
    /// Wrap a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> EspHeader<T> {
        EspHeader { buffer }
    }

    /// Wrap a buffer and check that every getter is in bounds.
    pub fn new_checked(buffer: T) -> Result<EspHeader<T>> {
        let header = Self::new_unchecked(buffer);
        header.check_len()?;
        Ok(header)
    }

    /// `Err(Truncated)` if the buffer is shorter than 8 bytes.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < ESP_HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Security parameters index.
    pub fn spi(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 0)
    }

    /// Sequence number.
    pub fn seq_number(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 4)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> EspHeader<&'a T> {
    /// The encrypted payload (with padding, trailer and ICV).
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[ESP_HEADER_LEN..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::icmpv6::{Icmpv6Packet, Icmpv6Repr};
    use crate::ipv6::{Ipv6Packet, Ipv6Repr};
    use proptest::prelude::*;

    /// The project's test vector from the m_pulldown paper, copied verbatim into
    /// `tests/data` so a clone of this repository tests on its own.
    fn vector() -> Vec<u8> {
        let v = crate::sample::rthdr0_icmp6_echo();
        assert_eq!(v.len(), 128);
        v
    }

    fn node_a() -> Ipv6Addr {
        "2001:240:0:200:260:97ff:fe07:69ea".parse().unwrap()
    }

    fn node_b() -> Ipv6Addr {
        "2001:240:0:200:a00:5aff:fe38:6f86".parse().unwrap()
    }

    /// The m_pulldown paper's packet: IPv6 → routing header type 0 (4 addresses, segments
    /// left 4) → ICMPv6 echo request whose checksum is over the final destination.
    #[test]
    fn rthdr0_vector_walks_and_verifies() {
        let bytes = vector();
        assert_eq!(bytes.len(), 128);

        let ip = Ipv6Packet::new_checked(&bytes[..]).unwrap();
        let ip_repr = Ipv6Repr::parse(&ip).unwrap();
        assert_eq!(ip_repr.src_addr, node_a());
        assert_eq!(ip_repr.dst_addr, node_b());
        assert_eq!(ip_repr.next_header, IpProtocol::Ipv6Route);
        assert_eq!(ip_repr.payload_len, 88);
        assert_eq!(ip_repr.hop_limit, 64);

        let rt = Ipv6RoutingHeader::new_checked(ip.payload()).unwrap();
        assert_eq!(rt.routing_type(), Ipv6RoutingType::Type0);
        assert_eq!(rt.header_len(), 72);
        assert_eq!(rt.segments_left(), 4);
        assert_eq!(rt.next_header(), IpProtocol::Icmpv6);
        let addresses: Vec<Ipv6Addr> = rt.addresses().collect();
        assert_eq!(addresses, [node_b(); 4]);
        let final_dst = *addresses.last().unwrap();

        assert_eq!(
            upper_layer(ip_repr.next_header, ip.payload()),
            Ok((IpProtocol::Icmpv6, 72))
        );
        assert_eq!(
            ext_header_len(IpProtocol::Ipv6Route, ip.payload()),
            Ok((IpProtocol::Icmpv6, 72))
        );

        let icmp = Icmpv6Packet::new_checked(rt.payload()).unwrap();
        assert_eq!(icmp.checksum(), 0xb650);
        // RFC 8200 §8.1: with a routing header, the pseudo-header uses the final
        // destination, which is the last address in the routing header.
        assert!(icmp.verify_checksum(&ip_repr.src_addr, &final_dst));
        let icmp_repr = Icmpv6Repr::parse(&icmp, &ip_repr.src_addr, &final_dst, true).unwrap();
        assert_eq!(
            icmp_repr,
            Icmpv6Repr::EchoRequest {
                ident: 0x030e,
                seq_no: 0x00c8,
                data: &[0xce, 0x6e, 0xfd, 0x38, 0xd5, 0x53, 0x07, 0x00],
            }
        );
    }

    #[test]
    fn rthdr0_vector_emits_identically() {
        let bytes = vector();
        let mut addresses = [0u8; 64];
        for chunk in addresses.chunks_exact_mut(16) {
            chunk.copy_from_slice(&node_b().octets());
        }
        let rt_repr = Ipv6RoutingRepr::Type0 {
            next_header: IpProtocol::Icmpv6,
            segments_left: 4,
            addresses: &addresses,
        };
        let icmp_repr = Icmpv6Repr::EchoRequest {
            ident: 0x030e,
            seq_no: 0x00c8,
            data: &[0xce, 0x6e, 0xfd, 0x38, 0xd5, 0x53, 0x07, 0x00],
        };
        let ip_repr = Ipv6Repr {
            src_addr: node_a(),
            dst_addr: node_b(),
            next_header: IpProtocol::Ipv6Route,
            payload_len: rt_repr.buffer_len() + icmp_repr.buffer_len(),
            hop_limit: 64,
        };

        let mut out = vec![0u8; ip_repr.buffer_len() + ip_repr.payload_len];
        let mut ip = Ipv6Packet::new_unchecked(&mut out[..]);
        ip_repr.emit(&mut ip);
        let (rt_bytes, icmp_bytes) = ip.payload_mut().split_at_mut(rt_repr.buffer_len());
        rt_repr.emit(&mut Ipv6RoutingHeader::new_unchecked(rt_bytes));
        icmp_repr.emit(
            &mut Icmpv6Packet::new_unchecked(icmp_bytes),
            &node_a(),
            &node_b(), // the final destination
        );
        assert_eq!(out, bytes);

        // And the parsed routing repr is the one we emitted.
        let ip = Ipv6Packet::new_checked(&bytes[..]).unwrap();
        let rt = Ipv6RoutingHeader::new_checked(ip.payload()).unwrap();
        assert_eq!(Ipv6RoutingRepr::parse(&rt), Ok(rt_repr));
    }

    #[test]
    fn rthdr0_segments_left_beyond_addresses_is_malformed() {
        let mut bytes = vector();
        bytes[40 + 3] = 5;
        let ip = Ipv6Packet::new_checked(&bytes[..]).unwrap();
        let rt = Ipv6RoutingHeader::new_checked(ip.payload()).unwrap();
        assert_eq!(Ipv6RoutingRepr::parse(&rt), Err(Error::Malformed));
    }

    // Hop-by-hop header of an MLDv2 report captured from Linux (tests/data/linux-veth.txt):
    // next header ICMPv6, router alert (MLD), PadN of 0 data bytes.
    static HBH_MLD: [u8; 8] = [0x3a, 0x00, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00];

    #[test]
    fn hop_by_hop_router_alert() {
        let header = Ipv6ExtHeader::new_checked(&HBH_MLD[..]).unwrap();
        assert_eq!(header.next_header(), IpProtocol::Icmpv6);
        assert_eq!(header.header_len(), 8);
        let options: Vec<_> = header.options_iter().collect::<Result<_>>().unwrap();
        assert_eq!(options, [Ipv6Option::RouterAlert(0), Ipv6Option::PadN(0)]);
        assert_eq!(options[0].failure_type(), Ipv6OptionFailureType::Skip);
        assert!(!options[0].may_change());
        let repr = Ipv6ExtHeaderRepr::parse(&header).unwrap();
        // Emit the router alert alone: emit pads with PadN(0) like Linux does.
        let mut ra = [0u8; 4];
        Ipv6Option::RouterAlert(0).emit(&mut ra);
        let short = Ipv6ExtHeaderRepr {
            next_header: repr.next_header,
            options: &ra,
        };
        let mut out = [0xffu8; 8];
        short.emit(&mut Ipv6ExtHeader::new_unchecked(&mut out[..]));
        assert_eq!(out, HBH_MLD);
        assert_eq!(
            ext_header_len(IpProtocol::HopByHop, &HBH_MLD),
            Ok((IpProtocol::Icmpv6, 8))
        );
    }

    #[test]
    fn option_action_bits() {
        // Type 0xc2 (jumbo payload in RFC 2675, here just its action bits): 11 = discard and
        // send a Parameter Problem unless multicast.
        let bytes = [0xc2, 0x04, 0, 1, 0, 0];
        let (_, option) = Ipv6Option::parse(&bytes).unwrap();
        assert_eq!(
            option,
            Ipv6Option::Unknown {
                type_: 0xc2,
                data: &[0, 1, 0, 0]
            }
        );
        assert_eq!(
            option.failure_type(),
            Ipv6OptionFailureType::DiscardSendUnicast
        );
        let (_, option) = Ipv6Option::parse(&[0x3e, 0]).unwrap();
        assert!(option.may_change());
        assert_eq!(option.failure_type(), Ipv6OptionFailureType::Skip);
    }

    #[test]
    fn malformed_options() {
        for bad in [&[0x01][..], &[0x01, 0x03, 0, 0], &[0x05, 0x03, 0, 0, 0]] {
            let mut iter = Ipv6OptionsIter::new(bad);
            assert_eq!(iter.next(), Some(Err(Error::Malformed)), "{bad:?}");
            assert_eq!(iter.next(), None);
        }
    }

    // A first fragment (offset 0, M=1) and a later one (offset 1448, M=0), ident 0xf88eb466,
    // as Linux fragments a 3000-byte UDP datagram over a 1500-byte link.
    static FRAG_FIRST: [u8; 8] = [0x11, 0x00, 0x00, 0x01, 0xf8, 0x8e, 0xb4, 0x66];
    static FRAG_LATER: [u8; 8] = [0x11, 0x00, 0x05, 0xa8, 0xf8, 0x8e, 0xb4, 0x66];

    #[test]
    fn fragment_header() {
        let first = Ipv6FragHeader::new_checked(&FRAG_FIRST[..]).unwrap();
        assert_eq!(first.next_header(), IpProtocol::Udp);
        assert_eq!(first.frag_offset(), 0);
        assert!(first.more_frags());
        assert_eq!(first.ident(), 0xf88e_b466);
        let later = Ipv6FragHeader::new_checked(&FRAG_LATER[..]).unwrap();
        assert_eq!(later.frag_offset(), 1448);
        assert!(!later.more_frags());
        for bytes in [FRAG_FIRST, FRAG_LATER] {
            let repr = Ipv6FragRepr::parse(&Ipv6FragHeader::new_unchecked(&bytes[..])).unwrap();
            let mut out = [0xffu8; 8];
            repr.emit(&mut Ipv6FragHeader::new_unchecked(&mut out[..]));
            assert_eq!(out, bytes);
        }
        // A chain walk steps over a first fragment and stops at a later one.
        let mut chain = FRAG_FIRST.to_vec();
        chain.extend_from_slice(&[0; 8]);
        assert_eq!(
            upper_layer(IpProtocol::Ipv6Frag, &chain),
            Ok((IpProtocol::Udp, 8))
        );
        assert_eq!(
            upper_layer(IpProtocol::Ipv6Frag, &FRAG_LATER),
            Ok((IpProtocol::Ipv6Frag, 0))
        );
    }

    #[test]
    fn ah_and_esp() {
        // AH with a 96-bit ICV (HMAC-SHA1-96): payload length 4 → 24 bytes.
        let ah = [
            0x3a, 0x04, 0x00, 0x00, 0x00, 0x00, 0x10, 0x01, 0x00, 0x00, 0x00, 0x07, 0xa1, 0xa2,
            0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0x80,
        ];
        let header = AhHeader::new_checked(&ah[..]).unwrap();
        assert_eq!(header.next_header(), IpProtocol::Icmpv6);
        assert_eq!(header.header_len(), 24);
        assert_eq!(header.spi(), 0x1001);
        assert_eq!(header.seq_number(), 7);
        assert_eq!(header.icv().len(), 12);
        assert_eq!(header.payload(), &[0x80]);
        assert_eq!(
            ext_header_len(IpProtocol::Ah, &ah),
            Ok((IpProtocol::Icmpv6, 24))
        );
        assert_eq!(
            upper_layer(IpProtocol::Ah, &ah),
            Ok((IpProtocol::Icmpv6, 24))
        );
        let mut bad = ah;
        bad[1] = 0;
        assert_eq!(
            AhHeader::new_checked(&bad[..]).unwrap_err(),
            Error::Malformed
        );
        assert_eq!(ext_header_len(IpProtocol::Ah, &bad), Err(Error::Malformed));

        let esp = [0x00, 0x00, 0x10, 0x02, 0x00, 0x00, 0x00, 0x01, 0xde, 0xad];
        let header = EspHeader::new_checked(&esp[..]).unwrap();
        assert_eq!(header.spi(), 0x1002);
        assert_eq!(header.seq_number(), 1);
        assert_eq!(header.payload(), &[0xde, 0xad]);
        assert_eq!(upper_layer(IpProtocol::Esp, &esp), Ok((IpProtocol::Esp, 0)));
        assert_eq!(
            ext_header_len(IpProtocol::Esp, &esp),
            Err(Error::Unsupported)
        );
    }

    #[test]
    fn type2_routing_header() {
        let mut bytes = [0u8; 24];
        bytes[..4].copy_from_slice(&[0x3b, 0x02, 0x02, 0x01]);
        bytes[8..].copy_from_slice(&node_a().octets());
        let header = Ipv6RoutingHeader::new_checked(&bytes[..]).unwrap();
        let repr = Ipv6RoutingRepr::parse(&header).unwrap();
        assert_eq!(
            repr,
            Ipv6RoutingRepr::Type2 {
                next_header: IpProtocol::Ipv6NoNxt,
                segments_left: 1,
                home_address: node_a()
            }
        );
        let mut out = [0xffu8; 24];
        repr.emit(&mut Ipv6RoutingHeader::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes);
    }

    proptest! {
        #[test]
        fn ext_header_repr_round_trip(nh in any::<u8>(), n in 0usize..30, ra in any::<u16>()) {
            // Options: router alert then padding to a multiple of 8.
            let mut options = vec![0u8; 4];
            Ipv6Option::RouterAlert(ra).emit(&mut options);
            options.resize(4 + n, 0);
            if n == 1 {
                options[4] = 0;
            } else if n >= 2 {
                Ipv6Option::PadN((n - 2) as u8).emit(&mut options[4..]);
            }
            let repr = Ipv6ExtHeaderRepr { next_header: nh.into(), options: &options };
            let mut out = vec![0u8; repr.buffer_len()];
            repr.emit(&mut Ipv6ExtHeader::new_unchecked(&mut out[..]));
            let header = Ipv6ExtHeader::new_checked(&out[..]).unwrap();
            let parsed = Ipv6ExtHeaderRepr::parse(&header).unwrap();
            prop_assert_eq!(parsed.next_header, repr.next_header);
            prop_assert_eq!(&parsed.options[..options.len()], &options[..]);
        }

        #[test]
        fn parse_never_panics(first in any::<u8>(), bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            let _ = upper_layer(IpProtocol::from(first), &bytes);
            let _ = ext_header_len(IpProtocol::from(first), &bytes);
            for option in Ipv6OptionsIter::new(&bytes) {
                let _ = option.map(|o| o.failure_type());
            }
            if let Ok(h) = Ipv6ExtHeader::new_checked(&bytes[..]) {
                if let Ok(repr) = Ipv6ExtHeaderRepr::parse(&h) {
                    let mut out = vec![0u8; repr.buffer_len()];
                    repr.emit(&mut Ipv6ExtHeader::new_unchecked(&mut out[..]));
                }
                let _ = h.payload();
            }
            if let Ok(h) = Ipv6RoutingHeader::new_checked(&bytes[..]) {
                let _ = (h.addresses().count(), h.address(3), h.payload(), h.data());
                if let Ok(repr) = Ipv6RoutingRepr::parse(&h) {
                    let mut out = vec![0u8; repr.buffer_len()];
                    repr.emit(&mut Ipv6RoutingHeader::new_unchecked(&mut out[..]));
                }
            }
            if let Ok(h) = Ipv6FragHeader::new_checked(&bytes[..]) {
                let _ = Ipv6FragRepr::parse(&h);
            }
            if let Ok(h) = AhHeader::new_checked(&bytes[..]) {
                let _ = (h.icv(), h.payload(), h.spi());
            }
            if let Ok(h) = EspHeader::new_checked(&bytes[..]) {
                let _ = (h.payload(), h.seq_number());
            }
        }
    }
}
