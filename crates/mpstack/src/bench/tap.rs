//! `bench tcp`'s rows over a real TAP with the Linux kernel as the peer: an mpstack
//! stack in this process on a TAP (virtio-net header, checksum and segmentation
//! offload, as `mpstack run --offload`), the TAP moved into a namespace of its own,
//! and a thread of this process inside that namespace (`setns`) as the kernel's TCP
//! end, writing from or reading into a buffer as iperf3 does, with no pipe and no
//! hashing in the way. `tap-in` is Linux → mpstack, `tap-out` mpstack → Linux; each
//! is timed from the sender's first write until the receiver has every byte and the
//! end of the stream.
//!
//! Owns the namespace `mpb-t-<pid>` (the TAP goes with it) and deletes it when its
//! [`TapLab`] is dropped. Only 198.18.3.1/24 (Linux) and 198.18.3.2/24 (mpstack).

use super::{drain, pump, Measurement};
use net::{IfConfig, Stack, StackConfig};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LINUX_ADDR: &str = "198.18.3.1/24";
const LINUX_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 3, 1);
const OUR_ADDR: &str = "198.18.3.2/24";
const OUR_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 3, 2);
const PORT: u16 = 5001;

/// Why the TAP rows cannot run here; printed as `skipped: <reason>`.
pub fn unavailable() -> Option<String> {
    if !mpstack::host::is_root() {
        return Some("not root (needs a TAP and a network namespace)".into());
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Some("no /dev/net/tun".into());
    }
    if !mpstack::host::on_path("ip") {
        return Some("ip missing".into());
    }
    None
}

pub(super) fn ip(args: &[&str]) -> Result<(), String> {
    let o = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        ))
    }
}

/// A namespace holding the TAP of a running stack; dropping it stops the stack and
/// deletes the namespace.
pub struct TapLab {
    ns: String,
    stack: Option<Stack>,
    offload: bool,
}

impl TapLab {
    /// A stack with `workers` workers on a new TAP (with the virtio-net header's
    /// offloads, or plain), the TAP in a new namespace with Linux's address on it.
    pub fn new(workers: usize, offload: bool) -> Result<TapLab, String> {
        let pid = std::process::id();
        let tag = if offload { "o" } else { "p" };
        let ns = format!("mpb-t{tag}-{pid}");
        let tap = format!("mpbt{tag}{}", pid % 100_000);
        let _ = ip(&["netns", "del", &ns]);
        ip(&["netns", "add", &ns])?;
        let mut lab = TapLab {
            ns,
            stack: None,
            offload,
        };
        let dev = if offload {
            dev::tap::TapDevice::open_with_offload(&tap, workers)
        } else {
            dev::tap::TapDevice::open(&tap, workers)
        }
        .map_err(|e| format!("TAP {tap}: {e}"))?;
        let mut s = Stack::new(StackConfig {
            name: "bench-tap".into(),
            workers,
            ..StackConfig::default()
        });
        s.add_interface(
            Box::new(dev),
            IfConfig {
                addrs: vec![OUR_ADDR.parse().map_err(|e| format!("{e}"))?],
                ..IfConfig::default()
            },
        )
        .map_err(|e| e.to_string())?;
        s.start().map_err(|e| e.to_string())?;
        lab.stack = Some(s);
        let ns = lab.ns.clone();
        ip(&["link", "set", &tap, "netns", &ns])?;
        ip(&["-n", &ns, "addr", "add", LINUX_ADDR, "dev", &tap])?;
        ip(&["-n", &ns, "link", "set", &tap, "up"])?;
        ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        Ok(lab)
    }

    fn stack(&self) -> Result<&Stack, String> {
        self.stack.as_ref().ok_or_else(|| "no stack".to_string())
    }

