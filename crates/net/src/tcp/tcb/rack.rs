//! RACK (RFC 8985 §6): loss detected by time, not by counting. Every data segment
//! sent is remembered with the time it was (last) sent; when a segment is delivered
//! (cumulatively or selectively acknowledged), every segment sent before it and still
//! missing after one round trip plus a reordering window is lost. So a lost
//! retransmission is found as a lost original is, a short window needs no three
//! duplicate ACKs, and a path that reorders gets a window that stops it from being
//! taken for loss: the window is zero until reordering is seen (or a quarter of the
//! minimum RTT before three segments are SACKed), then a quarter of the minimum RTT,
//! grown by each round that brings a D-SACK (RFC 8985 §6.2 step 4) and shrunk back
//! after sixteen recoveries without one. A segment not yet lost but due is watched
//! by the reordering timer.
//!
//! The sender's scoreboard (SACKed, lost, retransmitted) lives here too, one entry
//! per segment as sent (with segmentation offload, per burst; SACK blocks split
//! entries at their edges), which gives RFC 6675's pipe as Linux counts it: what is
//! out, less what was SACKed and what is lost and not yet sent again.
//!
//! The same entries carry what delivery-rate estimation needs
//! (draft-cheng-iccrg-delivery-rate-estimation, Linux's `tcp_rate.c`): each
//! remembers how much had been delivered, and when, at its send; an ACK that
//! delivers segments yields one [`RateSample`], from the most recently sent of them,
//! over the longer of its send and its ACK intervals. BBR (`cc::bbr`) models the
//! path from those samples.

use super::seq::{diff, le, lt, tsval};
use crate::tcp::bbr::RateSample;
use dev::{Duration, Instant};
use std::collections::VecDeque;

/// Entries kept at most. Beyond, new data joins the last entry (sent at the later
/// time, so detection errs late) and SACK blocks no longer split entries: a peer
/// SACKing every other byte cannot make the list grow with the send buffer.
pub(super) const RACK_TRACK: usize = 8192;

const SACKED: u8 = 1;
const LOST: u8 = 2;
const RETRANS: u8 = 4;

/// RFC 8985 §6.2's DupThresh: SACKed segments that make the window zero before
/// reordering has been seen.
const DUPTHRESH: u32 = 3;

#[derive(Clone, Copy, Debug)]
struct Sent {
    start: u32,
    end: u32,
    /// When last sent.
    at: Instant,
    /// Which transmission of the connection that was: orders sends that share an
    /// instant (the clock is read once per batch), where RFC 8985's tie-break by
    /// sequence number would put a retransmission before the originals it follows.
    order: u32,
    flags: u8,
    /// Delivery-rate state at the send (P.delivered, P.delivered_time,
    /// P.first_sent_time, P.is_app_limited).
    dlv: u64,
    dlv_at: Instant,
    first_at: Instant,
    app_limited: bool,
}

/// The delivered segment a rate sample is taken from, while an ACK is processed.
#[derive(Clone, Copy, Debug)]
struct RateFrom {
    dlv: u64,
    dlv_at: Instant,
    send_elapsed: Duration,
    at: Instant,
    order: u32,
    app_limited: bool,
    rtt: Option<Duration>,
}

impl Sent {
    fn len(&self) -> u32 {
        diff(self.end, self.start)
    }
}

/// What RACK knows of a connection's segments in flight.
#[derive(Debug)]
pub(super) struct Rack {
    segs: VecDeque<Sent>,
    /// Bytes SACKed, and lost and not sent again, among `segs`.
    sacked: u32,
    lost: u32,
    /// Some entry was retransmitted, below this.
    retrans_high: Option<u32>,
    /// The most recently sent segment delivered: when, and its place among the
    /// transmissions (RACK.xmit_ts, and the order RACK.end_seq breaks ties with).
    /// With the end of what it delivered: the parts of one send (an offload burst
    /// acknowledged or SACKed in pieces) are ordered by sequence, as Linux's
    /// RACK.end_seq orders them.
    xmit: Option<(Instant, u32, u32)>,
    /// Transmissions so far (the next one's `order`).
    sends: u32,
    /// Its round trip (RACK.rtt).
    rtt: Duration,
    min_rtt: Option<Duration>,
    /// Highest end delivered (RACK.fack).
    fack: Option<u32>,
    reordering_seen: bool,
    reo_wnd_mult: u32,
    reo_wnd_persist: u32,
    /// SND.NXT when the window last grew for a D-SACK: once a round.
    dsack_round: Option<u32>,
    /// The reordering timer.
    pub(super) deadline: Option<Instant>,
    /// Bytes marked lost so far (BBR's losses per ACK are its differences).
    lost_ever: u64,
    /// Delivery rate (C.delivered, C.delivered_time, C.first_sent_time,
    /// C.app_limited: the delivered count up to which samples are app-limited).
    dlv: u64,
    dlv_at: Instant,
    first_at: Instant,
    app_limited: u64,
    /// The sample the ACK being processed builds.
    rate_from: Option<RateFrom>,
    /// Delivery rate is sampled (for BBR).
    pub(super) rate_on: bool,
}

