//! Sockets: how applications talk to the stack (netchannels, in the paper's words).
//!
//! A socket is a pair of bounded lock-free queues between one application and the
//! socket's home worker: the worker pushes received datagrams into `rxq`, the
//! application pushes datagrams to send into `txq` and pokes the home worker's
//! notifier. The application never touches protocol state, and the worker never
//! blocks on the application: a full receive queue is a counted drop (`udp.fullsock`).
//!
//! Blocking calls park the application thread, async calls (feature `tokio`) register
//! their task's waker; the worker wakes them once per batch in which it delivered
//! something or emptied the send queue, and only if the application said it was waiting.

use crate::park::Interest;
use crate::stack::Shared;
use mbuf::Mbuf;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::ops::DerefMut;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use crate::sockbuf::SockKind;
pub(crate) use crate::sockbuf::{RxDatagram, SockShared, TxDatagram};

/// Blocks until `s`'s receive queue has something, the deadline passes, or forever
/// (the application's side).
fn wait_readable(s: &SockShared, deadline: Option<std::time::Instant>) -> bool {
    s.parker
        .wait(Interest::Read, deadline, || !s.rxq.is_empty())
}

/// Why a bind failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BindError {
    /// Another socket holds the address (`EADDRINUSE`).
    AddrInUse(SocketAddr),
    /// The address is not one of the stack's (`EADDRNOTAVAIL`).
    AddrNotAvailable(IpAddr),
    /// No ephemeral port left.
    NoPorts,
}

impl std::fmt::Display for BindError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BindError::AddrInUse(a) => write!(f, "address {a} already in use"),
            BindError::AddrNotAvailable(a) => {
                write!(f, "address {a} is not configured on this stack")
            }
            BindError::NoPorts => f.write_str("no ephemeral port available"),
        }
    }
}

impl std::error::Error for BindError {}

impl From<BindError> for io::Error {
    fn from(e: BindError) -> io::Error {
        let kind = match e {
            BindError::AddrInUse(_) => io::ErrorKind::AddrInUse,
            BindError::AddrNotAvailable(_) => io::ErrorKind::AddrNotAvailable,
            BindError::NoPorts => io::ErrorKind::AddrInUse,
        };
        io::Error::new(kind, e)
    }
}

/// Common handle logic of datagram sockets.
#[derive(Debug)]
struct Handle {
    stack: Arc<Shared>,
    sock: Arc<SockShared>,
    nonblocking: AtomicBool,
    /// Read timeout in nanoseconds; 0 = none.
    read_timeout: AtomicU64,
    peer: Mutex<Option<SocketAddr>>,
}

impl Handle {
    fn new(stack: Arc<Shared>, sock: Arc<SockShared>) -> Self {
        Handle {
            stack,
            sock,
            nonblocking: AtomicBool::new(false),
            read_timeout: AtomicU64::new(0),
            peer: Mutex::new(None),
        }
    }

    fn send(&self, m: Mbuf, to: SocketAddr, seq: u16) -> io::Result<()> {
        if let Err(d) = self.sock.txq.push(TxDatagram { m, to, seq }) {
            drop(d);
            self.sock.tx_full.fetch_add(1, Ordering::Relaxed);
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "socket send queue full",
            ));
        }
        self.stack.notify_worker(self.sock.home);
        Ok(())
    }

    /// Queues the datagrams of `bufs` to `to` in order until the send queue is full,
    /// then pokes the home worker once (the point of a batch: one wake-up for many
    /// datagrams, as `sendmmsg(2)` and UDP GSO make one system call of them). Returns
    /// how many were queued; `WouldBlock` if none fit, counted once in `tx_full` as a
    /// refused `send_to` is.
    fn send_batch<'a>(
        &self,
        bufs: impl ExactSizeIterator<Item = &'a [u8]>,
        to: SocketAddr,
    ) -> io::Result<usize> {
        let total = bufs.len();
        let mut queued = 0;
        let mut err = None;
        for b in bufs {
            // Checked before the copy, so a full queue costs no buffer.
            if self.sock.txq.is_full() {
                break;
            }
            let m = match Mbuf::from_slice(b) {
                Ok(m) => m,
                Err(_) => {
                    err = Some(io::Error::new(
                        io::ErrorKind::OutOfMemory,
                        "no buffers (ENOBUFS)",
                    ));
                    break;
                }
            };
            if let Err(d) = self.sock.txq.push(TxDatagram { m, to, seq: 0 }) {
                // Another thread filled the queue since the check.
                drop(d);
                break;
            }
            queued += 1;
        }
        if queued > 0 {
            self.stack.notify_worker(self.sock.home);
            return Ok(queued);
        }
        if let Some(e) = err {
            return Err(e);
        }
        if total == 0 {
            return Ok(0);
        }
        self.sock.tx_full.fetch_add(1, Ordering::Relaxed);
        Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            "socket send queue full",
        ))
    }

    /// One receive that never blocks: a datagram or `WouldBlock`.
    fn recv_now(&self) -> io::Result<RxDatagram> {
        self.sock
            .rxq
            .pop()
            .ok_or_else(|| io::ErrorKind::WouldBlock.into())
    }

    fn recv(&self) -> io::Result<RxDatagram> {
        loop {
            match self.recv_now() {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => return r,
            }
            if self.nonblocking.load(Ordering::Relaxed) {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let t = self.read_timeout.load(Ordering::Relaxed);
            let deadline = (t != 0).then(|| std::time::Instant::now() + Duration::from_nanos(t));
            if !wait_readable(&self.sock, deadline) {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "receive timed out"));
            }
        }
    }

    fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        if d == Some(Duration::ZERO) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "zero timeout"));
        }
        let ns = d
            .map(|d| d.as_nanos().min(u64::MAX as u128) as u64)
            .unwrap_or(0);
        self.read_timeout.store(ns, Ordering::Relaxed);
        Ok(())
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.stack.unbind(&self.sock);
    }
}

