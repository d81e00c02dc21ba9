//! Interop: the mpstack bridge (`mpstack run --bridge`) between Linux hosts, its
//! spanning tree in a loop with Linux kernel bridges (`stp_state 1`), and VLAN
//! interfaces (`--vlan`) against Linux's `type vlan`. Each test makes
//! its own namespaces and TAP devices and removes them; needs root, skips with a
//! message otherwise (fails in CI). Addresses: 198.18.0.0/24 only.

mod common;
use common::*;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// An `mpstack run` node and the namespaces around it, removed on drop.
struct Net {
    node: Option<Child>,
    lines: mpsc::Receiver<String>,
    output: Vec<String>,
    ns: Vec<String>,
    tmp: std::path::PathBuf,
}

impl Net {
    /// Starts `mpstack run` with `args`, waits for it to come up.
    fn start(tag: &str, ns: Vec<String>, args: &[String]) -> Net {
        for n in &ns {
            let _ = sh(&format!("ip netns del {n} 2>/dev/null"));
        }
        let tmp = std::env::temp_dir().join(format!("mpstack-bridge-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mpstack"));
        cmd.arg("run").args(args);
        let (node, lines) = spawn_node(cmd);
        let mut n = Net {
            node: Some(node),
            lines,
            output: Vec::new(),
            ns,
            tmp,
        };
        assert!(
            wait_line(&n.lines, &mut n.output, "up on", Duration::from_secs(20)).is_some(),
            "mpstack did not come up: {:?}",
            n.output
        );
        for ns in &n.ns {
            run(&format!("ip netns add {ns}"));
            run(&format!("ip -n {ns} link set lo up"));
        }
        n
    }

    fn exec(&self, i: usize, cmd: &str) -> (bool, String) {
        sh(&format!("ip netns exec {} {cmd}", self.ns[i]))
    }

    fn stop(&mut self) -> std::collections::HashMap<String, u64> {
        stop_node(&mut self.node, &self.lines, &mut self.output)
    }

    /// `mb` MB from namespace `from` to `dst` in namespace `to`, SHA-256 compared.
    fn transfer(&self, from: usize, to: usize, dst: &str, mb: u32, what: &str) {
        socat_transfer(&self.ns[from], &self.ns[to], dst, mb, &self.tmp, what);
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        kill_node(&mut self.node);
        for n in &self.ns {
            let _ = sh(&format!("ip netns del {n} 2>/dev/null"));
        }
        let _ = std::fs::remove_dir_all(&self.tmp);
    }
}

