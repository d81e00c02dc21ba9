//! Rule-major evaluation of a vector: [`Program::eval_vec`].
//!
//! The walk (`eval`) is packet-major: one packet through the rules, then the next.
//! Over a vector, the leading run of rules whose outcome for a packet depends on
//! nothing but that packet can be taken the other way round: one rule over every
//! packet still undecided, as a loop down the column its instruction tests, leaving a
//! bit mask of the packets it matched; then the next rule over the packets left. A
//! rule costs its header once per vector instead of once per packet, and a test is a
//! loop over a column of 64 that the compiler turns into vector compares (the 2009
//! ipfw paper's per-rule and per-instruction costs, divided by the vector). The
//! packets the run leaves undecided are then walked one by one from where the run
//! left each ([`Program::walk`]), as `eval` would have walked them from there.
//!
//! Why the results are exactly `eval`'s, packet by packet:
//!
//! - A packet meets the same rules in the same order: the run goes through rules in
//!   program order, and a packet is in the mask of rule `i` exactly when its own walk
//!   would reach `i` (it is undecided, and no `skipto` it took jumps past `i`;
//!   a `skipto` parks the packet until its target's turn).
//! - Within a rule, a packet evaluates the same instructions: the mask walk of
//!   `F_NOT`/`F_OR` keeps, per packet, whether it is still alive and whether its
//!   or-block already matched, and tests an instruction only for the packets that
//!   would test it (`each` calls an opcode's own test for exactly those). The
//!   column loops test every packet, but only where the test is pure (a field
//!   compare): what is computed for a packet that would not test it is masked off.
//! - A run rule changes nothing another packet reads: it has no state lookup or
//!   install (`check-state`, `keep-state`, `limit`: the state table is shared, so
//!   packet order matters), no `prob` (the coin is one sequence per worker, drawn
//!   in packet order), no `call` (a per-packet stack) and no `skipto tablearg`. What
//!   it may change is the packet's own (its tags, its `log` flag) and the counters,
//!   which are sums (`packets`, `bytes`) and the same `now` (`last`): adding a
//!   rule's matches at once gives the same counters as adding them one by one.
//! - `tablearg` (a table's value for `pipe`, `queue`, `tag`) is the one result of a
//!   body beyond match or not: it is recomputed by the packet's own body walk for
//!   the packets that matched such a rule (pure, and it matches again).
//! - A packet handed on starts its walk at the rule it stands at, with its `log`
//!   flag, and with the walk's safety budget less the off-path rules the run took it
//!   through (that budget counts them), so its walk is the rest of `eval`'s.
//!
//! The run is every rule up to the first that breaks this (`Program::run`, from the
//! compiler): a ruleset of stateless rules is evaluated rule-major to the end, a
//! `check-state` first leaves everything to the walks.

use super::eval::{
    decision, flags_match, icmp_ports, state_ask, table_hit, AddrLookups, OnTheSpot, StateAsk,
    VectorLookups, Walk,
};
use super::vector::{low, Col, Cols, Pkt};
use super::*;
use crate::state::{FlowId, StateShards};

const G: usize = VECTOR;

/// The bits of `m`, low to high.
#[inline(always)]
fn bits(mut m: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if m == 0 {
            return None;
        }
        let k = m.trailing_zeros() as usize;
        m &= m - 1;
        Some(k)
    })
}

/// 64 bytes of 0 or 1 as a bit mask (bit `k` from byte `k`): each 8 bytes read as a
/// word and gathered by one multiply (the bytes' bits land in the top byte with
/// no carries between them).
#[inline(always)]
fn pack(b: &[u8; G]) -> u64 {
    let mut m = 0;
    for (j, w) in b.chunks_exact(8).enumerate() {
        let mut a = [0u8; 8];
        a.copy_from_slice(w);
        let x = u64::from_le_bytes(a);
        m |= (x.wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * j);
    }
    m
}

/// A test down a column: bit `k` is `f(col[k])`, for the whole (fixed) vector —
/// a loop the compiler vectorizes; entries past the vector's length are masked off
/// by the caller's live mask.
#[inline(always)]
fn mask<T: Copy>(col: &[T; G], f: impl Fn(T) -> bool) -> u64 {
    let mut b = [0u8; G];
    for (o, &x) in b.iter_mut().zip(col.iter()) {
        *o = f(x) as u8;
    }
    pack(&b)
}

