//! `mpstack bench router`: 64-byte frames through the real [`net::Stack`] as a router
//! — the code `mpstack run --forwarding` runs, its own worker threads, its FIB, its
//! neighbour tables and, in some rows, its ipfw — with no kernel in the way: the
//! frames come from a generator device and leave through four sink devices, all in
//! memory ([`dev::gen`]).
//!
//! The rows, each measured for `--seconds` and kept as the best of `--rounds`:
//!
//! - `devices`: the generator's queue straight into a sink's, no stack: what the
//!   devices alone cost a packet (a recycled buffer reset and the frame written into
//!   it, as a NIC's DMA would; a count). Every other row pays it too.
//! - `v4-few`, `v4-full`: IPv4 forwarding with 4 routes, and with the full BGP table
//!   (`--table`, else the one `bench lpm` finds), at 1 worker and at `--workers`, over
//!   `--flows` destinations (16,384 by default: a small part of the table).
//! - `v4-full-1m`: the full table again, over 1,048,576 destinations spread over the
//!   whole of it, no two alike, in a shuffled order ([`frames::spread4`]): every
//!   packet of a pass goes somewhere else, so the lookups find little in the cache.
//! - `v4-connected`: IPv4 to 1,024 hosts on a /16 connected to out1 (their
//!   neighbour entries static), beside the 4 routes: forwarding decided by the
//!   connected route, each packet's link address from the neighbour table.
//! - `v6-few`, `v6-full`: the same for IPv6 (64-byte frames: 40 bytes of IPv6
//!   header, UDP, 2 bytes of data).
//! - `ipfw-0`, `ipfw-1`, `ipfw-10`, `ipfw-100`: IPv4 with 4 routes and ipfw on the
//!   IPv4 points in and out (a forwarded packet passes twice), holding that many
//!   rules that do not match (`deny ip from 192.0.2.N to any`) before `allow ip from
//!   any to any`; `ipfw-0` is the allow alone.
//! - `keep-state`: IPv4 with 4 routes and `check-state` + `allow ip from any to any
//!   keep-state`, over 1,048,576 flows whose states are made before the timing:
//!   every packet is a state lookup in a table of a million, on both passes.
//! - `pool`: `v4-few` with the buffers a driver has: each sink frees what it sent to
//!   the mbuf pool and the generator allocates each frame's buffer from it
//!   ([`dev::gen::Buffers::Pool`]). Every other row (and `devices`) is *recycled*:
//!   the sinks hand their buffers straight back to the generator, which rewrites
//!   them, so no buffer is allocated or freed there.
//! - `design`, `design-1m`: `bench forward`'s split design loop over the same full
//!   table, in the same run, on `--flows` flows of its own and on `v4-full-1m`'s
//!   flows — not the product: a private loop over byte arrays that does a router's
//!   per-packet work and nothing else, so that the distance between the design and
//!   the product is on the page.
//!
//! Figures: Mpps on the wall clock (all workers); Mpps per core (packets per second
//! of the workers' own CPU time, read from `/proc/self/task/*/schedstat`, so a
//! worker that lost its core to other work is not charged for it); ns and cycles
//! (time-stamp counter) per packet on the core; the share of the run the workers had
//! a core for.
//!
//! `--plot FILE` draws two charts ([`plot`]): Mpps against workers, for which the
//! rows measured at more than one worker count are measured at every count from 1
//! to `--workers` (only when plotting: it multiplies the run time), and Mpps against
//! ipfw rules at 1 worker.
//!
//! Before timing, each stack row checks 256 forwarded frames against a radix-tree
//! oracle built from the same routes: out of the right interface's gateway (its MAC),
//! TTL or hop limit one less, IPv4 header checksum valid.

mod connected;
mod frames;
mod oracle;
mod plot;
mod report;
mod stack;
mod timing;

pub(super) use frames::{frame4, frame4_port, if_mac};
pub(super) use timing::{devices, time_stack_named, Window};

use super::forward::{self, DesignKind};
use super::lpm;
use super::progress;
use crate::BenchArgs;
use dev::gen::Buffers;
use frames::{dests4, dests6, few4, few6, flow4, frame6, spread4, table4, table6};
use frames::{Table4, Table6};
use route::{Prefix4, Prefix6};
use std::cell::OnceCell;
use std::process::ExitCode;
use std::time::Duration;

