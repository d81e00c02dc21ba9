//! What applications and other workers ask of a worker's TCP ([`TcpMsg`]):
//! a segment handed over from another worker, a connect, a wake-up after a write, a
//! shutdown or a close, and a smaller path MTU from ICMP (FreeBSD's `tcp_usrreq` and
//! `tcp_ctlinput`, as messages). Calls `input` and `output`.

use super::input::tcp_input_local;
use super::output::service;
use super::TcpCx;
use super::{
    conn_cfg, flow_home, isn, ts_offset, Conn, HardError, TcpCtl, TcpMsg, TcpWorker, Tuple,
};
use crate::inet::icmp::pmtu4_learn;
use crate::inet6::nd6::pmtu6_learn;
use crate::tcp::chan::{err, phase};
use crate::tcp::fastopen::TfoClient;
use crate::tcp::tcb::{FoCookie, Tcb, TcpError};
use std::net::IpAddr;
use std::sync::atomic::Ordering;

/// Messages from applications and other workers.
pub(crate) fn tcp_msg(cx: &mut TcpCx<'_, '_>, tw: &mut TcpWorker, msg: TcpMsg) {
    match msg {
        TcpMsg::Segment(m, info) => tcp_input_local(cx, tw, m, info),
        TcpMsg::Ctl(tuple, ctl) => ctl_input(cx, tw, tuple, ctl),
        TcpMsg::Connect(s) => {
            let tuple = Tuple {
                local: s.local,
                remote: s.remote,
            };
            let in_use = tw.conns.contains_key(&tuple);
            if in_use || tw.conns.len() >= tw.max_conns {
                if in_use {
                    cx.link.stats.tcp.connaddrinuse += 1;
                } else {
                    cx.link.stats.tcp.conntablefull += 1;
                }
                s.error.store(err::REFUSED, Ordering::Release);
                s.phase.store(phase::CLOSED, Ordering::Release);
                s.wake();
                return;
            }
            let iss = isn(cx.ip.isn_secret, &tuple, cx.link.now);
            let cfg = conn_cfg(cx, &tuple, (s.tx.cap(), s.rx.cap()));
            let mut tcb = Tcb::connect(cfg, iss, &mut cx.link.stats.tcp);
            tcb.set_ts_offset(ts_offset(cx.ip.isn_secret, &tuple));
            // TCP Fast Open asked for: the cached cookie and the first data go in
            // the SYN, or the SYN asks for a cookie (RFC 7413 §4.1.3).
            if cfg.fastopen_client && s.opt_fastopen.load(Ordering::Acquire) {
                match cx.tcp.tfo.client_lookup(tuple.remote.ip(), cx.link.now) {
                    TfoClient::Cookie(c, mss) => tcb.set_fastopen(c, Some(mss)),
                    TfoClient::Request => tcb.set_fastopen(FoCookie::REQUEST, None),
                    TfoClient::Off => {}
                }
            }
            // An active open has no listener to announce it to.
            let i = tw.insert(Conn {
                announced: true,
                ..Conn::new(tuple, tcb, s)
            });
            service(cx, tw, i);
        }
        TcpMsg::List(l) => {
            let mut v = Vec::new();
            match &l.drop {
                Some(which) => tw.drop_conns(cx, which, &mut v),
                None => tw.list(&mut v),
            }
            l.out.lock().unwrap_or_else(|e| e.into_inner()).extend(v);
            l.left.fetch_sub(1, Ordering::AcqRel);
        }
        TcpMsg::Wake(s) => {
            s.queued.store(false, Ordering::Release);
            let tuple = Tuple {
                local: s.local,
                remote: s.remote,
            };
            if let Some(i) = tw.conn_slot(&tuple) {
                service(cx, tw, i);
            }
        }
    }
}

/// What an ICMP error quoting our segment on `tuple` says, on the connection's
/// home worker (`tcp_ctlinput`): believed only for a live connection and a quoted
/// sequence number in what it has outstanding, [snd_una, snd_max) (RFC 5927 §4.1,
/// FreeBSD's `tcp_ctlinput`, Linux's `tcp_v4_err`); otherwise counted
/// (`icmp.noport` / `icmp6.noport`, `tcp.outofwindowicmps`) and ignored. A path MTU
/// believed also lowers the host's path MTU towards the peer, as an entry the
/// connection holds.
fn ctl_input(cx: &mut TcpCx<'_, '_>, tw: &mut TcpWorker, tuple: Tuple, ctl: TcpCtl) {
    let v6 = tuple.remote.is_ipv6();
    let Some(i) = tw.conn_slot(&tuple) else {
        if v6 {
            cx.link.stats.icmp6.noport += 1;
        } else {
            cx.link.stats.icmp.noport += 1;
        }
        return;
    };
    let seq = match ctl {
        TcpCtl::PathMtu { seq, .. } | TcpCtl::HardError { seq, .. } => seq,
    };
    let Some(c) = tw.slab.get_mut(i) else {
        return;
    };
    if !c.tcb.outstanding(seq) {
        cx.link.stats.tcp.outofwindowicmps += 1;
        return;
    }
    let changed = match ctl {
        TcpCtl::PathMtu { mtu, .. } => {
            match (tuple.local.ip(), tuple.remote.ip()) {
                (IpAddr::V4(s), IpAddr::V4(d)) => pmtu4_learn(&mut cx.inet(), s, d, mtu, true),
                (IpAddr::V6(s), IpAddr::V6(d)) => pmtu6_learn(&mut cx.inet6(), s, d, mtu, true),
                _ => {}
            }
            // The MSS is the path MTU less the IP and TCP headers.
            let hdrs = if v6 { 60 } else { 40 };
            c.tcb
                .path_mtu(mtu.saturating_sub(hdrs), v6, &mut cx.link.stats.tcp)
        }
        TcpCtl::HardError { seq, error } => {
            let error = match error {
                HardError::Refused => TcpError::Refused,
                HardError::HostUnreachable => TcpError::Unreachable,
            };
            c.tcb.icmp_hard_error(seq, error, &mut cx.link.stats.tcp)
        }
    };
    if changed {
        service(cx, tw, i);
    }
}

/// An ICMP error quoting a segment of ours on `tuple`, to the connection on its
/// home worker.
pub(crate) fn tcp_ctlinput(cx: &mut TcpCx<'_, '_>, tw: &mut TcpWorker, tuple: Tuple, ctl: TcpCtl) {
    let home = flow_home(tuple.local, tuple.remote, cx.tcp.nworkers);
    if home != cx.link.worker {
        return cx.handoff_tcp(home, TcpMsg::Ctl(tuple, ctl));
    }
    tcp_msg(cx, tw, TcpMsg::Ctl(tuple, ctl));
}
