//! Packet filter hooks (FreeBSD's pfil(9)): the points where a firewall sees packets.
//!
//! A hook takes the packet by value and returns a [`Verdict`] that says who holds it
//! now: `Pass(m)` gives it back, `Dropped` means the hook freed it (the stack counts the
//! drop), `Consumed` means the hook kept it (queued in a pipe, say). Nothing dangles.
//! Hooks are part of the published configuration, read without locks; a hook that keeps
//! per-worker state indexes it with [`PfilCtx::worker`].

pub mod arcs;
pub mod ipfw;

use crate::ifindex::IfIndex;
use dev::Instant;
use mbuf::Mbuf;
use std::net::IpAddr;

/// Where in the data path a hook runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PfilPoint {
    /// Whole Ethernet frames, before `ether_demux` (in) or at `ether_output` (out).
    Ether,
    /// IPv4 packets, after header validation (in) or before link output (out).
    Inet,
    /// IPv6 packets, after the fixed header's checks (in) or before link output
    /// (out, forwarded packets included).
    Inet6,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    In,
    Out,
}

/// What a hook may ask of the stack it sits in: the interfaces' names, its own
/// addresses, its routes. The stack implements it for a batch (the hooks sit below
/// every family, so they see the stack only through this).
pub trait PfilEnv {
    /// Interface `i`'s name, as rules name it (`recv em0`).
    fn ifname(&self, i: IfIndex) -> Option<&str>;
    /// Interfaces there are (indices `0..ifcount`).
    fn ifcount(&self) -> usize;
    /// A number that changes whenever the interfaces do (a hook may cache by it).
    fn generation(&self) -> u64;
    /// `a` is one of the stack's addresses (`me`).
    fn is_local(&self, a: IpAddr) -> bool;
    /// The route back to `src` leaves by `rcvif` (uRPF, `verrevpath`).
    fn verrevpath(&self, src: IpAddr, rcvif: u32) -> bool;
    /// `src` is not ours, nor on a network connected through another interface than
    /// `rcvif` (`antispoof`).
    fn antispoof(&self, src: IpAddr, rcvif: u32) -> bool;
}

/// What a hook knows about the packet in hand.
#[derive(Clone, Copy)]
pub struct PfilCtx<'a> {
    pub point: PfilPoint,
    pub dir: Dir,
    /// The interface the packet arrives on (`In`) or leaves by (`Out`).
    pub ifindex: IfIndex,
    /// The interface it arrived on: `ifindex` going in; going out, that of a
    /// forwarded packet at the IP points, `None` for the stack's own packets (and at
    /// the layer-2 point, which does not know).
    pub rcvif: Option<IfIndex>,
    pub worker: usize,
    pub now: Instant,
    /// The stack, as far as a hook may ask of it, for this batch.
    pub env: &'a dyn PfilEnv,
}

impl std::fmt::Debug for PfilCtx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PfilCtx")
            .field("point", &self.point)
            .field("dir", &self.dir)
            .field("ifindex", &self.ifindex)
            .field("rcvif", &self.rcvif)
            .field("worker", &self.worker)
            .finish()
    }
}

/// Who holds the packet after a hook ran.
#[derive(Debug)]
pub enum Verdict {
    Pass(Mbuf),
    Dropped,
    Consumed,
    /// Refuse it with an answer to its source (the stack sends it, then frees the
    /// packet, counted as dropped).
    Reject(Mbuf, Reject),
}

/// The answer to a refused packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reject {
    /// A TCP reset (for TCP segments; others get port unreachable).
    Rst,
    /// ICMP destination unreachable with this code.
    Unreach(u8),
    /// ICMPv6 destination unreachable with this code.
    Unreach6(u8),
}

/// What the hooks decided for one packet of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PfilAct {
    /// On to the next hook, then the stack.
    Pass,
    /// Freed by the hook (the stack counts the drop).
    Drop,
    /// Kept by the hook (queued in a pipe, say).
    Consumed,
    /// Refused with an answer to its source.
    Reject(Reject),
    /// On to the stage, with the next hop an `ipfw fwd` rule chose (the stage's
    /// [`crate::link::cx::PfilScratch::take_nexthop`]); later hooks leave it alone.
    Fwd(std::net::IpAddr),
}

