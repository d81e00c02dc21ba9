//! Feature arcs (VPP's `vnet_feature_arc_start`): the hooks each interface runs on
//! its packets, arriving and leaving, at layer 2 (whole frames) and layer 3 (IPv4,
//! IPv6) — six arcs an interface.
//!
//! An interface's arc is resolved, at each publication of the configuration, from
//! two sources: the hooks every interface runs (the heads of [`super::PfilHeads`],
//! where `ipfw` attaches: FreeBSD's global pfil heads), less those turned off on this
//! interface, and the interface's own hooks (a capture on one link, NAT on the
//! outside one, ESP on a tunnel), each with an order. The hooks run in order, lowest
//! first; the hooks every interface runs sit at order 0 in the order they were added,
//! before an interface's own hooks of the same order.
//!
//! The data path asks an arc's [`Shape`] once a vector: with no interface having a
//! hook there, a stage moves its packets straight on (one test a vector, as before
//! arcs); with every interface running the same hooks there (the usual case: one
//! firewall on every link), the whole vector goes through them at once; only when
//! interfaces differ does a stage look up each packet's interface (one load a packet)
//! and run each run of packets through its own interface's hooks.

use super::{Dir, PfilHook, PfilPoint};
use crate::ifindex::IfIndex;
use std::sync::Arc;

/// Arcs an interface has: (Ether, Inet, Inet6) × (In, Out).
pub const ARCS: usize = 6;

/// The arc of a pfil point and direction, `0..ARCS`.
#[inline(always)]
pub fn arc_of(point: PfilPoint, dir: Dir) -> usize {
    let p = match point {
        PfilPoint::Ether => 0,
        PfilPoint::Inet => 2,
        PfilPoint::Inet6 => 4,
    };
    p + (dir == Dir::Out) as usize
}

/// The pfil point and direction of arc `a`.
pub fn point_of(a: usize) -> (PfilPoint, Dir) {
    let point = match a / 2 {
        0 => PfilPoint::Ether,
        1 => PfilPoint::Inet,
        _ => PfilPoint::Inet6,
    };
    (
        point,
        if a.is_multiple_of(2) {
            Dir::In
        } else {
            Dir::Out
        },
    )
}

/// An arc's name, as `ifconfig` prints and takes it: `ether-in`, `inet6-out`.
pub fn arc_name(a: usize) -> &'static str {
    [
        "ether-in",
        "ether-out",
        "inet-in",
        "inet-out",
        "inet6-in",
        "inet6-out",
    ][a % ARCS]
}

/// The arc named `s` (see [`arc_name`]).
pub fn arc_by_name(s: &str) -> Option<usize> {
    (0..ARCS).find(|&a| arc_name(a) == s)
}

/// A hook that runs on one interface's arc only.
#[derive(Clone, Debug)]
pub struct IfHook {
    pub ifindex: IfIndex,
    pub arc: usize,
    /// Lower runs first; the hooks every interface runs are at 0.
    pub order: i32,
    pub hook: Arc<dyn PfilHook>,
}

/// How one arc looks over all interfaces, for a stage to ask once a vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// No interface runs a hook on this arc.
    Empty,
    /// Every interface runs the same hooks: list `id` ([`Arcs::list`]).
    Uniform(u32),
    /// Interfaces differ: each packet's interface says ([`Arcs::of`]).
    Mixed,
}

/// The interfaces' arcs: what they are made from, and what they resolve to.
#[derive(Clone, Debug)]
pub struct Arcs {
    /// The interfaces' own hooks, in the order they were added.
    own: Vec<IfHook>,
    /// Hooks every interface runs that one interface does not: (interface, arc,
    /// the hook's name).
    off: Vec<(IfIndex, usize, String)>,
    /// The distinct hook lists; list 0 is empty.
    lists: Vec<Arc<[Arc<dyn PfilHook>]>>,
    /// Each interface's list, per arc.
    by_if: Vec<[u32; ARCS]>,
    shape: [Shape; ARCS],
    /// Each interface's arcs that hold a hook, a bit per arc (`1 << arc`).
    mask: Vec<u8>,
    /// Every hook once, on whatever arc (for the hooks' timers and counters).
    unique: Vec<Arc<dyn PfilHook>>,
}

