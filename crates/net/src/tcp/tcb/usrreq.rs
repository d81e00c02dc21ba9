//! The application's side of the control block (FreeBSD's `tcp_usrreq`): data queued
//! to send, received data read (and the window that opens announced, RFC 1122's SWS
//! avoidance), `shutdown` and `close`, abort, `TCP_NODELAY`. Calls the send buffer,
//! and `output` for the window.

use super::seq::{diff, le, lt};
use super::{SegOut, State, Tcb, TcpError};
use crate::stats::TcpStat;
use dev::Instant;

impl Tcb {
    /// Bytes the application may still queue.
    pub fn send_space(&self) -> usize {
        if self.fin_queued || matches!(self.state, State::Closed | State::TimeWait) {
            return 0;
        }
        self.sndbuf_limit().saturating_sub(self.sndbuf.len())
    }

    /// The send buffer's size, clamped under memory pressure.
    fn sndbuf_limit(&self) -> usize {
        self.cfg.sndbuf.min(self.mem_clamp)
    }

    /// The receive buffer's size, clamped under memory pressure: the window
    /// offered shrinks with it (never below what was offered), and data beyond it
    /// is dropped as data beyond a shut window is.
    pub(super) fn rcvbuf_limit(&self) -> usize {
        self.cfg.rcvbuf.min(self.mem_clamp)
    }

    /// Clamps each buffer to `n` bytes (`tcp::mem`'s pressure states; `usize::MAX`
    /// lifts the clamp). What the buffers hold already stays.
    pub fn set_mem_clamp(&mut self, n: usize) {
        self.mem_clamp = n;
    }

    pub fn mem_clamp(&self) -> usize {
        self.mem_clamp
    }

    /// Whether the clamp, not the configured size, keeps the send buffer from
    /// taking more: a refusal, for `tcp.memrefused`.
    pub fn send_clamped(&self) -> bool {
        self.mem_clamp < self.cfg.sndbuf && self.send_space() == 0 && !self.fin_queued
    }

    /// Bytes the control block's buffers hold: the send buffer, the receive
    /// buffer and the out-of-order segments (what `tcp::mem` counts of it).
    pub fn mem_held(&self) -> usize {
        self.sndbuf.len() + self.rcvbuf.len() + self.ooo.iter().map(|o| o.data.len()).sum::<usize>()
    }

