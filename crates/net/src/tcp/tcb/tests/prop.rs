//! A randomized differential check of a `Tcb` pair (issue 46, item 5): A writes
//! what the case says, in chunks with idle periods between them, and shuts down;
//! B, with a small receive buffer, reads at the pace the case says (long pauses
//! shut its window), and closes at the end of the stream; the link loses, reorders
//! and duplicates segments, all in virtual time. What B reads must be what A wrote,
//! in order, and both must close cleanly. Along the way:
//! - what is outstanding is covered by a running timer, the retransmission timer or
//!   the persist timer (RFC 6298 §5.1);
//! - a side that owes the peer data or a FIN sends something (data, a
//!   retransmission, a window probe, the FIN) within `max_rto` and a margin of
//!   its last send or the peer's last acknowledgment of something new (twice
//!   `max_rto` with the window shut: a timeout there sends nothing, and the
//!   persist timer's first probe follows a timeout later): a stall, window open
//!   or shut, is a bug (C1 of the issue stalled for ever after a
//!   window reopened short of the probe byte);
//! - nothing is sent beyond what SND.MAX counts (a NewReno retransmission once
//!   ran past it, and the peer's ACK of it was refused for ever);
//! - no honest segment is discarded: no ACK beyond SND.MAX or too old, and without
//!   reordering or duplication (which make old duplicates PAWS rightly drops) no
//!   PAWS drop, even after a blind segment with an impossible ACK and a far-future
//!   TSval (C2: it used to set TS.Recent, and PAWS then dropped the peer's data).
//!
//! `MPSTACK_TCP_PROP_CASES` sets the number of cases (default 256, well under a second):
//! `MPSTACK_TCP_PROP_CASES=20000 cargo test -p net --lib tcp::tcb::tests::prop`
//! for a long run; `scripts/fuzz-smoke.sh` runs 100,000 from a new seed each time.

use super::*;
use proptest::prelude::*;

/// The bound on the retransmission (and persist) timeout the cases run with.
const MAX_RTO: Duration = Duration::from_secs(3);
/// Beyond [`MAX_RTO`], how long a side owing something may stay silent.
const MARGIN: Duration = Duration::from_secs(1);

#[derive(Clone, Debug)]
struct Case {
    seed: u64,
    delay_ms: u64,
    loss: f64,
    reorder: f64,
    dup: f64,
    /// B's receive buffer.
    rcvbuf: usize,
    ts: bool,
    sack: bool,
    wscale: bool,
    nodelay: bool,
    /// A's writes: (pause before, bytes).
    writes: Vec<(u64, usize)>,
    /// B's reads: (pause before, at most bytes); then it reads all, every 10 ms.
    reads: Vec<(u64, usize)>,
    /// A blind segment to B, this many ms after the handshake (C2's forgery).
    attack_ms: Option<u64>,
}

/// A pause: mostly short, sometimes longer than the RTO (an idle period or a
/// reader that leaves the window shut).
fn pause() -> impl Strategy<Value = u64> {
    prop_oneof![3 => 0u64..30, 1 => 300u64..5000]
}

fn rate() -> impl Strategy<Value = f64> {
    prop_oneof![2 => Just(0.0), 1 => 0.0..0.08]
}

fn case() -> impl Strategy<Value = Case> {
    (
        (any::<u64>(), 1u64..40, rate(), rate(), rate()),
        (
            500usize..20_000,
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        ),
        proptest::collection::vec((pause(), 1usize..6000), 1..12),
        proptest::collection::vec((pause(), 1usize..8000), 0..16),
        proptest::option::weighted(0.25, 0u64..3000),
    )
        .prop_map(
            |(
                (seed, delay_ms, loss, reorder, dup),
                (rcvbuf, ts, sack, wscale, nodelay),
                writes,
                reads,
                attack_ms,
            )| {
                // The forgery's harm shows as PAWS drops, counted only on a link
                // that makes no old duplicates.
                let (reorder, dup) = if attack_ms.is_some() {
                    (0.0, 0.0)
                } else {
                    (reorder, dup)
                };
                Case {
                    seed,
                    delay_ms,
                    loss,
                    reorder,
                    dup,
                    rcvbuf,
                    ts: ts || attack_ms.is_some(),
                    sack,
                    wscale,
                    nodelay,
                    writes,
                    reads,
                    attack_ms,
                }
            },
        )
}

