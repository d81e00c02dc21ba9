//! Two control blocks talking over a seeded link in virtual time.

use super::*;
use dev::rng::Rng;

mod prop;

/// A segment in flight: header plus its bytes.
#[derive(Clone, Debug)]
struct Wire {
    seg: SegOut,
    data: Vec<u8>,
}

fn to_in(w: &Wire) -> SegIn<'_> {
    SegIn::from_out(&w.seg, &w.data)
}

#[derive(Clone, Copy, Debug)]
struct Link {
    delay: Duration,
    loss: f64,
    dup: f64,
    reorder: f64,
    /// Time between the arrivals of segments sent together (serialization).
    spacing: Duration,
}

impl Default for Link {
    fn default() -> Self {
        Link {
            delay: Duration::from_millis(5),
            loss: 0.0,
            dup: 0.0,
            reorder: 0.0,
            spacing: Duration::ZERO,
        }
    }
}

struct Pair {
    now: Instant,
    a: Tcb,
    b: Option<Tcb>,
    sa: TcpStat,
    sb: TcpStat,
    /// In flight: (arrival, sequence, to_b, segment).
    flight: Vec<(Instant, u64, bool, Wire)>,
    n: u64,
    rng: Rng,
    link: Link,
    cfg_b: TcpConfig,
    /// Segments A and B sent (for tests that inspect them).
    log: Vec<(bool, SegOut)>,
    /// Drop everything (a dead peer) when true.
    blackhole: bool,
    /// Data bytes from A that the link lost.
    lost_a_bytes: u64,
    /// The last arrival scheduled each way (B to A, A to B), for `Link::spacing`.
    last_arrival: [Instant; 2],
    /// B listens with TCP Fast Open, and this is the cookie it gives A (what the
    /// stack's `fastopen` and `listen` do, played here).
    tfo_cookie: Option<FoCookie>,
}

impl Pair {
    fn new(cfg_a: TcpConfig, cfg_b: TcpConfig, link: Link, seed: u64) -> Pair {
        let mut sa = TcpStat::default();
        let a = Tcb::connect(cfg_a, 0xfff0_0000 ^ seed as u32, &mut sa);
        Pair {
            now: Instant::from_secs(1),
            a,
            b: None,
            sa,
            sb: TcpStat::default(),
            flight: Vec::new(),
            n: 0,
            rng: Rng::new(seed),
            link,
            cfg_b,
            log: Vec::new(),
            blackhole: false,
            lost_a_bytes: 0,
            last_arrival: [Instant::ZERO; 2],
            tfo_cookie: None,
        }
    }

    fn b(&mut self) -> &mut Tcb {
        self.b.as_mut().expect("b exists")
    }

    fn send(&mut self, from_a: bool, segs: Vec<SegOut>) {
        for seg in segs {
            let t = if from_a {
                &self.a
            } else {
                self.b.as_ref().unwrap()
            };
            let mut data = vec![0u8; seg.data_len];
            t.copy_payload(&seg, &mut data);
            self.log.push((from_a, seg));
            if self.blackhole || self.rng.chance(self.link.loss) {
                if from_a {
                    self.lost_a_bytes += seg.data_len as u64;
                }
                continue;
            }
            let copies = if self.rng.chance(self.link.dup) { 2 } else { 1 };
            for _ in 0..copies {
                let last = &mut self.last_arrival[usize::from(from_a)];
                let mut at = (self.now + self.link.delay).max(*last + self.link.spacing);
                if self.link.spacing > Duration::ZERO {
                    *last = at;
                }
                if self.rng.chance(self.link.reorder) {
                    at += Duration::from_millis(3);
                }
                self.n += 1;
                self.flight.push((
                    at,
                    self.n,
                    from_a,
                    Wire {
                        seg,
                        data: data.clone(),
                    },
                ));
            }
        }
    }

    /// Lets both sides send what they want now.
    fn flush(&mut self) {
        for _ in 0..64 {
            let mut out = Vec::new();
            self.a.output(self.now, &mut self.sa, &mut out);
            let any_a = !out.is_empty();
            self.send(true, out);
            let mut out = Vec::new();
            if let Some(b) = self.b.as_mut() {
                b.output(self.now, &mut self.sb, &mut out);
            }
            let any_b = !out.is_empty();
            self.send(false, out);
            if !any_a && !any_b {
                break;
            }
        }
    }

    /// Advances to the next event (arrival or timer); false when nothing is pending.
    fn step(&mut self) -> bool {
        self.step_by(None)
    }

    /// [`Pair::step`], with `app` the time of the applications' next action, an
    /// event too.
    fn step_by(&mut self, app: Option<Instant>) -> bool {
        self.flush();
        let next_arrival = self.flight.iter().map(|f| (f.0, f.1)).min();
        let timers = [
            Some(self.a.poll_at()),
            self.b.as_ref().map(|b| b.poll_at()),
            Some(app),
        ];
        let next_timer = timers.into_iter().flatten().flatten().min();
        let t = match (next_arrival.map(|x| x.0), next_timer) {
            (Some(x), Some(y)) => x.min(y),
            (Some(x), None) | (None, Some(x)) => x,
            (None, None) => return false,
        };
        self.now = self.now.max(t);
        // Deliver everything due, in order.
        while let Some(i) = self
            .flight
            .iter()
            .enumerate()
            .filter(|(_, f)| f.0 <= self.now)
            .min_by_key(|(_, f)| (f.0, f.1))
            .map(|(i, _)| i)
        {
            let (_, _, to_b, w) = self.flight.remove(i);
            let seg = to_in(&w);
            if to_b {
                match self.b.as_mut() {
                    Some(b) => b.input(&seg, self.now, &mut self.sb),
                    None => {
                        if let Some(mut t) = Tcb::accept(self.cfg_b, 0x1234_5678, &seg) {
                            if let (Some(valid), Some(asked)) = (self.tfo_cookie, seg.fast_open) {
                                let ok = !asked.is_empty() && asked == valid;
                                t.accept_fastopen((!ok).then_some(valid), ok, &seg);
                            }
                            self.b = Some(t);
                        }
                    }
                }
            } else {
                self.a.input(&seg, self.now, &mut self.sa);
            }
        }
        true
    }

    fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Pair) -> bool) -> bool {
        let end = self.now + limit;
        while self.now < end {
            if done(self) {
                return true;
            }
            if !self.step() {
                return done(self);
            }
        }
        done(self)
    }

    /// Sends `total` bytes from A to B (and, if `both`, B to A), reading as they come.
    fn transfer(&mut self, total: usize, both: bool, limit: Duration) -> (Vec<u8>, Vec<u8>) {
        let src: Vec<u8> = (0..total).map(|i| (i * 31 + i / 251) as u8).collect();
        let (mut sent_a, mut sent_b) = (0, 0);
        let (mut got_b, mut got_a) = (Vec::new(), Vec::new());
        let mut buf = vec![0u8; 65536];
        let ok = self.run_until(limit, |p| {
            if p.a.state() == State::Established || p.a.state() == State::CloseWait {
                sent_a += p.a.send(&src[sent_a..]);
            }
            if let Some(b) = p.b.as_mut() {
                if both && matches!(b.state(), State::Established | State::CloseWait) {
                    sent_b += b.send(&src[sent_b..]);
                }
                loop {
                    let n = b.recv(&mut buf);
                    if n == 0 {
                        break;
                    }
                    got_b.extend_from_slice(&buf[..n]);
                }
            }
            loop {
                let n = p.a.recv(&mut buf);
                if n == 0 {
                    break;
                }
                got_a.extend_from_slice(&buf[..n]);
            }
            got_b.len() == total && (!both || got_a.len() == total)
        });
        assert!(
            ok,
            "transfer did not finish: a={} b={} of {total}; {:?}",
            got_a.len(),
            got_b.len(),
            self.a
        );
        assert_eq!(got_b, src, "A→B bytes differ");
        if both {
            assert_eq!(got_a, src, "B→A bytes differ");
        }
        (got_a, got_b)
    }

    fn established(&mut self) {
        let ok = self.run_until(Duration::from_secs(30), |p| {
            p.a.state() == State::Established
                && p.b
                    .as_ref()
                    .is_some_and(|b| b.state() == State::Established)
        });
        assert!(
            ok,
            "no handshake: a={:?} b={:?}",
            self.a.state(),
            self.b.as_ref().map(|b| b.state())
        );
    }
}

fn quick() -> TcpConfig {
    TcpConfig {
        time_wait: Duration::from_secs(2),
        ..TcpConfig::default()
    }
}

#[test]
fn handshake_negotiates_mss_window_scale_and_timestamps() {
    let mut p = Pair::new(
        quick(),
        TcpConfig {
            mss: 1200,
            ..quick()
        },
        Link::default(),
        1,
    );
    p.established();
    assert_eq!(p.a.mss(), 1200);
    assert_eq!(p.b().mss(), 1200);
    assert!(p.a.ts_enabled && p.b.as_ref().unwrap().ts_enabled);
    assert_eq!(p.a.snd_wscale, p.b.as_ref().unwrap().rcv_wscale);
    assert!(p.a.rcv_wscale > 0, "256 KiB buffers need scaling");
    assert_eq!(p.sa.connects, 1);
    assert_eq!(p.sb.accepts, 1);
    // Without options on one side, neither scaling nor timestamps.
    let plain = TcpConfig {
        window_scaling: false,
        timestamps: false,
        ..quick()
    };
    let mut p = Pair::new(quick(), plain, Link::default(), 2);
    p.established();
    assert!(!p.a.ts_enabled && !p.b.as_ref().unwrap().ts_enabled);
    assert_eq!((p.a.snd_wscale, p.a.rcv_wscale), (0, 0));
}

#[test]
fn bulk_transfer_both_ways_is_byte_exact() {
    let mut p = Pair::new(quick(), quick(), Link::default(), 3);
    p.established();
    p.transfer(2_000_000, true, Duration::from_secs(120));
    assert_eq!(p.sa.sndrexmitpack, 0, "no loss, no retransmission");
    assert!(p.a.cwnd() > 10 * p.a.mss(), "slow start opened the window");
}

#[test]
fn transfers_survive_loss_reordering_and_duplication() {
    for (i, link) in [
        Link {
            loss: 0.01,
            ..Link::default()
        },
        Link {
            loss: 0.05,
            ..Link::default()
        },
        Link {
            loss: 0.20,
            ..Link::default()
        },
        Link {
            reorder: 0.2,
            dup: 0.1,
            ..Link::default()
        },
        Link {
            delay: Duration::from_millis(50),
            loss: 0.05,
            reorder: 0.05,
            dup: 0.05,
            ..Link::default()
        },
    ]
    .into_iter()
    .enumerate()
    {
        let mut p = Pair::new(quick(), quick(), link, 10 + i as u64);
        p.established();
        // One way (ACKs without data: duplicate ACKs count), then both ways.
        p.transfer(300_000, false, Duration::from_secs(3600));
        p.transfer(100_000, true, Duration::from_secs(3600));
        if link.loss > 0.0 {
            assert!(
                p.sa.sndrexmitpack > 0,
                "{link:?}: losses were repaired by retransmission"
            );
        }
        if link.loss >= 0.05 && link.delay < Duration::from_millis(50) {
            assert!(
                p.sa.fastrexmit + p.sb.fastrexmit > 0,
                "{link:?}: fast retransmit used: {:?}",
                p.sa
            );
        }
    }
}

#[test]
fn orderly_close_passes_through_time_wait() {
    let mut p = Pair::new(quick(), quick(), Link::default(), 4);
    p.established();
    p.transfer(10_000, false, Duration::from_secs(10));
    p.a.close();
    assert!(p.run_until(Duration::from_secs(5), |p| p.b().state()
        == State::CloseWait
        && p.a.state() == State::FinWait2));
    assert!(p.b().recv_finished());
    // Half-close: B may still send.
    assert_eq!(p.b().send(b"late words"), 10);
    let mut buf = [0u8; 32];
    assert!(p.run_until(Duration::from_secs(5), |p| p.a.recv_available() == 10));
    assert_eq!(p.a.recv(&mut buf), 10);
    p.b().close();
    assert!(p.run_until(Duration::from_secs(5), |p| p.b().state() == State::Closed));
    assert_eq!(p.a.state(), State::TimeWait);
    // TIME_WAIT lasts 2 MSL (2 s here), then the block is closed.
    let t0 = p.now;
    assert!(p.run_until(Duration::from_secs(10), |p| p.a.state() == State::Closed));
    assert!(
        p.now - t0 >= Duration::from_secs(2) - Duration::from_millis(20),
        "{:?}",
        p.now - t0
    );
    assert_eq!(p.a.error(), None);
    assert_eq!(p.b().error(), None);
}

#[test]
fn simultaneous_close_goes_through_closing() {
    let mut p = Pair::new(quick(), quick(), Link::default(), 5);
    p.established();
    p.a.close();
    p.b().close();
    assert!(
        p.run_until(Duration::from_secs(1), |p| p.a.state() == State::TimeWait
            && p.b().state() == State::TimeWait)
    );
    assert!(p.log.iter().any(|_| true));
}

#[test]
fn simultaneous_open() {
    let cfg = quick();
    let (mut sa, mut sb) = (TcpStat::default(), TcpStat::default());
    let mut a = Tcb::connect(cfg, 100, &mut sa);
    let mut b = Tcb::connect(cfg, 9000, &mut sb);
    let now = Instant::from_secs(1);
    let (mut oa, mut ob) = (Vec::new(), Vec::new());
    a.output(now, &mut sa, &mut oa);
    b.output(now, &mut sb, &mut ob);
    let wa: Vec<Wire> = oa
        .iter()
        .map(|s| Wire {
            seg: *s,
            data: vec![],
        })
        .collect();
    let wb: Vec<Wire> = ob
        .iter()
        .map(|s| Wire {
            seg: *s,
            data: vec![],
        })
        .collect();
    for w in &wb {
        a.input(&to_in(w), now, &mut sa);
    }
    for w in &wa {
        b.input(&to_in(w), now, &mut sb);
    }
    assert_eq!(
        (a.state(), b.state()),
        (State::SynReceived, State::SynReceived)
    );
    // Each answers with SYN-ACK; each SYN-ACK completes the other side.
    let (mut oa, mut ob) = (Vec::new(), Vec::new());
    a.output(now, &mut sa, &mut oa);
    b.output(now, &mut sb, &mut ob);
    assert!(oa.iter().any(|s| s.syn && s.ack_flag));
    for s in &ob {
        a.input(
            &to_in(&Wire {
                seg: *s,
                data: vec![],
            }),
            now,
            &mut sa,
        );
    }
    for s in &oa {
        b.input(
            &to_in(&Wire {
                seg: *s,
                data: vec![],
            }),
            now,
            &mut sb,
        );
    }
    assert_eq!(
        (a.state(), b.state()),
        (State::Established, State::Established)
    );
}

#[test]
fn rto_backs_off_exponentially_then_gives_up() {
    let cfg = TcpConfig {
        max_retries: 5,
        ..quick()
    };
    let mut p = quiet_pair_with(cfg, 6);
    p.blackhole = true;
    p.a.send(&[7u8; 1000]);
    let start = p.log.len();
    assert!(p.run_until(Duration::from_secs(600), |p| p.a.state() == State::Closed));
    assert_eq!(p.a.error(), Some(TcpError::TimedOut));
    assert_eq!(p.sa.timeoutdrop, 1);
    // The first send plus 5 retransmissions, each gap twice the one before.
    let sends = p.log[start..]
        .iter()
        .filter(|(a, s)| *a && s.data_len > 0)
        .count();
    assert_eq!(
        sends,
        6,
        "original + max_retries retransmissions: {:?}",
        &p.log[start..]
    );
    assert_eq!(p.sa.rexmttimeo, 5);
}

#[test]
fn rto_doubles_per_timeout() {
    let cfg = quick();
    let mut p = quiet_pair_with(cfg, 7);
    p.blackhole = true;
    p.a.send(&[1u8; 100]);
    p.flush();
    let mut rtos = vec![p.a.rto()];
    for _ in 0..4 {
        let before = p.sa.rexmttimeo;
        assert!(p.run_until(Duration::from_secs(600), |p| p.sa.rexmttimeo > before));
        rtos.push(p.a.rto());
    }
    for w in rtos.windows(2) {
        assert_eq!(w[1], (w[0] * 2).min(cfg.max_rto), "{rtos:?}");
    }
}

