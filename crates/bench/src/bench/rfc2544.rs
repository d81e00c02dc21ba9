//! `mpstack bench rfc2544`: RFC 2544 (and, for bridges, RFC 2889) tests of a
//! device under test on real links — veth pairs in network namespaces this
//! benchmark makes — driven by a tester on AF_PACKET sockets ([`dev::packet`]), the
//! same device code `mpstack run --packet` uses.
//!
//! Topology, made afresh for each device: the tester's namespace holds `ta` and
//! `tb` (and `tc` for a bridge); the device's namespace holds their peers `da`,
//! `db` (and `dc`). The tester sends UDP from 198.18.1.2 (behind `ta`) to
//! 198.18.2.2 (behind `tb`) at a set rate and counts what arrives on `tb`; it
//! answers the device's ARP requests for both addresses itself, the sink's with a
//! link address that is not `tb`'s own, so that its kernel drops the frames at once
//! instead of routing them into nothing.
//!
//! Devices, side by side in one run:
//! - `tester`: no device, `ta` and `tb` the two ends of one veth pair: the tester
//!   looped back to itself, its own ceiling.
//! - `linux-router`: the Linux kernel forwarding between `da` (198.18.1.1/24) and
//!   `db` (198.18.2.1/24).
//! - `mpstack-router`: `mpstack run --packet da --packet db --forwarding`
//!   (`--workers`, one by default) in the device's namespace, whose kernel holds no
//!   address and does not forward.
//! - `linux-bridge`: the kernel's bridge of `da`, `db`, `dc`.
//! - `mpstack-bridge`: `mpstack run --packet da --packet db --packet dc --bridge
//!   bridge0=da,db,dc`.
//!
//! For each frame size (RFC 2544 §9.1: 64, 128, 256, 512, 1024, 1280, 1518 bytes,
//! FCS included, so 4 fewer on the wire here), the throughput (§26.1): the highest
//! rate at which every frame sent in a trial of `--seconds` comes back: the unpaced
//! rate if that loses nothing, else a binary search between 0 and it; then the
//! latency at that rate (§26.2, shortened to one trial: one frame in every few
//! bursts carries its send time, the receiver takes the difference on the same
//! clock). At the first size (64 bytes by default; every size with
//! `--every-size`), the frame-loss curve (§26.3:
//! from the unpaced rate down in steps of 10% until two steps lose nothing) and
//! back-to-back bursts (§26.4: the longest burst at the unpaced rate that loses
//! nothing, up to half a second's worth). For the bridges, RFC 2889's forwarding
//! rate at the maximum offered load, address caching capacity, address learning
//! rate and broadcast forwarding ([`rfc2889`]). `--plot FILE` draws the throughput
//! against frame size as an SVG.
//!
//! The tester sends from `--senders` threads (a socket each; 2 by default) and
//! receives on one. Paced, a sender sends what is due in chunks and sleeps in
//! between. On two cores the tester and the device share the machine; the Linux
//! kernel forwards (and bridges) a veth frame in the sender's own system call, so
//! its router costs the tester's cores, while mpstack's worker is a thread of its
//! own and its frames cross the AF_PACKET rings both ways. The figures say what this
//! machine does, not what either device does on hardware of its own. Last, the
//! routers on equal CPU ([`onecore`]): tester and device confined to one CPU
//! together, beside the least any AF_PACKET router can do there.

use super::progress;
use rfc2889::Rfc2889;

mod cli;
mod onecore;
mod rfc2889;

use crate::BenchArgs;
pub use cli::main;
use dev::packet::{PacketDevice, PacketOptions};
use dev::{Device, Mbuf, Queue};
use std::process::{Child, Command, ExitCode};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// RFC 2544 §9.1's frame sizes (with the 4-byte FCS).
const SIZES: [usize; 7] = [64, 128, 256, 512, 1024, 1280, 1518];
/// Frames a burst, and different flows (source ports) among the frames.
const BURST: usize = 32;
const FLOWS: usize = 64;
/// The link address the tester's sink (198.18.2.2, behind `tb`) answers ARP with
/// and a bridge learns, locally administered.
const SINK_MAC: [u8; 6] = [0x02, 0x25, 0x44, 0x00, 0x00, 0xbb];
/// A paced sending thread's sleep between chunks, about.
const TICK: Duration = Duration::from_micros(200);
/// The mpstack devices' `--busy-poll`, microseconds.
const BUSY_POLL_US: u64 = 1000;
/// Steps of the binary search.
const STEPS: u32 = 7;
/// UDP port the tester's frames go to, and the mark in their payload.
const PORT: u16 = 7777;
const MAGIC: u32 = 0x2544_2544;

