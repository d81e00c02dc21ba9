//! IPv6 interop with the Linux kernel over TAP in a test-made namespace: `ping -6`
//! to the node's global and link-local addresses (1452 bytes whole, 3000 bytes in
//! fragments both ways), `ndisc6` answered, duplicate address detection finding an
//! address that Linux already holds; a robustness suite written with scapy
//! (`tests/scapy/robust.py`) and THC's `atk6-implementation6` against the node; a
//! Linux host coming up after a router's start-up advertisements, answered when it
//! solicits.
//!
//! Needs root, /dev/net/tun and the tools (the README's test command installs them);
//! elsewhere each test prints why it skips. Addresses are from 2001:2::/48 only.

mod common;
use common::*;
use std::time::Duration;

/// Linux's side of the link: `addr` without DAD (so it is usable at once).
fn linux_addr6(lab: &Lab, addr: &str) {
    let (ok, out) = sh(&format!(
        "ip -n {} addr add {addr} dev {} nodad",
        lab.ns, lab.tap
    ));
    assert!(ok, "{out}");
}

/// The node's link-local address, from its MAC (modified EUI-64).
fn link_local(mac: &str) -> String {
    let b: Vec<u8> = mac
        .split(':')
        .map(|x| u8::from_str_radix(x, 16).unwrap())
        .collect();
    format!(
        "fe80::{:02x}{:02x}:{:02x}ff:fe{:02x}:{:02x}{:02x}",
        b[0] ^ 2,
        b[1],
        b[2],
        b[3],
        b[4],
        b[5]
    )
}

#[test]
fn linux_pings_mpstack_over_ipv6_and_ndisc6_resolves_it() {
    skip_unless!("ip", "ping", "ndisc6", "socat");
    let mut lab = Lab::start_with("v6", 1, &["--inet6", "2001:2::2/64"]);
    linux_addr6(&lab, "2001:2::1/64");
    // Duplicate address detection: one probe, then a second of silence.
    std::thread::sleep(Duration::from_millis(1500));
    let (ok, out) = lab.exec("ping -6 -c 20 -i 0.05 -W 2 2001:2::2");
    assert!(ok && out.contains(" 0% packet loss"), "{out}");
    // 1452 bytes of data: a 1500-byte IPv6 packet, the largest unfragmented one.
    let (ok, out) = lab.exec("ping -6 -c 5 -i 0.05 -W 2 -s 1452 -M do 2001:2::2");
    assert!(ok && out.contains(" 0% packet loss"), "{out}");
    // 3000 bytes: Linux fragments the request, the node reassembles it and answers
    // in fragments, which Linux reassembles.
    let (ok, out) = lab.exec("ping -6 -c 5 -i 0.05 -W 2 -s 3000 2001:2::2");
    assert!(ok && out.contains(" 0% packet loss"), "{out}");
    let ll = link_local(&lab.mac);
    let (ok, out) = lab.exec(&format!("ping -6 -c 3 -i 0.1 -W 2 {ll}%{}", lab.tap));
    assert!(ok && out.contains(" 0% packet loss"), "{ll}: {out}");
    // UDP over IPv6: the echo service answers on [::]:7.
    let (ok, out) = lab.exec("sh -c 'echo hello-v6 | socat -t 2 - UDP6:[2001:2::2]:7'");
    assert!(ok && out.contains("hello-v6"), "UDP echo over IPv6: {out}");
    let (ok, out) = lab.exec(&format!("ndisc6 -n -r 3 -w 1000 2001:2::2 {}", lab.tap));
    assert!(
        ok && out.to_lowercase().contains(&lab.mac.to_lowercase()),
        "ndisc6 must print the node's MAC {}: {out}",
        lab.mac
    );
    let c = lab.stop();
    assert!(
        c.get("icmp6.outechoreply").copied().unwrap_or(0) >= 28,
        "{c:?}"
    );
    assert!(
        c.get("icmp6.inneighborsolicit").copied().unwrap_or(0) >= 1,
        "{c:?}"
    );
    assert_eq!(c.get("nd6.dadok").copied(), Some(2), "{c:?}");
}

#[test]
fn dad_detects_an_address_linux_already_holds() {
    skip_unless!("ip", "ping");
    // Three probes, a second apart: the first goes out before the namespace's end of
    // the link is up; Linux, holding the address, answers a later one.
    let mut lab = Lab::start_with(
        "dad",
        1,
        &["--inet6", "2001:2::5/64", "--dad-transmits", "3"],
    );
    linux_addr6(&lab, "2001:2::5/64");
    let line = lab.wait_line("duplicate IPv6 address", Duration::from_secs(6));
    assert!(line.is_some(), "{:?}", lab.output);
    // The node does not use it: Linux's own address answers Linux's ping, and the
    // node keeps its IPv4 service.
    let (ok, out) = lab.exec("ping -c 2 -W 2 198.18.0.2");
    assert!(ok, "{out}");
    // Let the link-local address's three probes run out (3 s from the start).
    std::thread::sleep(Duration::from_millis(2500));
    let c = lab.stop();
    assert!(
        c.get("nd6.dadcollision").copied().unwrap_or(0) >= 1,
        "{c:?}"
    );
    assert_eq!(
        c.get("nd6.dadok").copied(),
        Some(1),
        "only the link-local address is unique: {c:?}"
    );
}