impl Default for Rack {
    fn default() -> Self {
        Rack {
            segs: VecDeque::new(),
            sacked: 0,
            lost: 0,
            retrans_high: None,
            xmit: None,
            sends: 0,
            rtt: Duration::ZERO,
            min_rtt: None,
            fack: None,
            reordering_seen: false,
            reo_wnd_mult: 1,
            reo_wnd_persist: 0,
            dsack_round: None,
            deadline: None,
            lost_ever: 0,
            dlv: 0,
            dlv_at: Instant::ZERO,
            first_at: Instant::ZERO,
            app_limited: 0,
            rate_from: None,
            rate_on: false,
        }
    }
}

/// Whether a transmission (time, order) came after another (RFC 8985's
/// RACK_sent_after).
fn sent_after(t1: Instant, o1: u32, t2: Instant, o2: u32) -> bool {
    t1 > t2 || (t1 == t2 && lt(o2, o1))
}

impl Rack {
    /// Forgets the segments (the connection closed); what was learnt of the path
    /// stays.
    pub(super) fn clear(&mut self) {
        self.segs.clear();
        self.sacked = 0;
        self.lost = 0;
        self.retrans_high = None;
        self.deadline = None;
    }

    /// When the oldest segment in flight was last sent.
    pub(super) fn oldest_sent(&self) -> Option<Instant> {
        self.segs.front().map(|s| s.at)
    }

    pub(super) fn sacked_bytes(&self) -> u32 {
        self.sacked
    }

    pub(super) fn lost_bytes(&self) -> u32 {
        self.lost
    }

    /// Whether reordering was seen (the reordering window widened).
    pub(super) fn reordering_seen(&self) -> bool {
        self.reordering_seen
    }

    #[cfg(test)]
    pub(super) fn reo_wnd_mult(&self) -> u32 {
        self.reo_wnd_mult
    }

    /// Where a send from `seq` goes on: past the SACKed entries that hold it, if
    /// any (a go-back-N resends none of them).
    pub(super) fn past_sacked(&self, seq: u32) -> u32 {
        if self.sacked == 0 {
            return seq;
        }
        let mut at = seq;
        let i = self.segs.partition_point(|s| le(s.end, seq));
        for s in self.segs.range(i..) {
            if s.flags & SACKED == 0 || lt(at, s.start) {
                break;
            }
            at = s.end;
        }
        at
    }

    /// The start of the first SACKed entry beyond `seq`.
    pub(super) fn next_sacked(&self, seq: u32) -> Option<u32> {
        if self.sacked == 0 {
            return None;
        }
        let i = self.segs.partition_point(|s| le(s.end, seq));
        self.segs
            .range(i..)
            .find(|s| s.flags & SACKED != 0 && lt(seq, s.start))
            .map(|s| s.start)
    }

    /// The first range marked lost and not yet sent again.
    pub(super) fn first_lost(&self) -> Option<(u32, u32)> {
        if self.lost == 0 {
            return None;
        }
        self.segs
            .iter()
            .find(|s| s.flags & LOST != 0)
            .map(|s| (s.start, s.end))
    }

    /// Splits the entry strictly containing `seq` in two; returns the index of the
    /// first entry that ends after `seq`. At [`RACK_TRACK`] entries nothing splits.
    fn split_at(&mut self, seq: u32) -> usize {
        let i = self.segs.partition_point(|s| le(s.end, seq));
        if let Some(s) = self.segs.get(i).copied() {
            if lt(s.start, seq) && self.segs.len() < RACK_TRACK {
                self.segs[i].end = seq;
                self.segs.insert(i + 1, Sent { start: seq, ..s });
                return i + 1;
            }
        }
        i
    }

