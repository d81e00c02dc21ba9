//! `TcpListener` and `TcpStream`, mirroring `std::net`. A handle never touches protocol
//! state: it moves bytes through its connection's channels and tells the home worker
//! through that worker's inbox (one wake-up message outstanding at a time).
//!
//! `TcpBound` and `TcpListener` are in `listener`, a stream's reads and writes in
//! `read` and `write`; its options, errors and shutdown are here.

use crate::park::Interest;
use crate::stack::Shared;
use crate::tcp::chan::{err, phase, ByteChan, StreamShared};
use crate::tcp::layer::TcpMsg;
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod listener;
mod read;
mod write;

pub use listener::{TcpBound, TcpListener};

fn deadline(ns: u64) -> Option<std::time::Instant> {
    (ns != 0).then(|| std::time::Instant::now() + Duration::from_nanos(ns))
}

fn timeout_ns(d: Option<Duration>) -> io::Result<u64> {
    match d {
        Some(Duration::ZERO) => Err(io::Error::new(io::ErrorKind::InvalidInput, "zero timeout")),
        Some(d) => Ok(d.as_nanos().min(u64::MAX as u128) as u64),
        None => Ok(0),
    }
}

/// A TTL or hop limit the application asks for: 1 to 255 (`EINVAL` beyond,
/// as Linux and FreeBSD's `IPV6_UNICAST_HOPS` answer).
fn valid_ttl(ttl: u32) -> io::Result<u8> {
    match u8::try_from(ttl) {
        Ok(t) if t > 0 => Ok(t),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "TTL / hop limit must be 1 to 255",
        )),
    }
}

/// A TOS or traffic class the application asks for: a byte, of which the
/// DSCP is kept; the ECN field is the stack's (Linux's `IP_TOS` on a stream
/// socket keeps it so too).
fn valid_tos(tos: u32) -> io::Result<u8> {
    u8::try_from(tos).map(|t| t & !0b11).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "TOS / traffic class must be 0 to 255",
        )
    })
}

/// The TTL or hop limit a socket sends with (0 stored: the default).
fn effective_ttl(stored: u8) -> u32 {
    u32::from(
        crate::tcp::chan::IpOpts {
            ttl: stored,
            tos: 0,
        }
        .ttl_or(crate::sockbuf::DEFAULT_TTL),
    )
}

/// A TCP connection.
#[derive(Debug)]
pub struct TcpStream {
    stack: Arc<Shared>,
    s: Arc<StreamShared>,
    nonblocking: AtomicBool,
    read_timeout: AtomicU64,
    write_timeout: AtomicU64,
    /// The reader's side of the receive channel: one lock for a read, a peek
    /// included.
    rx_cursor: Mutex<RxCursor>,
    /// The writer's packet buffer being filled (`ByteChan::push_filling`).
    tx_fill: Mutex<Option<mbuf::FillBuf>>,
}

/// Where the reader stands in the receive channel.
#[derive(Debug, Default)]
struct RxCursor {
    /// The chunk being read, and how far (`ByteChan::pop_into`).
    partial: Option<(crate::tcp::sndbuf::Chunk, usize)>,
    /// Bytes [`TcpStream::peek`] took from the channel to look at, still unread:
    /// the next reads return them first (`StreamShared::rx_peeked` counts them).
    peeked: std::collections::VecDeque<u8>,
}

/// Copies the front of `q` into `buf`: how many bytes.
fn copy_front(q: &std::collections::VecDeque<u8>, buf: &mut [u8]) -> usize {
    let (a, b) = q.as_slices();
    let na = a.len().min(buf.len());
    buf[..na].copy_from_slice(&a[..na]);
    let nb = b.len().min(buf.len() - na);
    buf[na..na + nb].copy_from_slice(&b[..nb]);
    na + nb
}

