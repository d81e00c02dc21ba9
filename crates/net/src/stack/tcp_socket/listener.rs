//! `TcpBound` and `TcpListener`: a socket bound and not yet listening, and a
//! listening one, whose accept queue the home worker fills; their TTL and TOS are
//! one state, kept in the `ListenShared` the first becomes the second with.

use super::{effective_ttl, valid_tos, valid_ttl, TcpBuffers, TcpStream};
use crate::stack::Shared;
use crate::tcp::chan::ListenShared;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A bound socket's or listener's TTL / hop limit and TOS / traffic class (one
/// state, shared by the `TcpBound` and the `TcpListener` it becomes).
fn listen_set_ttl(l: &ListenShared, ttl: u32) -> io::Result<()> {
    l.ttl.store(valid_ttl(ttl)?, Ordering::Release);
    Ok(())
}

fn listen_ttl(l: &ListenShared) -> io::Result<u32> {
    Ok(effective_ttl(l.ttl.load(Ordering::Acquire)))
}

fn listen_set_tos(l: &ListenShared, tos: u32) -> io::Result<()> {
    l.tos.store(valid_tos(tos)?, Ordering::Release);
    Ok(())
}

fn listen_tos(l: &ListenShared) -> io::Result<u32> {
    Ok(u32::from(l.tos.load(Ordering::Acquire)))
}

/// A TCP socket bound to an address and not yet listening
/// ([`Stack::tcp_bind`](crate::Stack::tcp_bind)): it takes no connection, and
/// the resets that refuse SYNs to its address carry its IP options, as a
/// FreeBSD socket's do between `bind(2)` and `listen(2)`. Dropping it frees the
/// address.
#[derive(Debug)]
pub struct TcpBound {
    stack: Arc<Shared>,
    l: Arc<ListenShared>,
}

impl TcpBound {
    pub(crate) fn new(stack: Arc<Shared>, l: Arc<ListenShared>) -> Self {
        TcpBound { stack, l }
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.l.local)
    }

    /// As [`TcpListener::set_ttl`]; the listener [`listen`](Self::listen)
    /// makes keeps it.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        listen_set_ttl(&self.l, ttl)
    }

    pub fn ttl(&self) -> io::Result<u32> {
        listen_ttl(&self.l)
    }

    /// As [`TcpListener::set_tos`]; the listener keeps it.
    pub fn set_tos(&self, tos: u32) -> io::Result<()> {
        listen_set_tos(&self.l, tos)
    }

    pub fn tos(&self) -> io::Result<u32> {
        listen_tos(&self.l)
    }

    /// `listen(2)`: a listener on the bound address (its port, if it was
    /// ephemeral) with its IP options, `backlog` and the accepted connections'
    /// `buffers` (`None`: the stack's). The address is free between the two
    /// for a moment, so a listener elsewhere may take it (`AddrInUse`).
    pub fn listen(
        self,
        backlog: usize,
        buffers: Option<TcpBuffers>,
    ) -> Result<TcpListener, crate::BindError> {
        let p = self.stack.cfg.load().tcp;
        let b = buffers.unwrap_or(TcpBuffers {
            send: p.sndbuf,
            recv: p.rcvbuf,
        });
        let (ttl, tos) = (
            self.l.ttl.load(Ordering::Acquire),
            self.l.tos.load(Ordering::Acquire),
        );
        let (stack, local) = (self.stack.clone(), self.l.local);
        drop(self);
        let l = crate::Stack::register_tcp(&stack, local, backlog, b, false)?;
        l.ttl.store(ttl, Ordering::Release);
        l.tos.store(tos, Ordering::Release);
        Ok(TcpListener::new(stack, l))
    }
}

impl Drop for TcpBound {
    fn drop(&mut self) {
        self.stack.tcp_unlisten(&self.l);
    }
}

/// A listening socket.
#[derive(Debug)]
pub struct TcpListener {
    stack: Arc<Shared>,
    l: Arc<ListenShared>,
    nonblocking: AtomicBool,
}