    /// A data segment [start, end) went out at `now`: new data is appended; what
    /// was sent before is marked retransmitted and timed again (SACKed parts
    /// excepted: a go-back-N skips them).
    pub(super) fn on_send(&mut self, start: u32, end: u32, now: Instant) {
        if !lt(start, end) {
            return;
        }
        let order = self.sends;
        self.sends = self.sends.wrapping_add(1);
        if self.segs.is_empty() {
            // Nothing in flight: the intervals of the next samples start now.
            self.first_at = now;
            self.dlv_at = now;
        }
        let (dlv, dlv_at, first_at) = (self.dlv, self.dlv_at, self.first_at);
        let app_limited = self.app_limited != 0;
        let mut new_from = start;
        if let Some(back_end) = self.segs.back().map(|s| s.end) {
            if lt(start, back_end) {
                let re_end = if lt(end, back_end) { end } else { back_end };
                let i = self.split_at(start);
                let j = self.split_at(re_end);
                for s in self.segs.range_mut(i..j) {
                    if s.flags & SACKED != 0 {
                        continue;
                    }
                    if s.flags & LOST != 0 {
                        self.lost -= s.len();
                    }
                    s.flags = (s.flags | RETRANS) & !LOST;
                    s.at = now;
                    s.order = order;
                    s.dlv = dlv;
                    s.dlv_at = dlv_at;
                    s.first_at = first_at;
                    s.app_limited = app_limited;
                }
                if self.retrans_high.is_none_or(|h| lt(h, re_end)) {
                    self.retrans_high = Some(re_end);
                }
                new_from = re_end;
            }
        }
        if !lt(new_from, end) {
            return;
        }
        let full = self.segs.len() >= RACK_TRACK;
        match self.segs.back_mut() {
            Some(last) if full && last.end == new_from => {
                last.end = end;
                last.at = now;
                last.order = order;
            }
            _ => self.segs.push_back(Sent {
                start: new_from,
                end,
                at: now,
                order,
                flags: 0,
                dlv,
                dlv_at,
                first_at,
                app_limited,
            }),
        }
    }

    /// RFC 8985 §6.2 steps 1-3 for a segment just delivered: the RTT sample (not
    /// from a retransmission an ACK of the original may have answered: one whose
    /// echoed timestamp is older than the retransmission, or whose RTT would be
    /// shorter than the path's), the most recently sent delivered segment, and
    /// reordering (an original delivered below the highest delivered, segments
    /// taken in ascending order). `echo` is the ACK's TSecr and our timestamp
    /// clock's offset, where timestamps are on.
    fn delivered(
        &mut self,
        s: Sent,
        now: Instant,
        echo: Option<(u32, u32)>,
        st: &mut crate::stats::TcpStat,
    ) {
        self.rate_delivered(&s, now);
        if self.fack.is_none_or(|f| lt(f, s.end)) {
            self.fack = Some(s.end);
        } else if s.flags & RETRANS == 0 && lt(s.end, self.fack.unwrap_or(s.end)) {
            if !self.reordering_seen {
                st.rackreorder += 1;
            }
            self.reordering_seen = true;
        }
        let rtt = now.saturating_duration_since(s.at);
        if s.flags & RETRANS != 0 {
            let older_echo = echo.is_some_and(|(ecr, off)| lt(ecr, tsval(s.at, off)));
            if older_echo || self.min_rtt.is_none_or(|m| rtt < m) {
                return;
            }
        }
        if s.flags & RETRANS == 0 {
            self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
        }
        self.rtt = rtt;
        if self.xmit.is_none_or(|(t, o, e)| {
            sent_after(s.at, s.order, t, o) || (s.at == t && s.order == o && lt(e, s.end))
        }) {
            self.xmit = Some((s.at, s.order, s.end));
        }
    }

