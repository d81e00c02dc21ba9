//! The compiler: rules as written to a [`Program`]'s flat arrays.

use super::*;
use crate::rule::{AddrSpec, IfPat, LookupKey, Opt, OptKind, Proto, Rule};
use crate::table::TableType;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

static GENERATION: AtomicU64 = AtomicU64::new(1);

/// An error compiling a rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompileError {
    /// A table the rule names does not exist or has another type.
    Table { name: String, want: &'static str },
    /// The rule's `mac`/`icmp6types` etc. operand is unusable.
    Invalid(String),
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompileError::Table { name, want } => {
                write!(f, "table {name}: no such table of type {want}")
            }
            CompileError::Invalid(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for CompileError {}

/// A table as the compiler resolves names: its index, type and lookup form.
#[derive(Debug, Clone)]
pub struct TableRef {
    pub name: String,
    pub ttype: TableType,
    pub table: Arc<CompiledTable>,
}

/// An immutable compiled ruleset; share it between workers behind an `Arc` and

#[derive(Default)]
struct Builder {
    /// The (table, field) of each [`VectorLookups`] slot, in order of first use.
    slots: Vec<(u16, bool)>,
    insns: Vec<Insn>,
    ranges: Vec<Range>,
    addrs: Vec<(u128, u128, bool)>,
    ifnames: Vec<IfName>,
    macs: Vec<(MacPat, MacPat)>,
    icmp6: Vec<[u64; 4]>,
    fwds: Vec<(IpAddr, Option<u16>)>,
}

impl Builder {
    fn span(&mut self, r: &[Range]) -> Span {
        let start = self.ranges.len() as u32;
        self.ranges.extend_from_slice(r);
        Span {
            start,
            len: r.len() as u32,
        }
    }

    fn push(&mut self, op: Op, not: bool, or: bool) {
        self.insns.push(Insn { op, not, or });
    }

    /// The slot of lookups in `table` by the source or destination address: shared by
    /// every instruction that makes the same lookup (they differ at most in the value
    /// they want), [`NO_SLOT`] past the first [`SLOTS`] pairs.
    fn slot(&mut self, table: u16, dst: bool) -> u8 {
        match self.slots.iter().position(|&s| s == (table, dst)) {
            Some(i) => i as u8,
            None if self.slots.len() < SLOTS => {
                self.slots.push((table, dst));
                self.slots.len() as u8 - 1
            }
            None => NO_SLOT,
        }
    }
}

fn table_idx(
    tables: &[TableRef],
    name: &str,
    want: &'static str,
    ok: fn(TableType) -> bool,
) -> Result<u16, CompileError> {
    tables
        .iter()
        .position(|t| t.name == name && ok(t.ttype))
        .map(|i| i as u16)
        .ok_or(CompileError::Table {
            name: name.to_string(),
            want,
        })
}

fn is_addr(t: TableType) -> bool {
    matches!(t, TableType::Addr | TableType::AddrHash)
}
fn is_iface(t: TableType) -> bool {
    t == TableType::Iface
}
fn is_number(t: TableType) -> bool {
    t == TableType::Number
}
fn is_flow(t: TableType) -> bool {
    matches!(t, TableType::Flow(_))
}

impl Program {
    /// Compiles `rules` (sorted by number; each with its id) followed by the default
    /// rule 65535, which allows or denies all.
    pub fn compile(
        rules: &[(&Rule, u32)],
        default_allow: bool,
        tables: &[TableRef],
    ) -> Result<Program, CompileError> {
        let mut b = Builder::default();
        let mut hdrs = Vec::with_capacity(rules.len() + 1);
        for &(r, id) in rules {
            hdrs.push(compile_rule(&mut b, r, id, tables)?);
        }
        let start = b.insns.len() as u32;
        hdrs.push(RuleHdr {
            slow: 0,
            has_or: false,
            num: rule::DEFAULT_RULE,
            rule_id: 0,
            prob: rule::PROB_ONE,
            act: if default_allow { Act::Allow } else { Act::Deny },
            log: false,
            keep: Keep::No,
            tag: None,
            insns: Span { start, len: 0 },
            target: 0,
        });
        // skipto and call targets resolved once: the first rule numbered at or past N.
        let nums: Vec<u16> = hdrs.iter().map(|h| h.num).collect();
        for (i, h) in hdrs.iter_mut().enumerate() {
            h.target = match h.act {
                Act::Skipto(Arg::Num(n)) => skip_target(&nums, i, n),
                Act::Call => nums.partition_point(|&x| (x as u32) < h.target) as u32,
                _ => 0,
            };
            h.slow = h.slow_bits();
        }
        let mut by_id: Vec<(u32, u32)> = hdrs
            .iter()
            .enumerate()
            .map(|(i, h)| (h.rule_id, i as u32))
            .collect();
        by_id.sort_unstable();
        let run = hdrs
            .iter()
            .position(|h| !rule_major(h))
            .unwrap_or(hdrs.len());
        let (state_first, count_from) = match hdrs.iter().position(|h| h.slow & SLOW_STATE != 0) {
            Some(k) => {
                let from = hdrs[..k]
                    .iter()
                    .rposition(|h| h.act != Act::Count)
                    .map_or(0, |j| j + 1);
                (k as u32, from as u32)
            }
            None => (u32::MAX, u32::MAX),
        };
        let needs = needs(&hdrs, &b.insns);
        Ok(Program {
            run: run as u32,
            state_first,
            count_from,
            needs,
            has_slots: !b.slots.is_empty(),
            generation: GENERATION.fetch_add(1, Ordering::Relaxed),
            rules: hdrs,
            insns: b.insns,
            ranges: b.ranges,
            addrs: b.addrs,
            ifnames: b.ifnames,
            macs: b.macs,
            icmp6: b.icmp6,
            fwds: b.fwds,
            tables: tables.iter().map(|t| t.table.clone()).collect(),
            by_id,
        })
    }
}

/// Whether a rule may be evaluated rule-major (the `major` module): nothing it does
/// depends on another packet, or on the order packets are taken in.
fn rule_major(h: &RuleHdr) -> bool {
    h.slow & (SLOW_STATE | SLOW_PROB) == 0
        && !matches!(h.act, Act::Call | Act::Skipto(Arg::Tablearg))
}

/// What the rules read beyond the hot fields (see [`Needs`]).
fn needs(hdrs: &[RuleHdr], insns: &[Insn]) -> Needs {
    let mut n = Needs {
        tags: hdrs.iter().any(|h| h.tag.is_some()),
        log: hdrs.iter().any(|h| h.log),
        ..Needs::default()
    };
    for i in insns {
        match i.op {
            Op::TcpOptions(_) => n.tcp_options = true,
            Op::Iface(..) | Op::Antispoof | Op::Verrevpath => n.interfaces = true,
            Op::Mac(_) | Op::MacType(_) => n.mac = true,
            Op::Tagged(_) => n.tags = true,
            _ => {}
        }
    }
    n
}

/// skipto only goes forward (FreeBSD's `jump` without `jump_backwards`): a target at
/// or before the rule itself means the next rule.
fn skip_target(nums: &[u16], i: usize, n: u32) -> u32 {
    if n <= nums[i] as u32 {
        return i as u32 + 1;
    }
    (nums.partition_point(|&x| (x as u32) < n) as u32).min(nums.len() as u32 - 1)
}

fn compile_rule(
    b: &mut Builder,
    r: &Rule,
    rule_id: u32,
    tables: &[TableRef],
) -> Result<RuleHdr, CompileError> {
    let start = b.insns.len() as u32;
    match &r.proto {
        Proto::Any => {}
        Proto::Ip4 => b.push(Op::Ip4, false, false),
        Proto::Ip6 => b.push(Op::Ip6, false, false),
        Proto::List(l) if l.len() == 1 => b.push(Op::Proto(l[0]), false, false),
        Proto::List(l) => {
            let rs: Vec<Range> = l
                .iter()
                .map(|&p| Range {
                    lo: p as u32,
                    hi: p as u32,
                })
                .collect();
            let span = b.span(&rs);
            b.push(Op::ProtoList(span), false, false);
        }
    }
    for (ep, dst) in [(&r.src, false), (&r.dst, true)] {
        let op = match &ep.addr {
            AddrSpec::Any => None,
            AddrSpec::Me => Some(Op::Me { dst }),
            AddrSpec::Me6 => Some(Op::Me6 { dst }),
            AddrSpec::Table(n, v) => {
                let table = table_idx(tables, n, "addr", is_addr)?;
                Some(Op::AddrTable {
                    dst,
                    table,
                    value: *v,
                    slot: b.slot(table, dst),
                })
            }
            AddrSpec::List(l) => {
                let start = b.addrs.len() as u32;
                for am in l {
                    let (a, v6) = addr_bits(am.addr);
                    let (m, _) = addr_bits(am.mask);
                    b.addrs.push((a, m, v6));
                }
                Some(Op::Addrs {
                    dst,
                    span: Span {
                        start,
                        len: l.len() as u32,
                    },
                })
            }
        };
        match op {
            Some(op) => b.push(op, ep.not, false),
            // `not any` matches nothing.
            None if ep.not => b.push(Op::Any, true, false),
            None => {}
        }
        if let Some(p) = &ep.ports {
            let span = b.span(p);
            b.push(Op::Ports { dst, span }, false, false);
        }
    }
    let mut keep = Keep::No;
    let mut tag = None;
    for block in &r.opts {
        let n = block.len();
        for (k, o) in block.iter().enumerate() {
            let or = k + 1 < n;
            let Some(op) = opt_op(b, o, tables, &mut keep, &mut tag)? else {
                continue;
            };
            b.push(op, o.not, or);
        }
    }
    let act = match &r.action {
        rule::Action::Allow => Act::Allow,
        rule::Action::Deny => Act::Deny,
        rule::Action::Reject => Act::Reject,
        rule::Action::Unreach(c) => Act::Unreach(*c),
        rule::Action::Unreach6(c) => Act::Unreach6(*c),
        rule::Action::Reset => Act::Reset,
        rule::Action::Count => Act::Count,
        rule::Action::Skipto(a) => Act::Skipto(*a),
        rule::Action::Call(_) => Act::Call,
        rule::Action::Return => Act::Return,
        rule::Action::CheckState => Act::CheckState,
        rule::Action::Pipe(a) => Act::Pipe(*a),
        rule::Action::Queue(a) => Act::Queue(*a),
        rule::Action::Fwd(a, port) => {
            b.fwds.push((*a, *port));
            Act::Fwd(b.fwds.len() as u32 - 1)
        }
    };
    Ok(RuleHdr {
        slow: 0,
        has_or: b.insns[start as usize..].iter().any(|i| i.or),
        num: r.num,
        rule_id,
        prob: r.prob.unwrap_or(rule::PROB_ONE),
        act,
        log: r.log,
        keep,
        tag,
        insns: Span {
            start,
            len: b.insns.len() as u32 - start,
        },
        // The call's number until `compile` resolves it to an index.
        target: match r.action {
            rule::Action::Call(n) => n as u32,
            _ => 0,
        },
    })
}

/// Option `o`'s instruction; `None` for the options that are not a match but set
/// the rule's `keep` (keep-state, limit) or `tag` (tag, untag).
fn opt_op(
    b: &mut Builder,
    o: &Opt,
    tables: &[TableRef],
    keep: &mut Keep,
    tag: &mut Option<(bool, Arg)>,
) -> Result<Option<Op>, CompileError> {
    let op = match &o.kind {
        OptKind::KeepState => {
            *keep = Keep::State;
            return Ok(None);
        }
        OptKind::Limit(m, l) => {
            *keep = Keep::Limit(*m, *l);
            return Ok(None);
        }
        OptKind::Tag(a) => {
            *tag = Some((false, *a));
            return Ok(None);
        }
        OptKind::Untag(a) => {
            *tag = Some((true, *a));
            return Ok(None);
        }
        OptKind::In => Op::In,
        OptKind::Out => Op::Out,
        OptKind::Via(p) | OptKind::Recv(p) | OptKind::Xmit(p) => {
            let which = match o.kind {
                OptKind::Via(_) => IfWhich::Via,
                OptKind::Recv(_) => IfWhich::Recv,
                _ => IfWhich::Xmit,
            };
            let operand = match p {
                IfPat::Any => IfOperand::Any,
                IfPat::Name(nm) => {
                    let name = IfName::new(nm).ok_or_else(|| {
                        CompileError::Invalid(format!("interface name too long: {nm}"))
                    })?;
                    b.ifnames.push(name);
                    IfOperand::Name(b.ifnames.len() as u32 - 1)
                }
                IfPat::Table(t) => IfOperand::Table(table_idx(tables, t, "iface", is_iface)?),
            };
            Op::Iface(which, operand)
        }
        OptKind::Setup => Op::Setup,
        OptKind::Established => Op::Established,
        OptKind::TcpFlags(f) => Op::TcpFlags(*f),
        OptKind::Frag => Op::Frag,
        OptKind::IcmpTypes(rs) => {
            let mut bits = 0u32;
            for x in rs {
                for t in x.lo..=x.hi.min(31) {
                    bits |= 1 << t;
                }
            }
            Op::IcmpTypes(bits)
        }
        OptKind::Icmp6Types(rs) => {
            let mut bits = [0u64; 4];
            for x in rs {
                for t in x.lo..=x.hi.min(255) {
                    bits[t as usize / 64] |= 1 << (t % 64);
                }
            }
            b.icmp6.push(bits);
            Op::Icmp6Types(b.icmp6.len() as u32 - 1)
        }
        OptKind::Ip4 => Op::Ip4,
        OptKind::Ip6 => Op::Ip6,
        OptKind::Tagged(rs) => Op::Tagged(b.span(rs)),
        OptKind::IpLen(rs) => Op::IpLen(b.span(rs)),
        OptKind::IpTtl(rs) => Op::IpTtl(b.span(rs)),
        OptKind::IpTos(f) => Op::IpTos(*f),
        OptKind::Dscp(rs) => {
            let mut bits = 0u64;
            for x in rs {
                for t in x.lo..=x.hi.min(63) {
                    bits |= 1 << t;
                }
            }
            Op::Dscp(bits)
        }
        OptKind::TcpOptions(f) => Op::TcpOptions(*f),
        OptKind::TcpWin(rs) => Op::TcpWin(b.span(rs)),
        OptKind::TcpDataLen(rs) => Op::TcpDataLen(b.span(rs)),
        OptKind::Mac(d, s) => {
            b.macs.push((*d, *s));
            Op::Mac(b.macs.len() as u32 - 1)
        }
        OptKind::MacType(rs) => Op::MacType(b.span(rs)),
        OptKind::Layer2 => Op::Layer2,
        OptKind::Antispoof => Op::Antispoof,
        OptKind::Verrevpath => Op::Verrevpath,
        OptKind::Lookup(k, t) => Op::LookupPort {
            dst: *k == LookupKey::DstPort,
            table: table_idx(tables, t, "number", is_number)?,
        },
        OptKind::Flow(t) => Op::Flow(table_idx(tables, t, "flow", is_flow)?),
    };
    Ok(Some(op))
}
