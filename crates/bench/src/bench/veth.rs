//! The Linux peer of `mpstack bench tcp` over a real link: the kernel's TCP between two
//! network namespaces joined by a veth pair (MTU 1500, like the mpstack memory wire),
//! measured by iperf3 with the same workload (one connection, N bytes client to server).
//!
//! Owns the namespaces `mpb-a-<pid>` and `mpb-b-<pid>` (and so the veth pair inside
//! them) and the iperf3 processes it starts; a [`Lab`] guard deletes the namespaces
//! when it is dropped, on every path. Only 198.18.1.1/24 and 198.18.1.2/24 are used.

use super::Measurement;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const CLIENT_ADDR: &str = "198.18.1.1/24";
const SERVER_ADDR: &str = "198.18.1.2/24";
const SERVER_IP: &str = "198.18.1.2";

/// Why the veth row cannot run here; printed as `skipped: <reason>`.
pub fn unavailable() -> Option<String> {
    if !mpstack::host::is_root() {
        return Some("not root (needs to create network namespaces)".into());
    }
    for tool in ["ip", "iperf3"] {
        if !mpstack::host::on_path(tool) {
            return Some(format!("{tool} missing"));
        }
    }
    None
}

fn run(args: &[&str]) -> Result<Output, String> {
    Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", args.join(" ")))
}

pub(super) fn run_ok(args: &[&str]) -> Result<(), String> {
    let o = run(args)?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        ))
    }
}

/// A network namespace made for a lab (an old one of the same name is removed
/// first); deleted, with the devices moved into it, when dropped.
#[derive(Debug)]
pub(super) struct Netns(pub(super) String);

impl Netns {
    pub(super) fn new(name: String) -> Result<Netns, String> {
        let _ = run(&["ip", "netns", "del", &name]);
        run_ok(&["ip", "netns", "add", &name])?;
        Ok(Netns(name))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run(&["ip", "netns", "del", &self.0]);
    }
}

/// Two namespaces joined by a veth pair; dropping it deletes both (and the pair).
#[derive(Debug)]
pub struct Lab {
    client: Netns,
    server: Netns,
}

