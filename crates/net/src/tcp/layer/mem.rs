//! The worker's side of the TCP memory bound (`tcp::mem`): each connection's
//! bytes counted when it is serviced (`TcpWorker::charge`), the worker's sum published and
//! the state looked at now and then ([`tcp_mem_tick`]), connections clamped for
//! the state (`Conn::apply_clamp`), and orphans reset above high.

use super::output::service;
use super::TcpCx;
use super::{Conn, TcpWorker};
use crate::tcp::mem::{MemState, CHECK_EVERY, QUANTUM};

/// Orphans are looked for this often while above high (and on entering it).
const RECLAIM_EVERY: dev::Duration = dev::Duration::from_millis(100);

impl TcpWorker {
    /// Counts what `c` holds now in the worker's sum: the control block's buffers,
    /// the two channels, the chunk being moved from the application. A few loads
    /// per service, nothing shared written.
    pub(super) fn charge(&mut self, c: &mut Conn) {
        let partial = c
            .tx_partial
            .as_ref()
            .map_or(0, |(ch, off)| ch.len().saturating_sub(*off));
        let held = c.tcb.mem_held() + c.s.tx.len() + c.s.rx.len() + partial;
        self.mem = self.mem - c.mem + held;
        c.mem = held;
    }
}

impl Conn {
    /// Clamps the connection's buffers and channels to `clamp` bytes each; a
    /// writer waiting for room it now has is woken.
    pub(super) fn apply_clamp(&mut self, clamp: usize) {
        self.tcb.set_mem_clamp(clamp);
        self.s.rx.set_limit(clamp);
        if self.s.tx.set_limit(clamp) {
            self.s.wake_writer();
        }
    }
}

/// End of a worker's poll: publishes the worker's sum when it moved by a quantum
/// (or, less, at the next check), and every [`CHECK_EVERY`] (or after such a
/// publication) sums the workers' and moves the state on: on a change every
/// connection of the worker is clamped anew (a rare pass over them; a connection
/// is also clamped when next serviced), and above high the orphans holding
/// memory are reset and freed.
pub(crate) fn tcp_mem_tick(cx: &mut TcpCx<'_, '_>, tw: &mut TcpWorker) {
    let now = cx.link.now;
    let moved = tw.mem.abs_diff(tw.mem_published);
    let due = tw.mem_check.is_none_or(|t| now >= t);
    if moved >= QUANTUM || (due && moved > 0) {
        cx.tcp.mem.publish(cx.link.worker, tw.mem);
        tw.mem_published = tw.mem;
    }
    if moved < QUANTUM && !due {
        return;
    }
    tw.mem_check = Some(now + CHECK_EVERY);
    let (state, change) = cx.tcp.mem.update(&cx.tcp.cfg.mem);
    match change {
        Some((MemState::Normal, MemState::Pressure)) => cx.link.stats.tcp.mempressure += 1,
        Some((from, MemState::High)) => {
            cx.link.stats.tcp.memhigh += 1;
            // Straight from normal: it passed pressure on the way.
            if from == MemState::Normal {
                cx.link.stats.tcp.mempressure += 1;
            }
        }
        _ => {}
    }
    if state != tw.mem_state {
        tw.mem_state = state;
        let clamp = state.clamp();
        for i in 0..tw.slab.slots() {
            if let Some(c) = tw.slab.get_mut(i) {
                if c.tcb.mem_clamp() != clamp {
                    c.apply_clamp(clamp);
                }
            }
        }
        tw.mem_reclaim = None;
    }
    if state == MemState::High && tw.mem_reclaim.is_none_or(|t| now >= t) {
        tw.mem_reclaim = Some(now + RECLAIM_EVERY);
        reclaim_orphans(cx, tw);
    }
}

/// Resets and frees every orphan of the worker that holds memory (Linux's
/// `tcp_out_of_resources` with `tcp_out_of_memory`: an orphan's data has no
/// reader waiting for it, so it goes before any live connection is refused).
fn reclaim_orphans(cx: &mut TcpCx<'_, '_>, tw: &mut TcpWorker) {
    if tw.orphans == 0 {
        return;
    }
    for i in 0..tw.slab.slots() {
        let Some(c) = tw.slab.get_mut(i) else {
            continue;
        };
        if !c.orphan || c.mem == 0 {
            continue;
        }
        cx.link.stats.tcp.memorphandrop += 1;
        cx.link.stats.tcp.drops += 1;
        c.tcb.abort();
        // Sends the reset and frees the slot (uncharging it).
        service(cx, tw, i);
    }
    let mem = tw.mem;
    if mem != tw.mem_published {
        cx.tcp.mem.publish(cx.link.worker, mem);
        tw.mem_published = mem;
    }
}
