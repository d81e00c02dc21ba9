//! packetdrill's system calls on the stack under test (the [`Host`] trait): sockets,
//! their options, reads and writes, poll and epoll, pipes, and the raw port
//! (`netdev_send`, `netdev_receive`) of packetdrill's side of the wire.

use super::*;

impl Host for Shim {
    fn socket(&self, domain: i32, ty: i32, protocol: i32) -> Result<i32, Errno> {
        let v6 = match domain {
            libc::AF_INET => false,
            libc::AF_INET6 => true,
            _ => return Err(libc::EAFNOSUPPORT),
        };
        let base = ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
        if base != libc::SOCK_STREAM || !(protocol == 0 || protocol == libc::IPPROTO_TCP) {
            return Err(libc::EPROTONOSUPPORT);
        }
        let mut g = self.lock();
        Ok(g.new_fd(Fd {
            sock: Sock::Fresh {
                bound: None,
                held: None,
            },
            v6,
            nonblock: ty & libc::SOCK_NONBLOCK != 0,
            opts: Opts::default(),
            connecting: false,
        }))
    }

    fn bind(&self, fd: i32, addr: SocketAddr) -> Result<(), Errno> {
        let mut g = self.lock();
        let local_ok = addr.ip().is_unspecified() || g.stack().config().is_local_ip(addr.ip());
        let f = g.fd(fd)?;
        if addr.is_ipv6() != f.v6 {
            return Err(libc::EAFNOSUPPORT);
        }
        if !matches!(f.sock, Sock::Fresh { bound: None, .. }) {
            return Err(libc::EINVAL);
        }
        if !local_ok {
            return Err(libc::EADDRNOTAVAIL);
        }
        let opts = f.opts;
        let held = g.stack().tcp_bind(addr).ok();
        if let Some(h) = &held {
            opts.apply_ip(h);
        }
        g.fd(fd)?.sock = Sock::Fresh {
            bound: Some(addr),
            held,
        };
        Ok(())
    }

    fn listen(&self, fd: i32, backlog: i32) -> Result<(), Errno> {
        let mut g = self.lock();
        let f = g.fds.remove(&fd).ok_or(libc::EBADF)?;
        let (r, f) = match f.sock {
            Sock::Fresh { bound, held } => {
                let any: SocketAddr = if f.v6 {
                    (Ipv6Addr::UNSPECIFIED, 0).into()
                } else {
                    (Ipv4Addr::UNSPECIFIED, 0).into()
                };
                let b = g.buffers(&f.opts);
                let backlog = (backlog.max(1) as usize).min(MAX_BACKLOG);
                let l = match held {
                    // The bound socket listens, with its IP options.
                    Some(h) => h.listen(backlog, Some(b)),
                    None => g.stack().tcp_listen_with(bound.unwrap_or(any), backlog, b),
                };
                match l {
                    Ok(l) => {
                        let _ = l.set_nonblocking(true);
                        f.opts.apply_ip(&l);
                        let _ = l.set_fastopen(f.opts.fastopen.max(0) as usize);
                        if let Some(m) = f.opts.maxseg {
                            let _ = l.set_mss(m);
                        }
                        (
                            Ok(()),
                            Fd {
                                sock: Sock::Listener(l),
                                ..f
                            },
                        )
                    }
                    Err(e) => (
                        Err(bind_errno(e)),
                        Fd {
                            sock: Sock::Fresh { bound, held: None },
                            ..f
                        },
                    ),
                }
            }
            Sock::Listener(_) => (Ok(()), f),
            Sock::Stream(_) => (Err(libc::EINVAL), f),
            Sock::Pipe { .. } | Sock::Epoll(_) => (Err(libc::ENOTSOCK), f),
        };
        g.fds.insert(fd, f);
        r
    }

    fn accept(&self, fd: i32) -> Result<(i32, SocketAddr), Errno> {
        let (s, peer, v6, opts) = self.blocking(fd, false, |_, f| match &f.sock {
            Sock::Listener(l) => match l.accept() {
                Ok((s, peer)) => Ok((s, peer, f.v6, f.opts)),
                Err(e) => Err(errno_of(&e)),
            },
            _ => Err(libc::EINVAL),
        })?;
        let _ = s.set_nonblocking(true);
        let mut g = self.lock();
        opts.apply(&s, &g.stack().tcp_config());
        let n = g.new_fd(Fd {
            sock: Sock::Stream(s),
            v6,
            nonblock: false,
            opts,
            connecting: false,
        });
        Ok((n, peer))
    }

