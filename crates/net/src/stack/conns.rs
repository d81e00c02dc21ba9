//! The TCP connections of a stack as `netstat` lists them and `tcpdrop` drops them:
//! a question to every worker ([`ConnQuery`]), answered when each next runs, with
//! the listeners from the configuration.

use super::Stack;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Stack {
    /// Every TCP connection and listener (`netstat -an`): each worker lists its own
    /// connections when it next runs; this waits up to `wait` for them all. `None`
    /// if some worker did not answer in time (or the workers are not running).
    pub fn tcp_connections(&self, wait: std::time::Duration) -> Option<Vec<crate::tcp::ConnInfo>> {
        if !self.is_running() {
            return None;
        }
        Self::await_query(self.tcp_connections_ask()?, wait)
    }

    /// Waits up to `wait` for every worker to answer `q`.
    fn await_query(q: ConnQuery, wait: std::time::Duration) -> Option<Vec<crate::tcp::ConnInfo>> {
        let until = std::time::Instant::now() + wait;
        loop {
            if q.ready() {
                return Some(q.into_list());
            }
            if std::time::Instant::now() >= until {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Asks every worker for its connections without waiting for the answer: for a
    /// caller that runs the workers itself (a simulation, `Stack::poll`), which
    /// polls them until [`ConnQuery::ready`]. `None` if a worker's
    /// inbox is full.
    pub fn tcp_connections_ask(&self) -> Option<ConnQuery> {
        self.tcp_query(None)
    }

    /// tcpdrop(8): drops the connections `which` selects (a reset to each peer
    /// still in sync with us; TIME_WAIT just ends), on each worker when it next
    /// runs; this waits up to `wait` for them all and returns what was dropped.
    /// `None` as for [`Stack::tcp_connections`].
    pub fn tcp_drop(
        &self,
        which: crate::tcp::TcpDrop,
        wait: std::time::Duration,
    ) -> Option<Vec<crate::tcp::ConnInfo>> {
        if !self.is_running() {
            return None;
        }
        Self::await_query(self.tcp_drop_ask(which)?, wait)
    }

    /// [`Stack::tcp_drop`] without waiting, as [`Stack::tcp_connections_ask`]: the
    /// answer lists the connections dropped.
    pub fn tcp_drop_ask(&self, which: crate::tcp::TcpDrop) -> Option<ConnQuery> {
        self.tcp_query(Some(which))
    }

    fn tcp_query(&self, drop: Option<crate::tcp::TcpDrop>) -> Option<ConnQuery> {
        use crate::tcp::layer::{ConnList, TcpMsg};
        let mut listeners: Vec<crate::tcp::ConnInfo> = Vec::new();
        let cfg = self.shared.cfg.load();
        let mut ports: Vec<&u16> = cfg.tcp_listen.keys().collect();
        ports.sort();
        // Listeners are listed, never dropped.
        let ports = if drop.is_some() { Vec::new() } else { ports };
        for p in ports {
            for l in &cfg.tcp_listen[p] {
                listeners.push(crate::tcp::ConnInfo {
                    local: l.local,
                    remote: SocketAddr::new(
                        if l.local.is_ipv6() {
                            std::net::Ipv6Addr::UNSPECIFIED.into()
                        } else {
                            Ipv4Addr::UNSPECIFIED.into()
                        },
                        0,
                    ),
                    // netstat's name of a socket only bound.
                    state: if l.bound_only { "CLOSED" } else { "LISTEN" },
                    send_q: 0,
                    recv_q: l.accept_q.len(),
                    info: None,
                });
            }
        }
        let req = Arc::new(ConnList {
            drop,
            ..ConnList::default()
        });
        let n = self.shared.tcp_inbox.len();
        req.left.store(n, Ordering::Release);
        for (w, q) in self.shared.tcp_inbox.iter().enumerate() {
            if q.push(TcpMsg::List(req.clone())).is_err() {
                // A full inbox: that worker is not counted on.
                req.left.fetch_sub(1, Ordering::AcqRel);
                return None;
            }
            self.shared.notify_worker(w);
        }
        Some(ConnQuery { listeners, req })
    }
}

/// A question to the workers for their connections ([`Stack::tcp_connections_ask`]).
#[derive(Debug)]
pub struct ConnQuery {
    listeners: Vec<crate::tcp::ConnInfo>,
    req: Arc<crate::tcp::layer::ConnList>,
}

impl ConnQuery {
    /// Every worker has answered.
    pub fn ready(&self) -> bool {
        self.req.left.load(Ordering::Acquire) == 0
    }

    /// The listeners, then every connection the workers listed (all of them once
    /// [`ConnQuery::ready`]).
    pub fn into_list(self) -> Vec<crate::tcp::ConnInfo> {
        let mut conns =
            std::mem::take(&mut *self.req.out.lock().unwrap_or_else(|e| e.into_inner()));
        conns.sort_by_key(|c| (c.local, c.remote));
        let mut out = self.listeners;
        out.extend(conns);
        out
    }
}