/// Latency samples a trial keeps at most.
const LAT_SAMPLES: usize = 1 << 16;
/// Bursts between two timestamped frames of a latency trial.
const STAMP_EVERY: usize = 8;

/// Nanoseconds since the first call: the tester's one clock for stamps and arrivals.
fn now_ns() -> u64 {
    static BASE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// The send time stamped in a frame's payload (0: none).
fn stamp_of(f: &[u8]) -> u64 {
    f.get(50..58)
        .map_or(0, |b| u64::from_be_bytes(b.try_into().expect("8 bytes")))
}

/// The rows' names, for `--skip`.
pub const CASES: [&str; 5] = [
    "tester",
    "linux-router",
    "mpstack-router",
    "linux-bridge",
    "mpstack-bridge",
];

/// Whether a device bridges (the tester's frames go to its own MAC on `tb`) rather
/// than routes (they go to the device's MAC on `da`).
fn bridging(case: &str) -> bool {
    case.ends_with("bridge")
}

fn sh(cmd: &str) -> Result<String, String> {
    let o = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    let mut s = String::from_utf8_lossy(&o.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&o.stderr));
    if o.status.success() {
        Ok(s)
    } else {
        Err(format!("{cmd}: {s}"))
    }
}

/// A queue on each of the interfaces `names`, opened in namespace `ns`.
fn open_queues(ns: &str, names: &[&str]) -> Result<Vec<Box<dyn Queue>>, String> {
    std::thread::scope(|s| {
        s.spawn(|| -> Result<Vec<Box<dyn Queue>>, String> {
            dev::netns::enter(ns).map_err(|e| format!("setns {ns}: {e}"))?;
            names
                .iter()
                .map(|n| {
                    let d = PacketDevice::open(n, 1, PacketOptions::default())
                        .map_err(|e| format!("{n}: {e}"))?;
                    Ok(Box::new(d).into_queues().remove(0))
                })
                .collect()
        })
        .join()
        .map_err(|_| "the tester's thread panicked".to_string())?
    })
}

/// Why the benchmark cannot run here, if it cannot.
fn unavailable() -> Option<String> {
    if euid() != 0 {
        return Some("not root (the tester makes namespaces and veth pairs)".into());
    }
    if sh("command -v ip").is_err() {
        return Some("no 'ip' command (iproute2)".into());
    }
    if sh("command -v iptables").is_err() {
        return Some("no 'iptables' command".into());
    }
    None
}

/// The effective user id, read from /proc (no `unsafe` outside `mbuf` and `dev`).
fn euid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(u32::MAX)
}

/// A device's namespaces and process, removed on drop.
struct Topo {
    tester: String,
    dut: String,
    node: Option<Child>,
}

impl Drop for Topo {
    fn drop(&mut self) {
        if let Some(mut n) = self.node.take() {
            let _ = sh(&format!("kill -TERM {}", n.id()));
            let _ = n.wait();
        }
        let _ = sh(&format!("ip netns del {} 2>/dev/null", self.tester));
        let _ = sh(&format!("ip netns del {} 2>/dev/null", self.dut));
    }
}

fn mac_of(ns: &str, dev: &str) -> Result<[u8; 6], String> {
    let s = sh(&format!(
        "ip netns exec {ns} cat /sys/class/net/{dev}/address"
    ))?;
    let v: Vec<u8> = s
        .trim()
        .split(':')
        .filter_map(|h| u8::from_str_radix(h, 16).ok())
        .collect();
    v.try_into()
        .map_err(|_| format!("{ns}/{dev}: bad address '{}'", s.trim()))
}

impl Topo {
    fn new(case: &str) -> Result<Topo, String> {
        Topo::tagged(case, "")
    }

