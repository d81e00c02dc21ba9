//! `mpstack`: the command-line front end — a demo network, a host on a TAP device,
//! and (later) BSD-style control commands and benchmarks.

use clap::{Args, Parser, Subcommand};
use std::process::ExitCode;

mod bench;
mod client;
mod demo;
mod run;
mod services;
mod sysctl;

/// Counts heap bytes in use for `bench tcp`'s idle-connection figure.
#[global_allocator]
static ALLOC: dev::alloc_count::CountingAlloc = dev::alloc_count::CountingAlloc;

#[derive(Parser, Debug)]
#[command(
    name = "mpstack",
    version,
    about = "A multicore userspace TCP/IP stack, router, bridge and firewall",
    long_about = "mpstack runs a userspace network stack: as a virtual network inside one \
process (`demo`), or as a host on a real TAP device (`run`).\n\nExamples:\n  \
mpstack demo\n  sudo mpstack run --tap mp0 --inet 198.18.0.2/24"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run a virtual network of three hosts: ARP, ping, UDP echo (no root needed).
    Demo(DemoArgs),
    /// Run a node on TAP devices: a host (ARP, ND, ping; echo, discard, chargen,
    /// http services) or, with several --tap, --route and --forwarding, a router.
    ///
    /// A router between two links, with a static route: `mpstack run --tap r0 --inet
    /// 198.18.1.1/24 --tap r1 --inet 198.18.2.1/24 --inet6 r0=2001:2:1::1/64 --inet6
    /// r1=2001:2:2::1/64 --forwarding --route 198.19.0.0/16=198.18.2.2`.
    Run(Box<RunArgs>),
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
    /// `mpstack bench fw [--seconds S] [--skip matrix,allow,rfc2544,table,state] [--json]`.
    ///
    /// `router`: 64-byte frames through the real Stack as a router: Mpps on the wall
    /// clock and per core (the workers' CPU time), ns and cycles a packet, the devices'
    /// own cost, and bench forward's design loop in the same run. `mpstack bench router
    /// [--seconds S] [--rounds N] [--workers N] [--flows N] [--table PATH] [--skip
    /// devices,v4-few,v4-full,v6-few,v6-full,ipfw-0,ipfw-1,ipfw-10,ipfw-100,keep-state,design,2w]
    /// [--json]`.
    Bench(BenchArgs),
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// What to measure: tcp (throughput, connections, idle memory beside smoltcp and
    /// Linux), mbuf (the m_pulldown paper's Table 2 on the input path), lpm (IPv4
    /// and IPv6 longest-prefix match on a BGP table: ours beside three crates), or
    /// forward (64-byte IPv4 forwarding through a full table in the PRESTO 2009
    /// paper's three designs, legacy, split L2/L3 and split plus flow table, at 1 and
    /// 2 workers), or fw (the ipfw evaluator on the 2009 dispatch-table paper's
    /// matrix, A: 1/10/100 one-microinstruction rules, B: 10/100 five-microinstruction
    /// rules, with per-phase costs by least squares beside a naive AST interpreter;
    /// Mpps through one allow rule at 1 and 2 threads; RFC 2544 §11.4 with 25 filters;
    /// table lookups at 0, 1k, 100k entries; keep-state with 1M states), or router
    /// (64-byte frames through the real Stack as a router, generator and sinks in
    /// memory: devices alone, IPv4 and IPv6 with 4 routes and the full table, ipfw
    /// with 0/1/10/100 rules before an allow, keep-state with 1M states, at 1 and
    /// --workers workers, beside bench forward's design loop).
    #[arg(default_value = "tcp")]
    pub what: String,
    /// bench mbuf: packets per traffic mix and strategy; bench forward: pre-built
    /// frames per worker (the workers loop over them; each of the worker's flows in
    /// turn, so make it at least --flows to have every flow in the buffer).
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub packets: u64,
    /// bench forward, router: flows (destinations) in the workload, split over the workers.
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
    /// bench forward: seconds of each timed run (each design, each worker count,
    /// each round). bench fw: seconds of each figure in each round (ours and naive,
    /// per case; the rounds interleave the cases; the best ~50 us pass is kept).
    #[arg(long, value_name = "SECS", default_value_t = 0.5, value_parser = secs_arg)]
    pub seconds: f64,
    /// bench lpm: lookups per key set (uniform, inside prefixes) and round.
    #[arg(long, default_value_t = 500_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub lookups: u64,
    /// bench lpm, forward, router: the route table (`prefix/len AS` lines); default: iptrie 0.11.2's
    /// benches/bgpas.lpm in cargo's registry sources.
    #[arg(long, value_name = "PATH")]
    pub table: Option<std::path::PathBuf>,
    /// bench lpm: implementations to leave out, comma-separated: IPv4 radix, dir-24-8,
    /// poptrie, poptrie-16, poptrie-20, prefix-trie, poptrie-crate, ip_network_table;
    /// IPv6 radix6, poptrie6, poptrie6-16, poptrie6-20, prefix-trie6, poptrie-crate6,
    /// ip_network_table6; or a whole family, ipv4 or ipv6. bench forward: designs to
    /// leave out (legacy, split, split+flowtable). bench fw: case groups to leave out
    /// (matrix, allow, rfc2544, table, state). bench router: rows to leave out
    /// (devices, v4-few, v4-full, v6-few, v6-full, ipfw-0, ipfw-1, ipfw-10, ipfw-100,
    /// keep-state, design; 2w: every second worker count).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub skip: Vec<String>,
    /// MiB per transfer.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub mbytes: u64,
    /// Rounds (the best of each is compared; the machines are shared and noisy).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Worker threads per mpstack stack; bench forward: the second worker count
    /// measured beside 1 (2 unless this is more than 1).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub workers: u16,
    /// What to run, comma-separated (default: all): the throughput rows mpstack,
    /// mpstack-polled (both stacks in one thread, like smoltcp), mpstack-tso and
    /// mpstack-polled-tso (the same over a memory wire with checksum and segmentation
    /// offload), mpstack-polled-big (512 KiB segments, as Linux's BIG TCP), smoltcp,
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
        default_value = "mpstack,mpstack-polled,mpstack-tso,mpstack-polled-tso,mpstack-polled-big,smoltcp,smoltcp-64k,smoltcp-64k-nocsum,linux-loopback,linux-veth,tap-in,tap-out,tap-in-plain,tap-out-plain,smoltcp-tap-in,smoltcp-tap-out,conns,idle"
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

