//! Netchannels (Van Jacobson's, in the paper's sense): an application takes a flow's
//! packets raw, as they arrived, and sends raw IP packets of its own.
//!
//! [`Stack::netchannel`] opens one with a [`Classifier`] (protocol, local and remote
//! address and port, each exact or wildcard, or an ipfw-style expression). Every
//! packet delivered to this host that it matches is queued for the application as a
//! [`Packet`] — the packet buffer itself, its IP header first, no copy — by the
//! worker that received it (the one RSS homes its flow on), and the application is
//! woken once per batch. The receive queue is bounded: a packet that finds it full
//! is dropped and counted (`netchan.full`, and [`NetChannel::overflows`]).
//!
//! Where a netchannel stands on the input path: the link, `ip_input`'s checks, the
//! firewall (pfil's inbound hooks: ipfw, dummynet), reassembly (a netchannel gets
//! whole datagrams), then the netchannels, in the order they were opened (the first
//! that matches takes the packet), and only then the protocol switch: a packet a
//! netchannel took reaches no socket, no TCP listener and no ICMP code. Forwarded
//! packets are not delivered here and never reach a netchannel. Checksums of what
//! is received are not verified (the packet is handed over as it arrived).
//!
//! [`NetChannel::send`] takes a whole IPv4 or IPv6 packet. The stack routes it by
//! its destination, fills in what an application may leave to it — the source when
//! unspecified, the length fields, the IPv4 identification when 0, the IPv4 header
//! checksum, and the TCP, UDP or ICMP checksum (of an unfragmented packet whose
//! transport header follows the IP header) —, runs the outbound firewall,
//! fragments what the path's MTU cannot carry and resolves the next hop's link
//! address, as for its own packets. What does not parse as a packet is dropped and
//! counted (`netchan.badpkt`); a full send queue is `WouldBlock`.
//!
//! Blocking, non-blocking (`set_nonblocking`, `set_read_timeout`) and async (feature
//! `tokio`: [`NetChannel::recv_async`], [`NetChannel::poll_recv`]) as the sockets.
//!
//! ```
//! use dev::mem::{wire, WireConfig};
//! use net::netchan::Classifier;
//! use net::{IfConfig, Stack, StackConfig};
//!
//! fn host(name: &str, dev: dev::mem::MemDevice, addr: &str) -> Stack {
//!     let mut s = Stack::new(StackConfig { name: name.into(), workers: 1, ..StackConfig::default() });
//!     let addrs = vec![addr.parse().unwrap()];
//!     s.add_interface(Box::new(dev), IfConfig { addrs, ..IfConfig::default() }).unwrap();
//!     s.start().unwrap();
//!     s
//! }
//! # fn main() -> std::io::Result<()> {
//! let (da, db) = wire(WireConfig::default());
//! let a = host("a", da, "198.18.0.1/24");
//! let b = host("b", db, "198.18.0.2/24");
//! // b takes UDP to its port 9000 raw.
//! let ch = b.netchannel("udp from any to me 9000".parse().unwrap())?;
//! ch.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
//! let u = a.udp_bind("198.18.0.1:0".parse::<std::net::SocketAddr>().unwrap())?;
//! u.send_to(b"raw", "198.18.0.2:9000".parse::<std::net::SocketAddr>().unwrap())?;
//! let p = ch.recv()?;
//! let ip = p.to_vec();
//! assert_eq!(ip[0] >> 4, 4); // the IPv4 header first
//! assert_eq!(&ip[28..], b"raw"); // then UDP's, then the payload
//! # Ok(()) }
//! ```

use crate::hdr::{hdr, mbuf_sum};
use crate::inet::ip;
use crate::inet6::ip6;
use crate::netchan::{has_ports, Classifier, NetchanShared, ICMP, ICMPV6, TCP, UDP};
use crate::park::Interest;
use crate::sockbuf::{RxDatagram, SockKind, SockShared, TxDatagram};
use crate::stack::batch::Cx;
use crate::stack::{Shared, Stack};
use crate::stats::DropReason;
use mbuf::Mbuf;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wire::checksum;

/// Packets a netchannel's receive queue holds by default ([`Stack::netchannel`]).
pub const NETCHANNEL_QUEUE: usize = 1024;
/// How long a blocking receive looks at an empty queue before it sleeps.
const SPIN: Duration = Duration::from_micros(50);
/// The largest receive or send queue a netchannel may ask for.
pub const NETCHANNEL_QUEUE_MAX: usize = 1 << 16;

