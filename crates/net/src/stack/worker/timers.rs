//! The worker's timer registry: each protocol that keeps timers names them here
//! once, with where they run, and the poll loop runs the
//! list ([`run`]) without knowing what is in it. A new protocol adds a line to
//! [`TIMERS`]; the loop does not change.
//!
//! A timer runs on every worker (its state is the worker's own: reassembly
//! queues, hooks' held packets, TCP's connections) or on worker 0 only (state shared by the stack:
//! the bridges' address tables, each interface's neighbour tables, router
//! discovery, MLD); a per-link timer runs for each interface with a link header
//! (a tunnel has no neighbours). Each returns when it next wants to run, and the
//! earliest of them bounds the worker's sleep. TCP's (its connections' deadlines
//! and TIME_WAIT ends, a heap in `TcpWorker`) run first: the inbox's output,
//! which waits for the end of the batch, leaves with what they send. A deadline
//! that input later in the poll can move earlier (TCP's, armed by every segment
//! looped back) is also asked for as the poll ends ([`LATE`]).

use super::input::reinject;
use super::{Cx, Vectors};
use crate::link::ether;
use crate::link::iface::Ifnet;
use crate::runtime::Runtime;
use dev::Instant;
use std::sync::Arc;

/// A timer of the worker's own state, or of the stack's (on worker 0).
type WorkerTimer = fn(&mut Cx<'_>, &mut Runtime, &mut Vectors, Instant) -> Option<Instant>;
/// A timer of one interface's state (on worker 0, for each link with a header).
type LinkTimer = fn(&mut Cx<'_>, &Arc<Ifnet>, Instant) -> Option<Instant>;

/// Where a registered timer runs, and what it is.
enum Timer {
    /// On every worker.
    Each(WorkerTimer),
    /// On worker 0 only.
    Worker0(WorkerTimer),
    /// On worker 0, for each interface with a link header.
    Link(LinkTimer),
}

/// When a protocol's timers want to run next, asked as the poll ends.
type Late = fn(&Cx<'_>) -> Option<Instant>;

/// Every protocol's timers, in the order they run (`name`, where and what).
static TIMERS: &[(&str, Timer)] = &[
    ("tcp", Timer::Each(tcp)),
    ("frag", Timer::Each(frag)),
    ("pfil-deferred", Timer::Each(pfil_deferred)),
    ("bridge", Timer::Worker0(bridge)),
    ("arp", Timer::Link(arp)),
    (
        "nd6",
        Timer::Link(|cx, ifp, _| crate::inet6::nd6::nd6_timer(&mut cx.inet6(), ifp)),
    ),
    (
        "rtsol",
        Timer::Link(|cx, ifp, _| crate::inet6::nd6::nd6_rtsol_timer(&mut cx.inet6(), ifp)),
    ),
    (
        "mld",
        Timer::Link(|cx, ifp, _| crate::inet6::nd6::mld_timer(&mut cx.inet6(), ifp)),
    ),
    (
        "rtadv",
        Timer::Link(|cx, ifp, _| crate::inet6::nd6::nd6_rtadv_timer(&mut cx.inet6(), ifp)),
    ),
];

/// The timers whose next deadline input after them can move earlier, asked again
/// as the poll ends ([`late`]).
static LATE: &[(&str, Late)] = &[("tcp", |cx| cx.tw.poll_at())];

/// The names of the registered timers, in order.
#[cfg(test)]
pub(super) fn names() -> Vec<&'static str> {
    TIMERS.iter().map(|(n, _)| *n).collect()
}

/// Runs every registered timer that belongs to worker `id`; the earliest time one
/// wants to run again.
pub(super) fn run(
    cx: &mut Cx<'_>,
    rt: &mut Runtime,
    v: &mut Vectors,
    id: usize,
    now: Instant,
) -> Option<Instant> {
    let mut next: Option<Instant> = None;
    let ifaces = cx.link.ifaces;
    for (_, t) in TIMERS {
        match t {
            Timer::Each(f) => next = earliest(next, f(cx, rt, v, now)),
            Timer::Worker0(f) if id == 0 => next = earliest(next, f(cx, rt, v, now)),
            Timer::Link(f) if id == 0 => {
                for ifp in ifaces.iter().filter(|i| !i.no_link_header()) {
                    next = earliest(next, f(cx, ifp, now));
                }
            }
            _ => {}
        }
    }
    next
}

/// The earliest time a timer in [`LATE`] wants to run, asked as the poll ends.
pub(super) fn late(cx: &Cx<'_>) -> Option<Instant> {
    LATE.iter().fold(None, |next, (_, f)| earliest(next, f(cx)))
}

/// The earlier of two wake-ups, either of which may be none.
pub(super) fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// TCP's: the connections' deadlines and the TIME_WAIT ends that are due, then
/// the output TCP input deferred to the end of the batch.
fn tcp(cx: &mut Cx<'_>, _: &mut Runtime, _: &mut Vectors, _: Instant) -> Option<Instant> {
    let (mut t, tw) = cx.tcp();
    crate::tcp::layer::tcp_timers(&mut t, tw);
    crate::tcp::layer::tcp_flush(&mut t, tw);
    tw.poll_at()
}

/// Reassembly queues that ran out of time: their first fragments answered with
/// time exceeded, both families.
fn frag(cx: &mut Cx<'_>, _: &mut Runtime, _: &mut Vectors, now: Instant) -> Option<Instant> {
    if cx.ip.frag.poll_at().is_some_and(|t| t <= now) {
        cx.ip.frag.timer(now, cx.link.stats);
        while let Some(m) = cx.ip.frag.pop_expired4() {
            crate::inet::icmp::icmp_error(
                &mut cx.inet(),
                m,
                wire::Icmpv4Message::TimeExceeded,
                1,
                0,
            );
        }
        // RFC 8200 §4.5: "an ICMP Time Exceeded -- Fragment Reassembly Time
        // Exceeded message should be sent to the source of that fragment" when
        // the first fragment had come.
        while let Some(m) = cx.ip.frag.pop_expired6() {
            let e = crate::inet6::icmp6::Error6::TimeExceeded(
                wire::Icmpv6TimeExceeded::FragReassemExceeded,
            );
            crate::inet6::icmp6::icmp6_error(&mut cx.inet6(), m, e);
        }
    }
    cx.ip.frag.poll_at()
}

/// Packets a hook held (dummynet) and releases now, resumed past the hooks.
fn pfil_deferred(
    cx: &mut Cx<'_>,
    rt: &mut Runtime,
    v: &mut Vectors,
    now: Instant,
) -> Option<Instant> {
    let pfil = cx.link.pfil;
    if !pfil.has_deferring() {
        return None;
    }
    let mut next: Option<Instant> = None;
    let mut due = Vec::new();
    for h in pfil.unique() {
        h.poll(now, &mut due);
        next = earliest(next, h.next_wakeup());
    }
    for d in due {
        reinject(cx, rt, v, d);
    }
    next
}

/// The bridges' address tables: entries aged out.
fn bridge(cx: &mut Cx<'_>, _: &mut Runtime, _: &mut Vectors, _: Instant) -> Option<Instant> {
    let bridges = cx.link.bridges;
    let mut next: Option<Instant> = None;
    for bc in bridges.list.iter() {
        next = earliest(
            next,
            crate::link::bridge::input::bridge_timer(&mut cx.link, bc),
        );
    }
    next
}

/// ARP's table of one interface: retransmissions, reachability, expiry.
fn arp(cx: &mut Cx<'_>, ifp: &Arc<Ifnet>, now: Instant) -> Option<Instant> {
    if ifp.arp.poll_at().is_some_and(|t| t <= now) {
        let mut out = std::mem::take(cx.link.arp_out);
        ifp.arp.timer(now, cx.link.stats, &mut out);
        ether::arp_flush(&mut cx.link, ifp, &mut out);
        *cx.link.arp_out = out;
    }
    ifp.arp.poll_at()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_timer_is_registered_once() {
        let n = super::names();
        let mut u = n.clone();
        u.sort_unstable();
        u.dedup();
        assert_eq!(u.len(), n.len(), "{n:?}");
        // TCP's first: the inbox's deferred output leaves with its timers', as
        // before the registry had them.
        assert_eq!(n.first(), Some(&"tcp"), "{n:?}");
        for want in [
            "tcp",
            "frag",
            "pfil-deferred",
            "bridge",
            "arp",
            "nd6",
            "rtsol",
            "mld",
            "rtadv",
        ] {
            assert!(n.contains(&want), "{want} missing from {n:?}");
        }
    }
}
