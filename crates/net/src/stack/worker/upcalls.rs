//! What the stages below left for the layers above, run by the worker after
//! them: the output TCP input deferred to the end of a batch, the answers to what
//! the hooks refused, what ICMP learnt for TCP.

use super::Cx;
use crate::inet::cx::CtlInput;

/// Runs the TCP output that waited for the end of a batch of segments.
pub(super) fn flush_tcp(cx: &mut Cx<'_>) {
    upcalls(cx);
    let (mut t, tw) = cx.tcp();
    crate::tcp::layer::tcp_flush(&mut t, tw);
    upcalls(cx);
}

/// What the stages below left for the layers above: the answers to what the hooks
/// refused, and what ICMP learnt for TCP (`pr_ctlinput`). The stages never call up;
/// the worker does, here, after them.
pub(super) fn upcalls(cx: &mut Cx<'_>) {
    if !cx.link.rejects.is_empty() {
        let mut rejects = std::mem::take(&mut *cx.link.rejects);
        for r in rejects.drain(..) {
            crate::stack::reject::send_reject(&mut cx.ip46(), r.m, r.point, r.how);
        }
        *cx.link.rejects = rejects;
    }
    if !cx.ip.ctlinput.is_empty() {
        let mut ctl = std::mem::take(&mut *cx.ip.ctlinput);
        for c in ctl.drain(..) {
            match c {
                CtlInput::Tcp { local, remote, ctl } => {
                    let tuple = crate::tcp::layer::Tuple { local, remote };
                    let (mut t, tw) = cx.tcp();
                    crate::tcp::layer::tcp_ctlinput(&mut t, tw, tuple, ctl);
                }
            }
        }
        *cx.ip.ctlinput = ctl;
    }
}