    /// As [`Topo::new`], the namespaces' names ending in `tag`, so that several
    /// topologies can live at once.
    fn tagged(case: &str, tag: &str) -> Result<Topo, String> {
        let id = std::process::id() % 100_000;
        let t = Topo {
            tester: format!("rfc-t-{id}{tag}"),
            dut: format!("rfc-d-{id}{tag}"),
            node: None,
        };
        for n in [&t.tester, &t.dut] {
            let _ = sh(&format!("ip netns del {n} 2>/dev/null"));
            sh(&format!("ip netns add {n}"))?;
            sh(&format!("ip -n {n} link set lo up"))?;
            sh(&format!(
                "ip netns exec {n} sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1"
            ))?;
        }
        let (tn, dn) = (&t.tester, &t.dut);
        if case == "tester" {
            // No device: `ta` and `tb` are the two ends of one veth pair.
            sh(&format!("ip -n {tn} link add ta type veth peer name tb"))?;
            sh(&format!("ip -n {tn} link set ta up"))?;
            sh(&format!("ip -n {tn} link set tb up"))?;
            return Ok(t);
        }
        // A bridge has a third port, `tc`/`dc`: RFC 2889's monitor, where a frame
        // the bridge floods instead of forwarding shows.
        let ports: &[&str] = if bridging(case) {
            &["a", "b", "c"]
        } else {
            &["a", "b"]
        };
        for s in ports {
            sh(&format!(
                "ip -n {tn} link add t{s} type veth peer name d{s} netns {dn}"
            ))?;
            sh(&format!("ip -n {tn} link set t{s} up"))?;
            sh(&format!("ip -n {dn} link set d{s} up"))?;
        }
        match case {
            "linux-router" => {
                sh(&format!(
                    "ip netns exec {dn} sysctl -qw net.ipv4.ip_forward=1"
                ))?;
                sh(&format!("ip -n {dn} addr add 198.18.1.1/24 dev da"))?;
                sh(&format!("ip -n {dn} addr add 198.18.2.1/24 dev db"))?;
            }
            "linux-bridge" => {
                // The kernel's bridge, spanning tree off (its default), as
                // mpstack's.
                sh(&format!("ip -n {dn} link add br0 type bridge"))?;
                for d in ["da", "db", "dc"] {
                    sh(&format!("ip -n {dn} link set {d} master br0"))?;
                }
                sh(&format!("ip -n {dn} link set br0 up"))?;
            }
            _ => {
                sh(&format!(
                    "ip netns exec {dn} sysctl -qw net.ipv4.ip_forward=0"
                ))?;
                // mpstack's links: the kernel's own IP stack on them has nothing
                // to do, but frames for the links' address reach it beside the
                // AF_PACKET rings, and it would look a route up for each (on the
                // sender's core) before dropping it. Dropped before routing
                // instead, as an operator of `run --packet` would (see README).
                sh(&format!(
                    "ip netns exec {dn} iptables -t raw -A PREROUTING -j DROP"
                ))?;
            }
        }
        Ok(t)
    }

    /// Empties a bridge's address table, as RFC 2889 §5.7 does between trials: the
    /// kernel's by `fdb_flush`, mpstack's by starting the node afresh (it has no
    /// run-time control yet).
    fn flush_bridge(&mut self, case: &str, workers: u16) -> Result<(), String> {
        if case == "linux-bridge" {
            sh(&format!(
                "ip -n {} link set br0 type bridge fdb_flush",
                self.dut
            ))?;
            return Ok(());
        }
        if let Some(mut n) = self.node.take() {
            let _ = sh(&format!("kill -TERM {}", n.id()));
            let _ = n.wait();
        }
        self.start_mpstack(true, workers)
    }

    /// Starts `mpstack run` in the device's namespace (a router, or a bridge if
    /// `bridge`) and waits for it to be up.
    fn start_mpstack(&mut self, bridge: bool, workers: u16) -> Result<(), String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mpstack = exe.with_file_name("mpstack");
        if !mpstack.exists() {
            return Err(format!(
                "{} is missing: `cargo build --release` builds it beside mpstack-bench",
                mpstack.display()
            ));
        }
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.dut])
            .arg(&mpstack)
            .args(["run", "--packet", "da", "--packet", "db"]);
        if bridge {
            cmd.args(["--packet", "dc", "--bridge", "bridge0=da,db,dc"]);
        } else {
            cmd.args(["--inet", "da=198.18.1.1/24", "--inet", "db=198.18.2.1/24"])
                .arg("--forwarding");
        }
        let mut node = cmd
            .args(["--serve", "none", "--workers", &workers.to_string()])
            .args(["--busy-poll", &BUSY_POLL_US.to_string()])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("starting mpstack: {e}"))?;
        let out = node.stdout.take().expect("piped");
        self.node = Some(node);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let end = Instant::now() + Duration::from_secs(20);
        while Instant::now() < end {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(l) if l.contains("up on") => return Ok(()),
                Ok(_) | Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(_) => break,
            }
        }
        Err("mpstack did not come up in the device's namespace".into())
    }
}

