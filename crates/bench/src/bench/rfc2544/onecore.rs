//! The routers on equal CPU: the tester and the device under test confined to one
//! CPU together, one unpaced sender, 64-byte frames, the frames forwarded a second.
//!
//! On veth the Linux kernel forwards a frame inside its sender's system call, so in
//! the main tables its router runs on the tester's cores while mpstack's worker is
//! a thread beside them; neither device has a core of its own. Here all of it —
//! sender, receiver, and device — shares one CPU, so the rate says which device
//! does less work a frame, whatever the thread placement. Three devices:
//!
//! - `linux-router`: the kernel's forward, as in the main tables.
//! - `device-layer`: the least any router on AF_PACKET can do. A thread of this
//!   program on `dev::packet`'s queues, the device code `mpstack run --packet`
//!   uses: each frame received on `da` goes out of `db` with its link addresses
//!   rewritten, nothing else (no IP, no lookup, no ARP); it polls as the mpstack
//!   router's worker does here, yielding the CPU for the `--busy-poll` the
//!   benchmark gives mpstack after its last frame, then sleeping.
//! - `mpstack-router`: `mpstack run --packet` with one worker, as in the main
//!   tables.
//!
//! The device layer does the least work any AF_PACKET router does, so its rate
//! beside the kernel router's says how far such a router can come on this machine
//! (to within the run's noise: its thread and mpstack's worker are scheduled
//! alike, not identically); mpstack's router beside the device layer is what its
//! stack costs on top.

use super::{progress, warm_up, Background, Tester, Topo, SINK_MAC};
use crate::BenchArgs;
use dev::packet::{PacketDevice, PacketOptions};
use dev::{Device, Mbuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The name `--skip` takes for the whole comparison.
pub const SKIP: &str = "one-core";
/// The devices, in the order measured.
pub const CASES: [&str; 3] = ["linux-router", "device-layer", "mpstack-router"];
/// How long the device-layer forwarder keeps polling after its last frame before it
/// sleeps, yielding the CPU meanwhile: the `--busy-poll` the benchmark gives the
/// mpstack router.
const BUSY_POLL: Duration = Duration::from_micros(super::BUSY_POLL_US);
/// Unpaced trials per device, taken in turn with the others'; the best is kept.
const ROUNDS: u32 = 3;

/// One device's result.
pub struct OneCore {
    pub case: &'static str,
    /// The CPU everything ran on.
    pub cpu: usize,
    /// Frames that reached the tester's receiver a second, best of the rounds.
    pub forwarded: f64,
    /// Frames the sender sent a second in that round.
    pub sent: f64,
}

/// The device-layer forwarder: a thread in the device's namespace. Opens `da` and
/// `db` in namespace `ns` and forwards from the first to the second, the
/// destination rewritten to the tester's sink, until dropped. The thread takes the
/// caller's CPU affinity.
fn forwarder(ns: &str) -> Result<Background, String> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let ns = ns.to_string();
    let f = Background::spawn("rfc2544-fwd", move |st| {
        let opened = (|| -> Result<_, String> {
            dev::netns::enter(&ns).map_err(|e| format!("setns {ns}: {e}"))?;
            let open = |n: &str| {
                PacketDevice::open(n, 1, PacketOptions::default()).map_err(|e| format!("{n}: {e}"))
            };
            let (a, b) = (open("da")?, open("db")?);
            let src = b.info().hw_addr.ok_or("db has no link address")?;
            let mut head = [0u8; 12];
            head[..6].copy_from_slice(&SINK_MAC);
            head[6..].copy_from_slice(&src);
            let rx = Box::new(a).into_queues().remove(0);
            let tx = Box::new(b).into_queues().remove(0);
            Ok((rx, tx, head))
        })();
        let (mut rx, mut tx, head) = match opened {
            Ok(x) => {
                let _ = ready_tx.send(Ok(()));
                x
            }
            Err(e) => {
                let _ = ready_tx.send(Err(e));
                return;
            }
        };
        let fds: Vec<_> = rx.fd().into_iter().collect();
        let mut poller = dev::poll::Poller::new();
        let mut v: Vec<Mbuf> = Vec::with_capacity(256);
        let mut last_work = Instant::now();
        while !st.load(Ordering::Relaxed) {
            if rx.rx_burst(dev::Instant::ZERO, &mut v, 256) == 0 {
                // As the mpstack router's worker polls here (`--busy-poll`): yield
                // the CPU for a while after the last frame, then sleep.
                if last_work.elapsed() < BUSY_POLL {
                    std::thread::yield_now();
                } else {
                    let _ = poller.wait(&fds, Some(Duration::from_millis(5)));
                }
                continue;
            }
            last_work = Instant::now();
            for m in v.iter_mut() {
                if let Some(h) = m.head_mut::<12>() {
                    *h = head;
                }
            }
            tx.tx_burst(dev::Instant::ZERO, &mut v);
            v.clear();
        }
    })?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(f),
        Ok(Err(e)) => Err(e),
        Err(_) => Err("the forwarder's thread ended".into()),
    }
}

/// One device under test with its tester, alive for the whole comparison. Fields
/// drop in order: the tester's sockets, the forwarder, then the namespaces.
struct Rig {
    tester: Tester,
    _fwd: Option<Background>,
    _topo: Topo,
    trial: u32,
    /// The best round so far.
    best: OneCore,
}

