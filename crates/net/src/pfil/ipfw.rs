//! The ipfw firewall on a stack's pfil points: the glue between the `fw` crate (which
//! never sees a packet buffer) and the data path.
//!
//! [`Ipfw`] holds the control plane (`fw::Ruleset`, behind a lock: commands are
//! rare), the published program (read once per packet through `ArcSwap`, no lock),
//! the dynamic states (shared by the workers, sharded by a symmetric flow hash) and
//! one counter block per worker. Its hook describes each packet at the IPv4 and IPv6
//! points, in and out (forwarded packets pass both), as `fw::PacketInfo` — headers
//! read through `hdr()`, never by indexing raw bytes past what was pulled up — and
//! turns the verdict into a pfil verdict: allow passes, deny drops (counted), reject
//! answers with a TCP reset or an ICMP/ICMPv6 unreachable (`send_reject`).
//!
//! dummynet: a `pipe N` / `queue N` verdict hands the packet to the firewall's
//! [`fw::dummynet::Dummynet`] (one for the stack, behind a lock: a pipe's bandwidth
//! is shared by all the traffic entering it, whichever worker carries it); the workers
//! ask for released packets every poll and sleep until the next release
//! ([`PfilHook::poll`], [`PfilHook::next_wakeup`]), and each resumes where it was
//! taken, past the firewall (FreeBSD's `one_pass`): an inbound packet into
//! `ip_input`/`ip6_input`, an outbound one to its route's link output. In a
//! simulation a pipe is therefore exact in virtual time.
//!
//! How a packet is described for the rules is in `describe`.

use crate::ifindex::IfIndex;
use crate::pfil::{Deferred, Dir, PfilAct, PfilCtx, PfilEnv, PfilHook, PfilPoint, Reject, Verdict};
use arc_swap::ArcSwap;
use fw::{Decision, Env, IfName, IfRef, PacketInfo, RejectKind};
use mbuf::Mbuf;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

mod describe;

use describe::describe;

/// A firewall for one stack.
#[derive(Debug)]
pub struct Ipfw {
    ruleset: Mutex<fw::Ruleset>,
    program: ArcSwap<fw::Program>,
    states: Arc<fw::state::StateShards>,
    /// Per worker: the rules' counters (written by that worker alone, read by
    /// `ipfw show` without a lock) and the batch scratch.
    workers: Vec<WorkerFw>,
    /// The pipes and queues, and the packets they hold.
    dn: Mutex<fw::dummynet::Dummynet<DnPkt>>,
    /// Some pipe or queue is configured (no lock taken per poll otherwise).
    shaping: std::sync::atomic::AtomicBool,
    /// Packets dummynet refused (loss, full queue, no such pipe).
    dn_drops: AtomicU64,
    /// When the states are next swept for expired ones (the stack clock's ns).
    next_sweep: AtomicU64,
    /// States a sweep looks at per shard: a tenth of a shard's share.
    sweep_work: usize,
    /// States the sweeps dropped.
    expired: AtomicU64,
    /// Some program published made states: the workers wake for the sweep.
    stateful: std::sync::atomic::AtomicBool,
    /// Packets that left a pass with more tags than their header keeps (two).
    tags_lost: AtomicU64,
    /// What `log` has written, per rule, against its limit.
    logs: Mutex<LogState>,
    /// Batches under way ([`Ipfw::batch`]): while any is, commands change the
    /// ruleset without compiling it; the last to end compiles and publishes once.
    hold: std::sync::atomic::AtomicUsize,
}

/// What [`Ipfw::snapshot`] took: the rules, sets and tables, the log limit, and
/// the pipes' and queues' configurations.
#[derive(Debug, Clone)]
pub struct IpfwSnapshot {
    ruleset: fw::Ruleset,
    log_limit: u32,
    pipes: Vec<(u32, fw::dummynet::PipeConfig)>,
    queues: Vec<(u32, fw::dummynet::QueueConfig)>,
}

/// ipfw's `log`: lines written per rule, and each rule's limit (`logamount`, or
/// the default `net.inet.ip.fw.verbose_limit`; 0 is no limit).
#[derive(Debug)]
struct LogState {
    default_limit: u32,
    amounts: std::collections::HashMap<u16, u32>,
    written: std::collections::HashMap<u16, u32>,
}

/// `net.inet.ip.fw.verbose_limit` unless changed: lines per rule until `ipfw zero`
/// or `resetlog` (FreeBSD's kernel default is 0, no limit; a node writing a line per
/// packet of a flood is worse than one that stops at a hundred and says so).
pub const LOG_LIMIT: u32 = 100;

/// A worker's share of the firewall.
#[derive(Debug)]
struct WorkerFw {
    counters: fw::SharedCounters,
    /// The rest, the worker's alone: its lock is taken once per vector and never
    /// contended (only the worker filters with it).
    scratch: Mutex<Scratch>,
}

/// What a worker filters a vector with.
#[derive(Debug)]
struct Scratch {
    /// The `prob` coin.
    rng: u64,
    /// A vector's packet descriptions, in columns, described in place (nothing is
    /// built elsewhere and moved in), and where each packet came from in the pfil
    /// vector.
    vec: Box<fw::PacketVec>,
    at: [u32; fw::VECTOR],
    /// The interfaces as the rules name them, by index, as of configuration
    /// `ifgen`: built once per configuration, not once per packet.
    ifrefs: Vec<IfRef>,
    ifgen: u64,
}

