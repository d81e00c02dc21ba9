//! What an acknowledgment does (the ACK half of FreeBSD's `tcp_input`, with its
//! `cc_ack_received` and `cc_cong_signal` hooks). New data acknowledged frees the send
//! buffer, gives an RTT sample (RFC 6298, RFC 7323 §4), may prove a timeout spurious
//! (RFC 3522), and grows the congestion window, or sets it on leaving recovery
//! (RFC 6582); a duplicate ACK counts towards fast retransmit (RFC 5681, RFC 5827's
//! early retransmit, RFC 3042's limited transmit) and starts recovery. How far the
//! window grows or falls is `cc`'s (CUBIC, NewReno, HyStart++); the holes are `sack`'s.

use super::seq::{diff, le, lt};
use super::{SegIn, Tcb};
use crate::stats::TcpStat;
use crate::tcp::cc::SlowStartAck;
use dev::{Duration, Instant};

impl Tcb {
    pub(super) fn ack_advance(
        &mut self,
        ack: u32,
        seg: &SegIn<'_>,
        now: Instant,
        st: &mut TcpStat,
    ) {
        let acked = diff(ack, self.snd_una);
        // Bytes of the send buffer acknowledged (the SYN and FIN are not in it).
        let data_end = self.fin_seq();
        // The window grows by the data newly acknowledged (RFC 5681 §3.1, RFC
        // 3465): the SYN and the FIN take a sequence number each and are not
        // data. Counted, the SYN's ACK left the first window a byte beyond ten
        // segments, and the first flight ended in a 1-byte segment.
        let syn = u32::from(self.snd_una == self.iss);
        let fin = u32::from(self.fin_queued && le(self.snd_una, data_end) && lt(data_end, ack));
        let grow_by = acked.saturating_sub(syn + fin);
        let upto = if lt(data_end, ack) { data_end } else { ack };
        if lt(self.buf_seq, upto) {
            let n = diff(upto, self.buf_seq) as usize;
            self.sndbuf.drain(n);
            self.buf_seq = upto;
            st.rcvackbyte += n as u64;
        }
        st.rcvackpack += 1;

        // RTT sample (RFC 7323 §4.1 with timestamps; else Karn's timed segment).
        let sample = match (self.ts_enabled, seg.ts) {
            (true, Some((_, tsecr))) if tsecr != 0 => {
                let ms = self.tsval(now).wrapping_sub(tsecr);
                (ms < 600_000).then(|| Duration::from_millis(u64::from(ms)))
            }
            _ => match self.timed {
                Some((s, t)) if lt(s, ack) => {
                    self.timed = None;
                    Some(now.saturating_duration_since(t))
                }
                _ => None,
            },
        };
        if let Some(r) = sample {
            self.rtt_update(r);
            self.hystart.on_rtt(r);
            st.rttupdated += 1;
        }

        // A timeout proved spurious: the ACK echoes a timestamp from before it, so the
        // original transmission arrived (Eifel detection, RFC 3522; the response
        // restores the window and stops the go-back-N, as RFC 4015 allows).
        if let Some((cwnd, ssthresh, ts_rto)) = self.rto_undo.take() {
            if let Some((_, tsecr)) = seg.ts {
                if tsecr != 0 && lt(tsecr, ts_rto) {
                    st.sndrexmitbad += 1;
                    self.cwnd = cwnd;
                    self.ssthresh = ssthresh;
                    self.rto = self.rto_from_estimate();
                    if lt(self.snd_nxt, self.snd_max) {
                        self.snd_nxt = self.snd_max;
                    }
                }
            }
        }
        self.tlp_out = false;

        // Congestion control: recovery (NewReno, or SACK's pipe), slow start, avoidance.
        let mss = self.snd_mss;
        match self.recover {
            Some(rec) if lt(ack, rec) && self.sack_perm => {
                // Partial ACK with SACK: the pipe shrank; `output` fills it.
                self.rtx_deadline = None;
            }
            Some(rec) if lt(ack, rec) => {
                // Partial ACK: retransmit the next hole, deflate.
                self.cwnd = self.cwnd.saturating_sub(acked).saturating_add(mss);
                self.rexmit_owed += 1;
                self.rtx_deadline = None;
            }
            Some(_) => {
                // Full ACK: leave recovery at ssthresh (RFC 6582 §3.2 step 3's second
                // option). The first option, FlightSize + SMSS, falls to one segment
                // when the ACK covers everything, and a Linux receiver then holds
                // its ACK of that lone segment for its delayed-ACK time. (BBR
                // restores its own.)
                if self.bbr.is_none() {
                    self.cwnd = self.ssthresh.max(mss);
                }
                self.recover = None;
                self.dupacks = 0;
                self.rack.on_recovery_end();
            }
            None => {
                self.dupacks = 0;
                if self.bbr.is_some() {
                    // BBR sets the window once the scoreboard has seen the ACK.
                } else if self.cwnd < self.ssthresh {
                    // In segments of the size they leave with, as the initial
                    // window ([`Tcb::initial_window`]).
                    let seg = self.seg_size();
                    let how = self.hystart.on_ack(ack, self.snd_nxt, st);
                    if how == SlowStartAck::EnterAvoidance {
                        self.ssthresh = self.cwnd;
                    }
                    self.cwnd = self.cwnd.saturating_add(how.growth(grow_by, seg));
                } else if grow_by > 0 {
                    let srtt = self.srtt.unwrap_or(Duration::ZERO);
                    let inc = self.cc.avoid(now, self.cwnd, grow_by, mss, srtt);
                    self.cwnd = self.cwnd.saturating_add(inc);
                }
            }
        }

        // The SYN of a passive open is not counted (Linux's tcp_snd_una_update
        // is not called for it).
        let syn_acked = !self.active && self.snd_una == self.iss;
        self.bytes_acked += u64::from(diff(ack, self.snd_una).saturating_sub(u32::from(syn_acked)));
        self.snd_una = ack;
        if self.rto_recover.is_some_and(|h| le(h, ack)) {
            self.rto_recover = None;
            self.rack.on_recovery_end();
        }
        self.limited_extra = 0;
        if lt(self.snd_nxt, self.snd_una) {
            self.snd_nxt = self.snd_una;
        }
        self.rtx_count = 0;
        self.rtx_deadline = None;
        self.tlp_deadline = None;
        if self.snd_una != self.snd_max {
            self.arm_rtx(now);
            self.arm_tlp(now);
            // The new first unacknowledged segment was sent before the one just
            // acknowledged, as far as is known without a scoreboard: its ACK is
            // on the way ([`Tcb::ack_due_soon`]).
            self.head_sent = Instant::ZERO;
        }
    }

