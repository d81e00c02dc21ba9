//! `mpstack bench bridge`: 64-byte frames through the real [`net::Stack`] as a
//! learning bridge — the code `mpstack run --bridge` runs, its own worker threads,
//! its lock-free address table — with no kernel in the way: the frames come from a
//! generator device (member `in0`) and leave through four sink devices (members
//! `out1`..`out4`), all in memory ([`dev::gen`]), as `bench router` does.
//!
//! The rows, each measured for `--seconds` and kept as the best of `--rounds`:
//!
//! - `devices`: the generator's queue straight into a sink's, no stack: what the
//!   devices alone cost a frame. Every other row pays it too.
//! - `learned-1k`, `learned-1m`: known unicast: every destination is in the table
//!   (1,024 or 1,048,576 learned addresses spread over the four outputs; the
//!   frames' 1,024 sources learned on `in0`), each frame forwarded to one member.
//!   The 1k row cycles over `--flows` frames; the 1M row over one frame per
//!   address, so every lookup lands somewhere else in a 32 MiB table.
//! - `flood`: unknown unicast: no destination is in the table, each frame is sent
//!   to all four outputs (the copies share the frame's buffer). Its Mpps counts
//!   frames in; four times as many leave.
//! - `learned-1k-pool`, `flood-pool`: `learned-1k` and `flood` with the buffers a
//!   driver has ([`dev::gen::Buffers::Pool`]): each sink frees what it sent to the
//!   mbuf pool and the generator allocates each frame's record and cluster from it.
//!   The rows above are *recycled*: the sinks hand their buffers straight back to
//!   the generator, which rewrites them. That favours known unicast: a flooded
//!   frame's copies come back still sharing one cluster, so the generator finds
//!   three of every four shared and allocates a new cluster for them, which
//!   `flood`'s rx stage pays and `learned-1k`'s does not; in the pool rows both
//!   pay one record and one cluster a frame in, and flooding its copies' records
//!   and references on top, as with a real NIC.
//!
//! Figures as in `bench router`: Mpps on the wall clock, Mpps per core (the
//! workers' CPU time), ns and cycles a frame on the core, the core share.
//! Before timing, each row checks a sample of what the sinks took: every frame
//! leaves unchanged, and nothing known was flooded.

use super::progress;
use super::router::{devices, frame4, time_stack_named, Window};
use crate::BenchArgs;
use dev::gen::{Buffers, PktGen};
use net::iface::IfConfig;
use net::link::bridge::{BridgeParams, Learn, MemberFlags};
use net::{Stack, StackConfig};
use std::collections::HashSet;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use wire::EthernetAddress;

/// Sink members (out1..=OUTS).
const OUTS: u16 = 4;
/// Source addresses of the generated frames.
const SOURCES: u32 = 1024;
/// Thread names of the stack's workers.
const STACK_NAME: &str = "brg";
/// Frames checked before timing.
const CHECKED: usize = 256;

/// The rows' names, for `--skip`.
pub const CASES: [&str; 7] = [
    "devices",
    "learned-1k",
    "learned-1m",
    "flood",
    "learned-1k-pool",
    "flood-pool",
    "2w",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Known unicast over a table of this many addresses.
    Learned(u32),
    /// Unknown unicast, flooded.
    Flood,
}

fn dst_mac(k: u32) -> EthernetAddress {
    let b = k.to_be_bytes();
    EthernetAddress([0x02, 0xd0, b[0], b[1], b[2], b[3]])
}

fn src_mac(k: u32) -> EthernetAddress {
    let b = k.to_be_bytes();
    EthernetAddress([0x02, 0x5c, b[0], b[1], b[2], b[3]])
}

/// The member (out1..out4) destination `k` is learned on.
fn out_of(k: u32) -> u16 {
    1 + (k % u32::from(OUTS)) as u16
}

/// A 64-byte frame (Ethernet, IPv4, UDP) from source `s` to destination `d`; the
/// IP addresses and ports vary with `i` so that RSS spreads the frames.
fn frame(d: EthernetAddress, s: EthernetAddress, i: usize) -> Vec<u8> {
    let mut f = frame4(
        u32::from(std::net::Ipv4Addr::new(198, 18, 9, 1)) + (i % 200) as u32,
        i,
    );
    f[..6].copy_from_slice(&d.0);
    f[6..12].copy_from_slice(&s.0);
    f
}

