//! `mpstack bench lpm`: longest-prefix match on a real BGP table, IPv4 and IPv6 in one
//! run: our algorithms (`route`: the radix tree, DIR-24-8 for IPv4, Poptrie for both)
//! beside three crates (`prefix-trie`, `poptrie`, `ip_network_table`), each behind a
//! small adapter.
//!
//! The table is `--table`, else `$MPSTACK_BGP_TABLE`, else `benches/bgpas.lpm` of the
//! crate `iptrie` 0.11.2 in cargo's registry sources ([`crate::table`] finds it;
//! `route::table` reads it; the data is not part of this repository). Without any,
//! synthetic tables with a BGP-like length mix are used, and the output says so.
//!
//! The peers in [`SLOW`] take minutes to build on the full table; they are left out
//! unless `--slow-peers`, and the output lists them as skipped, with the reason.
//!
//! For each implementation: build time, heap bytes the built structure holds (counted
//! by the binary's allocator), lookups per second over pre-generated keys (seeded) —
//! uniform (IPv4: over the whole address space; IPv6: over 2000::/3, the global
//! unicast space, since a uniform 128-bit key almost never hits a route) and inside
//! announced prefixes, one key at a time and, for ours, in batches
//! (`Lookup::lookup_batch`), the best of `--rounds` rounds interleaved across the
//! implementations (each preceded by an untimed pass that brings its structure back
//! into the caches); and the update rate. Updates are the deletion then
//! re-insertion of [`UPDATES`] routes of the table: single inserts and deletes for the
//! structures that have them (the radix tree and the crates), and for our compiled
//! structures the rate at which updates reach lookups when they are applied to the
//! radix tree and published by a full rebuild every [`BATCH`] updates. Before timing,
//! each one's answers on a sample of keys are checked against the radix tree; a
//! mismatch is an error.

use super::progress;
use crate::BenchArgs;
use route::{table, Addr, Dir248, Lookup, Poptrie, Poptrie4, Poptrie6, Prefix, Radix};
use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::ExitCode;
use std::time::Instant;

mod cli;
pub use cli::main;

/// Routes deleted then re-inserted to measure the update rate (so twice as many
/// updates).
pub const UPDATES: usize = 10_000;
/// Updates per rebuild of a compiled structure in the update rate.
pub const BATCH: usize = 10_000;
/// Keys per `lookup_batch` call in the batched figures.
const BATCH_KEYS: usize = 256;

/// A seeded generator (SplitMix64): the keys are the same in every run.
pub struct SplitMix(pub(super) u64);

