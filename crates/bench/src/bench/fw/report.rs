//! What `mpstack bench fw` prints: the report as JSON lines or tables, and the
//! `--plot` of the matrix.

use super::*;

/// `--plot`: ns a packet against rules in the matrix, ours (`eval`) beside the naive
/// interpreter, for rule A (one microinstruction) and rule B (five).
pub(super) fn plot(path: &std::path::Path, rows: &[Row]) -> Result<(), String> {
    use crate::plot::{lines, Axes, Series};
    let matrix: Vec<&Row> = rows
        .iter()
        .filter(|r| r.group == "matrix" && r.variant == "eval")
        .collect();
    if matrix.is_empty() {
        return Err(format!(
            "--plot {}: bench fw plots the matrix, which --skip left out",
            path.display()
        ));
    }
    let mut counts: Vec<usize> = matrix.iter().map(|r| r.rules).collect();
    counts.sort_unstable();
    counts.dedup();
    let x = |n: usize| counts.iter().position(|&c| c == n).unwrap_or(0) as f64;
    let mut series = Vec::new();
    for (tag, what) in [("A", "1 insn"), ("B", "5 insns")] {
        let of = |r: &&&Row| r.case.starts_with(tag);
        series.push(Series {
            name: format!("ours, rule {tag} ({what})"),
            points: matrix
                .iter()
                .filter(of)
                .map(|r| (x(r.rules), r.ours.ns))
                .collect(),
            reference: false,
        });
        series.push(Series {
            name: format!("naive interpreter, rule {tag}"),
            points: matrix
                .iter()
                .filter(of)
                .filter_map(|r| Some((x(r.rules), r.naive?.ns)))
                .collect(),
            reference: false,
        });
    }
    lines(
        path,
        &Axes {
            title: "bench fw: the ipfw evaluator, N count rules the packet all matches".into(),
            x_desc: "count rules before the default rule".into(),
            y_desc: "ns a packet (best pass)".into(),
            x_labels: Some(counts.iter().map(|n| n.to_string()).collect()),
        },
        &series,
    )
}

/// A JSON number, or null.
fn jnum(v: Option<f64>, prec: usize) -> String {
    v.filter(|v| v.is_finite())
        .map_or("null".into(), |v| format!("{v:.prec$}"))
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.prec$}"))
}

