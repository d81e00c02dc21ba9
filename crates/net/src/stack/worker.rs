//! Workers: run to completion, in batches, one per core.
//!
//! A worker owns some device queues and everything per-flow that lives on it. One
//! [`Worker::poll`] receives a burst from each owned queue, runs every frame through
//! the pipeline (`ether_input` → `arp_input` / `ip_input` → `icmp_input` /
//! `udp_input`), drains the send queues of the sockets homed here, runs due timers,
//! and flushes what it produced with one `tx_burst` per queue. The configuration is
//! loaded once per poll (an RCU read section); counters are plain fields published
//! once per poll. Nothing here takes a lock on the fast path or allocates per packet.

use crate::inet::cx::{CtlInput, Inet4, TokenBucket};
use crate::inet::forward;
use crate::inet6::cx::Inet6;
use crate::inet6::input6;
use crate::ip::frag::Reass;
use crate::ip::IpCx;
use crate::link::arp::ArpOutput;
use crate::link::cx::{ArpCache, Nd6Cache, Rejected};
use crate::link::ether;
use crate::link::iface::IfIndex;
use crate::link::LinkCx;
use crate::runtime::Runtime;
use crate::sockbuf::SockShared;
use crate::stack::{NetConfig, Shared, StackEnv};
use crate::stats::Stats;
use crate::tcp::layer::cx::TcpLayer;
use crate::tcp::layer::TcpWorker;
use arc_swap::Cache;
use dev::time::Clock;
use dev::{Duration, Instant, Queue, QueueStats};
use mbuf::Mbuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub(crate) use crate::stack::batch::Cx;

mod input;
mod protosw;
mod publish;
mod sockets;
mod tcp;
mod timers;
mod tx;
mod upcalls;

struct OwnedQueue {
    ifindex: IfIndex,
    q: Box<dyn Queue>,
}

/// One worker: its queues, batches, caches and counters.
pub(crate) struct Worker {
    id: usize,
    pub(crate) shared: Arc<Shared>,
    queues: Vec<OwnedQueue>,
    /// For each interface, the owned queue used to transmit, if any.
    txq_of_if: Vec<Option<usize>>,
    rx: Vec<Mbuf>,
    tx: Vec<Vec<Mbuf>>,
    loopq: Vec<(IfIndex, Mbuf)>,
    arp_out: Vec<ArpOutput>,
    gso_segs: Vec<Mbuf>,
    arp_snaps: Vec<ArpCache>,
    nd6_snaps: Vec<Nd6Cache>,
    wake: Vec<Arc<SockShared>>,
    netchan_tally: Vec<(usize, u64)>,
    stats: Stats,
    /// The configuration this worker last saw; compared by pointer each poll, cloned
    /// only when a new one is published.
    cfg: Arc<NetConfig>,
    /// The FIB as of this poll (refreshed when the control plane publishes).
    fib: Arc<route::Fib>,
    /// This worker's flow table, when the stack keeps one.
    flows: Option<route::FlowTable>,
    icmp_bucket: TokenBucket,
    /// ICMPv6's own rate limit (FreeBSD's `icmp6errppslim`).
    icmp6_bucket: TokenBucket,
    ip_id: u16,
    /// IPv6 fragment headers sent (their ids are drawn from it, keyed).
    frag6_count: u32,
    reass: Reass,
    tcp: TcpWorker,
    /// The stages' vectors, reused from batch to batch.
    v: Vectors,
    /// The stages' runtime counters.
    rt: Runtime,
    /// Packets the hooks refused in this poll, for the worker to answer.
    rejects: Vec<Rejected>,
    /// What ICMP learnt for the transports in this poll.
    ctlinput: Vec<CtlInput>,
    /// Whether the last poll received, sent or handled anything (the spin policy of
    /// [`Worker::run`]).
    worked: bool,
    /// When the counters were last published (see [`PUBLISH_EVERY`]).
    published: Instant,
    /// When the device queues' counters were last published (see
    /// [`QSTATS_EVERY`]).
    qpublished: Instant,
    /// How many device queues the last publication of their counters had: a
    /// change publishes at once (so the published list is sized while the worker
    /// warms up, not in its steady state).
    qlen: usize,
    /// Whether a saturated poll may leave its counters unpublished: only on the
    /// worker's own thread ([`Worker::run`]). Polled by the caller (`Stack::poll`),
    /// every poll publishes, so the caller reads exact counters between polls.
    throttle: bool,
}

/// While every poll fills its bursts (the worker is saturated), a worker on its own
/// thread publishes its counters at most this often; a poll that drains its queues
/// always publishes, and so does the worker as it stops.
/// Copying every counter out costs about a thousand instructions, which every poll
/// of 64 packets used to pay.
const PUBLISH_EVERY: Duration = Duration::from_millis(1);

