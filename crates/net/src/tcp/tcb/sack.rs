//! Loss recovery (FreeBSD's `tcp_sack`): the sender's scoreboard of SACKed ranges
//! (RFC 2018), RFC 6675's pipe and next hole, the retransmission of holes (also the
//! one that NewReno retransmits, RFC 6582), and lost retransmissions found as RACK
//! finds them (RFC 8985); as receiver, the SACK blocks describing our out-of-order
//! queue. Calls `output` to build and send segments and `timer` to arm the
//! retransmission timer.

use super::seq::{diff, le, lt};
use super::{SegIn, SegOut, Tcb, REXMIT_TRACK};
use crate::stats::TcpStat;
use dev::Instant;

impl Tcb {
    /// In loss recovery with a SACK scoreboard.
    pub(super) fn sack_recovery(&self) -> bool {
        self.recover.is_some() && self.sack_perm
    }

    /// RFC 6675's pipe, simplified: the bytes beyond the highest SACKed byte (in
    /// flight), plus the retransmissions not yet delivered. Holes below the highest
    /// SACKed byte that have not been retransmitted count as lost.
    pub(super) fn pipe(&self) -> u32 {
        let fack = match self.sacked.last() {
            Some(r) if lt(self.snd_una, r.1) => r.1,
            _ => self.snd_una,
        };
        let beyond = if lt(fack, self.snd_max) {
            diff(self.snd_max, fack)
        } else {
            0
        };
        let rexmit: u32 = self.rexmits.iter().map(|r| diff(r.1, r.0)).sum();
        beyond.saturating_add(rexmit)
    }

    /// The next hole to retransmit: with SACK the first range at or after `sack_next`
    /// that the peer lacks below its highest SACKed byte; without, the segment at
    /// `snd_una` (once per call of the loss recovery).
    pub(super) fn next_hole(&self) -> Option<(u32, u32)> {
        let end = self.fin_seq();
        let room = self.data_room();
        let limit = |p: u32, hole_end: u32| diff(hole_end, p).min(room).min(diff(end, p));
        if !self.sack_perm || self.sacked.is_empty() {
            if self.sack_next != self.snd_una && lt(self.snd_una, self.sack_next) {
                return None;
            }
            let len = limit(self.snd_una, end);
            return (len > 0).then_some((self.snd_una, len));
        }
        let high = self.sacked.last().map(|r| r.1)?;
        let mut p = if lt(self.sack_next, self.snd_una) {
            self.snd_una
        } else {
            self.sack_next
        };
        while lt(p, high) {
            if let Some(r) = self.sacked.iter().find(|r| le(r.0, p) && lt(p, r.1)) {
                p = r.1;
                continue;
            }
            let hole_end = self
                .sacked
                .iter()
                .find(|r| lt(p, r.0))
                .map_or(high, |r| r.0);
            let len = limit(p, hole_end);
            return (len > 0).then_some((p, len));
        }
        None
    }

    /// Retransmits one hole (fast retransmit, partial ACK, SACK recovery).
    pub(super) fn send_rexmit(
        &mut self,
        now: Instant,
        st: &mut TcpStat,
        out: &mut Vec<SegOut>,
    ) -> bool {
        if !self.state.synchronized() {
            return false;
        }
        let Some((p, len)) = self.next_hole() else {
            // Only a FIN may be outstanding.
            let end = self.fin_seq();
            if self.fin_queued && self.snd_una == end && lt(end, self.snd_max) {
                let mut seg = self.header(now, end);
                seg.fin = true;
                st.sndrexmitpack += 1;
                self.push(seg, st, out);
                self.arm_rtx(now);
                return true;
            }
            return false;
        };
        let mut seg = self.header(now, p);
        seg.data_len = len as usize;
        st.sndrexmitpack += 1;
        st.sndrexmitbyte += u64::from(len);
        self.timed = None;
        self.push(seg, st, out);
        if self.recover.is_some() && self.sack_perm {
            if self.rexmits.len() >= REXMIT_TRACK {
                self.rexmits.remove(0);
            }
            self.rexmits.push((p, p.wrapping_add(len), self.snd_max));
        }
        self.sack_next = p.wrapping_add(len);
        if lt(self.snd_nxt, self.sack_next) {
            self.snd_nxt = self.sack_next;
        }
        self.arm_rtx(now);
        true
    }

