//! Linux AF_PACKET devices: mpstack on an existing kernel interface (a NIC, or one
//! end of a veth pair), beside the kernel.
//!
//! [`PacketDevice::open`] opens one packet socket per queue, bound to the interface:
//!
//! - receive through a `TPACKET_V3` memory-mapped ring of blocks (the kernel fills
//!   a block with frames and hands it over whole; a worker walks it without a system
//!   call and gives it back), each frame copied into an mbuf;
//! - transmit with `sendmmsg`, a burst in one system call, bypassing the kernel's
//!   queueing discipline (`PACKET_QDISC_BYPASS`), as a NIC driver's transmit would;
//! - with more than one queue, the sockets join one `PACKET_FANOUT` group that
//!   spreads flows over them by the kernel's flow hash (RSS);
//! - `promisc` puts the interface in promiscuous mode while the device lives
//!   (`PACKET_MR_PROMISC`), as a bridge member needs;
//! - every frame carries a virtio-net header (`PACKET_VNET_HDR`), so the offload
//!   state comes as the kernel has it: a TCP segment of up to 64 KiB that its GRO
//!   merged or its peer never cut (its segment size kept, see [`crate::tap`]),
//!   checksums left to fill; VLAN tags the kernel took off into the frame's metadata
//!   are put back. With `offload`, the device also takes such segments and
//!   unfilled checksums on transmit, and the kernel finishes them.
//!
//! Our own transmitted frames are not received back (`PACKET_IGNORE_OUTGOING`).
//! The stack uses the interface's own link address; the kernel sees the same frames,
//! so the interface should hold no address of the kernel's (and the kernel not
//! forward) where mpstack answers for it.

use crate::tap::{vnet_gso_size, vnet_rx, vnet_tx, VNET_HDR};
use crate::{Device, DeviceInfo, Instant, Mbuf, Offloads, Queue, QueueStats};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

const ETH_P_ALL: u16 = 0x0003;
const SOL_PACKET: libc::c_int = 263;
const PACKET_ADD_MEMBERSHIP: libc::c_int = 1;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_VERSION: libc::c_int = 10;
const PACKET_VNET_HDR: libc::c_int = 15;
const PACKET_FANOUT: libc::c_int = 18;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const TPACKET_V3: libc::c_int = 2;
const PACKET_MR_PROMISC: libc::c_ushort = 1;
const PACKET_FANOUT_HASH: u32 = 0;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_VLAN_VALID: u32 = 0x10;
const TP_STATUS_VLAN_TPID_VALID: u32 = 0x40;

/// Bytes of one ring block: room for a 64 KiB segment and its headers.
const BLOCK_SIZE: usize = 1 << 20;
/// Blocks in a queue's ring (16 MiB).
const BLOCKS: usize = 16;
/// `tp_frame_size`, which V3 only uses to count frames.
const FRAME_SIZE: usize = 2048;
/// A block is handed over at most this many milliseconds after its first frame.
const BLOCK_TIMEOUT_MS: u32 = 1;
/// Frames sent with one `sendmmsg`.
const TX_BATCH: usize = 32;
/// Segments of one frame sent as they are; longer chains are gathered.
const MAX_IOV: usize = 8;

/// The kernel's `struct tpacket_req3`.
#[repr(C)]
struct TpacketReq3 {
    tp_block_size: u32,
    tp_block_nr: u32,
    tp_frame_size: u32,
    tp_frame_nr: u32,
    tp_retire_blk_tov: u32,
    tp_sizeof_priv: u32,
    tp_feature_req_word: u32,
}

/// The kernel's `struct packet_mreq`.
#[repr(C)]
struct PacketMreq {
    mr_ifindex: libc::c_int,
    mr_type: libc::c_ushort,
    mr_alen: libc::c_ushort,
    mr_address: [u8; 8],
}

/// What to ask of the interface.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketOptions {
    /// Promiscuous mode while the device lives (a bridge member).
    pub promisc: bool,
    /// Hand the kernel unfinished TCP segments and checksums on transmit.
    pub offload: bool,
}

