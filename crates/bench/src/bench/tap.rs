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

use super::veth::Netns;
use super::{drain, pump, send_over, Measurement};
use net::{IfConfig, Stack, StackConfig};
use std::net::{Ipv4Addr, SocketAddrV4};
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

fn ip(args: &[&str]) -> Result<(), String> {
    super::veth::run_ok(&[&["ip"], args].concat())
}

/// The two directions a TAP row measures, for `bench tcp` to run mpstack's and
/// smoltcp's labs alike.
pub trait TapRows {
    /// Linux → the stack under test.
    fn inbound(&self, bytes: u64) -> Result<Measurement, String>;
    /// The stack under test → Linux.
    fn outbound(&self, bytes: u64) -> Result<Measurement, String>;
}

/// A thread of a Linux end, and what it returns.
pub(super) type LinuxEnd<T> = std::thread::JoinHandle<Result<T, String>>;

impl Netns {
    /// Moves the TAP `tap` into the namespace and gives it `linux_addr` there.
    pub(super) fn adopt(&self, tap: &str, linux_addr: &str) -> Result<(), String> {
        let ns = &self.0;
        ip(&["link", "set", tap, "netns", ns])?;
        ip(&["-n", ns, "addr", "add", linux_addr, "dev", tap])?;
        ip(&["-n", ns, "link", "set", tap, "up"])?;
        ip(&["-n", ns, "link", "set", "lo", "up"])
    }

    /// Linux's sending end: a thread in the namespace that connects to `to`, writes
    /// `bytes` bytes and shuts down; it returns when it started writing.
    pub(super) fn sender(&self, to: SocketAddrV4, bytes: u64) -> LinuxEnd<Instant> {
        let ns = self.0.clone();
        std::thread::spawn(move || {
            dev::netns::enter(&ns).map_err(|e| format!("setns {ns}: {e}"))?;
            let c = connect_retrying(to)?;
            let t0 = Instant::now();
            pump(&c, bytes).map_err(|e| format!("Linux write: {e}"))?;
            c.shutdown(std::net::Shutdown::Write)
                .map_err(|e| e.to_string())?;
            Ok(t0)
        })
    }

    /// Linux's receiving end: a thread in the namespace listening on `at` (listening
    /// when this returns) that reads one connection to its end; it returns the
    /// bytes read and when the end came.
    pub(super) fn receiver(&self, at: SocketAddrV4) -> Result<LinuxEnd<(u64, Instant)>, String> {
        let ns = self.0.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let h = std::thread::spawn(move || {
            dev::netns::enter(&ns).map_err(|e| format!("setns {ns}: {e}"))?;
            let l = std::net::TcpListener::bind(at).map_err(|e| format!("Linux listen: {e}"))?;
            let _ = ready_tx.send(());
            let (c, _) = l.accept().map_err(|e| format!("Linux accept: {e}"))?;
            c.set_read_timeout(Some(Duration::from_secs(30)))
                .map_err(|e| e.to_string())?;
            let got = drain(&c).map_err(|e| format!("Linux read: {e}"))?;
            Ok((got, Instant::now()))
        });
        match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(()) => Ok(h),
            // The thread's own error says why, if it has one.
            Err(_) => Err(joined(h, "Linux receiver")
                .err()
                .unwrap_or_else(|| "the Linux listener did not start".into())),
        }
    }
}

/// A Linux end's result.
pub(super) fn joined<T>(h: LinuxEnd<T>, who: &str) -> Result<T, String> {
    h.join().map_err(|_| format!("{who} panicked"))?
}

/// Row `name`'s measurement, from the sender's first write (`t0`) to the receiver's
/// end of stream (`end`), once the receiver (`who`) has all `bytes`.
pub(super) fn measured(
    name: &'static str,
    who: &str,
    got: u64,
    bytes: u64,
    t0: Instant,
    end: Instant,
) -> Result<Measurement, String> {
    if got != bytes {
        return Err(format!("{name}: {who} received {got} of {bytes} bytes"));
    }
    Ok(Measurement {
        name,
        bytes,
        secs: end.duration_since(t0).as_secs_f64(),
    })
}

