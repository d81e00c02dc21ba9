//! What to send (FreeBSD's `tcp_output`): [`Tcb::output`] runs the timers that are
//! due, then sends a reset, a keepalive probe, retransmissions, new data as the
//! windows, Nagle (RFC 9293 §3.7.4) and segmentation offload allow, a zero-window
//! probe, and the ACK. Also the window we advertise (never shrunk, RFC 9293
//! §3.8.6.2.2), the size of segments (MSS, SACK blocks, offload bursts, path MTU),
//! and a segment's data, read out of the send buffer. Calls `timer` to run and arm
//! timers and `sack` for the holes to fill.

use super::seq::{diff, le, lt};
use super::{SegOut, State, Tcb};
use crate::stats::TcpStat;
use dev::Instant;

/// The most received data a batch leaves unacknowledged ([`Tcb::output_may_wait`]):
/// Linux's GRO aggregates up to 64 KiB before its one ACK, the same stretch.
pub const ACK_BATCH_MAX: u32 = 64 * 1024;

impl Tcb {
    /// RFC 8201 §5.4 (RFC 1191 §6.4 for IPv4): the path cannot carry segments of the
    /// current size; from now on they are at most `mss` bytes (options included),
    /// and what is in flight goes again at once, resized — it was dropped for its
    /// size, not for congestion, so the congestion window stays. Returns whether
    /// anything changed (a larger or stale `mss` is ignored). `v6`: the message was
    /// an ICMPv6 Packet Too Big.
    pub fn path_mtu(&mut self, mss: u32, v6: bool, st: &mut TcpStat) -> bool {
        // Below 536 bytes lies IPv4's minimum datagram; an MSS of less is a forgery
        // or a broken path, not something to shrink to (Linux's tcp_min_snd_mss: 48).
        let mss = mss.max(536);
        if self.state == State::SynSent {
            // Nothing in flight to resend smaller; over IPv6 the SYN retransmitted
            // offers what the path takes (FreeBSD: ICMPv6 fills the host cache that
            // tcp_mssopt reads). An IPv4 "fragmentation needed" about a SYN changes
            // nothing, as in FreeBSD, whose tcp_ctlinput believes only an MTU below
            // the segment size, still tcp_mssdflt (536) before the SYN-ACK.
            if v6 && mss < u32::from(self.cfg.mss) {
                self.cfg.mss = mss as u16;
                self.path_mss = self.path_mss.min(mss);
                self.snd_mss = self.snd_mss.min(mss);
            }
            return false;
        }
        if !self.state.synchronized() {
            return false;
        }
        self.path_mss = self.path_mss.min(mss);
        if mss >= self.snd_mss {
            return false;
        }
        self.snd_mss = mss;
        st.mturesent += 1;
        self.timed = None;
        self.sack_next = self.snd_una;
        self.snd_nxt = self.snd_una;
        true
    }

    /// Whether this segment's output may wait for the end of the worker's batch:
    /// an established connection with nothing urgent to say (no duplicate ACK owed,
    /// no reset), that has acknowledged all but less than [`ACK_BATCH_MAX`] of what
    /// it received. Then one ACK answers the data segments of a burst, and one pass
    /// of output follows the ACKs of a burst with larger segments (what GRO and LRO
    /// do for Linux and FreeBSD, at the level of the connection).
    pub fn output_may_wait(&self) -> bool {
        self.state == State::Established
            && self.dupacks_owed == 0
            && self.rst_pending.is_none()
            && diff(self.rcv_nxt, self.last_ack_sent) < ACK_BATCH_MAX
    }

    /// The MSS this connection sends with.
    pub fn mss(&self) -> u32 {
        self.snd_mss
    }

