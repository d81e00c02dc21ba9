//! `bench router --plot`: Mpps against workers, and against ipfw rules.

use super::Row;

/// Where `--plot FILE` puts its two charts: FILE-workers and FILE-rules, the
/// suffix before the extension.
pub(super) fn plot_paths(p: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    (
        crate::plot::with_suffix(p, "workers"),
        crate::plot::with_suffix(p, "rules"),
    )
}

/// The two charts of `--plot`: Mpps on the wall clock against workers (1..=`two`),
/// a line a stack row measured at more than one worker count, the design loops
/// dashed (measured at 1 and `two` only); and Mpps against ipfw rules at 1 worker, the
/// same stack without ipfw (v4-few) dashed beside it.
pub(super) fn plot(path: &std::path::Path, rows: &[Row], two: usize) -> Result<(), String> {
    use crate::plot::{lines, Axes, Series};
    let (pw, pr) = plot_paths(path);
    // A line a row measured at more than one worker count, the stack's first, then
    // the design loop's (dashed).
    let mut names: Vec<(&str, bool)> = Vec::new();
    for design in [false, true] {
        for r in rows {
            let n = (r.name.as_str(), design);
            let shown = r.workers > 1 && r.name != "devices" && r.buffers.is_none() == design;
            if shown && !names.contains(&n) {
                names.push(n);
            }
        }
    }
    let series: Vec<Series> = names
        .iter()
        .map(|&(n, design)| Series {
            name: match (design, n) {
                (false, _) => n.into(),
                (true, "design") => "design loop (bench forward, not the product)".into(),
                (true, _) => format!("{n}: design loop on v4-full-1m's flows"),
            },
            points: rows
                .iter()
                .filter(|r| r.name == n)
                .map(|r| ((r.workers - 1) as f64, r.mpps))
                .collect(),
            reference: design,
        })
        .collect();
    lines(
        &pw,
        &Axes {
            title: "bench router: 64-byte frames through the Stack, by workers".into(),
            x_desc: "workers".into(),
            y_desc: "Mpps (wall clock, all workers)".into(),
            x_labels: Some((1..=two).map(|w| w.to_string()).collect()),
        },
        &series,
    )?;
    let rules = [
        ("ipfw-0", 0),
        ("ipfw-1", 1),
        ("ipfw-10", 10),
        ("ipfw-100", 100),
    ];
    let at1 = |n: &str| rows.iter().find(|r| r.name == n && r.workers == 1);
    let mut series = vec![Series {
        name: "ipfw, N deny rules before the allow".into(),
        points: rules
            .iter()
            .enumerate()
            .filter_map(|(k, (n, _))| Some((k as f64, at1(n)?.mpps)))
            .collect(),
        reference: false,
    }];
    if let Some(base) = at1("v4-few") {
        series.push(Series {
            name: "v4-few, no ipfw".into(),
            points: (0..rules.len()).map(|k| (k as f64, base.mpps)).collect(),
            reference: true,
        });
    }
    lines(
        &pr,
        &Axes {
            title: "bench router: ipfw rules on the Stack's IPv4 path, 1 worker".into(),
            x_desc: "rules before the allow (each packet passes ipfw twice)".into(),
            y_desc: "Mpps (wall clock)".into(),
            x_labels: Some(rules.iter().map(|(_, n)| n.to_string()).collect()),
        },
        &series,
    )
}
