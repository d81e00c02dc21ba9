//! Segment arrival (FreeBSD's `tcp_input`, RFC 9293 §3.10.7): in SYN-SENT the answer
//! to our SYN; in TIME_WAIT FreeBSD's `tcp_twcheck`; in the other synchronized states
//! the checks in the RFC's order, PAWS (RFC 7323 §5), acceptability (an old
//! duplicate's ACK still processed, as FreeBSD does), RST and SYN with RFC 5961's
//! challenge ACKs (or RFC 793's answers, `insecure_rst`/`insecure_syn`), the ACK's
//! bounds (RFC 5961 §5.2), then the acknowledgment, the window update and our FIN's
//! fate. The checks are free functions, so that `TimeWait` applies the very same ones.
//! Calls `ack` for what an acknowledgment does, `sack` for the scoreboard and
//! `reass` for the data.

use super::reass::OooSeg;
use super::seq::{diff, le, lt};
use super::{reset_for, OwedAck, Payload, SegIn, SegOut, State, Tcb, TcpError};
use crate::stats::TcpStat;
use dev::Instant;

/// `seg` without its SYN, when that SYN is the one already received (`irs`): the
/// rest of the segment is processed, and the sender is to hear our ACK.
pub(super) fn without_old_syn<'a>(seg: &SegIn<'a>, irs: u32) -> Option<SegIn<'a>> {
    (seg.syn && seg.seq == irs).then(|| SegIn {
        syn: false,
        seq: seg.seq.wrapping_add(1),
        ..*seg
    })
}

/// Whether `syn` may end a TIME_WAIT whose receive side stopped at `rcv_nxt` (and
/// last saw the timestamp `ts_recent`, with timestamps) and open a new incarnation
/// of the 4-tuple (RFC 6191 with timestamps, RFC 1122 4.2.2.13 without): its
/// timestamp is newer, or its sequence number lies beyond what the old connection
/// used.
pub(super) fn syn_reopens(syn: &SegIn<'_>, rcv_nxt: u32, ts_recent: Option<u32>) -> bool {
    if !syn.syn || syn.ack.is_some() || syn.rst {
        return false;
    }
    match (ts_recent, syn.ts) {
        (Some(recent), Some((tsval, _))) => lt(recent, tsval),
        _ => lt(rcv_nxt, syn.seq),
    }
}

/// What TIME_WAIT does with a segment that does not open a new incarnation (the
/// caller asked [`syn_reopens`] first), as FreeBSD's `tcp_twcheck`: a reset or a
/// segment without ACK is dropped; anything else is answered with an ACK but a
/// pure duplicate ACK (at `rcv_nxt`, acknowledging `snd_nxt`, nothing else). Returns
/// (answer, restart the wait: a retransmission of the peer's FIN).
pub(super) fn time_wait_check(
    seg: &SegIn<'_>,
    rcv_nxt: u32,
    snd_nxt: u32,
    st: &mut TcpStat,
) -> (bool, bool) {
    if seg.rst {
        st.rcvbadrst += 1;
        return (false, false);
    }
    let Some(ack) = seg.ack else {
        st.rcvnoack += 1;
        return (false, false);
    };
    let len = seg.payload.len() as u32;
    let refin = seg.fin
        && seg
            .seq
            .wrapping_add(len)
            .wrapping_add(u32::from(seg.syn))
            .wrapping_add(1)
            == rcv_nxt;
    let dup = !seg.syn && !seg.fin && len == 0 && seg.seq == rcv_nxt && ack == snd_nxt;
    if !dup {
        count_unacceptable(st, rcv_nxt, 0, seg);
    }
    (!dup, refin)
}

/// Counts an unacceptable segment that carries something: old (a duplicate) or
/// beyond the window `wnd` at `nxt` (a zero-window probe when at its edge).
pub(super) fn count_unacceptable(st: &mut TcpStat, nxt: u32, wnd: u32, seg: &SegIn<'_>) {
    let (seq, seg_len) = (seg.seq, seg.seg_len());
    if seg_len > 0 && lt(seq, nxt) {
        st.rcvduppack += 1;
        st.rcvdupbyte += u64::from(seg_len);
    } else if seg_len > 0 {
        st.rcvpackafterwin += 1;
        if wnd == 0 && seq == nxt {
            st.rcvwinprobe += 1;
        }
    }
}

