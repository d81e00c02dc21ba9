//! `mpstack bench fib`: routes from a routing daemon into the FIB, the way FRR feeds
//! `mpstack run --fpm`: netlink route messages in FPM frames over TCP (loopback)
//! into [`net::fpm::serve`] on a real [`net::Stack`], which applies them to the table
//! and compiles it in bounded batches.
//!
//! Rows, in one run:
//!
//! - **full table**: every IPv4 route of the BGP table ([`crate::table`]; 1,072,529
//!   prefixes in iptrie's, synthetic otherwise), one message each as zebra sends
//!   them, timed from the first byte until the last route is on the data path (in
//!   the FIB the workers read). Beside it, the embedded API's one-batch load
//!   (`Stack::route_batch`, one compilation: the floor), and the Linux kernel
//!   installing the same routes with `ip -batch` in a namespace (needs root;
//!   skipped with the reason otherwise).
//! - **updates**: `--updates` changes on the full table (half withdrawals, half
//!   announcements, each announcement moving its route to the other next hop), timed
//!   the same way, while another thread looks up seeded keys in the FIB the way a
//!   worker does (`Stack::fib` then `lookup4_raw` over 256 keys); the lookup rate
//!   during the updates is printed beside the rate with no updates, measured just
//!   before. Beside it: the same changes through `route add`/`delete`'s path (one
//!   compilation per change, a few hundred of them, extrapolated per second), and
//!   the Linux kernel (`ip -batch` of `route replace`/`del`).
//!
//! - **config file**: a generated config file of 100,000 host routes, then one of
//!   100,000 ipfw table entries, through the code `mpstack run --config` and
//!   SIGHUP run (one batch: one FIB compilation, one of the firewall's program),
//!   timed from the file's text until its last line is on the data path; beside
//!   each, 100 more of the same lines as control commands one by one (one
//!   compilation each, of the loaded table: the cost every line of a file had
//!   before the batch).
//! - **control**: the same routes and table entries through the path an operator
//!   runs — `mpstack config apply FILE` and `mpstack ipfw /FILE`, the file's text
//!   as one batch request over the node's control socket to `control::serve` —
//!   timed from the first byte sent until the answer's exit status (the last
//!   line on the data path).
//!
//! Only IPv4 is fed (the full table); IPv6 routes would go the same way.

use super::lpm::{load_table, Source, SplitMix};
use super::progress;
use crate::BenchArgs;
use dev::mem::{wire, WireConfig};
use mpstack::control::cmds;
use net::fpm::FpmStats;
use net::{IfConfig, Stack, StackConfig};
use route::fpm::{encode_route, FpmNexthop, FpmRoute};
use route::{IpPrefix, NhKind, Prefix4, RouteSpec};
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, TcpListener, TcpStream};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const GW: [Ipv4Addr; 2] = [Ipv4Addr::new(198, 18, 1, 2), Ipv4Addr::new(198, 18, 2, 2)];
/// Changes through the per-change compilation path (each compiles the full table).
const SLOW_UPDATES: usize = 20;
/// Lines of each generated config file (routes; table entries).
const CONFIG_LINES: usize = 100_000;
/// Lines sent one by one as control commands, beside the file (each compiles).
const CONFIG_SINGLE: usize = 100;
/// Keys per lookup call, as a worker's vector.
const KEYS: usize = 256;

struct Row {
    case: &'static str,
    imp: &'static str,
    changes: usize,
    secs: f64,
    commits: u64,
    compile_ms: f64,
    /// Lookups per second idle and during the changes (the updates row only).
    lookups: Option<(f64, f64)>,
    note: String,
}

impl Row {
    fn rate(&self) -> f64 {
        self.changes as f64 / self.secs
    }
}

fn stack() -> Result<(Stack, Vec<dev::mem::MemDevice>), String> {
    let mut s = Stack::new(StackConfig {
        name: "fib".into(),
        workers: 1,
        ..StackConfig::default()
    });
    let mut far = Vec::new();
    for a in ["198.18.1.1/24", "198.18.2.1/24"] {
        let (d, e) = wire(WireConfig::default());
        far.push(e);
        s.add_interface(
            Box::new(d),
            IfConfig {
                addrs: vec![a.parse().map_err(|e| format!("{e:?}"))?],
                ..IfConfig::default()
            },
        )
        .map_err(|e| format!("bench fib: {e}"))?;
    }
    Ok((s, far))
}

