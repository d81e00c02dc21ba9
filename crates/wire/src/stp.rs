//! Spanning tree BPDUs: IEEE 802.1D-2004 clause 9 (STP configuration and topology change
//! notification BPDUs, and the RST BPDU of 802.1w, now 802.1D-2004 clause 17).
//!
//! A BPDU travels in an IEEE 802.2 LLC type 1 frame with DSAP and SSAP `0x42` and control
//! `0x03` (UI), after an 802.3 length field, to the Bridge Group Address 01:80:c2:00:00:00
//! (§7.12.3, §7.12.6). [`strip_llc`] checks and removes the LLC header; the frame around it
//! is not handled here. [`StpBpdu`] views what follows the LLC header: octet 1 of the
//! standard's numbering is byte 0 of the view.
//!
//! Times (message age, max age, hello time, forward delay) are kept as on the wire, in
//! units of 1/256 s (§9.2.8), so that they round-trip exactly: 20 s is 5120.
//!
//! [`StpRepr::parse`] applies the checks of §9.3.4 that need nothing but the BPDU. The
//! loopback check of §9.3.4 a), which compares the bridge and port identifiers with the
//! values the receiving port would transmit, is left to the bridge.

use crate::ethernet::EthernetAddress;
use crate::{read_u16, write_u16, write_u32, Error, Result};
use core::fmt;

/// The Bridge Group Address, to which every BPDU is sent (§7.12.6).
pub const BRIDGE_GROUP_ADDRESS: EthernetAddress =
    EthernetAddress([0x01, 0x80, 0xc2, 0x00, 0x00, 0x00]);

/// The LLC header of a BPDU: DSAP and SSAP `0x42` (the Bridge Spanning Tree Protocol LSAP,
/// §7.12.3), control `0x03` (unnumbered information).
pub const LLC_STP: [u8; 3] = [0x42, 0x42, 0x03];

/// The BPDU in an 802.2 LLC payload: what follows [`LLC_STP`]. `Err(Truncated)` if `data`
/// is shorter than the LLC header, `Err(Unsupported)` if the header is not that of a BPDU.
pub fn strip_llc(data: &[u8]) -> Result<&[u8]> {
    match data.split_at_checked(LLC_STP.len()) {
        None => Err(Error::Truncated),
        Some((llc, bpdu)) if llc == LLC_STP => Ok(bpdu),
        Some(_) => Err(Error::Unsupported),
    }
}

enum_with_unknown! {
    /// BPDU type (§9.3.1, §9.3.2, §9.3.3).
    pub enum StpBpduType(u8) {
        /// Configuration BPDU.
        Config = 0x00,
        /// Rapid spanning tree BPDU (also the type of an 802.1Q MST BPDU).
        Rst = 0x02,
        /// Topology change notification BPDU.
        Tcn = 0x80,
    }
}

impl fmt::Display for StpBpduType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StpBpduType::Config => f.write_str("config"),
            StpBpduType::Rst => f.write_str("RST"),
            StpBpduType::Tcn => f.write_str("TCN"),
            StpBpduType::Unknown(t) => write!(f, "0x{t:02x}"),
        }
    }
}

/// Protocol version identifier of STP BPDUs (§9.3.1, §9.3.2).
pub const VERSION_STP: u8 = 0;
/// Protocol version identifier of RST BPDUs (§9.3.3). 802.1Q MST BPDUs carry 3; a
/// receiver takes any version of 2 or more with type [`StpBpduType::Rst`] as RST.
pub const VERSION_RSTP: u8 = 2;

/// A bridge identifier (§9.2.5): a priority, whose low twelve bits are the system ID
/// extension (the VLAN or MST instance), and a MAC address.
///
/// Identifiers compare as 802.1D compares them, as unsigned 64-bit numbers: priority first,
/// then the address. The lower identifier is the better one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct BridgeId {
    /// Bridge priority (high four bits) and system ID extension (low twelve bits).
    pub priority: u16,
    /// The bridge address.
    pub mac: EthernetAddress,
}

impl BridgeId {
    /// Make an identifier.
    pub const fn new(priority: u16, mac: EthernetAddress) -> BridgeId {
        BridgeId { priority, mac }
    }

    /// An identifier from its eight octets, as carried in a BPDU.
    pub const fn from_bytes(bytes: [u8; 8]) -> BridgeId {
        let b = bytes;
        BridgeId {
            priority: u16::from_be_bytes([b[0], b[1]]),
            mac: EthernetAddress([b[2], b[3], b[4], b[5], b[6], b[7]]),
        }
    }

    /// The eight octets carried in a BPDU.
    pub const fn to_bytes(&self) -> [u8; 8] {
        let p = self.priority.to_be_bytes();
        let m = self.mac.0;
        [p[0], p[1], m[0], m[1], m[2], m[3], m[4], m[5]]
    }
}