    /// Delivery-rate bookkeeping for a segment just delivered (the draft's
    /// UpdateRateSample): the connection's count grows, and the most recently sent
    /// segment of the ACK is the one its sample is taken from.
    fn rate_delivered(&mut self, s: &Sent, now: Instant) {
        if !self.rate_on {
            return;
        }
        self.dlv += u64::from(s.len());
        self.dlv_at = now;
        let newer = self.rate_from.is_none_or(|r| {
            s.dlv > r.dlv || (s.dlv == r.dlv && sent_after(s.at, s.order, r.at, r.order))
        });
        if newer {
            self.rate_from = Some(RateFrom {
                dlv: s.dlv,
                dlv_at: s.dlv_at,
                send_elapsed: s.at.saturating_duration_since(s.first_at),
                at: s.at,
                order: s.order,
                app_limited: s.app_limited,
                rtt: (s.flags & RETRANS == 0).then(|| now.saturating_duration_since(s.at)),
            });
            self.first_at = s.at;
        }
    }

    /// The rate sample of the ACK just processed, if it delivered anything (the
    /// draft's GenerateRateSample).
    pub(super) fn take_rate_sample(&mut self) -> Option<RateSample> {
        let r = self.rate_from.take()?;
        if self.app_limited != 0 && self.dlv > self.app_limited {
            self.app_limited = 0;
        }
        let ack_elapsed = self.dlv_at.saturating_duration_since(r.dlv_at);
        let interval = r.send_elapsed.max(ack_elapsed);
        let believable = self.min_rtt.is_some_and(|m| interval >= m) && !interval.is_zero();
        Some(RateSample {
            delivered: self.dlv - r.dlv,
            interval: believable.then_some(interval),
            prior_delivered: r.dlv,
            app_limited: r.app_limited,
            rtt: r.rtt,
        })
    }

    /// The sender has less to send than the window allows: samples taken until
    /// what is in flight now is delivered say nothing of the path's rate.
    pub(super) fn mark_app_limited(&mut self, in_flight: u32) {
        self.app_limited = (self.dlv + u64::from(in_flight)).max(1);
    }

    /// Samples are app-limited now.
    pub(super) fn app_limited(&self) -> bool {
        self.app_limited != 0
    }

    /// Bytes delivered so far (acknowledged or SACKed).
    pub(super) fn delivered_total(&self) -> u64 {
        self.dlv
    }

    /// Bytes marked lost so far.
    pub(super) fn lost_ever(&self) -> u64 {
        self.lost_ever
    }

    /// The cumulative acknowledgment reached `una`.
    pub(super) fn on_ack(
        &mut self,
        una: u32,
        now: Instant,
        echo: Option<(u32, u32)>,
        st: &mut crate::stats::TcpStat,
    ) {
        while let Some(s) = self.segs.front().copied() {
            if !le(s.end, una) {
                if lt(s.start, una) {
                    // Partly acknowledged: the rest stays, without the part. The
                    // part is delivered now (its bytes counted, its send a rate
                    // sample's), as Linux's tcp_clean_rtx_queue counts a TSO
                    // segment's acknowledged packets: an offload burst of 64 KiB
                    // acknowledged a few segments at a time would otherwise add
                    // to the delivered count only when its last byte is, and
                    // BBR's bandwidth samples would fall short by up to a burst.
                    let cut = diff(una, s.start);
                    if s.flags & LOST != 0 {
                        self.lost -= cut;
                    }
                    if s.flags & SACKED != 0 {
                        self.sacked -= cut;
                    } else {
                        self.delivered(Sent { end: una, ..s }, now, echo, st);
                    }
                    self.segs[0].start = una;
                }
                break;
            }
            self.segs.pop_front();
            if s.flags & LOST != 0 {
                self.lost -= s.len();
            }
            if s.flags & SACKED != 0 {
                self.sacked -= s.len();
            } else {
                self.delivered(s, now, echo, st);
            }
        }
        if self.retrans_high.is_some_and(|h| le(h, una)) {
            self.retrans_high = None;
        }
        if self.segs.is_empty() {
            self.deadline = None;
        }
    }