fn prefix(p: &Prefix4) -> IpPrefix {
    IpPrefix::V4(*p)
}

fn fpm_route(p: &Prefix4, gw: Ipv4Addr) -> FpmRoute {
    FpmRoute {
        dst: prefix(p),
        kind: NhKind::Forward,
        protocol: 186,
        table: 254,
        metric: 20,
        nexthops: vec![FpmNexthop {
            gateway: Some(IpAddr::V4(gw)),
            oif: 3,
            weight: 1,
        }],
    }
}

/// A firewall attached to `s`, on, its default rule allow (`mpstack run --ipfw`'s).
fn firewall(s: &Stack) -> Result<cmds::Firewall, String> {
    let f = net::ipfw::Ipfw::new(fw::RulesetConfig::default(), 1)?;
    f.attach(s);
    Ok(cmds::Firewall::running(f, true, false))
}

/// The node the control commands and config files run against: `s`, `fw`.
fn node<'a>(s: &'a Stack, fw: &'a cmds::Firewall) -> cmds::Node<'a> {
    cmds::Node {
        stack: s,
        fw,
        sysctl: Mutex::new(()),
        fpm: None,
        packet: None,
        clock: None,
    }
}

/// Whether table `big` holds the [`CONFIG_LINES`] entries of a generated file.
fn table_loaded(fw: &cmds::Firewall) -> bool {
    fw.get()
        .and_then(|f| f.command("table big list").ok())
        .is_some_and(|l| l.lines().count() > CONFIG_LINES)
}

/// The config file rows: [`CONFIG_LINES`] routes, then as many ipfw table
/// entries, from a generated file through the code `mpstack run --config` and
/// SIGHUP run (`control::config::parse` and `apply`: one batch, one compilation of
/// the FIB and one of the firewall's program), each timed from the file's text
/// until its last line is on the data path; beside each, [`CONFIG_SINGLE`] more of
/// the same lines as control commands one by one (`mpstack route add`, `mpstack
/// ipfw table … add`: one compilation each, of the loaded table).
fn config_rows(rows: &mut Vec<Row>) -> Result<(), String> {
    use mpstack::control::{config, Conn};
    let (s, _far) = stack()?;
    let fw = firewall(&s)?;
    let node = node(&s, &fw);
    let one_by_one = |lines: &str| -> Result<f64, String> {
        let t = Instant::now();
        for l in lines.lines() {
            let w: Vec<String> = l.split_whitespace().map(str::to_string).collect();
            cmds::execute(&node, &w, &mut Conn::buffer(), &AtomicBool::new(false))
                .map_err(|e| format!("bench fib: {l}: {}", e.msg))?;
        }
        Ok(t.elapsed().as_secs_f64())
    };
    // The lines past the file's, to add one by one.
    let more = |text: &str| -> String {
        text.lines()
            .filter(|l| !l.ends_with("create type addr"))
            .skip(CONFIG_LINES)
            .take(CONFIG_SINGLE)
            .map(|l| format!("{l}\n"))
            .collect()
    };
    for (what, text) in [
        ("routes", config::generated(CONFIG_LINES + CONFIG_SINGLE, 0)),
        (
            "table entries",
            config::generated(0, CONFIG_LINES + CONFIG_SINGLE),
        ),
    ] {
        let file: String = text
            .lines()
            .take(CONFIG_LINES + usize::from(what != "routes"))
            .map(|l| format!("{l}\n"))
            .collect();
        let t = Instant::now();
        let cfg = config::parse(&file)?;
        config::apply(&node, &cfg, "bench.conf")?;
        let secs = t.elapsed().as_secs_f64();
        let there = if what == "routes" {
            s.route_counts().0 >= CONFIG_LINES
        } else {
            table_loaded(&fw)
        };
        if !there {
            return Err(format!(
                "bench fib: the config file's {what} are not all there"
            ));
        }
        rows.push(Row {
            case: "config file",
            imp: if what == "routes" {
                "--config: routes"
            } else {
                "--config: ipfw table entries"
            },
            changes: CONFIG_LINES,
            secs,
            commits: 1,
            compile_ms: 0.0,
            lookups: None,
            note: format!("{what}: parse and apply of a generated file, one batch"),
        });
        let single = one_by_one(&more(&text))?;
        rows.push(Row {
            case: "config file",
            imp: if what == "routes" {
                "route add, one by one"
            } else {
                "ipfw table add, one by one"
            },
            changes: CONFIG_SINGLE,
            secs: single,
            commits: CONFIG_SINGLE as u64,
            compile_ms: 0.0,
            lookups: None,
            note: format!("{what}: control commands on the loaded table, one compilation each"),
        });
    }
    Ok(())
}

