//! Neighbour discovery for IPv6 (RFC 4861): message bodies and options.
//!
//! Messages travel in ICMPv6 ([`Icmpv6Packet`]); [`NdiscRepr`] is the body of
//! [`Icmpv6Repr::Ndisc`](crate::Icmpv6Repr::Ndisc). Options are read with
//! [`NdiscOptionsIter`] and written with [`NdiscOptionRepr::emit`].
//!
//! RFC 4861 §6.1, §7.1: a node must silently discard an ND message whose code is not 0 or
//! that carries an option of length 0; `parse` returns `Err(Malformed)` for both. The IP
//! hop limit 255 check is the caller's (it lives in the IPv6 header).

use crate::ethernet::EthernetAddress;
use crate::icmpv6::{Icmpv6Message, Icmpv6Packet};
use crate::{read_u32, write_u32, Error, Result};
use core::{fmt, ops};
use std::net::Ipv6Addr;

macro_rules! flags_u8 {
    ($(#[$attr:meta])* $name:ident { $( $(#[$fattr:meta])* $flag:ident = $bit:literal, )+ }) => {
        $(#[$attr])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name(u8);

        impl $name {
            $( $(#[$fattr])* pub const $flag: $name = $name($bit); )+
            /// No flag.
            pub const EMPTY: $name = $name(0);

            /// The raw byte, restricted to the defined flags.
            pub const fn bits(self) -> u8 {
                self.0
            }

            /// Flags from a raw byte; undefined bits are dropped.
            pub const fn from_bits_truncate(bits: u8) -> $name {
                $name(bits & (0 $(| $bit)+))
            }

            /// True if every flag of `other` is set.
            pub const fn contains(self, other: $name) -> bool {
                self.0 & other.0 == other.0
            }
        }

        impl ops::BitOr for $name {
            type Output = $name;
            fn bitor(self, rhs: $name) -> $name {
                $name(self.0 | rhs.0)
            }
        }
    };
}

flags_u8! {
    /// Router advertisement flags (RFC 4861 §4.2).
    NdiscRouterFlags {
        /// Managed address configuration (DHCPv6).
        MANAGED = 0x80,
        /// Other configuration (DHCPv6 for other information).
        OTHER = 0x40,
    }
}

flags_u8! {
    /// Neighbor advertisement flags (RFC 4861 §4.4).
    NdiscNeighborFlags {
        /// The sender is a router.
        ROUTER = 0x80,
        /// Sent in response to a solicitation.
        SOLICITED = 0x40,
        /// Override an existing cache entry.
        OVERRIDE = 0x20,
    }
}

flags_u8! {
    /// Prefix information flags (RFC 4861 §4.6.2).
    NdiscPrefixFlags {
        /// On-link.
        ON_LINK = 0x80,
        /// Autonomous address configuration (SLAAC, RFC 4862).
        ADDRCONF = 0x40,
    }
}

enum_with_unknown! {
    /// NDP option type (RFC 4861 §4.6).
    pub enum NdiscOptionType(u8) {
        /// Source link-layer address.
        SourceLinkLayerAddr = 1,
        /// Target link-layer address.
        TargetLinkLayerAddr = 2,
        /// Prefix information.
        PrefixInformation = 3,
        /// Redirected header.
        RedirectedHeader = 4,
        /// MTU.
        Mtu = 5,
    }
}

mod field {
    pub const TYPE: usize = 0;
    pub const LENGTH: usize = 1;
    pub const LL_ADDR: core::ops::Range<usize> = 2..8;
    pub const MTU: usize = 4;
    pub const PREFIX_LEN: usize = 2;
    pub const PREFIX_FLAGS: usize = 3;
    pub const VALID_LT: usize = 4;
    pub const PREF_LT: usize = 8;
    pub const PREFIX: usize = 16;
    pub const PREFIX_INFO_LEN: usize = 32;
    pub const REDIRECTED: usize = 8;
}

/// A view of one NDP option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NdiscOption<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> NdiscOption<T> {
    /// Wrap a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> NdiscOption<T> {
        NdiscOption { buffer }
    }

    /// Wrap a buffer and check that every getter is in bounds.
    pub fn new_checked(buffer: T) -> Result<NdiscOption<T>> {
        let option = Self::new_unchecked(buffer);
        option.check_len()?;
        Ok(option)
    }

    /// `Err(Truncated)` if the buffer is shorter than 2 bytes or than the option length;
    /// `Err(Malformed)` for length 0 (RFC 4861 §4.6), or a prefix information option that
    /// is not 32 bytes.
    pub fn check_len(&self) -> Result<()> {
        let data = self.buffer.as_ref();
        if data.len() < 2 {
            return Err(Error::Truncated);
        }
        let len = self.buffer_len();
        if len == 0 {
            return Err(Error::Malformed);
        }
        if data.len() < len {
            return Err(Error::Truncated);
        }
        if self.option_type() == NdiscOptionType::PrefixInformation && len != field::PREFIX_INFO_LEN
        {
            return Err(Error::Malformed);
        }
        Ok(())
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Option type.
    pub fn option_type(&self) -> NdiscOptionType {
        NdiscOptionType::from(self.buffer.as_ref()[field::TYPE])
    }

    /// Raw length field, in units of 8 bytes.
    pub fn data_len(&self) -> u8 {
        self.buffer.as_ref()[field::LENGTH]
    }

    /// Option length in bytes.
    pub fn buffer_len(&self) -> usize {
        usize::from(self.data_len()) * 8
    }

    /// Read `N` bytes at `at` within the option, or zeros if the option is shorter: the
    /// prefix getters work on any checked option without panicking.
    fn get<const N: usize>(&self, at: usize) -> [u8; N] {
        let mut out = [0u8; N];
        let data = self.buffer.as_ref();
        let end = self.buffer_len().min(data.len());
        if let Some(bytes) = data[..end].get(at..at + N) {
            out.copy_from_slice(bytes);
        }
        out
    }

    /// Source/target link-layer address (Ethernet: the six bytes after type and length).
    pub fn link_layer_addr(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(&self.buffer.as_ref()[field::LL_ADDR])
    }

    /// MTU option value.
    pub fn mtu(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::MTU)
    }

    /// Prefix length in bits (prefix information).
    pub fn prefix_len(&self) -> u8 {
        self.get::<1>(field::PREFIX_LEN)[0]
    }

    /// L and A flags (prefix information).
    pub fn prefix_flags(&self) -> NdiscPrefixFlags {
        NdiscPrefixFlags::from_bits_truncate(self.get::<1>(field::PREFIX_FLAGS)[0])
    }

    /// Valid lifetime in seconds (prefix information; `u32::MAX` = infinity).
    pub fn valid_lifetime(&self) -> u32 {
        u32::from_be_bytes(self.get(field::VALID_LT))
    }

    /// Preferred lifetime in seconds (prefix information).
    pub fn preferred_lifetime(&self) -> u32 {
        u32::from_be_bytes(self.get(field::PREF_LT))
    }

    /// The prefix (prefix information).
    pub fn prefix(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.get::<16>(field::PREFIX))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> NdiscOption<&'a T> {
    /// The option body after type and length.
    pub fn data(&self) -> &'a [u8] {
        &self.buffer.as_ref()[2..self.buffer_len()]
    }
}

/// Prefix information (RFC 4861 §4.6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NdiscPrefixInformation {
    /// Prefix length in bits.
    pub prefix_len: u8,
    /// On-link and autonomous flags.
    pub flags: NdiscPrefixFlags,
    /// Valid lifetime in seconds.
    pub valid_lifetime: u32,
    /// Preferred lifetime in seconds.
    pub preferred_lifetime: u32,
    /// The prefix.
    pub prefix: Ipv6Addr,
}

