//! A prefix of either family, as the control plane and routing messages carry it.

use crate::{Prefix4, Prefix6};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// An IPv4 or IPv6 prefix.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IpPrefix {
    V4(Prefix4),
    V6(Prefix6),
}

impl IpPrefix {
    /// The prefix of length `len` holding `addr` (host bits cleared, length capped).
    pub fn new(addr: IpAddr, len: u8) -> IpPrefix {
        match addr {
            IpAddr::V4(a) => IpPrefix::V4(Prefix4::new(u32::from(a), len)),
            IpAddr::V6(a) => IpPrefix::V6(Prefix6::new(u128::from(a), len)),
        }
    }

    /// The host prefix (/32 or /128) of `addr`.
    pub fn host(addr: IpAddr) -> IpPrefix {
        IpPrefix::new(addr, if addr.is_ipv4() { 32 } else { 128 })
    }

    /// The default route's prefix of `addr`'s family.
    pub fn default_of(v6: bool) -> IpPrefix {
        if v6 {
            IpPrefix::V6(Prefix6::new(0, 0))
        } else {
            IpPrefix::V4(Prefix4::new(0, 0))
        }
    }

    /// The network address.
    pub fn addr(&self) -> IpAddr {
        match self {
            IpPrefix::V4(p) => IpAddr::V4(Ipv4Addr::from(p.addr)),
            IpPrefix::V6(p) => IpAddr::V6(Ipv6Addr::from(p.addr)),
        }
    }

    /// The prefix length.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u8 {
        match self {
            IpPrefix::V4(p) => p.len,
            IpPrefix::V6(p) => p.len,
        }
    }

    /// Whether this is a host prefix (all bits).
    pub fn is_host(&self) -> bool {
        match self {
            IpPrefix::V4(p) => p.len == 32,
            IpPrefix::V6(p) => p.len == 128,
        }
    }

    pub fn is_ipv6(&self) -> bool {
        matches!(self, IpPrefix::V6(_))
    }

    /// Whether `a` lies inside (a different family never does).
    pub fn contains(&self, a: IpAddr) -> bool {
        match (self, a) {
            (IpPrefix::V4(p), IpAddr::V4(a)) => p.contains(u32::from(a)),
            (IpPrefix::V6(p), IpAddr::V6(a)) => p.contains(u128::from(a)),
            _ => false,
        }
    }
}

impl fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpPrefix::V4(p) => write!(f, "{p}"),
            IpPrefix::V6(p) => write!(f, "{p}"),
        }
    }
}

impl fmt::Debug for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// `ADDR/LEN`, `ADDR` (a host prefix), or `default` / `default6`.
impl FromStr for IpPrefix {
    type Err = String;

    fn from_str(s: &str) -> Result<IpPrefix, String> {
        match s {
            "default" | "0/0" => return Ok(IpPrefix::default_of(false)),
            "default6" | "::/0" => return Ok(IpPrefix::default_of(true)),
            _ => {}
        }
        let (a, len) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a
            .parse()
            .map_err(|_| format!("'{s}': '{a}' is not an IPv4 or IPv6 address"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            None => max,
            Some(l) => match l.parse::<u8>() {
                Ok(l) if l <= max => l,
                _ => return Err(format!("'{s}': prefix length must be 0 to {max}")),
            },
        };
        let p = IpPrefix::new(addr, len);
        if p.addr() != addr {
            return Err(format!(
                "'{s}': host bits set past /{len} (did you mean {p}?)"
            ));
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_both_families() {
        for s in [
            "198.18.0.0/15",
            "198.18.1.1/32",
            "2001:2::/48",
            "::/0",
            "0.0.0.0/0",
        ] {
            assert_eq!(s.parse::<IpPrefix>().unwrap().to_string(), s);
        }
        assert_eq!(
            "198.18.0.1".parse::<IpPrefix>().unwrap().to_string(),
            "198.18.0.1/32"
        );
        assert_eq!("default".parse::<IpPrefix>().unwrap().len(), 0);
        assert!("198.18.0.1/24"
            .parse::<IpPrefix>()
            .unwrap_err()
            .contains("198.18.0.0/24"));
        assert!("198.18.0.0/33".parse::<IpPrefix>().is_err());
        assert!("nonsense/8".parse::<IpPrefix>().is_err());
    }

    #[test]
    fn contains_respects_family() {
        let p: IpPrefix = "198.18.0.0/15".parse().unwrap();
        assert!(p.contains("198.19.255.255".parse().unwrap()));
        assert!(!p.contains("2001:2::1".parse().unwrap()));
    }
}