/// The control socket rows: the same [`CONFIG_LINES`] routes and table entries
/// through the path an operator runs, `mpstack config apply FILE` and `mpstack
/// ipfw /FILE`: the client's request (the file's text, a batch) over the node's
/// Unix socket to `control::serve`, which applies it in one batch; timed from the
/// first byte sent until the answer's exit status, which comes once the last line
/// is on the data path.
fn socket_rows(rows: &mut Vec<Row>) -> Result<(), String> {
    use mpstack::control::{self, config};
    let (s, _far) = stack()?;
    let fw = firewall(&s)?;
    let node = node(&s, &fw);
    let dir = std::env::temp_dir().join(format!("mpstack-bench-fib-{}", std::process::id()));
    let sock = control::listen_in(&dir, "fib")?;
    let stop = AtomicBool::new(false);
    let stats = control::ControlStats::default();
    let r = std::thread::scope(|sc| {
        sc.spawn(|| control::serve(&sock.listener, &node, &stop, &stats));
        let call = |args: &[&str], batch: Option<&str>| -> Result<f64, String> {
            let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            let t = Instant::now();
            let (code, _, err) = control::call(&sock.path, &args, batch)?;
            let secs = t.elapsed().as_secs_f64();
            if code != 0 {
                return Err(format!("bench fib: {}: {err}", args.join(" ")));
            }
            Ok(secs)
        };
        let r = (|| {
            let routes = config::generated(CONFIG_LINES, 0);
            let secs = call(&["config", "-q", "apply", "routes.conf"], Some(&routes))?;
            if s.route_counts().0 < CONFIG_LINES {
                return Err("bench fib: the batch's routes are not all there".to_string());
            }
            rows.push(Row {
                case: "control",
                imp: "config apply FILE: routes",
                changes: CONFIG_LINES,
                secs,
                commits: 1,
                compile_ms: 0.0,
                lookups: None,
                note: format!(
                    "routes: {:.1} MB of text over the control socket, one batch",
                    routes.len() as f64 / 1e6
                ),
            });
            // `ipfw /FILE`'s lines are ipfw commands without the word.
            let table: String = config::generated(0, CONFIG_LINES)
                .lines()
                .map(|l| format!("{}\n", l.trim_start_matches("ipfw ")))
                .collect();
            let secs = call(&["ipfw", "-q", "/bench/big.rules"], Some(&table))?;
            if !table_loaded(&fw) {
                return Err("bench fib: the batch's table entries are not all there".to_string());
            }
            rows.push(Row {
                case: "control",
                imp: "ipfw /FILE: table entries",
                changes: CONFIG_LINES,
                secs,
                commits: 1,
                compile_ms: 0.0,
                lookups: None,
                note: format!(
                    "table entries: {:.1} MB of text over the control socket, one batch",
                    table.len() as f64 / 1e6
                ),
            });
            Ok(())
        })();
        stop.store(true, Ordering::Relaxed);
        r
    });
    drop(sock);
    let _ = std::fs::remove_dir(&dir);
    r
}