impl Default for Arcs {
    fn default() -> Self {
        Arcs {
            own: Vec::new(),
            off: Vec::new(),
            lists: vec![Arc::from(Vec::new())],
            by_if: Vec::new(),
            shape: [Shape::Empty; ARCS],
            mask: Vec::new(),
            unique: Vec::new(),
        }
    }
}

/// Same hook, by address (a hook on several points is one object).
#[inline]
fn same(a: &Arc<dyn PfilHook>, b: &Arc<dyn PfilHook>) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

impl Arcs {
    /// Adds a hook to one interface's arc (it runs after the hooks of a lower order
    /// and of the same order added before it).
    pub fn add(&mut self, h: IfHook) {
        self.own.push(h);
    }

    /// Takes the hook named `name` off interface `i`'s arc `arc`: the interface's own
    /// hook of that name if it has one, else one that every interface runs (turned
    /// off on this interface only). Whether there was such a hook on the arc.
    pub fn disable(
        &mut self,
        i: IfIndex,
        arc: usize,
        name: &str,
        global: &[Arc<dyn PfilHook>],
    ) -> bool {
        let n = self.own.len();
        self.own
            .retain(|h| !(h.ifindex == i && h.arc == arc && h.hook.name() == name));
        if self.own.len() != n {
            return true;
        }
        if !global.iter().any(|h| h.name() == name) {
            return false;
        }
        if !self.is_off(i, arc, name) {
            self.off.push((i, arc, name.to_string()));
        }
        true
    }

    /// Takes the hook at address `p` off every interface it is its own hook of.
    /// Whether it was on any.
    pub fn remove_ptr(&mut self, p: *const ()) -> bool {
        let n = self.own.len();
        self.own.retain(|h| Arc::as_ptr(&h.hook) as *const () != p);
        self.own.len() != n
    }

    /// Turns a hook every interface runs back on for interface `i` (undoes
    /// [`Arcs::disable`]). Whether it had been off.
    pub fn enable(&mut self, i: IfIndex, arc: usize, name: &str) -> bool {
        let n = self.off.len();
        self.off
            .retain(|(j, a, s)| !(*j == i && *a == arc && s == name));
        self.off.len() != n
    }

    fn is_off(&self, i: IfIndex, arc: usize, name: &str) -> bool {
        self.off
            .iter()
            .any(|(j, a, s)| *j == i && *a == arc && s == name)
    }

    /// Drops every own hook and setting of interfaces at index `n` and above (gone).
    pub fn forget_from(&mut self, n: usize) {
        self.own.retain(|h| h.ifindex.get() < n);
        self.off.retain(|(i, _, _)| i.get() < n);
    }

    /// Resolves every interface's arcs from `global` (the hooks every interface
    /// runs, per arc) for `n` interfaces.
    pub fn resolve(&mut self, n: usize, global: [&[Arc<dyn PfilHook>]; ARCS]) {
        self.lists.truncate(1);
        self.by_if.clear();
        self.mask.clear();
        self.unique.clear();
        let mut list: Vec<(i32, Arc<dyn PfilHook>)> = Vec::new();
        for i in 0..n {
            let ifindex = IfIndex(i as u16);
            let mut ids = [0u32; ARCS];
            for (a, id) in ids.iter_mut().enumerate() {
                list.clear();
                for h in global[a] {
                    if !self.is_off(ifindex, a, h.name()) {
                        list.push((0, h.clone()));
                    }
                }
                for h in self
                    .own
                    .iter()
                    .filter(|h| h.ifindex == ifindex && h.arc == a)
                {
                    list.push((h.order, h.hook.clone()));
                }
                // Stable: the global hooks before an interface's own of order 0.
                list.sort_by_key(|(o, _)| *o);
                *id = self.intern(&list);
            }
            self.by_if.push(ids);
        }
        self.mask = self
            .by_if
            .iter()
            .map(|ids| (0..ARCS).fold(0, |m, a| m | (((ids[a] != 0) as u8) << a)))
            .collect();
        for (a, shape) in self.shape.iter_mut().enumerate() {
            let mut ids = self.by_if.iter().map(|v| v[a]);
            *shape = match ids.next() {
                None => Shape::Empty,
                Some(first) if ids.all(|x| x == first) => match first {
                    0 => Shape::Empty,
                    id => Shape::Uniform(id),
                },
                Some(_) => Shape::Mixed,
            };
        }
        for l in &self.lists {
            for h in l.iter() {
                if !self.unique.iter().any(|u| same(u, h)) {
                    self.unique.push(h.clone());
                }
            }
        }
        // Hooks of no interface now (all turned off) still keep their timers.
        for h in global.iter().flat_map(|g| g.iter()) {
            if !self.unique.iter().any(|u| same(u, h)) {
                self.unique.push(h.clone());
            }
        }
    }

