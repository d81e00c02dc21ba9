//! Pacing and BBR's place in the control block. A connection with a pacing rate
//! (BBR's; the others have none, as in Linux without `fq`) sends its data
//! segments no faster than that rate: each one moves the earliest time of the
//! next by its length over the rate, and output that finds the time not come
//! arms a timer for it ([`Tcb::poll_at`]). A sender woken late may catch up by at
//! most [`PACE_CREDIT`], a burst the size Linux's offload autosizing would send.
//!
//! BBR (`tcp::bbr`) is chosen when the handshake is done (it needs the SACK
//! scoreboard's delivery-rate samples, so a peer without SACK gets CUBIC) and is
//! given every ACK after the scoreboard has seen it; it sets the window and the
//! pacing rate. Where the loss-based algorithms change the window (slow start,
//! avoidance, recovery's reduction, PRR, an ECN echo), BBR's connections keep
//! theirs; a timeout still collapses it to one segment.

use super::Tcb;
use crate::tcp::bbr::{Bbr, BbrAck, CaState};
use crate::tcp::cc::{CcState, CongestionControl};
use dev::{Duration, Instant};

/// How far behind the pacing schedule a late sender may catch up at once.
pub(super) const PACE_CREDIT: Duration = Duration::from_millis(1);

impl Tcb {
    /// The handshake is done (SACK known): BBR if configured and possible.
    pub(super) fn choose_cc(&mut self) {
        if self.cfg.cc != CongestionControl::Bbr {
            return;
        }
        if self.sack_perm {
            self.bbr = Some(Box::new(Bbr::new(self.iss, self.cwnd)));
            self.ssthresh = u32::MAX;
            self.hystart.stop();
            self.rack.rate_on = true;
        } else {
            self.cc = CcState::new(CongestionControl::Cubic);
        }
    }

    /// The congestion control in use (after the handshake: CUBIC where BBR was
    /// asked for and the peer has no SACK).
    pub fn congestion_control(&self) -> CongestionControl {
        if self.bbr.is_some() {
            CongestionControl::Bbr
        } else {
            self.cc.algo
        }
    }

    /// Bytes per second this connection paces at (0: not paced).
    pub fn pacing_rate(&self) -> u64 {
        self.bbr.as_deref().map_or(0, |b| b.pacing_rate())
    }

    /// BBR's view of an ACK just processed: `acked_sacked` bytes newly delivered,
    /// the pipe before it, and the scoreboard's lost count before it.
    pub(super) fn bbr_on_ack(
        &mut self,
        now: Instant,
        acked_sacked: u32,
        pipe_before: u32,
        lost_before: u64,
    ) {
        let Some(mut bbr) = self.bbr.take() else {
            return;
        };
        let state = if self.rto_recover.is_some() {
            CaState::Loss
        } else if self.recover.is_some() {
            CaState::Recovery
        } else {
            CaState::Open
        };
        let a = BbrAck {
            now,
            rs: self.rack.take_rate_sample(),
            acked_sacked,
            losses: u32::try_from(self.rack.lost_ever() - lost_before).unwrap_or(u32::MAX),
            prior_inflight: pipe_before,
            inflight: self.pipe(),
            delivered: self.rack.delivered_total(),
            mss: self.seg_size(),
            state,
            srtt: self.srtt,
        };
        bbr.on_ack(&a, &mut self.cwnd);
        if bbr.in_probe_rtt() {
            self.rack.mark_app_limited(a.inflight);
        }
        self.bbr = Some(bbr);
    }

    /// Output found less to send than the window allows: the application, not
    /// the path, limits this connection now (for BBR's samples).
    pub(super) fn note_app_limited(&mut self) {
        if self.bbr.is_some() && self.rack.lost_bytes() == 0 {
            let pipe = self.pipe();
            if pipe < self.cwnd {
                self.rack.mark_app_limited(pipe);
            }
        }
    }

    /// Sending restarts with nothing in flight.
    pub(super) fn pace_restart(&mut self) {
        if let Some(b) = self.bbr.as_deref_mut() {
            b.on_restart_from_idle(self.rack.app_limited());
        }
    }

    /// Whether the pacing schedule lets a data segment go at `now`; if not, the
    /// pacing timer is armed.
    pub(super) fn pace_ok(&mut self, now: Instant) -> bool {
        if self.pace_at <= now || self.bbr.is_none() {
            return true;
        }
        self.pace_wait = true;
        false
    }

    /// A data segment of `len` bytes went at `now`: the next waits its time.
    pub(super) fn pace_sent(&mut self, now: Instant, len: u32) {
        let rate = self.pacing_rate();
        if rate == 0 || len == 0 {
            return;
        }
        let ns = u64::from(len).saturating_mul(1_000_000_000) / rate;
        let from = self.pace_at.max(now - PACE_CREDIT);
        self.pace_at = from + Duration::from_nanos(ns);
    }

    /// The pacing timer, when output waits for it.
    pub(super) fn pace_deadline(&self) -> Option<Instant> {
        self.pace_wait.then_some(self.pace_at)
    }

    /// BBR's offload burst, in data bytes, where it sets one.
    pub(super) fn bbr_tso_goal(&self, room: u32) -> Option<u32> {
        self.bbr.as_deref().map(|b| b.tso_segs(room) * room)
    }

    /// BBR's model, for tests and `TCP_INFO`-like reports: mode, bandwidth (bytes
    /// per second), minimum RTT.
    pub fn bbr_state(
        &self,
    ) -> Option<(crate::tcp::bbr::BbrMode, f64, Option<std::time::Duration>)> {
        self.bbr.as_deref().map(|b| (b.mode(), b.bw(), b.min_rtt()))
    }
}
