//! A connection's settings ([`TcpConfig`]) and their defaults, and the window scale
//! they imply. Plain data; it names `cc`'s algorithms and calls nothing.

use crate::tcp::cc::CongestionControl;
use dev::Duration;

/// The window scale we ask for: the smallest shift that lets the receive buffer be
/// offered whole (0 without window scaling).
pub fn wscale_for(cfg: &TcpConfig) -> u8 {
    if !cfg.window_scaling {
        return 0;
    }
    // As FreeBSD: room for the largest buffer a socket may grow to
    // (`kern.ipc.maxsockbuf`), and at least for this one's.
    let most = cfg.rcvbuf.max(cfg.max_sockbuf);
    let mut s = 0u8;
    while (most >> s) > 65_535 && s < 14 {
        s += 1;
    }
    s
}

/// Settings of one connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpConfig {
    /// The MSS we advertise and the largest segment we send where the route's
    /// interface is not known (IPv4 over 1500: 1460); otherwise a connection takes
    /// the interface's MTU less the IP and TCP headers.
    pub mss: u16,
    pub sndbuf: usize,
    pub rcvbuf: usize,
    /// The largest socket buffer (FreeBSD's `kern.ipc.maxsockbuf`, 2 MiB): the
    /// window scale offered is the smallest that covers it.
    pub max_sockbuf: usize,
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
    /// Retransmissions of a SYN (or SYN-ACK) before giving up: ten, as FreeBSD
    /// (its snd-syn-rtx-max-number script); `keep_init` (75 s) usually ends the
    /// attempt first.
    pub syn_retries: u32,
    /// Time spent in TIME_WAIT (2 MSL).
    pub time_wait: Duration,
    /// How long a connection whose application has closed (it can receive no more)
    /// waits in FIN_WAIT_2 for the peer's FIN: this long without a segment from the
    /// peer, then it is dropped and counted in `tcp.finwait2_drops`
    /// (`net.inet.tcp.finwait2_timeout`, 60 s). FreeBSD waits this long only with
    /// `fast_finwait2_recycle`, and otherwise `keepcnt` × `keepintvl` (10 minutes)
    /// of silence; here it is the one limit, a minute as Linux's `tcp_fin_timeout`.
    pub finwait2_timeout: Duration,
    /// FreeBSD's `net.inet.tcp.fast_finwait2_recycle`: `finwait2_timeout` counts
    /// from the close, whatever the peer sends meanwhile (off, the default: from
    /// the last segment received, as FreeBSD's idle check).
    pub fast_finwait2_recycle: bool,
    /// How long a connection whose application has closed may be unable to send
    /// because the peer's window is shut: this long after the window closed (or
    /// after the close, whichever is later), whatever the peer answers to the
    /// window probes and however often it opens the window by a little (only a
    /// segment acknowledged ends the stall), it is dropped with a reset and
    /// counted in `tcp.persistdrop`
    /// (`net.inet.tcp.persist_orphan_timeout`, 60 s, FreeBSD's `TCPTV_PERSMAX`).
    /// RFC 1122 §4.2.2.17 keeps probing a zero window for as long as the peer
    /// answers, and so does an application's own connection here (a peer that
    /// stops answering is dropped after `max_retries` probes and a silence of the
    /// RTO times the whole backoff, or `keep_idle` if less); but once
    /// nobody owns the data, a peer that answers every probe with a zero window
    /// could hold it and its buffers for ever. FreeBSD's bound counts the peer's
    /// silence (`t_rcvtime`), which such a peer defeats; Linux's counts the probe
    /// backoff, which answers do not reset (`tcp_orphan_retries`); this counts
    /// time.
    pub persist_orphan_timeout: Duration,
    /// Connections whose application has closed and which still have work to do
    /// (orphans: FIN_WAIT_1, FIN_WAIT_2, CLOSING, LAST_ACK, or data left to send;
    /// TIME_WAIT is not one) the stack holds at most (`net.inet.tcp.maxorphans`,
    /// Linux's `tcp_max_orphans`; 4,096), split evenly among the workers. Each
    /// bound on an orphan's time (`finwait2_timeout`, `persist_orphan_timeout`, the
    /// retransmission limit) yields to a peer that acknowledges a little now and
    /// then, so without this one a crowd of such peers could hold `tcp_max_conns`
    /// connections and their send buffers. A close that would make one too many is
    /// answered as Linux answers it ("too many orphaned sockets"): the connection
    /// is reset and freed at once, and counted in `tcp.orphandrop`.
    pub max_orphans: u32,
    /// The bound on every connection's buffers together (`net.inet.tcp.mem`,
    /// Linux's `tcp_mem`): thresholds in bytes at which buffers are clamped
    /// (pressure) and new memory refused (high), orphans reset first; see
    /// `tcp::mem`. A worker-wide setting: it applies to open connections too.
    pub mem: crate::tcp::mem::TcpMemLimits,
    /// A close with received data unread resets the connection instead of
    /// sending a FIN (`net.inet.tcp.close_unread_rst`, off by default): RFC 9293
    /// §3.6.1 and RFC 1122 §4.2.2.13 say it SHOULD, so the peer does not take the
    /// FIN for "everything you sent was consumed"; Linux does (`tcp_close`,
    /// TCPAbortOnClose). Off, as FreeBSD's `tcp_disconnect`, a FIN: a reset makes
    /// the peer lose a response it has not read yet (the HTTP service's 431 to a
    /// request head it stopped reading was lost so), which Linux servers answer
    /// with a lingering close that mpstack's services do not have yet.
    /// Counted in `tcp.abortonclose`.
    pub close_unread_rst: bool,
    /// Runs of out-of-order data held for reassembly (a segment that continues a
    /// run joins it; the bytes are bounded by the receive window).
    pub ooo_max_segs: usize,
    /// Initial window in segments (RFC 6928).
    pub init_cwnd_segs: u32,
    /// Selective acknowledgments (RFC 2018), offered and used when the peer agrees.
    pub sack: bool,
    /// Tail loss probes (RFC 8985 §7) in recovery too: on (the default), a
    /// recovery whose last segments or their ACK go missing, with nothing sent
    /// after them for RACK to go by, is repaired by a probe and not by the
    /// retransmission timeout (FreeBSD's RACK stack, `rack_tlp_in_recovery`, also
    /// on by default); off, no probe is armed in fast recovery or RTO recovery, as
    /// RFC 8985 §7.2 and Linux have it.
    pub tlp_in_recovery: bool,
    /// Congestion control algorithm (CUBIC by default).
    pub cc: CongestionControl,
    /// HyStart++ (RFC 9406) for the first slow start: it ends when the round-trip
    /// time grows rather than with a loss (on by default; `cc::HyStart`).
    pub hystart: bool,
    /// How long a connection may take to be established (SYN-SENT or SYN-RECEIVED)
    /// before it is dropped (FreeBSD's `net.inet.tcp.keepinit`, `TCP_KEEPINIT`).
    pub keep_init: Duration,
    /// The idle time `SO_KEEPALIVE` turns keepalive on with
    /// (`net.inet.tcp.keepidle`, `TCP_KEEPIDLE`; 2 hours); also the longest a peer
    /// keeping its window shut may leave the probes unanswered before the
    /// connection is dropped (FreeBSD's `tcp_maxpersistidle`; sooner if the RTO
    /// times the whole backoff is less).
    pub keep_idle: Duration,
    /// Keepalive (`SO_KEEPALIVE` with `TCP_KEEPIDLE`): probe after this long without
    /// hearing from the peer; `None` (the default) sends none.
    pub keepalive: Option<Duration>,
    /// Between unanswered keepalive probes (`TCP_KEEPINTVL`).
    pub keepalive_interval: Duration,
    /// Unanswered probes before the connection is dropped (`TCP_KEEPCNT`).
    pub keepalive_probes: u32,
    /// FreeBSD's `net.inet.tcp.insecure_rst`: a reset anywhere in the window ends
    /// the connection (RFC 793), not only one at its left edge; off (the default),
    /// the others get a challenge ACK (RFC 5961 §3).
    pub insecure_rst: bool,
    /// FreeBSD's `net.inet.tcp.insecure_syn`: a SYN in the window of a synchronized
    /// connection resets it (RFC 793); off (the default), a challenge ACK (RFC 5961
    /// §4).
    pub insecure_syn: bool,
    /// FreeBSD's `net.inet.tcp.ack_war_timewindow` and `ack_war_cnt`: a connection
    /// sends at most `ack_war_cnt` challenge ACKs (RFC 5961 §3, §4, §5.2) in each
    /// `ack_war_time_window`; the others are skipped and counted in
    /// `tcp.challengeack_ratelim`, so that an attacker's in-window SYNs or resets do
    /// not become a flood of ACKs towards the real peer (RFC 5961 §7; Linux's
    /// per-socket `tcp_invalid_ratelimit`). 5 a second, as FreeBSD; either at zero
    /// turns the limit off.
    pub ack_war_time_window: Duration,
    pub ack_war_cnt: u32,
    /// Challenge ACKs the node sends a second, all connections together (RFC 5961
    /// §7, Linux's `tcp_challenge_ack_limit`), split evenly among the workers; each
    /// second's allowance is drawn between half of it and all of it, so that the
    /// count of challenge ACKs a peer sees is no side channel (CVE-2016-5696). Those
    /// beyond it are skipped and counted in `tcp.challengeack_ratelim`. 1,000; 0
    /// for no limit.
    pub challenge_ack_limit: u32,
    /// Resets the node sends a second for segments that find no connection (a
    /// closed port, or a stray ACK to a listener; FreeBSD's `badport_bandlim`,
    /// which `net.inet.icmp.icmplim` bounds), split evenly among the workers, each
    /// second's allowance drawn as `challenge_ack_limit`'s; a segment beyond them is
    /// dropped unanswered and counted in `tcp.rst_ratelim`. 200; 0 for no limit.
    pub rst_limit: u32,
    /// FreeBSD's `net.inet.tcp.drop_synfin`: segments with both SYN and FIN are
    /// dropped (counted as bad SYNs) in every state; off by default.
    pub drop_synfin: bool,
    /// FreeBSD's `net.inet.tcp.icmp_may_rst`: an ICMP hard error quoting the SYN of
    /// a connection in SYN-SENT ends it (`ECONNREFUSED`, or `EHOSTUNREACH` for time
    /// exceeded); off, every ICMP error but "too big" is ignored. On by default.
    pub icmp_may_rst: bool,
    /// FreeBSD's `net.inet.tcp.rexmit_drop_options`: from its third
    /// retransmission on, our SYN asks for no window scaling, SACK or timestamps
    /// (a path that drops SYNs with options it does not know). Off by default.
    pub rexmit_drop_options: bool,
    /// Proportional Rate Reduction (RFC 6937) in SACK recovery (FreeBSD's
    /// `net.inet.tcp.do_prr`, on by default): the sender slows to `ssthresh` in
    /// step with the ACKs; off, RFC 6675's window minus the pipe governs alone.
    pub prr: bool,
    /// Explicit Congestion Notification (RFC 3168; FreeBSD's
    /// `net.inet.tcp.ecn.enable`): 0 never, 1 asked for on our connections and
    /// granted to peers that ask, 2 (the default) only granted. On a connection
    /// that has it, data goes out ECN-capable (ECT(0)), a congestion mark (CE) is
    /// echoed with ECE until the peer's CWR, and an echo cuts the window as a loss
    /// would, once a window, without a retransmission.
    pub ecn: u8,
    /// Retransmissions of our SYN that still ask for ECN before it goes without
    /// (`net.inet.tcp.ecn.maxretries`, 1): a path that drops ECN-setup SYNs.
    pub ecn_maxretries: u32,
    /// Segmentation offload: the most data one segment may carry for a device that
    /// cuts it into MSS-sized ones itself (the route's interface, `dev::Offloads`);
    /// 0 for a segment per MSS. New data only: retransmissions and everything sent
    /// during loss recovery go an MSS at a time.
    pub tso_max: u32,
    /// RFC 5681 §4.1's restart window (`net.inet.tcp.slowstart_after_idle`, as
    /// Linux's `tcp_slow_start_after_idle`; FreeBSD does it always): after more
    /// than a retransmission timeout without sending data, the window falls to
    /// the initial window before the next send. On by default; BBR keeps its
    /// own restart from idle either way.
    pub slowstart_after_idle: bool,
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
    /// TCP Fast Open's client (RFC 7413; FreeBSD's
    /// `net.inet.tcp.fastopen.client_enable`, on by default): a connection opened
    /// with Fast Open asked for carries its first data in the SYN when the stack
    /// holds a cookie from the server, and asks for one otherwise.
    pub fastopen_client: bool,
    /// TCP Fast Open's server (`net.inet.tcp.fastopen.server_enable`, off by
    /// default): a listener with Fast Open asked for (`TCP_FASTOPEN`) gives
    /// cookies, and takes the data of a SYN whose cookie is valid.
    pub fastopen_server: bool,
}

