//! The worker's deadlines (FreeBSD's callouts of `tcp_timer`, for a whole worker): a
//! heap of connections' next deadlines, a FIFO of TIME_WAIT remnants' ends, and the
//! pass that runs what is due. A control block says when it wants to be called
//! (`Tcb::poll_at`); what it does then is `output`'s `service`.

use super::output::service;
use super::TcpCx;
use super::{Conn, TcpWorker};
use std::cmp::Reverse;

impl TcpWorker {
    pub fn poll_at(&self) -> Option<dev::Instant> {
        let conns = self.timers.peek().map(|Reverse((t, _, _))| *t);
        let tws = self.tw_queue.front().map(|(t, _, _)| *t);
        conns.into_iter().chain(tws).min()
    }

    /// Registers slot `i`'s connection's next deadline (after it was serviced).
    pub(super) fn arm(&mut self, i: usize, c: &mut Conn) {
        if let Some(t) = c.tcb.poll_at() {
            if c.timer_at.is_none_or(|r| t < r) {
                c.timer_at = Some(t);
                self.timers.push(Reverse((t, i, self.slab.gen(i))));
                // Stale entries (deadlines that moved) leave only when their time
                // comes, which for a keepalive is hours: sweep them when they
                // outnumber the connections, so the heap stays O(connections).
                if self.timers.len() > 4 * self.conns.len() + 64 {
                    let slab = &self.slab;
                    let (here, at) = (i, t);
                    self.timers.retain(|Reverse((t, j, g))| {
                        (*j == here && *t == at)
                            || (slab.is_current(*j, *g)
                                && slab.get(*j).is_some_and(|c| c.timer_at == Some(*t)))
                    });
                }
            }
        }
    }

    /// Entries in the timer heap (current and stale), a gauge.
    pub fn timer_entries(&self) -> usize {
        self.timers.len() + self.tw_queue.len()
    }
}

/// Runs the timers that are due, earliest first, from the worker's heap.
pub(crate) fn tcp_timers(cx: &mut TcpCx<'_, '_>, tw: &mut TcpWorker) {
    time_wait_timers(cx, tw);
    // Bounded per poll, so a burst of expiries cannot starve the rest of the loop.
    for _ in 0..4096 {
        match tw.timers.peek() {
            Some(Reverse((t, _, _))) if *t <= cx.link.now => {}
            _ => return,
        }
        let Some(Reverse((t, i, g))) = tw.timers.pop() else {
            return;
        };
        if !tw.slab.is_current(i, g) {
            continue;
        }
        let due = match tw.slab.get_mut(i) {
            Some(c) if c.timer_at == Some(t) => {
                c.timer_at = None;
                c.tcb.poll_at()
            }
            // Stale: the connection holds an earlier entry, or none.
            _ => continue,
        };
        match due {
            Some(d) if d <= cx.link.now => service(cx, tw, i),
            Some(d) => {
                // Came up early (the deadline moved later): wait for the real one.
                if let Some(c) = tw.slab.get_mut(i) {
                    c.timer_at = Some(d);
                }
                tw.timers.push(Reverse((d, i, g)));
            }
            None => {}
        }
    }
}

/// Ends the TIME_WAIT remnants whose wait is over (at most 4096 a poll).
fn time_wait_timers(cx: &mut TcpCx<'_, '_>, tw: &mut TcpWorker) {
    for _ in 0..4096 {
        let Some(&(t, j, g)) = tw.tw_queue.front().filter(|(t, _, _)| *t <= cx.link.now) else {
            return;
        };
        tw.tw_queue.pop_front();
        if !tw.tws.is_current(j, g) {
            continue;
        }
        match tw.tws.get(j).copied() {
            Some((_, rem, _)) if rem.deadline <= t => {
                tw.remove_tw(j);
                cx.link.stats.tcp.closed += 1;
            }
            // Restarted by a retransmitted FIN: to the back, for its new deadline.
            Some((_, rem, _)) => tw.tw_queue.push_back((rem.deadline, j, g)),
            None => {}
        }
    }
}
