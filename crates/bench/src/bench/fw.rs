//! `mpstack bench fw`: the ipfw evaluator (crate `fw`) on the test matrix of the 2009
//! ipfw dispatch-table paper (GSoC 2009), beside a naive interpreter measured in the
//! same run, plus the throughput cases (issue 6):
//!
//! - `matrix`: A — 1, 10, 100 rules `count icmp from any to any` (one microinstruction
//!   each: ipfw's `count proto icmp`); B — 10, 100 rules `count icmp from any to any ip4
//!   in not frag not layer2` (five, all true for the traffic, as the paper's `proto
//!   icmp not proto tcp not proto udp ...`: our language has no `proto` option). ICMP
//!   packets, so every count rule's body runs and the packet walks all N rules and then
//!   the default rule. A least-squares fit of ns/packet over (rules, microinstructions)
//!   gives the entry cost (intercept), the cost of a rule header and of a
//!   microinstruction, beside the paper's 100 / 50 / 12 ns (2009 hardware).
//! - `allow`: Mpps through one `allow ip from any to any` (eval, eval_batch, 2 threads).
//! - `rfc2544`: RFC 2544 §11.4 — 25 filters, the first 24 not matching the traffic.
//! - `table`: `allow ip from table(t) to any` with 0, 1 000 and 100 000 host entries
//!   (198.18.0.0/15), hits and misses.
//! - `state`: `check-state; allow udp from any to any keep-state` with 1 000 000 states,
//!   packets of existing flows in random order (eval, and eval_batch in vectors of 64,
//!   whose verdicts must equal eval's).
//!
//! The naive baseline is an AST walk: each rule a `Vec` of boxed condition trees
//! (`Cond`), evaluated by collecting every condition's result into a freshly allocated
//! `Vec<bool>` per rule (no short cut), tables as `HashMap<String, HashMap<IpAddr,
//! u32>>` looked up by name for each packet, states in a `HashMap` keyed by the
//! ordered 5-tuple. It is built from the same parsed rules (`Ruleset::rules`).
//!
//! Each timing is the best pass over a pre-built packet array within `--seconds`
//! (passes of a few ms; the machines are shared and noisy), in ns per packet and TSC
//! cycles (`dev::cpu::rdtsc`), on a thread pinned to the first allowed CPU.

use crate::BenchArgs;
use fw::state::StateConfig;
use fw::{Counters, Decision, Env, PacketInfo, Program, Ruleset, RulesetConfig, TableType};
use std::collections::HashMap;
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod naive;
mod report;
use naive::Naive;
use report::{plot, print_report};

/// The paper's per-phase costs (ns): entry, rule header, microinstruction.
const PAPER: (f64, f64, f64) = (100.0, 50.0, 12.0);
const RULE_A: &str = "count icmp from any to any";
const RULE_B: &str = "count icmp from any to any ip4 in not frag not layer2";
const GROUPS: [&str; 5] = ["matrix", "allow", "rfc2544", "table", "state"];

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

/// Sizes: the real run's, or tiny ones for the unit test.
#[derive(Clone)]
struct Params {
    secs: f64,
    /// Packets in each pre-built array.
    pkts: usize,
    matrix_n: [usize; 3],
    table_big: usize,
    table_small: usize,
    states: usize,
    /// Interleaved rounds, each `secs` per figure.
    rounds: u32,
    /// The CPUs this process may run on, read before the measuring thread pins
    /// itself to the first (after that, its own affinity names only that one).
    cpus: Vec<usize>,
}

impl Params {
    fn full(secs: f64, rounds: u32) -> Self {
        Params {
            secs,
            rounds,
            pkts: 4096,
            matrix_n: [1, 10, 100],
            table_big: 100_000,
            table_small: 1_000,
            states: 1_000_000,
            cpus: dev::cpu::allowed_cpus().unwrap_or_default(),
        }
    }
}

fn v4(i: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 18, 0, 0)) + i))
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

// ---- a case: a ruleset, its packets, both evaluators -------------------------------

struct Case {
    group: &'static str,
    name: String,
    rule_text: String,
    rs: Ruleset,
    prog: Arc<Program>,
    naive: Naive,
    pkts: Vec<PacketInfo>,
    /// Rules in the ruleset (without the default rule) and microinstructions.
    rules: usize,
    insns: usize,
}

