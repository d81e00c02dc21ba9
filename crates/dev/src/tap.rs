//! Linux TAP devices: an Ethernet link whose other end is the kernel.
//!
//! [`TapDevice::open`] attaches to the TAP of that name, creating it if it does not
//! exist (which needs root or `CAP_NET_ADMIN`). With more than one queue it asks for
//! a multi-queue TAP (`IFF_MULTI_QUEUE`) and opens one descriptor per queue; the
//! kernel spreads flows over them. Descriptors are non-blocking: `rx_burst` reads
//! until `EAGAIN` or the burst is full, `tx_burst` writes each frame with one
//! `writev` of its segments, counting a full kernel queue as `odrops`.
//!
//! A TAP created here lives as long as its descriptors (it is not persistent) and
//! may be moved into another network namespace while we hold it (`ip link set NAME
//! netns NS`), which is how the interop tests put mpstack on a link with a
//! namespace of their own.

use crate::{Device, DeviceInfo, Instant, Mbuf, Queue, QueueStats};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TAP: libc::c_short = 0x0002;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_MULTI_QUEUE: libc::c_short = 0x0100;
/// Largest frame read from a TAP (jumbo frames fit; GSO is not enabled).
const RX_BUF: usize = 65_536;
/// Most segments written in one `writev`; longer chains are gathered first.
const MAX_IOV: usize = 16;

/// The kernel's most queues for one TAP.
pub const MAX_QUEUES: usize = 256;

/// A TAP device with one descriptor per queue.
#[derive(Debug)]
pub struct TapDevice {
    name: String,
    fds: Vec<OwnedFd>,
    mtu: usize,
}

fn ifreq_for(name: &str) -> libc::ifreq {
    // SAFETY: ifreq is plain old data (bytes and a union of integers); all zeros is a
    // valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    req
}

fn validate_name(name: &str) -> io::Result<()> {
    let bad = |why: &str| {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad interface name '{name}': {why}"),
        ))
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name.len() >= libc::IFNAMSIZ {
        return bad(&format!("longer than {} bytes", libc::IFNAMSIZ - 1));
    }
    if name
        .bytes()
        .any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace() || b == 0)
        || name == "."
        || name == ".."
    {
        return bad("contains '/', ':', NUL or white space");
    }
    Ok(())
}

/// Adds the likely reason to an OS error from opening or attaching a TAP.
fn explain(e: io::Error, name: &str, queues: usize) -> io::Error {
    let why = match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ENODEV) => {
            "/dev/net/tun is missing: load the tun module (modprobe tun) or give the container the device".to_string()
        }
        Some(libc::EPERM) | Some(libc::EACCES) => {
            format!("permission denied: creating or attaching TAP '{name}' needs root or CAP_NET_ADMIN")
        }
        Some(libc::EBUSY) => format!("'{name}' is busy: another process holds it, or it exists as a TUN (not TAP) device"),
        Some(libc::EINVAL) => format!(
            "'{name}' exists but cannot be attached as a {}TAP: it is another kind of interface, or a TAP created {} multi-queue",
            if queues > 1 { "multi-queue " } else { "" },
            if queues > 1 { "without" } else { "with" }
        ),
        _ => return e,
    };
    io::Error::new(e.kind(), format!("{why} ({e})"))
}

impl TapDevice {
    /// Attaches to (or creates) the TAP `name` with `queues` queue pairs.
    pub fn open(name: &str, queues: usize) -> io::Result<TapDevice> {
        validate_name(name)?;
        if queues == 0 || queues > MAX_QUEUES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{queues} queues: a TAP has 1 to {MAX_QUEUES}"),
            ));
        }
        let path = CString::new("/dev/net/tun").expect("no NUL");
        let mut fds = Vec::with_capacity(queues);
        for _ in 0..queues {
            // SAFETY: `path` is a valid NUL-terminated string; the result is checked.
            let fd = unsafe {
                libc::open(
                    path.as_ptr(),
                    libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
                )
            };
            if fd < 0 {
                return Err(explain(io::Error::last_os_error(), name, queues));
            }
            // SAFETY: `fd` is a fresh descriptor nothing else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            let mut req = ifreq_for(name);
            let mut flags = IFF_TAP | IFF_NO_PI;
            if queues > 1 {
                flags |= IFF_MULTI_QUEUE;
            }
            req.ifr_ifru.ifru_flags = flags;
            // SAFETY: TUNSETIFF reads and writes one `struct ifreq`, which `req` is and
            // which outlives the call.
            let r = unsafe {
                libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut req as *mut libc::ifreq)
            };
            if r < 0 {
                return Err(explain(io::Error::last_os_error(), name, queues));
            }
            fds.push(fd);
        }
        let mtu = query_mtu(name).unwrap_or(1500);
        Ok(TapDevice {
            name: name.to_string(),
            fds,
            mtu,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the link up on the kernel side (best effort: the kernel side may already
    /// be in another namespace).
    pub fn set_up(&self) -> io::Result<()> {
        with_ctl_socket(|s| {
            let mut req = ifreq_for(&self.name);
            // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read/write one ifreq that outlives the calls.
            unsafe {
                if libc::ioctl(s, libc::SIOCGIFFLAGS as _, &mut req as *mut libc::ifreq) < 0 {
                    return Err(io::Error::last_os_error());
                }
                req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
                if libc::ioctl(s, libc::SIOCSIFFLAGS as _, &mut req as *mut libc::ifreq) < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        })
    }
}

fn with_ctl_socket<T>(f: impl FnOnce(RawFd) -> io::Result<T>) -> io::Result<T> {
    // SAFETY: plain socket(2) call; the result is checked and owned below.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `s` is a fresh descriptor nothing else owns.
    let s = unsafe { OwnedFd::from_raw_fd(s) };
    f(s.as_raw_fd())
}

fn query_mtu(name: &str) -> io::Result<usize> {
    with_ctl_socket(|s| {
        let mut req = ifreq_for(name);
        // SAFETY: SIOCGIFMTU writes one ifreq that outlives the call.
        let r = unsafe { libc::ioctl(s, libc::SIOCGIFMTU as _, &mut req as *mut libc::ifreq) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: after SIOCGIFMTU the union holds `ifru_mtu`.
        let mtu = unsafe { req.ifr_ifru.ifru_mtu };
        Ok(usize::try_from(mtu).unwrap_or(1500))
    })
}

impl Device for TapDevice {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            name: self.name.clone(),
            mtu: self.mtu,
            num_queues: self.fds.len(),
            hw_addr: None,
            offload: crate::Offloads::default(),
        }
    }
    fn into_queues(self: Box<Self>) -> Vec<Box<dyn Queue>> {
        let mtu = self.mtu;
        self.fds
            .into_iter()
            .enumerate()
            .map(|(i, fd)| {
                Box::new(TapQueue {
                    fd,
                    index: i as u16,
                    buf: vec![0u8; RX_BUF],
                    stats: QueueStats::default(),
                    mtu,
                }) as Box<dyn Queue>
            })
            .collect()
    }
}

/// One queue (descriptor) of a TAP.
pub struct TapQueue {
    fd: OwnedFd,
    index: u16,
    buf: Vec<u8>,
    stats: QueueStats,
    mtu: usize,
}

impl std::fmt::Debug for TapQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TapQueue")
            .field("fd", &self.fd)
            .field("index", &self.index)
            .finish()
    }
}