/// A parsed NDP option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NdiscOptionRepr<'a> {
    /// Source link-layer address (Ethernet).
    SourceLinkLayerAddr(EthernetAddress),
    /// Target link-layer address (Ethernet).
    TargetLinkLayerAddr(EthernetAddress),
    /// Prefix information.
    PrefixInformation(NdiscPrefixInformation),
    /// Redirected header: the IP header and data of the redirected packet (after the six
    /// reserved bytes), including any zero padding to 8 bytes.
    RedirectedHeader(&'a [u8]),
    /// MTU.
    Mtu(u32),
    /// Any other option (and link-layer address options that are not 8 bytes long).
    Unknown {
        /// Option type.
        type_: u8,
        /// Option body after type and length.
        data: &'a [u8],
    },
}

impl<'a> NdiscOptionRepr<'a> {
    /// Read one option from the front of `buffer`; return the rest and the option.
    pub fn parse(buffer: &'a [u8]) -> Result<(&'a [u8], NdiscOptionRepr<'a>)> {
        let option = NdiscOption::new_checked(buffer)?;
        let len = option.buffer_len();
        let repr = match (option.option_type(), len) {
            (NdiscOptionType::SourceLinkLayerAddr, 8) => {
                NdiscOptionRepr::SourceLinkLayerAddr(option.link_layer_addr())
            }
            (NdiscOptionType::TargetLinkLayerAddr, 8) => {
                NdiscOptionRepr::TargetLinkLayerAddr(option.link_layer_addr())
            }
            (NdiscOptionType::PrefixInformation, _) => {
                NdiscOptionRepr::PrefixInformation(NdiscPrefixInformation {
                    prefix_len: option.prefix_len(),
                    flags: option.prefix_flags(),
                    valid_lifetime: option.valid_lifetime(),
                    preferred_lifetime: option.preferred_lifetime(),
                    prefix: option.prefix(),
                })
            }
            (NdiscOptionType::RedirectedHeader, _) => {
                NdiscOptionRepr::RedirectedHeader(&buffer[field::REDIRECTED..len])
            }
            (NdiscOptionType::Mtu, 8) => NdiscOptionRepr::Mtu(option.mtu()),
            (NdiscOptionType::Mtu, _) => return Err(Error::Malformed),
            (type_, _) => NdiscOptionRepr::Unknown {
                type_: type_.into(),
                data: option.data(),
            },
        };
        Ok((&buffer[len..], repr))
    }

