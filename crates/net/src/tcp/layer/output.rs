//! A connection serviced (FreeBSD's `tcp_output` with the socket-buffer side of
//! `tcp_usrreq`): the application's bytes into the control block, received bytes out
//! to the application, the control block's segments built (sharing the send buffer's
//! packet buffers where that pays) and sent down `ip_output` or `ip6_output`, and
//! what the application sees updated; a finished connection freed or reduced to its
//! TIME_WAIT remnant. `tcp_flush` services the connections whose output waited for
//! the end of the batch.

use super::TcpCx;
use super::{Conn, TcpWorker, Tuple};
use crate::inet::ip::{self, IpOut, DEFAULT_TTL};
use crate::inet6::ip6::Ip6Out;
use crate::stats::DropReason;
use crate::tcp::chan::{err, phase, IpOpts, Piece, StreamShared};
use crate::tcp::sndbuf::Piece as SndPiece;
use crate::tcp::tcb::{SegOut, State, TcpError, PAYLOAD_PIECES};
use mbuf::Mbuf;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use wire::{IpProtocol, TcpPacket};

/// Services the connections whose output waited for the end of the batch
/// ([`Tcb::output_may_wait`](crate::tcp::Tcb::output_may_wait)). Called by the
/// worker after each stage that delivers segments.
pub(crate) fn tcp_flush(cx: &mut TcpCx<'_, '_>, tw: &mut TcpWorker) {
    let mut list = std::mem::take(&mut tw.deferred);
    for i in list.drain(..) {
        service(cx, tw, i);
    }
    debug_assert!(tw.deferred.is_empty(), "only input defers output");
    // The list's allocation comes back for the next batch.
    tw.deferred = list;
}