/// PAWS (RFC 7323 §5): whether `seg` carries a timestamp older than `ts_recent`
/// (`None` without timestamps), for which it is dropped. Resets are exempt.
pub(super) fn paws_rejects(ts_recent: Option<u32>, seg: &SegIn<'_>) -> bool {
    match (ts_recent, seg.ts) {
        (Some(recent), Some((tsval, _))) => !seg.rst && lt(tsval, recent),
        _ => false,
    }
}

/// Remembers the peer's clock (RFC 7323 §4.3): `seg`'s timestamp becomes
/// `ts_recent` when the segment covers the last ACK we sent (SEG.SEQ ≤
/// Last.ACK.sent ≤ SEG.SEQ + SEG.LEN, as FreeBSD's tcp_input checks it) and the
/// timestamp is not older. An old duplicate, trimmed to its end, covers it only
/// when it ends there. `enabled`: the connection uses timestamps; `stale`:
/// `ts_recent` is too old to compare with (RFC 7323 §5.5), and any timestamp
/// replaces it. Returns whether the segment's timestamp was taken.
pub(super) fn keep_ts_recent(
    enabled: bool,
    stale: bool,
    ts_recent: &mut u32,
    last_ack_sent: u32,
    seg: &SegIn<'_>,
) -> bool {
    if let (true, Some((tsval, _))) = (enabled, seg.ts) {
        let end = seg.seq.wrapping_add(seg.seg_len());
        if le(seg.seq, last_ack_sent) && le(last_ack_sent, end) && (stale || !lt(tsval, *ts_recent))
        {
            *ts_recent = tsval;
            return true;
        }
    }
    false
}

/// RFC 7323 §5.5: a connection idle this long may hold a TS.Recent that the
/// peer's timestamp clock (at most 1 ms a tick, the fastest §5.4 allows) has left
/// more than 2^31 ticks behind, where every new segment looks older than it and
/// PAWS would discard them all. FreeBSD's `TCP_PAWS_IDLE`, Linux's
/// `TCP_PAWS_24DAYS`.
pub(super) const PAWS_IDLE: dev::Duration = dev::Duration::from_secs(24 * 24 * 60 * 60);

/// Whether `seg` is acceptable to a receiver expecting `nxt` with `wnd` open (RFC 9293
/// §3.10.7.4): some of it lies in the window, or, empty, it is at its left edge.
pub(super) fn acceptable(nxt: u32, wnd: u32, seg: &SegIn<'_>) -> bool {
    let (seq, seg_len) = (seg.seq, seg.seg_len());
    let inside = |s: u32| le(nxt, s) && lt(s, nxt.wrapping_add(wnd));
    match (seg_len, wnd) {
        (0, 0) => seq == nxt,
        (0, _) => inside(seq),
        (_, 0) => false,
        _ => inside(seq) || inside(seq.wrapping_add(seg_len - 1)),
    }
}

impl Tcb {
    /// A challenge ACK is owed (RFC 5961 §3.2, §4.2, §5.2), sent as FreeBSD's
    /// `tcp_send_challenge_ack` sends it: at most `ack_war_cnt` in each
    /// `ack_war_time_window` (RFC 5961 §7); one beyond is skipped and counted. The
    /// worker may still withdraw one it lets through, for the node-wide limit
    /// ([`Tcb::take_challenge`]).
    fn challenge_ack(&mut self, now: Instant, st: &mut TcpStat) {
        self.limited_ack(now, st, true);
    }

    /// An ACK owed under the challenge ACK limits, sent as a challenge ACK
    /// (`respond`: at SND.NXT, never with our FIN) or as any ACK of ours (FreeBSD's
    /// `dropafterack`, whose `tcp_output` sends our unacknowledged FIN again).
    fn limited_ack(&mut self, now: Instant, st: &mut TcpStat, respond: bool) {
        let (window, most) = (self.cfg.ack_war_time_window, self.cfg.ack_war_cnt);
        if !window.is_zero() && most > 0 {
            if now >= self.challenge_end {
                self.challenge_cnt = 0;
                self.challenge_end = now + window;
            }
            if self.challenge_cnt >= most {
                st.challengeack_ratelim += 1;
                return;
            }
            self.challenge_cnt += 1;
        }
        st.challengeack += 1;
        self.challenge_new = Some(OwedAck {
            ack_now: self.ack_now,
            challenge: self.challenge,
            counted: true,
        });
        self.ack_now = true;
        self.challenge |= respond;
    }

