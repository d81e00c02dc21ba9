//! Interop: two Linux network namespaces joined through one `mpstack run` router on
//! two TAP devices (issue 5). Linux's ping, ping -6, tracepath and a TCP transfer
//! (socat, SHA-256 compared) cross it; its second link has a smaller MTU, so path
//! MTU discovery must work through it for both families. Needs root; skips with a
//! message otherwise. Addresses: 198.18.1.0/24, 198.18.2.0/24, 2001:2:1::/64,
//! 2001:2:2::/64.

mod common;
use common::*;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The router process and the two namespaces, removed on drop.
struct Routed {
    node: Option<Child>,
    lines: mpsc::Receiver<String>,
    output: Vec<String>,
    ns: [String; 2],
    tmp: std::path::PathBuf,
}

impl Routed {
    fn start(workers: u16) -> Routed {
        Routed::start_with("r", workers, &[])
    }

    /// `tag` (one letter) keeps the names of tests running at once apart.
    fn start_with(tag: &str, workers: u16, extra: &[&str]) -> Routed {
        let id = std::process::id() % 10000;
        let ns = [format!("mprt-{tag}a-{id}"), format!("mprt-{tag}b-{id}")];
        let taps = [format!("mprt{tag}a{id}"), format!("mprt{tag}b{id}")];
        assert!(taps[0].len() <= 15);
        for n in &ns {
            let _ = sh(&format!("ip netns del {n} 2>/dev/null"));
        }
        let tmp = std::env::temp_dir().join(format!("mpstack-router-{tag}-{id}"));
        std::fs::create_dir_all(&tmp).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mpstack"));
        cmd.args(["run", "--tap", &taps[0], "--inet", "198.18.1.1/24"])
            .args(["--tap", &taps[1], "--inet", "198.18.2.1/24"])
            .args(["--inet6", &format!("{}=2001:2:1::1/64", taps[0])])
            .args(["--inet6", &format!("{}=2001:2:2::1/64", taps[1])])
            .args(["--mtu", &format!("{}=1280", taps[1])])
            .args(["--forwarding", "--rtadv", "--serve", "none"])
            .args(["--workers", &workers.to_string()])
            // The two-worker run forwards through per-worker flow tables.
            .args(if workers > 1 {
                &["--flow-table", "4tuple"][..]
            } else {
                &[][..]
            })
            .args(extra);
        let (node, rx) = spawn_node(cmd);
        let mut r = Routed {
            node: Some(node),
            lines: rx,
            output: Vec::new(),
            ns,
            tmp,
        };
        assert!(
            r.wait_line("up on", Duration::from_secs(20)),
            "mpstack did not come up: {:?}",
            r.output
        );
        let sides = [
            (
                "198.18.1.2/24",
                "198.18.1.1",
                "2001:2:1::2/64",
                "2001:2:1::1",
                1500,
            ),
            (
                "198.18.2.2/24",
                "198.18.2.1",
                "2001:2:2::2/64",
                "2001:2:2::1",
                1280,
            ),
        ];
        for ((n, t), (v4, gw, v6, gw6, mtu)) in r.ns.iter().zip(&taps).zip(sides) {
            for c in [
                format!("ip netns add {n}"),
                format!("ip link set {t} netns {n}"),
                format!("ip -n {n} link set lo up"),
                format!("ip -n {n} link set {t} mtu {mtu}"),
                format!("ip -n {n} addr add {v4} dev {t}"),
                format!("ip -n {n} addr add {v6} dev {t} nodad"),
                format!("ip -n {n} link set {t} up"),
                format!("ip -n {n} route add default via {gw}"),
                format!("ip -n {n} -6 route add default via {gw6}"),
            ] {
                let (ok, out) = sh(&c);
                assert!(ok, "{c}: {out}");
            }
        }
        // The router's IPv6 addresses pass duplicate address detection first.
        std::thread::sleep(Duration::from_millis(2500));
        r
    }

    fn wait_line(&mut self, pat: &str, t: Duration) -> bool {
        wait_line(&self.lines, &mut self.output, pat, t).is_some()
    }

    /// Runs `cmd` in namespace `i` (0: the first link's side, 1: the second's).
    fn exec(&self, i: usize, cmd: &str) -> (bool, String) {
        sh(&format!("ip netns exec {} {cmd}", self.ns[i]))
    }

