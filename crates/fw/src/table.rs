//! Lookup tables for `table(NAME)`, `via table(NAME)`, `lookup dst-port NAME` and
//! `flow table(NAME)`: ipfw's four types — `addr` (prefixes of both families), `iface`
//! (interface names), `number` (ports and other integers) and `flow` (a chosen subset
//! of the 5-tuple, hashed) — each entry with a value that the rule's `tablearg` takes.
//!
//! A [`Table`] is the control plane's copy, cheap to update (address prefixes live in
//! the route crate's [`Radix`]); [`Table::compile`] gives the immutable
//! [`CompiledTable`] a [`crate::Program`] looks up in: a radix for small address
//! tables, Poptrie beyond [`POPTRIE_MIN`] prefixes (its direct table costs 64 KiB for
//! IPv4 and 1 MiB for IPv6, so it only pays off for big tables).

use route::{IpPrefix, Lookup, Poptrie, Poptrie6, Prefix, Radix, MAX_NEXTHOP};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::IpAddr;

/// Address tables with at least this many prefixes of a family compile to Poptrie.
/// Measured (`mpstack bench fw`, 1,000 random host hits): the radix walk took 79-85
/// ns, ten-odd dependent node reads; Poptrie 31 ns. Below a few hundred prefixes the
/// radix is short enough and saves Poptrie's direct table.
pub const POPTRIE_MIN: usize = 256;

/// Poptrie for IPv4 address tables: 14 direct bits, not the routing table's 18.
///
/// Routes are mostly /24s, which 18 direct bits and one 6-bit level end exactly;
/// firewall tables are mostly hosts, which 14 bits and three 6-bit levels end
/// exactly (14 + 3 × 6 = 32). With 18 bits a host sits in a last node that covers
/// only its /30 (2 of its 6 bits used), so 100,000 hosts take 25,000 such nodes
/// (600 KiB) beside their leaves; with 14 bits a last node covers a /26 and the
/// same hosts take 1,600 (37 KiB). Lookups read as many nodes either way, and the
/// direct table is 64 KiB instead of 1 MiB. Measured (`mpstack bench fw --skip
/// matrix,allow,rfc2544,state`, random hits among 100,000 consecutive hosts): 29.4
/// → 27.4 ns per packet through `eval_batch`, 50.9 → 38.6 ns through `eval`.
pub type Poptrie4Hosts = Poptrie<u32, 14>;
/// The largest value an entry may carry.
pub const MAX_VALUE: u32 = MAX_NEXTHOP;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableType {
    Addr,
    /// `addr:hash`: host addresses only, looked up by exact match in a hash map (ipfw's
    /// `addr:hash` algorithm) — cheaper than longest-prefix match for lists of hosts.
    AddrHash,
    Iface,
    Number,
    /// The 5-tuple fields the key holds, in the order entries write them.
    Flow(FlowFields),
}

/// Which fields a flow table's key holds (`flow:src-ip,proto,dst-ip,dst-port`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FlowFields {
    pub src_ip: bool,
    pub proto: bool,
    pub src_port: bool,
    pub dst_ip: bool,
    pub dst_port: bool,
}

const FLOW_FIELD_NAMES: [&str; 5] = ["src-ip", "proto", "src-port", "dst-ip", "dst-port"];

impl FlowFields {
    fn flags(&self) -> [bool; 5] {
        [
            self.src_ip,
            self.proto,
            self.src_port,
            self.dst_ip,
            self.dst_port,
        ]
    }

    pub fn parse(s: &str) -> Option<FlowFields> {
        let mut f = FlowFields::default();
        for name in s.split(',') {
            let slot = match name {
                "src-ip" => &mut f.src_ip,
                "proto" => &mut f.proto,
                "src-port" => &mut f.src_port,
                "dst-ip" => &mut f.dst_ip,
                "dst-port" => &mut f.dst_port,
                _ => return None,
            };
            if *slot {
                return None;
            }
            *slot = true;
        }
        Some(f)
    }
}

