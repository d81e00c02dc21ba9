//! Interfaces and their addresses: attaching a device as an interface, adding IPv4
//! and IPv6 addresses (with their connected routes and `RTM_NEWADDR`), the IPv6
//! default router, per-interface forwarding and router advertisements, and the
//! lists of them. Deleting addresses and the MTU and flags are in `ifconfig`.

use super::{local_mac, NetConfig, Shared, Stack, StackError};
use crate::link::arp::ArpTable;
use crate::link::iface::{
    flags, AddrState, IfConfig, IfIndex, Ifnet, In6Ifaddr, Inet6Addr, InetAddr,
};
use crossbeam_queue::ArrayQueue;
use dev::Device;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use wire::EthernetAddress;

impl Shared {
    /// An address came up: its network's connected route, and `RTM_NEWADDR`.
    pub(crate) fn address_added(&self, ifindex: IfIndex, addr: std::net::IpAddr, len: u8) {
        let net = route::IpPrefix::new(addr, len);
        let ifi = u32::from(ifindex.0);
        let link_local =
            matches!(addr, std::net::IpAddr::V6(a) if crate::link::iface::is_link_local(a));
        self.rtbus.send_ll(
            route::RtmType::NewAddr,
            net,
            Some(addr),
            None,
            ifi,
            route::RtFlags::UP,
        );
        if !link_local && !net.is_host() {
            // Two addresses in one network share its route.
            let _ = self.route_update(|r| r.add(route::RouteSpec::connected(net, ifi)));
        }
    }

    /// Adds an IPv6 address (tentative) to an interface, with the link-local one first
    /// if IPv6 was off there. Worker 0's timers run DAD.
    pub(crate) fn add_address6(&self, ifindex: IfIndex, a: Inet6Addr) -> Result<(), StackError> {
        self.add_ifaddr6(ifindex, a, |s| In6Ifaddr::new(a, s))
    }

    /// Adds address `a`, as `make` builds it in the state it starts in.
    pub(super) fn add_ifaddr6(
        &self,
        ifindex: IfIndex,
        a: Inet6Addr,
        make: impl Fn(AddrState) -> In6Ifaddr,
    ) -> Result<(), StackError> {
        self.update(|c| self.add_address6_locked(c, ifindex, a, make))?;
        self.address_added(ifindex, a.addr.into(), a.prefix_len);
        Ok(())
    }

    fn add_address6_locked(
        &self,
        c: &mut NetConfig,
        ifindex: IfIndex,
        a: Inet6Addr,
        make: impl Fn(AddrState) -> In6Ifaddr,
    ) -> Result<(), StackError> {
        {
            if c.ifaces.iter().any(|i| i.addr6(a.addr).is_some()) {
                return Err(StackError::DuplicateAddress6(a.addr));
            }
            let Some(old) = c.ifaces.get(ifindex.get()) else {
                return Err(StackError::Io(io::Error::new(
                    io::ErrorKind::NotFound,
                    "no such interface",
                )));
            };
            // Bounded: advertisements from the network can add addresses (SLAAC).
            if old.addrs6.len() >= crate::link::iface::MAX_ADDRS6 {
                return Err(StackError::TooManyAddresses);
            }
            let mut addrs6 = old.addrs6.clone();
            // A link with no link layer (a tunnel) runs no duplicate address
            // detection: the addresses are in use at once (as Linux does on links
            // without ARP).
            let state = if old.no_link_header() {
                AddrState::Preferred
            } else {
                AddrState::Tentative
            };
            if addrs6.is_empty() {
                let ll = Inet6Addr::link_local(old.mac);
                if ll.addr != a.addr {
                    addrs6.push(Arc::new(In6Ifaddr::new(ll, state)));
                }
            }
            addrs6.push(Arc::new(make(state)));
            c.ifaces[ifindex.get()] = Arc::new(Ifnet {
                addrs6,
                ..Ifnet::clone(old)
            });
            Ok(())
        }
    }
}

