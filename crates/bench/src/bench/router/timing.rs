//! `bench router`'s clocks: a started stack's packets and its workers' CPU time over
//! timed windows, the best of them kept, and the devices-only row's own loop.

use super::{Row, STACK_NAME};
use dev::gen::{Buffers, PktGen};
use dev::Device;
use net::Stack;
use std::time::{Duration, Instant};

/// CPU time of the workers of the stack named `name`, per worker, from /proc.
fn worker_cpu(name: &str) -> Vec<Duration> {
    dev::cpu::threads_cpu_time(&format!("{name}-w"))
        .into_iter()
        .map(|(_, t)| t)
        .collect()
}

/// What a timed window saw: packets and CPU time per worker, its length, the
/// stack's runtime counters over it.
pub(crate) struct Window {
    pub packets: Vec<u64>,
    pub cpu: Vec<Duration>,
    pub secs: f64,
    pub runtime: Option<net::runtime::Runtime>,
}

impl Window {
    /// Packets a second, all workers.
    fn rate(&self) -> f64 {
        self.packets.iter().sum::<u64>() as f64 / self.secs
    }

    /// Becomes `best` if it is the first window or faster than `best`.
    fn keep_if_best(self, best: &mut Option<Window>) {
        if best.as_ref().is_none_or(|b| self.rate() > b.rate()) {
            *best = Some(self);
        }
    }

    /// No window measured (no rounds).
    fn empty() -> Window {
        Window {
            packets: vec![0],
            cpu: vec![Duration::ZERO],
            secs: 1.0,
            runtime: None,
        }
    }
}

/// The row of window `w`: recycled buffers and no flow count, for the caller to set.
pub(super) fn row_of(name: &str, what: String, routes: usize, w: &Window, hz: Option<f64>) -> Row {
    let packets: u64 = w.packets.iter().sum();
    let cpu: f64 = w.cpu.iter().map(Duration::as_secs_f64).sum();
    let workers = w.packets.len().max(1);
    let core_mpps = w
        .packets
        .iter()
        .zip(&w.cpu)
        .map(|(&p, c)| p as f64 / c.as_secs_f64().max(1e-9) / 1e6)
        .sum();
    let ns = cpu * 1e9 / packets.max(1) as f64;
    Row {
        name: name.to_string(),
        what,
        routes,
        workers,
        mpps: packets as f64 / w.secs.max(1e-9) / 1e6,
        core_mpps,
        ns_per_packet: ns,
        cycles_per_packet: hz.map(|h| ns * h / 1e9),
        cpu_share: cpu / (w.secs * workers as f64).max(1e-9),
        packets,
        flows: 0,
        buffers: Some(Buffers::Recycled),
        stages: w
            .runtime
            .iter()
            .flat_map(|r| r.iter())
            .filter(|(_, s)| s.packets > 0)
            .map(|(st, s)| (st.name(), s.cycles_per_packet()))
            .collect(),
    }
}

/// Runs a started stack for `rounds` windows of `secs`; the best window.
pub(super) fn time_stack(
    stack: &Stack,
    gen: &PktGen,
    workers: usize,
    secs: f64,
    rounds: u32,
) -> Window {
    time_stack_named(stack, STACK_NAME, gen, workers, secs, rounds)
}

/// [`time_stack`] for a stack named `name` (its workers' threads are `{name}-wN`).
pub(crate) fn time_stack_named(
    stack: &Stack,
    name: &str,
    gen: &PktGen,
    workers: usize,
    secs: f64,
    rounds: u32,
) -> Window {
    let mut best: Option<Window> = None;
    for _ in 0..rounds {
        let r0 = stack.runtime();
        let (c0, t0, w0) = (gen.queue_counts(), worker_cpu(name), Instant::now());
        std::thread::sleep(Duration::from_secs_f64(secs));
        let (c1, t1, w1) = (gen.queue_counts(), worker_cpu(name), Instant::now());
        let r1 = stack.runtime();
        let packets: Vec<u64> = (0..workers)
            .map(|q| c1[q].sunk.saturating_sub(c0[q].sunk))
            .collect();
        let cpu: Vec<Duration> = (0..workers)
            .map(|q| {
                t1.get(q)
                    .copied()
                    .unwrap_or_default()
                    .saturating_sub(t0.get(q).copied().unwrap_or_default())
            })
            .collect();
        let w = Window {
            packets,
            cpu,
            secs: (w1 - w0).as_secs_f64(),
            runtime: Some(r1.since(&r0)),
        };
        w.keep_if_best(&mut best);
    }
    best.unwrap_or_else(Window::empty)
}

/// The devices-only row: one thread per queue runs its generator into a sink.
pub(crate) fn devices(workers: usize, secs: f64, rounds: u32, frames: &[Vec<u8>]) -> Window {
    let mut best: Option<Window> = None;
    for _ in 0..rounds {
        let gen = PktGen::new(workers, 1500);
        let gq = Box::new(gen.generator("gen", frames)).into_queues();
        let sq = Box::new(gen.sink("sink")).into_queues();
        let cpus = dev::cpu::allowed_cpus().unwrap_or_default();
        let stop = std::sync::atomic::AtomicBool::new(false);
        let w0 = Instant::now();
        let runs: Vec<(u64, Duration)> = std::thread::scope(|s| {
            let hs: Vec<_> = gq
                .into_iter()
                .zip(sq)
                .enumerate()
                .map(|(i, (mut g, mut k))| {
                    let stop = &stop;
                    let cpu = cpus.get(i % cpus.len().max(1)).copied();
                    s.spawn(move || {
                        if let Some(c) = cpu {
                            let _ = dev::cpu::pin_current_thread(c);
                        }
                        let t0 = dev::cpu::thread_cpu_time().unwrap_or_default();
                        let mut v = Vec::with_capacity(64);
                        let mut n = 0u64;
                        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                            for _ in 0..64 {
                                n += g.rx_burst(dev::Instant::ZERO, &mut v, 64) as u64;
                                k.tx_burst(dev::Instant::ZERO, &mut v);
                            }
                        }
                        let t1 = dev::cpu::thread_cpu_time().unwrap_or_default();
                        (n, t1.saturating_sub(t0))
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_secs_f64(secs));
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            hs.into_iter()
                .map(|h| h.join().unwrap_or((0, Duration::ZERO)))
                .collect()
        });
        let w = Window {
            packets: runs.iter().map(|r| r.0).collect(),
            cpu: runs.iter().map(|r| r.1).collect(),
            secs: w0.elapsed().as_secs_f64(),
            runtime: None,
        };
        w.keep_if_best(&mut best);
    }
    best.unwrap_or_else(Window::empty)
}