fn build(
    group: &'static str,
    name: String,
    cfg: RulesetConfig,
    text: &str,
    tables: &[(&str, Vec<IpAddr>)],
    pkts: Vec<PacketInfo>,
) -> Result<Case, String> {
    let mut rs = Ruleset::new(cfg);
    let mut naive_tables = HashMap::new();
    for (t, addrs) in tables {
        rs.table_create(t, TableType::Addr)
            .map_err(|e| e.to_string())?;
        let mut m = HashMap::new();
        for (k, a) in addrs.iter().enumerate() {
            rs.table_add(t, &a.to_string(), k as u32)
                .map_err(|e| e.to_string())?;
            m.insert(*a, k as u32);
        }
        naive_tables.insert(t.to_string(), m);
    }
    rs.load(text).map_err(|e| format!("{name}: {e}"))?;
    let prog = rs.program().map_err(|e| e.to_string())?;
    let naive = Naive::new(&rs, naive_tables)?;
    let rules = prog.len() - 1;
    let insns = prog.insn_count();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| l.trim_start_matches("add "))
        .collect();
    let rule_text = match lines.as_slice() {
        [one] => one.to_string(),
        [first, ..] if lines.iter().all(|l| l == first) => {
            format!("{} x \"{first}\"", lines.len())
        }
        [first, .., last] if lines.len() > 3 => {
            format!("\"{first}\" ... \"{last}\" ({} rules)", lines.len())
        }
        _ => lines.join("; "),
    };
    Ok(Case {
        group,
        name,
        rule_text,
        rs,
        prog,
        naive,
        pkts,
        rules,
        insns,
    })
}

fn icmp_pkts(n: usize) -> Vec<PacketInfo> {
    (0..n as u32)
        .map(|i| {
            let mut p = PacketInfo::new(v4(i % 65536), v4(65536 + (i * 7) % 65536), 1);
            p.icmp_type = 8;
            p.len = 64;
            p
        })
        .collect()
}

fn udp(src: IpAddr, sport: u16, dst: IpAddr, dport: u16) -> PacketInfo {
    let mut p = PacketInfo::new(src, dst, 17);
    p.sport = sport;
    p.dport = dport;
    p.len = 64;
    p
}

fn udp_pkts(n: usize) -> Vec<PacketInfo> {
    (0..n as u32)
        .map(|i| {
            udp(
                v4(i % 65536),
                1024 + (i % 5000) as u16,
                v4(65536 + 1 + i % 250),
                7,
            )
        })
        .collect()
}

fn cases(group: &str, p: &Params) -> Result<Vec<Case>, String> {
    let dflt = RulesetConfig::default();
    let mut out = Vec::new();
    match group {
        "matrix" => {
            for (tag, rule, ns) in [
                ("A", RULE_A, &p.matrix_n[..]),
                ("B", RULE_B, &p.matrix_n[1..]),
            ] {
                for &n in ns {
                    let text = format!("add {rule}\n").repeat(n);
                    out.push(build(
                        "matrix",
                        format!("{tag}{n}"),
                        dflt,
                        &text,
                        &[],
                        icmp_pkts(p.pkts),
                    )?);
                }
            }
        }
        "allow" => out.push(build(
            "allow",
            "allow-1rule".into(),
            dflt,
            "add allow ip from any to any",
            &[],
            udp_pkts(p.pkts),
        )?),
        "rfc2544" => {
            let mut text = String::new();
            for k in 1..=24 {
                text.push_str(&format!(
                    "add deny udp from 198.19.200.{k} to 198.19.201.{k} {}\n",
                    1000 + k
                ));
            }
            text.push_str("add allow udp from 198.18.0.0/16 to 198.19.0.0/24 7\n");
            out.push(build(
                "rfc2544",
                "rfc2544-25".into(),
                dflt,
                &text,
                &[],
                udp_pkts(p.pkts),
            )?);
        }
        "table" => {
            let text = "add allow ip from table(t) to any";
            let mut rng = 0x1234_5678_9abc_def1u64;
            // Entries are the first `size` hosts of 198.18.0.0/15; misses come from
            // its last 8192 addresses, which no table holds.
            for (size, hit) in [
                (0, false),
                (p.table_small, true),
                (p.table_big, true),
                (p.table_big, false),
            ] {
                let addrs: Vec<IpAddr> = (0..size as u32).map(v4).collect();
                // Enough packets that the big table's entries are not all cached.
                let pkts = (0..p.pkts.max(p.table_big.min(1 << 16)))
                    .map(|i| {
                        let r = xorshift(&mut rng);
                        let src = if hit {
                            v4((r % size as u64) as u32)
                        } else {
                            v4(131072 - 8192 + (r % 8192) as u32)
                        };
                        udp(src, 1024 + (i % 5000) as u16, v4(131071), 7)
                    })
                    .collect();
                out.push(build(
                    "table",
                    format!("table-{size}-{}", if hit { "hit" } else { "miss" }),
                    dflt,
                    text,
                    &[("t", addrs)],
                    pkts,
                )?);
            }
        }
        "state" => {
            let mut cfg = dflt;
            cfg.state_shards = 16;
            cfg.states = StateConfig {
                // Shards fill at their share: room above the states made.
                max_states: p.states + p.states / 4 + 1024,
                ..StateConfig::default()
            };
            let mut rng = 0x0bad_cafe_f00d_u64;
            // Random flows of the million, more than the caches hold.
            let pkts = (0..p.states.clamp(p.pkts, 1 << 18))
                .map(|_| state_flow((xorshift(&mut rng) % p.states as u64) as u32))
                .collect();
            out.push(build(
                "state",
                format!("keep-state-{}", p.states),
                cfg,
                "add check-state\nadd allow udp from any to any keep-state\n",
                &[],
                pkts,
            )?);
        }
        _ => return Err(format!("bench fw: unknown case group '{group}'")),
    }
    Ok(out)
}