    /// Lost retransmissions: a hole retransmitted before data that has since
    /// arrived (SACKed or acknowledged), but still missing itself, was lost again.
    pub(super) fn detect_lost_rexmits(&mut self, st: &mut TcpStat) {
        if self.rexmits.is_empty() {
            return;
        }
        let high = self.sacked.last().map(|r| r.1);
        let una = self.snd_una;
        let mut later_arrived = false;
        let mut i = self.rexmits.len();
        while i > 0 {
            i -= 1;
            let (a, b, mark) = self.rexmits[i];
            let arrived = le(b, una) || self.sacked.iter().any(|r| le(r.0, a) && le(b, r.1));
            if arrived {
                later_arrived = true;
                self.rexmits.remove(i);
                continue;
            }
            if later_arrived || high.is_some_and(|h| lt(mark, h)) {
                self.rexmits.remove(i);
                st.rexmitlost += 1;
                let from = if lt(a, una) { una } else { a };
                if lt(from, self.sack_next) || self.sack_next == from {
                    self.sack_next = from;
                }
                self.rexmit_owed += 1;
            }
        }
    }

    /// Records the SACK blocks of an acknowledgment in the scoreboard.
    pub(super) fn sack_update(&mut self, seg: &SegIn<'_>) -> u32 {
        if !self.sack_perm || seg.sack[0].is_none() {
            return 0;
        }
        let before = self.sacked_bytes();
        for (l, r) in seg.sack.iter().flatten().copied() {
            if !(lt(self.snd_una, r) && lt(l, r) && le(r, self.snd_max)) {
                continue;
            }
            let l = if lt(l, self.snd_una) { self.snd_una } else { l };
            // Insert and merge (sorted by left edge, relative to snd_una).
            let base = self.snd_una;
            let key = |x: u32| diff(x, base);
            let pos = self
                .sacked
                .iter()
                .position(|x| key(x.0) > key(l))
                .unwrap_or(self.sacked.len());
            self.sacked.insert(pos, (l, r));
            // Coalesce overlapping ranges in place (no allocation per ACK).
            let mut w = 0;
            for i in 0..self.sacked.len() {
                let (a, b) = self.sacked[i];
                if w > 0 && key(a) <= key(self.sacked[w - 1].1) {
                    if key(b) > key(self.sacked[w - 1].1) {
                        self.sacked[w - 1].1 = b;
                    }
                } else {
                    self.sacked[w] = (a, b);
                    w += 1;
                }
            }
            self.sacked.truncate(w.min(64));
        }
        self.sacked_bytes().saturating_sub(before)
    }

    pub(super) fn sacked_bytes(&self) -> u32 {
        self.sacked.iter().map(|r| diff(r.1, r.0)).sum()
    }

    /// Forgets scoreboard ranges at or below `ack`.
    pub(super) fn sack_prune(&mut self, ack: u32) {
        self.sacked.retain(|r| lt(ack, r.1));
        if let Some(first) = self.sacked.first_mut() {
            if lt(first.0, ack) {
                first.0 = ack;
            }
        }
    }

    /// SACK blocks describing the out-of-order queue, the latest arrival's first.
    pub(super) fn sack_blocks(&self) -> [Option<(u32, u32)>; 4] {
        let mut out = [None; 4];
        if !self.sack_perm || self.ooo.is_empty() {
            return out;
        }
        let max = if self.ts_enabled { 3 } else { 4 };
        let mut ranges: [(u32, u32); 8] = [(0, 0); 8];
        let mut n = 0;
        for o in self.ooo.iter().filter(|o| !o.data.is_empty()) {
            let (a, b) = (o.seq, o.seq.wrapping_add(o.data.len() as u32));
            if n > 0 && le(a, ranges[n - 1].1) {
                if lt(ranges[n - 1].1, b) {
                    ranges[n - 1].1 = b;
                }
            } else if n < ranges.len() {
                ranges[n] = (a, b);
                n += 1;
            }
        }
        let first = ranges[..n]
            .iter()
            .position(|r| le(r.0, self.last_ooo) && lt(self.last_ooo, r.1));
        let mut k = 0;
        if let Some(f) = first {
            out[0] = Some(ranges[f]);
            k = 1;
        }
        for (i, r) in ranges[..n].iter().enumerate() {
            if k >= max {
                break;
            }
            if Some(i) != first {
                out[k] = Some(*r);
                k += 1;
            }
        }
        out
    }
}