#[test]
fn connecting_to_a_silent_host_retries_the_syn_then_times_out() {
    let cfg = TcpConfig {
        syn_retries: 3,
        ..quick()
    };
    let mut p = Pair::new(cfg, cfg, Link::default(), 8);
    p.blackhole = true;
    assert!(p.run_until(Duration::from_secs(600), |p| p.a.state() == State::Closed));
    assert_eq!(p.a.error(), Some(TcpError::TimedOut));
    assert_eq!(p.log.iter().filter(|(_, s)| s.syn).count(), 4);
}

#[test]
fn refused_connection() {
    let mut st = TcpStat::default();
    let mut a = Tcb::connect(quick(), 500, &mut st);
    let mut out = Vec::new();
    a.output(Instant::ZERO, &mut st, &mut out);
    let syn = Wire {
        seg: out[0],
        data: vec![],
    };
    let rst = reset_for(&to_in(&syn)).unwrap();
    assert!(rst.rst && rst.ack_flag && rst.ack == 501);
    a.input(
        &to_in(&Wire {
            seg: rst,
            data: vec![],
        }),
        Instant::ZERO,
        &mut st,
    );
    assert_eq!(
        (a.state(), a.error()),
        (State::Closed, Some(TcpError::Refused))
    );
}

/// An established pair with nothing in flight, for hand-made segments.
fn quiet_pair(seed: u64) -> Pair {
    quiet_pair_with(quick(), seed)
}

fn quiet_pair_with(cfg: TcpConfig, seed: u64) -> Pair {
    let mut p = Pair::new(cfg, cfg, Link::default(), seed);
    p.established();
    p.transfer(1000, false, Duration::from_secs(5));
    let quiet = p.run_until(Duration::from_secs(1), |p| {
        let b = p.b.as_ref().unwrap();
        p.flight.is_empty()
            && p.a.snd_una == p.a.snd_max
            && b.snd_una == b.snd_max
            && p.a.delack_deadline.is_none()
            && b.delack_deadline.is_none()
    });
    assert!(quiet);
    p
}

fn seg_to_a(p: &Pair) -> SegIn<'static> {
    SegIn {
        seq: p.a.rcv_nxt,
        ack: Some(p.a.snd_nxt),
        wnd: 1000,
        ts: p.a.ts_enabled.then_some((p.a.ts_recent, 0)),
        ..SegIn::default()
    }
}

/// A's output at `p.now`, logged.
fn a_output(p: &mut Pair) -> Vec<SegOut> {
    let mut out = Vec::new();
    p.a.output(p.now, &mut p.sa, &mut out);
    p.log.extend(out.iter().map(|s| (true, *s)));
    out
}

#[test]
fn rst_checks_of_rfc_5961() {
    // In the window but not exact: challenge ACK, connection kept.
    let mut p = quiet_pair(9);
    let mut s = seg_to_a(&p);
    s.rst = true;
    s.seq = p.a.rcv_nxt.wrapping_add(100);
    let now = p.now;
    p.a.input(&s, now, &mut p.sa);
    assert_eq!(p.a.state(), State::Established);
    assert_eq!(p.sa.challengeack, 1);
    let mut out = Vec::new();
    p.a.output(now, &mut p.sa, &mut out);
    assert!(
        out.iter()
            .any(|o| o.ack_flag && !o.rst && o.ack == p.a.rcv_nxt),
        "challenge ACK sent"
    );
    // Outside the window: ignored silently.
    s.seq = p.a.rcv_nxt.wrapping_add(10_000_000);
    p.a.input(&s, now, &mut p.sa);
    assert_eq!(p.a.state(), State::Established);
    assert_eq!(p.sa.rcvbadrst, 2);
    // Exactly at RCV.NXT: reset.
    s.seq = p.a.rcv_nxt;
    p.a.input(&s, now, &mut p.sa);
    assert_eq!(
        (p.a.state(), p.a.error()),
        (State::Closed, Some(TcpError::Reset))
    );
}

#[test]
fn syn_on_an_established_connection_gets_a_challenge_ack() {
    let mut p = quiet_pair(10);
    let mut s = seg_to_a(&p);
    s.syn = true;
    s.ack = None;
    let now = p.now;
    p.a.input(&s, now, &mut p.sa);
    assert_eq!(p.a.state(), State::Established);
    assert_eq!((p.sa.rcvbadsyn, p.sa.challengeack), (1, 1));
}

/// RFC 5961 §7, FreeBSD's ACK war protection: 80,000 in-window SYNs over eight
/// seconds draw at most `ack_war_cnt` (5) challenge ACKs in each one-second window,
/// the first five of them one each, and the rest are counted as skipped; the
/// connection lives on. Before, every SYN drew one (80,000 towards the real peer).
#[test]
fn in_window_syns_draw_at_most_five_challenge_acks_a_second() {
    let mut p = quiet_pair(10);
    let mut s = seg_to_a(&p);
    s.syn = true;
    s.ack = None;
    let t0 = p.now;
    let mut acks = Vec::new();
    let mut out = Vec::new();
    for i in 0..80_000u64 {
        let now = t0 + Duration::from_micros(100 * i);
        p.a.input(&s, now, &mut p.sa);
        out.clear();
        p.a.output(now, &mut p.sa, &mut out);
        acks.extend(out.iter().filter(|o| o.ack_flag && !o.rst).map(|_| now));
        if i < 5 {
            assert_eq!(
                acks.len() as u64,
                i + 1,
                "each of the first SYNs is answered"
            );
        }
    }
    assert_eq!(p.a.state(), State::Established);
    for w in acks.windows(6) {
        assert!(
            w[5] - w[0] >= Duration::from_secs(1),
            "six within a second: {w:?}"
        );
    }
    assert!(acks.len() <= 5 * 8, "{} challenge ACKs", acks.len());
    assert_eq!(p.sa.challengeack, acks.len() as u64);
    assert_eq!(p.sa.challengeack + p.sa.challengeack_ratelim, 80_000);
    // With the limit off, every one is answered.
    let mut p = quiet_pair_with(
        TcpConfig {
            ack_war_cnt: 0,
            ..quick()
        },
        10,
    );
    let mut s = seg_to_a(&p);
    s.syn = true;
    s.ack = None;
    let now = p.now;
    for _ in 0..100 {
        p.a.input(&s, now, &mut p.sa);
        out.clear();
        p.a.output(now, &mut p.sa, &mut out);
        assert!(out.iter().any(|o| o.ack_flag && !o.rst));
    }
    assert_eq!(p.sa.challengeack_ratelim, 0);
}

#[test]
fn paws_drops_an_old_duplicate() {
    let mut p = quiet_pair(11);
    let mut s = seg_to_a(&p);
    let old = p.a.ts_recent.wrapping_sub(1000);
    s.ts = Some((old, 0));
    s.payload = b"stale data from an old incarnation".into();
    let now = p.now;
    let before = p.a.recv_available();
    p.a.input(&s, now, &mut p.sa);
    assert_eq!(p.sa.pawsdrop, 1);
    assert_eq!(
        p.a.recv_available(),
        before,
        "the segment's data were not taken"
    );
    // The same bytes with a current timestamp are taken.
    s.ts = Some((p.a.ts_recent.wrapping_add(1), 0));
    p.a.input(&s, now, &mut p.sa);
    assert_eq!(p.a.recv_available(), before + s.payload.len());
}

/// An established pair whose receiver B has an 8 KiB buffer and no window
/// scaling: a window a sender shuts quickly.
fn small_window_pair(seed: u64) -> Pair {
    let small = TcpConfig {
        rcvbuf: 8192,
        window_scaling: false,
        ..quick()
    };
    let mut p = Pair::new(quick(), small, Link::default(), seed);
    p.established();
    p
}

