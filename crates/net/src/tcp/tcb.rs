//! The TCP control block: one connection's state machine, sans IO.
//!
//! A [`Tcb`] knows sequence numbers, windows, timers and buffers; it knows nothing of
//! addresses, ports, packets or clocks. The worker that owns the flow feeds it parsed
//! segments ([`SegIn`]) with `now`, asks it what to send ([`Tcb::output`], which also runs
//! due timers) and when to call again ([`Tcb::poll_at`]). Data to transmit stays in the
//! send buffer until acknowledged; an outgoing segment names its range and the caller
//! copies the bytes out with [`Tcb::copy_payload`] straight into a packet buffer.
//!
//! What is here (RFC 9293 unless said): the full state machine with simultaneous open and
//! close, half-close and TIME_WAIT; MSS; window scaling and timestamps with PAWS
//! (RFC 7323); RTO estimation and exponential backoff (RFC 6298) with Karn's rule;
//! slow start with HyStart++ (RFC 9406) and congestion avoidance by CUBIC (RFC 9438)
//! or NewReno (both in `cc`), fast retransmit and NewReno fast recovery (RFC 5681,
//! RFC 6582); SACK and RFC 6675's loss recovery (RFC 2018), tail loss probes (RFC
//! 8985) and the undoing of spurious timeouts (RFC 3522); delayed ACKs (every second
//! full segment, bounded delay) and Nagle, both switchable; zero-window probing;
//! keepalive; the RST and SYN checks of RFC 5961 with challenge ACKs; SYN cookies
//! ([`CookieOpts`]); a bounded out-of-order queue.

use super::cc::{CcState, CongestionControl, HyStart, SlowStartAck};
use crate::stats::TcpStat;
use dev::{Duration, Instant};
use std::collections::VecDeque;

/// `a < b` in sequence space.
#[inline]
fn lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}
#[inline]
fn le(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) <= 0
}
#[inline]
fn diff(a: u32, b: u32) -> u32 {
    a.wrapping_sub(b)
}

/// Connection states (RFC 9293 §3.3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Closed,
    SynSent,
    SynReceived,
    Established,
    FinWait1,
    FinWait2,
    CloseWait,
    Closing,
    LastAck,
    TimeWait,
}

impl State {
    /// Whether the peer may still send us data.
    fn can_receive(self) -> bool {
        matches!(self, State::Established | State::FinWait1 | State::FinWait2)
    }
    fn synchronized(self) -> bool {
        !matches!(self, State::Closed | State::SynSent | State::SynReceived)
    }
}

/// The window scale we ask for: the smallest shift that lets the receive buffer be
/// offered whole (0 without window scaling).
pub fn wscale_for(cfg: &TcpConfig) -> u8 {
    if !cfg.window_scaling {
        return 0;
    }
    let mut s = 0u8;
    while (cfg.rcvbuf >> s) > 65_535 && s < 14 {
        s += 1;
    }
    s
}

/// Options a SYN cookie connection recovers from the timestamp it echoes (see
/// [`Tcb::from_cookie`]): the peer's window scale, SACK permitted, and the echo itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CookieOpts {
    /// The peer's window scale, if it offered one.
    pub wscale: Option<u8>,
    pub sack: bool,
    /// The ACK's (TSval, TSecr).
    pub ts: (u32, u32),
}

/// Why a connection ended abnormally.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpError {
    /// The peer answered our SYN with a reset.
    Refused,
    /// The peer reset an established connection.
    Reset,
    /// Retransmissions were not acknowledged in time.
    TimedOut,
}

/// Settings of one connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpConfig {
    /// The MSS we advertise and the largest segment we send (IPv4 over 1500: 1460).
    pub mss: u16,
    pub sndbuf: usize,
    pub rcvbuf: usize,
    pub window_scaling: bool,
    pub timestamps: bool,
    /// Disables Nagle's algorithm (`TCP_NODELAY`).
    pub nodelay: bool,
    /// Delayed-ACK timeout; zero acknowledges every segment at once.
    pub delack: Duration,
    pub init_rto: Duration,
    pub min_rto: Duration,
    pub max_rto: Duration,
    /// Retransmissions of one segment before the connection is dropped.
    pub max_retries: u32,
    /// Retransmissions of a SYN (or SYN-ACK) before giving up.
    pub syn_retries: u32,
    /// Time spent in TIME_WAIT (2 MSL).
    pub time_wait: Duration,
    /// Out-of-order segments held for reassembly.
    pub ooo_max_segs: usize,
    /// Initial window in segments (RFC 6928).
    pub init_cwnd_segs: u32,
    /// Selective acknowledgments (RFC 2018), offered and used when the peer agrees.
    pub sack: bool,
    /// Congestion control algorithm (CUBIC by default).
    pub cc: CongestionControl,
    /// HyStart++ (RFC 9406) for the first slow start: it ends when the round-trip
    /// time grows rather than with a loss (on by default; `cc::HyStart`).
    pub hystart: bool,
    /// Keepalive (`SO_KEEPALIVE` with `TCP_KEEPIDLE`): probe after this long without
    /// hearing from the peer; `None` (the default) sends none.
    pub keepalive: Option<Duration>,
    /// Between unanswered keepalive probes (`TCP_KEEPINTVL`).
    pub keepalive_interval: Duration,
    /// Unanswered probes before the connection is dropped (`TCP_KEEPCNT`).
    pub keepalive_probes: u32,
    /// Segmentation offload: the most data one segment may carry for a device that
    /// cuts it into MSS-sized ones itself (the route's interface, `dev::Offloads`);
    /// 0 for a segment per MSS. New data only: retransmissions and everything sent
    /// during loss recovery go an MSS at a time.
    pub tso_max: u32,
    /// Large segments (FreeBSD's `net.inet.tcp.tso`): build segments for the
    /// interface's segmentation offload, and for an interface without it segments
    /// of up to [`GSO_MAX`] that `ip_send` cuts in software (Linux's GSO). Off,
    /// every segment is one MSS. On by default.
    pub tso: bool,
    /// Software large receive offload (FreeBSD's `tcp_lro`, Linux's GRO; see
    /// `net::lro`): consecutive in-order TCP segments of one connection within a
    /// receive burst, from an interface without hardware offload, go up the stack
    /// as one. On by default.
    pub lro: bool,
}

/// The largest segment TCP builds for an interface without segmentation offload,
/// cut in software before the device (Linux's `GSO_LEGACY_MAX_SIZE`).
pub const GSO_MAX: usize = 65_535;

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            mss: 1460,
            sndbuf: 256 * 1024,
            rcvbuf: 256 * 1024,
            window_scaling: true,
            timestamps: true,
            nodelay: false,
            delack: Duration::from_millis(40),
            init_rto: Duration::from_secs(1),
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(60),
            max_retries: 12,
            syn_retries: 6,
            time_wait: Duration::from_secs(60),
            ooo_max_segs: 256,
            init_cwnd_segs: 10,
            sack: true,
            cc: CongestionControl::Cubic,
            hystart: true,
            keepalive: None,
            keepalive_interval: Duration::from_secs(75),
            keepalive_probes: 8,
            tso_max: 0,
            tso: true,
            lro: true,
        }
    }
}

/// A received segment, parsed (see `SegIn::from_repr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegIn<'a> {
    pub seq: u32,
    /// The acknowledgment number, when the ACK flag is set.
    pub ack: Option<u32>,
    pub syn: bool,
    pub fin: bool,
    pub rst: bool,
    /// Window as on the wire (unscaled).
    pub wnd: u16,
    pub mss: Option<u16>,
    pub wscale: Option<u8>,
    pub sack_perm: bool,
    /// (TSval, TSecr).
    pub ts: Option<(u32, u32)>,
    /// SACK blocks (left edge, right edge).
    pub sack: [Option<(u32, u32)>; 4],
    pub payload: Payload<'a>,
}

/// The most pieces a [`Payload`] holds: a large segment (up to a 512 KiB one from a
/// device with segmentation offload) arrives as its header's buffer and the send
/// buffer's chunks it shares, a handful of buffers; one that software LRO merged
/// (`net::lro`) as the buffers of its frames, up to this many (Linux's
/// `MAX_SKB_FRAGS` is 17). Sixteen frames of 1448 bytes, against eight, made no
/// difference to `bench tcp`'s mpstack-polled row (13.6 Gbit/s, best of seven); a
/// 512 KiB segment (eight jumbo clusters, a header and the pieces at its ends) fits
/// in sixteen, where eight sent it through the copy: 146 against 66 Gbit/s.
pub const PAYLOAD_PIECES: usize = 16;

