//! What the benchmarks of the real `Stack` print under their tables: the cycles a
//! packet of each stage, from the stack's runtime counters.

/// The per-stage lines under a table (`bench router`, `bench bridge`): `heading`,
/// then for each 1-worker row with stages, its name and each stage's cycles.
pub(crate) fn print_stages<'a>(
    heading: &str,
    rows: impl Iterator<Item = (&'a str, usize, &'a [(&'static str, f64)])>,
) {
    println!("{heading}");
    for (name, workers, stages) in rows {
        if workers != 1 || stages.is_empty() {
            continue;
        }
        let parts: Vec<String> = stages.iter().map(|(n, c)| format!("{n} {c:.0}")).collect();
        println!("  {name:<12} {}", parts.join(", "));
    }
    println!();
}
