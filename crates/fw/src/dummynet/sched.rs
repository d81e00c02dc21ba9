//! A pipe's schedulers: FIFO, and WF2Q+ as FreeBSD's `dn_sched_wf2q.c` has it.
//!
//! What it owns: the order in which a pipe's queues are served (the FIFO's arrival
//! list; WF2Q+'s virtual time, weight sum and three heaps) and the tags in each
//! queue. It pops packets from the queues it is given; making and freeing queues is
//! the pipe's, which it asks to free a queue by pushing its index to `expired`.

use super::pipe::{FlowQueue, OWN_QUEUE};
use super::{DnPacket, SchedKind};
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, VecDeque};

/// 1.0 in the 64.64 fixed point of the tags (FreeBSD: `ONE_FP`, 1 << 31).
pub(super) const ONE: u128 = 1 << 64;

/// Where a queue stands with WF2Q+ (FreeBSD marks `New` by `S > F`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WfState {
    /// Not counted in the weight sum.
    New,
    /// Empty, but still in the weight sum until `V` passes its `F` (the idle heap).
    Idle,
    /// Has packets; in the eligible heap (`S <= V`) or the not-eligible heap.
    Backlogged,
}

/// A queue's WF2Q+ start and finish tags.
#[derive(Clone, Copy, Debug)]
pub(super) struct Tags {
    pub(super) s: u128,
    pub(super) f: u128,
    pub(super) state: WfState,
}

impl Tags {
    pub(super) const NEW: Tags = Tags {
        s: 0,
        f: 0,
        state: WfState::New,
    };
}

type Heap = BinaryHeap<Reverse<(u128, u32)>>;

/// WF2Q+'s state for one pipe (FreeBSD's `struct wf2qp_si`).
#[derive(Debug, Default)]
pub(super) struct Wf2q {
    /// Virtual time.
    v: u128,
    wsum: u64,
    /// `ONE / wsum`.
    inv_wsum: u128,
    /// Eligible backlogged queues by finish tag.
    sch: Heap,
    /// Not yet eligible backlogged queues by start tag.
    ne: Heap,
    /// Idle queues still in the weight sum, by finish tag.
    idle: BTreeSet<(u128, u32)>,
}

#[derive(Debug)]
pub(super) enum Sched {
    /// Queue indices, one per queued packet, in arrival order.
    Fifo(VecDeque<u32>),
    Wf2q(Wf2q),
}

fn head_len<T: DnPacket>(q: &FlowQueue<T>) -> u128 {
    q.pkts.front().map_or(0, |p| p.1.len() as u128)
}

/// Pops queue `qid`'s head; asks for the queue to be freed if FIFO leaves it empty.
fn pop<T: DnPacket>(qs: &mut [FlowQueue<T>], qid: u32) -> Option<T> {
    let q = &mut qs[qid as usize];
    let (_, pkt) = q.pkts.pop_front()?;
    q.bytes -= pkt.len();
    Some(pkt)
}

impl Sched {
    pub(super) fn new(kind: SchedKind) -> Self {
        match kind {
            SchedKind::Fifo => Sched::Fifo(VecDeque::new()),
            SchedKind::Wf2q => Sched::Wf2q(Wf2q::default()),
        }
    }

    pub(super) fn kind(&self) -> SchedKind {
        match self {
            Sched::Fifo(_) => SchedKind::Fifo,
            Sched::Wf2q(_) => SchedKind::Wf2q,
        }
    }

    /// A packet was appended to queue `qid`.
    pub(super) fn enqueued<T: DnPacket>(&mut self, qs: &mut [FlowQueue<T>], qid: u32) {
        match self {
            Sched::Fifo(order) => order.push_back(qid),
            Sched::Wf2q(w) => {
                if qs[qid as usize].pkts.len() == 1 {
                    w.backlogged(qs, qid);
                }
            }
        }
    }

    /// The next packet to send, if any.
    pub(super) fn dequeue<T: DnPacket>(
        &mut self,
        qs: &mut [FlowQueue<T>],
        expired: &mut Vec<u32>,
    ) -> Option<T> {
        match self {
            Sched::Fifo(order) => {
                let qid = order.pop_front()?;
                let pkt = pop(qs, qid)?;
                if qid != OWN_QUEUE && qs[qid as usize].pkts.is_empty() {
                    expired.push(qid);
                }
                Some(pkt)
            }
            Sched::Wf2q(w) => w.dequeue(qs, expired),
        }
    }

