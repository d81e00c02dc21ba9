//! The packet as the rules see it, and what the firewall asks of the host.

use super::MAX_TAGS;
use std::fmt;
use std::net::IpAddr;

/// An interface name without allocation (at most 15 bytes, as `IFNAMSIZ` allows).
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct IfName {
    bytes: [u8; 16],
    len: u8,
}

impl IfName {
    /// `None` if `name` is longer than 15 bytes.
    pub fn new(name: &str) -> Option<IfName> {
        if name.len() > 15 {
            return None;
        }
        let mut bytes = [0; 16];
        bytes[..name.len()].copy_from_slice(name.as_bytes());
        Some(IfName {
            bytes,
            len: name.len() as u8,
        })
    }

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or("")
    }
}

impl fmt::Debug for IfName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// An interface a packet came in or goes out on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IfRef {
    pub index: u32,
    pub name: IfName,
}

/// The Ethernet header, on the layer-2 pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct MacHdr {
    pub dst: [u8; 6],
    pub src: [u8; 6],
    pub ethertype: u16,
}

/// The tags on a packet (`tag`/`untag`/`tagged`), a small set kept inline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Tags {
    v: [u16; MAX_TAGS],
    n: u8,
}

impl Tags {
    pub fn contains(&self, t: u16) -> bool {
        self.as_slice().contains(&t)
    }

    /// Adds `t`; false if the set is full.
    pub fn add(&mut self, t: u16) -> bool {
        if self.contains(t) {
            return true;
        }
        if self.n as usize == MAX_TAGS {
            return false;
        }
        self.v[self.n as usize] = t;
        self.n += 1;
        true
    }

    pub fn remove(&mut self, t: u16) {
        if let Some(i) = self.as_slice().iter().position(|&x| x == t) {
            self.n -= 1;
            self.v[i] = self.v[self.n as usize];
        }
    }

    pub fn as_slice(&self) -> &[u16] {
        &self.v[..self.n as usize]
    }
}

/// Which way the packet crosses the firewall.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Direction {
    #[default]
    In,
    Out,
}

/// TCP option bits for [`PacketInfo::tcp_opts`] (the `tcpoptions` names).
pub mod tcpopt {
    pub const MSS: u8 = 0x01;
    pub const WINDOW: u8 = 0x02;
    pub const SACK: u8 = 0x04;
    pub const TS: u8 = 0x08;
    pub const CC: u8 = 0x10;
}

/// A packet as the rules see it. The caller fills it from the headers it has already
/// parsed; fields of headers the packet does not have stay zero. The firewall reads
/// it and changes only `tags`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketInfo {
    /// Source and destination; their family is the packet's.
    pub src: IpAddr,
    pub dst: IpAddr,
    /// The upper-layer protocol (after IPv6 extension headers).
    pub proto: u8,
    /// TCP/UDP/SCTP ports (zero otherwise, and on non-first fragments).
    pub sport: u16,
    pub dport: u16,
    pub tcp_flags: u8,
    pub tcp_win: u16,
    /// [`tcpopt`] bits of the options present.
    pub tcp_opts: u8,
    /// TCP payload bytes.
    pub tcp_datalen: u16,
    /// ICMP or ICMPv6 type.
    pub icmp_type: u8,
    /// An ICMP or ICMPv6 query's or reply's identifier (echo, timestamp,
    /// information, address mask: [`crate::state::IcmpKind::Query`]), which its
    /// state is keyed on. (An error's quoted flow, which its state lookup uses, is
    /// not a field: 40 bytes more here would slow every packet `eval_batch` copies.
    /// It goes to [`crate::PacketVec::set_icmp_quote`] or to
    /// [`crate::Program::eval_error`]; an error given to `eval` matches no state.)
    pub icmp_id: u16,
    /// IP total length (IPv6: payload length + 40).
    pub ip_len: u16,
    /// TTL or hop limit.
    pub ttl: u8,
    /// TOS or traffic class.
    pub tos: u8,
    /// A fragment other than the first (offset != 0): ports and flags are absent.
    pub frag: bool,
    pub dir: Direction,
    pub rcvif: Option<IfRef>,
    pub xmitif: Option<IfRef>,
    /// The Ethernet header, when known.
    pub mac: Option<MacHdr>,
    /// This is the layer-2 pass (`layer2`, `mac`, `mac-type` match only here).
    pub layer2: bool,
    /// Bytes for the counters.
    pub len: u32,
    pub tags: Tags,
}

impl PacketInfo {
    /// A packet of protocol `proto` between `src` and `dst`, everything else zero.
    pub fn new(src: IpAddr, dst: IpAddr, proto: u8) -> Self {
        PacketInfo {
            src,
            dst,
            proto,
            sport: 0,
            dport: 0,
            tcp_flags: 0,
            tcp_win: 0,
            tcp_opts: 0,
            tcp_datalen: 0,
            icmp_type: 0,
            icmp_id: 0,
            ip_len: 0,
            ttl: 0,
            tos: 0,
            frag: false,
            dir: Direction::In,
            rcvif: None,
            xmitif: None,
            mac: None,
            layer2: false,
            len: 0,
            tags: Tags::default(),
        }
    }
}

/// What the firewall asks of the host.
pub trait Env {
    /// Whether `addr` is one of this host's addresses (`me`, `me6`).
    fn is_local(&self, addr: IpAddr) -> bool;
    /// `verrevpath`: whether the route back to `src` leaves through interface `rcvif`.
    fn verrevpath(&self, src: IpAddr, rcvif: u32) -> bool;
    /// `antispoof`: whether `src` may arrive on `rcvif` (not an address of a directly
    /// connected network reached through another interface).
    fn antispoof(&self, src: IpAddr, rcvif: u32) -> bool;
}