/// A frame of `size` bytes (FCS included, so `size - 4` here) from the tester's
/// source to its sink, flow `flow`, marked with `trial`.
fn frame(dst_mac: [u8; 6], src_mac: [u8; 6], size: usize, flow: usize, trial: u32) -> Vec<u8> {
    let len = size - 4;
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&dst_mac);
    f[6..12].copy_from_slice(&src_mac);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = (len - 14) as u16;
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[198, 18, 1, 2]);
    ip[16..20].copy_from_slice(&[198, 18, 2, 2]);
    let sum = !wire::checksum::data(ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    let udp_len = ip_len - 20;
    f[34..36].copy_from_slice(&(10_000 + flow as u16).to_be_bytes());
    f[36..38].copy_from_slice(&PORT.to_be_bytes());
    f[38..40].copy_from_slice(&udp_len.to_be_bytes());
    // Checksum 0: none (UDP over IPv4).
    f[42..46].copy_from_slice(&MAGIC.to_be_bytes());
    f[46..50].copy_from_slice(&trial.to_be_bytes());
    f
}

/// An ARP reply from `mac`/`ip` to a request `req`, if `req` asks for `ip`.
fn arp_answer(req: &[u8], mac: [u8; 6], ip: [u8; 4]) -> Option<Vec<u8>> {
    if req.len() < 42 || req[12..14] != [0x08, 0x06] || req[20..22] != [0, 1] || req[38..42] != ip {
        return None;
    }
    let mut r = vec![0u8; 60];
    r[..6].copy_from_slice(&req[6..12]);
    r[6..12].copy_from_slice(&mac);
    r[12..22].copy_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 2]);
    r[22..28].copy_from_slice(&mac);
    r[28..32].copy_from_slice(&ip);
    r[32..42].copy_from_slice(&req[22..32]);
    Some(r)
}

/// The trial a frame belongs to, if it is one of the tester's.
fn trial_of(f: &[u8]) -> Option<u32> {
    if f.len() < 50 || f[12..14] != [0x08, 0x00] || f[23] != 17 || f[36..38] != PORT.to_be_bytes() {
        return None;
    }
    (f[42..46] == MAGIC.to_be_bytes()).then(|| u32::from_be_bytes([f[46], f[47], f[48], f[49]]))
}

/// The tester's two sides, running for one device.
struct Tester {
    /// One queue on `ta` per sending thread.
    tx: Vec<Box<dyn Queue>>,
    rx_count: Arc<AtomicU64>,
    rx_trial: Arc<AtomicU64>,
    /// Latencies (ns) of the timestamped frames of the current trial.
    lat: Arc<std::sync::Mutex<Vec<u64>>>,
    _rx: Background,
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
}