    /// Data bytes of one segment for segmentation offload, as Linux's
    /// `tcp_tso_autosize` sizes it: about a millisecond's worth of the connection's
    /// rate, taken as Linux's pacing rate (twice cwnd a round trip in slow start,
    /// 1.2 times after), in whole segments of `room`, at least two, at most what the
    /// device takes. On a fast path that is the device's whole size; on a slow one
    /// (10 Mbit/s, 40 ms) two segments, so a 64 KiB burst does not arrive at a
    /// bottleneck's queue at once, which cost HyStart++ its loss-free exit from slow
    /// start (`hystart_leaves_slow_start_before_a_long_queue_overflows` in sim).
    fn tso_burst(&self, room: u32) -> u32 {
        let most = self.cfg.tso_max / room;
        if let Some(goal) = self.bbr_tso_goal(room) {
            // BBR: a millisecond at its pacing rate.
            return goal.clamp(room * 2.min(most), most * room);
        }
        let segs = match self.srtt.map(|r| r.as_nanos() as u64).filter(|&r| r > 0) {
            Some(srtt) => {
                let tenths: u64 = if self.cwnd < self.ssthresh { 20 } else { 12 };
                let per_ms = u64::from(self.cwnd) * tenths / 10 * 1_000_000 / srtt;
                let segs = (per_ms / u64::from(room)).min(u64::from(most)) as u32;
                segs.clamp(2.min(most), most)
            }
            None => most,
        };
        segs * room
    }

    /// Data bytes that fit in the next segment: [`Tcb::seg_size`] less the SACK
    /// blocks it will carry (NOP, NOP, kind, length and 8 bytes a block).
    pub(super) fn data_room(&self) -> u32 {
        let blocks = self.sack_blocks().iter().flatten().count() as u32;
        let sack = if blocks > 0 { 4 + 8 * blocks } else { 0 };
        self.seg_size().saturating_sub(sack).max(1)
    }

    /// Data bytes per full segment: the MSS less the options every segment carries
    /// (RFC 6691: the MSS counts no options).
    pub fn seg_size(&self) -> u32 {
        let opts = if self.ts_enabled { 12 } else { 0 };
        self.snd_mss.saturating_sub(opts).max(1)
    }

    /// The initial window (`init_cwnd_segs`, RFC 6928's ten by default), and the
    /// restart window after idle (RFC 5681 §4.1), in whole segments of the size
    /// they carry: the MSS less the options every segment carries. Counted in
    /// MSS, it left the first flight with a runt of the options' bytes (120 with
    /// timestamps) behind ten full segments; Linux counts the window in packets,
    /// FreeBSD in `tcp_maxseg`, which has the options taken off.
    pub(super) fn initial_window(&self) -> u32 {
        self.cfg.init_cwnd_segs.max(1) * self.seg_size()
    }

    /// Window still open from what we advertised (never negative).
    pub(super) fn adv_room(&self) -> u32 {
        if lt(self.rcv_nxt, self.rcv_adv) {
            diff(self.rcv_adv, self.rcv_nxt)
        } else {
            0
        }
    }

    /// Received bytes not yet read: in the receive buffer and in the
    /// application's channel.
    pub(super) fn rcv_held(&self) -> usize {
        self.rcvbuf.len() + self.app_unread
    }

    pub(super) fn rcv_window(&self) -> u32 {
        self.window_with(self.rcv_held())
    }

    /// Free room in the receive buffer, whatever the window field can say: what a
    /// segment may occupy and still be acceptable.
    pub(super) fn rcv_space(&self) -> u32 {
        let free = self.rcvbuf_limit().saturating_sub(self.rcv_held());
        free.min(u32::MAX as usize / 2) as u32
    }

    /// The receive window with `held` bytes in the receive buffer: its free room, up
    /// to what the window field can say at our scale.
    pub(super) fn window_with(&self, held: usize) -> u32 {
        let free = self.rcvbuf_limit().saturating_sub(held);
        let max = 65_535usize << self.rcv_wscale;
        free.min(max) as u32
    }

    /// Whether output has something to send right now without a timer.
    pub fn wants_output(&self) -> bool {
        self.ack_now || self.rexmit_owed > 0 || self.rst_pending.is_some() || self.can_send_data()
    }

    pub(super) fn fin_seq(&self) -> u32 {
        self.buf_seq.wrapping_add(self.sndbuf.len() as u32)
    }

