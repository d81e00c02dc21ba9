//! Workers: run to completion, in batches, one per core.
//!
//! A worker owns some device queues and everything per-flow that lives on it. One
//! [`Worker::poll`] receives a burst from each owned queue, runs every frame through
//! the pipeline (`ether_input` → `arp_input` / `ip_input` → `icmp_input` /
//! `udp_input`), drains the send queues of the sockets homed here, runs due timers,
//! and flushes what it produced with one `tx_burst` per queue. The configuration is
//! loaded once per poll (an RCU read section); counters are plain fields published
//! once per poll. Nothing here takes a lock on the fast path or allocates per packet.

use crate::inet::cx::{CtlInput, InetCx, TokenBucket};
use crate::inet::frag::Reass;
use crate::inet::ip::IpInfo;
use crate::inet::{forward, icmp, ip, udp};
use crate::inet6::cx::Inet6Cx;
use crate::inet6::ip6;
use crate::inet6::ip6::Ip6Info;
use crate::link::arp::ArpOutput;
use crate::link::cx::{ArpCache, LinkCx, Nd6Cache, Rejected};
use crate::link::ether;
use crate::link::iface::{IfIndex, Ifnet};
use crate::pfil::{Deferred, Dir, PfilPoint};
use crate::runtime::{ticks, Runtime, Stage};
use crate::sockbuf::SockShared;
use crate::stack::{netchannel, NetConfig, Shared, StackEnv};
use crate::stats::{DropReason, Stats};
use crate::tcp::cx::TcpCx;
use crate::tcp::layer::{TcpMsg, TcpWorker};
use arc_swap::Cache;
use dev::time::Clock;
use dev::{Duration, Instant, Queue, QueueStats};
use mbuf::Mbuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What the worker's stages run with: the contexts of the families nest (TCP's
/// holds IPv6's, which holds IPv4's, which holds the link's), so the worker builds
/// one per poll and each stage takes its own family's.
pub(crate) type Cx<'a> = TcpCx<'a>;

