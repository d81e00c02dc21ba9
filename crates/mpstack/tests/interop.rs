//! Interop with the Linux kernel: `mpstack run` on a TAP device moved into a network
//! namespace that the test creates; Linux's own `ping`, `arping` and `socat` talk to
//! it, and 10,000 malformed frames are written onto the link with AF_PACKET.
//!
//! Needs root, /dev/net/tun and the tools (the README's test command installs them);
//! elsewhere each test prints why it skips. Addresses are from 198.18.0.0/15 only.

mod common;
use common::*;
use std::process::Command;
use std::time::Duration;

fn ping_test(tag: &str, workers: u16) {
    let mut lab = Lab::start(tag, workers);
    let (ok, out) = lab.exec("ping -c 100 -i 0.01 -W 2 198.18.0.2");
    assert!(ok && out.contains(" 0% packet loss"), "{out}");
    assert!(out.contains("100 received"), "{out}");
    // 1472 bytes of data: a 1500-byte IPv4 packet, the largest unfragmented one.
    let (ok, out) = lab.exec("ping -c 20 -i 0.01 -W 2 -s 1472 -M do 198.18.0.2");
    assert!(ok && out.contains(" 0% packet loss"), "{out}");
    let c = lab.stop();
    assert!(
        c.get("icmp.outechoreply").copied().unwrap_or(0) >= 120,
        "{c:?}"
    );
}

#[test]
fn linux_pings_mpstack_one_worker() {
    skip_unless!("ip", "ping");
    ping_test("p1", 1);
}

#[test]
fn linux_pings_mpstack_two_workers() {
    skip_unless!("ip", "ping");
    ping_test("p2", 2);
}

/// 3000 bytes of echo data: a 3028-byte datagram, three fragments over the TAP's
/// 1500-byte MTU. mpstack reassembles the request and sends its reply in fragments,
/// which Linux reassembles in turn.
fn fragmented_ping_test(tag: &str, workers: u16) {
    let mut lab = Lab::start(tag, workers);
    let (ok, out) = lab.exec("ping -c 3 -i 0.2 -W 2 -s 3000 198.18.0.2");
    assert!(ok && out.contains(" 0% packet loss"), "{out}");
    // Don't Fragment on a datagram larger than the MTU: Linux refuses to send it
    // ("message too long"), so nothing reaches mpstack and nothing breaks.
    let (ok, out) = lab.exec("ping -c 1 -W 1 -s 3000 -M do 198.18.0.2");
    assert!(!ok, "{out}");
    assert!(
        out.contains("too long") || out.contains("100% packet loss"),
        "{out}"
    );
    let (ok, out) = lab.exec("ping -c 2 -i 0.2 -W 2 -s 3000 198.18.0.2");
    assert!(ok && out.contains(" 0% packet loss"), "{out}");
    let c = lab.stop();
    let get = |n: &str| c.get(n).copied().unwrap_or(0);
    assert!(get("ip.reassembled") >= 5, "{c:?}");
    assert!(
        get("ip.fragmented") >= 5 && get("ip.ofragments") >= 15,
        "{c:?}"
    );
    assert!(get("icmp.outechoreply") >= 5, "{c:?}");
    assert_eq!(get("ip.fragq"), 0, "{c:?}");
    assert_eq!(get("ip.fragoverlap") + get("ip.fragtimeout"), 0, "{c:?}");
}

#[test]
fn ping_with_3000_bytes_is_reassembled_and_answered_in_fragments_one_worker() {
    skip_unless!("ip", "ping");
    fragmented_ping_test("f1", 1);
}

#[test]
fn ping_with_3000_bytes_is_reassembled_and_answered_in_fragments_two_workers() {
    skip_unless!("ip", "ping");
    fragmented_ping_test("f2", 2);
}

#[test]
fn linux_arpings_mpstack() {
    skip_unless!("ip", "arping");
    let mut lab = Lab::start("ar", 1);
    let (ok, out) = lab.exec(&format!("arping -c 3 -w 5 -I {} 198.18.0.2", lab.tap));
    assert!(ok, "{out}");
    let lower = out.to_lowercase();
    assert!(
        lower.contains(&lab.mac.to_lowercase()),
        "reply must carry mpstack's MAC {}: {out}",
        lab.mac
    );
    let c = lab.stop();
    assert!(c.get("arp.txreplies").copied().unwrap_or(0) >= 3, "{c:?}");
}

#[test]
fn udp_echo_round_trip_with_socat() {
    skip_unless!("ip", "socat");
    let mut lab = Lab::start("ue", 2);
    for i in 0..5 {
        let msg = format!("mpstack interop datagram {i}");
        let (ok, out) = lab.exec(&format!(
            "sh -c 'printf \"{msg}\" | socat -t 2 - UDP:198.18.0.2:7'"
        ));
        assert!(ok && out.contains(&msg), "{out}");
    }
    let c = lab.stop();
    assert!(c.get("udp.delivered").copied().unwrap_or(0) >= 5, "{c:?}");
}

/// `--serve none` runs no service at all: UDP port 7 gets a port unreachable, as
/// TCP port 7 gets a reset.
#[test]
fn serve_none_answers_no_udp_echo() {
    skip_unless!("ip", "socat", "ping");
    let mut lab = Lab::start_with("sn", 1, &["--serve", "none"]);
    let (_, out) = lab.exec("sh -c 'printf probe | socat -t 2 - UDP:198.18.0.2:7'");
    assert!(!out.contains("probe"), "answered: {out}");
    let (ok, out) = lab.exec("ping -c 2 -i 0.2 -W 2 198.18.0.2");
    assert!(ok, "{out}");
    let c = lab.stop();
    assert!(c.get("udp.noport").copied().unwrap_or(0) >= 1, "{c:?}");
    assert!(
        lab.output.iter().any(|l| l.contains("services: none")),
        "{:?}",
        lab.output
    );
}