/// A running worker publishes its device queues' counters (for `netstat -i` while
/// the node runs) at most this often.
const QSTATS_EVERY: Duration = Duration::from_millis(100);

/// The vectors the stages sort packets into, kept by the worker so that a batch
/// allocates nothing once they have grown to a burst.
#[derive(Debug, Default)]
struct Vectors {
    ether: ether::EtherInputVecs,
    ip: crate::inet::input::IpInputVecs,
    fwd: forward::IpForwardVecs,
    ip6: input6::Ip6InputVecs,
    fwd6: crate::inet6::forward6::Ip6ForwardVecs,
    l2: Vec<ether::L2Out>,
    eout: ether::EtherOutputVecs,
    br: crate::link::bridge::input::BridgeVecs,
    /// VLAN input's scratch: frames untagged for a VLAN interface, the parent's
    /// own, a sort buffer, and one VLAN's share.
    vlan_tagged: Vec<(IfIndex, Mbuf)>,
    vlan_rest: Vec<Mbuf>,
    vlan_other: Vec<(IfIndex, Mbuf)>,
    vlan_one: Vec<Mbuf>,
    /// LRO's output, swapped with the burst.
    lro: Vec<Mbuf>,
    /// One packet, for those that enter alone (looped back, resumed by a hook).
    one: Vec<Mbuf>,
}

/// The worker's own state in one poll, beside the stages' context: what the
/// phases of [`Worker::poll`] take, and what they found.
struct Poll<'a> {
    id: usize,
    now: Instant,
    burst: usize,
    shared: &'a Shared,
    cfg: &'a NetConfig,
    queues: &'a mut Vec<OwnedQueue>,
    txq_of_if: &'a [Option<usize>],
    rx: &'a mut Vec<Mbuf>,
    v: &'a mut Vectors,
    rt: &'a mut Runtime,
    /// Whether the poll received, sent or handled anything ([`Worker::worked`]).
    worked: &'a mut bool,
    published: &'a mut Instant,
    qpublished: &'a mut Instant,
    qlen: &'a mut usize,
    throttle: bool,
    /// Work remains (a full burst, a queue not drained): run again at once.
    more: bool,
    /// A closed socket sent all it had: the configuration forgets it.
    drained_closed: bool,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("id", &self.id)
            .field("queues", &self.queues.len())
            .finish()
    }
}

impl Worker {
    pub fn new(id: usize, shared: Arc<Shared>) -> Self {
        let burst = shared.params.burst;
        let icmp_limit = shared.params.icmp_limit;
        let shared_max_conns = shared.params.tcp_max_conns;
        let frag = shared.params.frag;
        let flows = shared.params.flow_table.map(|mut c| {
            c.seed ^= shared.isn_secret;
            route::FlowTable::new(c)
        });
        Worker {
            id,
            shared,
            queues: Vec::new(),
            txq_of_if: Vec::new(),
            rx: Vec::with_capacity(burst),
            tx: Vec::new(),
            loopq: Vec::with_capacity(burst),
            arp_out: Vec::with_capacity(32),
            gso_segs: Vec::new(),
            arp_snaps: Vec::new(),
            nd6_snaps: Vec::new(),
            wake: Vec::with_capacity(16),
            netchan_tally: Vec::new(),
            stats: Stats::default(),
            cfg: Arc::new(NetConfig::default()),
            fib: Arc::new(route::Fib::default()),
            flows,
            icmp_bucket: TokenBucket::new(icmp_limit),
            icmp6_bucket: TokenBucket::new(icmp_limit),
            ip_id: (id as u16).wrapping_mul(0x2f1d),
            frag6_count: (id as u32).wrapping_mul(0x2f1d_3b5d),
            reass: Reass::new(frag),
            tcp: TcpWorker::new(shared_max_conns),
            v: Vectors::default(),
            rt: Runtime::default(),
            rejects: Vec::new(),
            published: Instant::ZERO,
            qpublished: Instant::ZERO,
            qlen: usize::MAX,
            throttle: false,
            ctlinput: Vec::new(),
            worked: false,
        }
    }

    pub fn id(&self) -> usize {
        self.id
    }

    pub fn attach_queue(&mut self, ifindex: IfIndex, q: Box<dyn Queue>) {
        let idx = self.queues.len();
        self.queues.push(OwnedQueue { ifindex, q });
        if self.txq_of_if.len() <= ifindex.get() {
            self.txq_of_if.resize(ifindex.get() + 1, None);
        }
        if self.txq_of_if[ifindex.get()].is_none() {
            self.txq_of_if[ifindex.get()] = Some(idx);
        }
    }

    pub fn queue_stats(&self) -> Vec<(usize, IfIndex, QueueStats)> {
        self.queues
            .iter()
            .map(|q| (self.id, q.ifindex, q.q.stats()))
            .collect()
    }

