//! `mpstack bench tcp`: single-flow TCP throughput of mpstack beside its baseline and
//! its peers, all measured in the same run with the same workload (one connection, N
//! MiB from client to server, the receiver drains and counts; timed from the first
//! write until the receiver has seen every byte and the FIN):
//!
//! - `mpstack`: two mpstack stacks in one process (worker threads, a memory wire with
//!   MTU 1500, the real clock), through `TcpStream`;
//! - `smoltcp`: two smoltcp 0.14 interfaces polled in one thread over in-memory
//!   Ethernet devices, MTU 1500 ([`smol`]);
//! - `linux-loopback`: the kernel's TCP over 127.0.0.1 (MTU 65536) through `std::net`;
//! - `linux-veth`: the kernel's TCP between two network namespaces over a veth pair
//!   (MTU 1500), driven by iperf3 ([`veth`]); skipped, with the reason, where it
//!   cannot run.
//!
//! In the same run, two connection figures ([`conns`]): connections per second (open,
//! a 64-byte request and answer, close) of mpstack beside Linux over loopback, and the
//! heap and RSS each idle established mpstack connection takes with `--idle-conns` of
//! them open.

mod bridge;
mod conns;
mod fib;
mod forward;
mod fw;
mod loss;
mod lpm;
mod mbuf;
mod netchan;
mod polled;
mod quic;
mod rfc2544;
mod router;
mod smol;
mod smol_tap;
mod stages;
mod tap;
mod veth;

use crate::BenchArgs;
use dev::mem::{wire, WireConfig};
use dev::Offloads;
use net::Stack;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Measurement {
    name: &'static str,
    bytes: u64,
    secs: f64,
}

impl Measurement {
    fn gbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.secs / 1e9
    }
}

/// An implementation measured by `bench tcp`, in the order the rounds run them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Impl {
    /// Two mpstack stacks in one process over a memory wire.
    Mpstack,
    /// The same, both stacks and both applications polled in one thread.
    MpstackPolled,
    /// `mpstack` over a memory wire with checksum and segmentation offload (64 KiB
    /// segments passed whole, as Linux's veth passes GSO packets).
    MpstackTso,
    /// `mpstack-polled` over a memory wire with the same offloads.
    MpstackPolledTso,
    /// `mpstack-polled-tso` with 512 KiB segments (`dev::Offloads::BIG`, Linux's BIG
    /// TCP) and 1 MiB socket buffers to carry them.
    MpstackPolledBig,
    /// `mpstack` with the zero-copy calls: the sender writes its bytes in place
    /// (`TcpStream::write_with`), the receiver is lent them where they lie
    /// (`TcpStream::read_with`).
    MpstackZc,
    /// `mpstack-tso` with the zero-copy calls.
    MpstackTsoZc,
    /// `mpstack-polled-big` with the zero-copy calls.
    MpstackPolledBigZc,
    /// Two smoltcp 0.14 interfaces in one thread over memory frame queues.
    Smoltcp,
    /// The same with 64 KiB frames (smoltcp has no segmentation offload; this is
    /// what it does with large segments, beside `mpstack-tso`).
    #[value(name = "smoltcp-64k")]
    Smoltcp64k,
    /// `smoltcp-64k` with checksums neither computed nor verified: smoltcp at its
    /// fastest, the like-for-like of `mpstack-polled-tso` (whose wire offloads them).
    #[value(name = "smoltcp-64k-nocsum")]
    Smoltcp64kNocsum,
    /// The Linux kernel's TCP over 127.0.0.1.
    LinuxLoopback,
    /// The Linux kernel's TCP between two namespaces over veth, with iperf3.
    LinuxVeth,
    /// Linux → mpstack over a TAP with offload, Linux's end in a namespace.
    TapIn,
    /// mpstack → Linux over the same TAP.
    TapOut,
    /// `tap-in` over a TAP without the offloads.
    TapInPlain,
    /// `tap-out` over a TAP without the offloads.
    TapOutPlain,
    /// Linux → smoltcp over smoltcp's own TAP (no offload).
    #[value(name = "smoltcp-tap-in")]
    SmoltcpTapIn,
    /// smoltcp → Linux over the same.
    #[value(name = "smoltcp-tap-out")]
    SmoltcpTapOut,
    /// Connections per second, mpstack and Linux over loopback (not a throughput row).
    Conns,
    /// Heap and RSS per idle established mpstack connection (not a throughput row).
    Idle,
}

