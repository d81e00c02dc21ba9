//! `mpstack bench lpm`'s command: the arguments read, each family's lookups and
//! updates measured, the rows printed as JSON lines or tables.

use super::*;

pub fn main(a: &BenchArgs) -> Result<ExitCode, String> {
    if let Some(s) = a.skip.iter().find(|s| !IMPLS.contains(&s.as_str())) {
        return Err(format!(
            "bench lpm: --skip: unknown '{s}' (known: {})",
            IMPLS.join(", ")
        ));
    }
    let t = load(a, "lpm")?;
    let lookups = a.lookups as usize;
    let skips = |family: &str| a.skip.iter().any(|s| s == family);
    let slow = slow_skipped(a);
    let skip: Vec<String> = a
        .skip
        .iter()
        .cloned()
        .chain(slow.iter().map(|p| p.key.to_string()))
        .collect();
    for p in &slow {
        progress(
            a,
            &format!("lpm: {}: {}: skipped ({})", p.family, p.key, p.skipped()),
        );
    }
    let rows4 = if skips("ipv4") {
        Vec::new()
    } else {
        run_v4(&t.v4, lookups, a.rounds, &skip, |m| {
            progress(a, &format!("lpm: {m}"))
        })
    };
    let rows6 = if skips("ipv6") {
        Vec::new()
    } else {
        run_v6(&t.v6, lookups, a.rounds, &skip, |m| {
            progress(a, &format!("lpm: {m}"))
        })
    };
    let table = match &t.source {
        Source::File(p) => p.clone(),
        Source::Synthetic(_) => "synthetic".into(),
    };
    if a.json {
        print_json(&rows4, t.v4.len(), u32::UNIFORM_OVER, &table, lookups);
        print_json_skipped(&slow, "IPv4", &table);
        print_json(&rows6, t.v6.len(), u128::UNIFORM_OVER, &table, lookups);
        print_json_skipped(&slow, "IPv6", &table);
    } else {
        println!(
            "{lookups} seeded keys per set, best of {} rounds (interleaved across implementations); memory: heap held by the built structure\n",
            a.rounds
        );
        let shown =
            |rows: &[Row], family| !rows.is_empty() || slow.iter().any(|p| p.family == family);
        if shown(&rows4, "IPv4") {
            let (v4, over) = (t.v4.len(), u32::UNIFORM_OVER);
            print_table(&rows4, &slow, v4, "IPv4", over, &t.source);
        }
        if shown(&rows6, "IPv6") {
            let (v6, over) = (t.v6.len(), u128::UNIFORM_OVER);
            print_table(&rows6, &slow, v6, "IPv6", over, &t.source);
        }
        println!(
            "Mlps: million lookups per second. uniform, in-prefix: one key at a time. batched: \
             through Lookup::lookup_batch, {BATCH_KEYS} keys a call\n\
             (ours only; Poptrie reads 16 direct entries before walking them, radix and DIR-24-8 look up one at a time). \
             vs crate: one-key uniform rate over the best crate's.\n\
             updates/s: {UPDATES} routes of the table deleted, then re-inserted ({} updates). \
             single: each insert or delete done on the structure itself.\n\
             rebuild/N: our compiled structures have no single update: the figure is the rate \
             at which updates reach lookups when they are applied to a radix tree\n\
             and a new structure is built from it every N updates (the cost of each rebuild \
             is spread over N updates; a smaller N gives a lower rate).",
            2 * UPDATES
        );
    }
    let bad: Vec<String> = rows4
        .iter()
        .chain(&rows6)
        .filter(|r| r.mismatches > 0)
        .map(|r| {
            format!(
                "{} {} ({} of the sample keys)",
                r.family, r.name, r.mismatches
            )
        })
        .collect();
    if !bad.is_empty() {
        return Err(format!(
            "bench lpm: answers differ from the radix tree: {}",
            bad.join(", ")
        ));
    }
    Ok(ExitCode::SUCCESS)
}

