//! Segments that find no connection (the LISTEN half of FreeBSD's `tcp_input`, and
//! its `tcp_syncache` for the cookies): a listener's SYN opens a half-open
//! connection, or, when its SYN queue is full, is answered with a SYN cookie (RFC
//! 4987) and no state, or, when its accept queue is full, is dropped (counted) for
//! the client to retry; the ACK of a cookie opens an established one; anything else is
//! dropped or answered with a reset (RFC 9293 §3.10.7.1–2). Calls `output` to send
//! and to service the new connection.

use super::output::{send_segment, service};
use super::TcpCx;
use super::{conn_cfg, isn, ts_offset, Conn, TcpWorker, Tuple};
use crate::stats::DropReason;
use crate::tcp::chan::{IpOpts, ListenShared};
use crate::tcp::tcb::{reset_for, wscale_for, CookieOpts, FoCookie, SegIn, SegOut, Tcb};
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::atomic::Ordering;

/// The MSS values a SYN cookie can carry (3 bits; RFC 4987's classic encoding).
const COOKIE_MSS: [u16; 8] = [216, 536, 1024, 1200, 1220, 1360, 1440, 1460];

fn cookie_hash(secret: u64, t: &Tuple, epoch: u32) -> u32 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (secret ^ 0xc00c_1e5a_u64).hash(&mut h);
    t.hash(&mut h);
    epoch.hash(&mut h);
    h.finish() as u32
}

/// A SYN cookie: 5 bits of a 64-second clock, 3 bits of MSS, 24 bits of keyed hash.
fn cookie_make(secret: u64, t: &Tuple, now: dev::Instant, mss: u16) -> u32 {
    let epoch = (now.as_nanos() / 64_000_000_000) as u32;
    let idx = COOKIE_MSS.iter().rposition(|&m| m <= mss).unwrap_or(0) as u32;
    ((epoch & 0x1f) << 27) | (idx << 24) | (cookie_hash(secret, t, epoch) & 0x00ff_ffff)
}

/// The MSS a valid cookie (from this or the previous 64 s) carries.
fn cookie_check(secret: u64, t: &Tuple, cookie: u32, now: dev::Instant) -> Option<u16> {
    let cur = (now.as_nanos() / 64_000_000_000) as u32;
    for epoch in [cur, cur.wrapping_sub(1)] {
        if (epoch & 0x1f) == cookie >> 27
            && cookie_hash(secret, t, epoch) & 0x00ff_ffff == cookie & 0x00ff_ffff
        {
            return Some(COOKIE_MSS[((cookie >> 24) & 7) as usize]);
        }
    }
    None
}

/// RFC 7413 §4.2.2 on a listener with Fast Open (`TCP_FASTOPEN`, and
/// `net.inet.tcp.fastopen.server_enable`), for a SYN that carried the option
/// `asked`: a valid cookie has the SYN's data taken (while fewer than the
/// listener's Fast Open queue length wait in SYN_RECEIVED; beyond, the three-way
/// handshake); a request, or a cookie that does not check, gets the client's
/// cookie on the SYN-ACK, and the data in the SYN goes unacknowledged, for the
/// client to send again after the handshake.
fn fastopen_accept(
    cx: &mut TcpCx<'_, '_>,
    l: &ListenShared,
    tuple: &Tuple,
    tcb: &mut Tcb,
    asked: FoCookie,
    seg: &SegIn<'_>,
) {
    let qlen = l.fastopen.load(Ordering::Acquire);
    if !cx.tcp.cfg.fastopen_server || qlen == 0 {
        return;
    }
    let client = tuple.remote.ip();
    let tfo = cx.tcp.tfo;
    let st = &mut cx.link.stats.tcp;
    if asked.is_empty() {
        tcb.accept_fastopen(Some(tfo.server_cookie(client)), false, seg);
    } else if !tfo.server_check(client, &asked) {
        st.tfo_badcookie += 1;
        tcb.accept_fastopen(Some(tfo.server_cookie(client)), false, seg);
    } else if l.half_open.load(Ordering::Acquire) >= qlen {
        st.tfo_overflow += 1;
    } else {
        st.tfo_passive += 1;
        tcb.accept_fastopen(None, true, seg);
    }
}

/// A listener (or, with `bound`, a socket bound and not listening) of the
/// segment's family for `tuple`'s port: on `dst`, else on the unspecified address
/// (an IPv6 listener takes IPv6 only).
fn find_listener(
    cx: &TcpCx<'_, '_>,
    tuple: &Tuple,
    dst: IpAddr,
    bound: bool,
) -> Option<std::sync::Arc<ListenShared>> {
    let v = cx.tcp.listen.get(&tuple.local.port())?;
    let mut v = v.iter().filter(|l| l.bound_only == bound);
    v.clone()
        .find(|l| l.local.ip() == dst)
        .or_else(|| v.find(|l| l.local.ip().is_unspecified() && l.local.is_ipv4() == dst.is_ipv4()))
        .cloned()
}