impl SplitMix {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// An address family as the bench needs it: key generation and the crates' types.
pub trait Family:
    Addr + poptrie::Address + std::ops::BitOr<Output = Self> + std::ops::BitAnd<Output = Self>
{
    /// "IPv4", "IPv6".
    const NAME: &'static str;
    /// What the uniform keys are uniform over.
    const UNIFORM_OVER: &'static str;
    /// The `--skip` names of the rows of prefix-trie, poptrie and ip_network_table.
    const CRATE_ROWS: [&'static str; 3];
    /// A key uniform over [`Family::UNIFORM_OVER`].
    fn uniform(rng: &mut SplitMix) -> Self;
    /// Random bits, all of them.
    fn random(rng: &mut SplitMix) -> Self;
    /// The host bits of a prefix of length `len`.
    fn hostmask(len: u8) -> Self;
    fn network(p: Prefix<Self>) -> ip_network::IpNetwork;
    fn longest_match(t: &ip_network_table::IpNetworkTable<u32>, a: Self) -> Option<u32>;
}

impl Family for u32 {
    const NAME: &'static str = "IPv4";
    const UNIFORM_OVER: &'static str = "0.0.0.0/0";
    const CRATE_ROWS: [&'static str; 3] = ["prefix-trie", "poptrie-crate", "ip_network_table"];
    fn uniform(rng: &mut SplitMix) -> Self {
        rng.next() as u32
    }
    fn random(rng: &mut SplitMix) -> Self {
        rng.next() as u32
    }
    fn hostmask(len: u8) -> Self {
        !u32::MAX.masked(len)
    }
    fn network(p: Prefix<u32>) -> ip_network::IpNetwork {
        ip_network::Ipv4Network::new(Ipv4Addr::from(p.addr), p.len)
            .expect("prefix has no host bits")
            .into()
    }
    #[inline]
    fn longest_match(t: &ip_network_table::IpNetworkTable<u32>, a: u32) -> Option<u32> {
        t.longest_match_ipv4(Ipv4Addr::from(a)).map(|(_, &nh)| nh)
    }
}

impl Family for u128 {
    const NAME: &'static str = "IPv6";
    const UNIFORM_OVER: &'static str = "2000::/3";
    const CRATE_ROWS: [&'static str; 3] = ["prefix-trie6", "poptrie-crate6", "ip_network_table6"];
    fn uniform(rng: &mut SplitMix) -> Self {
        (1 << 125) | (Self::random(rng) >> 3)
    }
    fn random(rng: &mut SplitMix) -> Self {
        (rng.next() as u128) << 64 | rng.next() as u128
    }
    fn hostmask(len: u8) -> Self {
        !u128::MAX.masked(len)
    }
    fn network(p: Prefix<u128>) -> ip_network::IpNetwork {
        ip_network::Ipv6Network::new(Ipv6Addr::from(p.addr), p.len)
            .expect("prefix has no host bits")
            .into()
    }
    #[inline]
    fn longest_match(t: &ip_network_table::IpNetworkTable<u32>, a: u128) -> Option<u32> {
        t.longest_match_ipv6(Ipv6Addr::from(a)).map(|(_, &nh)| nh)
    }
}

/// Where the routes came from.
#[derive(Clone, Debug)]
pub enum Source {
    /// The file, as [`crate::table::Found::shown`] writes it.
    File(String),
    Synthetic(String),
}

/// `n` IPv4 prefixes with a BGP-like mix of lengths: most /24, then /22-/23, /16-/21, a
/// few shorter and a few longer; 1000 next hops.
pub fn synthetic_table(n: usize, seed: u64) -> Vec<(Prefix<u32>, u32)> {
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
            (Prefix::new(addr, len), rng.below(1000) as u32)
        })
        .collect()
}

/// `n` IPv6 prefixes inside 2000::/3 with the real table's mix: about half /48, a
/// sixth /32, the rest /29-/47, and a few /64 and /128; 1000 next hops.
pub fn synthetic_table6(n: usize, seed: u64) -> Vec<(Prefix<u128>, u32)> {
    let mut rng = SplitMix(seed);
    (0..n)
        .map(|_| {
            let len = match rng.below(100) {
                0..=46 => 48,
                47..=59 => 32,
                60..=96 => 29 + rng.below(19) as u8,
                97..=98 => 64,
                _ => 128,
            };
            (
                Prefix::new(u128::uniform(&mut rng), len),
                rng.below(1000) as u32,
            )
        })
        .collect()
}

/// The keys: uniform (see [`Family::uniform`]), and inside announced prefixes.
pub fn make_keys<A: Family>(routes: &[(Prefix<A>, u32)], n: usize, seed: u64) -> (Vec<A>, Vec<A>) {
    let mut rng = SplitMix(seed);
    let uniform = (0..n).map(|_| A::uniform(&mut rng)).collect();
    let inside = (0..n)
        .map(|_| {
            if routes.is_empty() {
                return A::uniform(&mut rng);
            }
            let (p, _) = routes[rng.below(routes.len() as u64) as usize];
            let host = A::random(&mut rng);
            p.addr | (host & A::hostmask(p.len))
        })
        .collect();
    (uniform, inside)
}

/// One implementation, behind the smallest adapter.
trait Fib<A> {
    fn lookup(&self, addr: A) -> Option<u32>;
    /// Ours override it (see [`Lookup::lookup_batch`]); `None`: not measured batched.
    fn lookup_batch(&self, _addrs: &[A], _out: &mut [Option<u32>]) -> Option<()> {
        None
    }
}

/// One of the structures that take single updates.
trait Update<A> {
    fn insert(&mut self, p: Prefix<A>, nh: u32);
    fn delete(&mut self, p: Prefix<A>);
}

struct Ours<L>(L);
impl<A: Addr, L: Lookup<Addr = A>> Fib<A> for Ours<L> {
    #[inline]
    fn lookup(&self, addr: A) -> Option<u32> {
        self.0.lookup(addr)
    }
    fn lookup_batch(&self, addrs: &[A], out: &mut [Option<u32>]) -> Option<()> {
        self.0.lookup_batch(addrs, out);
        Some(())
    }
}
impl<A: Addr> Update<A> for Ours<Radix<A>> {
    fn insert(&mut self, p: Prefix<A>, nh: u32) {
        self.0.insert(p, nh);
    }
    fn delete(&mut self, p: Prefix<A>) {
        self.0.delete(p);
    }
}

struct PrefixTrie<A>(prefix_trie::PrefixMap<(A, u8), u32>)
where
    (A, u8): prefix_trie::Prefix;
impl<A: Addr> Fib<A> for PrefixTrie<A>
where
    (A, u8): prefix_trie::Prefix,
{
    #[inline]
    fn lookup(&self, addr: A) -> Option<u32> {
        self.0
            .get_lpm(&(addr, <A as Addr>::BITS))
            .map(|(_, &nh)| nh)
    }
}
impl<A: Addr> Update<A> for PrefixTrie<A>
where
    (A, u8): prefix_trie::Prefix,
{
    fn insert(&mut self, p: Prefix<A>, nh: u32) {
        self.0.insert((p.addr, p.len), nh);
    }
    fn delete(&mut self, p: Prefix<A>) {
        self.0.remove(&(p.addr, p.len));
    }
}

struct PoptrieCrate<A: Family>(poptrie::Poptrie<(A, u8), u32>);
impl<A: Family> Fib<A> for PoptrieCrate<A> {
    #[inline]
    fn lookup(&self, addr: A) -> Option<u32> {
        self.0.lookup(addr).copied()
    }
}
impl<A: Family> Update<A> for PoptrieCrate<A> {
    fn insert(&mut self, p: Prefix<A>, nh: u32) {
        self.0.insert((p.addr, p.len), nh);
    }
    fn delete(&mut self, p: Prefix<A>) {
        self.0.remove((p.addr, p.len));
    }
}

struct NetworkTable(ip_network_table::IpNetworkTable<u32>);
impl<A: Family> Fib<A> for NetworkTable {
    #[inline]
    fn lookup(&self, addr: A) -> Option<u32> {
        A::longest_match(&self.0, addr)
    }
}
impl<A: Family> Update<A> for NetworkTable {
    fn insert(&mut self, p: Prefix<A>, nh: u32) {
        self.0.insert(A::network(p), nh);
    }
    fn delete(&mut self, p: Prefix<A>) {
        self.0.remove(A::network(p));
    }
}

/// How the update rate was measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateMode {
    /// Single inserts and deletes on the structure itself.
    Single,
    /// Applied to a radix tree, published by a full rebuild every `n` updates.
    Rebuild(usize),
}

/// One implementation measured.
#[derive(Clone, Debug)]
pub struct Row {
    /// The `--skip` name.
    pub key: &'static str,
    pub name: &'static str,
    /// "IPv4", "IPv6".
    pub family: &'static str,
    pub build_secs: f64,
    pub memory: u64,
    pub mlps_uniform: f64,
    pub mlps_inside: f64,
    /// Through `lookup_batch`, for ours.
    pub batched: Option<(f64, f64)>,
    pub updates_per_sec: f64,
    pub update_mode: UpdateMode,
    /// Sample keys whose answer differs from the radix tree's.
    pub mismatches: usize,
}

/// Seconds for one pass over `keys`, one key at a time.
fn pass<A: Copy, F: Fib<A>>(f: &F, keys: &[A]) -> f64 {
    let keys = black_box(keys);
    let t = Instant::now();
    let mut acc = 0u32;
    for &k in keys {
        acc = acc.wrapping_add(f.lookup(k).unwrap_or(1));
    }
    black_box(acc);
    t.elapsed().as_secs_f64()
}

/// As [`pass`], through `lookup_batch` on [`BATCH_KEYS`] keys at a time; `None` if the
/// implementation has no batched lookup.
fn pass_batched<A: Copy, F: Fib<A>>(f: &F, keys: &[A]) -> Option<f64> {
    let mut out = [None; BATCH_KEYS];
    f.lookup_batch(&keys[..0], &mut out[..0])?;
    let keys = black_box(keys);
    let t = Instant::now();
    let mut acc = 0u32;
    for chunk in keys.chunks(BATCH_KEYS) {
        let out = &mut out[..chunk.len()];
        f.lookup_batch(chunk, out);
        for nh in out.iter() {
            acc = acc.wrapping_add(nh.unwrap_or(1));
        }
    }
    black_box(acc);
    Some(t.elapsed().as_secs_f64())
}

/// A built implementation: timed round after round, beside the others, then updated.
trait Built<A> {
    /// Seconds for one pass over `keys`, one at a time or batched (`None`: no batched
    /// lookup).
    fn pass(&self, keys: &[A], batched: bool) -> Option<f64>;
    /// Consumes the structure: the update rate.
    fn update(self: Box<Self>) -> (f64, UpdateMode);
}

struct Entry<F, U> {
    f: F,
    update: U,
}

impl<A: Copy, F: Fib<A>, U: FnOnce(F) -> (f64, UpdateMode)> Built<A> for Entry<F, U> {
    fn pass(&self, keys: &[A], batched: bool) -> Option<f64> {
        if batched {
            pass_batched(&self.f, keys)
        } else {
            Some(pass(&self.f, keys))
        }
    }
    fn update(self: Box<Self>) -> (f64, UpdateMode) {
        (self.update)(self.f)
    }
}

/// An implementation built and checked, its row waiting for the timings.
struct Pending<'a, A> {
    row: Row,
    built: Box<dyn Built<A> + 'a>,
}