    /// Lets go of every idle queue (FreeBSD's queue expiry), so the pipe may free it.
    pub(super) fn expire_idle<T: DnPacket>(
        &mut self,
        qs: &mut [FlowQueue<T>],
        expired: &mut Vec<u32>,
    ) {
        if let Sched::Wf2q(w) = self {
            w.idle_check(qs, usize::MAX, true, expired);
        }
    }

    pub(super) fn set_weight<T: DnPacket>(&mut self, qs: &mut [FlowQueue<T>], qid: u32, w: u32) {
        let q = &mut qs[qid as usize];
        if let Sched::Wf2q(s) = self {
            if q.tags.state != WfState::New {
                s.wsum = s.wsum - u64::from(q.weight) + u64::from(w);
                s.inv_wsum = ONE / u128::from(s.wsum);
            }
        }
        q.weight = w;
        q.inv_w = ONE / u128::from(w);
    }
}

impl Wf2q {
    fn set_wsum(&mut self, wsum: u64) {
        self.wsum = wsum;
        self.inv_wsum = if wsum > 0 { ONE / u128::from(wsum) } else { 0 };
    }

    /// Queue `qid` has become backlogged (FreeBSD's `wf2qp_enqueue` of an idle queue).
    pub(super) fn backlogged<T: DnPacket>(&mut self, qs: &mut [FlowQueue<T>], qid: u32) {
        let q = &mut qs[qid as usize];
        match q.tags.state {
            WfState::New => {
                q.tags.s = self.v;
                self.set_wsum(self.wsum + u64::from(q.weight));
            }
            WfState::Idle => {
                self.idle.remove(&(q.tags.f, qid));
                q.tags.s = q.tags.f.max(self.v);
            }
            WfState::Backlogged => return,
        }
        q.tags.f = q.tags.s + head_len(q) * q.inv_w;
        q.tags.state = WfState::Backlogged;
        // If nothing else is backlogged, the queue must be eligible.
        if self.sch.is_empty() && self.ne.is_empty() {
            self.v = self.v.max(q.tags.s);
        }
        if self.v < q.tags.s {
            self.ne.push(Reverse((q.tags.s, qid)));
        } else {
            self.sch.push(Reverse((q.tags.f, qid)));
        }
    }

    /// Takes up to `n` queues out of the idle heap: those whose `F` is behind `V`,
    /// or all if `force`. They leave the weight sum; the pipe frees them.
    fn idle_check<T: DnPacket>(
        &mut self,
        qs: &mut [FlowQueue<T>],
        mut n: usize,
        force: bool,
        expired: &mut Vec<u32>,
    ) {
        while n > 0 {
            let Some(&(f, qid)) = self.idle.first() else {
                break;
            };
            if !force && f >= self.v {
                break;
            }
            self.idle.pop_first();
            let q = &mut qs[qid as usize];
            q.tags.state = WfState::New;
            self.set_wsum(self.wsum - u64::from(q.weight));
            if qid != OWN_QUEUE {
                expired.push(qid);
            }
            n -= 1;
        }
    }

    /// FreeBSD's `wf2qp_dequeue`.
    fn dequeue<T: DnPacket>(
        &mut self,
        qs: &mut [FlowQueue<T>],
        expired: &mut Vec<u32>,
    ) -> Option<T> {
        if self.sch.is_empty() && self.ne.is_empty() {
            self.idle_check(qs, usize::MAX, true, expired);
            self.v = 0;
            self.set_wsum(0);
            return None;
        }
        self.idle_check(qs, 1, false, expired);
        let mut got = None;
        loop {
            // V = max(V, min S) when nothing is eligible (all of `sch` has S <= V).
            if self.sch.is_empty() {
                if let Some(Reverse((s, _))) = self.ne.peek() {
                    self.v = self.v.max(*s);
                }
            }
            while let Some(&Reverse((s, qid))) = self.ne.peek() {
                if s > self.v {
                    break;
                }
                self.ne.pop();
                self.sch.push(Reverse((qs[qid as usize].tags.f, qid)));
            }
            if got.is_some() {
                return got;
            }
            let Reverse((_, qid)) = self.sch.pop()?;
            let pkt = pop(qs, qid)?;
            self.v += pkt.len() as u128 * self.inv_wsum;
            let q = &mut qs[qid as usize];
            q.tags.s = q.tags.f;
            if q.pkts.is_empty() {
                q.tags.state = WfState::Idle;
                self.idle.insert((q.tags.f, qid));
            } else {
                q.tags.f += head_len(q) * q.inv_w;
                if q.tags.s <= self.v {
                    self.sch.push(Reverse((q.tags.f, qid)));
                } else {
                    self.ne.push(Reverse((q.tags.s, qid)));
                }
            }
            got = Some(pkt);
        }
    }
}