/// Whether a reset for a segment that found no connection may go: at most
/// `rst_limit` a second (FreeBSD's badport_bandlim), this worker's share, so that
/// a flood of stray segments draws no flood of resets; the others are counted in
/// `tcp.rst_ratelim`.
fn reset_allowed(cx: &mut TcpCx<'_, '_>, tw: &mut TcpWorker) -> bool {
    let limit = super::limit::per_worker(cx.tcp.cfg.rst_limit, cx);
    let ok = tw.rst_limit.take(cx.link.now, limit, cx.ip.isn_secret);
    if !ok {
        cx.link.stats.tcp.rst_ratelim += 1;
    }
    ok
}

/// A segment for which there is no connection (none was, or a TIME_WAIT just gave
/// way to its SYN, RFC 6191), sent to `dst`: the ACK of a SYN cookie, a listener's
/// SYN (answered with a SYN cookie when the listener's queue is full), or, with no
/// listener to take it, a reset.
pub(super) fn tcp_listen_input(
    cx: &mut TcpCx<'_, '_>,
    tw: &mut TcpWorker,
    tuple: Tuple,
    dst: IpAddr,
    seg: &SegIn<'_>,
) {
    let listener =
        find_listener(cx, &tuple, dst, false).filter(|l| !l.closed.load(Ordering::Acquire));
    // A SYN with FIN opens a connection as FreeBSD's syncache does (its FIN and
    // data ignored: the peer sends them again), unless net.inet.tcp.drop_synfin
    // dropped it already.
    let is_syn = seg.syn && seg.ack.is_none() && !seg.rst;
    if let (Some(l), false, false, Some(ack)) = (&listener, seg.syn, seg.rst, seg.ack) {
        if let Some(mss) = cookie_check(cx.ip.isn_secret, &tuple, ack.wrapping_sub(1), cx.link.now)
        {
            cx.link.stats.tcp.syncookiesrecvd += 1;
            if l.accept_q.is_full() || tw.conns.len() >= tw.max_conns {
                // No room: refuse with a reset rather than leave the client believing
                // it is connected (Linux's tcp_abort_on_overflow).
                DropReason::TcpListenDrop.count(cx.link.stats);
                // A cookie stays valid for a minute or two, and its ACK can be
                // sent again and again: at most `rst_limit` resets a second, as
                // for segments that find no connection.
                if let Some(r) = reset_for(seg).filter(|_| reset_allowed(cx, tw)) {
                    cx.link.stats.tcp.sndrst += 1;
                    send_segment(&mut cx.ip46(), &tuple, &r, std::iter::empty(), l.ip_opts());
                }
                return;
            }
            let cfg = conn_cfg(cx, &tuple, l.buffers);
            let opts = seg.ts.map(|(tsval, tsecr)| CookieOpts {
                wscale: Some((tsecr & 0xf) as u8).filter(|w| *w != 0xf),
                sack: tsecr & 0x10 != 0,
                ts: (tsval, tsecr),
            });
            let mut tcb = Tcb::from_cookie(
                cfg,
                ack.wrapping_sub(1),
                seg.seq.wrapping_sub(1),
                mss,
                seg.wnd,
                opts,
            );
            if let Some(m) = l.user_mss() {
                tcb.set_user_mss(m);
            }
            tcb.set_ts_offset(ts_offset(cx.ip.isn_secret, &tuple));
            tcb.input(seg, cx.link.now, &mut cx.link.stats.tcp);
            super::limit::limit_challenge(cx, &mut tcb, &mut tw.challenge_limit);
            cx.link.stats.tcp.accepts += 1;
            let i = tw.insert(Conn::passive(cx, tuple, tcb, l.clone(), false));
            return service(cx, tw, i);
        }
    }
    if listener.is_some() && seg.syn && seg.ack.is_some() && !seg.rst {
        // A SYN-ACK to a listener is dropped without a reset, as FreeBSD's
        // tcp_input does (a listener answering forged SYN-ACKs would reflect them).
        cx.link.stats.tcp.rcvbadsyn += 1;
        return;
    }
    if listener.is_some() && !is_syn && seg.ack.is_none() {
        // LISTEN, "other control or text" without SYN or ACK (a FIN, Xmas or null
        // probe), or a RST: drop silently (RFC 9293 §3.10.7.2), as BSD and Linux do.
        cx.link.stats.tcp.listennosyn += 1;
        return;
    }
    let l = match listener {
        Some(l) if is_syn => l,
        listener => {
            DropReason::TcpNoPort.count(cx.link.stats);
            if let Some(r) = reset_for(seg).filter(|_| reset_allowed(cx, tw)) {
                cx.link.stats.tcp.sndrst += 1;
                // The reset carries the IP options of the listener, or of a socket
                // bound to the port (FreeBSD's tcp_dropwithreset with the CLOSED
                // socket's control block), else the stack's.
                let ip = match &listener {
                    Some(l) => l.ip_opts(),
                    None => find_listener(cx, &tuple, dst, true)
                        .map_or_else(IpOpts::default, |b| b.ip_opts()),
                };
                send_segment(&mut cx.ip46(), &tuple, &r, std::iter::empty(), ip);
            }
            return;
        }
    };
    if l.accept_q.is_full() {
        // Connections wait for the application's accept, as many as the queue
        // holds: the SYN is dropped unanswered and counted, and the client sends it
        // again after its RTO, when accept may have made room (Linux's
        // tcp_conn_request). A SYN-ACK would have the client believe it connected,
        // only to be reset when its ACK found the queue still full.
        DropReason::TcpListenDrop.count(cx.link.stats);
        return;
    }
    if l.half_open.load(Ordering::Acquire) >= l.backlog || tw.conns.len() >= tw.max_conns {
        // The queue is full: answer with a SYN cookie and keep no state (RFC 4987).
        return syn_cookie_answer(cx, &l, &tuple, seg);
    }
    let iss = isn(cx.ip.isn_secret, &tuple, cx.link.now);
    let cfg = conn_cfg(cx, &tuple, l.buffers);
    let Some(mut tcb) = Tcb::accept(cfg, iss, seg) else {
        return;
    };
    // The listener's TCP_MAXSEG bounds what the SYN-ACK offers and what the
    // connection sends, from the start.
    if let Some(m) = l.user_mss() {
        tcb.set_user_mss(m);
    }
    tcb.set_ts_offset(ts_offset(cx.ip.isn_secret, &tuple));
    if let Some(asked) = seg.fast_open {
        fastopen_accept(cx, &l, &tuple, &mut tcb, asked, seg);
    }
    l.half_open.fetch_add(1, Ordering::AcqRel);
    let i = tw.insert(Conn::passive(cx, tuple, tcb, l, true));
    service(cx, tw, i);
}

