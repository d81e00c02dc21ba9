//! Interop: FRR as mpstack's control plane. An mpstack router on AF_PACKET between
//! two veth namespaces (a: 198.18.1.0/24, b: 198.18.2.0/24) takes its routes from
//! FRR's zebra through the Forwarding Plane Manager (`mpstack run --fpm`, zebra's
//! `dplane_fpm_nl`). FRR's bgpd, in the router's namespace, learns two prefixes
//! (198.19.0.0/16 and 198.20.0.0/16, next hop 198.18.2.2 on b's link) over eBGP from
//! a BIRD speaker in a fourth namespace; b answers for an address in each.
//!
//! Checked: the routes reach mpstack's FIB (flag 2) and pings and a TCP transfer
//! from a follow them; a prefix BIRD withdraws disappears and its traffic is refused
//! (ICMP unreachable); zebra killed leaves the routes in place (traffic flows), and
//! a new zebra resynchronises: a prefix withdrawn while it was away is swept, a new
//! one installed. Who may feed the FIB: a second connection while zebra's lives is
//! closed at once (zebra's session goes on), and so is one from an unprivileged
//! user on the host while zebra is away. Needs root, ip, socat, setpriv, ping, FRR
//! (zebra, bgpd) and BIRD; skips otherwise (fails in CI).

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const ZEBRA: &str = "/usr/lib/frr/zebra";
const BGPD: &str = "/usr/lib/frr/bgpd";

struct Lab {
    node: Option<Child>,
    lines: mpsc::Receiver<String>,
    output: Vec<String>,
    ns: [String; 4],
    tmp: PathBuf,
}

impl Drop for Lab {
    fn drop(&mut self) {
        // The daemons we started, by the PIDs they wrote.
        for f in ["zebra.pid", "bgpd.pid", "bird.pid"] {
            if let Ok(p) = std::fs::read_to_string(self.tmp.join(f)) {
                if let Ok(pid) = p.trim().parse::<u32>() {
                    let _ = sh(&format!("kill -KILL {pid} 2>/dev/null"));
                }
            }
        }
        kill_node(&mut self.node);
        for n in &self.ns {
            let _ = sh(&format!("ip netns del {n} 2>/dev/null"));
        }
        let _ = std::fs::remove_dir_all(&self.tmp);
    }
}

fn mpstack(args: &[&str]) -> (bool, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_mpstack"))
        .args(args)
        .output()
        .expect("run mpstack");
    let mut s = String::from_utf8_lossy(&o.stdout).into_owned();
    s += &String::from_utf8_lossy(&o.stderr);
    (o.status.success(), s)
}