#[test]
fn malformed_frames_are_counted_and_ping_still_works() {
    skip_unless!("ip", "ping", "python3");
    let mut lab = Lab::start("mf", 1);
    // Resolve both ways first, so the bad frames are the only anomaly.
    let (ok, out) = lab.exec("ping -c 2 -i 0.1 -W 2 198.18.0.2");
    assert!(ok, "{out}");
    let mac: wire::EthernetAddress = lab.mac.parse().expect("mac from the node's banner");
    let peer_mac: wire::EthernetAddress = {
        let (_, o) = lab.exec(&format!("cat /sys/class/net/{}/address", lab.tap));
        o.trim().parse().expect("tap mac")
    };
    let kinds: Vec<usize> = (1..sim::malformed::KINDS).collect();
    let frames = sim::malformed::frames_of_kinds(
        10_000,
        (mac, "198.18.0.2".parse().unwrap()),
        (peer_mac, "198.18.0.1".parse().unwrap()),
        42,
        &kinds,
    );
    let path = std::env::temp_dir().join(format!("mpstack-malformed-{}.bin", std::process::id()));
    let mut blob = Vec::new();
    for f in &frames {
        blob.extend_from_slice(&(f.frame.len() as u16).to_be_bytes());
        blob.extend_from_slice(&f.frame);
    }
    std::fs::write(&path, &blob).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/send_frames.py");
    let (ok, out) = lab.exec(&format!("python3 {script} {} {}", lab.tap, path.display()));
    let _ = std::fs::remove_file(&path);
    assert!(ok, "{out}");
    assert!(out.contains("sent 10000"), "{out}");
    std::thread::sleep(Duration::from_millis(500));
    let (ok, out) = lab.exec("ping -c 10 -i 0.05 -W 2 198.18.0.2");
    assert!(
        ok && out.contains(" 0% packet loss"),
        "ping after the flood: {out}"
    );
    let (_, dropped) = lab.exec(&format!(
        "cat /sys/class/net/{}/statistics/tx_dropped",
        lab.tap
    ));
    let kernel_dropped: u64 = dropped.trim().parse().unwrap_or(0);
    let c = lab.stop();
    let mut accounted = 0;
    for (counter, n) in sim::malformed::expected_counts(&frames) {
        let got = c.get(counter).copied().unwrap_or(0);
        accounted += got.min(n);
        if kernel_dropped == 0 {
            if counter == "ether.noproto" {
                // Linux sends IPv6 frames of its own, which this IPv4 host does not speak.
                assert!(got >= n, "{counter}: {got} < {n}");
            } else {
                assert_eq!(got, n, "{counter}");
            }
        }
    }
    assert!(
        accounted + kernel_dropped >= 10_000,
        "accounted {accounted} + kernel drops {kernel_dropped}: {c:?}"
    );
    eprintln!("malformed: {accounted} frames accounted for by named counters, {kernel_dropped} dropped by the kernel");
}

