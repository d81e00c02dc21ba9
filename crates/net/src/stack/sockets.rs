//! Sockets of a stack: binding UDP and ICMP echo sockets (ports, ephemeral ones
//! included) and letting them go, TCP listeners and bound sockets, and opening TCP
//! connections (the source address, the local port, Fast Open).

use super::config::{source_address, source_address6};
use super::socket::{BindError, PingSocket, SockKind, SockShared, UdpSocket};
use super::tcp_socket::{TcpBound, TcpBuffers, TcpListener, TcpStream};
use super::{NetConfig, Shared, Stack};
use crate::tcp::chan::ListenShared;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Shared {
    pub(crate) fn unbind(&self, s: &Arc<SockShared>) {
        self.update(|c| {
            match s.kind {
                SockKind::Udp => {
                    if let Some(v) = c.udp.get_mut(&s.local.port()) {
                        v.retain(|x| x.id != s.id);
                        if v.is_empty() {
                            c.udp.remove(&s.local.port());
                        }
                    }
                }
                SockKind::IcmpEcho => {
                    c.inet.echo.remove(&s.local.port());
                }
                SockKind::Netchannel => c.netchannels.retain(|x| x.sock.id != s.id),
            }
            // Datagrams still queued go out first: the home worker drops the socket
            // from its list once the queue is empty (`forget_drained`).
            s.closed.store(true, Ordering::Release);
            if s.txq.is_empty() {
                if let Some(v) = c.by_worker.get_mut(s.home) {
                    v.retain(|x| x.id != s.id);
                }
            }
        });
        self.notify_worker(s.home);
    }

    /// Removes a listener from the configuration.
    pub(crate) fn tcp_unlisten(&self, l: &Arc<ListenShared>) {
        self.update(|c| {
            if let Some(v) = c.tcp_listen.get_mut(&l.local.port()) {
                v.retain(|x| x.id != l.id);
                if v.is_empty() {
                    c.tcp_listen.remove(&l.local.port());
                }
            }
        });
    }

    /// Removes closed sockets whose send queues have drained from worker `w`'s list.
    pub(crate) fn forget_drained(&self, w: usize) {
        self.update(|c| {
            if let Some(v) = c.by_worker.get_mut(w) {
                v.retain(|x| !(x.closed.load(Ordering::Acquire) && x.txq.is_empty()));
            }
        });
    }

    fn bind(&self, kind: SockKind, local: SocketAddr) -> Result<Arc<SockShared>, BindError> {
        let id = self.next_sock_id.fetch_add(1, Ordering::Relaxed);
        let nworkers = self.wake.len();
        self.update(|c| {
            let ours = match local.ip() {
                IpAddr::V4(a) => a.is_unspecified() || c.is_local(a),
                IpAddr::V6(a) => {
                    a.is_unspecified() || c.ifaces.iter().any(|i| i.addr6(a).is_some())
                }
            };
            if !ours {
                return Err(BindError::AddrNotAvailable(local.ip()));
            }
            let mut port = local.port();
            // A port is taken per family: an IPv4 and an IPv6 socket may share it.
            let in_use = |c: &NetConfig, p: u16| match kind {
                SockKind::Udp => c.udp.get(&p).is_some_and(|v| {
                    v.iter().any(|s| {
                        s.local.is_ipv4() == local.is_ipv4()
                            && (s.local.ip().is_unspecified()
                                || local.ip().is_unspecified()
                                || s.local.ip() == local.ip())
                    })
                }),
                SockKind::IcmpEcho => c.inet.echo.contains_key(&p),
                SockKind::Netchannel => false,
            };
            if port == 0 {
                // Ephemeral range 49152-65535 (RFC 6335), scanned from a rolling cursor.
                let mut found = None;
                for _ in 0..16384 {
                    let p = 49152 + self.next_port.fetch_add(1, Ordering::Relaxed) % 16384;
                    if !in_use(c, p) {
                        found = Some(p);
                        break;
                    }
                }
                port = found.ok_or(BindError::NoPorts)?;
            } else if in_use(c, port) {
                return Err(BindError::AddrInUse(local));
            }
            let local = SocketAddr::new(local.ip(), port);
            let home = port as usize % nworkers;
            let s = Arc::new(SockShared::new(
                id,
                kind,
                local,
                home,
                self.params.socket_queue,
            ));
            match kind {
                SockKind::Udp => c.udp.entry(port).or_default().push(s.clone()),
                SockKind::IcmpEcho => {
                    c.inet.echo.insert(port, s.clone());
                }
                SockKind::Netchannel => unreachable!("netchannels open by netchan_open"),
            }
            c.by_worker[home].push(s.clone());
            Ok(s)
        })
    }
}

impl Stack {
    /// Binds a UDP socket (port 0: an ephemeral port).
    /// A UDP socket on `addr`, IPv4 or IPv6 (port 0: an ephemeral port). An IPv6
    /// socket, even on `[::]`, takes IPv6 datagrams only.
    pub fn udp_bind(&self, addr: impl Into<SocketAddr>) -> Result<UdpSocket, BindError> {
        let s = self.shared.bind(SockKind::Udp, addr.into())?;
        Ok(UdpSocket::new(self.shared.clone(), s))
    }

