//! Segment arrival on a worker (FreeBSD's `tcp_input`, before the state machine):
//! length and checksum checked, the segment handed to its flow's home worker, parsed
//! in place where its buffers allow, and given to its connection (or its TIME_WAIT
//! remnant); one with no connection goes to `listen`. Output for in-order data and
//! ACKs may wait for the end of the batch (`output`'s `tcp_flush`).

use super::limit::{limit_challenge, per_worker};
use super::listen::tcp_listen_input;
use super::output::{note_reader, send_segment, service};
use super::TcpCx;
use super::{flow_home, Found, TcpIn, TcpMsg, TcpWorker, Tuple};
use crate::stats::DropReason;
use crate::tcp::tcb::{Payload, SegIn, PAYLOAD_PIECES};
use mbuf::Mbuf;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use wire::{TcpPacket, TcpRepr};

/// TCP's entry in the IPv4 protocol switch (`inetsw`), with the worker's
/// connections lent beside the context.
pub(crate) fn tcp4_input(
    cx: &mut TcpCx<'_, '_>,
    tw: &mut TcpWorker,
    _ifp: &std::sync::Arc<crate::link::iface::Ifnet>,
    m: Mbuf,
    info: crate::inet::ip::IpInfo,
) {
    tcp_input(cx, tw, m, info.into());
}

/// `tcp6_input`: the header and its options made contiguous (the m_pulldown
/// paper's length checks), then the TCP layer, the same for both families:
/// connections, listeners, SYN cookies, and a reset for a closed port (RFC 9293
/// §3.10.7.1).
pub(crate) fn tcp6_input(
    cx: &mut TcpCx<'_, '_>,
    tw: &mut TcpWorker,
    _ifp: &std::sync::Arc<crate::link::iface::Ifnet>,
    mut m: Mbuf,
    info: crate::inet6::ip6::Ip6Info,
) {
    let plen = m.len() - info.off;
    if plen < 20 {
        cx.link.stats.tcp.rcvtotal += 1;
        return cx.link.drop_pkt(m, DropReason::TcpShort);
    }
    let doff = {
        let Ok(h) = crate::hdr::hdr(cx.link.access, &mut m, info.off, 20) else {
            cx.link.stats.tcp.rcvtotal += 1;
            return cx.link.drop_pkt(m, DropReason::TcpShort);
        };
        usize::from(h[12] >> 4) * 4
    };
    if doff < 20 || doff > plen || crate::hdr::hdr(cx.link.access, &mut m, info.off, doff).is_err()
    {
        cx.link.stats.tcp.rcvtotal += 1;
        return cx.link.drop_pkt(m, DropReason::TcpBadOff);
    }
    let tin = TcpIn {
        src: std::net::IpAddr::V6(info.src),
        dst: std::net::IpAddr::V6(info.dst),
        off: info.off,
        bcast: info.mcast,
    };
    tcp_input(cx, tw, m, tin);
}

/// `tcp_input` from `ip_input`: validates, then processes here or hands to the home.
pub(crate) fn tcp_input(cx: &mut TcpCx<'_, '_>, tw: &mut TcpWorker, m: Mbuf, info: TcpIn) {
    let len = m.len().saturating_sub(info.off);
    if len < 20 {
        return cx.link.drop_pkt(m, DropReason::TcpShort);
    }
    let mut ports = [0u8; 4];
    if m.copydata(info.off, &mut ports).is_err() {
        return cx.link.drop_pkt(m, DropReason::TcpShort);
    }
    let sport = u16::from_be_bytes([ports[0], ports[1]]);
    let dport = u16::from_be_bytes([ports[2], ports[3]]);
    let local = SocketAddr::new(info.dst, dport);
    let remote = SocketAddr::new(info.src, sport);
    // The device's RSS hash is the flow's hash when it has one (the symmetric key
    // makes both directions agree); otherwise compute it.
    let home = if m.hdr.rss_hash != 0 && cx.tcp.nworkers > 1 {
        dev::rss::queue_of(m.hdr.rss_hash, cx.tcp.nworkers)
    } else {
        flow_home(local, remote, cx.tcp.nworkers)
    };
    if home != cx.link.worker {
        cx.link.stats.tcp.handoff += 1;
        cx.handoff_tcp(home, TcpMsg::Segment(m, info));
        return;
    }
    tcp_input_local(cx, tw, m, info);
}