    pub(super) fn flight(&self) -> u32 {
        diff(self.snd_max, self.snd_una)
    }

    fn can_send_data(&self) -> bool {
        match self.state {
            State::SynSent | State::SynReceived => self.snd_nxt == self.iss,
            State::Established
            | State::CloseWait
            | State::FinWait1
            | State::Closing
            | State::LastAck => {
                let end = self.fin_seq();
                let unsent = diff(end, self.snd_nxt) as usize;
                let fin_unsent = self.fin_queued && le(self.snd_nxt, end);
                (unsent > 0 && self.send_allowance() > 0) || fin_unsent
            }
            _ => false,
        }
    }

    fn send_allowance(&self) -> u32 {
        let peer = self
            .snd_wnd
            .saturating_sub(diff(self.snd_nxt, self.snd_una));
        if self.sack_recovery() {
            // RFC 6675: what the congestion window leaves beside the pipe.
            let cc = self
                .cwnd
                .saturating_add(self.limited_extra)
                .saturating_sub(self.pipe());
            return cc.min(peer);
        }
        let wnd = self
            .snd_wnd
            .min(self.cwnd.saturating_add(self.limited_extra));
        wnd.saturating_sub(diff(self.snd_nxt, self.snd_una))
    }

    /// Runs due timers, then appends every segment to send now to `out`.
    pub fn output(&mut self, now: Instant, st: &mut TcpStat, out: &mut Vec<SegOut>) {
        self.pace_wait = false;
        self.run_timers(now, st);
        self.arm_keep_init(now);
        if let Some(r) = self.rst_pending.take() {
            st.sndrst += 1;
            st.sndtotal += 1;
            out.push(*r);
        }
        if self.state == State::Closed {
            return;
        }
        if std::mem::take(&mut self.ka_send) {
            // A keepalive probe: one byte before SND.UNA, no data, so the peer answers
            // with an ACK (RFC 1122 §4.2.3.6, as BSD sends it).
            let seg = self.header(now, self.snd_una.wrapping_sub(1));
            st.keepprobe += 1;
            self.push(seg, st, out);
        }
        let owed = std::mem::take(&mut self.rexmit_owed).min(64);
        for _ in 0..owed {
            if !self.send_rexmit(now, st, out) {
                break;
            }
        }
        if self.sack_recovery() {
            // RFC 6675 §5 (NextSeg): while the window has room beside the pipe, the
            // next hole, else new data.
            for _ in 0..256 {
                if self.send_allowance() < self.seg_size().min(self.snd_wnd.max(1))
                    || !self.pace_ok(now)
                {
                    break;
                }
                if self.next_hole().is_some() {
                    if !self.send_rexmit(now, st, out) {
                        break;
                    }
                } else if !self.send_one(now, st, out) {
                    break;
                }
            }
        }
        if self.probe_one {
            self.probe_one = false;
            self.send_probe(now, st, out);
        }
        if std::mem::take(&mut self.tlp_fire) {
            self.send_tlp(now, st, out);
        }
        // Duplicate ACKs owed for out-of-order arrivals, but the last, which the
        // segment below (data or a pure ACK) carries.
        let owed = std::mem::take(&mut self.dupacks_owed).min(16);
        for _ in 1..owed {
            let seg = self.header(now, self.snd_nxt);
            st.sndacks += 1;
            self.push(seg, st, out);
            self.ack_now = true;
        }
        self.restart_after_idle(now);
        let mut sent_any = false;
        for _ in 0..4096 {
            if !self.send_one(now, st, out) {
                break;
            }
            sent_any = true;
        }
        if self.bbr.is_some()
            && self.state.synchronized()
            && diff(self.fin_seq(), self.snd_nxt) < self.seg_size()
        {
            // Less than a segment left to send: the application limits us.
            self.note_app_limited();
        }
        if !sent_any && self.ack_now && self.state != State::SynSent {
            let mut seg = self.header(now, self.snd_nxt);
            // While our FIN is unacknowledged, BSD's tcp_output sends it again on
            // every segment, a pure ACK included (`tcp_outflags`, and "if
            // resending a FIN, be sure not to use a new sequence number").
            let fin = self.fin_seq();
            if !self.challenge
                && self.fin_queued
                && lt(fin, self.snd_max)
                && le(self.snd_una, fin)
                && self.snd_nxt == self.snd_max
            {
                seg.seq = fin;
                seg.fin = true;
            }
            st.sndacks += 1;
            self.push(seg, st, out);
        }
        self.arm_persist(now);
    }