    /// 20 MB of random bytes through the router with socat, from side 0 to side 1
    /// and back over IPv4, and from side 0 to side 1 over IPv6, each checked by its
    /// SHA-256; `what` names the run in failures.
    fn transfers_through(&self, what: &str) {
        let send = self.tmp.join("send");
        let recv = self.tmp.join("recv");
        let (ok, out) = sh(&format!(
            "head -c 20000000 /dev/urandom > {}",
            send.display()
        ));
        assert!(ok, "{out}");
        for (server, client, dst) in [
            (1, 0, "198.18.2.2"),
            (0, 1, "198.18.1.2"),
            (1, 0, "[2001:2:2::2]"),
        ] {
            let _ = std::fs::remove_file(&recv);
            let listen = format!(
                "ip netns exec {} timeout 60 socat -u TCP-LISTEN:5001,reuseaddr{} OPEN:{},creat,trunc",
                self.ns[server],
                if dst.starts_with('[') { ",pf=ip6" } else { "" },
                recv.display()
            );
            let mut srv = Command::new("sh").arg("-c").arg(&listen).spawn().unwrap();
            std::thread::sleep(Duration::from_millis(300));
            let (ok, out) = self.exec(
                client,
                &format!("timeout 60 socat -u OPEN:{} TCP:{dst}:5001", send.display()),
            );
            assert!(ok, "{what}: socat to {dst}: {out}");
            let st = srv.wait().unwrap();
            assert!(st.success(), "{what}: listener to {dst}: {st}");
            let (_, a) = sh(&format!("sha256sum < {}", send.display()));
            let (_, b) = sh(&format!("sha256sum < {}", recv.display()));
            assert_eq!(a, b, "{what}: SHA-256 through the router to {dst}");
        }
    }

    /// Stops the router and returns its counters (name → value).
    fn stop(&mut self) -> std::collections::HashMap<String, u64> {
        stop_node(&mut self.node, &self.lines, &mut self.output)
    }
}

impl Drop for Routed {
    fn drop(&mut self) {
        kill_node(&mut self.node);
        for n in &self.ns {
            let _ = sh(&format!("ip netns del {n} 2>/dev/null"));
        }
        let _ = std::fs::remove_dir_all(&self.tmp);
    }
}