impl Impl {
    pub fn name(self) -> &'static str {
        match self {
            Impl::Mpstack => "mpstack",
            Impl::MpstackPolled => "mpstack-polled",
            Impl::MpstackTso => "mpstack-tso",
            Impl::MpstackPolledTso => "mpstack-polled-tso",
            Impl::MpstackPolledBig => "mpstack-polled-big",
            Impl::MpstackZc => "mpstack-zc",
            Impl::MpstackTsoZc => "mpstack-tso-zc",
            Impl::MpstackPolledBigZc => "mpstack-polled-big-zc",
            Impl::Smoltcp => "smoltcp",
            Impl::Smoltcp64k => "smoltcp-64k",
            Impl::Smoltcp64kNocsum => "smoltcp-64k-nocsum",
            Impl::LinuxLoopback => "linux-loopback",
            Impl::LinuxVeth => "linux-veth",
            Impl::TapIn => "tap-in",
            Impl::TapOut => "tap-out",
            Impl::TapInPlain => "tap-in-plain",
            Impl::TapOutPlain => "tap-out-plain",
            Impl::SmoltcpTapIn => "smoltcp-tap-in",
            Impl::SmoltcpTapOut => "smoltcp-tap-out",
            Impl::Conns => "conns",
            Impl::Idle => "idle",
        }
    }

    /// A single-flow throughput measurement (the rounds), not a connection figure.
    fn is_throughput(self) -> bool {
        !matches!(self, Impl::Conns | Impl::Idle)
    }
}

/// What the connection figures measured.
#[derive(Default)]
struct ConnFigures {
    rates: Vec<conns::ConnRate>,
    idle: Option<conns::IdleMem>,
}

pub fn main(a: BenchArgs) -> Result<ExitCode, String> {
    match a.what.as_str() {
        "tcp" => tcp(&a),
        "mbuf" => mbuf::main(&a),
        "lpm" => lpm::main(&a),
        "fib" => fib::main(&a),
        "forward" => forward::main(&a),
        "fw" => fw::main(&a),
        "router" => router::main(&a),
        "bridge" => bridge::main(&a),
        "rfc2544" => rfc2544::main(&a),
        "netchannel" => netchan::main(&a),
        "quic" => quic::main(&a),
        "loss" => loss::main(&a),
        other => Err(format!(
            "bench: unknown benchmark '{other}' (known: tcp, mbuf, lpm, fib, forward, fw, router, bridge, rfc2544, netchannel, quic, loss)"
        )),
    }
}

fn progress(a: &BenchArgs, msg: &str) {
    if !a.json {
        eprintln!("bench: {msg}");
    }
}

fn tcp(a: &BenchArgs) -> Result<ExitCode, String> {
    let bytes = a.mbytes * 1024 * 1024;
    if let Some(im) = a.child {
        let run = |n| {
            in_process(im, n, a.workers as usize)
                .unwrap_or_else(|| Err(format!("--child: {} is not an in-process row", im.name())))
        };
        // A short transfer first, untimed: the packet pool and the heap grow to what
        // the row uses, as they would have in an earlier round.
        run(bytes.min(16 << 20))?;
        let m = run(bytes)?;
        println!("{} {}", m.bytes, m.secs);
        return Ok(ExitCode::SUCCESS);
    }
    let mut only = a.only.clone();
    only.sort();
    only.dedup();
    let mut skipped: Vec<(Impl, String)> = Vec::new();
    // Made once for all rounds; its Drop deletes the namespaces on every way out of here.
    let mut lab = None;
    if only.contains(&Impl::LinuxVeth) {
        match veth::unavailable().map_or_else(veth::Lab::new, Err) {
            Ok(l) => lab = Some(l),
            Err(why) => skipped.push((Impl::LinuxVeth, why)),
        }
    }
    // The TAP labs, each with its rows (Linux → it, it → Linux), made once too.
    let workers = a.workers as usize;
    type MakeLab<'a> = &'a dyn Fn() -> Result<Box<dyn tap::TapRows>, String>;
    let make: [([Impl; 2], MakeLab<'_>); 3] = [
        ([Impl::TapIn, Impl::TapOut], &|| {
            Ok(Box::new(tap::TapLab::new(workers, true)?))
        }),
        ([Impl::TapInPlain, Impl::TapOutPlain], &|| {
            Ok(Box::new(tap::TapLab::new(workers, false)?))
        }),
        ([Impl::SmoltcpTapIn, Impl::SmoltcpTapOut], &|| {
            Ok(Box::new(smol_tap::SmolTapLab::new()?))
        }),
    ];
    let mut tap_labs = Vec::new();
    for (rows, make) in make {
        if !rows.iter().any(|im| only.contains(im)) {
            continue;
        }
        match tap::unavailable().map_or_else(make, Err) {
            Ok(l) => tap_labs.push((rows, l)),
            Err(why) => skipped.extend(
                rows.into_iter()
                    .filter(|im| only.contains(im))
                    .map(|im| (im, why.clone())),
            ),
        }
    }
    // While namespaces exist, SIGINT and SIGTERM end the bench between two
    // measurements, through the normal return, so that the Lab's Drop still runs.
    let stop = Arc::new(AtomicBool::new(false));
    if lab.is_some() || !tap_labs.is_empty() {
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(sig, stop.clone())
                .map_err(|e| format!("signal handler: {e}"))?;
        }
    }
    let mut results = Vec::new();
    for round in 1..=a.rounds {
        for &im in &only {
            if stop.load(Ordering::Relaxed) {
                return Err("interrupted (network namespaces removed)".into());
            }
            if !im.is_throughput() || skipped.iter().any(|(s, _)| *s == im) {
                continue;
            }
            let what = row_what(im, a);
            progress(
                a,
                &format!("round {round}/{}: {what}, {} MiB", a.rounds, a.mbytes),
            );
            match im {
                // A peer outside this program that fails is reported, not fatal: the
                // rows measured so far still stand.
                Impl::LinuxVeth => match lab.as_ref().map(|l| l.iperf3(bytes)) {
                    Some(Ok(m)) => results.push(m),
                    Some(Err(why)) => {
                        progress(a, &format!("linux-veth: {why}"));
                        skipped.push((im, format!("round {round}: {why}")));
                    }
                    None => {}
                },
                Impl::TapIn
                | Impl::TapOut
                | Impl::TapInPlain
                | Impl::TapOutPlain
                | Impl::SmoltcpTapIn
                | Impl::SmoltcpTapOut => {
                    let Some((rows, l)) = tap_labs.iter().find(|(rows, _)| rows.contains(&im))
                    else {
                        continue;
                    };
                    let r = if im == rows[0] {
                        l.inbound(bytes)
                    } else {
                        l.outbound(bytes)
                    };
                    match r {
                        Ok(m) => results.push(m),
                        Err(why) => {
                            progress(a, &format!("{}: {why}", im.name()));
                            skipped.push((im, format!("round {round}: {why}")));
                        }
                    }
                }
                Impl::Conns | Impl::Idle => {}
                // The rows inside this program ([`in_process`] names them), each in a
                // process of its own each time, so that where one row's buffers land
                // does not depend on what the rows before it left in the heap: that
                // moved smoltcp-64k between 35 and 45 Gbit/s.
                _ => results.push(child(im, a)?),
            }
        }
    }
    drop(lab);
    drop(tap_labs);
    let figs = conn_figures(a, &only)?;
    report(a, &only, &results, &skipped);
    report_conns(a, &figs);
    Ok(ExitCode::SUCCESS)
}