/// Runs a set-up command that must work.
fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn three_hosts(workers: u16) {
    let id = std::process::id() % 10000;
    let tag = format!("h{workers}");
    let taps: Vec<String> = (0..3).map(|k| format!("mpbr{tag}{k}x{id}")).collect();
    let ns: Vec<String> = (0..3).map(|k| format!("mpbr-{tag}{k}-{id}")).collect();
    let mut args = Vec::new();
    for t in &taps {
        args.extend(["--tap".to_string(), t.clone()]);
    }
    args.extend(strs(&[
        "--bridge",
        &format!("bridge0={}", taps.join(",")),
        "--inet",
        "bridge0=198.18.0.254/24",
        "--workers",
        &workers.to_string(),
        "--serve",
        "echo",
    ]));
    let mut net = Net::start(&tag, ns.clone(), &args);
    for (k, (n, t)) in ns.iter().zip(&taps).enumerate() {
        run(&format!("ip link set {t} netns {n}"));
        run(&format!("ip -n {n} addr add 198.18.0.{}/24 dev {t}", k + 1));
        run(&format!("ip -n {n} link set {t} up"));
        run(&format!(
            "ip netns exec {n} sysctl -qw net.ipv4.icmp_echo_ignore_broadcasts=0"
        ));
    }
    // Ping: every host every other, and the bridge's own address.
    for (from, dst) in [
        (0, "198.18.0.2"),
        (1, "198.18.0.3"),
        (2, "198.18.0.1"),
        (0, "198.18.0.254"),
    ] {
        let (ok, out) = net.exec(from, &format!("ping -c 5 -i 0.2 -W 2 {dst}"));
        assert!(
            ok && out.contains("5 received"),
            "workers={workers} ping {dst} from host {from}: {out}"
        );
        assert!(out.contains("ttl=64"), "bridged, not routed: {out}");
    }
    // A broadcast ping reaches both other hosts, which answer. (mpstack itself
    // ignores broadcast echo requests, as FreeBSD's net.inet.icmp.bmcastecho=0.)
    let (_, out) = net.exec(0, "ping -b -c 3 -i 0.3 -W 2 198.18.0.255");
    for a in ["198.18.0.2", "198.18.0.3"] {
        assert!(
            out.contains(&format!("from {a}")),
            "broadcast answered by {a}: {out}"
        );
    }
    // TCP across the bridge, both ways, SHA-256 checked.
    net.transfer(0, 2, "198.18.0.3", 20, &format!("workers={workers} h1→h3"));
    net.transfer(1, 0, "198.18.0.1", 20, &format!("workers={workers} h2→h1"));
    // TCP to the bridge's own echo service.
    let (ok, out) = net.exec(
        1,
        "sh -c 'head -c 2000000 /dev/urandom > /tmp/mpbr-echo-$$; timeout 30 socat -t 30 - TCP:198.18.0.254:7 < /tmp/mpbr-echo-$$ | sha256sum; sha256sum < /tmp/mpbr-echo-$$; rm -f /tmp/mpbr-echo-$$'",
    );
    assert!(ok, "{out}");
    assert_same_sums(&out, "echo through the bridge");
    let c = net.stop();
    assert!(
        c.get("bridge.forwarded").copied().unwrap_or(0) > 20_000,
        "{c:?}"
    );
    assert!(c.get("bridge.flooded").copied().unwrap_or(0) > 0, "{c:?}");
    assert!(c.get("bridge.local").copied().unwrap_or(0) > 1_000, "{c:?}");
    assert!(
        net.output
            .iter()
            .any(|l| l.contains("bridge0: member:") && l.contains("state forwarding")),
        "{:?}",
        net.output
    );
}

#[test]
fn three_linux_hosts_talk_through_an_mpstack_bridge_one_worker() {
    skip_unless!("ip", "ping", "socat", "sha256sum");
    three_hosts(1);
}

#[test]
fn three_linux_hosts_talk_through_an_mpstack_bridge_two_workers() {
    skip_unless!("ip", "ping", "socat", "sha256sum");
    three_hosts(2);
}

/// Packets a namespace's link has received so far.
fn rx_packets(net: &Net, i: usize, dev: &str) -> u64 {
    let (_, out) = net.exec(
        i,
        &format!("cat /sys/class/net/{dev}/statistics/rx_packets"),
    );
    out.trim().parse().unwrap_or(0)
}

/// The STP state Linux shows for a bridge port (`bridge link show`).
fn linux_port_state(net: &Net, i: usize, dev: &str) -> String {
    let (_, out) = net.exec(i, &format!("cat /sys/class/net/{dev}/brport/state"));
    match out.trim() {
        "0" => "disabled",
        "1" => "listening",
        "2" => "learning",
        "3" => "forwarding",
        "4" => "blocking",
        _ => "?",
    }
    .to_string()
}