/// Moves bytes between a connection and its application, sends what is due, updates
/// what the application sees, and frees a finished connection.
pub(super) fn service(cx: &mut TcpCx<'_, '_>, tw: &mut TcpWorker, i: usize) {
    let Some(mut c) = tw.slab.take(i) else {
        return;
    };
    c.deferred = false;
    take_options(cx, tw, &mut c);
    app_to_tcb(cx, &mut c);
    app_close(cx, tw, &mut c);
    let s = &c.s;
    // Control block → application, then → wire: what the channel takes leaves the
    // receive buffer first, so the acknowledgment below carries the window it
    // opens (one segment out, not an ACK and then a window update).
    let mut moved = false;
    if s.rd_shut.load(Ordering::Acquire) && c.tcb.recv_available() > 0 {
        // Shut down for reading: acknowledged and dropped (FreeBSD's tcp_input
        // frees what arrives for a socket that cannot receive more), the window
        // left open.
        let gone = c.tcb.recv_with(usize::MAX, |b| b.len());
        cx.link.stats.tcp.rcvshutrdbyte += gone as u64;
        c.tcb.set_app_unread(app_unread(s));
    }
    // Straight from the receive buffer into the channel's chunks, as much as the
    // channel takes (this worker is its only producer).
    while c.tcb.recv_available() > 0 && s.rx.space() > 0 {
        let k = c.tcb.recv_with(s.rx.space(), |b| s.rx.push(b));
        if k == 0 {
            break;
        }
        moved = true;
    }
    if moved {
        note_reader(&mut tw.readers, s);
    }
    // What our SYN's answer said of the server's Fast Open cookie, to the cache.
    if let Some(news) = c.tcb.take_fastopen_news() {
        cx.tcp
            .tfo
            .client_update(c.tuple.remote.ip(), news, cx.link.now);
    }
    tw.segs.clear();
    let mut segs = std::mem::take(&mut tw.segs);
    c.tcb.output(cx.link.now, &mut cx.link.stats.tcp, &mut segs);
    for seg in &segs {
        // Straight from the send buffer into the packet.
        send_segment(&mut cx.ip46(), &c.tuple, seg, c.tcb.payload(seg), c.ip);
    }
    tw.segs = segs;
    if c.orphan && matches!(c.tcb.state(), State::Closed | State::TimeWait) {
        c.orphan = false;
        tw.orphans -= 1;
    }
    // A closed connection's end of stream is told below, after its error: a reader
    // that saw the end first would take a reset for a clean close (`Ok(0)`).
    if c.tcb.recv_finished()
        && c.tcb.state() != State::Closed
        && c.tcb.recv_available() == 0
        && !s.rx_eof.load(Ordering::Acquire)
    {
        s.rx_eof.store(true, Ordering::Release);
        s.wake();
    }
    // What the application sees.
    match c.tcb.state() {
        // A Fast Open connection whose SYN's data was taken is the application's
        // at once (RFC 7413 §4.2.2), before the handshake completes.
        State::SynSent | State::SynReceived if !c.tcb.fastopen_passive() => {}
        State::Closed => {
            let e = match c.tcb.error() {
                None => err::NONE,
                Some(TcpError::Refused) => err::REFUSED,
                Some(TcpError::Reset) => err::RESET,
                Some(TcpError::TimedOut) => err::TIMED_OUT,
                Some(TcpError::Aborted) => err::ABORTED,
                Some(TcpError::Unreachable) => err::UNREACHABLE,
            };
            s.error.store(e, Ordering::Release);
            s.rx_eof.store(true, Ordering::Release);
            s.phase.store(phase::CLOSED, Ordering::Release);
            s.wake();
            if let Some(l) = &c.listener {
                if c.half_open {
                    l.half_open.fetch_sub(1, Ordering::AcqRel);
                }
            }
            tw.remove_held(i, c);
            return;
        }
        _ => {
            if s.phase.load(Ordering::Acquire) == phase::CONNECTING {
                s.phase.store(phase::ESTABLISHED, Ordering::Release);
                s.wake();
            }
            if !c.announced {
                c.announced = true;
                if let Some(l) = &c.listener {
                    if std::mem::take(&mut c.half_open) {
                        l.half_open.fetch_sub(1, Ordering::AcqRel);
                    }
                    if l.accept_q.push(s.clone()).is_err() {
                        // The accept queue is full: refuse, as a full listen queue does.
                        DropReason::TcpListenDrop.count(cx.link.stats);
                        c.tcb.abort();
                    } else {
                        l.wake();
                    }
                }
            }
        }
    }
    // TIME_WAIT lasts minutes and has nothing left to carry: once the application's
    // handle is gone (this worker holds the last reference), the byte channels and
    // the control block's buffers go, leaving the TCB alone (the connection-rate
    // bench had 45 KB per TIME_WAIT connection before this, 2 GB in a few seconds).
    if c.tcb.state() == State::TimeWait && c.tx_partial.is_none() {
        if let Some(sh) = Arc::get_mut(&mut c.s) {
            // With nothing owed to the peer, what is left of the connection is its
            // remnant: 48 bytes where the connection is a kilobyte (FreeBSD's
            // tcp_twstart).
            if let Some(rem) = c.tcb.time_wait() {
                let (t, ip) = (c.tuple, c.ip);
                tw.remove_held(i, c);
                tw.insert_tw(t, rem, ip);
                return;
            }
            if sh.release_channels() {
                c.tcb.release_buffers();
            }
        }
    }
    tw.charge(&mut c);
    tw.arm(i, &mut c);
    let aborted = c.tcb.state() == State::Closed;
    tw.slab.put_back(i, c);
    if aborted {
        service(cx, tw, i);
    }
}