impl Rig {
    /// Device `case`'s namespaces (named apart by `k`), the device, its tester;
    /// everything on `cpu`.
    fn new(case: &'static str, k: usize, cpu: usize) -> Result<Rig, String> {
        let topo_case = if case == "device-layer" {
            // The namespace of an mpstack device: no kernel forwarding, its IP
            // input dropping before routing.
            "mpstack-router"
        } else {
            case
        };
        let mut topo = Topo::tagged(topo_case, &format!("-1c{k}"))?;
        let mut fwd = None;
        match case {
            "mpstack-router" => topo.start_mpstack(false, 1)?,
            "device-layer" => fwd = Some(forwarder(&topo.dut)?),
            _ => {}
        }
        let mut tester = Tester::new(&topo, false, 1)?;
        let trial = warm_up(&mut tester);
        Ok(Rig {
            tester,
            _fwd: fwd,
            _topo: topo,
            trial,
            best: OneCore {
                case,
                cpu,
                forwarded: 0.0,
                sent: 0.0,
            },
        })
    }

    /// One unpaced trial; the best so far kept.
    fn round(&mut self, secs: f64) {
        let (sent, got) = self.tester.trial(self.trial, 64, 0.0, secs);
        self.trial += 1;
        let f = got.min(sent) as f64 / secs;
        if f >= self.best.forwarded {
            (self.best.forwarded, self.best.sent) = (f, sent as f64 / secs);
        }
    }
}

/// The devices not in `skip`, on the last CPU this program may use: all set up
/// first, then their trials in turn, round after round, so that the machine's
/// drift over the run falls on each alike. The thread doing it is pinned, and
/// what it starts (the testers' threads, the forwarder, `mpstack run`) inherits
/// the pin.
pub fn run(a: &BenchArgs, skip: &[String]) -> Result<Vec<OneCore>, String> {
    let cpu = dev::cpu::allowed_cpus()
        .map_err(|e| format!("one core: the allowed CPUs: {e}"))?
        .last()
        .copied()
        .ok_or("one core: no CPU allowed")?;
    std::thread::scope(|s| {
        s.spawn(|| {
            dev::cpu::pin_current_thread(cpu)
                .map_err(|e| format!("one core: pinning to CPU {cpu}: {e}"))?;
            progress(
                a,
                &format!("rfc2544: one core: making the namespaces (CPU {cpu})"),
            );
            let mut rigs = CASES
                .iter()
                .filter(|c| !skip.iter().any(|s| s == *c))
                .enumerate()
                .map(|(k, c)| Rig::new(c, k, cpu).map_err(|e| format!("one core: {c}: {e}")))
                .collect::<Result<Vec<Rig>, String>>()?;
            for _ in 0..ROUNDS {
                for r in rigs.iter_mut() {
                    r.round(a.seconds);
                }
            }
            let out: Vec<OneCore> = rigs.into_iter().map(|r| r.best).collect();
            for r in &out {
                progress(
                    a,
                    &format!(
                        "rfc2544: one core: {}: {:.3} Mfps forwarded (sent {:.3})",
                        r.case,
                        r.forwarded / 1e6,
                        r.sent / 1e6
                    ),
                );
            }
            Ok(out)
        })
        .join()
        .map_err(|_| "one core: the thread panicked".to_string())?
    })
}

/// The section of the table output.
pub fn print(rows: &[OneCore], seconds: f64) {
    let Some(first) = rows.first() else {
        return;
    };
    println!();
    println!(
        "Equal CPU: the tester and the device on one CPU together (CPU {}; one unpaced sender, the receiver, the device), 64 bytes, best of {ROUNDS} trials of {seconds} s each, the devices' trials in turn",
        first.cpu
    );
    println!("device-layer: dev::packet's rings alone, each frame sent on with its addresses rewritten: the least a router on AF_PACKET does");
    println!("{:>16}  {:>14}  {:>14}", "", "forwarded Mfps", "sent Mfps");
    for r in rows {
        println!(
            "{:>16}  {:>14.3}  {:>14.3}",
            r.case,
            r.forwarded / 1e6,
            r.sent / 1e6
        );
    }
    let at = |c: &str| rows.iter().find(|r| r.case == c).map(|r| r.forwarded);
    let mut ratios = Vec::new();
    for (x, y, what) in [
        (
            "device-layer",
            "linux-router",
            "device layer / Linux kernel router",
        ),
        (
            "mpstack-router",
            "device-layer",
            "mpstack router / device layer",
        ),
        (
            "mpstack-router",
            "linux-router",
            "mpstack router / Linux kernel router",
        ),
    ] {
        if let (Some(x), Some(y)) = (at(x), at(y)) {
            ratios.push(format!("{what} {:.2}x", x / y.max(1.0)));
        }
    }
    if !ratios.is_empty() {
        println!("one core: {}", ratios.join("; "));
    }
}

/// The section's JSON objects, one a device.
pub fn print_json(rows: &[OneCore]) {
    for r in rows {
        println!(
            "{{\"bench\":\"rfc2544\",\"test\":\"one_core\",\"case\":\"{}\",\"cpu\":{},\"frame_size\":64,\"forwarded_fps\":{:.0},\"sent_fps\":{:.0}}}",
            r.case, r.cpu, r.forwarded, r.sent
        );
    }
}
