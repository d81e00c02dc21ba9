//! Netchannels' shared half: which packets a netchannel takes (its [`Classifier`])
//! and the queues between its application and the workers (a [`SockShared`] of kind
//! [`SockKind::Netchannel`]). The handle is `stack::netchannel::NetChannel`; the
//! workers classify each locally delivered packet against the stack's netchannels
//! before the protocol switch. Here, below every family, as `sockbuf` is.
//!
//! [`SockKind::Netchannel`]: crate::sockbuf::SockKind::Netchannel

use crate::sockbuf::SockShared;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// An address a classifier accepts: any, one of the stack's (`me`: every packet
/// delivered locally is addressed to one of them, so for the local end it is
/// `any`; for the remote end it takes the stack's own packets, looped back), or a
/// network (an address is a /32 or /128).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddrMatch {
    Any,
    Me,
    Net(IpAddr, u8),
}

impl AddrMatch {
    fn matches(self, a: IpAddr, is_local: impl Fn(IpAddr) -> bool) -> bool {
        match self {
            AddrMatch::Any => true,
            AddrMatch::Me => is_local(a),
            AddrMatch::Net(net, len) => in_net(a, net, len),
        }
    }
}

fn in_net(a: IpAddr, net: IpAddr, len: u8) -> bool {
    match (a, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX
                .checked_shl(32 - u32::from(len.min(32)))
                .unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX
                .checked_shl(128 - u32::from(len.min(128)))
                .unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// IP version a classifier takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Any,
    V4,
    V6,
}

/// Which packets a netchannel takes: the transport protocol, and the local and
/// remote address and port of each received packet, each exact or wildcard (an
/// address may be a network). Built with the methods, or parsed from an
/// ipfw-style expression ([`Classifier::parse`]).
///
/// ```
/// use net::netchan::Classifier;
/// let a = Classifier::udp().local_port(5000);
/// let b: Classifier = "udp from any to any 5000".parse().unwrap();
/// assert_eq!(a, b);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Classifier {
    pub family: Family,
    /// IP protocol number (6 TCP, 17 UDP, 1 ICMP, 58 ICMPv6); `None`: any.
    pub proto: Option<u8>,
    pub local: AddrMatch,
    pub local_port: Option<u16>,
    pub remote: AddrMatch,
    pub remote_port: Option<u16>,
}

/// IP protocol numbers.
pub const TCP: u8 = 6;
pub const UDP: u8 = 17;
pub const ICMP: u8 = 1;
pub const ICMPV6: u8 = 58;

/// Whether a protocol's header starts with 16-bit source and destination ports.
pub(crate) fn has_ports(proto: u8) -> bool {
    // TCP, UDP, DCCP, UDP-Lite, SCTP.
    matches!(proto, 6 | 17 | 33 | 136 | 132)
}

impl Default for Classifier {
    fn default() -> Self {
        Classifier::any()
    }
}

impl Classifier {
    /// Every packet delivered to the stack.
    pub fn any() -> Self {
        Classifier {
            family: Family::Any,
            proto: None,
            local: AddrMatch::Any,
            local_port: None,
            remote: AddrMatch::Any,
            remote_port: None,
        }
    }
    pub fn udp() -> Self {
        Classifier::any().proto(UDP)
    }
    pub fn tcp() -> Self {
        Classifier::any().proto(TCP)
    }
    /// Packets of IP protocol `p`.
    pub fn proto(mut self, p: u8) -> Self {
        self.proto = Some(p);
        self
    }
    /// IPv4 or IPv6 packets only.
    pub fn family(mut self, f: Family) -> Self {
        self.family = f;
        self
    }
    /// To this local address (a /32 or /128).
    pub fn local(mut self, a: IpAddr) -> Self {
        self.local = AddrMatch::Net(a, host_len(a));
        self
    }
    /// To a local address in this network.
    pub fn local_net(mut self, a: IpAddr, len: u8) -> Self {
        self.local = AddrMatch::Net(a, len.min(host_len(a)));
        self
    }
    pub fn local_port(mut self, p: u16) -> Self {
        self.local_port = Some(p);
        self
    }
    /// From this address.
    pub fn remote(mut self, a: IpAddr) -> Self {
        self.remote = AddrMatch::Net(a, host_len(a));
        self
    }
    /// From an address in this network.
    pub fn remote_net(mut self, a: IpAddr, len: u8) -> Self {
        self.remote = AddrMatch::Net(a, len.min(host_len(a)));
        self
    }
    pub fn remote_port(mut self, p: u16) -> Self {
        self.remote_port = Some(p);
        self
    }

