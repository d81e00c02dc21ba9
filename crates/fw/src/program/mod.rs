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
//!
//! The files: this one has what the firewall answers and the compiled form;
//! `packet` what the caller describes (the packet as the rules see it); `counters`
//! the rules' per-worker counters; `compile` the compiler; `eval` the evaluator.

mod compile;
mod counters;
mod eval;
mod major;
mod packet;
mod vector;

pub use compile::{CompileError, TableRef};
use counters::{Cells, Tally};
pub use counters::{CounterSink, CounterSource, Counters, RuleCounter, SharedCounters};
pub use packet::{tcpopt, Direction, Env, IfName, IfRef, MacHdr, PacketInfo, Tags};
use vector::{Col, Cols, One, Pkt};
pub use vector::{Needs, PacketVec, VECTOR};

use crate::rule::{self, Arg, FlagSpec, MacPat, Range};
use crate::state::LimitMask;
use crate::table::CompiledTable;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

/// FreeBSD's `IP_FW_CALLSTACK_SIZE`.
pub const CALLSTACK: usize = 16;
/// Tags a packet may carry at once.
pub const MAX_TAGS: usize = 8;

/// Address-table lookups (distinct table and field) `eval_batch` makes a vector at a
/// time; any more are made on the spot, as `eval` makes them.
const SLOTS: usize = 4;
const NO_SLOT: u8 = u8::MAX;

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
    /// Accepted, to leave by this next hop (and port) instead of the route's
    /// gateway, or to be delivered locally when the address is the node's own:
    /// FreeBSD's `ipfw fwd` (the `PACKET_TAG_IPFORWARD` tag). The next hop (and
    /// port) is [`Program::fwd_hop`] of this index, so that a verdict stays small.
    Fwd(u32),
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
    /// `fwd`: the index of its next hop in [`Program::fwd_hop`].
    Fwd(u32),
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
    /// The next hops (and ports) of the `fwd` rules, by [`Decision::Fwd`]'s index.
    fwds: Vec<(IpAddr, Option<u16>)>,
    tables: Vec<Arc<CompiledTable>>,
    /// `(rule_id, index)` sorted by id: where a state's rule is.
    by_id: Vec<(u32, u32)>,
    /// Rules `..run` are evaluated rule-major over a vector (`major`): none looks
    /// up or installs states, draws `prob`'s coin, calls, or skips by `tablearg`.
    run: u32,
    /// The first stateful rule (`u32::MAX` if none), and the first of the rules
    /// before it that are all `count`: a walk that starts in
    /// `count_from..=state_first` looks up its state before anything else, so
    /// `eval_vec` may look up those of a vector together first.
    state_first: u32,
    count_from: u32,
    /// What the rules read beyond the hot fields.
    needs: Needs,
    /// Some instruction looks up an address table in a [`VectorLookups`] slot.
    has_slots: bool,
}

impl Program {
    /// The next hop and port of a [`Decision::Fwd`] of this program.
    pub fn fwd_hop(&self, i: u32) -> Option<(IpAddr, Option<u16>)> {
        self.fwds.get(i as usize).copied()
    }
}

fn addr_bits(a: IpAddr) -> (u128, bool) {
    match a {
        IpAddr::V4(a) => (u32::from(a) as u128, false),
        IpAddr::V6(a) => (u128::from(a), true),
    }
}

impl Program {
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
