//! A compiled ruleset and its evaluator (FreeBSD's `ipfw_chk`).
//!
//! Each rule compiles to a [`RuleHdr`] (number, set, action, `prob`, action modifiers,
//! the skipto/call target resolved to a rule index) and a slice of [`Insn`]s; every
//! rule's instructions sit in one contiguous array. An instruction carries FreeBSD's
//! `F_NOT` and `F_OR` flags: an or-block is a run of instructions with `or` set, ended
//! by one without. Operands too big for an instruction (address lists, port ranges,
//! interface names, MAC patterns) live in side arrays and the instruction holds their
//! span. [`Program::eval`] is one loop over rules with a `match` on the opcode — a
//! compact enum's `match` is Rust's form of the 2009 rework's dispatch table (the
//! lesson of its measurements: the dispatch itself costs nothing next to the checks,
//! so keep it readable) — and it never allocates.

use crate::rule::{
    self, AddrSpec, Arg, FlagSpec, IfPat, LookupKey, MacPat, OptKind, Proto, Range, Rule,
};
use crate::state::{FlowId, LimitMask, StateError, StateHit, StateShards};
use crate::table::{CompiledTable, TableType};
use std::fmt;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// FreeBSD's `IP_FW_CALLSTACK_SIZE`.
pub const CALLSTACK: usize = 16;
/// Tags a packet may carry at once.
pub const MAX_TAGS: usize = 8;

// ---- what the caller describes -------------------------------------------------

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

    fn has_ports(&self) -> bool {
        !self.frag && matches!(self.proto, 6 | 17 | 132)
    }

    fn is_tcp(&self) -> bool {
        !self.frag && self.proto == 6
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

// ---- what the firewall answers ---------------------------------------------------

/// How to refuse a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectKind {
    /// A TCP RST.
    Rst,
    /// ICMP destination unreachable with this code.
    Unreach(u8),
    /// ICMPv6 destination unreachable with this code.
    Unreach6(u8),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny,
    Reject(RejectKind),
    /// Hand to dummynet pipe `n`.
    Pipe(u32),
    /// Hand to dummynet queue `n`.
    Queue(u32),
}

/// The decision and the rule that made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct Verdict {
    pub decision: Decision,
    pub rule: u16,
    /// Some rule with `log` matched on the way.
    pub log: bool,
}

// ---- per-worker counters ---------------------------------------------------------

/// One rule's counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RuleCounter {
    pub packets: u64,
    pub bytes: u64,
    /// `now` of the last match.
    pub last: u64,
}

/// One worker's rule counters, indexed like its [`Program`]'s rules. Each worker owns
/// one; `show` sums them by rule id. On the first packet under a new program the
/// counters move to its indices (the one allocation; steady state allocates nothing).
#[derive(Clone, Debug, Default)]
pub struct Counters {
    generation: u64,
    ids: Vec<u32>,
    c: Vec<RuleCounter>,
    /// Packets matched by a rule with `log`.
    pub logged: u64,
}

impl Counters {
    pub fn new() -> Self {
        Self::default()
    }

    /// Re-indexes the counters for `prog`, keeping each rule's counts by its id.
    #[inline]
    pub fn sync(&mut self, prog: &Program) {
        if self.generation != prog.generation || self.c.len() != prog.rules.len() {
            self.resync(prog);
        }
    }

    #[cold]
    #[inline(never)]
    fn resync(&mut self, prog: &Program) {
        let old: std::collections::HashMap<u32, RuleCounter> = self
            .ids
            .iter()
            .copied()
            .zip(self.c.iter().copied())
            .collect();
        self.ids = prog.rules.iter().map(|r| r.rule_id).collect();
        self.c = self
            .ids
            .iter()
            .map(|id| old.get(id).copied().unwrap_or_default())
            .collect();
        self.generation = prog.generation;
    }

    /// The counters of the rule with this id.
    pub fn get(&self, rule_id: u32) -> RuleCounter {
        self.ids
            .iter()
            .position(|&id| id == rule_id)
            .map(|i| self.c[i])
            .unwrap_or_default()
    }

    /// Zeroes the rules whose ids `which` accepts.
    pub fn zero(&mut self, which: impl Fn(u32) -> bool) {
        for (id, c) in self.ids.iter().zip(self.c.iter_mut()) {
            if which(*id) {
                *c = RuleCounter::default();
            }
        }
    }
}

impl RuleCounter {
    #[inline]
    fn hit(&mut self, len: u32, now: u64) {
        self.packets += 1;
        self.bytes += len as u64;
        self.last = now;
    }
}