    fn rtt_update(&mut self, r: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(srtt) => {
                let delta = srtt.abs_diff(r);
                self.rttvar = (self.rttvar * 3 + delta) / 4;
                self.srtt = Some((srtt * 7 + r) / 8);
            }
        }
        self.rto = self.rto_from_estimate();
    }

    /// RFC 6298's RTO from the current estimate, clamped to the configured bounds.
    fn rto_from_estimate(&self) -> Duration {
        match self.srtt {
            Some(srtt) => {
                let rto = srtt + (self.rttvar * 4).max(Duration::from_millis(1));
                rto.clamp(self.cfg.min_rto, self.cfg.max_rto)
            }
            None => self.rto,
        }
    }

    /// ECN on a connection that has it (RFC 3168 §6.1.2-3): the peer's ECE cuts
    /// the window as a loss would (the congestion control's reduction), once a
    /// window and not during loss recovery, without retransmitting, and owes a CWR
    /// on the next new data; our Congestion Experienced is echoed with ECE on every
    /// ACK, at once, until the peer's CWR says it reduced.
    pub(super) fn ecn_input(&mut self, seg: &SegIn<'_>, ack: u32, st: &mut TcpStat) {
        // The reduction's window ends with an ACK beyond what was in flight at it
        // (Linux's CWR state ends when snd_una passes high_seq): the ACK of exactly
        // that was sent before the peer heard our CWR, and may still echo.
        if self.ecn_until.is_some_and(|u| lt(u, ack)) {
            self.ecn_until = None;
        }
        if seg.ece && !seg.syn && self.ecn_until.is_none() && self.recover.is_none() {
            st.ecn_rcwnd += 1;
            // BBR v1 does not react to ECN (as Linux's), but says CWR all the same.
            if self.bbr.is_none() {
                self.ssthresh = self
                    .cc
                    .on_congestion(self.cwnd, self.flight(), self.snd_mss);
                self.hystart.stop();
                self.cwnd = self.ssthresh;
            }
            self.ecn_until = Some(self.snd_max);
            self.ecn_cwr = true;
        }
        if seg.cwr {
            self.ecn_echo = false;
        }
        if seg.ce {
            st.ecn_ce += 1;
            if !self.ecn_echo {
                self.ecn_echo = true;
                self.ack_now = true;
            }
        }
    }

    /// Proportional Rate Reduction (RFC 6937), on every ACK of SACK recovery that
    /// `delivered` bytes (newly acknowledged or SACKed): the window becomes the
    /// pipe and what may go now, so that the sender slows to `ssthresh` in step
    /// with the ACKs, a fraction `ssthresh / RecoverFS` of what is delivered while
    /// the pipe is above it, rather than falling silent for half a round trip and
    /// then bursting (RFC 6675 alone); below it, the pipe grows back toward
    /// `ssthresh` at most a segment beyond what arrives (PRR-SSRB).
    pub(super) fn prr_on_ack(&mut self, delivered: u32) {
        if !self.cfg.prr || self.bbr.is_some() {
            return;
        }
        self.prr_delivered = self.prr_delivered.saturating_add(delivered);
        let pipe = self.pipe();
        let sndcnt = if pipe > self.ssthresh {
            let due = (u64::from(self.prr_delivered) * u64::from(self.ssthresh))
                .div_ceil(u64::from(self.recover_fs.max(1)));
            u32::try_from(due)
                .unwrap_or(u32::MAX)
                .saturating_sub(self.prr_out)
        } else {
            let limit = self
                .prr_delivered
                .saturating_sub(self.prr_out)
                .max(delivered)
                .saturating_add(self.snd_mss);
            (self.ssthresh - pipe).min(limit)
        };
        self.cwnd = pipe.saturating_add(sndcnt);
    }

    /// A D-SACK (RFC 2883: a first SACK block below the cumulative ACK, or inside
    /// the second block) reports data that arrived twice. When every
    /// retransmission of the last fast recovery has been reported so, the
    /// original segments had arrived all along, reordered, not lost (RFC 3708):
    /// the window and threshold go back to what they were before it, and a
    /// recovery still running ends.
    pub(super) fn dsack_input(&mut self, seg: &SegIn<'_>, ack: u32, st: &mut TcpStat) {
        let Some((l, r)) = seg.sack[0] else { return };
        let dsack = le(r, ack) || seg.sack[1].is_some_and(|(l2, r2)| le(l2, l) && le(r, r2));
        if !dsack || !lt(l, r) {
            return;
        }
        st.dsack_count += 1;
        st.dsack_bytes += u64::from(diff(r, l));
        self.rack.on_dsack(self.snd_una, self.snd_nxt);
        let Some((cwnd, ssthresh, retrans, high)) = self.dsack_undo else {
            return;
        };
        if retrans == 0 || !le(r, high) {
            return;
        }
        let left = retrans.saturating_sub(diff(r, l).div_ceil(self.snd_mss.max(1)).max(1));
        if left > 0 {
            self.dsack_undo = Some((cwnd, ssthresh, left, high));
            return;
        }
        self.dsack_undo = None;
        st.dsackundo += 1;
        self.cwnd = self.cwnd.max(cwnd);
        self.ssthresh = self.ssthresh.max(ssthresh);
        if self.recover.take().is_some() {
            self.rack.on_recovery_end();
            self.dupacks = 0;
        }
    }

    /// F-RTO (RFC 5682 §2) on the ACKs after a first timeout, without
    /// timestamps. The first ACK, if it acknowledges the retransmission and not
    /// all that was out, lets two new segments go instead of more retransmissions;
    /// if the next ACK then acknowledges more, it acknowledges data sent before
    /// the timeout and never again, so the timeout was spurious: the window and
    /// threshold go back to what they were (RFC 4015's response). A duplicate ACK
    /// in either step means a loss: go-back-N as usual.
    pub(super) fn frto_on_ack(&mut self, newly_acked: u32, ack: u32, st: &mut TcpStat) {
        let Some((step, high, cwnd, ssthresh)) = self.frto else {
            return;
        };
        self.frto = None;
        match step {
            1 => {
                // A duplicate ACK, or one covering everything, says nothing.
                let unsent = lt(self.snd_max, self.fin_seq());
                if newly_acked > 0 && lt(ack, high) && unsent {
                    self.frto = Some((2, high, cwnd, ssthresh));
                    // New data next, two segments beside what is out (step 2b).
                    self.snd_nxt = self.snd_max;
                    self.sack_next = self.snd_max;
                    self.limited_extra = diff(self.snd_max, self.snd_una);
                    self.cwnd = self.cwnd.max(2 * self.snd_mss);
                }
            }
            _ => {
                self.limited_extra = 0;
                if newly_acked > 0 {
                    st.frto_spurious += 1;
                    st.sndrexmitbad += 1;
                    self.cwnd = self.cwnd.max(cwnd);
                    self.ssthresh = self.ssthresh.max(ssthresh);
                    self.rto = self.rto_from_estimate();
                } else {
                    // Step 3a: the rest goes again, from the first unacknowledged.
                    self.snd_nxt = self.snd_una;
                    self.sack_next = self.snd_una;
                }
            }
        }
    }

    pub(super) fn on_dupack(&mut self, st: &mut TcpStat) {
        self.dupacks += 1;
        // Early retransmit (RFC 5827): with nothing new to send and fewer than four
        // segments out, three duplicate ACKs may never come.
        let unsent = lt(self.snd_max, self.fin_seq());
        let out_segs = self.flight().div_ceil(self.seg_size().max(1));
        let dupthresh = if unsent {
            3
        } else {
            out_segs.saturating_sub(1).clamp(1, 3)
        };
        // With SACK, RACK (`rack_detect`, before this) says what is lost; duplicate
        // ACKs count only while they bring no SACK blocks at all.
        let scoreboard = self.rack.sacked_bytes() > 0;
        let lost = self.dupacks >= dupthresh && self.rto_recover.is_none() && !scoreboard;
        match self.recover {
            None if !lost => {
                // Limited transmit (RFC 3042): each of the first two duplicate ACKs
                // lets one new segment out, to keep the ACK clock running. Only
                // the first two: with SACK, duplicate ACKs go on without recovery
                // until RACK finds a loss, and each letting a segment out would
                // pour new data into the queue that is dropping it.
                if self.dupacks <= 2 {
                    self.limited_extra = self.limited_extra.saturating_add(self.seg_size());
                }
            }
            None => {
                if self.sack_perm {
                    self.rack.mark_first_lost();
                }
                self.enter_recovery(st);
            }
            // NewReno inflation; with a scoreboard the pipe governs (see `output`).
            Some(_) if !scoreboard => self.cwnd = self.cwnd.saturating_add(self.snd_mss),
            Some(_) => {}
        }
    }

    /// Fast retransmit and recovery begin: the congestion control's reduction,
    /// the first hole owed at once.
    pub(super) fn enter_recovery(&mut self, st: &mut TcpStat) {
        let mss = self.snd_mss;
        let scoreboard = self.rack.sacked_bytes() > 0;
        st.fastrexmit += 1;
        self.dsack_undo = Some((self.cwnd, self.ssthresh, 0, self.snd_max));
        if let Some(b) = self.bbr.as_deref_mut() {
            // Packet conservation from the next ACK on (`bbr`).
            b.on_congestion(self.cwnd);
        } else {
            self.ssthresh = self.cc.on_congestion(self.cwnd, self.flight(), mss);
            self.hystart.stop();
            // With SACK the pipe, not an inflated window, says what may go out.
            self.cwnd = if scoreboard {
                self.ssthresh
            } else {
                self.ssthresh + 3 * mss
            };
        }
        self.recover = Some(self.snd_max);
        if self.no_tlp_in_recovery() {
            // No tail loss probe in recovery (RFC 8985 §7.2, [`Tcb::arm_tlp`]).
            self.tlp_deadline = None;
        }
        self.sack_next = self.snd_una;
        self.rexmit_owed += 1;
        self.timed = None;
        self.prr_delivered = 0;
        self.prr_out = 0;
        self.recover_fs = self.flight();
        // Limited transmit ends where recovery begins (PRR governs now).
        self.limited_extra = 0;
    }
}
