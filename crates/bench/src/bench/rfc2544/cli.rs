//! `mpstack bench rfc2544`'s command: the devices measured in turn, then their
//! results printed, as JSON lines or tables, and plotted (`--plot`).

use super::*;

/// Throughput against frame size, one line a device, as an SVG file.
fn plot(path: &std::path::Path, rows: &[Row]) -> Result<(), String> {
    let series: Vec<crate::plot::Series> = CASES
        .iter()
        .map(|case| crate::plot::Series {
            name: (*case).into(),
            points: rows
                .iter()
                .filter(|r| r.case == *case)
                .map(|r| (r.size as f64, r.throughput / 1e6))
                .collect(),
            reference: false,
        })
        .collect();
    let axes = crate::plot::Axes {
        title: "RFC 2544 throughput (no loss) over veth".into(),
        x_desc: "frame size, bytes".into(),
        y_desc: "million frames a second".into(),
        x_labels: None,
    };
    crate::plot::lines(path, &axes, &series)
}

pub fn main(a: &BenchArgs) -> Result<ExitCode, String> {
    // The main tables' devices, the one-core comparison's own, and its name.
    let mut known: Vec<&str> = CASES.to_vec();
    known.extend(onecore::CASES.iter().filter(|c| !CASES.contains(c)));
    known.push(onecore::SKIP);
    if let Some(s) = a.skip.iter().find(|s| !known.contains(&s.as_str())) {
        return Err(format!(
            "bench rfc2544: --skip: unknown '{s}' (known: {})",
            known.join(", ")
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
    let mut res = Results::default();
    for case in CASES {
        if a.skip.iter().any(|s| s == case) {
            continue;
        }
        progress(a, &format!("rfc2544: {case}: making the namespaces"));
        let r = measure(a, case, &sizes).map_err(|e| format!("bench rfc2544: {case}: {e}"))?;
        res.rows.extend(r.rows);
        res.loss.extend(r.loss);
        res.b2b.extend(r.b2b);
        res.rfc2889.extend(r.rfc2889);
    }
    let one_core = if a.skip.iter().any(|s| s == onecore::SKIP) {
        Vec::new()
    } else {
        onecore::run(a, &a.skip).map_err(|e| format!("bench rfc2544: {e}"))?
    };
    if let Some(path) = &a.plot {
        plot(path, &res.rows)?;
    }
    let rows = &res.rows;
    if a.json {
        print_json(&res, &one_core);
        return Ok(ExitCode::SUCCESS);
    }
    let cases: Vec<&str> = CASES
        .iter()
        .copied()
        .filter(|c| rows.iter().any(|r| r.case == *c))
        .collect();
    if !rows.is_empty() {
        print_throughput(a, rows, &cases, &sizes);
    }
    let devices: Vec<&str> = cases.iter().copied().filter(|c| *c != "tester").collect();
    print_loss(&res, &devices, &sizes);
    print_rfc2889(&res.rfc2889);
    if let Some(tester) = rows.iter().find(|r| r.case == "tester" && r.size == 64) {
        println!();
        println!(
            "The tester's own ceiling at 64 bytes (looped to itself): {:.3} Mfps",
            tester.throughput / 1e6
        );
    }
    let at = |c: &str| rows.iter().find(|r| r.case == c && r.size == 64);
    for (m, l, what) in [
        ("mpstack-router", "linux-router", "router"),
        ("mpstack-bridge", "linux-bridge", "bridge"),
    ] {
        if let (Some(m), Some(l)) = (at(m), at(l)) {
            println!(
                "64 bytes: mpstack {what} {:.3} Mfps, Linux kernel {what} {:.3}: {:.2}x",
                m.throughput / 1e6,
                l.throughput / 1e6,
                m.throughput / l.throughput.max(1.0)
            );
        }
    }
    onecore::print(&one_core, a.seconds);
    if let Some(p) = &a.plot {
        println!("plot: {}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Every result as a JSON line.
fn print_json(res: &Results, one_core: &[onecore::OneCore]) {
    for r in &res.rows {
        println!(
            "{{\"bench\":\"rfc2544\",\"test\":\"throughput\",\"case\":\"{}\",\"frame_size\":{},\"throughput_fps\":{:.0},\"throughput_mbps\":{:.1},\"unpaced_fps\":{:.0},\"latency_us\":{}}}",
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
    for l in &res.loss {
        println!(
            "{{\"bench\":\"rfc2544\",\"test\":\"frame_loss\",\"case\":\"{}\",\"frame_size\":{},\"offered_pct\":{},\"offered_fps\":{:.0},\"loss_pct\":{:.3}}}",
            l.case, l.size, l.pct, l.offered, l.loss
        );
    }
    for b in &res.b2b {
        println!(
            "{{\"bench\":\"rfc2544\",\"test\":\"back_to_back\",\"case\":\"{}\",\"frame_size\":{},\"frames\":{},\"at_least\":{}}}",
            b.case, b.size, b.frames, b.capped
        );
    }
    for r in &res.rfc2889 {
        println!(
            "{{\"bench\":\"rfc2889\",\"case\":\"{}\",\"forwarding_fps\":{:.0},\"address_capacity\":{},\"capacity_failed_at\":{},\"learning_fps\":{:.0},\"learning_at_least\":{},\"broadcast_fps\":{:.0},\"broadcast_at_least\":{}}}",
            r.case,
            r.forwarding,
            r.capacity,
            r.capacity_failed.map_or("null".into(), |b| b.to_string()),
            r.learning,
            r.learning_capped,
            r.broadcast,
            r.broadcast_capped
        );
    }
    onecore::print_json(one_core);
}

/// The throughput table and the latency table: a line a frame size, a column a
/// device.
fn print_throughput(a: &BenchArgs, rows: &[Row], cases: &[&str], sizes: &[usize]) {
    println!(
        "RFC 2544 throughput (no loss in a {} s trial; binary search of {STEPS} steps when the unpaced rate loses frames) over veth pairs, tester on AF_PACKET with {} sending thread(s)",
        a.seconds, a.senders
    );
    println!("Mfps: million frames a second; Mbit/s counts the wire's 20 bytes of preamble and gap per frame");
    println!();
    table_head("bytes", cases, 22);
    for &size in sizes {
        print!("{size:>6}");
        for c in cases {
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
    println!();
    println!("Latency at the throughput rate, us (mean / p99 / max)");
    table_head("bytes", cases, 22);
    for &size in sizes {
        print!("{size:>6}");
        for c in cases {
            match rows
                .iter()
                .find(|r| r.case == *c && r.size == size)
                .and_then(|r| r.latency)
            {
                Some((m, p, x)) => print!("  {:>22}", format!("{m:.0} / {p:.0} / {x:.0}")),
                None => print!("  {:>22}", "-"),
            }
        }
        println!();
    }
}

/// Frame loss against the offered rate, and back-to-back frames, at each size
/// measured.
fn print_loss(res: &Results, devices: &[&str], sizes: &[usize]) {
    for &size in sizes {
        if !devices.is_empty() && res.b2b.iter().any(|b| b.size == size) {
            println!();
            println!(
                "Frame loss at {size} bytes (RFC 2544 26.3), percent lost at a percentage of the unpaced rate"
            );
            table_head("rate", devices, 16);
            for pct in (1..=10u32).rev().map(|p| p * 10) {
                if !res.loss.iter().any(|l| l.pct == pct && l.size == size) {
                    continue;
                }
                print!("{:>5}%", pct);
                for c in devices {
                    match res
                        .loss
                        .iter()
                        .find(|l| l.case == *c && l.pct == pct && l.size == size)
                    {
                        Some(l) => print!("  {:>15.2}%", l.loss),
                        None => print!("  {:>16}", "-"),
                    }
                }
                println!();
            }
            println!();
            print!("Back-to-back at {size} bytes (RFC 2544 26.4), frames:");
            for b in res.b2b.iter().filter(|b| b.size == size) {
                print!(
                    "  {} {}{}",
                    b.case,
                    if b.capped { ">=" } else { "" },
                    b.frames
                );
            }
            println!();
        }
    }
}

/// The RFC 2889 table of the bridges, when there is one.
fn print_rfc2889(rows: &[rfc2889::Rfc2889]) {
    if rows.is_empty() {
        return;
    }
    println!();
    println!("RFC 2889, bridges (64-byte frames; >=: the tester's unpaced rate lost nothing)");
    println!(
        "{:>16}  {:>14}  {:>20}  {:>16}  {:>16}",
        "", "forwarding fps", "address capacity", "learning fps", "broadcast fps"
    );
    for r in rows {
        let at_least = |c: bool| if c { ">=" } else { "" };
        println!(
            "{:>16}  {:>14.0}  {:>20}  {:>16}  {:>16}",
            r.case,
            r.forwarding,
            match r.capacity_failed {
                Some(b) => format!("{} (fails {b})", r.capacity),
                None => format!(">={}", r.capacity),
            },
            format!("{}{:.0}", at_least(r.learning_capped), r.learning),
            format!("{}{:.0}", at_least(r.broadcast_capped), r.broadcast),
        );
    }
}