    /// TIME_WAIT's answer to a segment that is not a pure duplicate ACK: anybody
    /// may send such segments at will, so the answer goes within the node's limit
    /// on challenge ACKs, as the remnant's does ([`TimeWait`](super::TimeWait));
    /// nothing more is owed when an ACK already was.
    fn time_wait_ack(&mut self) {
        if !self.ack_now {
            self.challenge_new = Some(OwedAck {
                ack_now: false,
                challenge: self.challenge,
                counted: false,
            });
            self.ack_now = true;
        }
    }

    /// Whether the segment just input decided a challenge ACK (or TIME_WAIT's
    /// answer); if so, `allow` (the worker's node-wide limit, RFC 5961 §7) says
    /// whether it goes: if not, the connection owes what it owed before, and the
    /// ACK is counted as skipped (`tcp.challengeack_ratelim`).
    pub fn take_challenge(&mut self, st: &mut TcpStat, allow: impl FnOnce() -> bool) {
        if let Some(owed) = self.challenge_new.take() {
            if !allow() {
                self.ack_now = owed.ack_now;
                self.challenge = owed.challenge;
                if owed.counted {
                    st.challengeack = st.challengeack.saturating_sub(1);
                }
                st.challengeack_ratelim += 1;
            }
        }
    }

    /// Processes one received segment.
    pub fn input(&mut self, seg: &SegIn<'_>, now: Instant, st: &mut TcpStat) {
        self.input_to(seg, now, st, &mut |_| 0);
    }