    /// The window to advertise when `wnd` is free: never less than what was already
    /// offered (RFC 9293 §3.8.6.2.2).
    pub(super) fn offered(&self, wnd: u32) -> u32 {
        wnd.max(self.adv_room())
    }

    /// A header with our current ACK, window and timestamp.
    pub(super) fn header(&mut self, now: Instant, seq: u32) -> SegOut {
        let wnd_adv = self.offered(self.rcv_window());
        SegOut {
            seq,
            ack: self.rcv_nxt,
            ack_flag: true,
            wnd: (wnd_adv >> self.rcv_wscale).min(65_535) as u16,
            ts: self.ts_enabled.then(|| (self.tsval(now), self.ts_recent)),
            sack: self.sack_blocks(),
            ece: self.ecn_ok && self.ecn_echo,
            ..SegOut::default()
        }
    }

    pub(super) fn push(&mut self, seg: SegOut, st: &mut TcpStat, out: &mut Vec<SegOut>) {
        if self.recover.is_some() {
            self.prr_out = self.prr_out.saturating_add(seg.data_len as u32);
        }
        if seg.ack_flag {
            self.last_ack_sent = seg.ack;
            let shift = if seg.syn { 0 } else { self.rcv_wscale };
            let edge = seg.ack.wrapping_add(u32::from(seg.wnd) << shift);
            if lt(self.rcv_adv, edge) {
                self.rcv_adv = edge;
            }
            self.ack_now = false;
            self.challenge = false;
            self.dsack = None;
            self.unacked_segs = 0;
            self.delack_deadline = None;
        }
        st.sndtotal += 1;
        out.push(seg);
    }

    /// Sends the next new (or go-back-N) segment, if the windows and Nagle allow.
    pub(super) fn send_one(
        &mut self,
        now: Instant,
        st: &mut TcpStat,
        out: &mut Vec<SegOut>,
    ) -> bool {
        match self.state {
            State::SynSent | State::SynReceived => self.send_syn(now, st, out),
            State::Established
            | State::CloseWait
            | State::FinWait1
            | State::Closing
            | State::LastAck => {
                let Some((len, fin_here, room, end)) = self.data_len(now) else {
                    return false;
                };
                if self.flight() == 0 && len > 0 {
                    self.pace_restart();
                }
                if self.snd_nxt == self.snd_una {
                    self.head_sent = now;
                }
                let mut seg = self.header(now, self.snd_nxt);
                seg.data_len = len as usize;
                if len > room {
                    seg.tso_segsz = room.min(u32::from(u16::MAX)) as u16;
                }
                seg.fin = fin_here;
                seg.psh = len > 0 && self.snd_nxt.wrapping_add(len) == end;
                let rexmit = lt(self.snd_nxt, self.snd_max);
                // New data is ECN-capable, retransmissions are not (RFC 3168
                // §6.1.5); the first after a reduction says so with CWR.
                if self.ecn_ok && len > 0 && !rexmit {
                    seg.ect = true;
                    seg.cwr = std::mem::take(&mut self.ecn_cwr);
                    st.ecn_ect0 += 1;
                }
                if rexmit {
                    self.count_rexmit(len, st);
                } else if len > 0 {
                    st.sndpack += 1;
                    st.sndbyte += u64::from(len);
                    if self.timed.is_none() && !self.ts_enabled {
                        self.timed = Some((self.snd_nxt, now));
                        st.segstimed += 1;
                    }
                }
                self.snd_nxt = self.snd_nxt.wrapping_add(len + u32::from(fin_here));
                if lt(self.snd_max, self.snd_nxt) {
                    self.snd_max = self.snd_nxt;
                }
                if fin_here {
                    self.state = match self.state {
                        State::Established => State::FinWait1,
                        State::CloseWait => State::LastAck,
                        s => s,
                    };
                }
                self.arm_rtx(now);
                if !rexmit && len > 0 {
                    // After `snd_max` moved: the probe's timeout depends on the flight.
                    self.arm_tlp(now);
                }
                self.rack_sent(seg.seq, len, now);
                self.pace_sent(now, len);
                if len > 0 {
                    self.last_data_sent = Some(now);
                }
                self.push(seg, st, out);
                true
            }
            _ => false,
        }
    }

