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
mod ifconfig;
mod netstat;
mod routing;
use ifconfig::*;
use netstat::*;
use routing::*;

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
             \x20      mpstack ifconfig IF -hook NAME [ARC...]        a hook (ipfw) off this interface's arcs\n\
             \x20      mpstack ifconfig IF hook NAME [ARC...]         back on (ARC: ether-in, ether-out, inet-in,\n\
             \x20                                                     inet-out, inet6-in, inet6-out; none: all)\n\
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

/// Every tunable the node has and its value, sorted: TCP's, IP's, forwarding,
/// the firewall's and dummynet's.
fn sysctl_all(
    node: &Node<'_>,
    tcp: &net::tcp::TcpConfig,
    sr: &net::SourceRouting,
) -> Vec<(String, String)> {
    let mut all = crate::sysctl::list(tcp);
    all.extend(crate::sysctl::list_ip(sr));
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
    all
}

/// The changes a `sysctl` command asks for, all checked before any is made.
struct SysctlChanges {
    tcp: net::tcp::TcpConfig,
    sr: net::SourceRouting,
    /// IP forwarding, (IPv6, on), on every interface.
    fwd: Vec<(bool, bool)>,
    log_limit: Option<u32>,
    dn_limits: Option<fw::dummynet::DnLimits>,
    dbcast: Option<bool>,
    fw_on: Option<bool>,
}

fn sysctl(node: &Node<'_>, args: &[&str], json: bool, conn: &mut Conn) -> Res {
    let _g = node.sysctl.lock().unwrap_or_else(|e| e.into_inner());
    let mut listing: Vec<(String, String)> = Vec::new();
    let mut changes: Vec<String> = Vec::new();
    let tcp = node.stack.tcp_config();
    let sr = node.stack.source_routing();
    let all = sysctl_all(node, &tcp, &sr);
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
    let mut ch = SysctlChanges {
        tcp,
        sr,
        fwd: Vec::new(),
        log_limit: None,
        dn_limits: node.ipfw().map(|f| f.dummynet_limits()),
        dbcast: None,
        fw_on: None,
    };
    for w in words.iter().filter(|w| **w != "-a") {
        if let Some(said) = crate::sysctl::apply_ip(&mut ch.sr, w) {
            changes.push(said.map_err(|e| fail(format!("sysctl: {e}")))?);
        } else if let Some((name, value)) = w.split_once('=') {
            changes.push(sysctl_set(node, w, name, value, &mut ch)?);
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
    sysctl_apply(node, &tcp, &sr, ch)?;
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

/// `NAME=VALUE` (`w`) checked and taken into `ch`: what it will change, said.
fn sysctl_set(
    node: &Node<'_>,
    w: &str,
    name: &str,
    value: &str,
    ch: &mut SysctlChanges,
) -> Result<String, Fail> {
    if let Some(lim) = &mut ch.dn_limits {
        if let Some(said) = crate::sysctl::apply_dummynet(lim, w) {
            return said.map_err(|e| fail(format!("sysctl: {e}")));
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
            ch.fwd.push((v6, on));
            Ok(format!(
                "{name}: {} -> {}",
                u8::from(forwarding_get(node, v6)),
                u8::from(on)
            ))
        }
        "net.inet.ip.directed-broadcast" | "net.inet.ip.fw.enable" => {
            let on = match value {
                "0" => false,
                "1" => true,
                _ => return Err(fail(format!("sysctl: {name}: '{value}' is not 0 or 1"))),
            };
            let was = if name.ends_with("enable") {
                ch.fw_on = Some(on);
                node.fw.enabled()
            } else {
                ch.dbcast = Some(on);
                node.stack.directed_broadcast()
            };
            Ok(format!("{name}: {} -> {}", u8::from(was), u8::from(on)))
        }
        "net.inet.ip.fw.dyn_count" | "net.inet.ip.fw.dyn_max" if node.ipfw().is_some() => {
            Err(fail(format!(
                "sysctl: {name}: read-only (the state table is allocated whole when the firewall starts)"
            )))
        }
        "net.inet.ip.fw.verbose_limit" if node.ipfw().is_some() => {
            let n: u32 = value.parse().map_err(|_| {
                fail(format!(
                    "sysctl: {name}: '{value}' is not a number of lines"
                ))
            })?;
            ch.log_limit = Some(n);
            Ok(format!(
                "{name}: {} -> {n}",
                node.ipfw().map_or(0, |f| f.log_limit())
            ))
        }
        _ => crate::sysctl::apply(&mut ch.tcp, w).map_err(|e| {
            if e.starts_with("unknown name") {
                fail(format!("sysctl: unknown oid '{name}'"))
            } else {
                fail(format!("sysctl: {e}"))
            }
        }),
    }
}

/// The changes of `ch` made, those that differ from the tunables as they were
/// (`tcp`, `sr`).
fn sysctl_apply(
    node: &Node<'_>,
    tcp: &net::tcp::TcpConfig,
    sr: &net::SourceRouting,
    ch: SysctlChanges,
) -> Res {
    if ch.tcp != *tcp {
        node.stack.set_tcp_config(ch.tcp);
    }
    if ch.sr != *sr {
        node.stack.set_source_routing(ch.sr);
    }
    if let (Some(n), Some(f)) = (ch.log_limit, node.ipfw()) {
        f.set_log_limit(n);
    }
    if let (Some(l), Some(f)) = (ch.dn_limits, node.ipfw()) {
        f.set_dummynet_limits(l);
    }
    if let Some(on) = ch.dbcast {
        node.stack.set_directed_broadcast(on);
    }
    if let Some(on) = ch.fw_on {
        node.fw
            .set_enabled(node.stack, on)
            .map_err(|e| fail(format!("sysctl: net.inet.ip.fw.enable: {e}")))?;
    }
    for (v6, on) in ch.fwd {
        for i in node.stack.interfaces() {
            let (f4, f6) = (i.forwarding.inet(), i.forwarding.inet6());
            let (n4, n6) = if v6 { (f4, on) } else { (on, f6) };
            node.stack
                .set_forwarding(i.index, n4, n6)
                .map_err(|e| fail(format!("sysctl: {e}")))?;
        }
    }
    Ok(())
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