/// Connects to the stack's FPM server, as zebra does, once the server has taken
/// the connection.
fn connect(at: std::net::SocketAddr, stats: &Mutex<FpmStats>) -> Result<TcpStream, String> {
    let sessions = stats.lock().unwrap_or_else(|e| e.into_inner()).sessions;
    let c = TcpStream::connect(at).map_err(|e| format!("bench fib: connect: {e}"))?;
    let until = Instant::now() + Duration::from_secs(5);
    while stats.lock().unwrap_or_else(|e| e.into_inner()).sessions == sessions {
        if Instant::now() > until {
            return Err("bench fib: the FPM server did not take the connection".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(c)
}

/// Sends `bytes` to the stack's FPM server and waits until `done` says the stack
/// has applied and compiled them; the seconds from the first byte.
fn feed(
    c: &mut TcpStream,
    bytes: &[u8],
    stats: &Mutex<FpmStats>,
    done: impl Fn(&FpmStats) -> bool,
) -> Result<(f64, FpmStats), String> {
    let t = Instant::now();
    c.write_all(bytes)
        .map_err(|e| format!("bench fib: send: {e}"))?;
    let until = Instant::now() + Duration::from_secs(600);
    loop {
        let s = *stats.lock().unwrap_or_else(|e| e.into_inner());
        if done(&s) && !s.pending {
            return Ok((t.elapsed().as_secs_f64(), s));
        }
        if Instant::now() > until {
            return Err(format!("bench fib: not applied after 600 s: {s:?}"));
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Looks up seeded keys in the stack's FIB as a worker does until `stop`; counts.
fn lookups(stack: &Stack, keys: &[u32], stop: &AtomicBool, count: &AtomicU64) {
    let mut out = vec![None; KEYS];
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        for chunk in keys.chunks_exact(KEYS) {
            let fib = stack.fib();
            fib.lookup4_raw(chunk, &mut out);
            std::hint::black_box(&out);
            n += KEYS as u64;
        }
        count.store(n, Ordering::Relaxed);
    }
}

/// Lookups per second over `secs` (nothing else running but `during`).
fn lookup_rate(
    stack: &Stack,
    keys: &[u32],
    during: impl FnOnce() -> Result<(), String>,
) -> Result<(f64, f64), String> {
    let stop = AtomicBool::new(false);
    let count = AtomicU64::new(0);
    std::thread::scope(|s| {
        let h = s.spawn(|| lookups(stack, keys, &stop, &count));
        let t = Instant::now();
        let r = during();
        let secs = t.elapsed().as_secs_f64();
        let n = count.load(Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
        let _ = h.join();
        r.map(|()| (n as f64 / secs, secs))
    })
}

fn linux(routes: &[Prefix4], updates: &[(bool, Prefix4, Ipv4Addr)]) -> Result<(Row, Row), String> {
    if !mpstack::host::is_root() {
        return Err("not root (it makes a network namespace)".into());
    }
    if !mpstack::host::on_path("ip") {
        return Err("'ip' is not installed".into());
    }
    let ns = format!("mpfib-{}", std::process::id());
    let sh = |c: &str| -> Result<(), String> {
        let o = std::process::Command::new("sh")
            .arg("-c")
            .arg(c)
            .output()
            .map_err(|e| e.to_string())?;
        if o.status.success() {
            Ok(())
        } else {
            Err(format!("{c}: {}", String::from_utf8_lossy(&o.stderr)))
        }
    };
    struct Ns(String);
    impl Drop for Ns {
        fn drop(&mut self) {
            let _ = std::process::Command::new("ip")
                .args(["netns", "del", &self.0])
                .status();
        }
    }
    let _ = sh(&format!("ip netns del {ns} 2>/dev/null"));
    sh(&format!("ip netns add {ns}"))?;
    let _guard = Ns(ns.clone());
    for (i, (a, b)) in [("v0", "v1"), ("v2", "v3")].iter().enumerate() {
        sh(&format!("ip -n {ns} link add {a} type veth peer name {b}"))?;
        sh(&format!(
            "ip -n {ns} addr add 198.18.{}.1/24 dev {a}",
            i + 1
        ))?;
        sh(&format!("ip -n {ns} link set {a} up"))?;
        sh(&format!("ip -n {ns} link set {b} up"))?;
    }
    let dir = std::env::temp_dir().join(format!("mpstack-bench-fib-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let file = dir.join("batch");
    let pfx = |p: &Prefix4| format!("{}/{}", Ipv4Addr::from(p.addr), p.len);
    let mut s = String::with_capacity(routes.len() * 40);
    for (i, p) in routes.iter().enumerate() {
        s += &format!("route add {} via {}\n", pfx(p), GW[i % 2]);
    }
    std::fs::write(&file, &s).map_err(|e| e.to_string())?;
    let t = Instant::now();
    let r = sh(&format!("ip -n {ns} -batch {}", file.display()));
    let load = t.elapsed().as_secs_f64();
    r?;
    let mut s = String::with_capacity(updates.len() * 40);
    for (add, p, gw) in updates {
        if *add {
            s += &format!("route replace {} via {gw}\n", pfx(p));
        } else {
            s += &format!("route del {}\n", pfx(p));
        }
    }
    std::fs::write(&file, &s).map_err(|e| e.to_string())?;
    let t = Instant::now();
    let r = sh(&format!("ip -n {ns} -batch {}", file.display()));
    let upd = t.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&dir);
    r?;
    Ok((
        Row {
            case: "full table",
            imp: "linux (ip -batch)",
            changes: routes.len(),
            secs: load,
            commits: 0,
            compile_ms: 0.0,
            lookups: None,
            note: "the kernel's FIB (LC-trie), updated in place, over netlink".into(),
        },
        Row {
            case: "updates",
            imp: "linux (ip -batch)",
            changes: updates.len(),
            secs: upd,
            commits: 0,
            compile_ms: 0.0,
            lookups: None,
            note: "route replace / route del".into(),
        },
    ))
}

pub fn main(a: &BenchArgs) -> Result<ExitCode, String> {
    let (table, source) = load_table(a, "fib")?;
    let table_name = match &source {
        Source::File(p) => p.clone(),
        Source::Synthetic(s) => format!("synthetic ({s})"),
    };
    // What a daemon would send: no multicast or link-local destinations (the feed
    // ignores those).
    let routes: Vec<Prefix4> = table
        .iter()
        .map(|(p, _)| *p)
        .filter(|p| {
            let a = Ipv4Addr::from(p.addr);
            !a.is_multicast() && !a.is_link_local()
        })
        .collect();
    let n = routes.len();
    let nupd = (a.updates as usize).max(2);
    let mut rng = SplitMix(0x6669_6273);
    // The changes: pairs of a withdrawal and a re-announcement through the other
    // next hop, of routes picked at random.
    let mut updates: Vec<(bool, Prefix4, Ipv4Addr)> = Vec::with_capacity(nupd);
    let mut gw_of: Vec<u8> = (0..n).map(|i| (i % 2) as u8).collect();
    while updates.len() + 1 < nupd {
        let i = rng.below(n as u64) as usize;
        gw_of[i] ^= 1;
        updates.push((false, routes[i], GW[0]));
        updates.push((true, routes[i], GW[usize::from(gw_of[i])]));
    }
    let keys: Vec<u32> = (0..(1 << 16)).map(|_| rng.next() as u32).collect();
    let mut rows = Vec::new();

    // The embedded API's one batch: the floor.
    progress(a, &format!("fib: {n} routes in one route_batch"));
    rows.push(batch_row(&routes)?);

    // The product's path: FPM frames over TCP into net::fpm::serve.
    let (s, _far) = stack()?;
    fpm_rows(a, &s, &routes, &updates, &keys, &mut rows)?;

    // route add/delete's path: one compilation per change.
    progress(
        a,
        &format!("fib: {SLOW_UPDATES} updates, one compilation each"),
    );
    {
        let t = Instant::now();
        for (add, p, gw) in updates.iter().take(SLOW_UPDATES) {
            if *add {
                let mut r = RouteSpec::via(prefix(p), IpAddr::V4(*gw), u32::from(*gw == GW[1]));
                r.flags = route::RtFlags::PROTO2;
                s.add_route(r).map_err(|e| format!("bench fib: {e}"))?;
            } else {
                s.delete_route(prefix(p), None)
                    .map_err(|e| format!("bench fib: {e}"))?;
            }
        }
        rows.push(Row {
            case: "updates",
            imp: "route add/delete (compile each)",
            changes: SLOW_UPDATES,
            secs: t.elapsed().as_secs_f64(),
            commits: SLOW_UPDATES as u64,
            compile_ms: 0.0,
            lookups: None,
            note: "Stack::add_route / delete_route, the path of `mpstack route add`".into(),
        });
    }
    drop(s);

    progress(
        a,
        &format!(
            "fib: a config file of {CONFIG_LINES} routes, then of {CONFIG_LINES} table entries"
        ),
    );
    config_rows(&mut rows)?;
    progress(
        a,
        &format!(
            "fib: {CONFIG_LINES} routes, then {CONFIG_LINES} table entries, as batches over the control socket"
        ),
    );
    socket_rows(&mut rows)?;

    progress(a, "fib: the Linux kernel (ip -batch)");
    let skipped = match linux(&routes, &updates) {
        Ok((l, u)) => {
            rows.insert(2, l);
            rows.push(u);
            None
        }
        Err(why) => Some(why),
    };

    print_rows(a, &rows, &table_name, n, updates.len(), skipped.as_deref());
    Ok(ExitCode::SUCCESS)
}

/// The embedded API's one batch of every route: the floor.
fn batch_row(routes: &[Prefix4]) -> Result<Row, String> {
    let n = routes.len();
    let (s, _far) = stack()?;
    let t = Instant::now();
    let bad = s.route_batch(|rib| {
        let mut bad = 0usize;
        for (i, p) in routes.iter().enumerate() {
            let mut r = RouteSpec::via(prefix(p), IpAddr::V4(GW[i % 2]), (i % 2) as u32);
            r.flags = route::RtFlags::PROTO2;
            bad += usize::from(rib.add(r).is_err());
        }
        bad
    });
    let secs = t.elapsed().as_secs_f64();
    if bad > 0 {
        return Err(format!("bench fib: {bad} routes refused by route_batch"));
    }
    Ok(Row {
        case: "full table",
        imp: "route_batch (one compilation)",
        changes: n,
        secs,
        commits: 1,
        compile_ms: 0.0,
        lookups: None,
        note: "the embedded API: every route, then one compilation".into(),
    })
}

/// The product's path: FPM frames over TCP into `net::fpm::serve`, the whole table
/// then the updates, lookups measured alone and during them.
fn fpm_rows(
    a: &BenchArgs,
    s: &Stack,
    routes: &[Prefix4],
    updates: &[(bool, Prefix4, Ipv4Addr)],
    keys: &[u32],
    rows: &mut Vec<Row>,
) -> Result<(), String> {
    let n = routes.len();
    let nupd = (a.updates as usize).max(2);
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bench fib: {e}"))?;
    let at = listener.local_addr().map_err(|e| e.to_string())?;
    let stats = Mutex::new(FpmStats::default());
    let stop = AtomicBool::new(false);
    let policy = net::fpm::FpmPolicy::default();
    let result = std::thread::scope(|sc| -> Result<(), String> {
        let server = sc.spawn(|| net::fpm::serve(s, &listener, &stop, &stats, &policy));
        let r = (|| -> Result<(), String> {
            progress(
                a,
                &format!("fib: {n} routes through FPM (TCP) into the stack"),
            );
            let mut bytes = Vec::with_capacity(n * 64);
            for (i, p) in routes.iter().enumerate() {
                bytes.extend(encode_route(true, &fpm_route(p, GW[i % 2])));
            }
            let mut zebra = connect(at, &stats)?;
            let (secs, st) = feed(&mut zebra, &bytes, &stats, |st| st.adds >= n as u64)?;
            if st.routes != n as u64 || st.errors + st.unresolved + st.full > 0 {
                return Err(format!("bench fib: the table did not load whole: {st:?}"));
            }
            rows.push(Row {
                case: "full table",
                imp: "mpstack fpm",
                changes: n,
                secs,
                commits: st.commits,
                compile_ms: st.commit_ns as f64 / 1e6,
                lookups: None,
                note: format!(
                    "{} compilations, the last {:.0} ms",
                    st.commits,
                    st.last_commit_ns as f64 / 1e6
                ),
            });
            let check = s.fib();
            let mut out = [None; 1];
            let p = routes[n / 2];
            fib_check(&check, p, &mut out)?;

            progress(
                a,
                &format!("fib: lookups alone, then during {nupd} updates"),
            );
            let (idle, _) = lookup_rate(s, keys, || {
                std::thread::sleep(Duration::from_secs(2));
                Ok(())
            })?;
            let mut bytes = Vec::with_capacity(nupd * 64);
            for (add, p, gw) in updates {
                bytes.extend(encode_route(*add, &fpm_route(p, *gw)));
            }
            let before = *stats.lock().unwrap_or_else(|e| e.into_inner());
            let adds = updates.iter().filter(|u| u.0).count() as u64;
            let dels = updates.len() as u64 - adds;
            let mut fed = None;
            let (busy, _) = lookup_rate(s, keys, || {
                fed = Some(feed(&mut zebra, &bytes, &stats, |st| {
                    st.adds >= before.adds + adds && st.deletes >= before.deletes + dels
                })?);
                Ok(())
            })?;
            let (secs, st) = fed.expect("fed");
            if st.routes != n as u64 {
                return Err(format!("bench fib: routes lost in the updates: {st:?}"));
            }
            rows.push(Row {
                case: "updates",
                imp: "mpstack fpm",
                changes: updates.len(),
                secs,
                commits: st.commits - before.commits,
                compile_ms: (st.commit_ns - before.commit_ns) as f64 / 1e6,
                lookups: Some((idle, busy)),
                note: format!(
                    "{} compilations; changes waited at most 4x the last ({:.0} ms)",
                    st.commits - before.commits,
                    st.last_commit_ns as f64 / 1e6
                ),
            });
            Ok(())
        })();
        stop.store(true, Ordering::Relaxed);
        let _ = server.join();
        r
    });
    result
}

/// The rows, as JSON lines (`--json`) or a table.
fn print_rows(
    a: &BenchArgs,
    rows: &[Row],
    table_name: &str,
    n: usize,
    updates: usize,
    skipped: Option<&str>,
) {
    if a.json {
        for r in rows {
            let (li, lb) = r.lookups.unwrap_or((0.0, 0.0));
            println!(
                "{{\"bench\":\"fib\",\"case\":\"{}\",\"impl\":\"{}\",\"table\":\"{}\",\"changes\":{},\"secs\":{:.4},\"per_sec\":{:.0},\"compilations\":{},\"compile_ms\":{:.1},\"lookups_idle_mlps\":{:.2},\"lookups_during_mlps\":{:.2}}}",
                r.case,
                r.imp,
                table_name.replace('\\', "\\\\").replace('"', "\\\""),
                r.changes,
                r.secs,
                r.rate(),
                r.commits,
                r.compile_ms,
                li / 1e6,
                lb / 1e6
            );
        }
        if let Some(why) = skipped {
            println!(
                "{{\"bench\":\"fib\",\"impl\":\"linux (ip -batch)\",\"skipped\":\"{}\"}}",
                why.replace('"', "'")
            );
        }
    } else {
        println!("table: {table_name}, {n} IPv4 routes; {updates} updates\n");
        println!(
            "{:<11} {:<32} {:>9} {:>9} {:>12} {:>9} {:>23}  note",
            "case",
            "implementation",
            "changes",
            "seconds",
            "changes/s",
            "compile",
            "lookups Mlps idle/busy"
        );
        for r in rows {
            let l = r.lookups.map_or("-".to_string(), |(i, b)| {
                format!("{:.1} / {:.1} ({:.2}x)", i / 1e6, b / 1e6, b / i)
            });
            let c = if r.compile_ms > 0.0 {
                format!("{:.0} ms", r.compile_ms)
            } else {
                "-".into()
            };
            println!(
                "{:<11} {:<32} {:>9} {:>9.3} {:>12.0} {:>9} {:>23}  {}",
                r.case,
                r.imp,
                r.changes,
                r.secs,
                r.rate(),
                c,
                l,
                r.note
            );
        }
        if let Some(why) = skipped {
            println!("{:<11} {:<32} skipped ({why})", "", "linux (ip -batch)");
        }
        println!(
            "\nseconds: from the first byte sent until the last change is in the FIB the workers read \
             (config file: from the file's text until its last line is on the data path; control: from the\n\
             request's first byte until its answer, which comes once the last line is on the data path).\n\
             compile: time spent compiling the FIB (Poptrie) in that span. lookups: seeded uniform keys, {KEYS} a call \
             through Stack::fib() and lookup4_raw, on another thread, alone (idle) and during the updates (busy)."
        );
    }
}

fn fib_check(fib: &route::Fib, p: Prefix4, out: &mut [Option<u32>; 1]) -> Result<(), String> {
    fib.lookup4_raw(&[p.addr], out);
    match out[0].and_then(|i| fib.nexthop(i)) {
        Some(nh) if nh.gateway.is_some() => Ok(()),
        _ => Err(format!("bench fib: {p:?} not in the FIB after the load")),
    }
}
