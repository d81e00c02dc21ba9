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
//! or NewReno (both in `cc`), or BBR v1 with pacing (`bbr`), fast retransmit and NewReno fast recovery (RFC 5681,
//! RFC 6582); SACK and RFC 6675's loss recovery (RFC 2018) with RACK's time-based
//! loss detection and tail loss probes (RFC 8985) and Proportional Rate Reduction
//! (RFC 6937), D-SACK (RFC 2883) and the undoing of spurious recoveries and
//! timeouts (RFC 3708, RFC 3522, F-RTO's RFC 5682); ECN (RFC 3168); delayed ACKs
//! (every second full segment, bounded delay) and Nagle, both switchable;
//! zero-window probing; keepalive; the RST and SYN checks of RFC 5961 with challenge
//! ACKs; SYN cookies ([`CookieOpts`]); TCP Fast Open (RFC 7413), client and server;
//! a bounded out-of-order queue.
//!
//! One file per concern, as FreeBSD lays out `netinet/tcp_*.c`: `seq` (sequence and
//! timestamp arithmetic, `tcp_seq.h`), `config` ([`TcpConfig`]), `seg` (segments in
//! and out), `input` (`tcp_input`: PAWS, acceptability, RFC 5961's checks, the state
//! machine), `ack` (what an acknowledgment does: RTT, the congestion window, fast
//! retransmit), `reass` (data in, in order and out of order, `tcp_reass`), `output`
//! (`tcp_output`: what to send, windows, Nagle, segment sizes), `sack` (SACK input
//! and loss recovery, `tcp_sack`), `rack` (the scoreboard: segments in flight with
//! their send times, and the losses RACK finds in them, as FreeBSD's `rack` stack,
//! and delivery-rate samples), `pace` (pacing, and BBR's place in the block),
//! `timer` (`tcp_timer`), `timewait` ([`TimeWait`], `tcp_timewait`), `fastopen`
//! (RFC 7413's option and SYN data, `tcp_fastopen`) and `usrreq`
//! (the application's side, `tcp_usrreq`). This file holds the control block itself and how one is opened. All of them may call `cc` and `bbr`
//! (congestion control) and `sndbuf` (the send buffer) and count in
//! `stats::TcpStat`; none reads a clock or does IO.

mod ack;
mod config;
mod fastopen;
mod input;
mod output;
mod pace;
mod rack;
mod reass;
mod sack;
mod seg;
mod seq;
mod timer;
mod timewait;
mod usrreq;

pub use config::{wscale_for, TcpConfig, GSO_MAX};
pub use fastopen::TfoNews;
pub use output::ACK_BATCH_MAX;
pub use seg::{reset_answering, reset_for, FoCookie, Payload, SegIn, SegOut, PAYLOAD_PIECES};
pub use timewait::TimeWait;

use super::cc::{CcState, HyStart};
use crate::stats::TcpStat;
use dev::{Duration, Instant};
use reass::OooSeg;
use seq::tsval;
use std::collections::VecDeque;

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
    /// Dropped by the operator (`tcpdrop`).
    Aborted,
    /// An ICMP time exceeded answered our SYN (`EHOSTUNREACH`).
    Unreachable,
}

