//! Async sockets (feature `tokio`): [`TcpStream`] and `&TcpStream` implement tokio's
//! [`AsyncRead`] and [`AsyncWrite`]; [`TcpListener::accept_async`],
//! [`Stack::tcp_connect_async`], [`UdpSocket::send_to_async`] and
//! [`UdpSocket::recv_from_async`] wait without blocking the thread, and each has a
//! `poll_*` form for hand-written futures; so do the batched UDP calls
//! ([`UdpSocket::poll_send_batch`], [`UdpSocket::poll_send_segmented`],
//! [`UdpSocket::poll_recv_batch`], and [`UdpSocket::poll_send_ready`] for a sender that
//! must queue a batch whole).
//!
//! There is no reactor and no file descriptor: a call that cannot go on registers its
//! task's waker with the socket and re-checks, and the socket's home worker wakes the
//! task from its own thread when it has news (bytes, room, a connection, an error) —
//! the same lock-free channels and the same wake-up the blocking calls park on
//! (`park.rs`). The futures therefore run on any executor; tokio only supplies the I/O
//! traits. A socket wakes one reading and one writing task: as with tokio's sockets, the
//! last task to wait in each direction is the one woken.
//!
//! Errors are those of the blocking calls, with the same [`std::io::ErrorKind`]s:
//! `ConnectionRefused`, `ConnectionReset`, `TimedOut` (the SYN or data retries gave up),
//! `BrokenPipe` (writing after a shutdown or close), `WouldBlock` only when a worker's
//! inbox is full at connect. `set_nonblocking` and the read/write timeouts apply to the
//! blocking calls only; time async calls out with `tokio::time::timeout`.
//!
//! `TcpStream::shutdown(how)` is an inherent method and hides `AsyncWriteExt::shutdown`:
//! call the latter as `AsyncWriteExt::shutdown(&mut stream)` (it shuts down writing, as
//! `shutdown(Shutdown::Write)` does).
//!
//! ```
//! use dev::mem::{wire, MemDevice, WireConfig};
//! use net::{IfConfig, Stack, StackConfig};
//! use std::net::{Ipv4Addr, SocketAddrV4};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! fn host(name: &str, dev: MemDevice, addr: &str) -> Stack {
//!     let mut s = Stack::new(StackConfig { name: name.into(), workers: 1, ..StackConfig::default() });
//!     let addrs = vec![addr.parse().unwrap()];
//!     s.add_interface(Box::new(dev), IfConfig { addrs, ..IfConfig::default() }).unwrap();
//!     s.start().unwrap();
//!     s
//! }
//!
//! # fn main() -> std::io::Result<()> {
//! // Two stacks joined by a memory wire, each with its worker thread.
//! let (da, db) = wire(WireConfig::default());
//! let a = host("a", da, "198.18.0.1/24");
//! let b = host("b", db, "198.18.0.2/24");
//! let listener = b.tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7), 8)?;
//!
//! let rt = tokio::runtime::Builder::new_current_thread().build()?;
//! rt.block_on(async {
//!     // An echo server: one connection, bytes back until the client's FIN.
//!     let server = tokio::spawn(async move {
//!         let (c, _peer) = listener.accept_async().await?;
//!         let (mut rd, mut wr) = (&c, &c);
//!         tokio::io::copy(&mut rd, &mut wr).await?;
//!         AsyncWriteExt::shutdown(&mut wr).await
//!     });
//!
//!     let mut c = a.tcp_connect_async(SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 7)).await?;
//!     c.write_all(b"hello").await?;
//!     AsyncWriteExt::shutdown(&mut c).await?;
//!     let mut back = Vec::new();
//!     c.read_to_end(&mut back).await?;
//!     assert_eq!(back, b"hello");
//!     server.await.expect("the server task ran")
//! })
//! # }
//! ```

use crate::park::Interest;
use crate::socket::RecvMeta;
use crate::{Stack, TcpListener, TcpStream, UdpSocket};
use std::future::{poll_fn, Future};
use std::io;
use std::net::{Shutdown, SocketAddr, SocketAddrV4};
use std::ops::DerefMut;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Runs `op`; if it would block, registers the task and runs it once more. The worker
/// wakes only tasks registered when it looks, so news that came between the first try
/// and the registration is caught by the second try (`park.rs` says why that is enough).
fn poll_io<T>(
    register: impl FnOnce(),
    mut op: impl FnMut() -> io::Result<T>,
) -> Poll<io::Result<T>> {
    match op() {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
        r => return Poll::Ready(r),
    }
    register();
    match op() {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Poll::Pending,
        r => Poll::Ready(r),
    }
}