/// Flow `i` of the keep-state case: 65536 sources of 198.18.0.0/16 times source ports.
fn state_flow(i: u32) -> PacketInfo {
    udp(v4(i & 0xffff), 10000 + (i >> 16) as u16, v4(65536 + 1), 53)
}

/// Runs `pkts` once through ours and the naive interpreter (from their current
/// states) and compares verdicts and then every rule's packet counter; then, once
/// more, ours by `eval_batch` in vectors of 64 against ours by `eval`.
fn agree(c: &mut Case, ours: &mut Counters) -> Result<(), String> {
    let states = c.rs.states().clone();
    let mut rng = 1u64;
    let mut verdicts = Vec::with_capacity(c.pkts.len());
    for (k, p) in c.pkts.iter().enumerate() {
        let mut q = *p;
        let v = c.prog.eval(&mut q, &Host, &states, &mut *ours, 1, &mut rng);
        verdicts.push(v);
        let (allow, num) = c.naive.eval(p);
        let ours_allow = v.decision == Decision::Allow;
        if (ours_allow, v.rule) != (allow, num) {
            return Err(format!(
                "{}: packet {k}: ours {:?} by {}, naive {} by {num}",
                c.name,
                v.decision,
                v.rule,
                if allow { "allow" } else { "deny" }
            ));
        }
    }
    compare_counters(c, ours)?;
    let mut pkts = c.pkts.clone();
    let mut out = verdicts.clone();
    for (pc, oc) in pkts.chunks_mut(64).zip(out.chunks_mut(64)) {
        c.prog
            .eval_batch(pc, oc, &Host, &states, &mut Counters::new(), 1, &mut rng);
    }
    match out.iter().zip(&verdicts).position(|(b, e)| b != e) {
        Some(k) => Err(format!(
            "{}: packet {k}: eval_batch {:?}, eval {:?}",
            c.name, out[k], verdicts[k]
        )),
        None => Ok(()),
    }
}

fn compare_counters(c: &Case, ours: &Counters) -> Result<(), String> {
    let ids: Vec<u32> = c.prog.rule_ids().collect();
    for (i, id) in ids.iter().enumerate() {
        let o = ours.get(*id).packets;
        let n = c.naive.counts[i];
        // The default rule has id 0 in the program; its count is the naive's last.
        if o != n {
            return Err(format!(
                "{}: rule index {i}: ours counted {o}, naive {n}",
                c.name
            ));
        }
    }
    Ok(())
}