impl Queue for TapQueue {
    fn rx_burst(&mut self, _now: Instant, out: &mut Vec<Mbuf>, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            // SAFETY: reads at most `buf.len()` bytes into our own buffer.
            let r = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) => break,
                    Some(libc::EINTR) => continue,
                    _ => {
                        self.stats.ierrors += 1;
                        break;
                    }
                }
            }
            let len = r as usize;
            if len == 0 {
                break;
            }
            match Mbuf::from_slice(&self.buf[..len]) {
                Ok(mut m) => {
                    m.hdr.rxq = self.index;
                    self.stats.ipackets += 1;
                    self.stats.ibytes += len as u64;
                    out.push(m);
                    n += 1;
                }
                Err(_) => {
                    // No buffers: the frame is read and dropped, counted.
                    self.stats.idrops += 1;
                }
            }
        }
        n
    }

    fn tx_burst(&mut self, _now: Instant, pkts: &mut Vec<Mbuf>) -> usize {
        let mut accepted = 0;
        for m in pkts.drain(..) {
            let len = m.len();
            if len > self.mtu + 18 + 4 || len < 14 {
                self.stats.oerrors += 1;
                continue;
            }
            let mut iov = [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; MAX_IOV];
            let mut cnt = 0;
            let mut gathered;
            if m.nsegs() <= MAX_IOV {
                for s in m.segments() {
                    iov[cnt] = libc::iovec {
                        iov_base: s.as_ptr() as *mut libc::c_void,
                        iov_len: s.len(),
                    };
                    cnt += 1;
                }
            } else {
                gathered = m.to_vec();
                iov[0] = libc::iovec {
                    iov_base: gathered.as_mut_ptr().cast(),
                    iov_len: gathered.len(),
                };
                cnt = 1;
            }
            let r = loop {
                // SAFETY: the first `cnt` iovecs point into segments of `m` (or into
                // `gathered`), which stay alive and unmodified during the call;
                // writev only reads them.
                let r =
                    unsafe { libc::writev(self.fd.as_raw_fd(), iov.as_ptr(), cnt as libc::c_int) };
                if r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                break r;
            };
            if r < 0 {
                match io::Error::last_os_error().raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::ENOBUFS) => self.stats.odrops += 1,
                    // The kernel side is down (EIO) or gone: count and carry on.
                    _ => self.stats.oerrors += 1,
                }
                continue;
            }
            accepted += 1;
            self.stats.opackets += 1;
            self.stats.obytes += len as u64;
        }
        accepted
    }

    fn fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }

    fn stats(&self) -> QueueStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_before_any_system_call() {
        for bad in ["", "a-name-much-too-long", "a/b", "a b", "x:1"] {
            let e = TapDevice::open(bad, 1).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad}: {e}");
            assert!(e.to_string().contains("bad interface name"), "{e}");
        }
        assert!(TapDevice::open("mpq0", 0).is_err());
    }

    #[test]
    fn errors_say_why() {
        let e = explain(io::Error::from_raw_os_error(libc::EPERM), "mp0", 1);
        assert!(e.to_string().contains("CAP_NET_ADMIN"), "{e}");
        let e = explain(io::Error::from_raw_os_error(libc::ENOENT), "mp0", 1);
        assert!(e.to_string().contains("/dev/net/tun"), "{e}");
    }
}
