//! A stack's configuration as a set of control changes may leave it (a config
//! file's reload): taken before the changes, put back if one of them fails, so
//! that a refused set leaves the node exactly as it was.
//!
//! It holds what the commands change: each interface's MTU, flags and addresses,
//! the bridges' member lists, the IP and TCP tunables, forwarding, and the routing
//! table. Putting it back publishes the interfaces in one configuration and the
//! table in one compilation; the routes that differ are deleted and added again
//! through the table, so routing sockets hear of them (`RTM_DELETE`, `RTM_ADD`).
//! What the data path changed meanwhile in the same fields (an address SLAAC
//! added during the changes) goes with them. Neighbour entries and bridges'
//! address caches are not held: their commands have exact inverses.
//!
//! What it owns: the copy. What it may call: the shared configuration and table.

use super::{Stack, StackError};
use crate::link::bridge::Bridges;
use crate::link::iface::Ifnet;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What [`Stack::config_snapshot`] took.
#[derive(Debug)]
pub struct ConfigSnapshot {
    ifaces: Vec<Arc<Ifnet>>,
    /// Each interface's (inet, inet6, rtadv) forwarding switches.
    forwarding: Vec<(bool, bool, bool)>,
    bridges: Bridges,
    tcp: crate::tcp::TcpConfig,
    inet_srcroute: crate::inet::cx::SourceRouting,
    directed_broadcast: bool,
    default_gw: Option<std::net::Ipv4Addr>,
    default_gw6: Option<(std::net::Ipv6Addr, crate::IfIndex)>,
    routes: Vec<route::RouteInfo>,
    /// The interfaces' hooks: their own, and the global ones turned off on some.
    arcs: crate::pfil::arcs::Arcs,
}

/// A route's paths as a route is added again: what the table compares them by
/// (not the next-hop indices, which it hands out again).
fn paths(r: &route::RouteInfo) -> Vec<(Option<std::net::IpAddr>, u32, route::NhKind, u32)> {
    r.paths
        .iter()
        .map(|p| (p.gateway, p.ifindex, p.kind, p.mtu))
        .collect()
}

fn same(a: &route::RouteInfo, b: &route::RouteInfo) -> bool {
    a.dst == b.dst && a.flags == b.flags && paths(a) == paths(b)
}

impl Stack {
    /// The configuration the control commands change, to put back with
    /// [`Stack::config_restore`].
    pub fn config_snapshot(&self) -> ConfigSnapshot {
        let cfg = self.shared.cfg.load();
        ConfigSnapshot {
            ifaces: cfg.ifaces.clone(),
            forwarding: cfg
                .ifaces
                .iter()
                .map(|i| {
                    let f = &i.forwarding;
                    (
                        f.inet.load(Ordering::Relaxed),
                        f.inet6.load(Ordering::Relaxed),
                        f.rtadv.load(Ordering::Relaxed),
                    )
                })
                .collect(),
            bridges: cfg.bridges.clone(),
            tcp: cfg.tcp,
            inet_srcroute: cfg.inet.srcroute,
            directed_broadcast: cfg.inet.directed_broadcast,
            default_gw: cfg.inet.default_gw,
            default_gw6: cfg.inet6.default_gw6,
            routes: self.routes(),
            arcs: cfg.pfil.arcs.clone(),
        }
    }