/// The socket options and buffer sizes the application set since (`opts_dirty`),
/// into the control block; what the control block settled (MSS, buffers rounded
/// to whole segments), back to the application; the worker's memory clamp.
#[inline]
fn take_options(cx: &mut TcpCx<'_, '_>, tw: &TcpWorker, c: &mut Conn) {
    // Borrowed, not cloned: the stream's reference count is shared with the
    // application thread.
    let s = &c.s;
    // Looked at before it is cleared: no write to the application's line per call.
    if s.opts_dirty.load(Ordering::Acquire) && s.opts_dirty.swap(false, Ordering::AcqRel) {
        c.tcb.set_nodelay(s.opt_nodelay.load(Ordering::Acquire));
        let ka = s.opt_keepalive_ns.load(Ordering::Acquire);
        c.tcb.set_keepalive(
            (ka != 0).then(|| dev::Duration::from_nanos(ka)),
            cx.link.now,
        );
        let ki = s.opt_keepinit_ns.load(Ordering::Acquire);
        if ki != 0 {
            c.tcb
                .set_keep_init(dev::Duration::from_nanos(ki), cx.link.now);
        }
        if s.opt_noopt.load(Ordering::Acquire) {
            c.tcb.set_noopt();
        }
        c.ip = s.ip_opts();
        let maxseg = s.opt_maxseg.load(Ordering::Acquire);
        if maxseg != 0 {
            c.tcb.set_user_mss(maxseg.min(u32::from(u16::MAX)) as u16);
        }
        let (snd, rcv) = (
            s.opt_sndbuf.load(Ordering::Acquire),
            s.opt_rcvbuf.load(Ordering::Acquire),
        );
        if snd != 0 || rcv != 0 {
            c.tcb
                .set_buffer_sizes((snd != 0).then_some(snd), (rcv != 0).then_some(rcv));
        }
    }
    // What the application read since opens the window.
    c.tcb.set_app_unread(app_unread(s));
    let mss = c.tcb.mss();
    if s.mss.load(Ordering::Relaxed) != mss {
        s.mss.store(mss, Ordering::Release);
    }
    // Buffers the control block rounded to whole segments (once, when it learns
    // the MSS) are what the application's channels hold too.
    let rcv_set = c.tcb.recv_buffer_size();
    if s.rcvbuf.load(Ordering::Relaxed) != rcv_set {
        s.rcvbuf.store(rcv_set, Ordering::Release);
    }
    let (snd, rcv) = c.tcb.buffer_sizes();
    if s.rx.cap() < rcv || s.tx.cap() < snd {
        s.rx.grow_to(rcv);
        s.tx.grow_to(snd);
    }
    // The memory clamp of the worker's state (`tcp::mem`), if it moved since.
    let clamp = tw.mem_state.clamp();
    if c.tcb.mem_clamp() != clamp {
        c.apply_clamp(clamp);
    }
}

/// Application → control block: the send channel's bytes into the send buffer,
/// and the buffers it acknowledged back to the channel.
#[inline]
fn app_to_tcb(cx: &mut TcpCx<'_, '_>, c: &mut Conn) {
    let s = &c.s;
    // Application → control block.
    let (tcb, tx_partial) = (&mut c.tcb, &mut c.tx_partial);
    let space = tcb.send_space();
    if space > 0 && (!s.tx.is_empty() || tx_partial.is_some()) {
        // Large chunks move into the send buffer whole (no copy), and so does a
        // small one into an empty buffer (a request: nothing to allocate); other
        // small ones are copied, so that small writes share chunks.
        let whole = if tcb.send_buffered() == 0 {
            1
        } else {
            MOVE_CHUNK
        };
        let took = s.tx.drain_moving(tx_partial, space, whole, |p| match p {
            // Offered only when it fits in `space`, so it is taken whole.
            Piece::Whole(c) => {
                let n = c.len();
                match tcb.send_chunk(c) {
                    Ok(()) => n,
                    Err(c) => {
                        let took = tcb.send(&c);
                        debug_assert_eq!(took, n, "a whole chunk beyond send_space");
                        took
                    }
                }
            }
            // Bytes in a packet buffer: the send buffer keeps a reference, and
            // segments share it. A piece that continues the send buffer's last
            // chunk in the same buffer joins it, whatever its length (no copy,
            // no new chunk: as acknowledgments open room a segment or two at a
            // time, a buffer's pieces would otherwise make a long list of tiny
            // chunks); another starts a chunk unless it is short enough that
            // a copy costs less than a reference.
            Piece::InPkt { m, off, data }
                if data.len() >= crate::tcp::chan::HOLD_MIN || tcb.send_continues(m, off) =>
            {
                match m.copym(off, data.len()).map(|c| tcb.send_mbuf(c)) {
                    Ok(Ok(())) => data.len(),
                    // No record in the pool, or no room for a shared chunk: copy.
                    _ => tcb.send(data),
                }
            }
            Piece::Part(b) | Piece::InPkt { data: b, .. } => tcb.send(b),
        });
        // A writer may be waiting for room: wake it once a quarter of the channel
        // is free (or all of it), not for every segment's worth, so a bulk writer
        // and the worker do not trade a wake-up per burst.
        if took > 0 && (s.tx.is_empty() || s.tx.space() >= s.tx.cap() / 4) {
            s.wake_writer();
        }
    }
    // Acknowledged chunks go back to the channel for the writer to fill again.
    while let Some(chunk) = tcb.take_spare() {
        s.tx.recycle(chunk);
    }
    if !s.tx.is_empty() && tcb.send_clamped() {
        cx.link.stats.tcp.memrefused += 1;
    }
}