    /// Queues data to send; returns how much was taken (0 when the buffer is full or
    /// the sending side is closed).
    pub fn send(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.send_space());
        self.sndbuf.push_slice(&data[..n]);
        n
    }

    /// Bytes in the send buffer (sent and not yet acknowledged, or not yet sent).
    pub fn send_buffered(&self) -> usize {
        self.sndbuf.len()
    }

    /// Queues the chunk `c` whole, without copying it, if it fits in
    /// [`Tcb::send_space`]; else gives it back.
    pub fn send_chunk(&mut self, c: Vec<u8>) -> Result<(), Vec<u8>> {
        if c.len() > self.send_space() {
            return Err(c);
        }
        self.sndbuf.push_chunk(c);
        Ok(())
    }

    /// Queues the bytes of `m` without copying them (the send buffer holds the
    /// packet's buffers, and segments share them), if they fit in
    /// [`Tcb::send_space`]; else gives `m` back.
    pub fn send_mbuf(&mut self, m: mbuf::Mbuf) -> Result<(), mbuf::Mbuf> {
        if m.len() > self.send_space() {
            return Err(m);
        }
        self.sndbuf.push_mbuf(m);
        Ok(())
    }

    /// Whether byte `off` of `m` continues the send buffer's last chunk in the same
    /// buffer, so that [`Tcb::send_mbuf`] would join it to that chunk.
    pub fn send_continues(&self, m: &mbuf::Mbuf, off: usize) -> bool {
        self.sndbuf.continues(m, off)
    }

    /// A chunk of the send buffer that has been acknowledged, for the application's
    /// channel to reuse.
    pub fn take_spare(&mut self) -> Option<Vec<u8>> {
        self.sndbuf.take_spare()
    }

    /// Bytes waiting for the application.
    pub fn recv_available(&self) -> usize {
        self.rcvbuf.len()
    }

    /// True when the peer has closed its side and everything it sent has been read.
    pub fn recv_finished(&self) -> bool {
        (self.rcv_fin && self.rcvbuf.is_empty()) || self.state == State::Closed
    }

    /// Reads received data; a window update is sent if reading opened the window much.
    pub fn recv(&mut self, buf: &mut [u8]) -> usize {
        let n = buf.len().min(self.rcvbuf.len());
        let (a, b) = self.rcvbuf.as_slices();
        let na = n.min(a.len());
        buf[..na].copy_from_slice(&a[..na]);
        buf[na..n].copy_from_slice(&b[..n - na]);
        self.consumed(n);
        n
    }

    /// Hands up to `max` received bytes to the application's channel through `f`, in
    /// place (one or two slices of the receive buffer); `f` returns how many it
    /// took. No intermediate copy. What it took still counts as unread until
    /// [`Tcb::set_app_unread`] says otherwise.
    pub fn recv_with(&mut self, max: usize, mut f: impl FnMut(&[u8]) -> usize) -> usize {
        let (a, b) = self.rcvbuf.as_slices();
        let mut n = 0;
        for part in [a, b] {
            let want = part.len().min(max - n);
            if want == 0 {
                continue;
            }
            let took = f(&part[..want]).min(want);
            n += took;
            if took < want {
                break;
            }
        }
        self.rcvbuf.drain(..n);
        self.app_unread += n;
        n
    }

    /// How many received bytes the application's channel holds unread now: what
    /// the application read since opens the window, announced as a read from
    /// the receive buffer is.
    pub fn set_app_unread(&mut self, unread: usize) {
        if unread < self.app_unread {
            self.app_unread = unread;
            self.apply_rcvbuf_target();
            self.announce_window();
        } else {
            self.app_unread = unread;
        }
    }

    /// Drops `n` bytes the application has taken and announces a grown window.
    fn consumed(&mut self, n: usize) {
        self.rcvbuf.drain(..n);
        self.announce_window();
    }

    fn announce_window(&mut self) {
        if self.state.can_receive() {
            // Announce a window that grew by two segments or half the buffer (RFC 1122 SWS).
            let new_edge = self.rcv_nxt.wrapping_add(self.rcv_window());
            let grown = diff(new_edge, self.rcv_adv);
            if lt(self.rcv_adv, new_edge)
                && (grown >= 2 * self.snd_mss || grown as usize >= self.cfg.rcvbuf / 2)
            {
                self.ack_now = true;
            }
        }
    }

    /// Closes the sending side (shutdown(SHUT_WR) or close): a FIN follows the data.
    pub fn close(&mut self) {
        match self.state {
            State::SynSent | State::Closed => {
                self.state = State::Closed;
            }
            _ => self.fin_queued = true,
        }
    }

    /// The application has closed the socket (not only shut down its sending side):
    /// nothing more can be received, so from FIN_WAIT_2 on the wait for the peer's
    /// FIN is bounded by `finwait2_timeout` (FreeBSD's `tcp_usrclosed` and
    /// `soisdisconnected`), new data from the peer resets the connection
    /// (`tcp.rcvafterclose`, in `input`), and a send stalled by a zero window is
    /// bounded by `persist_orphan_timeout`. Idempotent.
    pub fn detach(&mut self, now: Instant) {
        if self.detached {
            return;
        }
        self.detached = true;
        self.arm_finwait2(now);
    }

    /// Aborts with a reset (SO_LINGER 0). The reset goes at SND.NXT, or at the
    /// right edge of the peer's window when SND.NXT lies beyond it (a window probe's
    /// byte out into a shut window), where the peer takes it (RFC 5961 §3 wants
    /// RCV.NXT exactly; Linux's `tcp_acceptable_seq`, FreeBSD's SND.NXT pulled back
    /// to SND.UNA in persist).
    pub fn abort(&mut self) {
        if self.state.synchronized() || self.state == State::SynReceived {
            let edge = self.snd_una.wrapping_add(self.snd_wnd);
            self.rst_pending = Some(Box::new(SegOut {
                seq: if self.state.synchronized() && lt(edge, self.snd_nxt) {
                    edge
                } else {
                    self.snd_nxt
                },
                rst: true,
                ..SegOut::default()
            }));
        }
        self.enter_closed();
    }

    /// Drops the connection on the operator's word (FreeBSD's `tcp_drop` from
    /// tcpdrop(8)): a reset to the peer if it has one in sync with us, the
    /// application told `Aborted`; a connection in TIME_WAIT just ends.
    pub fn drop_conn(&mut self, st: &mut TcpStat) {
        if self.state == State::TimeWait {
            st.closed += 1;
            self.enter_closed();
            return;
        }
        st.drops += 1;
        self.abort();
        self.error = Some(TcpError::Aborted);
    }

    /// Whether `seq`, the sequence number an ICMP error quotes, lies in what this
    /// connection has sent and not had acknowledged, [snd_una, snd_max): the only
    /// segments a router can have seen that the peer has not (RFC 5927 §4.1,
    /// FreeBSD's `tcp_ctlinput`). A blind attacker has to guess it.
    pub fn outstanding(&self, seq: u32) -> bool {
        le(self.snd_una, seq) && lt(seq, self.snd_max)
    }

    /// An ICMP hard error (port or protocol unreachable, administratively
    /// prohibited, time exceeded in transit) quoting our segment that starts at
    /// `seq` (FreeBSD's `tcp_ctlinput` with `net.inet.tcp.icmp_may_rst`, and
    /// `tcp_drop_syn_sent`): a connection still in SYN-SENT, whose SYN it quotes,
    /// ends with `error`. Anywhere else the message is ignored, as RFC 5461 §4.1
    /// asks of hard errors on established connections. Whether it ended.
    pub fn icmp_hard_error(&mut self, seq: u32, error: TcpError, st: &mut TcpStat) -> bool {
        if !self.cfg.icmp_may_rst
            || self.state != State::SynSent
            || lt(seq, self.snd_una)
            || !lt(seq, self.snd_max)
        {
            return false;
        }
        st.conndrops += 1;
        self.error = Some(error);
        self.enter_closed();
        true
    }

    pub(super) fn enter_closed(&mut self) {
        self.state = State::Closed;
        self.rtx_deadline = None;
        self.persist_deadline = None;
        self.delack_deadline = None;
        self.tw_deadline = None;
        self.fw2_deadline = None;
        self.ka_deadline = None;
        self.rack.clear();
    }

    /// `SO_SNDBUF` / `SO_RCVBUF` on an open connection (FreeBSD's `sbreserve`
    /// from `sosetopt`): the send buffer bounds what may be queued from now on;
    /// the receive buffer bounds the window offered. A smaller receive buffer
    /// takes effect as the window already offered is used up (never shrunk,
    /// RFC 9293 §3.8.6: what was promised is still taken); a larger one opens
    /// the window at once, up to what the window scale agreed can say. The
    /// caller clamps the sizes.
    pub fn set_buffer_sizes(&mut self, send: Option<usize>, recv: Option<usize>) {
        if let Some(n) = send {
            self.cfg.sndbuf = n;
        }
        if let Some(n) = recv {
            self.rcvbuf_target = Some(n);
            self.apply_rcvbuf_target();
            self.announce_window();
        }
    }

    /// Moves the receive buffer toward the size asked for: at once when it
    /// grows, and no lower than what is held plus the window already offered
    /// when it shrinks.
    fn apply_rcvbuf_target(&mut self) {
        let Some(want) = self.rcvbuf_target else {
            return;
        };
        let promised = if self.state.can_receive() {
            self.adv_room() as usize
        } else {
            0
        };
        self.cfg.rcvbuf = want.max(self.rcv_held() + promised);
        if self.cfg.rcvbuf == want {
            self.rcvbuf_target = None;
        }
    }

    /// `TCP_MAXSEG` (FreeBSD's `t_maxseg`, Linux's `user_mss`): before our SYN
    /// or SYN-ACK leaves, it bounds the MSS we offer and the segments we send
    /// (a listener's, given to the connection its SYN opens, as Linux's child
    /// inherits `user_mss`); later, it can only lower the segment size in use.
    pub fn set_user_mss(&mut self, mss: u16) {
        self.cfg.limit_mss(mss);
        if self.state.synchronized() || self.state == State::SynReceived {
            self.snd_mss = self.snd_mss.min(u32::from(self.cfg.mss));
        }
        if self.state == State::SynReceived {
            // The peer's SYN set the initial window from the segment size.
            self.cwnd = self.initial_window();
        }
    }

    /// `TCP_NODELAY`.
    pub fn set_nodelay(&mut self, on: bool) {
        self.cfg.nodelay = on;
    }

    /// `TCP_NOOPT`, before our SYN leaves: it goes without options, and the
    /// connection uses none (FreeBSD's `TF_NOOPT`). Later, nothing changes.
    pub fn set_noopt(&mut self) {
        if self.state == State::SynSent && self.snd_max == self.iss {
            self.drop_syn_options();
            self.noopt = true;
        }
    }

    /// Our SYN stops asking for window scaling, SACK and timestamps (`TCP_NOOPT`,
    /// and `net.inet.tcp.rexmit_drop_options` from the third retransmission on).
    pub(super) fn drop_syn_options(&mut self) {
        self.cfg.window_scaling = false;
        self.cfg.sack = false;
        self.cfg.timestamps = false;
    }
}