/// What a throughput row measures, for its progress line.
fn row_what(im: Impl, a: &BenchArgs) -> String {
    match im {
        Impl::Mpstack => format!("mpstack, {} worker(s) per stack", a.workers),
        Impl::MpstackPolled => "mpstack, two stacks polled in one thread".into(),
        Impl::MpstackTso => format!(
            "mpstack, {} worker(s) per stack, checksum and segmentation offload",
            a.workers
        ),
        Impl::MpstackPolledTso => {
            "mpstack, two stacks polled in one thread, checksum and segmentation offload".into()
        }
        Impl::MpstackPolledBig => {
            "mpstack, two stacks polled in one thread, 512 KiB segments (BIG TCP), 1 MiB buffers"
                .into()
        }
        Impl::MpstackZc => format!(
            "mpstack, {} worker(s) per stack, zero-copy write_with/read_with",
            a.workers
        ),
        Impl::MpstackTsoZc => format!(
            "mpstack, {} worker(s) per stack, offloads, zero-copy write_with/read_with",
            a.workers
        ),
        Impl::MpstackPolledBigZc => {
            "mpstack, polled in one thread, 512 KiB segments, zero-copy write_with/read_with".into()
        }
        Impl::Smoltcp => "smoltcp 0.14, two interfaces in one thread".into(),
        Impl::Smoltcp64k => "smoltcp 0.14, two interfaces in one thread, 64 KiB frames".into(),
        Impl::Smoltcp64kNocsum => {
            "smoltcp 0.14, two interfaces in one thread, 64 KiB frames, no checksums".into()
        }
        Impl::LinuxLoopback => "Linux kernel TCP over loopback".into(),
        Impl::LinuxVeth => "Linux kernel TCP over veth between namespaces (iperf3)".into(),
        Impl::TapIn => "Linux -> mpstack over an offload TAP".into(),
        Impl::TapOut => "mpstack -> Linux over an offload TAP".into(),
        Impl::TapInPlain => "Linux -> mpstack over a plain TAP".into(),
        Impl::TapOutPlain => "mpstack -> Linux over a plain TAP".into(),
        Impl::SmoltcpTapIn => "Linux -> smoltcp 0.14 over its TAP".into(),
        Impl::SmoltcpTapOut => "smoltcp 0.14 -> Linux over its TAP".into(),
        Impl::Conns | Impl::Idle => unreachable!("not a throughput row"),
    }
}

/// The connection rows (`conns`, `idle`) among `only`, measured.
fn conn_figures(a: &BenchArgs, only: &[Impl]) -> Result<ConnFigures, String> {
    let mut figs = ConnFigures::default();
    if only.contains(&Impl::Conns) {
        progress(
            a,
            &format!(
                "conns: mpstack, {} worker(s) per stack, {} client threads, {} server ports, {} s",
                a.workers,
                conns::CLIENTS,
                conns::RATE_PORTS,
                a.conns_secs
            ),
        );
        figs.rates
            .push(conns::rate_mpstack(a.conns_secs, a.workers as usize)?);
        progress(
            a,
            &format!(
                "conns: mpstack, two stacks polled in one thread, {} connections in flight, {} s",
                conns::POLLED_INFLIGHT,
                a.conns_secs
            ),
        );
        figs.rates.push(conns::rate_polled(a.conns_secs)?);
        progress(a, "conns: Linux kernel TCP over loopback");
        figs.rates.push(conns::rate_kernel(a.conns_secs)?);
    }
    if only.contains(&Impl::Idle) {
        progress(
            a,
            &format!(
                "idle: opening {} connections, {} worker(s) per stack",
                a.idle_conns, a.workers
            ),
        );
        let p = |m: &str| progress(a, m);
        figs.idle = Some(conns::idle(
            a.idle_conns as usize,
            a.workers as usize,
            Duration::from_secs_f64(a.idle_secs),
            &p,
        )?);
    }
    Ok(figs)
}