/// What `TCP_INFO` reports of a connection (the fields of FreeBSD's and Linux's
/// `struct tcp_info` mpstack keeps).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpInfo {
    pub state: State,
    /// Options in use: timestamps (RFC 7323), SACK (RFC 2018), window scaling
    /// (the shift of the windows we advertise, the shift of the peer's), ECN
    /// (RFC 3168).
    pub timestamps: bool,
    pub sack: bool,
    pub wscale: Option<(u8, u8)>,
    pub ecn: bool,
    pub rto: Duration,
    /// The smoothed round trip time and its variation, once measured.
    pub rtt: Option<Duration>,
    pub rttvar: Duration,
    /// The segment sizes we send and offer.
    pub snd_mss: u32,
    pub rcv_mss: u32,
    /// Congestion window and slow-start threshold, bytes.
    pub snd_cwnd: u32,
    pub snd_ssthresh: u32,
    /// The peer's window, bytes.
    pub snd_wnd: u32,
    /// Retransmission timeouts since the last acknowledgment of new data.
    pub backoff: u32,
    /// Where loss recovery stands, as Linux's `tcpi_ca_state` counts it.
    pub ca_state: CaState,
    /// Bytes sent and not acknowledged; of those, selectively acknowledged, and
    /// taken for lost (RACK, RFC 8985).
    pub flight: u32,
    pub sacked: u32,
    pub lost: u32,
    /// Whether reordering has been seen (RACK's reordering window widened).
    pub reordering_seen: bool,
    /// Bytes delivered to the peer over the connection's life (acknowledged
    /// cumulatively or selectively).
    pub delivered: u64,
    /// Window or keepalive probes sent and not answered.
    pub probes: u32,
    /// When the peer was last heard from (any segment acceptable in the
    /// window, which after the handshake always carries an ACK).
    pub last_heard: Option<Instant>,
    /// When data last went out.
    pub last_data_sent: Option<Instant>,
    /// The largest segment the path takes: the route's MTU, or a smaller path
    /// MTU learnt from ICMP, less the fixed IP and TCP headers (`TCP_MAXSEG`
    /// aside). The path MTU is this plus 40 bytes (IPv4) or 60 (IPv6).
    pub path_mss: u32,
    /// Sequence space the peer acknowledged, and received in order, over the
    /// connection's life, as Linux's `tcpi_bytes_acked` and
    /// `tcpi_bytes_received` count it: our SYN counts on an active open, the
    /// peer's FIN counts, the SYN of a passive open and the peer's SYN do not.
    pub bytes_acked: u64,
    pub bytes_received: u64,
    /// Retransmissions: segments (Linux's `tcpi_total_retrans`, a SYN or FIN
    /// counting one) and data bytes (`tcpi_bytes_retrans`).
    pub total_retrans: u32,
    pub bytes_retrans: u64,
}

