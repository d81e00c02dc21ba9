//! `mpstack bench rfc2544`: RFC 2544 throughput of a device under test on real
//! links — veth pairs in network namespaces this benchmark makes — driven by a
//! tester on AF_PACKET sockets ([`dev::packet`]), the same device code
//! `mpstack run --packet` uses.
//!
//! Topology, made afresh for each device: the tester's namespace holds `ta` and
//! `tb`; the device's namespace holds their peers `da` and `db`. The tester sends
//! UDP from 198.18.1.2 (behind `ta`) to 198.18.2.2 (behind `tb`) at a set rate and
//! counts what arrives on `tb`; it answers the device's ARP requests for both
//! addresses itself.
//!
//! Devices, side by side in one run:
//! - `tester`: no device, `ta` and `tb` the two ends of one veth pair: the tester
//!   looped back to itself, its own ceiling.
//! - `linux-router`: the Linux kernel forwarding between `da` (198.18.1.1/24) and
//!   `db` (198.18.2.1/24).
//! - `mpstack-router`: `mpstack run --packet da --packet db --forwarding` (one
//!   worker) in the device's namespace, whose kernel holds no address and does not
//!   forward.
//!
//! For each frame size (RFC 2544 §9.1: 64, 128, 256, 512, 1024, 1280, 1518 bytes,
//! FCS included, so 4 fewer on the wire here), the throughput (§26.1): the highest
//! rate at which every frame sent in a trial of `--seconds` comes back, found by a
//! binary search between 0 and the rate the tester reaches unpaced; then the latency
//! at that rate (§26.2, shortened to one trial of `--seconds`: one frame in every
//! few bursts carries its send time, the receiver takes the difference on the same
//! clock). Planned beside them (issue 24): the frame-loss curve, back-to-back
//! bursts, the bridge rows and RFC 2889's tests, a plot.
//!
//! The tester sends from `--senders` threads (a socket each; 2 by default) and
//! receives on one. On two
//! cores the tester and the device share the machine; the Linux kernel forwards a
//! veth frame in the sender's own system call, so its router costs the tester's
//! cores, while mpstack's worker is a thread of its own. The figures say what this
//! machine does, not what either router does on hardware of its own.

use super::progress;
use crate::BenchArgs;
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
/// Steps of the binary search.
const STEPS: u32 = 8;
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
pub const CASES: [&str; 3] = ["tester", "linux-router", "mpstack-router"];

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