/// `s` as the inside of a JSON string.
fn json_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o
}

/// The ratios printed, each of ours over each other implementation.
const OURS: [Impl; 8] = [
    Impl::Mpstack,
    Impl::MpstackPolled,
    Impl::MpstackTso,
    Impl::MpstackPolledTso,
    Impl::MpstackPolledBig,
    Impl::MpstackZc,
    Impl::MpstackTsoZc,
    Impl::MpstackPolledBigZc,
];
/// Each zero-copy row beside its copying row.
const ZERO_COPY: [(Impl, Impl); 3] = [
    (Impl::MpstackZc, Impl::Mpstack),
    (Impl::MpstackTsoZc, Impl::MpstackTso),
    (Impl::MpstackPolledBigZc, Impl::MpstackPolledBig),
];
const RATIOS: [Impl; 5] = [
    Impl::Smoltcp,
    Impl::Smoltcp64k,
    Impl::Smoltcp64kNocsum,
    Impl::LinuxVeth,
    Impl::LinuxLoopback,
];

fn report(a: &BenchArgs, only: &[Impl], results: &[Measurement], skipped: &[(Impl, String)]) {
    if !only.iter().any(|im| im.is_throughput()) {
        return;
    }
    let best = |im: Impl| {
        results
            .iter()
            .filter(|r| r.name == im.name())
            .map(Measurement::gbps)
            .reduce(f64::max)
    };
    let ratios: Vec<(Impl, Impl, f64, f64)> = OURS
        .iter()
        .filter_map(|&us| best(us).map(|o| (us, o)))
        .flat_map(|(us, o)| {
            RATIOS
                .iter()
                .filter_map(move |&im| best(im).map(|b| (us, im, o, b)))
                .collect::<Vec<_>>()
        })
        .chain(
            ZERO_COPY
                .into_iter()
                .filter_map(|(us, them)| Some((us, them, best(us)?, best(them)?))),
        )
        // Over TAP, each direction beside smoltcp's.
        .chain(
            [
                (Impl::TapIn, Impl::SmoltcpTapIn),
                (Impl::TapOut, Impl::SmoltcpTapOut),
                (Impl::TapInPlain, Impl::SmoltcpTapIn),
                (Impl::TapOutPlain, Impl::SmoltcpTapOut),
            ]
            .into_iter()
            .filter_map(|(us, them)| Some((us, them, best(us)?, best(them)?))),
        )
        .collect();
    if a.json {
        for r in results {
            println!(
                "{{\"bench\":\"tcp\",\"impl\":\"{}\",\"bytes\":{},\"seconds\":{:.6},\"gbit_per_s\":{:.4}}}",
                r.name,
                r.bytes,
                r.secs,
                r.gbps()
            );
        }
        for (im, why) in skipped {
            println!(
                "{{\"bench\":\"tcp\",\"impl\":\"{}\",\"skipped\":\"{}\"}}",
                im.name(),
                json_escape(why)
            );
        }
        for (us, im, o, b) in ratios {
            let key = im.name().replace('-', "_");
            let ours = us.name().replace('-', "_");
            println!(
                "{{\"bench\":\"tcp\",\"ratio_{ours}_to_{key}\":{:.4},\"{ours}_gbit_per_s\":{o:.4},\"{key}_gbit_per_s\":{b:.4}}}",
                o / b.max(1e-9)
            );
        }
        return;
    }
    println!(
        "{:<20} {:>10} {:>10} {:>12}",
        "implementation", "MiB", "seconds", "Gbit/s"
    );
    for r in results {
        println!(
            "{:<20} {:>10} {:>10.3} {:>12.3}",
            r.name,
            r.bytes / (1024 * 1024),
            r.secs,
            r.gbps()
        );
    }
    for (im, why) in skipped {
        println!("{:<20} skipped: {why}", im.name());
    }
    let bests: Vec<String> = only
        .iter()
        .filter_map(|&im| best(im).map(|b| format!("{} {b:.3}", im.name())))
        .collect();
    if bests.is_empty() {
        println!("\nnothing measured");
    } else {
        println!("\nbest of {} (Gbit/s): {}", a.rounds, bests.join(", "));
    }
    if !ratios.is_empty() {
        let r: Vec<String> = ratios
            .iter()
            .map(|(us, im, o, b)| format!("{}/{} {:.2}", us.name(), im.name(), o / b.max(1e-9)))
            .collect();
        println!("ratios: {}", r.join(", "));
    }
    for &im in only {
        let Some(setup) = row_setup(im, a) else {
            continue;
        };
        println!("({}: {setup})", im.name());
    }
}