impl WorkerFw {
    fn new(rng: u64) -> WorkerFw {
        WorkerFw {
            counters: fw::SharedCounters::new(),
            scratch: Mutex::new(Scratch::new(rng)),
        }
    }
}

impl Scratch {
    fn new(rng: u64) -> Scratch {
        Scratch {
            rng,
            vec: fw::PacketVec::new(),
            at: [0; fw::VECTOR],
            ifrefs: Vec::new(),
            ifgen: u64::MAX,
        }
    }

    /// The interface table for configuration `cfg`.
    fn ifrefs(&mut self, env: &dyn PfilEnv) {
        let n = env.ifcount();
        if self.ifgen == env.generation() && self.ifrefs.len() == n {
            return;
        }
        self.ifrefs = (0..n)
            .map(|i| IfRef {
                index: i as u32,
                name: env
                    .ifname(IfIndex(i as u16))
                    .and_then(IfName::new)
                    .unwrap_or_default(),
            })
            .collect();
        self.ifgen = env.generation();
    }
}

/// How often a worker sweeps the dynamic states: each sweep looks at a tenth of
/// every shard, so each state is looked at about once a second, as FreeBSD's
/// `dyn_tick` does. A lookup drops an expired state of its own flow; without the
/// sweep, the states of flows that send nothing more would keep their slots (and
/// their share of a `limit`) until the table refused every new one.
const SWEEP_NS: u64 = 100_000_000;

/// A packet in dummynet, with where it was taken.
#[derive(Debug)]
struct DnPkt {
    m: Mbuf,
    point: PfilPoint,
    dir: Dir,
    ifindex: IfIndex,
    flow: fw::dummynet::FlowKey,
}

impl fw::dummynet::DnPacket for DnPkt {
    fn len(&self) -> usize {
        self.m.len()
    }
    fn flow(&self) -> fw::dummynet::FlowKey {
        self.flow
    }
}

impl Ipfw {
    /// An empty firewall (only the default rule, allow or deny as `cfg` says) for a
    /// stack of `workers` workers.
    pub fn new(cfg: fw::RulesetConfig, workers: usize) -> Result<Arc<Ipfw>, String> {
        let mut rs = fw::Ruleset::new(cfg);
        let program = rs.program().map_err(|e| e.to_string())?;
        let states = rs.states().clone();
        let sweep_work = (states.capacity() / states.shard_count() / 10).max(1);
        Ok(Arc::new(Ipfw {
            ruleset: Mutex::new(rs),
            program: ArcSwap::new(program),
            states,
            workers: (0..workers.max(1))
                .map(|i| WorkerFw::new(0x9e37_79b9_7f4a_7c15 ^ i as u64))
                .collect(),
            dn: Mutex::new(fw::dummynet::Dummynet::new(0x6475_6d6d_796e_6574)),
            shaping: std::sync::atomic::AtomicBool::new(false),
            dn_drops: AtomicU64::new(0),
            next_sweep: AtomicU64::new(0),
            sweep_work,
            expired: AtomicU64::new(0),
            stateful: std::sync::atomic::AtomicBool::new(false),
            tags_lost: AtomicU64::new(0),
            logs: Mutex::new(LogState {
                default_limit: LOG_LIMIT,
                amounts: Default::default(),
                written: Default::default(),
            }),
            hold: Default::default(),
        }))
    }

    fn rules(&self) -> std::sync::MutexGuard<'_, fw::Ruleset> {
        self.ruleset.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn publish(&self, rs: &mut fw::Ruleset) -> Result<(), String> {
        if self.hold.load(Ordering::Acquire) > 0 {
            return Ok(());
        }
        let p = rs.program().map_err(|e| e.to_string())?;
        if p.needs().log {
            let mut l = self.logs.lock().unwrap_or_else(|e| e.into_inner());
            l.amounts = rs
                .rules()
                .filter(|(r, _)| r.log && r.log_amount != 0)
                .map(|(r, _)| (r.num, r.log_amount))
                .collect();
        }
        // States outlive the rules that made them until they expire: once set, the
        // workers keep waking for the sweep.
        if p.makes_states() {
            self.stateful.store(true, Ordering::Relaxed);
        }
        self.program.store(p);
        Ok(())
    }

    /// Loads a rules file (ipfw(8) commands — rules, tables, and `pipe N config …` /
    /// `queue N config …` lines for dummynet — and `#` comments); on an error
    /// nothing changes. A file may name pipes, queues and tables it defines further
    /// on; one still undefined at the end is refused. Errors are `LINE:COL:
    /// message` ([`fw::CmdError`]).
    pub fn load(&self, text: &str) -> Result<usize, String> {
        let mut rs = self.rules();
        let n = rs.load(text).map_err(|e| e.to_string())?;
        self.apply_dummynet(&mut rs)?;
        self.publish(&mut rs)?;
        Ok(n)
    }