/// A connection's buffer sizes (`SO_SNDBUF`, `SO_RCVBUF`), in bytes, each clamped to
/// 4 KiB ..= 64 MiB.
///
/// `recv` is FreeBSD's receive buffer: everything received and not yet read
/// counts against it, in the connection or in the application's channel, and the
/// window offered is what is left (`sbspace`), so a reader that stops reading
/// closes the window after `recv` bytes. `send` bounds two places, as Linux
/// charges a socket twice what `SO_SNDBUF` is set to: what the application's
/// channel to the worker holds and, again, what the connection holds
/// unacknowledged, so a writer can be up to twice `send` bytes ahead of the peer's
/// acknowledgments; that slack keeps a writer and its worker from waiting on each
/// other when they share cores. Once the connection knows its MSS, both grow to
/// whole segments (FreeBSD's `tcp_mss`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpBuffers {
    pub send: usize,
    pub recv: usize,
}

impl TcpBuffers {
    pub(crate) fn clamped(self) -> Self {
        const MIN: usize = 4 * 1024;
        const MAX: usize = 64 * 1024 * 1024;
        TcpBuffers {
            send: self.send.clamp(MIN, MAX),
            recv: self.recv.clamp(MIN, MAX),
        }
    }
}

impl TcpStream {
    /// The send buffer's size (`SO_SNDBUF`).
    pub fn send_buffer_size(&self) -> usize {
        self.s.tx.cap()
    }

    /// The receive buffer's size (`SO_RCVBUF`): a smaller one set on the open
    /// connection at once, while the window already offered drains.
    pub fn recv_buffer_size(&self) -> usize {
        match self.s.rcvbuf.load(Ordering::Acquire) {
            0 => self.s.rx.cap(),
            n => n,
        }
    }

    /// `SO_SNDBUF` on the open connection (the stack's, or the one given at
    /// connect or listen, until then): what may be queued from now on, in the
    /// channel to the worker and again unacknowledged in the connection (see
    /// [`TcpBuffers`]). A smaller size keeps what is queued and takes no more
    /// until it drains. Clamped to 4 KiB ..= `kern.ipc.maxsockbuf`.
    pub fn set_send_buffer_size(&self, n: usize) -> io::Result<()> {
        self.set_buffer_size(&self.s.tx, &self.s.opt_sndbuf, n)
    }

    /// `SO_RCVBUF` on the open connection: the receive buffer, and so the
    /// window offered (up to what the window scale agreed in the handshake can
    /// say; the scale covers `kern.ipc.maxsockbuf`). A larger one opens the
    /// window at once; a smaller one closes it as the peer uses what was
    /// already offered, never shrinking it (RFC 9293 §3.8.6). Clamped to 4 KiB
    /// ..= `kern.ipc.maxsockbuf`.
    pub fn set_recv_buffer_size(&self, n: usize) -> io::Result<()> {
        self.set_buffer_size(&self.s.rx, &self.s.opt_rcvbuf, n)?;
        // Answered at once, before the worker takes it.
        self.s.rcvbuf.store(self.s.rx.cap(), Ordering::Release);
        Ok(())
    }

    /// Sets one buffer of the open connection: its channel's bound, and the size
    /// for the worker to give the control block (`opt`). 4 KiB up to the stack's
    /// largest (`kern.ipc.maxsockbuf`), as FreeBSD's `sbreserve` refuses more
    /// (this clamps instead, as Linux's `sysctl_wmem_max` / `rmem_max` do).
    fn set_buffer_size(&self, chan: &ByteChan, opt: &AtomicUsize, n: usize) -> io::Result<()> {
        let most = self.stack.cfg.load().tcp.max_sockbuf.max(4096);
        let n = n.clamp(4096, most);
        chan.set_cap(n);
        opt.store(n, Ordering::Release);
        self.s.opts_dirty.store(true, Ordering::Release);
        self.kick();
        Ok(())
    }

