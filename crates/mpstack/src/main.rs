//! `mpstack`: the command-line front end — a demo network, a host or router on TAP
//! devices, and BSD-style commands that change a running node through its control
//! socket (`control`). `mpstack bench` runs the
//! benchmarks, which are a program of their own (`mpstack-bench`, crates/bench), so
//! that this binary carries neither their peer crates nor a counting allocator.
#![forbid(unsafe_code)]

use clap::{Args, Parser, Subcommand};
use std::process::ExitCode;

mod bench_exec;
mod client;
use mpstack::control;
mod demo;
mod run;
use mpstack::services;
use mpstack::sysctl;

#[derive(Parser, Debug)]
#[command(
    name = "mpstack",
    version,
    about = "A multicore userspace TCP/IP stack, router and ipfw-style firewall",
    long_about = "mpstack runs a userspace network stack: as a virtual network inside one \
process (`demo`), or on real links (`run`: TAP devices, or Linux interfaces through AF_PACKET) \
as a host, a router between several links or a learning bridge, with an optional ipfw-style \
firewall. The control commands (ifconfig, route, netstat, arp, ndp, ipfw, sysctl, config) \
talk to a running node. `bench` runs its benchmarks.\n\nExamples:\n  \
mpstack demo\n  sudo mpstack run --tap mp0 --inet 198.18.0.2/24"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run a virtual network in one process (no root needed): by default two LANs
    /// joined by a router with a firewall; --list names the scenarios.
    Demo(DemoArgs),
    /// Run a node on TAP devices or (--packet) Linux interfaces through AF_PACKET: a
    /// host (ARP, ND, ping; with --serve, echo, discard, chargen, http services); with several links,
    /// --route and --forwarding, a router; with --bridge, a learning bridge; VLANs
    /// (--vlan) and gif/gre tunnels (--tunnel) as interfaces.
    ///
    /// A router between two links, with a static route: `mpstack run --tap r0 --inet
    /// 198.18.1.1/24 --tap r1 --inet 198.18.2.1/24 --inet6 r0=2001:2:1::1/64 --inet6
    /// r1=2001:2:2::1/64 --forwarding --route 198.19.0.0/16=198.18.2.2`.
    ///
    /// A bridge of three links with an address of its own and the spanning tree:
    /// `mpstack run --tap b0 --tap b1 --tap b2 --bridge bridge0=b0,b1,b2 --inet
    /// bridge0=198.18.0.254/24 --stp`.
    Run(Box<RunArgs>),
    /// Measure mpstack beside its baseline and peers: tcp, mbuf, lpm, fib, forward, fw,
    /// router, bridge, rfc2544, netchannel, quic, loss. Runs the `mpstack-bench` program from this program's own directory
    /// (`cargo build --release` builds both; the benchmarks and their peer crates are
    /// kept out of this binary), with the arguments unchanged; its exit status is
    /// this command's. `mpstack bench --help` is its help: the benchmarks, their
    /// options and defaults.
    #[command(disable_help_flag = true)]
    Bench(bench_exec::BenchArgs),
    /// A running node's interfaces: list them, add or delete addresses, set the
    /// MTU, as ifconfig(8). `mpstack ifconfig [-j NODE] --help`.
    #[command(disable_help_flag = true)]
    Ifconfig(CtlArgs),
    /// A running node's routes, as route(8): add, delete, change, get, show,
    /// flush, monitor. `mpstack route [-j NODE] --help`.
    #[command(disable_help_flag = true)]
    Route(CtlArgs),
    /// A running node's connections (-an), routing tables (-rn), counters (-s),
    /// interfaces (-i) and live rates (-w SECS), as netstat(1).
    #[command(disable_help_flag = true)]
    Netstat(CtlArgs),
    /// A running node's ARP table: -a, -d HOST, -s HOST MAC, as arp(8).
    #[command(disable_help_flag = true)]
    Arp(CtlArgs),
    /// A running node's IPv6 neighbour table: -a, -d HOST, -s HOST MAC, as ndp(8).
    #[command(disable_help_flag = true)]
    Ndp(CtlArgs),
    /// A running node's firewall, as ipfw(8): add, delete, show, list, zero, set,
    /// table, pipe, queue; `mpstack ipfw /FILE` runs a file of them in one batch.
    #[command(disable_help_flag = true)]
    Ipfw(CtlArgs),
    /// A running node's tunables by their FreeBSD names, as sysctl(8): NAME,
    /// NAME=VALUE, -a.
    #[command(disable_help_flag = true)]
    Sysctl(CtlArgs),
    /// Many changes to a running node in one batch: `mpstack config apply FILE`
    /// (or `-`, standard input) runs a file of --config's lines, route and ipfw
    /// deletions too, in one compilation, all or nothing. `mpstack config --help`.
    #[command(disable_help_flag = true)]
    Config(CtlArgs),
}