#[test]
fn zero_window_is_probed_until_it_opens() {
    let mut p = small_window_pair(12);
    let data = vec![9u8; 40_000];
    let mut sent = p.a.send(&data);
    // B does not read: its window closes; A must keep probing, not give up.
    p.run_until(Duration::from_secs(60), |p| {
        sent += p.a.send(&data[sent..]);
        false
    });
    assert!(
        p.sa.sndprobe >= 2,
        "probes: {} a={:?} b={:?}",
        p.sa.sndprobe,
        p.a,
        p.b
    );
    assert_eq!(p.a.state(), State::Established);
    // The 8 KiB buffer, rounded up to whole segments once the MSS was known
    // (FreeBSD's tcp_mss): 6 × 1460.
    assert_eq!(p.b().buffer_sizes().1, 8760);
    assert_eq!(p.b().recv_available(), 8760);
    // Now B reads everything; the transfer completes.
    let mut got = Vec::new();
    let mut buf = vec![0u8; 4096];
    assert!(p.run_until(Duration::from_secs(120), |p| {
        sent += p.a.send(&data[sent..]);
        loop {
            let n = p.b().recv(&mut buf);
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        got.len() == data.len()
    }));
    assert_eq!(got, data);
}

#[test]
fn delayed_ack_acknowledges_every_second_segment_or_after_the_timeout() {
    let mut p = quiet_pair(13);
    let acks_before = p.log.iter().filter(|(a, s)| !*a && s.data_len == 0).count();
    // One small segment: B waits up to the delayed-ACK timeout.
    let delacks = p.sb.delack;
    p.a.send(b"x");
    p.flush();
    let t0 = p.now;
    assert!(p.run_until(Duration::from_secs(1), |p| p.sb.delack > delacks));
    assert!(p.now - t0 >= Duration::from_millis(40));
    let acks = p.log.iter().filter(|(a, s)| !*a && s.data_len == 0).count();
    assert_eq!(acks, acks_before + 1);
}

#[test]
fn nagle_coalesces_small_writes_unless_disabled() {
    for nodelay in [false, true] {
        let cfg = TcpConfig { nodelay, ..quick() };
        let mut p = Pair::new(cfg, quick(), Link::default(), 14);
        p.established();
        let before = p.log.iter().filter(|(a, s)| *a && s.data_len > 0).count();
        for _ in 0..10 {
            p.a.send(b"tiny");
            p.flush();
        }
        p.run_until(Duration::from_secs(2), |_| false);
        let segs = p.log.iter().filter(|(a, s)| *a && s.data_len > 0).count() - before;
        if nodelay {
            assert_eq!(segs, 10, "nodelay: one segment per write: {:?}", p.sb);
        } else {
            assert!(segs < 10, "Nagle coalesced: {segs} segments");
        }
        assert_eq!(p.b().recv_available(), 40);
    }
}

#[test]
fn out_of_order_queue_is_bounded() {
    let mut p = quiet_pair(15);
    let now = p.now;
    let base = p.a.rcv_nxt;
    for i in 0..1000u32 {
        let mut s = seg_to_a(&p);
        s.seq = base.wrapping_add(10 + i * 2);
        s.payload = b"z".into();
        p.a.input(&s, now, &mut p.sa);
    }
    assert!(p.a.ooo.len() <= p.a.cfg.ooo_max_segs);
    assert!(p.sa.rcvoodrop > 0);
    assert_eq!(p.a.state(), State::Established);
}

/// A window of segments behind one loss, more than the queue has entries: they
/// join the entry of the run they continue, so every one is kept (none dropped for
/// want of an entry) and all are delivered when the hole is filled. With an entry
/// per segment, those past `ooo_max_segs` were dropped though the window had room.
#[test]
fn a_window_of_segments_behind_one_hole_is_kept_whole() {
    let mut p = quiet_pair(16);
    let now = p.now;
    let base = p.a.rcv_nxt;
    let n = 2 * p.a.cfg.ooo_max_segs as u32;
    for i in 1..=n {
        let data = [(i % 251) as u8; 100];
        let mut s = seg_to_a(&p);
        s.seq = base.wrapping_add(i * 100);
        s.payload = data[..].into();
        p.a.input(&s, now, &mut p.sa);
    }
    assert_eq!(p.sa.rcvoodrop, 0, "{n} segments after the hole kept");
    assert_eq!(p.a.ooo.len(), 1, "one run, one entry");
    // A retransmission inside the run is not kept twice.
    let dup = [5u8; 100];
    let mut s = seg_to_a(&p);
    s.seq = base.wrapping_add(500);
    s.payload = dup[..].into();
    p.a.input(&s, now, &mut p.sa);
    assert_eq!(p.a.ooo.len(), 1);
    let first = [0u8; 100];
    let mut s = seg_to_a(&p);
    s.seq = base;
    s.payload = first[..].into();
    p.a.input(&s, now, &mut p.sa);
    assert_eq!(p.a.rcv_nxt, base.wrapping_add((n + 1) * 100));
    assert!(p.a.ooo.is_empty());
    let mut got = vec![0u8; ((n + 1) * 100) as usize];
    assert_eq!(p.a.recv(&mut got), got.len());
    for i in 1..=n as usize {
        assert!(
            got[i * 100..(i + 1) * 100]
                .iter()
                .all(|&b| b == (i % 251) as u8),
            "segment {i}"
        );
    }
}

#[test]
fn many_seeds_of_a_hostile_link_all_complete_byte_exact() {
    for seed in 0..24u64 {
        let link = Link {
            delay: Duration::from_millis(1 + seed % 20),
            loss: [0.0, 0.02, 0.1, 0.2][(seed % 4) as usize],
            dup: if seed % 3 == 0 { 0.05 } else { 0.0 },
            reorder: if seed % 5 == 0 { 0.1 } else { 0.0 },
            ..Link::default()
        };
        let small = TcpConfig {
            rcvbuf: 16 * 1024 + (seed as usize * 997),
            nodelay: seed % 2 == 0,
            ..quick()
        };
        let mut p = Pair::new(quick(), small, link, 100 + seed);
        p.established();
        p.transfer(60_000, seed % 2 == 1, Duration::from_secs(3600));
        p.a.close();
        p.b().close();
        let closed = p.run_until(Duration::from_secs(3600), |p| {
            matches!(p.a.state(), State::TimeWait | State::Closed)
                && matches!(
                    p.b.as_ref().unwrap().state(),
                    State::TimeWait | State::Closed
                )
        });
        assert!(
            closed,
            "seed {seed}: {:?} / {:?}",
            p.a.state(),
            p.b.as_ref().unwrap().state()
        );
    }
}

#[test]
fn random_segments_never_panic_and_keep_invariants() {
    let mut rng = Rng::new(77);
    for round in 0..200 {
        let mut p = quiet_pair(200 + round);
        let now = p.now;
        let payload = [0xabu8; 3000];
        for _ in 0..200 {
            let base_seq = p.a.rcv_nxt;
            let base_ack = p.a.snd_una;
            let jitter = |r: &mut Rng| -> u32 {
                match r.below(4) {
                    0 => 0,
                    1 => r.below(5000) as u32,
                    2 => (r.below(5000) as u32).wrapping_neg(),
                    _ => r.next_u32(),
                }
            };
            let seg = SegIn {
                seq: base_seq.wrapping_add(jitter(&mut rng)),
                ack: rng
                    .chance(0.9)
                    .then(|| base_ack.wrapping_add(jitter(&mut rng))),
                syn: rng.chance(0.05),
                fin: rng.chance(0.05),
                rst: rng.chance(0.03),
                wnd: rng.next_u32() as u16,
                mss: rng.chance(0.1).then(|| rng.next_u32() as u16),
                wscale: rng.chance(0.1).then(|| rng.next_u32() as u8),
                sack_perm: rng.chance(0.1),
                ts: rng
                    .chance(0.9)
                    .then(|| (p.a.ts_recent.wrapping_add(jitter(&mut rng)), rng.next_u32())),
                sack: [0; 4].map(|_| {
                    rng.chance(0.3).then(|| {
                        let l = base_ack.wrapping_add(jitter(&mut rng));
                        (l, l.wrapping_add(rng.below(4000) as u32))
                    })
                }),
                ece: rng.chance(0.05),
                cwr: rng.chance(0.05),
                ce: rng.chance(0.05),
                fast_open: rng
                    .chance(0.05)
                    .then(|| FoCookie::new(&[7; 8][..rng.below(2) as usize * 8]).unwrap()),
                payload: payload[..rng.below(3000) as usize].into(),
            };
            p.a.input(&seg, now, &mut p.sa);
            let mut out = Vec::new();
            p.a.output(now, &mut p.sa, &mut out);
            for o in &out {
                let mut buf = vec![0u8; o.data_len];
                p.a.copy_payload(o, &mut buf);
                let repr = o.to_repr(1, 2, &buf);
                assert!(
                    repr.header_len() - 20 + o.data_len <= p.a.mss() as usize,
                    "options and data fit the MSS"
                );
                assert!(o.data_len <= p.a.seg_size() as usize);
            }
            assert!(p.a.ooo.len() <= p.a.cfg.ooo_max_segs);
            assert!(p.a.rcvbuf.len() <= p.a.cfg.rcvbuf);
            assert!(p.a.sndbuf.len() <= p.a.cfg.sndbuf);
            if p.a.state() == State::Closed {
                break;
            }
        }
    }
}

#[test]
fn sack_recovery_retransmits_little_more_than_was_lost() {
    for loss in [0.01, 0.03, 0.05, 0.10] {
        let mut results = Vec::new();
        for sack in [true, false] {
            let cfg = TcpConfig { sack, ..quick() };
            let link = Link {
                loss,
                delay: Duration::from_millis(10),
                ..Link::default()
            };
            let mut p = Pair::new(cfg, cfg, link, (loss * 1000.0) as u64);
            p.established();
            assert_eq!(p.a.sack_perm, sack);
            p.transfer(1_000_000, false, Duration::from_secs(36_000));
            let sent_blocks = p.log.iter().any(|(a, s)| !*a && s.sack[0].is_some());
            assert_eq!(sent_blocks, sack, "SACK blocks only when negotiated");
            results.push((p.lost_a_bytes, p.sa.sndrexmitbyte, p.sa.rexmttimeo, p.now));
        }
        let (lost, rexmit, rtos, t_sack) = results[0];
        let (lost_n, rexmit_n, rtos_n, t_plain) = results[1];
        eprintln!(
            "loss {loss}: SACK lost {lost} B, resent {rexmit} B ({:.2}x), {rtos} RTOs, done at {t_sack}; \
             without SACK lost {lost_n} B, resent {rexmit_n} B ({:.2}x), {rtos_n} RTOs, done at {t_plain}",
            rexmit as f64 / lost.max(1) as f64,
            rexmit_n as f64 / lost_n.max(1) as f64
        );
        assert!(lost > 0);
        assert!(
            rexmit as f64 <= 1.5 * lost as f64,
            "loss {loss}: resent {rexmit} for {lost} lost"
        );
    }
}

#[test]
fn cubic_and_newreno_both_deliver_and_cubic_regrows_faster_on_a_long_path() {
    use crate::tcp::CongestionControl;
    let mut times = Vec::new();
    for cc in [CongestionControl::Cubic, CongestionControl::NewReno] {
        let cfg = big_buffers(cc);
        let link = Link {
            delay: Duration::from_millis(40),
            loss: 0.0005,
            ..Link::default()
        };
        let mut p = Pair::new(cfg, cfg, link, 99);
        p.established();
        let t0 = p.now;
        p.transfer(20_000_000, false, Duration::from_secs(36_000));
        times.push((cc, p.now - t0, p.sa.fastrexmit));
    }
    eprintln!("20 MB over 80 ms RTT at 0.05% loss: {times:?}");
    assert!(
        times[0].1 < times[1].1,
        "CUBIC recovers its window faster: {times:?}"
    );
}

#[test]
fn keepalive_probes_an_idle_peer_and_drops_a_dead_one() {
    let cfg = TcpConfig {
        keepalive: Some(Duration::from_secs(10)),
        keepalive_interval: Duration::from_secs(2),
        keepalive_probes: 3,
        ..quick()
    };
    let mut p = Pair::new(cfg, quick(), Link::default(), 31);
    p.established();
    p.transfer(1000, false, Duration::from_secs(5));
    // An idle but live peer answers every probe: the connection stays.
    p.run_until(Duration::from_secs(60), |_| false);
    assert_eq!(p.a.state(), State::Established);
    assert!(p.sa.keepprobe >= 4, "probes: {}", p.sa.keepprobe);
    let probe = p
        .log
        .iter()
        .rev()
        .find(|(a, s)| *a && s.data_len == 0 && s.seq == p.a.snd_una.wrapping_sub(1));
    assert!(probe.is_some(), "a probe carries SND.UNA - 1");
    // A dead peer: after idle + 3 intervals of silence, dropped as timed out.
    p.blackhole = true;
    let t0 = p.now;
    assert!(p.run_until(Duration::from_secs(60), |p| p.a.state() == State::Closed));
    assert_eq!(p.a.error(), Some(TcpError::TimedOut));
    assert_eq!(p.sa.keepdrops, 1);
    assert!(
        p.now - t0 <= Duration::from_secs(10 + 3 * 2 + 2),
        "{:?}",
        p.now - t0
    );
    // Without keepalive an idle connection sends nothing at all.
    let mut q = quiet_pair(32);
    let n = q.log.len();
    q.run_until(Duration::from_secs(600), |_| false);
    assert_eq!(q.log.len(), n);
    assert_eq!(q.a.state(), State::Established);
}

/// FIN_WAIT_2 of a connection whose application has closed (`detach`) ends after
/// `finwait2_timeout` of the peer's silence, closed without a reset and counted in
/// `finwait2_drops`; a peer that keeps talking (keepalive probes here) keeps it,
/// unless `fast_finwait2_recycle`, which counts from the close whatever arrives.
/// Shut down for writing only, it waits for the FIN as long as that takes.
#[test]
fn fin_wait_2_of_a_closed_connection_is_bounded() {
    let talky = TcpConfig {
        keepalive: Some(Duration::from_secs(10)),
        ..quick()
    };
    for recycle in [false, true] {
        let cfg = TcpConfig {
            fast_finwait2_recycle: recycle,
            ..quick()
        };
        let mut p = Pair::new(cfg, talky, Link::default(), 34);
        p.established();
        p.a.close();
        assert!(p.run_until(Duration::from_secs(5), |p| p.a.state() == State::FinWait2));
        p.run_until(Duration::from_secs(300), |_| false);
        assert_eq!(p.a.state(), State::FinWait2, "only shut down: no limit");
        p.a.detach(p.now);
        let first = p.now + Duration::from_secs(60);
        assert_eq!(p.a.fw2_deadline, Some(first));
        let ended = p.run_until(Duration::from_secs(300), |p| p.a.state() == State::Closed);
        if recycle {
            assert!(ended, "recycled");
        } else {
            // The peer's probes (every 10 s) moved the deadline on.
            assert!(!ended, "the peer's probes keep it");
            let last_heard = p.a.fw2_deadline.unwrap() - Duration::from_secs(60);
            assert!(last_heard > first && p.now - last_heard <= Duration::from_secs(11));
            // The peer falls silent: a minute after it was last heard, it ends.
            p.blackhole = true;
            assert!(p.run_until(Duration::from_secs(120), |p| p.a.state() == State::Closed));
        }
        assert_eq!(p.sa.finwait2_drops, 1, "recycle={recycle}");
        assert_eq!(p.a.error(), None);
        assert!(
            !p.log.iter().any(|(from_a, s)| *from_a && s.rst),
            "closed without a reset"
        );
    }
}

/// New data from the peer after the application has closed (not only shut down
/// for writing), before the peer's FIN: nobody will read it, so the connection is
/// reset and counted in `rcvafterclose` (FreeBSD's tcp_input, RFC 1122
/// §4.2.2.13). A socket only shut down for writing takes the data as before.
#[test]
fn new_data_after_the_close_resets_the_connection() {
    for closed in [false, true] {
        let mut p = Pair::new(quick(), quick(), Link::default(), 35);
        p.established();
        p.a.close();
        if closed {
            p.a.detach(p.now);
        }
        assert!(p.run_until(Duration::from_secs(5), |p| p.a.state() == State::FinWait2));
        // The peer still has something to say.
        assert_eq!(p.b().send(b"late"), 4);
        p.run_until(Duration::from_secs(5), |_| false);
        if closed {
            assert_eq!(p.a.state(), State::Closed);
            assert_eq!(p.sa.rcvafterclose, 1);
            assert_eq!(p.a.recv_available(), 0, "nothing taken");
            assert!(p.log.iter().any(|(from_a, s)| *from_a && s.rst), "A resets");
            assert_eq!(p.b().state(), State::Closed);
            assert_eq!(p.b().error(), Some(TcpError::Reset));
        } else {
            assert_eq!(p.a.state(), State::FinWait2, "half-closed: still reading");
            assert_eq!(p.sa.rcvafterclose, 0);
            assert_eq!(p.a.recv_available(), 4);
            assert!(!p.log.iter().any(|(_, s)| s.rst));
        }
    }
}

/// A connection whose application has closed, with data left to send and a peer
/// that answers every window probe with a zero window, is dropped with a reset
/// `persist_orphan_timeout` (60 s) after the close, counted in `persistdrop`; the
/// same connection still owned by its application keeps probing (RFC 1122
/// §4.2.2.17).
#[test]
fn a_closed_connection_facing_a_zero_window_is_dropped() {
    for closed in [false, true] {
        let mut p = small_window_pair(37);
        let data = vec![7u8; 40_000];
        let sent = p.a.send(&data);
        assert_eq!(sent, data.len());
        // B never reads: its window shuts, and A probes it.
        assert!(p.run_until(Duration::from_secs(30), |p| p.sa.sndprobe >= 2));
        assert_eq!(p.a.snd_wnd, 0);
        p.a.close();
        if closed {
            p.a.detach(p.now);
        }
        let (t0, probes, answers) = (p.now, p.sa.sndprobe, p.sb.sndacks);
        p.run_until(Duration::from_secs(59), |_| false);
        assert_ne!(p.a.state(), State::Closed, "held before the bound");
        assert_eq!(p.sa.persistdrop, 0);
        assert!(
            p.sa.sndprobe > probes && p.sb.sndacks > answers,
            "probed, answered"
        );
        assert_eq!(p.a.snd_wnd, 0, "with a shut window");
        let ended = p.run_until(Duration::from_secs(600), |p| p.a.state() == State::Closed);
        if closed {
            assert!(ended);
            dropped_at_the_orphan_bound(&p, t0);
            assert!(p.log.iter().any(|(from_a, s)| *from_a && s.rst), "A resets");
            assert_eq!(p.b().error(), Some(TcpError::Reset));
        } else {
            assert!(!ended, "the application still owns it: probed on");
            assert_eq!(p.sa.persistdrop, 0);
        }
    }
}

/// The same closed connection facing a peer that opens its window by a byte every
/// 20 s (and takes the tinygram, or not) is dropped at the same bound: only
/// acknowledged progress of a segment ends a detached connection's stall, not a
/// window that opens a little. Before, each such opening restarted the clock, and
/// the connection and its buffers were held for as long as the peer kept it up.
#[test]
fn a_closed_connection_facing_a_window_opened_a_byte_at_a_time_is_dropped() {
    let mut p = small_window_pair(38);
    let data = vec![7u8; 40_000];
    assert_eq!(p.a.send(&data), data.len());
    assert!(p.run_until(Duration::from_secs(30), |p| p.sa.sndprobe >= 2));
    p.a.close();
    p.a.detach(p.now);
    let t0 = p.now;
    let mut openings = 0;
    let mut next = t0 + Duration::from_secs(20);
    let ended = p.run_until(Duration::from_secs(600), |p| {
        if p.now >= next && p.a.state() != State::Closed {
            // A window update from B of one byte, for what A has had acknowledged.
            let s = SegIn {
                ack: Some(p.a.snd_una),
                wnd: 1,
                ..seg_to_a(p)
            };
            let now = p.now;
            p.a.input(&s, now, &mut p.sa);
            openings += 1;
            next = now + Duration::from_secs(20);
        }
        p.a.state() == State::Closed
    });
    assert!(ended, "held by {openings} one-byte windows");
    assert!(
        openings >= 2,
        "the window opened before the bound: {openings}"
    );
    dropped_at_the_orphan_bound(&p, t0);
}

/// A was dropped as timed out at `persist_orphan_timeout` (60 s) after `t0` (and
/// the few milliseconds this harness takes to notice), counted in `persistdrop`.
fn dropped_at_the_orphan_bound(p: &Pair, t0: Instant) {
    assert!(
        p.now - t0 <= Duration::from_millis(60_010),
        "{:?}",
        p.now - t0
    );
    assert_eq!(p.sa.persistdrop, 1);
    assert_eq!(p.a.error(), Some(TcpError::TimedOut));
}

/// A pair closed from both sides, A in TIME_WAIT.
fn closed_to_time_wait(seed: u64) -> Pair {
    let mut p = Pair::new(quick(), quick(), Link::default(), seed);
    p.established();
    p.a.close();
    p.b().close();
    assert!(p.run_until(Duration::from_secs(1), |p| p.a.state() == State::TimeWait));
    p
}

#[test]
fn time_wait_ignores_resets_and_admits_only_a_newer_incarnation() {
    let mut p = closed_to_time_wait(41);
    let now = p.now;
    // RFC 1337: a reset does not cut TIME_WAIT short.
    let rst = SegIn {
        seq: p.a.rcv_nxt,
        rst: true,
        ..SegIn::default()
    };
    p.a.input(&rst, now, &mut p.sa);
    assert_eq!(p.a.state(), State::TimeWait);
    // RFC 6191: a SYN with a newer timestamp may reuse the 4-tuple, an older one not.
    let newer = SegIn {
        seq: 1,
        syn: true,
        ts: Some((p.a.ts_recent.wrapping_add(10), 0)),
        ..SegIn::default()
    };
    let older = SegIn {
        seq: 1,
        syn: true,
        ts: Some((p.a.ts_recent.wrapping_sub(10), 0)),
        ..SegIn::default()
    };
    assert!(p.a.time_wait_accepts_syn(&newer));
    assert!(!p.a.time_wait_accepts_syn(&older));
    // Without timestamps: only a sequence number beyond the old connection's.
    let plain = TcpConfig {
        timestamps: false,
        ..quick()
    };
    let mut q = Pair::new(plain, plain, Link::default(), 42);
    q.established();
    q.a.close();
    q.b().close();
    assert!(q.run_until(Duration::from_secs(1), |q| q.a.state() == State::TimeWait));
    let beyond = SegIn {
        seq: q.a.rcv_nxt.wrapping_add(100_000),
        syn: true,
        ..SegIn::default()
    };
    let behind = SegIn {
        seq: q.a.rcv_nxt.wrapping_sub(100_000),
        syn: true,
        ..SegIn::default()
    };
    assert!(q.a.time_wait_accepts_syn(&beyond));
    assert!(!q.a.time_wait_accepts_syn(&behind));
    let live = quiet_pair(43);
    assert!(!live.a.time_wait_accepts_syn(&newer), "only in TIME_WAIT");
}

#[test]
fn tail_loss_probe_goes_out_before_the_timeout() {
    // A minimum RTO well above two round trips, so a probe has room before it.
    let cfg = TcpConfig {
        min_rto: Duration::from_millis(200),
        ..quick()
    };
    let mut p = quiet_pair_with(cfg, 21);
    p.blackhole = true;
    let mss = p.a.seg_size() as usize;
    let start = p.log.len();
    p.a.send(&vec![3u8; 3 * mss]);
    p.flush();
    let due = p.a.tlp_deadline.expect("a probe is scheduled");
    assert!(
        due < p.a.rtx_deadline.unwrap(),
        "before the retransmission timer"
    );
    assert!(p.run_until(Duration::from_secs(5), |p| p.sa.tlpprobes > 0
        || p.sa.rexmttimeo > 0));
    assert_eq!(p.sa.tlpprobes, 1, "a probe, not a timeout, came first");
    assert_eq!(p.sa.rexmttimeo, 0);
    let sent: Vec<_> = p.log[start..]
        .iter()
        .filter(|(a, s)| *a && s.data_len > 0)
        .collect();
    assert_eq!(sent.len(), 4, "three segments and the probe: {sent:?}");
    // One probe per episode: the next event is the timeout.
    let before = p.sa.tlpprobes;
    assert!(p.run_until(Duration::from_secs(5), |p| p.sa.rexmttimeo > 0));
    assert_eq!(p.sa.tlpprobes, before);
}

/// Moves A's segments to B and returns B's answers, held back (not delivered).
fn a_to_b_holding_answers(p: &mut Pair) -> Vec<Wire> {
    let mut out = Vec::new();
    p.a.output(p.now, &mut p.sa, &mut out);
    let b = p.b.as_mut().unwrap();
    for seg in out {
        let mut data = vec![0u8; seg.data_len];
        p.a.copy_payload(&seg, &mut data);
        b.input(&to_in(&Wire { seg, data }), p.now, &mut p.sb);
    }
    let mut answers = Vec::new();
    b.output(p.now, &mut p.sb, &mut answers);
    answers
        .into_iter()
        .map(|seg| Wire { seg, data: vec![] })
        .collect()
}

#[test]
fn spurious_timeout_is_undone_when_the_ack_echoes_an_older_timestamp() {
    let cfg = TcpConfig {
        delack: Duration::ZERO,
        ..quick()
    };
    let mut p = Pair::new(cfg, cfg, Link::default(), 22);
    p.established();
    let mss = p.a.seg_size() as usize;
    p.transfer(100 * mss, false, Duration::from_secs(30));
    assert!(p.run_until(Duration::from_secs(1), |p| p.flight.is_empty()
        && p.a.snd_una == p.a.snd_max));
    let (cwnd, ssthresh) = (p.a.cwnd(), p.a.ssthresh);
    // Four segments reach B; B's ACKs are held back past A's timeout.
    p.a.send(&vec![4u8; 4 * mss]);
    let held = a_to_b_holding_answers(&mut p);
    assert!(!held.is_empty());
    let rto_at = p.a.rtx_deadline.expect("timer armed");
    p.now = rto_at;
    // The timeout: A resends the first segment (B sees a duplicate).
    let _ = a_to_b_holding_answers(&mut p);
    assert_eq!(p.sa.rexmttimeo, 1);
    assert!(p.a.cwnd() < cwnd, "the timeout cut the window");
    // Now the held ACKs arrive: they echo the original transmissions' timestamps.
    p.now += Duration::from_millis(1);
    for w in &held {
        p.a.input(&to_in(w), p.now, &mut p.sa);
    }
    assert_eq!(p.sa.sndrexmitbad, 1, "the timeout was seen to be spurious");
    // Restored (then grown by the ACKs after the first, as slow start does).
    assert_eq!(p.a.ssthresh, ssthresh);
    assert!(
        p.a.cwnd() >= cwnd,
        "window restored: {} < {cwnd}",
        p.a.cwnd()
    );
    assert_eq!(
        p.a.snd_una, p.a.snd_max,
        "everything acknowledged, no go-back-N"
    );
}

#[test]
fn a_real_timeout_is_not_undone() {
    let cfg = TcpConfig {
        delack: Duration::ZERO,
        ..quick()
    };
    let mut p = Pair::new(cfg, cfg, Link::default(), 23);
    p.established();
    let mss = p.a.seg_size() as usize;
    p.transfer(20 * mss, false, Duration::from_secs(30));
    assert!(p.run_until(Duration::from_secs(1), |p| p.flight.is_empty()
        && p.a.snd_una == p.a.snd_max));
    // The segment is lost: B never sees it; only the retransmission arrives.
    p.a.send(&vec![5u8; mss]);
    let mut lost = Vec::new();
    p.a.output(p.now, &mut p.sa, &mut lost);
    p.now = p.a.rtx_deadline.expect("timer armed");
    let answers = a_to_b_holding_answers(&mut p);
    assert_eq!(p.sa.rexmttimeo, 1);
    p.now += Duration::from_millis(1);
    for w in &answers {
        p.a.input(&to_in(w), p.now, &mut p.sa);
    }
    assert_eq!(p.a.snd_una, p.a.snd_max);
    assert_eq!(p.sa.sndrexmitbad, 0, "the ACK echoes the retransmission");
}

#[test]
fn data_with_an_ack_too_old_for_any_window_is_dropped_with_a_challenge_ack() {
    let mut p = quiet_pair(24);
    // Move SND.UNA well past the largest window the peer offered.
    p.transfer(2_000_000, false, Duration::from_secs(60));
    assert!(p.run_until(Duration::from_secs(1), |p| p.flight.is_empty()));
    let before = p.a.recv_available();
    let payload = [9u8; 100];
    let mut s = seg_to_a(&p);
    s.ack = Some(p.a.snd_una.wrapping_sub(p.a.max_snd_wnd).wrapping_sub(1000));
    s.payload = (&payload).into();
    let now = p.now;
    p.a.input(&s, now, &mut p.sa);
    assert_eq!((p.sa.rcvacktooold, p.sa.challengeack), (1, 1));
    assert_eq!(
        p.a.recv_available(),
        before,
        "the injected data was not taken"
    );
    assert_eq!(p.a.state(), State::Established);
    // An ACK inside the window is still fine.
    let mut s = seg_to_a(&p);
    s.ack = Some(p.a.snd_una);
    s.payload = (&payload).into();
    p.a.input(&s, now, &mut p.sa);
    assert_eq!(p.a.recv_available(), before + 100);
}

#[test]
fn a_cookie_connection_takes_its_options_from_the_echoed_timestamp() {
    let cfg = quick();
    let opts = CookieOpts {
        wscale: Some(7),
        sack: true,
        ts: (1000, 0x1234_5657),
    };
    let t = Tcb::from_cookie(cfg, 100, 200, 1460, 1000, Some(opts));
    assert_eq!(t.state(), State::Established);
    assert!(t.ts_enabled && t.sack_perm && t.wscale_ok);
    assert_eq!((t.snd_wscale, t.rcv_wscale), (7, wscale_for(&cfg)));
    assert_eq!(t.snd_wnd, 1000 << 7, "the ACK's window is scaled");
    assert_eq!(t.ts_recent, 1000);
    // Without timestamps the cookie carries only the MSS.
    let t = Tcb::from_cookie(cfg, 100, 200, 1460, 1000, None);
    assert!(!t.ts_enabled && !t.sack_perm);
    assert_eq!((t.snd_wscale, t.rcv_wscale, t.snd_wnd), (0, 0, 1000));
}

#[test]
fn segmentation_offload_sends_large_new_segments_and_repairs_an_mss_at_a_time() {
    // With a device that segments (tso_max), new data leaves in segments of many
    // MSS, never more than tso_max; under loss every retransmission is one MSS, and
    // the transfer still completes byte-exact.
    let tso_max = 65_535 - 80;
    let cfg = TcpConfig { tso_max, ..quick() };
    for (loss, seed) in [(0.0, 1), (0.05, 2), (0.1, 3)] {
        let link = Link {
            loss,
            delay: Duration::from_millis(2),
            ..Link::default()
        };
        let mut p = Pair::new(cfg, quick(), link, seed);
        p.established();
        p.transfer(4_000_000, false, Duration::from_secs(3_600));
        let seg = p.a.seg_size() as usize;
        let data: Vec<&SegOut> = p
            .log
            .iter()
            .filter(|(a, s)| *a && s.data_len > 0)
            .map(|(_, s)| s)
            .collect();
        let largest = data.iter().map(|s| s.data_len).max().unwrap();
        assert!(largest > 8 * seg, "loss {loss}: largest segment {largest}");
        assert!(
            largest <= tso_max as usize,
            "loss {loss}: {largest} > {tso_max}"
        );
        if loss > 0.0 {
            assert!(p.lost_a_bytes > 0 && p.sa.sndrexmitpack > 0);
            assert!(
                p.sa.sndrexmitbyte <= p.sa.sndrexmitpack * seg as u64,
                "loss {loss}: retransmissions are one MSS each"
            );
        }
    }
}

#[test]
fn segmentation_offload_holds_a_short_tail_while_the_window_is_nearly_spent() {
    // Linux's tcp_tso_should_defer: once the window leaves less than a third of
    // itself, a send of more than one segment but less than a burst waits for the
    // acknowledgments in flight, even when it is all the data queued. Sent at once,
    // it would be a small segment (and an ACK for it) in every window's worth; held,
    // it leaves with what the application adds once the ACK opens the window. A FIN
    // is never held. It waits only while an ACK is due soon: here the first
    // segment in flight went half an SRTT before (sent just now, as the first
    // flight's, it would go at once: see
    // `the_first_flight_is_ten_whole_segments_at_once`).
    let tso_max = 65_535 - 80;
    for close in [false, true] {
        let cfg = TcpConfig {
            tso_max,
            nodelay: true,
            ..quick()
        };
        let mut p = Pair::new(cfg, quick(), Link::default(), 7);
        p.established();
        // A first exchange of data: B's scaled window is known after it.
        p.a.send(&[1; 100]);
        p.flush();
        assert!(p.run_until(Duration::from_secs(1), |p| p.a.snd_una == p.a.snd_nxt));
        // A segment in flight for half an SRTT.
        let mut first = Vec::new();
        p.a.send(&[1; 100]);
        p.a.output(p.now, &mut p.sa, &mut first);
        p.send(true, first);
        p.now += p.a.srtt.unwrap() / 2;
        let before = p.log.len();
        p.a.cwnd = 1 << 24;
        let wnd = p.a.snd_wnd as usize - 100;
        let room = p.a.data_room() as usize;
        let burst = tso_max as usize / room * room;
        // Whole bursts, then more than one segment, within the window; what the
        // bursts leave of it is less than a third.
        let tail = room + 56;
        let whole = (wnd - tail) / burst * burst;
        assert!(wnd - whole < wnd / 3, "window {wnd}, burst {burst}");
        let data = vec![7u8; whole + tail];
        assert_eq!(p.a.send(&data), data.len());
        if close {
            p.a.close();
        }
        p.flush();
        let sent: Vec<usize> = p.log[before..]
            .iter()
            .filter(|(a, s)| *a && s.data_len > 0)
            .map(|(_, s)| s.data_len)
            .collect();
        if close {
            assert_eq!(sent.iter().sum::<usize>(), whole + tail, "{sent:?}");
            continue;
        }
        assert_eq!(sent, vec![burst; whole / burst], "the tail of {tail} waits");
        // The acknowledgment of the bursts (B reading as they come) releases it.
        let mut buf = vec![0u8; 65536];
        let done = p.run_until(Duration::from_secs(1), |p| {
            while p.b().recv(&mut buf) > 0 {}
            p.a.sndbuf.is_empty()
        });
        assert!(done);
        let last = p.log.iter().rev().find(|(a, s)| *a && s.data_len > 0);
        assert_eq!(last.map(|(_, s)| s.data_len), Some(tail));
    }
}

/// What is left of a connection in TIME_WAIT ([`TimeWait`]) answers every kind of
/// segment as its control block does: the same ACK or none, the same counters, the
/// same end of the wait.
#[test]
fn time_wait_remnant_answers_as_the_control_block() {
    const DATA: [u8; 100] = [7; 100];
    for ts in [true, false] {
        let closed = || {
            let cfg = TcpConfig {
                timestamps: ts,
                ..quick()
            };
            let mut p = Pair::new(cfg, cfg, Link::default(), 44);
            p.established();
            p.transfer(5000, false, Duration::from_secs(5));
            p.a.close();
            assert!(p.run_until(Duration::from_secs(1), |p| p.b().state()
                == State::CloseWait));
            p.b().close();
            let quiet = p.run_until(Duration::from_secs(1), |p| {
                p.a.state() == State::TimeWait
                    && p.flight.is_empty()
                    && p.b().state() == State::Closed
            });
            assert!(
                quiet,
                "a {:?} b {:?} flight {}",
                p.a.state(),
                p.b().state(),
                p.flight.len()
            );
            p
        };
        let p = closed();
        let (nxt, una, recent, irs) = (p.a.rcv_nxt, p.a.snd_max, p.a.ts_recent, p.a.irs);
        let tsv = |d: i32| ts.then_some((recent.wrapping_add(d as u32), 0));
        let base = SegIn {
            seq: nxt,
            ack: Some(una),
            ts: tsv(5),
            ..SegIn::default()
        };
        let cases: Vec<(&str, SegIn<'static>)> = vec![
            (
                "retransmitted FIN",
                SegIn {
                    seq: nxt.wrapping_sub(1),
                    fin: true,
                    ..base
                },
            ),
            (
                "old duplicate",
                SegIn {
                    ts: tsv(-5),
                    ..base
                },
            ),
            ("plain ACK", base),
            (
                "reset in window",
                SegIn {
                    rst: true,
                    ack: None,
                    ..base
                },
            ),
            (
                "reset out of window",
                SegIn {
                    seq: nxt.wrapping_sub(1 << 20),
                    rst: true,
                    ..base
                },
            ),
            (
                "SYN in window",
                SegIn {
                    syn: true,
                    ack: None,
                    ..base
                },
            ),
            (
                "retransmitted SYN",
                SegIn {
                    seq: irs,
                    syn: true,
                    ack: None,
                    ..base
                },
            ),
            ("no ACK flag", SegIn { ack: None, ..base }),
            (
                "ACK of unsent data",
                SegIn {
                    ack: Some(una.wrapping_add(1000)),
                    ..base
                },
            ),
            (
                "ACK too old",
                SegIn {
                    ack: Some(una.wrapping_sub(1 << 24)),
                    ..base
                },
            ),
            (
                "old data",
                SegIn {
                    seq: nxt.wrapping_sub(100),
                    payload: (&DATA).into(),
                    ..base
                },
            ),
            (
                "data beyond the window",
                SegIn {
                    seq: nxt.wrapping_add(1 << 24),
                    payload: (&DATA).into(),
                    ..base
                },
            ),
        ];
        for (what, seg) in cases {
            let mut p = closed();
            let mut t = p.a.time_wait().expect("a quiet TIME_WAIT reduces");
            let now = p.now + Duration::from_millis(3);
            let (mut st_tcb, mut st_tw) = (TcpStat::default(), TcpStat::default());
            p.a.input(&seg, now, &mut st_tcb);
            let mut out = Vec::new();
            p.a.output(now, &mut st_tcb, &mut out);
            let wait = quick().time_wait;
            let answer = t
                .input(&seg, now, wait, &mut st_tw)
                .then(|| t.ack(now, &mut st_tw));
            assert!(out.len() <= 1, "{what} (timestamps {ts}): {out:?}");
            assert_eq!(out.first().copied(), answer, "{what} (timestamps {ts})");
            assert_eq!(st_tcb, st_tw, "{what} (timestamps {ts})");
            assert_eq!(p.a.state(), State::TimeWait, "{what}");
            assert_eq!(
                p.a.tw_deadline,
                Some(t.deadline),
                "{what} (timestamps {ts})"
            );
            assert_eq!(
                p.a.time_wait_accepts_syn(&seg),
                t.accepts_syn(&seg),
                "{what}"
            );
        }
    }
}

#[test]
fn a_payload_in_many_pieces_skips_and_takes_across_them() {
    let bufs: Vec<Vec<u8>> = (0..PAYLOAD_PIECES as u8)
        .map(|k| vec![k; 10 + usize::from(k)])
        .collect();
    let mut p = Payload::default();
    for b in &bufs {
        assert!(p.push(b));
    }
    assert!(!p.push(&[9]), "no room for one piece more");
    assert!(p.push(&[]), "an empty piece takes no room");
    let all: Vec<u8> = bufs.concat();
    let flat = |p: Payload<'_>| p.pieces().flatten().copied().collect::<Vec<u8>>();
    assert_eq!(p.len(), all.len());
    assert_eq!(flat(p), all);
    for skip in [
        0,
        1,
        10,
        11,
        25,
        60,
        all.len() - 1,
        all.len(),
        all.len() + 5,
    ] {
        for take in [0, 1, 9, 10, 33, all.len()] {
            let want: Vec<u8> = all.iter().skip(skip).take(take).copied().collect();
            let got = p.skip(skip).take(take);
            assert_eq!(flat(got), want, "skip {skip} take {take}");
            assert_eq!(got.len(), want.len());
            assert_eq!(got.is_empty(), want.is_empty());
            assert!(got.pieces().all(|s| !s.is_empty()));
        }
    }
}

/// The receiver's SACK blocks (RFC 2018 §4, as FreeBSD orders them): the latest
/// arrival's block first, then the others in the order they were reported; a
/// repeated range goes first once as a D-SACK block (RFC 2883), below RCV.NXT or
/// inside what the out-of-order queue holds.
#[test]
fn sack_blocks_follow_arrival_order_and_report_duplicates_once() {
    let cfg = TcpConfig {
        timestamps: false,
        ..quick()
    };
    let mut p = quiet_pair_with(cfg, 51);
    assert!(p.a.sack_perm);
    let now = p.now;
    let base = p.a.rcv_nxt;
    let data = [7u8; 800];
    let feed = |p: &mut Pair, from: u32, to: u32| {
        let mut s = seg_to_a(p);
        s.seq = base.wrapping_add(from);
        s.payload = data[..(to - from) as usize].into();
        p.a.input(&s, now, &mut p.sa);
        let mut out = Vec::new();
        p.a.output(now, &mut p.sa, &mut out);
        let last = out.last().map(|o| o.sack).unwrap_or_default();
        last.iter()
            .flatten()
            .map(|&(a, b)| (a.wrapping_sub(base), b.wrapping_sub(base)))
            .collect::<Vec<_>>()
    };
    assert_eq!(feed(&mut p, 0, 99), vec![]);
    assert_eq!(feed(&mut p, 199, 299), vec![(199, 299)]);
    assert_eq!(feed(&mut p, 399, 499), vec![(399, 499), (199, 299)]);
    assert_eq!(
        feed(&mut p, 599, 699),
        vec![(599, 699), (399, 499), (199, 299)]
    );
    // Wholly below RCV.NXT: D-SACK, the others unchanged.
    assert_eq!(
        feed(&mut p, 49, 74),
        vec![(49, 74), (599, 699), (399, 499), (199, 299)]
    );
    // A whole held block again: D-SACK of it, then the block itself (RFC 2883 §4),
    // now the latest.
    assert_eq!(
        feed(&mut p, 399, 499),
        vec![(399, 499), (399, 499), (599, 699), (199, 299)]
    );
    // Inside a held block: D-SACK, then that block, now the latest.
    assert_eq!(
        feed(&mut p, 199, 274),
        vec![(199, 274), (199, 299), (399, 499), (599, 699)]
    );
    // Fills a hole and repeats the next block: D-SACK of the repeat, and the merged
    // block.
    assert_eq!(feed(&mut p, 299, 599), vec![(399, 499), (199, 699)]);
    // Everything: the part below RCV.NXT is the only block left, and only once.
    assert_eq!(feed(&mut p, 0, 799), vec![(0, 99)]);
    let mut out = Vec::new();
    let mut s = seg_to_a(&p);
    s.seq = base.wrapping_add(799);
    s.payload = b"x".into();
    p.a.input(&s, now, &mut p.sa);
    p.a.output(now, &mut p.sa, &mut out);
    assert!(out.iter().all(|o| o.sack.iter().all(Option::is_none)));
}

/// With more holes than an ACK has blocks, the newest arrival's block still goes
/// first, however high it lies, and the blocks reported before it follow: the
/// sender learns of each range as it arrives. Once, only the lowest eight ranges
/// could be reported, so data beyond the eighth hole went unreported until the
/// holes below it filled, and the sender retransmitted what had arrived.
#[test]
fn sack_blocks_name_the_newest_range_beyond_many_holes() {
    let cfg = TcpConfig {
        timestamps: false,
        ..quick()
    };
    let mut p = quiet_pair_with(cfg, 53);
    let now = p.now;
    let base = p.a.rcv_nxt;
    let data = [7u8; 100];
    let mut last = Vec::new();
    // Twelve ranges with a hole before each: 100..200, 300..400, ...
    for i in 0..12u32 {
        let mut s = seg_to_a(&p);
        s.seq = base.wrapping_add(100 + 200 * i);
        s.payload = data[..].into();
        p.a.input(&s, now, &mut p.sa);
        let mut out = Vec::new();
        p.a.output(now, &mut p.sa, &mut out);
        last = out.last().map(|o| o.sack.to_vec()).unwrap_or_default();
        let first = last
            .first()
            .copied()
            .flatten()
            .map(|(a, b)| (a.wrapping_sub(base), b.wrapping_sub(base)));
        assert_eq!(
            first,
            Some((100 + 200 * i, 200 + 200 * i)),
            "arrival {i}: {last:?}"
        );
    }
    let named: Vec<_> = last
        .iter()
        .flatten()
        .map(|&(a, b)| (a.wrapping_sub(base), b.wrapping_sub(base)))
        .collect();
    assert_eq!(
        named,
        vec![(2300, 2400), (2100, 2200), (1900, 2000), (1700, 1800)]
    );
}

/// FreeBSD's insecure_rst and insecure_syn: RFC 793's answers instead of RFC 5961's
/// challenge ACKs, for a reset or a SYN in the window but not at its left edge.
#[test]
fn insecure_rst_and_syn_end_the_connection_from_anywhere_in_the_window() {
    for (rst, syn) in [(true, false), (false, true)] {
        let cfg = TcpConfig {
            insecure_rst: rst,
            insecure_syn: syn,
            ..quick()
        };
        let mut p = quiet_pair_with(cfg, 52);
        let mut s = seg_to_a(&p);
        s.seq = p.a.rcv_nxt.wrapping_add(100);
        s.rst = rst;
        s.syn = syn;
        if syn {
            s.ack = None;
        }
        let now = p.now;
        p.a.input(&s, now, &mut p.sa);
        assert_eq!(
            (p.a.state(), p.a.error()),
            (State::Closed, Some(TcpError::Reset))
        );
        assert_eq!(p.sa.challengeack, 0);
        let mut out = Vec::new();
        p.a.output(now, &mut p.sa, &mut out);
        // A SYN is answered with a reset; a reset is not.
        assert_eq!(out.iter().any(|o| o.rst), syn);
    }
}

/// TIME_WAIT as FreeBSD's tcp_twcheck: a segment without ACK is dropped
/// silently, a pure duplicate ACK is not answered, anything else is.
#[test]
fn time_wait_answers_only_what_tcp_twcheck_answers() {
    let mut p = closed_to_time_wait(53);
    let now = p.now;
    // Whatever was owed goes first.
    p.a.output(now, &mut p.sa, &mut Vec::new());
    let answers = |p: &mut Pair, s: &SegIn<'_>| {
        p.a.input(s, now, &mut p.sa);
        let mut out = Vec::new();
        p.a.output(now, &mut p.sa, &mut out);
        !out.is_empty()
    };
    let mut s = seg_to_a(&p);
    s.ack = None;
    s.fin = true;
    s.seq = p.a.rcv_nxt.wrapping_sub(1);
    assert!(!answers(&mut p, &s), "no ACK flag: dropped");
    assert_eq!(p.sa.rcvnoack, 1, "and counted");
    let dup = seg_to_a(&p);
    assert!(!answers(&mut p, &dup), "a pure duplicate ACK");
    let mut old = seg_to_a(&p);
    old.seq = p.a.rcv_nxt.wrapping_sub(1);
    assert!(answers(&mut p, &old), "an old segment is answered");
    assert_eq!(p.a.state(), State::TimeWait);
}