    /// Hands the dummynet commands the ruleset took to the shaper (the ruleset has
    /// checked them against the same limits: they apply).
    fn apply_dummynet(&self, rs: &mut fw::Ruleset) -> Result<(), String> {
        let cmds = rs.take_dummynet();
        if cmds.is_empty() {
            return Ok(());
        }
        let mut d = self.dn.lock().unwrap_or_else(|e| e.into_inner());
        for cmd in cmds {
            d.apply(cmd).map_err(|e| format!("dummynet: {e}"))?;
        }
        self.shaping.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Runs one ipfw(8) command (`add …`, `delete N`, `list`, `show`, `zero`,
    /// `table …`, `set …`, `pipe N config …`, `queue N config …`) and returns its
    /// output. A rule may name only pipes, queues and tables that exist. Errors are
    /// `1:COL: message`.
    pub fn command(&self, line: &str) -> Result<String, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        // `resetlog [N ...]`, and `zero` resets the log counts as FreeBSD's does.
        if matches!(words.first(), Some(&"resetlog") | Some(&"zero")) {
            let nums: Vec<u16> = words[1..].iter().filter_map(|w| w.parse().ok()).collect();
            if nums.len() + 1 != words.len() {
                return Err(format!("{}: rule numbers, 1 to 65535", words[0]));
            }
            let mut l = self.logs.lock().unwrap_or_else(|e| e.into_inner());
            if nums.is_empty() {
                l.written.clear();
            } else {
                for n in &nums {
                    l.written.remove(n);
                }
            }
            if words[0] == "resetlog" {
                return Ok(if nums.is_empty() {
                    "Logging counts reset.\n".to_string()
                } else {
                    nums.iter()
                        .map(|n| format!("Entry {n} logging count reset.\n"))
                        .collect()
                });
            }
        }
        let mut rs = self.rules();
        let refs = self.counters();
        let out = rs.execute(line, 1, &refs).map_err(|e| e.to_string())?;
        self.apply_dummynet(&mut rs)?;
        self.publish(&mut rs)?;
        Ok(out)
    }

    /// Runs `f` with the program's compilation held: the commands `f` runs change
    /// the rules and tables at once and reach the data path in one compilation
    /// when the last batch under way ends (100,000 `table add` lines so cost one
    /// compilation, not one each, which made a config file of them quadratic).
    /// Packets are filtered by the program as it was until then. With `f`'s
    /// result, whether the compilation took the rules (a program over its bounds
    /// is refused then, not line by line).
    pub fn batch<R>(&self, f: impl FnOnce() -> R) -> (R, Result<(), String>) {
        struct Hold<'a>(&'a Ipfw);
        impl Drop for Hold<'_> {
            fn drop(&mut self) {
                self.0.hold.fetch_sub(1, Ordering::AcqRel);
            }
        }
        self.hold.fetch_add(1, Ordering::AcqRel);
        let r = {
            let _hold = Hold(self);
            f()
        };
        let published = if self.hold.load(Ordering::Acquire) == 0 {
            let mut rs = self.rules();
            self.publish(&mut rs)
        } else {
            Ok(())
        };
        (r, published)
    }

    /// The rules, tables, sets, log limit and pipes as they are, to put back with
    /// [`Ipfw::restore`].
    pub fn snapshot(&self) -> IpfwSnapshot {
        let ruleset = self.rules().clone();
        let d = self.dn.lock().unwrap_or_else(|e| e.into_inner());
        IpfwSnapshot {
            ruleset,
            log_limit: self.log_limit(),
            pipes: d.pipes().into_iter().map(|(n, c, _)| (n, c)).collect(),
            queues: d.queues(),
        }
    }

    /// Puts back what `snap` holds and publishes it (at once, or when the batch
    /// under way ends). The rules' counters stay the workers' (a rule put back
    /// keeps its counts); the dynamic states stay. A pipe or queue whose
    /// configuration changed is configured again as it was (keeping its packets),
    /// one made since is deleted (dropping its packets, as `pipe N delete` does).
    pub fn restore(&self, snap: &IpfwSnapshot) -> Result<(), String> {
        self.set_log_limit(snap.log_limit);
        let mut rs = self.rules();
        rs.restore(snap.ruleset.clone());
        {
            let mut d = self.dn.lock().unwrap_or_else(|e| e.into_inner());
            d.set_limits(rs.dummynet_limits());
            let (pipes, queues) = (d.pipes(), d.queues());
            for (n, _, _) in &pipes {
                if !snap.pipes.iter().any(|(m, _)| m == n) {
                    d.delete_pipe(*n);
                }
            }
            for (n, cfg) in &snap.pipes {
                if !pipes.iter().any(|(m, c, _)| m == n && c == cfg) {
                    d.configure_pipe(*n, cfg.clone())
                        .map_err(|e| format!("dummynet: {e}"))?;
                }
            }
            for (n, _) in &queues {
                if !snap.queues.iter().any(|(m, _)| m == n) {
                    d.delete_queue(*n);
                }
            }
            for (n, cfg) in &snap.queues {
                if !queues.iter().any(|(m, c)| m == n && c == cfg) {
                    d.configure_queue(*n, cfg.clone())
                        .map_err(|e| format!("dummynet: {e}"))?;
                }
            }
        }
        self.publish(&mut rs)
    }

    /// The largest queue a pipe or queue may be configured with
    /// (`net.inet.ip.dummynet.pipe_slot_limit` and `pipe_byte_limit`).
    pub fn dummynet_limits(&self) -> fw::dummynet::DnLimits {
        self.rules().dummynet_limits()
    }

    /// Sets [`Ipfw::dummynet_limits`] for the configurations to come; false, and
    /// nothing changed, for limits FreeBSD's sysctls refuse (0 slots, under 1500
    /// bytes).
    pub fn set_dummynet_limits(&self, lim: fw::dummynet::DnLimits) -> bool {
        let mut rs = self.rules();
        if !rs.set_dummynet_limits(lim) {
            return false;
        }
        self.dn
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .set_limits(lim)
    }

    /// Lines `log` writes per rule by default (`net.inet.ip.fw.verbose_limit`; 0:
    /// no limit).
    pub fn log_limit(&self) -> u32 {
        self.logs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .default_limit
    }

    /// Sets [`Ipfw::log_limit`].
    pub fn set_log_limit(&self, n: u32) {
        self.logs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .default_limit = n;
    }

    /// One `log` line for packet `p` and its verdict, as ipfw(8) writes them
    /// (`ipfw: 100 Deny TCP 198.18.1.2:5000 198.18.2.2:80 in via em0`), as a
    /// `tracing` event (target `ipfw`), while the rule's limit allows; when it is
    /// reached, one line saying so.
    fn log_packet(&self, v: &fw::Verdict, p: &PacketInfo, cx: &PfilCtx<'_>) {
        let mut l = self.logs.lock().unwrap_or_else(|e| e.into_inner());
        let limit = l.amounts.get(&v.rule).copied().unwrap_or(l.default_limit);
        let n = l.written.entry(v.rule).or_insert(0);
        if limit != 0 && *n > limit {
            return;
        }
        *n += 1;
        if limit != 0 && *n > limit {
            tracing::info!(target: "ipfw", "limit {limit} reached on entry {}", v.rule);
            return;
        }
        drop(l);
        let action = match v.decision {
            Decision::Allow => "Accept".to_string(),
            Decision::Deny => "Deny".to_string(),
            Decision::Reject(RejectKind::Rst) => "Reset".to_string(),
            Decision::Reject(RejectKind::Unreach(c))
            | Decision::Reject(RejectKind::Unreach6(c)) => {
                format!("Unreach {c}")
            }
            Decision::Pipe(n) => format!("Pipe {n}"),
            Decision::Queue(n) => format!("Queue {n}"),
            Decision::Fwd(i) => match self.program.load().fwd_hop(i) {
                Some((a, Some(p))) => format!("Forward to {a}:{p}"),
                Some((a, None)) => format!("Forward to {a}"),
                None => "Forward".to_string(),
            },
        };
        let ep = |a: IpAddr, port: u16, ports: bool| match (a, ports) {
            (IpAddr::V6(a), true) => format!("[{a}]:{port}"),
            (a, true) => format!("{a}:{port}"),
            (a, false) => a.to_string(),
        };
        let (proto, ports) = match p.proto {
            6 => ("TCP".to_string(), true),
            17 => ("UDP".to_string(), true),
            // The type only: the rules' view of a packet has no ICMP code
            // (FreeBSD writes `ICMP:8.0`).
            1 => (format!("ICMP:{}", p.icmp_type), false),
            58 => (format!("ICMPv6:{}", p.icmp_type), false),
            n => (format!("P:{n}"), false),
        };
        let dir = if cx.dir == Dir::Out { "out" } else { "in" };
        let via = cx.env.ifname(cx.ifindex).unwrap_or("?");
        tracing::info!(
            target: "ipfw",
            "{} {action} {proto} {} {} {dir} via {via}",
            v.rule,
            ep(p.src, p.sport, ports),
            ep(p.dst, p.dport, ports)
        );
    }

    /// Every worker's counters, as the ruleset's commands read and zero them.
    fn counters(&self) -> Vec<&fw::SharedCounters> {
        self.workers.iter().map(|w| &w.counters).collect()
    }

    /// `ipfw show`: every rule with its packet and byte counts, summed over workers.
    pub fn show(&self) -> String {
        let refs = self.counters();
        self.rules().show(None, &refs)
    }

    /// Dynamic states held (some may have expired since the last sweep).
    pub fn states(&self) -> usize {
        self.states.len()
    }

    /// Drops every expired dynamic state now (the workers do it a tenth at a time,
    /// every 100 ms); returns how many.
    pub fn expire_states(&self, now: dev::Instant) -> usize {
        let n = self.states.expire(now.as_nanos(), usize::MAX);
        self.expired.fetch_add(n as u64, Ordering::Relaxed);
        n
    }

    /// The dynamic states' counters (`fw.dyn_*` in `netstat -s`).
    pub fn state_stats(&self) -> fw::state::StateStats {
        self.states.stats()
    }

    /// States the table holds at most (`net.inet.ip.fw.dyn_max`).
    pub fn state_capacity(&self) -> usize {
        self.states.capacity()
    }

    /// The dynamic states as `ipfw -d show` prints them after the rules: a
    /// `## Dynamic rules (N):` line, then one line a state, in rule order, as
    /// FreeBSD writes them but for the packet and byte counts, which states do not
    /// keep (a flow's packets would all write its state's line; they count on the
    /// rule that made it): `00100 (9s) STATE tcp 198.18.0.1 1024 <-> 198.18.0.2 80`,
    /// the creator's side first, with the lifetime left as of `now` (expired
    /// states not yet swept are left out). An ICMP query's state shows its
    /// identifier as both ports, as pf does. At most `max` lines, then a count of
    /// the rest.
    pub fn list_states(&self, now: dev::Instant, max: usize) -> Vec<String> {
        let now = now.as_nanos();
        let mut v = self.states.states();
        v.retain(|(_, _, expires)| *expires > now);
        v.sort_by_key(|(f, hit, _)| (hit.rule, f.proto, f.src, f.sport, f.dst, f.dport));
        let mut out = vec![format!("## Dynamic rules ({}):", v.len())];
        out.extend(v.iter().take(max).map(|(f, hit, expires)| {
            let proto = match f.proto {
                1 => "icmp".to_string(),
                6 => "tcp".to_string(),
                17 => "udp".to_string(),
                58 => "ipv6-icmp".to_string(),
                n => n.to_string(),
            };
            // A query's state is (id, query type); the address pair's, (0, 0).
            let (sport, dport) = match f.proto {
                1 | 58 => (f.sport, f.sport),
                _ => (f.sport, f.dport),
            };
            format!(
                "{:05} ({}s) STATE {proto} {} {sport} <-> {} {dport}",
                hit.rule,
                expires.saturating_sub(now).div_ceil(1_000_000_000),
                f.src,
                f.dst,
            )
        }));
        if v.len() > max {
            out.push(format!("... and {} more", v.len() - max));
        }
        out
    }

    /// Packets that left a pass with more than two tags: the header carries two
    /// to the next pass, and the others were lost.
    pub fn tags_lost(&self) -> u64 {
        self.tags_lost.load(Ordering::Relaxed)
    }

    /// States the periodic sweeps (and [`Ipfw::expire_states`]) dropped.
    pub fn expired_states(&self) -> u64 {
        self.expired.load(Ordering::Relaxed)
    }

    /// The sweep, when it is due: one worker takes it (the others see the deadline
    /// moved) and looks at a tenth of every shard.
    fn sweep_states(&self, now: u64) {
        let due = self.next_sweep.load(Ordering::Relaxed);
        if now < due
            || self
                .next_sweep
                .compare_exchange(due, now + SWEEP_NS, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let n = self.states.expire(now, self.sweep_work);
        if n > 0 {
            self.expired.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    /// Packets dummynet refused (its `plr`, a full queue, a missing pipe).
    pub fn dummynet_drops(&self) -> u64 {
        self.dn_drops.load(Ordering::Relaxed)
    }

    /// `ipfw pipe show`: each pipe's configuration and counters.
    pub fn pipes(&self) -> Vec<(u32, fw::dummynet::PipeConfig, fw::dummynet::PipeStats)> {
        self.dn.lock().unwrap_or_else(|e| e.into_inner()).pipes()
    }

    fn shape(
        &self,
        m: Mbuf,
        p: &PacketInfo,
        cx: &PfilCtx<'_>,
        pipe: Option<u32>,
        queue: Option<u32>,
    ) -> Verdict {
        let pkt = DnPkt {
            m,
            point: cx.point,
            dir: cx.dir,
            ifindex: cx.ifindex,
            flow: fw::dummynet::FlowKey {
                proto: p.proto,
                src: p.src,
                dst: p.dst,
                sport: p.sport,
                dport: p.dport,
            },
        };
        let now = cx.now.as_nanos();
        let mut d = self.dn.lock().unwrap_or_else(|e| e.into_inner());
        let r = match (pipe, queue) {
            (Some(n), _) => d.enqueue_pipe(n, pkt, now),
            (_, Some(n)) => d.enqueue_queue(n, pkt, now),
            _ => return Verdict::Dropped,
        };
        match r {
            Ok(()) => Verdict::Consumed,
            Err(_) => {
                self.dn_drops.fetch_add(1, Ordering::Relaxed);
                Verdict::Dropped
            }
        }
    }
}

/// A packet's tags between passes (layer 2 in, IP in, IP out, layer 2 out, and a
/// forwarded packet's in and out), as FreeBSD keeps them in mbuf tags: two fit in
/// the header's `tag` word, one in each half (tags are 1-65534, 0 is none).
fn tags_of(word: u32) -> fw::Tags {
    let mut t = fw::Tags::default();
    for v in [word as u16, (word >> 16) as u16] {
        if v != 0 {
            t.add(v);
        }
    }
    t
}

/// The header's `tag` word for `tags`, and whether some did not fit (a packet that
/// leaves a pass with more than two keeps the first two; [`Ipfw::tags_lost`]).
fn tag_word(tags: &fw::Tags) -> (u32, bool) {
    let mut it = tags.as_slice().iter().filter(|&&v| v != 0);
    let lo = it.next().copied().unwrap_or(0);
    let hi = it.next().copied().unwrap_or(0);
    (u32::from(lo) | u32::from(hi) << 16, it.next().is_some())
}

/// `me`, `verrevpath`, `antispoof` answered by the stack through its pfil
/// environment.
struct HookEnv<'a>(&'a dyn PfilEnv);

impl Env for HookEnv<'_> {
    fn is_local(&self, a: IpAddr) -> bool {
        self.0.is_local(a)
    }

    /// The route back to `src` leaves by `rcvif` (on any of its paths, if it has
    /// several); no route, or a discard route, fails.
    fn verrevpath(&self, src: IpAddr, rcvif: u32) -> bool {
        self.0.verrevpath(src, rcvif)
    }

    /// Not one of our addresses, nor an address of a network connected through
    /// another interface.
    fn antispoof(&self, src: IpAddr, rcvif: u32) -> bool {
        self.0.antispoof(src, rcvif)
    }
}

