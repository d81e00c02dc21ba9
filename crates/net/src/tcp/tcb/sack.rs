//! Loss recovery (FreeBSD's `tcp_sack`): an ACK's SACK blocks (RFC 2018) entered
//! in the scoreboard, which `rack` keeps with RACK's loss marks (RFC 8985); RFC
//! 6675's pipe and next hole from them; the retransmission of holes (also the one
//! that NewReno retransmits, RFC 6582); the window during recovery is Proportional
//! Rate Reduction's (RFC 6937, `Tcb::prr_on_ack` in `ack`); as receiver, the SACK
//! blocks describing our out-of-order queue. Calls `output` to build and send
//! segments and `timer` to arm the retransmission timer.

use super::seq::{diff, le, lt};
use super::{SegIn, SegOut, Tcb};
use crate::stats::TcpStat;
use dev::Instant;

impl Tcb {
    /// In loss recovery with a SACK scoreboard.
    pub(super) fn sack_recovery(&self) -> bool {
        self.recover.is_some() && self.sack_perm
    }

    /// RFC 6675's pipe with RACK's loss marks (as Linux counts it): what is out,
    /// less what the peer has SACKed and what is lost and not yet sent again.
    pub(super) fn pipe(&self) -> u32 {
        self.flight()
            .saturating_sub(self.rack.sacked_bytes())
            .saturating_sub(self.rack.lost_bytes())
    }