/// The largest segment TCP builds for an interface without segmentation offload,
/// cut in software before the device (Linux's `GSO_LEGACY_MAX_SIZE`).
pub const GSO_MAX: usize = 65_535;

impl TcpConfig {
    /// `TCP_MAXSEG`'s bound on the MSS offered and sent (at least 64 bytes).
    pub(crate) fn limit_mss(&mut self, mss: u16) {
        self.mss = self.mss.min(mss.max(64));
    }
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            mss: 1460,
            sndbuf: 256 * 1024,
            rcvbuf: 256 * 1024,
            max_sockbuf: 2 * 1024 * 1024,
            window_scaling: true,
            timestamps: true,
            nodelay: false,
            delack: Duration::from_millis(40),
            init_rto: Duration::from_secs(1),
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(60),
            max_retries: 12,
            syn_retries: 10,
            time_wait: Duration::from_secs(60),
            finwait2_timeout: Duration::from_secs(60),
            fast_finwait2_recycle: false,
            persist_orphan_timeout: Duration::from_secs(60),
            max_orphans: 4096,
            mem: crate::tcp::mem::TcpMemLimits::from_high(crate::tcp::mem::DEFAULT_HIGH),
            close_unread_rst: false,
            ooo_max_segs: 256,
            init_cwnd_segs: 10,
            sack: true,
            tlp_in_recovery: true,
            cc: CongestionControl::Cubic,
            hystart: true,
            keep_init: Duration::from_secs(75),
            keep_idle: Duration::from_secs(7200),
            keepalive: None,
            keepalive_interval: Duration::from_secs(75),
            keepalive_probes: 8,
            insecure_rst: false,
            insecure_syn: false,
            ack_war_time_window: Duration::from_secs(1),
            ack_war_cnt: 5,
            challenge_ack_limit: 1000,
            rst_limit: 200,
            drop_synfin: false,
            icmp_may_rst: true,
            rexmit_drop_options: false,
            prr: true,
            ecn: 2,
            ecn_maxretries: 1,
            tso_max: 0,
            slowstart_after_idle: true,
            tso: true,
            lro: true,
            fastopen_client: true,
            fastopen_server: false,
        }
    }
}
