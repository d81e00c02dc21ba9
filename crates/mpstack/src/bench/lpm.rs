//! `mpstack bench lpm`: IPv4 longest-prefix match on a real BGP table, our algorithms
//! (`route`: the radix tree, DIR-24-8, Poptrie) beside three crates (`prefix-trie`,
//! `poptrie`, `ip_network_table`), each behind a small adapter, in one run.
//!
//! The table is `benches/bgpas.lpm` of the crate `iptrie` 0.11.2, read at run time from
//! cargo's registry sources (the crate is a dependency of this binary for that file
//! alone; the data is not part of this repository): one `prefix/len origin-AS` line per
//! route, IPv4 and IPv6 mixed. Each origin AS is given its own next-hop index (a
//! pessimistic case for leaf compression: a real router has far fewer next hops).
//! Without the file, a synthetic table with a BGP-like length mix is used, and the
//! output says so.
//!
//! For each implementation: build time, heap bytes the built structure holds (counted
//! by the binary's allocator), and lookups per second over pre-generated keys (seeded),
//! uniform over the address space and inside announced prefixes, the best of
//! `--rounds`. Before timing, each one's answers on a sample of keys are checked
//! against the radix tree; a mismatch is an error.

use super::progress;
use crate::BenchArgs;
use route::{Dir248, Lookup, Poptrie4, Prefix4, Radix};
use std::hint::black_box;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// The table `iptrie` 0.11.2 ships, relative to its source folder.
const TABLE_IN_CRATE: &str = "iptrie-0.11.2/benches/bgpas.lpm";

/// A seeded generator (SplitMix64): the keys are the same in every run.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Where the routes came from.
#[derive(Clone, Debug)]
pub enum Source {
    File(PathBuf),
    Synthetic(String),
}

/// Finds `bgpas.lpm` under `$CARGO_HOME/registry/src/*/` (CARGO_HOME: ~/.cargo).
pub fn find_table() -> Option<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))?;
    let src = home.join("registry").join("src");
    std::fs::read_dir(src)
        .ok()?
        .flatten()
        .map(|d| d.path().join(TABLE_IN_CRATE))
        .find(|p| p.is_file())
}

/// Parses `prefix/len AS` lines; keeps the IPv4 ones, one next hop per origin AS.
pub fn parse_table(text: &str) -> Result<Vec<(Prefix4, u32)>, String> {
    let mut asn_index = std::collections::HashMap::new();
    let mut routes = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.contains(':') {
            continue; // IPv6
        }
        let bad = || format!("line {}: cannot parse '{line}'", i + 1);
        let (net, asn) = line.split_once(' ').ok_or_else(bad)?;
        let (addr, len) = net.split_once('/').ok_or_else(bad)?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| bad())?;
        let len: u8 = len.parse().map_err(|_| bad())?;
        if len > 32 {
            return Err(bad());
        }
        let asn: u32 = asn.trim().parse().map_err(|_| bad())?;
        let n = asn_index.len() as u32;
        let nh = *asn_index.entry(asn).or_insert(n);
        routes.push((Prefix4::new(u32::from(addr), len), nh));
    }
    Ok(routes)
}

/// `n` prefixes with a BGP-like mix of lengths: most /24, then /22-/23, /16-/21, a few
/// shorter and a few longer; 1000 next hops.
pub fn synthetic_table(n: usize, seed: u64) -> Vec<(Prefix4, u32)> {
    let mut rng = SplitMix(seed);
    (0..n)
        .map(|_| {
            let len = match rng.below(100) {
                0..=57 => 24,
                58..=69 => 23,
                70..=79 => 22,
                80..=95 => 16 + rng.below(6) as u8,
                96..=98 => 8 + rng.below(8) as u8,
                _ => 25 + rng.below(8) as u8,
            };
            // Addresses from 1.0.0.0 to 223.255.255.255, as announced unicast space.
            let addr = (1 << 24) + rng.below(223 << 24) as u32;
            (Prefix4::new(addr, len), rng.below(1000) as u32)
        })
        .collect()
}

/// The keys: uniform over the address space, and inside announced prefixes.
pub fn make_keys(routes: &[(Prefix4, u32)], n: usize, seed: u64) -> (Vec<u32>, Vec<u32>) {
    let mut rng = SplitMix(seed);
    let uniform = (0..n).map(|_| rng.next() as u32).collect();
    let inside = (0..n)
        .map(|_| {
            if routes.is_empty() {
                return rng.next() as u32;
            }
            let (p, _) = routes[rng.below(routes.len() as u64) as usize];
            let host = if p.len == 0 {
                u32::MAX
            } else {
                u32::MAX.checked_shr(p.len as u32).unwrap_or(0)
            };
            p.addr | (rng.next() as u32 & host)
        })
        .collect();
    (uniform, inside)
}

/// One implementation, behind the smallest adapter.
trait Fib4 {
    fn lookup(&self, addr: u32) -> Option<u32>;
}

struct Ours<L>(L);
impl<L: Lookup<Addr = u32>> Fib4 for Ours<L> {
    #[inline]
    fn lookup(&self, addr: u32) -> Option<u32> {
        self.0.lookup(addr)
    }
}