/// Delivers `seg` (from A when `from_a`) to the other side at once and returns what
/// that side sends in answer.
fn deliver(p: &mut Pair, from_a: bool, seg: SegOut) -> Vec<SegOut> {
    let sender = if from_a { &p.a } else { p.b.as_ref().unwrap() };
    let mut data = vec![0u8; seg.data_len];
    sender.copy_payload(&seg, &mut data);
    let w = Wire { seg, data };
    let mut out = Vec::new();
    if from_a {
        let b = p.b.as_mut().unwrap();
        b.input(&to_in(&w), p.now, &mut p.sb);
        b.output(p.now, &mut p.sb, &mut out);
    } else {
        p.a.input(&to_in(&w), p.now, &mut p.sa);
        p.a.output(p.now, &mut p.sa, &mut out);
    }
    out
}

/// Proportional Rate Reduction (RFC 6937) in SACK recovery. A window of twenty
/// segments loses its first; every later segment draws a duplicate ACK with SACK.
/// RFC 6675 alone would set the window to ssthresh at once and send nothing until
/// the pipe fell below it, half a round trip of silence, then one segment an ACK;
/// with PRR the sender goes on from the first ACKs of recovery, at ssthresh /
/// RecoverFS of what is delivered, and leaves recovery with the window at
/// ssthresh and no more than that in flight.
#[test]
fn prr_spreads_sending_over_recovery_and_ends_at_ssthresh() {
    let cfg = TcpConfig {
        init_cwnd_segs: 20,
        delack: Duration::ZERO,
        nodelay: true,
        ..quick()
    };
    let mut p = quiet_pair_with(cfg, 23);
    assert!(p.a.sack_perm);
    let mss = p.a.seg_size() as usize;
    p.a.send(&vec![9u8; 80 * mss]);
    let mut first = Vec::new();
    p.a.output(p.now, &mut p.sa, &mut first);
    assert!(
        first.len() >= 20,
        "a window of twenty segments or more: {}",
        first.len()
    );
    let lost_seq = first[0].seq;
    let mut queue: std::collections::VecDeque<SegOut> = first.into_iter().skip(1).collect();
    // For each ACK A takes while in recovery: the new data segments it sent.
    let mut in_recovery: Vec<usize> = Vec::new();
    let mut entered = false;
    let mut exit = None;
    for _ in 0..400 {
        let Some(seg) = queue.pop_front() else { break };
        for ack in deliver(&mut p, true, seg) {
            let was = p.a.recover.is_some();
            let sent = deliver(&mut p, false, ack);
            if p.a.recover.is_some() {
                entered = true;
            }
            let new_data = sent
                .iter()
                .filter(|s| s.data_len > 0 && s.seq != lost_seq)
                .count();
            if was && p.a.recover.is_some() {
                in_recovery.push(new_data);
            }
            if entered && p.a.recover.is_none() && exit.is_none() {
                exit = Some((p.a.cwnd, p.a.ssthresh, p.a.flight()));
            }
            queue.extend(sent);
        }
        if exit.is_some() {
            break;
        }
    }
    assert!(entered, "recovery began");
    let (cwnd, ssthresh, flight) = exit.expect("recovery ended");
    eprintln!("new segments a recovery ACK: {in_recovery:?}; exit cwnd {cwnd} ssthresh {ssthresh} flight {flight}");
    // Sending resumed within the first ACKs of recovery, not half a round trip later.
    let early: usize = in_recovery.iter().take(4).sum();
    assert!(early >= 2, "{in_recovery:?}");
    // About ssthresh / RecoverFS (0.7 with CUBIC) of the delivered segments.
    let total: usize = in_recovery.iter().sum();
    let acks = in_recovery.len();
    assert!(
        total * 10 <= acks * 8 && total * 10 >= acks * 5,
        "{total} for {acks} ACKs"
    );
    assert_eq!(cwnd, ssthresh, "recovery ends at ssthresh");
    assert!(
        flight as usize <= ssthresh as usize + mss,
        "no burst at the end: {flight}"
    );
}

