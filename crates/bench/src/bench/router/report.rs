//! `bench router`'s output: one JSON object a row (`--json`), or the table, the
//! cycles per stage and the comparisons made in the same run.

use super::connected;
use super::{Row, GATEWAYS, OUT_IFACES, SPREAD_FLOWS};
use crate::bench::{json_escape, lpm};
use dev::gen::Buffers;

/// What the heading says about the run.
pub(super) struct Heading<'a> {
    pub source: &'a lpm::Source,
    /// Routes of the full tables, IPv4 and IPv6.
    pub full: (usize, usize),
    pub flows: usize,
    pub secs: f64,
    pub rounds: u32,
    pub hz: Option<f64>,
}

/// A row's buffers as the output names them; `None` for the design loop, which
/// has byte arrays, not buffers.
fn buffers(b: Option<Buffers>) -> &'static str {
    match b {
        Some(Buffers::Recycled) => "recycled",
        Some(Buffers::Pool) => "pool",
        None => "-",
    }
}

/// The rows as JSON, one object a line; `table` is the full table's file.
pub(super) fn json(rows: &[Row], table: &str) {
    let table = json_escape(table);
    for r in rows {
        let common = format!(
            "\"bench\":\"router\",\"case\":\"{}\",\"what\":\"{}\",\"routes\":{},\"workers\":{},\"flows\":{},\"mpps\":{:.3},\"mpps_per_core\":{:.3},\"ns_per_packet\":{:.2}",
            r.name,
            json_escape(&r.what),
            r.routes,
            r.workers,
            r.flows,
            r.mpps,
            r.core_mpps / r.workers as f64,
            r.ns_per_packet,
        );
        let cycles = r
            .cycles_per_packet
            .map_or("null".into(), |c| format!("{c:.1}"));
        let tail = format!(
            "\"core_share\":{:.3},\"packets\":{},\"table\":\"{table}\"",
            r.cpu_share, r.packets
        );
        if r.buffers.is_none() {
            println!("{{{common},\"cycles_per_packet\":{cycles},{tail}}}");
            continue;
        }
        let stages: Vec<String> = r
            .stages
            .iter()
            .map(|(n, c)| format!("\"{n}\":{c:.1}"))
            .collect();
        println!(
            "{{{common},\"cycles_per_packet\":{cycles},\"buffers\":\"{}\",{tail},\"stage_cycles_per_packet\":{{{}}}}}",
            buffers(r.buffers),
            stages.join(",")
        );
    }
}

/// The human table: the heading, a line a row, the cycles a stage, the comparisons.
pub(super) fn table(h: &Heading<'_>, rows: &[Row], two: usize) {
    let (secs, rounds) = (h.secs, h.rounds);
    println!(
        "64-byte frames through the real Stack (generator -> in0 -> router -> out1..out4 -> sinks, in memory); best of {rounds} windows of {secs} s"
    );
    match h.source {
        lpm::Source::File(p) => println!(
            "full table: {} ({} IPv4, {} IPv6 prefixes)",
            p, h.full.0, h.full.1
        ),
        lpm::Source::Synthetic(why) => println!("full table: SYNTHETIC ({why})"),
    }
    println!(
        "{} flows (destinations inside announced prefixes, spread over the workers by RSS; v4-full-1m: {SPREAD_FLOWS}, each its own, over the whole table); {GATEWAYS} gateways on {OUT_IFACES} interfaces",
        h.flows
    );
    println!(
        "buffers: recycled = each sink hands its buffers straight back to the generator, which rewrites them (no allocation); pool = each sink frees its buffers to the mbuf pool and the generator allocates from it, as a driver does"
    );
    if let Some(hz) = h.hz {
        println!("cycles: time-stamp counter ticks ({:.3} GHz)", hz / 1e9);
    }
    println!();
    println!(
        "{:<12} {:>2} {:>8} {:>10} {:>8} {:>8} {:>6} {:>8}  what",
        "row", "w", "Mpps", "Mpps/core", "ns/pkt", "cyc/pkt", "core%", "buffers"
    );
    for r in rows {
        println!(
            "{:<12} {:>2} {:>8.2} {:>10.2} {:>8.1} {:>8} {:>6.0} {:>8}  {}",
            r.name,
            r.workers,
            r.mpps,
            r.core_mpps / r.workers as f64,
            r.ns_per_packet,
            r.cycles_per_packet
                .map_or("-".into(), |c| format!("{c:.0}")),
            r.cpu_share * 100.0,
            buffers(r.buffers),
            r.what
        );
    }
    println!();
    crate::bench::stages::print_stages(
        "cycles a packet in each stage of the stack (its runtime counters, VPP's `show runtime`), 1 worker:",
        rows.iter().map(|r| (r.name.as_str(), r.workers, &r.stages[..])),
    );
    comparisons(rows, two);
}

/// The ratios under the table, each between two rows of this run.
fn comparisons(rows: &[Row], two: usize) {
    let find = |n: &str, w: usize| rows.iter().find(|r| r.name == n && r.workers == w);
    let per_core = |a: &Row, b: &Row| a.core_mpps / b.core_mpps.max(1e-9);
    if let (Some(one), Some(many)) = (find("v4-full", 1), find("v4-full", two)) {
        println!(
            "v4-full scaling, 1 -> {two} workers: {:.2}x wall, {:.2}x on core",
            many.mpps / one.mpps.max(1e-9),
            per_core(many, one)
        );
    }
    // design makes flows of its own, as many as v4-full's; design-1m runs on
    // v4-full-1m's.
    let pairs = [
        ("v4-full", "design", "as many flows, the loop's its own"),
        ("v4-full-1m", "design-1m", "the same flows"),
    ];
    for (row, design, flows) in pairs {
        if let (Some(st), Some(d)) = (find(row, 1), find(design, 1)) {
            println!(
                "{row}, 1 worker: the product runs at {:.2}x the design loop's per-core rate ({} destinations, {flows}: {:.1} vs {:.1} ns a packet)",
                per_core(st, d),
                st.flows,
                st.ns_per_packet,
                d.ns_per_packet
            );
        }
    }
    if let (Some(m), Some(f)) = (find("v4-full-1m", 1), find("v4-full", 1)) {
        println!(
            "v4-full-1m, 1 worker: {:.2}x v4-full per core ({} destinations, each its own, against {}: {:.1} vs {:.1} ns a packet)",
            per_core(m, f),
            m.flows,
            f.flows,
            m.ns_per_packet,
            f.ns_per_packet
        );
    }
    connected::summary(find("v4-connected", 1), find("v4-few", 1));
    if let (Some(p), Some(f)) = (find("pool", 1), find("v4-few", 1)) {
        println!(
            "pool, 1 worker: {:.1} ns a packet against v4-few's {:.1} with recycled buffers: the pool's allocation and free cost {:.1} ns a packet",
            p.ns_per_packet,
            f.ns_per_packet,
            p.ns_per_packet - f.ns_per_packet
        );
    }
    if let (Some(st), Some(dv)) = (find("v4-few", 1), find("devices", 1)) {
        println!(
            "v4-few, 1 worker: {:.1} ns a packet on the core, of which the devices {:.1}",
            st.ns_per_packet, dv.ns_per_packet
        );
    }
}