    fn connect(&self, fd: i32, addr: SocketAddr) -> Result<(), Errno> {
        {
            let mut g = self.lock();
            let f = g.fds.remove(&fd).ok_or(libc::EBADF)?;
            let f = match f.sock {
                Sock::Fresh { bound, held } => {
                    if addr.is_ipv6() != f.v6 {
                        g.fds.insert(
                            fd,
                            Fd {
                                sock: Sock::Fresh { bound, held },
                                ..f
                            },
                        );
                        return Err(libc::EAFNOSUPPORT);
                    }
                    // The bound socket gives way to the connection.
                    drop(held);
                    let b = g.buffers(&f.opts);
                    let port = bound.map(|a| a.port()).filter(|p| *p != 0);
                    match g.stack().tcp_connect_with(addr, port, b) {
                        Ok(s) => {
                            let _ = s.set_nonblocking(true);
                            f.opts.apply(&s, &g.stack().tcp_config());
                            Fd {
                                sock: Sock::Stream(s),
                                connecting: true,
                                ..f
                            }
                        }
                        Err(e) => {
                            g.fds.insert(
                                fd,
                                Fd {
                                    sock: Sock::Fresh { bound, held: None },
                                    ..f
                                },
                            );
                            return Err(errno_of(&e));
                        }
                    }
                }
                Sock::Listener(_) => {
                    g.fds.insert(fd, f);
                    return Err(libc::EISCONN);
                }
                Sock::Pipe { .. } | Sock::Epoll(_) => {
                    g.fds.insert(fd, f);
                    return Err(libc::ENOTSOCK);
                }
                Sock::Stream(ref s) => {
                    let r = match s.take_error() {
                        Ok(Some(e)) => Err(errno_of(&e)),
                        _ if s.is_connected() => Err(libc::EISCONN),
                        _ => Err(libc::EALREADY),
                    };
                    g.fds.insert(fd, f);
                    return r;
                }
            };
            let nonblock = f.nonblock;
            g.fds.insert(fd, f);
            // The SYN goes out now.
            let now = g.sim.now();
            g.advance_to(now);
            self.cv.notify_all();
            if nonblock {
                return Err(libc::EINPROGRESS);
            }
        }
        self.blocking(fd, false, |_, f| match &f.sock {
            Sock::Stream(s) => match s.take_error() {
                Ok(Some(e)) => Err(errno_of(&e)),
                _ if s.is_connected() => {
                    f.connecting = false;
                    Ok(())
                }
                _ => Err(libc::EAGAIN),
            },
            _ => Err(libc::EBADF),
        })
    }

    fn recv(
        &self,
        fd: i32,
        buf: &mut [u8],
        flags: i32,
    ) -> Result<(usize, Option<SocketAddr>), Errno> {
        if flags & !(libc::MSG_DONTWAIT | libc::MSG_PEEK) != 0 {
            return Err(libc::EOPNOTSUPP);
        }
        let dontwait = flags & libc::MSG_DONTWAIT != 0;
        let peek = flags & libc::MSG_PEEK != 0;
        let r = self.blocking(fd, dontwait, |st, f| match &f.sock {
            Sock::Pipe { write: true, .. } => Err(libc::EBADF),
            Sock::Pipe { id, .. } => {
                let p = st.pipes.get_mut(id).ok_or(libc::EBADF)?;
                if p.data.is_empty() {
                    // The end once no writer is left.
                    return if p.writers == 0 {
                        Ok((0, None))
                    } else {
                        Err(libc::EAGAIN)
                    };
                }
                let n = buf.len().min(p.data.len());
                for (d, b) in buf.iter_mut().zip(p.data.iter()) {
                    *d = *b;
                }
                if !peek {
                    p.data.drain(..n);
                }
                Ok((n, None))
            }
            Sock::Stream(s) => {
                let got = if peek {
                    s.peek(buf)
                } else {
                    let mut s: &TcpStream = s;
                    s.read(buf)
                };
                match got {
                    Ok(n) => Ok((n, s.peer_addr().ok())),
                    Err(e) => Err(errno_of(&e)),
                }
            }
            _ => Err(libc::ENOTCONN),
        });
        self.kick();
        r
    }