/// D-SACK undo (RFC 2883, RFC 3708). A window's first segment is delayed, not
/// lost: three later ones arrive first, so the sender retransmits it and halves
/// its window; then the original arrives, and the retransmission after it, which
/// the receiver reports as a duplicate (D-SACK, a block below its cumulative ACK).
/// The sender sees that every retransmission of the recovery was unnecessary and
/// takes back the reduction. Had the original been lost, the retransmission would
/// have been the only copy and nothing would have been undone.
#[test]
fn dsack_undoes_a_recovery_that_reordering_caused() {
    for reordered in [true, false] {
        let cfg = window_of_ten_cfg();
        let mut p = quiet_pair_with(cfg, 24);
        let mss = p.a.seg_size() as usize;
        p.a.send(&vec![5u8; 10 * mss]);
        let mut segs = Vec::new();
        p.a.output(p.now, &mut p.sa, &mut segs);
        assert_eq!(segs.len(), 10);
        let (cwnd0, first) = (p.a.cwnd, segs[0]);
        // Segments 2-4 first, a round trip later: three duplicate ACKs with SACK,
        // a fast retransmit.
        p.now += Duration::from_millis(10);
        let mut resent = Vec::new();
        for seg in &segs[1..4] {
            for ack in deliver(&mut p, true, *seg) {
                resent.extend(deliver(&mut p, false, ack));
            }
        }
        assert!(p.a.recover.is_some(), "in recovery");
        assert!(p.a.cwnd < cwnd0, "the window was cut");
        let rexmit = *resent
            .iter()
            .find(|s| s.seq == first.seq && s.data_len > 0)
            .expect("the first segment again");
        // Half a round trip on: the original (if it was only delayed), the rest of
        // the window, then the retransmission.
        p.now += Duration::from_millis(5);
        let mut arrivals = if reordered { vec![first] } else { vec![] };
        arrivals.extend_from_slice(&segs[4..]);
        arrivals.push(rexmit);
        let mut dsack_seen = false;
        for seg in arrivals {
            for ack in deliver(&mut p, true, seg) {
                dsack_seen |= ack.sack[0].is_some_and(|(_, r)| seq::le(r, ack.ack));
                deliver(&mut p, false, ack);
            }
        }
        assert_eq!(dsack_seen, reordered, "the receiver reports the duplicate");
        // RACK's reordering window grows by a quarter RTT for the round.
        let mult = if reordered { 2 } else { 1 };
        assert_eq!(p.a.rack.reo_wnd_mult(), mult);
        if reordered {
            assert_eq!(
                p.sa.dsackundo, 1,
                "{} D-SACKs, {:?}",
                p.sa.dsack_count, p.a.dsack_undo
            );
            assert!(
                p.a.cwnd >= cwnd0,
                "the reduction is undone: {} < {cwnd0}",
                p.a.cwnd
            );
            assert!(p.a.recover.is_none());
        } else {
            assert_eq!(p.sa.dsackundo, 0);
            assert!(p.a.cwnd < cwnd0, "a real loss keeps its reduction");
        }
    }
}

/// F-RTO (RFC 5682), for a connection without timestamps (where Eifel cannot
/// tell): ten segments reach the peer, but its ACKs are held back past the
/// timeout (a delay spike). After the timeout's retransmission, the first late
/// ACK lets two new segments go rather than more retransmissions, and the next
/// acknowledges data never sent again: the timeout was spurious and the window
/// comes back. When the segments are really lost, the ACKs after the timeout are
/// duplicates, and the go-back-N retransmission runs as before, nothing undone.
#[test]
fn frto_undoes_a_spurious_timeout_without_timestamps() {
    for spurious in [true, false] {
        let cfg = TcpConfig {
            delack: Duration::ZERO,
            timestamps: false,
            init_cwnd_segs: 10,
            nodelay: true,
            ..quick()
        };
        let mut p = quiet_pair_with(cfg, 25);
        assert!(!p.a.ts_enabled);
        let mss = p.a.seg_size() as usize;
        let (cwnd, ssthresh) = (p.a.cwnd(), p.a.ssthresh);
        p.a.send(&vec![6u8; 30 * mss]);
        let mut segs = Vec::new();
        p.a.output(p.now, &mut p.sa, &mut segs);
        let n = segs.len();
        assert!(n >= 10);
        // The peer gets them all (or, when the timeout is real, only the last
        // three: the first seven are lost); its ACKs are held.
        let mut held = Vec::new();
        let skip = if spurious { 0 } else { 7 };
        for s in &segs[skip..] {
            held.extend(deliver(&mut p, true, *s));
        }
        p.now = p.a.rtx_deadline.expect("timer armed");
        let mut out = Vec::new();
        p.a.output(p.now, &mut p.sa, &mut out);
        assert_eq!(p.sa.rexmttimeo, 1);
        assert_eq!(out.len(), 1, "one retransmission after the timeout");
        assert_eq!(out[0].seq, segs[0].seq);
        // The retransmission reaches the peer after its held ACKs leave.
        let mut answers = held;
        answers.extend(deliver(&mut p, true, out[0]));
        p.now += Duration::from_millis(1);
        let mut sent = Vec::new();
        for a in answers.into_iter().take(3) {
            sent.extend(deliver(&mut p, false, a));
        }
        if spurious {
            assert_eq!(p.sa.frto_spurious, 1);
            assert_eq!(p.a.ssthresh, ssthresh);
            assert!(
                p.a.cwnd() >= cwnd,
                "window restored: {} < {cwnd}",
                p.a.cwnd()
            );
            // Nothing the peer had was sent again but the one retransmission.
            let max = segs[n - 1].seq;
            assert!(
                sent.iter().all(|s| s.data_len == 0 || seq::lt(max, s.seq)),
                "only new data after the timeout: {sent:?}"
            );
        } else {
            assert_eq!(p.sa.frto_spurious, 0);
            assert!(p.a.cwnd() < cwnd);
            // Go-back-N: the lost segments go again.
            assert!(
                sent.iter().any(|s| s.seq == segs[1].seq && s.data_len > 0),
                "{sent:?}"
            );
        }
    }
}

/// A connection with ECN negotiated still counts duplicate ACKs: a lost segment
/// is repaired by fast retransmit, not left to the timeout.
#[test]
fn an_ecn_connection_still_fast_retransmits() {
    let cfg = TcpConfig {
        ecn: 1,
        ..window_of_ten_cfg()
    };
    let mut p = quiet_pair_with(cfg, 25);
    assert!(p.a.ecn_ok && p.b().ecn_ok, "ECN negotiated");
    let mss = p.a.seg_size() as usize;
    p.a.send(&vec![6u8; 10 * mss]);
    let mut segs = Vec::new();
    p.a.output(p.now, &mut p.sa, &mut segs);
    let first = segs[0];
    let mut resent = Vec::new();
    for seg in &segs[1..4] {
        for ack in deliver(&mut p, true, *seg) {
            resent.extend(deliver(&mut p, false, ack));
        }
    }
    assert_eq!(p.sa.fastrexmit, 1);
    assert!(resent.iter().any(|s| s.seq == first.seq && s.data_len > 0));
}