/// What a verdict other than allow makes of packet `k` of `vec` (packet `at` of
/// the batch): the pfil action. The packet's description is read back out of the
/// vector only for a pipe or a queue (dummynet's flow key), not for every packet
/// denied or refused.
fn apply(
    fw: &Ipfw,
    program: &fw::Program,
    b: &mut crate::pfil::PfilBatch<'_>,
    at: usize,
    vec: &fw::PacketVec,
    k: usize,
    cx: &PfilCtx<'_>,
) {
    let v = vec.verdict(k);
    match v.decision {
        Decision::Allow => {}
        Decision::Deny => b.set(at, PfilAct::Drop),
        // The port is kept for a transparent proxy's socket lookup, which the
        // stack does not do yet: the address alone decides where the packet goes.
        Decision::Fwd(i) => match program.fwd_hop(i) {
            Some((nh, _)) => b.set(at, PfilAct::Fwd(nh)),
            None => b.set(at, PfilAct::Drop),
        },
        Decision::Reject(k) => b.set(
            at,
            PfilAct::Reject(match k {
                RejectKind::Rst => Reject::Rst,
                RejectKind::Unreach(c) => Reject::Unreach(c),
                RejectKind::Unreach6(c) => Reject::Unreach6(c),
            }),
        ),
        Decision::Pipe(n) | Decision::Queue(n) => {
            let (pipe, queue) = match v.decision {
                Decision::Pipe(_) => (Some(n), None),
                _ => (None, Some(n)),
            };
            let (ifindex, rcvif) = b.ifs(at);
            let pcx = PfilCtx {
                ifindex,
                rcvif,
                ..*cx
            };
            // Taken (`Consumed`), or dropped when the pool had no stand-in.
            if let Some(m) = b.take(at) {
                if !matches!(
                    fw.shape(m, &vec.get(k), &pcx, pipe, queue),
                    Verdict::Consumed
                ) {
                    b.set(at, PfilAct::Drop);
                }
            }
        }
    }
}