/// A received segment's data, in the pieces of the buffers it arrived in (the
/// sender's header buffer and the send-buffer chunks its segment shares, say), so
/// that nothing is copied to make it contiguous.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Payload<'a> {
    /// `p[..n]` are the pieces, none of them empty.
    p: [&'a [u8]; PAYLOAD_PIECES],
    n: u8,
}

impl<'a> Payload<'a> {
    /// `head` followed by `tail`.
    pub fn new(head: &'a [u8], tail: &'a [u8]) -> Self {
        let mut p = Payload::default();
        p.push(head);
        p.push(tail);
        p
    }

    /// Adds `piece` at the end; false (and nothing added) when it has
    /// [`PAYLOAD_PIECES`] already. An empty piece is always taken.
    pub fn push(&mut self, piece: &'a [u8]) -> bool {
        if piece.is_empty() {
            return true;
        }
        let Some(slot) = self.p.get_mut(usize::from(self.n)) else {
            return false;
        };
        *slot = piece;
        self.n += 1;
        true
    }

    fn slices(&self) -> &[&'a [u8]] {
        &self.p[..usize::from(self.n)]
    }

    pub fn len(&self) -> usize {
        self.slices().iter().map(|p| p.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Without its first `n` bytes (empty when `n` is the length or more).
    pub fn skip(self, mut n: usize) -> Self {
        let mut out = Payload::default();
        for piece in self.pieces() {
            match piece.get(n..) {
                Some(rest) => {
                    out.push(rest);
                    n = 0;
                }
                None => n -= piece.len(),
            }
        }
        out
    }

    /// Its first `n` bytes (all of it when `n` is the length or more).
    pub fn take(self, mut n: usize) -> Self {
        let mut out = Payload::default();
        for piece in self.pieces() {
            if n == 0 {
                break;
            }
            let k = piece.len().min(n);
            out.push(&piece[..k]);
            n -= k;
        }
        out
    }

    /// The non-empty slices, in order.
    pub fn pieces(self) -> impl Iterator<Item = &'a [u8]> {
        self.p.into_iter().take(usize::from(self.n))
    }
}

impl<'a> From<&'a [u8]> for Payload<'a> {
    fn from(b: &'a [u8]) -> Self {
        Payload::new(b, &[])
    }
}

impl<'a, const N: usize> From<&'a [u8; N]> for Payload<'a> {
    fn from(b: &'a [u8; N]) -> Self {
        Payload::new(b, &[])
    }
}

impl<'a> SegIn<'a> {
    pub fn from_repr(r: &wire::TcpRepr<'a>) -> Self {
        use wire::TcpFlags as F;
        SegIn {
            seq: r.seq_number.0,
            ack: r.flags.contains(F::ACK).then_some(r.ack_number.0),
            syn: r.flags.contains(F::SYN),
            fin: r.flags.contains(F::FIN),
            rst: r.flags.contains(F::RST),
            wnd: r.window_len,
            mss: r.max_seg_size,
            wscale: r.window_scale,
            sack_perm: r.sack_permitted,
            ts: r.timestamp.map(|t| (t.tsval, t.tsecr)),
            sack: r.sack_ranges,
            payload: r.payload.into(),
        }
    }

    /// What the peer parses from `seg` carrying `payload` (tests and fuzzing join
    /// two control blocks without the wire format).
    pub fn from_out(seg: &SegOut, payload: &'a [u8]) -> Self {
        SegIn {
            seq: seg.seq,
            ack: seg.ack_flag.then_some(seg.ack),
            syn: seg.syn,
            fin: seg.fin,
            rst: seg.rst,
            wnd: seg.wnd,
            mss: seg.mss,
            wscale: seg.wscale,
            sack_perm: seg.sack_perm,
            ts: seg.ts,
            sack: seg.sack,
            payload: payload.into(),
        }
    }

    /// Sequence space the segment occupies.
    pub fn seg_len(&self) -> u32 {
        self.payload.len() as u32 + u32::from(self.syn) + u32::from(self.fin)
    }
}

/// A segment to send. Its data are `data_len` bytes of the send buffer starting at
/// sequence number `seq` (after the SYN, if it carries one); see [`Tcb::copy_payload`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegOut {
    pub seq: u32,
    /// Acknowledgment number; meaningful when `ack_flag` is set.
    pub ack: u32,
    pub ack_flag: bool,
    pub syn: bool,
    pub fin: bool,
    pub rst: bool,
    pub psh: bool,
    pub wnd: u16,
    pub mss: Option<u16>,
    pub wscale: Option<u8>,
    pub sack_perm: bool,
    pub ts: Option<(u32, u32)>,
    /// SACK blocks of data held out of order.
    pub sack: [Option<(u32, u32)>; 4],
    pub data_len: usize,
    /// For a segment built for segmentation offload (`data_len` beyond one MSS):
    /// the data bytes of each segment the device is to cut it into; 0 otherwise.
    pub tso_segsz: u16,
}

impl SegOut {
    /// The `wire` representation with `payload` as data.
    pub fn to_repr<'p>(
        &self,
        src_port: u16,
        dst_port: u16,
        payload: &'p [u8],
    ) -> wire::TcpRepr<'p> {
        use wire::TcpFlags as F;
        let mut flags = F::EMPTY;
        flags.set(F::SYN, self.syn);
        flags.set(F::FIN, self.fin);
        flags.set(F::RST, self.rst);
        flags.set(F::PSH, self.psh);
        flags.set(F::ACK, self.ack_flag);
        wire::TcpRepr {
            src_port,
            dst_port,
            seq_number: wire::TcpSeqNumber(self.seq),
            ack_number: wire::TcpSeqNumber(if self.ack_flag { self.ack } else { 0 }),
            flags,
            window_len: self.wnd,
            urgent_at: 0,
            max_seg_size: self.mss,
            window_scale: self.wscale,
            sack_permitted: self.sack_perm,
            sack_ranges: self.sack,
            timestamp: self
                .ts
                .map(|(tsval, tsecr)| wire::TcpTimestampRepr { tsval, tsecr }),
            payload,
        }
    }
}

/// The most received data a batch leaves unacknowledged ([`Tcb::output_may_wait`]):
/// Linux's GRO aggregates up to 64 KiB before its one ACK, the same stretch.
pub const ACK_BATCH_MAX: u32 = 64 * 1024;

/// The reset answering a segment that belongs to no connection (RFC 9293 §3.10.7.1).
/// `None` for a segment that is itself a reset.
pub fn reset_for(seg: &SegIn<'_>) -> Option<SegOut> {
    if seg.rst {
        return None;
    }
    Some(reset_answering(seg.seq, seg.ack, seg.seg_len()))
}

/// The reset answering a segment of sequence number `seq`, acknowledgment `ack`
/// (when its ACK flag is set) and length `seg_len` (data, SYN and FIN counted):
/// `<SEQ=SEG.ACK><CTL=RST>`, or `<SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>`.
pub fn reset_answering(seq: u32, ack: Option<u32>, seg_len: u32) -> SegOut {
    match ack {
        Some(a) => SegOut {
            seq: a,
            rst: true,
            ..SegOut::default()
        },
        None => SegOut {
            seq: 0,
            ack: seq.wrapping_add(seg_len),
            ack_flag: true,
            rst: true,
            ..SegOut::default()
        },
    }
}

/// Out-of-order data waiting for the hole before it.
#[derive(Debug)]
struct OooSeg {
    seq: u32,
    data: Vec<u8>,
    fin: bool,
}

/// `seg` without its SYN, when that SYN is the one already received (`irs`): the
/// rest of the segment is processed, and the sender is to hear our ACK.
fn without_old_syn<'a>(seg: &SegIn<'a>, irs: u32) -> Option<SegIn<'a>> {
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
fn syn_reopens(syn: &SegIn<'_>, rcv_nxt: u32, ts_recent: Option<u32>) -> bool {
    if !syn.syn || syn.ack.is_some() || syn.rst {
        return false;
    }
    match (ts_recent, syn.ts) {
        (Some(recent), Some((tsval, _))) => lt(recent, tsval),
        _ => lt(rcv_nxt, syn.seq),
    }
}