/// What the application's `close`, `shutdown` and `SO_LINGER` 0 ask of the
/// connection: a reset, a FIN once the send channel is empty, or an orphan.
#[inline]
fn app_close(cx: &mut TcpCx<'_, '_>, tw: &mut TcpWorker, c: &mut Conn) {
    let s = &c.s;
    // SO_LINGER 0: a reset now, whatever is queued either way.
    if s.abort.load(Ordering::Acquire) && !matches!(c.tcb.state(), State::Closed | State::TimeWait)
    {
        c.tcb.abort();
    }
    let dropped = s.dropped.load(Ordering::Acquire);
    if dropped
        && !c.orphan
        && cx.tcp.cfg.close_unread_rst
        && !matches!(c.tcb.state(), State::Closed | State::TimeWait)
        && unread(&c.tcb, s) > 0
    {
        // Closed with received data unread: a reset, not a FIN that would tell
        // the peer it was all consumed (RFC 9293 §3.6.1, RFC 1122 §4.2.2.13;
        // Linux's tcp_close). What the application queued is not sent either.
        cx.link.stats.tcp.abortonclose += 1;
        cx.link.stats.tcp.drops += 1;
        c.tcb.abort();
    }
    if dropped {
        // Closed, not only shut down: FIN_WAIT_2 waits a bounded time from now on.
        c.tcb.detach(cx.link.now);
    }
    let app_done = s.wr_shut.load(Ordering::Acquire) || dropped;
    if app_done && !c.fin_requested && s.tx.is_empty() && c.tx_partial.is_none() {
        c.fin_requested = true;
        c.tcb.close();
    }
    if dropped && !c.orphan && !matches!(c.tcb.state(), State::Closed | State::TimeWait) {
        // An orphan now. One too many (`max_orphans`, split among the workers) is
        // reset and freed at once, as Linux's tcp_close answers "too many orphaned
        // sockets" (LINUX_MIB_TCPABORTONMEMORY): a crowd of peers that each
        // acknowledge just enough to outlast the orphans' time bounds cannot hold
        // every connection's buffers.
        let limit = (cx.tcp.cfg.max_orphans as usize).div_ceil(cx.tcp.nworkers.max(1));
        if tw.orphans >= limit {
            cx.link.stats.tcp.orphandrop += 1;
            cx.link.stats.tcp.drops += 1;
            c.tcb.abort();
        } else {
            c.orphan = true;
            tw.orphans += 1;
        }
    }
}

/// Received bytes the application has not read: in the control block's
/// receive buffer, and what it holds ([`app_unread`]).
fn unread(tcb: &crate::tcp::tcb::Tcb, s: &StreamShared) -> usize {
    tcb.recv_available() + app_unread(s)
}