/// Linux's congestion-avoidance states (`tcpi_ca_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaState {
    /// Nothing amiss.
    Open,
    /// Duplicate or selective acknowledgments seen, no recovery yet.
    Disorder,
    /// The window cut for an ECN echo (RFC 3168).
    Cwr,
    /// Fast recovery.
    Recovery,
    /// Recovering from a retransmission timeout.
    Loss,
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
    /// The largest segment the path takes, `TCP_MAXSEG` aside
    /// ([`TcpInfo::path_mss`]).
    path_mss: u32,
    /// `TCP_INFO`'s life totals ([`TcpInfo`]).
    bytes_acked: u64,
    bytes_received: u64,
    total_retrans: u32,
    bytes_retrans: u64,
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
    /// Received bytes handed to the application (its channel) and not yet read:
    /// they count against the receive buffer as `rcvbuf`'s do (FreeBSD's
    /// `sbspace`), so the window says what is really free.
    app_unread: usize,
    /// The most each of the buffers may hold while the stack's TCP memory is
    /// under pressure (`tcp::mem`; `usize::MAX` otherwise): growth beyond it is
    /// refused, the configured sizes stay.
    mem_clamp: usize,
    /// A receive buffer size set on the open connection and not yet reached
    /// (`set_buffer_sizes`: it shrinks as the window offered is used).
    rcvbuf_target: Option<usize>,
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
    /// When a segment's timestamp last became `ts_recent` (FreeBSD's
    /// `ts_recent_age`), for RFC 7323 §5.5's 24 days: `None` before the first.
    ts_recent_age: Option<Instant>,
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
    /// Window probes sent since the window shut (FreeBSD's `t_rxtshift` in the
    /// persist state): their backoff, and the bound on a peer that has gone
    /// silent.
    persist_probes: u32,
    /// When a segment last came from the peer (FreeBSD's `t_rcvtime`); `None`
    /// before the first.
    last_heard: Option<Instant>,
    /// Since when a detached connection has had data to send and a shut window
    /// (the later of the window closing and the close), for
    /// `persist_orphan_timeout`, and SND.UNA then: a window that opens only a
    /// little does not restart the clock, only acknowledged progress does
    /// ([`Tcb::orphan_progress`]).
    orphan_stall: Option<(Instant, u32)>,
    delack_deadline: Option<Instant>,
    tw_deadline: Option<Instant>,
    /// The application is gone (closed, not just shut down for writing): nothing
    /// more can be received (FreeBSD's `SBS_CANTRCVMORE`), so FIN_WAIT_2 is
    /// bounded.
    detached: bool,
    /// When FIN_WAIT_2 of a detached connection ends (`finwait2_timeout`).
    fw2_deadline: Option<Instant>,

    // Congestion control (NewReno).
    cwnd: u32,
    ssthresh: u32,
    dupacks: u32,
    /// Limited transmit's allowance beyond `cwnd`, reset by new data acknowledged.
    /// Also what a tail loss probe and F-RTO let out: while it is not zero, the
    /// send is one these grant, and segmentation offload does not hold it.
    limited_extra: u32,
    /// When data last went out (RFC 5681 §4.1's idle period ends at a send).
    last_data_sent: Option<Instant>,
    /// When the first unacknowledged segment was sent, as near as known (the
    /// scoreboard's, else when it began the flight; long ago after an ACK):
    /// segmentation offload holds a send only while an ACK is due soon.
    head_sent: Instant,
    cc: CcState,
    hystart: HyStart,
    ka_deadline: Option<Instant>,
    ka_probes: u32,
    /// The ACK owed is a challenge ACK (RFC 5961), sent as BSD's `tcp_respond`
    /// sends it: at SND.NXT, never carrying our FIN again.
    challenge: bool,
    /// Challenge ACKs sent in the window that ends at `challenge_end` (FreeBSD's
    /// `t_challenge_ack_cnt`, `t_challenge_ack_end`; `TcpConfig::ack_war_cnt`).
    challenge_cnt: u32,
    challenge_end: Instant,
    /// An ACK a hostile segment drew (a challenge ACK, or TIME_WAIT's answer),
    /// decided by the segment just input, with what `ack_now` and `challenge` were
    /// before it and whether it counted in `tcp.challengeack`: the worker's
    /// node-wide limit may still withdraw it ([`Tcb::take_challenge`]).
    challenge_new: Option<OwedAck>,
    /// `TCP_NOOPT`: our SYN carries no options at all, not even the MSS.
    noopt: bool,
    /// Proportional Rate Reduction (RFC 6937) during SACK recovery: data the
    /// peer received since recovery began, data we sent in it, and the flight
    /// when it began.
    prr_delivered: u32,
    prr_out: u32,
    recover_fs: u32,
    /// The last fast recovery, for D-SACK to prove it spurious (RFC 3708): the
    /// window and threshold before it, its retransmissions not yet reported
    /// duplicate, and SND.MAX when it began.
    dsack_undo: Option<(u32, u32, u32, u32)>,
    /// F-RTO (RFC 5682) after a first timeout without timestamps: its step (1,
    /// waiting for the retransmission's ACK; 2, new data sent, waiting for the
    /// next), SND.MAX at the timeout, and the window and threshold before it.
    frto: Option<(u8, u32, u32, u32)>,
    /// ECN negotiated (RFC 3168 §6.1.1).
    ecn_ok: bool,
    /// Congestion Experienced arrived: ECE on our ACKs until the peer's CWR.
    ecn_echo: bool,
    /// The window was reduced for an echo: CWR on the next new data segment.
    ecn_cwr: bool,
    /// A reduction for an echo lasts until this is acknowledged: one a window.
    ecn_until: Option<u32>,
    /// `ka_deadline` is the connection-establishment limit (`keep_init`).
    ka_init: bool,
    ka_send: bool,
    recover: Option<u32>,
    /// Next sequence number a hole retransmission may start from.
    sack_next: u32,
    /// Receiver: the SACK blocks reported, the latest arrival's first and the rest
    /// in the order they were last reported (RFC 2018 §4; FreeBSD's
    /// `tcp_update_sack_list`, six of them).
    sack_list: [Option<(u32, u32)>; 6],
    /// Receiver: a duplicate range just received, to report once as the first SACK
    /// block (D-SACK, RFC 2883).
    dsack: Option<(u32, u32)>,

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
    /// The probe's new data is going out: Nagle does not hold it (as Linux's
    /// `tcp_send_loss_probe` sends with `TCP_NAGLE_OFF`).
    tlp_sending: bool,
    /// Before the first timeout of an episode: (cwnd, ssthresh, our timestamp then),
    /// to undo the reduction if the timeout proves spurious (Eifel, RFC 3522).
    rto_undo: Option<(u32, u32, u32)>,
    /// The sender's scoreboard: the segments in flight with their send times,
    /// which the peer has SACKed, and what RACK (RFC 8985) concludes from them:
    /// which are lost, and the reordering window. SACK connections only.
    rack: rack::Rack,
    /// SND.MAX at a retransmission timeout, until acknowledged: no fast recovery
    /// starts for data sent before it (RFC 6582 §4.1's `recover`).
    rto_recover: Option<u32>,
    /// The retransmission timer was armed for a lone segment.
    rtx_lone: bool,
    /// BBR's state, for connections that use it (`pace`).
    bbr: Option<Box<super::bbr::Bbr>>,
    /// Pacing (at BBR's rate): when the next data segment may go, and whether
    /// output waits for that.
    pace_at: Instant,
    pace_wait: bool,
    /// TCP Fast Open (RFC 7413), on a connection that uses it.
    tfo: Option<Box<fastopen::Tfo>>,
}

