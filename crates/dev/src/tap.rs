//! Linux TAP devices: an Ethernet link whose other end is the kernel.
//!
//! [`TapDevice::open`] attaches to the TAP of that name, creating it if it does not
//! exist (which needs root or `CAP_NET_ADMIN`). With more than one queue it asks for
//! a multi-queue TAP (`IFF_MULTI_QUEUE`) and opens one descriptor per queue; the
//! kernel spreads flows over them. Descriptors are non-blocking: `rx_burst` reads
//! until `EAGAIN` or the burst is full, `tx_burst` writes each frame with one
//! `writev` of its segments, counting a full kernel queue as `odrops`.
//!
//! [`TapDevice::open_with`] with `offload` also asks for the virtio-net header
//! (`IFF_VNET_HDR`) and tells the kernel we take checksum and TCP segmentation
//! offload (`TUNSETOFFLOAD`, `TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6`), as QEMU does for a
//! guest: each frame then carries ten bytes in front saying what is left to do. The
//! kernel hands us TCP segments of up to 64 KiB (its GSO packets, unsegmented) and
//! packets whose checksum it left unfilled, which we fill in here, so the stack sees
//! only complete packets (marked `CSUM_L4_VALID`); we hand it our TCP/IPv4 segments
//! with their checksum unfilled and, when longer than the MTU, cut by the kernel into
//! segments of the size the stack gives (`PktHdr::tso_segsz`).
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
const IFF_VNET_HDR: libc::c_short = 0x4000;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO6: libc::c_uint = 0x04;
/// `struct virtio_net_hdr` (the legacy header, in the machine's byte order).
pub const VNET_HDR: usize = 10;
const VNET_F_NEEDS_CSUM: u8 = 1;
const VNET_F_DATA_VALID: u8 = 2;
const VNET_GSO_NONE: u8 = 0;
const VNET_GSO_TCPV4: u8 = 1;
const VNET_GSO_TCPV6: u8 = 4;
/// Largest frame read from a TAP: jumbo frames, and with offload a 64 KiB GSO
/// packet behind its virtio-net header.
const RX_BUF: usize = 65_535 + 18 + VNET_HDR + 64;
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
    /// The virtio-net header is on (checksum and segmentation offload).
    vnet: bool,
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
        Self::open_with(name, queues, false)
    }

    /// [`TapDevice::open`], with `offload`: checksum and TCP segmentation offload
    /// through the virtio-net header (see the module's doc).
    pub fn open_with(name: &str, queues: usize, offload: bool) -> io::Result<TapDevice> {
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
            if offload {
                flags |= IFF_VNET_HDR;
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
            if offload {
                let off = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6;
                // SAFETY: TUNSETOFFLOAD takes its argument by value; no memory is passed.
                let r = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD as _, off) };
                if r < 0 {
                    let e = io::Error::last_os_error();
                    return Err(io::Error::new(
                        e.kind(),
                        format!("{name}: TUNSETOFFLOAD ({e})"),
                    ));
                }
            }
            fds.push(fd);
        }
        let mtu = query_mtu(name).unwrap_or(1500);
        Ok(TapDevice {
            name: name.to_string(),
            fds,
            mtu,
            vnet: offload,
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

/// An interface's MTU and link address (`SIOCGIFMTU`, `SIOCGIFHWADDR`).
pub(crate) fn query_link(name: &str) -> io::Result<(usize, [u8; 6])> {
    let mtu = query_mtu(name)?;
    let mac = with_ctl_socket(|s| {
        let mut req = ifreq_for(name);
        // SAFETY: SIOCGIFHWADDR writes one ifreq that outlives the call.
        let r = unsafe { libc::ioctl(s, libc::SIOCGIFHWADDR as _, &mut req as *mut libc::ifreq) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: after SIOCGIFHWADDR the union holds `ifru_hwaddr`.
        let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
        let mut mac = [0u8; 6];
        for (d, s) in mac.iter_mut().zip(sa.sa_data.iter()) {
            *d = *s as u8;
        }
        Ok(mac)
    })?;
    Ok((mtu, mac))
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
            offload: if self.vnet {
                crate::Offloads::ALL
            } else {
                crate::Offloads::default()
            },
        }
    }
    fn into_queues(self: Box<Self>) -> Vec<Box<dyn Queue>> {
        let (mtu, vnet) = (self.mtu, self.vnet);
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
                    vnet,
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
    vnet: bool,
}

/// Parses the virtio-net header in front of a received frame and does what it
/// leaves to us with a checksum the kernel left unfilled (`NEEDS_CSUM`: the field
/// holds the pseudo-header sum, the sum runs from `csum_start` to the end). A TCP
/// checksum (at offset 16) stays as it is, the frame marked `CSUM_L4_NEEDED`: the
/// kernel vouches for the bytes, as Linux's `CHECKSUM_PARTIAL` does, so the stack
/// delivers it without a sum over 64 KiB, and a router that sends it on fills it in
/// where the next link cannot (`ip::csum_finish`), as for its own segments. Any
/// other is filled in here. Returns the frame's `csum_flags`, or `None` for a
/// header that does not fit the frame (the frame is dropped and counted).
pub fn vnet_rx(hdr: &[u8; VNET_HDR], frame: &mut [u8]) -> Option<u32> {
    let flags = hdr[0];
    let start = usize::from(u16::from_ne_bytes([hdr[6], hdr[7]]));
    let offset = usize::from(u16::from_ne_bytes([hdr[8], hdr[9]]));
    if flags & VNET_F_NEEDS_CSUM != 0 {
        let at = start.checked_add(offset)?;
        if at + 2 > frame.len() || start >= frame.len() {
            return None;
        }
        if offset == TCP_CSUM_OFFSET && frame.len() >= start + TCP_MIN_HDR {
            return Some(mbuf::CSUM_L4_VALID | mbuf::CSUM_L4_NEEDED);
        }
        let sum = !wire::checksum::data(&frame[start..]);
        frame[at..at + 2].copy_from_slice(&sum.to_be_bytes());
        return Some(mbuf::CSUM_L4_VALID);
    }
    Some(if flags & VNET_F_DATA_VALID != 0 {
        mbuf::CSUM_L4_VALID
    } else {
        0
    })
}

/// Where a TCP header holds its checksum, and how long the header is at least.
const TCP_CSUM_OFFSET: usize = 16;
const TCP_MIN_HDR: usize = 20;

/// For a GSO packet the kernel handed us whole (a TCP segment over IPv4 or IPv6 that
/// stands for smaller ones), the data bytes per segment it stands for (`gso_size`);
/// 0 for an ordinary frame. A router cuts such a packet to fit a link that cannot
/// take it whole.
pub fn vnet_gso_size(hdr: &[u8; VNET_HDR]) -> u16 {
    match hdr[1] & 0x7f {
        VNET_GSO_TCPV4 | VNET_GSO_TCPV6 => u16::from_ne_bytes([hdr[4], hdr[5]]),
        _ => 0,
    }
}

/// The virtio-net header for a frame we send: nothing to do, or (for our TCP
/// segments over IPv4 or IPv6, `CSUM_L4_NEEDED`) a checksum to fill in and, beyond the MTU, a TCP
/// segment to cut into `tso_segsz`-byte ones. `None` if the frame is not what the
/// flags say (it is dropped and counted).
pub fn vnet_tx(m: &Mbuf, mtu: usize) -> Option<[u8; VNET_HDR]> {
    let mut h = [0u8; VNET_HDR];
    if m.hdr.csum_flags & mbuf::CSUM_L4_NEEDED == 0 {
        return Some(h);
    }
    let mut head = [0u8; 18 + 60 + 60];
    let n = m.len().min(head.len());
    m.copydata(0, &mut head[..n]).ok()?;
    // Ethernet, perhaps one 802.1Q tag, then IPv4 or IPv6 (no extension header)
    // and TCP.
    let l3 = if head[12..14] == [0x81, 0x00] { 18 } else { 14 };
    if n < l3 + 20 {
        return None;
    }
    let (l4, gso) = match head[l3] >> 4 {
        4 if head[l3 + 9] == 6 => (l3 + usize::from(head[l3] & 0xf) * 4, VNET_GSO_TCPV4),
        6 if n >= l3 + 40 && head[l3 + 6] == 6 => (l3 + 40, VNET_GSO_TCPV6),
        _ => return None,
    };
    if n < l4 + 20 {
        return None;
    }
    let hdr_len = l4 + usize::from(head[l4 + 12] >> 4) * 4;
    h[0] = VNET_F_NEEDS_CSUM;
    h[6..8].copy_from_slice(&(l4 as u16).to_ne_bytes());
    h[8..10].copy_from_slice(&16u16.to_ne_bytes());
    if m.len() - l3 > mtu {
        if m.hdr.tso_segsz == 0 {
            return None;
        }
        h[1] = gso;
        h[2..4].copy_from_slice(&(hdr_len as u16).to_ne_bytes());
        h[4..6].copy_from_slice(&m.hdr.tso_segsz.to_ne_bytes());
    } else {
        h[1] = VNET_GSO_NONE;
    }
    Some(h)
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
            let end = r as usize;
            if end == 0 {
                break;
            }
            let mut start = 0;
            let mut csum_flags = 0;
            let mut gso_size = 0;
            if self.vnet {
                if end <= VNET_HDR {
                    self.stats.ierrors += 1;
                    continue;
                }
                let (hdr, frame) = self.buf[..end].split_at_mut(VNET_HDR);
                let hdr: &[u8; VNET_HDR] = (&*hdr).try_into().expect("split at VNET_HDR");
                gso_size = vnet_gso_size(hdr);
                match vnet_rx(hdr, frame) {
                    Some(f) => csum_flags = f,
                    None => {
                        self.stats.ierrors += 1;
                        continue;
                    }
                }
                start = VNET_HDR;
            }
            let len = end - start;
            // One buffer per frame, a jumbo cluster for a GSO packet.
            let frame = &self.buf[start..end];
            let m = Mbuf::with_capacity(len).and_then(|mut m| m.append(frame).map(|()| m));
            match m {
                Ok(mut m) => {
                    m.hdr.csum_flags = csum_flags;
                    m.hdr.tso_segsz = gso_size;
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
            let tso = self.vnet && m.hdr.csum_flags & mbuf::CSUM_L4_NEEDED != 0;
            let max = if tso { 65_535 + 18 } else { self.mtu + 18 + 4 };
            if len > max || len < 14 {
                self.stats.oerrors += 1;
                continue;
            }
            let mut iov = [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; MAX_IOV];
            let mut cnt = 0;
            let mut gathered;
            let vh = if self.vnet {
                vnet_tx(&m, self.mtu)
            } else {
                Some([0; VNET_HDR])
            };
            let Some(mut vh) = vh else {
                self.stats.oerrors += 1;
                continue;
            };
            if self.vnet {
                iov[0] = libc::iovec {
                    iov_base: vh.as_mut_ptr().cast(),
                    iov_len: VNET_HDR,
                };
                cnt = 1;
            }
            if m.nsegs() + cnt <= MAX_IOV {
                for s in m.segments() {
                    iov[cnt] = libc::iovec {
                        iov_base: s.as_ptr() as *mut libc::c_void,
                        iov_len: s.len(),
                    };
                    cnt += 1;
                }
            } else {
                gathered = m.to_vec();
                iov[cnt] = libc::iovec {
                    iov_base: gathered.as_mut_ptr().cast(),
                    iov_len: gathered.len(),
                };
                cnt += 1;
            }
            let r = loop {
                // SAFETY: the first `cnt` iovecs point into `vh`, segments of `m` or
                // `gathered`, which stay alive and unmodified during the call; writev
                // only reads them.
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

    /// Ethernet and IPv4 from 198.18.0.1 to 198.18.0.2 carrying protocol `proto`: an
    /// `l4`-byte header of zeros, then `data` bytes counting up.
    fn frame(proto: u8, l4: usize, data: usize) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + l4 + data];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[14 + 9] = proto;
        f[14 + 12..14 + 16].copy_from_slice(&[198, 18, 0, 1]);
        f[14 + 16..14 + 20].copy_from_slice(&[198, 18, 0, 2]);
        for (i, b) in f[34 + l4..].iter_mut().enumerate() {
            *b = i as u8;
        }
        f
    }

    #[test]
    fn vnet_rx_leaves_a_tcp_checksum_to_the_stack_and_fills_in_another() {
        // Ethernet + IPv4 + TCP with 100 bytes of data, the TCP checksum field holding
        // the pseudo-header sum (as Linux leaves it with CHECKSUM_PARTIAL).
        let mut f = frame(6, 20, 100);
        f[34 + 12] = 5 << 4;
        let src = std::net::IpAddr::from([198, 18, 0, 1]);
        let dst = std::net::IpAddr::from([198, 18, 0, 2]);
        let pseudo = wire::checksum::pseudo_header(&src, &dst, wire::IpProtocol::Tcp, 120);
        f[34 + 16..34 + 18].copy_from_slice(&pseudo.to_be_bytes());
        let mut h = [0u8; VNET_HDR];
        h[0] = VNET_F_NEEDS_CSUM;
        h[6..8].copy_from_slice(&34u16.to_ne_bytes());
        h[8..10].copy_from_slice(&16u16.to_ne_bytes());
        // TCP: left as it is, marked as still to be filled in (and valid).
        let before = f.clone();
        assert_eq!(
            vnet_rx(&h, &mut f),
            Some(mbuf::CSUM_L4_VALID | mbuf::CSUM_L4_NEEDED)
        );
        assert_eq!(f, before);
        // What a router's `csum_finish` does with it makes the right checksum.
        let sum = !wire::checksum::data(&f[34..]);
        f[34 + 16..34 + 18].copy_from_slice(&sum.to_be_bytes());
        let p = wire::TcpPacket::new_checked(&f[34..]).unwrap();
        assert!(p.verify_checksum(&src, &dst));
        // Another protocol's (UDP's field is at offset 6): filled in here.
        let mut u = frame(17, 8, 100);
        u[34 + 4..34 + 6].copy_from_slice(&108u16.to_be_bytes());
        let pseudo = wire::checksum::pseudo_header(&src, &dst, wire::IpProtocol::Udp, 108);
        u[34 + 6..34 + 8].copy_from_slice(&pseudo.to_be_bytes());
        let mut hu = h;
        hu[8..10].copy_from_slice(&6u16.to_ne_bytes());
        assert_eq!(vnet_rx(&hu, &mut u), Some(mbuf::CSUM_L4_VALID));
        let all = wire::checksum::combine(&[pseudo, wire::checksum::data(&u[34..])]);
        assert_eq!(all, 0xffff, "the UDP checksum is complete");
        // A header pointing past the frame is refused, not followed.
        h[6..8].copy_from_slice(&200u16.to_ne_bytes());
        assert_eq!(vnet_rx(&h, &mut f), None);
        h[6..8].copy_from_slice(&(f.len() as u16 - 1).to_ne_bytes());
        assert_eq!(vnet_rx(&h, &mut f), None);
        // Checked by the kernel, or nothing said.
        assert_eq!(
            vnet_rx(&[2, 0, 0, 0, 0, 0, 0, 0, 0, 0], &mut f),
            Some(mbuf::CSUM_L4_VALID)
        );
        assert_eq!(vnet_rx(&[0; VNET_HDR], &mut f), Some(0));

        // Sending: an unfilled segment longer than the MTU is to be cut by the kernel.
        let mut big = f[..54].to_vec();
        big.extend(std::iter::repeat_n(7u8, 4000));
        let mut m = Mbuf::from_slice(&big).unwrap();
        assert_eq!(vnet_tx(&m, 1500), Some([0; VNET_HDR]), "nothing left to do");
        m.hdr.csum_flags = mbuf::CSUM_L4_NEEDED;
        assert_eq!(vnet_tx(&m, 1500), None, "no segment size given");
        m.hdr.tso_segsz = 1448;
        let h = vnet_tx(&m, 1500).unwrap();
        assert_eq!(h[0], VNET_F_NEEDS_CSUM);
        assert_eq!(h[1], VNET_GSO_TCPV4);
        assert_eq!(u16::from_ne_bytes([h[2], h[3]]), 54, "headers to copy");
        assert_eq!(u16::from_ne_bytes([h[4], h[5]]), 1448);
        assert_eq!(u16::from_ne_bytes([h[6], h[7]]), 34);
        assert_eq!(u16::from_ne_bytes([h[8], h[9]]), 16);
        // Within the MTU: the checksum only.
        let m = {
            let mut m = Mbuf::from_slice(&f).unwrap();
            m.hdr.csum_flags = mbuf::CSUM_L4_NEEDED;
            m
        };
        assert_eq!(vnet_tx(&m, 1500).unwrap()[1], VNET_GSO_NONE);
        // Not TCP: refused.
        let mut u = f.clone();
        u[14 + 9] = 17;
        let mut m = Mbuf::from_slice(&u).unwrap();
        m.hdr.csum_flags = mbuf::CSUM_L4_NEEDED;
        assert_eq!(vnet_tx(&m, 1500), None);
        // TCP over IPv6: the TCP header after the 40-byte IPv6 one, cut as TCPV6.
        let mut v6 = vec![0u8; 14 + 40 + 20];
        v6[12..14].copy_from_slice(&[0x86, 0xdd]);
        v6[14] = 0x60;
        v6[14 + 6] = 6;
        v6[54 + 12] = 5 << 4;
        v6.extend(std::iter::repeat_n(7u8, 4000));
        let mut m = Mbuf::from_slice(&v6).unwrap();
        m.hdr.csum_flags = mbuf::CSUM_L4_NEEDED;
        m.hdr.tso_segsz = 1428;
        let h = vnet_tx(&m, 1500).unwrap();
        assert_eq!(h[1], VNET_GSO_TCPV6);
        assert_eq!(u16::from_ne_bytes([h[2], h[3]]), 74, "headers to copy");
        assert_eq!(u16::from_ne_bytes([h[6], h[7]]), 54, "checksum from TCP on");
        // An extension header before TCP: refused.
        v6[14 + 6] = 0;
        let mut m = Mbuf::from_slice(&v6).unwrap();
        m.hdr.csum_flags = mbuf::CSUM_L4_NEEDED;
        assert_eq!(vnet_tx(&m, 1500), None);
        // What the kernel says of a GSO packet it hands us.
        let mut g = [0u8; VNET_HDR];
        assert_eq!(vnet_gso_size(&g), 0);
        g[1] = VNET_GSO_TCPV6 | 0x80; // with ECN
        g[4..6].copy_from_slice(&1440u16.to_ne_bytes());
        assert_eq!(vnet_gso_size(&g), 1440);
        g[1] = 3; // UDP fragmentation offload: not ours to cut
        assert_eq!(vnet_gso_size(&g), 0);
    }

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