/// A SYN-ACK whose sequence number is a SYN cookie (RFC 4987), for a listener
/// whose queue of half-open connections is full: no state is kept.
fn syn_cookie_answer(
    cx: &mut TcpCx<'_, '_>,
    l: &std::sync::Arc<ListenShared>,
    tuple: &Tuple,
    seg: &SegIn<'_>,
) {
    cx.link.stats.tcp.syncookiessent += 1;
    let cookie = cookie_make(cx.ip.isn_secret, tuple, cx.link.now, seg.mss.unwrap_or(536));
    let mut cfg = conn_cfg(cx, tuple, l.buffers);
    if let Some(m) = l.user_mss() {
        cfg.limit_mss(m);
    }
    let mut synack = SegOut {
        seq: cookie,
        ack: seg.seq.wrapping_add(1),
        ack_flag: true,
        syn: true,
        wnd: cfg.rcvbuf.min(65_535) as u16,
        mss: Some(cfg.mss),
        ..SegOut::default()
    };
    // With timestamps the cookie keeps the SYN's other options too: the low six
    // bits of our TSval carry the peer's window scale and SACK permitted, and the
    // ACK echoes them back (as Linux does).
    if let (true, Some((peer_ts, _))) = (cfg.timestamps, seg.ts) {
        let ws = seg.wscale.filter(|_| cfg.window_scaling);
        let bits =
            u32::from(ws.map_or(0xf, |w| w.min(14))) | (u32::from(seg.sack_perm && cfg.sack) << 4);
        let clock =
            (cx.link.now.as_millis() as u32).wrapping_add(ts_offset(cx.ip.isn_secret, tuple));
        // At or below the clock, so later timestamps never run backwards.
        let tsval =
            ((clock & !0x3f) | bits).wrapping_sub(if bits > (clock & 0x3f) { 64 } else { 0 });
        synack.ts = Some((tsval, peer_ts));
        synack.wscale = ws.map(|_| wscale_for(&cfg));
        synack.sack_perm = seg.sack_perm && cfg.sack;
    }
    send_segment(
        &mut cx.ip46(),
        tuple,
        &synack,
        std::iter::empty(),
        l.ip_opts(),
    );
}