/// Makes the keep-state case's states: every flow once through both evaluators.
fn make_states(c: &mut Case, n: usize, ours: &mut Counters) -> Result<(), String> {
    let states = c.rs.states().clone();
    let mut rng = 1u64;
    for i in 0..n as u32 {
        let mut p = state_flow(i);
        let v = c.prog.eval(&mut p, &Host, &states, &mut *ours, 1, &mut rng);
        let (allow, num) = c.naive.eval(&p);
        if v.decision != Decision::Allow || !allow || v.rule != num {
            return Err(format!(
                "{}: flow {i}: ours {:?} by {}, naive {allow} by {num} ({} states)",
                c.name,
                v.decision,
                v.rule,
                states.len()
            ));
        }
    }
    if states.len() != n || c.naive.states.len() != n {
        return Err(format!(
            "{}: {} states made (naive {}), wanted {n}",
            c.name,
            states.len(),
            c.naive.states.len()
        ));
    }
    compare_counters(c, ours)
}

// ---- timing ---------------------------------------------------------------------

#[derive(Clone, Copy, Debug, Default)]
struct Timing {
    /// The best pass: ns and TSC cycles per packet.
    ns: f64,
    cycles: Option<f64>,
    /// Packets over all passes.
    pkts: u64,
}

impl Timing {
    fn mpps(&self) -> f64 {
        1e3 / self.ns.max(1e-9)
    }
}

/// Timed passes of `f` over slices of the `n` packets for about `secs` (at least
/// 3): each pass a slice of about 50 µs of work (measured on an untimed warm-up
/// pass over all `n`), in turn through the array, so that on a loaded machine most
/// passes fit in one time slice; the best pass is kept.
fn measure(secs: f64, n: usize, mut f: impl FnMut(std::ops::Range<usize>)) -> Timing {
    let t0 = Instant::now();
    f(0..n); // warm
    let warm = t0.elapsed().as_nanos().max(1) as f64;
    let chunk = ((n as f64 * 50_000.0 / warm) as usize).clamp(32.min(n), n);
    let start = Instant::now();
    let mut t = Timing {
        ns: f64::INFINITY,
        ..Timing::default()
    };
    let mut passes = 0;
    let mut at = 0;
    while passes < 3 || start.elapsed().as_secs_f64() < secs {
        let r = at..(at + chunk).min(n);
        let m = r.len();
        at = if r.end >= n { 0 } else { r.end };
        let (t0, c0) = (Instant::now(), dev::cpu::rdtsc());
        f(r);
        let (dt, c1) = (t0.elapsed(), dev::cpu::rdtsc());
        let ns = dt.as_nanos() as f64 / m as f64;
        if ns < t.ns {
            t.ns = ns;
            t.cycles = c0.zip(c1).map(|(a, b)| b.wrapping_sub(a) as f64 / m as f64);
        }
        t.pkts += m as u64;
        passes += 1;
    }
    t
}

fn time_ours(c: &Case, secs: f64) -> Timing {
    let states = c.rs.states().clone();
    let mut counters = Counters::new();
    let mut rng = 1u64;
    let mut pkts = c.pkts.clone();
    let n = pkts.len();
    measure(secs, n, |r| {
        for p in pkts[r].iter_mut() {
            let _ = black_box(c.prog.eval(p, &Host, &states, &mut counters, 1, &mut rng));
        }
    })
}

fn time_ours_batch(c: &Case, secs: f64) -> Timing {
    let states = c.rs.states().clone();
    let mut counters = Counters::new();
    let mut rng = 1u64;
    let mut pkts = c.pkts.clone();
    let mut out = vec![
        fw::Verdict {
            decision: Decision::Deny,
            rule: 0,
            log: false
        };
        64
    ];
    let n = pkts.len();
    measure(secs, n, |r| {
        for ch in pkts[r].chunks_mut(64) {
            let o = &mut out[..ch.len()];
            c.prog
                .eval_batch(ch, o, &Host, &states, &mut counters, 1, &mut rng);
            black_box(&o);
        }
    })
}

fn time_naive(c: &mut Case, secs: f64) -> Timing {
    let pkts = c.pkts.clone();
    let naive = &mut c.naive;
    measure(secs, pkts.len(), |r| {
        for p in &pkts[r] {
            black_box(naive.eval(p));
        }
    })
}