/// The packets of a stage's vector, in place, as the hooks see them: a stage
/// hands its own vector (its packets with its own data beside each), so nothing is
/// copied out for the hooks and back.
pub trait PfilItems {
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Packet `k`.
    fn mbuf(&mut self, k: usize) -> &mut Mbuf;
    /// The interface packet `k` arrives on (`In`) or leaves by (`Out`), and the one
    /// it arrived on, as [`PfilCtx::ifindex`] and [`PfilCtx::rcvif`] say.
    fn ifs(&self, k: usize) -> (IfIndex, Option<IfIndex>);
}

/// A vector of packets at one pfil point, and what the hooks decided for each so
/// far (all [`PfilAct::Pass`] to begin with).
pub struct PfilBatch<'a> {
    items: &'a mut dyn PfilItems,
    acts: &'a mut [PfilAct],
    /// Some packet's act is no longer `Pass`.
    changed: bool,
}

impl std::fmt::Debug for PfilBatch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PfilBatch")
            .field("len", &self.items.len())
            .field("acts", &self.acts)
            .finish()
    }
}

impl<'a> PfilBatch<'a> {
    /// The packets of `items`, with `acts` (as many, all `Pass`) for the verdicts.
    pub fn new(items: &'a mut dyn PfilItems, acts: &'a mut [PfilAct]) -> PfilBatch<'a> {
        debug_assert_eq!(items.len(), acts.len());
        PfilBatch {
            items,
            acts,
            changed: false,
        }
    }

    pub fn len(&self) -> usize {
        self.acts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.acts.is_empty()
    }

    /// Packet `k`, to read (or change in place: its tag, a pulled-up header).
    #[inline]
    pub fn mbuf(&mut self, k: usize) -> &mut Mbuf {
        self.items.mbuf(k)
    }

    /// Packet `k`'s interfaces (see [`PfilItems::ifs`]).
    #[inline]
    pub fn ifs(&self, k: usize) -> (IfIndex, Option<IfIndex>) {
        self.items.ifs(k)
    }

    /// What the hooks decided for packet `k` so far.
    #[inline]
    pub fn act(&self, k: usize) -> PfilAct {
        self.acts[k]
    }

    /// Decides packet `k`: `Drop` (the stage frees it, counted), `Reject` (the stage
    /// answers it). A hook that keeps a packet takes it with [`PfilBatch::take`].
    #[inline]
    pub fn set(&mut self, k: usize, act: PfilAct) {
        self.acts[k] = act;
        self.changed |= act != PfilAct::Pass;
    }

    /// Takes packet `k` for the hook to keep (`Consumed`): an empty packet with
    /// its header stands in its place until the stage drops it. `None` if the pool
    /// has no record for that stand-in: the packet is then dropped (`Drop`).
    pub fn take(&mut self, k: usize) -> Option<Mbuf> {
        let m = self.items.mbuf(k);
        match Mbuf::empty(m.hdr) {
            Ok(stand_in) => {
                let m = std::mem::replace(m, stand_in);
                self.set(k, PfilAct::Consumed);
                Some(m)
            }
            Err(_) => {
                self.set(k, PfilAct::Drop);
                None
            }
        }
    }

    /// Whether any packet was decided other than `Pass`.
    #[inline]
    pub fn changed(&self) -> bool {
        self.changed
    }
}

/// One packet as a [`PfilItems`] (a hook's [`PfilHook::filter`] by way of its
/// batch method, say).
#[derive(Debug)]
pub struct OneItem<'a> {
    pub m: &'a mut Mbuf,
    pub ifindex: IfIndex,
    pub rcvif: Option<IfIndex>,
}

impl PfilItems for OneItem<'_> {
    fn len(&self) -> usize {
        1
    }
    fn mbuf(&mut self, _k: usize) -> &mut Mbuf {
        self.m
    }
    fn ifs(&self, _k: usize) -> (IfIndex, Option<IfIndex>) {
        (self.ifindex, self.rcvif)
    }
}