impl Stack {
    /// Opens a netchannel that takes the packets `class` matches, with a receive
    /// and a send queue of [`NETCHANNEL_QUEUE`] packets each.
    pub fn netchannel(&self, class: Classifier) -> io::Result<NetChannel> {
        self.netchannel_with(class, NETCHANNEL_QUEUE)
    }

    /// [`Stack::netchannel`] with queues of `queue` packets (1 to
    /// [`NETCHANNEL_QUEUE_MAX`]).
    pub fn netchannel_with(&self, class: Classifier, queue: usize) -> io::Result<NetChannel> {
        if !(1..=NETCHANNEL_QUEUE_MAX).contains(&queue) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("netchannel queue of {queue} packets (1 to {NETCHANNEL_QUEUE_MAX})"),
            ));
        }
        class
            .check()
            .map_err(|m| io::Error::new(io::ErrorKind::InvalidInput, m))?;
        let shared = &self.shared;
        let id = shared.next_sock_id.fetch_add(1, Ordering::Relaxed);
        let home = id as usize % shared.wake.len().max(1);
        let any = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
        let sock = Arc::new(SockShared::new(id, SockKind::Netchannel, any, home, queue));
        let ch = Arc::new(NetchanShared {
            class,
            sock: sock.clone(),
            overflow: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
        });
        shared.update(|c| {
            c.netchannels.push(ch.clone());
            if let Some(v) = c.by_worker.get_mut(home) {
                v.push(sock);
            }
        });
        Ok(NetChannel {
            stack: shared.clone(),
            ch,
            nonblocking: AtomicBool::new(false),
            read_timeout: AtomicU64::new(0),
        })
    }
}

/// A received or to-be-sent IP packet: a handle on the packet buffer (no copy),
/// its IP header first.
#[derive(Debug)]
pub struct Packet {
    m: Mbuf,
    remote: SocketAddr,
}

impl Packet {
    /// A packet to send, copied from `bytes` (a whole IPv4 or IPv6 packet).
    pub fn from_slice(bytes: &[u8]) -> io::Result<Packet> {
        let m = Mbuf::from_slice(bytes)
            .map_err(|_| io::Error::new(io::ErrorKind::OutOfMemory, "no packet buffers"))?;
        Ok(Packet::from_mbuf(m))
    }

    /// A packet to send, from a packet buffer the application filled.
    pub fn from_mbuf(m: Mbuf) -> Packet {
        Packet {
            m,
            remote: SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        }
    }

    /// The packet buffer.
    pub fn into_mbuf(self) -> Mbuf {
        self.m
    }

    pub fn mbuf(&self) -> &Mbuf {
        &self.m
    }

    pub fn len(&self) -> usize {
        self.m.len()
    }

    pub fn is_empty(&self) -> bool {
        self.m.is_empty()
    }

    /// The bytes, in the buffers they lie in (a large packet spans several).
    pub fn segments(&self) -> impl Iterator<Item = &[u8]> {
        self.m.segments()
    }

    /// The bytes when they lie in one buffer (most packets up to the MTU).
    pub fn as_slice(&self) -> Option<&[u8]> {
        (self.m.nsegs() <= 1).then(|| self.m.first())
    }

    /// A copy of the bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        self.m.to_vec()
    }

    /// A received packet's source address and port (0 for a protocol without
    /// ports).
    pub fn remote(&self) -> SocketAddr {
        self.remote
    }
}

/// A netchannel: see the [module](self). Closed when dropped (packets still in
/// its send queue go out first).
#[derive(Debug)]
pub struct NetChannel {
    stack: Arc<Shared>,
    ch: Arc<NetchanShared>,
    nonblocking: AtomicBool,
    /// Read timeout in nanoseconds; 0: none.
    read_timeout: AtomicU64,
}

impl NetChannel {
    fn sock(&self) -> &SockShared {
        &self.ch.sock
    }

    /// What it takes.
    pub fn classifier(&self) -> &Classifier {
        &self.ch.class
    }

    /// The next packet: blocks (unless non-blocking: `WouldBlock`) until one comes
    /// or the read timeout passes (`TimedOut`).
    pub fn recv(&self) -> io::Result<Packet> {
        self.wait_for(|| {
            self.try_recv()
                .ok_or_else(|| io::ErrorKind::WouldBlock.into())
        })
    }