/// What [`Tcb::take_challenge`] restores when the node-wide limit withdraws an
/// ACK: `ack_now` and `challenge` as they were, and whether the ACK counted as a
/// challenge ACK.
#[derive(Clone, Copy, Debug)]
struct OwedAck {
    ack_now: bool,
    challenge: bool,
    counted: bool,
}

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
            path_mss: mss,
            bytes_acked: 0,
            bytes_received: 0,
            total_retrans: 0,
            bytes_retrans: 0,
            buf_seq: iss.wrapping_add(1),
            sndbuf: super::sndbuf::SndBuf::default(),
            fin_queued: false,
            irs: 0,
            rcv_nxt: 0,
            rcv_wscale,
            rcvbuf: VecDeque::new(),
            app_unread: 0,
            mem_clamp: usize::MAX,
            rcvbuf_target: None,
            ooo: Vec::new(),
            ooo_free: Vec::new(),
            rcv_fin: false,
            last_ack_sent: 0,
            rcv_adv: 0,
            ts_enabled: cfg.timestamps,
            ts_recent: 0,
            ts_recent_age: None,
            ts_offset: iss.rotate_left(13) ^ 0x5bd1_e995,
            sack_perm: false,
            rto: cfg.init_rto,
            srtt: None,
            rttvar: Duration::ZERO,
            rtx_deadline: None,
            rtx_count: 0,
            timed: None,
            persist_deadline: None,
            persist_probes: 0,
            last_heard: None,
            orphan_stall: None,
            delack_deadline: None,
            tw_deadline: None,
            detached: false,
            fw2_deadline: None,
            cwnd: 0,
            ssthresh: u32::MAX,
            dupacks: 0,
            limited_extra: 0,
            last_data_sent: None,
            head_sent: Instant::ZERO,
            cc: CcState::new(cfg.cc),
            hystart: HyStart::new(cfg.hystart),
            ka_deadline: None,
            ka_probes: 0,
            ka_init: false,
            challenge: false,
            challenge_cnt: 0,
            challenge_end: Instant::ZERO,
            challenge_new: None,
            noopt: false,
            prr_delivered: 0,
            prr_out: 0,
            recover_fs: 0,
            dsack_undo: None,
            frto: None,
            ecn_ok: false,
            ecn_echo: false,
            ecn_cwr: false,
            ecn_until: None,
            ka_send: false,
            recover: None,
            sack_next: iss,
            sack_list: [None; 6],
            dsack: None,
            ack_now: false,
            dupacks_owed: 0,
            unacked_segs: 0,
            rexmit_owed: 0,
            probe_one: false,
            rst_pending: None,
            tlp_deadline: None,
            tlp_out: false,
            tlp_fire: false,
            tlp_sending: false,
            rto_undo: None,
            rack: rack::Rack::default(),
            rto_recover: None,
            rtx_lone: false,
            bbr: None,
            pace_at: Instant::ZERO,
            pace_wait: false,
            tfo: None,
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
        // An ECN-setup SYN (ECE and CWR, RFC 3168 §6.1.1), granted unless ECN is off.
        t.ecn_ok = syn.ece && syn.cwr && cfg.ecn != 0;
        t.irs = syn.seq;
        t.rcv_nxt = syn.seq.wrapping_add(1);
        t.rcv_adv = t.rcv_nxt;
        t.last_ack_sent = t.rcv_nxt;
        t.snd_wnd = u32::from(syn.wnd);
        t.snd_wl1 = syn.seq;
        Some(t)
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
        t.cwnd = t.initial_window();
        t.round_buffers();
        t.choose_cc();
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
        self.cwnd = self.initial_window();
        if self.active {
            self.round_buffers();
        }
        self.choose_cc();
    }

    /// FreeBSD's `tcp_mss()`: once the segment size is known, a socket buffer larger
    /// than one segment grows to a whole number of them (at most
    /// `kern.ipc.maxsockbuf`; never shrinks), so the window is never left with a
    /// fraction of a segment. 65,536 bytes become 65,700 at an MSS of 1,460.
    /// A passive open rounds when the handshake completes (FreeBSD's syncache
    /// offers the listener's buffer until then).
    pub(super) fn round_buffers(&mut self) {
        let mss = self.snd_mss.max(1) as usize;
        let most = self.cfg.max_sockbuf;
        for b in [&mut self.cfg.sndbuf, &mut self.cfg.rcvbuf] {
            if *b > mss {
                *b = (*b).max(b.next_multiple_of(mss).min(most));
            }
        }
    }

    /// The send and receive buffer sizes as they stand: as set, or rounded to
    /// whole segments with the MSS; a receive buffer set smaller stays as
    /// large as what it holds and the window already offered, until those
    /// drain ([`Tcb::set_buffer_sizes`]).
    pub fn buffer_sizes(&self) -> (usize, usize) {
        (self.cfg.sndbuf, self.cfg.rcvbuf)
    }

    /// `SO_RCVBUF`'s answer: the receive buffer's size, or the smaller one set
    /// while the window already offered drains (FreeBSD's `sb_hiwat`, which
    /// `sbreserve` sets at once, while `tcp_output` never shrinks the window).
    pub fn recv_buffer_size(&self) -> usize {
        self.rcvbuf_target.unwrap_or(self.cfg.rcvbuf)
    }

    /// Sets the offset of our timestamp clock (before the first segment goes out);
    /// by default it derives from the ISS.
    pub fn set_ts_offset(&mut self, offset: u32) {
        self.ts_offset = offset;
    }

    pub fn state(&self) -> State {
        self.state
    }

    pub fn error(&self) -> Option<TcpError> {
        self.error
    }

    pub fn cwnd(&self) -> u32 {
        self.cwnd
    }

    /// `TCP_INFO`.
    pub fn info(&self) -> TcpInfo {
        TcpInfo {
            state: self.state,
            timestamps: self.ts_enabled,
            sack: self.sack_perm,
            wscale: self.wscale_ok.then_some((self.rcv_wscale, self.snd_wscale)),
            ecn: self.ecn_ok,
            rto: self.rto,
            rtt: self.srtt,
            rttvar: self.rttvar,
            snd_mss: self.snd_mss,
            rcv_mss: u32::from(self.cfg.mss),
            snd_cwnd: self.cwnd,
            snd_ssthresh: self.ssthresh,
            snd_wnd: self.snd_wnd,
            backoff: self.rtx_count,
            ca_state: if self.rto_recover.is_some() {
                CaState::Loss
            } else if self.recover.is_some() {
                CaState::Recovery
            } else if self.ecn_cwr {
                CaState::Cwr
            } else if self.dupacks > 0 || self.rack.sacked_bytes() > 0 {
                CaState::Disorder
            } else {
                CaState::Open
            },
            flight: self.flight(),
            sacked: self.rack.sacked_bytes(),
            lost: self.rack.lost_bytes(),
            reordering_seen: self.rack.reordering_seen(),
            delivered: self.rack.delivered_total(),
            probes: self.persist_probes.max(self.ka_probes),
            last_heard: self.last_heard,
            last_data_sent: self.last_data_sent,
            path_mss: self.path_mss,
            bytes_acked: self.bytes_acked,
            bytes_received: self.bytes_received,
            total_retrans: self.total_retrans,
            bytes_retrans: self.bytes_retrans,
        }
    }

    /// Counts a retransmission of `len` data bytes (0: a SYN or a FIN), in the
    /// stack's counters (one packet) and the connection's own (in segments of
    /// the MSS, as Linux counts what offload sends at once).
    fn count_rexmit(&mut self, len: u32, st: &mut TcpStat) {
        st.sndrexmitpack += 1;
        st.sndrexmitbyte += u64::from(len);
        let segs = len.div_ceil(self.snd_mss.max(1)).max(1);
        self.total_retrans = self.total_retrans.saturating_add(segs);
        self.bytes_retrans += u64::from(len);
    }

    /// Received sequence space taken in order: RCV.NXT moves on by `n`.
    fn rcv_advance(&mut self, n: u32) {
        self.rcv_nxt = self.rcv_nxt.wrapping_add(n);
        self.bytes_received += u64::from(n);
    }

    pub fn rto(&self) -> Duration {
        self.rto
    }

    fn tsval(&self, now: Instant) -> u32 {
        tsval(now, self.ts_offset)
    }
}

#[cfg(test)]
mod tests;