/// A loop of three bridges: two Linux kernel bridges (namespaces l1, l2; spanning
/// tree on, l1 the root) and the mpstack bridge, joined l1–mpstack and
/// l2–mpstack by TAPs and l1–l2 by a veth pair. The redundant port (mpstack's
/// towards l2: its path to the root is worse than l2's) blocks; no storm; pulling
/// the l1–l2 link makes it forward, and l1 and l2 reach each other through it.
#[test]
fn spanning_tree_with_linux_bridges_breaks_the_loop_and_reconverges() {
    skip_unless!("ip", "ping");
    let id = std::process::id() % 10000;
    let (ta, tb) = (format!("mpstpa{id}"), format!("mpstpb{id}"));
    let ns = vec![format!("mpstp-l1-{id}"), format!("mpstp-l2-{id}")];
    let args = strs(&[
        "--tap",
        &ta,
        "--tap",
        &tb,
        "--bridge",
        &format!("bridge0={ta},{tb}"),
        "--stp",
        "--stp-fwddelay",
        "4",
        "--stp-hellotime",
        "1",
        "--stp-maxage",
        "6",
        "--serve",
        "none",
    ]);
    let mut net = Net::start("stp", ns.clone(), &args);
    let (l1, l2) = (&ns[0], &ns[1]);
    run(&format!(
        "ip link add v1{id} netns {l1} type veth peer name v2{id} netns {l2}"
    ));
    for (n, tap, veth, prio, addr) in [
        (l1, &ta, format!("v1{id}"), 4096, "198.18.0.11/24"),
        (l2, &tb, format!("v2{id}"), 40960, "198.18.0.12/24"),
    ] {
        run(&format!("ip link set {tap} netns {n}"));
        run(&format!(
            "ip -n {n} link add br0 type bridge stp_state 1 priority {prio} forward_delay 400 hello_time 100 max_age 600"
        ));
        for dev in [tap.as_str(), veth.as_str()] {
            run(&format!("ip -n {n} link set {dev} master br0"));
            run(&format!("ip -n {n} link set {dev} up"));
        }
        run(&format!("ip -n {n} addr add {addr} dev br0"));
        run(&format!("ip -n {n} link set br0 up"));
    }
    // Listening and learning take 2 × 4 s; wait for the tree to settle.
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let states = [
            linux_port_state(&net, 0, &ta),
            linux_port_state(&net, 0, &format!("v1{id}")),
            linux_port_state(&net, 1, &format!("v2{id}")),
            linux_port_state(&net, 1, &tb),
        ];
        if states.iter().all(|s| s == "forwarding") {
            break;
        }
        assert!(
            Instant::now() < end,
            "Linux ports never all forwarded: {states:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    std::thread::sleep(Duration::from_secs(2));
    // l1 is the root; l2's veth is its root port; its TAP towards mpstack is
    // designated (l2 is nearer the root than mpstack across the veth): so the
    // loop is broken on mpstack's side, and Linux's four ports all forward.
    let (ok, out) = net.exec(0, "ping -c 3 -i 0.2 -W 2 198.18.0.12");
    assert!(ok && out.contains("3 received"), "{out}");
    // No storm: a broadcast ping does not circle. Frames on l1's TAP in 3 s of
    // a broadcast every 0.2 s stay in the tens.
    let before = rx_packets(&net, 0, &ta);
    let _ = net.exec(0, "ping -b -c 15 -i 0.2 -W 1 198.18.0.255");
    let after = rx_packets(&net, 0, &ta);
    assert!(
        after - before < 200,
        "{} frames on l1's TAP: a storm",
        after - before
    );
    // Pull the l1–l2 link: l2 reaches the root through mpstack after max age and
    // twice the forward delay.
    run(&format!("ip -n {l1} link set v1{id} down"));
    let end = Instant::now() + Duration::from_secs(40);
    loop {
        let (ok, out) = net.exec(0, "ping -c 1 -W 1 198.18.0.12");
        if ok && out.contains("1 received") {
            break;
        }
        assert!(Instant::now() < end, "never reconverged: {out}");
        std::thread::sleep(Duration::from_millis(500));
    }
    let (ok, out) = net.exec(0, "ping -c 5 -i 0.2 -W 2 198.18.0.12");
    assert!(ok && out.contains("5 received"), "{out}");
    let c = net.stop();
    assert!(c.get("bridge.bpdus").copied().unwrap_or(0) > 10, "{c:?}");
    assert!(c.get("bridge.bpdusent").copied().unwrap_or(0) > 5, "{c:?}");
    assert!(c.get("bridge.bpdubad").copied().unwrap_or(0) == 0, "{c:?}");
    assert!(c.get("bridge.forwarded").copied().unwrap_or(0) > 5, "{c:?}");
    // Before the pull mpstack's port towards l2 blocked (frames dropped there).
    assert!(c.get("bridge.blocked").copied().unwrap_or(0) > 0, "{c:?}");
    let root = net
        .output
        .iter()
        .find(|l| l.contains("bridge0: stp"))
        .cloned()
        .unwrap_or_default();
    assert!(
        root.contains("root 1000."),
        "l1 (priority 4096) is root: {root}"
    );
}

/// A Python with scapy (Debian's `python3-scapy`, in the system interpreter).
fn scapy_python() -> Option<String> {
    ["/usr/bin/python3", "python3"].iter().find_map(|py| {
        let (ok, _) = sh(&format!("{py} -c 'import scapy' 2>/dev/null"));
        ok.then(|| py.to_string())
    })
}

/// Whether this kernel has 802.1Q interfaces (`ip link add … type vlan`).
fn kernel_has_vlan() -> bool {
    let (ok, out) = sh("zcat /proc/config.gz 2>/dev/null | grep -c '^CONFIG_VLAN_8021Q='");
    ok && out.trim() != "0"
}

/// `mpstack run --vlan`: two VLAN interfaces over one TAP answer 802.1Q-tagged ARP
/// and echo requests that Linux sends (scapy over a packet socket in the TAP's
/// namespace: this machine's kernel has no 802.1Q interfaces, CONFIG_VLAN_8021Q is
/// off, so Linux's `type vlan` cannot be the peer here), each answer tagged with
/// its request's VLAN; a VLAN the node does not have gets no answer.
#[test]
fn vlan_interfaces_answer_linux_tagged_frames() {
    skip_unless!("ip");
    let Some(py) = scapy_python() else {
        skip(
            "vlan_interfaces_answer_linux_tagged_frames",
            "no Python with scapy (python3-scapy): the README's test command installs it",
        );
        return;
    };
    let id = std::process::id() % 10000;
    let tap = format!("mpvl{id}");
    let ns = vec![format!("mpvl-{id}")];
    let args = strs(&[
        "--tap",
        &tap,
        "--vlan",
        &format!("v10={tap}:10"),
        "--vlan",
        &format!("v20={tap}:20"),
        "--inet",
        "v10=198.18.10.2/24",
        "--inet",
        "v20=198.18.20.2/24",
        "--workers",
        "2",
    ]);
    let mut net = Net::start("vlan", ns.clone(), &args);
    let n = &ns[0];
    run(&format!("ip link set {tap} netns {n}"));
    run(&format!("ip -n {n} link set {tap} up"));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/scapy/vlan.py");
    let (ok, out) = net.exec(0, &format!("{py} {script} {tap}"));
    eprintln!("{out}");
    assert!(ok, "tagged exchanges failed:\n{out}");
    let c = net.stop();
    assert!(c.get("vlan.ipackets").copied().unwrap_or(0) >= 8, "{c:?}");
    assert!(c.get("vlan.opackets").copied().unwrap_or(0) >= 8, "{c:?}");
    assert!(
        c.get("ether.vlandrop").copied().unwrap_or(0) >= 1,
        "VLAN 30: {c:?}"
    );
    assert!(
        net.output.iter().any(|l| l.contains("v10 (vlan 10 on")),
        "{:?}",
        net.output
    );
}

/// TCP over a VLAN between two `mpstack run` nodes, through a Linux kernel bridge
/// that carries their tagged frames as they are (20 MB to the echo service and
/// back, SHA-256 compared), while a Linux host on the same bridge, untagged, does
/// not reach the VLAN. Where the kernel has 802.1Q interfaces, a Linux `type vlan`
/// interface on the bridge pings both nodes too.
#[test]
fn two_nodes_carry_tcp_over_a_vlan_through_a_linux_bridge() {
    skip_unless!("ip", "ping");
    let id = std::process::id() % 10000;
    let (ta, tb) = (format!("mpva{id}"), format!("mpvb{id}"));
    let ns = vec![format!("mpvsw-{id}")];
    let server = strs(&[
        "--tap",
        &ta,
        "--vlan",
        &format!("v10={ta}:10"),
        "--inet",
        "v10=198.18.10.1/24",
        "--serve",
        "echo",
    ]);
    let mut srv = Net::start("vsrv", ns.clone(), &server);
    let n = &ns[0];
    run(&format!("ip link set {ta} netns {n}"));
    run(&format!("ip -n {n} link add br0 type bridge"));
    run(&format!("ip -n {n} link set {ta} master br0"));
    run(&format!("ip -n {n} link set {ta} up"));
    run(&format!("ip -n {n} addr add 198.18.10.9/24 dev br0"));
    run(&format!("ip -n {n} link set br0 up"));
    // The client node: its TAP joins the bridge while its connection retries.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mpstack"));
    cmd.args(["run", "--tap", &tb, "--vlan", &format!("v10={tb}:10")])
        .args(["--inet", "v10=198.18.10.2/24", "--serve", "none"])
        .args(["--connect", "198.18.10.1:7", "--send", "20000000"]);
    let (node, lines) = spawn_node(cmd);
    let mut cli = Net {
        node: Some(node),
        lines,
        output: Vec::new(),
        ns: Vec::new(),
        tmp: std::env::temp_dir().join(format!("mpstack-bridge-vcli-{id}")),
    };
    assert!(
        wait_line(
            &cli.lines,
            &mut cli.output,
            "up on",
            Duration::from_secs(20)
        )
        .is_some(),
        "{:?}",
        cli.output
    );
    run(&format!("ip link set {tb} netns {n}"));
    run(&format!("ip -n {n} link set {tb} master br0"));
    run(&format!("ip -n {n} link set {tb} up"));
    let line = wait_line(
        &cli.lines,
        &mut cli.output,
        "client:",
        Duration::from_secs(60),
    )
    .unwrap_or_else(|| panic!("no client report: {:?}", cli.output));
    let sums: Vec<&str> = line
        .split("sha256 ")
        .skip(1)
        .filter_map(|p| p.split([',', ' ']).next())
        .collect();
    assert!(
        line.contains("sent 20000000 byte(s)") && line.contains("received 20000000 byte(s)"),
        "{line}"
    );
    assert!(
        sums.len() == 2 && sums[0] == sums[1],
        "echoed bytes differ: {line}"
    );
    // The Linux host on the bridge, untagged, is not on VLAN 10.
    let (ok, out) = srv.exec(0, "ping -c 2 -i 0.2 -W 1 198.18.10.1");
    assert!(!ok, "untagged reached the VLAN: {out}");
    if kernel_has_vlan() {
        run(&format!(
            "ip -n {n} link add link br0 name br0.10 type vlan id 10"
        ));
        run(&format!("ip -n {n} addr add 198.18.10.8/24 dev br0.10"));
        run(&format!("ip -n {n} link set br0.10 up"));
        let (ok, out) = srv.exec(0, "ping -c 3 -i 0.2 -W 2 198.18.10.1");
        assert!(ok && out.contains("3 received"), "Linux type vlan: {out}");
    }
    let c = srv.stop();
    assert!(
        c.get("vlan.ipackets").copied().unwrap_or(0) > 5_000,
        "{c:?}"
    );
    assert!(
        c.get("vlan.opackets").copied().unwrap_or(0) > 5_000,
        "{c:?}"
    );
    assert!(c.get("ether.vlandrop").copied().unwrap_or(0) == 0, "{c:?}");
    let _ = cli.stop();
}

/// Namespaces deleted on drop, and the node in one of them stopped.
struct Veths {
    node: Option<Child>,
    ns: Vec<String>,
}

impl Drop for Veths {
    fn drop(&mut self) {
        kill_node(&mut self.node);
        for n in &self.ns {
            let _ = sh(&format!("ip netns del {n} 2>/dev/null"));
        }
    }
}

/// `mpstack ifconfig -j NODE ARGS…`: (success, stdout and stderr).
fn ifconfig(node: &str, args: &[&str]) -> (bool, String) {
    output(
        Command::new(env!("CARGO_BIN_EXE_mpstack"))
            .args(["ifconfig", "-j", node])
            .args(args),
    )
}

/// A bridge of AF_PACKET members (veths into namespaces a, b, c) changed while it
/// runs: `addm` brings a third host onto the segment and puts its link in
/// promiscuous mode, member flags and static addresses change, `deletem` takes it
/// off again and gives the mode back; bad commands leave the bridge as it was; a
/// ping between the two other hosts runs through all of it without a loss.
#[test]
fn bridge_members_are_added_and_removed_at_run_time() {
    skip_unless!("ip", "ping");
    let id = std::process::id() % 10000;
    let node = format!("braddm-{id}");
    let ns: Vec<String> = ["r", "a", "b", "c"]
        .iter()
        .map(|x| format!("mpbrm-{x}-{id}"))
        .collect();
    for n in &ns {
        let _ = sh(&format!("ip netns del {n} 2>/dev/null"));
        run(&format!("ip netns add {n}"));
        run(&format!("ip -n {n} link set lo up"));
    }
    let mut g = Veths {
        node: None,
        ns: ns.clone(),
    };
    let r = &ns[0];
    // The kernel in r holds no address on the members and sends nothing of its own.
    run(&format!(
        "ip netns exec {r} sysctl -qw net.ipv6.conf.default.disable_ipv6=1"
    ));
    for (k, side) in ["a", "b", "c"].iter().enumerate() {
        let n = &ns[k + 1];
        run(&format!(
            "ip -n {r} link add r{side} type veth peer name p{side} netns {n}"
        ));
        run(&format!("ip -n {r} link set r{side} up"));
        run(&format!(
            "ip -n {n} addr add 198.18.0.{}/24 dev p{side}",
            k + 1
        ));
        run(&format!("ip -n {n} link set p{side} up"));
    }
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", r, env!("CARGO_BIN_EXE_mpstack"), "run"])
        .args(["--packet", "ra", "--packet", "rb", "--packet", "rc"])
        .args([
            "--bridge",
            "bridge0=ra,rb",
            "--inet",
            "bridge0=198.18.0.254/24",
        ])
        .args(["--serve", "none", "--name", &node]);
    let (child, lines) = spawn_node(cmd);
    g.node = Some(child);
    let mut output = Vec::new();
    assert!(
        wait_line(
            &lines,
            &mut output,
            "control socket",
            Duration::from_secs(20)
        )
        .is_some(),
        "mpstack did not come up: {output:?}"
    );
    let ping = |from: usize, to: &str| {
        sh(&format!(
            "ip netns exec {} ping -c 2 -i 0.2 -W 1 {to}",
            ns[from]
        ))
    };
    // The kernel counts promiscuous holders (`ip -d link`'s "promiscuity N"); the
    // flag `ip link` prints is only the one set by hand.
    let promisc = |dev: &str| {
        !sh(&format!("ip -d -n {r} link show {dev}"))
            .1
            .contains("promiscuity 0 ")
    };
    let ok = |args: &[&str]| {
        let (fine, out) = ifconfig(&node, args);
        assert!(fine, "ifconfig {}: {out}", args.join(" "));
        out
    };
    let refused = |args: &[&str], why: &str| {
        let before = ok(&["bridge0"]);
        let (fine, out) = ifconfig(&node, args);
        assert!(
            !fine && out.contains(why),
            "ifconfig {}: {out}",
            args.join(" ")
        );
        assert_eq!(
            ok(&["bridge0"]),
            before,
            "a refused command changed the bridge"
        );
    };

    assert!(ping(1, "198.18.0.2").0, "a to b through the bridge");
    assert!(!ping(1, "198.18.0.3").0, "c is on no member yet");
    assert!(promisc("ra") && promisc("rb") && !promisc("rc"));
    let br = ok(&["bridge0"]);
    assert!(
        br.contains("member: ra flags=<LEARNING,DISCOVER>") && !br.contains("member: rc"),
        "{br}"
    );
    // a pings b through every change that follows.
    let steady = Command::new("ip")
        .args(["netns", "exec", &ns[1], "ping", "-c", "60", "-i", "0.05"])
        .arg("198.18.0.2")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();

    refused(
        &["bridge0", "addm", "rc", "addm", "rc"],
        "rc is a member of bridge0 already",
    );
    refused(
        &["bridge0", "addm", "rc", "addm", "nosuch0"],
        "interface nosuch0 does not exist",
    );
    refused(
        &["bridge0", "deletem", "rc"],
        "rc is not a member of bridge0",
    );
    refused(&["bridge0", "addm"], "addm: needs 1 argument");
    refused(
        &["bridge0", "static", "ra", "ff:ff:ff:ff:ff:ff"],
        "group address",
    );
    let (fine, out) = ifconfig(&node, &["ra", "addm", "rc"]);
    assert!(!fine && out.contains("ra is not a bridge"), "{out}");
    assert!(!promisc("rc"), "a refused addm left rc promiscuous");

    ok(&["bridge0", "addm", "rc"]);
    assert!(promisc("rc"), "a member over AF_PACKET is promiscuous");
    let br = ok(&["bridge0"]);
    assert!(br.contains("member: rc flags=<LEARNING,DISCOVER>"), "{br}");
    assert!(ping(1, "198.18.0.3").0, "a to c once rc is a member");
    assert!(ping(3, "198.18.0.254").0, "c to the bridge's own address");
    let c_mac = sh(&format!("ip -n {} -br link show pc", ns[3]))
        .1
        .split_whitespace()
        .nth(2)
        .unwrap_or_default()
        .to_string();
    let addr = ok(&["bridge0", "addr"]);
    assert!(
        addr.lines()
            .any(|l| l.starts_with(&format!("{c_mac} Vlan1 rc ")) && l.ends_with("flags=0<>")),
        "c's address learned on rc: {addr}"
    );
    let js: serde_json::Value = serde_json::from_str(&ok(&["bridge0", "addr", "--json"])).unwrap();
    assert!(js["addresses"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["address"] == c_mac.as_str() && e["interface"] == "rc"));

    ok(&[
        "bridge0",
        "-learn",
        "rc",
        "static",
        "rc",
        "02:00:00:00:00:33",
    ]);
    assert!(ok(&["bridge0"]).contains("member: rc flags=<DISCOVER>"));
    assert!(ok(&["bridge0", "addr"]).contains("02:00:00:00:00:33 Vlan1 rc 0 flags=1<STATIC>"));
    ok(&["bridge0", "deladdr", "02:00:00:00:00:33", "learn", "rc"]);
    assert!(!ok(&["bridge0", "addr"]).contains("02:00:00:00:00:33"));
    refused(
        &["bridge0", "deladdr", "02:00:00:00:00:33"],
        "not in bridge0's address cache",
    );

    ok(&["bridge0", "deletem", "rc"]);
    assert!(!promisc("rc"), "promiscuous mode given back");
    assert!(!ok(&["bridge0"]).contains("member: rc"));
    assert!(
        !ok(&["bridge0", "addr"]).contains(&c_mac),
        "rc's addresses forgotten"
    );
    assert!(!ping(1, "198.18.0.3").0, "c is off the segment again");

    let out = steady.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.contains("60 packets transmitted, 60 received"),
        "a to b lost pings while the bridge changed: {out}"
    );
    let js: serde_json::Value = serde_json::from_str(&ok(&["bridge0", "--json"])).unwrap();
    let members: Vec<&str> = js["interfaces"][0]["bridge"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["interface"].as_str().unwrap())
        .collect();
    assert_eq!(members, ["ra", "rb"]);
    let _ = stop_node(&mut g.node, &lines, &mut output);
}

