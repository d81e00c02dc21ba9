//! What `ifconfig` changes on a running stack beyond adding addresses: deleting
//! an address (either family; neighbour discovery deletes the autoconfigured ones
//! whose lifetime ended through the same path), setting an interface's MTU, and
//! marking it up or down. Each change is one
//! published configuration (the workers see the old or the new interface, never a
//! half-changed one) and is announced on the routing socket as FreeBSD does
//! (`RTM_DELADDR`, the connected route's `RTM_DELETE`, `RTM_IFINFO`).

use super::{IfIndex, Shared, Stack, StackError};
use crate::link::iface::{flags, AddrState, Ifnet};
use std::net::IpAddr;
use std::sync::Arc;

impl Shared {
    /// Replaces interface `ifindex` by what `f` makes of a copy of it.
    pub(crate) fn update_ifnet<R>(
        &self,
        ifindex: IfIndex,
        f: impl FnOnce(&mut Ifnet) -> Result<R, StackError>,
    ) -> Result<R, StackError> {
        self.update(|c| {
            let old = c
                .ifaces
                .get(ifindex.get())
                .ok_or(StackError::NoInterface(ifindex))?;
            let mut n = Ifnet::clone(old);
            let r = f(&mut n)?;
            c.ifaces[ifindex.get()] = Arc::new(n);
            Ok(r)
        })
    }

    /// [`Stack::delete_address`], also for neighbour discovery (an autoconfigured
    /// address whose valid lifetime ended).
    pub(crate) fn delete_address(&self, ifindex: IfIndex, addr: IpAddr) -> Result<(), StackError> {
        let (len, keep) = self.update_ifnet(ifindex, |n| match addr {
            IpAddr::V4(a) => {
                let i = n
                    .addrs
                    .iter()
                    .position(|x| x.addr == a)
                    .ok_or(StackError::NoSuchAddress(addr))?;
                let gone = n.addrs.remove(i);
                let net = route::IpPrefix::new(addr, gone.prefix_len);
                let keep = n
                    .addrs
                    .iter()
                    .any(|x| route::IpPrefix::new(x.addr.into(), x.prefix_len) == net);
                Ok((gone.prefix_len, keep))
            }
            IpAddr::V6(a) => {
                let i = n
                    .addrs6
                    .iter()
                    .position(|x| x.addr.addr == a)
                    .ok_or(StackError::NoSuchAddress(addr))?;
                let gone = n.addrs6.remove(i);
                let net = route::IpPrefix::new(addr, gone.addr.prefix_len);
                let keep = n
                    .addrs6
                    .iter()
                    .any(|x| route::IpPrefix::new(x.addr.addr.into(), x.addr.prefix_len) == net);
                Ok((gone.addr.prefix_len, keep))
            }
        })?;
        let ifi = u32::from(ifindex.0);
        let net = route::IpPrefix::new(addr, len);
        self.rtbus.send(
            route::RtmType::DelAddr,
            net,
            Some(addr),
            ifi,
            route::RtFlags::UP,
        );
        if !keep && !net.is_host() {
            // Only the connected route of this interface, not a static one.
            let _ = self.route_update(|r| {
                r.delete_matching(|ri| {
                    ri.dst == net
                        && ri.flags.contains(route::RtFlags::CONNECTED)
                        && ri.paths.iter().all(|p| p.ifindex == ifi)
                })
            });
        }
        Ok(())
    }
}

impl Stack {
    /// Deletes address `addr` from interface `ifindex` (`ifconfig IF inet ADDR
    /// -alias`). The connected route of its network goes with it unless another
    /// address of the interface is in the same network.
    pub fn delete_address(&self, ifindex: IfIndex, addr: IpAddr) -> Result<(), StackError> {
        self.shared.delete_address(ifindex, addr)
    }

    /// Sets interface `ifindex`'s MTU (`ifconfig IF mtu N`): what the stack sends
    /// there from now on, and what TCP offers as its segment size on new
    /// connections. 576 to 65535 bytes (IPv6 on the interface needs 1280).
    pub fn set_mtu(&self, ifindex: IfIndex, mtu: usize) -> Result<(), StackError> {
        self.shared.update_ifnet(ifindex, |n| {
            let min = if n.addrs6.is_empty() { 576 } else { 1280 };
            if !(min..=65535).contains(&mtu) {
                return Err(StackError::Invalid(format!(
                    "mtu {mtu}: {} takes {min} to 65535",
                    n.name
                )));
            }
            n.mtu = mtu;
            Ok(())
        })
    }

    /// Marks interface `ifindex` up or down (`ifconfig IF up|down`); returns whether
    /// that changed anything. A down interface takes no traffic either way: frames
    /// that arrive on it, and packets the stack queues for it, are dropped and
    /// counted (`ether.ifdown`); a packet forwarded towards it is answered with ICMP
    /// host (ICMPv6 address) unreachable, as FreeBSD's `ip_forward` answers
    /// `ENETDOWN`; a bridge floods no frame to it. Its addresses, routes and
    /// neighbour entries stay, as on FreeBSD. Coming up, a link's IPv6 addresses
    /// that are not duplicated run duplicate address detection again (RFC 4862
    /// §5.4: the link may have changed). Announced as `RTM_IFINFO`.
    pub fn set_up(&self, ifindex: IfIndex, up: bool) -> Result<bool, StackError> {
        let changed = self.shared.update_ifnet(ifindex, |n| {
            if n.is_up() == up {
                return Ok(false);
            }
            if up {
                n.flags |= flags::IFF_UP;
                if !n.no_link_header() {
                    for a in n.addrs6.iter_mut() {
                        if a.state() != AddrState::Duplicated {
                            *a = Arc::new(a.restarted());
                        }
                    }
                }
            } else {
                n.flags &= !flags::IFF_UP;
            }
            Ok(true)
        })?;
        if changed {
            let f = if up {
                route::RtFlags::UP
            } else {
                route::RtFlags::default()
            };
            let any = route::IpPrefix::new(std::net::Ipv4Addr::UNSPECIFIED.into(), 0);
            self.shared
                .rtbus
                .send(route::RtmType::IfInfo, any, None, u32::from(ifindex.0), f);
            // Worker 0 runs duplicate address detection.
            self.shared.notify_worker(0);
        }
        Ok(changed)
    }
}
