//! The naive interpreter the benchmark measures ours against: each rule a tree of
//! conditions walked for each packet, as a straightforward firewall would.

use super::*;

/// A condition tree.
enum Cond {
    Proto(Vec<u8>),
    Ip4,
    Ip6,
    In,
    Out,
    Frag,
    Layer2,
    Addr {
        dst: bool,
        nets: Vec<(IpAddr, IpAddr)>,
    },
    Table {
        dst: bool,
        name: String,
    },
    Ports {
        dst: bool,
        ranges: Vec<(u32, u32)>,
    },
    Not(Box<Cond>),
    Or(Vec<Cond>),
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum NAct {
    Allow,
    Deny,
    Count,
    CheckState,
}

struct NRule {
    num: u16,
    act: NAct,
    keep: bool,
    // Deliberately boxed: each condition its own heap node, as a naive AST has.
    #[allow(clippy::vec_box)]
    conds: Vec<Box<Cond>>,
}

type FlowKey = (u8, IpAddr, u16, IpAddr, u16);

pub(super) struct Naive {
    rules: Vec<NRule>,
    tables: HashMap<String, HashMap<IpAddr, u32>>,
    pub(super) states: HashMap<FlowKey, usize>,
    pub(super) counts: Vec<u64>,
}

fn masked_eq(a: IpAddr, net: IpAddr, mask: IpAddr) -> bool {
    match (a, net, mask) {
        (IpAddr::V4(a), IpAddr::V4(n), IpAddr::V4(m)) => a.to_bits() & m.to_bits() == n.to_bits(),
        (IpAddr::V6(a), IpAddr::V6(n), IpAddr::V6(m)) => a.to_bits() & m.to_bits() == n.to_bits(),
        _ => false,
    }
}

impl Cond {
    fn eval(&self, p: &PacketInfo, tables: &HashMap<String, HashMap<IpAddr, u32>>) -> bool {
        let ports = !p.frag && matches!(p.proto, 6 | 17 | 132);
        match self {
            Cond::Proto(l) => l.contains(&p.proto),
            Cond::Ip4 => p.src.is_ipv4(),
            Cond::Ip6 => p.src.is_ipv6(),
            Cond::In => p.dir == fw::Direction::In,
            Cond::Out => p.dir == fw::Direction::Out,
            Cond::Frag => p.frag,
            Cond::Layer2 => p.layer2,
            Cond::Addr { dst, nets } => {
                let a = if *dst { p.dst } else { p.src };
                nets.iter().any(|&(n, m)| masked_eq(a, n, m))
            }
            Cond::Table { dst, name } => tables
                .get(name)
                .is_some_and(|t| t.contains_key(&if *dst { p.dst } else { p.src })),
            Cond::Ports { dst, ranges } => {
                let v = if *dst { p.dport } else { p.sport } as u32;
                ports && ranges.iter().any(|&(lo, hi)| lo <= v && v <= hi)
            }
            Cond::Not(c) => !c.eval(p, tables),
            Cond::Or(l) => l.iter().any(|c| c.eval(p, tables)),
        }
    }
}

fn flow_key(p: &PacketInfo) -> FlowKey {
    let (a, b) = ((p.src, p.sport), (p.dst, p.dport));
    let (x, y) = if a <= b { (a, b) } else { (b, a) };
    (p.proto, x.0, x.1, y.0, y.1)
}

impl Naive {
    /// The naive form of `rs`'s rules (the subset the bench uses) and its tables.
    pub(super) fn new(
        rs: &Ruleset,
        tables: HashMap<String, HashMap<IpAddr, u32>>,
    ) -> Result<Self, String> {
        use fw::rule::{Action, AddrSpec, OptKind, Proto};
        let mut rules = Vec::new();
        for (r, _) in rs.rules() {
            let mut conds: Vec<Box<Cond>> = Vec::new();
            match &r.proto {
                Proto::Any => {}
                Proto::Ip4 => conds.push(Box::new(Cond::Ip4)),
                Proto::Ip6 => conds.push(Box::new(Cond::Ip6)),
                Proto::List(l) => conds.push(Box::new(Cond::Proto(l.clone()))),
            }
            for (ep, dst) in [(&r.src, false), (&r.dst, true)] {
                let c = match &ep.addr {
                    AddrSpec::Any => None,
                    AddrSpec::Table(n, None) => Some(Cond::Table {
                        dst,
                        name: n.clone(),
                    }),
                    AddrSpec::List(l) => Some(Cond::Addr {
                        dst,
                        nets: l.iter().map(|m| (m.addr, m.mask)).collect(),
                    }),
                    other => return Err(format!("naive: address {other:?} not supported")),
                };
                if let Some(c) = c {
                    conds.push(Box::new(if ep.not { Cond::Not(Box::new(c)) } else { c }));
                }
                if let Some(ps) = &ep.ports {
                    conds.push(Box::new(Cond::Ports {
                        dst,
                        ranges: ps.iter().map(|r| (r.lo, r.hi)).collect(),
                    }));
                }
            }
            let mut keep = false;
            for block in &r.opts {
                let mut alts = Vec::new();
                for o in block {
                    let c = match &o.kind {
                        OptKind::KeepState => {
                            keep = true;
                            continue;
                        }
                        OptKind::Ip4 => Cond::Ip4,
                        OptKind::Ip6 => Cond::Ip6,
                        OptKind::In => Cond::In,
                        OptKind::Out => Cond::Out,
                        OptKind::Frag => Cond::Frag,
                        OptKind::Layer2 => Cond::Layer2,
                        other => return Err(format!("naive: option {other:?} not supported")),
                    };
                    alts.push(if o.not { Cond::Not(Box::new(c)) } else { c });
                }
                match alts.len() {
                    0 => {}
                    1 => conds.push(Box::new(alts.pop().expect("one"))),
                    _ => conds.push(Box::new(Cond::Or(alts))),
                }
            }
            let act = match r.action {
                Action::Allow => NAct::Allow,
                Action::Deny => NAct::Deny,
                Action::Count => NAct::Count,
                Action::CheckState => NAct::CheckState,
                ref other => return Err(format!("naive: action {other:?} not supported")),
            };
            rules.push(NRule {
                num: r.num,
                act,
                keep,
                conds,
            });
        }
        let n = rules.len();
        Ok(Naive {
            rules,
            tables,
            states: HashMap::new(),
            counts: vec![0; n + 1],
        })
    }