    /// Rebuilds per-interface state after the configuration changed (rare: allocation
    /// here is fine).
    fn refresh(&mut self, cfg: &NetConfig) {
        let n = cfg.ifaces.len();
        self.tx.resize_with(n, || Vec::with_capacity(256));
        if self.txq_of_if.len() < n {
            self.txq_of_if.resize(n, None);
        }
        self.arp_snaps = cfg
            .ifaces
            .iter()
            .map(|i| Cache::new(i.arp.snapshot_handle()))
            .collect();
        self.nd6_snaps = cfg
            .ifaces
            .iter()
            .map(|i| Cache::new(i.nd6.snapshot_handle()))
            .collect();
    }

    /// One run of the pipeline at `now`: its phases, in order. Returns when to run
    /// next: `<= now` if work remains, a timer, or `None` when idle until a frame or
    /// a socket arrives.
    pub fn poll(&mut self, now: Instant) -> Option<Instant> {
        self.reload();
        self.with_cx(now, |cx, w| {
            // 1. Receive and process one burst per owned queue, a stage at a time;
            // then the TCP output its segments deferred to the end of the batch.
            input::receive(cx, w);
            upcalls::flush_tcp(cx);
            // 2. Frames handed over by workers that own no queue of an interface.
            tx::handed_over(cx, w);
            // 3. Sockets homed here: their send queues.
            sockets::drain(cx, w);
            // 4. TCP: work handed over by applications and other workers.
            tcp::inbox(cx, w);
            // 5. Every protocol's timers, as they registered them.
            let mut next = timers::run(cx, w.rt, w.v, w.id, now);
            // 6. Packets to ourselves, and those taken off a tunnel, input again
            // after the batch (bounded per poll).
            input::loopback(cx, w);
            // What the timers' and sockets' output left for the layers above.
            upcalls::upcalls(cx);
            // 7. Flush: one tx burst per interface.
            tx::flush(cx, w);
            // Closed sockets that have sent everything leave the configuration (rare).
            if w.drained_closed {
                w.shared.forget_drained(w.id);
            }
            next = timers::earliest(next, timers::late(cx));
            tcp::end_of_poll(cx);
            // 8. Publish counters, wake applications.
            publish::publish(cx, w);
            for oq in w.queues.iter() {
                next = timers::earliest(next, oq.q.poll_at());
            }
            if w.more || cx.tcp.handed_off {
                return Some(now);
            }
            next
        })
    }

    /// Takes the configuration and the FIB the control plane published last, when
    /// they are new (compared by pointer: an RCU read section, no lock).
    fn reload(&mut self) {
        let cur = self.shared.cfg.load();
        if !Arc::ptr_eq(&cur, &self.cfg) {
            let cur = arc_swap::Guard::into_inner(cur);
            self.refresh(&cur);
            self.cfg = cur;
        }
        let fib = self.shared.fib.load();
        if !Arc::ptr_eq(&fib, &self.fib) {
            self.fib = arc_swap::Guard::into_inner(fib);
        }
    }

    /// Lends the worker's parts for one poll at `now` ([`Cx`]: borrows of its own
    /// fields, and of the configuration and FIB it holds, side by side; nothing is
    /// copied or allocated), and runs `f` with them and the rest of its state
    /// ([`Poll`]).
    fn with_cx<R>(&mut self, now: Instant, f: impl FnOnce(&mut Cx<'_>, &mut Poll<'_>) -> R) -> R {
        let burst = self.shared.params.burst;
        let Worker {
            id,
            queues,
            txq_of_if,
            rx,
            tx,
            loopq,
            arp_out,
            gso_segs,
            arp_snaps,
            nd6_snaps,
            wake,
            netchan_tally,
            stats,
            icmp_bucket,
            icmp6_bucket,
            ip_id,
            frag6_count,
            reass,
            tcp,
            shared,
            cfg,
            fib,
            flows,
            worked,
            v,
            rt,
            rejects,
            ctlinput,
            published,
            qpublished,
            qlen,
            throttle,
            ..
        } = self;
        *worked = false;
        let cfg: &NetConfig = cfg;
        let shared: &Shared = shared;
        let env = StackEnv { cfg, fib };
        let mut cx = Cx {
            link: LinkCx {
                now,
                worker: *id,
                stats,
                access: shared.params.hdr_access,
                ifaces: &cfg.ifaces,
                tx,
                arp_out,
                gso_segs,
                arp_snaps,
                nd6_snaps,
                pfil: &cfg.pfil,
                pfil_env: &env,
                pfil_skip: false,
                rejects,
                bridges: &cfg.bridges,
            },
            ip: IpCx {
                fib,
                flows: flows.as_mut(),
                loopq,
                wake,
                frag: reass,
                isn_secret: shared.isn_secret,
                send_redirects: shared.params.send_redirects,
                rtbus: &shared.rtbus,
                ctlinput,
                udp: &cfg.udp,
            },
            v4: Inet4 {
                inet: &cfg.inet,
                icmp_bucket,
                ip_id,
                ctl4: shared,
            },
            v6: Inet6 {
                inet6: &cfg.inet6,
                ctl6: shared,
                dad_transmits: shared.params.dad_transmits,
                accept_rtadv: shared.params.accept_rtadv,
                slaac: shared.params.slaac,
                icmp_bucket: icmp6_bucket,
                frag_count: frag6_count,
            },
            tcp: TcpLayer {
                cfg: cfg.tcp,
                nworkers: shared.wake.len(),
                listen: &cfg.tcp_listen,
                inboxes: &shared.tcp_inbox,
                tfo: &shared.tfo,
                mem: &shared.tcp_mem,
                handed_off: false,
            },
            tw: tcp,
            tunnels: &cfg.tunnels,
            netchannels: &cfg.netchannels,
            netchan_tally,
        };

        let mut w = Poll {
            id: *id,
            now,
            burst,
            shared,
            cfg,
            queues,
            txq_of_if,
            rx,
            v,
            rt,
            worked,
            published,
            qpublished,
            qlen,
            throttle: *throttle,
            more: false,
            drained_closed: false,
        };
        f(&mut cx, &mut w)
    }