/// A thread that runs until its owner drops it: told to stop by a flag it reads,
/// then joined.
struct Background {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Background {
    /// Thread `name` running `f`, which returns once the flag it is given is set.
    fn spawn(
        name: &str,
        f: impl FnOnce(Arc<AtomicBool>) + Send + 'static,
    ) -> Result<Background, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || f(st))
            .map_err(|e| e.to_string())?;
        Ok(Background {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Tester {
    /// `to_tb`: no device, or a bridge, so frames go to the sink's address behind
    /// the tester's own `tb` (a bridge is first shown where it is: the receiver
    /// sends from it once).
    fn new(topo: &Topo, to_tb: bool, senders: usize) -> Result<Tester, String> {
        let ns = topo.tester.clone();
        let src_mac = mac_of(&ns, "ta")?;
        // The sink's link address is not `tb`'s own: frames for it reach the
        // tester's socket (a veth passes every frame up) but the tester's kernel
        // drops them at once as another host's, instead of routing each one into
        // nothing at the cost of the sender's or the device's core.
        let tb_mac = SINK_MAC;
        let dst_mac = if to_tb {
            tb_mac
        } else {
            mac_of(&topo.dut, "da")?
        };
        // The receiver's socket on `tb`, then a socket on `ta` for each sender.
        let mut names = vec!["tb"];
        names.extend(std::iter::repeat_n("ta", senders));
        let mut tx = open_queues(&ns, &names)?;
        let mut q = tx.remove(0);
        let rx_count = Arc::new(AtomicU64::new(0));
        let rx_trial = Arc::new(AtomicU64::new(0));
        let lat = Arc::new(std::sync::Mutex::new(Vec::with_capacity(LAT_SAMPLES)));
        let (c, t) = (rx_count.clone(), rx_trial.clone());
        let lat2 = lat.clone();
        let rx = Background::spawn("rfc2544-rx", move |st| {
            if to_tb {
                // A frame from `tb` to `ta`, for a bridge to learn where `tb` is
                // (a local experimental EtherType, IEEE 802 §9.2).
                let mut hello = vec![0u8; 60];
                hello[..6].copy_from_slice(&src_mac);
                hello[6..12].copy_from_slice(&tb_mac);
                hello[12..14].copy_from_slice(&[0x88, 0xb5]);
                let mut v: Vec<Mbuf> = (0..3)
                    .filter_map(|_| Mbuf::from_slice(&hello).ok())
                    .collect();
                q.tx_burst(dev::Instant::ZERO, &mut v);
            }
            let mut v = Vec::with_capacity(256);
            let mut poller = dev::poll::Poller::new();
            let fds: Vec<_> = q.fd().into_iter().collect();
            while !st.load(Ordering::Relaxed) {
                let n = q.rx_burst(dev::Instant::ZERO, &mut v, 256);
                if n == 0 {
                    let _ = poller.wait(&fds, Some(std::time::Duration::from_millis(5)));
                    continue;
                }
                let want = t.load(Ordering::Relaxed) as u32;
                let mut got = 0;
                let mut answers = Vec::new();
                let arrived = now_ns();
                for m in v.drain(..) {
                    let f = m.first();
                    match trial_of(f) {
                        Some(tr) if tr == want => {
                            got += 1;
                            let ts = stamp_of(f);
                            if ts != 0 {
                                let mut l = lat2.lock().unwrap_or_else(|e| e.into_inner());
                                if l.len() < LAT_SAMPLES {
                                    l.push(arrived.saturating_sub(ts));
                                }
                            }
                        }
                        Some(_) => {}
                        None => {
                            if let Some(r) = arp_answer(f, tb_mac, [198, 18, 2, 2]) {
                                if let Ok(m) = Mbuf::from_slice(&r) {
                                    answers.push(m);
                                }
                            }
                        }
                    }
                }
                c.fetch_add(got, Ordering::Relaxed);
                if !answers.is_empty() {
                    q.tx_burst(dev::Instant::ZERO, &mut answers);
                }
            }
        })?;
        Ok(Tester {
            tx,
            rx_count,
            rx_trial,
            lat,
            _rx: rx,
            dst_mac,
            src_mac,
        })
    }

    /// One trial: `size`-byte frames at `rate` frames a second (0: as fast as the
    /// tester goes) for `secs`, from every sending thread (each its share of the
    /// rate); (sent, received).
    fn trial(&mut self, trial: u32, size: usize, rate: f64, secs: f64) -> (u64, u64) {
        self.trial_stamped(trial, size, rate, secs, false, 0)
    }

    /// A back-to-back trial (RFC 2544 §26.4): a burst of `frames` frames sent as
    /// fast as the tester goes, its threads sharing it; (sent, received).
    fn burst(&mut self, trial: u32, size: usize, frames: u64) -> (u64, u64) {
        self.trial_stamped(trial, size, 0.0, 10.0, false, frames)
    }

    /// The latency of frames at `rate` (RFC 2544 §26.2, shortened to one trial of
    /// `secs`): one frame in every few bursts carries its send time; (mean, 99th
    /// percentile, maximum) in microseconds, `None` if none came back.
    fn latency(
        &mut self,
        trial: u32,
        size: usize,
        rate: f64,
        secs: f64,
    ) -> Option<(f64, f64, f64)> {
        self.lat.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.trial_stamped(trial, size, rate, secs, true, 0);
        let mut l = std::mem::take(&mut *self.lat.lock().unwrap_or_else(|e| e.into_inner()));
        if l.is_empty() {
            return None;
        }
        l.sort_unstable();
        let us = |ns: u64| ns as f64 / 1e3;
        let mean = l.iter().sum::<u64>() as f64 / l.len() as f64 / 1e3;
        Some((
            mean,
            us(l[(l.len() * 99 / 100).min(l.len() - 1)]),
            us(l[l.len() - 1]),
        ))
    }

    fn trial_stamped(
        &mut self,
        trial: u32,
        size: usize,
        rate: f64,
        secs: f64,
        stamp: bool,
        limit: u64,
    ) -> (u64, u64) {
        self.rx_trial.store(u64::from(trial), Ordering::Relaxed);
        self.rx_count.store(0, Ordering::Relaxed);
        let n = self.tx.len().max(1);
        let (dst, src) = (self.dst_mac, self.src_mac);
        let sent: u64 = std::thread::scope(|s| {
            let hs: Vec<_> = self
                .tx
                .iter_mut()
                .enumerate()
                .map(|(i, q)| {
                    s.spawn(move || {
                        let flow = (i, n, stamp);
                        send(
                            q,
                            i == 0,
                            dst,
                            src,
                            size,
                            trial,
                            flow,
                            rate / n as f64,
                            secs,
                            limit.div_ceil(n as u64),
                        )
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap_or(0)).sum()
        });
        // Stragglers in the device's and the rings' queues.
        std::thread::sleep(Duration::from_millis(100));
        (sent, self.rx_count.load(Ordering::Relaxed))
    }
}

/// Waits a while if the `sent` frames are ahead of `rate` frames a second (0:
/// unpaced) since `start`, and says so: the caller looks again. Long waits sleep,
/// so that the core is free for the device meanwhile; short ones spin.
fn ahead(start: Instant, sent: u64, rate: f64) -> bool {
    if rate <= 0.0 {
        return false;
    }
    // When what was sent so far is all due.
    let wait = sent as f64 / rate - start.elapsed().as_secs_f64();
    if wait <= 0.0 {
        return false;
    }
    if wait > 100e-6 {
        std::thread::sleep(Duration::from_secs_f64(wait - 60e-6));
    } else {
        std::hint::spin_loop();
    }
    true
}

/// One sending thread's share of a trial on queue `q` (`flows`: this thread's index
/// and the number of threads, which share the flows out);
/// the first also answers ARP requests for 198.18.1.2 that reach `ta`. Returns the
/// frames sent.
#[allow(clippy::too_many_arguments)]
fn send(
    q: &mut Box<dyn Queue>,
    arp: bool,
    dst: [u8; 6],
    src: [u8; 6],
    size: usize,
    trial: u32,
    (which, senders, stamp): (usize, usize, bool),
    rate: f64,
    secs: f64,
    limit: u64,
) -> u64 {
    let frames: Vec<Mbuf> = (0..(FLOWS / senders).max(1))
        .filter_map(|k| Mbuf::from_slice(&frame(dst, src, size, k * senders + which, trial)).ok())
        .collect();
    // Paced, a thread sends what is due in chunks of about `TICK` and sleeps in
    // between, so that its core is free for the device meanwhile (mpstack's worker
    // is a thread on the same two cores); unpaced, it sends bursts back to back.
    let chunk = if rate > 0.0 {
        ((rate * TICK.as_secs_f64() / BURST as f64).ceil() as usize).clamp(1, 16) * BURST
    } else {
        BURST
    };
    let start = Instant::now();
    let mut sent = 0u64;
    let mut batch = Vec::with_capacity(BURST);
    let mut k = 0;
    loop {
        let el = start.elapsed().as_secs_f64();
        if el >= secs || (limit > 0 && sent >= limit) {
            break;
        }
        if ahead(start, sent, rate) {
            continue;
        }
        for _ in 0..chunk / BURST {
            let n = if limit > 0 {
                (limit - sent.min(limit)).min(BURST as u64) as usize
            } else {
                BURST
            };
            for _ in 0..n {
                if let Ok(c) = frames[k % frames.len()].try_clone() {
                    batch.push(c);
                }
                k += 1;
            }
            if stamp && (k / BURST).is_multiple_of(STAMP_EVERY) && size - 4 >= 58 {
                // One frame of the burst with its send time: a copy of its own.
                let mut b = frames[k % frames.len()].to_vec();
                b[50..58].copy_from_slice(&now_ns().to_be_bytes());
                if let (Ok(m), Some(first)) = (Mbuf::from_slice(&b), batch.first_mut()) {
                    *first = m;
                }
            }
            sent += q.tx_burst(dev::Instant::ZERO, &mut batch) as u64;
            batch.clear();
            if arp && k % (BURST * 64) == 0 {
                let mut v = Vec::new();
                q.rx_burst(dev::Instant::ZERO, &mut v, 64);
                let mut answers: Vec<Mbuf> = v
                    .iter()
                    .filter_map(|m| arp_answer(m.first(), src, [198, 18, 1, 2]))
                    .filter_map(|r| Mbuf::from_slice(&r).ok())
                    .collect();
                if !answers.is_empty() {
                    q.tx_burst(dev::Instant::ZERO, &mut answers);
                }
            }
        }
    }
    sent
}

struct Row {
    case: &'static str,
    size: usize,
    /// The unpaced rate the tester reached with this device (sent and received).
    max_sent: f64,
    /// Throughput: the highest rate with no loss, frames a second.
    throughput: f64,
    /// What arrived a second at the unpaced rate (RFC 2889's forwarding rate at
    /// the maximum offered load).
    fwd_at_max: f64,
    /// Latency at the throughput rate: mean, 99th percentile, maximum (us).
    latency: Option<(f64, f64, f64)>,
}

/// One point of the frame-loss curve (RFC 2544 §26.3).
struct LossPoint {
    case: &'static str,
    size: usize,
    /// The offered rate, in percent of the unpaced rate, and in frames a second.
    pct: u32,
    offered: f64,
    /// Frames lost, in percent of those sent.
    loss: f64,
}

/// The back-to-back result (RFC 2544 §26.4): the longest burst at the unpaced
/// rate with no loss, or `capped` if the longest tried lost nothing.
struct BackToBack {
    case: &'static str,
    size: usize,
    frames: u64,
    capped: bool,
}

#[derive(Default)]
struct Results {
    rows: Vec<Row>,
    loss: Vec<LossPoint>,
    b2b: Vec<BackToBack>,
    rfc2889: Vec<Rfc2889>,
}

/// The highest rate in `lo..hi` at which `ok` holds (`ok(lo)` taken to hold), in
/// `steps` halvings of the interval.
fn bisect(mut lo: f64, mut hi: f64, steps: u32, mut ok: impl FnMut(f64) -> bool) -> f64 {
    for _ in 0..steps {
        let mid = (lo + hi) / 2.0;
        if ok(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Prints a table's first line: `first`, then each case's name.
fn table_head(first: &str, cases: &[&str], width: usize) {
    print!("{first:>6}");
    for c in cases {
        print!("  {c:>width$}");
    }
    println!();
}

/// Whether a trial lost nothing.
fn clean((sent, got): (u64, u64)) -> bool {
    sent > 0 && got >= sent
}

/// Short trials until frames come back (ARP both ways, a bridge's learning,
/// caches): the number of the next trial.
fn warm_up(t: &mut Tester) -> u32 {
    let mut trial = 1;
    for _ in 0..20 {
        let (_, got) = t.trial(trial, 64, 10_000.0, 0.05);
        trial += 1;
        if got > 0 {
            break;
        }
    }
    trial
}

fn measure(a: &BenchArgs, case: &'static str, sizes: &[usize]) -> Result<Results, String> {
    let mut topo = Topo::new(case)?;
    if case.starts_with("mpstack") {
        topo.start_mpstack(bridging(case), a.workers)?;
    }
    let to_tb = case == "tester" || bridging(case);
    let mut t = Tester::new(&topo, to_tb, a.senders as usize)?;
    let secs = a.seconds;
    let mut trial = warm_up(&mut t);
    let mut res = Results::default();
    for (k, &size) in sizes.iter().enumerate() {
        let (sent, got) = t.trial(trial, size, 0.0, secs);
        trial += 1;
        let max = sent as f64 / secs;
        // Throughput (§26.1): unpaced if that loses nothing, else a binary search.
        let lo = if clean((sent, got)) {
            max
        } else {
            bisect(0.0, max, STEPS, |mid| {
                trial += 1;
                clean(t.trial(trial - 1, size, mid, secs))
            })
        };
        let latency = if lo > 0.0 {
            let l = t.latency(trial, size, lo, secs);
            trial += 1;
            l
        } else {
            None
        };
        progress(
            a,
            &format!(
                "rfc2544: {case}, {size} bytes: {:.3} Mfps throughput (unpaced {:.3}), latency {}",
                lo / 1e6,
                max / 1e6,
                latency.map_or("-".into(), |(m, p, x)| format!(
                    "{m:.1} us mean, {p:.1} p99, {x:.1} max"
                ))
            ),
        );
        res.rows.push(Row {
            case,
            size,
            max_sent: max,
            fwd_at_max: got as f64 / secs,
            throughput: lo,
            latency,
        });
        // The loss curve and back-to-back bursts at the first size only (the
        // smallest frames, by default: where devices differ), or at every size
        // with `--every-size`.
        if (k > 0 && !a.every_size) || case == "tester" {
            continue;
        }
        // Frame loss (§26.3): from the unpaced rate down in steps of 10% until two
        // steps in a row lose nothing.
        let mut clean_steps = 0;
        for pct in (1..=10u32).rev().map(|p| p * 10) {
            let offered = max * f64::from(pct) / 100.0;
            let (s, r) = if pct == 100 {
                (sent, got)
            } else {
                let r = t.trial(trial, size, offered, secs);
                trial += 1;
                r
            };
            let loss = if s == 0 {
                100.0
            } else {
                s.saturating_sub(r) as f64 * 100.0 / s as f64
            };
            res.loss.push(LossPoint {
                case,
                size,
                pct,
                offered,
                loss,
            });
            clean_steps = if loss == 0.0 { clean_steps + 1 } else { 0 };
            if clean_steps == 2 {
                break;
            }
        }
        // Back-to-back (§26.4): the longest burst at the unpaced rate that loses
        // nothing, searched up to as many frames as half a second holds.
        let cap = ((max * 0.5) as u64).max(BURST as u64);
        let (mut lo_n, mut hi_n) = (0u64, cap);
        let capped = clean(t.burst(trial, size, cap));
        trial += 1;
        if capped {
            lo_n = cap;
        } else {
            for _ in 0..STEPS {
                let mid = (lo_n + hi_n) / 2;
                if mid <= lo_n {
                    break;
                }
                let r = t.burst(trial, size, mid);
                trial += 1;
                if clean(r) {
                    lo_n = r.0;
                } else {
                    hi_n = mid;
                }
            }
        }
        progress(
            a,
            &format!(
                "rfc2544: {case}, {size} bytes: back-to-back {}{lo_n} frames; loss {}",
                if capped { ">= " } else { "" },
                res.loss
                    .iter()
                    .filter(|l| l.case == case)
                    .map(|l| format!("{}%: {:.1}%", l.pct, l.loss))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        res.b2b.push(BackToBack {
            case,
            size,
            frames: lo_n,
            capped,
        });
    }
    if bridging(case) {
        // RFC 2889's tests of the bridge, on the three ports, the RFC 2544 tester
        // gone (its receiver holds `tb`).
        let fwd = res.rows.first().map_or(0.0, |r| r.fwd_at_max);
        drop(t);
        let ns = topo.tester.clone();
        let mut flush = || topo.flush_bridge(case, a.workers);
        res.rfc2889
            .push(rfc2889::run(a, case, &ns, fwd, &mut flush)?);
    }
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_have_the_standard_sizes_a_valid_header_and_their_trial() {
        for size in SIZES {
            let f = frame([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], size, 5, 77);
            assert_eq!(f.len(), size - 4, "the FCS is the device's");
            assert_eq!(wire::checksum::data(&f[14..34]), 0xffff);
            assert_eq!(trial_of(&f), Some(77));
        }
        assert_eq!(trial_of(&[0u8; 60]), None);
        let mut f = frame([2; 6], [4; 6], 64, 0, 1);
        assert_eq!(stamp_of(&f), 0, "unstamped");
        f[50..58].copy_from_slice(&123_456u64.to_be_bytes());
        assert_eq!(stamp_of(&f), 123_456);
        assert_eq!(trial_of(&f), Some(1), "the stamp leaves the trial mark");
    }

    #[test]
    fn the_tester_answers_arp_for_its_own_address_only() {
        let mut req = vec![0u8; 42];
        req[..6].copy_from_slice(&[0xff; 6]);
        req[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
        req[12..22].copy_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
        req[22..28].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
        req[28..32].copy_from_slice(&[198, 18, 2, 1]);
        req[38..42].copy_from_slice(&[198, 18, 2, 2]);
        let me = [2, 0, 0, 0, 0, 7];
        let r = arp_answer(&req, me, [198, 18, 2, 2]).unwrap();
        assert_eq!(&r[..6], &[2, 0, 0, 0, 0, 9]);
        assert_eq!(&r[20..22], &[0, 2], "a reply");
        assert_eq!(&r[22..28], &me);
        assert_eq!(&r[38..42], &[198, 18, 2, 1]);
        assert!(arp_answer(&req, me, [198, 18, 2, 3]).is_none());
    }
}