    /// The next packet if one is queued.
    pub fn try_recv(&self) -> Option<Packet> {
        self.sock().rxq.pop().map(|d| Packet {
            m: d.m,
            remote: d.from,
        })
    }

    /// Appends up to `max` queued packets to `out`, waiting (as [`NetChannel::recv`]) for
    /// the first; returns how many it appended.
    pub fn recv_batch(&self, out: &mut Vec<Packet>, max: usize) -> io::Result<usize> {
        if max == 0 {
            return Ok(0);
        }
        self.wait_for(|| match self.take_batch(out, max) {
            0 => Err(io::ErrorKind::WouldBlock.into()),
            n => Ok(n),
        })
    }

    fn take_batch(&self, out: &mut Vec<Packet>, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            let Some(p) = self.try_recv() else { break };
            out.push(p);
            n += 1;
        }
        n
    }

    fn wait_for<T>(&self, mut op: impl FnMut() -> io::Result<T>) -> io::Result<T> {
        // One deadline for the whole call, as the sockets' blocking calls have.
        let t = self.read_timeout.load(Ordering::Relaxed);
        let deadline = (t != 0).then(|| Instant::now() + Duration::from_nanos(t));
        loop {
            match op() {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => return r,
            }
            if self.nonblocking.load(Ordering::Relaxed) {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            // A busy channel refills within microseconds: look again for a while
            // before going to sleep (a sleep costs the worker a wake-up, and the
            // application the time to be scheduled), but not too often: each look
            // reads the line the worker writes as it queues.
            let s = self.sock();
            let spin = Instant::now();
            while s.rxq.is_empty() && spin.elapsed() < SPIN {
                for _ in 0..64 {
                    std::hint::spin_loop();
                }
            }
            if !s.rxq.is_empty() {
                continue;
            }
            if !s
                .parker
                .wait(Interest::Read, deadline, || !s.rxq.is_empty())
            {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "receive timed out"));
            }
        }
    }

    /// Queues a whole IP packet (copied from `bytes`) for the stack to send.
    pub fn send(&self, bytes: &[u8]) -> io::Result<()> {
        self.send_packet(Packet::from_slice(bytes)?)
    }

    /// Queues a packet for the stack to send, without a copy. `WouldBlock` when the
    /// send queue is full.
    pub fn send_packet(&self, p: Packet) -> io::Result<()> {
        let s = self.sock();
        let d = TxDatagram {
            m: p.m,
            to: p.remote,
            seq: 0,
        };
        if s.txq.push(d).is_err() {
            s.tx_full.fetch_add(1, Ordering::Relaxed);
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "netchannel send queue full",
            ));
        }
        self.stack.notify_worker(s.home);
        Ok(())
    }

    /// Packets waiting to be received.
    pub fn pending(&self) -> usize {
        self.sock().rxq.len()
    }

    /// Packets dropped because the receive queue was full.
    pub fn overflows(&self) -> u64 {
        self.ch.overflow.load(Ordering::Relaxed)
    }

    /// Packets queued for this netchannel since it opened.
    pub fn delivered(&self) -> u64 {
        self.ch.delivered.load(Ordering::Relaxed)
    }

    /// Packets `send` refused because the send queue was full.
    pub fn send_refused(&self) -> u64 {
        self.sock().tx_full.load(Ordering::Relaxed)
    }

    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        self.nonblocking.store(on, Ordering::Relaxed);
        Ok(())
    }

    /// `None`: wait for ever; a zero duration is refused (`InvalidInput`), as std's.
    pub fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        if d == Some(Duration::ZERO) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "zero timeout"));
        }
        let ns = d.map_or(0, |d| d.as_nanos().min(u64::MAX as u128) as u64);
        self.read_timeout.store(ns, Ordering::Relaxed);
        Ok(())
    }
}

