//! Interop: a Linux namespace reaching an mpstack node that runs an ipfw ruleset
//! (`mpstack run --ipfw FILE`, issue 6): denied ports get the configured answer (a
//! reset, ICMP port unreachable, or silence), allowed ones work, and the rules'
//! counters match what was sent. Needs root; skips with a message otherwise.

mod common;
use common::*;
use std::time::Duration;

const RULES: &str = "
# The node at 198.18.0.2: ping and the echo service; port 9 refused with a reset,
# UDP 19 with port unreachable, everything else dropped in silence.
add 100 allow icmp from any to any
add 200 allow tcp from 198.18.0.0/24 to me 7 keep-state
add 300 reset tcp from any to me 9
add 400 unreach port udp from any to me 19
add 500 allow udp from any to me 7 keep-state
add 600 count log ip from any to any
add 700 deny ip from any to any
";

fn count(lab: &Lab, rule: &str) -> u64 {
    lab.output
        .iter()
        .filter_map(|l| l.strip_prefix("ipfw: "))
        .find(|l| l.starts_with(rule))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no counters for rule {rule}: {:?}", lab.output))
}

#[test]
fn denied_ports_get_the_configured_answer_and_counters_match() {
    skip_unless!("ip", "ping", "socat", "nc");
    let rules = std::env::temp_dir().join(format!("mpstack-ipfw-{}.rules", std::process::id()));
    std::fs::write(&rules, RULES).unwrap();
    let mut lab = Lab::start_with("fw", 1, &["--ipfw", rules.to_str().unwrap()]);
    // Allowed: ping (5 echoes in, 5 replies out) and the TCP echo service.
    let (ok, out) = lab.exec("ping -c 5 -i 0.2 -W 2 198.18.0.2");
    assert!(ok && out.contains("5 received"), "{out}");
    let (ok, out) = lab.exec("sh -c 'echo through | timeout 5 socat -t 1 - TCP:198.18.0.2:7'");
    assert!(ok && out.contains("through"), "{out}");
    // Refused with a reset: the connect fails at once (not after a time-out).
    let t = std::time::Instant::now();
    let (ok, out) = lab.exec("timeout 5 socat -u - TCP:198.18.0.2:9 < /dev/null");
    assert!(!ok && out.contains("Connection refused"), "{out}");
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "refused, not timed out"
    );
    // UDP 19: ICMP port unreachable, seen by a connected UDP socket as refused.
    let (_, out) = lab.exec(
        "sh -c 'echo x | timeout 3 socat -t 1 - UDP:198.18.0.2:19 2>&1; echo x | timeout 3 socat -t 1 - UDP:198.18.0.2:19 2>&1'",
    );
    assert!(out.contains("Connection refused"), "{out}");
    // Silence: TCP 19 (chargen is running, but the rules drop it): the connect times
    // out, after nc's 2 s, with no reset and no ICMP error to end it sooner.
    let t = std::time::Instant::now();
    let (ok, out) = lab.exec("timeout 3 nc -w 2 -z 198.18.0.2 19");
    assert!(!ok, "no answer at all: {out}");
    assert!(
        !out.contains("refused") && !out.contains("unreachable"),
        "{out}"
    );
    assert!(
        t.elapsed() >= Duration::from_millis(1900),
        "timed out, not refused: {:?}",
        t.elapsed()
    );
    // A UDP echo through rule 500's keep-state: its state outlives the run (10 s).
    let (ok, out) = lab.exec("sh -c 'echo state | timeout 3 socat -t 1 - UDP:198.18.0.2:7'");
    assert!(ok && out.contains("state"), "{out}");
    std::thread::sleep(Duration::from_millis(300));
    lab.stop();
    // `ipfw -d list`'s states at exit: the datagram's, alive; the echo connection's,
    // closed more than its 2 s FIN lifetime ago, expired and gone.
    let states: Vec<&str> = lab
        .output
        .iter()
        .filter_map(|l| l.strip_prefix("ipfw: "))
        .filter(|l| l.contains(" STATE "))
        .collect();
    assert!(
        states.len() == 1
            && states[0].starts_with("00500 (")
            && states[0].contains("STATE udp 198.18.0.1 ")
            && states[0].ends_with("<-> 198.18.0.2 7"),
        "{states:?}"
    );
    let _ = std::fs::remove_file(&rules);
    // Every echo and its reply; the refused attempts once each (one SYN, one or two
    // datagrams); the silently dropped SYNs (with their retransmissions) at rule 700.
    assert_eq!(
        count(&lab, "00100"),
        10,
        "5 echo requests in, 5 replies out"
    );
    assert!(count(&lab, "00200") >= 6, "the echo connection both ways");
    assert_eq!(count(&lab, "00300"), 1, "one SYN to port 9");
    assert!(
        (1..=2).contains(&count(&lab, "00400")),
        "datagrams to UDP 19"
    );
    assert!(count(&lab, "00700") >= 1, "SYNs to TCP 19 dropped");
    assert_eq!(
        count(&lab, "00600"),
        count(&lab, "00700"),
        "count then deny"
    );
}