    /// Bytes the option takes (a multiple of 8).
    pub const fn buffer_len(&self) -> usize {
        match self {
            NdiscOptionRepr::SourceLinkLayerAddr(_)
            | NdiscOptionRepr::TargetLinkLayerAddr(_)
            | NdiscOptionRepr::Mtu(_) => 8,
            NdiscOptionRepr::PrefixInformation(_) => field::PREFIX_INFO_LEN,
            NdiscOptionRepr::RedirectedHeader(data) => {
                (field::REDIRECTED + data.len()).div_ceil(8) * 8
            }
            NdiscOptionRepr::Unknown { data, .. } => (2 + data.len()).div_ceil(8) * 8,
        }
    }

    /// Write the option at the front of `buffer` (zero-padded to 8 bytes); return the rest.
    ///
    /// # Panics
    /// If `buffer` is shorter than [`buffer_len`](Self::buffer_len), or the option is
    /// longer than 2040 bytes.
    pub fn emit<'b>(&self, buffer: &'b mut [u8]) -> &'b mut [u8] {
        let len = self.buffer_len();
        let (out, rest) = buffer.split_at_mut(len);
        out.fill(0);
        out[field::LENGTH] = u8::try_from(len / 8).expect("NDP option too long");
        match *self {
            NdiscOptionRepr::SourceLinkLayerAddr(addr) => {
                out[field::TYPE] = NdiscOptionType::SourceLinkLayerAddr.into();
                out[field::LL_ADDR].copy_from_slice(addr.as_bytes());
            }
            NdiscOptionRepr::TargetLinkLayerAddr(addr) => {
                out[field::TYPE] = NdiscOptionType::TargetLinkLayerAddr.into();
                out[field::LL_ADDR].copy_from_slice(addr.as_bytes());
            }
            NdiscOptionRepr::PrefixInformation(info) => {
                out[field::TYPE] = NdiscOptionType::PrefixInformation.into();
                out[field::PREFIX_LEN] = info.prefix_len;
                out[field::PREFIX_FLAGS] = info.flags.bits();
                write_u32(out, field::VALID_LT, info.valid_lifetime);
                write_u32(out, field::PREF_LT, info.preferred_lifetime);
                out[field::PREFIX..].copy_from_slice(&info.prefix.octets());
            }
            NdiscOptionRepr::RedirectedHeader(data) => {
                out[field::TYPE] = NdiscOptionType::RedirectedHeader.into();
                out[field::REDIRECTED..field::REDIRECTED + data.len()].copy_from_slice(data);
            }
            NdiscOptionRepr::Mtu(mtu) => {
                out[field::TYPE] = NdiscOptionType::Mtu.into();
                write_u32(out, field::MTU, mtu);
            }
            NdiscOptionRepr::Unknown { type_, data } => {
                out[field::TYPE] = type_;
                out[2..2 + data.len()].copy_from_slice(data);
            }
        }
        rest
    }
}

/// Iterator over NDP options. Yields `Err` once and stops on a bad option (length 0 →
/// `Malformed`, past the end → `Truncated`), so it always terminates.
#[derive(Debug, Clone)]
pub struct NdiscOptionsIter<'a> {
    rest: &'a [u8],
}