#[cfg(feature = "tokio")]
impl NetChannel {
    /// Polls for the next packet (the async form of [`NetChannel::recv`]).
    pub fn poll_recv(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Packet> {
        if let Some(p) = self.try_recv() {
            return std::task::Poll::Ready(p);
        }
        // Registered, then looked at once more: a packet that came in between is
        // not missed (`park.rs`).
        self.sock().parker.register(Interest::Read, cx.waker());
        match self.try_recv() {
            Some(p) => std::task::Poll::Ready(p),
            None => std::task::Poll::Pending,
        }
    }

    /// Waits for the next packet without blocking the thread.
    pub async fn recv_async(&self) -> Packet {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Waits for at least one packet, then appends up to `max` to `out`.
    pub async fn recv_batch_async(&self, out: &mut Vec<Packet>, max: usize) -> usize {
        if max == 0 {
            return 0;
        }
        let first = self.recv_async().await;
        out.push(first);
        1 + self.take_batch(out, max - 1)
    }
}

impl Drop for NetChannel {
    fn drop(&mut self) {
        self.stack.unbind(&self.ch.sock);
    }
}

/// Worker side: offers a datagram delivered to this host (IPv4 or IPv6, its IP
/// header first, its transport header at `l4`) to the netchannels; `None` when one
/// took it (queued, or dropped on a full queue and counted).
#[inline]
pub(crate) fn take(
    cx: &mut Cx<'_>,
    m: Mbuf,
    proto: u8,
    src: IpAddr,
    dst: IpAddr,
    l4: usize,
) -> Option<Mbuf> {
    let chans = cx.netchannels;
    if chans.is_empty() {
        return Some(m);
    }
    let mut ports = None;
    if has_ports(proto) {
        let mut p = [0u8; 4];
        if m.copydata(l4, &mut p).is_ok() {
            ports = Some((
                u16::from_be_bytes([p[0], p[1]]),
                u16::from_be_bytes([p[2], p[3]]),
            ));
        }
    }
    let is_local = |a: IpAddr| match a {
        IpAddr::V4(a) => cx.v4.inet.is_local(a),
        IpAddr::V6(a) => cx.v6.inet6.local6(a).is_some(),
    };
    let Some(i) = chans
        .iter()
        .position(|c| c.class.matches(proto, src, dst, ports, is_local))
    else {
        return Some(m);
    };
    let ch = &chans[i];
    let from = SocketAddr::new(src, ports.map_or(0, |p| p.0));
    match ch.sock.rxq.push(RxDatagram { m, from, seq: 0 }) {
        Ok(()) => {
            match cx.netchan_tally.iter_mut().find(|t| t.0 == i) {
                Some(t) => t.1 += 1,
                None => cx.netchan_tally.push((i, 1)),
            }
            cx.link.stats.netchan.delivered += 1;
            cx.ip.wake_socket(&ch.sock);
        }
        Err(d) => {
            ch.overflow.fetch_add(1, Ordering::Relaxed);
            cx.link.drop_pkt(d.m, DropReason::NetchanFull);
        }
    }
    None
}

/// Worker side: a packet from a netchannel's send queue, out as [`NetChannel::send`]
/// says.
pub(crate) fn output(cx: &mut Cx<'_>, m: Mbuf) {
    match m.first().first().map(|b| b >> 4) {
        Some(4) => output4(cx, m),
        Some(6) => output6(cx, m),
        _ => cx.link.drop_pkt(m, DropReason::NetchanBadPkt),
    }
}

const IP_HDR: usize = 20;
const IP6_HDR: usize = 40;

/// Where a transport's checksum field lies in its header, and whether the
/// pseudo-header counts (ICMPv4 has none).
fn csum_at(proto: u8, v6: bool) -> Option<(usize, usize, bool)> {
    // (field offset, shortest header, pseudo-header)
    match proto {
        TCP => Some((16, 20, true)),
        UDP => Some((6, 8, true)),
        ICMP if !v6 => Some((2, 4, false)),
        ICMPV6 if v6 => Some((2, 4, true)),
        _ => None,
    }
}

/// Fills the transport checksum of the datagram at `l4` (`len` bytes).
fn fill_l4(m: &mut Mbuf, proto: u8, v6: bool, src: IpAddr, dst: IpAddr, l4: usize) -> bool {
    let Some((at, min, pseudo)) = csum_at(proto, v6) else {
        return true;
    };
    let len = m.len() - l4;
    if len < min {
        return false;
    }
    if m.copyback(l4 + at, &[0, 0]).is_err() {
        return false;
    }
    let mut sum = mbuf_sum(m, l4, len);
    if pseudo {
        let ph = checksum::pseudo_header(&src, &dst, proto.into(), len as u32);
        sum = checksum::combine(&[sum, ph]);
    }
    let mut sum = !sum;
    if sum == 0 && proto == UDP {
        // RFC 768: a computed zero goes out as all ones.
        sum = 0xffff;
    }
    m.copyback(l4 + at, &sum.to_be_bytes()).is_ok()
}

fn output4(cx: &mut Cx<'_>, mut m: Mbuf) {
    let len = m.len();
    let fields = hdr(cx.link.access, &mut m, 0, IP_HDR).ok().and_then(|h| {
        let hl = usize::from(h[0] & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
        let frag = u16::from_be_bytes([h[6], h[7]]) & 0x3fff != 0;
        let ident = u16::from_be_bytes([h[4], h[5]]);
        let src = Ipv4Addr::new(h[12], h[13], h[14], h[15]);
        let dst = Ipv4Addr::new(h[16], h[17], h[18], h[19]);
        let ok = hl >= IP_HDR && hl <= len && len <= 65535 && (total == len || total == 0);
        ok.then_some((hl, frag, ident, h[9], src, dst))
    });
    let Some((hl, frag, ident, proto, src, dst)) = fields else {
        return cx.link.drop_pkt(m, DropReason::NetchanBadPkt);
    };
    if hdr(cx.link.access, &mut m, 0, hl).is_err() {
        return cx.link.drop_pkt(m, DropReason::NetchanBadPkt);
    }
    let Some((ifp, nexthop, bcast)) = ip::ip_route(&cx.inet(), dst) else {
        return cx.link.drop_pkt(m, DropReason::IpNoRoute);
    };
    let src = if src.is_unspecified() {
        match ifp.source_for(dst) {
            Some(s) => s,
            None => return cx.link.drop_pkt(m, DropReason::IpNoRoute),
        }
    } else {
        src
    };
    let ident = if ident == 0 && !frag {
        cx.v4.next_ip_id()
    } else {
        ident
    };
    if !frag && !fill_l4(&mut m, proto, false, src.into(), dst.into(), hl) {
        return cx.link.drop_pkt(m, DropReason::NetchanBadPkt);
    }
    {
        let Ok(b) = m.try_first_mut() else {
            return cx.link.drop_pkt(m, DropReason::IpOutDropped);
        };
        let mut p = wire::Ipv4Packet::new_unchecked(&mut b[..hl]);
        p.set_total_len(len as u16);
        p.set_ident(ident);
        p.set_src_addr(src);
        p.fill_checksum();
    }
    cx.link.stats.ip.localout += 1;
    cx.link.stats.netchan.sent += 1;
    ip::ip_send(&mut cx.inet(), ifp, m, dst, nexthop, bcast);
}

fn output6(cx: &mut Cx<'_>, mut m: Mbuf) {
    let len = m.len();
    let fields = hdr(cx.link.access, &mut m, 0, IP6_HDR).ok().and_then(|h| {
        let plen = usize::from(u16::from_be_bytes([h[4], h[5]]));
        let mut a = [0u8; 16];
        a.copy_from_slice(&h[8..24]);
        let src = Ipv6Addr::from(a);
        a.copy_from_slice(&h[24..40]);
        let dst = Ipv6Addr::from(a);
        let ok = len - IP6_HDR <= 65535 && (plen == len - IP6_HDR || plen == 0);
        ok.then_some((h[6], src, dst))
    });
    let Some((next, src, dst)) = fields else {
        return cx.link.drop_pkt(m, DropReason::NetchanBadPkt);
    };
    let Some((ifp, nexthop)) = ip6::ip6_route(&cx.inet6(), dst, None) else {
        return cx.link.drop_pkt(m, DropReason::Ip6NoRoute);
    };
    let src = if src.is_unspecified() {
        match ifp.source6_for(dst) {
            Some(s) => s,
            None => return cx.link.drop_pkt(m, DropReason::Ip6NoRoute),
        }
    } else {
        src
    };
    let mut h = [0u8; 18];
    h[..2].copy_from_slice(&((len - IP6_HDR) as u16).to_be_bytes());
    h[2..].copy_from_slice(&src.octets());
    // Payload length, then (past next header and hop limit) the source.
    if m.copyback(4, &h[..2]).is_err() || m.copyback(8, &h[2..]).is_err() {
        return cx.link.drop_pkt(m, DropReason::Ip6OutDropped);
    }
    if !fill_l4(&mut m, next, true, src.into(), dst.into(), IP6_HDR) {
        return cx.link.drop_pkt(m, DropReason::NetchanBadPkt);
    }
    cx.link.stats.ip6.localout += 1;
    cx.link.stats.netchan.sent += 1;
    ip6::ip6_send(&mut cx.inet6(), ifp, m, dst, nexthop);
}