/// How a row was measured, for the notes under the table; none for the
/// connection rows.
fn row_setup(im: Impl, a: &BenchArgs) -> Option<String> {
    let setup: String = match im {
        Impl::Mpstack => format!(
            "two stacks, {} worker thread(s) each, MTU 1500 memory wire",
            a.workers
        ),
        Impl::MpstackPolled => {
            "two stacks and both applications polled in one thread, MTU 1500 memory wire".into()
        }
        Impl::MpstackTso => format!(
            "as mpstack, the wire with checksum offload and TSO up to 64 KiB (segments \
             received whole), {} worker thread(s) each",
            a.workers
        ),
        Impl::MpstackPolledTso => {
            "as mpstack-polled, the wire with checksum offload and TSO up to 64 KiB".into()
        }
        Impl::MpstackPolledBig => "as mpstack-polled-tso, TSO up to 512 KiB (IP length \
                                   field 0, as Linux's BIG TCP) and 1 MiB socket buffers \
                                   each way"
            .into(),
        Impl::MpstackZc | Impl::MpstackTsoZc | Impl::MpstackPolledBigZc => format!(
            "as {}, the sender producing its bytes in the stack's packet buffer \
             (TcpStream::write_with, filling what it is lent with the pattern the \
             copying row copies), the receiver lent them where they lie \
             (TcpStream::read_with, consuming them as the copying row's reader \
             does its copy: untouched)",
            ZERO_COPY
                .iter()
                .find(|(zc, _)| *zc == im)
                .map_or("", |(_, copying)| copying.name())
        ),
        Impl::Smoltcp => "two interfaces polled in one thread, MTU 1500 memory frame queues".into(),
        Impl::Smoltcp64k => {
            "two interfaces polled in one thread, MTU 65521 memory frame queues".into()
        }
        Impl::Smoltcp64kNocsum => "as smoltcp-64k, checksums neither computed nor \
                                   verified (ChecksumCapabilities::ignored)"
            .into(),
        Impl::LinuxLoopback => "127.0.0.1, MTU 65536, std::net".into(),
        Impl::LinuxVeth => "two namespaces, veth MTU 1500, iperf3 (receiver's rate)".into(),
        Impl::TapIn | Impl::TapOut | Impl::TapInPlain | Impl::TapOutPlain => format!(
            "an mpstack stack ({} worker thread(s)) on a TAP {}, MTU 1500; Linux's end a \
             thread of this process in the TAP's namespace (setns), kernel sockets, no \
             pipe; {}",
            a.workers,
            if matches!(im, Impl::TapIn | Impl::TapOut) {
                "with the virtio-net header's checksum and segmentation offload"
            } else {
                "without offload"
            },
            if matches!(im, Impl::TapIn | Impl::TapInPlain) {
                "Linux sends, mpstack receives"
            } else {
                "mpstack sends, Linux receives"
            }
        ),
        Impl::SmoltcpTapIn | Impl::SmoltcpTapOut => format!(
            "smoltcp 0.14 on its own TAP (phy::TunTapInterface, MTU 1500, no offload), \
             256 KiB socket buffers, polled in one thread sleeping in phy::wait for its \
             poll delay; Linux's end as for the tap rows; {}",
            if im == Impl::SmoltcpTapIn {
                "Linux sends, smoltcp receives"
            } else {
                "smoltcp sends, Linux receives"
            }
        ),
        Impl::Conns | Impl::Idle => return None,
    };
    Some(setup)
}