impl Stack {
    /// Attaches a device as a new interface. Queue `q` of the device goes to worker
    /// `q % workers`; workers without a queue on this interface hand their frames to
    /// the owner of queue 0 through a lock-free queue.
    pub fn add_interface(
        &mut self,
        dev: Box<dyn Device>,
        ic: IfConfig,
    ) -> Result<IfIndex, StackError> {
        if !self.threads.is_empty() {
            return Err(StackError::Running);
        }
        let info = dev.info();
        let cur = self.shared.cfg.load();
        for a in &ic.addrs {
            if cur.is_local(a.addr) {
                return Err(StackError::DuplicateAddress(a.addr));
            }
        }
        let index = IfIndex(cur.ifaces.len() as u16);
        drop(cur);
        let mac = ic.mac.unwrap_or_else(|| match info.hw_addr {
            Some(m) => EthernetAddress(m),
            None => local_mac(self.mac_seed, 0, index),
        });
        let ifp = Arc::new(Ifnet {
            index,
            name: ic.name.clone().unwrap_or(info.name.clone()),
            mac,
            mtu: ic.mtu.unwrap_or(info.mtu),
            flags: flags::IFF_UP | flags::IFF_BROADCAST,
            addrs: ic.addrs.clone(),
            addrs6: Vec::new(),
            arp: Arc::new(ArpTable::new(self.shared.params.arp)),
            nd6: Arc::new(crate::inet6::nd6::Nd6Table::new(self.shared.params.arp)),
            num_queues: info.num_queues.max(1),
            forwarding: Arc::default(),
            offload: info.offload,
        });
        ifp.arp.set_watch(index.0 as u32, self.shared.rtbus.clone());
        ifp.nd6.set_watch(index.0 as u32, self.shared.rtbus.clone());
        let workers = self.workers.get_mut().unwrap_or_else(|e| e.into_inner());
        let nworkers = workers.len();
        let queues = dev.into_queues();
        for (q, queue) in queues.into_iter().enumerate() {
            workers[q % nworkers].attach_queue(index, queue);
        }
        let hq = self.shared.params.handoff_queue;
        self.shared.update(|c| {
            c.ifaces.push(ifp);
            c.handoff.push(Arc::new(ArrayQueue::new(hq.max(1))));
        });
        for a in &ic.addrs {
            self.shared
                .address_added(index, a.addr.into(), a.prefix_len);
        }
        Ok(index)
    }

    /// Adds an address to an interface.
    pub fn add_address(&self, ifindex: IfIndex, a: InetAddr) -> Result<(), StackError> {
        self.add_address_locked(ifindex, a)?;
        self.shared
            .address_added(ifindex, a.addr.into(), a.prefix_len);
        Ok(())
    }

    fn add_address_locked(&self, ifindex: IfIndex, a: InetAddr) -> Result<(), StackError> {
        self.shared.update(|c| {
            if c.is_local(a.addr) {
                return Err(StackError::DuplicateAddress(a.addr));
            }
            let Some(old) = c.ifaces.get(ifindex.get()) else {
                return Err(StackError::Io(io::Error::new(
                    io::ErrorKind::NotFound,
                    "no such interface",
                )));
            };
            let mut addrs = old.addrs.clone();
            addrs.push(a);
            c.ifaces[ifindex.get()] = Arc::new(Ifnet {
                addrs,
                ..Ifnet::clone(old)
            });
            Ok(())
        })
    }

    /// Adds an IPv6 address to an interface. The first one also turns IPv6 on there,
    /// with a link-local address from the interface's MAC (RFC 4862 §5.3). Each
    /// starts tentative: duplicate address detection (worker 0's timers) makes it
    /// preferred a second later, or duplicated if another node answers.
    pub fn add_address6(&self, ifindex: IfIndex, a: Inet6Addr) -> Result<(), StackError> {
        self.shared.add_address6(ifindex, a)?;
        // Worker 0 runs duplicate address detection.
        self.shared.notify_worker(0);
        Ok(())
    }

    /// Sets (or clears) the IPv6 default router, on interface `ifindex`.
    pub fn set_default_gateway6(&self, gw: Option<(std::net::Ipv6Addr, IfIndex)>) {
        self.shared.update(|c| c.inet6.default_gw6 = gw);
    }

    /// Every IPv6 address with its interface and state, as `ifconfig` lists them.
    pub fn addresses6(&self) -> Vec<(IfIndex, Inet6Addr, AddrState)> {
        self.shared
            .cfg
            .load()
            .ifaces
            .iter()
            .flat_map(|i| i.addrs6.iter().map(move |a| (i.index, a.addr, a.state())))
            .collect()
    }

    /// Turns router advertisements on or off on an interface (RFC 4861 §6.2: its
    /// prefixes, MTU and, while it forwards IPv6, this node as a default router).
    pub fn set_router_advertisements(&self, ifindex: IfIndex, on: bool) -> Result<(), StackError> {
        let cfg = self.shared.cfg.load();
        let ifp = cfg
            .ifaces
            .get(ifindex.get())
            .ok_or(StackError::NoInterface(ifindex))?;
        ifp.forwarding.rtadv.store(on, Ordering::Relaxed);
        self.shared.notify_worker(0);
        Ok(())
    }

    /// Turns forwarding on or off for packets arriving on an interface, per family.
    pub fn set_forwarding(
        &self,
        ifindex: IfIndex,
        inet: bool,
        inet6: bool,
    ) -> Result<(), StackError> {
        let cfg = self.shared.cfg.load();
        let ifp = cfg
            .ifaces
            .get(ifindex.get())
            .ok_or(StackError::NoInterface(ifindex))?;
        ifp.forwarding.inet.store(inet, Ordering::Relaxed);
        ifp.forwarding.inet6.store(inet6, Ordering::Relaxed);
        Ok(())
    }

    pub fn interfaces(&self) -> Vec<Arc<Ifnet>> {
        self.shared.cfg.load().ifaces.clone()
    }
}