/// The loss-recovery tests' connection: ten segments in the first window, each
/// ACK at once, no Nagle.
fn window_of_ten_cfg() -> TcpConfig {
    TcpConfig {
        init_cwnd_segs: 10,
        delack: Duration::ZERO,
        nodelay: true,
        ..quick()
    }
}

/// Sends one window of ten segments from A; returns them.
fn window_of_ten(p: &mut Pair, byte: u8) -> Vec<SegOut> {
    let mss = p.a.seg_size() as usize;
    p.a.send(&vec![byte; 10 * mss]);
    let mut segs = Vec::new();
    p.a.output(p.now, &mut p.sa, &mut segs);
    assert_eq!(segs.len(), 10);
    segs
}

/// B receives `segs` in this order; A gets B's ACKs one RTT after the window
/// left (the link's 5 ms each way), `gap` apart. Returns what A sends.
fn arrive_and_answer(p: &mut Pair, segs: &[SegOut], gap: Duration) -> Vec<SegOut> {
    let start = p.now;
    p.now = start + Duration::from_millis(5);
    let acks: Vec<SegOut> = segs.iter().flat_map(|s| deliver(p, true, *s)).collect();
    p.now = start + Duration::from_millis(10);
    let mut sent = Vec::new();
    for ack in acks {
        sent.extend(deliver(p, false, ack));
        p.now += gap;
    }
    sent
}

/// RACK (RFC 8985). Before any reordering, two segments SACKed above a hole are
/// not yet a loss; the hole's late arrival shows the path reorders. From then on
/// the sender allows a reordering window (a quarter of the minimum RTT): a window
/// whose first segment arrives after five later ones, within that time, is not
/// retransmitted at all, where three duplicate ACKs would have retransmitted it.
/// A segment really lost is then found by the reordering timer, a quarter RTT
/// after it was due, with no retransmission timeout.
#[test]
fn rack_allows_reordering_once_seen_and_finds_a_loss_by_its_timer() {
    let cfg = window_of_ten_cfg();
    let mut p = quiet_pair_with(cfg, 31);
    let no_rexmit =
        |sent: &[SegOut], first: SegOut| !sent.iter().any(|s| s.seq == first.seq && s.data_len > 0);

    // 1. Reordering seen: 2 and 3 overtake 1.
    let segs = window_of_ten(&mut p, 1);
    let order: Vec<SegOut> = [1, 2, 0, 3, 4, 5, 6, 7, 8, 9]
        .iter()
        .map(|&i| segs[i])
        .collect();
    let sent = arrive_and_answer(&mut p, &order, Duration::from_micros(100));
    assert!(no_rexmit(&sent, segs[0]), "two SACKed segments are no loss");
    assert!(
        p.a.rack.reordering_seen(),
        "the late original shows reordering"
    );
    assert_eq!((p.sa.fastrexmit, p.sa.sndrexmitpack), (0, 0));
    assert_eq!(p.a.snd_una, p.a.snd_max);

    // 2. Reordered by 1 ms (within the 2.5 ms window): five segments overtake.
    p.now += Duration::from_millis(50);
    let segs = window_of_ten(&mut p, 2);
    let order: Vec<SegOut> = [1, 2, 3, 4, 5, 0, 6, 7, 8, 9]
        .iter()
        .map(|&i| segs[i])
        .collect();
    let sent = arrive_and_answer(&mut p, &order, Duration::from_micros(200));
    assert!(no_rexmit(&sent, segs[0]), "reordering within the window");
    assert_eq!((p.sa.fastrexmit, p.sa.sndrexmitpack), (0, 0));
    assert_eq!(p.a.snd_una, p.a.snd_max);

    // 3. A real loss: the first segment never arrives.
    p.now += Duration::from_millis(50);
    let segs = window_of_ten(&mut p, 3);
    let sent = arrive_and_answer(&mut p, &segs[1..], Duration::ZERO);
    assert!(
        no_rexmit(&sent, segs[0]),
        "not before the window has passed"
    );
    let timer = p.a.rack.deadline.expect("the reordering timer is armed");
    assert!(timer <= p.now + Duration::from_millis(3), "{timer:?}");
    p.now = timer;
    let mut sent = Vec::new();
    p.a.output(p.now, &mut p.sa, &mut sent);
    assert!(
        !no_rexmit(&sent, segs[0]),
        "retransmitted when the timer fires"
    );
    assert_eq!(
        (p.sa.racktimeo, p.sa.fastrexmit, p.sa.rexmttimeo),
        (1, 1, 0)
    );
}

/// A retransmission lost again is found the way the original loss was: data
/// sent after it is delivered and it is not, one RTT on. It goes a third time
/// without waiting for the retransmission timeout.
#[test]
fn rack_finds_a_lost_retransmission() {
    let cfg = window_of_ten_cfg();
    let mut p = quiet_pair_with(cfg, 32);
    let mss = p.a.seg_size() as usize;
    let segs = window_of_ten(&mut p, 4);
    // The first window's first segment is lost; more data waits to be sent.
    p.a.send(&vec![5u8; 10 * mss]);
    let sent = arrive_and_answer(&mut p, &segs[1..], Duration::ZERO);
    let rexmit: Vec<SegOut> = sent
        .iter()
        .filter(|s| s.seq == segs[0].seq)
        .copied()
        .collect();
    assert_eq!(rexmit.len(), 1, "fast retransmit");
    let later: Vec<SegOut> = sent
        .iter()
        .filter(|s| s.seq != segs[0].seq)
        .copied()
        .collect();
    assert!(!later.is_empty(), "new data goes beside the retransmission");
    // The retransmission is lost too; what followed it arrives.
    let sent = arrive_and_answer(&mut p, &later, Duration::ZERO);
    let again = sent.iter().filter(|s| s.seq == segs[0].seq).count();
    assert_eq!(again, 1, "the retransmission goes again: {sent:?}");
    assert_eq!((p.sa.rexmitlost, p.sa.rexmttimeo), (1, 0));
}

/// A short path (50 µs round trip, segments 2 µs apart) losing 5% of the packets
/// each way, as the interop tests' TAP link does: the windows stay small, so a
/// recovery often has nothing behind its last segments for RACK to go by, and
/// ACKs are lost as often as data. Tail loss probes (in recovery too, two new
/// segments so that the receiver answers at once) keep such stalls from becoming
/// 200 ms retransmission timeouts: across five seeds a handful of timeouts, where
/// there were ten to twenty per seed, and 8 MB in well under a second each.
#[test]
fn a_lossy_short_path_recovers_by_probes_not_timeouts() {
    let (mut timeouts, mut probes) = (0, 0);
    for seed in 1..6u64 {
        let link = Link {
            delay: Duration::from_micros(25),
            loss: 0.05,
            spacing: Duration::from_micros(2),
            ..Link::default()
        };
        let mut p = Pair::new(quick(), quick(), link, seed);
        p.established();
        let t0 = p.now;
        p.transfer(8 << 20, false, Duration::from_secs(600));
        let took = p.now.saturating_duration_since(t0);
        assert!(took < Duration::from_millis(900), "seed {seed}: {took:?}");
        timeouts += p.sa.rexmttimeo;
        probes += p.sa.tlpprobes;
    }
    assert!(timeouts <= 6, "{timeouts} timeouts");
    assert!(probes > 50, "{probes} probes");
}

/// `cc` with 4 MiB buffers each way: the window is the congestion window.
fn big_buffers(cc: crate::tcp::CongestionControl) -> TcpConfig {
    TcpConfig {
        cc,
        rcvbuf: 4 << 20,
        sndbuf: 4 << 20,
        ..quick()
    }
}

/// A 10 ms path whose bottleneck takes a segment every 100 µs (about 14 MB/s),
/// with `loss` each way; `total` bytes from A with `cc`. Returns the pair.
fn bottleneck_transfer(cc: crate::tcp::CongestionControl, loss: f64, total: usize) -> Pair {
    let cfg = big_buffers(cc);
    let link = Link {
        delay: Duration::from_millis(5),
        loss,
        spacing: Duration::from_micros(100),
        ..Link::default()
    };
    let mut p = Pair::new(cfg, cfg, link, 2026);
    p.established();
    p.transfer(total, false, Duration::from_secs(3600));
    p
}

#[test]
fn bbr_keeps_its_rate_under_random_loss_where_cubic_falls() {
    use crate::tcp::bbr::BbrMode;
    use crate::tcp::CongestionControl;
    let mut rates = Vec::new();
    for cc in [CongestionControl::Bbr, CongestionControl::Cubic] {
        let mut p = bottleneck_transfer(cc, 0.05, 0);
        let t0 = p.now;
        p.transfer(10_000_000, false, Duration::from_secs(3600));
        let secs = (p.now - t0).as_secs_f64();
        rates.push(10e6 / secs);
        if cc == CongestionControl::Bbr {
            assert_eq!(p.a.congestion_control(), CongestionControl::Bbr);
            let (mode, bw, min_rtt) = p.a.bbr_state().expect("BBR's model");
            assert_ne!(mode, BbrMode::Startup, "STARTUP ended");
            // The bottleneck: 1448 data bytes (of 1460 with timestamps) a 100 µs.
            assert!((10e6..16e6).contains(&bw), "bw {bw}");
            let min_rtt = min_rtt.expect("an RTT");
            assert!(
                min_rtt >= Duration::from_millis(10) && min_rtt < Duration::from_millis(11),
                "{min_rtt:?}"
            );
            assert!(p.a.pacing_rate() > 0, "paced");
        }
    }
    eprintln!(
        "10 MB at 5% loss each way: BBR {:.0} B/s, CUBIC {:.0} B/s",
        rates[0], rates[1]
    );
    // BBR: near the bottleneck's rate less the loss; CUBIC: halved by each loss.
    assert!(rates[0] > 8e6, "BBR {} B/s", rates[0]);
    assert!(rates[0] > 3.0 * rates[1], "{rates:?}");
}

#[test]
fn bbr_paces_at_the_bottleneck_and_keeps_its_queue_short() {
    use crate::tcp::CongestionControl;
    let mut srtts = Vec::new();
    for cc in [CongestionControl::Bbr, CongestionControl::Cubic] {
        let mut p = bottleneck_transfer(cc, 0.0, 0);
        // Past the first slow start: the steady state.
        p.transfer(20_000_000, false, Duration::from_secs(3600));
        let before = p.sa.sndpack;
        let t0 = p.now;
        p.transfer(5_000_000, false, Duration::from_secs(3600));
        let secs = (p.now - t0).as_secs_f64();
        srtts.push((p.a.srtt.expect("srtt"), 5e6 / secs, p.sa.sndpack - before));
    }
    eprintln!("BBR and CUBIC (srtt, rate, segments): {srtts:?}");
    // Both fill the pipe...
    assert!(srtts[0].1 > 0.8 * srtts[1].1, "{srtts:?}");
    // ...but BBR without the standing queue that CUBIC keeps (no loss to stop it).
    assert!(srtts[0].0 < Duration::from_millis(20), "{srtts:?}");
    assert!(srtts[1].0 > 2 * srtts[0].0, "{srtts:?}");
}

/// TCP Fast Open (RFC 7413) between two control blocks: A the client, B a
/// listener that gives `cookie` (or none: no Fast Open); A opens with `asks`
/// (a cookie, or the empty one, a request) and 100 bytes queued before its SYN.
fn tfo_pair(cookie: Option<FoCookie>, asks: FoCookie) -> (Pair, Vec<u8>) {
    let mut p = Pair::new(quick(), quick(), Link::default(), 7);
    p.tfo_cookie = cookie;
    p.a.set_fastopen(asks, Some(1460));
    let data: Vec<u8> = (0..100u8).collect();
    assert_eq!(p.a.send(&data), 100);
    (p, data)
}

/// What B has received (reading it all).
fn tfo_read(b: &mut Tcb) -> Vec<u8> {
    let mut buf = vec![0u8; 4096];
    let n = b.recv(&mut buf);
    buf.truncate(n);
    buf
}

const TFO_COOKIE: [u8; 8] = [1, 2, 3, 4, 5, 6, 7, 8];

#[test]
fn fast_open_first_connection_gets_a_cookie_and_data_goes_after_the_handshake() {
    let valid = FoCookie::new(&TFO_COOKIE).unwrap();
    let (mut p, data) = tfo_pair(Some(valid), FoCookie::REQUEST);
    p.established();
    let (_, syn) = p.log[0];
    assert!(syn.syn && syn.fast_open == Some(FoCookie::REQUEST) && syn.data_len == 0);
    let synack = p.log.iter().find(|(a, s)| !a && s.syn).unwrap().1;
    assert_eq!(synack.fast_open, Some(valid));
    assert_eq!(
        p.a.take_fastopen_news(),
        Some(TfoNews::Cookie {
            cookie: valid,
            mss: 1460
        })
    );
    p.run_until(Duration::from_secs(1), |p| p.b().recv_available() == 100);
    assert_eq!(tfo_read(p.b()), data);
    assert_eq!(
        (p.sa.tfo_cookiereq, p.sa.tfo_cookierecvd, p.sa.tfo_syndata),
        (1, 1, 0)
    );
}

#[test]
fn fast_open_with_a_cookie_delivers_the_syn_data_before_the_handshake_completes() {
    let valid = FoCookie::new(&TFO_COOKIE).unwrap();
    let (mut p, data) = tfo_pair(Some(valid), valid);
    // Until the SYN has arrived.
    p.run_until(Duration::from_secs(1), |p| p.b.is_some());
    let (_, syn) = p.log[0];
    assert!(syn.syn && syn.data_len == 100 && syn.fast_open == Some(valid));
    let b = p.b();
    assert_eq!(b.state(), State::SynReceived);
    assert!(b.fastopen_passive());
    assert_eq!(tfo_read(b), data, "the SYN's data is readable at once");
    p.established();
    // The SYN-ACK acknowledged the data: nothing went twice, the cookie stays.
    assert_eq!(p.sa.sndrexmitpack, 0);
    assert_eq!((p.sa.tfo_syndata, p.sa.tfo_syndata_acked), (1, 1));
    assert_eq!(p.a.take_fastopen_news(), None);
    assert!(p.log.iter().all(|(a, s)| !*a || s.data_len == 0 || s.syn));
}

#[test]
fn fast_open_with_an_invalid_cookie_falls_back_and_sends_the_data_again() {
    let valid = FoCookie::new(&TFO_COOKIE).unwrap();
    let stale = FoCookie::new(&[9, 9, 9, 9]).unwrap();
    let (mut p, data) = tfo_pair(Some(valid), stale);
    p.run_until(Duration::from_secs(1), |p| p.b.is_some());
    assert!(!p.b().fastopen_passive());
    assert_eq!(
        p.b().recv_available(),
        0,
        "the data of a SYN with a bad cookie is not taken"
    );
    p.established();
    // The SYN-ACK acknowledged only the SYN, and gave the valid cookie.
    assert_eq!(
        p.a.take_fastopen_news(),
        Some(TfoNews::Cookie {
            cookie: valid,
            mss: 1460
        })
    );
    assert_eq!((p.sa.tfo_syndata, p.sa.tfo_syndata_rexmit), (1, 1));
    p.run_until(Duration::from_secs(1), |p| p.b().recv_available() == 100);
    assert_eq!(tfo_read(p.b()), data);
    let again = p
        .log
        .iter()
        .filter(|(a, s)| *a && !s.syn && s.data_len == 100);
    assert_eq!(
        again.count(),
        1,
        "the data went once more after the handshake"
    );
}

#[test]
fn fast_open_to_a_server_without_it_falls_back_and_turns_it_off() {
    let cookie = FoCookie::new(&TFO_COOKIE).unwrap();
    let (mut p, data) = tfo_pair(None, cookie);
    p.established();
    let synack = p.log.iter().find(|(a, s)| !a && s.syn).unwrap().1;
    assert_eq!(synack.fast_open, None);
    assert_eq!(
        synack.ack,
        p.log[0].1.seq.wrapping_add(1),
        "only the SYN acknowledged"
    );
    assert_eq!(p.a.take_fastopen_news(), Some(TfoNews::NoFastOpen));
    p.run_until(Duration::from_secs(1), |p| p.b().recv_available() == 100);
    assert_eq!(tfo_read(p.b()), data);
}