/// A namespace holding the TAP of a running stack; dropping it stops the stack and
/// deletes the namespace.
pub struct TapLab {
    stack: Option<Stack>,
    ns: Netns,
    /// Its rows' names, in and out: with offloads, or `-plain`.
    names: (&'static str, &'static str),
}

impl TapLab {
    /// A stack with `workers` workers on a new TAP (with the virtio-net header's
    /// offloads, or plain), the TAP in a new namespace with Linux's address on it.
    pub fn new(workers: usize, offload: bool) -> Result<TapLab, String> {
        let pid = std::process::id();
        let tag = if offload { "o" } else { "p" };
        let ns = Netns::new(format!("mpb-t{tag}-{pid}"))?;
        let tap = format!("mpbt{tag}{}", pid % 100_000);
        let dev = dev::tap::TapDevice::open_with(&tap, workers, offload)
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
        let lab = TapLab {
            stack: Some(s),
            ns,
            names: if offload {
                ("tap-in", "tap-out")
            } else {
                ("tap-in-plain", "tap-out-plain")
            },
        };
        lab.ns.adopt(&tap, LINUX_ADDR)?;
        Ok(lab)
    }

    fn stack(&self) -> Result<&Stack, String> {
        self.stack.as_ref().ok_or_else(|| "no stack".to_string())
    }
}

impl TapRows for TapLab {
    /// Linux → mpstack: `bytes` bytes from a kernel socket in the namespace to a
    /// listener of ours.
    fn inbound(&self, bytes: u64) -> Result<Measurement, String> {
        let l = self
            .stack()?
            .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT), 4)
            .map_err(|e| e.to_string())?;
        let sender = self.ns.sender(SocketAddrV4::new(OUR_IP, PORT), bytes);
        let (c, _) = l.accept().map_err(|e| format!("accept: {e}"))?;
        c.set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(|e| e.to_string())?;
        let got = drain(&c).map_err(|e| format!("read: {e}"))?;
        let end = Instant::now();
        let t0 = joined(sender, "Linux sender")?;
        measured(self.names.0, "mpstack", got, bytes, t0, end)
    }

    /// mpstack → Linux: `bytes` bytes from a connection of ours to a kernel listener
    /// in the namespace.
    fn outbound(&self, bytes: u64) -> Result<Measurement, String> {
        let receiver = self.ns.receiver(SocketAddrV4::new(LINUX_IP, PORT))?;
        let (_c, t0) = send_over(
            self.stack()?,
            SocketAddrV4::new(LINUX_IP, PORT),
            bytes,
            super::Api::Copy,
        )?;
        let (got, end) = joined(receiver, "Linux receiver")?;
        measured(self.names.1, "Linux", got, bytes, t0, end)
    }
}

/// Connects, trying again while the address is not yet reachable (ARP, the link
/// coming up) for up to 10 s.
fn connect_retrying(to: SocketAddrV4) -> Result<std::net::TcpStream, String> {
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
        // The stack (and its TAP) first, then the namespace (a field, after this).
        if let Some(mut s) = self.stack.take() {
            s.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_directions_deliver_every_byte_and_clean_up() {
        // Its buffers come and go: not while the idle test counts the heap.
        let _quiet = crate::bench::heap_quiet();
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
                ns = lab.ns.0.clone();
                for _ in 0..2 {
                    let m = lab.inbound(4 << 20).unwrap();
                    assert_eq!((m.name, m.bytes), (names.0, 4 << 20));
                    let m = lab.outbound(4 << 20).unwrap();
                    assert_eq!((m.name, m.bytes), (names.1, 4 << 20));
                    assert!(m.secs > 0.0);
                }
            }
            let list = std::process::Command::new("ip")
                .args(["netns", "list"])
                .output()
                .unwrap();
            assert!(
                !String::from_utf8_lossy(&list.stdout).contains(&ns),
                "namespace {ns} left behind"
            );
        }
    }
}