struct Workload<'a, A: Addr> {
    routes: &'a [(Prefix<A>, u32)],
    uniform: &'a [A],
    inside: &'a [A],
    /// Sample keys and the radix tree's answers.
    sample: Vec<(A, Option<u32>)>,
    /// The reference tree, which compiled structures are rebuilt from.
    radix: Radix<A>,
    /// Routes deleted then re-inserted for the update rate.
    updates: Vec<(Prefix<A>, u32)>,
    rounds: u32,
}

impl<A: Addr> Workload<'_, A> {
    /// The update operations: every route of `updates` deleted, then each re-inserted.
    fn ops(&self) -> impl Iterator<Item = (Prefix<A>, u32, bool)> + '_ {
        let del = self.updates.iter().map(|&(p, nh)| (p, nh, false));
        del.chain(self.updates.iter().map(|&(p, nh)| (p, nh, true)))
    }
}

/// Builds and checks one implementation; `update` will consume it and give the update
/// rate. The timings are left to [`run_family`], which interleaves the rounds of all.
fn measure<'a, A: Family, F: Fib<A> + 'a>(
    key: &'static str,
    name: &'static str,
    w: &Workload<'_, A>,
    build: impl FnOnce() -> F,
    update: impl FnOnce(F) -> (f64, UpdateMode) + 'a,
) -> Pending<'a, A> {
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
    let mut batch_out = vec![None; w.sample.len()];
    let keys: Vec<A> = w.sample.iter().map(|&(k, _)| k).collect();
    let mismatches = mismatches
        + match f.lookup_batch(&keys, &mut batch_out) {
            Some(()) => w
                .sample
                .iter()
                .zip(&batch_out)
                .filter(|&(&(_, want), &got)| got != want)
                .count(),
            None => 0,
        };
    Pending {
        row: Row {
            key,
            name,
            family: A::NAME,
            build_secs,
            memory,
            mlps_uniform: 0.0,
            mlps_inside: 0.0,
            batched: None,
            updates_per_sec: 0.0,
            update_mode: UpdateMode::Single,
            mismatches,
        },
        built: Box::new(Entry { f, update }),
    }
}