impl fmt::Display for BridgeId {
    /// As Linux prints it: `8000.001122334455`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = &self.mac.0;
        write!(
            f,
            "{:04x}.{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
            self.priority, m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

/// The role a port claims in an RST BPDU (§9.2.9), bits 3 and 4 of the flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StpPortRole {
    /// Unknown (Master in an 802.1Q MST BPDU).
    Unknown = 0,
    /// Alternate or backup.
    AlternateBackup = 1,
    /// Root.
    Root = 2,
    /// Designated.
    Designated = 3,
}

impl fmt::Display for StpPortRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StpPortRole::Unknown => "unknown",
            StpPortRole::AlternateBackup => "alternate/backup",
            StpPortRole::Root => "root",
            StpPortRole::Designated => "designated",
        })
    }
}

/// The flags octet of a BPDU (§9.3.1, §9.3.3).
///
/// A configuration BPDU defines only [`TC`](Self::TC) and [`TCA`](Self::TCA); an RST BPDU
/// all the others and, in bits 3 and 4, a [`StpPortRole`]. A receiver ignores the bits its
/// BPDU type does not define; they are kept here as received.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct StpFlags(u8);

flag_set_ops!(StpFlags);

impl StpFlags {
    /// Topology change.
    pub const TC: StpFlags = StpFlags(0x01);
    /// Proposal (RST).
    pub const PROPOSAL: StpFlags = StpFlags(0x02);
    /// Learning (RST).
    pub const LEARNING: StpFlags = StpFlags(0x10);
    /// Forwarding (RST).
    pub const FORWARDING: StpFlags = StpFlags(0x20);
    /// Agreement (RST).
    pub const AGREEMENT: StpFlags = StpFlags(0x40);
    /// Topology change acknowledgment (configuration BPDUs only).
    pub const TCA: StpFlags = StpFlags(0x80);
    /// No flag, and port role [`StpPortRole::Unknown`].
    pub const EMPTY: StpFlags = StpFlags(0);

    const ROLE_SHIFT: u32 = 2;
    const ROLE_MASK: u8 = 0x0c;

    /// The raw octet.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Flags from the raw octet; every bit has a meaning.
    pub const fn from_bits(bits: u8) -> StpFlags {
        StpFlags(bits)
    }

    /// The port role of an RST BPDU.
    pub const fn port_role(self) -> StpPortRole {
        match (self.0 & Self::ROLE_MASK) >> Self::ROLE_SHIFT {
            0 => StpPortRole::Unknown,
            1 => StpPortRole::AlternateBackup,
            2 => StpPortRole::Root,
            _ => StpPortRole::Designated,
        }
    }

    /// Set the port role.
    pub fn set_port_role(&mut self, role: StpPortRole) {
        self.0 = (self.0 & !Self::ROLE_MASK) | ((role as u8) << Self::ROLE_SHIFT);
    }

    /// These flags with the port role `role`.
    pub const fn with_port_role(self, role: StpPortRole) -> StpFlags {
        StpFlags((self.0 & !Self::ROLE_MASK) | ((role as u8) << Self::ROLE_SHIFT))
    }
}

impl fmt::Display for StpFlags {
    /// The set flags by name, then the port role if not unknown: `TC,learning,designated`;
    /// `none` if the octet is zero.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [(StpFlags, &str); 6] = [
            (StpFlags::TC, "TC"),
            (StpFlags::PROPOSAL, "proposal"),
            (StpFlags::LEARNING, "learning"),
            (StpFlags::FORWARDING, "forwarding"),
            (StpFlags::AGREEMENT, "agreement"),
            (StpFlags::TCA, "TCA"),
        ];
        if self.is_empty() {
            return f.write_str("none");
        }
        let mut sep = "";
        for (flag, name) in NAMES {
            if self.contains(flag) {
                write!(f, "{sep}{name}")?;
                sep = ",";
            }
        }
        if self.port_role() != StpPortRole::Unknown {
            write!(f, "{sep}{}", self.port_role())?;
        }
        Ok(())
    }
}

mod field {
    use core::ops::Range;

    pub const PROTOCOL_ID: usize = 0;
    pub const VERSION: usize = 2;
    pub const BPDU_TYPE: usize = 3;
    pub const FLAGS: usize = 4;
    pub const ROOT_ID: Range<usize> = 5..13;
    pub const ROOT_PATH_COST: usize = 13;
    pub const BRIDGE_ID: Range<usize> = 17..25;
    pub const PORT_ID: usize = 25;
    pub const MESSAGE_AGE: usize = 27;
    pub const MAX_AGE: usize = 29;
    pub const HELLO_TIME: usize = 31;
    pub const FORWARD_DELAY: usize = 33;
    pub const VERSION1_LEN: usize = 35;
}

/// Length of a topology change notification BPDU (§9.3.2).
pub const TCN_LEN: usize = field::FLAGS;
/// Length of a configuration BPDU (§9.3.1).
pub const CONFIG_LEN: usize = field::VERSION1_LEN;
/// Length of an RST BPDU (§9.3.3).
pub const RST_LEN: usize = field::VERSION1_LEN + 1;