impl fmt::Display for TableType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TableType::Addr => f.write_str("addr"),
            TableType::AddrHash => f.write_str("addr:hash"),
            TableType::Iface => f.write_str("iface"),
            TableType::Number => f.write_str("number"),
            TableType::Flow(ff) => {
                f.write_str("flow:")?;
                let names: Vec<&str> = FLOW_FIELD_NAMES
                    .iter()
                    .zip(ff.flags())
                    .filter(|(_, on)| *on)
                    .map(|(n, _)| *n)
                    .collect();
                f.write_str(&names.join(","))
            }
        }
    }
}

/// A flow table's key: the fields its table does not hold are zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    pub src: Option<IpAddr>,
    pub proto: u8,
    pub sport: u16,
    pub dst: Option<IpAddr>,
    pub dport: u16,
}

impl FlowKey {
    /// The key of a packet's 5-tuple under `ff`.
    #[inline]
    pub fn masked(
        ff: FlowFields,
        src: IpAddr,
        proto: u8,
        sport: u16,
        dst: IpAddr,
        dport: u16,
    ) -> Self {
        FlowKey {
            src: ff.src_ip.then_some(src),
            proto: if ff.proto { proto } else { 0 },
            sport: if ff.src_port { sport } else { 0 },
            dst: ff.dst_ip.then_some(dst),
            dport: if ff.dst_port { dport } else { 0 },
        }
    }
}

/// One entry's key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TableKey {
    Addr(IpPrefix),
    Iface(String),
    Number(u32),
    Flow(FlowKey),
}

impl fmt::Display for TableKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TableKey::Addr(p) => write!(f, "{p}"),
            TableKey::Iface(n) => f.write_str(n),
            TableKey::Number(n) => write!(f, "{n}"),
            TableKey::Flow(k) => write!(
                f,
                "{},{},{},{},{}",
                k.src.map(|a| a.to_string()).unwrap_or_default(),
                k.proto,
                k.sport,
                k.dst.map(|a| a.to_string()).unwrap_or_default(),
                k.dport
            ),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TableError {
    /// The key does not parse as the table's type wants.
    BadKey(String),
    BadValue(String),
    Full,
    NotFound,
}

impl fmt::Display for TableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TableError::BadKey(k) => write!(f, "bad key '{k}'"),
            TableError::BadValue(v) => write!(f, "bad value '{v}' (0-{MAX_VALUE})"),
            TableError::Full => f.write_str("table full"),
            TableError::NotFound => f.write_str("no such entry"),
        }
    }
}

impl std::error::Error for TableError {}

/// A table as the control plane keeps it.
#[derive(Debug, Clone)]
pub struct Table {
    ttype: TableType,
    max: usize,
    v4: Radix<u32>,
    v6: Radix<u128>,
    other: BTreeMap<TableKey, u32>,
}

impl Table {
    pub fn new(ttype: TableType, max: usize) -> Self {
        Table {
            ttype,
            max,
            v4: Radix::new(),
            v6: Radix::new(),
            other: BTreeMap::new(),
        }
    }

    pub fn ttype(&self) -> TableType {
        self.ttype
    }