struct PrefixTrie(prefix_trie::PrefixMap<(u32, u8), u32>);
impl Fib4 for PrefixTrie {
    #[inline]
    fn lookup(&self, addr: u32) -> Option<u32> {
        self.0.get_lpm(&(addr, 32)).map(|(_, &nh)| nh)
    }
}

struct PoptrieCrate(poptrie::Poptrie<(u32, u8), u32>);
impl Fib4 for PoptrieCrate {
    #[inline]
    fn lookup(&self, addr: u32) -> Option<u32> {
        self.0.lookup(addr).copied()
    }
}

struct NetworkTable(ip_network_table::IpNetworkTable<u32>);
impl Fib4 for NetworkTable {
    #[inline]
    fn lookup(&self, addr: u32) -> Option<u32> {
        self.0
            .longest_match(Ipv4Addr::from(addr))
            .map(|(_, &nh)| nh)
    }
}

/// One implementation measured.
#[derive(Clone, Debug)]
pub struct Row {
    pub name: &'static str,
    pub build_secs: f64,
    pub memory: u64,
    pub mlps_uniform: f64,
    pub mlps_inside: f64,
    /// Sample keys whose answer differs from the radix tree's.
    pub mismatches: usize,
}

/// Million lookups per second over `keys`, the best of `rounds`.
fn mlps<F: Fib4>(f: &F, keys: &[u32], rounds: u32) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..rounds {
        let keys = black_box(keys);
        let t = Instant::now();
        let mut acc = 0u32;
        for &k in keys {
            acc = acc.wrapping_add(f.lookup(k).unwrap_or(1));
        }
        black_box(acc);
        best = best.min(t.elapsed().as_secs_f64());
    }
    keys.len() as f64 / best / 1e6
}

struct Workload<'a> {
    uniform: &'a [u32],
    inside: &'a [u32],
    /// Sample keys and the radix tree's answers.
    sample: Vec<(u32, Option<u32>)>,
    rounds: u32,
}

fn measure<F: Fib4>(name: &'static str, w: &Workload<'_>, build: impl FnOnce() -> F) -> Row {
    let heap0 = dev::alloc_count::live_bytes();
    let t = Instant::now();
    let f = build();
    let build_secs = t.elapsed().as_secs_f64();
    let memory = dev::alloc_count::live_bytes().saturating_sub(heap0);
    let mismatches = w
        .sample
        .iter()
        .filter(|&&(k, want)| f.lookup(k) != want)
        .count();
    let mlps_uniform = mlps(&f, w.uniform, w.rounds);
    let mlps_inside = mlps(&f, w.inside, w.rounds);
    Row {
        name,
        build_secs,
        memory,
        mlps_uniform,
        mlps_inside,
        mismatches,
    }
}

/// Builds and measures every implementation on `routes`.
/// The implementations, by the names `--skip` takes.
pub const IMPLS: [&str; 6] = [
    "radix",
    "dir-24-8",
    "poptrie",
    "prefix-trie",
    "poptrie-crate",
    "ip_network_table",
];

/// Builds and measures every implementation on `routes` but those in `skip`.
pub fn run_v4(
    routes: &[(Prefix4, u32)],
    lookups: usize,
    rounds: u32,
    skip: &[String],
    mut progress: impl FnMut(&str),
) -> Vec<Row> {
    let (uniform, inside) = make_keys(routes, lookups, 0x6d70_7374_6163_6b00);
    progress("building the reference radix tree");
    let radix = Radix::build(routes);
    let sample = uniform
        .iter()
        .take(50_000)
        .chain(inside.iter().take(50_000))
        .map(|&k| (k, radix.lookup(k)))
        .collect();
    drop(radix);
    let w = Workload {
        uniform: &uniform,
        inside: &inside,
        sample,
        rounds,
    };
    let mut rows = Vec::new();
    let mut step = |name: &'static str| {
        let run = !skip.iter().any(|s| s == name);
        if run {
            progress(&format!("{name}: build, check, time"));
        }
        run
    };
    if step("radix") {
        rows.push(measure("radix", &w, || Ours(Radix::<u32>::build(routes))));
    }
    if step("dir-24-8") {
        rows.push(measure("dir-24-8", &w, || Ours(Dir248::build(routes))));
    }
    if step("poptrie") {
        rows.push(measure("poptrie", &w, || Ours(Poptrie4::build(routes))));
    }
    if step("prefix-trie") {
        rows.push(measure("prefix-trie (crate)", &w, || {
            let mut m = prefix_trie::PrefixMap::new();
            for &(p, nh) in routes {
                m.insert((p.addr, p.len), nh);
            }
            PrefixTrie(m)
        }));
    }
    // Its insert shifts every later node: about ten minutes for a full table here.
    if step("poptrie-crate") {
        rows.push(measure("poptrie (crate)", &w, || {
            let mut m = poptrie::Poptrie::new();
            for &(p, nh) in routes {
                m.insert((p.addr, p.len), nh);
            }
            PoptrieCrate(m)
        }));
    }
    if step("ip_network_table") {
        rows.push(measure("ip_network_table (crate)", &w, || {
            let mut m = ip_network_table::IpNetworkTable::new();
            for &(p, nh) in routes {
                let net = ip_network::Ipv4Network::new(Ipv4Addr::from(p.addr), p.len)
                    .expect("prefix has no host bits");
                m.insert(net, nh);
            }
            NetworkTable(m)
        }));
    }
    rows
}