/// Single updates on `f`: the updates per second.
fn single_rate<A: Addr, F: Update<A>>(mut f: F, w: &Workload<'_, A>) -> (f64, UpdateMode) {
    let t = Instant::now();
    let mut n = 0usize;
    for (p, nh, add) in w.ops() {
        if add {
            f.insert(p, nh);
        } else {
            f.delete(p);
        }
        n += 1;
    }
    let secs = t.elapsed().as_secs_f64();
    drop(black_box(f));
    (n as f64 / secs, UpdateMode::Single)
}

/// Updates applied to (a copy of) the radix tree, with a full rebuild of `L` every
/// [`BATCH`] updates (and after the last): the updates per second that reach lookups.
fn rebuild_rate<A: Addr, L: Lookup<Addr = A>>(w: &Workload<'_, A>) -> (f64, UpdateMode) {
    let mut radix = w.radix.clone();
    let ops: Vec<_> = w.ops().collect();
    let t = Instant::now();
    for batch in ops.chunks(BATCH) {
        for &(p, nh, add) in batch {
            if add {
                radix.insert(p, nh);
            } else {
                radix.delete(p);
            }
        }
        black_box(L::build(&radix.routes()));
    }
    let secs = t.elapsed().as_secs_f64();
    (ops.len() as f64 / secs, UpdateMode::Rebuild(BATCH))
}

