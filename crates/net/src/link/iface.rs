//! Interfaces (`ifnet`) and their IPv4 and IPv6 addresses.
//!
//! An [`Ifnet`] is part of the published configuration: workers read it without locks
//! and the control plane replaces it by publishing a new configuration. Each interface
//! points at its own neighbour table ([`crate::link::arp::ArpTable`]): the split L2/L3 design
//! of the PRESTO 2009 paper, no neighbour entry ever lives in a route.

use crate::link::arp::ArpTable;
use crate::link::lle::Nd6Table;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use wire::EthernetAddress;

pub use crate::ifindex::IfIndex;

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

    #[inline]
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
    #[inline]
    pub fn broadcast(&self) -> Option<Ipv4Addr> {
        if self.prefix_len >= 31 {
            return None;
        }
        Some(Ipv4Addr::from(
            u32::from(self.addr) | !u32::from(self.netmask()),
        ))
    }

    /// True if `a` is this subnet's network address (all host bits zero) or its
    /// broadcast address: neither names a neighbour. A /31 has neither (RFC 3021:
    /// both its addresses are hosts'), nor has a /32.
    pub fn is_net_or_bcast(&self, a: Ipv4Addr) -> bool {
        self.prefix_len < 31
            && self.contains(a)
            && (a == self.network() || Some(a) == self.broadcast())
    }

    /// True if `a` is on this subnet.
    #[inline]
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

/// An IPv6 address with its prefix length, as `ifconfig` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Inet6Addr {
    pub addr: Ipv6Addr,
    pub prefix_len: u8,
}

impl Inet6Addr {
    pub fn new(addr: Ipv6Addr, prefix_len: u8) -> Self {
        Inet6Addr {
            addr,
            prefix_len: prefix_len.min(128),
        }
    }

    /// True if `a` is on this prefix.
    #[inline]
    pub fn contains(&self, a: Ipv6Addr) -> bool {
        let bits = u32::from(self.prefix_len);
        if bits == 0 {
            return true;
        }
        let m = u128::MAX << (128 - bits);
        u128::from(a) & m == u128::from(self.addr) & m
    }

    /// The link-local address `fe80::/64` with an interface identifier from `mac`
    /// (modified EUI-64, RFC 4291 appendix A).
    pub fn link_local(mac: EthernetAddress) -> Self {
        let m = mac.0;
        let iid = [m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]];
        let mut o = [0u8; 16];
        o[0] = 0xfe;
        o[1] = 0x80;
        o[8..].copy_from_slice(&iid);
        Inet6Addr::new(Ipv6Addr::from(o), 64)
    }
}

impl std::fmt::Display for Inet6Addr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

impl std::str::FromStr for Inet6Addr {
    type Err = AddrParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (a, l) = s.split_once('/').ok_or_else(|| {
            AddrParseError(format!(
                "'{s}': expected ADDRESS/PREFIXLEN, e.g. 2001:2::2/64"
            ))
        })?;
        let addr: Ipv6Addr = a
            .parse()
            .map_err(|_| AddrParseError(format!("'{a}' is not an IPv6 address")))?;
        let prefix_len: u8 = l
            .parse()
            .ok()
            .filter(|&n: &u8| n <= 128)
            .ok_or_else(|| AddrParseError(format!("'{l}' is not a prefix length (0-128)")))?;
        if addr.is_multicast() || addr.is_unspecified() || addr.is_loopback() {
            return Err(AddrParseError(format!(
                "{addr} cannot be an interface address"
            )));
        }
        Ok(Inet6Addr { addr, prefix_len })
    }
}

/// The state of an IPv6 address (RFC 4862 §5.4, §5.5.4), FreeBSD's
/// `IN6_IFF_TENTATIVE`, `IN6_IFF_DEPRECATED` and `IN6_IFF_DUPLICATED`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddrState {
    /// Duplicate address detection runs: the address takes no traffic but ND's.
    Tentative,
    /// Unique on the link: in use.
    Preferred,
    /// Its preferred lifetime has ended (RFC 4862 §5.5.4): it still takes traffic
    /// and serves the connections that use it, but new ones choose another source
    /// if there is one (RFC 6724 §5 rule 3).
    Deprecated,
    /// Another node holds it: never used.
    Duplicated,
}

/// A lifetime's end in [`In6Ifaddr`]: nanoseconds of the stack's clock, `u64::MAX`
/// for infinity (RFC 4861 §4.6.2's all-ones lifetime, and every address an operator
/// configured).
const FOREVER: u64 = u64::MAX;