impl<'a> NdiscOptionsIter<'a> {
    /// Iterate over raw options.
    pub const fn new(options: &'a [u8]) -> NdiscOptionsIter<'a> {
        NdiscOptionsIter { rest: options }
    }
}

impl<'a> Iterator for NdiscOptionsIter<'a> {
    type Item = Result<NdiscOptionRepr<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        match NdiscOptionRepr::parse(self.rest) {
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

/// The body of an NDP message.
///
/// Router solicitation, neighbor solicitation/advertisement and redirect carry the options
/// the stack acts on as fields (other options are checked, then dropped). A router
/// advertisement carries its options raw: it may hold any number of prefixes, routes and
/// DNS servers, which the caller reads with [`NdiscOptionsIter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NdiscRepr<'a> {
    /// Router solicitation (RFC 4861 §4.1).
    RouterSolicit {
        /// Source link-layer address option.
        lladdr: Option<EthernetAddress>,
    },
    /// Router advertisement (RFC 4861 §4.2).
    RouterAdvert {
        /// Hop limit hosts should use (0 = unspecified).
        hop_limit: u8,
        /// M and O flags.
        flags: NdiscRouterFlags,
        /// Router lifetime in seconds (0 = not a default router).
        router_lifetime: u16,
        /// Reachable time in milliseconds (0 = unspecified).
        reachable_time: u32,
        /// Retransmission timer in milliseconds (0 = unspecified).
        retrans_time: u32,
        /// Options, raw (a multiple of 8 bytes).
        options: &'a [u8],
    },
    /// Neighbor solicitation (RFC 4861 §4.3).
    NeighborSolicit {
        /// The address being resolved.
        target_addr: Ipv6Addr,
        /// Source link-layer address option (absent in DAD probes).
        lladdr: Option<EthernetAddress>,
    },
    /// Neighbor advertisement (RFC 4861 §4.4).
    NeighborAdvert {
        /// R, S and O flags.
        flags: NdiscNeighborFlags,
        /// The address advertised.
        target_addr: Ipv6Addr,
        /// Target link-layer address option.
        lladdr: Option<EthernetAddress>,
    },
    /// Redirect (RFC 4861 §4.5).
    Redirect {
        /// The better first hop.
        target_addr: Ipv6Addr,
        /// The destination being redirected.
        dest_addr: Ipv6Addr,
        /// Target link-layer address option.
        lladdr: Option<EthernetAddress>,
        /// Redirected header option body.
        redirected_hdr: Option<&'a [u8]>,
    },
}

impl<'a> NdiscRepr<'a> {
    /// Read the body of an NDP message (checksum not checked: that is
    /// [`Icmpv6Repr::parse`](crate::Icmpv6Repr::parse)'s job).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Icmpv6Packet<&'a T>) -> Result<NdiscRepr<'a>> {
        packet.check_len()?;
        if packet.msg_code() != 0 {
            return Err(Error::Malformed);
        }
        let options = packet.options();
        let mut source_lladdr = None;
        let mut target_lladdr = None;
        let mut redirected_hdr = None;
        for option in NdiscOptionsIter::new(options) {
            match option? {
                NdiscOptionRepr::SourceLinkLayerAddr(addr) => source_lladdr = Some(addr),
                NdiscOptionRepr::TargetLinkLayerAddr(addr) => target_lladdr = Some(addr),
                NdiscOptionRepr::RedirectedHeader(data) => redirected_hdr = Some(data),
                _ => {}
            }
        }
        match packet.msg_type() {
            Icmpv6Message::RouterSolicit => Ok(NdiscRepr::RouterSolicit {
                lladdr: source_lladdr,
            }),
            Icmpv6Message::RouterAdvert => Ok(NdiscRepr::RouterAdvert {
                hop_limit: packet.current_hop_limit(),
                flags: packet.router_flags(),
                router_lifetime: packet.router_lifetime(),
                reachable_time: packet.reachable_time(),
                retrans_time: packet.retrans_time(),
                options,
            }),
            Icmpv6Message::NeighborSolicit => Ok(NdiscRepr::NeighborSolicit {
                target_addr: packet.target_addr(),
                lladdr: source_lladdr,
            }),
            Icmpv6Message::NeighborAdvert => Ok(NdiscRepr::NeighborAdvert {
                flags: packet.neighbor_flags(),
                target_addr: packet.target_addr(),
                lladdr: target_lladdr,
            }),
            Icmpv6Message::Redirect => Ok(NdiscRepr::Redirect {
                target_addr: packet.target_addr(),
                dest_addr: packet.dest_addr(),
                lladdr: target_lladdr,
                redirected_hdr,
            }),
            _ => Err(Error::Unsupported),
        }
    }