    /// The id of the list of `hooks` (as they are ordered), a new one if no
    /// interface's arc had it yet.
    fn intern(&mut self, hooks: &[(i32, Arc<dyn PfilHook>)]) -> u32 {
        if hooks.is_empty() {
            return 0;
        }
        let found = self.lists.iter().position(|l| {
            l.len() == hooks.len() && l.iter().zip(hooks).all(|(a, (_, b))| same(a, b))
        });
        match found {
            Some(id) => id as u32,
            None => {
                let l: Vec<Arc<dyn PfilHook>> = hooks.iter().map(|(_, h)| h.clone()).collect();
                self.lists.push(Arc::from(l));
                // At most one list an interface (a u16 index) and arc, and the empty
                // one: an id fits u32.
                (self.lists.len() - 1) as u32
            }
        }
    }

    /// How arc `arc` looks over all interfaces.
    #[inline(always)]
    pub fn shape(&self, arc: usize) -> Shape {
        self.shape[arc]
    }

    /// The list id interface `i` runs on arc `arc` (0: none).
    #[inline(always)]
    pub fn of(&self, arc: usize, i: IfIndex) -> u32 {
        match self.shape[arc] {
            Shape::Empty => 0,
            Shape::Uniform(id) => id,
            Shape::Mixed => self.by_if.get(i.get()).map_or(0, |v| v[arc]),
        }
    }

    /// Whether interface `i` has a hook on any of the arcs of `arcs` (a bit per
    /// arc, `1 << arc`): one load, for a packet's way out.
    #[inline(always)]
    pub fn any_on(&self, i: IfIndex, arcs: u8) -> bool {
        self.mask.get(i.get()).is_some_and(|m| m & arcs != 0)
    }

    /// The hooks of list `id`.
    #[inline(always)]
    pub fn list(&self, id: u32) -> &[Arc<dyn PfilHook>] {
        self.lists.get(id as usize).map_or(&[], |l| &l[..])
    }

    /// The hooks interface `i` runs on arc `arc`, in order.
    #[inline]
    pub fn hooks(&self, arc: usize, i: IfIndex) -> &[Arc<dyn PfilHook>] {
        self.list(self.of(arc, i))
    }

    /// Every hook once.
    pub fn unique(&self) -> &[Arc<dyn PfilHook>] {
        &self.unique
    }

    /// The interfaces' own hooks.
    pub fn own(&self) -> &[IfHook] {
        &self.own
    }

