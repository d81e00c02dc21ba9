//! The sockets homed on a worker: their send queues drained, a burst each, to
//! the output of their protocol.

use super::{Cx, Poll};
use crate::inet::{icmp, udp};
use crate::sockbuf::SockShared;
use crate::stack::socket::SockKind;
use std::sync::atomic::Ordering;

/// Drains a burst from the send queue of each socket homed here; notes a socket
/// with more to send (the worker runs again) and a closed one now drained.
#[inline]
pub(super) fn drain(cx: &mut Cx<'_>, w: &mut Poll<'_>) {
    let Some(socks) = w.cfg.by_worker.get(w.id) else {
        return;
    };
    for s in socks {
        let mut sent = false;
        for _ in 0..w.burst {
            let Some(d) = s.txq.pop() else { break };
            sent = true;
            *w.worked = true;
            match s.kind {
                SockKind::Udp => udp_send(cx, s, d),
                SockKind::IcmpEcho => icmp::echo_output(&mut cx.inet(), s, d),
                SockKind::Netchannel => crate::stack::netchannel::output(cx, d.m),
            }
        }
        if sent {
            // A task may wait for room in the send queue.
            cx.ip.wake_socket(s);
        }
        if !s.txq.is_empty() {
            w.more = true;
        } else if s.closed.load(Ordering::Acquire) {
            w.drained_closed = true;
        }
    }
}

/// A datagram from a UDP socket's send queue, to the output of its family.
fn udp_send(cx: &mut Cx<'_>, s: &SockShared, d: crate::sockbuf::TxDatagram) {
    match (s.local, d.to) {
        (std::net::SocketAddr::V6(l), std::net::SocketAddr::V6(to)) => {
            crate::inet6::udp6::udp6_output(&mut cx.inet6(), s, d.m, *l.ip(), to)
        }
        _ => udp::udp_output(&mut cx.inet(), s, d),
    }
}