/// An IPv6 address configured on an interface, with its duplicate address detection
/// state and, for one stateless autoconfiguration formed, its preferred and valid
/// lifetimes (RFC 4862 §5.5.3); these change without a new configuration being
/// published.
#[derive(Debug)]
pub struct In6Ifaddr {
    pub addr: Inet6Addr,
    state: AtomicU8,
    /// Duplicate address detection: probes sent, and when the next step is due
    /// (nanoseconds; `u64::MAX` before the first probe). Worker 0's timers only.
    dad_sent: AtomicU8,
    dad_next: AtomicU64,
    /// Formed from an advertised prefix (SLAAC): advertisements set its lifetimes.
    autoconf: bool,
    /// When the preferred and valid lifetimes end ([`FOREVER`] for infinity).
    preferred_until: AtomicU64,
    valid_until: AtomicU64,
}

impl In6Ifaddr {
    /// An address an operator configured: no lifetime ends.
    pub fn new(addr: Inet6Addr, state: AddrState) -> Self {
        In6Ifaddr {
            addr,
            state: AtomicU8::new(state as u8),
            dad_sent: AtomicU8::new(0),
            dad_next: AtomicU64::new(u64::MAX),
            autoconf: false,
            preferred_until: AtomicU64::new(FOREVER),
            valid_until: AtomicU64::new(FOREVER),
        }
    }

    /// An address stateless autoconfiguration formed, preferred until `preferred`
    /// and valid until `valid` (`None`: infinity).
    pub fn autoconf(
        addr: Inet6Addr,
        state: AddrState,
        preferred: Option<dev::Instant>,
        valid: Option<dev::Instant>,
    ) -> Self {
        let a = In6Ifaddr {
            autoconf: true,
            ..In6Ifaddr::new(addr, state)
        };
        a.set_lifetimes(preferred, valid);
        a
    }

    /// The same address starting duplicate address detection again (the link came
    /// up), its lifetimes kept.
    pub(crate) fn restarted(&self) -> Self {
        let a = In6Ifaddr {
            autoconf: self.autoconf,
            ..In6Ifaddr::new(self.addr, AddrState::Tentative)
        };
        a.preferred_until.store(
            self.preferred_until.load(Ordering::Relaxed),
            Ordering::Relaxed,
        );
        a.valid_until
            .store(self.valid_until.load(Ordering::Relaxed), Ordering::Relaxed);
        a
    }

    pub(crate) fn dad_sent(&self) -> u8 {
        self.dad_sent.load(Ordering::Relaxed)
    }

    pub(crate) fn dad_next(&self) -> Option<dev::Instant> {
        match self.dad_next.load(Ordering::Relaxed) {
            u64::MAX => None,
            t => Some(dev::Instant::from_nanos(t)),
        }
    }

    /// A probe went out; the next step is due at `next`.
    pub(crate) fn dad_probe(&self, next: dev::Instant) {
        self.dad_sent.fetch_add(1, Ordering::Relaxed);
        self.dad_next.store(next.as_nanos(), Ordering::Relaxed);
    }

    pub fn state(&self) -> AddrState {
        match self.state.load(Ordering::Acquire) {
            0 => AddrState::Tentative,
            1 => AddrState::Preferred,
            2 => AddrState::Deprecated,
            _ => AddrState::Duplicated,
        }
    }

    pub(crate) fn set_state(&self, s: AddrState) {
        self.state.store(s as u8, Ordering::Release);
    }

    /// In use: neither tentative nor duplicated (a deprecated address is still
    /// valid, RFC 4862 §5.5.4).
    pub fn usable(&self) -> bool {
        matches!(self.state(), AddrState::Preferred | AddrState::Deprecated)
    }

    /// Formed by stateless autoconfiguration.
    pub fn is_autoconf(&self) -> bool {
        self.autoconf
    }

    /// When its preferred lifetime ends (`None`: never).
    pub fn preferred_until(&self) -> Option<dev::Instant> {
        until(self.preferred_until.load(Ordering::Relaxed))
    }

    /// When its valid lifetime ends and it is removed (`None`: never).
    pub fn valid_until(&self) -> Option<dev::Instant> {
        until(self.valid_until.load(Ordering::Relaxed))
    }

    pub(crate) fn set_lifetimes(
        &self,
        preferred: Option<dev::Instant>,
        valid: Option<dev::Instant>,
    ) {
        let ns = |t: Option<dev::Instant>| t.map_or(FOREVER, |t| t.as_nanos().min(FOREVER - 1));
        self.preferred_until.store(ns(preferred), Ordering::Relaxed);
        self.valid_until.store(ns(valid), Ordering::Relaxed);
    }
}

fn until(ns: u64) -> Option<dev::Instant> {
    (ns != FOREVER).then(|| dev::Instant::from_nanos(ns))
}