    /// Linux → mpstack: `bytes` bytes from a kernel socket in the namespace to a
    /// listener of ours.
    pub fn inbound(&self, bytes: u64) -> Result<Measurement, String> {
        let l = self
            .stack()?
            .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT), 4)
            .map_err(|e| e.to_string())?;
        let ns = self.ns.clone();
        let sender = std::thread::spawn(move || -> Result<Instant, String> {
            dev::netns::enter(&ns).map_err(|e| format!("setns {ns}: {e}"))?;
            let c = connect_retrying(SocketAddrV4::new(OUR_IP, PORT))?;
            let t0 = Instant::now();
            pump(&c, bytes).map_err(|e| format!("Linux write: {e}"))?;
            c.shutdown(std::net::Shutdown::Write)
                .map_err(|e| e.to_string())?;
            Ok(t0)
        });
        let (c, _) = l.accept().map_err(|e| format!("accept: {e}"))?;
        c.set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(|e| e.to_string())?;
        let got = drain(&c).map_err(|e| format!("read: {e}"))?;
        let end = Instant::now();
        let t0 = sender
            .join()
            .map_err(|_| "Linux sender panicked".to_string())??;
        let secs = end.duration_since(t0).as_secs_f64();
        if got != bytes {
            return Err(format!("tap-in: mpstack received {got} of {bytes} bytes"));
        }
        Ok(Measurement {
            name: if self.offload {
                "tap-in"
            } else {
                "tap-in-plain"
            },
            bytes,
            secs,
        })
    }

    /// mpstack → Linux: `bytes` bytes from a connection of ours to a kernel listener
    /// in the namespace.
    pub fn outbound(&self, bytes: u64) -> Result<Measurement, String> {
        let ns = self.ns.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let receiver = std::thread::spawn(move || -> Result<(u64, Instant), String> {
            dev::netns::enter(&ns).map_err(|e| format!("setns {ns}: {e}"))?;
            let l = std::net::TcpListener::bind(SocketAddrV4::new(LINUX_IP, PORT))
                .map_err(|e| format!("Linux listen: {e}"))?;
            let _ = ready_tx.send(());
            let (c, _) = l.accept().map_err(|e| format!("Linux accept: {e}"))?;
            c.set_read_timeout(Some(Duration::from_secs(30)))
                .map_err(|e| e.to_string())?;
            let got = drain(&c).map_err(|e| format!("Linux read: {e}"))?;
            Ok((got, Instant::now()))
        });
        ready_rx
            .recv_timeout(Duration::from_secs(10))
            .map_err(|_| "the Linux listener did not start".to_string())?;
        let c = self
            .stack()?
            .tcp_connect(
                SocketAddrV4::new(LINUX_IP, PORT),
                Some(Duration::from_secs(10)),
            )
            .map_err(|e| format!("connect: {e}"))?;
        c.set_write_timeout(Some(Duration::from_secs(30)))
            .map_err(|e| e.to_string())?;
        let t0 = Instant::now();
        pump(&c, bytes).map_err(|e| format!("write: {e}"))?;
        c.shutdown(std::net::Shutdown::Write)
            .map_err(|e| e.to_string())?;
        let (got, end) = receiver
            .join()
            .map_err(|_| "Linux receiver panicked".to_string())??;
        let secs = end.duration_since(t0).as_secs_f64();
        if got != bytes {
            return Err(format!("tap-out: Linux received {got} of {bytes} bytes"));
        }
        Ok(Measurement {
            name: if self.offload {
                "tap-out"
            } else {
                "tap-out-plain"
            },
            bytes,
            secs,
        })
    }
}

/// Connects, trying again while the address is not yet reachable (ARP, the link
/// coming up) for up to 10 s.
pub(super) fn connect_retrying(to: SocketAddrV4) -> Result<std::net::TcpStream, String> {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        match std::net::TcpStream::connect_timeout(&to.into(), Duration::from_secs(2)) {
            Ok(c) => return Ok(c),
            Err(e) if Instant::now() >= until => return Err(format!("Linux connect: {e}")),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

impl Drop for TapLab {
    fn drop(&mut self) {
        if let Some(mut s) = self.stack.take() {
            s.stop();
        }
        let _ = ip(&["netns", "del", &self.ns]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_directions_deliver_every_byte_and_clean_up() {
        if let Some(why) = unavailable() {
            eprintln!("skipped: {why}");
            return;
        }
        for (offload, names) in [
            (true, ("tap-in", "tap-out")),
            (false, ("tap-in-plain", "tap-out-plain")),
        ] {
            let ns;
            {
                let lab = TapLab::new(1, offload).unwrap();
                ns = lab.ns.clone();
                for _ in 0..2 {
                    let m = lab.inbound(4 << 20).unwrap();
                    assert_eq!((m.name, m.bytes), (names.0, 4 << 20));
                    let m = lab.outbound(4 << 20).unwrap();
                    assert_eq!((m.name, m.bytes), (names.1, 4 << 20));
                    assert!(m.secs > 0.0);
                }
            }
            let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
            assert!(
                !String::from_utf8_lossy(&list.stdout).contains(&ns),
                "namespace {ns} left behind"
            );
        }
    }
}
