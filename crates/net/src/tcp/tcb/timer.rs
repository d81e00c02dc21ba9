//! The connection's timers (FreeBSD's `tcp_timer`): retransmission with exponential
//! backoff (RFC 6298), persist (zero-window probes), keepalive (RFC 1122 §4.2.3.6),
//! delayed ACK, the end of TIME_WAIT, the end of FIN_WAIT_2 once the application has
//! closed (FreeBSD's `tcp_timer_2msl`), the end of a closed connection's zero-window
//! stall (`persist_orphan_timeout`), and the tail loss probe (RFC 8985 §7). Only
//! deadlines: [`Tcb::poll_at`] says the earliest, and [`Tcb::output`] runs the ones
//! due at the `now` it is given. Calls `output` to send the probe.

use super::seq::{diff, lt};
use super::{SegOut, State, Tcb, TcpError};
use crate::stats::TcpStat;
use dev::{Duration, Instant};

/// The longest a peer holds the ACK of a lone segment (RFC 1122 allows 500 ms;
/// Linux and FreeBSD use at most 200 ms): the floor of the timeout for one segment.
const DELACK_ALLOWANCE: Duration = Duration::from_millis(200);

impl Tcb {
    /// When [`Tcb::output`] has timers to run.
    pub fn poll_at(&self) -> Option<Instant> {
        [
            self.rtx_deadline,
            self.persist_deadline,
            self.delack_deadline,
            self.tw_deadline,
            self.fw2_deadline,
            self.ka_deadline,
            self.tlp_deadline,
            self.rack.deadline,
            self.pace_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    pub(super) fn run_timers(&mut self, now: Instant, st: &mut TcpStat) {
        if self.tw_deadline.is_some_and(|t| t <= now) {
            self.enter_closed();
            st.closed += 1;
            return;
        }
        if self.fw2_deadline.is_some_and(|t| t <= now) {
            self.fw2_deadline = None;
            if self.state == State::FinWait2 && self.detached {
                // No FIN came, and no application is left to read one: closed
                // without a reset, as FreeBSD's tcp_timer_2msl closes it.
                st.finwait2_drops += 1;
                st.closed += 1;
                self.enter_closed();
                return;
            }
        }
        if self.delack_deadline.is_some_and(|t| t <= now) {
            self.delack_deadline = None;
            self.ack_now = true;
            st.delack += 1;
        }
        if self.rtx_deadline.is_some_and(|t| t <= now) {
            self.rtx_deadline = None;
            self.tlp_deadline = None;
            self.on_rto(now, st);
        }
        if self.rack.deadline.is_some_and(|t| t <= now) {
            // RACK's reordering timer: a segment is due (RFC 8985 §6.2 step 5).
            self.rack.deadline = None;
            st.racktimeo += 1;
            self.rack_detect(now, st);
        }
        if self.tlp_deadline.is_some_and(|t| t <= now) {
            self.tlp_deadline = None;
            if !self.tlp_out
                && !self.no_tlp_in_recovery()
                && self.flight() > 0
                && self.state.synchronized()
            {
                self.tlp_fire = true;
                self.tlp_out = true;
                st.tlpprobes += 1;
            }
        }
        if self.persist_deadline.is_some_and(|t| t <= now) {
            self.persist_deadline = None;
            st.persisttimeo += 1;
            let limit = self.cfg.persist_orphan_timeout;
            // Nobody owns the data and the peer has kept its window shut for
            // `persist_orphan_timeout` (FreeBSD's TCPTV_PERSMAX for a closed
            // socket); or the window is shut and the peer has answered nothing for
            // long: it is gone. Either way dropped with a reset (FreeBSD's
            // tcp_timer_persist). A peer that answers the probes of a socket still
            // owned is probed for as long as it does (RFC 1122 §4.2.2.17).
            let orphan_over =
                self.detached && self.orphan_stall.is_some_and(|(t, _)| now - t >= limit);
            let peer_gone = self.persist_probes >= self.cfg.max_retries
                && self
                    .last_heard
                    .is_none_or(|t| now - t >= self.persist_silence_limit());
            if orphan_over || peer_gone {
                st.persistdrop += 1;
                st.drops += 1;
                self.abort();
                self.error = Some(TcpError::TimedOut);
                return;
            }
            self.probe_one = true;
            self.persist_probes = self.persist_probes.saturating_add(1);
        }
        if self.ka_deadline.is_some_and(|t| t <= now) {
            self.ka_deadline = None;
            st.keeptimeo += 1;
            if std::mem::take(&mut self.ka_init) {
                // Not established in time (FreeBSD's keepinit).
                if matches!(self.state, State::SynSent | State::SynReceived) {
                    st.keepdrops += 1;
                    st.drops += 1;
                    self.error = Some(TcpError::TimedOut);
                    self.enter_closed();
                    return;
                }
                self.arm_keepalive(now);
            } else if self.snd_una != self.snd_max {
                // Data outstanding: the retransmission timer watches the peer.
                self.arm_keepalive(now);
            } else if self.ka_probes >= self.cfg.keepalive_probes {
                st.keepdrops += 1;
                st.drops += 1;
                self.error = Some(TcpError::TimedOut);
                self.enter_closed();
            } else {
                self.ka_probes += 1;
                self.ka_send = true;
                self.ka_deadline = Some(now + self.cfg.keepalive_interval);
            }
        }
    }

    /// Starts the connection-establishment limit (`keep_init`), once, with the
    /// first segment of the handshake.
    pub(super) fn arm_keep_init(&mut self, now: Instant) {
        if matches!(self.state, State::SynSent | State::SynReceived) && self.ka_deadline.is_none() {
            self.ka_deadline = Some(now + self.cfg.keep_init);
            self.ka_init = true;
        }
    }

    /// `TCP_KEEPINIT`: a new establishment limit, counted from now.
    pub fn set_keep_init(&mut self, limit: Duration, now: Instant) {
        self.cfg.keep_init = limit;
        if self.ka_init || self.ka_deadline.is_none() {
            self.ka_deadline = None;
            self.arm_keep_init(now);
        }
    }

    /// Restarts the idle clock of keepalive (after hearing from the peer).
    pub(super) fn arm_keepalive(&mut self, now: Instant) {
        if self.ka_init {
            if matches!(self.state, State::SynSent | State::SynReceived) {
                return;
            }
            self.ka_init = false;
        }
        self.ka_deadline = match (self.cfg.keepalive, self.state) {
            (Some(idle), State::Established | State::CloseWait | State::FinWait2) => {
                Some(now + idle)
            }
            _ => None,
        };
    }

    /// Starts (or, hearing from the peer, restarts) the limit on FIN_WAIT_2 of a
    /// connection whose application has closed. With `fast_finwait2_recycle` it
    /// starts once and runs whatever the peer sends; otherwise it is the peer's
    /// silence that is limited (FreeBSD's `t_rcvtime` check).
    pub(super) fn arm_finwait2(&mut self, now: Instant) {
        if self.state != State::FinWait2 || !self.detached {
            self.fw2_deadline = None;
        } else if self.fw2_deadline.is_none() || !self.cfg.fast_finwait2_recycle {
            self.fw2_deadline = Some(now + self.cfg.finwait2_timeout);
        }
    }

    /// Turns keepalive on (with this idle time) or off.
    pub fn set_keepalive(&mut self, idle: Option<Duration>, now: Instant) {
        self.cfg.keepalive = idle;
        self.ka_probes = 0;
        self.arm_keepalive(now);
    }

    fn on_rto(&mut self, now: Instant, st: &mut TcpStat) {
        let limit = if self.state.synchronized() {
            self.cfg.max_retries
        } else {
            self.cfg.syn_retries
        };
        if self.rtx_count >= limit {
            st.timeoutdrop += 1;
            st.drops += 1;
            self.error = Some(TcpError::TimedOut);
            self.enter_closed();
            return;
        }
        self.rtx_count += 1;
        st.rexmttimeo += 1;
        self.rto = (self.rto * 2).min(self.cfg.max_rto);
        // Was the timeout spurious (a delay spike, not a loss)? Eifel tells by the
        // echoed timestamp; without timestamps, F-RTO by the ACKs that follow.
        self.frto = None;
        if self.rtx_count == 1 && self.state.synchronized() {
            if self.ts_enabled {
                self.rto_undo = Some((self.cwnd, self.ssthresh, self.tsval(now)));
            } else {
                self.frto = Some((1, self.snd_max, self.cwnd, self.ssthresh));
            }
        }
        // A timeout ends what D-SACK could undo (Eifel judges the timeout).
        self.dsack_undo = None;
        if self.state.synchronized() {
            self.rto_recover = Some(self.snd_max);
            // The go-back-N resends what RACK had marked lost.
            self.rack.deadline = None;
        }
        if self.state.synchronized() || self.state == State::SynReceived {
            let mss = self.snd_mss;
            if let Some(b) = self.bbr.as_deref_mut() {
                b.on_rto(self.cwnd);
            } else {
                self.ssthresh = self.cc.on_congestion(self.cwnd, self.flight(), mss);
                self.cc.on_timeout();
                self.hystart.stop();
            }
            // The loss window: one segment (RFC 5681 §3.1), of the size it carries.
            self.cwnd = self.seg_size();
        }
        self.dupacks = 0;
        self.recover = None;
        self.timed = None;
        self.sack_next = self.snd_una;
        // Go back N (skipping what the peer has SACKed): everything from the first unacknowledged byte goes again.
        self.snd_nxt = self.snd_una;
    }

    pub(super) fn arm_persist(&mut self, now: Instant) {
        // Data wait, the window is shut, and nothing but (at most) a probe is out.
        let pending = diff(self.fin_seq(), self.snd_una) > 0 && lt(self.snd_una, self.fin_seq());
        let stalled = self.snd_wnd == 0
            && pending
            && diff(self.snd_nxt, self.snd_una) <= 1
            && self.state.synchronized();
        if stalled {
            // The bound on a detached connection counts from the later of the
            // window closing and the close, and the persist timer fires at it at
            // the latest (the probes' backoff reaches a minute).
            let orphan_end = if self.detached {
                let (since, _) = *self.orphan_stall.get_or_insert((now, self.snd_una));
                Some(since + self.cfg.persist_orphan_timeout)
            } else {
                None
            };
            if self.persist_deadline.is_none() && self.rtx_deadline.is_none() {
                // The probes back off doubling, up to 2^8 times the RTO.
                let d = (self.rto * (1 << self.persist_probes.min(8)))
                    .clamp(self.cfg.min_rto, self.cfg.max_rto);
                self.persist_deadline = Some(now + d);
            }
            if let (Some(end), Some(at)) = (orphan_end, self.persist_deadline) {
                self.persist_deadline = Some(at.min(end.max(now)));
            }
        } else {
            // The stall ends with the data, or with progress: a peer that opens
            // its window by a few bytes now and then, taking a tinygram each time,
            // does not hold a closed connection's buffers for ever.
            if !pending
                || self
                    .orphan_stall
                    .is_some_and(|(_, una)| diff(self.snd_una, una) >= self.orphan_progress())
            {
                self.orphan_stall = None;
            }
            self.persist_deadline = None;
            if self.snd_wnd > 0 {
                self.persist_probes = 0;
            }
        }
        // RFC 6298 §5.1: what is outstanding is always covered by a running timer,
        // the retransmission timer when it is not the persist timer's probe
        // (FreeBSD's tcp_output arms TT_REXMT when neither runs).
        if self.state.synchronized()
            && self.state != State::TimeWait
            && self.flight() > 0
            && self.rtx_deadline.is_none()
            && self.persist_deadline.is_none()
        {
            self.arm_rtx(now);
        }
    }

    /// What the peer must acknowledge to end a detached connection's stall: a
    /// segment, or half the largest window it has offered if that is less (the
    /// sender's silly-window threshold, RFC 1122 §4.2.3.4).
    pub(super) fn orphan_progress(&self) -> u32 {
        self.snd_mss.min(self.max_snd_wnd / 2).max(1)
    }

    /// How long a peer facing probes of its shut window may stay silent, once
    /// `max_retries` probes have gone unanswered, before the connection is dropped:
    /// the keepalive idle time (`keep_idle`, 2 hours, FreeBSD's
    /// `tcp_maxpersistidle`), or the retransmission timeout times the whole
    /// backoff of a retransmission (FreeBSD's `tcp_totbackoff`) if that is
    /// shorter.
    pub(super) fn persist_silence_limit(&self) -> Duration {
        /// FreeBSD's `tcp_totbackoff`: the sum of its backoff multipliers.
        const TOTBACKOFF: u32 = 2559;
        self.cfg.keep_idle.min(self.rto.saturating_mul(TOTBACKOFF))
    }

    /// Arms the retransmission timer. A lone segment may sit in the peer's
    /// delayed-ACK timer, so its timeout allows for that ([`DELACK_ALLOWANCE`]); once
    /// more is in flight the peer acknowledges at once and the plain RTO applies.
    pub(super) fn arm_rtx(&mut self, now: Instant) {
        let lone = self.flight() <= self.seg_size();
        match self.rtx_deadline {
            None => {
                let d = if lone {
                    self.rto.max(DELACK_ALLOWANCE)
                } else {
                    self.rto
                };
                self.rtx_deadline = Some(now + d);
                self.rtx_lone = lone;
            }
            Some(t) if self.rtx_lone && !lone => {
                self.rtx_deadline = Some(t.min(now + self.rto));
                self.rtx_lone = false;
            }
            Some(_) => {}
        }
    }

    /// Arms the tail loss probe: PTO = 2·SRTT (RFC 8985 §7.2) and 2 ms of timer
    /// slack (Linux's two jiffies), plus a delayed-ACK allowance when one segment
    /// is out; never past the retransmission timer. In recovery only with
    /// `tlp_in_recovery`: RFC 8985 §7.2 starts the PTO "unless it is already in
    /// fast recovery, RTO recovery", leaving those to RACK's reordering timer and
    /// the retransmission timer.
    pub(super) fn arm_tlp(&mut self, now: Instant) {
        if self.tlp_out || !self.sack_perm || self.no_tlp_in_recovery() {
            return;
        }
        let Some(srtt) = self.srtt else {
            return;
        };
        let mut pto = srtt * 2 + Duration::from_millis(2);
        if self.flight() <= self.seg_size() {
            pto = pto.max(srtt * 3 / 2 + Duration::from_millis(200));
        }
        let at = now + pto;
        self.tlp_deadline = match self.rtx_deadline {
            Some(r) if r <= at => None,
            _ => Some(at),
        };
    }

    /// In fast recovery or in recovery after a retransmission timeout, with
    /// probes there turned off (`TcpConfig::tlp_in_recovery`).
    pub(super) fn no_tlp_in_recovery(&self) -> bool {
        !self.cfg.tlp_in_recovery && (self.recover.is_some() || self.rto_recover.is_some())
    }

    /// The probe: two new segments if the peer's window has room (cwnd
    /// notwithstanding), else the last segment sent again; either way the peer
    /// answers at once and its ACK (with SACK) lets RACK find what was lost
    /// without waiting for the timer.
    pub(super) fn send_tlp(&mut self, now: Instant, st: &mut TcpStat, out: &mut Vec<SegOut>) {
        let end = self.fin_seq();
        // New data if there is any and the peer's window takes it (RFC 8985 §7.3),
        // whatever held it (the window, segmentation offload, Nagle: Linux's probe
        // goes with `TCP_NAGLE_OFF`). Two segments where there are two, where RFC
        // 8985 sends one: a receiver holds the ACK of a lone segment for its
        // delayed-ACK time (40 ms for Linux), and the probe exists to be answered
        // at once. Without new data, the last segment goes again, which a
        // receiver acknowledges at once too.
        let new = self.snd_nxt == self.snd_max && lt(self.snd_nxt, end);
        let unsent = if new { diff(end, self.snd_nxt) } else { 0 };
        let seg = self.seg_size();
        let peer_room = self
            .snd_wnd
            .saturating_sub(diff(self.snd_nxt, self.snd_una));
        let grant = unsent.min(2 * seg).min(peer_room);
        if grant > 0 && grant >= unsent.min(seg) {
            self.limited_extra = self.limited_extra.saturating_add(grant);
            self.tlp_sending = true;
            let from = self.snd_nxt;
            while diff(self.snd_nxt, from) < grant && self.send_one(now, st, out) {}
            self.tlp_sending = false;
            if self.snd_nxt != from {
                return;
            }
        }
        let hi = if lt(end, self.snd_max) {
            end
        } else {
            self.snd_max
        };
        let out_bytes = diff(hi, self.snd_una);
        if out_bytes == 0 || !lt(self.snd_una, hi) {
            return;
        }
        let len = out_bytes.min(self.data_room());
        let mut seg = self.header(now, hi.wrapping_sub(len));
        seg.data_len = len as usize;
        self.count_rexmit(len, st);
        self.rack_sent(seg.seq, len, now);
        self.push(seg, st, out);
        self.arm_rtx(now);
    }
}