/// `addr` if it is of the socket's family.
fn same_family(local: SocketAddr, addr: SocketAddr) -> io::Result<SocketAddr> {
    if local.is_ipv4() == addr.is_ipv4() {
        Ok(addr)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            if local.is_ipv4() {
                "an IPv4 socket cannot send to an IPv6 address"
            } else {
                "an IPv6 socket cannot send to an IPv4 address (no mapped addresses)"
            },
        ))
    }
}

/// A UDP socket on an mpstack [`crate::Stack`], mirroring `std::net::UdpSocket`.
#[derive(Debug)]
pub struct UdpSocket {
    h: Handle,
}

impl UdpSocket {
    pub(crate) fn new(stack: Arc<Shared>, sock: Arc<SockShared>) -> Self {
        UdpSocket {
            h: Handle::new(stack, sock),
        }
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.h.sock.local)
    }

    /// Sends `buf` to `addr`. Never blocks: a full send queue is `WouldBlock`.
    pub fn send_to(&self, buf: &[u8], addr: impl Into<SocketAddr>) -> io::Result<usize> {
        let to = same_family(self.h.sock.local, addr.into())?;
        check_datagram_len(buf.len())?;
        let m = Mbuf::from_slice(buf)
            .map_err(|_| io::Error::new(io::ErrorKind::OutOfMemory, "no buffers (ENOBUFS)"))?;
        self.h.send(m, to, 0)?;
        Ok(buf.len())
    }

    /// Sends several datagrams to `addr` with one wake-up of the home worker (as
    /// `sendmmsg(2)` does with one system call). Never blocks: it queues them in order
    /// until the send queue is full and returns how many it queued, `WouldBlock` if
    /// none fit. [`UdpSocket::send_room`] says beforehand how many will. A datagram
    /// over 65,507 bytes is `InvalidInput`, and then none is sent.
    pub fn send_batch<B: AsRef<[u8]>>(
        &self,
        datagrams: &[B],
        addr: impl Into<SocketAddr>,
    ) -> io::Result<usize> {
        let to = same_family(self.h.sock.local, addr.into())?;
        for d in datagrams {
            check_datagram_len(d.as_ref().len())?;
        }
        self.h.send_batch(datagrams.iter().map(|d| d.as_ref()), to)
    }

    /// Sends `buf` cut into datagrams of `segment_size` bytes (the last may be
    /// shorter) to `addr`, with one wake-up of the home worker: Linux's UDP GSO
    /// (`UDP_SEGMENT`) without the device offload. Returns the datagrams queued, as
    /// [`UdpSocket::send_batch`]; an empty `buf` sends nothing. A `segment_size` of 0
    /// or over 65,507 is `InvalidInput`.
    pub fn send_segmented(
        &self,
        buf: &[u8],
        segment_size: usize,
        addr: impl Into<SocketAddr>,
    ) -> io::Result<usize> {
        let to = same_family(self.h.sock.local, addr.into())?;
        if segment_size == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "segment size 0",
            ));
        }
        check_datagram_len(segment_size)?;
        self.h.send_batch(buf.chunks(segment_size), to)
    }

    /// Datagrams the send queue can take now: how many a [`UdpSocket::send_batch`]
    /// would queue, if no other thread sends on the socket meanwhile.
    pub fn send_room(&self) -> usize {
        let q = &self.h.sock.txq;
        q.capacity().saturating_sub(q.len())
    }

    /// The send queue's size in datagrams (the stack's `socket_queue`); a batch
    /// larger than this never fits whole.
    pub fn send_capacity(&self) -> usize {
        self.h.sock.txq.capacity()
    }

    /// Receives one datagram into `buf` (truncated to fit, as `recvfrom(2)` does).
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        copy_out(self.h.recv()?, buf)
    }

    /// Receives up to `min(bufs.len(), meta.len())` datagrams in one call (as
    /// `recvmmsg(2)`): datagram `i` is copied into `bufs[i]` (truncated to fit) and
    /// described by `meta[i]`. Waits as [`UdpSocket::recv_from`] does (non-blocking
    /// mode, read timeout) for the first one only, then takes those already queued
    /// and returns their number. With no room for one it returns 0 at once.
    pub fn recv_batch<B: DerefMut<Target = [u8]>>(
        &self,
        bufs: &mut [B],
        meta: &mut [RecvMeta],
    ) -> io::Result<usize> {
        if bufs.is_empty() || meta.is_empty() {
            return Ok(0);
        }
        let first = self.h.recv()?;
        Ok(self.recv_batch_from(first, bufs, meta))
    }

    /// `recv_batch` that never blocks: `WouldBlock` when nothing is queued.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn recv_batch_now<B: DerefMut<Target = [u8]>>(
        &self,
        bufs: &mut [B],
        meta: &mut [RecvMeta],
    ) -> io::Result<usize> {
        if bufs.is_empty() || meta.is_empty() {
            return Ok(0);
        }
        let first = self.h.recv_now()?;
        Ok(self.recv_batch_from(first, bufs, meta))
    }

    /// Fills `bufs`/`meta` with `first` and what else is queued.
    fn recv_batch_from<B: DerefMut<Target = [u8]>>(
        &self,
        first: RxDatagram,
        bufs: &mut [B],
        meta: &mut [RecvMeta],
    ) -> usize {
        let mut next = Some(first);
        let mut n = 0;
        for (buf, meta) in bufs.iter_mut().zip(meta.iter_mut()) {
            let Some(d) = next.take().or_else(|| self.h.sock.rxq.pop()) else {
                break;
            };
            let len = d.m.len().min(buf.len());
            // `len` is within the mbuf chain, so the copy cannot fail; if it did, the
            // datagram is reported empty rather than with stale bytes.
            let len = match d.m.copydata(0, &mut buf[..len]) {
                Ok(()) => len,
                Err(_) => 0,
            };
            *meta = RecvMeta {
                len,
                from: d.from,
                truncated: len < d.m.len(),
            };
            n += 1;
        }
        n
    }

    /// `recv_from` that never blocks: `WouldBlock` when nothing is queued.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn recv_from_now(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        copy_out(self.h.recv_now()?, buf)
    }

    /// Registers a task to wake when a datagram arrives (`Read`) or the home worker
    /// empties the send queue (`Write`); the caller re-checks after it.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn register(&self, interest: crate::park::Interest, waker: &std::task::Waker) {
        self.h.sock.parker.register(interest, waker);
    }

    /// Sets Don't Fragment on the datagrams this socket sends (FreeBSD's
    /// `IP_DONTFRAG`): one longer than the interface's MTU is then dropped and counted
    /// (`ip.cantfrag`) instead of sent as fragments.
    pub fn set_dont_fragment(&self, on: bool) {
        self.h.sock.dontfrag.store(on, Ordering::Relaxed);
    }

    pub fn dont_fragment(&self) -> bool {
        self.h.sock.dontfrag.load(Ordering::Relaxed)
    }

    /// Sets the TTL (hop limit over IPv6) of the datagrams it sends, 1 to 255, as
    /// `std::net::UdpSocket::set_ttl` (traceroute's tool).
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        set_ttl(&self.h.sock, ttl)
    }

    pub fn ttl(&self) -> io::Result<u32> {
        Ok(u32::from(self.h.sock.ttl_or_default()))
    }

    /// Sets the default peer for `send`/`recv`; `recv` then ignores other senders.
    pub fn connect(&self, addr: impl Into<SocketAddr>) -> io::Result<()> {
        let a = same_family(self.h.sock.local, addr.into())?;
        *self.h.peer.lock().unwrap_or_else(|e| e.into_inner()) = Some(a);
        Ok(())
    }

    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.peer()
    }

    fn peer(&self) -> io::Result<SocketAddr> {
        self.h
            .peer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, "socket is not connected"))
    }

    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        let p = self.peer()?;
        self.send_to(buf, p)
    }

    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        let p = self.peer()?;
        loop {
            let (n, from) = self.recv_from(buf)?;
            if from == p {
                return Ok(n);
            }
        }
    }

    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        self.h.nonblocking.store(on, Ordering::Relaxed);
        Ok(())
    }

    pub fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.h.set_read_timeout(d)
    }

    /// Datagrams waiting to be read.
    pub fn pending(&self) -> usize {
        self.h.sock.rxq.len()
    }
}