    /// A SACK block [l, r) (already checked to lie within what was sent and above
    /// SND.UNA): its segments are delivered. Returns the bytes newly SACKed.
    pub(super) fn on_sack(
        &mut self,
        l: u32,
        r: u32,
        now: Instant,
        echo: Option<(u32, u32)>,
        st: &mut crate::stats::TcpStat,
    ) -> u32 {
        let i = self.split_at(l);
        let j = self.split_at(r);
        let mut newly = 0;
        for k in i..j {
            let s = self.segs[k];
            // Entries the block only partly covers (unsplit at the bound) stay.
            if s.flags & SACKED != 0 || lt(s.start, l) || lt(r, s.end) {
                continue;
            }
            if s.flags & LOST != 0 {
                self.lost -= s.len();
            }
            self.segs[k].flags = (s.flags | SACKED) & !LOST;
            self.sacked += s.len();
            newly += s.len();
            self.delivered(s, now, echo, st);
        }
        newly
    }

    /// RFC 8985 §6.2 step 4: the reordering window.
    fn reo_wnd(&self, recovering: bool, mss: u32, srtt: Duration) -> Duration {
        if !self.reordering_seen && (recovering || self.sacked >= DUPTHRESH * mss) {
            return Duration::ZERO;
        }
        let Some(min_rtt) = self.min_rtt else {
            return Duration::ZERO;
        };
        (min_rtt * self.reo_wnd_mult / 4).min(srtt)
    }

    /// A D-SACK arrived: the window grows by a quarter of the minimum RTT, once a
    /// round (until SND.UNA passes the SND.NXT of the last growth), and stays grown
    /// for sixteen recoveries.
    pub(super) fn on_dsack(&mut self, una: u32, snd_nxt: u32) {
        if self.dsack_round.is_some_and(|r| le(r, una)) {
            self.dsack_round = None;
        }
        if self.dsack_round.is_none() {
            self.dsack_round = Some(snd_nxt);
            // Never beyond SRTT anyway (`reo_wnd`); the bound keeps the product sane.
            self.reo_wnd_mult = (self.reo_wnd_mult + 1).min(64);
            self.reo_wnd_persist = 16;
        }
    }

    /// A fast or timeout recovery ended.
    pub(super) fn on_recovery_end(&mut self) {
        self.reo_wnd_persist = self.reo_wnd_persist.saturating_sub(1);
        if self.reo_wnd_persist == 0 {
            self.reo_wnd_mult = 1;
        }
    }

    /// RFC 8985 §6.2 step 5: marks lost every segment sent before the most recently
    /// sent delivered one and missing for longer than its RTT plus the reordering
    /// window, and arms the reordering timer for the first one still short of that.
    /// Returns the segments newly lost and how many of them were retransmissions.
    pub(super) fn detect_loss(
        &mut self,
        now: Instant,
        recovering: bool,
        mss: u32,
        srtt: Duration,
    ) -> (u32, u32) {
        self.deadline = None;
        let Some((xt, xo, xe)) = self.xmit else {
            return (0, 0);
        };
        let reo = self.reo_wnd(recovering, mss, srtt);
        let mut wait: Option<Instant> = None;
        let (mut lost, mut relost) = (0, 0);
        for s in self.segs.iter_mut() {
            if s.flags & (SACKED | LOST) != 0 {
                continue;
            }
            // Of the send the newest delivery came from, the bytes above it count
            // as sent after it (the rest of a burst acknowledged in part).
            let same_send = s.at == xt && s.order == xo;
            if sent_after(s.at, s.order, xt, xo) || (same_send && lt(xe, s.end)) {
                // Originals go out in sequence order: past the last retransmission,
                // everything further was sent later still.
                if s.flags & RETRANS == 0 && self.retrans_high.is_none_or(|h| le(h, s.start)) {
                    break;
                }
                continue;
            }
            let due = s.at + self.rtt + reo;
            if due <= now {
                s.flags |= LOST;
                self.lost += s.len();
                self.lost_ever += u64::from(s.len());
                lost += 1;
                if s.flags & RETRANS != 0 {
                    relost += 1;
                }
            } else {
                wait = Some(wait.map_or(due, |w| w.max(due)));
            }
        }
        self.deadline = wait;
        (lost, relost)
    }

    /// Marks the first segment not SACKed lost (a recovery that duplicate ACKs
    /// started without SACK blocks to go by).
    pub(super) fn mark_first_lost(&mut self) {
        if let Some(s) = self.segs.iter_mut().find(|s| s.flags & SACKED == 0) {
            if s.flags & LOST == 0 {
                s.flags |= LOST;
                self.lost += s.len();
                self.lost_ever += u64::from(s.len());
            }
        }
    }
}