    /// Parses an ipfw-style expression: `[PROTO] [from ADDR [PORT]] [to ADDR [PORT]]
    /// [ip4|ip6]`,
    /// where PROTO is `ip`, `all`, `ip4`, `ip6`, `tcp`, `udp`, `icmp`, `icmp6`
    /// (`ipv6-icmp`) or a protocol number, ADDR is `any`, `me`, an address or
    /// `address/length`, and PORT a number. `from` names the remote end (the
    /// packet's source), `to` the local end. `tcp from 198.18.0.2 to me 80`.
    pub fn parse(s: &str) -> Result<Self, ClassifierError> {
        let toks: Vec<(usize, &str)> = tokens(s);
        let mut c = Classifier::any();
        let mut i = 0;
        let err = |at: usize, msg: String| ClassifierError { col: at + 1, msg };
        if let Some(&(at, t)) = toks.get(i) {
            if t != "from" && t != "to" {
                match t {
                    "ip" | "all" => {}
                    "ip4" | "ipv4" => c.family = Family::V4,
                    "ip6" | "ipv6" => c.family = Family::V6,
                    "tcp" => c.proto = Some(TCP),
                    "udp" => c.proto = Some(UDP),
                    "icmp" => c.proto = Some(ICMP),
                    "icmp6" | "ipv6-icmp" => c.proto = Some(ICMPV6),
                    n => match n.parse::<u8>() {
                        Ok(p) => c.proto = Some(p),
                        Err(_) => {
                            return Err(err(
                                at,
                                format!(
                                    "unknown protocol '{n}' (ip, ip4, ip6, tcp, udp, icmp, \
                                     icmp6 or a number 0-255)"
                                ),
                            ))
                        }
                    },
                }
                i += 1;
            }
        }
        let mut seen = [false; 2];
        while let Some(&(at, t)) = toks.get(i) {
            // ipfw's `ip4` / `ip6` options, after the addresses.
            if let Some(f) = match t {
                "ip4" | "ipv4" => Some(Family::V4),
                "ip6" | "ipv6" => Some(Family::V6),
                _ => None,
            } {
                c.family = f;
                i += 1;
                continue;
            }
            let side = match t {
                "from" => 0,
                "to" => 1,
                other => {
                    return Err(err(
                        at,
                        format!("expected 'from', 'to', 'ip4' or 'ip6', found '{other}'"),
                    ))
                }
            };
            if seen[side] {
                return Err(err(at, format!("'{t}' given twice")));
            }
            seen[side] = true;
            i += 1;
            let Some(&(aat, a)) = toks.get(i) else {
                return Err(err(
                    s.len(),
                    format!("'{t}' needs an address (any, me, ADDR[/LEN])"),
                ));
            };
            let addr = parse_addr(a).map_err(|m| err(aat, m))?;
            i += 1;
            let mut port = None;
            if let Some(&(pat, p)) = toks.get(i) {
                if !matches!(p, "from" | "to" | "ip4" | "ipv4" | "ip6" | "ipv6") {
                    port = Some(p.parse::<u16>().map_err(|_| {
                        err(
                            pat,
                            format!("'{p}' is not a port (0-65535), 'from', 'to', 'ip4' or 'ip6'"),
                        )
                    })?);
                    i += 1;
                }
            }
            if side == 0 {
                (c.remote, c.remote_port) = (addr, port);
            } else {
                (c.local, c.local_port) = (addr, port);
            }
        }
        c.check().map_err(|m| err(0, m))?;
        Ok(c)
    }

    /// Refuses what can match nothing: ports for a protocol without them, addresses
    /// of two families, an address of the other family than asked.
    pub(crate) fn check(&self) -> Result<(), String> {
        if (self.local_port.is_some() || self.remote_port.is_some())
            && !self.proto.is_some_and(has_ports)
        {
            return Err("ports need a protocol that has them (tcp, udp, or 33, 132, 136)".into());
        }
        let fam = |m: AddrMatch| match m {
            AddrMatch::Net(a, _) => Some(a.is_ipv4()),
            _ => None,
        };
        let v4 = match (fam(self.local), fam(self.remote)) {
            (Some(a), Some(b)) if a != b => {
                return Err("the local and remote addresses are of different families".into())
            }
            (a, b) => a.or(b),
        };
        match (v4, self.family) {
            (Some(true), Family::V6) | (Some(false), Family::V4) => {
                Err("an address of the other IP version than the one asked".into())
            }
            _ => Ok(()),
        }
    }

