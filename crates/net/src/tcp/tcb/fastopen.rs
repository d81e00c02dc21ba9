//! TCP Fast Open in the control block (RFC 7413; FreeBSD's `tcp_fastopen.c`, the
//! parts that touch a `tcpcb`): the option our SYN or SYN-ACK carries, the data a
//! client's SYN carries, what the SYN-ACK says of the server's cookie
//! ([`TfoNews`], for the stack's cookie cache: the control block knows no
//! addresses), and the data of a server's SYN taken with a valid cookie. The
//! cookies themselves (making, checking, caching) are the stack's
//! (`tcp::fastopen`). Calls nothing; `output` and `input` call it.
//!
//! Counters (`TcpStat`): `tfo_cookiereq` SYNs that asked for a cookie,
//! `tfo_cookierecvd` cookies a SYN-ACK gave us, `tfo_syndata` SYNs that carried
//! data, `tfo_syndata_acked` those whose data the SYN-ACK acknowledged,
//! `tfo_syndata_rexmit` those whose data went again after it, `tfo_pathoff`
//! handshakes that turned Fast Open off towards a server; on a server
//! `tfo_cookiesent` cookies given in SYN-ACKs, `tfo_passive` SYNs whose data was
//! taken, `tfo_badcookie` SYNs with a cookie that did not check, `tfo_overflow`
//! SYNs with a valid cookie refused for a full queue (both fall back to the
//! three-way handshake).

use super::seq::{diff, lt};
use super::{FoCookie, SegIn, SegOut, State, Tcb};
use crate::stats::TcpStat;

/// What a client's handshake says of the server's Fast Open, for the cookie cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TfoNews {
    /// The SYN-ACK carried a cookie (RFC 7413 §4.1.3: the client caches it, with
    /// the MSS the server offered).
    Cookie { cookie: FoCookie, mss: u16 },
    /// Our SYN asked for a cookie or carried one, and the SYN-ACK neither gave a
    /// valid cookie nor acknowledged our data: the server does not do Fast Open,
    /// or no longer takes our cookie; FreeBSD's `tcp_fastopen_disable_path`.
    NoFastOpen,
}

/// A connection's Fast Open state (boxed in the control block: most have none).
#[derive(Clone, Debug, Default)]
pub(super) struct Tfo {
    /// Client: the option our first SYN carries, a cookie or a request.
    syn_option: Option<FoCookie>,
    /// Client: the most data that SYN may carry (none with a request).
    syn_data_max: u32,
    /// Client: the data bytes our SYN carried.
    syn_data: u32,
    /// Client: what the SYN-ACK said, until the stack takes it.
    news: Option<TfoNews>,
    /// Server: the cookie our first SYN-ACK carries.
    synack_cookie: Option<FoCookie>,
    /// Server: the SYN's data was taken (its cookie was valid).
    passive: bool,
}

/// Room for the options of a SYN beside its data: MSS, window scale, SACK
/// permitted, timestamps and the largest Fast Open option, padded (40 bytes).
const SYN_OPTIONS_MAX: u32 = 40;

impl Tcb {
    /// A client connection opened with Fast Open (before its SYN leaves): with
    /// `cookie` from the stack's cache, the SYN carries it and up to a segment
    /// of the data queued (RFC 7413 §4.2.1; `mss`, the server's MSS cached with
    /// the cookie, sizes it); with the empty cookie, the SYN asks for one and the
    /// data waits for the handshake.
    pub fn set_fastopen(&mut self, cookie: FoCookie, mss: Option<u16>) {
        if self.state != State::SynSent || self.snd_max != self.iss {
            return;
        }
        let mss = u32::from(mss.unwrap_or(536).min(self.cfg.mss).max(64));
        self.tfo = Some(Box::new(Tfo {
            syn_option: Some(cookie),
            syn_data_max: if cookie.is_empty() {
                0
            } else {
                mss.saturating_sub(SYN_OPTIONS_MAX).max(1)
            },
            ..Tfo::default()
        }));
    }

