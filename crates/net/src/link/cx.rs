//! The link layer's batch context at work (its type, [`LinkCx`], is the link
//! module's): the pfil hooks run over one packet or over a stage's vector, and the
//! scratch a stage keeps for them; the packets the hooks refused, kept for the
//! worker to answer; and the lock-free neighbour lookups.

use crate::ifindex::IfIndex;
use crate::link::arp::ArpSnapshot;
use crate::link::lle::LleSnapshot;
use crate::link::LinkCx;
use crate::pfil::arcs::{arc_of, Shape};
use crate::pfil::{
    Dir, PfilAct, PfilBatch, PfilCtx, PfilHeads, PfilItems, PfilPoint, Reject, Verdict,
};
use crate::stats::DropReason;
use arc_swap::{ArcSwap, Cache};
use mbuf::Mbuf;
use std::sync::Arc;

/// A worker's lock-free view of an interface's ARP snapshot.
pub(crate) type ArpCache = Cache<Arc<ArcSwap<ArpSnapshot>>, Arc<ArpSnapshot>>;
/// The same for its IPv6 neighbour table.
pub(crate) type Nd6Cache =
    Cache<Arc<ArcSwap<LleSnapshot<std::net::Ipv6Addr>>>, Arc<LleSnapshot<std::net::Ipv6Addr>>>;

/// A packet a hook refused, for the worker to answer (a TCP reset, an ICMP or
/// ICMPv6 unreachable) once the stage is done: answers are built above the link,
/// and the hooks run below it.
#[derive(Debug)]
pub(crate) struct Rejected {
    pub m: Mbuf,
    pub point: PfilPoint,
    pub how: Reject,
}

/// A stage's scratch around the pfil hooks: the hooks' verdicts, and the vector
/// while it is sorted by them (only when some packet was not passed). Kept by the
/// stage between batches, so filtering a vector allocates nothing once warm.
#[derive(Debug)]
pub(crate) struct PfilScratch<M> {
    acts: Vec<PfilAct>,
    sort: Vec<(Mbuf, M)>,
    /// The next hops `ipfw fwd` set (FreeBSD's `PACKET_TAG_IPFORWARD`), by the
    /// packet's place in the vector the hooks handed back, last place first;
    /// empty when none did.
    nexthops: Vec<(usize, std::net::IpAddr)>,
}

impl<M> Default for PfilScratch<M> {
    fn default() -> Self {
        PfilScratch {
            acts: Vec::new(),
            sort: Vec::new(),
            nexthops: Vec::new(),
        }
    }
}

impl<M> PfilScratch<M> {
    /// The next hop a hook set for packet `k` of the vector it handed back, asked
    /// for each packet in order (`k` rising): taken from the end of a list kept in
    /// reverse, so each packet costs one comparison.
    #[inline]
    pub(crate) fn take_nexthop(&mut self, k: usize) -> Option<std::net::IpAddr> {
        match self.nexthops.last() {
            Some(&(i, a)) if i == k => {
                self.nexthops.pop();
                Some(a)
            }
            _ => None,
        }
    }
}

/// A stage's vector as the hooks see it ([`PfilItems`]): its packets in place,
/// each packet's interfaces from the stage's data of it.
struct StageItems<'a, M, F> {
    v: &'a mut [(Mbuf, M)],
    ifs: &'a F,
}

impl<M, F: Fn(&M) -> (IfIndex, Option<IfIndex>)> PfilItems for StageItems<'_, M, F> {
    #[inline]
    fn len(&self) -> usize {
        self.v.len()
    }
    #[inline]
    fn mbuf(&mut self, k: usize) -> &mut Mbuf {
        &mut self.v[k].0
    }
    #[inline]
    fn ifs(&self, k: usize) -> (IfIndex, Option<IfIndex>) {
        (self.ifs)(&self.v[k].1)
    }
}