    pub fn len(&self) -> usize {
        self.v4.len() + self.v6.len() + self.other.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Parses an entry's key as this table's type writes it.
    pub fn parse_key(&self, s: &str) -> Result<TableKey, TableError> {
        let bad = || TableError::BadKey(s.to_string());
        match self.ttype {
            TableType::AddrHash => {
                let a: IpAddr = s.parse().map_err(|_| bad())?;
                Ok(TableKey::Addr(IpPrefix::host(a)))
            }
            TableType::Addr => {
                let p = if s.contains('/') {
                    s.parse::<IpPrefix>().map_err(|_| bad())?
                } else {
                    IpPrefix::host(s.parse().map_err(|_| bad())?)
                };
                Ok(TableKey::Addr(p))
            }
            TableType::Iface => crate::parse::valid_name(s)
                .then(|| TableKey::Iface(s.to_string()))
                .ok_or_else(bad),
            TableType::Number => s.parse().map(TableKey::Number).map_err(|_| bad()),
            TableType::Flow(ff) => {
                let mut parts = s.split(',');
                let mut k = FlowKey {
                    src: None,
                    proto: 0,
                    sport: 0,
                    dst: None,
                    dport: 0,
                };
                for (i, on) in ff.flags().into_iter().enumerate() {
                    if !on {
                        continue;
                    }
                    let w = parts.next().ok_or_else(bad)?;
                    match i {
                        0 => k.src = Some(w.parse().map_err(|_| bad())?),
                        1 => k.proto = w.parse().map_err(|_| bad())?,
                        2 => k.sport = w.parse().map_err(|_| bad())?,
                        3 => k.dst = Some(w.parse().map_err(|_| bad())?),
                        _ => k.dport = w.parse().map_err(|_| bad())?,
                    }
                }
                if parts.next().is_some() {
                    return Err(bad());
                }
                Ok(TableKey::Flow(k))
            }
        }
    }

    /// Writes a key as [`Table::parse_key`] reads it.
    pub fn key_text(&self, k: &TableKey) -> String {
        match (k, self.ttype) {
            (TableKey::Addr(p), TableType::AddrHash) => p.addr().to_string(),
            (TableKey::Flow(k), TableType::Flow(ff)) => {
                let mut parts = Vec::new();
                let f = ff.flags();
                if f[0] {
                    parts.push(k.src.map(|a| a.to_string()).unwrap_or_default());
                }
                if f[1] {
                    parts.push(k.proto.to_string());
                }
                if f[2] {
                    parts.push(k.sport.to_string());
                }
                if f[3] {
                    parts.push(k.dst.map(|a| a.to_string()).unwrap_or_default());
                }
                if f[4] {
                    parts.push(k.dport.to_string());
                }
                parts.join(",")
            }
            _ => k.to_string(),
        }
    }

    /// Adds or replaces an entry; its value is what `tablearg` becomes.
    pub fn add(&mut self, key: TableKey, value: u32) -> Result<(), TableError> {
        if value > MAX_VALUE {
            return Err(TableError::BadValue(value.to_string()));
        }
        let exists = self.get(&key).is_some();
        if !exists && self.len() >= self.max {
            return Err(TableError::Full);
        }
        match key {
            TableKey::Addr(IpPrefix::V4(p)) => {
                self.v4.insert(p, value);
            }
            TableKey::Addr(IpPrefix::V6(p)) => {
                self.v6.insert(p, value);
            }
            k => {
                self.other.insert(k, value);
            }
        }
        Ok(())
    }

    pub fn get(&self, key: &TableKey) -> Option<u32> {
        match key {
            TableKey::Addr(IpPrefix::V4(p)) => self.v4.get(*p),
            TableKey::Addr(IpPrefix::V6(p)) => self.v6.get(*p),
            k => self.other.get(k).copied(),
        }
    }

    pub fn delete(&mut self, key: &TableKey) -> Result<u32, TableError> {
        match key {
            TableKey::Addr(IpPrefix::V4(p)) => self.v4.delete(*p),
            TableKey::Addr(IpPrefix::V6(p)) => self.v6.delete(*p),
            k => self.other.remove(k),
        }
        .ok_or(TableError::NotFound)
    }

    pub fn flush(&mut self) {
        self.v4 = Radix::new();
        self.v6 = Radix::new();
        self.other.clear();
    }

    /// Every entry, in key order.
    pub fn entries(&self) -> Vec<(TableKey, u32)> {
        let mut out: Vec<(TableKey, u32)> = Vec::with_capacity(self.len());
        for (p, v) in self.v4.routes() {
            out.push((TableKey::Addr(IpPrefix::V4(p)), v));
        }
        for (p, v) in self.v6.routes() {
            out.push((TableKey::Addr(IpPrefix::V6(p)), v));
        }
        out.extend(self.other.iter().map(|(k, v)| (k.clone(), *v)));
        out.sort();
        out
    }

    /// The immutable form the evaluator looks up in.
    pub fn compile(&self) -> CompiledTable {
        match self.ttype {
            TableType::Addr => CompiledTable::Addr {
                v4: Lpm::build(&self.v4.routes()),
                v6: Lpm::build(&self.v6.routes()),
            },
            TableType::AddrHash => CompiledTable::Hash(
                self.v4
                    .routes()
                    .into_iter()
                    .map(|(p, v)| (IpAddr::from(std::net::Ipv4Addr::from(p.addr)), v))
                    .chain(
                        self.v6
                            .routes()
                            .into_iter()
                            .map(|(p, v)| (IpAddr::from(std::net::Ipv6Addr::from(p.addr)), v)),
                    )
                    .collect(),
            ),
            TableType::Iface => CompiledTable::Iface(
                self.other
                    .iter()
                    .filter_map(|(k, v)| match k {
                        TableKey::Iface(n) => Some((n.clone(), *v)),
                        _ => None,
                    })
                    .collect(),
            ),
            TableType::Number => CompiledTable::Number(
                self.other
                    .iter()
                    .filter_map(|(k, v)| match k {
                        TableKey::Number(n) => Some((*n, *v)),
                        _ => None,
                    })
                    .collect(),
            ),
            TableType::Flow(ff) => CompiledTable::Flow(
                ff,
                self.other
                    .iter()
                    .filter_map(|(k, v)| match k {
                        TableKey::Flow(f) => Some((*f, *v)),
                        _ => None,
                    })
                    .collect(),
            ),
        }
    }
}

/// Longest-prefix match over one family: radix when small, Poptrie when big.
#[derive(Debug)]
pub enum Lpm<A: route::Addr, P> {
    Empty,
    Radix(Radix<A>),
    Poptrie(Box<P>),
}

impl<A: route::Addr, P: Lookup<Addr = A>> Lpm<A, P> {
    fn build(routes: &[(Prefix<A>, u32)]) -> Self {
        if routes.is_empty() {
            Lpm::Empty
        } else if routes.len() >= POPTRIE_MIN {
            Lpm::Poptrie(Box::new(P::build(routes)))
        } else {
            Lpm::Radix(Radix::build(routes))
        }
    }

