//! Routes and the FIB of a stack: the routing table (`route add`, `delete`,
//! `change`, `get`, batches and deferred changes), its compilation into the FIB the
//! workers read and the publication of it, the default gateway, the locks that keep
//! a change made of many alone, and the routing socket's subscriptions.

use super::{Shared, Stack, StackError};
use std::net::Ipv4Addr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Shared {
    /// Changes the routing table and publishes the result: one compilation per call
    /// (so a batch of changes costs one), then each interface's neighbour tables
    /// learn which next hops' L2 rewrites they keep.
    pub(crate) fn route_update<R>(&self, f: impl FnOnce(&mut route::Rib) -> R) -> R {
        let mut rib = self.rib.lock().unwrap_or_else(|e| e.into_inner());
        let r = f(&mut rib);
        if self.fib_hold.load(Ordering::Acquire) == 0 {
            self.publish_fib(&rib);
        }
        r
    }

    /// Changes the table without compiling it: the changes reach the data path
    /// with the next [`Shared::publish_fib`] (this one's, or any other update's).
    pub(crate) fn route_update_deferred<R>(&self, f: impl FnOnce(&mut route::Rib) -> R) -> R {
        let mut rib = self.rib.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut rib)
    }

    /// Compiles the table and hands it to the workers, if it changed since the FIB
    /// they read was compiled. Whether it did.
    pub(crate) fn publish_fib(&self, rib: &route::Rib) -> bool {
        if rib.generation() != self.fib.load().generation() {
            let fib = Arc::new(rib.compile());
            let cfg = self.cfg.load();
            for ifp in &cfg.ifaces {
                let on = |v6: bool| -> Vec<Arc<route::NextHop>> {
                    fib.nexthops()
                        .filter(|n| {
                            n.kind == route::NhKind::Forward
                                && n.ifindex == u32::from(ifp.index.0)
                                && n.gateway.is_some_and(|g| g.is_ipv6() == v6)
                        })
                        .cloned()
                        .collect()
                };
                ifp.arp.set_nexthops(on(false));
                ifp.nd6.set_nexthops(on(true));
            }
            self.fib.store(fib);
            true
        } else {
            false
        }
    }
}

impl Stack {
    /// Sets (or clears) the IPv4 default gateway: the default route of the FIB
    /// when the gateway is on a connected network now; kept aside otherwise and used
    /// when no route matches (as before the FIB existed, for hosts configured in
    /// any order).
    pub fn set_default_gateway(&self, gw: Option<Ipv4Addr>) {
        self.shared.update(|c| c.inet.default_gw = gw);
        let dflt = route::IpPrefix::default_of(false);
        let _ = self.shared.route_update(|r| r.delete(dflt, None));
        if let Some(g) = gw {
            let _ = self.add_route_via(dflt, g.into());
        }
    }

    /// Adds a route (`route add`). A gateway route must name the interface; see
    /// [`Stack::add_route_via`] to find it from the gateway.
    pub fn add_route(&self, r: route::RouteSpec) -> Result<(), StackError> {
        self.shared
            .route_update(|rib| rib.add(r))
            .map_err(StackError::Route)
    }

    /// `route add DST GATEWAY`: a static route through a gateway on a connected
    /// network (`ENETUNREACH` otherwise); adding a second gateway to the same
    /// destination makes it multipath (ECMP).
    pub fn add_route_via(
        &self,
        dst: route::IpPrefix,
        gateway: std::net::IpAddr,
    ) -> Result<(), StackError> {
        let ifindex = self.connected_ifindex(gateway)?;
        self.add_route(route::RouteSpec::via(dst, gateway, ifindex))
    }

    /// The interface whose connected network holds `gw`.
    fn connected_ifindex(&self, gw: std::net::IpAddr) -> Result<u32, StackError> {
        self.shared
            .cfg
            .load()
            .connected(gw)
            .map(|i| u32::from(i.index.0))
            .ok_or(StackError::GatewayUnreachable(gw))
    }