/// A read/write view of a BPDU, without its LLC header.
///
/// Which fields a BPDU carries depends on its type; [`check_len`](Self::check_len) checks
/// the length that [`header_len`](Self::header_len) gives for the type. The getters of the
/// fields after the type read as zero when the BPDU's type does not carry them (a TCN BPDU,
/// an unknown type), so that no getter of a checked view panics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StpBpdu<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> StpBpdu<T> {
    /// Wrap a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> StpBpdu<T> {
        StpBpdu { buffer }
    }

    /// Wrap a buffer and check that every getter is in bounds.
    pub fn new_checked(buffer: T) -> Result<StpBpdu<T>> {
        let bpdu = Self::new_unchecked(buffer);
        bpdu.check_len()?;
        Ok(bpdu)
    }

    /// `Err(Truncated)` if the buffer is shorter than four bytes or than the BPDU's type
    /// requires: 35 for a configuration BPDU, 36 for an RST BPDU (§9.3.4).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < TCN_LEN || len < self.header_len() {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Length of a BPDU of this type: 35 for a configuration BPDU, 36 for an RST BPDU, 4
    /// for a TCN BPDU or an unknown type. A BPDU may be longer (an MST BPDU is), and an
    /// Ethernet frame pads it; the rest is not read here.
    pub fn header_len(&self) -> usize {
        match self.bpdu_type() {
            StpBpduType::Config => CONFIG_LEN,
            StpBpduType::Rst => RST_LEN,
            StpBpduType::Tcn | StpBpduType::Unknown(_) => TCN_LEN,
        }
    }

    /// Read `N` bytes at `at` within [`header_len`](Self::header_len), or zeros if the
    /// BPDU's type does not reach that far.
    fn get<const N: usize>(&self, at: usize) -> [u8; N] {
        let mut out = [0u8; N];
        let data = self.buffer.as_ref();
        let end = self.header_len().min(data.len());
        if let Some(bytes) = data[..end].get(at..at + N) {
            out.copy_from_slice(bytes);
        }
        out
    }

    /// Protocol identifier; 0 for every spanning tree protocol.
    pub fn protocol_id(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::PROTOCOL_ID)
    }

    /// Protocol version identifier: [`VERSION_STP`], [`VERSION_RSTP`] or later.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }

    /// BPDU type.
    pub fn bpdu_type(&self) -> StpBpduType {
        StpBpduType::from(self.buffer.as_ref()[field::BPDU_TYPE])
    }

    /// Flags.
    pub fn flags(&self) -> StpFlags {
        StpFlags::from_bits(self.get::<1>(field::FLAGS)[0])
    }

    /// Root identifier.
    pub fn root_id(&self) -> BridgeId {
        BridgeId::from_bytes(self.get(field::ROOT_ID.start))
    }

    /// Root path cost.
    pub fn root_path_cost(&self) -> u32 {
        u32::from_be_bytes(self.get(field::ROOT_PATH_COST))
    }

    /// Bridge identifier of the transmitting bridge.
    pub fn bridge_id(&self) -> BridgeId {
        BridgeId::from_bytes(self.get(field::BRIDGE_ID.start))
    }

    /// Port identifier of the transmitting port: priority (high four bits) and port number
    /// (low twelve bits), §9.2.7.
    pub fn port_id(&self) -> u16 {
        u16::from_be_bytes(self.get(field::PORT_ID))
    }

    /// Message age, in 1/256 s.
    pub fn message_age(&self) -> u16 {
        u16::from_be_bytes(self.get(field::MESSAGE_AGE))
    }

    /// Max age, in 1/256 s.
    pub fn max_age(&self) -> u16 {
        u16::from_be_bytes(self.get(field::MAX_AGE))
    }

    /// Hello time, in 1/256 s.
    pub fn hello_time(&self) -> u16 {
        u16::from_be_bytes(self.get(field::HELLO_TIME))
    }

    /// Forward delay, in 1/256 s.
    pub fn forward_delay(&self) -> u16 {
        u16::from_be_bytes(self.get(field::FORWARD_DELAY))
    }

    /// Version 1 length of an RST BPDU; 0 as transmitted (§9.3.3), not checked on receipt.
    pub fn version1_len(&self) -> u8 {
        self.get::<1>(field::VERSION1_LEN)[0]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> StpBpdu<T> {
    /// Set the protocol identifier.
    pub fn set_protocol_id(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::PROTOCOL_ID, value)
    }

    /// Set the protocol version identifier.
    pub fn set_version(&mut self, value: u8) {
        self.buffer.as_mut()[field::VERSION] = value
    }

    /// Set the BPDU type.
    pub fn set_bpdu_type(&mut self, value: StpBpduType) {
        self.buffer.as_mut()[field::BPDU_TYPE] = value.into()
    }

    /// Set the flags.
    pub fn set_flags(&mut self, value: StpFlags) {
        self.buffer.as_mut()[field::FLAGS] = value.bits()
    }

    /// Set the root identifier.
    pub fn set_root_id(&mut self, value: BridgeId) {
        self.buffer.as_mut()[field::ROOT_ID].copy_from_slice(&value.to_bytes())
    }

    /// Set the root path cost.
    pub fn set_root_path_cost(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), field::ROOT_PATH_COST, value)
    }

    /// Set the bridge identifier.
    pub fn set_bridge_id(&mut self, value: BridgeId) {
        self.buffer.as_mut()[field::BRIDGE_ID].copy_from_slice(&value.to_bytes())
    }

    /// Set the port identifier.
    pub fn set_port_id(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::PORT_ID, value)
    }

    /// Set the message age, in 1/256 s.
    pub fn set_message_age(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::MESSAGE_AGE, value)
    }

    /// Set the max age, in 1/256 s.
    pub fn set_max_age(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::MAX_AGE, value)
    }

    /// Set the hello time, in 1/256 s.
    pub fn set_hello_time(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::HELLO_TIME, value)
    }

    /// Set the forward delay, in 1/256 s.
    pub fn set_forward_delay(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::FORWARD_DELAY, value)
    }

    /// Set the version 1 length.
    pub fn set_version1_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::VERSION1_LEN] = value
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for StpBpdu<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// What a configuration or an RST BPDU carries (§9.3.1, §9.3.3): the two differ in
/// which flags they define (see [`StpFlags`]) and in how a receiver validates them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StpConfig {
    /// Flags, as received: TC and TCA in a configuration BPDU, all of them and the
    /// port role in an RST BPDU.
    pub flags: StpFlags,
    /// Root identifier.
    pub root_id: BridgeId,
    /// Root path cost.
    pub root_path_cost: u32,
    /// Identifier of the transmitting bridge.
    pub bridge_id: BridgeId,
    /// Identifier of the transmitting port.
    pub port_id: u16,
    /// Message age, in 1/256 s; below `max_age` in a configuration BPDU.
    pub message_age: u16,
    /// Max age, in 1/256 s.
    pub max_age: u16,
    /// Hello time, in 1/256 s.
    pub hello_time: u16,
    /// Forward delay, in 1/256 s.
    pub forward_delay: u16,
}