mod timers;

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
    ip_id: u16,
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
    ip: ip::IpInputVecs,
    fwd: forward::IpForwardVecs,
    ip6: ip6::Ip6InputVecs,
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
            ip_id: (id as u16).wrapping_mul(0x2f1d),
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

    /// One run of the pipeline at `now`. Returns when to run next: `<= now` if work
    /// remains, a timer, or `None` when idle until a frame or a socket arrives.
    pub fn poll(&mut self, now: Instant) -> Option<Instant> {
        {
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
        let burst = self.shared.params.burst;
        let mut more = false;
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
            ip_id,
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
            ip6: Inet6Cx {
                ip4: InetCx {
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
                    inet: &cfg.inet,
                    fib,
                    flows: flows.as_mut(),
                    loopq,
                    wake,
                    icmp_bucket,
                    ip_id,
                    frag: reass,
                    isn_secret: shared.isn_secret,
                    send_redirects: shared.params.send_redirects,
                    rtbus: &shared.rtbus,
                    ctl4: shared,
                    ctlinput,
                },
                inet6: &cfg.inet6,
                ctl6: shared,
                dad_transmits: shared.params.dad_transmits,
                accept_rtadv: shared.params.accept_rtadv,
                slaac: shared.params.slaac,
            },
            tcp: Some(tcp),
            tcp_cfg: cfg.tcp,
            nworkers: shared.wake.len(),
            listen: &cfg.tcp_listen,
            inboxes: &shared.tcp_inbox,
            tunnels: &cfg.tunnels,
            netchannels: &cfg.netchannels,
            netchan_tally,
            tfo: &shared.tfo,
            tcp_mem: &shared.tcp_mem,
            handed_off: false,
        };

        // 1. Receive and process one burst per owned queue, a stage at a time.
        for oq in queues.iter_mut() {
            let t = ticks();
            let n = oq.q.rx_burst(now, rx, burst);
            let t = rt.count(Stage::Rx, n, t);
            *worked |= n > 0;
            if n >= burst {
                more = true;
            }
            if n == 0 {
                continue;
            }
            let Some(ifp) = cfg.ifaces.get(oq.ifindex.get()) else {
                // A queue whose interface is gone from the configuration.
                DropReason::EtherNoIf.count_n(cx.stats, rx.len() as u64);
                rx.clear();
                continue;
            };
            if !ifp.is_up() {
                // `ifconfig IF down`: the interface takes nothing in.
                DropReason::EtherIfDown.count_n(cx.stats, rx.len() as u64);
                rx.clear();
                continue;
            }
            // Software LRO for a device that does not merge segments itself, when
            // the burst holds TCP at all.
            let t = if cx.tcp_cfg.lro
                && ifp.offload.tso == 0
                && cx.bridges.member_of(ifp.index).is_none()
                && rx.iter().any(crate::link::lro::candidate)
            {
                lro(&mut cx, ifp, rx, &mut v.lro);
                rt.count(Stage::Lro, rx.len(), t)
            } else {
                t
            };
            input_frames(&mut cx, rt, v, ifp, rx, t);
        }
        flush_tcp(&mut cx);

        // 2. Frames handed over by workers that own no queue of an interface.
        // Queue 0 of every interface belongs to worker 0, which drains them.
        for (i, hq) in cfg.handoff.iter().enumerate() {
            if *id == 0 {
                for _ in 0..burst {
                    match hq.pop() {
                        Some(m) => cx.tx[i].push(m),
                        None => break,
                    }
                }
                if !hq.is_empty() {
                    more = true;
                }
            }
        }

        // 3. Sockets homed here: their send queues.
        let mut drained_closed = false;
        if let Some(socks) = cfg.by_worker.get(*id) {
            for s in socks {
                let mut sent = false;
                for _ in 0..burst {
                    let Some(d) = s.txq.pop() else { break };
                    sent = true;
                    *worked = true;
                    match s.kind {
                        crate::stack::socket::SockKind::Udp => udp_send(&mut cx, s, d),
                        crate::stack::socket::SockKind::IcmpEcho => {
                            icmp::echo_output(&mut cx, s, d)
                        }
                        crate::stack::socket::SockKind::Netchannel => {
                            crate::stack::netchannel::output(&mut cx, d.m)
                        }
                    }
                }
                if sent {
                    // A task may wait for room in the send queue.
                    cx.wake_socket(s);
                }
                if !s.txq.is_empty() {
                    more = true;
                } else if s.closed.load(Ordering::Acquire) {
                    drained_closed = true;
                }
            }
        }

        // 3b. TCP: work handed over by applications and other workers, then timers.
        if let Some(tw) = cx.tcp.take() {
            if let Some(inbox) = shared.tcp_inbox.get(*id) {
                for _ in 0..burst * 4 {
                    let Some(msg) = inbox.pop() else { break };
                    *worked = true;
                    crate::tcp::layer::tcp_msg(&mut cx, tw, msg);
                }
                if !inbox.is_empty() {
                    more = true;
                }
            }
            if let Some(o) = shared.tcp_overflow.get(*id).filter(|o| o.pending()) {
                for s in o.take() {
                    crate::tcp::layer::tcp_msg(&mut cx, tw, TcpMsg::Wake(s));
                }
            }
            crate::tcp::layer::tcp_timers(&mut cx, tw);
            crate::tcp::layer::tcp_flush(&mut cx, tw);
            cx.tcp = Some(tw);
        }

        // 4. Packets to ourselves, and those taken off a tunnel, input again after
        // the batch (bounded per poll).
        let mut rounds = 0;
        while !cx.loopq.is_empty() && rounds < 4 {
            rounds += 1;
            let n = cx.loopq.len();
            for k in 0..n {
                let (ifi, m) = cx.loopq.swap_remove(n - 1 - k);
                if let Some(ifp) = cfg.ifaces.get(ifi.get()) {
                    if ifp.no_link_header() && !ifp.is_up() {
                        // Taken off a tunnel whose interface is down.
                        cx.drop_pkt(m, DropReason::EtherIfDown);
                        continue;
                    }
                    // IPv4 looped back, or either family taken off a tunnel.
                    let v6 = m.first().first().is_some_and(|b| b >> 4 == 6);
                    v.one.push(m);
                    let mut one = std::mem::take(&mut v.one);
                    if v6 {
                        inet6_input(&mut cx, rt, v, ifp, &mut one, ticks());
                    } else {
                        inet_input(&mut cx, rt, v, ifp, &mut one, ticks());
                    }
                    v.one = one;
                } else {
                    // Looped back or off a tunnel whose interface has gone since.
                    cx.drop_pkt(m, DropReason::EtherNoIf);
                }
            }
            flush_tcp(&mut cx);
        }
        if !cx.loopq.is_empty() {
            more = true;
        }

        // 5. Every protocol's timers but TCP's, as they registered them.
        let mut next = timers::run(&mut cx, rt, v, *id, now);

        // What the timers' and sockets' output left for the layers above.
        upcalls(&mut cx);

        // 6. Flush. Nothing leaves by an interface that is down.
        {
            let link = &mut cx.ip6.ip4.link;
            for (ifp, q) in cfg.ifaces.iter().zip(link.tx.iter_mut()) {
                if !q.is_empty() && !ifp.is_up() {
                    DropReason::EtherIfDown.count_n(link.stats, q.len() as u64);
                    q.clear();
                }
            }
        }
        // First what the host sent into a tunnel, encapsulated and out by
        // the outer destination's route (which may be a bridge or a VLAN).
        for tc in cfg.tunnels.iter() {
            let i = tc.ifindex.get();
            if cx.tx.get(i).is_some_and(|q| !q.is_empty()) {
                let mut out = std::mem::take(&mut cx.tx[i]);
                crate::tunnel::tunnel_output(&mut cx, tc, &mut out);
                cx.tx[i] = out;
            }
        }
        // Then what the host sent on a bridge's interface, to the bridge's members
        // (a bridge has no device of its own).
        for bc in cfg.bridges.list.iter() {
            let i = bc.br.ifindex.get();
            if cx.tx.get(i).is_some_and(|q| !q.is_empty()) {
                let mut out = std::mem::take(&mut cx.tx[i]);
                crate::link::bridge::input::bridge_output(&mut cx, bc, &mut out);
                cx.tx[i] = out;
            }
        }
        // Then what was sent on a VLAN interface (by the host or a bridge), tagged,
        // to its parent.
        for vc in cfg.bridges.vlans.iter() {
            let i = vc.ifindex.get();
            if cx.tx.get(i).is_some_and(|q| !q.is_empty()) {
                let mut out = std::mem::take(&mut cx.tx[i]);
                crate::link::bridge::vlan::vlan_output(&mut cx, vc, &mut out);
                cx.tx[i] = out;
            }
        }
        // Then one tx burst per interface, or hand over to the queue's owner.
        let link = &mut cx.ip6.ip4.link;
        for (i, out) in link.tx.iter_mut().enumerate() {
            if out.is_empty() {
                continue;
            }
            if cfg.ifaces.get(i).is_some_and(|f| !f.is_up()) {
                // A bridge's or a VLAN's output onto a member that is down.
                DropReason::EtherIfDown.count_n(link.stats, out.len() as u64);
                out.clear();
                continue;
            }
            match txq_of_if.get(i).copied().flatten() {
                Some(qi) => {
                    let (t, n) = (ticks(), out.len());
                    queues[qi].q.tx_burst(now, out);
                    // Whatever the device did not take it has counted and dropped.
                    out.clear();
                    rt.count(Stage::Tx, n, t);
                }
                None => {
                    let hq = &cfg.handoff[i];
                    for m in out.drain(..) {
                        if hq.push(m).is_err() {
                            DropReason::EtherOutDropped.count(link.stats);
                        }
                    }
                    // Queue 0 of every interface belongs to worker 0.
                    cx.handed_off = true;
                    shared.notify_worker(0);
                }
            }
        }

        // Closed sockets that have sent everything leave the configuration (rare).
        if drained_closed {
            shared.forget_drained(*id);
        }
        next = timers::earliest(next, cx.tcp.as_ref().and_then(|tw| tw.poll_at()));

        if let Some(tw) = cx.tcp.take() {
            crate::tcp::layer::tcp_mem_tick(&mut cx, tw);
            cx.tcp = Some(tw);
        }
        if let Some(tw) = cx.tcp.as_ref() {
            let stats = &mut *cx.ip6.ip4.link.stats;
            stats.tcp.mem = tw.mem() as u64;
            stats.tcp.pcbcount = tw.count() as u64;
            stats.tcp.orphans = tw.orphans() as u64;
            stats.tcp.timerentries = tw.timer_entries() as u64;
        }

        // 7. Publish counters, wake applications.
        if let Some(ft) = cx.flows.as_deref_mut() {
            // An incremental sweep: a few sets per poll keep idle entries from
            // lingering without a pass over the whole table.
            ft.expire_some(now.as_nanos(), 16);
            let f = ft.stats();
            cx.stats.flow = crate::stats::FlowStat {
                hits: f.hits,
                misses: f.misses,
                stale: f.stale,
                expired: f.expired,
                inserts: f.inserts,
                evictions: f.evictions,
            };
        }
        let saturated = *throttle && (more || cx.handed_off);
        if !saturated || now.saturating_duration_since(*published) >= PUBLISH_EVERY {
            shared.stats[*id].publish(cx.stats);
            shared.runtime[*id].publish(rt);
            *published = now;
            if now.saturating_duration_since(*qpublished) >= QSTATS_EVERY || *qlen != queues.len() {
                let mut q = shared.qstats[*id].lock().unwrap_or_else(|e| e.into_inner());
                q.clear();
                q.extend(queues.iter().map(|x| (*id, x.ifindex, x.q.stats())));
                *qpublished = now;
                *qlen = queues.len();
            }
        }
        for (i, n) in cx.netchan_tally.drain(..) {
            cx.netchannels[i].delivered.fetch_add(n, Ordering::Relaxed);
        }
        for s in cx.wake.drain(..) {
            s.wake();
        }
        if let Some(tw) = cx.tcp.as_mut() {
            tw.wake_readers();
        }

        for oq in queues.iter() {
            next = timers::earliest(next, oq.q.poll_at());
        }
        if more || cx.handed_off {
            return Some(now);
        }
        next
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

/// Runs the TCP output that waited for the end of a batch of segments.
fn flush_tcp(cx: &mut Cx<'_>) {
    upcalls(cx);
    if let Some(tw) = cx.tcp.take() {
        crate::tcp::layer::tcp_flush(cx, tw);
        cx.tcp = Some(tw);
    }
    upcalls(cx);
}

/// What the stages below left for the layers above: the answers to what the hooks
/// refused, and what ICMP learnt for TCP (`pr_ctlinput`). The stages never call up;
/// the worker does, here, after them.
fn upcalls(cx: &mut Cx<'_>) {
    if !cx.rejects.is_empty() {
        let mut rejects = std::mem::take(&mut *cx.ip6.ip4.link.rejects);
        for r in rejects.drain(..) {
            crate::stack::reject::send_reject(cx, r.m, r.point, r.how);
        }
        *cx.ip6.ip4.link.rejects = rejects;
    }
    if !cx.ctlinput.is_empty() {
        let mut ctl = std::mem::take(&mut *cx.ip6.ip4.ctlinput);
        for c in ctl.drain(..) {
            match c {
                CtlInput::Tcp { local, remote, ctl } => {
                    let tuple = crate::tcp::layer::Tuple { local, remote };
                    crate::tcp::layer::tcp_ctlinput(cx, tuple, ctl);
                }
            }
        }
        *cx.ip6.ip4.ctlinput = ctl;
    }
}

/// A datagram from a UDP socket's send queue, to the output of its family.
fn udp_send(cx: &mut Cx<'_>, s: &SockShared, d: crate::sockbuf::TxDatagram) {
    match (s.local, d.to) {
        (std::net::SocketAddr::V6(l), std::net::SocketAddr::V6(to)) => {
            crate::inet6::udp6::udp6_output(cx, s, d.m, *l.ip(), to)
        }
        _ => udp::udp_output(cx, s, d),
    }
}

/// Software LRO over a burst (`crate::link::lro`): merged packets replace their frames in
/// `rx`, in order.
fn lro(cx: &mut Cx<'_>, ifp: &Ifnet, rx: &mut Vec<Mbuf>, out: &mut Vec<Mbuf>) {
    let mut lro = crate::link::lro::Lro::default();
    let local = |d: &std::net::IpAddr| match d {
        std::net::IpAddr::V4(a) => ifp.has_addr(*a),
        std::net::IpAddr::V6(a) => ifp.addr6(*a).is_some(),
    };
    {
        let mut up = |m| out.push(m);
        for m in rx.drain(..) {
            lro.input(ifp.mac.0, local, m, &mut up);
        }
        lro.flush(&mut up);
    }
    std::mem::swap(rx, out);
    cx.stats.tcp.lroqueued += lro.stats.queued;
    // Frames received, as a driver counts them: those merged into another never
    // reach `ether_input`'s count.
    cx.stats.ether.ipackets += lro.stats.queued;
    cx.stats.tcp.lroflushed += lro.stats.flushed;
}

/// A vector of frames received on `ifp` through the stages: `ether_input`, then
/// ARP, IPv4 and IPv6 each over its share. `t` is when the vector's processing
/// started ([`ticks`]).
fn input_frames(
    cx: &mut Cx<'_>,
    rt: &mut Runtime,
    v: &mut Vectors,
    ifp: &Arc<Ifnet>,
    pkts: &mut Vec<Mbuf>,
    t: u64,
) {
    let mut t = t;
    let mut ifp = ifp;
    let bridges = cx.bridges;
    let trunk = bridges.trunk(ifp.index);
    if !trunk.is_empty() {
        vlan_split(cx, rt, v, trunk, pkts);
        if pkts.is_empty() {
            return;
        }
    }
    let mut n = pkts.len();
    let bridged = bridges.member_of(ifp.index);
    if let Some((bc, mi)) = bridged {
        crate::link::bridge::input::bridge_input(cx, ifp, bc, mi, pkts, &mut v.br);
        t = rt.count(Stage::BridgeInput, n, t);
        if v.br.local.is_empty() {
            return;
        }
        // The frames for the bridge itself, on through its interface.
        std::mem::swap(pkts, &mut v.br.local);
        n = pkts.len();
        let ifaces = cx.ifaces;
        match ifaces.get(bc.br.ifindex.get()) {
            Some(b) => ifp = b,
            None => {
                DropReason::EtherNoIf.count_n(cx.stats, n as u64);
                pkts.clear();
                return;
            }
        }
    }
    ether::ether_input(cx, ifp, pkts, &mut v.ether, bridged.is_some());
    t = rt.count(Stage::EtherInput, n, t);
    if !v.ether.arp.is_empty() {
        let n = v.ether.arp.len();
        let mut arp = std::mem::take(&mut v.ether.arp);
        for m in arp.drain(..) {
            ether::arp_input(cx, ifp, m);
        }
        v.ether.arp = arp;
        t = rt.count(Stage::ArpInput, n, t);
    }
    if !v.ether.ip4.is_empty() {
        let mut ip4 = std::mem::take(&mut v.ether.ip4);
        t = inet_input(cx, rt, v, ifp, &mut ip4, t);
        v.ether.ip4 = ip4;
    }
    if !v.ether.ip6.is_empty() {
        let mut ip6 = std::mem::take(&mut v.ether.ip6);
        inet6_input(cx, rt, v, ifp, &mut ip6, t);
        v.ether.ip6 = ip6;
    }
}

/// The frames of a burst tagged for one of the parent's VLANs (`trunk`), each
/// VLAN's share untagged and through its interface's input; the parent's own stay
/// in `pkts`.
fn vlan_split(
    cx: &mut Cx<'_>,
    rt: &mut Runtime,
    v: &mut Vectors,
    trunk: &[(u16, IfIndex)],
    pkts: &mut Vec<Mbuf>,
) {
    let mut tagged = std::mem::take(&mut v.vlan_tagged);
    let mut rest = std::mem::take(&mut v.vlan_rest);
    crate::link::bridge::vlan::vlan_input(cx, trunk, pkts, &mut tagged, &mut rest);
    v.vlan_rest = rest;
    let mut one = std::mem::take(&mut v.vlan_one);
    let ifaces = cx.ifaces;
    for &(_, ifv) in trunk {
        if tagged.is_empty() {
            break;
        }
        let mut other = std::mem::take(&mut v.vlan_other);
        for (i, m) in tagged.drain(..) {
            if i == ifv {
                one.push(m);
            } else {
                other.push((i, m));
            }
        }
        std::mem::swap(&mut tagged, &mut other);
        v.vlan_other = other;
        if one.is_empty() {
            continue;
        }
        match ifaces.get(ifv.get()) {
            Some(c) => input_frames(cx, rt, v, c, &mut one, ticks()),
            None => {
                DropReason::EtherNoIf.count_n(cx.stats, one.len() as u64);
                one.clear();
            }
        }
    }
    v.vlan_one = one;
    v.vlan_tagged = tagged;
}

/// IPv4 packets (no link header) arrived on `ifp` through the stages: `ip_input`,
/// `ip_forward` and `ether_output` for those to forward, then local delivery
/// through the protocol switch. Returns the time it ended.
fn inet_input(
    cx: &mut Cx<'_>,
    rt: &mut Runtime,
    v: &mut Vectors,
    ifp: &Arc<Ifnet>,
    pkts: &mut Vec<Mbuf>,
    t: u64,
) -> u64 {
    let n = pkts.len();
    ip::ip_input(cx, ifp, pkts, &mut v.ip);
    let mut t = rt.count(Stage::IpInput, n, t);
    if !v.ip.fwd.is_empty() {
        let n = v.ip.fwd.len();
        forward::ip_forward(cx, ifp, &mut v.ip.fwd, &mut v.fwd, &mut v.l2);
        t = rt.count(Stage::IpForward, n, t);
    }
    t = link_output(cx, rt, v, t);
    if !v.ip.local.is_empty() {
        let n = v.ip.local.len();
        let mut local = std::mem::take(&mut v.ip.local);
        for (m, info) in local.drain(..) {
            if let Some((m, info)) = ip::ip_reass(cx, m, info) {
                ip_protox(cx, ifp, m, info);
            }
        }
        v.ip.local = local;
        t = rt.count(Stage::IpDeliver, n, t);
    }
    t
}

/// IPv6 packets (no link header) arrived on `ifp` through the stages, as
/// [`inet_input`]. Returns the time it ended.
fn inet6_input(
    cx: &mut Cx<'_>,
    rt: &mut Runtime,
    v: &mut Vectors,
    ifp: &Arc<Ifnet>,
    pkts: &mut Vec<Mbuf>,
    t: u64,
) -> u64 {
    let n = pkts.len();
    ip6::ip6_input(cx, ifp, pkts, &mut v.ip6);
    let mut t = rt.count(Stage::Ip6Input, n, t);
    if !v.ip6.fwd.is_empty() {
        let n = v.ip6.fwd.len();
        crate::inet6::forward6::ip6_forward(cx, ifp, &mut v.ip6.fwd, &mut v.fwd6, &mut v.l2);
        t = rt.count(Stage::Ip6Forward, n, t);
    }
    t = link_output(cx, rt, v, t);
    if !v.ip6.local.is_empty() {
        let n = v.ip6.local.len();
        let mut local = std::mem::take(&mut v.ip6.local);
        for (m, h, tentative) in local.drain(..) {
            if let Some((m, info, proto, nh_at)) = ip6::ip6_deliver(cx, m, h, tentative) {
                ip6_protox(cx, ifp, m, info, proto, nh_at);
            }
        }
        v.ip6.local = local;
        t = rt.count(Stage::Ip6Deliver, n, t);
    }
    t
}

/// `ether_output` over the forwarded packets the stages left for it.
fn link_output(cx: &mut Cx<'_>, rt: &mut Runtime, v: &mut Vectors, t: u64) -> u64 {
    if v.l2.is_empty() {
        return t;
    }
    let n = v.l2.len();
    ether::ether_output_vec(cx, &mut v.l2, &mut v.eout);
    rt.count(Stage::EtherOutput, n, t)
}

/// A transport's input for datagrams delivered to this host (`pr_input`).
type Input4 = fn(&mut Cx<'_>, &Arc<Ifnet>, Mbuf, IpInfo);
type Input6 = fn(&mut Cx<'_>, &Arc<Ifnet>, Mbuf, Ip6Info);

/// One entry of a protocol switch (FreeBSD's `struct protosw`).
struct ProtoSw<F> {
    proto: wire::IpProtocol,
    input: F,
}

/// The IPv4 protocol switch (FreeBSD's `inetsw`): IP input returns, and the worker
/// hands each local datagram to its transport through this table, so that no
/// stage below calls up by name.
static INETSW: [ProtoSw<Input4>; 3] = [
    ProtoSw {
        proto: wire::IpProtocol::Icmp,
        input: |cx, ifp, m, info| icmp::icmp_input(cx, ifp, m, info),
    },
    ProtoSw {
        proto: wire::IpProtocol::Udp,
        input: |cx, ifp, m, info| udp::udp_input(cx, ifp, m, info),
    },
    ProtoSw {
        proto: wire::IpProtocol::Tcp,
        input: crate::tcp::layer::tcp4_input,
    },
];

/// The IPv6 protocol switch (FreeBSD's `inet6sw`).
static INET6SW: [ProtoSw<Input6>; 3] = [
    ProtoSw {
        proto: wire::IpProtocol::Icmpv6,
        input: |cx, ifp, m, info| crate::inet6::icmp6::icmp6_input(cx, ifp, m, info),
    },
    ProtoSw {
        proto: wire::IpProtocol::Udp,
        input: |cx, ifp, m, info| crate::inet6::udp6::udp6_input(cx, ifp, m, info),
    },
    ProtoSw {
        proto: wire::IpProtocol::Tcp,
        input: crate::tcp::layer::tcp6_input,
    },
];

/// `ip_protox`: a local IPv4 datagram to its transport, or a protocol unreachable
/// (RFC 1122 §3.2.2.1) when there is none.
fn ip_protox(cx: &mut Cx<'_>, ifp: &Arc<Ifnet>, m: Mbuf, info: IpInfo) {
    let (src, dst) = (info.src.into(), info.dst.into());
    let Some(m) = netchannel::take(cx, m, info.proto.into(), src, dst, info.hlen) else {
        return;
    };
    match INETSW.iter().find(|p| p.proto == info.proto) {
        Some(p) => (p.input)(cx, ifp, m, info),
        None if !info.bcast => {
            let tunnels = cx.tunnels;
            let Some(m) = crate::tunnel::tunnel_input4(cx, tunnels, m, &info) else {
                return;
            };
            cx.stats.ip.noproto += 1;
            icmp::icmp_error(cx, m, wire::Icmpv4Message::DstUnreachable, 2, 0);
        }
        None => cx.drop_pkt(m, DropReason::IpNoProto),
    }
}

/// `ip6_protox`: a local IPv6 packet to its transport (`proto`, whose Next Header
/// field is at `nh_at`), or a Parameter Problem when there is none.
fn ip6_protox(
    cx: &mut Cx<'_>,
    ifp: &Arc<Ifnet>,
    m: Mbuf,
    info: Ip6Info,
    proto: wire::IpProtocol,
    nh_at: usize,
) {
    let (src, dst) = (info.src.into(), info.dst.into());
    let Some(m) = netchannel::take(cx, m, proto.into(), src, dst, info.off) else {
        return;
    };
    match INET6SW.iter().find(|p| p.proto == proto) {
        Some(p) => (p.input)(cx, ifp, m, info),
        None => {
            let tunnels = cx.tunnels;
            let Some(m) = crate::tunnel::tunnel_input6(cx, tunnels, m, &info, proto) else {
                return;
            };
            cx.stats.ip6.unknownhdr += 1;
            ip6::param_problem(cx, m, wire::Icmpv6ParamProblem::UnrecognizedNxtHdr, nh_at);
        }
    }
}

/// Resumes a packet a hook kept (dummynet) where it was taken, past the hooks
/// (ipfw's `one_pass`): an inbound one into the input stages, an outbound one to
/// its route's link output.
fn reinject(cx: &mut Cx<'_>, rt: &mut Runtime, v: &mut Vectors, d: Deferred) {
    let ifaces = cx.ifaces;
    let Some(ifp) = ifaces.get(d.ifindex.get()) else {
        // Released by a pipe after its interface went away.
        return cx.drop_pkt(d.m, DropReason::EtherNoIf);
    };
    let skip = std::mem::replace(&mut cx.pfil_skip, true);
    let mut m = d.m;
    let mut one = std::mem::take(&mut v.one);
    match (d.point, d.dir) {
        (PfilPoint::Inet, Dir::In) => {
            one.push(m);
            inet_input(cx, rt, v, ifp, &mut one, ticks());
        }
        (PfilPoint::Inet6, Dir::In) => {
            one.push(m);
            inet6_input(cx, rt, v, ifp, &mut one, ticks());
        }
        (PfilPoint::Ether, Dir::In) => {
            one.push(m);
            input_frames(cx, rt, v, ifp, &mut one, ticks());
        }
        (PfilPoint::Inet, Dir::Out) => {
            // Out again by its route (the next hop was not kept with the packet).
            if let Ok(h) = crate::hdr::hdr(cx.access, &mut m, 0, 20) {
                let dst = std::net::Ipv4Addr::new(h[16], h[17], h[18], h[19]);
                match ip::ip_route(cx, dst) {
                    Some((out, next, bcast)) => ip::ip_send(cx, out, m, dst, next, bcast),
                    None => cx.drop_pkt(m, DropReason::IpNoRoute),
                }
            }
        }
        (PfilPoint::Inet6, Dir::Out) => {
            if let Ok(h) = crate::hdr::hdr(cx.access, &mut m, 0, 40) {
                let mut d6 = [0u8; 16];
                d6.copy_from_slice(&h[24..40]);
                let dst = std::net::Ipv6Addr::from(d6);
                match ip6::ip6_route(cx, dst, Some(ifp.index)) {
                    Some((out, next)) => ip6::ip6_send(cx, out, m, dst, next),
                    None => cx.drop_pkt(m, DropReason::Ip6NoRoute),
                }
            }
        }
        (PfilPoint::Ether, Dir::Out) => {
            cx.stats.ether.opackets += 1;
            cx.tx[ifp.index.get()].push(m);
        }
    }
    v.one = one;
    cx.pfil_skip = skip;
}