    /// Bytes `emit` writes (the whole ICMPv6 message).
    pub const fn buffer_len(&self) -> usize {
        const fn ll(lladdr: &Option<EthernetAddress>) -> usize {
            if lladdr.is_some() {
                8
            } else {
                0
            }
        }
        match self {
            NdiscRepr::RouterSolicit { lladdr } => 8 + ll(lladdr),
            NdiscRepr::RouterAdvert { options, .. } => 16 + options.len(),
            NdiscRepr::NeighborSolicit { lladdr, .. }
            | NdiscRepr::NeighborAdvert { lladdr, .. } => 24 + ll(lladdr),
            NdiscRepr::Redirect {
                lladdr,
                redirected_hdr,
                ..
            } => {
                40 + ll(lladdr)
                    + match redirected_hdr {
                        Some(data) => NdiscOptionRepr::RedirectedHeader(data).buffer_len(),
                        None => 0,
                    }
            }
        }
    }

    /// Write the message (not the checksum).
    ///
    /// # Panics
    /// If the buffer is shorter than [`buffer_len`](Self::buffer_len).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Icmpv6Packet<T>) {
        match *self {
            NdiscRepr::RouterSolicit { lladdr } => {
                packet.set_msg_type(Icmpv6Message::RouterSolicit);
                packet.set_msg_code(0);
                packet.clear_reserved();
                if let Some(addr) = lladdr {
                    NdiscOptionRepr::SourceLinkLayerAddr(addr).emit(packet.options_mut());
                }
            }
            NdiscRepr::RouterAdvert {
                hop_limit,
                flags,
                router_lifetime,
                reachable_time,
                retrans_time,
                options,
            } => {
                packet.set_msg_type(Icmpv6Message::RouterAdvert);
                packet.set_msg_code(0);
                packet.set_current_hop_limit(hop_limit);
                packet.set_router_flags(flags);
                packet.set_router_lifetime(router_lifetime);
                packet.set_reachable_time(reachable_time);
                packet.set_retrans_time(retrans_time);
                packet.options_mut()[..options.len()].copy_from_slice(options);
            }
            NdiscRepr::NeighborSolicit {
                target_addr,
                lladdr,
            } => {
                packet.set_msg_type(Icmpv6Message::NeighborSolicit);
                packet.set_msg_code(0);
                packet.clear_reserved();
                packet.set_target_addr(target_addr);
                if let Some(addr) = lladdr {
                    NdiscOptionRepr::SourceLinkLayerAddr(addr).emit(packet.options_mut());
                }
            }
            NdiscRepr::NeighborAdvert {
                flags,
                target_addr,
                lladdr,
            } => {
                packet.set_msg_type(Icmpv6Message::NeighborAdvert);
                packet.set_msg_code(0);
                packet.set_neighbor_flags(flags);
                packet.set_target_addr(target_addr);
                if let Some(addr) = lladdr {
                    NdiscOptionRepr::TargetLinkLayerAddr(addr).emit(packet.options_mut());
                }
            }
            NdiscRepr::Redirect {
                target_addr,
                dest_addr,
                lladdr,
                redirected_hdr,
            } => {
                packet.set_msg_type(Icmpv6Message::Redirect);
                packet.set_msg_code(0);
                packet.clear_reserved();
                packet.set_target_addr(target_addr);
                packet.set_dest_addr(dest_addr);
                let mut out = packet.options_mut();
                if let Some(addr) = lladdr {
                    out = NdiscOptionRepr::TargetLinkLayerAddr(addr).emit(out);
                }
                if let Some(data) = redirected_hdr {
                    NdiscOptionRepr::RedirectedHeader(data).emit(out);
                }
            }
        }
    }
}

