//! Virtual networks: many [`Stack`]s in one process, joined by memory wires and hubs,
//! driven by a virtual clock that jumps to the next wake-up.
//!
//! Nothing here reads the real clock or a random source: the same seed and the same
//! calls give the same run, frame for frame. A worker of a stack is a step function
//! here, so a 2-worker stack runs its two workers in turn at each instant — the same
//! code that runs them on two threads, minus the threads.

#![forbid(unsafe_code)]

pub mod demo;
pub mod describe;
pub mod malformed;

use dev::mem::{Hub, WireConfig};
use dev::rng::Rng;
use dev::{Device, DeviceInfo, Duration, Instant, Queue, QueueStats};
use mbuf::Mbuf;
use net::{IfConfig, IfIndex, InetAddr, Stack, StackConfig};
use std::sync::{Arc, Mutex};

pub use describe::describe;

/// A host's index in its simulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HostId(pub usize);

/// A hub's index in its simulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HubId(pub usize);

/// One frame as it left a host.
#[derive(Clone, Debug)]
pub struct TraceRecord {
    pub time: Instant,
    pub host: String,
    /// The interface it left by: the name given to `connect_named`, else the device's.
    pub ifname: String,
    pub frame: Vec<u8>,
}

type TraceLog = Arc<Mutex<Vec<TraceRecord>>>;

/// A device wrapper that records every transmitted frame (a debugging tap).
struct TraceDevice {
    inner: Box<dyn Device>,
    host: String,
    /// The interface's name in its stack, when given (else the device's).
    ifname: Option<String>,
    log: TraceLog,
}

struct TraceQueue {
    inner: Box<dyn Queue>,
    host: String,
    ifname: String,
    log: TraceLog,
}

impl Device for TraceDevice {
    fn info(&self) -> DeviceInfo {
        self.inner.info()
    }
    fn into_queues(self: Box<Self>) -> Vec<Box<dyn Queue>> {
        let TraceDevice {
            inner,
            host,
            ifname,
            log,
        } = *self;
        let ifname = ifname.unwrap_or_else(|| inner.info().name);
        inner
            .into_queues()
            .into_iter()
            .map(|q| {
                Box::new(TraceQueue {
                    inner: q,
                    host: host.clone(),
                    ifname: ifname.clone(),
                    log: log.clone(),
                }) as Box<dyn Queue>
            })
            .collect()
    }
}

impl Queue for TraceQueue {
    fn rx_burst(&mut self, now: Instant, out: &mut Vec<Mbuf>, max: usize) -> usize {
        self.inner.rx_burst(now, out, max)
    }
    fn tx_burst(&mut self, now: Instant, pkts: &mut Vec<Mbuf>) -> usize {
        if !pkts.is_empty() {
            let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
            for m in pkts.iter() {
                log.push(TraceRecord {
                    time: now,
                    host: self.host.clone(),
                    ifname: self.ifname.clone(),
                    frame: m.to_vec(),
                });
            }
        }
        self.inner.tx_burst(now, pkts)
    }
    fn poll_at(&self) -> Option<Instant> {
        self.inner.poll_at()
    }
    fn stats(&self) -> QueueStats {
        self.inner.stats()
    }
}

/// A virtual network.
pub struct Sim {
    now: Instant,
    rng: Rng,
    hosts: Vec<Stack>,
    hubs: Vec<Hub>,
    trace: Option<TraceLog>,
    /// Polls at one instant before the simulation declares a livelock and moves on.
    max_polls_per_instant: usize,
}

impl std::fmt::Debug for Sim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim")
            .field("now", &self.now)
            .field("hosts", &self.hosts.len())
            .finish()
    }
}

impl Sim {
    pub fn new(seed: u64) -> Sim {
        Sim {
            now: Instant::ZERO,
            rng: Rng::new(seed),
            hosts: Vec::new(),
            hubs: Vec::new(),
            trace: None,
            max_polls_per_instant: 10_000,
        }
    }

    /// Records every frame any host sends from now on (see [`Sim::trace`]).
    pub fn enable_trace(&mut self) {
        self.trace
            .get_or_insert_with(|| Arc::new(Mutex::new(Vec::new())));
    }

    /// The frames recorded so far, taken out of the log.
    pub fn take_trace(&mut self) -> Vec<TraceRecord> {
        match &self.trace {
            Some(t) => std::mem::take(&mut *t.lock().unwrap_or_else(|e| e.into_inner())),
            None => Vec::new(),
        }
    }

    pub fn now(&self) -> Instant {
        self.now
    }