    /// [`Tcb::input`] with a reader waiting at `direct`: in-order data that finds the
    /// receive buffer empty is offered to `direct` first, a segment's data at once,
    /// which takes what it can from its front (returning how much), and only the
    /// rest is buffered. One copy fewer on the
    /// way to the application, as Linux's old `ucopy` to a waiting reader.
    pub fn input_to(
        &mut self,
        seg: &SegIn<'_>,
        now: Instant,
        st: &mut TcpStat,
        direct: &mut dyn FnMut(Payload<'_>) -> usize,
    ) {
        st.rcvtotal += 1;
        // Whether the segment was the peer's: found acceptable, not dropped unread.
        let heard = match self.state {
            State::Closed => {
                st.rcvafterclose += 1;
                false
            }
            State::SynSent => {
                self.input_syn_sent(seg, now, st);
                // Data and FIN that came with the SYN-ACK: RFC 9293 §3.10.7.3,
                // "continue processing at the sixth step".
                if self.state == State::Established && (!seg.payload.is_empty() || seg.fin) {
                    let rest = SegIn {
                        syn: false,
                        seq: seg.seq.wrapping_add(1),
                        ..*seg
                    };
                    self.receive_data(&rest, now, st, direct);
                }
                true
            }
            _ => self.input_synchronized(seg, now, st, direct),
        };
        // Only a segment found acceptable says the peer is there (Linux's
        // rcv_tstamp, set by a valid ACK): one dropped unread, out of the window,
        // refused by PAWS or with an impossible ACK, could be anybody's, and a
        // blind sender must not keep a dead connection from its keepalive or
        // persist limit (FreeBSD's tcp_input resets t_rcvtime before validation,
        // and says "XXX: This should be done after segment validation").
        if heard && !seg.rst {
            self.last_heard = Some(now);
            if self.cfg.keepalive.is_some() || self.ka_init {
                self.ka_probes = 0;
                self.arm_keepalive(now);
            }
        }
        if self.fw2_deadline.is_some() && (heard || self.state != State::FinWait2) {
            // Heard from the peer (or left FIN_WAIT_2).
            self.arm_finwait2(now);
        }
    }

    fn input_syn_sent(&mut self, seg: &SegIn<'_>, now: Instant, st: &mut TcpStat) {
        if let Some(a) = seg.ack {
            if le(a, self.iss) || lt(self.snd_max, a) {
                if !seg.rst {
                    self.rst_pending = reset_for(seg).map(Box::new);
                }
                return;
            }
        }
        if seg.rst {
            if seg.ack.is_some() {
                self.error = Some(TcpError::Refused);
                st.conndrops += 1;
                self.enter_closed();
            }
            return;
        }
        if !seg.syn {
            return;
        }
        self.take_syn_options(seg);
        self.ts_recent_age = Some(now);
        self.irs = seg.seq;
        self.rcv_nxt = seg.seq.wrapping_add(1);
        self.rcv_adv = self.rcv_nxt;
        self.last_ack_sent = self.rcv_nxt;
        self.snd_wnd = u32::from(seg.wnd);
        self.max_snd_wnd = self.snd_wnd;
        self.snd_wl1 = seg.seq;
        match seg.ack {
            Some(a) => {
                // ECN granted: ECE alone on the SYN-ACK (RFC 3168 §6.1.1).
                self.ecn_ok = self.cfg.ecn == 1 && seg.ece && !seg.cwr;
                if self.ecn_ok {
                    st.ecn_shs += 1;
                }
                self.snd_wl2 = a;
                self.fastopen_synack(seg, a, st);
                self.ack_advance(a, seg, now, st);
                self.fastopen_resend();
                self.state = State::Established;
                st.connects += 1;
                self.ack_now = true;
            }
            None => {
                // Simultaneous open: answer with SYN-ACK.
                self.state = State::SynReceived;
                self.snd_nxt = self.iss;
                self.rtx_deadline = None;
                // Data with the SYN waits for the handshake to complete (RFC 9293
                // §3.10.7.3: "queue them for processing after the ESTABLISHED state
                // has been reached"); a FIN with it is dropped, as FreeBSD's
                // tcp_reass drops it before ESTABLISHED: the peer sends it again.
                let room = self.offered(self.rcv_window()) as usize;
                let data = seg.payload.take(room);
                if !data.is_empty() {
                    let mut buf = Vec::with_capacity(data.len());
                    for piece in data.pieces() {
                        buf.extend_from_slice(piece);
                    }
                    self.ooo.push(OooSeg {
                        seq: self.rcv_nxt,
                        data: buf,
                        fin: false,
                    });
                }
            }
        }
    }

    fn input_synchronized(
        &mut self,
        seg: &SegIn<'_>,
        now: Instant,
        st: &mut TcpStat,
        direct: &mut dyn FnMut(Payload<'_>) -> usize,
    ) -> bool {
        // TIME_WAIT has rules of its own (FreeBSD's tcp_twcheck).
        if self.state == State::TimeWait {
            let (answer, restart) = time_wait_check(seg, self.rcv_nxt, self.snd_nxt, st);
            if answer {
                self.time_wait_ack();
            }
            if restart {
                self.tw_deadline = Some(now + self.cfg.time_wait);
            }
            return false;
        }
        // The SYN we have already received, again in SYN-RECEIVED (the peer's
        // SYN-ACK in a simultaneous open, or its SYN retransmitted): drop the SYN,
        // keep the rest, and make sure the peer hears our ACK (as BSD's tcp_input
        // does). Once synchronized, a SYN is a SYN anywhere (RFC 5961 §4, below):
        // a retransmitted SYN-ACK whose ACK we sent gets a challenge ACK, which
        // says the same.
        let trimmed = if self.state == State::SynReceived {
            without_old_syn(seg, self.irs)
        } else {
            None
        };
        self.ack_now |= trimmed.is_some();
        let seg = trimmed.as_ref().unwrap_or(seg);
        // RFC 7323 §5.5: after more than 24 days without a timestamp taken,
        // TS.Recent is invalid, and a segment that fails PAWS against it is
        // accepted (its timestamp becomes TS.Recent below, if the segment is
        // acceptable), as FreeBSD's tcp_input invalidates `ts_recent` after
        // TCP_PAWS_IDLE.
        // Asked only of a timestamp older than TS.Recent: a newer one is taken
        // whatever TS.Recent's age.
        let older = self.ts_enabled && seg.ts.is_some_and(|(v, _)| lt(v, self.ts_recent));
        let ts_stale = older
            && self
                .ts_recent_age
                .is_some_and(|t| now.saturating_duration_since(t) > PAWS_IDLE);
        if !ts_stale && paws_rejects(self.ts_enabled.then_some(self.ts_recent), seg) {
            st.pawsdrop += 1;
            self.ack_now = true;
            return false;
        }

        // Acceptability (RFC 9293 §3.10.7.4), against the room the receive buffer
        // has, which may be more than the window field said (FreeBSD's rcv_wnd);
        // a passive open's, until it completes, against the window its SYN-ACK
        // offered (FreeBSD's syncache entry).
        let room = if self.state == State::SynReceived && !self.active {
            self.rcv_window()
        } else {
            self.rcv_space()
        };
        let rcv_wnd = self.offered(room);
        let old;
        let seg = if acceptable(self.rcv_nxt, rcv_wnd, seg) {
            seg
        } else {
            match self.unacceptable(seg, rcv_wnd, now, st) {
                Ok(o) => {
                    old = o;
                    &old
                }
                Err(accept) => return accept,
            }
        };
        let seq = seg.seq;

        // RST (RFC 5961 §3, or RFC 793's with insecure_rst).
        if seg.rst {
            self.rst_input(seq, now, st);
            return false;
        }

        // SYN in a synchronized state (RFC 5961 §4): challenge ACK; or, as RFC 793
        // had it (`insecure_syn`), a reset that ends the connection.
        if seg.syn && self.state != State::SynReceived {
            self.syn_input(now, st);
            return false;
        }
        // New data for a connection whose application has closed, before the peer's
        // FIN: nobody will ever read it, and acknowledging it would let the peer go
        // on sending into a void. RFC 1122 §4.2.2.13: "if new data is received
        // after CLOSE is called, its TCP SHOULD send a RST to show that data was
        // lost". FreeBSD's tcp_input closes the connection and answers with a reset
        // (`TF_CLOSED`, `tcps_rcvafterclose`), as Linux's tcp_rcv_state_process does
        // in FIN_WAIT_1/2 (`TCPAbortOnData`). Data the segment repeats (below
        // RCV.NXT) does not count. A socket only shut down for writing still reads,
        // and keeps receiving.
        let end = seq.wrapping_add(seg.payload.len() as u32);
        if self.detached && !self.rcv_fin && lt(self.rcv_nxt, end) {
            self.rst_pending = reset_for(seg).map(Box::new);
            st.rcvafterclose += 1;
            st.closed += 1;
            self.enter_closed();
            return false;
        }
        let Some(ack) = seg.ack else {
            // RFC 9293 §3.10.7.4: "if the ACK bit is off, drop the segment".
            st.rcvnoack += 1;
            return false;
        };

        if self.state == State::SynReceived && !self.syn_received_ack(seg, ack, now, st) {
            return false;
        }

        // ACK processing.
        if !self.ack_input(seg, ack, ts_stale, now, st) {
            return false;
        }

        // Our FIN acknowledged?
        let fin_acked =
            self.fin_queued && lt(self.fin_seq(), self.snd_max) && self.snd_una == self.snd_max;
        if fin_acked {
            match self.state {
                State::FinWait1 => {
                    self.state = State::FinWait2;
                    self.arm_finwait2(now);
                }
                State::Closing => self.enter_time_wait(now),
                State::LastAck => {
                    st.closed += 1;
                    self.enter_closed();
                    return true;
                }
                _ => {}
            }
        }
        if self.state == State::TimeWait {
            if seg.fin {
                self.ack_now = true;
                self.tw_deadline = Some(now + self.cfg.time_wait);
            }
            return true;
        }

        // Data and FIN.
        if !seg.payload.is_empty() || seg.fin {
            self.receive_data(seg, now, st, direct);
        }
        true
    }

    /// `input_synchronized`'s answer to a SYN in a synchronized state.
    #[inline]
    fn syn_input(&mut self, now: Instant, st: &mut TcpStat) {
        st.rcvbadsyn += 1;
        if self.cfg.insecure_syn {
            self.rst_pending = Some(Box::new(SegOut {
                seq: self.snd_nxt,
                ack: self.rcv_nxt,
                ack_flag: true,
                rst: true,
                ..SegOut::default()
            }));
            self.error = Some(TcpError::Reset);
            st.drops += 1;
            self.enter_closed();
            return;
        }
        self.challenge_ack(now, st);
    }

    /// The ACK that completes the handshake in SYN-RECEIVED: ESTABLISHED, or a
    /// reset for an ACK of nothing we sent (false: the segment is dropped).
    #[inline]
    fn syn_received_ack(
        &mut self,
        seg: &SegIn<'_>,
        ack: u32,
        now: Instant,
        st: &mut TcpStat,
    ) -> bool {
        let seq = seg.seq;
        if lt(self.snd_una, ack) && le(ack, self.snd_max) {
            self.state = State::Established;
            st.accepts += 1;
            self.round_buffers();
            self.snd_wnd = u32::from(seg.wnd) << self.snd_wscale;
            self.max_snd_wnd = self.snd_wnd;
            self.snd_wl1 = seq;
            self.snd_wl2 = ack;
            if self.ecn_ok {
                st.ecn_shs += 1;
            }
            // Data that came with the peer's SYN in a simultaneous open.
            if !self.ooo.is_empty() {
                self.drain_ooo(now, st);
                self.delack_deadline.get_or_insert(now + self.cfg.delack);
            }
            true
        } else {
            self.rst_pending = reset_for(seg).map(Box::new);
            false
        }
    }

    /// A segment `input_synchronized` found outside the receive window
    /// (`rcv_wnd`): the old duplicate whose ACK still counts, its data and FIN
    /// dropped; or, when the whole segment is dropped, `Err` with what
    /// `input_synchronized` returns (true only for a probe of a shut window).
    #[inline]
    fn unacceptable<'a>(
        &mut self,
        seg: &SegIn<'a>,
        rcv_wnd: u32,
        now: Instant,
        st: &mut TcpStat,
    ) -> Result<SegIn<'a>, bool> {
        if seg.rst {
            st.rcvbadrst += 1;
            return Err(false);
        }
        count_unacceptable(st, self.rcv_nxt, rcv_wnd, seg);
        if seg.syn {
            // RFC 5961 §4 for a SYN anywhere (FreeBSD looks at SYN before the
            // window), in or out of the window.
            st.rcvbadsyn += 1;
            self.challenge_ack(now, st);
            return Err(false);
        }
        self.ack_now = true;
        if !lt(seg.seq, self.rcv_nxt) || seg.ack.is_none() {
            // A probe of our shut window, exactly at its edge, is the peer's
            // (Linux finds it acceptable and drops only its data).
            return Err(seg.seq == self.rcv_nxt && rcv_wnd == 0);
        }
        self.note_dsack(seg.seq, seg.payload.len());
        // An old duplicate: its data and FIN are dropped, but, as FreeBSD's
        // tcp_input ("keep on processing for RST or ACK"), its ACK still
        // counts: in a simultaneous close each side's ACK of the other's FIN
        // repeats its own FIN, below the other's window.
        Ok(SegIn {
            seq: seg.seq.wrapping_add(seg.payload.len() as u32),
            fin: false,
            payload: Payload::default(),
            ..*seg
        })
    }