impl StpConfig {
    fn read<T: AsRef<[u8]> + ?Sized>(bpdu: &StpBpdu<&T>) -> StpConfig {
        StpConfig {
            flags: bpdu.flags(),
            root_id: bpdu.root_id(),
            root_path_cost: bpdu.root_path_cost(),
            bridge_id: bpdu.bridge_id(),
            port_id: bpdu.port_id(),
            message_age: bpdu.message_age(),
            max_age: bpdu.max_age(),
            hello_time: bpdu.hello_time(),
            forward_delay: bpdu.forward_delay(),
        }
    }

    fn write<T: AsRef<[u8]> + AsMut<[u8]>>(&self, bpdu: &mut StpBpdu<T>) {
        bpdu.set_flags(self.flags);
        bpdu.set_root_id(self.root_id);
        bpdu.set_root_path_cost(self.root_path_cost);
        bpdu.set_bridge_id(self.bridge_id);
        bpdu.set_port_id(self.port_id);
        bpdu.set_message_age(self.message_age);
        bpdu.set_max_age(self.max_age);
        bpdu.set_hello_time(self.hello_time);
        bpdu.set_forward_delay(self.forward_delay);
    }
}

/// A parsed BPDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StpRepr {
    /// Configuration BPDU (§9.3.1).
    Config(StpConfig),
    /// Topology change notification BPDU (§9.3.2).
    Tcn,
    /// RST BPDU (§9.3.3).
    Rst(StpConfig),
}