    /// A connection accepted from a SYN with a Fast Open option (after
    /// [`Tcb::accept`]): `cookie` goes on our SYN-ACK (a new or renewed cookie for
    /// the client); with `take_data` (the SYN's cookie was valid) the SYN's data
    /// is received now, acknowledged by the SYN-ACK and readable before the
    /// handshake completes (RFC 7413 §4.2.2). Otherwise the data is not
    /// acknowledged, and the client sends it again (§4.2.2's fallback).
    pub fn accept_fastopen(&mut self, cookie: Option<FoCookie>, take_data: bool, syn: &SegIn<'_>) {
        if self.state != State::SynReceived || self.active {
            return;
        }
        let mut t = Tfo {
            synack_cookie: cookie,
            ..Tfo::default()
        };
        if take_data {
            t.passive = true;
            let room = self.rcv_window() as usize;
            for piece in syn.payload.take(room).pieces() {
                self.rcvbuf.extend(piece);
            }
            self.rcv_advance(self.rcvbuf.len() as u32);
            self.rcv_adv = self.rcv_nxt;
            self.last_ack_sent = self.rcv_nxt;
        }
        self.tfo = Some(Box::new(t));
    }

    /// A server's connection whose SYN's data was taken: the listener may hand it
    /// to the application before the handshake completes.
    pub fn fastopen_passive(&self) -> bool {
        self.tfo.as_ref().is_some_and(|t| t.passive)
    }

    /// What the SYN-ACK said of the server's cookie, once.
    pub fn take_fastopen_news(&mut self) -> Option<TfoNews> {
        self.tfo.as_mut().and_then(|t| t.news.take())
    }

    /// The Fast Open part of our SYN or SYN-ACK `seg`: the option, on the first
    /// transmission only (as FreeBSD's `tcp_output`), and a client's data (the
    /// caller moves SND.NXT past it). Returns the data bytes.
    pub(super) fn fastopen_syn(&mut self, seg: &mut SegOut, st: &mut TcpStat) -> u32 {
        let first = self.rtx_count == 0 && self.snd_max == self.iss;
        let queued = self.sndbuf.len() as u32;
        let Some(t) = self.tfo.as_mut().filter(|_| first) else {
            return 0;
        };
        if self.state == State::SynReceived {
            seg.fast_open = t.synack_cookie;
            st.tfo_cookiesent += u64::from(t.synack_cookie.is_some());
            return 0;
        }
        seg.fast_open = t.syn_option;
        let len = queued.min(t.syn_data_max);
        seg.data_len = len as usize;
        t.syn_data = len;
        if t.syn_option.is_some_and(|c| c.is_empty()) {
            st.tfo_cookiereq += 1;
        }
        if len > 0 {
            st.tfo_syndata += 1;
            st.sndpack += 1;
            st.sndbyte += u64::from(len);
        }
        len
    }

    /// The SYN-ACK `seg` answering our SYN (acknowledging up to `ack`, before
    /// the acknowledgment is processed): what it says of the cookie, and whether
    /// the data our SYN carried arrived. RFC 7413 §4.1.3 and §4.2.1; a cookie of a
    /// length the RFC does not allow is no cookie (the option parses as unknown).
    pub(super) fn fastopen_synack(&mut self, seg: &SegIn<'_>, ack: u32, st: &mut TcpStat) {
        let iss = self.iss;
        let Some(t) = self.tfo.as_mut() else {
            return;
        };
        if t.syn_option.is_none() {
            return;
        }
        let data_acked = t.syn_data > 0 && diff(ack, iss) > 1;
        t.news = match seg.fast_open {
            Some(c) if !c.is_empty() => {
                st.tfo_cookierecvd += 1;
                Some(TfoNews::Cookie {
                    cookie: c,
                    mss: seg.mss.unwrap_or(536),
                })
            }
            // The server took our cookie and gave no new one: keep it (FreeBSD
            // forgets it, a bug its suite's client-server-not-updating-cookie and
            // cookie-update scripts show).
            _ if data_acked => None,
            _ => {
                st.tfo_pathoff += 1;
                Some(TfoNews::NoFastOpen)
            }
        };
        if t.syn_data > 0 {
            if diff(ack, iss) == 1 + t.syn_data {
                st.tfo_syndata_acked += 1;
            } else {
                st.tfo_syndata_rexmit += 1;
            }
        }
    }

    /// After the SYN-ACK's acknowledgment: the data of our SYN it did not cover
    /// goes again at once (RFC 7413 §4.2.1: "the client retransmits the data
    /// the server did not acknowledge"), as a retransmission.
    pub(super) fn fastopen_resend(&mut self) {
        if self.tfo.as_ref().is_some_and(|t| t.syn_data > 0) && lt(self.snd_una, self.snd_max) {
            self.snd_nxt = self.snd_una;
        }
    }
}