/// Ours on `threads` threads pinned to distinct CPUs of `cpus`: total Mpps.
fn threads_mpps(c: &Case, secs: f64, threads: usize, cpus: &[usize]) -> f64 {
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let cpu = cpus.get(t).copied();
                s.spawn(move || {
                    if let Some(cpu) = cpu {
                        let _ = dev::cpu::pin_current_thread(cpu);
                    }
                    let states = c.rs.states().clone();
                    let mut counters = Counters::new();
                    let mut rng = 1u64 + t as u64;
                    let mut pkts = c.pkts.clone();
                    let start = Instant::now();
                    let mut n = 0u64;
                    while start.elapsed() < Duration::from_secs_f64(secs) {
                        for p in pkts.iter_mut() {
                            let _ = black_box(c.prog.eval(
                                p,
                                &Host,
                                &states,
                                &mut counters,
                                1,
                                &mut rng,
                            ));
                        }
                        n += pkts.len() as u64;
                    }
                    n as f64 / start.elapsed().as_secs_f64() / 1e6
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap_or(0.0)).sum()
    })
}

// ---- results ----------------------------------------------------------------------

struct Row {
    group: &'static str,
    case: String,
    variant: &'static str,
    rule_text: String,
    rules: usize,
    insns: usize,
    ours: Timing,
    naive: Option<Timing>,
    agree: bool,
}

/// Per-phase costs: (entry, rule header, microinstruction).
#[derive(Clone, Copy, Debug)]
struct Phases {
    entry: f64,
    rule: f64,
    insn: f64,
}

/// Least squares t = entry + rule·N + insn·M over (N, M, t).
fn fit(pts: &[(f64, f64, f64)]) -> Option<Phases> {
    // Normal equations, 3 x 3, solved by Cramer's rule.
    let mut a = [[0.0f64; 3]; 3];
    let mut b = [0.0f64; 3];
    for &(n, m, t) in pts {
        let x = [1.0, n, m];
        for i in 0..3 {
            for j in 0..3 {
                a[i][j] += x[i] * x[j];
            }
            b[i] += x[i] * t;
        }
    }
    let det = |m: &[[f64; 3]; 3]| {
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    };
    let d = det(&a);
    if d.abs() < 1e-9 {
        return None;
    }
    let col = |k: usize| {
        let mut m = a;
        for i in 0..3 {
            m[i][k] = b[i];
        }
        det(&m) / d
    };
    Some(Phases {
        entry: col(0),
        rule: col(1),
        insn: col(2),
    })
}

struct Target {
    what: &'static str,
    /// The path the value was measured on, where the target takes the better of two.
    via: Option<&'static str>,
    value: Option<f64>,
    unit: &'static str,
    limit: f64,
    at_most: bool,
}

impl Target {
    fn met(&self) -> Option<bool> {
        self.value.map(|v| {
            if self.at_most {
                v <= self.limit
            } else {
                v >= self.limit
            }
        })
    }
}

/// Everything measured: rows, fits, targets; `run` with the real or test params.
struct Report {
    rows: Vec<Row>,
    fits: Vec<(&'static str, &'static str, Phases)>,
    threads2: Option<(f64, f64)>,
    targets: Vec<Target>,
}

fn best(a: Timing, b: Timing) -> Timing {
    let mut t = if b.ns < a.ns { b } else { a };
    t.pkts = a.pkts + b.pkts;
    t
}