/// The implementations, by the names `--skip` takes: IPv4 rows, IPv6 rows, and the
/// families as a whole.
pub const IMPLS: [&str; 17] = [
    "radix",
    "dir-24-8",
    "poptrie",
    "poptrie-16",
    "poptrie-20",
    "prefix-trie",
    "poptrie-crate",
    "ip_network_table",
    "radix6",
    "poptrie6",
    "poptrie6-16",
    "poptrie6-20",
    "prefix-trie6",
    "poptrie-crate6",
    "ip_network_table6",
    "ipv4",
    "ipv6",
];

/// A peer left out unless `--slow-peers`: building it on the full table takes several
/// times what the rest of the bench does together.
#[derive(Debug)]
pub struct SlowPeer {
    /// The `--skip` name.
    pub key: &'static str,
    /// As in the table.
    pub name: &'static str,
    /// "IPv4", "IPv6".
    pub family: &'static str,
    /// What is slow, as measured on the full table.
    pub why: &'static str,
}

impl SlowPeer {
    /// What the table and the JSON print in the peer's place.
    pub fn skipped(&self) -> String {
        format!("slow: {}; --slow-peers", self.why)
    }
}

/// The slow peers: the poptrie crate, which inserts one prefix at a time, each insert
/// shifting every later node, so that its build slows as the table grows.
pub const SLOW: [SlowPeer; 2] = [
    SlowPeer {
        key: "poptrie-crate",
        name: "poptrie (crate)",
        family: "IPv4",
        why: "14 min to build the full IPv4 table and 5 min for its updates on a shared 2-core VM",
    },
    SlowPeer {
        key: "poptrie-crate6",
        name: "poptrie (crate)",
        family: "IPv6",
        why: "52 s to build the IPv6 table and 26 s for its updates on a shared 2-core VM, more than the rest of the bench together",
    },
];

/// The peers of [`SLOW`] this run leaves out: all of them unless `--slow-peers`, but
/// those `--skip` names (alone or by family).
pub fn slow_skipped(a: &BenchArgs) -> Vec<&'static SlowPeer> {
    if a.slow_peers {
        return Vec::new();
    }
    SLOW.iter()
        .filter(|p| {
            !a.skip
                .iter()
                .any(|s| s == p.key || s.eq_ignore_ascii_case(p.family))
        })
        .collect()
}

/// Measures our structures of one family, those that `step` (given the `--skip` name)
/// allows.
type Rows<A> =
    for<'a> fn(&'a Workload<'_, A>, &mut dyn FnMut(&'static str) -> bool) -> Vec<Pending<'a, A>>;

/// Measures the crates on one family, those that `step` allows.
fn crates<'a, A: Family>(
    w: &'a Workload<'_, A>,
    step: &mut dyn FnMut(&'static str) -> bool,
) -> Vec<Pending<'a, A>>
where
    (A, u8): prefix_trie::Prefix,
{
    let names = A::CRATE_ROWS;
    let routes = w.routes;
    let mut rows = Vec::new();
    if step(names[0]) {
        rows.push(measure(
            names[0],
            "prefix-trie (crate)",
            w,
            || {
                let mut m = prefix_trie::PrefixMap::new();
                for &(p, nh) in routes {
                    m.insert((p.addr, p.len), nh);
                }
                PrefixTrie(m)
            },
            |f| single_rate(f, w),
        ));
    }
    // Its insert shifts every later node: see [`SLOW`].
    if step(names[1]) {
        rows.push(measure(
            names[1],
            "poptrie (crate)",
            w,
            || {
                let mut m = poptrie::Poptrie::new();
                for &(p, nh) in routes {
                    m.insert((p.addr, p.len), nh);
                }
                PoptrieCrate(m)
            },
            |f| single_rate(f, w),
        ));
    }
    if step(names[2]) {
        rows.push(measure(
            names[2],
            "ip_network_table (crate)",
            w,
            || {
                let mut m = ip_network_table::IpNetworkTable::new();
                for &(p, nh) in routes {
                    m.insert(A::network(p), nh);
                }
                NetworkTable(m)
            },
            |f| single_rate(f, w),
        ));
    }
    rows
}