    /// Whether a delivered packet matches; `ports` (source, destination) when the
    /// protocol has them and the packet holds them.
    pub(crate) fn matches(
        &self,
        proto: u8,
        src: IpAddr,
        dst: IpAddr,
        ports: Option<(u16, u16)>,
        is_local: impl Fn(IpAddr) -> bool + Copy,
    ) -> bool {
        let fam_ok = match self.family {
            Family::Any => true,
            Family::V4 => src.is_ipv4(),
            Family::V6 => src.is_ipv6(),
        };
        fam_ok
            && self.proto.is_none_or(|p| p == proto)
            && self.local.matches(dst, is_local)
            && self.remote.matches(src, is_local)
            && self
                .remote_port
                .is_none_or(|p| ports.is_some_and(|(s, _)| s == p))
            && self
                .local_port
                .is_none_or(|p| ports.is_some_and(|(_, d)| d == p))
    }
}

fn host_len(a: IpAddr) -> u8 {
    if a.is_ipv4() {
        32
    } else {
        128
    }
}

fn tokens(s: &str) -> Vec<(usize, &str)> {
    let mut v = Vec::new();
    let mut start = None;
    for (i, ch) in s.char_indices() {
        if ch.is_whitespace() {
            if let Some(b) = start.take() {
                v.push((b, &s[b..i]));
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(b) = start {
        v.push((b, &s[b..]));
    }
    v
}

fn parse_addr(a: &str) -> Result<AddrMatch, String> {
    match a {
        "any" => return Ok(AddrMatch::Any),
        "me" | "me6" => return Ok(AddrMatch::Me),
        _ => {}
    }
    let (addr, len) = match a.split_once('/') {
        Some((x, l)) => (x, Some(l)),
        None => (a, None),
    };
    let ip: IpAddr = addr
        .parse::<Ipv4Addr>()
        .map(IpAddr::V4)
        .or_else(|_| addr.parse::<Ipv6Addr>().map(IpAddr::V6))
        .map_err(|_| format!("'{a}' is not an address (any, me, ADDR or ADDR/LEN)"))?;
    let max = host_len(ip);
    let len = match len {
        None => max,
        Some(l) => match l.parse::<u8>() {
            Ok(n) if n <= max => n,
            _ => return Err(format!("'{l}' is not a prefix length (0-{max})")),
        },
    };
    Ok(AddrMatch::Net(ip, len))
}

impl FromStr for Classifier {
    type Err = ClassifierError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Classifier::parse(s)
    }
}

impl fmt::Display for Classifier {
    /// The ipfw-style form [`Classifier::parse`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.proto, self.family) {
            (Some(TCP), _) => f.write_str("tcp")?,
            (Some(UDP), _) => f.write_str("udp")?,
            (Some(ICMP), _) => f.write_str("icmp")?,
            (Some(ICMPV6), _) => f.write_str("icmp6")?,
            (Some(p), _) => write!(f, "{p}")?,
            (None, Family::V4) => f.write_str("ip4")?,
            (None, Family::V6) => f.write_str("ip6")?,
            (None, Family::Any) => f.write_str("ip")?,
        }
        let side = |f: &mut fmt::Formatter<'_>, w: &str, a: AddrMatch, p: Option<u16>| {
            write!(f, " {w} ")?;
            match a {
                AddrMatch::Any => f.write_str("any")?,
                AddrMatch::Me => f.write_str("me")?,
                AddrMatch::Net(a, l) if l == host_len(a) => write!(f, "{a}")?,
                AddrMatch::Net(a, l) => write!(f, "{a}/{l}")?,
            }
            match p {
                Some(p) => write!(f, " {p}"),
                None => Ok(()),
            }
        };
        side(f, "from", self.remote, self.remote_port)?;
        side(f, "to", self.local, self.local_port)?;
        match (self.proto, self.family) {
            (Some(_), Family::V4) => f.write_str(" ip4"),
            (Some(_), Family::V6) => f.write_str(" ip6"),
            _ => Ok(()),
        }
    }
}

/// A classifier expression that does not parse: where (a column, from 1) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassifierError {
    pub col: usize,
    pub msg: String,
}