pub(super) fn print_report(a: &BenchArgs, p: &Params, rep: &Report, hz: Option<f64>) {
    if a.json {
        for r in &rep.rows {
            let naive = r
                .naive
                .map(|n| {
                    format!(
                        ",\"naive_ns_per_pkt\":{:.3},\"naive_cycles_per_pkt\":{},\"ratio_naive_to_ours\":{:.3}",
                        n.ns,
                        jnum(n.cycles, 2),
                        n.ns / r.ours.ns
                    )
                })
                .unwrap_or_default();
            println!(
                "{{\"bench\":\"fw\",\"group\":\"{}\",\"case\":\"{}\",\"variant\":\"{}\",\"rules\":{},\"insns\":{},\"rule_text\":\"{}\",\"ours_ns_per_pkt\":{:.3},\"ours_cycles_per_pkt\":{},\"ours_mpps\":{:.3}{naive},\"agree\":{}}}",
                r.group,
                r.case,
                r.variant,
                r.rules,
                r.insns,
                crate::bench::json_escape(&r.rule_text),
                r.ours.ns,
                jnum(r.ours.cycles, 2),
                r.ours.mpps(),
                r.agree
            );
        }
        if let Some((one, two)) = rep.threads2 {
            println!(
                "{{\"bench\":\"fw\",\"group\":\"allow\",\"case\":\"allow-1rule\",\"variant\":\"threads\",\"mpps_1_thread\":{one:.3},\"mpps_2_threads\":{two:.3},\"ratio\":{:.3}}}",
                two / one.max(1e-9)
            );
        }
        for (imp, unit, f) in &rep.fits {
            println!(
                "{{\"bench\":\"fw\",\"what\":\"phase_costs\",\"impl\":\"{imp}\",\"unit\":\"{unit}\",\"entry\":{:.3},\"rule_header\":{:.3},\"microinstruction\":{:.3},\"paper_ns\":[{},{},{}]}}",
                f.entry, f.rule, f.insn, PAPER.0, PAPER.1, PAPER.2
            );
        }
        for t in &rep.targets {
            println!(
                "{{\"bench\":\"fw\",\"target\":\"{}\",\"via\":{},\"value\":{},\"unit\":\"{}\",\"limit\":{},\"at_most\":{},\"met\":{}}}",
                t.what,
                t.via.map_or("null".into(), |v| format!("\"{v}\"")),
                jnum(t.value, 3),
                t.unit,
                t.limit,
                t.at_most,
                t.met().map_or("null".into(), |m| m.to_string())
            );
        }
        return;
    }
    println!(
        "{:<20} {:<10} {:>5} {:>6} {:>10} {:>9} {:>8} {:>11} {:>9}",
        "case",
        "variant",
        "rules",
        "insns",
        "ours ns",
        "ours cyc",
        "Mpps",
        "naive ns",
        "naive/ours"
    );
    for r in &rep.rows {
        println!(
            "{:<20} {:<10} {:>5} {:>6} {:>10.2} {:>9} {:>8.2} {:>11} {:>9}",
            r.case,
            r.variant,
            r.rules,
            r.insns,
            r.ours.ns,
            opt(r.ours.cycles, 1),
            r.ours.mpps(),
            opt(r.naive.map(|n| n.ns), 2),
            opt(r.naive.map(|n| n.ns / r.ours.ns), 1),
        );
    }
    if let Some((one, two)) = rep.threads2 {
        println!(
            "allow-1rule, eval on pinned threads (mean rate over the run, not best pass): 1 thread {one:.2} Mpps, 2 threads {two:.2} Mpps (x{:.2})",
            two / one.max(1e-9)
        );
    }
    println!("\nrules used:");
    let mut seen = Vec::new();
    for r in &rep.rows {
        if !seen.contains(&r.case) {
            println!("  {:<20} {}", r.case, r.rule_text);
            seen.push(r.case.clone());
        }
    }
    if !rep.fits.is_empty() {
        println!(
            "\nper-phase costs (least squares over the matrix; paper: entry {} ns, rule {} ns, microinstruction {} ns on 2009 hardware):",
            PAPER.0, PAPER.1, PAPER.2
        );
        println!(
            "{:<8} {:<7} {:>10} {:>12} {:>17}",
            "impl", "unit", "entry", "rule header", "microinstruction"
        );
        for (imp, unit, f) in &rep.fits {
            println!(
                "{imp:<8} {unit:<7} {:>10.2} {:>12.2} {:>17.2}",
                f.entry, f.rule, f.insn
            );
        }
    }
    println!("\ntargets:");
    for t in &rep.targets {
        println!(
            "  {:<40} {:>9} {:<5} (target {} {}) {}",
            match t.via {
                // The better of eval and eval_batch: which one it was.
                Some(v) => format!("{}, {v}", t.what),
                None => t.what.to_string(),
            },
            opt(t.value, 2),
            t.unit,
            if t.at_most { "<=" } else { ">=" },
            t.limit,
            match t.met() {
                Some(true) => "met",
                Some(false) => "MISSED",
                None => "not measured",
            }
        );
    }
    println!(
        "(best ~50 us pass over arrays of {} packets (table: {}, keep-state: {} random flows) within {} s per figure in each of {} interleaved rounds; table entries are hosts of 198.18.0.0/15; {} states; TSC {} MHz; ours and naive agreed on every verdict and counter)",
        p.pkts,
        p.pkts.max(p.table_big.min(1 << 16)),
        p.states.clamp(p.pkts, 1 << 18),
        p.secs,
        p.rounds,
        p.states,
        opt(hz.map(|h| h / 1e6), 0)
    );
}