    /// The hooks every interface runs that some interface does not.
    pub fn off(&self) -> &[(IfIndex, usize, String)] {
        &self.off
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pfil::{PfilCtx, Verdict};
    use mbuf::Mbuf;

    #[derive(Debug)]
    struct Named(&'static str);

    impl PfilHook for Named {
        fn name(&self) -> &str {
            self.0
        }
        fn filter(&self, m: Mbuf, _cx: &PfilCtx<'_>) -> Verdict {
            Verdict::Pass(m)
        }
    }

    fn hook(n: &'static str) -> Arc<dyn PfilHook> {
        Arc::new(Named(n))
    }

    fn names(a: &Arcs, arc: usize, i: u16) -> Vec<&str> {
        a.hooks(arc, IfIndex(i)).iter().map(|h| h.name()).collect()
    }

    const NONE: &[Arc<dyn PfilHook>] = &[];

    #[test]
    fn every_arc_maps_to_its_point_and_name_and_back() {
        for a in 0..ARCS {
            let (p, d) = point_of(a);
            assert_eq!(arc_of(p, d), a);
            assert_eq!(arc_by_name(arc_name(a)), Some(a));
        }
        assert_eq!(arc_by_name("ether"), None);
    }

    #[test]
    fn no_hooks_is_empty_everywhere() {
        let mut a = Arcs::default();
        a.resolve(3, [NONE; ARCS]);
        for arc in 0..ARCS {
            assert_eq!(a.shape(arc), Shape::Empty);
            assert_eq!(a.of(arc, IfIndex(1)), 0);
            assert!(a.hooks(arc, IfIndex(7)).is_empty());
        }
        assert!(a.unique().is_empty());
    }

    #[test]
    fn global_hooks_are_uniform_until_one_interface_turns_one_off() {
        let fw = hook("ipfw");
        let g = [fw.clone()];
        let mut heads = [NONE; ARCS];
        heads[arc_of(PfilPoint::Inet, Dir::In)] = &g;
        let inet_in = arc_of(PfilPoint::Inet, Dir::In);
        let mut a = Arcs::default();
        a.resolve(3, heads);
        assert!(matches!(a.shape(inet_in), Shape::Uniform(_)));
        assert_eq!(a.shape(arc_of(PfilPoint::Inet, Dir::Out)), Shape::Empty);
        assert_eq!(names(&a, inet_in, 2), ["ipfw"]);

        assert!(a.disable(IfIndex(1), inet_in, "ipfw", &g));
        assert!(!a.disable(IfIndex(1), inet_in, "nat", &g), "no such hook");
        a.resolve(3, heads);
        assert_eq!(a.shape(inet_in), Shape::Mixed);
        assert_eq!(names(&a, inet_in, 0), ["ipfw"]);
        assert!(names(&a, inet_in, 1).is_empty());
        assert_eq!(a.unique().len(), 1, "off on one interface, still polled");

        assert!(a.enable(IfIndex(1), inet_in, "ipfw"));
        assert!(!a.enable(IfIndex(1), inet_in, "ipfw"), "already on");
        a.resolve(3, heads);
        assert!(matches!(a.shape(inet_in), Shape::Uniform(_)));
    }

    #[test]
    fn an_interfaces_own_hooks_run_in_order_around_the_global_ones() {
        let g = [hook("ipfw")];
        let arc = arc_of(PfilPoint::Ether, Dir::Out);
        let mut heads = [NONE; ARCS];
        heads[arc] = &g;
        let mut a = Arcs::default();
        for (order, n) in [(10, "late"), (-10, "early"), (0, "same"), (10, "later")] {
            a.add(IfHook {
                ifindex: IfIndex(2),
                arc,
                order,
                hook: hook(n),
            });
        }
        a.resolve(4, heads);
        assert_eq!(
            names(&a, arc, 2),
            ["early", "ipfw", "same", "late", "later"]
        );
        assert_eq!(names(&a, arc, 0), ["ipfw"]);
        assert_eq!(names(&a, arc, 3), ["ipfw"]);
        assert!(a.any_on(IfIndex(2), 1 << arc));
        assert!(a.any_on(IfIndex(0), 1 << arc), "the global hook");
        assert!(!a.any_on(IfIndex(2), !(1u8 << arc)), "no other arc");
        assert!(!a.any_on(IfIndex(9), 0xff), "no such interface");
        // Interfaces with the same hooks share one list.
        assert_eq!(a.of(arc, IfIndex(0)), a.of(arc, IfIndex(3)));
        assert_ne!(a.of(arc, IfIndex(0)), a.of(arc, IfIndex(2)));
        assert_eq!(a.unique().len(), 5);

        // Its own hook turned off is gone; the interface gone, its hooks go too.
        assert!(a.disable(IfIndex(2), arc, "same", &g));
        a.resolve(4, heads);
        assert_eq!(names(&a, arc, 2), ["early", "ipfw", "late", "later"]);
        a.forget_from(2);
        a.resolve(2, heads);
        assert!(a.own().is_empty());
        assert!(matches!(a.shape(arc), Shape::Uniform(_)));
    }

    #[test]
    fn a_hook_of_one_interface_removed_by_address() {
        let h = hook("capture");
        let mut a = Arcs::default();
        a.add(IfHook {
            ifindex: IfIndex(0),
            arc: 0,
            order: 0,
            hook: h.clone(),
        });
        a.resolve(1, [NONE; ARCS]);
        assert_eq!(a.shape(0), Shape::Uniform(1));
        assert!(a.remove_ptr(Arc::as_ptr(&h) as *const ()));
        assert!(!a.remove_ptr(Arc::as_ptr(&h) as *const ()));
        a.resolve(1, [NONE; ARCS]);
        assert_eq!(a.shape(0), Shape::Empty);
    }
}