    /// Listens for TCP connections on `addr` (port 0: an ephemeral port) with room for
    /// `backlog` connections that are half open or not yet accepted. A SYN that
    /// finds `backlog` connections waiting for `accept` is dropped unanswered (and
    /// counted in `tcp.listendrop`), for the client to send again.
    /// IPv4 or IPv6; a listener on `[::]` takes IPv6 connections only (FreeBSD's
    /// `v6only`), so a dual-stack server listens twice.
    pub fn tcp_listen(
        &self,
        addr: impl Into<SocketAddr>,
        backlog: usize,
    ) -> Result<TcpListener, BindError> {
        let p = self.shared.cfg.load().tcp;
        let b = TcpBuffers {
            send: p.sndbuf,
            recv: p.rcvbuf,
        };
        self.tcp_listen_with(addr, backlog, b)
    }

    /// Like [`Stack::tcp_listen`], with the buffer sizes of the accepted connections.
    pub fn tcp_listen_with(
        &self,
        addr: impl Into<SocketAddr>,
        backlog: usize,
        buffers: TcpBuffers,
    ) -> Result<TcpListener, BindError> {
        let l = Self::register_tcp(&self.shared, addr.into(), backlog, buffers, false)?;
        Ok(TcpListener::new(self.shared.clone(), l))
    }

    /// `bind(2)` of a TCP socket that is to listen (FreeBSD's socket in CLOSED):
    /// holds `addr` (port 0: an ephemeral port) without taking connections, and
    /// SYNs to it are answered with resets that carry the IP options set on it
    /// ([`TcpBound::set_ttl`], [`TcpBound::set_tos`]);
    /// [`TcpBound::listen`] then listens there, with them. Fails where a
    /// listener or another bound socket of the family holds the address.
    pub fn tcp_bind(&self, addr: impl Into<SocketAddr>) -> Result<TcpBound, BindError> {
        let p = self.shared.cfg.load().tcp;
        let b = TcpBuffers {
            send: p.sndbuf,
            recv: p.rcvbuf,
        };
        let l = Self::register_tcp(&self.shared, addr.into(), 1, b, true)?;
        Ok(TcpBound::new(self.shared.clone(), l))
    }

    /// Enters a listener (or, `bound_only`, a socket only bound) in the
    /// configuration: a listener conflicts with listeners, a bound socket with
    /// listeners and bound sockets alike.
    pub(crate) fn register_tcp(
        shared: &Arc<Shared>,
        addr: SocketAddr,
        backlog: usize,
        buffers: TcpBuffers,
        bound_only: bool,
    ) -> Result<Arc<ListenShared>, BindError> {
        let b = buffers.clamped();
        let id = shared.next_sock_id.fetch_add(1, Ordering::Relaxed);
        shared.update(|c| {
            if !addr.ip().is_unspecified() && !c.is_local_ip(addr.ip()) {
                return Err(BindError::AddrNotAvailable(addr.ip()));
            }
            // Per family, as for UDP.
            let in_use = |c: &NetConfig, p: u16| {
                c.tcp_listen.get(&p).is_some_and(|v| {
                    v.iter().any(|l| {
                        (bound_only || !l.bound_only)
                            && l.local.is_ipv4() == addr.is_ipv4()
                            && (l.local.ip().is_unspecified()
                                || addr.ip().is_unspecified()
                                || l.local.ip() == addr.ip())
                    })
                })
            };
            let mut port = addr.port();
            if port == 0 {
                port = (0..16384)
                    .map(|_| 49152 + shared.next_port.fetch_add(1, Ordering::Relaxed) % 16384)
                    .find(|p| !in_use(c, *p))
                    .ok_or(BindError::NoPorts)?;
            } else if in_use(c, port) {
                return Err(BindError::AddrInUse(addr));
            }
            let mut l = ListenShared::new(
                id,
                SocketAddr::new(addr.ip(), port),
                backlog,
                (b.send, b.recv),
            );
            l.bound_only = bound_only;
            let l = Arc::new(l);
            c.tcp_listen.entry(port).or_default().push(l.clone());
            Ok(l)
        })
    }

    /// Opens a TCP connection and waits for the handshake (at most `timeout`; `None`:
    /// until the SYN retries give up). Needs running workers (`start`); in a simulation
    /// use [`Stack::tcp_connect_nonblocking`].
    pub fn tcp_connect(
        &self,
        remote: impl Into<SocketAddr>,
        timeout: Option<std::time::Duration>,
    ) -> io::Result<TcpStream> {
        let s = self.tcp_connect_nonblocking(remote)?;
        s.wait_connected(timeout)?;
        Ok(s)
    }

