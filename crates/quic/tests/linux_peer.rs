//! quinn on mpstack against quinn on the Linux kernel's UDP: an mpstack stack in this
//! process on a TAP whose kernel end is in a network namespace of its own, and the
//! `quic-peer` binary (tokio's kernel sockets) run in that namespace. Both ways round:
//! an mpstack client to a Linux server, then a Linux client to an mpstack server; each
//! connection moves data in both directions, every byte checked against the pattern
//! (`xfer`). 8 MiB each way by default; 1 GiB each way with `MPSTACK_QUIC_FULL=1` or
//! `MPSTACK_INTEROP_FULL=1`.
//!
//! Needs root, /dev/net/tun and `ip`; skipped otherwise, and a failure instead of a
//! skip when `CI` is set (CI runs as root). Owns the namespace `mpq-<pid>` (the TAP
//! goes with it) and deletes it at the end. Addresses: 198.18.4.1/24 (Linux) and
//! 198.18.4.2/24 (mpstack) only.

use mpstack_quic::xfer;
use net::{IfConfig, Stack, StackConfig};
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

const LINUX_ADDR: &str = "198.18.4.1/24";
const LINUX_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 4, 1);
const OUR_ADDR: &str = "198.18.4.2/24";
const OUR_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 4, 2);
const PORT: u16 = 4433;
const PEER: &str = env!("CARGO_BIN_EXE_quic-peer");