/// The connection figures: lines for people, or one JSON object per result.
fn report_conns(a: &BenchArgs, f: &ConnFigures) {
    // Each mpstack row over the Linux baseline.
    let linux = f.rates.iter().find(|r| r.name == "linux-loopback");
    let ratios: Vec<(&'static str, f64)> = match linux {
        Some(l) => f
            .rates
            .iter()
            .filter(|r| r.name != l.name)
            .map(|r| (r.name, r.per_s() / l.per_s().max(1e-9)))
            .collect(),
        None => Vec::new(),
    };
    let size_tcb = std::mem::size_of::<net::tcp::Tcb>();
    let size_stream = std::mem::size_of::<net::TcpStream>();
    if a.json {
        for r in &f.rates {
            println!(
                "{{\"bench\":\"tcp\",\"what\":\"conns_per_s\",\"impl\":\"{}\",\"connections\":{},\"failed\":{},\"seconds\":{:.6},\"conns_per_s\":{:.1},\"max_connect_s\":{:.6},\"max_exchange_s\":{:.6},\"slow_100ms\":{},\"client_threads\":{},\"server_ports\":{}{}}}",
                r.name,
                r.conns,
                r.failed,
                r.secs,
                r.per_s(),
                r.max_connect,
                r.max_exchange,
                r.slow,
                conns::CLIENTS,
                conns::RATE_PORTS,
                r.first_error
                    .as_ref()
                    .map(|e| format!(",\"first_error\":\"{}\"", json_escape(e)))
                    .unwrap_or_default()
            );
        }
        for (name, r) in &ratios {
            println!(
                "{{\"bench\":\"tcp\",\"what\":\"conns_per_s\",\"impl\":\"{name}\",\"ratio_to_linux_loopback\":{r:.4}}}"
            );
        }
        if let Some(m) = &f.idle {
            println!(
                "{{\"bench\":\"tcp\",\"what\":\"idle_conn_bytes\",\"impl\":\"mpstack\",\"requested\":{},\"connections\":{},\"heap_bytes\":{},\"heap_bytes_per_pair\":{:.1},\"heap_bytes_per_endpoint\":{:.1},\"rss_bytes\":{},\"rss_bytes_per_pair\":{:.1},\"rss_bytes_per_endpoint\":{:.1},\"open_seconds\":{:.3},\"server_ports\":{},\"size_of_tcb\":{size_tcb},\"size_of_tcp_stream\":{size_stream}{}}}",
                m.requested,
                m.conns,
                m.heap_bytes,
                m.heap_per_pair(),
                m.heap_per_pair() / 2.0,
                m.rss_bytes,
                m.rss_per_pair(),
                m.rss_per_pair() / 2.0,
                m.open_secs,
                m.server_ports,
                m.short
                    .as_ref()
                    .map(|e| format!(",\"short\":\"{}\"", json_escape(e)))
                    .unwrap_or_default()
            );
        }
        return;
    }
    if !f.rates.is_empty() {
        println!(
            "\n{:<16} {:>10} {:>7} {:>8} {:>10} {:>12} {:>12} {:>9}",
            "connections",
            "completed",
            "failed",
            "seconds",
            "conns/s",
            "max open ms",
            "max xchg ms",
            ">=100ms"
        );
        for r in &f.rates {
            println!(
                "{:<16} {:>10} {:>7} {:>8.3} {:>10.0} {:>12.1} {:>12.1} {:>9}",
                r.name,
                r.conns,
                r.failed,
                r.secs,
                r.per_s(),
                r.max_connect * 1e3,
                r.max_exchange * 1e3,
                r.slow
            );
            if let Some(e) = &r.first_error {
                println!("{:<16} first failure: {e}", "");
            }
        }
        if !ratios.is_empty() {
            let r: Vec<String> = ratios
                .iter()
                .map(|(name, r)| format!("{name}/linux-loopback {r:.2}"))
                .collect();
            println!("ratios: {}", r.join(", "));
        }
        println!(
            "(each: open, {} bytes each way, server closes first; {} client threads, {} server ports with a thread each; mpstack: {} worker(s) per stack, memory wire; mpstack-polled: both stacks and every application in one thread, {} connections in flight; linux: 127.0.0.1)",
            conns::MSG,
            conns::CLIENTS,
            conns::RATE_PORTS,
            a.workers,
            conns::POLLED_INFLIGHT
        );
    }
    if let Some(m) = &f.idle {
        println!(
            "\nidle connections: {} of {} open ({} server ports, opened in {:.1} s)",
            m.conns, m.requested, m.server_ports, m.open_secs
        );
        if let Some(why) = &m.short {
            println!("  short of the goal: {why}");
        }
        println!(
            "  heap: {:.0} bytes per connection (both ends), {:.0} per endpoint; {} MiB in all",
            m.heap_per_pair(),
            m.heap_per_pair() / 2.0,
            m.heap_bytes / (1024 * 1024)
        );
        println!(
            "  RSS:  {:.0} bytes per connection (both ends), {:.0} per endpoint; {} MiB in all",
            m.rss_per_pair(),
            m.rss_per_pair() / 2.0,
            m.rss_bytes / (1024 * 1024)
        );
        println!(
            "  (of which inline: Tcb {size_tcb} bytes, TcpStream handle {size_stream} bytes; the rest is the connection's shared state, its byte channels and the worker's tables)"
        );
    }
}

fn host(name: &str, workers: usize, dev: dev::mem::MemDevice, addr: &str) -> Result<Stack, String> {
    sim::standalone_host(name, workers, Box::new(dev), addr)
}

/// Reads until end of stream; returns the byte count.
fn drain(mut r: impl Read) -> std::io::Result<u64> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut got = 0u64;
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            return Ok(got);
        }
        got += n as u64;
    }
}

/// Which socket calls a row's applications make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Api {
    /// `write` from the application's buffer, `read` into it: a copy each side.
    Copy,
    /// `write_with` (the sender fills the stack's buffer in place) and `read_with`
    /// (the receiver is lent the bytes where they lie).
    ZeroCopy,
}

/// What the zero-copy sender writes into the room it is lent: the byte the copying
/// rows' buffers hold.
pub(crate) fn produce(room: &mut [u8]) -> usize {
    room.fill(0x5a);
    room.len()
}

/// Reads until end of stream with `read_with`, taking every piece it is lent
/// without touching it (as [`drain`] does with what it copies); returns the count.
fn drain_lent(c: &net::TcpStream) -> std::io::Result<u64> {
    let mut got = 0u64;
    loop {
        let n = c.read_with(usize::MAX, |piece| piece.len())?;
        if n == 0 {
            return Ok(got);
        }
        got += n as u64;
    }
}

/// Writes `bytes` bytes in 256 KiB writes.
fn pump(mut w: impl Write, bytes: u64) -> std::io::Result<()> {
    let chunk = vec![0x5au8; 256 * 1024];
    let mut sent = 0u64;
    while sent < bytes {
        let n = ((bytes - sent) as usize).min(chunk.len());
        w.write_all(&chunk[..n])?;
        sent += n as u64;
    }
    Ok(())
}