    /// An acceptable RST at `seq` in a synchronized state: the connection reset,
    /// or a challenge ACK when it is not exactly at RCV.NXT (RFC 5961 §3).
    #[inline]
    fn rst_input(&mut self, seq: u32, now: Instant, st: &mut TcpStat) {
        if seq == self.rcv_nxt || self.cfg.insecure_rst {
            if self.state == State::SynReceived && !self.active {
                st.drops += 1;
            } else if self.state == State::SynReceived {
                // A simultaneous open refused (RFC 9293 §3.10.7.4).
                self.error = Some(TcpError::Refused);
                st.drops += 1;
            } else {
                self.error = Some(TcpError::Reset);
                st.drops += 1;
            }
            self.enter_closed();
        } else {
            st.rcvbadrst += 1;
            self.challenge_ack(now, st);
        }
    }

    /// ACK processing of an acceptable segment carrying `ack`: the checks RFC 9293
    /// and RFC 5961 ask of it, TS.Recent, SND.UNA, SACK, loss recovery, congestion
    /// control and the send window. False when the segment is dropped.
    #[inline]
    fn ack_input(
        &mut self,
        seg: &SegIn<'_>,
        ack: u32,
        ts_stale: bool,
        now: Instant,
        st: &mut TcpStat,
    ) -> bool {
        let seq = seg.seq;
        // RFC 9293 §3.10.7.4: "If the ACK acknowledges something not yet sent
        // (SEG.ACK > SND.NXT), then send an ACK, drop the segment, and return"
        // (RFC 5961 §5.2 the same). A blind sender can draw that ACK at will, so
        // it goes within the challenge ACKs' limits and is counted as one (RFC
        // 5961 §7; FreeBSD's `dropafterack` is limited by `tcp_ack_war_cnt` too).
        if lt(self.snd_max, ack) {
            st.rcvacktoomuch += 1;
            self.limited_ack(now, st, false);
            return false;
        }
        // RFC 5961 §5.2: an ACK older than anything the peer's largest window could
        // still be acknowledging is blind injection or an old duplicate: drop the
        // segment (its data too) and send a challenge ACK.
        if self.max_snd_wnd > 0 && lt(ack, self.snd_una.wrapping_sub(self.max_snd_wnd)) {
            st.rcvacktooold += 1;
            self.challenge_ack(now, st);
            return false;
        }
        // Only now, the segment found acceptable and its ACK too, may its
        // timestamp become TS.Recent (RFC 7323 §4.3): one dropped above must not
        // move the edge PAWS guards, or a blind segment with an in-window sequence
        // number and a far-future TSval would have PAWS discard the peer's own
        // (Linux's 2013 fix: no tcp_replace_ts_recent from tcp_validate_incoming).
        if keep_ts_recent(
            self.ts_enabled,
            ts_stale,
            &mut self.ts_recent,
            self.last_ack_sent,
            seg,
        ) {
            self.ts_recent_age = Some(now);
        }
        let wnd = u32::from(seg.wnd) << self.snd_wscale;
        let sacked_before = self.rack.sacked_bytes();
        let (pipe_before, lost_before) = (self.pipe(), self.rack.lost_ever());
        let newly_acked = if lt(self.snd_una, ack) {
            diff(ack, self.snd_una)
        } else {
            0
        };
        if newly_acked > 0 {
            self.ack_advance(ack, seg, now, st);
        }
        if self.sack_perm {
            self.dsack_input(seg, ack, st);
        }
        if self.frto.is_some() {
            self.frto_on_ack(newly_acked, ack, st);
        }
        if self.ecn_ok {
            self.ecn_input(seg, ack, st);
        }
        let newly_sacked = self.rack_input(seg, now, st);
        if newly_sacked > 0 && newly_acked == 0 {
            // SACKs say the path still delivers: a new probe may follow (RFC 8985
            // §7 leaves recovery to RACK; a recovery whose last segments all go
            // missing, in a window too small for more, has only the probe before
            // the timeout).
            self.tlp_out = false;
            self.tlp_deadline = None;
            if self.flight() > 0 {
                self.arm_tlp(now);
            }
        }
        if newly_acked == 0
            && ack == self.snd_una
            && self.snd_max != self.snd_una
            && (newly_sacked > 0
                || (seg.payload.is_empty() && !seg.fin && wnd == self.snd_wnd && wnd != 0))
        {
            // RFC 5681's duplicate ACK, or RFC 6675's: one that SACKs new data.
            st.rcvdupack += 1;
            self.on_dupack(st);
        }
        // RFC 6937's DeliveredData: the change in SND.UNA and in the bytes SACKed
        // (less, when the ACK covers what was SACKed before).
        let sacked_now = i64::from(self.rack.sacked_bytes());
        let delivered = i64::from(newly_acked) + sacked_now - i64::from(sacked_before);
        let delivered = u32::try_from(delivered.max(0)).unwrap_or(0);
        if self.recover.is_some() && self.sack_perm {
            self.prr_on_ack(delivered);
        }
        self.bbr_on_ack(now, delivered, pipe_before, lost_before);
        // Window update.
        if lt(self.snd_wl1, seq) || (self.snd_wl1 == seq && le(self.snd_wl2, ack)) {
            if wnd > self.snd_wnd {
                st.rcvwinupd += 1;
            }
            self.snd_wnd = wnd;
            self.max_snd_wnd = self.max_snd_wnd.max(wnd);
            self.snd_wl1 = seq;
            self.snd_wl2 = ack;
        }
        true
    }
}
