//! TCP's batch context: the IPv6 context below it (reached through `Deref`), the
//! worker's connections, TCP's settings, the listeners by port, and the other
//! workers' inboxes (a segment or a wake-up for a connection homed elsewhere goes
//! there).

use super::{TcpMsg, TcpWorker};
use crate::inet6::cx::Inet6Cx;
use crate::stats::DropReason;
use crate::tcp::chan::ListenShared;
use crate::tcp::TcpConfig;
use crate::FxBuild;
use crossbeam_queue::ArrayQueue;
use std::collections::HashMap;
use std::sync::Arc;

/// What TCP code may touch while processing one batch.
pub(crate) struct TcpCx<'a> {
    /// IPv6's context (and so IPv4's and the link's), below this one.
    pub ip6: Inet6Cx<'a>,
    /// This worker's TCP connections; taken out while TCP code runs.
    pub tcp: Option<&'a mut TcpWorker>,
    pub tcp_cfg: TcpConfig,
    pub nworkers: usize,
    /// TCP listeners by port.
    pub listen: &'a HashMap<u16, Vec<Arc<ListenShared>>, FxBuild>,
    /// Per worker: TCP work from applications and other workers.
    pub inboxes: &'a [ArrayQueue<TcpMsg>],
    /// The IP tunnels, for their input.
    pub tunnels: &'a [crate::tunnel::TunnelConf],
    /// The netchannels, offered each locally delivered packet before the protocol
    /// switch (the worker's; TCP code does not look at them).
    pub netchannels: &'a [Arc<crate::netchan::NetchanShared>],
    /// Packets queued this batch per netchannel (its index in `netchannels`): added
    /// to its shared count once, at the end of the batch, not per packet.
    pub netchan_tally: &'a mut Vec<(usize, u64)>,
    /// Fast Open's cookie key and client cache (the stack's).
    pub tfo: &'a crate::tcp::fastopen::TfoState,
    /// The stack's TCP memory (`tcp::mem`): the workers' sums and the state.
    pub tcp_mem: &'a crate::tcp::mem::TcpMem,
    /// Work was given to another worker this poll: whoever drives the workers must
    /// run them again (a simulation may have polled that worker already).
    pub handed_off: bool,
}

impl<'a> std::ops::Deref for TcpCx<'a> {
    type Target = Inet6Cx<'a>;
    #[inline(always)]
    fn deref(&self) -> &Inet6Cx<'a> {
        &self.ip6
    }
}

impl<'a> std::ops::DerefMut for TcpCx<'a> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Inet6Cx<'a> {
        &mut self.ip6
    }
}

impl<'a> crate::link::AsLink<'a> for TcpCx<'a> {
    #[inline(always)]
    fn link(&mut self) -> &mut crate::link::LinkCx<'a> {
        &mut self.ip6.ip4.link
    }
}

impl TcpCx<'_> {
    /// Hands TCP work to worker `w` (its inbox) and wakes it.
    pub(crate) fn handoff_tcp(&mut self, w: usize, msg: TcpMsg) {
        match self.inboxes.get(w) {
            Some(q) => {
                if q.push(msg).is_err() {
                    DropReason::TcpHandoffDrop.count(self.ip6.ip4.link.stats);
                }
                self.handed_off = true;
                self.ip6.ctl6.notify_worker(w);
            }
            None => DropReason::TcpHandoffDrop.count(self.ip6.ip4.link.stats),
        }
    }
}