/// A Python with scapy: Debian's `python3-scapy` lives in the system interpreter,
/// which may not be the first `python3` on the PATH.
fn scapy_python() -> Option<String> {
    ["/usr/bin/python3", "python3"].iter().find_map(|py| {
        let (ok, _) = sh(&format!("{py} -c 'import scapy' 2>/dev/null"));
        ok.then(|| py.to_string())
    })
}

#[test]
fn scapy_robustness_suite_over_tap() {
    skip_unless!("ip", "ping");
    let Some(py) = scapy_python() else {
        skip(
            "scapy_robustness_suite_over_tap",
            "no Python with scapy (python3-scapy): the README's test command installs it",
        );
        return;
    };
    let mut lab = Lab::start_with("rb6", 1, &["--inet6", "2001:2::2/64"]);
    linux_addr6(&lab, "2001:2::1/64");
    std::thread::sleep(Duration::from_millis(1500));
    let rss0 = lab.rss_kib();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/scapy/robust.py");
    let (ok, out) = lab.exec(&format!(
        "{py} {script} {} {} 2001:2::2 2001:2::1 198.18.0.2 198.18.0.1",
        lab.tap, lab.mac
    ));
    eprintln!("{out}");
    assert!(ok, "robustness cases failed:\n{out}");
    assert!(lab.alive(), "the node died: {:?}", lab.output);
    let (ok, out) = lab.exec("ping -6 -c 3 -i 0.1 -W 2 2001:2::2");
    assert!(ok && out.contains(" 0% packet loss"), "{out}");
    let (ok, out) = lab.exec("ping -c 3 -i 0.1 -W 2 198.18.0.2");
    assert!(ok && out.contains(" 0% packet loss"), "{out}");
    let rss1 = lab.rss_kib();
    assert!(
        rss1 < rss0 + 64 * 1024,
        "RSS grew from {rss0} to {rss1} KiB"
    );
    let c = lab.stop();
    assert!(
        c.get("icmp6.outparamprob").copied().unwrap_or(0) >= 6,
        "{c:?}"
    );
    assert!(c.get("icmp6.badns").copied().unwrap_or(0) >= 2, "{c:?}");
}

#[test]
fn thc_ipv6_implementation6_runs_to_completion() {
    skip_unless!("ip", "ping", "atk6-implementation6");
    let mut lab = Lab::start_with("atk", 1, &["--inet6", "2001:2::2/64"]);
    linux_addr6(&lab, "2001:2::1/64");
    std::thread::sleep(Duration::from_millis(1500));
    let rss0 = lab.rss_kib();
    let (ok, out) = lab.exec(&format!(
        "timeout 300 atk6-implementation6 {} 2001:2::2",
        lab.tap
    ));
    eprintln!("{out}");
    assert!(ok, "atk6-implementation6 did not finish: {out}");
    assert!(lab.alive(), "the node died: {:?}", lab.output);
    let (ok, out) = lab.exec("ping -6 -c 3 -i 0.1 -W 2 2001:2::2");
    assert!(ok && out.contains(" 0% packet loss"), "{out}");
    let rss1 = lab.rss_kib();
    assert!(
        rss1 < rss0 + 64 * 1024,
        "RSS grew from {rss0} to {rss1} KiB"
    );
    lab.stop();
}

#[test]
fn curl_over_ipv6_downloads_from_the_http_service_and_tcp_echo_works() {
    skip_unless!("ip", "curl", "sha256sum", "socat");
    // Plain, and with the virtio-net header's offloads: our IPv6 segments then leave
    // their checksums and their cutting to the kernel, as IPv4 ones do.
    for (tag, extra) in [("w6", &[][..]), ("o6", &["--offload"][..])] {
        let www = www_dir(tag);
        std::fs::create_dir_all(&www).unwrap();
        let (ok, out) = sh(&format!(
            "head -c 50000000 /dev/urandom > {}/big.bin",
            www.display()
        ));
        assert!(ok, "{out}");
        let mut args = vec!["--inet6", "2001:2::2/64"];
        args.extend_from_slice(extra);
        let mut lab = Lab::start_with(tag, 2, &args);
        linux_addr6(&lab, "2001:2::1/64");
        std::thread::sleep(Duration::from_millis(1500));
        let (ok, out) = lab.exec(&format!(
            "sh -c 'curl -6 -sS --max-time 120 http://[2001:2::2]/big.bin | sha256sum; sha256sum < {}/big.bin'",
            www.display()
        ));
        assert!(ok, "{out}");
        let sums: Vec<&str> = out
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert_eq!(sums.len(), 2, "{out}");
        assert_eq!(
            sums[0], sums[1],
            "{tag}: the file downloaded over IPv6 differs: {out}"
        );
        // TCP echo over IPv6, and the IPv4 service beside it.
        let (ok, out) = lab.exec("sh -c 'echo tcp-over-v6 | socat -t 2 - TCP6:[2001:2::2]:7'");
        assert!(ok && out.contains("tcp-over-v6"), "{out}");
        let (ok, out) = lab.exec("sh -c 'echo tcp-over-v4 | socat -t 2 - TCP4:198.18.0.2:7'");
        assert!(ok && out.contains("tcp-over-v4"), "{out}");
        let c = lab.stop();
        assert!(c.get("tcp.accepts").copied().unwrap_or(0) >= 3, "{c:?}");
        let (tso, swcsum) = (
            c.get("ip6.tso").copied().unwrap_or(0),
            c.get("ip6.swcsum").copied().unwrap_or(0),
        );
        if extra.is_empty() {
            assert!(tso == 0 && swcsum > 0, "{tag}: {c:?}");
        } else {
            assert!(tso > 0 && swcsum == 0, "{tag}: {c:?}");
        }
    }
}

