//! The commands a running node answers on its control socket, in the syntax of
//! FreeBSD's ifconfig(8), route(8), netstat(1), arp(8), ndp(8), ipfw(8) and
//! sysctl(8), each applied through the embedded API (`Stack::add_route`,
//! `Ipfw::command`, …): a change is one published configuration, traffic never
//! stops, and a command that fails leaves the node as it was. Every listing
//! takes `--json` (libxo's `--libxo json` too): one JSON document.
//!
//! What it owns: the commands' parsing, output and errors. What it may call: the
//! stack's and the firewall's public API.

mod bridge;

pub use bridge::{PacketLinks, FLAG_WORDS as BRIDGE_FLAG_WORDS, WORDS as BRIDGE_WORDS};

use super::Conn;
use net::{IfIndex, Stack};
use serde_json::{json, Value};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the commands act on.
pub struct Node<'a> {
    pub stack: &'a Stack,
    /// The firewall: the one the node started with (`--ipfw`), or one turned on
    /// since (`sysctl net.inet.ip.fw.enable=1`).
    pub fw: &'a Firewall,
    /// Serialises read-modify-write of the tunables.
    pub sysctl: Mutex<()>,
    /// The routing daemon's feed's counters, when the node takes one (`--fpm`).
    pub fpm: Option<&'a Mutex<net::fpm::FpmStats>>,
    /// The AF_PACKET interfaces, whose promiscuous mode bridge membership takes.
    pub packet: Option<&'a PacketLinks>,
    /// The workers' clock, once they run (the bridge cache's expiry times).
    pub clock: Option<&'a (dyn dev::time::Clock + Sync)>,
}

impl Node<'_> {
    /// The firewall, if the node has one (on, or turned off since).
    pub fn ipfw(&self) -> Option<&Arc<net::ipfw::Ipfw>> {
        self.fw.get()
    }
}

/// A node's firewall, which may be turned on and off at run time as FreeBSD's is
/// (`kldload ipfw`, `net.inet.ip.fw.enable`): made the first time it is turned
/// on, with only the default rule the node was started to use
/// (`--ipfw-default`), and kept with its rules when turned off.
#[derive(Debug)]
pub struct Firewall {
    fw: std::sync::OnceLock<Arc<net::ipfw::Ipfw>>,
    /// A firewall made at run time as it was made (what a refused config file
    /// that turned it on puts back).
    blank: std::sync::OnceLock<net::ipfw::IpfwSnapshot>,
    /// Whether its hooks are on the stack's points.
    on: Mutex<bool>,
    default_allow: bool,
    layer2: bool,
    dn_limits: fw::dummynet::DnLimits,
}

impl Firewall {
    /// No firewall yet; one turned on gets a default rule that allows or denies as
    /// `default_allow` says, the dummynet limits `dn_limits`, and (`layer2`) the
    /// Ethernet points too.
    pub fn off(default_allow: bool, layer2: bool, dn_limits: fw::dummynet::DnLimits) -> Self {
        Firewall {
            fw: std::sync::OnceLock::new(),
            blank: std::sync::OnceLock::new(),
            on: Mutex::new(false),
            default_allow,
            layer2,
            dn_limits,
        }
    }

    /// `f`, which is attached to the stack already.
    pub fn running(f: Arc<net::ipfw::Ipfw>, default_allow: bool, layer2: bool) -> Self {
        let fw = Firewall::off(default_allow, layer2, f.dummynet_limits());
        let _ = fw.fw.set(f);
        *fw.lock() = true;
        fw
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, bool> {
        self.on.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The firewall, if it was ever turned on.
    pub fn get(&self) -> Option<&Arc<net::ipfw::Ipfw>> {
        self.fw.get()
    }

    /// The firewall as it was made at run time, if it was.
    pub fn blank(&self) -> Option<&net::ipfw::IpfwSnapshot> {
        self.blank.get()
    }

    /// Whether it filters now (`net.inet.ip.fw.enable`).
    pub fn enabled(&self) -> bool {
        *self.lock()
    }

    /// Turns it on (made now if it never was) or off; whether that changed
    /// anything.
    pub fn set_enabled(&self, stack: &Stack, on: bool) -> Result<bool, String> {
        let mut g = self.lock();
        if *g == on {
            return Ok(false);
        }
        if on {
            let f = match self.fw.get() {
                Some(f) => f.clone(),
                None => {
                    let cfg = fw::RulesetConfig {
                        default_allow: self.default_allow,
                        ..fw::RulesetConfig::default()
                    };
                    let f = net::ipfw::Ipfw::new(cfg, stack.num_workers())?;
                    f.set_dummynet_limits(self.dn_limits);
                    let _ = self.blank.set(f.snapshot());
                    self.fw.get_or_init(|| f).clone()
                }
            };
            f.attach(stack);
            if self.layer2 {
                f.attach_layer2(stack);
            }
        } else if let Some(f) = self.fw.get() {
            stack.detach_ipfw(f);
        }
        *g = on;
        Ok(true)
    }
}

impl std::fmt::Debug for Node<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("stack", &self.stack.name())
            .finish()
    }
}

/// A command's failure: its exit status and message.
#[derive(Debug)]
pub struct Fail {
    pub code: u8,
    pub msg: String,
}

/// `EX_USAGE`: the command was wrong.
fn usage(msg: impl Into<String>) -> Fail {
    Fail {
        code: 64,
        msg: msg.into(),
    }
}

/// The command was right but could not be done.
fn fail(msg: impl Into<String>) -> Fail {
    Fail {
        code: 1,
        msg: msg.into(),
    }
}

type Res = Result<(), Fail>;

/// Output to a client that has gone is not an error of the command.
pub(super) fn put(conn: &mut Conn, s: &str) -> Res {
    conn.print(s).map_err(|e| fail(format!("writing: {e}")))
}

fn put_json(conn: &mut Conn, v: &Value) -> Res {
    put(conn, &format!("{v:#}\n"))
}