    fn send(
        &self,
        fd: i32,
        buf: &[u8],
        flags: i32,
        to: Option<SocketAddr>,
    ) -> Result<usize, Errno> {
        if flags & !(libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) != 0 {
            return Err(libc::EOPNOTSUPP);
        }
        if let Some(addr) = to {
            if let Some(r) = self.sendto_fastopen(fd, buf, addr) {
                return r;
            }
        }
        let dontwait = flags & libc::MSG_DONTWAIT != 0;
        // A blocking descriptor's write queues all of `buf` (POSIX), waiting for
        // room as often as it takes; a short count only when it fails after
        // part was queued (the error is the next call's).
        let mut done = 0;
        let r = self.blocking(fd, dontwait, |st, f| {
            let all = !(f.nonblock || dontwait);
            let n = match &f.sock {
                Sock::Stream(s) => {
                    let mut s: &TcpStream = s;
                    match s.write(&buf[done..]) {
                        Ok(n) => n,
                        Err(e) if done > 0 && e.kind() != io::ErrorKind::WouldBlock => {
                            return Ok(done);
                        }
                        Err(e) => return Err(errno_of(&e)),
                    }
                }
                Sock::Pipe { write: false, .. } => return Err(libc::EBADF),
                Sock::Pipe { id, .. } => {
                    let p = st.pipes.get_mut(id).ok_or(libc::EBADF)?;
                    if p.readers == 0 {
                        return if done > 0 { Ok(done) } else { Err(libc::EPIPE) };
                    }
                    let n = (PIPE_BUF_MAX - p.data.len().min(PIPE_BUF_MAX)).min(buf.len() - done);
                    p.data.extend(&buf[done..done + n]);
                    n
                }
                Sock::Epoll(_) => return Err(libc::EINVAL),
                Sock::Fresh { .. } | Sock::Listener(_) => return Err(libc::ENOTCONN),
            };
            done += n;
            if done == buf.len() || (!all && n > 0) {
                Ok(done)
            } else {
                // Waits (blocking) or says EAGAIN (non-blocking, nothing taken).
                Err(libc::EAGAIN)
            }
        });
        let r = match r {
            Err(libc::EAGAIN) if done > 0 => Ok(done),
            r => r,
        };
        self.kick();
        r
    }

    fn fcntl(&self, fd: i32, cmd: i32, arg: i64) -> Result<i32, Errno> {
        let mut g = self.lock();
        let f = g.fd(fd)?;
        match cmd {
            libc::F_GETFL => Ok(libc::O_RDWR | if f.nonblock { libc::O_NONBLOCK } else { 0 }),
            libc::F_SETFL => {
                f.nonblock = arg & i64::from(libc::O_NONBLOCK) != 0;
                Ok(0)
            }
            libc::F_GETFD | libc::F_SETFD => Ok(0),
            _ => Err(libc::EINVAL),
        }
    }

    fn ioctl(&self, fd: i32, request: u64) -> Result<i32, Errno> {
        let mut g = self.lock();
        let f = g.fd(fd)?;
        match (request, &f.sock) {
            (libc::FIONREAD, Sock::Stream(s)) => Ok(s.available().min(i32::MAX as usize) as i32),
            (libc::FIONREAD, _) => Ok(0),
            _ => Err(libc::ENOTTY),
        }
    }

    fn close(&self, fd: i32) -> Result<(), Errno> {
        let mut g = self.lock();
        let f = g.fds.remove(&fd).ok_or(libc::EBADF)?;
        if let Sock::Pipe { id, write } = f.sock {
            if let Some(p) = g.pipes.get_mut(&id) {
                if write {
                    p.writers -= 1;
                } else {
                    p.readers -= 1;
                }
                if p.readers == 0 && p.writers == 0 {
                    g.pipes.remove(&id);
                }
            }
        }
        // Epoll instances stop watching it (Linux: once its last reference goes).
        for e in g.fds.values_mut() {
            if let Sock::Epoll(w) = &mut e.sock {
                w.remove(&fd);
            }
        }
        drop(f);
        // What closing sends (a FIN, a RST) leaves now.
        let now = g.sim.now();
        g.advance_to(now);
        self.cv.notify_all();
        Ok(())
    }