    /// True if something is waiting that a device fd would not announce.
    fn has_pending(&self) -> bool {
        let cfg = self.shared.cfg.load();
        let handoff = self.id == 0 && cfg.handoff.iter().any(|hq| !hq.is_empty());
        let tcp = self
            .shared
            .tcp_inbox
            .get(self.id)
            .is_some_and(|q| !q.is_empty())
            || self
                .shared
                .tcp_overflow
                .get(self.id)
                .is_some_and(|o| o.pending());
        handoff
            || tcp
            || cfg
                .by_worker
                .get(self.id)
                .is_some_and(|v| v.iter().any(|s| !s.txq.is_empty()))
    }

    /// The worker thread's loop: poll, then sleep in `poll(2)` until a frame, a
    /// notification or the next timer.
    pub fn run(&mut self, clock: &dyn Clock, stop: &AtomicBool) {
        self.throttle = true;
        let mut poller = dev::poll::Poller::new();
        // Asked once: `fd()` arms a queue's wake-up (and raises it, in case frames
        // already wait), so asking again on every sleep would make every sleep
        // return at once.
        let mut fds: Vec<std::os::fd::RawFd> =
            self.queues.iter().filter_map(|q| q.q.fd()).collect();
        // A queue without a descriptor is polled at least every millisecond.
        let cap = if fds.len() < self.queues.len() {
            Duration::from_millis(1)
        } else {
            Duration::from_millis(100)
        };
        let wake = &self.shared.wake[self.id];
        let notifier_fd = wake.notifier.get().map(|n| n.fd());
        fds.extend(notifier_fd);
        // When the last work was at most `busy_poll` ago, the worker yields the CPU
        // and polls again instead of sleeping: in a request-response exchange the
        // answer often comes within microseconds, and a real sleep costs a wake-up
        // through the kernel (tens of microseconds on virtual machines) on each side.
        // Yielding, not spinning, so that on a machine with fewer cores than busy
        // threads the applications this worker waits for still get to run.
        let spin = self.shared.params.busy_poll;
        let mut last_work = clock.now();
        while !stop.load(Ordering::SeqCst) {
            let now = clock.now();
            let next = self.poll(now);
            if next.is_some_and(|t| t <= now) {
                continue;
            }
            if self.worked {
                last_work = now;
            }
            if now.saturating_duration_since(last_work) < spin {
                std::thread::yield_now();
                continue;
            }
            let wake = &self.shared.wake[self.id];
            wake.sleeping.store(true, Ordering::SeqCst);
            if self.has_pending() || stop.load(Ordering::SeqCst) {
                wake.sleeping.store(false, Ordering::SeqCst);
                continue;
            }
            let timeout = next
                .map(|t| t.saturating_duration_since(clock.now()))
                .unwrap_or(cap)
                .min(cap);
            // Asked to give memory back (`mbuf::pool::reclaim`): this worker's free
            // buffers go back to the pool before it sleeps. One atomic load else.
            mbuf::pool::reclaim_if_asked();
            let _ = poller.wait(&fds, Some(timeout));
            wake.sleeping.store(false, Ordering::SeqCst);
            if let Some(n) = wake.notifier.get() {
                n.drain();
            }
        }
        // What the last saturated polls counted, not yet published.
        self.shared.stats[self.id].publish(&self.stats);
        self.shared.runtime[self.id].publish(&self.rt);
        *self.shared.qstats[self.id]
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = self.queue_stats();
        self.throttle = false;
    }
}
