//! Packet formats as zero-copy views and small `Repr` values.
//!
//! One file a protocol, in the style of smoltcp's `src/wire/`. Each format has two faces:
//!
//! * a **view** `XxxPacket<T: AsRef<[u8]>>` over a byte buffer. Getters need `AsRef<[u8]>`,
//!   setters `AsMut<[u8]>`. The field offsets live in a private `mod field` per file, so the
//!   byte layout of the header is readable in one place next to the RFC that defines it.
//! * a **representation** `XxxRepr`: a small `Copy` value with `parse` (view → repr, with
//!   every semantic check), `emit` (repr → view, filling lengths and checksums) and
//!   `buffer_len` (how many bytes `emit` writes).
//!
//! Protocol code in `net` parses headers through these views: a header is made
//! contiguous (`pulldown`) and then read through a view. It does not do so
//! everywhere: in about 190 places (counted 2026-12-03) `net` indexes bytes
//! itself, mostly fixed-size header arrays on the forwarding fast paths
//! (`first_chunk`, whose bounds the compiler checks: the TTL and checksum rewrite)
//! and option and extension-header walks over a slice whose length was checked
//! just before. Moving those behind views is planned; until then they are where a
//! reader looking for an out-of-bounds read should look first.
//!
//! # No-panic contract
//!
//! Bad input is normal input, so:
//!
//! 1. **`new_checked` validates lengths** (`check_len`) so that **every getter on a checked
//!    view is in bounds**: a getter of a view returned by `new_checked` never panics, whatever
//!    the bytes say. This covers variable-length parts too: IPv4 `header_len()` and
//!    `total_len()`, UDP `len()`, TCP data offset, ARP address lengths, IPv6 payload length
//!    and extension header lengths are all checked against the buffer by `check_len`.
//! 2. **`parse` never panics on any input.** `Repr::parse` and every option iterator take a
//!    checked view (or check themselves) and return [`Error`] for anything they cannot
//!    represent. Iterators over options stop after returning an error, so a malformed length
//!    can never make them loop forever.
//! 3. **`emit` panics only if the caller's buffer is smaller than `buffer_len()`** of the
//!    `Repr` being emitted (for reprs with a payload: `buffer_len()` plus the payload length
//!    the caller passes). Callers size the buffer from `buffer_len()`; doing otherwise is a
//!    programming error, not bad input.
//! 4. Views made with **`new_unchecked`** promise nothing: their getters index the buffer
//!    directly and may panic on short buffers. Use them only on buffers you sized yourself,
//!    typically just before `emit`.
//!
//! The property tests at the bottom of each file and the fuzz targets in `fuzz/` (`wire_*`)
//! check points 1–3 on arbitrary bytes.
//!
//! # Checksums
//!
//! [`checksum::data`] is the one's complement sum (not complemented, as in smoltcp); a
//! header verifies when the sum over it is `0xffff`. [`checksum::update`] is the RFC 1624
//! incremental update that forwarding uses to decrement the TTL without re-summing.

#![forbid(unsafe_code)]

use core::fmt;

/// The set operations of a flags type, a newtype over an integer (`TcpFlags`,
/// `StpFlags`): `contains`, `intersects`, `insert`, `remove`, `set`, `is_empty`, and
/// `|`, `|=`, `&`.
macro_rules! flag_set_ops {
    ($name:ident) => {
        impl $name {
            /// True if every flag of `other` is set in `self`.
            pub const fn contains(self, other: $name) -> bool {
                self.0 & other.0 == other.0
            }

            /// True if any flag of `other` is set in `self`.
            pub const fn intersects(self, other: $name) -> bool {
                self.0 & other.0 != 0
            }

            /// Set the flags of `other`.
            pub fn insert(&mut self, other: $name) {
                self.0 |= other.0
            }

            /// Clear the flags of `other`.
            pub fn remove(&mut self, other: $name) {
                self.0 &= !other.0
            }

            /// Set or clear the flags of `other`.
            pub fn set(&mut self, other: $name, value: bool) {
                if value {
                    self.insert(other)
                } else {
                    self.remove(other)
                }
            }

            /// True if no flag is set.
            pub const fn is_empty(self) -> bool {
                self.0 == 0
            }
        }

        impl core::ops::BitOr for $name {
            type Output = $name;
            fn bitor(self, rhs: $name) -> $name {
                $name(self.0 | rhs.0)
            }
        }

        impl core::ops::BitOrAssign for $name {
            fn bitor_assign(&mut self, rhs: $name) {
                self.0 |= rhs.0
            }
        }

        impl core::ops::BitAnd for $name {
            type Output = $name;
            fn bitand(self, rhs: $name) -> $name {
                $name(self.0 & rhs.0)
            }
        }
    };
}