/// A hostile host (scapy, on one member of an `mpstack run --stp` bridge) claims
/// the root in 100 BPDUs a second with the topology change flag flipped in each,
/// then floods 300 new source addresses into a table of 50, while two Linux hosts
/// on the other members ping each other: none of their unicast reaches it (a
/// topology change ages addresses with the forward delay instead of flushing
/// them; a full table keeps the hosts that talk). The refused addresses are
/// counted in `ifconfig bridge0`, `netstat -s` and the metrics.
#[test]
fn a_rogue_root_and_a_mac_flood_do_not_leak_two_linux_hosts_unicast() {
    skip_unless!("ip", "ping");
    let Some(py) = scapy_python() else {
        skip(
            "a_rogue_root_and_a_mac_flood_do_not_leak_two_linux_hosts_unicast",
            "no Python with scapy (python3-scapy): the README's test command installs it",
        );
        return;
    };
    let id = std::process::id() % 10000;
    let taps: Vec<String> = (0..3).map(|k| format!("mprg{k}x{id}")).collect();
    let ns: Vec<String> = (0..3).map(|k| format!("mprg-{k}-{id}")).collect();
    let node = format!("rogue-{id}");
    let mut args = Vec::new();
    for t in &taps {
        args.extend(["--tap".to_string(), t.clone()]);
    }
    args.extend(strs(&[
        "--bridge",
        &format!("bridge0={}", taps.join(",")),
        "--stp",
        "--stp-fwddelay",
        "4",
        "--stp-hellotime",
        "1",
        "--stp-maxage",
        "6",
        "--bridge-maxaddr",
        "50",
        "--serve",
        "none",
        "--name",
        &node,
        "--metrics",
        "127.0.0.1:0",
    ]));
    let mut net = Net::start("rogue", ns.clone(), &args);
    for (k, (n, t)) in ns.iter().zip(&taps).enumerate() {
        run(&format!("ip link set {t} netns {n}"));
        if k < 2 {
            run(&format!("ip -n {n} addr add 198.18.0.{}/24 dev {t}", k + 1));
        }
        run(&format!("ip -n {n} link set {t} up"));
    }
    let show = || ifconfig(&node, &["bridge0"]).1;
    let start = Instant::now();
    while show().matches("state forwarding").count() < 3 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the members never forwarded: {}",
            show()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (ok, out) = net.exec(0, "ping -c 3 -i 0.2 -W 2 198.18.0.2");
    assert!(ok, "{out}");
    let pinger = Command::new("ip")
        .args(["netns", "exec", &ns[0], "ping", "-c", "200", "-i", "0.05"])
        .arg("198.18.0.2")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/scapy/rogue.py");
    let (ok, out) = net.exec(2, &format!("{py} {script} {} tc 4", taps[2]));
    eprintln!("{out}");
    assert!(
        ok,
        "the rogue root saw the hosts' unicast:\n{out}\n{}",
        show()
    );
    let (ok, out) = net.exec(2, &format!("{py} {script} {} flood 300", taps[2]));
    eprintln!("{out}");
    assert!(ok, "the flooder saw the hosts' unicast:\n{out}\n{}", show());
    let out = pinger.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(out.contains("200 packets transmitted"), "{out}");
    let br = show();
    let count = |text: &str, word: &str| -> u64 {
        let mut w = text.split_whitespace();
        w.by_ref().find(|x| *x == word);
        w.next().and_then(|x| x.parse().ok()).unwrap_or(0)
    };
    assert!(count(&br, "refused") >= 200, "{br}");
    assert!(count(&br, "learned") >= 3, "{br}");
    let (ok, st) =
        output(Command::new(env!("CARGO_BIN_EXE_mpstack")).args(["netstat", "-j", &node, "-s"]));
    assert!(ok, "{st}");
    let refused = st
        .lines()
        .find(|l| l.ends_with(" bridge.refused"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok());
    assert_eq!(refused, Some(count(&br, "refused")), "{st}");
    let url = net
        .output
        .iter()
        .find(|l| l.contains("metrics at http://"))
        .cloned()
        .or_else(|| {
            wait_line(
                &net.lines,
                &mut net.output,
                "metrics at http://",
                Duration::from_secs(5),
            )
        })
        .expect("the metrics address");
    let at = url
        .split("http://")
        .nth(1)
        .and_then(|r| r.strip_suffix("/metrics"))
        .expect("ADDR:PORT")
        .to_string();
    let body = {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(&at).unwrap();
        write!(c, "GET /metrics HTTP/1.1\r\nHost: {at}\r\n\r\n").unwrap();
        let mut r = String::new();
        c.read_to_string(&mut r).unwrap();
        r
    };
    let m = body
        .lines()
        .find(|l| l.starts_with("mpstack_bridge_refused_total{"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<u64>().ok());
    assert_eq!(m, refused, "metrics");
    let c = net.stop();
    assert!(c.get("bridge.bpdus").copied().unwrap_or(0) >= 200, "{c:?}");
}
