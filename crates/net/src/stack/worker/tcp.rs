//! TCP's share of a worker's poll outside the stages: the work applications and
//! other workers hand over, and the memory bound's and the gauges' look at the
//! worker's connections as the poll ends. Its timers are in the registry
//! (`timers`) with every protocol's.

use super::{Cx, Poll};
use crate::tcp::layer::{tcp_mem_tick, tcp_msg, TcpMsg};

/// The worker's TCP inbox (segments, connects, wake-ups from applications and
/// other workers) and the wake-ups that overflowed it. Their output waits for
/// the end of the batch: TCP's timer, which the registry runs next, sends it.
#[inline]
pub(super) fn inbox(cx: &mut Cx<'_>, w: &mut Poll<'_>) {
    let (mut cx, tw) = cx.tcp();
    if let Some(inbox) = w.shared.tcp_inbox.get(w.id) {
        for _ in 0..w.burst * 4 {
            let Some(msg) = inbox.pop() else { break };
            *w.worked = true;
            tcp_msg(&mut cx, tw, msg);
        }
        if !inbox.is_empty() {
            w.more = true;
        }
    }
    if let Some(o) = w.shared.tcp_overflow.get(w.id).filter(|o| o.pending()) {
        for s in o.take() {
            tcp_msg(&mut cx, tw, TcpMsg::Wake(s));
        }
    }
}

/// End of the poll: the memory bound's tick, then the gauges of the worker's
/// connections.
#[inline]
pub(super) fn end_of_poll(cx: &mut Cx<'_>) {
    let (mut t, tw) = cx.tcp();
    tcp_mem_tick(&mut t, tw);
    let stats = &mut *t.link.stats;
    stats.tcp.mem = tw.mem() as u64;
    stats.tcp.pcbcount = tw.count() as u64;
    stats.tcp.orphans = tw.orphans() as u64;
    stats.tcp.timerentries = tw.timer_entries() as u64;
}