/// A positive number of seconds, at most a day.
fn secs_arg(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 86_400.0 => Ok(v),
        _ => Err(format!(
            "'{s}': expected seconds, more than 0 and at most 86400"
        )),
    }
}

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Seed for the virtual network's randomness; the same seed gives the same run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Workers per host.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub workers: u16,
    /// Echo requests from alpha to each other host.
    #[arg(long, default_value_t = 3)]
    pub pings: u16,
    /// Bytes of data in each echo request.
    #[arg(long, default_value_t = 56, value_parser = clap::value_parser!(u16).range(0..=1472))]
    pub size: u16,
    /// Write every frame to this pcap file (readable by tcpdump and Wireshark).
    #[arg(long)]
    pub pcap: Option<std::path::PathBuf>,
    /// Print all counters, including zeros.
    #[arg(long)]
    pub all_counters: bool,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// TAP device to open (created if missing; needs root or CAP_NET_ADMIN).
    /// Repeat it to make a router between several links: `--tap r0 --tap r1`.
    #[arg(long, value_name = "NAME", required = true)]
    pub tap: Vec<String>,
    /// IPv4 address of an interface, [TAP=]ADDRESS/PREFIXLEN (repeatable). Without
    /// `TAP=`, the Nth --inet goes to the Nth --tap.
    #[arg(long, value_name = "[TAP=]ADDR/LEN", required = true)]
    pub inet: Vec<String>,
    /// Default gateway.
    #[arg(long, value_name = "ADDR")]
    pub gw: Option<String>,
    /// A static route, PREFIX=GATEWAY (repeatable): `198.19.0.0/16=198.18.1.2`,
    /// `default=198.18.1.1`, `2001:2:9::/48=2001:2:1::2`; the interface is the one
    /// whose network holds the gateway. The same prefix twice with two gateways is
    /// a multipath (ECMP) route. GATEWAY may also be `blackhole` (drop silently),
    /// `reject` (drop with ICMP unreachable) or `prohibit` (administratively
    /// prohibited).
    #[arg(long, value_name = "PREFIX=GW")]
    pub route: Vec<String>,
    /// An interface's MTU, [TAP=]BYTES (repeatable; without `TAP=`, the first TAP);
    /// default: the TAP's own.
    #[arg(long, value_name = "[TAP=]BYTES")]
    pub mtu: Vec<String>,
    /// Forward packets between the interfaces (both families): a router.
    #[arg(long)]
    pub forwarding: bool,
    /// Keep a per-worker flow table for forwarded packets, keyed by `dst` (the
    /// destination) or `4tuple` (addresses, ports, protocol): a flow keeps its next
    /// hop while that lives, so adding a multipath route's gateway moves no existing
    /// connection (stateful ECMP). Entries idle 30 s are dropped.
    #[arg(long, value_name = "MODE", value_parser = ["dst", "4tuple"])]
    pub flow_table: Option<String>,
    /// Load an ipfw(8) rules file (`add …` rules, `table …`, dummynet's `pipe N
    /// config …` / `queue N config …`, `#` comments) and run it at the IPv4 and IPv6
    /// points, in and out; `ipfw show` and the pipes are printed at exit. Errors
    /// name the line and column.
    #[arg(long, value_name = "FILE")]
    pub ipfw: Option<std::path::PathBuf>,
    /// Also run the --ipfw rules on whole Ethernet frames, arriving and leaving
    /// (FreeBSD's net.link.ether.ipfw=1): the pass where `layer2`, `mac` and
    /// `mac-type` match. ARP frames pass the rules too: allow them (`allow ip from
    /// any to any mac-type arp layer2`) before denying.
    #[arg(long, requires = "ipfw")]
    pub ipfw_layer2: bool,
    /// What the default rule 65535 does with --ipfw.
    #[arg(long, value_name = "ACTION", default_value = "deny", value_parser = ["allow", "deny"])]
    pub ipfw_default: String,
    /// Send IPv6 router advertisements on every interface with an IPv6 address (its
    /// prefixes, for SLAAC; the MTU; this node as default router with --forwarding).
    #[arg(long)]
    pub rtadv: bool,
    /// Don't send ICMP redirects when forwarding a packet back out of the interface
    /// it came in on.
    #[arg(long)]
    pub no_redirects: bool,
    /// IPv6 address with prefix length, [TAP=]ADDR6/LEN, e.g. 2001:2::2/64
    /// (repeatable; without `TAP=`, on the first --tap). The first on an interface
    /// also turns IPv6 on there with a link-local address from the MAC; every address
    /// goes through duplicate address detection (about a second) before it is used.
    #[arg(long, value_name = "[TAP=]ADDR6/LEN")]
    pub inet6: Vec<String>,
    /// IPv6 default router (a link-local or on-link address).
    #[arg(long, value_name = "ADDR6")]
    pub gw6: Option<String>,
    /// Stateless address autoconfiguration: solicit routers when IPv6 comes up and
    /// form an address from each advertised /64 (RFC 4862). Default routers and
    /// on-link prefixes are taken from advertisements either way.
    #[arg(long)]
    pub slaac: bool,
    /// Duplicate address detection probes per IPv6 address, one a second (0: off).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub dad_transmits: u8,
    /// Worker threads.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub workers: u16,
    /// TAP queues (multi-queue TAP when more than 1); defaults to the worker count.
    #[arg(long)]
    pub queues: Option<u16>,
    /// Record every frame received and sent to this pcap file (with several TAPs,
    /// one file per TAP: FILE.TAPNAME after the first).
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<std::path::PathBuf>,
    /// Link-layer address of the first TAP (default: derived from the TAP name).
    #[arg(long, value_name = "MAC")]
    pub mac: Option<String>,
    /// Services to run, comma-separated: echo (TCP and UDP port 7), discard (TCP 9),
    /// chargen (TCP 19), http=DIR (static files on TCP 80), or none.
    #[arg(long, value_name = "LIST", default_value = "echo")]
    pub serve: String,
    /// Stop after this many seconds (default: run until SIGINT/SIGTERM).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Client: connect to this TCP server once up, send `--send` bytes, shut down
    /// the sending side, read until the peer closes, print both directions' byte
    /// counts and SHA-256, and exit (status 1 if the transfer failed).
    #[arg(long, value_name = "ADDR:PORT")]
    pub connect: Option<String>,
    /// Bytes the client sends (a seeded pseudo-random stream): 1000, 64K, 100M, 1G.
    #[arg(long, value_name = "BYTES", default_value = "0", requires = "connect")]
    pub send: String,
    /// Seed of the client's byte stream.
    #[arg(long, default_value_t = 1, requires = "connect")]
    pub seed: u64,
    /// Microseconds a worker keeps polling (yielding the CPU) after its last packet
    /// before it sleeps: lower saves CPU on an idle node, higher answers faster.
    #[arg(long, value_name = "USECS", default_value_t = 200, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub busy_poll: u64,
    /// Checksum and TCP segmentation offload on the TAPs, through the virtio-net
    /// header (as a QEMU guest has them): the kernel hands over and takes TCP
    /// segments of up to 64 KiB (IPv4 and IPv6) and fills in checksums, so a bulk
    /// transfer costs far fewer packets on both sides. Forwarded onto a link that
    /// cannot take them whole, such segments are cut in software.
    #[arg(long)]
    pub offload: bool,
    /// A TCP setting under FreeBSD's sysctl name, for every connection of the node
    /// (repeatable), e.g. net.inet.tcp.cc.algorithm=newreno.
    #[arg(long, value_name = "NAME=VALUE", long_help = crate::sysctl::help())]
    pub sysctl: Vec<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Demo(a) => demo::main(a),
        Cmd::Run(a) => run::main(*a),
        Cmd::Bench(a) => bench::main(a),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("mpstack: {e}");
            ExitCode::from(2)
        }
    }
}