fn ours_v4<'a>(
    w: &'a Workload<'_, u32>,
    step: &mut dyn FnMut(&'static str) -> bool,
) -> Vec<Pending<'a, u32>> {
    let r = w.routes;
    let mut rows = Vec::new();
    if step("radix") {
        rows.push(measure(
            "radix",
            "radix",
            w,
            || Ours(Radix::build(r)),
            |f| single_rate(f, w),
        ));
    }
    if step("dir-24-8") {
        rows.push(measure(
            "dir-24-8",
            "dir-24-8",
            w,
            || Ours(Dir248::build(r)),
            |_| rebuild_rate::<_, Dir248>(w),
        ));
    }
    if step("poptrie") {
        rows.push(measure(
            "poptrie",
            "poptrie (18-bit direct)",
            w,
            || Ours(Poptrie4::build(r)),
            |_| rebuild_rate::<_, Poptrie4>(w),
        ));
    }
    if step("poptrie-16") {
        rows.push(measure(
            "poptrie-16",
            "poptrie (16-bit direct)",
            w,
            || Ours(Poptrie::<u32, 16>::build(r)),
            |_| rebuild_rate::<_, Poptrie<u32, 16>>(w),
        ));
    }
    if step("poptrie-20") {
        rows.push(measure(
            "poptrie-20",
            "poptrie (20-bit direct)",
            w,
            || Ours(Poptrie::<u32, 20>::build(r)),
            |_| rebuild_rate::<_, Poptrie<u32, 20>>(w),
        ));
    }
    rows
}

fn ours_v6<'a>(
    w: &'a Workload<'_, u128>,
    step: &mut dyn FnMut(&'static str) -> bool,
) -> Vec<Pending<'a, u128>> {
    let r = w.routes;
    let mut rows = Vec::new();
    if step("radix6") {
        rows.push(measure(
            "radix6",
            "radix",
            w,
            || Ours(Radix::build(r)),
            |f| single_rate(f, w),
        ));
    }
    if step("poptrie6") {
        rows.push(measure(
            "poptrie6",
            "poptrie6 (18-bit direct)",
            w,
            || Ours(Poptrie6::build(r)),
            |_| rebuild_rate::<_, Poptrie6>(w),
        ));
    }
    if step("poptrie6-16") {
        rows.push(measure(
            "poptrie6-16",
            "poptrie6 (16-bit direct)",
            w,
            || Ours(Poptrie::<u128, 16>::build(r)),
            |_| rebuild_rate::<_, Poptrie<u128, 16>>(w),
        ));
    }
    if step("poptrie6-20") {
        rows.push(measure(
            "poptrie6-20",
            "poptrie6 (20-bit direct)",
            w,
            || Ours(Poptrie::<u128, 20>::build(r)),
            |_| rebuild_rate::<_, Poptrie<u128, 20>>(w),
        ));
    }
    rows
}