impl TcpListener {
    pub(crate) fn new(stack: Arc<Shared>, l: Arc<ListenShared>) -> Self {
        TcpListener {
            stack,
            l,
            nonblocking: AtomicBool::new(false),
        }
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.l.local)
    }

    /// Takes the next established connection, blocking unless non-blocking.
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        loop {
            match self.accept_now() {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => return r,
            }
            if self.nonblocking.load(Ordering::Relaxed) {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            self.l.wait(None);
        }
    }

    /// `accept` that never blocks: `WouldBlock` when no connection waits.
    pub(crate) fn accept_now(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let s = self.l.accept_q.pop().ok_or(io::ErrorKind::WouldBlock)?;
        let remote = s.remote;
        Ok((TcpStream::new(self.stack.clone(), s), remote))
    }

    /// Registers the accepting task (re-check after it).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn register(&self, waker: &std::task::Waker) {
        self.l.register(waker);
    }

    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        self.nonblocking.store(on, Ordering::Relaxed);
        Ok(())
    }

    /// `TCP_FASTOPEN` on a listener (RFC 7413's server, with the stack's
    /// `fastopen_server`, FreeBSD's `net.inet.tcp.fastopen.server_enable`): SYNs
    /// get cookies, and one with a valid cookie has its data taken and its
    /// connection ready to accept before the handshake completes, while fewer
    /// than `qlen` such wait for it (0 turns Fast Open off).
    pub fn set_fastopen(&self, qlen: usize) -> io::Result<()> {
        self.l.fastopen.store(qlen, Ordering::Release);
        Ok(())
    }

    /// The listener's Fast Open queue length (0: off).
    pub fn fastopen(&self) -> usize {
        self.l.fastopen.load(Ordering::Acquire)
    }

    /// `TCP_MAXSEG` on a listener: the connections its SYNs open from now on
    /// offer at most `mss` in their SYN-ACK and send segments of at most that
    /// (and of what the peer offers), as Linux's accepted sockets inherit
    /// `TCP_MAXSEG`; each may then lower its own ([`TcpStream::set_mss`]).
    /// Bounds as [`TcpStream::MSS_RANGE`], `InvalidInput` beyond.
    pub fn set_mss(&self, mss: u32) -> io::Result<()> {
        TcpStream::check_mss(mss)?;
        self.l.maxseg.store(mss, Ordering::Release);
        Ok(())
    }

    /// The listener's `TCP_MAXSEG`: what [`set_mss`](Self::set_mss) set, else
    /// the stack's MSS (the route's decides per connection).
    pub fn mss(&self) -> u32 {
        match self.l.maxseg.load(Ordering::Acquire) {
            0 => u32::from(self.stack.cfg.load().tcp.mss),
            m => m,
        }
    }

    /// Connections waiting for `accept`.
    pub fn pending(&self) -> usize {
        self.l.accept_q.len()
    }

    /// `IP_TTL` (IPv4) or `IPV6_UNICAST_HOPS` (IPv6), by the listener's family:
    /// the TTL or hop limit, 1 to 255, of its SYN-ACKs and resets and of the
    /// connections it accepts from now on, which inherit it as BSD sockets do
    /// (each may then set its own). `InvalidInput` out of range.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        listen_set_ttl(&self.l, ttl)
    }

    /// The TTL or hop limit it sends with (the stack's 64 unless set).
    pub fn ttl(&self) -> io::Result<u32> {
        listen_ttl(&self.l)
    }

    /// `IP_TOS` (IPv4) or `IPV6_TCLASS` (IPv6), by the listener's family: the
    /// DSCP (the byte's upper six bits; 0 to 255, `InvalidInput` beyond) of
    /// what it sends and of the connections it accepts from now on, which
    /// inherit it. The ECN bits are ignored: the stack sets ECT(0) on an ECN
    /// connection's data (RFC 3168).
    pub fn set_tos(&self, tos: u32) -> io::Result<()> {
        listen_set_tos(&self.l, tos)
    }

    /// The TOS or traffic class it sends with, ECN bits clear (0 unless set).
    pub fn tos(&self) -> io::Result<u32> {
        listen_tos(&self.l)
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        self.l.closed.store(true, Ordering::Release);
        self.stack.tcp_unlisten(&self.l);
        // Connections never accepted are closed (FreeBSD's soabort of the queue).
        while let Some(s) = self.l.accept_q.pop() {
            drop(TcpStream::new(self.stack.clone(), s));
        }
    }
}