    /// The SYN (or SYN-ACK) of the handshake, sent or resent: `send_one` in SYN_SENT
    /// and SYN_RECEIVED.
    #[inline]
    fn send_syn(&mut self, now: Instant, st: &mut TcpStat, out: &mut Vec<SegOut>) -> bool {
        if self.snd_nxt != self.iss {
            return false;
        }
        let mut seg = self.header(now, self.iss);
        seg.syn = true;
        seg.mss = Some(self.cfg.mss);
        // A SYN offers SACK; it reports no blocks (data held from the
        // peer's SYN in a simultaneous open waits for the handshake).
        seg.sack = [None; 4];
        if self.state == State::SynSent {
            seg.ack_flag = false;
            seg.ack = 0;
            if self.cfg.rexmit_drop_options && self.rtx_count >= 3 {
                self.drop_syn_options();
            }
            if self.noopt {
                seg.mss = None;
            }
            // An ECN-setup SYN (RFC 3168 §6.1.1), for the first tries only:
            // a path may drop such SYNs.
            let ask = self.cfg.ecn == 1 && self.rtx_count <= self.cfg.ecn_maxretries;
            seg.ece = ask;
            seg.cwr = ask;
            seg.ts = self.cfg.timestamps.then(|| (self.tsval(now), 0));
            seg.wscale = self.cfg.window_scaling.then_some(self.rcv_wscale);
            seg.sack_perm = self.cfg.sack;
            seg.wnd = self.rcv_window().min(65_535) as u16;
        } else {
            seg.wscale = (self.cfg.window_scaling && self.wscale_ok).then_some(self.rcv_wscale);
            seg.sack_perm = self.sack_perm;
            seg.wnd = self.rcv_window().min(65_535) as u16;
            // ECN granted: ECE alone.
            seg.ece = self.ecn_ok;
            seg.cwr = false;
        }
        let syn_data = self.fastopen_syn(&mut seg, st);
        if diff(self.snd_max, self.iss) > 0 {
            self.count_rexmit(0, st);
        }
        self.snd_nxt = self.iss.wrapping_add(1 + syn_data);
        if lt(self.snd_max, self.snd_nxt) {
            self.snd_max = self.snd_nxt;
        }
        if self.timed.is_none() && self.rtx_count == 0 {
            self.timed = Some((self.iss, now));
        }
        self.arm_rtx(now);
        self.push(seg, st, out);
        true
    }