/// Builds and measures every implementation of one family on `routes` but those in
/// `skip`.
fn run_family<A: Family>(
    routes: &[(Prefix<A>, u32)],
    lookups: usize,
    rounds: u32,
    skip: &[String],
    ours: Rows<A>,
    progress: &mut dyn FnMut(&str),
) -> Vec<Row>
where
    (A, u8): prefix_trie::Prefix,
{
    let (uniform, inside) = make_keys(routes, lookups, 0x6d70_7374_6163_6b00);
    progress(&format!("{}: building the reference radix tree", A::NAME));
    let radix = Radix::build(routes);
    let sample = uniform
        .iter()
        .take(50_000)
        .chain(inside.iter().take(50_000))
        .map(|&k| (k, radix.lookup(k)))
        .collect();
    // Distinct routes as the tree holds them (a prefix listed twice keeps its last
    // next hop), a seeded sample of them.
    let mut rng = SplitMix(0x7570_6461_7465);
    let held = radix.routes();
    let mut picked: Vec<usize> = if held.len() <= UPDATES {
        (0..held.len()).collect()
    } else {
        let mut set = std::collections::BTreeSet::new();
        while set.len() < UPDATES {
            set.insert(rng.below(held.len() as u64) as usize);
        }
        set.into_iter().collect()
    };
    // Fisher-Yates: the updates come in a random (seeded) order, not the table's.
    for i in (1..picked.len()).rev() {
        picked.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let updates = picked.into_iter().map(|i| held[i]).collect();
    let w = Workload {
        routes,
        uniform: &uniform,
        inside: &inside,
        sample,
        radix,
        updates,
        rounds,
    };
    let mut step = |name: &'static str| {
        let run = !skip.iter().any(|s| s == name);
        if run {
            progress(&format!("{}: {name}: build, check", A::NAME));
        }
        run
    };
    let mut all = ours(&w, &mut step);
    all.extend(crates(&w, &mut step));
    // The rounds are interleaved (every implementation once, then again): the best of
    // each then comes from the whole run's span, not from one stretch of it, on a
    // machine whose other load comes and goes.
    progress(&format!("{}: timing, {} rounds", A::NAME, w.rounds));
    let sets = [
        (w.uniform, false),
        (w.inside, false),
        (w.uniform, true),
        (w.inside, true),
    ];
    let mut best = vec![[f64::MAX; 4]; all.len()];
    for _ in 0..w.rounds {
        for (p, best) in all.iter().zip(best.iter_mut()) {
            // Untimed: brings the structure back into the caches the others used.
            p.built.pass(w.inside, false);
            for (b, &(keys, batched)) in best.iter_mut().zip(&sets) {
                if let Some(secs) = p.built.pass(keys, batched) {
                    *b = b.min(secs);
                }
            }
        }
    }
    let mlps = |secs: f64| (secs < f64::MAX).then(|| lookups as f64 / secs / 1e6);
    all.into_iter()
        .zip(best)
        .map(|(p, b)| {
            let mut row = p.row;
            progress(&format!("{}: {}: updates", A::NAME, row.key));
            (row.updates_per_sec, row.update_mode) = p.built.update();
            row.mlps_uniform = mlps(b[0]).unwrap_or(0.0);
            row.mlps_inside = mlps(b[1]).unwrap_or(0.0);
            row.batched = mlps(b[2]).zip(mlps(b[3]));
            row
        })
        .collect()
}

/// Builds and measures every IPv4 implementation on `routes` but those in `skip`.
pub fn run_v4(
    routes: &[(Prefix<u32>, u32)],
    lookups: usize,
    rounds: u32,
    skip: &[String],
    mut progress: impl FnMut(&str),
) -> Vec<Row> {
    run_family(routes, lookups, rounds, skip, ours_v4, &mut progress)
}

/// Builds and measures every IPv6 implementation on `routes` but those in `skip`.
pub fn run_v6(
    routes: &[(Prefix<u128>, u32)],
    lookups: usize,
    rounds: u32,
    skip: &[String],
    mut progress: impl FnMut(&str),
) -> Vec<Row> {
    run_family(routes, lookups, rounds, skip, ours_v6, &mut progress)
}

/// A table's two families, and where they came from.
struct Tables {
    v4: Vec<(Prefix<u32>, u32)>,
    v6: Vec<(Prefix<u128>, u32)>,
    source: Source,
}

fn load(a: &BenchArgs, bench: &str) -> Result<Tables, String> {
    Ok(match crate::table::find(a.table.as_deref()) {
        Ok(found) => {
            let shown = found.shown();
            let path = found.path;
            let from = |e: &dyn std::fmt::Display| {
                format!(
                    "bench {bench}: {} (from {}): {e}",
                    path.display(),
                    found.origin
                )
            };
            progress(
                a,
                &format!(
                    "{bench}: reading {} (from {})",
                    path.display(),
                    found.origin
                ),
            );
            let text = std::fs::read_to_string(&path).map_err(|e| from(&e))?;
            let t = table::parse(&text).map_err(|e| from(&e))?;
            Tables {
                v4: t.v4,
                v6: t.v6,
                source: Source::File(shown),
            }
        }
        Err(none) => {
            let why = format!("{none}; synthetic tables of 900000 IPv4 and 180000 IPv6 prefixes");
            progress(a, &format!("{bench}: {why}"));
            Tables {
                v4: synthetic_table(900_000, 1),
                v6: synthetic_table6(180_000, 1),
                source: Source::Synthetic(why),
            }
        }
    })
}