impl LinkCx<'_> {
    /// Runs the pfil hooks at (`point`, `dir`) over one packet: the packet back if
    /// they pass it; `None` if a hook dropped it (counted as `dropped`), kept it
    /// (`pfil.consumed`) or refused it (answered by the worker).
    #[inline]
    pub(crate) fn pfil(
        &mut self,
        point: PfilPoint,
        dir: Dir,
        ifindex: IfIndex,
        m: Mbuf,
        dropped: DropReason,
    ) -> Option<Mbuf> {
        if self.pfil_skip || self.pfil.is_empty_on(point, dir, ifindex) {
            return Some(m);
        }
        let rcvif = (dir == Dir::In).then_some(ifindex);
        let pcx = PfilCtx {
            point,
            dir,
            ifindex,
            rcvif,
            worker: self.worker,
            now: self.now,
            env: self.pfil_env,
        };
        match self.pfil.run(m, &pcx) {
            Verdict::Pass(m) => Some(m),
            Verdict::Dropped => {
                dropped.count(self.stats);
                None
            }
            Verdict::Consumed => {
                self.stats.pfil.consumed += 1;
                None
            }
            Verdict::Reject(m, how) => {
                dropped.count(self.stats);
                self.rejects.push(Rejected { m, point, how });
                None
            }
        }
    }

    /// Whether a packet at (`point`, `dir`) may meet a hook, on whatever interface:
    /// a stage with none there moves its packets straight on.
    #[inline]
    pub(crate) fn pfil_active(&self, point: PfilPoint, dir: Dir) -> bool {
        !self.pfil_skip && !self.pfil.is_empty(point, dir)
    }

    /// Whether a packet at (`point`, `dir`) on interface `i` meets a hook (interface
    /// `i`'s arc there is not empty).
    #[inline]
    pub(crate) fn pfil_active_on(&self, point: PfilPoint, dir: Dir, i: IfIndex) -> bool {
        !self.pfil_skip && !self.pfil.is_empty_on(point, dir, i)
    }

    /// Whether a packet leaving by interface `i` (an index as a next hop holds it)
    /// meets no hook there, at layer 3 (`l3`) or 2: the forwarding fast path may
    /// take it even while other interfaces have hooks on their out arcs.
    #[inline]
    pub(crate) fn out_clear(&self, l3: PfilPoint, i: u32) -> bool {
        let i = IfIndex(i.min(u16::MAX as u32) as u16);
        let arcs = (1 << arc_of(l3, Dir::Out)) | (1 << arc_of(PfilPoint::Ether, Dir::Out));
        self.pfil_skip || !self.pfil.arcs.any_on(i, arcs)
    }

    /// Whether a packet leaving by interface `i` meets no layer-2 output hook there,
    /// so that its link header is written as soon as its next hop is known.
    #[inline]
    pub(crate) fn ether_direct(&self, i: IfIndex) -> bool {
        !self.pfil_active_on(PfilPoint::Ether, Dir::Out, i)
    }

    /// Runs the pfil hooks at (`point`, `dir`) over a stage's vector (`pfil_run_hooks`
    /// once for the whole vector; `ifs` gives each packet's interface and arrival
    /// interface): what they pass stays in `pkts`, in order; what they drop is
    /// counted as `dropped`, what they keep as `pfil.consumed`, and what they refuse
    /// goes to the worker to be answered. Costs one test when no hook is there.
    #[inline]
    pub(crate) fn pfil_vec<M: Copy>(
        &mut self,
        point: PfilPoint,
        dir: Dir,
        dropped: DropReason,
        pkts: &mut Vec<(Mbuf, M)>,
        s: &mut PfilScratch<M>,
        ifs: impl Fn(&M) -> (IfIndex, Option<IfIndex>),
    ) {
        if pkts.is_empty() || !self.pfil_active(point, dir) {
            return;
        }
        self.pfil_vec_slow(point, dir, dropped, pkts, s, ifs);
    }

    /// The hooks over the stage's own vector, in place (`PfilItems`): nothing is
    /// copied when they pass everything (a copy of the vector out for the hooks and
    /// back cost about 15 cycles a packet a pass, `mpstack bench router`, ipfw).
    /// Each packet meets its own interface's arc: the whole vector at once when every
    /// interface runs the same hooks, else each run of packets whose interfaces run
    /// the same list through that list.
    #[inline(never)]
    fn pfil_vec_slow<M: Copy>(
        &mut self,
        point: PfilPoint,
        dir: Dir,
        dropped: DropReason,
        pkts: &mut Vec<(Mbuf, M)>,
        s: &mut PfilScratch<M>,
        ifs: impl Fn(&M) -> (IfIndex, Option<IfIndex>),
    ) {
        s.acts.clear();
        s.acts.resize(pkts.len(), PfilAct::Pass);
        s.nexthops.clear();
        let arc = arc_of(point, dir);
        let arcs = &self.pfil.arcs;
        let (worker, now, env) = (self.worker, self.now, self.pfil_env);
        let pcx = |(ifindex, rcvif): (IfIndex, Option<IfIndex>)| PfilCtx {
            point,
            dir,
            ifindex,
            rcvif,
            worker,
            now,
            env,
        };
        let mut changed = false;
        match arcs.shape(arc) {
            Shape::Empty => return,
            Shape::Uniform(id) => {
                let cx0 = pcx(ifs(&pkts[0].1));
                let mut items = StageItems {
                    v: &mut pkts[..],
                    ifs: &ifs,
                };
                let mut b = PfilBatch::new(&mut items, &mut s.acts);
                PfilHeads::run_batch(arcs.list(id), &mut b, &cx0);
                changed = b.changed();
            }
            Shape::Mixed => {
                let mut k = 0;
                while k < pkts.len() {
                    let id = arcs.of(arc, ifs(&pkts[k].1).0);
                    let mut end = k + 1;
                    while end < pkts.len() && arcs.of(arc, ifs(&pkts[end].1).0) == id {
                        end += 1;
                    }
                    if id != 0 {
                        let cxk = pcx(ifs(&pkts[k].1));
                        let mut items = StageItems {
                            v: &mut pkts[k..end],
                            ifs: &ifs,
                        };
                        let mut b = PfilBatch::new(&mut items, &mut s.acts[k..end]);
                        PfilHeads::run_batch(arcs.list(id), &mut b, &cxk);
                        changed |= b.changed();
                    }
                    k = end;
                }
            }
        }
        if !changed {
            return;
        }
        // Some packet was dropped, kept or refused: the vector sorted by verdict.
        s.sort.clear();
        s.sort.append(pkts);
        for ((m, x), &act) in s.sort.drain(..).zip(&s.acts) {
            match act {
                PfilAct::Pass => pkts.push((m, x)),
                PfilAct::Fwd(nh) => {
                    s.nexthops.push((pkts.len(), nh));
                    pkts.push((m, x));
                }
                // The hook has the packet; this is the stand-in it left.
                PfilAct::Consumed => self.stats.pfil.consumed += 1,
                PfilAct::Reject(how) => {
                    dropped.count(self.stats);
                    self.rejects.push(Rejected { m, point, how });
                }
                PfilAct::Drop => dropped.count(self.stats),
            }
        }
        // Taken from the end, in the vector's order.
        s.nexthops.reverse();
    }

    /// Counts a drop and frees the packet.
    #[inline]
    pub fn drop_pkt(&mut self, m: Mbuf, why: DropReason) {
        why.count(self.stats);
        drop(m);
    }

    /// The fresh neighbour entry for `ip` on interface `i`, lock-free.
    #[inline]
    pub fn arp_lookup(
        &mut self,
        i: IfIndex,
        ip: std::net::Ipv4Addr,
    ) -> Option<wire::EthernetAddress> {
        let now = self.now;
        self.arp_snaps
            .get_mut(i.get())
            .and_then(|c| c.load().lookup(ip, now))
    }

    /// The fresh IPv6 neighbour entry for `ip` on interface `i`, lock-free.
    #[inline]
    pub fn nd6_lookup(
        &mut self,
        i: IfIndex,
        ip: std::net::Ipv6Addr,
    ) -> Option<wire::EthernetAddress> {
        let now = self.now;
        self.nd6_snaps
            .get_mut(i.get())
            .and_then(|c| c.load().lookup(ip, now))
    }
}