    /// Puts back what `snap` holds: the interfaces and tunables in one published
    /// configuration, then the routes that differ, in one compilation. Interfaces
    /// made since `snap` (none of the commands makes one) are left as they are.
    pub fn config_restore(&self, snap: &ConfigSnapshot) -> Result<(), StackError> {
        self.shared.update(|c| {
            for (i, old) in snap.ifaces.iter().enumerate() {
                if let Some(slot) = c.ifaces.get_mut(i) {
                    // The neighbour tables and switches are the interface's own
                    // objects, shared by every version of it: keep the live ones.
                    let cur = slot.clone();
                    *slot = Arc::new(Ifnet {
                        arp: cur.arp.clone(),
                        nd6: cur.nd6.clone(),
                        num_queues: cur.num_queues,
                        forwarding: cur.forwarding.clone(),
                        offload: cur.offload,
                        ..Ifnet::clone(old)
                    });
                }
            }
            c.bridges = snap.bridges.clone();
            c.tcp = snap.tcp;
            c.inet.srcroute = snap.inet_srcroute;
            c.inet.directed_broadcast = snap.directed_broadcast;
            c.inet.default_gw = snap.default_gw;
            c.inet6.default_gw6 = snap.default_gw6;
            c.pfil.arcs = snap.arcs.clone();
        });
        for (i, &(f4, f6, ra)) in snap.forwarding.iter().enumerate() {
            let ifx = crate::IfIndex(i as u16);
            self.set_forwarding(ifx, f4, f6)?;
            self.set_router_advertisements(ifx, ra)?;
        }
        let want: HashMap<route::IpPrefix, &route::RouteInfo> =
            snap.routes.iter().map(|r| (r.dst, r)).collect();
        self.fib_batch(|| {
            self.shared.route_update(|rib| {
                let now = rib.routes();
                let had: HashMap<route::IpPrefix, &route::RouteInfo> =
                    now.iter().map(|r| (r.dst, r)).collect();
                // A route that differs is deleted whole and added again, its paths
                // in their order (so a multipath one gets the same buckets).
                for r in &now {
                    if !want.get(&r.dst).is_some_and(|w| same(w, r)) {
                        let _ = rib.delete(r.dst, None);
                    }
                }
                for w in &snap.routes {
                    if had.get(&w.dst).is_some_and(|r| same(w, r)) {
                        continue;
                    }
                    for p in &w.paths {
                        let _ = rib.add(route::RouteSpec {
                            dst: w.dst,
                            gateway: p.gateway,
                            ifindex: p.ifindex,
                            kind: p.kind,
                            mtu: p.mtu,
                            flags: w.flags,
                        });
                    }
                }
            })
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::{IfConfig, Stack, StackConfig};
    use dev::mem::{wire, WireConfig};

    fn stack() -> Stack {
        let mut s = Stack::new(StackConfig::default());
        for a in ["198.18.1.1/24", "198.18.2.1/24"] {
            let (d, _far) = wire(WireConfig::default());
            s.add_interface(
                Box::new(d),
                IfConfig {
                    addrs: vec![a.parse().unwrap()],
                    ..IfConfig::default()
                },
            )
            .unwrap();
        }
        s
    }

    #[test]
    fn a_batch_publishes_its_routes_once_at_its_end() {
        let s = stack();
        let g = s.fib().generation();
        s.fib_batch(|| {
            for k in 0..100u8 {
                let p = format!("198.19.{k}.0/24").parse().unwrap();
                s.add_route_via(p, "198.18.2.2".parse().unwrap()).unwrap();
            }
            s.fib_batch(|| s.delete_route("198.19.7.0/24".parse().unwrap(), None))
                .unwrap();
            assert_eq!(s.fib().generation(), g, "nothing published inside");
        });
        assert_ne!(s.fib().generation(), g);
        let hit = |a: &str| s.fib().lookup4(a.parse().unwrap(), || 0).is_some();
        assert!(hit("198.19.99.1") && !hit("198.19.7.1"));
    }

    #[test]
    fn a_restore_puts_back_routes_addresses_and_mtu_as_they_were() {
        let s = stack();
        let (gw1, gw2) = ("198.18.2.2".parse().unwrap(), "198.18.2.3".parse().unwrap());
        let p = "198.19.0.0/16".parse().unwrap();
        s.add_route_via(p, gw1).unwrap();
        s.add_route_via(p, gw2).unwrap();
        let ifx = s.interfaces()[0].index;
        let snap = s.config_snapshot();
        let (routes, ifaces) = (s.routes(), format!("{:?}", s.interfaces()));
        s.delete_route(p, Some(gw1)).unwrap();
        s.add_route_via("198.20.0.0/16".parse().unwrap(), gw1)
            .unwrap();
        s.add_address(ifx, "198.18.3.1/24".parse().unwrap())
            .unwrap();
        s.set_mtu(ifx, 1400).unwrap();
        s.set_up(ifx, false).unwrap();
        s.set_directed_broadcast(true);
        s.config_restore(&snap).unwrap();
        let strip = |v: Vec<route::RouteInfo>| -> Vec<_> {
            v.into_iter()
                .map(|r| (r.dst, r.flags, super::paths(&r)))
                .collect()
        };
        assert_eq!(strip(s.routes()), strip(routes));
        assert_eq!(format!("{:?}", s.interfaces()), ifaces);
        assert!(!s.directed_broadcast());
        let hit = |a: &str| s.fib().lookup4(a.parse().unwrap(), || 0).is_some();
        assert!(hit("198.19.1.1") && !hit("198.20.1.1") && !hit("198.18.3.9"));
    }
}