/// For a chain of at most [`PAYLOAD_PIECES`] segments whose first holds the whole
/// TCP header at `off`: that segment from `off` (header and any data after it), and
/// the segment's data, from its first buffer and the others, as a [`Payload`].
fn header_and_data(m: &Mbuf, off: usize) -> Option<(&[u8], Payload<'_>)> {
    if m.nsegs() > PAYLOAD_PIECES {
        return None;
    }
    let mut segs = m.segments();
    let first = segs.next()?.get(off..)?;
    let doff = usize::from(*first.get(12)? >> 4) * 4;
    if doff < 20 {
        return None;
    }
    let mut data = Payload::from(first.get(doff..)?);
    for s in segs {
        data.push(s);
    }
    Some((first, data))
}

/// Processes a segment of a flow homed on this worker.
pub(crate) fn tcp_input_local(cx: &mut TcpCx<'_, '_>, tw: &mut TcpWorker, m: Mbuf, info: TcpIn) {
    let len = m.len() - info.off;
    let mut scratch = std::mem::take(&mut tw.scratch);
    // Checked by the device, or never filled in: made by a stack on this machine
    // (looped back, or over a link with checksum offload).
    let sum_ok = m.hdr.csum_flags & (mbuf::CSUM_L4_VALID | mbuf::CSUM_L4_NEEDED) != 0;
    // Parse in place when the packet is one segment (what devices deliver), or a
    // header buffer and the buffers of data after it (what a sender sharing its send
    // buffer makes); gather into the worker's scratch buffer other chains.
    let mut chained = None;
    let bytes: &[u8] = if m.nsegs() == 1 {
        &m.first()[info.off..info.off + len]
    } else if let Some((h, data)) = sum_ok.then(|| header_and_data(&m, info.off)).flatten() {
        chained = Some(data);
        h
    } else {
        // As long as the longest packet a device delivers (a large segment from
        // one with segmentation offload: bounded by its frame size).
        if scratch.len() < len {
            scratch.resize(len, 0);
        }
        if m.copydata(info.off, &mut scratch[..len]).is_err() {
            tw.scratch = scratch;
            return cx.link.drop_pkt(m, DropReason::TcpShort);
        }
        &scratch[..len]
    };
    let (src, dst) = (info.src, info.dst);
    let parsed = match TcpPacket::new_checked(bytes) {
        Err(_) => Err(DropReason::TcpBadOff),
        Ok(p) => {
            if !sum_ok && !p.verify_checksum(&src, &dst) {
                Err(DropReason::TcpBadSum)
            } else {
                TcpRepr::parse(&p, &src, &dst, false).map_err(|_| DropReason::TcpBadOff)
            }
        }
    };
    let repr = match parsed {
        Ok(r) => r,
        Err(why) => {
            why.count(cx.link.stats);
            tw.scratch = scratch;
            return;
        }
    };
    let mut seg = SegIn::from_repr(&repr);
    if let Some(data) = chained {
        seg.payload = data;
    }
    // Congestion Experienced (RFC 3168 §5): the low two bits of IPv4's TOS byte or
    // of IPv6's traffic class, both 1, read in place from the first buffer, which
    // holds the IP header.
    seg.ce = match m.first() {
        [b0, b1, ..] if b0 >> 4 == 4 => b1 & 3 == 3,
        [b0, b1, ..] if b0 >> 4 == 6 => (b1 >> 4) & 3 == 3,
        _ => false,
    };
    if seg.syn && seg.fin && cx.tcp.cfg.drop_synfin {
        // FreeBSD's net.inet.tcp.drop_synfin: SYN and FIN together, in any state.
        cx.link.stats.tcp.rcvbadsyn += 1;
        tw.scratch = scratch;
        return;
    }
    // Output (the ACK, new data) may wait for the rest of the batch when the
    // segment asks nothing urgent of it.
    let plain = !(seg.syn || seg.fin || seg.rst);
    let tuple = Tuple {
        local: SocketAddr::new(info.dst, repr.dst_port),
        remote: SocketAddr::new(info.src, repr.src_port),
    };
    if info.bcast {
        tw.scratch = scratch;
        return DropReason::TcpNoPort.count(cx.link.stats);
    }
    let found = tw.conns.get(&tuple).copied();
    if let Some(Found::TimeWait(j)) = found {
        if !time_wait_input(cx, tw, j as usize, &tuple, &seg) {
            tw.scratch = scratch;
            return;
        }
    } else if let Some(Found::Conn(i)) = found {
        let i = i as usize;
        let reuse = tw
            .slab
            .get(i)
            .is_some_and(|c| c.tcb.time_wait_accepts_syn(&seg));
        if reuse {
            // A new incarnation of the 4-tuple ends the old TIME_WAIT early.
            cx.link.stats.tcp.timewaitreuse += 1;
            tw.remove(i, &tuple);
        } else {
            if let Some(c) = tw.slab.get_mut(i) {
                // In-order data goes straight into the application's channel when
                // nothing waits in the receive buffer (this worker is the channel's
                // only producer); the rest is buffered as usual.
                let (tcb, s, held) = (&mut c.tcb, &c.s, &mut c.rx_held);
                let (mut direct, mut shared, mut shut) = (0, 0, 0);
                let rd_shut = s.rd_shut.load(Ordering::Acquire);
                tcb.input_to(&seg, cx.link.now, &mut cx.link.stats.tcp, &mut |data| {
                    if rd_shut {
                        // Shut down for reading: taken and dropped.
                        shut += data.len();
                        return data.len();
                    }
                    let (k, by_ref) = s.rx.push_payload(&m, data, held);
                    direct += k;
                    shared += by_ref;
                    k
                });
                cx.link.stats.tcp.rcvbyteshared += shared as u64;
                cx.link.stats.tcp.rcvshutrdbyte += shut as u64;
                limit_challenge(cx, tcb, &mut tw.challenge_limit);
                if direct > 0 {
                    note_reader(&mut tw.readers, s);
                }
                if plain && c.tcb.output_may_wait() {
                    if !std::mem::replace(&mut c.deferred, true) {
                        tw.deferred.push(i);
                    }
                    tw.scratch = scratch;
                    return;
                }
            }
            tw.scratch = scratch;
            service(cx, tw, i);
            return;
        }
    }
    // No connection: a listener's SYN, the ACK of a SYN cookie, or a reset.
    tcp_listen_input(cx, tw, tuple, info.dst, &seg);
    tw.scratch = scratch;
}