impl Lab {
    pub fn new() -> Result<Lab, String> {
        let pid = std::process::id();
        let lab = Lab {
            client: Netns::new(format!("mpb-a-{pid}"))?,
            server: Netns::new(format!("mpb-b-{pid}"))?,
        };
        // Both ends are created inside their namespaces, so nothing appears in the
        // caller's namespace even for a moment, and the short names cannot collide.
        let (a, b) = (&lab.client.0, &lab.server.0);
        run_ok(&[
            "ip", "link", "add", "va", "netns", a, "mtu", "1500", "type", "veth", "peer", "name",
            "vb", "netns", b, "mtu", "1500",
        ])?;
        for (ns, dev, addr) in [(a, "va", CLIENT_ADDR), (b, "vb", SERVER_ADDR)] {
            run_ok(&["ip", "-n", ns, "addr", "add", addr, "dev", dev])?;
            run_ok(&["ip", "-n", ns, "link", "set", dev, "up"])?;
            run_ok(&["ip", "-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(lab)
    }

    /// One iperf3 run of `bytes` bytes; the figure is the receiver's, as iperf3's
    /// client reports it in `end.sum_received`.
    pub fn iperf3(&self, bytes: u64) -> Result<Measurement, String> {
        let server = Proc(
            Command::new("ip")
                .args(["netns", "exec", &self.server.0])
                .args(["iperf3", "-s", "-1", "-B", SERVER_IP])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("iperf3 -s: {e}"))?,
        );
        let limit = Duration::from_secs(30 + bytes / (10 << 20));
        let n = bytes.to_string();
        let client = [
            "ip",
            "netns",
            "exec",
            &self.client.0,
            "iperf3",
            "-c",
            SERVER_IP,
            "-n",
            &n,
            "-J",
        ];
        // The server needs a moment to listen; a refused connection does not use up
        // its one test (`-1`), so the client simply tries again.
        let started = Instant::now();
        let json = loop {
            let out = run_with_limit(&client, limit)?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            // iperf3 3.12 with -J exits 0 even when it could not connect: its JSON's
            // "error" is what says so.
            let error = json_str(&text, "error");
            if out.status.success() && error.is_none() {
                break text;
            }
            let why = error.unwrap_or_else(|| {
                let stderr = String::from_utf8_lossy(&out.stderr);
                format!("{} {}", text.trim(), stderr.trim())
            });
            if started.elapsed() > Duration::from_secs(5) || !why.contains("refused") {
                return Err(format!("iperf3 -c: {why}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        drop(server);
        let received = json
            .find("\"sum_received\"")
            .map(|at| &json[at..])
            .ok_or("iperf3: no sum_received in its JSON")?;
        let num = |key| json_num(received, key).ok_or(format!("iperf3: no {key} in sum_received"));
        let (got, bps) = (num("bytes")? as u64, num("bits_per_second")?);
        // iperf3's receiver stops counting when the client's end-of-test message comes
        // in on the control connection, which can overtake the last data still queued
        // (seen: 3.3 of 4 MiB in a 4 MiB test; all bytes at 64 MiB). So it may count
        // fewer bytes than were sent, and its rate is over the bytes it counted. It
        // may also count a little more: the client sends whole blocks (128 KiB), so
        // the last one can run past `-n` (seen: 268,565,776 for 268,435,456).
        if got == 0 || got > bytes + (1 << 20) || bps <= 0.0 {
            return Err(format!(
                "iperf3 receiver counted {got} of {bytes} bytes at {bps} bit/s"
            ));
        }
        // The receiver's rate is the figure; its time follows from it, so that the
        // table's seconds and Gbit/s agree.
        Ok(Measurement {
            name: "linux-veth",
            bytes: got,
            secs: got as f64 * 8.0 / bps,
        })
    }
}

/// A child process that is ended (by its own PID) and reaped when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// Runs a command to completion, ending it if it outlasts `limit`. Its output goes to
/// pipes read by threads, so a chatty child cannot block on a full pipe.
fn run_with_limit(args: &[&str], limit: Duration) -> Result<Output, String> {
    let mut child = Proc(
        Command::new(args[0])
            .args(&args[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{}: {e}", args[0]))?,
    );
    let read_all = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = read_all(Box::new(child.0.stdout.take().expect("piped")));
    let err = read_all(Box::new(child.0.stderr.take().expect("piped")));
    let t0 = Instant::now();
    let status = loop {
        match child.0.try_wait().map_err(|e| e.to_string())? {
            Some(s) => break s,
            None if t0.elapsed() > limit => {
                return Err(format!("`{}` ran longer than {limit:?}", args.join(" ")))
            }
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    Ok(Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

/// The number after the first `"key":` in `json` — enough for iperf3's output, whose
/// keys of interest are unique within the object we start from.
fn json_num(json: &str, key: &str) -> Option<f64> {
    let pat = format!("\"{key}\"");
    let rest = json[json.find(&pat)? + pat.len()..].trim_start();
    let rest = rest.strip_prefix(':')?.trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E')))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// The string after the first `"key":` in `json` (no escapes expected: iperf3 errors).
fn json_str(json: &str, key: &str) -> Option<String> {
    let pat = format!("\"{key}\"");
    let rest = json[json.find(&pat)? + pat.len()..].trim_start();
    let rest = rest.strip_prefix(':')?.trim_start().strip_prefix('"')?;
    Some(rest[..rest.find('"')?].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trimmed from a real `iperf3 -c ... -n 4194304 -J` run.
    const IPERF3: &str = r#"{
	"end":	{
		"sum_sent":	{
			"start":	0,
			"end":	0.012,
			"seconds":	0.012,
			"bytes":	4194304,
			"bits_per_second":	2796202666.6,
			"retransmits":	0,
			"sender":	true
		},
		"sum_received":	{
			"start":	0,
			"end":	0.0135,
			"seconds":	0.0135,
			"bytes":	4194304,
			"bits_per_second":	2.4855134814814816e+09,
			"sender":	true
		}
	}
}"#;

    #[test]
    fn iperf3_receiver_figures_are_read_from_sum_received() {
        let r = &IPERF3[IPERF3.find("\"sum_received\"").unwrap()..];
        assert_eq!(json_num(r, "bytes"), Some(4194304.0));
        assert_eq!(json_num(r, "seconds"), Some(0.0135));
        assert_eq!(json_num(r, "bits_per_second"), Some(2.4855134814814816e9));
        assert_eq!(json_num(r, "missing"), None);
    }

    #[test]
    fn iperf3_error_text_is_found() {
        // What iperf3 3.12 prints, with exit status 0, when the server is not up yet.
        let j = r#"{
	"start":	{
		"connected":	[],
		"version":	"iperf 3.12"
	},
	"intervals":	[],
	"end":	{
	},
	"error":	"unable to connect to server: Connection refused"
}"#;
        assert!(!j.contains("\"sum_received\""));
        assert_eq!(
            json_str(j, "error").as_deref(),
            Some("unable to connect to server: Connection refused")
        );
    }
}