    #[inline]
    fn lookup(&self, a: A) -> Option<u32> {
        match self {
            Lpm::Empty => None,
            Lpm::Radix(r) => r.lookup(a),
            Lpm::Poptrie(p) => p.lookup(a),
        }
    }
}

/// A table as a [`crate::Program`] sees it; lookups never allocate.
#[derive(Debug)]
pub enum CompiledTable {
    Addr {
        v4: Lpm<u32, Poptrie4Hosts>,
        v6: Lpm<u128, Poptrie6>,
    },
    /// Host addresses, exact match.
    Hash(HashMap<IpAddr, u32>),
    /// Sorted by name.
    Iface(Vec<(String, u32)>),
    /// Sorted by number.
    Number(Vec<(u32, u32)>),
    Flow(FlowFields, HashMap<FlowKey, u32>),
}

impl CompiledTable {
    #[inline]
    pub fn lookup_addr(&self, a: IpAddr) -> Option<u32> {
        match (self, a) {
            (CompiledTable::Addr { v4, .. }, IpAddr::V4(a)) => v4.lookup(u32::from(a)),
            (CompiledTable::Addr { v6, .. }, IpAddr::V6(a)) => v6.lookup(u128::from(a)),
            (CompiledTable::Hash(m), a) => m.get(&a).copied(),
            _ => None,
        }
    }

    #[inline]
    pub fn lookup_iface(&self, name: &str) -> Option<u32> {
        match self {
            CompiledTable::Iface(v) => v
                .binary_search_by(|(n, _)| n.as_str().cmp(name))
                .ok()
                .map(|i| v[i].1),
            _ => None,
        }
    }

    #[inline]
    pub fn lookup_number(&self, n: u32) -> Option<u32> {
        match self {
            CompiledTable::Number(v) => v.binary_search_by_key(&n, |e| e.0).ok().map(|i| v[i].1),
            _ => None,
        }
    }

    #[inline]
    pub fn lookup_flow(
        &self,
        src: IpAddr,
        proto: u8,
        sport: u16,
        dst: IpAddr,
        dport: u16,
    ) -> Option<u32> {
        match self {
            CompiledTable::Flow(ff, m) => m
                .get(&FlowKey::masked(*ff, src, proto, sport, dst, dport))
                .copied(),
            _ => None,
        }
    }
}
