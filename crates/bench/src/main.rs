//! `mpstack-bench`: mpstack's benchmarks, each measuring ours beside a baseline and peers
//! in the same run. It is a binary of its own so that the shipping `mpstack` neither
//! builds nor links the peers (smoltcp, prefix-trie, poptrie, ip_network_table) nor
//! counts its heap; `mpstack bench WHAT [ARGS]` runs it from the directory of `mpstack`
//! itself, where `cargo build --release` puts both.
//!
//! This file owns the command line ([`BenchArgs`]) and the counting allocator; [`bench`]
//! has the benchmarks (it may call every mpstack crate and the peers), [`plot`] draws
//! their `--plot` charts and [`table`] finds
//! the BGP table they route on.
#![forbid(unsafe_code)]

use clap::Parser;
use std::process::ExitCode;

mod bench;
mod plot;
mod table;

/// Counts heap bytes in use: `bench tcp`'s idle-connection figure and `bench lpm`'s
/// memory column read it (`dev::alloc_count::live_bytes`).
#[global_allocator]
static ALLOC: dev::alloc_count::CountingAlloc = dev::alloc_count::CountingAlloc;

/// Measure mpstack beside its baseline and peers in the same run.
///
/// `tcp`: single-flow throughput, N MiB over one connection, timed from the first
/// write until the receiver has every byte and the FIN; best of --rounds for each of
/// mpstack (two stacks in one process over an MTU 1500 memory wire), smoltcp 0.14
/// (two interfaces in one thread over MTU 1500 memory frame queues), Linux TCP over
/// loopback, and Linux TCP between two network namespaces over veth with iperf3
/// (needs root, ip and iperf3; otherwise printed as skipped). Prints the ratios
/// mpstack/smoltcp, mpstack/linux-veth and mpstack/linux-loopback. Each round of
/// a row that runs inside this program (mpstack's, smoltcp's, linux-loopback) is
/// measured in a fresh process of its own after an untimed 16 MiB transfer, so
/// that no row runs in a heap the rows before it shaped.
///
/// In the same run (after the rounds, once each): `conns`, connections per second
/// for --conns-secs with 4 client threads, each connection opened, a 64-byte request
/// answered with 64 bytes and closed (server first), mpstack beside Linux TCP over
/// loopback, with their ratio; and `idle`, --idle-conns connections opened between
/// two mpstack stacks and kept idle, with the growth of the heap (a counting
/// allocator) and of VmRSS per connection and per endpoint.
///
/// `fw`: the ipfw evaluator (crate fw) beside a naive AST interpreter in the same
/// run: the 2009 dispatch-table paper's matrix with per-phase costs (entry, rule
/// header, microinstruction; ns and TSC cycles), one allow rule, RFC 2544 §11.4,
/// table lookups and keep-state at 1M states; targets marked met or missed.
/// `mpstack bench fw [--seconds S] [--skip matrix,allow,rfc2544,table,state] [--plot
/// FILE.svg] [--json]`.
///
/// `router`: 64-byte frames through the real Stack as a router: Mpps on the wall
/// clock and per core (the workers' CPU time), ns and cycles a packet, the devices'
/// own cost, and bench forward's design loop in the same run (design on --flows
/// flows of its own, design-1m on v4-full-1m's). v4-full-1m sends 1,048,576
/// destinations over the whole table, each its own; pool has the sinks free each
/// buffer to the mbuf pool and the generator allocate from it, where every other row
/// recycles the buffers from sink to generator; arc-other is v4-few with a hook on
/// the generator's out arcs, which no packet leaves by (what a feature on one
/// interface costs the others). `mpstack bench router [--seconds S]
/// [--rounds N] [--workers N] [--flows N] [--table PATH] [--case LIST] [--skip
/// devices,v4-few,pool,v4-full,v4-full-1m,v4-connected,v6-few,v6-full,arc-other,ipfw-0,ipfw-1,ipfw-10,ipfw-100,keep-state,design,design-1m,2w]
/// [--plot FILE.svg] [--json]`. With --plot, the rows measured at more than one worker
/// count (v4-few, pool, v4-full, v4-full-1m, v6-full, ipfw-10) are measured at every
/// count from 1 to --workers (2 if --workers is 1), not only at 1 and --workers.
///
/// `bridge`: 64-byte frames through the real Stack as a learning bridge (a generator
/// member and four sink members, in memory): known unicast over 1k and 1M learned
/// addresses, unknown unicast flooded to four members, and the devices alone, at 1
/// and --workers workers, with the sinks' buffers recycled to the generator; and
/// learned-1k-pool and flood-pool, the 1k and flood rows with buffers freed to and
/// allocated from the mbuf pool as a driver does (flooding's rate against known
/// unicast printed for both). `mpstack bench bridge [--seconds S] [--rounds N]
/// [--workers N] [--flows N] [--skip
/// devices,learned-1k,learned-1m,flood,learned-1k-pool,flood-pool,2w] [--json]`.
///
/// `rfc2544` (needs root): RFC 2544 over veth pairs in namespaces it makes, a
/// tester on AF_PACKET: throughput and latency at the standard frame sizes, the
/// frame-loss curve and back-to-back bursts at the first size, for the tester
/// looped to itself (its ceiling), the Linux kernel router, the mpstack router
/// (`mpstack run --packet`), the Linux kernel bridge and the mpstack bridge, side by
/// side; RFC 2889's forwarding rate, address caching capacity, address learning
/// rate and broadcast forwarding for the two bridges; then the routers on equal CPU
/// (`one-core`): the tester and the device pinned to one CPU together, 64-byte
/// frames forwarded a second by the Linux kernel router, by `device-layer` (mpstack's
/// AF_PACKET device code alone, each frame sent on with its addresses rewritten: the
/// least an AF_PACKET router does) and by the mpstack router. `mpstack bench rfc2544
/// [--seconds S] [--sizes 64,1518] [--senders N] [--workers N] [--every-size] [--plot FILE.svg]
/// [--skip tester,linux-router,mpstack-router,linux-bridge,mpstack-bridge,device-layer,one-core] [--json]`.
///
/// `netchannel`: 64-byte UDP frames from a generator device in memory into the real
/// Stack, received by one application thread through a netchannel (the packets
/// themselves, in batches) beside a UDP socket (recv_from, a copy of each payload)
/// in the same run, at 1 and --workers workers: Mpps the application received,
/// Mpps offered, drops on the full queue. `mpstack bench netchannel [--seconds S]
/// [--rounds N] [--workers N] [--json]`.
///
/// `quic`: QUIC bulk throughput of quinn 0.11 on mpstack (two stacks in one process on
/// a memory wire, --workers each) beside quinn on Linux kernel UDP over 127.0.0.1, in
/// the same run: --mbytes MiB client to server over one stream and over 4, every byte
/// checked; best of --rounds; the ratios mpstack/linux-loopback. `mpstack bench quic
/// [--mbytes N] [--rounds N] [--workers N] [--skip
/// mpstack,linux-loopback,mpstack-4s,linux-loopback-4s] [--json]`.
///
/// `loss`: one TCP flow's goodput against random loss (0, 0.1, 0.5, 1, 2, 5, 10%
/// each way) for mpstack's CUBIC, NewReno and BBR: two real Stacks in the simulator,
/// virtual time, a 100 Mbit/s wire with a 20 ms round trip and a queue of one BDP;
/// bytes the receiver read in --sim-secs simulated seconds, the mean of --rounds
/// seeds; beside the Mathis et al. model (MSS/RTT * sqrt(3/2)/sqrt(p)), a model,
/// not a measurement. Deterministic for a seed. `mpstack bench loss [--loss LIST]
/// [--sim-secs S] [--rounds N] [--skip cubic,newreno,bbr] [--plot FILE.svg] [--json]`.
#[derive(Parser, Debug)]
#[command(name = "mpstack-bench", version, after_long_help = AFTER_HELP)]
pub struct BenchArgs {
    /// What to measure: tcp (throughput, connections, idle memory beside smoltcp and
    /// Linux), mbuf (the m_pulldown paper's Table 2 on the input path), lpm (IPv4
    /// and IPv6 longest-prefix match on a BGP table: ours beside three crates), or
    /// fib (routes from FRR's zebra through the FPM into the real Stack: the full
    /// table's load time and the update rate with lookups running, beside the
    /// embedded API's one batch, a compilation per change and the Linux kernel's
    /// `ip -batch`; and a generated config file of 100,000 routes, then of 100,000
    /// ipfw table entries, through the parse and apply of `mpstack run --config`
    /// and SIGHUP, then the same as batches over the control socket, `mpstack
    /// config apply FILE` and `mpstack ipfw /FILE`), or forward (64-byte IPv4 forwarding through a full table in the PRESTO 2009
    /// paper's three designs, legacy, split L2/L3 and split plus flow table, at 1 and
    /// 2 workers), or fw (the ipfw evaluator on the 2009 dispatch-table paper's
    /// matrix, A: 1/10/100 one-microinstruction rules, B: 10/100 five-microinstruction
    /// rules, with per-phase costs by least squares beside a naive AST interpreter;
    /// Mpps through one allow rule at 1 and 2 threads; RFC 2544 §11.4 with 25 filters;
    /// table lookups at 0, 1k, 100k entries; keep-state with 1M states), or router
    /// (64-byte frames through the real Stack as a router, generator and sinks in
    /// memory: devices alone, IPv4 and IPv6 with 4 routes and the full table, the
    /// full IPv4 table over 1M destinations, hosts on a connected subnet, ipfw with
    /// 0/1/10/100 rules before an allow, keep-state with 1M states, buffers from the
    /// pool, at 1 and --workers workers, beside bench forward's design loop), or bridge (64-byte
    /// frames through the real Stack as a learning bridge: known unicast with 1k and
    /// 1M learned addresses, flooding, the devices alone), or rfc2544 (needs root: RFC
    /// 2544 and RFC 2889 over veth pairs, a tester on AF_PACKET, the Linux kernel's and
    /// mpstack's router and bridge side by side, and the routers on one CPU beside
    /// the AF_PACKET device layer alone), or netchannel
    /// (64-byte packets received through a netchannel beside a UDP socket), or quic
    /// (quinn's bulk throughput on mpstack beside quinn on Linux loopback UDP), or
    /// loss (simulated TCP goodput against random loss, per congestion control,
    /// beside the Mathis et al. model).
    #[arg(default_value = "tcp")]
    pub what: String,
    /// bench mbuf: packets per traffic mix and strategy; bench forward: pre-built
    /// frames per worker (the workers loop over them; each of the worker's flows in
    /// turn, so make it at least --flows to have every flow in the buffer).
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub packets: u64,
    /// bench forward, router: flows (destinations) in the workload, split over the workers
    /// (bench router's v4-full-1m and keep-state rows have 1,048,576 of their own).
    #[arg(long, default_value_t = 16_384, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub flows: u64,
    /// bench forward: next hops (gateways, spread over 4 interfaces) the routes use;
    /// fewer means more workers contending for each one's entry in the legacy design.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=250))]
    pub nexthops: u32,
    /// bench forward: what the flow table design keys its entries on: dst (the
    /// destination, the paper's forwarding mode) or 4tuple (addresses, ports and
    /// protocol: stateful ECMP's).
    #[arg(long, value_name = "MODE", default_value = "dst", value_parser = ["dst", "4tuple"])]
    pub flow_mode: String,
    /// Seconds of each timed run: bench forward (each design, each worker count, each
    /// round), router, bridge and netchannel (each row, worker count and round); bench
    /// rfc2544: of each trial (of the search, and of the one-core comparison). bench fw: seconds of each figure in each
    /// round (ours and naive, per case; the rounds interleave the cases; the best ~50
    /// us pass is kept).
    #[arg(long, value_name = "SECS", default_value_t = 0.5, value_parser = secs_arg)]
    pub seconds: f64,
    /// bench lpm: lookups per key set (uniform, inside prefixes) and round.
    #[arg(long, default_value_t = 500_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub lookups: u64,
    /// bench fib: route changes fed after the full table (half withdrawals, half
    /// announcements moving a route to the other next hop).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(2..=100_000_000))]
    pub updates: u64,
    /// bench lpm, fib, forward, router: the route table (`prefix/len AS` lines). Without
    /// it: the file $MPSTACK_BGP_TABLE names, else iptrie 0.11.2's benches/bgpas.lpm in
    /// cargo's registry sources ($CARGO_HOME/registry/src/*/, CARGO_HOME ~/.cargo
    /// unless set; `cargo fetch` in the workspace brings it), else synthetic tables.
    /// The progress lines say which was used; the output names the file.
    #[arg(long, value_name = "PATH")]
    pub table: Option<std::path::PathBuf>,
    /// bench lpm: also build and time the peers whose build on the full table takes
    /// minutes: poptrie-crate (about 14 minutes to build the full IPv4 table and 5 to
    /// update it, on a shared 2-core VM) and poptrie-crate6 (about 80 s). Without it
    /// they are listed as skipped, with the reason, and the bench takes about half a
    /// minute.
    #[arg(long)]
    pub slow_peers: bool,
    /// bench lpm: implementations to leave out, comma-separated: IPv4 radix, dir-24-8,
    /// poptrie, poptrie-16, poptrie-20, prefix-trie, poptrie-crate, ip_network_table;
    /// IPv6 radix6, poptrie6, poptrie6-16, poptrie6-20, prefix-trie6, poptrie-crate6,
    /// ip_network_table6; or a whole family, ipv4 or ipv6. bench forward: designs to
    /// leave out (legacy, split, split+flowtable). bench fw: case groups to leave out
    /// (matrix, allow, rfc2544, table, state). bench router: rows to leave out
    /// (devices, v4-few, pool, v4-full, v4-full-1m, v4-connected, v6-few, v6-full,
    /// arc-other, ipfw-0, ipfw-1, ipfw-10, ipfw-100, keep-state, design, design-1m; 2w: every
    /// second worker count). bench bridge: rows to
    /// leave out (devices, learned-1k, learned-1m, flood, learned-1k-pool, flood-pool,
    /// 2w). bench rfc2544:
    /// devices to leave out (tester, linux-router, mpstack-router, linux-bridge,
    /// mpstack-bridge; a router left out is left out of the one-core comparison too,
    /// device-layer leaves out its floor, one-core the whole comparison). bench quic: rows to leave out (mpstack, linux-loopback,
    /// mpstack-4s, linux-loopback-4s). bench loss: congestion controls to leave out
    /// (cubic, newreno, bbr).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub skip: Vec<String>,
    /// bench router: the rows to run, comma-separated, the names --skip takes (default:
    /// all); a design loop comes with the row it is compared with (design with v4-full,
    /// design-1m with v4-full-1m), and a row that scales is measured at --workers too
    /// unless --skip 2w.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub case: Vec<String>,
    /// bench rfc2544: frame sizes in bytes, FCS included (default: RFC 2544's 64,
    /// 128, 256, 512, 1024, 1280, 1518).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub sizes: Vec<usize>,
    /// bench rfc2544: the tester's sending threads (a socket each). The Linux
    /// kernel forwards a veth frame in its sender's system call, so with one it is
    /// the tester that bounds the Linux router. Paced senders sleep between
    /// chunks of frames, leaving their cores to the device meanwhile.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=16))]
    pub senders: u16,
    /// bench rfc2544: the frame-loss curve and back-to-back bursts at every frame
    /// size, not only the first (a longer run: about a minute more per size).
    #[arg(long)]
    pub every_size: bool,
    /// Write the results as an SVG chart. bench rfc2544: throughput against frame
    /// size, one line a device, to FILE. bench router: two charts, not FILE itself
    /// but FILE with -workers and -rules before its extension (router.svg gives
    /// router-workers.svg and router-rules.svg): Mpps on the wall clock against
    /// workers, a line a row measured at more than one worker count, the design loop
    /// dashed (measured at 1 and --workers only); and Mpps against ipfw rules,
    /// 0/1/10/100, at 1 worker, v4-few without ipfw dashed. bench fw: ns a packet against rules
    /// in the matrix, ours beside the naive interpreter, to FILE. bench loss: goodput
    /// against loss, a line a congestion control, the Mathis model dashed, to FILE.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<std::path::PathBuf>,
    /// bench loss: loss percentages each way, comma-separated (default 0, 0.1, 0.5,
    /// 1, 2, 5, 10).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub loss: Vec<f64>,
    /// bench loss: simulated seconds of each transfer (virtual time: the wall time it
    /// takes grows with the packets carried, not with this alone).
    #[arg(long, value_name = "SECS", default_value_t = 10.0, value_parser = secs_arg)]
    pub sim_secs: f64,
    /// MiB per transfer.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub mbytes: u64,
    /// Rounds (the best of each is compared; the machines are shared and noisy).
    /// bench loss: seeds per point (their mean is reported; virtual time is not noisy,
    /// the loss pattern is what varies).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Worker threads per mpstack stack; bench forward: the second worker count
    /// measured beside 1 (2 unless this is more than 1); bench rfc2544: the mpstack
    /// devices' workers.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub workers: u16,
    /// What to run, comma-separated (default: all): the throughput rows mpstack,
    /// mpstack-polled (both stacks in one thread, like smoltcp), mpstack-tso and
    /// mpstack-polled-tso (the same over a memory wire with checksum and segmentation
    /// offload), mpstack-polled-big (512 KiB segments, as Linux's BIG TCP),
    /// mpstack-zc, mpstack-tso-zc and mpstack-polled-big-zc (those rows with the
    /// zero-copy calls, write_with and read_with), smoltcp,
    /// smoltcp-64k (64 KiB frames), smoltcp-64k-nocsum (the same without
    /// checksums, as over an offloading device), linux-loopback, linux-veth,
    /// tap-in and tap-out (Linux → mpstack and mpstack → Linux over an offload TAP;
    /// need root), tap-in-plain and tap-out-plain (the same without offload), with
    /// smoltcp-tap-in and smoltcp-tap-out (smoltcp on its own TAP),
    /// and the connection figures conns and idle.
    #[arg(
        long,
        value_name = "LIST",
        value_enum,
        value_delimiter = ',',
        default_value = "mpstack,mpstack-polled,mpstack-tso,mpstack-polled-tso,mpstack-polled-big,mpstack-zc,mpstack-tso-zc,mpstack-polled-big-zc,smoltcp,smoltcp-64k,smoltcp-64k-nocsum,linux-loopback,linux-veth,tap-in,tap-out,tap-in-plain,tap-out-plain,smoltcp-tap-in,smoltcp-tap-out,conns,idle"
    )]
    pub only: Vec<bench::Impl>,
    /// Seconds of the connections-per-second workload (for each of mpstack and Linux).
    #[arg(long, value_name = "SECS", default_value_t = 2.0, value_parser = secs_arg)]
    pub conns_secs: f64,
    /// Idle connections to open for the memory figure.
    #[arg(long, value_name = "N", default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub idle_conns: u64,
    /// Time allowed to open the idle connections; the figure covers those reached.
    #[arg(long, value_name = "SECS", default_value_t = 60.0, value_parser = secs_arg)]
    pub idle_secs: f64,
    /// One JSON object per line for each result, skipped peer and ratio, instead of the
    /// table (and no progress lines on stderr).
    #[arg(long)]
    pub json: bool,
    /// Internal (bench tcp runs itself with it): measure this one in-process row once,
    /// after a short warm-up, and print its bytes and seconds on stdout.
    #[arg(long, value_name = "ROW", value_enum, hide = true)]
    pub child: Option<bench::Impl>,
}

/// The end of `--help`.
const AFTER_HELP: &str = "Each benchmark finishes in about two minutes or less with its \
defaults on a 2-core machine (`bench lpm` leaves its slow peers out unless --slow-peers). \
Run through `mpstack bench WHAT [ARGS]`, which runs this program from the directory of \
`mpstack`, or directly as `mpstack-bench WHAT [ARGS]`; `cargo build --release` builds both.";

/// A positive number of seconds, at most a day.
fn secs_arg(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 86_400.0 => Ok(v),
        _ => Err(format!(
            "'{s}': expected seconds, more than 0 and at most 86400"
        )),
    }
}

fn main() -> ExitCode {
    match bench::main(BenchArgs::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("mpstack-bench: {e}");
            ExitCode::from(2)
        }
    }
}
