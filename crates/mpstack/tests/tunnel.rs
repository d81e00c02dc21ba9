//! Interop of mpstack's tunnels (gif, gre) with a Linux end: ping and TCP
//! byte-exact through each kind, IPv4 and IPv6 inside, IPv4 and IPv6 outside, with
//! 1 and 2 workers.
//!
//! The kernels these tests run on may be built without Linux's tunnel drivers
//! (ipip, sit, ip6_tunnel, ip_gre: `ip link add … type ipip` answers "Unknown
//! device type"). The Linux end is then `tunnel_end.py`: the kernel's own ping and
//! TCP over a TUN device, the encapsulation done in user space through raw
//! sockets, on the wire as those drivers send it. Where the kernel has the
//! drivers, the Linux end is the kernel's own tunnel device instead.
//!
//! The node runs on a TAP in a namespace the test makes (`Lab`): 198.18.0.2 and
//! 2001:2::2 on the TAP, the tunnel's inner addresses 198.18.99.2/30 and
//! 2001:2:99::2/64; Linux has .1 and ::1 of each.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

mod common;
use common::*;

/// What a tunnel is on each side: mpstack's `--tunnel` kind and options, and
/// Linux's `ip link` type.
struct Case {
    kind: &'static str,
    outer6: bool,
    key: Option<u32>,
}

impl Case {
    fn linux_type(&self) -> &'static str {
        match (self.kind, self.outer6) {
            ("gif", false) => "sit",
            ("gif", true) => "ip6tnl",
            (_, false) => "gre",
            (_, true) => "ip6gre",
        }
    }

    fn ends(&self) -> (&'static str, &'static str) {
        if self.outer6 {
            ("2001:2::2", "2001:2::1")
        } else {
            ("198.18.0.2", "198.18.0.1")
        }
    }
}

/// The Linux end: the kernel's tunnel device if it has the driver, else
/// `tunnel_end.py` on a TUN device; either named `ltun`, with the inner addresses.
struct LinuxEnd {
    helper: Option<Child>,
}

impl LinuxEnd {
    fn start(lab: &Lab, c: &Case) -> LinuxEnd {
        let (ours, theirs) = c.ends();
        let key = c.key.map(|k| format!(" key {k}")).unwrap_or_default();
        // The kernel's driver first. `sit` carries IPv6 only; `mode any` adds IPv4
        // (ipip), as gif does; ip6tnl's `mode any` likewise.
        let mode = match c.linux_type() {
            "sit" | "ip6tnl" => " mode any",
            _ => "",
        };
        let (kernel, _) = lab.exec(&format!(
            "ip link add ltun type {} local {theirs} remote {ours}{key}{mode}",
            c.linux_type()
        ));
        let helper = if kernel {
            None
        } else {
            let mut cmd = Command::new("ip");
            cmd.args(["netns", "exec", &lab.ns, "python3"])
                .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tunnel_end.py"))
                .args([c.kind, theirs, ours, "ltun"]);
            if let Some(k) = c.key {
                cmd.arg(k.to_string());
            }
            cmd.stdin(Stdio::null());
            let (child, lines) = spawn_node(cmd);
            let mut out = Vec::new();
            let ready = wait_line(&lines, &mut out, "ready", Duration::from_secs(10));
            assert!(ready.is_some(), "tunnel_end.py did not start: {out:?}");
            Some(child)
        };
        for cmd in [
            "ip addr add 198.18.99.1/30 dev ltun",
            "ip addr add 2001:2:99::1/64 dev ltun nodad",
            "ip link set ltun mtu 1280 up",
        ] {
            let (ok, out) = lab.exec(cmd);
            assert!(ok, "{cmd}: {out}");
        }
        LinuxEnd { helper }
    }
}

impl Drop for LinuxEnd {
    fn drop(&mut self) {
        kill_node(&mut self.helper);
    }
}