/// A packet filter.
pub trait PfilHook: Send + Sync + std::fmt::Debug {
    fn name(&self) -> &str;
    fn filter(&self, m: Mbuf, cx: &PfilCtx<'_>) -> Verdict;

    /// Filters a vector of packets at one point, in place (`cx.ifindex` and
    /// `cx.rcvif` are the first packet's; [`PfilBatch::ifs`] gives each packet's).
    /// Packets whose act is no longer `Pass` are left alone. A hook that can do
    /// per-batch work once (load its rules, take its counters) overrides this; the
    /// default runs [`PfilHook::filter`] on each packet, an empty stand-in in its
    /// place meanwhile: one for the batch, taken back from each packet that comes
    /// back, a new one only after a packet the hook kept or freed (a packet the
    /// pool has no stand-in for is dropped).
    fn filter_batch(&self, b: &mut PfilBatch<'_>, cx: &PfilCtx<'_>) {
        let mut spare: Option<Mbuf> = None;
        for k in 0..b.len() {
            if b.act(k) != PfilAct::Pass {
                continue;
            }
            let stand_in = match spare.take().map_or_else(|| Mbuf::empty(b.mbuf(k).hdr), Ok) {
                Ok(s) => s,
                Err(_) => {
                    b.set(k, PfilAct::Drop);
                    continue;
                }
            };
            let m = std::mem::replace(b.mbuf(k), stand_in);
            let (ifindex, rcvif) = b.ifs(k);
            let pcx = PfilCtx {
                ifindex,
                rcvif,
                ..*cx
            };
            match self.filter(m, &pcx) {
                Verdict::Pass(m) => spare = Some(std::mem::replace(b.mbuf(k), m)),
                Verdict::Dropped => b.set(k, PfilAct::Drop),
                Verdict::Consumed => b.set(k, PfilAct::Consumed),
                Verdict::Reject(m, how) => {
                    spare = Some(std::mem::replace(b.mbuf(k), m));
                    b.set(k, PfilAct::Reject(how));
                }
            }
        }
    }

    /// Packets the hook kept (`Consumed`) that are due again at `now` (a shaper's
    /// pipe released them): the stack resumes each where it was taken, past the hooks
    /// (ipfw's one_pass). Every worker asks, each poll; a hook hands each packet once.
    fn poll(&self, _now: Instant, _out: &mut Vec<Deferred>) {}

    /// When [`PfilHook::poll`] will next have packets, if ever.
    fn next_wakeup(&self) -> Option<Instant> {
        None
    }

    /// Adds the hook's own counters (its tables', which no worker's block holds)
    /// into `s`, when the stack's counters are read ([`crate::Stack::stats`]).
    fn add_stats(&self, _s: &mut crate::stats::Stats) {}
}

/// A packet a hook kept and now gives back: where it was taken.
#[derive(Debug)]
pub struct Deferred {
    pub m: Mbuf,
    pub point: PfilPoint,
    pub dir: Dir,
    pub ifindex: IfIndex,
}

/// The hooks every interface runs, at each point, in order (FreeBSD's pfil heads,
/// where `ipfw` attaches), and each interface's arcs resolved from them and from its
/// own hooks ([`arcs`]). The data path reads the arcs; the heads are what they are
/// made from.
#[derive(Clone, Debug, Default)]
pub struct PfilHeads {
    pub ether_in: Vec<std::sync::Arc<dyn PfilHook>>,
    pub ether_out: Vec<std::sync::Arc<dyn PfilHook>>,
    pub inet_in: Vec<std::sync::Arc<dyn PfilHook>>,
    pub inet_out: Vec<std::sync::Arc<dyn PfilHook>>,
    pub inet6_in: Vec<std::sync::Arc<dyn PfilHook>>,
    pub inet6_out: Vec<std::sync::Arc<dyn PfilHook>>,
    /// Some hook defers packets (set by whoever adds such a hook).
    pub deferring: bool,
    /// The interfaces' arcs: their own hooks, the heads' hooks some do not run, and
    /// what each interface runs (remade by [`PfilHeads::resolve`] at each
    /// publication of the configuration).
    pub arcs: arcs::Arcs,
}

impl PfilHeads {
    /// Every hook once, however many points or interfaces it is on.
    pub fn hooks(&self) -> Vec<&std::sync::Arc<dyn PfilHook>> {
        self.arcs.unique().iter().collect()
    }