/// The node of a test that builds its own link: stopped, and its namespace
/// deleted, on drop.
struct Late {
    node: Option<std::process::Child>,
    ns: String,
}

impl Drop for Late {
    fn drop(&mut self) {
        kill_node(&mut self.node);
        let _ = sh(&format!("ip netns del {} 2>/dev/null", self.ns));
    }
}

/// Issue 25's bug: a forwarding node took no Router Solicitation (its interfaces
/// had not joined all-routers, ff02::2: the RS was counted in `ip6.notmember`), so
/// a host that came up after the router's three start-up advertisements waited
/// for the next periodic one, 200 to 600 s later, for its SLAAC address. Here the
/// Linux host's link stays down until the node has sent those three (about 32 s);
/// once up, Linux solicits and must have its address within 10 s.
#[test]
fn a_linux_host_that_comes_up_after_the_routers_first_advertisements_solicits_one() {
    skip_unless!("ip", "ping");
    let id = std::process::id() % 10000;
    let (ns, tap, name) = (
        format!("mpst-rs-{id}"),
        format!("mprs{id}"),
        format!("rs-{id}"),
    );
    let _ = sh(&format!("ip netns del {ns} 2>/dev/null"));
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_mpstack"));
    cmd.args(["run", "--tap", &tap, "--inet", "198.18.0.2/24"])
        .args(["--inet6", "2001:2:5::1/64", "--forwarding", "--rtadv"])
        .args(["--serve", "none", "--name", &name]);
    let (node, lines) = spawn_node(cmd);
    let mut g = Late {
        node: Some(node),
        ns: ns.clone(),
    };
    let mut output = Vec::new();
    assert!(
        wait_line(&lines, &mut output, "up on", Duration::from_secs(20)).is_some(),
        "mpstack did not come up: {output:?}"
    );
    // The host's side of the link, kept down.
    for c in [
        format!("ip netns add {ns}"),
        format!("ip link set {tap} netns {ns}"),
        format!("ip -n {ns} link set lo up"),
        format!("ip netns exec {ns} sysctl -qw net.ipv6.conf.{tap}.accept_ra=1"),
        format!("ip netns exec {ns} sysctl -qw net.ipv6.conf.{tap}.autoconf=1"),
    ] {
        run(&c);
    }
    let icmp6 = |field: &str| -> u64 {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_mpstack"))
            .args(["netstat", "-j", &name, "-s", "--json"])
            .output()
            .expect("run mpstack");
        let js: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
        js["statistics"]["icmp6"][field].as_u64().unwrap_or(0)
    };
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while icmp6("outrouteradvert") < 3 {
        assert!(
            std::time::Instant::now() < until,
            "the node sent no three advertisements in 60 s"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(icmp6("inroutersolicit"), 0);

    let up = std::time::Instant::now();
    run(&format!("ip -n {ns} link set {tap} up"));
    let mut addr = String::new();
    while up.elapsed() < Duration::from_secs(10) {
        let (_, out) = sh(&format!(
            "ip -n {ns} -6 -br addr show dev {tap} scope global"
        ));
        if let Some(a) = out.split_whitespace().find(|w| w.starts_with("2001:2:5:")) {
            addr = a.to_string();
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        !addr.is_empty(),
        "no SLAAC address on the host 10 s after its link came up (solicitations taken: {}, advertisements sent: {})",
        icmp6("inroutersolicit"),
        icmp6("outrouteradvert")
    );
    assert!(icmp6("inroutersolicit") >= 1);
    assert!(
        icmp6("outrouteradvert") >= 4,
        "an answer to the solicitation"
    );
    // The host uses it, through the router it learned.
    let (_, route) = sh(&format!("ip -n {ns} -6 route show default"));
    assert!(
        route.contains("via fe80:") && route.contains("proto ra"),
        "{route}"
    );
    let (fine, out) = sh(&format!(
        "ip netns exec {ns} ping -6 -c 2 -i 0.3 -W 2 2001:2:5::1"
    ));
    assert!(fine, "{out}");
    let _ = stop_node(&mut g.node, &lines, &mut output);
}
