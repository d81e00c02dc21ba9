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

pub(crate) mod forward;
pub mod frag;
pub(crate) mod udp;

use crate::ifindex::IfIndex;
use crate::link::iface::Ifnet;
use crate::sockbuf::SockShared;
use crate::FxBuild;
use dev::{Duration, Instant};
use frag::Reass;
use mbuf::Mbuf;
use route::{IpPrefix, RtFlags, RtmType};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use wire::IpProtocol;

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

/// The TCP segment an ICMP error quotes (an IPv4 header with the 8 bytes after it,
/// RFC 792): its connection, as (our end, theirs), and the sequence number it
/// carried.
pub(crate) fn quoted_tcp4(quoted: &[u8]) -> Option<(SocketAddr, SocketAddr, u32)> {
    quoted_l4(quoted, 6)
}

/// The ports of a quoted IPv4 datagram of protocol `proto` (TCP, UDP), as
/// (our end, theirs), and the next four bytes (TCP's sequence number).
pub(crate) fn quoted_l4(quoted: &[u8], proto: u8) -> Option<(SocketAddr, SocketAddr, u32)> {
    let hlen = usize::from(*quoted.first()? & 0x0f) * 4;
    if quoted[0] >> 4 != 4 || hlen < 20 || quoted.len() < hlen + 8 || quoted[9] != proto {
        return None;
    }
    let a = |at: usize| Ipv4Addr::new(quoted[at], quoted[at + 1], quoted[at + 2], quoted[at + 3]);
    let t = &quoted[hlen..hlen + 8];
    Some((
        SocketAddr::new(a(12).into(), u16::from_be_bytes([t[0], t[1]])),
        SocketAddr::new(a(16).into(), u16::from_be_bytes([t[2], t[3]])),
        u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
    ))
}

/// [`quoted_tcp4`] for an ICMPv6 error's quoted packet (ours carry no extension
/// header before TCP).
pub(crate) fn quoted_tcp6(quoted: &[u8]) -> Option<(SocketAddr, SocketAddr, u32)> {
    quoted_l4_6(quoted, 6)
}

/// [`quoted_l4`] for a quoted IPv6 packet.
pub(crate) fn quoted_l4_6(quoted: &[u8], proto: u8) -> Option<(SocketAddr, SocketAddr, u32)> {
    if quoted.len() < 48 || quoted[0] >> 4 != 6 || quoted[6] != proto {
        return None;
    }
    let a = |at: usize| {
        let mut b = [0u8; 16];
        b.copy_from_slice(&quoted[at..at + 16]);
        std::net::Ipv6Addr::from(b)
    };
    let t = &quoted[40..48];
    Some((
        SocketAddr::new(a(8).into(), u16::from_be_bytes([t[0], t[1]])),
        SocketAddr::new(a(24).into(), u16::from_be_bytes([t[2], t[3]])),
        u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
    ))
}

/// Records that the path towards `dst` takes `mtu` bytes until `expires`, in a
/// path MTU list bounded by `max` (IPv4's and IPv6's). `held`: a live TCP
/// connection vouched for the message (it quoted a sequence number the connection
/// has outstanding, RFC 5927 §4.1); otherwise only a bound UDP port did, which any
/// host that knows the port can quote towards any destination. So that a peer
/// cannot flush the list at will, a full list makes room by dropping an expired
/// entry, else the unheld entry expiring first, and only for a held newcomer the
/// held entry expiring first: unheld messages never evict a path a connection
/// learnt. Returns whether the entry is in the list.
pub(crate) fn pmtu_upsert<A: PartialEq + Copy>(
    list: &mut Vec<(A, u32, Instant, bool)>,
    (dst, mtu, expires, held): (A, u32, Instant, bool),
    now: Instant,
    max: usize,
) -> bool {
    if let Some(e) = list.iter_mut().find(|p| p.0 == dst) {
        // A held entry stays held while it lives.
        let held = held || (e.3 && e.2 > now);
        *e = (dst, mtu, expires, held);
        return true;
    }
    if list.len() < max {
        list.push((dst, mtu, expires, held));
        return true;
    }
    // Expired first, then unheld, each the one expiring first.
    let victim = list
        .iter_mut()
        .filter(|p| held || !p.3 || p.2 <= now)
        .min_by_key(|p| (p.2 > now, p.3, p.2));
    match victim {
        Some(e) => {
            *e = (dst, mtu, expires, held);
            true
        }
        None => false,
    }
}

/// The ports of a TCP/UDP header at `off`, or 0.
pub(crate) fn ports(
    cx_access: crate::hdr::HdrAccess,
    m: &mut Mbuf,
    off: usize,
    proto: IpProtocol,
) -> u32 {
    if !matches!(proto, IpProtocol::Tcp | IpProtocol::Udp) {
        return 0;
    }
    crate::hdr::hdr(cx_access, m, off, 4)
        .map(|p| u32::from_be_bytes([p[0], p[1], p[2], p[3]]))
        .unwrap_or(0)
}

/// `RTM_MISS` for a destination without a route (only built when someone listens).
pub(crate) fn miss(ip: &crate::ip::IpCx<'_>, dst: IpAddr, ifp: &Ifnet) {
    let bus = ip.rtbus;
    if bus.has_subscribers() {
        bus.send(
            RtmType::Miss,
            IpPrefix::host(dst),
            None,
            u32::from(ifp.index.0),
            RtFlags::default(),
        );
    }
}

/// No next hop, in a vector of next-hop indices.
pub(crate) const NO_NH: u32 = u32::MAX;

/// Whether `len` bytes, what an IP header's length field counts of `m`, are more
/// than it can say and more than a length of 0 may stand for: only a large TCP
/// segment (Linux's BIG TCP) for a device whose segmentation offload takes the
/// `wire` bytes of the whole packet goes out with 0 there.
pub(crate) fn too_long(m: &Mbuf, len: usize, wire: usize, ifp: &Ifnet) -> bool {
    len > 65535 && !(m.hdr.tso_segsz != 0 && wire <= ifp.offload.tso)
}