    fn shutdown(&self, fd: i32, how: i32) -> Result<(), Errno> {
        let mut g = self.lock();
        let f = g.fd(fd)?;
        let how = match how {
            libc::SHUT_RD => std::net::Shutdown::Read,
            libc::SHUT_WR => std::net::Shutdown::Write,
            libc::SHUT_RDWR => std::net::Shutdown::Both,
            _ => return Err(libc::EINVAL),
        };
        let r = match &f.sock {
            Sock::Stream(s) => s.shutdown(how).map_err(|e| errno_of(&e)),
            _ => Err(libc::ENOTCONN),
        };
        let now = g.sim.now();
        g.advance_to(now);
        self.cv.notify_all();
        r
    }

    fn getsockopt(&self, fd: i32, level: i32, name: i32, val: &mut [u8]) -> Result<usize, Errno> {
        let mut g = self.lock();
        if (level, name) == (libc::IPPROTO_TCP, libc::TCP_INFO) {
            // The connection's control block, through the stack's connection list.
            let now = g.sim.now();
            let v6 = g.fd(fd)?.v6;
            let ends = match &g.fd(fd)?.sock {
                Sock::Stream(s) => (s.local_addr(), s.peer_addr()),
                // Linux answers for a listener too (its state LISTEN).
                Sock::Listener(_) => return Ok(linux_tcp_info(InfoOf::Listener, now, false, val)),
                Sock::Pipe { .. } | Sock::Epoll(_) => return Err(libc::EOPNOTSUPP),
                Sock::Fresh { .. } => return Err(libc::ENOTCONN),
            };
            let (Ok(local), Ok(remote)) = ends else {
                return Err(libc::ENOTCONN);
            };
            let q = g.stack().tcp_connections_ask();
            let list = g.answer(q).map_err(|_| libc::EIO)?;
            let info = list
                .iter()
                .find(|c| c.local == local && c.remote == remote)
                .and_then(|c| c.info);
            return Ok(linux_tcp_info(InfoOf::Conn(info), now, v6, val));
        }
        // Linux's TCP_CC_INFO: nothing for a congestion control without it (as
        // Linux answers for CUBIC), which packetdrill's code blocks take.
        if (level, name) == (libc::IPPROTO_TCP, libc::TCP_CC_INFO) {
            return Ok(0);
        }
        // Linux's SO_MEMINFO (nine counters): the buffer sizes, the rest zero.
        if (level, name) == (libc::SOL_SOCKET, libc::SO_MEMINFO) {
            let (send, recv) = match &g.fd(fd)?.sock {
                Sock::Stream(s) => (s.send_buffer_size(), s.recv_buffer_size()),
                _ => (0, 0),
            };
            let mut m = [0u8; 36];
            m[4..8].copy_from_slice(&(recv as u32).to_ne_bytes());
            m[12..16].copy_from_slice(&(send as u32).to_ne_bytes());
            let n = val.len().min(m.len());
            val[..n].copy_from_slice(&m[..n]);
            return Ok(n);
        }
        let bufs = {
            let f = g.fd(fd)?;
            f.opts
        };
        if let Some(is_ttl) = ip_opt(level, name, g.fd(fd)?.v6) {
            let f = g.fd(fd)?;
            let v = match (&f.sock, is_ttl) {
                (Sock::Stream(s), true) => s.ttl(),
                (Sock::Stream(s), false) => s.tos(),
                (Sock::Listener(l), true) => l.ttl(),
                (Sock::Listener(l), false) => l.tos(),
                (Sock::Fresh { held: Some(h), .. }, true) => h.ttl(),
                (Sock::Fresh { held: Some(h), .. }, false) => h.tos(),
                (Sock::Fresh { held: None, .. }, true) => Ok(f.opts.ttl.map_or(64, u32::from)),
                (Sock::Fresh { held: None, .. }, false) => Ok(f.opts.tos.map_or(0, u32::from)),
                (Sock::Pipe { .. } | Sock::Epoll(_), _) => return Err(libc::ENOTSOCK),
            }
            .map_err(|e| errno_of(&e))?;
            let bytes = (v as i32).to_ne_bytes();
            let n = val.len().min(4);
            val[..n].copy_from_slice(&bytes[..n]);
            return Ok(n);
        }
        let b = g.buffers(&bufs);
        let cfg = g.stack().tcp_config();
        let f = g.fd(fd)?;
        let v: i32 =
            match (level, name) {
                (libc::SOL_SOCKET, libc::SO_ERROR) => match &f.sock {
                    Sock::Stream(s) => match s.take_error() {
                        Ok(Some(e)) => errno_of(&e),
                        _ => 0,
                    },
                    _ => 0,
                },
                (libc::SOL_SOCKET, libc::SO_TYPE) => libc::SOCK_STREAM,
                (libc::SOL_SOCKET, libc::SO_ACCEPTCONN) => {
                    i32::from(matches!(f.sock, Sock::Listener(_)))
                }
                (libc::SOL_SOCKET, libc::SO_REUSEADDR) => i32::from(f.opts.reuseaddr),
                (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => i32::from(f.opts.keepalive),
                (libc::IPPROTO_TCP, TCP_KEEPINIT) => {
                    f.opts.keepinit.unwrap_or(cfg.keep_init.as_secs() as u32) as i32
                }
                (libc::IPPROTO_TCP, TCP_NOOPT) => i32::from(f.opts.noopt),
                (libc::IPPROTO_TCP, libc::TCP_FASTOPEN) => match &f.sock {
                    Sock::Listener(l) => l.fastopen() as i32,
                    _ => f.opts.fastopen,
                },
                (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) => f.opts.idle(&cfg).as_secs() as i32,
                (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL) => cfg.keepalive_interval.as_secs() as i32,
                (libc::IPPROTO_TCP, libc::TCP_KEEPCNT) => cfg.keepalive_probes as i32,
                // A connection's own sizes: rounded to whole segments once it has an MSS.
                (libc::SOL_SOCKET, libc::SO_SNDBUF) => match &f.sock {
                    Sock::Stream(s) => s.send_buffer_size() as i32,
                    _ => b.send as i32,
                },
                (libc::SOL_SOCKET, libc::SO_RCVBUF) => match &f.sock {
                    Sock::Stream(s) => s.recv_buffer_size() as i32,
                    _ => b.recv as i32,
                },
                (libc::IPPROTO_TCP, libc::TCP_NODELAY) => match &f.sock {
                    Sock::Stream(s) => i32::from(s.nodelay().unwrap_or(false)),
                    _ => i32::from(f.opts.nodelay),
                },
                // The MSS in use (FreeBSD's t_maxseg); before a connection, what was
                // set or the stack's for the family.
                (libc::IPPROTO_TCP, libc::TCP_MAXSEG) => match &f.sock {
                    Sock::Stream(s) => s.mss() as i32,
                    _ => f.opts.maxseg.unwrap_or_else(|| {
                        u32::from(cfg.mss).saturating_sub(if f.v6 { 20 } else { 0 })
                    }) as i32,
                },
                _ => return Err(libc::ENOPROTOOPT),
            };
        let bytes = v.to_ne_bytes();
        let n = val.len().min(4);
        val[..n].copy_from_slice(&bytes[..n]);
        Ok(n)
    }

    fn setsockopt(&self, fd: i32, level: i32, name: i32, val: &[u8]) -> Result<(), Errno> {
        let v = match val {
            [a, b, c, d, ..] => i32::from_ne_bytes([*a, *b, *c, *d]),
            _ => return Err(libc::EINVAL),
        };
        let mut g = self.lock();
        let cfg = g.stack().tcp_config();
        let f = g.fd(fd)?;
        if let Some(is_ttl) = ip_opt(level, name, f.v6) {
            // -1: the default (64; a TOS of 0), as Linux and FreeBSD's IPv6
            // options take it; then a TTL of 1 to 255 (IPv6's hop limit of 0,
            // which FreeBSD takes, is refused) and a byte of TOS; EINVAL beyond.
            let v = match (v, is_ttl) {
                (-1, true) => 64,
                (-1, false) => 0,
                (v, _) => u32::try_from(v).map_err(|_| libc::EINVAL)?,
            };
            let h: Option<&dyn IpOptions> = match &f.sock {
                Sock::Stream(s) => Some(s),
                Sock::Listener(l) => Some(l),
                Sock::Fresh { held: Some(h), .. } => Some(h),
                Sock::Fresh { held: None, .. } => None,
                Sock::Pipe { .. } | Sock::Epoll(_) => return Err(libc::ENOTSOCK),
            };
            let r = match (h, is_ttl) {
                (Some(h), true) => h.set_ttl(v),
                (Some(h), false) => h.set_tos(v),
                (None, true) if (1..=255).contains(&v) => Ok(()),
                (None, false) if v <= 255 => Ok(()),
                (None, _) => return Err(libc::EINVAL),
            };
            r.map_err(|e| errno_of(&e))?;
            // Remembered for the connection or listener the socket becomes.
            if is_ttl {
                f.opts.ttl = Some(v as u8);
            } else {
                f.opts.tos = Some(v as u8);
            }
            return Ok(());
        }
        match (level, name) {
            (libc::SOL_SOCKET, libc::SO_REUSEADDR | libc::SO_REUSEPORT) => {
                f.opts.reuseaddr = v != 0
            }
            // On a connection, applied to it (within kern.ipc.maxsockbuf).
            (libc::SOL_SOCKET, libc::SO_SNDBUF) => {
                f.opts.sndbuf = Some(v.max(0) as usize);
                if let Sock::Stream(s) = &f.sock {
                    s.set_send_buffer_size(v.max(0) as usize)
                        .map_err(|e| errno_of(&e))?;
                }
            }
            (libc::SOL_SOCKET, libc::SO_RCVBUF) => {
                f.opts.rcvbuf = Some(v.max(0) as usize);
                if let Sock::Stream(s) = &f.sock {
                    s.set_recv_buffer_size(v.max(0) as usize)
                        .map_err(|e| errno_of(&e))?;
                }
            }
            (libc::IPPROTO_TCP, libc::TCP_MAXSEG) => {
                let m = u32::try_from(v).map_err(|_| libc::EINVAL)?;
                match &f.sock {
                    Sock::Stream(s) => s.set_mss(m).map_err(|e| errno_of(&e))?,
                    // The connections it accepts from now on take it.
                    Sock::Listener(l) => l.set_mss(m).map_err(|e| errno_of(&e))?,
                    _ if TcpStream::MSS_RANGE.contains(&m) => {}
                    _ => return Err(libc::EINVAL),
                }
                f.opts.maxseg = Some(m);
            }
            (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => {
                f.opts.keepalive = v != 0;
                if let Sock::Stream(s) = &f.sock {
                    let idle = (v != 0).then(|| f.opts.idle(&cfg));
                    s.set_keepalive(idle).map_err(|e| errno_of(&e))?;
                }
            }
            (libc::IPPROTO_TCP, TCP_KEEPINIT) if v > 0 => {
                f.opts.keepinit = Some(v as u32);
                if let Sock::Stream(s) = &f.sock {
                    s.set_keepinit(Duration::from_secs(v as u64))
                        .map_err(|e| errno_of(&e))?;
                }
            }
            (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) if v > 0 => {
                f.opts.keepidle = Some(v as u32);
                if let (Sock::Stream(s), true) = (&f.sock, f.opts.keepalive) {
                    s.set_keepalive(Some(f.opts.idle(&cfg)))
                        .map_err(|e| errno_of(&e))?;
                }
            }
            (libc::IPPROTO_TCP, TCP_NOOPT) => {
                f.opts.noopt = v != 0;
                if let (Sock::Stream(s), true) = (&f.sock, v != 0) {
                    s.set_noopt(true).map_err(|e| errno_of(&e))?;
                }
            }
            (libc::IPPROTO_TCP, libc::TCP_FASTOPEN) => {
                // As FreeBSD's tcp_ctloutput: EPERM with Fast Open off stack-wide,
                // or on a listener without the server side.
                let listening = matches!(f.sock, Sock::Listener(_));
                let allowed = if listening {
                    cfg.fastopen_server
                } else {
                    cfg.fastopen_client || cfg.fastopen_server
                };
                if v != 0 && !allowed {
                    return Err(libc::EPERM);
                }
                f.opts.fastopen = v.max(0);
                if let Sock::Listener(l) = &f.sock {
                    l.set_fastopen(v.max(0) as usize)
                        .map_err(|e| errno_of(&e))?;
                }
            }
            (libc::IPPROTO_TCP, libc::TCP_NODELAY) => {
                f.opts.nodelay = v != 0;
                if let Sock::Stream(s) = &f.sock {
                    s.set_nodelay(v != 0).map_err(|e| errno_of(&e))?;
                }
            }
            _ => return Err(libc::ENOPROTOOPT),
        }
        Ok(())
    }

    fn poll(&self, fds: &mut [PollFd], timeout_ms: i32) -> Result<usize, Errno> {
        let mut g = self.lock();
        let deadline =
            (timeout_ms >= 0).then(|| g.sim.now() + Duration::from_millis(timeout_ms as u64));
        loop {
            let mut n = 0;
            for p in fds.iter_mut() {
                p.revents = Inner::revents(&mut g, p);
                n += usize::from(p.revents != 0);
            }
            if n > 0 || deadline.is_some_and(|d| g.sim.now() >= d) {
                return Ok(n);
            }
            g = self.wait(g);
        }
    }

    fn netdev_send(&self, packet: &[u8]) -> Result<(), Errno> {
        let ty: u16 = match packet.first().map(|b| b >> 4) {
            Some(4) => 0x0800,
            Some(6) => 0x86dd,
            _ => return Err(libc::EINVAL),
        };
        let mut g = self.lock();
        let mut f = Vec::with_capacity(14 + packet.len());
        f.extend_from_slice(&g.mac.0);
        f.extend_from_slice(&REMOTE_MAC.0);
        f.extend_from_slice(&ty.to_be_bytes());
        f.extend_from_slice(packet);
        let m = mbuf::Mbuf::from_slice(&f).map_err(|_| libc::ENOBUFS)?;
        let now = g.sim.now();
        g.raw.tx_burst(now, &mut vec![m]);
        g.advance_to(now);
        if std::env::var_os("MPSTACK_PD_DEBUG").is_some() {
            let mut counters = String::new();
            let _ = g.stack().stats().write_netstat(&mut counters, false);
            eprintln!(
                "mpstack-packetdrill: in {} bytes {:02x?}\n{counters}",
                packet.len(),
                &packet[..packet.len().min(60)],
            );
        }
        self.cv.notify_all();
        Ok(())
    }

    fn netdev_receive(&self, buf: &mut [u8]) -> Result<Option<(usize, i64)>, Errno> {
        let mut g = self.lock();
        if g.out.is_empty() {
            let end = g.sim.now() + RECEIVE_LIMIT;
            g = self.run(g, end, true);
            self.cv.notify_all();
        }
        Ok(g.out.pop_front().map(|(p, t)| {
            let n = p.len().min(buf.len());
            buf[..n].copy_from_slice(&p[..n]);
            (n, t)
        }))
    }

    fn usleep(&self, usecs: u64) {
        let mut g = self.lock();
        let end = g.sim.now() + Duration::from_micros(usecs);
        g = self.run(g, end, false);
        drop(g);
        self.cv.notify_all();
    }

    fn now_usecs(&self) -> i64 {
        // Each look at the clock moves it a microsecond: packetdrill spins on it
        // for the last stretch before an event.
        let mut g = self.lock();
        if g.returning == Some(std::thread::current().id()) {
            // A blocking call that just returned reads the time it ended.
            g.returning = None;
            self.cv.notify_all();
        }
        let end = g.sim.now() + Duration::from_micros(1);
        g = self.run(g, end, false);
        let t = g.now_us();
        drop(g);
        self.cv.notify_all();
        t
    }

    fn epoll_create1(&self, flags: i32) -> Result<i32, Errno> {
        if flags & !libc::EPOLL_CLOEXEC != 0 {
            return Err(libc::EINVAL);
        }
        let mut g = self.lock();
        Ok(g.new_fd(Fd {
            sock: Sock::Epoll(BTreeMap::new()),
            v6: false,
            nonblock: false,
            opts: Opts::default(),
            connecting: false,
        }))
    }

    fn epoll_ctl(&self, epfd: i32, op: i32, fd: i32, ev: Option<EpollEvent>) -> Result<(), Errno> {
        let mut g = self.lock();
        if !g.fds.contains_key(&fd) {
            return Err(libc::EBADF);
        }
        if fd == epfd || matches!(g.fds.get(&fd).map(|f| &f.sock), Some(Sock::Epoll(_))) {
            // Nesting instances is not kept.
            return Err(libc::EINVAL);
        }
        let Sock::Epoll(w) = &mut g.fd(epfd)?.sock else {
            return Err(libc::EINVAL);
        };
        let watch = |ev: EpollEvent| Watch {
            ev,
            armed: true,
            seen: 0,
            seen_avail: 0,
        };
        match (op, ev) {
            (libc::EPOLL_CTL_ADD, Some(ev)) => {
                if w.contains_key(&fd) {
                    return Err(libc::EEXIST);
                }
                w.insert(fd, watch(ev));
            }
            (libc::EPOLL_CTL_MOD, Some(ev)) => {
                let e = w.get_mut(&fd).ok_or(libc::ENOENT)?;
                *e = watch(ev);
            }
            (libc::EPOLL_CTL_DEL, _) => {
                w.remove(&fd).ok_or(libc::ENOENT)?;
            }
            _ => return Err(libc::EINVAL),
        }
        Ok(())
    }

    /// Level-triggered: every watched descriptor ready for what it asked;
    /// `EPOLLET`: only news since it was last reported (a readiness it did not
    /// have, or more bytes to read); `EPOLLONESHOT`: once, until
    /// `EPOLL_CTL_MOD` arms it again. Waits up to `timeout_ms` of the stack's
    /// clock (-1: for ever) as `poll` does.
    fn epoll_wait(&self, epfd: i32, max: usize, timeout_ms: i32) -> Result<Vec<EpollEvent>, Errno> {
        let mut g = self.lock();
        let deadline =
            (timeout_ms >= 0).then(|| g.sim.now() + Duration::from_millis(timeout_ms as u64));
        loop {
            // The watch list comes out while the descriptors it names are looked
            // at (no instance watches an instance, itself included).
            let mut w = match &mut g.fd(epfd)?.sock {
                Sock::Epoll(w) => std::mem::take(w),
                _ => return Err(libc::EINVAL),
            };
            let mut out = Vec::new();
            for (&fd, wt) in w.iter_mut() {
                if out.len() == max {
                    break;
                }
                let Some((r, avail)) = Inner::ready(&g, fd) else {
                    continue;
                };
                let want = wt.ev.events & !(EPOLLET | EPOLLONESHOT);
                let now = r as u16 as u32 & (want | libc::EPOLLERR as u32 | libc::EPOLLHUP as u32);
                let edge = wt.ev.events & EPOLLET != 0;
                let news = now & !wt.seen != 0 || avail > wt.seen_avail;
                let report = wt.armed && now != 0 && (!edge || news);
                // Edge state: what is ready now (so a readiness that goes and
                // comes back is news).
                wt.seen = now;
                wt.seen_avail = avail;
                if report {
                    out.push(EpollEvent {
                        events: now,
                        data: wt.ev.data,
                    });
                    if wt.ev.events & EPOLLONESHOT != 0 {
                        wt.armed = false;
                    }
                }
            }
            if let Sock::Epoll(slot) = &mut g.fd(epfd)?.sock {
                *slot = w;
            }
            if !out.is_empty() || deadline.is_some_and(|d| g.sim.now() >= d) {
                return Ok(out);
            }
            g = self.wait(g);
        }
    }

    fn pipe(&self) -> Result<(i32, i32), Errno> {
        let mut g = self.lock();
        let id = g.pipes.keys().next_back().map_or(0, |k| k + 1);
        g.pipes.insert(
            id,
            PipeBuf {
                data: VecDeque::new(),
                readers: 1,
                writers: 1,
            },
        );
        let end = |write| Fd {
            sock: Sock::Pipe { id, write },
            v6: false,
            nonblock: false,
            opts: Opts::default(),
            connecting: false,
        };
        let r = g.new_fd(end(false));
        let w = g.new_fd(end(true));
        Ok((r, w))
    }
}