impl fmt::Display for ClassifierError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "netchannel classifier, column {}: {}",
            self.col, self.msg
        )
    }
}

impl std::error::Error for ClassifierError {}

/// A netchannel as the workers see it.
#[derive(Debug)]
pub(crate) struct NetchanShared {
    pub class: Classifier,
    /// The queues: received packets in `rxq` (`from`: the remote address and
    /// port), packets to send in `txq`.
    pub sock: Arc<SockShared>,
    /// Packets the full receive queue refused (also in `netchan.full`).
    pub overflow: AtomicU64,
    /// Packets queued for the application.
    pub delivered: AtomicU64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(a: IpAddr) -> bool {
        a == IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2))
    }

    #[test]
    fn parses_ipfw_style_expressions() {
        let c: Classifier = "tcp from 198.18.0.0/24 to me 80".parse().unwrap();
        assert_eq!(c.proto, Some(TCP));
        assert_eq!(c.remote, AddrMatch::Net("198.18.0.0".parse().unwrap(), 24));
        assert_eq!((c.local, c.local_port), (AddrMatch::Me, Some(80)));
        assert_eq!(c.to_string(), "tcp from 198.18.0.0/24 to me 80");
        assert_eq!(Classifier::parse(&c.to_string()).unwrap(), c);
        assert_eq!(Classifier::parse("ip").unwrap(), Classifier::any());
        assert_eq!(Classifier::parse("").unwrap(), Classifier::any());
        assert_eq!(
            Classifier::parse("udp to 2001:2::1 53").unwrap(),
            Classifier::udp()
                .local("2001:2::1".parse().unwrap())
                .local_port(53)
        );
        assert_eq!(Classifier::parse("ip6").unwrap().family, Family::V6);
        let udp6 = Classifier::udp().family(Family::V6);
        assert_eq!(udp6.to_string(), "udp from any to any ip6");
        assert_eq!(Classifier::parse(&udp6.to_string()).unwrap(), udp6);
        let udp4 = Classifier::udp().family(Family::V4).local_port(53);
        assert_eq!(udp4.to_string(), "udp from any to any 53 ip4");
        assert_eq!(Classifier::parse(&udp4.to_string()).unwrap(), udp4);
        assert_eq!(Classifier::parse("47").unwrap().proto, Some(47));
    }

    #[test]
    fn refuses_bad_expressions_with_a_column() {
        for (s, col, part) in [
            ("sctpx from any", 1, "unknown protocol"),
            ("udp from", 9, "needs an address"),
            ("udp from any 70000", 14, "not a port"),
            ("udp from 198.18.0.0/33", 10, "prefix length"),
            ("udp from nowhere", 10, "not an address"),
            ("udp to any from any to any", 21, "given twice"),
            ("udp at any", 5, "expected 'from', 'to'"),
            ("icmp to me 7", 1, "ports need a protocol"),
            ("ip from 198.18.0.1 to 2001:2::1", 1, "different families"),
            ("ip6 from 198.18.0.1", 1, "other IP version"),
        ] {
            let e = Classifier::parse(s).unwrap_err();
            assert_eq!(e.col, col, "{s}: {e}");
            assert!(e.msg.contains(part), "{s}: {e}");
        }
    }

    #[test]
    fn matches_each_field_exact_or_wildcard() {
        let src: IpAddr = "198.18.0.1".parse().unwrap();
        let dst: IpAddr = "198.18.0.2".parse().unwrap();
        let c = Classifier::udp().local_port(5000);
        assert!(c.matches(UDP, src, dst, Some((1234, 5000)), local));
        assert!(!c.matches(UDP, src, dst, Some((1234, 5001)), local));
        assert!(!c.matches(TCP, src, dst, Some((1234, 5000)), local));
        // A port asked and none in the packet (too short): no match.
        assert!(!c.matches(UDP, src, dst, None, local));
        let c = Classifier::any().remote_net(src, 24);
        assert!(c.matches(ICMP, src, dst, None, local));
        assert!(!c.matches(ICMP, "198.18.1.1".parse().unwrap(), dst, None, local));
        let me = Classifier::parse("ip from me").unwrap();
        assert!(!me.matches(ICMP, src, dst, None, local));
        assert!(me.matches(ICMP, dst, dst, None, local));
        let v6 = Classifier::any().family(Family::V6);
        assert!(!v6.matches(ICMP, src, dst, None, local));
    }
}
