//! What both IP families share on a worker for a batch, as their sibling: the
//! FIB (both families' tables), the flow table, reassembly (one table for both),
//! the UDP sockets by port, the packets to input again after the batch, the
//! sockets to wake, what ICMP and
//! ICMPv6 learnt for the transports ([`CtlInput`]), and the stack's secret.
//!
//! IPv4's own state is `inet::cx::Inet4`, IPv6's `inet6::cx::Inet6`; a stage of
//! one family is given the link's context, this one and its family's, side by side
//! (`inet::cx::InetCx`, `inet6::cx::Inet6Cx`), and cannot reach the other family's.
//! Nothing here names a family: both sit above this module.

use crate::ifindex::IfIndex;
use crate::inet::frag::Reass;
use crate::sockbuf::SockShared;
use crate::FxBuild;
use dev::{Duration, Instant};
use mbuf::Mbuf;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

/// What either IP family may touch on a worker while processing one batch.
pub(crate) struct IpCx<'a> {
    /// The routing table (both families), read lock-free for the whole batch.
    pub fib: &'a route::Fib,
    /// This worker's flow table (stateful forwarding), if the stack keeps one.
    pub flows: Option<&'a mut route::FlowTable>,
    /// Packets input again after the batch, on the interface given: IPv4 addressed
    /// to ourselves, and either family taken off a tunnel.
    pub loopq: &'a mut Vec<(IfIndex, Mbuf)>,
    /// Sockets whose applications wait for what the batch delivered.
    pub wake: &'a mut Vec<Arc<SockShared>>,
    /// This worker's fragment reassembly table (both families).
    pub frag: &'a mut Reass,
    /// The stack's secret: flow hashes, initial sequence numbers, fragment ids.
    pub isn_secret: u64,
    /// Send redirects when a forwarded packet leaves by its arrival interface.
    pub send_redirects: bool,
    /// Where routing messages go (`RTM_MISS`).
    pub rtbus: &'a route::RtBus,
    /// What ICMP and ICMPv6 learnt for the transports, for the worker to hand up.
    pub ctlinput: &'a mut Vec<CtlInput>,
    /// The UDP sockets by port, both families', as published for this batch.
    pub udp: &'a UdpPorts,
}

/// UDP sockets by port, both families' (a socket is of one): part of the
/// published configuration, read by IPv4's and IPv6's UDP input.
pub(crate) type UdpPorts = HashMap<u16, Vec<Arc<SockShared>>, FxBuild>;

/// True if a UDP socket is bound where `local` names (its address, or the
/// unspecified one of its family): an ICMP error quoting a datagram from there
/// is about a socket that sent it.
pub(crate) fn udp_bound(udp: &UdpPorts, local: SocketAddr) -> bool {
    udp.get(&local.port()).is_some_and(|v| {
        v.iter().any(|s| {
            s.local.ip() == local.ip()
                || (s.local.is_ipv4() == local.is_ipv4() && s.local.ip().is_unspecified())
        })
    })
}

impl IpCx<'_> {
    /// Schedules a socket's application for wake-up at the end of the batch.
    /// Whether the application waits is asked then, once a socket per batch
    /// (`SockShared::wake`, behind a fence), as TCP's readers are: not for every
    /// datagram, whose fence cost the worker more than the rest of its delivery.
    #[inline]
    pub fn wake_socket(&mut self, s: &Arc<SockShared>) {
        if self.wake.last().is_some_and(|x| x.id == s.id) {
            return;
        }
        if !self.wake.iter().any(|x| x.id == s.id) {
            self.wake.push(s.clone());
        }
    }
}

/// What an ICMP or ICMPv6 error says to the transport of the packet it quotes
/// (FreeBSD's `pr_ctlinput`), left for the worker to hand up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CtlInput {
    /// About a TCP segment between `local` and `remote`.
    Tcp {
        local: SocketAddr,
        remote: SocketAddr,
        ctl: TcpCtl,
    },
}

impl CtlInput {
    /// For the TCP segment a quoted packet names (from [`quoted_tcp4`] or
    /// [`quoted_tcp6`]), what `ctl` makes of its sequence number.
    pub(crate) fn tcp(
        quoted: Option<(SocketAddr, SocketAddr, u32)>,
        ctl: impl FnOnce(u32) -> TcpCtl,
    ) -> Option<CtlInput> {
        quoted.map(|(local, remote, seq)| CtlInput::Tcp {
            local,
            remote,
            ctl: ctl(seq),
        })
    }
}

/// What an ICMP or ICMPv6 error quoting one of our TCP segments says to its
/// connection (FreeBSD's `tcp_ctlinput`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TcpCtl {
    /// "Fragmentation needed" or "packet too big" about the segment starting at
    /// `seq`: the path takes IP packets of at most `mtu` bytes. Believed only for a
    /// live connection whose unacknowledged data `seq` lies in (RFC 5927 §4.1),
    /// which then also teaches the host's path MTU list.
    PathMtu { seq: u32, mtu: u32 },
    /// A hard error about the segment starting at `seq`.
    HardError { seq: u32, error: HardError },
}

/// The hard errors TCP hears of (FreeBSD's `inetctlerrmap`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HardError {
    /// Port or protocol unreachable, administratively prohibited
    /// (`ECONNREFUSED`).
    Refused,
    /// Time exceeded in transit (`EHOSTUNREACH`).
    HostUnreachable,
}

/// A token bucket for ICMP error rate limiting (FreeBSD `badport_bandlim`).
#[derive(Debug)]
pub(crate) struct TokenBucket {
    per_sec: u32,
    tokens: u32,
    last: Instant,
}

impl TokenBucket {
    pub(crate) fn new(per_sec: u32) -> Self {
        TokenBucket {
            per_sec,
            tokens: per_sec,
            last: Instant::ZERO,
        }
    }

    pub fn take(&mut self, now: Instant) -> bool {
        if now.saturating_duration_since(self.last) >= Duration::from_secs(1) {
            self.tokens = self.per_sec;
            self.last = now;
        }
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }
}