/// A control command's arguments, sent as they are to the node named by `-j NODE`
/// (default `mpstack`, or $MPSTACK_NODE), which parses them.
#[derive(Args, Debug)]
pub struct CtlArgs {
    /// [-j NODE] and the command's own arguments; `--help` shows them.
    #[arg(
        value_name = "ARGS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub args: Vec<std::ffi::OsString>,
}

#[derive(Args, Debug)]
#[command(after_help = "Scenarios (mpstack demo --list):\n  \
router  (the default) two LANs, 198.18.1.0/24 + 2001:2:1::/64 and 198.18.2.0/24 + \
2001:2:2::/64, joined by a router running ipfw with a dummynet pipe each way (10 Mbit/s, \
20 ms): ARP and ND, ping through the pipes, UDP over IPv6, a traceroute, a telnet the \
firewall resets, a TCP transfer checked byte for byte; then the router's netstat -rn, \
ipfw show and netstat -s\n  \
lan     three hosts on one segment (198.18.0.0/24): ARP, ping, UDP echo, a closed port\n\n\
Everything runs in one process in virtual time: no root, no devices, the same output for \
the same --seed.")]
pub struct DemoArgs {
    /// The scenario to run: router (the default) or lan; --list names them.
    pub scenario: Option<String>,
    /// Name the scenarios and exit.
    #[arg(long)]
    pub list: bool,
    /// Seed for the virtual network's randomness; the same seed gives the same run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Workers per host.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub workers: u16,
    /// lan: echo requests from alpha to each other host.
    #[arg(long, default_value_t = 3)]
    pub pings: u16,
    /// lan: bytes of data in each echo request.
    #[arg(long, default_value_t = 56, value_parser = clap::value_parser!(u16).range(0..=1472))]
    pub size: u16,
    /// router: bytes alpha sends charlie over TCP, 1 to 20000000 (the frames are kept
    /// for the pcaps).
    #[arg(long, default_value_t = 2_000_000, value_parser = clap::value_parser!(u64).range(1..=20_000_000))]
    pub bytes: u64,
    /// Write the frames to pcap files (readable by tcpdump and Wireshark): lan writes
    /// FILE; router writes one file per link, the link's name inserted before the
    /// extension (demo.pcap: demo-lan1.pcap, demo-lan2.pcap).
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<std::path::PathBuf>,
    /// Print all counters, including zeros.
    #[arg(long)]
    pub all_counters: bool,
}

/// A time in seconds, above zero and at most a day.
fn positive_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 86_400.0 => Ok(v),
        _ => Err(format!(
            "'{s}': expected seconds, above 0 and at most 86400"
        )),
    }
}