impl StpRepr {
    /// Read a BPDU and validate it as §9.3.4 says:
    ///
    /// * `Err(Truncated)` if it is shorter than its type requires;
    /// * `Err(Malformed)` if the protocol identifier is not 0, if a configuration BPDU's
    ///   message age is not below its max age, or if an RST BPDU's version is below 2;
    /// * `Err(Unsupported)` for a BPDU type other than configuration, TCN and RST.
    ///
    /// The version of a configuration or TCN BPDU is not checked, and a version of 2 or
    /// more (an 802.1Q MST BPDU included) with type RST is read as an RST BPDU.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(bpdu: &StpBpdu<&T>) -> Result<StpRepr> {
        bpdu.check_len()?;
        if bpdu.protocol_id() != 0 {
            return Err(Error::Malformed);
        }
        match bpdu.bpdu_type() {
            StpBpduType::Config => {
                if bpdu.message_age() >= bpdu.max_age() {
                    return Err(Error::Malformed);
                }
                Ok(StpRepr::Config(StpConfig::read(bpdu)))
            }
            StpBpduType::Tcn => Ok(StpRepr::Tcn),
            StpBpduType::Rst => {
                if bpdu.version() < VERSION_RSTP {
                    return Err(Error::Malformed);
                }
                Ok(StpRepr::Rst(StpConfig::read(bpdu)))
            }
            StpBpduType::Unknown(_) => Err(Error::Unsupported),
        }
    }

    /// The BPDU type.
    pub const fn bpdu_type(&self) -> StpBpduType {
        match self {
            StpRepr::Config(_) => StpBpduType::Config,
            StpRepr::Tcn => StpBpduType::Tcn,
            StpRepr::Rst(_) => StpBpduType::Rst,
        }
    }

    /// 35 for a configuration BPDU, 4 for a TCN BPDU, 36 for an RST BPDU.
    pub const fn buffer_len(&self) -> usize {
        match self {
            StpRepr::Config(_) => CONFIG_LEN,
            StpRepr::Tcn => TCN_LEN,
            StpRepr::Rst(_) => RST_LEN,
        }
    }

    /// Write the BPDU: version 0 for configuration and TCN BPDUs, version 2 and a version
    /// 1 length of 0 for an RST BPDU.
    ///
    /// # Panics
    /// If the buffer is shorter than [`buffer_len`](Self::buffer_len).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, bpdu: &mut StpBpdu<T>) {
        bpdu.set_protocol_id(0);
        bpdu.set_bpdu_type(self.bpdu_type());
        match self {
            StpRepr::Tcn => bpdu.set_version(VERSION_STP),
            StpRepr::Config(c) => {
                c.write(bpdu);
                bpdu.set_version(VERSION_STP);
            }
            StpRepr::Rst(c) => {
                c.write(bpdu);
                bpdu.set_version(VERSION_RSTP);
                bpdu.set_version1_len(0);
            }
        }
    }

    /// The fields of a configuration or RST BPDU; `None` for a TCN.
    pub const fn config(&self) -> Option<&StpConfig> {
        match self {
            StpRepr::Config(c) | StpRepr::Rst(c) => Some(c),
            StpRepr::Tcn => None,
        }
    }
}

/// A time in 1/256 s as seconds rounded to two decimals, as tcpdump prints it: `20.00s`.
struct StpTime(u16);

impl fmt::Display for StpTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hundredths = (u32::from(self.0) * 100 + 128) / 256;
        write!(f, "{}.{:02}s", hundredths / 100, hundredths % 100)
    }
}