/// Port ranges down a column.
#[inline(always)]
fn ranges_mask(col: &[u16; G], rs: &[Range]) -> u64 {
    let mut m = 0;
    for r in rs {
        if r.lo <= r.hi {
            let (lo, w) = (r.lo, r.hi - r.lo);
            m |= mask(col, |p| (p as u32).wrapping_sub(lo) <= w);
        }
    }
    m
}

/// Masks of the vector derived from its columns, made when a test first needs them.
#[derive(Default)]
struct Derived {
    ports: Option<u64>,
    tcp: Option<u64>,
    /// The AND and the OR of the vector's IPv4 source (`[0]`) and destination
    /// (`[1]`) address columns ([`Derived::span4`]).
    span4: [Option<(u32, u32)>; 2],
}

impl Derived {
    /// Packets with ports (TCP, UDP, SCTP, not a later fragment).
    #[inline(always)]
    fn ports(&mut self, c: &Cols) -> u64 {
        *self
            .ports
            .get_or_insert_with(|| !c.frag & mask(&c.proto, |p| matches!(p, 6 | 17 | 132)))
    }

    /// TCP packets (not a later fragment).
    #[inline(always)]
    fn tcp(&mut self, c: &Cols) -> u64 {
        *self
            .tcp
            .get_or_insert_with(|| !c.frag & mask(&c.proto, |p| p == 6))
    }

    /// The bits every packet's IPv4 address (`dst` or source) has, and the bits some
    /// packet's has, over the vector's entries (an IPv6 packet's stale entry among
    /// them only widens the span): no packet `a & mk == x` holds for if `x` has a bit
    /// of `mk` that none has, or lacks one that all have.
    #[inline(always)]
    fn span4(&mut self, c: &Cols, dst: bool) -> (u32, u32) {
        *self.span4[dst as usize].get_or_insert_with(|| {
            let col = if dst { &c.dst4[..c.n] } else { &c.src4[..c.n] };
            col.iter().fold((!0, 0), |(and, or), &a| (and & a, or | a))
        })
    }
}

/// No address of the span `(and, or)` ([`Derived::span4`]) is `x` under `mk`.
#[inline(always)]
fn outside_span(x: u32, mk: u32, (and, or): (u32, u32)) -> bool {
    x & mk & !or != 0 || !x & mk & and != 0
}

/// What the run hands to the walks: the packets it left, where each stands, and
/// what its walk must carry on with.
struct Handoff {
    /// Packets still to walk.
    left: u64,
    /// The rule each stands at.
    start: [u32; G],
    /// Packets that met a `log` rule.
    log: u64,
    /// Off-path rules (`slow != 0`) each went through, which the walk's budget counts.
    visits: [u32; G],
}

impl Program {
    /// [`Program::eval_batch`] for a vector already in columns: each packet's verdict
    /// in the vector ([`PacketVec::verdict`], [`PacketVec::allowed`]) and its tags as
    /// the rules left them, with the same verdicts and effects as `eval` of each
    /// packet in turn. Rule-major over the leading run of rules that allows it (see
    /// the module), then a walk for each packet it left undecided; when every walk
    /// meets a stateful rule first (`check-state` at the top), their state lookups
    /// are made together before the walks, their cache misses overlapped
    /// ([`StateShards::lookup_batch`]); address-table lookups are made for the
    /// vector at once as well. Allocates nothing (unless `counters` must first move
    /// to this program, see [`Counters`]).
    #[allow(clippy::too_many_arguments)]
    pub fn eval_vec<E: Env + ?Sized, C: CounterSink>(
        &self,
        v: &mut PacketVec,
        env: &E,
        states: &StateShards,
        mut counters: C,
        now: u64,
        rng: &mut u64,
    ) {
        let mut t = counters.tally(self);
        self.eval_vec_tally(v, env, states, &mut t, now, rng);
    }

    /// What [`Program::needs`] says of this program: the fields beyond the hot ones
    /// that its rules read.
    pub fn needs(&self) -> Needs {
        self.needs
    }