    /// How much of the send buffer `send_one` sends now, and whether the FIN goes
    /// with it, as the windows, segmentation offload's deferral, Nagle and PRR
    /// allow: `(len, fin_here, room, end)`, `room` one segment's data and `end` the
    /// FIN's sequence number; `None` when nothing goes.
    #[inline]
    fn data_len(&mut self, now: Instant) -> Option<(u32, bool, u32, u32)> {
        // A go-back-N passes over what the peer has SACKed.
        self.snd_nxt = self.rack.past_sacked(self.snd_nxt);
        let end = self.fin_seq();
        let unsent = diff(end, self.snd_nxt);
        if lt(end, self.snd_nxt) {
            // Only the FIN is beyond, and it has been sent.
            return None;
        }
        let allowance = self.send_allowance();
        let room = self.data_room();
        // With segmentation offload, whole segments up to what the device
        // takes, for new data outside recovery ([`Tcb::tso_burst`]; the send
        // window and cwnd still bound it below).
        let burst =
            if self.cfg.tso_max > room && self.recover.is_none() && self.snd_nxt == self.snd_max {
                self.tso_burst(room)
            } else {
                room
            };
        let mut len = unsent.min(burst).min(allowance);
        // Resending after a timeout: not what the peer has SACKed.
        if lt(self.snd_nxt, self.snd_max) {
            if let Some(next) = self.rack.next_sacked(self.snd_nxt) {
                len = len.min(diff(next, self.snd_nxt));
            }
        }
        // A burst for segmentation offload that does not empty the buffer
        // ends with a whole segment (FreeBSD's tcp_output: "prevent the last
        // segment from being fractional unless the send sockbuf can be
        // emptied"): what the window leaves of a segment waits for the
        // ACKs in flight, rather than leaving as a runt.
        if len > room && len < unsent {
            len -= len % room;
        }
        let fin_here = self.fin_queued && self.snd_nxt.wrapping_add(len) == end;
        if len == 0 && !(fin_here && unsent == 0) {
            return None;
        }
        if len > 0 && !self.pace_ok(now) {
            return None;
        }
        // Segmentation offload: while the window (the peer's or the
        // congestion window) leaves less than a third of itself, a send of less
        // than a burst waits for the acknowledgments in flight to open more
        // (Linux's tcp_tso_should_defer, with its tso_win_divisor of 3). So
        // segments stay large instead of each echoing the size of the ACK that
        // made room for it; and the last few segments' worth of what the
        // application has written, the window's tail, waits to leave with what
        // it writes next rather than alone (a small segment and its ACK per
        // window). A single segment is left to Nagle, and a FIN never waits.
        // Whole segments wait only while an ACK is due soon (Linux: not when
        // the first unacknowledged segment went less than half an SRTT ago,
        // which would hold the last segments of the initial window for a
        // round trip, or until the tail loss probe); and not what a tail
        // loss probe, or without SACK limited transmit (RFC 3042) or F-RTO,
        // lets out ([`Tcb::grant_ends_deferral`]): those grant a segment or
        // two beside the window for the ACK they bring, and only that goes,
        // not what the deferral held of the window.
        if burst > room
            && len < burst
            && (len < unsent || len > room)
            && self.flight() > 0
            && allowance < self.snd_wnd.min(self.cwnd) / 3
            && !fin_here
            && (len < room || self.ack_due_soon(now))
        {
            if !self.grant_ends_deferral() {
                return None;
            }
            len = len.min(self.limited_extra.max(room));
        }
        // Nagle: a short segment waits while data are unacknowledged, unless it
        // ends the stream, or is a tail loss probe's.
        if len < room
            && !self.cfg.nodelay
            && self.snd_una != self.snd_nxt
            && !fin_here
            && !self.tlp_sending
        {
            return None;
        }
        // In recovery PRR opens the window by fractions of a segment: new
        // data with more behind it waits for a whole one (the ACKs in flight
        // bring it), as FreeBSD's tcp_output sends no short segment while
        // more is buffered, TCP_NODELAY or not.
        if self.recover.is_some() && len < room && len < unsent && self.flight() > 0 && !fin_here {
            return None;
        }
        Some((len, fin_here, room, end))
    }

    /// Whether what the window holds back beside a grant (`limited_extra`) goes
    /// despite segmentation offload's deferral: a tail loss probe's always, and
    /// limited transmit's (RFC 3042) or F-RTO's without SACK, where nothing but
    /// the timeout would follow. With SACK the deferral may hold limited
    /// transmit's segment, as Linux's does below its Recovery state: RACK and
    /// the probe (RFC 8985) find the loss of a short flight without a third
    /// duplicate ACK, and a segment let out on every early duplicate ACK,
    /// whole bursts at 10 Mbit/s, fed the queue that was dropping them
    /// (`hystart_leaves_slow_start_before_a_long_queue_overflows` in sim: two
    /// timeouts with a 40-frame queue).
    fn grant_ends_deferral(&self) -> bool {
        self.limited_extra > 0 && (self.tlp_sending || !self.sack_perm)
    }