impl fmt::Display for StpRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, c) = match self {
            StpRepr::Tcn => return f.write_str("STP TCN"),
            StpRepr::Config(c) => ("STP config", c),
            StpRepr::Rst(c) => ("RSTP", c),
        };
        write!(
            f,
            "{kind} flags [{}] root {} cost {} bridge {} port {:04x} age {} max-age {} \
             hello {} fwd-delay {}",
            c.flags,
            c.root_id,
            c.root_path_cost,
            c.bridge_id,
            c.port_id,
            StpTime(c.message_age),
            StpTime(c.max_age),
            StpTime(c.hello_time),
            StpTime(c.forward_delay)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethernet::{EthernetFrame, EthernetRepr};
    use proptest::prelude::*;

    // A configuration BPDU as a Linux bridge (br0, 52:54:00:12:34:56, STP on, default
    // priority and timers) sends it while it is root, from port 1: written out from the
    // §9.3.1 layout with the values Linux fills in, the Ethernet frame padded to 60 bytes.
    // 802.3 length 38 (LLC header and 35 BPDU octets).
    static LINUX_CONFIG_FRAME: [u8; 60] = [
        0x01, 0x80, 0xc2, 0x00, 0x00, 0x00, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x00, 0x26, 0x42,
        0x42, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x00, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56,
        0x00, 0x00, 0x00, 0x00, 0x80, 0x00, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x80, 0x01, 0x00,
        0x00, 0x14, 0x00, 0x02, 0x00, 0x0f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    // An RST BPDU of the kind mstpd sends from a designated, forwarding port 2 of bridge
    // 52:54:00:ab:cd:ef (priority 0x8000), whose root is 0x1000.02:00:00:00:00:01 at cost
    // 20000, one hop (1 s) from the root: written out from the §9.3.3 layout. 802.3 length
    // 39 (LLC header and 36 BPDU octets).
    static RST_FRAME: [u8; 60] = [
        0x01, 0x80, 0xc2, 0x00, 0x00, 0x00, 0x52, 0x54, 0x00, 0xab, 0xcd, 0xef, 0x00, 0x27, 0x42,
        0x42, 0x03, 0x00, 0x00, 0x02, 0x02, 0x3c, 0x10, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
        0x00, 0x00, 0x4e, 0x20, 0x80, 0x00, 0x52, 0x54, 0x00, 0xab, 0xcd, 0xef, 0x80, 0x02, 0x01,
        0x00, 0x14, 0x00, 0x02, 0x00, 0x0f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    // A TCN BPDU: protocol identifier, version 0, type 0x80.
    static TCN: [u8; 4] = [0x00, 0x00, 0x00, 0x80];

    /// The BPDU in a frame: Ethernet header, 802.3 length, LLC header.
    fn bpdu_of(frame: &[u8]) -> &[u8] {
        let frame = EthernetFrame::new_checked(frame).unwrap();
        let eth = EthernetRepr::parse(&frame).unwrap();
        assert_eq!(eth.dst_addr, BRIDGE_GROUP_ADDRESS);
        let len = usize::from(u16::from(eth.ethertype));
        strip_llc(&frame.payload()[..len]).unwrap()
    }

    fn linux_bridge() -> BridgeId {
        BridgeId::new(
            0x8000,
            EthernetAddress([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]),
        )
    }

    fn linux_config() -> StpRepr {
        StpRepr::Config(StpConfig {
            flags: StpFlags::EMPTY,
            root_id: linux_bridge(),
            root_path_cost: 0,
            bridge_id: linux_bridge(),
            port_id: 0x8001,
            message_age: 0,
            max_age: 20 * 256,
            hello_time: 2 * 256,
            forward_delay: 15 * 256,
        })
    }

    fn rst() -> StpRepr {
        StpRepr::Rst(StpConfig {
            flags: (StpFlags::LEARNING | StpFlags::FORWARDING)
                .with_port_role(StpPortRole::Designated),
            root_id: BridgeId::new(0x1000, EthernetAddress([0x02, 0, 0, 0, 0, 0x01])),
            root_path_cost: 20000,
            bridge_id: BridgeId::new(
                0x8000,
                EthernetAddress([0x52, 0x54, 0x00, 0xab, 0xcd, 0xef]),
            ),
            port_id: 0x8002,
            message_age: 256,
            max_age: 5120,
            hello_time: 512,
            forward_delay: 3840,
        })
    }

    #[test]
    fn parse_linux_config() {
        let bytes = bpdu_of(&LINUX_CONFIG_FRAME);
        assert_eq!(bytes.len(), CONFIG_LEN);
        let bpdu = StpBpdu::new_checked(bytes).unwrap();
        assert_eq!(bpdu.protocol_id(), 0);
        assert_eq!(bpdu.version(), VERSION_STP);
        assert_eq!(bpdu.bpdu_type(), StpBpduType::Config);
        assert_eq!(bpdu.header_len(), 35);
        assert_eq!(bpdu.flags(), StpFlags::EMPTY);
        assert_eq!(bpdu.root_id(), linux_bridge());
        assert_eq!(bpdu.root_path_cost(), 0);
        assert_eq!(bpdu.bridge_id(), linux_bridge());
        assert_eq!(bpdu.port_id(), 0x8001);
        assert_eq!(bpdu.message_age(), 0);
        assert_eq!(bpdu.max_age(), 5120);
        assert_eq!(bpdu.hello_time(), 512);
        assert_eq!(bpdu.forward_delay(), 3840);
        assert_eq!(bpdu.version1_len(), 0);
        let repr = StpRepr::parse(&bpdu).unwrap();
        assert_eq!(repr, linux_config());
        assert_eq!(
            repr.to_string(),
            "STP config flags [none] root 8000.525400123456 cost 0 bridge 8000.525400123456 \
             port 8001 age 0.00s max-age 20.00s hello 2.00s fwd-delay 15.00s"
        );
        let mut out = [0u8; CONFIG_LEN];
        repr.emit(&mut StpBpdu::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes);
    }

    #[test]
    fn parse_rst() {
        let bytes = bpdu_of(&RST_FRAME);
        assert_eq!(bytes.len(), RST_LEN);
        let bpdu = StpBpdu::new_checked(bytes).unwrap();
        assert_eq!(bpdu.version(), VERSION_RSTP);
        assert_eq!(bpdu.bpdu_type(), StpBpduType::Rst);
        assert_eq!(bpdu.header_len(), 36);
        assert_eq!(bpdu.flags().port_role(), StpPortRole::Designated);
        assert!(bpdu
            .flags()
            .contains(StpFlags::LEARNING | StpFlags::FORWARDING));
        assert!(!bpdu.flags().intersects(StpFlags::TC | StpFlags::PROPOSAL));
        assert_eq!(bpdu.root_path_cost(), 20000);
        assert_eq!(bpdu.message_age(), 256);
        assert_eq!(bpdu.version1_len(), 0);
        let repr = StpRepr::parse(&bpdu).unwrap();
        assert_eq!(repr, rst());
        assert_eq!(
            repr.to_string(),
            "RSTP flags [learning,forwarding,designated] root 1000.020000000001 cost 20000 \
             bridge 8000.525400abcdef port 8002 age 1.00s max-age 20.00s hello 2.00s \
             fwd-delay 15.00s"
        );
        let mut out = [0xffu8; RST_LEN];
        repr.emit(&mut StpBpdu::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes);
    }

    #[test]
    fn tcn_round_trip() {
        // A TCN BPDU as it arrives: padded to the Ethernet minimum.
        let mut padded = [0u8; 43];
        padded[..4].copy_from_slice(&TCN);
        padded[4..].fill(0xaa);
        let bpdu = StpBpdu::new_checked(&padded[..]).unwrap();
        assert_eq!(bpdu.bpdu_type(), StpBpduType::Tcn);
        assert_eq!(bpdu.header_len(), 4);
        // Fields a TCN BPDU does not carry read as zero, whatever the padding holds.
        assert_eq!(bpdu.flags(), StpFlags::EMPTY);
        assert_eq!(bpdu.root_id(), BridgeId::default());
        assert_eq!(bpdu.forward_delay(), 0);
        let repr = StpRepr::parse(&bpdu).unwrap();
        assert_eq!(repr, StpRepr::Tcn);
        assert_eq!(repr.buffer_len(), 4);
        assert_eq!(repr.to_string(), "STP TCN");
        let mut out = [0xffu8; 4];
        repr.emit(&mut StpBpdu::new_unchecked(&mut out[..]));
        assert_eq!(out, TCN);
        // Exactly four octets are enough (§9.3.4 b).
        let bpdu = StpBpdu::new_checked(&TCN[..]).unwrap();
        assert_eq!(StpRepr::parse(&bpdu), Ok(StpRepr::Tcn));
        assert_eq!(bpdu.root_path_cost(), 0);
    }

    #[test]
    fn llc_header() {
        assert_eq!(strip_llc(&[0x42, 0x42, 0x03, 0, 0, 0, 0x80]), Ok(&TCN[..]));
        assert_eq!(strip_llc(&[0x42, 0x42]), Err(Error::Truncated));
        assert_eq!(
            strip_llc(&[0xaa, 0xaa, 0x03, 0, 0]),
            Err(Error::Unsupported)
        );
        assert_eq!(strip_llc(&[0x42, 0x42, 0x13]), Err(Error::Unsupported));
    }

    fn parse(bytes: &[u8]) -> Result<StpRepr> {
        StpRepr::parse(&StpBpdu::new_checked(bytes)?)
    }

    #[test]
    fn rejects_short() {
        let config = bpdu_of(&LINUX_CONFIG_FRAME);
        let rst = bpdu_of(&RST_FRAME);
        assert_eq!(parse(&config[..34]), Err(Error::Truncated));
        assert_eq!(parse(&rst[..35]), Err(Error::Truncated));
        assert_eq!(parse(&TCN[..3]), Err(Error::Truncated));
        assert_eq!(parse(&[]), Err(Error::Truncated));
        assert_eq!(
            StpBpdu::new_checked(&config[..34]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn rejects_invalid() {
        // Protocol identifier other than 0.
        let mut bytes = [0u8; RST_LEN];
        bytes.copy_from_slice(bpdu_of(&RST_FRAME));
        bytes[1] = 1;
        assert_eq!(parse(&bytes), Err(Error::Malformed));
        let mut tcn = TCN;
        tcn[0] = 0x80;
        assert_eq!(parse(&tcn), Err(Error::Malformed));

        // Unknown BPDU type.
        let mut bytes = [0u8; RST_LEN];
        bytes.copy_from_slice(bpdu_of(&RST_FRAME));
        bytes[3] = 0x01;
        let bpdu = StpBpdu::new_checked(&bytes[..]).unwrap();
        assert_eq!(bpdu.bpdu_type(), StpBpduType::Unknown(1));
        assert_eq!(bpdu.root_id(), BridgeId::default());
        assert_eq!(StpRepr::parse(&bpdu), Err(Error::Unsupported));

        // An RST BPDU must say version 2 or later (§9.3.4 c); 3 is an MST BPDU, read as RST.
        for (version, expect) in [
            (0, Err(Error::Malformed)),
            (1, Err(Error::Malformed)),
            (2, Ok(rst())),
            (3, Ok(rst())),
        ] {
            bytes.copy_from_slice(bpdu_of(&RST_FRAME));
            bytes[2] = version;
            assert_eq!(parse(&bytes), expect, "version {version}");
        }

        // A configuration BPDU whose message age is not below its max age (§9.3.4 a).
        let mut bytes = [0u8; CONFIG_LEN];
        bytes.copy_from_slice(bpdu_of(&LINUX_CONFIG_FRAME));
        bytes[27..29].copy_from_slice(&5120u16.to_be_bytes());
        assert_eq!(parse(&bytes), Err(Error::Malformed));
        bytes[27..29].copy_from_slice(&5119u16.to_be_bytes());
        assert!(matches!(
            parse(&bytes),
            Ok(StpRepr::Config(StpConfig {
                message_age: 5119,
                ..
            }))
        ));

        // The version of a configuration BPDU is not checked.
        bytes.copy_from_slice(bpdu_of(&LINUX_CONFIG_FRAME));
        bytes[2] = VERSION_RSTP;
        assert_eq!(parse(&bytes), Ok(linux_config()));
    }

    #[test]
    fn bridge_id_order_and_text() {
        let low_mac = BridgeId::new(0x8000, EthernetAddress([0, 0, 0, 0, 0, 1]));
        let high_mac = BridgeId::new(0x8000, EthernetAddress([0xff, 0, 0, 0, 0, 0]));
        let better_priority = BridgeId::new(0x7000, EthernetAddress([0xff; 6]));
        assert!(low_mac < high_mac);
        assert!(better_priority < low_mac);
        // The system ID extension is part of the priority and compares with it.
        let vlan_2 = BridgeId::new(0x8002, EthernetAddress([0, 0, 0, 0, 0, 0]));
        assert!(high_mac < vlan_2);
        assert_eq!(
            [high_mac, vlan_2, low_mac, better_priority].iter().min(),
            Some(&better_priority)
        );
        let id = BridgeId::new(
            0x8000,
            EthernetAddress([0x00, 0x11, 0x22, 0x33, 0x44, 0x55]),
        );
        assert_eq!(id.to_string(), "8000.001122334455");
        assert_eq!(
            BridgeId::new(0x1001, EthernetAddress::UNSPECIFIED).to_string(),
            "1001.000000000000"
        );
        assert_eq!(
            id.to_bytes(),
            [0x80, 0x00, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55]
        );
        assert_eq!(BridgeId::from_bytes(id.to_bytes()), id);
    }

    #[test]
    fn flags_and_roles() {
        let mut flags = StpFlags::EMPTY;
        assert_eq!(flags.to_string(), "none");
        assert_eq!(flags.port_role(), StpPortRole::Unknown);
        for role in [
            StpPortRole::AlternateBackup,
            StpPortRole::Root,
            StpPortRole::Designated,
            StpPortRole::Unknown,
        ] {
            flags.set_port_role(role);
            assert_eq!(flags.port_role(), role);
        }
        flags.set(StpFlags::TC | StpFlags::TCA, true);
        flags.set_port_role(StpPortRole::Root);
        assert_eq!(flags.bits(), 0x89);
        assert_eq!(flags.to_string(), "TC,TCA,root");
        flags.remove(StpFlags::TCA);
        flags.set_port_role(StpPortRole::Unknown);
        assert_eq!(flags, StpFlags::TC);
        let all = StpFlags::from_bits(0xff);
        assert_eq!(
            all.to_string(),
            "TC,proposal,learning,forwarding,agreement,TCA,designated"
        );
        assert_eq!(all & StpFlags::PROPOSAL, StpFlags::PROPOSAL);
    }

    #[test]
    fn time_text() {
        assert_eq!(StpTime(0).to_string(), "0.00s");
        assert_eq!(StpTime(5120).to_string(), "20.00s");
        assert_eq!(StpTime(128).to_string(), "0.50s");
        assert_eq!(StpTime(1).to_string(), "0.00s");
        assert_eq!(StpTime(3).to_string(), "0.01s");
        assert_eq!(StpTime(u16::MAX).to_string(), "256.00s");
    }

    fn bridge_id() -> impl Strategy<Value = BridgeId> {
        (any::<u16>(), any::<[u8; 6]>()).prop_map(|(p, m)| BridgeId::new(p, EthernetAddress(m)))
    }

    proptest! {
        #[test]
        fn repr_round_trip(
            kind in 0u8..3, flags in any::<u8>(),
            root_id in bridge_id(), root_path_cost in any::<u32>(),
            bridge_id in bridge_id(), port_id in any::<u16>(),
            ages in (0u16..u16::MAX).prop_flat_map(|a| (Just(a), a + 1..=u16::MAX)),
            hello_time in any::<u16>(), forward_delay in any::<u16>(),
        ) {
            let (message_age, max_age) = ages;
            let flags = StpFlags::from_bits(flags);
            let repr = match kind {
                0 => StpRepr::Config(StpConfig {
                    flags, root_id, root_path_cost, bridge_id, port_id,
                    message_age, max_age, hello_time, forward_delay,
                }),
                1 => StpRepr::Tcn,
                // An RST BPDU may carry a message age at or above max age (the receiver ages
                // the information out, §17.21.23), so the ages are swapped here.
                _ => StpRepr::Rst(StpConfig {
                    flags, root_id, root_path_cost, bridge_id, port_id,
                    message_age: max_age, max_age: message_age, hello_time, forward_delay,
                }),
            };
            let mut bytes = vec![0u8; repr.buffer_len()];
            repr.emit(&mut StpBpdu::new_unchecked(&mut bytes[..]));
            let bpdu = StpBpdu::new_checked(&bytes[..]).unwrap();
            prop_assert_eq!(bpdu.header_len(), repr.buffer_len());
            prop_assert_eq!(StpRepr::parse(&bpdu), Ok(repr));
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = strip_llc(&bytes);
            if let Ok(bpdu) = StpBpdu::new_checked(&bytes[..]) {
                let _ = (bpdu.protocol_id(), bpdu.version(), bpdu.bpdu_type(), bpdu.flags());
                let _ = (bpdu.root_id(), bpdu.root_path_cost(), bpdu.bridge_id());
                let _ = (bpdu.port_id(), bpdu.message_age(), bpdu.max_age());
                let _ = (bpdu.hello_time(), bpdu.forward_delay(), bpdu.version1_len());
                if let Ok(repr) = StpRepr::parse(&bpdu) {
                    let _ = repr.to_string();
                }
            }
        }
    }
}