    pub(super) fn eval_vec_tally<E: Env + ?Sized, T: Tally>(
        &self,
        v: &mut PacketVec,
        env: &E,
        states: &StateShards,
        t: &mut T,
        now: u64,
        rng: &mut u64,
    ) {
        v.allowed = 0;
        if v.c.n == 0 {
            return;
        }
        if self.needs.tags {
            v.settle_tags();
        }
        if self.has_slots {
            let PacketVec {
                c,
                tags,
                verdicts,
                allowed,
                ..
            } = v;
            let mut lk = VectorLookups::new(c);
            self.eval_cols(
                c, tags, verdicts, allowed, env, states, t, now, rng, &mut lk,
            );
        } else {
            let PacketVec {
                c,
                tags,
                verdicts,
                allowed,
                ..
            } = v;
            self.eval_cols(
                c,
                tags,
                verdicts,
                allowed,
                env,
                states,
                t,
                now,
                rng,
                &mut OnTheSpot,
            );
        }
    }

    /// The run, then the walks.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn eval_cols<E: Env + ?Sized, T: Tally, L: AddrLookups + Ahead>(
        &self,
        c: &Cols,
        tags: &mut [Tags; G],
        verdicts: &mut [Verdict; G],
        allowed: &mut u64,
        env: &E,
        states: &StateShards,
        t: &mut T,
        now: u64,
        rng: &mut u64,
        lk: &mut L,
    ) {
        let mut h = Handoff {
            left: 0,
            start: [0; G],
            log: 0,
            visits: [0; G],
        };
        {
            let mut cs = t.cells(self.rules.len());
            self.major(c, tags, verdicts, allowed, env, &mut cs, now, lk, &mut h);
        }
        if h.left == 0 {
            return;
        }
        // State lookups for the walks that make one before anything else.
        let mut hits = [None; G];
        let mut pre = 0u64;
        for k in bits(h.left) {
            let s = h.start[k];
            pre |= ((self.count_from <= s && s <= self.state_first) as u64) << k;
        }
        if pre != 0 {
            pre = self.lookup_states(c, pre, states, now, &mut hits);
        }
        let mut inserted = false;
        for k in bits(h.left) {
            let p = if pre >> k & 1 == 0 {
                None
            } else {
                match hits[k] {
                    // An earlier walk of the vector installed a state meanwhile: the
                    // one change this worker makes that could turn a miss into a hit.
                    None if inserted => None,
                    hit => Some(hit),
                }
            };
            // The common case of a stateful ruleset, without a walk: the packet's
            // walk would start at the first stateful rule, whose lookup found its
            // state, and the state's rule ends the walk by a plain action (no tag,
            // no jump). What `slow_rule` and the walk would do: count that rule,
            // log if it logs, decide by its action.
            if let (Some(Some(hit)), true) = (p, h.start[k] == self.state_first) {
                if let Some(j) = self.index_of_id(hit.rule_id) {
                    let r = &self.rules[j];
                    if let (Some(decision), None, true) = (
                        decision(r.act, Col { c, k }, 0),
                        r.tag,
                        (h.visits[k] as usize) < Walk::budget(self),
                    ) {
                        let mut cs = t.cells(self.rules.len());
                        cs.hit(j, c.len[k], now);
                        let log = h.log >> k & 1 != 0 || r.log;
                        if r.log {
                            cs.log();
                        }
                        verdicts[k] = Verdict {
                            decision,
                            rule: r.num,
                            log,
                        };
                        *allowed |= ((decision == Decision::Allow) as u64) << k;
                        continue;
                    }
                }
            }
            let mut w = Walk::new(self, p);
            w.start = h.start[k] as usize;
            w.log = h.log >> k & 1 != 0;
            w.budget -= h.visits[k] as usize;
            lk.ahead(k, h.left & !low(k + 1));
            self.walk(
                Col { c, k },
                &mut tags[k],
                env,
                states,
                t,
                now,
                rng,
                &mut w,
                lk,
                &mut verdicts[k],
            );
            *allowed |= ((verdicts[k].decision == Decision::Allow) as u64) << k;
            inserted |= w.inserted;
        }
    }

    /// The state lookups of the packets of `pre`, together; returns the packets
    /// looked up: not ICMP errors, whose walks look up the flow they quote
    /// without changing its state ([`StateShards::peek`]).
    #[inline(never)]
    fn lookup_states(
        &self,
        c: &Cols,
        mut pre: u64,
        states: &StateShards,
        now: u64,
        hits: &mut [Option<crate::state::StateHit>; G],
    ) -> u64 {
        // IPv4 flows straight from the columns: no `FlowId` built, no array of
        // them to fill first; ICMP's key and flags as `state_ask` makes them.
        if pre & (c.v6 | c.v6d) == 0 {
            let mut at = [0u8; G];
            let mut m = 0;
            for k in bits(pre) {
                // ICMPv6 too, as `state_ask` has it (an IPv4 packet of protocol
                // 58 is no real one, but must be looked up the same way).
                if matches!(c.proto[k], 1 | 58) && icmp_ports(Col { c, k }).is_none() {
                    pre &= !(1 << k);
                    continue;
                }
                at[m] = k as u8;
                m += 1;
            }
            states.lookup_batch_v4(
                m,
                |j| {
                    let k = at[j] as usize;
                    let p = Col { c, k };
                    let (sp, dp, _) = match p.proto() {
                        1 | 58 => icmp_ports(p).unwrap_or_default(),
                        _ => (p.sport(), p.dport(), 0),
                    };
                    (c.src4[k], c.dst4[k], sp, dp, p.proto())
                },
                |j| {
                    let p = Col {
                        c,
                        k: at[j] as usize,
                    };
                    match p.proto() {
                        1 | 58 => icmp_ports(p).unwrap_or_default().2,
                        _ => p.tcp_flags(),
                    }
                },
                now,
                |j, h| hits[at[j] as usize] = h,
            );
            return pre;
        }
        let blank = FlowId {
            proto: 0,
            src: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            dst: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            sport: 0,
            dport: 0,
        };
        let mut flows = [blank; G];
        let mut flags = [0u8; G];
        let mut m = 0;
        for k in bits(pre) {
            match state_ask(Col { c, k }) {
                StateAsk::Own(f, fl) => {
                    flows[m] = f;
                    flags[m] = fl;
                    m += 1;
                }
                _ => pre &= !(1 << k),
            }
        }
        let mut got = [None; G];
        states.lookup_batch(&flows[..m], &flags[..m], now, &mut got[..m]);
        for (j, k) in bits(pre).enumerate() {
            hits[k] = got[j];
        }
        pre
    }

    /// The leading run, rule-major (see the module). Decided packets get their
    /// verdicts; the others are left in `h`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn major<E: Env + ?Sized, C: Cells, L: AddrLookups>(
        &self,
        c: &Cols,
        tags: &mut [Tags; G],
        verdicts: &mut [Verdict; G],
        allowed: &mut u64,
        env: &E,
        cs: &mut C,
        now: u64,
        lk: &mut L,
        h: &mut Handoff,
    ) {
        let run = self.run as usize;
        let all = low(c.n);
        let mut live = all;
        // Packets a skipto parked, and the next rule one of them waits for.
        let mut parked = 0u64;
        let mut next = u32::MAX;
        let mut d = Derived::default();
        let mut i = 0;
        while i < run {
            if i as u32 == next {
                next = u32::MAX;
                for k in bits(parked) {
                    if h.start[k] == i as u32 {
                        live |= 1 << k;
                        parked &= !(1 << k);
                    } else {
                        next = next.min(h.start[k]);
                    }
                }
            }
            if live == 0 {
                if next as usize >= run {
                    break;
                }
                i = next as usize;
                continue;
            }
            let r = &self.rules[i];
            if r.slow != 0 {
                for k in bits(live) {
                    h.visits[k] += 1;
                }
            }
            let m = self.body_mask(r, c, tags, live, env, lk, &mut d);
            if m != 0 {
                let cnt = m.count_ones();
                let bytes = if m == all {
                    c.len.iter().take(c.n).map(|&l| l as u64).sum()
                } else {
                    bits(m).map(|k| c.len[k] as u64).sum()
                };
                cs.hit_n(i, cnt, bytes, now);
                if r.log {
                    h.log |= m;
                    cs.log_n(cnt);
                }
                match r.act {
                    // `return` with nothing to return to goes on, as `count` does.
                    Act::Count | Act::Return => {
                        if r.tag.is_some() {
                            self.major_each(r, c, tags, verdicts, allowed, env, m, h.log);
                        }
                    }
                    Act::Skipto(_) => {
                        if r.tag.is_some() {
                            self.major_each(r, c, tags, verdicts, allowed, env, m, h.log);
                        }
                        live &= !m;
                        parked |= m;
                        for k in bits(m) {
                            h.start[k] = r.target;
                        }
                        next = next.min(r.target);
                    }
                    _ if r.tag.is_none() && !uses_targ(r.act) => {
                        live &= !m;
                        self.decide(r, c, verdicts, allowed, m, h.log);
                    }
                    _ => {
                        live &= !m;
                        self.major_each(r, c, tags, verdicts, allowed, env, m, h.log);
                    }
                }
            }
            i += 1;
        }
        for k in bits(live) {
            h.start[k] = run as u32;
        }
        h.left = live | parked;
    }

    /// Verdicts for the packets of `m`, which rule `r` (a final action, no
    /// `tablearg`) decided.
    #[inline(always)]
    fn decide(
        &self,
        r: &RuleHdr,
        c: &Cols,
        verdicts: &mut [Verdict; G],
        allowed: &mut u64,
        m: u64,
        log: u64,
    ) {
        // Only `reject` and `reset` look at the packet (its family, its protocol);
        // any other action decides alike for all: one verdict, worked out for the
        // first packet and stored down the vector (the log bit apart).
        let per_packet = matches!(r.act, Act::Reject | Act::Reset);
        let first = Col {
            c,
            k: m.trailing_zeros() as usize,
        };
        let same = decision(r.act, first, 0).unwrap_or(Decision::Deny);
        for k in bits(m) {
            let decision = if per_packet {
                decision(r.act, Col { c, k }, 0).unwrap_or(Decision::Deny)
            } else {
                same
            };
            verdicts[k] = Verdict {
                decision,
                rule: r.num,
                log: log >> k & 1 != 0,
            };
        }
        if matches!(r.act, Act::Allow) {
            *allowed |= m;
        }
    }

    /// A matched rule's effects packet by packet, for a rule with a tag or a
    /// `tablearg` (recomputed by the packet's own body walk, before its tags
    /// change, as the walk has it): the tag, then the verdict if the action is final.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn major_each<E: Env + ?Sized>(
        &self,
        r: &RuleHdr,
        c: &Cols,
        tags: &mut [Tags; G],
        verdicts: &mut [Verdict; G],
        allowed: &mut u64,
        env: &E,
        m: u64,
        log: u64,
    ) {
        let wants_targ = uses_targ(r.act) || matches!(r.tag, Some((_, Arg::Tablearg)));
        for k in bits(m) {
            let p = Col { c, k };
            let mut targ = 0;
            if wants_targ {
                let hit = self.body_matches(r, p, &tags[k], env, &mut targ, &mut OnTheSpot);
                debug_assert!(hit, "a rule-major match that the walk does not repeat");
            }
            if let Some((untag, a)) = r.tag {
                let t = match a {
                    Arg::Num(t) => t,
                    Arg::Tablearg => targ,
                } as u16;
                if untag {
                    tags[k].remove(t);
                } else {
                    tags[k].add(t);
                }
            }
            if let Some(decision) = decision(r.act, p, targ) {
                verdicts[k] = Verdict {
                    decision,
                    rule: r.num,
                    log: log >> k & 1 != 0,
                };
                *allowed |= ((decision == Decision::Allow) as u64) << k;
            }
        }
    }

    /// Rule `r`'s body over the packets of `live`: the mask of those it matches.
    /// `F_NOT`/`F_OR` as the walk has them, per packet: `alive` (no conjunct failed
    /// yet) and `done` (its current or-block already matched, so the block's other
    /// members are passed over, untested).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn body_mask<E: Env + ?Sized, L: AddrLookups>(
        &self,
        r: &RuleHdr,
        c: &Cols,
        tags: &[Tags; G],
        live: u64,
        env: &E,
        lk: &mut L,
        d: &mut Derived,
    ) -> u64 {
        let insns = &self.insns[r.insns.start as usize..(r.insns.start + r.insns.len) as usize];
        let mut alive = live;
        if !r.has_or {
            for insn in insns {
                let m = self.insn_mask(insn.op, c, tags, alive, env, lk, d);
                alive &= if insn.not { !m } else { m };
                if alive == 0 {
                    return 0;
                }
            }
            return alive;
        }
        let mut done = 0u64;
        for insn in insns {
            let e = alive & !done;
            let m = if e == 0 {
                0
            } else {
                let m = self.insn_mask(insn.op, c, tags, e, env, lk, d);
                (if insn.not { !m } else { m }) & e
            };
            if insn.or {
                done |= m;
            } else {
                alive &= !(e & !m);
                done = 0;
                if alive == 0 {
                    return 0;
                }
            }
        }
        alive
    }

    /// An instruction's test (before `not`) for the packets of `e`: bits outside `e`
    /// are undefined. Field compares run down their column for the whole vector;
    /// the rest, for the packets of `e` only, by the walk's own test.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn insn_mask<E: Env + ?Sized, L: AddrLookups>(
        &self,
        op: Op,
        c: &Cols,
        tags: &[Tags; G],
        e: u64,
        env: &E,
        lk: &mut L,
        d: &mut Derived,
    ) -> u64 {
        match op {
            Op::Any => !0,
            Op::Proto(n) => mask(&c.proto, |x| x == n),
            Op::Ip4 => !c.v6,
            Op::Ip6 => c.v6,
            Op::Addrs { dst, span } => self.addrs_mask(c, dst, span, e, d),
            Op::Ports { dst, span } => {
                let col = if dst { &c.dport } else { &c.sport };
                d.ports(c) & ranges_mask(col, self.ranges(span))
            }
            Op::In => !c.out,
            Op::Out => c.out,
            // RFC 9293 §3.1: a connection request carries SYN without ACK.
            Op::Setup => d.tcp(c) & mask(&c.tcp_flags, |f| f & 0x12 == 0x02),
            Op::Established => d.tcp(c) & mask(&c.tcp_flags, |f| f & 0x14 != 0),
            Op::TcpFlags(f) => d.tcp(c) & mask(&c.tcp_flags, |h| flags_match(h, f)),
            Op::Frag => c.frag,
            Op::Layer2 => c.layer2,
            Op::AddrTable {
                dst,
                table,
                value,
                slot,
            } => match lk.column(self, slot, dst, table, e) {
                Some(col) => {
                    let mut m = 0;
                    for k in bits(e) {
                        m |= (table_hit(col[k], value, &mut 0) as u64) << k;
                    }
                    m
                }
                None => self.each(op, c, tags, e, env),
            },
            _ => self.each(op, c, tags, e, env),
        }
    }

    /// An address list down the columns: IPv4 entries over the `u32` column (IPv6
    /// packets masked off; an entry no address of the vector's span can be, not at
    /// all: a rule for traffic the vector has none of costs a compare, not a
    /// column), IPv6 entries over the IPv6 packets of `e` only.
    #[inline(always)]
    fn addrs_mask(&self, c: &Cols, dst: bool, span: Span, e: u64, d: &mut Derived) -> u64 {
        let (a4, a6, fam) = if dst {
            (&c.dst4, &c.dst6, c.v6d)
        } else {
            (&c.src4, &c.src6, c.v6)
        };
        let mut m = 0;
        for &(x, mk, f6) in &self.addrs[span.start as usize..(span.start + span.len) as usize] {
            if f6 {
                for k in bits(e & fam & !m) {
                    m |= ((a6[k] & mk == x) as u64) << k;
                }
            } else {
                // An IPv4 entry's bits are the low 32 (`addr_bits`).
                let (x, mk) = (x as u32, mk as u32);
                if outside_span(x, mk, d.span4(c, dst)) {
                    continue;
                }
                m |= mask(a4, |a| a & mk == x) & !fam;
            }
        }
        m
    }

    /// An instruction's test packet by packet, for the packets of `e` (the walk's
    /// test: interfaces, tables, `me`, the rarer fields).
    #[inline(never)]
    fn each<E: Env + ?Sized>(&self, op: Op, c: &Cols, tags: &[Tags; G], e: u64, env: &E) -> u64 {
        let mut m = 0;
        for k in bits(e) {
            let mut targ = 0;
            m |= (self.test(op, Col { c, k }, &tags[k], env, &mut targ) as u64) << k;
        }
        m
    }
}

