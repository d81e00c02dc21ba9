//! The end of a worker's poll: the flow table's sweep, the counters published
//! (throttled while the worker is saturated), the applications woken.

use super::{Cx, Poll, PUBLISH_EVERY, QSTATS_EVERY};
use std::sync::atomic::Ordering;

/// Publishes the worker's counters and wakes the applications the poll served.
#[inline]
pub(super) fn publish(cx: &mut Cx<'_>, w: &mut Poll<'_>) {
    let (now, id, shared) = (w.now, w.id, w.shared);
    if let Some(ft) = cx.ip.flows.as_deref_mut() {
        // An incremental sweep: a few sets per poll keep idle entries from
        // lingering without a pass over the whole table.
        ft.expire_some(now.as_nanos(), 16);
        let f = ft.stats();
        cx.link.stats.flow = crate::stats::FlowStat {
            hits: f.hits,
            misses: f.misses,
            stale: f.stale,
            expired: f.expired,
            inserts: f.inserts,
            evictions: f.evictions,
        };
    }
    let saturated = w.throttle && (w.more || cx.tcp.handed_off);
    if !saturated || now.saturating_duration_since(*w.published) >= PUBLISH_EVERY {
        shared.stats[id].publish(cx.link.stats);
        shared.runtime[id].publish(w.rt);
        *w.published = now;
        let queues = &*w.queues;
        if now.saturating_duration_since(*w.qpublished) >= QSTATS_EVERY || *w.qlen != queues.len() {
            let mut q = shared.qstats[id].lock().unwrap_or_else(|e| e.into_inner());
            q.clear();
            q.extend(queues.iter().map(|x| (id, x.ifindex, x.q.stats())));
            *w.qpublished = now;
            *w.qlen = queues.len();
        }
    }
    for (i, n) in cx.netchan_tally.drain(..) {
        cx.netchannels[i].delivered.fetch_add(n, Ordering::Relaxed);
    }
    for s in cx.ip.wake.drain(..) {
        s.wake();
    }
    cx.tw.wake_readers();
}