fn run(p: &Params, groups: &[&str], progress: &dyn Fn(&str)) -> Result<Report, String> {
    let mut built = Vec::new();
    for &g in groups {
        progress(&format!("{g}: building"));
        for mut c in cases(g, p)? {
            let mut ours_c = Counters::new();
            if g == "state" {
                progress(&format!("{}: making {} states", c.name, p.states));
                let t0 = Instant::now();
                make_states(&mut c, p.states, &mut ours_c)?;
                progress(&format!(
                    "{}: {} states in {:.2} s (both evaluators)",
                    c.name,
                    p.states,
                    t0.elapsed().as_secs_f64()
                ));
            }
            agree(&mut c, &mut ours_c)?;
            progress(&format!(
                "{}: {} ({} rules, {} microinstructions): ours and naive agree",
                c.name, c.rule_text, c.rules, c.insns
            ));
            built.push(c);
        }
    }
    // Rounds interleave the cases, so that a burst of load elsewhere on the machine
    // spoils one round of each rather than every pass of one.
    let none = Timing {
        ns: f64::INFINITY,
        ..Timing::default()
    };
    let secs = p.secs;
    let mut t = vec![(none, none, None::<Timing>); built.len()];
    for round in 1..=p.rounds {
        progress(&format!(
            "round {round}/{}: ours and naive on {} cases, {secs:.2} s each",
            p.rounds,
            built.len()
        ));
        for (c, t) in built.iter_mut().zip(t.iter_mut()) {
            t.0 = best(t.0, time_ours(c, secs));
            t.1 = best(t.1, time_naive(c, secs));
            if matches!(c.group, "allow" | "table" | "state") {
                t.2 = Some(best(t.2.unwrap_or(none), time_ours_batch(c, secs)));
            }
        }
    }
    let mut rows = Vec::new();
    let mut threads2 = None;
    for (c, t) in built.iter().zip(t) {
        let mk = |variant, ours, naive| Row {
            group: c.group,
            case: c.name.clone(),
            variant,
            rule_text: c.rule_text.clone(),
            rules: c.rules,
            insns: c.insns,
            ours,
            naive,
            agree: true,
        };
        rows.push(mk("eval", t.0, Some(t.1)));
        if let Some(b) = t.2 {
            rows.push(mk("eval_batch", b, None));
        }
        if c.group == "allow" {
            progress(&format!("{}: eval on 1 and 2 pinned threads", c.name));
            let one = threads_mpps(c, p.secs, 1, &p.cpus);
            let two = threads_mpps(c, p.secs, 2, &p.cpus);
            threads2 = Some((one, two));
        }
    }
    let mut fits = Vec::new();
    let pts = |f: &dyn Fn(&Row) -> Option<f64>| -> Vec<(f64, f64, f64)> {
        rows.iter()
            .filter(|r| r.group == "matrix" && r.variant == "eval")
            .filter_map(|r| f(r).map(|t| (r.rules as f64, r.insns as f64, t)))
            .collect()
    };
    for (imp, unit, f) in [
        (
            "ours",
            "ns",
            &(|r: &Row| Some(r.ours.ns)) as &dyn Fn(&Row) -> Option<f64>,
        ),
        ("ours", "cycles", &|r: &Row| r.ours.cycles),
        ("naive", "ns", &|r: &Row| r.naive.map(|n| n.ns)),
        ("naive", "cycles", &|r: &Row| r.naive.and_then(|n| n.cycles)),
    ] {
        let pts = pts(f);
        if pts.len() >= 4 {
            if let Some(ph) = fit(&pts) {
                fits.push((imp, unit, ph));
            }
        }
    }
    let targets = targets(p, &rows, &fits);
    Ok(Report {
        rows,
        fits,
        threads2,
        targets,
    })
}

/// The targets, against what the rows and the matrix's fits measured.
fn targets(p: &Params, rows: &[Row], fits: &[(&str, &str, Phases)]) -> Vec<Target> {
    let ours_fit = fits
        .iter()
        .find(|f| f.0 == "ours" && f.1 == "ns")
        .map(|f| f.2);
    let find = |case: &str, variant: &str| {
        rows.iter()
            .find(|r| r.case == case && r.variant == variant)
            .map(|r| r.ours)
    };
    // The faster of eval and eval_batch on `case`: its Mpps, and which it was.
    let best_mpps = |case: &str| {
        ["eval", "eval_batch"]
            .iter()
            .filter_map(|&v| Some((find(case, v)?.mpps(), v)))
            .max_by(|a, b| a.0.total_cmp(&b.0))
    };
    let allow_best = best_mpps("allow-1rule");
    // Flatness on one path: the one that hits in the big table faster, and its ratio.
    let flat = ["eval", "eval_batch"]
        .iter()
        .filter_map(|&v| {
            let b = find(&format!("table-{}-hit", p.table_big), v)?;
            let s = find(&format!("table-{}-hit", p.table_small), v)?;
            Some((b.ns, v, b.ns / s.ns))
        })
        .min_by(|a, b| a.0.total_cmp(&b.0));
    let states = best_mpps(&format!("keep-state-{}", p.states));
    vec![
        Target {
            what: "microinstruction",
            via: None,
            value: ours_fit.map(|f| f.insn),
            unit: "ns",
            limit: 1.5,
            at_most: true,
        },
        Target {
            what: "rule header",
            via: None,
            value: ours_fit.map(|f| f.rule),
            unit: "ns",
            limit: 5.0,
            at_most: true,
        },
        Target {
            what: "one allow rule, 1 core",
            via: allow_best.map(|a| a.1),
            value: allow_best.map(|a| a.0),
            unit: "Mpps",
            limit: 15.0,
            at_most: false,
        },
        Target {
            what: "table 100k/1k hit time",
            via: flat.map(|f| f.1),
            value: flat.map(|f| f.2),
            unit: "x",
            limit: 1.2,
            at_most: true,
        },
        Target {
            what: "keep-state 1M states, 1 core",
            via: states.map(|s| s.1),
            value: states.map(|s| s.0),
            unit: "Mpps",
            limit: 5.0,
            at_most: false,
        },
    ]
}