impl TcpListener {
    /// Polls for the next established connection (tokio's `TcpListener::poll_accept`).
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        poll_io(|| self.register(cx.waker()), || self.accept_now())
    }

    /// Waits for the next established connection without blocking the thread (tokio's
    /// `TcpListener::accept`; the name `accept` is the blocking call's).
    pub async fn accept_async(&self) -> io::Result<(TcpStream, SocketAddr)> {
        poll_fn(|cx| self.poll_accept(cx)).await
    }
}

impl TcpStream {
    /// Polls the handshake of a stream from [`Stack::tcp_connect_nonblocking`]: ready
    /// with `Ok` once established, or with its error (`ConnectionRefused`, `TimedOut`
    /// when the SYN retries gave up, ...). The async form of
    /// [`TcpStream::wait_connected`].
    pub fn poll_connected(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        poll_io(
            || self.register(Interest::Write, cx.waker()),
            || self.connected_now(),
        )
    }

    fn poll_read_buf(&self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        let dst = buf.initialize_unfilled();
        let n = ready!(poll_io(
            || self.register(Interest::Read, cx.waker()),
            || self.read_now(dst)
        ))?;
        buf.advance(n);
        Poll::Ready(Ok(()))
    }

    fn poll_write_buf(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        poll_io(
            || self.register(Interest::Write, cx.waker()),
            || self.write_now(buf),
        )
    }
}

/// Reads what the peer sent; `Ok` with nothing filled is the end of the stream (the
/// peer's FIN), and an error is the connection's, once every byte before it was read.
impl AsyncRead for TcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.poll_read_buf(cx, buf)
    }
}

impl AsyncRead for &TcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.poll_read_buf(cx, buf)
    }
}

/// Writes queue bytes to the home worker (ready as soon as some fit in the send
/// channel); `poll_flush` has nothing to do, as with `std`'s `TcpStream`;
/// `poll_shutdown` is `shutdown(Shutdown::Write)`: a FIN after the queued bytes.
impl AsyncWrite for TcpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_buf(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.shutdown(Shutdown::Write))
    }
}

impl AsyncWrite for &TcpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_buf(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.shutdown(Shutdown::Write))
    }
}

impl Stack {
    /// Opens a TCP connection and waits for the handshake without blocking the thread
    /// (tokio's `TcpStream::connect`). The SYN is asked for when this is called; the
    /// future, which does not borrow the stack, waits for the outcome: the stream, or
    /// `ConnectionRefused`, `TimedOut` when the SYN retries gave up,
    /// `NetworkUnreachable` without a route.
    pub fn tcp_connect_async(
        &self,
        remote: SocketAddrV4,
    ) -> impl Future<Output = io::Result<TcpStream>> + Send + 'static {
        let started = self.tcp_connect_nonblocking(remote);
        async move {
            let s = started?;
            poll_fn(|cx| s.poll_connected(cx)).await?;
            Ok(s)
        }
    }
}

impl UdpSocket {
    /// Polls for one datagram, copied into `buf` (truncated to fit); ready with its
    /// sender (tokio's `UdpSocket::poll_recv_from`).
    pub fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<SocketAddr>> {
        let dst = buf.initialize_unfilled();
        let (n, from) = ready!(poll_io(
            || self.register(Interest::Read, cx.waker()),
            || self.recv_from_now(dst)
        ))?;
        buf.advance(n);
        Poll::Ready(Ok(from))
    }

    /// Waits for one datagram without blocking the thread and copies it into `buf`
    /// (truncated to fit); returns its length and sender (tokio's
    /// `UdpSocket::recv_from`).
    pub async fn recv_from_async(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        poll_fn(|cx| {
            poll_io(
                || self.register(Interest::Read, cx.waker()),
                || self.recv_from_now(buf),
            )
        })
        .await
    }

    /// Polls to queue one datagram to `target` (tokio's `UdpSocket::poll_send_to`):
    /// pending while the send queue is full, until the home worker has emptied some of
    /// it, where the blocking [`UdpSocket::send_to`] says `WouldBlock`.
    pub fn poll_send_to(
        &self,
        cx: &mut Context<'_>,
        buf: &[u8],
        target: SocketAddr,
    ) -> Poll<io::Result<usize>> {
        poll_io(
            || self.register(Interest::Write, cx.waker()),
            || {
                if self.send_room() > 0 {
                    self.send_to(buf, target)
                } else {
                    Err(io::ErrorKind::WouldBlock.into())
                }
            },
        )
    }

