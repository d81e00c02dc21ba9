//! `mpstack bench forward`'s command: the arguments read, the designs measured
//! ([`measure`]), their rows printed as JSON lines or a table.

use super::*;

pub fn main(a: &BenchArgs) -> Result<ExitCode, String> {
    let names: Vec<&str> = DesignKind::ALL.iter().map(|k| k.name()).collect();
    if let Some(s) = a.skip.iter().find(|s| !names.contains(&s.as_str())) {
        return Err(format!(
            "bench forward: --skip: unknown '{s}' (known: {})",
            names.join(", ")
        ));
    }
    let designs: Vec<DesignKind> = DesignKind::ALL
        .into_iter()
        .filter(|k| !a.skip.iter().any(|s| s == k.name()))
        .collect();
    let (raw, source) = lpm::load_table(a, "forward")?;
    let p = Params {
        flows: a.flows as usize,
        packets: a.packets as usize,
        secs: a.seconds,
        rounds: a.rounds,
        workers: if a.workers > 1 { a.workers as usize } else { 2 },
        designs: designs.leak(),
        nexthops: a.nexthops,
        flow_mode: match a.flow_mode.as_str() {
            "4tuple" => FlowMode::FourTuple,
            _ => FlowMode::Destination,
        },
    };
    let hz = dev::cpu::tsc_hz(Duration::from_millis(50));
    let (rows, prefixes, cpus) = measure(&raw, p, None, |m| progress(a, &format!("forward: {m}")))?;
    let table = match &source {
        Source::File(path) => path.clone(),
        Source::Synthetic(_) => "synthetic".into(),
    };
    if a.json {
        print_json(a, &rows, &p, prefixes, &table);
    } else {
        print_table(&rows, &p, prefixes, &source, &cpus, hz);
    }
    let dropped: Vec<String> = rows
        .iter()
        .filter(|r| r.drops > 0)
        .map(|r| {
            format!(
                "{} at {} worker(s): {}",
                r.design.name(),
                r.workers,
                r.drops
            )
        })
        .collect();
    if !dropped.is_empty() {
        return Err(format!(
            "bench forward: packets dropped: {}",
            dropped.join(", ")
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// A design's rows at one worker and at the most.
fn pair(rows: &[Row], k: DesignKind) -> (Option<&Row>, Option<&Row>) {
    let one = rows.iter().find(|r| r.design == k && r.workers == 1);
    let many = rows.iter().find(|r| r.design == k && r.workers > 1);
    (one, many)
}

/// The rows as JSON lines, and each design's ratio of its many workers to one.
fn print_json(a: &BenchArgs, rows: &[Row], p: &Params, prefixes: usize, table: &str) {
    for r in rows {
        let fl = r
            .flows
            .map(|s| {
                format!(
                    ",\"flow_hits\":{},\"flow_misses\":{},\"flow_evictions\":{}",
                    s.hits, s.misses, s.evictions
                )
            })
            .unwrap_or_default();
        println!(
            "{{\"bench\":\"forward\",\"design\":\"{}\",\"workers\":{},\"mpps\":{:.3},\"core_mpps\":{:.3},\"wall_ns_per_packet\":{:.2},\"ns_per_packet\":{:.2},\"tsc_ticks_per_packet\":{:.1},\"cpu_share\":{:.3},\"packets\":{},\"drops\":{},\"flows\":{},\"prefixes\":{prefixes},\"table\":\"{}\",\"frame_bytes\":{FRAME},\"nexthops\":{},\"flow_mode\":\"{}\"{fl}}}",
            r.design.name(),
            r.workers,
            r.mpps,
            r.core_mpps,
            r.wall_ns_per_packet,
            r.ns_per_packet,
            r.ticks_per_packet,
            r.cpu_share,
            r.packets,
            r.drops,
            p.flows,
            crate::bench::json_escape(table),
            p.nexthops,
            a.flow_mode,
        );
    }
    for k in DesignKind::ALL {
        if let (Some(o), Some(m)) = pair(rows, k) {
            println!(
                "{{\"bench\":\"forward\",\"design\":\"{}\",\"workers\":{},\"ratio_to_1_worker\":{:.3},\"ratio_to_1_worker_on_core\":{:.3}}}",
                k.name(),
                m.workers,
                m.mpps / o.mpps.max(1e-9),
                m.core_mpps / o.core_mpps.max(1e-9)
            );
        }
    }
}

/// The rows as a table, after what was measured and how.
fn print_table(
    rows: &[Row],
    p: &Params,
    prefixes: usize,
    source: &Source,
    cpus: &[usize],
    hz: Option<f64>,
) {
    match &source {
        Source::File(path) => println!(
            "IPv4 forwarding, {FRAME}-byte Ethernet/IPv4/UDP frames: {prefixes} prefixes from {}",
            path
        ),
        Source::Synthetic(why) => println!(
            "IPv4 forwarding, {FRAME}-byte Ethernet/IPv4/UDP frames: SYNTHETIC table ({why})"
        ),
    }
    println!(
        "{} next hops on {IFACES} interfaces; {} flows (destinations inside announced prefixes, split over the workers by a flow hash); {} pre-built frames per worker; best of {} runs of {} s; workers pinned to CPUs {:?}; flow table keyed on {}",
        p.nexthops, p.flows, p.packets, p.rounds, p.secs, &cpus[..cpus.len().min(p.workers)],
        match p.flow_mode {
            FlowMode::Destination => "the destination",
            FlowMode::FourTuple => "the 4-tuple and protocol",
        }
    );
    match hz {
        Some(hz) => println!(
            "cycles: time-stamp counter ticks ({:.3} GHz, constant rate: nominal, not boosted, cycles)\n",
            hz / 1e9
        ),
        None => println!("cycles: no time-stamp counter on this CPU\n"),
    }
    let w = p.workers;
    println!(
        "{:<16} {:>8} {:>7} {:>7} {:>6} {:>8} {:>7} {:>7} {:>6} {:>7} {:>8}  what",
        "design",
        "1w Mpps",
        "ns/pkt",
        "cyc/pkt",
        "core%",
        format!("{w}w Mpps"),
        "ns/pkt",
        "cyc/pkt",
        "core%",
        format!("{w}w/1w"),
        "on core",
    );
    for k in DesignKind::ALL {
        let (Some(o), Some(m)) = pair(rows, k) else {
            continue;
        };
        println!(
            "{:<16} {:>8.2} {:>7.1} {:>7.0} {:>6.0} {:>8.2} {:>7.1} {:>7.0} {:>6.0} {:>6.2}x {:>7.2}x  {}",
            k.name(),
            o.mpps,
            o.ns_per_packet,
            o.ticks_per_packet,
            o.cpu_share * 100.0,
            m.mpps,
            m.ns_per_packet,
            m.ticks_per_packet,
            m.cpu_share * 100.0,
            m.mpps / o.mpps.max(1e-9),
            m.core_mpps / o.core_mpps.max(1e-9),
            k.what()
        );
    }
    for r in rows {
        if let Some(s) = r.flows {
            let looked = (s.hits + s.misses).max(1) as f64;
            println!(
                "(flow table, {} worker(s): {:.2}% hits, {} misses, {} evictions)",
                r.workers,
                100.0 * s.hits as f64 / looked,
                s.misses,
                s.evictions
            );
        }
    }
    println!(
        "(Mpps: all workers, wall clock; ns/pkt, cyc/pkt: one worker's time on its core per packet (thread CPU time; TSC ticks scaled by core%); core%: the share of the run each worker had a core for, lower when other work took it; on core: the ratio of the workers' packets per second of their own CPU time, what the scaling would be had each worker its core — sleeping on a contended lock is not counted, which flatters legacy)"
    );
    if let (Some(o), Some(m)) = pair(rows, DesignKind::Split) {
        let ratio = m.mpps / o.mpps.max(1e-9);
        let core_ratio = m.core_mpps / o.core_mpps.max(1e-9);
        let per_core = 1e3 / o.ns_per_packet.max(1e-9);
        println!(
            "targets (split): >= 15 Mpps per core: {:.2} wall, {per_core:.2} on core ({}); >= 1.8x from 1 to {w} workers: {ratio:.2}x wall, {core_ratio:.2}x on core ({})",
            o.mpps,
            if o.mpps >= 15.0 { "met" } else if per_core >= 15.0 { "met on core only" } else { "missed" },
            if ratio >= 1.8 { "met" } else if core_ratio >= 1.8 { "met on core only" } else { "missed" }
        );
    }
}