/// A peer whose window is shut is probed for as long as it answers (RFC 1122
/// §4.2.2.17), for days; one that goes silent is taken for gone once `max_retries`
/// probes are out and it has been silent for the retransmission timeout times the
/// whole backoff (or `keep_idle`, if that is less): dropped as timed out and counted
/// in `persistdrop`, as FreeBSD's tcp_timer_persist. Before, it was probed for ever.
#[test]
fn a_shut_window_is_probed_while_the_peer_answers_and_dropped_when_it_is_gone() {
    let mut p = small_window_pair(33);
    let data = vec![9u8; 40_000];
    let mut sent = p.a.send(&data);
    // B never reads, but answers every probe: two days later A still probes.
    p.run_until(Duration::from_secs(48 * 3600), |p| {
        sent += p.a.send(&data[sent..]);
        false
    });
    assert_eq!(p.a.state(), State::Established);
    assert_eq!(p.sa.persistdrop, 0);
    assert!(p.sa.sndprobe > 2000, "probes: {}", p.sa.sndprobe);
    // B's host goes away.
    p.blackhole = true;
    let limit = p.a.persist_silence_limit();
    assert_eq!(limit, p.a.rto * 2559, "less than keep_idle here");
    let (heard, probes) = (p.a.last_heard.expect("B answered"), p.sa.sndprobe);
    assert!(p.run_until(Duration::from_secs(3 * 3600), |p| p.a.state()
        == State::Closed));
    let silent = p.now - heard;
    assert!(
        silent >= limit && silent <= limit + p.a.cfg.max_rto,
        "dropped after {silent:?} of silence (limit {limit:?})"
    );
    assert_eq!(p.a.error(), Some(TcpError::TimedOut));
    assert_eq!(p.sa.persistdrop, 1);
    assert!(p.sa.sndprobe - probes >= 5, "it kept probing meanwhile");
}

/// Runs A alone against a hostile peer that answers every segment A sends, 5 ms
/// later, with an acknowledgment of `ack` and a shut window (and never takes the
/// FIN), for at most `limit`; returns when A is closed, or the limit passed.
fn against_a_shut_window(p: &mut Pair, ack: u32, limit: Duration) {
    let end = p.now + limit;
    while p.a.state() != State::Closed && p.now < end {
        let mut out = Vec::new();
        p.a.output(p.now, &mut p.sa, &mut out);
        p.log.extend(out.iter().map(|s| (true, *s)));
        if !out.is_empty() && p.a.state() != State::Closed {
            p.now += Duration::from_millis(5);
            let s = SegIn {
                ack: Some(ack),
                wnd: 0,
                ..seg_to_a(p)
            };
            let now = p.now;
            p.a.input(&s, now, &mut p.sa);
            continue;
        }
        match p.a.poll_at() {
            Some(t) => p.now = p.now.max(t),
            None => break,
        }
    }
}

/// FIN_WAIT_1 of a closed connection whose FIN the peer never takes, all data
/// acknowledged and the window shut (a FIN is not held back by the window, RFC 9293
/// §3.10.7.4 lets the peer refuse it there, as FreeBSD's tcp_input does): the FIN
/// is retransmitted, and the peer's answers, which acknowledge nothing new, do not
/// reset the backoff, so after `max_retries` timeouts (some six minutes at a 200 ms
/// RTO) the connection is dropped as timed out (`tcp.timeoutdrop`). Already so
/// before `net.inet.tcp.maxorphans`; this proves the bound.
#[test]
fn fin_wait_1_with_everything_acknowledged_and_a_shut_window_ends() {
    let mut p = quiet_pair(39);
    p.blackhole = true;
    assert_eq!(p.a.send(&[1u8; 1000]), 1000);
    p.a.close();
    p.a.detach(p.now);
    let (t0, fin) = (p.now, p.a.fin_seq());
    against_a_shut_window(&mut p, fin, Duration::from_secs(3600));
    assert_eq!(p.a.state(), State::Closed);
    let fins = p.log.iter().filter(|(a, s)| *a && s.fin).count();
    assert_eq!(
        fins as u32,
        1 + p.a.cfg.max_retries,
        "the FIN and its retransmissions"
    );
    assert_eq!(p.sa.timeoutdrop, 1);
    assert_eq!(p.a.error(), Some(TcpError::TimedOut));
    let took = p.now - t0;
    assert!(took <= Duration::from_secs(400), "{took:?}");
}

/// FIN_WAIT_1 of a closed connection with data still unacknowledged behind a shut
/// window (the FIN went with the data, the peer took half and shut its window): the
/// retransmission timer gives way to the persist timer, and the stall is bounded by
/// `persist_orphan_timeout` (60 s) however the peer answers the probes
/// (`tcp.persistdrop`). Already so; this proves it.
#[test]
fn fin_wait_1_with_data_behind_a_shut_window_ends_at_the_orphan_bound() {
    let mut p = quiet_pair(40);
    p.blackhole = true;
    assert_eq!(p.a.send(&[1u8; 1000]), 1000);
    p.a.close();
    p.a.detach(p.now);
    let mut out = Vec::new();
    p.a.output(p.now, &mut p.sa, &mut out);
    assert!(out.iter().any(|s| s.fin), "data and FIN out: {out:?}");
    assert_eq!(p.a.state(), State::FinWait1);
    let half = p.a.snd_una.wrapping_add(500);
    let t0 = p.now;
    against_a_shut_window(&mut p, half, Duration::from_secs(3600));
    assert_eq!(p.a.state(), State::Closed);
    assert!(p.sa.sndprobe > 0, "probed the window");
    assert_eq!(p.sa.persistdrop, 1);
    assert_eq!(p.a.error(), Some(TcpError::TimedOut));
    let took = p.now - t0;
    assert!(took <= Duration::from_secs(61), "{took:?}");
}

/// The segments a segmentation-offload segment stands for, as the device (or
/// software GSO) cuts it: `tso_segsz` bytes each, PSH and FIN on the last.
fn cut(s: &SegOut) -> Vec<SegOut> {
    let n = usize::from(s.tso_segsz);
    if n == 0 || s.data_len <= n {
        return vec![*s];
    }
    let mut v = Vec::new();
    let mut off = 0;
    while off < s.data_len {
        let len = n.min(s.data_len - off);
        let last = off + len == s.data_len;
        v.push(SegOut {
            seq: s.seq.wrapping_add(off as u32),
            data_len: len,
            tso_segsz: 0,
            psh: s.psh && last,
            fin: s.fin && last,
            cwr: s.cwr && off == 0,
            ..*s
        });
        off += len;
    }
    v
}

/// The data lengths of the segments `out` stands for, cut as by [`cut`].
fn cut_sizes(out: &[SegOut]) -> Vec<usize> {
    out.iter().flat_map(cut).map(|s| s.data_len).collect()
}

const TSO_MAX: u32 = 65_535 - 80;

/// An established pair whose A sends offload segments (`tso_max` [`TSO_MAX`]), on
/// a link of `delay` each way.
fn offload_pair(delay: Duration, seed: u64) -> Pair {
    let cfg = TcpConfig {
        tso_max: TSO_MAX,
        ..quick()
    };
    let link = Link {
        delay,
        ..Link::default()
    };
    let mut p = Pair::new(cfg, quick(), link, seed);
    p.established();
    p
}

/// RFC 5681 §3.2 step 1, RFC 3042: each of the first two duplicate ACKs lets one
/// new segment out, with segmentation offload as without (the offload's deferral,
/// Linux's tcp_tso_should_defer, swallowed the allowance: nothing went until the
/// third duplicate ACK, and without SACK, with fewer than three to come, until
/// the timeout). With SACK and offload the deferral may hold it, RACK and the
/// tail loss probe standing in (`Tcb::grant_ends_deferral`).
#[test]
fn limited_transmit_sends_a_segment_on_each_of_the_first_two_duplicate_acks() {
    for (sack, tso_max) in [(false, TSO_MAX), (false, 0), (true, 0)] {
        let cfg = TcpConfig {
            tso_max,
            sack,
            ..window_of_ten_cfg()
        };
        let mut p = quiet_pair_with(cfg, 41);
        let seg = p.a.seg_size();
        p.a.cwnd = 10 * seg;
        p.a.send(&vec![4u8; 20 * seg as usize]);
        let out = a_output(&mut p);
        let flight: Vec<SegOut> = out.iter().flat_map(cut).collect();
        assert_eq!(flight.len(), 10, "sack {sack}: {out:?}");
        let high = p.a.snd_max;
        p.now += Duration::from_millis(5);
        // The first segment is lost; the next two draw duplicate ACKs.
        for (k, s) in flight[1..3].iter().enumerate() {
            let acks = deliver(&mut p, true, *s);
            assert_eq!(acks.len(), 1);
            p.now += Duration::from_micros(100);
            let sent: Vec<SegOut> = deliver(&mut p, false, acks[0])
                .into_iter()
                .filter(|s| s.data_len > 0)
                .collect();
            let want = high.wrapping_add(k as u32 * seg);
            assert_eq!(
                sent.iter().map(|s| (s.seq, s.data_len)).collect::<Vec<_>>(),
                vec![(want, seg as usize)],
                "sack {sack}, tso {tso_max}: duplicate ACK {}",
                k + 1
            );
        }
        assert_eq!(p.sa.fastrexmit, 0);
    }
}

/// The first flight at short round trips is the initial window, ten whole
/// segments, at once: at 1 ms a runt of 121 bytes followed them (the SYN's ACK
/// counted as a byte of data, the window counted in MSS where segments carry the
/// MSS less the timestamps, and the offload segment's length was not cut to
/// whole segments); at 2 to 5 ms the offload's deferral held the last segments
/// for a round trip, waiting for ACKs that were not due (Linux defers only once
/// the first segment out is half an SRTT old).
#[test]
fn the_first_flight_is_ten_whole_segments_at_once() {
    for delay_us in [250, 500, 1000, 1500, 2500] {
        let mut p = offload_pair(Duration::from_micros(delay_us), 5);
        let seg = p.a.seg_size();
        // Both ends: ten segments of what they carry; the SYN is not data.
        assert_eq!(p.a.cwnd, 10 * seg, "{delay_us} µs");
        let b = p.b.as_ref().unwrap();
        assert_eq!(b.cwnd, 10 * b.seg_size(), "{delay_us} µs");
        p.a.send(&vec![1u8; 30 * seg as usize]);
        let out = a_output(&mut p);
        assert_eq!(
            cut_sizes(&out),
            vec![seg as usize; 10],
            "{delay_us} µs: {out:?}"
        );
    }
}

/// With a window that is not a whole number of segments, an offload segment that
/// leaves more data behind ends at a segment's edge (FreeBSD's tcp_output); the
/// window's fraction waits for the next ACK instead of going as a runt.
#[test]
fn an_offload_segment_that_leaves_data_behind_ends_with_a_whole_segment() {
    let mut p = offload_pair(Duration::from_micros(2500), 6);
    let seg = p.a.seg_size();
    p.a.cwnd = 10 * seg + 500;
    p.a.send(&vec![2u8; 30 * seg as usize]);
    let out = a_output(&mut p);
    assert_eq!(cut_sizes(&out), vec![seg as usize; 10], "{out:?}");
}

/// RFC 5681 §4.1: after more than an RTO without sending, the window restarts
/// from the initial window (the current one if smaller), `ssthresh` keeping
/// three quarters of the old one; `slowstart_after_idle` off, the old window
/// goes at once. BBR keeps its window: it restarts by its own model.
#[test]
fn an_idle_connection_restarts_from_the_initial_window() {
    for (on, cc) in [
        (true, crate::tcp::CongestionControl::Cubic),
        (false, crate::tcp::CongestionControl::Cubic),
        (true, crate::tcp::CongestionControl::NewReno),
        (true, crate::tcp::CongestionControl::Bbr),
    ] {
        let cfg = TcpConfig {
            slowstart_after_idle: on,
            cc,
            ..quick()
        };
        let mut p = quiet_pair_with(cfg, 43);
        let seg = p.a.seg_size();
        p.a.cwnd = 36 * seg;
        let before = p.a.ssthresh;
        // Idle for 2 s, an RTO of at most a few hundred ms.
        assert!(p.a.rto < Duration::from_secs(1));
        p.now += Duration::from_secs(2);
        p.a.send(&vec![5u8; 20 * seg as usize]);
        let out = a_output(&mut p);
        let n = out.iter().filter(|s| s.data_len > 0).count();
        if cc == crate::tcp::CongestionControl::Bbr {
            assert_eq!(p.a.cwnd, 36 * seg, "BBR: its own restart");
            continue;
        }
        if on {
            assert_eq!(n, 10, "{cc:?}: the restart window");
            assert_eq!(p.a.cwnd, 10 * seg);
            assert_eq!(p.a.ssthresh, before.max(27 * seg));
        } else {
            assert_eq!(n, 20, "off: the old window at once");
        }
        // Not idle for longer than the RTO: no restart.
        let mut p = quiet_pair_with(cfg, 44);
        p.a.cwnd = 36 * seg;
        p.now += p.a.rto / 2;
        p.a.send(&vec![5u8; 20 * seg as usize]);
        a_output(&mut p);
        assert_eq!(p.a.cwnd, 36 * seg, "{cc:?}");
    }
}

/// RFC 8985 §7.3: a tail loss probe sends new data when there is some and the
/// peer's window takes it, even a single segment that Nagle or the window held.
#[test]
fn a_tail_loss_probe_sends_new_data_when_there_is_some() {
    for (tso_max, short) in [(0, false), (TSO_MAX, false), (0, true), (TSO_MAX, true)] {
        let cfg = TcpConfig {
            min_rto: Duration::from_millis(200),
            tso_max,
            ..quick()
        };
        let mut p = quiet_pair_with(cfg, 45);
        p.blackhole = true;
        let seg = p.a.seg_size();
        p.a.cwnd = 10 * seg;
        // A segment beyond the window, or less than one (which Nagle holds).
        let extra = if short { 500 } else { seg };
        p.a.send(&vec![3u8; (10 * seg + extra) as usize]);
        a_output(&mut p);
        let high = p.a.snd_max;
        assert_eq!(seq::diff(high, p.a.snd_una), 10 * seg);
        let start = p.log.len();
        assert!(p.run_until(Duration::from_secs(5), |p| p.sa.tlpprobes > 0));
        let probe: Vec<(u32, usize)> = p.log[start..]
            .iter()
            .filter(|(a, s)| *a && s.data_len > 0)
            .map(|(_, s)| (s.seq, s.data_len))
            .collect();
        assert_eq!(probe, vec![(high, extra as usize)], "tso {tso_max}");
        assert_eq!(p.sa.sndrexmitpack, 0);
    }
}

/// C2 of issue 46, a blind denial of service: a segment whose sequence number lies
/// in the window but whose ACK is beyond SND.NXT, with a far-future TSval (`F. ack
/// 9999 TS val 200000`), is answered with an ACK and dropped (RFC 9293 §3.10.7.4,
/// RFC 5961 §5.2), and, dropped, does not change TS.Recent: else PAWS would then
/// discard the peer's valid data until its clock passed the forged value.
#[test]
fn an_ack_beyond_snd_nxt_is_dropped_and_leaves_ts_recent() {
    let mut p = quiet_pair(41);
    assert!(p.a.ts_enabled);
    let recent = p.a.ts_recent;
    let before = p.a.recv_available();
    let mut s = seg_to_a(&p);
    s.ack = Some(p.a.snd_max.wrapping_add(9999));
    s.ts = Some((recent.wrapping_add(200_000), 0));
    s.fin = true;
    let now = p.now;
    p.a.input(&s, now, &mut p.sa);
    assert_eq!(p.sa.rcvacktoomuch, 1);
    assert_eq!(p.a.ts_recent, recent, "a dropped segment left TS.Recent");
    assert_eq!(p.a.state(), State::Established, "its FIN was not taken");
    let out = a_output(&mut p);
    assert!(
        out.iter().any(|o| o.ack_flag && o.ack == p.a.rcv_nxt),
        "answered with an ACK: {out:?}"
    );
    // The peer's next valid segment, with its own clock, is taken.
    let payload = [7u8; 100];
    let mut s = seg_to_a(&p);
    s.ts = Some((recent.wrapping_add(10), 0));
    s.payload = (&payload).into();
    p.a.input(&s, now, &mut p.sa);
    assert_eq!(p.sa.pawsdrop, 0);
    assert_eq!(p.a.recv_available(), before + 100);
    assert_eq!(p.a.ts_recent, recent.wrapping_add(10));
}