    /// Adds a host with `workers` workers.
    pub fn add_host(&mut self, name: &str, workers: usize) -> HostId {
        let s = Stack::new(StackConfig {
            name: name.into(),
            workers,
            // From the simulation's seed: the same seed, the same run (the secret
            // keys initial sequence numbers and the hosts' table hashes).
            isn_secret: Some(self.rng.next_u64()),
            ..StackConfig::default()
        });
        self.hosts.push(s);
        HostId(self.hosts.len() - 1)
    }

    /// Adds a host with its own configuration (its `name` as given); without an
    /// `isn_secret` of its own, one from the simulation's seed, as `add_host`
    /// gives (else each run keyed its sequence numbers, and BBR's phases, anew).
    pub fn add_host_with(&mut self, mut cfg: StackConfig) -> HostId {
        if cfg.isn_secret.is_none() {
            cfg.isn_secret = Some(self.rng.next_u64());
        }
        self.hosts.push(Stack::new(cfg));
        HostId(self.hosts.len() - 1)
    }

    /// Adds a host whose connections take these TCP settings (as `add_host`
    /// otherwise).
    pub fn add_host_tcp(&mut self, name: &str, workers: usize, tcp: net::tcp::TcpConfig) -> HostId {
        self.add_host_with(StackConfig {
            name: name.into(),
            workers,
            tcp,
            ..StackConfig::default()
        })
    }

    pub fn host(&self, h: HostId) -> &Stack {
        &self.hosts[h.0]
    }

    pub fn host_mut(&mut self, h: HostId) -> &mut Stack {
        &mut self.hosts[h.0]
    }

    pub fn hosts(&self) -> impl Iterator<Item = (HostId, &Stack)> {
        self.hosts.iter().enumerate().map(|(i, s)| (HostId(i), s))
    }

    /// Adds a hub (a shared segment): every frame reaches every other port.
    pub fn add_hub(&mut self, mut cfg: WireConfig) -> HubId {
        cfg.seed = self.rng.next_u64();
        self.hubs.push(Hub::new(cfg));
        HubId(self.hubs.len() - 1)
    }

    fn attach(&mut self, h: HostId, dev: Box<dyn Device>, addr: &str) -> IfIndex {
        self.attach_as(h, dev, addr, None)
    }

    fn attach_as(
        &mut self,
        h: HostId,
        dev: Box<dyn Device>,
        addr: &str,
        name: Option<&str>,
    ) -> IfIndex {
        let addrs: Vec<InetAddr> = if addr.is_empty() {
            Vec::new()
        } else {
            vec![addr.parse().expect("valid ADDR/LEN")]
        };
        let dev: Box<dyn Device> = match &self.trace {
            Some(log) => Box::new(TraceDevice {
                inner: dev,
                host: self.hosts[h.0].name().to_string(),
                ifname: name.map(str::to_string),
                log: log.clone(),
            }),
            None => dev,
        };
        self.hosts[h.0]
            .add_interface(
                dev,
                IfConfig {
                    addrs,
                    name: name.map(str::to_string),
                    ..IfConfig::default()
                },
            )
            .expect("attach interface")
    }

    /// Connects a host to a hub with an address like `"198.18.0.1/24"` ("" for none).
    pub fn connect(&mut self, h: HostId, hub: HubId, addr: &str) -> IfIndex {
        let dev = self.hubs[hub.0].port_with_queues(self.hosts[h.0].num_workers());
        self.attach(h, Box::new(dev), addr)
    }

    /// [`Sim::connect`] with an interface name of its own (`em0`) instead of the
    /// device's (`mh0`, the same on every hub's first port).
    pub fn connect_named(&mut self, h: HostId, hub: HubId, addr: &str, name: &str) -> IfIndex {
        let dev = self.hubs[hub.0].port_with_queues(self.hosts[h.0].num_workers());
        self.attach_as(h, Box::new(dev), addr, Some(name))
    }

    /// Joins two hosts with a point-to-point memory wire.
    pub fn link(
        &mut self,
        a: HostId,
        a_addr: &str,
        b: HostId,
        b_addr: &str,
        mut cfg: WireConfig,
    ) -> (IfIndex, IfIndex) {
        cfg.seed = self.rng.next_u64();
        let hub = Hub::named("wire", cfg);
        let da = hub.port_with_queues(self.hosts[a.0].num_workers());
        let db = hub.port_with_queues(self.hosts[b.0].num_workers());
        self.hubs.push(hub);
        let ia = self.attach(a, Box::new(da), a_addr);
        let ib = self.attach(b, Box::new(db), b_addr);
        (ia, ib)
    }

