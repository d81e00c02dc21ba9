//! `mpstack demo`, as a new user runs it: the router scenario by default, the old
//! three hosts as `lan`, the same output for the same seed, one pcap per link.

use std::process::{Command, Output};

fn demo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mpstack"))
        .arg("demo")
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn the_default_demo_is_the_router_and_shows_what_happened() {
    let o = demo(&[]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}");
    for want in [
        "mpstack demo router: two LANs joined by a router",
        "add 100 reset tcp from any to 198.18.2.0/24 23 in",
        "ARP, Request who-has 198.18.1.1 tell 198.18.1.10",
        "ICMP6, neighbor solicitation, who has 2001:2:1::1",
        "ICMP6, neighbor advertisement, tgt is 2001:2:2::10",
        "ms each way; set: delay 20 ms",
        "came back intact",
        "   1  198.18.1.1 ",
        "(time exceeded)",
        "   2  198.18.2.10 ",
        "(port unreachable: arrived)",
        "connection refused, reset by rule 100",
        "2000000 bytes in",
        "byte for byte as sent",
        // The router's tables, as its control commands print them.
        "Routing tables",
        "198.18.2.0/24                    link#2",
        "2001:2:1::/64",
        "00100          1",
        "pipe 1: 10000000 bit/s, delay 20 ms",
        "ip.forward",
        "ip.timeexceed",
        "demo: OK",
    ] {
        assert!(out.contains(want), "missing '{want}' in:\n{out}");
    }
    // The pipes' delay as printed: half of what they add to alpha's RTT to charlie.
    let line = out
        .lines()
        .find(|l| l.contains("the pipes add"))
        .unwrap_or_else(|| panic!("{out}"));
    let each: f64 = line
        .split(": ")
        .nth(1)
        .and_then(|s| s.split(" ms").next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!((each - 20.0).abs() / 20.0 < 0.05, "{line}");
}

#[test]
fn the_same_seed_prints_the_same_demo() {
    for args in [&["--seed", "5"][..], &["lan", "--seed", "5"][..]] {
        let a = demo(args);
        let b = demo(args);
        assert!(a.status.success(), "{}", stdout(&a));
        assert_eq!(stdout(&a), stdout(&b), "mpstack demo {args:?}");
    }
    assert_ne!(
        stdout(&demo(&["--seed", "5"])),
        stdout(&demo(&["--seed", "6"]))
    );
}

#[test]
fn list_names_the_scenarios_and_lan_runs_the_three_hosts() {
    let out = stdout(&demo(&["--list"]));
    let names: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(names, ["router", "lan"], "{out}");
    let o = demo(&["lan"]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("hosts alpha, bravo, charlie on 198.18.0.0/24"),
        "{out}"
    );
    assert!(out.contains("demo: OK"), "{out}");
    let o = demo(&["wan"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no scenario 'wan'; there are: router, lan"),
        "{o:?}"
    );
}

#[test]
fn pcap_writes_one_file_per_link() {
    let dir = std::env::temp_dir().join(format!("mpstack-demo-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let o = demo(&["--pcap", dir.join("d.pcap").to_str().unwrap()]);
    assert!(o.status.success(), "{}", stdout(&o));
    for link in ["lan1", "lan2"] {
        let f = std::fs::read(dir.join(format!("d-{link}.pcap"))).unwrap();
        // A pcap header (nanosecond timestamps), then at least the transfer's frames.
        assert_eq!(f[..4], dev::pcap::MAGIC_NS.to_le_bytes(), "{link}");
        assert!(f.len() > 1_000_000, "{link}: {} bytes", f.len());
    }
    assert!(!dir.join("d.pcap").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