/// Why the benchmark cannot run here, if it cannot.
fn unavailable() -> Option<String> {
    if euid() != 0 {
        return Some("not root (the tester makes namespaces and veth pairs)".into());
    }
    if sh("command -v ip").is_err() {
        return Some("no 'ip' command (iproute2)".into());
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
        let id = std::process::id() % 100_000;
        let t = Topo {
            tester: format!("rfc-t-{id}"),
            dut: format!("rfc-d-{id}"),
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
        for s in ["a", "b"] {
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
            _ => {
                sh(&format!(
                    "ip netns exec {dn} sysctl -qw net.ipv4.ip_forward=0"
                ))?;
            }
        }
        Ok(t)
    }

    /// Starts `mpstack run` in the device's namespace and waits for it to be up.
    fn start_mpstack(&mut self) -> Result<(), String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mpstack = exe.with_file_name("mpstack");
        if !mpstack.exists() {
            return Err(format!(
                "{} is missing: `cargo build --release` builds it beside mpstack-bench",
                mpstack.display()
            ));
        }
        let mut node = Command::new("ip")
            .args(["netns", "exec", &self.dut])
            .arg(&mpstack)
            .args(["run", "--packet", "da", "--inet", "da=198.18.1.1/24"])
            .args(["--packet", "db", "--inet", "db=198.18.2.1/24"])
            .args(["--forwarding", "--serve", "none", "--workers", "1"])
            .args(["--busy-poll", "1000"])
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
    stop: Arc<AtomicBool>,
    rx_thread: Option<std::thread::JoinHandle<()>>,
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
}

impl Tester {
    /// `looped`: no device, so frames go to the tester's own `tb`.
    fn new(topo: &Topo, looped: bool, senders: usize) -> Result<Tester, String> {
        let ns = topo.tester.clone();
        let src_mac = mac_of(&ns, "ta")?;
        let tb_mac = mac_of(&ns, "tb")?;
        let dst_mac = if looped {
            tb_mac
        } else {
            mac_of(&topo.dut, "da")?
        };
        // The senders: a socket each on `ta`, opened inside the tester's namespace.
        let tx = std::thread::scope(|s| {
            s.spawn(|| -> Result<Vec<Box<dyn Queue>>, String> {
                dev::netns::enter(&ns).map_err(|e| format!("setns {ns}: {e}"))?;
                (0..senders)
                    .map(|_| {
                        let d = PacketDevice::open("ta", 1, PacketOptions::default())
                            .map_err(|e| e.to_string())?;
                        Ok(Box::new(d).into_queues().remove(0))
                    })
                    .collect()
            })
            .join()
            .map_err(|_| "the tester's thread panicked".to_string())?
        })?;
        let rx_count = Arc::new(AtomicU64::new(0));
        let rx_trial = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let lat = Arc::new(std::sync::Mutex::new(Vec::with_capacity(LAT_SAMPLES)));
        let (c, t, st, ns2) = (rx_count.clone(), rx_trial.clone(), stop.clone(), ns.clone());
        let lat2 = lat.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let rx_thread = std::thread::Builder::new()
            .name("rfc2544-rx".into())
            .spawn(move || {
                let open = || -> Result<Box<dyn Queue>, String> {
                    dev::netns::enter(&ns2).map_err(|e| format!("setns {ns2}: {e}"))?;
                    let d = PacketDevice::open("tb", 1, PacketOptions::default())
                        .map_err(|e| e.to_string())?;
                    Ok(Box::new(d).into_queues().remove(0))
                };
                let mut q = match open() {
                    Ok(q) => {
                        let _ = ready_tx.send(Ok(()));
                        q
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
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
            })
            .map_err(|e| e.to_string())?;
        ready_rx
            .recv()
            .map_err(|_| "the tester's receiver stopped".to_string())??;
        Ok(Tester {
            tx,
            rx_count,
            rx_trial,
            lat,
            stop,
            rx_thread: Some(rx_thread),
            dst_mac,
            src_mac,
        })
    }

    /// One trial: `size`-byte frames at `rate` frames a second (0: as fast as the
    /// tester goes) for `secs`, from every sending thread (each its share of the
    /// rate); (sent, received).
    fn trial(&mut self, trial: u32, size: usize, rate: f64, secs: f64) -> (u64, u64) {
        self.trial_stamped(trial, size, rate, secs, false)
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
        self.trial_stamped(trial, size, rate, secs, true);
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
) -> u64 {
    let frames: Vec<Mbuf> = (0..(FLOWS / senders).max(1))
        .filter_map(|k| Mbuf::from_slice(&frame(dst, src, size, k * senders + which, trial)).ok())
        .collect();
    let start = Instant::now();
    let mut sent = 0u64;
    let mut batch = Vec::with_capacity(BURST);
    let mut k = 0;
    loop {
        let el = start.elapsed().as_secs_f64();
        if el >= secs {
            break;
        }
        if rate > 0.0 && (sent as f64) >= rate * el {
            std::hint::spin_loop();
            continue;
        }
        for _ in 0..BURST {
            if let Ok(c) = frames[k % frames.len()].try_clone() {
                batch.push(c);
            }
            k += 1;
        }
        if stamp && (k / BURST).is_multiple_of(STAMP_EVERY) && size - 4 >= 58 {
            // One frame of the burst with its send time: a copy of its own.
            let mut b = frames[k % frames.len()].to_vec();
            b[50..58].copy_from_slice(&now_ns().to_be_bytes());
            if let Ok(m) = Mbuf::from_slice(&b) {
                batch[0] = m;
            }
        }
        sent += q.tx_burst(dev::Instant::ZERO, &mut batch) as u64;
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
    sent
}

impl Drop for Tester {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.rx_thread.take() {
            let _ = t.join();
        }
    }
}

struct Row {
    case: &'static str,
    size: usize,
    /// The unpaced rate the tester reached with this device (sent and received).
    max_sent: f64,
    /// Throughput: the highest rate with no loss, frames a second.
    throughput: f64,
    /// Latency at the throughput rate: mean, 99th percentile, maximum (us).
    latency: Option<(f64, f64, f64)>,
}

fn measure(a: &BenchArgs, case: &'static str, sizes: &[usize]) -> Result<Vec<Row>, String> {
    let mut topo = Topo::new(case)?;
    if case == "mpstack-router" {
        topo.start_mpstack()?;
    }
    let mut t = Tester::new(&topo, case == "tester", a.senders as usize)?;
    let secs = a.seconds;
    // Warm up: ARP both ways, caches.
    let mut trial = 1;
    for _ in 0..20 {
        let (_, got) = t.trial(trial, 64, 10_000.0, 0.05);
        trial += 1;
        if got > 0 {
            break;
        }
    }
    let mut rows = Vec::new();
    for &size in sizes {
        let (sent, _) = t.trial(trial, size, 0.0, secs);
        trial += 1;
        let max = sent as f64 / secs;
        let (mut lo, mut hi) = (0.0f64, max);
        for _ in 0..STEPS {
            let mid = (lo + hi) / 2.0;
            let (s, r) = t.trial(trial, size, mid, secs);
            trial += 1;
            if s > 0 && r >= s {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        // The top itself, if it loses nothing.
        let (s, r) = t.trial(trial, size, max, secs);
        trial += 1;
        if s > 0 && r >= s {
            lo = s as f64 / secs;
        }
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
        rows.push(Row {
            case,
            size,
            max_sent: max,
            throughput: lo,
            latency,
        });
    }
    Ok(rows)
}

pub fn main(a: &BenchArgs) -> Result<ExitCode, String> {
    if let Some(s) = a.skip.iter().find(|s| !CASES.contains(&s.as_str())) {
        return Err(format!(
            "bench rfc2544: --skip: unknown '{s}' (known: {})",
            CASES.join(", ")
        ));
    }
    if let Some(why) = unavailable() {
        if a.json {
            println!("{{\"bench\":\"rfc2544\",\"skipped\":\"{why}\"}}");
        } else {
            println!("bench rfc2544: skipped: {why}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let sizes: Vec<usize> = if a.sizes.is_empty() {
        SIZES.to_vec()
    } else {
        a.sizes.clone()
    };
    if let Some(s) = sizes.iter().find(|s| !(64..=1518).contains(*s)) {
        return Err(format!(
            "bench rfc2544: --sizes: {s} is not 64 to 1518 bytes"
        ));
    }
    let mut rows = Vec::new();
    for case in CASES {
        if a.skip.iter().any(|s| s == case) {
            continue;
        }
        progress(a, &format!("rfc2544: {case}: making the namespaces"));
        rows.extend(measure(a, case, &sizes).map_err(|e| format!("bench rfc2544: {case}: {e}"))?);
    }
    if a.json {
        for r in &rows {
            println!(
                "{{\"bench\":\"rfc2544\",\"case\":\"{}\",\"frame_size\":{},\"throughput_fps\":{:.0},\"throughput_mbps\":{:.1},\"unpaced_fps\":{:.0},\"latency_us\":{}}}",
                r.case,
                r.size,
                r.throughput,
                r.throughput * (r.size as f64 + 20.0) * 8.0 / 1e6,
                r.max_sent,
                r.latency.map_or("null".into(), |(m, p, x)| format!(
                    "{{\"mean\":{m:.2},\"p99\":{p:.2},\"max\":{x:.2}}}"
                ))
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "RFC 2544 throughput (no loss in a {} s trial, binary search of {STEPS} steps) over veth pairs, tester on AF_PACKET with {} sending thread(s)",
        a.seconds, a.senders
    );
    println!("Mfps: million frames a second; Mbit/s counts the wire's 20 bytes of preamble and gap per frame");
    println!();
    let cases: Vec<&str> = CASES
        .iter()
        .copied()
        .filter(|c| rows.iter().any(|r| r.case == *c))
        .collect();
    print!("{:>6}", "bytes");
    for c in &cases {
        print!("  {:>22}", c);
    }
    println!();
    for &size in &sizes {
        print!("{size:>6}");
        for c in &cases {
            match rows.iter().find(|r| r.case == *c && r.size == size) {
                Some(r) => print!(
                    "  {:>8.3} Mfps {:>6.0} Mb",
                    r.throughput / 1e6,
                    r.throughput * (size as f64 + 20.0) * 8.0 / 1e6
                ),
                None => print!("  {:>22}", "-"),
            }
        }
        println!();
    }
    let at = |c: &str| rows.iter().find(|r| r.case == c && r.size == 64);
    if let (Some(m), Some(l)) = (at("mpstack-router"), at("linux-router")) {
        println!();
        println!(
            "64 bytes: mpstack router {:.3} Mfps, Linux kernel router {:.3}: {:.2}x",
            m.throughput / 1e6,
            l.throughput / 1e6,
            m.throughput / l.throughput.max(1.0)
        );
    }
    Ok(ExitCode::SUCCESS)
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
