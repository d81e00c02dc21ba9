//! Route tables as text, for the benchmarks and the tests: one `prefix/len origin-AS`
//! line per route, IPv4 and IPv6 mixed — the format of `benches/bgpas.lpm` in the crate
//! `iptrie` 0.11.2, a full BGP table (1,072,529 IPv4 and 176,388 IPv6 prefixes) that is
//! not part of this repository. This module parses such text; finding the file is the
//! benchmarks' business (`mpstack-bench`, crates/bench/src/table.rs), so that this
//! library neither searches the file system nor depends on a crate for its data.
//!
//! Each origin AS is given its own next-hop index, shared by both families (a
//! pessimistic case for leaf compression: a real router has far fewer next hops).

use crate::{Prefix4, Prefix6};
use std::collections::HashMap;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// The routes of a table, by family.
#[derive(Clone, Debug, Default)]
pub struct Table {
    pub v4: Vec<(Prefix4, u32)>,
    pub v6: Vec<(Prefix6, u32)>,
    /// Distinct next hops (origin ASes).
    pub next_hops: usize,
}

/// A line that is not `prefix/len AS`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based.
    pub line: usize,
    pub text: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: cannot parse '{}'", self.line, self.text)
    }
}

impl std::error::Error for ParseError {}

/// Parses `prefix/len AS` lines (blank lines are skipped); host bits are cleared.
pub fn parse(text: &str) -> Result<Table, ParseError> {
    let mut asn_index: HashMap<u32, u32> = HashMap::new();
    let mut t = Table::default();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let bad = || ParseError {
            line: i + 1,
            text: line.to_string(),
        };
        let (net, asn) = line.split_once(' ').ok_or_else(bad)?;
        let (addr, len) = net.split_once('/').ok_or_else(bad)?;
        let len: u8 = len.parse().map_err(|_| bad())?;
        let asn: u32 = asn.trim().parse().map_err(|_| bad())?;
        let n = asn_index.len() as u32;
        let nh = *asn_index.entry(asn).or_insert(n);
        if addr.contains(':') {
            let addr: Ipv6Addr = addr.parse().map_err(|_| bad())?;
            if len > 128 {
                return Err(bad());
            }
            t.v6.push((Prefix6::new(u128::from(addr), len), nh));
        } else {
            let addr: Ipv4Addr = addr.parse().map_err(|_| bad())?;
            if len > 32 {
                return Err(bad());
            }
            t.v4.push((Prefix4::new(u32::from(addr), len), nh));
        }
    }
    t.next_hops = asn_index.len();
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_families_one_next_hop_per_as() {
        let t = "1.0.0.0/24 13335\n1.0.4.0/22 38803\n2001:db8::/32 64500\n\n\
                 1.0.5.0/24 13335\n2001:db8:1::1/48 13335\n";
        let t = parse(t).unwrap();
        assert_eq!(t.v4.len(), 3);
        assert_eq!(t.v4[0], (Prefix4::new(0x0100_0000, 24), 0));
        assert_eq!(t.v4[1].1, 1);
        assert_eq!(t.v4[2].1, 0);
        assert_eq!(t.v6[0], (Prefix6::new(0x2001_0db8 << 96, 32), 2));
        assert_eq!(t.v6[1], (Prefix6::new(0x2001_0db8_0001 << 80, 48), 0));
        assert_eq!(t.next_hops, 3);
    }

    #[test]
    fn rejects_bad_lines() {
        assert_eq!(parse("1.0.0.0/33 1\n").unwrap_err().line, 1);
        assert!(parse("::/129 1\n").is_err());
        assert!(parse("1.0.0.0/8\n").is_err());
        assert!(parse("1.0.0.0 8 1\n").is_err());
        assert!(parse("1.0.0.0/8 x\n").is_err());
    }
}