    /// Deletes a route, or with `gateway` one path of a multipath route.
    pub fn delete_route(
        &self,
        dst: route::IpPrefix,
        gateway: Option<std::net::IpAddr>,
    ) -> Result<(), StackError> {
        self.shared
            .route_update(|rib| rib.delete(dst, gateway))
            .map_err(StackError::Route)
    }

    /// `route change`: gives a route one new path.
    pub fn change_route(&self, r: route::RouteSpec) -> Result<(), StackError> {
        self.shared
            .route_update(|rib| rib.change(r))
            .map_err(StackError::Route)
    }

    /// Several changes, compiled and published once (a routing daemon's batch).
    pub fn route_batch<R>(&self, f: impl FnOnce(&mut route::Rib) -> R) -> R {
        self.shared.route_update(f)
    }

    /// Several changes made to the table now and compiled later: they reach the
    /// data path at the next [`Stack::route_commit`] or the next compiled change
    /// (any of the other route calls). For a feed of many updates, where one
    /// compilation of a large table per batch would cost more than the changes.
    pub fn route_batch_deferred<R>(&self, f: impl FnOnce(&mut route::Rib) -> R) -> R {
        self.shared.route_update_deferred(f)
    }

    /// Held by a change made of many commands that puts the node back as it was
    /// if one of them fails (a config file's reload, a batch): no other change
    /// (a control command, a route from the routing daemon) runs meanwhile, so
    /// putting the saved state back undoes only what the batch did. Writers of
    /// single changes take [`Stack::changes_shared`] and wait for it.
    pub fn changes_alone(&self) -> std::sync::RwLockWriteGuard<'_, ()> {
        self.shared
            .changes
            .write()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Held by a single change (a control command, the routing daemon's feed)
    /// while it runs; see [`Stack::changes_alone`].
    pub fn changes_shared(&self) -> std::sync::RwLockReadGuard<'_, ()> {
        self.shared
            .changes
            .read()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` with the FIB's compilation held: every route change `f` makes
    /// (through any call, its own addresses' connected routes included) goes into
    /// the table at once and reaches the data path in one compilation when the
    /// last batch under way ends. A config file of 100,000 routes so costs one
    /// compilation, not one a line (which made loading it quadratic). The workers
    /// forward by the FIB as it was until then.
    pub fn fib_batch<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Hold<'a>(&'a Stack);
        impl Drop for Hold<'_> {
            fn drop(&mut self) {
                if self.0.shared.fib_hold.fetch_sub(1, Ordering::AcqRel) == 1 {
                    self.0.route_commit();
                }
            }
        }
        self.shared.fib_hold.fetch_add(1, Ordering::AcqRel);
        let _hold = Hold(self);
        f()
    }

    /// Compiles the table and publishes it to the workers if it changed since the
    /// FIB they read; whether it did.
    pub fn route_commit(&self) -> bool {
        let rib = self.shared.rib.lock().unwrap_or_else(|e| e.into_inner());
        self.shared.publish_fib(&rib)
    }

    /// `route get`: the route `addr` takes (also announced as `RTM_GET`).
    pub fn route_get(&self, addr: std::net::IpAddr) -> Option<route::RouteInfo> {
        self.shared
            .rib
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(addr)
    }

    /// How many routes there are per family: (IPv4, IPv6).
    pub fn route_counts(&self) -> (usize, usize) {
        self.shared
            .rib
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .counts()
    }

    /// Every route (`netstat -r`).
    pub fn routes(&self) -> Vec<route::RouteInfo> {
        self.shared
            .rib
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .routes()
    }

    /// The FIB as workers read it now.
    pub fn fib(&self) -> Arc<route::Fib> {
        self.shared.fib.load_full()
    }

    /// A routing socket: every routing message from now on, in a queue of at most
    /// `capacity` (messages beyond are dropped and counted, never queued unbounded).
    pub fn subscribe_routes(&self, capacity: usize) -> route::RtSubscriber {
        self.shared.rtbus.subscribe(capacity)
    }

    /// Messages dropped because a routing socket's queue was full.
    pub fn route_messages_dropped(&self) -> u64 {
        self.shared.rtbus.dropped()
    }
}