    /// Runs every host at the current instant until nothing more is due now.
    /// Returns the next wake-up, if any.
    pub fn step(&mut self) -> Option<Instant> {
        for _ in 0..self.max_polls_per_instant {
            let mut next: Option<Instant> = None;
            for s in &mut self.hosts {
                if let Some(t) = s.poll(self.now) {
                    next = Some(next.map_or(t, |n| n.min(t)));
                }
            }
            // A host polled early in the round may have been sent a frame by one
            // polled later: the links know what is in flight.
            for h in &self.hubs {
                if let Some(t) = h.poll_at() {
                    next = Some(next.map_or(t, |n| n.min(t)));
                }
            }
            match next {
                Some(t) if t <= self.now => continue,
                other => return other,
            }
        }
        // Livelock guard: something wants to run at this instant forever.
        Some(self.now + Duration::from_micros(1))
    }

    /// Advances virtual time by `d`, running everything that falls due.
    pub fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        self.run_until_time(end);
    }

    fn run_until_time(&mut self, end: Instant) {
        loop {
            let next = self.step();
            match next {
                Some(t) if t <= end => self.now = t.max(self.now),
                _ => {
                    self.now = end;
                    self.step();
                    return;
                }
            }
            if self.now >= end {
                self.step();
                return;
            }
        }
    }

    /// Runs until `done` returns true (checked after every instant) or `limit` of
    /// virtual time passes. Returns whether `done` became true.
    pub fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Sim) -> bool) -> bool {
        let end = self.now + limit;
        loop {
            if done(self) {
                return true;
            }
            if self.now >= end {
                return false;
            }
            let next = self.step();
            if done(self) {
                return true;
            }
            // Wake at least every millisecond so that `done` sees socket queues fill.
            let cap = self.now + Duration::from_millis(1);
            let t = next.map_or(cap, |t| t.min(cap)).min(end);
            self.now = t
                .max(self.now + Duration::from_nanos(1))
                .min(end.max(self.now));
            if self.now == end {
                self.step();
                return done(self);
            }
        }
    }
}

/// A stack with one interface on `dev` at `addr` (`"198.18.0.1/24"`), outside any
/// simulation: for programs and tests that run it on worker threads (`Stack::start`).
pub fn standalone_host(
    name: &str,
    workers: usize,
    dev: Box<dyn Device>,
    addr: &str,
) -> Result<Stack, String> {
    standalone_host_with(
        StackConfig {
            name: name.into(),
            workers,
            ..StackConfig::default()
        },
        dev,
        addr,
    )
}

/// Like [`standalone_host`], with a configuration of its own.
pub fn standalone_host_with(
    cfg: StackConfig,
    dev: Box<dyn Device>,
    addr: &str,
) -> Result<Stack, String> {
    let addr: InetAddr = addr.parse().map_err(|e| format!("{addr}: {e}"))?;
    let mut s = Stack::new(cfg);
    s.add_interface(
        dev,
        IfConfig {
            addrs: vec![addr],
            ..IfConfig::default()
        },
    )
    .map_err(|e| e.to_string())?;
    Ok(s)
}

/// Three hosts in a line, `a` (198.18.1.2) — `r` — `b` (198.18.2.2), on two links
/// with default wires: `r` (198.18.1.1, 198.18.2.1) forwards both families, `a`
/// and `b` route through it by default. Each host has `workers` workers.
pub fn routed(seed: u64, workers: usize) -> (Sim, HostId, HostId, HostId) {
    let mut s = Sim::new(seed);
    let a = s.add_host("a", workers);
    let r = s.add_host("r", workers);
    let b = s.add_host("b", workers);
    s.link(
        a,
        "198.18.1.2/24",
        r,
        "198.18.1.1/24",
        WireConfig::default(),
    );
    s.link(
        r,
        "198.18.2.1/24",
        b,
        "198.18.2.2/24",
        WireConfig::default(),
    );
    for i in s.host(r).interfaces() {
        s.host(r)
            .set_forwarding(i.index, true, true)
            .expect("forwarding on r's own interfaces");
    }
    s.host(a)
        .set_default_gateway(Some(std::net::Ipv4Addr::new(198, 18, 1, 1)));
    s.host(b)
        .set_default_gateway(Some(std::net::Ipv4Addr::new(198, 18, 2, 1)));
    (s, a, r, b)
}

impl Sim {
    /// A raw port on a hub for tests that write frames by hand (an attacker, a sniffer).
    pub fn attach_raw(&mut self, hub: HubId) -> Box<dyn Queue> {
        let dev: Box<dyn Device> = Box::new(self.hubs[hub.0].unwatched_port());
        dev.into_queues()
            .into_iter()
            .next()
            .expect("a hub port has a queue")
    }
}