/// Connects from `stack` to `to` and sends `bytes` bytes, then the end of the
/// stream; returns the connection (to keep until the receiver is done) and when
/// the writing began.
fn send_over(
    stack: &Stack,
    to: SocketAddrV4,
    bytes: u64,
    api: Api,
) -> Result<(net::TcpStream, Instant), String> {
    let c = stack
        .tcp_connect(to, Some(Duration::from_secs(10)))
        .map_err(|e| format!("connect: {e}"))?;
    c.set_write_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    match api {
        Api::Copy => pump(&c, bytes),
        Api::ZeroCopy => (|| {
            let mut sent = 0u64;
            while sent < bytes {
                let n = ((bytes - sent) as usize).min(256 * 1024);
                sent += c.write_with(n, produce)? as u64;
            }
            Ok(())
        })(),
    }
    .map_err(|e| format!("write: {e}"))?;
    c.shutdown(std::net::Shutdown::Write)
        .map_err(|e| e.to_string())?;
    Ok((c, t0))
}

/// The memory wire of the plain mpstack rows: MTU 1500, nothing offloaded.
const NO_OFFLOAD: Offloads = Offloads {
    csum: false,
    tso: 0,
};

/// One transfer of an in-process row, in this process; `None` for the rows with a
/// peer outside it.
fn in_process(im: Impl, bytes: u64, workers: usize) -> Option<Result<Measurement, String>> {
    let named = |r: Result<Measurement, String>| {
        r.map(|mut m| {
            m.name = im.name();
            m
        })
    };
    Some(match im {
        Impl::Mpstack => ours(bytes, workers, NO_OFFLOAD, Api::Copy),
        Impl::MpstackPolled => polled::transfer(bytes, NO_OFFLOAD, polled::BUFFERS, Api::Copy),
        Impl::MpstackTso => named(ours(bytes, workers, Offloads::ALL, Api::Copy)),
        Impl::MpstackPolledTso => named(polled::transfer(
            bytes,
            Offloads::ALL,
            polled::BUFFERS,
            Api::Copy,
        )),
        Impl::MpstackPolledBig => named(polled::transfer(
            bytes,
            Offloads::BIG,
            polled::BIG_BUFFERS,
            Api::Copy,
        )),
        Impl::MpstackZc => named(ours(bytes, workers, NO_OFFLOAD, Api::ZeroCopy)),
        Impl::MpstackTsoZc => named(ours(bytes, workers, Offloads::ALL, Api::ZeroCopy)),
        Impl::MpstackPolledBigZc => named(polled::transfer(
            bytes,
            Offloads::BIG,
            polled::BIG_BUFFERS,
            Api::ZeroCopy,
        )),
        Impl::Smoltcp => smol::transfer(bytes, smol::MTU, true),
        Impl::Smoltcp64k => named(smol::transfer(bytes, smol::MTU_64K, true)),
        Impl::Smoltcp64kNocsum => named(smol::transfer(bytes, smol::MTU_64K, false)),
        Impl::LinuxLoopback => kernel(bytes),
        _ => return None,
    })
}