/// The neighbours of C2: no segment that is dropped unprocessed changes TS.Recent
/// (RFC 7323 §4.3 takes the timestamp of a segment found acceptable and covering
/// Last.ACK.sent). An ACK too old for any window (RFC 5961 §5.2); an old duplicate
/// that ends below what we acknowledged, whose ACK is still processed (FreeBSD
/// keeps on "processing for RST or ACK") but whose timestamp says nothing of the
/// edge PAWS guards; a SYN-RECEIVED connection's bad ACK, answered with a reset.
#[test]
fn segments_dropped_before_processing_leave_ts_recent() {
    let mut p = quiet_pair(42);
    p.transfer(2_000_000, false, Duration::from_secs(60));
    assert!(p.run_until(Duration::from_secs(1), |p| p.flight.is_empty()));
    let recent = p.a.ts_recent;
    let now = p.now;
    let far = recent.wrapping_add(200_000);
    // Too old an ACK.
    let mut s = seg_to_a(&p);
    s.ack = Some(p.a.snd_una.wrapping_sub(p.a.max_snd_wnd).wrapping_sub(1000));
    s.ts = Some((far, 0));
    p.a.input(&s, now, &mut p.sa);
    assert_eq!(p.sa.rcvacktooold, 1);
    assert_eq!(p.a.ts_recent, recent, "too old an ACK");
    // An old duplicate, wholly below RCV.NXT.
    let payload = [5u8; 100];
    let mut s = seg_to_a(&p);
    s.seq = p.a.rcv_nxt.wrapping_sub(5000);
    s.payload = (&payload).into();
    s.ts = Some((far, 0));
    p.a.input(&s, now, &mut p.sa);
    assert_eq!(p.sa.rcvduppack, 1);
    assert_eq!(p.a.ts_recent, recent, "an old duplicate");
    // The peer goes on, and is heard.
    let mut s = seg_to_a(&p);
    s.ts = Some((recent.wrapping_add(1), 0));
    s.payload = (&payload).into();
    let before = p.a.recv_available();
    p.a.input(&s, now, &mut p.sa);
    assert_eq!((p.sa.pawsdrop, p.a.recv_available()), (0, before + 100));

    // SYN-RECEIVED: the handshake's ACK acknowledging what was never sent.
    let cfg = quick();
    let mut sa = TcpStat::default();
    let mut a = Tcb::connect(cfg, 1000, &mut sa);
    let mut out = Vec::new();
    a.output(now, &mut sa, &mut out);
    let syn = SegIn::from_out(&out[0], &[]);
    let mut b = Tcb::accept(cfg, 5000, &syn).expect("accepted");
    let mut sb = TcpStat::default();
    let mut out = Vec::new();
    b.output(now, &mut sb, &mut out);
    assert_eq!(b.state(), State::SynReceived);
    let recent = b.ts_recent;
    let bad = SegIn {
        seq: b.rcv_nxt,
        ack: Some(b.snd_max.wrapping_add(9999)),
        wnd: 1000,
        ts: Some((recent.wrapping_add(200_000), 0)),
        ..SegIn::default()
    };
    b.input(&bad, now, &mut sb);
    assert_eq!(b.state(), State::SynReceived);
    assert_eq!(b.ts_recent, recent, "SYN-RECEIVED's bad ACK");
}

/// A neighbour of C2: a segment dropped unread (out of the window, refused by PAWS,
/// with an ACK beyond SND.NXT) is not the peer's word that it lives, so it neither
/// restarts keepalive's idle time nor forgives its unanswered probes: a dead peer's
/// connection is dropped on time though a blind sender keeps injecting.
#[test]
fn segments_dropped_unread_do_not_keep_a_dead_peer_alive() {
    let cfg = TcpConfig {
        keepalive: Some(Duration::from_secs(10)),
        keepalive_interval: Duration::from_secs(2),
        keepalive_probes: 3,
        ..quick()
    };
    let mut p = Pair::new(cfg, quick(), Link::default(), 43);
    p.established();
    p.transfer(1000, false, Duration::from_secs(5));
    assert!(p.run_until(Duration::from_secs(1), |p| p.flight.is_empty()
        && p.a.snd_una == p.a.snd_max));
    p.blackhole = true;
    let t0 = p.now;
    let mut forged = 0u32;
    assert!(p.run_until(Duration::from_secs(120), |p| {
        if p.now - t0 >= Duration::from_secs(u64::from(forged)) && p.a.state() != State::Closed {
            // Every second one of three forgeries.
            let mut s = seg_to_a(p);
            match forged % 3 {
                0 => s.seq = s.seq.wrapping_add(10_000_000),
                1 => s.ack = Some(p.a.snd_max.wrapping_add(9999)),
                _ => s.ts = Some((p.a.ts_recent.wrapping_sub(1000), 0)),
            }
            let now = p.now;
            p.a.input(&s, now, &mut p.sa);
            forged += 1;
        }
        p.a.state() == State::Closed
    }));
    assert_eq!(p.a.error(), Some(TcpError::TimedOut));
    assert_eq!(p.sa.keepdrops, 1);
    assert!(
        p.now - t0 <= Duration::from_secs(10 + 3 * 2 + 2),
        "{:?}",
        p.now - t0
    );
}

/// C1 of issue 46, a permanent stall: the peer's window is shut; the application
/// writes 1,000 bytes, less than a segment; the persist timer sends the probe (one
/// byte); the peer, as a Linux receiver does, drops the byte that arrived at its
/// shut window and later reopens with an ACK that does not cover it (`ack 1 win
/// 2000`). Sending must resume at once, the probe byte with the rest (FreeBSD's
/// persist probe leaves SND.NXT at SND.UNA), and what is then outstanding must be
/// covered by the retransmission timer (RFC 6298 §5.1; RFC 9293 §3.8.6.1). Before,
/// SND.NXT had passed the probe byte, Nagle held the 999 bytes behind it, and no
/// timer covered it: nothing was sent for 600 s.
#[test]
fn a_window_reopened_without_acknowledging_the_probe_resumes_sending() {
    for nodelay in [false, true] {
        let cfg = TcpConfig {
            window_scaling: false,
            nodelay,
            ..quick()
        };
        let mut p = quiet_pair_with(cfg, 44);
        p.blackhole = true;
        let una = p.a.snd_una;
        // The peer shuts its window.
        let shut = SegIn {
            wnd: 0,
            ..seg_to_a(&p)
        };
        let now = p.now;
        p.a.input(&shut, now, &mut p.sa);
        assert_eq!(p.a.snd_wnd, 0);
        assert_eq!(p.a.send(&[3u8; 1000]), 1000);
        assert!(a_output(&mut p).is_empty(), "nothing fits a shut window");
        // The persist timer's probe: one byte at SND.UNA.
        let at = p.a.poll_at().expect("the persist timer runs");
        p.now = at;
        let out = a_output(&mut p);
        assert!(
            out.iter().any(|s| s.seq == una && s.data_len == 1),
            "the probe: {out:?}"
        );
        // The peer drops the byte and says its window is still shut; later it opens.
        p.now += Duration::from_millis(5);
        let now = p.now;
        p.a.input(&shut, now, &mut p.sa);
        assert!(a_output(&mut p).iter().all(|s| s.data_len == 0));
        p.now += Duration::from_millis(100);
        let open = SegIn {
            ack: Some(una),
            wnd: 2000,
            ..seg_to_a(&p)
        };
        let now = p.now;
        p.a.input(&open, now, &mut p.sa);
        assert!(p.a.wants_output(), "the window opened with data queued");
        let out = a_output(&mut p);
        let sent: usize = out.iter().map(|s| s.data_len).sum();
        assert!(
            out.first().is_some_and(|s| s.seq == una) && sent == 1000,
            "nodelay {nodelay}: the whole 1,000 bytes at once, from SND.UNA: {out:?}"
        );
        assert!(
            p.a.rtx_deadline.is_some(),
            "the retransmission timer covers them"
        );
        // Acknowledged, all is done within the RTO bound.
        let done = SegIn {
            ack: Some(una.wrapping_add(1000)),
            wnd: 2000,
            ..seg_to_a(&p)
        };
        p.now += Duration::from_millis(5);
        let now = p.now;
        p.a.input(&done, now, &mut p.sa);
        assert_eq!(
            (p.a.snd_una, p.a.snd_max),
            (una.wrapping_add(1000), una.wrapping_add(1000))
        );
        assert!(p.a.rtx_deadline.is_none() && p.a.persist_deadline.is_none());
    }
}

/// Found by the randomized pair (`prop`): without SACK, a partial ACK during fast
/// recovery that leaves less than a segment outstanding, with more data queued,
/// had NewReno's retransmission of the "next hole" run a whole segment from
/// SND.UNA, past SND.MAX, without moving SND.MAX: new data sent as a
/// retransmission, whose ACK was then refused as acknowledging what was never
/// sent (`rcvacktoomuch`), for ever. A retransmission ends at SND.MAX.
#[test]
fn a_newreno_partial_ack_retransmits_only_what_was_sent() {
    let cfg = TcpConfig {
        window_scaling: false,
        sack: false,
        nodelay: true,
        ..quick()
    };
    let mut p = quiet_pair_with(cfg, 45);
    p.blackhole = true;
    let una = p.a.snd_una;
    let peer = |p: &Pair, ack: u32| SegIn {
        ack: Some(ack),
        wnd: 3000,
        ..seg_to_a(p)
    };
    let now = p.now;
    let s = peer(&p, una);
    p.a.input(&s, now, &mut p.sa);
    assert_eq!(p.a.send(&[1u8; 10_000]), 10_000);
    a_output(&mut p);
    let out_end = p.a.snd_max;
    assert!(seq::lt(una.wrapping_add(1448), out_end), "segments out");
    for _ in 0..3 {
        p.a.input(&s, now, &mut p.sa);
        a_output(&mut p);
    }
    assert!(p.a.recover.is_some(), "fast recovery");
    // All but the last byte acknowledged, the window no further than it.
    let s = SegIn {
        wnd: 1,
        ..peer(&p, out_end.wrapping_sub(1))
    };
    p.a.input(&s, now, &mut p.sa);
    let out = a_output(&mut p);
    for seg in &out {
        let end = seg.seq.wrapping_add(seg.data_len as u32);
        assert!(
            seq::le(end, p.a.snd_max),
            "sent up to {end}, beyond SND.MAX {}: {out:?}",
            p.a.snd_max
        );
    }
    assert!(
        out.iter().any(|s| s.seq == out_end.wrapping_sub(1)),
        "{out:?}"
    );
    // The peer acknowledges what it got: taken.
    let end = out
        .iter()
        .map(|s| s.seq.wrapping_add(s.data_len as u32))
        .max()
        .unwrap();
    let s = peer(&p, end);
    p.a.input(&s, now, &mut p.sa);
    assert_eq!((p.a.snd_una, p.sa.rcvacktoomuch), (end, 0));
}

/// RFC 9293 §3.10.7.4 and RFC 5961 §5.2: a segment whose ACK is beyond anything
/// sent is answered with an ACK and dropped. A blind sender can draw that ACK at
/// will, so it goes as a challenge ACK does: at most `ack_war_cnt` (5) in each
/// second from the connection, none that the node-wide limit withdraws, each
/// counted. Before, 1,000 such segments in a second drew 1,000 ACKs.
#[test]
fn acks_beyond_snd_max_draw_at_most_five_acks_a_second() {
    let mut p = quiet_pair(12);
    let mut s = seg_to_a(&p);
    s.ack = Some(p.a.snd_max.wrapping_add(100_000));
    let t0 = p.now;
    let mut acks = 0;
    let mut out = Vec::new();
    for i in 0..1000u64 {
        let now = t0 + Duration::from_micros(999 * i);
        p.a.input(&s, now, &mut p.sa);
        p.a.take_challenge(&mut p.sa, || true);
        out.clear();
        p.a.output(now, &mut p.sa, &mut out);
        acks += out.iter().filter(|o| o.ack_flag && !o.rst).count();
    }
    assert_eq!(p.a.state(), State::Established);
    assert_eq!(p.sa.rcvacktoomuch, 1000);
    assert_eq!(acks, 5);
    assert_eq!((p.sa.challengeack, p.sa.challengeack_ratelim), (5, 995));
    // The next second, one the connection would send, withdrawn by the node.
    let now = t0 + Duration::from_secs(2);
    p.a.input(&s, now, &mut p.sa);
    p.a.take_challenge(&mut p.sa, || false);
    out.clear();
    p.a.output(now, &mut p.sa, &mut out);
    assert!(out.is_empty(), "{out:?}");
    assert_eq!((p.sa.challengeack, p.sa.challengeack_ratelim), (5, 996));
}

/// TIME_WAIT answers a segment that is not a pure duplicate ACK with an ACK, which
/// anybody can draw at will: the answer goes within the node's challenge ACK
/// limit (as the remnant's does in the stack's TCP layer), and one the limit
/// withdraws is not sent, counted in `tcp.challengeack_ratelim` (not as a
/// challenge ACK). Before, the control block answered regardless.
#[test]
fn time_wait_answers_within_the_node_limit() {
    let mut p = closed_to_time_wait(45);
    let now = p.now;
    a_output(&mut p);
    let s = SegIn {
        seq: p.a.rcv_nxt.wrapping_add(50_000),
        ack: Some(p.a.snd_max),
        ts: p.a.ts_enabled.then_some((p.a.ts_recent, 0)),
        ..SegIn::default()
    };
    p.a.input(&s, now, &mut p.sa);
    p.a.take_challenge(&mut p.sa, || true);
    let out = a_output(&mut p);
    assert_eq!(out.len(), 1, "answered: {out:?}");
    assert!(out[0].ack_flag && out[0].ack == p.a.rcv_nxt);
    p.a.input(&s, now, &mut p.sa);
    p.a.take_challenge(&mut p.sa, || false);
    let out = a_output(&mut p);
    assert!(out.is_empty(), "withdrawn: {out:?}");
    assert_eq!((p.sa.challengeack, p.sa.challengeack_ratelim), (0, 1));
    assert_eq!(p.a.state(), State::TimeWait);
}

/// RFC 7323 §5.5: after more than 24 days idle the peer's timestamp clock may have
/// moved more than 2^31 ticks past TS.Recent, and its segments look older than
/// it: PAWS would drop every one and freeze the connection. After 25 days of
/// silence a segment failing PAWS is taken, and its timestamp becomes TS.Recent
/// (the next segment passes PAWS against it); after 23 days it is still dropped.
/// Before, the segment was dropped after any idle time.
#[test]
fn paws_takes_an_old_looking_timestamp_after_24_days_idle() {
    for (days, taken) in [(23u64, false), (25, true)] {
        let mut p = quiet_pair(46);
        let now = p.now + Duration::from_secs(days * 86_400);
        let wrapped = p.a.ts_recent.wrapping_add(0x8000_0000 + 1000);
        let mut s = seg_to_a(&p);
        s.ts = Some((wrapped, 0));
        s.payload = b"after a long sleep".into();
        let before = p.a.recv_available();
        p.a.input(&s, now, &mut p.sa);
        let case = format!("{days} days");
        assert_eq!(p.a.recv_available() > before, taken, "{case}");
        assert_eq!(p.a.ts_recent == wrapped, taken, "{case}");
        assert_eq!(p.sa.pawsdrop, u64::from(!taken), "{case}");
        if taken {
            let mut next = seg_to_a(&p);
            next.ts = Some((wrapped.wrapping_add(5), 0));
            next.payload = b"and on".into();
            let before = p.a.recv_available();
            p.a.input(&next, now + Duration::from_millis(5), &mut p.sa);
            assert!(p.a.recv_available() > before);
            assert_eq!(p.sa.pawsdrop, 0);
        }
    }
}

/// RFC 8985 §7.2 with `tlp_in_recovery` off: no tail loss probe is scheduled in
/// recovery (RACK's reordering timer and the retransmission timer do its work
/// there). The first of twenty segments is lost: while A recovers, the SACKs
/// that come in arm no probe and none goes out. Before, every ACK that SACKed new
/// data in recovery armed one, whatever the setting.
#[test]
fn no_tail_loss_probe_is_armed_in_recovery() {
    let cfg = TcpConfig {
        tlp_in_recovery: false,
        ..quick()
    };
    let mut p = quiet_pair_with(cfg, 47);
    let mss = p.a.seg_size() as usize;
    p.a.send(&vec![5u8; 20 * mss]);
    p.flush();
    let first = p
        .flight
        .iter()
        .position(|f| f.2 && f.3.seg.data_len > 0)
        .expect("a data segment in flight");
    p.flight.remove(first);
    let (mut recovered, mut armed) = (false, 0);
    let probes = p.sa.tlpprobes;
    let done = p.run_until(Duration::from_secs(5), |p| {
        if p.a.recover.is_some() || p.a.rto_recover.is_some() {
            recovered = true;
            armed += usize::from(p.a.tlp_deadline.is_some());
        }
        recovered && p.a.snd_una == p.a.snd_max
    });
    assert!(done && recovered, "recovery ran and ended");
    assert_eq!(armed, 0, "steps in recovery with a probe armed");
    assert_eq!(p.sa.tlpprobes, probes);
    assert_eq!(p.sa.rexmttimeo, 0);
}