/// The frames of a row: `n` frames whose destinations cycle over `table` (or are
/// unknown when flooding).
fn frames(kind: Kind, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let s = src_mac(i as u32 % SOURCES);
            let d = match kind {
                Kind::Learned(t) => dst_mac((i as u32).wrapping_mul(2_654_435_761) % t),
                // Never learned: out of the table's range.
                Kind::Flood => dst_mac(0x8000_0000 | i as u32),
            };
            frame(d, s, i)
        })
        .collect()
}

/// A bridge of the generator and four sinks, its table holding `table` learned
/// destinations and the sources.
fn bridge(gen: &PktGen, frames: &[Vec<u8>], workers: usize, table: u32) -> Result<Stack, String> {
    let mut stack = Stack::new(StackConfig {
        name: STACK_NAME.into(),
        workers,
        isn_secret: Some(0x6272_6467),
        dad_transmits: 0,
        ..StackConfig::default()
    });
    let err = |e: net::StackError| format!("bench bridge: {e}");
    let mut ifs = Vec::new();
    for i in 0..=OUTS {
        let ic = IfConfig {
            name: Some(if i == 0 {
                "in0".into()
            } else {
                format!("out{i}")
            }),
            ..IfConfig::default()
        };
        let dev: Box<dyn dev::Device> = if i == 0 {
            Box::new(gen.generator("gen", frames))
        } else {
            Box::new(gen.sink(&format!("sink{i}")))
        };
        ifs.push(stack.add_interface(dev, ic).map_err(err)?);
    }
    let p = BridgeParams {
        max_addrs: (table + SOURCES) as usize * 2,
        ..BridgeParams::default()
    };
    let b = stack.add_bridge("bridge0", p).map_err(err)?;
    for &i in &ifs {
        stack
            .bridge_add_member(b, i, MemberFlags::default())
            .map_err(err)?;
    }
    let bc = stack.bridge(b).map_err(err)?;
    let learn = |v: &[Learn]| bc.br.rt.learn(v, 0);
    let mut batch = Vec::with_capacity(4096);
    let all = (0..table)
        .map(|k| (dst_mac(k), ifs[out_of(k) as usize]))
        .chain((0..SOURCES).map(|k| (src_mac(k), ifs[0])));
    for (mac, on) in all {
        batch.push(Learn {
            vlan: 0,
            mac,
            member: on.0,
            sticky: false,
        });
        if batch.len() == batch.capacity() {
            learn(&batch);
            batch.clear();
        }
    }
    learn(&batch);
    let held = bc.br.rt.stats().entries;
    if held < (table + SOURCES) as usize {
        return Err(format!(
            "bench bridge: the table holds {held} of {} addresses",
            table + SOURCES
        ));
    }
    Ok(stack)
}