/// The action takes the body's `tablearg`.
#[inline(always)]
fn uses_targ(act: Act) -> bool {
    matches!(
        act,
        Act::Pipe(Arg::Tablearg) | Act::Queue(Arg::Tablearg) | Act::Skipto(Arg::Tablearg)
    )
}

/// Lookups that learn which walks are still to come (to fill slots for them too).
pub(super) trait Ahead {
    fn ahead(&mut self, at: usize, ahead: u64);
}

impl Ahead for OnTheSpot {
    #[inline(always)]
    fn ahead(&mut self, _: usize, _: u64) {}
}

impl Ahead for VectorLookups<'_> {
    #[inline(always)]
    fn ahead(&mut self, at: usize, ahead: u64) {
        self.at = at;
        self.ahead = ahead;
    }
}

#[cfg(test)]
mod tests {
    use crate::{Counters, Env, PacketInfo, PacketVec, Ruleset};
    use std::net::IpAddr;

    struct Host;
    impl Env for Host {
        fn is_local(&self, _a: IpAddr) -> bool {
            false
        }
        fn verrevpath(&self, _src: IpAddr, _rcvif: u32) -> bool {
            true
        }
        fn antispoof(&self, _src: IpAddr, _rcvif: u32) -> bool {
            true
        }
    }