    /// The next hole to retransmit: with SACK the first range RACK has marked lost;
    /// without, the segment at `snd_una` (once per call of the loss recovery).
    pub(super) fn next_hole(&self) -> Option<(u32, u32)> {
        let end = self.fin_seq();
        let room = self.data_room();
        let limit = |p: u32, hole_end: u32| diff(hole_end, p).min(room).min(diff(end, p));
        if !self.sack_perm {
            if self.sack_next != self.snd_una && lt(self.snd_una, self.sack_next) {
                return None;
            }
            // What was sent, no further: a retransmission past SND.MAX would send
            // new data that SND.MAX does not count, and the peer's ACK of it
            // would then be refused as acknowledging what was never sent.
            let len = limit(self.snd_una, self.snd_max);
            return (len > 0).then_some((self.snd_una, len));
        }
        let (p, e) = self.rack.first_lost()?;
        let p = if lt(p, self.snd_una) { self.snd_una } else { p };
        let len = limit(p, e);
        (len > 0).then_some((p, len))
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
                self.count_rexmit(0, st);
                self.push(seg, st, out);
                self.arm_rtx(now);
                return true;
            }
            return false;
        };
        let mut seg = self.header(now, p);
        seg.data_len = len as usize;
        self.count_rexmit(len, st);
        // Retransmissions of the recovery that D-SACK may prove unneeded: the fast
        // retransmit and the holes the scoreboard shows (not the segment at
        // SND.UNA that a partial ACK with an empty scoreboard sends on a guess).
        let counted = self.rack.sacked_bytes() > 0 || self.dsack_undo.is_some_and(|u| u.2 == 0);
        if let Some(u) = self.dsack_undo.as_mut().filter(|u| counted && lt(p, u.3)) {
            u.2 += len.div_ceil(self.snd_mss.max(1));
        }
        self.timed = None;
        self.push(seg, st, out);
        self.rack_sent(p, len, now);
        self.pace_sent(now, len);
        self.sack_next = p.wrapping_add(len);
        if lt(self.snd_nxt, self.sack_next) {
            self.snd_nxt = self.sack_next;
        }
        self.arm_rtx(now);
        true
    }

    /// RACK on an acknowledgment (RFC 8985 §6.2): the segments it delivers,
    /// cumulatively and then by its SACK blocks in ascending order (the scoreboard),
    /// then loss detection. Returns the bytes newly SACKed.
    pub(super) fn rack_input(&mut self, seg: &SegIn<'_>, now: Instant, st: &mut TcpStat) -> u32 {
        if !self.sack_perm {
            return 0;
        }
        let echo = match seg.ts {
            Some((_, ecr)) if self.ts_enabled && ecr != 0 => Some((ecr, self.ts_offset)),
            _ => None,
        };
        self.rack.on_ack(self.snd_una, now, echo, st);
        let mut blocks = [(0u32, 0u32); 4];
        let mut n = 0;
        for (l, r) in seg.sack.iter().flatten().copied() {
            if lt(self.snd_una, r) && lt(l, r) && le(r, self.snd_max) {
                let l = if lt(l, self.snd_una) { self.snd_una } else { l };
                blocks[n] = (l, r);
                n += 1;
            }
        }
        let base = self.snd_una;
        blocks[..n].sort_unstable_by_key(|b| diff(b.0, base));
        let newly: u32 = blocks[..n]
            .iter()
            .map(|&(l, r)| self.rack.on_sack(l, r, now, echo, st))
            .sum();
        self.rack_detect(now, st);
        newly
    }

    /// RACK's loss detection (after an acknowledgment, or when the reordering
    /// timer fires); a loss starts fast recovery, unless one (or a timeout's) runs.
    pub(super) fn rack_detect(&mut self, now: Instant, st: &mut TcpStat) {
        let recovering = self.recover.is_some() || self.rto_recover.is_some();
        let srtt = self.srtt.unwrap_or(self.rto);
        let (lost, relost) = self
            .rack
            .detect_loss(now, recovering, self.seg_size(), srtt);
        st.racklost += u64::from(lost);
        st.rexmitlost += u64::from(relost);
        if self.rack.lost_bytes() > 0 && !recovering && self.state.synchronized() {
            self.enter_recovery(st);
        }
    }

    /// A data segment went out: RACK times it (SACK connections).
    pub(super) fn rack_sent(&mut self, seq: u32, len: u32, now: Instant) {
        if self.sack_perm && len > 0 {
            self.rack.on_send(seq, seq.wrapping_add(len), now);
        }
    }

    /// D-SACK (RFC 2883): a segment of `len` bytes at `seq` that repeats data
    /// already received has its first repeated range reported once, first: the
    /// part below RCV.NXT, else the first part the out-of-order queue holds.
    pub(super) fn note_dsack(&mut self, seq: u32, len: usize) {
        if !self.sack_perm || len == 0 {
            return;
        }
        let end = seq.wrapping_add(len as u32);
        // The overlap of [seq, end) with [a, b), if any.
        let overlap = |a: u32, b: u32| {
            let lo = if lt(seq, a) { a } else { seq };
            let hi = if lt(end, b) { end } else { b };
            lt(lo, hi).then_some((lo, hi))
        };
        let repeated = if lt(seq, self.rcv_nxt) {
            overlap(seq, self.rcv_nxt)
        } else {
            self.ooo
                .iter()
                .find_map(|o| overlap(o.seq, o.seq.wrapping_add(o.data.len() as u32)))
        };
        if repeated.is_some() {
            self.dsack = repeated;
            // At once, as FreeBSD: the next in-order segment's ACK would not
            // carry it.
            self.ack_now = true;
        }
    }

    /// FreeBSD's `tcp_update_sack_list` after data `arrived` (start, end): its
    /// block, merged with the reported ones it touches, goes first if it lies
    /// above RCV.NXT; blocks at or below RCV.NXT are forgotten; the rest keep
    /// their order.
    pub(super) fn update_sack_list(&mut self, arrived: (u32, u32)) {
        if !self.sack_perm || self.ooo.is_empty() {
            self.sack_list = [None; 6];
            return;
        }
        let mut head = arrived;
        let mut kept = [None; 6];
        let mut n = 0;
        for (a, b) in self.sack_list.iter().flatten().copied() {
            if le(a, self.rcv_nxt) {
                continue;
            }
            if le(head.0, b) && le(a, head.1) {
                if lt(a, head.0) {
                    head.0 = a;
                }
                if lt(head.1, b) {
                    head.1 = b;
                }
            } else if n < kept.len() {
                kept[n] = Some((a, b));
                n += 1;
            }
        }
        let mut list = [None; 6];
        let mut k = 0;
        if lt(self.rcv_nxt, head.0) {
            list[0] = Some(head);
            k = 1;
        }
        for b in kept.into_iter().flatten().take(list.len() - k) {
            list[k] = Some(b);
            k += 1;
        }
        self.sack_list = list;
    }

    /// The SACK blocks of the next segment: a D-SACK block if one is owed, then
    /// the reported blocks in [`Tcb::update_sack_list`]'s order (those that still
    /// match the out-of-order queue), then any other range the queue holds.
    pub(super) fn sack_blocks(&self) -> [Option<(u32, u32)>; 4] {
        let mut out = [None; 4];
        if !self.sack_perm {
            return out;
        }
        let max = if self.ts_enabled { 3 } else { 4 };
        let mut k = 0;
        if let Some(d) = self.dsack {
            out[0] = Some(d);
            k = 1;
        }
        if self.ooo.is_empty() {
            return out;
        }
        // The queue's ranges (adjacent entries merged), in sequence order: which
        // of them the reported list names (wherever they lie; with more holes than
        // blocks the newest data is often the highest range), and the lowest few.
        let mut found: [Option<(u32, u32)>; 6] = [None; 6];
        let mut low: [(u32, u32); 4] = [(0, 0); 4];
        let mut nlow = 0;
        let mut cur: Option<(u32, u32)> = None;
        let mut close = |r: (u32, u32)| {
            for (i, b) in self.sack_list.iter().enumerate() {
                if *b == Some(r) {
                    found[i] = Some(r);
                }
            }
            if nlow < low.len() {
                low[nlow] = r;
                nlow += 1;
            }
        };
        for o in self.ooo.iter().filter(|o| !o.data.is_empty()) {
            let (a, b) = (o.seq, o.seq.wrapping_add(o.data.len() as u32));
            match cur {
                Some((ca, cb)) if le(a, cb) => cur = Some((ca, if lt(cb, b) { b } else { cb })),
                Some(r) => {
                    close(r);
                    cur = Some((a, b));
                }
                None => cur = Some((a, b)),
            }
        }
        if let Some(r) = cur {
            close(r);
        }
        // A D-SACK block may repeat the block holding it (RFC 2883 §4): compare
        // only with the SACK blocks.
        let first = k;
        for r in found
            .into_iter()
            .flatten()
            .chain(low[..nlow].iter().copied())
        {
            if k >= max {
                break;
            }
            if !out[first..k].contains(&Some(r)) {
                out[k] = Some(r);
                k += 1;
            }
        }
        out
    }
}
