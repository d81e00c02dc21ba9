//! What the stages below left for the layers above, run by the worker after
//! them: the output TCP input deferred to the end of a batch, the answers to what
//! the hooks refused, what ICMP learnt for TCP.

use super::Cx;
use crate::inet::cx::CtlInput;

/// Runs the TCP output that waited for the end of a batch of segments.
pub(super) fn flush_tcp(cx: &mut Cx<'_>) {
    upcalls(cx);
    if let Some(tw) = cx.tcp.take() {
        crate::tcp::layer::tcp_flush(cx, tw);
        cx.tcp = Some(tw);
    }
    upcalls(cx);
}

/// What the stages below left for the layers above: the answers to what the hooks
/// refused, and what ICMP learnt for TCP (`pr_ctlinput`). The stages never call up;
/// the worker does, here, after them.
pub(super) fn upcalls(cx: &mut Cx<'_>) {
    if !cx.rejects.is_empty() {
        let mut rejects = std::mem::take(&mut *cx.ip6.ip4.link.rejects);
        for r in rejects.drain(..) {
            crate::stack::reject::send_reject(cx, r.m, r.point, r.how);
        }
        *cx.ip6.ip4.link.rejects = rejects;
    }
    if !cx.ctlinput.is_empty() {
        let mut ctl = std::mem::take(&mut *cx.ip6.ip4.ctlinput);
        for c in ctl.drain(..) {
            match c {
                CtlInput::Tcp { local, remote, ctl } => {
                    let tuple = crate::tcp::layer::Tuple { local, remote };
                    crate::tcp::layer::tcp_ctlinput(cx, tuple, ctl);
                }
            }
        }
        *cx.ip6.ip4.ctlinput = ctl;
    }
}