fn control_levels() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(control::log::LEVELS)
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// TAP device to open (created if missing; needs root or CAP_NET_ADMIN).
    /// Repeat it to make a router between several links: `--tap r0 --tap r1`.
    #[arg(long, value_name = "NAME", required_unless_present = "packet")]
    pub tap: Vec<String>,
    /// An existing Linux interface to take over with an AF_PACKET socket per queue
    /// (repeatable; one end of a veth pair, or a NIC): TPACKET_V3 receive rings,
    /// batched transmit past the queueing discipline, PACKET_FANOUT over the queues
    /// with --queues > 1, promiscuous mode when it is a bridge member. mpstack uses
    /// the interface's own link address: leave the interface without addresses of
    /// the kernel's. Counted after the --tap links for a plain --inet. Needs root
    /// or CAP_NET_RAW.
    #[arg(long, value_name = "IFNAME")]
    pub packet: Vec<String>,
    /// IPv4 address of an interface, [TAP=]ADDRESS/PREFIXLEN (repeatable). Without
    /// `TAP=`, the Nth --inet goes to the Nth --tap. A bridge's address is given by
    /// its name (`bridge0=198.18.0.1/24`); a bridge's members take none. A link
    /// with none carries nothing until `mpstack ifconfig` gives it one or a bridge
    /// takes it.
    #[arg(
        long,
        value_name = "[TAP=]ADDR/LEN",
        required_unless_present_any = ["bridge", "tunnel"]
    )]
    pub inet: Vec<String>,
    /// An 802.1Q VLAN interface (vlan(4)), NAME=TAP:VID (repeatable): frames tagged
    /// VID on the TAP are its own, what it sends leaves by the TAP tagged. It takes
    /// --inet NAME=… and --inet6 NAME=… as a TAP does, or joins a --bridge (an
    /// access port bridged with a trunk's VLAN). A TAP that carries VLANs needs no
    /// address of its own. `--vlan vlan10=t0:10`.
    #[arg(long, value_name = "NAME=TAP:VID")]
    pub vlan: Vec<String>,
    /// A learning bridge (bridge(4)), NAME=TAP,TAP,… (repeatable): the TAPs become
    /// its members and NAME an interface of its own, which takes --inet NAME=… and
    /// --inet6 NAME=… as a TAP does (the node is then a host or router on the
    /// bridged segment); VLAN interfaces (--vlan) may be members too. Source
    /// addresses are learned per member and age out after
    /// --bridge-timeout; broadcast, multicast and unknown unicast go to every other
    /// member. `--bridge bridge0=br0,br1,br2`; `--bridge bridge0=` starts it with
    /// none, for `mpstack ifconfig bridge0 addm IF` to add them while it runs.
    #[arg(long, value_name = "NAME=TAP,TAP")]
    pub bridge: Vec<String>,
    /// An IP tunnel, NAME=KIND,SRC,DST[,key=N][,mtu=N] (repeatable): KIND `gif`
    /// (gif(4): IPv4 or IPv6 right inside IPv4 or IPv6, as Linux's ipip, sit and
    /// ip6tnl) or `gre` (gre(4), RFC 2784; `key=N` adds RFC 2890's key); SRC is
    /// this node's address, DST the far end's, both IPv4 or both IPv6. NAME is a
    /// point-to-point interface taking --inet NAME=… and --inet6 NAME=… (the far
    /// end's inner address within the prefix); --route PREFIX=GATEWAY through that
    /// address sends other networks through it. MTU 1280 (gif) or 1476 (gre) unless
    /// given. `--tunnel gif0=gif,198.18.0.2,198.18.0.1 --inet gif0=198.18.99.2/30`.
    #[arg(long, value_name = "NAME=KIND,SRC,DST")]
    pub tunnel: Vec<String>,
    /// Addresses each bridge's table holds at most (bridge(4)'s maxaddr); when it
    /// is full a new address evicts the stalest dynamic one near its slot (of 16)
    /// idle for 60 s at least, never a static one, or else is refused (its frames
    /// flooded), counted in bridge.evicted and bridge.refused.
    #[arg(long, value_name = "N", default_value_t = 2000, requires = "bridge", value_parser = clap::value_parser!(u32).range(1..=67_108_864))]
    pub bridge_maxaddr: u32,
    /// Seconds a learned address lives without a frame from it (bridge(4)'s
    /// timeout).
    #[arg(long, value_name = "SECS", default_value_t = 300, requires = "bridge", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub bridge_timeout: u32,
    /// Run the IEEE 802.1D spanning tree on every bridge's members (loop
    /// protection; it interoperates with Linux bridges' `stp_state 1`). A member
    /// forwards after listening and learning for twice the forward delay; a
    /// topology change ages addresses with the forward delay. Per member, on the
    /// control socket: `ifconfig bridge0 -stp|edge|autoedge|bpduguard|rootguard
    /// IF`. Without it BPDUs are dropped and counted (bridge.bpdunostp).
    #[arg(long, requires = "bridge")]
    pub stp: bool,
    /// The bridges' spanning-tree priority (lower wins the root election).
    #[arg(long, value_name = "N", default_value_t = 32768, requires = "stp")]
    pub stp_priority: u16,
    /// Spanning-tree forward delay in seconds (4 to 30).
    #[arg(long, value_name = "SECS", default_value_t = 15, requires = "stp", value_parser = clap::value_parser!(u16).range(4..=30))]
    pub stp_fwddelay: u16,
    /// Spanning-tree hello time in seconds (1 to 10).
    #[arg(long, value_name = "SECS", default_value_t = 2, requires = "stp", value_parser = clap::value_parser!(u16).range(1..=10))]
    pub stp_hellotime: u16,
    /// Spanning-tree max age in seconds (6 to 40).
    #[arg(long, value_name = "SECS", default_value_t = 20, requires = "stp", value_parser = clap::value_parser!(u16).range(6..=40))]
    pub stp_maxage: u16,
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
    /// What the default rule 65535 does with --ipfw, with ipfw lines in --config,
    /// and in a firewall turned on at run time (`mpstack ipfw enable firewall`,
    /// `mpstack sysctl net.inet.ip.fw.enable=1`) on a node started without one.
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
    /// Queues of each link: a multi-queue TAP when more than 1; on a --packet interface,
    /// that many AF_PACKET sockets in one PACKET_FANOUT group. Defaults to the worker
    /// count.
    #[arg(long)]
    pub queues: Option<u16>,
    /// Record every frame received and sent to this pcap file (with several links,
    /// TAP or --packet, one file per link: FILE.NAME after the first). Created
    /// 0600; an existing file is truncated only if it is a regular file of this
    /// user with one name; a symbolic link is refused.
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<std::path::PathBuf>,
    /// Link-layer address of the first TAP (default: derived from the TAP name).
    #[arg(long, value_name = "MAC")]
    pub mac: Option<String>,
    /// Services to run, comma-separated: echo (TCP and UDP port 7), discard (TCP and
    /// UDP 9), chargen (TCP and UDP 19), http=DIR (static files on TCP 80: GET and
    /// HEAD, keep-alive; hyper's HTTP/1.1; no dotfiles, no symbolic link as the
    /// file), or none (the default: no service; pings are answered either way).
    /// The last --serve given counts. The TCP services are tasks on a small runtime,
    /// bounded by --serve-idle-timeout, --serve-header-timeout, --serve-max-conns
    /// and (HTTP) --serve-max-conns-per-source. The UDP ones answer no datagram
    /// from a port below 1024 (another node's echo or chargen: inetd's loop check)
    /// and at most --serve-udp-rate a second to one source.
    #[arg(
        long,
        value_name = "LIST",
        default_value = services::DEFAULT_SERVE,
        overrides_with = "serve"
    )]
    pub serve: String,
    /// Seconds a --serve TCP connection may move no byte either way before the node
    /// closes it (counted as an idle timeout in the exit report); a silent
    /// connection holds a slot for no longer than this.
    #[arg(long, value_name = "SECS", default_value_t = services::Limits::DEFAULT_IDLE_SECS, value_parser = positive_secs)]
    pub serve_idle_timeout: f64,
    /// Seconds an HTTP client has to send a whole request head, from its connection
    /// or from the end of the previous response on a kept-alive connection (so it is
    /// also the idle time allowed between requests); then the node closes the
    /// connection (counted as a header timeout).
    #[arg(long, value_name = "SECS", default_value_t = services::Limits::DEFAULT_HEADER_SECS, value_parser = positive_secs)]
    pub serve_header_timeout: f64,
    /// TCP connections the --serve services serve at once, over all services;
    /// beyond it a new connection is refused with a reset and counted as refused.
    /// The default is as many as one worker's TCP connection table holds.
    #[arg(long, value_name = "N", default_value_t = services::Limits::DEFAULT_MAX_CONNS, value_parser = clap::builder::TypedValueParser::map(clap::value_parser!(u32).range(1..=16_777_216), |n| n as usize))]
    pub serve_max_conns: usize,
    /// HTTP connections one source address may hold at once; beyond it a new one
    /// is refused with a reset and counted (refused for their source).
    #[arg(long, value_name = "N", default_value_t = services::Limits::DEFAULT_MAX_CONNS_PER_SOURCE, value_parser = clap::builder::TypedValueParser::map(clap::value_parser!(u32).range(1..=16_777_216), |n| n as usize))]
    pub serve_max_conns_per_source: usize,
    /// Datagrams a second the UDP echo and chargen answer one source address (a
    /// burst of twice as many; each service also answers at most 1000 a second
    /// over all sources); beyond, counted and not answered.
    #[arg(long, value_name = "N", default_value_t = services::UdpLimits::default().per_source_rate, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub serve_udp_rate: u32,
    /// Stop after this many seconds (default: run until SIGINT/SIGTERM).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Client: connect to this TCP server once up (a connect refused, unreachable or
    /// unanswered is tried again for 30 s), send `--send` bytes, shut down the
    /// sending side, read until the peer closes, print both directions' byte counts
    /// and SHA-256, and exit (status 1 if the transfer failed).
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
    /// cannot take them whole, such segments are cut in software. On --packet
    /// interfaces: the kernel finishes what mpstack sends unfinished (what it
    /// receives comes with the kernel's offload state either way).
    #[arg(long)]
    pub offload: bool,
    /// A config file: the control commands (ifconfig, route, arp, ndp, ipfw,
    /// sysctl), one a line, `#` comments; applied after the other flags, all or
    /// nothing, before the node starts. SIGHUP re-reads it and applies the
    /// difference: lines taken out are undone (route add by route delete, an
    /// address by -alias, ipfw add N by ipfw delete N, arp -s by arp -d), new ones
    /// applied; if one fails, the node is put back exactly as it was (every sysctl,
    /// MTU, address, up/down, route, rule, table, pipe and bridge member). The lines
    /// run as one batch: the routes reach the data path in one compilation of the
    /// FIB, the rules and table entries in one of the firewall's program (100,000
    /// of either load in about a second). ipfw lines give the node a firewall without --ipfw (default rule as
    /// --ipfw-default).
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// What the node logs on standard error: off, error, warn, info (ipfw's `log`
    /// lines, routing, address and neighbour changes, DAD failures), debug, trace.
    #[arg(long, value_name = "LEVEL", default_value = "info", value_parser = control_levels())]
    pub log_level: String,
    /// Serve the counters (netstat -s's, each stage's runtime, each interface's
    /// packets and bytes) as Prometheus metrics at http://ADDR:PORT/metrics,
    /// through the host's own sockets (not the stack's). Off by default.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<String>,
    /// Take routes from FRR's zebra (its Forwarding Plane Manager, module
    /// dplane_fpm_nl: `fpm address ADDR port PORT` and `no fpm use-next-hop-groups`
    /// in zebra's configuration) on this TCP address of the host: `--fpm` alone
    /// is 127.0.0.1:2620 (zebra's default), `--fpm PORT` on 127.0.0.1. zebra's
    /// BGP, OSPF and static routes are installed (flag 2 in netstat -r), replaced
    /// and withdrawn as it says; next hops are resolved against the node's
    /// interfaces (a link-local IPv6 one on the interface zebra names), and a
    /// route that cannot be yet is installed once an address makes it possible;
    /// a reconnecting zebra resynchronises. One session at a time: another
    /// connection while zebra's lives is closed at once, as is one from a peer
    /// not allowed (--fpm-allow, --fpm-user); each is counted and logged. Off by
    /// default.
    #[arg(long, value_name = "[ADDR:]PORT", num_args = 0..=1, default_missing_value = "127.0.0.1:2620")]
    pub fpm: Option<String>,
    /// Peers that may feed --fpm, a prefix (repeatable): `--fpm-allow
    /// 198.18.5.0/24`. Without it, loopback only; needed when --fpm listens on
    /// another address.
    #[arg(long, value_name = "PREFIX", requires = "fpm")]
    pub fpm_allow: Vec<String>,
    /// A user (name or uid) whose sockets on this host may feed --fpm, besides
    /// root (repeatable); zebra runs as frr. A connection from this host by
    /// another user (as /proc/net/tcp says) is refused.
    #[arg(long, value_name = "USER", default_value = "frr", requires = "fpm")]
    pub fpm_user: Vec<String>,
    /// The routes --fpm installs at most (and unresolved ones it keeps to retry
    /// at most); beyond, a route is refused and counted (fpm full in netstat -s).
    /// The default holds a full IPv4 and IPv6 table with room (some 525 MB).
    #[arg(long, value_name = "N", default_value_t = net::fpm::FpmPolicy::DEFAULT_MAX_ROUTES, requires = "fpm", value_parser = clap::builder::TypedValueParser::map(clap::value_parser!(u32).range(1..=2_000_000), |n| n as usize))]
    pub fpm_max_routes: usize,
    /// The node's name: its control socket is RUNDIR/NAME.sock (mode 0600; RUNDIR
    /// is $MPSTACK_RUN_DIR or /run/mpstack, which must be this user's or root's and
    /// writable by no one else), which `mpstack ifconfig|route|netstat|arp|ndp|
    /// ipfw|sysctl -j NAME` talk to, as root or this user only; a name in use, or
    /// a symbolic link at the socket's path, is an error.
    /// Without it the node is `mpstack`, or `mpstack-PID` when a node of that name
    /// runs already (printed at start). `none`: no control socket.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// A TCP setting under FreeBSD's sysctl name, for every connection of the node,
    /// or an IP one (repeatable), e.g. net.inet.tcp.cc.algorithm=newreno or
    /// net.inet.ip.sourceroute=1.
    #[arg(long, value_name = "NAME=VALUE", long_help = crate::sysctl::help())]
    pub sysctl: Vec<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Demo(a) => {
            // `mpstack demo | head` ends quietly, as a BSD command would.
            dev::signal::default_sigpipe();
            demo::main(a)
        }
        Cmd::Run(a) => run::main(*a),
        Cmd::Bench(a) => bench_exec::main(a),
        Cmd::Ifconfig(a) => control::client("ifconfig", &a.args),
        Cmd::Route(a) => control::client("route", &a.args),
        Cmd::Netstat(a) => control::client("netstat", &a.args),
        Cmd::Arp(a) => control::client("arp", &a.args),
        Cmd::Ndp(a) => control::client("ndp", &a.args),
        Cmd::Ipfw(a) => control::client("ipfw", &a.args),
        Cmd::Sysctl(a) => control::client("sysctl", &a.args),
        Cmd::Config(a) => control::client("config", &a.args),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("mpstack: {e}");
            ExitCode::from(2)
        }
    }
}
