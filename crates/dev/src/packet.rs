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
//!   (`PACKET_MR_PROMISC`); [`Promisc`] holds it for as long as one wants instead
//!   (`mpstack run` takes it while the interface is a bridge member);
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

/// Bytes of one ring block: room for a 64 KiB segment and its headers. Small
/// blocks, many of them: the kernel hands a block over when it is full or a
/// millisecond after its first frame, so at a rate that fills a large block in more
/// than a millisecond most of each block would go unused, and the ring would hold
/// far fewer frames than its size. (1 MiB blocks: 16 milliseconds of 64-byte frames
/// at any rate; these: 128 blocks of some 1,000 such frames each.)
const BLOCK_SIZE: usize = 1 << 17;
/// Blocks in a queue's ring (16 MiB).
const BLOCKS: usize = 128;
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

/// The kernel's index of interface `name`.
fn if_index(name: &str) -> io::Result<libc::c_uint> {
    let cname = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in the name"))?;
    // SAFETY: `cname` is a valid NUL-terminated string.
    match unsafe { libc::if_nametoindex(cname.as_ptr()) } {
        0 => Err(explain(
            io::Error::last_os_error(),
            name,
            "no such interface",
        )),
        i => Ok(i),
    }
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
        let ifindex = if_index(name)?;
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

/// Interface `name` held in promiscuous mode while this lives: a packet socket of
/// its own, receiving nothing (protocol 0), with a `PACKET_MR_PROMISC`
/// membership. The kernel counts such memberships, so the interface leaves
/// promiscuous mode when its last holder goes (this one, a device opened with
/// `promisc`, or any other program's). What a bridge member added or removed at
/// run time (`ifconfig bridge0 addm IF`) takes and gives back.
#[derive(Debug)]
pub struct Promisc {
    _fd: OwnedFd,
}

impl Promisc {
    pub fn hold(name: &str) -> io::Result<Promisc> {
        let ifindex = if_index(name)?;
        // SAFETY: plain socket(2); the result is checked and owned below.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        let fd = cvt(fd).map_err(|e| explain(e, name, "socket(AF_PACKET)"))?;
        // SAFETY: `fd` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mr = PacketMreq {
            mr_ifindex: ifindex as libc::c_int,
            mr_type: PACKET_MR_PROMISC,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        setopt(fd.as_raw_fd(), PACKET_ADD_MEMBERSHIP, &mr)
            .map_err(|e| explain(e, name, "promiscuous mode"))?;
        Ok(Promisc { _fd: fd })
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

    /// The block being walked, which is ours (its status said so).
    fn block(&mut self) -> &mut [u8] {
        // SAFETY: the kernel handed the block over (status USER, read with
        // Acquire) and takes it back only after we store KERNEL; until then nothing
        // else reads or writes its bytes, and `&mut self` makes this view the only one.
        unsafe { std::slice::from_raw_parts_mut(self.block_ptr(self.block), BLOCK_SIZE) }
    }
}

/// A u32 at `at` of a block (native order, as the kernel writes it); 0 past its end.
fn word(block: &[u8], at: usize) -> u32 {
    block
        .get(at..at + 4)
        .map_or(0, |b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

/// A block's frame count and its first frame's offset (`tpacket_hdr_v1`).
pub fn block_header(block: &[u8]) -> (u32, usize) {
    (word(block, 12), word(block, 16) as usize)
}

/// The frame of a TPACKET_V3 block whose `tpacket3_hdr` is at `off`: the offset of
/// the next (0 for none), and the frame as an mbuf — its virtio-net header read
/// (checksums filled, a segment's size kept, see [`crate::tap::vnet_rx`]), a VLAN
/// tag the kernel took into the metadata put back — or `None` for a malformed one
/// (counted in `ierrors`) or no buffer (`idrops`). Safe over any bytes.
pub fn block_frame(
    block: &mut [u8],
    off: usize,
    rxq: u16,
    stats: &mut QueueStats,
) -> (usize, Option<Mbuf>) {
    let next = word(block, off) as usize;
    if off.checked_add(48).is_none_or(|e| e > block.len()) {
        stats.ierrors += 1;
        return (0, None);
    }
    let snap = word(block, off + 12) as usize;
    let status = word(block, off + 20);
    let mac = (word(block, off + 24) & 0xffff) as usize;
    let tci = (word(block, off + 32) & 0xffff) as u16;
    let tpid = (word(block, off + 36) & 0xffff) as u16;
    let start = off + mac;
    if mac < VNET_HDR || snap < 14 || start.checked_add(snap).is_none_or(|e| e > block.len()) {
        stats.ierrors += 1;
        return (next, None);
    }
    let (head, frame) = block[start - VNET_HDR..start + snap].split_at_mut(VNET_HDR);
    let hdr: [u8; VNET_HDR] = (&*head).try_into().expect("split at VNET_HDR");
    let Some(csum) = vnet_rx(&hdr, frame) else {
        stats.ierrors += 1;
        return (next, None);
    };
    let tagged = status & TP_STATUS_VLAN_VALID != 0;
    let len = snap + if tagged { 4 } else { 0 };
    let built = Mbuf::with_capacity(len).and_then(|mut m| {
        if tagged {
            let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 && tpid != 0 {
                tpid
            } else {
                0x8100
            };
            let mut tag = [0u8; 4];
            tag[..2].copy_from_slice(&tpid.to_be_bytes());
            tag[2..].copy_from_slice(&tci.to_be_bytes());
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
            m.hdr.rxq = rxq;
            stats.ipackets += 1;
            stats.ibytes += len as u64;
            (next, Some(m))
        }
        Err(_) => {
            stats.idrops += 1;
            (next, None)
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
                (self.left, self.off) = block_header(self.block());
            }
            let (index, mut stats, mut off, mut left) =
                (self.index, self.stats, self.off, self.left);
            let block = self.block();
            while left > 0 && n < max {
                let (next, m) = block_frame(block, off, index, &mut stats);
                if let Some(m) = m {
                    out.push(m);
                    n += 1;
                }
                left -= 1;
                if next == 0 && left > 0 {
                    // A malformed block: give it back.
                    stats.ierrors += 1;
                    left = 0;
                }
                off += next;
            }
            (self.stats, self.off, self.left) = (stats, off, left);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A block holding `frames` (each with its status and VLAN TCI) as the kernel
    /// lays them out: the block header, then per frame a `tpacket3_hdr`, a
    /// virtio-net header and the frame.
    fn block_of(frames: &[(&[u8], u32, u16)]) -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        let put =
            |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        put(&mut b, 12, frames.len() as u32);
        put(&mut b, 16, 64);
        let mut off = 64;
        for (k, (f, status, tci)) in frames.iter().enumerate() {
            let mac = 48 + VNET_HDR;
            let next = if k + 1 == frames.len() {
                0
            } else {
                (mac + f.len() + 15) & !15
            };
            put(&mut b, off, next as u32);
            put(&mut b, off + 12, f.len() as u32);
            put(&mut b, off + 16, f.len() as u32);
            put(&mut b, off + 20, *status);
            put(&mut b, off + 24, mac as u32);
            put(&mut b, off + 32, u32::from(*tci));
            b[off + mac..off + mac + f.len()].copy_from_slice(f);
            off += next;
        }
        b
    }

    #[test]
    fn a_block_walk_gives_each_frame_and_puts_vlan_tags_back() {
        let mut f1 = vec![0u8; 60];
        f1[..6].copy_from_slice(&[0xff; 6]);
        f1[12..14].copy_from_slice(&[0x08, 0x06]);
        let f2 = vec![0x42u8; 64];
        let mut block = block_of(&[(&f1, 1, 0), (&f2, 1 | TP_STATUS_VLAN_VALID, 10)]);
        let (n, mut off) = block_header(&block);
        assert_eq!(n, 2);
        let mut st = QueueStats::default();
        let mut got = Vec::new();
        for _ in 0..n {
            let (next, m) = block_frame(&mut block, off, 3, &mut st);
            got.push(m.unwrap());
            off += next;
        }
        assert_eq!(got[0].to_vec(), f1);
        assert_eq!(got[0].hdr.rxq, 3);
        let g = got[1].to_vec();
        assert_eq!(g.len(), 68);
        assert_eq!(&g[12..16], &[0x81, 0x00, 0x00, 10]);
        assert_eq!(&g[16..], &f2[12..]);
        assert_eq!(st.ipackets, 2);
    }

    #[test]
    fn a_malformed_frame_header_is_counted_not_followed() {
        let f = vec![0u8; 60];
        let mut block = block_of(&[(&f, 1, 0)]);
        // A snap length past the block's end, then a MAC offset inside the header.
        block[64 + 12..64 + 16].copy_from_slice(&100_000u32.to_ne_bytes());
        let mut st = QueueStats::default();
        let (_, m) = block_frame(&mut block, 64, 0, &mut st);
        assert!(m.is_none());
        block[64 + 12..64 + 16].copy_from_slice(&60u32.to_ne_bytes());
        block[64 + 24..64 + 28].copy_from_slice(&4u32.to_ne_bytes());
        assert!(block_frame(&mut block, 64, 0, &mut st).1.is_none());
        assert!(block_frame(&mut block, usize::MAX - 10, 0, &mut st)
            .1
            .is_none());
        assert_eq!(st.ierrors, 3);
    }
}