/// Received bytes past the control block the application has not read: in the
/// channel, or taken out to be peeked at.
fn app_unread(s: &StreamShared) -> usize {
    s.rx.len() + s.rx_peeked.load(Ordering::Acquire)
}

/// A stream that has new data for its reader: woken once at the end of the worker's
/// batch (whether a reader waits is asked once per batch, a fence, not per segment).
pub(super) fn note_reader(readers: &mut Vec<Arc<StreamShared>>, s: &Arc<StreamShared>) {
    if !readers.iter().any(|r| Arc::ptr_eq(r, s)) {
        readers.push(s.clone());
    }
}

/// Chunks from the application's channel at least this long move into the send
/// buffer without a copy; shorter ones are copied so small writes share a chunk.
const MOVE_CHUNK: usize = 4096;

/// Whether a segment takes `p` by reference to its packet buffer rather than by
/// copy: when it is not short (a reference costs a packet record; a copy of less
/// than a KiB costs less). The send buffer holds that buffer until the bytes are
/// acknowledged anyway, so a segment sharing even a small part of it pins nothing
/// more for long (the receiver asks its own rule, `chan::worth_holding`, of what it
/// keeps). Copying the pieces under a quarter of their buffer, as it once did, had
/// the sender copy a quarter of a bulk transfer's bytes a second time (bench tcp,
/// mpstack-polled).
fn shares<'a>(p: &SndPiece<'a>) -> Option<(&'a Mbuf, usize)> {
    p.shared
        .filter(|_| p.data.len() >= crate::tcp::chan::HOLD_MIN)
}

/// The header `hdr` and the segment's data in one chain: one buffer for the
/// header and the bytes copied (a jumbo cluster for a segmentation-offload
/// device's large ones), so the receiver parses a copied segment in place; with
/// `share`, pieces that lie in packet buffers follow as segments of their own
/// ([`Mbuf::copym`], no copy). Copied bytes past a shared piece, or more than a
/// jumbo cluster holds, go into buffers of their own of the same kind. Also
/// returns how many bytes it shared; `None` when the pool has no buffer.
fn build_segment<'p>(
    hdr: &[u8],
    payload: impl Iterator<Item = SndPiece<'p>> + Clone,
    share: bool,
) -> Option<(Mbuf, usize)> {
    const MOST: usize = mbuf::MJUMBYTES - mbuf::DEFAULT_HEADROOM;
    let shares = |p: &SndPiece<'p>| shares(p).filter(|_| share);
    let mut copied: usize = payload
        .clone()
        .filter(|p| shares(p).is_none())
        .map(|p| p.data.len())
        .sum();
    let first = (hdr.len() + copied).min(MOST);
    let mut m = Mbuf::with_capacity(first).ok()?;
    m.append(hdr).ok()?;
    // Room left in the last buffer, which is ours to write.
    let mut room = first - hdr.len();
    let mut by_ref = 0;
    for piece in payload {
        if let Some((pm, at)) = shares(&piece) {
            m.cat(pm.copym(at, piece.data.len()).ok()?);
            by_ref += piece.data.len();
            room = 0;
            continue;
        }
        let mut data = piece.data;
        while !data.is_empty() {
            let n = if room == 0 {
                // A new buffer, filled before it joins: `cat` passes over an empty
                // one, and `append` would then have gone on in 2 KiB clusters.
                room = copied.min(MOST);
                let mut more = Mbuf::with_capacity(room).ok()?;
                let n = data.len().min(room);
                more.append(&data[..n]).ok()?;
                m.cat(more);
                n
            } else {
                let n = data.len().min(room);
                m.append(&data[..n]).ok()?;
                n
            };
            (room, copied, data) = (room - n, copied - n, &data[n..]);
        }
    }
    Some((m, by_ref))
}