fn run_case(c: &Case, workers: u16) {
    let (ours, theirs) = c.ends();
    let mut spec = format!("tun0={},{ours},{theirs}", c.kind);
    if let Some(k) = c.key {
        spec.push_str(&format!(",key={k}"));
    }
    let what = format!("{} (Linux {}), workers={workers}", spec, c.linux_type());
    let tag = format!("tn{}{}", &c.kind[..2], u8::from(c.outer6));
    let mut lab = Lab::start_with(
        &tag,
        workers,
        &[
            "--inet6",
            "2001:2::2/64",
            "--tunnel",
            &spec,
            "--inet",
            "tun0=198.18.99.2/30",
            "--inet6",
            "tun0=2001:2:99::2/64",
        ],
    );
    let (ok, out) = lab.exec(&format!("ip addr add 2001:2::1/64 dev {} nodad", lab.tap));
    assert!(ok, "{out}");
    let linux = LinuxEnd::start(&lab, c);
    // The outer link's neighbours first (IPv6 duplicate address detection on the
    // node's side takes a second).
    std::thread::sleep(Duration::from_millis(1500));
    for dst in ["198.18.99.2", "2001:2:99::2"] {
        let (ok, out) = lab.exec(&format!("ping -c 3 -i 0.2 -W 2 -s 1000 {dst}"));
        assert!(ok, "{what}: ping {dst}: {out}\n{:?}", lab.output);
    }
    // TCP both ways through the tunnel: a download from the node's HTTP service,
    // and the echo service's answer to what was sent, each compared byte for byte.
    let www = www_dir(&tag);
    let (ok, out) = sh(&format!(
        "head -c 3000000 /dev/urandom > {}/blob",
        www.display()
    ));
    assert!(ok, "{out}");
    for url in ["http://198.18.99.2/blob", "http://[2001:2:99::2]/blob"] {
        let (_, got) = lab.exec(&format!("sh -c 'curl -sS --max-time 60 {url} | sha256sum'"));
        let (_, want) = sh(&format!("sha256sum < {}/blob", www.display()));
        assert_eq!(got, want, "{what}: {url}\n{:?}", lab.output);
    }
    for dst in ["TCP4:198.18.99.2:7", "TCP6:[2001:2:99::2]:7"] {
        let (_, out) = lab.exec(&format!(
            "sh -c 'head -c 1000000 {0}/blob | timeout 60 socat -t 5 - {dst} | sha256sum; head -c 1000000 {0}/blob | sha256sum'",
            www.display()
        ));
        let sums: Vec<&str> = out.lines().collect();
        assert!(
            sums.len() == 2 && sums[0] == sums[1],
            "{what}: echo through {dst}: {out}"
        );
    }
    drop(linux);
    let counters = lab.stop();
    let get = |n: &str| counters.get(n).copied().unwrap_or(0);
    assert!(
        get("tunnel.ipackets") > 1000 && get("tunnel.opackets") > 1000,
        "{what}: {counters:?}"
    );
    for bad in [
        "tunnel.badhdr",
        "tunnel.nomatch",
        "tunnel.noproto",
        "tunnel.looped",
    ] {
        assert_eq!(get(bad), 0, "{what}: {bad}");
    }
}

#[test]
fn gif_carries_ping_and_tcp_to_a_linux_end_over_ipv4() {
    skip_unless!("python3", "curl", "socat", "sha256sum", "ping");
    let c = Case {
        kind: "gif",
        outer6: false,
        key: None,
    };
    run_case(&c, 1);
    run_case(&c, 2);
}

#[test]
fn gif_carries_ping_and_tcp_to_a_linux_end_over_ipv6() {
    skip_unless!("python3", "curl", "socat", "sha256sum", "ping");
    run_case(
        &Case {
            kind: "gif",
            outer6: true,
            key: None,
        },
        2,
    );
}

#[test]
fn gre_carries_ping_and_tcp_to_a_linux_end_over_ipv4() {
    skip_unless!("python3", "curl", "socat", "sha256sum", "ping");
    let c = Case {
        kind: "gre",
        outer6: false,
        key: None,
    };
    run_case(&c, 1);
    run_case(&Case { key: Some(7), ..c }, 2);
}

#[test]
fn gre_carries_ping_and_tcp_to_a_linux_end_over_ipv6() {
    skip_unless!("python3", "curl", "socat", "sha256sum", "ping");
    run_case(
        &Case {
            kind: "gre",
            outer6: true,
            key: None,
        },
        1,
    );
}
