//! TCP's batch context: the link's context and both IP families' (IPv4 and IPv6
//! side by side: a connection is of either), and TCP's own part of the batch
//! ([`TcpLayer`]: its settings, the listeners by port, the other workers' inboxes,
//! Fast Open's key and the memory bound). The worker's connections
//! ([`TcpWorker`](super::TcpWorker)) are not in it: the worker lends them beside it.

use super::TcpMsg;
use crate::inet::cx::{Inet4, InetCx};
use crate::inet6::cx::{Inet6, Inet6Cx};
use crate::ip::IpCx;
use crate::link::LinkCx;
use crate::stats::DropReason;
use crate::tcp::chan::ListenShared;
use crate::tcp::TcpConfig;
use crate::FxBuild;
use crossbeam_queue::ArrayQueue;
use std::collections::HashMap;
use std::sync::Arc;

/// TCP's own part of a batch on a worker.
pub(crate) struct TcpLayer<'a> {
    pub cfg: TcpConfig,
    pub nworkers: usize,
    /// TCP listeners by port.
    pub listen: &'a HashMap<u16, Vec<Arc<ListenShared>>, FxBuild>,
    /// Per worker: TCP work from applications and other workers.
    pub inboxes: &'a [ArrayQueue<TcpMsg>],
    /// Fast Open's cookie key and client cache (the stack's).
    pub tfo: &'a crate::tcp::fastopen::TfoState,
    /// The stack's TCP memory (`tcp::mem`): the workers' sums and the state.
    pub mem: &'a crate::tcp::mem::TcpMem,
    /// Work was given to another worker this poll: whoever drives the workers must
    /// run them again (a simulation may have polled that worker already).
    pub handed_off: bool,
}

/// What TCP code is given for one batch: the link's context, what both IP
/// families share, each family's own state and TCP's, side by side.
pub(crate) struct TcpCx<'b, 'a> {
    pub link: &'b mut LinkCx<'a>,
    pub ip: &'b mut IpCx<'a>,
    pub v4: &'b mut Inet4<'a>,
    pub v6: &'b mut Inet6<'a>,
    pub tcp: &'b mut TcpLayer<'a>,
}

impl<'a> crate::link::AsLink<'a> for TcpCx<'_, 'a> {
    #[inline(always)]
    fn link(&mut self) -> &mut LinkCx<'a> {
        self.link
    }
}

impl<'a> TcpCx<'_, 'a> {
    /// IPv4's context, for a segment that leaves by IPv4.
    #[inline(always)]
    pub fn inet(&mut self) -> InetCx<'_, 'a> {
        self.ip46().into_inet()
    }

    /// IPv6's context, for a segment that leaves by IPv6.
    #[inline(always)]
    pub fn inet6(&mut self) -> Inet6Cx<'_, 'a> {
        self.ip46().into_inet6()
    }

    /// Both families' borrows.
    #[inline(always)]
    pub fn ip46(&mut self) -> crate::ip46::Ip46Cx<'_, 'a> {
        crate::ip46::Ip46Cx {
            link: self.link,
            ip: self.ip,
            v4: self.v4,
            v6: self.v6,
        }
    }

    /// Hands TCP work to worker `w` (its inbox) and wakes it.
    pub(crate) fn handoff_tcp(&mut self, w: usize, msg: TcpMsg) {
        match self.tcp.inboxes.get(w) {
            Some(q) => {
                if q.push(msg).is_err() {
                    DropReason::TcpHandoffDrop.count(self.link.stats);
                }
                self.tcp.handed_off = true;
                self.v6.ctl6.notify_worker(w);
            }
            None => DropReason::TcpHandoffDrop.count(self.link.stats),
        }
    }
}