    /// What [`set_mss`](Self::set_mss) takes (Linux's `TCP_MIN_MSS` to
    /// `MAX_TCP_WINDOW`).
    pub const MSS_RANGE: std::ops::RangeInclusive<u32> = 88..=32_767;

    /// `InvalidInput` for an MSS outside [`MSS_RANGE`](Self::MSS_RANGE).
    fn check_mss(mss: u32) -> io::Result<()> {
        if Self::MSS_RANGE.contains(&mss) {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "MSS must be 88 to 32767",
            ))
        }
    }

    /// `TCP_MAXSEG`: the largest segment the connection offers in its SYN and
    /// sends, set before the SYN leaves (as [`set_noopt`](Self::set_noopt));
    /// later it can only lower the segment size in use (FreeBSD's
    /// `t_maxseg`). 88 to 32,767 bytes (Linux's bounds), `InvalidInput`
    /// beyond.
    pub fn set_mss(&self, mss: u32) -> io::Result<()> {
        Self::check_mss(mss)?;
        self.s.opt_maxseg.store(mss, Ordering::Release);
        self.s.opts_dirty.store(true, Ordering::Release);
        self.kick();
        Ok(())
    }

    /// `TCP_MAXSEG`'s answer: the MSS the connection sends with (the smaller
    /// of the peer's and ours, once the handshake told it; before, what
    /// [`set_mss`](Self::set_mss) set, or the stack's default).
    pub fn mss(&self) -> u32 {
        match self.s.mss.load(Ordering::Acquire) {
            0 => match self.s.opt_maxseg.load(Ordering::Acquire) {
                0 => u32::from(self.stack.cfg.load().tcp.mss),
                n => n,
            },
            n => n,
        }
    }

    pub(crate) fn new(stack: Arc<Shared>, s: Arc<StreamShared>) -> Self {
        TcpStream {
            stack,
            s,
            nonblocking: AtomicBool::new(false),
            read_timeout: AtomicU64::new(0),
            write_timeout: AtomicU64::new(0),
            rx_cursor: Mutex::new(RxCursor::default()),
            tx_fill: Mutex::new(None),
        }
    }

    fn kick(&self) {
        if !self.s.queued.swap(true, Ordering::AcqRel) {
            if let Some(q) = self.stack.tcp_inbox.get(self.s.home) {
                if let Err(TcpMsg::Wake(s)) = q.push(TcpMsg::Wake(self.s.clone())) {
                    // Full: the overflow list, which the worker also drains; `queued`
                    // stays up, as the stream is queued there.
                    if let Some(o) = self.stack.tcp_overflow.get(self.s.home) {
                        o.push(s);
                    }
                }
            }
        }
        self.stack.notify_worker(self.s.home);
    }

    fn error(&self) -> Option<io::Error> {
        match self.s.error.load(Ordering::Acquire) {
            err::NONE => None,
            err::REFUSED => Some(io::ErrorKind::ConnectionRefused.into()),
            err::RESET => Some(io::ErrorKind::ConnectionReset.into()),
            err::TIMED_OUT => Some(io::Error::new(
                io::ErrorKind::TimedOut,
                "connection timed out",
            )),
            err::ABORTED => Some(io::ErrorKind::ConnectionAborted.into()),
            // err::UNREACHABLE
            _ => Some(io::Error::new(
                io::ErrorKind::HostUnreachable,
                "no route to host",
            )),
        }
    }

    /// The connection's error if no read or write has reported it yet; a read
    /// or write reports it once (`consume`), and then the stream reads as ended
    /// and writes fail with `BrokenPipe` (Linux's `sock_error`, FreeBSD's
    /// `soreceive` clearing `so_error`: a reset is `ECONNRESET` once, then 0).
    fn report_error(&self, consume: bool) -> Option<io::Error> {
        if self.s.err_reported.load(Ordering::Acquire) {
            return None;
        }
        let e = self.error()?;
        if consume && self.s.err_reported.swap(true, Ordering::AcqRel) {
            // Another thread's read or write reported it meanwhile.
            return None;
        }
        Some(e)
    }

    /// The error a read or write would report next (`None` once one has, or
    /// while the connection is sound): `POLLERR`'s condition, where
    /// [`take_error`](Self::take_error) keeps answering with the cause.
    pub fn pending_error(&self) -> Option<io::Error> {
        self.report_error(false)
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.s.local)
    }

    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.s.remote)
    }

    /// True once the handshake completed (it may have closed since).
    pub fn is_connected(&self) -> bool {
        self.s.phase.load(Ordering::Acquire) != phase::CONNECTING && self.error().is_none()
    }

    /// The connection's error, if it failed (refused, reset, timed out, unreachable),
    /// as `std::net::TcpStream::take_error`; the error stays, as the connection stays
    /// failed. How a polling application learns that a non-blocking connect failed.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        Ok(self.error())
    }

    /// Waits for the handshake (after a non-blocking connect).
    pub fn wait_connected(&self, timeout: Option<Duration>) -> io::Result<()> {
        let d = timeout.map(|t| std::time::Instant::now() + t);
        self.s.wait(Interest::Write, d, || {
            self.s.phase.load(Ordering::Acquire) != phase::CONNECTING
        });
        match self.connected_now() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))
            }
            r => r,
        }
    }

    /// The handshake's outcome so far: done, failed (refused, timed out, ...), or
    /// `WouldBlock` while it runs.
    pub(crate) fn connected_now(&self) -> io::Result<()> {
        if let Some(e) = self.error() {
            return Err(e);
        }
        match self.s.phase.load(Ordering::Acquire) {
            phase::CONNECTING => Err(io::ErrorKind::WouldBlock.into()),
            _ => Ok(()),
        }
    }

    /// Registers a task to wake on news for its `interest` (re-check after it).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn register(&self, interest: crate::park::Interest, waker: &std::task::Waker) {
        self.s.register(interest, waker);
    }

    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        self.nonblocking.store(on, Ordering::Relaxed);
        Ok(())
    }

    pub fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.read_timeout.store(timeout_ns(d)?, Ordering::Relaxed);
        Ok(())
    }

    pub fn set_write_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.write_timeout.store(timeout_ns(d)?, Ordering::Relaxed);
        Ok(())
    }

    /// `TCP_NODELAY`: send small writes at once instead of coalescing them (Nagle).
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.s.opt_nodelay.store(on, Ordering::Release);
        self.s.opts_dirty.store(true, Ordering::Release);
        self.kick();
        Ok(())
    }

    pub fn nodelay(&self) -> io::Result<bool> {
        Ok(self.s.opt_nodelay.load(Ordering::Acquire))
    }

    /// `SO_KEEPALIVE` with `TCP_KEEPIDLE`: probe the peer after `idle` without traffic
    /// (`None`: off). Interval and count come from the stack's `TcpConfig`.
    pub fn set_keepalive(&self, idle: Option<Duration>) -> io::Result<()> {
        let ns = timeout_ns(idle)?;
        self.s.opt_keepalive_ns.store(ns, Ordering::Release);
        self.s.opts_dirty.store(true, Ordering::Release);
        self.kick();
        Ok(())
    }

    /// `TCP_KEEPINIT` (FreeBSD): how long the connection may take to be established
    /// before it is dropped with `TimedOut`; set before the handshake ends to count.
    /// The default is the stack's `TcpConfig::keep_init` (75 s).
    pub fn set_keepinit(&self, limit: Duration) -> io::Result<()> {
        let ns = timeout_ns(Some(limit))?;
        self.s.opt_keepinit_ns.store(ns, Ordering::Release);
        self.s.opts_dirty.store(true, Ordering::Release);
        self.kick();
        Ok(())
    }

    /// FreeBSD's `TCP_NOOPT`: the SYN of a connection not yet opened goes without
    /// options (no MSS, window scale, SACK-permitted or timestamps; the peer then
    /// assumes an MSS of 536), and the connection uses none. Set before the SYN
    /// leaves (with `tcp_connect_with` and a non-blocking stream, at once after it);
    /// later, it changes nothing.
    pub fn set_noopt(&self, on: bool) -> io::Result<()> {
        self.s.opt_noopt.store(on, Ordering::Release);
        self.s.opts_dirty.store(true, Ordering::Release);
        self.kick();
        Ok(())
    }

    /// `IP_TTL` (IPv4) or `IPV6_UNICAST_HOPS` (IPv6), by the connection's
    /// family, as `std::net::TcpStream::set_ttl`: the TTL or hop limit, 1 to
    /// 255, of its segments from now on (its SYN too when set before the SYN
    /// leaves: with `tcp_connect_with` and a non-blocking stream, at once after
    /// it). `InvalidInput` out of range. An accepted connection starts with
    /// its listener's.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.s.opt_ttl.store(valid_ttl(ttl)?, Ordering::Release);
        self.s.opts_dirty.store(true, Ordering::Release);
        self.kick();
        Ok(())
    }

    /// The TTL or hop limit its segments carry (the stack's 64 unless set).
    pub fn ttl(&self) -> io::Result<u32> {
        Ok(effective_ttl(self.s.opt_ttl.load(Ordering::Acquire)))
    }

    /// `IP_TOS` (IPv4) or `IPV6_TCLASS` (IPv6), by the connection's family: the
    /// byte's DSCP (upper six bits; 0 to 255, `InvalidInput` beyond) on its
    /// segments from now on. The two ECN bits are ignored: they are the stack's,
    /// ECT(0) on an ECN connection's data, Not-ECT otherwise (RFC 3168). An
    /// accepted connection starts with its listener's.
    pub fn set_tos(&self, tos: u32) -> io::Result<()> {
        self.s.opt_tos.store(valid_tos(tos)?, Ordering::Release);
        self.s.opts_dirty.store(true, Ordering::Release);
        self.kick();
        Ok(())
    }

    /// The TOS or traffic class set, ECN bits clear (0 unless set).
    pub fn tos(&self) -> io::Result<u32> {
        Ok(u32::from(self.s.opt_tos.load(Ordering::Acquire)))
    }

    /// `shutdown(2)`: `Write` sends a FIN after the queued data; `Read` discards
    /// what was received and not read, and what arrives from now on (acknowledged,
    /// so the peer is not stalled), and every read from then on returns 0, a
    /// blocked one included (FreeBSD's `socantrcvmore` and `sorflush`; POSIX:
    /// "further receptions shall be disallowed").
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        if matches!(how, Shutdown::Read | Shutdown::Both) {
            self.s.rd_shut.store(true, Ordering::Release);
            self.discard_unread();
            // A reader parked in another thread sees the end.
            self.s.wake();
        }
        if matches!(how, Shutdown::Write | Shutdown::Both) {
            self.s.wr_shut.store(true, Ordering::Release);
        }
        self.kick();
        Ok(())
    }

    /// Drops every byte waiting to be read (after `shutdown(Read)`): what a peek
    /// took and what the channel holds; the worker then opens the window.
    fn discard_unread(&self) {
        let mut c = self.rx_cursor.lock().unwrap_or_else(|e| e.into_inner());
        c.peeked.clear();
        self.s.rx_peeked.store(0, Ordering::Release);
        self.s
            .rx
            .drain_with(&mut c.partial, usize::MAX, |b| b.len());
    }

    /// Whether the application shut down reading: what a read then says is the
    /// end, after what came in meanwhile is dropped.
    fn read_shut(&self) -> bool {
        if !self.s.rd_shut.load(Ordering::Acquire) {
            return false;
        }
        if !self.s.rx.is_empty() || self.peeked_len() > 0 {
            // Pushed by the worker before it saw the shutdown.
            self.discard_unread();
            self.kick();
        }
        true
    }

    /// Closes with a reset (`close(2)` with `SO_LINGER` 0): the peer is told at once
    /// that the connection is refused or given up, nothing queued is sent, and no
    /// TIME_WAIT is held. What a server says to a connection it will not serve.
    pub fn abort(self) {
        self.s.abort.store(true, Ordering::Release);
        // The drop that follows wakes the worker.
    }

    /// Runs `op` until it does not say `WouldBlock`, parking for `ready` in between
    /// (blocking mode, up to the timeout in `timeout_ns`); in non-blocking mode once.
    fn blocking<T>(
        &self,
        timeout_ns: &AtomicU64,
        interest: Interest,
        timed_out: &'static str,
        mut op: impl FnMut() -> io::Result<T>,
        ready: impl Fn() -> bool,
    ) -> io::Result<T> {
        let dl = deadline(timeout_ns.load(Ordering::Relaxed));
        loop {
            match op() {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => return r,
            }
            if self.nonblocking.load(Ordering::Relaxed) {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            if !self.s.wait(interest, dl, &ready) {
                return Err(io::Error::new(io::ErrorKind::TimedOut, timed_out));
            }
        }
    }

    /// Whether a read would return the end of the stream (or the error) now,
    /// with nothing left to read: the peer's FIN, a failure, or a
    /// `shutdown(Read)` (poll's `POLLIN` without data).
    pub fn at_end(&self) -> bool {
        self.s.rd_shut.load(Ordering::Acquire)
            || (self.s.rx_eof.load(Ordering::Acquire)
                && self.s.rx.is_empty()
                && self.peeked_len() == 0)
    }

    /// Bytes waiting to be read.
    pub fn available(&self) -> usize {
        self.s.rx.len() + self.peeked_len()
    }
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        self.s.dropped.store(true, Ordering::Release);
        self.kick();
    }
}