    /// Whether an ACK is due within half an SRTT: the first unacknowledged
    /// segment went out at least that long ago (Linux's `tcp_tso_should_defer`:
    /// "if next ACK is likely to come too late (half srtt), do not defer").
    fn ack_due_soon(&self, now: Instant) -> bool {
        let Some(srtt) = self.srtt else {
            return false;
        };
        let head = self.rack.oldest_sent().unwrap_or(self.head_sent);
        now.saturating_duration_since(head) >= srtt / 2
    }

    /// RFC 5681 §4.1: a connection that has sent no data for longer than the
    /// retransmission timeout no longer knows what the path takes, and starts
    /// again from the restart window, the initial window or the current one if
    /// smaller, rather than sending a whole old window at once; `ssthresh` keeps
    /// three quarters of the old window (RFC 2861 §2), so slow start climbs back
    /// at once. FreeBSD's `cc_after_idle`, Linux's `tcp_slow_start_after_idle`;
    /// `net.inet.tcp.slowstart_after_idle` turns it off. Not for BBR, which
    /// restarts from idle by its own model (`Bbr::on_restart_from_idle`, as
    /// Linux leaves BBR's window alone there). Before the first data the window
    /// is the initial one already.
    fn restart_after_idle(&mut self, now: Instant) {
        if !self.cfg.slowstart_after_idle
            || self.bbr.is_some()
            || self.snd_una != self.snd_max
            || !self.state.synchronized()
            || !lt(self.snd_nxt, self.fin_seq())
            || self
                .last_data_sent
                .is_none_or(|t| now.saturating_duration_since(t) <= self.rto)
        {
            return;
        }
        let rw = self.initial_window();
        if self.cwnd > rw {
            self.ssthresh = self.ssthresh.max(self.cwnd - self.cwnd / 4);
            self.cc.after_idle(self.cwnd, self.seg_size());
            self.cwnd = rw;
        }
    }

    /// A zero-window probe: the first unacknowledged byte, beyond what the peer allows.
    /// SND.NXT stays at SND.UNA, only SND.MAX covers the byte (FreeBSD's tcp_output
    /// in persist): the peer may drop a byte that arrives at its shut window (Linux
    /// does) and reopen with an ACK short of it, and then the byte goes again with
    /// the rest, as new data would; counted past SND.NXT it was neither resent nor
    /// covered by a timer, and Nagle held what followed behind it.
    fn send_probe(&mut self, now: Instant, st: &mut TcpStat, out: &mut Vec<SegOut>) {
        let end = self.fin_seq();
        // A window opened since the timer was due: the data goes as data.
        if !lt(self.snd_una, end) || self.snd_wnd > 0 {
            return;
        }
        let mut seg = self.header(now, self.snd_una);
        seg.data_len = 1;
        st.sndprobe += 1;
        let probed = self.snd_una.wrapping_add(1);
        if lt(self.snd_max, probed) {
            self.snd_max = probed;
        }
        self.rack_sent(seg.seq, 1, now);
        self.push(seg, st, out);
        // The probe is in flight: if the window stays shut, the persist timer (not the
        // retransmission timer) sends the next one.
    }

    /// Copies the data of `seg` into `dst` (`dst.len() == seg.data_len`).
    pub fn copy_payload(&self, seg: &SegOut, dst: &mut [u8]) {
        let mut at = 0;
        for piece in self.payload(seg).map(|p| p.data) {
            let n = piece.len().min(dst.len() - at);
            dst[at..at + n].copy_from_slice(&piece[..n]);
            at += n;
        }
    }

    /// The data of `seg` in place, as pieces of the send buffer (`data_len` bytes in
    /// all), for the caller to copy straight into a packet, or to share where they
    /// lie in a packet buffer.
    pub fn payload(&self, seg: &SegOut) -> crate::tcp::sndbuf::Pieces<'_> {
        // A SYN's data (Fast Open) follows the SYN.
        let off = diff(seg.seq.wrapping_add(u32::from(seg.syn)), self.buf_seq) as usize;
        self.sndbuf.pieces(off, seg.data_len)
    }
}