/// Measures an in-process row in a child process (this program, `mpstack-bench`, with
/// `--child`).
fn child(im: Impl, a: &BenchArgs) -> Result<Measurement, String> {
    let exe = std::env::current_exe().map_err(|e| format!("bench: own executable: {e}"))?;
    let out = std::process::Command::new(exe)
        .args(["tcp", "--child", im.name()])
        .args(["--mbytes", &a.mbytes.to_string()])
        .args(["--workers", &a.workers.to_string()])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("bench: starting the {} measurement: {e}", im.name()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let parsed = text
        .split_once(' ')
        .and_then(|(b, s)| Some((b.trim().parse::<u64>().ok()?, s.trim().parse::<f64>().ok()?)));
    match (out.status.success(), parsed) {
        (true, Some((bytes, secs))) => Ok(Measurement {
            name: im.name(),
            bytes,
            secs,
        }),
        _ => Err(format!(
            "{}: the measuring process failed ({}): {}",
            im.name(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

fn ours(bytes: u64, workers: usize, offload: Offloads, api: Api) -> Result<Measurement, String> {
    let (da, db) = wire(WireConfig {
        num_queues: workers,
        queue_limit: 4096,
        offload,
        ..WireConfig::default()
    });
    let mut a = host("bench-a", workers, da, "198.18.0.1/24")?;
    let mut b = host("bench-b", workers, db, "198.18.0.2/24")?;
    let l = b
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 5001), 4)
        .map_err(|e| e.to_string())?;
    a.start().map_err(|e| e.to_string())?;
    b.start().map_err(|e| e.to_string())?;
    let sink = std::thread::spawn(move || -> std::io::Result<u64> {
        let (c, _) = l.accept()?;
        c.set_read_timeout(Some(Duration::from_secs(30)))?;
        match api {
            Api::Copy => drain(c),
            Api::ZeroCopy => drain_lent(&c),
        }
    });
    let (c, t0) = send_over(
        &a,
        SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 5001),
        bytes,
        api,
    )?;
    let got = sink
        .join()
        .map_err(|_| "sink panicked".to_string())?
        .map_err(|e| format!("read: {e}"))?;
    let secs = t0.elapsed().as_secs_f64();
    drop(c);
    a.stop();
    b.stop();
    if got != bytes {
        return Err(format!("mpstack delivered {got} of {bytes} bytes"));
    }
    Ok(Measurement {
        name: "mpstack",
        bytes,
        secs,
    })
}

fn kernel(bytes: u64) -> Result<Measurement, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let addr = l.local_addr().map_err(|e| e.to_string())?;
    let sink = std::thread::spawn(move || -> std::io::Result<u64> { drain(l.accept()?.0) });
    let c = std::net::TcpStream::connect(addr).map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    pump(&c, bytes).map_err(|e| e.to_string())?;
    c.shutdown(std::net::Shutdown::Write)
        .map_err(|e| e.to_string())?;
    let got = sink
        .join()
        .map_err(|_| "sink panicked".to_string())?
        .map_err(|e| e.to_string())?;
    let secs = t0.elapsed().as_secs_f64();
    if got != bytes {
        return Err(format!("kernel delivered {got} of {bytes} bytes"));
    }
    Ok(Measurement {
        name: "linux-loopback",
        bytes,
        secs,
    })
}

/// Serialises the tests that build big tables or run a stack with the one that
/// measures the heap through the process-wide counting allocator: their allocations
/// would inflate its figure, and their frees can take it below zero (CI saw 0).
#[cfg(test)]
pub(crate) fn heap_quiet() -> std::sync::MutexGuard<'static, ()> {
    static QUIET: std::sync::Mutex<()> = std::sync::Mutex::new(());
    QUIET.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn bench_args(args: &[&str]) -> Result<BenchArgs, clap::Error> {
        BenchArgs::try_parse_from(["mpstack-bench", "tcp"].iter().chain(args))
    }

    #[test]
    fn only_defaults_to_every_implementation() {
        let a = bench_args(&[]).unwrap();
        assert_eq!(
            a.only,
            [
                Impl::Mpstack,
                Impl::MpstackPolled,
                Impl::MpstackTso,
                Impl::MpstackPolledTso,
                Impl::MpstackPolledBig,
                Impl::MpstackZc,
                Impl::MpstackTsoZc,
                Impl::MpstackPolledBigZc,
                Impl::Smoltcp,
                Impl::Smoltcp64k,
                Impl::Smoltcp64kNocsum,
                Impl::LinuxLoopback,
                Impl::LinuxVeth,
                Impl::TapIn,
                Impl::TapOut,
                Impl::TapInPlain,
                Impl::TapOutPlain,
                Impl::SmoltcpTapIn,
                Impl::SmoltcpTapOut,
                Impl::Conns,
                Impl::Idle
            ]
        );
    }

    #[test]
    fn only_takes_the_connection_figures() {
        let a = bench_args(&["--only", "conns,idle", "--conns-secs", "0.5"]).unwrap();
        assert_eq!(a.only, [Impl::Conns, Impl::Idle]);
        assert_eq!(a.conns_secs, 0.5);
        assert_eq!(a.idle_conns, 100_000);
        assert!(bench_args(&["--conns-secs", "0"]).is_err());
        assert!(bench_args(&["--idle-conns", "0"]).is_err());
    }

    #[test]
    fn connection_figures_with_tiny_parameters() {
        // The idle figure counts the whole process's heap: no big-table test at once.
        let _quiet = super::heap_quiet();
        let ours = conns::rate_mpstack(0.2, 1).unwrap();
        assert_eq!(ours.failed, 0, "{:?}", ours.first_error);
        assert!(ours.conns > 0 && ours.per_s() > 0.0, "{ours:?}");
        assert!(ours.secs >= 0.2 && ours.secs < 10.0, "{ours:?}");
        let linux = conns::rate_kernel(0.2).unwrap();
        assert!(linux.conns > 0, "{linux:?}");
        let m = conns::idle(200, 1, Duration::from_secs(30), &|_| {}).unwrap();
        assert_eq!((m.requested, m.conns), (200, 200), "{m:?}");
        assert!(m.short.is_none(), "{m:?}");
        // Each end holds at least its control block; and not absurdly more.
        let per_pair = m.heap_per_pair();
        let tcb = std::mem::size_of::<net::tcp::Tcb>() as f64;
        assert!(per_pair > 2.0 * tcb && per_pair < 4e6, "{m:?}");
    }

    #[test]
    fn only_takes_a_comma_list_and_rejects_unknown_names() {
        let a = bench_args(&["--only", "smoltcp,linux-veth"]).unwrap();
        assert_eq!(a.only, [Impl::Smoltcp, Impl::LinuxVeth]);
        assert!(bench_args(&["--only", "smoltcp,lwip"]).is_err());
    }

    #[test]
    fn skip_reasons_are_valid_json_strings() {
        assert_eq!(json_escape("a \"b\"\\\n"), "a \\\"b\\\"\\\\\\u000a");
    }
}