/// Whether `t` is synchronized and may still send data or its FIN.
fn sending(t: &Tcb) -> bool {
    matches!(
        t.state,
        State::Established | State::CloseWait | State::FinWait1 | State::Closing | State::LastAck
    )
}

/// Whether `t` still owes its peer data or a FIN.
fn owes(t: &Tcb) -> bool {
    sending(t) && (t.fin_seq() != t.snd_una || t.fin_queued)
}

/// RFC 6298 §5.1: what is outstanding has a timer.
fn covered(t: &Tcb) -> bool {
    !sending(t) || t.flight() == 0 || t.rtx_deadline.is_some() || t.persist_deadline.is_some()
}

fn run(c: &Case) -> Result<(), TestCaseError> {
    let cfg_a = TcpConfig {
        timestamps: c.ts,
        sack: c.sack,
        window_scaling: c.wscale,
        nodelay: c.nodelay,
        max_rto: MAX_RTO,
        // Long enough for the peer's FIN retransmitted at MAX_RTO, lost a few
        // times (this pair has no closed port to answer it with a reset).
        time_wait: MAX_RTO * 6,
        ..TcpConfig::default()
    };
    let cfg_b = TcpConfig {
        rcvbuf: c.rcvbuf,
        ..cfg_a
    };
    let link = Link {
        delay: Duration::from_millis(c.delay_ms),
        loss: c.loss,
        dup: c.dup,
        reorder: c.reorder,
        spacing: Duration::ZERO,
    };
    let mut p = Pair::new(cfg_a, cfg_b, link, c.seed);
    let up = p.run_until(Duration::from_secs(120), |p| {
        p.a.state() == State::Established
            && p.b
                .as_ref()
                .is_some_and(|b| b.state() == State::Established)
    });
    prop_assert!(up, "no handshake: {:?}", p.a.state());

    let total: usize = c.writes.iter().map(|w| w.1).sum();
    let src: Vec<u8> = (0..total).map(|i| (i * 7 + i / 253) as u8).collect();
    let ms = Duration::from_millis;
    let t0 = p.now;
    let pauses: u64 = c.writes.iter().chain(&c.reads).map(|x| x.0).sum();
    let deadline = t0 + ms(pauses) + Duration::from_secs(300);
    let (mut wi, mut written, mut chunk_left) = (0usize, 0usize, c.writes[0].1);
    let mut next_write = t0 + ms(c.writes[0].0);
    let mut ri = 0usize;
    let mut next_read = t0 + ms(c.reads.first().map_or(10, |r| r.0));
    let mut attack_at = c.attack_ms.map(|a| t0 + ms(a));
    let mut attacks = 0u64;
    let (mut a_closed, mut b_closed) = (false, false);
    let mut got = Vec::with_capacity(total);
    let mut buf = vec![0u8; 65536];
    let mut seen = p.log.len();
    // Per side (A, B): when it last sent something, and whether it owed then.
    let mut last_sent = [p.now; 2];
    let mut owed = [false; 2];
    let mut una = [p.a.snd_una, p.b().snd_una];
    loop {
        let now = p.now;
        // A writes its chunks, then shuts down.
        if wi < c.writes.len() && now >= next_write {
            let n = p.a.send(&src[written..written + chunk_left]);
            written += n;
            chunk_left -= n;
            if chunk_left == 0 {
                wi += 1;
                if let Some(&(gap, len)) = c.writes.get(wi) {
                    chunk_left = len;
                    next_write = now + ms(gap);
                }
            } else {
                // The send buffer is full: again later.
                next_write = now + ms(10);
            }
        }
        if wi == c.writes.len() && !a_closed {
            p.a.close();
            a_closed = true;
        }
        // B reads at its pace, then everything; closes at the end of the stream.
        if now >= next_read {
            let most = c.reads.get(ri).map_or(usize::MAX, |r| r.1);
            let mut taken = 0;
            while taken < most {
                let want = (most - taken).min(buf.len());
                let n = p.b().recv(&mut buf[..want]);
                if n == 0 {
                    break;
                }
                let at = got.len();
                prop_assert!(
                    at + n <= total && buf[..n] == src[at..at + n],
                    "B read bytes A did not write at {at}"
                );
                got.extend_from_slice(&buf[..n]);
                taken += n;
            }
            ri += 1;
            next_read = now + ms(c.reads.get(ri).map_or(10, |r| r.0));
        }
        if !b_closed && p.b().recv_finished() {
            prop_assert_eq!(got.len(), total, "the stream ended early");
            p.b().close();
            b_closed = true;
        }
        // C2's forgery: in the window, an ACK beyond SND.NXT, a far-future TSval.
        if attack_at.is_some_and(|t| now >= t) {
            let b = p.b();
            if b.state() != State::Established {
                attack_at = None;
            } else if b.last_ack_sent == b.rcv_nxt && b.rcv_window() > 0 {
                let s = SegIn {
                    seq: b.rcv_nxt,
                    ack: Some(b.snd_max.wrapping_add(9999)),
                    fin: true,
                    wnd: 1000,
                    ts: Some((b.ts_recent.wrapping_add(200_000), 0)),
                    ..SegIn::default()
                };
                let b = p.b.as_mut().unwrap();
                b.input(&s, now, &mut p.sb);
                attacks += 1;
                attack_at = None;
            }
        }
        p.flush();
        // What was sent, and the invariants.
        for (from_a, s) in &p.log[seen..] {
            if s.data_len > 0 || s.fin || s.syn {
                last_sent[usize::from(!*from_a)] = now;
            }
            // Nothing sent beyond what SND.MAX counts as sent.
            let t = if *from_a { &p.a } else { p.b.as_ref().unwrap() };
            let end = s.seq.wrapping_add(s.data_len as u32 + u32::from(s.fin));
            prop_assert!(
                seq::le(end, t.snd_max),
                "sent up to {end}, SND.MAX {}: {:?}",
                t.snd_max,
                s
            );
        }
        seen = p.log.len();
        let b = p.b.as_ref().unwrap();
        for (side, t) in [(0, &p.a), (1, b)] {
            prop_assert!(
                covered(t),
                "side {side}: {} bytes outstanding, no timer: {:?}",
                t.flight(),
                t
            );
            let o = owes(t);
            // The clock starts when a side begins to owe, and again when the peer
            // acknowledges something (which restarts the retransmission timer,
            // RFC 6298 §5.3).
            if (o && !owed[side]) || t.snd_una != una[side] {
                last_sent[side] = now;
                una[side] = t.snd_una;
            }
            owed[side] = o;
            // A retransmission timeout that finds the window shut sends nothing,
            // and the persist timer's first probe follows an RTO later (as
            // FreeBSD's tcp_output, which starts TT_PERSIST then).
            let bound = if t.snd_wnd == 0 {
                MAX_RTO * 2 + MARGIN
            } else {
                MAX_RTO + MARGIN
            };
            prop_assert!(
                !o || now - last_sent[side] <= bound,
                "side {side} owes its peer and sent nothing for {:?}: {:?}",
                now - last_sent[side],
                t
            );
        }
        let done = got.len() == total
            && b_closed
            && matches!(p.a.state(), State::TimeWait | State::Closed)
            && b.state() == State::Closed;
        if done {
            break;
        }
        prop_assert!(
            p.now < deadline,
            "not done at {:?}: read {} of {total}; a={:?} b={:?}",
            p.now - t0,
            got.len(),
            p.a.state(),
            b.state()
        );
        let app = next_read.min(if wi < c.writes.len() {
            next_write
        } else {
            next_read
        });
        p.step_by(Some(app.max(p.now)));
    }
    prop_assert_eq!(p.a.error(), None);
    prop_assert_eq!(p.b().error(), None);
    for (side, st) in [("A", &p.sa), ("B", &p.sb)] {
        let forged = if side == "B" { attacks } else { 0 };
        prop_assert_eq!(
            st.rcvacktoomuch,
            forged,
            "{} took an ACK beyond SND.MAX",
            side
        );
        prop_assert_eq!(st.rcvacktooold, 0, "{} took too old an ACK", side);
        if c.reorder == 0.0 && c.dup == 0.0 {
            prop_assert_eq!(st.pawsdrop, 0, "{} dropped an honest segment (PAWS)", side);
        }
    }
    Ok(())
}

fn env(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// The cases run: `MPSTACK_TCP_PROP_CASES` of them (default 256), from the seed
/// `MPSTACK_TCP_PROP_SEED` (default fixed: the same cases every run).
fn config() -> ProptestConfig {
    use proptest::test_runner::RngSeed;
    ProptestConfig {
        cases: env("MPSTACK_TCP_PROP_CASES").map_or(256, |n| n as u32),
        rng_seed: RngSeed::Fixed(env("MPSTACK_TCP_PROP_SEED").unwrap_or(46)),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_pair_delivers_every_byte_without_stalls_or_discarded_segments(c in case()) {
        run(&c)?;
    }
}