/// An AF_PACKET device: one socket and ring per queue.
#[derive(Debug)]
pub struct PacketDevice {
    name: String,
    queues: Vec<PacketQueue>,
    mtu: usize,
    mac: [u8; 6],
    offload: bool,
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn setopt<T>(fd: RawFd, name: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` points to a live value of the size passed; the kernel only reads it.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            SOL_PACKET,
            name,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// Adds what the error likely means to a failure to open the interface.
fn explain(e: io::Error, name: &str, what: &str) -> io::Error {
    let why = match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            format!("{name}: {what}: permission denied (packet sockets need root or CAP_NET_RAW)")
        }
        Some(libc::ENODEV) => format!("{name}: no such interface in this network namespace"),
        _ => format!("{name}: {what}"),
    };
    io::Error::new(e.kind(), format!("{why} ({e})"))
}

impl PacketDevice {
    /// Opens `queues` packet sockets on the existing interface `name`.
    pub fn open(name: &str, queues: usize, opts: PacketOptions) -> io::Result<PacketDevice> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad interface name '{name}'"),
            ));
        }
        if queues == 0 || queues > 64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{queues} queues: an AF_PACKET device has 1 to 64"),
            ));
        }
        let cname = std::ffi::CString::new(name)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in the name"))?;
        // SAFETY: `cname` is a valid NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if ifindex == 0 {
            return Err(explain(
                io::Error::last_os_error(),
                name,
                "no such interface",
            ));
        }
        let (mtu, mac) = crate::tap::query_link(name)
            .map_err(|e| explain(e, name, "reading its MTU and address"))?;
        let group = (std::process::id() as u16 ^ (ifindex as u16).rotate_left(8)) as u32;
        let mut qs = Vec::with_capacity(queues);
        for index in 0..queues {
            qs.push(PacketQueue::open(
                name,
                ifindex as i32,
                index,
                queues,
                group,
                opts,
                mtu,
            )?);
        }
        Ok(PacketDevice {
            name: name.to_string(),
            queues: qs,
            mtu,
            mac,
            offload: opts.offload,
        })
    }
}

impl Device for PacketDevice {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            name: self.name.clone(),
            mtu: self.mtu,
            num_queues: self.queues.len(),
            hw_addr: Some(self.mac),
            offload: if self.offload {
                Offloads::ALL
            } else {
                Offloads::default()
            },
        }
    }

    fn into_queues(self: Box<Self>) -> Vec<Box<dyn Queue>> {
        self.queues
            .into_iter()
            .map(|q| Box::new(q) as Box<dyn Queue>)
            .collect()
    }
}

/// The receive ring of one socket, mapped.
struct Ring {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping belongs to this queue alone, which one worker owns at a time.
unsafe impl Send for Ring {}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are the mapping made in `PacketQueue::open`, unmapped
        // once, here.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// One queue: a packet socket, its receive ring and where the walk stands.
pub struct PacketQueue {
    fd: OwnedFd,
    ring: Ring,
    index: u16,
    mtu: usize,
    vnet_tx: bool,
    /// The block being walked, whether it is ours, its frames left and where the
    /// next is.
    block: usize,
    open: bool,
    left: u32,
    off: usize,
    stats: QueueStats,
}

impl std::fmt::Debug for PacketQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PacketQueue")
            .field("fd", &self.fd.as_raw_fd())
            .field("index", &self.index)
            .finish()
    }
}

impl PacketQueue {
    #[allow(clippy::too_many_arguments)]
    fn open(
        name: &str,
        ifindex: i32,
        index: usize,
        queues: usize,
        group: u32,
        opts: PacketOptions,
        mtu: usize,
    ) -> io::Result<PacketQueue> {
        // SAFETY: plain socket(2); the result is checked and owned below.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                i32::from(ETH_P_ALL.to_be()),
            )
        };
        let fd = cvt(fd).map_err(|e| explain(e, name, "socket(AF_PACKET)"))?;
        // SAFETY: `fd` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let raw = fd.as_raw_fd();
        let one: libc::c_int = 1;
        setopt(raw, PACKET_VNET_HDR, &one).map_err(|e| explain(e, name, "PACKET_VNET_HDR"))?;
        setopt(raw, PACKET_VERSION, &TPACKET_V3).map_err(|e| explain(e, name, "PACKET_VERSION"))?;
        let req = TpacketReq3 {
            tp_block_size: BLOCK_SIZE as u32,
            tp_block_nr: BLOCKS as u32,
            tp_frame_size: FRAME_SIZE as u32,
            tp_frame_nr: (BLOCK_SIZE * BLOCKS / FRAME_SIZE) as u32,
            tp_retire_blk_tov: BLOCK_TIMEOUT_MS,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setopt(raw, PACKET_RX_RING, &req).map_err(|e| explain(e, name, "PACKET_RX_RING"))?;
        let len = BLOCK_SIZE * BLOCKS;
        // SAFETY: maps the ring the kernel just made for this socket; the result is
        // checked, and unmapped by `Ring::drop`.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_LOCKED | libc::MAP_POPULATE,
                raw,
                0,
            )
        };
        let base = if base == libc::MAP_FAILED {
            // Locking may be refused (RLIMIT_MEMLOCK): map without it.
            // SAFETY: as above.
            let b = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    raw,
                    0,
                )
            };
            if b == libc::MAP_FAILED {
                return Err(explain(
                    io::Error::last_os_error(),
                    name,
                    "mapping the ring",
                ));
            }
            b
        } else {
            base
        };
        let ring = Ring {
            base: base.cast(),
            len,
        };
        let _ = setopt(raw, PACKET_QDISC_BYPASS, &one);
        let _ = setopt(raw, PACKET_IGNORE_OUTGOING, &one);
        // SAFETY: sockaddr_ll is plain data; all zeros is valid before filling.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL.to_be();
        sll.sll_ifindex = ifindex;
        // SAFETY: `sll` is a sockaddr_ll of the length given, alive for the call.
        cvt(unsafe {
            libc::bind(
                raw,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })
        .map_err(|e| explain(e, name, "bind"))?;
        if opts.promisc {
            let mr = PacketMreq {
                mr_ifindex: ifindex,
                mr_type: PACKET_MR_PROMISC,
                mr_alen: 0,
                mr_address: [0; 8],
            };
            setopt(raw, PACKET_ADD_MEMBERSHIP, &mr)
                .map_err(|e| explain(e, name, "promiscuous mode"))?;
        }
        if queues > 1 {
            let arg: u32 = group | PACKET_FANOUT_HASH << 16;
            setopt(raw, PACKET_FANOUT, &arg).map_err(|e| explain(e, name, "PACKET_FANOUT"))?;
        }
        Ok(PacketQueue {
            fd,
            ring,
            index: index as u16,
            mtu,
            vnet_tx: true,
            block: 0,
            open: false,
            left: 0,
            off: 0,
            stats: QueueStats::default(),
        })
    }

    /// Block `b`'s first byte.
    fn block_ptr(&self, b: usize) -> *mut u8 {
        // SAFETY: `b < BLOCKS`, so the offset stays inside the mapping.
        unsafe { self.ring.base.add(b * BLOCK_SIZE) }
    }

    /// Block `b`'s status word, shared with the kernel.
    fn status(&self, b: usize) -> &AtomicU32 {
        // SAFETY: `tpacket_block_desc.hdr.bh1.block_status` is the aligned u32 at
        // offset 8 of each block; the kernel and we hand the block over through it,
        // so it is read and written atomically.
        unsafe { &*self.block_ptr(b).add(8).cast::<AtomicU32>() }
    }

    /// A u32 of the block being walked at `at`.
    fn word(&self, at: usize) -> u32 {
        // SAFETY: the block is ours (status USER); `at` is checked by the callers to
        // leave room for 4 bytes inside it.
        unsafe {
            self.block_ptr(self.block)
                .add(at)
                .cast::<u32>()
                .read_unaligned()
        }
    }

    /// One frame of the current block (its `tpacket3_hdr` at `self.off`) into an
    /// mbuf; `None` if it is malformed or no buffer was to be had (counted).
    fn take_frame(&mut self) -> Option<Mbuf> {
        let off = self.off;
        if off + 48 > BLOCK_SIZE {
            self.stats.ierrors += 1;
            return None;
        }
        let snap = self.word(off + 12) as usize;
        let status = self.word(off + 20);
        let mac = (self.word(off + 24) & 0xffff) as usize;
        let tci = self.word(off + 32) & 0xffff;
        let tpid = self.word(off + 36) & 0xffff;
        let start = off + mac;
        if mac < VNET_HDR || start + snap > BLOCK_SIZE || snap < 14 {
            self.stats.ierrors += 1;
            return None;
        }
        // SAFETY: the block is ours until we hand it back; `[start - VNET_HDR,
        // start + snap)` lies inside it (checked above), and nothing else reads or
        // writes it meanwhile.
        let (hdr, frame) = unsafe {
            let p = self.block_ptr(self.block).add(start - VNET_HDR);
            let h: [u8; VNET_HDR] = std::ptr::read_unaligned(p.cast());
            (h, std::slice::from_raw_parts_mut(p.add(VNET_HDR), snap))
        };
        let Some(csum) = vnet_rx(&hdr, frame) else {
            self.stats.ierrors += 1;
            return None;
        };
        let tagged = status & TP_STATUS_VLAN_VALID != 0;
        let len = snap + if tagged { 4 } else { 0 };
        let built = Mbuf::with_capacity(len).and_then(|mut m| {
            if tagged {
                let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 && tpid != 0 {
                    tpid as u16
                } else {
                    0x8100
                };
                let mut tag = [0u8; 4];
                tag[..2].copy_from_slice(&tpid.to_be_bytes());
                tag[2..].copy_from_slice(&(tci as u16).to_be_bytes());
                m.append(&frame[..12])?;
                m.append(&tag)?;
                m.append(&frame[12..])?;
            } else {
                m.append(frame)?;
            }
            Ok(m)
        });
        match built {
            Ok(mut m) => {
                m.hdr.csum_flags = csum;
                m.hdr.tso_segsz = vnet_gso_size(&hdr);
                m.hdr.rxq = self.index;
                self.stats.ipackets += 1;
                self.stats.ibytes += len as u64;
                Some(m)
            }
            Err(_) => {
                self.stats.idrops += 1;
                None
            }
        }
    }
}

impl Queue for PacketQueue {
    fn rx_burst(&mut self, _now: Instant, out: &mut Vec<Mbuf>, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            if !self.open {
                if self.status(self.block).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
                    break;
                }
                self.open = true;
                self.left = self.word(12);
                self.off = self.word(16) as usize;
            }
            while self.left > 0 && n < max {
                let next = self.word(self.off) as usize;
                if let Some(m) = self.take_frame() {
                    out.push(m);
                    n += 1;
                }
                self.left -= 1;
                if next == 0 && self.left > 0 {
                    // A malformed block: give it back.
                    self.stats.ierrors += 1;
                    self.left = 0;
                }
                self.off += next;
            }
            if self.left == 0 {
                self.status(self.block)
                    .store(TP_STATUS_KERNEL, Ordering::Release);
                self.block = (self.block + 1) % BLOCKS;
                self.open = false;
            }
        }
        n
    }

    fn tx_burst(&mut self, _now: Instant, pkts: &mut Vec<Mbuf>) -> usize {
        let mut accepted = 0;
        let mut rest = &pkts[..];
        while !rest.is_empty() {
            let batch = &rest[..rest.len().min(TX_BATCH)];
            rest = &rest[batch.len()..];
            let mut heads = [[0u8; VNET_HDR]; TX_BATCH];
            let mut gathered: Vec<Vec<u8>> = Vec::new();
            // SAFETY: iovec and mmsghdr are plain data; zeroed is valid and every
            // field used is set below.
            let mut iov: [[libc::iovec; MAX_IOV + 1]; TX_BATCH] = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            let mut msgs: [libc::mmsghdr; TX_BATCH] = unsafe { std::mem::zeroed() };
            let mut k = 0;
            let mut sizes = [0usize; TX_BATCH];
            for m in batch {
                let len = m.len();
                let big = m.hdr.csum_flags & mbuf::CSUM_L4_NEEDED != 0;
                let max = if big { 65_535 + 18 } else { self.mtu + 18 };
                if len > max || len < 14 {
                    self.stats.oerrors += 1;
                    continue;
                }
                let Some(h) = (if self.vnet_tx {
                    vnet_tx(m, self.mtu)
                } else {
                    Some([0; VNET_HDR])
                }) else {
                    self.stats.oerrors += 1;
                    continue;
                };
                heads[k] = h;
                iov[k][0] = libc::iovec {
                    iov_base: heads[k].as_mut_ptr().cast(),
                    iov_len: VNET_HDR,
                };
                let mut cnt = 1;
                if m.nsegs() <= MAX_IOV {
                    for s in m.segments() {
                        iov[k][cnt] = libc::iovec {
                            iov_base: s.as_ptr() as *mut libc::c_void,
                            iov_len: s.len(),
                        };
                        cnt += 1;
                    }
                } else {
                    gathered.push(m.to_vec());
                    let g = gathered.last_mut().expect("just pushed");
                    iov[k][1] = libc::iovec {
                        iov_base: g.as_mut_ptr().cast(),
                        iov_len: g.len(),
                    };
                    cnt = 2;
                }
                msgs[k].msg_hdr.msg_iov = iov[k].as_mut_ptr();
                msgs[k].msg_hdr.msg_iovlen = cnt;
                sizes[k] = len;
                k += 1;
            }
            let mut sent = 0;
            while sent < k {
                // SAFETY: `msgs[sent..k]` point at iovecs in `iov`, which point at
                // `heads`, the frames' segments and `gathered`, all alive and
                // unmodified for the call; the kernel only reads them.
                let r = unsafe {
                    libc::sendmmsg(
                        self.fd.as_raw_fd(),
                        msgs[sent..].as_mut_ptr(),
                        (k - sent) as libc::c_uint,
                        0,
                    )
                };
                if r < 0 {
                    match io::Error::last_os_error().raw_os_error() {
                        Some(libc::EINTR) => continue,
                        Some(libc::EAGAIN) | Some(libc::ENOBUFS) => {
                            self.stats.odrops += (k - sent) as u64
                        }
                        _ => {
                            // The frame at `sent` was refused (the link is down, or it
                            // is too long): count it and go on with the next.
                            self.stats.oerrors += 1;
                            sent += 1;
                            continue;
                        }
                    }
                    break;
                }
                for &len in &sizes[sent..sent + r as usize] {
                    self.stats.opackets += 1;
                    self.stats.obytes += len as u64;
                }
                accepted += r as usize;
                sent += r as usize;
            }
        }
        pkts.clear();
        accepted
    }

    fn fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }

    fn stats(&self) -> QueueStats {
        self.stats
    }
}
