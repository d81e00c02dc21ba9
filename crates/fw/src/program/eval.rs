//! The evaluator (FreeBSD's `ipfw_chk`): [`Program::eval`] and
//! [`Program::eval_batch`].

use super::*;
use crate::state::{FlowId, StateError, StateHit, StateShards, ICMP_REPLY};

// ---- evaluation ------------------------------------------------------------------

#[inline]
pub(super) fn in_ranges(rs: &[Range], v: u32) -> bool {
    rs.iter().any(|r| r.lo <= v && v <= r.hi)
}

#[inline]
pub(super) fn flags_match(have: u8, f: FlagSpec) -> bool {
    have & f.set == f.set && have & f.clear == 0
}

/// A table lookup's result as a test: a hit, with the value `want`s if it names one,
/// matches and sets `targ` (`tablearg`) to the entry's value.
#[inline(always)]
pub(super) fn table_hit(found: Option<u32>, want: Option<u32>, targ: &mut u32) -> bool {
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
    pub(super) fn ranges(&self, s: Span) -> &[Range] {
        &self.ranges[s.start as usize..(s.start + s.len) as usize]
    }

    /// One instruction's test, before `not`. A table hit sets `targ`. The common
    /// tests are here, inlined into the walk; the others are out of line in
    /// [`test_rare`](Self::test_rare), so that the walk does not load, for every
    /// packet, the fields only they read (the compiler hoists a loop's loads).
    #[inline(always)]
    pub(super) fn test<E: Env + ?Sized, P: Pkt>(
        &self,
        op: Op,
        p: P,
        tags: &Tags,
        env: &E,
        targ: &mut u32,
    ) -> bool {
        match op {
            Op::Any => true,
            Op::Proto(n) => p.proto() == n,
            Op::Ip4 => !p.v6(),
            Op::Ip6 => p.v6(),
            Op::Addrs { dst, span } => {
                let (a, v6) = p.addr_bits(dst);
                self.addrs[span.start as usize..(span.start + span.len) as usize]
                    .iter()
                    .any(|&(x, m, f6)| f6 == v6 && a & m == x)
            }
            Op::Ports { dst, span } => {
                p.has_ports()
                    && in_ranges(
                        self.ranges(span),
                        if dst { p.dport() } else { p.sport() } as u32,
                    )
            }
            Op::In => p.dir() == Direction::In,
            Op::Out => p.dir() == Direction::Out,
            // RFC 9293 §3.1: a connection request carries SYN without ACK.
            Op::Setup => p.is_tcp() && p.tcp_flags() & 0x12 == 0x02,
            Op::Established => p.is_tcp() && p.tcp_flags() & 0x14 != 0,
            Op::TcpFlags(f) => p.is_tcp() && flags_match(p.tcp_flags(), f),
            Op::Frag => p.frag(),
            Op::IcmpTypes(bits) => {
                p.proto() == 1 && p.icmp_type() < 32 && bits & (1 << p.icmp_type()) != 0
            }
            Op::Layer2 => p.layer2(),
            _ => self.test_rare(op, p, tags, env, targ),
        }
    }

    /// [`test`](Self::test), out of line: the opcodes it leaves to this.
    #[inline(never)]
    fn test_rare<E: Env + ?Sized, P: Pkt>(
        &self,
        op: Op,
        p: P,
        tags: &Tags,
        env: &E,
        targ: &mut u32,
    ) -> bool {
        match op {
            Op::ProtoList(s) => in_ranges(self.ranges(s), p.proto() as u32),
            Op::Me { dst } => env.is_local(p.addr(dst)),
            Op::Me6 { dst } => {
                let a = p.addr(dst);
                a.is_ipv6() && env.is_local(a)
            }
            Op::AddrTable {
                dst, table, value, ..
            } => table_hit(
                self.tables[table as usize].lookup_addr(p.addr(dst)),
                value,
                targ,
            ),
            Op::Iface(which, operand) => {
                let ifp = match which {
                    IfWhich::Recv => p.rcvif(),
                    IfWhich::Xmit => p.xmitif(),
                    IfWhich::Via => match p.dir() {
                        Direction::In => p.rcvif(),
                        Direction::Out => p.xmitif(),
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
                let t = p.icmp_type();
                p.proto() == 58 && self.icmp6[i as usize][t as usize / 64] & (1 << (t % 64)) != 0
            }
            Op::Tagged(s) => tags
                .as_slice()
                .iter()
                .any(|&t| in_ranges(self.ranges(s), t as u32)),
            Op::IpLen(s) => in_ranges(self.ranges(s), p.ip_len() as u32),
            Op::IpTtl(s) => in_ranges(self.ranges(s), p.ttl() as u32),
            Op::IpTos(f) => flags_match(p.tos(), f),
            Op::Dscp(bits) => bits & (1 << (p.tos() >> 2)) != 0,
            Op::TcpOptions(f) => p.is_tcp() && flags_match(p.tcp_opts(), f),
            Op::TcpWin(s) => p.is_tcp() && in_ranges(self.ranges(s), p.tcp_win() as u32),
            Op::TcpDataLen(s) => p.is_tcp() && in_ranges(self.ranges(s), p.tcp_datalen() as u32),
            Op::Mac(i) => match (p.layer2(), p.mac()) {
                (true, Some(m)) => {
                    let (d, s) = self.macs[i as usize];
                    mac_match(d, m.dst) && mac_match(s, m.src)
                }
                _ => false,
            },
            Op::MacType(s) => match (p.layer2(), p.mac()) {
                (true, Some(m)) => in_ranges(self.ranges(s), m.ethertype as u32),
                _ => false,
            },
            // Both hold for outgoing packets and those without a receive interface.
            Op::Antispoof => match (p.dir(), p.rcvif()) {
                (Direction::In, Some(i)) => env.antispoof(p.addr(false), i.index),
                _ => true,
            },
            Op::Verrevpath => match (p.dir(), p.rcvif()) {
                (Direction::In, Some(i)) => env.verrevpath(p.addr(false), i.index),
                _ => true,
            },
            Op::LookupPort { dst, table } => {
                if !p.has_ports() {
                    return false;
                }
                let port = if dst { p.dport() } else { p.sport() };
                table_hit(
                    self.tables[table as usize].lookup_number(port as u32),
                    None,
                    targ,
                )
            }
            Op::Flow(t) => table_hit(
                self.tables[t as usize].lookup_flow(
                    p.addr(false),
                    p.proto(),
                    // A vector keeps an ICMP identifier there.
                    if p.icmp() { 0 } else { p.sport() },
                    p.addr(true),
                    p.dport(),
                ),
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
    fn insn_test<E: Env + ?Sized, P: Pkt, L: AddrLookups>(
        &self,
        op: Op,
        p: P,
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
    pub(super) fn body_matches<E: Env + ?Sized, P: Pkt, L: AddrLookups>(
        &self,
        r: &RuleHdr,
        p: P,
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

    pub(super) fn index_of_id(&self, id: u32) -> Option<usize> {
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
    /// the lengths differ): the same verdicts and effects as `eval` of each packet in
    /// turn. The packets are copied into a [`PacketVec`] 64 at a time and evaluated
    /// by [`Program::eval_vec`] (rule-major over the leading run of rules that allows
    /// it, then the walks of the packets left); their tags are written back. The
    /// counters are checked against the program (and laid out again if it changed)
    /// once per call, not per packet.
    // The same inputs as `eval`, plus the vector and its verdicts.
    #[allow(clippy::too_many_arguments)]
    pub fn eval_batch<E: Env + ?Sized, C: CounterSink>(
        &self,
        pkts: &mut [PacketInfo],
        out: &mut [Verdict],
        env: &E,
        states: &StateShards,
        mut counters: C,
        now: u64,
        rng: &mut u64,
    ) {
        assert_eq!(pkts.len(), out.len(), "eval_batch: lengths differ");
        // The program's generation checked, and the counters found, once a vector.
        let mut t = counters.tally(self);
        if pkts.is_empty() {
            return;
        }
        let mut v = PacketVec::blank();
        for (pc, oc) in pkts.chunks_mut(VECTOR).zip(out.chunks_mut(VECTOR)) {
            v.clear();
            for p in pc.iter() {
                v.push(p);
            }
            self.eval_vec_tally(&mut v, env, states, &mut t, now, rng);
            for (k, (p, o)) in pc.iter_mut().zip(oc.iter_mut()).enumerate() {
                *o = v.verdicts[k];
                p.tags = v.tags(k);
            }
        }
    }

    /// Runs the rules over `pkt` (FreeBSD's `ipfw_chk`): the first rule whose body
    /// matches and whose action ends the walk decides. `count` goes on, `skipto`
    /// jumps forward, `call`/`return` use a stack of [`CALLSTACK`], `check-state` (and
    /// the first `keep-state`/`limit` rule) asks `states` and, on a hit, runs the
    /// action of the rule that made the state. `tag`/`untag` change `pkt.tags`.
    /// `now` is the caller's clock, in the unit the state module's timeouts use; `rng`
    /// is the worker's seed for `prob`. `counters` are the worker's, `&mut`
    /// [`Counters`] or `&`[`SharedCounters`]. Allocates nothing (unless `counters`
    /// must first move to this program, see [`Counters`]).
    pub fn eval<E: Env + ?Sized, C: CounterSink>(
        &self,
        pkt: &mut PacketInfo,
        env: &E,
        states: &StateShards,
        mut counters: C,
        now: u64,
        rng: &mut u64,
    ) -> Verdict {
        let mut t = counters.tally(self);
        self.eval_one(pkt, None, env, states, &mut t, now, rng)
    }

    /// `eval` of an ICMP or ICMPv6 error `pkt` that quotes the packet of flow
    /// `quote` (as [`crate::PacketVec::set_icmp_quote`] takes it: [`FlowId::icmp`]
    /// for a quoted ICMP message): `check-state` and `keep-state` rules find the
    /// quoted packet's state and admit the error only if it goes back to that
    /// packet's source, as pf does. (`eval` of an error matches no state.)
    #[allow(clippy::too_many_arguments)]
    pub fn eval_error<E: Env + ?Sized, C: CounterSink>(
        &self,
        pkt: &mut PacketInfo,
        quote: FlowId,
        env: &E,
        states: &StateShards,
        mut counters: C,
        now: u64,
        rng: &mut u64,
    ) -> Verdict {
        let mut t = counters.tally(self);
        self.eval_one(pkt, Some(&quote), env, states, &mut t, now, rng)
    }

    /// `eval` after the counters' sync, its lookups made on the spot. The packet is
    /// read-only during the walk (its tags are a local copy, written back at the
    /// end), so its fields are loaded once per packet rather than once per rule.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn eval_one<E: Env + ?Sized, T: Tally>(
        &self,
        pkt: &mut PacketInfo,
        quote: Option<&FlowId>,
        env: &E,
        states: &StateShards,
        t: &mut T,
        now: u64,
        rng: &mut u64,
    ) -> Verdict {
        let mut w = Walk::new(self, None);
        let mut tags = pkt.tags;
        let mut v = Verdict {
            decision: Decision::Deny,
            rule: rule::DEFAULT_RULE,
            log: false,
        };
        self.walk(
            One { p: &*pkt, quote },
            &mut tags,
            env,
            states,
            t,
            now,
            rng,
            &mut w,
            &mut OnTheSpot,
            &mut v,
        );
        pkt.tags = tags;
        v
    }

    /// The walk, from rule `w.start`. A plain rule (`slow == 0`: no state, `prob`,
    /// tag, log or jump) costs one byte test, its body, and on a match its counter
    /// and the action; anything else goes to [`slow_rule`](Self::slow_rule), out of
    /// line. The verdict is written to `out` (`eval_vec`'s column): returned, it was
    /// assembled in a temporary by byte and halfword stores that the copy into the
    /// vector read back whole, a failed store forwarding on every packet (about 2 ns,
    /// perf on bench fw's table cases).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn walk<E: Env + ?Sized, P: Pkt, T: Tally, L: AddrLookups>(
        &self,
        p: P,
        tags: &mut Tags,
        env: &E,
        states: &StateShards,
        t: &mut T,
        now: u64,
        rng: &mut u64,
        w: &mut Walk,
        lk: &mut L,
        out: &mut Verdict,
    ) {
        let rules = &self.rules[..];
        let n = rules.len();
        // The counters as a local of exactly `n` (never passed on by reference): the
        // compiler keeps them in registers and drops the bounds check of `i < n`.
        let mut cs = t.cells(n);
        let mut i = w.start;
        while i < n {
            let r = &rules[i];
            if r.slow == 0 {
                let mut targ = 0;
                if self.body_matches(r, p, tags, env, &mut targ, lk) {
                    cs.hit(i, p.len(), now);
                    if let Some(decision) = decision(r.act, p, targ) {
                        *out = Verdict {
                            decision,
                            rule: r.num,
                            log: w.log,
                        };
                        return;
                    }
                }
                i += 1;
                continue;
            }
            let step = self.slow_rule(i, p, tags, env, states, now, rng, w, lk);
            if let Some(j) = w.count.take() {
                cs.hit(j, p.len(), now);
                if std::mem::take(&mut w.log_now) {
                    cs.log();
                }
            }
            match step {
                Step::Next(k) => i = k,
                Step::Done(v) => {
                    *out = v;
                    return;
                }
            }
        }
        *out = Verdict {
            decision: Decision::Deny,
            rule: rule::DEFAULT_RULE,
            log: w.log,
        };
    }

    /// Rule `i` when it is not plain: the state lookup (at the first stateful rule),
    /// `prob`, the body, the state install, `log`, the tag, and the action, jumps
    /// included. The rule to count it leaves in `w.count` (and `w.log_now`), for the
    /// walk, which holds the counters.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn slow_rule<E: Env + ?Sized, P: Pkt, L: AddrLookups>(
        &self,
        i: usize,
        p: P,
        tags: &mut Tags,
        env: &E,
        states: &StateShards,
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
                None => match state_ask(p) {
                    StateAsk::Own(f, flags) => states.lookup(&f, flags, now),
                    StateAsk::Quote(f) => states.peek(&f, now),
                    StateAsk::Nothing => None,
                },
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
            // ICMP errors and replies make no state (pf's `state_icmp`): a
            // reply's would let through only what answers a reply.
            let own = match (r.keep, state_ask(p)) {
                (Keep::No, _) => None,
                (_, StateAsk::Own(f, flags))
                    if flags & ICMP_REPLY == 0 || !matches!(f.proto, 1 | 58) =>
                {
                    Some((f, flags))
                }
                _ => None,
            };
            let installed = match (r.keep, own) {
                (Keep::State, Some((f, flags))) => {
                    w.inserted = true;
                    states.insert(&f, r.num as u32, r.rule_id, flags, now)
                }
                (Keep::Limit(m, l), Some((f, flags))) => {
                    w.inserted = true;
                    states.insert_limited(&f, r.num as u32, r.rule_id, flags, m, l, now)
                }
                _ => Ok(()),
            };
            if let Err(StateError::Full | StateError::LimitReached) = installed {
                w.count = Some(i);
                return Step::Done(Verdict {
                    decision: Decision::Deny,
                    rule: r.num,
                    log: w.log || r.log,
                });
            }
        }
        let r = &self.rules[j];
        w.count = Some(j);
        if r.log {
            w.log = true;
            w.log_now = true;
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
pub(super) fn decision<P: Pkt>(act: Act, p: P, targ: u32) -> Option<Decision> {
    let arg = |a: Arg| match a {
        Arg::Num(x) => x,
        Arg::Tablearg => targ,
    };
    Some(match act {
        Act::Count | Act::CheckState | Act::Skipto(_) | Act::Call | Act::Return => return None,
        Act::Allow => Decision::Allow,
        Act::Deny => Decision::Deny,
        Act::Reject if p.v6() => Decision::Reject(RejectKind::Unreach6(1)),
        Act::Reject => Decision::Reject(RejectKind::Unreach(1)),
        Act::Unreach(c) => Decision::Reject(RejectKind::Unreach(c)),
        Act::Unreach6(c) => Decision::Reject(RejectKind::Unreach6(c)),
        // A reset answers TCP only; anything else is dropped quietly.
        Act::Reset if p.proto() == 6 => Decision::Reject(RejectKind::Rst),
        Act::Reset => Decision::Deny,
        Act::Pipe(a) => Decision::Pipe(arg(a)),
        Act::Queue(a) => Decision::Queue(arg(a)),
        Act::Fwd(i) => Decision::Fwd(i),
    })
}

#[inline]
pub(super) fn flow_of<P: Pkt>(p: P) -> FlowId {
    FlowId {
        proto: p.proto(),
        src: p.addr(false),
        dst: p.addr(true),
        sport: p.sport(),
        dport: p.dport(),
    }
}

/// What a packet's state lookup asks.
pub(super) enum StateAsk {
    /// The state of the packet's own flow (for ICMP, [`FlowId::icmp`]'s), with
    /// the lookup's flags.
    Own(FlowId, u8),
    /// An ICMP error's: the state of the flow it quotes, left unchanged.
    Quote(FlowId),
    /// An ICMP error whose quote is missing or not about its destination: none.
    Nothing,
}

/// The lookup a packet makes: its own flow, but for ICMP and ICMPv6 the query's
/// identifier or the quoted flow (one test of the protocol for the others).
#[inline]
pub(super) fn state_ask<P: Pkt>(p: P) -> StateAsk {
    let f = flow_of(p);
    if !matches!(f.proto, 1 | 58) {
        return StateAsk::Own(f, p.tcp_flags());
    }
    match icmp_ports(p) {
        Some((sport, dport, flags)) => StateAsk::Own(FlowId { sport, dport, ..f }, flags),
        // pf_icmp_state_lookup: an error is about a packet its destination sent.
        None => match p.icmp_quote() {
            Some(q) if q.src == f.dst && q.proto != 0 => StateAsk::Quote(q),
            _ => StateAsk::Nothing,
        },
    }
}

/// An ICMP or ICMPv6 packet's ports and lookup flags as its state has them
/// ([`FlowId::icmp`]); `None` for an error.
#[inline]
pub(super) fn icmp_ports<P: Pkt>(p: P) -> Option<(u16, u16, u8)> {
    if p.frag() {
        // A later fragment has no ICMP header: the address pair's state only.
        return Some((0, 0, 0));
    }
    crate::state::icmp_ports(p.proto(), p.icmp_type(), p.icmp_id())
}

/// Where a walk goes after a rule off the plain path.
enum Step {
    Next(usize),
    Done(Verdict),
}

/// A walk's state beyond the rule index, used only off the plain path.
pub(super) struct Walk {
    /// The rule the walk starts at (past a vector's rule-major run, or a skip
    /// taken in it).
    pub(super) start: usize,
    pub(super) log: bool,
    state_checked: bool,
    /// A state lookup `eval_vec` already made for this packet.
    pre: Option<Option<StateHit>>,
    /// A state install was tried.
    pub(super) inserted: bool,
    /// The rule `slow_rule` matched, for the walk to count (and whether it logs).
    count: Option<usize>,
    log_now: bool,
    sp: usize,
    stack: [u32; CALLSTACK],
    pub(super) budget: usize,
}

impl Walk {
    #[inline]
    pub(super) fn new(prog: &Program, pre: Option<Option<StateHit>>) -> Walk {
        Walk {
            start: 0,
            log: false,
            state_checked: false,
            pre,
            inserted: false,
            count: None,
            log_now: false,
            sp: 0,
            stack: [0; CALLSTACK],
            budget: Walk::budget(prog),
        }
    }

    /// The off-path rules a walk of `prog` may go through before it gives up.
    #[inline]
    pub(super) fn budget(prog: &Program) -> usize {
        prog.rules.len() * (CALLSTACK + 2) + 16
    }
}

const G: usize = VECTOR;

/// Where a walk gets its address-table lookups: `eval` makes each where its
/// instruction is ([`OnTheSpot`]), `eval_vec` takes them from the vector's
/// ([`VectorLookups`]). One walk, compiled once for each (VPP's two variants of a node
/// from one inline body): `eval`'s has no trace of the other.
pub(super) trait AddrLookups {
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

    /// The results of slot `slot` for (at least) the packets of `want`, if this
    /// kind of lookups keeps them (the rule-major run reads them as a column).
    fn column(
        &mut self,
        prog: &Program,
        slot: u8,
        dst: bool,
        table: u16,
        want: u64,
    ) -> Option<&[Option<u32>; G]>;
}

pub(super) struct OnTheSpot;

impl AddrLookups for OnTheSpot {
    const VECTOR: bool = false;
    #[inline(always)]
    fn addr_table(&mut self, _: &Program, _: u8, _: bool, _: u16) -> Option<Option<u32>> {
        None
    }
    #[inline(always)]
    fn column(&mut self, _: &Program, _: u8, _: bool, _: u16, _: u64) -> Option<&[Option<u32>; G]> {
        None
    }
}

/// A vector's address-table lookups: slot `s` holds, for the packets of `have[s]`,
/// the result of its (table, field). A walk that first needs a slot fills it for
/// its packet and the packets whose walks come after (`ahead`); the rule-major run
/// fills it for the packets that reach the instruction. A lookup is pure (the
/// program's tables are immutable), so only the work of packets that never use it
/// is wasted.
pub(super) struct VectorLookups<'a> {
    c: &'a Cols,
    /// The packet being walked.
    pub(super) at: usize,
    /// Packets whose walks come after `at`'s.
    pub(super) ahead: u64,
    have: [u64; SLOTS],
    res: [[Option<u32>; G]; SLOTS],
}

impl<'a> VectorLookups<'a> {
    pub(super) fn new(c: &'a Cols) -> Self {
        VectorLookups {
            c,
            at: 0,
            ahead: 0,
            have: [0; SLOTS],
            res: [[None; G]; SLOTS],
        }
    }

    /// Slot `s`'s lookups for the packets of `want` that lack them: a loop whose
    /// iterations depend on nothing but their own packet, so the CPU runs several
    /// lookups' cache misses at once.
    #[inline(never)]
    fn fill(&mut self, prog: &Program, s: usize, dst: bool, table: u16, want: u64) {
        let t = &prog.tables[table as usize];
        let mut m = want & !self.have[s];
        self.have[s] |= m;
        while m != 0 {
            let k = m.trailing_zeros() as usize;
            m &= m - 1;
            self.res[s][k] = t.lookup_addr(Col { c: self.c, k }.addr(dst));
        }
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
        let at = self.at % G;
        if self.have[s] & (1 << at) == 0 {
            self.fill(prog, s, dst, table, 1 << at | self.ahead);
        }
        Some(self.res[s][at])
    }

    #[inline(always)]
    fn column(
        &mut self,
        prog: &Program,
        slot: u8,
        dst: bool,
        table: u16,
        want: u64,
    ) -> Option<&[Option<u32>; G]> {
        let s = slot as usize;
        if s >= SLOTS {
            return None;
        }
        if want & !self.have[s] != 0 {
            self.fill(prog, s, dst, table, want);
        }
        Some(&self.res[s])
    }
}