/// `mpstack run --ipfw FILE` with `args` (a TAP of its own, no control socket):
/// its exit code and standard error. The node is expected to refuse to start.
fn refused_run(tag: &str, rules: &str, args: &[&str]) -> (Option<i32>, String) {
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("mpstack-fwbad-{tag}-{pid}"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.rules");
    std::fs::write(&file, rules).unwrap();
    let tap = format!("mpf{tag}{}", pid % 10000);
    let mut node = std::process::Command::new(env!("CARGO_BIN_EXE_mpstack"))
        .args(["run", "--tap", &tap, "--inet", "198.18.0.2/24"])
        .args(["--name", "none", "--serve", "none"])
        .args(args)
        .arg("--ipfw")
        .arg(&file)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A node that took the rules would run until stopped: give it 30 s.
    let t = std::time::Instant::now();
    while node.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let started = node.try_wait().unwrap().is_none();
    if started {
        let _ = node.kill();
    }
    let o = node.wait_with_output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        !started && !out.contains("up on"),
        "the node started: {out}"
    );
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_ruleset_naming_an_undefined_pipe_or_too_long_a_queue_stops_the_node_at_its_line() {
    skip_unless!("ip");
    // Issue 29: a rule sending to a pipe nobody configured, and a pipe asking for
    // a queue far beyond FreeBSD's limits.
    let (code, err) = refused_run(
        "a",
        "# shaped\nadd 100 pipe 5 ip from any to any\npipe 1 config bw 1Mbit/s\n",
        &[],
    );
    assert_eq!(code, Some(2));
    assert!(
        err.contains("bad.rules:2:14: pipe 5 is not configured"),
        "{err}"
    );
    let (code, err) = refused_run("b", "pipe 1 config bw 1Kbit/s queue 99999999\n", &[]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("bad.rules:1:6: queue size 99999999 is more than 100"),
        "{err}"
    );
    // The sysctl raises the limit, within what it takes: here the first error is
    // the next line's.
    let (_, err) = refused_run(
        "c",
        "pipe 1 config queue 200\nadd 100 queue 3 ip from any to any\n",
        &["--sysctl", "net.inet.ip.dummynet.pipe_slot_limit=200"],
    );
    assert!(
        err.contains("bad.rules:2:15: queue 3 is not configured"),
        "{err}"
    );
    let (_, err) = refused_run(
        "d",
        "\n",
        &["--sysctl", "net.inet.ip.dummynet.pipe_byte_limit=100"],
    );
    assert!(
        err.contains("net.inet.ip.dummynet.pipe_byte_limit: '100' is not bytes, 1500 or more"),
        "{err}"
    );
}

/// `mpstack ARGS…` (a control command to a running node): its success and output.
fn ctl(args: &[&str]) -> (bool, String) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_mpstack"))
        .args(args)
        .output()
        .expect("run mpstack");
    let mut out = String::from_utf8_lossy(&o.stdout).into_owned();
    out += &String::from_utf8_lossy(&o.stderr);
    (o.status.success(), out)
}

