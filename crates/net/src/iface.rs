//! Interfaces (`ifnet`) and their IPv4 addresses.
//!
//! An [`Ifnet`] is part of the published configuration: workers read it without locks
//! and the control plane replaces it by publishing a new configuration. Each interface
//! points at its own neighbour table ([`crate::arp::ArpTable`]): the split L2/L3 design
//! of the PRESTO 2009 paper, no neighbour entry ever lives in a route.

use crate::arp::ArpTable;
use std::net::Ipv4Addr;
use std::sync::Arc;
use wire::EthernetAddress;

/// An interface's index in its stack (`if_index`), from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IfIndex(pub u16);

impl IfIndex {
    pub fn get(self) -> usize {
        self.0 as usize
    }
}

/// An IPv4 address with its prefix length, as `ifconfig` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InetAddr {
    pub addr: Ipv4Addr,
    pub prefix_len: u8,
}

/// Error parsing `ADDR/LEN`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddrParseError(pub String);

impl std::fmt::Display for AddrParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AddrParseError {}

impl InetAddr {
    pub fn new(addr: Ipv4Addr, prefix_len: u8) -> Self {
        InetAddr {
            addr,
            prefix_len: prefix_len.min(32),
        }
    }

    pub fn netmask(&self) -> Ipv4Addr {
        let bits = if self.prefix_len == 0 {
            0
        } else {
            u32::MAX << (32 - self.prefix_len as u32)
        };
        Ipv4Addr::from(bits)
    }

    pub fn network(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr) & u32::from(self.netmask()))
    }

    /// The directed broadcast address of the subnet (none for /31 and /32, RFC 3021).
    pub fn broadcast(&self) -> Option<Ipv4Addr> {
        if self.prefix_len >= 31 {
            return None;
        }
        Some(Ipv4Addr::from(
            u32::from(self.addr) | !u32::from(self.netmask()),
        ))
    }

    /// True if `a` is on this subnet.
    pub fn contains(&self, a: Ipv4Addr) -> bool {
        let m = u32::from(self.netmask());
        u32::from(a) & m == u32::from(self.addr) & m
    }
}

impl std::fmt::Display for InetAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

impl std::str::FromStr for InetAddr {
    type Err = AddrParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (a, l) = s.split_once('/').ok_or_else(|| {
            AddrParseError(format!(
                "'{s}': expected ADDRESS/PREFIXLEN, e.g. 198.18.0.2/24"
            ))
        })?;
        let addr: Ipv4Addr = a
            .parse()
            .map_err(|_| AddrParseError(format!("'{a}' is not an IPv4 address")))?;
        let prefix_len: u8 = l
            .parse()
            .ok()
            .filter(|&n: &u8| n <= 32)
            .ok_or_else(|| AddrParseError(format!("'{l}' is not a prefix length (0-32)")))?;
        if addr.is_multicast() || addr.is_broadcast() || addr.is_unspecified() {
            return Err(AddrParseError(format!(
                "{addr} cannot be an interface address"
            )));
        }
        Ok(InetAddr { addr, prefix_len })
    }
}

/// Interface flags, named as `ifconfig` shows them.
pub mod flags {
    pub const IFF_UP: u32 = 0x1;
    pub const IFF_BROADCAST: u32 = 0x2;
    pub const IFF_PROMISC: u32 = 0x100;
}

/// What the caller asks for when attaching a device.
#[derive(Clone, Debug, Default)]
pub struct IfConfig {
    /// Name shown by `ifconfig`; the device's name when `None`.
    pub name: Option<String>,
    /// The stack's link-layer address on this link; the device's suggestion, else a
    /// locally administered address derived from the stack and interface, when `None`.
    pub mac: Option<EthernetAddress>,
    pub addrs: Vec<InetAddr>,
    /// Overrides the device MTU.
    pub mtu: Option<usize>,
}

/// One interface as the data path sees it.
#[derive(Debug)]
pub struct Ifnet {
    pub index: IfIndex,
    pub name: String,
    pub mac: EthernetAddress,
    pub mtu: usize,
    pub flags: u32,
    pub addrs: Vec<InetAddr>,
    /// The interface's IPv4 neighbour table (FreeBSD's `lltable` for `AF_INET`).
    pub arp: Arc<ArpTable>,
    /// Number of queues the device has; queue `q` belongs to worker `q % workers`.
    pub num_queues: usize,
}

impl Ifnet {
    /// True if `a` is one of this interface's addresses.
    pub fn has_addr(&self, a: Ipv4Addr) -> bool {
        self.addrs.iter().any(|x| x.addr == a)
    }

    /// True if `a` is a broadcast address on this interface.
    pub fn is_broadcast(&self, a: Ipv4Addr) -> bool {
        a.is_broadcast() || self.addrs.iter().any(|x| x.broadcast() == Some(a))
    }

    /// The address to use as source towards `dst`: one on its subnet, else the first.
    pub fn source_for(&self, dst: Ipv4Addr) -> Option<Ipv4Addr> {
        self.addrs
            .iter()
            .find(|x| x.contains(dst))
            .or(self.addrs.first())
            .map(|x| x.addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inet_addr_math() {
        let a: InetAddr = "198.18.0.7/24".parse().unwrap();
        assert_eq!(a.network(), Ipv4Addr::new(198, 18, 0, 0));
        assert_eq!(a.broadcast(), Some(Ipv4Addr::new(198, 18, 0, 255)));
        assert!(a.contains(Ipv4Addr::new(198, 18, 0, 200)));
        assert!(!a.contains(Ipv4Addr::new(198, 18, 1, 1)));
        let p: InetAddr = "198.18.0.1/31".parse().unwrap();
        assert_eq!(p.broadcast(), None);
        let z = InetAddr::new(Ipv4Addr::new(198, 18, 0, 1), 0);
        assert!(z.contains(Ipv4Addr::new(8, 8, 8, 8)));
        assert!("198.18.0.1".parse::<InetAddr>().is_err());
        assert!("198.18.0.1/33".parse::<InetAddr>().is_err());
        assert!("foo/24".parse::<InetAddr>().is_err());
        assert!("224.0.0.1/24".parse::<InetAddr>().is_err());
    }
}