/// Define an enum over a wire integer, with an `Unknown(raw)` variant so that every value
/// round-trips, and `From` conversions both ways.
macro_rules! enum_with_unknown {
    (
        $( #[$enum_attr:meta] )*
        pub enum $name:ident($ty:ty) {
            $(
                $( #[$variant_attr:meta] )*
                $variant:ident = $value:literal
            ),+ $(,)?
        }
    ) => {
        $( #[$enum_attr] )*
        #[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Clone, Copy)]
        pub enum $name {
            $(
                $( #[$variant_attr] )*
                $variant,
            )*
            /// A value with no name here; kept so that it round-trips.
            Unknown($ty),
        }

        impl ::core::convert::From<$ty> for $name {
            fn from(value: $ty) -> Self {
                match value {
                    $( $value => $name::$variant, )*
                    other => $name::Unknown(other),
                }
            }
        }

        impl ::core::convert::From<$name> for $ty {
            fn from(value: $name) -> Self {
                match value {
                    $( $name::$variant => $value, )*
                    $name::Unknown(other) => other,
                }
            }
        }
    };
}

pub mod arp;
pub mod checksum;
mod error;
pub mod ethernet;
pub mod gre;
pub mod icmpv4;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv4opt;
pub mod ipv6;
pub mod ipv6ext;
pub mod ndp;
pub mod sample;
pub mod stp;
pub mod tcp;
pub mod udp;

pub use arp::{ArpHardware, ArpOperation, ArpPacket, ArpRepr};
pub use error::{Error, Result};
pub use ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr, VlanHeader, VlanRepr};
pub use gre::{GrePacket, GreRepr};
pub use icmpv4::{
    Icmpv4DstUnreachable, Icmpv4Message, Icmpv4Packet, Icmpv4ParamProblem, Icmpv4Redirect,
    Icmpv4Repr, Icmpv4TimeExceeded,
};
pub use icmpv6::{
    Icmpv6DstUnreachable, Icmpv6Message, Icmpv6Packet, Icmpv6ParamProblem, Icmpv6Repr,
    Icmpv6TimeExceeded, MldAddressRecordRepr, MldRecordType, MldRecordsIter, MldRepr,
};
pub use ipv4::{Ipv4Packet, Ipv4Repr};
pub use ipv4opt::{ipv4_options_check, Ipv4OptionError, Ipv4Options};
pub use ipv6::{Ipv6Packet, Ipv6Repr};
pub use ipv6ext::{
    ext_header_len, upper_layer, AhHeader, EspHeader, Ipv6AddressIter, Ipv6ExtHeader,
    Ipv6ExtHeaderRepr, Ipv6FragHeader, Ipv6FragRepr, Ipv6Option, Ipv6OptionFailureType,
    Ipv6OptionsIter, Ipv6RoutingHeader, Ipv6RoutingRepr, Ipv6RoutingType,
};
pub use ndp::{
    NdiscNeighborFlags, NdiscOption, NdiscOptionRepr, NdiscOptionType, NdiscOptionsIter,
    NdiscPrefixFlags, NdiscPrefixInformation, NdiscRepr, NdiscRouterFlags,
};
pub use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
pub use stp::{BridgeId, StpBpdu, StpBpduType, StpConfig, StpFlags, StpPortRole, StpRepr};
pub use tcp::{
    TcpFastOpenCookie, TcpFlags, TcpOption, TcpOptionsIter, TcpPacket, TcpRepr, TcpSeqNumber,
    TcpTimestampRepr,
};
pub use udp::{UdpPacket, UdpRepr};

enum_with_unknown! {
    /// IP protocol numbers (IPv4 "protocol", IPv6 "next header"), IANA registry.
    pub enum IpProtocol(u8) {
        /// IPv6 hop-by-hop options (RFC 8200 §4.3).
        HopByHop = 0,
        /// ICMP for IPv4 (RFC 792).
        Icmp = 1,
        /// IGMP (RFC 3376).
        Igmp = 2,
        /// IPv4 encapsulated in IP (RFC 2003; `ipencap` in /etc/protocols).
        IpIp = 4,
        /// TCP (RFC 9293).
        Tcp = 6,
        /// UDP (RFC 768).
        Udp = 17,
        /// IPv6 encapsulated in IP (RFC 4213).
        Ipv6 = 41,
        /// IPv6 routing header (RFC 8200 §4.4).
        Ipv6Route = 43,
        /// IPv6 fragment header (RFC 8200 §4.5).
        Ipv6Frag = 44,
        /// Generic routing encapsulation (RFC 2784).
        Gre = 47,
        /// Encapsulating security payload (RFC 4303).
        Esp = 50,
        /// Authentication header (RFC 4302).
        Ah = 51,
        /// ICMP for IPv6 (RFC 4443).
        Icmpv6 = 58,
        /// No next header (RFC 8200 §4.7).
        Ipv6NoNxt = 59,
        /// IPv6 destination options (RFC 8200 §4.6).
        Ipv6Opts = 60,
    }
}

impl fmt::Display for IpProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpProtocol::HopByHop => f.write_str("hop-by-hop"),
            IpProtocol::Icmp => f.write_str("icmp"),
            IpProtocol::Igmp => f.write_str("igmp"),
            IpProtocol::IpIp => f.write_str("ipencap"),
            IpProtocol::Ipv6 => f.write_str("ipv6"),
            IpProtocol::Gre => f.write_str("gre"),
            IpProtocol::Tcp => f.write_str("tcp"),
            IpProtocol::Udp => f.write_str("udp"),
            IpProtocol::Ipv6Route => f.write_str("ipv6-route"),
            IpProtocol::Ipv6Frag => f.write_str("ipv6-frag"),
            IpProtocol::Esp => f.write_str("esp"),
            IpProtocol::Ah => f.write_str("ah"),
            IpProtocol::Icmpv6 => f.write_str("ipv6-icmp"),
            IpProtocol::Ipv6NoNxt => f.write_str("ipv6-nonxt"),
            IpProtocol::Ipv6Opts => f.write_str("ipv6-opts"),
            IpProtocol::Unknown(n) => write!(f, "{n}"),
        }
    }
}