// ---- compiled form ---------------------------------------------------------------

/// A span of a side array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    start: u32,
    len: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IfWhich {
    Via,
    Recv,
    Xmit,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IfOperand {
    Any,
    Name(u32),
    Table(u16),
}

/// A microinstruction's opcode and operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// Always true (negated: `not any`).
    Any,
    Proto(u8),
    ProtoList(Span),
    Ip4,
    Ip6,
    Me {
        dst: bool,
    },
    Me6 {
        dst: bool,
    },
    Addrs {
        dst: bool,
        span: Span,
    },
    AddrTable {
        dst: bool,
        table: u16,
        value: Option<u32>,
        /// Where `eval_batch` keeps this lookup's results for a vector
        /// ([`VectorLookups`]), or [`NO_SLOT`].
        slot: u8,
    },
    Ports {
        dst: bool,
        span: Span,
    },
    In,
    Out,
    Iface(IfWhich, IfOperand),
    Setup,
    Established,
    TcpFlags(FlagSpec),
    Frag,
    IcmpTypes(u32),
    Icmp6Types(u32),
    Tagged(Span),
    IpLen(Span),
    IpTtl(Span),
    IpTos(FlagSpec),
    Dscp(u64),
    TcpOptions(FlagSpec),
    TcpWin(Span),
    TcpDataLen(Span),
    Mac(u32),
    MacType(Span),
    Layer2,
    Antispoof,
    Verrevpath,
    LookupPort {
        dst: bool,
        table: u16,
    },
    Flow(u16),
}

/// One microinstruction: FreeBSD's `ipfw_insn` with `F_NOT`/`F_OR`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Insn {
    op: Op,
    not: bool,
    or: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Act {
    Allow,
    Deny,
    Reject,
    Unreach(u8),
    Unreach6(u8),
    Reset,
    Count,
    Skipto(Arg),
    Call,
    Return,
    CheckState,
    Pipe(Arg),
    Queue(Arg),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Keep {
    No,
    State,
    Limit(LimitMask, u32),
}

/// [`RuleHdr::slow`] bits: what takes a rule off the evaluator's plain path (body,
/// counter, `count` or a final action), each with its own check.
const SLOW_STATE: u8 = 1; // check-state, keep-state, limit
const SLOW_PROB: u8 = 2;
const SLOW_TAG: u8 = 4;
const SLOW_LOG: u8 = 8;
const SLOW_JUMP: u8 = 16; // skipto, call, return

/// A rule's header.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RuleHdr {
    /// [`SLOW_STATE`]... bits, 0 for a plain rule: the walk tests this one byte
    /// instead of each property in turn (the per-rule cost the 2009 paper measured).
    slow: u8,
    /// The body has an or-block (else a plain conjunction, walked more simply).
    has_or: bool,
    num: u16,
    rule_id: u32,
    prob: u32,
    act: Act,
    log: bool,
    keep: Keep,
    /// `tag`/`untag` (true = untag).
    tag: Option<(bool, Arg)>,
    insns: Span,
    /// skipto/call with a number: the index of the first rule at or past it.
    target: u32,
}

impl RuleHdr {
    fn slow_bits(&self) -> u8 {
        let mut b = 0;
        if self.act == Act::CheckState || self.keep != Keep::No {
            b |= SLOW_STATE;
        }
        if self.prob != rule::PROB_ONE {
            b |= SLOW_PROB;
        }
        if self.tag.is_some() {
            b |= SLOW_TAG;
        }
        if self.log {
            b |= SLOW_LOG;
        }
        if matches!(self.act, Act::Skipto(_) | Act::Call | Act::Return) {
            b |= SLOW_JUMP;
        }
        b
    }
}

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
/// replace it whole when the rules change.
#[derive(Debug)]
pub struct Program {
    generation: u64,
    rules: Vec<RuleHdr>,
    insns: Vec<Insn>,
    ranges: Vec<Range>,
    addrs: Vec<(u128, u128, bool)>,
    ifnames: Vec<IfName>,
    macs: Vec<(MacPat, MacPat)>,
    icmp6: Vec<[u64; 4]>,
    tables: Vec<Arc<CompiledTable>>,
    /// `(rule_id, index)` sorted by id: where a state's rule is.
    by_id: Vec<(u32, u32)>,
    /// Every walk meets a stateful rule before anything but `count` rules, so
    /// `eval_batch` may look up a vector's states first.
    lookup_first: bool,
    /// Some instruction looks up an address table in a [`VectorLookups`] slot.
    has_slots: bool,
}