/// The largest UDP payload over IPv4 (65,535 less the IP and UDP headers).
const MAX_DATAGRAM: usize = 65_507;

fn check_datagram_len(len: usize) -> io::Result<()> {
    if len > MAX_DATAGRAM {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "datagram too large",
        ));
    }
    Ok(())
}

/// One datagram of a [`UdpSocket::recv_batch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvMeta {
    /// Bytes copied into the datagram's buffer.
    pub len: usize,
    /// Who sent it.
    pub from: SocketAddr,
    /// The datagram was longer than its buffer and was cut to `len` (`MSG_TRUNC`).
    pub truncated: bool,
}

impl Default for RecvMeta {
    fn default() -> Self {
        RecvMeta {
            len: 0,
            from: SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)),
            truncated: false,
        }
    }
}

/// Copies a received datagram into `buf` (truncated to fit).
fn copy_out(d: RxDatagram, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
    let n = d.m.len().min(buf.len());
    d.m.copydata(0, &mut buf[..n])
        .map_err(|e| io::Error::other(e.to_string()))?;
    Ok((n, d.from))
}

/// An echo reply as a [`PingSocket`] returns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EchoReply {
    pub from: Ipv4Addr,
    pub seq: u16,
    /// Bytes of echo data (after the 8-byte ICMP header).
    pub len: usize,
}