/// Creates the shared state of an outgoing connection and asks its home worker to open it.
pub(crate) fn connect(
    stack: Arc<Shared>,
    local: SocketAddr,
    remote: SocketAddr,
    buffers: Option<TcpBuffers>,
) -> io::Result<TcpStream> {
    connect_fastopen(stack, local, remote, buffers, None).map(|(s, _)| s)
}

/// [`connect`], with TCP Fast Open when `first` is given: its bytes (as many as
/// the send buffer takes; how many is returned) are queued before the connection
/// is asked for, so that the SYN can carry them.
pub(crate) fn connect_fastopen(
    stack: Arc<Shared>,
    local: SocketAddr,
    remote: SocketAddr,
    buffers: Option<TcpBuffers>,
    first: Option<&[u8]>,
) -> io::Result<(TcpStream, usize)> {
    let home = crate::tcp::layer::flow_home(local, remote, stack.wake.len());
    let p = stack.cfg.load().tcp;
    let b = buffers
        .unwrap_or(TcpBuffers {
            send: p.sndbuf,
            recv: p.rcvbuf,
        })
        .clamped();
    let s = Arc::new(StreamShared::new(local, remote, home, b.send, b.recv));
    s.opt_nodelay.store(p.nodelay, Ordering::Release);
    s.opt_fastopen.store(first.is_some(), Ordering::Release);
    let q = stack
        .tcp_inbox
        .get(home)
        .ok_or_else(|| io::Error::other("no worker"))?;
    let stream = TcpStream::new(stack.clone(), s.clone());
    let n = match first {
        Some(data) if !data.is_empty() => stream.write_now(data).unwrap_or(0),
        _ => 0,
    };
    if q.push(TcpMsg::Connect(s)).is_err() {
        return Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            "worker inbox full",
        ));
    }
    stack.notify_worker(home);
    Ok((stream, n))
}