fn addr_bits(a: IpAddr) -> (u128, bool) {
    match a {
        IpAddr::V4(a) => (u32::from(a) as u128, false),
        IpAddr::V6(a) => (u128::from(a), true),
    }
}

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
        let lookup_first = hdrs
            .iter()
            .position(|h| h.slow & SLOW_STATE != 0)
            .is_some_and(|k| hdrs[..k].iter().all(|h| h.act == Act::Count));
        Ok(Program {
            lookup_first,
            has_slots: !b.slots.is_empty(),
            generation: GENERATION.fetch_add(1, Ordering::Relaxed),
            rules: hdrs,
            insns: b.insns,
            ranges: b.ranges,
            addrs: b.addrs,
            ifnames: b.ifnames,
            macs: b.macs,
            icmp6: b.icmp6,
            tables: tables.iter().map(|t| t.table.clone()).collect(),
            by_id,
        })
    }

    /// Rules in the program, the default rule included.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Some rule makes dynamic states (`keep-state`, `limit`): their holder should
    /// sweep them for expired ones.
    pub fn makes_states(&self) -> bool {
        self.rules.iter().any(|h| h.keep != Keep::No)
    }

    /// Microinstructions in the program.
    pub fn insn_count(&self) -> usize {
        self.insns.len()
    }

    /// The rule ids in program order (what [`Counters`] are indexed by).
    pub fn rule_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.rules.iter().map(|r| r.rule_id)
    }
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
            let op = match &o.kind {
                OptKind::KeepState => {
                    keep = Keep::State;
                    continue;
                }
                OptKind::Limit(m, l) => {
                    keep = Keep::Limit(*m, *l);
                    continue;
                }
                OptKind::Tag(a) => {
                    tag = Some((false, *a));
                    continue;
                }
                OptKind::Untag(a) => {
                    tag = Some((true, *a));
                    continue;
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
                        IfPat::Table(t) => {
                            IfOperand::Table(table_idx(tables, t, "iface", is_iface)?)
                        }
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

// ---- evaluation ------------------------------------------------------------------

#[inline]
fn in_ranges(rs: &[Range], v: u32) -> bool {
    rs.iter().any(|r| r.lo <= v && v <= r.hi)
}

#[inline]
fn flags_match(have: u8, f: FlagSpec) -> bool {
    have & f.set == f.set && have & f.clear == 0
}

/// A table lookup's result as a test: a hit, with the value `want`s if it names one,
/// matches and sets `targ` (`tablearg`) to the entry's value.
#[inline(always)]
fn table_hit(found: Option<u32>, want: Option<u32>, targ: &mut u32) -> bool {
    match found {
        Some(v) if want.is_none_or(|w| w == v) => {
            *targ = v;
            true
        }
        _ => false,
    }
}

#[inline]
fn mac_match(p: MacPat, have: [u8; 6]) -> bool {
    match p {
        MacPat::Any => true,
        MacPat::Addr(m) => m == have,
    }
}

/// xorshift64*: `prob`'s coin, from the caller's per-worker seed.
#[inline]
fn coin(rng: &mut u64) -> u32 {
    let mut x = *rng | 1;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *rng = x;
    (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as u32
}

impl Program {
    #[inline]
    fn ranges(&self, s: Span) -> &[Range] {
        &self.ranges[s.start as usize..(s.start + s.len) as usize]
    }

    /// One instruction's test, before `not`. A table hit sets `targ`. The common
    /// tests are here, inlined into the walk; the others are out of line in
    /// [`test_rare`](Self::test_rare), so that the walk does not load, for every
    /// packet, the fields only they read (the compiler hoists a loop's loads).
    #[inline(always)]
    fn test<E: Env + ?Sized>(
        &self,
        op: Op,
        p: &PacketInfo,
        tags: &Tags,
        env: &E,
        targ: &mut u32,
    ) -> bool {
        match op {
            Op::Any => true,
            Op::Proto(n) => p.proto == n,
            Op::Ip4 => p.src.is_ipv4(),
            Op::Ip6 => p.src.is_ipv6(),
            Op::Addrs { dst, span } => {
                let (a, v6) = addr_bits(if dst { p.dst } else { p.src });
                self.addrs[span.start as usize..(span.start + span.len) as usize]
                    .iter()
                    .any(|&(x, m, f6)| f6 == v6 && a & m == x)
            }
            Op::Ports { dst, span } => {
                p.has_ports()
                    && in_ranges(
                        self.ranges(span),
                        if dst { p.dport } else { p.sport } as u32,
                    )
            }
            Op::In => p.dir == Direction::In,
            Op::Out => p.dir == Direction::Out,
            // RFC 9293 §3.1: a connection request carries SYN without ACK.
            Op::Setup => p.is_tcp() && p.tcp_flags & 0x12 == 0x02,
            Op::Established => p.is_tcp() && p.tcp_flags & 0x14 != 0,
            Op::TcpFlags(f) => p.is_tcp() && flags_match(p.tcp_flags, f),
            Op::Frag => p.frag,
            Op::IcmpTypes(bits) => {
                p.proto == 1 && p.icmp_type < 32 && bits & (1 << p.icmp_type) != 0
            }
            Op::Layer2 => p.layer2,
            _ => self.test_rare(op, p, tags, env, targ),
        }
    }

    /// [`test`](Self::test), out of line: the opcodes it leaves to this.
    #[inline(never)]
    fn test_rare<E: Env + ?Sized>(
        &self,
        op: Op,
        p: &PacketInfo,
        tags: &Tags,
        env: &E,
        targ: &mut u32,
    ) -> bool {
        match op {
            Op::ProtoList(s) => in_ranges(self.ranges(s), p.proto as u32),
            Op::Me { dst } => env.is_local(if dst { p.dst } else { p.src }),
            Op::Me6 { dst } => {
                let a = if dst { p.dst } else { p.src };
                a.is_ipv6() && env.is_local(a)
            }
            Op::AddrTable {
                dst, table, value, ..
            } => table_hit(
                self.tables[table as usize].lookup_addr(if dst { p.dst } else { p.src }),
                value,
                targ,
            ),
            Op::Iface(which, operand) => {
                let ifp = match which {
                    IfWhich::Recv => p.rcvif,
                    IfWhich::Xmit => p.xmitif,
                    IfWhich::Via => match p.dir {
                        Direction::In => p.rcvif,
                        Direction::Out => p.xmitif,
                    },
                };
                let Some(ifp) = ifp else { return false };
                match operand {
                    IfOperand::Any => true,
                    IfOperand::Name(i) => self.ifnames[i as usize] == ifp.name,
                    IfOperand::Table(t) => table_hit(
                        self.tables[t as usize].lookup_iface(ifp.name.as_str()),
                        None,
                        targ,
                    ),
                }
            }
            Op::Icmp6Types(i) => {
                p.proto == 58
                    && self.icmp6[i as usize][p.icmp_type as usize / 64] & (1 << (p.icmp_type % 64))
                        != 0
            }
            Op::Tagged(s) => tags
                .as_slice()
                .iter()
                .any(|&t| in_ranges(self.ranges(s), t as u32)),
            Op::IpLen(s) => in_ranges(self.ranges(s), p.ip_len as u32),
            Op::IpTtl(s) => in_ranges(self.ranges(s), p.ttl as u32),
            Op::IpTos(f) => flags_match(p.tos, f),
            Op::Dscp(bits) => bits & (1 << (p.tos >> 2)) != 0,
            Op::TcpOptions(f) => p.is_tcp() && flags_match(p.tcp_opts, f),
            Op::TcpWin(s) => p.is_tcp() && in_ranges(self.ranges(s), p.tcp_win as u32),
            Op::TcpDataLen(s) => p.is_tcp() && in_ranges(self.ranges(s), p.tcp_datalen as u32),
            Op::Mac(i) => match (p.layer2, p.mac) {
                (true, Some(m)) => {
                    let (d, s) = self.macs[i as usize];
                    mac_match(d, m.dst) && mac_match(s, m.src)
                }
                _ => false,
            },
            Op::MacType(s) => match (p.layer2, p.mac) {
                (true, Some(m)) => in_ranges(self.ranges(s), m.ethertype as u32),
                _ => false,
            },
            // Both hold for outgoing packets and those without a receive interface.
            Op::Antispoof => match (p.dir, p.rcvif) {
                (Direction::In, Some(i)) => env.antispoof(p.src, i.index),
                _ => true,
            },
            Op::Verrevpath => match (p.dir, p.rcvif) {
                (Direction::In, Some(i)) => env.verrevpath(p.src, i.index),
                _ => true,
            },
            Op::LookupPort { dst, table } => {
                if !p.has_ports() {
                    return false;
                }
                let port = if dst { p.dport } else { p.sport };
                table_hit(
                    self.tables[table as usize].lookup_number(port as u32),
                    None,
                    targ,
                )
            }
            Op::Flow(t) => table_hit(
                self.tables[t as usize].lookup_flow(p.src, p.proto, p.sport, p.dst, p.dport),
                None,
                targ,
            ),
            // The common opcodes: `test` answers them inline and never sends them
            // here; answered the same way should anything else call this.
            _ => self.test(op, p, tags, env, targ),
        }
    }

    /// [`test`](Self::test), with an address-table lookup taken from `lk` when it has
    /// made it already (`eval_batch`); for `eval` (`OnTheSpot`) this is `test`.
    #[inline(always)]
    fn insn_test<E: Env + ?Sized, L: AddrLookups>(
        &self,
        op: Op,
        p: &PacketInfo,
        tags: &Tags,
        env: &E,
        targ: &mut u32,
        lk: &mut L,
    ) -> bool {
        if L::VECTOR {
            if let Op::AddrTable {
                dst,
                table,
                value,
                slot,
            } = op
            {
                if let Some(found) = lk.addr_table(self, slot, dst, table) {
                    // As `test_rare` does with a lookup of its own.
                    return table_hit(found, value, targ);
                }
            }
        }
        self.test(op, p, tags, env, targ)
    }

    /// Whether rule `r`'s body matches; FreeBSD's `F_OR`/`F_NOT` walk.
    // Inlined into the walk: out of line, each call loaded the packet's and the
    // program's fields afresh (the compiler hoists them out of the instruction loop),
    // about 40 loads and spills per rule.
    #[inline(always)]
    fn body_matches<E: Env + ?Sized, L: AddrLookups>(
        &self,
        r: &RuleHdr,
        p: &PacketInfo,
        tags: &Tags,
        env: &E,
        targ: &mut u32,
        lk: &mut L,
    ) -> bool {
        let insns = &self.insns[r.insns.start as usize..(r.insns.start + r.insns.len) as usize];
        if !r.has_or {
            // A plain loop: `Iterator::all` with this closure was not inlined.
            for insn in insns {
                if self.insn_test(insn.op, p, tags, env, targ, lk) == insn.not {
                    return false;
                }
            }
            return true;
        }
        let mut skip_or = false;
        for insn in insns {
            if skip_or {
                // The or-block already matched: pass over its remaining members.
                skip_or = insn.or;
                continue;
            }
            let m = self.insn_test(insn.op, p, tags, env, targ, lk) != insn.not;
            if insn.or {
                skip_or = m;
                continue;
            }
            if !m {
                return false;
            }
        }
        true
    }

    fn index_of_id(&self, id: u32) -> Option<usize> {
        self.by_id
            .binary_search_by_key(&id, |e| e.0)
            .ok()
            .map(|i| self.by_id[i].1 as usize)
    }

    /// The first rule at or past number `n`.
    fn first_at(&self, n: u32) -> usize {
        self.rules
            .partition_point(|r| (r.num as u32) < n)
            .min(self.rules.len() - 1)
    }

    /// [`Program::eval`] over a vector of packets, `out[i]` for `pkts[i]` (panics if
    /// the lengths differ): the form a batch-at-a-time stage calls once per vector,
    /// with the same verdicts and effects as `eval` of each packet in turn. Packets
    /// are taken in groups of 64, and two kinds of lookup are made for a whole group
    /// at once, in loops whose iterations are independent, so that their cache misses
    /// overlap instead of each waiting in its own walk:
    ///
    /// - states: when every walk meets a stateful rule before anything but `count`
    ///   rules (the usual `check-state` first), the group's state lookups are made
    ///   before the walks ([`StateShards::lookup_batch`]: one lock per shard per
    ///   group). A packet whose lookup missed looks again, in its walk, if an earlier
    ///   packet of the group installed a state meanwhile (the only change of the
    ///   table that could make it hit).
    /// - address tables (`from table(t)`, `to table(t)`): the first walk that reaches
    ///   such a lookup makes it for itself and every later packet of the group
    ///   ([`VectorLookups`]); the later walks take their result. A lookup is pure (the
    ///   program's tables are immutable), so only the work of the packets that never
    ///   reach it is wasted.
    // The same inputs as `eval`, plus the vector and its verdicts.
    #[allow(clippy::too_many_arguments)]
    pub fn eval_batch<E: Env + ?Sized>(
        &self,
        pkts: &mut [PacketInfo],
        out: &mut [Verdict],
        env: &E,
        states: &StateShards,
        counters: &mut Counters,
        now: u64,
        rng: &mut u64,
    ) {
        assert_eq!(pkts.len(), out.len(), "eval_batch: lengths differ");
        counters.sync(self);
        if !self.lookup_first && !self.has_slots {
            for (p, o) in pkts.iter_mut().zip(out.iter_mut()) {
                *o = self.eval_one(p, env, states, counters, now, rng);
            }
            return;
        }
        let blank = FlowId {
            proto: 0,
            src: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            dst: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            sport: 0,
            dport: 0,
        };
        for (pc, oc) in pkts.chunks_mut(G).zip(out.chunks_mut(G)) {
            let m = pc.len();
            let mut hits = [None; G];
            if self.lookup_first {
                let mut flows = [blank; G];
                let mut flags = [0u8; G];
                for (k, p) in pc.iter().enumerate() {
                    flows[k] = flow_of(p);
                    flags[k] = p.tcp_flags;
                }
                states.lookup_batch(&flows[..m], &flags[..m], now, &mut hits[..m]);
            }
            // The walks read the group (the table lookups read ahead in it); each
            // packet's new tags are written back after.
            let mut tags = [Tags::default(); G];
            let group: &[PacketInfo] = pc;
            let mut lk = VectorLookups::new(group);
            let mut inserted = false;
            for (k, p) in group.iter().enumerate() {
                let pre = match hits[k] {
                    _ if !self.lookup_first => None,
                    None if inserted => None,
                    h => Some(h),
                };
                let mut w = Walk::new(self, pre);
                lk.at = k;
                tags[k] = p.tags;
                oc[k] = self.walk(
                    p,
                    &mut tags[k],
                    env,
                    states,
                    counters,
                    now,
                    rng,
                    &mut w,
                    &mut lk,
                );
                inserted |= w.inserted;
            }
            for (p, t) in pc.iter_mut().zip(tags) {
                p.tags = t;
            }
        }
    }

    /// Runs the rules over `pkt` (FreeBSD's `ipfw_chk`): the first rule whose body
    /// matches and whose action ends the walk decides. `count` goes on, `skipto`
    /// jumps forward, `call`/`return` use a stack of [`CALLSTACK`], `check-state` (and
    /// the first `keep-state`/`limit` rule) asks `states` and, on a hit, runs the
    /// action of the rule that made the state. `tag`/`untag` change `pkt.tags`.
    /// `now` is the caller's clock, in the unit the state module's timeouts use; `rng`
    /// is the worker's seed for `prob`. Allocates nothing (unless `counters`
    /// must first move to this program, see [`Counters`]).
    pub fn eval<E: Env + ?Sized>(
        &self,
        pkt: &mut PacketInfo,
        env: &E,
        states: &StateShards,
        counters: &mut Counters,
        now: u64,
        rng: &mut u64,
    ) -> Verdict {
        counters.sync(self);
        self.eval_one(pkt, env, states, counters, now, rng)
    }

    /// `eval` after the counters' sync, its lookups made on the spot. The packet is
    /// read-only during the walk (its tags are a local copy, written back at the
    /// end), so its fields are loaded once per packet rather than once per rule.
    #[inline]
    fn eval_one<E: Env + ?Sized>(
        &self,
        pkt: &mut PacketInfo,
        env: &E,
        states: &StateShards,
        counters: &mut Counters,
        now: u64,
        rng: &mut u64,
    ) -> Verdict {
        let mut w = Walk::new(self, None);
        let mut tags = pkt.tags;
        let v = self.walk(
            pkt,
            &mut tags,
            env,
            states,
            counters,
            now,
            rng,
            &mut w,
            &mut OnTheSpot,
        );
        pkt.tags = tags;
        v
    }

    /// The walk. A plain rule (`slow == 0`: no state, `prob`, tag, log or jump) costs
    /// one byte test, its body, and on a match its counter and the action; anything
    /// else goes to [`slow_rule`](Self::slow_rule), out of line.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn walk<E: Env + ?Sized, L: AddrLookups>(
        &self,
        p: &PacketInfo,
        tags: &mut Tags,
        env: &E,
        states: &StateShards,
        counters: &mut Counters,
        now: u64,
        rng: &mut u64,
        w: &mut Walk,
        lk: &mut L,
    ) -> Verdict {
        let rules = &self.rules[..];
        let n = rules.len();
        // `sync` made the counters as long as the rules.
        let cs = &mut counters.c[..n];
        let logged = &mut counters.logged;
        let mut i = 0;
        while i < n {
            let r = &rules[i];
            if r.slow == 0 {
                let mut targ = 0;
                if self.body_matches(r, p, tags, env, &mut targ, lk) {
                    cs[i].hit(p.len, now);
                    if let Some(decision) = decision(r.act, p, targ) {
                        return Verdict {
                            decision,
                            rule: r.num,
                            log: w.log,
                        };
                    }
                }
                i += 1;
                continue;
            }
            match self.slow_rule(i, p, tags, env, states, cs, logged, now, rng, w, lk) {
                Step::Next(k) => i = k,
                Step::Done(v) => return v,
            }
        }
        Verdict {
            decision: Decision::Deny,
            rule: rule::DEFAULT_RULE,
            log: w.log,
        }
    }

    /// Rule `i` when it is not plain: the state lookup (at the first stateful rule),
    /// `prob`, the body, the state install, the counter, `log`, the tag, and the
    /// action, jumps included.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn slow_rule<E: Env + ?Sized, L: AddrLookups>(
        &self,
        i: usize,
        p: &PacketInfo,
        tags: &mut Tags,
        env: &E,
        states: &StateShards,
        cs: &mut [RuleCounter],
        logged: &mut u64,
        now: u64,
        rng: &mut u64,
        w: &mut Walk,
        lk: &mut L,
    ) -> Step {
        // Forward skips and bounded calls end every walk; the budget (counted on
        // these rules only: plain ones always move forward) only guards the invariant.
        if w.budget == 0 {
            return Step::Done(Verdict {
                decision: Decision::Deny,
                rule: rule::DEFAULT_RULE,
                log: w.log,
            });
        }
        w.budget -= 1;
        let r = &self.rules[i];
        let mut j = i;
        let mut targ = 0;
        let mut hit = false;
        if r.slow & SLOW_STATE != 0 && !w.state_checked {
            w.state_checked = true;
            let h = match w.pre.take() {
                Some(h) => h,
                None => states.lookup(&flow_of(p), p.tcp_flags, now),
            };
            if let Some(k) = h.and_then(|h| self.index_of_id(h.rule_id)) {
                j = k;
                hit = true;
            }
        }
        if !hit {
            if r.act == Act::CheckState {
                return Step::Next(i + 1);
            }
            if r.prob != rule::PROB_ONE && coin(rng) >= r.prob {
                return Step::Next(i + 1);
            }
            if !self.body_matches(r, p, tags, env, &mut targ, lk) {
                return Step::Next(i + 1);
            }
            let installed = match r.keep {
                Keep::No => Ok(()),
                Keep::State => {
                    w.inserted = true;
                    states.insert(&flow_of(p), r.num as u32, r.rule_id, p.tcp_flags, now)
                }
                Keep::Limit(m, l) => {
                    w.inserted = true;
                    states.insert_limited(
                        &flow_of(p),
                        r.num as u32,
                        r.rule_id,
                        p.tcp_flags,
                        m,
                        l,
                        now,
                    )
                }
            };
            if let Err(StateError::Full | StateError::LimitReached) = installed {
                cs[i].hit(p.len, now);
                return Step::Done(Verdict {
                    decision: Decision::Deny,
                    rule: r.num,
                    log: w.log || r.log,
                });
            }
        }
        let r = &self.rules[j];
        cs[j].hit(p.len, now);
        if r.log {
            w.log = true;
            *logged += 1;
        }
        if let Some((untag, a)) = r.tag {
            let t = match a {
                Arg::Num(t) => t,
                Arg::Tablearg => targ,
            } as u16;
            if untag {
                tags.remove(t);
            } else {
                tags.add(t);
            }
        }
        match r.act {
            Act::Count | Act::CheckState => Step::Next(j + 1),
            Act::Skipto(Arg::Num(_)) => Step::Next(r.target as usize),
            Act::Skipto(Arg::Tablearg) => Step::Next(if targ <= r.num as u32 {
                j + 1
            } else {
                self.first_at(targ)
            }),
            Act::Call => {
                if w.sp < CALLSTACK {
                    w.stack[w.sp] = j as u32 + 1;
                    w.sp += 1;
                    Step::Next(r.target as usize)
                } else {
                    Step::Next(j + 1)
                }
            }
            Act::Return => {
                if w.sp > 0 {
                    w.sp -= 1;
                    Step::Next(w.stack[w.sp] as usize)
                } else {
                    Step::Next(j + 1)
                }
            }
            act => Step::Done(Verdict {
                decision: decision(act, p, targ).unwrap_or(Decision::Deny),
                rule: r.num,
                log: w.log,
            }),
        }
    }
}

/// What a rule's action decides, `None` for those that let the walk go on.
#[inline]
fn decision(act: Act, p: &PacketInfo, targ: u32) -> Option<Decision> {
    let arg = |a: Arg| match a {
        Arg::Num(x) => x,
        Arg::Tablearg => targ,
    };
    Some(match act {
        Act::Count | Act::CheckState | Act::Skipto(_) | Act::Call | Act::Return => return None,
        Act::Allow => Decision::Allow,
        Act::Deny => Decision::Deny,
        Act::Reject if p.src.is_ipv6() => Decision::Reject(RejectKind::Unreach6(1)),
        Act::Reject => Decision::Reject(RejectKind::Unreach(1)),
        Act::Unreach(c) => Decision::Reject(RejectKind::Unreach(c)),
        Act::Unreach6(c) => Decision::Reject(RejectKind::Unreach6(c)),
        // A reset answers TCP only; anything else is dropped quietly.
        Act::Reset if p.proto == 6 => Decision::Reject(RejectKind::Rst),
        Act::Reset => Decision::Deny,
        Act::Pipe(a) => Decision::Pipe(arg(a)),
        Act::Queue(a) => Decision::Queue(arg(a)),
    })
}

fn flow_of(p: &PacketInfo) -> FlowId {
    FlowId {
        proto: p.proto,
        src: p.src,
        dst: p.dst,
        sport: p.sport,
        dport: p.dport,
    }
}

/// Where a walk goes after a rule off the plain path.
enum Step {
    Next(usize),
    Done(Verdict),
}

/// A walk's state beyond the rule index, used only off the plain path.
struct Walk {
    log: bool,
    state_checked: bool,
    /// A state lookup `eval_batch` already made for this packet.
    pre: Option<Option<StateHit>>,
    /// A state install was tried.
    inserted: bool,
    sp: usize,
    stack: [u32; CALLSTACK],
    budget: usize,
}

impl Walk {
    #[inline]
    fn new(prog: &Program, pre: Option<Option<StateHit>>) -> Walk {
        Walk {
            log: false,
            state_checked: false,
            pre,
            inserted: false,
            sp: 0,
            stack: [0; CALLSTACK],
            budget: prog.rules.len() * (CALLSTACK + 2) + 16,
        }
    }
}

/// The vector size of `eval_batch`.
const G: usize = 64;
/// Address-table lookups (distinct table and field) `eval_batch` makes a vector at a
/// time; any more are made on the spot, as `eval` makes them.
const SLOTS: usize = 4;
const NO_SLOT: u8 = u8::MAX;

/// Where a walk gets its address-table lookups: `eval` makes each where its
/// instruction is ([`OnTheSpot`]), `eval_batch` takes them from a group's
/// ([`VectorLookups`]). One walk, compiled once for each (VPP's two variants of a node
/// from one inline body): `eval`'s has no trace of the other.
trait AddrLookups {
    const VECTOR: bool;
    /// The result of looking up `table` by the walked packet's source or destination
    /// (`dst`), if this kind of lookups makes it (else the instruction's own test does).
    fn addr_table(
        &mut self,
        prog: &Program,
        slot: u8,
        dst: bool,
        table: u16,
    ) -> Option<Option<u32>>;
}

struct OnTheSpot;

impl AddrLookups for OnTheSpot {
    const VECTOR: bool = false;
    #[inline(always)]
    fn addr_table(&mut self, _: &Program, _: u8, _: bool, _: u16) -> Option<Option<u32>> {
        None
    }
}

/// A group's address-table lookups: slot `s` is filled for packets `at..` of the group
/// when the walk of packet `at` first needs it.
struct VectorLookups<'a> {
    group: &'a [PacketInfo],
    /// The packet being walked.
    at: usize,
    /// Bit `s`: slot `s` is filled.
    filled: u8,
    res: [[Option<u32>; G]; SLOTS],
}