/// Counts an unacceptable segment that carries something: old (a duplicate) or
/// beyond the window `wnd` at `nxt` (a zero-window probe when at its edge).
fn count_unacceptable(st: &mut TcpStat, nxt: u32, wnd: u32, seg: &SegIn<'_>) {
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

/// The timestamp clock: milliseconds, shifted by the connection's `offset`.
fn tsval(now: Instant, offset: u32) -> u32 {
    (now.as_millis() as u32).wrapping_add(offset)
}

/// PAWS (RFC 7323 §5): whether `seg` carries a timestamp older than `ts_recent`
/// (`None` without timestamps), for which it is dropped. Resets are exempt.
fn paws_rejects(ts_recent: Option<u32>, seg: &SegIn<'_>) -> bool {
    match (ts_recent, seg.ts) {
        (Some(recent), Some((tsval, _))) => !seg.rst && lt(tsval, recent),
        _ => false,
    }
}

/// Remembers the peer's clock (RFC 7323 §4.3): `seg`'s timestamp becomes
/// `ts_recent` when the segment covers the last ACK we sent and the timestamp is
/// not older. `enabled`: the connection uses timestamps.
fn keep_ts_recent(enabled: bool, ts_recent: &mut u32, last_ack_sent: u32, seg: &SegIn<'_>) {
    if let (true, Some((tsval, _))) = (enabled, seg.ts) {
        if le(seg.seq, last_ack_sent) && !lt(tsval, *ts_recent) {
            *ts_recent = tsval;
        }
    }
}

/// Whether `seg` is acceptable to a receiver expecting `nxt` with `wnd` open (RFC 9293
/// §3.10.7.4): some of it lies in the window, or, empty, it is at its left edge.
fn acceptable(nxt: u32, wnd: u32, seg: &SegIn<'_>) -> bool {
    let (seq, seg_len) = (seg.seq, seg.seg_len());
    let inside = |s: u32| le(nxt, s) && lt(s, nxt.wrapping_add(wnd));
    match (seg_len, wnd) {
        (0, 0) => seq == nxt,
        (0, _) => inside(seq),
        (_, 0) => false,
        _ => inside(seq) || inside(seq.wrapping_add(seg_len - 1)),
    }
}

/// A connection in TIME_WAIT with nothing left to carry (its application gone,
/// everything it sent acknowledged), as FreeBSD's `tcptw`: what answering the peer
/// takes and nothing else, 48 bytes where a [`Tcb`] is most of a kilobyte.
/// It answers as the control block would ([`Tcb::input`] in TIME_WAIT): a
/// retransmitted FIN is acknowledged again and restarts the wait; an old duplicate is
/// dropped by PAWS and answered with an ACK; a reset is ignored (RFC 1337); a SYN
/// gets a challenge ACK (RFC 5961), unless it may open a new incarnation
/// ([`TimeWait::accepts_syn`], the caller's to act on).
#[derive(Clone, Copy, Debug)]
pub struct TimeWait {
    irs: u32,
    snd_nxt: u32,
    max_snd_wnd: u32,
    rcv_nxt: u32,
    /// The receive window segments are checked against.
    rcv_wnd: u32,
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
        // A retransmission of the peer's SYN: its SYN dropped, the rest kept.
        let trimmed = without_old_syn(seg, self.irs);
        let ack_now = trimmed.is_some();
        let seg = trimmed.as_ref().unwrap_or(seg);
        if paws_rejects(self.ts_enabled.then_some(self.ts_recent), seg) {
            st.pawsdrop += 1;
            return true;
        }
        if !acceptable(self.rcv_nxt, self.rcv_wnd, seg) {
            if seg.rst {
                st.rcvbadrst += 1;
                return ack_now;
            }
            count_unacceptable(st, self.rcv_nxt, self.rcv_wnd, seg);
            if seg.fin {
                self.deadline = now + wait;
            }
            return true;
        }
        if seg.rst {
            st.rcvbadrst += 1;
            return ack_now;
        }
        if seg.syn {
            st.rcvbadsyn += 1;
            st.challengeack += 1;
            return true;
        }
        let Some(ack) = seg.ack else {
            return ack_now;
        };
        keep_ts_recent(
            self.ts_enabled,
            &mut self.ts_recent,
            self.last_ack_sent,
            seg,
        );
        if lt(self.snd_nxt, ack) {
            st.rcvacktoomuch += 1;
            return true;
        }
        if self.max_snd_wnd > 0 && lt(ack, self.snd_nxt.wrapping_sub(self.max_snd_wnd)) {
            st.rcvacktooold += 1;
            st.challengeack += 1;
            return true;
        }
        if seg.fin {
            self.deadline = now + wait;
            return true;
        }
        ack_now
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

/// One TCP connection.
#[derive(Debug)]
pub struct Tcb {
    cfg: TcpConfig,
    state: State,
    error: Option<TcpError>,
    /// Opened by `connect` (not from a listener).
    active: bool,

    // Send side.
    iss: u32,
    snd_una: u32,
    snd_nxt: u32,
    snd_max: u32,
    snd_wnd: u32,
    /// The largest window the peer has offered (RFC 5961 §5.2's MAX.SND.WND).
    max_snd_wnd: u32,
    snd_wl1: u32,
    snd_wl2: u32,
    /// Shift applied to the peer's advertised window.
    snd_wscale: u8,
    /// Both sides offered window scaling.
    wscale_ok: bool,
    /// Largest segment we send.
    snd_mss: u32,
    /// Sequence number of `sndbuf[0]`.
    buf_seq: u32,
    sndbuf: super::sndbuf::SndBuf,
    /// The application closed (or shut down) its sending side: a FIN follows the data.
    fin_queued: bool,

    // Receive side.
    irs: u32,
    rcv_nxt: u32,
    rcv_wscale: u8,
    rcvbuf: VecDeque<u8>,
    ooo: Vec<OooSeg>,
    /// Buffers of out-of-order segments already delivered, reused for the next ones
    /// (at most `ooo_max_segs`), so loss recovery does not allocate per segment.
    ooo_free: Vec<Vec<u8>>,
    /// The peer's FIN has been received in order.
    rcv_fin: bool,
    last_ack_sent: u32,
    /// Right edge of the window last advertised, to never shrink it.
    rcv_adv: u32,

    // Timestamps.
    ts_enabled: bool,
    ts_recent: u32,
    ts_offset: u32,
    sack_perm: bool,

    // Timers and retransmission.
    rto: Duration,
    srtt: Option<Duration>,
    rttvar: Duration,
    rtx_deadline: Option<Instant>,
    rtx_count: u32,
    /// (sequence timed, when sent) when timestamps are off (Karn).
    timed: Option<(u32, Instant)>,
    persist_deadline: Option<Instant>,
    persist_backoff: u32,
    delack_deadline: Option<Instant>,
    tw_deadline: Option<Instant>,

    // Congestion control (NewReno).
    cwnd: u32,
    ssthresh: u32,
    dupacks: u32,
    /// Limited transmit's allowance beyond `cwnd`, reset by new data acknowledged.
    limited_extra: u32,
    cc: CcState,
    hystart: HyStart,
    ka_deadline: Option<Instant>,
    ka_probes: u32,
    ka_send: bool,
    recover: Option<u32>,
    /// Sender's scoreboard: ranges the peer holds above `snd_una`, sorted, merged.
    sacked: Vec<(u32, u32)>,
    /// Next sequence number a hole retransmission may start from.
    sack_next: u32,
    /// Receiver: the start of the out-of-order segment that arrived last (its block
    /// goes first, RFC 2018 §4).
    last_ooo: u32,

    // What to send next.
    ack_now: bool,
    /// Out-of-order arrivals since the last output: each is owed its own duplicate ACK
    /// (RFC 5681 §4.2), even when a batch delivered several at once.
    dupacks_owed: u32,
    unacked_segs: u32,
    /// Retransmissions owed: the first unacknowledged segment, or with SACK the next
    /// holes below the highest SACKed byte.
    rexmit_owed: u32,
    probe_one: bool,
    /// A reset to send (rare): boxed, so that its hundred bytes are not in every
    /// control block.
    rst_pending: Option<Box<SegOut>>,

    // Loss detection beyond RFC 6675.
    /// Tail loss probe (RFC 8985 §7): when no ACK comes for a PTO while data are out.
    tlp_deadline: Option<Instant>,
    /// A probe is out and unanswered (one per episode).
    tlp_out: bool,
    /// The probe is due in the next output.
    tlp_fire: bool,
    /// Before the first timeout of an episode: (cwnd, ssthresh, our timestamp then),
    /// to undo the reduction if the timeout proves spurious (Eifel, RFC 3522).
    rto_undo: Option<(u32, u32, u32)>,
    /// Holes retransmitted in this recovery, in send order: (start, end, `snd_max` at
    /// the time). A hole still missing when data sent after it has arrived was lost
    /// again (RACK's insight, RFC 8985) and goes once more without waiting for the
    /// timer. At most [`REXMIT_TRACK`] entries.
    rexmits: Vec<(u32, u32, u32)>,
    /// The retransmission timer was armed for a lone segment.
    rtx_lone: bool,
}

/// The longest a peer holds the ACK of a lone segment (RFC 1122 allows 500 ms;
/// Linux and FreeBSD use at most 200 ms): the floor of the timeout for one segment.
const DELACK_ALLOWANCE: Duration = Duration::from_millis(200);

/// Retransmissions remembered per recovery for lost-retransmission detection.
const REXMIT_TRACK: usize = 32;

impl Tcb {
    fn new(cfg: TcpConfig, iss: u32, active: bool) -> Tcb {
        let rcv_wscale = wscale_for(&cfg);
        let mss = u32::from(cfg.mss.max(64));
        Tcb {
            cfg,
            state: State::Closed,
            error: None,
            active,
            iss,
            snd_una: iss,
            snd_nxt: iss,
            snd_max: iss,
            snd_wnd: 0,
            max_snd_wnd: 0,
            snd_wl1: 0,
            snd_wl2: 0,
            snd_wscale: 0,
            wscale_ok: false,
            snd_mss: 536.min(mss),
            buf_seq: iss.wrapping_add(1),
            sndbuf: super::sndbuf::SndBuf::default(),
            fin_queued: false,
            irs: 0,
            rcv_nxt: 0,
            rcv_wscale,
            rcvbuf: VecDeque::new(),
            ooo: Vec::new(),
            ooo_free: Vec::new(),
            rcv_fin: false,
            last_ack_sent: 0,
            rcv_adv: 0,
            ts_enabled: cfg.timestamps,
            ts_recent: 0,
            ts_offset: iss.rotate_left(13) ^ 0x5bd1_e995,
            sack_perm: false,
            rto: cfg.init_rto,
            srtt: None,
            rttvar: Duration::ZERO,
            rtx_deadline: None,
            rtx_count: 0,
            timed: None,
            persist_deadline: None,
            persist_backoff: 0,
            delack_deadline: None,
            tw_deadline: None,
            cwnd: 0,
            ssthresh: u32::MAX,
            dupacks: 0,
            limited_extra: 0,
            cc: CcState::new(cfg.cc),
            hystart: HyStart::new(cfg.hystart),
            ka_deadline: None,
            ka_probes: 0,
            ka_send: false,
            recover: None,
            sacked: Vec::new(),
            sack_next: iss,
            last_ooo: 0,
            ack_now: false,
            dupacks_owed: 0,
            unacked_segs: 0,
            rexmit_owed: 0,
            probe_one: false,
            rst_pending: None,
            tlp_deadline: None,
            tlp_out: false,
            tlp_fire: false,
            rto_undo: None,
            rexmits: Vec::new(),
            rtx_lone: false,
        }
    }

    /// An active open: the SYN goes out at the next [`Tcb::output`].
    pub fn connect(cfg: TcpConfig, iss: u32, st: &mut TcpStat) -> Tcb {
        let mut t = Tcb::new(cfg, iss, true);
        t.state = State::SynSent;
        st.connattempt += 1;
        t
    }

    /// A closed control block that holds nothing (no buffers, no timers), the
    /// placeholder in a connection box kept for reuse.
    pub(crate) fn vacant() -> Tcb {
        Tcb::new(TcpConfig::default(), 0, false)
    }

    /// A passive open from a listener's SYN: the SYN-ACK goes out at the next
    /// [`Tcb::output`]. `None` if `syn` is not a plain SYN.
    pub fn accept(cfg: TcpConfig, iss: u32, syn: &SegIn<'_>) -> Option<Tcb> {
        if !syn.syn || syn.rst || syn.ack.is_some() {
            return None;
        }
        let mut t = Tcb::new(cfg, iss, false);
        t.state = State::SynReceived;
        t.take_syn_options(syn);
        t.irs = syn.seq;
        t.rcv_nxt = syn.seq.wrapping_add(1);
        t.rcv_adv = t.rcv_nxt;
        t.last_ack_sent = t.rcv_nxt;
        t.snd_wnd = u32::from(syn.wnd);
        t.snd_wl1 = syn.seq;
        Some(t)
    }

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
            irs: self.irs,
            snd_nxt: self.snd_max,
            max_snd_wnd: self.max_snd_wnd,
            rcv_nxt: self.rcv_nxt,
            rcv_wnd: wnd_adv,
            wnd: (wnd_adv >> self.rcv_wscale).min(65_535) as u16,
            last_ack_sent: self.last_ack_sent,
            ts_enabled: self.ts_enabled,
            ts_recent: self.ts_recent,
            ts_offset: self.ts_offset,
            deadline,
        })
    }

    /// A connection rebuilt from the ACK of a SYN cookie (RFC 4987): established at
    /// once, with the MSS the cookie carried and no other options (the SYN-ACK offered
    /// none).
    pub fn from_cookie(
        cfg: TcpConfig,
        iss: u32,
        irs: u32,
        mss: u16,
        wnd: u16,
        opts: Option<CookieOpts>,
    ) -> Tcb {
        let mut t = Tcb::new(cfg, iss, false);
        t.state = State::Established;
        t.snd_una = iss.wrapping_add(1);
        t.snd_nxt = t.snd_una;
        t.snd_max = t.snd_una;
        t.sack_next = t.snd_una;
        t.irs = irs;
        t.rcv_nxt = irs.wrapping_add(1);
        t.rcv_adv = t.rcv_nxt.wrapping_add(cfg.rcvbuf.min(65_535) as u32);
        t.last_ack_sent = t.rcv_nxt;
        t.snd_mss = u32::from(mss.max(64)).min(u32::from(cfg.mss.max(64)));
        t.snd_wscale = 0;
        t.rcv_wscale = 0;
        t.ts_enabled = false;
        t.sack_perm = false;
        if let Some(o) = opts.filter(|_| cfg.timestamps) {
            // The SYN-ACK offered what the peer's SYN did; the echoed timestamp says
            // what that was (Linux's encoding).
            t.ts_enabled = true;
            t.ts_recent = o.ts.0;
            t.sack_perm = cfg.sack && o.sack;
            if let (true, Some(ws)) = (cfg.window_scaling, o.wscale) {
                t.snd_wscale = ws.min(14);
                t.rcv_wscale = wscale_for(&cfg);
                t.wscale_ok = true;
            }
        }
        t.snd_wnd = u32::from(wnd) << t.snd_wscale;
        t.snd_wl1 = irs;
        t.snd_wl2 = t.snd_una;
        t.cwnd = cfg.init_cwnd_segs.max(1) * t.snd_mss;
        t
    }

    fn take_syn_options(&mut self, syn: &SegIn<'_>) {
        let peer_mss = u32::from(syn.mss.unwrap_or(536)).max(64);
        self.snd_mss = peer_mss.min(u32::from(self.cfg.mss.max(64)));
        match (self.cfg.window_scaling, syn.wscale) {
            (true, Some(s)) => {
                self.snd_wscale = s.min(14);
                self.wscale_ok = true;
            }
            _ => {
                self.snd_wscale = 0;
                self.rcv_wscale = 0;
            }
        }
        self.ts_enabled = self.cfg.timestamps && syn.ts.is_some();
        if let Some((tsval, _)) = syn.ts {
            self.ts_recent = tsval;
        }
        self.sack_perm = self.cfg.sack && syn.sack_perm;
        self.cwnd = self.cfg.init_cwnd_segs.max(1) * self.snd_mss;
    }

    /// RFC 8201 §5.4 (RFC 1191 §6.4 for IPv4): the path cannot carry segments of the
    /// current size; from now on they are at most `mss` bytes (options included),
    /// and what is in flight goes again at once, resized — it was dropped for its
    /// size, not for congestion, so the congestion window stays. Returns whether
    /// anything changed (a larger or stale `mss` is ignored).
    pub fn path_mtu(&mut self, mss: u32, st: &mut TcpStat) -> bool {
        // Below 536 bytes lies IPv4's minimum datagram; an MSS of less is a forgery
        // or a broken path, not something to shrink to (Linux's tcp_min_snd_mss: 48).
        let mss = mss.max(536);
        if mss >= self.snd_mss || !self.state.synchronized() {
            return false;
        }
        self.snd_mss = mss;
        st.mturesent += 1;
        self.rexmits.clear();
        self.timed = None;
        self.sack_next = self.snd_una;
        self.snd_nxt = self.snd_una;
        true
    }

    /// Sets the offset of our timestamp clock (before the first segment goes out);
    /// by default it derives from the ISS.
    pub fn set_ts_offset(&mut self, offset: u32) {
        self.ts_offset = offset;
    }

    pub fn state(&self) -> State {
        self.state
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

    pub fn error(&self) -> Option<TcpError> {
        self.error
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
    fn data_room(&self) -> u32 {
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

    pub fn cwnd(&self) -> u32 {
        self.cwnd
    }

    pub fn rto(&self) -> Duration {
        self.rto
    }

    /// Bytes the application may still queue.
    pub fn send_space(&self) -> usize {
        if self.fin_queued || matches!(self.state, State::Closed | State::TimeWait) {
            return 0;
        }
        self.cfg.sndbuf.saturating_sub(self.sndbuf.len())
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

    /// Hands up to `max` received bytes to `f` in place (one or two slices of the
    /// receive buffer); `f` returns how many it took. No intermediate copy.
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
        self.consumed(n);
        n
    }

    /// Drops `n` bytes the application has taken and announces a grown window.
    fn consumed(&mut self, n: usize) {
        self.rcvbuf.drain(..n);
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

    /// Aborts with a reset (SO_LINGER 0).
    pub fn abort(&mut self) {
        if self.state.synchronized() || self.state == State::SynReceived {
            self.rst_pending = Some(Box::new(SegOut {
                seq: self.snd_nxt,
                rst: true,
                ..SegOut::default()
            }));
        }
        self.enter_closed();
    }

    fn enter_closed(&mut self) {
        self.state = State::Closed;
        self.rtx_deadline = None;
        self.persist_deadline = None;
        self.delack_deadline = None;
        self.tw_deadline = None;
        self.ka_deadline = None;
    }

    /// Window still open from what we advertised (never negative).
    fn adv_room(&self) -> u32 {
        if lt(self.rcv_nxt, self.rcv_adv) {
            diff(self.rcv_adv, self.rcv_nxt)
        } else {
            0
        }
    }

    fn rcv_window(&self) -> u32 {
        self.window_with(self.rcvbuf.len())
    }

    /// The receive window with `held` bytes in the receive buffer: its free room, up
    /// to what the window field can say at our scale.
    fn window_with(&self, held: usize) -> u32 {
        let free = self.cfg.rcvbuf.saturating_sub(held);
        let max = 65_535usize << self.rcv_wscale;
        free.min(max) as u32
    }

    fn tsval(&self, now: Instant) -> u32 {
        tsval(now, self.ts_offset)
    }

    /// When [`Tcb::output`] has timers to run.
    pub fn poll_at(&self) -> Option<Instant> {
        [
            self.rtx_deadline,
            self.persist_deadline,
            self.delack_deadline,
            self.tw_deadline,
            self.ka_deadline,
            self.tlp_deadline,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Whether output has something to send right now without a timer.
    pub fn wants_output(&self) -> bool {
        self.ack_now || self.rexmit_owed > 0 || self.rst_pending.is_some() || self.can_send_data()
    }

    fn fin_seq(&self) -> u32 {
        self.buf_seq.wrapping_add(self.sndbuf.len() as u32)
    }

    fn flight(&self) -> u32 {
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

    /// In loss recovery with a SACK scoreboard.
    fn sack_recovery(&self) -> bool {
        self.recover.is_some() && self.sack_perm
    }

    /// RFC 6675's pipe, simplified: the bytes beyond the highest SACKed byte (in
    /// flight), plus the retransmissions not yet delivered. Holes below the highest
    /// SACKed byte that have not been retransmitted count as lost.
    fn pipe(&self) -> u32 {
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

    /// Runs due timers, then appends every segment to send now to `out`.
    pub fn output(&mut self, now: Instant, st: &mut TcpStat, out: &mut Vec<SegOut>) {
        self.run_timers(now, st);
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
                if self.send_allowance() < self.seg_size().min(self.snd_wnd.max(1)) {
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
        let mut sent_any = false;
        for _ in 0..4096 {
            if !self.send_one(now, st, out) {
                break;
            }
            sent_any = true;
        }
        if !sent_any && self.ack_now && self.state != State::SynSent {
            let seg = self.header(now, self.snd_nxt);
            st.sndacks += 1;
            self.push(seg, st, out);
        }
        self.arm_persist(now);
    }

    fn run_timers(&mut self, now: Instant, st: &mut TcpStat) {
        if self.tw_deadline.is_some_and(|t| t <= now) {
            self.enter_closed();
            st.closed += 1;
            return;
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
        if self.tlp_deadline.is_some_and(|t| t <= now) {
            self.tlp_deadline = None;
            if self.recover.is_none()
                && !self.tlp_out
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
            self.probe_one = true;
            self.persist_backoff = (self.persist_backoff + 1).min(8);
        }
        if self.ka_deadline.is_some_and(|t| t <= now) {
            self.ka_deadline = None;
            st.keeptimeo += 1;
            if self.snd_una != self.snd_max {
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

    /// Restarts the idle clock of keepalive (after hearing from the peer).
    fn arm_keepalive(&mut self, now: Instant) {
        self.ka_deadline = match (self.cfg.keepalive, self.state) {
            (Some(idle), State::Established | State::CloseWait | State::FinWait2) => {
                Some(now + idle)
            }
            _ => None,
        };
    }

    /// Turns keepalive on (with this idle time) or off.
    pub fn set_keepalive(&mut self, idle: Option<Duration>, now: Instant) {
        self.cfg.keepalive = idle;
        self.ka_probes = 0;
        self.arm_keepalive(now);
    }

    /// `TCP_NODELAY`.
    pub fn set_nodelay(&mut self, on: bool) {
        self.cfg.nodelay = on;
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
        if self.rtx_count == 1 && self.ts_enabled && self.state.synchronized() {
            self.rto_undo = Some((self.cwnd, self.ssthresh, self.tsval(now)));
        }
        self.rexmits.clear();
        if self.state.synchronized() || self.state == State::SynReceived {
            let mss = self.snd_mss;
            self.ssthresh = self.cc.on_congestion(self.cwnd, self.flight(), mss);
            self.cc.on_timeout();
            self.hystart.stop();
            self.cwnd = mss;
        }
        self.dupacks = 0;
        self.recover = None;
        self.timed = None;
        self.sack_next = self.snd_una;
        // Go back N (skipping what the peer has SACKed): everything from the first unacknowledged byte goes again.
        self.snd_nxt = self.snd_una;
    }

    fn arm_persist(&mut self, now: Instant) {
        // Data wait, the window is shut, and nothing but (at most) a probe is out.
        let pending = diff(self.fin_seq(), self.snd_una) > 0 && lt(self.snd_una, self.fin_seq());
        let stalled = self.snd_wnd == 0
            && pending
            && diff(self.snd_nxt, self.snd_una) <= 1
            && self.state.synchronized();
        if stalled {
            if self.persist_deadline.is_none() && self.rtx_deadline.is_none() {
                let d = (self.rto * (1 << self.persist_backoff))
                    .clamp(self.cfg.min_rto, self.cfg.max_rto);
                self.persist_deadline = Some(now + d);
            }
        } else {
            self.persist_deadline = None;
            if self.snd_wnd > 0 {
                self.persist_backoff = 0;
            }
        }
    }

    /// The window to advertise when `wnd` is free: never less than what was already
    /// offered (RFC 9293 §3.8.6.2.2).
    fn offered(&self, wnd: u32) -> u32 {
        wnd.max(self.adv_room())
    }

    /// A header with our current ACK, window and timestamp.
    fn header(&mut self, now: Instant, seq: u32) -> SegOut {
        let wnd_adv = self.offered(self.rcv_window());
        SegOut {
            seq,
            ack: self.rcv_nxt,
            ack_flag: true,
            wnd: (wnd_adv >> self.rcv_wscale).min(65_535) as u16,
            ts: self.ts_enabled.then(|| (self.tsval(now), self.ts_recent)),
            sack: self.sack_blocks(),
            ..SegOut::default()
        }
    }

    fn push(&mut self, seg: SegOut, st: &mut TcpStat, out: &mut Vec<SegOut>) {
        if seg.ack_flag {
            self.last_ack_sent = seg.ack;
            let shift = if seg.syn { 0 } else { self.rcv_wscale };
            let edge = seg.ack.wrapping_add(u32::from(seg.wnd) << shift);
            if lt(self.rcv_adv, edge) {
                self.rcv_adv = edge;
            }
            self.ack_now = false;
            self.unacked_segs = 0;
            self.delack_deadline = None;
        }
        st.sndtotal += 1;
        out.push(seg);
    }

    /// Arms the retransmission timer. A lone segment may sit in the peer's
    /// delayed-ACK timer, so its timeout allows for that ([`DELACK_ALLOWANCE`]); once
    /// more is in flight the peer acknowledges at once and the plain RTO applies.
    fn arm_rtx(&mut self, now: Instant) {
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

    /// Sends the next new (or go-back-N) segment, if the windows and Nagle allow.
    fn send_one(&mut self, now: Instant, st: &mut TcpStat, out: &mut Vec<SegOut>) -> bool {
        match self.state {
            State::SynSent | State::SynReceived => {
                if self.snd_nxt != self.iss {
                    return false;
                }
                let mut seg = self.header(now, self.iss);
                seg.syn = true;
                seg.mss = Some(self.cfg.mss);
                if self.state == State::SynSent {
                    seg.ack_flag = false;
                    seg.ack = 0;
                    seg.ts = self.cfg.timestamps.then(|| (self.tsval(now), 0));
                    seg.wscale = self.cfg.window_scaling.then_some(self.rcv_wscale);
                    seg.sack_perm = self.cfg.sack;
                    seg.wnd = self.rcv_window().min(65_535) as u16;
                } else {
                    seg.wscale =
                        (self.cfg.window_scaling && self.wscale_ok).then_some(self.rcv_wscale);
                    seg.sack_perm = self.sack_perm;
                    seg.wnd = self.rcv_window().min(65_535) as u16;
                }
                if diff(self.snd_max, self.iss) > 0 {
                    st.sndrexmitpack += 1;
                }
                self.snd_nxt = self.iss.wrapping_add(1);
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
            State::Established
            | State::CloseWait
            | State::FinWait1
            | State::Closing
            | State::LastAck => {
                while let Some(r) = self
                    .sacked
                    .iter()
                    .copied()
                    .find(|r| le(r.0, self.snd_nxt) && lt(self.snd_nxt, r.1))
                {
                    self.snd_nxt = r.1;
                }
                let end = self.fin_seq();
                let unsent = diff(end, self.snd_nxt);
                if lt(end, self.snd_nxt) {
                    // Only the FIN is beyond, and it has been sent.
                    return false;
                }
                let allowance = self.send_allowance();
                let room = self.data_room();
                // With segmentation offload, whole segments up to what the device
                // takes, for new data outside recovery ([`Tcb::tso_burst`]; the send
                // window and cwnd still bound it below).
                let burst = if self.cfg.tso_max > room
                    && self.recover.is_none()
                    && self.snd_nxt == self.snd_max
                {
                    self.tso_burst(room)
                } else {
                    room
                };
                let mut len = unsent.min(burst).min(allowance);
                // Resending after a timeout: not what the peer has SACKed.
                if lt(self.snd_nxt, self.snd_max) {
                    if let Some(r) = self.sacked.iter().find(|r| lt(self.snd_nxt, r.0)) {
                        len = len.min(diff(r.0, self.snd_nxt));
                    }
                }
                let fin_here = self.fin_queued && self.snd_nxt.wrapping_add(len) == end;
                if len == 0 && !(fin_here && unsent == 0) {
                    return false;
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
                if burst > room
                    && len < burst
                    && (len < unsent || len > room)
                    && self.flight() > 0
                    && allowance < self.snd_wnd.min(self.cwnd) / 3
                    && !fin_here
                {
                    return false;
                }
                // Nagle: a short segment waits while data are unacknowledged, unless it
                // ends the stream.
                if len < room && !self.cfg.nodelay && self.snd_una != self.snd_nxt && !fin_here {
                    return false;
                }
                let mut seg = self.header(now, self.snd_nxt);
                seg.data_len = len as usize;
                if len > room {
                    seg.tso_segsz = room.min(u32::from(u16::MAX)) as u16;
                }
                seg.fin = fin_here;
                seg.psh = len > 0 && self.snd_nxt.wrapping_add(len) == end;
                let rexmit = lt(self.snd_nxt, self.snd_max);
                if rexmit {
                    st.sndrexmitpack += 1;
                    st.sndrexmitbyte += u64::from(len);
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
                self.push(seg, st, out);
                true
            }
            _ => false,
        }
    }

    /// The next hole to retransmit: with SACK the first range at or after `sack_next`
    /// that the peer lacks below its highest SACKed byte; without, the segment at
    /// `snd_una` (once per call of the loss recovery).
    fn next_hole(&self) -> Option<(u32, u32)> {
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
    fn send_rexmit(&mut self, now: Instant, st: &mut TcpStat, out: &mut Vec<SegOut>) -> bool {
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

    /// Arms the tail loss probe: PTO = 2·SRTT (at least 10 ms, as FreeBSD's RACK
    /// stack), plus a delayed-ACK allowance when one segment is out; never past the
    /// retransmission timer.
    fn arm_tlp(&mut self, now: Instant) {
        if self.tlp_out || self.recover.is_some() || !self.sack_perm {
            return;
        }
        let Some(srtt) = self.srtt else {
            return;
        };
        let mut pto = (srtt * 2).max(Duration::from_millis(10));
        if self.flight() <= self.seg_size() {
            pto = pto.max(srtt * 3 / 2 + Duration::from_millis(200));
        }
        let at = now + pto;
        self.tlp_deadline = match self.rtx_deadline {
            Some(r) if r <= at => None,
            _ => Some(at),
        };
    }

    /// The probe: a new segment if the peer's window has room (cwnd notwithstanding),
    /// else the last segment sent again; either way the peer answers at once and its
    /// ACK (with SACK) starts recovery without waiting for the timer.
    fn send_tlp(&mut self, now: Instant, st: &mut TcpStat, out: &mut Vec<SegOut>) {
        let end = self.fin_seq();
        let unsent = lt(self.snd_nxt, end) && self.snd_nxt == self.snd_max;
        let peer_room = self
            .snd_wnd
            .saturating_sub(diff(self.snd_nxt, self.snd_una));
        if unsent && peer_room >= self.seg_size().min(diff(end, self.snd_nxt)) {
            self.limited_extra = self.limited_extra.saturating_add(self.seg_size());
            if self.send_one(now, st, out) {
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
        st.sndrexmitpack += 1;
        st.sndrexmitbyte += u64::from(len);
        self.push(seg, st, out);
        self.arm_rtx(now);
    }

    /// Lost retransmissions: a hole retransmitted before data that has since
    /// arrived (SACKed or acknowledged), but still missing itself, was lost again.
    fn detect_lost_rexmits(&mut self, st: &mut TcpStat) {
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
    fn sack_update(&mut self, seg: &SegIn<'_>) -> u32 {
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

    fn sacked_bytes(&self) -> u32 {
        self.sacked.iter().map(|r| diff(r.1, r.0)).sum()
    }

    /// Forgets scoreboard ranges at or below `ack`.
    fn sack_prune(&mut self, ack: u32) {
        self.sacked.retain(|r| lt(ack, r.1));
        if let Some(first) = self.sacked.first_mut() {
            if lt(first.0, ack) {
                first.0 = ack;
            }
        }
    }

    /// SACK blocks describing the out-of-order queue, the latest arrival's first.
    fn sack_blocks(&self) -> [Option<(u32, u32)>; 4] {
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

    /// A zero-window probe: the first unacknowledged byte, beyond what the peer allows.
    fn send_probe(&mut self, now: Instant, st: &mut TcpStat, out: &mut Vec<SegOut>) {
        let end = self.fin_seq();
        if !lt(self.snd_una, end) {
            return;
        }
        let mut seg = self.header(now, self.snd_una);
        seg.data_len = 1;
        st.sndprobe += 1;
        if diff(self.snd_nxt, self.snd_una) == 0 {
            self.snd_nxt = self.snd_una.wrapping_add(1);
        }
        if lt(self.snd_max, self.snd_nxt) {
            self.snd_max = self.snd_nxt;
        }
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
    pub fn payload(&self, seg: &SegOut) -> super::sndbuf::Pieces<'_> {
        let off = diff(seg.seq, self.buf_seq) as usize;
        self.sndbuf.pieces(off, seg.data_len)
    }

    /// Processes one received segment.
    pub fn input(&mut self, seg: &SegIn<'_>, now: Instant, st: &mut TcpStat) {
        self.input_to(seg, now, st, &mut |_| 0);
    }

    /// [`Tcb::input`] with a reader waiting at `direct`: in-order data that finds the
    /// receive buffer empty is offered to `direct` first, which takes what it can
    /// (returning how much), and only the rest is buffered. One copy fewer on the
    /// way to the application, as Linux's old `ucopy` to a waiting reader.
    pub fn input_to(
        &mut self,
        seg: &SegIn<'_>,
        now: Instant,
        st: &mut TcpStat,
        direct: &mut dyn FnMut(&[u8]) -> usize,
    ) {
        st.rcvtotal += 1;
        match self.state {
            State::Closed => {
                st.rcvafterclose += 1;
            }
            State::SynSent => self.input_syn_sent(seg, now, st),
            _ => self.input_synchronized(seg, now, st, direct),
        }
        if self.cfg.keepalive.is_some() && !seg.rst {
            self.ka_probes = 0;
            self.arm_keepalive(now);
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
        self.irs = seg.seq;
        self.rcv_nxt = seg.seq.wrapping_add(1);
        self.rcv_adv = self.rcv_nxt;
        self.last_ack_sent = self.rcv_nxt;
        self.snd_wnd = u32::from(seg.wnd);
        self.max_snd_wnd = self.snd_wnd;
        self.snd_wl1 = seg.seq;
        match seg.ack {
            Some(a) => {
                self.snd_wl2 = a;
                self.ack_advance(a, seg, now, st);
                self.state = State::Established;
                st.connects += 1;
                self.ack_now = true;
            }
            None => {
                // Simultaneous open: answer with SYN-ACK.
                self.state = State::SynReceived;
                self.snd_nxt = self.iss;
                self.rtx_deadline = None;
            }
        }
    }

    fn input_synchronized(
        &mut self,
        seg: &SegIn<'_>,
        now: Instant,
        st: &mut TcpStat,
        direct: &mut dyn FnMut(&[u8]) -> usize,
    ) {
        // A SYN we have already received (the peer's SYN-ACK in a simultaneous open,
        // or a retransmission because our ACK was lost): drop the SYN, keep the rest,
        // and make sure the peer hears our ACK (as BSD's tcp_input does).
        let trimmed = without_old_syn(seg, self.irs);
        self.ack_now |= trimmed.is_some();
        let seg = trimmed.as_ref().unwrap_or(seg);
        if paws_rejects(self.ts_enabled.then_some(self.ts_recent), seg) {
            st.pawsdrop += 1;
            self.ack_now = true;
            return;
        }

        // Acceptability (RFC 9293 §3.10.7.4).
        let rcv_wnd = self.offered(self.rcv_window());
        let seq = seg.seq;
        if !acceptable(self.rcv_nxt, rcv_wnd, seg) {
            if seg.rst {
                st.rcvbadrst += 1;
                return;
            }
            count_unacceptable(st, self.rcv_nxt, rcv_wnd, seg);
            self.ack_now = true;
            if self.state == State::TimeWait && seg.fin {
                self.tw_deadline = Some(now + self.cfg.time_wait);
            }
            return;
        }

        // RST (RFC 5961 §3); in TIME_WAIT ignored, against assassination (RFC 1337).
        if seg.rst && self.state == State::TimeWait {
            st.rcvbadrst += 1;
            return;
        }
        if seg.rst {
            if seq == self.rcv_nxt {
                if self.state == State::SynReceived && !self.active {
                    st.drops += 1;
                } else {
                    self.error = Some(TcpError::Reset);
                    st.drops += 1;
                }
                self.enter_closed();
            } else {
                st.rcvbadrst += 1;
                st.challengeack += 1;
                self.ack_now = true;
            }
            return;
        }

        // SYN in a synchronized state (RFC 5961 §4): challenge ACK.
        if seg.syn && self.state != State::SynReceived {
            st.rcvbadsyn += 1;
            st.challengeack += 1;
            self.ack_now = true;
            return;
        }
        let Some(ack) = seg.ack else {
            return;
        };

        keep_ts_recent(
            self.ts_enabled,
            &mut self.ts_recent,
            self.last_ack_sent,
            seg,
        );

        if self.state == State::SynReceived {
            if lt(self.snd_una, ack) && le(ack, self.snd_max) {
                self.state = State::Established;
                st.accepts += 1;
                self.snd_wnd = u32::from(seg.wnd) << self.snd_wscale;
                self.max_snd_wnd = self.snd_wnd;
                self.snd_wl1 = seq;
                self.snd_wl2 = ack;
            } else {
                self.rst_pending = reset_for(seg).map(Box::new);
                return;
            }
        }

        // ACK processing.
        if lt(self.snd_max, ack) {
            st.rcvacktoomuch += 1;
            self.ack_now = true;
            return;
        }
        // RFC 5961 §5.2: an ACK older than anything the peer's largest window could
        // still be acknowledging is blind injection or an old duplicate: drop the
        // segment (its data too) and send a challenge ACK.
        if self.max_snd_wnd > 0 && lt(ack, self.snd_una.wrapping_sub(self.max_snd_wnd)) {
            st.rcvacktooold += 1;
            st.challengeack += 1;
            self.ack_now = true;
            return;
        }
        let wnd = u32::from(seg.wnd) << self.snd_wscale;
        let newly_sacked = self.sack_update(seg);
        if lt(self.snd_una, ack) {
            self.ack_advance(ack, seg, now, st);
        } else if ack == self.snd_una
            && self.snd_max != self.snd_una
            && (newly_sacked > 0
                || (seg.payload.is_empty() && !seg.fin && wnd == self.snd_wnd && wnd != 0))
        {
            // RFC 5681's duplicate ACK, or RFC 6675's: one that SACKs new data.
            st.rcvdupack += 1;
            self.on_dupack(st);
        }
        if self.recover.is_some() {
            self.detect_lost_rexmits(st);
        }
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

        // Our FIN acknowledged?
        let fin_acked =
            self.fin_queued && lt(self.fin_seq(), self.snd_max) && self.snd_una == self.snd_max;
        if fin_acked {
            match self.state {
                State::FinWait1 => self.state = State::FinWait2,
                State::Closing => self.enter_time_wait(now),
                State::LastAck => {
                    st.closed += 1;
                    self.enter_closed();
                    return;
                }
                _ => {}
            }
        }
        if self.state == State::TimeWait {
            if seg.fin {
                self.ack_now = true;
                self.tw_deadline = Some(now + self.cfg.time_wait);
            }
            return;
        }

        // Data and FIN.
        if !seg.payload.is_empty() || seg.fin {
            self.receive_data(seg, now, st, direct);
        }
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

    fn enter_time_wait(&mut self, now: Instant) {
        self.state = State::TimeWait;
        self.ka_deadline = None;
        self.rtx_deadline = None;
        self.persist_deadline = None;
        self.delack_deadline = None;
        self.tw_deadline = Some(now + self.cfg.time_wait);
    }

    fn ack_advance(&mut self, ack: u32, seg: &SegIn<'_>, now: Instant, st: &mut TcpStat) {
        let acked = diff(ack, self.snd_una);
        // Bytes of the send buffer acknowledged (the SYN and FIN are not in it).
        let data_end = self.fin_seq();
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
                // its ACK of that lone segment for its delayed-ACK time.
                self.cwnd = self.ssthresh.max(mss);
                self.recover = None;
                self.dupacks = 0;
                self.rexmits.clear();
            }
            None => {
                self.dupacks = 0;
                if self.cwnd < self.ssthresh {
                    let how = self.hystart.on_ack(ack, self.snd_nxt, st);
                    if how == SlowStartAck::EnterAvoidance {
                        self.ssthresh = self.cwnd;
                    }
                    self.cwnd = self.cwnd.saturating_add(how.growth(acked, mss));
                } else {
                    let srtt = self.srtt.unwrap_or(Duration::ZERO);
                    let inc = self.cc.avoid(now, self.cwnd, acked, mss, srtt);
                    self.cwnd = self.cwnd.saturating_add(inc);
                }
            }
        }

        self.snd_una = ack;
        self.limited_extra = 0;
        self.sack_prune(ack);
        if lt(self.snd_nxt, self.snd_una) {
            self.snd_nxt = self.snd_una;
        }
        self.rtx_count = 0;
        self.rtx_deadline = None;
        self.tlp_deadline = None;
        if self.snd_una != self.snd_max {
            self.arm_rtx(now);
            self.arm_tlp(now);
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

    fn on_dupack(&mut self, st: &mut TcpStat) {
        self.dupacks += 1;
        let mss = self.snd_mss;
        // Early retransmit (RFC 5827): with nothing new to send and fewer than four
        // segments out, three duplicate ACKs may never come.
        let unsent = lt(self.snd_max, self.fin_seq());
        let out_segs = self.flight().div_ceil(self.seg_size().max(1));
        let dupthresh = if unsent {
            3
        } else {
            out_segs.saturating_sub(1).clamp(1, 3)
        };
        // RFC 6675's IsLost: enough SACKed above the first hole counts as the
        // duplicate ACKs that a small window never produces.
        let lost = self.dupacks >= dupthresh
            || (self.sack_perm && self.sacked_bytes() > (dupthresh - 1) * mss);
        let scoreboard = self.sack_perm && !self.sacked.is_empty();
        match self.recover {
            None if !lost => {
                // Limited transmit (RFC 3042): each of the first two duplicate ACKs
                // lets one new segment out, to keep the ACK clock running.
                self.limited_extra = self.limited_extra.saturating_add(self.seg_size());
            }
            None => {
                st.fastrexmit += 1;
                self.ssthresh = self.cc.on_congestion(self.cwnd, self.flight(), mss);
                self.hystart.stop();
                // With SACK the pipe, not an inflated window, says what may go out.
                self.cwnd = if scoreboard {
                    self.ssthresh
                } else {
                    self.ssthresh + 3 * mss
                };
                self.rexmits.clear();
                self.recover = Some(self.snd_max);
                self.sack_next = self.snd_una;
                self.rexmit_owed += 1;
                self.timed = None;
            }
            // NewReno inflation; with a scoreboard the pipe governs (see `output`).
            Some(_) if !scoreboard => self.cwnd = self.cwnd.saturating_add(mss),
            Some(_) => {}
        }
    }

    fn receive_data(
        &mut self,
        seg: &SegIn<'_>,
        now: Instant,
        st: &mut TcpStat,
        direct: &mut dyn FnMut(&[u8]) -> usize,
    ) {
        if !self.state.can_receive() {
            return;
        }
        let mut seq = seg.seq;
        let mut data = seg.payload;
        let mut fin = seg.fin;
        // Trim what we already have.
        if lt(seq, self.rcv_nxt) {
            let dup = diff(self.rcv_nxt, seq) as usize;
            if dup >= data.len() {
                // Only a FIN (or nothing) is new.
                st.rcvpartduppack += u64::from(!data.is_empty());
                data = Payload::default();
                seq = self.rcv_nxt;
                if !fin || diff(self.rcv_nxt, seg.seq) as usize > seg.payload.len() {
                    fin = false;
                }
            } else {
                st.rcvpartduppack += 1;
                st.rcvdupbyte += dup as u64;
                data = data.skip(dup);
                seq = self.rcv_nxt;
            }
        }
        // Trim what does not fit the window.
        let room = self.offered(self.rcv_window()) as usize;
        let off = diff(seq, self.rcv_nxt) as usize;
        if off + data.len() > room {
            let keep = room.saturating_sub(off);
            data = data.take(keep);
            fin = false;
            st.rcvpackafterwin += 1;
        }
        if seq == self.rcv_nxt {
            // Straight to a waiting reader while nothing is buffered ahead of it.
            let mut n = 0;
            if self.rcvbuf.is_empty() {
                for piece in data.pieces() {
                    let k = direct(piece).min(piece.len());
                    n += k;
                    if k < piece.len() {
                        break;
                    }
                }
            }
            let space = self.cfg.rcvbuf.saturating_sub(self.rcvbuf.len());
            let k = (data.len() - n).min(space);
            for piece in data.skip(n).take(k).pieces() {
                self.rcvbuf.extend(piece);
            }
            n += k;
            self.rcv_nxt = self.rcv_nxt.wrapping_add(n as u32);
            if n > 0 {
                st.rcvpack += 1;
                st.rcvbyte += n as u64;
            }
            if n < data.len() {
                fin = false;
            }
            let had_ooo = !self.ooo.is_empty();
            if fin {
                self.take_fin(now);
            } else {
                self.drain_ooo(now, st);
            }
            // A segment larger than our MSS (from a sender with segmentation
            // offload, received whole) counts as the wire segments it stands for,
            // so every other one is still acknowledged at once (RFC 1122 §4.2.3.2).
            self.unacked_segs += (n as u32).div_ceil(u32::from(self.cfg.mss.max(1))).max(1);
            if had_ooo || fin || self.unacked_segs >= 2 || self.cfg.delack.is_zero() {
                self.ack_now = true;
            } else if self.delack_deadline.is_none() {
                self.delack_deadline = Some(now + self.cfg.delack);
            }
        } else {
            // Out of order: keep it (bounded) and send a duplicate ACK at once.
            st.rcvoopack += 1;
            st.rcvoobyte += data.len() as u64;
            self.dupacks_owed += 1;
            self.last_ooo = seq;
            if self.ooo.len() < self.cfg.ooo_max_segs && (!data.is_empty() || fin) {
                if !self
                    .ooo
                    .iter()
                    .any(|o| o.seq == seq && o.data.len() >= data.len())
                {
                    let pos = self
                        .ooo
                        .iter()
                        .position(|o| lt(seq, o.seq))
                        .unwrap_or(self.ooo.len());
                    let mut buf = self.ooo_free.pop().unwrap_or_default();
                    buf.clear();
                    for piece in data.pieces() {
                        buf.extend_from_slice(piece);
                    }
                    self.ooo.insert(
                        pos,
                        OooSeg {
                            seq,
                            data: buf,
                            fin,
                        },
                    );
                }
            } else {
                st.rcvoodrop += 1;
            }
            self.ack_now = true;
        }
    }

    fn drain_ooo(&mut self, now: Instant, st: &mut TcpStat) {
        loop {
            let Some(i) = self.ooo.iter().position(|o| le(o.seq, self.rcv_nxt)) else {
                return;
            };
            let o = self.ooo.remove(i);
            let skip = diff(self.rcv_nxt, o.seq) as usize;
            let (n, complete) = if skip > o.data.len() || (skip == o.data.len() && !o.fin) {
                (0, false)
            } else {
                let new = &o.data[skip..];
                let space = self.cfg.rcvbuf.saturating_sub(self.rcvbuf.len());
                let n = new.len().min(space);
                self.rcvbuf.extend(&new[..n]);
                (n, n == new.len())
            };
            self.rcv_nxt = self.rcv_nxt.wrapping_add(n as u32);
            st.rcvbyte += n as u64;
            let fin = o.fin && complete;
            self.recycle_ooo(o.data);
            if fin {
                self.take_fin(now);
                while let Some(o) = self.ooo.pop() {
                    self.recycle_ooo(o.data);
                }
                return;
            }
        }
    }

    fn recycle_ooo(&mut self, buf: Vec<u8>) {
        if self.ooo_free.len() < self.cfg.ooo_max_segs {
            self.ooo_free.push(buf);
        }
    }

    fn take_fin(&mut self, now: Instant) {
        self.rcv_nxt = self.rcv_nxt.wrapping_add(1);
        self.rcv_fin = true;
        self.ack_now = true;
        self.state = match self.state {
            State::Established => State::CloseWait,
            State::FinWait1 => {
                if self.snd_una == self.snd_max && self.fin_queued {
                    self.enter_time_wait(now);
                    State::TimeWait
                } else {
                    State::Closing
                }
            }
            State::FinWait2 => {
                self.enter_time_wait(now);
                State::TimeWait
            }
            s => s,
        };
    }
}

#[cfg(test)]
mod tests;