/// A segment for a connection reduced to its TIME_WAIT remnant (slot `j`): answered
/// as the connection would have; returns true when it is a SYN that ended the wait
/// (RFC 6191), for a listener to take.
fn time_wait_input(
    cx: &mut TcpCx<'_, '_>,
    tw: &mut TcpWorker,
    j: usize,
    t: &Tuple,
    seg: &SegIn<'_>,
) -> bool {
    let Some((_, rem, ip)) = tw.tws.get_mut(j) else {
        return false;
    };
    if rem.accepts_syn(seg) {
        cx.link.stats.tcp.timewaitreuse += 1;
        tw.remove_tw(j);
        return true;
    }
    if rem.input(
        seg,
        cx.link.now,
        cx.tcp.cfg.time_wait,
        &mut cx.link.stats.tcp,
    ) {
        // Anybody can draw this ACK with any segment that carries one: it goes
        // within the node's limit on challenge ACKs (RFC 5961 §7), as the
        // connection's own answers do.
        let limit = per_worker(cx.tcp.cfg.challenge_ack_limit, cx);
        if !tw
            .challenge_limit
            .take(cx.link.now, limit, cx.ip.isn_secret)
        {
            cx.link.stats.tcp.challengeack_ratelim += 1;
            return false;
        }
        let ack = rem.ack(cx.link.now, &mut cx.link.stats.tcp);
        let ip = *ip;
        send_segment(&mut cx.ip46(), t, &ack, std::iter::empty(), ip);
    }
    false
}