#[test]
fn ipfw_d_show_lists_the_states_and_netstat_and_sysctl_count_them() {
    skip_unless!("ip", "ping", "socat");
    let pid = std::process::id();
    let rules = std::env::temp_dir().join(format!("mpstack-ipfw-dyn-{pid}.rules"));
    std::fs::write(
        &rules,
        "add 100 check-state\n\
         add 200 allow udp from 198.18.0.1 to me 7 keep-state\n\
         add 300 allow icmp from 198.18.0.1 to me keep-state\n\
         add 65000 allow ip from any to any\n",
    )
    .unwrap();
    let name = format!("fwdyn-{pid}");
    let r = rules.display().to_string();
    let mut lab = Lab::start_with("fd", 1, &["--name", &name, "--ipfw", &r]);
    let (ok, out) = lab.exec("ping -c 2 -i 0.2 -W 2 198.18.0.2");
    assert!(ok && out.contains("2 received"), "{out}");
    let (ok, out) = lab.exec("sh -c 'echo state | timeout 3 socat -t 1 - UDP:198.18.0.2:7'");
    assert!(ok && out.contains("state"), "{out}");
    // ipfw(8) -d: the rules, then the states with their rule and lifetime; the
    // ping's keyed on its identifier (as pf shows it, as both ports).
    let (ok, show) = ctl(&["ipfw", "-j", &name, "-d", "show"]);
    assert!(ok, "{show}");
    let lines: Vec<&str> = show.lines().collect();
    let head = lines
        .iter()
        .position(|l| *l == "## Dynamic rules (2):")
        .unwrap_or_else(|| panic!("{show}"));
    assert!(
        lines[..head].iter().any(|l| l.starts_with("00200 ")),
        "{show}"
    );
    let states = &lines[head + 1..];
    assert!(
        states.iter().any(|l| l.starts_with("00200 (")
            && l.contains("s) STATE udp 198.18.0.1 ")
            && l.ends_with(" <-> 198.18.0.2 7")),
        "{show}"
    );
    let icmp = states
        .iter()
        .find(|l| l.starts_with("00300 (") && l.contains("STATE icmp 198.18.0.1 "))
        .unwrap_or_else(|| panic!("{show}"));
    let w: Vec<&str> = icmp.split_whitespace().collect();
    assert_eq!((w[5], w[6], w[7]), (w[5], "<->", "198.18.0.2"), "{icmp}");
    assert_eq!(w[5], w[8], "the identifier both sides: {icmp}");
    let (ok, plain) = ctl(&["ipfw", "-j", &name, "show"]);
    assert!(ok && !plain.contains("Dynamic"), "{plain}");
    // The gauge in netstat -s and sysctl; the bound read-only.
    let (ok, st) = ctl(&["netstat", "-j", &name, "-s"]);
    assert!(ok, "{st}");
    assert!(
        st.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["2", "fw.dyn_count"]),
        "{st}"
    );
    let (ok, out) = ctl(&["sysctl", "-j", &name, "net.inet.ip.fw"]);
    assert!(ok, "{out}");
    assert!(out.contains("net.inet.ip.fw.dyn_count: 2"), "{out}");
    assert!(out.contains("net.inet.ip.fw.dyn_max: 16384"), "{out}");
    let (ok, out) = ctl(&["sysctl", "-j", &name, "net.inet.ip.fw.dyn_max=10"]);
    assert!(!ok && out.contains("read-only"), "{out}");
    lab.stop();
    let _ = std::fs::remove_file(&rules);
}