pub fn main(a: &BenchArgs) -> Result<ExitCode, String> {
    if let Some(s) = a.skip.iter().find(|s| !IMPLS.contains(&s.as_str())) {
        return Err(format!(
            "bench lpm: --skip: unknown '{s}' (known: {})",
            IMPLS.join(", ")
        ));
    }
    let (routes, source) = match a.table.clone().or_else(find_table) {
        Some(path) => {
            progress(a, &format!("lpm: reading {}", path.display()));
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("bench lpm: {}: {e}", path.display()))?;
            (
                parse_table(&text).map_err(|e| format!("bench lpm: {}: {e}", path.display()))?,
                Source::File(path),
            )
        }
        None => {
            let why = format!(
                "{TABLE_IN_CRATE} not found under $CARGO_HOME/registry/src (run `cargo fetch`); \
                 synthetic table of 900000 prefixes"
            );
            progress(a, &format!("lpm: {why}"));
            (synthetic_table(900_000, 1), Source::Synthetic(why))
        }
    };
    let lookups = a.lookups as usize;
    let rows = run_v4(&routes, lookups, a.rounds, &a.skip, |m| {
        progress(a, &format!("lpm: {m}"))
    });
    let table = match &source {
        Source::File(p) => p.display().to_string(),
        Source::Synthetic(_) => "synthetic".into(),
    };
    let best_crate = rows
        .iter()
        .filter(|r| r.name.ends_with("(crate)"))
        .map(|r| r.mlps_uniform)
        .fold(0.0, f64::max);
    if a.json {
        for r in &rows {
            println!(
                "{{\"bench\":\"lpm\",\"family\":\"ipv4\",\"impl\":\"{}\",\"table\":\"{}\",\"prefixes\":{},\"lookups\":{},\"build_ms\":{:.1},\"memory_bytes\":{},\"mlps_uniform\":{:.2},\"mlps_in_prefix\":{:.2},\"mismatches\":{}}}",
                r.name,
                table.replace('\\', "\\\\").replace('"', "\\\""),
                routes.len(),
                lookups,
                r.build_secs * 1e3,
                r.memory,
                r.mlps_uniform,
                r.mlps_inside,
                r.mismatches
            );
        }
    } else {
        match &source {
            Source::File(p) => println!(
                "IPv4 longest-prefix match: {} prefixes from {} (one next hop per origin AS)",
                routes.len(),
                p.display()
            ),
            Source::Synthetic(why) => {
                println!("IPv4 longest-prefix match: SYNTHETIC table ({why})")
            }
        }
        println!(
            "{lookups} seeded keys per set, best of {} rounds; memory: heap held by the built structure\n",
            a.rounds
        );
        println!(
            "{:<26} {:>9} {:>11} {:>13} {:>15} {:>9}",
            "impl", "build ms", "memory MiB", "uniform Mlps", "in-prefix Mlps", "vs crate"
        );
        for r in &rows {
            let vs = if best_crate > 0.0 {
                format!("{:.1}x", r.mlps_uniform / best_crate)
            } else {
                "-".into()
            };
            println!(
                "{:<26} {:>9.0} {:>11.2} {:>13.1} {:>15.1} {:>9}",
                r.name,
                r.build_secs * 1e3,
                r.memory as f64 / (1024.0 * 1024.0),
                r.mlps_uniform,
                r.mlps_inside,
                vs
            );
        }
        println!("\n(million lookups per second, one key at a time; vs crate: uniform-key rate over the best crate's)");
    }
    let bad: Vec<String> = rows
        .iter()
        .filter(|r| r.mismatches > 0)
        .map(|r| format!("{} ({} of the sample keys)", r.name, r.mismatches))
        .collect();
    if !bad.is_empty() {
        return Err(format!(
            "bench lpm: answers differ from the radix tree: {}",
            bad.join(", ")
        ));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_implementation_agrees_on_a_small_synthetic_table() {
        let routes = synthetic_table(3000, 7);
        let rows = run_v4(&routes, 2000, 1, &[], |_| {});
        assert_eq!(rows.len(), 6);
        for r in &rows {
            assert_eq!(r.mismatches, 0, "{r:?}");
            assert!(r.mlps_uniform > 0.0 && r.mlps_inside > 0.0, "{r:?}");
        }
    }

    #[test]
    fn parses_the_table_format() {
        let t = "1.0.0.0/24 13335\n1.0.4.0/22 38803\n2001:db8::/32 64500\n1.0.5.0/24 13335\n";
        let r = parse_table(t).unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r[0], (Prefix4::new(0x0100_0000, 24), 0));
        assert_eq!(r[1].1, 1);
        assert_eq!(r[2].1, 0);
        assert!(parse_table("1.0.0.0/33 1\n").is_err());
    }
}