/// An ICMP echo socket ("ping socket"): sends echo requests with its identifier and
/// receives the matching replies.
#[derive(Debug)]
pub struct PingSocket {
    h: Handle,
}

impl PingSocket {
    pub(crate) fn new(stack: Arc<Shared>, sock: Arc<SockShared>) -> Self {
        PingSocket {
            h: Handle::new(stack, sock),
        }
    }

    pub fn ident(&self) -> u16 {
        self.h.sock.local.port()
    }

    /// Sets the TTL of the echo requests it sends, 1 to 255.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        set_ttl(&self.h.sock, ttl)
    }

    /// Sends an echo request carrying `data`.
    pub fn send_echo(&self, to: Ipv4Addr, seq: u16, data: &[u8]) -> io::Result<()> {
        if data.len() > 65_507 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "echo data too large",
            ));
        }
        let m = Mbuf::from_slice(data)
            .map_err(|_| io::Error::new(io::ErrorKind::OutOfMemory, "no buffers (ENOBUFS)"))?;
        self.h
            .send(m, SocketAddr::V4(SocketAddrV4::new(to, 0)), seq)
    }

    /// Receives one echo reply, copying its data into `buf`.
    pub fn recv_reply(&self, buf: &mut [u8]) -> io::Result<EchoReply> {
        let d = self.h.recv()?;
        let n = d.m.len().min(buf.len());
        d.m.copydata(0, &mut buf[..n])
            .map_err(|e| io::Error::other(e.to_string()))?;
        Ok(EchoReply {
            from: match d.from.ip() {
                IpAddr::V4(a) => a,
                IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
            },
            seq: d.seq,
            len: d.m.len(),
        })
    }

    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        self.h.nonblocking.store(on, Ordering::Relaxed);
        Ok(())
    }

    pub fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.h.set_read_timeout(d)
    }
}

fn set_ttl(s: &SockShared, ttl: u32) -> io::Result<()> {
    match u8::try_from(ttl) {
        Ok(t) if t > 0 => {
            s.ttl.store(t, Ordering::Relaxed);
            Ok(())
        }
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "TTL must be 1 to 255",
        )),
    }
}