/// Read a big-endian `u16` at `at`. Callers have checked the bounds (see the no-panic
/// contract); an out-of-bounds `at` panics like slice indexing.
#[inline]
pub(crate) fn read_u16(data: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([data[at], data[at + 1]])
}

/// Read a big-endian `u32` at `at`.
#[inline]
pub(crate) fn read_u32(data: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]])
}

#[inline]
pub(crate) fn write_u16(data: &mut [u8], at: usize, value: u16) {
    data[at..at + 2].copy_from_slice(&value.to_be_bytes());
}

#[inline]
pub(crate) fn write_u32(data: &mut [u8], at: usize, value: u32) {
    data[at..at + 4].copy_from_slice(&value.to_be_bytes());
}

#[inline]
pub(crate) fn read_ipv4(data: &[u8], at: usize) -> Ipv4Addr {
    Ipv4Addr::new(data[at], data[at + 1], data[at + 2], data[at + 3])
}

#[inline]
pub(crate) fn read_ipv6(data: &[u8], at: usize) -> Ipv6Addr {
    let mut octets = [0u8; 16];
    octets.copy_from_slice(&data[at..at + 16]);
    Ipv6Addr::from(octets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_protocol_round_trips_every_value() {
        for n in 0..=255u8 {
            assert_eq!(u8::from(IpProtocol::from(n)), n);
        }
        assert_eq!(IpProtocol::from(58), IpProtocol::Icmpv6);
        assert_eq!(IpProtocol::Unknown(253).to_string(), "253");
    }

    #[test]
    fn error_displays() {
        assert_eq!(Error::Checksum.to_string(), "checksum error");
    }
}