struct Row {
    name: &'static str,
    workers: usize,
    buffers: Buffers,
    what: String,
    mpps: f64,
    core_mpps: f64,
    ns: f64,
    cycles: Option<f64>,
    share: f64,
    frames_in: u64,
    stages: Vec<(&'static str, f64)>,
}

/// A row from a window whose packets were `copies` frames out for each in.
fn row_of(
    (name, buffers): (&'static str, Buffers),
    what: String,
    w: &Window,
    copies: u64,
    hz: Option<f64>,
) -> Row {
    let frames: Vec<u64> = w.packets.iter().map(|p| p / copies.max(1)).collect();
    let total: u64 = frames.iter().sum();
    let cpu: f64 = w.cpu.iter().map(Duration::as_secs_f64).sum();
    let ns = cpu * 1e9 / total.max(1) as f64;
    Row {
        name,
        workers: frames.len().max(1),
        buffers,
        what,
        mpps: total as f64 / w.secs.max(1e-9) / 1e6,
        core_mpps: frames
            .iter()
            .zip(&w.cpu)
            .map(|(&p, c)| p as f64 / c.as_secs_f64().max(1e-9) / 1e6)
            .sum(),
        ns,
        cycles: hz.map(|h| ns * h / 1e9),
        share: cpu / (w.secs * frames.len().max(1) as f64).max(1e-9),
        frames_in: total,
        stages: w.runtime.iter().flat_map(stage_cycles).collect(),
    }
}

/// Cycles a frame in of each stage of worker runtime `r` that had packets: its
/// cycles over the frames the worker received (its rx stage's packets), so that a
/// stage after a flood, which counts each copy, is charged per frame like the rx
/// stage before it.
fn stage_cycles(r: &net::runtime::Runtime) -> impl Iterator<Item = (&'static str, f64)> + '_ {
    let rx = r.get(net::runtime::Stage::Rx).packets.max(1) as f64;
    r.iter()
        .filter(|(_, s)| s.packets > 0)
        .map(move |(st, s)| (st.name(), s.cycles as f64 / rx))
}

/// What the sinks took is what was generated, byte for byte.
fn check(captured: &[Vec<u8>], sent: &HashSet<&[u8]>) -> Result<usize, String> {
    if captured.is_empty() {
        return Err("no frame came out of the bridge".into());
    }
    for f in captured {
        if !sent.contains(&f[..]) {
            return Err(format!(
                "a frame came out changed or from nowhere: {:02x?}",
                &f[..f.len().min(20)]
            ));
        }
    }
    Ok(captured.len())
}

/// A stack row to measure.
#[derive(Clone, Copy, Debug)]
struct Case {
    name: &'static str,
    kind: Kind,
    buffers: Buffers,
    workers: usize,
}

/// The stack rows to measure, without the skipped ones.
fn cases(skip: &dyn Fn(&str) -> bool, two: usize) -> Vec<Case> {
    use Buffers::{Pool, Recycled};
    let mut cases = Vec::new();
    for (name, kind, buffers, both) in [
        ("learned-1k", Kind::Learned(1024), Recycled, true),
        ("learned-1m", Kind::Learned(1 << 20), Recycled, true),
        ("flood", Kind::Flood, Recycled, false),
        ("learned-1k-pool", Kind::Learned(1024), Pool, false),
        ("flood-pool", Kind::Flood, Pool, false),
    ] {
        if skip(name) {
            continue;
        }
        let c = Case {
            name,
            kind,
            buffers,
            workers: 1,
        };
        cases.push(c);
        if both && !skip("2w") {
            cases.push(Case { workers: two, ..c });
        }
    }
    cases
}

/// The `devices` rows: generator -> sink, no stack, at 1 worker and at `two`.
fn device_rows(
    a: &BenchArgs,
    skip: &dyn Fn(&str) -> bool,
    two: usize,
    hz: Option<f64>,
) -> Vec<Row> {
    let mut rows = Vec::new();
    if skip("devices") {
        return rows;
    }
    let f = frames(Kind::Learned(1024), a.flows as usize);
    for w in [1, two] {
        if w > 1 && skip("2w") {
            continue;
        }
        progress(a, &format!("bridge: devices only, {w} worker(s)"));
        let win = devices(w, a.seconds, a.rounds, &f);
        rows.push(row_of(
            ("devices", Buffers::Recycled),
            "generator -> sink, no stack".into(),
            &win,
            1,
            hz,
        ));
    }
    rows
}

/// Checks a sample of what the running bridge `stack` forwards; the number of frames
/// checked. Stops the stack on a failure.
fn check_running(
    stack: &mut Stack,
    gen: &PktGen,
    fr: &[Vec<u8>],
    name: &str,
    kind: Kind,
) -> Result<usize, String> {
    std::thread::sleep(Duration::from_millis(200));
    gen.capture(CHECKED);
    let t0 = Instant::now();
    while gen.captured().len() < CHECKED && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let sent: HashSet<&[u8]> = fr.iter().map(|f| &f[..]).collect();
    let checked = check(&gen.captured(), &sent);
    let st = stack.stats();
    match checked {
        Ok(n) if matches!(kind, Kind::Learned(_)) && st.bridge.flooded > 0 => {
            stack.stop();
            Err(format!(
                "bench bridge: {name}: {} of {n} frames flooded though every destination is known",
                st.bridge.flooded
            ))
        }
        Ok(n) => Ok(n),
        Err(e) => {
            stack.stop();
            let mut counters = String::new();
            let _ = stack.stats().write_netstat(&mut counters, false);
            Err(format!("bench bridge: {name}: {e}; counters:\n{counters}"))
        }
    }
}

/// One stack row: builds the bridge, checks it, times it.
fn stack_row(a: &BenchArgs, c: Case, hz: Option<f64>) -> Result<Row, String> {
    let Case {
        name,
        kind,
        buffers,
        workers,
    } = c;
    let (secs, rounds, flows) = (a.seconds, a.rounds, a.flows as usize);
    let (table, n, copies) = match kind {
        Kind::Learned(t) if t >= 1 << 20 => (t, t as usize, 1),
        Kind::Learned(t) => (t, flows, 1),
        Kind::Flood => (1024, flows, u64::from(OUTS)),
    };
    progress(
        a,
        &format!("bridge: {name}, {workers} worker(s): building the bridge ({table} addresses)"),
    );
    let fr = frames(kind, n);
    let gen = PktGen::with_buffers(workers, 1500, buffers);
    let mut stack = bridge(&gen, &fr, workers, table)?;
    stack
        .start()
        .map_err(|e| format!("bench bridge: starting the workers: {e}"))?;
    let checked = check_running(&mut stack, &gen, &fr, name, kind)?;
    progress(
        a,
        &format!(
            "bridge: {name}, {workers} worker(s): {checked} frames checked; {rounds} x {secs} s"
        ),
    );
    let win = time_stack_named(&stack, STACK_NAME, &gen, workers, secs, rounds);
    stack.stop();
    let what = match kind {
        Kind::Learned(t) => format!("known unicast, {t} learned addresses"),
        Kind::Flood => format!("unknown unicast, flooded to {OUTS} members"),
    };
    Ok(row_of((name, buffers), what, &win, copies, hz))
}

pub fn main(a: &BenchArgs) -> Result<ExitCode, String> {
    if let Some(s) = a.skip.iter().find(|s| !CASES.contains(&s.as_str())) {
        return Err(format!(
            "bench bridge: --skip: unknown '{s}' (known: {})",
            CASES.join(", ")
        ));
    }
    let skip = |n: &str| a.skip.iter().any(|s| s == n);
    let two = if a.workers > 1 { a.workers as usize } else { 2 };
    let hz = dev::cpu::tsc_hz(Duration::from_millis(50));
    let cases = cases(&skip, two);
    let mut rows = device_rows(a, &skip, two, hz);
    for case in cases {
        rows.push(stack_row(a, case, hz)?);
    }
    if a.json {
        print_json(&rows);
    } else {
        print_table(a, &rows, hz);
        print_summary(&rows, two);
    }
    Ok(ExitCode::SUCCESS)
}

/// A row's buffers as the output names them.
fn buffers(b: Buffers) -> &'static str {
    match b {
        Buffers::Recycled => "recycled",
        Buffers::Pool => "pool",
    }
}

/// The rows as JSON, one object a line.
fn print_json(rows: &[Row]) {
    for r in rows {
        println!(
            "{{\"bench\":\"bridge\",\"case\":\"{}\",\"buffers\":\"{}\",\"what\":\"{}\",\"workers\":{},\"mpps\":{:.3},\"mpps_per_core\":{:.3},\"ns_per_packet\":{:.2},\"cycles_per_packet\":{},\"core_share\":{:.3},\"frames_in\":{},\"stage_cycles_per_packet\":{{{}}}}}",
            r.name,
            buffers(r.buffers),
            r.what,
            r.workers,
            r.mpps,
            r.core_mpps / r.workers as f64,
            r.ns,
            r.cycles.map_or("null".into(), |c| format!("{c:.1}")),
            r.share,
            r.frames_in,
            r.stages
                .iter()
                .map(|(n, c)| format!("\"{n}\":{c:.1}"))
                .collect::<Vec<_>>()
                .join(",")
        );
    }
}

/// The heading, the table of rows and the stages of the 1-worker rows.
fn print_table(a: &BenchArgs, rows: &[Row], hz: Option<f64>) {
    let (secs, rounds) = (a.seconds, a.rounds);
    println!(
        "64-byte frames through the real Stack as a bridge (generator -> in0 -> bridge0 -> out1..out{OUTS} -> sinks, in memory); best of {rounds} windows of {secs} s"
    );
    println!("Mpps counts frames in (the flood rows send {OUTS} out for each)");
    println!(
        "buffers: recycled = each sink hands its buffers straight back to the generator, which rewrites them (a flooded frame's copies come back sharing one cluster: the generator allocates a new one for three of each four); pool = each sink frees its buffers to the mbuf pool and the generator allocates from it, as a driver does"
    );
    if let Some(h) = hz {
        println!("cycles: time-stamp counter ticks ({:.3} GHz)", h / 1e9);
    }
    println!();
    println!(
        "{:<15} {:>2} {:>8} {:>10} {:>8} {:>8} {:>6} {:>8}  what",
        "row", "w", "Mpps", "Mpps/core", "ns/pkt", "cyc/pkt", "core%", "buffers"
    );
    for r in rows {
        println!(
            "{:<15} {:>2} {:>8.2} {:>10.2} {:>8.1} {:>8} {:>6.0} {:>8}  {}",
            r.name,
            r.workers,
            r.mpps,
            r.core_mpps / r.workers as f64,
            r.ns,
            r.cycles.map_or("-".into(), |c| format!("{c:.0}")),
            r.share * 100.0,
            buffers(r.buffers),
            r.what
        );
    }
    println!();
    crate::bench::stages::print_stages(
        "cycles a frame in each stage of the stack (its runtime counters), 1 worker:",
        rows.iter().map(|r| (r.name, r.workers, &r.stages[..])),
    );
}

/// Scaling, flooding against known unicast, the stack against the devices.
fn print_summary(rows: &[Row], two: usize) {
    let find = |n: &str, w: usize| rows.iter().find(|r| r.name == n && r.workers == w);
    for n in ["learned-1k", "learned-1m"] {
        if let (Some(one), Some(many)) = (find(n, 1), find(n, two)) {
            println!(
                "{n} scaling, 1 -> {two} workers: {:.2}x wall, {:.2}x on core",
                many.mpps / one.mpps.max(1e-9),
                many.core_mpps / one.core_mpps.max(1e-9)
            );
        }
    }
    for (f, l, mode) in [
        ("flood", "learned-1k", "recycled"),
        ("flood-pool", "learned-1k-pool", "pool"),
    ] {
        if let (Some(f), Some(l)) = (find(f, 1), find(l, 1)) {
            println!(
                "flooding, 1 worker, {mode} buffers: {:.2} Mpps in ({:.2} out), {:.2}x the rate of known unicast (flood/learned-1k); {:.1} ns a frame against {:.1}",
                f.mpps,
                f.mpps * f64::from(OUTS),
                f.core_mpps / l.core_mpps.max(1e-9),
                f.ns,
                l.ns
            );
        }
    }
    if let (Some(l), Some(d)) = (find("learned-1k", 1), find("devices", 1)) {
        println!(
            "learned-1k, 1 worker: {:.1} ns a frame on the core, of which the devices {:.1}",
            l.ns, d.ns
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bridge_forwards_each_frame_unchanged_to_its_destinations_member() {
        let _quiet = crate::bench::heap_quiet();
        let fr = frames(Kind::Learned(64), 256);
        let gen = PktGen::new(1, 1500);
        let mut stack = bridge(&gen, &fr, 1, 64).unwrap();
        gen.capture(256);
        let mut now = dev::Instant::ZERO;
        for _ in 0..8 {
            stack.poll(now);
            now += Duration::from_millis(1);
        }
        let sent: HashSet<&[u8]> = fr.iter().map(|f| &f[..]).collect();
        assert_eq!(check(&gen.captured(), &sent), Ok(256));
        let st = stack.stats();
        assert_eq!(st.bridge.flooded, 0);
        assert!(st.bridge.forwarded >= 256);
        assert_eq!(st.total_drops(), 0);
    }
}