impl Ipfw {
    /// The rules over the vector in `wf.vec` (from `pkts`, at `wf.at`), and what
    /// they decided applied: tags written back first (a packet handed to a pipe
    /// carries them), then each packet not allowed dropped, refused or shaped.
    fn filter_vec(
        &self,
        program: &fw::Program,
        wf: &mut Scratch,
        counters: &fw::SharedCounters,
        b: &mut crate::pfil::PfilBatch<'_>,
        cx: &PfilCtx<'_>,
    ) {
        let env = HookEnv(cx.env);
        let v = &mut *wf.vec;
        program.eval_vec(
            v,
            &env,
            &self.states,
            counters,
            cx.now.as_nanos(),
            &mut wf.rng,
        );
        let n = v.len();
        if program.needs().tags {
            for k in 0..n {
                let (word, lost) = tag_word(&v.tags(k));
                b.mbuf(wf.at[k] as usize).hdr.tag = word;
                if lost {
                    self.tags_lost.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        if program.needs().log {
            for k in 0..n {
                let vd = v.verdict(k);
                if vd.log {
                    self.log_packet(&vd, &v.get(k), cx);
                }
            }
        }
        let mut todo = !v.allowed() & (u64::MAX >> (64 - n));
        while todo != 0 {
            let k = todo.trailing_zeros() as usize;
            todo &= todo - 1;
            apply(self, program, b, wf.at[k] as usize, v, k, cx);
        }
        v.clear();
    }
}

impl PfilHook for Ipfw {
    fn name(&self) -> &str {
        "ipfw"
    }

    /// The dynamic states' gauge and refusals, once however many points the
    /// firewall is on.
    fn add_stats(&self, s: &mut crate::stats::Stats) {
        let st = self.states.stats();
        s.fw.dyn_count += st.states;
        s.fw.dyn_created += st.created;
        s.fw.dyn_expired += st.expired;
        s.fw.dyn_full += st.full;
        s.fw.dyn_limited += st.limited;
    }

    fn filter(&self, mut m: Mbuf, cx: &PfilCtx<'_>) -> Verdict {
        let mut one = crate::pfil::OneItem {
            m: &mut m,
            ifindex: cx.ifindex,
            rcvif: cx.rcvif,
        };
        let mut act = [PfilAct::Pass];
        self.filter_batch(&mut crate::pfil::PfilBatch::new(&mut one, &mut act), cx);
        match act[0] {
            // One packet's hook has no place for a next hop: it passes as routed.
            PfilAct::Pass | PfilAct::Fwd(_) => Verdict::Pass(m),
            // `m` is the stand-in the batch left: the firewall has the packet.
            PfilAct::Consumed => Verdict::Consumed,
            PfilAct::Reject(how) => Verdict::Reject(m, how),
            PfilAct::Drop => Verdict::Dropped,
        }
    }

    /// The rules over a vector: the program loaded and the worker's counters taken
    /// once for the whole vector, each packet described in place into the worker's
    /// reused columns (`fw::PacketVec`, 64 at a time), then `Program::eval_vec`
    /// (rule-major over the rules that allow it; the state lookups of the vector
    /// together, their cache misses overlapped).
    fn filter_batch(&self, b: &mut crate::pfil::PfilBatch<'_>, cx: &PfilCtx<'_>) {
        let program = self.program.load();
        let needs = program.needs();
        let w = cx.worker % self.workers.len();
        let worker = &self.workers[w];
        let mut g = worker.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let wf = &mut *g;
        if needs.interfaces {
            wf.ifrefs(cx.env);
        }
        wf.vec.clear();
        for k in 0..b.len() {
            if b.act(k) != PfilAct::Pass {
                continue;
            }
            // Each packet's interfaces only for rules that name some (a call into
            // the stage a packet otherwise).
            let (ifindex, rcvif) = if needs.interfaces {
                b.ifs(k)
            } else {
                (cx.ifindex, cx.rcvif)
            };
            // What cannot be described (no IP header to read) passes, as before.
            let Some(j) = describe(
                b.mbuf(k),
                cx.point,
                cx.dir,
                ifindex,
                rcvif,
                &wf.ifrefs,
                needs,
                &mut wf.vec,
            ) else {
                continue;
            };
            wf.at[j] = k as u32;
            if wf.vec.is_full() {
                self.filter_vec(&program, wf, &worker.counters, b, cx);
            }
        }
        if !wf.vec.is_empty() {
            self.filter_vec(&program, wf, &worker.counters, b, cx);
        }
    }

    fn poll(&self, now: dev::Instant, out: &mut Vec<Deferred>) {
        self.sweep_states(now.as_nanos());
        if !self.shaping.load(Ordering::Relaxed) {
            return;
        }
        let mut got = Vec::new();
        self.dn
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .poll(now.as_nanos(), &mut got);
        out.extend(got.into_iter().map(|p| Deferred {
            m: p.m,
            point: p.point,
            dir: p.dir,
            ifindex: p.ifindex,
        }));
    }

    fn next_wakeup(&self) -> Option<dev::Instant> {
        let sweep = self
            .stateful
            .load(Ordering::Relaxed)
            .then(|| self.next_sweep.load(Ordering::Relaxed));
        let release = if self.shaping.load(Ordering::Relaxed) {
            self.dn
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .next_wakeup()
        } else {
            None
        };
        match (sweep, release) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
        .map(dev::Instant::from_nanos)
    }
}

#[cfg(test)]
mod tests {
    use super::describe::{inet, inet6, inet_fast};
    use super::*;

    /// An IPv6 packet from 2001:2::1 to 2001:2::2: the fixed header with
    /// `next`, then `rest`; split after `split` bytes so the walk crosses buffers.
    fn ip6(next: u8, rest: &[u8], split: usize) -> Mbuf {
        let mut h = vec![0x60, 0, 0, 0, 0, 0, next, 64];
        h[4..6].copy_from_slice(&(rest.len() as u16).to_be_bytes());
        h.extend_from_slice(&[0x20, 0x01, 0, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        h.extend_from_slice(&[0x20, 0x01, 0, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        h.extend_from_slice(rest);
        let (a, b) = h.split_at(split.min(h.len()));
        Mbuf::from_parts(&[a, b]).unwrap()
    }

    /// The packet as `inet6` describes it.
    fn describe6(m: &mut Mbuf) -> PacketInfo {
        let mut v = fw::PacketVec::new();
        let len = m.len() as u32;
        let a = crate::hdr::HdrAccess::Pulldown;
        let k = inet6(a, m, 0, len, &mut v, fw::Needs::default()).unwrap();
        v.get(k)
    }

    fn walk(next: u8, rest: &[u8]) -> PacketInfo {
        let mut first = None;
        for split in [40, 41, 47, 48, 55, 60, 200] {
            let p = describe6(&mut ip6(next, rest, split));
            let key = (p.proto, p.sport, p.dport, p.frag, p.tcp_flags);
            assert_eq!(*first.get_or_insert(key), key, "split at {split}");
        }
        describe6(&mut ip6(next, rest, 40))
    }

    #[test]
    fn ipv6_rules_see_the_upper_layer_past_extension_headers() {
        let tcp = [
            0x04, 0x00, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0,
        ];
        // Hop-by-hop (8 bytes), destination options (16 bytes), then TCP.
        let mut rest = vec![60, 0, 1, 4, 0, 0, 0, 0];
        rest.extend_from_slice(&[6, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        rest.extend_from_slice(&tcp);
        let p = walk(0, &rest);
        assert_eq!(
            (p.proto, p.sport, p.dport, p.tcp_flags, p.frag),
            (6, 1024, 80, 0x02, false)
        );
        // A first fragment (offset 0, more fragments) of UDP: ports read.
        let udp = [0x04, 0x01, 0x00, 0x35, 0, 8, 0, 0];
        let mut rest = vec![17, 0, 0x00, 0x01, 0, 0, 0, 9];
        rest.extend_from_slice(&udp);
        let p = walk(44, &rest);
        assert_eq!((p.proto, p.sport, p.dport, p.frag), (17, 1025, 53, false));
        // A later fragment: `frag`, no ports.
        let mut rest = vec![17, 0, 0x05, 0x00, 0, 0, 0, 9];
        rest.extend_from_slice(&udp);
        let p = walk(44, &rest);
        assert_eq!((p.proto, p.sport, p.dport, p.frag), (17, 0, 0, true));
        // AH (RFC 4302: 12-byte ICV, length 4) before ICMPv6 echo request.
        let mut rest = vec![58, 4, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1];
        rest.extend_from_slice(&[0; 12]);
        rest.extend_from_slice(&[128, 0, 0, 0, 0, 0, 0, 0]);
        let p = walk(51, &rest);
        assert_eq!((p.proto, p.icmp_type), (58, 128));
        // ESP ends the walk; so does a header cut short, and an endless chain.
        assert_eq!(walk(50, &[0; 16]).proto, 50);
        assert_eq!(walk(0, &[60, 0]).proto, 60);
        let chain: Vec<u8> = (0..20).flat_map(|_| [60u8, 0, 0, 0, 0, 0, 0, 0]).collect();
        let p = walk(0, &chain);
        assert_eq!((p.proto, p.sport), (60, 0));
    }

    /// The fast IPv4 describer takes exactly the packets it can describe whole, and
    /// describes them as the general one does.
    #[test]
    fn the_fast_ipv4_description_is_the_general_one() {
        let mut seed = 0x1234_5678_9abc_def0u64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut fast_taken = 0;
        for i in 0..4000 {
            let r = rnd();
            let proto = [6u8, 17, 1, 47, 6, 17][(r % 6) as usize];
            let opts = if r >> 8 & 7 == 0 { 4 } else { 0 };
            let upper = (r >> 12) as usize % 48;
            let total = 20 + opts + upper;
            let mut p = vec![0u8; total];
            for b in p.iter_mut() {
                *b = rnd() as u8;
            }
            p[0] = 0x45 + (opts / 4) as u8;
            p[9] = proto;
            // Mostly whole packets; sometimes a length field that disagrees.
            let field = match r >> 20 & 7 {
                0 => (rnd() % 80) as u16,
                _ => total as u16,
            };
            p[2..4].copy_from_slice(&field.to_be_bytes());
            if r >> 24 & 3 != 0 {
                p[6] &= 0xe0;
                p[7] = 0;
            }
            let split = match r >> 28 & 3 {
                0 => (rnd() as usize % total).max(1),
                _ => total,
            };
            let (a, b) = p.split_at(split);
            let mk = || Mbuf::from_parts(&[a, b]).unwrap();
            for needs in [
                fw::Needs::default(),
                fw::Needs {
                    tcp_options: true,
                    ..Default::default()
                },
            ] {
                let mut v1 = fw::PacketVec::new();
                let mut v2 = fw::PacketVec::new();
                let m = mk();
                if let Some(k) = inet_fast(&m, &mut v1, needs) {
                    fast_taken += 1;
                    let mut m = mk();
                    let a = crate::hdr::HdrAccess::Pulldown;
                    let len = m.len() as u32;
                    let j = inet(a, &mut m, 0, len, &mut v2, needs).unwrap();
                    assert_eq!(v1.get(k), v2.get(j), "packet {i}: {p:02x?}");
                }
            }
        }
        assert!(fast_taken > 1000, "{fast_taken}");
    }

    #[test]
    fn a_rules_file_with_a_bad_line_changes_nothing() {
        let fw = Ipfw::new(fw::RulesetConfig::default(), 1).unwrap();
        let before = fw.show();
        for (bad, at) in [
            (
                "add 100 pipe 1 ip from any to any\npipe 1 config bw 10Mbit/s\nqueue 2 config pipe 1 weight 500\n",
                "3:30: ",
            ),
            (
                "pipe 1 config bw 10Mbit/s\nadd 100 pipe 1 ip fro any to any\n",
                "2:19: ",
            ),
            ("add 100 pipe 1 ip from any to any\n", "1:14: pipe 1 is not configured"),
            ("pipe 1 config queue 99999999\n", "1:6: queue size 99999999"),
        ] {
            let e = fw.load(bad).unwrap_err();
            assert!(e.starts_with(at), "{e}");
            assert_eq!(fw.show(), before, "{bad}");
            assert!(fw.pipes().is_empty(), "{bad}: {:?}", fw.pipes());
        }
        // The pipe after the rule that uses it, as ipfw scripts write it.
        fw.load("add 100 pipe 1 ip from any to any\npipe 1 config bw 10Mbit/s\n")
            .unwrap();
        assert_eq!(fw.pipes().len(), 1);
        assert!(fw.show().contains("00100"));
        // A command naming what does not exist, as `mpstack ipfw` sends it.
        let e = fw
            .command("add 200 queue 3 ip from any to any")
            .unwrap_err();
        assert_eq!(
            e,
            "1:15: queue 3 is not configured (queue 3 config pipe N ...)"
        );
        let e = fw.command("pipe 1 delete").unwrap_err();
        assert_eq!(e, "1:6: pipe 1 is in use by rule 100");
        // The limits, as the sysctls set them.
        assert!(fw.command("pipe 2 config queue 200").is_err());
        assert!(!fw.set_dummynet_limits(fw::dummynet::DnLimits {
            slots: 0,
            bytes: 1500
        }));
        assert!(fw.set_dummynet_limits(fw::dummynet::DnLimits {
            slots: 200,
            bytes: 1500
        }));
        fw.command("pipe 2 config queue 200").unwrap();
        assert_eq!(fw.dummynet_limits().slots, 200);
        assert_eq!(fw.pipes().len(), 2);
    }

    #[test]
    fn two_tags_ride_in_the_header_and_a_third_is_reported_lost() {
        let mut t = fw::Tags::default();
        assert_eq!(tag_word(&t), (0, false));
        assert_eq!(tags_of(0), t);
        t.add(7);
        assert_eq!(tag_word(&t), (7, false));
        assert_eq!(tags_of(7), t);
        t.add(65534);
        let (w, lost) = tag_word(&t);
        assert!(!lost);
        assert_eq!(tags_of(w), t);
        t.add(9);
        let (w, lost) = tag_word(&t);
        assert!(lost);
        assert_eq!(tags_of(w).as_slice(), &[7, 65534]);
    }
}
