//! [`NetConfig`], the configuration the data path reads (published as a whole, see
//! the parent module): its parts, what is derived from the interfaces before each
//! publication, and the source address selection a connection makes over it.

use super::socket::SockShared;
use crate::link::iface::Ifnet;
use crate::pfil::PfilHeads;
use crate::tcp::chan::ListenShared;
use crate::FxBuild;
use crossbeam_queue::ArrayQueue;
use mbuf::Mbuf;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

/// The configuration the data path reads, published as a whole.
#[derive(Clone, Debug, Default)]
pub struct NetConfig {
    pub generation: u64,
    pub ifaces: Vec<Arc<Ifnet>>,
    /// IPv4's part: the default gateway, path MTUs, the stack's addresses, the
    /// echo sockets.
    pub inet: crate::inet::cx::InetConfig,
    /// UDP sockets by port (both families').
    pub(crate) udp: crate::ip::UdpPorts,
    /// IPv6's part: the static default router and what neighbour discovery learnt.
    pub inet6: crate::inet6::cx::Inet6Config,
    pub pfil: PfilHeads,
    /// Sockets by home worker, so each worker drains only its own send queues.
    pub(crate) by_worker: Vec<Vec<Arc<SockShared>>>,
    /// The netchannels, in the order they were opened (the first that matches a
    /// packet takes it).
    pub(crate) netchannels: Vec<Arc<crate::netchan::NetchanShared>>,
    /// Frames for an interface from workers that own none of its queues.
    pub(crate) handoff: Vec<Arc<ArrayQueue<Mbuf>>>,
    /// TCP listeners by port.
    pub(crate) tcp_listen: HashMap<u16, Vec<Arc<ListenShared>>, FxBuild>,
    /// The bridges and their member lists.
    pub bridges: crate::link::bridge::Bridges,
    /// The IP tunnels (`gif`, `gre`).
    pub tunnels: Vec<crate::tunnel::TunnelConf>,
    /// The settings new TCP connections take (`StackConfig::tcp` until
    /// [`Stack::set_tcp_config`](super::Stack::set_tcp_config) changes them at run time).
    pub tcp: crate::tcp::TcpConfig,
}

impl NetConfig {
    /// True if `a` is one of the stack's addresses.
    #[inline]
    pub fn is_local(&self, a: Ipv4Addr) -> bool {
        self.inet.is_local(a)
    }

    /// Remakes what is derived from the interfaces (before a publication).
    pub(super) fn reindex(&mut self) {
        let local4 = self
            .ifaces
            .iter()
            .flat_map(|i| i.addrs.iter().map(|a| a.addr))
            .collect();
        let bcast4 = self
            .ifaces
            .iter()
            .flat_map(|i| {
                i.addrs
                    .iter()
                    .filter_map(|a| Some((a.broadcast()?, i.index)))
            })
            .collect();
        let net4 = self
            .ifaces
            .iter()
            .flat_map(|i| i.addrs.iter())
            .filter(|a| a.prefix_len < 31)
            .map(|a| a.network())
            .collect();
        self.inet.set_local4(local4, bcast4, net4);
        let local6 = self
            .ifaces
            .iter()
            .flat_map(|i| i.addrs6.iter().cloned())
            .collect();
        self.inet6.set_local6(local6);
        self.bridges.reindex(self.ifaces.len());
        self.pfil.resolve(self.ifaces.len());
    }

    /// The path MTU towards `dst` if a "fragmentation needed" taught one that has not
    /// aged.
    pub fn path_mtu4(&self, dst: Ipv4Addr, now: dev::Instant) -> Option<u32> {
        self.inet.path_mtu4(dst, now)
    }

    /// The interface whose connected network (an address's prefix) holds `a`.
    pub fn connected(&self, a: IpAddr) -> Option<&Arc<Ifnet>> {
        self.ifaces.iter().find(|i| match a {
            IpAddr::V4(a) => i.addrs.iter().any(|x| x.contains(a)),
            IpAddr::V6(a) => i.addrs6.iter().any(|x| x.addr.contains(a)),
        })
    }

    /// True if `a`, of either family, is one of the stack's addresses.
    pub fn is_local_ip(&self, a: IpAddr) -> bool {
        match a {
            IpAddr::V4(a) => self.is_local(a),
            IpAddr::V6(a) => self.ifaces.iter().any(|i| i.addr6(a).is_some()),
        }
    }
}

/// The IPv6 source for a connection to `dst`: source selection on the interface the
/// route to `dst` leaves by (on-link prefixes, then the default router's interface).
pub(super) fn source_address6(
    cfg: &NetConfig,
    dst: std::net::Ipv6Addr,
) -> Option<std::net::Ipv6Addr> {
    if cfg.ifaces.iter().any(|i| i.addr6(dst).is_some()) {
        return Some(dst);
    }
    let on_link = cfg.ifaces.iter().find(|i| {
        i.addrs6
            .iter()
            .any(|a| !crate::link::iface::is_link_local(a.addr.addr) && a.addr.contains(dst))
    });
    let by_router = || {
        let gw = cfg
            .inet6
            .default_gw6
            .map(|g| g.1)
            .or_else(|| cfg.inet6.nd6.routers.first().map(|r| r.ifindex))?;
        cfg.ifaces.get(gw.get())
    };
    let by_prefix = || {
        cfg.inet6
            .nd6
            .prefixes
            .iter()
            .find(|p| p.prefix.contains(dst))
            .and_then(|p| cfg.ifaces.get(p.ifindex.get()))
    };
    let first = || cfg.ifaces.iter().find(|i| i.inet6());
    on_link
        .or_else(by_prefix)
        .or_else(by_router)
        .or_else(first)
        .and_then(|i| i.source6_for(dst))
}

/// The source address for a packet to `dst`: an address on the subnet that holds it,
/// else on the default gateway's.
pub(super) fn source_address(cfg: &NetConfig, dst: Ipv4Addr) -> Option<Ipv4Addr> {
    if cfg.is_local(dst) {
        return Some(dst);
    }
    let on_link = |d: Ipv4Addr| {
        cfg.ifaces
            .iter()
            .find_map(|i| i.addrs.iter().find(|a| a.contains(d)).map(|a| a.addr))
    };
    on_link(dst).or_else(|| cfg.inet.default_gw.and_then(on_link))
}