impl<'a> VectorLookups<'a> {
    fn new(group: &'a [PacketInfo]) -> Self {
        VectorLookups {
            group,
            at: 0,
            filled: 0,
            res: [[None; G]; SLOTS],
        }
    }

    /// The lookups for packets `at..`: a loop whose iterations depend on nothing but
    /// their own packet, so the CPU runs several lookups' cache misses at once.
    #[inline(never)]
    fn fill(&mut self, prog: &Program, s: usize, dst: bool, table: u16) {
        let t = &prog.tables[table as usize];
        let from = self.at;
        for (r, p) in self.res[s][from..self.group.len()]
            .iter_mut()
            .zip(&self.group[from..])
        {
            *r = t.lookup_addr(if dst { p.dst } else { p.src });
        }
        self.filled |= 1 << s;
    }
}

impl AddrLookups for VectorLookups<'_> {
    const VECTOR: bool = true;
    #[inline(always)]
    fn addr_table(
        &mut self,
        prog: &Program,
        slot: u8,
        dst: bool,
        table: u16,
    ) -> Option<Option<u32>> {
        let s = slot as usize;
        if s >= SLOTS {
            return None;
        }
        if self.filled & (1 << s) == 0 {
            self.fill(prog, s, dst, table);
        }
        Some(self.res[s][self.at])
    }
}