pub fn main(a: &BenchArgs) -> Result<ExitCode, String> {
    for s in &a.skip {
        if !GROUPS.contains(&s.as_str()) {
            return Err(format!(
                "bench fw: unknown --skip '{s}' (known: {})",
                GROUPS.join(", ")
            ));
        }
    }
    let groups: Vec<&str> = GROUPS
        .iter()
        .copied()
        .filter(|g| !a.skip.iter().any(|s| s == g))
        .collect();
    let p = Params::full(a.seconds, a.rounds);
    let json = a.json;
    let progress = move |m: &str| {
        if !json {
            eprintln!("bench: fw: {m}");
        }
    };
    // On a thread pinned to the first allowed CPU (the 2-thread case pins its own).
    let cpu = p.cpus.first().copied();
    let rep = std::thread::scope(|s| {
        s.spawn(|| {
            if let Some(c) = cpu {
                let _ = dev::cpu::pin_current_thread(c);
            }
            run(&p, &groups, &progress)
        })
        .join()
        .map_err(|_| "bench fw: the measuring thread panicked".to_string())?
    })?;
    let hz = dev::cpu::tsc_hz(Duration::from_millis(50));
    if let Some(path) = &a.plot {
        plot(path, &rep.rows)?;
    }
    print_report(a, &p, &rep, hz);
    if let Some(path) = &a.plot {
        if !a.json {
            println!("plot: {}", path.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fw_every_case_runs_and_both_evaluators_agree() {
        let _quiet = crate::bench::heap_quiet();
        let p = Params {
            pkts: 64,
            matrix_n: [1, 3, 5],
            table_big: 200,
            table_small: 20,
            states: 500,
            ..Params::full(0.001, 2)
        };
        let rep = run(&p, &GROUPS, &|_| {}).expect("run");
        // 5 matrix, 2 allow, 1 rfc2544, 4 table (eval and eval_batch), 2 state.
        assert_eq!(rep.rows.len(), 18);
        assert!(rep.rows.iter().all(|r| r.agree && r.ours.ns > 0.0));
        assert_eq!(rep.fits.iter().filter(|f| f.0 == "ours").count(), 2);
        let a1 = rep.rows.iter().find(|r| r.case == "A1").unwrap();
        assert_eq!((a1.rules, a1.insns), (1, 1));
        let b5 = rep.rows.iter().find(|r| r.case == "B5").unwrap();
        assert_eq!((b5.rules, b5.insns), (5, 25));
        assert_eq!(rep.targets.len(), 5);
    }

    #[test]
    fn fw_fit_recovers_known_costs() {
        let _quiet = crate::bench::heap_quiet();
        let pts: Vec<(f64, f64, f64)> = [
            (1.0, 1.0),
            (10.0, 10.0),
            (100.0, 100.0),
            (10.0, 50.0),
            (100.0, 500.0),
        ]
        .iter()
        .map(|&(n, m)| (n, m, 100.0 + 50.0 * n + 12.0 * m))
        .collect();
        let f = fit(&pts).unwrap();
        assert!(
            (f.entry - 100.0).abs() < 1e-6
                && (f.rule - 50.0).abs() < 1e-6
                && (f.insn - 12.0).abs() < 1e-6
        );
    }

    #[test]
    fn fw_naive_rejects_nothing_the_bench_uses_and_denies_by_default() {
        let _quiet = crate::bench::heap_quiet();
        let c = &mut cases("rfc2544", &Params::full(0.001, 1)).unwrap()[0];
        let mut p = c.pkts[0];
        p.dport = 8;
        assert_eq!(c.naive.eval(&p), (false, fw::rule::DEFAULT_RULE));
    }
}
