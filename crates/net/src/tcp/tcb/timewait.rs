//! TIME_WAIT (FreeBSD's `tcp_timewait`): entering it, whether a new SYN may end it
//! (RFC 6191, RFC 1122 4.2.2.13), and [`TimeWait`], what is left of a connection in
//! it once its application is gone. Applies `input`'s checks.

use super::input::{syn_reopens, time_wait_check};
use super::seq::tsval;
use super::{SegIn, SegOut, State, Tcb};
use crate::stats::TcpStat;
use dev::{Duration, Instant};
use std::collections::VecDeque;

/// A connection in TIME_WAIT with nothing left to carry (its application gone,
/// everything it sent acknowledged), as FreeBSD's `tcptw`: what answering the peer
/// takes and nothing else, 48 bytes where a [`Tcb`] is most of a kilobyte.
/// It answers as the control block would ([`Tcb::input`] in TIME_WAIT, FreeBSD's
/// `tcp_twcheck`): a reset is ignored (RFC 1337), a segment without ACK dropped,
/// anything but a pure duplicate ACK answered with an ACK, and a retransmitted FIN
/// restarts the wait; a SYN that may open a new incarnation
/// ([`TimeWait::accepts_syn`]) is the caller's to act on.
#[derive(Clone, Copy, Debug)]
pub struct TimeWait {
    snd_nxt: u32,
    rcv_nxt: u32,
    /// The window field of our ACKs.
    wnd: u16,
    last_ack_sent: u32,
    ts_enabled: bool,
    ts_recent: u32,
    ts_offset: u32,
    /// When the wait ends: moved later by a retransmitted FIN.
    pub deadline: Instant,
}

impl TimeWait {
    /// [`Tcb::time_wait_accepts_syn`], for what is left of the connection.
    pub fn accepts_syn(&self, syn: &SegIn<'_>) -> bool {
        syn_reopens(syn, self.rcv_nxt, self.ts_enabled.then_some(self.ts_recent))
    }

    /// Processes one received segment; returns whether to answer it with
    /// [`TimeWait::ack`]. `wait` is the stack's TIME_WAIT (`TcpConfig::time_wait`),
    /// which a retransmitted FIN starts again.
    pub fn input(
        &mut self,
        seg: &SegIn<'_>,
        now: Instant,
        wait: Duration,
        st: &mut TcpStat,
    ) -> bool {
        st.rcvtotal += 1;
        let (answer, restart) = time_wait_check(seg, self.rcv_nxt, self.snd_nxt, st);
        if restart {
            self.deadline = now + wait;
        }
        answer
    }

    /// The ACK that answers a segment, counted as sent.
    pub fn ack(&mut self, now: Instant, st: &mut TcpStat) -> SegOut {
        self.last_ack_sent = self.rcv_nxt;
        st.sndacks += 1;
        st.sndtotal += 1;
        SegOut {
            seq: self.snd_nxt,
            ack: self.rcv_nxt,
            ack_flag: true,
            wnd: self.wnd,
            ts: self
                .ts_enabled
                .then(|| (tsval(now, self.ts_offset), self.ts_recent)),
            ..SegOut::default()
        }
    }
}

impl Tcb {
    /// Whether a new SYN for this 4-tuple may end our TIME_WAIT and open a new
    /// connection (RFC 6191 with timestamps, RFC 1122 4.2.2.13 without): its sequence
    /// number lies beyond what the old connection used, or its timestamp is newer.
    pub fn time_wait_accepts_syn(&self, syn: &SegIn<'_>) -> bool {
        let recent = self.ts_enabled.then_some(self.ts_recent);
        self.state == State::TimeWait && syn_reopens(syn, self.rcv_nxt, recent)
    }

    /// This control block reduced to a [`TimeWait`], when it is in TIME_WAIT with
    /// nothing owed to the peer (no ACK, reset or retransmission waiting).
    pub fn time_wait(&self) -> Option<TimeWait> {
        let deadline = self.tw_deadline?;
        if self.state != State::TimeWait
            || self.ack_now
            || self.delack_deadline.is_some()
            || self.rst_pending.is_some()
            || self.dupacks_owed > 0
            || self.snd_una != self.snd_max
        {
            return None;
        }
        // The window of an empty receive buffer: what is left in it is the
        // application's, and the application is gone.
        let wnd_adv = self.offered(self.window_with(0));
        Some(TimeWait {
            snd_nxt: self.snd_max,
            rcv_nxt: self.rcv_nxt,
            wnd: (wnd_adv >> self.rcv_wscale).min(65_535) as u16,
            last_ack_sent: self.last_ack_sent,
            ts_enabled: self.ts_enabled,
            ts_recent: self.ts_recent,
            ts_offset: self.ts_offset,
            deadline,
        })
    }

    /// Frees the send and receive buffers' memory and the out-of-order queue, for a
    /// connection in TIME_WAIT whose application is gone: everything sent was
    /// acknowledged, and nobody will read what was received.
    pub fn release_buffers(&mut self) {
        if self.state == State::TimeWait {
            self.sndbuf.release();
            self.rcvbuf = VecDeque::new();
            self.ooo = Vec::new();
        }
    }

    pub(super) fn enter_time_wait(&mut self, now: Instant) {
        self.state = State::TimeWait;
        self.ka_deadline = None;
        self.rtx_deadline = None;
        self.persist_deadline = None;
        self.delack_deadline = None;
        self.tw_deadline = Some(now + self.cfg.time_wait);
    }
}
