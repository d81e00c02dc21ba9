//! The packet filter hooks of a running stack: the hooks every interface runs
//! (`ipfw` attached, FreeBSD's pfil heads) and each interface's own (its feature
//! arcs, [`crate::pfil::arcs`]), added, turned off and on per interface, and listed.
//! Each change is one published configuration: a worker's next batch runs the new
//! arcs.

use super::{IfIndex, Stack, StackError};
use crate::pfil::arcs::{arc_name, arc_of, IfHook, ARCS};
use crate::pfil::{Dir, PfilHook, PfilPoint};
use std::sync::Arc;

impl Stack {
    /// Takes ipfw `fw`'s hooks off every point it is on (`net.inet.ip.fw.enable=0`):
    /// packets pass unfiltered from the next batch on. Whether it was on any.
    pub fn detach_ipfw(&self, fw: &Arc<crate::pfil::ipfw::Ipfw>) -> bool {
        let me = Arc::as_ptr(fw) as *const ();
        self.shared.update(|c| {
            let mut gone = false;
            for point in [PfilPoint::Ether, PfilPoint::Inet, PfilPoint::Inet6] {
                for dir in [Dir::In, Dir::Out] {
                    let head = c.pfil.head_mut(point, dir);
                    let n = head.len();
                    head.retain(|h| Arc::as_ptr(h) as *const () != me);
                    gone |= head.len() != n;
                }
            }
            gone | c.pfil.arcs.remove_ptr(me)
        })
    }

    /// Appends a packet filter hook at one point.
    pub fn add_pfil_hook(&self, point: PfilPoint, dir: Dir, hook: Arc<dyn PfilHook>) {
        self.shared
            .update(|c| c.pfil.head_mut(point, dir).push(hook));
    }

    /// Adds a hook to one interface's arc at (`point`, `dir`) only (a feature of that
    /// interface: a capture on one link, NAT on the outside one): it runs after the
    /// hooks of a lower `order` (the hooks every interface runs are at 0) and after
    /// those of the same order added before it. Other interfaces do not meet it.
    pub fn add_if_hook(
        &self,
        ifindex: IfIndex,
        point: PfilPoint,
        dir: Dir,
        order: i32,
        hook: Arc<dyn PfilHook>,
    ) -> Result<(), StackError> {
        self.shared.update(|c| {
            if ifindex.get() >= c.ifaces.len() {
                return Err(StackError::NoInterface(ifindex));
            }
            let arc = arc_of(point, dir);
            c.pfil.arcs.add(IfHook {
                ifindex,
                arc,
                order,
                hook,
            });
            Ok(())
        })
    }

    /// Turns the hook named `name` off (`on` false) or back on at (`point`, `dir`)
    /// of one interface, from the next batch on: off takes the interface's own hook
    /// of that name away, or stops one every interface runs (`ipfw`) on this one;
    /// on undoes the latter. Whether the arc changed.
    pub fn set_if_hook(
        &self,
        ifindex: IfIndex,
        point: PfilPoint,
        dir: Dir,
        name: &str,
        on: bool,
    ) -> Result<bool, StackError> {
        self.shared.update(|c| {
            if ifindex.get() >= c.ifaces.len() {
                return Err(StackError::NoInterface(ifindex));
            }
            Ok(if on {
                c.pfil.arcs.enable(ifindex, arc_of(point, dir), name)
            } else {
                c.pfil.disable_on(ifindex, point, dir, name)
            })
        })
    }

    /// The hooks interface `ifindex` runs, by arc (`ether-in` … `inet6-out`), in
    /// order, by name; arcs with none left out.
    pub fn if_hooks(&self, ifindex: IfIndex) -> Vec<(&'static str, Vec<String>)> {
        let cfg = self.shared.cfg.load();
        (0..ARCS)
            .filter_map(|a| {
                let hooks = cfg.pfil.arcs.hooks(a, ifindex);
                (!hooks.is_empty()).then(|| {
                    (
                        arc_name(a),
                        hooks.iter().map(|h| h.name().to_string()).collect(),
                    )
                })
            })
            .collect()
    }

    /// Puts an ipfw firewall on the stack's IPv4 and IPv6 points, in and out
    /// (also `Ipfw::attach`).
    pub fn attach_ipfw(&self, fw: &Arc<crate::pfil::ipfw::Ipfw>) {
        for point in [PfilPoint::Inet, PfilPoint::Inet6] {
            for dir in [Dir::In, Dir::Out] {
                self.add_pfil_hook(point, dir, fw.clone());
            }
        }
        self.set_pfil_deferring();
    }

    /// Also runs an ipfw firewall's rules on whole Ethernet frames, arriving and
    /// leaving (FreeBSD's `net.link.ether.ipfw=1`): the pass where `layer2`, `mac`
    /// and `mac-type` match.
    pub fn attach_ipfw_layer2(&self, fw: &Arc<crate::pfil::ipfw::Ipfw>) {
        for dir in [Dir::In, Dir::Out] {
            self.add_pfil_hook(PfilPoint::Ether, dir, fw.clone());
        }
        self.set_pfil_deferring();
    }

    /// Marks that a hook holds packets for later ([`crate::pfil::PfilHook::poll`]):
    /// the workers then ask the hooks for due packets every poll.
    pub fn set_pfil_deferring(&self) {
        self.shared.update(|c| c.pfil.deferring = true);
    }
}
