//! The node's log: `tracing` events from the library (ipfw's `log` lines, DAD
//! failures, a worker's panic) and the routing socket's messages (routes, addresses,
//! neighbours), one line each on standard error, at `--log-level` and above. What
//! someone outside can cause at will — neighbour churn, routing misses, refused
//! control clients — is rate-limited per kind, with a count of the lines held
//! back ([`LOG_LINES`]; DAD's warnings by the library, `net::nd6::DAD_LOG_LINES`).
//!
//! What it owns: where the events go. What it may call: the stack's routing
//! messages.

use super::cmds::Node;
use net::loglimit::{LogCheck, LogLimit};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The levels `--log-level` takes.
pub const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// Sends the library's events to standard error, from `level` up.
pub fn init(level: &str) -> Result<(), String> {
    let max = match level {
        "off" => return Ok(()),
        "error" => tracing::Level::ERROR,
        "warn" => tracing::Level::WARN,
        "info" => tracing::Level::INFO,
        "debug" => tracing::Level::DEBUG,
        "trace" => tracing::Level::TRACE,
        l => return Err(format!("--log-level {l}: one of {}", LEVELS.join(", "))),
    };
    tracing_subscriber::fmt()
        .with_max_level(max)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init()
        .map_err(|e| format!("log: {e}"))
}

/// Lines of one kind the node logs per [`LOG_WINDOW`]: neighbour changes
/// (`RTM_*` with `RTF_LLINFO`, which anyone on a link causes with ARP or ND
/// frames) and misses (`RTM_MISS`, one per packet a router has no route for).
/// Held-back lines are counted, and the count logged once the window is over.
pub const LOG_LINES: u32 = 20;
/// See [`LOG_LINES`].
pub const LOG_WINDOW: Duration = Duration::from_secs(5);

/// The kinds of routing message rate-limited, and how a count of them is named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Neighbour,
    Miss,
}

impl Kind {
    fn of(m: &route::RtMsg) -> Option<Kind> {
        if m.kind == route::RtmType::Miss {
            Some(Kind::Miss)
        } else if m.flags.contains(route::RtFlags::LLINFO) {
            Some(Kind::Neighbour)
        } else {
            // Routes and addresses: the operator's or the routing daemon's doing.
            None
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Neighbour => "neighbour",
            Kind::Miss => "routing miss",
        }
    }
}

/// Logs every routing message (a route added, changed or deleted, an address, a
/// neighbour learnt or lost) until `stop`, with the interface's name; neighbour
/// changes and misses at most [`LOG_LINES`] per [`LOG_WINDOW`] each.
pub fn route_events(node: &Node<'_>, stop: &AtomicBool) {
    if !tracing::enabled!(target: "route", tracing::Level::INFO) {
        return;
    }
    let sub = node.stack.subscribe_routes(4096);
    let mut dropped = node.stack.route_messages_dropped();
    let clock = std::time::Instant::now();
    let now = || dev::Instant::from_nanos(clock.elapsed().as_nanos() as u64);
    let mut limits =
        [Kind::Neighbour, Kind::Miss].map(|k| (k, LogLimit::new(LOG_LINES, LOG_WINDOW)));
    let suppressed = |k: Kind, n: u64| {
        tracing::info!(target: "route", "suppressed {n} {} message(s) (at most {LOG_LINES} every {}s)", k.name(), LOG_WINDOW.as_secs());
    };
    while !stop.load(Ordering::Relaxed) {
        let mut any = false;
        while let Some(m) = sub.try_recv() {
            any = true;
            if let Some(k) = Kind::of(&m) {
                let Some((_, l)) = limits.iter_mut().find(|(x, _)| *x == k) else {
                    continue;
                };
                match l.check(now()) {
                    LogCheck::Hold => continue,
                    LogCheck::Log { held } if held > 0 => suppressed(k, held),
                    LogCheck::Log { .. } => {}
                }
            }
            let ifname = node
                .stack
                .interfaces()
                .get(m.ifindex as usize)
                .map_or_else(|| format!("if{}", m.ifindex), |i| i.name.clone());
            let mut s = format!("{} {}", m.kind.name(), m.dst);
            if let Some(g) = m.gateway {
                s += &format!(" gateway {g}");
            }
            if let Some(a) = m.lladdr {
                s += &format!(" lladdr {}", wire::EthernetAddress(a));
            }
            if m.flags.contains(route::RtFlags::PROTO2) {
                // A routing daemon's routes: it logs them itself, and a full
                // table is a million of them.
                tracing::debug!(target: "route", "{s} on {ifname} flags <{}>", m.flags);
            } else {
                tracing::info!(target: "route", "{s} on {ifname} flags <{}>", m.flags);
            }
        }
        for (k, l) in &mut limits {
            if let Some(n) = l.lifted(now()) {
                suppressed(*k, n);
            }
        }
        let d = node.stack.route_messages_dropped();
        if d != dropped {
            tracing::warn!(target: "route", "{} routing message(s) lost (a reader was slow)", d - dropped);
            dropped = d;
        }
        if !any {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