    /// The source address for a connection to `remote`, or why there is none.
    fn tcp_source(&self, remote: SocketAddr) -> io::Result<IpAddr> {
        let cfg = self.shared.cfg.load();
        let fib = self.shared.fib.load();
        // The address of the interface the FIB's route leaves by, as ip_output
        // picks it; then the host's own rules (default gateway, ND's routers).
        let by_route = match remote.ip() {
            IpAddr::V4(d) => fib.lookup4(d, || 0),
            IpAddr::V6(d) => fib.lookup6(d, || 0),
        }
        .filter(|n| n.kind == route::NhKind::Forward)
        .and_then(|n| cfg.ifaces.get(n.ifindex as usize))
        .and_then(|i| match remote.ip() {
            IpAddr::V4(d) => i.source_for(d).map(IpAddr::V4),
            IpAddr::V6(d) => i.source6_for(d).map(IpAddr::V6),
        });
        let src = match remote.ip() {
            a if cfg.is_local_ip(a) => Some(a),
            _ if by_route.is_some() => by_route,
            IpAddr::V4(d) => source_address(&cfg, d).map(IpAddr::V4),
            IpAddr::V6(d) => source_address6(&cfg, d).map(IpAddr::V6),
        };
        src.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NetworkUnreachable,
                format!("no route to {}", remote.ip()),
            )
        })
    }

    /// Starts a TCP connection; the stream becomes writable and readable once
    /// [`TcpStream::is_connected`] (writes before that are queued).
    pub fn tcp_connect_nonblocking(&self, remote: impl Into<SocketAddr>) -> io::Result<TcpStream> {
        let remote = remote.into();
        let src = self.tcp_source(remote)?;
        let port = 49152 + self.shared.next_port.fetch_add(1, Ordering::Relaxed) % 16384;
        crate::stack::tcp_socket::connect(
            self.shared.clone(),
            SocketAddr::new(src, port),
            remote,
            None,
        )
    }

    /// Starts a TCP connection with its own buffer sizes (`SO_SNDBUF`/`SO_RCVBUF`
    /// before `connect`), from `local_port` if given (else an ephemeral port).
    pub fn tcp_connect_with(
        &self,
        remote: impl Into<SocketAddr>,
        local_port: Option<u16>,
        buffers: TcpBuffers,
    ) -> io::Result<TcpStream> {
        let remote = remote.into();
        let src = self.tcp_source(remote)?;
        let port = match local_port {
            Some(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "local port 0: pass None for an ephemeral port",
                ))
            }
            Some(p) => p,
            None => 49152 + self.shared.next_port.fetch_add(1, Ordering::Relaxed) % 16384,
        };
        crate::stack::tcp_socket::connect(
            self.shared.clone(),
            SocketAddr::new(src, port),
            remote,
            Some(buffers),
        )
    }

    /// Starts a TCP connection with Fast Open (RFC 7413; FreeBSD's `sendto` on an
    /// unconnected socket with `TCP_FASTOPEN`): `data` is queued first (the count
    /// taken is returned, up to the send buffer), and the SYN carries it when the
    /// stack holds a cookie from the server, else asks for one and the data goes
    /// after the handshake (as it does when the server turns the cookie down).
    /// Needs the stack's `fastopen_client` (on by default; off, a plain
    /// connection). From `local_port` if given, with `buffers` if given.
    pub fn tcp_connect_fastopen(
        &self,
        remote: impl Into<SocketAddr>,
        local_port: Option<u16>,
        buffers: Option<TcpBuffers>,
        data: &[u8],
    ) -> io::Result<(TcpStream, usize)> {
        let remote = remote.into();
        let src = self.tcp_source(remote)?;
        let port = match local_port {
            Some(0) | None => 49152 + self.shared.next_port.fetch_add(1, Ordering::Relaxed) % 16384,
            Some(p) => p,
        };
        crate::stack::tcp_socket::connect_fastopen(
            self.shared.clone(),
            SocketAddr::new(src, port),
            remote,
            buffers,
            Some(data),
        )
    }

    /// Like [`Stack::tcp_connect_nonblocking`], from a chosen local port (bind, then
    /// connect). A 4-tuple still in use is refused; one in TIME_WAIT at the peer is
    /// taken over when the peer's rules allow (RFC 6191).
    pub fn tcp_connect_from_nonblocking(
        &self,
        local_port: u16,
        remote: impl Into<SocketAddr>,
    ) -> io::Result<TcpStream> {
        let remote = remote.into();
        if local_port == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "local port 0: use tcp_connect_nonblocking for an ephemeral port",
            ));
        }
        let src = self.tcp_source(remote)?;
        crate::stack::tcp_socket::connect(
            self.shared.clone(),
            SocketAddr::new(src, local_port),
            remote,
            None,
        )
    }

    /// Opens an ICMP echo socket with identifier `ident` (0: any free one).
    pub fn ping_socket(&self, ident: u16) -> Result<PingSocket, BindError> {
        let s = self.shared.bind(
            SockKind::IcmpEcho,
            SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, ident)),
        )?;
        Ok(PingSocket::new(self.shared.clone(), s))
    }
}