impl fmt::Display for NdiscRepr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NdiscRepr::RouterSolicit { .. } => f.write_str("router solicitation"),
            NdiscRepr::RouterAdvert {
                router_lifetime, ..
            } => write!(f, "router advertisement lifetime={router_lifetime}"),
            NdiscRepr::NeighborSolicit { target_addr, .. } => {
                write!(f, "neighbor solicitation who has {target_addr}")
            }
            NdiscRepr::NeighborAdvert {
                target_addr,
                lladdr,
                ..
            } => match lladdr {
                Some(mac) => write!(f, "neighbor advertisement {target_addr} is at {mac}"),
                None => write!(f, "neighbor advertisement {target_addr}"),
            },
            NdiscRepr::Redirect {
                target_addr,
                dest_addr,
                ..
            } => write!(f, "redirect {dest_addr} to {target_addr}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Icmpv6Repr;
    use proptest::prelude::*;

    // Captured on a Linux veth link (tests/data/linux-veth.txt), IPv6 header removed.
    // Router solicitation fe80::ff:fe00:1 -> ff02::2 with source link-layer address.
    static RS: [u8; 16] = [
        0x85, 0x00, 0x7b, 0x2c, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00,
        0x01,
    ];

    // Neighbor solicitation fd00::1 -> ff02::1:ff00:2 for fd00::2 ...
    static NS: [u8; 32] = [
        0x87, 0x00, 0x7d, 0x97, 0x00, 0x00, 0x00, 0x00, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x01, 0x01, 0x02, 0x00, 0x00, 0x00,
        0x00, 0x01,
    ];

    // ... and the advertisement fd00::2 -> fd00::1: solicited, override, target lladdr.
    static NA: [u8; 32] = [
        0x88, 0x00, 0x1c, 0x9a, 0x60, 0x00, 0x00, 0x00, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x01, 0x02, 0x00, 0x00, 0x00,
        0x00, 0x02,
    ];

    // A DAD probe :: -> ff02::1:ff00:1 for fe80::ff:fe00:1, carrying a nonce option
    // (type 14, RFC 7527) that this crate does not name.
    static DAD_NS: [u8; 32] = [
        0x87, 0x00, 0x41, 0xc7, 0x00, 0x00, 0x00, 0x00, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x01, 0x0e, 0x01, 0x60, 0xc0, 0x68, 0xa4,
        0x63, 0xf0,
    ];

    // Not captured (Linux does not advertise without radvd): a router advertisement typed
    // from RFC 4861 §4.2 in the shape radvd sends: hop limit 64, lifetime 1800 s, source
    // lladdr, MTU 1500, prefix fd00::/64 on-link + autonomous (valid 86400 s, preferred
    // 14400 s). Checksum zero here, filled by the test.
    static RA: [u8; 64] = [
        0x86, 0x00, 0x00, 0x00, 0x40, 0x00, 0x07, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x01, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x05, 0x01, 0x00, 0x00, 0x00, 0x00,
        0x05, 0xdc, 0x03, 0x04, 0x40, 0xc0, 0x00, 0x01, 0x51, 0x80, 0x00, 0x00, 0x38, 0x40, 0x00,
        0x00, 0x00, 0x00, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,
    ];

    fn addr(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    fn round_trip<'a>(bytes: &'a [u8], src: &str, dst: &str) -> NdiscRepr<'a> {
        let (src, dst) = (addr(src), addr(dst));
        let packet = Icmpv6Packet::new_checked(bytes).unwrap();
        let Ok(Icmpv6Repr::Ndisc(repr)) = Icmpv6Repr::parse(&packet, &src, &dst, true) else {
            panic!("not NDP: {bytes:02x?}");
        };
        let icmp = Icmpv6Repr::Ndisc(repr);
        let mut out = vec![0u8; icmp.buffer_len()];
        icmp.emit(&mut Icmpv6Packet::new_unchecked(&mut out[..]), &src, &dst);
        assert_eq!(out, bytes, "{repr}");
        repr
    }

    const MAC_A: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x01]);
    const MAC_B: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x02]);

    #[test]
    fn linux_router_solicitation() {
        let repr = round_trip(&RS, "fe80::ff:fe00:1", "ff02::2");
        assert_eq!(
            repr,
            NdiscRepr::RouterSolicit {
                lladdr: Some(MAC_A)
            }
        );
    }

    #[test]
    fn linux_neighbor_solicitation_and_advertisement() {
        let ns = round_trip(&NS, "fd00::1", "ff02::1:ff00:2");
        assert_eq!(
            ns,
            NdiscRepr::NeighborSolicit {
                target_addr: addr("fd00::2"),
                lladdr: Some(MAC_A)
            }
        );
        let na = round_trip(&NA, "fd00::2", "fd00::1");
        assert_eq!(
            na,
            NdiscRepr::NeighborAdvert {
                flags: NdiscNeighborFlags::SOLICITED | NdiscNeighborFlags::OVERRIDE,
                target_addr: addr("fd00::2"),
                lladdr: Some(MAC_B)
            }
        );
        assert_eq!(
            na.to_string(),
            "neighbor advertisement fd00::2 is at 02:00:00:00:00:02"
        );
        let packet = Icmpv6Packet::new_checked(&NA[..]).unwrap();
        assert!(!packet.neighbor_flags().contains(NdiscNeighborFlags::ROUTER));
    }

    #[test]
    fn dad_probe_with_unknown_option() {
        let (src, dst) = (Ipv6Addr::UNSPECIFIED, addr("ff02::1:ff00:1"));
        let packet = Icmpv6Packet::new_checked(&DAD_NS[..]).unwrap();
        let repr = Icmpv6Repr::parse(&packet, &src, &dst, true).unwrap();
        assert_eq!(
            repr,
            Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
                target_addr: addr("fe80::ff:fe00:1"),
                lladdr: None
            })
        );
        let options: Vec<_> = NdiscOptionsIter::new(packet.options())
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(
            options,
            [NdiscOptionRepr::Unknown {
                type_: 14,
                data: &DAD_NS[26..]
            }]
        );
    }

    #[test]
    fn router_advertisement_options() {
        let (src, dst) = (addr("fe80::ff:fe00:2"), addr("ff02::1"));
        let mut bytes = RA;
        Icmpv6Packet::new_unchecked(&mut bytes[..]).fill_checksum(&src, &dst);
        let packet = Icmpv6Packet::new_checked(&bytes[..]).unwrap();
        let Ok(Icmpv6Repr::Ndisc(repr)) = Icmpv6Repr::parse(&packet, &src, &dst, true) else {
            panic!()
        };
        let NdiscRepr::RouterAdvert {
            hop_limit,
            flags,
            router_lifetime,
            options,
            ..
        } = repr
        else {
            panic!("{repr:?}")
        };
        assert_eq!(
            (hop_limit, flags, router_lifetime),
            (64, NdiscRouterFlags::EMPTY, 1800)
        );
        let options: Vec<_> = NdiscOptionsIter::new(options)
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(
            options,
            [
                NdiscOptionRepr::SourceLinkLayerAddr(MAC_B),
                NdiscOptionRepr::Mtu(1500),
                NdiscOptionRepr::PrefixInformation(NdiscPrefixInformation {
                    prefix_len: 64,
                    flags: NdiscPrefixFlags::ON_LINK | NdiscPrefixFlags::ADDRCONF,
                    valid_lifetime: 86400,
                    preferred_lifetime: 14400,
                    prefix: addr("fd00::"),
                }),
            ]
        );
        let mut out = [0u8; RA.len()];
        Icmpv6Repr::Ndisc(repr).emit(&mut Icmpv6Packet::new_unchecked(&mut out[..]), &src, &dst);
        assert_eq!(out, bytes);
    }

    #[test]
    fn nonzero_code_is_malformed() {
        let mut bytes = NS;
        bytes[1] = 1;
        let packet = Icmpv6Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(NdiscRepr::parse(&packet), Err(Error::Malformed));
    }

    #[test]
    fn redirect_round_trip() {
        // Typed from RFC 4861 §4.5: redirect fd00::99 via fe80::ff:fe00:2, with target
        // lladdr and the first bytes of the redirected packet.
        let quoted = &NS[..16];
        let repr = NdiscRepr::Redirect {
            target_addr: addr("fe80::ff:fe00:2"),
            dest_addr: addr("fd00::99"),
            lladdr: Some(MAC_B),
            redirected_hdr: Some(quoted),
        };
        let (src, dst) = (addr("fe80::1"), addr("fd00::1"));
        let icmp = Icmpv6Repr::Ndisc(repr);
        let mut out = vec![0u8; icmp.buffer_len()];
        assert_eq!(out.len(), 40 + 8 + 8 + 16);
        icmp.emit(&mut Icmpv6Packet::new_unchecked(&mut out[..]), &src, &dst);
        let packet = Icmpv6Packet::new_checked(&out[..]).unwrap();
        assert_eq!(Icmpv6Repr::parse(&packet, &src, &dst, true), Ok(icmp));
    }

    #[test]
    fn option_length_zero_is_malformed() {
        let bytes = [1, 0, 0, 0, 0, 0, 0, 0];
        let mut iter = NdiscOptionsIter::new(&bytes);
        assert_eq!(iter.next(), Some(Err(Error::Malformed)));
        assert_eq!(iter.next(), None);
        assert_eq!(
            NdiscOptionsIter::new(&[1, 2, 0, 0]).next(),
            Some(Err(Error::Truncated))
        );
        // Prefix information must be 32 bytes.
        assert_eq!(
            NdiscOptionsIter::new(&[3, 1, 0, 0, 0, 0, 0, 0]).next(),
            Some(Err(Error::Malformed))
        );
    }

    proptest! {
        #[test]
        fn option_round_trip(kind in 0u8..6, mac in any::<[u8; 6]>(), word in any::<u32>(),
                             prefix in any::<[u8; 16]>(), plen in any::<u8>(), flags in any::<u8>(),
                             data in proptest::collection::vec(any::<u8>(), 0..40)) {
            // Data of redirected/unknown options is stored padded, so test with padded data.
            let mut padded = data.clone();
            padded.resize((data.len() + 2).div_ceil(8) * 8 - 2, 0);
            let mut redirected = data.clone();
            redirected.resize(data.len().div_ceil(8) * 8, 0);
            let repr = match kind {
                0 => NdiscOptionRepr::SourceLinkLayerAddr(EthernetAddress(mac)),
                1 => NdiscOptionRepr::TargetLinkLayerAddr(EthernetAddress(mac)),
                2 => NdiscOptionRepr::PrefixInformation(NdiscPrefixInformation {
                    prefix_len: plen, flags: NdiscPrefixFlags::from_bits_truncate(flags),
                    valid_lifetime: word, preferred_lifetime: !word, prefix: prefix.into(),
                }),
                3 => NdiscOptionRepr::RedirectedHeader(&redirected),
                4 => NdiscOptionRepr::Mtu(word),
                _ => NdiscOptionRepr::Unknown { type_: 6 + (plen % 200), data: &padded },
            };
            let mut out = vec![0u8; repr.buffer_len()];
            let rest = repr.emit(&mut out);
            prop_assert!(rest.is_empty());
            let (rest, parsed) = NdiscOptionRepr::parse(&out).unwrap();
            prop_assert!(rest.is_empty());
            prop_assert_eq!(parsed, repr);
        }

        #[test]
        fn message_round_trip(kind in 0u8..5, mac in any::<Option<[u8; 6]>>(), a in any::<[u8; 16]>(),
                              b in any::<[u8; 16]>(), flags in any::<u8>(), word in any::<u32>()) {
            let lladdr = mac.map(EthernetAddress);
            let mut options = [0u8; 8];
            if let Some(mac) = lladdr {
                NdiscOptionRepr::SourceLinkLayerAddr(mac).emit(&mut options);
            }
            let redirected = [0x60u8, 0, 0, 0, 0, 0, 0x3b, 0x40];
            let repr = match kind {
                0 => NdiscRepr::RouterSolicit { lladdr },
                1 => NdiscRepr::RouterAdvert {
                    hop_limit: flags, flags: NdiscRouterFlags::from_bits_truncate(flags),
                    router_lifetime: word as u16, reachable_time: word, retrans_time: !word,
                    options: if lladdr.is_some() { &options } else { &[] },
                },
                2 => NdiscRepr::NeighborSolicit { target_addr: a.into(), lladdr },
                3 => NdiscRepr::NeighborAdvert {
                    flags: NdiscNeighborFlags::from_bits_truncate(flags), target_addr: a.into(), lladdr,
                },
                _ => NdiscRepr::Redirect {
                    target_addr: a.into(), dest_addr: b.into(), lladdr,
                    redirected_hdr: (flags & 1 == 1).then_some(&redirected[..]),
                },
            };
            let icmp = Icmpv6Repr::Ndisc(repr);
            let (src, dst) = (Ipv6Addr::from(b), Ipv6Addr::from(a));
            let mut out = vec![0u8; icmp.buffer_len()];
            icmp.emit(&mut Icmpv6Packet::new_unchecked(&mut out[..]), &src, &dst);
            let packet = Icmpv6Packet::new_checked(&out[..]).unwrap();
            prop_assert_eq!(Icmpv6Repr::parse(&packet, &src, &dst, true), Ok(icmp));
        }

        #[test]
        fn options_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            for option in NdiscOptionsIter::new(&bytes).flatten() {
                let mut out = vec![0u8; option.buffer_len()];
                option.emit(&mut out);
            }
            if let Ok(option) = NdiscOption::new_checked(&bytes[..]) {
                let _ = (option.data(), option.link_layer_addr(), option.mtu(), option.prefix());
                let _ = (option.prefix_len(), option.prefix_flags(), option.valid_lifetime());
                let _ = option.preferred_lifetime();
            }
        }
    }
}
