//! The worker's output phases: frames other workers handed over for a queue this
//! worker owns ([`handed_over`]), and the flush of what the poll produced
//! ([`flush`]): the virtual interfaces' output first (tunnels, bridges, VLANs),
//! then one `tx_burst` per interface, or a hand-over to the queue's owner.

use super::{Cx, Poll};
use crate::runtime::{ticks, Stage};
use crate::stats::DropReason;

/// Frames handed over by workers that own no queue of an interface: queue 0 of
/// every interface belongs to worker 0, which drains them (a burst each) into
/// its output.
#[inline]
pub(super) fn handed_over(cx: &mut Cx<'_>, w: &mut Poll<'_>) {
    if w.id != 0 {
        return;
    }
    for (i, hq) in w.cfg.handoff.iter().enumerate() {
        for _ in 0..w.burst {
            match hq.pop() {
                Some(m) => cx.link.tx[i].push(m),
                None => break,
            }
        }
        if !hq.is_empty() {
            w.more = true;
        }
    }
}

/// Sends what the poll produced. Nothing leaves by an interface that is down.
#[inline]
pub(super) fn flush(cx: &mut Cx<'_>, w: &mut Poll<'_>) {
    let cfg = w.cfg;
    {
        let link = &mut cx.link;
        for (ifp, q) in cfg.ifaces.iter().zip(link.tx.iter_mut()) {
            if !q.is_empty() && !ifp.is_up() {
                DropReason::EtherIfDown.count_n(link.stats, q.len() as u64);
                q.clear();
            }
        }
    }
    virtual_output(cx, w);
    // Then one tx burst per interface, or hand over to the queue's owner.
    let link = &mut cx.link;
    for (i, out) in link.tx.iter_mut().enumerate() {
        if out.is_empty() {
            continue;
        }
        if cfg.ifaces.get(i).is_some_and(|f| !f.is_up()) {
            // A bridge's or a VLAN's output onto a member that is down.
            DropReason::EtherIfDown.count_n(link.stats, out.len() as u64);
            out.clear();
            continue;
        }
        match w.txq_of_if.get(i).copied().flatten() {
            Some(qi) => {
                let (t, n) = (ticks(), out.len());
                w.queues[qi].q.tx_burst(w.now, out);
                // Whatever the device did not take it has counted and dropped.
                out.clear();
                w.rt.count(Stage::Tx, n, t);
            }
            None => {
                let hq = &cfg.handoff[i];
                for m in out.drain(..) {
                    if hq.push(m).is_err() {
                        DropReason::EtherOutDropped.count(link.stats);
                    }
                }
                // Queue 0 of every interface belongs to worker 0.
                cx.tcp.handed_off = true;
                w.shared.notify_worker(0);
            }
        }
    }
}

/// The output of the interfaces without a device, onto those below them.
#[inline]
fn virtual_output(cx: &mut Cx<'_>, w: &mut Poll<'_>) {
    let cfg = w.cfg;
    // First what the host sent into a tunnel, encapsulated and out by
    // the outer destination's route (which may be a bridge or a VLAN).
    for tc in cfg.tunnels.iter() {
        let i = tc.ifindex.get();
        if cx.link.tx.get(i).is_some_and(|q| !q.is_empty()) {
            let mut out = std::mem::take(&mut cx.link.tx[i]);
            crate::tunnel::tunnel_output(&mut cx.ip46(), tc, &mut out);
            cx.link.tx[i] = out;
        }
    }
    // Then what the host sent on a bridge's interface, to the bridge's members
    // (a bridge has no device of its own).
    for bc in cfg.bridges.list.iter() {
        let i = bc.br.ifindex.get();
        if cx.link.tx.get(i).is_some_and(|q| !q.is_empty()) {
            let mut out = std::mem::take(&mut cx.link.tx[i]);
            crate::link::bridge::input::bridge_output(&mut cx.link, bc, &mut out);
            cx.link.tx[i] = out;
        }
    }
    // Then what was sent on a VLAN interface (by the host or a bridge), tagged,
    // to its parent.
    for vc in cfg.bridges.vlans.iter() {
        let i = vc.ifindex.get();
        if cx.link.tx.get(i).is_some_and(|q| !q.is_empty()) {
            let mut out = std::mem::take(&mut cx.link.tx[i]);
            crate::link::bridge::vlan::vlan_output(&mut cx.link, vc, &mut out);
            cx.link.tx[i] = out;
        }
    }
}
