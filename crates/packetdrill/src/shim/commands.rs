//! The commands of a script's backtick lines run on the stack under test: `sysctl`,
//! `sockstat` and `tcpdrop`, as FreeBSD's commands print them.

use super::*;

impl Inner {
    /// A command from a script's backtick line: `sysctl …`, `sockstat …` or
    /// `tcpdrop …`.
    pub fn command(&self, args: &[&str]) -> Result<String, String> {
        match args.split_first() {
            Some((&"sysctl", rest)) => self.sysctl(rest),
            Some((&"sockstat", rest)) => self.sockstat(rest),
            Some((&"tcpdrop", rest)) => self.tcpdrop(rest),
            _ => Err(format!(
                "'{}': not a command the stack answers",
                args.join(" ")
            )),
        }
    }

    /// tcpdrop(8): `-a` (every connection), `-s STATE` (every one in a state, as
    /// sockstat names it), or `LADDR LPORT FADDR FPORT`; one line per connection
    /// dropped.
    pub fn tcpdrop(&self, args: &[&str]) -> Result<String, String> {
        let which = match args {
            ["-a"] => TcpDrop::All,
            ["-s", state] | ["-a", "-s", state] | ["-s", state, "-a"] => {
                TcpDrop::State(state.to_string())
            }
            [la, lp, fa, fp] => {
                let addr = |a: &str, p: &str| -> Result<SocketAddr, String> {
                    let ip: IpAddr = a.parse().map_err(|_| format!("{a}: not an address"))?;
                    let port: u16 = p.parse().map_err(|_| format!("{p}: not a port"))?;
                    Ok(SocketAddr::new(ip, port))
                };
                TcpDrop::Conn {
                    local: addr(la, lp)?,
                    remote: addr(fa, fp)?,
                }
            }
            _ => return Err("usage: tcpdrop -a | -s STATE | LADDR LPORT FADDR FPORT".into()),
        };
        let mut g = self.lock();
        let q = g.stack().tcp_drop_ask(which);
        let dropped = g.answer(q)?;
        drop(g);
        self.cv.notify_all();
        Ok(dropped
            .iter()
            .map(|c| {
                format!(
                    "{} {} {} {}: dropped\n",
                    c.local.ip(),
                    c.local.port(),
                    c.remote.ip(),
                    c.remote.port()
                )
            })
            .collect())
    }

    /// sockstat(1) over the stack's TCP sockets (`-4`, `-6`, `-P tcp`, `-p PORT,…`,
    /// `-s`, `-l`, `-c`): one line a socket, its state last, as FreeBSD's shows it
    /// with `-s`. A socket of the script's that holds no connection (bound, or
    /// reset) is CLOSED.
    pub fn sockstat(&self, args: &[&str]) -> Result<String, String> {
        let (mut v4, mut v6, mut ports) = (false, false, None::<Vec<u16>>);
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match *a {
                "-4" => v4 = true,
                "-6" => v6 = true,
                "-P" => {
                    let p = it.next().copied().unwrap_or("");
                    if p != "tcp" {
                        return Err(format!("-P {p}: the stack lists TCP sockets only"));
                    }
                }
                "-p" => {
                    let list = it.next().copied().unwrap_or("");
                    ports = Some(
                        list.split(',')
                            .map(|p| p.parse().map_err(|_| format!("-p {list}: bad port")))
                            .collect::<Result<_, _>>()?,
                    );
                }
                "-s" | "-l" | "-c" | "-n" => {}
                a => return Err(format!("{a}: not an option the stack's sockstat takes")),
            }
        }
        if !v4 && !v6 {
            (v4, v6) = (true, true);
        }
        let mut g = self.lock();
        let q = g.stack().tcp_connections_ask();
        let mut list: Vec<(SocketAddr, SocketAddr, &str)> = g
            .answer(q)?
            .into_iter()
            .map(|c| (c.local, c.remote, c.state))
            .collect();
        for f in g.fds.values() {
            let any = |v6: bool| -> SocketAddr {
                if v6 {
                    (Ipv6Addr::UNSPECIFIED, 0).into()
                } else {
                    (Ipv4Addr::UNSPECIFIED, 0).into()
                }
            };
            match &f.sock {
                // One the stack holds is in its list already.
                Sock::Fresh { held: Some(_), .. } => {}
                Sock::Fresh { bound, .. } => {
                    list.push((bound.unwrap_or(any(f.v6)), any(f.v6), "CLOSED"));
                }
                Sock::Stream(s) => {
                    let (Ok(l), Ok(r)) = (s.local_addr(), s.peer_addr()) else {
                        continue;
                    };
                    if !list.iter().any(|c| c.0 == l && c.1 == r) {
                        list.push((l, r, "CLOSED"));
                    }
                }
                Sock::Listener(_) | Sock::Pipe { .. } | Sock::Epoll(_) => {}
            }
        }
        let show = |a: SocketAddr| {
            let port = if a.port() == 0 {
                "*".to_string()
            } else {
                a.port().to_string()
            };
            if a.ip().is_unspecified() {
                format!("*:{port}")
            } else {
                format!("{}:{port}", a.ip())
            }
        };
        let mut out = format!(
            "{:<8} {:<10} {:>5} {:>3} {:<5} {:<21} {:<21} {}\n",
            "USER", "COMMAND", "PID", "FD", "PROTO", "LOCAL ADDRESS", "FOREIGN ADDRESS", "STATE"
        );
        for (l, r, state) in list {
            if (l.is_ipv4() && !v4) || (l.is_ipv6() && !v6) {
                continue;
            }
            if ports
                .as_ref()
                .is_some_and(|p| !p.contains(&l.port()) && !p.contains(&r.port()))
            {
                continue;
            }
            out += &format!(
                "{:<8} {:<10} {:>5} {:>3} {:<5} {:<21} {:<21} {state}\n",
                "root",
                "packetdril",
                std::process::id(),
                "?",
                if l.is_ipv4() { "tcp4" } else { "tcp6" },
                show(l),
                show(r)
            );
        }
        Ok(out)
    }

    /// A `sysctl` command on the stack's tunables.
    pub fn sysctl(&self, args: &[&str]) -> Result<String, String> {
        let g = self.lock();
        let mut cfg = g.stack().tcp_config();
        let r = crate::sysctl::command(&mut cfg, args)?;
        g.stack().set_tcp_config(cfg);
        Ok(r)
    }
}
