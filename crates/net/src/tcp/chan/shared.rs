//! The flags and options a connection's or listener's handle shares with its home
//! worker beside the byte channels: the phase and error the application sees, the
//! shutdowns, the socket options the worker applies when `opts_dirty` says so, the
//! parker the handle waits on, and a worker's overflow list of wake-ups.

use super::ByteChan;
use crate::park::{Interest, Parker};
use crossbeam_queue::ArrayQueue;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

/// A worker's overflow list: streams whose wake-up did not fit in its inbox. The flag
/// lets the worker look with one load per poll; the lock is taken only when it is up.
#[derive(Debug, Default)]
pub(crate) struct Overflow {
    any: AtomicBool,
    list: std::sync::Mutex<Vec<Arc<StreamShared>>>,
}

impl Overflow {
    /// Application side: queues a stream's wake-up.
    pub fn push(&self, s: Arc<StreamShared>) {
        self.list.lock().unwrap_or_else(|e| e.into_inner()).push(s);
        self.any.store(true, Ordering::Release);
    }

    /// Worker side: whether anything waits (a plain load).
    pub fn pending(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    /// Worker side: takes what waits.
    pub fn take(&self) -> Vec<Arc<StreamShared>> {
        if !self.any.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        std::mem::take(&mut *self.list.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Connection state as the application sees it.
pub(crate) mod phase {
    pub const CONNECTING: u8 = 0;
    pub const ESTABLISHED: u8 = 1;
    /// The connection is over (closed normally or with `error`).
    pub const CLOSED: u8 = 2;
}

/// Error codes carried in [`StreamShared::error`].
pub(crate) mod err {
    pub const NONE: u8 = 0;
    pub const REFUSED: u8 = 1;
    pub const RESET: u8 = 2;
    pub const TIMED_OUT: u8 = 3;
    pub const ABORTED: u8 = 4;
    pub const UNREACHABLE: u8 = 5;
}

/// The IP header fields a connection's segments carry, set by its socket
/// (`IP_TTL` / `IPV6_UNICAST_HOPS`, `IP_TOS` / `IPV6_TCLASS`): one pair, the
/// connection being of one family. A `ttl` of 0 is the stack's default (64);
/// `tos` has its ECN bits clear (ECT(0) on an ECN connection's data is the
/// stack's, RFC 3168 §6.1.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct IpOpts {
    pub ttl: u8,
    pub tos: u8,
}

impl IpOpts {
    /// The TTL or hop limit to send with.
    pub fn ttl_or(self, default: u8) -> u8 {
        if self.ttl == 0 {
            default
        } else {
            self.ttl
        }
    }
}

/// Shared by a `TcpStream` and its connection on the home worker.
#[derive(Debug)]
pub(crate) struct StreamShared {
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub home: usize,
    pub tx: ByteChan,
    pub rx: ByteChan,
    pub phase: AtomicU8,
    pub error: AtomicU8,
    /// The peer closed its side and every byte has been queued to `rx`.
    pub rx_eof: AtomicBool,
    /// The application shut down its sending side.
    pub wr_shut: AtomicBool,
    /// The application shut down its receiving side (`shutdown(SHUT_RD)`,
    /// FreeBSD's `socantrcvmore` and `sorflush`): reads return the end of the
    /// stream, and the worker acknowledges and discards what arrives.
    pub rd_shut: AtomicBool,
    /// A read or write reported `error` to the application: from then on reads
    /// return the end of the stream and writes `BrokenPipe`, as Linux's
    /// `sock_error` and FreeBSD's `soreceive` clear `so_error` once told.
    pub err_reported: AtomicBool,
    /// The application dropped its handle.
    pub dropped: AtomicBool,
    /// The application closed with a reset (`TcpStream::abort`, SO_LINGER 0).
    pub abort: AtomicBool,
    /// A wake-up message is already queued for the worker.
    pub queued: AtomicBool,
    /// Options the application set, applied by the worker when `opts_dirty`.
    pub opt_nodelay: AtomicBool,
    /// Keepalive idle time in nanoseconds; 0 = off.
    pub opt_keepalive_ns: AtomicU64,
    /// Bytes the application took out of `rx` to look at (`TcpStream::peek`) and
    /// has not read: unread, as what `rx` holds is.
    pub rx_peeked: AtomicUsize,
    /// Connection-establishment limit (`TCP_KEEPINIT`) in nanoseconds; 0 = the
    /// stack's.
    pub opt_keepinit_ns: AtomicU64,
    /// `TCP_NOOPT`: our SYN carries no options.
    pub opt_noopt: AtomicBool,
    /// `TCP_FASTOPEN` on a client: the SYN carries the first data (RFC 7413).
    /// Set before the connection is asked for.
    pub opt_fastopen: AtomicBool,
    /// The IP header's TTL (IPv4) or hop limit (IPv6) of its segments
    /// (`IP_TTL`, `IPV6_UNICAST_HOPS`); 0, the stack's default.
    pub opt_ttl: AtomicU8,
    /// The IP header's TOS (IPv4) or traffic class (IPv6) of its segments
    /// (`IP_TOS`, `IPV6_TCLASS`), its ECN bits clear: those are the stack's.
    pub opt_tos: AtomicU8,
    /// `SO_SNDBUF` and `SO_RCVBUF` set on the open connection (0: not set since
    /// it opened), for the control block's buffers.
    pub opt_sndbuf: AtomicUsize,
    pub opt_rcvbuf: AtomicUsize,
    /// `TCP_MAXSEG`: the largest segment the connection offers and sends (0:
    /// the interface's).
    pub opt_maxseg: AtomicU32,
    /// The MSS the connection sends with, as the worker last saw it (0 until
    /// it knows).
    pub mss: AtomicU32,
    /// `SO_RCVBUF` as the worker last saw it (0 until it has looked): the
    /// receive channel may be larger while a smaller size takes effect.
    pub rcvbuf: AtomicUsize,
    pub opts_dirty: AtomicBool,
    parker: Parker,
}

impl StreamShared {
    /// The IP header fields its socket set (`opt_ttl`, `opt_tos`).
    pub fn ip_opts(&self) -> IpOpts {
        IpOpts {
            ttl: self.opt_ttl.load(Ordering::Acquire),
            tos: self.opt_tos.load(Ordering::Acquire),
        }
    }

    /// Frees both byte channels' memory: for a connection whose application is
    /// gone (the caller holds the only reference). Returns whether any was held.
    pub fn release_channels(&mut self) -> bool {
        let tx = self.tx.release();
        let rx = self.rx.release();
        tx || rx
    }

    pub fn new(
        local: SocketAddr,
        remote: SocketAddr,
        home: usize,
        sndbuf: usize,
        rcvbuf: usize,
    ) -> Self {
        StreamShared {
            local,
            remote,
            home,
            tx: ByteChan::new(sndbuf),
            rx: ByteChan::new(rcvbuf),
            phase: AtomicU8::new(phase::CONNECTING),
            error: AtomicU8::new(err::NONE),
            rx_eof: AtomicBool::new(false),
            wr_shut: AtomicBool::new(false),
            rd_shut: AtomicBool::new(false),
            err_reported: AtomicBool::new(false),
            dropped: AtomicBool::new(false),
            abort: AtomicBool::new(false),
            queued: AtomicBool::new(false),
            opt_nodelay: AtomicBool::new(false),
            opt_keepalive_ns: AtomicU64::new(0),
            opt_keepinit_ns: AtomicU64::new(0),
            opt_noopt: AtomicBool::new(false),
            opt_fastopen: AtomicBool::new(false),
            opt_ttl: AtomicU8::new(0),
            opt_tos: AtomicU8::new(0),
            rx_peeked: AtomicUsize::new(0),
            opt_sndbuf: AtomicUsize::new(0),
            opt_rcvbuf: AtomicUsize::new(0),
            opt_maxseg: AtomicU32::new(0),
            mss: AtomicU32::new(0),
            rcvbuf: AtomicUsize::new(0),
            opts_dirty: AtomicBool::new(false),
            parker: Parker::default(),
        }
    }

    /// Wakes the application's parked thread and tasks (worker side).
    pub fn wake(&self) {
        self.parker.wake();
    }

    /// Wakes only a writer waiting for room (worker side).
    pub fn wake_writer(&self) {
        self.parker.wake_one(Interest::Write);
    }

    /// Wakes only a reader waiting for bytes (worker side).
    pub fn wake_reader(&self) {
        self.parker.wake_one(Interest::Read);
    }

    /// Parks the application until `ready()` or the deadline (app side).
    pub fn wait(
        &self,
        interest: Interest,
        deadline: Option<std::time::Instant>,
        ready: impl Fn() -> bool,
    ) -> bool {
        self.parker.wait(interest, deadline, ready)
    }

    /// Registers a task to wake on news (app side; re-check after it).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub fn register(&self, interest: Interest, waker: &std::task::Waker) {
        self.parker.register(interest, waker);
    }
}

/// Shared by a `TcpListener` and the workers that create its connections.
#[derive(Debug)]
pub(crate) struct ListenShared {
    pub id: u64,
    pub local: SocketAddr,
    /// Send and receive buffer sizes of the connections it accepts.
    pub buffers: (usize, usize),
    /// Established connections waiting for `accept`; while it is full, SYNs are
    /// dropped.
    pub accept_q: ArrayQueue<Arc<StreamShared>>,
    /// Connections in SYN_RECEIVED (the SYN queue), bounded by the backlog; beyond it
    /// SYNs are answered with cookies.
    pub half_open: AtomicUsize,
    pub backlog: usize,
    pub closed: AtomicBool,
    /// `TCP_FASTOPEN` (RFC 7413's server): the most connections opened by a SYN's
    /// data (a valid cookie) that may wait in SYN_RECEIVED at once; 0, off.
    pub fastopen: AtomicUsize,
    /// Bound, not listening (`bind(2)` before `listen(2)`): it takes no
    /// connection, and the resets that answer SYNs to it carry its `ttl` and
    /// `tos`, as a FreeBSD socket in CLOSED answers them (`tcp_dropwithreset`).
    pub bound_only: bool,
    /// `IP_TTL` / `IPV6_UNICAST_HOPS` of its SYN-ACKs and resets and of the
    /// connections it accepts; 0, the stack's default.
    pub ttl: AtomicU8,
    /// `IP_TOS` / `IPV6_TCLASS` of the same, ECN bits clear.
    pub tos: AtomicU8,
    /// `TCP_MAXSEG` of the connections it accepts: the most their SYN-ACK
    /// offers and they send; 0, the route's.
    pub maxseg: AtomicU32,
    parker: Parker,
}

impl ListenShared {
    pub fn new(id: u64, local: SocketAddr, backlog: usize, buffers: (usize, usize)) -> Self {
        let backlog = backlog.clamp(1, 65_536);
        ListenShared {
            id,
            local,
            buffers,
            accept_q: ArrayQueue::new(backlog),
            half_open: AtomicUsize::new(0),
            backlog,
            closed: AtomicBool::new(false),
            fastopen: AtomicUsize::new(0),
            bound_only: false,
            ttl: AtomicU8::new(0),
            tos: AtomicU8::new(0),
            maxseg: AtomicU32::new(0),
            parker: Parker::default(),
        }
    }

    /// The IP header fields its segments carry.
    pub fn ip_opts(&self) -> IpOpts {
        IpOpts {
            ttl: self.ttl.load(Ordering::Acquire),
            tos: self.tos.load(Ordering::Acquire),
        }
    }

    /// The `TCP_MAXSEG` its connections take, where set.
    pub fn user_mss(&self) -> Option<u16> {
        match self.maxseg.load(Ordering::Acquire) {
            0 => None,
            m => Some(m.min(u32::from(u16::MAX)) as u16),
        }
    }

    pub fn wake(&self) {
        self.parker.wake();
    }

    pub fn wait(&self, deadline: Option<std::time::Instant>) -> bool {
        self.parker
            .wait(Interest::Read, deadline, || !self.accept_q.is_empty())
    }

    /// Registers the accepting task (app side; re-check after it).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub fn register(&self, waker: &std::task::Waker) {
        self.parker.register(Interest::Read, waker);
    }
}