    /// An address rule the span of a vector rules out is passed over, one it does
    /// not is tested: either way each packet's verdict and every rule's counters
    /// are `eval`'s, IPv6 packets (whose IPv4 entries are stale) among them.
    #[test]
    fn address_rules_outside_the_vectors_span_decide_as_eval_does() {
        let rules = "add 100 deny ip from 192.0.2.1 to any\n\
                     add 110 deny ip from 198.18.3.0/24 to any\n\
                     add 120 deny ip from any to 198.19.0.0/16\n\
                     add 130 deny ip from 2001:2::/48 to any\n\
                     add 140 deny ip from 198.18.1.1,10.0.0.0/8 to any\n\
                     add 150 count ip from not 198.18.0.0/15 to any\n\
                     add 200 allow ip from any to any\n";
        let sets: [&[(&str, &str)]; 4] = [
            // All in 198.18/15: rule 100's entry is outside the span.
            &[("198.18.2.1", "198.18.0.1"), ("198.18.2.9", "198.18.0.7")],
            // One matches 110, one 120, one 140's second entry.
            &[
                ("198.18.2.1", "198.18.0.1"),
                ("198.18.3.77", "198.18.0.1"),
                ("198.18.2.1", "198.19.4.4"),
                ("10.1.2.3", "198.18.0.1"),
            ],
            // IPv6 beside IPv4, a stale IPv4 entry under each.
            &[
                ("2001:2::1", "2001:2::2"),
                ("198.18.2.1", "198.18.0.1"),
                ("2001:db8::1", "2001:2::2"),
            ],
            // The span's bits cover 198.18.3.x (2 | 1) but no packet is one.
            &[("198.18.2.1", "198.18.0.1"), ("198.18.1.1", "198.18.0.1")],
        ];
        for set in sets {
            let mut rs = Ruleset::default();
            rs.load(rules).unwrap();
            let prog = rs.program().unwrap();
            let states = rs.states().clone();
            let (mut one, mut vec_ctr) = (Counters::new(), Counters::new());
            let (mut r1, mut r2) = (1u64, 1u64);
            let mut v = PacketVec::new();
            let mut want = Vec::new();
            for (i, (s, d)) in set.iter().enumerate() {
                let mut p = PacketInfo::new(s.parse().unwrap(), d.parse().unwrap(), 17);
                p.len = 60 + i as u32;
                v.push(&p);
                let got = prog.eval(&mut p, &Host, &states, &mut one, 5, &mut r1);
                want.push((got.decision, got.rule));
            }
            prog.eval_vec(&mut v, &Host, &states, &mut vec_ctr, 5, &mut r2);
            let got: Vec<_> = (0..set.len())
                .map(|k| (v.verdict(k).decision, v.verdict(k).rule))
                .collect();
            assert_eq!(got, want, "{set:?}");
            for id in prog.rule_ids() {
                assert_eq!(vec_ctr.get(id), one.get(id), "{set:?}: rule id {id}");
            }
        }
    }
}
