//! The node's log: `tracing` events from the library (ipfw's `log` lines, DAD
//! failures, a worker's panic) and the routing socket's messages (routes, addresses,
//! neighbours), one line each on standard error, at `--log-level` and above.
//!
//! What it owns: where the events go. What it may call: the stack's routing
//! messages.

use super::cmds::Node;
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

/// Logs every routing message (a route added, changed or deleted, an address, a
/// neighbour learnt or lost) until `stop`, with the interface's name.
pub fn route_events(node: &Node<'_>, stop: &AtomicBool) {
    if !tracing::enabled!(target: "route", tracing::Level::INFO) {
        return;
    }
    let sub = node.stack.subscribe_routes(4096);
    let mut dropped = node.stack.route_messages_dropped();
    while !stop.load(Ordering::Relaxed) {
        let mut any = false;
        while let Some(m) = sub.try_recv() {
            any = true;
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