fn full() -> bool {
    std::env::var_os("MPSTACK_QUIC_FULL").is_some()
        || std::env::var_os("MPSTACK_INTEROP_FULL").is_some()
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

/// Why the test cannot run here.
fn skip_reason() -> Option<String> {
    if !is_root() {
        return Some("not root (the test makes a namespace and a TAP)".into());
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Some("no /dev/net/tun".into());
    }
    if !on_path("ip") {
        return Some("'ip' is not installed".into());
    }
    None
}

fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        o.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The namespace, the stack on the TAP and the files; removed when dropped (the
/// namespace's deletion takes the TAP with it).
struct Lab {
    ns: String,
    dir: PathBuf,
    stack: Option<Stack>,
    peer: Option<Child>,
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(mut c) = self.peer.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        drop(self.stack.take());
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Lab {
    fn new(tag: &str) -> Lab {
        let pid = std::process::id();
        let ns = format!("mpq{tag}-{pid}");
        let tap = format!("mpq{tag}{}", pid % 100_000);
        let dir = std::env::temp_dir().join(format!("mpstack-quic-{tag}-{pid}"));
        let _ = Command::new("ip").args(["netns", "del", &ns]).output();
        ip(&["netns", "add", &ns]);
        let mut lab = Lab {
            ns: ns.clone(),
            dir,
            stack: None,
            peer: None,
        };
        std::fs::create_dir_all(&lab.dir).expect("a temporary directory");
        let dev = dev::tap::TapDevice::open(&tap, 1).expect("a TAP device");
        let mut s = Stack::new(StackConfig {
            name: "quic-tap".into(),
            workers: 1,
            socket_queue: mpstack_quic::lab::SOCKET_QUEUE,
            ..StackConfig::default()
        });
        s.add_interface(
            Box::new(dev),
            IfConfig {
                addrs: vec![OUR_ADDR.parse().expect("an address")],
                ..IfConfig::default()
            },
        )
        .expect("the TAP attached");
        s.start().expect("worker threads");
        lab.stack = Some(s);
        ip(&["link", "set", &tap, "netns", &ns]);
        ip(&["-n", &ns, "addr", "add", LINUX_ADDR, "dev", &tap]);
        ip(&["-n", &ns, "link", "set", &tap, "up"]);
        ip(&["-n", &ns, "link", "set", "lo", "up"]);
        lab
    }

    fn stack(&self) -> &Stack {
        self.stack.as_ref().expect("the stack")
    }

    /// Writes a fresh certificate and key for "localhost"; their paths.
    fn cert(&self) -> (Vec<u8>, Vec<u8>, String, String) {
        let (cert, key) = mpstack_quic::generate_cert("localhost").expect("a certificate");
        let (cp, kp) = (self.dir.join("cert.der"), self.dir.join("key.der"));
        std::fs::write(&cp, &cert).expect("write the certificate");
        std::fs::write(&kp, &key).expect("write the key");
        (
            cert,
            key,
            cp.display().to_string(),
            kp.display().to_string(),
        )
    }

    /// Runs `quic-peer ARGS` in the namespace, its output piped.
    fn spawn_peer(&mut self, args: &[&str]) -> &mut Child {
        let c = Command::new("ip")
            .args(["netns", "exec", &self.ns, PEER])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run quic-peer");
        self.peer.insert(c)
    }

    /// Waits for the peer to exit within `limit`; its standard output. Fails the test
    /// if it fails or takes longer (and kills it then).
    fn wait_peer(&mut self, limit: Duration) -> String {
        let mut c = self.peer.take().expect("a peer");
        let t0 = Instant::now();
        loop {
            match c.try_wait().expect("the peer's status") {
                Some(st) => {
                    let mut out = String::new();
                    if let Some(mut o) = c.stdout.take() {
                        let _ = std::io::Read::read_to_string(&mut o, &mut out);
                    }
                    assert!(st.success(), "quic-peer failed ({st}): {out}");
                    return out;
                }
                None if t0.elapsed() > limit => {
                    let _ = c.kill();
                    let _ = c.wait();
                    panic!("quic-peer did not finish in {limit:?}");
                }
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("a tokio runtime")
}

fn size() -> u64 {
    if full() {
        1 << 30
    } else {
        8 << 20
    }
}

fn limit() -> Duration {
    Duration::from_secs(if full() { 1500 } else { 120 })
}

fn report(what: &str, bytes: u64, secs: f64) {
    eprintln!(
        "{what}: {} MiB each way in {secs:.2} s ({:.0} Mbit/s both ways together)",
        bytes >> 20,
        2.0 * bytes as f64 * 8.0 / secs / 1e6
    );
}

#[test]
fn mpstack_client_and_linux_server_move_data_both_ways() {
    if let Some(why) = skip_reason() {
        assert!(
            std::env::var_os("CI").is_none(),
            "linux_peer cannot run in CI: {why}"
        );
        eprintln!("SKIPPED mpstack_client_and_linux_server_move_data_both_ways: {why}");
        return;
    }
    let mut lab = Lab::new("c");
    let (cert, _key, cp, kp) = lab.cert();
    let listen = format!("{LINUX_IP}:{PORT}");
    let child = lab.spawn_peer(&["server", &listen, &cp, &kp]);
    let mut out = BufReader::new(child.stdout.take().expect("the peer's output"));
    let mut line = String::new();
    out.read_line(&mut line).expect("the peer's first line");
    assert!(line.starts_with("listening on"), "quic-peer said {line:?}");
    let bytes = size();
    let rt = runtime();
    let secs = rt.block_on(async {
        let cc = mpstack_quic::client_config(&cert, mpstack_quic::bulk_transport())
            .expect("a client configuration");
        let sock = lab
            .stack()
            .udp_bind(SocketAddrV4::new(OUR_IP, 0))
            .expect("a UDP socket");
        let mut ep = mpstack_quic::endpoint(sock, quinn::EndpointConfig::default(), None)
            .expect("an endpoint");
        ep.set_default_client_config(cc);
        let job = async {
            let conn = ep
                .connect(
                    SocketAddr::V4(SocketAddrV4::new(LINUX_IP, PORT)),
                    "localhost",
                )
                .expect("a connection")
                .await
                .expect("the handshake");
            let t0 = Instant::now();
            xfer::client(&conn, bytes, bytes, 1, None)
                .await
                .expect("the transfer, byte-exact");
            let secs = t0.elapsed().as_secs_f64();
            conn.close(0u32.into(), b"done");
            secs
        };
        let secs = tokio::time::timeout(limit(), job)
            .await
            .expect("the transfer finished in time");
        ep.wait_idle().await;
        secs
    });
    lab.peer.as_mut().expect("a peer").stdout = Some(out.into_inner());
    let said = lab.wait_peer(Duration::from_secs(30));
    assert!(
        said.contains(&format!("served {bytes} bytes")),
        "quic-peer said {said:?}"
    );
    report("mpstack client -> Linux server", bytes, secs);
}

#[test]
fn linux_client_and_mpstack_server_move_data_both_ways() {
    if let Some(why) = skip_reason() {
        assert!(
            std::env::var_os("CI").is_none(),
            "linux_peer cannot run in CI: {why}"
        );
        eprintln!("SKIPPED linux_client_and_mpstack_server_move_data_both_ways: {why}");
        return;
    }
    let mut lab = Lab::new("s");
    let (cert, key, cp, _kp) = lab.cert();
    let bytes = size();
    let rt = runtime();
    let got = Arc::new(AtomicU64::new(0));
    let (secs, served) = rt.block_on(async {
        let sc = mpstack_quic::server_config(&cert, &key, mpstack_quic::bulk_transport())
            .expect("a server configuration");
        let sock = lab
            .stack()
            .udp_bind(SocketAddrV4::new(OUR_IP, PORT))
            .expect("a UDP socket");
        let ep = mpstack_quic::endpoint(sock, quinn::EndpointConfig::default(), Some(sc))
            .expect("an endpoint");
        let to = format!("{OUR_IP}:{PORT}");
        let (up, down) = (bytes.to_string(), bytes.to_string());
        lab.spawn_peer(&["client", &to, "localhost", &cp, &up, &down]);
        let job = async {
            let conn = ep
                .accept()
                .await
                .expect("an incoming connection")
                .await
                .expect("the handshake");
            let t0 = Instant::now();
            let n = xfer::serve(conn, Some(got.clone()))
                .await
                .expect("the transfer, byte-exact");
            (t0.elapsed().as_secs_f64(), n)
        };
        let r = tokio::time::timeout(limit(), job)
            .await
            .expect("the transfer finished in time");
        ep.wait_idle().await;
        r
    });
    assert_eq!(served, bytes);
    let said = lab.wait_peer(Duration::from_secs(30));
    assert!(
        said.contains(&format!("moved {bytes} up and {bytes} down")),
        "quic-peer said {said:?}"
    );
    report("Linux client -> mpstack server", bytes, secs);
}