/// Bytes in a frame (without the FCS).
const FRAME: usize = 64;
/// Sink interfaces (ifindex 1..=OUT_IFACES); the generator is ifindex 0.
const OUT_IFACES: u32 = 4;
/// Gateways the routes are spread over, as in `bench forward`.
const GATEWAYS: u32 = 64;
/// Flows of the keep-state row: states in the table while it is timed.
const STATE_FLOWS: usize = 1 << 20;
/// Destinations of the v4-full-1m row, each its own, over the whole table.
const SPREAD_FLOWS: usize = 1 << 20;
/// Frames checked against the oracle before timing.
const CHECKED: usize = 256;
/// Thread names of the stack's workers (`{name}-w{id}`).
const STACK_NAME: &str = "rtr";

/// The rows' names, for `--skip` and `--case`.
pub const CASES: [&str; 17] = [
    "devices",
    "v4-few",
    "pool",
    "v4-full",
    "v4-full-1m",
    "v4-connected",
    "v6-few",
    "v6-full",
    "arc-other",
    "ipfw-0",
    "ipfw-1",
    "ipfw-10",
    "ipfw-100",
    "keep-state",
    "design",
    "design-1m",
    "2w",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    V4,
    V6,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Routes {
    Few,
    Full,
    /// The four routes and a connected /16 on out1 ([`connected::CONNECTED_NET`])
    /// whose [`connected::CONNECTED_HOSTS`] hosts the frames go to, their neighbour
    /// entries static.
    Connected,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fw {
    None,
    /// This many non-matching rules before the allow.
    Rules(usize),
    KeepState,
    /// No firewall; a hook that passes everything on the generator's (in0's)
    /// layer-2 and layer-3 out arcs, which no forwarded packet leaves by: what an
    /// interface with no feature pays while another interface has one.
    OtherIf,
}

/// The frames a row sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Load {
    /// `--flows` destinations inside the full table's prefixes, of the row's family.
    Flows,
    /// [`SPREAD_FLOWS`] destinations over the whole IPv4 table, each its own.
    Spread,
    /// The hosts of the connected subnet.
    Connected,
    /// [`STATE_FLOWS`] flows, a state each.
    States,
}

#[derive(Clone, Copy, Debug)]
struct Case {
    name: &'static str,
    family: Family,
    routes: Routes,
    fw: Fw,
    load: Load,
    buffers: Buffers,
    workers: usize,
}

/// One measured row.
#[derive(Clone, Debug)]
struct Row {
    name: String,
    what: String,
    routes: usize,
    workers: usize,
    /// Packets a second, wall clock, all workers.
    mpps: f64,
    /// Packets a second of the workers' CPU time (each worker's rate on its core,
    /// summed over the workers).
    core_mpps: f64,
    /// CPU time of a packet on its worker's core.
    ns_per_packet: f64,
    cycles_per_packet: Option<f64>,
    /// Share of the run the workers had a core for.
    cpu_share: f64,
    packets: u64,
    /// Distinct frames (flows) the row sends, over and over.
    flows: usize,
    /// How the row's devices handle buffers; `None` for the design loop.
    buffers: Option<Buffers>,
    /// Per stage of the stack (its runtime counters over the window): name, cycles
    /// a packet of that stage.
    stages: Vec<(&'static str, f64)>,
}

fn what(c: &Case, routes: usize) -> String {
    let fam = match c.family {
        Family::V4 => "IPv4",
        Family::V6 => "IPv6",
    };
    let fw = match c.fw {
        Fw::None => String::new(),
        Fw::Rules(0) => ", ipfw: allow only".into(),
        Fw::Rules(n) => format!(", ipfw: {n} rules + allow"),
        Fw::KeepState => format!(", ipfw keep-state, {STATE_FLOWS} states"),
        Fw::OtherIf => ", a hook on in0's out arcs only".into(),
    };
    let load = match c.load {
        Load::Spread => format!(", {SPREAD_FLOWS} destinations over the whole table"),
        _ => String::new(),
    };
    let pool = match c.buffers {
        Buffers::Pool => ", buffers allocated from and freed to the mbuf pool",
        Buffers::Recycled => "",
    };
    if c.routes == Routes::Connected {
        return format!(
            "{fam} forwarding to {} hosts on a connected /16 (neighbours resolved), {routes} routes{fw}",
            connected::CONNECTED_HOSTS
        );
    }
    format!("{fam} forwarding, {routes} routes{load}{fw}{pool}")
}

/// Whether row `name` runs: not left out by `--skip`, and named by `--case` when
/// that is given (a design loop comes with the stack row it is compared with:
/// `design` with `v4-full`, `design-1m` with `v4-full-1m`).
fn selected(a: &BenchArgs, name: &str) -> bool {
    let named = |n: &str| a.case.iter().any(|c| c == n);
    let partner = match name {
        "design" => "v4-full",
        "design-1m" => "v4-full-1m",
        _ => name,
    };
    !a.skip.iter().any(|s| s == name) && (a.case.is_empty() || named(name) || named(partner))
}

/// The stack rows to measure, each at 1 worker and, for those that scale, at `two`
/// (with `plotting`, at every count up to it; `None`: `--skip 2w`); those `sel`
/// leaves out left out.
fn cases(sel: &dyn Fn(&str) -> bool, plotting: bool, two: Option<usize>) -> Vec<Case> {
    let row = |name, family, routes, fw| Case {
        name,
        family,
        routes,
        fw,
        load: Load::Flows,
        buffers: Buffers::Recycled,
        workers: 1,
    };
    use Family::{V4, V6};
    use Routes::{Connected, Few, Full};
    // Each row, and whether it is measured at more than one worker count too.
    let rows = [
        (row("v4-few", V4, Few, Fw::None), true),
        (
            Case {
                buffers: Buffers::Pool,
                ..row("pool", V4, Few, Fw::None)
            },
            true,
        ),
        (row("v4-full", V4, Full, Fw::None), true),
        (
            Case {
                load: Load::Spread,
                ..row("v4-full-1m", V4, Full, Fw::None)
            },
            true,
        ),
        (
            Case {
                load: Load::Connected,
                ..row("v4-connected", V4, Connected, Fw::None)
            },
            false,
        ),
        (row("v6-few", V6, Few, Fw::None), false),
        (row("v6-full", V6, Full, Fw::None), true),
        (row("arc-other", V4, Few, Fw::OtherIf), false),
        (row("ipfw-0", V4, Few, Fw::Rules(0)), false),
        (row("ipfw-1", V4, Few, Fw::Rules(1)), false),
        (row("ipfw-10", V4, Few, Fw::Rules(10)), true),
        (row("ipfw-100", V4, Few, Fw::Rules(100)), false),
        (
            Case {
                load: Load::States,
                ..row("keep-state", V4, Few, Fw::KeepState)
            },
            false,
        ),
    ];
    let mut out = Vec::new();
    for (c, scales) in rows.into_iter().filter(|(c, _)| sel(c.name)) {
        out.push(c);
        if let (true, Some(two)) = (scales, two) {
            // With --plot, every worker count up to --workers, for the curve; without,
            // the last one only.
            let first = if plotting { 2 } else { two };
            out.extend((first..=two).map(|workers| Case { workers, ..c }));
        }
    }
    out
}

/// The rows' tables and frames, each built once; the large frame sets when a row
/// first asks for them.
struct Loads {
    full4: Table4,
    full6: Table6,
    few4: Table4,
    few6: Table6,
    conn4: Table4,
    none4: Table4,
    none6: Table6,
    frames4: Vec<Vec<u8>>,
    frames6: Vec<Vec<u8>>,
    conn: Vec<Vec<u8>>,
    states: OnceCell<Vec<Vec<u8>>>,
    /// v4-full-1m's destinations and their frames.
    spread: OnceCell<(Vec<u32>, Vec<Vec<u8>>)>,
}

impl Loads {
    fn new(raw4: &[(Prefix4, u32)], raw6: &[(Prefix6, u32)], flows: usize) -> Loads {
        let full4 = table4(raw4);
        let full6 = table6(raw6);
        let d4 = dests4(&full4.routes, flows, 0x666c_6f77);
        let d6 = dests6(&full6.routes, flows, 0x666c_6f77);
        let (conn4, conn) = connected::table_and_frames(flows);
        Loads {
            frames4: d4.iter().enumerate().map(|(i, &d)| frame4(d, i)).collect(),
            frames6: d6.iter().enumerate().map(|(i, &d)| frame6(d, i)).collect(),
            full4,
            full6,
            few4: table4(&few4()),
            few6: table6(&few6()),
            conn4,
            none4: Table4::default(),
            none6: Table6::default(),
            conn,
            states: OnceCell::new(),
            spread: OnceCell::new(),
        }
    }

    /// The routes of row `c`, IPv4 and IPv6 (one of them empty).
    fn tables(&self, c: &Case) -> (&Table4, &Table6) {
        match (c.family, c.routes) {
            (Family::V4, Routes::Few) => (&self.few4, &self.none6),
            (Family::V4, Routes::Full) => (&self.full4, &self.none6),
            (Family::V4, Routes::Connected) => (&self.conn4, &self.none6),
            (Family::V6, Routes::Few | Routes::Connected) => (&self.none4, &self.few6),
            (Family::V6, Routes::Full) => (&self.none4, &self.full6),
        }
    }

    /// The frames of row `c`.
    fn frames(&self, a: &BenchArgs, c: &Case) -> &[Vec<u8>] {
        match (c.load, c.family) {
            (Load::Flows, Family::V4) => &self.frames4,
            (Load::Flows, Family::V6) => &self.frames6,
            (Load::Connected, _) => &self.conn,
            (Load::Spread, _) => &self.spread(a).1,
            (Load::States, _) => self.states.get_or_init(|| {
                progress(a, &format!("router: {STATE_FLOWS} flows for keep-state"));
                let d = dests4(&self.full4.routes, STATE_FLOWS, 0x7374_6174);
                d.iter().enumerate().map(|(i, &d)| frame4(d, i)).collect()
            }),
        }
    }

    /// v4-full-1m's destinations and frames.
    fn spread(&self, a: &BenchArgs) -> &(Vec<u32>, Vec<Vec<u8>>) {
        self.spread.get_or_init(|| {
            progress(
                a,
                &format!("router: {SPREAD_FLOWS} destinations over the whole table for v4-full-1m"),
            );
            let d = spread4(&self.full4.routes, SPREAD_FLOWS, 0x7370_7264);
            let f = d.iter().enumerate().map(|(i, &d)| frame4(d, i)).collect();
            (d, f)
        })
    }
}

/// `bench forward`'s split design loop over the full IPv4 table (`raw4`), at 1 and
/// `two` workers, as rows named `name`: on the flows of `dests` (those of v4-full-1m,
/// each in a packet buffer of its own, the same frames `frame4` makes) or, without,
/// on `--flows` of its own.
fn design(
    a: &BenchArgs,
    raw4: &[(Prefix4, u32)],
    name: &'static str,
    dests: Option<&[u32]>,
    (two, routes): (usize, usize),
) -> Result<Vec<Row>, String> {
    let given: Option<Vec<forward::Flow>> =
        dests.map(|d| d.iter().enumerate().map(|(i, &d)| flow4(d, i)).collect());
    let flows = given.as_ref().map_or(a.flows as usize, Vec::len);
    let (packets, what) = match given {
        Some(_) => (
            flows,
            format!("bench forward's split loop on v4-full-1m's {flows} flows: a private loop, not the product"),
        ),
        None => (
            a.packets as usize,
            format!("bench forward's split loop over the full IPv4 table, {flows} flows: a private loop, not the product"),
        ),
    };
    let p = forward::Params {
        flows,
        packets,
        secs: a.seconds,
        rounds: a.rounds,
        workers: two,
        designs: &[DesignKind::Split],
        nexthops: GATEWAYS,
        flow_mode: route::FlowMode::Destination,
    };
    let say = |m: &str| progress(a, &format!("router: {name}: {m}"));
    let (r, _, _) = forward::measure(raw4, p, given.as_deref(), say)?;
    Ok(r.into_iter()
        .map(|r| Row {
            name: name.into(),
            what: what.clone(),
            routes,
            workers: r.workers,
            mpps: r.mpps,
            core_mpps: r.core_mpps,
            ns_per_packet: r.ns_per_packet,
            cycles_per_packet: Some(r.ticks_per_packet),
            cpu_share: r.cpu_share,
            packets: r.packets,
            flows,
            buffers: None,
            stages: Vec::new(),
        })
        .collect())
}

pub fn main(a: &BenchArgs) -> Result<ExitCode, String> {
    for (flag, list) in [("--skip", &a.skip), ("--case", &a.case)] {
        if let Some(s) = list.iter().find(|s| !CASES.contains(&s.as_str())) {
            return Err(format!(
                "bench router: {flag}: unknown '{s}' (known: {})",
                CASES.join(", ")
            ));
        }
    }
    let sel = |n: &str| selected(a, n);
    let two = if a.workers > 1 { a.workers as usize } else { 2 };
    let twos = (!a.skip.iter().any(|s| s == "2w")).then_some(two);
    let hz = dev::cpu::tsc_hz(Duration::from_millis(50));
    let (raw4, raw6, source) = lpm::load_tables(a, "router")?;
    progress(a, "router: building the oracles");
    let loads = Loads::new(&raw4, &raw6, a.flows as usize);

    let mut rows: Vec<Row> = Vec::new();
    if sel("devices") {
        for w in std::iter::once(1).chain(twos) {
            progress(a, &format!("router: devices only, {w} worker(s)"));
            let win = devices(w, a.seconds, a.rounds, &loads.frames4);
            let what = "generator -> sink, no stack".into();
            rows.push(Row {
                flows: loads.frames4.len(),
                ..timing::row_of("devices", what, 0, &win, hz)
            });
        }
    }
    for c in cases(&sel, a.plot.is_some(), twos) {
        let frames = loads.frames(a, &c);
        rows.push(stack::measure(a, &c, frames, loads.tables(&c), hz)?);
    }
    let routes = loads.full4.routes.len();
    if sel("design") {
        rows.extend(design(a, &raw4, "design", None, (two, routes))?);
    }
    if sel("design-1m") {
        let d = &loads.spread(a).0;
        rows.extend(design(a, &raw4, "design-1m", Some(d), (two, routes))?);
    }

    if let Some(path) = &a.plot {
        plot::plot(path, &rows, two)?;
    }
    if a.json {
        let table = match &source {
            lpm::Source::File(p) => p.clone(),
            lpm::Source::Synthetic(_) => "synthetic".into(),
        };
        report::json(&rows, &table);
        return Ok(ExitCode::SUCCESS);
    }
    let heading = report::Heading {
        source: &source,
        full: (routes, loads.full6.routes.len()),
        flows: a.flows as usize,
        secs: a.seconds,
        rounds: a.rounds,
        hz,
    };
    report::table(&heading, &rows, two);
    if let Some(p) = &a.plot {
        let (w, r) = plot::plot_paths(p);
        println!("plots: {} and {}", w.display(), r.display());
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::frames::{dests4, few4, frame4, table4};
    use super::oracle::check;
    use super::stack::{firewall, router};
    use super::Fw;
    use dev::gen::PktGen;
    use route::Radix;
    use std::time::Duration;

    #[test]
    fn a_router_forwards_what_the_oracle_says() {
        let _quiet = crate::bench::heap_quiet();
        let t = table4(&few4());
        let d = dests4(&t.routes, 64, 2);
        let frames: Vec<Vec<u8>> = d.iter().enumerate().map(|(i, &d)| frame4(d, i)).collect();
        let gen = PktGen::new(1, 1500);
        let mut stack = router(&gen, &frames, 1, &t.routes, &[]).unwrap();
        gen.capture(64);
        let mut now = dev::Instant::ZERO;
        for _ in 0..4 {
            stack.poll(now);
            now += Duration::from_millis(1);
        }
        let cap = gen.captured();
        assert_eq!(check(&cap, &t.oracle, &Radix::new()), Ok(64));
    }

    /// Not a check: a harness for instruction counts of the forwarding path under
    /// callgrind (no hardware counters on these machines): one thread polls a
    /// router of `ROUTER_POLLS` (default 2000) bursts of 64 frames, with ipfw and
    /// `ROUTER_FW` non-matching rules before an allow when that is set.
    /// `valgrind --tool=callgrind target/release/deps/mpstack-… --ignored
    /// --exact bench::router::tests::callgrind_forward`.
    #[test]
    #[ignore]
    fn callgrind_forward() {
        let _quiet = crate::bench::heap_quiet();
        let polls: usize = std::env::var("ROUTER_POLLS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2000);
        let t = table4(&few4());
        let d = dests4(&t.routes, 1024, 2);
        let frames: Vec<Vec<u8>> = d.iter().enumerate().map(|(i, &d)| frame4(d, i)).collect();
        let gen = PktGen::new(1, 1500);
        let mut stack = router(&gen, &frames, 1, &t.routes, &[]).unwrap();
        // ROUTER_FW=N: ipfw with N non-matching rules before the allow;
        // ROUTER_FW=ks: keep-state.
        match std::env::var("ROUTER_FW").ok().as_deref() {
            Some("ks") => firewall(&stack, Fw::KeepState, 1).unwrap(),
            Some(n) => {
                if let Ok(n) = n.parse() {
                    firewall(&stack, Fw::Rules(n), 1).unwrap();
                }
            }
            None => {}
        }
        let mut now = dev::Instant::ZERO;
        for _ in 0..polls {
            stack.poll(now);
            now += Duration::from_micros(10);
        }
        println!("{:?}", gen.counts());
        let mut s = String::new();
        stack.runtime().write_table(&mut s).unwrap();
        println!("{s}");
    }
}