/// Runs `args` (the command's name first) against `node`, writing to `conn`.
pub fn execute(node: &Node<'_>, args: &[String], conn: &mut Conn, stop: &AtomicBool) -> Res {
    let (cmd, rest) = args.split_first().ok_or_else(|| usage("empty request"))?;
    // libxo's switches, anywhere.
    let mut json = false;
    let mut a: Vec<&str> = Vec::with_capacity(rest.len());
    let mut it = rest.iter();
    while let Some(x) = it.next() {
        match x.as_str() {
            "--json" | "--libxo=json" => json = true,
            "--libxo" => {
                json = it.next().is_some_and(|f| f.split(',').any(|p| p == "json"));
            }
            _ => a.push(x),
        }
    }
    match cmd.as_str() {
        "route" => route(node, &a, json, conn, stop),
        "netstat" => netstat(node, &a, json, conn, stop),
        "ifconfig" => ifconfig(node, &a, json, conn),
        "arp" => neighbours(node, false, &a, json, conn),
        "ndp" => neighbours(node, true, &a, json, conn),
        "ipfw" => ipfw(node, &a, json, conn),
        "sysctl" => sysctl(node, &a, json, conn),
        "config" => Err(usage(
            "config apply: the client sends the file's text (mpstack config apply FILE)",
        )),
        c => Err(usage(format!(
            "unknown command '{c}'; the node answers {}",
            super::COMMANDS
                .iter()
                .map(|c| c.0)
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// A batch: `ipfw [-q] /FILE` (each line an ipfw command) or `config [-q] apply
/// FILE` (a config file's lines, and deletions), the file's `text` sent by the
/// client. Every line runs in one batch (one compilation of the FIB and of the
/// firewall), all or nothing: if one fails, the node is put back as it was and
/// the error names the line. No other change runs meanwhile.
pub fn batch(node: &Node<'_>, args: &[String], text: &str, conn: &mut Conn) -> Res {
    let quiet = args.iter().any(|a| a == "-q");
    let Some((what, prefix, file)) = batch_form(args) else {
        return Err(usage(
            "a batch is `ipfw [-q] /FILE` or `config [-q] apply FILE`",
        ));
    };
    let cfg = super::config::parse_batch(text, prefix)
        .map_err(|e| usage(format!("{what}: {file}: {e}")))?;
    let t0 = std::time::Instant::now();
    let n = super::config::apply(node, &cfg, file).map_err(|e| fail(format!("{what}: {e}")))?;
    if quiet {
        return Ok(());
    }
    put(
        conn,
        &format!(
            "{what}: {file}: {n} line(s) applied in one batch in {:.3} s\n",
            t0.elapsed().as_secs_f64()
        ),
    )
}

/// Whether a request's words (the command's name first) are a batch's: `ipfw
/// [-q] /FILE` (FreeBSD's ipfw reads the commands of a file named by an absolute
/// path) or `config [-q] apply FILE|-`; if so, what messages call it, the word
/// its lines go without (`ipfw`'s) and the file's name. The client reads that
/// file and sends its text ([`batch`] runs it).
pub fn batch_form(args: &[String]) -> Option<(&'static str, Option<&'static str>, &str)> {
    let words: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| *a != "-q")
        .collect();
    match words[..] {
        ["ipfw", f] if f.starts_with('/') => Some(("ipfw", Some("ipfw"), f)),
        ["config", "apply", f] => Some(("config apply", None, f)),
        _ => None,
    }
}

/// `mpstack CMD --help`.
pub fn help(cmd: &str) -> String {
    let body = match cmd {
        "route" => {
            "usage: mpstack route [-j NODE] [-n] COMMAND ...\n\
             \x20 add [-net|-host] [-inet|-inet6] DEST GATEWAY       a static route through GATEWAY\n\
             \x20 add DEST -interface IF                               DEST on IF's link\n\
             \x20 add DEST [GATEWAY] -blackhole|-reject                drop silently, or with ICMP unreachable\n\
             \x20 delete DEST [GATEWAY]                                the route, or one path of a multipath one\n\
             \x20 change DEST GATEWAY                                  the route's path replaced\n\
             \x20 get|show DEST                                        the route DEST takes\n\
             \x20 show                                                 the table (as netstat -rn)\n\
             \x20 flush [-inet|-inet6]                                 every static and gateway route but zebra's (flag 2)\n\
             \x20 monitor                                              routing messages as they come (RTM_*)\n\
             DEST: an address, a PREFIX/LEN, or `default`; -netmask MASK or -prefixlen N also give the length.\n"
        }
        "netstat" => {
            "usage: mpstack netstat [-j NODE] [-an] [-rn] [-s] [-i] [-w SECS [-q COUNT]] [-f inet|inet6] [--json]\n\
             \x20 (none) TCP connections (-a: and listeners)  -r  the routing tables\n\
             \x20 -s  every non-zero counter (-s -s: all)      -i  interfaces and their packets\n\
             \x20 -w  packets and bytes in and out every SECS seconds\n"
        }
        "ifconfig" => {
            "usage: mpstack ifconfig [-j NODE] [-a | IF] [--json]\n\
             \x20      mpstack ifconfig IF inet ADDR/LEN [alias]      add an IPv4 address\n\
             \x20      mpstack ifconfig IF inet ADDR -alias|delete    delete it\n\
             \x20      mpstack ifconfig IF inet6 ADDR/LEN [alias]     add an IPv6 address (DAD first)\n\
             \x20      mpstack ifconfig IF inet6 ADDR -alias|delete   delete it\n\
             \x20      mpstack ifconfig IF mtu N                      set the MTU\n\
             \x20      mpstack ifconfig IF up|down                    take traffic, or drop it (counted)\n\
             \x20      mpstack ifconfig BRIDGE addm IF | deletem IF   add or remove a member (several in one command)\n\
             \x20      mpstack ifconfig BRIDGE [-]learn|[-]discover|[-]sticky IF   a member's flags\n\
             \x20      mpstack ifconfig BRIDGE [-]stp|[-]edge|[-]autoedge IF   its spanning tree: in it or not, an edge port\n\
             \x20      mpstack ifconfig BRIDGE [-]bpduguard|[-]rootguard IF   a BPDU disables it; a BPDU that would make it the root port blocks it\n\
             \x20      mpstack ifconfig BRIDGE static IF MAC | deladdr MAC | flush | deleteall   the address cache\n\
             \x20      mpstack ifconfig BRIDGE addr                   list the address cache\n"
        }
        "arp" | "ndp" => {
            "usage: mpstack arp|ndp [-j NODE] -a [--json]   the neighbour table\n\
             \x20      mpstack arp|ndp -d HOST | -d -a           delete one entry, or all\n\
             \x20      mpstack arp|ndp -s HOST MAC               a static entry\n"
        }
        "ipfw" => {
            "usage: mpstack ipfw [-j NODE] [-q] [-d] COMMAND, as ipfw(8):\n\
             \x20 add [N] RULE, delete N..., list, show, zero [N], resetlog [N], set ..., table N ...,\n\
             \x20 pipe N config ..., queue N config ..., pipe show\n\
             \x20 table T add KEY [VALUE] [KEY [VALUE]]...   many entries (the word after a key is its\n\
             \x20                                           value), all or none; table T delete KEY...\n\
             \x20      mpstack ipfw [-j NODE] [-q] /FILE    FILE's lines (ipfw commands without `ipfw`,\n\
             \x20 `#` comments; an absolute path, as ipfw(8)) in one batch: one compilation, all or\n\
             \x20 nothing (a failing line puts the node back and is named). The client reads FILE and\n\
             \x20 sends its text (at most 64 MiB; one batch at a time).\n\
             \x20 enable firewall | disable firewall   turn the firewall on or off (net.inet.ip.fw.enable)\n\
             -d with list or show: the dynamic states after the rules (at most 65536 lines),\n\
             \x20 each with its rule, lifetime left and flow; states keep no packet counts.\n\
             A node started without --ipfw has none until it is turned on: then it has only the\n\
             default rule of mpstack run --ipfw-default (deny unless given allow). Turned off, it\n\
             keeps its rules, tables and pipes, and packets pass unfiltered.\n"
        }
        "config" => {
            "usage: mpstack config [-j NODE] [-q] apply FILE|-\n\
             \x20 FILE's lines (or standard input's), in mpstack run --config's syntax (ifconfig,\n\
             \x20 route add|change, arp|ndp -s, sysctl NAME=VALUE, ipfw ...), and deletions (route\n\
             \x20 delete, ipfw delete, ipfw table T delete|flush|destroy, ipfw flush), run in one batch:\n\
             \x20 the routes reach the data path in one compilation of the FIB, the rules and table\n\
             \x20 entries in one of the firewall's (100,000 of either in well under 2 s). All or\n\
             \x20 nothing: a failing line puts the node back as it was, and is named (FILE:LINE).\n\
             \x20 No other change (a command, a route from zebra) runs meanwhile. The client reads\n\
             \x20 FILE and sends its text (at most 64 MiB; one batch at a time). The lines are not\n\
             \x20 the --config file's: a SIGHUP reload leaves them alone.\n"
        }
        "sysctl" => {
            "usage: mpstack sysctl [-j NODE] [-a | NAME[=VALUE] ...] [--json]\n\
             A prefix (net.inet.tcp) lists what is under it. New TCP connections take the\n\
             TCP settings; open ones keep theirs, but net.inet.tcp.maxorphans (the closed,\n\
             still live connections the node holds; a close beyond it resets) counts from\n\
             the next close, and net.inet.tcp.mem (the bound on all TCP buffers) applies\n\
             to open connections at once. With a firewall,\n\
             net.inet.ip.dummynet.pipe_slot_limit and pipe_byte_limit bound the queues of\n\
             the pipe and queue configs to come.\n\
             net.inet.ip.fw.enable=1 turns the firewall on (made with only its default rule if\n\
             the node had none; see ipfw --help), 0 off.\n\
             net.inet.ip.directed-broadcast=1 forwards directed broadcasts (to the broadcast or\n\
             network address of a subnet on the outgoing link) as link broadcasts, as FreeBSD does;\n\
             0, the default, drops them (ip.bcastfwd; RFC 2644).\n"
        }
        _ => "",
    };
    format!(
        "{body}\n-j NODE names the node (`mpstack run --name NODE`; default `{}` or $MPSTACK_NODE); \
         sockets live in {} ($MPSTACK_RUN_DIR).\n",
        super::DEFAULT_NAME,
        super::run_dir().display()
    )
}

// ---------------------------------------------------------------------------
// Names and addresses.

/// The interface named `name`.
fn iface(node: &Node<'_>, name: &str) -> Result<Arc<net::link::iface::Ifnet>, Fail> {
    node.stack
        .interfaces()
        .into_iter()
        .find(|i| i.name == name)
        .ok_or_else(|| fail(format!("interface {name} does not exist")))
}

fn ifname(node: &Node<'_>, ifindex: u32) -> String {
    node.stack
        .interfaces()
        .get(ifindex as usize)
        .map_or_else(|| format!("if{ifindex}"), |i| i.name.clone())
}

/// `<UP,GATEWAY,STATIC>`, as route(8) names flags.
fn flag_names(f: route::RtFlags) -> String {
    use route::RtFlags as F;
    let names: Vec<&str> = [
        (F::UP, "UP"),
        (F::GATEWAY, "GATEWAY"),
        (F::HOST, "HOST"),
        (F::REJECT, "REJECT"),
        (F::DYNAMIC, "DYNAMIC"),
        (F::MODIFIED, "MODIFIED"),
        (F::LLINFO, "LLINFO"),
        (F::STATIC, "STATIC"),
        (F::BLACKHOLE, "BLACKHOLE"),
        (F::PROHIBIT, "PROTO1"),
        (F::CONNECTED, "PINNED"),
        (F::PROTO2, "PROTO2"),
    ]
    .iter()
    .filter(|(x, _)| f.contains(*x))
    .map(|(_, n)| *n)
    .collect();
    format!("<{}>", names.join(","))
}

/// The netmask of a prefix length, as route(8) prints it.
fn mask_of(v6: bool, len: u8) -> String {
    if v6 {
        let m = if len == 0 {
            0
        } else {
            u128::MAX << (128 - u32::from(len))
        };
        std::net::Ipv6Addr::from(m).to_string()
    } else {
        let m = if len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(len))
        };
        std::net::Ipv4Addr::from(m).to_string()
    }
}

/// A netmask's prefix length, if it is contiguous.
fn len_of_mask(m: &str) -> Option<u8> {
    let bits: u128 = match m.parse::<IpAddr>().ok()? {
        IpAddr::V4(a) => u128::from(u32::from(a)) << 96,
        IpAddr::V6(a) => u128::from(a),
    };
    let len = bits.leading_ones();
    (bits.checked_shl(len).unwrap_or(0) == 0).then_some(len as u8)
}

/// `default`, an address or `PREFIX/LEN` (`v6` says which family `default` is).
fn parse_dest(d: &str, v6: bool, host: bool) -> Result<route::IpPrefix, Fail> {
    if d == "default" {
        return Ok(route::IpPrefix::default_of(v6));
    }
    if d.contains('/') {
        return d
            .parse::<route::IpPrefix>()
            .map_err(|e| usage(format!("{d}: bad destination: {e}")));
    }
    let a: IpAddr = d.parse().map_err(|_| {
        usage(format!(
            "{d}: bad address (an address, PREFIX/LEN or default)"
        ))
    })?;
    let _ = host;
    Ok(route::IpPrefix::host(a))
}

// ---------------------------------------------------------------------------
// route(8)

fn route(node: &Node<'_>, args: &[&str], json: bool, conn: &mut Conn, stop: &AtomicBool) -> Res {
    let mut i = 0;
    while i < args.len() && matches!(args[i], "-n" | "-q" | "-v") {
        i += 1;
    }
    let Some(&sub) = args.get(i) else {
        return Err(usage(help("route")));
    };
    let rest = &args[i + 1..];
    match sub {
        "add" | "delete" | "del" | "change" => route_change(node, sub, rest, conn),
        "get" => route_get(node, rest, json, conn),
        "show" if rest.is_empty() => routes(node, None, json, conn),
        "show" => route_get(node, rest, json, conn),
        "flush" => route_flush(node, rest, json, conn),
        "monitor" => route_monitor(node, json, conn, stop),
        s => Err(usage(format!(
            "route: unknown command '{s}' (add, delete, change, get, show, flush, monitor)"
        ))),
    }
}

/// `route add|delete|change`.
fn route_change(node: &Node<'_>, sub: &str, args: &[&str], conn: &mut Conn) -> Res {
    let sub = if sub == "del" { "delete" } else { sub };
    let (mut v6, mut host, mut net) = (false, false, false);
    let mut kind = None;
    let mut via_if: Option<&str> = None;
    let mut mask: Option<u8> = None;
    let mut words: Vec<&str> = Vec::new();
    let mut k = 0;
    while k < args.len() {
        match args[k] {
            "-inet" => v6 = false,
            "-inet6" => v6 = true,
            "-net" => net = true,
            "-host" => host = true,
            "-blackhole" => kind = Some(route::NhKind::Blackhole),
            "-reject" => kind = Some(route::NhKind::Reject),
            "-static" => {}
            "-interface" | "-iface" => {
                k += 1;
                via_if = Some(
                    args.get(k)
                        .copied()
                        .ok_or_else(|| usage("route: -interface needs an interface"))?,
                );
            }
            "-netmask" => {
                k += 1;
                let m = args
                    .get(k)
                    .ok_or_else(|| usage("route: -netmask needs a mask"))?;
                mask =
                    Some(len_of_mask(m).ok_or_else(|| usage(format!("route: {m}: bad netmask")))?);
            }
            "-prefixlen" => {
                k += 1;
                let m = args
                    .get(k)
                    .ok_or_else(|| usage("route: -prefixlen needs a length"))?;
                mask = Some(
                    m.parse()
                        .map_err(|_| usage(format!("route: {m}: bad prefix length")))?,
                );
            }
            w if w.starts_with('-') => {
                return Err(usage(format!("route: unknown option '{w}'")));
            }
            w => words.push(w),
        }
        k += 1;
    }
    let Some(&d) = words.first() else {
        return Err(usage(format!("route: {sub}: no destination")));
    };
    if words.len() > 2 {
        return Err(usage(format!(
            "route: {sub}: too many arguments ({}); DEST [GATEWAY]",
            words[2..].join(" ")
        )));
    }
    if d.contains(':') {
        v6 = true;
    }
    if host && net {
        return Err(usage("route: -host and -net together"));
    }
    let mut dst = parse_dest(d, v6, host)?;
    if let Some(len) = mask {
        let max = if dst.is_ipv6() { 128 } else { 32 };
        if len > max {
            return Err(usage(format!("route: prefix length {len} over {max}")));
        }
        dst = route::IpPrefix::new(dst.addr(), len);
    }
    let gw: Option<IpAddr> = match words.get(1) {
        Some(g) => Some(
            g.parse()
                .map_err(|_| usage(format!("route: {g}: bad gateway address")))?,
        ),
        None => None,
    };
    if let Some(g) = gw {
        if g.is_ipv6() != dst.is_ipv6() {
            return Err(usage(format!(
                "route: gateway {g} is not of {dst}'s family"
            )));
        }
    }
    let what = if dst.is_host() { "host" } else { "net" };
    let shown = if dst.is_host() {
        dst.addr().to_string()
    } else if dst.len() == 0 {
        "default".to_string()
    } else {
        dst.to_string()
    };
    let said = |how: &str| match gw {
        Some(g) => format!("{sub} {what} {shown}: gateway {g}{how}"),
        None => match via_if {
            Some(i) => format!("{sub} {what} {shown}: interface {i}{how}"),
            None => format!("{sub} {what} {shown}{how}"),
        },
    };
    let res = match sub {
        "delete" => node.stack.delete_route(dst, gw),
        _ => {
            let spec = match (kind, via_if, gw) {
                (Some(kd), _, _) => route::RouteSpec::discard(dst, kd),
                (None, Some(i), None) => {
                    let ifx = iface(node, i)?;
                    let mut s = route::RouteSpec::connected(dst, u32::from(ifx.index.0));
                    s.flags = route::RtFlags::STATIC;
                    s
                }
                (None, Some(_), Some(_)) => {
                    return Err(usage("route: a gateway or -interface, not both"))
                }
                (None, None, Some(g)) => {
                    let ifi = match node.stack.config().connected(g) {
                        Some(i) => u32::from(i.index.0),
                        None => {
                            return Err(fail(format!(
                                "route: {}: Network is unreachable",
                                said(" fib 0")
                            )))
                        }
                    };
                    route::RouteSpec::via(dst, g, ifi)
                }
                (None, None, None) => {
                    return Err(usage(format!(
                        "route: {sub} {shown}: no gateway (give one, -interface IF, -blackhole or -reject)"
                    )))
                }
            };
            if sub == "add" {
                node.stack.add_route(spec)
            } else {
                node.stack.change_route(spec)
            }
        }
    };
    match res {
        Ok(()) => put(conn, &format!("{}\n", said(""))),
        Err(e) => {
            let why = match &e {
                net::StackError::Route(route::RtError::Exists(_)) => {
                    "route already in table".to_string()
                }
                net::StackError::Route(route::RtError::NotFound(_)) => "not in table".to_string(),
                net::StackError::Route(route::RtError::Full) => {
                    "No buffer space available (the table is full)".to_string()
                }
                e => e.to_string(),
            };
            Err(fail(format!("route: {}: {why}", said(" fib 0"))))
        }
    }
}

fn route_json(node: &Node<'_>, r: &route::RouteInfo) -> Value {
    json!({
        "destination": r.dst.to_string(),
        "flags": r.flags.to_string(),
        "flags_names": flag_names(r.flags),
        "paths": r.paths.iter().map(|p| json!({
            "gateway": p.gateway.map(|g| g.to_string()),
            "interface": ifname(node, p.ifindex),
            "kind": format!("{:?}", p.kind).to_lowercase(),
            "mtu": p.mtu,
        })).collect::<Vec<_>>(),
    })
}

/// `route get DEST`.
fn route_get(node: &Node<'_>, args: &[&str], json: bool, conn: &mut Conn) -> Res {
    let words: Vec<&str> = args
        .iter()
        .copied()
        .filter(|w| !matches!(*w, "-inet" | "-inet6" | "-host" | "-net"))
        .collect();
    let [d] = words[..] else {
        return Err(usage("route: get: one destination"));
    };
    let v6 = args.contains(&"-inet6") || d.contains(':');
    let dst = parse_dest(d, v6, true)?;
    let Some(r) = node.stack.route_get(dst.addr()) else {
        return Err(fail("route: route has not been found"));
    };
    if json {
        let mut v = route_json(node, &r);
        v["route_to"] = json!(dst.addr().to_string());
        return put_json(conn, &v);
    }
    let mut s = String::new();
    s += &format!("   route to: {}\n", dst.addr());
    s += &format!("destination: {}\n", r.dst.addr());
    s += &format!("       mask: {}\n", mask_of(r.dst.is_ipv6(), r.dst.len()));
    for p in &r.paths {
        if let Some(g) = p.gateway {
            s += &format!("    gateway: {g}\n");
        }
    }
    s += "        fib: 0\n";
    if let Some(p) = r.paths.first() {
        if p.kind == route::NhKind::Forward {
            s += &format!("  interface: {}\n", ifname(node, p.ifindex));
        }
    }
    s += &format!("      flags: {}\n", flag_names(r.flags));
    if let Some(p) = r.paths.first().filter(|p| p.mtu > 0) {
        s += &format!("        mtu: {}\n", p.mtu);
    }
    put(conn, &s)
}

/// `route flush`: every static and gateway route (not the interfaces' own), but
/// not the routing daemon's (flag 2): FPM has no way to tell zebra a route went.
/// dplane_fpm_nl reads only `RTM_NEWROUTE` from the data plane, as a notice of
/// whether a route it sent is offloaded (`DPLANE_OP_ROUTE_NOTIFY`), and zebra sends
/// a route again only when it changes; a flushed route of zebra's would be gone
/// from the FIB while zebra believed it installed, until the next change or
/// reconnection. They are kept and counted in the answer; zebra withdraws them
/// (`clear ip bgp`, `no network`), or `route delete` removes one knowingly.
fn route_flush(node: &Node<'_>, args: &[&str], json: bool, conn: &mut Conn) -> Res {
    let fam = match args {
        [] => None,
        ["-inet"] => Some(false),
        ["-inet6"] => Some(true),
        _ => return Err(usage("route: flush [-inet|-inet6]")),
    };
    let (gone, kept): (Vec<route::RouteInfo>, usize) = node.stack.route_batch(|rib| {
        let (daemon, doomed): (Vec<route::RouteInfo>, Vec<route::RouteInfo>) = rib
            .routes()
            .into_iter()
            .filter(|r| {
                fam.is_none_or(|v6| r.dst.is_ipv6() == v6)
                    && !r.flags.contains(route::RtFlags::CONNECTED)
                    && (r.flags.contains(route::RtFlags::STATIC)
                        || r.flags.contains(route::RtFlags::GATEWAY))
            })
            .partition(|r| r.flags.contains(route::RtFlags::PROTO2));
        for r in &doomed {
            let _ = rib.delete(r.dst, None);
        }
        (doomed, daemon.len())
    });
    if json {
        return put_json(
            conn,
            &json!({
                "flushed": gone.iter().map(|r| route_json(node, r)).collect::<Vec<_>>(),
                "kept_daemon": kept,
            }),
        );
    }
    let mut s = String::new();
    for r in &gone {
        let gw = r
            .paths
            .first()
            .and_then(|p| p.gateway)
            .map_or("-".to_string(), |g| g.to_string());
        s += &format!("{:<20} {:<20} done\n", r.dst.to_string(), gw);
    }
    if kept > 0 {
        s += &format!(
            "route: {kept} route(s) of the routing daemon (flag 2) kept: FPM cannot tell zebra of a removal; withdraw them in zebra, or route delete one\n"
        );
    }
    put(conn, &s)
}

/// route(8)'s names of the message types.
fn rtm_desc(k: route::RtmType) -> &'static str {
    match k {
        route::RtmType::Add => "Add Route",
        route::RtmType::Delete => "Delete Route",
        route::RtmType::Change => "Change Metrics or flags",
        route::RtmType::Get => "Report Metrics",
        route::RtmType::Miss => "Lookup failed on this address",
        route::RtmType::NewAddr => "address being added to iface",
        route::RtmType::DelAddr => "address being removed from iface",
        route::RtmType::Redirect => "Told to use different route",
        route::RtmType::IfInfo => "iface status change",
    }
}

/// `route monitor`: every routing message from now on, until the client goes.
fn route_monitor(node: &Node<'_>, json: bool, conn: &mut Conn, stop: &AtomicBool) -> Res {
    conn.streaming();
    let sub = node.stack.subscribe_routes(4096);
    let mut idle = 0u32;
    while !stop.load(Ordering::Relaxed) {
        let mut s = String::new();
        while let Some(m) = sub.try_recv() {
            if m.kind == route::RtmType::IfInfo {
                // An interface's status, as route(8) prints RTM_IFINFO.
                let link = if m.flags.contains(route::RtFlags::UP) {
                    "up"
                } else {
                    "down"
                };
                let flags = node
                    .stack
                    .interfaces()
                    .into_iter()
                    .find(|i| u32::from(i.index.0) == m.ifindex)
                    .map_or(0, |i| i.flags);
                if json {
                    s += &json!({
                        "type": m.kind.name(),
                        "seq": m.seq,
                        "interface": ifname(node, m.ifindex),
                        "link": link,
                        "flags": if_flags(flags),
                    })
                    .to_string();
                    s.push('\n');
                } else {
                    s += &format!(
                        "{}: {}: len 0, if# {}, link: {link}, flags:<{}>\n\n",
                        m.kind.name(),
                        rtm_desc(m.kind),
                        m.ifindex,
                        if_flags(flags).join(",")
                    );
                }
                continue;
            }
            if json {
                s += &json!({
                    "type": m.kind.name(),
                    "seq": m.seq,
                    "destination": m.dst.to_string(),
                    "gateway": m.gateway.map(|g| g.to_string()),
                    "lladdr": m.lladdr.map(|a| wire::EthernetAddress(a).to_string()),
                    "interface": ifname(node, m.ifindex),
                    "flags": flag_names(m.flags),
                })
                .to_string();
                s.push('\n');
                continue;
            }
            let mut names = vec!["DST"];
            let mut vals = vec![m.dst.addr().to_string()];
            if let Some(g) = m.gateway {
                names.push("GATEWAY");
                vals.push(g.to_string());
            } else if let Some(a) = m.lladdr {
                names.push("GATEWAY");
                vals.push(wire::EthernetAddress(a).to_string());
            }
            if !m.dst.is_host() {
                names.push("NETMASK");
                vals.push(mask_of(m.dst.is_ipv6(), m.dst.len()));
            }
            names.push("IFP");
            vals.push(ifname(node, m.ifindex));
            s += &format!(
                "{}: {}: len 0, pid: 0, seq {}, errno 0, flags:{}\nlocks:  inits:\nsockaddrs: <{}>\n {}\n\n",
                m.kind.name(),
                rtm_desc(m.kind),
                m.seq,
                flag_names(m.flags),
                names.join(","),
                vals.join(" ")
            );
        }
        if !s.is_empty() {
            if conn.print(&s).is_err() {
                return Ok(());
            }
            idle = 0;
        } else {
            idle += 1;
            // Every half second with nothing to say: is anyone still listening?
            if idle.is_multiple_of(10) && conn.closed() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// netstat(1)

fn netstat(node: &Node<'_>, args: &[&str], json: bool, conn: &mut Conn, stop: &AtomicBool) -> Res {
    let (mut r, mut s, mut i) = (0, 0, false);
    let mut all = false;
    let mut wait: Option<u64> = None;
    let mut count: Option<u64> = None;
    let mut fam: Option<bool> = None;
    let mut k = 0;
    while k < args.len() {
        let a = args[k];
        let Some(letters) = a.strip_prefix('-').filter(|l| !l.is_empty()) else {
            return Err(usage(format!("netstat: unexpected '{a}'")));
        };
        for c in letters.chars() {
            match c {
                'r' => r += 1,
                's' => s += 1,
                'i' => i = true,
                'n' | 'W' | 'l' => {}
                'a' => all = true,
                'w' | 'q' | 'f' => {
                    k += 1;
                    let v = args
                        .get(k)
                        .ok_or_else(|| usage(format!("netstat: -{c} needs a value")))?;
                    match c {
                        'w' => {
                            wait = Some(
                                v.parse()
                                    .ok()
                                    .filter(|n| (1..=3600).contains(n))
                                    .ok_or_else(|| {
                                        usage(format!("netstat: -w {v}: seconds, 1 to 3600"))
                                    })?,
                            )
                        }
                        'q' => {
                            count = Some(
                                v.parse()
                                    .map_err(|_| usage(format!("netstat: -q {v}: a count")))?,
                            )
                        }
                        _ => {
                            fam = match *v {
                                "inet" => Some(false),
                                "inet6" => Some(true),
                                _ => return Err(usage(format!("netstat: -f {v}: inet or inet6"))),
                            }
                        }
                    }
                }
                c => return Err(usage(format!("netstat: unknown option -{c}"))),
            }
        }
        k += 1;
    }
    if let Some(w) = wait {
        return netstat_rates(node, w, count, json, conn, stop);
    }
    if r > 0 {
        return routes(node, fam, json, conn);
    }
    if s > 0 {
        return counters(node, s > 1 || all, json, conn);
    }
    if i {
        return interfaces_table(node, json, conn);
    }
    connections(node, all, fam, json, conn)
}

/// FreeBSD's way of writing an endpoint: `198.18.0.2.80`, `*.80`, `*.*`.
fn endpoint(a: std::net::SocketAddr) -> String {
    let host = if a.ip().is_unspecified() {
        "*".to_string()
    } else {
        a.ip().to_string()
    };
    if a.port() == 0 {
        format!("{host}.*")
    } else {
        format!("{host}.{}", a.port())
    }
}

/// `netstat -an`: the node's TCP connections (and with -a, its listeners).
fn connections(node: &Node<'_>, all: bool, fam: Option<bool>, json: bool, conn: &mut Conn) -> Res {
    let list = node
        .stack
        .tcp_connections(Duration::from_secs(2))
        .ok_or_else(|| fail("netstat: a worker did not answer in time; try again"))?;
    let rows: Vec<&net::tcp::ConnInfo> = list
        .iter()
        .filter(|c| all || c.state != "LISTEN")
        .filter(|c| fam.is_none_or(|v6| c.local.is_ipv6() == v6))
        .collect();
    if json {
        let v: Vec<Value> = rows
            .iter()
            .map(|c| {
                json!({
                    "protocol": if c.local.is_ipv6() { "tcp6" } else { "tcp4" },
                    "receive-bytes-waiting": c.recv_q, "send-bytes-waiting": c.send_q,
                    "local": {"address": c.local.ip().to_string(), "port": c.local.port()},
                    "remote": {"address": c.remote.ip().to_string(), "port": c.remote.port()},
                    "tcp-state": c.state,
                })
            })
            .collect();
        return put_json(conn, &json!({ "socket": v }));
    }
    let mut s = format!(
        "Active Internet connections{}\n{:<5} {:>6} {:>6} {:<45} {:<45} (state)\n",
        if all { " (including servers)" } else { "" },
        "Proto",
        "Recv-Q",
        "Send-Q",
        "Local Address",
        "Foreign Address"
    );
    for c in rows {
        s += &format!(
            "{:<5} {:>6} {:>6} {:<45} {:<45} {}\n",
            if c.local.is_ipv6() { "tcp6" } else { "tcp4" },
            c.recv_q,
            c.send_q,
            endpoint(c.local),
            endpoint(c.remote),
            c.state
        );
    }
    put(conn, &s)
}

/// `netstat -rn`.
fn routes(node: &Node<'_>, fam: Option<bool>, json: bool, conn: &mut Conn) -> Res {
    let all = node.stack.routes();
    if json {
        let pick = |v6: bool| -> Vec<Value> {
            all.iter()
                .filter(|r| r.dst.is_ipv6() == v6)
                .map(|r| route_json(node, r))
                .collect()
        };
        let mut v = json!({});
        if fam != Some(true) {
            v["inet"] = json!(pick(false));
        }
        if fam != Some(false) {
            v["inet6"] = json!(pick(true));
        }
        return put_json(conn, &json!({ "route-information": v }));
    }
    let mut s = String::from("Routing tables\n");
    for (v6, title) in [(false, "Internet"), (true, "Internet6")] {
        if fam.is_some_and(|f| f != v6) {
            continue;
        }
        s += &format!(
            "\n{title}:\n{:<32} {:<26} {:<7} {:>8}\n",
            "Destination", "Gateway", "Flags", "Netif"
        );
        for r in all.iter().filter(|r| r.dst.is_ipv6() == v6) {
            let dst = if r.dst.len() == 0 {
                "default".to_string()
            } else if r.dst.is_host() {
                r.dst.addr().to_string()
            } else {
                r.dst.to_string()
            };
            for p in &r.paths {
                let gw = match (p.gateway, p.kind) {
                    (Some(g), _) => g.to_string(),
                    (None, route::NhKind::Forward) => format!("link#{}", p.ifindex + 1),
                    (None, _) => "-".to_string(),
                };
                let ifn = match p.kind {
                    route::NhKind::Forward => ifname(node, p.ifindex),
                    _ => "-".into(),
                };
                s += &format!("{dst:<32} {gw:<26} {:<7} {ifn:>8}\n", r.flags.to_string());
            }
        }
    }
    put(conn, &s)
}

/// `netstat -s`: the counters, summed over workers.
fn counters(node: &Node<'_>, all: bool, json: bool, conn: &mut Conn) -> Res {
    let st = node.stack.stats();
    if json {
        let mut v = serde_json::Map::new();
        st.for_each(|g, n, x| {
            if all || x != 0 {
                let e = v.entry(g).or_insert_with(|| json!({}));
                e[n] = json!(x);
            }
        });
        let mut rt = serde_json::Map::new();
        for (stage, t) in node.stack.runtime().iter() {
            if t.calls > 0 {
                rt.insert(
                    stage.name().to_string(),
                    json!({
                        "calls": t.calls, "vectors": t.vectors, "packets": t.packets,
                        "cycles": t.cycles,
                    }),
                );
            }
        }
        let mut out = json!({ "statistics": Value::Object(v), "runtime": Value::Object(rt) });
        if let Some(f) = node.fpm {
            let f = *f.lock().unwrap_or_else(|e| e.into_inner());
            let m: serde_json::Map<String, Value> = f
                .fields()
                .iter()
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect();
            out["fpm"] = Value::Object(m);
        }
        return put_json(conn, &out);
    }
    let mut s = String::new();
    let _ = st.write_netstat(&mut s, all);
    if let Some(f) = node.fpm {
        let f = *f.lock().unwrap_or_else(|e| e.into_inner());
        s += "fpm:\n";
        for (k, v) in f.fields() {
            if all || v != 0 {
                s += &format!("\t{v} {}\n", k.replace('_', " "));
            }
        }
    }
    put(conn, &s)
}

/// Each interface's packets and bytes: its queues', summed.
fn if_counts(node: &Node<'_>) -> Vec<dev::QueueStats> {
    let n = node.stack.interfaces().len();
    let mut v = vec![dev::QueueStats::default(); n];
    for (_, ifx, q) in node.stack.queue_stats() {
        if let Some(t) = v.get_mut(ifx.get()) {
            t.ipackets += q.ipackets;
            t.ibytes += q.ibytes;
            t.idrops += q.idrops;
            t.ierrors += q.ierrors;
            t.opackets += q.opackets;
            t.obytes += q.obytes;
            t.odrops += q.odrops;
            t.oerrors += q.oerrors;
        }
    }
    v
}

/// `netstat -i`.
fn interfaces_table(node: &Node<'_>, json: bool, conn: &mut Conn) -> Res {
    let ifs = node.stack.interfaces();
    let c = if_counts(node);
    if json {
        let v: Vec<Value> = ifs
            .iter()
            .zip(&c)
            .map(|(i, q)| {
                json!({
                    "name": i.name, "up": i.is_up(), "mtu": i.mtu, "address": i.mac.to_string(),
                    "received-packets": q.ipackets, "received-bytes": q.ibytes,
                    "received-errors": q.ierrors, "dropped-packets": q.idrops,
                    "sent-packets": q.opackets, "sent-bytes": q.obytes,
                    "send-errors": q.oerrors, "send-drops": q.odrops,
                    "networks": i.addrs.iter().map(|a| json!({"network": format!("{}/{}", a.network(), a.prefix_len), "address": a.addr.to_string()}))
                        .chain(i.addrs6.iter().map(|a| json!({"network": format!("{}/{}", route::IpPrefix::new(a.addr.addr.into(), a.addr.prefix_len).addr(), a.addr.prefix_len), "address": a.addr.addr.to_string()})))
                        .collect::<Vec<_>>(),
                })
            })
            .collect();
        return put_json(conn, &json!({ "interface": v }));
    }
    let mut s = format!(
        "{:<10} {:>5} {:<20} {:<26} {:>10} {:>5} {:>6} {:>10} {:>5} {:>5}\n",
        "Name", "Mtu", "Network", "Address", "Ipkts", "Ierrs", "Idrop", "Opkts", "Oerrs", "Coll"
    );
    for (i, q) in ifs.iter().zip(&c) {
        s += &format!(
            "{:<10} {:>5} {:<20} {:<26} {:>10} {:>5} {:>6} {:>10} {:>5} {:>5}\n",
            // netstat(1) marks an interface that is down with '*'.
            if i.is_up() {
                i.name.clone()
            } else {
                format!("{}*", i.name)
            },
            i.mtu,
            format!("<Link#{}>", i.index.get() + 1),
            i.mac.to_string(),
            q.ipackets,
            q.ierrors,
            q.idrops,
            q.opackets,
            q.oerrors,
            0
        );
        let nets = i
            .addrs
            .iter()
            .map(|a| {
                (
                    format!("{}/{}", a.network(), a.prefix_len),
                    a.addr.to_string(),
                )
            })
            .chain(i.addrs6.iter().map(|a| {
                let p = route::IpPrefix::new(a.addr.addr.into(), a.addr.prefix_len);
                (p.to_string(), a.addr.addr.to_string())
            }));
        for (n, a) in nets {
            s += &format!(
                "{:<10} {:>5} {n:<20} {a:<26} {:>10} {:>5} {:>6} {:>10} {:>5} {:>5}\n",
                i.name, "-", "-", "-", "-", "-", "-", "-"
            );
        }
    }
    put(conn, &s)
}

/// `netstat -w SECS`: packets and bytes in and out (all interfaces) every SECS
/// seconds, as deltas, until the client goes or COUNT lines.
fn netstat_rates(
    node: &Node<'_>,
    secs: u64,
    count: Option<u64>,
    json: bool,
    conn: &mut Conn,
    stop: &AtomicBool,
) -> Res {
    conn.streaming();
    let total = |n: &Node<'_>| {
        let mut t = dev::QueueStats::default();
        for q in if_counts(n) {
            t.ipackets += q.ipackets;
            t.ibytes += q.ibytes;
            t.idrops += q.idrops;
            t.ierrors += q.ierrors;
            t.opackets += q.opackets;
            t.obytes += q.obytes;
            t.oerrors += q.oerrors;
        }
        t
    };
    if !json {
        put(
            conn,
            &format!(
                "{:>22} {:>33}\n{:>10} {:>5} {:>6} {:>12} {:>10} {:>5} {:>12} {:>5}\n",
                "input (Total)",
                "output",
                "packets",
                "errs",
                "idrops",
                "bytes",
                "packets",
                "errs",
                "bytes",
                "colls"
            ),
        )?;
    }
    let mut last = total(node);
    let mut lines = 0u64;
    while !stop.load(Ordering::Relaxed) && count.is_none_or(|c| lines < c) {
        let until = std::time::Instant::now() + Duration::from_secs(secs);
        while std::time::Instant::now() < until {
            if stop.load(Ordering::Relaxed) || conn.closed() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let now = total(node);
        let line = if json {
            json!({
                "input-packets": now.ipackets - last.ipackets,
                "input-errors": now.ierrors - last.ierrors,
                "input-drops": now.idrops - last.idrops,
                "input-bytes": now.ibytes - last.ibytes,
                "output-packets": now.opackets - last.opackets,
                "output-errors": now.oerrors - last.oerrors,
                "output-bytes": now.obytes - last.obytes,
                "seconds": secs,
            })
            .to_string()
                + "\n"
        } else {
            format!(
                "{:>10} {:>5} {:>6} {:>12} {:>10} {:>5} {:>12} {:>5}\n",
                now.ipackets - last.ipackets,
                now.ierrors - last.ierrors,
                now.idrops - last.idrops,
                now.ibytes - last.ibytes,
                now.opackets - last.opackets,
                now.oerrors - last.oerrors,
                now.obytes - last.obytes,
                0
            )
        };
        if conn.print(&line).is_err() {
            return Ok(());
        }
        last = now;
        lines += 1;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// ifconfig(8)

fn ifconfig(node: &Node<'_>, args: &[&str], json: bool, conn: &mut Conn) -> Res {
    let ifs = node.stack.interfaces();
    let show: Vec<&Arc<net::link::iface::Ifnet>> = match args {
        [] | ["-a"] | ["-l"] => ifs.iter().collect(),
        [name] => vec![ifs
            .iter()
            .find(|i| i.name == *name)
            .ok_or_else(|| fail(format!("ifconfig: interface {name} does not exist")))?],
        [name, rest @ ..] if bridge::WORDS.contains(&rest[0]) => {
            return bridge::command(node, name, rest, json, conn)
        }
        [name, rest @ ..] => return ifconfig_set(node, name, rest, conn),
    };
    if args == ["-l"] {
        let names: Vec<&str> = show.iter().map(|i| i.name.as_str()).collect();
        return put(conn, &format!("{}\n", names.join(" ")));
    }
    if json {
        let v: Vec<Value> = show
            .iter()
            .map(|i| {
                json!({
                    "name": i.name, "flags": if_flags(i.flags), "mtu": i.mtu,
                    "ether": i.mac.to_string(),
                    "bridge": node.stack.bridge(i.index).ok().map(|bc| bridge::describe_json(node, &bc)),
                    "inet": i.addrs.iter().map(|a| json!({"address": a.addr.to_string(), "prefixlen": a.prefix_len, "broadcast": a.broadcast().map(|b| b.to_string())})).collect::<Vec<_>>(),
                    "inet6": i.addrs6.iter().map(|a| json!({"address": a.addr.addr.to_string(), "prefixlen": a.addr.prefix_len, "state": format!("{:?}", a.state()).to_lowercase()})).collect::<Vec<_>>(),
                })
            })
            .collect();
        return put_json(conn, &json!({ "interfaces": v }));
    }
    let mut s = String::new();
    for i in show {
        s += &format!(
            "{}: flags={:x}<{}> metric 0 mtu {}\n\tether {}\n",
            i.name,
            i.flags,
            if_flags(i.flags).join(","),
            i.mtu,
            i.mac
        );
        for a in &i.addrs {
            s += &format!(
                "\tinet {} netmask 0x{:08x}{}\n",
                a.addr,
                u32::from_be_bytes(
                    mask_of(false, a.prefix_len)
                        .parse::<std::net::Ipv4Addr>()
                        .map_or([0; 4], |m| m.octets())
                ),
                a.broadcast()
                    .map_or(String::new(), |b| format!(" broadcast {b}"))
            );
        }
        for a in &i.addrs6 {
            let ll = net::link::iface::is_link_local(a.addr.addr);
            let state = match a.state() {
                net::AddrState::Tentative => " tentative",
                net::AddrState::Duplicated => " duplicated",
                net::AddrState::Deprecated => " deprecated",
                net::AddrState::Preferred => "",
            };
            s += &format!(
                "\tinet6 {}{} prefixlen {}{state}{}\n",
                a.addr.addr,
                if ll {
                    format!("%{}", i.name)
                } else {
                    String::new()
                },
                a.addr.prefix_len,
                if ll {
                    format!(" scopeid 0x{:x}", i.index.get() + 1)
                } else {
                    String::new()
                }
            );
        }
        if let Ok(bc) = node.stack.bridge(i.index) {
            s += &bridge::describe(node, &bc);
        }
    }
    put(conn, &s)
}

fn if_flags(f: u32) -> Vec<&'static str> {
    use net::link::iface::flags as F;
    [
        (F::IFF_UP, "UP"),
        (F::IFF_BROADCAST, "BROADCAST"),
        (F::IFF_POINTOPOINT, "POINTOPOINT"),
        (F::IFF_PROMISC, "PROMISC"),
        (F::IFF_MULTICAST, "MULTICAST"),
    ]
    .iter()
    .filter(|(b, _)| f & b != 0)
    .map(|(_, n)| *n)
    .collect()
}

/// `ifconfig IF inet|inet6 ADDR[/LEN] [alias|-alias|delete]`, `ifconfig IF mtu N`,
/// `ifconfig IF up|down`.
fn ifconfig_set(node: &Node<'_>, name: &str, args: &[&str], conn: &mut Conn) -> Res {
    let i = iface(node, name).map_err(|e| fail(format!("ifconfig: {}", e.msg)))?;
    let ifx: IfIndex = i.index;
    match args {
        [ud @ ("up" | "down")] => {
            node.stack
                .set_up(ifx, *ud == "up")
                .map_err(|e| fail(format!("ifconfig: {e}")))?;
            put(conn, "")
        }
        ["mtu", n] => {
            let mtu: usize = n
                .parse()
                .map_err(|_| usage(format!("ifconfig: mtu {n}: a number of bytes")))?;
            node.stack
                .set_mtu(ifx, mtu)
                .map_err(|e| fail(format!("ifconfig: {e}")))?;
            put(conn, "")
        }
        [fam @ ("inet" | "inet6"), addr, rest @ ..] => {
            let delete = match rest {
                [] | ["alias"] | ["add"] => false,
                ["-alias"] | ["delete"] | ["remove"] => true,
                _ => {
                    return Err(usage(format!(
                        "ifconfig: {}: expected alias, -alias or delete",
                        rest.join(" ")
                    )))
                }
            };
            let v6 = *fam == "inet6";
            if delete {
                let a = addr.split('/').next().unwrap_or(addr);
                let ip: IpAddr = a
                    .parse()
                    .ok()
                    .filter(|x: &IpAddr| x.is_ipv6() == v6)
                    .ok_or_else(|| usage(format!("ifconfig: {a}: bad {fam} address")))?;
                node.stack
                    .delete_address(ifx, ip)
                    .map_err(|e| fail(format!("ifconfig: {e}")))?;
                return put(conn, "");
            }
            if !addr.contains('/') {
                return Err(usage(format!(
                    "ifconfig: {addr}: give the prefix length ({addr}/24, {addr}/64)"
                )));
            }
            let r = if v6 {
                let a: net::Inet6Addr = addr
                    .parse()
                    .map_err(|e| usage(format!("ifconfig: {addr}: {e}")))?;
                node.stack.add_address6(ifx, a)
            } else {
                let a: net::InetAddr = addr
                    .parse()
                    .map_err(|e| usage(format!("ifconfig: {addr}: {e}")))?;
                node.stack.add_address(ifx, a)
            };
            r.map_err(|e| fail(format!("ifconfig: {e}")))?;
            put(conn, "")
        }
        _ => Err(usage(format!(
            "ifconfig: {name} {}: expected inet|inet6 ADDR/LEN [alias|-alias|delete], mtu N, up or down",
            args.join(" ")
        ))),
    }
}

// ---------------------------------------------------------------------------
// arp(8), ndp(8)

fn neighbours(node: &Node<'_>, v6: bool, args: &[&str], json: bool, conn: &mut Conn) -> Res {
    let cmd = if v6 { "ndp" } else { "arp" };
    let parse_ip = |h: &str| -> Result<IpAddr, Fail> {
        h.parse::<IpAddr>()
            .ok()
            .filter(|a| a.is_ipv6() == v6)
            .ok_or_else(|| {
                usage(format!(
                    "{cmd}: {h}: bad {} address",
                    if v6 { "IPv6" } else { "IPv4" }
                ))
            })
    };
    match args {
        [] | ["-a"] | ["-an"] | ["-n", "-a"] | ["-a", "-n"] => neighbour_list(node, v6, json, conn),
        ["-d", "-a"] | ["-da"] | ["-c"] => {
            let mut n = 0;
            let mut st = net::Stats::default();
            for i in node.stack.interfaces() {
                if v6 {
                    for e in i.nd6.entries() {
                        n += usize::from(i.nd6.remove(e.ip, &mut st));
                    }
                } else {
                    for e in i.arp.entries() {
                        n += usize::from(i.arp.remove(e.ip, &mut st));
                    }
                }
            }
            put(conn, &format!("{n} entries deleted\n"))
        }
        ["-d", h] => {
            let ip = parse_ip(h)?;
            let mut st = net::Stats::default();
            let mut done = false;
            for i in node.stack.interfaces() {
                done |= match ip {
                    IpAddr::V4(a) => i.arp.remove(a, &mut st),
                    IpAddr::V6(a) => i.nd6.remove(a, &mut st),
                };
            }
            if done {
                put(conn, &format!("{h} ({h}) deleted\n"))
            } else {
                Err(fail(format!("{cmd}: cannot locate {h}")))
            }
        }
        ["-s", h, mac, ..] => {
            let ip = parse_ip(h)?;
            let mac: wire::EthernetAddress = mac
                .parse()
                .map_err(|_| usage(format!("{cmd}: {mac}: bad link-layer address")))?;
            let cfg = node.stack.config();
            let Some(i) = cfg.connected(ip) else {
                return Err(fail(format!(
                    "{cmd}: cannot intuit interface index and type for {h} (not on a connected network)"
                )));
            };
            if let IpAddr::V4(a) = ip {
                // Not the subnet's own network or broadcast address (a /31 has
                // neither, RFC 3021).
                if let Some(x) = i.addrs.iter().find(|x| x.is_net_or_bcast(a)) {
                    return Err(fail(format!(
                        "{cmd}: {h} is the network or broadcast address of {}/{}",
                        x.network(),
                        x.prefix_len
                    )));
                }
            }
            match ip {
                IpAddr::V4(a) => i.arp.insert_static(a, mac),
                IpAddr::V6(a) => i.nd6.insert_static(a, mac),
            }
            put(conn, "")
        }
        _ => Err(usage(help(cmd))),
    }
}

fn neighbour_list(node: &Node<'_>, v6: bool, json: bool, conn: &mut Conn) -> Res {
    let mut rows = Vec::new();
    for i in node.stack.interfaces() {
        if v6 {
            for e in i.nd6.entries() {
                rows.push((i.name.clone(), IpAddr::V6(e.ip), e.mac, e.state.to_string()));
            }
        } else {
            for e in i.arp.entries() {
                rows.push((i.name.clone(), IpAddr::V4(e.ip), e.mac, e.state.to_string()));
            }
        }
    }
    if json {
        let v: Vec<Value> = rows
            .iter()
            .map(|(ifn, ip, mac, st)| {
                json!({"ip-address": ip.to_string(), "mac-address": mac.map(|m| m.to_string()), "interface": ifn, "state": st})
            })
            .collect();
        let key = if v6 { "ndp" } else { "arp" };
        return put_json(conn, &json!({ key: v }));
    }
    let mut s = String::new();
    if v6 {
        s += &format!(
            "{:<40} {:<18} {:<8} {}\n",
            "Neighbor", "Linklayer Address", "Netif", "State"
        );
    }
    for (ifn, ip, mac, st) in rows {
        let m = mac.map_or("(incomplete)".to_string(), |m| m.to_string());
        if v6 {
            s += &format!("{ip:<40} {m:<18} {ifn:<8} {st}\n");
        } else {
            s += &format!("? ({ip}) at {m} on {ifn} [ethernet] {st}\n");
        }
    }
    put(conn, &s)
}

// ---------------------------------------------------------------------------
// ipfw(8)

fn ipfw(node: &Node<'_>, args: &[&str], json: bool, conn: &mut Conn) -> Res {
    // `ipfw enable|disable firewall`, FreeBSD's spelling of net.inet.ip.fw.enable.
    let words: Vec<&str> = args.iter().copied().filter(|x| *x != "-q").collect();
    if let [w @ ("enable" | "disable"), what] = words[..] {
        if what != "firewall" {
            return Err(usage(format!(
                "ipfw: {w} {what}: only the firewall itself is turned on and off here ({w} firewall)"
            )));
        }
        node.fw
            .set_enabled(node.stack, w == "enable")
            .map_err(|e| fail(format!("ipfw: {e}")))?;
        return Ok(());
    }
    let Some(f) = node.ipfw() else {
        return Err(fail(
            "ipfw: this node runs no firewall (turn one on with `ipfw enable firewall` or `sysctl net.inet.ip.fw.enable=1`, or start it with --ipfw FILE or with ipfw lines in --config FILE)",
        ));
    };
    let mut quiet = false;
    let mut dynamic = false;
    let mut a: Vec<&str> = Vec::with_capacity(args.len());
    for x in args {
        match *x {
            "-q" => quiet = true,
            "-d" => dynamic = true,
            "-n" | "-a" | "-t" | "-S" | "-N" => {}
            x => a.push(x),
        }
    }
    if a.is_empty() {
        return Err(usage(help("ipfw")));
    }
    let line = a.join(" ");
    let mut out = if matches!(a[..], ["pipe" | "dummynet", "show" | "list"]) {
        pipe_show(f)
    } else {
        f.command(&line).map_err(|e| fail(format!("ipfw: {e}")))?
    };
    // ipfw(8) -d: the dynamic rules after the static ones, for list and show.
    if dynamic && matches!(a[0], "list" | "show") {
        let now = node.clock.map_or(dev::Instant::ZERO, |c| c.now());
        for l in f.list_states(now, 65536) {
            out += &l;
            out.push('\n');
        }
    }
    if json {
        let lines: Vec<&str> = out.lines().collect();
        return put_json(conn, &json!({ "command": line, "output": lines }));
    }
    if quiet
        && matches!(
            a[0],
            "add" | "delete" | "zero" | "table" | "pipe" | "queue" | "set"
        )
        && !line.contains(" list")
        && !line.contains(" show")
    {
        return Ok(());
    }
    put(conn, &out)
}

/// `ipfw pipe show`: each pipe's configuration and counters, as the node prints
/// them at exit.
fn pipe_show(f: &net::ipfw::Ipfw) -> String {
    let mut s = String::new();
    for (n, cfg, st) in f.pipes() {
        s += &format!(
            "{n:05}: {cfg}\n    in {} pkts {} bytes, out {} pkts {} bytes, dropped {} (loss) {} (queue full)\n",
            st.in_pkts, st.in_bytes, st.out_pkts, st.out_bytes, st.drop_loss_pkts, st.drop_full_pkts
        );
    }
    s
}

// ---------------------------------------------------------------------------
// sysctl(8)

/// The node-wide tunables beside TCP's: IP forwarding.
fn forwarding_get(node: &Node<'_>, v6: bool) -> bool {
    node.stack.interfaces().iter().any(|i| {
        if v6 {
            i.forwarding.inet6()
        } else {
            i.forwarding.inet()
        }
    })
}

fn sysctl(node: &Node<'_>, args: &[&str], json: bool, conn: &mut Conn) -> Res {
    let _g = node.sysctl.lock().unwrap_or_else(|e| e.into_inner());
    let mut listing: Vec<(String, String)> = Vec::new();
    let mut changes: Vec<String> = Vec::new();
    let tcp = node.stack.tcp_config();
    let sr = node.stack.source_routing();
    let mut all = crate::sysctl::list(&tcp);
    all.extend(crate::sysctl::list_ip(&sr));
    all.push((
        "net.inet.ip.forwarding".into(),
        u8::from(forwarding_get(node, false)).to_string(),
    ));
    all.push((
        "net.inet6.ip6.forwarding".into(),
        u8::from(forwarding_get(node, true)).to_string(),
    ));
    all.push((
        "net.inet.ip.directed-broadcast".into(),
        u8::from(node.stack.directed_broadcast()).to_string(),
    ));
    all.push((
        "net.inet.ip.fw.enable".into(),
        u8::from(node.fw.enabled()).to_string(),
    ));
    if let Some(f) = node.ipfw() {
        all.push((
            "net.inet.ip.fw.verbose_limit".into(),
            f.log_limit().to_string(),
        ));
        // FreeBSD's dynamic-state gauge and bound; the bound is read-only here,
        // the table being allocated whole when the firewall is made.
        all.push((
            "net.inet.ip.fw.dyn_count".into(),
            f.state_stats().states.to_string(),
        ));
        all.push((
            "net.inet.ip.fw.dyn_max".into(),
            f.state_capacity().to_string(),
        ));
        all.extend(crate::sysctl::list_dummynet(&f.dummynet_limits()));
    }
    all.sort();
    let words: Vec<&str> = args
        .iter()
        .copied()
        .filter(|w| !matches!(*w, "-n" | "-q" | "-N"))
        .collect();
    let names_only = args.contains(&"-N");
    let values_only = args.contains(&"-n");
    if words.is_empty() || words == ["-a"] {
        listing = all.clone();
    }
    // Check every change before making any: all or nothing.
    let mut new_tcp = tcp;
    let mut new_sr = sr;
    let mut fwd: Vec<(bool, bool)> = Vec::new();
    let mut log_limit: Option<u32> = None;
    let mut dn_limits = node.ipfw().map(|f| f.dummynet_limits());
    let mut dbcast: Option<bool> = None;
    let mut fw_on: Option<bool> = None;
    for w in words.iter().filter(|w| **w != "-a") {
        if let Some(said) = crate::sysctl::apply_ip(&mut new_sr, w) {
            changes.push(said.map_err(|e| fail(format!("sysctl: {e}")))?);
        } else if let Some((name, value)) = w.split_once('=') {
            if let Some(lim) = &mut dn_limits {
                if let Some(said) = crate::sysctl::apply_dummynet(lim, w) {
                    changes.push(said.map_err(|e| fail(format!("sysctl: {e}")))?);
                    continue;
                }
            }
            match name {
                "net.inet.ip.forwarding" | "net.inet6.ip6.forwarding" => {
                    let v6 = name.starts_with("net.inet6");
                    let on = match value {
                        "0" => false,
                        "1" => true,
                        _ => return Err(fail(format!("sysctl: {name}: '{value}' is not 0 or 1"))),
                    };
                    changes.push(format!(
                        "{name}: {} -> {}",
                        u8::from(forwarding_get(node, v6)),
                        u8::from(on)
                    ));
                    fwd.push((v6, on));
                }
                "net.inet.ip.directed-broadcast" | "net.inet.ip.fw.enable" => {
                    let on = match value {
                        "0" => false,
                        "1" => true,
                        _ => return Err(fail(format!("sysctl: {name}: '{value}' is not 0 or 1"))),
                    };
                    let was = if name.ends_with("enable") {
                        fw_on = Some(on);
                        node.fw.enabled()
                    } else {
                        dbcast = Some(on);
                        node.stack.directed_broadcast()
                    };
                    changes.push(format!("{name}: {} -> {}", u8::from(was), u8::from(on)));
                }
                "net.inet.ip.fw.dyn_count" | "net.inet.ip.fw.dyn_max" if node.ipfw().is_some() => {
                    return Err(fail(format!(
                        "sysctl: {name}: read-only (the state table is allocated whole when the firewall starts)"
                    )));
                }
                "net.inet.ip.fw.verbose_limit" if node.ipfw().is_some() => {
                    let n: u32 = value.parse().map_err(|_| {
                        fail(format!(
                            "sysctl: {name}: '{value}' is not a number of lines"
                        ))
                    })?;
                    changes.push(format!(
                        "{name}: {} -> {n}",
                        node.ipfw().map_or(0, |f| f.log_limit())
                    ));
                    log_limit = Some(n);
                }
                _ => {
                    let said = crate::sysctl::apply(&mut new_tcp, w).map_err(|e| {
                        if e.starts_with("unknown name") {
                            fail(format!("sysctl: unknown oid '{name}'"))
                        } else {
                            fail(format!("sysctl: {e}"))
                        }
                    })?;
                    changes.push(said);
                }
            }
        } else {
            let hits: Vec<&(String, String)> = all
                .iter()
                .filter(|(n, _)| n == w || n.starts_with(&format!("{w}.")))
                .collect();
            if hits.is_empty() {
                return Err(fail(format!("sysctl: unknown oid '{w}'")));
            }
            listing.extend(hits.into_iter().cloned());
        }
    }
    if new_tcp != tcp {
        node.stack.set_tcp_config(new_tcp);
    }
    if new_sr != sr {
        node.stack.set_source_routing(new_sr);
    }
    if let (Some(n), Some(f)) = (log_limit, node.ipfw()) {
        f.set_log_limit(n);
    }
    if let (Some(l), Some(f)) = (dn_limits, node.ipfw()) {
        f.set_dummynet_limits(l);
    }
    if let Some(on) = dbcast {
        node.stack.set_directed_broadcast(on);
    }
    if let Some(on) = fw_on {
        node.fw
            .set_enabled(node.stack, on)
            .map_err(|e| fail(format!("sysctl: net.inet.ip.fw.enable: {e}")))?;
    }
    for (v6, on) in fwd {
        for i in node.stack.interfaces() {
            let (f4, f6) = (i.forwarding.inet(), i.forwarding.inet6());
            let (n4, n6) = if v6 { (f4, on) } else { (on, f6) };
            node.stack
                .set_forwarding(i.index, n4, n6)
                .map_err(|e| fail(format!("sysctl: {e}")))?;
        }
    }
    if json {
        let mut m = serde_json::Map::new();
        for (n, v) in &listing {
            m.insert(n.clone(), json!(v));
        }
        return put_json(
            conn,
            &json!({ "sysctl": Value::Object(m), "changed": changes }),
        );
    }
    let mut s = String::new();
    for c in &changes {
        s += c;
        s.push('\n');
    }
    for (n, v) in &listing {
        if names_only {
            s += &format!("{n}\n");
        } else if values_only {
            s += &format!("{v}\n");
        } else {
            s += &format!("{n}: {v}\n");
        }
    }
    put(conn, &s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_and_lengths_go_both_ways() {
        assert_eq!(mask_of(false, 24), "255.255.255.0");
        assert_eq!(mask_of(false, 0), "0.0.0.0");
        assert_eq!(mask_of(false, 32), "255.255.255.255");
        assert_eq!(mask_of(true, 64), "ffff:ffff:ffff:ffff::");
        assert_eq!(len_of_mask("255.255.0.0"), Some(16));
        assert_eq!(len_of_mask("255.255.255.255"), Some(32));
        assert_eq!(len_of_mask("0.0.0.0"), Some(0));
        assert_eq!(len_of_mask("255.0.255.0"), None, "not contiguous");
        assert_eq!(len_of_mask("ffff:ffff::"), Some(32));
        assert_eq!(len_of_mask("nonsense"), None);
    }

    #[test]
    fn destinations_parse_as_route_takes_them() {
        let d = parse_dest("default", false, false).unwrap();
        assert_eq!(d.len(), 0);
        assert!(!d.is_ipv6());
        assert!(parse_dest("default", true, false).unwrap().is_ipv6());
        let h = parse_dest("198.18.0.1", false, false).unwrap();
        assert!(h.is_host());
        let n = parse_dest("198.19.0.0/16", false, false).unwrap();
        assert_eq!((n.to_string().as_str(), n.len()), ("198.19.0.0/16", 16));
        let e = parse_dest("198.19.0.0/33", false, false).unwrap_err();
        assert_eq!(e.code, 64);
        assert!(parse_dest("nowhere", false, false).is_err());
    }

    #[test]
    fn endpoints_are_written_as_freebsd_does() {
        assert_eq!(endpoint("198.18.0.2:80".parse().unwrap()), "198.18.0.2.80");
        assert_eq!(endpoint("0.0.0.0:7".parse().unwrap()), "*.7");
        assert_eq!(endpoint("0.0.0.0:0".parse().unwrap()), "*.*");
        assert_eq!(endpoint("[2001:2::1]:22".parse().unwrap()), "2001:2::1.22");
    }

    #[test]
    fn flags_are_named() {
        let f = route::RtFlags(
            route::RtFlags::UP.0 | route::RtFlags::GATEWAY.0 | route::RtFlags::STATIC.0,
        );
        assert_eq!(flag_names(f), "<UP,GATEWAY,STATIC>");
    }

    /// `route flush` takes the static routes and keeps the routing daemon's
    /// (flag 2), saying why: FPM cannot tell zebra of the removal.
    #[test]
    fn flush_keeps_the_routing_daemons_routes() {
        let mut stack = Stack::new(net::StackConfig {
            name: "flush".into(),
            workers: 1,
            ..net::StackConfig::default()
        });
        let (d, _far) = dev::mem::wire(dev::mem::WireConfig::default());
        let ifx = stack
            .add_interface(
                Box::new(d),
                net::IfConfig {
                    addrs: vec!["198.18.1.1/24".parse().unwrap()],
                    ..net::IfConfig::default()
                },
            )
            .unwrap();
        let gw: IpAddr = "198.18.1.2".parse().unwrap();
        stack
            .add_route_via("198.19.0.0/16".parse().unwrap(), gw)
            .unwrap();
        let mut zebra = route::RouteSpec::via("198.20.0.0/16".parse().unwrap(), gw, ifx.0.into());
        zebra.flags = route::RtFlags::PROTO2;
        stack.add_route(zebra).unwrap();
        let fw = Firewall::off(true, false, Default::default());
        let node = Node {
            stack: &stack,
            fw: &fw,
            sysctl: Mutex::new(()),
            fpm: None,
            packet: None,
            clock: None,
        };
        let mut conn = Conn::buffer();
        let args: Vec<String> = ["route", "flush"].iter().map(|s| s.to_string()).collect();
        execute(&node, &args, &mut conn, &AtomicBool::new(false)).unwrap();
        let out = conn.into_output();
        assert!(out.contains("198.19.0.0/16"), "{out}");
        assert!(
            out.contains("1 route(s) of the routing daemon (flag 2) kept"),
            "{out}"
        );
        assert!(stack.route_get("198.19.0.1".parse().unwrap()).is_none());
        assert!(stack.route_get("198.20.0.1".parse().unwrap()).is_some());
    }
}
