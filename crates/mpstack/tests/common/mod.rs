//! What the interop and robustness tests share: a network namespace with an
//! `mpstack run` node's TAP inside (`Lab`), shell helpers, and the skip rules (root,
//! /dev/net/tun, the tools). Addresses are from 198.18.0.0/15 only.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub use mpstack::host::is_root;

/// True if `tool` is on the PATH.
pub fn have(tool: &str) -> bool {
    mpstack::host::on_path(tool)
}

pub fn skip_reason(tools: &[&str]) -> Option<String> {
    if !is_root() {
        return Some("not root (interop tests create namespaces and TAP devices)".into());
    }
    if !Path::new("/dev/net/tun").exists() {
        return Some("no /dev/net/tun".into());
    }
    for t in tools {
        if !have(t) {
            return Some(format!(
                "'{t}' is not installed (the README's test command installs it)"
            ));
        }
    }
    None
}

/// Says why `what` cannot run, or fails it in CI (`CI` set: CI runs as root with
/// the README's test command's packages, so a test that cannot run there is a
/// broken test, not a skipped one).
pub fn skip(what: &str, why: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "{what} cannot run in CI: {why}"
    );
    eprintln!("SKIPPED {what}: {why}");
}

#[macro_export]
macro_rules! skip_unless {
    ($($tool:expr),*) => {
        if let Some(why) = skip_reason(&[$($tool),*]) {
            skip(module_path!(), &why);
            return;
        }
    };
}

/// Runs `cmd`: whether it succeeded, and its standard output then error.
pub fn output(cmd: &mut Command) -> (bool, String) {
    let o = cmd.output().expect("run a command");
    let mut s = String::from_utf8_lossy(&o.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&o.stderr));
    (o.status.success(), s)
}

pub fn sh(cmd: &str) -> (bool, String) {
    output(Command::new("sh").arg("-c").arg(cmd))
}

/// `sh`, which must succeed.
pub fn run(c: &str) {
    let (ok, out) = sh(c);
    assert!(ok, "{c}: {out}");
}

/// A network namespace with the node's TAP inside, deleted on drop.
pub struct Lab {
    pub tag: String,
    pub ns: String,
    pub tap: String,
    pub node: Option<Child>,
    pub lines: mpsc::Receiver<String>,
    pub output: Vec<String>,
    pub mac: String,
}

impl Lab {
    pub fn start(tag: &str, workers: u16) -> Lab {
        Lab::start_with(tag, workers, &[])
    }

    /// Like `start`, with more arguments for `mpstack run`.
    pub fn start_with(tag: &str, workers: u16, extra: &[&str]) -> Lab {
        Lab::start_as(tag, workers, extra, &[], &[])
    }

    /// Like `start_with`, with the node run through `wrap` (a command and its
    /// arguments that end by running the rest, such as `setpriv … sh -c 'umask
    /// 000; exec "$0" "$@"'`) and with `env` set.
    pub fn start_as(
        tag: &str,
        workers: u16,
        extra: &[&str],
        wrap: &[&str],
        env: &[(&str, &str)],
    ) -> Lab {
        let id = std::process::id() % 10000;
        let ns = format!("mpst-{tag}-{id}");
        let tap = format!("mp{tag}{id}");
        assert!(tap.len() <= 15);
        let _ = sh(&format!("ip netns del {ns} 2>/dev/null"));
        let www = www_dir(tag);
        std::fs::create_dir_all(&www).unwrap();
        let bin = env!("CARGO_BIN_EXE_mpstack");
        let mut cmd = Command::new(wrap.first().copied().unwrap_or(bin));
        if !wrap.is_empty() {
            cmd.args(&wrap[1..]).arg(bin);
        }
        cmd.envs(env.iter().copied());
        cmd.args([
            "run",
            "--tap",
            &tap,
            "--inet",
            "198.18.0.2/24",
            "--workers",
            &workers.to_string(),
            "--serve",
            &format!("echo,discard,chargen,http={}", www.display()),
        ])
        .args(extra);
        let (node, rx) = spawn_node(cmd);
        let mut lab = Lab {
            tag: tag.to_string(),
            ns,
            tap,
            node: Some(node),
            lines: rx,
            output: Vec::new(),
            mac: String::new(),
        };
        let up = lab.wait_line("up on", Duration::from_secs(20));
        let up = up.unwrap_or_else(|| panic!("mpstack did not come up: {:?}", lab.output));
        lab.mac = up.split(['(', ',']).nth(1).unwrap_or("").trim().to_string();
        for c in [
            format!("ip netns add {}", lab.ns),
            format!("ip link set {} netns {}", lab.tap, lab.ns),
            format!("ip -n {} link set lo up", lab.ns),
            format!("ip -n {} addr add 198.18.0.1/24 dev {}", lab.ns, lab.tap),
            format!("ip -n {} link set {} txqueuelen 10000", lab.ns, lab.tap),
            format!("ip -n {} link set {} up", lab.ns, lab.tap),
        ] {
            let (ok, out) = sh(&c);
            assert!(ok, "{c}: {out}");
        }
        lab
    }

    pub fn wait_line(&mut self, pat: &str, t: Duration) -> Option<String> {
        wait_line(&self.lines, &mut self.output, pat, t)
    }

    pub fn exec(&self, cmd: &str) -> (bool, String) {
        sh(&format!("ip netns exec {} {cmd}", self.ns))
    }