    /// Sends one datagram to `target`, waiting without blocking the thread while the
    /// send queue is full (tokio's `UdpSocket::send_to`). Errors as for
    /// [`UdpSocket::send_to`]: `InvalidInput` above 65,507 bytes, `Unsupported` for
    /// IPv6, `OutOfMemory` without packet buffers.
    pub async fn send_to_async(
        &self,
        buf: &[u8],
        target: impl Into<SocketAddr>,
    ) -> io::Result<usize> {
        let target = target.into();
        poll_fn(|cx| self.poll_send_to(cx, buf, target)).await
    }

    /// Polls to receive a batch (the async form of [`UdpSocket::recv_batch`]):
    /// pending until a datagram is queued, then ready with up to
    /// `min(bufs.len(), meta.len())` of them.
    pub fn poll_recv_batch<B: DerefMut<Target = [u8]>>(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [B],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        poll_io(
            || self.register(Interest::Read, cx.waker()),
            || self.recv_batch_now(bufs, meta),
        )
    }

    /// Waits without blocking the thread for a datagram, then receives up to
    /// `min(bufs.len(), meta.len())` of those queued (see [`UdpSocket::recv_batch`]).
    pub async fn recv_batch_async<B: DerefMut<Target = [u8]>>(
        &self,
        bufs: &mut [B],
        meta: &mut [RecvMeta],
    ) -> io::Result<usize> {
        poll_fn(|cx| self.poll_recv_batch(cx, bufs, meta)).await
    }

    /// Polls until the send queue has room for `n` datagrams (at most its
    /// capacity, [`UdpSocket::send_capacity`]): a sender that must queue a batch whole
    /// (quinn's `UdpPoller::poll_writable`) waits here, then sends it.
    pub fn poll_send_ready(&self, cx: &mut Context<'_>, n: usize) -> Poll<io::Result<()>> {
        let n = n.clamp(1, self.send_capacity());
        poll_io(
            || self.register(Interest::Write, cx.waker()),
            || {
                if self.send_room() >= n {
                    Ok(())
                } else {
                    Err(io::ErrorKind::WouldBlock.into())
                }
            },
        )
    }

    /// Polls to queue datagrams to `target` (the async form of
    /// [`UdpSocket::send_batch`]): pending while the send queue is full, then ready
    /// with how many it queued, at least one unless `datagrams` is empty.
    pub fn poll_send_batch<B: AsRef<[u8]>>(
        &self,
        cx: &mut Context<'_>,
        datagrams: &[B],
        target: SocketAddr,
    ) -> Poll<io::Result<usize>> {
        poll_io(
            || self.register(Interest::Write, cx.waker()),
            || {
                if self.send_room() > 0 || datagrams.is_empty() {
                    self.send_batch(datagrams, target)
                } else {
                    Err(io::ErrorKind::WouldBlock.into())
                }
            },
        )
    }

    /// Polls to queue `buf` cut into `segment_size`-byte datagrams (the async form of
    /// [`UdpSocket::send_segmented`]); ready with the datagrams queued, which may be
    /// fewer than the segments: the caller sends the rest (from
    /// `queued * segment_size`) with another call.
    pub fn poll_send_segmented(
        &self,
        cx: &mut Context<'_>,
        buf: &[u8],
        segment_size: usize,
        target: SocketAddr,
    ) -> Poll<io::Result<usize>> {
        poll_io(
            || self.register(Interest::Write, cx.waker()),
            || {
                if self.send_room() > 0 || buf.is_empty() {
                    self.send_segmented(buf, segment_size, target)
                } else {
                    Err(io::ErrorKind::WouldBlock.into())
                }
            },
        )
    }

    /// Sends every datagram of `datagrams` to `target`, waiting without blocking the
    /// thread while the send queue is full; one wake-up of the home worker per batch
    /// that fits. Returns `datagrams.len()`.
    pub async fn send_batch_async<B: AsRef<[u8]>>(
        &self,
        datagrams: &[B],
        target: impl Into<SocketAddr>,
    ) -> io::Result<usize> {
        let target = target.into();
        let mut done = 0;
        while done < datagrams.len() {
            done += poll_fn(|cx| self.poll_send_batch(cx, &datagrams[done..], target)).await?;
        }
        Ok(done)
    }
}