    /// (allow, rule number); the default rule denies.
    pub(super) fn eval(&mut self, p: &PacketInfo) -> (bool, u16) {
        let mut checked = false;
        let mut i = 0;
        while i < self.rules.len() {
            let r = &self.rules[i];
            if (r.act == NAct::CheckState || r.keep) && !checked {
                checked = true;
                if let Some(&j) = self.states.get(&flow_key(p)) {
                    self.counts[j] += 1;
                    match self.rules[j].act {
                        NAct::Allow => return (true, self.rules[j].num),
                        NAct::Deny => return (false, self.rules[j].num),
                        _ => {
                            i = j + 1;
                            continue;
                        }
                    }
                }
            }
            if r.act == NAct::CheckState {
                i += 1;
                continue;
            }
            // Every condition evaluated, into a fresh vector.
            let results: Vec<bool> = r.conds.iter().map(|c| c.eval(p, &self.tables)).collect();
            if results.iter().all(|&b| b) {
                if r.keep {
                    self.states.insert(flow_key(p), i);
                }
                self.counts[i] += 1;
                match r.act {
                    NAct::Allow => return (true, r.num),
                    NAct::Deny => return (false, r.num),
                    _ => {}
                }
            }
            i += 1;
        }
        *self.counts.last_mut().expect("default") += 1;
        (false, fw::rule::DEFAULT_RULE)
    }
}