fn json_str(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn print_json(rows: &[Row], prefixes: usize, uniform_over: &str, table: &str, lookups: usize) {
    for r in rows {
        let (bu, bi) = match r.batched {
            Some((u, i)) => (format!("{u:.2}"), format!("{i:.2}")),
            None => ("null".into(), "null".into()),
        };
        let mode = match r.update_mode {
            UpdateMode::Single => "single".to_string(),
            UpdateMode::Rebuild(n) => format!("rebuild-every-{n}"),
        };
        println!(
            "{{\"bench\":\"lpm\",\"family\":\"{}\",\"impl\":\"{}\",\"skip_name\":\"{}\",\"table\":\"{}\",\"prefixes\":{},\"lookups\":{},\"uniform_over\":\"{}\",\"build_ms\":{:.1},\"memory_bytes\":{},\"mlps_uniform\":{:.2},\"mlps_in_prefix\":{:.2},\"mlps_uniform_batched\":{},\"mlps_in_prefix_batched\":{},\"updates_per_s\":{:.0},\"update_mode\":\"{}\",\"mismatches\":{}}}",
            r.family.to_lowercase(),
            r.name,
            r.key,
            json_str(table),
            prefixes,
            lookups,
            uniform_over,
            r.build_secs * 1e3,
            r.memory,
            r.mlps_uniform,
            r.mlps_inside,
            bu,
            bi,
            r.updates_per_sec,
            mode,
            r.mismatches
        );
    }
}

/// One JSON object for each slow peer left out, beside the rows of its family.
fn print_json_skipped(slow: &[&SlowPeer], family: &str, table: &str) {
    for p in slow.iter().filter(|p| p.family == family) {
        println!(
            "{{\"bench\":\"lpm\",\"family\":\"{}\",\"impl\":\"{}\",\"skip_name\":\"{}\",\"table\":\"{}\",\"skipped\":\"{}\"}}",
            p.family.to_lowercase(),
            p.name,
            p.key,
            json_str(table),
            json_str(&p.skipped())
        );
    }
}

fn print_table(
    rows: &[Row],
    slow: &[&SlowPeer],
    prefixes: usize,
    family: &str,
    uniform_over: &str,
    source: &Source,
) {
    match source {
        Source::File(p) => println!(
            "{family} longest-prefix match: {prefixes} prefixes from {p} (one next hop per origin AS)"
        ),
        Source::Synthetic(why) => {
            println!("{family} longest-prefix match: SYNTHETIC table of {prefixes} prefixes ({why})")
        }
    }
    println!(
        "uniform keys: uniform over {uniform_over}; in-prefix keys: inside announced prefixes\n"
    );
    let best_crate = rows
        .iter()
        .filter(|r| r.name.ends_with("(crate)"))
        .map(|r| r.mlps_uniform)
        .fold(0.0, f64::max);
    println!(
        "{:<26} {:>8} {:>8} {:>8} {:>9} {:>8} {:>9} {:>11} {:<12} {:>6}",
        "",
        "build",
        "memory",
        "uniform",
        "in-prefix",
        "batched",
        "batched",
        "updates/s",
        "update",
        "vs"
    );
    println!(
        "{:<26} {:>8} {:>8} {:>8} {:>9} {:>8} {:>9} {:>11} {:<12} {:>6}",
        "impl", "ms", "MiB", "Mlps", "Mlps", "uniform", "in-prefix", "", "mode", "crate"
    );
    for r in rows {
        let vs = if best_crate > 0.0 {
            format!("{:.1}x", r.mlps_uniform / best_crate)
        } else {
            "-".into()
        };
        let (bu, bi) = match r.batched {
            Some((u, i)) => (format!("{u:.1}"), format!("{i:.1}")),
            None => ("-".into(), "-".into()),
        };
        let mode = match r.update_mode {
            UpdateMode::Single => "single".to_string(),
            UpdateMode::Rebuild(n) => format!("rebuild/{n}"),
        };
        println!(
            "{:<26} {:>8.0} {:>8.2} {:>8.1} {:>9.1} {:>8} {:>9} {:>11.0} {:<12} {:>6}",
            r.name,
            r.build_secs * 1e3,
            r.memory as f64 / (1024.0 * 1024.0),
            r.mlps_uniform,
            r.mlps_inside,
            bu,
            bi,
            r.updates_per_sec,
            mode,
            vs
        );
    }
    for p in slow.iter().filter(|p| p.family == family) {
        println!("{:<26} skipped ({})", p.name, p.skipped());
    }
    println!();
}
