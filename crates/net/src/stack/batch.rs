//! The parts of a worker's state one poll's stages use ([`Cx`]), side by side,
//! and the borrows each family's stages are given from them. The worker
//! (`stack::worker`) builds it; the netchannels' worker side
//! (`stack::netchannel`) takes it too, so it lives beside both.

use crate::inet::cx::{Inet4, InetCx};
use crate::inet6::cx::{Inet6, Inet6Cx};
use crate::ip::IpCx;
use crate::ip46::Ip46Cx;
use crate::link::LinkCx;
use crate::tcp::layer::cx::TcpLayer;
use crate::tcp::layer::{TcpCx, TcpWorker};
use std::sync::Arc;

/// What the worker's phases run with: the parts of the worker's state a batch
/// uses, side by side (the link's context, what both IP families share, each
/// family's own, TCP's, the connections, and the worker's own input state). A
/// stage is given only the borrows it needs, through [`Cx::inet`], [`Cx::inet6`]
/// and [`Cx::tcp`]: IPv4 and IPv6 are siblings, and neither reaches the other's.
pub(crate) struct Cx<'a> {
    pub link: LinkCx<'a>,
    pub ip: IpCx<'a>,
    pub v4: Inet4<'a>,
    pub v6: Inet6<'a>,
    pub tcp: TcpLayer<'a>,
    /// This worker's TCP connections.
    pub tw: &'a mut TcpWorker,
    /// The IP tunnels, for their input.
    pub tunnels: &'a [crate::tunnel::TunnelConf],
    /// The netchannels, offered each locally delivered packet before the protocol
    /// switch.
    pub netchannels: &'a [Arc<crate::netchan::NetchanShared>],
    /// Packets queued this batch per netchannel (its index in `netchannels`): added
    /// to its shared count once, at the end of the batch, not per packet.
    pub netchan_tally: &'a mut Vec<(usize, u64)>,
}

impl<'a> Cx<'a> {
    /// IPv4's stages' borrows.
    #[inline(always)]
    pub fn inet(&mut self) -> InetCx<'_, 'a> {
        self.ip46().into_inet()
    }

    /// IPv6's stages' borrows.
    #[inline(always)]
    pub fn inet6(&mut self) -> Inet6Cx<'_, 'a> {
        self.ip46().into_inet6()
    }

    /// Both IP families' borrows (tunnels, the firewall's answers).
    #[inline(always)]
    pub fn ip46(&mut self) -> Ip46Cx<'_, 'a> {
        Ip46Cx {
            link: &mut self.link,
            ip: &mut self.ip,
            v4: &mut self.v4,
            v6: &mut self.v6,
        }
    }

    /// TCP's borrows, and the connections beside them.
    #[inline(always)]
    pub fn tcp(&mut self) -> (TcpCx<'_, 'a>, &mut TcpWorker) {
        (
            TcpCx {
                link: &mut self.link,
                ip: &mut self.ip,
                v4: &mut self.v4,
                v6: &mut self.v6,
                tcp: &mut self.tcp,
            },
            &mut *self.tw,
        )
    }
}