    /// Runs the Python `script` with `args` in the namespace: the child, its stdin,
    /// and its stdout line by line.
    pub fn python(
        &self,
        script: &str,
        args: &[String],
    ) -> (Child, std::process::ChildStdin, mpsc::Receiver<String>) {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.ns, "python3", "-c", script])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn python3 in the namespace");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        (child, stdin, lines)
    }

    /// The node's process id (panics once it has been stopped).
    pub fn pid(&self) -> u32 {
        self.node.as_ref().expect("the node is running").id()
    }

    /// The node's resident set size in KiB (`VmRSS` in /proc/PID/status).
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("read the node's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .expect("VmRSS in /proc status")
    }

    /// Whether the node is still running (it has neither exited nor been stopped).
    pub fn alive(&mut self) -> bool {
        self.node
            .as_mut()
            .is_some_and(|n| matches!(n.try_wait(), Ok(None)))
    }

    /// Stops the node with SIGTERM and returns its counters: name → value.
    pub fn stop(&mut self) -> std::collections::HashMap<String, u64> {
        stop_node(&mut self.node, &self.lines, &mut self.output)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        kill_node(&mut self.node);
        let _ = sh(&format!("ip netns del {} 2>/dev/null", self.ns));
        let _ = std::fs::remove_dir_all(www_dir(&self.tag));
    }
}

/// The directory a lab's HTTP service serves (created by `Lab::start`, removed on drop).
pub fn www_dir(tag: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("mpstack-www-{tag}-{}", std::process::id()))
}

/// Spawns an `mpstack` command with its stdout and stderr read line by line into a
/// channel (so a test can wait for a line and keep the output).
pub fn spawn_node(mut cmd: Command) -> (Child, mpsc::Receiver<String>) {
    let mut node = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mpstack");
    let (tx, rx) = mpsc::channel();
    for r in [
        Box::new(node.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(node.stderr.take().unwrap()),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(r).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
    }
    (node, rx)
}

/// Waits up to `t` for a line holding `pat`, keeping every line read in `output`.
pub fn wait_line(
    lines: &mpsc::Receiver<String>,
    output: &mut Vec<String>,
    pat: &str,
    t: Duration,
) -> Option<String> {
    let end = Instant::now() + t;
    while Instant::now() < end {
        match lines.recv_timeout(Duration::from_millis(100)) {
            Ok(l) => {
                output.push(l.clone());
                if l.contains(pat) {
                    return Some(l);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(_) => return None,
        }
    }
    None
}

/// Stops a node with SIGTERM (it must exit cleanly within 10 s), reads the rest of
/// its output, and returns its counters: `value name` lines as name → value.
pub fn stop_node(
    node: &mut Option<Child>,
    lines: &mpsc::Receiver<String>,
    output: &mut Vec<String>,
) -> std::collections::HashMap<String, u64> {
    if let Some(mut node) = node.take() {
        let _ = sh(&format!("kill -TERM {}", node.id()));
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(st)) = node.try_wait() {
                assert!(st.success(), "mpstack exited with {st}");
                break;
            }
            assert!(Instant::now() < end, "mpstack did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    while let Ok(l) = lines.recv_timeout(Duration::from_millis(300)) {
        output.push(l);
    }
    let mut m = std::collections::HashMap::new();
    for l in output.iter() {
        let mut it = l.split_whitespace();
        if let (Some(v), Some(name), None) = (it.next(), it.next(), it.next()) {
            if let Ok(v) = v.parse::<u64>() {
                m.insert(name.to_string(), v);
            }
        }
    }
    m
}

/// Ends a node that is still running (a test that failed half-way).
pub fn kill_node(node: &mut Option<Child>) {
    if let Some(mut n) = node.take() {
        let _ = sh(&format!("kill -TERM {}", n.id()));
        std::thread::sleep(Duration::from_millis(200));
        let _ = n.kill();
        let _ = n.wait();
    }
}

/// `mb` MB of random bytes over TCP with socat from namespace `from_ns` to `dst`
/// (port 5001, listened on in namespace `to_ns`), the SHA-256 of both ends
/// compared; `tmp` holds the files, `what` names the case in failures. Waits until
/// the listener listens (a loaded machine may take a while).
pub fn socat_transfer(from_ns: &str, to_ns: &str, dst: &str, mb: u32, tmp: &Path, what: &str) {
    let send = tmp.join("send");
    let recv = tmp.join("recv");
    let (ok, out) = sh(&format!(
        "head -c {} /dev/urandom > {}",
        u64::from(mb) * 1_000_000,
        send.display()
    ));
    assert!(ok, "{out}");
    let _ = std::fs::remove_file(&recv);
    let listen = format!(
        "ip netns exec {to_ns} timeout 60 socat -u TCP-LISTEN:5001,reuseaddr OPEN:{},creat,trunc",
        recv.display()
    );
    let mut srv = Command::new("sh").arg("-c").arg(&listen).spawn().unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        let (_, out) = sh(&format!("ip netns exec {to_ns} ss -ltnH sport = :5001"));
        if out.contains("5001") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let (ok, out) = sh(&format!(
        "ip netns exec {from_ns} timeout 60 socat -u OPEN:{} TCP:{dst}:5001",
        send.display()
    ));
    assert!(ok, "{what}: socat to {dst}: {out}");
    assert!(srv.wait().unwrap().success(), "{what}: listener");
    let (_, x) = sh(&format!("sha256sum < {}", send.display()));
    let (_, y) = sh(&format!("sha256sum < {}", recv.display()));
    assert_eq!(x, y, "{what}: SHA-256 to {dst}");
}

/// `out` ends with two `sha256sum` lines (what arrived, what was sent): they agree.
/// `what` is the message shown when they do not, with `out`.
#[allow(dead_code)]
pub fn assert_same_sums(out: &str, what: &str) {
    let sums: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(sums.len() == 2 && sums[0] == sums[1], "{what}: {out}");
}