#[test]
fn run_rejects_bad_arguments_clearly() {
    let bin = env!("CARGO_BIN_EXE_mpstack");
    let o = Command::new(bin)
        .args(["run", "--tap", "mpbad0", "--inet", "198.18.0.300/24"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not an IPv4 address"),
        "{o:?}"
    );
    let o = Command::new(bin)
        .args([
            "run",
            "--tap",
            "mpbad0",
            "--inet",
            "198.18.0.2/24",
            "--gw",
            "198.19.0.1",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not on any interface's subnet"),
        "{o:?}"
    );
    // The router's arguments: each mistake named before any TAP is opened.
    for (args, want) in [
        (&["--route", "198.19.0.0/16"][..], "expected PREFIX=GATEWAY"),
        (
            &["--route", "198.19.0.0/16=nowhere"][..],
            "is not an address",
        ),
        (
            &["--route", "198.19.0.1/16=198.18.0.1"][..],
            "host bits set",
        ),
        (
            &["--route", "2001:2::/48=198.18.0.1"][..],
            "not of the prefix's family",
        ),
        (&["--inet", "198.18.1.2/24"][..], "more --inet than --tap"),
        (&["--mtu", "100"][..], "expected 576 to 65535"),
        (&["--rtadv"][..], "--rtadv needs IPv6"),
        (
            &["--sysctl", "net.inet.tcp.cc.algorithm=vegas"][..],
            "'vegas' is not cubic, newreno or bbr",
        ),
        (
            &["--sysctl", "net.inet.tcp.nosuch=1"][..],
            "unknown name 'net.inet.tcp.nosuch'",
        ),
        (&["--sysctl", "net.inet.tcp.msl"][..], "expected NAME=VALUE"),
        // The services' bounds.
        (
            &["--serve-idle-timeout", "0"][..],
            "expected seconds, above 0",
        ),
        (
            &["--serve-header-timeout", "soon"][..],
            "expected seconds, above 0",
        ),
        (&["--serve-max-conns", "0"][..], "--serve-max-conns"),
        // Bridges and VLANs.
        (&["--bridge", "br0"][..], "expected NAME=TAP,TAP"),
        (
            &["--bridge", "br0=nosuch"][..],
            "'nosuch' is not a --tap or --vlan",
        ),
        (
            &["--bridge", "mpbad0=mpbad0"][..],
            "must be a new interface name",
        ),
        (
            &["--bridge", "br0=mpbad0", "--bridge", "br1=mpbad0"][..],
            "mpbad0 is a member of br0 already",
        ),
        (
            &["--bridge", "br0=mpbad0", "--inet", "mpbad0=198.18.1.2/24"][..],
            "which takes no address; give it to the bridge",
        ),
        (&["--stp"][..], "--bridge"),
        (&["--vlan", "v10=mpbad0"][..], "expected NAME=TAP:VID"),
        (&["--vlan", "v10=mpbad0:4095"][..], "expected 1 to 4094"),
        (&["--vlan", "v10=nosuch:10"][..], "'nosuch' is not a --tap"),
        (
            &["--vlan", "v10=mpbad0:10"][..],
            "--vlan v10: no address for it",
        ),
        (
            &[
                "--vlan",
                "v10=mpbad0:10",
                "--vlan",
                "v11=mpbad0:10",
                "--inet",
                "v10=198.18.10.1/24",
                "--inet",
                "v11=198.18.11.1/24",
            ][..],
            "mpbad0 has VLAN 10 already",
        ),
        // Tunnels.
        (&["--tunnel", "gif0"][..], "no NAME="),
        (
            &["--tunnel", "gif0=ipip,198.18.0.2,198.18.0.1"][..],
            "kind 'ipip' is neither gif nor gre",
        ),
        (&["--tunnel", "gif0=gif,198.18.0.2"][..], "no destination"),
        (
            &["--tunnel", "gif0=gif,198.18.0.2,far"][..],
            "destination 'far' is not an IP address",
        ),
        (
            &["--tunnel", "gif0=gif,198.18.0.2,198.18.0.1,key=5"][..],
            "a gif tunnel has no key",
        ),
        (
            &["--tunnel", "gif0=gre,198.18.0.2,198.18.0.1,ttl=5"][..],
            "unknown option 'ttl=5'",
        ),
        (
            &["--tunnel", "mpbad0=gif,198.18.0.2,198.18.0.1"][..],
            "must be a new interface name",
        ),
    ] {
        let o = Command::new(bin)
            .args(["run", "--tap", "mpbad0", "--inet", "198.18.0.2/24"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(want),
            "{args:?}: {o:?}"
        );
    }
    let o = Command::new(bin)
        .args([
            "run",
            "--tap",
            "a-name-much-too-long-for-linux",
            "--inet",
            "198.18.0.2/24",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("TAP"), "{o:?}");
}

#[test]
fn demo_runs_and_exits_zero() {
    let o = Command::new(env!("CARGO_BIN_EXE_mpstack"))
        .arg("demo")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("demo: OK"), "{out}");
    assert!(out.contains("ARP, Request who-has"), "{out}");
}

#[test]
fn demo_pcap_is_read_by_tcpdump() {
    if !have("tcpdump") {
        skip(
            "demo_pcap_is_read_by_tcpdump",
            "'tcpdump' is not installed (the README's test command installs it)",
        );
        return;
    }
    let path = std::env::temp_dir().join(format!("mpstack-demo-{}.pcap", std::process::id()));
    let o = Command::new(env!("CARGO_BIN_EXE_mpstack"))
        .args(["demo", "lan", "--pcap"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let (ok, out) = sh(&format!("tcpdump -nn -r {} 2>&1", path.display()));
    let _ = std::fs::remove_file(&path);
    assert!(ok, "{out}");
    assert!(
        out.contains("ICMP echo request") && out.contains("ARP, Request who-has 198.18.0.2"),
        "{out}"
    );
    assert!(out.contains("UDP, length 16"), "{out}");
    let packets = out
        .lines()
        .filter(|l| l.contains(" IP ") || l.contains(" ARP, "))
        .count();
    assert!(packets >= 20, "tcpdump read {packets} packets:\n{out}");
    // The router scenario: one file per link, as tcpdump on that link would see it.
    let o = Command::new(env!("CARGO_BIN_EXE_mpstack"))
        .arg("demo")
        .arg("--pcap")
        .arg(&path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let read = |link: &str| {
        let p = path.with_file_name(format!("mpstack-demo-{}-{link}.pcap", std::process::id()));
        let r = sh(&format!("tcpdump -nn -r {} 2>&1", p.display()));
        let _ = std::fs::remove_file(&p);
        r
    };
    let (ok1, lan1) = read("lan1");
    let (ok2, lan2) = read("lan2");
    assert!(ok1 && ok2, "{lan1}\n{lan2}");
    for want in [
        "ARP, Request who-has 198.18.1.1 tell 198.18.1.10",
        "ICMP6, neighbor solicitation, who has 2001:2:1::1",
        "time exceeded in-transit",
        "udp port 33435 unreachable",
        "Flags [R.]",
    ] {
        assert!(lan1.contains(want), "lan1 lacks '{want}'");
    }
    // The TTL 1 probe dies at the router; the TTL 2 one crosses it.
    assert!(lan1.contains("> 198.18.2.10.33434: UDP"), "{lan1}");
    assert!(!lan2.contains("> 198.18.2.10.33434: UDP"), "{lan2}");
    assert!(lan2.contains("> 198.18.2.10.33435: UDP"), "{lan2}");
    assert!(lan2.contains("ARP, Request who-has 198.18.2.10 tell 198.18.2.1"));
    assert!(!lan2.contains("Flags [R.]"), "the reset never reaches lan2");
}

#[test]
fn run_explains_tap_errors() {
    skip_unless!("setpriv");
    let bin = env!("CARGO_BIN_EXE_mpstack");
    // A name that exists but is not a TAP.
    let o = Command::new(bin)
        .args(["run", "--tap", "lo", "--inet", "198.18.0.2/24"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("exists but cannot be attached as a TAP"),
        "{err}"
    );
    // No permission: the same command as an unprivileged user without capabilities.
    let copy = std::env::temp_dir().join(format!("mpstack-perm-{}", std::process::id()));
    std::fs::copy(bin, &copy).unwrap();
    let (_, out) = sh(&format!(
        "chmod 755 {p} && setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all {p} run --tap mpperm0 --inet 198.18.0.2/24; echo rc=$?",
        p = copy.display()
    ));
    let _ = std::fs::remove_file(&copy);
    assert!(
        out.contains("rc=2") && out.contains("needs root or CAP_NET_ADMIN"),
        "{out}"
    );
}

/// Sends `mb` MB of random bytes from Linux through mpstack's TCP echo service and
/// checks they come back byte-identical (sha256).
fn echo_intact(lab: &Lab, tag: &str, mb: usize, timeout_s: u32) {
    echo_intact_with(lab, tag, mb, timeout_s, "");
}

/// [`echo_intact`] with socat options for the client's socket (`,OPT=...`).
fn echo_intact_with(lab: &Lab, tag: &str, mb: usize, timeout_s: u32, sockopt: &str) {
    echo_intact_from(&|c: &str| lab.exec(c), tag, mb, timeout_s, sockopt);
}

/// [`echo_intact_with`] from the namespace `exec` runs commands in.
fn echo_intact_from(
    exec: &dyn Fn(&str) -> (bool, String),
    tag: &str,
    mb: usize,
    timeout_s: u32,
    sockopt: &str,
) {
    let dir = std::env::temp_dir().join(format!("mpstack-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("data");
    let (ok, out) = sh(&format!(
        "head -c {} /dev/urandom > {}",
        mb * 1_000_000,
        f.display()
    ));
    assert!(ok, "{out}");
    let (ok, out) = exec(&format!(
        "sh -c 'timeout {timeout_s} socat -t 60 - TCP:198.18.0.2:7{sockopt} < {f} | sha256sum; sha256sum < {f}'",
        f = f.display()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(ok, "{out}");
    assert_same_sums(&out, &format!("echoed data ({tag}) differs"));
}

fn tcp_services(tag: &str, workers: u16) {
    skip_unless!("socat", "sha256sum");
    let mut lab = Lab::start(tag, workers);
    // Echo: 20 MB through mpstack and back, byte-identical.
    echo_intact(&lab, tag, 20, 120);
    // Discard: 50 MB from Linux.
    let (ok, out) =
        lab.exec("sh -c 'head -c 50000000 /dev/zero | timeout 120 socat -u - TCP:198.18.0.2:9'");
    assert!(ok, "discard: {out}");
    // Chargen: read 1 MB of RFC 864 lines.
    let (ok, out) = lab.exec(
        "sh -c 'timeout 60 socat -u TCP:198.18.0.2:19 - 2>/dev/null | head -c 1000000 | wc -c'",
    );
    assert!(ok && out.trim() == "1000000", "chargen: {out}");
    // A port nobody listens on is refused with a reset.
    let (ok, out) = lab.exec("timeout 10 socat -u - TCP:198.18.0.2:4444");
    assert!(!ok && out.contains("Connection refused"), "{out}");
    let c = lab.stop();
    assert!(c.get("tcp.accepts").copied().unwrap_or(0) >= 3, "{c:?}");
    assert!(c.get("tcp.noport").copied().unwrap_or(0) >= 1, "{c:?}");
    let report = lab
        .output
        .iter()
        .find(|l| l.contains("TCP services:"))
        .cloned()
        .unwrap_or_default();
    assert!(report.contains("3 connection(s)"), "{report}");
    let bytes_in: u64 = report
        .split(", ")
        .find(|p| p.ends_with("byte(s) in"))
        .and_then(|p| p.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(bytes_in >= 70_000_000, "{report}");
}

#[test]
fn tcp_echo_discard_chargen_with_linux_one_worker() {
    tcp_services("t1", 1);
}

#[test]
fn tcp_echo_discard_chargen_with_linux_two_workers() {
    tcp_services("t2", 2);
}

/// Echo through mpstack while Linux drops `p` of the packets in each direction
/// (`iptables -m statistic`: the kernel has no netem), the node run with `node`'s
/// arguments.
fn tcp_echo_with_loss(tag: &str, p: f64, node: &[&str]) {
    skip_unless!("socat", "sha256sum", "iptables", "ethtool");
    let mut lab = Lab::start_with(tag, 2, node);
    for w in node.windows(2).filter(|w| w[0] == "--sysctl") {
        let name = w[1].split('=').next().unwrap_or_default();
        assert!(
            lab.output
                .iter()
                .any(|l| l.contains(&format!("sysctl {name}: "))),
            "{name} not reported: {:?}",
            lab.output
        );
    }
    drop_randomly(&lab, p, node.contains(&"--offload"));
    echo_intact(&lab, tag, 5, 300);
    let c = lab.stop();
    let rexmit = c.get("tcp.sndrexmitpack").copied().unwrap_or(0);
    assert!(rexmit > 0, "losses were repaired by retransmission: {c:?}");
    eprintln!("loss {p}: 5 MB echoed intact, {rexmit} segments retransmitted by mpstack");
}

#[test]
fn tcp_echo_with_one_percent_loss_both_ways() {
    tcp_echo_with_loss("l1", 0.01, &[]);
}

#[test]
fn tcp_echo_with_five_percent_loss_both_ways() {
    tcp_echo_with_loss("l5", 0.05, &[]);
}

/// The same at 1% with NewReno in place of CUBIC and every segment acknowledged at
/// once, set as FreeBSD's sysctls name them; the node says what it changed.
#[test]
fn tcp_echo_with_loss_under_newreno_without_delayed_acks() {
    let sysctls = [
        "--sysctl",
        "net.inet.tcp.cc.algorithm=newreno",
        "--sysctl",
        "net.inet.tcp.delayed_ack=0",
    ];
    tcp_echo_with_loss("lnr", 0.01, &sysctls);
}

#[test]
fn http_service_serves_files_to_curl() {
    skip_unless!("curl", "nc", "sha256sum");
    let www = www_dir("h");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(www.join("index.html"), "<h1>mpstack</h1>\n").unwrap();
    let (ok, out) = sh(&format!(
        "head -c 30000000 /dev/urandom > {}/big.bin",
        www.display()
    ));
    assert!(ok, "{out}");
    let mut lab = Lab::start("h", 2);
    // Two files over one persistent connection, byte-identical.
    let (ok, out) = lab.exec(&format!(
        "sh -c 'curl -sS --max-time 120 -o /dev/stdout http://198.18.0.2/big.bin http://198.18.0.2/ -w \"%{{num_connects}}\\n\" | tail -c 200; curl -sS --max-time 120 http://198.18.0.2/big.bin | sha256sum; sha256sum < {}/big.bin'",
        www.display()
    ));
    assert!(ok, "{out}");
    assert!(out.contains("<h1>mpstack</h1>"), "{out}");
    assert!(
        out.contains("</h1>\n0\n"),
        "the second file reused the connection: {out}"
    );
    let sums: Vec<&str> = out
        .lines()
        .rev()
        .take(2)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(sums.len(), 2, "{out}");
    assert_eq!(sums[0], sums[1], "downloaded file differs");
    // HEAD, 404, a path escaping the root, an unsupported method.
    let (_, out) = lab.exec("curl -sS -I http://198.18.0.2/big.bin");
    assert!(
        out.contains("200 OK") && out.contains("Content-Length: 30000000"),
        "{out}"
    );
    let (_, out) = lab.exec("curl -sS -o /dev/null -w %{http_code} http://198.18.0.2/nothing-here");
    assert_eq!(out.trim(), "404");
    let (_, out) = lab.exec(
        "curl -sS --path-as-is -o /dev/null -w %{http_code} http://198.18.0.2/../../etc/passwd",
    );
    assert_eq!(out.trim(), "404");
    let (_, out) = lab.exec("curl -sS -X DELETE -o /dev/null -w %{http_code} http://198.18.0.2/");
    assert_eq!(out.trim(), "405");
    // mpstack closes first under HTTP/1.0, so it holds TIME_WAIT; the same client port
    // again at once is a new incarnation that must be let in (RFC 6191). `nc` reads
    // until mpstack closes (curl, having read Content-Length bytes, may close first and
    // leave Linux's end in TIME_WAIT, and its next bind fails).
    for _ in 0..2 {
        let (ok, out) = lab.exec(
            "sh -c 'printf \"GET / HTTP/1.0\\r\\n\\r\\n\" | timeout 20 nc -p 40123 198.18.0.2 80'",
        );
        assert!(ok && out.contains("<h1>mpstack</h1>"), "{out}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let c = lab.stop();
    assert!(
        c.get("tcp.timewaitreuse").copied().unwrap_or(0) >= 1,
        "{c:?}"
    );
    assert!(c.get("tcp.accepts").copied().unwrap_or(0) >= 5, "{c:?}");
}

/// Bytes for a big transfer at loss `p`: 1 GiB, as issue 3 asks; at 5% loss 16 MiB
/// and at 20% 256 KiB, where Linux's CUBIC sends at 10 and 0.02-0.2 Mbit/s, its
/// timeouts backing off for tens of seconds (one run took 416 s for 1 MiB; the test
/// command must stay short), unless MPSTACK_INTEROP_FULL=1: then 1 GiB at 5% and
/// 16 MiB at 20%, issue 26's sizes.
fn big_size(p: f64) -> u64 {
    let full = std::env::var_os("MPSTACK_INTEROP_FULL").is_some();
    match (p >= 0.2, p >= 0.05, full) {
        (true, _, false) => 256 << 10,
        (true, _, true) => 16 << 20,
        (false, true, false) => 16 << 20,
        _ => 1 << 30,
    }
}

/// The socat option that gives a Linux socket the congestion control `cc`
/// (`TCP_CONGESTION`, IPPROTO_TCP 6, option 13): per socket, as root, so the host's
/// `tcp_allowed_congestion_control` (which a namespace cannot widen) is not touched.
fn cc_sockopt(cc: Option<&str>) -> String {
    cc.map(|cc| format!(",setsockopt-string=6:13:{cc}"))
        .unwrap_or_default()
}

/// Drops TCP packets at random, with probability `p`, each way on the Linux side of
/// the lab's TAP. iptables sees a packet before the kernel's software segmentation
/// (GSO) cuts it: unless `whole` (an offload lab, where 64 KiB segments are the
/// point), GSO is turned off on the TAP so that Linux's segments, like mpstack's,
/// are dropped one by one (with it on, a 64 KiB burst of Linux's would be one
/// packet to drop, a twentieth of the loss mpstack's sending sees).
fn drop_randomly(lab: &Lab, p: f64, whole: bool) {
    if p == 0.0 {
        return;
    }
    if !whole {
        let (ok, out) = lab.exec(&format!("ethtool -K {} gso off tso off", lab.tap));
        assert!(ok, "ethtool: {out}");
    }
    for chain in [
        format!("OUTPUT -o {}", lab.tap),
        format!("INPUT -i {}", lab.tap),
    ] {
        let (ok, out) = lab.exec(&format!(
            "iptables -A {chain} -p tcp -m statistic --mode random --probability {p} -j DROP"
        ));
        assert!(ok, "iptables: {out}");
    }
}

/// A Linux host one routed hop from mpstack, for transfers under loss: namespace
/// `{lab.ns}h` (198.18.1.2) behind a veth pair, the lab's namespace routing between
/// it and the TAP and dropping `p` of the TCP packets it forwards, each way
/// (`iptables -A FORWARD`). Dropped there, a packet is lost to either sender alike;
/// a drop in the sending host's own OUTPUT chain (as [`drop_randomly`] does) is a
/// local error that Linux's TCP sends again at once, not a loss it has to detect.
/// Segmentation offload is off on the veth and the TAP so that segments are
/// forwarded, and dropped, one by one. The node routes 198.18.1.0/24 through
/// 198.18.0.1 ([`BEHIND_ROUTE`]).
struct Behind {
    ns: String,
}

const BEHIND_ROUTE: [&str; 2] = ["--route", "198.18.1.0/24=198.18.0.1"];

impl Behind {
    fn new(lab: &Lab, p: f64) -> Behind {
        let ns = format!("{}h", lab.ns);
        let (va, vb) = (format!("{}a", lab.tap), format!("{}b", lab.tap));
        let _ = sh(&format!("ip netns del {ns} 2>/dev/null"));
        let lns = &lab.ns;
        for c in [
            format!("ip netns add {ns}"),
            format!("ip link add {va} netns {lns} type veth peer name {vb} netns {ns}"),
            format!("ip -n {lns} addr add 198.18.1.1/24 dev {va}"),
            format!("ip -n {lns} link set {va} up"),
            format!("ip -n {ns} link set lo up"),
            format!("ip -n {ns} addr add 198.18.1.2/24 dev {vb}"),
            format!("ip -n {ns} link set {vb} up"),
            format!("ip -n {ns} route add default via 198.18.1.1"),
            format!("ip netns exec {lns} sysctl -qw net.ipv4.ip_forward=1"),
            format!("ip netns exec {ns} ethtool -K {vb} gso off tso off gro off"),
            format!("ip netns exec {lns} ethtool -K {va} gso off tso off gro off"),
            format!("ip netns exec {lns} ethtool -K {} gso off tso off", lab.tap),
            format!(
                "ip netns exec {lns} iptables -A FORWARD -p tcp -m statistic --mode random \
                 --probability {p} -j DROP"
            ),
        ] {
            let (ok, out) = sh(&c);
            assert!(ok, "{c}: {out}");
        }
        Behind { ns }
    }

    fn exec(&self, cmd: &str) -> (bool, String) {
        sh(&format!("ip netns exec {} {cmd}", self.ns))
    }
}

/// Runs `cmd` on the Linux side of `lab`: in the host behind it, if there is one.
fn exec_linux(lab: &Lab, host: &Option<Behind>, cmd: &str) -> (bool, String) {
    match host {
        Some(h) => h.exec(cmd),
        None => lab.exec(cmd),
    }
}

impl Drop for Behind {
    fn drop(&mut self) {
        let _ = sh(&format!("ip netns del {} 2>/dev/null", self.ns));
    }
}

/// Runs the listener `cmd` on the Linux side of `lab` while the node sends to it:
/// its output, or a failure with the node's output if the node has exited and the
/// listener still waits 30 s later (a client that gave up never closes its
/// connection: the listener would wait out its whole timeout).
fn listen_while_alive(lab: &mut Lab, host: &Option<Behind>, cmd: &str) -> (bool, String) {
    let ns = host.as_ref().map_or(lab.ns.clone(), |h| h.ns.clone());
    use std::os::unix::process::CommandExt;
    let mut child = Command::new("ip")
        .args(["netns", "exec", &ns, "sh", "-c", cmd])
        // A process group of its own, to end the listener's pipeline whole.
        .process_group(0)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the listener");
    let mut gone: Option<std::time::Instant> = None;
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            let out = child.wait_with_output().expect("the listener's output");
            let text = String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr);
            return (out.status.success(), text);
        }
        if gone.is_none() && !lab.alive() {
            gone = Some(std::time::Instant::now());
        }
        if gone.is_some_and(|g| g.elapsed() > Duration::from_secs(30)) {
            // Ours to end: the group of the pipeline we started.
            let _ = sh(&format!("kill -TERM -- -{}", child.id()));
            let _ = child.wait();
            while let Ok(l) = lab.lines.try_recv() {
                lab.output.push(l);
            }
            panic!(
                "the node exited while the listener still waited: {:?}",
                lab.output
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Linux <-> mpstack over TAP at loss `p` (each way): curl downloads a big file from
/// the HTTP service (SHA-256 compared), 100 MB through echo, Linux sends a big stream
/// to discard; then mpstack's client sends a big stream to `nc -l` (SHA-256 compared).
fn big_transfers(tag: &str, p: f64) {
    big_transfers_with(tag, p, &[], None);
}

/// [`big_transfers`] with more arguments for the node (`--offload`), and the Linux
/// side's congestion control set (else the kernel's default).
fn big_transfers_with(tag: &str, p: f64, node: &[&str], cc: Option<&str>) {
    skip_unless!("curl", "socat", "nc", "sha256sum", "iptables", "ethtool");
    let n = big_size(p);
    let whole = node.contains(&"--offload");
    let t = 1800;
    let www = www_dir(tag);
    std::fs::create_dir_all(&www).unwrap();
    let file = www.join("big.bin");
    let (ok, out) = sh(&format!("head -c {n} /dev/urandom > {}", file.display()));
    assert!(ok, "{out}");
    // Under loss (but with offload, whose 64 KiB segments are the point), Linux
    // is one hop away, behind a router that drops.
    let behind = p > 0.0 && !whole;
    let route: &[&str] = if behind { &BEHIND_ROUTE } else { &[] };
    // Like for like: with Linux on BBR, mpstack uses BBR too.
    let ours: &[&str] = if cc == Some("bbr") {
        &["--sysctl", "net.inet.tcp.cc.algorithm=bbr"]
    } else {
        &[]
    };
    let route: Vec<&str> = route.iter().chain(ours).copied().collect();
    let route = &route[..];
    // At 20% loss a sender's backed-off retransmission timer can leave a
    // connection silent for longer than the services' default idle timeout (120 s):
    // these transfers have their own time limit, `t`.
    let idle = t.to_string();
    let patient = ["--serve-idle-timeout", idle.as_str()];
    let args: Vec<&str> = node.iter().chain(route).chain(&patient).copied().collect();
    let mut lab = Lab::start_with(tag, 2, &args);
    let host = behind.then(|| Behind::new(&lab, p));
    if !behind {
        drop_randomly(&lab, p, whole);
    }
    let run = |c: &str| exec_linux(&lab, &host, c);
    let started = std::time::Instant::now();
    let (ok, out) = run(&format!(
        "sh -c 'curl -sS --max-time {t} http://198.18.0.2/big.bin | sha256sum; sha256sum < {}'",
        file.display()
    ));
    assert!(ok, "curl: {out}");
    assert_same_sums(&out, &format!("curl's download at loss {p} differs"));
    let curl_s = started.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&file);

    let started = std::time::Instant::now();
    let echo_mb = 100.min((n >> 20) as usize).max(1);
    let opt = cc_sockopt(cc);
    echo_intact_from(&run, tag, echo_mb, t as u32, &opt);
    let echo_s = started.elapsed().as_secs_f64();

    let started = std::time::Instant::now();
    // Linux sends (with its congestion control named): socat half-closes at the end
    // of its input and exits when the service, having read everything, closes too.
    let (ok, out) = run(&format!(
        "sh -c 'head -c {n} /dev/zero | timeout {t} socat -t {t} - TCP:198.18.0.2:9{opt} >/dev/null'"
    ));
    assert!(ok, "discard: {out}");
    let discard_s = started.elapsed().as_secs_f64();
    let c = lab.stop();
    let report = lab
        .output
        .iter()
        .find(|l| l.contains("TCP services:"))
        .cloned()
        .unwrap_or_default();
    let bytes_in: u64 = report
        .split(", ")
        .find(|p| p.ends_with("byte(s) in"))
        .and_then(|p| p.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(
        bytes_in >= n + echo_mb as u64 * 1_000_000,
        "discard and echo took everything: {report}"
    );
    let rexmit = c.get("tcp.sndrexmitpack").copied().unwrap_or(0);
    drop(host);
    drop(lab);

    // mpstack -> Linux: the node's own client connects to `nc -l`.
    let send = n.to_string();
    let peer = if behind { "198.18.1.2" } else { "198.18.0.1" };
    let to = format!("{peer}:5001");
    let client = ["--connect", &to, "--send", &send];
    let args: Vec<&str> = client.iter().chain(node).chain(route).copied().collect();
    let mut lab = Lab::start_with(&format!("{tag}c"), 1, &args);
    let host = behind.then(|| Behind::new(&lab, p));
    if !behind {
        drop_randomly(&lab, p, whole);
    }
    let started = std::time::Instant::now();
    let listen = format!("sh -c 'timeout {t} nc -l {peer} 5001 | sha256sum'");
    let (ok, out) = listen_while_alive(&mut lab, &host, &listen);
    assert!(ok, "nc: {out}");
    let got = out.split_whitespace().next().unwrap_or("").to_string();
    let line = lab
        .wait_line("client:", Duration::from_secs(60))
        .unwrap_or_else(|| panic!("no client report: {:?}", lab.output));
    let nc_s = started.elapsed().as_secs_f64();
    assert!(
        line.contains(&format!("sent {n} byte(s) sha256 {got}")),
        "{line} vs {got}"
    );
    let c2 = lab.stop();
    drop(host);
    let mbps = |b: u64, s: f64| b as f64 * 8.0 / s / 1e6;
    let linux = cc.unwrap_or("default");
    eprintln!(
        "loss {p} {node:?} linux {linux}: curl {n} B in {curl_s:.1} s ({:.0} Mbit/s), \
         echo {echo_mb} MB in {echo_s:.1} s, discard {n} B in {discard_s:.1} s ({:.0} Mbit/s), \
         mpstack->nc {n} B in {nc_s:.1} s ({:.0} Mbit/s); mpstack sending / Linux sending \
         {:.2}; mpstack retransmitted {rexmit} + {} segments, {} timeouts ({} spurious)",
        mbps(n, curl_s),
        mbps(n, discard_s),
        mbps(n, nc_s),
        discard_s / nc_s,
        c2.get("tcp.sndrexmitpack").copied().unwrap_or(0),
        c2.get("tcp.rexmttimeo").copied().unwrap_or(0),
        c2.get("tcp.sndrexmitbad").copied().unwrap_or(0),
    );
    let recovery: Vec<String> = [
        "sndpack",
        "fastrexmit",
        "racklost",
        "racktimeo",
        "rexmitlost",
        "tlpprobes",
        "rexmttimeo",
        "sndrexmitbad",
        "dsackundo",
        "rackreorder",
    ]
    .iter()
    .map(|k| format!("{k} {}", c2.get(&format!("tcp.{k}")).copied().unwrap_or(0)))
    .collect();
    eprintln!("  mpstack->nc recovery: {}", recovery.join(", "));
    if p > 0.0 {
        assert!(rexmit > 0, "losses were repaired: {c:?}");
    }
}

#[test]
fn gigabyte_transfers_both_ways_without_loss() {
    big_transfers("g0", 0.0);
}

// Under loss Linux's congestion control is named (issue 26): CUBIC here, BBR with
// offload below, both at 5% and 20%.
#[test]
fn gigabyte_transfers_both_ways_with_one_percent_loss() {
    big_transfers_with("g1", 0.01, &[], Some("cubic"));
}

#[test]
fn big_transfers_both_ways_with_five_percent_loss() {
    big_transfers_with("g5", 0.05, &[], Some("bbr"));
}

// Issue 26's comparison: Linux's congestion control named (CUBIC, BBR), mpstack
// with CUBIC, each sending to the other over the same lossy path; at 20% every
// transfer still completes byte-exact.
#[test]
fn big_transfers_with_five_percent_loss_against_linux_cubic() {
    big_transfers_with("c5", 0.05, &[], Some("cubic"));
}

#[test]
fn transfers_with_twenty_percent_loss_against_linux_cubic() {
    big_transfers_with("c20", 0.2, &[], Some("cubic"));
}

#[test]
fn transfers_with_twenty_percent_loss_against_linux_bbr() {
    big_transfers_with("b20", 0.2, &[], Some("bbr"));
}

// The same with checksum and segmentation offload on the TAP (virtio-net header):
// Linux hands over and takes 64 KiB TCP segments.
#[test]
fn gigabyte_transfers_both_ways_with_offload() {
    big_transfers_with("o0", 0.0, &["--offload"], None);
}

#[test]
fn gigabyte_transfers_both_ways_with_offload_and_one_percent_loss() {
    big_transfers_with("o1", 0.01, &["--offload"], Some("bbr"));
}

/// No segment larger than the peer's MSS (RFC 9293 §3.7.1). A burst cut only where
/// it passed the link's MTU once left whole: to a peer offering 1,200, segments of
/// up to 1,440 bytes; to one offering 536, up to 1,412. Linux offers 536, then
/// 1,200 (its route's `advmss`), downloads 100 MB over HTTP, and tcpdump on the TAP
/// (without `--offload`, so it sees each frame as mpstack sent it; the device-TSO
/// path is held to the same rule by the sim property test
/// `no_segment_exceeds_the_peers_mss_whatever_the_offload`) sees no TCP payload
/// beyond the MSS less the options the connection carries.
#[test]
fn no_segment_exceeds_the_peers_mss() {
    skip_unless!("curl", "tcpdump", "sha256sum");
    for (tag, mss) in [("ms5", 536usize), ("ms12", 1200)] {
        let mut lab = Lab::start(tag, 2);
        let www = www_dir(tag);
        let (ok, out) = sh(&format!(
            "head -c 100000000 /dev/urandom > {}/big.bin",
            www.display()
        ));
        assert!(ok, "{out}");
        let c = format!(
            "ip route replace 198.18.0.0/24 dev {} proto kernel scope link src 198.18.0.1 advmss {mss}",
            lab.tap
        );
        let (ok, out) = lab.exec(&c);
        assert!(ok, "{c}: {out}");
        let pcap =
            std::env::temp_dir().join(format!("mpstack-mss-{tag}-{}.pcap", std::process::id()));
        let mut dump = Command::new("ip")
            .args([
                "netns", "exec", &lab.ns, "tcpdump", "-i", &lab.tap, "-nn", "-U", "-s", "96",
            ])
            .args(["-B", "16384", "-w"])
            .arg(&pcap)
            .args(["tcp", "src", "port", "80"])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start tcpdump");
        // tcpdump says "listening on" once its filter is in place.
        let mut err = std::io::BufReader::new(dump.stderr.take().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut err, &mut line).unwrap();
        assert!(line.contains("listening on"), "tcpdump: {line}");
        let (ok, out) = lab.exec(&format!(
            "sh -c 'curl -sS --max-time 120 http://198.18.0.2/big.bin | sha256sum; sha256sum < {}/big.bin'",
            www.display()
        ));
        let _ = sh(&format!("kill -INT {}", dump.id()));
        let _ = dump.wait();
        assert!(ok, "MSS {mss}: {out}");
        assert_same_sums(&out, &format!("MSS {mss}: file differs"));
        let (ok, text) = sh(&format!("tcpdump -nn -r {} 2>/dev/null", pcap.display()));
        let _ = std::fs::remove_file(&pcap);
        assert!(ok, "tcpdump -r");
        let mut segs = 0usize;
        let mut most = 0usize;
        for l in text.lines() {
            // "…, length 524" or "…, length 524: HTTP" (tcpdump's decode after it).
            let Some((_, n)) = l.rsplit_once(", length ") else {
                continue;
            };
            let digits: String = n.chars().take_while(char::is_ascii_digit).collect();
            let Ok(len) = digits.parse::<usize>() else {
                continue;
            };
            if len == 0 {
                continue;
            }
            // Timestamps (Linux offers them) take 12 bytes of each segment's MSS.
            let room = if l.contains("TS val") { mss - 12 } else { mss };
            assert!(len <= room, "MSS {mss}: a segment of {len} bytes: {l}");
            segs += 1;
            most = most.max(len);
        }
        // Most of 100 MB in segments the size the MSS allows (tcpdump may miss some).
        assert!(
            segs * mss > 50_000_000,
            "MSS {mss}: only {segs} data segments seen"
        );
        assert_eq!(
            most,
            mss - 12,
            "MSS {mss}: full segments carry the MSS less timestamps"
        );
        lab.stop();
    }
}
