//! The socket's shared half: the bounded queues between an application handle and
//! the socket's home worker (a netchannel), and what travels in them. The worker's
//! protocols (UDP, ICMP echo) fill and drain them; the handles in `stack::socket`
//! are the application's side. Here, below every family, as FreeBSD's socket
//! buffers are in `kern/`, below `netinet/`.

use crate::park::Parker;
use crossbeam_queue::ArrayQueue;
use mbuf::Mbuf;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The TTL and hop limit of what the stack sends by default.
pub(crate) const DEFAULT_TTL: u8 = 64;

/// What kind of endpoint a socket is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SockKind {
    Udp,
    /// ICMP echo, keyed by identifier (Linux "ping sockets").
    IcmpEcho,
    /// A netchannel (`crate::netchan`): whole IP packets each way.
    Netchannel,
}

/// A received datagram: the payload bytes and who sent it.
#[derive(Debug)]
pub(crate) struct RxDatagram {
    pub m: Mbuf,
    pub from: SocketAddr,
    /// For ICMP echo: the sequence number.
    pub seq: u16,
}

/// A datagram to send.
#[derive(Debug)]
pub(crate) struct TxDatagram {
    pub m: Mbuf,
    pub to: SocketAddr,
    pub seq: u16,
}

/// State shared between an application handle and the home worker.
#[derive(Debug)]
pub(crate) struct SockShared {
    pub id: u64,
    pub kind: SockKind,
    /// Local address, IPv4 or IPv6 (a socket is of one family: an unspecified IPv6
    /// address takes IPv6 only, as FreeBSD's `net.inet6.ip6.v6only`); the port is
    /// the ICMP identifier for echo sockets.
    pub local: SocketAddr,
    pub home: usize,
    pub rxq: ArrayQueue<RxDatagram>,
    pub txq: ArrayQueue<TxDatagram>,
    pub parker: Parker,
    /// Datagrams the application could not queue (send buffer full).
    pub tx_full: AtomicU64,
    /// The application closed the socket with datagrams still queued: the home worker
    /// sends them, then forgets the socket (a close does not discard sent data).
    pub closed: AtomicBool,
    /// Datagrams leave with Don't Fragment set (FreeBSD's `IP_DONTFRAG`).
    pub dontfrag: AtomicBool,
    /// TTL / hop limit of what it sends (`IP_TTL`, `IPV6_UNICAST_HOPS`); 0: the
    /// default (64).
    pub ttl: std::sync::atomic::AtomicU8,
}

impl SockShared {
    /// The TTL (or hop limit) to send with.
    pub(crate) fn ttl_or_default(&self) -> u8 {
        match self.ttl.load(Ordering::Relaxed) {
            0 => DEFAULT_TTL,
            t => t,
        }
    }
}

impl SockShared {
    pub fn new(id: u64, kind: SockKind, local: SocketAddr, home: usize, cap: usize) -> Self {
        SockShared {
            id,
            kind,
            local,
            home,
            rxq: ArrayQueue::new(cap.max(1)),
            txq: ArrayQueue::new(cap.max(1)),
            parker: Parker::default(),
            tx_full: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            dontfrag: AtomicBool::new(false),
            ttl: std::sync::atomic::AtomicU8::new(0),
        }
    }

    /// Wakes the application's parked thread and tasks, if any (worker side).
    pub fn wake(&self) {
        self.parker.wake();
    }
}