/// Builds one segment and sends it down `ip_output`, with the IP options `ip`.
/// `payload` is the segment's data (`seg.data_len` bytes) in pieces: copied into
/// the header's buffer, or shared where they lie in a packet buffer
/// ([`Mbuf::copym`], no copy).
pub(crate) fn send_segment<'p>(
    cx: &mut crate::ip46::Ip46Cx<'_, '_>,
    t: &Tuple,
    seg: &SegOut,
    payload: impl Iterator<Item = SndPiece<'p>> + Clone,
    ip: IpOpts,
) {
    let repr = seg.to_repr(t.local.port(), t.remote.port(), &[]);
    let hlen = repr.header_len();
    let mut hdr = [0u8; 60];
    {
        let mut p = TcpPacket::new_unchecked(&mut hdr[..hlen]);
        repr.emit(&mut p, &t.local.ip(), &t.remote.ip(), false);
    }
    // At most PAYLOAD_PIECES buffers a segment (Linux's skb holds MAX_SKB_FRAGS,
    // 17): a receiver of ours takes no more by reference, and copied the whole of a
    // longer chain twice (into its scratch buffer, then into the channel). A send
    // buffer of mixed pieces (the first writes of a connection, say) makes one:
    // such a segment is built again with its data copied, once.
    let Some((mut m, by_ref)) = build_segment(&hdr[..hlen], payload.clone(), true)
        .filter(|(m, _)| m.nsegs() <= PAYLOAD_PIECES)
        .or_else(|| build_segment(&hdr[..hlen], payload, false))
    else {
        return DropReason::IpOutDropped.count(cx.link.stats);
    };
    cx.link.stats.tcp.sndbyteshared += by_ref as u64;
    // What the send buffer held of it (a probe may find less than it asked for).
    let total = m.len();
    let pseudo =
        wire::checksum::pseudo_header(&t.local.ip(), &t.remote.ip(), IpProtocol::Tcp, total as u32);
    // The checksum is left to the output interface (Linux's CHECKSUM_PARTIAL): the
    // field holds the pseudo-header sum, and `ip_send` / `ip6_send` finish it in
    // software for a device that does not (ip::csum_finish).
    let Some(h) = m.head_mut::<18>() else {
        let why = if t.local.is_ipv4() {
            DropReason::IpOutDropped
        } else {
            DropReason::Ip6OutDropped
        };
        return cx.link.drop_pkt(m, why);
    };
    h[16..18].copy_from_slice(&pseudo.to_be_bytes());
    m.hdr.csum_flags |= mbuf::CSUM_L4_NEEDED;
    m.hdr.tso_segsz = seg.tso_segsz;
    // The socket's DSCP; the ECN field is the stack's: ECT(0) on an ECN-capable
    // segment (RFC 3168 §5), else Not-ECT.
    let tos = (ip.tos & !0b11) | if seg.ect { 0b10 } else { 0 };
    let (src, dst) = match (t.local.ip(), t.remote.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => (s, d),
        (IpAddr::V6(src), IpAddr::V6(dst)) => {
            return crate::inet6::ip6::ip6_output_tclass(
                &mut cx.inet6(),
                m,
                Ip6Out {
                    src,
                    dst,
                    proto: IpProtocol::Tcp,
                    hlim: ip.ttl_or(crate::inet6::ip6::DEFAULT_HLIM),
                    keep_unspec: false,
                    ifindex: None,
                },
                tos,
            );
        }
        _ => return DropReason::IpOutDropped.count(cx.link.stats),
    };
    ip::ip_output_tos(
        &mut cx.inet(),
        m,
        IpOut {
            src,
            dst,
            proto: IpProtocol::Tcp,
            ttl: ip.ttl_or(DEFAULT_TTL),
            // Segments are sized by the MSS; Don't Fragment waits for path MTU
            // discovery (RFC 1191), which needs ICMP "fragmentation needed" handled.
            df: false,
        },
        tos,
    );
}