    pub fn head_mut(
        &mut self,
        point: PfilPoint,
        dir: Dir,
    ) -> &mut Vec<std::sync::Arc<dyn PfilHook>> {
        match (point, dir) {
            (PfilPoint::Ether, Dir::In) => &mut self.ether_in,
            (PfilPoint::Ether, Dir::Out) => &mut self.ether_out,
            (PfilPoint::Inet, Dir::In) => &mut self.inet_in,
            (PfilPoint::Inet, Dir::Out) => &mut self.inet_out,
            (PfilPoint::Inet6, Dir::In) => &mut self.inet6_in,
            (PfilPoint::Inet6, Dir::Out) => &mut self.inet6_out,
        }
    }

    /// The heads, by arc ([`arcs::arc_of`]).
    fn heads(&self) -> [&[std::sync::Arc<dyn PfilHook>]; arcs::ARCS] {
        [
            &self.ether_in,
            &self.ether_out,
            &self.inet_in,
            &self.inet_out,
            &self.inet6_in,
            &self.inet6_out,
        ]
    }

    /// Remakes every interface's arcs, for `n` interfaces (before a publication).
    pub fn resolve(&mut self, n: usize) {
        let mut arcs = std::mem::take(&mut self.arcs);
        arcs.forget_from(n);
        arcs.resolve(n, self.heads());
        self.arcs = arcs;
    }

    /// Takes the hook named `name` off interface `i`'s arc at (`point`, `dir`):
    /// its own hook of that name, else one of the heads' (for this interface only).
    /// Whether the arc had such a hook. Takes effect at the next publication.
    pub fn disable_on(&mut self, i: IfIndex, point: PfilPoint, dir: Dir, name: &str) -> bool {
        let a = arcs::arc_of(point, dir);
        let global = self.heads()[a].to_vec();
        self.arcs.disable(i, a, name, &global)
    }

    /// Runs the hooks of packet's interface at one point over a packet
    /// (`pfil_run_hooks`).
    #[inline]
    pub fn run(&self, m: Mbuf, cx: &PfilCtx<'_>) -> Verdict {
        let hooks = self.arcs.hooks(arcs::arc_of(cx.point, cx.dir), cx.ifindex);
        let mut m = m;
        for h in hooks {
            match h.filter(m, cx) {
                Verdict::Pass(next) => m = next,
                other => return other,
            }
        }
        Verdict::Pass(m)
    }

    /// Runs `hooks` (an arc's list) over a batch (`pfil_run_hooks` for a vector):
    /// each hook sees the whole vector before the next one does.
    #[inline]
    pub fn run_batch(
        hooks: &[std::sync::Arc<dyn PfilHook>],
        b: &mut PfilBatch<'_>,
        cx: &PfilCtx<'_>,
    ) {
        for h in hooks {
            h.filter_batch(b, cx);
        }
    }

    /// No interface runs a hook at (`point`, `dir`).
    #[inline]
    pub fn is_empty(&self, point: PfilPoint, dir: Dir) -> bool {
        self.arcs.shape(arcs::arc_of(point, dir)) == arcs::Shape::Empty
    }

    /// Interface `i` runs no hook at (`point`, `dir`).
    #[inline]
    pub fn is_empty_on(&self, point: PfilPoint, dir: Dir, i: IfIndex) -> bool {
        self.arcs.of(arcs::arc_of(point, dir), i) == 0
    }

    /// Whether any hook may hold packets for later (checked per poll, cheaply).
    pub fn has_deferring(&self) -> bool {
        self.deferring
    }

    /// Every hook once (a hook may sit at several points and interfaces).
    pub fn unique(&self) -> impl Iterator<Item = &std::sync::Arc<dyn PfilHook>> {
        self.arcs.unique().iter()
    }
}