#[test]
fn linux_namespaces_talk_through_an_mpstack_router() {
    skip_unless!("ip", "ping", "tracepath", "socat", "sha256sum");
    for workers in [1, 2] {
        let mut r = Routed::start(workers);
        // ping, both families, both ways.
        for (i, dst) in [(0, "198.18.2.2"), (1, "198.18.1.2")] {
            let (ok, out) = r.exec(i, &format!("ping -c 5 -i 0.2 -W 2 {dst}"));
            assert!(
                ok && out.contains("5 received"),
                "workers={workers} ping {dst}: {out}"
            );
            assert!(
                out.contains("ttl=63"),
                "one router hop decrements the TTL: {out}"
            );
        }
        for (i, dst) in [(0, "2001:2:2::2"), (1, "2001:2:1::2")] {
            let (ok, out) = r.exec(i, &format!("ping -6 -c 5 -i 0.2 -W 2 {dst}"));
            assert!(
                ok && out.contains("5 received"),
                "workers={workers} ping -6 {dst}: {out}"
            );
            assert!(
                out.contains("ttl=63"),
                "one hop decrements the hop limit: {out}"
            );
        }
        // Router advertisements: Linux forms a SLAAC address from the router's prefix.
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            let (_, out) = r.exec(0, "ip -6 addr show scope global");
            if out.contains("2001:2:1:0:") && out.contains("dynamic") {
                break;
            }
            assert!(
                Instant::now() < end,
                "no SLAAC address from our advertisements: {out}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        // tracepath: the router is hop 1, and it reports the second link's MTU.
        let (_, out) = r.exec(0, "tracepath -n -m 5 198.18.2.2");
        assert!(out.contains("198.18.1.1"), "router as the first hop: {out}");
        assert!(
            out.contains("pmtu 1280"),
            "path MTU found through the router: {out}"
        );
        assert!(out.contains("reached"), "{out}");
        let (_, out) = r.exec(0, "tracepath -6 -n -m 5 2001:2:2::2");
        assert!(
            out.contains("2001:2:1::1"),
            "router as the first hop: {out}"
        );
        assert!(out.contains("pmtu 1280"), "{out}");
        // Path MTU with Don't Fragment: the router answers with its next hop's MTU.
        // (Forget what tracepath taught first.)
        let (ok, out) = r.exec(0, "ip route flush cache");
        assert!(ok, "{out}");
        let (_, out) = r.exec(0, "ping -M do -s 1400 -c 2 -i 0.3 -W 1 198.18.2.2");
        assert!(
            out.contains("mtu = 1280") || out.contains("mtu=1280"),
            "fragmentation needed with the MTU: {out}"
        );
        let (_, out) = r.exec(0, "ip route get 198.18.2.2");
        assert!(out.contains("mtu 1280"), "Linux learnt the path MTU: {out}");
        // IPv6: the first big echo draws a Packet Too Big, the next go in fragments.
        let (_, out) = r.exec(0, "ping -6 -s 1400 -c 4 -i 0.3 -W 1 2001:2:2::2");
        assert!(
            out.contains("2 received") || out.contains("3 received") || out.contains("4 received"),
            "{out}"
        );
        // TCP: 20 MB each way with the SHA-256 compared.
        r.transfers_through(&format!("workers={workers}"));
        let c = r.stop();
        assert!(c.get("ip.forward").copied().unwrap_or(0) > 20_000, "{c:?}");
        assert!(c.get("ip6.forward").copied().unwrap_or(0) > 5_000, "{c:?}");
        assert!(c.get("ip.toobig").copied().unwrap_or(0) >= 1, "{c:?}");
        assert!(c.get("ip6.toobig").copied().unwrap_or(0) >= 1, "{c:?}");
        assert!(
            c.get("ip.timeexceed").copied().unwrap_or(0) >= 1,
            "tracepath's first probe: {c:?}"
        );
    }
}

#[test]
fn a_firewall_on_the_router_lets_replies_in_and_refuses_the_rest() {
    skip_unless!("ip", "ping", "socat");
    let rules = std::env::temp_dir().join(format!("mpstack-rtfw-{}.rules", std::process::id()));
    std::fs::write(
        &rules,
        "# side 1 (198.18.1.0/24) may open TCP and ping; side 2 may not start anything.
add 100 check-state
add 200 allow tcp from 198.18.1.0/24 to any setup keep-state
add 300 allow icmp from 198.18.1.0/24 to any keep-state
add 400 allow ipv6-icmp from any to any
add 500 reset tcp from any to 198.18.1.0/24
add 600 deny ip from any to any
",
    )
    .unwrap();
    let mut r = Routed::start_with("f", 1, &["--ipfw", rules.to_str().unwrap()]);
    // Side 2 first: once side 1 has pinged, ICMP between the two rides that state
    // both ways until it idles out (ICMP states key on addresses, as FreeBSD's).
    let (ok, out) = r.exec(1, "ping -c 2 -i 0.2 -W 1 198.18.1.2");
    assert!(
        !ok && out.contains("0 received"),
        "side 2 may not ping: {out}"
    );
    let (ok, out) = r.exec(0, "ping -c 3 -i 0.2 -W 2 198.18.2.2");
    assert!(
        ok && out.contains("3 received"),
        "side 1 pings side 2: {out}"
    );
    // TCP from side 1: through, both ways (the reply side rides the state).
    let listen = format!(
        "ip netns exec {} timeout 20 socat -u TCP-LISTEN:5001,reuseaddr SYSTEM:'cat > /dev/null; echo done'",
        r.ns[1]
    );
    let mut srv = Command::new("sh").arg("-c").arg(&listen).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let (ok, out) = r.exec(
        0,
        "sh -c 'head -c 1000000 /dev/zero | timeout 20 socat -u - TCP:198.18.2.2:5001'",
    );
    assert!(ok, "side 1 to side 2 through the firewall: {out}");
    let _ = srv.wait();
    // TCP from side 2: refused at once by the router's reset.
    let (ok, out) = r.exec(1, "timeout 5 socat -u - TCP:198.18.1.2:5001 < /dev/null");
    assert!(!ok && out.contains("Connection refused"), "{out}");
    r.stop();
    let _ = std::fs::remove_file(&rules);
    let rule = |n: &str| -> u64 {
        r.output
            .iter()
            .filter_map(|l| l.strip_prefix("ipfw: "))
            .find(|l| l.starts_with(n))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("rule {n}: {:?}", r.output))
    };
    // A routed packet meets the rules twice, arriving and leaving.
    assert_eq!(rule("00300"), 12, "3 echoes and 3 replies, in and out");
    assert!(rule("00200") > 600, "1 MB both ways through the TCP state");
    assert_eq!(rule("00500"), 1, "one SYN refused");
    assert!(rule("00600") >= 2, "side 2's pings dropped");
}

#[test]
fn an_offload_router_passes_on_what_linux_hands_it_whole() {
    // With `--offload` the kernel hands the router TCP segments of up to 64 KiB (the
    // virtio-net header's GSO), Don't Fragment set. Forwarded onto the 1280-byte
    // link they must not draw "fragmentation needed" for a size the sender never
    // put on any wire: they leave whole for the next TAP to cut (its `gso_size`,
    // the sender's MSS, which the receiver behind the 1280-byte link chose, fits),
    // or, where it would not fit, cut by the router (software segmentation, as
    // Linux does for a GRO packet it forwards; `sim` tests that case).
    skip_unless!("ip", "socat", "sha256sum");
    let mut r = Routed::start_with("o", 1, &["--offload"]);
    r.transfers_through("the offload router");
    let c = r.stop();
    for v in ["ip", "ip6"] {
        let get = |k: &str| c.get(&format!("{v}.{k}")).copied().unwrap_or(0);
        assert!(
            get("tso") + get("swgso") > 0,
            "large segments were forwarded whole or cut ({v}): {c:?}"
        );
    }
    assert_eq!(c.get("ip6.toobig").copied().unwrap_or(0), 0, "{c:?}");
    assert_eq!(
        c.get("ip.toobig").copied().unwrap_or(0),
        0,
        "no fragmentation-needed for a segment cut in software: {c:?}"
    );
    assert_eq!(c.get("ip.fragmented").copied().unwrap_or(0), 0, "{c:?}");
}