/// The IPv4 routes of the table [`crate::table`] finds, or a synthetic one (for
/// `bench forward`); `bench` names the benchmark in progress lines and errors.
pub fn load_table(
    a: &BenchArgs,
    bench: &str,
) -> Result<(Vec<(route::Prefix4, u32)>, Source), String> {
    let t = load(a, bench)?;
    Ok((t.v4, t.source))
}

/// Both families of the table [`crate::table`] finds (or synthetic ones), for
/// `bench router`.
#[allow(clippy::type_complexity)]
pub fn load_tables(
    a: &BenchArgs,
    bench: &str,
) -> Result<
    (
        Vec<(route::Prefix4, u32)>,
        Vec<(route::Prefix6, u32)>,
        Source,
    ),
    String,
> {
    let t = load(a, bench)?;
    Ok((t.v4, t.v6, t.source))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_implementation_agrees_on_small_synthetic_tables() {
        let _quiet = crate::bench::heap_quiet();
        let routes = synthetic_table(3000, 7);
        let rows = run_v4(&routes, 2000, 1, &[], |_| {});
        assert_eq!(rows.len(), 8);
        let routes6 = synthetic_table6(3000, 7);
        let rows6 = run_v6(&routes6, 2000, 1, &[], |_| {});
        assert_eq!(rows6.len(), 7);
        for r in rows.iter().chain(&rows6) {
            assert_eq!(r.mismatches, 0, "{r:?}");
            assert!(r.mlps_uniform > 0.0 && r.mlps_inside > 0.0, "{r:?}");
            assert!(r.updates_per_sec > 0.0, "{r:?}");
            assert_eq!(r.batched.is_some(), !r.name.ends_with("(crate)"), "{r:?}");
        }
    }

    #[test]
    fn slow_peers_are_left_out_unless_asked_for_and_not_listed_when_skipped() {
        use clap::Parser;
        let left_out = |extra: &[&str]| {
            let argv = ["mpstack-bench", "lpm"].iter().chain(extra);
            let a = BenchArgs::try_parse_from(argv).unwrap();
            slow_skipped(&a).iter().map(|p| p.key).collect::<Vec<_>>()
        };
        assert_eq!(left_out(&[]), ["poptrie-crate", "poptrie-crate6"]);
        assert!(left_out(&["--slow-peers"]).is_empty());
        assert_eq!(left_out(&["--skip", "ipv6"]), ["poptrie-crate"]);
        assert_eq!(
            left_out(&["--skip", "radix,poptrie-crate"]),
            ["poptrie-crate6"]
        );
        assert!(SLOW[0].skipped().ends_with("; --slow-peers"));
    }

    #[test]
    fn skip_leaves_out_rows_by_name() {
        let _quiet = crate::bench::heap_quiet();
        let routes = synthetic_table6(500, 3);
        let skip: Vec<String> = ["radix6", "poptrie6-16", "poptrie6-20", "poptrie-crate6"]
            .map(String::from)
            .to_vec();
        let rows = run_v6(&routes, 500, 1, &skip, |_| {});
        let keys: Vec<&str> = rows.iter().map(|r| r.key).collect();
        assert_eq!(keys, ["poptrie6", "prefix-trie6", "ip_network_table6"]);
    }

    #[test]
    fn ipv6_keys_are_global_unicast_and_inside_prefixes() {
        let _quiet = crate::bench::heap_quiet();
        let routes = synthetic_table6(100, 5);
        let (uniform, inside) = make_keys(&routes, 1000, 9);
        assert!(uniform.iter().all(|k| k >> 125 == 1));
        assert!(inside
            .iter()
            .all(|&k| routes.iter().any(|(p, _)| p.contains(k))));
    }
}