/// The solicited-node multicast address of `a` (RFC 4291 §2.7.1): `ff02::1:ffXX:XXXX`.
pub fn solicited_node(a: Ipv6Addr) -> Ipv6Addr {
    let o = a.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    )
}

/// IPv6 addresses an interface holds at most (the link-local one included):
/// router advertisements can add addresses, so the list has a bound.
pub const MAX_ADDRS6: usize = 16;

/// The all-nodes link-local multicast address.
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
/// The all-routers link-local multicast address.
pub const ALL_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);

/// Interface flags, named as `ifconfig` shows them.
pub mod flags {
    pub const IFF_UP: u32 = 0x1;
    pub const IFF_BROADCAST: u32 = 0x2;
    /// A point-to-point link with no link layer (a tunnel's interface): what is
    /// sent on it is queued with its IP header first.
    pub const IFF_POINTOPOINT: u32 = 0x10;
    pub const IFF_PROMISC: u32 = 0x100;
    pub const IFF_MULTICAST: u32 = 0x8000;
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

/// One interface as the data path sees it. A change publishes a new one, made
/// from a clone of the current (its neighbour tables and switches are shared by
/// every version of it).
#[derive(Debug, Clone)]
pub struct Ifnet {
    pub index: IfIndex,
    pub name: String,
    pub mac: EthernetAddress,
    pub mtu: usize,
    pub flags: u32,
    pub addrs: Vec<InetAddr>,
    /// IPv6 addresses, the link-local one first once IPv6 is on.
    pub addrs6: Vec<Arc<In6Ifaddr>>,
    /// The interface's IPv4 neighbour table (FreeBSD's `lltable` for `AF_INET`).
    pub arp: Arc<ArpTable>,
    /// The interface's IPv6 neighbour table (`AF_INET6`).
    pub nd6: Arc<Nd6Table>,
    /// Number of queues the device has; queue `q` belongs to worker `q % workers`.
    pub num_queues: usize,
    /// Per-interface forwarding switches (shared by every version of the interface,
    /// so turning them costs no republish).
    pub forwarding: Arc<Forwarding>,
    /// What the device computes for the stack: TCP checksums, segmentation
    /// (TCP builds segments up to `offload.tso` for it; `ip_send` finishes what a
    /// device without them cannot).
    pub offload: dev::Offloads,
}

/// Whether an interface forwards packets that arrive on it for other hosts (Linux's
/// `net.ipv4.conf.IF.forwarding`; FreeBSD's `net.inet.ip.forwarding` is global).
#[derive(Debug, Default)]
pub struct Forwarding {
    pub inet: std::sync::atomic::AtomicBool,
    pub inet6: std::sync::atomic::AtomicBool,
    /// Send router advertisements on this interface (FreeBSD's `rtadvd`, built in).
    pub rtadv: std::sync::atomic::AtomicBool,
}

impl Forwarding {
    /// IPv4 forwarding is on.
    #[inline]
    pub fn inet(&self) -> bool {
        self.inet.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// IPv6 forwarding is on.
    #[inline]
    pub fn inet6(&self) -> bool {
        self.inet6.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Router advertisements are on.
    #[inline]
    pub fn rtadv(&self) -> bool {
        self.rtadv.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Ifnet {
    /// The interface has no link layer (a tunnel's, `IFF_POINTOPOINT`): no link
    /// header, no neighbour resolution, no duplicate address detection.
    #[inline(always)]
    pub fn no_link_header(&self) -> bool {
        self.flags & flags::IFF_POINTOPOINT != 0
    }

    /// The interface is up (`IFF_UP`): it receives and sends. A down one drops
    /// both ways, counted in `ether.ifdown`.
    #[inline(always)]
    pub fn is_up(&self) -> bool {
        self.flags & flags::IFF_UP != 0
    }

    /// True if `a` is one of this interface's addresses.
    #[inline]
    pub fn has_addr(&self, a: Ipv4Addr) -> bool {
        self.addrs.iter().any(|x| x.addr == a)
    }

    /// True if `a` is a broadcast address on this interface.
    #[inline]
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

    /// The IPv6 address `a` if it is configured here (in any state).
    #[inline]
    pub fn addr6(&self, a: Ipv6Addr) -> Option<&Arc<In6Ifaddr>> {
        self.addrs6.iter().find(|x| x.addr.addr == a)
    }

    /// IPv6 is on: the interface has a link-local address.
    #[inline]
    pub fn inet6(&self) -> bool {
        !self.addrs6.is_empty()
    }

    /// True if the interface listens to multicast group `g`: all-nodes, all-routers
    /// when it forwards IPv6 (RFC 4291 §2.8: a router's router solicitations come
    /// there), and the solicited-node group of each of its addresses (tentative ones
    /// too, RFC 4862 §5.4.2: joined before the probe goes out).
    pub fn in6_joined(&self, g: Ipv6Addr) -> bool {
        self.inet6()
            && (g == ALL_NODES
                || (g == ALL_ROUTERS && self.forwarding.inet6())
                || self.addrs6.iter().any(|x| solicited_node(x.addr.addr) == g))
    }

    /// Source address selection (RFC 6724, reduced to what a host with a link-local
    /// and a few global addresses needs): a usable address of the destination's scope
    /// (rule 2), a preferred one before a deprecated one (rule 3; RFC 4862 §5.5.4
    /// keeps a deprecated one usable when there is no other), one on the
    /// destination's prefix first (rule 8).
    pub fn source6_for(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        let ll = is_link_local(dst) || (dst.is_multicast() && dst.segments()[0] & 0x000f <= 2);
        let usable = || self.addrs6.iter().filter(|x| x.usable());
        if ll {
            return usable()
                .find(|x| is_link_local(x.addr.addr))
                .map(|x| x.addr.addr);
        }
        let global =
            |s: AddrState| usable().filter(move |x| x.state() == s && !is_link_local(x.addr.addr));
        let best = |s: AddrState| {
            global(s)
                .find(|x| x.addr.contains(dst))
                .or_else(|| global(s).next())
        };
        best(AddrState::Preferred)
            .or_else(|| best(AddrState::Deprecated))
            .or_else(|| usable().next())
            .map(|x| x.addr.addr)
    }
}

/// `fe80::/10`.
pub fn is_link_local(a: Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
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

    #[test]
    fn network_and_broadcast_are_not_neighbours_except_on_a_31_or_32() {
        let ip = |d| Ipv4Addr::new(198, 18, 0, d);
        let a: InetAddr = "198.18.0.7/24".parse().unwrap();
        assert!(a.is_net_or_bcast(ip(0)) && a.is_net_or_bcast(ip(255)));
        assert!(!a.is_net_or_bcast(ip(1)) && !a.is_net_or_bcast(Ipv4Addr::new(198, 18, 1, 0)));
        // RFC 3021: both addresses of a /31 are hosts'.
        let p: InetAddr = "198.18.0.1/31".parse().unwrap();
        assert!(!p.is_net_or_bcast(ip(0)) && !p.is_net_or_bcast(ip(1)));
        let h: InetAddr = "198.18.0.1/32".parse().unwrap();
        assert!(!h.is_net_or_bcast(ip(1)));
    }

    /// RFC 6724 rule 3 before rule 8: a preferred address, even off the
    /// destination's prefix, before a deprecated one on it; a deprecated one when
    /// it is all there is (RFC 4862 §5.5.4: new communication is not refused it).
    #[test]
    fn source_selection_avoids_a_deprecated_address_while_there_is_another() {
        let mac = EthernetAddress([0x02, 0, 0, 0, 0, 7]);
        let a6 = |s: &str| -> Inet6Addr { s.parse().unwrap() };
        let ifnet = |addrs6: Vec<Arc<In6Ifaddr>>| Ifnet {
            index: IfIndex(0),
            name: "t0".into(),
            mac,
            mtu: 1500,
            flags: flags::IFF_UP,
            addrs: Vec::new(),
            addrs6,
            arp: Arc::new(ArpTable::new(Default::default())),
            nd6: Arc::new(Nd6Table::new(Default::default())),
            num_queues: 1,
            forwarding: Arc::default(),
            offload: dev::Offloads::default(),
        };
        let ll = Arc::new(In6Ifaddr::new(
            Inet6Addr::link_local(mac),
            AddrState::Preferred,
        ));
        let old = Arc::new(In6Ifaddr::new(
            a6("2001:2:0:1::7/64"),
            AddrState::Deprecated,
        ));
        let new = Arc::new(In6Ifaddr::new(a6("2001:2:0:2::7/64"), AddrState::Preferred));
        let on_old: Ipv6Addr = "2001:2:0:1::99".parse().unwrap();
        let far: Ipv6Addr = "2001:2:ffff::5".parse().unwrap();
        let i = ifnet(vec![ll.clone(), old.clone(), new.clone()]);
        assert_eq!(i.source6_for(far), Some(new.addr.addr));
        assert_eq!(i.source6_for(on_old), Some(new.addr.addr));
        let i = ifnet(vec![ll.clone(), old.clone()]);
        assert_eq!(i.source6_for(far), Some(old.addr.addr));
        assert_eq!(
            i.source6_for("fe80::1".parse().unwrap()),
            Some(ll.addr.addr)
        );
    }
}