/// Waits up to `t` for `f` to hold; the last value it saw otherwise.
fn wait_for(t: Duration, mut f: impl FnMut() -> (bool, String)) -> Result<(), String> {
    let end = Instant::now() + t;
    loop {
        let (ok, last) = f();
        if ok {
            return Ok(());
        }
        if Instant::now() >= end {
            return Err(last);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

fn start_zebra(ns: &str, tmp: &Path) {
    let _ = std::fs::remove_file(tmp.join("zebra.pid"));
    let d = tmp.display();
    run(&format!(
        "ip netns exec {ns} {ZEBRA} -d -u frr -g frr -M dplane_fpm_nl -f {d}/zebra.conf \
         -i {d}/zebra.pid -z {d}/zserv.api --vty_socket {d} -P 0"
    ));
}

fn start_bgpd(ns: &str, tmp: &Path) {
    let _ = std::fs::remove_file(tmp.join("bgpd.pid"));
    let d = tmp.display();
    run(&format!(
        "ip netns exec {ns} {BGPD} -d -u frr -g frr -f {d}/bgpd.conf -i {d}/bgpd.pid \
         -z {d}/zserv.api --vty_socket {d} -P 0"
    ));
}

fn bird_routes(prefixes: &[&str]) -> String {
    let routes: String = prefixes
        .iter()
        .map(|p| format!("route {p} blackhole; "))
        .collect();
    format!(
        "router id 198.18.100.2;\n\
         protocol device {{}}\n\
         protocol static s4 {{ ipv4; {routes}}}\n\
         protocol bgp r {{ local 198.18.100.2 as 65002; neighbor 198.18.100.1 as 65001; \
         ipv4 {{ import none; export filter {{ bgp_next_hop = 198.18.2.2; accept; }}; }}; }}\n"
    )
}

#[test]
fn frr_feeds_the_fib_withdraws_and_resynchronises() {
    skip_unless!("ip", "socat", "setpriv", "ping", "bird", "birdc");
    for d in [ZEBRA, BGPD] {
        if !Path::new(d).exists() {
            let why = format!(
                "{d} is not installed (package frr; the README's test command installs it)"
            );
            skip("frr", &why);
            return;
        }
    }
    let id = std::process::id() % 10000;
    let ns = [
        format!("mpfrr-r-{id}"),
        format!("mpfrr-a-{id}"),
        format!("mpfrr-b-{id}"),
        format!("mpfrr-c-{id}"),
    ];
    let tmp = std::env::temp_dir().join(format!("mpstack-frr-{id}"));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    // zebra and bgpd run as frr: they write their pid files, sockets and logs here.
    run(&format!("chmod 777 {}", tmp.display()));
    for n in &ns {
        let _ = sh(&format!("ip netns del {n} 2>/dev/null"));
        run(&format!("ip netns add {n}"));
        run(&format!("ip -n {n} link set lo up"));
    }
    let [r, a, b, c] = &ns;
    let (node, lines) = {
        for (side, n, addr, gw) in [
            ("a", a, "198.18.1.2/24", "198.18.1.1"),
            ("b", b, "198.18.2.2/24", "198.18.2.1"),
        ] {
            run(&format!(
                "ip -n {r} link add r{side} type veth peer name p{side} netns {n}"
            ));
            run(&format!("ip -n {r} link set r{side} up"));
            run(&format!("ip -n {n} addr add {addr} dev p{side}"));
            run(&format!("ip -n {n} link set p{side} up"));
            run(&format!("ip -n {n} route add default via {gw}"));
        }
        // b answers for an address in each prefix BGP carries.
        for x in ["198.19.0.1/32", "198.20.0.1/32", "198.21.0.1/32"] {
            run(&format!("ip -n {b} addr add {x} dev lo"));
        }
        // The BGP session: r's kernel (bgpd) to BIRD in c over a link of their own.
        run(&format!(
            "ip -n {r} link add rc type veth peer name pc netns {c}"
        ));
        run(&format!("ip -n {r} addr add 198.18.100.1/30 dev rc"));
        run(&format!("ip -n {r} link set rc up"));
        run(&format!("ip -n {c} addr add 198.18.100.2/30 dev pc"));
        run(&format!("ip -n {c} link set pc up"));
        // zebra resolves the BGP next hop 198.18.2.2 through a connected network of
        // its kernel's: an address on rb that answers nothing (mpstack owns the
        // link), and the kernel does not forward.
        run(&format!(
            "ip netns exec {r} sysctl -qw net.ipv4.ip_forward=0"
        ));
        run(&format!(
            "ip netns exec {r} sysctl -qw net.ipv4.conf.rb.arp_ignore=8"
        ));
        run(&format!("ip -n {r} addr add 198.18.2.254/24 dev rb"));
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", r, env!("CARGO_BIN_EXE_mpstack"), "run"])
            .args(["--packet", "ra", "--packet", "rb", "--serve", "none"])
            .args(["--inet", "ra=198.18.1.1/24", "--inet", "rb=198.18.2.1/24"])
            .args(["--forwarding", "--name", &format!("frr-{id}")])
            .args(["--fpm", "127.0.0.1:2620"]);
        spawn_node(cmd)
    };
    let mut lab = Lab {
        node: Some(node),
        lines,
        output: Vec::new(),
        ns: ns.clone(),
        tmp: tmp.clone(),
    };
    assert!(
        wait_line(
            &lab.lines,
            &mut lab.output,
            "routes from FRR (fpm) at 127.0.0.1:2620",
            Duration::from_secs(20)
        )
        .is_some(),
        "mpstack did not come up: {:?}",
        lab.output
    );
    let j = format!("frr-{id}");

    write(
        &tmp,
        "zebra.conf",
        &format!(
            "hostname r\nlog file {}/zebra.log\nfpm address 127.0.0.1 port 2620\n\
             no fpm use-next-hop-groups\n",
            tmp.display()
        ),
    );
    write(
        &tmp,
        "bgpd.conf",
        &format!(
            "hostname r\nlog file {}/bgpd.log\nrouter bgp 65001\n bgp router-id 198.18.100.1\n \
             no bgp ebgp-requires-policy\n neighbor 198.18.100.2 remote-as 65002\n \
             neighbor 198.18.100.2 timers connect 1\n \
             address-family ipv4 unicast\n  neighbor 198.18.100.2 activate\n exit-address-family\n",
            tmp.display()
        ),
    );
    write(
        &tmp,
        "bird.conf",
        &bird_routes(&["198.19.0.0/16", "198.20.0.0/16"]),
    );
    run(&format!(
        "chmod 644 {}/zebra.conf {}/bgpd.conf",
        tmp.display(),
        tmp.display()
    ));
    start_zebra(r, &tmp);
    start_bgpd(r, &tmp);
    let d = tmp.display();
    run(&format!(
        "ip netns exec {c} bird -c {d}/bird.conf -s {d}/bird.ctl -P {d}/bird.pid"
    ));

    let get = |dst: &str| mpstack(&["route", "-j", &j, "-n", "get", dst]);
    let diag = |lab: &Lab| {
        let (_, z) = sh(&format!("tail -n 20 {d}/zebra.log {d}/bgpd.log; birdc -s {d}/bird.ctl show route; birdc -s {d}/bird.ctl show protocols; ip -n {r} route; vtysh --vty_socket {d} -c 'show ip route' -c 'show fpm status' -c 'show fpm counters'"));
        let (_, s) = mpstack(&["netstat", "-j", &j, "-s"]);
        let (_, rt) = mpstack(&["netstat", "-j", &j, "-rn"]);
        format!("{z}\n{s}\n{rt}\n{:?}", lab.output)
    };
    for dst in ["198.19.0.1", "198.20.0.1"] {
        if let Err(last) = wait_for(Duration::from_secs(60), || {
            let (ok, out) = get(dst);
            (
                ok && out.contains("198.18.2.2") && out.contains("PROTO2"),
                out,
            )
        }) {
            panic!("{dst}: no route from FRR: {last}\n{}", diag(&lab));
        }
    }
    let (_, rt) = mpstack(&["netstat", "-j", &j, "-rn"]);
    assert!(
        rt.lines().any(|l| l.starts_with("198.19.0.0/16")
            && l.contains("198.18.2.2")
            && l.contains("UG2")),
        "{rt}"
    );
    // The kernel's own (connected) routes zebra also sends are not taken.
    assert!(!rt.contains("198.18.100.0"), "{rt}");
    for dst in ["198.19.0.1", "198.20.0.1"] {
        run(&format!("ip netns exec {a} ping -c 2 -W 2 -i 0.2 {dst}"));
    }
    socat_transfer(a, b, "198.19.0.1", 2, &tmp, "through a BGP route");

    // BIRD withdraws 198.20.0.0/16: mpstack drops it, and says so to a's ping.
    write(&tmp, "bird.conf", &bird_routes(&["198.19.0.0/16"]));
    run(&format!("birdc -s {d}/bird.ctl configure"));
    if let Err(last) = wait_for(Duration::from_secs(30), || {
        let (ok, out) = get("198.20.0.1");
        (!ok, out)
    }) {
        panic!(
            "198.20.0.0/16 still routed after BIRD withdrew it: {last}\n{}",
            diag(&lab)
        );
    }
    let (ok, out) = sh(&format!("ip netns exec {a} ping -c 1 -W 2 198.20.0.1"));
    assert!(!ok && out.contains("Unreachable"), "{out}");
    run(&format!("ip netns exec {a} ping -c 1 -W 2 198.19.0.1"));

    // Another connection while zebra's lives is closed at once: socat ends as soon
    // as the node closes, and zebra's session goes on.
    let fpm_stats = || -> serde_json::Value {
        let (_, js) = mpstack(&["netstat", "-j", &j, "-s", "--json"]);
        serde_json::from_str::<serde_json::Value>(&js).unwrap()["fpm"].clone()
    };
    let (_, out) = sh(&format!(
        "ip netns exec {r} timeout 10 socat -T 8 - TCP:127.0.0.1:2620 < /dev/zero; echo rc=$?"
    ));
    assert!(!out.contains("rc=124"), "socat held on: {out}");
    let f = fpm_stats();
    assert_eq!(
        (f["busy"].as_u64(), f["connected"].as_u64()),
        (Some(1), Some(1)),
        "{f}\n{out}"
    );
    assert_eq!(f["sessions"], 1, "{f}");
    assert_eq!(f["errors"], 0, "{f}");
    run(&format!("ip netns exec {a} ping -c 1 -W 2 198.19.0.1"));

    // FRR dies (zebra and bgpd, as watchfrr restarts them together): the routes
    // stay and traffic flows.
    for f in ["zebra.pid", "bgpd.pid"] {
        let pid = std::fs::read_to_string(tmp.join(f)).unwrap();
        run(&format!("kill -KILL {}", pid.trim()));
    }
    std::thread::sleep(Duration::from_secs(1));
    run(&format!(
        "ip netns exec {a} ping -c 2 -W 2 -i 0.2 198.19.0.1"
    ));
    let (_, s) = mpstack(&["netstat", "-j", &j, "-s"]);
    assert!(!s.contains("\t1 connected"), "{s}");
    // No session lives now: an unprivileged user of the host reaching the port is
    // still not zebra. It is closed at once, what it sends is not read.
    let frame = "\\001\\001\\000\\004";
    let frames = fpm_stats()["frames"].as_u64();
    let (_, out) = sh(&format!(
        "ip netns exec {r} setpriv --reuid=65534 --regid=65534 --clear-groups \
         sh -c 'printf \"{frame}\" | timeout 10 socat -T 8 - TCP:127.0.0.1:2620; echo rc=$?'"
    ));
    assert!(!out.contains("rc=124"), "socat held on: {out}");
    let f = fpm_stats();
    assert_eq!(
        (f["refused"].as_u64(), f["sessions"].as_u64()),
        (Some(1), Some(1)),
        "{f}"
    );
    assert_eq!(f["frames"].as_u64(), frames, "{f}");
    // While it is away, BIRD withdraws 198.19.0.0/16 and announces 198.21.0.0/16.
    write(&tmp, "bird.conf", &bird_routes(&["198.21.0.0/16"]));
    run(&format!("birdc -s {d}/bird.ctl configure"));
    std::thread::sleep(Duration::from_secs(2));
    assert!(get("198.19.0.1").0, "the routes stay while zebra is away");
    // FRR again: bgpd learns the table from BIRD anew, zebra sends it whole, and
    // what it no longer has is swept once it has been quiet 3 s.
    start_zebra(r, &tmp);
    start_bgpd(r, &tmp);
    if let Err(last) = wait_for(Duration::from_secs(60), || {
        let (ok21, out) = get("198.21.0.1");
        let (ok19, _) = get("198.19.0.1");
        (ok21 && out.contains("198.18.2.2") && !ok19, out)
    }) {
        panic!("no resynchronisation: {last}\n{}", diag(&lab));
    }
    run(&format!(
        "ip netns exec {a} ping -c 2 -W 2 -i 0.2 198.21.0.1"
    ));
    let (_, js) = mpstack(&["netstat", "-j", &j, "-s", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&js).unwrap();
    let f = &v["fpm"];
    assert_eq!(f["sessions"], 2, "{js}");
    assert_eq!(f["connected"], 1, "{js}");
    assert!(f["stale_swept"].as_u64().unwrap() >= 1, "{js}");
    assert!(f["deletes"].as_u64().unwrap() >= 1, "{js}");
    assert!(f["errors"] == 0, "{js}");
    let stats = stop_node(&mut lab.node, &lab.lines, &mut lab.output);
    drop(stats);
}
